//! Invitations into teams (the organization plugin's `teamId` on invite-member, with `teams: {enabled: true}`):
//! each refusal, the answer's `teamId` on every call that shows an invitation, acceptance putting the invitee in
//! each team (and making the only one the session's active team), remove-team taking its id out of pending
//! invitations, and acceptance being one commit (a store failure leaves all of it or none; a `kill -9` right after
//! the answer loses none of it). On two nodes when the suite runs through `tests/cluster/run.sh`.

use serde_json::{Value, json};

use super::harness::*;
use super::org_plugin::{get, ok, post};
use super::teams::{active_team, query, world};

/// invite-member of `email` as a member, by `cookie`'s user, into their active organization (`teamId` as given,
/// omitted when `Value::Null`).
async fn invite(s: &TestServer, cookie: &str, email: &str, team: Value) -> Resp {
    let mut body = json!({"email": email, "role": "member"});
    if !team.is_null() {
        body["teamId"] = team;
    }
    post(s, "invite-member", cookie, &body).await
}

/// The users in team `team`, as `cookie`'s user (a member of it) lists them.
async fn team_users(s: &TestServer, cookie: &str, team: &str) -> Vec<String> {
    let members = ok(&get(s, &query("list-team-members", &[("teamId", team)]), cookie).await);
    members.as_array().unwrap().iter().map(|m| str_of(&m["userId"]).to_owned()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invitation_names_teams_of_its_organization_and_each_refusal_is_the_plugins() {
    let w = world(|c| c.organizations.maximum_members_per_team = Some(1)).await;
    let (s, ann) = (&w.s, &w.ann);
    let ward = str_of(&w.team("Ward 4").await["id"]).to_owned();
    let night = str_of(&w.team("Nights").await["id"]).to_owned();
    let default = ok(&get(s, "list-teams", &ann.cookie).await)[0]["id"].as_str().unwrap().to_owned();
    // Another organization, with a team of its own.
    let zed = s.new_user("zed").await;
    ok(&post(s, "create", &zed.cookie, &json!({"name": "Elsewhere", "slug": "elsewhere"})).await);
    let theirs = ok(&get(s, "list-teams", &zed.cookie).await)[0]["id"].as_str().unwrap().to_owned();

    // One id, or several: answered as the plugin stores them, joined by commas; none is `null`.
    let one = ok(&invite(s, &ann.cookie, "bob@example.com", json!(ward)).await);
    assert_eq!(one["teamId"], ward.as_str());
    let two = ok(&invite(s, &ann.cookie, "cy@example.com", json!([ward, night, ward])).await);
    assert_eq!(two["teamId"], format!("{ward},{night}"), "in order, each once");
    let none = ok(&invite(s, &ann.cookie, "dee@example.com", Value::Null).await);
    assert!(none.get("teamId").is_some_and(Value::is_null), "{none}");
    let empty = ok(&invite(s, &ann.cookie, "eve@example.com", json!([])).await);
    assert!(empty["teamId"].is_null(), "an empty list names no team: {empty}");

    // A comma cannot be stored; an id that is no team of this organization (of another one, of none, no id at all)
    // is not found; a full team (the limit is 1, and the default team has its creator) is refused; a team
    // named in another shape is malformed. None of them leaves an invitation behind.
    let refusals = [
        (json!([ward, format!("{night},{ward}")]), 400, "INVALID_TEAM_ID"),
        (json!(theirs), 400, "TEAM_NOT_FOUND"),
        (json!([ward, "00000000-0000-7000-8000-000000000000"]), 400, "TEAM_NOT_FOUND"),
        (json!("not-a-uuid"), 400, "TEAM_NOT_FOUND"),
        (json!(default), 403, "TEAM_MEMBER_LIMIT_REACHED"),
        (json!(7), 400, "VALIDATION_ERROR"),
        (json!([ward, 7]), 400, "VALIDATION_ERROR"),
    ];
    for (team, status, code) in refusals {
        assert_auth_error(&invite(s, &ann.cookie, "fay@example.com", team).await, status, code);
    }
    let listed = ok(&get(s, &query("list-invitations", &[("organizationId", &w.org)]), &ann.cookie).await);
    let listed = listed.as_array().unwrap();
    assert!(listed.iter().all(|i| i["email"] != "fay@example.com"), "a refused invitation was made: {listed:?}");
    // Every call that shows an invitation shows its teams.
    let of = |email: &str| listed.iter().find(|i| i["email"] == email).unwrap()["teamId"].clone();
    assert_eq!((of("bob@example.com"), of("cy@example.com")), (json!(ward), json!(format!("{ward},{night}"))));
    assert!(of("dee@example.com").is_null());
    let full = ok(&get(s, "get-full-organization", &ann.cookie).await);
    let bob_in_full = full["invitations"].as_array().unwrap().iter().find(|i| i["email"] == "bob@example.com");
    assert_eq!(bob_in_full.unwrap()["teamId"], ward.as_str());
    let bob = s.new_user("bob").await;
    let shown = ok(&get(s, &query("get-invitation", &[("id", str_of(&one["id"]))]), &bob.cookie).await);
    assert_eq!(shown["teamId"], ward.as_str());
    s.mark_verified(&s.admin_session().await, &bob.id).await;
    let mine = ok(&get(s, "list-user-invitations", &bob.cookie).await);
    assert_eq!(mine[0]["teamId"], ward.as_str());

    // A resend keeps the invitation (and its teams) as it was, as the plugin's does.
    let resent = ok(&post(
        s,
        "invite-member",
        &ann.cookie,
        &json!({"email": "bob@example.com", "role": "member", "resend": true, "teamId": night}),
    )
    .await);
    assert_eq!((resent["id"].clone(), resent["teamId"].clone()), (one["id"].clone(), json!(ward)));

    // Accepting re-checks each team: Bob takes the ward's only place, so Cy's acceptance is refused and her
    // invitation stays pending, with nothing of it applied.
    ok(&post(s, "accept-invitation", &bob.cookie, &json!({"invitationId": one["id"]})).await);
    let cy = s.new_user("cy").await;
    let r = post(s, "accept-invitation", &cy.cookie, &json!({"invitationId": two["id"]})).await;
    assert_auth_error(&r, 403, "TEAM_MEMBER_LIMIT_REACHED");
    assert!(ok(&get(s, "list", &cy.cookie).await).as_array().unwrap().is_empty(), "not a member");
    let still = ok(&get(s, &query("get-invitation", &[("id", str_of(&two["id"]))]), &cy.cookie).await);
    assert_eq!(
        (still["status"].clone(), still["teamId"].clone()),
        (json!("pending"), json!(format!("{ward},{night}")))
    );

    // The invitations' teams are in the audit trail.
    let audit = ok(&s.get("/api/admin/audit?limit=100").cookie(&s.admin_session().await).send().await);
    let entries = audit["entries"].as_array().unwrap();
    let sent = entries.iter().find(|e| e["action"] == "invitation.sent" && str_of(&e["detail"]).contains("cy@"));
    assert!(str_of(&sent.unwrap()["detail"]).contains(&format!("teams {ward}, {night}")), "{entries:?}");
    let accepted = entries.iter().find(|e| e["action"] == "invitation.accepted").unwrap();
    assert!(str_of(&accepted["detail"]).contains(&format!("teams {ward}")), "{accepted}");
    assert!(entries.iter().any(|e| e["action"] == "team.member_added" && str_of(&e["detail"]).contains(&bob.id)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accepting_puts_the_invitee_in_each_team_and_makes_the_only_one_active() {
    let w = world(|_| ()).await;
    let (s, ann) = (&w.s, &w.ann);
    let ward = str_of(&w.team("Ward 4").await["id"]).to_owned();
    let night = str_of(&w.team("Nights").await["id"]).to_owned();
    // Ann, the owner, in the teams too, so she can list their members.
    for team in [&ward, &night] {
        ok(&post(s, "add-team-member", &ann.cookie, &json!({"teamId": team, "userId": ann.id})).await);
    }

    // One team: Bob is in it, and his session works in the organization and in that team.
    let bob = s.new_user("bob").await;
    let to_bob = ok(&invite(s, &ann.cookie, &bob.email, json!(ward)).await);
    let joined = ok(&post(s, "accept-invitation", &bob.cookie, &json!({"invitationId": to_bob["id"]})).await);
    assert_eq!(
        (joined["invitation"]["status"].clone(), joined["invitation"]["teamId"].clone()),
        (json!("accepted"), json!(ward))
    );
    assert_eq!(joined["member"]["userId"], bob.id.as_str());
    assert!(team_users(s, &ann.cookie, &ward).await.contains(&bob.id));
    assert_eq!(s.session(&bob.cookie).await["session"]["activeOrganizationId"], w.org.as_str());
    assert_eq!(active_team(s, &bob.cookie).await.as_deref(), Some(ward.as_str()));
    let teams = ok(&get(s, "list-user-teams", &bob.cookie).await);
    assert_eq!(teams.as_array().unwrap().len(), 1, "{teams}");

    // Two teams: Cy is in both, and her session works in the organization but in no team (the plugin sets the
    // active team only for exactly one).
    let cy = s.new_user("cy").await;
    let to_cy = ok(&invite(s, &ann.cookie, &cy.email, json!([ward, night])).await);
    ok(&post(s, "accept-invitation", &cy.cookie, &json!({"invitationId": to_cy["id"]})).await);
    for team in [&ward, &night] {
        assert!(team_users(s, &ann.cookie, team).await.contains(&cy.id), "cy in {team}");
    }
    assert_eq!(s.session(&cy.cookie).await["session"]["activeOrganizationId"], w.org.as_str());
    assert_eq!(active_team(s, &cy.cookie).await, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removing_a_team_takes_it_out_of_the_pending_invitations() {
    let w = world(|_| ()).await;
    let (s, ann) = (&w.s, &w.ann);
    let ward = str_of(&w.team("Ward 4").await["id"]).to_owned();
    let night = str_of(&w.team("Nights").await["id"]).to_owned();
    let to_bob = ok(&invite(s, &ann.cookie, "bob@example.com", json!([night, ward])).await);
    let to_cy = ok(&invite(s, &ann.cookie, "cy@example.com", json!(night)).await);
    let teams_of =
        |all: &Value, id: &Value| all.as_array().unwrap().iter().find(|i| i["id"] == *id).unwrap()["teamId"].clone();

    ok(&post(s, "remove-team", &ann.cookie, &json!({"teamId": night})).await);
    let all = ok(&get(s, &query("list-invitations", &[("organizationId", &w.org)]), &ann.cookie).await);
    assert_eq!(teams_of(&all, &to_bob["id"]), json!(ward), "the other team is kept");
    assert!(teams_of(&all, &to_cy["id"]).is_null(), "no team left: null");

    // Bob joins the team left; Cy joins the organization only.
    let bob = s.new_user("bob").await;
    ok(&post(s, "accept-invitation", &bob.cookie, &json!({"invitationId": to_bob["id"]})).await);
    assert_eq!(active_team(s, &bob.cookie).await.as_deref(), Some(ward.as_str()));
    let cy = s.new_user("cy").await;
    let joined = ok(&post(s, "accept-invitation", &cy.cookie, &json!({"invitationId": to_cy["id"]})).await);
    assert!(joined["invitation"]["teamId"].is_null());
    assert!(ok(&get(s, "list-user-teams", &cy.cookie).await).as_array().unwrap().is_empty());
    assert_eq!(active_team(s, &cy.cookie).await, None);
}

/// Without teams, an invitation naming one is refused as before (the plugin ignores the field then; a caller
/// relying on it would lose it silently) and every invitation's `teamId` is `null`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_teams_an_invitation_names_none() {
    let s = TestServer::start().await;
    let ann = s.new_user("ann").await;
    ok(&post(&s, "create", &ann.cookie, &json!({"name": "St Mary", "slug": "st-mary"})).await);
    let r = invite(&s, &ann.cookie, "bob@example.com", json!("00000000-0000-7000-8000-000000000000")).await;
    assert_eq!((r.status, r.json()["message"].clone()), (400, json!("Teams are not enabled")));
    let sent = ok(&invite(&s, &ann.cookie, "bob@example.com", Value::Null).await);
    assert!(sent.get("teamId").is_some_and(Value::is_null), "{sent}");
}

/// Acceptance into a team is one commit with the membership, the invitation's acceptance and the session's
/// active organization and team: a store failure at it finds all of them or none, and the invitation can be
/// accepted again after a failure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_failure_when_accepting_into_teams_leaves_all_of_it_or_none() {
    let dir = tempfile::tempdir().unwrap();
    let faults = service_auth::store::FaultSwitch::default();
    let mut config = test_config(dir.path());
    config.organizations.teams = true;
    let s = TestServer::start_with_faults(config, faults.clone()).await;
    let ann = s.new_user("ann").await;
    ok(&post(&s, "create", &ann.cookie, &json!({"name": "Faulty", "slug": "faulty"})).await);
    let ward = ok(&post(&s, "create-team", &ann.cookie, &json!({"name": "Ward"})).await);
    let ward = str_of(&ward["id"]).to_owned();
    ok(&post(&s, "add-team-member", &ann.cookie, &json!({"teamId": ward, "userId": ann.id})).await);
    // The first commit of the acceptance fails; then the second one (the first one spared).
    for spared in [0, 1] {
        let bob = s.new_user(&format!("fault-joiner-{spared}")).await;
        let invited = ok(&invite(&s, &ann.cookie, &bob.email, json!(ward)).await);
        faults.fail_commits_after(spared, 1);
        let r = post(&s, "accept-invitation", &bob.cookie, &json!({"invitationId": invited["id"]})).await;
        faults.fail_next_commits(0);
        let joined = (true, true, Some(ward.clone()));
        match r.status {
            200 => assert_eq!(joined_state(&s, &ann, &bob, &ward).await, joined, "spared {spared}"),
            503 => {
                let after = joined_state(&s, &ann, &bob, &ward).await;
                assert_eq!(after, (false, false, None), "spared {spared}: half an acceptance");
                ok(&post(&s, "accept-invitation", &bob.cookie, &json!({"invitationId": invited["id"]})).await);
                assert_eq!(joined_state(&s, &ann, &bob, &ward).await, joined, "spared {spared}: accepted again");
            }
            other => panic!("spared {spared}: {other} {}", r.text),
        }
    }
    s.stop().await;
}

/// Whether `bob` is a member of an organization, in `ward` (as `ann`, in it, lists it), and the team his session
/// works in.
async fn joined_state(s: &TestServer, ann: &TestUser, bob: &TestUser, ward: &str) -> (bool, bool, Option<String>) {
    let member = !ok(&get(s, "list", &bob.cookie).await).as_array().unwrap().is_empty();
    let in_team = team_users(s, &ann.cookie, ward).await.contains(&bob.id);
    (member, in_team, active_team(s, &bob.cookie).await)
}

/// The acceptance is durable before its answer: the real binary killed (`kill -9`) right after it comes back with
/// the membership, the place in the team and the invitation accepted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acceptance_into_a_team_survives_a_kill_9_right_after_the_answer() {
    let root = tempfile::tempdir().unwrap();
    std::fs::write(
        root.path().join("config.toml"),
        "base_url = \"http://auth.test\"\n[organizations]\nteams = true\n[rate_limit]\nsign_in_per_address = 0\n\
         sign_up_per_address = 0\n",
    )
    .unwrap();
    let s = ChildServer::spawn(root.path(), BOOTSTRAP_ENV).await;
    let ann = s.new_user("ann").await;
    let call = |path: &str| format!("/api/auth/organization/{path}");
    let r = s.post(&call("create")).cookie(&ann.cookie).json(&json!({"name": "Crash", "slug": "crash"})).send().await;
    let org = str_of(&ok(&r)["id"]).to_owned();
    let r = s.post(&call("create-team")).cookie(&ann.cookie).json(&json!({"name": "Ward"})).send().await;
    let ward = str_of(&ok(&r)["id"]).to_owned();
    let bob = s.new_user("bob").await;
    let body = json!({"email": bob.email, "role": "member", "teamId": ward});
    let invited = ok(&s.post(&call("invite-member")).cookie(&ann.cookie).json(&body).send().await);
    let body = json!({"invitationId": invited["id"]});
    ok(&s.post(&call("accept-invitation")).cookie(&bob.cookie).json(&body).send().await);
    s.kill9();

    let s = ChildServer::spawn(root.path(), BOOTSTRAP_ENV).await;
    let path = format!("{}?teamId={ward}", call("list-team-members"));
    let members = ok(&s.get(&path).cookie(&bob.cookie).send().await);
    assert!(members.as_array().unwrap().iter().any(|m| m["userId"] == bob.id.as_str()), "{members}");
    let listed = ok(&s.get(&call("list")).cookie(&bob.cookie).send().await);
    assert_eq!(listed[0]["id"], org.as_str());
    let session = ok(&s.get("/api/auth/get-session").cookie(&bob.cookie).send().await);
    assert_eq!(session["session"]["activeTeamId"], ward.as_str());
    let path = format!("{}?organizationId={org}", call("list-invitations"));
    let invitations = ok(&s.get(&path).cookie(&ann.cookie).send().await);
    assert_eq!(invitations[0]["status"], "accepted");
    assert!(s.terminate().success());
}
