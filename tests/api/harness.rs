//! Test harness: in-process and child-process servers, an HTTP client that keeps cookies by hand, and the shape
//! assertions every module shares.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use reqwest::Method;
use reqwest::header::HeaderMap;
use serde_json::{Value, json};
use service_auth::config::{BootstrapAdmin, Config, StoreBackend};
use service_auth::domain::Clock;
use service_auth::runtime::AppError;
use service_auth::store::FaultSwitch;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub const ADMIN_EMAIL: &str = "admin@example.com";
pub const ADMIN_NAME: &str = "Admin";
pub const ADMIN_PASSWORD: &str = "correct horse battery";
/// Name of the session cookie with the default configuration.
pub const COOKIE: &str = "service-auth.session_token";
/// Password of every account the tests create unless a test says otherwise.
pub const PASSWORD: &str = "hunter2-hunter2";

pub const USER_KEYS: &[&str] = &[
    "id",
    "name",
    "email",
    "emailVerified",
    "image",
    "createdAt",
    "updatedAt",
    "role",
    "banned",
    "banReason",
    "banExpires",
    "organizationId",
    "twoFactorEnabled",
];
pub const SESSION_KEYS: &[&str] = &[
    "id",
    "token",
    "userId",
    "expiresAt",
    "createdAt",
    "updatedAt",
    "ipAddress",
    "userAgent",
    "impersonatedBy",
    "activeOrganizationId",
];
pub const ADMIN_USER_KEYS: &[&str] = &["id", "name", "email", "role", "organization_id", "banned", "created_at"];
pub const ORG_KEYS: &[&str] = &["id", "name", "slug", "created_at"];

pub const DAY_MS: i64 = 86_400_000;
pub const HOUR_MS: i64 = 3_600_000;

/// The bootstrap admin, as environment variables for a child server.
pub const BOOTSTRAP_ENV: &[(&str, &str)] = &[
    ("SERVICE_AUTH_BOOTSTRAP_ADMIN_EMAIL", ADMIN_EMAIL),
    ("SERVICE_AUTH_BOOTSTRAP_ADMIN_PASSWORD", ADMIN_PASSWORD),
    ("SERVICE_AUTH_BOOTSTRAP_ADMIN_NAME", ADMIN_NAME),
];

// ---------------------------------------------------------------------------------------------------------------
// Node helpers

/// `tests/<dir>`, with its Node packages installed (`npm ci`) when `package` is missing from them. `./test` installs
/// them before any suite starts; this covers a `cargo test` run alone. The cargo and cluster suites run the same
/// tests in two processes at once, and one's `npm ci` empties `node_modules` while the other's node reads it, so
/// the check and the install hold an exclusive lock on the directory's `package-lock.json` (which `npm ci` only
/// reads), and each process checks once.
pub fn node_packages(dir: &str, package: &str) -> PathBuf {
    static CHECKED: std::sync::Mutex<BTreeSet<String>> = std::sync::Mutex::new(BTreeSet::new());
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests").join(dir);
    let mut checked = CHECKED.lock().unwrap_or_else(|p| p.into_inner());
    if !checked.contains(dir) {
        let lock = std::fs::File::open(path.join("package-lock.json")).expect("the helper's package-lock.json");
        lock.lock().expect("a lock on the helper's package-lock.json");
        if !path.join("node_modules").join(package).is_dir() {
            let status = Command::new("npm").args(["ci", "--no-audit", "--no-fund"]).current_dir(&path).status();
            assert!(status.is_ok_and(|s| s.success()), "npm ci in tests/{dir} failed");
        }
        checked.insert(dir.to_owned());
    }
    path
}

// ---------------------------------------------------------------------------------------------------------------
// Servers

/// The configuration of a test server: defaults, the given data directory and the bootstrap admin.
/// The default configuration on `data_dir`, with the bootstrap admin, and without the per-address rate limits:
/// every test client is 127.0.0.1, and those limits have tests of their own.
pub fn test_config(data_dir: &Path) -> Config {
    let mut config = Config {
        data_dir: data_dir.to_path_buf(),
        bootstrap_admin: Some(BootstrapAdmin {
            email: ADMIN_EMAIL.into(),
            name: ADMIN_NAME.into(),
            password: ADMIN_PASSWORD.into(),
            promote_existing: false,
        }),
        ..Config::default()
    };
    config.rate_limit.sign_in_per_address = 0;
    config.rate_limit.sign_up_per_address = 0;
    config
}

/// A server running in this process on an ephemeral port. With `SERVICE_AUTH_TEST_POSTGRES` set (a PostgreSQL
/// URL; `tests/cluster/run.sh` sets it), two nodes sharing one fresh database of that server instead, and the
/// client alternates its requests between them (see [`cluster`]).
pub struct TestServer {
    /// The first node's address (raw-socket tests talk to it alone).
    pub addr: SocketAddr,
    pub client: Client,
    shutdown: CancellationToken,
    task: Option<JoinHandle<Result<(), AppError>>>,
    /// The second node, when there are two.
    peer: Option<JoinHandle<Result<(), AppError>>>,
    /// A client of each node alone (one entry on one node).
    pub nodes: Vec<Client>,
    /// The metrics listener's address, when the configuration asks for one (on one node).
    metrics: Option<SocketAddr>,
    _tmp: Option<tempfile::TempDir>,
}

impl TestServer {
    /// The metrics listener's address (configured on port 0: the one it was given).
    pub fn metrics(&self) -> SocketAddr {
        self.metrics.expect("the server was configured with a metrics listener")
    }

    /// A server with the default test configuration on a fresh temporary directory.
    pub async fn start() -> Self {
        let tmp = tempfile::tempdir().expect("tempdir");
        let mut server = Self::start_with(test_config(tmp.path())).await;
        server._tmp = Some(tmp);
        server
    }

    /// One server on the embedded store, whatever the run: for the tests of the embedded store itself (its file,
    /// backups, a full disk) and of what each node keeps alone (the per-address limits, docs/cluster.md).
    pub async fn start_embedded(config: Config) -> Self {
        Self::start_with_faults(config, FaultSwitch::default()).await
    }

    /// [`start_embedded`](Self::start_embedded) on a fresh directory, `adjust` applied to the config.
    pub async fn start_embedded_adjusted(adjust: impl FnOnce(&mut Config)) -> Self {
        let tmp = tempfile::tempdir().expect("tempdir");
        let mut config = test_config(tmp.path());
        adjust(&mut config);
        let mut server = Self::start_embedded(config).await;
        server._tmp = Some(tmp);
        server
    }

    /// A server with the default test configuration on `dir` (which outlives the server: restart tests).
    pub async fn start_in(dir: &Path) -> Self {
        Self::start_with(test_config(dir)).await
    }

    /// A server with the default test configuration on a fresh directory, `adjust` applied to the config.
    pub async fn start_adjusted(adjust: impl FnOnce(&mut Config)) -> Self {
        let tmp = tempfile::tempdir().expect("tempdir");
        let mut config = test_config(tmp.path());
        adjust(&mut config);
        let mut server = Self::start_with(config).await;
        server._tmp = Some(tmp);
        server
    }

    /// [`start_adjusted`](Self::start_adjusted) with the clock of the session rules in the test's hand (two nodes
    /// share it): `clock.advance(…)` reaches limits of hours at once. Only the session rules read it (a session's
    /// start, end and use, the fresh window); the rest of the server keeps the system's time.
    pub async fn start_clocked(adjust: impl FnOnce(&mut Config)) -> (Self, Clock) {
        let tmp = tempfile::tempdir().expect("tempdir");
        let mut config = test_config(tmp.path());
        adjust(&mut config);
        let clock = Clock::default();
        let faults = || FaultSwitch::with_clock(clock.clone());
        let mut server = match cluster::base_url() {
            Some(base) if config.store.backend == StoreBackend::Embedded && config.metrics.listen.is_none() => {
                Self::start_cluster_with_faults(config, &base, [faults(), faults()]).await
            }
            _ => Self::start_with_faults(config, faults()).await,
        };
        server._tmp = Some(tmp);
        (server, clock)
    }

    pub async fn start_with(config: Config) -> Self {
        match cluster::base_url() {
            // A test that asks for something one node owns alone (a metrics port) runs on one node.
            Some(base) if config.store.backend == StoreBackend::Embedded && config.metrics.listen.is_none() => {
                Self::start_cluster(config, &base).await
            }
            _ => Self::start_with_faults(config, FaultSwitch::default()).await,
        }
    }

    /// Two nodes on the database of `config.data_dir` (a fresh one per directory, the same one again after a
    /// restart on that directory): the first starts (and creates the bootstrap admin), then the second.
    pub async fn start_cluster(config: Config, base: &str) -> Self {
        Self::start_cluster_with_faults(config, base, [FaultSwitch::default(), FaultSwitch::default()]).await
    }

    /// [`start_cluster`](Self::start_cluster) with each node's [`FaultSwitch`] (its test hooks: lost commit
    /// replies, a paused follower).
    pub async fn start_cluster_with_faults(config: Config, base: &str, faults: [FaultSwitch; 2]) -> Self {
        let [faults_one, faults_two] = faults;
        let url = cluster::database_for(base, &config.data_dir).await;
        let first = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let second = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addrs = [first.local_addr().unwrap(), second.local_addr().unwrap()];
        let mut one = config;
        one.store.backend = StoreBackend::Postgres;
        one.store.url = Some(url.clone());
        // Both nodes are one service, as behind a load balancer: one public URL (the first node's), so a request
        // from either node's pages is same-origin on both.
        one.base_url.get_or_insert_with(|| format!("http://{}", addrs[0]));
        // One data key for both, as docs/cluster.md says every node must have (each opens what the other sealed).
        one.data_key_file.get_or_insert_with(|| one.data_dir.join("data.key"));
        let mut two = one.clone();
        two.data_dir = one.data_dir.join("node2");
        let shutdown = CancellationToken::new();
        let run = |listener, config, faults, shutdown| {
            service_auth::server::run_with_faults(listener, config, faults, shutdown, |_| {})
        };
        let mut task = tokio::spawn(run(first, one, faults_one, shutdown.clone()));
        cluster::wait_ready(addrs[0], &mut task).await;
        let mut peer = tokio::spawn(run(second, two, faults_two, shutdown.clone()));
        cluster::wait_ready(addrs[1], &mut peer).await;
        let sync = std::sync::Arc::new(cluster::Sync::connect(&url).await);
        let client = Client::cluster(&addrs, std::sync::Arc::clone(&sync));
        let nodes = addrs.iter().map(|a| Client::cluster(&[*a], std::sync::Arc::clone(&sync))).collect();
        Self { addr: addrs[0], client, shutdown, task: Some(task), peer: Some(peer), nodes, metrics: None, _tmp: None }
    }

    /// A server whose store commits fail when `faults` says so (the failure-path tests).
    pub async fn start_with_faults(config: Config, faults: FaultSwitch) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("local_addr");
        let shutdown = CancellationToken::new();
        let wants_metrics = config.metrics.listen.is_some();
        let (report, reported) = tokio::sync::oneshot::channel();
        // Nobody waits for the report when no metrics listener was asked for: its loss is nothing.
        let started = move |s: &service_auth::server::Started| {
            let _ = report.send(s.metrics);
        };
        let run = service_auth::server::run_with_faults(listener, config, faults, shutdown.clone(), started);
        let mut task = tokio::spawn(run);
        // A metrics listener asked for on port 0 has its port once the server serves: wait for that, or for the
        // start-up's failure.
        let metrics = if wants_metrics {
            tokio::select! {
                metrics = reported => metrics.ok().flatten(),
                ended = &mut task => panic!("the server stopped before it served: {ended:?}"),
            }
        } else {
            None
        };
        let client = Client::new(addr);
        Self { addr, nodes: vec![client.clone()], client, shutdown, task: Some(task), peer: None, metrics, _tmp: None }
    }

    /// Graceful shutdown; returns once the server has made everything durable.
    pub async fn stop(mut self) {
        self.shutdown.cancel();
        let task = self.task.take().expect("not stopped twice");
        for task in std::iter::once(task).chain(self.peer.take()) {
            match tokio::time::timeout(Duration::from_secs(30), task).await {
                Err(_) => panic!("server did not stop within 30 s of shutdown"),
                Ok(Err(join)) => panic!("server task panicked: {join}"),
                Ok(Ok(Err(e))) => panic!("server returned an error: {e}"),
                Ok(Ok(Ok(()))) => {}
            }
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

impl std::ops::Deref for TestServer {
    type Target = Client;
    fn deref(&self) -> &Client {
        &self.client
    }
}

/// The real binary as a child process (crash and restart tests).
pub struct ChildServer {
    pub child: Child,
    pub client: Client,
    log: PathBuf,
    _stdout: BufReader<std::process::ChildStdout>,
}

impl ChildServer {
    /// Starts `service-auth serve` with its data in `<root>/data`, its stderr in `<root>/stderr-N.log` and its
    /// current directory `root` (so no `config.toml` from the repository is read). No bootstrap admin unless
    /// `extra_env` has it (see [`BOOTSTRAP_ENV`]).
    pub async fn spawn(root: &Path, extra_env: &[(&str, &str)]) -> Self {
        Self::spawn_with_open_files(root, extra_env, None).await
    }

    /// [`spawn`](Self::spawn), under `ulimit -n open_files` when given.
    pub async fn spawn_with_open_files(root: &Path, extra_env: &[(&str, &str)], open_files: Option<u32>) -> Self {
        let data = root.join("data");
        let log = (0..).map(|n| root.join(format!("stderr-{n}.log"))).find(|p| !p.exists()).expect("log name");
        let stderr = std::fs::File::create(&log).expect("log file");
        let binary = env!("CARGO_BIN_EXE_service-auth");
        let mut cmd = match open_files {
            None => Command::new(binary),
            Some(n) => {
                let mut sh = Command::new("sh");
                sh.args(["-c", &format!("ulimit -n {n} && exec \"$0\" \"$@\""), binary]);
                sh
            }
        };
        cmd.arg("serve")
            .current_dir(root)
            .env_remove("SERVICE_AUTH_CONFIG")
            .env("SERVICE_AUTH_LISTEN", "127.0.0.1:0")
            .env("SERVICE_AUTH_DATA_DIR", &data)
            .env("SERVICE_AUTH_LOG", "warn")
            .env_remove("SERVICE_AUTH_BOOTSTRAP_ADMIN_EMAIL")
            .env_remove("SERVICE_AUTH_BOOTSTRAP_ADMIN_PASSWORD")
            .env_remove("SERVICE_AUTH_BOOTSTRAP_ADMIN_NAME")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(stderr));
        for (k, v) in extra_env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("spawn service-auth");
        let stdout = child.stdout.take().expect("stdout");
        let line = tokio::task::spawn_blocking(move || {
            let mut reader = BufReader::new(stdout);
            let mut line = String::new();
            reader.read_line(&mut line).map(|_| (reader, line))
        });
        // The reader is kept open so that later output cannot fail with a broken pipe.
        let (stdout, line) = match tokio::time::timeout(Duration::from_secs(30), line).await {
            Ok(Ok(Ok(pair))) => pair,
            other => {
                let _ = child.kill();
                panic!("no 'listening on' line from the binary ({other:?}); stderr:\n{}", read_log(&log))
            }
        };
        let Some(addr) = line.trim_end().strip_prefix("listening on ") else {
            let _ = child.kill();
            let _ = child.wait();
            panic!("first stdout line is {line:?}, expected 'listening on 127.0.0.1:PORT'; stderr:\n{}", read_log(&log))
        };
        let addr: SocketAddr = addr.parse().unwrap_or_else(|e| panic!("bad address in {line:?}: {e}"));
        Self { child, client: Client::new(addr), log, _stdout: stdout }
    }

    /// SIGKILL, then reap.
    pub fn kill9(mut self) {
        self.child.kill().expect("kill -9");
        self.child.wait().expect("wait");
    }

    /// SIGTERM, then wait (at most 30 s) for the exit status.
    pub fn terminate(mut self) -> std::process::ExitStatus {
        let ok = Command::new("kill").arg("-TERM").arg(self.child.id().to_string()).status().expect("kill -TERM");
        assert!(ok.success(), "kill -TERM failed");
        for _ in 0..300 {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        panic!("server did not exit within 30 s of SIGTERM; stderr:\n{}", self.stderr())
    }

    pub fn stderr(&self) -> String {
        read_log(&self.log)
    }
}

impl Drop for ChildServer {
    // A failing test must not leave a server running.
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

impl std::ops::Deref for ChildServer {
    type Target = Client;
    fn deref(&self) -> &Client {
        &self.client
    }
}

fn read_log(path: &Path) -> String {
    let mut s = String::new();
    if let Ok(mut f) = std::fs::File::open(path) {
        let _ = f.read_to_string(&mut s);
    }
    s
}

/// Runs the binary with `args` to completion (e.g. `admin create`), data in `<root>/data`, `stdin` fed in; gives up
/// after 30 s. Returns (exit status, stdout, stderr).
pub fn run_binary(
    root: &Path,
    args: &[&str],
    env: &[(&str, &str)],
    stdin: &str,
) -> (std::process::ExitStatus, String, String) {
    use std::io::Write;
    let n = (0..).find(|n| !root.join(format!("run-{n}.out")).exists()).unwrap();
    let (out_path, err_path) = (root.join(format!("run-{n}.out")), root.join(format!("run-{n}.err")));
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_service-auth"));
    cmd.args(args)
        .current_dir(root)
        .env_remove("SERVICE_AUTH_CONFIG")
        .env_remove("SERVICE_AUTH_ADMIN_PASSWORD")
        .env_remove("SERVICE_AUTH_BOOTSTRAP_ADMIN_EMAIL")
        .env_remove("SERVICE_AUTH_BOOTSTRAP_ADMIN_PASSWORD")
        .env_remove("SERVICE_AUTH_BOOTSTRAP_ADMIN_NAME")
        .env("SERVICE_AUTH_LISTEN", "127.0.0.1:0")
        .env("SERVICE_AUTH_DATA_DIR", root.join("data"))
        .env("SERVICE_AUTH_LOG", "warn")
        .stdin(Stdio::piped())
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("spawn service-auth");
    let mut input = child.stdin.take().expect("stdin");
    let _ = input.write_all(stdin.as_bytes());
    drop(input);
    for _ in 0..300 {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return (status, read_log(&out_path), read_log(&err_path));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!(
        "`service-auth {}` still running after 30 s; stdout {:?} stderr {:?}",
        args.join(" "),
        read_log(&out_path),
        read_log(&err_path)
    )
}

// ---------------------------------------------------------------------------------------------------------------
// Client

/// An HTTP client for one server (or, in two-node runs, for both nodes in turn). No cookie store: tests pass the
/// session cookie value explicitly.
#[derive(Clone)]
pub struct Client {
    /// The first node's URL.
    pub base: String,
    http: reqwest::Client,
    /// Every node's URL; requests take them in turn.
    bases: std::sync::Arc<Vec<String>>,
    turn: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    /// Two nodes: waits after each request until every node has applied what it changed.
    sync: Option<std::sync::Arc<cluster::Sync>>,
}

/// A request being built.
pub struct Req(reqwest::RequestBuilder, Option<std::sync::Arc<cluster::Sync>>);

impl Req {
    /// Sends `service-auth.session_token=<value>`.
    pub fn cookie(self, value: &str) -> Self {
        self.header("cookie", &format!("{COOKIE}={value}"))
    }
    pub fn cookie_opt(self, value: Option<&str>) -> Self {
        match value {
            Some(v) => self.cookie(v),
            None => self,
        }
    }
    pub fn header(self, name: &str, value: &str) -> Self {
        Self(self.0.header(name, value), self.1)
    }
    /// A JSON body with `Content-Type: application/json`.
    pub fn json(self, body: &Value) -> Self {
        self.raw(Some("application/json"), serde_json::to_vec(body).unwrap())
    }
    /// Any bytes with the given content type (or none).
    pub fn raw(self, content_type: Option<&str>, body: impl Into<Vec<u8>>) -> Self {
        let b = match content_type {
            Some(ct) => self.0.header("content-type", ct),
            None => self.0,
        };
        Self(b.body(body.into()), self.1)
    }
    pub async fn send(self) -> Resp {
        self.try_send().await.expect("HTTP request failed (connection error)")
    }
    /// Like [`send`](Self::send), but a connection error is returned (crash tests expect the server to vanish).
    pub async fn try_send(self) -> Result<Resp, reqwest::Error> {
        let r = self.0.send().await?;
        let status = r.status().as_u16();
        let headers = r.headers().clone();
        let text = r.text().await?;
        if let Some(sync) = self.1 {
            sync.wait().await;
        }
        Ok(Resp { status, headers, text })
    }
}

impl Client {
    pub fn new(addr: SocketAddr) -> Self {
        let http = reqwest::Client::builder()
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(Duration::from_secs(30))
            .build()
            .expect("reqwest client");
        let base = format!("http://{addr}");
        Self { bases: std::sync::Arc::new(vec![base.clone()]), base, http, turn: Default::default(), sync: None }
    }

    /// A client of several nodes: each request goes to the next node, and returns once every node has applied
    /// the changes it made.
    fn cluster(addrs: &[SocketAddr], sync: std::sync::Arc<cluster::Sync>) -> Self {
        let mut client = Self::new(addrs[0]);
        client.bases = std::sync::Arc::new(addrs.iter().map(|a| format!("http://{a}")).collect());
        client.sync = Some(sync);
        client
    }

    pub fn req(&self, method: Method, path: &str) -> Req {
        let turn = self.turn.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let base = &self.bases[turn % self.bases.len()];
        Req(self.http.request(method, format!("{base}{path}")), self.sync.clone())
    }
    pub fn get(&self, path: &str) -> Req {
        self.req(Method::GET, path)
    }
    pub fn post(&self, path: &str) -> Req {
        self.req(Method::POST, path)
    }
    pub fn patch(&self, path: &str) -> Req {
        self.req(Method::PATCH, path)
    }
    pub fn delete(&self, path: &str) -> Req {
        self.req(Method::DELETE, path)
    }

    // ----- auth

    pub async fn sign_up_body(&self, body: &Value) -> Resp {
        self.post("/api/auth/sign-up/email").json(body).send().await
    }
    /// (status, body, session cookie value).
    pub async fn sign_up(&self, name: &str, email: &str, password: &str) -> (u16, Value, Option<String>) {
        self.sign_up_body(&json!({"name": name, "email": email, "password": password})).await.triple()
    }
    pub async fn sign_in_body(&self, body: &Value) -> Resp {
        self.post("/api/auth/sign-in/email").json(body).send().await
    }
    pub async fn sign_in(&self, email: &str, password: &str) -> (u16, Value, Option<String>) {
        self.sign_in_body(&json!({"email": email, "password": password})).await.triple()
    }
    /// Signs in and returns the cookie; panics unless 200.
    pub async fn login(&self, email: &str, password: &str) -> String {
        let (status, body, cookie) = self.sign_in(email, password).await;
        assert_eq!(status, 200, "sign-in of {email} failed: {body}");
        cookie.unwrap_or_else(|| panic!("sign-in of {email}: no session cookie"))
    }
    /// A fresh session of the bootstrap admin.
    pub async fn admin_session(&self) -> String {
        self.login(ADMIN_EMAIL, ADMIN_PASSWORD).await
    }
    /// Signs up `<tag>@example.com` with [`PASSWORD`]; panics unless 200.
    pub async fn new_user(&self, tag: &str) -> TestUser {
        let email = format!("{tag}@example.com");
        let (status, body, cookie) = self.sign_up(&format!("User {tag}"), &email, PASSWORD).await;
        assert_eq!(status, 200, "sign-up of {email} failed: {body}");
        let cookie = cookie.unwrap_or_else(|| panic!("sign-up of {email}: no session cookie"));
        TestUser { id: str_of(&body["user"]["id"]).to_owned(), email, cookie, user: body["user"].clone() }
    }
    /// Marks `id`'s address proven, as an administrator does (`admin/update-user`, `emailVerified: true`): what an
    /// account needs before an identity of a provider may join it by its address. Panics unless 200.
    pub async fn mark_verified(&self, admin: &str, id: &str) {
        let body = json!({"userId": id, "data": {"emailVerified": true}});
        let r = self.post("/api/auth/admin/update-user").cookie(admin).json(&body).send().await;
        assert_eq!(r.status, 200, "update-user emailVerified of {id}: {}", r.text);
    }
    pub async fn get_session_resp(&self, cookie: Option<&str>) -> Resp {
        self.get("/api/auth/get-session").cookie_opt(cookie).send().await
    }
    /// get-session's body; panics unless 200.
    pub async fn session(&self, cookie: &str) -> Value {
        let r = self.get_session_resp(Some(cookie)).await;
        assert_eq!(r.status, 200, "get-session: {}", r.text);
        r.json()
    }
    pub async fn sign_out(&self, cookie: Option<&str>) -> Resp {
        self.post("/api/auth/sign-out").cookie_opt(cookie).json(&json!({})).send().await
    }

    // ----- admin

    pub async fn list_users(&self, cookie: Option<&str>) -> Resp {
        self.get("/api/admin/users").cookie_opt(cookie).send().await
    }
    /// The admin user list; panics unless 200.
    pub async fn users(&self, admin: &str) -> Vec<Value> {
        let r = self.list_users(Some(admin)).await;
        assert_eq!(r.status, 200, "GET /api/admin/users: {}", r.text);
        r.json()["users"].as_array().unwrap_or_else(|| panic!("no users array: {}", r.text)).clone()
    }
    /// One entry of the admin user list, by id; panics if absent.
    pub async fn listed_user(&self, admin: &str, id: &str) -> Value {
        self.users(admin).await.into_iter().find(|u| u["id"] == id).unwrap_or_else(|| panic!("user {id} not listed"))
    }
    pub async fn patch_user(&self, cookie: &str, body: &Value) -> Resp {
        self.patch("/api/admin/users").cookie(cookie).json(body).send().await
    }
    /// PATCH that must answer 200 `{"success": true}`.
    pub async fn patch_ok(&self, cookie: &str, body: &Value) {
        let r = self.patch_user(cookie, body).await;
        assert_eq!((r.status, r.json()), (200, json!({"success": true})), "PATCH {body}");
    }
    pub async fn list_orgs(&self, cookie: Option<&str>) -> Resp {
        self.get("/api/admin/organizations").cookie_opt(cookie).send().await
    }
    pub async fn orgs(&self, admin: &str) -> Vec<Value> {
        let r = self.list_orgs(Some(admin)).await;
        assert_eq!(r.status, 200, "GET /api/admin/organizations: {}", r.text);
        r.json()["organizations"].as_array().unwrap_or_else(|| panic!("no organizations array: {}", r.text)).clone()
    }
    pub async fn create_org(&self, cookie: &str, name: &str, slug: &str) -> Resp {
        self.post("/api/admin/organizations").cookie(cookie).json(&json!({"name": name, "slug": slug})).send().await
    }
    /// Creates an organization; panics unless 200; returns the organization object.
    pub async fn new_org(&self, admin: &str, name: &str, slug: &str) -> Value {
        let r = self.create_org(admin, name, slug).await;
        assert_eq!(r.status, 200, "create organization {slug}: {}", r.text);
        r.json()["organization"].clone()
    }
}

pub struct TestUser {
    pub id: String,
    pub email: String,
    /// Session cookie value from the sign-up.
    pub cookie: String,
    /// The user object the sign-up returned.
    pub user: Value,
}

// ---------------------------------------------------------------------------------------------------------------
// Responses and cookies

#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub headers: HeaderMap,
    pub text: String,
}

impl Resp {
    /// The body as JSON; panics (showing the body) when it is not.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.text)
            .unwrap_or_else(|e| panic!("body is not JSON ({e}), status {}: {:?}", self.status, self.text))
    }
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers.get(name).map(|v| v.to_str().expect("ASCII header").to_owned())
    }
    pub fn set_cookies(&self) -> Vec<SetCookie> {
        self.headers.get_all("set-cookie").iter().map(|v| SetCookie::parse(v.to_str().expect("ASCII"))).collect()
    }
    /// The `Set-Cookie` for the session cookie, if any (exactly one allowed).
    pub fn session_cookie(&self) -> Option<SetCookie> {
        let mut all: Vec<_> = self.set_cookies().into_iter().filter(|c| c.name == COOKIE).collect();
        assert!(all.len() <= 1, "more than one Set-Cookie for {COOKIE}: {all:?}");
        all.pop()
    }
    /// (status, body, value of the session cookie when one with a non-empty value was set).
    pub fn triple(&self) -> (u16, Value, Option<String>) {
        let cookie = self.session_cookie().map(|c| c.value).filter(|v| !v.is_empty());
        (self.status, self.json(), cookie)
    }
    /// The methods of the `Allow` header, upper-cased.
    pub fn allow(&self) -> BTreeSet<String> {
        let allow = self.header("allow").unwrap_or_else(|| panic!("no Allow header (status {})", self.status));
        allow.split(',').map(|m| m.trim().to_ascii_uppercase()).filter(|m| !m.is_empty()).collect()
    }
    pub fn content_type(&self) -> String {
        self.header("content-type").unwrap_or_default()
    }
}

#[derive(Debug, Clone)]
pub struct SetCookie {
    pub name: String,
    pub value: String,
    /// Attribute names lower-cased → value (`None` for flags such as HttpOnly).
    pub attrs: BTreeMap<String, Option<String>>,
}

impl SetCookie {
    pub fn parse(header: &str) -> Self {
        let mut parts = header.split(';');
        let (name, value) = parts.next().unwrap().split_once('=').expect("name=value");
        let attrs = parts
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(|p| match p.split_once('=') {
                Some((k, v)) => (k.trim().to_ascii_lowercase(), Some(v.trim().to_owned())),
                None => (p.to_ascii_lowercase(), None),
            })
            .collect();
        Self { name: name.trim().to_owned(), value: value.trim().to_owned(), attrs }
    }
    pub fn attr(&self, name: &str) -> Option<&str> {
        self.attrs.get(name).and_then(|v| v.as_deref())
    }
}

/// The session cookie of a sign-in/up: exactly `HttpOnly; SameSite=Lax; Path=/` plus `Max-Age=604800` when
/// remembered, nothing else (no Secure on plain http, no Expires, no Domain).
pub fn assert_session_set_cookie(resp: &Resp, remembered: bool) -> String {
    let c = resp.session_cookie().unwrap_or_else(|| panic!("no {COOKIE} Set-Cookie; headers {:?}", resp.headers));
    let mut expected: BTreeMap<String, Option<String>> = BTreeMap::from([
        ("httponly".into(), None),
        ("samesite".into(), Some("Lax".into())),
        ("path".into(), Some("/".into())),
    ]);
    if remembered {
        expected.insert("max-age".into(), Some("604800".into()));
    }
    assert_eq!(c.attrs, expected, "attributes of {COOKIE}");
    assert!(!c.value.is_empty(), "empty session cookie value");
    c.value
}

/// A clearing session cookie: empty value, `Max-Age=0`, `Path=/`.
pub fn assert_clears_session_cookie(resp: &Resp) {
    let c =
        resp.session_cookie().unwrap_or_else(|| panic!("no clearing {COOKIE} Set-Cookie; headers {:?}", resp.headers));
    assert_eq!(c.value, "", "a clearing cookie has an empty value");
    assert_eq!(c.attr("max-age"), Some("0"), "clearing cookie: {c:?}");
    assert_eq!(c.attr("path"), Some("/"), "clearing cookie: {c:?}");
}

// ---------------------------------------------------------------------------------------------------------------
// Shapes

pub fn str_of(v: &Value) -> &str {
    v.as_str().unwrap_or_else(|| panic!("expected a string, got {v}"))
}

pub fn keys(v: &Value) -> BTreeSet<String> {
    v.as_object().unwrap_or_else(|| panic!("expected an object, got {v}")).keys().cloned().collect()
}

pub fn assert_keys(v: &Value, expected: &[&str]) {
    let expected: BTreeSet<String> = expected.iter().map(|s| s.to_string()).collect();
    assert_eq!(keys(v), expected, "key set of {v}");
}

/// An auth error: the status, `Content-Type: application/json`, exactly `{code, message}` with this code and a
/// non-empty message.
pub fn assert_auth_error(resp: &Resp, status: u16, code: &str) {
    assert_eq!(resp.status, status, "status (body {:?})", resp.text);
    assert_auth_error_shape(resp);
    assert_eq!(resp.json()["code"], code, "error code (body {:?})", resp.text);
}

pub fn assert_auth_error_shape(resp: &Resp) {
    assert!(
        resp.content_type().starts_with("application/json"),
        "content-type {:?} of {:?}",
        resp.content_type(),
        resp.text
    );
    let body = resp.json();
    assert_keys(&body, &["code", "message"]);
    let code = str_of(&body["code"]);
    assert!(
        !code.is_empty() && code.chars().all(|c| c.is_ascii_uppercase() || c == '_'),
        "code {code:?} not UPPER_SNAKE"
    );
    assert!(!str_of(&body["message"]).is_empty(), "empty message");
}

/// An admin error: the status, JSON, exactly `{"error": "<non-empty>"}`.
pub fn assert_admin_error(resp: &Resp, status: u16) {
    assert_eq!(resp.status, status, "status (body {:?})", resp.text);
    assert!(
        resp.content_type().starts_with("application/json"),
        "content-type {:?} of {:?}",
        resp.content_type(),
        resp.text
    );
    let body = resp.json();
    assert_keys(&body, &["error"]);
    assert!(!str_of(&body["error"]).is_empty(), "empty error text");
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ`, a valid instant; returns milliseconds since the epoch.
pub fn ts(v: &Value) -> i64 {
    let s = str_of(v);
    let pattern = "dddd-dd-ddTdd:dd:dd.dddZ";
    let ok = s.len() == pattern.len()
        && s.chars().zip(pattern.chars()).all(|(c, p)| if p == 'd' { c.is_ascii_digit() } else { c == p });
    assert!(ok, "timestamp {s:?} is not YYYY-MM-DDTHH:MM:SS.mmmZ");
    chrono::DateTime::parse_from_rfc3339(s).unwrap_or_else(|e| panic!("timestamp {s:?}: {e}")).timestamp_millis()
}

pub fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// `v` is a timestamp within a minute of now.
pub fn assert_recent(v: &Value) {
    let t = ts(v);
    assert!((t - now_ms()).abs() < 60_000, "timestamp {v} is not close to now");
}

pub fn assert_uuid(v: &Value) {
    let s = str_of(v);
    let parsed = uuid::Uuid::parse_str(s).unwrap_or_else(|e| panic!("{s:?} is not a UUID: {e}"));
    assert_eq!(parsed.hyphenated().to_string(), s, "UUID not in lower-case hyphenated form");
}

/// A user of the auth endpoints: exact key set and field types.
pub fn assert_auth_user(u: &Value) {
    assert_keys(u, USER_KEYS);
    assert_uuid(&u["id"]);
    str_of(&u["name"]);
    str_of(&u["email"]);
    assert_eq!(u["emailVerified"], false);
    assert!(u["image"].is_null() || u["image"].is_string(), "image {}", u["image"]);
    ts(&u["createdAt"]);
    ts(&u["updatedAt"]);
    str_of(&u["role"]);
    assert!(u["banned"].is_boolean(), "banned {}", u["banned"]);
    assert_eq!(u["banReason"], Value::Null, "banReason");
    assert_eq!(u["banExpires"], Value::Null, "banExpires");
    assert!(u["organizationId"].is_null() || uuid::Uuid::parse_str(str_of(&u["organizationId"])).is_ok());
}

/// A freshly signed-up account: role user, not banned, no organization.
pub fn assert_new_user(u: &Value, name: &str, email: &str) {
    assert_auth_user(u);
    assert_eq!(u["name"], name);
    assert_eq!(u["email"], email);
    assert_eq!(u["role"], "user");
    assert_eq!(u["banned"], false);
    assert_eq!(u["organizationId"], Value::Null);
    assert_recent(&u["createdAt"]);
    assert_recent(&u["updatedAt"]);
}

/// Session token: at least 256 bits, URL-safe (so at least 43 characters of `[A-Za-z0-9_-]`).
pub fn assert_token(v: &Value) {
    let t = str_of(v);
    assert!(t.len() >= 43, "token {t:?} too short for 256 bits");
    assert!(t.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'), "token {t:?} is not URL-safe");
}

/// get-session's `session` object: exact keys and types.
pub fn assert_session(s: &Value) {
    assert_keys(s, SESSION_KEYS);
    str_of(&s["id"]);
    assert_token(&s["token"]);
    assert_uuid(&s["userId"]);
    ts(&s["expiresAt"]);
    ts(&s["createdAt"]);
    ts(&s["updatedAt"]);
    str_of(&s["ipAddress"]);
    str_of(&s["userAgent"]);
    assert!(s["impersonatedBy"].is_null(), "a session of one's own is no impersonation");
}

pub fn assert_admin_user(u: &Value) {
    assert_keys(u, ADMIN_USER_KEYS);
    assert_uuid(&u["id"]);
    str_of(&u["name"]);
    str_of(&u["email"]);
    str_of(&u["role"]);
    assert!(u["organization_id"].is_null() || uuid::Uuid::parse_str(str_of(&u["organization_id"])).is_ok());
    assert!(u["banned"].is_boolean());
    ts(&u["created_at"]);
}

pub fn assert_org(o: &Value) {
    assert_keys(o, ORG_KEYS);
    assert_uuid(&o["id"]);
    str_of(&o["name"]);
    str_of(&o["slug"]);
    ts(&o["created_at"]);
}

/// Sorted by (created_at, id) as the admin lists must be.
pub fn assert_ordered(items: &[Value]) {
    let pairs: Vec<(i64, String)> = items.iter().map(|i| (ts(&i["created_at"]), str_of(&i["id"]).to_owned())).collect();
    let mut sorted = pairs.clone();
    sorted.sort();
    assert_eq!(pairs, sorted, "list not ordered by created_at, then id");
}

// ---------------------------------------------------------------------------------------------------------------
// Raw HTTP (framings reqwest will not produce)

/// Writes `request` bytes to the server, reads until the server closes (send `Connection: close`) or 10 s pass;
/// returns the status code and the whole response text. Write errors are ignored (the server may answer early).
pub async fn raw_http(addr: SocketAddr, request: &[u8]) -> (u16, String) {
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let _ = stream.write_all(request).await;
    let mut buf = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut buf)).await;
    let text = String::from_utf8_lossy(&buf).into_owned();
    let status = text
        .strip_prefix("HTTP/1.1 ")
        .and_then(|r| r.get(..3))
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no HTTP/1.1 status line in {text:?}"));
    (status, text)
}

// ---------------------------------------------------------------------------------------------------------------
// Two nodes on PostgreSQL

/// The two-node runs (`tests/cluster/run.sh`): a database per test, and the wait that makes alternating requests
/// see each other's changes.
///
/// A node applies another node's change within milliseconds (BENCHMARKS.md measures it), not at once. A test
/// reads its own writes on the other node at the very next request, so after each request the client waits until
/// every node has applied the change log up to its end (each node's follower records its progress in `nodes`).
/// What is tested is that the nodes converge on the same answers; the delay is measured apart.
pub mod cluster {
    use std::net::SocketAddr;
    use std::path::Path;
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};

    /// The PostgreSQL server the two-node runs use, if this is one.
    pub fn base_url() -> Option<String> {
        std::env::var("SERVICE_AUTH_TEST_POSTGRES").ok().filter(|u| !u.is_empty())
    }

    /// The URL of the database that belongs to `data_dir` on the server at `base` (created when missing).
    pub async fn database_for(base: &str, data_dir: &Path) -> String {
        use sha2::Digest;
        let digest = sha2::Sha256::digest(data_dir.as_os_str().as_encoded_bytes());
        let name = format!("t_{}", hex::encode(&digest[..12]));
        let (admin_url, db) = (base.to_owned(), name.clone());
        tokio::task::spawn_blocking(move || {
            let mut admin =
                postgres::Client::connect(&admin_url, postgres::NoTls).expect("connect to the test PostgreSQL");
            let exists = admin.query_opt("SELECT 1 FROM pg_database WHERE datname = $1", &[&db]).unwrap().is_some();
            if !exists {
                admin.batch_execute(&format!("CREATE DATABASE {db}")).expect("create the test database");
            }
        })
        .await
        .unwrap();
        let (server, _) = base.rsplit_once('/').expect("a postgres:// URL with a database");
        format!("{server}/{name}")
    }

    /// A PostgreSQL server of the test's own in a temporary directory (PostgreSQL's server binaries), for the
    /// tests that stop and start it; as the `postgres` user when run as root (initdb refuses root).
    pub struct Postgres {
        dir: tempfile::TempDir,
        port: u16,
        bin: std::path::PathBuf,
    }

    impl Postgres {
        /// Blocking: call from `spawn_blocking`.
        pub fn start() -> Self {
            let bin = Self::bindir();
            let dir = tempfile::tempdir().unwrap();
            let free_port = || std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
            let mut pg = Self { dir, port: free_port(), bin };
            if pg.as_root() {
                pg.run("chown", &["postgres", pg.data()]);
            }
            pg.tool("initdb", &["-D", pg.data(), "-A", "trust", "-U", "postgres"]);
            // The port was free a moment ago; with many tests starting servers at once another may have taken it
            // since: then another port (the server's log says why each attempt failed).
            let mut failures = Vec::new();
            while let Err(why) = pg.try_resume() {
                let log = std::fs::read_to_string(format!("{}/log", pg.data())).unwrap_or_default();
                failures.push(format!("port {}: {why}\n{log}", pg.port));
                assert!(failures.len() < 4, "PostgreSQL did not start:\n{}", failures.join("\n"));
                pg.port = free_port();
            }
            pg
        }

        /// Where PostgreSQL's server binaries are: tests/pg_bindir.sh looks where each platform puts them
        /// ($SERVICE_AUTH_PG_BINDIR, pg_config, PATH, Debian's /usr/lib/postgresql, Homebrew) and says what to
        /// install when they are nowhere.
        fn bindir() -> std::path::PathBuf {
            let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/pg_bindir.sh");
            let out = std::process::Command::new(&script).output().expect("run tests/pg_bindir.sh");
            let dir = String::from_utf8_lossy(&out.stdout).trim().to_owned();
            assert!(out.status.success() && !dir.is_empty(), "{}", String::from_utf8_lossy(&out.stderr).trim());
            dir.into()
        }

        fn as_root(&self) -> bool {
            std::process::Command::new("id").arg("-u").output().map(|o| o.stdout == b"0\n").unwrap_or(false)
        }

        fn data(&self) -> &str {
            self.dir.path().to_str().unwrap()
        }

        fn run(&self, program: &str, args: &[&str]) {
            if let Err(why) = Self::try_run(program, args) {
                panic!("{why}");
            }
        }

        fn try_run(program: &str, args: &[&str]) -> Result<(), String> {
            let out = std::process::Command::new(program).args(args).output().expect(program);
            match out.status.success() {
                true => Ok(()),
                false => Err(format!("{program} {args:?}: {}", String::from_utf8_lossy(&out.stderr))),
            }
        }

        fn tool(&self, name: &str, args: &[&str]) {
            if let Err(why) = self.try_tool(name, args) {
                panic!("{why}");
            }
        }

        fn try_tool(&self, name: &str, args: &[&str]) -> Result<(), String> {
            let path = self.bin.join(name);
            let path = path.to_str().unwrap();
            if self.as_root() {
                let mut all = vec!["-u", "postgres", "--", path];
                all.extend(args);
                Self::try_run("runuser", &all)
            } else {
                Self::try_run(path, args)
            }
        }

        /// `postgres://…/postgres` on this server.
        pub fn url(&self) -> String {
            format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
        }

        /// Stops the server (fast shutdown: connections are cut). Blocking.
        pub fn pause(&self) {
            self.tool("pg_ctl", &["-D", self.data(), "-m", "fast", "-w", "stop"]);
        }

        /// Starts it again on the same port. Blocking.
        pub fn resume(&self) {
            if let Err(why) = self.try_resume() {
                panic!("{why}");
            }
        }

        fn try_resume(&self) -> Result<(), String> {
            let options = format!("-c listen_addresses=127.0.0.1 -p {} -k {}", self.port, self.data());
            let log = format!("{}/log", self.data());
            self.try_tool("pg_ctl", &["-D", self.data(), "-l", &log, "-w", "-o", &options, "start"])
        }
    }

    impl Drop for Postgres {
        fn drop(&mut self) {
            let _ = std::process::Command::new("runuser")
                .args(["-u", "postgres", "--"])
                .arg(self.bin.join("pg_ctl"))
                .args(["-D", self.data(), "-m", "immediate", "stop"])
                .output();
            let _ = std::process::Command::new(self.bin.join("pg_ctl"))
                .args(["-D", self.data(), "-m", "immediate", "stop"])
                .output();
        }
    }

    /// Waits until the node at `addr` answers `/readyz` with 200; says why if its task ended instead.
    pub async fn wait_ready(
        addr: SocketAddr,
        task: &mut tokio::task::JoinHandle<Result<(), service_auth::runtime::AppError>>,
    ) {
        let client = super::Client::new(addr);
        for _ in 0..500 {
            if task.is_finished() {
                panic!("node {addr} ended during start-up: {:?}", task.await);
            }
            if let Ok(r) = client.get("/readyz").try_send().await
                && r.status == 200
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("node {addr} not ready within 10 s");
    }

    pub struct Sync {
        url: String,
        client: Arc<Mutex<Option<postgres::Client>>>,
    }

    impl Drop for Sync {
        // The synchronous client closes its connection on a runtime of its own: not on the test's thread.
        fn drop(&mut self) {
            let client = self.client.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
            std::thread::spawn(move || drop(client));
        }
    }

    impl Sync {
        pub async fn connect(url: &str) -> Self {
            let client_url = url.to_owned();
            let url = url.to_owned();
            let client = tokio::task::spawn_blocking(move || postgres::Client::connect(&url, postgres::NoTls))
                .await
                .unwrap()
                .expect("connect to the test database");
            Self { url: client_url, client: Arc::new(Mutex::new(Some(client))) }
        }

        /// Returns once both nodes have applied the whole change log (a node that stops removes its row, so the
        /// two counted are the two running).
        pub async fn wait(&self) {
            let (client, url) = (Arc::clone(&self.client), self.url.clone());
            tokio::task::spawn_blocking(move || {
                let mut guard = client.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                let started = Instant::now();
                loop {
                    match guard.as_mut().map(caught_up) {
                        None | Some(Ok(true)) => return,
                        Some(Ok(false)) => std::thread::sleep(Duration::from_millis(1)),
                        // A test that stopped PostgreSQL left this connection dead: a new one.
                        Some(Err(_)) => {
                            let old = guard.take();
                            std::thread::spawn(move || drop(old));
                            *guard = Some(postgres::Client::connect(&url, postgres::NoTls).expect("reconnect"));
                        }
                    }
                    assert!(started.elapsed() < Duration::from_secs(10), "a node is 10 s behind the change log");
                }
            })
            .await
            .unwrap();
        }
    }

    /// Whether both nodes have applied the change log to its end.
    fn caught_up(client: &mut postgres::Client) -> Result<bool, postgres::Error> {
        let last: i64 = client.query_one("SELECT coalesce(max(seq), 0) FROM changes", &[])?.get(0);
        let done: i64 = client.query_one("SELECT count(*) FROM nodes WHERE applied_seq >= $1", &[&last])?.get(0);
        Ok(done >= 2)
    }
}
