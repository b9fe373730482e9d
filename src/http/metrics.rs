//! The front end's metrics: per-route handles resolved at start, and the separate listener that serves them.

use std::convert::Infallible;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use hyper::header::{self, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use metrics::{Counter, Histogram, Label};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use super::response::Body;
use super::routes::ROUTES;
use crate::accounts::Accounts;
use crate::metrics::{self as names, Metrics};

/// The route label of a request whose path matches no route: never the raw path, which a client chooses.
const UNMATCHED: &str = "unmatched";
/// Statuses 100 to 599 each get a slot.
const STATUSES: usize = 500;

/// The handles of every route (the [`ROUTES`] index; the last one is [`UNMATCHED`]).
pub struct RouteMetrics {
    routes: Option<Box<[RouteHandles]>>,
}

struct RouteHandles {
    route: &'static str,
    duration: Histogram,
    rate_limited: Counter,
    /// One counter per status, registered the first time the route answers it.
    statuses: Box<[OnceLock<Counter>]>,
}

impl RouteMetrics {
    pub fn new(metrics: &Metrics) -> Self {
        if !metrics.enabled() {
            return Self { routes: None };
        }
        let patterns = ROUTES.iter().map(|(pattern, _)| *pattern).chain([UNMATCHED]);
        let routes = patterns
            .map(|route| RouteHandles {
                route,
                duration: metrics.histogram(names::HTTP_DURATION, vec![Label::from_static_parts("route", route)]),
                rate_limited: metrics.counter(names::RATE_LIMITED, vec![Label::from_static_parts("route", route)]),
                statuses: (0..STATUSES).map(|_| OnceLock::new()).collect(),
            })
            .collect();
        Self { routes: Some(routes) }
    }

    /// Whether anything is recorded (the router skips reading the clock otherwise).
    pub fn enabled(&self) -> bool {
        self.routes.is_some()
    }

    /// Counts one answer of route `index` (`None`: no route matched).
    pub fn observe(&self, metrics: &Metrics, index: Option<usize>, status: StatusCode, elapsed: Duration) {
        let Some(routes) = &self.routes else { return };
        let handles = &routes[index.unwrap_or(routes.len() - 1)];
        handles.duration.record(elapsed);
        if status == StatusCode::TOO_MANY_REQUESTS {
            handles.rate_limited.increment(1);
        }
        let code = status.as_u16();
        let Some(slot) = handles.statuses.get(usize::from(code).wrapping_sub(100)) else { return };
        let route = handles.route;
        let labels = || vec![Label::from_static_parts("route", route), Label::new("status", code.to_string())];
        slot.get_or_init(|| metrics.counter(names::HTTP_REQUESTS, labels())).increment(1);
    }
}

/// How often recorded latencies are folded into their buckets when nobody scrapes.
const UPKEEP_EVERY: Duration = Duration::from_secs(5);

/// Serves `GET /metrics` (and `HEAD`) on `listener` until `shutdown`; every other path is 404. No session and no
/// rate limit: this address is for the operator's network only.
///
/// At most `max_connections` at once, each a permit taken before `accept`: at the cap, further clients wait in the
/// kernel's queue, where they hold no file of ours. Without it, idle connections here took open files the public
/// port's cap had counted on, and `accept` failed on both ports. The public cap sets these aside
/// (`server::connection_budget`). An idle connection leaves after the header timeout, one that does not read its
/// answer after the write timeout, so no client holds a place for good.
///
/// It takes the facade, not the front end's state: that state holds this file's [`RouteMetrics`], and the two
/// files would import each other.
pub async fn serve_metrics(
    listener: TcpListener,
    max_connections: usize,
    accounts: Accounts,
    write_timeout: Duration,
    shutdown: CancellationToken,
) {
    let mut upkeep = tokio::time::interval(UPKEEP_EVERY);
    let mut builder = http1::Builder::new();
    builder.timer(TokioTimer::new()).header_read_timeout(Duration::from_secs(10));
    let permits = Arc::new(Semaphore::new(max_connections));
    loop {
        let permit = tokio::select! {
            () = shutdown.cancelled() => return,
            _ = upkeep.tick() => {
                accounts.metrics.upkeep();
                continue;
            }
            permit = Arc::clone(&permits).acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => return,
            },
        };
        let stream = loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                _ = upkeep.tick() => accounts.metrics.upkeep(),
                accepted = listener.accept() => match accepted {
                    Ok((stream, _)) => break stream,
                    Err(error) => {
                        tracing::warn!(%error, "metrics listener: accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                },
            }
        };
        let accounts = accounts.clone();
        let service = service_fn(move |req| {
            let answer = scrape(&accounts, &req);
            async move { Ok::<_, Infallible>(answer) }
        });
        let stream = super::connections::WriteTimeout::new(stream, write_timeout);
        let connection = builder.serve_connection(TokioIo::new(stream), service);
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = connection => {}
                () = shutdown.cancelled() => {}
            }
            drop(permit);
        });
    }
}

fn scrape(accounts: &Accounts, req: &Request<hyper::body::Incoming>) -> Response<Body> {
    let plain = |status: StatusCode, text: &'static str| {
        let mut response = Response::new(Body::new(Bytes::from_static(text.as_bytes())));
        *response.status_mut() = status;
        response
    };
    if req.uri().path() != "/metrics" {
        return plain(StatusCode::NOT_FOUND, "not found; metrics are at /metrics\n");
    }
    if req.method() != Method::GET && req.method() != Method::HEAD {
        let mut response = plain(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n");
        response.headers_mut().insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
        return response;
    }
    let metrics = &accounts.metrics;
    metrics.upkeep();
    let text = metrics.render(accounts.levels());
    let mut response = Response::new(Body::new(Bytes::from(text)));
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"));
    response
}
