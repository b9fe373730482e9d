//! Prometheus metrics on their own listener: known traffic shows up as the exact numbers, labels are route
//! patterns (never raw paths), and a real scrape passes what `promtool check metrics` checks (exposition_check.py).

use std::collections::BTreeMap;
use std::io::Write;
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::Duration;

use reqwest::Method;
use serde_json::json;

use super::harness::*;

/// A metrics listener on any free port of loopback: the in-process server binds it and [`TestServer::metrics`]
/// says which. (A port found free and then handed over can be taken meanwhile by any of the parallel tests'
/// connections, and the server then refuses to start.)
pub const ANY_PORT: SocketAddr = SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 0);

/// A port free now on loopback, for a server started as a child process (configured by address, like in
/// production).
pub fn free_port() -> SocketAddr {
    let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    probe.local_addr().unwrap()
}

pub async fn scrape(addr: SocketAddr) -> (String, String) {
    let r = reqwest::Client::builder().no_proxy().build().unwrap();
    let answer = r.get(format!("http://{addr}/metrics")).send().await.expect("scrape");
    assert_eq!(answer.status(), 200);
    let content_type = answer.headers()["content-type"].to_str().unwrap().to_owned();
    (content_type, answer.text().await.unwrap())
}

/// `name{labels}` → value, for every sample line.
pub fn samples(text: &str) -> BTreeMap<String, f64> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let (key, value) = l.rsplit_once(' ').unwrap_or_else(|| panic!("bad sample line {l:?}"));
            (key.to_owned(), value.parse().unwrap_or_else(|_| panic!("bad value in {l:?}")))
        })
        .collect()
}

pub fn value(samples: &BTreeMap<String, f64>, key: &str) -> f64 {
    *samples.get(key).unwrap_or_else(|| panic!("no sample {key}; have:\n{samples:#?}"))
}

/// The Python that has prometheus-client: the repository's `.venv` (where `./test` installs tests/requirements.txt),
/// else `python3` on PATH. Nothing is installed from here: a missing package fails at once, saying how to get it.
fn python() -> std::ffi::OsString {
    let venv = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python3");
    let python = if venv.exists() { venv.into_os_string() } else { "python3".into() };
    match Command::new(&python).args(["-c", "import prometheus_client"]).output() {
        Ok(out) if out.status.success() => python,
        Ok(_) => panic!(
            "prometheus-client is not installed: run ./test once (it installs tests/requirements.txt into .venv), or \
             `python3 -m pip install prometheus-client==0.26.0`"
        ),
        Err(e) => panic!("cannot run {python:?} ({e}): the metrics tests need python3 with prometheus-client"),
    }
}

/// Checks `text` as `promtool check metrics` does (tests/api/exposition_check.py: prometheus-client's parser and
/// promtool's lint rules; promtool itself comes only in the Prometheus server's package). The problems it finds,
/// one a line, or nothing when it accepts `text`.
pub fn exposition_problems(text: &str) -> String {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/api/exposition_check.py");
    let mut child = Command::new(python())
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run tests/api/exposition_check.py");
    child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let problems = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.success(), problems.is_empty(), "{problems}{}", String::from_utf8_lossy(&out.stderr));
    problems
}

/// Fails, naming every problem, unless the exposition check accepts `text`.
pub fn exposition_check(text: &str) {
    let problems = exposition_problems(text);
    assert!(problems.is_empty(), "the exposition check failed:\n{problems}\non:\n{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn known_traffic_shows_in_the_metrics_and_the_exposition_check_accepts_them() {
    let s = TestServer::start_adjusted(|c| {
        c.metrics.listen = Some(ANY_PORT);
        c.rate_limit.sign_in_per_address = 4;
    })
    .await;
    let metrics = s.metrics();
    // Once the server answers, its metrics listener is up too. Before other traffic: the levels are there, the
    // bootstrap administrator counted.
    assert_eq!(s.get("/api/auth/get-session").send().await.status, 200);
    let (content_type, text) = scrape(metrics).await;
    assert_eq!(content_type, "text/plain; version=0.0.4; charset=utf-8");
    let before = samples(&text);
    assert_eq!(value(&before, "service_auth_users"), 1.0);
    assert_eq!(value(&before, "service_auth_sessions"), 0.0);

    for _ in 0..2 {
        assert_eq!(s.get("/api/auth/get-session").send().await.status, 200);
    }
    assert_eq!(s.req(Method::HEAD, "/healthz").send().await.status, 200);
    for path in ["/nope", "/api/auth/secret-path-abc"] {
        assert_eq!(s.get(path).send().await.status, 404);
    }
    let alice = s.new_user("alice").await;
    s.post("/api/admin/organizations").cookie(&alice.cookie).json(&json!({"name": "A", "slug": "a"})).send().await;
    let mut statuses = Vec::new();
    for password in ["wrong-password-1", "wrong-password-2", PASSWORD, "wrong-password-3", PASSWORD] {
        statuses.push(s.sign_in(&alice.email, password).await.0);
    }
    assert_eq!(statuses, [401, 401, 200, 401, 429]);

    let (_, text) = scrape(metrics).await;
    let m = samples(&text);
    let requests = |route: &str, status: u16| {
        value(&m, &format!("service_auth_http_requests_total{{route=\"{route}\",status=\"{status}\"}}"))
    };
    assert_eq!(requests("/api/auth/get-session", 200), 3.0);
    assert_eq!(requests("/healthz", 200), 1.0, "HEAD counts as its route");
    assert_eq!(requests("unmatched", 404), 2.0);
    assert_eq!(requests("/api/auth/sign-up/email", 200), 1.0);
    assert_eq!(requests("/api/admin/organizations", 403), 1.0);
    assert_eq!(requests("/api/auth/sign-in/email", 401), 3.0);
    assert_eq!(requests("/api/auth/sign-in/email", 200), 1.0);
    assert_eq!(requests("/api/auth/sign-in/email", 429), 1.0);
    assert!(!text.contains("/nope") && !text.contains("secret-path"), "a raw path became a label:\n{text}");
    let duration = "service_auth_http_request_duration_seconds";
    assert_eq!(value(&m, &format!("{duration}_count{{route=\"/api/auth/get-session\"}}")), 3.0);
    assert_eq!(value(&m, &format!("{duration}_bucket{{route=\"/api/auth/get-session\",le=\"+Inf\"}}")), 3.0);
    assert_eq!(value(&m, "service_auth_rate_limited_total{route=\"/api/auth/sign-in/email\"}"), 1.0);
    assert_eq!(value(&m, "service_auth_sign_ins_total{outcome=\"success\"}"), 1.0);
    assert_eq!(value(&m, "service_auth_sign_ins_total{outcome=\"INVALID_EMAIL_OR_PASSWORD\"}"), 3.0);
    assert_eq!(value(&m, "service_auth_sign_ins_total{outcome=\"TOO_MANY_REQUESTS\"}"), 1.0);
    assert_eq!(value(&m, "service_auth_users"), 2.0);
    assert_eq!(value(&m, "service_auth_sessions"), 2.0, "alice's sign-up and sign-in sessions");
    assert_eq!(value(&m, "service_auth_organizations"), 0.0);
    assert_eq!(value(&m, "service_auth_mail_outbox_depth"), 0.0);
    assert_eq!(value(&m, "service_auth_hashing_queue_depth"), 0.0);
    // A sign-up hash and four verifies (the rate-limited sign-in never reached the pool).
    assert!(value(&m, "service_auth_hashing_wait_seconds_count") >= 5.0, "{text}");
    let commits = value(&m, "service_auth_store_commit_duration_seconds_count");
    assert!(commits >= 2.0, "sign-up and sign-in each committed: {commits}");
    assert_eq!(value(&m, "service_auth_store_commit_batch_requests_count"), commits);
    assert!(value(&m, "service_auth_store_commit_batch_requests_sum") >= commits);

    exposition_check(&text);

    // Never on the public port.
    assert_eq!(s.get("/metrics").send().await.status, 404);
    s.stop().await;
}

/// The check stands in for `promtool check metrics`, so it refuses what promtool refuses: a real scrape with one
/// fault put in at a time is each refused, naming the fault, while the scrape as served passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_exposition_check_refuses_what_promtool_refuses() {
    let s = TestServer::start_adjusted(|c| c.metrics.listen = Some(ANY_PORT)).await;
    assert_eq!(s.get("/api/auth/get-session").send().await.status, 200);
    let (_, text) = scrape(s.metrics()).await;
    s.stop().await;
    exposition_check(&text);
    let counter = "service_auth_http_requests_total";
    let gauge = "service_auth_users";
    let faults: Vec<(&str, String, &str)> = vec![
        ("a counter without _total", text.replace(counter, "service_auth_http_requests"), "'_total' suffix"),
        (
            "a family without help",
            text.lines().filter(|l| !l.starts_with(&format!("# HELP {gauge} "))).collect::<Vec<_>>().join("\n"),
            "no help text",
        ),
        ("a family exposed twice", format!("{text}{gauge} 7\n"), "outside its family"),
        ("a value that is no number", text.replace(&format!("\n{gauge} "), &format!("\n{gauge} x")), "parsing error"),
        ("a unit not in base units", text.replace("_seconds", "_milliseconds"), "use base unit"),
        ("a camelCase label", text.replace("route=", "routePattern="), "camelCase"),
        (
            "a histogram whose +Inf bucket is not its count",
            text.replacen("le=\"+Inf\"} ", "le=\"+Inf\"} 9", 1),
            "the +Inf bucket is not the _count",
        ),
    ];
    for (fault, broken, named) in faults {
        let problems = exposition_problems(&broken);
        assert!(problems.contains(named), "{fault}: expected {named:?}, got {problems:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_taken_metrics_port_stops_start_up_naming_the_key() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let root = tempfile::tempdir().unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let (status, stdout, stderr) =
        run_binary(root.path(), &["serve"], &[("SERVICE_AUTH_METRICS_LISTEN", addr.as_str())], "");
    assert!(!status.success());
    assert!(!stdout.contains("listening on"), "announced before failing: {stdout}");
    assert!(stderr.contains("[metrics] listen") && stderr.contains(&addr), "{stderr}");
}

/// Before: the metrics listener accepted without a cap, and its connections took the open files the public
/// port's cap had been computed from: 100 idle connections to it under `ulimit -n 64` made `accept` fail on both
/// ports ("Too many open files") and `GET /healthz` on the public port wait until the metrics port's header
/// timeout (10 s) closed some. Now it holds at most `[metrics] max_connections` (16), set aside from the public
/// cap, and the rest wait in the kernel's queue (kept short here: its length is the kernel's to choose).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_metrics_connections_cannot_starve_the_public_port() {
    let metrics = free_port();
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("config.toml"), format!("[metrics]\nlisten = \"{metrics}\"\n")).unwrap();
    let s = ChildServer::spawn_with_open_files(root.path(), BOOTSTRAP_ENV, Some(64)).await;
    let mut idle = Vec::new();
    for _ in 0..100 {
        idle.push(tokio::net::TcpStream::connect(metrics).await.expect("connect"));
    }
    // A scrape that got a place is answered: the connections are held, not refused.
    let mut first = idle.remove(0);
    {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        first.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
        let mut head = [0u8; 12];
        first.read_exact(&mut head).await.expect("the first metrics connection is served");
        assert_eq!(&head, b"HTTP/1.1 200");
    }
    // Well within the metrics port's 10 s header timeout, which used to be what freed the public port.
    for _ in 0..20 {
        let served = tokio::time::timeout(Duration::from_secs(5), s.get("/healthz").send()).await;
        assert_eq!(served.expect("the public port did not answer within 5 s").status, 200);
    }
    drop((first, idle));
    let log = s.stderr();
    assert!(!log.contains("Too many open files"), "a listener ran out of descriptors:\n{log}");
    assert!(!log.contains("not on a loopback address"), "a loopback metrics address was warned about:\n{log}");
}

/// The metrics listener has no authentication: bound to an address other machines can reach, start-up says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_metrics_listener_off_loopback_is_warned_about() {
    let port = free_port().port();
    let root = tempfile::tempdir().unwrap();
    let wildcard = format!("0.0.0.0:{port}");
    let s = ChildServer::spawn(root.path(), &[("SERVICE_AUTH_METRICS_LISTEN", wildcard.as_str())]).await;
    assert_eq!(s.get("/healthz").send().await.status, 200);
    let log = s.stderr();
    assert!(log.contains("not on a loopback address") && log.contains(&wildcard), "{log}");
}
