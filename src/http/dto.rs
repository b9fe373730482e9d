//! The JSON shapes of answers. Field names and sets are part of the contract: the auth endpoints use the auth
//! library's camelCase objects, the admin endpoints their own snake_case ones (docs/reference.md), and nothing here
//! ever carries a password hash.

use serde::Serialize;

use crate::domain::{
    self, AuditId, Invitation, InvitationId, MemberId, Membership, OrgId, Organization, Session, SessionId, TeamId,
    Timestamp, User, UserId,
};

/// A user on the auth endpoints.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AuthUser<'a> {
    id: UserId,
    name: &'a str,
    email: &'a str,
    email_verified: bool,
    image: Option<&'a str>,
    created_at: Timestamp,
    updated_at: Timestamp,
    role: &'a str,
    banned: bool,
    ban_reason: Option<&'a str>,
    ban_expires: Option<Timestamp>,
    organization_id: Option<OrgId>,
    /// better-auth's two-factor plugin adds it to the user.
    two_factor_enabled: bool,
    /// better-auth's username plugin adds them to the user; absent on an account without them.
    #[serde(skip_serializing_if = "Option::is_none")]
    username: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    display_username: Option<&'a str>,
}

impl<'a> From<&'a User> for AuthUser<'a> {
    fn from(u: &'a User) -> Self {
        Self {
            id: u.id,
            name: u.name(),
            email: u.email(),
            email_verified: u.email_verified,
            image: u.image(),
            created_at: u.created_at,
            updated_at: u.updated_at,
            role: u.role.as_str(),
            banned: u.banned,
            ban_reason: u.ban_reason(),
            ban_expires: u.ban_expires(),
            organization_id: u.organization_id,
            two_factor_enabled: u.has_second_factor(),
            username: u.username().map(|n| n.as_str()),
            display_username: u.display_username(),
        }
    }
}

/// A session on the auth endpoints. `token` is the caller's own cookie value, echoed as the library does.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AuthSession<'a> {
    id: SessionId,
    token: &'a str,
    user_id: UserId,
    expires_at: Timestamp,
    created_at: Timestamp,
    updated_at: Timestamp,
    ip_address: &'a str,
    user_agent: &'a str,
    /// The administrator acting as the user through this session (the admin plugin's field).
    impersonated_by: Option<UserId>,
    /// The organization plugin's field: the session's active organization (`organization/set-active`).
    active_organization_id: Option<OrgId>,
    /// The plugin's field with teams on: the session's active team (`organization/set-active-team`); absent when
    /// it works in none, so the answer stays as it was without teams.
    #[serde(skip_serializing_if = "Option::is_none")]
    active_team_id: Option<TeamId>,
}

impl<'a> AuthSession<'a> {
    pub fn new(session: &'a Session, token: &'a str) -> Self {
        Self {
            id: session.id,
            token,
            user_id: session.user_id,
            expires_at: session.expires_at,
            created_at: session.created_at,
            updated_at: session.updated_at,
            ip_address: &session.ip_address,
            user_agent: &session.user_agent,
            impersonated_by: session.impersonated_by(),
            active_organization_id: session.active_organization(),
            active_team_id: session.active_team(),
        }
    }
}

/// A user in `GET /api/admin/users`: exactly the seven fields docs/reference.md lists.
#[derive(Serialize)]
pub struct AdminUser<'a> {
    id: UserId,
    name: &'a str,
    email: &'a str,
    role: &'a str,
    organization_id: Option<OrgId>,
    banned: bool,
    created_at: Timestamp,
}

impl<'a> From<&'a User> for AdminUser<'a> {
    fn from(u: &'a User) -> Self {
        Self {
            id: u.id,
            name: u.name(),
            email: u.email(),
            role: u.role.as_str(),
            organization_id: u.organization_id,
            banned: u.banned,
            created_at: u.created_at,
        }
    }
}

/// An organization on the admin endpoints.
#[derive(Serialize)]
pub struct AdminOrganization<'a> {
    id: OrgId,
    name: &'a str,
    slug: &'a str,
    created_at: Timestamp,
}

impl<'a> From<&'a Organization> for AdminOrganization<'a> {
    fn from(o: &'a Organization) -> Self {
        Self { id: o.id, name: o.name.as_str(), slug: o.slug.as_str(), created_at: o.created_at }
    }
}

/// `get-session` when signed in.
#[derive(Serialize)]
pub struct SessionAndUser<'a> {
    pub session: AuthSession<'a>,
    pub user: AuthUser<'a>,
}

/// `get-session`'s answer as bytes: the same as serialising [`SessionAndUser`] (tests pin the bytes to serde's),
/// written field by field. Sessions are checked far more often than anything else is asked, and going through
/// serde cost the session part alone 300 ns (it escapes every key and every timestamp).
///
/// The user is written anew on every check, not kept rendered on the account: with a random one of a million
/// sessions per request nearly every check met its user for the first time anyway, and a kept rendering (~450
/// bytes an account) made a node's memory grow with every account whose session was ever checked (4.5 GB more at
/// 10,000,000 accounts).
pub fn session_and_user_json(session: &Session, token: &str, user: &User) -> Vec<u8> {
    let mut out = Vec::with_capacity(384 + token.len() + session.user_agent.len() + auth_user_len(user));
    out.extend_from_slice(b"{\"session\":{\"id\":\"");
    session.id.append_hyphenated(&mut out);
    out.extend_from_slice(b"\",\"token\":");
    json_str(&mut out, token);
    out.extend_from_slice(b",\"userId\":\"");
    session.user_id.append_hyphenated(&mut out);
    for (key, at) in [
        (&b"\",\"expiresAt\":\""[..], session.expires_at),
        (b"\",\"createdAt\":\"", session.created_at),
        (b"\",\"updatedAt\":\"", session.updated_at),
    ] {
        out.extend_from_slice(key);
        at.append_rfc3339(&mut out);
    }
    out.extend_from_slice(b"\",\"ipAddress\":");
    json_str(&mut out, &session.ip_address);
    out.extend_from_slice(b",\"userAgent\":");
    json_str(&mut out, &session.user_agent);
    out.extend_from_slice(b",\"impersonatedBy\":");
    id_or_null(&mut out, session.impersonated_by().map(uuid::Uuid::from));
    out.extend_from_slice(b",\"activeOrganizationId\":");
    id_or_null(&mut out, session.active_organization().map(uuid::Uuid::from));
    if let Some(team) = session.active_team() {
        out.extend_from_slice(b",\"activeTeamId\":");
        id_or_null(&mut out, Some(uuid::Uuid::from(team)));
    }
    out.extend_from_slice(b"},\"user\":");
    append_auth_user(&mut out, user);
    out.push(b'}');
    out
}

/// `get-session` on an API key's session, as the plugin answers it: the key itself as the token, no address, the
/// caller's user agent, and no impersonation or organization (the plugin's object has none).
pub fn key_session_and_user_json(session: &Session, key: &str, user_agent: Option<&str>, user: &User) -> Vec<u8> {
    let mut out = Vec::with_capacity(384 + key.len() + user_agent.map_or(0, str::len) + auth_user_len(user));
    out.extend_from_slice(b"{\"session\":{\"id\":\"");
    session.id.append_hyphenated(&mut out);
    out.extend_from_slice(b"\",\"token\":");
    json_str(&mut out, key);
    out.extend_from_slice(b",\"userId\":\"");
    session.user_id.append_hyphenated(&mut out);
    out.extend_from_slice(b"\",\"userAgent\":");
    match user_agent {
        Some(agent) => json_str(&mut out, agent),
        None => out.extend_from_slice(b"null"),
    }
    out.extend_from_slice(b",\"ipAddress\":null");
    for (key, at) in [
        (&b",\"createdAt\":\""[..], session.created_at),
        (b"\",\"updatedAt\":\"", session.updated_at),
        (b"\",\"expiresAt\":\"", session.expires_at),
    ] {
        out.extend_from_slice(key);
        at.append_rfc3339(&mut out);
    }
    out.extend_from_slice(b"\"},\"user\":");
    append_auth_user(&mut out, user);
    out.push(b'}');
    out
}

/// About the bytes [`append_auth_user`] writes (its fixed part, with room for escapes and timestamps, and its texts).
fn auth_user_len(u: &User) -> usize {
    let optional = |s: Option<&str>| s.map_or(0, str::len);
    let texts = u.name().len() + u.email().len() + u.role.as_str().len();
    let names = u.username().map_or(0, |n| n.as_str().len()) + optional(u.display_username());
    400 + texts + optional(u.image()) + optional(u.ban_reason()) + names
}

/// [`AuthUser`] as bytes: the same as serialising it (tests pin the bytes to serde's).
#[cfg(test)]
fn auth_user_json(u: &User) -> Vec<u8> {
    let mut out = Vec::with_capacity(auth_user_len(u));
    append_auth_user(&mut out, u);
    out
}

/// Appends [`AuthUser`]'s serialisation, written field by field.
fn append_auth_user(out: &mut Vec<u8>, u: &User) {
    let flag = |out: &mut Vec<u8>, b: bool| out.extend_from_slice(if b { b"true" } else { b"false" });
    let text = |out: &mut Vec<u8>, s: Option<&str>| match s {
        Some(s) => json_str(out, s),
        None => out.extend_from_slice(b"null"),
    };
    let time = |out: &mut Vec<u8>, at: Option<Timestamp>| match at {
        Some(at) => {
            out.push(b'"');
            at.append_rfc3339(out);
            out.push(b'"');
        }
        None => out.extend_from_slice(b"null"),
    };
    out.extend_from_slice(b"{\"id\":\"");
    u.id.append_hyphenated(out);
    out.extend_from_slice(b"\",\"name\":");
    json_str(out, u.name());
    out.extend_from_slice(b",\"email\":");
    json_str(out, u.email());
    out.extend_from_slice(b",\"emailVerified\":");
    flag(out, u.email_verified);
    out.extend_from_slice(b",\"image\":");
    text(out, u.image());
    out.extend_from_slice(b",\"createdAt\":");
    time(out, Some(u.created_at));
    out.extend_from_slice(b",\"updatedAt\":");
    time(out, Some(u.updated_at));
    out.extend_from_slice(b",\"role\":");
    json_str(out, u.role.as_str());
    out.extend_from_slice(b",\"banned\":");
    flag(out, u.banned);
    out.extend_from_slice(b",\"banReason\":");
    text(out, u.ban_reason());
    out.extend_from_slice(b",\"banExpires\":");
    time(out, u.ban_expires());
    out.extend_from_slice(b",\"organizationId\":");
    id_or_null(out, u.organization_id.map(uuid::Uuid::from));
    out.extend_from_slice(b",\"twoFactorEnabled\":");
    flag(out, u.has_second_factor());
    if let Some(name) = u.username() {
        out.extend_from_slice(b",\"username\":");
        json_str(out, name.as_str());
    }
    if let Some(display) = u.display_username() {
        out.extend_from_slice(b",\"displayUsername\":");
        json_str(out, display);
    }
    out.push(b'}');
}

/// An optional id as JSON: its hyphenated lower-case form in quotes, or `null`.
fn id_or_null(out: &mut Vec<u8>, id: Option<uuid::Uuid>) {
    match id {
        Some(id) => {
            out.push(b'"');
            out.extend_from_slice(id.hyphenated().encode_lower(&mut uuid::Uuid::encode_buffer()).as_bytes());
            out.push(b'"');
        }
        None => out.extend_from_slice(b"null"),
    }
}

/// `s` as a JSON string: copied as it is when nothing in it needs escaping (the usual case: serde_json escapes
/// only control characters, `"` and `\\`), else through serde_json.
pub(super) fn json_str(out: &mut Vec<u8>, s: &str) {
    if s.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
    } else {
        // Serialising a string into a Vec cannot fail.
        let _ = serde_json::to_writer(&mut *out, s);
    }
}

/// `is-username-available`'s answer.
#[derive(Serialize)]
pub struct UsernameAvailable {
    pub available: bool,
}

/// Sign-up's answer; `token` is `null` when the address must be verified before a session opens.
#[derive(Serialize)]
pub struct TokenAndUser<'a> {
    pub token: Option<&'a str>,
    pub user: AuthUser<'a>,
}

/// `email-otp/verify-email`'s answer: `token` is `null` (no session is started by proving an address).
#[derive(Serialize)]
pub struct VerifiedByCode<'a> {
    pub status: bool,
    pub token: Option<&'a str>,
    pub user: AuthUser<'a>,
}

/// Sign-in's answer; `url` only when the request gave a `callbackURL`.
#[derive(Serialize)]
pub struct SignedIn<'a> {
    pub redirect: bool,
    pub token: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<&'a str>,
    pub user: AuthUser<'a>,
}

#[derive(Serialize)]
pub struct UserList<'a> {
    pub users: Vec<AdminUser<'a>>,
}

#[derive(Serialize)]
pub struct OrganizationList<'a> {
    pub organizations: Vec<AdminOrganization<'a>>,
}

#[derive(Serialize)]
pub struct OneOrganization<'a> {
    pub organization: AdminOrganization<'a>,
}

/// `{"success": true}`.
#[derive(Serialize)]
pub struct Success {
    pub success: bool,
}

pub const SUCCESS: Success = Success { success: true };

/// `{"status": true}`: better-auth's answer to a step that has nothing else to say.
#[derive(Serialize)]
pub struct Status {
    pub status: bool,
}

pub const STATUS: Status = Status { status: true };

// The answers below were first written through `serde_json::json!`, whose objects sort their keys; their fields
// are declared in that order so that the bytes stay the same (a test holds it).

/// A sign-in that waits for its second factor: which methods may prove it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TwoFactorRedirect<'a> {
    pub two_factor_methods: &'a [&'a str],
    pub two_factor_redirect: bool,
}

/// `two-factor/enable`: the factor to confirm and its backup codes, shown this once.
#[derive(Serialize)]
pub struct TotpEnrolment<'a> {
    #[serde(rename = "backupCodes")]
    pub backup_codes: &'a [String],
    pub method: &'static str,
    #[serde(rename = "totpURI")]
    pub totp_uri: &'a str,
}

/// `GET /api/account/providers`: the sign-in page's buttons.
#[derive(Serialize)]
pub struct Providers<'a> {
    pub providers: Vec<ProviderName<'a>>,
}

/// One identity provider: the id `sign-in/social` and `link-social` take, and the name a button shows.
#[derive(Serialize)]
pub struct ProviderName<'a> {
    pub id: &'a str,
    pub name: &'a str,
}

/// `two-factor/get-totp-uri`.
#[derive(Serialize)]
pub struct TotpUri<'a> {
    #[serde(rename = "totpURI")]
    pub totp_uri: &'a str,
}

/// `two-factor/generate-backup-codes`: the new codes, shown this once.
#[derive(Serialize)]
pub struct BackupCodes<'a> {
    #[serde(rename = "backupCodes")]
    pub backup_codes: &'a [String],
    pub status: bool,
}

/// An administrator's reset of a user's second factor: `reset` is false when there was none.
#[derive(Serialize)]
pub struct SecondFactorReset {
    pub reset: bool,
    pub success: bool,
}

/// `{"message", "status": true}`.
#[derive(Serialize)]
pub struct StatusMessage<'a> {
    pub message: &'a str,
    pub status: bool,
}

/// `{"message", "success": true}`.
#[derive(Serialize)]
pub struct SuccessMessage<'a> {
    pub message: &'a str,
    pub success: bool,
}

/// A token alone (a reset link followed without a `callbackURL`).
#[derive(Serialize)]
pub struct Token<'a> {
    pub token: &'a str,
}

/// `{"error": null, "success"}`: better-auth's `has-permission` (and the admin plugin's) answer.
#[derive(Serialize)]
pub struct PermissionCheck {
    /// Always `null`.
    pub error: (),
    pub success: bool,
}

/// A team as the organization plugin answers it (`create-team`, `list-teams`, …): no members.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PluginTeam<'a> {
    pub created_at: Timestamp,
    pub id: domain::TeamId,
    pub name: &'a str,
    pub organization_id: OrgId,
    pub updated_at: Option<Timestamp>,
}

impl<'a> PluginTeam<'a> {
    pub fn new(org: OrgId, team: &'a domain::Team) -> Self {
        Self {
            created_at: team.created_at,
            id: team.id,
            name: team.name.as_str(),
            organization_id: org,
            updated_at: team.updated_at,
        }
    }
}

/// A role an organization defined, as the plugin answers it (`organizationRole` with `permission` parsed).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PluginRole<'a> {
    pub created_at: Timestamp,
    pub id: domain::RoleId,
    pub organization_id: OrgId,
    pub permission: std::collections::BTreeMap<&'a str, &'a [Box<str>]>,
    pub role: &'a str,
    pub updated_at: Option<Timestamp>,
}

impl<'a> PluginRole<'a> {
    pub fn new(org: OrgId, role: &'a domain::CustomRole) -> Self {
        Self {
            created_at: role.created_at,
            id: role.id,
            organization_id: org,
            permission: role.grants.iter().collect(),
            role: role.name.as_str(),
            updated_at: role.updated_at,
        }
    }
}

/// `create-role` and `update-role`: `{success, roleData, statements?}`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RoleChanged<'a> {
    pub role_data: PluginRole<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub statements: Option<std::collections::BTreeMap<&'a str, &'a [Box<str>]>>,
    pub success: bool,
}

/// `delete-role`: `{success: true}`.
#[derive(Serialize)]
pub struct Succeeded {
    pub success: bool,
}

/// A user's place in a team as the plugin answers it: no account details.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PluginTeamMember {
    pub created_at: Timestamp,
    pub id: domain::TeamMemberId,
    pub team_id: domain::TeamId,
    pub user_id: UserId,
}

/// `{"message"}`: the plugin's answer to `remove-team` and `remove-team-member`.
#[derive(Serialize)]
pub struct Message {
    pub message: &'static str,
}

// The organization plugin's shapes (`/api/auth/organization/*`), first written through `json!` as the others above.

/// An organization on the organization plugin's calls. `members` (and `invitations`) only where the call shows
/// them (`create`, `get-full-organization`).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PluginOrganization<'a> {
    pub created_at: Timestamp,
    pub id: OrgId,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub invitations: Option<Vec<PluginInvitation<'a>>>,
    pub logo: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub members: Option<Vec<PluginMember<'a>>>,
    /// The metadata the client set (JSON text, kept as given), parsed back; `null` if it does not parse.
    pub metadata: Option<serde_json::Value>,
    pub name: &'a str,
    pub slug: &'a str,
    /// `get-full-organization` with teams on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub teams: Option<Vec<PluginTeam<'a>>>,
}

impl<'a> From<&'a Organization> for PluginOrganization<'a> {
    fn from(o: &'a Organization) -> Self {
        Self {
            created_at: o.created_at,
            id: o.id,
            invitations: None,
            logo: o.logo.as_deref(),
            members: None,
            metadata: o.metadata.as_deref().and_then(|m| serde_json::from_str(m).ok()),
            name: o.name.as_str(),
            slug: o.slug.as_str(),
            teams: None,
        }
    }
}

/// A membership on the organization plugin's calls; `user` where the call shows the account with it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PluginMember<'a> {
    pub created_at: Timestamp,
    pub id: MemberId,
    pub organization_id: OrgId,
    /// The roles, comma-separated (better-auth's way of writing several).
    pub role: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user: Option<MemberUser<'a>>,
    pub user_id: UserId,
}

impl<'a> PluginMember<'a> {
    pub fn new(m: &Membership, user: Option<&'a User>) -> Self {
        Self {
            created_at: m.created_at,
            id: m.id,
            organization_id: m.org,
            role: m.roles.to_string(),
            user: user.map(|u| MemberUser { email: u.email(), id: u.id, image: u.image(), name: u.name() }),
            user_id: m.user,
        }
    }
}

/// The account shown with a membership.
#[derive(Serialize)]
pub struct MemberUser<'a> {
    pub email: &'a str,
    pub id: UserId,
    pub image: Option<&'a str>,
    pub name: &'a str,
}

/// An invitation on the organization plugin's calls. The names of its organization and inviter only where the
/// call shows them (`get-invitation`; `list-user-invitations` shows the organization's name, `null` once it is
/// gone).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PluginInvitation<'a> {
    pub created_at: Timestamp,
    pub email: &'a str,
    pub expires_at: Timestamp,
    pub id: InvitationId,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inviter_email: Option<&'a str>,
    pub inviter_id: UserId,
    pub organization_id: OrgId,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub organization_name: Option<Option<&'a str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub organization_slug: Option<&'a str>,
    pub role: String,
    pub status: &'static str,
    /// The teams accepting puts the invitee in, as the plugin writes them: their ids joined by commas; `null`
    /// for none (always, with teams off).
    pub team_id: Option<String>,
}

impl<'a> From<&'a Invitation> for PluginInvitation<'a> {
    fn from(i: &'a Invitation) -> Self {
        Self {
            created_at: i.created_at,
            email: i.email.as_str(),
            expires_at: i.expires_at,
            id: i.id,
            inviter_email: None,
            inviter_id: i.inviter,
            organization_id: i.org,
            organization_name: None,
            organization_slug: None,
            role: i.roles.to_string(),
            status: i.status.as_str(),
            team_id: i.teams.joined(),
        }
    }
}

/// `{"member"}`: `remove-member`'s answer.
#[derive(Serialize)]
pub struct MemberEnded<'a> {
    pub member: PluginMember<'a>,
}

/// `{"invitation", "member"}`: `accept-invitation`'s (the new membership) and `reject-invitation`'s (`null`).
#[derive(Serialize)]
pub struct InvitationAnswered<'a> {
    pub invitation: PluginInvitation<'a>,
    pub member: Option<PluginMember<'a>>,
}

/// `{"role"}`: `get-active-member-role`.
#[derive(Serialize)]
pub struct MemberRole {
    pub role: String,
}

/// `GET /api/auth/ok`: better-auth's liveness answer, `{"ok": true}`.
#[derive(Serialize)]
pub struct Ok {
    pub ok: bool,
}

/// `/healthz` and `/readyz`: the node's state, and while it is not ready, why.
#[derive(Serialize)]
pub struct Health {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<&'static str>,
    pub status: &'static str,
}

/// `DELETE /api/admin/organizations/{id}`: how many members were detached.
#[derive(Serialize)]
pub struct OrganizationDeleted {
    pub detached: usize,
    pub success: bool,
}

/// `POST /api/admin/setup`: the first administrator, made.
#[derive(Serialize)]
pub struct SetUp<'a> {
    pub success: bool,
    pub user: SetUpUser<'a>,
}

/// The administrator [`SetUp`] made.
#[derive(Serialize)]
pub struct SetUpUser<'a> {
    pub email: &'a str,
    pub id: UserId,
    pub name: &'a str,
}

/// One entry of `GET /api/admin/audit`.
#[derive(Serialize)]
pub struct AuditEntry<'a> {
    id: AuditId,
    at: Timestamp,
    action: &'a str,
    actor_id: Option<UserId>,
    target_id: Option<uuid::Uuid>,
    ip_address: &'a str,
    detail: &'a str,
}

impl<'a> From<&'a domain::AuditEntry> for AuditEntry<'a> {
    fn from(e: &'a domain::AuditEntry) -> Self {
        Self {
            id: e.id,
            at: e.at,
            action: &e.action,
            actor_id: e.actor,
            target_id: e.target,
            ip_address: &e.ip_address,
            detail: &e.detail,
        }
    }
}

#[derive(Serialize)]
pub struct AuditPage<'a> {
    pub entries: Vec<AuditEntry<'a>>,
    pub next_cursor: Option<String>,
}

/// An endpoint on `/api/admin/webhooks` (never its secret).
///
/// The webhook answers' fields are declared in alphabetical order, here and in their envelopes below: they were
/// first written through `serde_json::json!`, whose objects sort their keys, and keeping that order keeps the
/// answers' bytes (a test holds it).
#[derive(Serialize)]
pub struct Webhook<'a> {
    created_at: &'a str,
    description: &'a str,
    enabled: bool,
    events: &'a [String],
    failing: bool,
    failing_since: Option<&'a str>,
    id: &'a str,
    previous_secret_expires_at: Option<&'a str>,
    queued: u64,
    updated_at: &'a str,
    url: &'a str,
}

impl<'a> From<&'a crate::accounts::Endpoint> for Webhook<'a> {
    fn from(e: &'a crate::accounts::Endpoint) -> Self {
        Self {
            created_at: &e.created_at,
            description: &e.description,
            enabled: e.enabled,
            events: &e.events,
            failing: e.failing,
            failing_since: e.failing_since.as_deref(),
            id: &e.id,
            previous_secret_expires_at: e.previous_secret_expires_at.as_deref(),
            queued: e.queued,
            updated_at: &e.updated_at,
            url: &e.url,
        }
    }
}

/// One attempt of `GET /api/admin/webhooks/{id}/deliveries`.
#[derive(Serialize)]
pub struct WebhookDelivery<'a> {
    account_id: Option<&'a str>,
    at: &'a str,
    attempt: u32,
    duration_ms: u32,
    error: Option<&'a str>,
    event: &'a str,
    id: &'a str,
    message_id: &'a str,
    status: Option<u16>,
    success: bool,
}

impl<'a> From<&'a crate::accounts::Delivery> for WebhookDelivery<'a> {
    fn from(d: &'a crate::accounts::Delivery) -> Self {
        Self {
            account_id: d.account_id.as_deref(),
            at: &d.at,
            attempt: d.attempt,
            duration_ms: d.duration_ms,
            error: d.error.as_deref(),
            event: &d.event,
            id: &d.id,
            message_id: &d.message_id,
            status: d.status,
            success: d.success,
        }
    }
}

/// `GET /api/admin/webhooks`: the endpoints and every event type one may subscribe to.
#[derive(Serialize)]
pub struct WebhookList<'a> {
    pub events: Vec<&'static str>,
    pub webhooks: Vec<Webhook<'a>>,
}

#[derive(Serialize)]
pub struct OneWebhook<'a> {
    pub webhook: Webhook<'a>,
}

/// An endpoint created or changed, with its secret when that answer made one (`null` when a change did not
/// rotate it).
#[derive(Serialize)]
pub struct WebhookAndSecret<'a> {
    pub secret: Option<&'a str>,
    pub webhook: Webhook<'a>,
}

/// `GET /api/admin/config`: the configuration in effect, secrets redacted, which settings a reload changes, when
/// the last one did, and how the mail sender's last attempt ended.
#[derive(Serialize)]
pub struct ConfigInEffect<'a> {
    pub source: Option<&'a str>,
    pub settings: &'a serde_json::Value,
    pub live: &'a [&'a str],
    pub reloaded_at: Option<String>,
    pub need_restart: &'a [&'a str],
    pub mail_configured: bool,
    pub last_delivery: Option<LastDelivery>,
}

/// The mail sender's last attempt: when, and the server's refusal or the connection's error if it failed.
#[derive(Serialize)]
pub struct LastDelivery {
    pub at: String,
    pub ok: bool,
    pub error: Option<String>,
}

/// An administrator's test message, in the outbox.
#[derive(Serialize)]
pub struct MailQueued {
    pub mail_id: String,
}

/// A webhook message queued (a test, a resend).
#[derive(Serialize)]
pub struct MessageQueued<'a> {
    pub message_id: &'a str,
}

/// A page of the delivery log, newest first; `next_cursor` when the page is full.
#[derive(Serialize)]
pub struct WebhookDeliveries<'a> {
    pub deliveries: Vec<WebhookDelivery<'a>>,
    pub next_cursor: Option<&'a str>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{Name, Role, SessionRare, UserFields};

    fn user(name: &str, image: Option<&str>) -> User {
        let now = Timestamp::from_millis(1_795_338_902_123);
        User::from(UserFields {
            name: Name::from_trusted(name.to_owned()),
            email_verified: true,
            image: image.map(Into::into),
            role: Role::admin(),
            banned: true,
            ban_reason: Some("a \"quoted\" reason \u{7} with \\ and \u{e9}".into()),
            ban_expires: Some(now),
            organization_id: Some(OrgId::new()),
            password_hash: "$argon2id$never-shown".into(),
            updated_at: Timestamp::from_millis(-1),
            ..User::fixture("ana@example.com", now).fields()
        })
    }

    fn session(user: &User) -> Session {
        Session {
            id: SessionId::new(),
            user_id: user.id,
            expires_at: Timestamp::from_millis(253_402_300_799_999),
            created_at: Timestamp::from_millis(0),
            updated_at: Timestamp::from_millis(1),
            ip_address: "2001:db8::1".into(),
            user_agent: "Mozilla/5.0 \"tab\t\"".into(),
            remember_me: true,
            rare: SessionRare::new(Some(UserId::new()), None),
        }
    }

    /// The spliced answer is byte for byte the one serde makes of the whole, the first time (rendering) and
    /// every time after (the kept bytes).
    #[test]
    fn get_session_answer_is_the_plain_serialisation() {
        for u in [user("Ana \"A\" <b>", Some("https://example.com/a.png")), user("Bo", None)] {
            let mut sessions = vec![session(&u)];
            let mut plain_one = session(&u);
            plain_one.user_agent = "Mozilla/5.0 (X11; Linux x86_64) Firefox/140.0 é".into();
            plain_one.ip_address = "203.0.113.7".into();
            plain_one.rare = SessionRare::new(None, Some(OrgId::new()));
            plain_one.expires_at = Timestamp::from_millis(1_795_338_902_123);
            sessions.push(plain_one);
            let mut in_team = session(&u);
            in_team.rare = SessionRare::with_team(None, Some(OrgId::new()), Some(TeamId::new()));
            sessions.push(in_team);
            let mut outside = session(&u);
            outside.created_at = Timestamp::from_millis(-62_167_219_200_001); // year -1: chrono writes it
            outside.user_agent = "\u{1}\\\u{7f}".into();
            sessions.push(outside);
            for s in sessions {
                let plain = serde_json::to_vec(&SessionAndUser {
                    session: AuthSession::new(&s, "tok\"en"),
                    user: AuthUser::from(&u),
                })
                .unwrap();
                assert_eq!(session_and_user_json(&s, "tok\"en", &u), plain);
                assert!(!String::from_utf8(plain).unwrap().contains("argon2"));
            }
        }
    }

    /// The user written by hand is byte for byte serde's serialisation of [`AuthUser`], whatever its optional
    /// fields hold and whatever its texts need escaped.
    #[test]
    fn the_user_written_by_hand_is_the_plain_serialisation() {
        let full = user("Ana \"A\" <b> \u{1}\\ \u{e9}", Some("https://example.com/a.png?x=\"1\""));
        let bare = User::from(UserFields {
            email_verified: false,
            image: None,
            banned: false,
            ban_reason: None,
            ban_expires: None,
            organization_id: None,
            created_at: Timestamp::from_millis(-62_167_219_200_001),
            ..user("Bo", None).fields()
        });
        for u in [&full, &bare] {
            let plain = serde_json::to_vec(&AuthUser::from(u)).unwrap();
            assert_eq!(String::from_utf8(auth_user_json(u)).unwrap(), String::from_utf8(plain).unwrap());
        }
    }

    /// The answers typed from `json!` (the webhooks', the second factor's, …) are the bytes `json!` made of them: serde_json's objects sort
    /// their keys, so an answer whose fields are declared in another order would differ from its own value's
    /// serialisation.
    #[test]
    fn typed_answers_keep_the_bytes_json_made() {
        let endpoint = crate::accounts::Endpoint {
            id: "0190f0a2-7c1d-7e4b-8a55-2a3b4c5d6e7f".into(),
            url: "https://hooks.example.com/in?a=\"1\"".into(),
            events: vec!["user.created".into(), "session.created".into()],
            description: "ops \u{e9}".into(),
            enabled: true,
            failing: true,
            failing_since: Some("2026-01-02T03:04:05.000Z".into()),
            previous_secret_expires_at: None,
            queued: 3,
            created_at: "2026-01-01T00:00:00.000Z".into(),
            updated_at: "2026-01-02T00:00:00.000Z".into(),
        };
        let delivery = crate::accounts::Delivery {
            id: "d1".into(),
            message_id: "msg_1".into(),
            event: "user.created".into(),
            account_id: None,
            attempt: 2,
            status: Some(500),
            success: false,
            error: Some("HTTP 500".into()),
            duration_ms: 12,
            at: "2026-01-02T03:04:05.000Z".into(),
        };
        fn same_as_json<T: Serialize>(answer: &T) {
            let typed = serde_json::to_string(answer).unwrap();
            let sorted = serde_json::to_string(&serde_json::to_value(answer).unwrap()).unwrap();
            assert_eq!(typed, sorted);
        }
        same_as_json(&WebhookList { events: vec!["user.created"], webhooks: vec![Webhook::from(&endpoint)] });
        same_as_json(&OneWebhook { webhook: Webhook::from(&endpoint) });
        for secret in [Some("whsec_abc"), None] {
            same_as_json(&WebhookAndSecret { secret, webhook: Webhook::from(&endpoint) });
        }
        same_as_json(&MessageQueued { message_id: "msg_1" });
        same_as_json(&STATUS);
        same_as_json(&SUCCESS);
        same_as_json(&TwoFactorRedirect { two_factor_methods: &["totp", "otp"], two_factor_redirect: true });
        let codes = ["a1b2c".to_owned(), "d3e4f".to_owned()];
        same_as_json(&TotpEnrolment { backup_codes: &codes, method: "totp", totp_uri: "otpauth://totp/x" });
        same_as_json(&TotpUri { totp_uri: "otpauth://totp/x" });
        same_as_json(&BackupCodes { backup_codes: &codes, status: true });
        same_as_json(&SecondFactorReset { reset: false, success: true });
        same_as_json(&StatusMessage { message: "sent", status: true });
        same_as_json(&SuccessMessage { message: "User deleted", success: true });
        same_as_json(&Token { token: "t" });
        for next_cursor in [Some("d1"), None] {
            same_as_json(&WebhookDeliveries { deliveries: vec![WebhookDelivery::from(&delivery)], next_cursor });
        }
        same_as_json(&PermissionCheck { error: (), success: false });
        same_as_json(&Ok { ok: true });
        same_as_json(&Health { reason: None, status: "ready" });
        same_as_json(&Health { reason: Some("the store \"refuses\""), status: "unavailable" });
        same_as_json(&OrganizationDeleted { detached: 3, success: true });
        same_as_json(&SetUp {
            success: true,
            user: SetUpUser { email: "a@example.com", id: UserId::new(), name: "A \"b\"" },
        });
        // The organization plugin's shapes, with and without their optional parts, and texts that need escaping.
        let now = Timestamp::from_millis(1_795_338_902_123);
        let account = user("Ann \"Q\" \u{e9}", Some("https://example.com/a.png"));
        for metadata in [None, Some("{\"z\": 1, \"a\": [true]}"), Some("not json")] {
            let org = Organization {
                id: OrgId::new(),
                name: domain::Name::from_trusted("Org \"one\"".into()),
                slug: domain::Slug::parse("org-one").unwrap(),
                logo: metadata.map(|_| "https://example.com/logo.png".into()),
                metadata: metadata.map(Into::into),
                created_at: now,
                teams: Vec::new(),
                roles: Vec::new(),
                require_sso: false,
            };
            let roles = domain::MemberRoles::parse(["admin", "member"]).unwrap();
            let membership = Membership::new(org.id, account.id, roles.clone(), now);
            let invitation = Invitation {
                id: InvitationId::new(),
                org: org.id,
                email: domain::Email::parse("bo@example.com").unwrap(),
                roles: roles.clone(),
                status: domain::InvitationStatus::Pending,
                inviter: account.id,
                expires_at: now,
                created_at: now,
                // Into no team (`teamId: null`), and into two.
                teams: match metadata {
                    None => domain::InvitedTeams::default(),
                    Some(_) => domain::InvitedTeams::new([domain::TeamId::new(), domain::TeamId::new()]),
                },
            };
            same_as_json(&PluginOrganization::from(&org));
            same_as_json(&PluginOrganization {
                members: Some(vec![
                    PluginMember::new(&membership, Some(&account)),
                    PluginMember::new(&membership, None),
                ]),
                invitations: Some(vec![PluginInvitation::from(&invitation)]),
                ..PluginOrganization::from(&org)
            });
            same_as_json(&PluginInvitation {
                inviter_email: Some(account.email()),
                organization_name: Some(Some(org.name.as_str())),
                organization_slug: Some(org.slug.as_str()),
                ..PluginInvitation::from(&invitation)
            });
            same_as_json(&PluginInvitation { organization_name: Some(None), ..PluginInvitation::from(&invitation) });
            same_as_json(&MemberEnded { member: PluginMember::new(&membership, None) });
            for member in [Some(PluginMember::new(&membership, None)), None] {
                same_as_json(&InvitationAnswered { invitation: PluginInvitation::from(&invitation), member });
            }
            same_as_json(&MemberRole { role: roles.to_string() });
            let team = domain::Team {
                id: domain::TeamId::new(),
                name: domain::Name::from_trusted("Ward \"4\"".into()),
                created_at: now,
                updated_at: metadata.map(|_| now),
                members: Vec::new(),
            };
            same_as_json(&PluginTeam::new(org.id, &team));
            same_as_json(&PluginTeamMember {
                created_at: now,
                id: domain::TeamMemberId::of(team.id, account.id),
                team_id: team.id,
                user_id: account.id,
            });
        }
        same_as_json(&Message { message: "Team removed successfully." });
        assert_eq!(
            serde_json::to_string(&OneWebhook { webhook: Webhook::from(&endpoint) }).unwrap(),
            r#"{"webhook":{"created_at":"2026-01-01T00:00:00.000Z","description":"ops é","enabled":true,"events":["user.created","session.created"],"failing":true,"failing_since":"2026-01-02T03:04:05.000Z","id":"0190f0a2-7c1d-7e4b-8a55-2a3b4c5d6e7f","previous_secret_expires_at":null,"queued":3,"updated_at":"2026-01-02T00:00:00.000Z","url":"https://hooks.example.com/in?a=\"1\""}}"#
        );
    }
}

/// `GET /api/auth/jwks`: the jwt plugin's `{keys}`.
#[derive(Serialize)]
pub struct Jwks<'a> {
    pub keys: &'a [crate::accounts::Jwk],
}

/// The discovery document (`/.well-known/openid-configuration` and RFC 8414's `oauth-authorization-server` under
/// the issuer): `@better-auth/oauth-provider`'s keys in its order, saying what this provider does. What it does
/// not do is left out rather than claimed: no `registration_endpoint` while dynamic registration is off, no DPoP,
/// no back-channel logout, no `private_key_jwt`, no request objects.
#[derive(Serialize)]
pub struct ProviderMetadata<'a> {
    pub scopes_supported: &'static [&'static str],
    pub issuer: &'a str,
    pub authorization_endpoint: String,
    pub token_endpoint: String,
    pub jwks_uri: String,
    pub introspection_endpoint: String,
    pub revocation_endpoint: String,
    pub response_types_supported: [&'static str; 1],
    pub response_modes_supported: [&'static str; 1],
    pub grant_types_supported: [&'static str; 4],
    pub token_endpoint_auth_methods_supported: [&'static str; 3],
    pub introspection_endpoint_auth_methods_supported: [&'static str; 2],
    pub revocation_endpoint_auth_methods_supported: [&'static str; 3],
    pub code_challenge_methods_supported: [&'static str; 1],
    pub authorization_response_iss_parameter_supported: bool,
    pub claims_supported: &'static [&'static str],
    pub userinfo_endpoint: String,
    pub subject_types_supported: [&'static str; 1],
    pub id_token_signing_alg_values_supported: Vec<&'static str>,
    pub end_session_endpoint: String,
    /// The device authorization grant (RFC 8628 §4; the plugin has none).
    pub device_authorization_endpoint: String,
    /// Only while dynamic registration is on (`[provider] registration`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub registration_endpoint: Option<String>,
    pub backchannel_logout_supported: bool,
    pub backchannel_logout_session_supported: bool,
    pub request_parameter_supported: bool,
    pub request_uri_parameter_supported: bool,
    pub prompt_values_supported: [&'static str; 3],
}

impl<'a> ProviderMetadata<'a> {
    pub fn new(issuer: &'a str, algs: Vec<&'static str>, registration: bool) -> Self {
        let at = |path: &str| format!("{issuer}{path}");
        ProviderMetadata {
            scopes_supported: crate::accounts::PROVIDER_SCOPES,
            issuer,
            authorization_endpoint: at("/oauth2/authorize"),
            token_endpoint: at("/oauth2/token"),
            jwks_uri: at("/jwks"),
            introspection_endpoint: at("/oauth2/introspect"),
            revocation_endpoint: at("/oauth2/revoke"),
            response_types_supported: ["code"],
            response_modes_supported: ["query"],
            grant_types_supported: [
                "authorization_code",
                "client_credentials",
                "refresh_token",
                crate::accounts::DEVICE_GRANT,
            ],
            token_endpoint_auth_methods_supported: ["client_secret_basic", "client_secret_post", "none"],
            // Introspection is for confidential clients only (the plugin's rule).
            introspection_endpoint_auth_methods_supported: ["client_secret_basic", "client_secret_post"],
            revocation_endpoint_auth_methods_supported: ["client_secret_basic", "client_secret_post", "none"],
            code_challenge_methods_supported: ["S256"],
            authorization_response_iss_parameter_supported: true,
            claims_supported: crate::accounts::PROVIDER_CLAIMS,
            userinfo_endpoint: at("/oauth2/userinfo"),
            subject_types_supported: ["public"],
            id_token_signing_alg_values_supported: algs,
            end_session_endpoint: at("/oauth2/end-session"),
            device_authorization_endpoint: at("/oauth2/device_authorization"),
            registration_endpoint: registration.then(|| at("/oauth2/register")),
            // Every logout token names the session (`sid`) when the grant came from one.
            backchannel_logout_supported: true,
            backchannel_logout_session_supported: true,
            request_parameter_supported: false,
            request_uri_parameter_supported: false,
            prompt_values_supported: ["login", "consent", "none"],
        }
    }
}

/// A pending device request as the `/device` page shows it.
#[derive(Serialize)]
pub struct DevicePending<'a> {
    pub client_id: &'a str,
    pub client_name: &'a str,
    pub scope: String,
    pub user_code: &'a str,
}

/// An OAuth error (RFC 6749 §5.2), in the plugin's order.
#[derive(Serialize)]
pub struct OAuthError<'a> {
    pub error_description: &'a str,
    pub error: &'a str,
}

/// A redirect answered to a script (the plugin's `{redirect: true, url}`): authorize's, the consent's.
#[derive(Serialize)]
pub struct Redirect<'a> {
    pub redirect: bool,
    pub url: &'a str,
}

/// What the consent page shows of a client.
#[derive(Serialize)]
pub struct PublicClient<'a> {
    pub client_id: &'a str,
    pub client_name: &'a str,
}

/// A signing key as administrators see it (never its private part).
#[derive(Serialize)]
pub struct SigningKey<'a> {
    pub kid: &'a str,
    pub alg: &'static str,
    /// `next` (published, not signing yet), `signing`, or `retired` (published for the tokens it signed).
    pub status: &'static str,
    pub created_at: Timestamp,
    pub signs_from: Timestamp,
    pub signs_until: Option<Timestamp>,
    pub published_until: Option<Timestamp>,
}

impl<'a> SigningKey<'a> {
    pub fn new(key: &'a crate::accounts::SigningKey, now: Timestamp) -> Self {
        SigningKey {
            kid: &key.kid,
            alg: key.alg.name(),
            status: key.status(now.as_millis()).name(),
            created_at: Timestamp::from_millis(key.created_at_ms()),
            signs_from: Timestamp::from_millis(key.signs_from_ms()),
            signs_until: key.signs_until_ms().map(Timestamp::from_millis),
            published_until: key.published_until_ms().map(Timestamp::from_millis),
        }
    }
}

/// `GET /api/admin/oidc/keys` and the rotation's answer.
#[derive(Serialize)]
pub struct SigningKeyList<'a> {
    pub keys: Vec<SigningKey<'a>>,
}

/// A client of the identity provider, for administrators: RFC 7591's names (as the plugin answers them), never
/// its secret.
#[derive(Serialize)]
pub struct OAuthClient<'a> {
    pub client_id: &'a str,
    pub client_name: &'a str,
    /// `none` for a public client.
    pub token_endpoint_auth_method: &'static str,
    pub application_type: &'static str,
    pub redirect_uris: &'a [String],
    pub post_logout_redirect_uris: &'a [String],
    /// Space-separated, as RFC 7591.
    pub scope: String,
    pub grant_types: &'a [&'static str],
    pub response_types: &'static [&'static str],
    pub skip_consent: bool,
    pub enable_end_session: bool,
    pub backchannel_logout_uri: Option<&'a str>,
    pub backchannel_logout_session_required: bool,
    pub disabled: bool,
    pub id_token_signed_response_alg: &'static str,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

impl<'a> From<&'a crate::accounts::OAuthClient> for OAuthClient<'a> {
    fn from(c: &'a crate::accounts::OAuthClient) -> Self {
        OAuthClient {
            client_id: &c.client_id,
            client_name: &c.name,
            token_endpoint_auth_method: c.auth_method.name(),
            application_type: if c.native { "native" } else { "web" },
            redirect_uris: &c.redirect_uris,
            post_logout_redirect_uris: &c.post_logout_redirect_uris,
            scope: c.scopes.join(" "),
            grant_types: &c.grant_types,
            response_types: if c.grant_types.contains(&"authorization_code") { &["code"] } else { &[] },
            skip_consent: c.skip_consent,
            enable_end_session: c.end_session,
            backchannel_logout_uri: c.backchannel_logout_uri.as_deref(),
            backchannel_logout_session_required: c.backchannel_logout_session_required,
            disabled: c.disabled,
            id_token_signed_response_alg: c.id_token_alg.name(),
            created_at: c.created_at,
            updated_at: c.updated_at,
        }
    }
}

/// A client registered at `/oauth2/register` (RFC 7591 §3.2.1, in the plugin's names): its secret and
/// `client_secret_expires_at` only for a confidential client, in this answer only.
#[derive(Serialize)]
pub struct RegisteredClient<'a> {
    pub client_id: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<&'a str>,
    /// 0: the secret does not expire.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_secret_expires_at: Option<u64>,
    pub client_id_issued_at: i64,
    pub client_name: &'a str,
    pub redirect_uris: &'a [String],
    pub post_logout_redirect_uris: &'a [String],
    pub token_endpoint_auth_method: &'static str,
    pub grant_types: &'a [&'static str],
    pub response_types: &'static [&'static str],
    pub application_type: &'static str,
    pub scope: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backchannel_logout_uri: Option<&'a str>,
    pub backchannel_logout_session_required: bool,
    pub id_token_signed_response_alg: &'static str,
    pub disabled: bool,
}

impl<'a> RegisteredClient<'a> {
    pub fn new(c: &'a crate::accounts::OAuthClient, secret: Option<&'a str>) -> Self {
        RegisteredClient {
            client_id: &c.client_id,
            client_secret: secret,
            client_secret_expires_at: secret.map(|_| 0),
            client_id_issued_at: c.created_at.as_millis() / 1000,
            client_name: &c.name,
            redirect_uris: &c.redirect_uris,
            post_logout_redirect_uris: &c.post_logout_redirect_uris,
            token_endpoint_auth_method: c.auth_method.name(),
            grant_types: &c.grant_types,
            response_types: if c.grant_types.contains(&"authorization_code") { &["code"] } else { &[] },
            application_type: if c.native { "native" } else { "web" },
            scope: c.scopes.join(" "),
            backchannel_logout_uri: c.backchannel_logout_uri.as_deref(),
            backchannel_logout_session_required: c.backchannel_logout_session_required,
            id_token_signed_response_alg: c.id_token_alg.name(),
            disabled: c.disabled,
        }
    }
}

/// One SCIM token of an organization, as listed: never the token itself.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ScimToken {
    pub created_at: String,
    pub created_by: String,
    pub expires_at: Option<String>,
    pub id: String,
    pub organization_id: String,
    pub scopes: Vec<&'static str>,
}

impl From<&crate::accounts::TokenView> for ScimToken {
    fn from(t: &crate::accounts::TokenView) -> Self {
        Self {
            created_at: t.created_at.to_rfc3339(),
            created_by: t.created_by.to_string(),
            expires_at: t.expires_at.map(|at| at.to_rfc3339()),
            id: t.id.to_string(),
            organization_id: t.org.to_string(),
            scopes: t.scopes.names(),
        }
    }
}

/// `GET /api/admin/organizations/{id}/scim-tokens`.
#[derive(Serialize)]
pub struct ScimTokenList {
    pub tokens: Vec<ScimToken>,
}

/// `POST /api/admin/organizations/{id}/scim-tokens`: the token, in this answer only.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ScimTokenCreated {
    pub expires_at: Option<String>,
    pub id: String,
    pub scopes: Vec<&'static str>,
    pub token: String,
}

/// `GET /api/admin/oidc/clients`.
#[derive(Serialize)]
pub struct OAuthClientList<'a> {
    pub clients: Vec<OAuthClient<'a>>,
}

/// One client, and its secret in the answer that made or rotated it (else `null`).
#[derive(Serialize)]
pub struct OAuthClientAndSecret<'a> {
    pub client: OAuthClient<'a>,
    pub client_secret: Option<&'a str>,
}

/// A user's consent to a client as `@better-auth/oauth-provider` answers it (its `oauthConsent` row: `get-consent`,
/// `get-consents`, `update-consent`), and the admin API's list. `clientName` is this service's addition, for the
/// account page and the console (`null` once the client is removed).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OAuthConsent<'a> {
    pub id: &'a str,
    pub client_id: &'a str,
    pub user_id: UserId,
    pub scopes: &'a [String],
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub client_name: Option<&'a str>,
}

impl<'a> From<&'a crate::accounts::Consent> for OAuthConsent<'a> {
    fn from(c: &'a crate::accounts::Consent) -> Self {
        Self {
            id: &c.id,
            client_id: &c.client_id,
            user_id: c.user_id,
            scopes: &c.scopes,
            created_at: c.created_at,
            updated_at: c.updated_at,
            client_name: c.client_name.as_deref(),
        }
    }
}

/// The admin API's list of a user's consents.
#[derive(Serialize)]
pub struct OAuthConsentList<'a> {
    pub consents: Vec<OAuthConsent<'a>>,
}

/// A single sign-on provider as `@better-auth/sso`'s `get-provider`, `providers` and `update-provider` answer it
/// (its "sanitized" form: the client id's last four characters, never the secret), with the role a first sign-in
/// gives (`defaultRole`, this service's own field).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SsoProvider<'a> {
    pub provider_id: &'a str,
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub issuer: &'a str,
    pub domain: String,
    pub organization_id: Option<crate::domain::OrgId>,
    pub domain_verified: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oidc_config: Option<SsoOidcView<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub saml_config: Option<SsoSamlView<'a>>,
    pub default_role: &'static str,
    pub role_mapping: Option<SsoRoleMapping<'a>>,
    pub sp_metadata_url: String,
}

/// A provider's `roleMapping` (this service's own field): the claim (OpenID Connect) or attribute (SAML) that
/// carries the groups, `null` for the defaults, and the pairs.
#[derive(Serialize)]
pub struct SsoRoleMapping<'a> {
    pub claim: Option<&'a str>,
    pub mappings: Vec<SsoGroupRole<'a>>,
}

#[derive(Serialize)]
pub struct SsoGroupRole<'a> {
    pub group: &'a str,
    pub role: &'a str,
}

impl<'a> SsoRoleMapping<'a> {
    fn of(m: &'a crate::domain::RoleMapping) -> Self {
        SsoRoleMapping {
            claim: m.claim(),
            mappings: m.pairs().iter().map(|p| SsoGroupRole { group: p.group(), role: p.role().as_str() }).collect(),
        }
    }
}

/// A SAML provider's configuration as the plugin's sanitized view gives it: no key, the certificates by
/// fingerprint.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SsoSamlView<'a> {
    pub entry_point: &'a str,
    pub callback_url: Option<&'a str>,
    pub idp_initiated_callback_url: Option<&'a str>,
    pub audience: Option<&'a str>,
    pub want_assertions_signed: bool,
    pub authn_requests_signed: bool,
    pub identifier_format: &'a str,
    pub signature_algorithm: Option<&'a str>,
    pub digest_algorithm: Option<&'a str>,
    pub certificate: Vec<SsoCertificate<'a>>,
    /// Not the plugin's: the IdP's entity ID, which its assertions must name as their issuer.
    #[serde(rename = "idpEntityID")]
    pub idp_entity_id: &'a str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SsoCertificate<'a> {
    pub fingerprint_sha256: &'a str,
}

impl<'a> SsoSamlView<'a> {
    fn of(s: &'a crate::accounts::SamlView) -> Self {
        SsoSamlView {
            entry_point: &s.entry_point,
            callback_url: s.callback_url.as_deref(),
            idp_initiated_callback_url: None,
            audience: s.audience.as_deref(),
            want_assertions_signed: s.want_assertions_signed,
            authn_requests_signed: false,
            identifier_format: &s.identifier_format,
            signature_algorithm: None,
            digest_algorithm: None,
            certificate: s.fingerprints.iter().map(|f| SsoCertificate { fingerprint_sha256: f }).collect(),
            idp_entity_id: &s.idp_entity_id,
        }
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SsoOidcView<'a> {
    pub discovery_endpoint: &'a str,
    pub client_id_last_four: String,
    pub pkce: bool,
    pub authorization_endpoint: &'a str,
    pub token_endpoint: &'a str,
    pub user_info_endpoint: Option<&'a str>,
    pub jwks_endpoint: &'a str,
    pub scopes: &'a [String],
    pub token_endpoint_authentication: &'static str,
}

impl<'a> SsoProvider<'a> {
    /// `base`: the service's `/api/auth` URL, which the plugin's `spMetadataUrl` starts with.
    pub fn of(p: &'a crate::accounts::SsoProvider, base: &str) -> Self {
        let tail: String = p.client_id.chars().rev().take(4).collect::<Vec<_>>().into_iter().rev().collect();
        SsoProvider {
            provider_id: &p.provider_id,
            kind: if p.saml.is_some() { "saml" } else { "oidc" },
            issuer: &p.issuer,
            domain: p.domain(),
            organization_id: p.organization_id,
            domain_verified: p.domain_verified,
            saml_config: p.saml.as_ref().map(SsoSamlView::of),
            oidc_config: p.saml.is_none().then(|| SsoOidcView {
                discovery_endpoint: &p.discovery_endpoint,
                client_id_last_four: format!("****{tail}"),
                pkce: true,
                authorization_endpoint: &p.authorization_endpoint,
                token_endpoint: &p.token_endpoint,
                user_info_endpoint: p.userinfo_endpoint.as_deref(),
                jwks_endpoint: &p.jwks_endpoint,
                scopes: &p.scopes,
                token_endpoint_authentication: p.token_auth.name(),
            }),
            default_role: p.default_role.as_str(),
            role_mapping: p.role_mapping.as_ref().map(SsoRoleMapping::of),
            sp_metadata_url: format!(
                "{base}/sso/saml2/sp/metadata?providerId={}",
                url::form_urlencoded::byte_serialize(p.provider_id.as_bytes()).collect::<String>()
            ),
        }
    }
}

/// `sso/request-domain-verification`'s answer.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SsoVerificationToken<'a> {
    pub domain_verification_token: &'a str,
}

/// An organization's single sign-on policy (`/api/admin/organizations/{id}/sso-policy`).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SsoPolicy<'a> {
    pub domains: &'a [String],
    pub organization_id: crate::domain::OrgId,
    pub require_sso: bool,
}

impl<'a> From<&'a crate::accounts::SsoPolicy> for SsoPolicy<'a> {
    fn from(p: &'a crate::accounts::SsoPolicy) -> Self {
        Self { domains: &p.domains, organization_id: p.organization_id, require_sso: p.require_sso }
    }
}

/// `sso/providers`.
#[derive(Serialize)]
pub struct SsoProviderList<'a> {
    pub providers: Vec<SsoProvider<'a>>,
}

/// `sso/register`'s answer: the provider as stored (the plugin's keys), its OpenID configuration without the
/// client secret (the plugin echoes it; it is never shown again here), and the callback URL to register at the
/// provider.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SsoRegistered<'a> {
    pub id: uuid::Uuid,
    pub provider_id: &'a str,
    pub issuer: &'a str,
    pub domain: String,
    pub organization_id: Option<crate::domain::OrgId>,
    pub user_id: UserId,
    pub oidc_config: Option<SsoOidcConfig<'a>>,
    pub saml_config: Option<SsoSamlConfig<'a>>,
    #[serde(rename = "redirectURI")]
    pub redirect_uri: String,
    pub domain_verified: bool,
    pub default_role: &'static str,
    pub role_mapping: Option<SsoRoleMapping<'a>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SsoOidcConfig<'a> {
    pub issuer: &'a str,
    pub client_id: &'a str,
    pub authorization_endpoint: &'a str,
    pub token_endpoint: &'a str,
    pub token_endpoint_authentication: &'static str,
    pub jwks_endpoint: &'a str,
    pub pkce: bool,
    pub discovery_endpoint: &'a str,
    pub scopes: &'a [String],
    pub user_info_endpoint: Option<&'a str>,
    pub override_user_info: bool,
}

/// The register answer's `samlConfig`: what was registered, the IdP's certificates as PEM (public), never a
/// private key (none is taken).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SsoSamlConfig<'a> {
    pub issuer: &'a str,
    pub entry_point: &'a str,
    pub cert: &'a [String],
    pub audience: Option<&'a str>,
    pub callback_url: Option<&'a str>,
    pub idp_metadata: SsoIdpMetadata<'a>,
    pub want_assertions_signed: bool,
    pub authn_requests_signed: bool,
    pub identifier_format: &'a str,
    pub mapping: Option<SsoSamlMapping<'a>>,
}

#[derive(Serialize)]
pub struct SsoIdpMetadata<'a> {
    #[serde(rename = "entityID")]
    pub entity_id: &'a str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SsoSamlMapping<'a> {
    pub email: Option<&'a str>,
    pub name: Option<&'a str>,
    pub first_name: Option<&'a str>,
    pub last_name: Option<&'a str>,
}

impl<'a> SsoRegistered<'a> {
    /// `base`: the service's `/api/auth` URL.
    pub fn of(p: &'a crate::accounts::SsoProvider, base: &str) -> Self {
        SsoRegistered {
            id: p.id,
            provider_id: &p.provider_id,
            issuer: &p.issuer,
            domain: p.domain(),
            organization_id: p.organization_id,
            user_id: p.user_id,
            saml_config: p.saml.as_ref().map(|s| SsoSamlConfig {
                issuer: &p.issuer,
                entry_point: &s.entry_point,
                cert: &s.certs,
                audience: s.audience.as_deref(),
                callback_url: s.callback_url.as_deref(),
                idp_metadata: SsoIdpMetadata { entity_id: &s.idp_entity_id },
                want_assertions_signed: s.want_assertions_signed,
                authn_requests_signed: false,
                identifier_format: &s.identifier_format,
                mapping: [&s.mapping_email, &s.mapping_name, &s.mapping_first_name, &s.mapping_last_name]
                    .iter()
                    .any(|m| m.is_some())
                    .then_some(SsoSamlMapping {
                        email: s.mapping_email.as_deref(),
                        name: s.mapping_name.as_deref(),
                        first_name: s.mapping_first_name.as_deref(),
                        last_name: s.mapping_last_name.as_deref(),
                    }),
            }),
            oidc_config: p.saml.is_none().then(|| SsoOidcConfig {
                issuer: &p.issuer,
                client_id: &p.client_id,
                authorization_endpoint: &p.authorization_endpoint,
                token_endpoint: &p.token_endpoint,
                token_endpoint_authentication: p.token_auth.name(),
                jwks_endpoint: &p.jwks_endpoint,
                pkce: true,
                discovery_endpoint: &p.discovery_endpoint,
                scopes: &p.scopes,
                user_info_endpoint: p.userinfo_endpoint.as_deref(),
                override_user_info: false,
            }),
            redirect_uri: format!("{base}/sso/callback/{}", p.provider_id),
            domain_verified: p.domain_verified,
            default_role: p.default_role.as_str(),
            role_mapping: p.role_mapping.as_ref().map(SsoRoleMapping::of),
        }
    }
}
