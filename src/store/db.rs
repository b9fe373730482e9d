//! The redb database file and its tables.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use redb::{Database, DatabaseError, ReadTransaction, ReadableDatabase, ReadableTable, TableDefinition};

use super::codec::{self, Versioned};
use super::hook_records::{DeliveryRecordV1, WebhookMessageRecordV1, WebhookRecordV1};
use super::hooks::Fanout;
use super::passkey_records::{PasskeyChallengeRecordV1, PasskeyRecordV1, passkey_key};
use super::records::AuditRecordV1;
use super::{AuditCaps, Record, StoreError, StoreOp, TokenHash, Visitor};

const USERS: TableDefinition<[u8; 16], &[u8]> = TableDefinition::new("users");
const ORGS: TableDefinition<[u8; 16], &[u8]> = TableDefinition::new("organizations");
/// Sessions by `user id ‖ token hash`: one account's sessions are neighbours, so a ban that ends a thousand of
/// them rewrites a few pages instead of a thousand scattered ones.
const SESSIONS: TableDefinition<[u8; 48], &[u8]> = TableDefinition::new("sessions_by_user");
/// Schema 1 kept sessions by token hash alone; read once, at the upgrade to schema 2.
const SESSIONS_BY_HASH: TableDefinition<[u8; 32], &[u8]> = TableDefinition::new("sessions");
const AUDIT: TableDefinition<[u8; 16], &[u8]> = TableDefinition::new("audit");
/// The ids of the audit entries anonymous callers caused (values empty): counted and pruned apart from the rest,
/// so a flood of them never pushes administrative history out ([`crate::domain::is_anonymous_action`]).
const AUDIT_ANONYMOUS: TableDefinition<[u8; 16], &[u8]> = TableDefinition::new("audit_anonymous");
const TOKENS: TableDefinition<[u8; 32], &[u8]> = TableDefinition::new("tokens");
const OUTBOX: TableDefinition<[u8; 16], &[u8]> = TableDefinition::new("outbox");
/// Memberships by `organization id ‖ user id`: one per pair, and an organization's members are neighbours.
const MEMBERS: TableDefinition<[u8; 32], &[u8]> = TableDefinition::new("memberships");
const INVITATIONS: TableDefinition<[u8; 16], &[u8]> = TableDefinition::new("invitations");
/// Identities at other providers linked to accounts, by their id (src/oauth).
const ACCOUNTS: TableDefinition<[u8; 16], &[u8]> = TableDefinition::new("accounts");
/// API keys, by their id (the session check finds them in memory by their hash; this table is only loaded).
const API_KEYS: TableDefinition<[u8; 16], &[u8]> = TableDefinition::new("api_keys");
/// Sign-in flows in progress, by the SHA-256 of their `state`.
const FLOWS: TableDefinition<[u8; 32], &[u8]> = TableDefinition::new("oauth_flows");
const META: TableDefinition<&str, u32> = TableDefinition::new("meta");
/// The overview's counters: [`counter_key`] (period, counter, bucket start) → count.
const COUNTERS: TableDefinition<[u8; 10], u64> = TableDefinition::new("counters");
const WEBHOOKS: TableDefinition<[u8; 16], &[u8]> = TableDefinition::new("webhooks");
/// Since when each failing endpoint has failed (milliseconds); healthy endpoints have no row.
const WEBHOOK_FAILING: TableDefinition<[u8; 16], i64> = TableDefinition::new("webhook_failing");
/// Messages by `endpoint ‖ place in its queue` (big-endian): one endpoint's queue is one range, in commit order.
const WEBHOOK_QUEUE: TableDefinition<[u8; 24], &[u8]> = TableDefinition::new("webhook_queue");
/// The next place in the queues (`next_seq`).
const WEBHOOK_SEQ: TableDefinition<&str, u64> = TableDefinition::new("webhook_seq");
/// The delivery log by `endpoint ‖ attempt id` (UUID v7: time order).
const DELIVERIES: TableDefinition<[u8; 32], &[u8]> = TableDefinition::new("webhook_deliveries");
/// Passkeys by `owner ‖ id` ([`passkey_key`]), the credential index (credential id → that key), and the ceremonies
/// waiting for their verification, by the hash of their cookie.
const PASSKEYS: TableDefinition<[u8; 32], &[u8]> = TableDefinition::new("passkeys");
const PASSKEY_CREDENTIALS: TableDefinition<&[u8], [u8; 32]> = TableDefinition::new("passkey_credentials");
const PASSKEY_CHALLENGES: TableDefinition<[u8; 32], &[u8]> = TableDefinition::new("passkey_challenges");
/// The identity provider's signing keys (sealed), by id.
const SIGNING_KEYS: TableDefinition<[u8; 16], &[u8]> = TableDefinition::new("signing_keys");
/// The identity provider's clients, by `client_id`.
const OAUTH_CLIENTS: TableDefinition<&str, &[u8]> = TableDefinition::new("oauth_clients");
/// Organizations' single sign-on providers, by `providerId`.
const SSO_PROVIDERS: TableDefinition<&str, &[u8]> = TableDefinition::new("sso_providers");
/// The identity provider's authorization codes waiting to be redeemed, by the SHA-256 of the code.
const OAUTH_CODES: TableDefinition<[u8; 32], &[u8]> = TableDefinition::new("oauth_codes");
/// The identity provider's device authorization requests (RFC 8628), by the SHA-256 of the device code.
const OAUTH_DEVICES: TableDefinition<[u8; 32], &[u8]> = TableDefinition::new("oauth_devices");
/// Which device request a user code names: the SHA-256 of the user code → the SHA-256 of the device code.
const OAUTH_USER_CODES: TableDefinition<[u8; 32], [u8; 32]> = TableDefinition::new("oauth_user_codes");
/// Users' consents to clients, by the user's id ‖ the `client_id` ([`OAuthConsentRecordV1::key`]).
const OAUTH_CONSENTS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("oauth_consents");
/// The identity provider's grants, by id ([`super::OAuthGrantRecord`]).
const OAUTH_GRANTS: TableDefinition<[u8; 16], &[u8]> = TableDefinition::new("oauth_grants");
/// SCIM bearer tokens, by id.
const SCIM_TOKENS: TableDefinition<[u8; 16], &[u8]> = TableDefinition::new("scim_tokens");
/// Accounts provisioned over SCIM, by organization then account (so an organization's are one range).
const SCIM_USERS: TableDefinition<[u8; 32], &[u8]> = TableDefinition::new("scim_users");
/// The SCIM users' index by userName (lowercased) and externalId ([`super::ScimLookup::prefix`] ‖ account), written
/// with each record, so that the lookup a directory sends before each create reads one key, not the organization.
const SCIM_USER_LOOKUP: TableDefinition<&[u8], ()> = TableDefinition::new("scim_user_lookup");
/// Teams an organization's directory made as SCIM Groups, by organization then team (keyed as [`SCIM_USERS`]).
const SCIM_GROUPS: TableDefinition<[u8; 32], &[u8]> = TableDefinition::new("scim_groups");

fn scim_user_key(org: [u8; 16], user: [u8; 16]) -> [u8; 32] {
    let mut key = [0; 32];
    key[..16].copy_from_slice(&org);
    key[16..].copy_from_slice(&user);
    key
}

/// Layout of the tables. A database written by a newer layout is refused rather than misread.
const SCHEMA_VERSION: u32 = 3;
pub(super) const FILE_NAME: &str = "service-auth.redb";
/// redb's page cache. State is served from memory, and the file is read in full only at start-up, so a large
/// cache would only keep a second copy of everything resident (redb's default is 1 GiB). 4 MiB holds a commit's
/// dirty pages; measured at 100k users + 100k sessions: 16 MiB → 4 MiB took resident memory from 104 to 91 MB.
const CACHE_BYTES: usize = 4 * 1024 * 1024;
/// The read cache while start-up reads every table ([`EmbeddedStore::visit_split`]): none. Each page is read once
/// then, so a cache keeps only pages nobody reads again; and with the two threads reading at once, each miss evicted
/// a page from a stripe both share, so a page one thread had allocated was freed on the other, and glibc's allocator
/// made both wait on its arena locks: at 10,000,000 accounts, ~300,000 futex waits per start and 32.1 s to ready,
/// against ~100 waits and 21–25 s with no cache (BENCHMARKS.md).
const LOAD_CACHE_BYTES: usize = 0;

/// The open database. `Send + Sync`; writes go through [`super::StoreWriter`], reads only happen at start-up.
///
/// # Recovering from a disk error
/// redb latches an I/O failure: after one failed commit every later transaction answers `PreviousIo`, even once
/// the disk has room again. So a failed commit marks the store *degraded*; the writer then refuses writes at once
/// and, about once a second, drops the database and opens it again (redb recovers to the last durable commit)
/// and proves it with a probe commit. Nothing in memory is ahead of that commit (the actors publish only after a
/// durable write), so the reopened store and the server's state agree.
pub struct EmbeddedStore {
    path: PathBuf,
    /// `None` only while a recovery has closed the file and not yet reopened it.
    db: RwLock<Option<Database>>,
    /// Why the store refuses writes now, if it does.
    degraded: Mutex<Option<String>>,
    commits: AtomicU64,
    faults: FaultSwitch,
}

/// A switch that makes the next commits fail without writing, as a full or read-only disk would; on PostgreSQL
/// also one that loses a commit's reply and one that pauses the follower. It exists for tests of the failure
/// paths (503, memory not ahead of the store, nodes out of step), and the clock of the session rules, which a test
/// moves forward ([`crate::domain::Clock`]); nothing in normal operation turns it on, and
/// only the in-process test harness holds one (`server::run_with_faults`): no configuration key or variable
/// reaches it.
#[doc(hidden)]
#[derive(Debug, Clone, Default)]
pub struct FaultSwitch {
    /// Commits that still succeed before the failures start.
    spared: Arc<AtomicU32>,
    failures: Arc<AtomicU32>,
    /// PostgreSQL: commits whose reply is lost after the database committed them (as when the connection is
    /// cut right after `COMMIT` reached the server).
    lost_replies: Arc<AtomicU32>,
    /// PostgreSQL: the follower reads nothing while set (a follower stalled behind other nodes' writes).
    follower_paused: Arc<AtomicBool>,
    /// The server's clock for the session rules, which a test moves forward to reach limits of hours.
    clock: crate::domain::Clock,
}

impl FaultSwitch {
    /// The next `n` commits fail.
    pub fn fail_next_commits(&self, n: u32) {
        self.fail_commits_after(0, n);
    }

    /// The next `spared` commits succeed, then `n` fail (a fault in the middle of a multi-commit operation).
    pub fn fail_commits_after(&self, spared: u32, n: u32) {
        self.spared.store(spared, Ordering::SeqCst);
        self.failures.store(n, Ordering::SeqCst);
    }

    /// PostgreSQL: the next `n` commits succeed in the database but their reply is lost on the way back.
    pub fn lose_next_commit_replies(&self, n: u32) {
        self.lost_replies.store(n, Ordering::SeqCst);
    }

    pub(crate) fn take_lost_reply(&self) -> bool {
        self.lost_replies.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok()
    }

    /// PostgreSQL: stops (`true`) or resumes the node's follower: while stopped it applies no change log entry.
    pub fn pause_follower(&self, paused: bool) {
        self.follower_paused.store(paused, Ordering::SeqCst);
    }

    pub(crate) fn follower_paused(&self) -> bool {
        self.follower_paused.load(Ordering::SeqCst)
    }

    /// A switch whose server reads `clock` for the session rules (its idle and absolute limits, the fresh window):
    /// the test moves it forward. Two nodes given the same clock agree on the time.
    pub fn with_clock(clock: crate::domain::Clock) -> Self {
        Self { clock, ..Self::default() }
    }

    /// The clock the server's session rules read (the system clock unless a test moves it).
    pub(crate) fn clock(&self) -> crate::domain::Clock {
        self.clock.clone()
    }

    fn take_failure(&self) -> bool {
        if self.failures.load(Ordering::SeqCst) == 0 {
            return false;
        }
        if self.spared.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok() {
            return false;
        }
        self.failures.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok()
    }

    /// Whether the next commit would fail.
    fn refuses_next(&self) -> bool {
        self.failures.load(Ordering::SeqCst) > 0 && self.spared.load(Ordering::SeqCst) == 0
    }
}

/// Two switches are equal when they would fail the same commits.
impl PartialEq for FaultSwitch {
    fn eq(&self, other: &Self) -> bool {
        let state = |f: &Self| (f.spared.load(Ordering::SeqCst), f.failures.load(Ordering::SeqCst));
        state(self) == state(other)
    }
}

impl Eq for FaultSwitch {}

impl EmbeddedStore {
    /// Opens (or creates) `<data_dir>/service-auth.redb`. redb holds an exclusive file lock while it is open,
    /// so a second server or an `admin create` on the same directory gets [`StoreError::Locked`].
    pub fn open(data_dir: &Path) -> Result<Self, StoreError> {
        Self::open_with_faults(data_dir, FaultSwitch::default())
    }

    /// [`open`](Self::open) with a [`FaultSwitch`] the caller keeps, for failure tests.
    #[doc(hidden)]
    pub fn open_with_faults(data_dir: &Path, faults: FaultSwitch) -> Result<Self, StoreError> {
        std::fs::create_dir_all(data_dir)
            .map_err(|e| StoreError::Io(format!("cannot create {}: {e}", data_dir.display())))?;
        let path = data_dir.join(FILE_NAME);
        let db = open_database(&path, CACHE_BYTES)?;
        let store =
            Self { path, db: RwLock::new(Some(db)), degraded: Mutex::new(None), commits: AtomicU64::new(0), faults };
        store.init_schema()?;
        Ok(store)
    }

    /// Runs `f` on the open database; fails while a recovery has it closed.
    fn with_db<T>(&self, f: impl FnOnce(&Database) -> Result<T, StoreError>) -> Result<T, StoreError> {
        let guard = self.db.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        match guard.as_ref() {
            Some(db) => f(db),
            None => Err(StoreError::Io("the store is closed, or reopening after a disk error".into())),
        }
    }

    /// `Ok` while commits are accepted; otherwise why not.
    pub fn health(&self) -> Result<(), String> {
        match &*self.degraded.lock().unwrap_or_else(std::sync::PoisonError::into_inner) {
            None => Ok(()),
            Some(reason) => Err(reason.clone()),
        }
    }

    /// What readiness reports: [`health`](Self::health), and also refused while an injected fault would fail the
    /// next commit, so the tests of the failure path see readiness follow it as it follows a full disk.
    pub fn accepts_writes(&self) -> Result<(), String> {
        self.health()?;
        if self.faults.refuses_next() {
            return Err("injected store fault".into());
        }
        Ok(())
    }

    fn set_degraded(&self, reason: Option<String>) {
        *self.degraded.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = reason;
    }

    /// After a disk error: closes the database, opens it again and proves with a probe commit that writes are
    /// accepted. On success the store is healthy again; on failure it stays degraded (retry later).
    pub(super) fn recover(&self) -> Result<(), StoreError> {
        let mut guard = self.db.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        // The old handle must be gone first: it holds the file lock, and redb's latched error with it.
        *guard = None;
        let db = open_database(&self.path, CACHE_BYTES)?;
        let tx = db.begin_write().map_err(io)?;
        {
            let mut meta = tx.open_table(META).map_err(io)?;
            let probes = meta.get("recovery_probes").map_err(io)?.map_or(0, |v| v.value());
            meta.insert("recovery_probes", probes.wrapping_add(1)).map_err(io)?;
        }
        tx.commit().map_err(io)?;
        *guard = Some(db);
        self.set_degraded(None);
        Ok(())
    }

    fn init_schema(&self) -> Result<(), StoreError> {
        self.with_db(init_schema).map_err(|e| match e {
            StoreError::NewerSchema { found, supported, .. } => {
                StoreError::NewerSchema { path: self.path.display().to_string(), found, supported }
            }
            other => other,
        })
    }

    /// Closes the database and releases the directory's lock now, whoever still holds this `EmbeddedStore` (a
    /// connection task finishing late, say): a server that has stopped must not keep the next one out. Later
    /// reads and writes fail.
    pub fn close(&self) {
        self.set_degraded(Some("the store is closed".into()));
        *self.db.write().unwrap_or_else(std::sync::PoisonError::into_inner) = None;
    }
}

fn open_database(path: &Path, cache_bytes: usize) -> Result<Database, StoreError> {
    if !path.exists() {
        // The store holds every password hash: readable by its owner only.
        create_private(path).map_err(|e| StoreError::Io(format!("{}: {e}", path.display())))?;
    }
    let dir = path.parent().unwrap_or(Path::new("."));
    let db = Database::builder().set_cache_size(cache_bytes).create(path).map_err(|e| match e {
        DatabaseError::DatabaseAlreadyOpen => {
            StoreError::Locked(LockHolder { dir: dir.to_path_buf(), pid: lock_holder(dir) })
        }
        other => StoreError::Io(other.to_string()),
    })?;
    // Who holds the lock, for the message the next process gets (the lock itself does not say).
    let _ = std::fs::write(dir.join(PID_FILE), format!("{}\n", std::process::id()));
    Ok(db)
}

/// Beside the store: the PID of the process holding it, written by each one that takes the lock.
const PID_FILE: &str = "service-auth.pid";

/// A data directory another process holds: its path and, as that process wrote it, its PID.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockHolder {
    pub dir: std::path::PathBuf,
    pub pid: Option<u32>,
}

impl std::fmt::Display for LockHolder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the data directory {} is in use by another service-auth process", self.dir.display())?;
        match self.pid {
            Some(pid) => write!(f, " (PID {pid})"),
            None => Ok(()),
        }
    }
}

/// The PID the process holding `data_dir` wrote down, if it did.
pub fn lock_holder(data_dir: &Path) -> Option<u32> {
    std::fs::read_to_string(data_dir.join(PID_FILE)).ok()?.trim().parse().ok()
}

fn init_schema(db: &Database) -> Result<(), StoreError> {
    let tx = db.begin_write().map_err(io)?;
    {
        let mut meta = tx.open_table(META).map_err(io)?;
        let found = meta.get("schema_version").map_err(io)?.map(|v| v.value());
        match found {
            // Returning drops the transaction uncommitted: the newer file is left exactly as it was.
            Some(v) if v > SCHEMA_VERSION => {
                return Err(StoreError::NewerSchema { path: String::new(), found: v, supported: SCHEMA_VERSION });
            }
            Some(SCHEMA_VERSION) => {}
            Some(v) => {
                if v < 2 {
                    upgrade_sessions_table(&tx)?;
                }
                index_scim_users(&tx)?;
                meta.insert("schema_version", SCHEMA_VERSION).map_err(io)?;
            }
            None => {
                meta.insert("schema_version", SCHEMA_VERSION).map_err(io)?;
            }
        }
    }
    open_tables(&tx)?;
    tx.commit().map_err(io)
}

/// Schema 1 → 2: every session moves from `hash` to `user ‖ hash`, in the transaction that records schema 2, so
/// an interrupted upgrade leaves schema 1 whole and runs again at the next start.
fn upgrade_sessions_table(tx: &redb::WriteTransaction) -> Result<(), StoreError> {
    {
        let old = tx.open_table(SESSIONS_BY_HASH).map_err(io)?;
        let mut new = tx.open_table(SESSIONS).map_err(io)?;
        for entry in old.iter().map_err(io)? {
            let (hash, value) = entry.map_err(io)?;
            let record = codec::decode_session(value.value())?;
            new.insert(session_key(record.user_id, &hash.value()), value.value()).map_err(io)?;
        }
    }
    tx.delete_table(SESSIONS_BY_HASH).map_err(io)?;
    Ok(())
}

/// Schema 2 → 3: the SCIM users' lookup index, built from their records in the transaction that records schema 3.
fn index_scim_users(tx: &redb::WriteTransaction) -> Result<(), StoreError> {
    let users = tx.open_table(SCIM_USERS).map_err(io)?;
    let mut lookup = tx.open_table(SCIM_USER_LOOKUP).map_err(io)?;
    for entry in users.iter().map_err(io)? {
        let record: super::ScimUserRecordV1 = codec::decode(entry.map_err(io)?.1.value())?;
        for key in record.lookup_keys() {
            lookup.insert(key.as_slice(), ()).map_err(io)?;
        }
    }
    Ok(())
}

fn session_key(user: [u8; 16], hash: &TokenHash) -> [u8; 48] {
    let mut key = [0; 48];
    key[..16].copy_from_slice(&user);
    key[16..].copy_from_slice(hash);
    key
}

/// Creates every table that does not exist yet.
fn open_tables(tx: &redb::WriteTransaction) -> Result<(), StoreError> {
    for table in [USERS, ORGS, AUDIT, AUDIT_ANONYMOUS, OUTBOX, INVITATIONS, ACCOUNTS, API_KEYS] {
        tx.open_table(table).map_err(io)?;
    }
    tx.open_table(SESSIONS).map_err(io)?;
    tx.open_table(TOKENS).map_err(io)?;
    tx.open_table(COUNTERS).map_err(io)?;
    tx.open_table(MEMBERS).map_err(io)?;
    tx.open_table(WEBHOOKS).map_err(io)?;
    tx.open_table(WEBHOOK_FAILING).map_err(io)?;
    tx.open_table(WEBHOOK_QUEUE).map_err(io)?;
    tx.open_table(WEBHOOK_SEQ).map_err(io)?;
    tx.open_table(DELIVERIES).map_err(io)?;
    tx.open_table(PASSKEYS).map_err(io)?;
    tx.open_table(PASSKEY_CREDENTIALS).map_err(io)?;
    tx.open_table(PASSKEY_CHALLENGES).map_err(io)?;
    tx.open_table(FLOWS).map_err(io)?;
    tx.open_table(SIGNING_KEYS).map_err(io)?;
    tx.open_table(OAUTH_CLIENTS).map_err(io)?;
    tx.open_table(OAUTH_CODES).map_err(io)?;
    tx.open_table(OAUTH_DEVICES).map_err(io)?;
    tx.open_table(OAUTH_USER_CODES).map_err(io)?;
    tx.open_table(OAUTH_CONSENTS).map_err(io)?;
    tx.open_table(OAUTH_GRANTS).map_err(io)?;
    tx.open_table(SSO_PROVIDERS).map_err(io)?;
    tx.open_table(SCIM_TOKENS).map_err(io)?;
    tx.open_table(SCIM_USERS).map_err(io)?;
    tx.open_table(SCIM_USER_LOOKUP).map_err(io)?;
    tx.open_table(SCIM_GROUPS).map_err(io)?;
    Ok(())
}

/// A counter bucket's key: the period's code, the counter, then the bucket's start (big-endian, so key order is
/// time order within one counter of one period).
fn counter_key(period: super::Period, kind: u8, start_ms: i64) -> [u8; 10] {
    let mut key = [0; 10];
    key[0] = period.code();
    key[1] = kind;
    key[2..].copy_from_slice(&(start_ms.max(0) as u64).to_be_bytes());
    key
}

fn counter_of_key(key: [u8; 10]) -> Result<(super::Period, u8, i64), StoreError> {
    let mut start = [0; 8];
    start.copy_from_slice(&key[2..]);
    Ok((super::Period::from_code(key[0])?, key[1], u64::from_be_bytes(start) as i64))
}

impl EmbeddedStore {
    /// Reads every record into memory (the facade's [`super::Store::load`] is the one callers use).
    #[cfg(test)]
    pub fn load(&self) -> Result<super::Loaded, StoreError> {
        super::Loaded::collect(|f| self.visit(f))
    }

    /// Hands every record to `f`, one at a time, from one read transaction: organizations, users, tokens, the
    /// outbox, then sessions (so each can refer to the accounts before it). Start-up builds its indexes this way
    /// without holding a second copy of the whole store in memory.
    pub fn visit(&self, mut f: impl FnMut(Record) -> Result<(), StoreError>) -> Result<(), StoreError> {
        self.with_db(|db| {
            let tx = db.begin_read().map_err(io)?;
            visit_people(&tx, &mut f)?;
            visit_members(&tx, &mut f)?;
            visit_rest(&tx, &mut f)?;
            visit_sessions(&tx, f)
        })
    }

    /// [`visit`](Self::visit) on two threads: the sessions, then the memberships, to `sessions` on a second one, the
    /// rest to `accounts` on this one, both from the same read transaction (redb reads one snapshot from several
    /// threads). Each side's `done` runs on its thread once it has its records. A failure on one side does not stop
    /// the other. The memberships go with the sessions because every account may have one: read with the accounts,
    /// that side took three times as long as the sessions' (at 10,000,000 accounts, 72 s against 28).
    pub fn visit_split(
        &self,
        accounts: &mut impl Visitor,
        sessions: &mut (impl Visitor + Send),
    ) -> Result<(), StoreError> {
        // Read with no cache, then serve with one (see `LOAD_CACHE_BYTES`); the read transaction is gone by then.
        self.reopen(LOAD_CACHE_BYTES)?;
        let read = self.with_db(|db| {
            let tx = db.begin_read().map_err(io)?;
            let tx = &tx;
            std::thread::scope(|scope| {
                let read_sessions = scope.spawn(move || {
                    let mut record = |record| sessions.record(record);
                    visit_sessions(tx, &mut record)?;
                    visit_members(tx, record)?;
                    sessions.done();
                    Ok(())
                });
                let mut record = |record| accounts.record(record);
                let read_accounts =
                    visit_people(tx, &mut record).and_then(|()| visit_rest(tx, record)).map(|()| accounts.done());
                // A panic there is a bug, not bad data: the same as a panic here.
                let read_sessions = read_sessions.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
                read_accounts.and(read_sessions)
            })
        });
        let reopened = self.reopen(CACHE_BYTES);
        read.and(reopened)
    }

    /// Closes the database and opens it again with a read cache of `cache_bytes`. A clean close: the next open
    /// needs no repair. Should the open fail, the store stays closed and says so.
    fn reopen(&self, cache_bytes: usize) -> Result<(), StoreError> {
        let mut guard = self.db.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        // The old handle must be gone first: it holds the file lock.
        *guard = None;
        *guard = Some(open_database(&self.path, cache_bytes)?);
        Ok(())
    }

    /// Applies `ops` in one transaction and returns once it is durable: redb's default durability,
    /// `Immediate`, fsyncs before `commit` returns. Blocking: call it from a blocking thread.
    pub fn commit(&self, ops: &[StoreOp]) -> Result<(), StoreError> {
        self.commit_refs(&ops.iter().collect::<Vec<_>>())
    }

    /// [`commit`](Self::commit) over borrowed ops, so the writer can gather many requests without copying. A
    /// failure of the disk (not an injected one) marks the store degraded until [`recover`](Self::recover).
    pub(super) fn commit_refs(&self, ops: &[&StoreOp]) -> Result<(), StoreError> {
        if self.faults.take_failure() {
            return Err(StoreError::Io("injected store fault".into()));
        }
        let committed = self.with_db(|db| commit(db, ops));
        match &committed {
            Ok(()) => {
                self.commits.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => self.set_degraded(Some(e.to_string())),
        }
        committed
    }

    /// Up to `limit` audit entries older than `before` (all when `None`), newest first. Reads a snapshot;
    /// does not block writers. Blocking: call it from a blocking thread.
    /// The sign-in flow of `hash`, if it is still there. Reads a snapshot. Blocking.
    pub fn flow(&self, hash: &TokenHash) -> Result<Option<super::linked::OAuthFlowRecordV1>, StoreError> {
        self.with_db(|db| {
            let tx = db.begin_read().map_err(io)?;
            let table = tx.open_table(FLOWS).map_err(io)?;
            let found = table.get(hash).map_err(io)?;
            found.map(|v| codec::decode(v.value())).transpose()
        })
    }

    pub fn audit_page(&self, before: Option<[u8; 16]>, limit: usize) -> Result<Vec<AuditRecordV1>, StoreError> {
        self.with_db(|db| {
            let tx = db.begin_read().map_err(io)?;
            let table = tx.open_table(AUDIT).map_err(io)?;
            let range = match before {
                Some(id) => table.range(..id).map_err(io)?,
                None => table.range::<[u8; 16]>(..).map_err(io)?,
            };
            range.rev().take(limit).map(|entry| codec::decode::<AuditRecordV1>(entry.map_err(io)?.1.value())).collect()
        })
    }

    /// The counter buckets from `hours_from_ms` (hourly) and `days_from_ms` (daily) on. A store written before
    /// the counters existed has none.
    pub fn counts_since(&self, hours_from_ms: i64, days_from_ms: i64) -> Result<Vec<super::CountRow>, StoreError> {
        use super::Period;
        self.with_db(|db| {
            let tx = db.begin_read().map_err(io)?;
            let table = match tx.open_table(COUNTERS) {
                Ok(table) => table,
                Err(redb::TableError::TableDoesNotExist(_)) => return Ok(Vec::new()),
                Err(e) => return Err(io(e)),
            };
            // A few hundred rows at most (retention prunes the rest): one pass over all of them.
            let mut rows = Vec::new();
            for entry in table.iter().map_err(io)? {
                let (key, n) = entry.map_err(io)?;
                let (period, kind, start_ms) = counter_of_key(key.value())?;
                let from = if period == Period::Hour { hours_from_ms } else { days_from_ms };
                if start_ms >= from {
                    rows.push(super::CountRow { period, kind, start_ms, n: n.value() });
                }
            }
            Ok(rows)
        })
    }

    /// Up to `limit` audit entries after `after` (from the oldest when `None`), oldest first: the export's pages.
    pub fn audit_after(&self, after: Option<[u8; 16]>, limit: usize) -> Result<Vec<AuditRecordV1>, StoreError> {
        use std::ops::Bound;
        self.with_db(|db| {
            let tx = db.begin_read().map_err(io)?;
            let table = tx.open_table(AUDIT).map_err(io)?;
            let start = after.map_or(Bound::Unbounded, Bound::Excluded);
            let range = table.range::<[u8; 16]>((start, Bound::Unbounded)).map_err(io)?;
            range.take(limit).map(|entry| codec::decode::<AuditRecordV1>(entry.map_err(io)?.1.value())).collect()
        })
    }

    /// Every signing key of the identity provider.
    pub fn signing_keys(&self) -> Result<Vec<super::SigningKeyRecordV1>, StoreError> {
        self.with_db(|db| {
            let tx = db.begin_read().map_err(io)?;
            let table = tx.open_table(SIGNING_KEYS).map_err(io)?;
            let entries = table.iter().map_err(io)?;
            entries.map(|entry| codec::decode(entry.map_err(io)?.1.value())).collect()
        })
    }

    pub fn scim_token(&self, id: [u8; 16]) -> Result<Option<super::ScimTokenRecordV1>, StoreError> {
        self.with_db(|db| {
            let tx = db.begin_read().map_err(io)?;
            let table = tx.open_table(SCIM_TOKENS).map_err(io)?;
            let found = table.get(id).map_err(io)?;
            found.map(|v| codec::decode(v.value())).transpose()
        })
    }

    pub fn scim_tokens(&self) -> Result<Vec<super::ScimTokenRecordV1>, StoreError> {
        self.with_db(|db| {
            let tx = db.begin_read().map_err(io)?;
            let table = tx.open_table(SCIM_TOKENS).map_err(io)?;
            let entries = table.iter().map_err(io)?;
            entries.map(|entry| codec::decode(entry.map_err(io)?.1.value())).collect()
        })
    }

    pub fn scim_user(&self, org: [u8; 16], user: [u8; 16]) -> Result<Option<super::ScimUserRecordV1>, StoreError> {
        self.with_db(|db| {
            let tx = db.begin_read().map_err(io)?;
            let table = tx.open_table(SCIM_USERS).map_err(io)?;
            let found = table.get(scim_user_key(org, user)).map_err(io)?;
            found.map(|v| codec::decode(v.value())).transpose()
        })
    }

    pub fn scim_users(&self, org: Option<[u8; 16]>) -> Result<Vec<super::ScimUserRecordV1>, StoreError> {
        self.with_db(|db| {
            let tx = db.begin_read().map_err(io)?;
            let table = tx.open_table(SCIM_USERS).map_err(io)?;
            let entries = match org {
                Some(org) => table.range(scim_user_key(org, [0; 16])..=scim_user_key(org, [0xff; 16])).map_err(io)?,
                None => table.iter().map_err(io)?,
            };
            entries.map(|entry| codec::decode(entry.map_err(io)?.1.value())).collect()
        })
    }

    /// The records of `org` that `lookup` finds, from the index: one key range, then each record.
    pub fn scim_users_by(
        &self,
        org: [u8; 16],
        lookup: &super::ScimLookup,
    ) -> Result<Vec<super::ScimUserRecordV1>, StoreError> {
        self.with_db(|db| {
            let tx = db.begin_read().map_err(io)?;
            let index = tx.open_table(SCIM_USER_LOOKUP).map_err(io)?;
            let users = tx.open_table(SCIM_USERS).map_err(io)?;
            let prefix = lookup.prefix(org);
            let (mut low, mut high) = (prefix.clone(), prefix);
            low.extend([0; 16]);
            high.extend([0xff; 16]);
            let mut found = Vec::new();
            for entry in index.range(low.as_slice()..=high.as_slice()).map_err(io)? {
                let key = entry.map_err(io)?.0;
                let user: [u8; 16] =
                    key.value()[key.value().len() - 16..].try_into().expect("an index key ends with the account");
                if let Some(record) = users.get(scim_user_key(org, user)).map_err(io)? {
                    found.push(codec::decode(record.value())?);
                }
            }
            Ok(found)
        })
    }

    pub fn scim_groups(&self, org: Option<[u8; 16]>) -> Result<Vec<super::ScimGroupRecordV1>, StoreError> {
        self.with_db(|db| {
            let tx = db.begin_read().map_err(io)?;
            let table = tx.open_table(SCIM_GROUPS).map_err(io)?;
            let entries = match org {
                Some(org) => table.range(scim_user_key(org, [0; 16])..=scim_user_key(org, [0xff; 16])).map_err(io)?,
                None => table.iter().map_err(io)?,
            };
            entries.map(|entry| codec::decode(entry.map_err(io)?.1.value())).collect()
        })
    }

    /// Every client of the identity provider, by `client_id`.
    pub fn oauth_clients(&self) -> Result<Vec<super::ClientRecord>, StoreError> {
        self.with_db(|db| {
            let tx = db.begin_read().map_err(io)?;
            let table = tx.open_table(OAUTH_CLIENTS).map_err(io)?;
            let entries = table.iter().map_err(io)?;
            entries.map(|entry| super::provider_records::decode_client(entry.map_err(io)?.1.value())).collect()
        })
    }

    /// Every single sign-on provider, by `providerId`.
    pub fn sso_providers(&self) -> Result<Vec<super::SsoProviderRecord>, StoreError> {
        self.with_db(|db| {
            let tx = db.begin_read().map_err(io)?;
            let table = tx.open_table(SSO_PROVIDERS).map_err(io)?;
            let entries = table.iter().map_err(io)?;
            entries.map(|entry| super::sso_records::decode_sso_provider(entry.map_err(io)?.1.value())).collect()
        })
    }

    pub fn sso_provider(&self, provider_id: &str) -> Result<Option<super::SsoProviderRecord>, StoreError> {
        self.with_db(|db| {
            let tx = db.begin_read().map_err(io)?;
            let table = tx.open_table(SSO_PROVIDERS).map_err(io)?;
            let found = table.get(provider_id).map_err(io)?;
            found.map(|v| super::sso_records::decode_sso_provider(v.value())).transpose()
        })
    }

    pub fn oauth_client(&self, client_id: &str) -> Result<Option<super::ClientRecord>, StoreError> {
        self.with_db(|db| {
            let tx = db.begin_read().map_err(io)?;
            let table = tx.open_table(OAUTH_CLIENTS).map_err(io)?;
            let found = table.get(client_id).map_err(io)?;
            found.map(|v| super::provider_records::decode_client(v.value())).transpose()
        })
    }

    /// The authorization code of `hash`, if not redeemed yet.
    pub fn oauth_code(&self, hash: &TokenHash) -> Result<Option<super::OAuthCodeRecordV1>, StoreError> {
        self.with_db(|db| {
            let tx = db.begin_read().map_err(io)?;
            let table = tx.open_table(OAUTH_CODES).map_err(io)?;
            let found = table.get(hash).map_err(io)?;
            found.map(|v| codec::decode(v.value())).transpose()
        })
    }

    /// The device authorization request of `hash` (the SHA-256 of its device code), if not redeemed yet.
    pub fn oauth_device(&self, hash: &TokenHash) -> Result<Option<super::OAuthDeviceRecordV1>, StoreError> {
        self.with_db(|db| {
            let tx = db.begin_read().map_err(io)?;
            let table = tx.open_table(OAUTH_DEVICES).map_err(io)?;
            let found = table.get(hash).map_err(io)?;
            found.map(|v| codec::decode(v.value())).transpose()
        })
    }

    /// The device authorization request whose user code's SHA-256 is `user_code_hash`: its device code's hash and
    /// the request.
    pub fn oauth_device_by_user_code(
        &self,
        user_code_hash: &TokenHash,
    ) -> Result<Option<(TokenHash, super::OAuthDeviceRecordV1)>, StoreError> {
        self.with_db(|db| {
            let tx = db.begin_read().map_err(io)?;
            let Some(hash) =
                tx.open_table(OAUTH_USER_CODES).map_err(io)?.get(user_code_hash).map_err(io)?.map(|v| v.value())
            else {
                return Ok(None);
            };
            let table = tx.open_table(OAUTH_DEVICES).map_err(io)?;
            let found = table.get(hash).map_err(io)?;
            Ok(found.map(|v| codec::decode(v.value())).transpose()?.map(|r| (hash, r)))
        })
    }

    /// Every grant not past `now_ms`.
    pub fn oauth_grants(&self, now_ms: i64) -> Result<Vec<super::OAuthGrantRecord>, StoreError> {
        self.with_db(|db| {
            let tx = db.begin_read().map_err(io)?;
            let table = tx.open_table(OAUTH_GRANTS).map_err(io)?;
            let mut live = Vec::new();
            for entry in table.iter().map_err(io)? {
                let grant = super::provider_records::decode_grant(entry.map_err(io)?.1.value())?;
                if grant.expires_at_ms >= now_ms {
                    live.push(grant);
                }
            }
            Ok(live)
        })
    }

    pub fn oauth_grant(&self, id: [u8; 16]) -> Result<Option<super::OAuthGrantRecord>, StoreError> {
        self.with_db(|db| {
            let tx = db.begin_read().map_err(io)?;
            let table = tx.open_table(OAUTH_GRANTS).map_err(io)?;
            let found = table.get(id).map_err(io)?;
            found.map(|v| super::provider_records::decode_grant(v.value())).transpose()
        })
    }

    /// `user`'s consent to `client_id`, if given.
    pub fn oauth_consent(
        &self,
        user: [u8; 16],
        client_id: &str,
    ) -> Result<Option<super::OAuthConsentRecordV1>, StoreError> {
        let key = super::OAuthConsentRecordV1::key(user, client_id);
        self.with_db(|db| {
            let tx = db.begin_read().map_err(io)?;
            let table = tx.open_table(OAUTH_CONSENTS).map_err(io)?;
            let found = table.get(key.as_slice()).map_err(io)?;
            found.map(|v| codec::decode(v.value())).transpose()
        })
    }

    /// Every consent `user` has given, by `client_id`.
    pub fn oauth_consents_of(&self, user: [u8; 16]) -> Result<Vec<super::OAuthConsentRecordV1>, StoreError> {
        self.with_db(|db| {
            let tx = db.begin_read().map_err(io)?;
            let table = tx.open_table(OAUTH_CONSENTS).map_err(io)?;
            let mut out = Vec::new();
            // The key is the user's 16 bytes, then the client_id's: the user's consents are one range.
            for entry in table.range(user.as_slice()..).map_err(io)? {
                let (key, value) = entry.map_err(io)?;
                if !key.value().starts_with(&user) {
                    break;
                }
                out.push(codec::decode(value.value())?);
            }
            Ok(out)
        })
    }

    /// Every webhook endpoint, and since when each failing one has failed.
    pub fn webhooks(&self) -> Result<Vec<(WebhookRecordV1, Option<i64>)>, StoreError> {
        self.with_db(|db| {
            let tx = db.begin_read().map_err(io)?;
            let failing = tx.open_table(WEBHOOK_FAILING).map_err(io)?;
            let mut out = Vec::new();
            for entry in tx.open_table(WEBHOOKS).map_err(io)?.iter().map_err(io)? {
                let record = codec::decode::<WebhookRecordV1>(entry.map_err(io)?.1.value())?;
                let since = failing.get(record.id).map_err(io)?.map(|v| v.value());
                out.push((record, since));
            }
            Ok(out)
        })
    }

    /// The first `limit` messages of `endpoint`'s queue, in order, with their places; with `limit` 0, none and how
    /// many it holds (otherwise the count is not to be relied on).
    pub fn webhook_queue(
        &self,
        endpoint: [u8; 16],
        limit: usize,
    ) -> Result<(Vec<(u64, WebhookMessageRecordV1)>, u64), StoreError> {
        self.with_db(|db| {
            let tx = db.begin_read().map_err(io)?;
            let table = tx.open_table(WEBHOOK_QUEUE).map_err(io)?;
            let range = queue_key(endpoint, 0)..=queue_key(endpoint, u64::MAX);
            let mut out = Vec::new();
            let mut count = 0;
            for entry in table.range(range).map_err(io)? {
                let (key, value) = entry.map_err(io)?;
                count += 1;
                if limit > 0 && out.len() == limit {
                    // The deliverer's window: it needs no count (and a backlog must not cost a full scan a round).
                    break;
                }
                if out.len() < limit {
                    let mut seq = [0; 8];
                    seq.copy_from_slice(&key.value()[16..]);
                    out.push((u64::from_be_bytes(seq), codec::decode(value.value())?));
                }
            }
            Ok((out, count))
        })
    }

    /// Up to `limit` attempts of `endpoint`'s delivery log before `before` (from the newest when `None`), newest
    /// first.
    pub fn deliveries(
        &self,
        endpoint: [u8; 16],
        before: Option<[u8; 16]>,
        limit: usize,
    ) -> Result<Vec<DeliveryRecordV1>, StoreError> {
        self.with_db(|db| {
            let tx = db.begin_read().map_err(io)?;
            let table = tx.open_table(DELIVERIES).map_err(io)?;
            let end = delivery_key(endpoint, before.unwrap_or([0xff; 16]));
            let range = table.range(delivery_key(endpoint, [0; 16])..end).map_err(io)?;
            range.rev().take(limit).map(|entry| codec::decode(entry.map_err(io)?.1.value())).collect()
        })
    }

    /// Ids of at most `limit` audit entries to delete, oldest first: those before `before` (ids are UUID v7, so
    /// key order is time order), then the oldest beyond the caps. The entries anonymous callers caused count
    /// against `keep.anonymous` alone, the others against `keep.entries` alone.
    pub fn audit_to_prune(&self, before: [u8; 16], keep: AuditCaps, limit: usize) -> Result<Vec<[u8; 16]>, StoreError> {
        use redb::ReadableTableMetadata;
        self.with_db(|db| {
            let tx = db.begin_read().map_err(io)?;
            let table = tx.open_table(AUDIT).map_err(io)?;
            let anonymous = tx.open_table(AUDIT_ANONYMOUS).map_err(io)?;
            let anonymous_len = anonymous.len().map_err(io)?;
            let mut ids = Vec::new();
            // The anonymous stream first: it is the one a flood fills.
            let excess = anonymous_len.saturating_sub(keep.anonymous);
            for entry in anonymous.iter().map_err(io)? {
                let id = entry.map_err(io)?.0.value();
                if ids.len() >= limit || (id >= before && ids.len() as u64 >= excess) {
                    break;
                }
                ids.push(id);
            }
            let taken = ids.len();
            let excess = table.len().map_err(io)?.saturating_sub(anonymous_len).saturating_sub(keep.entries);
            for entry in table.iter().map_err(io)? {
                let id = entry.map_err(io)?.0.value();
                if ids.len() >= limit || (id >= before && (ids.len() - taken) as u64 >= excess) {
                    break;
                }
                if anonymous.get(id).map_err(io)?.is_none() {
                    ids.push(id);
                }
            }
            Ok(ids)
        })
    }

    /// Writes a consistent copy of the whole store to `path`: every table as of one read transaction, into a new
    /// database written beside `path` and renamed into place once durable. Writers are not blocked: redb's read
    /// transactions see a fixed snapshot while commits go on.
    pub fn snapshot_to(&self, path: &Path) -> Result<(), StoreError> {
        self.with_db(|db| snapshot(db, path))
    }

    /// Opens a scratch copy of the store file `path` (a backup) and runs `check` on it; the file itself is not
    /// touched. What `check` finds wrong (and a schema or record this version cannot read) is the error.
    pub fn check_file<T>(path: &Path, check: impl FnOnce(&Path) -> Result<T, StoreError>) -> Result<T, StoreError> {
        let dir = tempfile_dir_for(path)?;
        let checked = std::fs::copy(path, dir.join(FILE_NAME)).map_err(io).and_then(|_| check(&dir));
        let _ = std::fs::remove_dir_all(&dir);
        checked
    }

    /// Makes the store file `path` the store of `data_dir`: copied beside it, made durable, renamed over the old
    /// one (atomic), the rename made durable; the old one is kept as `service-auth.redb.replaced-<UTC time>`,
    /// returned (none when there was no store before). Fails with [`StoreError::Locked`] while a server holds the directory;
    /// holding the lock meanwhile keeps one from starting half-way.
    pub fn replace_file(data_dir: &Path, path: &Path) -> Result<Option<std::path::PathBuf>, StoreError> {
        let current = data_dir.join(FILE_NAME);
        let existed = current.exists();
        let guard = EmbeddedStore::open(data_dir)?;
        let staged = data_dir.join(format!("{FILE_NAME}.restoring"));
        std::fs::copy(path, &staged).map_err(|e| StoreError::Io(format!("{}: {e}", staged.display())))?;
        std::fs::set_permissions(&staged, private()).map_err(io)?;
        std::fs::File::open(&staged).and_then(|f| f.sync_all()).map_err(io)?;
        // The store being replaced stays, under another name: a restore of the wrong file is undone by
        // restoring this one. A second name for the same file (no copy), made before the rename swaps the store.
        let aside = existed.then(|| {
            data_dir.join(format!("{FILE_NAME}.replaced-{}", chrono::Utc::now().format("%Y%m%dT%H%M%S%.3fZ")))
        });
        if let Some(aside) = &aside {
            std::fs::hard_link(&current, aside)
                .or_else(|_| std::fs::copy(&current, aside).map(drop))
                .map_err(|e| StoreError::Io(format!("keeping the replaced store as {}: {e}", aside.display())))?;
        }
        std::fs::rename(&staged, &current).map_err(io)?;
        std::fs::File::open(data_dir).and_then(|d| d.sync_all()).map_err(io)?;
        drop(guard);
        Ok(aside)
    }

    /// How many accounts and sessions the store holds (start-up sizes its maps with these). Cheap: redb keeps
    /// each table's length.
    pub fn counts(&self) -> Result<(u64, u64), StoreError> {
        self.with_db(|db| {
            use redb::ReadableTableMetadata;
            let tx = db.begin_read().map_err(io)?;
            let users = tx.open_table(USERS).map_err(io)?.len().map_err(io)?;
            Ok((users, tx.open_table(SESSIONS).map_err(io)?.len().map_err(io)?))
        })
    }

    /// Whether the store holds no account, organization or session.
    pub fn is_empty(&self) -> Result<bool, StoreError> {
        self.with_db(|db| {
            use redb::ReadableTableMetadata;
            let tx = db.begin_read().map_err(io)?;
            let empty = tx.open_table(USERS).map_err(io)?.is_empty().map_err(io)?
                && tx.open_table(ORGS).map_err(io)?.is_empty().map_err(io)?
                && tx.open_table(SESSIONS).map_err(io)?.is_empty().map_err(io)?;
            Ok(empty)
        })
    }

    /// Deletes every record, the audit log included, in one transaction (`seed --force`).
    pub fn clear(&self) -> Result<(), StoreError> {
        self.with_db(|db| {
            let tx = db.begin_write().map_err(io)?;
            for table in [USERS, ORGS, AUDIT, AUDIT_ANONYMOUS, OUTBOX, INVITATIONS, ACCOUNTS, API_KEYS] {
                tx.delete_table(table).map_err(io)?;
            }
            tx.delete_table(SESSIONS).map_err(io)?;
            tx.delete_table(TOKENS).map_err(io)?;
            tx.delete_table(COUNTERS).map_err(io)?;
            tx.delete_table(MEMBERS).map_err(io)?;
            tx.delete_table(WEBHOOKS).map_err(io)?;
            tx.delete_table(WEBHOOK_FAILING).map_err(io)?;
            tx.delete_table(WEBHOOK_QUEUE).map_err(io)?;
            tx.delete_table(WEBHOOK_SEQ).map_err(io)?;
            tx.delete_table(DELIVERIES).map_err(io)?;
            tx.delete_table(PASSKEYS).map_err(io)?;
            tx.delete_table(PASSKEY_CREDENTIALS).map_err(io)?;
            tx.delete_table(PASSKEY_CHALLENGES).map_err(io)?;
            tx.delete_table(FLOWS).map_err(io)?;
            tx.delete_table(SIGNING_KEYS).map_err(io)?;
            tx.delete_table(OAUTH_CLIENTS).map_err(io)?;
            tx.delete_table(OAUTH_CODES).map_err(io)?;
            tx.delete_table(OAUTH_DEVICES).map_err(io)?;
            tx.delete_table(OAUTH_USER_CODES).map_err(io)?;
            tx.delete_table(OAUTH_CONSENTS).map_err(io)?;
            tx.delete_table(OAUTH_GRANTS).map_err(io)?;
            tx.delete_table(SSO_PROVIDERS).map_err(io)?;
            tx.delete_table(SCIM_TOKENS).map_err(io)?;
            tx.delete_table(SCIM_USERS).map_err(io)?;
            tx.delete_table(SCIM_USER_LOOKUP).map_err(io)?;
            tx.delete_table(SCIM_GROUPS).map_err(io)?;
            open_tables(&tx)?;
            tx.commit().map_err(io)
        })
    }

    /// Transactions committed since open: shows group commit at work (in tests and benchmarks).
    pub fn commit_count(&self) -> u64 {
        self.commits.load(Ordering::Relaxed)
    }

    /// Makes the next `n` commits fail without writing, as a full or read-only disk would.
    #[doc(hidden)]
    pub fn fail_next_commits(&self, n: u32) {
        self.faults.fail_next_commits(n);
    }
}

/// The organizations and users of `tx`, in that order.
fn visit_people(tx: &ReadTransaction, mut f: impl FnMut(Record) -> Result<(), StoreError>) -> Result<(), StoreError> {
    for entry in tx.open_table(ORGS).map_err(io)?.iter().map_err(io)? {
        f(Record::Org(codec::decode_org(entry.map_err(io)?.1.value())?))?;
    }
    for entry in tx.open_table(USERS).map_err(io)?.iter().map_err(io)? {
        f(Record::User(codec::decode_user(entry.map_err(io)?.1.value())?))?;
    }
    Ok(())
}

/// The memberships of `tx`, by organization and user.
fn visit_members(tx: &ReadTransaction, mut f: impl FnMut(Record) -> Result<(), StoreError>) -> Result<(), StoreError> {
    // Missing in a file written before memberships existed (a backup being checked, say): nothing to read.
    if let Ok(table) = tx.open_table(MEMBERS) {
        for entry in table.iter().map_err(io)? {
            f(Record::Member(codec::decode_member(entry.map_err(io)?.1.value())?))?;
        }
    }
    Ok(())
}

/// The invitations, one-time tokens, outbox, linked accounts and API keys of `tx`, in that order.
fn visit_rest(tx: &ReadTransaction, mut f: impl FnMut(Record) -> Result<(), StoreError>) -> Result<(), StoreError> {
    if let Ok(table) = tx.open_table(INVITATIONS) {
        for entry in table.iter().map_err(io)? {
            f(Record::Invitation(codec::decode_invitation(entry.map_err(io)?.1.value())?))?;
        }
    }
    for entry in tx.open_table(TOKENS).map_err(io)?.iter().map_err(io)? {
        let (key, value) = entry.map_err(io)?;
        // A token a newer release wrote in a format this one does not read is skipped (codec's rule).
        if let Some(token) = codec::read_token(value.value())? {
            f(Record::Token(key.value(), token))?;
        }
    }
    for entry in tx.open_table(OUTBOX).map_err(io)?.iter().map_err(io)? {
        f(Record::Outbox(codec::decode(entry.map_err(io)?.1.value())?))?;
    }
    for entry in tx.open_table(ACCOUNTS).map_err(io)?.iter().map_err(io)? {
        f(Record::Account(codec::decode(entry.map_err(io)?.1.value())?))?;
    }
    // A store written before API keys has no table (a read transaction does not create it).
    if let Ok(table) = tx.open_table(API_KEYS) {
        for entry in table.iter().map_err(io)? {
            f(Record::ApiKey(codec::decode(entry.map_err(io)?.1.value())?))?;
        }
    }
    Ok(())
}

/// The sessions of `tx`, in key order (by user).
fn visit_sessions(tx: &ReadTransaction, mut f: impl FnMut(Record) -> Result<(), StoreError>) -> Result<(), StoreError> {
    for entry in tx.open_table(SESSIONS).map_err(io)?.iter().map_err(io)? {
        let (key, value) = entry.map_err(io)?;
        let mut hash: TokenHash = [0; 32];
        hash.copy_from_slice(&key.value()[16..]);
        if let Some(session) = codec::read_session(value.value())? {
            f(Record::Session(hash, session))?;
        }
    }
    Ok(())
}

/// The back-channel logouts `op` (a session or every session of an account ended) owes, read before it is applied
/// ([`super::hooks::logouts`]).
fn logouts_of(
    op: &StoreOp,
    sessions: &impl ReadableTable<[u8; 48], &'static [u8]>,
    grants: &impl ReadableTable<[u8; 16], &'static [u8]>,
    clients: &impl ReadableTable<&'static str, &'static [u8]>,
) -> Result<Vec<WebhookMessageRecordV1>, StoreError> {
    use super::hooks::Ended;
    let mut ended = Vec::new();
    let (user, all) = match op {
        StoreOp::DeleteSession(user, hash) => {
            if let Some(found) = sessions.get(session_key(*user, hash)).map_err(io)? {
                ended.extend(codec::read_session(found.value())?.map(|s| s.id));
            }
            (*user, false)
        }
        StoreOp::DeleteSessionsOf { user, except: None } => (*user, true),
        StoreOp::DeleteSessionsOf { user, except: Some(kept) } => {
            let range = session_key(*user, &[0; 32])..=session_key(*user, &[u8::MAX; 32]);
            for entry in sessions.range(range).map_err(io)? {
                let (key, value) = entry.map_err(io)?;
                if key.value()[16..] != kept[..] {
                    ended.extend(codec::read_session(value.value())?.map(|s| s.id));
                }
            }
            (*user, false)
        }
        _ => return Ok(Vec::new()),
    };
    if !all && ended.is_empty() {
        return Ok(Vec::new());
    }
    // A scan, as at a ban: only a store with a back-channel client comes here.
    let mut held = Vec::new();
    for entry in grants.iter().map_err(io)? {
        let grant = super::provider_records::decode_grant(entry.map_err(io)?.1.value())?;
        if grant.user_id == Some(user) {
            held.push(grant);
        }
    }
    let which = if all { Ended::All } else { Ended::Sessions(&ended) };
    super::hooks::logouts(user, which, held, &mut |client_id| match clients.get(client_id).map_err(io)? {
        Some(found) => super::provider_records::decode_client(found.value()).map(Some),
        None => Ok(None),
    })
}

/// An account as the transaction holds it now (what the webhooks' fanout reads).
fn user_in(
    users: &impl ReadableTable<[u8; 16], &'static [u8]>,
    id: [u8; 16],
) -> Result<Option<super::UserRecord>, StoreError> {
    match users.get(id).map_err(io)? {
        Some(value) => codec::decode_user(value.value()).map(Some),
        None => Ok(None),
    }
}

fn commit(db: &Database, ops: &[&StoreOp]) -> Result<(), StoreError> {
    let tx = db.begin_write().map_err(io)?;
    {
        let mut users = tx.open_table(USERS).map_err(io)?;
        let mut orgs = tx.open_table(ORGS).map_err(io)?;
        let mut sessions = tx.open_table(SESSIONS).map_err(io)?;
        let mut audit = tx.open_table(AUDIT).map_err(io)?;
        let mut anonymous = tx.open_table(AUDIT_ANONYMOUS).map_err(io)?;
        let mut tokens = tx.open_table(TOKENS).map_err(io)?;
        let mut outbox = tx.open_table(OUTBOX).map_err(io)?;
        let mut counters = tx.open_table(COUNTERS).map_err(io)?;
        let mut members = tx.open_table(MEMBERS).map_err(io)?;
        let mut invitations = tx.open_table(INVITATIONS).map_err(io)?;
        let mut webhooks = tx.open_table(WEBHOOKS).map_err(io)?;
        let mut failing = tx.open_table(WEBHOOK_FAILING).map_err(io)?;
        let mut queue = tx.open_table(WEBHOOK_QUEUE).map_err(io)?;
        let mut seqs = tx.open_table(WEBHOOK_SEQ).map_err(io)?;
        let mut deliveries = tx.open_table(DELIVERIES).map_err(io)?;
        let mut next_seq = seqs.get("next_seq").map_err(io)?.map_or(1, |v| v.value());
        let mut enqueue = |queue: &mut redb::Table<[u8; 24], &[u8]>, m: &WebhookMessageRecordV1| {
            let key = queue_key(m.endpoint, next_seq);
            next_seq += 1;
            put(queue, key, m)
        };
        let mut fanout = if !super::hooks::may_raise(ops.iter().copied()) {
            None
        } else {
            let mut endpoints = Vec::new();
            for entry in webhooks.iter().map_err(io)? {
                endpoints.push(codec::decode::<WebhookRecordV1>(entry.map_err(io)?.1.value())?);
            }
            Fanout::new(endpoints)
        };

        let mut passkeys = Passkeys {
            by_key: tx.open_table(PASSKEYS).map_err(io)?,
            by_credential: tx.open_table(PASSKEY_CREDENTIALS).map_err(io)?,
            challenges: tx.open_table(PASSKEY_CHALLENGES).map_err(io)?,
        };
        let mut accounts = tx.open_table(ACCOUNTS).map_err(io)?;
        let mut api_keys = tx.open_table(API_KEYS).map_err(io)?;
        let mut flows = tx.open_table(FLOWS).map_err(io)?;
        let mut signing_keys = tx.open_table(SIGNING_KEYS).map_err(io)?;
        let mut clients = tx.open_table(OAUTH_CLIENTS).map_err(io)?;
        let mut codes = tx.open_table(OAUTH_CODES).map_err(io)?;
        let mut devices = tx.open_table(OAUTH_DEVICES).map_err(io)?;
        let mut user_codes = tx.open_table(OAUTH_USER_CODES).map_err(io)?;
        let mut consents = tx.open_table(OAUTH_CONSENTS).map_err(io)?;
        let mut grants = tx.open_table(OAUTH_GRANTS).map_err(io)?;
        let mut sso = tx.open_table(SSO_PROVIDERS).map_err(io)?;
        let mut scim_tokens = tx.open_table(SCIM_TOKENS).map_err(io)?;
        let mut scim_users = tx.open_table(SCIM_USERS).map_err(io)?;
        let mut scim_lookup = tx.open_table(SCIM_USER_LOOKUP).map_err(io)?;
        let mut scim_groups = tx.open_table(SCIM_GROUPS).map_err(io)?;
        // Whether any client hears of its users' sign-outs: read once per commit that ends a session, so that a
        // store without such clients pays for no grant scan at a sign-out.
        let mut backchannel: Option<bool> = None;
        for &op in ops {
            if matches!(op, StoreOp::DeleteSession(..) | StoreOp::DeleteSessionsOf { .. }) {
                let wanted = match backchannel {
                    Some(known) => known,
                    None => {
                        let mut any = false;
                        for entry in clients.iter().map_err(io)? {
                            let client = super::provider_records::decode_client(entry.map_err(io)?.1.value())?;
                            any |= client.backchannel_logout_uri.is_some();
                        }
                        *backchannel.insert(any)
                    }
                };
                if wanted {
                    for message in logouts_of(op, &sessions, &grants, &clients)? {
                        enqueue(&mut queue, &message)?;
                    }
                }
            }
            if let Some(fanout) = fanout.as_mut() {
                fanout.op(op, &mut |id| user_in(&users, id))?;
            }
            match op {
                StoreOp::PutUser(r) => put(&mut users, r.id, r)?,
                StoreOp::DeleteUser(id) => {
                    users.remove(id).map_err(io)?;
                    passkeys.delete_all_of(*id)?;
                }
                StoreOp::PutOrg(r) => {
                    orgs.insert(r.id, codec::encode_org(r).as_slice()).map_err(io)?;
                }
                StoreOp::DeleteOrg(id) => {
                    orgs.remove(id).map_err(io)?;
                }
                // One node: the sessions actor never refreshes a session it has ended.
                StoreOp::PutSession(hash, r) | StoreOp::RefreshSession(hash, r) => {
                    put(&mut sessions, session_key(r.user_id, hash), r)?
                }
                StoreOp::DeleteSession(user, hash) => {
                    sessions.remove(session_key(*user, hash)).map_err(io)?;
                }
                StoreOp::DeleteSessionsOf { user, except } => {
                    let range = session_key(*user, &[0; 32])..=session_key(*user, &[u8::MAX; 32]);
                    let kept = except.map(|hash| session_key(*user, &hash));
                    sessions.retain_in(range, |key, _| Some(key) == kept).map_err(io)?;
                    if except.is_none() {
                        // Every session of the account: its grants to the identity provider's clients end with
                        // them (a scan: bans and resets are rare next to the grants' reads, all from memory),
                        // each audited here, in this commit, as the store alone knows which they are.
                        let mut ended = Vec::new();
                        grants
                            .retain(|_, v| match super::provider_records::decode_grant(v) {
                                Ok(g) if g.user_id == Some(*user) => {
                                    ended.push(g);
                                    false
                                }
                                _ => true,
                            })
                            .map_err(io)?;
                        for logged in ended.iter().filter_map(super::audit::grant_ended_with_sessions) {
                            if let Some(fanout) = fanout.as_mut() {
                                fanout.op(&logged, &mut |id| user_in(&users, id))?;
                            }
                            if let StoreOp::PutAudit(r) = &logged {
                                put(&mut audit, r.id, r)?;
                            }
                        }
                    }
                }
                StoreOp::PutAudit(r) => {
                    put(&mut audit, r.id, r)?;
                    if crate::domain::is_anonymous_action(&r.action) {
                        anonymous.insert(r.id, [].as_slice()).map_err(io)?;
                    }
                }
                StoreOp::DeleteAudit(id) => {
                    audit.remove(id).map_err(io)?;
                    anonymous.remove(id).map_err(io)?;
                }
                StoreOp::PutToken(hash, r) => {
                    tokens.insert(*hash, codec::encode_token(r).as_slice()).map_err(io)?;
                }
                StoreOp::DeleteToken(hash) => {
                    tokens.remove(hash).map_err(io)?;
                }
                StoreOp::PutOutbox(r) => put(&mut outbox, r.id, r)?,
                StoreOp::DeleteOutbox(id) => {
                    outbox.remove(id).map_err(io)?;
                }
                StoreOp::AddCount { kind, hour_ms, n } => {
                    for period in [super::Period::Hour, super::Period::Day] {
                        let key = counter_key(period, *kind, period.floor(*hour_ms));
                        let before = counters.get(key).map_err(io)?.map_or(0, |v| v.value());
                        counters.insert(key, before.saturating_add(*n)).map_err(io)?;
                    }
                }
                StoreOp::PruneCounts { hours_before_ms, days_before_ms } => {
                    counters
                        .retain(|key, _| match counter_of_key(key) {
                            Ok((super::Period::Hour, _, start)) => start >= *hours_before_ms,
                            Ok((super::Period::Day, _, start)) => start >= *days_before_ms,
                            Err(_) => true,
                        })
                        .map_err(io)?;
                }
                StoreOp::PutMember(r) => put(&mut members, super::own::member_key(r.org, r.user), r)?,
                StoreOp::DeleteMember(org, user) => {
                    members.remove(super::own::member_key(*org, *user)).map_err(io)?;
                }
                StoreOp::PutInvitation(r) => put(&mut invitations, r.id, r)?,
                StoreOp::DeleteInvitation(id) => {
                    invitations.remove(id).map_err(io)?;
                }
                // One node: the users actor keeps the failure limit, and the organizations' owners, in memory.
                StoreOp::ReserveAttempt { .. }
                | StoreOp::EndAttempt { .. }
                | StoreOp::ExpectUser { .. }
                | StoreOp::ExpectOwner(_) => {}
                StoreOp::PutWebhook(r) => put(&mut webhooks, r.id, r)?,
                StoreOp::DeleteWebhook(id) => {
                    webhooks.remove(id).map_err(io)?;
                    failing.remove(id).map_err(io)?;
                    let mut end = *id;
                    // The next id: the ranges below end before it (an id of all 0xff has no successor; none is made).
                    for byte in end.iter_mut().rev() {
                        let (next, carry) = byte.overflowing_add(1);
                        *byte = next;
                        if !carry {
                            break;
                        }
                    }
                    queue.retain_in(queue_key(*id, 0)..queue_key(end, 0), |_, _| false).map_err(io)?;
                    let (from, to) = (delivery_key(*id, [0; 16]), delivery_key(end, [0; 16]));
                    deliveries.retain_in(from..to, |_, _| false).map_err(io)?;
                }
                StoreOp::SetWebhookFailing { id, since_ms: Some(since) } => {
                    failing.insert(id, since).map_err(io)?;
                }
                StoreOp::SetWebhookFailing { id, since_ms: None } => {
                    failing.remove(id).map_err(io)?;
                }
                StoreOp::PutWebhookMessage(m) => enqueue(&mut queue, m)?,
                StoreOp::DeleteWebhookMessage { endpoint, seq } => {
                    queue.remove(queue_key(*endpoint, *seq)).map_err(io)?;
                }
                StoreOp::PutDelivery(r) => put(&mut deliveries, delivery_key(r.endpoint, r.id), r)?,
                StoreOp::DeleteDeliveriesBefore { before_ms } => {
                    deliveries
                        .retain(|_, value| {
                            codec::decode::<DeliveryRecordV1>(value).map_or(true, |r| r.at_ms >= *before_ms)
                        })
                        .map_err(io)?;
                }
                StoreOp::PutPasskey(r) => passkeys.put(r)?,
                StoreOp::DeletePasskey { user, id } => passkeys.delete(passkey_key(*user, *id))?,
                StoreOp::PutPasskeyChallenge(hash, r) => put(&mut passkeys.challenges, *hash, r)?,
                StoreOp::PutAccount(r) => put(&mut accounts, r.id, r)?,
                StoreOp::DeleteAccount { id, .. } => {
                    accounts.remove(id).map_err(io)?;
                }
                StoreOp::PutApiKey(r) => put(&mut api_keys, r.id, r)?,
                // One node: the sessions actor counted the use on the copy it holds, which is this one; the key is
                // there and has the use left (it was checked in the same message order).
                StoreOp::UseApiKey { id, at_ms, .. } => {
                    let held = api_keys.get(id).map_err(io)?.map(|v| codec::decode(v.value())).transpose()?;
                    let at = crate::domain::Timestamp::from_millis(*at_ms);
                    if let Some(used) = held.and_then(|r| super::convert::api_key_used(r, at)) {
                        put(&mut api_keys, *id, &used)?;
                    }
                }
                StoreOp::DeleteApiKey { id, .. } => {
                    api_keys.remove(id).map_err(io)?;
                }
                StoreOp::PutFlow(hash, r) => put(&mut flows, *hash, r)?,
                StoreOp::PutSigningKey(r) => put(&mut signing_keys, r.id, r)?,
                StoreOp::DeleteSigningKey(id) => {
                    signing_keys.remove(id).map_err(io)?;
                }
                StoreOp::PutOAuthClient(r) => {
                    clients.insert(r.client_id.as_str(), codec::encode(r).as_slice()).map_err(io)?;
                }
                StoreOp::DeleteOAuthClient(client_id) => {
                    clients.remove(client_id.as_str()).map_err(io)?;
                }
                StoreOp::PutSsoProvider(r) => {
                    sso.insert(r.provider_id.as_str(), codec::encode(r.as_ref()).as_slice()).map_err(io)?;
                }
                StoreOp::DeleteSsoProvider(provider_id) => {
                    sso.remove(provider_id.as_str()).map_err(io)?;
                }
                StoreOp::PutOAuthCode(hash, r) => put(&mut codes, *hash, r)?,
                // One node: one redemption at a time holds a code (its claim in src/provider/grants.rs), so the
                // code is there. Unredeemed codes past their time go with the housekeeping (prune_expired_grants).
                StoreOp::TakeOAuthCode(hash) => {
                    codes.remove(hash).map_err(io)?;
                }
                StoreOp::PutOAuthDevice(hash, r) => {
                    put(&mut devices, *hash, r)?;
                    user_codes.insert(r.user_code_hash, *hash).map_err(io)?;
                }
                // One node: the facade holds a claim on the request while it polls or redeems it, and another
                // while it decides it (src/provider/devices.rs), so two polls or two answers never cross; a poll
                // and an answer may, and each changes only its own fields of the request as it is here. A request
                // gone meanwhile (pruned) is left gone.
                StoreOp::PollOAuthDevice { hash, at_ms, interval_secs } => {
                    let found =
                        devices.get(hash).map_err(io)?.map(|v| codec::decode::<super::OAuthDeviceRecordV1>(v.value()));
                    if let Some(mut r) = found.transpose()? {
                        r.polled_at_ms = Some(*at_ms);
                        r.interval_secs = *interval_secs;
                        put(&mut devices, *hash, &r)?;
                    }
                }
                StoreOp::DecideOAuthDevice { hash, decision } => {
                    let found =
                        devices.get(hash).map_err(io)?.map(|v| codec::decode::<super::OAuthDeviceRecordV1>(v.value()));
                    if let Some(mut r) = found.transpose()? {
                        r.decision = decision.clone();
                        put(&mut devices, *hash, &r)?;
                    }
                }
                StoreOp::TakeOAuthDevice(hash) => {
                    let removed = devices
                        .remove(hash)
                        .map_err(io)?
                        .map(|v| codec::decode::<super::OAuthDeviceRecordV1>(v.value()));
                    if let Some(r) = removed.transpose()? {
                        user_codes.remove(r.user_code_hash).map_err(io)?;
                    }
                }
                StoreOp::PutOAuthGrant(r) => put(&mut grants, r.id, r)?,
                // One node: one refresh at a time holds a grant (its claim in src/provider/grants.rs), so the
                // grant's refresh token is still `from`.
                StoreOp::RotateOAuthGrant { grant: r, .. } => put(&mut grants, r.id, r)?,
                StoreOp::DeleteOAuthGrant(id) => {
                    grants.remove(id).map_err(io)?;
                }
                StoreOp::PutOAuthConsent(r) => {
                    let key = super::OAuthConsentRecordV1::key(r.user_id, &r.client_id);
                    consents.insert(key.as_slice(), codec::encode(r).as_slice()).map_err(io)?;
                }
                StoreOp::DeleteOAuthConsent { user, client_id } => {
                    let key = super::OAuthConsentRecordV1::key(*user, client_id);
                    consents.remove(key.as_slice()).map_err(io)?;
                }
                StoreOp::PutScimToken(r) => {
                    scim_tokens.insert(r.id, codec::encode(r).as_slice()).map_err(io)?;
                }
                StoreOp::DeleteScimToken(id) => {
                    scim_tokens.remove(id).map_err(io)?;
                }
                StoreOp::PutScimUser(r) => {
                    let old =
                        scim_users.insert(scim_user_key(r.org, r.user), codec::encode(r).as_slice()).map_err(io)?;
                    if let Some(old) = old {
                        let old: super::ScimUserRecordV1 = codec::decode(old.value())?;
                        for key in old.lookup_keys() {
                            scim_lookup.remove(key.as_slice()).map_err(io)?;
                        }
                    }
                    for key in r.lookup_keys() {
                        scim_lookup.insert(key.as_slice(), ()).map_err(io)?;
                    }
                }
                StoreOp::DeleteScimUser { org, user } => {
                    if let Some(old) = scim_users.remove(scim_user_key(*org, *user)).map_err(io)? {
                        let old: super::ScimUserRecordV1 = codec::decode(old.value())?;
                        for key in old.lookup_keys() {
                            scim_lookup.remove(key.as_slice()).map_err(io)?;
                        }
                    }
                }
                StoreOp::PutScimGroup(r) => {
                    scim_groups.insert(scim_user_key(r.org, r.team), codec::encode(r).as_slice()).map_err(io)?;
                }
                StoreOp::DeleteScimGroup { org, team } => {
                    scim_groups.remove(scim_user_key(*org, *team)).map_err(io)?;
                }
                // One node: one callback at a time finishes a flow (its claim in src/accounts/oauth.rs), so the
                // flow is there; abandoned flows past their time go with it.
                StoreOp::TakeFlow(hash) => {
                    flows.remove(hash).map_err(io)?;
                }
            }
        }
        if let Some(fanout) = fanout {
            for message in &fanout.messages {
                enqueue(&mut queue, message)?;
            }
        }
        seqs.insert("next_seq", next_seq).map_err(io)?;
    }
    tx.commit().map_err(io)
}

fn queue_key(endpoint: [u8; 16], seq: u64) -> [u8; 24] {
    let mut key = [0; 24];
    key[..16].copy_from_slice(&endpoint);
    key[16..].copy_from_slice(&seq.to_be_bytes());
    key
}

fn delivery_key(endpoint: [u8; 16], id: [u8; 16]) -> [u8; 32] {
    let mut key = [0; 32];
    key[..16].copy_from_slice(&endpoint);
    key[16..].copy_from_slice(&id);
    key
}

/// The passkey tables of one write transaction: the records and their credential index change together.
struct Passkeys<'tx> {
    by_key: redb::Table<'tx, [u8; 32], &'static [u8]>,
    by_credential: redb::Table<'tx, &'static [u8], [u8; 32]>,
    challenges: redb::Table<'tx, [u8; 32], &'static [u8]>,
}

impl Passkeys<'_> {
    fn put(&mut self, r: &PasskeyRecordV1) -> Result<(), StoreError> {
        let key = passkey_key(r.user_id, r.id);
        put(&mut self.by_key, key, r)?;
        self.by_credential.insert(r.credential_id.as_slice(), key).map_err(io)?;
        Ok(())
    }

    fn delete(&mut self, key: [u8; 32]) -> Result<(), StoreError> {
        let removed = self.by_key.remove(key).map_err(io)?.map(|v| codec::decode::<PasskeyRecordV1>(v.value()));
        if let Some(record) = removed {
            self.by_credential.remove(record?.credential_id.as_slice()).map_err(io)?;
        }
        Ok(())
    }

    /// Every passkey of an account that is being deleted.
    fn delete_all_of(&mut self, user: [u8; 16]) -> Result<(), StoreError> {
        let keys: Vec<[u8; 32]> = self
            .by_key
            .range(passkey_key(user, [0; 16])..=passkey_key(user, [u8::MAX; 16]))
            .map_err(io)?
            .map(|entry| entry.map(|(k, _)| k.value()).map_err(io))
            .collect::<Result<_, _>>()?;
        keys.into_iter().try_for_each(|key| self.delete(key))
    }
}

impl EmbeddedStore {
    /// Every passkey of `user`, oldest id first. Reads a snapshot.
    pub fn passkeys_of(&self, user: [u8; 16]) -> Result<Vec<PasskeyRecordV1>, StoreError> {
        self.with_db(|db| {
            let tx = db.begin_read().map_err(io)?;
            let table = tx.open_table(PASSKEYS).map_err(io)?;
            let range = table.range(passkey_key(user, [0; 16])..=passkey_key(user, [u8::MAX; 16])).map_err(io)?;
            range.map(|entry| codec::decode(entry.map_err(io)?.1.value())).collect()
        })
    }

    /// Every passkey (`migrate-store`).
    pub fn all_passkeys(&self) -> Result<Vec<PasskeyRecordV1>, StoreError> {
        self.with_db(|db| {
            let tx = db.begin_read().map_err(io)?;
            let table = tx.open_table(PASSKEYS).map_err(io)?;
            table.iter().map_err(io)?.map(|entry| codec::decode(entry.map_err(io)?.1.value())).collect()
        })
    }

    /// The passkey whose credential id is `credential`, if one is registered.
    pub fn passkey_by_credential(&self, credential: &[u8]) -> Result<Option<PasskeyRecordV1>, StoreError> {
        self.with_db(|db| {
            let tx = db.begin_read().map_err(io)?;
            let Some(key) = tx.open_table(PASSKEY_CREDENTIALS).map_err(io)?.get(credential).map_err(io)? else {
                return Ok(None);
            };
            let found = tx.open_table(PASSKEYS).map_err(io)?.get(key.value()).map_err(io)?;
            found.map(|v| codec::decode(v.value())).transpose()
        })
    }

    /// Removes the ceremony of `hash` and returns it, unless it has expired by `now_ms`: a write transaction of its
    /// own (redb runs one at a time), durable before it returns, so that two verifications cannot both have it.
    pub fn take_passkey_challenge(
        &self,
        hash: &TokenHash,
        now_ms: i64,
    ) -> Result<Option<PasskeyChallengeRecordV1>, StoreError> {
        self.with_db(|db| {
            let tx = db.begin_write().map_err(io)?;
            let taken = {
                let mut table = tx.open_table(PASSKEY_CHALLENGES).map_err(io)?;
                let removed = table.remove(hash).map_err(io)?;
                removed.map(|v| codec::decode::<PasskeyChallengeRecordV1>(v.value())).transpose()?
            };
            if taken.is_some() {
                tx.commit().map_err(io)?;
            }
            Ok(taken.filter(|c| c.expires_at_ms > now_ms))
        })
    }

    /// Deletes the sign-in flows, authorization codes and grants past their end at `now_ms`; how many. One pass
    /// over each table, from the housekeeping (a redemption or a refresh deletes only its own record).
    pub fn prune_expired_grants(&self, now_ms: i64) -> Result<usize, StoreError> {
        /// Deletes the records of `table` that `end` says ended before `now_ms` (and those `decode` cannot read).
        fn past<R>(
            table: &mut redb::Table<'_, impl redb::Key + 'static, &[u8]>,
            now_ms: i64,
            decode: fn(&[u8]) -> Result<R, StoreError>,
            end: fn(&R) -> i64,
        ) -> Result<usize, StoreError> {
            let mut pruned = 0;
            table
                .retain(|_, v| {
                    let over = decode(v).map_or(true, |r| end(&r) < now_ms);
                    pruned += usize::from(over);
                    !over
                })
                .map_err(io)?;
            Ok(pruned)
        }
        self.with_db(|db| {
            let tx = db.begin_write().map_err(io)?;
            let flows = codec::decode::<super::linked::OAuthFlowRecordV1>;
            let codes = codec::decode::<super::OAuthCodeRecordV1>;
            // Either format of a grant: a grant made in an organization is the second's.
            let grants = super::provider_records::decode_grant;
            let pruned = past(&mut tx.open_table(FLOWS).map_err(io)?, now_ms, flows, |f| f.expires_at_ms)?
                + past(&mut tx.open_table(OAUTH_CODES).map_err(io)?, now_ms, codes, |c| c.expires_at_ms)?
                + past(&mut tx.open_table(OAUTH_GRANTS).map_err(io)?, now_ms, grants, |g| g.expires_at_ms)?
                + prune_devices(&tx, now_ms)?;
            if pruned > 0 {
                tx.commit().map_err(io)?;
            }
            Ok(pruned)
        })
    }

    /// Deletes the ceremonies that expired before `now_ms` (never verified); returns how many.
    pub fn prune_passkey_challenges(&self, now_ms: i64) -> Result<usize, StoreError> {
        self.with_db(|db| {
            let tx = db.begin_write().map_err(io)?;
            let mut pruned = 0;
            {
                let mut table = tx.open_table(PASSKEY_CHALLENGES).map_err(io)?;
                table
                    .retain(|_, v| {
                        let expired =
                            codec::decode::<PasskeyChallengeRecordV1>(v).map_or(true, |c| c.expires_at_ms <= now_ms);
                        pruned += usize::from(expired);
                        !expired
                    })
                    .map_err(io)?;
            }
            if pruned > 0 {
                tx.commit().map_err(io)?;
            }
            Ok(pruned)
        })
    }
}

fn snapshot(db: &Database, path: &Path) -> Result<(), StoreError> {
    let tmp = path.with_extension("partial");
    let _ = std::fs::remove_file(&tmp);
    let source = db.begin_read().map_err(io)?;
    {
        // A backup holds every password hash: readable by its owner only, from its first byte.
        create_private(&tmp).map_err(|e| StoreError::Io(format!("{}: {e}", tmp.display())))?;
        let copy = Database::builder().set_cache_size(CACHE_BYTES).create(&tmp).map_err(io)?;
        let tx = copy.begin_write().map_err(io)?;
        copy_table(&source, &tx, USERS)?;
        copy_table(&source, &tx, ORGS)?;
        copy_table(&source, &tx, SESSIONS)?;
        copy_table(&source, &tx, AUDIT)?;
        copy_table(&source, &tx, AUDIT_ANONYMOUS)?;
        copy_table(&source, &tx, TOKENS)?;
        copy_table(&source, &tx, OUTBOX)?;
        copy_table(&source, &tx, MEMBERS)?;
        copy_table(&source, &tx, INVITATIONS)?;
        {
            let mut counters = tx.open_table(COUNTERS).map_err(io)?;
            if let Ok(table) = source.open_table(COUNTERS) {
                for entry in table.iter().map_err(io)? {
                    let (key, value) = entry.map_err(io)?;
                    counters.insert(key.value(), value.value()).map_err(io)?;
                }
            }
        }

        copy_table(&source, &tx, WEBHOOKS)?;
        copy_table(&source, &tx, WEBHOOK_QUEUE)?;
        copy_table(&source, &tx, DELIVERIES)?;
        if let Ok(failing) = source.open_table(WEBHOOK_FAILING) {
            let mut out = tx.open_table(WEBHOOK_FAILING).map_err(io)?;
            for entry in failing.iter().map_err(io)? {
                let (key, value) = entry.map_err(io)?;
                out.insert(key.value(), value.value()).map_err(io)?;
            }
        }
        if let Ok(seq) = source.open_table(WEBHOOK_SEQ) {
            let mut out = tx.open_table(WEBHOOK_SEQ).map_err(io)?;
            for entry in seq.iter().map_err(io)? {
                let (key, value) = entry.map_err(io)?;
                out.insert(key.value(), value.value()).map_err(io)?;
            }
        }

        copy_table(&source, &tx, PASSKEYS)?;
        copy_table(&source, &tx, PASSKEY_CHALLENGES)?;
        {
            let mut out = tx.open_table(PASSKEY_CREDENTIALS).map_err(io)?;
            for entry in source.open_table(PASSKEY_CREDENTIALS).map_err(io)?.iter().map_err(io)? {
                let (key, value) = entry.map_err(io)?;
                out.insert(key.value(), value.value()).map_err(io)?;
            }
        }
        copy_table(&source, &tx, ACCOUNTS)?;
        if source.open_table(SIGNING_KEYS).is_ok() {
            copy_table(&source, &tx, SIGNING_KEYS)?;
        }
        copy_table(&source, &tx, API_KEYS)?;
        if let Ok(codes) = source.open_table(OAUTH_CODES) {
            let mut out = tx.open_table(OAUTH_CODES).map_err(io)?;
            for entry in codes.iter().map_err(io)? {
                let (key, value) = entry.map_err(io)?;
                out.insert(key.value(), value.value()).map_err(io)?;
            }
        }
        if let Ok(tokens) = source.open_table(SCIM_TOKENS) {
            let mut out = tx.open_table(SCIM_TOKENS).map_err(io)?;
            for entry in tokens.iter().map_err(io)? {
                let (key, value) = entry.map_err(io)?;
                out.insert(key.value(), value.value()).map_err(io)?;
            }
        }
        if let Ok(devices) = source.open_table(OAUTH_DEVICES) {
            let mut out = tx.open_table(OAUTH_DEVICES).map_err(io)?;
            for entry in devices.iter().map_err(io)? {
                let (key, value) = entry.map_err(io)?;
                out.insert(key.value(), value.value()).map_err(io)?;
            }
        }
        if let Ok(user_codes) = source.open_table(OAUTH_USER_CODES) {
            let mut out = tx.open_table(OAUTH_USER_CODES).map_err(io)?;
            for entry in user_codes.iter().map_err(io)? {
                let (key, value) = entry.map_err(io)?;
                out.insert(key.value(), value.value()).map_err(io)?;
            }
        }
        if let Ok(grants) = source.open_table(OAUTH_GRANTS) {
            let mut out = tx.open_table(OAUTH_GRANTS).map_err(io)?;
            for entry in grants.iter().map_err(io)? {
                let (key, value) = entry.map_err(io)?;
                out.insert(key.value(), value.value()).map_err(io)?;
            }
        }
        if let Ok(consents) = source.open_table(OAUTH_CONSENTS) {
            let mut out = tx.open_table(OAUTH_CONSENTS).map_err(io)?;
            for entry in consents.iter().map_err(io)? {
                let (key, value) = entry.map_err(io)?;
                out.insert(key.value(), value.value()).map_err(io)?;
            }
        }
        if let Ok(users) = source.open_table(SCIM_USERS) {
            let mut out = tx.open_table(SCIM_USERS).map_err(io)?;
            for entry in users.iter().map_err(io)? {
                let (key, value) = entry.map_err(io)?;
                out.insert(key.value(), value.value()).map_err(io)?;
            }
        }
        if let Ok(lookup) = source.open_table(SCIM_USER_LOOKUP) {
            let mut out = tx.open_table(SCIM_USER_LOOKUP).map_err(io)?;
            for entry in lookup.iter().map_err(io)? {
                out.insert(entry.map_err(io)?.0.value(), ()).map_err(io)?;
            }
        }
        if let Ok(groups) = source.open_table(SCIM_GROUPS) {
            let mut out = tx.open_table(SCIM_GROUPS).map_err(io)?;
            for entry in groups.iter().map_err(io)? {
                let (key, value) = entry.map_err(io)?;
                out.insert(key.value(), value.value()).map_err(io)?;
            }
        }
        if let Ok(clients) = source.open_table(OAUTH_CLIENTS) {
            let mut out = tx.open_table(OAUTH_CLIENTS).map_err(io)?;
            for entry in clients.iter().map_err(io)? {
                let (key, value) = entry.map_err(io)?;
                out.insert(key.value(), value.value()).map_err(io)?;
            }
        }
        if let Ok(providers) = source.open_table(SSO_PROVIDERS) {
            let mut out = tx.open_table(SSO_PROVIDERS).map_err(io)?;
            for entry in providers.iter().map_err(io)? {
                let (key, value) = entry.map_err(io)?;
                out.insert(key.value(), value.value()).map_err(io)?;
            }
        }
        {
            let mut meta = tx.open_table(META).map_err(io)?;
            for entry in source.open_table(META).map_err(io)?.iter().map_err(io)? {
                let (key, value) = entry.map_err(io)?;
                meta.insert(key.value(), value.value()).map_err(io)?;
            }
        }
        tx.commit().map_err(io)?;
    }
    std::fs::rename(&tmp, path).map_err(io)?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        // The rename itself must survive a crash too.
        std::fs::File::open(dir).and_then(|d| d.sync_all()).map_err(io)?;
    }
    Ok(())
}

/// Owner read and write only (0600).
fn private() -> std::fs::Permissions {
    std::os::unix::fs::PermissionsExt::from_mode(0o600)
}

/// Creates `path` empty with mode 0600 (or makes an existing file 0600).
pub fn create_private(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(path)?;
    file.set_permissions(private())?;
    Ok(file)
}

/// A scratch directory beside `path`, for checking a snapshot without touching it.
fn tempfile_dir_for(path: &Path) -> Result<std::path::PathBuf, StoreError> {
    let base = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let dir = base.join(format!(".service-auth-check-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(io)?;
    Ok(dir)
}

fn copy_table<const N: usize>(
    source: &redb::ReadTransaction,
    target: &redb::WriteTransaction,
    table: TableDefinition<[u8; N], &[u8]>,
) -> Result<(), StoreError> {
    let mut out = target.open_table(table).map_err(io)?;
    let source = match source.open_table(table) {
        Ok(source) => source,
        // A table this file never had (written before it existed): nothing to copy.
        Err(redb::TableError::TableDoesNotExist(_)) => return Ok(()),
        Err(e) => return Err(io(e)),
    };
    for entry in source.iter().map_err(io)? {
        let (key, value) = entry.map_err(io)?;
        out.insert(key.value(), value.value()).map_err(io)?;
    }
    Ok(())
}

/// Deletes the device authorization requests past their end by more than
/// [`super::DEVICE_EXPIRED_KEPT_MS`] (and their user codes); how many.
fn prune_devices(tx: &redb::WriteTransaction, now_ms: i64) -> Result<usize, StoreError> {
    let mut devices = tx.open_table(OAUTH_DEVICES).map_err(io)?;
    let mut past = Vec::new();
    devices
        .retain(|_, v| {
            let over = codec::decode::<super::OAuthDeviceRecordV1>(v).map_or(None, |r| {
                (r.expires_at_ms + super::DEVICE_EXPIRED_KEPT_MS < now_ms).then_some(r.user_code_hash)
            });
            if let Some(user_code) = over {
                past.push(user_code);
            }
            over.is_none()
        })
        .map_err(io)?;
    let mut user_codes = tx.open_table(OAUTH_USER_CODES).map_err(io)?;
    for user_code in &past {
        user_codes.remove(user_code).map_err(io)?;
    }
    Ok(past.len())
}

fn put<K, R>(table: &mut redb::Table<K, &[u8]>, key: K, record: &R) -> Result<(), StoreError>
where
    K: redb::Key + for<'a> std::borrow::Borrow<K::SelfType<'a>> + 'static,
    R: Versioned,
{
    table.insert(key, codec::encode(record).as_slice()).map_err(io)?;
    Ok(())
}

fn io(e: impl std::fmt::Display) -> StoreError {
    StoreError::Io(e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::SessionRecord;

    /// The counters' key format is stored: period, counter, big-endian start (so key order is time order).
    #[test]
    fn counter_keys_have_their_stored_bytes() {
        use crate::store::Period;
        assert_eq!(counter_key(Period::Day, 3, 86_400_000), [1, 3, 0, 0, 0, 0, 0x05, 0x26, 0x5c, 0x00]);
        assert_eq!(counter_key(Period::Hour, 1, 3_600_000), [0, 1, 0, 0, 0, 0, 0x00, 0x36, 0xee, 0x80]);
        assert_eq!(
            counter_of_key(counter_key(Period::Hour, 5, 1_795_338_000_000)).unwrap(),
            (Period::Hour, 5, 1_795_338_000_000)
        );
        assert!(counter_key(Period::Hour, 1, 1) < counter_key(Period::Hour, 1, 256));
        assert!(counter_of_key([7, 0, 0, 0, 0, 0, 0, 0, 0, 0]).is_err(), "an unknown period is corrupt, not a guess");
    }

    /// A backup holds the counters; counts add up in the store, and retention drops only old buckets.
    #[test]
    fn counters_add_up_survive_a_snapshot_and_are_pruned() {
        use crate::store::{CountRow, Period};
        let dir = tempfile::tempdir().unwrap();
        let store = EmbeddedStore::open(dir.path()).unwrap();
        let hour = Period::Hour.floor(1_795_338_000_000);
        store.commit(&[StoreOp::AddCount { kind: 2, hour_ms: hour, n: 3 }]).unwrap();
        store.commit(&[StoreOp::AddCount { kind: 2, hour_ms: hour, n: 4 }]).unwrap();
        store.commit(&[StoreOp::AddCount { kind: 1, hour_ms: hour - 72 * 3_600_000, n: 1 }]).unwrap();
        let day = Period::Day.floor(hour);
        let rows = store.counts_since(hour, day).unwrap();
        assert_eq!(
            rows,
            [
                CountRow { period: Period::Hour, kind: 2, start_ms: hour, n: 7 },
                CountRow { period: Period::Day, kind: 2, start_ms: day, n: 7 },
            ]
        );
        let backup = dir.path().join("backup.redb");
        store.snapshot_to(&backup).unwrap();
        let copy = tempfile::tempdir().unwrap();
        std::fs::copy(&backup, copy.path().join(FILE_NAME)).unwrap();
        assert_eq!(
            EmbeddedStore::open(copy.path()).unwrap().counts_since(0, 0).unwrap(),
            store.counts_since(0, 0).unwrap()
        );
        store.commit(&[StoreOp::PruneCounts { hours_before_ms: hour - 3_600_000, days_before_ms: 0 }]).unwrap();
        let left = store.counts_since(0, 0).unwrap();
        assert_eq!(left.iter().filter(|r| r.period == Period::Hour).count(), 1, "the old hour went: {left:?}");
        assert_eq!(left.iter().filter(|r| r.period == Period::Day).count(), 2, "the days stay: {left:?}");
    }

    /// A stopped server releases its directory even while a late task still holds the `EmbeddedStore` (the cause of a
    /// restart test that flaked: the next server found the file locked).
    #[test]
    fn close_releases_the_directory_while_others_still_hold_the_store() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(EmbeddedStore::open(dir.path()).unwrap());
        let late = Arc::clone(&store);
        store.close();
        let again = EmbeddedStore::open(dir.path()).expect("the directory is still locked");
        assert!(late.load().is_err(), "a closed store still reads");
        drop(again);
    }

    /// What an upgrade then a downgrade does: a file stamped with a newer schema is refused with a message naming
    /// both schemas, and its stamp is not rewritten (redb itself touches its header on open, so the bytes are not
    /// compared).
    #[test]
    fn a_store_written_by_a_newer_schema_is_refused_and_left_unchanged() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        drop(EmbeddedStore::open(dir.path()).unwrap());
        let stamp = |version: Option<u32>| {
            let db = Database::create(&path).unwrap();
            let tx = db.begin_write().unwrap();
            let found = {
                let mut meta = tx.open_table(META).unwrap();
                if let Some(v) = version {
                    meta.insert("schema_version", v).unwrap();
                }
                meta.get("schema_version").unwrap().map(|v| v.value())
            };
            tx.commit().unwrap();
            found
        };
        stamp(Some(SCHEMA_VERSION + 1));
        let err = EmbeddedStore::open(dir.path()).err().expect("a newer schema was opened");
        assert!(
            matches!(&err, StoreError::NewerSchema { found, supported: SCHEMA_VERSION, .. } if *found == SCHEMA_VERSION + 1),
            "{err:?}"
        );
        let message = err.to_string();
        assert!(message.contains("newer version of service-auth") && message.contains(&path.display().to_string()));
        assert_eq!(stamp(None), Some(SCHEMA_VERSION + 1));
    }

    #[test]
    fn a_second_open_of_the_same_directory_is_locked() {
        let dir = tempfile::tempdir().unwrap();
        let _first = EmbeddedStore::open(dir.path()).unwrap();
        let Err(StoreError::Locked(holder)) = EmbeddedStore::open(dir.path()) else { panic!("not locked") };
        assert_eq!(holder, LockHolder { dir: dir.path().to_path_buf(), pid: Some(std::process::id()) });
        let message = StoreError::Locked(holder).to_string();
        assert_eq!(
            message,
            format!(
                "the data directory {} is in use by another service-auth process (PID {})",
                dir.path().display(),
                std::process::id()
            )
        );
    }

    /// Passkeys: an account's are one range and go with it, the credential index follows, a snapshot keeps them;
    /// a ceremony is taken once, and an expired one is found by nobody and pruned.
    /// The codes, grants and flows past their end go at the housekeeping, in one pass; a redemption, a refresh or a
    /// callback deletes only its own (none of them scans the table any more).
    #[test]
    fn expired_codes_grants_and_flows_are_pruned_and_live_ones_kept() {
        let dir = tempfile::tempdir().unwrap();
        let store = EmbeddedStore::open(dir.path()).unwrap();
        let code = |expires_at_ms| super::super::OAuthCodeRecordV1 {
            client_id: "c".into(),
            user_id: [1; 16],
            session_id: [2; 16],
            redirect_uri: "https://rp.example/cb".into(),
            scopes: vec!["openid".into()],
            code_challenge: None,
            nonce: None,
            auth_time_ms: 0,
            expires_at_ms,
        };
        let grant = |id: u8, expires_at_ms| super::super::OAuthGrantRecord {
            id: [id; 16],
            client_id: "c".into(),
            user_id: Some([1; 16]),
            session_id: None,
            scopes: vec!["openid".into()],
            auth_time_ms: 0,
            refresh_hash: None,
            retired: Vec::new(),
            created_at_ms: 0,
            updated_at_ms: 0,
            expires_at_ms,
            organization: None,
        };
        let flow = |expires_at_ms| super::super::linked::OAuthFlowRecordV1 {
            provider: "p".into(),
            pkce_verifier: "v".into(),
            nonce: String::new(),
            browser: [0; 32],
            redirect_uri: "https://here/cb".into(),
            callback_url: "/".into(),
            error_url: None,
            new_user_url: None,
            link_user: None,
            expires_at_ms,
        };
        store
            .commit(&[
                StoreOp::PutOAuthCode([1; 32], code(10)),
                StoreOp::PutOAuthCode([2; 32], code(100)),
                StoreOp::PutOAuthGrant(grant(3, 10)),
                StoreOp::PutOAuthGrant(grant(4, 100)),
                StoreOp::PutFlow([5; 32], flow(10)),
                StoreOp::PutFlow([6; 32], flow(100)),
            ])
            .unwrap();
        // Taking one leaves the others, expired or not, to the housekeeping.
        store.commit(&[StoreOp::TakeOAuthCode([2; 32])]).unwrap();
        assert!(store.oauth_code(&[1; 32]).unwrap().is_some());
        assert_eq!(store.prune_expired_grants(50).unwrap(), 3);
        assert!(store.oauth_code(&[1; 32]).unwrap().is_none());
        assert!(store.oauth_grant([3; 16]).unwrap().is_none());
        assert!(store.oauth_grant([4; 16]).unwrap().is_some());
        assert!(store.flow(&[5; 32]).unwrap().is_none());
        assert!(store.flow(&[6; 32]).unwrap().is_some());
        assert_eq!(store.prune_expired_grants(50).unwrap(), 0);
    }

    #[test]
    fn passkeys_go_with_their_account_and_ceremonies_are_taken_once() {
        let dir = tempfile::tempdir().unwrap();
        let store = EmbeddedStore::open(dir.path()).unwrap();
        let passkey = |id: u8, user: u8| PasskeyRecordV1 {
            id: [id; 16],
            user_id: [user; 16],
            name: None,
            credential_id: vec![id],
            public_key: vec![0xa0],
            counter: 0,
            backup_eligible: false,
            backed_up: false,
            transports: Vec::new(),
            aaguid: None,
            created_at_ms: 0,
        };
        let put = |r| StoreOp::PutPasskey(r);
        store.commit(&[put(passkey(1, 7)), put(passkey(2, 7)), put(passkey(3, 8))]).unwrap();
        assert_eq!(store.passkeys_of([7; 16]).unwrap(), vec![passkey(1, 7), passkey(2, 7)]);
        store.commit(&[StoreOp::DeletePasskey { user: [7; 16], id: [1; 16] }]).unwrap();
        assert_eq!(store.passkey_by_credential(&[1]).unwrap(), None);
        assert_eq!(store.passkey_by_credential(&[2]).unwrap(), Some(passkey(2, 7)));
        store.commit(&[StoreOp::DeleteUser([7; 16])]).unwrap();
        assert!(store.passkeys_of([7; 16]).unwrap().is_empty());
        assert_eq!(store.passkey_by_credential(&[2]).unwrap(), None);
        assert_eq!(store.all_passkeys().unwrap(), vec![passkey(3, 8)]);

        let copy = tempfile::tempdir().unwrap();
        store.snapshot_to(&copy.path().join(FILE_NAME)).unwrap();
        let copied = EmbeddedStore::open(copy.path()).unwrap();
        assert_eq!(copied.passkey_by_credential(&[3]).unwrap(), Some(passkey(3, 8)));

        let ceremony =
            |expires_at_ms| PasskeyChallengeRecordV1 { kind: 2, user_id: None, state: b"{}".to_vec(), expires_at_ms };
        store
            .commit(&[
                StoreOp::PutPasskeyChallenge([1; 32], ceremony(100)),
                StoreOp::PutPasskeyChallenge([2; 32], ceremony(10)),
            ])
            .unwrap();
        assert_eq!(store.take_passkey_challenge(&[1; 32], 50).unwrap(), Some(ceremony(100)));
        assert_eq!(store.take_passkey_challenge(&[1; 32], 50).unwrap(), None, "taken once");
        store.commit(&[StoreOp::PutPasskeyChallenge([3; 32], ceremony(10))]).unwrap();
        assert_eq!(store.prune_passkey_challenges(50).unwrap(), 2);
        assert_eq!(store.take_passkey_challenge(&[2; 32], 5).unwrap(), None, "pruned");
    }

    #[test]
    fn committed_state_survives_reopen_and_deletes_stick() {
        let dir = tempfile::tempdir().unwrap();
        let session = SessionRecord {
            id: [1; 16],
            user_id: [2; 16],
            expires_at_ms: 10,
            created_at_ms: 1,
            updated_at_ms: 1,
            ip_address: String::new(),
            user_agent: String::new(),
            remember_me: true,
            impersonated_by: None,
            active_organization: None,
            active_team: None,
        };
        {
            let store = EmbeddedStore::open(dir.path()).unwrap();
            store
                .commit(&[StoreOp::PutSession([8; 32], session.clone()), StoreOp::PutSession([9; 32], session.clone())])
                .unwrap();
            store.commit(&[StoreOp::DeleteSession([2; 16], [8; 32])]).unwrap();
        }
        let loaded = EmbeddedStore::open(dir.path()).unwrap().load().unwrap();
        assert_eq!(loaded.sessions, vec![([9; 32], session)]);
    }

    fn scim_user(user: u8, user_name: &str, external_id: Option<&str>) -> crate::store::ScimUserRecordV1 {
        crate::store::ScimUserRecordV1 {
            org: [1; 16],
            user: [user; 16],
            user_name: user_name.into(),
            external_id: external_id.map(Into::into),
            active: true,
            attributes: "{}".into(),
            created_at_ms: 1,
            updated_at_ms: 1,
        }
    }

    /// The SCIM lookup index follows every write of a record: a new userName or externalId finds it, the old ones
    /// no longer do, a deleted record is found by none, and another organization's lookup finds nothing.
    #[test]
    fn the_scim_lookup_index_follows_each_write() {
        use crate::store::ScimLookup;
        let dir = tempfile::tempdir().unwrap();
        let store = EmbeddedStore::open(dir.path()).unwrap();
        let found = |lookup: ScimLookup| -> Vec<[u8; 16]> {
            store.scim_users_by([1; 16], &lookup).unwrap().iter().map(|r| r.user).collect()
        };
        store
            .commit(&[
                StoreOp::PutScimUser(scim_user(2, "Ann", Some("x-1"))),
                StoreOp::PutScimUser(scim_user(3, "ann.b", None)),
            ])
            .unwrap();
        assert_eq!(found(ScimLookup::user_name("ANN")), vec![[2; 16]]);
        assert_eq!(found(ScimLookup::external_id("x-1")), vec![[2; 16]]);
        assert!(found(ScimLookup::external_id("X-1")).is_empty(), "externalId is compared with case");
        assert!(store.scim_users_by([9; 16], &ScimLookup::user_name("ann")).unwrap().is_empty());
        store.commit(&[StoreOp::PutScimUser(scim_user(2, "Anna", Some("x-2")))]).unwrap();
        assert!(found(ScimLookup::user_name("ann")).is_empty(), "the old userName's key went with the rewrite");
        assert!(found(ScimLookup::external_id("x-1")).is_empty());
        assert_eq!(found(ScimLookup::user_name("anna")), vec![[2; 16]]);
        store.commit(&[StoreOp::DeleteScimUser { org: [1; 16], user: [2; 16] }]).unwrap();
        assert!(found(ScimLookup::user_name("anna")).is_empty());
        assert!(found(ScimLookup::external_id("x-2")).is_empty());
        assert_eq!(found(ScimLookup::user_name("ANN.B")), vec![[3; 16]]);
    }

    /// A store of schema 2 (before the index) gets the index of its SCIM users at open.
    #[test]
    fn a_schema_2_store_gets_its_scim_lookup_index() {
        use crate::store::ScimLookup;
        let dir = tempfile::tempdir().unwrap();
        {
            let db = Database::create(dir.path().join(FILE_NAME)).unwrap();
            let tx = db.begin_write().unwrap();
            tx.open_table(META).unwrap().insert("schema_version", 2).unwrap();
            let record = scim_user(2, "Ann", Some("x-1"));
            let key = scim_user_key(record.org, record.user);
            tx.open_table(SCIM_USERS).unwrap().insert(key, codec::encode(&record).as_slice()).unwrap();
            tx.commit().unwrap();
        }
        let store = EmbeddedStore::open(dir.path()).unwrap();
        assert_eq!(store.scim_users_by([1; 16], &ScimLookup::user_name("ann")).unwrap().len(), 1);
        assert_eq!(store.scim_users_by([1; 16], &ScimLookup::external_id("x-1")).unwrap().len(), 1);
    }

    /// Before: sessions were keyed by token hash alone, so ending a thousand sessions of one account rewrote a
    /// thousand scattered pages. A store of that schema is upgraded at open, sessions and all.
    #[test]
    fn a_schema_1_store_is_upgraded_with_its_sessions() {
        use crate::store::SessionRecordV1;
        let dir = tempfile::tempdir().unwrap();
        let old = SessionRecordV1 {
            id: [1; 16],
            user_id: [2; 16],
            expires_at_ms: 10,
            created_at_ms: 1,
            updated_at_ms: 1,
            ip_address: String::new(),
            user_agent: String::new(),
            remember_me: true,
        };
        {
            let db = Database::create(dir.path().join(FILE_NAME)).unwrap();
            let tx = db.begin_write().unwrap();
            tx.open_table(META).unwrap().insert("schema_version", 1).unwrap();
            tx.open_table(SESSIONS_BY_HASH).unwrap().insert([8; 32], codec::encode(&old).as_slice()).unwrap();
            tx.commit().unwrap();
        }
        let store = EmbeddedStore::open(dir.path()).unwrap();
        assert_eq!(
            store.load().unwrap().sessions,
            vec![([8; 32], SessionRecord::from(crate::store::records::SessionRecordV2::from(old)))]
        );
        store.commit(&[StoreOp::DeleteSession([2; 16], [8; 32])]).unwrap();
        assert!(store.load().unwrap().sessions.is_empty(), "the upgraded key is the one deletes use");
        drop(store);
        let db = Database::create(dir.path().join(FILE_NAME)).unwrap();
        let tx = db.begin_read().unwrap();
        assert_eq!(tx.open_table(META).unwrap().get("schema_version").unwrap().unwrap().value(), SCHEMA_VERSION);
        assert!(tx.open_table(SESSIONS_BY_HASH).is_err(), "the old table is gone");
    }
}
