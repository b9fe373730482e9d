//! `/api/auth/admin/*`: the better-auth admin plugin's calls, with their guards.

use serde_json::{Value, json};

use super::harness::*;

async fn post(s: &TestServer, path: &str, cookie: &str, body: &Value) -> Resp {
    s.post(&format!("/api/auth/admin/{path}")).cookie(cookie).json(body).send().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_current_administrator_gets_in() {
    let s = TestServer::start().await;
    let u = s.new_user("plain").await;
    assert_auth_error(&s.get("/api/auth/admin/list-users").send().await, 401, "UNAUTHORIZED");
    let r = s.get("/api/auth/admin/list-users").cookie(&u.cookie).send().await;
    assert_auth_error(&r, 403, "YOU_ARE_NOT_ALLOWED_TO_LIST_USERS");
    let r = post(&s, "ban-user", &u.cookie, &json!({"userId": u.id})).await;
    assert_auth_error(&r, 403, "YOU_ARE_NOT_ALLOWED_TO_BAN_USERS");
    let r = post(&s, "has-permission", &u.cookie, &json!({"permissions": {"user": ["list"]}})).await;
    assert_eq!(r.json(), json!({"error": null, "success": false}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_users_searches_filters_sorts_and_pages() {
    let s = TestServer::start().await;
    let admin = s.admin_session().await;
    for tag in ["anna", "anders", "bob", "carla"] {
        s.new_user(tag).await;
    }
    let list = |q: &str| s.get(&format!("/api/auth/admin/list-users?{q}")).cookie(&admin).send();
    let r = list("searchValue=an&searchField=email&searchOperator=starts_with").await;
    assert_eq!(r.status, 200, "{}", r.text);
    let emails: Vec<String> =
        r.json()["users"].as_array().unwrap().iter().map(|u| u["email"].as_str().unwrap().to_owned()).collect();
    assert_eq!(emails, ["anna@example.com", "anders@example.com"]);
    assert_eq!(r.json()["total"], 2);
    let r = list("sortBy=email&sortDirection=desc&limit=2&offset=1").await.json();
    assert_eq!((r["total"].clone(), r["limit"].clone(), r["offset"].clone()), (json!(5), json!(2), json!(1)));
    let emails: Vec<&str> = r["users"].as_array().unwrap().iter().map(|u| u["email"].as_str().unwrap()).collect();
    assert_eq!(emails, ["bob@example.com", "anna@example.com"]);
    let r = list("filterField=role&filterValue=admin").await.json();
    assert_eq!(r["total"], 1);
    assert!(r.get("limit").is_none(), "limit only when given");
    assert_auth_error(&list("limit=lots").await, 400, "VALIDATION_ERROR");
    assert_auth_error(&list("searchValue=a&searchOperator=regex").await, 400, "VALIDATION_ERROR");
    // A misspelt filter is refused, not answered with every account.
    let r = list("searchValeu=anna").await;
    assert_auth_error(&r, 400, "VALIDATION_ERROR");
    assert!(r.json()["message"].as_str().unwrap().starts_with("unknown parameter `searchValeu`"), "{}", r.text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_get_set_role_ban_unban() {
    let s = TestServer::start().await;
    let admin = s.admin_session().await;
    let body =
        json!({"email": "staff@example.com", "name": "Staff", "password": "crew password 12", "role": "qa_manager"});
    let r = post(&s, "create-user", &admin, &body).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let id = r.json()["user"]["id"].as_str().unwrap().to_owned();
    assert_eq!(r.json()["user"]["role"], "qa_manager");
    assert_auth_error(&post(&s, "create-user", &admin, &body).await, 400, "USER_ALREADY_EXISTS_USE_ANOTHER_EMAIL");
    let bad_role = json!({"email": "x@example.com", "name": "X", "role": "superuser"});
    assert_auth_error(
        &post(&s, "create-user", &admin, &bad_role).await,
        400,
        "YOU_ARE_NOT_ALLOWED_TO_SET_NON_EXISTENT_VALUE",
    );
    // What it would not store is refused, not dropped: unknown fields, and the library's `data` unless empty.
    for (extra, message) in [
        (json!({"emailVerified": true}), "unknown field `emailVerified`"),
        (json!({"data": {"emailVerified": true}}), "[body.data] not taken at creation"),
        (json!({"data": "verified"}), "[body.data] Invalid input"),
    ] {
        let mut body = json!({"email": "extra@example.com", "name": "Extra", "password": "a spare password 1"});
        body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        let r = post(&s, "create-user", &admin, &body).await;
        assert_auth_error(&r, 400, "VALIDATION_ERROR");
        assert!(r.json()["message"].as_str().unwrap().starts_with(message), "{}", r.text);
    }
    let empty_data =
        json!({"email": "extra@example.com", "name": "Extra", "password": "a spare password 1", "data": {}});
    assert_eq!(post(&s, "create-user", &admin, &empty_data).await.status, 200, "an empty `data` asks for nothing");
    let staff = s.login("staff@example.com", "crew password 12").await;

    let r = s.get(&format!("/api/auth/admin/get-user?id={id}")).cookie(&admin).send().await;
    assert_eq!((r.status, r.json()["email"].clone()), (200, json!("staff@example.com")));
    let r = s.get(&format!("/api/auth/admin/get-user?id={id}&fields=email")).cookie(&admin).send().await;
    assert_auth_error(&r, 400, "VALIDATION_ERROR");
    let r = post(&s, "set-role", &admin, &json!({"userId": id, "role": "pharmacist_in_charge"})).await;
    assert_eq!(r.json()["user"]["role"], "pharmacist_in_charge");
    let r = post(&s, "set-role", &admin, &json!({"userId": id, "role": ["a", "b"]})).await;
    assert_auth_error(&r, 400, "INVALID_ROLE_TYPE");

    let r = post(&s, "ban-user", &admin, &json!({"userId": id, "banReason": "left"})).await;
    assert_eq!(
        (r.json()["user"]["banned"].clone(), r.json()["user"]["banReason"].clone()),
        (json!(true), json!("left"))
    );
    assert_eq!(s.session(&staff).await, Value::Null, "the ban ended the session");
    let me = s.session(&admin).await["user"]["id"].as_str().unwrap().to_owned();
    assert_auth_error(&post(&s, "ban-user", &admin, &json!({"userId": me})).await, 400, "YOU_CANNOT_BAN_YOURSELF");
    let r = post(&s, "unban-user", &admin, &json!({"userId": id})).await;
    assert_eq!(r.json()["user"]["banned"], false);
    let ghost = json!({"userId": "01890000-0000-7000-8000-000000000000"});
    assert_auth_error(&post(&s, "unban-user", &admin, &ghost).await, 404, "USER_NOT_FOUND");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_password_and_removal() {
    let s = TestServer::start().await;
    let admin = s.admin_session().await;
    let u = s.new_user("lost").await;
    let second = s.login(&u.email, PASSWORD).await;
    let r = post(&s, "list-user-sessions", &admin, &json!({"userId": u.id})).await;
    let sessions = r.json()["sessions"].as_array().unwrap().clone();
    assert_eq!(sessions.len(), 2);
    assert!(!r.text.contains(&u.cookie) && !r.text.contains(&second), "a session token was shown");
    let handle = sessions[0]["token"].as_str().unwrap().to_owned();
    assert_eq!(
        post(&s, "revoke-user-session", &admin, &json!({"sessionToken": handle})).await.json(),
        json!({"success": true})
    );
    assert_eq!(s.session(&u.cookie).await, Value::Null, "the oldest session ended");
    assert!(s.session(&second).await.is_object());

    let r = post(&s, "set-user-password", &admin, &json!({"userId": u.id, "newPassword": "set by the admin"})).await;
    assert_eq!((r.status, r.json()), (200, json!({"status": true})));
    assert_eq!(s.session(&second).await, Value::Null, "a set password ends every session");
    let third = s.login(&u.email, "set by the admin").await;
    assert_eq!(post(&s, "revoke-user-sessions", &admin, &json!({"userId": u.id})).await.status, 200);
    assert_eq!(s.session(&third).await, Value::Null);

    let me = s.session(&admin).await["user"]["id"].as_str().unwrap().to_owned();
    assert_auth_error(
        &post(&s, "remove-user", &admin, &json!({"userId": me})).await,
        400,
        "YOU_CANNOT_REMOVE_YOURSELF",
    );
    assert_eq!(post(&s, "remove-user", &admin, &json!({"userId": u.id})).await.json(), json!({"success": true}));
    assert_eq!(s.sign_in(&u.email, "set by the admin").await.0, 401);
    let r =
        post(&s, "has-permission", &admin, &json!({"permissions": {"user": ["ban", "list"], "session": ["revoke"]}}))
            .await;
    assert_eq!(r.json(), json!({"error": null, "success": true}));
    let r = post(&s, "has-permission", &admin, &json!({"permissions": {"user": ["impersonate-admins"]}})).await;
    assert_eq!(r.json()["success"], false);
    // A malformed question is refused rather than answered "no"; no question at all has the library's own answer.
    for malformed in [json!({"user": "list"}), json!({"user": ["list", 1]}), json!({"user": [null]}), json!(["user"])] {
        let r = post(&s, "has-permission", &admin, &json!({"permissions": malformed})).await;
        assert_auth_error(&r, 400, "VALIDATION_ERROR");
    }
    for missing in [json!({}), json!({"permissions": null})] {
        let r = post(&s, "has-permission", &admin, &missing).await;
        assert_eq!(r.status, 400);
        assert_eq!(r.json()["message"], "invalid permission check. no permission(s) were passed.");
    }
}

/// A field a call does not take is refused, and nothing is done: a misspelt `banExpiresIn` must not ban for good,
/// nor a stray field pass for a request that was understood.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fields_a_call_does_not_take_are_refused_and_nothing_is_done() {
    let s = TestServer::start().await;
    let admin = s.admin_session().await;
    let u = s.new_user("careful").await;
    for (path, body) in [
        ("ban-user", json!({"userId": u.id, "banExpires": 3600})),
        ("set-role", json!({"userId": u.id, "role": "qa_manager", "reason": "audit"})),
        ("set-user-password", json!({"userId": u.id, "newPassword": "another password 1", "revoke": false})),
        ("revoke-user-sessions", json!({"userId": u.id, "except": "current"})),
        ("revoke-user-session", json!({"sessionToken": "x", "userId": u.id})),
        ("remove-user", json!({"userId": u.id, "soft": true})),
        ("update-user", json!({"userId": u.id, "data": {"name": "Renamed"}, "notify": true})),
    ] {
        let r = post(&s, path, &admin, &body).await;
        assert_auth_error(&r, 400, "VALIDATION_ERROR");
        assert!(r.json()["message"].as_str().unwrap().starts_with("unknown field"), "{path}: {}", r.text);
    }
    let user = s.session(&u.cookie).await["user"].clone();
    assert_eq!((user["banned"].clone(), user["role"].clone()), (json!(false), json!("user")), "nothing was applied");
    assert_eq!(user["name"], "User careful");
    assert_eq!(
        s.sign_in("careful@example.com", PASSWORD).await.0,
        200,
        "the password and the account are as they were"
    );
}

/// The guards hold under concurrency: two administrators demoting each other at once leave one administrator.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_administrators_demoting_each_other_at_once_leave_one() {
    let s = TestServer::start().await;
    let first = s.admin_session().await;
    let b = s.new_user("second").await;
    assert_eq!(post(&s, "set-role", &first, &json!({"userId": b.id, "role": "admin"})).await.status, 200);
    let first_id = s.session(&first).await["user"]["id"].as_str().unwrap().to_owned();
    let (demote_b, demote_first) =
        (json!({"userId": b.id, "role": "user"}), json!({"userId": first_id, "role": "user"}));
    let (one, two) =
        tokio::join!(post(&s, "set-role", &first, &demote_b), post(&s, "set-role", &b.cookie, &demote_first),);
    let ok = [&one, &two].iter().filter(|r| r.status == 200).count();
    assert_eq!(ok, 1, "{} / {}: {} {}", one.status, two.status, one.text, two.text);
    let still_admin = if one.status == 200 { &first } else { &b.cookie };
    let admins = s.users(still_admin).await.iter().filter(|u| u["role"] == "admin").count();
    assert_eq!(admins, 1, "exactly one administrator is left");
}

/// The audit actions recorded so far, newest first.
async fn audit_actions(s: &TestServer, admin: &str) -> Vec<String> {
    let r = s.get("/api/admin/audit?limit=500").cookie(admin).send().await;
    r.json()["entries"].as_array().unwrap().iter().map(|e| e["action"].as_str().unwrap().to_owned()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ban_with_an_expiry_ends_by_itself() {
    let s = TestServer::start().await;
    let admin = s.admin_session().await;
    let u = s.new_user("brief").await;
    for bad in [json!(0), json!(-5), json!(1.5), json!("60"), json!(400_000_000)] {
        let r = post(&s, "ban-user", &admin, &json!({"userId": u.id, "banExpiresIn": bad})).await;
        assert_auth_error(&r, 400, "VALIDATION_ERROR");
    }
    let r = post(&s, "ban-user", &admin, &json!({"userId": u.id, "banReason": "cool off", "banExpiresIn": 1})).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let until = r.json()["user"]["banExpires"].as_str().expect("banExpires is set").to_owned();
    assert_eq!(s.session(&u.cookie).await, Value::Null, "the ban ended the session at once");
    assert_auth_error(&s.sign_in_body(&json!({"email": u.email, "password": PASSWORD})).await, 403, "BANNED_USER");
    tokio::time::sleep(std::time::Duration::from_millis(1300)).await;
    let (status, body, cookie) = s.sign_in(&u.email, PASSWORD).await;
    assert_eq!(status, 200, "the ban (until {until}) has ended: {body}");
    assert_ne!(s.session(&cookie.unwrap()).await, Value::Null);

    // The same through PATCH /api/admin/users; an expiry without a ban is refused.
    let r = s.patch_user(&admin, &json!({"userId": u.id, "banExpiresIn": 60})).await;
    assert_admin_error(&r, 400);
    s.patch_ok(&admin, &json!({"userId": u.id, "banned": true, "banExpiresIn": 3600})).await;
    let r = s.get(&format!("/api/auth/admin/get-user?id={}", u.id)).cookie(&admin).send().await;
    assert_eq!(r.json()["banned"], true);
    assert!(r.json()["banExpires"].is_string());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn update_user_changes_the_profile_and_refuses_what_it_may_not_change() {
    let s = TestServer::start().await;
    let admin = s.admin_session().await;
    let u = s.new_user("edited").await;
    let update = |data: Value| {
        let body = json!({"userId": u.id, "data": data});
        let (s, admin) = (&s, &admin);
        async move { post(s, "update-user", admin, &body).await }
    };
    let r = update(json!({"name": "Edited Name", "emailVerified": true, "role": "qa_manager"})).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let user = r.json();
    assert_eq!((user["name"].clone(), user["emailVerified"].clone()), (json!("Edited Name"), json!(true)));
    assert_eq!(user["role"], "qa_manager", "the answer is the bare user");
    assert_auth_error(&update(json!({})).await, 400, "NO_DATA_TO_UPDATE");
    assert_auth_error(
        &update(json!({"password": "new password 1"})).await,
        400,
        "PASSWORD_CANNOT_BE_UPDATED_VIA_UPDATE_USER",
    );
    assert_auth_error(&update(json!({"id": u.id})).await, 400, "USER_ID_CANNOT_BE_UPDATED");
    assert_auth_error(&update(json!({"email": "other@example.com"})).await, 400, "EMAIL_CANNOT_BE_UPDATED");
    assert_auth_error(
        &update(json!({"role": "superuser"})).await,
        400,
        "YOU_ARE_NOT_ALLOWED_TO_SET_NON_EXISTENT_VALUE",
    );
    assert_auth_error(&update(json!({"favourite": 1})).await, 400, "VALIDATION_ERROR");
    assert_auth_error(&update(json!({"name": "  "})).await, 400, "VALIDATION_ERROR");
    let admin_id = s.session(&admin).await["user"]["id"].as_str().unwrap().to_owned();
    let r = post(&s, "update-user", &admin, &json!({"userId": admin_id, "data": {"banned": true}})).await;
    assert_auth_error(&r, 400, "YOU_CANNOT_BAN_YOURSELF");
    // A ban here ends the sessions as ban-user does.
    let r = update(json!({"banned": true, "banReason": "spam"})).await;
    assert_eq!((r.json()["banned"].clone(), r.json()["banReason"].clone()), (json!(true), json!("spam")));
    assert_eq!(s.session(&u.cookie).await, Value::Null);
    let plain = s.new_user("plain").await;
    let r = post(&s, "update-user", &plain.cookie, &json!({"userId": u.id, "data": {"name": "X"}})).await;
    assert_auth_error(&r, 403, "YOU_ARE_NOT_ALLOWED_TO_UPDATE_USERS");
    let actions = audit_actions(&s, &admin).await;
    assert!(actions.contains(&"user.profile_updated".to_owned()), "{actions:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn impersonation_acts_as_the_user_for_at_most_an_hour_and_stops() {
    let s = TestServer::start().await;
    let admin = s.admin_session().await;
    let admin_id = s.session(&admin).await["user"]["id"].as_str().unwrap().to_owned();
    let u = s.new_user("helped").await;
    let other_admin = s.new_user("deputy").await;
    s.patch_ok(&admin, &json!({"userId": other_admin.id, "role": "admin"})).await;

    let r = post(&s, "impersonate-user", &admin, &json!({"userId": other_admin.id})).await;
    assert_auth_error(&r, 403, "YOU_CANNOT_IMPERSONATE_ADMINS");
    let r = post(&s, "impersonate-user", &u.cookie, &json!({"userId": other_admin.id})).await;
    assert_auth_error(&r, 403, "YOU_ARE_NOT_ALLOWED_TO_IMPERSONATE_USERS");
    assert_auth_error(&post(&s, "stop-impersonating", &admin, &json!({})).await, 400, "NOT_IMPERSONATING");

    let r = post(&s, "impersonate-user", &admin, &json!({"userId": u.id})).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let body = r.json();
    assert_eq!((body["user"]["id"].clone(), body["session"]["impersonatedBy"].clone()), (json!(u.id), json!(admin_id)));
    let lasts = ts(&body["session"]["expiresAt"]) - ts(&body["session"]["createdAt"]);
    assert!(lasts <= 3_600_000, "an impersonation lasts at most an hour, not {lasts} ms");
    let cookie = r.session_cookie().expect("the impersonation's cookie");
    assert_eq!(cookie.attr("max-age"), None, "it ends with the browser");
    let kept = r.set_cookies().into_iter().find(|c| c.name == "service-auth.admin_session").expect("admin cookie");
    assert_eq!(kept.value, admin, "the administrator's own session is kept aside");
    assert!(kept.attrs.contains_key("httponly"));
    let acting = cookie.value;
    assert_eq!(s.session(&acting).await["user"]["id"], json!(u.id));

    // Hidden from the user's own list, shown (with its mark) to administrators.
    let own = s.get("/api/auth/list-sessions").cookie(&u.cookie).send().await.json();
    assert_eq!(own.as_array().unwrap().len(), 1, "{own}");
    let listed = post(&s, "list-user-sessions", &admin, &json!({"userId": u.id})).await.json();
    let marks: Vec<Value> =
        listed["sessions"].as_array().unwrap().iter().map(|s| s["impersonatedBy"].clone()).collect();
    assert!(marks.contains(&json!(admin_id)) && marks.contains(&Value::Null), "{listed}");

    let both = format!("{COOKIE}={acting}; service-auth.admin_session={admin}");
    let r = s.post("/api/auth/admin/stop-impersonating").header("cookie", &both).json(&json!({})).send().await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json()["user"]["id"], json!(admin_id));
    assert_eq!(r.session_cookie().unwrap().value, admin, "back to the administrator's session");
    assert_eq!(s.session(&acting).await, Value::Null, "the impersonation session is over");
    assert_ne!(s.session(&admin).await, Value::Null);
    let actions = audit_actions(&s, &admin).await;
    let started = actions.iter().position(|a| a == "user.impersonation_started").expect("start audited");
    let stopped = actions.iter().position(|a| a == "user.impersonation_stopped").expect("stop audited");
    assert!(stopped < started, "newest first: {actions:?}");
}

/// Milliseconds of an RFC 3339 timestamp.
fn ts(v: &Value) -> i64 {
    chrono::DateTime::parse_from_rfc3339(v.as_str().unwrap()).unwrap().timestamp_millis()
}
