//! Webhooks against a real receiver: a Python server started here that verifies every message with the Standard
//! Webhooks library (PyPI `standardwebhooks`), fails on purpose for a while (5xx, answers too slow, connection
//! refused), and logs what it got. Nothing may be lost and nothing delivered out of order per account.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::harness::{BOOTSTRAP_ENV, ChildServer, Client, PASSWORD, TestServer, test_config};

const RECEIVER: &str = r#"
import sys, json, time, threading
from http.server import ThreadingHTTPServer, BaseHTTPRequestHandler
from standardwebhooks.webhooks import Webhook

port, log_path = int(sys.argv[1]), sys.argv[2]
state = {"secrets": [], "mode": "ok", "until": 0.0, "delay": 0.0}
lock = threading.Lock()

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        if self.path == "/control":
            with lock:
                state.update(json.loads(body))
                if "for" in state:
                    state["until"] = time.time() + state.pop("for")
            return self.answer(200)
        now = time.time()
        with lock:
            mode = state["mode"] if now < state["until"] else "ok"
            secrets = list(state["secrets"])
            delay = state["delay"]
        headers = {k.lower(): v for k, v in self.headers.items()}
        verified = None
        for secret in secrets:
            try:
                verified = Webhook(secret).verify(body, headers)
                break
            except Exception:
                pass
        record = {"id": headers.get("webhook-id"), "at": now, "mode": mode, "verified": verified is not None,
                  "signatures": headers.get("webhook-signature", "").count("v1,")}
        if verified is not None:
            record["type"] = verified["type"]
            record["data"] = verified["data"]
            record["timestamp"] = verified["timestamp"]
        with lock:
            with open(log_path, "a") as f:
                f.write(json.dumps(record) + "\n")
        if mode == "fail":
            return self.answer(503)
        if mode == "timeout":
            time.sleep(delay)
        self.answer(200 if verified is not None else 400)

    def answer(self, code):
        self.send_response(code)
        self.send_header("content-length", "0")
        self.end_headers()

ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()
"#;

/// Installs `standardwebhooks` from PyPI the first time it is missing, so `cargo test` alone sets up what it needs.
fn ensure_library() {
    static INSTALLED: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    INSTALLED.get_or_init(|| {
        let present =
            Command::new("python3").args(["-c", "import standardwebhooks"]).status().is_ok_and(|s| s.success());
        if !present {
            let status = Command::new("python3")
                .args(["-m", "pip", "install", "-q", "standardwebhooks==1.1.0"])
                .status()
                .expect("python3 -m pip");
            assert!(status.success(), "pip install standardwebhooks failed");
        }
    });
}

/// Whether the receiver's control answer is its 200.
fn is_ok(answer: &str) -> bool {
    answer.starts_with("HTTP/1.1 200") || answer.starts_with("HTTP/1.0 200")
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// The receiver: a child process on a fixed port (so it can be stopped and started again), logging to a file.
struct Receiver {
    child: Option<Child>,
    port: u16,
    dir: tempfile::TempDir,
    secrets: Vec<String>,
}

impl Receiver {
    fn start() -> Self {
        ensure_library();
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("receiver.py"), RECEIVER).unwrap();
        let mut receiver = Self { child: None, port: free_port(), dir, secrets: Vec::new() };
        // A port found free can be taken by a parallel test's server before the receiver binds it (the receiver
        // then exits, and the port answers for that server): another port, then.
        for _ in 0..5 {
            if receiver.try_resume() {
                return receiver;
            }
            receiver.pause();
            receiver.port = free_port();
        }
        panic!("the receiver did not start on any of five ports");
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/hook", self.port)
    }

    fn log(&self) -> PathBuf {
        self.dir.path().join("received.jsonl")
    }

    /// Starts the process (again) on its port; what it knew is given to it again.
    fn resume(&mut self) {
        assert!(self.try_resume(), "the receiver did not start again on port {}", self.port);
    }

    /// [`resume`](Self::resume), answering whether it is the receiver that now listens on the port.
    fn try_resume(&mut self) -> bool {
        let child = Command::new("python3")
            .arg(self.dir.path().join("receiver.py"))
            .args([&self.port.to_string(), self.log().to_str().unwrap()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3 receiver.py");
        self.child = Some(child);
        let started = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            if self.child.as_mut().is_some_and(|c| c.try_wait().is_ok_and(|exited| exited.is_some())) {
                return false;
            }
            assert!(started.elapsed() < Duration::from_secs(15), "the receiver did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        let secrets = self.secrets.clone();
        let answer = self.try_control(json!({"secrets": secrets}));
        let running = self.child.as_mut().is_some_and(|c| c.try_wait().is_ok_and(|exited| exited.is_none()));
        running && is_ok(&answer)
    }

    /// Stops the process: connections are refused until [`resume`](Self::resume).
    fn pause(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn trust(&mut self, secrets: &[&str]) {
        self.secrets = secrets.iter().map(|s| (*s).to_owned()).collect();
        let secrets = self.secrets.clone();
        self.control(json!({"secrets": secrets}));
    }

    fn control(&self, body: Value) {
        let answer = self.try_control(body);
        assert!(is_ok(&answer), "{answer}");
    }

    fn try_control(&self, body: Value) -> String {
        let mut stream = std::net::TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        let body = body.to_string();
        let request = format!(
            "POST /control HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        std::io::Write::write_all(&mut stream, request.as_bytes()).unwrap();
        let mut answer = String::new();
        let _ = std::io::Read::read_to_string(&mut stream, &mut answer);
        answer
    }

    /// Everything received so far, in arrival order.
    fn received(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(self.log()).unwrap_or_default();
        text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    }

    /// Per account, the event types a receiver would have processed, in the order it first accepted each message
    /// (answered 2xx, or slowly: a receiver that acts before answering has acted), each message once.
    fn accepted_by_account(&self) -> HashMap<String, Vec<String>> {
        let mut seen = std::collections::HashSet::new();
        let mut out: HashMap<String, Vec<String>> = HashMap::new();
        for r in self.received() {
            if r["mode"] == "fail" || r["verified"] != true || !seen.insert(r["id"].as_str().unwrap().to_owned()) {
                continue;
            }
            if let Some(user) = r["data"]["user_id"].as_str() {
                out.entry(user.to_owned()).or_default().push(r["type"].as_str().unwrap().to_owned());
            }
        }
        out
    }

    /// Waits (at most a minute) until `done` holds for what was received.
    async fn wait_for(&self, what: &str, done: impl Fn(&Self) -> bool) {
        let started = Instant::now();
        while !done(self) {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "waited a minute for {what}; got {:#?}",
                self.received()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.pause();
    }
}

const ALL: [&str; 8] = [
    "user.created",
    "user.updated",
    "user.deleted",
    "user.banned",
    "user.unbanned",
    "user.role_changed",
    "user.password_changed",
    "session.revoked",
];

/// The receiver listens on 127.0.0.1: a child server started in `root` may deliver there (its `config.toml`).
fn allow_internal_targets(root: &std::path::Path) {
    std::fs::write(root.join("config.toml"), "[webhooks]\nallow_internal_targets = true\n").unwrap();
}

async fn register(client: &Client, admin: &str, url: &str) -> (String, String) {
    let created =
        client.post("/api/admin/webhooks").cookie(admin).json(&json!({"url": url, "events": ALL})).send().await;
    assert_eq!(created.status, 201, "{}", created.text);
    let body = created.json();
    (body["webhook"]["id"].as_str().unwrap().to_owned(), body["secret"].as_str().unwrap().to_owned())
}

/// Through 5xx answers, answers slower than the attempt's time limit and a receiver that is down, every message of
/// every account arrives, signed so that the Standard Webhooks library verifies it, in commit order per account;
/// the delivery log shows the failed attempts; a rotated secret signs beside the new one during its grace period.
#[tokio::test]
async fn every_event_arrives_signed_and_in_order_through_failures() {
    let server = TestServer::start_adjusted(|c| {
        c.webhooks.allow_internal_targets = true;
        c.webhooks.timeout_ms = 500;
        c.webhooks.max_backoff_secs = 1;
    })
    .await;
    let client = &server.client;
    let admin = client.admin_session().await;
    let mut receiver = Receiver::start();
    let (hook, secret) = register(client, &admin, &receiver.url()).await;
    assert!(secret.starts_with("whsec_"));
    receiver.trust(&[&secret]);
    let listed = client.get("/api/admin/webhooks").cookie(&admin).send().await;
    assert!(!listed.text.contains(&secret), "the secret is shown again: {}", listed.text);

    let mut users = Vec::new();
    for i in 0..4 {
        users.push(client.new_user(&format!("hooked{i}")).await);
    }
    // 5xx for a while: role changes and bans.
    receiver.control(json!({"mode": "fail", "for": 3.0}));
    for u in &users {
        client.patch_ok(&admin, &json!({"userId": u.id, "role": "qa_manager"})).await;
        client.patch_ok(&admin, &json!({"userId": u.id, "banned": true, "banReason": "audit"})).await;
    }
    let saw = |mode: &'static str| move |r: &Receiver| r.received().iter().any(|m| m["mode"] == mode);
    receiver.wait_for("an attempt answered 503", saw("fail")).await;
    // Answers slower than the time limit: unbans.
    receiver.control(json!({"mode": "timeout", "for": 3.0, "delay": 1.5}));
    for u in &users {
        client.patch_ok(&admin, &json!({"userId": u.id, "banned": false})).await;
    }
    receiver.wait_for("an attempt answered too late", saw("timeout")).await;
    // Down: profile changes and "sign out everywhere".
    receiver.pause();
    for u in &users {
        let cookie = client.login(&u.email, PASSWORD).await;
        let renamed =
            client.post("/api/auth/update-user").cookie(&cookie).json(&json!({"name": "Renamed"})).send().await;
        assert_eq!(renamed.status, 200, "{}", renamed.text);
        let revoked = client.post("/api/auth/revoke-sessions").cookie(&cookie).send().await;
        assert_eq!(revoked.status, 200, "{}", revoked.text);
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    receiver.resume();

    let expected = [
        "user.created",
        "user.role_changed",
        "user.banned",
        "session.revoked",
        "user.unbanned",
        "user.updated",
        "session.revoked",
    ];
    receiver
        .wait_for("every account's messages", |r| {
            let got = r.accepted_by_account();
            users.iter().all(|u| got.get(&u.id).is_some_and(|e| e.len() >= expected.len()))
        })
        .await;
    let got = receiver.accepted_by_account();
    for u in &users {
        assert_eq!(got[&u.id], expected, "account {}: {:#?}", u.id, receiver.received());
    }
    let received = receiver.received();
    assert!(received.iter().all(|r| r["verified"] == true), "a signature did not verify: {received:#?}");
    let modes: Vec<&str> = received.iter().map(|r| r["mode"].as_str().unwrap()).collect();
    assert!(modes.contains(&"fail") && modes.contains(&"timeout"), "{modes:?}");
    let no_secret = |r: &&Value| {
        let text = r.to_string();
        !text.contains("argon2") && !text.contains(&users[0].cookie)
    };
    assert!(received.iter().all(|r| no_secret(&r)), "a payload carries a hash or a token");

    // The delivery log has the failed attempts (503, and none answered in time) and the delivered ones. A message
    // the receiver acted on while answering too late counts as accepted above but is delivered again after its
    // backoff, and each outcome is written after the receiver's answer: the log is read until it has caught up.
    let delivered = users.len() * expected.len();
    let started = Instant::now();
    let log = loop {
        let log = client.get(&format!("/api/admin/webhooks/{hook}/deliveries?limit=500")).cookie(&admin).send().await;
        assert_eq!(log.status, 200, "{}", log.text);
        let log = log.json()["deliveries"].as_array().unwrap().clone();
        if log.iter().filter(|d| d["success"] == true).count() >= delivered {
            break log;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "fewer than {delivered} deliveries logged: {log:#?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(log.iter().any(|d| d["status"] == 503 && d["success"] == false));
    assert!(log.iter().any(|d| d["status"].is_null() && d["success"] == false));

    // Rotation with a grace period: both secrets sign; a receiver holding either one verifies.
    let rotated = client
        .patch(&format!("/api/admin/webhooks/{hook}"))
        .cookie(&admin)
        .json(&json!({"rotate_secret": true, "grace_secs": 3600}))
        .send()
        .await;
    assert_eq!(rotated.status, 200, "{}", rotated.text);
    let new_secret = rotated.json()["secret"].as_str().unwrap().to_owned();
    assert_ne!(new_secret, secret);
    receiver.trust(&[&secret]);
    client.patch_ok(&admin, &json!({"userId": users[0].id, "role": "user"})).await;
    receiver.trust(&[&new_secret]);
    client.patch_ok(&admin, &json!({"userId": users[1].id, "role": "user"})).await;
    receiver
        .wait_for("both role changes", |r| {
            let got = r.accepted_by_account();
            got[&users[0].id].len() > expected.len() && got[&users[1].id].len() > expected.len()
        })
        .await;
    let last = receiver.received().into_iter().last().unwrap();
    assert_eq!(last["signatures"], 2, "two signatures during the grace period: {last}");
    assert!(receiver.received().iter().all(|r| r["verified"] == true));

    // The rotation and the registration are audited; the secret is in no audit entry.
    let audit = client.get("/api/admin/audit?limit=200").cookie(&admin).send().await.text;
    assert!(audit.contains("webhook.created") && audit.contains("webhook.secret_rotated"));
    assert!(!audit.contains(&secret) && !audit.contains(&new_secret));
    server.stop().await;
}

/// A test message, a resend with the same `webhook-id`, and the endpoint's rules: https (or http to loopback), a
/// known event, an administrator.
#[tokio::test]
async fn test_and_resend_and_the_rules_of_an_endpoint() {
    let server = TestServer::start_adjusted(|c| c.webhooks.allow_internal_targets = true).await;
    let client = &server.client;
    let admin = client.admin_session().await;
    let mut receiver = Receiver::start();
    let (hook, secret) = register(client, &admin, &receiver.url()).await;
    receiver.trust(&[&secret]);
    let sent = client.post(&format!("/api/admin/webhooks/{hook}/test")).cookie(&admin).send().await;
    assert_eq!(sent.status, 202, "{}", sent.text);
    let message = sent.json()["message_id"].as_str().unwrap().to_owned();
    receiver.wait_for("the test message", |r| r.received().iter().any(|m| m["id"] == message.as_str())).await;
    // The attempt is recorded once the receiver has answered (and, on two nodes, read on the other a moment later).
    let mut delivery = Value::Null;
    for _ in 0..200 {
        let log = client.get(&format!("/api/admin/webhooks/{hook}/deliveries")).cookie(&admin).send().await.json();
        delivery = log["deliveries"][0].clone();
        if !delivery.is_null() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!((delivery["event"].as_str(), delivery["success"].as_bool()), (Some("webhook.test"), Some(true)));
    let resent = client
        .post(&format!("/api/admin/webhooks/{hook}/resend"))
        .cookie(&admin)
        .json(&json!({"delivery_id": delivery["id"]}))
        .send()
        .await;
    assert_eq!(resent.status, 202, "{}", resent.text);
    receiver
        .wait_for("the resent message", |r| r.received().iter().filter(|m| m["id"] == message.as_str()).count() == 2)
        .await;

    for (body, why) in [
        (json!({"url": "http://example.com/hook", "events": ["user.banned"]}), "http to a public host"),
        (json!({"url": "ftp://example.com/", "events": ["user.banned"]}), "another scheme"),
        (json!({"url": "https://u:p@example.com/", "events": ["user.banned"]}), "credentials in the URL"),
        (json!({"url": "https://example.com/", "events": ["user.exploded"]}), "an unknown event"),
        (json!({"url": "https://example.com/", "events": []}), "no event"),
    ] {
        let refused = client.post("/api/admin/webhooks").cookie(&admin).json(&body).send().await;
        assert_eq!(refused.status, 400, "{why}: {}", refused.text);
    }
    let user = client.new_user("not-admin").await;
    let refused = client.get("/api/admin/webhooks").cookie(&user.cookie).send().await;
    assert_eq!(refused.status, 403);
    let deleted = client.delete(&format!("/api/admin/webhooks/{hook}")).cookie(&admin).send().await;
    assert_eq!(deleted.status, 200);
    let gone = client.get(&format!("/api/admin/webhooks/{hook}")).cookie(&admin).send().await;
    assert_eq!(gone.status, 404);
    server.stop().await;
}

/// `kill -9` right after a ban is acknowledged, with the receiver down: the message was committed with the ban, so
/// `user.banned` arrives once the server is back.
#[tokio::test]
async fn a_ban_acknowledged_before_a_kill_9_is_delivered_after_the_restart() {
    let root = tempfile::tempdir().unwrap();
    let mut receiver = Receiver::start();
    allow_internal_targets(root.path());
    let server = ChildServer::spawn(root.path(), BOOTSTRAP_ENV).await;
    let admin = server.client.admin_session().await;
    let (_, secret) = register(&server.client, &admin, &receiver.url()).await;
    receiver.trust(&[&secret]);
    let user = server.client.new_user("banned-then-killed").await;
    receiver.wait_for("user.created", |r| r.accepted_by_account().contains_key(&user.id)).await;
    receiver.pause();
    server.client.patch_ok(&admin, &json!({"userId": user.id, "banned": true})).await;
    server.kill9();
    receiver.resume();
    let server = ChildServer::spawn(root.path(), &[]).await;
    receiver
        .wait_for("user.banned after the restart", |r| {
            r.accepted_by_account().get(&user.id).is_some_and(|e| e.iter().any(|t| t == "user.banned"))
        })
        .await;
    drop(server);
}

/// Two nodes on PostgreSQL: the node holding an endpoint's lease is killed (`kill -9`) with messages queued; the
/// other node takes the queue over once the lease has run out and delivers every message, in order per account.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn when_the_delivering_node_dies_the_other_delivers_everything() {
    use super::harness::cluster;
    let pg = tokio::task::spawn_blocking(cluster::Postgres::start).await.unwrap();
    let (root_a, root_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let url = cluster::database_for(&pg.url(), root_a.path()).await;
    let shared = [("SERVICE_AUTH_STORE_BACKEND", "postgres"), ("SERVICE_AUTH_STORE_URL", url.as_str())];
    let mut receiver = Receiver::start();
    allow_internal_targets(root_a.path());
    allow_internal_targets(root_b.path());
    // Node A alone first: it takes the endpoint's lease with the first delivery.
    let a = ChildServer::spawn(root_a.path(), &[&shared[..], BOOTSTRAP_ENV].concat()).await;
    let admin = a.client.admin_session().await;
    let (_, secret) = register(&a.client, &admin, &receiver.url()).await;
    receiver.trust(&[&secret]);
    let first = a.client.new_user("before-the-kill").await;
    receiver.wait_for("user.created from node A", |r| r.accepted_by_account().contains_key(&first.id)).await;
    let b = ChildServer::spawn(root_b.path(), &shared).await;
    // Changes made on node B while the receiver is down: queued in PostgreSQL, leased by node A.
    receiver.pause();
    let admin_b = b.client.admin_session().await;
    let mut users = vec![first];
    for i in 0..3 {
        users.push(b.client.new_user(&format!("after-the-kill{i}")).await);
    }
    for u in &users {
        b.client.patch_ok(&admin_b, &json!({"userId": u.id, "role": "qa_manager"})).await;
        b.client.patch_ok(&admin_b, &json!({"userId": u.id, "banned": true})).await;
    }
    a.kill9();
    receiver.resume();
    let tail = ["user.role_changed", "user.banned", "session.revoked"];
    receiver
        .wait_for("every message from node B", |r| {
            let got = r.accepted_by_account();
            users.iter().all(|u| got.get(&u.id).is_some_and(|e| e.len() > tail.len()))
        })
        .await;
    let got = receiver.accepted_by_account();
    for u in &users {
        let mut expected = vec!["user.created"];
        expected.extend(tail);
        assert_eq!(got[&u.id], expected, "account {}", u.id);
    }
    assert!(receiver.received().iter().all(|r| r["verified"] == true));
    drop(b);
}

/// Not a check (no timed assertion): measures the time from a change's commit to its message's arrival at the
/// receiver, over `WEBHOOK_LATENCY_EVENTS` (default 300) role changes of as many accounts, made back to back, and
/// prints p50, p99 and the maximum. (One account's messages go one at a time, each after the previous one's
/// delivery is recorded: a burst of changes to one account queues behind itself, by design.)
/// `cargo test --release --test api measure_webhook_delivery_latency -- --ignored --nocapture` (BENCHMARKS.md).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement, run by hand"]
async fn measure_webhook_delivery_latency() {
    let count: usize = std::env::var("WEBHOOK_LATENCY_EVENTS").ok().and_then(|v| v.parse().ok()).unwrap_or(300);
    let server = TestServer::start_adjusted(|c| c.webhooks.allow_internal_targets = true).await;
    let client = &server.client;
    let admin = client.admin_session().await;
    let mut users = Vec::new();
    for n in 0..count {
        users.push(client.new_user(&format!("measured{n}")).await.id);
    }
    let mut receiver = Receiver::start();
    let created = client
        .post("/api/admin/webhooks")
        .cookie(&admin)
        .json(&json!({"url": receiver.url(), "events": ["user.role_changed"]}))
        .send()
        .await;
    let secret = created.json()["secret"].as_str().unwrap().to_owned();
    receiver.trust(&[&secret]);
    let mut acked = Vec::new();
    for user in &users {
        client.patch_ok(&admin, &json!({"userId": user, "role": "qa_manager"})).await;
        acked.push(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64());
    }
    receiver
        .wait_for("every role change", |r| {
            r.received().iter().filter(|m| m["type"] == "user.role_changed").count() >= count
        })
        .await;
    let arrivals: Vec<Value> = receiver.received().into_iter().filter(|m| m["type"] == "user.role_changed").collect();
    let acked: HashMap<&str, f64> = users.iter().map(String::as_str).zip(acked).collect();
    let mut from_commit: Vec<f64> = Vec::new();
    let mut from_ack: Vec<f64> = Vec::new();
    for m in &arrivals {
        let ack = acked[m["data"]["user_id"].as_str().unwrap()];
        let at = m["at"].as_f64().unwrap();
        let stamped = chrono_ms(m);
        from_commit.push((at - stamped) * 1000.0);
        from_ack.push((at - ack) * 1000.0);
    }
    let show = |name: &str, v: &mut Vec<f64>| {
        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
        let p = |q: f64| v[((v.len() as f64 * q).ceil() as usize).saturating_sub(1).min(v.len() - 1)];
        eprintln!("{name}: n={} p50={:.1} ms p99={:.1} ms max={:.1} ms", v.len(), p(0.5), p(0.99), v[v.len() - 1]);
    };
    show("commit (payload timestamp) -> arrival", &mut from_commit);
    show("200 to the client -> arrival", &mut from_ack);
    server.stop().await;
}

/// The payload's `timestamp` (the commit's time, RFC 3339 with milliseconds) as Unix seconds.
fn chrono_ms(message: &Value) -> f64 {
    let text = message["timestamp"].as_str().unwrap_or_else(|| panic!("no timestamp in {message}"));
    let parsed = chrono::DateTime::parse_from_rfc3339(text).unwrap();
    parsed.timestamp_millis() as f64 / 1000.0
}

/// The delivery log of `hook` once it has at least `count` attempts (polled: attempts are recorded after they end).
async fn attempts(client: &Client, admin: &str, hook: &str, count: usize) -> Vec<Value> {
    let started = Instant::now();
    loop {
        let log = client.get(&format!("/api/admin/webhooks/{hook}/deliveries")).cookie(admin).send().await;
        assert_eq!(log.status, 200, "{}", log.text);
        let found = log.json()["deliveries"].as_array().unwrap().clone();
        if found.len() >= count {
            return found;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "{count} attempts of {hook} not logged: {found:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Issue #44, item 4: endpoints inside the server's network are refused by default, by literal address in every
/// spelling the URL parser accepts and by internal name, with a 400 that says why; a change of URL is held to the
/// same rule; nothing refused is registered or audited.
#[tokio::test]
async fn internal_targets_are_refused_at_registration() {
    let server = TestServer::start().await;
    let client = &server.client;
    let admin = client.admin_session().await;
    let targets = [
        "https://169.254.169.254/latest/meta-data/",
        "https://10.0.0.1/",
        "http://127.0.0.1:9100/metrics",
        "http://2130706433:9100/",
        "https://0x7f.1/",
        "https://0177.0.0.1/",
        "https://100.100.100.200/",
        "https://[::1]:8080/",
        "https://[::ffff:169.254.169.254]/",
        "https://[fd00:ec2::254]/",
        "https://localhost/",
        "https://hooks.localhost/",
        "https://metadata.google.internal/computeMetadata/v1/",
        "https://redis:6379/",
    ];
    for url in targets {
        let refused =
            client.post("/api/admin/webhooks").cookie(&admin).json(&json!({"url": url, "events": ALL})).send().await;
        assert_eq!(refused.status, 400, "{url}: {}", refused.text);
        let message = refused.json()["error"].as_str().unwrap_or_default().to_owned();
        assert!(message.contains("inside the server's network"), "{url}: {message}");
        assert!(message.contains("allow_internal_targets"), "{url}: {message}");
    }
    let (hook, _) = register(client, &admin, "https://hooks.example.com/in").await;
    let moved = client
        .patch(&format!("/api/admin/webhooks/{hook}"))
        .cookie(&admin)
        .json(&json!({"url": "https://169.254.169.254/"}))
        .send()
        .await;
    assert_eq!(moved.status, 400, "{}", moved.text);
    let kept = client.get(&format!("/api/admin/webhooks/{hook}")).cookie(&admin).send().await.json();
    assert_eq!(kept["webhook"]["url"], "https://hooks.example.com/in");
    let listed = client.get("/api/admin/webhooks").cookie(&admin).send().await.json();
    assert_eq!(listed["webhooks"].as_array().unwrap().len(), 1, "{listed}");
    let audit = client.get("/api/admin/audit?limit=200").cookie(&admin).send().await.text;
    assert_eq!(audit.matches("webhook.created").count(), 1, "{audit}");
    assert!(!audit.contains("169.254"), "{audit}");
    server.stop().await;
}

/// Issue #44, item 4: the rule holds again at delivery. Endpoints registered while
/// `[webhooks] allow_internal_targets` was on (a literal loopback address, and `localhost`, a name that resolves
/// inside, checked through the deliverer's resolver) get nothing once it is off: each attempt is logged `blocked`,
/// no connection reaches the receiver.
#[tokio::test]
async fn internal_targets_registered_while_allowed_are_blocked_at_delivery() {
    let dir = tempfile::tempdir().unwrap();
    let mut allowed = test_config(dir.path());
    allowed.webhooks.allow_internal_targets = true;
    let server = TestServer::start_embedded(allowed).await;
    let admin = server.client.admin_session().await;
    let receiver = Receiver::start();
    let by_name = receiver.url().replace("127.0.0.1", "localhost");
    let (literal, _) = register(&server.client, &admin, &receiver.url()).await;
    let (named, _) = register(&server.client, &admin, &by_name).await;
    server.stop().await;

    let mut strict = test_config(dir.path());
    strict.webhooks.max_backoff_secs = 1;
    let server = TestServer::start_embedded(strict).await;
    let client = &server.client;
    let admin = client.admin_session().await;
    for hook in [&literal, &named] {
        let sent = client.post(&format!("/api/admin/webhooks/{hook}/test")).cookie(&admin).send().await;
        assert_eq!(sent.status, 202, "{}", sent.text);
    }
    for hook in [&literal, &named] {
        for attempt in attempts(client, &admin, hook, 2).await {
            assert_eq!(attempt["error"], "blocked", "{hook}: {attempt}");
            assert!(attempt["status"].is_null() && attempt["success"] == false, "{attempt}");
            assert_eq!(attempt["duration_ms"], 0, "{attempt}");
        }
    }
    assert!(receiver.received().is_empty(), "delivered inside: {:?}", receiver.received());
    server.stop().await;
}

/// Issue #44, item 4: the delivery log does not tell one closed port from another (nor from an open one that
/// does not speak TLS): a failed connection is logged as `connect`, with no detail and no duration, so the log
/// cannot be read as a port scanner's.
#[tokio::test]
async fn a_failed_connection_is_logged_as_one_word_without_its_timing() {
    let server = TestServer::start_adjusted(|c| {
        c.webhooks.allow_internal_targets = true;
        c.webhooks.max_backoff_secs = 1;
    })
    .await;
    let client = &server.client;
    let admin = client.admin_session().await;
    let receiver = Receiver::start();
    // An open port answering plain HTTP to a TLS hello, and a port nobody listens on.
    let open = format!("https://127.0.0.1:{}/hook", receiver.port);
    let closed = format!("https://127.0.0.1:{}/hook", free_port());
    let mut logged = Vec::new();
    for url in [open, closed] {
        let (hook, _) = register(client, &admin, &url).await;
        client.post(&format!("/api/admin/webhooks/{hook}/test")).cookie(&admin).send().await;
        logged.push(attempts(client, &admin, &hook, 2).await);
    }
    for attempt in logged.iter().flatten() {
        assert_eq!(attempt["error"], "connect", "{attempt}");
        assert!(attempt["status"].is_null(), "{attempt}");
        assert_eq!(attempt["duration_ms"], 0, "{attempt}");
    }
    server.stop().await;
}

/// Issue #44, item 8: without a mail transport `organization/invite-member` makes the invitation and answers it as
/// better-auth does without `sendInvitationEmail` (it was 400 `EMAIL_NOT_CONFIGURED`); a resend renews it; the
/// invitee finds it with `list-user-invitations` and accepts it; the application hears of each through the
/// `organization.invitation_created` webhook (`mailed: false`), to deliver it itself; the audit entry says so.
#[tokio::test]
async fn an_invitation_without_a_mail_transport_is_made_and_told_to_the_webhooks() {
    let server = TestServer::start_adjusted(|c| c.webhooks.allow_internal_targets = true).await;
    let client = &server.client;
    let admin = client.admin_session().await;
    let mut receiver = Receiver::start();
    let created = client
        .post("/api/admin/webhooks")
        .cookie(&admin)
        .json(&json!({"url": receiver.url(), "events": ["organization.invitation_created"]}))
        .send()
        .await;
    assert_eq!(created.status, 201, "{}", created.text);
    receiver.trust(&[created.json()["secret"].as_str().unwrap()]);
    let owner = client.new_user("inviting-owner").await;
    let org = client
        .post("/api/auth/organization/create")
        .cookie(&owner.cookie)
        .json(&json!({"name": "Unmailed", "slug": "unmailed"}))
        .send()
        .await;
    assert_eq!(org.status, 200, "{}", org.text);
    let org = org.json()["id"].as_str().unwrap().to_owned();
    let invite = |resend: bool| {
        client
            .post("/api/auth/organization/invite-member")
            .cookie(&owner.cookie)
            .json(&json!({"email": "Invitee@Example.com", "role": "admin", "organizationId": org, "resend": resend}))
            .send()
    };
    let sent = invite(false).await;
    assert_eq!(sent.status, 200, "{}", sent.text);
    let invitation = sent.json();
    assert_eq!(
        (&invitation["email"], &invitation["role"], &invitation["status"], &invitation["organizationId"]),
        (&json!("invitee@example.com"), &json!("admin"), &json!("pending"), &json!(org))
    );
    let id = invitation["id"].as_str().unwrap().to_owned();
    let resent = invite(true).await;
    assert_eq!(resent.status, 200, "{}", resent.text);
    assert_eq!(resent.json()["id"], id.as_str(), "a resend is the same invitation");

    receiver
        .wait_for("both invitations", |r| {
            r.received().iter().filter(|m| m["type"] == "organization.invitation_created").count() == 2
        })
        .await;
    for message in receiver.received() {
        assert_eq!(message["verified"], true, "{message}");
        let data = &message["data"];
        assert_eq!((&data["invitation_id"], &data["organization_id"]), (&json!(id), &json!(org)), "{message}");
        assert_eq!(
            (&data["email"], &data["role"], &data["mailed"]),
            (&json!("invitee@example.com"), &json!("admin"), &json!(false))
        );
        assert_eq!(data["inviter_id"], owner.id.as_str());
        assert!(data["expires_at"].is_string(), "{message}");
    }

    // The invitee, once the address is proven (here by an administrator: there is no mail), sees it and joins.
    let invitee = client.new_user("invitee").await;
    let verified = client
        .post("/api/auth/admin/update-user")
        .cookie(&admin)
        .json(&json!({"userId": invitee.id, "data": {"emailVerified": true}}))
        .send()
        .await;
    assert_eq!(verified.status, 200, "{}", verified.text);
    let listed = client.get("/api/auth/organization/list-user-invitations").cookie(&invitee.cookie).send().await;
    assert_eq!(listed.status, 200, "{}", listed.text);
    assert!(listed.json().as_array().unwrap().iter().any(|i| i["id"] == id.as_str()), "{}", listed.text);
    let accepted = client
        .post("/api/auth/organization/accept-invitation")
        .cookie(&invitee.cookie)
        .json(&json!({"invitationId": id}))
        .send()
        .await;
    assert_eq!(accepted.status, 200, "{}", accepted.text);
    assert_eq!(accepted.json()["member"]["role"], "admin");

    let audit = client.get("/api/admin/audit?limit=200").cookie(&admin).send().await.json();
    let sent_entries: Vec<&Value> =
        audit["entries"].as_array().into_iter().flatten().filter(|e| e["action"] == "invitation.sent").collect();
    assert_eq!(sent_entries.len(), 2, "{audit}");
    assert!(sent_entries.iter().all(|e| e["detail"].as_str().unwrap().contains("not mailed")), "{audit}");
    server.stop().await;
}
