use std::fmt;
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};

/// A point in time with millisecond precision (what the wire format carries; storing more would make a value
/// read back differ from the value written).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(i64);

impl Timestamp {
    pub fn now() -> Self {
        // Straight from the system clock: chrono's `Utc::now` builds a calendar date first, and every session
        // check reads the clock.
        let since_epoch = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
        Self(match since_epoch {
            Ok(d) => i64::try_from(d.as_millis()).unwrap_or(i64::MAX),
            Err(before) => i64::try_from(before.duration().as_millis()).map_or(i64::MIN, |ms| -ms),
        })
    }

    pub const fn from_millis(ms: i64) -> Self {
        Self(ms)
    }

    pub fn as_millis(self) -> i64 {
        self.0
    }

    pub fn plus(self, d: Duration) -> Self {
        Self(self.0.saturating_add(i64::try_from(d.as_millis()).unwrap_or(i64::MAX)))
    }

    /// The last millisecond of 9999: a later time is written `+10000-…` (which the console and better-auth's
    /// clients cannot read), and no real account was created or banned until then.
    pub const LATEST: Self = Self(253_402_300_799_999);

    /// A time a record may hold: of the years 1970–9999 (before 1970 a clock is wrong; after 9999 the text form
    /// breaks). What both importers take, so neither stores a date the API would never write.
    pub fn storable(ms: i64) -> Result<Self, TimeError> {
        if (0..=Self::LATEST.0).contains(&ms) { Ok(Self(ms)) } else { Err(TimeError::OutOfRange) }
    }

    /// An RFC 3339 time (`2026-11-22T09:15:02.123Z`, any offset) of the years 1970–9999 ([`storable`]
    /// (Self::storable)), to the millisecond.
    pub fn parse_rfc3339(text: &str) -> Result<Self, TimeError> {
        let at = DateTime::parse_from_rfc3339(text).map_err(|_| TimeError::NotRfc3339)?;
        Self::storable(at.timestamp_millis())
    }

    /// RFC 3339 in UTC with exactly three fractional digits and `Z`: `2026-11-22T09:15:02.123Z`.
    pub fn to_rfc3339(self) -> String {
        DateTime::<Utc>::from_timestamp_millis(self.0)
            .unwrap_or(DateTime::<Utc>::MIN_UTC)
            .to_rfc3339_opts(SecondsFormat::Millis, true)
    }
}

/// The time the session rules read ([`SessionLimits`](super::SessionLimits): the idle and absolute limits, the
/// fresh window): the system clock, plus an offset that is zero unless a test moved it.
///
/// The offset is the test seam for limits measured in hours: the in-process test harness holds the server's clock
/// (through `store::FaultSwitch`, which only `server::run_with_faults` takes) and moves it forward. Nothing in
/// normal operation holds one: no configuration key, variable or request reaches it. Cloned, it is the same clock
/// (the nodes of one test cluster share one, as machines whose clocks agree).
#[doc(hidden)]
#[derive(Debug, Clone, Default)]
pub struct Clock(std::sync::Arc<std::sync::atomic::AtomicI64>);

impl Clock {
    /// Now, as this clock reads it: one relaxed load on top of [`Timestamp::now`] (the session check's path).
    pub fn now(&self) -> Timestamp {
        let offset = self.0.load(std::sync::atomic::Ordering::Relaxed);
        Timestamp(Timestamp::now().0.saturating_add(offset))
    }

    /// Moves this clock `by` forward (tests only: see the type's documentation).
    pub fn advance(&self, by: Duration) {
        let ms = i64::try_from(by.as_millis()).unwrap_or(i64::MAX);
        self.0.fetch_add(ms, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Why a text or a number is not a time a record may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TimeError {
    #[error("is not an RFC 3339 time (2026-11-22T09:15:02.123Z)")]
    NotRfc3339,
    #[error("is outside the years 1970–9999")]
    OutOfRange,
}

/// Two ASCII digits for each of 0..=99: a timestamp is written two digits at a time from this table, with no
/// division loop and no `core::fmt` machinery. Every get-session answer carries five timestamps; formatting them
/// through `fmt` was 3% of the session check's profile.
const DIGITS: &[u8; 200] = b"\
0001020304050607080910111213141516171819\
2021222324252627282930313233343536373839\
4041424344454647484950515253545556575859\
6061626364656667686970717273747576777879\
8081828384858687888990919293949596979899";

/// Length of `2026-11-22T09:15:02.123Z`.
const RFC3339_LEN: usize = 24;

impl Timestamp {
    /// The text of [`Timestamp::to_rfc3339`] in `buf`, for years 0 to 9999 (everything a clock or a validated
    /// input can give); `None` outside them, where the caller falls back to chrono.
    fn write_rfc3339(self, buf: &mut [u8; RFC3339_LEN]) -> Option<&str> {
        let days = self.0.div_euclid(86_400_000);
        let ms_of_day = self.0.rem_euclid(86_400_000);
        let (year, month, day) = civil_from_days(days);
        if !(0..=9999).contains(&year) {
            return None;
        }
        let (secs, ms) = (ms_of_day / 1000, ms_of_day % 1000);
        let pair = |n: i64| {
            let i = usize::try_from(n).unwrap_or(0) * 2;
            [DIGITS[i], DIGITS[i + 1]]
        };
        buf[0..2].copy_from_slice(&pair(year / 100));
        buf[2..4].copy_from_slice(&pair(year % 100));
        buf[4] = b'-';
        buf[5..7].copy_from_slice(&pair(month));
        buf[7] = b'-';
        buf[8..10].copy_from_slice(&pair(day));
        buf[10] = b'T';
        buf[11..13].copy_from_slice(&pair(secs / 3600));
        buf[13] = b':';
        buf[14..16].copy_from_slice(&pair(secs / 60 % 60));
        buf[16] = b':';
        buf[17..19].copy_from_slice(&pair(secs % 60));
        buf[19] = b'.';
        buf[20] = b'0' + u8::try_from(ms / 100).unwrap_or(0);
        buf[21..23].copy_from_slice(&pair(ms % 100));
        buf[23] = b'Z';
        // Only ASCII digits and separators were written.
        std::str::from_utf8(buf).ok()
    }

    /// Appends the text [`Display`](fmt::Display) writes, as bytes (the session check writes JSON by hand).
    pub fn append_rfc3339(self, out: &mut Vec<u8>) {
        match self.write_rfc3339(&mut [0; RFC3339_LEN]) {
            Some(text) => out.extend_from_slice(text.as_bytes()),
            None => out.extend_from_slice(self.to_rfc3339().as_bytes()),
        }
    }
}

/// Year, month, day of a count of days since 1970-01-01 (proleptic Gregorian): Howard Hinnant's
/// `civil_from_days`, exact for every `i64` day count a millisecond timestamp can reach.
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// The same text as [`Timestamp::to_rfc3339`], without an intermediate `String` (see [`DIGITS`]).
impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.write_rfc3339(&mut [0; RFC3339_LEN]) {
            Some(text) => f.write_str(text),
            None => f.write_str(&self.to_rfc3339()),
        }
    }
}

impl serde::Serialize for Timestamp {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.write_rfc3339(&mut [0; RFC3339_LEN]) {
            Some(text) => s.serialize_str(text),
            None => s.serialize_str(&self.to_rfc3339()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_storable_time_is_of_the_years_1970_to_9999() {
        assert_eq!(Timestamp::parse_rfc3339("1970-01-01T00:00:00Z"), Ok(Timestamp::from_millis(0)));
        assert_eq!(Timestamp::parse_rfc3339("9999-12-31T23:59:59.999Z"), Ok(Timestamp::LATEST));
        assert_eq!(
            Timestamp::parse_rfc3339("2026-11-22T10:15:02.123+01:00").unwrap().to_rfc3339(),
            "2026-11-22T09:15:02.123Z"
        );
        assert_eq!(Timestamp::parse_rfc3339("1969-12-31T23:59:59.999Z"), Err(TimeError::OutOfRange));
        assert_eq!(Timestamp::storable(Timestamp::LATEST.as_millis() + 1), Err(TimeError::OutOfRange));
        for bad in ["", "2026-11-22", "yesterday", "2026-13-01T00:00:00Z"] {
            assert_eq!(Timestamp::parse_rfc3339(bad), Err(TimeError::NotRfc3339), "{bad:?}");
        }
    }

    #[test]
    fn a_clock_reads_the_system_clock_until_moved() {
        let clock = Clock::default();
        let (a, ours, b) = (Timestamp::now(), clock.now(), Timestamp::now());
        assert!(a <= ours && ours <= b);
        clock.clone().advance(Duration::from_secs(3600));
        let moved = clock.now().as_millis() - Timestamp::now().as_millis();
        assert!((3_599_990..=3_600_000).contains(&moved), "{moved}");
    }

    #[test]
    fn now_is_chronos_now() {
        let (a, ours, b) = (Utc::now().timestamp_millis(), Timestamp::now().as_millis(), Utc::now().timestamp_millis());
        assert!((a..=b).contains(&ours), "{a} <= {ours} <= {b}");
    }

    #[test]
    fn display_matches_chrono_everywhere() {
        for ms in [0, 1, 999, 1_000, 86_399_999, 951_782_400_000, 1_795_338_902_123, 253_402_300_799_999] {
            let t = Timestamp::from_millis(ms);
            assert_eq!(t.to_string(), t.to_rfc3339(), "{ms}");
        }
    }

    /// Every day from 1900 to 2199 (the dates a clock gives), every 97th day from year 0 to 9999 (a prime stride
    /// lands on every month, day and leap position), at a varied time of day; then the edges of the range.
    #[test]
    fn digit_table_matches_chrono() {
        const DAY: i64 = 86_400_000;
        let first = -62_167_219_200_000_i64; // 0000-01-01T00:00:00.000Z
        let last = 253_402_300_799_999_i64; // 9999-12-31T23:59:59.999Z
        let (y1900, y2200) = (-2_208_988_800_000_i64, 7_258_118_400_000_i64);
        let near = (y1900..y2200).step_by(DAY as usize);
        let far = (first..=last).step_by(97 * DAY as usize);
        for (step, day) in near.chain(far).enumerate() {
            let t = Timestamp::from_millis(day + (step as i64 * 7_919_993) % DAY);
            assert_eq!(t.to_string(), t.to_rfc3339());
        }
        for ms in [first, first - 1, last, last + 1, i64::MIN, i64::MAX] {
            let t = Timestamp::from_millis(ms);
            assert_eq!(t.to_string(), t.to_rfc3339(), "{ms}");
            assert_eq!(serde_json::to_string(&t).unwrap(), format!("\"{}\"", t.to_rfc3339()));
        }
    }

    #[test]
    fn formats_with_milliseconds_and_z() {
        assert_eq!(Timestamp::from_millis(1_795_338_902_123).to_rfc3339(), "2026-11-22T09:15:02.123Z");
        assert_eq!(Timestamp::from_millis(0).to_rfc3339(), "1970-01-01T00:00:00.000Z");
    }
}
