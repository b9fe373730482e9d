//! The store: the durable copy of all state, in a redb database in the data directory (the default) or in a
//! PostgreSQL database shared by several nodes ([`backend`], docs/cluster.md).
//!
//! State lives in memory (the actors and their read indexes); this module only loads it at start-up and writes
//! changes. Nothing outside this module names redb.
//!
//! - [`Store::open`] opens (or creates) `<data_dir>/service-auth.redb`; a second process gets [`StoreError::Locked`].
//! - [`Store::load`] reads every record, for start-up.
//! - [`Store::commit`] writes a list of [`StoreOp`]s in one transaction and returns after fsync.
//! - [`StoreWriter`] is the one task that commits for the whole server. It takes every request pending
//!   (`recv_many`), writes them in one transaction, commits once (group commit) and only then answers each
//!   request. Secondary indexes (e-mail → user, slug → organization) are not stored: they are rebuilt in memory at
//!   load, so they cannot disagree with the records.

pub mod api_key_records;
pub mod audit;
mod backend;
pub mod changes;
pub mod codec;
pub mod convert;
mod db;
pub mod follower;
pub mod hook_records;
pub mod hooks;
pub mod linked;
pub mod own;
pub mod passkey_records;
pub(crate) mod postgres;
pub mod provider_records;
pub mod records;
pub mod scim_records;
pub mod sso_records;
mod worker;
mod writer;

pub use backend::Store;
pub use db::{FaultSwitch, LockHolder, create_private, lock_holder};
pub use postgres::{Claim, PgStore};

/// The store's file in `data_dir` (what the console's status panel measures).
pub fn file_in(data_dir: &std::path::Path) -> std::path::PathBuf {
    data_dir.join(db::FILE_NAME)
}
pub use codec::newer_records_skipped;
pub use hook_records::{DeliveryRecordV1, WebhookMessageRecordV1, WebhookRecordV1};
pub use passkey_records::{PasskeyChallengeRecordV1, PasskeyRecordV1};
pub use provider_records::{
    ClientRecord, ClientRecordV1, ClientRecordV2, DeviceDecisionV1, OAuthCodeRecordV1, OAuthConsentRecordV1,
    OAuthDeviceRecordV1, OAuthGrantRecord, OAuthGrantRecordV1, OAuthGrantRecordV2, SigningKeyRecordV1, grant_id_text,
};
pub use records::{
    AuditRecordV1, InvitationRecord, InvitationRecordV1, MembershipRecord, OrgRecord, OrgRecordV1, OrgRecordV2,
    OutboxRecordV1, SessionRecord, SessionRecordV1, TokenRecord, TokenRecordV1, TokenRecordV2, TwoFactorRecordV1,
    UserRecord, UserRecordV1, UserRecordV2,
};
pub use records::{OrgRoleRecordV1, TeamMemberRecordV1, TeamRecordV1};
pub use scim_records::{ScimGroupRecordV1, ScimLookup, ScimTokenRecordV1, ScimUserRecordV1};
pub use sso_records::{RoleMappingV1, SamlConfigV1, SsoProviderRecord, SsoProviderRecordV1, SsoProviderRecordV2};
#[cfg(test)]
pub(crate) use writer::ManualDisk;
pub use writer::{CommitMetrics, OnCommit, StoreWriter, WriterDone};

/// SHA-256 of a session token: the key of the sessions table (one definition, the domain's).
pub use crate::domain::TokenHash;

/// How many audit entries retention keeps at most: those anonymous callers caused
/// ([`crate::domain::is_anonymous_action`]) and the others, each counted against its own cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AuditCaps {
    pub entries: u64,
    pub anonymous: u64,
}

/// One change to the store. A list of these is applied atomically.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreOp {
    PutUser(UserRecord),
    /// An account removed (its sessions are deleted in the same transaction by their own ops).
    DeleteUser([u8; 16]),
    PutOrg(OrgRecord),
    /// An organization removed (its members are detached in the same transaction by their own ops).
    DeleteOrg([u8; 16]),
    PutSession(TokenHash, SessionRecord),
    /// A live session extended (its new expiry): like [`PutSession`](Self::PutSession), except that a session
    /// ended meanwhile stays ended. Several nodes: a sign-out on another node may have removed it a moment ago; the
    /// refresh then writes nothing (it never brings the session back, and refuses nothing beside it) and the node
    /// reads the session back from the database, gone.
    RefreshSession(TokenHash, SessionRecord),
    /// A session ended: its user's id and its token's hash (sessions are stored by user, then hash, so that
    /// ending every session of one account writes a few neighbouring pages, not one page per session).
    DeleteSession([u8; 16], TokenHash),
    /// Every session of an account ended (a ban, a new password, "sign out everywhere"), but `except` if given:
    /// by user in the store itself, so that a session this node has not seen yet (started on another node a
    /// moment ago) ends too, and every node drops every session of that user it holds. Without `except` (a ban,
    /// a password reset, "sign out everywhere") it also ends every grant of the identity provider to the user,
    /// `offline_access` ones included: in the same commit, on every node (src/provider/grants.rs).
    DeleteSessionsOf {
        user: [u8; 16],
        except: Option<TokenHash>,
    },
    /// Audit entries ride in the same transaction as the change they record.
    PutAudit(AuditRecordV1),
    /// Retention: an audit entry past its time (or beyond the size cap).
    DeleteAudit([u8; 16]),
    /// A one-time token, keyed by its SHA-256.
    PutToken(TokenHash, TokenRecord),
    DeleteToken(TokenHash),
    /// A message to send; deleted once a mail server has accepted it.
    PutOutbox(OutboxRecordV1),
    DeleteOutbox([u8; 16]),
    /// Several nodes: reserve one password check of `email` against the failure limit every node shares, in the
    /// database (refused with [`Conflict::Locked`] at `max` reservations and failures per window). The embedded
    /// store has nothing to do: one node's users actor keeps the limit alone.
    ReserveAttempt {
        email: String,
        max: u32,
        window_ms: i64,
        now_ms: i64,
    },
    /// Several nodes: the account must still be `record` (`None`: must not exist) in the database, or the request
    /// is refused with [`Conflict::Changed`]: another node changed it since this node read it, and writing the
    /// whole record computed from the older one would undo that change (a ban, say). The embedded store has
    /// nothing to check: one node's users actor is the only writer.
    ExpectUser {
        id: [u8; 16],
        record: Option<Box<UserRecord>>,
    },
    /// Several nodes: a reserved check ended without a failure: `verified` clears the count, otherwise (never
    /// checked) the reservation is given back. A wrong password leaves it counted.
    EndAttempt {
        email: String,
        verified: bool,
    },
    /// A membership written (joined, or its roles changed). One per (organization, user): the key says so.
    PutMember(MembershipRecord),
    /// A membership ended: organization id, user id.
    DeleteMember([u8; 16], [u8; 16]),
    /// An invitation written (sent, or its status changed).
    PutInvitation(InvitationRecord),
    /// An invitation removed (with its organization).
    DeleteInvitation([u8; 16]),
    /// Several nodes: once this request's ops are applied, organization `org` must still have an owner, or the
    /// request is refused with [`Conflict::LastOwner`]. Checked under a lock of the organization's row, so two
    /// nodes each removing one of its last two owners are serialised and the second finds none left. The embedded
    /// store has nothing to check: one node's users actor holds the rule alone.
    ExpectOwner([u8; 16]),
    /// The overview's counters ([`crate::actors::counters`]): add `n` to counter `kind` in the hour that starts at
    /// `hour_ms` and in that hour's day (UTC). Added to what is stored, never written over it, so the counts of
    /// several nodes add up in the shared database.
    AddCount {
        kind: u8,
        hour_ms: i64,
        n: u64,
    },
    /// The counters' retention: hourly buckets that start before `hours_before_ms`, daily ones before
    /// `days_before_ms`, are deleted.
    PruneCounts {
        hours_before_ms: i64,
        days_before_ms: i64,
    },
    /// A webhook endpoint registered or changed (never its failing state: [`SetWebhookFailing`](Self::SetWebhookFailing)).
    PutWebhook(WebhookRecordV1),
    /// An endpoint removed, with its queue and its delivery log.
    DeleteWebhook([u8; 16]),
    /// The deliverer marks an endpoint failing (since when) or healthy again: apart from the record, so that it
    /// never overwrites an administrator's change with an older copy.
    SetWebhookFailing {
        id: [u8; 16],
        since_ms: Option<i64>,
    },
    /// A message queued at the end of its endpoint's queue (a test, or a resend). The messages a change raises are
    /// queued by the backend itself in the change's commit ([`hooks::Fanout`]).
    PutWebhookMessage(WebhookMessageRecordV1),
    /// A message delivered: it leaves its endpoint's queue.
    DeleteWebhookMessage {
        endpoint: [u8; 16],
        seq: u64,
    },
    /// One delivery attempt, for the delivery log.
    PutDelivery(DeliveryRecordV1),
    /// Retention of the delivery log: every attempt before this time.
    DeleteDeliveriesBefore {
        before_ms: i64,
    },
    /// A passkey registered, renamed, or its counter moved on by a sign-in. (A deleted account's passkeys go with
    /// its [`DeleteUser`](Self::DeleteUser), in the store itself.)
    PutPasskey(PasskeyRecordV1),
    DeletePasskey {
        user: [u8; 16],
        id: [u8; 16],
    },
    /// A passkey ceremony's state, keyed by the SHA-256 of its challenge cookie; taken by
    /// [`Store::take_passkey_challenge`], outside the writer, so that only one verification can have it.
    PutPasskeyChallenge(TokenHash, PasskeyChallengeRecordV1),
    /// An identity at a provider linked to an account (src/oauth). Several nodes: refused with
    /// [`Conflict::AccountTaken`] when another node linked the same identity a moment ago.
    PutAccount(linked::LinkedAccountRecordV1),
    /// A linked identity removed: its id and its user's.
    DeleteAccount {
        id: [u8; 16],
        user: [u8; 16],
    },
    /// A sign-in flow started: kept in the store (by the SHA-256 of its `state`) so that any node can finish it.
    PutFlow(TokenHash, linked::OAuthFlowRecordV1),
    /// A sign-in flow finished: deleted. Several nodes: refused with [`Conflict::FlowUsed`] when it is gone
    /// already (another node's callback took it), so a `state` is used once across all of them.
    TakeFlow(TokenHash),
    /// The identity provider's signing key created, or retired (its `signs_until_ms` set) by a rotation.
    PutSigningKey(SigningKeyRecordV1),
    /// A retired signing key whose tokens have all expired: no longer published.
    DeleteSigningKey([u8; 16]),
    /// An API key created or changed (a use of its window is counted in memory only).
    PutApiKey(api_key_records::ApiKeyRecordV1),
    /// One use of a key's quota at `at_ms`, counted against the record the store holds
    /// ([`convert::api_key_used`]): what makes a quota exact across a restart and across nodes. Several nodes:
    /// refused with [`Conflict::QuotaSpent`] when the database's copy has none left (another node took the last
    /// use), or [`Conflict::ApiKeyGone`] when the key was deleted meanwhile.
    UseApiKey {
        id: [u8; 16],
        user: [u8; 16],
        at_ms: i64,
    },
    /// An API key deleted (by its owner, an administrator, its expiry, or with its owner's ban or removal): its
    /// id and its owner's.
    DeleteApiKey {
        id: [u8; 16],
        user: [u8; 16],
    },
    /// A client of the identity provider registered or changed.
    PutOAuthClient(ClientRecord),
    /// A client removed, by `client_id`.
    DeleteOAuthClient(String),
    /// An authorization code issued: kept in the store by its SHA-256, so that any node can redeem it.
    PutOAuthCode(TokenHash, OAuthCodeRecordV1),
    /// An authorization code redeemed: deleted (expired ones go with it). Several nodes: refused with
    /// [`Conflict::CodeUsed`] when it is gone already, so a code is redeemed once across all of them.
    TakeOAuthCode(TokenHash),
    /// A device authorization request started (RFC 8628): kept in the store by the SHA-256 of its device code (and
    /// found by its user code's), so that any node can show, decide and redeem it.
    PutOAuthDevice(TokenHash, OAuthDeviceRecordV1),
    /// A device polled the token endpoint at `at_ms`, now to keep `interval_secs` between polls: only those fields
    /// of the stored request change, so a poll never undoes a decision another node made meanwhile.
    PollOAuthDevice {
        hash: TokenHash,
        at_ms: i64,
        interval_secs: u32,
    },
    /// The user approved or denied a pending device request. Several nodes: refused with [`Conflict::CodeUsed`]
    /// when it is no longer pending (decided or redeemed on another node), so it is decided once.
    DecideOAuthDevice {
        hash: TokenHash,
        decision: DeviceDecisionV1,
    },
    /// A device request redeemed, or ended by its denial or expiry: deleted. Several nodes: refused with
    /// [`Conflict::CodeUsed`] when it is gone already, so a device code is redeemed once across all of them.
    TakeOAuthDevice(TokenHash),
    /// A user's consent to a client given, widened or narrowed.
    PutOAuthConsent(OAuthConsentRecordV1),
    /// A grant of the identity provider made (a code redeemed, client credentials).
    PutOAuthGrant(OAuthGrantRecord),
    /// A grant's refresh token used: the grant with its new one. Several nodes: refused with
    /// [`Conflict::RefreshUsed`] unless the stored grant's refresh token is still `from`, so a refresh token is
    /// used once across all of them.
    RotateOAuthGrant {
        from: TokenHash,
        grant: OAuthGrantRecord,
    },
    /// A grant ended (revoked, or a rotated-out refresh token presented again), with every token it issued.
    DeleteOAuthGrant([u8; 16]),
    /// A user's consent to a client withdrawn (by the user or an administrator): the next authorization asks again.
    DeleteOAuthConsent {
        user: [u8; 16],
        client_id: String,
    },
    /// An organization's single sign-on provider registered or changed.
    /// Boxed: the largest record of any op, it would size every op of a batch.
    PutSsoProvider(Box<SsoProviderRecord>),
    /// A single sign-on provider removed, by `providerId`.
    DeleteSsoProvider(String),
    /// A SCIM bearer token made for an organization.
    PutScimToken(ScimTokenRecordV1),
    /// A SCIM token revoked, by id.
    DeleteScimToken([u8; 16]),
    /// What an organization's directory said of an account it provisioned, created or changed.
    PutScimUser(ScimUserRecordV1),
    /// The directory deprovisioned the account: its organization's and its own id.
    DeleteScimUser {
        org: [u8; 16],
        user: [u8; 16],
    },
    /// A team an organization's directory made as a SCIM Group, created or changed (its team is written with it).
    PutScimGroup(ScimGroupRecordV1),
    /// The directory deleted the Group (its team goes in the same commit): its organization's and its team's id.
    DeleteScimGroup {
        org: [u8; 16],
        team: [u8; 16],
    },
}

/// How long a device authorization request is kept past its end before the housekeeping deletes it: a device
/// polling a little late hears `expired_token` (RFC 8628 §3.5) rather than `invalid_grant`.
pub const DEVICE_EXPIRED_KEPT_MS: i64 = 3_600_000;

/// One stored counter bucket: counter `kind`'s count in the hour or the day starting at `start_ms` (UTC).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CountRow {
    pub period: Period,
    pub kind: u8,
    pub start_ms: i64,
    pub n: u64,
}

/// The length of a counter bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Period {
    Hour,
    Day,
}

impl Period {
    pub const fn millis(self) -> i64 {
        match self {
            Period::Hour => 3_600_000,
            Period::Day => 86_400_000,
        }
    }

    /// The start of the bucket holding `at_ms`.
    pub const fn floor(self, at_ms: i64) -> i64 {
        at_ms - at_ms.rem_euclid(self.millis())
    }

    /// Its number in the store's key and column.
    pub(crate) const fn code(self) -> u8 {
        match self {
            Period::Hour => 0,
            Period::Day => 1,
        }
    }

    pub(crate) fn from_code(code: u8) -> Result<Self, StoreError> {
        match code {
            0 => Ok(Period::Hour),
            1 => Ok(Period::Day),
            other => Err(StoreError::Corrupt(format!("counter bucket of unknown period {other}"))),
        }
    }
}

/// What an op changes of the records every node holds in memory: the ops the change log carries to the other
/// nodes, which the follower hands to the actors and which an own commit marks as held. The one classification
/// of [`StoreOp`] (the change log, the follower and the own commits all go through it), so that a new op is
/// sorted here once, by an exhaustive match, instead of being silently ignored by one of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Held<'a> {
    PutUser(&'a UserRecord),
    DeleteUser([u8; 16]),
    PutOrg(&'a OrgRecord),
    DeleteOrg([u8; 16]),
    /// A session written: started, or refreshed (to the other nodes the same: they hold the new record).
    PutSession(TokenHash, &'a SessionRecord),
    DeleteSession([u8; 16], TokenHash),
    DeleteSessionsOf {
        user: [u8; 16],
        except: Option<TokenHash>,
    },
    PutToken(TokenHash, &'a TokenRecord),
    DeleteToken(TokenHash),
    PutMember(&'a MembershipRecord),
    DeleteMember([u8; 16], [u8; 16]),
    PutInvitation(&'a InvitationRecord),
    DeleteInvitation([u8; 16]),
    PutAccount(&'a linked::LinkedAccountRecordV1),
    DeleteAccount {
        id: [u8; 16],
        user: [u8; 16],
    },
    PutApiKey(&'a api_key_records::ApiKeyRecordV1),
    DeleteApiKey {
        id: [u8; 16],
        user: [u8; 16],
    },
    /// One use of a key's quota: each node counts it against the copy it holds.
    UseApiKey {
        id: [u8; 16],
        user: [u8; 16],
        at_ms: i64,
    },
    /// A grant of the identity provider made, or refreshed.
    PutOAuthGrant(&'a OAuthGrantRecord),
    DeleteOAuthGrant([u8; 16]),
}

impl StoreOp {
    /// What this op changes in the nodes' memory; `None` for what no node holds (audit entries, mail: read
    /// from the store, each node sending what it queued) and for checks that write no record.
    pub fn held(&self) -> Option<Held<'_>> {
        Some(match self {
            StoreOp::PutUser(r) => Held::PutUser(r),
            StoreOp::DeleteUser(id) => Held::DeleteUser(*id),
            StoreOp::PutOrg(r) => Held::PutOrg(r),
            StoreOp::DeleteOrg(id) => Held::DeleteOrg(*id),
            StoreOp::PutSession(hash, r) | StoreOp::RefreshSession(hash, r) => Held::PutSession(*hash, r),
            StoreOp::DeleteSession(user, hash) => Held::DeleteSession(*user, *hash),
            StoreOp::DeleteSessionsOf { user, except } => Held::DeleteSessionsOf { user: *user, except: *except },
            StoreOp::PutToken(hash, r) => Held::PutToken(*hash, r),
            StoreOp::DeleteToken(hash) => Held::DeleteToken(*hash),
            StoreOp::PutMember(r) => Held::PutMember(r),
            StoreOp::DeleteMember(org, user) => Held::DeleteMember(*org, *user),
            StoreOp::PutInvitation(r) => Held::PutInvitation(r),
            StoreOp::DeleteInvitation(id) => Held::DeleteInvitation(*id),
            StoreOp::PutAccount(r) => Held::PutAccount(r),
            StoreOp::DeleteAccount { id, user } => Held::DeleteAccount { id: *id, user: *user },
            StoreOp::PutApiKey(r) => Held::PutApiKey(r),
            StoreOp::DeleteApiKey { id, user } => Held::DeleteApiKey { id: *id, user: *user },
            StoreOp::UseApiKey { id, user, at_ms } => Held::UseApiKey { id: *id, user: *user, at_ms: *at_ms },
            StoreOp::ExpectOwner(_)
            | StoreOp::PutAudit(_)
            | StoreOp::DeleteAudit(_)
            | StoreOp::PutOutbox(_)
            | StoreOp::DeleteOutbox(_)
            | StoreOp::ReserveAttempt { .. }
            | StoreOp::EndAttempt { .. }
            | StoreOp::ExpectUser { .. }
            | StoreOp::AddCount { .. }
            | StoreOp::PruneCounts { .. }
            // Flows are read from the store by the node that finishes them; no node holds them in memory.
            | StoreOp::PutFlow(..)
            | StoreOp::TakeFlow(_) => return None,
            // No node holds webhooks in memory: each node's deliverer reads endpoints and queues from the store.
            StoreOp::PutWebhook(_)
            | StoreOp::DeleteWebhook(_)
            | StoreOp::SetWebhookFailing { .. }
            | StoreOp::PutWebhookMessage(_)
            | StoreOp::DeleteWebhookMessage { .. }
            | StoreOp::PutDelivery(_)
            | StoreOp::DeleteDeliveriesBefore { .. } => return None,
            // No node holds passkeys or ceremonies in memory: each reads them from the store when asked (a sign-in
            // with a passkey, a list), so every node sees the shared database's and nothing needs to travel.
            StoreOp::PutPasskey(_) | StoreOp::DeletePasskey { .. } | StoreOp::PutPasskeyChallenge(..) => return None,
            // Each node reads the signing keys from the store (at start, after its own rotation, and once a
            // minute): a new key is published before it signs, for longer than that minute (src/provider/keys.rs).
            StoreOp::PutSigningKey(_) | StoreOp::DeleteSigningKey(_) => return None,
            // Clients are read from the store where they are needed, as passkeys are, so that a client disabled
            // or removed on one node is refused on every node at once (src/provider/clients.rs).
            StoreOp::PutOAuthClient(_) | StoreOp::DeleteOAuthClient(_) => return None,
            // Codes and consents too: read from the store by the node that redeems a code or asks for consent.
            StoreOp::PutOAuthCode(..)
            | StoreOp::TakeOAuthCode(_)
            | StoreOp::PutOAuthDevice(..)
            | StoreOp::PollOAuthDevice { .. }
            | StoreOp::DecideOAuthDevice { .. }
            | StoreOp::TakeOAuthDevice(_)
            | StoreOp::PutOAuthConsent(_)
            | StoreOp::DeleteOAuthConsent { .. } => return None,
            // Grants are held in every node's memory: introspection answers from it (src/provider/grants.rs).
            StoreOp::PutOAuthGrant(r) | StoreOp::RotateOAuthGrant { grant: r, .. } => Held::PutOAuthGrant(r),
            StoreOp::DeleteOAuthGrant(id) => Held::DeleteOAuthGrant(*id),
            // Single sign-on providers are read from the store where they are needed, as the identity provider's
            // clients are, so that a provider changed or removed on one node is used so on every node at once.
            StoreOp::PutSsoProvider(_) | StoreOp::DeleteSsoProvider(_) => return None,
            // SCIM tokens and provisioned users are read from the store where they are needed (each SCIM call), so
            // a token revoked on one node is refused on every node at once (src/scim).
            StoreOp::PutScimToken(_)
            | StoreOp::DeleteScimToken(_)
            | StoreOp::PutScimUser(_)
            | StoreOp::DeleteScimUser { .. }
            | StoreOp::PutScimGroup(_)
            | StoreOp::DeleteScimGroup { .. } => return None,
        })
    }
}

/// One stored record, as [`Store::visit`] hands them out.
#[derive(Debug)]
pub enum Record {
    Org(OrgRecord),
    Member(MembershipRecord),
    Invitation(InvitationRecord),
    User(UserRecord),
    Session(TokenHash, SessionRecord),
    Token(TokenHash, TokenRecord),
    Outbox(OutboxRecordV1),
    Account(linked::LinkedAccountRecordV1),
    ApiKey(api_key_records::ApiKeyRecordV1),
}

/// One side of [`Store::visit_split`]: the accounts (with the organizations, tokens and outbox) or the sessions.
pub trait Visitor {
    fn record(&mut self, record: Record) -> Result<(), StoreError>;
    /// Every record of this side has been handed over (the other side may still be reading).
    fn done(&mut self);
}

/// Everything in the store, read into memory.
#[derive(Debug, Default)]
pub struct Loaded {
    pub users: Vec<UserRecord>,
    pub orgs: Vec<OrgRecord>,
    pub members: Vec<MembershipRecord>,
    pub invitations: Vec<InvitationRecord>,
    pub sessions: Vec<(TokenHash, SessionRecord)>,
    pub accounts: Vec<linked::LinkedAccountRecordV1>,
    pub api_keys: Vec<api_key_records::ApiKeyRecordV1>,
}

impl Loaded {
    /// Everything `visit` hands out that a load keeps (tokens and mail are left in the store).
    fn collect(
        visit: impl FnOnce(&mut dyn FnMut(Record) -> Result<(), StoreError>) -> Result<(), StoreError>,
    ) -> Result<Self, StoreError> {
        let mut loaded = Self::default();
        visit(&mut |record| {
            match record {
                Record::Org(r) => loaded.orgs.push(r),
                Record::Member(r) => loaded.members.push(r),
                Record::Invitation(r) => loaded.invitations.push(r),
                Record::User(r) => loaded.users.push(r),
                Record::Session(hash, r) => loaded.sessions.push((hash, r)),
                Record::Account(r) => loaded.accounts.push(r),
                Record::ApiKey(r) => loaded.api_keys.push(r),
                Record::Token(..) | Record::Outbox(_) => {}
            }
            Ok(())
        })?;
        Ok(loaded)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{0}")]
    Locked(LockHolder),
    #[error("storage I/O failed: {0}")]
    Io(String),
    #[error("stored record is corrupt: {0}")]
    Corrupt(String),
    /// The file was written by a newer release, whose layout this one cannot know: refused before anything is
    /// read or written, so the newer release can still open it.
    #[error(
        "{path} was written by a newer version of service-auth (data schema {found}; this version reads schema \
         {supported} and older). Nothing was read or changed: run the newer version, or restore a backup taken by \
         this version"
    )]
    NewerSchema { path: String, found: u32, supported: u32 },
    #[error("the store writer has stopped")]
    WriterGone,
    /// A request broke a rule another node's change made it break (PostgreSQL only): nothing of it was written.
    #[error("conflict: {0}")]
    Conflict(Conflict),
    #[error("{0}")]
    Unsupported(String),
}

/// What a request conflicted with, in PostgreSQL's constraints or guards: answered as the same conflict would be
/// on one node.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Conflict {
    #[error("the e-mail {0} is taken")]
    EmailTaken(String),
    #[error("the slug {0} is taken")]
    SlugTaken(String),
    #[error("the username {0} is taken")]
    UsernameTaken(String),
    #[error("the last active administrator would be demoted, banned or removed")]
    LastAdmin,
    #[error("the account was changed on another node meanwhile")]
    Changed { user: [u8; 16] },
    #[error("the organization was deleted on another node")]
    OrganizationGone { user: [u8; 16] },
    #[error("an account joined the organization on another node")]
    OrganizationHasMembers { org: [u8; 16] },
    #[error("the organization's last owner would be removed or demoted")]
    LastOwner { org: [u8; 16] },
    #[error("too many failed sign-ins for this e-mail across the nodes")]
    Locked { email: String, wait_ms: i64 },
    #[error("this identity at {provider} is linked to an account already")]
    AccountTaken { provider: String, subject: String },
    #[error("this sign-in flow was finished already")]
    FlowUsed,
    #[error("this authorization code was redeemed already")]
    CodeUsed,
    #[error("this refresh token was used already")]
    RefreshUsed,
    #[error("the API key's quota was used up on another node")]
    QuotaSpent { key: [u8; 16], user: [u8; 16] },
    #[error("the API key was deleted on another node")]
    ApiKeyGone { key: [u8; 16], user: [u8; 16] },
}
