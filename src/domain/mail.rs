use super::{Email, MailId, Timestamp, UserId};

/// What a one-time token is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TokenKind {
    PasswordReset,
    EmailVerification,
}

impl TokenKind {
    pub fn code(self) -> u8 {
        match self {
            Self::PasswordReset => 1,
            Self::EmailVerification => 2,
        }
    }

    pub fn from_code(code: u8) -> Option<Self> {
        match code {
            1 => Some(Self::PasswordReset),
            2 => Some(Self::EmailVerification),
            _ => None,
        }
    }
}

/// A one-time token as the server keeps it: only its hash (the key) and what it allows, for whom, until when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OneTimeToken {
    pub kind: TokenKind,
    pub user_id: UserId,
    pub created_at: Timestamp,
    pub expires_at: Timestamp,
}

impl OneTimeToken {
    pub fn is_expired(&self, now: Timestamp) -> bool {
        self.expires_at <= now
    }
}

/// A message to send, rendered: what the outbox holds until a mail server accepts it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mail {
    pub id: MailId,
    pub to: Email,
    pub subject: String,
    pub text: String,
    pub html: String,
    pub created_at: Timestamp,
}
