use std::fmt;
use std::time::Duration;

use chrono::{DateTime, Datelike, SecondsFormat, Timelike, Utc};

/// A point in time with millisecond precision (what the wire format carries; storing more would make a value
/// read back differ from the value written).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(i64);

impl Timestamp {
    pub fn now() -> Self {
        Self(Utc::now().timestamp_millis())
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

    /// RFC 3339 in UTC with exactly three fractional digits and `Z`: `2026-11-22T09:15:02.123Z`.
    pub fn to_rfc3339(self) -> String {
        DateTime::<Utc>::from_timestamp_millis(self.0)
            .unwrap_or(DateTime::<Utc>::MIN_UTC)
            .to_rfc3339_opts(SecondsFormat::Millis, true)
    }
}

/// The same text as [`Timestamp::to_rfc3339`], written field by field without an intermediate `String`: every
/// get-session answer carries five timestamps, and this is measurably cheaper than chrono's formatter.
impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let t = DateTime::<Utc>::from_timestamp_millis(self.0).unwrap_or(DateTime::<Utc>::MIN_UTC);
        if !(0..=9999).contains(&t.year()) {
            return f.write_str(&self.to_rfc3339());
        }
        write!(
            f,
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
            t.year(),
            t.month(),
            t.day(),
            t.hour(),
            t.minute(),
            t.second(),
            t.timestamp_subsec_millis()
        )
    }
}

impl serde::Serialize for Timestamp {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_matches_chrono_everywhere() {
        for ms in [0, 1, 999, 1_000, 86_399_999, 951_782_400_000, 1_795_338_902_123, 253_402_300_799_999] {
            let t = Timestamp::from_millis(ms);
            assert_eq!(t.to_string(), t.to_rfc3339(), "{ms}");
        }
    }

    #[test]
    fn formats_with_milliseconds_and_z() {
        assert_eq!(Timestamp::from_millis(1_795_338_902_123).to_rfc3339(), "2026-11-22T09:15:02.123Z");
        assert_eq!(Timestamp::from_millis(0).to_rfc3339(), "1970-01-01T00:00:00.000Z");
    }
}
