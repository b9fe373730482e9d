//! `/api/auth/admin/*`: the better-auth admin plugin's calls, with its shapes and codes, so admin screens built on
//! `adminClient()` work unchanged. Same rules as `/api/admin/*`: the caller's *current* role is checked on every
//! request (and again by the users actor, in message order), roles come from the configured set, and the
//! self-ban, self-removal and last-administrator guards hold.

use std::sync::Arc;

use hyper::body::Incoming;
use hyper::{Request, Response};
use serde_json::{Value, json};

use super::AppState;
use super::dto::{AuthSession, AuthUser, STATUS, SUCCESS, SessionAndUser};
use super::extract::Ctx;
use super::extract::{self, Fields, Refusal};
use super::fields::{self, validated_name};
use super::response::{Body, Failure, ok, with_cookie};
use crate::accounts::{
    AdminError, AdminNewUser, Field, Filter, Operator, Order, Revoke, Search, SessionRef, TextField, UserChange,
    UserQuery, Window,
};
use crate::domain::{BanReason, Email, Password, Permissions, SessionId, SessionToken, Timestamp, User, UserId};

/// The calling administrator, the body, and its `userId`. A field other than `userId` and `fields` is refused
/// (400), not ignored: a misspelt `banExpiresIn` would otherwise ban for good.
async fn on_user(
    state: &AppState,
    req: Request<Incoming>,
    code: &'static str,
    fields: &[&str],
) -> Result<(Arc<User>, Fields, UserId), Failure> {
    let by = extract::administrator(state, req.headers(), Refusal::Coded(code)).await?;
    let body = extract::json_object(req, true, state.body_timeout()).await?;
    body.only(&[&["userId"], fields].concat())?;
    let target = user_id(&body, "userId")?;
    Ok((by, body, target))
}

fn user_id(body: &Fields, key: &str) -> Result<UserId, Failure> {
    UserId::parse(body.string(key)?).ok_or_else(|| Failure::validation(format!("[body.{key}] must be a user id")))
}

fn one_user(user: &User) -> Response<Body> {
    ok(&json!({"user": AuthUser::from(user)}))
}

fn found(state: &AppState, id: UserId) -> Result<Arc<User>, Failure> {
    state.accounts.user(id).ok_or_else(|| AdminError::UserNotFound.into())
}

/// `GET list-users`: search (`searchValue`, `searchField` email|name, `searchOperator`
/// contains|starts_with|ends_with), filter (`filterField`, `filterValue`, `filterOperator` eq|ne), sort (`sortBy`,
/// `sortDirection`), page (`limit`, `offset`). `{users, total, limit?, offset?}`; `total` counts the matches.
///
/// Served from the ordered views of the user index: without a search or filter the page is read where it starts
/// and `total` is the number of accounts; an e-mail prefix is a range of the e-mail view; anything else is one
/// pass over the accounts in creation order, with no copy of the ones that do not match.
pub async fn list_users(state: &AppState, _: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    extract::administrator(state, req.headers(), Refusal::Coded("YOU_ARE_NOT_ALLOWED_TO_LIST_USERS")).await?;
    let (query, limit, offset) = list_users_query(req.uri().query())?;
    let page = state.accounts.find_users(query).await?;
    let users: Vec<AuthUser> = page.users.iter().map(|u| AuthUser::from(&**u)).collect();
    let mut answer = json!({"users": users, "total": page.total});
    // As the plugin: `limit` and `offset` only when given and not 0.
    for (key, value) in [("limit", limit), ("offset", offset)] {
        if let Some(n) = value.filter(|n| *n > 0) {
            answer[key] = json!(n);
        }
    }
    Ok(ok(&answer))
}

/// `list-users`' query: the engine's query, and `limit` and `offset` as given (the answer repeats them).
fn list_users_query(query: Option<&str>) -> Result<(UserQuery, Option<usize>, Option<usize>), Failure> {
    extract::query_only(
        query,
        &[
            "searchValue",
            "searchField",
            "searchOperator",
            "filterField",
            "filterValue",
            "filterOperator",
            "sortBy",
            "sortDirection",
            "limit",
            "offset",
        ],
    )?;
    let param = |name: &str| extract::query_value(query, name);
    let number = |name: &str| -> Result<Option<usize>, Failure> {
        param(name)
            .map(|v| v.parse::<usize>().map_err(|_| Failure::validation(format!("{name} must be a whole number"))))
            .transpose()
    };
    let (limit, offset) = (number("limit")?, number("offset")?);
    let search = match param("searchValue") {
        None => None,
        Some(value) => {
            let field = match param("searchField").as_deref().unwrap_or("email") {
                "email" => TextField::Email,
                "name" => TextField::Name,
                _ => return Err(Failure::validation("searchField must be email or name")),
            };
            let operator = match param("searchOperator").as_deref().unwrap_or("contains") {
                "contains" => Operator::Contains,
                "starts_with" => Operator::StartsWith,
                "ends_with" => Operator::EndsWith,
                _ => return Err(Failure::validation("searchOperator must be contains, starts_with or ends_with")),
            };
            Some(Search { field, operator, needle: value.to_lowercase() })
        }
    };
    let mut filters = Vec::new();
    if let Some(value) = param("filterValue") {
        let field = param("filterField").unwrap_or_else(|| "email".to_owned());
        let field = field_named(&field).ok_or_else(|| Failure::validation(format!("unknown field `{field}`")))?;
        let equal = match param("filterOperator").as_deref().unwrap_or("eq") {
            "eq" => true,
            "ne" => false,
            _ => return Err(Failure::validation("filterOperator must be eq or ne")),
        };
        filters.push(Filter::Field { field, value, equal });
    }
    let by = match param("sortBy") {
        None => None,
        Some(name) if name == "createdAt" => None,
        Some(name) => Some(field_named(&name).ok_or_else(|| Failure::validation(format!("unknown field `{name}`")))?),
    };
    let order = Order { by, descending: param("sortDirection").as_deref() == Some("desc") };
    let window = Window::Offset { offset: offset.unwrap_or(0), limit };
    Ok((UserQuery { search, filters, order, window, count: false }, limit, offset))
}

/// A user field `list-users` filters or sorts by, by its name in the plugin.
fn field_named(name: &str) -> Option<Field> {
    Some(match name {
        "email" => Field::Email,
        "name" => Field::Name,
        "role" => Field::Role,
        "banned" => Field::Banned,
        "emailVerified" => Field::EmailVerified,
        "id" => Field::Id,
        _ => return None,
    })
}

/// `GET get-user?id=`: the bare user object.
pub async fn get_user(state: &AppState, _: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    extract::administrator(state, req.headers(), Refusal::Coded("YOU_ARE_NOT_ALLOWED_TO_GET_USER")).await?;
    extract::query_only(req.uri().query(), &["id"])?;
    let id = extract::query_value(req.uri().query(), "id").and_then(|id| UserId::parse(&id));
    let id = id.ok_or_else(|| Failure::validation("id must be a user id"))?;
    Ok(ok(&AuthUser::from(&*found(state, id)?)))
}

/// `{email, password?, name, role?}` → `{user}`. Without a password nobody knows the account's (its owner sets
/// one with a reset link). A duplicate e-mail is 400 here, as in the plugin.
pub async fn create_user(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let by =
        extract::administrator(state, req.headers(), Refusal::Coded("YOU_ARE_NOT_ALLOWED_TO_CREATE_USERS")).await?;
    let body = extract::json_object(req, true, state.body_timeout()).await?;
    // Nothing a request asks for is dropped in silence: of the auth library's `data` (further fields of the new
    // account) only the username plugin's are taken at creation, so any other is refused and the caller sets it
    // with update-user.
    body.only(&["email", "password", "name", "role", "data"])?;
    let username = match body.get("data") {
        None | Some(Value::Null) => (None, None),
        Some(Value::Object(data)) => {
            if let Some(key) = data.keys().find(|k| !["username", "displayUsername"].contains(&k.as_str())) {
                return Err(Failure::validation(format!(
                    "[body.data] not taken at creation ({key}); set those fields with update-user"
                )));
            }
            fields::username_fields(state, &Fields::from(data.clone()), true)?
        }
        Some(_) => return Err(Failure::validation("[body.data] Invalid input: expected object")),
    };
    let email = Email::parse(body.string("email")?).map_err(|_| fields::invalid_email())?;
    let name = validated_name(body.string("name")?)?;
    let password = body.optional_string("password")?.map(Password::new).transpose()?;
    let role = body.optional_string("role")?.map(|r| role(state, r)).transpose()?;
    let ip = ctx.ip.to_string();
    let (username, display_username) = username;
    let new = AdminNewUser { name, email, password, role, username, display_username };
    let user = state.accounts.create_user_by(by.id, new, &ip).await?;
    Ok(one_user(&user))
}

fn role(state: &AppState, value: &str) -> Result<crate::domain::Role, Failure> {
    state.accounts.roles().parse(value).ok_or_else(|| {
        Failure::bad_request("YOU_ARE_NOT_ALLOWED_TO_SET_NON_EXISTENT_VALUE", format!("unknown role `{value}`"))
    })
}

/// `{userId, role}` → `{user}`: a configured role (one; a list of roles is refused).
pub async fn set_role(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let (by, body, target) = on_user(state, req, "YOU_ARE_NOT_ALLOWED_TO_CHANGE_USERS_ROLE", &["role"]).await?;
    let role = role(
        state,
        body.string("role").map_err(|_| Failure::bad_request("INVALID_ROLE_TYPE", "role must be one role name"))?,
    )?;
    change(state, &ctx, by.id, target, UserChange { role: Some(role), ..UserChange::default() }).await
}

/// `{userId, banReason?, banExpiresIn?}` → `{user}`; every session of the account ends in the ban's commit. With
/// `banExpiresIn` (seconds) the ban ends by itself then.
pub async fn ban_user(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let by = extract::administrator(state, req.headers(), Refusal::Coded("YOU_ARE_NOT_ALLOWED_TO_BAN_USERS")).await?;
    let body = extract::json_object(req, true, state.body_timeout()).await?;
    let ban = BanUser::from_fields(&body, Timestamp::now())?;
    change(state, &ctx, by.id, ban.target, ban.change()).await
}

/// `ban-user`'s body, checked: whom, why (the plugin's default reason when none is given) and until when.
#[derive(Debug, PartialEq)]
struct BanUser {
    target: UserId,
    reason: BanReason,
    expires: Option<Timestamp>,
}

impl BanUser {
    /// Parses the body as [`on_user`] would, field by field in the same order (so the same error comes first);
    /// `now` is when `banExpiresIn` counts from.
    fn from_fields(body: &Fields, now: Timestamp) -> Result<Self, Failure> {
        body.only(&["userId", "banReason", "banExpiresIn"])?;
        let target = user_id(body, "userId")?;
        let reason = fields::ban_reason(body)?.unwrap_or_else(BanReason::unspecified);
        let expires = fields::ban_expiry(body, now)?;
        Ok(Self { target, reason, expires })
    }

    fn change(self) -> UserChange {
        UserChange {
            banned: Some(true),
            ban_reason: Some(self.reason),
            ban_expires: self.expires,
            ..UserChange::default()
        }
    }
}

pub async fn unban_user(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let (by, _, target) = on_user(state, req, "YOU_ARE_NOT_ALLOWED_TO_BAN_USERS", &[]).await?;
    change(state, &ctx, by.id, target, UserChange { banned: Some(false), ..UserChange::default() }).await
}

async fn change(
    state: &AppState,
    ctx: &Ctx,
    by: UserId,
    target: UserId,
    change: UserChange,
) -> Result<Response<Body>, Failure> {
    let user = state.accounts.update_user(by, target, change, ctx.ip.to_string()).await.map_err(AdminError::from)?;
    Ok(one_user(&user))
}

/// `{userId, data: {name?, image?, role?, emailVerified?, banned?, banReason?}}` → the bare user. A ban here ends
/// the sessions like `ban-user`; the e-mail, the password and the id are not changed this way.
pub async fn update_user(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let (by, body, target) = on_user(state, req, "YOU_ARE_NOT_ALLOWED_TO_UPDATE_USERS", &["data"]).await?;
    let data = match body.get("data") {
        Some(Value::Object(data)) if !data.is_empty() => Fields::from(data.clone()),
        Some(Value::Object(_)) | None => return Err(Failure::bad_request("NO_DATA_TO_UPDATE", "No data to update")),
        Some(_) => return Err(Failure::validation("[body.data] Invalid input: expected object")),
    };
    for (key, code, message) in [
        ("password", "PASSWORD_CANNOT_BE_UPDATED_VIA_UPDATE_USER", "Use set-user-password to set a password"),
        ("id", "USER_ID_CANNOT_BE_UPDATED", "The user id cannot be changed"),
        ("email", "EMAIL_CANNOT_BE_UPDATED", "The e-mail address cannot be changed here"),
    ] {
        if data.has(key) {
            return Err(Failure::bad_request(code, message));
        }
    }
    let known = ["name", "image", "role", "emailVerified", "banned", "banReason", "username", "displayUsername"];
    if let Some(key) = data.keys().find(|k| !known.contains(k)) {
        return Err(Failure::validation(format!("[body.data.{key}] unknown field; allowed: {}", known.join(", "))));
    }
    let image = match data.nullable_string("image")? {
        None => None,
        Some(None) => Some(None),
        Some(Some(url)) => Some(Some(fields::image_url(url)?)),
    };
    let ban_reason = fields::ban_reason(&data)?;
    let (username, display_username) = fields::username_fields(state, &data, false)?;
    let edit = UserChange {
        username,
        display_username,
        name: data.optional_string("name")?.map(validated_name).transpose()?,
        image,
        role: data.optional_string("role")?.map(|r| role(state, r)).transpose()?,
        email_verified: data.optional_bool("emailVerified")?,
        banned: data.optional_bool("banned")?,
        ban_reason,
        ..UserChange::default()
    };
    let user = state.accounts.update_user(by.id, target, edit, ctx.ip.to_string()).await.map_err(AdminError::from)?;
    Ok(ok(&AuthUser::from(&*user)))
}

/// `{userId}` → `{session, user}`: the caller's browser becomes `userId` for at most an hour. The administrator's
/// own session is kept aside in a second cookie for `stop-impersonating`. Never an administrator.
pub async fn impersonate_user(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let admin_token = extract::session_token(state, req.headers());
    let client = extract::client(&ctx, req.headers());
    let (by, _, target) = on_user(state, req, "YOU_ARE_NOT_ALLOWED_TO_IMPERSONATE_USERS", &[]).await?;
    let (token, current) = state.accounts.impersonate(by.id, target, client).await?;
    let answer = ok(&SessionAndUser {
        session: AuthSession::new(&current.session, token.as_str()),
        user: AuthUser::from(&*current.user),
    });
    let answer = with_cookie(answer, state.cookies.set(token.as_str(), false));
    // `on_user` found a valid administrator session, so there is a token to keep.
    Ok(match admin_token {
        Some(admin) => with_cookie(answer, state.cookies.set_admin(admin.as_str())),
        None => answer,
    })
}

/// `{}` → `{session, user}` of the administrator again: the impersonation session ends (audited) and the
/// administrator's own session comes back, if it is still valid and still an administrator's.
pub async fn stop_impersonating(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let (token, current) = extract::signed_in(state, req.headers()).await?;
    let Some(admin_id) = current.session.impersonated_by() else {
        return Err(Failure::bad_request("NOT_IMPERSONATING", "You are not impersonating anyone"));
    };
    let admin_token = extract::cookie(req.headers(), &state.cookies.admin_name).and_then(SessionToken::parse);
    state.accounts.stop_impersonating(&current.session, token.hash(), &ctx.ip.to_string()).await?;
    let admin = admin_token
        .as_ref()
        .map(|t| Ok::<_, Failure>(state.accounts.current(t)?.map(|a| (t, a))))
        .transpose()?
        .flatten()
        .filter(|(_, a)| a.user.id == admin_id && a.administrator().is_some());
    let Some((admin_token, admin)) = admin else {
        let failure = Failure::bad_request("FAILED_TO_FIND_ADMIN_SESSION", "The administrator's session has ended");
        return Err(failure.with_header(hyper::header::SET_COOKIE, state.cookies.clear()));
    };
    let answer = ok(&SessionAndUser {
        session: AuthSession::new(&admin.session, admin_token.as_str()),
        user: AuthUser::from(&*admin.user),
    });
    let answer = with_cookie(answer, state.cookies.set(admin_token.as_str(), admin.session.remember_me));
    Ok(with_cookie(answer, state.cookies.clear_admin()))
}

/// `{userId}` → `{sessions}`: the user's live sessions; their tokens are never shown (only hashes are kept), each
/// carries a handle (its id) that `revoke-user-session` accepts.
pub async fn list_user_sessions(state: &AppState, _: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let (_, _, target) = on_user(state, req, "YOU_ARE_NOT_ALLOWED_TO_LIST_USERS_SESSIONS", &[]).await?;
    let sessions = state.accounts.sessions_of(target);
    let handles: Vec<String> = sessions.iter().map(|(_, s)| s.id.to_string()).collect();
    let listed: Vec<AuthSession> = sessions.iter().zip(&handles).map(|((_, s), h)| AuthSession::new(s, h)).collect();
    Ok(ok(&json!({"sessions": listed})))
}

/// `{sessionToken}` (a token or a handle from `list-user-sessions`) → `{success: true}`.
pub async fn revoke_user_session(
    state: &AppState,
    ctx: Ctx,
    req: Request<Incoming>,
) -> Result<Response<Body>, Failure> {
    let by =
        extract::administrator(state, req.headers(), Refusal::Coded("YOU_ARE_NOT_ALLOWED_TO_REVOKE_USERS_SESSIONS"))
            .await?;
    let body = extract::json_object(req, true, state.body_timeout()).await?;
    body.only(&["sessionToken"])?;
    let given = body.string("sessionToken")?;
    let named = match (SessionToken::parse(given), SessionId::parse(given)) {
        (Some(token), _) => Some(SessionRef::Token(token)),
        (None, Some(id)) => Some(SessionRef::Id(id)),
        (None, None) => None,
    };
    let found = match named {
        Some(named) => state.accounts.find_session(named).await?,
        None => None,
    };
    if let Some((hash, owner)) = found {
        state.accounts.revoke_user_sessions(by.id, owner, Revoke::One(hash), &ctx.ip.to_string()).await?;
    }
    Ok(ok(&SUCCESS))
}

pub async fn revoke_user_sessions(
    state: &AppState,
    ctx: Ctx,
    req: Request<Incoming>,
) -> Result<Response<Body>, Failure> {
    let (by, _, target) = on_user(state, req, "YOU_ARE_NOT_ALLOWED_TO_REVOKE_USERS_SESSIONS", &[]).await?;
    state.accounts.revoke_user_sessions(by.id, target, Revoke::All, &ctx.ip.to_string()).await?;
    Ok(ok(&SUCCESS))
}

/// `{userId, newPassword}` → `{status: true}`; every session of the account ends (stricter than the plugin).
pub async fn set_user_password(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let (by, body, target) = on_user(state, req, "YOU_ARE_NOT_ALLOWED_TO_SET_USERS_PASSWORD", &["newPassword"]).await?;
    let password = Password::new(body.string("newPassword")?)?;
    state.accounts.set_user_password(by.id, target, password, &ctx.ip.to_string()).await?;
    Ok(ok(&STATUS))
}

/// `{userId}` → `{success: true}`: the account and its sessions in one commit; never one's own, never the last
/// administrator.
pub async fn remove_user(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let (by, _, target) = on_user(state, req, "YOU_ARE_NOT_ALLOWED_TO_DELETE_USERS", &[]).await?;
    state.accounts.remove_user_by(by.id, target, &ctx.ip.to_string()).await?;
    Ok(ok(&SUCCESS))
}

/// `{permissions: {resource: [actions]}}` → `{error: null, success}`: the `admin` role may do everything on users and
/// sessions but impersonate administrators; every other role nothing.
pub async fn has_permission(state: &AppState, _: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let (_, current) = extract::signed_in(state, req.headers()).await?;
    let body = extract::json_object(req, true, state.body_timeout()).await?;
    let wanted = match body.get("permissions").or_else(|| body.get("permission")) {
        None | Some(Value::Null) => {
            return Err(Failure::bad_request("BAD_REQUEST", "invalid permission check. no permission(s) were passed."));
        }
        Some(Value::Object(wanted)) => wanted,
        Some(_) => return Err(Failure::validation("[body.permissions] Invalid input: expected an object")),
    };
    // A malformed list is refused, not answered "no": the caller's question was not the one it meant to ask.
    if !wanted.values().all(|actions| actions.as_array().is_some_and(|list| list.iter().all(Value::is_string))) {
        return Err(Failure::validation("[body.permissions] Invalid input: expected lists of action names"));
    }
    let asked = wanted.iter().flat_map(|(resource, actions)| {
        actions.as_array().into_iter().flatten().filter_map(Value::as_str).map(move |a| (resource.as_str(), a))
    });
    // Every other role is granted nothing (not even an empty question).
    let success = current.administrator().is_some() && Permissions::ADMIN.allows_all(asked);
    Ok(ok(&json!({"error": null, "success": success})))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::*;

    fn fields(value: Value) -> Fields {
        let Value::Object(map) = value else { panic!("not an object") };
        Fields::from(map)
    }

    const ID: &str = "0190a5b8-6c3e-7d2a-9f1b-2c3d4e5f6a7b";

    #[test]
    fn a_ban_without_reason_or_end_takes_the_plugins_reason_and_lasts() {
        let now = Timestamp::from_millis(1_000_000);
        let ban = BanUser::from_fields(&fields(json!({"userId": ID})), now).unwrap();
        assert_eq!(ban.target, UserId::parse(ID).unwrap());
        assert_eq!(ban.reason, BanReason::unspecified());
        assert_eq!(ban.expires, None);
    }

    #[test]
    fn ban_expires_in_counts_from_now_in_seconds() {
        let now = Timestamp::from_millis(1_000_000);
        let body = fields(json!({"userId": ID, "banReason": "spam", "banExpiresIn": 60}));
        let ban = BanUser::from_fields(&body, now).unwrap();
        assert_eq!(ban.expires, Some(now.plus(Duration::from_secs(60))));
        assert_eq!(ban.reason, BanReason::parse("spam").unwrap().unwrap());
    }

    #[test]
    fn a_misspelt_field_is_refused_before_anything_else() {
        // `banExpiresin` would otherwise ban for good; the unknown field is named even with a bad user id.
        let body = fields(json!({"userId": "nope", "banExpiresin": 60}));
        let refused = BanUser::from_fields(&body, Timestamp::now()).unwrap_err();
        assert_eq!(refused.status, hyper::StatusCode::BAD_REQUEST);
        assert!(refused.message.contains("banExpiresin"), "{}", refused.message);
    }

    #[test]
    fn a_bad_user_id_or_end_is_a_validation_error() {
        let bad_id = BanUser::from_fields(&fields(json!({"userId": "nope"})), Timestamp::now()).unwrap_err();
        assert_eq!(bad_id.message, "[body.userId] must be a user id");
        let body = fields(json!({"userId": ID, "banExpiresIn": 0}));
        let no_end = BanUser::from_fields(&body, Timestamp::now()).unwrap_err();
        assert!(no_end.message.starts_with("banExpiresIn must be"), "{}", no_end.message);
    }
}
