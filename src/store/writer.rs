//! The one task that writes for the whole server: group commit.
//!
//! Every request that arrives while a commit is running waits in the channel; the next round takes all of them
//! (`recv_many`) and writes them in one transaction with one fsync. Under load that turns thousands of fsyncs
//! into tens, and each caller still hears back only after its own change is on disk.

use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};

use super::{Store, StoreError, StoreOp};

/// Requests taken into one transaction at most.
const MAX_BATCH: usize = 1024;

struct WriteRequest {
    ops: Vec<StoreOp>,
    done: oneshot::Sender<Result<(), StoreError>>,
}

/// Handle to the writer task. Cheap to clone; the task ends when the last clone is dropped, after writing
/// everything it had received.
#[derive(Clone)]
pub struct StoreWriter {
    tx: mpsc::Sender<WriteRequest>,
    store: Arc<Store>,
}

impl StoreWriter {
    pub fn spawn(store: Arc<Store>) -> (Self, tokio::task::JoinHandle<()>) {
        let (tx, rx) = mpsc::channel(MAX_BATCH * 4);
        let task = tokio::spawn(run(Arc::clone(&store), rx));
        (Self { tx, store }, task)
    }

    /// Writes `ops` atomically; returns once they are durable.
    pub async fn write(&self, ops: Vec<StoreOp>) -> Result<(), StoreError> {
        let (done, answer) = oneshot::channel();
        self.tx.send(WriteRequest { ops, done }).await.map_err(|_| StoreError::WriterGone)?;
        answer.await.map_err(|_| StoreError::WriterGone)?
    }

    pub fn store(&self) -> &Store {
        &self.store
    }
}

async fn run(store: Arc<Store>, mut rx: mpsc::Receiver<WriteRequest>) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    while rx.recv_many(&mut batch, MAX_BATCH).await > 0 {
        let requests = std::mem::take(&mut batch);
        let store = Arc::clone(&store);
        let committed = tokio::task::spawn_blocking(move || {
            let ops: Vec<&StoreOp> = requests.iter().flat_map(|r| &r.ops).collect();
            let result = store.commit_refs(&ops);
            (requests, result)
        })
        .await;
        let Ok((requests, result)) = committed else {
            // The commit thread panicked; the requests went with it and their callers see WriterGone.
            tracing::error!("store commit panicked");
            continue;
        };
        for request in requests {
            let answer = match &result {
                Ok(()) => Ok(()),
                Err(e) => Err(StoreError::Io(e.to_string())),
            };
            let _ = request.done.send(answer);
        }
    }
}

/// A writer whose requests come to the test instead of the disk: the test decides when each one is durable and
/// whether it fails, so the actors' answers can be checked against a write that blocks and then fails.
#[cfg(test)]
pub(crate) struct ManualDisk {
    rx: mpsc::Receiver<WriteRequest>,
    store: Arc<Store>,
}

#[cfg(test)]
impl StoreWriter {
    pub(crate) fn manual(store: Arc<Store>) -> (Self, ManualDisk) {
        let (tx, rx) = mpsc::channel(MAX_BATCH);
        (Self { tx, store: Arc::clone(&store) }, ManualDisk { rx, store })
    }
}

#[cfg(test)]
impl ManualDisk {
    /// The next write request, if one arrives within `wait`.
    pub(crate) async fn next(&mut self, wait: std::time::Duration) -> Option<PendingWrite> {
        let request = tokio::time::timeout(wait, self.rx.recv()).await.ok()??;
        Some(PendingWrite { request, store: Arc::clone(&self.store) })
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
        StoreOp::PutOrg(OrgRecordV1 { id: [n; 16], name: format!("o{n}"), slug: format!("o{n}"), created_at_ms: 0 })
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_writes_are_all_durable_in_few_commits() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(Store::open(dir.path()).unwrap());
        let (writer, task) = StoreWriter::spawn(Arc::clone(&store));
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
        task.await.unwrap();
        drop(store);
        let loaded = Store::open(dir.path()).unwrap().load().unwrap();
        assert_eq!(loaded.orgs.len(), 200);
    }

    #[tokio::test]
    async fn a_failed_commit_fails_its_batch_and_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(Store::open(dir.path()).unwrap());
        let (writer, _task) = StoreWriter::spawn(Arc::clone(&store));
        store.fail_next_commits(1);
        assert!(matches!(writer.write(vec![org(1)]).await, Err(StoreError::Io(_))));
        writer.write(vec![org(2)]).await.unwrap();
        let ids: Vec<_> = store.load().unwrap().orgs.into_iter().map(|o| o.id[0]).collect();
        assert_eq!(ids, vec![2]);
    }
}
