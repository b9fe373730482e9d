//! Overload: many more simultaneous sign-ins than the hashing pool can serve, against a running server, while a
//! few connections keep checking a session. It shows whether the excess is refused fast (503 with `Retry-After`)
//! instead of queuing, whether get-session stays quick meanwhile, and (given the server's pid) how much resident
//! memory the flood costs.
//!
//! ```sh
//! cargo run --release --example overload -- --url http://127.0.0.1:3911 --tokens tokens.txt --pid "$PID"
//! ```
//!
//! Every sign-in client has a connection of its own, opened before the start; then all of them send at the same
//! instant and go on sending for `--secs`, each as soon as its previous answer came, or after the wait a 503's
//! `Retry-After` asks (`--no-backoff`: at once, as a hostile client would). The first answer of each client is the "first wave" (`--sign-ins` at once). The server needs the
//! per-address limits raised for this (`[rate_limit] sign_in_per_address = 0`, `[limits]
//! max_connections_per_address` above `--sign-ins`), since every client comes from 127.0.0.1. The users are
//! `user1..userN@seed.example` of `service-auth seed`, with its password. `benches/load.sh` runs it and takes
//! its `--rows` into the summary table.
//!
//! A sign-in's time runs from the write of its request to the read of its whole answer, on a plain HTTP/1.1
//! connection (see `sign_in_client`). A 503 that took a second or more waited in the queue for a hashing worker
//! and left late; the summary counts those apart from the rest (refused at the door, or leaving the queue early).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use clap::Parser;
use tokio::sync::Barrier;

#[derive(Parser)]
struct Args {
    /// The server, on loopback.
    #[arg(long, default_value = "http://127.0.0.1:3911")]
    url: String,
    /// Sign-in clients, each on its own connection, all starting at once.
    #[arg(long, default_value_t = 1000)]
    sign_ins: usize,
    /// How long the flood lasts, seconds.
    #[arg(long, default_value_t = 10)]
    secs: u64,
    /// Connections checking get-session before and during the flood.
    #[arg(long, default_value_t = 16)]
    probes: usize,
    /// Session tokens, one a line (`service-auth seed --tokens-out`); the probes use the first ones.
    #[arg(long)]
    tokens: PathBuf,
    /// Seeded users signing in: user1..user<N>@seed.example.
    #[arg(long, default_value_t = 10_000)]
    users: usize,
    #[arg(long, default_value = "seed-password-1")]
    password: String,
    /// The server's process id: its resident memory is sampled from /proc every 5 ms.
    #[arg(long)]
    pid: Option<u32>,
    /// Name of the session cookie.
    #[arg(long, default_value = "service-auth.session_token")]
    cookie: String,
    /// Send again at once after a 503, ignoring `Retry-After` (a hostile client); by default a refused client
    /// waits the seconds `Retry-After` asks, as a well-behaved one does.
    #[arg(long)]
    no_backoff: bool,
    /// Also print the summary as `ROW|scenario|conns|req/s|p50|p99|note` lines (for benches/load.sh).
    #[arg(long)]
    rows: bool,
    /// Write every sign-in answer to this file, a line each: client, milliseconds from the start of the flood to
    /// the request, milliseconds to the answer, status. What shows *when* the slow ones were sent.
    #[arg(long)]
    answers_out: Option<PathBuf>,
}

/// Latencies of one kind of answer.
#[derive(Default)]
struct Timings(Vec<Duration>);

impl Timings {
    fn quantile(&self, q: f64) -> Duration {
        let mut v = self.0.clone();
        v.sort_unstable();
        // Nearest rank: the smallest value with at least q of the samples at or below it.
        let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len().max(1));
        v.get(rank - 1).copied().unwrap_or_default()
    }
    fn max(&self) -> Duration {
        self.0.iter().max().copied().unwrap_or_default()
    }
}

/// What the sign-in clients saw, by kind of answer.
#[derive(Default)]
struct SignIns {
    first: BTreeMap<String, Timings>,
    all: BTreeMap<String, Timings>,
}

fn kind(status: u16, retry_after: Option<&str>) -> String {
    match (status, retry_after) {
        (503, Some(v)) => format!("503, Retry-After: {v}"),
        (503, None) => "503 WITHOUT Retry-After".to_owned(),
        (s, _) => s.to_string(),
    }
}

/// One answer a sign-in client saw: its status and kind, when the request went out (after the start), how long
/// it took.
struct Seen {
    status: u16,
    kind: String,
    sent: Duration,
    took: Duration,
}

async fn sign_in_client(
    addr: Arc<str>,
    n: usize,
    args: Arc<Args>,
    start: Arc<Barrier>,
    stop: Arc<AtomicBool>,
) -> std::io::Result<Vec<Seen>> {
    // A plain HTTP/1.1 connection, not reqwest: the 1,000 clients share the server's two cores, and whatever a
    // client spends per request delays the server and, through the client's own queue of ready tasks, the
    // moment an answer is seen. Here a request is one prepared write and the answer one parse of its head. The
    // connection is opened (and the server has accepted it) before the start.
    let mut conn = Conn::open(&addr).await?;
    conn.request("GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n".as_bytes()).await?;
    let mut seen = Vec::new();
    start.wait().await;
    let began = Instant::now();
    let mut i = n;
    loop {
        let body = format!(r#"{{"email":"user{}@seed.example","password":"{}"}}"#, 1 + i % args.users, args.password);
        let request = format!(
            "POST /api/auth/sign-in/email HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\n\
             content-length: {}\r\n\r\n{body}",
            body.len()
        );
        // From the moment the request is written to the moment the whole answer has been read.
        let sent = Instant::now();
        let (status, retry) = conn.request(request.as_bytes()).await?;
        seen.push(Seen { status, kind: kind(status, retry.as_deref()), sent: sent - began, took: sent.elapsed() });
        i += args.sign_ins;
        if stop.load(Ordering::Relaxed) {
            return Ok(seen);
        }
        if status == 503 && !args.no_backoff {
            let secs = retry.and_then(|v| v.parse().ok()).unwrap_or(1);
            let wake = Instant::now() + Duration::from_secs(secs);
            // Wakes early when the flood ends, so the run does not outlast it.
            while Instant::now() < wake && !stop.load(Ordering::Relaxed) {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            if stop.load(Ordering::Relaxed) {
                return Ok(seen);
            }
        }
    }
}

/// One keep-alive HTTP/1.1 connection of a sign-in client; it reconnects if the server closed it.
struct Conn {
    addr: String,
    stream: tokio::net::TcpStream,
    buf: Vec<u8>,
}

impl Conn {
    async fn open(addr: &str) -> std::io::Result<Self> {
        let stream = tokio::net::TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        Ok(Self { addr: addr.to_owned(), stream, buf: Vec::with_capacity(4096) })
    }

    /// Writes `request` and reads the whole answer: its status and `Retry-After`.
    async fn request(&mut self, request: &[u8]) -> std::io::Result<(u16, Option<String>)> {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        if self.stream.write_all(request).await.is_err() {
            *self = Self::open(&self.addr).await?;
            self.stream.write_all(request).await?;
        }
        self.buf.clear();
        loop {
            if let Some(end) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&self.buf[..end]).into_owned();
                let status = head.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
                let header = |name: &str| {
                    head.lines().skip(1).find_map(|l| {
                        let (n, v) = l.split_once(':')?;
                        n.eq_ignore_ascii_case(name).then(|| v.trim().to_owned())
                    })
                };
                let length: usize = header("content-length").and_then(|v| v.parse().ok()).unwrap_or(0);
                let close = header("connection").is_some_and(|v| v.eq_ignore_ascii_case("close"));
                while self.buf.len() < end + 4 + length {
                    if self.stream.read_buf(&mut self.buf).await? == 0 {
                        return Err(std::io::ErrorKind::UnexpectedEof.into());
                    }
                }
                if close {
                    *self = Self::open(&self.addr).await?;
                }
                return Ok((status, header("retry-after")));
            }
            if self.stream.read_buf(&mut self.buf).await? == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
        }
    }
}

/// get-session on one connection until `stop`, each answer's latency into `before` until `flooding`, then into
/// `during`.
async fn probe(
    url: String,
    cookie: String,
    flooding: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
) -> Result<(Timings, Timings, u64), reqwest::Error> {
    let client = reqwest::Client::builder().pool_max_idle_per_host(1).build()?;
    let (mut before, mut during, mut failed) = (Timings::default(), Timings::default(), 0);
    while !stop.load(Ordering::Relaxed) {
        let sent = Instant::now();
        let answer = client.get(&url).header("cookie", &cookie).send().await?;
        let ok = answer.status() == 200;
        let body = answer.bytes().await?;
        let took = sent.elapsed();
        if !ok || body.len() < 100 {
            failed += 1;
        }
        if flooding.load(Ordering::Relaxed) { &mut during } else { &mut before }.0.push(took);
    }
    Ok((before, during, failed))
}

fn resident_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Arc::new(Args::parse());
    let base: Arc<str> = args.url.trim_end_matches('/').into();
    let tokens = std::fs::read_to_string(&args.tokens)?;
    let tokens: Vec<&str> = tokens.lines().filter(|l| !l.is_empty()).take(args.probes).collect();
    if tokens.is_empty() {
        return Err("no session token in --tokens".into());
    }

    let stop_probes = Arc::new(AtomicBool::new(false));
    let flooding = Arc::new(AtomicBool::new(false));
    let probes: Vec<_> = (0..args.probes)
        .map(|i| {
            let cookie = format!("{}={}", args.cookie, tokens[i % tokens.len()]);
            // disableRefresh: a probe reads, it never waits for a commit.
            let url = format!("{base}/api/auth/get-session?disableRefresh=true");
            tokio::spawn(probe(url, cookie, Arc::clone(&flooding), Arc::clone(&stop_probes)))
        })
        .collect();

    // Resident memory, sampled until the end.
    let sampling = Arc::new(AtomicBool::new(true));
    let peak = Arc::new(AtomicU64::new(0));
    let sampler = args.pid.map(|pid| {
        let (sampling, peak, flooding) = (Arc::clone(&sampling), Arc::clone(&peak), Arc::clone(&flooding));
        tokio::spawn(async move {
            while sampling.load(Ordering::Relaxed) {
                if flooding.load(Ordering::Relaxed)
                    && let Some(kib) = resident_kib(pid)
                {
                    peak.fetch_max(kib, Ordering::Relaxed);
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
    });

    // The sign-in clients connect; then two seconds of probes alone (the "before" figures), then the flood.
    let start = Arc::new(Barrier::new(args.sign_ins + 1));
    let stop = Arc::new(AtomicBool::new(false));
    let addr: Arc<str> = base.trim_start_matches("http://").into();
    let clients: Vec<_> = (0..args.sign_ins)
        .map(|n| {
            let (addr, args, start, stop) =
                (Arc::clone(&addr), Arc::clone(&args), Arc::clone(&start), Arc::clone(&stop));
            tokio::spawn(sign_in_client(addr, n, args, start, stop))
        })
        .collect();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before_kib = args.pid.and_then(resident_kib);
    flooding.store(true, Ordering::Relaxed);
    start.wait().await;
    let began = Instant::now();
    tokio::time::sleep(Duration::from_secs(args.secs)).await;
    stop.store(true, Ordering::Relaxed);

    let mut sign_ins = SignIns::default();
    let mut requests = 0usize;
    let mut answers = String::new();
    let millis = |d: Duration| d.as_secs_f64() * 1000.0;
    for (n, client) in clients.into_iter().enumerate() {
        let seen = client.await??;
        requests += seen.len();
        for (i, Seen { status, kind, sent, took }) in seen.into_iter().enumerate() {
            if args.answers_out.is_some() {
                answers += &format!("{n} {:.3} {:.3} {status}\n", millis(sent), millis(took));
            }
            if i == 0 {
                sign_ins.first.entry(kind.clone()).or_default().0.push(took);
            }
            sign_ins.all.entry(kind).or_default().0.push(took);
        }
    }
    // Timed before the file is written: the rates divide by this.
    let flood_time = began.elapsed();
    if let Some(path) = &args.answers_out {
        std::fs::write(path, answers)?;
    }
    stop_probes.store(true, Ordering::Relaxed);
    let (mut before, mut during, mut failed) = (Timings::default(), Timings::default(), 0);
    for p in probes {
        let (b, d, f) = p.await??;
        before.0.extend(b.0);
        during.0.extend(d.0);
        failed += f;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after_kib = args.pid.and_then(resident_kib);
    sampling.store(false, Ordering::Relaxed);
    if let Some(s) = sampler {
        s.await?;
    }

    println!(
        "{} sign-in clients at once{} for {} s ({} requests in {:.1} s), {} get-session probes",
        args.sign_ins,
        if args.no_backoff { ", not backing off after a 503" } else { ", each waiting Retry-After after a 503" },
        args.secs,
        requests,
        flood_time.as_secs_f64(),
        args.probes
    );
    println!("| answers | count | p50 | p99 | max |");
    println!("|---|---|---|---|---|");
    for (label, table) in [("first wave", &sign_ins.first), ("whole flood", &sign_ins.all)] {
        for (kind, t) in table {
            let (p50, p99, max) = (ms(t.quantile(0.5)), ms(t.quantile(0.99)), ms(t.max()));
            println!("| sign-in, {label}: {kind} | {} | {p50} | {p99} | {max} |", t.0.len());
        }
    }
    // A 503 that took a second or more waited in the queue for a worker and left late: not a refusal at the door,
    // nor a queued request that learnt early that its turn would come too late.
    let timed_out = |t: &Timings| t.0.iter().filter(|d| **d >= Duration::from_secs(1)).count();
    for (kind, t) in sign_ins.all.iter().filter(|(k, _)| k.starts_with("503")) {
        println!("sign-in {kind} after 1 s or more (waited in the queue): {} of {}", timed_out(t), t.0.len());
        let door = Timings(t.0.iter().copied().filter(|d| *d < Duration::from_secs(1)).collect());
        let (p50, p99, max) = (ms(door.quantile(0.5)), ms(door.quantile(0.99)), ms(door.max()));
        println!(
            "sign-in {kind} in under 1 s (at the door, or leaving the queue early): p50 {p50}, p99 {p99}, max {max}"
        );
    }
    for (label, t) in [("before the flood", &before), ("during the flood", &during)] {
        let (p50, p99, max) = (ms(t.quantile(0.5)), ms(t.quantile(0.99)), ms(t.max()));
        println!("| get-session, {label} | {} | {p50} | {p99} | {max} |", t.0.len());
    }
    if failed > 0 {
        println!("get-session answers that were not a session: {failed}");
    }
    let mib = |kib: u64| format!("{:.0} MiB", kib as f64 / 1024.0);
    if let (Some(b), Some(a)) = (before_kib, after_kib) {
        let p = peak.load(Ordering::Relaxed).max(b);
        println!(
            "server resident memory: {} before, {} at the peak of the flood (+{}), {} one second after",
            mib(b),
            mib(p),
            mib(p - b),
            mib(a)
        );
    }

    if args.rows {
        let secs = flood_time.as_secs_f64();
        let c = args.sign_ins;
        for (kind, t) in &sign_ins.all {
            let rps = t.0.len() as f64 / secs;
            let (p50, p99) = (ms(t.quantile(0.5)), ms(t.quantile(0.99)));
            let slow = if kind.starts_with("503") { format!("; {} after >= 1 s", timed_out(t)) } else { String::new() };
            println!("ROW|sign-in flood: {kind}|{c}|{rps:.1}|{p50}|{p99}|max {}{slow}", ms(t.max()));
        }
        let rps = during.0.len() as f64 / secs;
        let (p50, p99) = (ms(during.quantile(0.5)), ms(during.quantile(0.99)));
        let memory = match (before_kib, after_kib) {
            (Some(b), Some(_)) => format!("; server RSS +{}", mib(peak.load(Ordering::Relaxed).max(b) - b)),
            _ => String::new(),
        };
        println!(
            "ROW|get-session during the {c} sign-in flood|{}|{rps:.1}|{p50}|{p99}|max {}{memory}",
            args.probes,
            ms(during.max())
        );
    }
    Ok(())
}
