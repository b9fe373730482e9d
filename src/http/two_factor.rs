//! `/api/auth/two-factor/*`: better-auth's `twoFactor` plugin as its `twoFactorClient()` calls it: enrolment of an
//! authenticator app (TOTP), backup codes, turning it off, and the sign-in step between a right password and a
//! session (the two-factor cookie), with trusted devices. `POST /api/admin/users/{id}/two-factor/reset` is an
//! administrator's reset of a user's factor.

use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use serde_json::json;

use super::AppState;
use super::dto::{AuthUser, BackupCodes, STATUS, SecondFactorReset, TotpEnrolment, TotpUri};
use super::extract::{self, Ctx, Refusal};
use super::response::{Body, Failure, ok, with_cookie};
use crate::accounts::{Code, CodeFor, Verified};
use crate::domain::two_factor::{CHALLENGE_TTL, TRUSTED_DEVICE_TTL};
use crate::domain::{Password, SessionToken, UserId};

/// `POST two-factor/enable {password, issuer?, method?}` → `{method: "totp", totpURI, backupCodes}`. The factor is
/// on only once `verify-totp` accepts a first code. A code by mail is not a factor of its own here (`method:
/// "otp"` is refused): it stands in for the authenticator of an account that has one (`send-otp`).
pub async fn enable(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let (_, current) = extract::signed_in_self_enrolling(state, req.headers()).await?;
    extract::fresh(state, &current)?;
    let body = extract::json_object(req, true, state.body_timeout()).await?;
    body.only(&["password", "issuer", "method"])?;
    let password = Password::for_sign_in(body.string("password")?)?;
    match body.optional_string("method")? {
        None | Some("totp") => {}
        // Whoever reads the mailbox can reset the password too: a mailed code alone would be one factor, not two.
        Some("otp") => return Err(Failure::bad_request("OTP_NOT_CONFIGURED", "OTP is not available")),
        Some(_) => return Err(Failure::validation("method must be \"totp\"")),
    }
    let issuer = body.optional_string("issuer")?;
    if issuer.is_some_and(|i| i.trim().is_empty() || i.chars().count() > 64 || i.contains(':')) {
        return Err(Failure::validation("issuer must be 1 to 64 characters without ':'"));
    }
    let enrolment = state.accounts.enable_two_factor(&current, password, issuer, &ctx.ip.to_string()).await?;
    let backup_codes = &enrolment.backup_codes;
    Ok(ok(&TotpEnrolment { backup_codes, method: "totp", totp_uri: &enrolment.totp_uri }))
}

/// `POST two-factor/get-totp-uri {password}` → `{totpURI}`.
pub async fn get_totp_uri(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let (_, current) = extract::signed_in_self_enrolling(state, req.headers()).await?;
    let body = extract::json_object(req, true, state.body_timeout()).await?;
    body.only(&["password"])?;
    let password = Password::for_sign_in(body.string("password")?)?;
    let uri = state.accounts.totp_uri(&current, password, &ctx.ip.to_string()).await?;
    Ok(ok(&TotpUri { totp_uri: &uri }))
}

/// `POST two-factor/verify-totp {code, trustDevice?}` → `{token, user}`. With a session: a code of the enrolled
/// authenticator (the first turns the factor on). Without one: the sign-in step, with the two-factor cookie.
pub async fn verify_totp(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let signed_in = extract::signed_in_self_or_none(state, req.headers()).await?;
    let challenge = challenge(state, req.headers());
    let client = extract::client(&ctx, req.headers());
    let body = extract::json_object(req, true, state.body_timeout()).await?;
    body.only(&["code", "trustDevice"])?;
    let code = body.string("code")?.to_owned();
    let trust = body.optional_bool("trustDevice")?.unwrap_or(false);
    if let Some((token, current)) = signed_in {
        let user = state.accounts.confirm_totp(&current, &code, &client.ip_address).await?;
        return Ok(ok(&json!({"token": token.as_str(), "user": AuthUser::from(&*user)})));
    }
    let challenge = challenge?;
    let verified = state.accounts.verify_challenge(&challenge, Code::Totp(code), trust, client).await;
    signed_in_answer(state, verified)
}

/// `POST two-factor/verify-backup-code {code, trustDevice?, disableSession?}` → `{token, user}`: the sign-in step
/// with a backup code (used up).
pub async fn verify_backup_code(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let challenge = challenge(state, req.headers());
    let client = extract::client(&ctx, req.headers());
    let body = extract::json_object(req, true, state.body_timeout()).await?;
    body.only(&["code", "trustDevice", "disableSession"])?;
    let code = body.string("code")?.to_owned();
    let trust = body.optional_bool("trustDevice")?.unwrap_or(false);
    if body.optional_bool("disableSession")? == Some(true) {
        return Err(Failure::validation("disableSession is not supported: a backup code opens a session"));
    }
    let challenge = challenge?;
    let verified = state.accounts.verify_challenge(&challenge, Code::Backup(code), trust, client).await;
    signed_in_answer(state, verified)
}

/// `POST two-factor/send-otp {trustDevice?}` → `{status: true}`: a six-digit code mailed to the account (through
/// the outbox, written before the answer), for the sign-in waiting in the two-factor cookie or, with a session,
/// for that session. 400 `OTP_NOT_CONFIGURED` unless `[two_factor] codes_by_mail` is on and mail is configured.
pub async fn send_otp(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    // The mail calls' per-address limit (`[rate_limit] mail_per_address`), as for a reset link; the sender paces
    // each recipient's messages (`mail_per_email`) whoever asks.
    state.rate_limits.load().check(super::rate_limits::Limited::Mail, ctx.ip).map_err(Failure::too_many_requests)?;
    let signed_in = extract::signed_in_self_or_none(state, req.headers()).await?;
    let challenge = challenge(state, req.headers());
    let body = extract::json_object(req, false, state.body_timeout()).await?;
    body.only(&["trustDevice"])?;
    // Accepted as the plugin's body has it; whether the device is trusted is `verify-otp`'s `trustDevice`.
    body.optional_bool("trustDevice")?;
    let ip = ctx.ip.to_string();
    match &signed_in {
        Some((token, current)) => state.accounts.send_code(CodeFor::Session(token, current), &ip).await?,
        None => state.accounts.send_code(CodeFor::Challenge(&challenge?), &ip).await?,
    }
    Ok(ok(&STATUS))
}

/// `POST two-factor/verify-otp {code, trustDevice?}` → `{token, user}`: the mailed code, used up. Without a session:
/// the sign-in step, with the two-factor cookie (as `verify-totp`). With one: the code sent for that session.
pub async fn verify_otp(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let signed_in = extract::signed_in_self_or_none(state, req.headers()).await?;
    let challenge = challenge(state, req.headers());
    let client = extract::client(&ctx, req.headers());
    let body = extract::json_object(req, true, state.body_timeout()).await?;
    body.only(&["code", "trustDevice"])?;
    let code = body.string("code")?.to_owned();
    let trust = body.optional_bool("trustDevice")?.unwrap_or(false);
    if let Some((token, current)) = signed_in {
        state.accounts.confirm_code(&token, &current, &code, &client.ip_address).await?;
        return Ok(ok(&json!({"token": token.as_str(), "user": AuthUser::from(&*current.user)})));
    }
    let challenge = challenge?;
    let verified = state.accounts.verify_challenge(&challenge, Code::Mailed(code), trust, client).await;
    signed_in_answer(state, verified)
}

/// `POST two-factor/generate-backup-codes {password}` → `{status: true, backupCodes}`; the old codes die.
pub async fn generate_backup_codes(
    state: &AppState,
    ctx: Ctx,
    req: Request<Incoming>,
) -> Result<Response<Body>, Failure> {
    let (_, current) = extract::signed_in_self(state, req.headers()).await?;
    extract::fresh(state, &current)?;
    let body = extract::json_object(req, true, state.body_timeout()).await?;
    body.only(&["password"])?;
    let password = Password::for_sign_in(body.string("password")?)?;
    let codes = state.accounts.new_backup_codes(&current, password, &ctx.ip.to_string()).await?;
    Ok(ok(&BackupCodes { backup_codes: &codes, status: true }))
}

/// `POST two-factor/disable {password}` → `{status: true}`: the factor is forgotten, every trusted device of the
/// account ends, and this browser's trusted-device cookie is cleared.
pub async fn disable(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let (_, current) = extract::signed_in_self(state, req.headers()).await?;
    extract::fresh(state, &current)?;
    let body = extract::json_object(req, true, state.body_timeout()).await?;
    body.only(&["password"])?;
    let password = Password::for_sign_in(body.string("password")?)?;
    state.accounts.disable_two_factor(&current, password, &ctx.ip.to_string()).await?;
    Ok(with_cookie(ok(&STATUS), state.cookies.clear_for(&state.cookies.trust_name)))
}

/// `POST /api/admin/users/{id}/two-factor/reset` → `{success, reset}`: an administrator forgets a user's second
/// factor; every session and trusted device of the account ends in the same commit (audited).
pub async fn admin_reset(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let admin = extract::administrator(state, req.headers(), Refusal::Plain).await?;
    let id = req.uri().path().trim_start_matches("/api/admin/users/").split('/').next().unwrap_or_default();
    let user = UserId::parse(id).ok_or_else(|| Failure::validation("the user id in the path must be a UUID"))?;
    let reset = state.accounts.reset_two_factor(admin.id, user, &ctx.ip.to_string()).await?;
    Ok(ok(&SecondFactorReset { reset, success: true }))
}

/// The sign-in step's answer: the session cookie, the two-factor cookie cleared, and with `trustDevice` the
/// trusted-device cookie.
fn signed_in_answer(
    state: &AppState,
    verified: Result<Verified, crate::accounts::TwoFactorError>,
) -> Result<Response<Body>, Failure> {
    let cookies = &state.cookies;
    let verified = match verified {
        Ok(verified) => verified,
        // A challenge that is over (too many wrong codes, or unknown) takes its cookie with it.
        Err(
            e @ (crate::accounts::TwoFactorError::TooManyAttempts | crate::accounts::TwoFactorError::InvalidCookie),
        ) => {
            let failure = Failure::from(e);
            return Err(failure.with_header(hyper::header::SET_COOKIE, cookies.clear_for(&cookies.two_factor_name)));
        }
        Err(e) => return Err(e.into()),
    };
    let Verified { signed_in, remember_me, trusted } = verified;
    let body = json!({"token": signed_in.token.as_str(), "user": AuthUser::from(&*signed_in.user)});
    let mut answer = with_cookie(ok(&body), cookies.set(signed_in.token.as_str(), remember_me));
    answer = with_cookie(answer, cookies.clear_for(&cookies.two_factor_name));
    if let Some(device) = trusted {
        answer =
            with_cookie(answer, cookies.set_for(&cookies.trust_name, device.as_str(), TRUSTED_DEVICE_TTL.as_secs()));
    }
    Ok(answer)
}

/// The two-factor cookie's token: 401 `INVALID_TWO_FACTOR_COOKIE` without one.
fn challenge(state: &AppState, headers: &hyper::HeaderMap) -> Result<SessionToken, Failure> {
    extract::cookie(headers, &state.cookies.two_factor_name)
        .and_then(SessionToken::parse)
        .ok_or_else(|| Failure::new(StatusCode::UNAUTHORIZED, "INVALID_TWO_FACTOR_COOKIE", "Invalid two factor cookie"))
}

/// The two-factor cookie a sign-in sets for its challenge (10 minutes).
pub fn challenge_cookie(state: &AppState, token: &SessionToken) -> hyper::header::HeaderValue {
    state.cookies.set_for(&state.cookies.two_factor_name, token.as_str(), CHALLENGE_TTL.as_secs())
}

/// The trusted-device cookie's token, if the browser sent one of the right shape.
pub fn trusted_device(state: &AppState, headers: &hyper::HeaderMap) -> Option<SessionToken> {
    extract::cookie(headers, &state.cookies.trust_name).and_then(SessionToken::parse)
}

/// A renewed trusted-device cookie (30 days from now).
pub fn trust_cookie(state: &AppState, token: &SessionToken) -> hyper::header::HeaderValue {
    state.cookies.set_for(&state.cookies.trust_name, token.as_str(), TRUSTED_DEVICE_TTL.as_secs())
}
