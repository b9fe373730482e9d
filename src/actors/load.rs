//! Start-up: the read indexes rebuilt from the store's records.

use std::sync::Arc;

use super::Indexes;
use crate::domain::{Mail, OneTimeToken, RoleSet, Timestamp};
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
}

/// What start-up builds from the store.
pub struct Built {
    pub indexes: Indexes,
    /// Records to remove before serving (expired sessions and tokens, those of banned or deleted users).
    pub cleanup: Vec<StoreOp>,
    /// Messages still to send, oldest first.
    pub outbox: Vec<Mail>,
}

impl<'a> IndexBuilder<'a> {
    pub fn new(roles: &'a RoleSet) -> Self {
        Self { indexes: Indexes::default(), cleanup: Vec::new(), outbox: Vec::new(), roles, now: Timestamp::now() }
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
                let user = convert::user(r, self.roles);
                if self.indexes.users.by_email(&user.email).is_some() {
                    return Err(StoreError::Corrupt(format!("two accounts share the e-mail of user {}", user.id)));
                }
                self.indexes.users.publish_loaded(Arc::new(user));
            }
            Record::Session(hash, r) => {
                let session = convert::session(r);
                let live = !session.is_expired(self.now)
                    && self.indexes.users.get(session.user_id).is_some_and(|u| !u.is_banned_at(self.now));
                if live {
                    self.indexes.sessions.publish(hash, Some(Arc::new(session)));
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

    pub fn finish(self) -> Built {
        self.indexes.users.finish_load();
        Built { indexes: self.indexes, cleanup: self.cleanup, outbox: self.outbox }
    }
}

/// The indexes of everything in `store`, with the checks a server makes before it serves; also what `restore`
/// runs on a backup before it replaces anything, so the two cannot drift apart.
pub fn build(store: &Store, roles: &RoleSet) -> Result<Built, StoreError> {
    let mut builder = IndexBuilder::new(roles);
    store.visit(|record| builder.add(record))?;
    Ok(builder.finish())
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
    Ok(builder.finish())
}
