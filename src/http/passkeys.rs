//! `/api/auth/passkey/*`: the calls of `@better-auth/passkey` 1.7, which its `passkeyClient()` makes: registration
//! options and verification (signed in, on a fresh session of one's own), sign-in options and verification (with a
//! passkey alone), and listing, renaming and deleting one's passkeys. A ceremony's two calls are tied together by
//! the plugin's cookie (`<prefix>.better-auth-passkey`, five minutes, HttpOnly).

use hyper::body::Incoming;
use hyper::header::{self, HeaderMap};
use hyper::{Request, Response, StatusCode};
use serde::Serialize;
use serde_json::{Value, json};

use super::AppState;
use super::dto::{STATUS, session_and_user_json};
use super::extract::{self, Ctx, Fields, Refusal};
use super::rate_limits::Limited;
use super::response::{Body, Failure, json_bytes, ok, with_cookie};
use crate::accounts::{
    Attachment, CeremonyToken, Current, PasskeyError, SignedIn, credential_id_base64url, public_key_base64,
};
use crate::domain::{Name, Passkey, PasskeyId, SessionToken, UserId};

/// How long a ceremony's cookie lives: the plugin's `maxAge`, and the store's lifetime of the ceremony.
const CEREMONY_SECS: u64 = 300;

/// A passkey as the plugin's answers carry it: its database row.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PasskeyBody {
    id: PasskeyId,
    name: Option<String>,
    public_key: String,
    user_id: String,
    #[serde(rename = "credentialID")]
    credential_id: String,
    counter: u32,
    device_type: &'static str,
    backed_up: bool,
    /// Comma-separated, as the plugin stores them.
    transports: String,
    created_at: String,
    aaguid: String,
}

impl From<&Passkey> for PasskeyBody {
    fn from(p: &Passkey) -> Self {
        Self {
            id: p.id,
            name: p.name.as_ref().map(|n| n.as_str().to_owned()),
            public_key: public_key_base64(p),
            user_id: p.user_id.to_string(),
            credential_id: credential_id_base64url(p),
            counter: p.counter,
            device_type: if p.backup_eligible { "multiDevice" } else { "singleDevice" },
            backed_up: p.backed_up,
            transports: p.transports.join(","),
            created_at: p.created_at.to_rfc3339(),
            aaguid: p.aaguid.unwrap_or_default().hyphenated().to_string(),
        }
    }
}

/// The caller, on their own session (not an impersonation: an administrator acting as a user may not add or remove
/// the user's ways in), made within a day.
async fn fresh_self(state: &AppState, headers: &HeaderMap) -> Result<Current, Failure> {
    // Allowed to a session that must enrol a second factor first (`[two_factor] required_for_roles`): a passkey
    // is one.
    let (_, current) = extract::signed_in_self_enrolling(state, headers).await?;
    extract::fresh(state, &current)?;
    Ok(current)
}

/// The ceremony token in the request's cookie, if it has the shape of one.
fn ceremony_token(state: &AppState, headers: &HeaderMap) -> Option<CeremonyToken> {
    extract::cookie(headers, &state.cookies.passkey_name).and_then(SessionToken::parse)
}

/// The plugin reads the origin from the request and refuses a request without one; the origin that counts is the
/// one the browser signed (in the client data), checked against `[passkeys] origins`.
fn has_origin(headers: &HeaderMap) -> bool {
    headers.contains_key(header::ORIGIN)
}

/// The body's `response` (the browser's credential, as `@simplewebauthn/browser` serialises it).
fn credential_response(body: &Fields) -> Result<&Value, Failure> {
    body.get("response").filter(|v| v.is_object()).ok_or_else(|| Failure::validation("response must be an object"))
}

fn passkey_name(raw: &str) -> Result<Name, Failure> {
    Name::parse(raw).map_err(|e| Failure::validation(format!("name {e}")))
}

/// `GET generate-register-options?authenticatorAttachment=&name=`: the options for `navigator.credentials.create`
/// and the ceremony's cookie.
pub async fn registration_options(state: &AppState, _: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let current = fresh_self(state, req.headers()).await?;
    let query = req.uri().query();
    extract::query_only(query, &["authenticatorAttachment", "name", "context"])?;
    let attachment = match extract::query_value(query, "authenticatorAttachment") {
        None => None,
        Some(a) => Some(
            Attachment::parse(&a)
                .ok_or_else(|| Failure::validation("authenticatorAttachment must be platform or cross-platform"))?,
        ),
    };
    let name = extract::query_value(query, "name").map(|n| passkey_name(&n)).transpose()?;
    let name = name.as_ref().map(Name::as_str);
    let (token, options) = state.accounts.passkey_registration_options(&current, name, attachment).await?;
    Ok(with_cookie(ok(&options), state.cookies.set_passkey(token.as_str(), CEREMONY_SECS)))
}

/// `POST verify-registration {response, name?, createSession?}`: the new passkey (with `createSession: true`, also
/// a new session, its cookie, and `session` and `user` beside the passkey's fields).
pub async fn verify_registration(
    state: &AppState,
    ctx: Ctx,
    req: Request<Incoming>,
) -> Result<Response<Body>, Failure> {
    let current = fresh_self(state, req.headers()).await?;
    let origin = has_origin(req.headers());
    let token = ceremony_token(state, req.headers());
    let client = extract::client(&ctx, req.headers());
    let body = extract::json_object(req, true, state.body_timeout()).await?;
    body.only(&["response", "name", "createSession"])?;
    let response = credential_response(&body)?;
    let name = match body.optional_string("name")?.map(str::trim) {
        None | Some("") => None,
        Some(name) => Some(passkey_name(name)?),
    };
    let create_session = body.optional_bool("createSession")?.unwrap_or(false);
    if !origin {
        return Err(PasskeyError::RegistrationFailed.into());
    }
    let ip = ctx.ip.to_string();
    let passkey = state.accounts.verify_passkey_registration(&current, token, response, name, &ip).await?;
    let answer = serde_json::to_value(PasskeyBody::from(&passkey)).unwrap_or_default();
    let answer = if create_session {
        let SignedIn { token, session, user } = state.accounts.passkey_session(current.user.id, client).await?;
        let mut merged = answer;
        let opened: Value =
            serde_json::from_slice(&session_and_user_json(&session, token.as_str(), &user)).unwrap_or_default();
        if let (Some(merged), Some(opened)) = (merged.as_object_mut(), opened.as_object()) {
            merged.extend(opened.clone());
        }
        with_cookie(ok(&merged), state.cookies.set(token.as_str(), true))
    } else {
        ok(&answer)
    };
    Ok(with_cookie(answer, state.cookies.clear_passkey()))
}

/// `GET generate-authenticate-options`: the options for `navigator.credentials.get` and the ceremony's cookie.
/// Without a session any passkey of this site may answer (sign-in with a passkey alone); with one, the caller's
/// are listed. Limited per client address like sign-in: each call stores a ceremony.
pub async fn authentication_options(
    state: &AppState,
    ctx: Ctx,
    req: Request<Incoming>,
) -> Result<Response<Body>, Failure> {
    state.rate_limits.load().check(Limited::SignIn, ctx.ip).map_err(Failure::too_many_requests)?;
    let caller = extract::signed_in_or_none(state, req.headers()).await?.map(|(_, current)| current);
    let (token, options) = state.accounts.passkey_authentication_options(caller.as_ref()).await?;
    Ok(with_cookie(ok(&options), state.cookies.set_passkey(token.as_str(), CEREMONY_SECS)))
}

/// `POST verify-authentication {response}`: `{session, user}` and the session cookie, as a sign-in.
pub async fn verify_authentication(
    state: &AppState,
    ctx: Ctx,
    req: Request<Incoming>,
) -> Result<Response<Body>, Failure> {
    if let Err(refused) = state.rate_limits.load().check(Limited::SignIn, ctx.ip) {
        extract::discard_body(req, state.body_timeout()).await;
        return Err(Failure::too_many_requests(refused));
    }
    let origin = has_origin(req.headers());
    let token = ceremony_token(state, req.headers());
    let client = extract::client(&ctx, req.headers());
    let body = extract::json_object(req, true, state.body_timeout()).await?;
    body.only(&["response"])?;
    let response = credential_response(&body)?;
    if !origin {
        return Err(Failure::bad_request("ORIGIN_MISSING", "origin missing"));
    }
    let signed_in = state.accounts.sign_in_with_passkey(token, response, client).await;
    let SignedIn { token, session, user } = signed_in.map_err(|e| match e {
        // Here, as in the plugin, an unknown credential is a failed sign-in (401), not a missing resource.
        PasskeyError::NotFound => Failure::new(StatusCode::UNAUTHORIZED, "PASSKEY_NOT_FOUND", e.to_string()),
        other => other.into(),
    })?;
    let answer = json_bytes(StatusCode::OK, session_and_user_json(&session, token.as_str(), &user));
    let answer = with_cookie(answer, state.cookies.set(token.as_str(), true));
    Ok(with_cookie(answer, state.cookies.clear_passkey()))
}

/// `GET list-user-passkeys`: the caller's passkeys, oldest first.
pub async fn list(state: &AppState, _: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let (_, current) = extract::signed_in(state, req.headers()).await?;
    extract::query_only(req.uri().query(), &[])?;
    let passkeys = state.accounts.own_passkeys(current.user.id).await?;
    Ok(ok(&passkeys.iter().map(PasskeyBody::from).collect::<Vec<_>>()))
}

/// The caller's passkey named by the body's `id`: one that is not the caller's is answered as one that does not
/// exist (the plugin says 401 for it; an id tells nothing either way here).
fn passkey_id(body: &Fields) -> Result<PasskeyId, Failure> {
    PasskeyId::parse(body.string("id")?).ok_or_else(|| PasskeyError::NotFound.into())
}

/// `POST update-passkey {id, name}`: `{passkey}`.
pub async fn update(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let (_, current) = extract::signed_in_self(state, req.headers()).await?;
    let body = extract::json_object(req, true, state.body_timeout()).await?;
    body.only(&["id", "name"])?;
    let name = passkey_name(body.string("name")?)?;
    let id = passkey_id(&body)?;
    let renamed = state.accounts.rename_passkey(&current, id, name, &ctx.ip.to_string()).await?;
    Ok(ok(&json!({"passkey": PasskeyBody::from(&renamed)})))
}

/// `POST delete-passkey {id}`: `{status: true}`. A fresh session only (ASVS 7.5.1): removing a factor is a change
/// of how the account is signed into, as adding one is.
pub async fn delete(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let (_, current) = extract::signed_in_self(state, req.headers()).await?;
    extract::fresh(state, &current)?;
    let body = extract::json_object(req, true, state.body_timeout()).await?;
    body.only(&["id"])?;
    let id = passkey_id(&body)?;
    state.accounts.delete_passkey(&current, id, &ctx.ip.to_string()).await?;
    Ok(ok(&STATUS))
}

/// A passkey as the administration API shows it (snake_case, as `/api/admin/*`): what it is and when it came, not
/// its key.
#[derive(Serialize)]
struct AdminPasskey {
    id: PasskeyId,
    name: Option<String>,
    device_type: &'static str,
    backed_up: bool,
    created_at: String,
}

/// `GET /api/admin/users/{id}/passkeys` → `{passkeys: [...]}`, oldest first: an account's passkeys, for
/// administrators (the console shows them with the user's sessions). 404 for an unknown account.
pub async fn of_user(state: &AppState, _: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    extract::administrator(state, req.headers(), Refusal::Plain).await?;
    extract::query_only(req.uri().query(), &[])?;
    let id = req.uri().path().trim_start_matches("/api/admin/users/").split('/').next().unwrap_or_default();
    let id = UserId::parse(id).ok_or_else(|| Failure::validation("the user id in the path must be a UUID"))?;
    let user = state.accounts.user(id).ok_or_else(|| Failure::with_status(StatusCode::NOT_FOUND, "user not found"))?;
    let passkeys = state.accounts.own_passkeys(user.id).await?;
    let listed: Vec<AdminPasskey> = passkeys
        .iter()
        .map(|p| AdminPasskey {
            id: p.id,
            name: p.name.as_ref().map(|n| n.as_str().to_owned()),
            device_type: if p.backup_eligible { "multiDevice" } else { "singleDevice" },
            backed_up: p.backed_up,
            created_at: p.created_at.to_rfc3339(),
        })
        .collect();
    Ok(ok(&json!({ "passkeys": listed })))
}
