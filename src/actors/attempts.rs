//! Per-account limit on password guesses, kept inside the users actor so that it is race-free.
//!
//! A sign-in for an existing account first *reserves* an attempt here, then verifies the password, then reports
//! the outcome. Reservations count against the limit while they are in flight, so 200 parallel wrong passwords
//! against one account run at most `max` verifications per window, not 200.
//!
//! # Lockout of somebody else's account
//! Anyone who knows an e-mail can spend its attempts. The damage is bounded: the lock is never permanent, only
//! until the window that holds `max` failures ends (default: 10 failures per 5 minutes, so a sustained attack
//! delays the owner by minutes, not days); a correct password clears the failure count; and the per-address
//! limit caps how many accounts one client can lock this way.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::domain::UserId;

#[derive(Debug)]
pub struct AttemptLimiter {
    max: u32,
    window: Duration,
    entries: HashMap<UserId, Entry>,
    /// Reservations since stale entries were last swept.
    since_sweep: u32,
}

/// Stale entries are swept every this many reservations, so memory follows current attacks.
const SWEEP_EVERY: u32 = 1024;

#[derive(Debug)]
struct Entry {
    window_start: Instant,
    failures: u32,
    in_flight: u32,
}

impl AttemptLimiter {
    pub fn new(max: u32, window: Duration) -> Self {
        Self { max: max.max(1), window, entries: HashMap::new(), since_sweep: 0 }
    }

    /// Reserves one password check for `user`, or says how long until one is allowed.
    pub fn begin(&mut self, user: UserId, now: Instant) -> Result<(), Duration> {
        self.since_sweep += 1;
        if self.since_sweep >= SWEEP_EVERY {
            self.sweep(now);
            self.since_sweep = 0;
        }
        let entry = self.entries.entry(user).or_insert(Entry { window_start: now, failures: 0, in_flight: 0 });
        if now.duration_since(entry.window_start) >= self.window {
            entry.window_start = now;
            entry.failures = 0;
        }
        if entry.failures + entry.in_flight >= self.max {
            return Err((entry.window_start + self.window).saturating_duration_since(now).max(Duration::from_secs(1)));
        }
        entry.in_flight += 1;
        Ok(())
    }

    /// Ends a reservation made by [`begin`](Self::begin). A success clears the account's failures.
    pub fn finish(&mut self, user: UserId, success: bool) {
        let Some(entry) = self.entries.get_mut(&user) else { return };
        entry.in_flight = entry.in_flight.saturating_sub(1);
        if success {
            entry.failures = 0;
        } else {
            entry.failures += 1;
        }
        if entry.failures == 0 && entry.in_flight == 0 {
            self.entries.remove(&user);
        }
    }

    /// Forgets accounts whose window has passed, so the map holds only accounts under attack right now.
    fn sweep(&mut self, now: Instant) {
        let window = self.window;
        self.entries.retain(|_, e| e.in_flight > 0 || now.duration_since(e.window_start) < window);
    }

    #[cfg(test)]
    fn tracked(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_flight_attempts_count_against_the_limit() {
        let mut l = AttemptLimiter::new(3, Duration::from_secs(60));
        let (u, now) = (UserId::new(), Instant::now());
        assert!(l.begin(u, now).is_ok());
        assert!(l.begin(u, now).is_ok());
        assert!(l.begin(u, now).is_ok());
        assert!(l.begin(u, now).is_err(), "three reservations in flight fill the limit");
        l.finish(u, false);
        assert!(l.begin(u, now).is_err(), "a failure keeps its place");
    }

    #[test]
    fn success_clears_and_window_resets() {
        let mut l = AttemptLimiter::new(2, Duration::from_secs(60));
        let (u, now) = (UserId::new(), Instant::now());
        l.begin(u, now).unwrap();
        l.finish(u, false);
        l.begin(u, now).unwrap();
        l.finish(u, true);
        assert_eq!(l.tracked(), 0);
        l.begin(u, now).unwrap();
        l.finish(u, false);
        l.begin(u, now).unwrap();
        l.finish(u, false);
        let wait = l.begin(u, now).unwrap_err();
        assert!(wait <= Duration::from_secs(60) && wait >= Duration::from_secs(59));
        assert!(l.begin(u, now + Duration::from_secs(60)).is_ok());
    }

    #[test]
    fn sweep_forgets_old_windows() {
        let mut l = AttemptLimiter::new(2, Duration::from_secs(60));
        let now = Instant::now();
        l.begin(UserId::new(), now).unwrap();
        let u = UserId::new();
        l.begin(u, now).unwrap();
        l.finish(u, false);
        l.sweep(now + Duration::from_secs(61));
        assert_eq!(l.tracked(), 1, "the in-flight one stays");
    }
}
