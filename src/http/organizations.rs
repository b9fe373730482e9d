//! `/api/admin/organizations`: listing and creating organizations, for administrators.

use hyper::body::Incoming;
use hyper::{Request, Response};

use super::AppState;
use super::admin::reject_unknown;
use super::dto::{AdminOrganization, OneOrganization, OrganizationList};
use super::extract;
use super::response::{Body, Failure, ok};
use super::router::Ctx;
use crate::domain::{Name, Slug};

pub async fn list(state: &AppState, _: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    extract::admin(state, req.headers())?;
    let orgs = state.accounts.organizations();
    Ok(ok(&OrganizationList { organizations: orgs.iter().map(|o| AdminOrganization::from(&**o)).collect() }))
}

pub async fn create(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let admin = extract::admin(state, req.headers())?;
    let body = extract::json_object(req, true, state.body_timeout()).await?;
    reject_unknown(&body, &["name", "slug"])?;
    let name = Name::parse(body.string("name")?).map_err(|e| Failure::validation(format!("name {e}")))?;
    let slug = Slug::parse(body.string("slug")?).map_err(|e| Failure::validation(e.to_string()))?;
    let org = state.accounts.create_organization(name, slug, admin.id, ctx.ip.to_string()).await?;
    Ok(ok(&OneOrganization { organization: AdminOrganization::from(&*org) }))
}
