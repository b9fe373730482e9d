//! Start-up: the read indexes rebuilt from the store's records.

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::Indexes;
use super::users::{UserIndex, Views};
use crate::domain::{Mail, OneTimeToken, RoleSet, Timestamp, TokenHash, User, UserId};
use crate::store::{Loaded, Record, Store, StoreError, StoreOp, convert};

/// Builds the indexes record by record. [`finish`](Self::finish) also returns the clean-up to commit before
/// serving: sessions that are expired, or whose user is gone or banned (a ban whose session clean-up was cut
/// short by a crash).
pub struct IndexBuilder<'a> {
    indexes: Indexes,
    cleanup: Vec<StoreOp>,
    outbox: Vec<Mail>,
    roles: &'a RoleSet,
    now: Timestamp,
    /// Every account, in the store's order, until the thread that builds their ordered views takes them.
    users: Vec<Arc<User>>,
    /// That thread: it starts when the accounts are read and runs while the sessions are.
    views: Option<JoinHandle<Result<Views, UserId>>>,
    /// The user and token hash of every live session, for the sessions-by-user view built at the end.
    sessions_by_user: Vec<(UserId, TokenHash)>,
    started: Instant,
    /// When the first session record came: the end of the accounts.
    sessions_started: Option<Instant>,
}

/// Where a start-up's time went (logged with the state loaded).
#[derive(Debug, Clone, Copy, Default)]
pub struct LoadTimes {
    /// Reading, decoding and indexing the organizations and accounts.
    pub users: Duration,
    /// The same for the sessions (and tokens and outbox, which are few).
    pub sessions: Duration,
    /// Building the ordered views (creation order, e-mail order, members, sessions by user) beyond the reading of
    /// the sessions, which the accounts' views overlap on another thread.
    pub views: Duration,
}

/// What start-up builds from the store.
pub struct Built {
    pub indexes: Indexes,
    /// Records to remove before serving (expired sessions and tokens, those of banned or deleted users).
    pub cleanup: Vec<StoreOp>,
    /// Messages still to send, oldest first.
    pub outbox: Vec<Mail>,
    pub times: LoadTimes,
}

impl<'a> IndexBuilder<'a> {
    pub fn new(roles: &'a RoleSet) -> Self {
        Self::with_capacity(roles, 0, 0)
    }

    /// With room for `users` accounts and `sessions` sessions: maps grown one insert at a time copy themselves at
    /// every doubling, and leave the old tables behind until they are reclaimed.
    pub fn with_capacity(roles: &'a RoleSet, users: usize, sessions: usize) -> Self {
        Self {
            indexes: Indexes::with_capacity(users, sessions),
            cleanup: Vec::new(),
            outbox: Vec::new(),
            roles,
            now: Timestamp::now(),
            users: Vec::new(),
            views: None,
            sessions_by_user: Vec::new(),
            started: Instant::now(),
            sessions_started: None,
        }
    }

    /// Adds one record; organizations must come before users, users before sessions (as `Store::visit` does).
    pub fn add(&mut self, record: Record) -> Result<(), StoreError> {
        match record {
            Record::Org(r) => {
                let org = convert::org(r);
                if self.indexes.orgs.slug_taken(&org.slug) {
                    return Err(StoreError::Corrupt(format!("two organizations share the slug of {}", org.id)));
                }
                self.indexes.orgs.publish(Arc::new(org));
            }
            Record::User(r) => {
                // Two accounts with one e-mail are refused in `finish`, where the e-mail order is built.
                let user = Arc::new(convert::user(r, self.roles));
                self.users.push(Arc::clone(&user));
                self.indexes.users.publish_loaded(user);
            }
            Record::Session(hash, r) => {
                if self.sessions_started.is_none() {
                    self.sessions_started = Some(Instant::now());
                    self.build_views();
                }
                let agent = self.indexes.sessions.user_agent(&r.user_agent);
                let session = convert::session_with_agent(r, agent);
                let live =
                    !session.is_expired(self.now) && self.indexes.users.may_hold_session(session.user_id, self.now);
                if live {
                    self.sessions_by_user.push((session.user_id, hash));
                    self.indexes.sessions.publish_loaded(hash, Arc::new(session));
                } else {
                    self.cleanup.push(StoreOp::DeleteSession(session.user_id.to_bytes(), hash));
                }
            }
            Record::Token(hash, r) => {
                let token = convert::token(r)?;
                let live = !token.is_expired(self.now) && self.indexes.users.get(token.user_id).is_some();
                // Of two live tokens of one user and kind (a crash between issuing and cleaning up), the newer wins.
                let newer = |t: &OneTimeToken| {
                    self.indexes
                        .tokens
                        .latest(t.user_id, t.kind)
                        .and_then(|h| self.indexes.tokens.get(&h))
                        .is_none_or(|old| old.created_at <= t.created_at)
                };
                if live && newer(&token) {
                    if let Some(old) = self.indexes.tokens.latest(token.user_id, token.kind) {
                        self.indexes.tokens.publish(old, None);
                        self.cleanup.push(StoreOp::DeleteToken(old));
                    }
                    self.indexes.tokens.publish(hash, Some(Arc::new(token)));
                } else {
                    self.cleanup.push(StoreOp::DeleteToken(hash));
                }
            }
            Record::Outbox(r) => self.outbox.push(convert::mail(r)),
        }
        Ok(())
    }

    /// Starts building the accounts' ordered views on another thread (the second core), once every account is read.
    fn build_views(&mut self) {
        let users = std::mem::take(&mut self.users);
        self.views = Some(std::thread::spawn(move || UserIndex::build_views(users)));
    }

    /// Builds the ordered views. Fails when two accounts share an e-mail address.
    pub fn finish(mut self) -> Result<Built, StoreError> {
        let read = Instant::now();
        let sessions_started = self.sessions_started.unwrap_or(read);
        if self.views.is_none() {
            self.build_views();
        }
        self.indexes.sessions.finish_load(std::mem::take(&mut self.sessions_by_user));
        let views = self.views.take().map(JoinHandle::join);
        // A panic there is a bug, not bad data: the same as a panic here.
        match views
            .unwrap_or_else(|| Ok(UserIndex::build_views(Vec::new())))
            .unwrap_or_else(|p| std::panic::resume_unwind(p))
        {
            Ok(views) => self.indexes.users.install(views),
            Err(id) => return Err(StoreError::Corrupt(format!("two accounts share the e-mail of user {id}"))),
        }
        let times = LoadTimes {
            users: sessions_started - self.started,
            sessions: read - sessions_started,
            views: read.elapsed(),
        };
        Ok(Built { indexes: self.indexes, cleanup: self.cleanup, outbox: self.outbox, times })
    }
}

/// The indexes of everything in `store`, with the checks a server makes before it serves; also what `restore`
/// runs on a backup before it replaces anything, so the two cannot drift apart.
pub fn build(store: &Store, roles: &RoleSet) -> Result<Built, StoreError> {
    let (users, sessions) = store.counts()?;
    let mut builder = IndexBuilder::with_capacity(roles, to_usize(users), to_usize(sessions));
    store.visit(|record| builder.add(record))?;
    builder.finish()
}

fn to_usize(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

/// Builds the indexes from records already in memory (benchmarks, tools).
pub fn indexes(loaded: Loaded, roles: &RoleSet) -> Result<Built, StoreError> {
    let mut builder = IndexBuilder::new(roles);
    let Loaded { users, orgs, sessions } = loaded;
    let records = orgs
        .into_iter()
        .map(Record::Org)
        .chain(users.into_iter().map(Record::User))
        .chain(sessions.into_iter().map(|(h, s)| Record::Session(h, s)));
    for record in records {
        builder.add(record)?;
    }
    builder.finish()
}
