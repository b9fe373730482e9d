//! What a disconnecting client, a flood of failures or a full hashing pool could do before the hardening issue,
//! one test each (the store's and the connection layer's items have theirs in `disk.rs` and `security.rs`).

use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;

use super::harness::*;

/// A sign-in sent on a raw socket that is closed 5 ms after the request is written, long before the ~20 ms hash
/// ends: hyper drops the handler of a closed connection.
async fn sign_in_and_hang_up(s: &TestServer, email: &str, password: &str) {
    let body = json!({"email": email, "password": password}).to_string();
    let request = format!(
        "POST /api/auth/sign-in/email HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        s.addr,
        body.len()
    );
    let mut stream = tokio::net::TcpStream::connect(s.addr).await.expect("connect");
    stream.write_all(request.as_bytes()).await.expect("write");
    tokio::time::sleep(Duration::from_millis(5)).await;
    drop(stream);
}

/// Before: each hang-up left its reservation in the account's limiter for good, so three of them locked the
/// account (the right password got 429 long after the window). Now the check runs to its end whatever the
/// connection does, and the lock lasts one window at most.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_that_hang_up_mid_sign_in_cannot_lock_an_account() {
    let s = TestServer::start_adjusted(|c| {
        c.rate_limit.failures_per_account = 3;
        c.rate_limit.account_window_secs = 1;
    })
    .await;
    s.new_user("victim").await;
    for _ in 0..3 {
        sign_in_and_hang_up(&s, "victim@example.com", "a wrong password").await;
    }
    // Longer than the window; the three checks (three hashes) ended long before.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let (status, _, _) = s.sign_in("victim@example.com", PASSWORD).await;
    assert_eq!(status, 200, "the account is still locked after its window");
}

/// Hang-ups with the right password: every check still ends and releases its reservation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hang_ups_with_the_right_password_leave_nothing_behind() {
    let s = TestServer::start_adjusted(|c| {
        c.rate_limit.failures_per_account = 2;
        c.rate_limit.account_window_secs = 300;
    })
    .await;
    s.new_user("owner").await;
    for _ in 0..5 {
        sign_in_and_hang_up(&s, "owner@example.com", PASSWORD).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (status, _, _) = s.sign_in("owner@example.com", PASSWORD).await;
    assert_eq!(status, 200, "reservations of finished checks still count");
}

/// Before: only existing accounts were limited, so "429 after N failures" told an attacker which e-mails exist.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_email_is_locked_exactly_like_a_known_one() {
    let s = TestServer::start_adjusted(|c| c.rate_limit.failures_per_account = 2).await;
    s.new_user("known").await;
    for email in ["known@example.com", "nobody@example.com"] {
        for _ in 0..2 {
            assert_eq!(s.sign_in(email, "a wrong password").await.0, 401, "{email}");
        }
        let r = s.sign_in_body(&json!({"email": email, "password": "a wrong password"})).await;
        assert_auth_error(&r, 429, "TOO_MANY_REQUESTS");
        assert!(r.header("retry-after").is_some(), "{email}: no Retry-After");
    }
    // The lock follows the normalised address, not the spelling.
    let r = s.sign_in_body(&json!({"email": "  NOBODY@Example.COM ", "password": "a wrong password"})).await;
    assert_eq!(r.status, 429);
}

async fn sign_in_rows(s: &TestServer, admin: &str) -> Vec<Value> {
    let mut rows = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let query = match &cursor {
            Some(c) => format!("/api/admin/audit?limit=500&cursor={c}"),
            None => "/api/admin/audit?limit=500".to_owned(),
        };
        let page = s.get(&query).cookie(admin).send().await.json();
        rows.extend(page["entries"].as_array().unwrap().iter().cloned());
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => break,
        }
    }
    rows.retain(|r| r["action"].as_str().is_some_and(|a| a.starts_with("sign_in.") && a != "sign_in.succeeded"));
    rows
}

/// Before: every failed or refused sign-in wrote one audit row, so a flood (from many IPv6 /64s, say) grew the
/// store without bound. Now one e-mail gets at most two rows per window (first failure, lock), and all e-mails
/// together at most 60 itemised rows a minute; the rest are counted into a summary row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_failed_sign_ins_writes_a_bounded_number_of_audit_rows() {
    let s = TestServer::start_adjusted(|c| c.rate_limit.failures_per_account = 5).await;
    let admin = s.admin_session().await;
    s.new_user("target").await;
    let mut flood = Vec::new();
    for n in 0..120 {
        let client = Client::new(s.addr);
        let email = if n % 3 == 0 { "target@example.com".to_owned() } else { format!("ghost{n}@example.com") };
        flood.push(tokio::spawn(async move {
            client.sign_in_body(&json!({"email": email, "password": "a wrong password"})).await.status
        }));
    }
    for request in flood {
        let status = request.await.unwrap();
        assert!(status == 401 || status == 429, "{status}");
    }
    let rows = sign_in_rows(&s, &admin).await;
    let on_target = rows.iter().filter(|r| r["detail"] != "unknown e-mail" && r["target_id"] != Value::Null).count();
    assert!(on_target <= 2, "{on_target} rows for one account in one window: {rows:#?}");
    assert!(rows.len() <= 60, "{} rows for 120 failures: the log grows with the flood", rows.len());
    assert!(rows.len() >= 2, "failures are still recorded: {rows:#?}");
}

/// Before: the wait for a hashing worker was unbounded. Now a full queue answers 503 with `Retry-After` at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_hashing_pool_answers_503_with_retry_after() {
    let s = TestServer::start_adjusted(|c| {
        c.hashing.workers = 1;
        c.hashing.max_queue = 1;
    })
    .await;
    let sign_ups: Vec<_> = (0..24)
        .map(|n| {
            let client = Client::new(s.addr);
            tokio::spawn(async move {
                let body = json!({"name": "N", "email": format!("n{n}@example.com"), "password": PASSWORD});
                client.sign_up_body(&body).await
            })
        })
        .collect();
    let mut busy = 0;
    for r in sign_ups {
        let r = r.await.unwrap();
        match r.status {
            200 => {}
            503 => {
                assert_eq!(r.header("retry-after").as_deref(), Some("1"));
                busy += 1;
            }
            other => panic!("{other}: {}", r.text),
        }
    }
    assert!(busy > 0, "24 sign-ups at once on one worker and a queue of one, and none was turned away");
}
