//! `GET /api/admin/stats`: the console overview's counters, from a known sequence of sign-ins, failures, lock-outs
//! and sign-ups, before and after a restart (durable), and only for administrators.

use serde_json::{Value, json};

use super::harness::*;

/// Each counter's sum over a series (`hourly` or `daily`): the sequence may cross an hour or a day.
fn sums(body: &Value, series: &str) -> Value {
    let mut out = serde_json::Map::new();
    for name in body["counters"].as_array().unwrap() {
        let name = name.as_str().unwrap();
        let total: u64 = body[series].as_array().unwrap().iter().map(|b| b[name].as_u64().unwrap()).sum();
        out.insert(name.to_owned(), json!(total));
    }
    Value::Object(out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_known_sequence_gives_the_right_counts_before_and_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let lock_after = 3;
    let config = || {
        let mut config = test_config(dir.path());
        config.rate_limit.failures_per_account = lock_after;
        config
    };
    let s = TestServer::start_with(config()).await;
    let r = s.get("/api/admin/stats").send().await;
    assert_eq!((r.status, r.json()), (401, json!({"error": "authentication required"})));

    // Sign-ups: 2 (each also opens a session, which is no sign-in).
    let alice = s.new_user("alice").await;
    let bob = s.new_user("bob").await;
    assert_eq!(s.sign_up("Alice again", &alice.email, PASSWORD).await.0, 422, "a refused sign-up is not counted");
    // Sign-ins: the administrator's, and 2 of alice's = 3.
    let admin = s.admin_session().await;
    s.login(&alice.email, PASSWORD).await;
    s.login(&alice.email, PASSWORD).await;
    // Failures: 2 wrong passwords of bob's, 1 unknown e-mail, then `lock_after` on one address = 6.
    for _ in 0..2 {
        assert_eq!(s.sign_in(&bob.email, "not the password").await.0, 401);
    }
    assert_eq!(s.sign_in("nobody@example.com", PASSWORD).await.0, 401);
    for _ in 0..lock_after {
        assert_eq!(s.sign_in("target@example.com", "guess").await.0, 401);
    }
    // Lock-outs: 2 attempts refused by the failure limit.
    for _ in 0..2 {
        assert_eq!(s.sign_in("target@example.com", "guess").await.0, 429);
    }
    let r = s.get("/api/admin/stats").cookie(&bob.cookie).send().await;
    assert_eq!((r.status, r.json()), (403, json!({"error": "administrator role required"})));
    assert_eq!(s.get("/api/admin/stats?days=7").cookie(&admin).send().await.status, 400);

    let expected = json!({"sign_ins": 3, "failed_sign_ins": 6, "sign_ups": 2, "lockouts": 2, "password_resets": 0});
    let r = s.get("/api/admin/stats").cookie(&admin).send().await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.header("cache-control").as_deref(), Some("no-store"));
    let body = r.json();
    assert_eq!(body["counters"], json!(["sign_ins", "failed_sign_ins", "sign_ups", "lockouts", "password_resets"]));
    assert_eq!(body["hourly"].as_array().unwrap().len(), 24);
    assert_eq!(body["daily"].as_array().unwrap().len(), 30);
    assert_eq!(body["flush_interval_secs"], 5);
    assert_eq!(body["accounts_created_7d"], 3, "the administrator and the two sign-ups");
    assert_eq!(body["outbox"], Value::Null, "no mail transport");
    // Hour by hour, oldest first: each bucket an hour after the one before.
    let starts: Vec<i64> = body["hourly"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| chrono::DateTime::parse_from_rfc3339(b["start"].as_str().unwrap()).unwrap().timestamp())
        .collect();
    assert!(starts.windows(2).all(|w| w[1] - w[0] == 3600), "{starts:?}");
    assert!(chrono::Utc::now().timestamp() - starts[23] < 3600);
    if s.nodes.len() == 1 {
        // One node: its counts not written yet are in its answer, so it is exact at once. (Two nodes: each
        // answers with its own unwritten counts and the other's written ones; after the restart below, exact.)
        assert_eq!(sums(&body, "hourly"), expected);
        assert_eq!(sums(&body, "daily"), expected);
    }

    // A stop writes the last counts; a new start reads them back.
    s.stop().await;
    let s = TestServer::start_with(config()).await;
    // Signed in and read on one node: the new sign-in is that node's own count, not written yet (two nodes).
    let node = &s.nodes[0];
    let admin = node.login(ADMIN_EMAIL, ADMIN_PASSWORD).await;
    let r = node.get("/api/admin/stats").cookie(&admin).send().await;
    assert_eq!(r.status, 200, "{}", r.text);
    let body = r.json();
    let after = json!({"sign_ins": 4, "failed_sign_ins": 6, "sign_ups": 2, "lockouts": 2, "password_resets": 0});
    assert_eq!(sums(&body, "hourly"), after, "{body}");
    assert_eq!(sums(&body, "daily"), after, "{body}");
}
