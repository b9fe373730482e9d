//! The HTTP front end. It knows requests and answers; everything else it asks of the [`crate::accounts`] facade.
//!
//! - [`routes`]: the route table, each route named once with its methods and endpoints; [`router`]: dispatch
//!   from an endpoint to its handler, the cross-site rule, the access log.
//! - [`state`]: what every handler shares.
//! - [`fields`]: the fields several families read the same way (name, image, redirect target, ban reason and end).
//! - [`extract`]: reading requests (body, fields, cookie, client address, the per-request [`extract::Ctx`]) and the
//!   administrator guard.
//! - [`response`] and [`errors`]: answers, the two error shapes, the session cookie; one `From` per error enum.
//! - The route families, each a file of short handlers: [`auth`], [`account`] (a user's own password, profile,
//!   sessions and deletion), [`recovery`] (links sent by mail), [`passkeys`] (WebAuthn, as `@better-auth/passkey`), [`admin_plugin`] (the better-auth admin plugin's calls),
//!   [`admin`] (users and the audit log),
//!   [`organizations`], [`ops`] (health, readiness, the OpenAPI document), [`console`] (the administration
//!   console's embedded files at `/admin/` and its status panel's numbers).
//! - [`metrics`]: per-route request metrics, and the separate listener that serves `GET /metrics`.
//! - [`connections`], [`rate_limits`], [`origins`]: what one client may hold, send and be trusted with;
//!   [`cors`]: what a browser page on a trusted origin may read and send.
//! - [`request_id`]: the id on every log line of a request, and in its answer.
//! - [`event_loops`]: the single-threaded runtimes, one per core, that connections are served on.

mod account;
mod admin;
mod admin_plugin;
mod api_keys;
mod audit_export;
mod auth;
mod connections;
mod consents;
mod console;
mod cors;
pub mod dto;
mod embedded;
mod errors;
mod event_loops;
mod export;
pub mod extract;
mod fields;
mod metrics;
mod oauth;
mod ops;
mod org_plugin;
mod org_roles;
mod org_teams;
mod organizations;
pub mod origins;
mod overview;
mod pages;
mod passkeys;
mod provider;
pub mod rate_limits;
mod recovery;
mod refused_origins;
mod request_id;
pub mod response;
mod router;
mod routes;
mod saml;
mod scim;
mod setup;
mod sso;
mod sso_sign_in;
mod state;
mod two_factor;
mod user_admin;
mod way_in;
mod webhooks;

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

pub use metrics::serve_metrics;
pub use ops::openapi_text;
pub use pages::{ACCOUNT_PATH, CONSOLE_PATH};
pub use routes::ROUTES;
pub use state::AppState;

/// How long shutdown waits for requests in flight.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);

/// Accepts connections until `shutdown` is cancelled, then stops accepting and waits for the requests in flight.
pub async fn serve(listener: TcpListener, state: Arc<AppState>, shutdown: CancellationToken) {
    let graceful = GracefulShutdown::new();
    let limits = &state.connections;
    // A slow-loris client (or an idle keep-alive one) is closed once this passes without complete headers: by
    // `connections::HeaderTimeout`, not hyper's timer (see there why).
    let header_timeout = Duration::from_secs(limits.header_read_timeout_secs);
    let mut builder = http1::Builder::new();
    builder.header_read_timeout(None);
    // Each connection holds a permit; at the cap we stop accepting and clients wait in the kernel's queue. No
    // address may hold more than its share, or one client could fill the cap and keep everyone else waiting.
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    let slots = connections::AddressSlots::new(limits.max_connections_per_address);
    let write_timeout = Duration::from_secs(limits.write_timeout_secs);
    let loops = match event_loops::EventLoops::start(limits.io_threads) {
        Ok(loops) => loops,
        Err(error) => {
            tracing::error!(%error, "cannot start the event loops that serve connections");
            return;
        }
    };
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
        let state = Arc::clone(&state);
        let (builder, watcher) = (builder.clone(), graceful.watcher());
        let placed = loops.place(stream, move |stream, place| async move {
            let waiting = connections::Waiting::new();
            let stream = connections::WriteTimeout::new(stream, write_timeout);
            let stream = connections::HeaderTimeout::new(stream, Arc::clone(&waiting), header_timeout);
            let service = service_fn(move |req| {
                waiting.served();
                let (state, waiting) = (Arc::clone(&state), Arc::clone(&waiting));
                async move {
                    let answer = router::route(&state, peer.ip(), req).await;
                    waiting.answered();
                    Ok::<_, Infallible>(answer)
                }
            });
            let connection = watcher.watch(builder.serve_connection(TokioIo::new(stream), service));
            if let Err(error) = connection.await {
                tracing::debug!(%error, "connection ended with an error");
            }
            drop((permit, slot, place));
        });
        if let Err(error) = placed {
            tracing::debug!(%error, "could not hand a connection to an event loop");
        }
    }
    drop(listener);
    if tokio::time::timeout(DRAIN_TIMEOUT, graceful.shutdown()).await.is_err() {
        tracing::warn!("requests still in flight after {DRAIN_TIMEOUT:?}; closing them");
    }
    loops.stop().await;
}

#[cfg(test)]
mod tests {
    /// The front end speaks to the rest of the server only through the [`crate::accounts`] facade: a file of
    /// `http/` that names the actors, the store or the operations reaches around it (and would grow a second way
    /// in for every new family).
    #[test]
    fn the_front_end_names_only_the_facade() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/http");
        let mut files = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            files += 1;
            let text = std::fs::read_to_string(&path).unwrap();
            // Spelt in two parts, so that this file does not name them either.
            for module in ["actors", "store", "ops"] {
                let forbidden = format!("crate::{module}");
                assert!(!text.contains(&forbidden), "{} names {forbidden}", path.display());
            }
        }
        assert!(files > 10, "read the front end's files");
    }
}
