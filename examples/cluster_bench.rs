//! Measurements of two nodes on one PostgreSQL (benches/cluster.sh starts them): sign-in across both nodes, the
//! cross-node revocation delay of a ban acknowledged on one node and checked on the other, and writes across both
//! nodes (sign-ups and administrator writes) with that revocation delay measured while they run.
//!
//!   cluster_bench revocation URL_A URL_B ADMIN_EMAIL ADMIN_PASSWORD [ROUNDS]
//!   cluster_bench sign-in URL_A URL_B [USERS] [REQUESTS] [CONCURRENCY]
//!   cluster_bench writes URL_A URL_B ADMIN_EMAIL ADMIN_PASSWORD [SECONDS] [SIGN_UP_CLIENTS] [ADMIN_CLIENTS] [ROUNDS]
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
        Some("writes") if args.len() >= 5 => {
            let load = Load { seconds: arg(5, 20) as u64, sign_up_clients: arg(6, 4), admin_clients: arg(7, 8) };
            writes(&args[1], &args[2], &args[3], &args[4], load, arg(8, 200)).await
        }
        _ => {
            eprintln!("usage: cluster_bench revocation URL_A URL_B ADMIN_EMAIL ADMIN_PASSWORD [ROUNDS]");
            eprintln!("       cluster_bench sign-in URL_A URL_B [USERS] [REQUESTS] [CONCURRENCY]");
            eprintln!(
                "       cluster_bench writes URL_A URL_B ADMIN_EMAIL ADMIN_PASSWORD [SECONDS] [SIGN_UP_CLIENTS] \
                 [ADMIN_CLIENTS] [ROUNDS]"
            );
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

async fn sign_in_admin(http: &reqwest::Client, base: &str, email: &str, password: &str) -> String {
    let r = post(http, format!("{base}/api/auth/sign-in/email"), json!({"email": email, "password": password}), None);
    session_cookie(&r.await).expect("admin sign-in")
}

/// A new account signed up on `base`: its session cookie and its id.
async fn sign_up(http: &reqwest::Client, base: &str, email: &str) -> (String, String) {
    let body = json!({"name": "R", "email": email, "password": PASSWORD});
    let r = post(http, format!("{base}/api/auth/sign-up/email"), body, None).await;
    let cookie = session_cookie(&r).expect("sign-up cookie");
    let id = r.json::<Value>().await.expect("JSON")["user"]["id"].as_str().unwrap().to_owned();
    (cookie, id)
}

/// Each round: a new account signs up on A; once B knows its session, B's get-session is polled in a tight loop
/// while A bans the account; the delay is from A's acknowledgement of the ban (its 200) to B's first `null`.
async fn revocation(a: &str, b: &str, admin_email: &str, admin_password: &str, rounds: usize) {
    let http = client();
    let admin = sign_in_admin(&http, a, admin_email, admin_password).await;
    let mut delays = Vec::with_capacity(rounds);
    let tag = std::process::id();
    for round in 0..rounds {
        let (cookie, id) = sign_up(&http, a, &format!("revoke-{tag}-{round}@example.com")).await;
        delays.push(revoke(&http, a, b, &admin, &cookie, &id).await);
    }
    println!("cross-node revocation delay over {rounds} bans (ack on A -> first refusal on B): {}", spread(delays));
}

/// One round of the revocation measurement: once B knows the session `cookie` of account `id`, B's get-session is
/// polled in a tight loop while the administrator bans the account on A; the delay from A's 200 to B's first
/// `null`.
async fn revoke(http: &reqwest::Client, a: &str, b: &str, admin: &str, cookie: &str, id: &str) -> Duration {
    while session_user(http, b, cookie).await.is_none() {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let (poller, b_url, polled) = (http.clone(), b.to_owned(), cookie.to_owned());
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
    refused.saturating_duration_since(acknowledged)
}

/// "p50 …, p99 …, max …" of the delays.
fn spread(mut delays: Vec<Duration>) -> String {
    delays.sort_unstable();
    format!(
        "p50 {:.2?}, p99 {:.2?}, max {:.2?}",
        percentile(&delays, 0.50),
        percentile(&delays, 0.99),
        delays[delays.len() - 1]
    )
}

/// The write load: how long, and how many clients of each kind (each keeps one request in flight).
struct Load {
    seconds: u64,
    sign_up_clients: usize,
    admin_clients: usize,
}

/// Accounts each administrator client writes, in turn: enough that one account's writes are far apart.
const TARGETS_PER_CLIENT: usize = 8;

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    SignUp,
    Admin,
}

/// One write of the load: its kind, the node it went to (0 = A, 1 = B), how long it took, and its status.
struct Done {
    kind: Kind,
    node: usize,
    took: Duration,
    status: u16,
}

/// For `load.seconds`, sign-up clients (each one argon2id hash, so the hashing pools bound them) and administrator
/// clients (the admin plugin's update-user, ban-user, unban-user and set-role on accounts created for them, no
/// hash) write, each request to the node after the previous one's. Meanwhile `rounds` revocation rounds
/// ([`revoke`]) run, spread over the load; the same number run before it, on the idle cluster, for comparison.
///
/// Each account an administrator client writes is always written on the same node (its client's requests still
/// alternate, over accounts of both nodes): two nodes writing one account a moment apart is the conflict
/// docs/cluster.md does not promise to win (503), which is not what this measures. The revocation's victims sign up
/// before the load, so that each round under load is the ban and its arrival only.
async fn writes(a: &str, b: &str, admin_email: &str, admin_password: &str, load: Load, rounds: usize) {
    let http = client();
    let tag = std::process::id();
    let nodes = [a.to_owned(), b.to_owned()];
    let admins = [
        sign_in_admin(&http, a, admin_email, admin_password).await,
        sign_in_admin(&http, b, admin_email, admin_password).await,
    ];

    // The administrator clients' accounts, created without a password (no hash), each on the node that writes it.
    let mut targets = Vec::new();
    for t in 0..load.admin_clients * TARGETS_PER_CLIENT {
        let node = t % 2;
        let r = post(
            &http,
            format!("{}/api/auth/admin/create-user", nodes[node]),
            json!({"email": format!("target-{tag}-{t}@example.com"), "name": "T"}),
            Some(&admins[node]),
        )
        .await;
        assert_eq!(r.status(), 200, "create-user");
        let id = r.json::<Value>().await.expect("JSON")["user"]["id"].as_str().unwrap().to_owned();
        targets.push((node, id));
    }
    // The revocation's victims, 8 sign-ups in flight.
    let mut victims = Vec::with_capacity(2 * rounds);
    let mut pending = tokio::task::JoinSet::new();
    for v in 0..2 * rounds {
        let (http, a) = (http.clone(), a.to_owned());
        pending.spawn(async move { (v, sign_up(&http, &a, &format!("victim-{tag}-{v}@example.com")).await) });
        if pending.len() >= 8 || v + 1 == 2 * rounds {
            while let Some(done) = pending.join_next().await {
                victims.push(done.expect("victim sign-up"));
            }
        }
    }
    victims.sort_unstable_by_key(|(v, _)| *v);
    let mut victims = victims.into_iter().map(|(_, victim)| victim);

    let mut idle = Vec::with_capacity(rounds);
    for (cookie, id) in victims.by_ref().take(rounds) {
        idle.push(revoke(&http, a, b, &admins[0], &cookie, &id).await);
    }

    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let started = Instant::now();
    let mut clients = tokio::task::JoinSet::new();
    for c in 0..load.sign_up_clients {
        let (http, nodes, stop) = (http.clone(), nodes.clone(), std::sync::Arc::clone(&stop));
        clients.spawn(async move {
            let mut done = Vec::new();
            for n in 0.. {
                if stop.load(std::sync::atomic::Ordering::Relaxed) {
                    break;
                }
                let node = (c + n) % 2;
                let email = format!("signup-{tag}-{c}-{n}@example.com");
                let at = Instant::now();
                let body = json!({"name": "S", "email": email, "password": PASSWORD});
                let r = post(&http, format!("{}/api/auth/sign-up/email", nodes[node]), body, None).await;
                done.push(finished(Kind::SignUp, node, at, r).await);
            }
            done
        });
    }
    for c in 0..load.admin_clients {
        let mine = targets[c * TARGETS_PER_CLIENT..(c + 1) * TARGETS_PER_CLIENT].to_vec();
        let (http, nodes, admins, stop) = (http.clone(), nodes.clone(), admins.clone(), std::sync::Arc::clone(&stop));
        clients.spawn(async move {
            let mut done = Vec::new();
            for n in 0.. {
                if stop.load(std::sync::atomic::Ordering::Relaxed) {
                    break;
                }
                let (node, id) = &mine[n % mine.len()];
                // Each account goes through the four writes in turn: a rename, a ban, its lifting, a new role.
                let turn = n / mine.len();
                let (call, body) = match turn % 4 {
                    0 => ("update-user", json!({"userId": id, "data": {"name": format!("T {n}")}})),
                    1 => ("ban-user", json!({"userId": id})),
                    2 => ("unban-user", json!({"userId": id})),
                    _ => {
                        let role = if turn / 4 % 2 == 0 { "qa_manager" } else { "user" };
                        ("set-role", json!({"userId": id, "role": role}))
                    }
                };
                let at = Instant::now();
                let r =
                    post(&http, format!("{}/api/auth/admin/{call}", nodes[*node]), body, Some(&admins[*node])).await;
                done.push(finished(Kind::Admin, *node, at, r).await);
            }
            done
        });
    }

    // The rounds under load, one every `pace`, from a second into the load to a second before its end.
    let pace = Duration::from_secs(load.seconds.saturating_sub(2)) / rounds.max(1) as u32;
    let mut loaded = Vec::with_capacity(rounds);
    for (round, (cookie, id)) in victims.enumerate() {
        tokio::time::sleep_until((started + Duration::from_secs(1) + pace * round as u32).into()).await;
        loaded.push(revoke(&http, a, b, &admins[0], &cookie, &id).await);
    }
    let last_round = started.elapsed();
    tokio::time::sleep_until((started + Duration::from_secs(load.seconds)).into()).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut done = Vec::new();
    while let Some(client) = clients.join_next().await {
        done.extend(client.expect("client"));
    }
    let elapsed = started.elapsed();

    println!(
        "writes across two nodes for {elapsed:.2?}, {} sign-up and {} administrator clients, alternating nodes:",
        load.sign_up_clients, load.admin_clients
    );
    for (kind, name) in [(Kind::SignUp, "sign-up (argon2id)"), (Kind::Admin, "admin write (no hash)")] {
        let per_node: Vec<String> = ["A", "B", "both"]
            .iter()
            .enumerate()
            .map(|(node, label)| {
                let mut took: Vec<Duration> =
                    done.iter().filter(|d| d.kind == kind && (node == 2 || d.node == node)).map(|d| d.took).collect();
                took.sort_unstable();
                if took.is_empty() {
                    return format!("{label} none");
                }
                format!(
                    "{label} {:.1}/s (p50 {:.2?}, p99 {:.2?})",
                    took.len() as f64 / elapsed.as_secs_f64(),
                    percentile(&took, 0.50),
                    percentile(&took, 0.99)
                )
            })
            .collect();
        let errors = done.iter().filter(|d| d.kind == kind && d.status != 200).count();
        println!("  {name}: {}; errors {errors}", per_node.join(", "));
    }
    println!(
        "cross-node revocation delay over {rounds} bans under that load (its last at {last_round:.1?}): {}; \
         idle just before, the same way: {}",
        spread(loaded),
        spread(idle)
    );
}

/// A write's outcome, once its answer is read whole; a status other than 200 is printed with its body (the run's
/// errors must be explained).
async fn finished(kind: Kind, node: usize, at: Instant, r: reqwest::Response) -> Done {
    let status = r.status().as_u16();
    let body = r.text().await.unwrap_or_default();
    let took = at.elapsed();
    if status != 200 {
        eprintln!("write to node {}: {status} {body}", ["A", "B"][node]);
    }
    Done { kind, node, took, status }
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
