//! Cross-origin resource sharing for the configured `trusted_origins`, and for nobody else; except the identity
//! provider's few endpoints that applications' pages call with their tokens and no cookie (discovery, the JWKS,
//! token, userinfo, revocation, the device authorization request), which any origin may read ([`is_open`]).
//!
//! A browser application on another origin (say `https://app.example.com` calling `https://auth.example.com`)
//! can read our answers and send its JSON bodies only if we say so. We say so to the trusted origins alone, with
//! credentials (the session cookie), and always by echoing the one exact origin: a wildcard is both unsafe and,
//! with credentials, refused by browsers. Any other origin gets no `Access-Control-*` header at all, so the
//! browser keeps the answer from the page. The cross-site rule in the router (403 `INVALID_ORIGIN` for a
//! state-changing request with cookies from elsewhere) stays as it is: CORS only decides what a browser lets a
//! page see and send, never what the server accepts.

use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::{Method, Response, StatusCode};

use super::origins::Origins;
use super::response::Body;

/// How long a browser may reuse a preflight answer. Ten minutes: long enough that an application does not
/// preflight every call, short enough that removing an origin from `trusted_origins` takes effect soon after a
/// restart. (Chromium caps the value at two hours anyway.)
const MAX_AGE_SECS: &str = "600";

/// The request headers a page may send. The better-auth client sends `Content-Type: application/json` and no
/// other non-safelisted header; nothing else is read by this service.
const ALLOWED_HEADERS: &str = "Content-Type";

/// Answer headers a page may read besides the safelisted ones: the wait of a 429, which the better-auth client
/// reads from `X-Retry-After`.
const EXPOSED_HEADERS: &str = "Retry-After, X-Retry-After";

/// The identity provider's endpoints that an application's pages on any origin call without cookies (issue #46):
/// a single-page application reads the discovery document and the JWKS, redeems its code, refreshes and revokes
/// its tokens and asks userinfo, all with the tokens it holds (the bearer token in `Authorization`); an application
/// in a browser on a device without a keyboard (a TV's web app, a kiosk) starts the device grant (RFC 8628) with its
/// client id and polls the token endpoint. None of them reads the session cookie, so answering every origin lets a
/// page read only what its own tokens already give it; making each application's origin a trusted origin would
/// instead let it ride its users' sessions everywhere else. Introspection is left out: it is a confidential client's
/// (a resource server's) call, never a browser's; so are end-session, a navigation that reads the cookie, and the
/// device page's calls (`/oauth2/device`), which approve with the signed-in user's cookie.
const OPEN_PATHS: [&str; 8] = [
    "/api/auth/.well-known/openid-configuration",
    "/api/auth/.well-known/oauth-authorization-server",
    "/.well-known/oauth-authorization-server/api/auth",
    "/api/auth/jwks",
    "/api/auth/oauth2/token",
    "/api/auth/oauth2/userinfo",
    "/api/auth/oauth2/revoke",
    "/api/auth/oauth2/device_authorization",
];

/// What a page may send to an open endpoint: userinfo's bearer token besides a body's type.
const OPEN_ALLOWED_HEADERS: &str = "Authorization, Content-Type";

/// What a page may read of an open endpoint's answer: userinfo's challenge (RFC 6750 §3), besides the waits.
const OPEN_EXPOSED_HEADERS: &str = "WWW-Authenticate, Retry-After, X-Retry-After";

/// Whether `path` is one of the identity provider's endpoints open to any origin (see [`OPEN_PATHS`]).
pub fn is_open(path: &str) -> bool {
    OPEN_PATHS.contains(&path)
}

/// The request's `Origin`, when it is one of the trusted origins, exactly as the browser serialises it.
pub fn trusted_origin(origins: &Origins, headers: &HeaderMap) -> Option<HeaderValue> {
    let origin = headers.get(header::ORIGIN)?;
    origins.allows_cors(origin.to_str().ok()?).then(|| origin.clone())
}

/// The answer to `OPTIONS` on a known path: 204 with `Allow` (the route's, as a 405 shows it, and `OPTIONS`), and
/// for a trusted origin what its preflight needs. An untrusted origin gets the same 204 without any CORS header,
/// which the browser treats as a refusal; a 403 would refuse no more and would tell a prober which origins are
/// configured no less.
pub fn preflight(allowed: &[Method], allow: &HeaderValue, origin: Option<&HeaderValue>) -> Response<Body> {
    answer_preflight(allowed, allow, origin.is_some(), ALLOWED_HEADERS)
}

/// The preflight of an open endpoint ([`is_open`]), for any origin: its methods and `Authorization`.
pub fn preflight_open(allowed: &[Method], allow: &HeaderValue) -> Response<Body> {
    answer_preflight(allowed, allow, true, OPEN_ALLOWED_HEADERS)
}

fn answer_preflight(
    allowed: &[Method],
    allow: &HeaderValue,
    cors: bool,
    request_headers: &'static str,
) -> Response<Body> {
    let methods = allowed.iter().map(Method::as_str).collect::<Vec<_>>().join(", ");
    let mut response = Response::new(Body::default());
    *response.status_mut() = StatusCode::NO_CONTENT;
    let headers = response.headers_mut();
    let allow = format!("{}, OPTIONS", allow.to_str().unwrap_or_default());
    // Route methods are static tokens: always a valid header value.
    headers.insert(header::ALLOW, HeaderValue::from_str(&allow).unwrap_or(HeaderValue::from_static("OPTIONS")));
    if cors {
        let methods = HeaderValue::from_str(&methods).unwrap_or(HeaderValue::from_static("GET"));
        headers.insert(header::ACCESS_CONTROL_ALLOW_METHODS, methods);
        headers.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, HeaderValue::from_static(request_headers));
        headers.insert(header::ACCESS_CONTROL_MAX_AGE, HeaderValue::from_static(MAX_AGE_SECS));
    }
    response
}

/// Marks any answer (errors included, so that a page can read the error body) for a trusted origin. Every
/// answer says `Vary: Origin`, since it depends on the `Origin` header whether these headers are present.
pub fn decorate(response: &mut Response<Body>, origin: Option<HeaderValue>) {
    let headers = response.headers_mut();
    headers.append(header::VARY, HeaderValue::from_static("Origin"));
    if let Some(origin) = origin {
        headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
        headers.insert(header::ACCESS_CONTROL_ALLOW_CREDENTIALS, HeaderValue::from_static("true"));
        headers.insert(header::ACCESS_CONTROL_EXPOSE_HEADERS, HeaderValue::from_static(EXPOSED_HEADERS));
    }
}

/// Marks an open endpoint's answer ([`is_open`]) to an origin that is not trusted: any origin may read it, without
/// credentials (`*` with credentials is refused by browsers, and these endpoints read no cookie). A trusted origin
/// gets [`decorate`]'s answer instead, so that its credentialed calls keep working; hence `Vary: Origin` here too.
pub fn decorate_open(response: &mut Response<Body>) {
    let headers = response.headers_mut();
    headers.append(header::VARY, HeaderValue::from_static("Origin"));
    headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*"));
    headers.insert(header::ACCESS_CONTROL_EXPOSE_HEADERS, HeaderValue::from_static(OPEN_EXPOSED_HEADERS));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn origin_header(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::ORIGIN, HeaderValue::from_str(value).unwrap());
        headers
    }

    #[test]
    fn only_an_exact_trusted_origin_is_echoed() {
        let origins = Origins::new(Some("https://auth.example.com"), &["https://App.example.com:443".into()]);
        let trusted = trusted_origin(&origins, &origin_header("https://app.example.com"));
        assert_eq!(trusted.as_ref().map(|v| v.to_str().unwrap()), Some("https://app.example.com"));
        // Our own origin needs no CORS; a path, another port, scheme or host, `null` and user info are no match.
        for other in [
            "https://auth.example.com",
            "https://app.example.com/",
            "https://app.example.com:8443",
            "http://app.example.com",
            "https://app.example.com.evil.example",
            "null",
            "https://x@app.example.com",
        ] {
            assert_eq!(trusted_origin(&origins, &origin_header(other)), None, "{other}");
        }
        assert_eq!(trusted_origin(&origins, &HeaderMap::new()), None);
    }

    #[test]
    fn only_the_providers_cookieless_endpoints_are_open_and_they_allow_authorization() {
        for path in [
            "/api/auth/oauth2/token",
            "/api/auth/oauth2/userinfo",
            "/api/auth/jwks",
            "/api/auth/oauth2/device_authorization",
        ] {
            assert!(is_open(path), "{path}");
        }
        for path in [
            "/api/auth/get-session",
            "/api/auth/oauth2/consent",
            "/api/auth/oauth2/introspect",
            "/api/auth/oauth2/device",
            "/api/auth/oauth2/token/",
        ] {
            assert!(!is_open(path), "{path}");
        }
        let open = preflight_open(&[Method::GET, Method::POST], &HeaderValue::from_static("GET, POST, HEAD"));
        assert_eq!(open.headers()[header::ACCESS_CONTROL_ALLOW_HEADERS], "Authorization, Content-Type");
        let mut answer = Response::new(Body::default());
        decorate_open(&mut answer);
        assert_eq!(answer.headers()[header::ACCESS_CONTROL_ALLOW_ORIGIN], "*");
        assert!(answer.headers().get(header::ACCESS_CONTROL_ALLOW_CREDENTIALS).is_none());
    }

    #[test]
    fn preflight_lists_the_routes_methods_only_for_a_trusted_origin() {
        let origin = HeaderValue::from_static("https://app.example.com");
        let trusted =
            preflight(&[Method::GET, Method::PATCH], &HeaderValue::from_static("GET, PATCH, HEAD"), Some(&origin));
        assert_eq!(trusted.status(), StatusCode::NO_CONTENT);
        assert_eq!(trusted.headers()[header::ALLOW], "GET, PATCH, HEAD, OPTIONS");
        assert_eq!(trusted.headers()[header::ACCESS_CONTROL_ALLOW_METHODS], "GET, PATCH");
        assert_eq!(trusted.headers()[header::ACCESS_CONTROL_ALLOW_HEADERS], "Content-Type");
        assert_eq!(trusted.headers()[header::ACCESS_CONTROL_MAX_AGE], "600");
        let untrusted = preflight(&[Method::POST], &HeaderValue::from_static("POST"), None);
        assert_eq!(untrusted.status(), StatusCode::NO_CONTENT);
        assert!(untrusted.headers().keys().all(|name| !name.as_str().starts_with("access-control-")));
    }
}
