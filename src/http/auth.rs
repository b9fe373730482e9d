//! `/api/auth/*`: sign-up, sign-in, get-session, sign-out. Each handler: parse → domain → actor → answer.

use std::sync::Arc;

use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Request, Response, StatusCode};

use super::dto::{AuthSession, AuthUser, SUCCESS, SessionAndUser, SignedIn, TokenAndUser};
use super::limits::Limited;
use super::request::{self, Fields};
use super::response::{Body, Failure, ok, with_cookie};
use super::session::{self, Current};
use super::{Ctx, State};
use crate::actors::UsersHandle;
use crate::actors::sessions::{CreateSessionError, Origin, Start};
use crate::actors::users::{AttemptRefused, Checked, CreateUserError, NewUser};
use crate::domain::{Email, Name, Password, PasswordError, SessionToken, Timestamp, User};
use crate::hashing::{HashError, Hasher};

/// Fields a client may not set at sign-up: they are the administrator's to decide.
const ADMIN_ONLY_FIELDS: [&str; 6] = ["role", "banned", "banReason", "banExpires", "emailVerified", "organizationId"];

/// Longest `image` URL accepted at sign-up.
const MAX_IMAGE_LEN: usize = 2048;

pub async fn sign_up(state: &State, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    rate_limit(state, &ctx, Limited::SignUp)?;
    let origin = origin(&ctx, &req);
    let body = request::json_object(req, true, state.body_timeout()).await?;
    if let Some(field) = ADMIN_ONLY_FIELDS.into_iter().find(|f| body.has(f)) {
        return Err(Failure::bad_request("FIELD_NOT_ALLOWED", format!("{field} is not allowed to be set")));
    }
    let (name, email, password) = (body.string("name")?, body.string("email")?, body.string("password")?);
    let image = body.optional_string("image")?;
    let remember = body.optional_bool("rememberMe")?.unwrap_or(true);
    callback_url(state, &ctx, &body)?;
    let name = Name::parse(name).map_err(|e| Failure::validation(format!("[body.name] {e}")))?;
    if image.is_some_and(|i| i.len() > MAX_IMAGE_LEN) {
        return Err(Failure::validation("[body.image] Too big: expected string to have <=2048 characters"));
    }
    if image.is_some_and(|i| !is_web_url(i)) {
        return Err(Failure::validation("[body.image] Invalid URL: expected an absolute http or https URL"));
    }
    let email = Email::parse(email).map_err(|_| invalid_email())?;
    let password = Password::new(password).map_err(password_failure)?;
    // Checked again inside the users actor; this early look only saves a 20 ms hash on an obvious duplicate.
    if state.indexes.users.by_email(&email).is_some() {
        return Err(user_exists());
    }
    let password_hash = state.hasher.hash(password).await.map_err(hash_failure)?;
    let new = NewUser { name, email, image: image.map(str::to_owned), role: state.roles.default_role(), password_hash };
    let user = state.actors.users.create(new, origin.ip_address.clone()).await.map_err(|e| match e {
        CreateUserError::EmailTaken => user_exists(),
        CreateUserError::Unavailable(u) => u.into(),
    })?;
    let started = state.actors.sessions.create(user.id, remember, origin, Start::SignUp).await;
    let (token, _) = started.map_err(session_failure)?;
    let answer = ok(&TokenAndUser { token: token.as_str(), user: AuthUser::from(&*user) });
    Ok(with_cookie(answer, state.cookies.set(token.as_str(), remember)))
}

pub async fn sign_in(state: &State, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    rate_limit(state, &ctx, Limited::SignIn)?;
    let origin = origin(&ctx, &req);
    let body = request::json_object(req, true, state.body_timeout()).await?;
    let (email, password) = (body.string("email")?, body.string("password")?);
    let remember = body.optional_bool("rememberMe")?.unwrap_or(true);
    let callback = callback_url(state, &ctx, &body)?;
    let email = Email::parse(email).map_err(|_| invalid_email())?;
    let password = Password::for_sign_in(password).map_err(password_failure)?;
    let user = state.indexes.users.by_email(&email);
    let check = check_password(
        state.actors.users.clone(),
        state.hasher.clone(),
        email,
        user.clone(),
        password,
        origin.ip_address.clone(),
    );
    // A task of its own: the attempt it reserves is finished however the connection ends (see `check_password`).
    let verified = state.tasks.spawn(check).await.map_err(|_| Failure::unavailable())??;
    let user = user.filter(|_| verified).ok_or_else(invalid_credentials)?;
    let started = state.actors.sessions.create(user.id, remember, origin, Start::SignIn).await;
    let (token, _) = started.map_err(session_failure)?;
    let user = state.indexes.users.get(user.id).unwrap_or(user);
    let body = SignedIn {
        redirect: callback.is_some(),
        token: token.as_str(),
        url: callback.as_deref(),
        user: AuthUser::from(&*user),
    };
    let mut answer = with_cookie(ok(&body), state.cookies.set(token.as_str(), remember));
    if let Some(location) = callback.and_then(|url| HeaderValue::from_str(&location_value(&url)).ok()) {
        answer.headers_mut().insert(header::LOCATION, location);
    }
    Ok(answer)
}

pub async fn get_session(state: &State, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let _ = ctx;
    let Some(current) = session::current(state, req.headers()) else {
        return Ok(session::no_session(state, req.headers()));
    };
    let Current { token, session, user } = current;
    let disable_refresh = matches!(request::query_param(req.uri().query(), "disableRefresh"), Some("true" | "1"));
    let due = session.remember_me && session.updated_at.plus(state.update_age) <= Timestamp::now();
    if !due || disable_refresh {
        return Ok(ok(&SessionAndUser {
            session: AuthSession::new(&session, token.as_str()),
            user: AuthUser::from(&*user),
        }));
    }
    match state.actors.sessions.refresh(token.hash()).await? {
        Some(session) => {
            let body =
                SessionAndUser { session: AuthSession::new(&session, token.as_str()), user: AuthUser::from(&*user) };
            Ok(with_cookie(ok(&body), state.cookies.set(token.as_str(), true)))
        }
        // Ended between the read and the refresh (a sign-out or a ban in another request).
        None => Ok(with_cookie(ok(&serde_json::Value::Null), state.cookies.clear())),
    }
}

pub async fn sign_out(state: &State, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let _ = ctx;
    let token = request::cookie(req.headers(), &state.cookies.name).and_then(SessionToken::parse);
    // The body is optional and ignored, but if one is sent it must still be well-formed.
    request::json_object(req, false, state.body_timeout()).await?;
    if let Some(token) = token {
        state.actors.sessions.end(token.hash()).await?;
    }
    Ok(with_cookie(ok(&SUCCESS), state.cookies.clear()))
}

/// A sign-in's password check: reserve an attempt, verify, report the outcome. The handler runs it as a task of
/// its own, because hyper drops a handler whose client has closed the connection: dropped between the reservation
/// and its end, the reservation would count against the account forever (anyone could lock any account by
/// disconnecting). As a task it always ends, counting the outcome as it came out.
async fn check_password(
    users: UsersHandle,
    hasher: Hasher,
    email: Email,
    user: Option<Arc<User>>,
    password: Password,
    ip: String,
) -> Result<bool, Failure> {
    let id = user.as_ref().map(|u| u.id);
    users.begin_attempt(email.clone(), id, ip.clone()).await.map_err(|e| match e {
        AttemptRefused::Locked(wait) => Failure::too_many_requests(wait),
        AttemptRefused::Unavailable(u) => u.into(),
    })?;
    // An unknown e-mail costs the same verify as a wrong password (against a dummy hash), so the answer time
    // does not tell which accounts exist.
    let verified = hasher.verify(password, user.map(|u| u.password_hash.clone())).await;
    let checked = match verified {
        Ok(true) => Checked::Verified,
        Ok(false) => Checked::Wrong,
        Err(_) => Checked::NotChecked,
    };
    users.finish_attempt(email, id, checked, ip).await?;
    verified.map_err(hash_failure)
}

/// A full hashing pool is a short overload: 503, retry in a second.
fn hash_failure(e: HashError) -> Failure {
    let failure = Failure::unavailable();
    match e {
        HashError::Busy => failure.with_header(header::RETRY_AFTER, HeaderValue::from_static("1")),
        HashError::Params(_) | HashError::Failed(_) => failure,
    }
}

/// The per-address limit, checked before the body is even read.
fn rate_limit(state: &State, ctx: &Ctx, which: Limited) -> Result<(), Failure> {
    state.limits.check(which, ctx.ip).map_err(Failure::too_many_requests)
}

fn origin(ctx: &Ctx, req: &Request<Incoming>) -> Origin {
    let user_agent = req.headers().get(header::USER_AGENT).and_then(|v| v.to_str().ok()).unwrap_or("");
    // Bounded: a user agent is stored with every session.
    let user_agent: String = user_agent.chars().take(512).collect();
    Origin { ip_address: ctx.ip.to_string(), user_agent }
}

/// `callbackURL` must be a safe relative path or an absolute URL on a trusted origin; an open redirect on an
/// auth endpoint is a phishing tool.
fn callback_url(state: &State, ctx: &Ctx, body: &Fields) -> Result<Option<String>, Failure> {
    let Some(url) = body.optional_string("callbackURL")? else { return Ok(None) };
    if super::origins::safe_relative_path(url) || state.origins.is_trusted_url(url, ctx.host()) {
        Ok(Some(url.to_owned()))
    } else {
        Err(Failure::new(StatusCode::FORBIDDEN, "INVALID_CALLBACK_URL", "Invalid callbackURL"))
    }
}

/// An avatar URL an admin screen can safely put in `<img src>`: absolute `http:` or `https:` with a host, and no
/// whitespace or control character anywhere (the parser would quietly strip some; we refuse them instead).
fn is_web_url(raw: &str) -> bool {
    !raw.chars().any(|c| c.is_control() || c.is_whitespace())
        && url::Url::parse(raw).is_ok_and(|u| matches!(u.scheme(), "http" | "https") && u.host().is_some())
}

/// `callbackURL` as a `Location` value: header values are bytes, and a raw non-ASCII URL is either refused by
/// the header type or misread by the client; percent-encoded, it means the same to everyone. The JSON `url`
/// field keeps the string as given, as the auth library does.
fn location_value(url: &str) -> String {
    const UNSAFE: &percent_encoding::AsciiSet =
        &percent_encoding::CONTROLS.add(b' ').add(b'"').add(b'<').add(b'>').add(b'`').add(b'{').add(b'}');
    percent_encoding::utf8_percent_encode(url, UNSAFE).to_string()
}

fn invalid_email() -> Failure {
    Failure::bad_request("INVALID_EMAIL", "Invalid email")
}

fn user_exists() -> Failure {
    Failure::new(
        StatusCode::UNPROCESSABLE_ENTITY,
        "USER_ALREADY_EXISTS_USE_ANOTHER_EMAIL",
        "User already exists. Use another email.",
    )
}

fn invalid_credentials() -> Failure {
    Failure::new(StatusCode::UNAUTHORIZED, "INVALID_EMAIL_OR_PASSWORD", "Invalid email or password")
}

fn password_failure(e: PasswordError) -> Failure {
    match e {
        PasswordError::TooShort => Failure::bad_request("PASSWORD_TOO_SHORT", "Password too short"),
        PasswordError::TooLong => Failure::bad_request("PASSWORD_TOO_LONG", "Password too long"),
    }
}

fn session_failure(e: CreateSessionError) -> Failure {
    match e {
        CreateSessionError::Banned => Failure::new(
            StatusCode::FORBIDDEN,
            "BANNED_USER",
            "You have been banned from this application. Please contact support if you believe this is an error.",
        ),
        // Only possible if the account vanished between the password check and now; to the caller it is
        // the same as never having existed.
        CreateSessionError::UnknownUser => invalid_credentials(),
        CreateSessionError::Unavailable(u) => u.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_urls() {
        assert!(is_web_url("https://cdn.example.com/a.png?size=64"));
        assert!(is_web_url("http://example.com/a.png"));
        for bad in [
            "javascript:alert(1)",
            "data:image/png;base64,AAAA",
            "/relative.png",
            "https://",
            "https://a.com/\u{7}",
            "https://a.com/a b.png",
            "ftp://example.com/a.png",
            "https://a.com/\n",
        ] {
            assert!(!is_web_url(bad), "{bad:?}");
        }
    }

    #[test]
    fn location_is_percent_encoded() {
        assert_eq!(location_value("/dashboard?x=1"), "/dashboard?x=1");
        assert_eq!(location_value("/café dé"), "/caf%C3%A9%20d%C3%A9");
        assert!(HeaderValue::from_str(&location_value("/ünïcödé/路径")).is_ok());
    }
}
