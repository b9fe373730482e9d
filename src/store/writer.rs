//! The one thread that writes for the whole server: group commit.
//!
//! Every request that arrives while a commit is running waits in the channel; the next round takes all of them
//! and writes them in one transaction with one fsync. Under load that turns thousands of fsyncs into tens, and
//! each caller still hears back only after its own change is on disk.
//!
//! The writer is an OS thread of its own, not a task on tokio's blocking pool: the pool also runs the password
//! hashes, and a commit must never queue behind a pile of them.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, oneshot};

use super::{Store, StoreError, StoreOp};

/// Requests taken into one transaction at most.
const MAX_BATCH: usize = 1024;

struct WriteRequest {
    ops: Vec<StoreOp>,
    done: oneshot::Sender<Result<(), StoreError>>,
}

enum Request {
    Write(WriteRequest),
    /// Write everything received before this, then end.
    Close,
}

/// Handle to the writer thread. Cheap to clone; the thread ends at [`close`](Self::close) (or when the last
/// clone is dropped), after writing everything it had received.
#[derive(Clone)]
pub struct StoreWriter {
    tx: mpsc::Sender<Request>,
}

/// Resolves once the writer thread has written everything and ended.
pub struct WriterDone(oneshot::Receiver<()>);

impl WriterDone {
    pub async fn wait(self) {
        let _ = self.0.await;
    }
}

impl StoreWriter {
    pub fn spawn(store: Arc<Store>) -> Result<(Self, WriterDone), StoreError> {
        Self::spawn_observed(store, CommitMetrics::default())
    }

    /// [`spawn`](Self::spawn), recording each commit's duration and size into `metrics`.
    pub fn spawn_observed(store: Arc<Store>, metrics: CommitMetrics) -> Result<(Self, WriterDone), StoreError> {
        Self::spawn_with(store, metrics, None)
    }

    /// [`spawn_observed`](Self::spawn_observed), and `on_commit` shown the ops of every write that is durable,
    /// before its caller hears so (see [`OnCommit`]).
    pub fn spawn_with(
        store: Arc<Store>,
        metrics: CommitMetrics,
        on_commit: Option<OnCommit>,
    ) -> Result<(Self, WriterDone), StoreError> {
        let (tx, rx) = mpsc::channel(MAX_BATCH * 4);
        let (ended, done) = oneshot::channel();
        let thread_store = store;
        std::thread::Builder::new()
            .name("store-writer".into())
            .spawn(move || {
                run(&thread_store, rx, &metrics, on_commit.as_ref());
                // Let go of the database before saying so: whoever waits may open it again at once.
                drop(thread_store);
                let _ = ended.send(());
            })
            .map_err(|e| StoreError::Io(format!("cannot start the store writer thread: {e}")))?;
        Ok((Self { tx }, WriterDone(done)))
    }

    /// Writes `ops` atomically; returns once they are durable.
    pub async fn write(&self, ops: Vec<StoreOp>) -> Result<(), StoreError> {
        let (done, answer) = oneshot::channel();
        self.tx.send(Request::Write(WriteRequest { ops, done })).await.map_err(|_| StoreError::WriterGone)?;
        answer.await.map_err(|_| StoreError::WriterGone)?
    }

    /// Asks the thread to end once everything sent before is written; later writes fail with `WriterGone`.
    pub async fn close(&self) {
        let _ = self.tx.send(Request::Close).await;
    }
}

/// Shown the ops of each durable write, on the writer's thread, before the write's caller is answered: for an
/// index that is no actor's and follows changes several writers stage (the identity provider's grants end in a
/// ban's or a password reset's commit, src/provider/grants.rs). It must be quick: every commit waits for it.
pub type OnCommit = Arc<dyn Fn(&[StoreOp]) + Send + Sync>;

/// How often a degraded store tries to reopen.
const RECOVERY_INTERVAL: Duration = Duration::from_secs(1);

/// What the writer records about its commits (no-ops by default).
#[derive(Clone)]
pub struct CommitMetrics {
    /// Seconds per commit, fsync included.
    pub duration: metrics::Histogram,
    /// Write requests grouped into one commit.
    pub batch: metrics::Histogram,
}

impl Default for CommitMetrics {
    fn default() -> Self {
        Self { duration: metrics::Histogram::noop(), batch: metrics::Histogram::noop() }
    }
}

fn run(store: &Store, mut rx: mpsc::Receiver<Request>, metrics: &CommitMetrics, on_commit: Option<&OnCommit>) {
    let mut next_recovery = Instant::now();
    let mut closing = false;
    while !closing {
        let first = if store.health().is_ok() {
            match rx.blocking_recv() {
                Some(request) => request,
                None => return,
            }
        } else {
            // Degraded: keep trying to recover even when nobody writes, so readiness comes back by itself.
            if Instant::now() >= next_recovery {
                next_recovery = Instant::now() + RECOVERY_INTERVAL;
                match store.recover() {
                    Ok(()) => tracing::warn!("the store accepts writes again"),
                    Err(error) => tracing::debug!(%error, "the store is still refusing writes"),
                }
            }
            match rx.try_recv() {
                Ok(request) => request,
                Err(mpsc::error::TryRecvError::Empty) => {
                    std::thread::sleep(Duration::from_millis(20));
                    continue;
                }
                Err(mpsc::error::TryRecvError::Disconnected) => return,
            }
        };
        let mut requests = Vec::new();
        let mut next = Some(first);
        while let Some(request) = next {
            match request {
                Request::Write(write) => requests.push(write),
                Request::Close => {
                    closing = true;
                    break;
                }
            }
            next = if requests.len() < MAX_BATCH { rx.try_recv().ok() } else { None };
        }
        if !requests.is_empty() {
            commit(store, requests, metrics, on_commit);
        }
    }
}

/// Commits the requests in one transaction (or refuses them at once while the store recovers) and answers each.
/// The metrics are recorded before anyone is answered, so a caller that reads them next sees its own commit.
fn commit(store: &Store, requests: Vec<WriteRequest>, metrics: &CommitMetrics, on_commit: Option<&OnCommit>) {
    let started = Instant::now();
    let results = match store.health() {
        // Refused at once while recovering: a commit now would only hit redb's latched error (or a dead connection).
        Err(reason) => Err(StoreError::Io(format!("the store refuses writes until it recovers: {reason}"))),
        Ok(()) => {
            let batch: Vec<&[StoreOp]> = requests.iter().map(|r| r.ops.as_slice()).collect();
            store.commit_requests(&batch)
        }
    };
    metrics.batch.record(requests.len() as f64);
    metrics.duration.record(started.elapsed());
    if let Err(error) = &results
        && store.health().is_err()
    {
        tracing::error!(%error, "the store refused a commit; writes are refused until it recovers");
    }
    match results {
        Ok(results) => {
            for (request, result) in requests.into_iter().zip(results) {
                if let (Some(on_commit), Ok(())) = (on_commit, &result) {
                    on_commit(&request.ops);
                }
                let _ = request.done.send(result);
            }
        }
        Err(error) => {
            for request in requests {
                let _ = request.done.send(Err(StoreError::Io(error.to_string())));
            }
        }
    }
}

/// A writer whose requests come to the test instead of the disk: the test decides when each one is durable and
/// whether it fails, so the actors' answers can be checked against a write that blocks and then fails.
#[cfg(test)]
pub(crate) struct ManualDisk {
    rx: mpsc::Receiver<Request>,
    store: Arc<Store>,
}

#[cfg(test)]
impl StoreWriter {
    pub(crate) fn manual(store: Arc<Store>) -> (Self, ManualDisk) {
        let (tx, rx) = mpsc::channel(MAX_BATCH);
        (Self { tx }, ManualDisk { rx, store })
    }
}

#[cfg(test)]
impl ManualDisk {
    /// The next write request, if one arrives within `wait`.
    pub(crate) async fn next(&mut self, wait: std::time::Duration) -> Option<PendingWrite> {
        loop {
            match tokio::time::timeout(wait, self.rx.recv()).await.ok()?? {
                Request::Write(request) => return Some(PendingWrite { request, store: Arc::clone(&self.store) }),
                Request::Close => continue,
            }
        }
    }
}

/// One write request held by a [`ManualDisk`].
#[cfg(test)]
pub(crate) struct PendingWrite {
    request: WriteRequest,
    store: Arc<Store>,
}

#[cfg(test)]
impl PendingWrite {
    pub(crate) fn ops(&self) -> &[StoreOp] {
        &self.request.ops
    }

    /// Commits the request for real and answers it.
    pub(crate) fn commit(self) {
        let result = self.store.commit(&self.request.ops);
        let _ = self.request.done.send(result);
    }

    /// Answers it with a disk error; nothing is written.
    pub(crate) fn fail(self) {
        let _ = self.request.done.send(Err(StoreError::Io("the disk refused the write (test)".into())));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::records::OrgRecordV1;

    fn org(n: u8) -> StoreOp {
        StoreOp::PutOrg(
            OrgRecordV1 { id: [n; 16], name: format!("o{n}"), slug: format!("o{n}"), created_at_ms: 0 }.into(),
        )
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_writes_are_all_durable_in_few_commits() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(Store::open(dir.path()).unwrap());
        let (writer, done) = StoreWriter::spawn(Arc::clone(&store)).unwrap();
        let writes: Vec<_> = (0..200u8)
            .map(|n| {
                let w = writer.clone();
                tokio::spawn(async move { w.write(vec![org(n)]).await })
            })
            .collect();
        for w in writes {
            w.await.unwrap().unwrap();
        }
        let commits = store.commit_count();
        assert!(commits < 200, "{commits} commits for 200 writes: no grouping");
        drop(writer);
        done.wait().await;
        drop(store);
        let loaded = Store::open(dir.path()).unwrap().load().unwrap();
        assert_eq!(loaded.orgs.len(), 200);
    }

    #[tokio::test]
    async fn a_failed_commit_fails_its_batch_and_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(Store::open(dir.path()).unwrap());
        let (writer, _done) = StoreWriter::spawn(Arc::clone(&store)).unwrap();
        store.fail_next_commits(1);
        assert!(matches!(writer.write(vec![org(1)]).await, Err(StoreError::Io(_))));
        writer.write(vec![org(2)]).await.unwrap();
        let ids: Vec<_> = store.load().unwrap().orgs.into_iter().map(|o| o.id[0]).collect();
        assert_eq!(ids, vec![2]);
    }

    /// The issue: commits ran on tokio's blocking pool, behind whatever hashes filled it. Here the pool has one
    /// thread and it is busy for ten seconds; a write must still be durable long before that.
    #[test]
    fn a_write_does_not_wait_for_a_busy_blocking_pool() {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .max_blocking_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let written = runtime.block_on(async {
            let store = Arc::new(Store::open(dir.path()).unwrap());
            let (writer, _done) = StoreWriter::spawn(store).unwrap();
            tokio::task::spawn_blocking(|| std::thread::sleep(std::time::Duration::from_secs(10)));
            tokio::time::timeout(std::time::Duration::from_secs(5), writer.write(vec![org(1)])).await
        });
        runtime.shutdown_background();
        assert!(matches!(written, Ok(Ok(()))), "the write waited behind the blocking pool: {written:?}");
    }
}
