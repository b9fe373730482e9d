use std::fmt;

use unicode_normalization::UnicodeNormalization;

/// A password as given at sign-up: 8 to 128 Unicode scalar values, NFKC-normalised, never truncated.
///
/// NFKC makes the same password typed on two keyboards (a ligature, a full-width digit, a composed accent) hash
/// the same. Its `Debug` prints nothing of the value, so it cannot end up in a log line by accident.
#[derive(Clone)]
pub struct Password(String);

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PasswordError {
    #[error("Password too short")]
    TooShort,
    #[error("Password too long")]
    TooLong,
}

impl Password {
    pub const MIN_CHARS: usize = 8;
    pub const MAX_CHARS: usize = 128;

    /// For sign-up: both bounds. Lengths count what the user typed, before normalisation.
    pub fn new(raw: &str) -> Result<Self, PasswordError> {
        match raw.chars().count() {
            n if n < Self::MIN_CHARS => Err(PasswordError::TooShort),
            n if n > Self::MAX_CHARS => Err(PasswordError::TooLong),
            _ => Ok(Self(raw.nfkc().collect())),
        }
    }

    /// For sign-in: only the upper bound (a shorter password simply does not match), so that a policy change
    /// never locks out accounts created under the old one.
    pub fn for_sign_in(raw: &str) -> Result<Self, PasswordError> {
        if raw.chars().count() > Self::MAX_CHARS {
            return Err(PasswordError::TooLong);
        }
        Ok(Self(raw.nfkc().collect()))
    }

    /// The normalised bytes to hash.
    pub fn as_bytes(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

impl fmt::Debug for Password {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Password(<redacted>)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_count_scalar_values() {
        assert_eq!(Password::new("1234567").err(), Some(PasswordError::TooShort));
        assert!(Password::new("12345678").is_ok());
        assert!(Password::new(&"🔑".repeat(8)).is_ok());
        assert!(Password::new(&"x".repeat(128)).is_ok());
        assert_eq!(Password::new(&"x".repeat(129)).err(), Some(PasswordError::TooLong));
        assert!(Password::for_sign_in("short").is_ok());
        assert_eq!(Password::for_sign_in(&"x".repeat(129)).err(), Some(PasswordError::TooLong));
    }

    #[test]
    fn normalises_nfkc() {
        let ligatures = Password::new("ﬁﬁﬁﬁﬁﬁﬁﬁ").unwrap();
        let plain = Password::for_sign_in("fifififififififi").unwrap();
        assert_eq!(ligatures.as_bytes(), plain.as_bytes());
    }

    #[test]
    fn debug_hides_the_value() {
        assert_eq!(format!("{:?}", Password::new("hunter2hunter2").unwrap()), "Password(<redacted>)");
    }
}
