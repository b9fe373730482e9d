//! Bounded mailboxes whose calls expire with their caller.
//!
//! ractor's mailboxes are unbounded, and a caller that stops waiting (after [`CALL_TIMEOUT`], or because its
//! request was dropped) leaves its message behind. While the store is stuck an actor takes nothing (it waits in
//! its flush), so messages piled up without end; once the store answered again, each did its work for a caller
//! long gone: a sign-in's attempt reserved in the database, an account created after its sign-up was answered 503.
//! So:
//!
//! - at most [`MAILBOX_CAP`] calls wait in one actor's mailbox; the next is refused at once ([`Unavailable`],
//!   503), where it used to wait its whole timeout and then leave its message behind anyway;
//! - the actor drops, unopened, a call whose caller has stopped waiting (its reply port is closed: the caller's
//!   deadline passed, or its request is gone). Nobody is told, since nobody is listening: the caller already
//!   answered 503, which promises nothing was done.
//!
//! Some messages run whatever happens to their sender ([`Letter::caller_gone`] is `None` for them): another
//! node's changes, the second half of work already admitted (a sign-in's outcome, which ends its reservation; a
//! commit carrying another actor's records), and what needs no answer (flushes, the end of a fence). They are
//! neither counted nor refused nor dropped.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use ractor::{ActorRef, RpcReplyPort};

use super::{CALL_TIMEOUT, Unavailable};

/// Calls that may wait in one actor's mailbox. Far above what a healthy actor holds (it takes a batch per
/// flush, a few milliseconds): only a stuck store fills it. A call there is a few hundred bytes.
pub(super) const MAILBOX_CAP: usize = 4096;

/// What a mailbox needs to know of a message.
pub(super) trait Letter: ractor::Message {
    /// For a call whose work is only for the caller awaiting its answer: whether that caller has stopped
    /// waiting. `None` for a message that must run whatever happens to its sender (see the module's text).
    fn caller_gone(&self) -> Option<bool>;
}

/// Whether the caller of a message carrying `reply` has stopped waiting for it.
pub(super) fn gone<T>(reply: &RpcReplyPort<T>) -> Option<bool> {
    Some(reply.is_closed())
}

/// How many calls wait in an actor's mailbox, shared by its handles (which add) and the actor (which takes).
#[derive(Clone, Default)]
pub(super) struct Waiting(Arc<AtomicUsize>);

impl Waiting {
    /// Takes a place for one more call, unless [`MAILBOX_CAP`] are waiting.
    fn enter(&self) -> bool {
        self.0.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n < MAILBOX_CAP).then_some(n + 1)).is_ok()
    }

    fn leave(&self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }

    /// The actor's side, on taking `msg` out of its mailbox: gives its place back, and says whether to handle it
    /// (`false`: its caller is gone, drop it unopened).
    pub(super) fn take<M: Letter>(&self, msg: &M) -> bool {
        match msg.caller_gone() {
            None => true,
            Some(gone) => {
                self.leave();
                !gone
            }
        }
    }

    #[cfg(test)]
    pub(super) fn count(&self) -> usize {
        self.0.load(Ordering::Acquire)
    }
}

/// An actor's address, with the count of the calls waiting in its mailbox. Derefs to the [`ActorRef`] for what
/// is not a counted call (casts, the drain at shutdown).
pub struct Mailbox<M> {
    actor: ActorRef<M>,
    pub(super) waiting: Waiting,
}

impl<M> Mailbox<M> {
    pub(super) fn new(actor: ActorRef<M>, waiting: Waiting) -> Self {
        Self { actor, waiting }
    }
}

impl<M> Clone for Mailbox<M> {
    fn clone(&self) -> Self {
        Self { actor: self.actor.clone(), waiting: self.waiting.clone() }
    }
}

impl<M> std::ops::Deref for Mailbox<M> {
    type Target = ActorRef<M>;
    fn deref(&self) -> &ActorRef<M> {
        &self.actor
    }
}

/// Sends `msg`, which nobody waits for, counted like a call (its [`Letter::caller_gone`] says `Some(false)`):
/// dropped when [`MAILBOX_CAP`] calls wait already. For what may be skipped under load (the record of a session's
/// use, which the next use makes again).
pub(super) fn cast_counted<M: Letter>(mailbox: &Mailbox<M>, msg: M) {
    if mailbox.waiting.enter() && mailbox.actor.send_message(msg).is_err() {
        mailbox.waiting.leave();
    }
}

/// Sends `build(port)` to the actor and waits (at most [`CALL_TIMEOUT`]) for the answer. A full mailbox, a dead
/// actor or no answer in time is [`Unavailable`]; a message left behind then is dropped unopened when the actor
/// gets to it.
pub(super) async fn call<M, T>(mailbox: &Mailbox<M>, build: impl FnOnce(RpcReplyPort<T>) -> M) -> Result<T, Unavailable>
where
    M: Letter,
    T: Send + 'static,
{
    let (port, answer) = ractor::concurrency::oneshot();
    let msg = build(RpcReplyPort::from((port, CALL_TIMEOUT)));
    let counted = msg.caller_gone().is_some();
    if counted && !mailbox.waiting.enter() {
        return Err(Unavailable);
    }
    if mailbox.actor.send_message(msg).is_err() {
        if counted {
            mailbox.waiting.leave();
        }
        return Err(Unavailable);
    }
    // Dropping `answer` (at the timeout, or with the caller's future) closes the port: the actor then skips it.
    match tokio::time::timeout(CALL_TIMEOUT, answer).await {
        Ok(Ok(value)) => Ok(value),
        _ => Err(Unavailable),
    }
}
