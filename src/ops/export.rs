//! Export and import of users, organizations and memberships as JSON Lines.
//!
//! One JSON object per line with a `type` field: every `organization` line first, then every `user` line (with
//! its role, ban, primary organization and password hash in PHC form), then every `membership` (an account in an
//! organization with its roles: the primary one and those from invitations) and every `invitation` (pending or
//! not: the organization's history). Files written before memberships existed still import: the primary
//! organization becomes a `member` membership when the server loads the store. Sessions are never exported: they are bearer
//! secrets, and after a move people simply sign in again. Import is all or nothing: every value of every line is
//! checked by the parser the HTTP API takes it through (a name, an e-mail, a picture's URL, a ban's reason, a
//! slug, a role, a time of the years 1970–9999, the password hash's bound), so a file can put nothing in the store
//! that the API would have refused; every problem and any duplicate (in the file or against the data directory) is
//! reported with its line and field and nothing is written; then everything is written in one transaction. The
//! file holds password hashes: it is created 0600.

use std::collections::HashSet;
use std::io::{BufRead, BufWriter, IsTerminal, Write};
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::{OpsError, open_stopped, open_stopped_with_faults, private_file};
use crate::config::Config;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;

use crate::domain::{
    BanReason, Email, EmailDomain, ImageUrl, InvitationId, InvitationStatus, InvitedTeams, MemberRoles, Name, OrgId,
    RoleMapping, RoleSet, Slug, SsoProviderId, TeamId, Timestamp, UserId,
};
use crate::scim::Scopes as ScimScopes;
use crate::store::{
    FaultSwitch, InvitationRecord, MembershipRecord, OrgRecord, RoleMappingV1, SamlConfigV1, ScimGroupRecordV1,
    ScimTokenRecordV1, ScimUserRecordV1, SsoProviderRecord, StoreOp, TeamMemberRecordV1, TeamRecordV1, UserRecord,
};

#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
enum Line {
    Organization {
        id: String,
        name: String,
        slug: String,
        created_at: String,
        /// Set through the organization plugin; absent when none.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        logo: Option<String>,
        /// A JSON object, as text; absent when none.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        metadata: Option<String>,
        /// The organization plugin's teams, with the users in them; absent when none (and in files written
        /// before teams were exported).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        teams: Vec<TeamLine>,
        /// Its single sign-on policy: passwords refused for its verified domains; absent when off (and in files
        /// written before SSO was exported).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        require_sso: bool,
    },
    User {
        id: String,
        name: String,
        email: String,
        image: Option<String>,
        role: String,
        banned: bool,
        ban_reason: Option<String>,
        organization_id: Option<String>,
        password_hash: String,
        created_at: String,
        updated_at: String,
        /// Absent in files written before e-mail verification existed: unverified.
        #[serde(default)]
        email_verified: bool,
        /// When a ban ends by itself; absent or null: it lasts until lifted.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ban_expires: Option<String>,
        /// better-auth's `username` (normalised) and `displayUsername`; absent when none.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        username: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        display_username: Option<String>,
    },
    Membership {
        organization_id: String,
        user_id: String,
        /// better-auth's form: `owner`, `admin`, `member`, or several comma separated.
        role: String,
        created_at: String,
    },
    Invitation {
        id: String,
        organization_id: String,
        email: String,
        role: String,
        /// `pending`, `accepted`, `rejected` or `canceled`.
        status: String,
        inviter_id: String,
        expires_at: String,
        created_at: String,
        /// The teams of its organization that accepting puts the invitee in, as the plugin's `teamId`: their ids
        /// joined by commas; absent for none (and in files written before invitations carried teams).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        team_id: Option<String>,
    },
    /// An organization's single sign-on provider (`@better-auth/sso`): OpenID Connect (`oidc`) or SAML 2.0
    /// (`saml`). A pending DNS verification is not carried (it is asked for again); the OIDC client secret is
    /// carried as the store holds it, sealed with the data directory's key (see [`OidcLine`]).
    SsoProvider {
        id: String,
        provider_id: String,
        organization_id: Option<String>,
        user_id: String,
        issuer: String,
        domains: Vec<String>,
        domain_verified: bool,
        /// `member` or `admin`.
        default_role: String,
        created_at: String,
        updated_at: String,
        /// Boxed: the largest parts of any line, they would size every line.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        oidc: Option<Box<OidcLine>>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        saml: Option<Box<SamlLine>>,
        /// Which of the identity provider's groups give which of the organization's roles (none: every new member
        /// gets the default role).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        role_mapping: Option<RoleMappingLine>,
    },
    /// A SCIM token of an organization: its secret only as the SHA-256 the store keeps (the token itself was
    /// shown once and exists nowhere else), so the directory's token works on the new installation.
    ScimToken {
        id: String,
        organization_id: String,
        /// 64 hex digits.
        secret_hash: String,
        scopes: Vec<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        expires_at: Option<String>,
        created_by: String,
        created_at: String,
    },
    /// What an organization's directory said of an account it provisioned (the SCIM User resource).
    ScimUser {
        organization_id: String,
        user_id: String,
        user_name: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        external_id: Option<String>,
        active: bool,
        /// The rest of the resource, a JSON object as text.
        attributes: String,
        created_at: String,
        updated_at: String,
    },
    /// A team of an organization that its directory made as a SCIM Group.
    ScimGroup {
        organization_id: String,
        team_id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        external_id: Option<String>,
    },
}

/// An OpenID Connect provider's part of an `sso_provider` line. The client secret goes as the store holds it:
/// sealed (XChaCha20-Poly1305) with the source's data key, bound to the provider's record id, so the file alone
/// does not give it away. It opens where the data directory has the same key (`data.key`, as a backup's `.key`
/// beside it); elsewhere the provider's owner sets it again (`sso/update-provider` with `oidcConfig.clientSecret`).
#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
struct OidcLine {
    client_id: String,
    /// Base64 of the sealed value.
    sealed_client_secret: String,
    /// `client_secret_basic` or `client_secret_post`.
    token_auth: String,
    discovery_endpoint: String,
    authorization_endpoint: String,
    token_endpoint: String,
    jwks_endpoint: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    userinfo_endpoint: Option<String>,
    #[serde(default)]
    scopes: Vec<String>,
}

/// An `sso_provider` line's role mapping: the claim or attribute that carries the groups (absent: the defaults)
/// and the `group`/`role` pairs, as `sso/register`'s `roleMapping`.
#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
struct RoleMappingLine {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    claim: Option<String>,
    mappings: Vec<GroupRoleLine>,
}

#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
struct GroupRoleLine {
    group: String,
    role: String,
}

/// A SAML 2.0 provider's part of an `sso_provider` line: the identity provider it trusts (its certificates are
/// public; no private key is ever kept).
#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
struct SamlLine {
    entry_point: String,
    idp_entity_id: String,
    /// The IdP's signing certificates, base64 of their DER.
    certs: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    audience: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    callback_url: Option<String>,
    want_assertions_signed: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    identifier_format: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    mapping_email: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    mapping_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    mapping_first_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    mapping_last_name: Option<String>,
}

/// A team inside an organization's line.
#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
struct TeamLine {
    id: String,
    name: String,
    created_at: String,
    /// Absent (or null) until the team is first changed, as the plugin's `updatedAt`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    updated_at: Option<String>,
    #[serde(default)]
    members: Vec<TeamMemberLine>,
}

/// A user's place in a team. It counts while the user's membership of the organization is at most as old (a
/// membership made after it, by leaving and joining again, leaves the user out of the team, as on the server).
#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
struct TeamMemberLine {
    user_id: String,
    created_at: String,
}

/// Writes every organization and user as JSON Lines to `out`, or to standard output. Returns a report.
pub fn export(config: &Config, out: Option<&Path>) -> Result<String, OpsError> {
    let loaded = open_stopped(config)?.load()?;
    let mut sink: Box<dyn Write> = match out {
        Some(path) => Box::new(private_file(path)?),
        None => Box::new(std::io::stdout().lock()),
    };
    let mut w = BufWriter::new(&mut sink);
    let mut orgs = loaded.orgs;
    orgs.sort_by_key(|o| (o.created_at_ms, o.id));
    let mut users = loaded.users;
    users.sort_by_key(|u| (u.created_at_ms, u.id));
    let mut members = loaded.members;
    members.sort_by_key(|m| (m.org, m.created_at_ms, m.user));
    let mut invitations = loaded.invitations;
    invitations.sort_by_key(|i| (i.org, i.created_at_ms, i.id));
    // Single sign-on and SCIM after the organizations and accounts they name, each in a stable order.
    let store = open_stopped(config)?;
    let mut providers = store.sso_providers()?;
    providers.sort_by_key(|p| (p.created_at_ms, p.id));
    let mut tokens = store.scim_tokens()?;
    tokens.sort_by_key(|t| (t.org, t.created_at_ms, t.id));
    let mut scim_users = store.scim_users(None)?;
    scim_users.sort_by_key(|u| (u.org, u.created_at_ms, u.user));
    let mut scim_groups = store.scim_groups(None)?;
    scim_groups.sort_by_key(|g| (g.org, g.team));
    drop(store);
    let lines = orgs
        .iter()
        .map(org_line)
        .chain(users.iter().map(user_line))
        .chain(members.iter().map(member_line))
        .chain(invitations.iter().map(invitation_line))
        .chain(providers.iter().map(sso_line))
        .chain(tokens.iter().map(scim_token_line))
        .chain(scim_users.iter().map(scim_user_line))
        .chain(scim_groups.iter().map(scim_group_line));
    for line in lines {
        serde_json::to_writer(&mut w, &line).map_err(|e| OpsError::Io(e.to_string()))?;
        w.write_all(b"\n").map_err(|e| OpsError::Io(e.to_string()))?;
    }
    w.flush().map_err(|e| OpsError::Io(e.to_string()))?;
    Ok(format!(
        "exported {} organizations, {} users, {} memberships and {} invitations (no sessions){}",
        orgs.len(),
        users.len(),
        members.len(),
        invitations.len(),
        sso_report(providers.len(), tokens.len(), scim_users.len(), scim_groups.len())
    ))
}

/// The single sign-on part of a report, when there is any.
fn sso_report(providers: usize, tokens: usize, users: usize, groups: usize) -> String {
    if providers + tokens + users + groups == 0 {
        return String::new();
    }
    format!("; {providers} SSO providers, {tokens} SCIM tokens, {users} SCIM users and {groups} SCIM groups")
}

/// Reads a file written by [`export`] into `config.data_dir`. Returns a report; refuses the whole file, listing
/// every problem, when any line is invalid or a duplicate.
pub fn import(config: &Config, input: &Path) -> Result<String, OpsError> {
    import_with_faults(config, input, FaultSwitch::default())
}

fn import_with_faults(config: &Config, input: &Path, faults: FaultSwitch) -> Result<String, OpsError> {
    let store = open_stopped_with_faults(config, faults)?;
    let existing = store.load()?;
    let roles = RoleSet::new(&config.roles.allowed, &config.roles.default);
    let file = std::fs::File::open(input).map_err(|e| OpsError::Io(format!("{}: {e}", input.display())))?;
    let mut seen = Seen::default();
    for u in &existing.users {
        seen.user_ids.insert(u.id);
        seen.emails.insert(u.email.clone());
    }
    for o in &existing.orgs {
        seen.org_ids.insert(o.id);
        seen.slugs.insert(o.slug.clone());
    }
    seen.members.extend(existing.members.iter().map(|m| (m.org, m.user)));
    seen.invitation_ids.extend(existing.invitations.iter().map(|i| i.id));
    seen.team_ids.extend(existing.orgs.iter().flat_map(|o| o.teams.iter().map(|t| t.id)));
    seen.team_orgs.extend(existing.orgs.iter().flat_map(|o| o.teams.iter().map(|t| (o.id, t.id))));
    for p in store.sso_providers()? {
        seen.provider_ids.insert(p.provider_id);
        seen.provider_record_ids.insert(p.id);
    }
    seen.token_ids.extend(store.scim_tokens()?.iter().map(|t| t.id));
    seen.scim_users.extend(store.scim_users(None)?.iter().map(|u| (u.org, u.user)));
    seen.scim_groups.extend(store.scim_groups(None)?.iter().map(|g| (g.org, g.team)));
    let progress = std::io::stderr().is_terminal();
    let (mut ops, mut problems) = (Vec::new(), Vec::new());
    for (n, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line = line.map_err(|e| OpsError::Io(format!("line {}: {e}", n + 1)))?;
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Line>(&line).map_err(|e| e.to_string()).and_then(|l| seen.check(l, &roles)) {
            Ok(op) => ops.push(op),
            Err(problem) => problems.push(format!("line {}: {problem}", n + 1)),
        }
        if progress && n % 10_000 == 0 {
            eprint!("\rchecked {n} lines");
        }
    }
    if progress {
        eprintln!();
    }
    if !problems.is_empty() {
        let shown: Vec<&str> = problems.iter().take(50).map(String::as_str).collect();
        let more = problems.len().saturating_sub(shown.len());
        let tail = if more > 0 { format!("\n… and {more} more") } else { String::new() };
        return Err(OpsError::Invalid(format!(
            "nothing imported: {} problem(s)\n{}{tail}",
            problems.len(),
            shown.join("\n")
        )));
    }
    // One transaction: a crash or a disk error leaves the directory as it was, and a second run can start over.
    store.commit(&ops)?;
    let oidc = match seen.new_oidc {
        0 => String::new(),
        n => format!(
            "\n{n} OpenID Connect client secret(s) are sealed with the exporting directory's data key: they open \
             with that key in place (copy its data.key before the first start), else set each again with \
             sso/update-provider"
        ),
    };
    Ok(format!(
        "imported {} organizations, {} users, {} memberships and {} invitations{}{oidc}",
        seen.new_orgs,
        seen.new_users,
        seen.new_members,
        seen.new_invitations,
        sso_report(seen.new_providers, seen.new_tokens, seen.new_scim_users, seen.new_scim_groups)
    ))
}

/// Identities already taken, in the data directory or earlier in the file.
#[derive(Default)]
struct Seen {
    user_ids: HashSet<[u8; 16]>,
    emails: HashSet<String>,
    org_ids: HashSet<[u8; 16]>,
    slugs: HashSet<String>,
    members: HashSet<([u8; 16], [u8; 16])>,
    invitation_ids: HashSet<[u8; 16]>,
    team_ids: HashSet<[u8; 16]>,
    /// Each team with its organization, for a SCIM Group's line.
    team_orgs: HashSet<([u8; 16], [u8; 16])>,
    provider_ids: HashSet<String>,
    provider_record_ids: HashSet<[u8; 16]>,
    token_ids: HashSet<[u8; 16]>,
    scim_users: HashSet<([u8; 16], [u8; 16])>,
    scim_groups: HashSet<([u8; 16], [u8; 16])>,
    new_orgs: usize,
    new_users: usize,
    new_members: usize,
    new_invitations: usize,
    new_providers: usize,
    new_oidc: usize,
    new_tokens: usize,
    new_scim_users: usize,
    new_scim_groups: usize,
}

impl Seen {
    /// A team of an organization's line: its id unique in the file and the data directory, a name the server
    /// takes, each user once. Its users need not be in the file (an entry without a membership counts for
    /// nothing, as on the server).
    fn team(&mut self, t: TeamLine) -> Result<TeamRecordV1, String> {
        let id = TeamId::parse(&t.id).ok_or("teams: team id is not a UUID")?.to_bytes();
        if !self.team_ids.insert(id) {
            return Err(format!("teams: duplicate team id {}", t.id));
        }
        let name = Name::parse(&t.name).map_err(|e| format!("teams: team name {e}"))?;
        let created_at_ms = time("teams: created_at", &t.created_at)?;
        let updated_at_ms = t.updated_at.map(|u| time("teams: updated_at", &u)).transpose()?;
        let mut users = HashSet::new();
        let mut members = Vec::with_capacity(t.members.len());
        for m in t.members {
            let user = UserId::parse(&m.user_id).ok_or("teams: user_id is not a UUID")?.to_bytes();
            if !users.insert(user) {
                return Err(format!("teams: {} is twice in team {}", m.user_id, t.id));
            }
            members.push(TeamMemberRecordV1 { user, created_at_ms: time("teams: created_at", &m.created_at)? });
        }
        Ok(TeamRecordV1 { id, name: name.to_string(), created_at_ms, updated_at_ms, members })
    }

    fn check(&mut self, line: Line, roles: &RoleSet) -> Result<StoreOp, String> {
        match line {
            Line::Organization { id, name, slug, created_at, logo, metadata, teams, require_sso } => {
                let id = OrgId::parse(&id).ok_or("organization id is not a UUID")?.to_bytes();
                let name = Name::parse(&name).map_err(|e| format!("name: organization name {e}"))?;
                let slug = Slug::parse(&slug).map_err(|e| format!("slug: {e}"))?;
                let created_at_ms = time("created_at", &created_at)?;
                // What the organization plugin's create and update take (`logo`, `metadata`).
                if logo.as_ref().is_some_and(|l| l.len() > 2048) {
                    return Err("logo: at most 2048 characters".into());
                }
                let metadata = metadata.map(|m| object(&m)).transpose()?;
                let teams = teams.into_iter().map(|t| self.team(t)).collect::<Result<Vec<_>, _>>()?;
                self.team_orgs.extend(teams.iter().map(|t| (id, t.id)));
                if !self.org_ids.insert(id) {
                    return Err("duplicate organization id".into());
                }
                if !self.slugs.insert(slug.to_string()) {
                    return Err(format!("duplicate slug {slug}"));
                }
                self.new_orgs += 1;
                Ok(StoreOp::PutOrg(OrgRecord {
                    id,
                    name: name.to_string(),
                    slug: slug.to_string(),
                    created_at_ms,
                    logo,
                    metadata,
                    teams,
                    roles: Vec::new(),
                    require_sso,
                }))
            }
            Line::User {
                id,
                name,
                email,
                image,
                role,
                banned,
                ban_reason,
                organization_id,
                password_hash,
                created_at,
                updated_at,
                email_verified,
                ban_expires,
                username,
                display_username,
            } => {
                let id = UserId::parse(&id).ok_or("user id is not a UUID")?.to_bytes();
                let name = Name::parse(&name).map_err(|e| format!("name: name {e}"))?;
                let email = Email::parse(&email).map_err(|_| format!("email: invalid e-mail {email:?}"))?;
                let role = roles.parse(&role).ok_or_else(|| format!("role: {role:?} is not configured"))?;
                // Sign-up's and update-user's rule, kept in its normalised form as they keep it.
                let image = image.map(|i| ImageUrl::parse(&i).map_err(|e| format!("image: {e}"))).transpose()?;
                // ban-user's rule; a blank reason is none. Checked whether or not the account is banned: a file
                // that holds a value the API refuses is not one this service wrote.
                let ban_reason = match ban_reason {
                    Some(r) => BanReason::parse(&r).map_err(|e| format!("ban_reason: {e}"))?,
                    None => None,
                };
                let created_at_ms = time("created_at", &created_at)?;
                let updated_at_ms = time("updated_at", &updated_at)?;
                let ban_expires_ms = ban_expires.as_deref().map(|t| time("ban_expires", t)).transpose()?;
                let organization_id = match organization_id {
                    Some(org) => {
                        let org = OrgId::parse(&org).ok_or("organization_id is not a UUID")?.to_bytes();
                        if !self.org_ids.contains(&org) {
                            return Err("organization_id names no organization".into());
                        }
                        Some(org)
                    }
                    None => None,
                };
                // Empty: an account without a password (provisioned over SCIM, or made by a single sign-on), as
                // the store keeps it.
                if !password_hash.is_empty() {
                    crate::hashing::check_stored_hash(&password_hash).map_err(|e| format!("password_hash: {e}"))?;
                }
                if !self.user_ids.insert(id) {
                    return Err("duplicate user id".into());
                }
                if !self.emails.insert(email.to_string()) {
                    return Err(format!("duplicate e-mail {email}"));
                }
                self.new_users += 1;
                Ok(StoreOp::PutUser(UserRecord {
                    id,
                    name: name.to_string(),
                    email: email.to_string(),
                    image: image.map(String::from),
                    role: role.to_string(),
                    banned,
                    ban_reason: ban_reason.filter(|_| banned).map(|r| r.to_string()),
                    organization_id,
                    password_hash,
                    created_at_ms,
                    updated_at_ms,
                    email_verified,
                    ban_expires_ms: ban_expires_ms.filter(|_| banned),
                    two_factor: None,
                    username,
                    display_username,
                }))
            }
            Line::Membership { organization_id, user_id, role, created_at } => {
                let org = self.org(&organization_id)?;
                let user = UserId::parse(&user_id).ok_or("user_id is not a UUID")?.to_bytes();
                if !self.user_ids.contains(&user) {
                    return Err("user_id names no user".into());
                }
                let roles = member_roles(&role)?;
                let created_at_ms = time("created_at", &created_at)?;
                if !self.members.insert((org, user)) {
                    return Err("duplicate membership".into());
                }
                self.new_members += 1;
                Ok(StoreOp::PutMember(MembershipRecord {
                    org,
                    user,
                    roles: roles.bits(),
                    created_at_ms,
                    custom: Vec::new(),
                }))
            }
            Line::Invitation {
                id,
                organization_id,
                email,
                role,
                status,
                inviter_id,
                expires_at,
                created_at,
                team_id,
            } => {
                let id = InvitationId::parse(&id).ok_or("invitation id is not a UUID")?.to_bytes();
                let org = self.org(&organization_id)?;
                let teams = self.invited_teams(org, team_id.as_deref())?;
                let email = Email::parse(&email).map_err(|_| format!("email: invalid e-mail {email:?}"))?;
                let roles = member_roles(&role)?;
                let (expires_at_ms, created_at_ms) =
                    (time("expires_at", &expires_at)?, time("created_at", &created_at)?);
                let status = [
                    InvitationStatus::Pending,
                    InvitationStatus::Accepted,
                    InvitationStatus::Rejected,
                    InvitationStatus::Canceled,
                ]
                .into_iter()
                .find(|s| s.as_str() == status)
                .ok_or_else(|| format!("status: invitation status {status:?} is unknown"))?;
                // The inviter may have left or been removed since: kept as the id it was.
                let inviter = UserId::parse(&inviter_id).ok_or("inviter_id is not a UUID")?.to_bytes();
                if !self.invitation_ids.insert(id) {
                    return Err("duplicate invitation id".into());
                }
                self.new_invitations += 1;
                Ok(StoreOp::PutInvitation(InvitationRecord {
                    id,
                    org,
                    email: email.to_string(),
                    roles: roles.bits(),
                    inviter,
                    status: status.code(),
                    expires_at_ms,
                    created_at_ms,
                    teams,
                }))
            }
            Line::SsoProvider {
                id,
                provider_id,
                organization_id,
                user_id,
                issuer,
                domains,
                domain_verified,
                default_role,
                created_at,
                updated_at,
                oidc,
                saml,
                role_mapping,
            } => self.sso_provider(
                id,
                provider_id,
                organization_id,
                user_id,
                issuer,
                domains,
                domain_verified,
                default_role,
                created_at,
                updated_at,
                oidc,
                saml,
                role_mapping,
            ),
            Line::ScimToken { id, organization_id, secret_hash, scopes, expires_at, created_by, created_at } => {
                let id = uuid_field("id", &id)?;
                let org = self.org(&organization_id)?;
                let secret_hash: [u8; 32] = hex::decode(&secret_hash)
                    .ok()
                    .and_then(|b| b.try_into().ok())
                    .ok_or("secret_hash: not 64 hex digits")?;
                let scopes =
                    ScimScopes::parse(scopes.iter().map(String::as_str)).map_err(|e| format!("scopes: {e}"))?.bits();
                let expires_at_ms = expires_at.map(|t| time("expires_at", &t)).transpose()?;
                let created_by = uuid_field("created_by", &created_by)?;
                let created_at_ms = time("created_at", &created_at)?;
                if !self.token_ids.insert(id) {
                    return Err("duplicate SCIM token id".into());
                }
                self.new_tokens += 1;
                Ok(StoreOp::PutScimToken(ScimTokenRecordV1 {
                    id,
                    org,
                    secret_hash,
                    scopes,
                    expires_at_ms,
                    created_by,
                    created_at_ms,
                }))
            }
            Line::ScimUser {
                organization_id,
                user_id,
                user_name,
                external_id,
                active,
                attributes,
                created_at,
                updated_at,
            } => {
                let org = self.org(&organization_id)?;
                let user = uuid_field("user_id", &user_id)?;
                if !self.user_ids.contains(&user) {
                    return Err("user_id names no user".into());
                }
                // POST /Users's bounds: a userName of 1 to 256 characters, an externalId of at most 1024.
                if user_name.trim().is_empty() || user_name.chars().count() > 256 {
                    return Err("user_name: 1 to 256 characters".into());
                }
                if external_id.as_ref().is_some_and(|e| e.is_empty() || e.len() > 1024) {
                    return Err("external_id: 1 to 1024 characters".into());
                }
                let attributes = match serde_json::from_str::<serde_json::Value>(&attributes) {
                    Ok(object @ serde_json::Value::Object(_)) => object.to_string(),
                    _ => return Err("attributes: not a JSON object".into()),
                };
                let (created_at_ms, updated_at_ms) =
                    (time("created_at", &created_at)?, time("updated_at", &updated_at)?);
                if !self.scim_users.insert((org, user)) {
                    return Err("duplicate SCIM user".into());
                }
                self.new_scim_users += 1;
                Ok(StoreOp::PutScimUser(ScimUserRecordV1 {
                    org,
                    user,
                    user_name,
                    external_id,
                    active,
                    attributes,
                    created_at_ms,
                    updated_at_ms,
                }))
            }
            Line::ScimGroup { organization_id, team_id, external_id } => {
                let org = self.org(&organization_id)?;
                let team = uuid_field("team_id", &team_id)?;
                if !self.team_orgs.contains(&(org, team)) {
                    return Err("team_id names no team of the organization".into());
                }
                if external_id.as_ref().is_some_and(|e| e.is_empty() || e.len() > 1024) {
                    return Err("external_id: 1 to 1024 characters".into());
                }
                if !self.scim_groups.insert((org, team)) {
                    return Err("duplicate SCIM group".into());
                }
                self.new_scim_groups += 1;
                Ok(StoreOp::PutScimGroup(ScimGroupRecordV1 { org, team, external_id }))
            }
        }
    }

    /// An `sso_provider` line: what `sso/register` takes (a provider id, e-mail domains, a default role, the
    /// organization of the file or the data directory), unique by `providerId` and record id.
    #[allow(clippy::too_many_arguments)]
    fn sso_provider(
        &mut self,
        id: String,
        provider_id: String,
        organization_id: Option<String>,
        user_id: String,
        issuer: String,
        domains: Vec<String>,
        domain_verified: bool,
        default_role: String,
        created_at: String,
        updated_at: String,
        oidc: Option<Box<OidcLine>>,
        saml: Option<Box<SamlLine>>,
        role_mapping: Option<RoleMappingLine>,
    ) -> Result<StoreOp, String> {
        let id = uuid_field("id", &id)?;
        let provider_id =
            SsoProviderId::parse(&provider_id).map_err(|e| format!("provider_id: {e}"))?.as_str().to_owned();
        let organization_id = organization_id.map(|o| self.org(&o)).transpose()?;
        let user_id = uuid_field("user_id", &user_id)?;
        let issuer = url_field("issuer", issuer)?;
        if domains.is_empty() || domains.len() > 20 {
            return Err("domains: one to 20 e-mail domains".into());
        }
        let domains = domains
            .iter()
            .map(|d| EmailDomain::parse(d).map(|d| d.as_str().to_owned()).map_err(|e| format!("domains: {e}")))
            .collect::<Result<Vec<_>, _>>()?;
        if !["member", "admin"].contains(&default_role.as_str()) {
            return Err(format!("default_role: {default_role:?} is not member or admin"));
        }
        let (created_at_ms, updated_at_ms) = (time("created_at", &created_at)?, time("updated_at", &updated_at)?);
        // `sso/register`'s rules for the pairs; a role the organization does not define (yet) gives nothing at
        // sign-in, as one it deleted since.
        let role_mapping = role_mapping
            .map(|m| {
                let pairs = m.mappings.iter().map(|p| (p.group.as_str(), p.role.as_str()));
                RoleMapping::parse(m.claim.as_deref(), pairs).map(|m| RoleMappingV1::from(&m))
            })
            .transpose()
            .map_err(|e| format!("role_mapping: {e}"))?;
        let mut record = SsoProviderRecord {
            id,
            provider_id: provider_id.clone(),
            organization_id,
            user_id,
            issuer,
            domains,
            domain_verified,
            verification: None,
            client_id: String::new(),
            sealed_secret: Vec::new(),
            token_auth: 1,
            discovery_endpoint: String::new(),
            authorization_endpoint: String::new(),
            token_endpoint: String::new(),
            jwks_endpoint: String::new(),
            userinfo_endpoint: None,
            scopes: Vec::new(),
            default_role,
            created_at_ms,
            updated_at_ms,
            saml: None,
            role_mapping,
        };
        match (oidc, saml) {
            (Some(o), None) => {
                if o.client_id.is_empty() || o.client_id.len() > 256 {
                    return Err("oidc.client_id: 1 to 256 characters".into());
                }
                record.client_id = o.client_id;
                record.sealed_secret = STANDARD
                    .decode(o.sealed_client_secret.as_bytes())
                    .ok()
                    .filter(|b| !b.is_empty())
                    .ok_or("oidc.sealed_client_secret: not base64 of a sealed value")?;
                record.token_auth = match o.token_auth.as_str() {
                    "client_secret_basic" => 1,
                    "client_secret_post" => 2,
                    other => return Err(format!("oidc.token_auth: {other:?} is not client_secret_basic or _post")),
                };
                record.discovery_endpoint = url_field("oidc.discovery_endpoint", o.discovery_endpoint)?;
                record.authorization_endpoint = url_field("oidc.authorization_endpoint", o.authorization_endpoint)?;
                record.token_endpoint = url_field("oidc.token_endpoint", o.token_endpoint)?;
                record.jwks_endpoint = url_field("oidc.jwks_endpoint", o.jwks_endpoint)?;
                record.userinfo_endpoint =
                    o.userinfo_endpoint.map(|u| url_field("oidc.userinfo_endpoint", u)).transpose()?;
                if o.scopes.len() > 20 || o.scopes.iter().any(|s| s.is_empty() || s.len() > 64 || s.contains(' ')) {
                    return Err("oidc.scopes: at most 20 scopes of 1 to 64 characters without spaces".into());
                }
                record.scopes = o.scopes;
                self.new_oidc += 1;
            }
            (None, Some(saml)) => {
                if saml.certs.is_empty() {
                    return Err("saml.certs: at least one certificate".into());
                }
                // The rule `sso/register` applies: each reads as an X.509 certificate with a key that verifies.
                let certs = saml
                    .certs
                    .iter()
                    .map(|c| crate::saml::certificate(c).map_err(|e| format!("saml.certs: {e}")))
                    .collect::<Result<Vec<_>, _>>()?;
                if saml.idp_entity_id.is_empty() || saml.idp_entity_id.len() > MAX_URL {
                    return Err("saml.idp_entity_id: 1 to 2048 characters".into());
                }
                let text = |field: &str, v: Option<String>| match v {
                    Some(t) if t.is_empty() || t.len() > MAX_URL => Err(format!("saml.{field}: 1 to 2048 characters")),
                    v => Ok(v),
                };
                record.saml = Some(SamlConfigV1 {
                    entry_point: url_field("saml.entry_point", saml.entry_point)?,
                    idp_entity_id: saml.idp_entity_id,
                    certs,
                    audience: text("audience", saml.audience)?,
                    callback_url: text("callback_url", saml.callback_url)?,
                    want_assertions_signed: saml.want_assertions_signed,
                    identifier_format: text("identifier_format", saml.identifier_format)?,
                    mapping_email: text("mapping_email", saml.mapping_email)?,
                    mapping_name: text("mapping_name", saml.mapping_name)?,
                    mapping_first_name: text("mapping_first_name", saml.mapping_first_name)?,
                    mapping_last_name: text("mapping_last_name", saml.mapping_last_name)?,
                });
            }
            _ => return Err("an sso_provider line has either oidc or saml".into()),
        }
        if !self.provider_ids.insert(provider_id.clone()) {
            return Err(format!("duplicate provider_id {provider_id}"));
        }
        if !self.provider_record_ids.insert(id) {
            return Err("duplicate sso_provider id".into());
        }
        self.new_providers += 1;
        Ok(StoreOp::PutSsoProvider(Box::new(record)))
    }

    /// An organization id of the file or the data directory.
    fn org(&self, id: &str) -> Result<[u8; 16], String> {
        let org = OrgId::parse(id).ok_or("organization_id is not a UUID")?.to_bytes();
        if !self.org_ids.contains(&org) {
            return Err("organization_id names no organization".into());
        }
        Ok(org)
    }

    /// An invitation's `team_id` (ids joined by commas): each a team of its organization `org`, as invite-member
    /// checks it.
    fn invited_teams(&self, org: [u8; 16], joined: Option<&str>) -> Result<Vec<[u8; 16]>, String> {
        let ids = joined.filter(|j| !j.is_empty()).map(|j| j.split(',').collect::<Vec<_>>()).unwrap_or_default();
        let mut teams = Vec::new();
        for raw in ids {
            let team = TeamId::parse(raw).ok_or_else(|| format!("team_id: {raw:?} is not a UUID"))?;
            if !self.team_orgs.contains(&(org, team.to_bytes())) {
                return Err(format!("team_id: {raw} names no team of the organization"));
            }
            teams.push(team);
        }
        Ok(InvitedTeams::new(teams).iter().map(|t| t.to_bytes()).collect())
    }
}

fn member_roles(role: &str) -> Result<MemberRoles, String> {
    MemberRoles::parse([role]).map_err(|_| format!("role: {role:?} is not owner, admin or member"))
}

/// A JSON object, kept in the form the organization plugin keeps what it is sent (serialised again).
fn object(text: &str) -> Result<String, String> {
    match serde_json::from_str::<serde_json::Value>(text) {
        Ok(object @ serde_json::Value::Object(_)) => Ok(object.to_string()),
        _ => Err("metadata: organization metadata is not a JSON object".into()),
    }
}

/// The field `field`'s time, as milliseconds: RFC 3339, of the years a record may hold ([`Timestamp::storable`]).
fn time(field: &str, rfc3339: &str) -> Result<i64, String> {
    Timestamp::parse_rfc3339(rfc3339).map(Timestamp::as_millis).map_err(|e| format!("{field}: {rfc3339:?} {e}"))
}

/// The longest URL or entity ID a provider's field may hold (`sso/register`'s bound).
const MAX_URL: usize = 2048;

fn uuid_field(field: &str, text: &str) -> Result<[u8; 16], String> {
    uuid::Uuid::try_parse(text).map(|u| u.into_bytes()).map_err(|_| format!("{field}: not a UUID"))
}

/// An absolute http(s) URL of at most [`MAX_URL`] characters.
fn url_field(field: &str, text: String) -> Result<String, String> {
    let ok = text.len() <= MAX_URL
        && url::Url::parse(&text).is_ok_and(|u| matches!(u.scheme(), "http" | "https") && u.has_host());
    if ok { Ok(text) } else { Err(format!("{field}: not an absolute http(s) URL of at most {MAX_URL} characters")) }
}

fn uuid(bytes: [u8; 16]) -> String {
    uuid::Uuid::from_bytes(bytes).to_string()
}

fn org_line(o: &OrgRecord) -> Line {
    Line::Organization {
        id: uuid(o.id),
        name: o.name.clone(),
        slug: o.slug.clone(),
        created_at: Timestamp::from_millis(o.created_at_ms).to_rfc3339(),
        logo: o.logo.clone(),
        metadata: o.metadata.clone(),
        require_sso: o.require_sso,
        teams: o
            .teams
            .iter()
            .map(|t| TeamLine {
                id: uuid(t.id),
                name: t.name.clone(),
                created_at: Timestamp::from_millis(t.created_at_ms).to_rfc3339(),
                updated_at: t.updated_at_ms.map(|u| Timestamp::from_millis(u).to_rfc3339()),
                members: t
                    .members
                    .iter()
                    .map(|m| TeamMemberLine {
                        user_id: uuid(m.user),
                        created_at: Timestamp::from_millis(m.created_at_ms).to_rfc3339(),
                    })
                    .collect(),
            })
            .collect(),
    }
}

fn sso_line(p: &SsoProviderRecord) -> Line {
    let oidc = p.saml.is_none().then(|| {
        Box::new(OidcLine {
            client_id: p.client_id.clone(),
            sealed_client_secret: STANDARD.encode(&p.sealed_secret),
            token_auth: if p.token_auth == 2 { "client_secret_post" } else { "client_secret_basic" }.to_owned(),
            discovery_endpoint: p.discovery_endpoint.clone(),
            authorization_endpoint: p.authorization_endpoint.clone(),
            token_endpoint: p.token_endpoint.clone(),
            jwks_endpoint: p.jwks_endpoint.clone(),
            userinfo_endpoint: p.userinfo_endpoint.clone(),
            scopes: p.scopes.clone(),
        })
    });
    let saml = p.saml.as_ref().map(|s| {
        Box::new(SamlLine {
            entry_point: s.entry_point.clone(),
            idp_entity_id: s.idp_entity_id.clone(),
            certs: s.certs.iter().map(|c| STANDARD.encode(c)).collect(),
            audience: s.audience.clone(),
            callback_url: s.callback_url.clone(),
            want_assertions_signed: s.want_assertions_signed,
            identifier_format: s.identifier_format.clone(),
            mapping_email: s.mapping_email.clone(),
            mapping_name: s.mapping_name.clone(),
            mapping_first_name: s.mapping_first_name.clone(),
            mapping_last_name: s.mapping_last_name.clone(),
        })
    });
    Line::SsoProvider {
        id: uuid(p.id),
        provider_id: p.provider_id.clone(),
        organization_id: p.organization_id.map(uuid),
        user_id: uuid(p.user_id),
        issuer: p.issuer.clone(),
        domains: p.domains.clone(),
        domain_verified: p.domain_verified,
        default_role: p.default_role.clone(),
        created_at: Timestamp::from_millis(p.created_at_ms).to_rfc3339(),
        updated_at: Timestamp::from_millis(p.updated_at_ms).to_rfc3339(),
        oidc,
        saml,
        role_mapping: p.role_mapping.as_ref().map(|m| RoleMappingLine {
            claim: m.claim.clone(),
            mappings: m
                .pairs
                .iter()
                .map(|(group, role)| GroupRoleLine { group: group.clone(), role: role.clone() })
                .collect(),
        }),
    }
}

fn scim_token_line(t: &ScimTokenRecordV1) -> Line {
    Line::ScimToken {
        id: uuid(t.id),
        organization_id: uuid(t.org),
        secret_hash: hex::encode(t.secret_hash),
        scopes: ScimScopes::from_bits(t.scopes).names().into_iter().map(str::to_owned).collect(),
        expires_at: t.expires_at_ms.map(|ms| Timestamp::from_millis(ms).to_rfc3339()),
        created_by: uuid(t.created_by),
        created_at: Timestamp::from_millis(t.created_at_ms).to_rfc3339(),
    }
}

fn scim_user_line(u: &ScimUserRecordV1) -> Line {
    Line::ScimUser {
        organization_id: uuid(u.org),
        user_id: uuid(u.user),
        user_name: u.user_name.clone(),
        external_id: u.external_id.clone(),
        active: u.active,
        attributes: u.attributes.clone(),
        created_at: Timestamp::from_millis(u.created_at_ms).to_rfc3339(),
        updated_at: Timestamp::from_millis(u.updated_at_ms).to_rfc3339(),
    }
}

fn scim_group_line(g: &ScimGroupRecordV1) -> Line {
    Line::ScimGroup { organization_id: uuid(g.org), team_id: uuid(g.team), external_id: g.external_id.clone() }
}

fn member_line(m: &MembershipRecord) -> Line {
    Line::Membership {
        organization_id: uuid(m.org),
        user_id: uuid(m.user),
        role: MemberRoles::from_bits(m.roles).to_string(),
        created_at: Timestamp::from_millis(m.created_at_ms).to_rfc3339(),
    }
}

fn invitation_line(i: &InvitationRecord) -> Line {
    Line::Invitation {
        id: uuid(i.id),
        organization_id: uuid(i.org),
        email: i.email.clone(),
        role: MemberRoles::from_bits(i.roles).to_string(),
        status: InvitationStatus::from_code(i.status).as_str().to_owned(),
        inviter_id: uuid(i.inviter),
        expires_at: Timestamp::from_millis(i.expires_at_ms).to_rfc3339(),
        created_at: Timestamp::from_millis(i.created_at_ms).to_rfc3339(),
        team_id: InvitedTeams::new(i.teams.iter().copied().map(TeamId::from_bytes)).joined(),
    }
}

fn user_line(u: &UserRecord) -> Line {
    Line::User {
        id: uuid(u.id),
        name: u.name.clone(),
        email: u.email.clone(),
        image: u.image.clone(),
        role: u.role.clone(),
        banned: u.banned,
        ban_reason: u.ban_reason.clone(),
        organization_id: u.organization_id.map(uuid),
        password_hash: u.password_hash.clone(),
        created_at: Timestamp::from_millis(u.created_at_ms).to_rfc3339(),
        updated_at: Timestamp::from_millis(u.updated_at_ms).to_rfc3339(),
        email_verified: u.email_verified,
        ban_expires: u.ban_expires_ms.map(|ms| Timestamp::from_millis(ms).to_rfc3339()),
        username: u.username.clone(),
        display_username: u.display_username.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;

    fn user(n: u8, org: Option<[u8; 16]>) -> StoreOp {
        StoreOp::PutUser(UserRecord {
            id: [n; 16],
            name: format!("User {n}"),
            email: format!("u{n}@example.com"),
            image: None,
            role: "qa_manager".into(),
            banned: n.is_multiple_of(2),
            ban_reason: (n.is_multiple_of(2)).then(|| "left".into()),
            organization_id: org,
            password_hash: "$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHQ$aGFzaGhhc2hoYXNo".into(),
            created_at_ms: 1_000 + i64::from(n),
            updated_at_ms: 2_000,
            email_verified: n.is_multiple_of(3),
            ban_expires_ms: (n.is_multiple_of(4)).then_some(9_000),
            two_factor: None,
            username: None,
            display_username: None,
        })
    }

    fn config(dir: &Path, name: &str) -> Config {
        Config { data_dir: dir.join(name), ..Config::default() }
    }

    #[test]
    fn export_import_export_is_identical() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (config(dir.path(), "a"), config(dir.path(), "b"));
        let org = OrgRecord {
            id: [9; 16],
            name: "Org".into(),
            slug: "org".into(),
            created_at_ms: 5,
            logo: None,
            metadata: None,
            teams: Vec::new(),
            roles: Vec::new(),
            require_sso: false,
        };
        Store::open(&a.data_dir)
            .unwrap()
            .commit(&[StoreOp::PutOrg(org), user(1, Some([9; 16])), user(2, None)])
            .unwrap();
        let (first, second) = (dir.path().join("1.jsonl"), dir.path().join("2.jsonl"));
        export(&a, Some(&first)).unwrap();
        assert_eq!(import(&b, &first).unwrap(), "imported 1 organizations, 2 users, 0 memberships and 0 invitations");
        export(&b, Some(&second)).unwrap();
        assert_eq!(std::fs::read_to_string(&first).unwrap(), std::fs::read_to_string(&second).unwrap());
        assert!(!std::fs::read_to_string(&first).unwrap().contains("session"));
    }

    /// Before: the file carried each account's primary organization only, so a move lost every other membership,
    /// every role in an organization and every invitation (and organizations' logos and metadata).
    #[test]
    fn memberships_and_invitations_move_with_the_export() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (config(dir.path(), "a"), config(dir.path(), "b"));
        let org = |n: u8, slug: &str| {
            StoreOp::PutOrg(OrgRecord {
                id: [n; 16],
                name: format!("Org {n}"),
                slug: slug.into(),
                created_at_ms: 5,
                logo: Some("https://example.com/logo.png".into()),
                metadata: Some(r#"{"branch":7}"#.into()),
                // A team, that the invitation below names.
                teams: vec![TeamRecordV1 {
                    id: [n + 40; 16],
                    name: "Ward".into(),
                    created_at_ms: 5,
                    updated_at_ms: None,
                    members: Vec::new(),
                }],
                roles: Vec::new(),
                require_sso: false,
            })
        };
        let member = |org: u8, user: u8, roles: u8| {
            StoreOp::PutMember(MembershipRecord {
                org: [org; 16],
                user: [user; 16],
                roles,
                created_at_ms: 7,
                custom: Vec::new(),
            })
        };
        let invitation = StoreOp::PutInvitation(InvitationRecord {
            id: *uuid::Uuid::new_v4().as_bytes(),
            org: [9; 16],
            email: "new@example.com".into(),
            roles: 2,
            inviter: [1; 16],
            status: 3,
            expires_at_ms: 1_000_000,
            created_at_ms: 8,
            teams: vec![[49; 16]],
        });
        Store::open(&a.data_dir)
            .unwrap()
            .commit(&[
                org(9, "org"),
                org(8, "other"),
                user(1, Some([9; 16])),
                user(2, None),
                member(9, 1, 1),
                member(8, 1, 6),
                member(9, 2, 4),
                invitation,
            ])
            .unwrap();
        let (first, second) = (dir.path().join("1.jsonl"), dir.path().join("2.jsonl"));
        assert_eq!(
            export(&a, Some(&first)).unwrap(),
            "exported 2 organizations, 2 users, 3 memberships and 1 invitations (no sessions)"
        );
        let text = std::fs::read_to_string(&first).unwrap();
        let lines: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        let of = |kind: &str| lines.iter().filter(|l| l["type"] == kind).collect::<Vec<_>>();
        assert_eq!(of("membership").len(), 3);
        assert!(of("membership").iter().any(|m| m["role"] == "admin,member" && m["user_id"] == uuid([1; 16])));
        assert_eq!(of("invitation")[0]["status"], "canceled");
        assert_eq!(of("invitation")[0]["role"], "admin");
        assert_eq!(of("invitation")[0]["team_id"], uuid([49; 16]), "the plugin's teamId");
        assert_eq!(of("organization")[0]["metadata"], r#"{"branch":7}"#);
        assert_eq!(import(&b, &first).unwrap(), "imported 2 organizations, 2 users, 3 memberships and 1 invitations");
        export(&b, Some(&second)).unwrap();
        assert_eq!(text, std::fs::read_to_string(&second).unwrap());
        let loaded = Store::open(&b.data_dir).unwrap().load().unwrap();
        assert_eq!((loaded.members.len(), loaded.invitations.len()), (3, 1));
        assert_eq!(loaded.invitations[0].teams, [[49; 16]]);
        // An invitation into a team of another organization is refused.
        let stray_team = dir.path().join("stray-team.jsonl");
        let other_team = |l: &str| match l.contains("\"invitation\"") {
            true => l.replace(&uuid([49; 16]), &uuid([48; 16])),
            false => l.to_owned(),
        };
        std::fs::write(&stray_team, text.lines().map(other_team).collect::<Vec<_>>().join("\n")).unwrap();
        let refused = import(&config(dir.path(), "c"), &stray_team).unwrap_err().to_string();
        assert!(refused.contains("names no team of the organization"), "{refused}");

        // A membership of an account the file does not hold, and one twice, are refused with everything else.
        let bad = dir.path().join("bad.jsonl");
        let stray =
            text.lines().find(|l| l.contains("\"membership\"")).unwrap().replace(&uuid([1; 16]), &uuid([3; 16]));
        let twice = text.lines().find(|l| l.contains("\"membership\"")).unwrap().to_owned();
        std::fs::write(&bad, format!("{text}{stray}\n{twice}\n")).unwrap();
        let report = import(&config(dir.path(), "c"), &bad).unwrap_err().to_string();
        assert!(report.contains("user_id names no user") && report.contains("duplicate membership"), "{report}");
    }

    /// Before: the organization's line carried no teams, so an export and import lost every team, the users in
    /// them and when each was made.
    #[test]
    fn teams_move_with_their_organization() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (config(dir.path(), "a"), config(dir.path(), "b"));
        let team = |n: u8, updated: Option<i64>, members: Vec<TeamMemberRecordV1>| TeamRecordV1 {
            id: [n; 16],
            name: format!("Ward {n}"),
            created_at_ms: 6,
            updated_at_ms: updated,
            members,
        };
        let org = OrgRecord {
            id: [9; 16],
            name: "Org".into(),
            slug: "org".into(),
            created_at_ms: 5,
            logo: None,
            metadata: None,
            teams: vec![
                team(4, None, vec![TeamMemberRecordV1 { user: [1; 16], created_at_ms: 8 }]),
                team(
                    5,
                    Some(9),
                    vec![
                        TeamMemberRecordV1 { user: [2; 16], created_at_ms: 8 },
                        TeamMemberRecordV1 { user: [1; 16], created_at_ms: 9 },
                    ],
                ),
            ],
            roles: Vec::new(),
            require_sso: false,
        };
        let member = |user: u8| {
            StoreOp::PutMember(MembershipRecord {
                org: [9; 16],
                user: [user; 16],
                roles: 4,
                created_at_ms: 7,
                custom: Vec::new(),
            })
        };
        Store::open(&a.data_dir)
            .unwrap()
            .commit(&[StoreOp::PutOrg(org.clone()), user(1, Some([9; 16])), user(2, None), member(1), member(2)])
            .unwrap();
        let (first, second) = (dir.path().join("1.jsonl"), dir.path().join("2.jsonl"));
        export(&a, Some(&first)).unwrap();
        let text = std::fs::read_to_string(&first).unwrap();
        let line: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        assert_eq!(line["teams"][1]["members"][1]["user_id"], uuid([1; 16]), "{line}");
        assert!(line["teams"][0].get("updated_at").is_none());
        import(&b, &first).unwrap();
        let loaded = Store::open(&b.data_dir).unwrap().load().unwrap();
        assert_eq!(loaded.orgs, vec![org]);
        export(&b, Some(&second)).unwrap();
        assert_eq!(text, std::fs::read_to_string(&second).unwrap());

        // A team already in the data directory, a bad id, a user twice: refused, nothing written.
        let again = import(&b, &first).unwrap_err().to_string();
        assert!(again.contains("duplicate team id"), "{again}");
        let bad = dir.path().join("bad.jsonl");
        let broken = text.replacen(&uuid([4; 16]), "nope", 1).replacen(
            &format!("\"user_id\":\"{}\"", uuid([2; 16])),
            &format!("\"user_id\":\"{}\"", uuid([1; 16])),
            1,
        );
        std::fs::write(&bad, broken).unwrap();
        let report = import(&config(dir.path(), "c"), &bad).unwrap_err().to_string();
        assert!(report.contains("team id is not a UUID"), "{report}");
        let twice = text.replacen(
            &format!("\"user_id\":\"{}\"", uuid([2; 16])),
            &format!("\"user_id\":\"{}\"", uuid([1; 16])),
            1,
        );
        std::fs::write(&bad, twice).unwrap();
        let report = import(&config(dir.path(), "d"), &bad).unwrap_err().to_string();
        assert!(report.contains("is twice in team"), "{report}");
    }

    #[test]
    fn duplicates_and_bad_lines_are_reported_and_nothing_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let a = config(dir.path(), "a");
        Store::open(&a.data_dir).unwrap().commit(&[user(1, None)]).unwrap();
        let file = dir.path().join("in.jsonl");
        export(&a, Some(&file)).unwrap();
        let mut text = std::fs::read_to_string(&file).unwrap();
        text.push_str("{\"type\":\"organization\",\"id\":\"nope\",\"name\":\"x\",\"slug\":\"x\",\"created_at\":\"2026-01-01T00:00:00.000Z\"}\n");
        std::fs::write(&file, text).unwrap();
        let report = import(&a, &file).unwrap_err().to_string();
        assert!(report.contains("nothing imported: 2 problem(s)"), "{report}");
        assert!(report.contains("line 1: duplicate user id"), "{report}");
        assert!(report.contains("line 2: organization id is not a UUID"), "{report}");
        assert_eq!(Store::open(&a.data_dir).unwrap().load().unwrap().orgs.len(), 0);
    }

    /// Before: `import` checked the password hash and little else, so a file could put into the store what the API
    /// refuses and the admin screens then show (a `javascript:` picture, a ban reason with terminal escapes or
    /// bidirectional controls, a date before 1970 or after 9999). Now each value goes through the API's own
    /// parser; every problem is reported with its line and field, and nothing is written.
    #[test]
    fn every_value_is_checked_as_the_api_checks_it_and_named_by_line_and_field() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (config(dir.path(), "a"), config(dir.path(), "b"));
        Store::open(&a.data_dir).unwrap().commit(&[user(2, None)]).unwrap();
        let file = dir.path().join("in.jsonl");
        export(&a, Some(&file)).unwrap();
        let good: serde_json::Value = serde_json::from_str(std::fs::read_to_string(&file).unwrap().trim()).unwrap();
        let org = serde_json::json!({"type": "organization", "id": uuid([7; 16]), "name": "Org", "slug": "org",
            "created_at": "2026-01-01T00:00:00.000Z"});
        // Each bad line changes one field of a good one (and gets an id and address of its own).
        let bad: Vec<(&str, serde_json::Value, &str)> = vec![
            ("image", serde_json::json!("javascript:alert(1)"), "image: Invalid URL"),
            ("image", serde_json::json!(format!("https://x.test/{}", "a".repeat(2048))), "image: Too big"),
            ("ban_reason", serde_json::json!("spam\u{1b}[31m"), "ban_reason: banReason must not contain control"),
            ("ban_reason", serde_json::json!("a\u{202E}gnp.exe"), "ban_reason: banReason must not contain bidi"),
            ("ban_reason", serde_json::json!("x".repeat(501)), "ban_reason: banReason must be at most 500"),
            (
                "created_at",
                serde_json::json!("1960-01-01T00:00:00Z"),
                "created_at: \"1960-01-01T00:00:00Z\" is outside",
            ),
            (
                "updated_at",
                serde_json::json!("+10000-01-01T00:00:00Z"),
                "updated_at: \"+10000-01-01T00:00:00Z\" is not",
            ),
            ("ban_expires", serde_json::json!("tomorrow"), "ban_expires: \"tomorrow\" is not an RFC 3339 time"),
            ("name", serde_json::json!("Ann\u{7}"), "name: name"),
            ("role", serde_json::json!("root"), "role: \"root\" is not configured"),
        ];
        let mut lines = vec![org.to_string()];
        for (n, (field, value, _)) in bad.iter().enumerate() {
            let mut line = good.clone();
            line["id"] = serde_json::json!(uuid([100 + n as u8; 16]));
            line["email"] = serde_json::json!(format!("bad{n}@example.com"));
            line[*field] = value.clone();
            lines.push(line.to_string());
        }
        let bad_org = [
            ("slug", serde_json::json!("Not A Slug"), "slug: slug must be"),
            ("created_at", serde_json::json!("2026-02-30T00:00:00Z"), "created_at: \"2026-02-30T00:00:00Z\" is not"),
            ("metadata", serde_json::json!("[1]"), "metadata: organization metadata is not a JSON object"),
            ("logo", serde_json::json!("l".repeat(2049)), "logo: at most 2048 characters"),
        ];
        for (n, (field, value, _)) in bad_org.iter().enumerate() {
            let mut line = org.clone();
            line["id"] = serde_json::json!(uuid([200 + n as u8; 16]));
            line["slug"] = serde_json::json!(format!("org-{n}"));
            line[*field] = value.clone();
            lines.push(line.to_string());
        }
        std::fs::write(&file, lines.join("\n")).unwrap();
        let report = import(&b, &file).unwrap_err().to_string();
        let expected = bad.iter().map(|(_, _, e)| *e).chain(bad_org.iter().map(|(_, _, e)| *e));
        for (n, want) in expected.enumerate() {
            let line = format!("line {}: {want}", n + 2);
            assert!(report.contains(&line), "{line:?} missing from:\n{report}");
        }
        assert!(report.starts_with(&format!("nothing imported: {} problem(s)", bad.len() + bad_org.len())), "{report}");
        let loaded = Store::open(&b.data_dir).unwrap().load().unwrap();
        assert_eq!((loaded.users.len(), loaded.orgs.len()), (0, 0), "all or nothing");

        // The values the API keeps normalised are imported in that form (as sign-up keeps a picture).
        let mut line = good.clone();
        line["image"] = serde_json::json!("HTTPS://X.test/a/../b.png?'");
        line["ban_reason"] = serde_json::json!("  spam  ");
        std::fs::write(&file, format!("{org}\n{line}\n")).unwrap();
        import(&b, &file).unwrap();
        let loaded = Store::open(&b.data_dir).unwrap().load().unwrap();
        assert_eq!(loaded.users[0].image.as_deref(), Some("https://x.test/b.png?%27"));
        assert_eq!(loaded.users[0].ban_reason.as_deref(), Some("spam"));
    }

    /// Before: an imported hash could carry any cost (m = 4 GiB made each sign-in of that user allocate 4 GiB).
    #[test]
    fn a_hash_of_unbounded_cost_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (config(dir.path(), "a"), config(dir.path(), "b"));
        Store::open(&a.data_dir).unwrap().commit(&[user(1, None)]).unwrap();
        let file = dir.path().join("in.jsonl");
        export(&a, Some(&file)).unwrap();
        let text = std::fs::read_to_string(&file).unwrap().replace("m=19456", "m=4194304");
        std::fs::write(&file, text).unwrap();
        let report = import(&b, &file).unwrap_err().to_string();
        assert!(report.contains("line 1: password_hash: cost m=4194304"), "{report}");
    }

    /// Before: 10,000 lines per transaction, so a fault after the first chunk left a partial import that a second
    /// run refused as duplicates. Now the whole file is one transaction.
    #[test]
    fn a_fault_during_import_leaves_nothing_and_a_second_run_succeeds() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (config(dir.path(), "a"), config(dir.path(), "b"));
        let users: Vec<StoreOp> = (0..10_050u32)
            .map(|n| {
                let StoreOp::PutUser(mut r) = user(0, None) else { unreachable!() };
                r.id = *uuid::Uuid::now_v7().as_bytes();
                r.email = format!("u{n}@example.com");
                StoreOp::PutUser(r)
            })
            .collect();
        Store::open(&a.data_dir).unwrap().commit(&users).unwrap();
        let file = dir.path().join("in.jsonl");
        export(&a, Some(&file)).unwrap();
        let faults = FaultSwitch::default();
        faults.fail_commits_after(1, 1);
        let count = || Store::open(&b.data_dir).unwrap().load().unwrap().users.len();
        match import_with_faults(&b, &file, faults) {
            Ok(_) => assert_eq!(count(), 10_050),
            Err(_) => assert_eq!(count(), 0, "a partial import was left behind"),
        }
        let c = config(dir.path(), "c");
        let faults = FaultSwitch::default();
        faults.fail_next_commits(1);
        assert!(import_with_faults(&c, &file, faults).is_err());
        assert_eq!(Store::open(&c.data_dir).unwrap().load().unwrap().users.len(), 0, "a failed import wrote something");
        assert_eq!(
            import(&c, &file).unwrap(),
            "imported 0 organizations, 10050 users, 0 memberships and 0 invitations",
            "a second run succeeds"
        );
    }

    /// Single sign-on and SCIM move too (issue #48): an OpenID Connect provider (its client secret still sealed,
    /// byte for byte), a SAML one, the require-SSO policy, a SCIM token's hash, the directory's User and Group;
    /// exported again from the imported directory they are the same lines. A malformed line is refused by field.
    #[test]
    fn sso_and_scim_move_with_the_export() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (config(dir.path(), "a"), config(dir.path(), "b"));
        let team = TeamRecordV1 {
            id: [7; 16],
            name: "Night shift".into(),
            created_at_ms: 6,
            updated_at_ms: None,
            members: Vec::new(),
        };
        let org = OrgRecord {
            id: [9; 16],
            name: "Org".into(),
            slug: "org".into(),
            created_at_ms: 5,
            logo: None,
            metadata: None,
            teams: vec![team],
            roles: Vec::new(),
            require_sso: true,
        };
        let provider = |n: u8, saml: Option<SamlConfigV1>| SsoProviderRecord {
            id: [n; 16],
            provider_id: format!("provider-{n}"),
            organization_id: Some([9; 16]),
            user_id: [1; 16],
            issuer: "https://idp.example.com".into(),
            domains: vec![format!("d{n}.example.com")],
            domain_verified: true,
            verification: None,
            client_id: if saml.is_none() { "client".into() } else { String::new() },
            sealed_secret: if saml.is_none() { vec![1, 2, 3, 4] } else { Vec::new() },
            token_auth: 2,
            discovery_endpoint: if saml.is_none() {
                "https://idp.example.com/.well-known/openid-configuration".into()
            } else {
                String::new()
            },
            authorization_endpoint: if saml.is_none() {
                "https://idp.example.com/authorize".into()
            } else {
                String::new()
            },
            token_endpoint: if saml.is_none() { "https://idp.example.com/token".into() } else { String::new() },
            jwks_endpoint: if saml.is_none() { "https://idp.example.com/jwks".into() } else { String::new() },
            userinfo_endpoint: None,
            scopes: vec!["groups".into()],
            default_role: "admin".into(),
            created_at_ms: 10 + i64::from(n),
            updated_at_ms: 20,
            role_mapping: saml.is_some().then(|| RoleMappingV1 {
                claim: Some("http://schemas.microsoft.com/ws/2008/06/identity/claims/groups".into()),
                pairs: vec![("eng-admins".into(), "admin".into()), ("staff".into(), "member".into())],
            }),
            saml,
        };
        let cert = crate::saml::certificate(include_str!("../../tests/saml/idp-cert.pem")).unwrap();
        let saml = SamlConfigV1 {
            entry_point: "https://idp.example.com/sso".into(),
            idp_entity_id: "https://idp.example.com".into(),
            certs: vec![cert],
            audience: None,
            callback_url: Some("/welcome".into()),
            want_assertions_signed: true,
            identifier_format: None,
            mapping_email: Some("mail".into()),
            mapping_name: None,
            mapping_first_name: None,
            mapping_last_name: None,
        };
        let mut oidc = provider(3, None);
        oidc.scopes = Vec::new();
        let ops = [
            StoreOp::PutOrg(org),
            user(1, Some([9; 16])),
            StoreOp::PutSsoProvider(Box::new(oidc)),
            StoreOp::PutSsoProvider(Box::new(provider(4, Some(saml)))),
            StoreOp::PutScimToken(ScimTokenRecordV1 {
                id: [5; 16],
                org: [9; 16],
                secret_hash: [6; 32],
                scopes: 5,
                expires_at_ms: Some(99_000),
                created_by: [1; 16],
                created_at_ms: 30,
            }),
            StoreOp::PutScimUser(ScimUserRecordV1 {
                org: [9; 16],
                user: [1; 16],
                user_name: "u1@example.com".into(),
                external_id: Some("00u1".into()),
                active: true,
                attributes: r#"{"displayName":"User 1"}"#.into(),
                created_at_ms: 40,
                updated_at_ms: 41,
            }),
            StoreOp::PutScimGroup(ScimGroupRecordV1 { org: [9; 16], team: [7; 16], external_id: Some("g1".into()) }),
        ];
        Store::open(&a.data_dir).unwrap().commit(&ops).unwrap();
        let (first, second) = (dir.path().join("1.jsonl"), dir.path().join("2.jsonl"));
        export(&a, Some(&first)).unwrap();
        let report = import(&b, &first).unwrap();
        assert!(report.starts_with("imported 1 organizations, 1 users, 0 memberships and 0 invitations; 2 SSO providers, 1 SCIM tokens, 1 SCIM users and 1 SCIM groups\n1 OpenID Connect client secret"), "{report}");
        export(&b, Some(&second)).unwrap();
        let text = std::fs::read_to_string(&first).unwrap();
        assert_eq!(text, std::fs::read_to_string(&second).unwrap());
        assert!(
            text.contains(r#""require_sso":true"#) && text.contains(r#""sealed_client_secret":"AQIDBA==""#),
            "{text}"
        );
        let stored = Store::open(&b.data_dir).unwrap();
        assert_eq!(stored.sso_provider("provider-3").unwrap().unwrap().sealed_secret, vec![1, 2, 3, 4]);
        assert!(stored.sso_provider("provider-3").unwrap().unwrap().role_mapping.is_none());
        let mapping = stored.sso_provider("provider-4").unwrap().unwrap().role_mapping.unwrap();
        assert_eq!(mapping.pairs, [("eng-admins".to_owned(), "admin".to_owned()), ("staff".into(), "member".into())]);
        assert_eq!(stored.scim_tokens().unwrap()[0].secret_hash, [6; 32]);
        drop(stored);

        // Refused by field, nothing written: another directory, each line broken in one way.
        let c = config(dir.path(), "c");
        let broken = text
            .replace("d3.example.com", "not a domain")
            .replace(r#""secret_hash":"06"#, r#""secret_hash":"zz"#)
            .replace(r#""default_role":"admin""#, r#""default_role":"owner""#);
        let file = dir.path().join("broken.jsonl");
        std::fs::write(&file, broken).unwrap();
        let Err(OpsError::Invalid(why)) = import(&c, &file) else { panic!("a broken file was imported") };
        assert!(why.contains("domains:") && why.contains("secret_hash:") && why.contains("default_role:"), "{why}");
        assert!(Store::open(&c.data_dir).unwrap().sso_providers().unwrap().is_empty());
        std::fs::write(&file, text.replace(r#""group":"staff""#, r#""group":"""#)).unwrap();
        let Err(OpsError::Invalid(why)) = import(&c, &file) else { panic!("an empty group was imported") };
        assert!(why.contains("line 4: role_mapping: roleMapping: a group's name must be"), "{why}");
    }

    #[test]
    fn the_export_file_is_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let a = config(dir.path(), "a");
        Store::open(&a.data_dir).unwrap().commit(&[user(1, None)]).unwrap();
        let file = dir.path().join("out.jsonl");
        export(&a, Some(&file)).unwrap();
        assert_eq!(std::fs::metadata(&file).unwrap().permissions().mode() & 0o777, 0o600);
    }
}
