//! The identity provider's public documents: the JWKS at the jwt plugin's path and the discovery document at the
//! issuer (`<base>/api/auth`), as `@better-auth/oauth-provider` serves them; and, for administrators, its signing
//! keys (the list, and a rotation) and its clients.

use std::time::Duration;

use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Request, Response, StatusCode};
use serde_json::Value;

use super::AppState;
use super::dto::{
    Jwks, OAuthClient, OAuthClientAndSecret, OAuthClientList, ProviderMetadata, SUCCESS, SigningKey, SigningKeyList,
};
use super::extract::{self, Ctx, Fields, Refusal};
use super::response::{Body, Failure, json, ok};
use crate::accounts::{Alg, ClientChange, NewClient};
use crate::domain::Timestamp;

/// The plugin's caching of its metadata: relying parties may keep it briefly, and use a stale copy while the
/// server is down. The JWKS gets the same: a new key is published an hour before it signs, far longer.
const PUBLIC_CACHE: &str = "public, max-age=15, stale-while-revalidate=15, stale-if-error=86400";
/// The rotation's default lead, and its longest.
const DEFAULT_LEAD_SECS: u64 = 3_600;
const MAX_LEAD_SECS: u64 = 30 * 86_400;

/// The issuer: the server's own origin (`base_url`, else the request's `Host`) and better-auth's base path, as
/// the plugin's `baseURL` is `<base>/api/auth`.
fn issuer(state: &AppState, ctx: &Ctx) -> Result<String, Failure> {
    let own = state.origins.own(ctx.host()).ok_or_else(|| Failure::bad_request("BAD_REQUEST", "No Host header"))?;
    Ok(format!("{own}/api/auth"))
}

fn public(mut response: Response<Body>) -> Response<Body> {
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static(PUBLIC_CACHE));
    response
}

/// `GET /api/auth/jwks` → `{keys: [JWK…]}`: every key that signs, will sign, or signed a token still valid. The
/// first keys are made by the first request that needs them.
pub async fn jwks(state: &AppState, _: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    drop(req);
    let keys = state.accounts.jwks().await?;
    Ok(public(ok(&Jwks { keys: &keys })))
}

/// `GET /api/auth/.well-known/openid-configuration`, `/api/auth/.well-known/oauth-authorization-server` and
/// RFC 8414's `/.well-known/oauth-authorization-server/api/auth`: the provider's metadata.
pub async fn metadata(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    drop(req);
    let issuer = issuer(state, &ctx)?;
    Ok(public(ok(&ProviderMetadata::new(&issuer, state.accounts.signing_algs()))))
}

/// `GET /api/admin/oidc/keys` → `{keys}`: every key held, newest first within each algorithm.
pub async fn keys(state: &AppState, _: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    extract::administrator(state, req.headers(), Refusal::Plain).await?;
    extract::query_only(req.uri().query(), &[])?;
    let keys = state.accounts.signing_keys().await?;
    let now = Timestamp::now();
    Ok(ok(&SigningKeyList { keys: keys.iter().map(|k| SigningKey::new(k, now)).collect() }))
}

/// `POST /api/admin/oidc/keys/rotate` `{algs?, lead_secs?}` → `{keys}`: a new key for each algorithm named
/// (all three unless told), published now and signing `lead_secs` from now (an hour unless told); the keys they
/// replace sign until then. Audited.
pub async fn rotate(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let admin = extract::administrator(state, req.headers(), Refusal::Plain).await?;
    let body = extract::json_object(req, false, state.body_timeout()).await?;
    body.only(&["algs", "lead_secs"])?;
    let algs = match body.get("algs") {
        None | Some(Value::Null) => Alg::ALL.to_vec(),
        Some(Value::Array(items)) if !items.is_empty() => {
            let mut algs = Vec::new();
            for item in items {
                let alg = item.as_str().and_then(Alg::parse).ok_or_else(|| {
                    Failure::validation("algs must name one or more of \"EdDSA\", \"ES256\" and \"RS256\"")
                })?;
                if !algs.contains(&alg) {
                    algs.push(alg);
                }
            }
            algs
        }
        Some(_) => return Err(Failure::validation("algs must name one or more of \"EdDSA\", \"ES256\" and \"RS256\"")),
    };
    let lead = body.optional_u64("lead_secs")?.unwrap_or(DEFAULT_LEAD_SECS);
    if lead > MAX_LEAD_SECS {
        return Err(Failure::validation(format!("lead_secs must be 0 to {MAX_LEAD_SECS}")));
    }
    let ip = ctx.ip.to_string();
    let keys = state.accounts.rotate_signing_keys(&algs, Duration::from_secs(lead), admin.id, &ip).await?;
    let now = Timestamp::now();
    Ok(ok(&SigningKeyList { keys: keys.iter().map(|k| SigningKey::new(k, now)).collect() }))
}

/// The `{client_id}` segment of `/api/admin/oidc/clients/{client_id}`: the plugin's 32 letters, or an imported
/// client's id (letters, digits, `-`, `_`, `.`; at most 128).
fn client_id(req: &Request<Incoming>) -> Result<String, Failure> {
    let id = req.uri().path().trim_start_matches("/api/admin/oidc/clients/");
    let valid = !id.is_empty()
        && id.len() <= 128
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if valid { Ok(id.to_owned()) } else { Err(Failure::validation("the client_id in the path is malformed")) }
}

fn strings(body: &Fields, key: &str) -> Result<Option<Vec<String>>, Failure> {
    match body.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| v.as_str().map(str::to_owned))
            .collect::<Option<Vec<_>>>()
            .map(Some)
            .ok_or_else(|| Failure::validation(format!("{key} must be an array of strings"))),
        Some(_) => Err(Failure::validation(format!("{key} must be an array of strings"))),
    }
}

/// `scope`: space-separated, as RFC 7591.
fn scope(body: &Fields) -> Result<Option<Vec<String>>, Failure> {
    Ok(body.optional_string("scope")?.map(|s| s.split(' ').filter(|s| !s.is_empty()).map(str::to_owned).collect()))
}

/// `GET /api/admin/oidc/clients` → `{clients}`, oldest first.
pub async fn clients(state: &AppState, _: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    extract::administrator(state, req.headers(), Refusal::Plain).await?;
    extract::query_only(req.uri().query(), &[])?;
    let clients = state.accounts.oauth_clients().await?;
    Ok(ok(&OAuthClientList { clients: clients.iter().map(OAuthClient::from).collect() }))
}

/// `POST /api/admin/oidc/clients` (RFC 7591's fields) → 201 `{client, client_secret}`: the secret of a
/// confidential client, shown this once (`null` for a public one).
pub async fn create_client(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let admin = extract::administrator(state, req.headers(), Refusal::Plain).await?;
    let body = extract::json_object(req, true, state.body_timeout()).await?;
    body.only(&[
        "client_name",
        "redirect_uris",
        "post_logout_redirect_uris",
        "scope",
        "grant_types",
        "token_endpoint_auth_method",
        "application_type",
        "skip_consent",
        "enable_end_session",
        "id_token_signed_response_alg",
    ])?;
    let new = NewClient {
        name: body.string("client_name")?.to_owned(),
        redirect_uris: strings(&body, "redirect_uris")?.unwrap_or_default(),
        post_logout_redirect_uris: strings(&body, "post_logout_redirect_uris")?.unwrap_or_default(),
        scopes: scope(&body)?,
        grant_types: strings(&body, "grant_types")?,
        auth_method: body.optional_string("token_endpoint_auth_method")?.map(str::to_owned),
        application_type: body.optional_string("application_type")?.map(str::to_owned),
        skip_consent: body.optional_bool("skip_consent")?.unwrap_or(false),
        enable_end_session: body.optional_bool("enable_end_session")?.unwrap_or(false),
        id_token_signed_response_alg: body.optional_string("id_token_signed_response_alg")?.map(str::to_owned),
    };
    let (client, secret) = state.accounts.create_oauth_client(new, admin.id, &ctx.ip.to_string()).await?;
    let answer = OAuthClientAndSecret { client: OAuthClient::from(&client), client_secret: secret.as_deref() };
    Ok(json(StatusCode::CREATED, &answer))
}

/// `GET /api/admin/oidc/clients/{client_id}` → `{client, client_secret: null}`.
pub async fn client(state: &AppState, _: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    extract::administrator(state, req.headers(), Refusal::Plain).await?;
    let id = client_id(&req)?;
    extract::query_only(req.uri().query(), &[])?;
    let client = state.accounts.oauth_client(&id).await?;
    Ok(ok(&OAuthClientAndSecret { client: OAuthClient::from(&client), client_secret: None }))
}

/// `PATCH /api/admin/oidc/clients/{client_id}` `{client_name?, redirect_uris?, post_logout_redirect_uris?, scope?,
/// grant_types?, skip_consent?, enable_end_session?, disabled?, id_token_signed_response_alg?, rotate_secret?}` →
/// `{client, client_secret}` (the new secret when rotated, else `null`).
pub async fn update_client(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let admin = extract::administrator(state, req.headers(), Refusal::Plain).await?;
    let id = client_id(&req)?;
    let body = extract::json_object(req, true, state.body_timeout()).await?;
    body.only(&[
        "client_name",
        "redirect_uris",
        "post_logout_redirect_uris",
        "scope",
        "grant_types",
        "skip_consent",
        "enable_end_session",
        "disabled",
        "id_token_signed_response_alg",
        "rotate_secret",
    ])?;
    let change = ClientChange {
        name: body.optional_string("client_name")?.map(str::to_owned),
        redirect_uris: strings(&body, "redirect_uris")?,
        post_logout_redirect_uris: strings(&body, "post_logout_redirect_uris")?,
        scopes: scope(&body)?,
        grant_types: strings(&body, "grant_types")?,
        skip_consent: body.optional_bool("skip_consent")?,
        enable_end_session: body.optional_bool("enable_end_session")?,
        disabled: body.optional_bool("disabled")?,
        id_token_signed_response_alg: body.optional_string("id_token_signed_response_alg")?.map(str::to_owned),
        rotate_secret: body.optional_bool("rotate_secret")?.unwrap_or(false),
    };
    if change.is_empty() {
        return Err(Failure::validation("nothing to change"));
    }
    let (client, secret) = state.accounts.update_oauth_client(&id, change, admin.id, &ctx.ip.to_string()).await?;
    Ok(ok(&OAuthClientAndSecret { client: OAuthClient::from(&client), client_secret: secret.as_deref() }))
}

/// `DELETE /api/admin/oidc/clients/{client_id}` → `{success: true}`. Audited.
pub async fn delete_client(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let admin = extract::administrator(state, req.headers(), Refusal::Plain).await?;
    let id = client_id(&req)?;
    extract::query_only(req.uri().query(), &[])?;
    state.accounts.delete_oauth_client(&id, admin.id, &ctx.ip.to_string()).await?;
    Ok(ok(&SUCCESS))
}
