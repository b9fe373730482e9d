//! Measurements of two nodes on one PostgreSQL (benches/cluster.sh starts them): sign-in across both nodes, and the
//! cross-node revocation delay of a ban acknowledged on one node and checked on the other.
//!
//!   cluster_bench revocation URL_A URL_B ADMIN_EMAIL ADMIN_PASSWORD [ROUNDS]
//!   cluster_bench sign-in URL_A URL_B [USERS] [REQUESTS] [CONCURRENCY]
//!
//! Only the given URLs (loopback in the script) are contacted.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

const COOKIE: &str = "service-auth.session_token";
const PASSWORD: &str = "bench password 1234";

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |n: usize, default: usize| args.get(n).and_then(|a| a.parse().ok()).unwrap_or(default);
    match args.first().map(String::as_str) {
        Some("revocation") if args.len() >= 5 => revocation(&args[1], &args[2], &args[3], &args[4], arg(5, 200)).await,
        Some("sign-in") if args.len() >= 3 => sign_in(&args[1], &args[2], arg(3, 50), arg(4, 400), arg(5, 16)).await,
        _ => {
            eprintln!("usage: cluster_bench revocation URL_A URL_B ADMIN_EMAIL ADMIN_PASSWORD [ROUNDS]");
            eprintln!("       cluster_bench sign-in URL_A URL_B [USERS] [REQUESTS] [CONCURRENCY]");
            std::process::exit(2);
        }
    }
}

fn client() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().timeout(Duration::from_secs(30)).build().expect("client")
}

/// The session cookie a sign-up or sign-in set.
fn session_cookie(r: &reqwest::Response) -> Option<String> {
    r.headers().get_all("set-cookie").iter().filter_map(|v| v.to_str().ok()).find_map(|v| {
        let (pair, _) = v.split_once(';').unwrap_or((v, ""));
        let (name, value) = pair.split_once('=')?;
        (name.trim() == COOKIE && !value.is_empty()).then(|| value.trim().to_owned())
    })
}

async fn post(http: &reqwest::Client, url: String, body: Value, cookie: Option<&str>) -> reqwest::Response {
    let mut req = http.post(url).json(&body);
    if let Some(c) = cookie {
        req = req.header("cookie", format!("{COOKIE}={c}"));
    }
    req.send().await.expect("request")
}

async fn session_user(http: &reqwest::Client, base: &str, cookie: &str) -> Option<Value> {
    let r = http
        .get(format!("{base}/api/auth/get-session"))
        .header("cookie", format!("{COOKIE}={cookie}"))
        .send()
        .await
        .expect("get-session");
    let body: Value = r.json().await.expect("JSON");
    (!body.is_null()).then(|| body["user"].clone())
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// Each round: a new account signs up on A; once B knows its session, B's get-session is polled in a tight loop
/// while A bans the account; the delay is from A's acknowledgement of the ban (its 200) to B's first `null`.
async fn revocation(a: &str, b: &str, admin_email: &str, admin_password: &str, rounds: usize) {
    let http = client();
    let signed_in = post(
        &http,
        format!("{a}/api/auth/sign-in/email"),
        json!({"email": admin_email, "password": admin_password}),
        None,
    )
    .await;
    let admin = session_cookie(&signed_in).expect("admin sign-in");
    let mut delays = Vec::with_capacity(rounds);
    let tag = std::process::id();
    for round in 0..rounds {
        let email = format!("revoke-{tag}-{round}@example.com");
        let r = post(
            &http,
            format!("{a}/api/auth/sign-up/email"),
            json!({"name": "R", "email": email, "password": PASSWORD}),
            None,
        )
        .await;
        let cookie = session_cookie(&r).expect("sign-up cookie");
        let id = r.json::<Value>().await.expect("JSON")["user"]["id"].as_str().unwrap().to_owned();
        while session_user(&http, b, &cookie).await.is_none() {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let (poller, b_url, polled) = (http.clone(), b.to_owned(), cookie.clone());
        let watch = tokio::spawn(async move {
            while session_user(&poller, &b_url, &polled).await.is_some() {}
            Instant::now()
        });
        let ban = http
            .patch(format!("{a}/api/admin/users"))
            .header("cookie", format!("{COOKIE}={admin}"))
            .json(&json!({"userId": id, "banned": true}))
            .send()
            .await
            .expect("ban");
        let acknowledged = Instant::now();
        assert_eq!(ban.status(), 200, "ban: {}", ban.text().await.unwrap_or_default());
        let refused = watch.await.expect("watcher");
        delays.push(refused.saturating_duration_since(acknowledged));
    }
    delays.sort_unstable();
    println!(
        "cross-node revocation delay over {rounds} bans (ack on A -> first refusal on B): p50 {:.2?}, p99 {:.2?}, max {:.2?}",
        percentile(&delays, 0.50),
        percentile(&delays, 0.99),
        delays[delays.len() - 1]
    );
}

/// `users` accounts signed up (alternating nodes), then `requests` sign-ins with `concurrency` in flight, each to
/// the node after the previous one's.
async fn sign_in(a: &str, b: &str, users: usize, requests: usize, concurrency: usize) {
    let http = client();
    let tag = std::process::id();
    let nodes = [a.to_owned(), b.to_owned()];
    for u in 0..users {
        let email = format!("signin-{tag}-{u}@example.com");
        let r = post(
            &http,
            format!("{}/api/auth/sign-up/email", nodes[u % 2]),
            json!({"name": "S", "email": email, "password": PASSWORD}),
            None,
        )
        .await;
        assert_eq!(r.status(), 200, "sign-up");
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let started = Instant::now();
    let next = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let workers: Vec<_> = (0..concurrency)
        .map(|_| {
            let (http, nodes, next) = (http.clone(), nodes.clone(), std::sync::Arc::clone(&next));
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                loop {
                    let n = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    if n >= requests {
                        return latencies;
                    }
                    let email = format!("signin-{tag}-{}@example.com", n % users);
                    let at = Instant::now();
                    let r = post(
                        &http,
                        format!("{}/api/auth/sign-in/email", nodes[n % 2]),
                        json!({"email": email, "password": PASSWORD}),
                        None,
                    )
                    .await;
                    assert_eq!(r.status(), 200, "sign-in");
                    latencies.push(at.elapsed());
                }
            })
        })
        .collect();
    let mut latencies = Vec::new();
    for w in workers {
        latencies.extend(w.await.expect("worker"));
    }
    let elapsed = started.elapsed();
    latencies.sort_unstable();
    let over = if a == b { "one node" } else { "two nodes, alternating" };
    println!(
        "sign-in, {over}: {requests} in {elapsed:.2?} = {:.0}/s with {concurrency} in flight; p50 {:.2?}, p99 {:.2?}",
        requests as f64 / elapsed.as_secs_f64(),
        percentile(&latencies, 0.50),
        percentile(&latencies, 0.99)
    );
}
