//! `/api/auth/*`: sign-up, sign-in, get-session, sign-out. Each handler: parse → domain → facade → answer.

use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Request, Response, StatusCode};

use super::AppState;
use super::dto::{
    AuthUser, SUCCESS, SignedIn as SignedInBody, TokenAndUser, TwoFactorRedirect, UsernameAvailable,
    key_session_and_user_json, session_and_user_json,
};
use super::extract::Ctx;
use super::extract::{self, Fields};
use super::fields::{
    image_url, invalid_email, location_value, safe_redirect, username_422, username_fields, validated_name,
};
use super::rate_limits::Limited;
use super::response::{Body, Failure, json_bytes, ok, with_cookie};
use crate::accounts::{SignInError, SignInOutcome, SignUp, SignedIn, SignedUp};
use crate::domain::{Email, Password};

/// Fields a client may not set at sign-up: they are the administrator's to decide.
const ADMIN_ONLY_FIELDS: [&str; 6] = ["role", "banned", "banReason", "banExpires", "emailVerified", "organizationId"];

pub async fn sign_up(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    if let Err(refused) = admit(state, &ctx, Limited::SignUp) {
        return Err(refuse_unread(state, req, refused).await);
    }
    let client = extract::client(&ctx, req.headers());
    let body = extract::json_object(req, true, state.body_timeout()).await?;
    if let Some(field) = ADMIN_ONLY_FIELDS.into_iter().find(|f| body.has(f)) {
        return Err(Failure::bad_request("FIELD_NOT_ALLOWED", format!("{field} is not allowed to be set")));
    }
    let (name, email, password) = (body.string("name")?, body.string("email")?, body.string("password")?);
    let image = body.optional_string("image")?;
    let remember_me = body.optional_bool("rememberMe")?.unwrap_or(true);
    callback_url(state, &ctx, &body)?;
    let name = validated_name(name)?;
    let image = image.map(image_url).transpose()?;
    let email = Email::parse(email).map_err(|_| invalid_email())?;
    let password = Password::new(password)?;
    let (username, display_username) = username_fields(state, &body, true)?;
    let form = SignUp { name, email, password, image, remember_me, username, display_username };
    match state.accounts.sign_up(form, client).await? {
        SignedUp::In(SignedIn { token, user, .. }) => {
            let answer = ok(&TokenAndUser { token: Some(token.as_str()), user: AuthUser::from(&*user) });
            Ok(with_cookie(answer, state.cookies.set(token.as_str(), remember_me)))
        }
        // Addresses must be verified first: a link was mailed, no session was opened (as the auth library does).
        SignedUp::VerifyFirst(user) => Ok(ok(&TokenAndUser { token: None, user: AuthUser::from(&*user) })),
    }
}

pub async fn sign_in(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    if let Err(refused) = admit(state, &ctx, Limited::SignIn) {
        return Err(refuse_unread(state, req, refused).await);
    }
    let client = extract::client(&ctx, req.headers());
    let trusted = super::two_factor::trusted_device(state, req.headers());
    let body = extract::json_object(req, true, state.body_timeout()).await?;
    let (email, password) = (body.string("email")?, body.string("password")?);
    let remember_me = body.optional_bool("rememberMe")?.unwrap_or(true);
    let callback = callback_url(state, &ctx, &body)?;
    let email = Email::parse(email).map_err(|_| invalid_email())?;
    let password = Password::for_sign_in(password)?;
    let outcome = state.accounts.sign_in(email, password, remember_me, trusted, client).await?;
    Ok(signed_in(state, outcome, remember_me, callback))
}

/// `{username, password, rememberMe?, callbackURL?}` (better-auth's `username` plugin): sign-in by e-mail's rules,
/// limits and answers, for the account with that username. A malformed name is 422 with the plugin's code; an
/// unknown name and a wrong password are both 401 `INVALID_USERNAME_OR_PASSWORD`, in the same time.
pub async fn sign_in_username(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    if state.accounts.username_rules().is_none() {
        return Err(refuse_unread(state, req, Failure::new(StatusCode::NOT_FOUND, "NOT_FOUND", "Not found")).await);
    }
    if let Err(refused) = admit(state, &ctx, Limited::SignIn) {
        return Err(refuse_unread(state, req, refused).await);
    }
    let client = extract::client(&ctx, req.headers());
    let trusted = super::two_factor::trusted_device(state, req.headers());
    let body = extract::json_object(req, true, state.body_timeout()).await?;
    body.only(&["username", "password", "rememberMe", "callbackURL"])?;
    let (typed, password) = (body.string("username")?, body.string("password")?);
    let remember_me = body.optional_bool("rememberMe")?.unwrap_or(true);
    let callback = callback_url(state, &ctx, &body)?;
    let invalid =
        || Failure::new(StatusCode::UNAUTHORIZED, "INVALID_USERNAME_OR_PASSWORD", "Invalid username or password");
    if typed.is_empty() || password.is_empty() {
        return Err(invalid());
    }
    let name = username_422(state, typed)?;
    let password = Password::for_sign_in(password)?;
    let outcome = state.accounts.sign_in_username(name, password, remember_me, trusted, client).await;
    let outcome = outcome.map_err(|e| if e == SignInError::InvalidCredentials { invalid() } else { e.into() })?;
    Ok(signed_in(state, outcome, remember_me, callback))
}

/// `{username}` → `{available}`: whether the name could be taken now (not an account's, nor like one, nor
/// reserved). A malformed name is 422 with the plugin's code. The answer says which names exist, as the plugin's
/// does (that is its purpose); it is counted with the client address's sign-ins, so a list of names is not
/// checked faster than it could be tried.
pub async fn is_username_available(
    state: &AppState,
    ctx: Ctx,
    req: Request<Incoming>,
) -> Result<Response<Body>, Failure> {
    if state.accounts.username_rules().is_none() {
        return Err(refuse_unread(state, req, Failure::new(StatusCode::NOT_FOUND, "NOT_FOUND", "Not found")).await);
    }
    if let Err(wait) = state.rate_limits.load().check(Limited::SignIn, ctx.ip) {
        return Err(refuse_unread(state, req, Failure::too_many_requests(wait)).await);
    }
    let body = extract::json_object(req, true, state.body_timeout()).await?;
    body.only(&["username"])?;
    let typed = body.string("username")?;
    if typed.is_empty() {
        return Err(Failure::new(StatusCode::UNPROCESSABLE_ENTITY, "INVALID_USERNAME", "Username is invalid"));
    }
    let name = username_422(state, typed)?;
    Ok(ok(&UsernameAvailable { available: state.accounts.username_available(&name, typed) }))
}

/// A sign-in's answer, by e-mail or by username: the session (cookie, `{redirect, token, url, user}` and the
/// `Location` of `callback`), or better-auth's second-factor redirect.
fn signed_in(state: &AppState, outcome: SignInOutcome, remember_me: bool, callback: Option<String>) -> Response<Body> {
    let (SignedIn { token, user, .. }, renewed_trust) = match outcome {
        SignInOutcome::In(signed_in) => (signed_in, None),
        SignInOutcome::Trusted(signed_in, device) => (signed_in, Some(device)),
        // No session yet: better-auth's answer, and the cookie that carries the pending sign-in.
        SignInOutcome::SecondFactor { challenge } => {
            let methods: &[&str] = if state.accounts.offers_codes_by_mail() { &["totp", "otp"] } else { &["totp"] };
            let answer = ok(&TwoFactorRedirect { two_factor_methods: methods, two_factor_redirect: true });
            return with_cookie(answer, super::two_factor::challenge_cookie(state, &challenge));
        }
    };
    let body = SignedInBody {
        redirect: callback.is_some(),
        token: token.as_str(),
        url: callback.as_deref(),
        user: AuthUser::from(&*user),
    };
    let mut answer = with_cookie(ok(&body), state.cookies.set(token.as_str(), remember_me));
    if let Some(device) = renewed_trust {
        answer = with_cookie(answer, super::two_factor::trust_cookie(state, &device));
    }
    if let Some(location) = callback.and_then(|url| HeaderValue::from_str(&location_value(&url)).ok()) {
        answer.headers_mut().insert(header::LOCATION, location);
    }
    answer
}

pub async fn get_session(state: &AppState, _: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let headers = req.headers();
    // An API key's session (the plugin's before-hook): the owner and the key as its token, no cookie.
    if let Some(key) = extract::api_key(state, headers) {
        let current = state.accounts.api_key_session(key).await?;
        let agent = headers.get(header::USER_AGENT).and_then(|v| v.to_str().ok());
        return Ok(json_bytes(StatusCode::OK, key_session_and_user_json(&current.session, key, agent, &current.user)));
    }
    let Some(token) = extract::session_token(state, headers) else {
        return Ok(no_session(state, headers));
    };
    let may_refresh = !matches!(extract::query_param(req.uri().query(), "disableRefresh"), Some("true" | "1"));
    // `None` also when the session ended between the read and a refresh (a sign-out or a ban elsewhere).
    let Some((current, refreshed)) = state.accounts.session(&token, may_refresh).await? else {
        return Ok(no_session(state, headers));
    };
    let answer = json_bytes(StatusCode::OK, session_and_user_json(&current.session, token.as_str(), &current.user));
    // A rememberMe: false session slides under the idle limit too: its cookie stays one that ends with the browser.
    let remember = current.session.remember_me;
    Ok(if refreshed { with_cookie(answer, state.cookies.set(token.as_str(), remember)) } else { answer })
}

pub async fn sign_out(state: &AppState, _: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let token = extract::session_token(state, req.headers());
    // The body is optional and ignored, but if one is sent it must still be well-formed.
    extract::json_object(req, false, state.body_timeout()).await?;
    if let Some(token) = token {
        state.accounts.sign_out(&token).await?;
    }
    Ok(with_cookie(ok(&SUCCESS), state.cookies.clear()))
}

/// `get-session` without a valid session: `null`, and a clearing cookie if the client sent one, so a browser
/// stops presenting it.
fn no_session(state: &AppState, headers: &hyper::HeaderMap) -> Response<Body> {
    let answer = ok(&serde_json::Value::Null);
    match extract::cookie(headers, &state.cookies.name) {
        Some(_) => with_cookie(answer, state.cookies.clear()),
        None => answer,
    }
}

/// The checks made before the body is even parsed: the per-address limit, then the hashing pool.
fn admit(state: &AppState, ctx: &Ctx, which: Limited) -> Result<(), Failure> {
    state.rate_limits.load().check(which, ctx.ip).map_err(Failure::too_many_requests)?;
    refuse_when_saturated(state)
}

/// 503 with `Retry-After` at once when the hashing pool would refuse this request's hash anyway: before the body
/// is parsed, and before the sign-in attempt is reserved and given back (two round trips to the users actor),
/// work that every refusal of a flood otherwise pays for, one after another on the event loops and the one
/// actor. Nothing has been done yet, so nothing is undone: a refused sign-in does not count against the account.
fn refuse_when_saturated(state: &AppState) -> Result<(), Failure> {
    if state.accounts.hashing_saturated() { Err(super::errors::busy()) } else { Ok(()) }
}

/// `refused`, once the body (at most 64 KiB) has been read and dropped unparsed: the keep-alive connection then
/// carries the client's next request. Answered at once instead, the refusal left a body on its way that hyper
/// could not skip, and the connection was closed under the client's next request. A body too large or too slow
/// to arrive is left, and the answer says `Connection: close` (see `router::route`).
async fn refuse_unread(state: &AppState, req: Request<Incoming>, refused: Failure) -> Failure {
    extract::discard_body(req, state.body_timeout()).await;
    refused
}

/// `callbackURL` must be a safe relative path or an absolute URL on a trusted origin; an open redirect on an
/// auth endpoint is a phishing tool.
fn callback_url(state: &AppState, ctx: &Ctx, body: &Fields) -> Result<Option<String>, Failure> {
    let Some(url) = body.optional_string("callbackURL")? else { return Ok(None) };
    safe_redirect(state, ctx, url)
        .map(Some)
        .ok_or_else(|| Failure::new(StatusCode::FORBIDDEN, "INVALID_CALLBACK_URL", "Invalid callbackURL"))
}
