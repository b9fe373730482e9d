//! Connections are served on single-threaded event loops, one per core, each its own tokio runtime on its own
//! thread. A connection stays on the loop it was given from its first byte to its last, so reading a request,
//! the session check and writing the answer happen on one thread with no wake-up of another core in between.
//!
//! Why not the multi-threaded runtime that runs everything else: under a flood of session checks its workers
//! woke each other for every ready socket (work stealing), and the profile showed the scheduler's cross-thread
//! wake-ups (`finish_task_switch`, spin-lock release) as the largest item after TCP itself. The actors, the
//! store writer and housekeeping stay on the shared runtime; a handler that asks an actor still awaits its answer
//! from here, which costs one wake-up per write, not per read.
//!
//! Any listener works (the tests bind port 0): the shared runtime accepts, and each accepted socket moves to the
//! loop with the fewest connections.

use std::future::Future;
use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread::JoinHandle;

use tokio::runtime::{Builder, Handle};
use tokio_util::sync::CancellationToken;

/// The running event loops. Dropping does not stop them: [`EventLoops::stop`] does, after the connections are
/// drained.
pub struct EventLoops {
    loops: Vec<Loop>,
    stop: CancellationToken,
    threads: Vec<JoinHandle<()>>,
}

struct Loop {
    handle: Handle,
    /// Connections on this loop now.
    open: Arc<AtomicUsize>,
}

/// A connection's place on a loop; counted until dropped.
pub struct Placed {
    open: Arc<AtomicUsize>,
}

impl Drop for Placed {
    fn drop(&mut self) {
        self.open.fetch_sub(1, Ordering::Relaxed);
    }
}

impl EventLoops {
    /// Starts `count` loops (0: one per core).
    pub fn start(count: usize) -> io::Result<Self> {
        let count = match count {
            0 => std::thread::available_parallelism().map_or(1, std::num::NonZero::get),
            n => n,
        };
        let stop = CancellationToken::new();
        let (mut loops, mut threads) = (Vec::with_capacity(count), Vec::with_capacity(count));
        for i in 0..count {
            let runtime = Builder::new_current_thread().enable_all().build()?;
            loops.push(Loop { handle: runtime.handle().clone(), open: Arc::default() });
            let stop = stop.clone();
            // A current-thread runtime runs its tasks only while a thread drives it: this one does, until stopped.
            let thread = std::thread::Builder::new()
                .name(format!("http-{i}"))
                .spawn(move || runtime.block_on(stop.cancelled()))?;
            threads.push(thread);
        }
        Ok(Self { loops, stop, threads })
    }

    /// Moves `stream` to the loop with the fewest connections and runs `serve` there with it.
    pub fn place<F, Fut>(&self, stream: tokio::net::TcpStream, serve: F) -> io::Result<()>
    where
        F: FnOnce(tokio::net::TcpStream, Placed) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let target = self.loops.iter().min_by_key(|l| l.open.load(Ordering::Relaxed)).expect("at least one loop");
        target.open.fetch_add(1, Ordering::Relaxed);
        let placed = Placed { open: Arc::clone(&target.open) };
        // The socket is registered with the accepting runtime's reactor; it must be registered again with the
        // target loop's, which `from_std` does when called on that loop.
        let stream = stream.into_std()?;
        target.handle.spawn(async move {
            match tokio::net::TcpStream::from_std(stream) {
                Ok(stream) => serve(stream, placed).await,
                Err(error) => tracing::debug!(%error, "could not register a connection with its event loop"),
            }
        });
        Ok(())
    }

    /// Ends the loops (dropping whatever still runs on them) and waits for their threads.
    pub async fn stop(self) {
        self.stop.cancel();
        let threads = self.threads;
        let _ = tokio::task::spawn_blocking(move || {
            for thread in threads {
                let _ = thread.join();
            }
        })
        .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Connections go to the least-loaded loop, run on a loop's own thread, and are counted until they end.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn connections_are_spread_and_served_on_the_loops() {
        let loops = EventLoops::start(2).unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut clients = Vec::new();
        for _ in 0..4 {
            let client = tokio::net::TcpStream::connect(addr).await.unwrap();
            let (server, _) = listener.accept().await.unwrap();
            loops
                .place(server, |mut stream, placed| async move {
                    let _counted = placed;
                    let name = std::thread::current().name().unwrap_or_default().to_owned();
                    let mut byte = [0u8; 1];
                    if stream.read_exact(&mut byte).await.is_ok() {
                        let _ = stream.write_all(name.as_bytes()).await;
                    }
                })
                .unwrap();
            clients.push(client);
        }
        assert_eq!(loops.loops.iter().map(|l| l.open.load(Ordering::Relaxed)).collect::<Vec<_>>(), [2, 2]);
        let mut names = Vec::new();
        for mut client in clients {
            client.write_all(b"?").await.unwrap();
            let mut name = String::new();
            client.read_to_string(&mut name).await.unwrap();
            names.push(name);
        }
        names.sort();
        assert_eq!(names, ["http-0", "http-0", "http-1", "http-1"]);
        for _ in 0..100 {
            if loops.loops.iter().all(|l| l.open.load(Ordering::Relaxed) == 0) {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert!(loops.loops.iter().all(|l| l.open.load(Ordering::Relaxed) == 0), "every place given back");
        loops.stop().await;
    }
}
