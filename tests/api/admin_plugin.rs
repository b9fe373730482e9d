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
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_get_set_role_ban_unban() {
    let s = TestServer::start().await;
    let admin = s.admin_session().await;
    let body =
        json!({"email": "staff@example.com", "name": "Staff", "password": "staff password 1", "role": "qa_manager"});
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
    let staff = s.login("staff@example.com", "staff password 1").await;

    let r = s.get(&format!("/api/auth/admin/get-user?id={id}")).cookie(&admin).send().await;
    assert_eq!((r.status, r.json()["email"].clone()), (200, json!("staff@example.com")));
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
    let r = post(&s, "ban-user", &admin, &json!({"userId": id, "banExpiresIn": 60})).await;
    assert_auth_error(&r, 400, "BAN_EXPIRY_NOT_SUPPORTED");
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
