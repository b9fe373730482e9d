//! The HTTP front end: the accept loop, the router and the handlers.
//!
//! - [`request`]: reading bodies, cookies, the client address.
//! - [`response`]: answers, the two error shapes, the session cookie.
//! - [`session`]: the caller's session, checked against current state.
//! - [`auth`] and [`admin`]: the handlers, one short function per endpoint.
//! - [`dto`]: the JSON shapes.

mod admin;
mod auth;
mod connections;
pub mod dto;
pub mod limits;
mod ops;
pub mod origins;
pub mod request;
pub mod response;
mod session;

use std::convert::Infallible;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use self::origins::Origins;
use self::response::{Body, CookieSettings, Failure, Family};
use crate::actors::{Handles, Indexes};
use crate::domain::RoleSet;
use crate::hashing::Hasher;

/// How long shutdown waits for requests in flight.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);

/// Everything a handler needs, shared by all connections.
pub struct AppState {
    pub indexes: Arc<Indexes>,
    pub actors: Handles,
    pub hasher: Hasher,
    pub roles: RoleSet,
    pub cookies: CookieSettings,
    pub origins: Origins,
    pub trusted_proxies: Vec<IpAddr>,
    pub limits: limits::AddressLimits,
    /// Connection count and read timeouts.
    pub connection_limits: crate::config::LimitsConfig,
    /// For reading the audit log, which is not kept in memory.
    pub store: Arc<crate::store::Store>,
    /// A session used this long after its last refresh is extended.
    pub update_age: Duration,
    /// Work that must finish even when its request is gone (a sign-in's password check); shutdown waits for it.
    pub tasks: tokio_util::task::TaskTracker,
}

type State = AppState;

impl AppState {
    fn body_timeout(&self) -> Duration {
        Duration::from_secs(self.connection_limits.body_read_timeout_secs)
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

/// Accepts connections until `shutdown` is cancelled, then stops accepting and waits for the requests in flight.
pub async fn serve(listener: TcpListener, state: Arc<AppState>, shutdown: CancellationToken) {
    let graceful = GracefulShutdown::new();
    let limits = &state.connection_limits;
    // A slow-loris client (or an idle keep-alive one) is closed once this passes without complete headers.
    let mut builder = http1::Builder::new();
    builder.timer(TokioTimer::new()).header_read_timeout(Duration::from_secs(limits.header_read_timeout_secs));
    // Each connection holds a permit; at the cap we stop accepting and clients wait in the kernel's queue. No
    // address may hold more than its share, or one client could fill the cap and keep everyone else waiting.
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    let slots = connections::AddressSlots::new(limits.max_connections_per_address);
    let write_timeout = Duration::from_secs(limits.write_timeout_secs);
    loop {
        let permit = tokio::select! {
            permit = Arc::clone(&permits).acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break,
            },
            () = shutdown.cancelled() => break,
        };
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(conn) => conn,
                Err(error) => {
                    // Usually out of file descriptors: back off instead of spinning.
                    tracing::warn!(%error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = shutdown.cancelled() => break,
        };
        let Some(slot) = slots.take(peer.ip()) else {
            tracing::debug!(peer = %peer.ip(), "connection refused: the address holds its share of connections");
            drop(stream);
            continue;
        };
        let _ = stream.set_nodelay(true);
        let stream = connections::WriteTimeout::new(stream, write_timeout);
        let state = Arc::clone(&state);
        let service = service_fn(move |req| {
            let state = Arc::clone(&state);
            async move { Ok::<_, Infallible>(route(&state, peer.ip(), req).await) }
        });
        let connection = graceful.watch(builder.serve_connection(TokioIo::new(stream), service));
        tokio::spawn(async move {
            if let Err(error) = connection.await {
                tracing::debug!(%error, "connection ended with an error");
            }
            drop((permit, slot));
        });
    }
    drop(listener);
    if tokio::time::timeout(DRAIN_TIMEOUT, graceful.shutdown()).await.is_err() {
        tracing::warn!("requests still in flight after {DRAIN_TIMEOUT:?}; closing them");
    }
}

/// Every path and the methods it answers; anything else is 404, another method 405. The OpenAPI document is
/// checked against this list so that the two cannot drift.
pub const ROUTES: &[(&str, &[Method])] = &[
    ("/api/auth/sign-up/email", &[Method::POST]),
    ("/api/auth/sign-in/email", &[Method::POST]),
    ("/api/auth/get-session", &[Method::GET]),
    ("/api/auth/sign-out", &[Method::POST]),
    ("/api/admin/users", &[Method::GET, Method::PATCH]),
    ("/api/admin/organizations", &[Method::GET, Method::POST]),
    ("/api/admin/audit", &[Method::GET]),
    ("/api/openapi.json", &[Method::GET]),
    ("/healthz", &[Method::GET]),
    ("/readyz", &[Method::GET]),
];

pub use ops::OPENAPI;

/// Cross-site request forgery: a state-changing request that carries cookies is refused when the browser says
/// it comes from another site, or when its `Origin` is neither ours nor trusted. Requests without cookies, and
/// clients that send no `Origin` (curl, servers), are not affected: they cannot be riding a victim's session.
fn is_cross_site(state: &State, req: &Request<Incoming>, host: Option<&str>) -> bool {
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

/// Every answer, errors included, says that no browser may guess a type other than the one it declares.
async fn route(state: &State, peer: IpAddr, req: Request<Incoming>) -> Response<Body> {
    let mut response = dispatch(state, peer, req).await;
    response.headers_mut().insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    response
}

/// The routes: path, then method. A known path with another method is 405 with `Allow`.
async fn dispatch(state: &State, peer: IpAddr, req: Request<Incoming>) -> Response<Body> {
    let path = req.uri().path();
    let family = if path.starts_with("/api/admin/") { Family::Admin } else { Family::Auth };
    let Some(&(path, allowed)) = ROUTES.iter().find(|(p, _)| *p == path) else {
        return Failure::new(StatusCode::NOT_FOUND, "NOT_FOUND", "Not found").into_response(family);
    };
    if !allowed.contains(req.method()) {
        let allow = allowed.iter().map(Method::as_str).collect::<Vec<_>>().join(", ");
        let failure = Failure::new(StatusCode::METHOD_NOT_ALLOWED, "METHOD_NOT_ALLOWED", "Method not allowed")
            .with_header(header::ALLOW, HeaderValue::from_str(&allow).unwrap_or(HeaderValue::from_static("GET")));
        return failure.into_response(family);
    }
    let host = req.headers().get(header::HOST).cloned();
    if *req.method() != Method::GET && is_cross_site(state, &req, host.as_ref().and_then(|h| h.to_str().ok())) {
        let failure = Failure::new(StatusCode::FORBIDDEN, "INVALID_ORIGIN", "Invalid origin");
        return failure.into_response(family);
    }
    let ctx = Ctx { ip: request::client_ip(peer, req.headers(), &state.trusted_proxies), host };
    let method = req.method().clone();
    let result = match (path, method.clone()) {
        ("/api/auth/sign-up/email", _) => auth::sign_up(state, ctx, req).await,
        ("/api/auth/sign-in/email", _) => auth::sign_in(state, ctx, req).await,
        ("/api/auth/get-session", _) => auth::get_session(state, ctx, req).await,
        ("/api/auth/sign-out", _) => auth::sign_out(state, ctx, req).await,
        ("/api/admin/users", Method::GET) => admin::list_users(state, ctx, req).await,
        ("/api/admin/users", _) => admin::update_user(state, ctx, req).await,
        ("/api/admin/organizations", Method::GET) => admin::list_organizations(state, ctx, req).await,
        ("/api/admin/organizations", _) => admin::create_organization(state, ctx, req).await,
        ("/api/admin/audit", _) => admin::audit(state, ctx, req).await,
        ("/api/openapi.json", _) => Ok(ops::openapi()),
        ("/healthz", _) => Ok(ops::alive()),
        ("/readyz", _) => Ok(ops::ready(state)),
        _ => unreachable!("every path in `allowed` has an arm"),
    };
    let response = result.unwrap_or_else(|failure| {
        if failure.status.is_server_error() {
            tracing::warn!(status = %failure.status, code = failure.code, "request failed");
        }
        failure.into_response(family)
    });
    // Method, path and status only: headers and bodies carry cookies and passwords, and never reach a log.
    tracing::debug!(%method, path, status = response.status().as_u16(), "request");
    response
}

#[cfg(test)]
mod tests {
    use super::*;

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
