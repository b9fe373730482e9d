//! Changes another node committed (PostgreSQL backend, docs/cluster.md), applied to this node's state. The
//! follower reads them from the database's change log; each part goes to the actor that owns it, one message
//! per actor, so the actors stay the only writers of their state and read indexes.

use std::sync::Arc;

use super::{Handles, Unavailable, call, orgs::OrgsMsg, sessions::SessionsMsg, users::UsersMsg};
use crate::domain::{OneTimeToken, OrgId, Organization, RoleSet, Session, TokenHash, User, UserId};
use crate::store::{StoreError, StoreOp, convert};

/// One committed change of another node, as domain values. `None`: removed.
#[derive(Default)]
pub struct RemoteChange {
    pub orgs: Vec<(OrgId, Option<Arc<Organization>>)>,
    pub users: Vec<(UserId, Option<Arc<User>>)>,
    pub tokens: Vec<(TokenHash, Option<Arc<OneTimeToken>>)>,
    pub sessions: Vec<(TokenHash, Option<Arc<Session>>)>,
}

impl RemoteChange {
    /// Sorts a change log entry's ops by owner. Audit entries and mail never travel (no node holds them).
    pub fn from_ops(ops: Vec<StoreOp>, roles: &RoleSet) -> Result<Self, StoreError> {
        let mut change = Self::default();
        for op in ops {
            match op {
                StoreOp::PutOrg(r) => change.orgs.push((OrgId::from_bytes(r.id), Some(Arc::new(convert::org(r))))),
                StoreOp::DeleteOrg(id) => change.orgs.push((OrgId::from_bytes(id), None)),
                StoreOp::PutUser(r) => {
                    change.users.push((UserId::from_bytes(r.id), Some(Arc::new(convert::user(r, roles)))));
                }
                StoreOp::DeleteUser(id) => change.users.push((UserId::from_bytes(id), None)),
                StoreOp::PutToken(hash, r) => change.tokens.push((hash, Some(Arc::new(convert::token(r)?)))),
                StoreOp::DeleteToken(hash) => change.tokens.push((hash, None)),
                StoreOp::PutSession(hash, r) | StoreOp::RefreshSession(hash, r) => {
                    change.sessions.push((hash, Some(Arc::new(convert::session(r)))))
                }
                StoreOp::DeleteSession(_, hash) => change.sessions.push((hash, None)),
                StoreOp::PutAudit(_)
                | StoreOp::DeleteAudit(_)
                | StoreOp::PutOutbox(_)
                | StoreOp::DeleteOutbox(_)
                | StoreOp::ReserveAttempt { .. }
                | StoreOp::EndAttempt { .. }
                | StoreOp::ExpectUser { .. } => {}
            }
        }
        Ok(change)
    }
}

impl Handles {
    /// Applies `change` and returns once every part is in the read indexes: organizations, then accounts (and
    /// their tokens), then sessions, so a session never arrives before its account.
    pub async fn apply_remote(&self, change: RemoteChange) -> Result<(), Unavailable> {
        let RemoteChange { orgs, users, tokens, sessions } = change;
        if !orgs.is_empty() {
            call(&self.orgs.0, |reply| OrgsMsg::Remote { orgs, reply }).await?;
        }
        if !users.is_empty() || !tokens.is_empty() {
            call(&self.users.0, |reply| UsersMsg::Remote { users, tokens, reply }).await?;
        }
        if !sessions.is_empty() {
            call(&self.sessions.0, |reply| SessionsMsg::Remote { sessions, reply }).await?;
        }
        Ok(())
    }
}
