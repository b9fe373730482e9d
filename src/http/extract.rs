//! Reading requests: the JSON body (type, size, syntax), its fields, the session cookie, the client address, and
//! the administrator guard.

use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http_body_util::BodyExt;
use hyper::body::{Body as _, Incoming};
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::{Request, StatusCode};
use serde_json::{Map, Value};

use super::AppState;
use super::response::Failure;
use crate::accounts::{Client, Current};
use crate::domain::{SessionToken, User};

/// Per-request facts gathered before the handler runs.
#[derive(Debug, Clone)]
pub struct Ctx {
    /// The client's address: the peer, or what a trusted proxy says in `X-Forwarded-For`.
    pub ip: IpAddr,
    /// The `Host` header (a cheap reference-counted copy), for requests without a configured `base_url`.
    pub host: Option<HeaderValue>,
}

impl Ctx {
    pub fn host(&self) -> Option<&str> {
        self.host.as_ref().and_then(|h| h.to_str().ok())
    }
}

/// Largest request body accepted (docs/reference.md, "Requests: bodies and limits").
pub const MAX_BODY: usize = 64 * 1024;
/// How much of an oversized body is read and dropped before answering 413.
const MAX_DRAIN: usize = 1024 * 1024;

/// Whether a request's body has been read to its end, for the answer to say when its connection cannot be
/// reused ([`super::router`]). Kept in the request's extensions by the router, set by [`json_object`].
#[derive(Clone)]
pub struct BodyRead(Arc<AtomicBool>);

impl BodyRead {
    /// Starts tracking `req`'s body; `None` when it has none (nothing to read, nothing to leave unread).
    pub fn track(req: &mut Request<Incoming>) -> Option<Self> {
        if req.body().is_end_stream() {
            return None;
        }
        let read = Self(Arc::default());
        req.extensions_mut().insert(read.clone());
        Some(read)
    }

    pub fn finished(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    fn finish(&self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Reads and drops `req`'s body (at most [`MAX_BODY`], within `timeout`), for an answer given without it (a
/// refusal before the body was needed): so that the connection can carry the client's next request. A body that
/// is larger or slower is left, and the answer says `Connection: close`.
pub async fn discard_body(req: Request<Incoming>, timeout: Duration) {
    let Some(read) = req.extensions().get::<BodyRead>().cloned() else { return };
    let declared = req.headers().get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<usize>().ok());
    if declared.is_some_and(|n| n > MAX_BODY) {
        return;
    }
    let _ = tokio::time::timeout(timeout, read_body(req.into_body(), MAX_BODY, Some(read))).await;
}

/// Reads a JSON object body within `timeout`. `required: false` (sign-out) accepts an empty body of any type.
pub async fn json_object(req: Request<Incoming>, required: bool, timeout: Duration) -> Result<Fields, Failure> {
    let mut types = req.headers().get_all(header::CONTENT_TYPE).iter();
    let first = types.next();
    if types.next().is_some() {
        // Two parsers (a proxy and us) could each believe a different one.
        return Err(Failure::bad_request("BAD_REQUEST", "More than one Content-Type header"));
    }
    let is_json = first.and_then(|v| v.to_str().ok()).is_some_and(is_json_type);
    let read = req.extensions().get::<BodyRead>().cloned();
    let bytes = match tokio::time::timeout(timeout, read_body(req.into_body(), MAX_DRAIN, read)).await {
        Ok(Ok(Some(bytes))) => bytes,
        Ok(Ok(None)) => return Err(too_large()),
        Ok(Err(_)) => return Err(Failure::bad_request("BAD_REQUEST", "Could not read the request body")),
        Err(_) => {
            return Err(Failure::new(
                StatusCode::REQUEST_TIMEOUT,
                "REQUEST_TIMEOUT",
                "The request body came too slowly",
            ));
        }
    };
    if !required && bytes.is_empty() {
        return Ok(Fields(Map::new()));
    }
    if !is_json {
        return Err(Failure::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "UNSUPPORTED_MEDIA_TYPE",
            "Content-Type must be application/json",
        ));
    }
    match serde_json::from_slice::<Strict>(&bytes) {
        Ok(Strict(Value::Object(map))) => Ok(Fields(map)),
        Ok(Strict(other)) => {
            Err(Failure::validation(format!("[body] Invalid input: expected object, received {}", kind(Some(&other)))))
        }
        Err(e) if e.to_string().starts_with(DUPLICATE_KEY) => {
            Err(Failure::bad_request("BAD_REQUEST", "Duplicate key in the JSON body"))
        }
        Err(_) => Err(Failure::bad_request("BAD_REQUEST", "Invalid JSON in request body")),
    }
}

/// A SCIM body (RFC 7644 §3.1, §8.1): `application/scim+json` or `application/json`, else 415; a JSON object, else
/// 400 `invalidSyntax` (the refusals' codes are SCIM's `scimType`s, which the SCIM family's answers show).
pub async fn scim_object(req: Request<Incoming>, timeout: Duration) -> Result<Value, Failure> {
    let mut types = req.headers().get_all(header::CONTENT_TYPE).iter();
    let first = types.next().and_then(|v| v.to_str().ok()).map(str::to_owned);
    let single = types.next().is_none();
    let read = req.extensions().get::<BodyRead>().cloned();
    let bytes = match tokio::time::timeout(timeout, read_body(req.into_body(), MAX_DRAIN, read)).await {
        Ok(Ok(Some(bytes))) => bytes,
        Ok(Ok(None)) => return Err(too_large()),
        Ok(Err(_)) => return Err(Failure::bad_request("invalidSyntax", "Could not read the request body")),
        Err(_) => {
            return Err(Failure::new(
                StatusCode::REQUEST_TIMEOUT,
                "REQUEST_TIMEOUT",
                "The request body came too slowly",
            ));
        }
    };
    let essence = first.as_deref().and_then(|t| t.split(';').next()).map(str::trim);
    let scim = essence
        .is_some_and(|e| e.eq_ignore_ascii_case("application/scim+json") || e.eq_ignore_ascii_case("application/json"));
    if !single || !scim {
        return Err(Failure::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "UNSUPPORTED_MEDIA_TYPE",
            "SCIM requests must use application/scim+json or application/json",
        ));
    }
    match serde_json::from_slice::<Strict>(&bytes) {
        Ok(Strict(value @ Value::Object(_))) => Ok(value),
        Ok(_) => Err(Failure::bad_request("invalidSyntax", "The body must be a JSON object")),
        Err(e) if e.to_string().starts_with(DUPLICATE_KEY) => {
            Err(Failure::bad_request("invalidSyntax", "Duplicate key in the JSON body"))
        }
        Err(_) => Err(Failure::bad_request("invalidSyntax", "Invalid JSON in request body")),
    }
}

/// An `application/x-www-form-urlencoded` body (a provider's `form_post` callback), as name-value pairs.
pub async fn form_body(req: Request<Incoming>, timeout: Duration) -> Result<Vec<(String, String)>, Failure> {
    let bytes = form_bytes(req, timeout).await?;
    Ok(url::form_urlencoded::parse(&bytes).map(|(k, v)| (k.into_owned(), v.into_owned())).collect())
}

/// A form body as it came, for a caller that parses it itself (the token endpoints, which note repeated names).
pub async fn form_bytes(req: Request<Incoming>, timeout: Duration) -> Result<Bytes, Failure> {
    let read = req.extensions().get::<BodyRead>().cloned();
    match tokio::time::timeout(timeout, read_body(req.into_body(), MAX_DRAIN, read)).await {
        Ok(Ok(Some(bytes))) => Ok(bytes),
        Ok(Ok(None)) => Err(too_large()),
        _ => Err(Failure::bad_request("BAD_REQUEST", "Could not read the request body")),
    }
}

const DUPLICATE_KEY: &str = "duplicate key";

/// A JSON value whose objects, at any depth, have no key twice. `serde_json` keeps the last of two equal keys,
/// while other parsers (a proxy, a WAF, the client's library) may keep the first: a body that means two things
/// to two parsers is refused instead.
struct Strict(Value);

impl<'de> serde::Deserialize<'de> for Strict {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(StrictVisitor).map(Strict)
    }
}

struct StrictVisitor;

impl<'de> serde::de::Visitor<'de> for StrictVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(Strict(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut fields = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let Strict(value) = map.next_value()?;
            if fields.contains_key(&key) {
                return Err(serde::de::Error::custom(DUPLICATE_KEY));
            }
            fields.insert(key, value);
        }
        Ok(Value::Object(fields))
    }
}

/// The body, or `None` when it is over [`MAX_BODY`]. An oversized body is still read (and dropped) up to `drain`:
/// a client that is still sending when the 413 goes out would otherwise see a reset connection instead of the
/// answer. Past that, the connection is closed (and the answer says so).
/// `read`, the router's tracker, is marked once the body has been read to its end.
async fn read_body(mut body: Incoming, drain: usize, read: Option<BodyRead>) -> Result<Option<Bytes>, hyper::Error> {
    let mut kept = BytesMut::new();
    let mut seen = 0usize;
    while let Some(frame) = body.frame().await {
        if let Some(data) = frame?.data_ref() {
            seen += data.len();
            if seen <= MAX_BODY {
                kept.extend_from_slice(data);
            } else if seen > drain {
                return Ok(None);
            }
        }
    }
    read.inspect(BodyRead::finish);
    Ok((seen <= MAX_BODY).then(|| kept.freeze()))
}

fn too_large() -> Failure {
    Failure::new(StatusCode::PAYLOAD_TOO_LARGE, "PAYLOAD_TOO_LARGE", "Request body is larger than 64 KiB")
}

/// `application/json`, with any parameters (`; charset=utf-8`), in any case.
fn is_json_type(value: &str) -> bool {
    value.split(';').next().is_some_and(|essence| essence.trim().eq_ignore_ascii_case("application/json"))
}

/// The fields of a JSON object body, with typed accessors whose errors name the field the way the auth
/// library's validator does (`[body.email] Invalid input: expected string, received number`).
#[derive(Debug)]
pub struct Fields(Map<String, Value>);

impl From<Map<String, Value>> for Fields {
    /// A nested object of a body (already checked for duplicate keys with the body).
    fn from(map: Map<String, Value>) -> Self {
        Self(map)
    }
}

impl Fields {
    pub fn has(&self, key: &str) -> bool {
        self.0.contains_key(key)
    }

    /// The raw value of `key`, for the few fields that are not strings or booleans.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.0.get(key)
    }

    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.0.keys().map(String::as_str)
    }

    /// 400 `VALIDATION_ERROR` naming the first field outside `known`: a field a call does not take is refused
    /// rather than ignored, so that a misspelt option (`revokeOtherSession`) is not taken for its absence.
    pub fn only(&self, known: &[&str]) -> Result<(), Failure> {
        match self.keys().find(|k| !known.contains(k)) {
            Some(k) => Err(Failure::validation(format!("unknown field `{k}`; allowed: {}", known.join(", ")))),
            None => Ok(()),
        }
    }

    pub fn string(&self, key: &str) -> Result<&str, Failure> {
        self.optional_string(key)?.ok_or_else(|| expected(key, "string", None))
    }

    /// Absent or `null` is `None`.
    pub fn optional_string(&self, key: &str) -> Result<Option<&str>, Failure> {
        match self.0.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(other) => Err(expected(key, "string", Some(other))),
        }
    }

    pub fn optional_bool(&self, key: &str) -> Result<Option<bool>, Failure> {
        match self.0.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(other) => Err(expected(key, "boolean", Some(other))),
        }
    }

    /// A whole number from 0 up; absent or `null` is `None`.
    pub fn optional_u64(&self, key: &str) -> Result<Option<u64>, Failure> {
        match self.0.get(key) {
            None | Some(Value::Null) => Ok(None),
            // `60.0` is the whole number 60 to JSON (and to JSON Schema's `integer`).
            Some(Value::Number(n)) => n
                .as_u64()
                .or_else(|| n.as_f64().filter(|f| f.fract() == 0.0 && (0.0..=9.0e15).contains(f)).map(|f| f as u64))
                .map(Some)
                .ok_or_else(|| {
                    Failure::validation(format!("[body.{key}] Invalid input: expected a whole number from 0 up"))
                }),
            Some(other) => Err(expected(key, "number", Some(other))),
        }
    }

    /// Tells "absent" (`None`) from "explicitly null" (`Some(None)`), for fields where null means "remove".
    pub fn nullable_string(&self, key: &str) -> Result<Option<Option<&str>>, Failure> {
        match self.0.get(key) {
            None => Ok(None),
            Some(Value::Null) => Ok(Some(None)),
            Some(Value::String(s)) => Ok(Some(Some(s))),
            Some(other) => Err(expected(key, "string or null", Some(other))),
        }
    }
}

fn expected(key: &str, what: &str, got: Option<&Value>) -> Failure {
    Failure::validation(format!("[body.{key}] Invalid input: expected {what}, received {}", kind(got)))
}

fn kind(value: Option<&Value>) -> &'static str {
    match value {
        None => "undefined",
        Some(Value::Null) => "null",
        Some(Value::Bool(_)) => "boolean",
        Some(Value::Number(_)) => "number",
        Some(Value::String(_)) => "string",
        Some(Value::Array(_)) => "array",
        Some(Value::Object(_)) => "object",
    }
}

/// The value of cookie `name`, from any `Cookie` header.
pub fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.trim_matches('"'))
}

/// The API key in the configured header (`x-api-key`), when keys open sessions (`[api_keys] sessions`). It wins over
/// a session cookie on the same request, as in the plugin.
pub fn api_key<'a>(state: &AppState, headers: &'a HeaderMap) -> Option<&'a str> {
    let name = state.accounts.api_key_header()?;
    let value = headers.get(name)?;
    // A value that is not text is no key of ours: the empty string is refused as too short.
    Some(value.to_str().unwrap_or(""))
}

/// The session token in the request's cookie, if it has the shape of one.
pub fn session_token(state: &AppState, headers: &HeaderMap) -> Option<SessionToken> {
    cookie(headers, &state.cookies.name).and_then(SessionToken::parse)
}

// --- the caller guard: who is asking, checked one way for every family ------------------------------------

/// The caller's token and session, when the cookie holds a live one (`None` otherwise: 401 for the guard to say).
/// 503 when this node cannot vouch for any session right now (several nodes: too far behind the database), so that
/// an outage is not taken for a sign-out.
///
/// `[two_factor] required_for_roles`: a session of an account that must have a second factor and has none is
/// refused here (403 `TWO_FACTOR_REQUIRED`), for every call of every family but the few that enrol one
/// ([`signed_in_enrolling`]); get-session and sign-out do not ask for a caller.
async fn caller(state: &AppState, headers: &HeaderMap) -> Result<Option<(SessionToken, Current)>, Failure> {
    let found = caller_enrolling(state, headers).await?;
    if let Some((_, current)) = &found
        && state.accounts.must_enrol(current).await
    {
        return Err(Failure::new(
            StatusCode::FORBIDDEN,
            "TWO_FACTOR_REQUIRED",
            "Your role requires a second factor: enable two-factor authentication first",
        ));
    }
    Ok(found)
}

async fn caller_enrolling(state: &AppState, headers: &HeaderMap) -> Result<Option<(SessionToken, Current)>, Failure> {
    if let Some(key) = api_key(state, headers) {
        // The key's session is this request's only, and has no token of its own: a fresh random one stands in for
        // it, which names no stored session (a sign-out or "other sessions" call with it ends none by mistake).
        let current = state.accounts.api_key_session(key).await?;
        return Ok(Some((SessionToken::generate(), current)));
    }
    let Some(token) = session_token(state, headers) else { return Ok(None) };
    Ok(state.accounts.current(&token)?.map(|current| (token, current)))
}

/// [`signed_in`] for the calls that enrol a second factor: the only ones a session that must enrol one may make.
pub async fn signed_in_enrolling(state: &AppState, headers: &HeaderMap) -> Result<(SessionToken, Current), Failure> {
    caller_enrolling(state, headers).await?.ok_or_else(unauthorized)
}

/// [`signed_in_enrolling`], but the caller's own session (not an impersonation).
pub async fn signed_in_self_enrolling(
    state: &AppState,
    headers: &HeaderMap,
) -> Result<(SessionToken, Current), Failure> {
    own_second_factor(signed_in_enrolling(state, headers).await?)
}

/// The one optional caller: the caller when the request carries a live session, `None` without one (the call goes
/// on as a stranger's), for the calls anyone may make that do more for a signed-in caller. The enrolment rule
/// ([`caller`]) does not apply, on purpose: each such call is a step of a sign-in (a passkey's authentication
/// options, another provider's callback) or of a second factor's own step, which a session that must enrol one has
/// to be able to take; what it leads to is guarded where it starts (`link-social` asks for [`signed_in_self`]) or
/// ends (the session a sign-in starts meets the rule at its first guarded call).
pub async fn signed_in_or_none(
    state: &AppState,
    headers: &HeaderMap,
) -> Result<Option<(SessionToken, Current)>, Failure> {
    caller_enrolling(state, headers).await
}

/// [`signed_in_or_none`], but a caller on their own session only, as [`signed_in_self_enrolling`]: the second
/// factor's steps, which an administrator impersonating a user may not take for them.
pub async fn signed_in_self_or_none(
    state: &AppState,
    headers: &HeaderMap,
) -> Result<Option<(SessionToken, Current)>, Failure> {
    signed_in_or_none(state, headers).await?.map(own_second_factor).transpose()
}

/// `found`, unless it is an impersonation: the second factor is the account holder's own to change.
fn own_second_factor((token, current): (SessionToken, Current)) -> Result<(SessionToken, Current), Failure> {
    if current.is_impersonation() {
        return Err(Failure::new(
            StatusCode::FORBIDDEN,
            "NOT_ALLOWED_WHILE_IMPERSONATING",
            "An administrator impersonating a user cannot change their second factor",
        ));
    }
    Ok((token, current))
}

/// How a route family words its refusals. The statuses are the same for all (401 without a live session, 403 for
/// a caller who is not an administrator); the bodies are each family's own, which its clients read.
#[derive(Debug, Clone, Copy)]
pub enum Refusal {
    /// better-auth's shape (`/api/auth/*`): 401 `UNAUTHORIZED`, 403 with the route's own code.
    Coded(&'static str),
    /// `/api/admin/*`'s and the console's: 401 "authentication required", 403 "administrator role required".
    Plain,
}

impl Refusal {
    fn unauthorized(self) -> Failure {
        match self {
            Self::Coded(_) => unauthorized(),
            Self::Plain => Failure::with_status(StatusCode::UNAUTHORIZED, "authentication required"),
        }
    }

    fn forbidden(self) -> Failure {
        match self {
            Self::Coded(code) => Failure::new(StatusCode::FORBIDDEN, code, "You are not allowed to do this"),
            Self::Plain => Failure::with_status(StatusCode::FORBIDDEN, "administrator role required"),
        }
    }
}

/// better-auth's 401.
fn unauthorized() -> Failure {
    Failure::new(StatusCode::UNAUTHORIZED, "UNAUTHORIZED", "Unauthorized")
}

/// better-auth's `freshSessionMiddleware`: 403 `SESSION_NOT_FRESH` unless the session was made within
/// `[session] fresh_age_secs`. For the calls that change how the account is signed into (ASVS 7.5.1).
pub fn fresh(state: &AppState, current: &Current) -> Result<(), Failure> {
    if state.accounts.is_fresh(current) {
        return Ok(());
    }
    Err(Failure::new(StatusCode::FORBIDDEN, "SESSION_NOT_FRESH", "Session is not fresh"))
}

/// The caller's token and session, or better-auth's 401 (503 while this node cannot vouch for sessions).
pub async fn signed_in(state: &AppState, headers: &HeaderMap) -> Result<(SessionToken, Current), Failure> {
    caller(state, headers).await?.ok_or_else(unauthorized)
}

/// [`signed_in`] with the caller's own session, not an impersonation: for the calls that change how the account
/// is signed into or whether it exists. An administrator acting as a user may look and help, but a new password
/// or a deletion is theirs to make with their own audited calls (`set-user-password`, `remove-user`).
pub async fn signed_in_self(state: &AppState, headers: &HeaderMap) -> Result<(SessionToken, Current), Failure> {
    let (token, current) = signed_in(state, headers).await?;
    if current.is_impersonation() {
        return Err(Failure::new(
            StatusCode::FORBIDDEN,
            "NOT_ALLOWED_WHILE_IMPERSONATING",
            "An administrator impersonating a user cannot change their password or delete their account",
        ));
    }
    Ok((token, current))
}

/// The caller, if their session is valid and they are an administrator right now on their own session
/// ([`Current::administrator`]); refused as `refusal` words it otherwise.
pub async fn administrator(state: &AppState, headers: &HeaderMap, refusal: Refusal) -> Result<Arc<User>, Failure> {
    let (_, current) = caller(state, headers).await?.ok_or_else(|| refusal.unauthorized())?;
    current.administrator().cloned().ok_or_else(|| refusal.forbidden())
}

/// Where the request comes from, as a session records it.
pub fn client(ctx: &Ctx, headers: &HeaderMap) -> Client {
    let user_agent = headers.get(header::USER_AGENT).and_then(|v| v.to_str().ok()).unwrap_or("");
    // Bounded: a user agent is stored with every session.
    let user_agent: String = user_agent.chars().take(512).collect();
    Client { ip_address: ctx.ip.to_string(), user_agent }
}

/// The percent-decoded value of query parameter `name` (a URL or a token).
pub fn query_value(query: Option<&str>, name: &str) -> Option<String> {
    url::form_urlencoded::parse(query?.as_bytes()).find(|(k, _)| k == name).map(|(_, v)| v.into_owned())
}

/// 400 `VALIDATION_ERROR` naming the first query parameter outside `known`: a misspelt filter (`searchValeu`)
/// would otherwise answer with everything, as if none had been asked for (see [`Fields::only`]).
pub fn query_only(query: Option<&str>, known: &[&str]) -> Result<(), Failure> {
    let Some(query) = query else { return Ok(()) };
    match url::form_urlencoded::parse(query.as_bytes()).find(|(k, _)| !known.contains(&k.as_ref())) {
        Some((key, _)) => Err(unknown_parameter(&key, known)),
        None => Ok(()),
    }
}

/// The refusal of query parameter `key`, which is not among the `known` ones of its call.
pub fn unknown_parameter(key: &str, known: &[&str]) -> Failure {
    Failure::validation(match known {
        [] => format!("unknown parameter `{key}`; this call takes none"),
        _ => format!("unknown parameter `{key}`; allowed: {}", known.join(", ")),
    })
}

/// The value of query parameter `name` (no percent-decoding: only used for plain flags).
pub fn query_param<'a>(query: Option<&'a str>, name: &str) -> Option<&'a str> {
    query?.split('&').filter_map(|kv| kv.split_once('=')).find(|(k, _)| *k == name).map(|(_, v)| v)
}

/// The client's address: the direct peer, or, when the peer is a trusted proxy, the nearest address in
/// `X-Forwarded-For` that is not itself a trusted proxy. A client can put anything in that header, so it is
/// believed only as far as our own proxies vouch for it.
pub fn client_ip(peer: IpAddr, headers: &HeaderMap, trusted_proxies: &[IpAddr]) -> IpAddr {
    if !trusted_proxies.contains(&peer) {
        return peer;
    }
    let forwarded = headers
        .get_all("x-forwarded-for")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .collect::<Vec<_>>();
    for hop in forwarded.iter().rev() {
        match hop.parse::<IpAddr>() {
            Ok(ip) if trusted_proxies.contains(&ip) => continue,
            Ok(ip) => return ip,
            Err(_) => return peer,
        }
    }
    peer
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::header::HeaderValue;

    #[test]
    fn only_names_the_first_field_outside_the_list() {
        let body = |v: serde_json::Value| Fields::from(v.as_object().unwrap().clone());
        assert!(body(serde_json::json!({"token": "t"})).only(&["token"]).is_ok());
        assert!(body(serde_json::json!({})).only(&[]).is_ok());
        let refused = body(serde_json::json!({"token": "t", "tokn": "t"})).only(&["token"]).unwrap_err();
        assert_eq!((refused.status, refused.code), (StatusCode::BAD_REQUEST, "VALIDATION_ERROR"));
        assert_eq!(refused.message, "unknown field `tokn`; allowed: token");
    }

    #[test]
    fn query_only_names_the_first_parameter_outside_the_list() {
        assert!(query_only(None, &[]).is_ok());
        assert!(query_only(Some("limit=2&cursor=c"), &["limit", "cursor"]).is_ok());
        let refused = query_only(Some("limit=2&c%75rsr=x"), &["limit", "cursor"]).unwrap_err();
        assert_eq!(refused.message, "unknown parameter `cursr`; allowed: limit, cursor");
        assert_eq!(
            query_only(Some("limit=2"), &[]).unwrap_err().message,
            "unknown parameter `limit`; this call takes none"
        );
    }

    #[test]
    fn duplicate_keys_are_refused_at_any_depth() {
        let parse = |s: &str| serde_json::from_str::<Strict>(s).map(|v| v.0);
        assert!(parse(r#"{"a": 1, "b": {"c": [1, {"d": null}]}}"#).is_ok());
        for body in [r#"{"email": "a@b.co", "email": "c@d.co"}"#, r#"{"x": [{"k": 1, "k": 2}]}"#] {
            let e = parse(body).unwrap_err();
            assert!(e.to_string().starts_with(DUPLICATE_KEY), "{body}: {e}");
        }
        assert_eq!(parse(r#"{"n": 1.5, "m": -3}"#).unwrap(), serde_json::json!({"n": 1.5, "m": -3}));
    }

    #[test]
    fn json_content_types() {
        assert!(is_json_type("application/json"));
        assert!(is_json_type("Application/JSON; charset=utf-8"));
        assert!(!is_json_type("text/plain"));
        assert!(!is_json_type("application/jsonx"));
        assert!(!is_json_type("application/x-www-form-urlencoded"));
    }

    #[test]
    fn finds_the_cookie_among_others() {
        let mut h = HeaderMap::new();
        h.append(header::COOKIE, HeaderValue::from_static("a=1; service-auth.session_token=abc; b=2"));
        assert_eq!(cookie(&h, "service-auth.session_token"), Some("abc"));
        assert_eq!(cookie(&h, "missing"), None);
        h.append(header::COOKIE, HeaderValue::from_static("other=x"));
        assert_eq!(cookie(&h, "other"), Some("x"));
    }

    #[test]
    fn forwarded_for_only_through_trusted_proxies() {
        let proxy: IpAddr = "10.0.0.1".parse().unwrap();
        let client: IpAddr = "203.0.113.7".parse().unwrap();
        let mut h = HeaderMap::new();
        h.insert("x-forwarded-for", HeaderValue::from_static("198.51.100.1, 203.0.113.7, 10.0.0.1"));
        assert_eq!(client_ip(proxy, &h, &[proxy]), client);
        assert_eq!(client_ip(client, &h, &[proxy]), client, "an untrusted peer's header is ignored");
        h.insert("x-forwarded-for", HeaderValue::from_static("garbage"));
        assert_eq!(client_ip(proxy, &h, &[proxy]), proxy);
    }

    #[test]
    fn query_flags() {
        assert_eq!(query_param(Some("a=1&disableRefresh=true"), "disableRefresh"), Some("true"));
        assert_eq!(query_param(None, "x"), None);
    }
}

/// Fuzzing the request parsing (bounded, so it runs in every `cargo test`): no input panics the JSON parser or the
/// field accessors, a duplicate key is always refused, and the header readers take any bytes.
#[cfg(test)]
mod fuzz {
    use proptest::prelude::*;

    use super::*;

    fn fields(bytes: &[u8]) -> Option<Fields> {
        match serde_json::from_slice::<Strict>(bytes) {
            Ok(Strict(Value::Object(map))) => Some(Fields(map)),
            _ => None,
        }
    }

    /// JSON-ish text: the bytes a real body is made of, in any order.
    fn jsonish() -> impl Strategy<Value = String> {
        proptest::collection::vec(
            prop_oneof![
                Just("{"),
                Just("}"),
                Just("["),
                Just("]"),
                Just(":"),
                Just(","),
                Just("\""),
                Just("\"email\""),
                Just("\"password\""),
                Just("null"),
                Just("true"),
                Just("1e999"),
                Just("-0"),
                Just("\\u0000"),
                Just("\\ud800"),
                Just(" "),
                Just("é"),
                Just("x"),
            ],
            0..40,
        )
        .prop_map(|parts| parts.concat())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(3000))]

        #[test]
        fn no_body_panics_the_parser_or_the_accessors(bytes in proptest::collection::vec(any::<u8>(), 0..200), text in jsonish()) {
            for body in [bytes.as_slice(), text.as_bytes()] {
                if let Some(f) = fields(body) {
                    for key in ["email", "password", "name", "image", "rememberMe", "x"] {
                        let _ = (f.string(key), f.optional_bool(key), f.nullable_string(key), f.has(key));
                    }
                }
            }
        }

        #[test]
        fn a_repeated_key_is_always_refused(key in "[a-zA-Z]{1,8}", a in any::<u32>(), b in any::<u32>()) {
            let body = format!(r#"{{"{key}": {a}, "other": null, "{key}": {b}}}"#);
            prop_assert!(serde_json::from_str::<Strict>(&body).is_err());
        }

        #[test]
        fn header_readers_take_any_text(cookie_header in ".{0,200}", xff in ".{0,100}", query in ".{0,100}") {
            let mut headers = HeaderMap::new();
            if let Ok(v) = header::HeaderValue::from_str(&cookie_header) {
                headers.insert(header::COOKIE, v);
            }
            if let Ok(v) = header::HeaderValue::from_str(&xff) {
                headers.insert("x-forwarded-for", v);
            }
            let _ = cookie(&headers, "service-auth.session_token");
            let proxy: IpAddr = "10.0.0.1".parse().unwrap();
            let _ = client_ip(proxy, &headers, &[proxy]);
            let _ = query_param(Some(&query), "disableRefresh");
        }
    }
}
