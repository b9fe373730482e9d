//! The follower (PostgreSQL backend): applies the other nodes' changes to this node's state, and knows how
//! fresh that state is.
//!
//! A thread of its own with its own connection: `LISTEN`, then read the change log by `seq > last`, in order,
//! skipping this node's own entries, and hand each entry to `apply` (which returns once the actors have applied
//! it). A notification wakes it at once; it also polls every [`POLL`], which bounds the delay if a notification
//! is lost and proves that PostgreSQL still answers. After any error it reconnects and catches up by sequence,
//! so nothing is missed.
//!
//! [`Freshness`] is when the follower last read the log to its end. Session checks refuse once that is older than
//! `max_staleness_secs` (fail closed): a sign-out or ban on another node could be unseen for longer.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use postgres::fallible_iterator::FallibleIterator;

use super::postgres::{CHANNEL, PgStore};
use super::{StoreOp, changes};

/// The longest the follower waits without a notification before reading the log anyway.
const POLL: Duration = Duration::from_millis(250);
/// Entries read per round trip.
const CHUNK: i64 = 500;
/// How often a node that has nothing new still records that it is alive, in `nodes`.
const HEARTBEAT: Duration = Duration::from_secs(1);
/// Pause before reconnecting after an error.
const RETRY: Duration = Duration::from_millis(200);

/// How fresh this node's state is. Without a follower (the embedded store) it is always fresh.
pub struct Freshness {
    started: Instant,
    /// Milliseconds after `started` at which the follower last began a read that reached the log's end (a read
    /// begun then sees every change committed before then).
    caught_up_at_ms: AtomicU64,
    limit: Option<Duration>,
}

impl Freshness {
    /// Always fresh (one node on the embedded store).
    pub fn always() -> Arc<Self> {
        Arc::new(Self { started: Instant::now(), caught_up_at_ms: AtomicU64::new(0), limit: None })
    }

    /// Fresh for `limit` after each catch-up; fresh now (the state was just loaded).
    pub fn within(limit: Duration) -> Arc<Self> {
        Arc::new(Self { started: Instant::now(), caught_up_at_ms: AtomicU64::new(0), limit: Some(limit) })
    }

    fn caught_up(&self, at: Instant) {
        let ms = at.saturating_duration_since(self.started).as_millis() as u64;
        self.caught_up_at_ms.fetch_max(ms, Ordering::SeqCst);
    }

    /// `Ok` while the state is known to be at most `limit` behind the database; otherwise how far behind.
    pub fn check(&self) -> Result<(), Duration> {
        let Some(limit) = self.limit else { return Ok(()) };
        let last = self.started + Duration::from_millis(self.caught_up_at_ms.load(Ordering::SeqCst));
        let behind = last.elapsed();
        if behind <= limit { Ok(()) } else { Err(behind) }
    }
}

/// Starts the follower thread. `apply` gets every other node's entry in sequence order and must return once its
/// changes are in the indexes; it runs on the follower's thread, so it may block. The thread ends when `stop` is
/// set (checked at least every [`POLL`]).
pub fn spawn(
    store: Arc<PgStore>,
    freshness: Arc<Freshness>,
    stop: Arc<AtomicBool>,
    apply: impl FnMut(Vec<StoreOp>) -> Result<(), String> + Send + 'static,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new().name("store-follower".into()).spawn(move || run(&store, &freshness, &stop, apply))
}

fn run(
    store: &PgStore,
    freshness: &Freshness,
    stop: &AtomicBool,
    mut apply: impl FnMut(Vec<StoreOp>) -> Result<(), String>,
) {
    let mut last = store.loaded_seq();
    let me = store.node();
    let mut failing_since: Option<Instant> = None;
    while !stop.load(Ordering::SeqCst) {
        match follow(store, me, &mut last, freshness, stop, &mut apply) {
            Ok(()) => {
                // Stopped: a node that is gone no longer counts among those following.
                if let Ok(mut client) = store.connect_client() {
                    let _ = client.execute("DELETE FROM nodes WHERE node = $1", &[&me]);
                }
                return;
            }
            Err(error) => {
                if failing_since.is_none() {
                    tracing::error!(%error, "lost the database's change log; reconnecting (session checks refuse once \
                                             the state is older than store.max_staleness_secs)");
                    failing_since = Some(Instant::now());
                } else {
                    tracing::debug!(%error, "still cannot follow the change log");
                }
                std::thread::sleep(RETRY);
            }
        }
        if let Some(since) = failing_since.filter(|_| freshness.check().is_ok()) {
            tracing::warn!(after = ?since.elapsed(), "following the change log again");
            failing_since = None;
        }
    }
}

/// One connection's life: listen, catch up, wait, repeat. Returns `Ok` only when asked to stop.
fn follow(
    store: &PgStore,
    me: uuid::Uuid,
    last: &mut i64,
    freshness: &Freshness,
    stop: &AtomicBool,
    apply: &mut impl FnMut(Vec<StoreOp>) -> Result<(), String>,
) -> Result<(), String> {
    let mut client = store.connect_client().map_err(|e| e.to_string())?;
    // Listening first: a change committed after this wakes us, one committed before is read by the catch-up.
    client.batch_execute(&format!("LISTEN {CHANNEL}")).map_err(|e| e.to_string())?;
    let read = client
        .prepare("SELECT seq, node, ops FROM changes WHERE seq > $1 ORDER BY seq LIMIT $2")
        .map_err(|e| e.to_string())?;
    // Progress is for monitoring (and the two-node tests): not worth an fsync each time.
    client.batch_execute("SET synchronous_commit = off").map_err(|e| e.to_string())?;
    let progress = client
        .prepare(
            "INSERT INTO nodes (node, applied_seq, seen_at) VALUES ($1, $2, now()) \
             ON CONFLICT (node) DO UPDATE SET applied_seq = excluded.applied_seq, seen_at = now()",
        )
        .map_err(|e| e.to_string())?;
    let mut recorded: Option<(i64, Instant)> = None;
    loop {
        if stop.load(Ordering::SeqCst) {
            return Ok(());
        }
        let asked = Instant::now();
        let rows = client.query(&read, &[&*last, &CHUNK]).map_err(|e| e.to_string())?;
        for row in &rows {
            let seq: i64 = row.get(0);
            let node: uuid::Uuid = row.get(1);
            if node != me {
                // A bad entry stops the follower here (and the node goes stale, then refuses session checks)
                // rather than skipping a change it cannot read.
                let ops = changes::decode(row.get(2)).map_err(|e| format!("change {seq}: {e}"))?;
                apply(ops).map_err(|e| format!("change {seq} could not be applied: {e}"))?;
            }
            *last = seq;
        }
        if rows.len() as i64 == CHUNK {
            continue;
        }
        freshness.caught_up(asked);
        if recorded.is_none_or(|(seq, at)| seq != *last || at.elapsed() >= HEARTBEAT) {
            client.execute(&progress, &[&me, &*last]).map_err(|e| e.to_string())?;
            recorded = Some((*last, Instant::now()));
        }
        // Wait for a notification (or the poll interval), then take all that queued up: one read covers them.
        let mut notifications = client.notifications();
        let woken = notifications.timeout_iter(POLL).next().map_err(|e| e.to_string())?.is_some();
        if woken {
            let mut queued = notifications.iter();
            while queued.next().map_err(|e| e.to_string())?.is_some() {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn freshness_lapses_after_the_limit_and_comes_back_with_a_catch_up() {
        assert!(Freshness::always().check().is_ok());
        let fresh = Freshness::within(Duration::from_millis(50));
        assert!(fresh.check().is_ok(), "a node that just loaded is fresh");
        std::thread::sleep(Duration::from_millis(80));
        assert!(fresh.check().is_err(), "no catch-up for longer than the limit");
        fresh.caught_up(Instant::now());
        assert!(fresh.check().is_ok());
    }
}
