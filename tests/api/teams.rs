//! The organization plugin's teams (`teams: {enabled: true}`, `[organizations] teams = true`): each call, each
//! refusal, who may do what (the plugin's default `team` and `member` statements), the default team, the audit
//! trail, and teams after a restart. On two nodes when the suite runs through `tests/cluster/run.sh`.

use serde_json::{Value, json};

use service_auth::config::Config;

use super::harness::*;
use super::org_plugin::{Seen, get, join, ok, post};

/// A server with teams on (and mail to a directory, for the invitations that bring members in).
async fn with_teams(dir: &std::path::Path, mail: &std::path::Path, adjust: impl FnOnce(&mut Config)) -> TestServer {
    let mut config = test_config(dir);
    config.organizations.teams = true;
    config.email.directory = Some(mail.to_owned());
    adjust(&mut config);
    TestServer::start_with(config).await
}

pub(super) struct World {
    pub(super) s: TestServer,
    pub(super) mail: tempfile::TempDir,
    pub(super) _data: tempfile::TempDir,
    pub(super) seen: Seen,
    /// The owner, and the organization's id.
    pub(super) ann: TestUser,
    pub(super) org: String,
}

/// Ann's organization, with teams on.
pub(super) async fn world(adjust: impl FnOnce(&mut Config)) -> World {
    let (data, mail) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let s = with_teams(data.path(), mail.path(), adjust).await;
    let ann = s.new_user("ann").await;
    let org = ok(&post(&s, "create", &ann.cookie, &json!({"name": "St Mary", "slug": "st-mary"})).await);
    let org = str_of(&org["id"]).to_owned();
    World { s, mail, _data: data, seen: Seen::new(), ann, org }
}

impl World {
    pub(super) async fn member(&mut self, tag: &str, role: &str) -> TestUser {
        let user = self.s.new_user(tag).await;
        join(&self.s, self.mail.path(), &mut self.seen, &self.ann.cookie, &self.org, &user, role).await;
        user
    }

    pub(super) async fn team(&self, name: &str) -> Value {
        ok(&post(&self.s, "create-team", &self.ann.cookie, &json!({"name": name})).await)
    }
}

pub(super) fn query(call: &str, params: &[(&str, &str)]) -> String {
    let q: Vec<String> = params.iter().map(|(k, v)| format!("{k}={v}")).collect();
    if q.is_empty() { call.to_owned() } else { format!("{call}?{}", q.join("&")) }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_team_calls_answer_teams_are_not_enabled_while_off() {
    let s = TestServer::start().await;
    let ann = s.new_user("ann").await;
    ok(&post(&s, "create", &ann.cookie, &json!({"name": "St Mary", "slug": "st-mary"})).await);
    let r = post(&s, "create-team", &ann.cookie, &json!({"name": "Ward 4"})).await;
    assert_eq!((r.status, r.json()["message"].clone()), (400, json!("Teams are not enabled")));
    let r = get(&s, "list-teams", &ann.cookie).await;
    assert_eq!((r.status, r.json()["message"].clone()), (400, json!("Teams are not enabled")));
    let r = post(&s, "set-active-team", &ann.cookie, &json!({"teamId": null})).await;
    assert_eq!((r.status, r.json()["message"].clone()), (400, json!("Teams are not enabled")));
    assert!(s.session(&ann.cookie).await["session"].get("activeTeamId").is_none(), "no team field without teams");
    let full = ok(&get(&s, "get-full-organization", &ann.cookie).await);
    assert!(full.get("teams").is_none(), "no teams in the organization without them: {full}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_team_is_created_listed_renamed_and_removed_and_its_organization_gets_a_default_team() {
    let w = world(|_| ()).await;
    let (s, ann) = (&w.s, &w.ann);

    // The plugin's defaultTeam: named as the organization, its creator in it, `updatedAt` null.
    let teams = ok(&get(s, "list-teams", &ann.cookie).await);
    assert_eq!(teams.as_array().unwrap().len(), 1, "{teams}");
    let default = &teams[0];
    assert_keys(default, &["id", "name", "organizationId", "createdAt", "updatedAt"]);
    assert_eq!((default["name"].clone(), default["organizationId"].clone()), (json!("St Mary"), json!(w.org)));
    assert!(default["updatedAt"].is_null());
    let default_id = str_of(&default["id"]).to_owned();
    let members = ok(&get(s, &query("list-team-members", &[("teamId", &default_id)]), &ann.cookie).await);
    assert_eq!(members[0]["userId"], ann.id.as_str(), "the creator is in the default team");
    let full = ok(&get(s, "get-full-organization", &ann.cookie).await);
    assert_eq!(full["teams"][0]["id"], default_id.as_str());

    let ward = w.team("Ward 4").await;
    assert_keys(&ward, &["id", "name", "organizationId", "createdAt", "updatedAt"]);
    assert_eq!((ward["name"].clone(), ward["organizationId"].clone()), (json!("Ward 4"), json!(w.org)));
    assert_eq!(ward["updatedAt"], ward["createdAt"]);
    let ward_id = str_of(&ward["id"]).to_owned();
    // By organization id too, and listed in creation order.
    let named = json!({"name": "Ward 5", "organizationId": w.org});
    let ward5 = ok(&post(s, "create-team", &ann.cookie, &named).await);
    let listed = ok(&get(s, &query("list-teams", &[("organizationId", &w.org)]), &ann.cookie).await);
    let names: Vec<&str> = listed.as_array().unwrap().iter().map(|t| str_of(&t["name"])).collect();
    assert_eq!(names, ["St Mary", "Ward 4", "Ward 5"]);

    let renamed =
        ok(&post(s, "update-team", &ann.cookie, &json!({"teamId": ward_id, "data": {"name": "Ward 4B"}})).await);
    assert_eq!((renamed["id"].clone(), renamed["name"].clone()), (json!(ward_id), json!("Ward 4B")));
    let touched = ok(&post(s, "update-team", &ann.cookie, &json!({"teamId": default_id, "data": {}})).await);
    assert!(touched["updatedAt"].is_string(), "data: {{}} only moves updatedAt: {touched}");
    let r = post(s, "update-team", &ann.cookie, &json!({"teamId": ward_id, "data": {"name": ""}})).await;
    assert_auth_error(&r, 400, "VALIDATION_ERROR");
    let r = post(s, "update-team", &ann.cookie, &json!({"teamId": ward_id, "data": {"colour": "red"}})).await;
    assert_eq!(r.status, 400, "an unknown field is refused: {}", r.text);
    let r = post(s, "create-team", &ann.cookie, &json!({})).await;
    assert_auth_error(&r, 400, "VALIDATION_ERROR");
    let ghost = "00000000-0000-7000-8000-000000000000";
    for id in [ghost, "not-a-uuid"] {
        let r = post(s, "update-team", &ann.cookie, &json!({"teamId": id, "data": {"name": "X"}})).await;
        assert_auth_error(&r, 400, "TEAM_NOT_FOUND");
    }
    // Named under an organization the caller is not in: refused as the plugin refuses a non-member.
    let elsewhere = json!({"teamId": ward5["id"], "data": {"name": "X", "organizationId": ghost}});
    assert_auth_error(
        &post(s, "update-team", &ann.cookie, &elsewhere).await,
        403,
        "YOU_ARE_NOT_ALLOWED_TO_UPDATE_THIS_TEAM",
    );
    assert_auth_error(
        &post(s, "update-team", &ann.cookie, &json!({"teamId": ghost, "data": {}})).await,
        400,
        "TEAM_NOT_FOUND",
    );

    let removed = ok(&post(s, "remove-team", &ann.cookie, &json!({"teamId": ward_id})).await);
    assert_eq!(removed, json!({"message": "Team removed successfully."}));
    assert_auth_error(&post(s, "remove-team", &ann.cookie, &json!({"teamId": ward_id})).await, 400, "TEAM_NOT_FOUND");
    ok(&post(s, "remove-team", &ann.cookie, &json!({"teamId": ward5["id"]})).await);
    // Ann's session works in the default team (create made it active): never removed from under it.
    assert_auth_error(
        &post(s, "remove-team", &ann.cookie, &json!({"teamId": default_id})).await,
        403,
        "YOU_ARE_NOT_ALLOWED_TO_DELETE_THIS_TEAM",
    );
    assert_eq!(ok(&post(s, "set-active-team", &ann.cookie, &json!({"teamId": null})).await), Value::Null);
    assert_auth_error(
        &post(s, "remove-team", &ann.cookie, &json!({"teamId": default_id})).await,
        400,
        "UNABLE_TO_REMOVE_LAST_TEAM",
    );

    // Without a session, and without an organization.
    let r = s.post("/api/auth/organization/create-team").json(&json!({"name": "X"})).send().await;
    assert_eq!(r.status, 401);
    let bo = s.new_user("bo").await;
    assert_auth_error(&post(s, "create-team", &bo.cookie, &json!({"name": "X"})).await, 400, "NO_ACTIVE_ORGANIZATION");
    assert_auth_error(&get(s, "list-teams", &bo.cookie).await, 400, "NO_ACTIVE_ORGANIZATION");

    let audit = ok(&s.get("/api/admin/audit?limit=100").cookie(&s.admin_session().await).send().await);
    let actions: Vec<&str> = audit["entries"].as_array().unwrap().iter().filter_map(|e| e["action"].as_str()).collect();
    for a in ["team.created", "team.updated", "team.deleted"] {
        assert!(actions.contains(&a), "{a} not audited: {actions:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn who_may_do_what_with_teams_is_the_plugins_default_access_control() {
    let mut w = world(|_| ()).await;
    let admin = w.member("ada", "admin").await;
    let bob = w.member("bob", "member").await;
    let outsider = w.s.new_user("oz").await;
    let s = &w.s;
    let org = w.org.clone();
    let ward = w.team("Ward 4").await;
    let ward_id = str_of(&ward["id"]).to_owned();
    let in_org = |extra: Value| {
        let mut body = json!({"organizationId": org});
        body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        body
    };

    // A member may list the teams, not change them.
    assert_eq!(
        ok(&get(s, &query("list-teams", &[("organizationId", &org)]), &bob.cookie).await).as_array().unwrap().len(),
        2
    );
    assert_auth_error(
        &post(s, "create-team", &bob.cookie, &in_org(json!({"name": "B"}))).await,
        403,
        "YOU_ARE_NOT_ALLOWED_TO_CREATE_TEAMS_IN_THIS_ORGANIZATION",
    );
    assert_auth_error(
        &post(s, "update-team", &bob.cookie, &json!({"teamId": ward_id, "data": {"name": "B", "organizationId": org}}))
            .await,
        403,
        "YOU_ARE_NOT_ALLOWED_TO_UPDATE_THIS_TEAM",
    );
    assert_auth_error(
        &post(s, "remove-team", &bob.cookie, &in_org(json!({"teamId": ward_id}))).await,
        403,
        "YOU_ARE_NOT_ALLOWED_TO_DELETE_TEAMS_IN_THIS_ORGANIZATION",
    );
    assert_auth_error(
        &post(s, "add-team-member", &bob.cookie, &in_org(json!({"teamId": ward_id, "userId": bob.id}))).await,
        403,
        "YOU_ARE_NOT_ALLOWED_TO_CREATE_A_NEW_TEAM_MEMBER",
    );
    // Someone of no organization of theirs: the plugin's words for each call.
    assert_auth_error(
        &post(s, "create-team", &outsider.cookie, &in_org(json!({"name": "O"}))).await,
        403,
        "YOU_ARE_NOT_ALLOWED_TO_INVITE_USERS_TO_THIS_ORGANIZATION",
    );
    assert_auth_error(
        &get(s, &query("list-teams", &[("organizationId", &org)]), &outsider.cookie).await,
        403,
        "YOU_ARE_NOT_ALLOWED_TO_ACCESS_THIS_ORGANIZATION",
    );
    assert_auth_error(
        &post(s, "remove-team", &outsider.cookie, &in_org(json!({"teamId": ward_id}))).await,
        403,
        "YOU_ARE_NOT_ALLOWED_TO_DELETE_THIS_TEAM",
    );
    assert_auth_error(
        &post(s, "add-team-member", &outsider.cookie, &in_org(json!({"teamId": ward_id, "userId": bob.id}))).await,
        400,
        "USER_IS_NOT_A_MEMBER_OF_THE_ORGANIZATION",
    );

    // An admin may do all of it.
    let created = ok(&post(s, "create-team", &admin.cookie, &in_org(json!({"name": "Admins' team"}))).await);
    ok(&post(
        s,
        "update-team",
        &admin.cookie,
        &json!({"teamId": created["id"], "data": {"name": "A", "organizationId": org}}),
    )
    .await);
    ok(&post(s, "add-team-member", &admin.cookie, &in_org(json!({"teamId": created["id"], "userId": bob.id}))).await);
    ok(&post(s, "remove-team-member", &admin.cookie, &in_org(json!({"teamId": created["id"], "userId": bob.id})))
        .await);
    ok(&post(s, "remove-team", &admin.cookie, &in_org(json!({"teamId": created["id"]}))).await);
    // Another organization's team is not found in this one.
    let other = ok(&post(s, "create", &outsider.cookie, &json!({"name": "Oz", "slug": "oz"})).await);
    let oz_team = ok(&get(s, "list-teams", &outsider.cookie).await)[0]["id"].clone();
    assert_auth_error(
        &post(s, "remove-team", &admin.cookie, &in_org(json!({"teamId": oz_team}))).await,
        400,
        "TEAM_NOT_FOUND",
    );
    assert_auth_error(
        &get(s, &query("list-team-members", &[("teamId", str_of(&oz_team))]), &admin.cookie).await,
        400,
        "TEAM_NOT_FOUND",
    );
    assert_eq!(other["slug"], "oz");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_are_put_in_teams_listed_and_taken_out_and_a_departure_takes_them_out() {
    let mut w = world(|_| ()).await;
    let bob = w.member("bob", "member").await;
    let cy = w.member("cy", "member").await;
    let stranger = w.s.new_user("oz").await;
    let (s, ann) = (&w.s, &w.ann);
    let ward = w.team("Ward 4").await;
    let ward_id = str_of(&ward["id"]).to_owned();

    let added = ok(&post(s, "add-team-member", &ann.cookie, &json!({"teamId": ward_id, "userId": bob.id})).await);
    assert_keys(&added, &["id", "teamId", "userId", "createdAt"]);
    assert_eq!((added["teamId"].clone(), added["userId"].clone()), (json!(ward_id), json!(bob.id)));
    let again = ok(&post(s, "add-team-member", &ann.cookie, &json!({"teamId": ward_id, "userId": bob.id})).await);
    assert_eq!(again, added, "adding again answers the same entry");
    ok(&post(s, "add-team-member", &ann.cookie, &json!({"teamId": ward_id, "userId": cy.id})).await);
    // The plugin writes a team member's row, not the team's: the default team's `updatedAt` stays null.
    let default_id = ok(&get(s, "list-teams", &ann.cookie).await)[0]["id"].clone();
    ok(&post(s, "add-team-member", &ann.cookie, &json!({"teamId": default_id, "userId": cy.id})).await);
    assert!(ok(&get(s, "list-teams", &ann.cookie).await)[0]["updatedAt"].is_null());
    ok(&post(s, "remove-team-member", &ann.cookie, &json!({"teamId": default_id, "userId": cy.id})).await);
    assert_auth_error(
        &post(s, "add-team-member", &ann.cookie, &json!({"teamId": ward_id, "userId": stranger.id})).await,
        400,
        "USER_IS_NOT_A_MEMBER_OF_THE_ORGANIZATION",
    );
    assert_auth_error(
        &post(
            s,
            "add-team-member",
            &ann.cookie,
            &json!({"teamId": "00000000-0000-7000-8000-000000000000", "userId": bob.id}),
        )
        .await,
        400,
        "TEAM_NOT_FOUND",
    );

    // A member of the team lists its members; the owner, not in it, may not (the plugin's rule).
    let members = ok(&get(s, &query("list-team-members", &[("teamId", &ward_id)]), &bob.cookie).await);
    let users: Vec<&str> = members.as_array().unwrap().iter().map(|m| str_of(&m["userId"])).collect();
    assert_eq!(users, [bob.id.as_str(), cy.id.as_str()]);
    assert_keys(&members[0], &["id", "teamId", "userId", "createdAt"]);
    assert_auth_error(
        &get(s, &query("list-team-members", &[("teamId", &ward_id)]), &ann.cookie).await,
        400,
        "USER_IS_NOT_A_MEMBER_OF_THE_TEAM",
    );
    assert_auth_error(&get(s, "list-team-members", &bob.cookie).await, 400, "YOU_DO_NOT_HAVE_AN_ACTIVE_TEAM");

    // list-user-teams: one's own everywhere, another member's with member:update.
    let mine = ok(&get(s, "list-user-teams", &bob.cookie).await);
    assert_eq!(mine.as_array().unwrap().iter().map(|t| str_of(&t["id"])).collect::<Vec<_>>(), [ward_id.as_str()]);
    let ann_sees = ok(&get(s, &query("list-user-teams", &[("userId", &bob.id)]), &ann.cookie).await);
    assert_eq!(ann_sees, mine);
    assert_auth_error(
        &get(s, &query("list-user-teams", &[("userId", &ann.id)]), &bob.cookie).await,
        403,
        "YOU_ARE_NOT_ALLOWED_TO_UPDATE_THIS_MEMBER",
    );
    assert_auth_error(
        &get(s, &query("list-user-teams", &[("userId", &stranger.id)]), &ann.cookie).await,
        400,
        "USER_IS_NOT_A_MEMBER_OF_THE_ORGANIZATION",
    );
    assert_auth_error(
        &get(s, &query("list-user-teams", &[("organizationId", &w.org)]), &stranger.cookie).await,
        403,
        "YOU_ARE_NOT_A_MEMBER_OF_THIS_ORGANIZATION",
    );

    let taken = ok(&post(s, "remove-team-member", &ann.cookie, &json!({"teamId": ward_id, "userId": cy.id})).await);
    assert_eq!(taken, json!({"message": "Team member removed successfully."}));
    assert_auth_error(
        &post(s, "remove-team-member", &ann.cookie, &json!({"teamId": ward_id, "userId": cy.id})).await,
        400,
        "USER_IS_NOT_A_MEMBER_OF_THE_TEAM",
    );

    // Bob leaves the organization: he is in no team of it any more, and joining again does not bring him back.
    ok(&post(s, "leave", &bob.cookie, &json!({"organizationId": w.org})).await);
    let members = ok(&get(s, &query("list-user-teams", &[("userId", &ann.id)]), &ann.cookie).await);
    assert_eq!(members.as_array().unwrap().len(), 1, "ann is in the default team only: {members}");
    assert!(ok(&get(s, "list-user-teams", &bob.cookie).await).as_array().unwrap().is_empty());
    ok(&post(s, "add-team-member", &ann.cookie, &json!({"teamId": ward_id, "userId": cy.id})).await);
    let members = ok(&get(s, &query("list-team-members", &[("teamId", &ward_id)]), &cy.cookie).await);
    assert_eq!(members.as_array().unwrap().len(), 1, "bob's entry went with his membership: {members}");

    let audit = ok(&s.get("/api/admin/audit?limit=100").cookie(&s.admin_session().await).send().await);
    let actions: Vec<&str> = audit["entries"].as_array().unwrap().iter().filter_map(|e| e["action"].as_str()).collect();
    for a in ["team.member_added", "team.member_removed"] {
        assert!(actions.contains(&a), "{a} not audited: {actions:?}");
    }
}

/// The session's team, as get-session shows it (`None`: the field is absent, the session works in no team).
pub(super) async fn active_team(s: &TestServer, cookie: &str) -> Option<String> {
    let session = s.session(cookie).await;
    session["session"].get("activeTeamId").map(|t| str_of(t).to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_works_in_a_team_of_its_organization_until_the_team_or_its_place_in_it_goes() {
    let mut w = world(|_| ()).await;
    let bob = w.member("bob", "member").await;
    let cy = w.member("cy", "member").await;
    let outsider = w.s.new_user("oz").await;
    let (s, ann) = (&w.s, &w.ann);
    let default_id = ok(&get(s, "list-teams", &ann.cookie).await)[0]["id"].as_str().unwrap().to_owned();
    let ward = w.team("Ward 4").await;
    let ward_id = str_of(&ward["id"]).to_owned();

    // Creating the organization made its default team the creator's session's (the plugin's create does).
    assert_eq!(active_team(s, &ann.cookie).await.as_deref(), Some(default_id.as_str()));
    // Bob joined by invitation: his session works in the organization, in no team.
    assert_eq!(active_team(s, &bob.cookie).await, None);
    assert_eq!(ok(&post(s, "set-active-team", &bob.cookie, &json!({})).await), Value::Null);
    assert_auth_error(&get(s, "list-team-members", &bob.cookie).await, 400, "YOU_DO_NOT_HAVE_AN_ACTIVE_TEAM");

    ok(&post(s, "add-team-member", &ann.cookie, &json!({"teamId": ward_id, "userId": bob.id})).await);
    let set = ok(&post(s, "set-active-team", &bob.cookie, &json!({"teamId": ward_id})).await);
    assert_eq!(set, ward, "the answer is the team");
    assert_eq!(active_team(s, &bob.cookie).await.as_deref(), Some(ward_id.as_str()));
    // The active team is what list-team-members lists by default, and what set-active-team without a team checks.
    let members = ok(&get(s, "list-team-members", &bob.cookie).await);
    assert_eq!(members[0]["userId"], bob.id.as_str());
    assert_eq!(ok(&post(s, "set-active-team", &bob.cookie, &json!({})).await), ward);

    // Refusals: a team he is not in, one of no organization of his session, no team at all, a malformed body.
    assert_auth_error(
        &post(s, "set-active-team", &bob.cookie, &json!({"teamId": default_id})).await,
        403,
        "USER_IS_NOT_A_MEMBER_OF_THE_TEAM",
    );
    for id in ["00000000-0000-7000-8000-000000000000", "not-a-uuid"] {
        assert_auth_error(
            &post(s, "set-active-team", &bob.cookie, &json!({"teamId": id})).await,
            400,
            "TEAM_NOT_FOUND",
        );
    }
    let oz = ok(&post(s, "create", &outsider.cookie, &json!({"name": "Oz", "slug": "oz"})).await);
    let oz_team = ok(&get(s, "list-teams", &outsider.cookie).await)[0]["id"].clone();
    assert_auth_error(
        &post(s, "set-active-team", &bob.cookie, &json!({"teamId": oz_team})).await,
        400,
        "TEAM_NOT_FOUND",
    );
    assert_auth_error(&post(s, "set-active-team", &bob.cookie, &json!({"teamId": 4})).await, 400, "VALIDATION_ERROR");
    assert_eq!(post(s, "set-active-team", &bob.cookie, &json!({"teamId": ward_id, "x": 1})).await.status, 400);
    let r = s.post("/api/auth/organization/set-active-team").json(&json!({"teamId": ward_id})).send().await;
    assert_eq!(r.status, 401);
    // Working in another organization leaves the team behind (a team belongs to one organization).
    ok(&post(s, "set-active", &outsider.cookie, &json!({"organizationId": null})).await);
    assert_eq!(active_team(s, &outsider.cookie).await, None);
    assert_auth_error(
        &post(s, "set-active-team", &outsider.cookie, &json!({"teamId": oz_team})).await,
        400,
        "NO_ACTIVE_ORGANIZATION",
    );
    assert_eq!(oz["slug"], "oz");
    // Still refused after all that: nothing above changed bob's team.
    assert_eq!(active_team(s, &bob.cookie).await.as_deref(), Some(ward_id.as_str()));

    // Taken out of the team: his session works in no team.
    ok(&post(s, "remove-team-member", &ann.cookie, &json!({"teamId": ward_id, "userId": bob.id})).await);
    assert_eq!(active_team(s, &bob.cookie).await, None, "taken out of the team, out of working in it");
    // Back in it and working in it, then the team goes: the same.
    ok(&post(s, "add-team-member", &ann.cookie, &json!({"teamId": ward_id, "userId": bob.id})).await);
    ok(&post(s, "set-active-team", &bob.cookie, &json!({"teamId": ward_id})).await);
    ok(&post(s, "remove-team", &ann.cookie, &json!({"teamId": ward_id})).await);
    assert_eq!(active_team(s, &bob.cookie).await, None, "the team removed, none worked in");
    // Removed from the organization while working in one of its teams: the same.
    ok(&post(s, "add-team-member", &ann.cookie, &json!({"teamId": default_id, "userId": cy.id})).await);
    ok(&post(s, "set-active-team", &cy.cookie, &json!({"teamId": default_id})).await);
    assert_eq!(active_team(s, &cy.cookie).await.as_deref(), Some(default_id.as_str()));
    ok(&post(s, "remove-member", &ann.cookie, &json!({"memberIdOrEmail": cy.email})).await);
    assert_eq!(active_team(s, &cy.cookie).await, None, "no longer a member, in no team");

    // Cleared by the caller.
    assert_eq!(ok(&post(s, "set-active-team", &ann.cookie, &json!({"teamId": null})).await), Value::Null);
    assert_eq!(active_team(s, &ann.cookie).await, None);
    assert_eq!(ok(&post(s, "set-active-team", &ann.cookie, &json!({"teamId": null})).await), Value::Null);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_team_limits_are_the_configured_ones() {
    let mut w = world(|c| {
        c.organizations.maximum_teams = Some(2);
        c.organizations.maximum_members_per_team = Some(1);
    })
    .await;
    let bob = w.member("bob", "member").await;
    let s = &w.s;
    let ward = w.team("Ward 4").await;
    assert_auth_error(
        &post(s, "create-team", &w.ann.cookie, &json!({"name": "Three"})).await,
        400,
        "YOU_HAVE_REACHED_THE_MAXIMUM_NUMBER_OF_TEAMS",
    );
    ok(&post(s, "add-team-member", &w.ann.cookie, &json!({"teamId": ward["id"], "userId": bob.id})).await);
    assert_auth_error(
        &post(s, "add-team-member", &w.ann.cookie, &json!({"teamId": ward["id"], "userId": w.ann.id})).await,
        403,
        "TEAM_MEMBER_LIMIT_REACHED",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn teams_and_their_members_survive_a_restart() {
    let (data, mail) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let s = with_teams(data.path(), mail.path(), |_| ()).await;
    let ann = s.new_user("ann").await;
    ok(&post(&s, "create", &ann.cookie, &json!({"name": "St Mary", "slug": "st-mary"})).await);
    let ward = ok(&post(&s, "create-team", &ann.cookie, &json!({"name": "Ward 4"})).await);
    ok(&post(&s, "add-team-member", &ann.cookie, &json!({"teamId": ward["id"], "userId": ann.id})).await);
    let before = ok(&get(&s, "list-user-teams", &ann.cookie).await);
    assert_eq!(before.as_array().unwrap().len(), 2);
    ok(&post(&s, "set-active-team", &ann.cookie, &json!({"teamId": ward["id"]})).await);
    s.stop().await;
    let s = with_teams(data.path(), mail.path(), |_| ()).await;
    assert_eq!(ok(&get(&s, "list-user-teams", &ann.cookie).await), before);
    assert_eq!(active_team(&s, &ann.cookie).await.as_deref(), Some(str_of(&ward["id"])), "the session's team is kept");
}
