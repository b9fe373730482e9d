use super::{Email, MailId, Timestamp, UserId};

/// What a one-time token is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TokenKind {
    PasswordReset,
    EmailVerification,
    /// A sign-in waiting for its second factor (the two-factor cookie), and whether its session is remembered.
    TwoFactorChallenge {
        remember_me: bool,
    },
    /// A device whose second factor was proven, trusted to skip it for 30 days (the trusted-device cookie).
    TrustedDevice,
    /// A code mailed for the second factor (`two-factor/send-otp`), kept as a keyed hash ([`OneTimeToken::code`])
    /// under a key derived from the sign-in's challenge or the session it was sent for.
    TwoFactorOtp,
}

impl TokenKind {
    pub fn code(self) -> u8 {
        match self {
            Self::PasswordReset => 1,
            Self::EmailVerification => 2,
            Self::TwoFactorChallenge { remember_me: true } => 3,
            Self::TwoFactorChallenge { remember_me: false } => 4,
            Self::TrustedDevice => 5,
            Self::TwoFactorOtp => 6,
        }
    }

    /// A link mailed to the account's owner (one live per requesting client), not a cookie's token (one per
    /// browser, as many as there are).
    pub fn is_link(self) -> bool {
        matches!(self, Self::PasswordReset | Self::EmailVerification)
    }

    pub fn from_code(code: u8) -> Option<Self> {
        match code {
            1 => Some(Self::PasswordReset),
            2 => Some(Self::EmailVerification),
            3 => Some(Self::TwoFactorChallenge { remember_me: true }),
            4 => Some(Self::TwoFactorChallenge { remember_me: false }),
            5 => Some(Self::TrustedDevice),
            6 => Some(Self::TwoFactorOtp),
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
    /// The client that asked for it ([`requester`]): a newer request from the same client replaces it, one from
    /// anyone else does not. `None`: unknown (issued before this was recorded); replaced by nobody.
    pub requested_by: Option<[u8; 16]>,
    /// Wrong codes tried against a two-factor challenge or a mailed code (0 for the other kinds).
    pub failures: u32,
    /// A mailed code's keyed hash ([`crate::domain::two_factor::otp_hash`]); `None` for the other kinds.
    pub code: Option<[u8; 32]>,
}

/// Who asked for a link, as the mail limits count clients: an IPv4 address (as IPv4-mapped IPv6), or an IPv6
/// address's /64 (one host usually owns a whole /64). `None` when `ip` is not an address (the command line).
pub fn requester(ip: &str) -> Option<[u8; 16]> {
    let ip: std::net::IpAddr = ip.parse().ok()?;
    Some(match ip {
        std::net::IpAddr::V4(v4) => v4.to_ipv6_mapped().octets(),
        std::net::IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => v4.to_ipv6_mapped().octets(),
            None => (u128::from(v6) & !((1u128 << 64) - 1)).to_be_bytes(),
        },
    })
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
