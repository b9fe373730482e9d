//! `/api/admin/*`: users and organizations, for callers whose *current* role is `admin`.

use std::sync::Arc;

use hyper::body::Incoming;
use hyper::header::HeaderMap;
use hyper::{Request, Response, StatusCode};

use super::dto::{
    AdminOrganization, AdminUser, AuditEntry, AuditPage, OneOrganization, OrganizationList, SUCCESS, UserList,
};
use super::request::{self, Fields};
use super::response::{Body, Failure, ok};
use super::{Ctx, State, session};
use crate::actors::orgs::CreateOrgError;
use crate::actors::users::{UpdateUserError, UserChange};
use crate::domain::{Name, OrgId, RoleSet, Slug, User, UserId};

/// Longest ban reason kept.
const MAX_BAN_REASON: usize = 500;
const DEFAULT_AUDIT_PAGE: usize = 50;
const MAX_AUDIT_PAGE: usize = 500;

pub async fn list_users(state: &State, _: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    require_admin(state, req.headers())?;
    let users = state.indexes.users.list();
    Ok(ok(&UserList { users: users.iter().map(|u| AdminUser::from(&**u)).collect() }))
}

pub async fn update_user(state: &State, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let admin = require_admin(state, req.headers())?;
    let body = request::json_object(req, true, state.body_timeout()).await?;
    let (target, change) = parse_update(&state.roles, &body)?;
    state.actors.users.update(admin.id, target, change, ctx.ip.to_string()).await.map_err(|e| match e {
        UpdateUserError::NotAdmin => forbidden(),
        UpdateUserError::UserNotFound => Failure::new(StatusCode::NOT_FOUND, "NOT_FOUND", "user not found"),
        UpdateUserError::OrganizationNotFound => {
            Failure::new(StatusCode::NOT_FOUND, "NOT_FOUND", "organization not found")
        }
        UpdateUserError::SelfBan => Failure::bad_request("BAD_REQUEST", "you cannot ban yourself"),
        UpdateUserError::LastAdmin => {
            Failure::new(StatusCode::CONFLICT, "CONFLICT", "the last active administrator cannot be demoted or banned")
        }
        UpdateUserError::Unavailable(u) => u.into(),
    })?;
    Ok(ok(&SUCCESS))
}

pub async fn list_organizations(state: &State, _: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    require_admin(state, req.headers())?;
    let orgs = state.indexes.orgs.list();
    Ok(ok(&OrganizationList { organizations: orgs.iter().map(|o| AdminOrganization::from(&**o)).collect() }))
}

pub async fn create_organization(state: &State, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let admin = require_admin(state, req.headers())?;
    let body = request::json_object(req, true, state.body_timeout()).await?;
    reject_unknown(&body, &["name", "slug"])?;
    let name = Name::parse(body.string("name")?).map_err(|e| Failure::validation(format!("name {e}")))?;
    let slug = Slug::parse(body.string("slug")?).map_err(|e| Failure::validation(e.to_string()))?;
    let org = state.actors.orgs.create(name, slug, admin.id, ctx.ip.to_string()).await.map_err(|e| match e {
        CreateOrgError::SlugTaken => {
            Failure::new(StatusCode::CONFLICT, "CONFLICT", "an organization with this slug already exists")
        }
        CreateOrgError::Unavailable(u) => u.into(),
    })?;
    Ok(ok(&OneOrganization { organization: AdminOrganization::from(&*org) }))
}

/// `GET /api/admin/audit?limit=N&cursor=ID`: the audit log, newest first. `next_cursor` is the `cursor` of the
/// next (older) page, `null` on the last one. Read from the store, not memory: the log only grows.
pub async fn audit(state: &State, _: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    require_admin(state, req.headers())?;
    let query = req.uri().query();
    let limit =
        match request::query_param(query, "limit") {
            None => DEFAULT_AUDIT_PAGE,
            Some(v) => v.parse().ok().filter(|n| (1..=MAX_AUDIT_PAGE).contains(n)).ok_or_else(|| {
                Failure::validation(format!("limit must be a whole number from 1 to {MAX_AUDIT_PAGE}"))
            })?,
        };
    let before = match request::query_param(query, "cursor") {
        None => None,
        Some(c) => {
            Some(uuid::Uuid::try_parse(c).map_err(|_| Failure::validation("cursor must be an entry id"))?.into_bytes())
        }
    };
    let store = Arc::clone(&state.store);
    let page = tokio::task::spawn_blocking(move || store.audit_page(before, limit)).await;
    let entries = page.map_err(|_| Failure::unavailable())?.map_err(|_| Failure::unavailable())?;
    let next_cursor =
        (entries.len() == limit).then(|| entries.last().map(|e| uuid::Uuid::from_bytes(e.id).to_string())).flatten();
    Ok(ok(&AuditPage { entries: entries.iter().map(AuditEntry::from).collect(), next_cursor }))
}

/// The caller, if their session is valid and their role is `admin` right now.
fn require_admin(state: &State, headers: &HeaderMap) -> Result<Arc<User>, Failure> {
    let current = session::current(state, headers)
        .ok_or_else(|| Failure::new(StatusCode::UNAUTHORIZED, "UNAUTHORIZED", "authentication required"))?;
    if current.user.role.is_admin() { Ok(current.user) } else { Err(forbidden()) }
}

fn forbidden() -> Failure {
    Failure::new(StatusCode::FORBIDDEN, "FORBIDDEN", "administrator role required")
}

fn reject_unknown(body: &Fields, known: &[&str]) -> Result<(), Failure> {
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
    Ok((target, UserChange { role, banned, ban_reason: ban_reason.map(str::to_owned), organization }))
}
