//! `/api/auth/*` calls a signed-in user makes about their own account: password, profile, sessions, deletion.
//! The better-auth client calls them by these names; every one needs a valid session (401 otherwise).

use hyper::body::Incoming;
use hyper::{Request, Response};
use serde_json::json;

use super::AppState;
use super::dto::{AuthSession, AuthUser, STATUS, SuccessMessage};
use super::extract::Ctx;
use super::extract::{self, Fields};
use super::fields::{image_url, username_fields, validated_name};
use super::response::{Body, Failure, ok, with_cookie};
use crate::accounts::{Profile, Revoke};
use crate::domain::{Password, SessionId, SessionToken};

fn status_true() -> Response<Body> {
    ok(&STATUS)
}

pub async fn change_password(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let (_, current) = extract::signed_in_self(state, req.headers()).await?;
    extract::fresh(state, &current)?;
    let client = extract::client(&ctx, req.headers());
    let body = extract::json_object(req, true, state.body_timeout()).await?;
    body.only(&["newPassword", "currentPassword", "revokeOtherSessions"])?;
    let new_password = Password::new(body.string("newPassword")?)?;
    let current_password = Password::for_sign_in(body.string("currentPassword")?)?;
    let revoke = body.optional_bool("revokeOtherSessions")?.unwrap_or(false);
    let remember = current.session.remember_me;
    let (user, renewed) =
        state.accounts.change_password(&current, current_password, new_password, revoke, client).await?;
    let token = renewed.as_ref().map(|(token, _)| token.as_str());
    let answer = ok(&json!({"token": token, "user": AuthUser::from(&*user)}));
    Ok(match renewed {
        Some((token, _)) => with_cookie(answer, state.cookies.set(token.as_str(), remember)),
        None => answer,
    })
}

/// Fields of `update-user` that are not the user's to set here.
const NOT_UPDATABLE: [&str; 8] =
    ["password", "role", "banned", "banReason", "banExpires", "emailVerified", "organizationId", "id"];

pub async fn update_user(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let (_, current) = extract::signed_in(state, req.headers()).await?;
    let body = extract::json_object(req, true, state.body_timeout()).await?;
    if body.has("email") {
        return Err(Failure::bad_request("EMAIL_CAN_NOT_BE_UPDATED", "Email can not be updated"));
    }
    let known = ["name", "image", "username", "displayUsername"];
    if let Some(field) = body.keys().find(|k| NOT_UPDATABLE.contains(k) || !known.contains(k)) {
        return Err(Failure::bad_request("FIELD_NOT_ALLOWED", format!("{field} is not allowed to be set")));
    }
    let name = body.optional_string("name")?.map(validated_name).transpose()?;
    let image = match body.nullable_string("image")? {
        None => None,
        Some(None) => Some(None),
        Some(Some(url)) => Some(Some(image_url(url)?)),
    };
    let (username, display_username) = username_fields(state, &body, false)?;
    if name.is_none() && image.is_none() && username.is_none() && display_username.is_none() {
        return Err(Failure::bad_request("NO_FIELDS_TO_UPDATE", "No fields to update"));
    }
    let profile = Profile { name, image, username, display_username };
    state.accounts.update_profile(&current, profile, &ctx.ip.to_string()).await?;
    Ok(status_true())
}

/// The caller's live sessions. Only hashes of tokens are kept, so `token` in each is an opaque handle (the
/// session's id) that `revoke-session` accepts; the caller's own session shows its real token.
pub async fn list_sessions(state: &AppState, _: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let (token, current) = extract::signed_in(state, req.headers()).await?;
    extract::fresh(state, &current)?;
    let own = token.hash();
    let sessions = state.accounts.own_sessions(current.user.id);
    let handles: Vec<String> = sessions.iter().map(|(_, s)| s.id.to_string()).collect();
    let listed: Vec<AuthSession> = sessions
        .iter()
        .zip(&handles)
        .map(|((hash, s), handle)| AuthSession::new(s, if *hash == own { token.as_str() } else { handle }))
        .collect();
    Ok(ok(&listed))
}

/// `{token}`: a session token, or a handle from `list-sessions`. Only the caller's own sessions are ever ended;
/// anything else is answered the same way and left alone.
pub async fn revoke_session(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let (own, current) = extract::signed_in(state, req.headers()).await?;
    let body = extract::json_object(req, true, state.body_timeout()).await?;
    body.only(&["token"])?;
    let given = body.string("token")?;
    let user = current.user.id;
    let hash = match (SessionToken::parse(given), SessionId::parse(given)) {
        (Some(token), _) => Some(token.hash()),
        (None, Some(id)) => state.accounts.own_sessions(user).into_iter().find(|(_, s)| s.id == id).map(|(h, _)| h),
        (None, None) => None,
    };
    if let Some(hash) = hash {
        state.accounts.revoke_own_sessions(&current, Revoke::One(hash), &ctx.ip.to_string()).await?;
    }
    let answer = status_true();
    Ok(if hash == Some(own.hash()) { with_cookie(answer, state.cookies.clear()) } else { answer })
}

pub async fn revoke_sessions(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    revoke(state, ctx, req, false).await
}

pub async fn revoke_other_sessions(
    state: &AppState,
    ctx: Ctx,
    req: Request<Incoming>,
) -> Result<Response<Body>, Failure> {
    revoke(state, ctx, req, true).await
}

async fn revoke(state: &AppState, ctx: Ctx, req: Request<Incoming>, keep_own: bool) -> Result<Response<Body>, Failure> {
    let (own, current) = extract::signed_in(state, req.headers()).await?;
    // No body is needed, but one that is sent must be well-formed.
    extract::json_object(req, false, state.body_timeout()).await?;
    let which = if keep_own { Revoke::AllBut(own.hash()) } else { Revoke::All };
    state.accounts.revoke_own_sessions(&current, which, &ctx.ip.to_string()).await?;
    Ok(if keep_own { status_true() } else { with_cookie(status_true(), state.cookies.clear()) })
}

/// `{password}`: the account, its membership and every session go in one commit. The password is required
/// (better-auth also accepts a fresh session instead; a cookie alone is not enough to delete an account here).
pub async fn delete_user(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let (_, current) = extract::signed_in_self(state, req.headers()).await?;
    let body: Fields = extract::json_object(req, true, state.body_timeout()).await?;
    body.only(&["password"])?;
    let password = Password::for_sign_in(body.string("password")?)?;
    state.accounts.delete_account(&current, password, &ctx.ip.to_string()).await?;
    let answer = ok(&SuccessMessage { message: "User deleted", success: true });
    Ok(with_cookie(answer, state.cookies.clear()))
}
