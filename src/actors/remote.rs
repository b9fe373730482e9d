//! Changes committed to the database that this node's memory does not hold yet (PostgreSQL backend,
//! docs/cluster.md): other nodes' changes, an own commit whose outcome was lost, and records read back after a
//! conflict. The follower reads them in sequence order; each part goes to the actor that owns it, so the actors
//! stay the only writers of their state and read indexes. Each actor applies a record only if its own commits
//! have not written it at that sequence or later ([`Gate`]): an older change never undoes a newer one.
//!
//! The users and sessions actors take these changes through an [`Inbox`] beside their mailbox, not in it, so a
//! change does not wait for the actor's own commit in flight (see [`Inbox`]).

use std::sync::Arc;

use ractor::ActorRef;
use tokio::sync::{mpsc, oneshot};

use super::linked::LinkedAccount;
use super::sessions::{SessionChange, SessionsMsg};
use super::{CALL_TIMEOUT, Handles, Unavailable, call, orgs::OrgsMsg, users::UsersMsg};
use crate::domain::{
    Invitation, InvitationId, Membership, OneTimeToken, OrgId, Organization, RoleSet, TokenHash, User, UserId,
};
use crate::store::own::{Gate, Key, Writes, member_key};
use crate::store::{Held, StoreError, StoreOp, convert};

/// One committed change, as domain values. `None`: removed.
pub struct RemoteChange {
    pub gate: Gate,
    pub orgs: Vec<(OrgId, Option<Arc<Organization>>)>,
    pub users: Vec<(UserId, Option<Arc<User>>)>,
    pub tokens: Vec<(TokenHash, Option<Arc<OneTimeToken>>)>,
    /// Memberships and invitations (the users actor's, with the accounts).
    pub members: Vec<MemberChange>,
    pub accounts: Vec<([u8; 16], Option<Arc<LinkedAccount>>)>,
    pub sessions: Vec<SessionChange>,
}

/// A membership or invitation another node wrote or removed.
pub enum MemberChange {
    Put(Arc<Membership>),
    Delete(OrgId, UserId),
    PutInvitation(Arc<Invitation>),
    DeleteInvitation(InvitationId),
}

impl MemberChange {
    pub(super) fn key(&self) -> Key {
        match self {
            MemberChange::Put(m) => Key::Member(member_key(m.org.to_bytes(), m.user.to_bytes())),
            MemberChange::Delete(org, user) => Key::Member(member_key(org.to_bytes(), user.to_bytes())),
            MemberChange::PutInvitation(i) => Key::Invitation(i.id.to_bytes()),
            MemberChange::DeleteInvitation(id) => Key::Invitation(id.to_bytes()),
        }
    }
}

/// The users actor's part of one change: accounts, their one-time tokens, memberships and linked identities.
pub(super) struct ForUsers {
    pub users: Vec<(UserId, Option<Arc<User>>)>,
    pub tokens: Vec<(TokenHash, Option<Arc<OneTimeToken>>)>,
    pub members: Vec<MemberChange>,
    pub accounts: Vec<([u8; 16], Option<Arc<LinkedAccount>>)>,
    pub gate: Gate,
}

impl ForUsers {
    /// What applies now, and what waits for the batch `writes` describes to be published (the records it writes).
    pub(super) fn split(self, writes: &Writes) -> (Self, Option<Self>) {
        let Self { users, tokens, members, accounts, gate } = self;
        let (users, users_later) = part(users, |(id, _)| writes.includes(Key::User(id.to_bytes())));
        let (tokens, tokens_later) = part(tokens, |(hash, _)| writes.includes(Key::Token(*hash)));
        let (members, members_later) = part(members, |m| writes.includes(m.key()));
        let (accounts, accounts_later) = part(accounts, |(id, _)| writes.includes(Key::Account(*id)));
        let nothing_later =
            users_later.is_empty() && tokens_later.is_empty() && members_later.is_empty() && accounts_later.is_empty();
        let later = (!nothing_later).then(|| Self {
            users: users_later,
            tokens: tokens_later,
            members: members_later,
            accounts: accounts_later,
            gate: gate.clone(),
        });
        (Self { users, tokens, members, accounts, gate }, later)
    }
}

/// The sessions actor's part of one change.
pub(super) struct ForSessions {
    pub sessions: Vec<SessionChange>,
    pub gate: Gate,
}

impl ForSessions {
    /// As [`ForUsers::split`], by account: a session waits when the batch writes or ends any session of its account.
    pub(super) fn split(self, writes: &Writes) -> (Self, Option<Self>) {
        let (sessions, later) = part(self.sessions, |change| writes.includes_sessions_of(change.user().to_bytes()));
        let later = (!later.is_empty()).then(|| Self { sessions: later, gate: self.gate.clone() });
        (Self { sessions, gate: self.gate }, later)
    }
}

/// `items` split into those `waits` says no to, and those it says yes to.
fn part<T>(items: Vec<T>, waits: impl Fn(&T) -> bool) -> (Vec<T>, Vec<T>) {
    items.into_iter().partition(|item| !waits(item))
}

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
    async fn deliver<M: ractor::Message>(&self, actor: &ActorRef<M>, wake: M, change: T) -> Result<(), Unavailable> {
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
    /// afterwards, the batch's value would take them back, and only once the batch is durable does the [`Gate`]
    /// know its sequence to compare with). So another node's change waits for this node's commit only where both
    /// write the same record.
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

impl RemoteChange {
    /// Sorts a change log entry's ops by owner ([`StoreOp::held`]). Audit entries and mail never travel (no node
    /// holds them).
    pub fn from_ops(ops: Vec<StoreOp>, roles: &RoleSet, gate: Gate) -> Result<Self, StoreError> {
        let mut change = Self {
            gate,
            orgs: Vec::new(),
            users: Vec::new(),
            tokens: Vec::new(),
            members: Vec::new(),
            accounts: Vec::new(),
            sessions: Vec::new(),
        };
        for op in &ops {
            // Records are cloned out of the borrowed view: a few per entry, on the follower's path only.
            match op.held() {
                None => {}
                Some(Held::PutOrg(r)) => {
                    change.orgs.push((OrgId::from_bytes(r.id), Some(Arc::new(convert::org(r.clone())))))
                }
                Some(Held::DeleteOrg(id)) => change.orgs.push((OrgId::from_bytes(id), None)),
                Some(Held::PutUser(r)) => {
                    change.users.push((UserId::from_bytes(r.id), Some(Arc::new(convert::user(r.clone(), roles)))));
                }
                Some(Held::DeleteUser(id)) => change.users.push((UserId::from_bytes(id), None)),
                Some(Held::PutToken(hash, r)) => change.tokens.push((hash, Some(Arc::new(convert::token(r.clone())?)))),
                Some(Held::DeleteToken(hash)) => change.tokens.push((hash, None)),
                Some(Held::PutAccount(r)) => {
                    change.accounts.push((r.id, Some(Arc::new(LinkedAccount::from_record(r.clone())))))
                }
                Some(Held::DeleteAccount { id, .. }) => change.accounts.push((id, None)),
                Some(Held::PutSession(hash, r)) => {
                    change.sessions.push(SessionChange::Put(hash, Arc::new(convert::session(r.clone()))))
                }
                Some(Held::DeleteSession(user, hash)) => {
                    change.sessions.push(SessionChange::Delete(UserId::from_bytes(user), hash))
                }
                Some(Held::DeleteSessionsOf { user, except }) => {
                    change.sessions.push(SessionChange::DeleteAllOf(UserId::from_bytes(user), except))
                }
                Some(Held::PutMember(r)) => change.members.push(MemberChange::Put(Arc::new(convert::membership(r)))),
                Some(Held::DeleteMember(org, user)) => {
                    change.members.push(MemberChange::Delete(OrgId::from_bytes(org), UserId::from_bytes(user)))
                }
                Some(Held::PutInvitation(r)) => {
                    change.members.push(MemberChange::PutInvitation(Arc::new(convert::invitation(r))))
                }
                Some(Held::DeleteInvitation(id)) => {
                    change.members.push(MemberChange::DeleteInvitation(InvitationId::from_bytes(id)))
                }
            }
        }
        Ok(change)
    }
}

impl Handles {
    /// Applies `change` and returns once every part is in the read indexes: organizations, then accounts (and
    /// their tokens), then sessions, so a session never arrives before its account.
    pub async fn apply_remote(&self, change: RemoteChange) -> Result<(), Unavailable> {
        let RemoteChange { gate, orgs, users, tokens, members, accounts, sessions } = change;
        if !orgs.is_empty() {
            let gate = gate.clone();
            call(&self.orgs.0, |reply| OrgsMsg::Remote { orgs, gate, reply }).await?;
        }
        if !users.is_empty() || !tokens.is_empty() || !members.is_empty() || !accounts.is_empty() {
            let change = ForUsers { users, tokens, members, accounts, gate: gate.clone() };
            self.users.1.deliver(&self.users.0, UsersMsg::Remote, change).await?;
        }
        if !sessions.is_empty() {
            self.sessions.2.deliver(&self.sessions.0, SessionsMsg::Remote, ForSessions { sessions, gate }).await?;
        }
        Ok(())
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
