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
