//! The hashing pool alone: as many password verifies as it sustains, with the server's own pool and parameters
//! (`[hashing]` defaults) and no HTTP, session or store around them. Sign-in's throughput is judged against this
//! (`benches/load.sh` runs both in one run): what sign-in loses to it is the cost of everything but the hash.
//!
//! ```sh
//! cargo run --release --example hash_pool -- --concurrency 16 --secs 10
//! ```
//!
//! Prints one line: `POOL <verifies per second> <p50 ms> <p99 ms>`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use clap::Parser;
use service_auth::config::HashingConfig;
use service_auth::domain::Password;
use service_auth::hashing::{Hasher, OnFile};

#[derive(Parser)]
struct Args {
    /// Verifies asked for at once (as many as the clients of the sign-in it is compared with).
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
    #[arg(long, default_value_t = 10)]
    secs: u64,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    // A queue as deep and as patient as the askers need: nothing is refused, every verify waits its turn, so the
    // figure is what the pool sustains (the server's own queue refuses sooner: its 503s show in load.sh's notes).
    let config =
        HashingConfig { max_queue: args.concurrency.max(1) * 2, queue_timeout_ms: 600_000, ..HashingConfig::default() };
    let hasher = Arc::new(Hasher::new(&config)?);
    let stored = hasher.hash(Password::for_sign_in("seed-password-1")?).await?;
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let tasks: Vec<_> = (0..args.concurrency)
        .map(|_| {
            let (hasher, stored, stop) = (Arc::clone(&hasher), stored.clone(), Arc::clone(&stop));
            tokio::spawn(async move {
                let mut took = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let at = Instant::now();
                    let password = Password::for_sign_in("seed-password-1").expect("a valid password");
                    let ok = hasher.verify(password, Some(stored.clone()), OnFile::default()).await;
                    assert!(matches!(ok, Ok(true)), "the pool refused or failed a verify: {ok:?}");
                    took.push(at.elapsed());
                }
                took
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_secs(args.secs)).await;
    stop.store(true, Ordering::Relaxed);
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await?);
    }
    let elapsed = started.elapsed().as_secs_f64();
    all.sort_unstable();
    let at = |p: f64| all.get(((all.len().max(1) - 1) as f64 * p) as usize).map_or(0.0, |d| d.as_secs_f64() * 1e3);
    println!("POOL {:.1} {:.2} {:.2}", all.len() as f64 / elapsed, at(0.5), at(0.99));
    Ok(())
}
