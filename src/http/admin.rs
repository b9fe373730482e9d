//! `/api/admin/users` and `/api/admin/audit`: for callers whose *current* role is `admin`.

use hyper::body::Incoming;
use hyper::{Request, Response};

use super::AppState;
use super::dto::{AdminUser, AuditEntry, AuditPage, SUCCESS, UserList};
use super::extract::{self, Fields};
use super::response::{Body, Failure, ok};
use super::router::Ctx;
use crate::actors::users::UserChange;
use crate::domain::{AuditId, OrgId, RoleSet, UserId};

/// Longest ban reason kept.
const MAX_BAN_REASON: usize = 500;
const DEFAULT_AUDIT_PAGE: usize = 50;
const MAX_AUDIT_PAGE: usize = 500;

pub async fn list_users(state: &AppState, _: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    extract::admin(state, req.headers())?;
    let users = state.accounts.users();
    Ok(ok(&UserList { users: users.iter().map(|u| AdminUser::from(&**u)).collect() }))
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

/// Refuses a body with a field outside `known`: a typo must not be silently ignored.
pub(super) fn reject_unknown(body: &Fields, known: &[&str]) -> Result<(), Failure> {
    match body.keys().find(|k| !known.contains(k)) {
        Some(k) => Err(Failure::validation(format!("unknown field `{k}`; allowed: {}", known.join(", ")))),
        None => Ok(()),
    }
}

fn parse_update(roles: &RoleSet, body: &Fields) -> Result<(UserId, UserChange), Failure> {
    reject_unknown(body, &["userId", "role", "banned", "banReason", "organizationId"])?;
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
    let ban_reason = body.optional_string("banReason")?.map(str::trim).filter(|r| !r.is_empty());
    if ban_reason.is_some_and(|r| r.chars().count() > MAX_BAN_REASON) {
        return Err(Failure::validation("banReason must be at most 500 characters"));
    }
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
    let ban_reason = ban_reason.map(str::to_owned);
    Ok((target, UserChange { role, banned, ban_reason, organization, password_hash: None }))
}
