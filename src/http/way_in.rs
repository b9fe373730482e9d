//! `/api/auth/*` ways in by mail without a password, as better-auth's `magicLinkClient()` and `emailOTPClient()`
//! call them: a sign-in link (`sign-in/magic-link`, `magic-link/verify`) and six-digit codes (`email-otp/*`,
//! `sign-in/email-otp`, `forget-password/email-otp`). Off unless `[magic_link]` / `[email_otp]` say otherwise
//! (404, as a server without the plugin). Asking for a link or a code answers the same whether an account exists.

use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Request, Response, StatusCode};

use super::AppState;
use super::dto::{AuthUser, STATUS, SUCCESS, TokenAndUser, VerifiedByCode, session_and_user_json};
use super::extract::{self, Ctx, Fields};
use super::fields::{image_url, invalid_email, location_value, safe_redirect, validated_name};
use super::rate_limits::Limited;
use super::response::{Body, Failure, json_bytes, ok, with_cookie};
use crate::accounts::{CodeOutcome, EmailCodeUse, LinkRequest, LinkSignIn, LinkSignInError, SignedIn};
use crate::domain::{CodePurpose, Email, Password};

fn not_offered() -> Failure {
    Failure::new(StatusCode::NOT_FOUND, "NOT_FOUND", "Not found")
}

fn invalid_callback() -> Failure {
    Failure::new(StatusCode::FORBIDDEN, "INVALID_CALLBACK_URL", "Invalid callbackURL")
}

/// A redirect the client named, if it is a safe relative path or on a trusted origin (403 otherwise).
fn redirect_field(state: &AppState, ctx: &Ctx, url: Option<&str>) -> Result<Option<String>, Failure> {
    url.map(|url| safe_redirect(state, ctx, url).ok_or_else(invalid_callback)).transpose()
}

/// `{email, name?, callbackURL?, newUserCallbackURL?, errorCallbackURL?, metadata?}`: mails a sign-in link (for
/// an address with no account only when sign-up is on); `{status: true}` either way, in the same time.
/// `metadata` is better-auth's data for its mail callback: accepted (an object) and not used.
pub async fn sign_in_magic_link(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    if !state.accounts.offers_magic_links() {
        return Err(not_offered());
    }
    state.rate_limits.load().check(Limited::Mail, ctx.ip).map_err(Failure::too_many_requests)?;
    let body = extract::json_object(req, true, state.body_timeout()).await?;
    body.only(&["email", "name", "callbackURL", "newUserCallbackURL", "errorCallbackURL", "metadata"])?;
    // better-auth checks the address with `z.email()`: a malformed one is a validation error here.
    let email =
        Email::parse(body.string("email")?).map_err(|_| Failure::validation("[body.email] Invalid email address"))?;
    let name = body.optional_string("name")?.map(validated_name).transpose()?;
    if body.get("metadata").is_some_and(|m| !m.is_object() && !m.is_null()) {
        return Err(Failure::validation("[body.metadata] Invalid input: expected an object"));
    }
    let callback = redirect_field(state, &ctx, body.optional_string("callbackURL")?)?;
    let new_user_callback = redirect_field(state, &ctx, body.optional_string("newUserCallbackURL")?)?;
    let error_callback = redirect_field(state, &ctx, body.optional_string("errorCallbackURL")?)?;
    state.rate_limits.load().check_recipient(email.as_str(), ctx.ip).map_err(Failure::too_many_requests)?;
    let request = LinkRequest { email, name, callback, new_user_callback, error_callback };
    state.accounts.request_magic_link(request, &ctx.ip.to_string()).await?;
    Ok(ok(&STATUS))
}

/// `GET magic-link/verify?token=&callbackURL=&newUserCallbackURL=&errorCallbackURL=`: the link in the mail. Signs
/// in (the session cookie), then redirects to `callbackURL` (`newUserCallbackURL` for an account the link made),
/// or without `callbackURL` answers `{token, user, session}`. A bad link redirects to `errorCallbackURL` (else
/// `callbackURL`, else `/`) with `?error=INVALID_TOKEN` (or `new_user_signup_disabled`), as better-auth does,
/// with or without `callbackURL`. Each redirect is checked against the trusted origins before the token is.
pub async fn verify_magic_link(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    if !state.accounts.offers_magic_links() {
        return Err(not_offered());
    }
    state.rate_limits.load().check(Limited::SignIn, ctx.ip).map_err(Failure::too_many_requests)?;
    let query = req.uri().query();
    let given = |name| extract::query_value(query, name);
    let callback = redirect_field(state, &ctx, given("callbackURL").as_deref())?;
    let new_user_callback = redirect_field(state, &ctx, given("newUserCallbackURL").as_deref())?;
    let error_callback = redirect_field(state, &ctx, given("errorCallbackURL").as_deref())?;
    let token = given("token").unwrap_or_default();
    let client = extract::client(&ctx, req.headers());
    let failed = |error: &str| {
        let target = error_callback.as_deref().or(callback.as_deref()).unwrap_or("/");
        let separator = if target.contains('?') { '&' } else { '?' };
        redirect(&format!("{target}{separator}error={error}"))
    };
    let LinkSignIn { signed_in: SignedIn { token, session, user }, new_user } =
        match state.accounts.magic_link_sign_in(&token, client).await {
            Ok(signed_in) => signed_in,
            Err(LinkSignInError::InvalidToken) => return Ok(failed("INVALID_TOKEN")),
            Err(LinkSignInError::SignUpDisabled) => return Ok(failed("new_user_signup_disabled")),
            Err(LinkSignInError::SsoRequired) => return Ok(failed("SSO_REQUIRED")),
            Err(e) => return Err(e.into()),
        };
    let cookie = state.cookies.set(token.as_str(), true);
    let Some(callback) = callback else {
        // better-auth's `{token, user, session}`: get-session's answer with the token beside it.
        let mut answer: serde_json::Map<String, serde_json::Value> =
            serde_json::from_slice(&session_and_user_json(&session, token.as_str(), &user)).unwrap_or_default();
        answer.insert("token".into(), token.as_str().into());
        let bytes = serde_json::to_vec(&answer).unwrap_or_default();
        return Ok(with_cookie(json_bytes(StatusCode::OK, bytes), cookie));
    };
    let target = match new_user_callback {
        Some(new_user_callback) if new_user => new_user_callback,
        _ => callback,
    };
    Ok(with_cookie(redirect(&target), cookie))
}

/// 302 to `target` (a checked redirect), never cached.
fn redirect(target: &str) -> Response<Body> {
    let mut response = Response::new(Body::default());
    *response.status_mut() = StatusCode::FOUND;
    if let Ok(location) = HeaderValue::from_str(&location_value(target)) {
        response.headers_mut().insert(header::LOCATION, location);
    }
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// The address of a code call: lower-cased and checked as better-auth does (400 `INVALID_EMAIL`).
fn code_email(body: &Fields) -> Result<Email, Failure> {
    Email::parse(body.string("email")?).map_err(|_| invalid_email())
}

/// `type`: `sign-in`, `email-verification` or `forget-password`; `change-email` is better-auth's own refusal
/// (its own call, off here), anything else a validation error.
fn code_purpose(body: &Fields) -> Result<CodePurpose, Failure> {
    match body.string("type")? {
        "change-email" => Err(Failure::bad_request("INVALID_OTP_TYPE", "Invalid OTP type")),
        other => CodePurpose::parse(other).ok_or_else(|| {
            Failure::validation(
                "[body.type] Invalid option: expected one of \"email-verification\"|\"sign-in\"|\"forget-password\"",
            )
        }),
    }
}

/// The start of every code call: offered, and within the per-address limit of `which`.
fn admit_code(state: &AppState, ctx: &Ctx, which: Limited) -> Result<(), Failure> {
    if !state.accounts.offers_email_codes() {
        return Err(not_offered());
    }
    state.rate_limits.load().check(which, ctx.ip).map_err(Failure::too_many_requests)
}

/// Mails a code for `purpose` to `email` (within the recipient's mail limit): `{success: true}` either way.
async fn send_code(state: &AppState, ctx: &Ctx, email: Email, purpose: CodePurpose) -> Result<Response<Body>, Failure> {
    state.rate_limits.load().check_recipient(email.as_str(), ctx.ip).map_err(Failure::too_many_requests)?;
    state.accounts.send_email_code(email, purpose, &ctx.ip.to_string()).await?;
    Ok(ok(&SUCCESS))
}

/// `{email, type}`: mails a code of that type (to an address with no account only for `sign-in`, when sign-up
/// is on); `{success: true}` either way, in the same time.
pub async fn send_verification_otp(
    state: &AppState,
    ctx: Ctx,
    req: Request<Incoming>,
) -> Result<Response<Body>, Failure> {
    admit_code(state, &ctx, Limited::Mail)?;
    let body = extract::json_object(req, true, state.body_timeout()).await?;
    body.only(&["email", "type"])?;
    let email = code_email(&body)?;
    let purpose = code_purpose(&body)?;
    send_code(state, &ctx, email, purpose).await
}

/// `{email}` (`email-otp/request-password-reset`, and its deprecated twin `forget-password/email-otp`): mails a
/// password reset code if the address has an account; `{success: true}` either way, in the same time.
pub async fn request_password_reset_otp(
    state: &AppState,
    ctx: Ctx,
    req: Request<Incoming>,
) -> Result<Response<Body>, Failure> {
    admit_code(state, &ctx, Limited::Mail)?;
    let body = extract::json_object(req, true, state.body_timeout()).await?;
    body.only(&["email"])?;
    let email = code_email(&body)?;
    send_code(state, &ctx, email, CodePurpose::PasswordReset).await
}

/// `{email, type, otp}`: whether the code is right (a wrong one counts); it stays usable. `{success: true}`.
pub async fn check_verification_otp(
    state: &AppState,
    ctx: Ctx,
    req: Request<Incoming>,
) -> Result<Response<Body>, Failure> {
    admit_code(state, &ctx, Limited::SignIn)?;
    let client = extract::client(&ctx, req.headers());
    let body = extract::json_object(req, true, state.body_timeout()).await?;
    body.only(&["email", "type", "otp"])?;
    let email = code_email(&body)?;
    let purpose = code_purpose(&body)?;
    let otp = body.string("otp")?;
    state.accounts.use_email_code(email, otp, EmailCodeUse::Check(purpose), client).await?;
    Ok(ok(&SUCCESS))
}

/// `{email, otp, name?, image?}`: signs in with a sign-in code (an account made for an address with none, when
/// sign-up is on): `{token, user}` and the session cookie.
pub async fn sign_in_email_otp(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    admit_code(state, &ctx, Limited::SignIn)?;
    let client = extract::client(&ctx, req.headers());
    let body = extract::json_object(req, true, state.body_timeout()).await?;
    body.only(&["email", "otp", "name", "image"])?;
    let email = code_email(&body)?;
    let otp = body.string("otp")?;
    let name = body.optional_string("name")?.map(validated_name).transpose()?;
    let image = body.optional_string("image")?.map(image_url).transpose()?;
    let used = state.accounts.use_email_code(email, otp, EmailCodeUse::SignIn { name, image }, client).await?;
    let CodeOutcome::SignedIn(SignedIn { token, user, .. }) = used else {
        return Err(Failure::unavailable());
    };
    let answer = ok(&TokenAndUser { token: Some(token.as_str()), user: AuthUser::from(&*user) });
    Ok(with_cookie(answer, state.cookies.set(token.as_str(), true)))
}

/// `{email, otp}`: proves the address with a verification code: `{status: true, token: null, user}`.
pub async fn verify_email_otp(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    admit_code(state, &ctx, Limited::SignIn)?;
    let client = extract::client(&ctx, req.headers());
    let body = extract::json_object(req, true, state.body_timeout()).await?;
    body.only(&["email", "otp"])?;
    let email = code_email(&body)?;
    let otp = body.string("otp")?;
    let CodeOutcome::Verified(user) =
        state.accounts.use_email_code(email, otp, EmailCodeUse::VerifyEmail, client).await?
    else {
        return Err(Failure::unavailable());
    };
    Ok(ok(&VerifiedByCode { status: true, token: None, user: AuthUser::from(&*user) }))
}

/// `{email, otp, password}`: sets a new password with a reset code (the password's length is checked first, so a
/// bad one neither spends nor counts the code); every session of the account ends. `{success: true}`.
pub async fn reset_password_otp(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    admit_code(state, &ctx, Limited::SignIn)?;
    let client = extract::client(&ctx, req.headers());
    let body = extract::json_object(req, true, state.body_timeout()).await?;
    body.only(&["email", "otp", "password"])?;
    let email = code_email(&body)?;
    let password = Password::new(body.string("password")?)?;
    let otp = body.string("otp")?;
    state.accounts.use_email_code(email, otp, EmailCodeUse::ResetPassword(password), client).await?;
    Ok(ok(&SUCCESS))
}
