use std::sync::Arc;

use super::{Email, MailId, Name, Timestamp, UserId};

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
    /// A sign-in link (better-auth's `magicLink`): the address it was mailed to is in [`OneTimeToken::address`],
    /// and for an address with no account yet, `user_id` is the id the account gets when the link is followed.
    MagicLink,
    /// A six-digit code mailed for one purpose (better-auth's `emailOTP`), kept as a keyed hash
    /// ([`OneTimeToken::code`]) under a key derived from the purpose and the address ([`email_code_key`]).
    EmailCode(CodePurpose),
}

/// What a mailed code (`emailOTP`'s `type`) proves, and so what it may be used for: a code of one purpose is
/// never accepted for another.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CodePurpose {
    SignIn,
    EmailVerification,
    PasswordReset,
}

impl CodePurpose {
    /// better-auth's name of the type (`sign-in`, `email-verification`, `forget-password`); `change-email` is
    /// not one this server offers.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "sign-in" => Some(Self::SignIn),
            "email-verification" => Some(Self::EmailVerification),
            "forget-password" => Some(Self::PasswordReset),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::SignIn => "sign-in",
            Self::EmailVerification => "email-verification",
            Self::PasswordReset => "forget-password",
        }
    }
}

/// Where a mailed code for `purpose` to `email` is kept: one per purpose and address, so a newer code replaces the
/// older one (better-auth's latest row wins). Neither the address nor the code can be read from the key.
pub fn email_code_key(purpose: CodePurpose, email: &Email) -> [u8; 32] {
    use sha2::{Digest, Sha256};
    let mut hash = Sha256::new();
    hash.update(b"service-auth email code v1:");
    hash.update(purpose.as_str().as_bytes());
    hash.update(b":");
    hash.update(email.as_str().as_bytes());
    hash.finalize().into()
}

/// A mailed code's stored form: HMAC-SHA256 under the data key's MAC key over its key and the code, so a copy of
/// the store cannot be searched for the code (a million candidates) without the data key.
pub fn email_code_hash(mac_key: &[u8; 32], key: &[u8; 32], code: &str) -> [u8; 32] {
    use hmac::{Hmac, Mac};
    let mut mac = <Hmac<sha2::Sha256> as Mac>::new_from_slice(mac_key).expect("HMAC takes any key length");
    mac.update(b"service-auth email code v1:");
    mac.update(key);
    mac.update(code.trim().as_bytes());
    mac.finalize().into_bytes().into()
}

/// The address a sign-in link was mailed to, and the name given with the request (for an account made by it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkAddress {
    pub email: Email,
    pub name: Option<Name>,
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
            Self::MagicLink => 7,
            Self::EmailCode(CodePurpose::SignIn) => 8,
            Self::EmailCode(CodePurpose::EmailVerification) => 9,
            Self::EmailCode(CodePurpose::PasswordReset) => 10,
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
            7 => Some(Self::MagicLink),
            8 => Some(Self::EmailCode(CodePurpose::SignIn)),
            9 => Some(Self::EmailCode(CodePurpose::EmailVerification)),
            10 => Some(Self::EmailCode(CodePurpose::PasswordReset)),
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
    /// A sign-in link's address ([`TokenKind::MagicLink`]); `None` for the other kinds.
    pub address: Option<Arc<LinkAddress>>,
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
