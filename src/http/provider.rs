//! The identity provider's public documents: the JWKS at the jwt plugin's path and the discovery document at the
//! issuer (`<base>/api/auth`), as `@better-auth/oauth-provider` serves them; and its signing keys for
//! administrators (the list, and a rotation).

use std::time::Duration;

use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Request, Response};
use serde_json::Value;

use super::AppState;
use super::dto::{Jwks, ProviderMetadata, SigningKey, SigningKeyList};
use super::extract::{self, Ctx, Refusal};
use super::response::{Body, Failure, ok};
use crate::accounts::Alg;
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
