//! Per-account limit on password guesses, kept inside the users actor so that it is race-free. It is the
//! account's one failure budget: second-factor codes (at sign-in and with a session) and passkey assertions reserve
//! from it too, so no factor gives an attacker guesses of its own.
//!
//! A sign-in first *reserves* an attempt here, then verifies the password, then reports the outcome.
//! Reservations count against the limit while they are in flight, so 200 parallel wrong passwords against one
//! account run at most `max` verifications per window, not 200.
//!
//! # Keyed by the e-mail as typed (normalised), known or not
//! An unknown e-mail is limited exactly like a known one; otherwise "locked" would answer "this account exists".
//!
//! # Nothing outlives the window
//! The HTTP side runs reserve → verify → finish in a task of its own, so a client that disconnects cannot leave a
//! reservation behind. As a second line, reservations older than a whole window stop counting when the window
//! rolls over: no state here can lock an account for longer than one window.
//!
//! # Lockout of somebody else's account
//! Anyone who knows an e-mail can spend its attempts. The damage is bounded: the lock lasts until the window that
//! holds `max` failures ends (default: 10 failures per 5 minutes, so a sustained attack delays the owner by
//! minutes, not days); a correct password clears the failure count; and the per-address limit caps how many
//! accounts one client can lock this way.
//!
//! # A bounded audit trail
//! A flood of failures must not become a flood of rows. Per e-mail and window, the first failure and the moment
//! the lock engages are recorded; failures in between are counted into the lock's row. Across all e-mails at most
//! [`ROWS_PER_MINUTE`] such rows are written per minute; the rest are counted and recorded as one summary row.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::domain::Email;

/// Failure rows written per minute at most, over all e-mails; the excess goes into one summary row.
pub const ROWS_PER_MINUTE: u32 = 60;

#[derive(Debug)]
pub struct AttemptLimiter {
    max: u32,
    window: Duration,
    entries: HashMap<Email, Entry>,
    /// Reservations since stale entries were last swept.
    since_sweep: u32,
    budget: RowBudget,
}

/// Stale entries are swept every this many reservations, so memory follows current attacks.
const SWEEP_EVERY: u32 = 1024;

#[derive(Debug)]
struct Entry {
    window_start: Instant,
    failures: u32,
    in_flight: u32,
    /// When the newest reservation was made: reservations are never older than this.
    newest: Instant,
    /// Whether this window's lock has been recorded already.
    lock_recorded: bool,
}

/// What the audit log should get for one event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Row {
    /// Nothing: counted into a row already written or still to come.
    None,
    /// One row for this event.
    One,
    /// One row for this event, and before it a summary of `n` events not itemised in the minute before.
    WithSummary(u64),
}

/// A refused reservation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Locked {
    pub wait: Duration,
    /// Failures counted in this window so far.
    pub failures: u32,
    pub row: Row,
}

impl AttemptLimiter {
    pub fn new(max: u32, window: Duration) -> Self {
        Self { max: max.max(1), window, entries: HashMap::new(), since_sweep: 0, budget: RowBudget::default() }
    }

    /// Reserves one password check for `email`, or says how long until one is allowed.
    pub fn begin(&mut self, email: &Email, now: Instant) -> Result<(), Locked> {
        self.since_sweep += 1;
        if self.since_sweep >= SWEEP_EVERY {
            self.sweep(now);
            self.since_sweep = 0;
        }
        let window = self.window;
        let entry = match self.entries.get_mut(email) {
            Some(entry) => entry,
            None => self.entries.entry(email.clone()).or_insert(Entry {
                window_start: now,
                failures: 0,
                in_flight: 0,
                newest: now,
                lock_recorded: false,
            }),
        };
        if now.duration_since(entry.window_start) >= window {
            entry.window_start = now;
            entry.failures = 0;
            entry.lock_recorded = false;
            if now.duration_since(entry.newest) >= window {
                // Every reservation still counted is older than a whole window: none of them is really in flight.
                entry.in_flight = 0;
            }
        }
        if entry.failures + entry.in_flight >= self.max {
            let wait = (entry.window_start + window).saturating_duration_since(now).max(Duration::from_secs(1));
            let first = !std::mem::replace(&mut entry.lock_recorded, true);
            let failures = entry.failures;
            let row = if first { self.budget.take(now) } else { Row::None };
            return Err(Locked { wait, failures, row });
        }
        entry.in_flight += 1;
        entry.newest = now;
        Ok(())
    }

    /// Ends a reservation made by [`begin`](Self::begin). `checked: false` means the password was never checked
    /// (the hashing pool was busy): the reservation is released without counting. A success clears the failures.
    /// Returns the audit row a failure deserves.
    pub fn finish(&mut self, email: &Email, checked: bool, success: bool, now: Instant) -> Row {
        let Some(entry) = self.entries.get_mut(email) else {
            return if checked && !success { self.budget.take(now) } else { Row::None };
        };
        entry.in_flight = entry.in_flight.saturating_sub(1);
        let mut row = Row::None;
        if checked && success {
            entry.failures = 0;
            entry.lock_recorded = false;
        } else if checked {
            entry.failures += 1;
            if entry.failures == 1 {
                row = self.budget.take(now);
            }
        }
        if entry.failures == 0 && entry.in_flight == 0 {
            self.entries.remove(email);
        }
        row
    }

    /// Ends a reservation made by [`begin`](Self::begin) that the shared count (several nodes, docs/cluster.md)
    /// refused: released without counting, and the lock recorded as if this node's own count had reached it, once
    /// per e-mail and window, within the same row budget. Returns the audit row the refusal deserves.
    pub fn refused_elsewhere(&mut self, email: &Email, now: Instant) -> Row {
        let Some(entry) = self.entries.get_mut(email) else {
            return self.budget.take(now);
        };
        entry.in_flight = entry.in_flight.saturating_sub(1);
        // The entry stays (until its window passes) to remember that this lock is recorded.
        if std::mem::replace(&mut entry.lock_recorded, true) { Row::None } else { self.budget.take(now) }
    }

    /// Forgets e-mails whose window has passed, so the map holds only e-mails under attack right now.
    fn sweep(&mut self, now: Instant) {
        let window = self.window;
        self.entries
            .retain(|_, e| now.duration_since(e.window_start) < window || now.duration_since(e.newest) < window);
    }

    #[cfg(test)]
    fn tracked(&self) -> usize {
        self.entries.len()
    }
}

/// At most [`ROWS_PER_MINUTE`] rows per minute; the rest are counted, and the count rides on the next row written
/// after the minute (so a flood that stops for good leaves its last minute's count unrecorded, never its rows).
#[derive(Debug, Default)]
struct RowBudget {
    minute_start: Option<Instant>,
    used: u32,
    suppressed: u64,
}

impl RowBudget {
    fn take(&mut self, now: Instant) -> Row {
        let fresh = self.minute_start.is_none_or(|start| now.duration_since(start) >= Duration::from_secs(60));
        if fresh {
            self.minute_start = Some(now);
            self.used = 0;
        }
        if self.used >= ROWS_PER_MINUTE {
            self.suppressed += 1;
            return Row::None;
        }
        self.used += 1;
        match std::mem::take(&mut self.suppressed) {
            0 => Row::One,
            n => Row::WithSummary(n),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn email(n: u32) -> Email {
        Email::parse(&format!("user{n}@example.com")).unwrap()
    }

    #[test]
    fn in_flight_attempts_count_against_the_limit() {
        let mut l = AttemptLimiter::new(3, Duration::from_secs(60));
        let (u, now) = (email(1), Instant::now());
        assert!(l.begin(&u, now).is_ok());
        assert!(l.begin(&u, now).is_ok());
        assert!(l.begin(&u, now).is_ok());
        assert!(l.begin(&u, now).is_err(), "three reservations in flight fill the limit");
        l.finish(&u, true, false, now);
        assert!(l.begin(&u, now).is_err(), "a failure keeps its place");
    }

    #[test]
    fn success_clears_and_window_resets() {
        let mut l = AttemptLimiter::new(2, Duration::from_secs(60));
        let (u, now) = (email(1), Instant::now());
        l.begin(&u, now).unwrap();
        l.finish(&u, true, false, now);
        l.begin(&u, now).unwrap();
        l.finish(&u, true, true, now);
        assert_eq!(l.tracked(), 0);
        l.begin(&u, now).unwrap();
        l.finish(&u, true, false, now);
        l.begin(&u, now).unwrap();
        l.finish(&u, true, false, now);
        let wait = l.begin(&u, now).unwrap_err().wait;
        assert!(wait <= Duration::from_secs(60) && wait >= Duration::from_secs(59));
        assert!(l.begin(&u, now + Duration::from_secs(60)).is_ok());
    }

    /// A lock the shared count reached (several nodes) is recorded once per window, as this node's own would be,
    /// and the refused reservation does not count.
    #[test]
    fn a_lock_reached_elsewhere_is_recorded_once_per_window() {
        let mut l = AttemptLimiter::new(3, Duration::from_secs(60));
        let (u, now) = (email(1), Instant::now());
        l.begin(&u, now).unwrap();
        assert_eq!(l.refused_elsewhere(&u, now), Row::One);
        l.begin(&u, now).unwrap();
        assert_eq!(l.refused_elsewhere(&u, now), Row::None, "one row per lock");
        for _ in 0..3 {
            l.begin(&u, now).unwrap();
        }
        assert_eq!(l.begin(&u, now).unwrap_err().row, Row::None, "this node's own lock is the same lock");
        let later = now + Duration::from_secs(60);
        l.begin(&u, later).unwrap();
        assert_eq!(l.refused_elsewhere(&u, later), Row::One, "a new window's lock");
    }

    #[test]
    fn an_unchecked_attempt_releases_without_counting() {
        let mut l = AttemptLimiter::new(1, Duration::from_secs(60));
        let (u, now) = (email(1), Instant::now());
        l.begin(&u, now).unwrap();
        assert_eq!(l.finish(&u, false, false, now), Row::None);
        assert!(l.begin(&u, now).is_ok());
    }

    /// Reservations that were never finished (the issue: a client closing its socket mid-verify) stop counting
    /// once a whole window has passed since the newest of them.
    #[test]
    fn abandoned_reservations_do_not_outlive_the_window() {
        let mut l = AttemptLimiter::new(3, Duration::from_secs(1));
        let (u, now) = (email(1), Instant::now());
        for _ in 0..3 {
            l.begin(&u, now).unwrap();
        }
        assert!(l.begin(&u, now).is_err());
        assert!(l.begin(&u, now + Duration::from_secs(1)).is_ok(), "locked beyond the window");
    }

    #[test]
    fn sweep_forgets_old_windows() {
        let mut l = AttemptLimiter::new(2, Duration::from_secs(60));
        let now = Instant::now();
        l.begin(&email(1), now).unwrap();
        let u = email(2);
        l.begin(&u, now + Duration::from_secs(30)).unwrap();
        l.finish(&u, true, false, now + Duration::from_secs(30));
        l.sweep(now + Duration::from_secs(61));
        assert_eq!(l.tracked(), 1, "the recent one stays");
    }

    #[test]
    fn one_row_for_the_first_failure_and_one_for_the_lock() {
        let mut l = AttemptLimiter::new(3, Duration::from_secs(60));
        let (u, now) = (email(1), Instant::now());
        let mut rows = Vec::new();
        for _ in 0..3 {
            l.begin(&u, now).unwrap();
            rows.push(l.finish(&u, true, false, now));
        }
        assert_eq!(rows, [Row::One, Row::None, Row::None]);
        let locked = l.begin(&u, now).unwrap_err();
        assert_eq!((locked.failures, locked.row), (3, Row::One));
        assert_eq!(l.begin(&u, now).unwrap_err().row, Row::None, "the lock is recorded once per window");
    }

    #[test]
    fn rows_per_minute_are_capped_and_the_rest_summarised() {
        let mut l = AttemptLimiter::new(3, Duration::from_secs(60));
        let now = Instant::now();
        let mut written = 0;
        for n in 0..1000 {
            let u = email(n);
            l.begin(&u, now).unwrap();
            if l.finish(&u, true, false, now) != Row::None {
                written += 1;
            }
        }
        assert_eq!(written, ROWS_PER_MINUTE);
        let later = now + Duration::from_secs(60);
        let u = email(5000);
        l.begin(&u, later).unwrap();
        assert_eq!(l.finish(&u, true, false, later), Row::WithSummary(1000 - u64::from(ROWS_PER_MINUTE)));
    }
}
