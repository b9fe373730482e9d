//! The overview's counters: sign-ins that succeeded and failed, sign-ups, sign-ins refused by the failure limit
//! (lock-outs) and password resets, per hour (kept two days) and per day (kept 90 days), durable in the store and
//! summed across nodes.
//!
//! Counting must not slow the paths it counts, so a count is one uncontended lock and a map update in memory, and
//! the counts reach the store in a periodic flush ([`FLUSH_INTERVAL`]): one small write through the writer's group
//! commit every few seconds, whatever the traffic. Riding in the commits those paths make already was the other
//! choice, and it cannot be exact: a flood of failed sign-ins makes no commit per failure (the audit log itemises
//! a bounded number per minute, see `actors::attempts`), and a lock-out refusal none at all. The price is stated in
//! docs/reference.md: a crash (not a stop, which flushes) loses at most the last [`FLUSH_INTERVAL`] of counts.
//! What is counted but not flushed yet is added to every read, so this node's answer is always exact.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::Unavailable;
use crate::domain::Timestamp;
use crate::store::{CountRow, Period, Store, StoreOp, StoreWriter};

/// How often the counts are written; a crash loses at most this much of them.
pub const FLUSH_INTERVAL: Duration = Duration::from_secs(5);
/// How long the buckets are kept: the overview shows 24 hours and 30 days.
const KEEP_HOURS: i64 = 48;
const KEEP_DAYS: i64 = 90;

/// What is counted. The numbers are the store's (a stored bucket's counter), so they never change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum Counter {
    SignInSucceeded = 1,
    /// A wrong password or unknown e-mail, a banned account, an address not verified yet.
    SignInFailed = 2,
    SignUp = 3,
    /// A sign-in refused because its e-mail had too many failures ([rate_limit] failures_per_account).
    LockedOut = 4,
    /// A password reset through a mailed link, completed.
    PasswordReset = 5,
}

impl Counter {
    pub const ALL: [Counter; 5] =
        [Self::SignInSucceeded, Self::SignInFailed, Self::SignUp, Self::LockedOut, Self::PasswordReset];

    /// Its name in the admin API.
    pub const fn name(self) -> &'static str {
        match self {
            Self::SignInSucceeded => "sign_ins",
            Self::SignInFailed => "failed_sign_ins",
            Self::SignUp => "sign_ups",
            Self::LockedOut => "lockouts",
            Self::PasswordReset => "password_resets",
        }
    }

    fn from_code(code: u8) -> Option<Self> {
        Self::ALL.into_iter().find(|c| *c as u8 == code)
    }
}

/// The counts of each bucket of one period, oldest first: `(bucket start, count of each of [`Counter::ALL`])`.
pub type Buckets = Vec<(Timestamp, [u64; Counter::ALL.len()])>;

/// The two series the overview draws.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Series {
    /// The last 24 hours, the current one last.
    pub hours: Buckets,
    /// The last 30 days (UTC), today last.
    pub days: Buckets,
}

pub struct Counters {
    /// Counts not written yet, by hour start and counter.
    pending: Mutex<BTreeMap<(i64, Counter), u64>>,
    /// Held while a flush writes: a read waits, so it never sees counts that have left `pending` and are not in
    /// the store yet (or are in both).
    flushing: tokio::sync::Mutex<()>,
    store: Arc<Store>,
    writer: StoreWriter,
}

impl Counters {
    pub(crate) fn new(store: Arc<Store>, writer: StoreWriter) -> Self {
        Self { pending: Mutex::default(), flushing: tokio::sync::Mutex::default(), store, writer }
    }

    /// Counts one `counter` now.
    pub fn count(&self, counter: Counter) {
        self.count_at(counter, Timestamp::now(), 1);
    }

    fn count_at(&self, counter: Counter, at: Timestamp, n: u64) {
        let hour = Period::Hour.floor(at.as_millis());
        let mut pending = self.pending.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        *pending.entry((hour, counter)).or_default() += n;
    }

    /// Writes what was counted since the last flush (and trims buckets past their retention) in one durable
    /// write. On failure the counts go back to wait for the next flush.
    pub async fn flush(&self) -> Result<(), Unavailable> {
        let _flushing = self.flushing.lock().await;
        let taken = std::mem::take(&mut *self.pending.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
        if taken.is_empty() {
            return Ok(());
        }
        let now = Timestamp::now().as_millis();
        let mut ops: Vec<StoreOp> = taken
            .iter()
            .map(|(&(hour_ms, counter), &n)| StoreOp::AddCount { kind: counter as u8, hour_ms, n })
            .collect();
        ops.push(StoreOp::PruneCounts {
            hours_before_ms: Period::Hour.floor(now) - KEEP_HOURS * Period::Hour.millis(),
            days_before_ms: Period::Day.floor(now) - KEEP_DAYS * Period::Day.millis(),
        });
        if self.writer.write(ops).await.is_err() {
            let mut pending = self.pending.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            for (key, n) in taken {
                *pending.entry(key).or_default() += n;
            }
            return Err(Unavailable);
        }
        Ok(())
    }

    /// Flushes every [`FLUSH_INTERVAL`] until `stop`, then once more.
    pub(crate) async fn run(self: Arc<Self>, stop: tokio_util::sync::CancellationToken) {
        let mut tick = tokio::time::interval(FLUSH_INTERVAL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                () = stop.cancelled() => break,
            }
            if self.flush().await.is_err() {
                tracing::warn!("could not write the overview's counters; they are kept for the next try");
            }
        }
        if self.flush().await.is_err() {
            tracing::warn!("could not write the overview's last counts at stop");
        }
    }

    /// The last 24 hours and 30 days as of `now`: what the store holds (every node's flushed counts) plus what
    /// this node has counted and not flushed yet.
    pub async fn series(&self, now: Timestamp) -> Result<Series, Unavailable> {
        let now_ms = now.as_millis();
        let first_hour = Period::Hour.floor(now_ms) - 23 * Period::Hour.millis();
        let first_day = Period::Day.floor(now_ms) - 29 * Period::Day.millis();
        let _flushing = self.flushing.lock().await;
        let store = Arc::clone(&self.store);
        let stored = tokio::task::spawn_blocking(move || store.counts_since(first_hour, first_day))
            .await
            .map_err(|_| Unavailable)?
            .map_err(|_| Unavailable)?;
        let mut rows = stored;
        let pending = self.pending.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
        for ((hour_ms, counter), n) in pending {
            for period in [Period::Hour, Period::Day] {
                rows.push(CountRow { period, kind: counter as u8, start_ms: period.floor(hour_ms), n });
            }
        }
        Ok(Series {
            hours: buckets(&rows, Period::Hour, first_hour, 24),
            days: buckets(&rows, Period::Day, first_day, 30),
        })
    }
}

/// `len` buckets of `period` from `first` on, each with its counts from `rows` (counters this version does not
/// know, written by a newer node, are left out).
fn buckets(rows: &[CountRow], period: Period, first: i64, len: i64) -> Buckets {
    let mut out: Buckets =
        (0..len).map(|i| (Timestamp::from_millis(first + i * period.millis()), [0; Counter::ALL.len()])).collect();
    for row in rows.iter().filter(|r| r.period == period && r.start_ms >= first) {
        let slot = (row.start_ms - first) / period.millis();
        let (Some(counter), Ok(slot)) = (Counter::from_code(row.kind), usize::try_from(slot)) else { continue };
        if let (Some((_, counts)), Some(i)) = (out.get_mut(slot), Counter::ALL.iter().position(|c| *c == counter)) {
            counts[i] = counts[i].saturating_add(row.n);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: i64 = 3_600_000;
    const DAY: i64 = 86_400_000;

    fn at(ms: i64) -> Timestamp {
        Timestamp::from_millis(ms)
    }

    /// Counts land in their hour and their day, flushed or not, and a flush neither loses nor doubles one.
    #[tokio::test]
    async fn counts_are_the_same_before_and_after_a_flush_and_after_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(Store::open(dir.path()).unwrap());
        let (writer, done) = StoreWriter::spawn(Arc::clone(&store)).unwrap();
        let counters = Counters::new(Arc::clone(&store), writer.clone());
        let now = Timestamp::now().as_millis();
        counters.count_at(Counter::SignInSucceeded, at(now), 3);
        counters.count_at(Counter::SignInFailed, at(now - 2 * HOUR), 2);
        counters.count_at(Counter::SignUp, at(now - 3 * DAY), 1);
        counters.count_at(Counter::LockedOut, at(now - 40 * DAY), 7); // older than the 30 days shown
        let before = counters.series(at(now)).await.unwrap();
        assert_eq!(before.hours.len(), 24);
        assert_eq!(before.days.len(), 30);
        assert_eq!(before.hours[23].1, [3, 0, 0, 0, 0]);
        assert_eq!(before.hours[21].1, [0, 2, 0, 0, 0]);
        let today: u64 = before.days[29].1.iter().sum::<u64>() + before.days[28].1.iter().sum::<u64>();
        assert_eq!(today, 5, "the last two days hold the five counts of the last hours");
        assert_eq!(before.days[26].1, [0, 0, 1, 0, 0]);
        counters.flush().await.unwrap();
        assert_eq!(counters.series(at(now)).await.unwrap(), before);
        drop(counters);
        writer.close().await;
        done.wait().await;
        drop(writer);
        drop(store);
        let store = Arc::new(Store::open(dir.path()).unwrap());
        let (writer, _done) = StoreWriter::spawn(Arc::clone(&store)).unwrap();
        let reopened = Counters::new(store, writer);
        assert_eq!(reopened.series(at(now)).await.unwrap(), before);
    }

    /// Two flushes into one bucket add up (as two nodes' do); buckets past their retention are deleted.
    #[tokio::test]
    async fn flushes_add_up_and_old_buckets_are_pruned() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(Store::open(dir.path()).unwrap());
        let (writer, _done) = StoreWriter::spawn(Arc::clone(&store)).unwrap();
        let one = Counters::new(Arc::clone(&store), writer.clone());
        let other = Counters::new(Arc::clone(&store), writer.clone());
        let now = Timestamp::now().as_millis();
        one.count_at(Counter::PasswordReset, at(now), 2);
        other.count_at(Counter::PasswordReset, at(now), 5);
        one.count_at(Counter::SignUp, at(now - 60 * HOUR), 1);
        one.count_at(Counter::SignUp, at(now - 100 * DAY), 1);
        one.flush().await.unwrap();
        other.flush().await.unwrap();
        assert_eq!(one.series(at(now)).await.unwrap().hours[23].1, [0, 0, 0, 0, 7]);
        let rows = store.counts_since(0, 0).unwrap();
        assert!(!rows.iter().any(|r| r.period == Period::Hour && r.start_ms < now - 49 * HOUR), "{rows:?}");
        assert!(!rows.iter().any(|r| r.period == Period::Day && r.start_ms < now - 91 * DAY), "{rows:?}");
        assert!(rows.iter().any(|r| r.period == Period::Day && r.kind == Counter::SignUp as u8), "kept: {rows:?}");
    }

    /// A failed write keeps the counts for the next flush.
    #[tokio::test]
    async fn a_failed_flush_keeps_its_counts() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(Store::open(dir.path()).unwrap());
        let (writer, _done) = StoreWriter::spawn(Arc::clone(&store)).unwrap();
        let counters = Counters::new(Arc::clone(&store), writer);
        let now = Timestamp::now();
        counters.count_at(Counter::SignInFailed, now, 4);
        store.fail_next_commits(1);
        assert!(counters.flush().await.is_err());
        assert!(store.counts_since(0, 0).unwrap().is_empty());
        assert_eq!(counters.series(now).await.unwrap().hours[23].1, [0, 4, 0, 0, 0]);
        counters.flush().await.unwrap();
        assert_eq!(store.counts_since(0, 0).unwrap().len(), 2, "its hour and its day");
        assert_eq!(counters.series(now).await.unwrap().hours[23].1, [0, 4, 0, 0, 0]);
    }
}
