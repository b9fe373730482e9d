//! The physical limit for the benchmarks: a bare hyper server on the same runtime and settings as service-auth
//! (HTTP/1.1, tokio, TCP_NODELAY) that answers every request with a fixed JSON body.
//!
//! `cargo run --release --example bare_hyper -- 127.0.0.1:3901 640` listens there and answers 640 bytes (the size
//! of a get-session answer); `benches/load.sh` runs it beside the real server.
//!
//! A third argument `loops` serves connections the way service-auth does since its event loops: one
//! single-threaded runtime per core, each with its own listener on the port (`SO_REUSEPORT`), a connection staying
//! on one thread. Without it: the multi-threaded runtime, the yardstick of every earlier figure.

use std::convert::Infallible;
use std::net::SocketAddr;

use bytes::Bytes;
use http_body_util::Full;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Response, header};
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpSocket};

async fn serve(listener: TcpListener, body: Bytes) -> std::io::Result<()> {
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

fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let addr: SocketAddr = args.next().unwrap_or_else(|| "127.0.0.1:3901".into()).parse().expect("an address");
    let size: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(640);
    let loops = args.next().is_some_and(|a| a == "loops");
    let body = Bytes::from(format!("{{\"pad\":\"{}\"}}", "x".repeat(size.saturating_sub(10))));
    if !loops {
        let runtime = tokio::runtime::Runtime::new()?;
        return runtime.block_on(async {
            let listener = TcpListener::bind(addr).await?;
            println!("listening on {}", listener.local_addr()?);
            serve(listener, body).await
        });
    }
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    let threads: Vec<_> = (0..cores)
        .map(|_| {
            let body = body.clone();
            std::thread::spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
                runtime.block_on(async {
                    let socket = if addr.is_ipv4() { TcpSocket::new_v4()? } else { TcpSocket::new_v6()? };
                    socket.set_reuseport(true)?;
                    socket.set_reuseaddr(true)?;
                    socket.bind(addr)?;
                    serve(socket.listen(1024)?, body).await
                })
            })
        })
        .collect();
    println!("listening on {addr} ({cores} loops)");
    for thread in threads {
        thread.join().expect("a loop panicked")?;
    }
    Ok(())
}
