//! Operations routes: liveness (`/healthz`, and better-auth's `/api/auth/ok`), readiness and the OpenAPI document. No session needed; nothing secret in them.

use std::io::Read;
use std::sync::LazyLock;

use crate::accounts::NotReady;
use bytes::Bytes;
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::{Response, StatusCode};

use super::AppState;
use super::dto::{self, Health};
use super::response::{Body, json, ok};

/// The OpenAPI 3.1 document of this service (docs/openapi.json), gzip-compressed by build.rs: about 70 KB of the
/// binary instead of 1 MB (the release binary's size, README).
static OPENAPI_GZIP: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/openapi.json.gz"));

/// The document as kept in the repository, inflated on the first request that does not accept gzip (and kept:
/// a tool that asks once asks again).
static OPENAPI: LazyLock<Bytes> = LazyLock::new(|| {
    let mut text = Vec::with_capacity(OPENAPI_GZIP.len() * 16);
    flate2::read::GzDecoder::new(OPENAPI_GZIP)
        .read_to_end(&mut text)
        .expect("build.rs wrote docs/openapi.json as gzip");
    Bytes::from(text)
});

/// The OpenAPI document, as docs/openapi.json holds it.
pub fn openapi_text() -> &'static str {
    std::str::from_utf8(&OPENAPI).expect("docs/openapi.json is UTF-8")
}

/// `GET /api/openapi.json`: gzip-encoded for a client that accepts it (browsers, curl --compressed, schema
/// tools), as it is otherwise; the same document either way.
pub fn openapi(request: &HeaderMap) -> Response<Body> {
    let gzip = accepts_gzip(request);
    let body = if gzip { Bytes::from_static(OPENAPI_GZIP) } else { OPENAPI.clone() };
    let mut response = Response::new(Body::new(body));
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.append(header::VARY, HeaderValue::from_static("Accept-Encoding"));
    if gzip {
        headers.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    }
    response
}

/// Whether `Accept-Encoding` (RFC 9110, 12.5.3) accepts gzip: `gzip` or `x-gzip`, or else `*`, with a weight
/// above zero (none is 1). A weight that does not read counts as zero: the plain document always suits.
fn accepts_gzip(request: &HeaderMap) -> bool {
    let (mut named, mut any) = (None, None);
    let items = request.get_all(header::ACCEPT_ENCODING).iter().filter_map(|v| v.to_str().ok());
    for item in items.flat_map(|v| v.split(',')) {
        let mut parts = item.split(';');
        let coding = parts.next().unwrap_or_default().trim();
        let weight = parts.find_map(|p| p.split_once('=').filter(|(k, _)| k.trim().eq_ignore_ascii_case("q")));
        let accepted = weight.is_none_or(|(_, q)| q.trim().parse::<f32>().is_ok_and(|q| q > 0.0 && q <= 1.0));
        if coding.eq_ignore_ascii_case("gzip") || coding.eq_ignore_ascii_case("x-gzip") {
            named = Some(accepted);
        } else if coding == "*" {
            any = Some(accepted);
        }
    }
    named.or(any).unwrap_or(false)
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
