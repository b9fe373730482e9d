//! SCIM 2.0 under `/api/auth/scim/v2` (RFC 7644, on `@better-auth/scim`'s wire): the discovery documents (no
//! token, as the plugin), the Users of the bearer token's organization, and, for the organization's owners and
//! administrators, its tokens under `/api/admin/organizations/{id}/scim-tokens`. Every SCIM answer is
//! `application/scim+json`, and every refusal under the root a SCIM Error (the router's `Family::Scim`).

use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Request, Response, StatusCode};
use serde_json::Value;

use super::AppState;
use super::dto::{SUCCESS, ScimToken, ScimTokenCreated, ScimTokenList};
use super::extract::{self, Ctx};
use super::response::{Body, Failure, ok, scim_json};
use crate::accounts::scim_discovery::{self, Projection};
use crate::accounts::{Fault, Paging, ScimCaller, ScimScopes};
use crate::domain::{OrgId, Timestamp};

const ROOT: &str = "/api/auth/scim/v2";
/// The query parameters of a list (`sortBy`, `sortOrder` are accepted and ignored: the ServiceProviderConfig says
/// sorting is not supported).
const LIST_PARAMS: &[&str] =
    &["filter", "startIndex", "count", "attributes", "excludedAttributes", "sortBy", "sortOrder"];

/// The SCIM root's absolute URL, for `meta.location`: the server's own origin (`base_url`, else `Host`).
fn base(state: &AppState, ctx: &Ctx) -> Result<String, Failure> {
    let own = state.origins.own(ctx.host()).ok_or_else(|| Failure::bad_request("invalidValue", "No Host header"))?;
    Ok(format!("{own}{ROOT}"))
}

/// The segment after `/api/auth/scim/v2/<collection>/`.
fn resource_id(req: &Request<Incoming>, collection: &str) -> String {
    let path = req.uri().path();
    let rest = path.strip_prefix(ROOT).and_then(|p| p.strip_prefix(collection)).unwrap_or_default();
    let id = rest.trim_start_matches('/');
    percent_decode(id)
}

fn percent_decode(s: &str) -> String {
    url::form_urlencoded::parse(format!("x={}", s.replace('+', "%2B")).as_bytes())
        .next()
        .map(|(_, v)| v.into_owned())
        .unwrap_or_default()
}

async fn caller(state: &AppState, req: &Request<Incoming>) -> Result<ScimCaller, Failure> {
    let presented = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, token)| token.trim());
    Ok(state.accounts.scim_caller(presented).await?)
}

/// A resource's answer, narrowed by `projection` (the headers name it whatever the body keeps).
fn resource(status: StatusCode, mut body: Value, projection: &Projection) -> Response<Body> {
    let location = body["meta"]["location"].as_str().and_then(|l| HeaderValue::from_str(l).ok());
    projection.apply(&mut body);
    let mut response = scim_json(status, &body);
    // RFC 7644 §3.1: a created resource's URI in `Location`; the plugin sends `Content-Location` too.
    if let Some(location) = location {
        response.headers_mut().insert(header::CONTENT_LOCATION, location.clone());
        if status == StatusCode::CREATED {
            response.headers_mut().insert(header::LOCATION, location);
        }
    }
    response
}

/// `attributes` and `excludedAttributes` of the query (RFC 7644 §3.9: every call that answers a resource).
fn projection(req: &Request<Incoming>) -> Result<Projection, Failure> {
    let query = req.uri().query();
    let attributes = extract::query_value(query, "attributes");
    let excluded = extract::query_value(query, "excludedAttributes");
    Ok(Projection::parse(attributes.as_deref(), excluded.as_deref())?)
}

/// A page of resources, narrowed by `projection`.
fn list(mut page: Value, projection: &Projection) -> Response<Body> {
    projection.apply_to_list(&mut page);
    scim_json(StatusCode::OK, &page)
}

/// `GET /ServiceProviderConfig`.
pub async fn service_provider_config(
    state: &AppState,
    ctx: Ctx,
    req: Request<Incoming>,
) -> Result<Response<Body>, Failure> {
    drop(req);
    Ok(scim_json(StatusCode::OK, &scim_discovery::service_provider_config(&base(state, &ctx)?)))
}

/// `GET /ResourceTypes` and `GET /Schemas`: a ListResponse of every one.
pub async fn resource_types(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    drop(req);
    let all = scim_discovery::resource_types(&base(state, &ctx)?, state.accounts.scim_has_groups());
    let paging = Paging { start_index: 1, count: all.len() };
    Ok(scim_json(StatusCode::OK, &scim_discovery::list_response(all, paging)))
}

pub async fn schemas(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    drop(req);
    let all = scim_discovery::schemas(&base(state, &ctx)?);
    let paging = Paging { start_index: 1, count: all.len() };
    Ok(scim_json(StatusCode::OK, &scim_discovery::list_response(all, paging)))
}

/// `GET /ResourceTypes/{id}` and `GET /Schemas/{id}`: one, or a 404.
pub async fn resource_type(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let id = resource_id(&req, "/ResourceTypes");
    let all = scim_discovery::resource_types(&base(state, &ctx)?, state.accounts.scim_has_groups());
    Ok(scim_json(StatusCode::OK, &scim_discovery::find(all, &id, "ResourceType")?))
}

pub async fn schema(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let id = resource_id(&req, "/Schemas");
    let all = scim_discovery::schemas(&base(state, &ctx)?);
    Ok(scim_json(StatusCode::OK, &scim_discovery::find(all, &id, "Schema")?))
}

/// A list's query: its filter, page and projection; an unknown parameter is an `invalidValue`.
fn list_query(req: &Request<Incoming>) -> Result<(Option<String>, Paging, Projection), Failure> {
    let query = req.uri().query();
    if let Some(query) = query
        && let Some((key, _)) =
            url::form_urlencoded::parse(query.as_bytes()).find(|(k, _)| !LIST_PARAMS.contains(&k.as_ref()))
    {
        return Err(Fault::bad("invalidValue", format!("unknown parameter {key:?}")).into());
    }
    let filter = extract::query_value(query, "filter");
    let paging = Paging::parse(
        extract::query_value(query, "startIndex").as_deref(),
        extract::query_value(query, "count").as_deref(),
    )?;
    Ok((filter, paging, projection(req)?))
}

/// `GET /Users?filter=…&startIndex=…&count=…`.
pub async fn list_users(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let caller = caller(state, &req).await?;
    let (filter, paging, projection) = list_query(&req)?;
    let page = state.accounts.scim_list_users(&caller, filter.as_deref(), paging, &base(state, &ctx)?).await?;
    Ok(list(page, &projection))
}

/// What a `/.search` looks through: one collection, or (at the root) every resource type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Searched {
    Users,
    Groups,
    All,
}

/// `POST /Users/.search`, `POST /Groups/.search` and `POST /.search` (RFC 7644 §3.4.3): a SearchRequest body
/// (`filter`, `startIndex`, `count`, `attributes`, `excludedAttributes`), answered as the list is.
pub async fn search(
    state: &AppState,
    ctx: Ctx,
    req: Request<Incoming>,
    searched: Searched,
) -> Result<Response<Body>, Failure> {
    let caller = caller(state, &req).await?;
    let body = extract::scim_object(req, state.body_timeout()).await?;
    let schemas = body.get("schemas").and_then(Value::as_array);
    if !schemas.is_some_and(|s| s.iter().any(|v| v == scim_discovery::SEARCH_SCHEMA)) {
        return Err(
            Fault::bad("invalidValue", format!("schemas must be [\"{}\"]", scim_discovery::SEARCH_SCHEMA)).into()
        );
    }
    let filter = match body.get("filter") {
        None | Some(Value::Null) => None,
        Some(Value::String(f)) => Some(f.as_str()),
        Some(_) => return Err(Fault::bad("invalidFilter", "filter must be a string").into()),
    };
    let number = |name: &str| match body.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => Ok(Some(n.to_string())),
        Some(_) => Err(Failure::from(Fault::bad("invalidValue", format!("{name} must be an integer")))),
    };
    let paging = Paging::parse(number("startIndex")?.as_deref(), number("count")?.as_deref())?;
    // RFC 7644 §3.4.3: the two are lists of attribute names here (a comma-separated string is taken too).
    let names = |name: &str| match body.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(Value::Array(items)) => items
            .iter()
            .map(|i| i.as_str().map(str::to_owned))
            .collect::<Option<Vec<String>>>()
            .map(|all| Some(all.join(",")))
            .ok_or_else(|| Failure::from(Fault::bad("invalidValue", format!("{name} must be a list of strings")))),
        Some(_) => Err(Failure::from(Fault::bad("invalidValue", format!("{name} must be a list of strings")))),
    };
    let projection = Projection::parse(names("attributes")?.as_deref(), names("excludedAttributes")?.as_deref())?;
    let base = base(state, &ctx)?;
    let page = match searched {
        Searched::Users => state.accounts.scim_list_users(&caller, filter, paging, &base).await?,
        Searched::Groups => state.accounts.scim_list_groups(&caller, filter, paging, &base).await?,
        Searched::All => state.accounts.scim_search(&caller, filter, paging, &base).await?,
    };
    Ok(list(page, &projection))
}

/// `POST /Users` → 201 with the resource, `Location` naming it.
pub async fn create_user(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let caller = caller(state, &req).await?;
    let projection = projection(&req)?;
    let body = extract::scim_object(req, state.body_timeout()).await?;
    let base = base(state, &ctx)?;
    let made = state.accounts.scim_create_user(&caller, &body, &base, &ctx.ip.to_string()).await?;
    Ok(resource(StatusCode::CREATED, made, &projection))
}

pub async fn get_user(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let caller = caller(state, &req).await?;
    let id = resource_id(&req, "/Users");
    let projection = projection(&req)?;
    let found = state.accounts.scim_get_user(&caller, &id, &base(state, &ctx)?).await?;
    Ok(resource(StatusCode::OK, found, &projection))
}

pub async fn replace_user(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let caller = caller(state, &req).await?;
    let id = resource_id(&req, "/Users");
    let projection = projection(&req)?;
    let body = extract::scim_object(req, state.body_timeout()).await?;
    let base = base(state, &ctx)?;
    let written = state.accounts.scim_replace_user(&caller, &id, &body, &base, &ctx.ip.to_string()).await?;
    Ok(resource(StatusCode::OK, written, &projection))
}

pub async fn patch_user(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let caller = caller(state, &req).await?;
    let id = resource_id(&req, "/Users");
    let projection = projection(&req)?;
    let body = extract::scim_object(req, state.body_timeout()).await?;
    let base = base(state, &ctx)?;
    let written = state.accounts.scim_patch_user(&caller, &id, &body, &base, &ctx.ip.to_string()).await?;
    Ok(resource(StatusCode::OK, written, &projection))
}

/// `DELETE /Users/{id}` → 204.
pub async fn delete_user(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let caller = caller(state, &req).await?;
    let id = resource_id(&req, "/Users");
    state.accounts.scim_delete_user(&caller, &id, &ctx.ip.to_string()).await?;
    let mut response = Response::new(Body::default());
    *response.status_mut() = StatusCode::NO_CONTENT;
    Ok(response)
}

/// `GET /Groups?filter=…&startIndex=…&count=…`: the organization's teams its directory made.
pub async fn list_groups(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let caller = caller(state, &req).await?;
    let (filter, paging, projection) = list_query(&req)?;
    let page = state.accounts.scim_list_groups(&caller, filter.as_deref(), paging, &base(state, &ctx)?).await?;
    Ok(list(page, &projection))
}

/// `POST /Groups` → 201 with the resource (a new team), `Location` naming it.
pub async fn create_group(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let caller = caller(state, &req).await?;
    let projection = projection(&req)?;
    let body = extract::scim_object(req, state.body_timeout()).await?;
    let base = base(state, &ctx)?;
    let made = state.accounts.scim_create_group(&caller, &body, &base, &ctx.ip.to_string()).await?;
    Ok(resource(StatusCode::CREATED, made, &projection))
}

pub async fn get_group(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let caller = caller(state, &req).await?;
    let id = resource_id(&req, "/Groups");
    let projection = projection(&req)?;
    let found = state.accounts.scim_get_group(&caller, &id, &base(state, &ctx)?).await?;
    Ok(resource(StatusCode::OK, found, &projection))
}

pub async fn replace_group(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let caller = caller(state, &req).await?;
    let id = resource_id(&req, "/Groups");
    let projection = projection(&req)?;
    let body = extract::scim_object(req, state.body_timeout()).await?;
    let base = base(state, &ctx)?;
    let written = state.accounts.scim_replace_group(&caller, &id, &body, &base, &ctx.ip.to_string()).await?;
    Ok(resource(StatusCode::OK, written, &projection))
}

pub async fn patch_group(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let caller = caller(state, &req).await?;
    let id = resource_id(&req, "/Groups");
    let projection = projection(&req)?;
    let body = extract::scim_object(req, state.body_timeout()).await?;
    let base = base(state, &ctx)?;
    let written = state.accounts.scim_patch_group(&caller, &id, &body, &base, &ctx.ip.to_string()).await?;
    Ok(resource(StatusCode::OK, written, &projection))
}

/// `DELETE /Groups/{id}` → 204: the team goes (its members stay members of the organization).
pub async fn delete_group(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let caller = caller(state, &req).await?;
    let id = resource_id(&req, "/Groups");
    state.accounts.scim_delete_group(&caller, &id, &ctx.ip.to_string()).await?;
    let mut response = Response::new(Body::default());
    *response.status_mut() = StatusCode::NO_CONTENT;
    Ok(response)
}

/// The `{id}` segment of `/api/admin/organizations/{id}/scim-tokens[/{token}]`, and the token's.
fn token_path(req: &Request<Incoming>) -> Result<(OrgId, Option<&str>), Failure> {
    let mut parts = req.uri().path().trim_start_matches("/api/admin/organizations/").split('/');
    let org = parts.next().and_then(OrgId::parse);
    let org = org.ok_or_else(|| Failure::validation("the organization id in the path must be a UUID"))?;
    Ok((org, parts.nth(1)))
}

/// `GET /api/admin/organizations/{id}/scim-tokens` → `{tokens}` (never the tokens themselves).
pub async fn tokens(state: &AppState, _: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let (_, current) = extract::signed_in(state, req.headers()).await?;
    extract::query_only(req.uri().query(), &[])?;
    let (org, _) = token_path(&req)?;
    let tokens = state.accounts.scim_tokens(&current, org).await?;
    Ok(ok(&ScimTokenList { tokens: tokens.iter().map(ScimToken::from).collect() }))
}

/// `POST /api/admin/organizations/{id}/scim-tokens` `{expiresAt?, scopes?}` → `{token, id, expiresAt, scopes}`:
/// the token is shown this once. Every scope unless told.
pub async fn create_token(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let (_, current) = extract::signed_in(state, req.headers()).await?;
    let (org, _) = token_path(&req)?;
    let body = extract::json_object(req, false, state.body_timeout()).await?;
    body.only(&["expiresAt", "scopes"])?;
    let expires_at = match body.nullable_string("expiresAt")? {
        None | Some(None) => None,
        Some(Some(text)) => Some(
            Timestamp::parse_rfc3339(text)
                .map_err(|_| Failure::validation("[body.expiresAt] Invalid input: expected an RFC 3339 date-time"))?,
        ),
    };
    let scopes = match body.get("scopes") {
        None | Some(Value::Null) => ScimScopes::ALL,
        Some(Value::Array(items)) => {
            let names: Option<Vec<&str>> = items.iter().map(Value::as_str).collect();
            let names = names.ok_or_else(|| Failure::validation("[body.scopes] Invalid input: expected strings"))?;
            ScimScopes::parse(names).map_err(|e| Failure::validation(e.to_string()))?
        }
        Some(_) => return Err(Failure::validation("[body.scopes] Invalid input: expected array")),
    };
    let (view, token) =
        state.accounts.create_scim_token(&current, org, scopes, expires_at, &ctx.ip.to_string()).await?;
    let made = ScimTokenCreated {
        expires_at: view.expires_at.map(|at| at.to_rfc3339()),
        id: view.id.to_string(),
        scopes: view.scopes.names(),
        token,
    };
    Ok(ok(&made))
}

/// `DELETE /api/admin/organizations/{id}/scim-tokens/{tokenId}` → `{success}`: refused from now on.
pub async fn revoke_token(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let (_, current) = extract::signed_in(state, req.headers()).await?;
    extract::query_only(req.uri().query(), &[])?;
    let (org, token) = token_path(&req)?;
    let token = token.and_then(|t| uuid::Uuid::try_parse(t).ok());
    let token = token.ok_or_else(|| Failure::with_status(StatusCode::NOT_FOUND, "SCIM token not found"))?;
    state.accounts.revoke_scim_token(&current, org, token, &ctx.ip.to_string()).await?;
    Ok(ok(&SUCCESS))
}
