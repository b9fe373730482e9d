//! Building answers: JSON bodies, the two error shapes, and the session cookie.

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{self, HeaderValue};
use hyper::{Response, StatusCode};
use serde::Serialize;

/// An answer's body: whole (almost every answer), or streamed from a channel (the audit export, which must not hold
/// the whole log in memory). A streamed body that ends with an error is cut off without its final chunk, so the
/// client sees an incomplete answer rather than a short one that looks whole.
#[derive(Debug, Default)]
pub struct Body(BodyInner);

#[derive(Debug)]
enum BodyInner {
    Full(Full<Bytes>),
    Stream(tokio::sync::mpsc::Receiver<Result<Bytes, std::io::Error>>),
}

impl Default for BodyInner {
    fn default() -> Self {
        Self::Full(Full::default())
    }
}

impl Body {
    pub fn new(bytes: Bytes) -> Self {
        Self(BodyInner::Full(Full::new(bytes)))
    }

    /// A body fed by whoever holds the sender; the channel's bound is how much is buffered at most.
    pub fn stream(rx: tokio::sync::mpsc::Receiver<Result<Bytes, std::io::Error>>) -> Self {
        Self(BodyInner::Stream(rx))
    }
}

impl hyper::body::Body for Body {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, Self::Error>>> {
        match &mut self.get_mut().0 {
            BodyInner::Full(full) => std::pin::Pin::new(full).poll_frame(cx).map_err(|never| match never {}),
            BodyInner::Stream(rx) => rx.poll_recv(cx).map(|next| next.map(|chunk| chunk.map(hyper::body::Frame::data))),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.0 {
            BodyInner::Full(full) => full.is_end_stream(),
            BodyInner::Stream(_) => false,
        }
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        match &self.0 {
            BodyInner::Full(full) => full.size_hint(),
            BodyInner::Stream(_) => hyper::body::SizeHint::default(),
        }
    }
}

/// Which family of endpoints an answer belongs to; it decides the error body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// `/api/auth/*` (and anything unknown): `{"code": "UPPER_SNAKE", "message": "..."}`, as the auth library's
    /// clients expect.
    Auth,
    /// `/api/admin/*`: `{"error": "..."}`, as docs/reference.md fixes.
    Admin,
    /// `/api/auth/scim/v2/*`: a SCIM Error (RFC 7644 §3.12), `application/scim+json`, unknown paths and wrong
    /// methods included; a code that is one of the RFC's `scimType`s is shown as that.
    Scim,
}

/// RFC 7644 §3.12's `scimType`s.
const SCIM_TYPES: &[&str] = &[
    "invalidFilter",
    "tooMany",
    "uniqueness",
    "mutability",
    "invalidSyntax",
    "invalidPath",
    "noTarget",
    "invalidValue",
    "invalidVers",
    "sensitive",
];

/// A SCIM answer: JSON as `application/scim+json` (RFC 7644 §8.1).
pub fn scim_json(status: StatusCode, body: &impl Serialize) -> Response<Body> {
    let mut response = json(status, body);
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/scim+json"));
    response
}

/// A refusal: status, a stable code (shown on auth endpoints) and a human message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    /// Extra headers such as `Allow` on a 405.
    pub headers: Vec<(header::HeaderName, HeaderValue)>,
    /// better-auth's `details` beside the code (an API key's window: `{tryAgainIn}`), on auth endpoints.
    pub details: Option<Box<serde_json::Value>>,
    /// A field of better-auth's beside `code` and `message` (`missingPermissions` of a role refused), on auth
    /// endpoints.
    pub beside: Option<Box<(&'static str, serde_json::Value)>>,
}

impl Failure {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self { status, code, message: message.into(), headers: Vec::new(), details: None, beside: None }
    }

    pub fn bad_request(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, code, message)
    }

    /// A refusal whose code is the status's own name (`NOT_FOUND`, `CONFLICT`, …): the admin family shows only
    /// the message.
    pub fn with_status(status: StatusCode, message: impl Into<String>) -> Self {
        let code = match status {
            StatusCode::BAD_REQUEST => "BAD_REQUEST",
            StatusCode::UNAUTHORIZED => "UNAUTHORIZED",
            StatusCode::FORBIDDEN => "FORBIDDEN",
            StatusCode::NOT_FOUND => "NOT_FOUND",
            StatusCode::CONFLICT => "CONFLICT",
            _ => "ERROR",
        };
        Self::new(status, code, message)
    }

    pub fn validation(message: impl Into<String>) -> Self {
        Self::bad_request("VALIDATION_ERROR", message)
    }

    pub fn unavailable() -> Self {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, "SERVICE_UNAVAILABLE", "The service is temporarily unavailable")
    }

    /// 429, with the wait in `Retry-After` and in `X-Retry-After` (which the auth library's clients read).
    pub fn too_many_requests(wait: std::time::Duration) -> Self {
        let secs = HeaderValue::from(super::rate_limits::retry_after_secs(wait));
        Self::new(StatusCode::TOO_MANY_REQUESTS, "TOO_MANY_REQUESTS", "Too many requests. Please try again later.")
            .with_header(header::RETRY_AFTER, secs.clone())
            .with_header(header::HeaderName::from_static("x-retry-after"), secs)
    }

    /// `name: value` beside the code and message (auth endpoints only).
    pub fn with(mut self, name: &'static str, value: impl serde::Serialize) -> Self {
        self.beside = Some(Box::new((name, serde_json::to_value(value).unwrap_or_default())));
        self
    }

    pub fn with_header(mut self, name: header::HeaderName, value: HeaderValue) -> Self {
        self.headers.push((name, value));
        self
    }

    pub fn into_response(self, family: Family) -> Response<Body> {
        let body = match family {
            Family::Auth if let Some(details) = self.details => {
                serde_json::json!({ "code": self.code, "message": self.message, "details": details })
            }
            Family::Auth if let Some(beside) = self.beside => {
                let (name, value) = *beside;
                serde_json::json!({ "code": self.code, "message": self.message, name: value })
            }
            Family::Auth => serde_json::json!({ "code": self.code, "message": self.message }),
            Family::Admin => serde_json::json!({ "error": self.message }),
            Family::Scim => {
                let mut body = serde_json::json!({
                    "schemas": ["urn:ietf:params:scim:api:messages:2.0:Error"],
                    "status": self.status.as_u16().to_string(),
                    "detail": self.message,
                });
                if SCIM_TYPES.contains(&self.code) {
                    body["scimType"] = self.code.into();
                }
                body
            }
        };
        let mut response = match family {
            Family::Scim => scim_json(self.status, &body),
            _ => json(self.status, &body),
        };
        for (name, value) in self.headers {
            response.headers_mut().append(name, value);
        }
        response
    }
}

/// A JSON answer. Every answer of this service carries `Cache-Control: no-store`: they are all about accounts
/// and sessions, which no cache should keep.
pub fn json(status: StatusCode, body: &impl Serialize) -> Response<Body> {
    // Serialising our own DTOs cannot fail (no maps with non-string keys, no failing Serialize impls).
    let mut bytes = Vec::with_capacity(1024);
    let _ = serde_json::to_writer(&mut bytes, body);
    json_bytes(status, bytes)
}

/// A JSON answer already serialised into `bytes`.
pub fn json_bytes(status: StatusCode, bytes: Vec<u8>) -> Response<Body> {
    let mut response = Response::new(Body::new(Bytes::from(bytes)));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(header::PRAGMA, HeaderValue::from_static("no-cache"));
    response
}

pub fn ok(body: &impl Serialize) -> Response<Body> {
    json(StatusCode::OK, body)
}

/// Names and attributes of the session cookie.
#[derive(Debug, Clone)]
pub struct CookieSettings {
    /// `service-auth.session_token`, or `__Secure-service-auth.session_token` with secure cookies.
    pub name: String,
    pub secure: bool,
    /// `Max-Age` of a remembered session's cookie, seconds.
    pub max_age: u64,
    /// `service-auth.admin_session`: an impersonating administrator's own session, kept aside until they stop.
    pub admin_name: String,
    /// `service-auth.two_factor` (a sign-in waiting for its second factor) and `service-auth.trust_device` (a
    /// trusted device), better-auth's two-factor cookies.
    pub two_factor_name: String,
    pub trust_name: String,
    /// `service-auth.better-auth-passkey`: a passkey ceremony's token between its options and its verification
    /// (the plugin's cookie name, under our prefix).
    pub passkey_name: String,
}

impl CookieSettings {
    pub fn new(prefix: &str, secure: bool, max_age: u64) -> Self {
        let secure_prefix = if secure { "__Secure-" } else { "" };
        let name = format!("{secure_prefix}{prefix}.session_token");
        let admin_name = format!("{secure_prefix}{prefix}.admin_session");
        let two_factor_name = format!("{secure_prefix}{prefix}.two_factor");
        let trust_name = format!("{secure_prefix}{prefix}.trust_device");
        let passkey_name = format!("{secure_prefix}{prefix}.better-auth-passkey");
        Self { name, secure, max_age, admin_name, two_factor_name, trust_name, passkey_name }
    }

    /// Cookie `name` (one of the names above) carrying `token` for `max_age` seconds.
    pub fn set_for(&self, name: &str, token: &str, max_age: u64) -> HeaderValue {
        self.header(&format!("{name}={token}; Max-Age={max_age}"))
    }

    /// Clears cookie `name`.
    pub fn clear_for(&self, name: &str) -> HeaderValue {
        self.header(&format!("{name}=; Max-Age=0"))
    }

    /// The cookie binding a passkey ceremony to this browser: as long as the ceremony waits, no longer.
    pub fn set_passkey(&self, token: &str, max_age: u64) -> HeaderValue {
        self.header(&format!("{}={token}; Max-Age={max_age}", self.passkey_name))
    }

    pub fn clear_passkey(&self) -> HeaderValue {
        self.header(&format!("{}=; Max-Age=0", self.passkey_name))
    }

    /// The cookie keeping the administrator's own token during an impersonation; no `Max-Age`, like the
    /// impersonation's own cookie.
    pub fn set_admin(&self, token: &str) -> HeaderValue {
        self.header(&format!("{}={token}", self.admin_name))
    }

    pub fn clear_admin(&self) -> HeaderValue {
        self.header(&format!("{}=; Max-Age=0", self.admin_name))
    }

    /// The cookie carrying `token`. Without `remember` it has no `Max-Age`: the browser drops it when it closes.
    pub fn set(&self, token: &str, remember: bool) -> HeaderValue {
        let max_age = if remember { format!("; Max-Age={}", self.max_age) } else { String::new() };
        self.header(&format!("{}={token}{max_age}", self.name))
    }

    /// Clears the cookie.
    pub fn clear(&self) -> HeaderValue {
        self.header(&format!("{}=; Max-Age=0", self.name))
    }

    fn header(&self, start: &str) -> HeaderValue {
        let secure = if self.secure { "; Secure" } else { "" };
        // Only token characters (base64url) and our own validated prefix go in: always a valid header value.
        HeaderValue::from_str(&format!("{start}; Path=/; HttpOnly{secure}; SameSite=Lax"))
            .unwrap_or_else(|_| HeaderValue::from_static(""))
    }
}

pub fn with_cookie(mut response: Response<Body>, cookie: HeaderValue) -> Response<Body> {
    response.headers_mut().append(header::SET_COOKIE, cookie);
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cookie_attributes() {
        let plain = CookieSettings::new("service-auth", false, 604_800);
        assert_eq!(
            plain.set("tok", true),
            "service-auth.session_token=tok; Max-Age=604800; Path=/; HttpOnly; SameSite=Lax"
        );
        assert_eq!(plain.set("tok", false), "service-auth.session_token=tok; Path=/; HttpOnly; SameSite=Lax");
        assert_eq!(plain.clear(), "service-auth.session_token=; Max-Age=0; Path=/; HttpOnly; SameSite=Lax");
        let secure = CookieSettings::new("service-auth", true, 604_800);
        assert_eq!(
            secure.set("tok", true),
            "__Secure-service-auth.session_token=tok; Max-Age=604800; Path=/; HttpOnly; Secure; SameSite=Lax"
        );
    }

    #[test]
    fn error_shapes_per_family() {
        let f = Failure::bad_request("INVALID_EMAIL", "Invalid email");
        let auth = f.clone().into_response(Family::Auth);
        assert_eq!(auth.status(), StatusCode::BAD_REQUEST);
        assert_eq!(auth.headers()[header::CONTENT_TYPE], "application/json");
        let admin = f.into_response(Family::Admin);
        assert_eq!(admin.status(), StatusCode::BAD_REQUEST);
    }
}
