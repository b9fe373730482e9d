//! How long a session lives: better-auth's lifetime and sliding refresh (`expiresIn`, `updateAge`), under the two
//! limits NIST SP 800-63B-4 sets for AAL2 (ASVS 7.3.1, 7.3.2): an absolute one from sign-in that no use can pass,
//! and an idle one.
//!
//! Both limits live in the session's one end, `expires_at`, so the session check stays one compare (and the
//! listings, the sweep and the start-up cleanup need nothing new). The idle limit makes the end slide: a use moves
//! it to `idle` from now, never past the cap. A use is written to the store only when it moves the end by at least
//! a step (a quarter of the idle limit, or `update_age` if shorter), not on every request: so the end recorded (the
//! one another node and a restart read) may trail the last use by up to a step, and a session unused may end up to
//! a step before the full idle limit, never after it.

use std::time::Duration;

use super::{Session, Timestamp};

/// How long an impersonation session lasts: an administrator acting as someone else is a temporary state.
pub const IMPERSONATION_LIFETIME: Duration = Duration::from_secs(3600);

/// The `[session]` durations the session's end follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionLimits {
    /// A remembered session's lifetime from its last extension (`expires_in_secs`, better-auth's `expiresIn`).
    pub lifetime: Duration,
    /// A `rememberMe: false` session's lifetime from its start (`short_expires_in_secs`): never extended past it.
    pub short_lifetime: Duration,
    /// A remembered session is extended when that gains it at least this much (`update_age_secs`, better-auth's
    /// `updateAge`).
    pub update_age: Duration,
    /// No session outlives this from its start, however used (`absolute_lifetime_secs`; `None`: no such limit).
    pub absolute: Option<Duration>,
    /// A session unused this long ends (`idle_timeout_secs`; `None`: no such limit).
    pub idle: Option<Duration>,
}

/// What a use of a session finds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Use {
    /// It has ended (its end has passed, or its cap under the limits as they are now).
    Over,
    /// Live, and this use moves its end too little to be written.
    Live,
    /// Live, and this use moves its end by a step or more (or the limits were lowered since it was written): the
    /// caller has the sessions actor write it.
    Due,
}

impl SessionLimits {
    /// The end of a session started at `now`.
    pub fn first_end(&self, now: Timestamp, remember_me: bool, impersonation: bool) -> Timestamp {
        let cap = self.cap(now, remember_me, impersonation);
        self.window(remember_me).map_or(cap, |w| now.plus(w).min(cap))
    }

    /// The end a use of `session` at `now` gives it: as far as one use carries it, never past its cap.
    pub fn renewed_end(&self, session: &Session, now: Timestamp) -> Timestamp {
        let cap = self.cap(session.created_at, session.remember_me, session.impersonated_by().is_some());
        match self.window(session.remember_me) {
            Some(window) => now.plus(window).min(cap),
            None => session.expires_at.min(cap),
        }
    }

    /// What a use of `session` at `now` finds: a few compares, no allocation (the session check's path).
    pub fn check(&self, session: &Session, now: Timestamp) -> Use {
        if session.expires_at <= now {
            return Use::Over;
        }
        let renewed = self.renewed_end(session, now);
        // Only the cap can put the renewed end in the past: a session older than the absolute limit, written
        // before the limit was set or lowered.
        if renewed <= now {
            return Use::Over;
        }
        let step = self.step(session.remember_me);
        // A lowered limit is applied at the next use; within a step, the difference is two nodes' clocks.
        if renewed >= session.expires_at.plus(step) || renewed.plus(step) < session.expires_at {
            Use::Due
        } else {
            Use::Live
        }
    }

    /// The latest end of a session started at `created`, however used.
    fn cap(&self, created: Timestamp, remember_me: bool, impersonation: bool) -> Timestamp {
        let kind = match (remember_me, impersonation) {
            (true, _) => None,
            (false, false) => Some(self.short_lifetime),
            (false, true) => Some(IMPERSONATION_LIFETIME.min(self.short_lifetime)),
        };
        match (kind, self.absolute) {
            (Some(kind), Some(absolute)) => created.plus(kind.min(absolute)),
            (Some(limit), None) | (None, Some(limit)) => created.plus(limit),
            (None, None) => Timestamp::LATEST,
        }
    }

    /// How far from now one use carries a session (`None`: a use does not move its end).
    fn window(&self, remember_me: bool) -> Option<Duration> {
        match (remember_me, self.idle) {
            (true, Some(idle)) => Some(idle.min(self.lifetime)),
            (true, None) => Some(self.lifetime),
            (false, idle) => idle,
        }
    }

    /// The least move of the end that is written.
    fn step(&self, remember_me: bool) -> Duration {
        match (remember_me, self.idle) {
            (true, Some(idle)) => self.update_age.min(idle / 4),
            (false, Some(idle)) => idle / 4,
            (_, None) => self.update_age,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{SessionId, SessionRare, UserId};

    const MIN: Duration = Duration::from_secs(60);
    const HOUR: Duration = Duration::from_secs(3600);
    const DAY: Duration = Duration::from_secs(86_400);

    fn limits(absolute: Option<Duration>, idle: Option<Duration>) -> SessionLimits {
        SessionLimits { lifetime: 7 * DAY, short_lifetime: DAY, update_age: DAY, absolute, idle }
    }

    fn session(created: Timestamp, expires_at: Timestamp, remember_me: bool) -> Session {
        Session {
            id: SessionId::new(),
            user_id: UserId::new(),
            expires_at,
            created_at: created,
            updated_at: created,
            ip_address: Default::default(),
            user_agent: Default::default(),
            remember_me,
            rare: SessionRare::default(),
        }
    }

    fn at(start: Timestamp, d: Duration) -> Timestamp {
        start.plus(d)
    }

    #[test]
    fn without_the_limits_it_is_better_auths_sliding_week() {
        let l = limits(None, None);
        let t0 = Timestamp::from_millis(1_000_000_000_000);
        let end = l.first_end(t0, true, false);
        assert_eq!(end, at(t0, 7 * DAY));
        let s = session(t0, end, true);
        assert_eq!(l.check(&s, at(t0, DAY - MIN)), Use::Live);
        assert_eq!(l.check(&s, at(t0, DAY)), Use::Due, "used a day on: extended (updateAge)");
        assert_eq!(l.renewed_end(&s, at(t0, DAY)), at(t0, 8 * DAY));
        assert_eq!(l.check(&s, at(t0, 7 * DAY)), Use::Over);
        // rememberMe: false never slides.
        let short = session(t0, l.first_end(t0, false, false), false);
        assert_eq!(short.expires_at, at(t0, DAY));
        assert_eq!(l.check(&short, at(t0, DAY - MIN)), Use::Live);
    }

    #[test]
    fn the_absolute_limit_caps_every_extension() {
        let l = limits(Some(DAY), None);
        let t0 = Timestamp::from_millis(1_000_000_000_000);
        let s = session(t0, l.first_end(t0, true, false), true);
        assert_eq!(s.expires_at, at(t0, DAY));
        assert_eq!(l.check(&s, at(t0, DAY - MIN)), Use::Live, "nothing to gain: not written");
        assert_eq!(l.check(&s, at(t0, DAY)), Use::Over);
        // A session written before the limit was set ends by it at once, and one still within it is shortened.
        assert_eq!(l.check(&session(t0, at(t0, 7 * DAY), true), at(t0, DAY + MIN)), Use::Over);
        let old = session(t0, at(t0, 7 * DAY), true);
        assert_eq!(l.check(&old, at(t0, HOUR)), Use::Due);
        assert_eq!(l.renewed_end(&old, at(t0, HOUR)), at(t0, DAY));
        // An impersonation keeps its hour.
        assert_eq!(l.first_end(t0, false, true), at(t0, HOUR));
    }

    #[test]
    fn the_idle_limit_slides_by_steps_within_the_cap() {
        let l = limits(Some(DAY), Some(HOUR));
        let t0 = Timestamp::from_millis(1_000_000_000_000);
        for remember_me in [true, false] {
            let mut s = session(t0, l.first_end(t0, remember_me, false), remember_me);
            assert_eq!(s.expires_at, at(t0, HOUR));
            assert_eq!(l.check(&s, at(t0, 14 * MIN)), Use::Live, "less than a quarter: not written");
            assert_eq!(l.check(&s, at(t0, 15 * MIN)), Use::Due);
            s.expires_at = l.renewed_end(&s, at(t0, 15 * MIN));
            assert_eq!(s.expires_at, at(t0, 75 * MIN));
            assert_eq!(l.check(&s, at(t0, 74 * MIN)), Use::Due);
            assert_eq!(l.check(&s, at(t0, 75 * MIN)), Use::Over, "an hour unused since the use written");
            // Used every half hour, it still ends at the absolute limit.
            let mut used = session(t0, at(t0, HOUR), remember_me);
            let mut t = t0;
            while l.check(&used, t) != Use::Over {
                used.expires_at = l.renewed_end(&used, t);
                t = at(t, 30 * MIN);
            }
            assert_eq!(used.expires_at, at(t0, DAY), "remembered: {remember_me}");
        }
    }
}
