//! Roles an organization defines at runtime (the organization plugin's `dynamicAccessControl`,
//! `[organizations] dynamic_roles = true`): each role call and its refusals, who may define roles (`ac:*` on the
//! caller's roles, never granting more than they hold), a member given a custom role and what it then allows
//! (has-permission and the member calls), a role in use that cannot go, the audit trail, and roles after a
//! restart. On two nodes when the suite runs through `tests/cluster/run.sh`.

use serde_json::{Value, json};

use service_auth::config::Config;

use super::harness::*;
use super::org_plugin::{Seen, get, join, ok, post};

struct World {
    s: TestServer,
    mail: tempfile::TempDir,
    data: tempfile::TempDir,
    seen: Seen,
    /// The owner, and the organization's id.
    ann: TestUser,
    org: String,
}

fn config(data: &std::path::Path, mail: &std::path::Path) -> Config {
    let mut config = test_config(data);
    config.organizations.dynamic_roles = true;
    config.email.directory = Some(mail.to_owned());
    config
}

/// Ann's organization, with roles defined at runtime on.
async fn world(adjust: impl FnOnce(&mut Config)) -> World {
    let (data, mail) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut c = config(data.path(), mail.path());
    adjust(&mut c);
    let s = TestServer::start_with(c).await;
    let ann = s.new_user("ann").await;
    let org = ok(&post(&s, "create", &ann.cookie, &json!({"name": "St Mary", "slug": "st-mary"})).await);
    let org = str_of(&org["id"]).to_owned();
    World { s, mail, data, seen: Seen::new(), ann, org }
}

impl World {
    async fn member(&mut self, tag: &str, role: &str) -> TestUser {
        let user = self.s.new_user(tag).await;
        join(&self.s, self.mail.path(), &mut self.seen, &self.ann.cookie, &self.org, &user, role).await;
        ok(&post(&self.s, "set-active", &user.cookie, &json!({"organizationId": self.org})).await);
        user
    }

    /// `user`'s membership id, from list-members.
    async fn member_id(&self, user: &TestUser) -> String {
        let listed = ok(&get(&self.s, &format!("list-members?organizationId={}", self.org), &self.ann.cookie).await);
        let found = listed["members"].as_array().unwrap().iter().find(|m| m["userId"] == user.id.as_str()).cloned();
        str_of(&found.expect("a member")["id"]).to_owned()
    }

    async fn give(&self, user: &TestUser, role: &str) -> Resp {
        let id = self.member_id(user).await;
        post(&self.s, "update-member-role", &self.ann.cookie, &json!({"memberId": id, "role": role})).await
    }

    async fn allowed(&self, user: &TestUser, permissions: Value) -> bool {
        let r = ok(&post(&self.s, "has-permission", &user.cookie, &json!({"permissions": permissions})).await);
        r["success"].as_bool().unwrap()
    }
}

/// A refusal that names the permissions the caller lacks, beside the code (as the plugin's).
fn missing(r: &Resp, code: &str) {
    assert_eq!((r.status, r.json()["code"].clone()), (403, json!(code)), "{}", r.text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_role_calls_are_not_found_while_dynamic_roles_are_off() {
    let s = TestServer::start().await;
    let ann = s.new_user("ann").await;
    ok(&post(&s, "create", &ann.cookie, &json!({"name": "St Mary", "slug": "st-mary"})).await);
    let body = json!({"role": "inviter", "permission": {"invitation": ["create"]}});
    assert_auth_error(&post(&s, "create-role", &ann.cookie, &body).await, 404, "NOT_FOUND");
    assert_auth_error(&get(&s, "list-roles", &ann.cookie).await, 404, "NOT_FOUND");
    // And no custom role can be given: only owner, admin and member exist.
    let r = post(&s, "invite-member", &ann.cookie, &json!({"email": "bo@example.com", "role": "inviter"})).await;
    assert_eq!(r.status, 400, "{}", r.text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_role_is_created_listed_read_updated_and_deleted_on_the_plugins_wire() {
    let w = world(|_| ()).await;
    let (s, ann) = (&w.s, &w.ann);
    let body = json!({"role": "Inviter", "permission": {"invitation": ["create", "cancel"], "member": []}});
    let created = ok(&post(s, "create-role", &ann.cookie, &body).await);
    assert_eq!(created["success"], true);
    let role = &created["roleData"];
    assert_keys(role, &["id", "organizationId", "role", "permission", "createdAt", "updatedAt"]);
    assert_eq!(role["role"], "inviter", "lower-cased as the plugin does");
    assert_eq!((role["organizationId"].clone(), role["updatedAt"].clone()), (json!(w.org), Value::Null));
    assert_eq!(role["permission"], json!({"invitation": ["create", "cancel"], "member": []}));
    assert_eq!(created["statements"], role["permission"]);
    let id = str_of(&role["id"]).to_owned();

    let listed = ok(&get(s, &format!("list-roles?organizationId={}", w.org), &ann.cookie).await);
    assert_eq!(listed.as_array().unwrap().len(), 1, "only the organization's own roles: {listed}");
    assert_eq!(listed[0]["id"], id.as_str());
    let by_name = ok(&get(s, "get-role?roleName=inviter", &ann.cookie).await);
    let by_id = ok(&get(s, &format!("get-role?roleId={id}"), &ann.cookie).await);
    assert_eq!(by_name, by_id);
    assert_auth_error(&get(s, "get-role?roleName=ghost", &ann.cookie).await, 400, "ROLE_NOT_FOUND");
    assert_auth_error(&get(s, "get-role", &ann.cookie).await, 400, "VALIDATION_ERROR");

    // Refusals of create: a built-in or taken name, a resource outside the statements, a malformed set.
    let again = |role: &str, permission: Value| json!({"role": role, "permission": permission});
    let r = post(s, "create-role", &ann.cookie, &again("Owner", json!({}))).await;
    assert_auth_error(&r, 400, "ROLE_NAME_IS_ALREADY_TAKEN");
    let r = post(s, "create-role", &ann.cookie, &again("inviter", json!({}))).await;
    assert_auth_error(&r, 400, "ROLE_NAME_IS_ALREADY_TAKEN");
    let r = post(s, "create-role", &ann.cookie, &again("pm", json!({"project": ["read"]}))).await;
    assert_auth_error(&r, 400, "INVALID_RESOURCE");
    let r = post(s, "create-role", &ann.cookie, &again("pm", json!({"team": "create"}))).await;
    assert_auth_error(&r, 400, "VALIDATION_ERROR");
    let r = post(s, "create-role", &ann.cookie, &again("a,b", json!({}))).await;
    assert_auth_error(&r, 400, "VALIDATION_ERROR");
    // An action no role holds (not even the owner's) is refused as a permission the creator lacks.
    let r = post(s, "create-role", &ann.cookie, &again("pilot", json!({"team": ["fly"]}))).await;
    missing(&r, "YOU_ARE_NOT_ALLOWED_TO_CREATE_A_ROLE");
    assert_eq!(r.json()["missingPermissions"], json!(["team:fly"]));

    // Update: rename and replace the permission set.
    let change = json!({"roleId": id, "data": {"roleName": "Recruiter", "permission": {"invitation": ["create"]}}});
    let updated = ok(&post(s, "update-role", &ann.cookie, &change).await);
    assert_eq!(updated["roleData"]["role"], "recruiter");
    assert_eq!(updated["roleData"]["permission"], json!({"invitation": ["create"]}));
    assert!(updated["roleData"]["updatedAt"].is_string());
    let r = post(s, "update-role", &ann.cookie, &json!({"roleName": "ghost", "data": {}})).await;
    assert_auth_error(&r, 400, "ROLE_NOT_FOUND");
    let r = post(s, "update-role", &ann.cookie, &json!({"roleName": "recruiter", "data": {"roleName": "admin"}})).await;
    assert_auth_error(&r, 400, "ROLE_NAME_IS_ALREADY_TAKEN");

    // Delete: never a built-in role, an unknown one is not found, then gone.
    let r = post(s, "delete-role", &ann.cookie, &json!({"roleName": "member"})).await;
    assert_auth_error(&r, 400, "CANNOT_DELETE_A_PRE_DEFINED_ROLE");
    let r = post(s, "delete-role", &ann.cookie, &json!({"roleName": "ghost"})).await;
    assert_auth_error(&r, 400, "ROLE_NOT_FOUND");
    assert_eq!(
        ok(&post(s, "delete-role", &ann.cookie, &json!({"roleName": "recruiter"})).await),
        json!({"success": true})
    );
    assert_eq!(ok(&get(s, "list-roles", &ann.cookie).await), json!([]));

    let audit = ok(&s.get("/api/admin/audit?limit=100").cookie(&s.admin_session().await).send().await);
    let actions: Vec<&str> = audit["entries"].as_array().unwrap().iter().filter_map(|e| e["action"].as_str()).collect();
    for a in ["role.created", "role.updated", "role.deleted"] {
        assert!(actions.contains(&a), "{a} not audited: {actions:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_given_a_custom_role_holds_its_permissions_and_the_role_cannot_go_while_held() {
    let mut w = world(|_| ()).await;
    let bo = w.member("bo", "member").await;
    let cy = w.member("cy", "admin").await;
    let s = &w.s;

    // A plain member has `ac:read` only: no role of their own making.
    let inviter = json!({"role": "inviter", "permission": {"invitation": ["create"], "ac": ["read"]}});
    let r = post(s, "create-role", &bo.cookie, &inviter).await;
    assert_auth_error(&r, 403, "YOU_ARE_NOT_ALLOWED_TO_CREATE_A_ROLE");
    // An admin cannot grant what an admin does not hold (organization:delete).
    let r = post(s, "create-role", &cy.cookie, &json!({"role": "closer", "permission": {"organization": ["delete"]}}))
        .await;
    missing(&r, "YOU_ARE_NOT_ALLOWED_TO_CREATE_A_ROLE");
    assert_eq!(r.json()["missingPermissions"], json!(["organization:delete"]));
    ok(&post(s, "create-role", &cy.cookie, &inviter).await);

    // has-permission before and after the role is given.
    assert!(!w.allowed(&bo, json!({"invitation": ["create"]})).await);
    assert_auth_error(&w.give(&bo, "ghost").await, 400, "ROLE_NOT_FOUND");
    let given = ok(&w.give(&bo, "inviter").await);
    assert_eq!(given["role"], "inviter");
    assert!(w.allowed(&bo, json!({"invitation": ["create"]})).await, "the custom role grants it");
    assert!(!w.allowed(&bo, json!({"invitation": ["create", "cancel"]})).await, "and nothing more");
    assert!(!w.allowed(&bo, json!({"member": ["delete"]})).await);
    // The member calls judge it too: bo may now invite, but not cancel.
    let r = post(s, "invite-member", &bo.cookie, &json!({"email": "dee@example.com", "role": "member"})).await;
    let invitation = ok(&r);
    let r = post(s, "cancel-invitation", &bo.cookie, &json!({"invitationId": invitation["id"]})).await;
    assert_eq!(r.status, 403, "{}", r.text);
    // Together with a built-in role, as a comma list.
    let both = ok(&w.give(&bo, "member,inviter").await);
    assert_eq!(both["role"], "member,inviter");

    // Held: cannot be deleted; a permission change reaches its holder on the next request.
    let r = post(s, "delete-role", &w.ann.cookie, &json!({"roleName": "inviter"})).await;
    assert_auth_error(&r, 400, "ROLE_IS_ASSIGNED_TO_MEMBERS");
    let narrow = json!({"roleName": "inviter", "data": {"permission": {"ac": ["read"]}}});
    ok(&post(s, "update-role", &w.ann.cookie, &narrow).await);
    assert!(!w.allowed(&bo, json!({"invitation": ["create"]})).await, "the narrowed role no longer grants it");
    ok(&w.give(&bo, "member").await);
    ok(&post(s, "delete-role", &w.ann.cookie, &json!({"roleName": "inviter"})).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roles_and_the_members_holding_them_survive_a_restart() {
    let mut w = world(|c| c.organizations.maximum_roles = Some(1)).await;
    let bo = w.member("bo", "member").await;
    let body = json!({"role": "inviter", "permission": {"invitation": ["create"]}});
    ok(&post(&w.s, "create-role", &w.ann.cookie, &body).await);
    let r = post(&w.s, "create-role", &w.ann.cookie, &json!({"role": "second", "permission": {}})).await;
    assert_auth_error(&r, 400, "TOO_MANY_ROLES");
    ok(&w.give(&bo, "inviter").await);
    let before = ok(&get(&w.s, "list-roles", &w.ann.cookie).await);
    w.s.stop().await;
    let s = TestServer::start_with(config(w.data.path(), w.mail.path())).await;
    assert_eq!(ok(&get(&s, "list-roles", &w.ann.cookie).await), before);
    let r = ok(&post(&s, "has-permission", &bo.cookie, &json!({"permissions": {"invitation": ["create"]}})).await);
    assert_eq!(r["success"], true, "the member still holds the role");
}
