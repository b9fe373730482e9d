//! API keys over HTTP, as `@better-auth/api-key`'s client calls them (`/api/auth/api-key/*`), and a key in
//! `x-api-key` as its owner's session. The real client drives the same calls in tests/clients.

use serde_json::{Value, json};

use super::harness::{BOOTSTRAP_ENV, ChildServer, Client, Resp, TestServer, str_of};

const KEYS: &str = "/api/auth/api-key";

async fn create(c: &Client, cookie: &str, body: &Value) -> Resp {
    c.post(&format!("{KEYS}/create")).cookie(cookie).json(body).send().await
}

async fn created(c: &Client, cookie: &str, body: &Value) -> Value {
    let r = create(c, cookie, body).await;
    assert_eq!(r.status, 200, "create: {}", r.text);
    r.json()
}

fn code(r: &Resp) -> String {
    r.json()["code"].as_str().unwrap_or_default().to_owned()
}

fn refused(r: &Resp, status: u16, expected: &str) {
    assert_eq!((r.status, code(r).as_str()), (status, expected), "{}", r.text);
}

async fn with_key(c: &Client, path: &str, key: &str) -> Resp {
    c.get(path).header("x-api-key", key).send().await
}

#[tokio::test]
async fn a_key_is_shown_once_with_the_plugins_defaults_and_listed_got_updated_and_deleted_by_its_owner() {
    let s = TestServer::start().await;
    let c = &s.client;
    let u = c.new_user("keys-owner").await;
    let made = created(c, &u.cookie, &json!({"name": "ci", "prefix": "sa_", "expiresIn": 86_400 * 30})).await;
    let key = str_of(&made["key"]).to_owned();
    assert_eq!(key.len(), 3 + 64, "{made}");
    assert!(key.starts_with("sa_") && key[3..].bytes().all(|b| b.is_ascii_alphabetic()), "{key}");
    assert_eq!(made["start"], json!(key[..6]));
    assert_eq!(made["prefix"], "sa_");
    assert_eq!(made["referenceId"], json!(u.id));
    assert_eq!(made["configId"], "default");
    assert_eq!(made["enabled"], true);
    assert_eq!(made["rateLimitEnabled"], true);
    assert_eq!(made["rateLimitTimeWindow"], 86_400_000);
    assert_eq!(made["rateLimitMax"], 10);
    assert_eq!(made["requestCount"], 0);
    assert_eq!(made["permissions"], Value::Null);
    assert_eq!(made["metadata"], Value::Null);
    assert!(made["expiresAt"].is_string());
    let id = str_of(&made["id"]).to_owned();

    let got = c.get(&format!("{KEYS}/get?id={id}")).cookie(&u.cookie).send().await;
    assert_eq!(got.status, 200, "{}", got.text);
    assert!(got.json().get("key").is_none(), "the secret is shown once: {}", got.text);
    assert_eq!(got.json()["name"], "ci");

    created(c, &u.cookie, &json!({})).await;
    let listed = c.get(&format!("{KEYS}/list")).cookie(&u.cookie).send().await.json();
    assert_eq!(listed["total"], 2);
    assert_eq!(listed["apiKeys"][0]["id"], json!(id));
    assert!(listed.get("limit").is_none());
    let page = c.get(&format!("{KEYS}/list?limit=1&offset=1&sortBy=createdAt&sortDirection=desc")).cookie(&u.cookie);
    let page = page.send().await.json();
    assert_eq!((page["total"].clone(), page["limit"].clone(), page["offset"].clone()), (json!(2), json!(1), json!(1)));
    assert_eq!(page["apiKeys"][0]["id"], json!(id), "oldest last going down, skipped one: {page}");

    let update = |body: Value| c.post(&format!("{KEYS}/update")).cookie(&u.cookie).json(&body).send();
    let changed = update(json!({"keyId": id, "name": "renamed", "enabled": false, "expiresIn": null})).await;
    assert_eq!(changed.status, 200, "{}", changed.text);
    assert_eq!((changed.json()["name"].clone(), changed.json()["enabled"].clone()), (json!("renamed"), json!(false)));
    assert_eq!(changed.json()["expiresAt"], Value::Null);
    refused(&update(json!({"keyId": id})).await, 400, "NO_VALUES_TO_UPDATE");
    refused(&update(json!({"keyId": id, "expiresIn": 60})).await, 400, "EXPIRES_IN_IS_TOO_SMALL");
    refused(&update(json!({"keyId": id, "expiresIn": 86_400 * 366})).await, 400, "EXPIRES_IN_IS_TOO_LARGE");
    refused(&update(json!({"keyId": id, "name": "x".repeat(33)})).await, 400, "INVALID_NAME_LENGTH");
    refused(&update(json!({"keyId": id, "rateLimitMax": 5})).await, 400, "SERVER_ONLY_PROPERTY");

    let deleted = c.post(&format!("{KEYS}/delete")).cookie(&u.cookie).json(&json!({"keyId": id})).send().await;
    assert_eq!((deleted.status, deleted.json()), (200, json!({"success": true})));
    refused(&c.get(&format!("{KEYS}/get?id={id}")).cookie(&u.cookie).send().await, 404, "KEY_NOT_FOUND");
    refused(&with_key(c, "/api/auth/get-session", &key).await, 401, "INVALID_API_KEY");
    s.stop().await;
}

#[tokio::test]
async fn create_refuses_what_the_plugin_refuses() {
    let s = TestServer::start().await;
    let c = &s.client;
    let u = c.new_user("keys-refusals").await;
    let r = c.post(&format!("{KEYS}/create")).json(&json!({})).send().await;
    refused(&r, 401, "UNAUTHORIZED_SESSION");
    for (body, status, expected) in [
        (json!({"name": ""}), 200, ""),
        (json!({"name": "x".repeat(33)}), 400, "INVALID_NAME_LENGTH"),
        (json!({"prefix": "a b"}), 400, "VALIDATION_ERROR"),
        (json!({"prefix": "a".repeat(33)}), 400, "INVALID_PREFIX_LENGTH"),
        (json!({"expiresIn": 3600}), 400, "EXPIRES_IN_IS_TOO_SMALL"),
        (json!({"expiresIn": 86_400 * 366}), 400, "EXPIRES_IN_IS_TOO_LARGE"),
        (json!({"metadata": {"a": 1}}), 400, "METADATA_DISABLED"),
        (json!({"permissions": {"files": ["read"]}}), 400, "SERVER_ONLY_PROPERTY"),
        (json!({"rateLimitMax": 100}), 400, "SERVER_ONLY_PROPERTY"),
        (json!({"remaining": 5}), 400, "SERVER_ONLY_PROPERTY"),
        (json!({"remaining": null}), 200, ""),
        (json!({"userId": u.id}), 401, "UNAUTHORIZED_SESSION"),
        (json!({"wat": 1}), 400, "VALIDATION_ERROR"),
    ] {
        let r = create(c, &u.cookie, &body).await;
        if status == 200 {
            assert_eq!(r.status, 200, "{body}: {}", r.text);
        } else {
            refused(&r, status, expected);
        }
    }
    // Another user's key is not theirs to see, change or delete: 404, and absent from their list.
    let other = c.new_user("keys-other").await;
    let theirs = str_of(&created(c, &other.cookie, &json!({})).await["id"]).to_owned();
    refused(&c.get(&format!("{KEYS}/get?id={theirs}")).cookie(&u.cookie).send().await, 404, "KEY_NOT_FOUND");
    let r = c.post(&format!("{KEYS}/update")).cookie(&u.cookie).json(&json!({"keyId": theirs, "name": "x"})).send();
    refused(&r.await, 404, "KEY_NOT_FOUND");
    let r = c.post(&format!("{KEYS}/delete")).cookie(&u.cookie).json(&json!({"keyId": theirs})).send().await;
    refused(&r, 404, "KEY_NOT_FOUND");
    refused(&c.get(&format!("{KEYS}/get?id=nope")).cookie(&u.cookie).send().await, 404, "KEY_NOT_FOUND");
    let mine = c.get(&format!("{KEYS}/list")).cookie(&u.cookie).send().await.json();
    assert!(mine["apiKeys"].as_array().unwrap().iter().all(|k| k["referenceId"] == json!(u.id)), "{mine}");
    // The server-only calls are an administrator's.
    let r = c.post(&format!("{KEYS}/verify")).cookie(&u.cookie).json(&json!({"key": "x"})).send().await;
    assert_eq!(r.status, 403, "{}", r.text);
    s.stop().await;
}

#[tokio::test]
async fn a_key_in_the_header_is_its_owners_session_within_its_window() {
    let s = TestServer::start().await;
    // One node: each node counts a key's window on its own (docs/cluster.md).
    let c = &s.nodes[0];
    let u = c.new_user("keys-session").await;
    let made = created(c, &u.cookie, &json!({})).await;
    let key = str_of(&made["key"]).to_owned();
    let r = c.get("/api/auth/get-session").header("x-api-key", &key).header("user-agent", "cron/1").send().await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(r.session_cookie().is_none(), "a key's session sets no cookie");
    let body = r.json();
    assert_eq!(body["user"]["id"], json!(u.id));
    assert_eq!(body["session"]["token"], json!(key));
    assert_eq!(body["session"]["id"], made["id"]);
    assert_eq!(body["session"]["userAgent"], "cron/1");
    assert_eq!(body["session"]["ipAddress"], Value::Null);
    // Any other call runs as the owner; the header wins over another user's cookie.
    let other = c.new_user("keys-bystander").await;
    let r = c.get(&format!("{KEYS}/list")).header("x-api-key", &key).cookie(&other.cookie).send().await;
    assert_eq!(r.json()["apiKeys"][0]["id"], made["id"], "{}", r.text);
    assert_eq!(r.json()["apiKeys"][0]["requestCount"], 2, "each use counts (get-session, then this list): {}", r.text);
    // The window: 10 uses a day by default; the 11th is refused with the plugin's body and no Retry-After.
    for _ in 0..8 {
        assert_eq!(with_key(c, "/api/auth/get-session", &key).await.status, 200);
    }
    let r = with_key(c, "/api/auth/get-session", &key).await;
    refused(&r, 429, "RATE_LIMITED");
    assert_eq!(r.json()["message"], "Rate limit exceeded.");
    assert!(r.json()["details"]["tryAgainIn"].as_i64().is_some_and(|ms| ms > 86_000_000), "{}", r.text);
    assert!(r.header("retry-after").is_none());
    // Short, unknown, disabled.
    refused(&with_key(c, "/api/auth/get-session", "short").await, 403, "INVALID_API_KEY");
    refused(&with_key(c, "/api/auth/get-session", &"a".repeat(64)).await, 401, "INVALID_API_KEY");
    let fresh = created(c, &u.cookie, &json!({})).await;
    let body = json!({"keyId": fresh["id"], "enabled": false});
    assert_eq!(c.post(&format!("{KEYS}/update")).cookie(&u.cookie).json(&body).send().await.status, 200);
    refused(&with_key(c, "/api/auth/get-session", str_of(&fresh["key"])).await, 401, "KEY_DISABLED");
    s.stop().await;
}

#[tokio::test]
async fn an_administrator_manages_a_users_keys_audited_and_verifies_them() {
    let s = TestServer::start().await;
    let c = &s.client;
    let admin = c.admin_session().await;
    let u = c.new_user("keys-managed").await;
    let body = json!({"userId": u.id, "name": "svc", "permissions": {"files": ["read"]}, "rateLimitEnabled": false});
    let made = created(c, &admin, &body).await;
    assert_eq!(made["referenceId"], json!(u.id));
    assert_eq!(made["permissions"], json!({"files": ["read"]}));
    let key = str_of(&made["key"]).to_owned();
    let verify = |body: Value| c.post(&format!("{KEYS}/verify")).cookie(&admin).json(&body).send();
    let v = verify(json!({"key": key, "permissions": {"files": ["read"]}})).await;
    assert_eq!(v.status, 200, "{}", v.text);
    assert_eq!((v.json()["valid"].clone(), v.json()["key"]["id"].clone()), (json!(true), made["id"].clone()));
    let v = verify(json!({"key": key, "permissions": {"files": ["write"]}})).await.json();
    assert_eq!(
        (v["valid"].clone(), v["error"]["code"].clone(), v["key"].clone()),
        (json!(false), json!("INVALID_API_KEY"), Value::Null)
    );
    let upd = json!({"userId": u.id, "keyId": made["id"], "rateLimitMax": 3});
    let r = c.post(&format!("{KEYS}/update")).cookie(&admin).json(&upd).send().await;
    assert_eq!((r.status, r.json()["rateLimitMax"].clone()), (200, json!(3)), "{}", r.text);
    let del = json!({"userId": u.id, "keyId": made["id"]});
    assert_eq!(c.post(&format!("{KEYS}/delete")).cookie(&admin).json(&del).send().await.status, 200);
    let swept = c.post(&format!("{KEYS}/delete-all-expired-api-keys")).cookie(&admin).send().await;
    assert_eq!((swept.status, swept.json()), (200, json!({"success": true, "error": null})));
    let audit = c.get("/api/admin/audit?limit=50").cookie(&admin).send().await.json();
    let actions: Vec<&str> = audit["entries"].as_array().unwrap().iter().filter_map(|e| e["action"].as_str()).collect();
    for action in ["api_key.created", "api_key.updated", "api_key.deleted"] {
        assert!(actions.contains(&action), "{action} missing from {actions:?}");
    }
    s.stop().await;
}

/// ASVS 7.5.1 (#47): a key is a lasting way into the account, so creating, changing or deleting one's own keys
/// needs a session made within `[session] fresh_age_secs` (better-auth's 403 `SESSION_NOT_FRESH`), as changing
/// the password does, and so does deleting a passkey; an administrator managing another user's keys is not asked.
/// A window of one second stands in for the default day.
#[tokio::test]
async fn an_old_session_must_sign_in_again_to_change_its_own_keys_or_delete_a_passkey() {
    let s = TestServer::start_adjusted(|c| c.session.fresh_age_secs = 1).await;
    let c = &s.client;
    let admin = c.admin_session().await;
    let u = c.new_user("keys-stale").await;
    let mine = created(c, &u.cookie, &json!({"name": "mine"})).await;
    let theirs = created(c, &admin, &json!({"userId": u.id, "name": "theirs"})).await;
    tokio::time::sleep(std::time::Duration::from_millis(1_100)).await;

    let post =
        |path: &str, cookie: &str, body: Value| c.post(&format!("{KEYS}/{path}")).cookie(cookie).json(&body).send();
    refused(&post("create", &u.cookie, json!({})).await, 403, "SESSION_NOT_FRESH");
    refused(&post("update", &u.cookie, json!({"keyId": mine["id"], "enabled": false})).await, 403, "SESSION_NOT_FRESH");
    refused(&post("delete", &u.cookie, json!({"keyId": mine["id"]})).await, 403, "SESSION_NOT_FRESH");
    let passkey = c.post("/api/auth/passkey/delete-passkey").cookie(&u.cookie).json(&json!({"id": "x"})).send().await;
    refused(&passkey, 403, "SESSION_NOT_FRESH");
    // Reading them is not a change: the old session still lists them.
    assert_eq!(c.get(&format!("{KEYS}/list")).cookie(&u.cookie).send().await.json()["total"], 2);
    // The administrator's old session manages another user's keys (audited as theirs).
    let r = post("update", &admin, json!({"userId": u.id, "keyId": theirs["id"], "enabled": false})).await;
    assert_eq!(r.status, 200, "{}", r.text);

    let fresh = c.login(&u.email, super::harness::PASSWORD).await;
    let r = post("update", &fresh, json!({"keyId": mine["id"], "enabled": false})).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(post("delete", &fresh, json!({"keyId": mine["id"]})).await.status, 200);
    created(c, &fresh, &json!({})).await;
    s.stop().await;
}

/// ASVS 7.5.1 (#47): a key in `x-api-key` is its owner's session for each request, but no sign-in: it never counts
/// as fresh, so it cannot make another key, change or delete one, or change the password; it still reads.
#[tokio::test]
async fn a_key_cannot_make_keys_or_change_the_password() {
    let s = TestServer::start().await;
    let c = &s.client;
    let u = c.new_user("keys-by-key").await;
    let made = created(c, &u.cookie, &json!({"name": "script"})).await;
    let key = str_of(&made["key"]).to_owned();
    let by_key = |path: &str, body: Value| c.post(path).header("x-api-key", &key).json(&body).send();
    refused(&by_key(&format!("{KEYS}/create"), json!({})).await, 403, "SESSION_NOT_FRESH");
    refused(&by_key(&format!("{KEYS}/delete"), json!({"keyId": made["id"]})).await, 403, "SESSION_NOT_FRESH");
    let change = json!({"currentPassword": super::harness::PASSWORD, "newPassword": "a sound new passphrase"});
    refused(&by_key("/api/auth/change-password", change).await, 403, "SESSION_NOT_FRESH");
    let listed = c.get(&format!("{KEYS}/list")).header("x-api-key", &key).send().await;
    assert_eq!((listed.status, listed.json()["total"].clone()), (200, json!(1)), "{}", listed.text);
    s.stop().await;
}

/// A ban ends the owner's keys in the ban's commit: the next call with the key is 401, on every node (on two nodes,
/// within the cluster's revocation delay), and the key is gone from the list once the ban is lifted.
#[tokio::test]
async fn a_ban_ends_the_owners_keys_on_every_node() {
    let s = TestServer::start().await;
    let admin = s.client.admin_session().await;
    let u = s.client.new_user("keys-banned").await;
    let first = &s.nodes[0];
    let key = str_of(&created(first, &u.cookie, &json!({})).await["key"]).to_owned();
    let other = s.nodes.last().unwrap();
    assert_eq!(with_key(other, "/api/auth/get-session", &key).await.status, 200);
    first.patch_ok(&admin, &json!({"userId": u.id, "banned": true})).await;
    // Every node, the other one included, refuses it within the revocation delay.
    for node in &s.nodes {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        loop {
            let r = with_key(node, "/api/auth/get-session", &key).await;
            if r.status == 401 {
                assert!(["INVALID_API_KEY", "USER_BANNED"].contains(&code(&r).as_str()), "{}", r.text);
                break;
            }
            assert!(std::time::Instant::now() < deadline, "still answered {} {}", r.status, r.text);
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }
    first.patch_ok(&admin, &json!({"userId": u.id, "banned": false})).await;
    let cookie = s.client.login(&u.email, super::harness::PASSWORD).await;
    let listed = s.client.get(&format!("{KEYS}/list")).cookie(&cookie).send().await.json();
    assert_eq!(listed["total"], 0, "the ban deleted the key: {listed}");
    refused(&with_key(other, "/api/auth/get-session", &key).await, 401, "INVALID_API_KEY");
    // The owner's removal ends a key likewise, in the removal's commit.
    let key = str_of(&created(first, &cookie, &json!({})).await["key"]).to_owned();
    assert_eq!(with_key(other, "/api/auth/get-session", &key).await.status, 200);
    let removed = first.post("/api/auth/admin/remove-user").cookie(&admin).json(&json!({"userId": u.id})).send().await;
    assert_eq!(removed.status, 200, "{}", removed.text);
    for node in &s.nodes {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while with_key(node, "/api/auth/get-session", &key).await.status != 401 {
            assert!(std::time::Instant::now() < deadline, "a removed owner's key still opens a session");
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }
    s.stop().await;
}

/// A key with a quota (`remaining`, set by an administrator: server-only in the plugin) gets exactly that many uses:
/// each is written before the request it opens goes on, so a `kill -9` right after a use does not give it back.
#[tokio::test]
async fn a_quota_survives_a_kill_and_is_never_exceeded() {
    let root = tempfile::tempdir().unwrap();
    let server = ChildServer::spawn(root.path(), BOOTSTRAP_ENV).await;
    let admin = server.admin_session().await;
    let u = server.new_user("quota-kill").await;
    let body = json!({"userId": u.id, "remaining": 3, "rateLimitEnabled": false});
    let made = created(&server.client, &admin, &body).await;
    assert_eq!(made["remaining"], 3);
    let key = str_of(&made["key"]).to_owned();
    assert_eq!(with_key(&server.client, "/api/auth/get-session", &key).await.status, 200);
    server.kill9();

    let server = ChildServer::spawn(root.path(), &[]).await;
    for left in [1, 0] {
        let r = with_key(&server.client, &format!("{KEYS}/list"), &key).await;
        assert_eq!((r.status, r.json()["apiKeys"][0]["remaining"].clone()), (200, json!(left)), "{}", r.text);
    }
    let r = with_key(&server.client, "/api/auth/get-session", &key).await;
    refused(&r, 429, "USAGE_EXCEEDED");
    drop(server);
}

/// The quota is one count for every node (each use is counted against the database's copy), and uses sent at
/// the same moment to both nodes never get in more often than the quota allows, whatever the order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quota_is_one_count_on_every_node_even_under_concurrent_use() {
    let s = TestServer::start().await;
    let c = &s.client;
    let admin = c.admin_session().await;
    let u = c.new_user("quota-nodes").await;
    let body = json!({"userId": u.id, "remaining": 4, "rateLimitEnabled": false});
    let key = str_of(&created(c, &admin, &body).await["key"]).to_owned();
    // One after another, alternating nodes (the client does): four uses, then none.
    for _ in 0..4 {
        let r = with_key(c, "/api/auth/get-session", &key).await;
        assert_eq!(r.status, 200, "{}", r.text);
    }
    for node in &s.nodes {
        refused(&with_key(node, "/api/auth/get-session", &key).await, 429, "USAGE_EXCEEDED");
    }
    // At once, on both nodes: exactly the quota's worth get in.
    let body = json!({"userId": u.id, "remaining": 5, "rateLimitEnabled": false});
    let key = str_of(&created(c, &admin, &body).await["key"]).to_owned();
    let uses = (0..12).map(|i| {
        let node = s.nodes[i % s.nodes.len()].clone();
        let key = key.clone();
        tokio::spawn(async move { with_key(&node, "/api/auth/get-session", &key).await })
    });
    let mut admitted = 0;
    for use_ in uses {
        let r = use_.await.unwrap();
        match r.status {
            200 => admitted += 1,
            // A use another node spent first, found at the commit; a node whose copy lagged may also have to
            // refuse the batch it was in (docs/guides/api-keys.md): refused either way, never let in.
            429 => assert_eq!(code(&r), "USAGE_EXCEEDED", "{}", r.text),
            503 => {}
            other => panic!("{other}: {}", r.text),
        }
    }
    // What a refused batch gave back is still there, and nothing more: the uses let in, in all, are the quota.
    loop {
        let r = with_key(c, "/api/auth/get-session", &key).await;
        if r.status != 200 {
            refused(&r, 429, "USAGE_EXCEEDED");
            break;
        }
        admitted += 1;
        assert!(admitted <= 5, "more uses than the quota");
    }
    assert_eq!(admitted, 5, "the quota, exactly");
    for node in &s.nodes {
        refused(&with_key(node, "/api/auth/get-session", &key).await, 429, "USAGE_EXCEEDED");
    }
    s.stop().await;
}
