//! The physical limit for durable writes: a bare hyper server, with the settings of `bare_hyper.rs` (HTTP/1.1,
//! tokio, TCP_NODELAY), that makes each request's body durable before it answers, one `fdatasync` shared by every
//! write waiting (group commit), and nothing else: no parsing, no lookup, no index.
//!
//! `cargo run --release --example group_commit -- 127.0.0.1:3934 /tmp/anchor/log 640` listens there, appends each
//! request's body to that file and answers 640 bytes once the body is on the disk. A fourth argument `loops`
//! serves connections the way service-auth does (one single-threaded runtime per core, `SO_REUSEPORT`), as in
//! `bare_hyper.rs`. `benches/curves.sh` (writes) and BENCHMARKS.md measure update-user against it.
//!
//! The committer is one thread: it takes every write waiting, appends them with one `write`, calls `fdatasync`
//! once and then wakes their requests, so that the writes arriving during a sync wait for the next one and share
//! it. That is what a store's group commit can at best do on this disk.

use std::convert::Infallible;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::net::SocketAddr;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Response, StatusCode, header};
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpSocket};
use tokio::sync::{mpsc, oneshot};

/// A write waiting for the disk: its bytes and whom to wake once they are durable.
type Pending = (Bytes, oneshot::Sender<()>);

/// Appends every write waiting in one `write`, one `fdatasync` for all of them, then answers them all.
fn committer(mut file: File, mut rx: mpsc::UnboundedReceiver<Pending>) {
    let mut batch: Vec<Pending> = Vec::new();
    let mut buffer = Vec::new();
    while let Some(first) = rx.blocking_recv() {
        batch.push(first);
        while let Ok(more) = rx.try_recv() {
            batch.push(more);
        }
        buffer.clear();
        for (bytes, _) in &batch {
            buffer.extend_from_slice(bytes);
            buffer.push(b'\n');
        }
        file.write_all(&buffer).expect("append to the log");
        file.sync_data().expect("fdatasync");
        for (_, done) in batch.drain(..) {
            let _ = done.send(());
        }
    }
}

async fn serve(listener: TcpListener, body: Bytes, log: mpsc::UnboundedSender<Pending>) -> std::io::Result<()> {
    loop {
        let (stream, _) = listener.accept().await?;
        let _ = stream.set_nodelay(true);
        let body = body.clone();
        let log = log.clone();
        let service = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
            let body = body.clone();
            let log = log.clone();
            async move {
                let bytes = match req.into_body().collect().await {
                    Ok(collected) => collected.to_bytes(),
                    Err(_) => Bytes::new(),
                };
                let (done, durable) = oneshot::channel();
                let mut response = if log.send((bytes, done)).is_ok() && durable.await.is_ok() {
                    Response::new(Full::new(body))
                } else {
                    let mut failed = Response::new(Full::new(Bytes::new()));
                    *failed.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
                    failed
                };
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
    let addr: SocketAddr = args.next().unwrap_or_else(|| "127.0.0.1:3934".into()).parse().expect("an address");
    let path = args.next().unwrap_or_else(|| "group-commit.log".into());
    let size: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(640);
    let loops = args.next().is_some_and(|a| a == "loops");
    let body = Bytes::from(format!("{{\"pad\":\"{}\"}}", "x".repeat(size.saturating_sub(10))));
    let file = OpenOptions::new().create(true).append(true).open(&path)?;
    let (log, rx) = mpsc::unbounded_channel();
    std::thread::Builder::new().name("committer".into()).spawn(move || committer(file, rx))?;
    if !loops {
        let runtime = tokio::runtime::Runtime::new()?;
        return runtime.block_on(async {
            let listener = TcpListener::bind(addr).await?;
            println!("listening on {}", listener.local_addr()?);
            serve(listener, body, log).await
        });
    }
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    let threads: Vec<_> = (0..cores)
        .map(|_| {
            let body = body.clone();
            let log = log.clone();
            std::thread::spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
                runtime.block_on(async {
                    let socket = if addr.is_ipv4() { TcpSocket::new_v4()? } else { TcpSocket::new_v6()? };
                    socket.set_reuseport(true)?;
                    socket.set_reuseaddr(true)?;
                    socket.bind(addr)?;
                    serve(socket.listen(1024)?, body, log).await
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
