//! `/api/admin/users` and `/api/admin/audit`: for callers whose *current* role is `admin`.

use std::sync::Arc;

use hyper::body::Incoming;
use hyper::{Request, Response};

use super::AppState;
use super::dto::{AdminUser, AuditEntry, AuditPage, SUCCESS, UserList};
use super::extract::{self, Fields};
use super::response::{Body, Failure, ok};
use super::router::Ctx;
use crate::actors::users::{Place, UserChange};
use crate::domain::{AuditId, BanReason, OrgId, RoleSet, Timestamp, User, UserId};

const DEFAULT_AUDIT_PAGE: usize = 50;
const MAX_AUDIT_PAGE: usize = 500;

/// `GET /api/admin/users`: every user, ordered by creation (the interface's answer), or, with any of `limit`,
/// `cursor`, `q`, `match`, `role`, `banned`, `organization_id`, a filtered page with `next_cursor`. The cursor names the
/// last user's place in the creation order, so pages stay stable while users are created.
pub async fn list_users(state: &AppState, _: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    extract::admin(state, req.headers())?;
    let Some(query) = req.uri().query().filter(|q| !q.is_empty()) else {
        let users = state.accounts.users();
        return Ok(ok(&UserList { users: users.iter().map(|u| AdminUser::from(&**u)).collect() }));
    };
    let filter = UserFilter::parse(state, query)?;
    let accounts = state.accounts.clone();
    // Off the async workers: a search that matches little passes over every account, and must not hold up the
    // session checks queued behind it.
    let (page, more) =
        tokio::task::spawn_blocking(move || filter.page(&accounts)).await.map_err(|_| Failure::unavailable())?;
    let next_cursor = more.then(|| page.last().map(|u| format!("{}.{}", u.created_at.as_millis(), u.id))).flatten();
    let users: Vec<AdminUser> = page.iter().map(|u| AdminUser::from(&**u)).collect();
    Ok(ok(&serde_json::json!({"users": users, "next_cursor": next_cursor})))
}

/// Whether `haystack` contains `needle` (already lower-case), ignoring case. ASCII needles (almost every search)
/// are compared in place, so a pass over a million accounts allocates nothing.
pub(super) fn contains_ignoring_case(haystack: &str, needle: &str) -> bool {
    if needle.is_ascii() {
        let (h, n) = (haystack.as_bytes(), needle.as_bytes());
        n.is_empty() || h.windows(n.len()).any(|w| w.eq_ignore_ascii_case(n))
    } else {
        haystack.to_lowercase().contains(needle)
    }
}

const DEFAULT_USER_PAGE: usize = 100;
const MAX_USER_PAGE: usize = 1000;

/// The page and filters of `GET /api/admin/users`.
struct UserFilter {
    limit: usize,
    /// Users after this place in the creation order.
    after: Option<Place>,
    /// Lower-cased; matches the e-mail or the name, anywhere in it, or with `prefix` the start of the e-mail.
    q: Option<String>,
    /// `match=prefix`: `q` is the start of an e-mail address, found in the e-mail index at any scale.
    prefix: bool,
    role: Option<String>,
    banned: Option<bool>,
    /// `Some(None)`: users in no organization.
    organization: Option<Option<OrgId>>,
}

impl UserFilter {
    fn parse(state: &AppState, query: &str) -> Result<Self, Failure> {
        let mut filter = Self {
            limit: DEFAULT_USER_PAGE,
            after: None,
            q: None,
            prefix: false,
            role: None,
            banned: None,
            organization: None,
        };
        for (key, value) in url::form_urlencoded::parse(query.as_bytes()) {
            let bad = |what: &str| Failure::validation(format!("{key} {what}"));
            match &*key {
                "limit" => {
                    filter.limit = value
                        .parse()
                        .ok()
                        .filter(|n| (1..=MAX_USER_PAGE).contains(n))
                        .ok_or_else(|| bad(&format!("must be a whole number from 1 to {MAX_USER_PAGE}")))?;
                }
                "cursor" => {
                    let parsed = value
                        .split_once('.')
                        .and_then(|(ms, id)| Some((Timestamp::from_millis(ms.parse().ok()?), UserId::parse(id)?)));
                    filter.after = Some(parsed.ok_or_else(|| bad("must be a next_cursor from an earlier page"))?);
                }
                "q" if !value.trim().is_empty() && value.chars().count() <= 254 => {
                    filter.q = Some(value.trim().to_lowercase());
                }
                "q" => return Err(bad("must be 1 to 254 characters")),
                "match" if value == "prefix" => filter.prefix = true,
                "match" if value == "contains" => filter.prefix = false,
                "match" => return Err(bad("must be prefix or contains")),
                "role" => {
                    let role = state.accounts.roles().parse(&value).ok_or_else(|| bad("is not a configured role"))?;
                    filter.role = Some(role.as_str().to_owned());
                }
                "banned" => filter.banned = Some(value.parse().map_err(|_| bad("must be true or false"))?),
                "organization_id" if value == "none" => filter.organization = Some(None),
                "organization_id" => {
                    let id = OrgId::parse(&value).ok_or_else(|| bad("must be an organization id or none"))?;
                    filter.organization = Some(Some(id));
                }
                _ => {
                    let known = ["limit", "cursor", "q", "match", "role", "banned", "organization_id"];
                    return Err(extract::unknown_parameter(&key, &known));
                }
            }
        }
        Ok(filter)
    }

    /// One page: starts where the cursor points in the creation order (or in the organization's members), so a
    /// page costs its own rows and, with a filter, the rows passed over; never the accounts before it.
    fn page(&self, accounts: &crate::accounts::Accounts) -> (Vec<Arc<User>>, bool) {
        if let (true, Some(q)) = (self.prefix, &self.q) {
            // The e-mail index's range, put in creation order: as many rows as the prefix matches, however many
            // accounts there are.
            let mut found: Vec<Arc<User>> =
                accounts.users_with_email_prefix(q).into_iter().filter(|u| self.matches(u)).collect();
            found.sort_unstable_by_key(|u| (u.created_at, u.id));
            let start = self.after.map_or(0, |after| found.partition_point(|u| (u.created_at, u.id) <= after));
            let rest = &found[start..];
            return (rest.iter().take(self.limit).cloned().collect(), rest.len() > self.limit);
        }
        let mut page: Vec<Arc<User>> = Vec::with_capacity(self.limit.min(DEFAULT_USER_PAGE));
        let mut more = false;
        let visit = |u: &Arc<User>| {
            if !self.matches(u) {
                return true;
            }
            if page.len() == self.limit {
                more = true;
                return false;
            }
            page.push(Arc::clone(u));
            true
        };
        match self.organization {
            Some(Some(org)) => accounts.scan_members(org, self.after, visit),
            _ => accounts.scan_users(self.after, false, visit),
        }
        (page, more)
    }

    fn matches(&self, u: &User) -> bool {
        let text = |q: &String| match self.prefix {
            true => u.email.as_str().starts_with(q.as_str()),
            false => u.email.as_str().contains(q.as_str()) || contains_ignoring_case(u.name.as_str(), q),
        };
        self.q.as_ref().is_none_or(text)
            && self.role.as_ref().is_none_or(|r| u.role.as_str() == r)
            && self.banned.is_none_or(|b| u.banned == b)
            && self.organization.is_none_or(|o| u.organization_id == o)
    }
}

pub async fn update_user(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let admin = extract::admin(state, req.headers())?;
    let body = extract::json_object(req, true, state.body_timeout()).await?;
    let (target, change) = parse_update(state.accounts.roles(), &body)?;
    state.accounts.update_user(admin.id, target, change, ctx.ip.to_string()).await?;
    Ok(ok(&SUCCESS))
}

/// `GET /api/admin/audit?limit=N&cursor=ID`: the audit log, newest first. `next_cursor` is the `cursor` of the
/// next (older) page, `null` on the last one.
pub async fn audit(state: &AppState, _: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    extract::admin(state, req.headers())?;
    let query = req.uri().query();
    extract::query_only(query, &["limit", "cursor"])?;
    let limit =
        match extract::query_param(query, "limit") {
            None => DEFAULT_AUDIT_PAGE,
            Some(v) => v.parse().ok().filter(|n| (1..=MAX_AUDIT_PAGE).contains(n)).ok_or_else(|| {
                Failure::validation(format!("limit must be a whole number from 1 to {MAX_AUDIT_PAGE}"))
            })?,
        };
    let before = match extract::query_param(query, "cursor") {
        None => None,
        Some(c) => Some(AuditId::parse(c).ok_or_else(|| Failure::validation("cursor must be an entry id"))?),
    };
    let entries = state.accounts.audit(before, limit).await?;
    let next_cursor = (entries.len() == limit).then(|| entries.last().map(|e| e.id.to_string())).flatten();
    Ok(ok(&AuditPage { entries: entries.iter().map(AuditEntry::from).collect(), next_cursor }))
}

/// Longest ban with an end: beyond ten years, lift it by hand.
const MAX_BAN_SECS: u64 = 10 * 365 * 86_400;

/// `banExpiresIn` (whole seconds from now, 1 to ten years) as the moment the ban ends; absent or null: no end.
pub(super) fn ban_expiry(body: &Fields) -> Result<Option<crate::domain::Timestamp>, Failure> {
    let Some(secs) = body.optional_u64("banExpiresIn")? else { return Ok(None) };
    if !(1..=MAX_BAN_SECS).contains(&secs) {
        return Err(Failure::validation(format!(
            "banExpiresIn must be a whole number of seconds from 1 to {MAX_BAN_SECS}"
        )));
    }
    Ok(Some(crate::domain::Timestamp::now().plus(std::time::Duration::from_secs(secs))))
}

/// `banReason` if given: `None` when absent or blank, a validation error when [`BanReason`] refuses it.
pub(super) fn ban_reason(body: &Fields) -> Result<Option<BanReason>, Failure> {
    let Some(raw) = body.optional_string("banReason")? else { return Ok(None) };
    BanReason::parse(raw).map_err(|e| Failure::validation(e.to_string()))
}

fn parse_update(roles: &RoleSet, body: &Fields) -> Result<(UserId, UserChange), Failure> {
    body.only(&["userId", "role", "banned", "banReason", "banExpiresIn", "organizationId"])?;
    let target = UserId::parse(body.string("userId")?).ok_or_else(|| Failure::validation("userId must be a UUID"))?;
    let role = match body.optional_string("role")? {
        Some(r) => Some(roles.parse(r).ok_or_else(|| {
            Failure::validation(format!(
                "unknown role `{r}`; allowed: {}",
                roles.allowed().collect::<Vec<_>>().join(", ")
            ))
        })?),
        None => None,
    };
    let banned = body.optional_bool("banned")?;
    let ban_expires = ban_expiry(body)?;
    if ban_expires.is_some() && banned != Some(true) {
        return Err(Failure::validation("banExpiresIn goes with banned: true"));
    }
    let ban_reason = ban_reason(body)?;
    let organization = match body.nullable_string("organizationId")? {
        Some(Some(id)) => {
            Some(Some(OrgId::parse(id).ok_or_else(|| Failure::validation("organizationId must be a UUID or null"))?))
        }
        Some(None) => Some(None),
        None => None,
    };
    if role.is_none() && banned.is_none() && ban_reason.is_none() && organization.is_none() {
        return Err(Failure::validation("nothing to change: give role, banned, banReason or organizationId"));
    }
    Ok((target, UserChange { role, banned, ban_reason, ban_expires, organization, ..UserChange::default() }))
}
