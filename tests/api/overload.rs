//! A flood of sign-ins far beyond what the hashing pool can take: the excess is refused with 503 and
//! `Retry-After`, never queued without bound or answered with a 500, and session checks keep answering
//! meanwhile. Statuses and headers only: the timing of the refusals is measured in `benches/load.sh`
//! (`examples/overload.rs`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

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

// ---------------------------------------------------------------------------------------------------------------
// Keep-alive connections and answers given before the body was read (issue 25, item 13)

/// One answer read off a keep-alive connection.
struct Answer {
    status: u16,
    /// `Connection: close`: the server ends the connection after this answer.
    closes: bool,
}

/// A request's head, for a JSON body of `length` bytes sent apart.
fn head(path: &str, length: usize) -> String {
    format!("POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {length}\r\n\r\n")
}

/// Reads one answer (head and `Content-Length` body); `None` when the connection ends or fails first.
async fn read_answer(conn: &mut BufReader<TcpStream>) -> Option<Answer> {
    let mut status_line = String::new();
    if conn.read_line(&mut status_line).await.ok()? == 0 {
        return None;
    }
    let status = status_line.strip_prefix("HTTP/1.1 ")?.get(..3)?.parse().ok()?;
    let (mut closes, mut length) = (false, 0usize);
    loop {
        let mut line = String::new();
        if conn.read_line(&mut line).await.ok()? == 0 {
            return None;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        let (name, value) = line.split_once(':')?;
        match name.to_ascii_lowercase().as_str() {
            "connection" => closes |= value.trim().eq_ignore_ascii_case("close"),
            "content-length" => length = value.trim().parse().ok()?,
            _ => {}
        }
    }
    let mut body = vec![0u8; length];
    conn.read_exact(&mut body).await.ok()?;
    Some(Answer { status, closes })
}

/// Before: a call refused before its body was needed (change-password without a session: 401) was answered
/// without `Connection: close` while the body was still on its way, and hyper then closed the connection: the
/// client's next request on it got no answer. Now such an answer says `Connection: close` (and the server keeps
/// its word).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_given_before_the_body_arrived_says_the_connection_ends() {
    let s = TestServer::start().await;
    let body = r#"{"currentPassword": "hunter2-hunter2", "newPassword": "hunter3-hunter3"}"#;
    let mut conn = BufReader::new(TcpStream::connect(s.addr).await.unwrap());
    conn.get_mut().write_all(head("/api/auth/change-password", body.len()).as_bytes()).await.unwrap();
    let answer = read_answer(&mut conn).await.expect("no answer to the head alone");
    assert_eq!(answer.status, 401);
    // Whatever the server says, a client may go on until told otherwise: the body, then another request.
    let _ = conn.get_mut().write_all(body.as_bytes()).await;
    let _ = conn.get_mut().write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").await;
    let next = read_answer(&mut conn).await;
    if answer.closes {
        assert!(next.is_none(), "`Connection: close` was said but the connection went on");
    } else {
        assert_eq!(next.map(|a| a.status), Some(200), "the connection was closed without `Connection: close`");
    }
}

/// Before: with `[hashing] workers = 1, max_queue = 4`, a sign-in refused with 503 before its body arrived was
/// answered without `Connection: close` and its connection closed; keep-alive clients (head and body written
/// apart, as many clients do) then failed their next request on it. Now the refusal reads the small body first
/// and keeps the connection, or says `Connection: close`: no request of sixteen keep-alive clients fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keep_alive_clients_are_never_cut_off_by_an_early_refusal() {
    let s = TestServer::start_adjusted(|c| {
        c.rate_limit.failures_per_account = 1_000_000;
        c.hashing.workers = 1;
        c.hashing.max_queue = 4;
    })
    .await;
    let user = s.new_user("keepalive").await;
    let body = json!({"email": user.email, "password": PASSWORD}).to_string();
    let clients: Vec<_> = (0..16)
        .map(|_| {
            let (addr, body) = (s.addr, body.clone());
            tokio::spawn(async move {
                let (mut statuses, mut failed, mut refusals_kept) = (Vec::new(), 0, 0);
                let mut conn = BufReader::new(TcpStream::connect(addr).await.unwrap());
                for _ in 0..25 {
                    let sent = async {
                        conn.get_mut().write_all(head("/api/auth/sign-in/email", body.len()).as_bytes()).await?;
                        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
                        conn.get_mut().write_all(body.as_bytes()).await
                    };
                    let answer = match sent.await {
                        Ok(()) => read_answer(&mut conn).await,
                        Err(_) => None,
                    };
                    match answer {
                        Some(answer) => {
                            statuses.push(answer.status);
                            if answer.closes {
                                conn = BufReader::new(TcpStream::connect(addr).await.unwrap());
                            } else if answer.status == 503 {
                                refusals_kept += 1;
                            }
                        }
                        None => {
                            failed += 1;
                            conn = BufReader::new(TcpStream::connect(addr).await.unwrap());
                        }
                    }
                }
                (statuses, failed, refusals_kept)
            })
        })
        .collect();
    let (mut statuses, mut failed, mut kept) = (Vec::new(), 0, 0);
    for client in clients {
        let (s, f, k) = client.await.unwrap();
        statuses.extend(s);
        failed += f;
        kept += k;
    }
    let refused = statuses.iter().filter(|&&s| s == 503).count();
    eprintln!("{} answers, {refused} of them 503 ({kept} on a kept connection), {failed} failed", statuses.len());
    assert_eq!(failed, 0, "requests failed on a connection the server had closed without saying so");
    assert!(statuses.iter().all(|&s| s == 200 || s == 503), "{statuses:?}");
    assert!(refused > 0, "the pool never refused: the early refusal was not exercised");
}
