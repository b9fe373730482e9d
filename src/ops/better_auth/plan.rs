//! From the rows as read to the records to write: every check, every mapping, and the report. Pure: the same
//! snapshot and data directory give the same plan (apart from the minted ids).

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

use serde::Serialize;

use super::{ACCOUNT, Cell, Column, INVITATION, MAX_FIELD_BYTES, MEMBER, ORGANIZATION, Snapshot, USER};
use crate::domain::{BanReason, Email, ImageUrl, Name, NameError, OrgId, Role, RoleSet, Slug, Timestamp, UserId};
use crate::domain::{MemberRoles, OrgRole, RolesError, Username, display_username};
use crate::store::{InvitationRecord, Loaded, MembershipRecord, OrgRecord, StoreOp, UserRecord};

/// One line of the mapping file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Mapping {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub better_auth_id: String,
    pub id: String,
    /// The account's e-mail or the organization's slug, for a person reading the file.
    pub key: String,
}

/// What an import would do.
#[derive(Debug, Default)]
pub struct Plan {
    pub ops: Vec<StoreOp>,
    pub mapping: Vec<Mapping>,
    /// Any of these: nothing is written.
    pub blocking: Vec<String>,
    /// Reported; the rest of the row is imported.
    pub notes: Vec<String>,
    pub counts: Counts,
}

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Counts {
    pub users_read: usize,
    pub orgs_read: usize,
    pub members_read: usize,
    pub sessions_read: u64,
    pub users: usize,
    pub admins: usize,
    pub banned: usize,
    pub legacy_hashes: usize,
    pub without_password: usize,
    pub orgs: usize,
    pub memberships: usize,
    pub invitations: usize,
    /// Identities at other providers linked to the imported accounts.
    pub linked_accounts: usize,
}

/// How many problems of each list the report shows; the rest are counted.
const SHOWN: usize = 50;

impl Plan {
    /// Blocks the import when rows of one kind (`what`, plural: "passkey(s)") cannot come over, naming up to five
    /// of the `problems`; whether it did (the caller then adds nothing of that kind).
    pub(crate) fn blocked_by(&mut self, what: &str, problems: &[String]) -> bool {
        if problems.is_empty() {
            return false;
        }
        let shown: Vec<&str> = problems.iter().take(5).map(String::as_str).collect();
        self.blocking.push(format!("{} {what} cannot be imported: {}", problems.len(), shown.join("; ")));
        true
    }

    /// The report for a person at a terminal.
    pub fn report(&self, dry_run: bool) -> String {
        let c = &self.counts;
        let mut out = String::new();
        let _ = writeln!(
            out,
            "better-auth database: {} users, {} organizations, {} memberships, {} sessions",
            c.users_read, c.orgs_read, c.members_read, c.sessions_read
        );
        let verb = match (dry_run, self.blocking.is_empty()) {
            (_, false) => "nothing imported",
            (true, true) => "would import (dry run, nothing written)",
            (false, true) => "imported",
        };
        let _ = writeln!(
            out,
            "{verb}: {} users ({} administrators, {} banned; {} with better-auth password hashes, replaced by \
             argon2id at their next sign-in; {} without a password), {} organizations, {} memberships, {} pending \
             invitations, {} identities at other providers",
            c.users,
            c.admins,
            c.banned,
            c.legacy_hashes,
            c.without_password,
            c.orgs,
            c.memberships,
            c.invitations,
            c.linked_accounts
        );
        if !self.blocking.is_empty() {
            let _ = writeln!(out, "{} blocking problem(s); fix them in the source and run again:", self.blocking.len());
            list(&mut out, &self.blocking);
        }
        if !self.notes.is_empty() {
            let _ = writeln!(out, "{} change(s) reported, the rest of each row imported:", self.notes.len());
            list(&mut out, &self.notes);
        }
        // Pending invitations do come over (with a new id): only those no longer pending stay behind.
        out.push_str(
            "not imported: sessions (everyone signs in once more), verification tokens, invitations no longer pending",
        );
        out
    }
}

fn list(out: &mut String, items: &[String]) {
    for item in items.iter().take(SHOWN) {
        let _ = writeln!(out, "  - {item}");
    }
    if items.len() > SHOWN {
        let _ = writeln!(out, "  … and {} more", items.len() - SHOWN);
    }
}

/// An ISO 8601 / RFC 3339 time (`2026-11-23T10:00:00.000Z`), SQL's `2026-11-23 10:00:00[.fff][+zz]`, or a date
/// alone (`2026-11-23`), as milliseconds since the epoch. Without an offset, UTC.
pub(crate) fn parse_time(text: &str) -> Option<i64> {
    let t = text.trim();
    if let Ok(at) = chrono::DateTime::parse_from_rfc3339(t) {
        return Some(at.timestamp_millis());
    }
    let t = t.replacen(' ', "T", 1);
    if let Ok(at) = chrono::DateTime::parse_from_rfc3339(&t) {
        return Some(at.timestamp_millis());
    }
    for format in ["%Y-%m-%dT%H:%M:%S%.f%#z", "%Y-%m-%dT%H:%M:%S%#z"] {
        if let Ok(at) = chrono::DateTime::parse_from_str(&t, format) {
            return Some(at.timestamp_millis());
        }
    }
    if let Ok(at) = chrono::NaiveDateTime::parse_from_str(&t, "%Y-%m-%dT%H:%M:%S%.f") {
        return Some(at.and_utc().timestamp_millis());
    }
    // A date alone (SQL's `date` type): its midnight, UTC.
    let day = chrono::NaiveDate::parse_from_str(&t, "%Y-%m-%d").ok()?;
    Some(day.and_hms_opt(0, 0, 0)?.and_utc().timestamp_millis())
}

fn text(cell: &Cell) -> Option<&str> {
    match cell {
        Cell::Text(t) => Some(t.as_str()),
        _ => None,
    }
}

fn flag(cell: &Cell) -> bool {
    matches!(cell, Cell::Bool(true))
}

/// A date column: `None` when NULL, or a problem naming `column` when it is not a date of the years 1970–9999.
pub(crate) fn date(cell: &Cell, column: &str) -> Result<Option<i64>, String> {
    let ms = match cell {
        Cell::Null => return Ok(None),
        Cell::Time(ms) => *ms,
        Cell::Text(t) => parse_time(t).ok_or_else(|| format!("{column} {t:?} is not a date"))?,
        Cell::Bool(_) | Cell::TooLong(_) => return Err(format!("{column} is not a date")),
    };
    // The bound every stored date keeps ([`Timestamp::storable`]; before 1970 is what `i64::MIN` wrapped to once).
    if let Ok(at) = Timestamp::storable(ms) {
        return Ok(Some(at.as_millis()));
    }
    let shown = chrono::DateTime::from_timestamp_millis(ms).map_or_else(|| format!("{ms} ms"), |at| at.to_rfc3339());
    Err(format!("{column} {shown} is outside the years 1970–9999"))
}

/// The rows of `table` without any value longer than anything this service keeps ([`Cell::TooLong`]): each such
/// value is a blocking problem, named once, and its row takes no part in the other checks. `image` is left to
/// its own rule (an unusable picture is dropped, not blocking).
fn within_bounds<'a>(
    rows: &'a [Vec<Cell>],
    columns: &[Column],
    table: &str,
    blocking: &mut Vec<String>,
) -> Vec<&'a Vec<Cell>> {
    rows.iter()
        .filter(|row| {
            let mut fits = true;
            for (cell, column) in row.iter().zip(columns).filter(|(_, c)| c.name != "image") {
                if let Cell::TooLong(bytes) = cell {
                    let row_name = match text(&row[0]) {
                        Some(id) => format!("{table} {id:?}"),
                        None => format!("a {table} row"),
                    };
                    blocking.push(format!(
                        "{row_name}: {} is {bytes} bytes or more, longer than any value kept here ({MAX_FIELD_BYTES})",
                        column.name
                    ));
                    fits = false;
                }
            }
            fits
        })
        .collect()
}

/// A better-auth role list (`"admin,user"`) on the configured roles: `admin` if it is there, else the first
/// configured one, else the default. Returns the role and the values that were dropped.
fn map_role(raw: Option<&str>, roles: &RoleSet) -> (Role, Vec<String>) {
    let values: Vec<&str> = raw.unwrap_or("").split(',').map(str::trim).filter(|v| !v.is_empty()).collect();
    let configured: Vec<Role> = values.iter().filter_map(|v| roles.parse(v)).collect();
    let chosen = configured
        .iter()
        .find(|r| r.is_admin())
        .or_else(|| configured.first())
        .cloned()
        .unwrap_or_else(|| roles.default_role());
    let dropped = values.iter().filter(|v| **v != chosen.as_str()).map(|v| (*v).to_owned()).collect();
    (chosen, dropped)
}

/// What the plan needs of the hashing configuration.
pub struct Hashing<'a, F> {
    /// The parameter part of the hashes this server makes (see [`crate::hashing::configured_parameters`]).
    pub configured: &'a str,
    /// Gives the hash stored for accounts without a password (asked at most once).
    pub unusable: F,
}

/// Checks every row of `snapshot` against itself and the data directory `existing`, and builds the records.
pub fn plan<F: FnOnce() -> Result<String, String>>(
    snapshot: &Snapshot,
    existing: &Loaded,
    roles: &RoleSet,
    hashing: Hashing<'_, F>,
    now: Timestamp,
) -> Plan {
    let unusable_hash = hashing.unusable;
    let mut plan = Plan { blocking: snapshot.missing.clone(), ..Plan::default() };
    let empty = Vec::new();
    let users = snapshot.users.as_ref().unwrap_or(&empty);
    let orgs = snapshot.orgs.as_ref().unwrap_or(&empty);
    let members = snapshot.members.as_ref().unwrap_or(&empty);
    plan.counts.users_read = users.len();
    plan.counts.orgs_read = orgs.len();
    plan.counts.members_read = members.len();
    plan.counts.sessions_read = snapshot.sessions;
    let users = within_bounds(users, USER, "user", &mut plan.blocking);
    let accounts = within_bounds(snapshot.accounts.as_ref().unwrap_or(&empty), ACCOUNT, "account", &mut plan.blocking);
    let orgs = within_bounds(orgs, ORGANIZATION, "organization", &mut plan.blocking);
    let members = within_bounds(members, MEMBER, "member", &mut plan.blocking);

    // --- organizations ----------------------------------------------------------------------------------------
    let taken_slugs: HashSet<&str> = existing.orgs.iter().map(|o| o.slug.as_str()).collect();
    let mut slugs = HashSet::new();
    let mut org_ids: HashMap<&str, [u8; 16]> = HashMap::new();
    for row in orgs {
        let id = text(&row[0]).unwrap_or_default();
        let what = format!("organization {id:?}");
        let name = match Name::parse(text(&row[1]).unwrap_or_default()) {
            Ok(name) => name,
            Err(e) => {
                plan.blocking.push(format!("{what}: name {e}"));
                continue;
            }
        };
        let slug = match Slug::parse(text(&row[2]).unwrap_or_default()) {
            Ok(slug) => slug,
            Err(e) => {
                plan.blocking.push(format!("{what}: {e}"));
                continue;
            }
        };
        if taken_slugs.contains(slug.as_str()) {
            plan.blocking.push(format!("{what}: slug {slug} is already taken in the data directory"));
            continue;
        }
        if !slugs.insert(slug.to_string()) {
            plan.blocking.push(format!("{what}: slug {slug} appears twice"));
            continue;
        }
        let created_at_ms = match date(&row[3], "createdAt") {
            Ok(at) => at.unwrap_or(now.as_millis()),
            Err(e) => {
                plan.blocking.push(format!("{what}: {e}"));
                continue;
            }
        };
        let new_id = OrgId::new();
        org_ids.insert(id, new_id.to_bytes());
        plan.mapping.push(Mapping {
            kind: "organization",
            better_auth_id: id.to_owned(),
            id: uuid::Uuid::from(new_id).to_string(),
            key: slug.to_string(),
        });
        plan.ops.push(StoreOp::PutOrg(OrgRecord {
            id: new_id.to_bytes(),
            name: name.to_string(),
            slug: slug.to_string(),
            created_at_ms,
            logo: None,
            metadata: None,
            teams: Vec::new(),
            roles: Vec::new(),
            require_sso: false,
        }));
        plan.counts.orgs += 1;
    }

    // --- passwords: the credential account of each user; the other accounts are identities at providers ------
    let mut passwords: HashMap<&str, &str> = HashMap::new();
    let mut identities: HashMap<&str, Vec<(&str, &str)>> = HashMap::new();
    let mut seen_identities = HashSet::new();
    let taken_identities: HashSet<(&str, &str)> =
        existing.accounts.iter().map(|a| (a.provider.as_str(), a.subject.as_str())).collect();
    for row in &accounts {
        match (text(&row[0]), text(&row[1])) {
            (Some(user), Some("credential")) => {
                if let Some(hash) = text(&row[2]) {
                    passwords.insert(user, hash);
                }
            }
            (Some(user), Some(provider)) => {
                let Some(subject) = text(&row[3]) else { continue };
                if taken_identities.contains(&(provider, subject)) || !seen_identities.insert((provider, subject)) {
                    plan.blocking.push(format!(
                        "account {provider}/{subject}: this identity is linked to another account (in the data \
                         directory, or twice in the import)"
                    ));
                    continue;
                }
                identities.entry(user).or_default().push((provider, subject));
            }
            _ => {}
        }
    }

    // --- memberships: every one, with its roles; the first of each user (by time, then as read) is the
    // account's primary organization (`organizationId`), as this importer has always chosen it ------------------
    let user_ids: HashSet<&str> = users.iter().filter_map(|r| text(&r[0])).collect();
    let mut by_user: HashMap<&str, Vec<(i64, usize, &str)>> = HashMap::new();
    let mut member_roles: HashMap<usize, MemberRoles> = HashMap::new();
    for (n, row) in members.iter().enumerate() {
        let joined = match date(&row[3], "createdAt") {
            Ok(at) => at.unwrap_or(i64::MAX),
            Err(e) => {
                plan.blocking.push(format!("membership of user {:?}: {e}", text(&row[1]).unwrap_or_default()));
                continue;
            }
        };
        let (org, user) = (text(&row[0]).unwrap_or_default(), text(&row[1]).unwrap_or_default());
        if !user_ids.contains(user) {
            plan.notes.push(format!("membership of {user:?} in organization {org:?} dropped: no such user"));
            continue;
        }
        if !org_ids.contains_key(org) {
            plan.notes.push(format!("membership of user {user:?} dropped: organization {org:?} is not imported"));
            continue;
        }
        // better-auth's roles, comma separated; a custom role (not served here) becomes `member`, said so.
        let roles = match MemberRoles::parse(text(&row[2])) {
            Ok(roles) => roles,
            Err(e) => {
                let what = match e {
                    RolesError::Empty => "no role".to_owned(),
                    RolesError::Unknown(names) => format!("role(s) {}", names.join(", ")),
                };
                plan.notes.push(format!(
                    "membership of user {user:?} in organization {org:?}: {what} not served here, left out (no role left: member)"
                ));
                let known: Vec<&str> = text(&row[2]).unwrap_or_default().split(',').map(str::trim).collect();
                MemberRoles::parse(known.iter().copied().filter(|r| ["owner", "admin", "member"].contains(r)))
                    .unwrap_or(MemberRoles::one(OrgRole::Member))
            }
        };
        member_roles.insert(n, roles);
        by_user.entry(user).or_default().push((joined, n, org));
    }
    let mut user_new_ids: HashMap<&str, [u8; 16]> = HashMap::new();

    // --- users ---------------------------------------------------------------------------------------------------
    let taken_emails: HashSet<&str> = existing.users.iter().map(|u| u.email.as_str()).collect();
    let mut emails: HashMap<String, Vec<&str>> = HashMap::new();
    for row in &users {
        if let (Some(id), Some(email)) = (text(&row[0]), text(&row[2]))
            && let Ok(email) = Email::parse(email)
        {
            emails.entry(email.to_string()).or_default().push(id);
        }
    }
    // Usernames (the username plugin's column), unique after normalisation, with those already in the store.
    let mut usernames: HashSet<String> = existing.users.iter().filter_map(|u| u.username.clone()).collect();
    let mut unusable_hash = Some(unusable_hash);
    // The argon2 costs of the imported hashes other than the configured one, and how many hashes have each.
    let mut argon2_costs: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
    let mut unusable: Option<String> = None;
    for row in &users {
        let Some(id) = text(&row[0]).filter(|id| !id.is_empty()) else {
            plan.blocking.push(format!("a user without an id (e-mail {:?})", text(&row[2]).unwrap_or_default()));
            continue;
        };
        let email = match text(&row[2]).map(str::trim).filter(|e| !e.is_empty()) {
            None => {
                plan.blocking.push(format!("user {id:?}: no e-mail (NULL or empty)"));
                continue;
            }
            Some(raw) => match Email::parse(raw) {
                Ok(email) => email,
                Err(_) => {
                    plan.blocking.push(format!("user {id:?}: {raw:?} is not an e-mail address"));
                    continue;
                }
            },
        };
        let same = emails.get(email.as_str()).map_or(&[][..], Vec::as_slice);
        if same.len() > 1 {
            // Reported once, at the first of them.
            if same[0] == id {
                let ids: Vec<String> = same.iter().map(|i| format!("{i:?}")).collect();
                plan.blocking.push(format!(
                    "e-mail {email}: {} users differ only in its case ({}); addresses are case-insensitive here: \
                     merge or change them first",
                    same.len(),
                    ids.join(", ")
                ));
            }
            continue;
        }
        if taken_emails.contains(email.as_str()) {
            plan.blocking.push(format!("user {id:?}: e-mail {email} already has an account in the data directory"));
            continue;
        }
        let name = match Name::parse(text(&row[1]).unwrap_or_default()) {
            Ok(name) => name,
            // better-auth takes an empty name (a social profile may have none); a name is required here.
            Err(NameError::Empty) => {
                let local = email.as_str().split('@').next().unwrap_or_default();
                match Name::parse(local) {
                    Ok(name) => {
                        plan.notes.push(format!("user {email}: no name; imported as {name:?}"));
                        name
                    }
                    Err(e) => {
                        plan.blocking.push(format!("user {email}: no name, and the e-mail's local part: {e}"));
                        continue;
                    }
                }
            }
            Err(e) => {
                plan.blocking.push(format!("user {email}: name {e}"));
                continue;
            }
        };
        let password_hash = match passwords.get(id) {
            Some(hash) => match crate::hashing::check_stored_hash(hash) {
                Ok(()) => {
                    if crate::domain::is_legacy_hash(hash) {
                        plan.counts.legacy_hashes += 1;
                    }
                    if let Some(parameters) = crate::domain::argon2_parameters(hash)
                        && parameters != hashing.configured
                    {
                        *argon2_costs.entry(parameters).or_default() += 1;
                    }
                    (*hash).to_owned()
                }
                // An argon2 hash above the bound: every check of it (and, to hide which accounts have it, of
                // every unknown e-mail) would pay its cost.
                Err(problem) if crate::domain::argon2_parameters(hash).is_some() => {
                    plan.blocking.push(format!("user {email}: the argon2 password hash's {problem}"));
                    continue;
                }
                Err(_) => {
                    plan.blocking.push(format!(
                        "user {email}: the password hash is in another format (neither better-auth's scrypt \
                         saltHex:keyHex nor argon2); it could never be verified"
                    ));
                    continue;
                }
            },
            // No password, and a way in through a provider: none is needed (an empty hash verifies nothing).
            None if identities.contains_key(id) => String::new(),
            None => {
                if unusable.is_none() {
                    match unusable_hash.take().map(|f| f()) {
                        Some(Ok(hash)) => unusable = Some(hash),
                        Some(Err(e)) => plan.blocking.push(format!("hashing a password: {e}")),
                        None => {}
                    }
                }
                plan.counts.without_password += 1;
                plan.notes.push(format!(
                    "user {email}: no password (no credential account): imported with a password nobody knows; a \
                     password reset gives them one"
                ));
                unusable.clone().unwrap_or_default()
            }
        };
        let (role, dropped) = map_role(text(&row[7]), roles);
        if !dropped.is_empty() {
            plan.notes.push(format!(
                "user {email}: role {:?} imported as {role} ({} not in [roles] allowed or not kept)",
                text(&row[7]).unwrap_or_default(),
                dropped.join(", ")
            ));
        }
        let mut banned = flag(&row[8]);
        // The rules the API applies: dates of the years 1970–9999, a ban reason `ban-user` would take.
        let created = date(&row[5], "createdAt");
        let updated = date(&row[6], "updatedAt");
        let expires = if banned { date(&row[10], "banExpires") } else { Ok(None) };
        let reason = match banned {
            true => BanReason::parse(text(&row[9]).unwrap_or_default()).map_err(|e| e.to_string()),
            false => Ok(None),
        };
        let (created_at_ms, updated_at_ms, mut ban_expires_ms, ban_reason) = match (created, updated, expires, reason) {
            (Ok(c), Ok(u), Ok(e), Ok(r)) => (c, u, e, r),
            (c, u, e, r) => {
                for problem in [c.err(), u.err(), e.err(), r.err()].into_iter().flatten() {
                    plan.blocking.push(format!("user {email}: {problem}"));
                }
                continue;
            }
        };
        if ban_expires_ms.is_some_and(|until| until <= now.as_millis()) {
            (banned, ban_expires_ms) = (false, None);
            plan.notes.push(format!("user {email}: the ban expired; imported unbanned"));
        }
        let organization_id = match by_user.get_mut(id) {
            Some(list) => {
                list.sort_unstable();
                Some(org_ids[list[0].2])
            }
            None => None,
        };
        // The rule sign-up and update-user apply, and the same normalised form ([`ImageUrl`]). Anything else (a
        // `data:` or `javascript:` URL, a relative path) would reach the admin screens that show it.
        let image = match &row[4] {
            Cell::Null => None,
            cell => {
                let image = text(cell).and_then(|raw| ImageUrl::parse(raw).ok());
                if image.is_none() {
                    plan.notes.push(format!(
                        "user {email}: image dropped: not an absolute http(s) URL of at most 2048 characters"
                    ));
                }
                image
            }
        };
        let created_at_ms = created_at_ms.unwrap_or(now.as_millis());
        let new_id = UserId::new();
        user_new_ids.insert(id, new_id.to_bytes());
        plan.mapping.push(Mapping {
            kind: "user",
            better_auth_id: id.to_owned(),
            id: uuid::Uuid::from(new_id).to_string(),
            key: email.to_string(),
        });
        plan.counts.users += 1;
        plan.counts.admins += usize::from(role.is_admin());
        plan.counts.banned += usize::from(banned);
        for (provider, subject) in identities.get(id).into_iter().flatten() {
            plan.counts.linked_accounts += 1;
            plan.ops.push(StoreOp::PutAccount(crate::store::linked::LinkedAccountRecordV1 {
                id: *uuid::Uuid::now_v7().as_bytes(),
                user_id: new_id.to_bytes(),
                provider: (*provider).to_owned(),
                subject: (*subject).to_owned(),
                email: email.to_string(),
                created_at_ms: now.as_millis(),
                updated_at_ms: now.as_millis(),
                sealed_tokens: None,
            }));
        }
        // better-auth kept the name lower-cased; NFKC too, as this service keeps names. Two accounts that end with one
        // name cannot both sign in by it: the file is refused.
        let username = text(&row[11]).filter(|n| !n.trim().is_empty()).and_then(|raw| {
            if crate::domain::text::refused(raw).is_some() {
                plan.notes.push(format!("user {email}: username dropped: it holds a control or reordering character"));
                return None;
            }
            Some(Username::normalised(raw).as_str().to_owned())
        });
        if let Some(name) = &username
            && !usernames.insert(name.clone())
        {
            plan.blocking.push(format!(
                "user {email}: the username {name:?} is another account's (after NFKC and lower-casing)"
            ));
        }
        let display_username = text(&row[12]).and_then(|raw| match display_username(raw) {
            Ok(display) => Some(display.into_string()),
            Err(_) => {
                plan.notes.push(format!(
                    "user {email}: displayUsername dropped: blank, over 100 characters, or a control character"
                ));
                None
            }
        });
        plan.ops.push(StoreOp::PutUser(UserRecord {
            id: new_id.to_bytes(),
            name: name.to_string(),
            email: email.to_string(),
            image: image.map(String::from),
            role: role.to_string(),
            banned,
            ban_reason: ban_reason.as_ref().filter(|_| banned).map(ToString::to_string),
            organization_id,
            password_hash,
            created_at_ms,
            updated_at_ms: updated_at_ms.unwrap_or(created_at_ms),
            email_verified: flag(&row[3]),
            ban_expires_ms,
            two_factor: None,
            username,
            display_username,
        }));
    }
    // The memberships of the accounts imported, after them (a membership names its account and organization).
    let mut imported: Vec<&str> = by_user.keys().copied().collect();
    imported.sort_unstable();
    let mut written = HashSet::new();
    for user in imported {
        let list = &by_user[user];
        let Some(&new_user) = user_new_ids.get(user) else { continue };
        for &(joined, n, org) in list {
            // better-auth does not keep one membership per pair: a second row of the same pair is the same one.
            if !written.insert((org, user)) {
                continue;
            }
            let joined = if joined == i64::MAX { now.as_millis() } else { joined };
            plan.ops.push(StoreOp::PutMember(MembershipRecord {
                org: org_ids[org],
                user: new_user,
                roles: member_roles.get(&n).map_or(MemberRoles::one(OrgRole::Member).bits(), MemberRoles::bits),
                created_at_ms: joined,
                custom: Vec::new(),
            }));
            plan.counts.memberships += 1;
        }
    }
    // Pending invitations into imported organizations from imported inviters, with a new (random) id.
    let invitations = snapshot.invitations.as_ref().unwrap_or(&empty);
    let invitations = within_bounds(invitations, INVITATION, "invitation", &mut plan.blocking);
    let mut closed = 0;
    for row in &invitations {
        let id = text(&row[0]).unwrap_or_default();
        let expires = date(&row[6], "expiresAt").ok().flatten();
        let pending = text(&row[4]).is_none_or(|s| s == "pending");
        if !pending || expires.is_none_or(|at| at <= now.as_millis()) {
            closed += 1;
            continue;
        }
        let (Some(&org), Some(&inviter)) =
            (org_ids.get(text(&row[1]).unwrap_or_default()), text(&row[5]).and_then(|i| user_new_ids.get(i)))
        else {
            plan.notes.push(format!("invitation {id:?} dropped: its organization or inviter is not imported"));
            continue;
        };
        let Ok(email) = Email::parse(text(&row[2]).unwrap_or_default()) else {
            plan.notes.push(format!("invitation {id:?} dropped: not an e-mail address"));
            continue;
        };
        let roles = MemberRoles::parse(text(&row[3])).unwrap_or_else(|_| {
            plan.notes.push(format!("invitation {id:?}: a role not served here; imported as member"));
            MemberRoles::one(OrgRole::Member)
        });
        let new_id = crate::domain::InvitationId::random();
        plan.mapping.push(Mapping {
            kind: "invitation",
            better_auth_id: id.to_owned(),
            id: new_id.to_string(),
            key: email.to_string(),
        });
        plan.ops.push(StoreOp::PutInvitation(InvitationRecord {
            id: new_id.to_bytes(),
            org,
            email: email.to_string(),
            roles: roles.bits(),
            inviter,
            status: 0,
            expires_at_ms: expires.unwrap_or_default(),
            created_at_ms: date(&row[7], "createdAt").ok().flatten().unwrap_or(now.as_millis()),
            // better-auth's `teamId` is not carried (see `teams`).
            teams: Vec::new(),
        }));
        plan.counts.invitations += 1;
    }
    if closed > 0 {
        plan.notes.push(format!("{closed} invitation(s) no longer pending (or expired): not imported"));
    }
    // Every check of an unknown e-mail runs one verification at each cost on file, so that it takes as long as
    // a wrong password on any account ([`crate::hashing`]): the number of costs is bounded.
    if argon2_costs.len() > crate::hashing::MAX_OTHER_COSTS {
        let costs: Vec<String> = argon2_costs.iter().map(|(p, n)| format!("{p} ({n})")).collect();
        plan.blocking.push(format!(
            "the argon2 password hashes have {} costs other than the configured {}: {}; at most {} are taken \
             (each one is paid by every password check until its accounts sign in)",
            argon2_costs.len(),
            hashing.configured,
            costs.join(", "),
            crate::hashing::MAX_OTHER_COSTS
        ));
    }
    plan
}
