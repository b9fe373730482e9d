//! The PostgreSQL backend (docs/cluster.md): the same records as the embedded store, in tables several nodes share.
//!
//! - The schema is `migrations/postgres/*.sql`, applied at connect by refinery under an advisory lock (nodes
//!   starting together do not race), and a database migrated further than this version knows is refused.
//! - The writer's connection commits a batch of requests in one transaction, a savepoint around each request that
//!   can conflict with another node (unique e-mail, unique slug, the last administrator), so a conflict fails
//!   that request alone and answers as it would on one node.
//! - Every commit appends its changes to `changes` under a transaction-scoped advisory lock (sequence order is
//!   commit order) and notifies; [`super::follower`] applies the other nodes' changes.
//!
//! The synchronous client fits the writer, which is an OS thread of its own. Connections are plain TCP or a
//! Unix socket: TLS to PostgreSQL is not built (see docs/cluster.md).

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use postgres::error::SqlState;
use postgres::{Client, NoTls, Statement, Transaction};

use super::codec;
use super::hook_records::{DeliveryRecordV1, WebhookMessageRecordV1, WebhookRecordV1};
use super::hooks::Fanout;
use super::own::OwnCommits;
use super::passkey_records::{PasskeyChallengeRecordV1, PasskeyRecordV1};
use super::records::{AuditRecordV1, UserRecord};
use super::worker::{TimedOut, Worker};
use super::{Conflict, FaultSwitch, Record, StoreError, StoreOp, TokenHash, changes};

mod embedded {
    refinery::embed_migrations!("migrations/postgres");
}

/// The channel `NOTIFY` uses after each commit; the payload is the new sequence number.
pub(crate) const CHANNEL: &str = "service_auth_changes";
/// Advisory lock keys (an arbitrary 64-bit constant each, "sa" + purpose).
const MIGRATION_LOCK: i64 = 0x7361_0001;
const CHANGES_LOCK: i64 = 0x7361_0002;
const ADMINS_LOCK: i64 = 0x7361_0003;
/// Rows fetched per round trip while loading.
const LOAD_CHUNK: i32 = 10_000;
/// Connecting gives up after this: a node that cannot reach the database must say so, not hang.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// The server cancels a statement running longer (a lock held by a stuck node, say): the request fails and the
/// node tries again, rather than waiting with it.
const STATEMENT_TIMEOUT: Duration = Duration::from_secs(5);
/// The server ends a session left idle inside a transaction this long (its client froze or vanished
/// mid-transaction), so the locks it holds, the change log's among them, do not stop every other node's commits.
const IDLE_IN_TRANSACTION_TIMEOUT: Duration = Duration::from_secs(10);
/// TCP: probes after this long without traffic, every `KEEPALIVE_INTERVAL`, and the connection is dropped when
/// sent data stays unacknowledged for `TCP_USER_TIMEOUT` (a peer or network that went silent).
const KEEPALIVE_IDLE: Duration = Duration::from_secs(10);
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(2);
const KEEPALIVE_RETRIES: u32 = 3;
const TCP_USER_TIMEOUT: Duration = Duration::from_secs(15);
/// A commit (with its one retry) that has no answer by then is given up and the writer reconnects: longer than
/// a statement may run, so only a frozen connection gets there.
pub(crate) const COMMIT_DEADLINE: Duration = Duration::from_secs(15);
/// How many times a deadlock's victim is run again before the store gives up (and degrades).
const VICTIM_RETRIES: u32 = 3;

/// What [`PgStore::claim_outbox`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    /// This node holds the message now: send it.
    Claimed,
    /// Another node holds it for this much longer.
    Held(Duration),
    /// No such message any more: another node sent it.
    Gone,
}

/// Turns one loaded row into a record.
/// One row as a record, or `None` for a record a newer release wrote that may be skipped (codec's rule).
type ReadRow = fn(&postgres::Row) -> Result<Option<Record>, StoreError>;

pub struct PgStore {
    config: postgres::Config,
    /// This process: its own changes are skipped by its follower.
    node: uuid::Uuid,
    writer: Mutex<Option<Worker<Writer>>>,
    pool: Mutex<Vec<Client>>,
    pool_size: usize,
    degraded: Mutex<Option<String>>,
    commits: AtomicU64,
    /// The last change the loaded state includes: the follower starts after it.
    loaded_seq: AtomicI64,
    /// This node's acknowledged commits its follower has not passed yet (see [`super::own`]).
    own: Arc<OwnCommits>,
    /// Records a commit found changed in the database (a `Changed` conflict, a refresh of a session no longer
    /// there): the follower reads them back into memory, so that a node whose memory went wrong repairs it instead of refusing forever.
    resync: Mutex<Vec<Resync>>,
    faults: FaultSwitch,
}

/// A record to read back from the database into memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Resync {
    User([u8; 16]),
    Session([u8; 16], TokenHash),
    /// An API key (its id, its owner's).
    ApiKey([u8; 16], [u8; 16]),
}

/// The writer's connection and its prepared statements (prepared once: each would otherwise cost a round trip).
struct Writer {
    client: Client,
    s: Prepared,
}

struct Prepared {
    put_user: Statement,
    delete_user: Statement,
    put_org: Statement,
    delete_org: Statement,
    put_session: Statement,
    delete_session: Statement,
    delete_sessions_of: Statement,
    claim: Statement,
    put_audit: Statement,
    delete_audit: Statement,
    put_token: Statement,
    delete_token: Statement,
    put_outbox: Statement,
    delete_outbox: Statement,
    get_user: Statement,
    put_webhook: Statement,
    put_message: Statement,
    delete_message: Statement,
    append: Statement,
    reserve_attempt: Statement,
    attempt_window: Statement,
    clear_attempts: Statement,
    release_attempt: Statement,
    delete_account: Statement,
    put_api_key: Statement,
    delete_api_key: Statement,
    delete_invitation: Statement,
    delete_member: Statement,
    put_account: Statement,
    put_flow: Statement,
    put_invitation: Statement,
    put_member: Statement,
    take_flow: Statement,
}

impl Writer {
    fn connect(config: &postgres::Config) -> Result<Self, postgres::Error> {
        let mut client = config.connect(NoTls)?;
        let upsert = |table: &str, key: &str, columns: &[&str]| {
            let all: Vec<&str> = key.split(", ").chain(columns.iter().copied()).collect();
            let marks: Vec<String> = (1..=all.len()).map(|n| format!("${n}")).collect();
            let set: Vec<String> = columns.iter().map(|c| format!("{c} = excluded.{c}")).collect();
            format!(
                "INSERT INTO {table} ({}) VALUES ({}) ON CONFLICT ({key}) DO UPDATE SET {}",
                all.join(", "),
                marks.join(", "),
                set.join(", ")
            )
        };
        let s = Prepared {
            put_user: client.prepare(&upsert(
                "users",
                "id",
                &["email", "active_admin", "organization_id", "record", "username"],
            ))?,
            delete_user: client.prepare("DELETE FROM users WHERE id = $1")?,
            put_org: client.prepare(&upsert("organizations", "id", &["slug", "record"]))?,
            delete_org: client.prepare("DELETE FROM organizations WHERE id = $1")?,
            put_session: client.prepare(&upsert("sessions", "user_id, hash", &["record"]))?,
            delete_session: client.prepare("DELETE FROM sessions WHERE user_id = $1 AND hash = $2")?,
            delete_sessions_of: client
                .prepare("DELETE FROM sessions WHERE user_id = $1 AND ($2::bytea IS NULL OR hash <> $2::bytea)")?,
            claim: client.prepare("INSERT INTO commit_ids (id) VALUES ($1)")?,
            put_audit: client.prepare(&upsert("audit", "id", &["anonymous", "record"]))?,
            delete_audit: client.prepare("DELETE FROM audit WHERE id = $1")?,
            put_token: client.prepare(&upsert("tokens", "hash", &["record"]))?,
            delete_token: client.prepare("DELETE FROM tokens WHERE hash = $1")?,
            put_outbox: client.prepare(&upsert("outbox", "id", &["record"]))?,
            delete_outbox: client.prepare("DELETE FROM outbox WHERE id = $1")?,
            get_user: client.prepare("SELECT record FROM users WHERE id = $1")?,
            put_webhook: client.prepare(&upsert("webhooks", "id", &["record"]))?,
            put_message: client.prepare("INSERT INTO webhook_queue (endpoint, record) VALUES ($1, $2)")?,
            delete_message: client.prepare("DELETE FROM webhook_queue WHERE seq = $1 AND endpoint = $2")?,
            append: client.prepare("INSERT INTO changes (node, ops) VALUES ($1, $2) RETURNING seq")?,
            // A new window when the last one has ended; otherwise one more, while under the limit. No row back:
            // locked. The row lock makes concurrent reservations from every node count one after the other.
            reserve_attempt: client.prepare(
                "INSERT INTO attempts AS a (email, window_end_ms, used) VALUES ($1, $2, 1) \
                 ON CONFLICT (email) DO UPDATE SET \
                   window_end_ms = CASE WHEN a.window_end_ms <= $4 THEN excluded.window_end_ms ELSE a.window_end_ms END, \
                   used = CASE WHEN a.window_end_ms <= $4 THEN 1 ELSE a.used + 1 END \
                 WHERE a.window_end_ms <= $4 OR a.used < $3 \
                 RETURNING used",
            )?,
            attempt_window: client.prepare("SELECT window_end_ms FROM attempts WHERE email = $1")?,
            clear_attempts: client.prepare("DELETE FROM attempts WHERE email = $1")?,
            release_attempt: client.prepare("UPDATE attempts SET used = greatest(used - 1, 0) WHERE email = $1")?,
            put_member: client.prepare(&upsert("memberships", "organization_id, user_id", &["owner", "record"]))?,
            delete_member: client.prepare("DELETE FROM memberships WHERE organization_id = $1 AND user_id = $2")?,
            put_invitation: client.prepare(&upsert("invitations", "id", &["organization_id", "record"]))?,
            delete_invitation: client.prepare("DELETE FROM invitations WHERE id = $1")?,
            put_account: client
                .prepare(&upsert("accounts", "id", &["user_id", "provider", "subject", "record"]))?,
            delete_account: client.prepare("DELETE FROM accounts WHERE id = $1")?,
            put_api_key: client.prepare(&upsert("api_keys", "id", &["user_id", "record"]))?,
            delete_api_key: client.prepare("DELETE FROM api_keys WHERE id = $1")?,
            put_flow: client.prepare(&upsert("oauth_flows", "hash", &["expires_at_ms", "record"]))?,
            // Abandoned flows go with any later one's end: the table holds only the last ten minutes' starts.
            take_flow: client.prepare("DELETE FROM oauth_flows WHERE hash = $1")?,
        };
        Ok(Self { client, s })
    }
}

/// The device authorization request of `hash`, locked to the transaction; `None` when it is gone (or unreadable, as
/// good as gone).
fn locked_device(
    tx: &mut postgres::Transaction<'_>,
    hash: &super::TokenHash,
) -> Result<Option<super::OAuthDeviceRecordV1>, Refused> {
    let row = tx.query_opt("SELECT record FROM oauth_devices WHERE hash = $1 FOR UPDATE", &[&hash.as_slice()])?;
    Ok(row.and_then(|row| codec::decode(row.get(0)).ok()))
}

/// Why one request's ops were not applied.
enum Refused {
    /// A rule of the whole cluster: this request alone is refused.
    Conflict(Conflict),
    /// The database failed: the whole transaction is lost.
    Failed(postgres::Error),
}

impl From<postgres::Error> for Refused {
    fn from(e: postgres::Error) -> Self {
        Refused::Failed(e)
    }
}

impl PgStore {
    /// Connects, applies the migrations this version has (refusing a database migrated further), and prepares
    /// the writer's connection.
    pub fn connect(url: &str, pool_size: usize, faults: FaultSwitch) -> Result<Self, StoreError> {
        let mut config: postgres::Config =
            url.parse().map_err(|_| StoreError::Io("store.url is not a valid PostgreSQL connection URL".into()))?;
        config.connect_timeout(CONNECT_TIMEOUT);
        config.application_name("service-auth");
        bound_waits(&mut config);
        let mut client = config.connect(NoTls).map_err(db)?;
        migrate(&mut client)?;
        let writer = start_writer(&config)?;
        Ok(Self {
            config,
            node: uuid::Uuid::now_v7(),
            writer: Mutex::new(Some(writer)),
            pool: Mutex::new(vec![client]),
            pool_size,
            degraded: Mutex::new(None),
            commits: AtomicU64::new(0),
            loaded_seq: AtomicI64::new(0),
            own: Arc::default(),
            resync: Mutex::default(),
            faults,
        })
    }

    /// A new connection with the store's settings (the follower's own).
    pub(crate) fn connect_client(&self) -> Result<Client, postgres::Error> {
        self.config.connect(NoTls)
    }

    pub(crate) fn node(&self) -> uuid::Uuid {
        self.node
    }

    pub(crate) fn own(&self) -> &Arc<OwnCommits> {
        &self.own
    }

    pub(crate) fn faults(&self) -> &FaultSwitch {
        &self.faults
    }

    /// The records to read back into memory (see [`PgStore::resync`]), taken.
    pub(crate) fn take_resync(&self) -> Vec<Resync> {
        std::mem::take(&mut *self.resync.lock().unwrap_or_else(std::sync::PoisonError::into_inner))
    }

    /// Records [`take_resync`](Self::take_resync) gave out and the follower could not read: asked for again.
    pub(crate) fn resync_later(&self, records: Vec<Resync>) {
        self.resync.lock().unwrap_or_else(std::sync::PoisonError::into_inner).extend(records);
    }

    /// The sequence number of the last change the last [`visit`](Self::visit) included.
    pub(crate) fn loaded_seq(&self) -> i64 {
        self.loaded_seq.load(Ordering::SeqCst)
    }

    pub fn health(&self) -> Result<(), String> {
        match &*self.degraded.lock().unwrap_or_else(std::sync::PoisonError::into_inner) {
            None => Ok(()),
            Some(reason) => Err(reason.clone()),
        }
    }

    fn set_degraded(&self, reason: Option<String>) {
        *self.degraded.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = reason;
    }

    /// After a failed commit: a new writer connection, proven with a round trip.
    pub(super) fn recover(&self) -> Result<(), StoreError> {
        let writer = start_writer(&self.config)?;
        let probe = writer.run(COMMIT_DEADLINE, |w| w.client.simple_query("SELECT 1").map(drop));
        probe.map_err(|TimedOut| StoreError::Io("PostgreSQL did not answer".into()))?.map_err(db)?;
        *self.writer.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(writer);
        let pool = std::mem::take(&mut *self.pool.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
        // Not here: closing a connection waits for the server's answer, which a frozen one never gives.
        let _ = std::thread::Builder::new().name("store-close".into()).spawn(move || drop(pool));
        self.set_degraded(None);
        Ok(())
    }

    pub fn close(&self) {
        self.set_degraded(Some("the store is closed".into()));
        // The writer's connection closes on its own thread once that ends.
        drop(self.writer.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take());
        let pool = std::mem::take(&mut *self.pool.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
        drop_off_runtime(pool);
    }

    /// Runs `f` on a pooled connection (a new one when none is idle); a connection that failed is not kept.
    fn pooled<T>(&self, f: impl FnOnce(&mut Client) -> Result<T, postgres::Error>) -> Result<T, StoreError> {
        let idle = self.pool.lock().unwrap_or_else(std::sync::PoisonError::into_inner).pop();
        let mut client = match idle {
            Some(client) if !client.is_closed() => client,
            _ => self.config.connect(NoTls).map_err(db)?,
        };
        let result = match f(&mut client) {
            Ok(result) => result,
            Err(e) => {
                drop_off_runtime(client);
                return Err(db(e));
            }
        };
        let mut pool = self.pool.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if pool.len() < self.pool_size {
            pool.push(client);
        } else {
            drop_off_runtime(client);
        }
        Ok(result)
    }

    /// Every record from one snapshot (repeatable read), in the embedded store's order, and the sequence number
    /// of the last change that snapshot includes.
    pub fn visit(&self, mut f: impl FnMut(Record) -> Result<(), StoreError>) -> Result<(), StoreError> {
        let mut client = self.config.connect(NoTls).map_err(db)?;
        let mut tx = client
            .build_transaction()
            .isolation_level(postgres::IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .map_err(db)?;
        // Appends are serialised and in commit order, so every change up to this one is in the snapshot and none
        // after it is.
        let seq: i64 = tx.query_one("SELECT coalesce(max(seq), 0) FROM changes", &[]).map_err(db)?.get(0);
        let tables: [(&str, ReadRow); 9] = [
            ("SELECT record FROM organizations", |r| Ok(Some(Record::Org(codec::decode_org(r.get(0))?)))),
            ("SELECT record FROM users", |r| Ok(Some(Record::User(codec::decode_user(r.get(0))?)))),
            ("SELECT record FROM memberships", |r| Ok(Some(Record::Member(codec::decode_member(r.get(0))?)))),
            ("SELECT record FROM invitations", |r| Ok(Some(Record::Invitation(codec::decode_invitation(r.get(0))?)))),
            ("SELECT hash, record FROM tokens", |r| {
                codec::read_token(r.get(1))?.map(|t| Ok(Record::Token(hash(r.get(0))?, t))).transpose()
            }),
            ("SELECT record FROM outbox ORDER BY id", |r| Ok(Some(Record::Outbox(codec::decode(r.get(0))?)))),
            ("SELECT record FROM accounts", |r| Ok(Some(Record::Account(codec::decode(r.get(0))?)))),
            ("SELECT record FROM api_keys", |r| Ok(Some(Record::ApiKey(codec::decode(r.get(0))?)))),
            ("SELECT hash, record FROM sessions", |r| {
                codec::read_session(r.get(1))?.map(|s| Ok(Record::Session(hash(r.get(0))?, s))).transpose()
            }),
        ];
        for (query, read) in tables {
            // A portal streams the table in chunks instead of holding a million rows at once.
            let portal = tx.bind(query, &[]).map_err(db)?;
            loop {
                let rows = tx.query_portal(&portal, LOAD_CHUNK).map_err(db)?;
                for row in &rows {
                    if let Some(record) = read(row)? {
                        f(record)?;
                    }
                }
                if rows.len() < LOAD_CHUNK as usize {
                    break;
                }
            }
        }
        tx.commit().map_err(db)?;
        self.loaded_seq.store(seq, Ordering::SeqCst);
        Ok(())
    }

    /// Commits `requests` in one transaction; see [`super::Store::commit_requests`]. A failure of the database
    /// (not a conflict) marks the store degraded: writes are refused until [`recover`](Self::recover).
    ///
    /// A commit whose connection died, or whose `COMMIT` got no answer, is tried once more on a new connection
    /// under the same commit id: if the first attempt did commit, the retry finds its id taken and answers with
    /// the first attempt's outcome (nothing is applied twice; a failed-sign-in reservation counts once). The
    /// whole runs on the writer's connection thread and is given up after [`COMMIT_DEADLINE`] (a frozen
    /// connection); the node then reconnects.
    pub fn commit_requests(&self, requests: &[&[StoreOp]]) -> Result<Vec<Result<(), StoreError>>, StoreError> {
        if let Err(reason) = self.health() {
            return Err(StoreError::Io(reason));
        }
        let mut guard = self.writer.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some(worker) = guard.as_ref() else {
            return Err(StoreError::Io("the store is closed, or reconnecting".into()));
        };
        // The connection's thread may outlive this call (frozen): it gets its own copy of the requests.
        let owned: Vec<Vec<StoreOp>> = requests.iter().map(|ops| ops.to_vec()).collect();
        let (config, node, faults) = (self.config.clone(), self.node, self.faults.clone());
        let committed = worker.run(COMMIT_DEADLINE, move |writer| {
            let requests: Vec<&[StoreOp]> = owned.iter().map(Vec::as_slice).collect();
            commit_once(writer, &config, node, &requests, &faults)
        });
        let committed = match committed {
            Ok(committed) => committed,
            Err(TimedOut) => {
                let frozen = format!("PostgreSQL did not answer a commit within {COMMIT_DEADLINE:?}; reconnecting");
                return self.failed(&mut guard, StoreError::Io(frozen));
            }
        };
        match committed {
            Ok(Some(Staged { results, seq, applied, resync })) => {
                if let Some(seq) = seq {
                    self.own.record(seq, applied.iter().flat_map(|&i| requests[i].iter()));
                }
                if !resync.is_empty() {
                    self.resync.lock().unwrap_or_else(std::sync::PoisonError::into_inner).extend(resync);
                }
                self.commits.fetch_add(1, Ordering::Relaxed);
                Ok(results)
            }
            Ok(None) => self.failed(&mut guard, StoreError::Io("a fresh commit id was taken".into())),
            Err(Failed::Before(error) | Failed::Victim(error) | Failed::AtCommit(_, error)) => {
                self.failed(&mut guard, error)
            }
        }
    }

    fn failed<T>(&self, writer: &mut Option<Worker<Writer>>, error: StoreError) -> Result<T, StoreError> {
        self.set_degraded(Some(error.to_string()));
        *writer = None;
        Err(error)
    }

    /// As [`super::db::EmbeddedStore::counts_since`]: the cluster's sums, every node having added its own.
    pub fn counts_since(&self, hours_from_ms: i64, days_from_ms: i64) -> Result<Vec<super::CountRow>, StoreError> {
        let rows = self.pooled(|c| {
            c.query(
                "SELECT period, kind, start_ms, n FROM counters WHERE (period = 0 AND start_ms >= $1) \
                 OR (period = 1 AND start_ms >= $2) ORDER BY period, kind, start_ms",
                &[&hours_from_ms, &days_from_ms],
            )
        })?;
        rows.iter()
            .map(|r| {
                let (period, kind, start_ms, n): (i16, i16, i64, i64) = (r.get(0), r.get(1), r.get(2), r.get(3));
                Ok(super::CountRow {
                    period: super::Period::from_code(u8::try_from(period).unwrap_or(u8::MAX))?,
                    kind: u8::try_from(kind).map_err(|_| StoreError::Corrupt(format!("counter {kind}")))?,
                    start_ms,
                    n: n.unsigned_abs(),
                })
            })
            .collect()
    }

    /// The sign-in flow of `hash`, if it is still there (see [`super::Store::flow`]).
    pub fn flow(&self, hash: &super::TokenHash) -> Result<Option<super::linked::OAuthFlowRecordV1>, StoreError> {
        let row =
            self.pooled(|c| c.query_opt("SELECT record FROM oauth_flows WHERE hash = $1", &[&hash.as_slice()]))?;
        row.map(|r| codec::decode(r.get(0))).transpose()
    }

    pub fn audit_page(&self, before: Option<[u8; 16]>, limit: usize) -> Result<Vec<AuditRecordV1>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = self.pooled(|c| match before {
            Some(id) => {
                c.query("SELECT record FROM audit WHERE id < $1 ORDER BY id DESC LIMIT $2", &[&id.as_slice(), &limit])
            }
            None => c.query("SELECT record FROM audit ORDER BY id DESC LIMIT $1", &[&limit]),
        })?;
        rows.iter().map(|r| codec::decode::<AuditRecordV1>(r.get(0))).collect()
    }

    /// As [`super::db::EmbeddedStore::audit_to_prune`]: those before `before`, then the oldest beyond the caps,
    /// the anonymous stream and the rest each against its own.
    pub fn audit_to_prune(
        &self,
        before: [u8; 16],
        keep: super::AuditCaps,
        limit: usize,
    ) -> Result<Vec<[u8; 16]>, StoreError> {
        let mut ids = Vec::new();
        for (anonymous, cap) in [(true, keep.anonymous), (false, keep.entries)] {
            let room = limit.saturating_sub(ids.len());
            if room == 0 {
                break;
            }
            let (excess, rows) = self.pooled(|c| {
                let count: i64 = c.query_one("SELECT count(*) FROM audit WHERE anonymous = $1", &[&anonymous])?.get(0);
                let excess = (count as u64).saturating_sub(cap);
                let rows = c.query(
                    "SELECT id FROM audit WHERE anonymous = $1 ORDER BY id LIMIT $2",
                    &[&anonymous, &(room as i64)],
                )?;
                Ok((excess, rows))
            })?;
            for (taken, row) in rows.iter().enumerate() {
                let id = id16(row.get(0))?;
                if id >= before && taken as u64 >= excess {
                    break;
                }
                ids.push(id);
            }
        }
        Ok(ids)
    }

    /// Up to `limit` audit entries after `after` (from the oldest when `None`), oldest first.
    pub fn audit_after(&self, after: Option<[u8; 16]>, limit: usize) -> Result<Vec<AuditRecordV1>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let after = after.unwrap_or([0; 16]);
        let rows = self.pooled(|c| {
            c.query("SELECT record FROM audit WHERE id > $1 ORDER BY id LIMIT $2", &[&after.as_slice(), &limit])
        })?;
        rows.iter().map(|r| codec::decode::<AuditRecordV1>(r.get(0))).collect()
    }

    /// Every webhook endpoint, and since when each failing one has failed.
    pub fn webhooks(&self) -> Result<Vec<(WebhookRecordV1, Option<i64>)>, StoreError> {
        let rows = self.pooled(|c| c.query("SELECT record, failing_since_ms FROM webhooks ORDER BY id", &[]))?;
        rows.iter().map(|r| Ok((codec::decode::<WebhookRecordV1>(r.get(0))?, r.get(1)))).collect()
    }

    /// The first `limit` messages of `endpoint`'s queue, in commit order, with their places, and how many it holds.
    pub fn webhook_queue(
        &self,
        endpoint: [u8; 16],
        limit: usize,
    ) -> Result<(Vec<(u64, WebhookMessageRecordV1)>, u64), StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let (rows, count) = self.pooled(|c| {
            let rows = c.query(
                "SELECT seq, record FROM webhook_queue WHERE endpoint = $1 ORDER BY seq LIMIT $2",
                &[&endpoint.as_slice(), &limit],
            )?;
            // Counted for the administrators' view only (`limit` 0), never in the deliverer's rounds.
            let count: i64 = if limit > 0 {
                0
            } else {
                c.query_one("SELECT count(*) FROM webhook_queue WHERE endpoint = $1", &[&endpoint.as_slice()])?.get(0)
            };
            Ok((rows, count))
        })?;
        let messages: Result<Vec<_>, StoreError> =
            rows.iter().map(|r| Ok((r.get::<_, i64>(0) as u64, codec::decode(r.get(1))?))).collect();
        Ok((messages?, count as u64))
    }

    /// Up to `limit` attempts of `endpoint`'s delivery log before `before`, newest first.
    pub fn deliveries(
        &self,
        endpoint: [u8; 16],
        before: Option<[u8; 16]>,
        limit: usize,
    ) -> Result<Vec<DeliveryRecordV1>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let before = before.unwrap_or([0xff; 16]);
        let rows = self.pooled(|c| {
            c.query(
                "SELECT record FROM webhook_deliveries WHERE endpoint = $1 AND id < $2 ORDER BY id DESC LIMIT $3",
                &[&endpoint.as_slice(), &before.as_slice(), &limit],
            )
        })?;
        rows.iter().map(|r| codec::decode(r.get(0))).collect()
    }

    /// Takes or renews the lease on delivering `endpoint`'s queue for `lease`: `true` when this node holds it now.
    /// One node delivers an endpoint's queue at a time, so messages about one account leave in commit order; when
    /// that node dies its lease runs out and another node's next try takes over.
    pub fn lease_webhook(&self, endpoint: [u8; 16], lease: Duration) -> Result<bool, StoreError> {
        let lease_ms = lease.as_millis() as f64;
        let node = self.node;
        self.pooled(|c| {
            let taken = c.query_opt(
                "UPDATE webhooks SET leased_by = $2, leased_until = now() + $3 * interval '1 millisecond' \
                 WHERE id = $1 AND (leased_until IS NULL OR leased_until < now() OR leased_by = $2) RETURNING 1",
                &[&endpoint.as_slice(), &node, &lease_ms],
            )?;
            Ok(taken.is_some())
        })
    }

    /// Takes or renews the lease on delivering a queue that is no endpoint's (the back-channel logouts): as
    /// [`Self::lease_webhook`], in a table of its own.
    pub fn lease_queue(&self, queue: [u8; 16], lease: Duration) -> Result<bool, StoreError> {
        let lease_ms = lease.as_millis() as f64;
        let node = self.node;
        self.pooled(|c| {
            let taken = c.query_opt(
                "INSERT INTO queue_leases (queue, leased_by, leased_until) \
                 VALUES ($1, $2, now() + $3 * interval '1 millisecond') \
                 ON CONFLICT (queue) DO UPDATE SET leased_by = EXCLUDED.leased_by, \
                 leased_until = EXCLUDED.leased_until \
                 WHERE queue_leases.leased_until < now() OR queue_leases.leased_by = EXCLUDED.leased_by RETURNING 1",
                &[&queue.as_slice(), &node, &lease_ms],
            )?;
            Ok(taken.is_some())
        })
    }

    pub fn signing_keys(&self) -> Result<Vec<super::SigningKeyRecordV1>, StoreError> {
        let rows = self.pooled(|c| c.query("SELECT record FROM signing_keys ORDER BY id", &[]))?;
        rows.iter().map(|r| codec::decode(r.get(0))).collect()
    }

    pub fn scim_token(&self, id: [u8; 16]) -> Result<Option<super::ScimTokenRecordV1>, StoreError> {
        let row = self.pooled(|c| c.query_opt("SELECT record FROM scim_tokens WHERE id = $1", &[&id.as_slice()]))?;
        row.map(|r| codec::decode(r.get(0))).transpose()
    }

    pub fn scim_tokens(&self) -> Result<Vec<super::ScimTokenRecordV1>, StoreError> {
        let rows = self.pooled(|c| c.query("SELECT record FROM scim_tokens ORDER BY id", &[]))?;
        rows.iter().map(|r| codec::decode(r.get(0))).collect()
    }

    pub fn scim_user(&self, org: [u8; 16], user: [u8; 16]) -> Result<Option<super::ScimUserRecordV1>, StoreError> {
        let row = self.pooled(|c| {
            c.query_opt(
                "SELECT record FROM scim_users WHERE org_id = $1 AND user_id = $2",
                &[&org.as_slice(), &user.as_slice()],
            )
        })?;
        row.map(|r| codec::decode(r.get(0))).transpose()
    }

    pub fn scim_users(&self, org: Option<[u8; 16]>) -> Result<Vec<super::ScimUserRecordV1>, StoreError> {
        let rows = match org {
            Some(org) => self.pooled(|c| {
                c.query("SELECT record FROM scim_users WHERE org_id = $1 ORDER BY user_id", &[&org.as_slice()])
            })?,
            None => self.pooled(|c| c.query("SELECT record FROM scim_users ORDER BY org_id, user_id", &[]))?,
        };
        rows.iter().map(|r| codec::decode(r.get(0))).collect()
    }

    /// The records of `org` that `lookup` finds, by the columns V22 added, and those written without them.
    pub fn scim_users_by(
        &self,
        org: [u8; 16],
        lookup: &super::ScimLookup,
    ) -> Result<Vec<super::ScimUserRecordV1>, StoreError> {
        let column = if lookup.is_user_name() { "user_name_lower" } else { "external_id" };
        let query = format!(
            "SELECT record FROM scim_users WHERE org_id = $1 AND ({column} = $2 OR user_name_lower IS NULL) \
             ORDER BY user_id"
        );
        let rows = self.pooled(|c| c.query(&query, &[&org.as_slice(), &lookup.value()]))?;
        let records: Vec<super::ScimUserRecordV1> =
            rows.iter().map(|r| codec::decode(r.get(0))).collect::<Result<_, _>>()?;
        Ok(records.into_iter().filter(|r| lookup.matches(r)).collect())
    }

    pub fn scim_groups(&self, org: Option<[u8; 16]>) -> Result<Vec<super::ScimGroupRecordV1>, StoreError> {
        let rows = match org {
            Some(org) => self.pooled(|c| {
                c.query("SELECT record FROM scim_groups WHERE org_id = $1 ORDER BY team_id", &[&org.as_slice()])
            })?,
            None => self.pooled(|c| c.query("SELECT record FROM scim_groups ORDER BY org_id, team_id", &[]))?,
        };
        rows.iter().map(|r| codec::decode(r.get(0))).collect()
    }

    pub fn oauth_clients(&self) -> Result<Vec<super::ClientRecord>, StoreError> {
        let rows = self.pooled(|c| c.query("SELECT record FROM oauth_clients ORDER BY client_id", &[]))?;
        rows.iter().map(|r| super::provider_records::decode_client(r.get(0))).collect()
    }

    pub fn sso_providers(&self) -> Result<Vec<super::SsoProviderRecord>, StoreError> {
        let rows = self.pooled(|c| c.query("SELECT record FROM sso_providers ORDER BY provider_id", &[]))?;
        rows.iter().map(|r| super::sso_records::decode_sso_provider(r.get(0))).collect()
    }

    pub fn sso_provider(&self, provider_id: &str) -> Result<Option<super::SsoProviderRecord>, StoreError> {
        let row =
            self.pooled(|c| c.query_opt("SELECT record FROM sso_providers WHERE provider_id = $1", &[&provider_id]))?;
        row.map(|r| super::sso_records::decode_sso_provider(r.get(0))).transpose()
    }

    pub fn oauth_client(&self, client_id: &str) -> Result<Option<super::ClientRecord>, StoreError> {
        let row =
            self.pooled(|c| c.query_opt("SELECT record FROM oauth_clients WHERE client_id = $1", &[&client_id]))?;
        row.map(|r| super::provider_records::decode_client(r.get(0))).transpose()
    }

    pub fn oauth_code(&self, hash: &super::TokenHash) -> Result<Option<super::OAuthCodeRecordV1>, StoreError> {
        let row =
            self.pooled(|c| c.query_opt("SELECT record FROM oauth_codes WHERE hash = $1", &[&hash.as_slice()]))?;
        row.map(|r| codec::decode(r.get(0))).transpose()
    }

    pub fn oauth_device(&self, hash: &super::TokenHash) -> Result<Option<super::OAuthDeviceRecordV1>, StoreError> {
        let row =
            self.pooled(|c| c.query_opt("SELECT record FROM oauth_devices WHERE hash = $1", &[&hash.as_slice()]))?;
        row.map(|r| codec::decode(r.get(0))).transpose()
    }

    pub fn oauth_device_by_user_code(
        &self,
        user_code_hash: &super::TokenHash,
    ) -> Result<Option<(super::TokenHash, super::OAuthDeviceRecordV1)>, StoreError> {
        let row = self.pooled(|c| {
            c.query_opt(
                "SELECT hash, record FROM oauth_devices WHERE user_code_hash = $1",
                &[&user_code_hash.as_slice()],
            )
        })?;
        let Some(row) = row else { return Ok(None) };
        let hash: &[u8] = row.get(0);
        let hash: super::TokenHash =
            hash.try_into().map_err(|_| StoreError::Io("a device code's hash is not 32 bytes".into()))?;
        Ok(Some((hash, codec::decode(row.get(1))?)))
    }

    /// Every grant of the identity provider not past its end.
    pub fn oauth_grants(&self, now_ms: i64) -> Result<Vec<super::OAuthGrantRecord>, StoreError> {
        let rows = self.pooled(|c| c.query("SELECT record FROM oauth_grants WHERE expires_at_ms >= $1", &[&now_ms]))?;
        rows.iter().map(|r| super::provider_records::decode_grant(r.get(0))).collect()
    }

    pub fn oauth_grant(&self, id: [u8; 16]) -> Result<Option<super::OAuthGrantRecord>, StoreError> {
        let row = self.pooled(|c| c.query_opt("SELECT record FROM oauth_grants WHERE id = $1", &[&id.as_slice()]))?;
        row.map(|r| super::provider_records::decode_grant(r.get(0))).transpose()
    }

    pub fn oauth_consent(
        &self,
        user: [u8; 16],
        client_id: &str,
    ) -> Result<Option<super::OAuthConsentRecordV1>, StoreError> {
        let row = self.pooled(|c| {
            c.query_opt(
                "SELECT record FROM oauth_consents WHERE user_id = $1 AND client_id = $2",
                &[&user.as_slice(), &client_id],
            )
        })?;
        row.map(|r| codec::decode(r.get(0))).transpose()
    }

    pub fn oauth_consents_of(&self, user: [u8; 16]) -> Result<Vec<super::OAuthConsentRecordV1>, StoreError> {
        let rows = self.pooled(|c| {
            c.query("SELECT record FROM oauth_consents WHERE user_id = $1 ORDER BY client_id", &[&user.as_slice()])
        })?;
        rows.iter().map(|r| codec::decode(r.get(0))).collect()
    }

    pub fn passkeys_of(&self, user: [u8; 16]) -> Result<Vec<PasskeyRecordV1>, StoreError> {
        let rows = self
            .pooled(|c| c.query("SELECT record FROM passkeys WHERE user_id = $1 ORDER BY id", &[&user.as_slice()]))?;
        rows.iter().map(|r| codec::decode(r.get(0))).collect()
    }

    pub fn all_passkeys(&self) -> Result<Vec<PasskeyRecordV1>, StoreError> {
        let rows = self.pooled(|c| c.query("SELECT record FROM passkeys ORDER BY user_id, id", &[]))?;
        rows.iter().map(|r| codec::decode(r.get(0))).collect()
    }

    pub fn passkey_by_credential(&self, credential: &[u8]) -> Result<Option<PasskeyRecordV1>, StoreError> {
        let row = self
            .pooled(|c| c.query_opt("SELECT record FROM passkeys WHERE credential_id = $1 LIMIT 1", &[&credential]))?;
        row.map(|r| codec::decode(r.get(0))).transpose()
    }

    /// One statement: of two nodes deleting the same row, only one gets it back.
    pub fn take_passkey_challenge(
        &self,
        hash: &TokenHash,
        now_ms: i64,
    ) -> Result<Option<PasskeyChallengeRecordV1>, StoreError> {
        let row = self.pooled(|c| {
            c.query_opt("DELETE FROM passkey_challenges WHERE hash = $1 RETURNING record", &[&hash.as_slice()])
        })?;
        let taken: Option<PasskeyChallengeRecordV1> = row.map(|r| codec::decode(r.get(0))).transpose()?;
        Ok(taken.filter(|c| c.expires_at_ms > now_ms))
    }

    /// As [`super::db::EmbeddedStore::prune_expired_grants`].
    pub fn prune_expired_grants(&self, now_ms: i64) -> Result<usize, StoreError> {
        let mut deleted = 0;
        for table in ["oauth_flows", "oauth_codes", "oauth_grants"] {
            let statement = format!("DELETE FROM {table} WHERE expires_at_ms < $1");
            deleted += self.pooled(|c| c.execute(statement.as_str(), &[&now_ms]))?;
        }
        let before = now_ms - super::DEVICE_EXPIRED_KEPT_MS;
        deleted += self.pooled(|c| c.execute("DELETE FROM oauth_devices WHERE expires_at_ms < $1", &[&before]))?;
        Ok(usize::try_from(deleted).unwrap_or(usize::MAX))
    }

    pub fn prune_passkey_challenges(&self, now_ms: i64) -> Result<usize, StoreError> {
        let deleted =
            self.pooled(|c| c.execute("DELETE FROM passkey_challenges WHERE expires_at_ms <= $1", &[&now_ms]))?;
        Ok(usize::try_from(deleted).unwrap_or(usize::MAX))
    }

    /// Claims the outbox message `id` for this node for `lease`, unless another node holds it: at most one node
    /// sends a message at a time, and a message is sent again only if its sender died mid-send (its lease ran
    /// out). A node's own lease is renewed.
    pub fn claim_outbox(&self, id: [u8; 16], lease: Duration) -> Result<Claim, StoreError> {
        let lease_ms = i64::try_from(lease.as_millis()).unwrap_or(i64::MAX);
        let node = self.node;
        self.pooled(|c| {
            let claimed = c.query_opt(
                "UPDATE outbox SET leased_by = $2, leased_until = now() + $3 * interval '1 millisecond' \
                 WHERE id = $1 AND (leased_until IS NULL OR leased_until < now() OR leased_by = $2) RETURNING 1",
                &[&id.as_slice(), &node, &(lease_ms as f64)],
            )?;
            if claimed.is_some() {
                return Ok(Claim::Claimed);
            }
            let held = c.query_opt(
                "SELECT (extract(epoch FROM leased_until - now()) * 1000)::bigint FROM outbox WHERE id = $1",
                &[&id.as_slice()],
            )?;
            Ok(match held {
                None => Claim::Gone,
                Some(row) => {
                    Claim::Held(Duration::from_millis(row.get::<_, Option<i64>>(0).unwrap_or(0).max(0) as u64))
                }
            })
        })
    }

    pub fn is_empty(&self) -> Result<bool, StoreError> {
        self.pooled(|c| {
            let row = c.query_one(
                "SELECT NOT EXISTS (SELECT 1 FROM users) AND NOT EXISTS (SELECT 1 FROM organizations) \
                 AND NOT EXISTS (SELECT 1 FROM sessions)",
                &[],
            )?;
            Ok(row.get(0))
        })
    }

    /// How many accounts and sessions the database holds (start-up sizes its maps with these).
    pub fn counts(&self) -> Result<(u64, u64), StoreError> {
        self.pooled(|c| {
            let row = c.query_one("SELECT (SELECT count(*) FROM users), (SELECT count(*) FROM sessions)", &[])?;
            let (users, sessions): (i64, i64) = (row.get(0), row.get(1));
            Ok((users.unsigned_abs(), sessions.unsigned_abs()))
        })
    }

    /// Deletes every record (not the change log: nodes still running follow it), in one transaction.
    pub fn clear(&self) -> Result<(), StoreError> {
        self.pooled(|c| {
            c.batch_execute(
                "TRUNCATE users, organizations, sessions, audit, tokens, outbox, counters, webhooks, webhook_queue, \
                 webhook_deliveries, passkeys, passkey_challenges, accounts, oauth_flows, memberships, invitations, \
                 signing_keys, api_keys, oauth_clients, oauth_codes, oauth_devices, oauth_consents, oauth_grants, \
                 sso_providers, scim_tokens, scim_users, scim_groups",
            )
        })
    }

    pub fn commit_count(&self) -> u64 {
        self.commits.load(Ordering::Relaxed)
    }
}

impl Drop for PgStore {
    fn drop(&mut self) {
        self.close();
    }
}

/// Drops `value` (connections) where that may block: the synchronous client closes a connection by running its
/// own small runtime, which panics on a thread that drives tokio's (the store is often dropped by a task).
fn drop_off_runtime<T: Send + 'static>(value: T) {
    if tokio::runtime::Handle::try_current().is_ok() {
        let _ = std::thread::Builder::new().name("store-close".into()).spawn(move || drop(value));
    } else {
        drop(value);
    }
}

/// The timeouts every connection gets (see the constants): nothing the store does waits without bound.
fn bound_waits(config: &mut postgres::Config) {
    config
        .keepalives(true)
        .keepalives_idle(KEEPALIVE_IDLE)
        .keepalives_interval(KEEPALIVE_INTERVAL)
        .keepalives_retries(KEEPALIVE_RETRIES)
        .tcp_user_timeout(TCP_USER_TIMEOUT);
    let ours = format!(
        "-c statement_timeout={} -c idle_in_transaction_session_timeout={}",
        STATEMENT_TIMEOUT.as_millis(),
        IDLE_IN_TRANSACTION_TIMEOUT.as_millis()
    );
    // Options given in the URL come after ours: a deployment may still choose other values.
    let options = match config.get_options() {
        Some(given) if !given.is_empty() => format!("{ours} {given}"),
        _ => ours,
    };
    config.options(&options);
}

/// The writer's connection on a thread of its own (see [`super::worker`]).
fn start_writer(config: &postgres::Config) -> Result<Worker<Writer>, StoreError> {
    let config = config.clone();
    match Worker::start("store-pg-writer", COMMIT_DEADLINE, move || Writer::connect(&config)) {
        Ok(started) => started.map_err(db),
        Err(TimedOut) => Err(StoreError::Io("PostgreSQL did not answer the writer's connection".into())),
    }
}

/// Applies the migrations this version has. Several nodes may start at once: the first migrates, the others wait
/// for it on the advisory lock and then find nothing to do.
fn migrate(client: &mut Client) -> Result<(), StoreError> {
    // A migration may rewrite a large table: the statement timeout is for serving, not for this.
    client.batch_execute("SET statement_timeout = 0").map_err(db)?;
    client.execute("SELECT pg_advisory_lock($1)", &[&MIGRATION_LOCK]).map_err(db)?;
    let migrated = embedded::migrations::runner().set_abort_divergent(true).set_abort_missing(true).run(client);
    let _ = client.execute("SELECT pg_advisory_unlock($1)", &[&MIGRATION_LOCK]);
    migrated.map(drop).map_err(|e| {
        StoreError::Io(format!(
            "the PostgreSQL schema cannot be brought up to date ({e}); a database migrated by a newer version of \
             service-auth is refused: run that version"
        ))
    })
}

/// What a transaction did before its `COMMIT`: each request's outcome, its change log entry's sequence, which
/// requests were applied, and the records to read back.
struct Staged {
    results: Vec<Result<(), StoreError>>,
    seq: Option<i64>,
    applied: Vec<usize>,
    resync: Vec<Resync>,
}

/// Why a transaction did not commit.
enum Failed {
    /// Before its `COMMIT` was sent: nothing of it was written.
    Before(StoreError),
    /// PostgreSQL chose it as a deadlock's victim (or a serialization failure): nothing of it was written, and
    /// the same transaction run again goes through.
    Victim(StoreError),
    /// Its `COMMIT` got no answer (or an error): it may have committed.
    AtCommit(Box<Staged>, StoreError),
}

/// Runs `requests` in one transaction under a new commit id, retried once on a new connection when the first
/// attempt's connection died or its `COMMIT` got no answer (see [`PgStore::commit_requests`]).
fn commit_once(
    writer: &mut Writer,
    config: &postgres::Config,
    node: uuid::Uuid,
    requests: &[&[StoreOp]],
    faults: &FaultSwitch,
) -> Result<Option<Staged>, Failed> {
    let id = uuid::Uuid::new_v4();
    let mut committed = commit(writer, node, id, requests);
    for victim in 1..=VICTIM_RETRIES {
        let Err(Failed::Victim(error)) = &committed else { break };
        // Locks are taken in one order (see `lock_in_order`), so this is rare; it is no database failure.
        tracing::info!(%error, victim, "a commit lost a deadlock against another node's; running it again");
        committed = commit(writer, node, id, requests);
    }
    if matches!(committed, Ok(Some(_))) && faults.take_lost_reply() {
        // Test hook: the database committed, and the answer is lost (the retry below finds the commit id).
        if let Ok(Some(staged)) = committed {
            let lost = StoreError::Io("PostgreSQL: connection lost during COMMIT (test hook)".into());
            committed = Err(Failed::AtCommit(Box::new(staged), lost));
        }
    }
    let retry = match &committed {
        Err(Failed::AtCommit(..)) => true,
        Err(Failed::Before(_) | Failed::Victim(_)) => writer.client.is_closed(),
        Ok(_) => false,
    };
    if !retry {
        return committed;
    }
    if writer.client.is_closed() {
        *writer = Writer::connect(config).map_err(|e| Failed::Before(db(e)))?;
    }
    match commit(writer, node, id, requests) {
        // The first attempt committed; its reply was lost.
        Ok(None) => match committed {
            Err(Failed::AtCommit(staged, _)) => {
                tracing::warn!("a commit whose reply was lost had gone through; answering its outcome");
                Ok(Some(*staged))
            }
            _ => Err(Failed::Before(StoreError::Io("a commit id was taken before its commit".into()))),
        },
        other => other,
    }
}

/// Runs `requests` in one transaction under commit id `id`. `Ok(None)`: a transaction with that id committed
/// already (an earlier attempt whose reply was lost).
fn commit(
    writer: &mut Writer,
    node: uuid::Uuid,
    id: uuid::Uuid,
    requests: &[&[StoreOp]],
) -> Result<Option<Staged>, Failed> {
    let before = |e: postgres::Error| match e.code() {
        Some(&SqlState::T_R_DEADLOCK_DETECTED | &SqlState::T_R_SERIALIZATION_FAILURE) => Failed::Victim(db(e)),
        _ => Failed::Before(db(e)),
    };
    let Writer { client, s } = writer;
    let mut tx = client.transaction().map_err(before)?;
    // First: a transaction still open with this id (the first attempt, its connection cut) makes this wait for
    // its end; one that committed makes it fail.
    if let Err(e) = tx.execute(&s.claim, &[&id]) {
        return match e.code() {
            Some(&SqlState::UNIQUE_VIOLATION) => Ok(None),
            _ => Err(before(e)),
        };
    }
    lock_in_order(&mut tx, requests).map_err(before)?;
    // The endpoints as this transaction sees them: an endpoint registered by a commit before this one gets its
    // events. One read per batch.
    let raises = super::hooks::may_raise(requests.iter().flat_map(|ops| ops.iter()));
    let mut fanout = if !raises {
        None
    } else {
        let rows = tx.query("SELECT record FROM webhooks", &[]).map_err(before)?;
        let endpoints: Result<Vec<WebhookRecordV1>, StoreError> =
            rows.iter().map(|r| codec::decode::<WebhookRecordV1>(r.get(0))).collect();
        Fanout::new(endpoints.map_err(Failed::Before)?)
    };
    let mut results = Vec::with_capacity(requests.len());
    let mut applied = Vec::new();
    let mut resync = Vec::new();
    let mut backchannel = Backchannel::default();
    for (index, &ops) in requests.iter().enumerate() {
        // Only a request that can break a rule of the whole cluster pays for a savepoint (two more round trips).
        let risky = ops.iter().any(may_conflict);
        let queued = fanout.as_ref().map_or(0, |f| f.messages.len());
        let logouts = backchannel.messages.len();
        let outcome = if risky {
            let mut savepoint = tx.savepoint("request").map_err(before)?;
            match apply(&mut savepoint, s, ops, fanout.as_mut(), &mut backchannel, &mut resync) {
                Ok(()) => savepoint.commit().map_err(before).map(|()| Ok(())),
                Err(Refused::Conflict(conflict)) => {
                    // Nothing of it is written: neither are its events, nor its logouts.
                    if let Some(f) = fanout.as_mut() {
                        f.forget(ops, queued);
                    }
                    backchannel.messages.truncate(logouts);
                    savepoint.rollback().map_err(before).map(|()| Err(conflict))
                }
                Err(Refused::Failed(e)) => Err(before(e)),
            }
        } else {
            match apply(&mut tx, s, ops, fanout.as_mut(), &mut backchannel, &mut resync) {
                Ok(()) => Ok(Ok(())),
                // Only the ops that make a request risky can conflict; without a savepoint the transaction could not
                // go on, so this would fail the batch rather than write half of it.
                Err(Refused::Conflict(c)) => {
                    Err(Failed::Before(StoreError::Corrupt(format!("an unguarded request conflicted: {c}"))))
                }
                Err(Refused::Failed(e)) => Err(before(e)),
            }
        }?;
        match outcome {
            Ok(()) => {
                applied.push(index);
                results.push(Ok(()));
            }
            Err(conflict) => {
                resync.extend(conflict_resync(&conflict));
                results.push(Err(StoreError::Conflict(conflict)));
            }
        }
    }
    let mut seq = None;
    let entry = changes::encode(applied.iter().flat_map(|&i| requests[i].iter()));
    let mut messages = fanout.map(|f| f.messages).unwrap_or_default();
    messages.append(&mut backchannel.messages);
    if entry.is_some() || !messages.is_empty() {
        // Held to the commit: the next node's append waits, so sequence order is commit order (of the change log
        // and of the webhook queues alike).
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&CHANGES_LOCK]).map_err(before)?;
    }
    for message in &messages {
        tx.execute(&s.put_message, &[&message.endpoint.as_slice(), &codec::encode(message)]).map_err(before)?;
    }
    if let Some(entry) = entry {
        let appended: i64 = tx.query_one(&s.append, &[&node, &entry]).map_err(before)?.get(0);
        tx.execute("SELECT pg_notify($1, $2)", &[&CHANNEL, &appended.to_string()]).map_err(before)?;
        seq = Some(appended);
    }
    let staged = Staged { results, seq, applied, resync };
    match tx.commit() {
        Ok(()) => Ok(Some(staged)),
        Err(e) => Err(Failed::AtCommit(Box::new(staged), db(e))),
    }
}

/// Takes the locks a batch will need in the one order every node uses: the administrators' lock (when a request
/// may demote, ban or remove an active administrator), then the accounts' rows by id, then the failure counts'
/// rows by e-mail, before any request runs. Taken as each request comes, two nodes' batches could hold them
/// crosswise (a row, then the administrators' lock; the lock, then that row) and deadlock. The change log's lock
/// comes last, at the append. What is still taken in request order (session rows) is rare to cross, and a
/// deadlock's victim is run again.
fn lock_in_order(tx: &mut Transaction<'_>, requests: &[&[StoreOp]]) -> Result<(), postgres::Error> {
    let ops = || requests.iter().flat_map(|ops| ops.iter());
    if demotes_an_admin(tx, ops())? {
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&ADMINS_LOCK])?;
    }
    let mut users: Vec<&[u8]> = ops()
        .filter_map(|op| match op {
            StoreOp::PutUser(r) => Some(r.id.as_slice()),
            StoreOp::DeleteUser(id) | StoreOp::ExpectUser { id, .. } => Some(id.as_slice()),
            _ => None,
        })
        .collect();
    users.sort_unstable();
    users.dedup();
    if !users.is_empty() {
        tx.query("SELECT 1 FROM users WHERE id = ANY($1) ORDER BY id FOR UPDATE", &[&users])?;
    }
    // The organizations whose last owner a request guards ([`StoreOp::ExpectOwner`]), after the accounts.
    let mut orgs: Vec<&[u8]> = ops()
        .filter_map(|op| match op {
            StoreOp::ExpectOwner(org) => Some(org.as_slice()),
            _ => None,
        })
        .collect();
    orgs.sort_unstable();
    orgs.dedup();
    if !orgs.is_empty() {
        tx.query("SELECT 1 FROM organizations WHERE id = ANY($1) ORDER BY id FOR UPDATE", &[&orgs])?;
    }
    let mut emails: Vec<&str> = ops()
        .filter_map(|op| match op {
            StoreOp::ReserveAttempt { email, .. } | StoreOp::EndAttempt { email, .. } => Some(email.as_str()),
            _ => None,
        })
        .collect();
    emails.sort_unstable();
    emails.dedup();
    if !emails.is_empty() {
        tx.query("SELECT 1 FROM attempts WHERE email = ANY($1) ORDER BY email FOR UPDATE", &[&emails])?;
    }
    Ok(())
}

/// Whether `ops` may demote, ban or remove an account that is an active administrator now: the batch then takes
/// the administrators' lock up front ([`lock_in_order`]) and the request runs the last-administrator guard
/// ([`apply`]).
fn demotes_an_admin<'a>(
    tx: &mut Transaction<'_>,
    ops: impl Iterator<Item = &'a StoreOp>,
) -> Result<bool, postgres::Error> {
    let mut touched: Vec<&[u8]> = ops
        .filter_map(|op| match op {
            StoreOp::PutUser(r) if !active_admin(r) => Some(r.id.as_slice()),
            StoreOp::DeleteUser(id) => Some(id.as_slice()),
            _ => None,
        })
        .collect();
    touched.sort_unstable();
    touched.dedup();
    Ok(!touched.is_empty()
        && tx
            .query_one("SELECT count(*) FROM users WHERE id = ANY($1) AND active_admin", &[&touched])?
            .get::<_, i64>(0)
            > 0)
}

/// Whether `op` can be refused with a [`Conflict`] (see [`apply`]): a request holding one runs in a savepoint, so
/// that its refusal takes back its own writes and nothing else of the batch. Every op that [`apply`] may answer
/// with `Refused::Conflict` must be listed: one missing fails its whole batch and takes the writer down (the
/// node answers 503 until it reconnects), which a replayed authorization code or refresh token racing its first
/// use on another node would otherwise cause at will.
fn may_conflict(op: &StoreOp) -> bool {
    matches!(
        op,
        StoreOp::PutUser(_)
            | StoreOp::DeleteUser(_)
            | StoreOp::PutOrg(_)
            | StoreOp::DeleteOrg(_)
            | StoreOp::ReserveAttempt { .. }
            | StoreOp::ExpectUser { .. }
            | StoreOp::PutMember(_)
            | StoreOp::DeleteMember(..)
            | StoreOp::PutInvitation(_)
            | StoreOp::ExpectOwner(_)
            | StoreOp::PutAccount(_)
            | StoreOp::TakeFlow(_)
            | StoreOp::TakeOAuthCode(_)
            | StoreOp::DecideOAuthDevice { .. }
            | StoreOp::TakeOAuthDevice(_)
            | StoreOp::RotateOAuthGrant { .. }
            | StoreOp::UseApiKey { .. }
    )
}

/// The record a conflict says this node holds wrong: read back into memory (the follower does it).
fn conflict_resync(conflict: &Conflict) -> Option<Resync> {
    match conflict {
        Conflict::Changed { user } => Some(Resync::User(*user)),
        Conflict::QuotaSpent { key, user } | Conflict::ApiKeyGone { key, user } => Some(Resync::ApiKey(*key, *user)),
        _ => None,
    }
}

/// Applies one request's ops, with the last-administrator guard when they demote, ban or remove an account that
/// is an active administrator now. A record this node holds wrong and the ops found out is added to `resync`.
/// The back-channel logouts a batch queues ([`super::hooks::logouts`]), and whether any client has a back-channel
/// URI (read once per batch that ends a session).
#[derive(Default)]
struct Backchannel {
    any: Option<bool>,
    messages: Vec<WebhookMessageRecordV1>,
}

impl Backchannel {
    /// Queues what `op` (a session or every session of an account ended) owes, read before it is applied.
    fn before(&mut self, tx: &mut Transaction<'_>, op: &StoreOp) -> Result<(), Refused> {
        let (user, except, one) = match op {
            StoreOp::DeleteSession(user, hash) => (*user, None, Some(*hash)),
            StoreOp::DeleteSessionsOf { user, except } => (*user, *except, None),
            _ => return Ok(()),
        };
        let any = match self.any {
            Some(any) => any,
            None => {
                let mut any = false;
                for row in tx.query("SELECT record FROM oauth_clients", &[])? {
                    any |= readable(super::provider_records::decode_client(row.get(0)))
                        .is_some_and(|c| c.backchannel_logout_uri.is_some());
                }
                *self.any.insert(any)
            }
        };
        if !any {
            return Ok(());
        }
        let mut ended = Vec::new();
        let all = matches!(op, StoreOp::DeleteSessionsOf { except: None, .. });
        if !all {
            let rows = match one {
                Some(hash) => tx.query(
                    "SELECT hash, record FROM sessions WHERE user_id = $1 AND hash = $2",
                    &[&user.as_slice(), &hash.as_slice()],
                )?,
                None => tx.query("SELECT hash, record FROM sessions WHERE user_id = $1", &[&user.as_slice()])?,
            };
            for row in rows {
                let hash: &[u8] = row.get(0);
                if except.is_some_and(|kept| kept[..] == *hash) {
                    continue;
                }
                ended.extend(readable(codec::read_session(row.get(1))).flatten().map(|s| s.id));
            }
            if ended.is_empty() {
                return Ok(());
            }
        }
        let mut grants = Vec::new();
        for row in tx.query("SELECT record FROM oauth_grants WHERE user_id = $1", &[&user.as_slice()])? {
            grants.extend(readable(super::provider_records::decode_grant(row.get(0))));
        }
        let which = if all { super::hooks::Ended::All } else { super::hooks::Ended::Sessions(&ended) };
        let mut failed = None;
        let found = super::hooks::logouts(user, which, grants, &mut |client_id| match tx
            .query_opt("SELECT record FROM oauth_clients WHERE client_id = $1", &[&client_id])
        {
            Ok(Some(row)) => Ok(readable(super::provider_records::decode_client(row.get(0)))),
            Ok(None) => Ok(None),
            Err(e) => {
                let message = e.to_string();
                failed = Some(e);
                Err(StoreError::Io(message))
            }
        });
        match (found, failed) {
            (Ok(messages), _) => {
                self.messages.extend(messages);
                Ok(())
            }
            (Err(_), Some(e)) => Err(Refused::Failed(e)),
            (Err(_), None) => Ok(()),
        }
    }
}

/// A record the back-channel logouts read, or `None` (with a warning) when it does not decode: a sign-out is never
/// refused for a logout it cannot work out.
fn readable<T>(decoded: Result<T, StoreError>) -> Option<T> {
    decoded.map_err(|error| tracing::warn!(%error, "a back-channel logout skipped: a record does not decode")).ok()
}

/// Feeds `op` to the webhooks' `fanout`, before it is applied, with the accounts as this transaction holds them
/// (their rows are locked: `lock_in_order`).
fn feed(tx: &mut Transaction<'_>, s: &Prepared, fanout: &mut Fanout, op: &StoreOp) -> Result<(), Refused> {
    let mut failed = None;
    let fed = fanout.op(op, &mut |id| match tx.query_opt(&s.get_user, &[&id.as_slice()]) {
        Ok(Some(row)) => codec::decode_user(row.get(0)).map(Some),
        Ok(None) => Ok(None),
        Err(e) => {
            let message = e.to_string();
            failed = Some(e);
            Err(StoreError::Io(message))
        }
    });
    match (fed, failed) {
        (Ok(()), _) => Ok(()),
        (Err(_), Some(e)) => Err(Refused::Failed(e)),
        (Err(_), None) => Err(Refused::Conflict(Conflict::Changed { user: user_of(op) })),
    }
}

fn apply(
    tx: &mut Transaction<'_>,
    s: &Prepared,
    ops: &[StoreOp],
    mut fanout: Option<&mut Fanout>,
    backchannel: &mut Backchannel,
    resync: &mut Vec<Resync>,
) -> Result<(), Refused> {
    let guard_admins = demotes_an_admin(tx, ops.iter())?;
    let admins_before = if guard_admins {
        // Serialises every change that may remove an administrator, across nodes: the second waits here for the
        // first to commit, then counts what it left (each statement reads the latest commits).
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&ADMINS_LOCK])?;
        count_admins(tx)?
    } else {
        0
    };
    for op in ops {
        backchannel.before(tx, op)?;
        if let Some(fanout) = fanout.as_deref_mut() {
            feed(tx, s, fanout, op)?;
        }
        let done = match op {
            StoreOp::PutUser(r) => {
                let org = r.organization_id.as_ref().map(|o| o.as_slice());
                let values: [&(dyn postgres::types::ToSql + Sync); 6] =
                    [&r.id.as_slice(), &r.email, &active_admin(r), &org, &codec::encode(r), &r.username];
                tx.execute(&s.put_user, &values)
            }
            StoreOp::DeleteUser(id) => tx
                .execute("DELETE FROM passkeys WHERE user_id = $1", &[&id.as_slice()])
                .and_then(|_| tx.execute(&s.delete_user, &[&id.as_slice()])),
            StoreOp::PutOrg(r) => tx.execute(&s.put_org, &[&r.id.as_slice(), &r.slug, &codec::encode_org(r)]),
            StoreOp::DeleteOrg(id) => tx.execute(&s.delete_org, &[&id.as_slice()]),
            StoreOp::PutSession(hash, r) => {
                tx.execute(&s.put_session, &[&r.user_id.as_slice(), &hash.as_slice(), &codec::encode(r)])
            }
            StoreOp::DeleteSession(user, hash) => tx.execute(&s.delete_session, &[&user.as_slice(), &hash.as_slice()]),
            StoreOp::DeleteSessionsOf { user, except } => {
                if except.is_none() {
                    // Every session of the account: its grants to the identity provider's clients end with them,
                    // each audited here, in this commit, as the store alone knows which they are.
                    let ended =
                        tx.query("DELETE FROM oauth_grants WHERE user_id = $1 RETURNING record", &[&user.as_slice()])?;
                    // One a newer release wrote, unreadable here, ends unaudited rather than failing the change.
                    let grants: Vec<_> =
                        ended.iter().filter_map(|row| super::provider_records::decode_grant(row.get(0)).ok()).collect();
                    for logged in grants.iter().filter_map(super::audit::grant_ended_with_sessions) {
                        if let Some(fanout) = fanout.as_deref_mut() {
                            feed(tx, s, fanout, &logged)?;
                        }
                        if let StoreOp::PutAudit(r) = &logged {
                            tx.execute(&s.put_audit, &[&r.id.as_slice(), &false, &codec::encode(r)])?;
                        }
                    }
                }
                let except = except.as_ref().map(|h| h.as_slice());
                tx.execute(&s.delete_sessions_of, &[&user.as_slice(), &except])
            }
            StoreOp::PutAudit(r) => {
                let anonymous = crate::domain::is_anonymous_action(&r.action);
                tx.execute(&s.put_audit, &[&r.id.as_slice(), &anonymous, &codec::encode(r)])
            }
            StoreOp::DeleteAudit(id) => tx.execute(&s.delete_audit, &[&id.as_slice()]),
            StoreOp::PutToken(hash, r) => tx.execute(&s.put_token, &[&hash.as_slice(), &codec::encode_token(r)]),
            StoreOp::DeleteToken(hash) => tx.execute(&s.delete_token, &[&hash.as_slice()]),
            StoreOp::PutOutbox(r) => tx.execute(&s.put_outbox, &[&r.id.as_slice(), &codec::encode(r)]),
            StoreOp::DeleteOutbox(id) => tx.execute(&s.delete_outbox, &[&id.as_slice()]),
            StoreOp::ReserveAttempt { email, max, window_ms, now_ms } => {
                let max = i32::try_from(*max).unwrap_or(i32::MAX);
                match tx.query_opt(&s.reserve_attempt, &[email, &(now_ms + window_ms), &max, now_ms]) {
                    Ok(Some(_)) => Ok(1),
                    Ok(None) => {
                        let end: i64 = tx.query_one(&s.attempt_window, &[email])?.get(0);
                        return Err(Refused::Conflict(Conflict::Locked {
                            email: email.clone(),
                            wait_ms: end - now_ms,
                        }));
                    }
                    Err(e) => Err(e),
                }
            }
            StoreOp::RefreshSession(hash, r) => {
                let updated = tx.execute(
                    "UPDATE sessions SET record = $3 WHERE user_id = $1 AND hash = $2",
                    &[&r.user_id.as_slice(), &hash.as_slice(), &codec::encode(r)],
                )?;
                // Ended on another node a moment ago: it stays ended, and nothing else of the request or its
                // batch is refused for it (a background use-write used to fail a whole batch of sign-ins with
                // it). This node still holds the session: the follower reads it back, gone.
                if updated == 0 {
                    resync.push(Resync::Session(r.user_id, *hash));
                }
                Ok(updated)
            }
            StoreOp::ExpectUser { id, record } => {
                // Locked to the commit: no other node's change to the account slips in between.
                let found =
                    match tx.query_opt("SELECT record FROM users WHERE id = $1 FOR UPDATE", &[&id.as_slice()])? {
                        Some(row) => Some(
                            codec::decode_user(row.get(0))
                                .map_err(|_| Refused::Conflict(Conflict::Changed { user: *id }))?,
                        ),
                        None => None,
                    };
                if found.as_ref() != record.as_deref() {
                    return Err(Refused::Conflict(Conflict::Changed { user: *id }));
                }
                Ok(0)
            }
            StoreOp::PutWebhook(r) => tx.execute(&s.put_webhook, &[&r.id.as_slice(), &codec::encode(r)]),
            StoreOp::DeleteWebhook(id) => {
                let id = id.as_slice();
                tx.execute("DELETE FROM webhook_queue WHERE endpoint = $1", &[&id])?;
                tx.execute("DELETE FROM webhook_deliveries WHERE endpoint = $1", &[&id])?;
                tx.execute("DELETE FROM webhooks WHERE id = $1", &[&id])
            }
            StoreOp::SetWebhookFailing { id, since_ms } => {
                tx.execute("UPDATE webhooks SET failing_since_ms = $2 WHERE id = $1", &[&id.as_slice(), since_ms])
            }
            StoreOp::PutWebhookMessage(m) => tx.execute(&s.put_message, &[&m.endpoint.as_slice(), &codec::encode(m)]),
            StoreOp::DeleteWebhookMessage { endpoint, seq } => {
                let seq = i64::try_from(*seq).unwrap_or(i64::MAX);
                tx.execute(&s.delete_message, &[&seq, &endpoint.as_slice()])
            }
            StoreOp::PutDelivery(r) => tx.execute(
                "INSERT INTO webhook_deliveries (endpoint, id, at_ms, record) VALUES ($1, $2, $3, $4) \
                 ON CONFLICT (endpoint, id) DO NOTHING",
                &[&r.endpoint.as_slice(), &r.id.as_slice(), &r.at_ms, &codec::encode(r)],
            ),
            StoreOp::DeleteDeliveriesBefore { before_ms } => {
                tx.execute("DELETE FROM webhook_deliveries WHERE at_ms < $1", &[before_ms])
            }
            StoreOp::PutAccount(r) => tx.execute(
                &s.put_account,
                &[&r.id.as_slice(), &r.user_id.as_slice(), &r.provider, &r.subject, &codec::encode(r)],
            ),
            StoreOp::DeleteAccount { id, .. } => tx.execute(&s.delete_account, &[&id.as_slice()]),
            StoreOp::PutApiKey(r) => {
                tx.execute(&s.put_api_key, &[&r.id.as_slice(), &r.user_id.as_slice(), &codec::encode(r)])
            }
            StoreOp::DeleteApiKey { id, .. } => tx.execute(&s.delete_api_key, &[&id.as_slice()]),
            // Counted against the database's copy, locked to the commit: every node's uses add up exactly, and
            // the last one left goes to one of them.
            StoreOp::UseApiKey { id, user, at_ms } => {
                let gone = Conflict::ApiKeyGone { key: *id, user: *user };
                let row = tx.query_opt("SELECT record FROM api_keys WHERE id = $1 FOR UPDATE", &[&id.as_slice()])?;
                let Some(held) = row.and_then(|r| codec::decode(r.get(0)).ok()) else {
                    return Err(Refused::Conflict(gone));
                };
                let at = crate::domain::Timestamp::from_millis(*at_ms);
                let used = super::convert::api_key_used(held, at)
                    .ok_or(Refused::Conflict(Conflict::QuotaSpent { key: *id, user: *user }))?;
                tx.execute(&s.put_api_key, &[&id.as_slice(), &user.as_slice(), &codec::encode(&used)])
            }
            StoreOp::PutFlow(hash, r) => {
                tx.execute(&s.put_flow, &[&hash.as_slice(), &r.expires_at_ms, &codec::encode(r)])
            }
            StoreOp::TakeFlow(hash) => {
                let found =
                    tx.query_opt("SELECT 1 FROM oauth_flows WHERE hash = $1 FOR UPDATE", &[&hash.as_slice()])?;
                if found.is_none() {
                    return Err(Refused::Conflict(Conflict::FlowUsed));
                }
                tx.execute(&s.take_flow, &[&hash.as_slice()])
            }
            StoreOp::EndAttempt { email, verified: true } => tx.execute(&s.clear_attempts, &[email]),
            StoreOp::EndAttempt { email, verified: false } => tx.execute(&s.release_attempt, &[email]),
            // Added to the row, never written over it: every node adds its own counts (V9__counters.sql).
            StoreOp::AddCount { kind, hour_ms, n } => tx.execute(
                "INSERT INTO counters (period, kind, start_ms, n) VALUES (0, $1, $2, $4), (1, $1, $3, $4) \
                 ON CONFLICT (period, kind, start_ms) DO UPDATE SET n = counters.n + EXCLUDED.n",
                &[
                    &i16::from(*kind),
                    &super::Period::Hour.floor(*hour_ms),
                    &super::Period::Day.floor(*hour_ms),
                    &i64::try_from(*n).unwrap_or(i64::MAX),
                ],
            ),
            StoreOp::PruneCounts { hours_before_ms, days_before_ms } => tx.execute(
                "DELETE FROM counters WHERE (period = 0 AND start_ms < $1) OR (period = 1 AND start_ms < $2)",
                &[hours_before_ms, days_before_ms],
            ),
            StoreOp::PutMember(r) => tx.execute(
                &s.put_member,
                &[&r.org.as_slice(), &r.user.as_slice(), &(r.roles & 1 != 0), &codec::encode(r)],
            ),
            StoreOp::DeleteMember(org, user) => tx.execute(&s.delete_member, &[&org.as_slice(), &user.as_slice()]),
            StoreOp::PutInvitation(r) => {
                tx.execute(&s.put_invitation, &[&r.id.as_slice(), &r.org.as_slice(), &codec::encode(r)])
            }
            StoreOp::DeleteInvitation(id) => tx.execute(&s.delete_invitation, &[&id.as_slice()]),
            StoreOp::ExpectOwner(org) => {
                // The row was locked up front ([`lock_in_order`]): a request on another node guarding the same
                // organization waited for this one's commit, and each statement reads the latest commits.
                let owners: i64 = tx
                    .query_one(
                        "SELECT count(*) FROM memberships WHERE organization_id = $1 AND owner",
                        &[&org.as_slice()],
                    )?
                    .get(0);
                if owners == 0 {
                    return Err(Refused::Conflict(Conflict::LastOwner { org: *org }));
                }
                Ok(0)
            }
            StoreOp::PutPasskey(r) => tx.execute(
                "INSERT INTO passkeys (id, user_id, credential_id, record) VALUES ($1, $2, $3, $4) \
                 ON CONFLICT (id) DO UPDATE SET record = EXCLUDED.record",
                &[&r.id.as_slice(), &r.user_id.as_slice(), &r.credential_id, &codec::encode(r)],
            ),
            StoreOp::DeletePasskey { user, id } => {
                tx.execute("DELETE FROM passkeys WHERE id = $1 AND user_id = $2", &[&id.as_slice(), &user.as_slice()])
            }
            StoreOp::PutPasskeyChallenge(hash, r) => tx.execute(
                "INSERT INTO passkey_challenges (hash, expires_at_ms, record) VALUES ($1, $2, $3)",
                &[&hash.as_slice(), &r.expires_at_ms, &codec::encode(r)],
            ),
            StoreOp::PutSigningKey(r) => tx.execute(
                "INSERT INTO signing_keys (id, record) VALUES ($1, $2) ON CONFLICT (id) DO UPDATE SET record = EXCLUDED.record",
                &[&r.id.as_slice(), &codec::encode(r)],
            ),
            StoreOp::DeleteSigningKey(id) => tx.execute("DELETE FROM signing_keys WHERE id = $1", &[&id.as_slice()]),
            StoreOp::PutOAuthClient(r) => tx.execute(
                "INSERT INTO oauth_clients (client_id, record) VALUES ($1, $2) \
                 ON CONFLICT (client_id) DO UPDATE SET record = EXCLUDED.record",
                &[&r.client_id, &codec::encode(r)],
            ),
            StoreOp::DeleteOAuthClient(client_id) => {
                tx.execute("DELETE FROM oauth_clients WHERE client_id = $1", &[client_id])
            }
            StoreOp::PutSsoProvider(r) => tx.execute(
                "INSERT INTO sso_providers (provider_id, record) VALUES ($1, $2) \
                 ON CONFLICT (provider_id) DO UPDATE SET record = EXCLUDED.record",
                &[&r.provider_id, &codec::encode(r.as_ref())],
            ),
            StoreOp::DeleteSsoProvider(provider_id) => {
                tx.execute("DELETE FROM sso_providers WHERE provider_id = $1", &[provider_id])
            }
            StoreOp::PutOAuthCode(hash, r) => tx.execute(
                "INSERT INTO oauth_codes (hash, expires_at_ms, record) VALUES ($1, $2, $3)",
                &[&hash.as_slice(), &r.expires_at_ms, &codec::encode(r)],
            ),
            StoreOp::TakeOAuthCode(hash) => {
                let found =
                    tx.query_opt("SELECT 1 FROM oauth_codes WHERE hash = $1 FOR UPDATE", &[&hash.as_slice()])?;
                if found.is_none() {
                    return Err(Refused::Conflict(Conflict::CodeUsed));
                }
                // Unredeemed codes past their time go with the housekeeping (prune_expired_grants).
                tx.execute("DELETE FROM oauth_codes WHERE hash = $1", &[&hash.as_slice()])
            }
            StoreOp::PutOAuthDevice(hash, r) => tx.execute(
                "INSERT INTO oauth_devices (hash, user_code_hash, expires_at_ms, record) VALUES ($1, $2, $3, $4)",
                &[&hash.as_slice(), &r.user_code_hash.as_slice(), &r.expires_at_ms, &codec::encode(r)],
            ),
            // Each changes the row as it is now (locked), not as this node read it: a poll never undoes another
            // node's decision, and a request is decided once.
            StoreOp::PollOAuthDevice { hash, at_ms, interval_secs } => {
                match locked_device(tx, hash)? {
                    Some(mut r) => {
                        r.polled_at_ms = Some(*at_ms);
                        r.interval_secs = *interval_secs;
                        tx.execute("UPDATE oauth_devices SET record = $2 WHERE hash = $1", &[&hash.as_slice(), &codec::encode(&r)])
                    }
                    None => Ok(0),
                }
            }
            StoreOp::DecideOAuthDevice { hash, decision } => match locked_device(tx, hash)? {
                Some(mut r) if r.decision == super::DeviceDecisionV1::Pending => {
                    r.decision = decision.clone();
                    tx.execute("UPDATE oauth_devices SET record = $2 WHERE hash = $1", &[&hash.as_slice(), &codec::encode(&r)])
                }
                _ => return Err(Refused::Conflict(Conflict::CodeUsed)),
            },
            StoreOp::TakeOAuthDevice(hash) => {
                if locked_device(tx, hash)?.is_none() {
                    return Err(Refused::Conflict(Conflict::CodeUsed));
                }
                tx.execute("DELETE FROM oauth_devices WHERE hash = $1", &[&hash.as_slice()])
            }
            StoreOp::PutOAuthGrant(r) => tx.execute(
                "INSERT INTO oauth_grants (id, user_id, refresh_hash, expires_at_ms, record) VALUES ($1, $2, $3, $4, $5)",
                &[
                    &r.id.as_slice(),
                    &r.user_id.as_ref().map(|u| u.as_slice()),
                    &r.refresh_hash.as_ref().map(|h| h.as_slice()),
                    &r.expires_at_ms,
                    &codec::encode(r),
                ],
            ),
            StoreOp::RotateOAuthGrant { from, grant: r } => {
                // Guarded: another node's refresh with the same token a moment ago leaves it refused here.
                let changed = tx.execute(
                    "UPDATE oauth_grants SET refresh_hash = $2, expires_at_ms = $3, record = $4 \
                     WHERE id = $1 AND refresh_hash = $5",
                    &[
                        &r.id.as_slice(),
                        &r.refresh_hash.as_ref().map(|h| h.as_slice()),
                        &r.expires_at_ms,
                        &codec::encode(r),
                        &from.as_slice(),
                    ],
                )?;
                if changed == 0 {
                    return Err(Refused::Conflict(Conflict::RefreshUsed));
                }
                Ok(changed)
            }
            StoreOp::DeleteOAuthGrant(id) => tx.execute("DELETE FROM oauth_grants WHERE id = $1", &[&id.as_slice()]),
            StoreOp::PutOAuthConsent(r) => tx.execute(
                "INSERT INTO oauth_consents (user_id, client_id, record) VALUES ($1, $2, $3) \
                 ON CONFLICT (user_id, client_id) DO UPDATE SET record = EXCLUDED.record",
                &[&r.user_id.as_slice(), &r.client_id, &codec::encode(r)],
            ),
            StoreOp::DeleteOAuthConsent { user, client_id } => tx.execute(
                "DELETE FROM oauth_consents WHERE user_id = $1 AND client_id = $2",
                &[&user.as_slice(), client_id],
            ),
            StoreOp::PutScimToken(r) => tx.execute(
                "INSERT INTO scim_tokens (id, record) VALUES ($1, $2) \
                 ON CONFLICT (id) DO UPDATE SET record = EXCLUDED.record",
                &[&r.id.as_slice(), &codec::encode(r)],
            ),
            StoreOp::DeleteScimToken(id) => tx.execute("DELETE FROM scim_tokens WHERE id = $1", &[&id.as_slice()]),
            StoreOp::PutScimUser(r) => tx.execute(
                "INSERT INTO scim_users (org_id, user_id, record, user_name_lower, external_id) \
                 VALUES ($1, $2, $3, $4, $5) ON CONFLICT (org_id, user_id) DO UPDATE SET record = EXCLUDED.record, \
                 user_name_lower = EXCLUDED.user_name_lower, external_id = EXCLUDED.external_id",
                &[
                    &r.org.as_slice(),
                    &r.user.as_slice(),
                    &codec::encode(r),
                    &super::ScimLookup::user_name(&r.user_name).value(),
                    &r.external_id,
                ],
            ),
            StoreOp::DeleteScimUser { org, user } => tx.execute(
                "DELETE FROM scim_users WHERE org_id = $1 AND user_id = $2",
                &[&org.as_slice(), &user.as_slice()],
            ),
            StoreOp::PutScimGroup(r) => tx.execute(
                "INSERT INTO scim_groups (org_id, team_id, record) VALUES ($1, $2, $3) \
                 ON CONFLICT (org_id, team_id) DO UPDATE SET record = EXCLUDED.record",
                &[&r.org.as_slice(), &r.team.as_slice(), &codec::encode(r)],
            ),
            StoreOp::DeleteScimGroup { org, team } => tx.execute(
                "DELETE FROM scim_groups WHERE org_id = $1 AND team_id = $2",
                &[&org.as_slice(), &team.as_slice()],
            ),
        };
        if let Err(e) = done {
            return Err(match (op, e.code()) {
                // The username's constraint, or else the e-mail's (the only other unique column of the table).
                (StoreOp::PutUser(r), Some(&SqlState::UNIQUE_VIOLATION))
                    if e.as_db_error().and_then(|d| d.constraint()) == Some("users_username_key") =>
                {
                    Refused::Conflict(Conflict::UsernameTaken(r.username.clone().unwrap_or_default()))
                }
                (StoreOp::PutUser(r), Some(&SqlState::UNIQUE_VIOLATION)) => {
                    Refused::Conflict(Conflict::EmailTaken(r.email.clone()))
                }
                (StoreOp::PutOrg(r), Some(&SqlState::UNIQUE_VIOLATION)) => {
                    Refused::Conflict(Conflict::SlugTaken(r.slug.clone()))
                }
                (StoreOp::PutUser(r), Some(&SqlState::FOREIGN_KEY_VIOLATION)) => {
                    Refused::Conflict(Conflict::OrganizationGone { user: r.id })
                }
                (StoreOp::PutAccount(r), Some(&SqlState::UNIQUE_VIOLATION)) => {
                    Refused::Conflict(Conflict::AccountTaken {
                        provider: r.provider.clone(),
                        subject: r.subject.clone(),
                    })
                }
                (StoreOp::DeleteOrg(id), Some(&SqlState::FOREIGN_KEY_VIOLATION)) => {
                    Refused::Conflict(Conflict::OrganizationHasMembers { org: *id })
                }
                // The organization (or the account) went on another node a moment ago.
                (StoreOp::PutMember(r), Some(&SqlState::FOREIGN_KEY_VIOLATION)) => {
                    Refused::Conflict(Conflict::OrganizationGone { user: r.user })
                }
                (StoreOp::PutInvitation(r), Some(&SqlState::FOREIGN_KEY_VIOLATION)) => {
                    Refused::Conflict(Conflict::OrganizationGone { user: r.inviter })
                }
                // A membership another node gave the account a moment ago outlives it: refused as a change made
                // meanwhile (the follower brings this node up to date).
                (StoreOp::DeleteUser(id), Some(&SqlState::FOREIGN_KEY_VIOLATION)) => {
                    Refused::Conflict(Conflict::Changed { user: *id })
                }
                _ => Refused::Failed(e),
            });
        }
    }
    if guard_admins && admins_before > 0 && count_admins(tx)? == 0 {
        return Err(Refused::Conflict(Conflict::LastAdmin));
    }
    Ok(())
}

/// The account an op is about, for the conflict a record that does not decode is answered with.
fn user_of(op: &StoreOp) -> [u8; 16] {
    match op {
        StoreOp::PutUser(r) => r.id,
        StoreOp::DeleteUser(id) => *id,
        StoreOp::PutAudit(r) => r.target.unwrap_or_default(),
        _ => [0; 16],
    }
}

fn count_admins(tx: &mut Transaction<'_>) -> Result<i64, postgres::Error> {
    Ok(tx.query_one("SELECT count(*) FROM users WHERE active_admin", &[])?.get(0))
}

/// What the guard counts: the domain's `User::is_active_admin`, from the record.
fn active_admin(r: &UserRecord) -> bool {
    r.role == "admin" && !r.banned
}

fn hash(bytes: &[u8]) -> Result<super::TokenHash, StoreError> {
    bytes.try_into().map_err(|_| StoreError::Corrupt("a token hash is not 32 bytes".into()))
}

fn id16(bytes: &[u8]) -> Result<[u8; 16], StoreError> {
    bytes.try_into().map_err(|_| StoreError::Corrupt("an id is not 16 bytes".into()))
}

fn db(e: postgres::Error) -> StoreError {
    match e.as_db_error() {
        Some(db) => StoreError::Io(format!("PostgreSQL: {}: {}", db.code().code(), db.message())),
        None => StoreError::Io(format!("PostgreSQL: {e}")),
    }
}
