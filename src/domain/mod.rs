//! Validated value types. Each has one constructor that checks it, so a value of these types is valid by
//! construction and nothing downstream re-checks it.

mod account_text;
mod agent;
pub mod api_key;
mod audit;
mod ban_reason;
mod email;
mod ids;
mod image_url;
mod mail;
mod membership;
mod name;
mod org_role;
mod passkey;
mod password;
mod password_policy;
mod permissions;
mod role;
mod role_mapping;
mod session_limits;
mod slug;
mod sso;
mod team;
pub(crate) mod text;
mod time;
mod token;
pub mod two_factor;
mod username;

use account_text::Text;
pub use agent::UserAgent;
pub use api_key::ApiKey;
pub use audit::{ANONYMOUS_ACTIONS, AuditEntry, action, is_anonymous_action};
pub use ban_reason::{BanReason, BanReasonError};
pub use email::{Email, EmailError};
pub use ids::{
    ApiKeyId, AuditId, InvitationId, MailId, MemberId, OrgId, PasskeyId, RoleId, SessionId, TeamId, TeamMemberId,
    UserId,
};
pub use image_url::{ImageUrl, ImageUrlError};
pub use mail::{CodePurpose, LinkAddress, Mail, OneTimeToken, TokenKind, email_code_hash, email_code_key, requester};
pub use membership::{Invitation, InvitationStatus, InvitedTeams, MemberRoles, Membership, OrgRole, RolesError};
pub use name::{Name, NameError};
pub use org_role::{CustomRole, Grants, RoleName, RoleNameError};
pub use passkey::{Ceremony, CeremonyKind, Passkey, cose_key};
pub use password::{HashCost, Password, PasswordError, PasswordHash, StoredHash, argon2_parameters, is_legacy_hash};
pub use password_policy::{
    Context as PasswordContext, PasswordPolicy, PasswordRefused, is_listed, list_key, listed_count,
};
pub use permissions::Permissions;
pub use role::{Role, RoleSet};
pub use role_mapping::{
    DEFAULT_GROUPS_ATTRIBUTES, DEFAULT_GROUPS_CLAIM, GroupRole, MappedRole, RoleMapping, RoleMappingError,
};
pub use session_limits::{IMPERSONATION_LIFETIME, SessionLimits, Use as SessionUse};
pub use slug::{Slug, SlugError};
pub use sso::{
    AssertedMultiFactor, EmailDomain, EmailDomainError, MULTI_FACTOR_CLASSES, SsoProviderId, SsoProviderIdError,
};
pub use team::{Team, TeamMember};
pub use time::{Clock, TimeError, Timestamp};
pub use token::{SessionToken, TokenHash};
pub use two_factor::TwoFactor;
pub use username::{
    DisplayUsernameError, RESERVED as RESERVED_USERNAMES, Username, UsernameError, UsernameRules, display_username,
    skeleton_of as username_skeleton,
};

/// A user account as the service sees it (the read index holds these behind `Arc`).
///
/// Every account is kept in memory (ten million of them on one node), so its shape is compact: its name, e-mail
/// address and password hash in one allocation behind a thin pointer ([`Text`]), the fields most accounts never set (a picture, a ban's
/// reason and end, a second factor) behind one pointer that is empty when none is set ([`Rare`]), its role a
/// number. The fields read as they are stay public; the packed ones are read through methods ([`name`]
/// (Self::name), [`email`](Self::email), [`password_hash`](Self::password_hash), [`image`](Self::image),
/// [`ban_reason`](Self::ban_reason), [`ban_expires`](Self::ban_expires), [`two_factor`](Self::two_factor)).
/// A `User` is made from a [`UserFields`], the plain form of every field, and changed through it
/// ([`with`](Self::with)): accounts are never changed in place.
#[derive(Clone, PartialEq, Eq)]
pub struct User {
    pub id: UserId,
    text: Text,
    /// Proven by following a link mailed to the address.
    pub email_verified: bool,
    pub role: Role,
    pub banned: bool,
    pub organization_id: Option<OrgId>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    rare: Option<Box<Rare>>,
}

/// Every field of a [`User`], plainly: what makes one ([`User::from`]) and what a change edits ([`User::with`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserFields {
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
    /// better-auth's `username` (normalised) and `displayUsername` (as typed), once set.
    pub username: Option<Username>,
    pub display_username: Option<Box<str>>,
}

/// What few accounts have, kept apart so that the others pay one pointer for all of it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Rare {
    image: Option<Box<str>>,
    ban_reason: Option<Box<str>>,
    ban_expires: Option<Timestamp>,
    two_factor: Option<std::sync::Arc<TwoFactor>>,
    username: Option<Username>,
    display_username: Option<Box<str>>,
}

impl From<UserFields> for User {
    fn from(f: UserFields) -> Self {
        let rare = Rare {
            image: f.image,
            ban_reason: f.ban_reason,
            ban_expires: f.ban_expires,
            two_factor: f.two_factor,
            username: f.username,
            display_username: f.display_username,
        };
        Self {
            id: f.id,
            text: Text::new(f.name.as_str(), f.email.as_str(), &f.password_hash),
            email_verified: f.email_verified,
            role: f.role,
            banned: f.banned,
            organization_id: f.organization_id,
            created_at: f.created_at,
            updated_at: f.updated_at,
            rare: (rare != Rare::default()).then(|| Box::new(rare)),
        }
    }
}

impl User {
    /// An account for tests: `email`, a plain user named "Test", unverified, created at `at`; change what a test
    /// is about with [`with`](Self::with) or struct update syntax on the fields
    /// (`UserFields { role: Role::admin(), ..User::fixture(…).fields() }.into()`).
    #[cfg(test)]
    pub fn fixture(email: &str, at: Timestamp) -> Self {
        UserFields {
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
            username: None,
            display_username: None,
        }
        .into()
    }

    /// Every field, plainly (copies of the packed ones).
    pub fn fields(&self) -> UserFields {
        let rare = self.rare.as_deref();
        UserFields {
            id: self.id,
            name: Name::from_trusted(self.name().to_owned()),
            email: self.email_address(),
            email_verified: self.email_verified,
            image: rare.and_then(|r| r.image.clone()),
            role: self.role.clone(),
            banned: self.banned,
            ban_reason: rare.and_then(|r| r.ban_reason.clone()),
            ban_expires: self.ban_expires(),
            organization_id: self.organization_id,
            password_hash: self.password_hash().owned(),
            created_at: self.created_at,
            updated_at: self.updated_at,
            two_factor: rare.and_then(|r| r.two_factor.clone()),
            username: rare.and_then(|r| r.username.clone()),
            display_username: rare.and_then(|r| r.display_username.clone()),
        }
    }

    /// This account with `change` made to its fields: a new value (the kept rendering starts empty).
    pub fn with(&self, change: impl FnOnce(&mut UserFields)) -> Self {
        let mut fields = self.fields();
        change(&mut fields);
        fields.into()
    }

    pub fn name(&self) -> &str {
        self.text.name()
    }

    /// Normalised (trimmed, lower-case).
    pub fn email(&self) -> &str {
        self.text.email()
    }

    /// The address as an [`Email`] of its own (a copy).
    pub fn email_address(&self) -> Email {
        Email::from_trusted(self.email().to_owned())
    }

    /// The address's bytes, as the e-mail order compares them (without a UTF-8 check each time).
    pub(crate) fn email_bytes(&self) -> &[u8] {
        self.text.email_bytes()
    }

    /// argon2id PHC string, or a better-auth scrypt hash kept from an import until the next sign-in replaces it
    /// ([`is_legacy_hash`]). Never serialised into an answer.
    pub fn password_hash(&self) -> StoredHash<'_> {
        self.text.hash()
    }

    pub fn image(&self) -> Option<&str> {
        self.rare.as_deref()?.image.as_deref()
    }

    /// Why the account is banned, as an administrator wrote it.
    pub fn ban_reason(&self) -> Option<&str> {
        self.rare.as_deref()?.ban_reason.as_deref()
    }

    /// When a ban ends by itself; `None` while it lasts until lifted (or when not banned).
    pub fn ban_expires(&self) -> Option<Timestamp> {
        self.rare.as_deref()?.ban_expires
    }

    /// The second factor, once enrolment has started (`enabled` once a first code confirmed it).
    pub fn two_factor(&self) -> Option<&TwoFactor> {
        self.rare.as_deref()?.two_factor.as_deref()
    }

    /// better-auth's `username`, normalised (what sign-in by username compares).
    pub fn username(&self) -> Option<&Username> {
        self.rare.as_deref()?.username.as_ref()
    }

    /// better-auth's `displayUsername`: the username as typed, or as set apart from it.
    pub fn display_username(&self) -> Option<&str> {
        self.rare.as_deref()?.display_username.as_deref()
    }

    /// Whether this account's authenticator (TOTP) is on: what sign-in asks for after the password, and what
    /// better-auth's `twoFactorEnabled` says. Passkeys, stored apart by the passkey family, are a way in of their
    /// own; the policy counts them too (`Accounts::must_enrol`, the status page's count).
    pub fn has_second_factor(&self) -> bool {
        self.two_factor().is_some_and(|t| t.enabled)
    }

    /// Whether the password hash is still one imported from better-auth.
    pub fn has_legacy_hash(&self) -> bool {
        self.password_hash().is_legacy()
    }

    /// An unbanned administrator: the kind the last-admin guard protects. A ban that has run out but is not yet
    /// lifted still counts as a ban here, so the guard errs on the side of keeping an administrator.
    pub fn is_active_admin(&self) -> bool {
        self.role.is_admin() && !self.banned
    }

    /// Whether a ban is in force at `now`: set, and not run out. A ban that has run out stops counting at once,
    /// even before housekeeping lifts it in the store.
    pub fn is_banned_at(&self, now: Timestamp) -> bool {
        self.banned && self.ban_expires().is_none_or(|end| end > now)
    }
}

/// As [`UserFields`] prints it, without the password hash.
impl std::fmt::Debug for User {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("User")
            .field("id", &self.id)
            .field("name", &self.name())
            .field("email", &self.email())
            .field("email_verified", &self.email_verified)
            .field("image", &self.image())
            .field("role", &self.role)
            .field("banned", &self.banned)
            .field("ban_reason", &self.ban_reason())
            .field("ban_expires", &self.ban_expires())
            .field("organization_id", &self.organization_id)
            .field("password_hash", &self.password_hash())
            .field("created_at", &self.created_at)
            .field("updated_at", &self.updated_at)
            .field("two_factor", &self.two_factor())
            .field("username", &self.username())
            .field("display_username", &self.display_username())
            .finish()
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
    /// Its teams (better-auth's `teams`), oldest first: kept in the organization's own record, so the
    /// organizations actor that writes the organization is the one writer of its teams, and a team changes with
    /// the change log, on both backends, like the organization.
    pub teams: Vec<Team>,
    /// The roles it defined (better-auth's `dynamicAccessControl`), oldest first: in its record too, so a role
    /// and the organization change in one commit and travel the change log together.
    pub roles: Vec<CustomRole>,
    /// Whether an address of the verified domains of its single sign-on providers signs in only through them (its
    /// owner's or a service administrator's choice; in its record too, so it travels the change log with it).
    pub require_sso: bool,
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
    /// Who impersonates, and the organization worked in: what few sessions have, behind one pointer for both
    /// (two pointers took a session out of glibc's 128-byte chunk: see the test below). Read through
    /// [`impersonated_by`](Self::impersonated_by) and [`active_organization`](Self::active_organization).
    pub rare: SessionRare,
}

/// A [`Session`]'s rare fields: empty (no allocation) when none is set.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionRare(Option<Box<SessionRareFields>>);

#[derive(Debug, Clone, PartialEq, Eq)]
struct SessionRareFields {
    impersonated_by: Option<UserId>,
    organization: Option<OrgId>,
    team: Option<TeamId>,
}

impl SessionRare {
    /// The administrator acting through the session (an impersonation), and the active organization.
    pub fn new(impersonated_by: Option<UserId>, active_organization: Option<OrgId>) -> Self {
        Self::with_team(impersonated_by, active_organization, None)
    }

    /// [`new`](Self::new), and the active team (one of the active organization's: without an organization there
    /// is no team to work in, so none is kept).
    pub fn with_team(impersonated_by: Option<UserId>, organization: Option<OrgId>, team: Option<TeamId>) -> Self {
        let team = team.filter(|_| organization.is_some());
        // Never a box of `None`s: equal sessions hold equal values.
        Self(
            (impersonated_by.is_some() || organization.is_some())
                .then(|| Box::new(SessionRareFields { impersonated_by, organization, team })),
        )
    }
}

impl Session {
    pub fn is_expired(&self, now: Timestamp) -> bool {
        self.expires_at <= now
    }

    /// The administrator acting as the user through this session, if it is an impersonation.
    pub fn impersonated_by(&self) -> Option<UserId> {
        self.rare.0.as_deref()?.impersonated_by
    }

    /// The organization the session works in (better-auth's `activeOrganizationId`, set by
    /// `organization/set-active`).
    pub fn active_organization(&self) -> Option<OrgId> {
        self.rare.0.as_deref()?.organization
    }

    /// The team of the active organization the session works in (better-auth's `activeTeamId`, set by
    /// `organization/set-active-team`).
    pub fn active_team(&self) -> Option<TeamId> {
        self.rare.0.as_deref()?.team
    }

    /// This session working in `org` (or in none): a new value, the rest unchanged. A team belongs to one
    /// organization, so working in another organization leaves the active team (the plugin keeps it, pointing at a
    /// team of the organization left, which no team call accepts).
    pub fn with_active_organization(&self, org: Option<OrgId>) -> Self {
        let team = self.active_team().filter(|_| org == self.active_organization());
        Self { rare: SessionRare::with_team(self.impersonated_by(), org, team), ..self.clone() }
    }

    /// This session working in `team` of its active organization (or in none), the rest unchanged.
    pub fn with_active_team(&self, team: Option<TeamId>) -> Self {
        let rare = SessionRare::with_team(self.impersonated_by(), self.active_organization(), team);
        Self { rare, ..self.clone() }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    /// Ten million accounts and sessions are kept in memory, each in one allocation with the `Arc`'s two
    /// counters. glibc serves a request of n bytes from a chunk of n + 8 rounded up to 16: 120 bytes from a
    /// 128-byte chunk, 121 to 136 from a 144-byte one. An account: 16 + 72 bytes take a 96-byte chunk (it was
    /// 16 + 168 in a 192-byte one before its text, rare fields and role were packed, and 16 + 80 in a 112-byte one
    /// while its text's pointer carried a length), its text one more. A session:
    /// 16 + 104 a 128-byte chunk (at 16 + 112, with a pointer for each of its two rare fields, it took 144 bytes).
    /// A field that makes either larger costs ten million times its size, or more when it crosses into the next
    /// chunk: a deliberate choice, with the start-up and memory benchmark run again (`benches/scale_startup.sh`).
    #[test]
    fn the_kept_shapes_stay_compact() {
        assert!(size_of::<User>() <= 72, "User: {} bytes", size_of::<User>());
        assert!(size_of::<Session>() <= 104, "Session: {} bytes", size_of::<Session>());
    }

    /// A session's rare fields: nothing allocated when neither is set, and each read back as it was set,
    /// whichever else is set; changing the active organization keeps the impersonation.
    #[test]
    fn a_session_keeps_its_rare_fields_behind_one_pointer() {
        assert_eq!(size_of::<SessionRare>(), 8);
        let (empty, bytes) = crate::alloc_count::bytes_in(|| SessionRare::new(None, None));
        assert_eq!((empty.clone(), bytes), (SessionRare::default(), 0));
        let (admin, org) = (UserId::new(), OrgId::new());
        for (by, active) in [(None, None), (Some(admin), None), (None, Some(org)), (Some(admin), Some(org))] {
            let session = Session {
                id: SessionId::new(),
                user_id: UserId::new(),
                expires_at: Timestamp::from_millis(2),
                created_at: Timestamp::from_millis(1),
                updated_at: Timestamp::from_millis(1),
                ip_address: "192.0.2.1".into(),
                user_agent: "curl".into(),
                remember_me: true,
                rare: SessionRare::new(by, active),
            };
            assert_eq!((session.impersonated_by(), session.active_organization()), (by, active));
            let moved = session.with_active_organization(Some(OrgId::new()));
            assert_eq!(moved.impersonated_by(), by);
            assert_ne!(moved.active_organization(), active);
            let left = moved.with_active_organization(None);
            assert_eq!(left.rare == SessionRare::default(), by.is_none(), "no box of two `None`s");
            assert_eq!(left.with_active_organization(active), session);
            // A team belongs to the active organization: working in another, or in none, leaves it.
            let team = TeamId::new();
            let in_team = moved.with_active_team(Some(team));
            assert_eq!((in_team.active_team(), in_team.impersonated_by()), (Some(team), by));
            assert_eq!(in_team.with_active_organization(in_team.active_organization()).active_team(), Some(team));
            assert_eq!(in_team.with_active_organization(Some(OrgId::new())).active_team(), None);
            assert_eq!(in_team.with_active_organization(None).active_team(), None);
            assert_eq!(left.with_active_team(Some(team)).active_team(), None, "no team without an organization");
            assert_eq!(in_team.with_active_team(None), moved);
        }
    }

    fn seeded(n: usize) -> UserFields {
        UserFields {
            name: Name::parse(&format!("Seed user {n}")).unwrap(),
            email_verified: true,
            password_hash:
                "$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHRzYWx0c2FsdA$aGFzaGhhc2hoYXNoaGFzaGhhc2hoYXNoaGFzaGhhc2g"
                    .into(),
            organization_id: Some(OrgId::new()),
            ..User::fixture(&format!("user{n}@seed.example"), Timestamp::from_millis(1_700_000_000_000)).fields()
        }
    }

    /// What an ordinary account (no picture, ban or second factor) holds, counted with the test allocator: the
    /// `Arc` with the account, and one allocation with its name, address and hash; nothing for the rare fields.
    /// It was five allocations and 16 + 168 + 16 + 23 + 51 = 274 bytes asked for (five chunks of glibc's, 352
    /// bytes); then 16 + 80 + 8 + 16 + 23 + 51 = 194 in two (112 + 112 bytes of chunks); now, the text's lengths
    /// one byte each behind a thin pointer, 16 + 72 + 3 + 16 + 23 + 51 = 181 (96 + 112).
    #[test]
    fn an_ordinary_account_is_two_allocations_of_about_two_hundred_bytes() {
        let fields = seeded(123_456);
        let ((user, allocations), bytes) =
            crate::alloc_count::bytes_in(|| crate::alloc_count::allocations_in(|| Arc::new(User::from(fields))));
        assert_eq!(allocations, 2, "the Arc and the text");
        assert!(bytes <= 16 + 72 + 3 + 16 + 23 + 51, "{bytes} bytes");
        assert!(user.rare.is_none());
        let (plain, picture) = (seeded(7), UserFields { image: Some("https://x.test/a.png".into()), ..seeded(7) });
        let (_, plain) = crate::alloc_count::bytes_in(|| Arc::new(User::from(plain)));
        let (user, picture) = crate::alloc_count::bytes_in(|| Arc::new(User::from(picture)));
        assert!(user.rare.is_some());
        // The picture's own text was allocated before, by the caller.
        assert_eq!(picture - plain, size_of::<Rare>() as i64, "a picture takes the rare fields' box");
    }

    /// Whatever is set, an account gives back every field as it was made, and two accounts are equal exactly when
    /// their fields are.
    #[test]
    fn an_account_gives_back_every_field() {
        let end = Timestamp::from_millis(1_800_000_000_000);
        let factor = Arc::new(TwoFactor {
            sealed_secret: vec![1, 2, 3].into(),
            enabled: true,
            last_step: 9,
            backup_codes: vec![[7; 32]].into(),
        });
        let scrypt = format!("{}:{}", "a1".repeat(16), "0f".repeat(64));
        let variants = [
            seeded(1),
            UserFields { name: Name::parse("Ada 👩\u{200D}💻 Lovelace").unwrap(), ..seeded(2) },
            UserFields { image: Some("https://x.test/a.png".into()), ..seeded(3) },
            UserFields { banned: true, ban_reason: Some("spam".into()), ban_expires: Some(end), ..seeded(4) },
            UserFields { banned: true, ..seeded(5) },
            UserFields { two_factor: Some(Arc::clone(&factor)), ..seeded(6) },
            UserFields { password_hash: scrypt.as_str().into(), ..seeded(7) },
            UserFields { password_hash: "".into(), organization_id: None, role: Role::admin(), ..seeded(8) },
            UserFields { name: Name::parse(&"é".repeat(200)).unwrap(), ..seeded(9) },
        ];
        for fields in &variants {
            let user = User::from(fields.clone());
            assert_eq!(&user.fields(), fields);
            assert_eq!(user.name(), fields.name.as_str());
            assert_eq!(user.email(), fields.email.as_str());
            assert_eq!(user.email_bytes(), fields.email.as_str().as_bytes());
            assert_eq!(user.password_hash().as_phc(), fields.password_hash.as_phc());
            assert_eq!(user.password_hash().owned(), fields.password_hash);
            assert_eq!(user.image(), fields.image.as_deref());
            assert_eq!(user.ban_reason(), fields.ban_reason.as_deref());
            assert_eq!(user.ban_expires(), fields.ban_expires);
            assert_eq!(user.two_factor(), fields.two_factor.as_deref());
            let rare = [fields.image.is_some(), fields.ban_reason.is_some(), fields.ban_expires.is_some()];
            assert_eq!(user.rare.is_some(), rare.contains(&true) || fields.two_factor.is_some());
        }
        for (i, a) in variants.iter().enumerate() {
            for (j, b) in variants.iter().enumerate() {
                assert_eq!(User::from(a.clone()) == User::from(b.clone()), i == j);
            }
        }
        assert!(variants[7].password_hash.as_phc().is_empty());
        assert!(User::from(variants[6].clone()).has_legacy_hash());
        assert!(User::from(variants[5].clone()).has_second_factor());
        assert!(User::from(variants[3].clone()).is_banned_at(Timestamp::from_millis(0)));
        assert!(!User::from(variants[3].clone()).is_banned_at(end));
        assert!(User::from(variants[4].clone()).is_banned_at(end));
    }

    /// A `User` printed for debugging shows its fields but never its password hash.
    #[test]
    fn a_printed_account_hides_its_hash() {
        let user = User::from(seeded(1));
        let printed = format!("{user:?}");
        assert!(printed.contains("user1@seed.example") && printed.contains("Seed user 1"), "{printed}");
        assert!(printed.contains("PasswordHash(<redacted>)"), "{printed}");
        assert!(!printed.contains("c2FsdHNhbHRzYWx0c2FsdA"), "{printed}");
    }
}
