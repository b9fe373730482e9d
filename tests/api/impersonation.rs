//! An impersonation is the user's session, never an administrator's: it cannot call an administrator's endpoint
//! whatever role the user is given, it ends when the administrator behind it is banned, demoted or removed, and
//! whatever it does is audited in that administrator's name.

use serde_json::{Value, json};

use super::harness::*;

async fn admin_call(s: &TestServer, path: &str, cookie: &str, body: &Value) -> Resp {
    s.post(&format!("/api/auth/admin/{path}")).cookie(cookie).json(body).send().await
}

/// A second administrator (`deputy`), signed in; its id and cookie.
async fn deputy(s: &TestServer, admin: &str) -> (String, String) {
    let deputy = s.new_user("deputy").await;
    s.patch_ok(admin, &json!({"userId": deputy.id, "role": "admin"})).await;
    (deputy.id, s.login(&deputy.email, PASSWORD).await)
}

/// `by` impersonates `user`: the impersonation's cookie.
async fn impersonate(s: &TestServer, by: &str, user: &str) -> String {
    let r = admin_call(s, "impersonate-user", by, &json!({"userId": user})).await;
    assert_eq!(r.status, 200, "{}", r.text);
    r.session_cookie().expect("the impersonation's cookie").value
}

/// The impersonation sessions `admin` sees for `user`.
async fn impersonations_of(s: &TestServer, admin: &str, user: &str) -> usize {
    let listed = admin_call(s, "list-user-sessions", admin, &json!({"userId": user})).await.json();
    listed["sessions"].as_array().unwrap().iter().filter(|s| !s["impersonatedBy"].is_null()).count()
}

/// Before: the deputy impersonated Bob, Bob was promoted, and the impersonation created an administrator (200) and
/// read every account. Now every administrator's call refuses it, as it refuses any non-administrator.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_impersonation_never_acts_as_an_administrator_even_of_a_promoted_user() {
    let s = TestServer::start().await;
    let admin = s.admin_session().await;
    let (_, deputy) = deputy(&s, &admin).await;
    let bob = s.new_user("bob").await;
    let acting = impersonate(&s, &deputy, &bob.id).await;
    s.patch_ok(&admin, &json!({"userId": bob.id, "role": "admin"})).await;
    assert_eq!(s.session(&acting).await["user"]["role"], "admin", "still Bob's session, Bob now an administrator");

    let backdoor =
        json!({"email": "backdoor@example.com", "name": "B", "password": "a backdoor password", "role": "admin"});
    assert_auth_error(
        &admin_call(&s, "create-user", &acting, &backdoor).await,
        403,
        "YOU_ARE_NOT_ALLOWED_TO_CREATE_USERS",
    );
    let r = s.get("/api/auth/admin/list-users").cookie(&acting).send().await;
    assert_auth_error(&r, 403, "YOU_ARE_NOT_ALLOWED_TO_LIST_USERS");
    assert_eq!(s.list_users(Some(&acting)).await.status, 403);
    assert_eq!(s.patch_user(&acting, &json!({"userId": bob.id, "role": "user"})).await.status, 403);
    assert_eq!(s.get("/api/admin/audit").cookie(&acting).send().await.status, 403);
    assert_eq!(s.get("/api/admin/status").cookie(&acting).send().await.status, 403);
    let r = admin_call(&s, "has-permission", &acting, &json!({"permissions": {"user": ["list"]}})).await;
    assert_eq!(r.json(), json!({"error": null, "success": false}));
    // A new password or a deletion is the administrator's own audited call, not the impersonation's.
    let r = s
        .post("/api/auth/change-password")
        .cookie(&acting)
        .json(&json!({"currentPassword": PASSWORD, "newPassword": "taken over password", "revokeOtherSessions": true}))
        .send()
        .await;
    assert_auth_error(&r, 403, "NOT_ALLOWED_WHILE_IMPERSONATING");
    let r = s.post("/api/auth/delete-user").cookie(&acting).json(&json!({"password": PASSWORD})).send().await;
    assert_auth_error(&r, 403, "NOT_ALLOWED_WHILE_IMPERSONATING");
    assert_eq!(s.sign_in("backdoor@example.com", "a backdoor password").await.0, 401, "no account was created");
    assert_eq!(s.sign_in(&bob.email, PASSWORD).await.0, 200, "Bob's password is his");
}

/// Before: after the primary administrator banned or removed the deputy, the deputy's impersonation kept working.
/// Now a ban, a demotion or a removal ends every session the administrator impersonates, in the same commit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn banning_demoting_or_removing_an_administrator_ends_their_impersonations() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start_in(dir.path()).await;
    let admin = s.admin_session().await;
    let bob = s.new_user("bob").await;
    for end in ["ban", "demote", "remove"] {
        let deputy = s.new_user(&format!("deputy-{end}")).await;
        s.patch_ok(&admin, &json!({"userId": deputy.id, "role": "admin"})).await;
        let deputy_cookie = s.login(&deputy.email, PASSWORD).await;
        let acting = impersonate(&s, &deputy_cookie, &bob.id).await;
        assert_eq!(impersonations_of(&s, &admin, &bob.id).await, 1);
        let r = match end {
            "ban" => admin_call(&s, "ban-user", &admin, &json!({"userId": deputy.id})).await,
            "demote" => admin_call(&s, "set-role", &admin, &json!({"userId": deputy.id, "role": "user"})).await,
            _ => admin_call(&s, "remove-user", &admin, &json!({"userId": deputy.id})).await,
        };
        assert_eq!(r.status, 200, "{end}: {}", r.text);
        assert_eq!(s.session(&acting).await, Value::Null, "{end}: the impersonation is over");
        let r = s.post("/api/auth/update-user").cookie(&acting).json(&json!({"name": "Hijacked"})).send().await;
        assert_auth_error(&r, 401, "UNAUTHORIZED");
        assert_eq!(impersonations_of(&s, &admin, &bob.id).await, 0, "{end}: ended, not only refused");
    }
    assert_ne!(s.session(&bob.cookie).await, Value::Null, "Bob's own session is his");
    // Durable: nothing of the three impersonations comes back after a restart.
    s.stop().await;
    let s = TestServer::start_in(dir.path()).await;
    let admin = s.admin_session().await;
    assert_eq!(impersonations_of(&s, &admin, &bob.id).await, 0);
}

/// Before: a change made through an impersonation was audited as the user's own, naming nobody else. Now every
/// row written through one names the administrator as its actor, the user as its target.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_an_impersonation_does_is_audited_as_its_administrator() {
    let s = TestServer::start().await;
    let admin = s.admin_session().await;
    let (deputy_id, deputy) = deputy(&s, &admin).await;
    let bob = s.new_user("bob").await;
    let acting = impersonate(&s, &deputy, &bob.id).await;
    let r = s.post("/api/auth/update-user").cookie(&acting).json(&json!({"name": "Robert"})).send().await;
    assert_eq!(r.status, 200, "{}", r.text);
    let r = s.post("/api/auth/revoke-other-sessions").cookie(&acting).json(&json!({})).send().await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(s.session(&bob.cookie).await, Value::Null, "Bob's other session ended");

    let entries = s.get("/api/admin/audit?limit=500").cookie(&admin).send().await.json();
    let entries = entries["entries"].as_array().unwrap();
    for action in ["user.profile_updated", "session.revoked"] {
        let row = entries.iter().find(|e| e["action"] == action).unwrap_or_else(|| panic!("no {action}: {entries:?}"));
        assert_eq!((&row["actor_id"], &row["target_id"]), (&json!(deputy_id), &json!(bob.id)), "{row}");
    }
    let profile = entries.iter().find(|e| e["action"] == "user.profile_updated").unwrap();
    assert!(profile["detail"].as_str().unwrap().contains("impersonating"), "{profile}");
}
