//! Persisted record formats.
//!
//! These structs are the on-disk format, kept apart from the domain types so that a change to a domain type cannot
//! silently change what is written. Each value is framed as `[format version: u8][postcard bytes]`; a new field
//! means a new `…V2` struct and a new version byte, and the loader keeps reading `V1`. The golden-bytes tests at the
//! bottom pin every record's encoding: if one fails, you changed the format; add a version instead.

use serde::{Deserialize, Serialize};

/// A user account. Key: the 16 bytes of the user's UUID.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserRecordV1 {
    pub id: [u8; 16],
    pub name: String,
    /// Normalised (trimmed, lower-case).
    pub email: String,
    pub image: Option<String>,
    pub role: String,
    pub banned: bool,
    pub ban_reason: Option<String>,
    pub organization_id: Option<[u8; 16]>,
    /// argon2id PHC string.
    pub password_hash: String,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
}

/// A user account, second format: [`UserRecordV1`] and whether the e-mail address is verified. Accounts written
/// in the first format are read as unverified.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserRecordV2 {
    pub id: [u8; 16],
    pub name: String,
    /// Normalised (trimmed, lower-case).
    pub email: String,
    pub image: Option<String>,
    pub role: String,
    pub banned: bool,
    pub ban_reason: Option<String>,
    pub organization_id: Option<[u8; 16]>,
    /// argon2id PHC string.
    pub password_hash: String,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
    pub email_verified: bool,
}

impl From<UserRecordV1> for UserRecordV2 {
    fn from(r: UserRecordV1) -> Self {
        Self {
            id: r.id,
            name: r.name,
            email: r.email,
            image: r.image,
            role: r.role,
            banned: r.banned,
            ban_reason: r.ban_reason,
            organization_id: r.organization_id,
            password_hash: r.password_hash,
            created_at_ms: r.created_at_ms,
            updated_at_ms: r.updated_at_ms,
            email_verified: false,
        }
    }
}

/// A user account, third format: [`UserRecordV2`] and when a ban ends by itself (`None`: when lifted). Accounts
/// written in earlier formats are read with bans that last until lifted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserRecordV3 {
    pub id: [u8; 16],
    pub name: String,
    /// Normalised (trimmed, lower-case).
    pub email: String,
    pub image: Option<String>,
    pub role: String,
    pub banned: bool,
    pub ban_reason: Option<String>,
    pub organization_id: Option<[u8; 16]>,
    /// argon2id PHC string, or a better-auth scrypt hash (`saltHex:keyHex`) kept from an import until the next
    /// sign-in replaces it.
    pub password_hash: String,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
    pub email_verified: bool,
    pub ban_expires_ms: Option<i64>,
}

impl From<UserRecordV2> for UserRecordV3 {
    fn from(r: UserRecordV2) -> Self {
        Self {
            id: r.id,
            name: r.name,
            email: r.email,
            image: r.image,
            role: r.role,
            banned: r.banned,
            ban_reason: r.ban_reason,
            organization_id: r.organization_id,
            password_hash: r.password_hash,
            created_at_ms: r.created_at_ms,
            updated_at_ms: r.updated_at_ms,
            email_verified: r.email_verified,
            ban_expires_ms: None,
        }
    }
}

/// An account's second factor, inside its user record (so that it is written, replicated and guarded with the
/// account, in one record: a code accepted once on one node is refused on the others by the same check that keeps
/// two nodes from undoing each other's change to an account).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TwoFactorRecordV1 {
    /// The TOTP key sealed with the data key (`data_key.rs`): version, nonce, ciphertext and tag.
    pub sealed_secret: Vec<u8>,
    /// Confirmed by a first code: sign-in asks for the second factor.
    pub enabled: bool,
    /// The last TOTP time step accepted (a code is accepted once).
    pub last_step: u64,
    /// Keyed hashes (HMAC-SHA256) of the unused backup codes.
    pub backup_codes: Vec<[u8; 32]>,
}

/// A user account, fourth format: [`UserRecordV3`] and its second factor. Accounts written in earlier formats are
/// read without one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserRecordV4 {
    pub id: [u8; 16],
    pub name: String,
    /// Normalised (trimmed, lower-case).
    pub email: String,
    pub image: Option<String>,
    pub role: String,
    pub banned: bool,
    pub ban_reason: Option<String>,
    pub organization_id: Option<[u8; 16]>,
    /// argon2id PHC string, or a better-auth scrypt hash (`saltHex:keyHex`) kept from an import until the next
    /// sign-in replaces it.
    pub password_hash: String,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
    pub email_verified: bool,
    pub ban_expires_ms: Option<i64>,
    pub two_factor: Option<TwoFactorRecordV1>,
}

impl From<UserRecordV3> for UserRecordV4 {
    fn from(r: UserRecordV3) -> Self {
        Self {
            id: r.id,
            name: r.name,
            email: r.email,
            image: r.image,
            role: r.role,
            banned: r.banned,
            ban_reason: r.ban_reason,
            organization_id: r.organization_id,
            password_hash: r.password_hash,
            created_at_ms: r.created_at_ms,
            updated_at_ms: r.updated_at_ms,
            email_verified: r.email_verified,
            ban_expires_ms: r.ban_expires_ms,
            two_factor: None,
        }
    }
}

/// A user account, fifth format: [`UserRecordV4`] and better-auth's `username` (normalised) and
/// `displayUsername`. Only an account with either is written so ([`crate::store::codec`]): the others keep the
/// fourth format's bytes, which an older node reads. Accounts written in earlier formats are read without them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserRecordV5 {
    pub id: [u8; 16],
    pub name: String,
    /// Normalised (trimmed, lower-case).
    pub email: String,
    pub image: Option<String>,
    pub role: String,
    pub banned: bool,
    pub ban_reason: Option<String>,
    pub organization_id: Option<[u8; 16]>,
    /// argon2id PHC string, or a better-auth scrypt hash (`saltHex:keyHex`) kept from an import until the next
    /// sign-in replaces it.
    pub password_hash: String,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
    pub email_verified: bool,
    pub ban_expires_ms: Option<i64>,
    pub two_factor: Option<TwoFactorRecordV1>,
    /// Normalised (NFKC, lower-case); unique.
    pub username: Option<String>,
    pub display_username: Option<String>,
}

impl From<UserRecordV4> for UserRecordV5 {
    fn from(r: UserRecordV4) -> Self {
        Self {
            id: r.id,
            name: r.name,
            email: r.email,
            image: r.image,
            role: r.role,
            banned: r.banned,
            ban_reason: r.ban_reason,
            organization_id: r.organization_id,
            password_hash: r.password_hash,
            created_at_ms: r.created_at_ms,
            updated_at_ms: r.updated_at_ms,
            email_verified: r.email_verified,
            ban_expires_ms: r.ban_expires_ms,
            two_factor: r.two_factor,
            username: None,
            display_username: None,
        }
    }
}

/// The user record format written today (the fourth's bytes for an account without a username).
pub type UserRecord = UserRecordV5;

/// An organization. Key: the 16 bytes of its UUID.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrgRecordV1 {
    pub id: [u8; 16],
    pub name: String,
    pub slug: String,
    pub created_at_ms: i64,
}

/// An organization, second format: [`OrgRecordV1`] and better-auth's `logo` and `metadata` (JSON text).
/// Organizations written in the first format have neither.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrgRecordV2 {
    pub id: [u8; 16],
    pub name: String,
    pub slug: String,
    pub created_at_ms: i64,
    pub logo: Option<String>,
    pub metadata: Option<String>,
}

impl From<OrgRecordV1> for OrgRecordV2 {
    fn from(r: OrgRecordV1) -> Self {
        Self { id: r.id, name: r.name, slug: r.slug, created_at_ms: r.created_at_ms, logo: None, metadata: None }
    }
}

/// An organization, third format: [`OrgRecordV2`] and its teams with their members. Written only for an
/// organization that has teams (`codec::encode_org`); one without any is still written as [`OrgRecordV2`], the
/// format the previous release reads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrgRecordV3 {
    pub id: [u8; 16],
    pub name: String,
    pub slug: String,
    pub created_at_ms: i64,
    pub logo: Option<String>,
    pub metadata: Option<String>,
    pub teams: Vec<TeamRecordV1>,
}

/// A team inside [`OrgRecordV3`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TeamRecordV1 {
    pub id: [u8; 16],
    pub name: String,
    pub created_at_ms: i64,
    pub updated_at_ms: Option<i64>,
    pub members: Vec<TeamMemberRecordV1>,
}

/// A user's place in a team (its id is derived from the team and the user, so it is not stored).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TeamMemberRecordV1 {
    pub user: [u8; 16],
    pub created_at_ms: i64,
}

impl From<OrgRecordV2> for OrgRecordV3 {
    fn from(r: OrgRecordV2) -> Self {
        Self {
            id: r.id,
            name: r.name,
            slug: r.slug,
            created_at_ms: r.created_at_ms,
            logo: r.logo,
            metadata: r.metadata,
            teams: Vec::new(),
        }
    }
}

impl From<OrgRecordV1> for OrgRecordV3 {
    fn from(r: OrgRecordV1) -> Self {
        OrgRecordV2::from(r).into()
    }
}

impl OrgRecordV3 {
    /// The second format, if nothing of the third is set (no teams).
    pub fn as_v2(&self) -> Option<OrgRecordV2> {
        self.teams.is_empty().then(|| OrgRecordV2 {
            id: self.id,
            name: self.name.clone(),
            slug: self.slug.clone(),
            created_at_ms: self.created_at_ms,
            logo: self.logo.clone(),
            metadata: self.metadata.clone(),
        })
    }
}

/// An organization, fourth format: [`OrgRecordV3`] and the roles it defined (`dynamicAccessControl`). Written only
/// for an organization that has such roles (`codec::encode_org`); one without is written as before.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrgRecordV4 {
    pub id: [u8; 16],
    pub name: String,
    pub slug: String,
    pub created_at_ms: i64,
    pub logo: Option<String>,
    pub metadata: Option<String>,
    pub teams: Vec<TeamRecordV1>,
    pub roles: Vec<OrgRoleRecordV1>,
}

/// A role inside [`OrgRecordV4`]: its name and the actions it grants per resource.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrgRoleRecordV1 {
    pub id: [u8; 16],
    pub name: String,
    pub grants: Vec<(String, Vec<String>)>,
    pub created_at_ms: i64,
    pub updated_at_ms: Option<i64>,
}

impl From<OrgRecordV3> for OrgRecordV4 {
    fn from(r: OrgRecordV3) -> Self {
        Self {
            id: r.id,
            name: r.name,
            slug: r.slug,
            created_at_ms: r.created_at_ms,
            logo: r.logo,
            metadata: r.metadata,
            teams: r.teams,
            roles: Vec::new(),
        }
    }
}

impl From<OrgRecordV2> for OrgRecordV4 {
    fn from(r: OrgRecordV2) -> Self {
        OrgRecordV3::from(r).into()
    }
}

impl From<OrgRecordV1> for OrgRecordV4 {
    fn from(r: OrgRecordV1) -> Self {
        OrgRecordV3::from(r).into()
    }
}

impl OrgRecordV4 {
    /// The third format, if no role is defined.
    pub fn as_v3(&self) -> Option<OrgRecordV3> {
        self.roles.is_empty().then(|| OrgRecordV3 {
            id: self.id,
            name: self.name.clone(),
            slug: self.slug.clone(),
            created_at_ms: self.created_at_ms,
            logo: self.logo.clone(),
            metadata: self.metadata.clone(),
            teams: self.teams.clone(),
        })
    }
}

/// An organization, fifth format: [`OrgRecordV4`] and its single sign-on policy. Written only for an organization
/// that requires single sign-on for its verified domains (`codec::encode_org`); one that does not is written as
/// before, so nothing changes for an older node until an owner turns the policy on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrgRecordV5 {
    pub id: [u8; 16],
    pub name: String,
    pub slug: String,
    pub created_at_ms: i64,
    pub logo: Option<String>,
    pub metadata: Option<String>,
    pub teams: Vec<TeamRecordV1>,
    pub roles: Vec<OrgRoleRecordV1>,
    /// Whether an address of the verified domains of its single sign-on providers signs in only through them.
    pub require_sso: bool,
}

impl From<OrgRecordV4> for OrgRecordV5 {
    fn from(r: OrgRecordV4) -> Self {
        Self {
            id: r.id,
            name: r.name,
            slug: r.slug,
            created_at_ms: r.created_at_ms,
            logo: r.logo,
            metadata: r.metadata,
            teams: r.teams,
            roles: r.roles,
            require_sso: false,
        }
    }
}

impl From<OrgRecordV3> for OrgRecordV5 {
    fn from(r: OrgRecordV3) -> Self {
        OrgRecordV4::from(r).into()
    }
}

impl From<OrgRecordV2> for OrgRecordV5 {
    fn from(r: OrgRecordV2) -> Self {
        OrgRecordV4::from(r).into()
    }
}

impl From<OrgRecordV1> for OrgRecordV5 {
    fn from(r: OrgRecordV1) -> Self {
        OrgRecordV4::from(r).into()
    }
}

impl OrgRecordV5 {
    /// The fourth format, if single sign-on is not required.
    pub fn as_v4(&self) -> Option<OrgRecordV4> {
        (!self.require_sso).then(|| OrgRecordV4 {
            id: self.id,
            name: self.name.clone(),
            slug: self.slug.clone(),
            created_at_ms: self.created_at_ms,
            logo: self.logo.clone(),
            metadata: self.metadata.clone(),
            teams: self.teams.clone(),
            roles: self.roles.clone(),
        })
    }
}

/// The organization record format of this release (written as [`OrgRecordV2`], [`OrgRecordV3`] or
/// [`OrgRecordV4`] when it needs nothing of the later ones: no single sign-on policy, no roles of its own, no teams).
pub type OrgRecord = OrgRecordV5;

/// A user's membership of an organization. Key: organization id ‖ user id (one per pair, and an organization's
/// members are neighbours). The id is derived from the pair (`MemberId::of`), so it is not stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MembershipRecordV1 {
    pub org: [u8; 16],
    pub user: [u8; 16],
    /// Bits: 1 owner, 2 admin, 4 member.
    pub roles: u8,
    pub created_at_ms: i64,
}

/// A membership, second format: [`MembershipRecordV1`] and the names of the organization's own roles the member
/// holds (`dynamicAccessControl`). A membership without any is written in the first format (the second's bytes
/// without the trailing empty list), which the previous release reads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MembershipRecordV2 {
    pub org: [u8; 16],
    pub user: [u8; 16],
    /// Bits: 1 owner, 2 admin, 4 member.
    pub roles: u8,
    pub created_at_ms: i64,
    pub custom: Vec<String>,
}

impl From<MembershipRecordV1> for MembershipRecordV2 {
    fn from(r: MembershipRecordV1) -> Self {
        Self { org: r.org, user: r.user, roles: r.roles, created_at_ms: r.created_at_ms, custom: Vec::new() }
    }
}

/// The membership record format of this release.
pub type MembershipRecord = MembershipRecordV2;

/// An invitation into an organization. Key: its id (random: it is what the mailed link carries).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InvitationRecordV1 {
    pub id: [u8; 16],
    pub org: [u8; 16],
    /// Normalised (trimmed, lower-case).
    pub email: String,
    /// Bits as in [`MembershipRecordV1::roles`].
    pub roles: u8,
    pub inviter: [u8; 16],
    /// 0 pending, 1 accepted, 2 rejected, 3 canceled.
    pub status: u8,
    pub expires_at_ms: i64,
    pub created_at_ms: i64,
}

/// An invitation, second format: [`InvitationRecordV1`] and the teams it puts its invitee in (the organization
/// plugin's `teamId`, with teams on), in the order given. Invitations written in the first format name no team.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InvitationRecordV2 {
    pub id: [u8; 16],
    pub org: [u8; 16],
    /// Normalised (trimmed, lower-case).
    pub email: String,
    /// Bits as in [`MembershipRecordV1::roles`].
    pub roles: u8,
    pub inviter: [u8; 16],
    /// 0 pending, 1 accepted, 2 rejected, 3 canceled.
    pub status: u8,
    pub expires_at_ms: i64,
    pub created_at_ms: i64,
    pub teams: Vec<[u8; 16]>,
}

impl From<InvitationRecordV1> for InvitationRecordV2 {
    fn from(r: InvitationRecordV1) -> Self {
        Self {
            id: r.id,
            org: r.org,
            email: r.email,
            roles: r.roles,
            inviter: r.inviter,
            status: r.status,
            expires_at_ms: r.expires_at_ms,
            created_at_ms: r.created_at_ms,
            teams: Vec::new(),
        }
    }
}

/// The invitation record format of this release (written as [`InvitationRecordV1`] when it names no team).
pub type InvitationRecord = InvitationRecordV2;

/// A session. Key: SHA-256 of the session token, so a copied data directory yields no usable cookie.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionRecordV1 {
    pub id: [u8; 16],
    pub user_id: [u8; 16],
    pub expires_at_ms: i64,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
    pub ip_address: String,
    pub user_agent: String,
    /// `false` for a `rememberMe: false` session: short-lived and never extended.
    pub remember_me: bool,
}

/// A session, second format: [`SessionRecordV1`] and the administrator impersonating the user through it, if any.
/// Sessions written in the first format are the user's own.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionRecordV2 {
    pub id: [u8; 16],
    pub user_id: [u8; 16],
    pub expires_at_ms: i64,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
    pub ip_address: String,
    pub user_agent: String,
    pub remember_me: bool,
    pub impersonated_by: Option<[u8; 16]>,
}

impl From<SessionRecordV1> for SessionRecordV2 {
    fn from(r: SessionRecordV1) -> Self {
        Self {
            id: r.id,
            user_id: r.user_id,
            expires_at_ms: r.expires_at_ms,
            created_at_ms: r.created_at_ms,
            updated_at_ms: r.updated_at_ms,
            ip_address: r.ip_address,
            user_agent: r.user_agent,
            remember_me: r.remember_me,
            impersonated_by: None,
        }
    }
}

/// A session, third format: [`SessionRecordV2`] and its active organization (better-auth's
/// `activeOrganizationId`). Sessions written in earlier formats have none.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionRecordV3 {
    pub id: [u8; 16],
    pub user_id: [u8; 16],
    pub expires_at_ms: i64,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
    pub ip_address: String,
    pub user_agent: String,
    pub remember_me: bool,
    pub impersonated_by: Option<[u8; 16]>,
    pub active_organization: Option<[u8; 16]>,
}

impl From<SessionRecordV2> for SessionRecordV3 {
    fn from(r: SessionRecordV2) -> Self {
        Self {
            id: r.id,
            user_id: r.user_id,
            expires_at_ms: r.expires_at_ms,
            created_at_ms: r.created_at_ms,
            updated_at_ms: r.updated_at_ms,
            ip_address: r.ip_address,
            user_agent: r.user_agent,
            remember_me: r.remember_me,
            impersonated_by: r.impersonated_by,
            active_organization: None,
        }
    }
}

/// A session, fourth format: [`SessionRecordV3`] and its active team (better-auth's `activeTeamId`). Sessions
/// written in earlier formats have none; a session without one is still written in the third (see its
/// `Versioned::framed`), so only sessions working in a team need every node upgraded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionRecordV4 {
    pub id: [u8; 16],
    pub user_id: [u8; 16],
    pub expires_at_ms: i64,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
    pub ip_address: String,
    pub user_agent: String,
    pub remember_me: bool,
    pub impersonated_by: Option<[u8; 16]>,
    pub active_organization: Option<[u8; 16]>,
    pub active_team: Option<[u8; 16]>,
}

impl From<SessionRecordV3> for SessionRecordV4 {
    fn from(r: SessionRecordV3) -> Self {
        Self {
            id: r.id,
            user_id: r.user_id,
            expires_at_ms: r.expires_at_ms,
            created_at_ms: r.created_at_ms,
            updated_at_ms: r.updated_at_ms,
            ip_address: r.ip_address,
            user_agent: r.user_agent,
            remember_me: r.remember_me,
            impersonated_by: r.impersonated_by,
            active_organization: r.active_organization,
            active_team: None,
        }
    }
}

impl From<SessionRecordV2> for SessionRecordV4 {
    fn from(r: SessionRecordV2) -> Self {
        SessionRecordV3::from(r).into()
    }
}

/// The session record format written today.
pub type SessionRecord = SessionRecordV4;

/// One audit entry: an admin change or a sign-in outcome. Key: its UUID v7 (time-ordered), so the table reads
/// newest first by iterating backwards. Never holds a secret: no password, token or hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditRecordV1 {
    pub id: [u8; 16],
    pub at_ms: i64,
    /// What happened, e.g. `user.role_changed`, `sign_in.failed`.
    pub action: String,
    /// Who did it: the administrator, or the account signing in.
    pub actor: Option<[u8; 16]>,
    /// What it was done to: a user or an organization.
    pub target: Option<[u8; 16]>,
    /// The client address the request came from.
    pub ip_address: String,
    /// Short human-readable detail, e.g. `qa_manager -> admin`.
    pub detail: String,
}

/// A one-time token (a password reset). Key: SHA-256 of the token, so a copied data directory holds no usable
/// link. Single use: deleted when used, or when a newer one of the same kind is issued to the same user.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenRecordV1 {
    /// 1: password reset, 2: e-mail verification.
    pub kind: u8,
    pub user_id: [u8; 16],
    pub created_at_ms: i64,
    pub expires_at_ms: i64,
}

/// A one-time token, with the client that asked for it: a newer request replaces only the links the same client
/// asked for, so nobody else can kill a link its owner already holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenRecordV2 {
    /// 1: password reset, 2: e-mail verification.
    pub kind: u8,
    pub user_id: [u8; 16],
    pub created_at_ms: i64,
    pub expires_at_ms: i64,
    /// The requesting client's address as the rate limits key it (an IPv4 address as IPv4-mapped IPv6, an IPv6
    /// address cut to its /64); `None` for tokens from before the field (replaced by nobody, they expire).
    pub requested_by: Option<[u8; 16]>,
}

impl From<TokenRecordV1> for TokenRecordV2 {
    fn from(r: TokenRecordV1) -> Self {
        Self {
            kind: r.kind,
            user_id: r.user_id,
            created_at_ms: r.created_at_ms,
            expires_at_ms: r.expires_at_ms,
            requested_by: None,
        }
    }
}

/// A one-time token, third format: [`TokenRecordV2`] and how many wrong codes a two-factor challenge has had (so
/// that every node counts one challenge's five; 0 for the other kinds).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenRecordV3 {
    /// 1: password reset, 2: e-mail verification, 3 and 4: a two-factor challenge (remembered or not), 5: a
    /// trusted device.
    pub kind: u8,
    pub user_id: [u8; 16],
    pub created_at_ms: i64,
    pub expires_at_ms: i64,
    pub requested_by: Option<[u8; 16]>,
    pub failures: u32,
}

impl From<TokenRecordV2> for TokenRecordV3 {
    fn from(r: TokenRecordV2) -> Self {
        Self {
            kind: r.kind,
            user_id: r.user_id,
            created_at_ms: r.created_at_ms,
            expires_at_ms: r.expires_at_ms,
            requested_by: r.requested_by,
            failures: 0,
        }
    }
}

/// A one-time token, fourth format: [`TokenRecordV3`] and a mailed second-factor code's keyed hash (`None` for
/// every other kind).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenRecordV4 {
    /// 1 to 5 as in [`TokenRecordV3`]; 6: a code mailed for the second factor.
    pub kind: u8,
    pub user_id: [u8; 16],
    pub created_at_ms: i64,
    pub expires_at_ms: i64,
    pub requested_by: Option<[u8; 16]>,
    pub failures: u32,
    pub code: Option<[u8; 32]>,
}

impl From<TokenRecordV3> for TokenRecordV4 {
    fn from(r: TokenRecordV3) -> Self {
        Self {
            kind: r.kind,
            user_id: r.user_id,
            created_at_ms: r.created_at_ms,
            expires_at_ms: r.expires_at_ms,
            requested_by: r.requested_by,
            failures: r.failures,
            code: None,
        }
    }
}

/// A one-time token, fifth format: [`TokenRecordV4`] and the address a sign-in link was mailed to (with the name
/// given for an account the link makes). Written only for the kinds older releases do not know (7: a sign-in link;
/// 8, 9, 10: a mailed code to sign in, to verify the address, to reset the password), which they skip; every other
/// token is still written as [`TokenRecordV4`] ([`crate::store::codec::encode_token`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenRecordV5 {
    pub kind: u8,
    pub user_id: [u8; 16],
    pub created_at_ms: i64,
    pub expires_at_ms: i64,
    pub requested_by: Option<[u8; 16]>,
    pub failures: u32,
    pub code: Option<[u8; 32]>,
    pub email: Option<String>,
    pub name: Option<String>,
}

impl From<TokenRecordV4> for TokenRecordV5 {
    fn from(r: TokenRecordV4) -> Self {
        Self {
            kind: r.kind,
            user_id: r.user_id,
            created_at_ms: r.created_at_ms,
            expires_at_ms: r.expires_at_ms,
            requested_by: r.requested_by,
            failures: r.failures,
            code: r.code,
            email: None,
            name: None,
        }
    }
}

impl From<TokenRecordV3> for TokenRecordV5 {
    fn from(r: TokenRecordV3) -> Self {
        TokenRecordV4::from(r).into()
    }
}

impl TokenRecordV5 {
    /// The fourth format of this record, when it says nothing that format cannot: a kind older releases know
    /// (1 to 6) and no address.
    pub fn as_v4(&self) -> Option<TokenRecordV4> {
        (self.kind <= 6 && self.email.is_none() && self.name.is_none()).then_some(TokenRecordV4 {
            kind: self.kind,
            user_id: self.user_id,
            created_at_ms: self.created_at_ms,
            expires_at_ms: self.expires_at_ms,
            requested_by: self.requested_by,
            failures: self.failures,
            code: self.code,
        })
    }
}

/// The token record as this version holds it (written as [`TokenRecordV4`] where that format can say it).
pub type TokenRecord = TokenRecordV5;

/// A message waiting to be sent. Written in the same transaction as what it announces (a reset token), deleted
/// once the mail server has accepted it. Key: its UUID v7, so the outbox reads oldest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutboxRecordV1 {
    pub id: [u8; 16],
    pub to: String,
    pub subject: String,
    pub text: String,
    pub html: String,
    pub created_at_ms: i64,
}
