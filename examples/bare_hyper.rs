//! The physical limit for the benchmarks: a bare hyper server on the same runtime and settings as service-auth
//! (HTTP/1.1, multi-threaded tokio, TCP_NODELAY) that answers every request with a fixed JSON body.
//!
//! `cargo run --release --example bare_hyper -- 127.0.0.1:3901 640` listens there and answers 640 bytes (the size
//! of a get-session answer); `benches/load.sh` runs it beside the real server.

use std::convert::Infallible;

use bytes::Bytes;
use http_body_util::Full;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Response, header};
use hyper_util::rt::TokioIo;

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:3901".into());
    let size: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(640);
    let body = Bytes::from(format!("{{\"pad\":\"{}\"}}", "x".repeat(size.saturating_sub(10))));
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    println!("listening on {}", listener.local_addr()?);
    loop {
        let (stream, _) = listener.accept().await?;
        let _ = stream.set_nodelay(true);
        let body = body.clone();
        let service = service_fn(move |_req| {
            let body = body.clone();
            async move {
                let mut response = Response::new(Full::new(body));
                response
                    .headers_mut()
                    .insert(header::CONTENT_TYPE, header::HeaderValue::from_static("application/json"));
                Ok::<_, Infallible>(response)
            }
        });
        tokio::spawn(async move {
            let _ = http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
        });
    }
}
