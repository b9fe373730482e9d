//! The better-auth organization plugin's calls (`/api/auth/organization/*`): every call and its refusals, the
//! permission matrix (owner, admin, member, a member of another organization, a global administrator), the last
//! owner, invitations by mail, and the seed's `organizationId` as the primary membership.

use serde_json::{Value, json};

use super::harness::*;

pub(super) async fn post(s: &TestServer, call: &str, cookie: &str, body: &Value) -> Resp {
    s.post(&format!("/api/auth/organization/{call}")).cookie(cookie).json(body).send().await
}

pub(super) async fn get(s: &TestServer, call: &str, cookie: &str) -> Resp {
    s.get(&format!("/api/auth/organization/{call}")).cookie(cookie).send().await
}

pub(super) fn ok(r: &Resp) -> Value {
    assert_eq!(r.status, 200, "{}", r.text);
    r.json()
}

/// Creates an organization as `cookie`'s user (who becomes its owner); returns it.
async fn create(s: &TestServer, cookie: &str, slug: &str) -> Value {
    ok(&post(s, "create", cookie, &json!({"name": format!("Org {slug}"), "slug": slug})).await)
}

/// The invitation id in a message to `email` written to `dir` (the `.eml` files of `[email] directory`) that is
/// not in `seen` yet, and the message's text. Messages to others are left for their own reader.
pub(super) async fn next_invitation(dir: &std::path::Path, seen: &mut Seen, email: &str) -> (String, String) {
    let started = std::time::Instant::now();
    loop {
        for path in std::fs::read_dir(dir).unwrap().filter_map(|e| e.ok().map(|e| e.path())) {
            if seen.contains(&path) || path.extension().is_none_or(|e| e != "eml") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap().replace("=\r\n", "").replace("=\n", "");
            let to =
                text.lines().find(|l| l.to_ascii_lowercase().starts_with("to:")).unwrap_or_default().to_lowercase();
            if !to.contains(&email.to_lowercase()) || !text.contains("accept-invitation?id=") {
                continue;
            }
            seen.insert(path);
            let at = text.find("accept-invitation?id=3D").map(|i| i + 23);
            let at = at.or_else(|| text.find("accept-invitation?id=").map(|i| i + 21)).unwrap();
            return (text[at..].chars().take(36).collect(), text);
        }
        assert!(started.elapsed().as_secs() < 10, "no invitation to {email}");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

pub(super) type Seen = std::collections::HashSet<std::path::PathBuf>;

/// Joins `user` to the organization through an invitation from `inviter` (the mail is read from `dir`).
pub(super) async fn join(
    s: &TestServer,
    dir: &std::path::Path,
    seen: &mut Seen,
    inviter: &str,
    org: &str,
    user: &TestUser,
    role: &str,
) {
    ok(&post(s, "invite-member", inviter, &json!({"email": user.email, "role": role, "organizationId": org})).await);
    let (id, _) = next_invitation(dir, seen, &user.email).await;
    ok(&post(s, "accept-invitation", &user.cookie, &json!({"invitationId": id})).await);
}

async fn with_mail() -> (TestServer, tempfile::TempDir) {
    let mail = tempfile::tempdir().unwrap();
    let dir = mail.path().to_owned();
    (TestServer::start_adjusted(|c| c.email.directory = Some(dir)).await, mail)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_organization_is_created_listed_checked_updated_and_deleted_by_its_owner() {
    let s = TestServer::start().await;
    let ann = s.new_user("ann").await;
    let created =
        ok(&post(&s, "create", &ann.cookie, &json!({"name": "St Mary", "slug": "st-mary", "metadata": {"a": 1}}))
            .await);
    assert_keys(&created, &["id", "name", "slug", "logo", "metadata", "createdAt", "members"]);
    assert_eq!((created["slug"].clone(), created["metadata"].clone()), (json!("st-mary"), json!({"a": 1})));
    let org = str_of(&created["id"]).to_owned();
    assert_eq!(created["members"][0]["role"], "owner");
    assert_eq!(created["members"][0]["userId"], ann.id.as_str());
    assert_eq!(s.session(&ann.cookie).await["session"]["activeOrganizationId"], org.as_str(), "the new one is active");

    // keepCurrentActiveOrganization leaves the session where it was.
    let second = ok(&post(
        &s,
        "create",
        &ann.cookie,
        &json!({"name": "Two", "slug": "two", "keepCurrentActiveOrganization": true}),
    )
    .await);
    assert_eq!(s.session(&ann.cookie).await["session"]["activeOrganizationId"], org.as_str());

    let listed = ok(&get(&s, "list", &ann.cookie).await);
    assert_eq!(
        listed.as_array().unwrap().iter().map(|o| o["slug"].clone()).collect::<Vec<_>>(),
        [json!("st-mary"), json!("two")]
    );

    assert_eq!(ok(&post(&s, "check-slug", &ann.cookie, &json!({"slug": "free-one"})).await), json!({"status": true}));
    assert_auth_error(
        &post(&s, "check-slug", &ann.cookie, &json!({"slug": "st-mary"})).await,
        400,
        "ORGANIZATION_SLUG_ALREADY_TAKEN",
    );
    assert_auth_error(
        &post(&s, "create", &ann.cookie, &json!({"name": "X", "slug": "st-mary"})).await,
        400,
        "ORGANIZATION_ALREADY_EXISTS",
    );
    assert_auth_error(
        &s.post("/api/auth/organization/create").json(&json!({"name": "X", "slug": "x"})).send().await,
        401,
        "UNAUTHORIZED",
    );

    // Without organizationId: the active one.
    let updated = ok(&post(
        &s,
        "update",
        &ann.cookie,
        &json!({"data": {"name": "St Mary Hospital", "logo": "https://example.com/l.png"}}),
    )
    .await);
    assert_eq!(
        (updated["name"].clone(), updated["logo"].clone()),
        (json!("St Mary Hospital"), json!("https://example.com/l.png"))
    );
    let taken = post(&s, "update", &ann.cookie, &json!({"data": {"slug": "two"}, "organizationId": org})).await;
    assert_auth_error(&taken, 400, "ORGANIZATION_SLUG_ALREADY_TAKEN");

    let full = ok(&s
        .get("/api/auth/organization/get-full-organization?organizationSlug=st-mary")
        .cookie(&ann.cookie)
        .send()
        .await);
    assert_eq!(
        (full["members"].as_array().unwrap().len(), full["members"][0]["user"]["email"].clone()),
        (1, json!(ann.email))
    );

    let deleted = ok(&post(&s, "delete", &ann.cookie, &json!({"organizationId": org})).await);
    assert_eq!(deleted["id"], org.as_str());
    assert_eq!(s.session(&ann.cookie).await["session"]["activeOrganizationId"], Value::Null, "no longer active");
    assert_eq!(ok(&get(&s, "list", &ann.cookie).await).as_array().unwrap().len(), 1);
    assert_auth_error(
        &post(&s, "delete", &ann.cookie, &json!({"organizationId": org})).await,
        400,
        "USER_IS_NOT_A_MEMBER_OF_THE_ORGANIZATION",
    );
    assert_eq!(ok(&get(&s, "get-full-organization", &ann.cookie).await), Value::Null, "none active: null");
    let set = ok(&post(&s, "set-active", &ann.cookie, &json!({"organizationId": second["id"]})).await);
    assert_eq!(set["slug"], "two");
    assert_eq!(ok(&post(&s, "set-active", &ann.cookie, &json!({"organizationId": null})).await), Value::Null);

    let audit = ok(&s.get("/api/admin/audit?limit=50").cookie(&s.admin_session().await).send().await);
    let actions: Vec<&str> = audit["entries"].as_array().unwrap().iter().filter_map(|e| e["action"].as_str()).collect();
    for a in ["organization.created", "member.added", "organization.updated", "organization.deleted"] {
        assert!(actions.contains(&a), "{a} not audited: {actions:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_administrators_create_organizations_when_members_may_not() {
    let s = TestServer::start_adjusted(|c| c.organizations.members_may_create = false).await;
    let ann = s.new_user("ann").await;
    let refused = post(&s, "create", &ann.cookie, &json!({"name": "A", "slug": "a"})).await;
    assert_auth_error(&refused, 403, "YOU_ARE_NOT_ALLOWED_TO_CREATE_A_NEW_ORGANIZATION");
    create(&s, &s.admin_session().await, "a").await;
}

/// An invitation is mailed, single use, for its address only; accepting it never verifies the address, and
/// listing one's invitations needs a verified one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invitation_is_mailed_and_accepted_once_by_its_recipient_only() {
    let (s, mail) = with_mail().await;
    let mut seen = Seen::new();
    let owner = s.new_user("owner").await;
    let org = str_of(&create(&s, &owner.cookie, "pharmacy").await["id"]).to_owned();
    let sent =
        ok(&post(&s, "invite-member", &owner.cookie, &json!({"email": "Bob@Example.com", "role": "admin"})).await);
    assert_eq!(
        (sent["email"].clone(), sent["role"].clone(), sent["status"].clone()),
        (json!("bob@example.com"), json!("admin"), json!("pending"))
    );
    let (id, text) = next_invitation(mail.path(), &mut seen, "bob@example.com").await;
    assert_eq!(id, str_of(&sent["id"]));
    assert!(text.contains("Org pharmacy") && text.contains("owner@example.com"), "{text}");
    assert_auth_error(
        &post(&s, "invite-member", &owner.cookie, &json!({"email": "bob@example.com", "role": "admin"})).await,
        400,
        "USER_IS_ALREADY_INVITED_TO_THIS_ORGANIZATION",
    );
    let resent = ok(&post(
        &s,
        "invite-member",
        &owner.cookie,
        &json!({"email": "bob@example.com", "role": "admin", "resend": true}),
    )
    .await);
    assert_eq!(resent["id"], id.as_str(), "a resend is the same invitation");
    let _ = next_invitation(mail.path(), &mut seen, "bob@example.com").await;
    assert_auth_error(
        &post(&s, "invite-member", &owner.cookie, &json!({"email": "x@example.com", "role": "boss"})).await,
        400,
        "ROLE_NOT_FOUND",
    );
    assert_auth_error(
        &post(&s, "invite-member", &owner.cookie, &json!({"email": "not an e-mail", "role": "member"})).await,
        400,
        "INVALID_EMAIL",
    );

    let eve = s.new_user("eve").await;
    assert_auth_error(
        &post(&s, "accept-invitation", &eve.cookie, &json!({"invitationId": id})).await,
        403,
        "YOU_ARE_NOT_THE_RECIPIENT_OF_THE_INVITATION",
    );
    assert_auth_error(
        &s.get(&format!("/api/auth/organization/get-invitation?id={id}")).cookie(&eve.cookie).send().await,
        403,
        "YOU_ARE_NOT_THE_RECIPIENT_OF_THE_INVITATION",
    );

    let bob = s.new_user("bob").await;
    assert_auth_error(
        &get(&s, "list-user-invitations", &bob.cookie).await,
        403,
        "EMAIL_VERIFICATION_REQUIRED_FOR_INVITATION",
    );
    let shown = ok(&s.get(&format!("/api/auth/organization/get-invitation?id={id}")).cookie(&bob.cookie).send().await);
    assert_eq!(
        (shown["organizationSlug"].clone(), shown["inviterEmail"].clone()),
        (json!("pharmacy"), json!(owner.email))
    );
    let accepted = ok(&post(&s, "accept-invitation", &bob.cookie, &json!({"invitationId": id})).await);
    assert_eq!(
        (accepted["invitation"]["status"].clone(), accepted["member"]["role"].clone()),
        (json!("accepted"), json!("admin"))
    );
    let session = s.session(&bob.cookie).await;
    assert_eq!(session["session"]["activeOrganizationId"], org.as_str(), "the session works in it");
    assert_eq!(session["user"]["emailVerified"], false, "an invitation proves no address");
    assert_auth_error(
        &post(&s, "accept-invitation", &bob.cookie, &json!({"invitationId": id})).await,
        400,
        "INVITATION_NOT_FOUND",
    );
    assert_auth_error(
        &post(&s, "invite-member", &owner.cookie, &json!({"email": bob.email, "role": "member"})).await,
        400,
        "USER_IS_ALREADY_A_MEMBER_OF_THIS_ORGANIZATION",
    );
    let members = ok(&s
        .get(&format!("/api/auth/organization/list-members?organizationId={org}"))
        .cookie(&owner.cookie)
        .send()
        .await);
    assert_eq!(members["total"], 2);

    // Rejected by its recipient; canceled by an admin; neither can be accepted afterwards.
    let carol = s.new_user("carol").await;
    ok(&post(&s, "invite-member", &owner.cookie, &json!({"email": carol.email, "role": "member"})).await);
    let (carols, _) = next_invitation(mail.path(), &mut seen, &carol.email).await;
    let rejected = ok(&post(&s, "reject-invitation", &carol.cookie, &json!({"invitationId": carols})).await);
    assert_eq!(
        (rejected["invitation"]["status"].clone(), rejected["member"].clone()),
        (json!("rejected"), Value::Null)
    );
    assert_auth_error(
        &post(&s, "accept-invitation", &carol.cookie, &json!({"invitationId": carols})).await,
        400,
        "INVITATION_NOT_FOUND",
    );
    ok(&post(
        &s,
        "invite-member",
        &bob.cookie,
        &json!({"email": "dave@example.com", "role": "member", "organizationId": org}),
    )
    .await);
    let (daves, _) = next_invitation(mail.path(), &mut seen, "dave@example.com").await;
    assert_eq!(
        ok(&post(&s, "cancel-invitation", &bob.cookie, &json!({"invitationId": daves})).await)["status"],
        "canceled"
    );
    let dave = s.new_user("dave").await;
    assert_auth_error(
        &post(&s, "accept-invitation", &dave.cookie, &json!({"invitationId": daves})).await,
        400,
        "INVITATION_NOT_FOUND",
    );
    let listed = ok(&s
        .get(&format!("/api/auth/organization/list-invitations?organizationId={org}"))
        .cookie(&owner.cookie)
        .send()
        .await);
    let statuses: Vec<&str> = listed.as_array().unwrap().iter().filter_map(|i| i["status"].as_str()).collect();
    assert_eq!(statuses, ["accepted", "rejected", "canceled"], "{listed}");

    // A verified recipient lists their pending invitations.
    let token = {
        assert_eq!(
            s.post("/api/auth/send-verification-email").json(&json!({"email": dave.email})).send().await.status,
            200
        );
        let started = std::time::Instant::now();
        loop {
            let files: Vec<_> = std::fs::read_dir(mail.path()).unwrap().filter_map(|e| e.ok()).collect();
            if let Some(text) = files
                .iter()
                .map(|f| std::fs::read_to_string(f.path()).unwrap().replace("=\r\n", "").replace("=\n", ""))
                .find(|t| t.contains("verify-email?token="))
            {
                let mut at = text.find("verify-email?token=").unwrap() + "verify-email?token=".len();
                if text[at..].starts_with("3D") {
                    at += 2; // quoted-printable's `=`
                }
                break text[at..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
                    .collect::<String>();
            }
            assert!(started.elapsed().as_secs() < 10, "no verification mail");
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    };
    assert_eq!(s.get(&format!("/api/auth/verify-email?token={token}")).send().await.status, 200);
    ok(&post(&s, "invite-member", &owner.cookie, &json!({"email": dave.email, "role": "member"})).await);
    let (again, _) = next_invitation(mail.path(), &mut seen, &dave.email).await;
    let mine = ok(&get(&s, "list-user-invitations", &dave.cookie).await);
    assert_eq!(
        (mine.as_array().unwrap().len(), mine[0]["id"].clone(), mine[0]["organizationName"].clone()),
        (1, json!(again), json!("Org pharmacy"))
    );

    let audit = ok(&s.get("/api/admin/audit?limit=100").cookie(&s.admin_session().await).send().await);
    let actions: Vec<&str> = audit["entries"].as_array().unwrap().iter().filter_map(|e| e["action"].as_str()).collect();
    for a in ["invitation.sent", "invitation.accepted", "invitation.rejected", "invitation.canceled"] {
        assert!(actions.contains(&a), "{a} not audited");
    }
}

/// Owner, admin, member, a member of another organization and a global administrator against every call that
/// reads or changes an organization: what each may do, and the code of each refusal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_permission_matrix() {
    let (s, mail) = with_mail().await;
    let mut seen = Seen::new();
    let (owner, admin, member, outsider) =
        (s.new_user("o").await, s.new_user("a").await, s.new_user("m").await, s.new_user("x").await);
    let global = s.admin_session().await;
    let org = str_of(&create(&s, &owner.cookie, "main").await["id"]).to_owned();
    create(&s, &outsider.cookie, "other").await;
    join(&s, mail.path(), &mut seen, &owner.cookie, &org, &admin, "admin").await;
    join(&s, mail.path(), &mut seen, &owner.cookie, &org, &member, "member").await;
    let in_org = |extra: Value| {
        let mut body = extra;
        body["organizationId"] = json!(org);
        body
    };
    let everyone = [
        ("owner", owner.cookie.as_str()),
        ("admin", &admin.cookie),
        ("member", &member.cookie),
        ("outsider", &outsider.cookie),
        ("global", &global),
    ];

    // Reads.
    for (who, cookie) in everyone {
        let full = s
            .get(&format!("/api/auth/organization/get-full-organization?organizationId={org}"))
            .cookie(cookie)
            .send()
            .await;
        let members =
            s.get(&format!("/api/auth/organization/list-members?organizationId={org}")).cookie(cookie).send().await;
        let role = s
            .get(&format!("/api/auth/organization/get-active-member-role?organizationId={org}"))
            .cookie(cookie)
            .send()
            .await;
        let invitations =
            s.get(&format!("/api/auth/organization/list-invitations?organizationId={org}")).cookie(cookie).send().await;
        match who {
            "outsider" => {
                assert_auth_error(&full, 403, "USER_IS_NOT_A_MEMBER_OF_THE_ORGANIZATION");
                assert_auth_error(&members, 403, "YOU_ARE_NOT_A_MEMBER_OF_THIS_ORGANIZATION");
                assert_auth_error(&role, 403, "YOU_ARE_NOT_A_MEMBER_OF_THIS_ORGANIZATION");
                assert_auth_error(&invitations, 403, "YOU_ARE_NOT_A_MEMBER_OF_THIS_ORGANIZATION");
            }
            _ => {
                assert_eq!(ok(&full)["members"].as_array().unwrap().len(), 3, "{who}");
                assert_eq!(ok(&members)["total"], 3, "{who}");
                let expected = if who == "global" { "owner" } else { who };
                assert_eq!(ok(&role)["role"], expected);
                if who == "member" {
                    assert_auth_error(&invitations, 403, "YOU_ARE_NOT_ALLOWED_TO_LIST_INVITATIONS");
                    assert_eq!(ok(&full)["invitations"], json!([]), "a member sees no invitation");
                } else {
                    assert_eq!(ok(&invitations).as_array().unwrap().len(), 2, "{who}");
                }
            }
        }
        let invite =
            post(&s, "has-permission", cookie, &in_org(json!({"permissions": {"invitation": ["create"]}}))).await;
        let delete =
            post(&s, "has-permission", cookie, &in_org(json!({"permissions": {"organization": ["delete"]}}))).await;
        match who {
            "outsider" => assert_auth_error(&invite, 401, "USER_IS_NOT_A_MEMBER_OF_THE_ORGANIZATION"),
            _ => {
                assert_eq!(ok(&invite)["success"], who != "member", "{who} invitation:create");
                assert_eq!(ok(&delete)["success"], who == "owner" || who == "global", "{who} organization:delete");
            }
        }
    }

    // Changes, each on fresh targets.
    for (who, cookie) in everyone {
        let renamed = post(&s, "update", cookie, &in_org(json!({"data": {"name": format!("Renamed by {who}")}}))).await;
        let invited = post(
            &s,
            "invite-member",
            cookie,
            &in_org(json!({"email": format!("{who}-guest@example.com"), "role": "member"})),
        )
        .await;
        let target = s.new_user(&format!("t-{who}")).await;
        join(&s, mail.path(), &mut seen, &owner.cookie, &org, &target, "member").await;
        let target_id =
            str_of(&ok(&s.get("/api/auth/organization/get-active-member").cookie(&target.cookie).send().await)["id"])
                .to_owned();
        let promoted =
            post(&s, "update-member-role", cookie, &in_org(json!({"memberId": target_id, "role": "admin"}))).await;
        let made_owner =
            post(&s, "update-member-role", cookie, &in_org(json!({"memberId": target_id, "role": "owner"}))).await;
        let removed = post(&s, "remove-member", cookie, &in_org(json!({"memberIdOrEmail": target.email}))).await;
        match who {
            "outsider" => {
                assert_auth_error(&renamed, 400, "USER_IS_NOT_A_MEMBER_OF_THE_ORGANIZATION");
                assert_auth_error(&invited, 400, "MEMBER_NOT_FOUND");
                assert_auth_error(&promoted, 400, "MEMBER_NOT_FOUND");
                assert_auth_error(&removed, 400, "MEMBER_NOT_FOUND");
            }
            "member" => {
                assert_auth_error(&renamed, 403, "YOU_ARE_NOT_ALLOWED_TO_UPDATE_THIS_ORGANIZATION");
                assert_auth_error(&invited, 403, "YOU_ARE_NOT_ALLOWED_TO_INVITE_USERS_TO_THIS_ORGANIZATION");
                assert_auth_error(&promoted, 403, "YOU_ARE_NOT_ALLOWED_TO_UPDATE_THIS_MEMBER");
                assert_auth_error(&made_owner, 403, "YOU_ARE_NOT_ALLOWED_TO_UPDATE_THIS_MEMBER");
                assert_auth_error(&removed, 401, "YOU_ARE_NOT_ALLOWED_TO_DELETE_THIS_MEMBER");
            }
            "admin" => {
                ok(&renamed);
                ok(&invited);
                assert_eq!(ok(&promoted)["role"], "admin");
                assert_auth_error(&made_owner, 403, "YOU_ARE_NOT_ALLOWED_TO_UPDATE_THIS_MEMBER");
                assert_eq!(ok(&removed)["member"]["userId"], target.id.as_str());
            }
            _ => {
                ok(&renamed);
                ok(&invited);
                assert_eq!(ok(&promoted)["role"], "admin");
                assert_eq!(ok(&made_owner)["role"], "owner", "{who} grants owner");
                // An owner is removed by an owner only, and never the last one.
                assert_eq!(ok(&removed)["member"]["role"], "owner");
            }
        }
    }
    // An admin may neither invite an owner, nor remove or demote one.
    let refused =
        post(&s, "invite-member", &admin.cookie, &in_org(json!({"email": "boss@example.com", "role": "owner"}))).await;
    assert_auth_error(&refused, 403, "YOU_ARE_NOT_ALLOWED_TO_INVITE_USER_WITH_THIS_ROLE");
    assert_auth_error(
        &post(&s, "remove-member", &admin.cookie, &in_org(json!({"memberIdOrEmail": owner.email}))).await,
        400,
        "YOU_CANNOT_LEAVE_THE_ORGANIZATION_AS_THE_ONLY_OWNER",
    );
    let owner_member = ok(&s
        .get(&format!("/api/auth/organization/list-members?organizationId={org}"))
        .cookie(&owner.cookie)
        .send()
        .await)["members"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["userId"] == owner.id.as_str())
        .unwrap()["id"]
        .clone();
    assert_auth_error(
        &post(&s, "update-member-role", &admin.cookie, &in_org(json!({"memberId": owner_member, "role": "member"})))
            .await,
        403,
        "YOU_ARE_NOT_ALLOWED_TO_UPDATE_THIS_MEMBER",
    );
    // The last owner neither leaves, nor demotes themself, nor is removed.
    assert_auth_error(
        &post(&s, "leave", &owner.cookie, &in_org(json!({}))).await,
        400,
        "YOU_CANNOT_LEAVE_THE_ORGANIZATION_AS_THE_ONLY_OWNER",
    );
    assert_auth_error(
        &post(&s, "update-member-role", &owner.cookie, &in_org(json!({"memberId": owner_member, "role": "admin"})))
            .await,
        400,
        "YOU_CANNOT_LEAVE_THE_ORGANIZATION_WITHOUT_AN_OWNER",
    );
    assert_auth_error(
        &post(&s, "remove-member", &global, &in_org(json!({"memberIdOrEmail": owner.email}))).await,
        400,
        "YOU_CANNOT_LEAVE_THE_ORGANIZATION_AS_THE_ONLY_OWNER",
    );
    // An organization's admins reach no other organization, and no global call.
    assert_auth_error(
        &post(&s, "delete", &admin.cookie, &in_org(json!({}))).await,
        403,
        "YOU_ARE_NOT_ALLOWED_TO_DELETE_THIS_ORGANIZATION",
    );
    assert_eq!(s.get("/api/admin/users").cookie(&owner.cookie).send().await.status, 403);
    assert_eq!(s.get("/api/auth/admin/list-users").cookie(&owner.cookie).send().await.status, 403);
    assert_eq!(s.get("/api/admin/organizations").cookie(&admin.cookie).send().await.status, 403);
    // A member leaves; the session of the one who leaves no longer works in it.
    ok(&post(&s, "set-active", &member.cookie, &json!({"organizationId": org})).await);
    assert_eq!(ok(&post(&s, "leave", &member.cookie, &in_org(json!({}))).await)["userId"], member.id.as_str());
    assert_eq!(s.session(&member.cookie).await["session"]["activeOrganizationId"], Value::Null);
    assert_auth_error(&get(&s, "get-active-member", &member.cookie).await, 400, "NO_ACTIVE_ORGANIZATION");
    // A global administrator deletes it; the owner's session working in it is answered accordingly.
    ok(&post(&s, "delete", &global, &in_org(json!({}))).await);
    assert_eq!(ok(&get(&s, "list", &owner.cookie).await), json!([]));
}

/// `organizationId` on the account is its primary membership: an administrator's PATCH adds or moves it (as a
/// `member`), `null` ends it; leaving through the plugin clears it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_seeds_organization_id_is_the_primary_membership() {
    let s = TestServer::start().await;
    let admin = s.admin_session().await;
    let ann = s.new_user("ann").await;
    let (a, b) = (s.new_org(&admin, "A", "a").await, s.new_org(&admin, "B", "b").await);
    let (a, b) = (str_of(&a["id"]).to_owned(), str_of(&b["id"]).to_owned());
    s.patch_ok(&admin, &json!({"userId": ann.id, "organizationId": a})).await;
    let listed = ok(&get(&s, "list", &ann.cookie).await);
    assert_eq!(listed.as_array().unwrap().iter().map(|o| o["id"].clone()).collect::<Vec<_>>(), [json!(a)]);
    let role = ok(&s
        .get(&format!("/api/auth/organization/get-active-member-role?organizationId={a}"))
        .cookie(&ann.cookie)
        .send()
        .await);
    assert_eq!(role["role"], "member");
    s.patch_ok(&admin, &json!({"userId": ann.id, "organizationId": b})).await;
    let listed = ok(&get(&s, "list", &ann.cookie).await);
    assert_eq!(listed.as_array().unwrap().iter().map(|o| o["id"].clone()).collect::<Vec<_>>(), [json!(b)], "moved");
    ok(&post(&s, "leave", &ann.cookie, &json!({"organizationId": b})).await);
    assert_eq!(
        s.listed_user(&admin, &ann.id).await["organization_id"],
        Value::Null,
        "leaving ends the primary membership"
    );
    s.patch_ok(&admin, &json!({"userId": ann.id, "organizationId": a})).await;
    s.patch_ok(&admin, &json!({"userId": ann.id, "organizationId": null})).await;
    assert_eq!(ok(&get(&s, "list", &ann.cookie).await), json!([]));
    // The last owner is not moved away by an administrator either.
    let bo = s.new_user("bo").await;
    let own = str_of(&create(&s, &bo.cookie, "bos").await["id"]).to_owned();
    s.patch_ok(&admin, &json!({"userId": bo.id, "organizationId": own})).await;
    assert_eq!(s.patch_user(&admin, &json!({"userId": bo.id, "organizationId": a})).await.status, 409);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_are_listed_in_pages_with_their_total_and_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start_in(dir.path()).await;
    let admin = s.admin_session().await;
    let owner = s.new_user("owner").await;
    let org = str_of(&create(&s, &owner.cookie, "big").await["id"]).to_owned();
    for n in 0..5 {
        let u = s.new_user(&format!("u{n}")).await;
        s.patch_ok(&admin, &json!({"userId": u.id, "organizationId": org})).await;
    }
    let page = ok(&s
        .get(&format!("/api/auth/organization/list-members?organizationId={org}&limit=2&offset=1"))
        .cookie(&owner.cookie)
        .send()
        .await);
    assert_eq!((page["total"].clone(), page["members"].as_array().unwrap().len()), (json!(6), 2));
    assert_eq!(page["members"][0]["user"]["email"], "u0@example.com", "joining order: the owner first");
    assert_auth_error(
        &s.get(&format!("/api/auth/organization/list-members?organizationId={org}&sortBy=x"))
            .cookie(&owner.cookie)
            .send()
            .await,
        400,
        "VALIDATION_ERROR",
    );
    s.stop().await;
    let s = TestServer::start_in(dir.path()).await;
    let owner = s.login(&owner.email, PASSWORD).await;
    let page =
        ok(&s.get(&format!("/api/auth/organization/list-members?organizationId={org}")).cookie(&owner).send().await);
    assert_eq!(page["total"], 6);
    assert_eq!(page["members"][0]["role"], "owner");
    s.stop().await;
}

/// An organization's admin (and its owner) names another organization in every call of the plugin and reaches
/// nothing: reads answer 403, changes are refused, and that organization is as it was; no global administration
/// call answers them either (the console's organization admin page relies on exactly this).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_organization_admin_reaches_no_other_organization_and_no_global_call() {
    let (s, mail) = with_mail().await;
    let mut seen = Seen::new();
    let (owner, admin, other) = (s.new_user("o").await, s.new_user("a").await, s.new_user("x").await);
    let org = str_of(&create(&s, &owner.cookie, "mine").await["id"]).to_owned();
    let theirs = str_of(&create(&s, &other.cookie, "theirs").await["id"]).to_owned();
    join(&s, mail.path(), &mut seen, &owner.cookie, &org, &admin, "admin").await;
    let pending = ok(&post(
        &s,
        "invite-member",
        &other.cookie,
        &json!({"email": "new@example.com", "role": "member", "organizationId": theirs}),
    )
    .await);
    let listed = ok(&s
        .get(&format!("/api/auth/organization/list-members?organizationId={theirs}"))
        .cookie(&other.cookie)
        .send()
        .await);
    let their_owner = listed["members"][0]["id"].clone();
    let before =
        (listed.clone(), ok(&get(&s, &format!("list-invitations?organizationId={theirs}"), &other.cookie).await));

    for (who, cookie) in [("admin", admin.cookie.as_str()), ("owner", &owner.cookie)] {
        for read in [
            format!("get-full-organization?organizationId={theirs}"),
            format!("list-members?organizationId={theirs}"),
            format!("list-invitations?organizationId={theirs}"),
            format!("get-active-member-role?organizationId={theirs}"),
        ] {
            assert_eq!(get(&s, &read, cookie).await.status, 403, "{who}: {read}");
        }
        assert_eq!(post(&s, "set-active", cookie, &json!({"organizationId": theirs})).await.status, 403, "{who}");
        let changes = [
            ("update", json!({"organizationId": theirs, "data": {"name": "Taken over"}})),
            ("delete", json!({"organizationId": theirs})),
            ("invite-member", json!({"organizationId": theirs, "email": "mole@example.com", "role": "admin"})),
            ("update-member-role", json!({"organizationId": theirs, "memberId": their_owner, "role": "member"})),
            ("remove-member", json!({"organizationId": theirs, "memberIdOrEmail": other.email})),
            ("cancel-invitation", json!({"invitationId": pending["id"]})),
            ("has-permission", json!({"organizationId": theirs, "permissions": {"member": ["delete"]}})),
            // Their own organization's id with the other's member: not found there.
            ("update-member-role", json!({"organizationId": org, "memberId": their_owner, "role": "member"})),
            ("remove-member", json!({"organizationId": org, "memberIdOrEmail": other.email})),
        ];
        for (call, body) in changes {
            let r = post(&s, call, cookie, &body).await;
            assert!((400..500).contains(&r.status), "{who}: {call} {body} answered {}: {}", r.status, r.text);
            assert_auth_error_shape(&r);
        }
        for path in [
            "/api/admin/status",
            "/api/admin/users",
            "/api/admin/users/export",
            "/api/admin/organizations",
            &format!("/api/admin/organizations/{theirs}"),
            &format!("/api/admin/organizations/{theirs}/members"),
            "/api/admin/audit",
            "/api/admin/stats",
            "/api/admin/webhooks",
            "/api/auth/admin/list-users",
        ] {
            assert_eq!(s.get(path).cookie(cookie).send().await.status, 403, "{who}: GET {path}");
        }
        let r = s
            .post("/api/auth/admin/set-role")
            .cookie(cookie)
            .json(&json!({"userId": other.id, "role": "admin"}))
            .send()
            .await;
        assert_eq!(r.status, 403, "{who}: set-role");
        let r = s
            .patch("/api/admin/users")
            .cookie(cookie)
            .json(&json!({"userId": other.id, "organizationId": org}))
            .send()
            .await;
        assert_eq!(r.status, 403, "{who}: PATCH /api/admin/users");
    }
    let after = (
        ok(&s
            .get(&format!("/api/auth/organization/list-members?organizationId={theirs}"))
            .cookie(&other.cookie)
            .send()
            .await),
        ok(&get(&s, &format!("list-invitations?organizationId={theirs}"), &other.cookie).await),
    );
    assert_eq!(before, after, "the other organization is as it was");
    assert_eq!(
        ok(&get(&s, &format!("get-full-organization?organizationId={theirs}"), &other.cookie).await)["name"],
        "Org theirs"
    );
}

/// Whether `cookie`'s user is a member of `org`, and the organization its session works in.
async fn joined_and_active(s: &TestServer, cookie: &str, org: &str) -> (bool, Value) {
    let listed = ok(&get(s, "list", cookie).await);
    let member = listed.as_array().unwrap().iter().any(|o| o["id"] == org);
    (member, s.session(cookie).await["session"]["activeOrganizationId"].clone())
}

/// Joining (accept-invitation) and leaving (leave; remove-member of oneself takes the same path) change the session's active
/// organization in the same commit as the membership: a store failure at any point finds both changes or
/// neither, never a member whose session works elsewhere or a former member whose session still names the
/// organization (each was once two commits: a failure between them answered 503 with the first one made).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_failure_when_joining_or_leaving_leaves_the_membership_and_the_active_organization_together() {
    let dir = tempfile::tempdir().unwrap();
    let faults = service_auth::store::FaultSwitch::default();
    let s = TestServer::start_with_faults(test_config(dir.path()), faults.clone()).await;
    let owner = s.new_user("fault-owner").await;
    let org = create(&s, &owner.cookie, "faulty").await["id"].as_str().unwrap().to_owned();
    // The first commit of the change fails; then the second one (the first one spared).
    for (n, spared) in [0, 1].into_iter().enumerate() {
        let bob = s.new_user(&format!("fault-joiner-{n}")).await;
        let invited =
            ok(&post(&s, "invite-member", &owner.cookie, &json!({"email": bob.email, "role": "member"})).await);
        let id = invited["id"].as_str().unwrap().to_owned();
        faults.fail_commits_after(spared, 1);
        let r = post(&s, "accept-invitation", &bob.cookie, &json!({"invitationId": id})).await;
        faults.fail_next_commits(0);
        let after = joined_and_active(&s, &bob.cookie, &org).await;
        match r.status {
            200 => assert_eq!(after, (true, json!(org)), "spared {spared}: accepted"),
            503 => {
                assert_eq!(after, (false, Value::Null), "spared {spared}: half an acceptance");
                ok(&post(&s, "accept-invitation", &bob.cookie, &json!({"invitationId": id})).await);
            }
            other => panic!("spared {spared}: {other} {}", r.text),
        }
        assert_eq!(joined_and_active(&s, &bob.cookie, &org).await, (true, json!(org)));

        let (call, body) = ("leave", json!({"organizationId": org}));
        faults.fail_commits_after(spared, 1);
        let r = post(&s, call, &bob.cookie, &body).await;
        faults.fail_next_commits(0);
        let after = joined_and_active(&s, &bob.cookie, &org).await;
        match r.status {
            200 => assert_eq!(after, (false, Value::Null), "spared {spared}: {call}"),
            503 => assert_eq!(after, (true, json!(org)), "spared {spared}: half a {call}"),
            other => panic!("spared {spared}: {call}: {other} {}", r.text),
        }
    }
    s.stop().await;
}

/// The id of the organization `slug` if `cookie`'s user is a member of it, and the organization its session works in.
async fn owned_and_active(s: &TestServer, cookie: &str, slug: &str) -> (Option<String>, Value) {
    let listed = ok(&get(s, "list", cookie).await);
    let id = listed.as_array().unwrap().iter().find(|o| o["slug"] == slug).map(|o| o["id"].as_str().unwrap().into());
    (id, s.session(cookie).await["session"]["activeOrganizationId"].clone())
}

/// `create` makes the organization, its owner and the creator's session's active organization one commit (it was
/// two: a failure at the second answered 503 with an organization made and the session not working in it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn creating_an_organization_with_a_store_failure_leaves_both_or_neither() {
    let dir = tempfile::tempdir().unwrap();
    let faults = service_auth::store::FaultSwitch::default();
    let s = TestServer::start_with_faults(test_config(dir.path()), faults.clone()).await;
    // The first commit of the request fails; then the second one (the first one spared).
    for spared in [0, 1] {
        let owner = s.new_user(&format!("create-fault-{spared}")).await;
        let slug = format!("create-fault-{spared}");
        let body = json!({"name": "Faulty", "slug": slug});
        faults.fail_commits_after(spared, 1);
        let r = post(&s, "create", &owner.cookie, &body).await;
        faults.fail_next_commits(0);
        let (id, active) = owned_and_active(&s, &owner.cookie, &slug).await;
        match r.status {
            200 => {
                assert_eq!(id.as_deref(), r.json()["id"].as_str(), "spared {spared}: created");
                assert_eq!(active, json!(id), "spared {spared}: the session works in it");
            }
            503 => assert_eq!((id, active), (None, Value::Null), "spared {spared}: half a creation"),
            other => panic!("spared {spared}: {other} {}", r.text),
        }
    }
    s.stop().await;
}

/// `delete` of the organization the caller's session works in clears it in the deletion's commit (it was two: a
/// failure at the second answered 503 with the organization gone and the session still naming it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_an_organization_with_a_store_failure_leaves_both_or_neither() {
    let dir = tempfile::tempdir().unwrap();
    let faults = service_auth::store::FaultSwitch::default();
    let s = TestServer::start_with_faults(test_config(dir.path()), faults.clone()).await;
    for spared in [0, 1] {
        let owner = s.new_user(&format!("delete-fault-{spared}")).await;
        let slug = format!("delete-fault-{spared}");
        let org = create(&s, &owner.cookie, &slug).await["id"].as_str().unwrap().to_owned();
        assert_eq!(owned_and_active(&s, &owner.cookie, &slug).await, (Some(org.clone()), json!(org)));
        faults.fail_commits_after(spared, 1);
        let r = post(&s, "delete", &owner.cookie, &json!({"organizationId": org})).await;
        faults.fail_next_commits(0);
        let after = owned_and_active(&s, &owner.cookie, &slug).await;
        match r.status {
            200 => assert_eq!(after, (None, Value::Null), "spared {spared}: deleted"),
            503 => assert_eq!(after, (Some(org.clone()), json!(org)), "spared {spared}: half a deletion"),
            other => panic!("spared {spared}: {other} {}", r.text),
        }
    }
    s.stop().await;
}
