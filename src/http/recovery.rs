//! `/api/auth/*` links sent by mail, as the better-auth client calls them: password reset (ask for a link, follow
//! it, set a new password) and e-mail verification (ask for a link, follow it). No session needed; nothing in the
//! answers says whether an account exists.

use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Request, Response, StatusCode};

use super::AppState;
use super::dto::{STATUS, StatusMessage, Token};
use super::extract;
use super::extract::Ctx;
use super::fields::{invalid_email, location_value, safe_redirect};
use super::rate_limits::Limited;
use super::response::{Body, Failure, ok};
use crate::domain::{Email, Password, SessionToken};

/// The answer to every accepted reset request, whether or not the account exists.
const RESET_REQUESTED: &str = "If this email exists in our system, check your email for the reset link";

/// `{email, callbackURL?}`: mails a verification link if an account has this address and it is not verified yet;
/// the same answer in the same time otherwise.
pub async fn send_verification_email(
    state: &AppState,
    ctx: Ctx,
    req: Request<Incoming>,
) -> Result<Response<Body>, Failure> {
    let (email, callback) = mail_request(state, &ctx, req, "callbackURL").await?;
    state.accounts.send_verification_email(email, callback, &ctx.ip.to_string()).await?;
    Ok(ok(&STATUS))
}

/// The body of a call that mails a link: `{email, <redirect_key>?}`, within the mail limits of the address and the
/// recipient, the redirect checked like every other.
async fn mail_request(
    state: &AppState,
    ctx: &Ctx,
    req: Request<Incoming>,
    redirect_key: &str,
) -> Result<(Email, Option<String>), Failure> {
    state.rate_limits.load().check(Limited::Mail, ctx.ip).map_err(Failure::too_many_requests)?;
    let body = extract::json_object(req, true, state.body_timeout()).await?;
    body.only(&["email", redirect_key])?;
    let email = Email::parse(body.string("email")?).map_err(|_| invalid_email())?;
    let refused = || match redirect_key {
        "redirectTo" => Failure::new(StatusCode::FORBIDDEN, "INVALID_REDIRECT_URL", "Invalid redirectURL"),
        _ => invalid_callback(),
    };
    let redirect = match body.optional_string(redirect_key)? {
        Some(url) => Some(safe_redirect(state, ctx, url).ok_or_else(refused)?),
        None => None,
    };
    state.rate_limits.load().check_recipient(email.as_str(), ctx.ip).map_err(Failure::too_many_requests)?;
    Ok((email, redirect))
}

/// `GET /api/auth/verify-email?token=&callbackURL=`: the link in the verification mail. Verifies the address, then
/// redirects to `callbackURL` (with `?error=INVALID_TOKEN` when the token is not a live one), or answers
/// `{status: true}` (401 `INVALID_TOKEN`) without one.
pub async fn verify_email(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let query = req.uri().query();
    let callback = match extract::query_value(query, "callbackURL") {
        Some(url) => Some(safe_redirect(state, &ctx, &url).ok_or_else(invalid_callback)?),
        None => None,
    };
    let token = extract::query_value(query, "token").and_then(|t| SessionToken::parse(&t));
    let verified = match token {
        Some(token) => state.accounts.verify_email(&token, &ctx.ip.to_string()).await,
        None => Err(crate::accounts::ResetPasswordError::InvalidToken),
    };
    match (verified, callback) {
        (Ok(()), None) => Ok(ok(&STATUS)),
        (Ok(()), Some(callback)) => Ok(redirect(&callback)),
        (Err(crate::accounts::ResetPasswordError::InvalidToken), Some(callback)) => {
            let separator = if callback.contains('?') { '&' } else { '?' };
            Ok(redirect(&format!("{callback}{separator}error=INVALID_TOKEN")))
        }
        (Err(crate::accounts::ResetPasswordError::InvalidToken), None) => {
            Err(Failure::new(StatusCode::UNAUTHORIZED, "INVALID_TOKEN", "Invalid token"))
        }
        (Err(e), _) => Err(e.into()),
    }
}

/// 302 to `target` (a checked redirect).
fn redirect(target: &str) -> Response<Body> {
    let mut response = Response::new(Body::default());
    *response.status_mut() = StatusCode::FOUND;
    if let Ok(location) = HeaderValue::from_str(&location_value(target)) {
        response.headers_mut().insert(header::LOCATION, location);
    }
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

fn invalid_callback() -> Failure {
    Failure::new(StatusCode::FORBIDDEN, "INVALID_CALLBACK_URL", "Invalid callbackURL")
}

/// `{email, redirectTo?}`: mails a reset link if the account exists; the same answer in the same time otherwise.
pub async fn request_password_reset(
    state: &AppState,
    ctx: Ctx,
    req: Request<Incoming>,
) -> Result<Response<Body>, Failure> {
    let (email, redirect) = mail_request(state, &ctx, req, "redirectTo").await?;
    state.accounts.request_password_reset(email, redirect, &ctx.ip.to_string()).await?;
    Ok(ok(&StatusMessage { message: RESET_REQUESTED, status: true }))
}

/// `GET /api/auth/reset-password/{token}?callbackURL=`: the link in the mail. Redirects to the application's form
/// with `?token=`, or with `?error=INVALID_TOKEN`; without a `callbackURL`, answers `{token}` or 400.
pub async fn follow_reset_link(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let given = req.uri().path().rsplit('/').next().unwrap_or_default();
    let valid = SessionToken::parse(given).filter(|t| state.accounts.reset_token_is_valid(t));
    let callback = extract::query_value(req.uri().query(), "callbackURL");
    let Some(callback) = callback else {
        return match valid {
            Some(token) => Ok(ok(&Token { token: token.as_str() })),
            None => Err(invalid_token()),
        };
    };
    let callback = safe_redirect(state, &ctx, &callback).ok_or_else(invalid_callback)?;
    let separator = if callback.contains('?') { '&' } else { '?' };
    Ok(redirect(&match valid {
        Some(token) => format!("{callback}{separator}token={}", token.as_str()),
        None => format!("{callback}{separator}error=INVALID_TOKEN"),
    }))
}

/// `{newPassword, token}` (the token also as `?token=`): sets the password once per token, and ends every session
/// of the account.
pub async fn reset_password(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let from_query = extract::query_value(req.uri().query(), "token");
    let body = extract::json_object(req, true, state.body_timeout()).await?;
    body.only(&["newPassword", "token"])?;
    let new_password = Password::new(body.string("newPassword")?)?;
    let given = match body.optional_string("token")? {
        Some(token) => token.to_owned(),
        None => from_query.ok_or_else(invalid_token)?,
    };
    let token = SessionToken::parse(&given).ok_or_else(invalid_token)?;
    state.accounts.reset_password(&token, new_password, &ctx.ip.to_string()).await?;
    Ok(ok(&STATUS))
}

fn invalid_token() -> Failure {
    Failure::bad_request("INVALID_TOKEN", "Invalid token")
}
