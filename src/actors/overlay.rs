//! The pending overlay every actor keeps between two flushes: the changes not yet durable (which lookups consult
//! before the read index, so messages in one batch build on each other), the records to write, and the answers
//! to send once those records are durable.
//!
//! One flush, for all three actors: write the records in one store request, then, only if they are durable,
//! publish the pending values to the read index, then answer every caller (durable, or `Unavailable`). If the store
//! refuses, the pending values are dropped: memory never runs ahead of the disk.

use std::collections::HashMap;
use std::hash::Hash;

use ractor::{ActorRef, RpcReplyPort};

use super::Unavailable;
use crate::store::own::Writes;
use crate::store::{Conflict, StoreError, StoreOp, StoreWriter};

type Answer = Box<dyn FnOnce(&Outcome) + Send>;

/// How a batch's commit ended.
pub(super) enum Outcome {
    Durable,
    /// The store refused it (a disk or database error): every caller gets `Unavailable`.
    Refused,
    /// Several nodes: PostgreSQL refused one request of the batch for a rule another node's change made it
    /// break; nothing of the batch is applied. The caller whose change it was gets the same conflict as on one
    /// node (see [`Overlay::add_guarded`]); the others get `Unavailable` and may retry.
    Conflict(Conflict),
}

/// Why a batch was not committed.
#[derive(Debug, Clone)]
pub enum Refusal {
    Unavailable,
    Conflict(Conflict),
}

impl From<Unavailable> for Refusal {
    fn from(_: Unavailable) -> Self {
        Refusal::Unavailable
    }
}

pub(super) struct Overlay<K, V> {
    pending: HashMap<K, V>,
    ops: Vec<StoreOp>,
    answers: Vec<Answer>,
    flush_scheduled: bool,
}

impl<K, V> Default for Overlay<K, V> {
    fn default() -> Self {
        Self { pending: HashMap::new(), ops: Vec::new(), answers: Vec::new(), flush_scheduled: false }
    }
}

impl<K: Hash + Eq, V> Overlay<K, V> {
    /// The pending value of `key`, if this batch changed it.
    pub(super) fn get(&self, key: &K) -> Option<&V> {
        self.pending.get(key)
    }

    pub(super) fn values(&self) -> impl Iterator<Item = &V> {
        self.pending.values()
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = (&K, &V)> {
        self.pending.iter()
    }

    /// Records `value` as the pending state of `key`; it is published with the batch, or dropped with it.
    pub(super) fn stage(&mut self, key: K, value: V) {
        self.pending.insert(key, value);
    }

    /// Queues `ops`; once they are durable `port` gets `Ok(value)`, and if the store refuses them it gets
    /// `Err(Unavailable.into())`.
    pub(super) fn add<T, E>(
        &mut self,
        ops: impl IntoIterator<Item = StoreOp>,
        port: RpcReplyPort<Result<T, E>>,
        value: T,
    ) where
        T: Send + 'static,
        E: From<Unavailable> + Send + 'static,
    {
        self.add_result(ops, port, Ok(value));
    }

    /// Like [`add`](Self::add), for an answer that is itself a refusal which must not be given before its
    /// record (an audit entry) is durable.
    pub(super) fn add_result<T, E>(
        &mut self,
        ops: impl IntoIterator<Item = StoreOp>,
        port: RpcReplyPort<Result<T, E>>,
        result: Result<T, E>,
    ) where
        T: Send + 'static,
        E: From<Unavailable> + Send + 'static,
    {
        self.add_guarded(ops, port, result, |_| None);
    }

    /// Like [`add_result`](Self::add_result), for a change that can conflict with another node's: if the batch
    /// fails with a conflict `conflict` recognises as this change's own, the caller gets that error.
    pub(super) fn add_guarded<T, E>(
        &mut self,
        ops: impl IntoIterator<Item = StoreOp>,
        port: RpcReplyPort<Result<T, E>>,
        result: Result<T, E>,
        conflict: impl FnOnce(&Conflict) -> Option<E> + Send + 'static,
    ) where
        T: Send + 'static,
        E: From<Unavailable> + Send + 'static,
    {
        self.add_answering(ops, port, result, move |c| conflict(c).map(Err));
    }

    /// Like [`add_guarded`](Self::add_guarded), for a conflict that has an answer of its own (not an error).
    pub(super) fn add_answering<T, E>(
        &mut self,
        ops: impl IntoIterator<Item = StoreOp>,
        port: RpcReplyPort<Result<T, E>>,
        result: Result<T, E>,
        conflict: impl FnOnce(&Conflict) -> Option<Result<T, E>> + Send + 'static,
    ) where
        T: Send + 'static,
        E: From<Unavailable> + Send + 'static,
    {
        self.ops.extend(ops);
        self.answers.push(Box::new(move |outcome: &Outcome| {
            let answer = match outcome {
                Outcome::Durable => result,
                Outcome::Refused => Err(Unavailable.into()),
                Outcome::Conflict(c) => conflict(c).unwrap_or_else(|| Err(Unavailable.into())),
            };
            // The caller may have timed out and gone; nothing to do about that here.
            let _ = port.send(answer);
        }));
    }

    /// The records the batch writes, to take before [`flush_then`](Self::flush_then): what another node changes meanwhile
    /// waits for the batch to be published only where the two meet ([`super::inbox::Inbox::while_flushing`]).
    pub(super) fn writes(&self) -> Writes {
        Writes::of(&self.ops)
    }

    /// Queues `ops` that belong to the next caller's change (written before it, with it, or not at all).
    pub(super) fn push_ops(&mut self, ops: impl IntoIterator<Item = StoreOp>) {
        self.ops.extend(ops);
    }

    /// Queues `ops` for a caller the actor answers itself after the flush, with what only the commit gives (a
    /// session started in it).
    pub(super) fn add_unanswered(&mut self, ops: impl IntoIterator<Item = StoreOp>) {
        self.ops.extend(ops);
        self.answers.push(Box::new(|_: &Outcome| {}));
    }

    /// When something waits in the batch, makes sure a `Flush` is in the actor's mailbox, behind everything
    /// already queued, so that all of it joins this batch. Returns `true` when the caller must flush right now
    /// instead: the actor is draining for shutdown and refuses new messages, its own `Flush` included, and what
    /// was staged must still end with a durable answer or an error, never with silence.
    #[must_use]
    pub(super) fn schedule_flush<M: ractor::Message>(
        &mut self,
        myself: &ActorRef<M>,
        flush: impl FnOnce() -> M,
    ) -> bool {
        if self.flush_scheduled || self.answers.is_empty() {
            return false;
        }
        self.flush_scheduled = myself.send_message(flush()).is_ok();
        !self.flush_scheduled
    }

    /// Writes the batch with `commit` and waits for it to be durable; then publishes every pending value with
    /// `publish` (only if durable), runs `then` (it gets whether the batch is durable: what a caller learns next
    /// must already see its effects), and answers every caller. Returns whether the batch is durable.
    pub(super) async fn flush_then<F, Fut>(
        &mut self,
        commit: F,
        publish: impl FnMut((K, V)),
        then: impl FnOnce(bool),
    ) -> bool
    where
        F: FnOnce(Vec<StoreOp>) -> Fut,
        Fut: Future<Output = Result<(), Refusal>>,
    {
        self.flush_scheduled = false;
        let ops = std::mem::take(&mut self.ops);
        let answers = std::mem::take(&mut self.answers);
        let pending = std::mem::take(&mut self.pending);
        let outcome = match ops.is_empty() {
            true => Outcome::Durable,
            false => match commit(ops).await {
                Ok(()) => Outcome::Durable,
                Err(Refusal::Unavailable) => Outcome::Refused,
                Err(Refusal::Conflict(c)) => Outcome::Conflict(c),
            },
        };
        let durable = matches!(outcome, Outcome::Durable);
        if durable {
            pending.into_iter().for_each(publish);
        }
        then(durable);
        for answer in answers {
            answer(&outcome);
        }
        durable
    }
}

/// The usual way to commit a batch: one request to the store writer.
pub(super) async fn write(writer: &StoreWriter, ops: Vec<StoreOp>) -> Result<(), Refusal> {
    writer.write(ops).await.map_err(|error| match error {
        StoreError::Conflict(conflict) => {
            tracing::info!(%conflict, "another node's change conflicts with this batch; nothing of it applied");
            Refusal::Conflict(conflict)
        }
        error => {
            tracing::error!(%error, "store write failed; the batch is refused and nothing of it applied");
            Refusal::Unavailable
        }
    })
}
