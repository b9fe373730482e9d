//! `/api/admin/organizations`: organizations and their members, for administrators. Every change is audited in
//! its own commit.

use std::sync::Arc;

use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};

use super::AppState;
use super::admin;
use super::dto::{AdminOrganization, AdminUser, OneOrganization, OrganizationList};
use super::extract::Ctx;
use super::extract::{self, Refusal};
use super::response::{Body, Failure, ok};
use crate::domain::{Name, OrgId, Organization, Slug};

pub async fn list(state: &AppState, _: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    extract::administrator(state, req.headers(), Refusal::Plain).await?;
    extract::query_only(req.uri().query(), &[])?;
    let orgs = state.accounts.organizations();
    Ok(ok(&OrganizationList { organizations: orgs.iter().map(|o| AdminOrganization::from(&**o)).collect() }))
}

pub async fn create(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let admin = extract::administrator(state, req.headers(), Refusal::Plain).await?;
    let body = extract::json_object(req, true, state.body_timeout()).await?;
    body.only(&["name", "slug"])?;
    let name = Name::parse(body.string("name")?).map_err(|e| Failure::validation(format!("name {e}")))?;
    let slug = Slug::parse(body.string("slug")?).map_err(|e| Failure::validation(e.to_string()))?;
    let org = state.accounts.create_organization(name, slug, admin.id, ctx.ip.to_string()).await?;
    Ok(ok(&OneOrganization { organization: AdminOrganization::from(&*org) }))
}

/// The `{id}` segment of `/api/admin/organizations/{id}[/members]`.
fn org_id(req: &Request<Incoming>) -> Result<OrgId, Failure> {
    let id = req.uri().path().trim_start_matches("/api/admin/organizations/").split('/').next().unwrap_or_default();
    OrgId::parse(id).ok_or_else(|| Failure::validation("the organization id in the path must be a UUID"))
}

fn found(state: &AppState, id: OrgId) -> Result<Arc<Organization>, Failure> {
    state.accounts.organization(id).ok_or_else(|| Failure::with_status(StatusCode::NOT_FOUND, "organization not found"))
}

/// `GET /api/admin/organizations/{id}` → `{organization}` with `member_count`.
pub async fn get(state: &AppState, _: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    extract::administrator(state, req.headers(), Refusal::Plain).await?;
    extract::query_only(req.uri().query(), &[])?;
    let org = found(state, org_id(&req)?)?;
    let members = state.accounts.member_count(org.id);
    let mut answer = serde_json::to_value(OneOrganization { organization: AdminOrganization::from(&*org) })
        .map_err(|_| Failure::unavailable())?;
    answer["organization"]["member_count"] = members.into();
    Ok(ok(&answer))
}

/// `PATCH /api/admin/organizations/{id}` with `name`, `slug` or both → `{organization}`; a slug in use is 409.
pub async fn update(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let admin = extract::administrator(state, req.headers(), Refusal::Plain).await?;
    let id = org_id(&req)?;
    let body = extract::json_object(req, true, state.body_timeout()).await?;
    body.only(&["name", "slug"])?;
    let name = body.optional_string("name")?.map(Name::parse).transpose();
    let name = name.map_err(|e| Failure::validation(format!("name {e}")))?;
    let slug = body.optional_string("slug")?.map(Slug::parse).transpose();
    let slug = slug.map_err(|e| Failure::validation(e.to_string()))?;
    if name.is_none() && slug.is_none() {
        return Err(Failure::validation("nothing to change: give name, slug or both"));
    }
    let org = state.accounts.update_organization(id, name, slug, admin.id, ctx.ip.to_string()).await?;
    Ok(ok(&OneOrganization { organization: AdminOrganization::from(&*org) }))
}

/// `DELETE /api/admin/organizations/{id}[?detach_members=true]` → `{success, detached}`. An organization with
/// members is refused (409) unless they are to be detached, which then happens in the deletion's commit.
pub async fn delete(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let admin = extract::administrator(state, req.headers(), Refusal::Plain).await?;
    let id = org_id(&req)?;
    let mut detach = false;
    for (key, value) in url::form_urlencoded::parse(req.uri().query().unwrap_or_default().as_bytes()) {
        match (&*key, &*value) {
            ("detach_members", "true") => detach = true,
            ("detach_members", "false") => detach = false,
            ("detach_members", _) => return Err(Failure::validation("detach_members must be true or false")),
            _ => return Err(extract::unknown_parameter(&key, &["detach_members"])),
        }
    }
    let detached = state.accounts.delete_organization(admin.id, id, detach, ctx.ip.to_string()).await?;
    Ok(ok(&super::dto::OrganizationDeleted { detached, success: true }))
}

/// `GET /api/admin/organizations/{id}/members` → `{members}`: its users as `GET /api/admin/users` shows them,
/// ordered by creation. With `limit` or `cursor`, one page of them, as `GET /api/admin/users?organization_id=`
/// gives it: `{members, next_cursor, total}`. An organization can hold a large share of a million accounts, and a
/// page that shows a hundred of them should not be sent all of them.
pub async fn members(state: &AppState, _: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    extract::administrator(state, req.headers(), Refusal::Plain).await?;
    let query = req.uri().query().filter(|q| !q.is_empty());
    extract::query_only(query, &["limit", "cursor"])?;
    let org = found(state, org_id(&req)?)?;
    let Some(query) = query else {
        let members = state.accounts.members(org.id);
        return Ok(ok(
            &serde_json::json!({"members": members.iter().map(|u| AdminUser::from(&**u)).collect::<Vec<_>>()}),
        ));
    };
    let query = admin::users_query(state.accounts.roles(), &format!("{query}&organization_id={}", org.id))?;
    let page = state.accounts.find_users(query).await?;
    Ok(ok(&admin::user_page("members", &page)))
}
