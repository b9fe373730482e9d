//! Changes committed to the database that this node's memory does not hold yet (PostgreSQL backend,
//! docs/cluster.md): other nodes' changes, an own commit whose outcome was lost, and records read back after a
//! conflict. The follower reads them in sequence order; each part goes to the actor that owns it, one message
//! per actor, so the actors stay the only writers of their state and read indexes. Each actor applies a record
//! only if its own commits have not written it at that sequence or later ([`Gate`]): an older change never undoes
//! a newer one.

use std::sync::Arc;

use super::linked::LinkedAccount;
use super::sessions::{SessionChange, SessionsMsg};
use super::{Handles, Unavailable, call, orgs::OrgsMsg, users::UsersMsg};
use crate::domain::{
    Invitation, InvitationId, Membership, OneTimeToken, OrgId, Organization, RoleSet, TokenHash, User, UserId,
};
use crate::store::own::Gate;
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
            let gate = gate.clone();
            call(&self.users.0, |reply| UsersMsg::Remote { users, tokens, members, accounts, gate, reply }).await?;
        }
        if !sessions.is_empty() {
            call(&self.sessions.0, |reply| SessionsMsg::Remote { sessions, gate, reply }).await?;
        }
        Ok(())
    }
}
