//! How another node's changes reach the users and sessions actors: an [`Inbox`] beside the actor's mailbox, not in
//! it, so a change does not wait for the actor's own commit in flight. A leaf: the follower's side
//! ([`super::remote`]) sorts a change by owner and posts each part; the actors only take from their inbox.

use ractor::ActorRef;
use tokio::sync::{mpsc, oneshot};

use super::{CALL_TIMEOUT, Unavailable};

/// Another node's change on its way to an actor, and how the follower learns that all of it is applied.
pub(super) struct Delivery<T> {
    change: T,
    applied: oneshot::Sender<()>,
}

/// The follower's side of an actor's [`Inbox`].
pub(super) struct Post<T>(mpsc::UnboundedSender<Delivery<T>>);

impl<T> Clone for Post<T> {
    fn clone(&self) -> Self {
        Self(self.0.clone())
    }
}

/// Where another node's changes reach an actor: beside its mailbox, not in it.
///
/// An actor takes no message while its own batch is being committed: its flush awaits the commit inside the
/// handler. A change queued in the mailbox waited for that commit, and under writes on the node it nearly always
/// had one to wait for (a ban made on node A was refused on node B after 163 ms at p99 under administrator
/// writes on both; BENCHMARKS.md, issue #33). From the inbox the actor takes a change while it waits for its
/// commit ([`while_flushing`](Self::while_flushing)), and between messages when the message that comes with each
/// change wakes it ([`drain`](Self::drain)). The follower hands over one change at a time and waits for it, so
/// changes are still applied in sequence order.
pub(super) struct Inbox<T>(mpsc::UnboundedReceiver<Delivery<T>>);

pub(super) fn inbox<T>() -> (Post<T>, Inbox<T>) {
    let (tx, rx) = mpsc::unbounded_channel();
    (Post(tx), Inbox(rx))
}

impl<T> Post<T> {
    /// Hands `change` to the actor, sends it `wake` (in case it is between messages), and returns once all of the
    /// change is applied. A dead actor, or none applying it within [`CALL_TIMEOUT`], is [`Unavailable`]: the
    /// follower reads the change again.
    pub(super) async fn deliver<M: ractor::Message>(
        &self,
        actor: &ActorRef<M>,
        wake: M,
        change: T,
    ) -> Result<(), Unavailable> {
        let (applied, done) = oneshot::channel();
        self.0.send(Delivery { change, applied }).map_err(|_| Unavailable)?;
        actor.send_message(wake).map_err(|_| Unavailable)?;
        match tokio::time::timeout(CALL_TIMEOUT, done).await {
            Ok(Ok(())) => Ok(()),
            _ => Err(Unavailable),
        }
    }
}

impl<T> Inbox<T> {
    /// Between messages (no commit of the actor's own in flight): applies whatever waits.
    pub(super) fn drain(&mut self, mut apply: impl FnMut(T)) {
        while let Ok(Delivery { change, applied }) = self.0.try_recv() {
            apply(change);
            let _ = applied.send(());
        }
    }

    /// Runs `flushing` (the actor's flush: its commit, then publishing the batch and answering its callers) to its
    /// end, applying meanwhile each change that arrives: `split` parts it into what `apply` applies at once (the
    /// records the batch does not write) and what it applies after `flushing` (those it does: published
    /// afterwards, the batch's value would take them back, and only once the batch is durable does the
    /// [`Gate`](crate::store::own::Gate) know its sequence to compare with). So another node's change waits for
    /// this node's commit only where both write the same record.
    pub(super) async fn while_flushing<R>(
        &mut self,
        flushing: impl Future<Output = R>,
        mut split: impl FnMut(T) -> (T, Option<T>),
        mut apply: impl FnMut(T),
    ) -> R {
        let mut flushing = std::pin::pin!(flushing);
        let mut after = Vec::new();
        let outcome = loop {
            tokio::select! {
                biased;
                Some(Delivery { change, applied }) = self.0.recv() => {
                    let (now, later) = split(change);
                    apply(now);
                    match later {
                        None => {
                            let _ = applied.send(());
                        }
                        Some(later) => after.push(Delivery { change: later, applied }),
                    }
                }
                outcome = &mut flushing => break outcome,
            }
        };
        for Delivery { change, applied } in after {
            apply(change);
            let _ = applied.send(());
        }
        outcome
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    /// An actor's flush in flight takes another node's change: what its batch does not write (here, all but
    /// "written") at once, before the commit ends; what it writes, right after the batch is published, and only
    /// then is the follower told the change is applied.
    #[tokio::test]
    async fn while_flushing_applies_at_once_what_the_batch_does_not_write_and_the_rest_after_publishing() {
        let (post, mut inbox) = inbox::<Vec<&'static str>>();
        let log = Mutex::new(Vec::new());
        let note = |what: &'static str| log.lock().unwrap().push(what);
        let seen = || log.lock().unwrap().clone();
        let (commit, committed) = oneshot::channel::<()>();
        let flushing = async {
            committed.await.unwrap();
            note("published");
        };
        let split = |change: Vec<&'static str>| {
            let (later, now): (Vec<_>, Vec<_>) = change.into_iter().partition(|r| *r == "written");
            (now, (!later.is_empty()).then_some(later))
        };
        let follower = async {
            let send = |change| {
                let (applied, done) = oneshot::channel();
                post.0.send(Delivery { change, applied }).unwrap();
                done
            };
            send(vec!["a"]).await.unwrap();
            assert_eq!(seen(), ["a"], "applied while the commit is in flight");
            let mut second = send(vec!["b", "written"]);
            while !seen().contains(&"b") {
                tokio::task::yield_now().await;
            }
            assert_eq!(second.try_recv(), Err(oneshot::error::TryRecvError::Empty), "not all of it is applied yet");
            commit.send(()).unwrap();
            second.await.unwrap();
        };
        tokio::join!(inbox.while_flushing(flushing, split, |change| change.into_iter().for_each(note)), follower);
        assert_eq!(seen(), ["a", "b", "published", "written"]);
    }
}
