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

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
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

/// Starts the follower thread. `apply` gets every entry in sequence order and must return once its changes are
/// in the indexes; it runs on the follower's thread, so it may block. The thread ends when `stop` is set
/// (checked at least every [`POLL`]).
pub fn spawn(
    store: Arc<PgStore>,
    freshness: Arc<Freshness>,
    stop: Arc<AtomicBool>,
    apply: impl FnMut(Entry) -> Result<(), String> + Send + 'static,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    let shared = Arc::new(Shared {
        started: Instant::now(),
        generation: AtomicU64::new(0),
        alive_ms: AtomicU64::new(0),
        last: Mutex::new((store.loaded_seq(), Box::new(apply))),
        store,
        freshness,
        stop,
    });
    std::thread::Builder::new().name("store-follower".into()).spawn(move || supervise(&shared))
}

/// A follower that shows no sign of life this long (each round of a live one takes at most a poll, a connect
/// attempt at most 5 s) is stuck on a frozen connection: it is replaced by a new one on a new connection.
const STUCK: Duration = Duration::from_secs(10);

type Apply = Box<dyn FnMut(Entry) -> Result<(), String> + Send>;

/// What the follower's successive generations share. Only the current generation applies entries: one given up
/// as stuck may wake up later and must then change nothing.
struct Shared {
    store: Arc<PgStore>,
    freshness: Arc<Freshness>,
    stop: Arc<AtomicBool>,
    started: Instant,
    generation: AtomicU64,
    /// Milliseconds after `started` of the current generation's last sign of life.
    alive_ms: AtomicU64,
    /// The last sequence applied, and `apply`: locked together, so a replaced generation cannot apply.
    last: Mutex<(i64, Apply)>,
}

impl Shared {
    fn alive(&self) {
        self.alive_ms.store(self.started.elapsed().as_millis() as u64, Ordering::SeqCst);
    }

    fn current(&self, generation: u64) -> bool {
        self.generation.load(Ordering::SeqCst) == generation
    }

    fn last(&self) -> i64 {
        self.last.lock().unwrap_or_else(std::sync::PoisonError::into_inner).0
    }

    /// Applies a record read back (it does not move the follower along the log), if `generation` is current.
    fn resync_apply(&self, generation: u64, entry: Entry) -> Result<(), String> {
        let mut last = self.last.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if !self.current(generation) {
            return Err("replaced by a new connection".into());
        }
        (last.1)(entry)
    }

    /// Applies `entry` (if any) and moves past `seq`, if `generation` is still the current one.
    fn advance(&self, generation: u64, seq: i64, entry: Option<Entry>) -> Result<(), String> {
        let mut last = self.last.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if !self.current(generation) {
            return Err("replaced by a new connection".into());
        }
        if seq <= last.0 {
            // A generation given up as stuck while the actors were applying this entry got there first.
            return Ok(());
        }
        if let Some(entry) = entry {
            (last.1)(entry).map_err(|e| format!("change {seq} could not be applied: {e}"))?;
        }
        last.0 = last.0.max(seq);
        Ok(())
    }
}

/// Runs one generation at a time; starts a new one when the current one is stuck.
fn supervise(shared: &Arc<Shared>) {
    let mut generation = 0;
    shared.alive();
    let mut current = start_generation(shared, generation);
    while !shared.stop.load(Ordering::SeqCst) {
        std::thread::sleep(POLL);
        let silent =
            shared.started.elapsed().saturating_sub(Duration::from_millis(shared.alive_ms.load(Ordering::SeqCst)));
        // Applying (the lock held): waiting for the actors, not for the database.
        let applying = shared.last.try_lock().is_err();
        if silent > STUCK && !applying {
            tracing::error!(?silent, "the change log follower is stuck (a frozen connection?); following on a new one");
            generation += 1;
            shared.generation.store(generation, Ordering::SeqCst);
            shared.alive();
            current = start_generation(shared, generation);
        }
    }
    // Stopping: the current generation notices within a poll, unless it is stuck.
    let deadline = Instant::now() + Duration::from_secs(5);
    while current.as_ref().is_some_and(|t| !t.is_finished()) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn start_generation(shared: &Arc<Shared>, generation: u64) -> Option<std::thread::JoinHandle<()>> {
    let shared = Arc::clone(shared);
    let started =
        std::thread::Builder::new().name("store-follower-conn".into()).spawn(move || run(&shared, generation));
    match started {
        Ok(thread) => Some(thread),
        Err(error) => {
            tracing::error!(%error, "cannot start the change log follower's thread");
            None
        }
    }
}

fn run(shared: &Shared, generation: u64) {
    let store = &*shared.store;
    let me = store.node();
    let mut failing_since: Option<Instant> = None;
    while !shared.stop.load(Ordering::SeqCst) && shared.current(generation) {
        shared.alive();
        match follow(shared, generation) {
            Ok(()) => {
                // Stopped: a node that is gone no longer counts among those following.
                if shared.stop.load(Ordering::SeqCst)
                    && let Ok(mut client) = store.connect_client()
                {
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
        if let Some(since) = failing_since.filter(|_| shared.freshness.check().is_ok()) {
            tracing::warn!(after = ?since.elapsed(), "following the change log again");
            failing_since = None;
        }
    }
}

/// One connection's life: listen, catch up, wait, repeat. Returns `Ok` only when asked to stop (or replaced).
fn follow(shared: &Shared, generation: u64) -> Result<(), String> {
    let (store, freshness) = (&*shared.store, &*shared.freshness);
    let me = store.node();
    let mut client = store.connect_client().map_err(|e| e.to_string())?;
    // Listening first: a change committed after this wakes us, one committed before is read by the catch-up.
    client.batch_execute(&format!("LISTEN {CHANNEL}")).map_err(|e| e.to_string())?;
    let read = client
        .prepare("SELECT seq, node, ops FROM changes WHERE seq > $1 ORDER BY seq LIMIT $2")
        .map_err(|e| e.to_string())?;
    // Progress is for monitoring (and the two-node tests): not worth an fsync each time.
    client.batch_execute("SET synchronous_commit = off").map_err(|e| e.to_string())?;
    // Never backwards: a generation given up as stuck may still write its (older) progress when it wakes.
    let progress = client
        .prepare(
            "INSERT INTO nodes (node, applied_seq, seen_at) VALUES ($1, $2, now()) \
             ON CONFLICT (node) DO UPDATE SET applied_seq = greatest(nodes.applied_seq, excluded.applied_seq), \
             seen_at = now()",
        )
        .map_err(|e| e.to_string())?;
    let mut recorded: Option<(i64, Instant)> = None;
    let mut pruned: Option<Instant> = None;
    let own = store.own();
    loop {
        shared.alive();
        if shared.stop.load(Ordering::SeqCst) || !shared.current(generation) {
            return Ok(());
        }
        if store.faults().follower_paused() {
            // Test hook: a follower stalled (behind a lock, a slow network) while the other nodes write.
            std::thread::sleep(POLL);
            continue;
        }
        resync(&mut client, shared, generation)?;
        let asked = Instant::now();
        let rows = client.query(&read, &[&shared.last(), &CHUNK]).map_err(|e| e.to_string())?;
        for row in &rows {
            shared.alive();
            let seq: i64 = row.get(0);
            let node: uuid::Uuid = row.get(1);
            let mut entry = None;
            if node != me || !own.acknowledged(seq) {
                // A bad entry, or a record of a newer release that may not be skipped (codec's rolling-upgrade
                // rule), stops the follower here (and the node goes stale, then refuses session checks) rather than
                // skipping a change it cannot read.
                let mut ops = changes::decode(row.get(2)).map_err(|e| format!("change {seq}: {e}"))?;
                ops.retain(|op| !own.supersedes(seq, op));
                if !ops.is_empty() {
                    entry = Some(Entry { seq, ops, resync: false });
                }
            }
            shared.advance(generation, seq, entry)?;
        }
        let last = shared.last();
        own.forget_through(last);
        if rows.len() as i64 == CHUNK {
            continue;
        }
        if shared.current(generation) {
            freshness.caught_up(asked);
        }
        if recorded.is_none_or(|(seq, at)| seq != last || at.elapsed() >= HEARTBEAT) {
            client.execute(&progress, &[&me, &last]).map_err(|e| e.to_string())?;
            recorded = Some((last, Instant::now()));
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
fn resync(client: &mut postgres::Client, shared: &Shared, generation: u64) -> Result<(), String> {
    let store = &*shared.store;
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
            Resync::ApiKey(id, _) => client.query_one(
                "SELECT (SELECT record FROM api_keys WHERE id = $1), (SELECT coalesce(max(seq), 0) FROM changes)",
                &[&id.as_slice()],
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
            (Resync::Session(user, hash), Some(b)) => match codec::read_session(b).map_err(|e| e.to_string())? {
                Some(session) => StoreOp::PutSession(hash, session),
                // Written by a newer release in a format this one does not read: not held here.
                None => StoreOp::DeleteSession(user, hash),
            },
            (Resync::Session(user, hash), None) => StoreOp::DeleteSession(user, hash),
            (Resync::ApiKey(..), Some(b)) => StoreOp::PutApiKey(codec::decode(b).map_err(|e| e.to_string())?),
            (Resync::ApiKey(id, user), None) => StoreOp::DeleteApiKey { id, user },
        };
        tracing::info!(?record, seq, "reading back a record a commit found changed");
        shared.resync_apply(generation, Entry { seq, ops: vec![op], resync: true })?;
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
