//! Per-address rate limits on sign-in and sign-up (anti-automation).
//!
//! GCRA from `governor`: lock-free and race-free across connections, so parallel requests cannot slip past the
//! limit the way a read-then-write counter lets them. IPv6 clients are keyed by their /64, because one host
//! usually owns a whole /64 and could otherwise rotate through it.

use std::net::IpAddr;
use std::num::NonZeroU32;
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota};

/// Which limit a request counts against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limited {
    SignIn,
    SignUp,
    /// Calls that send mail.
    Mail,
}

pub struct AddressLimits {
    sign_in: Option<DefaultKeyedRateLimiter<IpAddr>>,
    sign_up: Option<DefaultKeyedRateLimiter<IpAddr>>,
    mail: Option<DefaultKeyedRateLimiter<IpAddr>>,
    /// Mail to one e-mail address from one client address. Keyed by both, so that one client spending a
    /// recipient's allowance does not refuse the recipient's own request from elsewhere; what reaches one mailbox
    /// in all is bounded by the sender, which delivers at most this many per window to one recipient whoever
    /// asked (`crate::mail`).
    mail_to: Option<DefaultKeyedRateLimiter<(String, IpAddr)>>,
    clock: DefaultClock,
    /// What the limits were made from: a reload replaces them only when these change.
    quotas: Quotas,
}

/// The numbers a set of limits is made from (see [`AddressLimits::with_mail`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quotas {
    pub sign_in: u32,
    pub sign_up: u32,
    pub mail: u32,
    pub mail_to: u32,
    pub window: Duration,
}

impl AddressLimits {
    /// `max` requests per `window` for each address, with bursts up to `max`; 0 turns a limit off.
    pub fn new(sign_in_max: u32, sign_up_max: u32, window: Duration) -> Self {
        Self::with_mail(sign_in_max, sign_up_max, 0, 0, window)
    }

    /// The numbers these limits were made from.
    pub fn quotas(&self) -> Quotas {
        self.quotas
    }

    /// [`new`](Self::new), with limits on the calls that send mail, per address and per recipient.
    pub fn with_mail(sign_in_max: u32, sign_up_max: u32, mail_max: u32, mail_to_max: u32, window: Duration) -> Self {
        fn limiter<K: std::hash::Hash + Eq + Clone>(max: u32, window: Duration) -> Option<DefaultKeyedRateLimiter<K>> {
            let max = NonZeroU32::new(max)?;
            let quota = Quota::with_period(window / max.get())?.allow_burst(max);
            Some(DefaultKeyedRateLimiter::keyed(quota))
        }
        Self {
            sign_in: limiter(sign_in_max, window),
            sign_up: limiter(sign_up_max, window),
            mail: limiter(mail_max, window),
            mail_to: limiter(mail_to_max, window),
            clock: DefaultClock::default(),
            quotas: Quotas { sign_in: sign_in_max, sign_up: sign_up_max, mail: mail_max, mail_to: mail_to_max, window },
        }
    }

    /// Counts one message to `email` asked for by `ip`; `Err` carries how long to wait.
    pub fn check_recipient(&self, email: &str, ip: IpAddr) -> Result<(), Duration> {
        let Some(limiter) = &self.mail_to else { return Ok(()) };
        let key = (email.to_owned(), key(ip));
        limiter.check_key(&key).map_err(|not_until| not_until.wait_time_from(self.clock.now()))
    }

    /// Counts one request from `ip`; `Err` carries how long the client should wait.
    pub fn check(&self, which: Limited, ip: IpAddr) -> Result<(), Duration> {
        let limiter = match which {
            Limited::SignIn => &self.sign_in,
            Limited::SignUp => &self.sign_up,
            Limited::Mail => &self.mail,
        };
        let Some(limiter) = limiter else { return Ok(()) };
        limiter.check_key(&key(ip)).map_err(|not_until| not_until.wait_time_from(self.clock.now()))
    }

    /// Drops the state of addresses that are back to a full allowance, so memory follows current traffic.
    pub fn sweep(&self) {
        for limiter in [&self.sign_in, &self.sign_up, &self.mail].into_iter().flatten() {
            limiter.retain_recent();
        }
        if let Some(limiter) = &self.mail_to {
            limiter.retain_recent();
        }
    }
}

/// What counts as one client: an IPv4 address, or an IPv6 /64 (one host usually owns a whole /64).
pub(super) fn key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6((u128::from(v6) & !((1u128 << 64) - 1)).into()),
        },
    }
}

/// Whole seconds to wait, rounded up, at least 1: what `Retry-After` carries.
pub fn retry_after_secs(wait: Duration) -> u64 {
    wait.as_secs() + u64::from(wait.subsec_nanos() > 0).max(u64::from(wait.is_zero()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_each_address_separately() {
        let limits = AddressLimits::new(3, 0, Duration::from_secs(60));
        let a: IpAddr = "192.0.2.1".parse().unwrap();
        let b: IpAddr = "192.0.2.2".parse().unwrap();
        for _ in 0..3 {
            assert!(limits.check(Limited::SignIn, a).is_ok());
        }
        let wait = limits.check(Limited::SignIn, a).unwrap_err();
        assert!(wait > Duration::from_secs(10) && wait <= Duration::from_secs(20), "{wait:?}");
        assert!(limits.check(Limited::SignIn, b).is_ok());
        assert!(limits.check(Limited::SignUp, a).is_ok(), "0 turns the sign-up limit off");
    }

    #[test]
    fn ipv6_counts_per_64() {
        let limits = AddressLimits::new(1, 1, Duration::from_secs(60));
        assert!(limits.check(Limited::SignUp, "2001:db8::1".parse().unwrap()).is_ok());
        assert!(limits.check(Limited::SignUp, "2001:db8::2".parse().unwrap()).is_err());
        assert!(limits.check(Limited::SignUp, "2001:db8:0:1::1".parse().unwrap()).is_ok());
    }

    #[test]
    fn retry_after_rounds_up() {
        assert_eq!(retry_after_secs(Duration::from_millis(1)), 1);
        assert_eq!(retry_after_secs(Duration::from_secs(5)), 5);
        assert_eq!(retry_after_secs(Duration::from_millis(5001)), 6);
        assert_eq!(retry_after_secs(Duration::ZERO), 1);
    }
}
