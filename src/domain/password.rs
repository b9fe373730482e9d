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

    /// For sign-up: both bounds, counted on the normalised form, which is what is hashed and what sign-in
    /// checks, so that any password accepted here is accepted there.
    pub fn new(raw: &str) -> Result<Self, PasswordError> {
        let password = Self::for_sign_in(raw)?;
        if password.0.chars().count() < Self::MIN_CHARS {
            return Err(PasswordError::TooShort);
        }
        Ok(password)
    }

    /// For sign-in: only the upper bound (a shorter password simply does not match), so that a policy change
    /// never locks out accounts created under the old one. The raw length is bounded first so that normalising
    /// an absurd input costs nothing (NFKC expands a character into at most 18).
    pub fn for_sign_in(raw: &str) -> Result<Self, PasswordError> {
        if raw.chars().count() > Self::MAX_CHARS {
            return Err(PasswordError::TooLong);
        }
        let normalised: String = raw.nfkc().collect();
        if normalised.chars().count() > Self::MAX_CHARS {
            return Err(PasswordError::TooLong);
        }
        Ok(Self(normalised))
    }

    /// The normalised bytes to hash.
    pub fn as_bytes(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

/// Whether a stored hash is better-auth's `<salt: 32 hex digits>:<key: 128 hex digits>` (scrypt), kept as it was
/// imported until its owner's next sign-in re-hashes the password with argon2id. An argon2 PHC string starts
/// with `$`, so the two kinds cannot be confused.
pub fn is_legacy_hash(stored: &str) -> bool {
    let hex_digits = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_hexdigit());
    stored.split_once(':').is_some_and(|(salt, key)| hex_digits(salt, 32) && hex_digits(key, 128))
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

    /// U+FDFA normalises to 18 characters: 128 of them passed sign-up (counted before NFKC) and were then refused
    /// at sign-in (counted after). Both count after normalisation now.
    #[test]
    fn length_is_counted_after_normalisation_at_sign_up_and_sign_in() {
        let expanding = "\u{FDFA}".repeat(8);
        assert_eq!(Password::new(&expanding).err(), Some(PasswordError::TooLong));
        assert_eq!(Password::for_sign_in(&expanding).err(), Some(PasswordError::TooLong));
        assert!(Password::new(&"\u{FDFA}".repeat(7)).is_ok(), "7 × 18 = 126 characters");
        assert_eq!(Password::new("ﬁﬁﬁ").err(), Some(PasswordError::TooShort), "three ligatures are six letters");
        assert!(Password::new("ﬁﬁﬁﬁ").is_ok(), "four ligatures are eight letters");
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
