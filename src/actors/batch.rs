//! The batch an actor accumulates between two flushes: the records to write and the answers to send once they
//! are durable.

use ractor::{ActorRef, RpcReplyPort};

use super::Unavailable;
use crate::store::{StoreOp, StoreWriter};

type Answer = Box<dyn FnOnce(bool) + Send>;

#[derive(Default)]
pub(super) struct Batch {
    ops: Vec<StoreOp>,
    answers: Vec<Answer>,
    flush_scheduled: bool,
}

impl Batch {
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
        self.ops.extend(ops);
        self.answers.push(Box::new(move |durable| {
            // The caller may have timed out and gone; nothing to do about that here.
            let _ = port.send(if durable { result } else { Err(Unavailable.into()) });
        }));
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

    /// Writes the batch in one store request and waits for it to be durable. Returns whether it is, and the
    /// answers to send (after the caller has published the overlay, or dropped it).
    pub(super) async fn write(&mut self, writer: &StoreWriter) -> (bool, Answers) {
        let (ops, answers) = self.take();
        if ops.is_empty() {
            return (true, answers);
        }
        match writer.write(ops).await {
            Ok(()) => (true, answers),
            Err(error) => {
                tracing::error!(%error, "store write failed; the batch is refused and nothing of it applied");
                (false, answers)
            }
        }
    }

    /// Empties the batch, for a caller that commits the records some other way (together with another actor's).
    pub(super) fn take(&mut self) -> (Vec<StoreOp>, Answers) {
        self.flush_scheduled = false;
        (std::mem::take(&mut self.ops), Answers(std::mem::take(&mut self.answers)))
    }
}

/// The answers of one flushed batch.
pub(super) struct Answers(Vec<Answer>);

impl Answers {
    pub(super) fn send(self, durable: bool) {
        for answer in self.0 {
            answer(durable);
        }
    }
}
