//! A signed-in user's own account, as the better-auth client calls it: change-password, update-user,
//! list-sessions, revoke-session(s), revoke-other-sessions, delete-user.

use serde_json::{Value, json};

use super::harness::*;

async fn call(s: &TestServer, path: &str, cookie: Option<&str>, body: &Value) -> Resp {
    s.post(&format!("/api/auth/{path}")).cookie_opt(cookie).json(body).send().await
}

fn is_live(session: &Value) -> bool {
    session.is_object()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_call_needs_a_session() {
    let s = TestServer::start().await;
    for path in
        ["change-password", "update-user", "revoke-session", "revoke-sessions", "revoke-other-sessions", "delete-user"]
    {
        assert_auth_error(&call(&s, path, None, &json!({})).await, 401, "UNAUTHORIZED");
    }
    assert_auth_error(&s.get("/api/auth/list-sessions").send().await, 401, "UNAUTHORIZED");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn change_password_checks_the_current_one_and_keeps_sessions_unless_told() {
    let s = TestServer::start().await;
    let u = s.new_user("pat").await;
    let other = s.login(&u.email, PASSWORD).await;
    let wrong = json!({"currentPassword": "not my password", "newPassword": "a new password 1"});
    assert_auth_error(&call(&s, "change-password", Some(&u.cookie), &wrong).await, 400, "INVALID_PASSWORD");
    let short = json!({"currentPassword": PASSWORD, "newPassword": "short"});
    assert_auth_error(&call(&s, "change-password", Some(&u.cookie), &short).await, 400, "PASSWORD_TOO_SHORT");

    let change = json!({"currentPassword": PASSWORD, "newPassword": "a new password 1"});
    let r = call(&s, "change-password", Some(&u.cookie), &change).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json()["token"], Value::Null);
    assert_auth_user(&r.json()["user"]);
    assert!(is_live(&s.session(&other).await), "another session ended without revokeOtherSessions");
    assert_eq!(s.sign_in(&u.email, PASSWORD).await.0, 401, "the old password still works");
    assert_eq!(s.sign_in(&u.email, "a new password 1").await.0, 200);
}

/// With `revokeOtherSessions` every session ends with the new password (one commit), and the caller gets a new
/// session and cookie.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn change_password_with_revoke_other_sessions_ends_them_all_and_starts_a_new_one() {
    let s = TestServer::start().await;
    let u = s.new_user("rev").await;
    let other = s.login(&u.email, PASSWORD).await;
    let change = json!({"currentPassword": PASSWORD, "newPassword": "a new password 2", "revokeOtherSessions": true});
    let r = call(&s, "change-password", Some(&u.cookie), &change).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let token = r.json()["token"].as_str().expect("a new token").to_owned();
    assert_eq!(assert_session_set_cookie(&r, true), token);
    assert_eq!(s.session(&other).await, Value::Null, "another session survived");
    assert_eq!(s.session(&u.cookie).await, Value::Null, "the old session of the caller survived");
    assert_eq!(s.session(&token).await["user"]["id"], u.id.as_str());
}

/// A wrong current password counts as a failed sign-in for that e-mail.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_current_passwords_count_toward_the_account_limit() {
    let s = TestServer::start_adjusted(|c| c.rate_limit.failures_per_account = 2).await;
    let u = s.new_user("guess").await;
    let wrong = json!({"currentPassword": "not my password", "newPassword": "a new password 3"});
    for _ in 0..2 {
        assert_eq!(call(&s, "change-password", Some(&u.cookie), &wrong).await.status, 400);
    }
    assert_eq!(call(&s, "change-password", Some(&u.cookie), &wrong).await.status, 429);
    assert_eq!(s.sign_in(&u.email, PASSWORD).await.0, 429, "sign-in shares the limit");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn update_user_changes_name_and_picture_only() {
    let s = TestServer::start().await;
    let u = s.new_user("upd").await;
    let r =
        call(&s, "update-user", Some(&u.cookie), &json!({"name": "New Name", "image": "https://cdn.example/p.png"}))
            .await;
    assert_eq!((r.status, r.json()), (200, json!({"status": true})));
    let me = s.session(&u.cookie).await;
    assert_eq!(
        (me["user"]["name"].clone(), me["user"]["image"].clone()),
        (json!("New Name"), json!("https://cdn.example/p.png"))
    );
    assert_eq!(call(&s, "update-user", Some(&u.cookie), &json!({"image": null})).await.status, 200);
    assert_eq!(s.session(&u.cookie).await["user"]["image"], Value::Null);

    let refused = [
        (json!({"email": "other@example.com"}), "EMAIL_CAN_NOT_BE_UPDATED"),
        (json!({"role": "admin"}), "FIELD_NOT_ALLOWED"),
        (json!({"password": "whatever123"}), "FIELD_NOT_ALLOWED"),
        (json!({}), "NO_FIELDS_TO_UPDATE"),
        (json!({"image": "javascript:alert(1)"}), "VALIDATION_ERROR"),
        (json!({"name": "  "}), "VALIDATION_ERROR"),
    ];
    for (body, code) in refused {
        assert_auth_error(&call(&s, "update-user", Some(&u.cookie), &body).await, 400, code);
    }
    assert_eq!(s.session(&u.cookie).await["user"]["role"], "user");
}

/// A misspelt option is refused, not taken for its absence: `revokeOtherSession` must not keep every other session
/// while the caller believes them ended. Nothing is done.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_field_a_call_does_not_take_is_refused_and_nothing_is_done() {
    let s = TestServer::start().await;
    let u = s.new_user("typo").await;
    let other = s.login("typo@example.com", PASSWORD).await;
    for (path, body) in [
        (
            "change-password",
            json!({"currentPassword": PASSWORD, "newPassword": "a new password 1", "revokeOtherSession": true}),
        ),
        ("revoke-session", json!({"token": other, "everywhere": true})),
        ("delete-user", json!({"password": PASSWORD, "callbackURL": "/bye"})),
    ] {
        let r = call(&s, path, Some(&u.cookie), &body).await;
        assert_auth_error(&r, 400, "VALIDATION_ERROR");
        assert!(r.json()["message"].as_str().unwrap().starts_with("unknown field"), "{path}: {}", r.text);
    }
    assert_eq!(s.session(&other).await["user"]["email"], "typo@example.com", "the other session lives");
    assert_eq!(s.sign_in("typo@example.com", PASSWORD).await.0, 200, "the password is the old one");
}

/// Only hashes of tokens are stored: the caller's own session shows its token, the others an opaque handle that
/// revoke-session accepts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_sessions_shows_the_callers_sessions_and_revoke_session_takes_a_handle() {
    let s = TestServer::start().await;
    let u = s.new_user("ls").await;
    let second = s.login(&u.email, PASSWORD).await;
    let stranger = s.new_user("stranger").await;
    let r = s.get("/api/auth/list-sessions").cookie(&u.cookie).send().await;
    assert_eq!(r.status, 200, "{}", r.text);
    let listed = r.json().as_array().unwrap().clone();
    assert_eq!(listed.len(), 2, "{listed:?}");
    listed.iter().for_each(|l| assert_keys(l, SESSION_KEYS));
    let tokens: Vec<&str> = listed.iter().map(|l| l["token"].as_str().unwrap()).collect();
    assert!(tokens.contains(&u.cookie.as_str()), "the caller's own token");
    assert!(!tokens.contains(&second.as_str()), "another session's secret token was shown");
    let handle = listed.iter().find(|l| l["token"] != u.cookie.as_str()).unwrap()["token"].as_str().unwrap().to_owned();

    // Someone else's token: same answer, nothing ends.
    assert_eq!(call(&s, "revoke-session", Some(&u.cookie), &json!({"token": stranger.cookie})).await.status, 200);
    assert!(is_live(&s.session(&stranger.cookie).await), "a user ended someone else's session");
    let r = call(&s, "revoke-session", Some(&u.cookie), &json!({"token": handle})).await;
    assert_eq!((r.status, r.json()), (200, json!({"status": true})));
    assert_eq!(s.session(&second).await, Value::Null, "the handle did not end the session");
    let r = call(&s, "revoke-session", Some(&u.cookie), &json!({"token": u.cookie})).await;
    assert_clears_session_cookie(&r);
    assert_eq!(s.session(&u.cookie).await, Value::Null);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revoke_other_sessions_keeps_the_current_one_and_revoke_sessions_ends_all() {
    let s = TestServer::start().await;
    let u = s.new_user("many").await;
    let (a, b) = (s.login(&u.email, PASSWORD).await, s.login(&u.email, PASSWORD).await);
    let r = call(&s, "revoke-other-sessions", Some(&u.cookie), &json!({})).await;
    assert_eq!((r.status, r.json()), (200, json!({"status": true})));
    assert!(is_live(&s.session(&u.cookie).await));
    assert_eq!((s.session(&a).await, s.session(&b).await), (Value::Null, Value::Null));
    let c = s.login(&u.email, PASSWORD).await;
    let r = s.post("/api/auth/revoke-sessions").cookie(&c).send().await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_clears_session_cookie(&r);
    assert_eq!((s.session(&u.cookie).await, s.session(&c).await), (Value::Null, Value::Null));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_user_needs_the_password_and_removes_account_sessions_and_membership_for_good() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start_in(dir.path()).await;
    let admin = s.admin_session().await;
    let u = s.new_user("bye").await;
    let org = s.new_org(&admin, "Org", "org").await;
    s.patch_ok(&admin, &json!({"userId": u.id, "organizationId": org["id"]})).await;
    let other = s.login(&u.email, PASSWORD).await;
    let r = call(&s, "delete-user", Some(&u.cookie), &json!({"password": "not my password"})).await;
    assert_auth_error(&r, 400, "INVALID_PASSWORD");
    let r = call(&s, "delete-user", Some(&u.cookie), &json!({"password": PASSWORD})).await;
    assert_eq!((r.status, r.json()), (200, json!({"success": true, "message": "User deleted"})));
    assert_clears_session_cookie(&r);
    assert_eq!((s.session(&u.cookie).await, s.session(&other).await), (Value::Null, Value::Null));
    assert_eq!(s.sign_in(&u.email, PASSWORD).await.0, 401);
    assert!(s.users(&admin).await.iter().all(|x| x["id"] != u.id.as_str()));
    s.stop().await;

    let s = TestServer::start_in(dir.path()).await;
    let admin = s.admin_session().await;
    assert!(s.users(&admin).await.iter().all(|x| x["id"] != u.id.as_str()), "back after a restart");
    let (status, _, _) = s.sign_up("Again", &u.email, PASSWORD).await;
    assert_eq!(status, 200, "the e-mail is free again");
    let actions: Vec<String> = s.get("/api/admin/audit?limit=500").cookie(&admin).send().await.json()["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["action"].as_str().unwrap().to_owned())
        .collect();
    assert!(actions.contains(&"user.deleted".to_owned()), "{actions:?}");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_last_administrator_cannot_delete_their_account() {
    let s = TestServer::start().await;
    let admin = s.admin_session().await;
    let r = call(&s, "delete-user", Some(&admin), &json!({"password": ADMIN_PASSWORD})).await;
    assert_auth_error(&r, 400, "LAST_ADMINISTRATOR");
    assert!(is_live(&s.session(&admin).await));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn password_changes_and_revocations_are_audited() {
    let s = TestServer::start().await;
    let admin = s.admin_session().await;
    let u = s.new_user("aud").await;
    let change = json!({"currentPassword": PASSWORD, "newPassword": "a new password 4"});
    assert_eq!(call(&s, "change-password", Some(&u.cookie), &change).await.status, 200);
    s.login(&u.email, "a new password 4").await;
    assert_eq!(call(&s, "revoke-other-sessions", Some(&u.cookie), &json!({})).await.status, 200);
    let entries = s.get("/api/admin/audit?limit=500").cookie(&admin).send().await.json()["entries"].clone();
    let of_user: Vec<&str> = entries
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["target_id"] == u.id.as_str())
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    assert!(of_user.contains(&"user.password_changed") && of_user.contains(&"session.revoked"), "{of_user:?}");
    assert!(!entries.to_string().contains("a new password 4"), "a password in the audit log");
}

/// The reset link of the next message written to `dir` (the `.eml` files of `[email] directory`), once there are
/// more than `seen`.
async fn next_reset_token(dir: &std::path::Path, seen: &mut usize) -> String {
    let started = std::time::Instant::now();
    let files = loop {
        let mut files: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "eml"))
            .collect();
        if files.len() > *seen {
            files.sort_by_key(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok());
            break files;
        }
        assert!(started.elapsed().as_secs() < 10, "no message after {seen}");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    *seen = files.len();
    let text = std::fs::read_to_string(files.last().unwrap()).unwrap().replace("=\r\n", "").replace("=\n", "");
    let at = text.find("/api/auth/reset-password/").expect("a reset link") + "/api/auth/reset-password/".len();
    text[at..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_').collect()
}
/// Before: a link asked for before a password change (even one that ended every other session) or before an
/// administrator's set-user-password still reset the password afterwards. Now each of them, and a reset, ends
/// every outstanding link of the account in the same commit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_password_ends_every_outstanding_reset_link() {
    let mail = tempfile::tempdir().unwrap();
    let dir = mail.path().to_owned();
    let s = TestServer::start_adjusted(|c| c.email.directory = Some(dir)).await;
    let admin = s.admin_session().await;
    let u = s.new_user("linked").await;
    let mut seen = 0;
    let request = || s.post("/api/auth/request-password-reset").json(&json!({"email": u.email})).send();
    let reset = |token: String, password: &str| {
        s.post("/api/auth/reset-password").json(&json!({"token": token, "newPassword": password})).send()
    };

    assert_eq!(request().await.status, 200);
    let before_change = next_reset_token(mail.path(), &mut seen).await;
    let body = json!({"currentPassword": PASSWORD, "newPassword": "changed password 1", "revokeOtherSessions": true});
    let r = call(&s, "change-password", Some(&u.cookie), &body).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_auth_error(&reset(before_change, "the attacker's password").await, 400, "INVALID_TOKEN");

    assert_eq!(request().await.status, 200);
    let before_set = next_reset_token(mail.path(), &mut seen).await;
    let set = json!({"userId": u.id, "newPassword": "set by the admin 1"});
    let r = s.post("/api/auth/admin/set-user-password").cookie(&admin).json(&set).send().await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_auth_error(&reset(before_set, "the attacker's password").await, 400, "INVALID_TOKEN");
    assert_eq!(s.sign_in(&u.email, "set by the admin 1").await.0, 200, "the administrator's password holds");

    // A reset that works ends the link it used (and any other) too.
    assert_eq!(request().await.status, 200);
    let link = next_reset_token(mail.path(), &mut seen).await;
    assert_eq!(reset(link.clone(), "reset password 1").await.status, 200);
    assert_auth_error(&reset(link, "reset password 2").await, 400, "INVALID_TOKEN");
}

/// ASVS 7.5.1 (better-auth's `freshAge`, `[session] fresh_age_secs`): a session older than the window cannot change
/// the password or the second factor, nor list the sessions; signing in again gives a session that can. A window of
/// one second stands in for the default day.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_old_session_must_sign_in_again_to_change_the_password_or_the_second_factor() {
    let s = TestServer::start_adjusted(|c| c.session.fresh_age_secs = 1).await;
    let u = s.new_user("stale").await;
    tokio::time::sleep(std::time::Duration::from_millis(1_100)).await;
    let change = json!({"currentPassword": PASSWORD, "newPassword": "a sound new passphrase"});
    let password = json!({"password": PASSWORD});
    let calls = [
        ("change-password", &change),
        ("two-factor/enable", &password),
        ("two-factor/generate-backup-codes", &password),
        ("two-factor/disable", &password),
    ];
    for (path, body) in calls {
        assert_auth_error(&call(&s, path, Some(&u.cookie), body).await, 403, "SESSION_NOT_FRESH");
    }
    assert_auth_error(&s.get("/api/auth/list-sessions").cookie(&u.cookie).send().await, 403, "SESSION_NOT_FRESH");
    // The old session still works for everything else.
    assert_eq!(s.session(&u.cookie).await["user"]["id"], u.id.as_str());

    let fresh = s.login(&u.email, PASSWORD).await;
    let r = call(&s, "two-factor/enable", Some(&fresh), &password).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let r = call(&s, "change-password", Some(&fresh), &change).await;
    assert_eq!(r.status, 200, "{}", r.text);
}
