//! Timeline: the latency of every get-session over a stretch of time, each carrying a random one of many seeded
//! sessions, lined up with what the server process did meanwhile. A percentile over a whole run averages a stall
//! away; this shows when it happened, how long it lasted, and whether the server faulted pages, ran, or sat
//! descheduled then.
//!
//! ```sh
//! cargo run --release --example timeline -- --url http://127.0.0.1:3916 --tokens rtokens.txt --pid "$PID" \
//!     --connections 64 --secs 60
//! ```
//!
//! Every connection sends its next request as soon as its previous answer came (a closed loop, as wrk does). The
//! answers are cut into windows (`--window-ms`); the report lists every window whose slowest answer took at least
//! `--slow-ms`, with its wall-clock time (to line up with the server's log), its requests, p99 and maximum, and
//! the server's deltas in it from `/proc/<pid>`: minor and major page faults, CPU time, and the switches it made
//! (voluntary: it waited; involuntary: it was preempted). Then the whole run's distribution.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::Parser;

#[derive(Parser)]
struct Args {
    /// The server, on loopback.
    #[arg(long, default_value = "http://127.0.0.1:3911")]
    url: String,
    /// Session tokens, one a line (`service-auth seed --tokens-out`); each request carries a random one.
    #[arg(long)]
    tokens: PathBuf,
    #[arg(long, default_value_t = 64)]
    connections: usize,
    #[arg(long, default_value_t = 60)]
    secs: u64,
    /// The server's process id: its page faults, CPU time and context switches are sampled every window.
    #[arg(long)]
    pid: Option<u32>,
    #[arg(long, default_value_t = 100)]
    window_ms: u64,
    /// A window whose slowest answer took this long or longer is listed.
    #[arg(long, default_value_t = 10.0)]
    slow_ms: f64,
    /// Name of the session cookie.
    #[arg(long, default_value = "service-auth.session_token")]
    cookie: String,
}

/// One answer: when its request left (since the start) and how long it took.
struct Sample {
    sent: Duration,
    took: Duration,
}

/// What `/proc/<pid>` says of the process at one instant.
#[derive(Clone, Copy, Default)]
struct Proc {
    minor_faults: u64,
    major_faults: u64,
    cpu_ticks: u64,
    voluntary: u64,
    involuntary: u64,
}

fn read_proc(pid: u32) -> Option<Proc> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces) start at field 3 ("state").
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let num = |i: usize| f.get(i - 3).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    let mut proc =
        Proc { minor_faults: num(10), major_faults: num(12), cpu_ticks: num(14) + num(15), ..Proc::default() };
    // The switches are counted per thread: the sum over every thread of the process.
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).ok()?.flatten() {
        let Ok(status) = std::fs::read_to_string(task.path().join("status")) else { continue };
        let field = |name: &str| -> u64 {
            status
                .lines()
                .find(|l| l.starts_with(name))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
                .unwrap_or(0)
        };
        proc.voluntary += field("voluntary_ctxt_switches:");
        proc.involuntary += field("nonvoluntary_ctxt_switches:");
    }
    Some(proc)
}

/// A small generator per connection: the choice of token needs no quality, only spread and no shared state.
struct XorShift(u64);

impl XorShift {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

async fn connection(
    url: Arc<str>,
    cookies: Arc<Vec<String>>,
    seed: u64,
    start: Instant,
    stop: Arc<AtomicBool>,
) -> Result<(Vec<Sample>, u64), reqwest::Error> {
    let client = reqwest::Client::builder().pool_max_idle_per_host(1).build()?;
    let mut random = XorShift(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let (mut samples, mut failed) = (Vec::with_capacity(1 << 16), 0);
    while !stop.load(Ordering::Relaxed) {
        let cookie = &cookies[random.below(cookies.len())];
        let sent = Instant::now();
        let answer = client.get(&*url).header("cookie", cookie).send().await?;
        let ok = answer.status() == 200;
        let body = answer.bytes().await?;
        let took = sent.elapsed();
        if !ok || body.len() < 100 {
            failed += 1;
        }
        samples.push(Sample { sent: sent - start, took });
    }
    Ok((samples, failed))
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() - 1) as f64 * p / 100.0).round() as usize]
}

fn clock(at: SystemTime) -> String {
    let ms = at.duration_since(UNIX_EPOCH).unwrap_or_default().as_millis() % 86_400_000;
    format!("{:02}:{:02}:{:02}.{:03}", ms / 3_600_000, ms / 60_000 % 60, ms / 1000 % 60, ms % 1000)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let url: Arc<str> = format!("{}/api/auth/get-session", args.url.trim_end_matches('/')).into();
    let cookies: Vec<String> = std::fs::read_to_string(&args.tokens)?
        .lines()
        .filter(|l| !l.is_empty())
        .map(|t| format!("{}={t}", args.cookie))
        .collect();
    if cookies.is_empty() {
        return Err("no session token in --tokens".into());
    }
    let cookies = Arc::new(cookies);
    let window = Duration::from_millis(args.window_ms);
    let windows = (args.secs * 1000 / args.window_ms) as usize;

    let stop = Arc::new(AtomicBool::new(false));
    let (start, wall) = (Instant::now(), SystemTime::now());
    let tasks: Vec<_> = (0..args.connections)
        .map(|i| tokio::spawn(connection(url.clone(), cookies.clone(), i as u64 + 1, start, stop.clone())))
        .collect();
    // The server's counters at every window's edge, read on a thread of its own (not behind the clients).
    let sampler = args.pid.map(|pid| {
        std::thread::spawn(move || {
            let mut edges = Vec::with_capacity(windows + 1);
            for i in 0..=windows {
                let due = start + window * i as u32;
                std::thread::sleep(due.saturating_duration_since(Instant::now()));
                edges.push(read_proc(pid).unwrap_or_default());
            }
            edges
        })
    });
    tokio::time::sleep(Duration::from_secs(args.secs)).await;
    stop.store(true, Ordering::Relaxed);
    let mut samples = Vec::new();
    let mut failed = 0;
    for task in tasks {
        let (s, f) = task.await??;
        samples.extend(s);
        failed += f;
    }
    let edges = match sampler {
        Some(thread) => thread.join().map_err(|_| "the sampler panicked")?,
        None => Vec::new(),
    };

    let mut per_window: Vec<Vec<Duration>> = vec![Vec::new(); windows];
    for s in &samples {
        // A request belongs to the window it was waiting in when it ended: that is where a stall shows.
        let index = ((s.sent + s.took).as_millis() / window.as_millis()) as usize;
        if let Some(w) = per_window.get_mut(index) {
            w.push(s.took);
        }
    }
    println!(
        "window      from          requests     p99      max | minflt majflt  cpu ms  vol. invol.  (server, /proc)"
    );
    let mut slow = 0;
    for (i, w) in per_window.iter_mut().enumerate() {
        w.sort_unstable();
        let max = w.last().copied().unwrap_or_default();
        if ms(max) < args.slow_ms {
            continue;
        }
        slow += 1;
        let at = wall + window * i as u32;
        let server = match (edges.get(i), edges.get(i + 1)) {
            (Some(a), Some(b)) => format!(
                "{:6} {:6} {:7} {:5} {:6}",
                b.minor_faults.saturating_sub(a.minor_faults),
                b.major_faults.saturating_sub(a.major_faults),
                (b.cpu_ticks.saturating_sub(a.cpu_ticks)) * 10,
                b.voluntary.saturating_sub(a.voluntary),
                b.involuntary.saturating_sub(a.involuntary)
            ),
            _ => String::new(),
        };
        println!("{i:6}  {}  {:9} {:6.2}ms {:6.2}ms | {server}", clock(at), w.len(), ms(percentile(w, 99.0)), ms(max));
    }
    if let (Some(first), Some(last)) = (edges.first(), edges.last()) {
        let n = windows.max(1) as u64;
        println!(
            "server per window, mean: minflt {} majflt {} cpu {} ms vol. {} invol. {}",
            last.minor_faults.saturating_sub(first.minor_faults) / n,
            last.major_faults.saturating_sub(first.major_faults) / n,
            last.cpu_ticks.saturating_sub(first.cpu_ticks) * 10 / n,
            last.voluntary.saturating_sub(first.voluntary) / n,
            last.involuntary.saturating_sub(first.involuntary) / n
        );
    }
    let mut all: Vec<Duration> = samples.iter().map(|s| s.took).collect();
    all.sort_unstable();
    println!(
        "{} requests in {} s ({:.0}/s), {failed} failed; {slow} of {windows} windows of {} ms had an answer of {} ms \
         or more",
        all.len(),
        args.secs,
        all.len() as f64 / args.secs as f64,
        args.window_ms,
        args.slow_ms
    );
    println!(
        "p50 {:.2} ms  p99 {:.2} ms  p99.9 {:.2} ms  max {:.2} ms",
        ms(percentile(&all, 50.0)),
        ms(percentile(&all, 99.0)),
        ms(percentile(&all, 99.9)),
        ms(all.last().copied().unwrap_or_default())
    );
    Ok(())
}
