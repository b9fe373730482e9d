//! Users' consents to the identity provider's clients: the owner's calls on `@better-auth/oauth-provider`'s wire
//! (`/oauth2/get-consents`, `/oauth2/get-consent`, `/oauth2/update-consent`, `/oauth2/delete-consent`, with the
//! session cookie; errors as the plugin's `{error_description, error}`), and administrators' list and withdrawal
//! under `/api/admin/users/{id}/consents`.
//!
//! One departure from the plugin: another user's consent is 404 `not_found`, as one that does not exist, where the
//! plugin answers 401; a caller cannot tell whether an id names someone else's consent.

use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use serde_json::Value;

use super::AppState;
use super::dto::{OAuthConsent, OAuthConsentList, OAuthError, SUCCESS};
use super::extract::{self, Ctx, Refusal};
use super::response::{Body, Failure, json, json_bytes, ok};
use crate::accounts::ConsentsError;
use crate::domain::UserId;

/// The plugin's refusal of a consent call: `{error_description, error}`.
fn refused(e: ConsentsError) -> Result<Response<Body>, Failure> {
    let (status, error) = match &e {
        ConsentsError::NotFound | ConsentsError::ClientNotFound => (StatusCode::NOT_FOUND, "not_found"),
        ConsentsError::InvalidScopes(_) => (StatusCode::BAD_REQUEST, "invalid_request"),
        ConsentsError::Unavailable(u) => return Err((*u).into()),
    };
    Ok(json(status, &OAuthError { error_description: &e.to_string(), error }))
}

/// The consent `id` a call names: a string of 1 to 128 characters (the plugin's ids, and ours, are far shorter).
fn consent_id(id: Option<&str>) -> Result<&str, Failure> {
    match id {
        Some(id) if !id.is_empty() && id.chars().count() <= 128 => Ok(id),
        Some(_) => Err(Failure::validation("[id] must be 1 to 128 characters")),
        None => Err(Failure::validation("[id] Invalid input: expected string, received undefined")),
    }
}

/// `GET /api/auth/oauth2/get-consents` → `[consent]`: every consent the caller has given, by `client_id`.
pub async fn list(state: &AppState, _: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let (_, current) = extract::signed_in(state, req.headers()).await?;
    extract::query_only(req.uri().query(), &[])?;
    match state.accounts.consents(current.user.id).await {
        Ok(consents) => Ok(ok(&consents.iter().map(OAuthConsent::from).collect::<Vec<_>>())),
        Err(e) => refused(e),
    }
}

/// `GET /api/auth/oauth2/get-consent?id=` → the caller's consent `id`; 404 `not_found` for any other.
pub async fn get(state: &AppState, _: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let (_, current) = extract::signed_in(state, req.headers()).await?;
    extract::query_only(req.uri().query(), &["id"])?;
    let id = extract::query_value(req.uri().query(), "id");
    let id = consent_id(id.as_deref())?;
    match state.accounts.consent(current.user.id, id).await {
        Ok(consent) => Ok(ok(&OAuthConsent::from(&consent))),
        Err(e) => refused(e),
    }
}

/// `POST /api/auth/oauth2/update-consent` `{id, update: {scopes}}` → the consent, now granting `scopes` (each one
/// the client was registered with; 400 `invalid_request` otherwise). Audited (`oauth_consent.updated`).
pub async fn update(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let (_, current) = extract::signed_in(state, req.headers()).await?;
    let body = extract::json_object(req, true, state.body_timeout()).await?;
    body.only(&["id", "update"])?;
    let id = consent_id(body.optional_string("id")?)?;
    let scopes = match body.get("update") {
        Some(Value::Object(update)) => {
            if let Some(key) = update.keys().find(|k| *k != "scopes") {
                return Err(Failure::validation(format!("unknown field `update.{key}`; allowed: update.scopes")));
            }
            match update.get("scopes") {
                Some(Value::Array(items)) if items.len() <= 64 => items
                    .iter()
                    .map(|v| v.as_str().filter(|s| !s.is_empty() && s.chars().count() <= 128).map(str::to_owned))
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(|| Failure::validation("[update.scopes] must be an array of scope names"))?,
                Some(Value::Array(_)) => return Err(Failure::validation("[update.scopes] names at most 64 scopes")),
                _ => return Err(Failure::validation("[update.scopes] must be an array of scope names")),
            }
        }
        _ => return Err(Failure::validation("[update] Invalid input: expected object")),
    };
    match state.accounts.update_consent(current.user.id, id, scopes, &ctx.ip.to_string()).await {
        Ok(consent) => Ok(ok(&OAuthConsent::from(&consent))),
        Err(e) => refused(e),
    }
}

/// `POST /api/auth/oauth2/delete-consent` `{id}` → 200 with an empty body (the plugin's endpoint returns nothing):
/// the caller's consent withdrawn; the client's next authorization asks again. Audited (`oauth_consent.revoked`).
pub async fn delete(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let (_, current) = extract::signed_in(state, req.headers()).await?;
    let body = extract::json_object(req, true, state.body_timeout()).await?;
    body.only(&["id"])?;
    let id = consent_id(body.optional_string("id")?)?;
    let user = current.user.id;
    match state.accounts.withdraw_consent(user, id, user, &ctx.ip.to_string()).await {
        Ok(()) => Ok(json_bytes(StatusCode::OK, Vec::new())),
        Err(e) => refused(e),
    }
}

/// The `{id}` segment of `/api/admin/users/{id}/consents…`: the user, who must exist.
fn target(state: &AppState, req: &Request<Incoming>) -> Result<UserId, Failure> {
    let id = req.uri().path().trim_start_matches("/api/admin/users/").split('/').next().unwrap_or_default();
    let id = UserId::parse(id).ok_or_else(|| Failure::validation("the user id in the path must be a UUID"))?;
    let user = state.accounts.user(id).ok_or_else(|| Failure::with_status(StatusCode::NOT_FOUND, "user not found"))?;
    Ok(user.id)
}

fn admin_refused(e: ConsentsError) -> Failure {
    match e {
        ConsentsError::Unavailable(u) => u.into(),
        _ => Failure::with_status(StatusCode::NOT_FOUND, "this user has no such consent"),
    }
}

/// `GET /api/admin/users/{id}/consents` → `{consents: [consent]}`: the applications the user allowed.
pub async fn admin_list(state: &AppState, _: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    extract::administrator(state, req.headers(), Refusal::Plain).await?;
    extract::query_only(req.uri().query(), &[])?;
    let user = target(state, &req)?;
    let consents = state.accounts.consents(user).await.map_err(admin_refused)?;
    Ok(ok(&OAuthConsentList { consents: consents.iter().map(OAuthConsent::from).collect() }))
}

/// `DELETE /api/admin/users/{id}/consents/{consent}` → `{success: true}`: the user's consent `consent` (an `id` of
/// the list above) withdrawn by the administrator. Audited (`oauth_consent.revoked`, by the administrator).
pub async fn admin_withdraw(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let admin = extract::administrator(state, req.headers(), Refusal::Plain).await?;
    extract::query_only(req.uri().query(), &[])?;
    let user = target(state, &req)?;
    let consent = req.uri().path().rsplit('/').next().unwrap_or_default().to_owned();
    let id = consent_id(Some(&consent))?;
    state.accounts.withdraw_consent(user, id, admin.id, &ctx.ip.to_string()).await.map_err(admin_refused)?;
    Ok(ok(&SUCCESS))
}
