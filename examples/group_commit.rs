//! The physical limit for durable writes: a bare hyper server, with the settings of `bare_hyper.rs` (HTTP/1.1,
//! tokio, TCP_NODELAY), that makes each write durable before it answers, one `fdatasync` shared by every write
//! waiting (group commit), and nothing else: no parsing, no lookup, no index.
//!
//! `cargo run --release --example group_commit -- 127.0.0.1:3934 /tmp/anchor/log 640` listens there. A `GET` is a
//! read: answered at once with 640 bytes, as `bare_hyper.rs` answers. Any other request is a write: its body is
//! written to that file and it is answered `{"status":true}` (update-user's answer) once the body is on the disk.
//! So a mix of reads and writes has an anchor too. A fourth argument `loops` serves connections the way
//! service-auth does (one single-threaded runtime per core, `SO_REUSEPORT`), as in `bare_hyper.rs`.
//! `benches/durable_writes.sh` and `benches/curves.sh` (writes) measure service-auth against it (BENCHMARKS.md).
//!
//! The committer is one thread: it takes every write waiting, writes them with one `write`, calls `fdatasync`
//! once and then wakes their requests, so that the writes arriving during a sync wait for the next one and share
//! it. That is what a store's group commit can at best do on this disk. The file is written full of zeros once at
//! start and then overwritten in a ring, never grown: a growing file makes every `fdatasync` also commit the new
//! size through the file system's journal, which a store writing into pages it already has does not pay, and the
//! anchor is the limit, not a second store. `GET /syncs` answers `<syncs> <writes> <µs>` (totals so far; µs spent
//! writing and syncing), so a harness can tell how many writes shared a sync and what one took.

use std::convert::Infallible;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::net::SocketAddr;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Instant;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Response, StatusCode, header};
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpSocket};
use tokio::sync::{mpsc, oneshot};

/// A write waiting for the disk: its bytes and whom to wake once they are durable.
type Pending = (Bytes, oneshot::Sender<()>);

/// Syncs, writes made durable and µs spent writing and syncing, so far: `GET /syncs`.
static SYNCS: [AtomicU64; 3] = [AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)];

/// The ring the writes go to: far more than one batch (at most the writes of every connection, a few KB).
const RING: u64 = 64 << 20;

/// Writes every write waiting with one `write`, one `fdatasync` for all of them, then answers them all.
fn committer(file: File, mut rx: mpsc::UnboundedReceiver<Pending>) {
    let mut batch: Vec<Pending> = Vec::new();
    let mut buffer = Vec::new();
    let mut at = 0u64;
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
        let started = Instant::now();
        if at + buffer.len() as u64 > RING {
            at = 0;
        }
        file.write_all_at(&buffer, at).expect("write to the log");
        at += buffer.len() as u64;
        file.sync_data().expect("fdatasync");
        for (total, add) in SYNCS.iter().zip([1, batch.len() as u64, started.elapsed().as_micros() as u64]) {
            total.fetch_add(add, Relaxed);
        }
        for (_, done) in batch.drain(..) {
            let _ = done.send(());
        }
    }
}

fn answer(body: Bytes) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body));
    response.headers_mut().insert(header::CONTENT_TYPE, header::HeaderValue::from_static("application/json"));
    response
}

async fn serve(listener: TcpListener, read: Bytes, log: mpsc::UnboundedSender<Pending>) -> std::io::Result<()> {
    loop {
        let (stream, _) = listener.accept().await?;
        let _ = stream.set_nodelay(true);
        let read = read.clone();
        let log = log.clone();
        let service = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
            let read = read.clone();
            let log = log.clone();
            async move {
                if req.method() == Method::GET {
                    if req.uri().path() == "/syncs" {
                        let [syncs, writes, micros] = SYNCS.each_ref().map(|total| total.load(Relaxed));
                        return Ok::<_, Infallible>(answer(Bytes::from(format!("{syncs} {writes} {micros}\n"))));
                    }
                    return Ok(answer(read));
                }
                let bytes = match req.into_body().collect().await {
                    Ok(collected) => collected.to_bytes(),
                    Err(_) => Bytes::new(),
                };
                let (done, durable) = oneshot::channel();
                if log.send((bytes, done)).is_ok() && durable.await.is_ok() {
                    return Ok(answer(Bytes::from_static(b"{\"status\":true}")));
                }
                let mut failed = answer(Bytes::new());
                *failed.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
                Ok(failed)
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
    let mut file = OpenOptions::new().create(true).truncate(true).write(true).open(&path)?;
    // Every block of the ring allocated and on the disk before the first write (see the module's comment), a page
    // at a time: written at once, the kernel caches the file in 2 MB folios, and a write of a few bytes then
    // dirties (and counts, in /proc/PID/io) 2 MB.
    for _ in 0..RING / 4096 {
        file.write_all(&[0; 4096])?;
    }
    file.sync_all()?;
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
