//! The sessions' read index: by token hash for the session check, by user for one account's sessions.

use std::collections::{BTreeSet, HashSet};
use std::ops::RangeInclusive;
use std::sync::{Arc, Mutex, RwLock};

use crate::actors::inline_map::{InlineMap, Key};
use crate::actors::{read, write};
use crate::domain::{Session, SessionId, Timestamp, TokenHash, UserAgent, UserId};

/// A session's slot keeps its whole token hash (32 bytes beside the pointer: 40-byte slots): a `Session` does not
/// hold it, and putting it there would take a session's `Arc` from glibc's 144-byte chunk to the 176-byte one.
impl Key<Session> for TokenHash {
    type Kept = TokenHash;
    /// Filed by its first eight bytes: a SHA-256 digest of a random token the server made, so already as even as
    /// a hash makes it, and the same eight bytes file the session in [`SessionIndex::by_user`].
    fn hash_with(&self, _: &crate::actors::KeyHash) -> u64 {
        filed(self)
    }
    fn kept(&self, _: u64) -> TokenHash {
        *self
    }
    fn is(&self, _: u64, kept: &TokenHash, _: &Session) -> bool {
        kept == self
    }
    fn of(kept: &TokenHash, _: &Session) -> Self {
        *kept
    }
}

/// Read index of sessions, keyed by the SHA-256 of the token, and the tokens of each user (so that ending or
/// listing one user's sessions touches only theirs, not every session).
#[derive(Default)]
pub struct SessionIndex {
    /// The session check's map: entries in its table, reads that never wait (see [`InlineMap`]).
    by_hash: InlineMap<TokenHash, Session>,
    /// Every session's user and the first eight bytes of its token hash, in that order: one user's sessions are a
    /// range, and each of their hashes is found in `by_hash` under those eight bytes (the hash the map files it by:
    /// one probe). 24-byte entries instead of the whole (user, hash) pair's 48: ~25 bytes a session in full
    /// B-tree nodes instead of ~50. Only the sessions actor writes it, and only calls about one account's sessions
    /// (list, revoke, ban) read it, never the session check.
    by_user: RwLock<BTreeSet<(UserId, u64)>>,
    /// The impersonation sessions by the administrator behind each: when that administrator is banned, demoted or
    /// removed, these end with the change. Few (an administrator's temporary state), so a set beside `by_user`.
    by_impersonator: RwLock<BTreeSet<(UserId, TokenHash)>>,
    /// One copy of each user agent the sessions have (see [`UserAgent`]); only the sessions actor and start-up use
    /// it, so the lock is never contended.
    agents: Mutex<HashSet<UserAgent>>,
}

impl SessionIndex {
    pub fn with_capacity(sessions: usize) -> Self {
        Self { by_hash: InlineMap::with_capacity(sessions), ..Self::default() }
    }

    pub fn get(&self, hash: &TokenHash) -> Option<Arc<Session>> {
        self.by_hash.get(hash)
    }

    pub fn len(&self) -> usize {
        self.by_hash.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_hash.is_empty()
    }

    /// Used after a durable write; only the sessions actor writes.
    pub(crate) fn publish(&self, hash: TokenHash, session: Option<Arc<Session>>) {
        match session {
            Some(session) => {
                let (user, impersonator) = (session.user_id, session.impersonated_by());
                if self.by_hash.insert(hash, session).is_none() {
                    write(&self.by_user).insert((user, filed(&hash)));
                    if let Some(admin) = impersonator {
                        write(&self.by_impersonator).insert((admin, hash));
                    }
                }
            }
            None => {
                if let Some(old) = self.by_hash.remove(&hash) {
                    // Another session of the same user filed under the same eight bytes keeps the entry (one
                    // chance in 2^64 a pair, but then revoking one must not hide the other).
                    let mut twin = false;
                    self.by_hash.with_hash(filed(&hash), |_, s| twin |= s.user_id == old.user_id);
                    if !twin {
                        write(&self.by_user).remove(&(old.user_id, filed(&hash)));
                    }
                    if let Some(admin) = old.impersonated_by().as_ref() {
                        write(&self.by_impersonator).remove(&(*admin, hash));
                    }
                }
            }
        }
    }

    /// At start-up, before anything reads the index: the session check's map only.
    /// [`finish_load`](Self::finish_load) then builds the sessions by user in one pass.
    #[cfg(test)]
    pub(crate) fn publish_loaded(&self, hash: TokenHash, session: Arc<Session>) {
        if let Some(admin) = session.impersonated_by().as_ref() {
            write(&self.by_impersonator).insert((*admin, hash));
        }
        self.by_hash.insert(hash, session);
    }

    /// `publish_loaded` (tests) for many at once (drained), their slots fetched ahead: how start-up publishes.
    pub(crate) fn publish_loaded_many(&self, sessions: &mut Vec<(TokenHash, Arc<Session>)>) {
        {
            let mut by_impersonator = None;
            for (hash, session) in sessions.iter() {
                if let Some(admin) = session.impersonated_by().as_ref() {
                    by_impersonator.get_or_insert_with(|| write(&self.by_impersonator)).insert((*admin, *hash));
                }
            }
        }
        self.by_hash.insert_many(sessions.drain(..));
    }

    /// Takes back the sessions of `user` given to [`publish_loaded_many`](Self::publish_loaded_many) under `under`
    /// (the first eight bytes of their hashes, as [`loaded`](Self::loaded) keeps them): their account is gone or
    /// banned. Their hashes, for the store's cleanup.
    pub(crate) fn unpublish_loaded(&self, user: UserId, under: u64) -> Vec<TokenHash> {
        let mut hashes = Vec::new();
        self.by_hash.with_hash(under, |hash, s| {
            if s.user_id == user {
                hashes.push(hash);
            }
        });
        for hash in &hashes {
            if let Some(old) = self.by_hash.remove(hash)
                && let Some(admin) = old.impersonated_by().as_ref()
            {
                write(&self.by_impersonator).remove(&(*admin, *hash));
            }
        }
        hashes
    }

    /// A loaded session as start-up keeps it until [`finish_load`](Self::finish_load): its user and the first
    /// eight bytes of its token hash, the entry it gets in [`by_user`](Self::by_user) (24 bytes a session where the
    /// whole hash made 48: at 10,000,000 sessions, 240 MB less to fill and free while loading).
    pub(crate) fn loaded(user: UserId, hash: &TokenHash) -> (UserId, u64) {
        (user, filed(hash))
    }

    /// `loaded`: [`loaded`](Self::loaded) of every session given to [`publish_loaded_many`](Self::publish_loaded_many)
    /// and not taken back. The store hands them over in this order, so the sort is a pass that finds them sorted,
    /// and the list's own allocation becomes the tree's input.
    pub(crate) fn finish_load(&self, loaded: Vec<(UserId, u64)>) {
        *write(&self.by_user) = loaded.into_iter().collect();
    }

    /// The shared copy of user agent `text`, made on its first use.
    pub(crate) fn user_agent(&self, text: &str) -> UserAgent {
        let mut agents = self.agents.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(agent) = agents.get(text) {
            return agent.clone();
        }
        let agent = UserAgent::from(text);
        agents.insert(agent.clone());
        agent
    }

    /// Drops the copies of user agents that no session holds any more; returns how many are left.
    pub(super) fn forget_unused_agents(&self) -> usize {
        let mut agents = self.agents.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        agents.retain(|agent| agent.holders() > 1);
        agents.len()
    }

    /// The live sessions of `user` with their token hashes, oldest first.
    pub fn of_user(&self, user: UserId) -> Vec<(TokenHash, Arc<Session>)> {
        let hashes: Vec<TokenHash> = self.of_users(&[user]).into_iter().map(|(_, h)| h).collect();
        let mut sessions: Vec<_> = hashes.iter().filter_map(|h| Some((*h, self.by_hash.get(h)?))).collect();
        sessions.sort_unstable_by_key(|(_, s)| (s.created_at, s.id));
        sessions
    }

    /// The session with id `id`: its hash and user. A scan (an administrator's rare call; ids are not indexed).
    pub fn find_by_id(&self, id: SessionId) -> Option<(TokenHash, UserId)> {
        self.by_hash.pin().iter().find(|(_, s)| s.id == id).map(|(h, s)| (h, s.user_id))
    }

    pub(super) fn expired(&self, now: Timestamp) -> Vec<TokenHash> {
        self.by_hash.pin().iter().filter(|(_, s)| s.is_expired(now)).map(|(h, _)| h).collect()
    }

    pub(super) fn of_users(&self, users: &[UserId]) -> Vec<(UserId, TokenHash)> {
        let filed: Vec<(UserId, u64)> = {
            let by_user = read(&self.by_user);
            users.iter().flat_map(|u| by_user.range((*u, 0)..=(*u, u64::MAX)).copied()).collect()
        };
        let mut found = Vec::with_capacity(filed.len());
        for (user, under) in filed {
            self.by_hash.with_hash(under, |hash, s| {
                if s.user_id == user {
                    found.push((user, hash));
                }
            });
        }
        found
    }

    /// The impersonation sessions `admins` hold, as (impersonated user, token hash).
    pub(super) fn impersonated_by(&self, admins: &[UserId]) -> Vec<(UserId, TokenHash)> {
        let hashes: Vec<TokenHash> = {
            let by_impersonator = read(&self.by_impersonator);
            admins.iter().flat_map(|a| by_impersonator.range(of(*a)).map(|(_, h)| *h)).collect()
        };
        hashes.into_iter().filter_map(|h| Some((self.by_hash.get_with(&h, |s| s.user_id)?, h))).collect()
    }
}

/// The range of `user`'s entries in [`SessionIndex::by_impersonator`].
fn of(user: UserId) -> RangeInclusive<(UserId, TokenHash)> {
    (user, [0; 32])..=(user, [u8::MAX; 32])
}

/// The eight bytes a token hash is filed under (see [`SessionIndex::by_user`]).
fn filed(hash: &TokenHash) -> u64 {
    let mut first = [0; 8];
    first.copy_from_slice(&hash[..8]);
    u64::from_le_bytes(first)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::SessionRare;

    fn session(user: UserId, created_ms: i64) -> Arc<Session> {
        let at = Timestamp::from_millis(created_ms);
        Arc::new(Session {
            id: SessionId::new(),
            user_id: user,
            expires_at: at,
            created_at: at,
            updated_at: at,
            ip_address: "192.0.2.1".into(),
            user_agent: "test".into(),
            remember_me: true,
            rare: SessionRare::default(),
        })
    }

    /// What the index holds for each session loaded at start-up, the sessions themselves aside: the session
    /// check's slot (40 bytes at a load of 3/4: ~54) and the entry by user (24 bytes in full B-tree nodes: ~26),
    /// 80 bytes (104 with the whole hash in the entry by user).
    #[test]
    fn a_loaded_session_costs_under_eighty_five_bytes_of_index() {
        let users: Vec<UserId> = (0..2_000).map(|_| UserId::new()).collect();
        let mut sessions: Vec<(TokenHash, Arc<Session>)> = (0..20_000u32)
            .map(|n| {
                let mut hash = [0; 32];
                hash[..4].copy_from_slice(&n.to_le_bytes());
                hash[28..].copy_from_slice(&n.wrapping_mul(2_654_435_761).to_le_bytes());
                (hash, session(users[n as usize % users.len()], i64::from(n)))
            })
            .collect();
        sessions.sort_unstable_by_key(|(hash, s)| (s.user_id, *hash));
        let pairs: Vec<(UserId, u64)> = sessions.iter().map(|(h, s)| SessionIndex::loaded(s.user_id, h)).collect();
        // The list handed over is the ordered set's input, freed once it is built: its bytes were the index's.
        let handed = pairs.capacity() * size_of::<(UserId, u64)>();
        let (index, bytes) = crate::alloc_count::bytes_in(|| {
            let index = SessionIndex::with_capacity(sessions.len());
            for batch in sessions.chunks(256) {
                index.publish_loaded_many(&mut batch.to_vec());
            }
            index.finish_load(pairs);
            index
        });
        let per_session = (bytes + handed as i64) / 20_000;
        assert!(per_session < 85, "{per_session} bytes of index per session");
        assert_eq!(index.len(), 20_000);
        assert_eq!(index.of_user(users[7]).len(), 10);
    }

    /// Start-up keeps a loaded session's user and the first eight bytes of its hash: taking back one user's
    /// sessions under those bytes takes theirs only, not another user's filed under the same bytes.
    #[test]
    fn a_loaded_session_is_taken_back_by_its_user_and_first_eight_bytes() {
        let (user, other) = (UserId::from_bytes([1; 16]), UserId::from_bytes([2; 16]));
        let mut twin = [7; 32];
        twin[31] = 0;
        let index = SessionIndex::default();
        let mut loaded = vec![([7; 32], session(user, 1)), (twin, session(other, 2)), ([8; 32], session(user, 3))];
        let pairs: Vec<_> = loaded.iter().map(|(h, s)| SessionIndex::loaded(s.user_id, h)).collect();
        index.publish_loaded_many(&mut loaded);
        assert_eq!(pairs[0].1, pairs[1].1, "filed under the same eight bytes");
        assert_eq!(index.unpublish_loaded(user, pairs[0].1), [[7; 32]]);
        assert!(index.unpublish_loaded(user, pairs[0].1).is_empty(), "taken once");
        index.finish_load(pairs.into_iter().filter(|(u, _)| *u == other).collect());
        assert_eq!(index.len(), 2);
        assert_eq!(index.of_user(other).len(), 1);
        assert!(index.get(&[8; 32]).is_some() && index.get(&[7; 32]).is_none());
    }

    #[test]
    fn sessions_share_one_copy_of_each_user_agent_until_none_holds_it() {
        let index = SessionIndex::default();
        let (a, b, c) = (index.user_agent("Firefox"), index.user_agent("Firefox"), index.user_agent("curl"));
        assert_eq!(a.as_str(), "Firefox");
        assert_eq!(a.holders(), 3, "the index's copy, a and b: one text");
        assert_eq!(index.forget_unused_agents(), 2, "both still held");
        drop((a, b));
        assert_eq!(index.forget_unused_agents(), 1, "only curl is left");
        assert_eq!(index.user_agent("Firefox").holders(), 2, "made again on its next use");
        drop(c);
    }

    /// Three users side by side in the ordered set; the middle one's hashes at both ends of the hash range.
    #[test]
    fn a_users_sessions_are_theirs_only_after_every_change_and_after_a_load() {
        let (before, user, after) =
            (UserId::from_bytes([1; 16]), UserId::from_bytes([2; 16]), UserId::from_bytes([3; 16]));
        let (low, mid, high) = ([0; 32], [7; 32], [u8::MAX; 32]);
        let sessions = [
            (high, session(user, 3)),
            (low, session(user, 1)),
            ([5; 32], session(before, 1)),
            ([6; 32], session(after, 1)),
            (mid, session(user, 2)),
        ];
        let hashes = |index: &SessionIndex, u| index.of_user(u).into_iter().map(|(h, _)| h).collect::<Vec<_>>();

        let index = SessionIndex::default();
        for (hash, s) in &sessions {
            index.publish(*hash, Some(Arc::clone(s)));
        }
        index.publish(mid, Some(session(user, 2)));
        assert_eq!(hashes(&index, user), [low, mid, high], "oldest first; a refresh does not duplicate");
        assert_eq!(index.of_users(&[before, after]), [(before, [5; 32]), (after, [6; 32])]);

        index.publish(low, None);
        index.publish([9; 32], None);
        assert_eq!(hashes(&index, user), [mid, high]);
        assert_eq!(index.len(), 4);

        let loaded = SessionIndex::default();
        let mut pairs = Vec::new();
        for (hash, s) in &sessions {
            pairs.push(SessionIndex::loaded(s.user_id, hash));
            loaded.publish_loaded(*hash, Arc::clone(s));
        }
        loaded.finish_load(pairs);
        assert_eq!(hashes(&loaded, user), [low, mid, high]);
        assert_eq!(hashes(&loaded, after), [[6; 32]]);
        assert!(loaded.of_user(UserId::from_bytes([4; 16])).is_empty());
    }
}
