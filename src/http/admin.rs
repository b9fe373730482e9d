//! `/api/admin/users` and `/api/admin/audit`: for callers whose *current* role is `admin`.

use hyper::body::Incoming;
use hyper::{Request, Response};

use super::AppState;
use super::dto::{AdminUser, AuditEntry, AuditPage, SUCCESS, UserList};
use super::extract::Ctx;
use super::extract::{self, Fields, Refusal};
use super::fields::{ban_expiry, ban_reason};
use super::response::{Body, Failure, ok};
use crate::accounts::{
    AuditSearch, Field, Filter, Operator, Order, Page, Search, TextField, UserChange, UserQuery, Window,
};
use crate::domain::{AuditId, OrgId, RoleSet, Timestamp, UserId};

const DEFAULT_AUDIT_PAGE: usize = 50;
const MAX_AUDIT_PAGE: usize = 500;

/// `GET /api/admin/users`: every user, ordered by creation (the interface's answer), or, with any of `limit`,
/// `cursor`, `q`, `match`, `role`, `banned`, `organization_id`, a filtered page with `next_cursor` and `total` (how
/// many match in all). The cursor names the last user's place in the creation order, so pages stay stable while
/// users are created.
pub async fn list_users(state: &AppState, _: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    extract::administrator(state, req.headers(), Refusal::Plain).await?;
    let Some(query) = req.uri().query().filter(|q| !q.is_empty()) else {
        let users = state.accounts.users();
        return Ok(ok(&UserList { users: users.iter().map(|u| AdminUser::from(&**u)).collect() }));
    };
    let query = users_query(state.accounts.roles(), query)?;
    let page = state.accounts.find_users(query).await?;
    Ok(ok(&user_page("users", &page)))
}

/// A page of [`users_query`]'s answer: its users under `key`, `next_cursor` (the last user's place in the creation
/// order when more follow, else null) and `total`.
pub(super) fn user_page(key: &str, page: &Page) -> serde_json::Value {
    let last = page.users.last().filter(|_| page.more);
    let next_cursor = last.map(|u| format!("{}.{}", u.created_at.as_millis(), u.id));
    let users: Vec<AdminUser> = page.users.iter().map(|u| AdminUser::from(&**u)).collect();
    serde_json::json!({key: users, "next_cursor": next_cursor, "total": page.total})
}

const DEFAULT_USER_PAGE: usize = 100;
const MAX_USER_PAGE: usize = 1000;

/// The page and filters of `GET /api/admin/users`: `q` is part of the e-mail or name (with `match=prefix`, the
/// start of the e-mail), `role`, `banned` and `organization_id` (an id, or `none`) must match, and the page is
/// `limit` users after `cursor` in creation order.
pub(super) fn users_query(roles: &RoleSet, query: &str) -> Result<UserQuery, Failure> {
    let (mut limit, mut after, mut q, mut prefix) = (DEFAULT_USER_PAGE, None, None, false);
    let mut filters = Vec::new();
    for (key, value) in url::form_urlencoded::parse(query.as_bytes()) {
        let bad = |what: &str| Failure::validation(format!("{key} {what}"));
        match &*key {
            "limit" => {
                limit = value
                    .parse()
                    .ok()
                    .filter(|n| (1..=MAX_USER_PAGE).contains(n))
                    .ok_or_else(|| bad(&format!("must be a whole number from 1 to {MAX_USER_PAGE}")))?;
            }
            "cursor" => {
                let parsed = value
                    .split_once('.')
                    .and_then(|(ms, id)| Some((Timestamp::from_millis(ms.parse().ok()?), UserId::parse(id)?)));
                after = Some(parsed.ok_or_else(|| bad("must be a next_cursor from an earlier page"))?);
            }
            "q" if !value.trim().is_empty() && value.chars().count() <= 254 => q = Some(value.trim().to_lowercase()),
            "q" => return Err(bad("must be 1 to 254 characters")),
            "match" if value == "prefix" => prefix = true,
            "match" if value == "contains" => prefix = false,
            "match" => return Err(bad("must be prefix or contains")),
            "role" => {
                let role = roles.parse(&value).ok_or_else(|| bad("is not a configured role"))?;
                filters.push(Filter::Field { field: Field::Role, value: role.as_str().to_owned(), equal: true });
            }
            "banned" => {
                let banned: bool = value.parse().map_err(|_| bad("must be true or false"))?;
                filters.push(Filter::Field { field: Field::Banned, value: banned.to_string(), equal: true });
            }
            "organization_id" if value == "none" => filters.push(Filter::Organization(None)),
            "organization_id" => {
                let id = OrgId::parse(&value).ok_or_else(|| bad("must be an organization id or none"))?;
                filters.push(Filter::Organization(Some(id)));
            }
            _ => {
                let known = ["limit", "cursor", "q", "match", "role", "banned", "organization_id"];
                return Err(extract::unknown_parameter(&key, &known));
            }
        }
    }
    let search = q.map(|needle| match prefix {
        true => Search { field: TextField::Email, operator: Operator::StartsWith, needle },
        false => Search { field: TextField::EmailOrName, operator: Operator::Contains, needle },
    });
    Ok(UserQuery { search, filters, order: Order::default(), window: Window::After { after, limit }, count: true })
}

pub async fn update_user(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let admin = extract::administrator(state, req.headers(), Refusal::Plain).await?;
    let body = extract::json_object(req, true, state.body_timeout()).await?;
    let (target, change) = parse_update(state.accounts.roles(), &body)?;
    state.accounts.update_user(admin.id, target, change, ctx.ip.to_string()).await?;
    Ok(ok(&SUCCESS))
}

/// `GET /api/admin/audit?limit=N&cursor=ID`: the audit log, newest first. `next_cursor` is the `cursor` of the
/// next (older) page, `null` on the last one. With any of `action`, `actor_id`, `target_id`, `subject_id` (actor or
/// target), `from`, `to` (RFC 3339, inclusive): the entries that match them all, searched on the server.
pub async fn audit(state: &AppState, _: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    extract::administrator(state, req.headers(), Refusal::Plain).await?;
    let query = req.uri().query();
    let filters = ["action", "actor_id", "target_id", "subject_id", "from", "to"];
    extract::query_only(query, &["limit", "cursor", "action", "actor_id", "target_id", "subject_id", "from", "to"])?;
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
    if filters.iter().any(|f| extract::query_param(query, f).is_some()) {
        let search = audit_search(query)?;
        let found = state.accounts.search_audit(search, before, limit).await?;
        let next_cursor = found.next.map(|id| id.to_string());
        return Ok(ok(&AuditPage { entries: found.entries.iter().map(AuditEntry::from).collect(), next_cursor }));
    }
    let entries = state.accounts.audit(before, limit).await?;
    let next_cursor = (entries.len() == limit).then(|| entries.last().map(|e| e.id.to_string())).flatten();
    Ok(ok(&AuditPage { entries: entries.iter().map(AuditEntry::from).collect(), next_cursor }))
}

/// The conditions of an audit search (decoded: a time's `:` and `+` come percent-encoded from a form).
fn audit_search(query: Option<&str>) -> Result<AuditSearch, Failure> {
    let pairs: Vec<(String, String)> = url::form_urlencoded::parse(query.unwrap_or("").as_bytes())
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    let param = |key: &str| pairs.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str());
    let id = |key: &str| -> Result<Option<uuid::Uuid>, Failure> {
        param(key)
            .map(|v| uuid::Uuid::parse_str(v).map_err(|_| Failure::validation(format!("{key} must be an id"))))
            .transpose()
    };
    let time = |key: &str| -> Result<Option<Timestamp>, Failure> {
        param(key)
            .map(|v| {
                chrono::DateTime::parse_from_rfc3339(v).map(|t| Timestamp::from_millis(t.timestamp_millis())).map_err(
                    |_| Failure::validation(format!("{key} must be a time as RFC 3339 (2026-11-22T09:15:02Z)")),
                )
            })
            .transpose()
    };
    let action = match param("action") {
        Some(a) if a.is_empty() || a.len() > 100 => {
            return Err(Failure::validation("action must be 1 to 100 characters"));
        }
        a => a.map(str::to_owned),
    };
    let search = AuditSearch {
        action,
        actor: id("actor_id")?,
        target: id("target_id")?,
        subject: id("subject_id")?,
        from: time("from")?,
        to: time("to")?,
    };
    if let (Some(from), Some(to)) = (search.from, search.to)
        && from > to
    {
        return Err(Failure::validation("from must not be after to"));
    }
    Ok(search)
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
    let ban_expires = ban_expiry(body, Timestamp::now())?;
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
