//! [`Store`]: the one interface the rest of the server uses, over either backend: the embedded redb file (one
//! node, the default) or a PostgreSQL database shared by several nodes (docs/cluster.md). Both load everything at
//! start and commit lists of [`StoreOp`]s atomically; what only one of them can do says so in its error.

use std::path::Path;
use std::sync::Arc;

use super::db::EmbeddedStore;
use super::hook_records::{DeliveryRecordV1, WebhookMessageRecordV1, WebhookRecordV1};
use super::passkey_records::{PasskeyChallengeRecordV1, PasskeyRecordV1};
use super::postgres::PgStore;
use super::records::AuditRecordV1;
use super::{FaultSwitch, Loaded, Record, StoreError, StoreOp, Visitor};

pub struct Store {
    backend: Backend,
    /// Woken after a commit that may have queued webhook messages: the deliverer's first attempt follows the
    /// commit at once instead of at its next poll.
    hooks_signal: Arc<tokio::sync::Notify>,
}

enum Backend {
    Embedded(EmbeddedStore),
    Postgres(Arc<PgStore>),
}

impl Store {
    /// Opens (or creates) the embedded store of `data_dir`; a second process gets [`StoreError::Locked`].
    pub fn open(data_dir: &Path) -> Result<Self, StoreError> {
        Self::open_with_faults(data_dir, FaultSwitch::default())
    }

    /// [`open`](Self::open) with a [`FaultSwitch`] the caller keeps, for failure tests.
    #[doc(hidden)]
    pub fn open_with_faults(data_dir: &Path, faults: FaultSwitch) -> Result<Self, StoreError> {
        Ok(Self {
            backend: Backend::Embedded(EmbeddedStore::open_with_faults(data_dir, faults)?),
            hooks_signal: Default::default(),
        })
    }

    /// Connects to the PostgreSQL database at `url` and brings its schema up to date. Blocking.
    pub fn connect_postgres(url: &str, pool_size: usize) -> Result<Self, StoreError> {
        Self::connect_postgres_with_faults(url, pool_size, FaultSwitch::default())
    }

    /// [`connect_postgres`](Self::connect_postgres) with a [`FaultSwitch`] the caller keeps, for failure tests.
    #[doc(hidden)]
    pub fn connect_postgres_with_faults(url: &str, pool_size: usize, faults: FaultSwitch) -> Result<Self, StoreError> {
        Ok(Self {
            backend: Backend::Postgres(Arc::new(PgStore::connect(url, pool_size, faults)?)),
            hooks_signal: Default::default(),
        })
    }

    /// Opens the store `config` names: the embedded file, or the PostgreSQL database. Blocking.
    pub fn open_configured(config: &crate::config::Config, faults: FaultSwitch) -> Result<Self, StoreError> {
        match (&config.store.backend, &config.store.url) {
            (crate::config::StoreBackend::Postgres, Some(url)) => {
                Self::connect_postgres_with_faults(url, config.store.pool_size, faults)
            }
            _ => Self::open_with_faults(&config.data_dir, faults),
        }
    }

    /// The PostgreSQL store, when that is the backend (the follower and the migration need it).
    pub fn postgres(&self) -> Option<&Arc<PgStore>> {
        match &self.backend {
            Backend::Postgres(pg) => Some(pg),
            Backend::Embedded(_) => None,
        }
    }

    /// `Ok` while commits are accepted; otherwise why not.
    pub fn health(&self) -> Result<(), String> {
        match &self.backend {
            Backend::Embedded(s) => s.health(),
            Backend::Postgres(s) => s.health(),
        }
    }

    /// What readiness reports about writes (see [`EmbeddedStore::accepts_writes`]).
    pub fn accepts_writes(&self) -> Result<(), String> {
        match &self.backend {
            Backend::Embedded(s) => s.accepts_writes(),
            Backend::Postgres(s) => s.health(),
        }
    }

    /// After a failed commit: reopen (embedded) or reconnect (PostgreSQL) and prove writes work again.
    pub(super) fn recover(&self) -> Result<(), StoreError> {
        match &self.backend {
            Backend::Embedded(s) => s.recover(),
            Backend::Postgres(s) => s.recover(),
        }
    }

    /// Releases the store now (the directory's lock, the database connections); later reads and writes fail.
    pub fn close(&self) {
        match &self.backend {
            Backend::Embedded(s) => s.close(),
            Backend::Postgres(s) => s.close(),
        }
    }

    /// Reads every record into memory (for tools; the server streams with [`visit`](Self::visit)).
    pub fn load(&self) -> Result<Loaded, StoreError> {
        Loaded::collect(|f| self.visit(f))
    }

    /// Hands every record to `f` from one consistent snapshot: organizations, users, tokens, outbox, sessions.
    pub fn visit(&self, f: impl FnMut(Record) -> Result<(), StoreError>) -> Result<(), StoreError> {
        match &self.backend {
            Backend::Embedded(s) => s.visit(f),
            Backend::Postgres(s) => s.visit(f),
        }
    }

    /// [`visit`](Self::visit) in two halves: the sessions to `sessions`, every other record to `accounts`, each
    /// side's `done` called once it has all of its records. The embedded store reads the sessions on a second
    /// thread at the same time (start-up's two halves on two cores); PostgreSQL reads them after the rest.
    pub fn visit_split(
        &self,
        accounts: &mut impl Visitor,
        sessions: &mut (impl Visitor + Send),
    ) -> Result<(), StoreError> {
        match &self.backend {
            Backend::Embedded(s) => s.visit_split(accounts, sessions),
            Backend::Postgres(s) => {
                // The sessions come last: the accounts' side is done at the first one.
                let mut accounts_done = false;
                s.visit(|record| match record {
                    Record::Session(..) => {
                        if !std::mem::replace(&mut accounts_done, true) {
                            accounts.done();
                        }
                        sessions.record(record)
                    }
                    other => accounts.record(other),
                })?;
                if !accounts_done {
                    accounts.done();
                }
                sessions.done();
                Ok(())
            }
        }
    }

    /// Applies `ops` in one transaction and returns once it is durable. Blocking.
    pub fn commit(&self, ops: &[StoreOp]) -> Result<(), StoreError> {
        match &self.backend {
            Backend::Embedded(s) => s.commit(ops),
            Backend::Postgres(s) => s.commit_requests(&[ops])?.pop().unwrap_or(Ok(())),
        }
    }

    /// Commits several requests in one transaction (group commit). The outer error fails them all; otherwise each
    /// request has its own result: PostgreSQL runs each under a savepoint, so one request's conflict (an e-mail
    /// another node took) fails that request alone. The embedded store never has such conflicts (its actors
    /// guard them), so its requests succeed or fail together.
    pub(super) fn commit_requests(&self, requests: &[&[StoreOp]]) -> Result<Vec<Result<(), StoreError>>, StoreError> {
        let committed = self.commit_requests_quietly(requests);
        let ops = || requests.iter().flat_map(|r| r.iter());
        let queued = || ops().any(|op| matches!(op, StoreOp::PutWebhookMessage(_) | StoreOp::PutWebhook(_)));
        // A session ended may have queued back-channel logouts (a store without such clients reads an empty round).
        let ended = || super::hooks::ends_sessions(ops());
        if committed.is_ok() && (queued() || super::hooks::may_raise(ops()) || ended()) {
            self.hooks_signal.notify_one();
        }
        committed
    }

    /// What wakes the webhook deliverer (see `hooks_signal`).
    pub fn hooks_signal(&self) -> Arc<tokio::sync::Notify> {
        Arc::clone(&self.hooks_signal)
    }

    fn commit_requests_quietly(&self, requests: &[&[StoreOp]]) -> Result<Vec<Result<(), StoreError>>, StoreError> {
        match &self.backend {
            Backend::Embedded(s) => {
                let ops: Vec<&StoreOp> = requests.iter().flat_map(|r| r.iter()).collect();
                s.commit_refs(&ops)?;
                Ok(requests.iter().map(|_| Ok(())).collect())
            }
            Backend::Postgres(s) => s.commit_requests(requests),
        }
    }

    /// [`commit_requests`](Self::commit_requests) for tests of one node's batch against another's.
    #[doc(hidden)]
    pub fn commit_batch(&self, requests: &[&[StoreOp]]) -> Result<Vec<Result<(), StoreError>>, StoreError> {
        self.commit_requests(requests)
    }

    /// The sign-in flow stored under `hash` (SHA-256 of its `state`), if not taken yet. Blocking. Only a
    /// [`StoreOp::TakeFlow`] committed afterwards makes it this caller's (single use).
    pub fn flow(&self, hash: &super::TokenHash) -> Result<Option<super::linked::OAuthFlowRecordV1>, StoreError> {
        match &self.backend {
            Backend::Embedded(s) => s.flow(hash),
            Backend::Postgres(s) => s.flow(hash),
        }
    }

    /// Up to `limit` audit entries older than `before` (all when `None`), newest first. Blocking.
    pub fn audit_page(&self, before: Option<[u8; 16]>, limit: usize) -> Result<Vec<AuditRecordV1>, StoreError> {
        match &self.backend {
            Backend::Embedded(s) => s.audit_page(before, limit),
            Backend::Postgres(s) => s.audit_page(before, limit),
        }
    }

    /// The overview's counter buckets: the hourly ones from `hours_from_ms` on and the daily ones from
    /// `days_from_ms` on, each counter's in time order. Blocking.
    pub fn counts_since(&self, hours_from_ms: i64, days_from_ms: i64) -> Result<Vec<super::CountRow>, StoreError> {
        match &self.backend {
            Backend::Embedded(s) => s.counts_since(hours_from_ms, days_from_ms),
            Backend::Postgres(s) => s.counts_since(hours_from_ms, days_from_ms),
        }
    }

    /// Up to `limit` audit entries after `after` (from the oldest when `None`), oldest first. Blocking.
    pub fn audit_after(&self, after: Option<[u8; 16]>, limit: usize) -> Result<Vec<AuditRecordV1>, StoreError> {
        match &self.backend {
            Backend::Embedded(s) => s.audit_after(after, limit),
            Backend::Postgres(s) => s.audit_after(after, limit),
        }
    }

    /// Every webhook endpoint, and since when each failing one has failed. Blocking.
    pub fn webhooks(&self) -> Result<Vec<(WebhookRecordV1, Option<i64>)>, StoreError> {
        match &self.backend {
            Backend::Embedded(s) => s.webhooks(),
            Backend::Postgres(s) => s.webhooks(),
        }
    }

    /// The first `limit` messages of `endpoint`'s queue, in commit order, with their places; with `limit` 0, how
    /// many it holds (the count is only counted then). Blocking.
    pub fn webhook_queue(
        &self,
        endpoint: [u8; 16],
        limit: usize,
    ) -> Result<(Vec<(u64, WebhookMessageRecordV1)>, u64), StoreError> {
        match &self.backend {
            Backend::Embedded(s) => s.webhook_queue(endpoint, limit),
            Backend::Postgres(s) => s.webhook_queue(endpoint, limit),
        }
    }

    /// Up to `limit` attempts of `endpoint`'s delivery log before `before`, newest first. Blocking.
    pub fn deliveries(
        &self,
        endpoint: [u8; 16],
        before: Option<[u8; 16]>,
        limit: usize,
    ) -> Result<Vec<DeliveryRecordV1>, StoreError> {
        match &self.backend {
            Backend::Embedded(s) => s.deliveries(endpoint, before, limit),
            Backend::Postgres(s) => s.deliveries(endpoint, before, limit),
        }
    }

    /// Whether this node may deliver `endpoint`'s queue now: always on one node; on several, while it holds the
    /// endpoint's lease in the database (taken or renewed here). Blocking.
    pub fn lease_webhook(&self, endpoint: [u8; 16], lease: std::time::Duration) -> Result<bool, StoreError> {
        match &self.backend {
            Backend::Embedded(_) => Ok(true),
            Backend::Postgres(s) => s.lease_webhook(endpoint, lease),
        }
    }

    /// [`Self::lease_webhook`] for a queue that is no endpoint's (the back-channel logouts). Blocking.
    pub fn lease_queue(&self, queue: [u8; 16], lease: std::time::Duration) -> Result<bool, StoreError> {
        match &self.backend {
            Backend::Embedded(_) => Ok(true),
            Backend::Postgres(s) => s.lease_queue(queue, lease),
        }
    }

    /// Ids of at most `limit` audit entries to delete, oldest first (see [`EmbeddedStore::audit_to_prune`]).
    pub fn audit_to_prune(
        &self,
        before: [u8; 16],
        keep: super::AuditCaps,
        limit: usize,
    ) -> Result<Vec<[u8; 16]>, StoreError> {
        match &self.backend {
            Backend::Embedded(s) => s.audit_to_prune(before, keep, limit),
            Backend::Postgres(s) => s.audit_to_prune(before, keep, limit),
        }
    }

    /// Every signing key of the identity provider. Blocking. (Read into memory by `provider::keys` at start and
    /// once a minute, so every node holds a new key before it signs.)
    pub fn signing_keys(&self) -> Result<Vec<super::SigningKeyRecordV1>, StoreError> {
        match &self.backend {
            Backend::Embedded(s) => s.signing_keys(),
            Backend::Postgres(s) => s.signing_keys(),
        }
    }

    /// Every client of the identity provider. Blocking.
    pub fn oauth_clients(&self) -> Result<Vec<super::ClientRecord>, StoreError> {
        match &self.backend {
            Backend::Embedded(s) => s.oauth_clients(),
            Backend::Postgres(s) => s.oauth_clients(),
        }
    }

    /// Every single sign-on provider. Blocking.
    pub fn sso_providers(&self) -> Result<Vec<super::SsoProviderRecord>, StoreError> {
        match &self.backend {
            Backend::Embedded(s) => s.sso_providers(),
            Backend::Postgres(s) => s.sso_providers(),
        }
    }

    /// The single sign-on provider `provider_id`, if registered. Blocking.
    pub fn sso_provider(&self, provider_id: &str) -> Result<Option<super::SsoProviderRecord>, StoreError> {
        match &self.backend {
            Backend::Embedded(s) => s.sso_provider(provider_id),
            Backend::Postgres(s) => s.sso_provider(provider_id),
        }
    }

    /// The SCIM token `id`, if not revoked. Blocking.
    pub fn scim_token(&self, id: [u8; 16]) -> Result<Option<super::ScimTokenRecordV1>, StoreError> {
        match &self.backend {
            Backend::Embedded(s) => s.scim_token(id),
            Backend::Postgres(s) => s.scim_token(id),
        }
    }

    /// Every SCIM token (of every organization: they are few). Blocking.
    pub fn scim_tokens(&self) -> Result<Vec<super::ScimTokenRecordV1>, StoreError> {
        match &self.backend {
            Backend::Embedded(s) => s.scim_tokens(),
            Backend::Postgres(s) => s.scim_tokens(),
        }
    }

    /// What organization `org`'s directory said of account `user`, if it provisioned it. Blocking.
    pub fn scim_user(&self, org: [u8; 16], user: [u8; 16]) -> Result<Option<super::ScimUserRecordV1>, StoreError> {
        match &self.backend {
            Backend::Embedded(s) => s.scim_user(org, user),
            Backend::Postgres(s) => s.scim_user(org, user),
        }
    }

    /// Every account organization `org`'s directory provisioned (`None`: of every organization). Blocking.
    pub fn scim_users(&self, org: Option<[u8; 16]>) -> Result<Vec<super::ScimUserRecordV1>, StoreError> {
        match &self.backend {
            Backend::Embedded(s) => s.scim_users(org),
            Backend::Postgres(s) => s.scim_users(org),
        }
    }

    /// The accounts of organization `org`'s directory that `lookup` finds (one, unless the directory broke its own
    /// uniqueness), from the stores' index of userName and externalId. Blocking.
    pub fn scim_users_by(
        &self,
        org: [u8; 16],
        lookup: &super::ScimLookup,
    ) -> Result<Vec<super::ScimUserRecordV1>, StoreError> {
        match &self.backend {
            Backend::Embedded(s) => s.scim_users_by(org, lookup),
            Backend::Postgres(s) => s.scim_users_by(org, lookup),
        }
    }

    /// Every team organization `org`'s directory made as a SCIM Group (`None`: of every organization). Blocking.
    pub fn scim_groups(&self, org: Option<[u8; 16]>) -> Result<Vec<super::ScimGroupRecordV1>, StoreError> {
        match &self.backend {
            Backend::Embedded(s) => s.scim_groups(org),
            Backend::Postgres(s) => s.scim_groups(org),
        }
    }

    /// The client `client_id`, if registered. Blocking.
    pub fn oauth_client(&self, client_id: &str) -> Result<Option<super::ClientRecord>, StoreError> {
        match &self.backend {
            Backend::Embedded(s) => s.oauth_client(client_id),
            Backend::Postgres(s) => s.oauth_client(client_id),
        }
    }

    /// The authorization code stored under `hash` (SHA-256 of the code), if not redeemed yet. Blocking. Only a
    /// [`StoreOp::TakeOAuthCode`] committed afterwards makes it this caller's (single use).
    pub fn oauth_code(&self, hash: &super::TokenHash) -> Result<Option<super::OAuthCodeRecordV1>, StoreError> {
        match &self.backend {
            Backend::Embedded(s) => s.oauth_code(hash),
            Backend::Postgres(s) => s.oauth_code(hash),
        }
    }

    /// The device authorization request stored under `hash` (SHA-256 of the device code), if not redeemed yet.
    /// Blocking.
    pub fn oauth_device(&self, hash: &super::TokenHash) -> Result<Option<super::OAuthDeviceRecordV1>, StoreError> {
        match &self.backend {
            Backend::Embedded(s) => s.oauth_device(hash),
            Backend::Postgres(s) => s.oauth_device(hash),
        }
    }

    /// The device authorization request whose user code's SHA-256 is `user_code_hash`, with its device code's
    /// hash. Blocking.
    pub fn oauth_device_by_user_code(
        &self,
        user_code_hash: &super::TokenHash,
    ) -> Result<Option<(super::TokenHash, super::OAuthDeviceRecordV1)>, StoreError> {
        match &self.backend {
            Backend::Embedded(s) => s.oauth_device_by_user_code(user_code_hash),
            Backend::Postgres(s) => s.oauth_device_by_user_code(user_code_hash),
        }
    }

    /// Every grant of the identity provider not past `now_ms`. Blocking.
    pub fn oauth_grants(&self, now_ms: i64) -> Result<Vec<super::OAuthGrantRecord>, StoreError> {
        match &self.backend {
            Backend::Embedded(s) => s.oauth_grants(now_ms),
            Backend::Postgres(s) => s.oauth_grants(now_ms),
        }
    }

    /// The grant `id`, if it has not ended. Blocking.
    pub fn oauth_grant(&self, id: [u8; 16]) -> Result<Option<super::OAuthGrantRecord>, StoreError> {
        match &self.backend {
            Backend::Embedded(s) => s.oauth_grant(id),
            Backend::Postgres(s) => s.oauth_grant(id),
        }
    }

    /// `user`'s consent to the client `client_id`, if given. Blocking.
    pub fn oauth_consent(
        &self,
        user: [u8; 16],
        client_id: &str,
    ) -> Result<Option<super::OAuthConsentRecordV1>, StoreError> {
        match &self.backend {
            Backend::Embedded(s) => s.oauth_consent(user, client_id),
            Backend::Postgres(s) => s.oauth_consent(user, client_id),
        }
    }

    /// Every consent `user` has given to a client, by `client_id`. Blocking.
    pub fn oauth_consents_of(&self, user: [u8; 16]) -> Result<Vec<super::OAuthConsentRecordV1>, StoreError> {
        match &self.backend {
            Backend::Embedded(s) => s.oauth_consents_of(user),
            Backend::Postgres(s) => s.oauth_consents_of(user),
        }
    }

    /// Every passkey of `user`. Blocking. (Passkeys are read from the store where they are needed, not held in
    /// memory: a sign-in with a passkey or a list is rare next to session checks, and every node then sees the
    /// shared database's passkeys without a change log entry.)
    pub fn passkeys_of(&self, user: [u8; 16]) -> Result<Vec<PasskeyRecordV1>, StoreError> {
        match &self.backend {
            Backend::Embedded(s) => s.passkeys_of(user),
            Backend::Postgres(s) => s.passkeys_of(user),
        }
    }

    /// Every passkey of every account (`migrate-store`). Blocking.
    pub fn all_passkeys(&self) -> Result<Vec<PasskeyRecordV1>, StoreError> {
        match &self.backend {
            Backend::Embedded(s) => s.all_passkeys(),
            Backend::Postgres(s) => s.all_passkeys(),
        }
    }

    /// The passkey with credential id `credential`, if any. Blocking.
    pub fn passkey_by_credential(&self, credential: &[u8]) -> Result<Option<PasskeyRecordV1>, StoreError> {
        match &self.backend {
            Backend::Embedded(s) => s.passkey_by_credential(credential),
            Backend::Postgres(s) => s.passkey_by_credential(credential),
        }
    }

    /// Deletes the passkey ceremony of `hash` and returns it if it had not expired by `now_ms`: whichever
    /// verification (on whichever node) takes it first has it, the others find nothing. Blocking.
    pub fn take_passkey_challenge(
        &self,
        hash: &super::TokenHash,
        now_ms: i64,
    ) -> Result<Option<PasskeyChallengeRecordV1>, StoreError> {
        match &self.backend {
            Backend::Embedded(s) => s.take_passkey_challenge(hash, now_ms),
            Backend::Postgres(s) => s.take_passkey_challenge(hash, now_ms),
        }
    }

    /// Deletes the passkey ceremonies that expired unverified before `now_ms`. Blocking.
    /// Deletes the sign-in flows, authorization codes and grants past their end at `now_ms`; how many.
    pub fn prune_expired_grants(&self, now_ms: i64) -> Result<usize, StoreError> {
        match &self.backend {
            Backend::Embedded(s) => s.prune_expired_grants(now_ms),
            Backend::Postgres(s) => s.prune_expired_grants(now_ms),
        }
    }

    pub fn prune_passkey_challenges(&self, now_ms: i64) -> Result<usize, StoreError> {
        match &self.backend {
            Backend::Embedded(s) => s.prune_passkey_challenges(now_ms),
            Backend::Postgres(s) => s.prune_passkey_challenges(now_ms),
        }
    }

    /// Writes a consistent copy of the embedded store to `path`. A PostgreSQL store is backed up with
    /// PostgreSQL's own tools.
    pub fn snapshot_to(&self, path: &Path) -> Result<(), StoreError> {
        match &self.backend {
            Backend::Embedded(s) => s.snapshot_to(path),
            Backend::Postgres(_) => Err(StoreError::Unsupported(
                "backups of a PostgreSQL store are PostgreSQL's (pg_dump, replication); see docs/cluster.md".into(),
            )),
        }
    }

    /// Opens a scratch copy of the embedded store file `path` (a backup) and runs `check` on it.
    pub fn check_file<T>(path: &Path, check: impl FnOnce(&Store) -> Result<T, StoreError>) -> Result<T, StoreError> {
        EmbeddedStore::check_file(path, |dir| check(&Store::open(dir)?))
    }

    /// Makes the store file `path` the embedded store of `data_dir` (atomic; refused while a server holds it);
    /// returns where the store it replaced is kept.
    pub fn replace_file(data_dir: &Path, path: &Path) -> Result<Option<std::path::PathBuf>, StoreError> {
        EmbeddedStore::replace_file(data_dir, path)
    }

    /// Whether the store holds no account, organization or session.
    pub fn is_empty(&self) -> Result<bool, StoreError> {
        match &self.backend {
            Backend::Embedded(s) => s.is_empty(),
            Backend::Postgres(s) => s.is_empty(),
        }
    }

    /// How many accounts and sessions the store holds (start-up sizes its maps with these).
    pub fn counts(&self) -> Result<(u64, u64), StoreError> {
        match &self.backend {
            Backend::Embedded(s) => s.counts(),
            Backend::Postgres(s) => s.counts(),
        }
    }

    /// Deletes every record, the audit log included, in one transaction.
    pub fn clear(&self) -> Result<(), StoreError> {
        match &self.backend {
            Backend::Embedded(s) => s.clear(),
            Backend::Postgres(s) => s.clear(),
        }
    }

    /// Transactions committed since open: shows group commit at work (in tests and benchmarks).
    pub fn commit_count(&self) -> u64 {
        match &self.backend {
            Backend::Embedded(s) => s.commit_count(),
            Backend::Postgres(s) => s.commit_count(),
        }
    }

    /// Makes the next `n` commits of the embedded store fail without writing, as a full or read-only disk would.
    #[doc(hidden)]
    pub fn fail_next_commits(&self, n: u32) {
        if let Backend::Embedded(s) = &self.backend {
            s.fail_next_commits(n);
        }
    }
}
