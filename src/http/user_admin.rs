//! An account's ways in and places, for administrators (the console's user page): the identities linked to it
//! (`GET /api/admin/users/{id}/accounts`, and unlinking one), its organizations
//! (`GET /api/admin/users/{id}/memberships`), and who has which second factor (`GET
//! /api/admin/users/second-factors?ids=…`, a page of the users list at a time, so that the list's items keep their
//! seven keys).

use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use serde_json::json;

use super::AppState;
use super::dto::SUCCESS;
use super::extract::{self, Ctx, Refusal};
use super::response::{Body, Failure, ok};
use crate::accounts::{Accounts, UnlinkError};
use crate::domain::{User, UserId};

/// The most ids one `second-factors` call takes: the users list's largest page.
const MAX_IDS: usize = 1000;

/// The `{id}` segment of `/api/admin/users/{id}/…`, and the account it names (404 when there is none).
fn target(state: &AppState, req: &Request<Incoming>) -> Result<std::sync::Arc<User>, Failure> {
    let id = req.uri().path().trim_start_matches("/api/admin/users/").split('/').next().unwrap_or_default();
    let id = UserId::parse(id).ok_or_else(|| Failure::validation("the user id in the path must be a UUID"))?;
    state.accounts.user(id).ok_or_else(|| Failure::with_status(StatusCode::NOT_FOUND, "user not found"))
}

/// `GET /api/admin/users/{id}/accounts` → `{password, accounts: [{id, provider_id, account_id, email,
/// created_at}]}`, oldest link first: whether the account has a password, and the identities of other providers
/// linked to it. Never a provider's token.
pub async fn accounts(state: &AppState, _: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    extract::administrator(state, req.headers(), Refusal::Plain).await?;
    extract::query_only(req.uri().query(), &[])?;
    let user = target(state, &req)?;
    let linked: Vec<_> = state
        .accounts
        .linked_accounts(user.id)
        .iter()
        .map(|a| {
            json!({
                "id": a.id_string(),
                "provider_id": a.provider,
                "account_id": a.subject,
                "email": a.email,
                "created_at": a.created_at.to_rfc3339(),
            })
        })
        .collect();
    Ok(ok(&json!({"password": Accounts::has_password(&user), "accounts": linked})))
}

/// `DELETE /api/admin/users/{id}/accounts/{account}` → `{success: true}`: the identity `account` (an `id` of the
/// list above) no longer signs into the account. Refused (409) when it is the account's last way in, as the
/// owner's own `unlink-account` is; audited (`account.unlinked`, by the administrator) in the same commit.
pub async fn unlink(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let admin = extract::administrator(state, req.headers(), Refusal::Plain).await?;
    extract::query_only(req.uri().query(), &[])?;
    let user = target(state, &req)?;
    let account = req.uri().path().rsplit('/').next().unwrap_or_default();
    let not_found = || Failure::with_status(StatusCode::NOT_FOUND, "this account has no such linked identity");
    let linked = state.accounts.linked_accounts(user.id);
    let found = linked.iter().find(|a| a.id_string() == account).ok_or_else(not_found)?;
    state.accounts.unlink(user.id, Some(found.id), admin.id, &ctx.ip.to_string()).await.map_err(|e| match e {
        UnlinkError::NotFound => not_found(),
        UnlinkError::LastWayIn => Failure::with_status(
            StatusCode::CONFLICT,
            "this identity is the account's last way in (no password and no other linked identity): set a password \
             first",
        ),
        UnlinkError::Unavailable(u) => u.into(),
    })?;
    Ok(ok(&SUCCESS))
}

/// `GET /api/admin/users/{id}/memberships` → `{memberships: [{organization_id, organization_name,
/// organization_slug, role, primary, created_at}]}`, oldest first. `role` is the organization plugin's (roles
/// joined by commas); `primary` marks the organization the account's `organization_id` names.
pub async fn memberships(state: &AppState, _: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    extract::administrator(state, req.headers(), Refusal::Plain).await?;
    extract::query_only(req.uri().query(), &[])?;
    let user = target(state, &req)?;
    let listed: Vec<_> = state
        .accounts
        .memberships_of(user.id)
        .iter()
        .map(|(m, org)| {
            json!({
                "organization_id": org.id,
                "organization_name": org.name.as_str(),
                "organization_slug": org.slug.as_str(),
                "role": m.roles.to_string(),
                "primary": user.organization_id == Some(org.id),
                "created_at": m.created_at.to_rfc3339(),
            })
        })
        .collect();
    Ok(ok(&json!({ "memberships": listed })))
}

/// `GET /api/admin/users/second-factors?ids=<id>,<id>,…` → `{users: [{id, totp, backup_codes_left, passkeys}]}`,
/// in the order asked, unknown ids left out. `totp` is `"on"`, `"pending"` (enrolled, no code confirmed yet) or
/// `"off"`; `backup_codes_left` is a number while TOTP is on, else `null`.
pub async fn second_factors(state: &AppState, _: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    extract::administrator(state, req.headers(), Refusal::Plain).await?;
    let query = req.uri().query();
    extract::query_only(query, &["ids"])?;
    let ids = extract::query_value(query, "ids").ok_or_else(|| Failure::validation("ids is required"))?;
    let ids: Vec<UserId> = ids
        .split(',')
        .filter(|s| !s.is_empty())
        .map(|s| UserId::parse(s).ok_or_else(|| Failure::validation("ids must be user ids (UUIDs) joined by commas")))
        .collect::<Result<_, _>>()?;
    if ids.len() > MAX_IDS {
        return Err(Failure::validation(format!("at most {MAX_IDS} ids")));
    }
    let users: Vec<std::sync::Arc<User>> = ids.into_iter().filter_map(|id| state.accounts.user(id)).collect();
    let passkeys = state.accounts.passkey_counts(users.iter().map(|u| u.id).collect()).await?;
    let listed: Vec<_> = users
        .iter()
        .zip(passkeys)
        .map(|(u, passkeys)| {
            let (totp, backup_codes_left) = match u.two_factor() {
                Some(t) if t.enabled => ("on", Some(t.backup_codes.len())),
                Some(_) => ("pending", None),
                None => ("off", None),
            };
            json!({"id": u.id, "totp": totp, "backup_codes_left": backup_codes_left, "passkeys": passkeys})
        })
        .collect();
    Ok(ok(&json!({ "users": listed })))
}
