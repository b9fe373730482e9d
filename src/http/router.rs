//! The route table and dispatch: path, then method, then the family's handler. A known path with another method
//! is 405 with `Allow`, `OPTIONS` on a known path a CORS preflight; an unknown path 404. `HEAD` is answered for
//! every `GET` route: the same status and headers, no body. The OpenAPI document is checked against the table
//! (test below).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::LazyLock;
use std::time::Instant;

use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use tracing::Instrument;

use super::response::{Body, Failure, Family};
use super::{
    AppState, account, admin, admin_plugin, auth, console, cors, extract, ops, organizations, recovery, request_id,
};

/// Every path and the methods it answers. The OpenAPI document is checked against this list so that the two
/// cannot drift.
pub const ROUTES: &[(&str, &[Method])] = &[
    ("/api/auth/sign-up/email", &[Method::POST]),
    ("/api/auth/sign-in/email", &[Method::POST]),
    ("/api/auth/get-session", &[Method::GET]),
    ("/api/auth/sign-out", &[Method::POST]),
    ("/api/auth/change-password", &[Method::POST]),
    ("/api/auth/update-user", &[Method::POST]),
    ("/api/auth/list-sessions", &[Method::GET]),
    ("/api/auth/revoke-session", &[Method::POST]),
    ("/api/auth/revoke-sessions", &[Method::POST]),
    ("/api/auth/revoke-other-sessions", &[Method::POST]),
    ("/api/auth/delete-user", &[Method::POST]),
    ("/api/auth/request-password-reset", &[Method::POST]),
    ("/api/auth/reset-password/{token}", &[Method::GET]),
    ("/api/auth/reset-password", &[Method::POST]),
    ("/api/auth/send-verification-email", &[Method::POST]),
    ("/api/auth/verify-email", &[Method::GET]),
    ("/api/auth/admin/list-users", &[Method::GET]),
    ("/api/auth/admin/get-user", &[Method::GET]),
    ("/api/auth/admin/create-user", &[Method::POST]),
    ("/api/auth/admin/set-role", &[Method::POST]),
    ("/api/auth/admin/ban-user", &[Method::POST]),
    ("/api/auth/admin/unban-user", &[Method::POST]),
    ("/api/auth/admin/list-user-sessions", &[Method::POST]),
    ("/api/auth/admin/revoke-user-session", &[Method::POST]),
    ("/api/auth/admin/revoke-user-sessions", &[Method::POST]),
    ("/api/auth/admin/set-user-password", &[Method::POST]),
    ("/api/auth/admin/remove-user", &[Method::POST]),
    ("/api/auth/admin/has-permission", &[Method::POST]),
    ("/api/auth/admin/update-user", &[Method::POST]),
    ("/api/auth/admin/impersonate-user", &[Method::POST]),
    ("/api/auth/admin/stop-impersonating", &[Method::POST]),
    ("/api/admin/users", &[Method::GET, Method::PATCH]),
    ("/api/admin/organizations", &[Method::GET, Method::POST]),
    ("/api/admin/organizations/{id}", &[Method::GET, Method::PATCH, Method::DELETE]),
    ("/api/admin/organizations/{id}/members", &[Method::GET]),
    ("/api/admin/audit", &[Method::GET]),
    ("/api/admin/status", &[Method::GET]),
    ("/api/openapi.json", &[Method::GET]),
    ("/api/auth/ok", &[Method::GET]),
    ("/healthz", &[Method::GET]),
    ("/readyz", &[Method::GET]),
    ("/admin/", &[Method::GET]),
    ("/admin/{asset}", &[Method::GET]),
];

/// Whether `path` is `route`, where a `{name}` segment of the route stands for any one non-empty segment.
fn matches(route: &str, path: &str) -> bool {
    let (mut want, mut got) = (route.split('/'), path.split('/'));
    loop {
        match (want.next(), got.next()) {
            (None, None) => return true,
            (Some(w), Some(g)) if w.starts_with('{') && w.ends_with('}') => {
                if g.is_empty() {
                    return false;
                }
            }
            (Some(w), Some(g)) if w == g => {}
            _ => return false,
        }
    }
}

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

/// Cross-site request forgery: a state-changing request that carries cookies is refused when the browser says
/// it comes from another site, or when its `Origin` is neither ours nor trusted. Requests without cookies, and
/// clients that send no `Origin` (curl, servers), are not affected: they cannot be riding a victim's session.
fn is_cross_site(state: &AppState, req: &Request<Incoming>, host: Option<&str>) -> bool {
    let headers = req.headers();
    if !headers.contains_key(header::COOKIE) {
        return false;
    }
    let fetch_site = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok());
    if fetch_site.is_some_and(|v| v.eq_ignore_ascii_case("cross-site")) {
        return true;
    }
    match headers.get(header::ORIGIN).map(|v| v.to_str()) {
        None => false,
        Some(Ok(origin)) => !state.origins.is_trusted(origin, host),
        Some(Err(_)) => true,
    }
}

/// Every answer, errors included, says that no browser may guess a type other than the one it declares, carries
/// the CORS headers when it answers a trusted origin, and carries the request's id, which every log line while it
/// runs has too (a span).
pub(super) async fn route(state: &AppState, peer: IpAddr, mut req: Request<Incoming>) -> Response<Body> {
    let id = state.request_ids.for_request(peer, req.headers(), &state.trusted_proxies);
    let span = tracing::info_span!("request", request_id = id.to_str().unwrap_or_default());
    let body = extract::BodyRead::track(&mut req);
    let mut response = answer(state, peer, req).instrument(span).await;
    response.headers_mut().insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    response.headers_mut().insert(request_id::HEADER.clone(), id);
    // A body not read to its end (an answer given before it was needed, or one too large or too slow) leaves
    // the connection unusable: hyper closes it after this answer, unless the rest happened to have arrived
    // already, and decides so only once the head is written. Said here, the client knows not to send its next
    // request on it (without this, that request met a closed connection: a broken pipe).
    if body.is_some_and(|b| !b.finished()) {
        response.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

async fn answer(state: &AppState, peer: IpAddr, req: Request<Incoming>) -> Response<Body> {
    let head = req.method() == Method::HEAD;
    let client = extract::client_ip(peer, req.headers(), &state.trusted_proxies);
    let origin = cors::trusted_origin(&state.origins, req.headers());
    // The clock is read, and the method kept, only when something records them.
    let started = (state.route_metrics.enabled() || state.access_log).then(Instant::now);
    let method = state.access_log.then(|| req.method().clone());
    let (route, mut response) = dispatch(state, client, req, origin.as_ref()).await;
    if let Some(started) = started {
        let elapsed = started.elapsed();
        state.route_metrics.observe(&state.accounts.metrics, route, response.status(), elapsed);
        if let Some(method) = method {
            // Method, route pattern, status, time, client: never a header value, a cookie, a token or a body.
            let route = route.map_or("unmatched", |i| ROUTES[i].0);
            tracing::info!(
                target: "access",
                %method,
                route,
                status = response.status().as_u16(),
                duration_ms = elapsed.as_secs_f64() * 1000.0,
                client = %client,
                "request"
            );
        }
    }
    cors::decorate(&mut response, origin);
    if head {
        strip_body(&mut response);
    }
    response
}

/// A `HEAD` answer: the `GET` answer's status and headers, with the length the body would have had.
fn strip_body(response: &mut Response<Body>) {
    if let Some(length) = hyper::body::Body::size_hint(response.body()).exact() {
        response.headers_mut().insert(header::CONTENT_LENGTH, HeaderValue::from(length));
    }
    *response.body_mut() = Body::default();
}

/// Index into [`ROUTES`] of the route `path` matches: a fixed path through a map built once, else the first
/// templated route that matches. Every request asks; scanning the table segment by segment showed in the profile.
pub(super) fn find_route(path: &str) -> Option<usize> {
    static FIXED: LazyLock<HashMap<&str, usize, foldhash::fast::RandomState>> = LazyLock::new(|| {
        ROUTES.iter().enumerate().filter(|(_, (p, _))| !is_templated(p)).map(|(i, (p, _))| (*p, i)).collect()
    });
    if let Some(&index) = FIXED.get(path) {
        return Some(index);
    }
    ROUTES.iter().position(|(p, _)| is_templated(p) && matches(p, path))
}

fn is_templated(route: &str) -> bool {
    route.contains('{')
}

/// The `Allow` header of a route: its methods, and `HEAD` wherever `GET` is allowed.
fn allow_header(allowed: &[Method]) -> HeaderValue {
    let mut methods: Vec<&str> = allowed.iter().map(Method::as_str).collect();
    if allowed.contains(&Method::GET) {
        methods.push("HEAD");
    }
    HeaderValue::from_str(&methods.join(", ")).unwrap_or(HeaderValue::from_static("GET"))
}

/// The routes: path, then method. A known path with another method is 405 with `Allow`; `OPTIONS` on a known path
/// is a CORS preflight (or a question about the methods): see [`cors::preflight`]. Returns the index of the
/// matched route (for the metrics) with the answer.
async fn dispatch(
    state: &AppState,
    client: IpAddr,
    mut req: Request<Incoming>,
    origin: Option<&HeaderValue>,
) -> (Option<usize>, Response<Body>) {
    let path = req.uri().path();
    let family = if path.starts_with("/api/admin/") { Family::Admin } else { Family::Auth };
    let Some(index) = find_route(path) else {
        return (None, Failure::new(StatusCode::NOT_FOUND, "NOT_FOUND", "Not found").into_response(family));
    };
    let (path, allowed) = ROUTES[index];
    if req.method() == Method::OPTIONS {
        return (Some(index), cors::preflight(allowed, &allow_header(allowed), origin));
    }
    // HEAD runs the GET handler; `route` drops the body. Nothing a GET handler does changes state.
    if req.method() == Method::HEAD && allowed.contains(&Method::GET) {
        *req.method_mut() = Method::GET;
    }
    if !allowed.contains(req.method()) {
        let failure = Failure::new(StatusCode::METHOD_NOT_ALLOWED, "METHOD_NOT_ALLOWED", "Method not allowed")
            .with_header(header::ALLOW, allow_header(allowed));
        return (Some(index), failure.into_response(family));
    }
    let host = req.headers().get(header::HOST).cloned();
    if *req.method() != Method::GET && is_cross_site(state, &req, host.as_ref().and_then(|h| h.to_str().ok())) {
        let failure = Failure::new(StatusCode::FORBIDDEN, "INVALID_ORIGIN", "Invalid origin");
        return (Some(index), failure.into_response(family));
    }
    let ctx = Ctx { ip: client, host };
    let method = req.method().clone();
    let result = match (path, method.clone()) {
        ("/api/auth/sign-up/email", _) => auth::sign_up(state, ctx, req).await,
        ("/api/auth/sign-in/email", _) => auth::sign_in(state, ctx, req).await,
        ("/api/auth/get-session", _) => auth::get_session(state, ctx, req).await,
        ("/api/auth/sign-out", _) => auth::sign_out(state, ctx, req).await,
        ("/api/auth/change-password", _) => account::change_password(state, ctx, req).await,
        ("/api/auth/update-user", _) => account::update_user(state, ctx, req).await,
        ("/api/auth/list-sessions", _) => account::list_sessions(state, ctx, req).await,
        ("/api/auth/revoke-session", _) => account::revoke_session(state, ctx, req).await,
        ("/api/auth/revoke-sessions", _) => account::revoke_sessions(state, ctx, req).await,
        ("/api/auth/revoke-other-sessions", _) => account::revoke_other_sessions(state, ctx, req).await,
        ("/api/auth/delete-user", _) => account::delete_user(state, ctx, req).await,
        ("/api/auth/request-password-reset", _) => recovery::request_password_reset(state, ctx, req).await,
        ("/api/auth/reset-password/{token}", _) => recovery::follow_reset_link(state, ctx, req).await,
        ("/api/auth/reset-password", _) => recovery::reset_password(state, ctx, req).await,
        ("/api/auth/send-verification-email", _) => recovery::send_verification_email(state, ctx, req).await,
        ("/api/auth/verify-email", _) => recovery::verify_email(state, ctx, req).await,
        ("/api/auth/admin/list-users", _) => admin_plugin::list_users(state, ctx, req).await,
        ("/api/auth/admin/get-user", _) => admin_plugin::get_user(state, ctx, req).await,
        ("/api/auth/admin/create-user", _) => admin_plugin::create_user(state, ctx, req).await,
        ("/api/auth/admin/set-role", _) => admin_plugin::set_role(state, ctx, req).await,
        ("/api/auth/admin/ban-user", _) => admin_plugin::ban_user(state, ctx, req).await,
        ("/api/auth/admin/unban-user", _) => admin_plugin::unban_user(state, ctx, req).await,
        ("/api/auth/admin/list-user-sessions", _) => admin_plugin::list_user_sessions(state, ctx, req).await,
        ("/api/auth/admin/revoke-user-session", _) => admin_plugin::revoke_user_session(state, ctx, req).await,
        ("/api/auth/admin/revoke-user-sessions", _) => admin_plugin::revoke_user_sessions(state, ctx, req).await,
        ("/api/auth/admin/set-user-password", _) => admin_plugin::set_user_password(state, ctx, req).await,
        ("/api/auth/admin/remove-user", _) => admin_plugin::remove_user(state, ctx, req).await,
        ("/api/auth/admin/has-permission", _) => admin_plugin::has_permission(state, ctx, req).await,
        ("/api/auth/admin/update-user", _) => admin_plugin::update_user(state, ctx, req).await,
        ("/api/auth/admin/impersonate-user", _) => admin_plugin::impersonate_user(state, ctx, req).await,
        ("/api/auth/admin/stop-impersonating", _) => admin_plugin::stop_impersonating(state, ctx, req).await,
        ("/api/admin/users", Method::GET) => admin::list_users(state, ctx, req).await,
        ("/api/admin/users", _) => admin::update_user(state, ctx, req).await,
        ("/api/admin/organizations", Method::GET) => organizations::list(state, ctx, req).await,
        ("/api/admin/organizations", _) => organizations::create(state, ctx, req).await,
        ("/api/admin/organizations/{id}", Method::GET) => organizations::get(state, ctx, req).await,
        ("/api/admin/organizations/{id}", Method::PATCH) => organizations::update(state, ctx, req).await,
        ("/api/admin/organizations/{id}", _) => organizations::delete(state, ctx, req).await,
        ("/api/admin/organizations/{id}/members", _) => organizations::members(state, ctx, req).await,
        ("/api/admin/audit", _) => admin::audit(state, ctx, req).await,
        ("/api/admin/status", _) => console::status(state, ctx, req).await,
        ("/api/openapi.json", _) => Ok(ops::openapi()),
        ("/api/auth/ok", _) => Ok(ops::auth_ok()),
        ("/healthz", _) => Ok(ops::alive()),
        ("/readyz", _) => Ok(ops::ready(state)),
        ("/admin/" | "/admin/{asset}", _) => console::asset(&req),
        _ => unreachable!("every path in `allowed` has an arm"),
    };
    if path == "/api/auth/sign-in/email" && state.route_metrics.enabled() {
        let outcome = result.as_ref().map_or_else(|failure| failure.code, |_| "success");
        state.accounts.metrics.sign_in(outcome).increment(1);
    }
    let response = result.unwrap_or_else(|failure| {
        if failure.status.is_server_error() {
            tracing::warn!(%method, route = path, status = %failure.status, code = failure.code, "request failed");
        }
        failure.into_response(family)
    });
    (Some(index), response)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templated_routes_match_one_segment() {
        assert!(matches("/api/auth/reset-password/{token}", "/api/auth/reset-password/abc"));
        assert!(!matches("/api/auth/reset-password/{token}", "/api/auth/reset-password/"));
        assert!(!matches("/api/auth/reset-password/{token}", "/api/auth/reset-password/a/b"));
        assert!(!matches("/api/auth/reset-password/{token}", "/api/auth/reset-password"));
        assert!(matches("/api/auth/sign-out", "/api/auth/sign-out"));
    }

    /// The map finds what scanning the table in order finds: no fixed path is also matched by an earlier template.
    #[test]
    fn find_route_agrees_with_the_table_scan() {
        let scan = |path: &str| ROUTES.iter().position(|(p, _)| matches(p, path));
        let mut probes: Vec<String> =
            ROUTES.iter().map(|(p, _)| p.replace("{token}", "t").replace("{id}", "x")).collect();
        probes.extend(
            ["/", "", "/admin", "/admin/", "/admin/app.js", "/api/auth/get-session/", "/API/auth/ok"].map(String::from),
        );
        probes.extend(ROUTES.iter().map(|(p, _)| p.replace(['{', '}'], "")));
        for path in &probes {
            assert_eq!(find_route(path), scan(path), "{path}");
        }
    }
    use crate::http::OPENAPI;

    /// The OpenAPI document lists exactly the routes the router answers, so the two cannot drift apart.
    #[test]
    fn the_openapi_document_matches_the_routes() {
        let doc: serde_json::Value = serde_json::from_str(OPENAPI).expect("docs/openapi.json is JSON");
        let mut documented: Vec<(String, String)> = doc["paths"]
            .as_object()
            .expect("paths")
            .iter()
            .flat_map(|(path, ops)| ops.as_object().unwrap().keys().map(move |m| (path.clone(), m.to_uppercase())))
            .collect();
        let mut served: Vec<(String, String)> = ROUTES
            .iter()
            .flat_map(|(path, methods)| methods.iter().map(move |m| (path.to_string(), m.as_str().to_owned())))
            .collect();
        documented.sort();
        served.sort();
        assert_eq!(documented, served);
        for (path, ops) in doc["paths"].as_object().unwrap() {
            for (method, op) in ops.as_object().unwrap() {
                let codes: Vec<&String> = op["responses"].as_object().unwrap().keys().collect();
                assert!(codes.iter().any(|c| c.starts_with('2')), "{method} {path} documents no success");
                assert!(codes.iter().any(|c| *c == "405"), "{method} {path} does not document 405");
            }
        }
    }
}
