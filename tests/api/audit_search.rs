//! `GET /api/admin/audit` searched on the server: by action, actor, target, either of them, and time range.

use serde_json::{Value, json};

use super::harness::*;

async fn search(s: &TestServer, admin: &str, query: &str) -> Value {
    let r = s.get(&format!("/api/admin/audit?{query}")).cookie(admin).send().await;
    assert_eq!(r.status, 200, "{query}: {}", r.text);
    r.json()
}

fn actions(page: &Value) -> Vec<String> {
    page["entries"].as_array().unwrap().iter().map(|e| str_of(&e["action"]).to_owned()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_audit_log_is_searched_by_action_actor_target_and_time() {
    let s = TestServer::start().await;
    let admin = s.admin_session().await;
    let admin_id = str_of(&s.session(&admin).await["user"]["id"]).to_owned();
    let alice = s.new_user("alice-audit").await;
    let bob = s.new_user("bob-audit").await;
    s.patch_ok(&admin, &json!({"userId": alice.id, "role": "pharmacist_in_charge"})).await;
    let between = chrono::Utc::now();
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    s.patch_ok(&admin, &json!({"userId": bob.id, "banned": true, "banReason": "spam"})).await;
    s.patch_ok(&admin, &json!({"userId": alice.id, "banned": true})).await;
    assert_eq!(s.sign_in(&bob.email, PASSWORD).await.0, 403, "banned");

    let page = search(&s, &admin, "action=user.banned").await;
    let targets: Vec<&str> = page["entries"].as_array().unwrap().iter().map(|e| str_of(&e["target_id"])).collect();
    assert_eq!(targets, [alice.id.as_str(), bob.id.as_str()], "newest first");
    assert_eq!(page["next_cursor"], Value::Null);

    let page = search(&s, &admin, &format!("target_id={}", alice.id)).await;
    assert_eq!(actions(&page), ["user.banned", "user.role_changed", "user.created"]);
    let page = search(&s, &admin, &format!("target_id={}&actor_id={admin_id}", alice.id)).await;
    assert_eq!(actions(&page), ["user.banned", "user.role_changed"]);
    // Actor or target: bob's own sign-up and refused sign-in, and the ban made on him.
    let page = search(&s, &admin, &format!("subject_id={}", bob.id)).await;
    assert_eq!(actions(&page), ["sign_in.refused", "user.banned", "user.created"]);

    // A time range (the `+` and `:` of a time come percent-encoded, as a form sends them).
    let from = url::form_urlencoded::byte_serialize(between.to_rfc3339().as_bytes()).collect::<String>();
    let page = search(&s, &admin, &format!("actor_id={admin_id}&from={from}")).await;
    assert_eq!(actions(&page), ["user.banned", "user.banned"]);
    let page = search(&s, &admin, &format!("actor_id={admin_id}&to={from}&action=user.role_changed")).await;
    assert_eq!(actions(&page), ["user.role_changed"]);

    // Pages of a search follow their cursor, to a last page without one.
    let (mut seen, mut cursor) = (Vec::new(), String::new());
    loop {
        let page = search(&s, &admin, &format!("action=user.created&limit=1{cursor}")).await;
        seen.extend(page["entries"].as_array().unwrap().iter().map(|e| str_of(&e["target_id"]).to_owned()));
        match page["next_cursor"].as_str() {
            Some(next) => cursor = format!("&cursor={next}"),
            None => break,
        }
    }
    assert_eq!(seen, [bob.id.clone(), alice.id.clone()]);

    for bad in ["actor_id=nope", "from=yesterday", "action=", "from=2026-01-02T00:00:00Z&to=2026-01-01T00:00:00Z"] {
        let r = s.get(&format!("/api/admin/audit?{bad}")).cookie(&admin).send().await;
        assert_eq!(r.status, 400, "{bad}: {}", r.text);
    }
}
