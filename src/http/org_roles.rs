//! `/api/auth/organization/*-role*`: the organization plugin's roles defined at runtime (`dynamicAccessControl`
//! with its default statements as `ac`), with its shapes and codes. Each handler reads parse → facade → answer;
//! the helpers that read requests are the organization family's (`org_plugin`).

use hyper::body::Incoming;
use hyper::{Request, Response};
use serde_json::Value;

use super::AppState;
use super::dto::{PluginRole, RoleChanged, Succeeded};
use super::extract::{Ctx, Fields};
use super::org_plugin::{body, ip, query, signed_in};
use super::response::{Body, Failure, ok};
use crate::accounts::RoleRef;
use crate::accounts::RolesError;
use crate::domain::{Grants, OrgId, RoleId, RoleName, RoleNameError};

/// `organizationId` as the plugin reads it: absent or empty means the active organization; an id that is no
/// UUID names no organization the caller is in.
fn org_id(raw: Option<&str>) -> Option<OrgId> {
    raw.filter(|id| !id.is_empty()).map(|id| OrgId::parse(id).unwrap_or_else(|| OrgId::from_bytes([0; 16])))
}

fn role_name(raw: &str) -> Result<RoleName, Failure> {
    RoleName::parse(raw).map_err(|e| match e {
        RoleNameError::BuiltIn => RolesError::NameTaken.into(),
        RoleNameError::Invalid => Failure::validation(format!(
            "[body.role] Invalid input: 1 to {} characters, without commas",
            RoleName::MAX_CHARS
        )),
    })
}

/// `{resource: [action, …]}`: every resource one of the statements (`INVALID_RESOURCE`), every action a string.
fn grants(value: Option<&Value>, key: &str) -> Result<Grants, Failure> {
    let invalid = || Failure::validation(format!("[body.{key}] Invalid input: expected an object of action lists"));
    let map = value.and_then(Value::as_object).ok_or_else(invalid)?;
    let mut entries = Vec::with_capacity(map.len());
    for (resource, actions) in map {
        let list = actions.as_array().ok_or_else(invalid)?;
        let actions: Option<Vec<&str>> = list.iter().map(Value::as_str).collect();
        entries.push((resource.as_str(), actions.ok_or_else(invalid)?));
    }
    Grants::parse(entries)
        .map_err(|_| Failure::bad_request("INVALID_RESOURCE", "The provided permission includes an invalid resource"))
}

/// `roleName` or `roleId`, exactly one of them and not empty (the plugin's schema); an id that is no UUID names
/// no role.
fn role_ref(name: Option<&str>, id: Option<&str>) -> Result<RoleRef, Failure> {
    match (name.filter(|n| !n.is_empty()), id.filter(|i| !i.is_empty())) {
        (Some(name), None) => Ok(RoleRef::Name(name.to_owned())),
        (None, Some(id)) => Ok(RoleRef::Id(RoleId::parse(id).unwrap_or_else(|| RoleId::from_bytes([0; 16])))),
        _ => Err(Failure::validation("[body] Invalid input: give exactly one of roleName or roleId")),
    }
}

fn body_ref(body: &Fields) -> Result<RoleRef, Failure> {
    role_ref(body.optional_string("roleName")?, body.optional_string("roleId")?)
}

/// `POST create-role` `{role, permission, organizationId?}`: `{success, roleData, statements}`.
pub async fn create(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let (_, current) = signed_in(state, &req).await?;
    let body = body(state, req, &["role", "permission", "organizationId", "additionalFields"]).await?;
    let name = role_name(body.string("role")?)?;
    let grants = grants(body.get("permission"), "permission")?;
    let org = org_id(body.optional_string("organizationId")?);
    let (org, role) = state.accounts.create_role(&current, org, name, grants, ip(&ctx)).await?;
    let shown = PluginRole::new(org, &role);
    let statements = Some(shown.permission.clone());
    Ok(ok(&RoleChanged { role_data: shown, statements, success: true }))
}

/// `GET list-roles` `?organizationId`: the roles the organization defined.
pub async fn list(state: &AppState, _: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let (_, current) = signed_in(state, &req).await?;
    let q = query(&req, &["organizationId"])?;
    let org = org_id(q("organizationId").as_deref());
    let (org, roles) = state.accounts.list_roles(&current, org)?;
    Ok(ok(&roles.iter().map(|r| PluginRole::new(org, r)).collect::<Vec<_>>()))
}

/// `GET get-role` `?roleName|roleId&organizationId`: one role.
pub async fn get(state: &AppState, _: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let (_, current) = signed_in(state, &req).await?;
    let q = query(&req, &["roleName", "roleId", "organizationId"])?;
    let role = role_ref(q("roleName").as_deref(), q("roleId").as_deref())?;
    let org = org_id(q("organizationId").as_deref());
    let (org, role) = state.accounts.get_role(&current, org, &role)?;
    Ok(ok(&PluginRole::new(org, &role)))
}

/// `POST update-role` `{roleName|roleId, data: {permission?, roleName?}, organizationId?}`: `{success, roleData}`.
pub async fn update(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let (_, current) = signed_in(state, &req).await?;
    let body = body(state, req, &["roleName", "roleId", "data", "organizationId"]).await?;
    let role = body_ref(&body)?;
    let Some(Value::Object(data)) = body.get("data") else {
        return Err(Failure::validation("[body.data] Invalid input: expected object"));
    };
    let name = match data.get("roleName") {
        None | Some(Value::Null) => None,
        Some(Value::String(raw)) => Some(role_name(raw)?),
        Some(_) => return Err(Failure::validation("[body.data.roleName] Invalid input: expected string")),
    };
    let grants = match data.get("permission") {
        None | Some(Value::Null) => None,
        found => Some(grants(found, "data.permission")?),
    };
    let org = org_id(body.optional_string("organizationId")?);
    let (org, role) = state.accounts.update_role(&current, org, role, name, grants, ip(&ctx)).await?;
    Ok(ok(&RoleChanged { role_data: PluginRole::new(org, &role), statements: None, success: true }))
}

/// `POST delete-role` `{roleName|roleId, organizationId?}`: `{success: true}`.
pub async fn delete(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let (_, current) = signed_in(state, &req).await?;
    let body = body(state, req, &["roleName", "roleId", "organizationId"]).await?;
    let role = body_ref(&body)?;
    let org = org_id(body.optional_string("organizationId")?);
    state.accounts.delete_role(&current, org, role, ip(&ctx)).await?;
    Ok(ok(&Succeeded { success: true }))
}
