//! `/api/auth/*` for sign-in through another identity provider, on better-auth's wire: `sign-in/social` (and the
//! generic plugin's older `sign-in/oauth2`), the provider's redirect back (`callback/{provider}`,
//! `oauth2/callback/{provider}`), `link-social`, `list-accounts`, `unlink-account`. With `idToken`, `sign-in/social`
//! and `link-social` take an ID token the client got from the provider itself, with no flow and no redirect.

use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use serde_json::{Value, json};

use super::AppState;
use super::dto::{AuthUser, STATUS, SignedIn as SignedInBody, TwoFactorRedirect};
use super::extract::{self, Ctx, Fields};
use super::fields::{location_value, safe_redirect};
use super::rate_limits::Limited;
use super::response::{Body, Failure, ok, with_cookie};
use crate::accounts::oauth::{Callback, CallbackError, Finished, FlowStart, StartError};
use crate::accounts::{Accounts, Client, IdTokenProof, IdTokenSignIn, UnlinkError};

/// The fields `sign-in/social` takes (`provider`) and `sign-in/oauth2` (`providerId`).
const START_FIELDS: [&str; 9] = [
    "callbackURL",
    "errorCallbackURL",
    "newUserCallbackURL",
    "disableRedirect",
    "scopes",
    "idToken",
    "loginHint",
    "requestSignUp",
    "additionalData",
];

/// Which callback path a flow comes back to: better-auth's core one, or the generic plugin's older one.
#[derive(Clone, Copy)]
pub enum Via {
    Social,
    OAuth2,
}

impl Via {
    fn callback_path(self, provider: &str) -> String {
        match self {
            Via::Social => format!("/api/auth/callback/{provider}"),
            Via::OAuth2 => format!("/api/auth/oauth2/callback/{provider}"),
        }
    }
    fn provider_field(self) -> &'static str {
        match self {
            Via::Social => "provider",
            Via::OAuth2 => "providerId",
        }
    }
}

/// `POST sign-in/social {provider, callbackURL, …}` (and `sign-in/oauth2 {providerId, …}`): `{url, redirect}`,
/// with `Location` unless `disableRedirect`, and the cookie that binds the flow to this browser. With `idToken`:
/// the session at once (see [`id_token_sign_in`]).
pub async fn sign_in(state: &AppState, ctx: Ctx, req: Request<Incoming>, via: Via) -> Result<Response<Body>, Failure> {
    state.rate_limits.load().check(Limited::SignIn, ctx.ip).map_err(Failure::too_many_requests)?;
    let client = extract::client(&ctx, req.headers());
    let trusted = super::two_factor::trusted_device(state, req.headers());
    let body = extract::json_object(req, true, state.body_timeout()).await?;
    let mut known = START_FIELDS.to_vec();
    known.push(via.provider_field());
    body.only(&known)?;
    let provider = body.string(via.provider_field())?.to_owned();
    if let Some(proof) = id_token_proof(&body, &provider)? {
        trusted_urls(state, &ctx, &body)?;
        return id_token_sign_in(state, proof, trusted, client).await;
    }
    start(state, &ctx, &body, via, provider, None).await
}

/// `POST link-social {provider, callbackURL, …}`: the same flow, whose identity is linked to the signed-in user.
/// With `idToken`: linked at once, `{url: "", status: true, redirect: false}`.
pub async fn link_social(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let (_, current) = extract::signed_in_self(state, req.headers()).await?;
    let client = extract::client(&ctx, req.headers());
    let body = extract::json_object(req, true, state.body_timeout()).await?;
    body.only(&[
        "provider",
        "callbackURL",
        "errorCallbackURL",
        "disableRedirect",
        "scopes",
        "idToken",
        "loginHint",
        "requestSignUp",
        "additionalData",
    ])?;
    let provider = body.string("provider")?.to_owned();
    if let Some(proof) = id_token_proof(&body, &provider)? {
        trusted_urls(state, &ctx, &body)?;
        state.accounts.link_with_id_token(proof, current.user.id, client).await?;
        return Ok(ok(&json!({"url": "", "status": true, "redirect": false})));
    }
    start(state, &ctx, &body, Via::Social, provider, Some(current.user.id)).await
}

/// The fields of better-auth's `idToken` object (`user` is Apple's first-sign-in name, not used: the name comes
/// from the verified token).
const ID_TOKEN_FIELDS: [&str; 6] = ["token", "nonce", "accessToken", "refreshToken", "expiresAt", "user"];

/// `idToken`, when the body has one.
fn id_token_proof(body: &Fields, provider: &str) -> Result<Option<IdTokenProof>, Failure> {
    let fields: Fields = match body.get("idToken") {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Object(map)) => map.clone().into(),
        Some(_) => return Err(Failure::validation("[body.idToken] Invalid input: expected object")),
    };
    fields.only(&ID_TOKEN_FIELDS)?;
    let token = fields.string("token")?;
    // A JWT of a sane size: the body limit bounds it anyway, this says why.
    if token.is_empty() || token.len() > 16 * 1024 {
        return Err(Failure::validation("[body.idToken.token] Invalid input: expected a JWT of at most 16 KiB"));
    }
    let owned = |key: &str| fields.optional_string(key).map(|v| v.map(str::to_owned));
    Ok(Some(IdTokenProof {
        provider: provider.to_owned(),
        token: token.to_owned(),
        nonce: owned("nonce")?,
        access_token: owned("accessToken")?,
        refresh_token: owned("refreshToken")?,
        expires_at_ms: fields.optional_u64("expiresAt")?.and_then(|ms| i64::try_from(ms).ok()),
    }))
}

/// `sign-in/social` with `idToken`: 200 `{redirect: false, token, user}` and the session cookie, as better-auth
/// answers; for an account with a second factor, `{twoFactorRedirect: true, …}` and the challenge cookie, as
/// `sign-in/email` answers.
async fn id_token_sign_in(
    state: &AppState,
    proof: IdTokenProof,
    trusted: Option<crate::domain::SessionToken>,
    client: Client,
) -> Result<Response<Body>, Failure> {
    let (signed_in, renewed_trust) = match state.accounts.sign_in_with_id_token(proof, trusted, client).await? {
        IdTokenSignIn::In { signed_in, .. } => (signed_in, None),
        IdTokenSignIn::Trusted(signed_in, device) => (signed_in, Some(device)),
        IdTokenSignIn::SecondFactor { challenge } => {
            let answer = ok(&TwoFactorRedirect { two_factor_methods: &["totp"], two_factor_redirect: true });
            return Ok(with_cookie(answer, super::two_factor::challenge_cookie(state, &challenge)));
        }
    };
    let token = signed_in.token.as_str();
    let body = SignedInBody { redirect: false, token, url: None, user: AuthUser::from(&*signed_in.user) };
    let mut answer = with_cookie(ok(&body), state.cookies.set(token, true));
    if let Some(device) = renewed_trust {
        answer = with_cookie(answer, super::two_factor::trust_cookie(state, &device));
    }
    Ok(answer)
}

/// `callbackURL`, `errorCallbackURL`, `newUserCallbackURL` (in that order), each a safe relative path or on a
/// trusted origin (403 otherwise; the reset links' rule).
pub(super) type FlowUrls = (Option<String>, Option<String>, Option<String>);

pub(super) fn trusted_urls(state: &AppState, ctx: &Ctx, body: &Fields) -> Result<FlowUrls, Failure> {
    let trusted = |key: &str, code: &'static str| -> Result<Option<String>, Failure> {
        match body.optional_string(key)? {
            None => Ok(None),
            Some(url) => safe_redirect(state, ctx, url)
                .map(Some)
                .ok_or_else(|| Failure::new(StatusCode::FORBIDDEN, code, format!("Invalid {key}"))),
        }
    };
    Ok((
        trusted("callbackURL", "INVALID_CALLBACK_URL")?,
        trusted("errorCallbackURL", "INVALID_ERROR_CALLBACK_URL")?,
        trusted("newUserCallbackURL", "INVALID_NEW_USER_CALLBACK_URL")?,
    ))
}

async fn start(
    state: &AppState,
    ctx: &Ctx,
    body: &Fields,
    via: Via,
    provider: String,
    link_user: Option<crate::domain::UserId>,
) -> Result<Response<Body>, Failure> {
    let (callback_url, error_url, new_user_url) = trusted_urls(state, ctx, body)?;
    let callback_url = callback_url.unwrap_or_else(|| "/".to_owned());
    let disable_redirect = body.optional_bool("disableRedirect")?.unwrap_or(false);
    let scopes = scopes(body)?;
    let login_hint = body.optional_string("loginHint")?.map(str::to_owned);
    let own = state.origins.own(ctx.host()).ok_or_else(|| Failure::bad_request("BAD_REQUEST", "No Host header"))?;
    let start = FlowStart {
        redirect_uri: format!("{own}{}", via.callback_path(&provider)),
        provider,
        callback_url,
        error_url,
        new_user_url,
        link_user,
        scopes,
        login_hint,
    };
    let started = state.accounts.start_flow(start).await.map_err(|e| match e {
        StartError::ProviderNotFound => Failure::new(StatusCode::NOT_FOUND, "PROVIDER_NOT_FOUND", "Provider not found"),
        StartError::Provider(e) => {
            tracing::warn!(error = %e, "a provider's discovery failed");
            Failure::new(StatusCode::BAD_GATEWAY, "PROVIDER_UNAVAILABLE", "The identity provider cannot be reached")
        }
        StartError::Unavailable(u) => u.into(),
    })?;
    let mut answer = ok(&json!({"url": started.url, "redirect": !disable_redirect}));
    if !disable_redirect && let Ok(location) = HeaderValue::from_str(&started.url) {
        answer.headers_mut().insert(header::LOCATION, location);
    }
    Ok(with_cookie(answer, flow_cookie(state, &started.browser, FLOW_COOKIE_AGE)))
}

/// `scopes`: an array of scope names (letters, digits and `:._-/`), asked for beyond the configured ones.
pub(super) fn scopes(body: &Fields) -> Result<Vec<String>, Failure> {
    let bad = || Failure::validation("[body.scopes] Invalid input: expected an array of scope names");
    match body.get("scopes") {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) if items.len() <= 32 => items
            .iter()
            .map(|v| match v.as_str() {
                Some(s)
                    if !s.is_empty()
                        && s.len() <= 128
                        && s.bytes().all(|b| b.is_ascii_alphanumeric() || b":._-/".contains(&b)) =>
                {
                    Ok(s.to_owned())
                }
                _ => Err(bad()),
            })
            .collect(),
        Some(_) => Err(bad()),
    }
}

pub(super) const FLOW_COOKIE_AGE: u64 = 600;

/// The cookie naming this browser's flow: HttpOnly, `SameSite=Lax` (the provider's redirect back is a top-level
/// navigation, which carries it), only on the callback paths.
pub(super) fn flow_cookie(state: &AppState, value: &str, max_age: u64) -> HeaderValue {
    let secure = if state.cookies.secure { "; Secure" } else { "" };
    let name = flow_cookie_name(state);
    HeaderValue::from_str(&format!("{name}={value}; Max-Age={max_age}; Path=/api/auth; HttpOnly{secure}; SameSite=Lax"))
        .unwrap_or_else(|_| HeaderValue::from_static(""))
}

pub(super) fn flow_cookie_name(state: &AppState) -> String {
    // The session cookie's prefix (and `__Secure-` with it).
    state.cookies.name.replace(".session_token", ".oauth_flow")
}

/// `GET callback/{provider}?code&state[&iss]` (and `oauth2/callback/{provider}`): the session cookie and 302 to
/// the flow's callback URL (or its new-user URL), or 302 to its error URL with `?error=`. For an account with a
/// second factor (not on one of its trusted devices): no session, the two-factor cookie `sign-in/email` sets, and
/// 302 to the callback URL with `twoFactorRedirect=true`, where the app asks for the code (`two-factor/verify-*`). A POST (Apple's
/// `form_post`) is turned into the GET, as better-auth does, so the browser's cookies come with it.
pub async fn callback(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let started = std::time::Instant::now();
    let path = req.uri().path().to_owned();
    let provider = path.rsplit('/').next().unwrap_or_default().to_owned();
    if req.method() == Method::POST {
        let form = extract::form_body(req, state.body_timeout()).await?;
        let kept: Vec<(String, String)> = form
            .into_iter()
            .filter(|(k, _)| ["code", "state", "error", "error_description", "iss", "user"].contains(&k.as_str()))
            .collect();
        let query: String = url::form_urlencoded::Serializer::new(String::new()).extend_pairs(kept).finish();
        return Ok(redirect(&format!("{path}?{query}")));
    }
    let query = req.uri().query();
    let value = |name: &str| extract::query_value(query, name);
    let Some(state_param) = value("state") else {
        return Err(Failure::bad_request("STATE_NOT_FOUND", "State not found"));
    };
    let (code, error, error_description, iss) =
        (value("code"), value("error"), value("error_description"), value("iss"));
    let headers = req.headers();
    let browser = extract::cookie(headers, &flow_cookie_name(state)).map(str::to_owned);
    let signed_in = extract::signed_in_or_none(state, headers).await?.map(|(_, current)| current.user.id);
    let client = extract::client(&ctx, headers);
    let callback = Callback {
        provider: &provider,
        state: &state_param,
        code: code.as_deref(),
        error: error.as_deref(),
        error_description: error_description.as_deref(),
        iss: iss.as_deref(),
        browser: browser.as_deref(),
        signed_in,
        trusted: super::two_factor::trusted_device(state, headers),
    };
    let mut waited = std::time::Duration::ZERO;
    let finished = state.accounts.finish_flow(callback, client, &mut waited).await;
    let answer = finished_answer(state, finished).map(|answer| with_cookie(answer, flow_cookie(state, "", 0)));
    // The callback's own time: what this server did, not what it waited for at the provider.
    state.accounts.metrics.oauth_callback_own.record(started.elapsed().saturating_sub(waited).as_secs_f64());
    answer
}

/// How a sign-in through a provider (a callback, or a SAML response at the ACS) ends for the browser: the session
/// cookie and 302 to the flow's callback URL (or its new-user URL); for an account with a second factor, the
/// two-factor cookie and 302 with `twoFactorRedirect=true`; a link, 302 to the callback URL; a refusal, 302 to
/// the flow's error URL with `?error=` (400 when there is no flow).
pub(super) fn finished_answer(
    state: &AppState,
    finished: Result<Finished, CallbackError>,
) -> Result<Response<Body>, Failure> {
    match finished {
        Ok(Finished::SignedIn { signed_in, new_user, callback_url, new_user_url, renewed_trust }) => {
            let target = if new_user { new_user_url.unwrap_or(callback_url) } else { callback_url };
            let mut answer = with_cookie(redirect(&target), state.cookies.set(signed_in.token.as_str(), true));
            if let Some(device) = renewed_trust {
                answer = with_cookie(answer, super::two_factor::trust_cookie(state, &device));
            }
            Ok(answer)
        }
        Ok(Finished::SecondFactor { challenge, callback_url }) => {
            let answer = redirect(&with_query(&callback_url, "twoFactorRedirect=true"));
            Ok(with_cookie(answer, super::two_factor::challenge_cookie(state, &challenge)))
        }
        Ok(Finished::Linked { callback_url }) => Ok(redirect(&callback_url)),
        Err(CallbackError::NoFlow) => {
            Err(Failure::bad_request("STATE_NOT_FOUND", "This sign-in was finished already, expired, or never started"))
        }
        Err(CallbackError::Redirect { error_url, code, description }) => {
            let mut params = url::form_urlencoded::Serializer::new(String::new());
            params.append_pair("error", code);
            if let Some(d) = description {
                params.append_pair("error_description", &d);
            }
            let separator = if error_url.contains('?') { '&' } else { '?' };
            Ok(redirect(&format!("{error_url}{separator}{}", params.finish())))
        }
        Err(CallbackError::Unavailable) => Err(Failure::unavailable()),
    }
}

/// `GET list-accounts`: the password (`credential`, when the account has one) and every linked identity.
pub async fn list_accounts(state: &AppState, _: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let (_, current) = extract::signed_in(state, req.headers()).await?;
    let user = &current.user;
    let user_id = user.id.to_string();
    let mut listed = Vec::new();
    if Accounts::has_password(user) {
        listed.push(json!({
            "id": user_id,
            "providerId": "credential",
            "accountId": user_id,
            "userId": user_id,
            "scopes": [],
            "createdAt": user.created_at.to_rfc3339(),
            "updatedAt": user.updated_at.to_rfc3339(),
        }));
    }
    for a in state.accounts.linked_accounts(user.id) {
        listed.push(json!({
            "id": a.id_string(),
            "providerId": a.provider,
            "accountId": a.subject,
            "userId": user_id,
            "scopes": [],
            "createdAt": a.created_at.to_rfc3339(),
            "updatedAt": a.updated_at.to_rfc3339(),
        }));
    }
    Ok(ok(&listed))
}

/// `POST unlink-account {accountId[, providerId]}`: `accountId` is an id `list-accounts` gave (or, with
/// `providerId`, the provider's own id of the person); never the last way into the account. Needs a fresh session.
pub async fn unlink_account(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let (_, current) = extract::signed_in_self(state, req.headers()).await?;
    extract::fresh(state, &current)?;
    let body = extract::json_object(req, true, state.body_timeout()).await?;
    body.only(&["accountId", "providerId"])?;
    let account_id = body.string("accountId")?;
    let provider = body.optional_string("providerId")?;
    let user = &current.user;
    let not_found = || Failure::bad_request("ACCOUNT_NOT_FOUND", "Account not found");
    let target = if provider == Some("credential") || (provider.is_none() && account_id == user.id.to_string()) {
        None
    } else {
        let linked = state.accounts.linked_accounts(user.id);
        let found = linked.iter().find(|a| match provider {
            Some(p) => a.provider == p && (a.subject == account_id || a.id_string() == account_id),
            None => a.id_string() == account_id,
        });
        Some(found.ok_or_else(not_found)?.id)
    };
    state.accounts.unlink(user.id, target, current.actor(), &ctx.ip.to_string()).await.map_err(|e| match e {
        UnlinkError::NotFound => not_found(),
        UnlinkError::LastWayIn => {
            Failure::bad_request("FAILED_TO_UNLINK_LAST_ACCOUNT", "You can't unlink your last account")
        }
        UnlinkError::Unavailable(u) => u.into(),
    })?;
    Ok(ok(&STATUS))
}

/// `url` with `pair` added to its query (before any fragment), the query it had kept.
fn with_query(url: &str, pair: &str) -> String {
    let (base, fragment) = url.split_once('#').map_or((url, None), |(b, f)| (b, Some(f)));
    let separator = if base.contains('?') { '&' } else { '?' };
    match fragment {
        Some(fragment) => format!("{base}{separator}{pair}#{fragment}"),
        None => format!("{base}{separator}{pair}"),
    }
}

fn redirect(target: &str) -> Response<Body> {
    let mut response = Response::new(Body::default());
    *response.status_mut() = StatusCode::FOUND;
    if let Ok(location) = HeaderValue::from_str(&location_value(target)) {
        response.headers_mut().insert(header::LOCATION, location);
    }
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

#[cfg(test)]
mod tests {
    use super::with_query;

    #[test]
    fn a_pair_is_added_to_the_query_before_the_fragment() {
        assert_eq!(with_query("/home", "a=1"), "/home?a=1");
        assert_eq!(with_query("/home?tab=2", "a=1"), "/home?tab=2&a=1");
        assert_eq!(with_query("https://app.example/x?y=1#top", "a=1"), "https://app.example/x?y=1&a=1#top");
        assert_eq!(with_query("/x#frag?not-a-query", "a=1"), "/x?a=1#frag?not-a-query");
    }
}
