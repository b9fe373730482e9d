use std::fmt;

use super::text::{Refused, refused};

/// Why an account is banned, as an administrator wrote it: 1 to [`MAX_CHARS`](Self::MAX_CHARS) characters after
/// trimming, no control, separator or bidirectional character ([`super::text`]). `ban-user`, the admin
/// plugin's `update-user`, `PATCH /api/admin/users` and `import-better-auth` all take it through [`parse`]
/// (Self::parse), so the store never holds another kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BanReason(Box<str>);

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum BanReasonError {
    #[error("banReason must be at most 500 characters")]
    TooLong,
    #[error("banReason must not contain control characters or line separators")]
    ControlCharacter,
    #[error("banReason must not contain bidirectional control characters")]
    Bidi,
}

impl BanReason {
    pub const MAX_CHARS: usize = 500;

    /// `None` for a reason that is blank once trimmed (no reason given).
    pub fn parse(raw: &str) -> Result<Option<Self>, BanReasonError> {
        let reason = raw.trim();
        if reason.is_empty() {
            return Ok(None);
        }
        // Counted without walking more of an absurd input than the bound needs.
        if reason.chars().nth(Self::MAX_CHARS).is_some() {
            return Err(BanReasonError::TooLong);
        }
        match refused(reason) {
            Some(Refused::Control) => Err(BanReasonError::ControlCharacter),
            Some(Refused::Bidi) => Err(BanReasonError::Bidi),
            None => Ok(Some(Self(reason.into()))),
        }
    }

    /// What `ban-user` records when no reason is given (as the admin plugin does).
    pub fn unspecified() -> Self {
        Self("No reason".into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl From<BanReason> for Box<str> {
    fn from(reason: BanReason) -> Self {
        reason.0
    }
}

impl fmt::Display for BanReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trims_bounds_and_refuses_what_text_refuses() {
        assert_eq!(BanReason::parse("  spam ").unwrap().unwrap().as_str(), "spam");
        assert_eq!(BanReason::parse(" \t "), Ok(None));
        assert!(BanReason::parse(&"é".repeat(500)).unwrap().is_some());
        assert_eq!(BanReason::parse(&"é".repeat(501)), Err(BanReasonError::TooLong));
        assert_eq!(BanReason::parse("a\u{202E}gnp.exe\u{7}\u{1b}[31m"), Err(BanReasonError::Bidi));
        assert_eq!(BanReason::parse("gnp.exe\u{7}\u{1b}[31m"), Err(BanReasonError::ControlCharacter));
        assert_eq!(BanReason::parse("first\nsecond"), Err(BanReasonError::ControlCharacter));
    }
}
