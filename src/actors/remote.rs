//! Changes committed to the database that this node's memory does not hold yet (PostgreSQL backend,
//! docs/cluster.md): other nodes' changes, an own commit whose outcome was lost, and records read back after a
//! conflict. The follower reads them in sequence order; each part goes to the actor that owns it, so the actors
//! stay the only writers of their state and read indexes. Each actor applies a record only if its own commits
//! have not written it at that sequence or later ([`Gate`]): an older change never undoes a newer one.
//!
//! The users and sessions actors take these changes through an inbox beside their mailbox, not in it, so a
//! change does not wait for the actor's own commit in flight (see [`super::inbox`]).
//!
//! The actors import this vocabulary; it names none of them: each part goes to its actor through that actor's
//! handle ([`Handles::apply_remote`]).

use std::sync::Arc;

use super::linked::LinkedAccount;
use super::{Handles, Unavailable};
use crate::domain::{
    ApiKey, ApiKeyId, Invitation, InvitationId, Membership, OneTimeToken, OrgId, Organization, RoleSet, Session,
    Timestamp, TokenHash, User, UserId,
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
    /// API keys written (`Some`) or deleted (the sessions actor's, with the sessions).
    pub api_keys: Vec<(ApiKeyId, Option<Arc<ApiKey>>)>,
    /// Uses of keys' quotas, and when.
    pub key_uses: Vec<(ApiKeyId, Timestamp)>,
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

/// A change to the sessions another node made (or this node's own, whose outcome was lost), from the change log.
pub enum SessionChange {
    Put(TokenHash, Arc<Session>),
    Delete(UserId, TokenHash),
    /// Every session of the account, but the one kept.
    DeleteAllOf(UserId, Option<TokenHash>),
}

impl SessionChange {
    /// The account whose session(s) it changes.
    pub(super) fn user(&self) -> UserId {
        match self {
            SessionChange::Put(_, session) => session.user_id,
            SessionChange::Delete(user, _) | SessionChange::DeleteAllOf(user, _) => *user,
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
    pub api_keys: Vec<(ApiKeyId, Option<Arc<ApiKey>>)>,
    pub key_uses: Vec<(ApiKeyId, Timestamp)>,
    pub gate: Gate,
}

impl ForSessions {
    /// As [`ForUsers::split`], by account: a session waits when the batch writes or ends any session of its account;
    /// an API key when the batch writes that key.
    pub(super) fn split(self, writes: &Writes) -> (Self, Option<Self>) {
        let (sessions, later) = part(self.sessions, |change| writes.includes_sessions_of(change.user().to_bytes()));
        let (api_keys, keys_later) = part(self.api_keys, |(id, _)| writes.includes(Key::ApiKey(id.to_bytes())));
        let (key_uses, uses_later) = part(self.key_uses, |(id, _)| writes.includes(Key::ApiKey(id.to_bytes())));
        let later = (!later.is_empty() || !keys_later.is_empty() || !uses_later.is_empty()).then(|| Self {
            sessions: later,
            api_keys: keys_later,
            key_uses: uses_later,
            gate: self.gate.clone(),
        });
        (Self { sessions, api_keys, key_uses, gate: self.gate }, later)
    }
}

/// `items` split into those `waits` says no to, and those it says yes to.
fn part<T>(items: Vec<T>, waits: impl Fn(&T) -> bool) -> (Vec<T>, Vec<T>) {
    items.into_iter().partition(|item| !waits(item))
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
            api_keys: Vec::new(),
            key_uses: Vec::new(),
        };
        for op in &ops {
            // Records are cloned out of the borrowed view: a few per entry, on the follower's path only.
            match op.held() {
                // Grants are no actor's: the follower hands them to the identity provider's index itself.
                None | Some(Held::PutOAuthGrant(_) | Held::DeleteOAuthGrant(_)) => {}
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
                Some(Held::PutApiKey(r)) => {
                    change.api_keys.push((ApiKeyId::from_bytes(r.id), Some(Arc::new(convert::api_key(r.clone())))))
                }
                Some(Held::DeleteApiKey { id, .. }) => change.api_keys.push((ApiKeyId::from_bytes(id), None)),
                Some(Held::UseApiKey { id, at_ms, .. }) => {
                    change.key_uses.push((ApiKeyId::from_bytes(id), Timestamp::from_millis(at_ms)))
                }
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
        let RemoteChange { gate, orgs, users, tokens, members, accounts, sessions, api_keys, key_uses } = change;
        if !orgs.is_empty() {
            self.orgs.apply_remote(orgs, gate.clone()).await?;
        }
        if !users.is_empty() || !tokens.is_empty() || !members.is_empty() || !accounts.is_empty() {
            self.users.apply_remote(ForUsers { users, tokens, members, accounts, gate: gate.clone() }).await?;
        }
        if !sessions.is_empty() || !api_keys.is_empty() || !key_uses.is_empty() {
            self.sessions.apply_remote(ForSessions { sessions, api_keys, key_uses, gate }).await?;
        }
        Ok(())
    }
}
