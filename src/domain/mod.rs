//! Validated value types. Each has one constructor that checks it, so a value of these types is valid by
//! construction and nothing downstream re-checks it.

mod agent;
mod audit;
mod ban_reason;
mod email;
mod ids;
mod image_url;
mod mail;
mod membership;
mod name;
mod passkey;
mod password;
mod permissions;
mod role;
mod slug;
pub(crate) mod text;
mod time;
mod token;
pub mod two_factor;

pub use agent::UserAgent;
pub use audit::{ANONYMOUS_ACTIONS, AuditEntry, is_anonymous_action};
pub use ban_reason::{BanReason, BanReasonError};
pub use email::{Email, EmailError};
pub use ids::{AuditId, InvitationId, MailId, MemberId, OrgId, PasskeyId, SessionId, UserId};
pub use image_url::{ImageUrl, ImageUrlError};
pub use mail::{Mail, OneTimeToken, TokenKind, requester};
pub use membership::{Invitation, InvitationStatus, MemberRoles, Membership, OrgRole, RolesError};
pub use name::{Name, NameError};
pub use passkey::{Ceremony, CeremonyKind, Passkey};
pub use password::{HashCost, Password, PasswordError, PasswordHash, argon2_parameters, is_legacy_hash};
pub use permissions::Permissions;
pub use role::{Role, RoleSet};
pub use slug::{Slug, SlugError};
pub use time::Timestamp;
pub use token::{SessionToken, TokenHash};
pub use two_factor::TwoFactor;

/// A user account as the service sees it (the read index holds these behind `Arc`). Its text is in boxed strings,
/// not `String`s: a million accounts are kept in memory, and a box is 8 bytes smaller (no spare capacity).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    pub id: UserId,
    pub name: Name,
    pub email: Email,
    /// Proven by following a link mailed to the address.
    pub email_verified: bool,
    pub image: Option<Box<str>>,
    pub role: Role,
    pub banned: bool,
    pub ban_reason: Option<Box<str>>,
    /// When a ban ends by itself; `None` while it lasts until lifted (or when not banned).
    pub ban_expires: Option<Timestamp>,
    pub organization_id: Option<OrgId>,
    /// argon2id PHC string, or a better-auth scrypt hash kept from an import until the next sign-in replaces it
    /// ([`is_legacy_hash`]). Never serialised into an answer.
    pub password_hash: PasswordHash,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    /// The second factor, once enrolment has started (`enabled` once a first code confirmed it).
    pub two_factor: Option<std::sync::Arc<TwoFactor>>,
}

impl User {
    /// An account for tests: `email`, a plain user named "Test", unverified, created at `at`; change what a test
    /// is about with struct update syntax (`User { role: Role::admin(), ..User::fixture(…) }`).
    #[cfg(test)]
    pub fn fixture(email: &str, at: Timestamp) -> Self {
        Self {
            id: UserId::new(),
            name: Name::parse("Test").unwrap(),
            email: Email::parse(email).unwrap(),
            email_verified: false,
            image: None,
            role: RoleSet::new(&["user".into()], "user").default_role(),
            banned: false,
            ban_reason: None,
            ban_expires: None,
            organization_id: None,
            password_hash: "$argon2id$not-used".into(),
            created_at: at,
            updated_at: at,
            two_factor: None,
        }
    }

    /// Whether this account's authenticator (TOTP) is on: what sign-in asks for after the password, and what
    /// better-auth's `twoFactorEnabled` says. Passkeys, stored apart by the passkey family, are a way in of their
    /// own; the policy counts them too (`Accounts::must_enrol`, the status page's count).
    pub fn has_second_factor(&self) -> bool {
        self.two_factor.as_ref().is_some_and(|t| t.enabled)
    }

    /// Whether the password hash is still one imported from better-auth.
    pub fn has_legacy_hash(&self) -> bool {
        self.password_hash.is_legacy()
    }

    /// An unbanned administrator: the kind the last-admin guard protects. A ban that has run out but is not yet
    /// lifted still counts as a ban here, so the guard errs on the side of keeping an administrator.
    pub fn is_active_admin(&self) -> bool {
        self.role.is_admin() && !self.banned
    }

    /// Whether a ban is in force at `now`: set, and not run out. A ban that has run out stops counting at once,
    /// even before housekeeping lifts it in the store.
    pub fn is_banned_at(&self, now: Timestamp) -> bool {
        self.banned && self.ban_expires.is_none_or(|end| end > now)
    }
}

/// An organization.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Organization {
    pub id: OrgId,
    pub name: Name,
    pub slug: Slug,
    /// better-auth's `logo`: any text the organization's admins set (not fetched, not checked as a URL).
    pub logo: Option<Box<str>>,
    /// better-auth's `metadata`: a JSON object, kept as its serialised text.
    pub metadata: Option<Box<str>>,
    pub created_at: Timestamp,
}

/// A session. The token itself is not kept: the index is keyed by its SHA-256.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    pub id: SessionId,
    pub user_id: UserId,
    pub expires_at: Timestamp,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    /// In place: an IPv4 address and most IPv6 ones fit in the 24 bytes (no allocation of their own).
    pub ip_address: compact_str::CompactString,
    /// Shared with every other session that has the same (see [`UserAgent`]).
    pub user_agent: UserAgent,
    /// `false` for a `rememberMe: false` session: short-lived, cookie without `Max-Age`, never extended.
    pub remember_me: bool,
    /// The administrator acting as the user through this session, if it is an impersonation. Boxed: rare, and 8
    /// bytes instead of 17 keep a session in its allocation size (see the test below).
    pub impersonated_by: Option<Box<UserId>>,
    /// The organization the session works in (better-auth's `activeOrganizationId`, set by
    /// `organization/set-active`). Boxed like `impersonated_by`: most sessions have none.
    pub active_organization: Option<Box<OrgId>>,
}

impl Session {
    pub fn is_expired(&self, now: Timestamp) -> bool {
        self.expires_at <= now
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A million accounts and a million sessions are kept in memory, each in one allocation with the `Arc`'s two
    /// counters: 16 + 184 bytes take glibc's 208-byte chunk (its last 8 bytes are the second factor's pointer,
    /// which filled the chunk's spare room: 200 bytes and glibc's 8-byte header are exactly 208), 16 + 112 a
    /// 144-byte one (the active organization's pointer crossed out of the 128-byte chunk a session had: 16 bytes
    /// more a session, taken for the organizations). A field that makes either
    /// larger costs a million times its size, or more when it crosses into the next chunk: a deliberate choice,
    /// with the start-up and memory benchmark run again (`benches/scale_startup.sh`).
    #[test]
    fn the_kept_shapes_stay_compact() {
        assert!(size_of::<User>() <= 184, "User: {} bytes", size_of::<User>());
        assert!(size_of::<Session>() <= 112, "Session: {} bytes", size_of::<Session>());
    }
}
