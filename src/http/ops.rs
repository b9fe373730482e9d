//! Operations routes: liveness (`/healthz`, and better-auth's `/api/auth/ok`), readiness and the OpenAPI document. No session needed; nothing secret in them.

use crate::accounts::NotReady;
use bytes::Bytes;
use hyper::header::{self, HeaderValue};
use hyper::{Response, StatusCode};

use super::AppState;
use super::dto::{self, Health};
use super::response::{Body, json, ok};

/// The OpenAPI 3.1 document of this service, as kept in the repository.
pub const OPENAPI: &str = include_str!("../../docs/openapi.json");

pub fn openapi() -> Response<Body> {
    let mut response = Response::new(Body::new(Bytes::from_static(OPENAPI.as_bytes())));
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

/// `GET /api/auth/ok`: better-auth's own liveness call, for clients and monitors written against the library.
pub fn auth_ok() -> Response<Body> {
    ok(&dto::Ok { ok: true })
}

/// `GET /healthz`: the process runs and answers.
pub fn alive() -> Response<Body> {
    ok(&Health { reason: None, status: "alive" })
}

/// `GET /readyz`: 200 while the store accepts commits; 503 with the reason while it refuses them (after a disk
/// error, until it has reopened), so a load balancer sends writes elsewhere meanwhile. Several nodes: also 503
/// once the follower has not reached the database for two seconds, whether or not anything was written.
pub fn ready(state: &AppState) -> Response<Body> {
    match state.accounts.readiness() {
        Ok(()) => ok(&Health { reason: None, status: "ready" }),
        // A fixed text: the endpoint is public, and the error itself (paths, OS messages) is in the server's log.
        Err(not_ready) => {
            let reason = match not_ready {
                NotReady::Writes(_) => {
                    "the store refuses writes after a disk or database error; it retries every second"
                }
                NotReady::Stale(_) => {
                    "this node has not heard from the shared database for over two seconds; once that lasts \
                     store.max_staleness_secs its session checks are refused, until it has caught up"
                }
            };
            json(StatusCode::SERVICE_UNAVAILABLE, &Health { reason: Some(reason), status: "unavailable" })
        }
    }
}
