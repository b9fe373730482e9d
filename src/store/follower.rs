//! The follower (PostgreSQL backend): applies the other nodes' changes to this node's state, and knows how
//! fresh that state is.
//!
//! A thread of its own with its own connection: `LISTEN`, then read the change log by `seq > last`, in order,
//! and hand each entry to `apply` (which returns once the actors have applied it), without what this node's own
//! commits have superseded ([`super::own`]): this node's acknowledged entries are skipped whole, and an own entry
//! it never acknowledged (its outcome was lost) is applied like another node's. It also reads back the records a
//! commit found changed ([`super::postgres::Resync`]). A notification wakes it at once; it also polls every [`POLL`], which bounds the delay if a notification
//! is lost and proves that PostgreSQL still answers. After any error it reconnects and catches up by sequence,
//! so nothing is missed.
//!
//! [`Freshness`] is when the follower last read the log to its end. Session checks refuse once that is older than
//! `max_staleness_secs` (fail closed): a sign-out or ban on another node could be unseen for longer.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use postgres::fallible_iterator::FallibleIterator;

use super::postgres::{CHANNEL, PgStore, Resync};
use super::{StoreOp, changes, codec};

/// The longest the follower waits without a notification before reading the log anyway.
const POLL: Duration = Duration::from_millis(250);
/// Entries read per round trip.
const CHUNK: i64 = 500;
/// How often a node that has nothing new still records that it is alive, in `nodes`.
const HEARTBEAT: Duration = Duration::from_secs(1);
/// Pause before reconnecting after an error.
const RETRY: Duration = Duration::from_millis(200);
/// Readiness follows the follower's last contact: a node whose follower has not read the log to its end for this
/// long (eight polls) says it is not ready, so a load balancer stops sending it writes that would all fail, long
/// before its session checks refuse (`max_staleness_secs`).
pub const READY_WITHIN: Duration = Duration::from_secs(2);
/// How often a node deletes the commit ids older than an hour (a retry needs its id for a few seconds at most).
const PRUNE: Duration = Duration::from_secs(60);

/// One entry for the actors: the changes, and the sequence they are as of. `resync`: records read back from the
/// database as of `seq` (not a change log entry); the actors then hold them as of `seq`.
pub struct Entry {
    pub seq: i64,
    pub ops: Vec<StoreOp>,
    pub resync: bool,
}

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
        self.within_limit(self.limit)
    }

    /// For readiness: `Ok` while the follower read the log to its end within [`READY_WITHIN`] (or the limit, if
    /// shorter); otherwise how long ago it last did.
    pub fn ready(&self) -> Result<(), Duration> {
        self.within_limit(self.limit.map(|limit| limit.min(READY_WITHIN)))
    }

    fn within_limit(&self, limit: Option<Duration>) -> Result<(), Duration> {
        let Some(limit) = limit else { return Ok(()) };
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
    apply: impl FnMut(Entry) -> Result<(), String> + Send + 'static,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new().name("store-follower".into()).spawn(move || run(&store, &freshness, &stop, apply))
}

fn run(store: &PgStore, freshness: &Freshness, stop: &AtomicBool, mut apply: impl FnMut(Entry) -> Result<(), String>) {
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
    apply: &mut impl FnMut(Entry) -> Result<(), String>,
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
    let mut pruned: Option<Instant> = None;
    let own = store.own();
    loop {
        if stop.load(Ordering::SeqCst) {
            return Ok(());
        }
        if store.faults().follower_paused() {
            // Test hook: a follower stalled (behind a lock, a slow network) while the other nodes write.
            std::thread::sleep(POLL);
            continue;
        }
        resync(&mut client, store, apply)?;
        let asked = Instant::now();
        let rows = client.query(&read, &[&*last, &CHUNK]).map_err(|e| e.to_string())?;
        for row in &rows {
            let seq: i64 = row.get(0);
            let node: uuid::Uuid = row.get(1);
            if node != me || !own.acknowledged(seq) {
                // A bad entry stops the follower here (and the node goes stale, then refuses session checks)
                // rather than skipping a change it cannot read.
                let mut ops = changes::decode(row.get(2)).map_err(|e| format!("change {seq}: {e}"))?;
                ops.retain(|op| !own.supersedes(seq, op));
                if !ops.is_empty() {
                    let entry = Entry { seq, ops, resync: false };
                    apply(entry).map_err(|e| format!("change {seq} could not be applied: {e}"))?;
                }
            }
            *last = seq;
        }
        own.forget_through(*last);
        if rows.len() as i64 == CHUNK {
            continue;
        }
        freshness.caught_up(asked);
        if recorded.is_none_or(|(seq, at)| seq != *last || at.elapsed() >= HEARTBEAT) {
            client.execute(&progress, &[&me, &*last]).map_err(|e| e.to_string())?;
            recorded = Some((*last, Instant::now()));
        }
        if pruned.is_none_or(|at| at.elapsed() >= PRUNE) {
            client
                .execute("DELETE FROM commit_ids WHERE at < now() - interval '1 hour'", &[])
                .map_err(|e| e.to_string())?;
            pruned = Some(Instant::now());
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

/// Reads back the records commits found changed (each with the sequence the database was at, in one statement)
/// and hands them to `apply`. Those not read (the connection failed) are asked for again.
fn resync(
    client: &mut postgres::Client,
    store: &PgStore,
    apply: &mut impl FnMut(Entry) -> Result<(), String>,
) -> Result<(), String> {
    let mut wanted = store.take_resync();
    wanted.dedup();
    while let Some(&record) = wanted.first() {
        let read = match record {
            Resync::User(id) => client.query_one(
                "SELECT (SELECT record FROM users WHERE id = $1), (SELECT coalesce(max(seq), 0) FROM changes)",
                &[&id.as_slice()],
            ),
            Resync::Session(user, hash) => client.query_one(
                "SELECT (SELECT record FROM sessions WHERE user_id = $1 AND hash = $2), \
                 (SELECT coalesce(max(seq), 0) FROM changes)",
                &[&user.as_slice(), &hash.as_slice()],
            ),
        };
        let row = match read {
            Ok(row) => row,
            Err(e) => {
                store.resync_later(wanted);
                return Err(e.to_string());
            }
        };
        let (bytes, seq): (Option<&[u8]>, i64) = (row.get(0), row.get(1));
        let op = match (record, bytes) {
            (Resync::User(_), Some(b)) => StoreOp::PutUser(codec::decode_user(b).map_err(|e| e.to_string())?),
            (Resync::User(id), None) => StoreOp::DeleteUser(id),
            (Resync::Session(_, hash), Some(b)) => {
                StoreOp::PutSession(hash, codec::decode_session(b).map_err(|e| e.to_string())?)
            }
            (Resync::Session(user, hash), None) => StoreOp::DeleteSession(user, hash),
        };
        tracing::info!(?record, seq, "reading back a record a commit found changed");
        apply(Entry { seq, ops: vec![op], resync: true })?;
        wanted.remove(0);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn freshness_lapses_after_the_limit_and_comes_back_with_a_catch_up() {
        assert!(Freshness::always().check().is_ok());
        let fresh = Freshness::within(Duration::from_millis(50));
        assert!(fresh.check().is_ok(), "a node that just loaded is fresh");
        assert!(fresh.ready().is_ok());
        std::thread::sleep(Duration::from_millis(80));
        assert!(fresh.ready().is_err(), "readiness lapses too (at the shorter of the limit and READY_WITHIN)");
        assert!(fresh.check().is_err(), "no catch-up for longer than the limit");
        fresh.caught_up(Instant::now());
        assert!(fresh.check().is_ok());
    }
}
