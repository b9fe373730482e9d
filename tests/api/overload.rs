//! A flood of sign-ins far beyond what the hashing pool can take: the excess is refused with 503 and
//! `Retry-After`, never queued without bound or answered with a 500, and session checks keep answering
//! meanwhile. Statuses and headers only: the timing of the refusals is measured in `benches/load.sh`
//! (`examples/overload.rs`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::json;

use super::harness::{Client, PASSWORD, TestServer};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sign_in_flood_beyond_the_queue_gets_503_and_sessions_still_answer() {
    // One worker and a queue of two: 150 sign-ins at once are some fifty times what it can hold. Sign-ins in
    // flight count against the account's failure limit until they end, so that limit is lifted here: this test
    // is about the pool, not the lock.
    let s = TestServer::start_adjusted(|c| {
        c.rate_limit.failures_per_account = 1_000_000;
        c.hashing.workers = 1;
        c.hashing.max_queue = 2;
    })
    .await;
    let user = s.new_user("flooded").await;

    let flooding = Arc::new(AtomicBool::new(true));
    let checker = {
        let (client, cookie, flooding) = (Client::new(s.addr), user.cookie.clone(), Arc::clone(&flooding));
        tokio::spawn(async move {
            let mut answered = 0;
            while flooding.load(Ordering::Relaxed) {
                let session = client.session(&cookie).await;
                assert_eq!(session["user"]["email"], "flooded@example.com", "{session}");
                answered += 1;
            }
            answered
        })
    };
    let flood: Vec<_> = (0..150)
        .map(|_| {
            let client = Client::new(s.addr);
            tokio::spawn(async move {
                client.sign_in_body(&json!({"email": "flooded@example.com", "password": PASSWORD})).await
            })
        })
        .collect();
    let (mut signed_in, mut refused) = (0, 0);
    for answer in flood {
        let r = answer.await.unwrap();
        match r.status {
            200 => signed_in += 1,
            503 => {
                assert_eq!(r.header("retry-after").as_deref(), Some("1"), "a 503 without Retry-After");
                assert_eq!(r.json()["code"], "SERVICE_UNAVAILABLE", "{}", r.text);
                refused += 1;
            }
            other => panic!("sign-in answered {other}: {}", r.text),
        }
    }
    flooding.store(false, Ordering::Relaxed);
    let checks = checker.await.unwrap();
    assert!(refused > 0, "150 sign-ins at once on one worker and a queue of two, and none was refused");
    assert!(signed_in > 0, "the pool signed nobody in");
    assert!(checks > 0, "no session check finished while the flood ran");
    // The pool is free again once the flood is over: a sign-in goes through.
    assert_eq!(Client::new(s.addr).sign_in("flooded@example.com", PASSWORD).await.0, 200);
}

/// When the pool would refuse the hash anyway, a sign-in is refused before anything else: its body is not even
/// parsed (a malformed one gets the 503, not a 400), and a wrong password sent then is not counted against the
/// account (with a limit of one failure, the right password still signs in afterwards).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_saturated_pool_refuses_before_the_body_is_read_and_counts_nothing() {
    // One worker, no queue, and hashes slow enough (t = 16, a few hundred ms) to be caught running.
    let s = TestServer::start_adjusted(|c| {
        c.rate_limit.failures_per_account = 1;
        c.hashing.workers = 1;
        c.hashing.max_queue = 0;
        c.hashing.iterations = 16;
    })
    .await;
    let user = s.new_user("saturated").await;
    let client = Client::new(s.addr);
    let busy = {
        let client = Client::new(s.addr);
        tokio::spawn(async move { client.sign_up("Other", "other@example.com", PASSWORD).await.0 })
    };
    let malformed = format!(r#"{{"email": "{}", "password": "wrong password""#, user.email);
    let mut refused = None;
    for _ in 0..200 {
        let r = client.post("/api/auth/sign-in/email").raw(Some("application/json"), malformed.clone()).send().await;
        match r.status {
            // The worker is not taken yet: the body was read and found malformed.
            400 => tokio::time::sleep(std::time::Duration::from_millis(1)).await,
            503 => {
                refused = Some(r);
                break;
            }
            other => panic!("a malformed sign-in answered {other}: {}", r.text),
        }
    }
    let refused = refused.expect("the one worker was never seen busy");
    assert_eq!(refused.header("retry-after").as_deref(), Some("1"));
    assert_eq!(refused.json()["code"], "SERVICE_UNAVAILABLE", "{}", refused.text);
    // Still hashing the sign-up: a wrong password is turned away too, unread and uncounted.
    let wrong = client.sign_in_body(&json!({"email": user.email, "password": "wrong password"})).await;
    assert_eq!(wrong.status, 503, "{}", wrong.text);
    // And a sign-up the same way: its malformed body is not read either.
    let signing_up = client.post("/api/auth/sign-up/email").raw(Some("application/json"), malformed).send().await;
    assert_eq!(signing_up.status, 503, "{}", signing_up.text);
    assert_eq!(signing_up.header("retry-after").as_deref(), Some("1"));
    assert_eq!(busy.await.unwrap(), 200);
    // The worker is free before the sign-up's answer goes out, so the next sign-in is served at once; a refused
    // sign-in counted as a failure would show as 429 (locked).
    let (status, body, _) = client.sign_in(&user.email, PASSWORD).await;
    assert_eq!(status, 200, "{body}");
}
