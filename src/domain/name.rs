use std::fmt;

/// A display name (of a user or an organization): 1 to 200 characters after trimming, no control characters.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Name(String);

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    #[error("must not be empty")]
    Empty,
    #[error("must be at most 200 characters")]
    TooLong,
    #[error("must not contain control characters")]
    ControlCharacter,
}

impl Name {
    pub const MAX_CHARS: usize = 200;

    pub fn parse(raw: &str) -> Result<Self, NameError> {
        let name = raw.trim();
        if name.is_empty() {
            Err(NameError::Empty)
        } else if name.chars().count() > Self::MAX_CHARS {
            Err(NameError::TooLong)
        } else if name.chars().any(char::is_control) {
            // A newline or NUL in a name ends up in admin screens, CSV exports and log lines.
            Err(NameError::ControlCharacter)
        } else {
            Ok(Self(name.to_owned()))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub(crate) fn from_trusted(s: String) -> Self {
        Self(s)
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trims_and_bounds() {
        assert_eq!(Name::parse("  Ada Lovelace ").unwrap().as_str(), "Ada Lovelace");
        assert_eq!(Name::parse("   "), Err(NameError::Empty));
        assert!(Name::parse(&"é".repeat(200)).is_ok());
        assert_eq!(Name::parse(&"é".repeat(201)), Err(NameError::TooLong));
        assert_eq!(Name::parse("a\u{0}b"), Err(NameError::ControlCharacter));
    }
}
