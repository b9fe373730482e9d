//! This node's own commits that its follower has not passed yet (PostgreSQL backend, docs/cluster.md).
//!
//! A node publishes its own commit to memory as soon as it is durable, ahead of its follower, which may still
//! have older entries of other nodes to apply. Each key such a commit wrote is kept here with the commit's
//! sequence number; a change log entry's write to a key this node holds at that sequence or later is dropped:
//! memory already reflects a newer state of that record. So a node's memory always equals the database as of the
//! last sequence its follower applied, plus its own acknowledged commits, record by record.
//!
//! Entries are forgotten once the follower has applied the log past them (no older entry can come any more). The
//! follower also applies this node's own entries: one that was acknowledged is superseded here entirely and
//! skipped; one that was not (a commit whose outcome the writer never learned) is applied like another node's.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex};

use super::{Held, StoreOp, TokenHash};

/// A record held in memory, as a change log entry names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Key {
    User([u8; 16]),
    Org([u8; 16]),
    Session(TokenHash),
    Token(TokenHash),
    /// Organization id ‖ user id.
    Member([u8; 32]),
    Invitation([u8; 16]),
    Account([u8; 16]),
    ApiKey([u8; 16]),
}

/// A membership's key: organization id ‖ user id.
pub fn member_key(org: [u8; 16], user: [u8; 16]) -> [u8; 32] {
    let mut key = [0; 32];
    key[..16].copy_from_slice(&org);
    key[16..].copy_from_slice(&user);
    key
}

impl Key {
    /// The record `op` writes, for the ops that travel in the change log and name one record.
    fn of(op: &StoreOp) -> Option<Self> {
        Some(match op.held()? {
            Held::PutUser(r) => Key::User(r.id),
            Held::DeleteUser(id) => Key::User(id),
            Held::PutOrg(r) => Key::Org(r.id),
            Held::DeleteOrg(id) => Key::Org(id),
            Held::PutSession(hash, _) | Held::DeleteSession(_, hash) => Key::Session(hash),
            Held::PutToken(hash, _) | Held::DeleteToken(hash) => Key::Token(hash),
            Held::PutMember(r) => Key::Member(member_key(r.org, r.user)),
            Held::DeleteMember(org, user) => Key::Member(member_key(org, user)),
            Held::PutInvitation(r) => Key::Invitation(r.id),
            Held::DeleteInvitation(id) => Key::Invitation(id),
            Held::PutAccount(r) => Key::Account(r.id),
            Held::DeleteAccount { id, .. } => Key::Account(id),
            Held::PutApiKey(r) => Key::ApiKey(r.id),
            Held::DeleteApiKey { id, .. } | Held::UseApiKey { id, .. } => Key::ApiKey(id),
            // Names many records: kept apart, by user ([`OwnCommits::record`]).
            Held::DeleteSessionsOf { .. } => return None,
            // Applied by the identity provider's index, which keeps the newest of each grant by itself.
            Held::PutOAuthGrant(_) | Held::DeleteOAuthGrant(_) => return None,
        })
    }
}

#[derive(Default)]
pub struct OwnCommits {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// Each key's latest own sequence.
    keys: HashMap<Key, i64>,
    /// Users all of whose sessions an own commit ended (but the one kept, if any), and its sequence.
    sessions_of: HashMap<[u8; 16], (i64, Option<TokenHash>)>,
    /// The sequences of the acknowledged own commits: the follower skips these entries without reading them.
    acknowledged: BTreeSet<i64>,
}

impl OwnCommits {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// An own commit with sequence `seq` is durable and about to be published with `ops`.
    pub(crate) fn record<'a>(&self, seq: i64, ops: impl IntoIterator<Item = &'a StoreOp>) {
        let mut inner = self.lock();
        inner.acknowledged.insert(seq);
        for op in ops {
            if let Some(Held::DeleteSessionsOf { user, except }) = op.held() {
                let held = inner.sessions_of.entry(user).or_insert((seq, except));
                if held.0 <= seq {
                    *held = (seq, except);
                }
            } else if let Some(key) = Key::of(op) {
                mark(&mut inner.keys, key, seq);
            }
        }
    }

    /// Memory holds `key` as of `seq` (a record read back from the database): older entries do not apply.
    pub(crate) fn hold(&self, key: Key, seq: i64) {
        mark(&mut self.lock().keys, key, seq);
    }

    /// Whether an own commit at `seq` was acknowledged (and so is in memory whole).
    pub(crate) fn acknowledged(&self, seq: i64) -> bool {
        self.lock().acknowledged.contains(&seq)
    }

    /// Whether memory holds `key` as of `seq` or later.
    pub fn holds(&self, key: Key, seq: i64) -> bool {
        self.lock().keys.get(&key).is_some_and(|&own| own >= seq)
    }

    /// Whether memory holds session `hash` of `user` as of `seq` or later: written by an own commit since, or
    /// ended since with every session of the account.
    pub fn holds_session(&self, user: [u8; 16], hash: TokenHash, seq: i64) -> bool {
        let inner = self.lock();
        inner.keys.get(&Key::Session(hash)).is_some_and(|&own| own >= seq)
            || inner.sessions_of.get(&user).is_some_and(|&(own, kept)| own >= seq && kept != Some(hash))
    }

    /// Whether an entry at `seq` writing `op` would be dropped (the follower leaves such ops out before handing
    /// an entry to the actors, who check again when they apply it).
    pub(crate) fn supersedes(&self, seq: i64, op: &StoreOp) -> bool {
        match op.held() {
            Some(Held::PutSession(hash, r)) => self.holds_session(r.user_id, hash, seq),
            Some(Held::DeleteSession(user, hash)) => self.holds_session(user, hash, seq),
            _ => Key::of(op).is_some_and(|key| self.holds(key, seq)),
        }
    }

    /// The follower has applied every entry up to `seq`: nothing older can arrive any more.
    pub(crate) fn forget_through(&self, seq: i64) {
        let mut inner = self.lock();
        inner.keys.retain(|_, own| *own > seq);
        inner.sessions_of.retain(|_, (own, _)| *own > seq);
        inner.acknowledged = inner.acknowledged.split_off(&(seq + 1));
    }
}

/// Which records of one change log entry (or one record read back) an actor applies: only those memory does
/// not hold as of the entry's sequence or later. Checked by the actor as it applies them: a record its own batch
/// in flight writes is applied only after that batch is published ([`Writes`]), so the batch's sequence is then
/// certain to be here.
#[derive(Clone)]
pub struct Gate {
    seq: i64,
    resync: bool,
    own: Arc<OwnCommits>,
}

impl Gate {
    /// `resync`: records read back from the database as of `seq`, held as of `seq` once applied.
    pub fn new(seq: i64, resync: bool, own: Arc<OwnCommits>) -> Self {
        Self { seq, resync, own }
    }

    pub fn admits(&self, key: Key) -> bool {
        !self.own.holds(key, self.seq)
    }

    pub fn admits_session(&self, user: [u8; 16], hash: TokenHash) -> bool {
        !self.own.holds_session(user, hash, self.seq)
    }

    /// `key` was applied: a record read back is held as of its sequence (older entries no longer apply to it).
    pub fn applied(&self, key: Key) {
        if self.resync {
            self.own.hold(key, self.seq);
        }
    }
}

/// The records one batch of this node's own writes changes, while that batch is being committed (an actor's flush
/// in flight). Another node's change to any of them is applied only once the batch is published: applied before,
/// it would be overwritten by the batch's (perhaps older) value, and only after the commit is the batch's sequence
/// here for the [`Gate`] to compare with. A change to any other record does not wait (docs/cluster.md, "Another
/// node's change does not wait for this node's commits").
#[derive(Default)]
pub struct Writes {
    keys: HashSet<Key>,
    /// The accounts some of whose sessions the batch writes, or all of whose sessions it ends.
    sessions_of: HashSet<[u8; 16]>,
}

impl Writes {
    /// What `ops` write (every value an actor publishes after a flush is one its batch wrote: durable before
    /// visible).
    pub fn of<'a>(ops: impl IntoIterator<Item = &'a StoreOp>) -> Self {
        let mut writes = Self::default();
        for op in ops {
            let sessions_of = match op.held() {
                Some(Held::PutSession(_, r)) => Some(r.user_id),
                Some(Held::DeleteSession(user, _) | Held::DeleteSessionsOf { user, .. }) => Some(user),
                _ => None,
            };
            writes.sessions_of.extend(sessions_of);
            if let Some(key) = Key::of(op) {
                writes.keys.insert(key);
            }
        }
        writes
    }

    pub fn includes(&self, key: Key) -> bool {
        self.keys.contains(&key)
    }

    /// Whether the batch writes or ends any session of `user`. A session's change waits by account, not by
    /// session: an own batch ending every session of the account decides it too ([`OwnCommits::holds_session`]).
    pub fn includes_sessions_of(&self, user: [u8; 16]) -> bool {
        self.sessions_of.contains(&user)
    }
}

fn mark(keys: &mut HashMap<Key, i64>, key: Key, seq: i64) {
    let own = keys.entry(key).or_insert(seq);
    *own = (*own).max(seq);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_older_entry_is_superseded_a_newer_one_is_not_and_both_are_forgotten_once_passed() {
        let own = OwnCommits::default();
        own.record(
            10,
            &[StoreOp::DeleteUser([1; 16]), StoreOp::DeleteSessionsOf { user: [1; 16], except: Some([7; 32]) }],
        );
        assert!(own.acknowledged(10) && !own.acknowledged(9));
        assert!(own.supersedes(9, &StoreOp::DeleteUser([1; 16])), "an older write of the account");
        assert!(own.supersedes(10, &StoreOp::DeleteUser([1; 16])), "the own entry itself");
        assert!(!own.supersedes(11, &StoreOp::DeleteUser([1; 16])), "a newer one applies");
        assert!(own.holds_session([1; 16], [8; 32], 9), "every session but the kept one ended at 10");
        assert!(!own.holds_session([1; 16], [7; 32], 9), "the kept one is not");
        assert!(!own.holds_session([2; 16], [8; 32], 9), "another account's");
        own.forget_through(10);
        assert!(!own.holds(Key::User([1; 16]), 9) && !own.acknowledged(10));
        assert!(!own.holds_session([1; 16], [8; 32], 9));
    }
}
