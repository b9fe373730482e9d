//! The audit log's reader and its retention. Entries are written by whoever makes the change, in the same commit
//! ([`crate::store::audit::entry`]), with the action names of [`crate::domain::action`].

use std::sync::Arc;
use std::time::Duration;

use uuid::Uuid;

use super::Unavailable;
use crate::domain::{AuditEntry, AuditId, Timestamp};
use crate::store::{AuditCaps, Store, StoreOp, StoreWriter, convert};

/// The audit log as the rest of the server reads and trims it: pages of domain entries, and retention. The front
/// end never sees the store.
#[derive(Clone)]
pub struct AuditLog {
    store: Arc<Store>,
    writer: StoreWriter,
}

/// How long entries are kept, and how many at most: `max_entries` of the administrative and account history,
/// and apart from them `max_anonymous_entries` of what anonymous callers caused (mailed links asked for, failed
/// sign-ins). A flood of the second kind only ever pushes out its own kind.
#[derive(Debug, Clone, Copy)]
pub struct Retention {
    pub max_age: Duration,
    pub max_entries: u64,
    pub max_anonymous_entries: u64,
}

/// What an audit search asks for: every condition given must hold. `subject` is the actor or the target.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditSearch {
    pub action: Option<String>,
    pub actor: Option<Uuid>,
    pub target: Option<Uuid>,
    pub subject: Option<Uuid>,
    /// From this time on (inclusive).
    pub from: Option<Timestamp>,
    /// Up to this time (inclusive).
    pub to: Option<Timestamp>,
}

impl AuditSearch {
    fn matches(&self, e: &AuditEntry) -> bool {
        let actor = e.actor.map(Uuid::from);
        self.action.as_deref().is_none_or(|a| e.action == a)
            && self.actor.is_none_or(|a| actor == Some(a))
            && self.target.is_none_or(|t| e.target == Some(t))
            && self.subject.is_none_or(|s| actor == Some(s) || e.target == Some(s))
            && self.to.is_none_or(|to| e.at <= to)
    }
}

/// One page of a search: the entries found, newest first, and where the next page starts (`None`: no older
/// entry matches). A page may hold fewer than asked with a `next`: the search looked at [`SEARCH_BUDGET`] entries.
#[derive(Debug, Default)]
pub struct Found {
    pub entries: Vec<AuditEntry>,
    pub next: Option<AuditId>,
}

/// Entries a search page looks at, at most: a rare action over a long log is found page by page, each page a
/// bounded read (about a tenth of a second), never one request reading the whole log.
pub const SEARCH_BUDGET: usize = 50_000;
/// Entries read from the store per step of a search.
const SEARCH_STEP: usize = 1_000;

/// Entries deleted per write during a prune, and writes per pass: a pass never holds the writer for long, and a
/// large backlog (a lowered `max_entries`) is worked off over a few passes.
const PRUNE_CHUNK: usize = 5_000;
const PRUNE_CHUNKS_PER_PASS: usize = 20;

impl AuditLog {
    pub(crate) fn new(store: Arc<Store>, writer: StoreWriter) -> Self {
        Self { store, writer }
    }

    /// Writes one entry on its own, durably: for a change that stages nothing else in the store (a reload of the
    /// settings, which live in memory). Every other change stages its entry with its own ops.
    pub async fn write(&self, entry: StoreOp) -> Result<(), Unavailable> {
        self.commit(vec![entry]).await
    }

    /// Writes an entry with the records of a change no actor owns (an administrator's test message in the
    /// outbox), in one commit, durably.
    pub async fn commit(&self, ops: Vec<StoreOp>) -> Result<(), Unavailable> {
        self.writer.write(ops).await.map_err(|_| Unavailable)
    }

    /// Up to `limit` entries older than `before` (from the newest when `None`), newest first. Reads a snapshot
    /// on a blocking thread; never blocks writers.
    pub async fn page(&self, before: Option<AuditId>, limit: usize) -> Result<Vec<AuditEntry>, Unavailable> {
        let store = Arc::clone(&self.store);
        let page = tokio::task::spawn_blocking(move || store.audit_page(before.map(AuditId::to_bytes), limit)).await;
        let records = page.map_err(|_| Unavailable)?.map_err(|_| Unavailable)?;
        Ok(records.into_iter().map(convert::audit).collect())
    }

    /// Up to `limit` entries older than `before` (from the newest when `None`) that match `search`, newest first,
    /// read on a blocking thread in steps from a snapshot of each step. The ids are UUID v7, so a time range is
    /// a range of ids: the search starts at `to` and stops at `from`.
    pub async fn search(
        &self,
        search: AuditSearch,
        before: Option<AuditId>,
        limit: usize,
    ) -> Result<Found, Unavailable> {
        let store = Arc::clone(&self.store);
        let found = tokio::task::spawn_blocking(move || {
            // The smallest id of the millisecond after `to`: every entry up to `to` sorts before it.
            let upto = search.to.map(|to| {
                let ms = u64::try_from(to.as_millis().saturating_add(1)).unwrap_or(0);
                uuid::Builder::from_unix_timestamp_millis(ms, &[0; 10]).into_uuid().into_bytes()
            });
            let mut cursor = match (before.map(AuditId::to_bytes), upto) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            let mut found = Found::default();
            let mut looked = 0;
            loop {
                let records = store.audit_page(cursor, SEARCH_STEP)?;
                let exhausted = records.len() < SEARCH_STEP;
                for record in records {
                    let entry = convert::audit(record);
                    if search.from.is_some_and(|from| entry.at < from) {
                        return Ok(found);
                    }
                    looked += 1;
                    cursor = Some(entry.id.to_bytes());
                    if search.matches(&entry) {
                        found.entries.push(entry);
                        if found.entries.len() == limit {
                            found.next = cursor.map(AuditId::from_bytes);
                            return Ok(found);
                        }
                    }
                    if looked >= SEARCH_BUDGET {
                        found.next = cursor.map(AuditId::from_bytes);
                        return Ok(found);
                    }
                }
                if exhausted {
                    return Ok(found);
                }
            }
        })
        .await;
        found.map_err(|_| Unavailable)?.map_err(|_: crate::store::StoreError| Unavailable)
    }

    /// Up to `limit` entries after `after` (from the oldest when `None`), oldest first: commit order, as the
    /// export streams them.
    pub async fn after(&self, after: Option<AuditId>, limit: usize) -> Result<Vec<AuditEntry>, Unavailable> {
        let store = Arc::clone(&self.store);
        let page = tokio::task::spawn_blocking(move || store.audit_after(after.map(AuditId::to_bytes), limit)).await;
        let records = page.map_err(|_| Unavailable)?.map_err(|_| Unavailable)?;
        Ok(records.into_iter().map(convert::audit).collect())
    }

    /// Deletes entries older than the retention and the oldest beyond the cap, in bounded steps. Returns how many.
    pub async fn prune(&self, retention: Retention, now: Timestamp) -> Result<usize, Unavailable> {
        let cutoff = now.as_millis().saturating_sub(i64::try_from(retention.max_age.as_millis()).unwrap_or(i64::MAX));
        // The smallest UUID v7 of that millisecond: every id made earlier sorts before it.
        let before = uuid::Builder::from_unix_timestamp_millis(u64::try_from(cutoff).unwrap_or(0), &[0; 10])
            .into_uuid()
            .into_bytes();
        let mut pruned = 0;
        for _ in 0..PRUNE_CHUNKS_PER_PASS {
            let store = Arc::clone(&self.store);
            let caps = AuditCaps { entries: retention.max_entries, anonymous: retention.max_anonymous_entries };
            let found = tokio::task::spawn_blocking(move || store.audit_to_prune(before, caps, PRUNE_CHUNK)).await;
            let ids = found.map_err(|_| Unavailable)?.map_err(|_| Unavailable)?;
            if ids.is_empty() {
                break;
            }
            pruned += ids.len();
            self.writer.write(ids.into_iter().map(StoreOp::DeleteAudit).collect()).await.map_err(|_| Unavailable)?;
        }
        Ok(pruned)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::action;

    fn entry_at(ms: u64) -> StoreOp {
        logged_at(action::BANNED, ms)
    }

    fn logged_at(what: &str, ms: u64) -> StoreOp {
        let id = uuid::Builder::from_unix_timestamp_millis(ms, &rand_bytes()).into_uuid();
        let mut record = convert::audit_record(&AuditEntry::new(what, None, None, "", String::new()));
        record.id = id.into_bytes();
        StoreOp::PutAudit(record)
    }

    fn rand_bytes() -> [u8; 10] {
        let mut bytes = [0; 10];
        getrandom::fill(&mut bytes).unwrap();
        bytes
    }

    #[tokio::test]
    async fn entries_past_their_time_and_beyond_the_cap_are_pruned_oldest_first() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(Store::open(dir.path()).unwrap());
        let (writer, _done) = StoreWriter::spawn(Arc::clone(&store)).unwrap();
        let log = AuditLog::new(Arc::clone(&store), writer);
        let day = 86_400_000u64;
        let now = Timestamp::from_millis(i64::try_from(400 * day).unwrap());
        let old: Vec<StoreOp> = (0..7).map(|n| entry_at(10 * day + n)).collect();
        let recent: Vec<StoreOp> = (0..5).map(|n| entry_at(399 * day + n)).collect();
        store.commit(&old).unwrap();
        store.commit(&recent).unwrap();

        let year =
            Retention { max_age: Duration::from_secs(365 * 86_400), max_entries: 1_000, max_anonymous_entries: 1_000 };
        assert_eq!(log.prune(year, now).await.unwrap(), 7, "the entries older than a year");
        assert_eq!(log.page(None, 100).await.unwrap().len(), 5);

        let capped = Retention { max_entries: 2, ..year };
        assert_eq!(log.prune(capped, now).await.unwrap(), 3);
        let left = log.page(None, 100).await.unwrap();
        let newest: Vec<AuditId> = recent[3..]
            .iter()
            .rev()
            .map(|op| match op {
                StoreOp::PutAudit(r) => AuditId::from_bytes(r.id),
                _ => unreachable!(),
            })
            .collect();
        assert_eq!(left.iter().map(|e| e.id).collect::<Vec<_>>(), newest, "the newest two are kept");
        assert_eq!(log.prune(capped, now).await.unwrap(), 0, "nothing more to do");
    }

    #[test]
    fn the_anonymous_stream_takes_exactly_the_anonymous_actions() {
        // The list names the constants (a misspelt action does not compile); what is left to hold is the lookup.
        for anonymous in crate::domain::ANONYMOUS_ACTIONS {
            assert!(crate::domain::is_anonymous_action(anonymous), "{anonymous}");
        }
        assert!(!crate::domain::is_anonymous_action(action::ROLE_CHANGED));
        assert!(!crate::domain::is_anonymous_action(action::USER_CREATED));
    }

    /// A flood of anonymous entries, newer than every administrative one, only pushes out its own kind.
    #[tokio::test]
    async fn anonymous_entries_are_capped_apart_and_never_push_out_administrative_ones() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(Store::open(dir.path()).unwrap());
        let (writer, _done) = StoreWriter::spawn(Arc::clone(&store)).unwrap();
        let log = AuditLog::new(Arc::clone(&store), writer);
        let day = 86_400_000u64;
        let now = Timestamp::from_millis(i64::try_from(400 * day).unwrap());
        let admin: Vec<StoreOp> = [action::USER_CREATED, action::ROLE_CHANGED, action::IMPERSONATION_STARTED]
            .iter()
            .enumerate()
            .map(|(n, what)| logged_at(what, 399 * day + n as u64))
            .collect();
        store.commit(&admin).unwrap();
        let flood: Vec<StoreOp> = (0..50).map(|n| logged_at(action::TOKEN_REQUESTED, 399 * day + 100 + n)).collect();
        store.commit(&flood).unwrap();

        let retention =
            Retention { max_age: Duration::from_secs(365 * 86_400), max_entries: 5, max_anonymous_entries: 10 };
        assert_eq!(log.prune(retention, now).await.unwrap(), 40, "the anonymous stream down to its own cap");
        let left = log.page(None, 100).await.unwrap();
        let count = |what: &str| left.iter().filter(|e| e.action == what).count();
        assert_eq!(count(action::TOKEN_REQUESTED), 10);
        for what in [action::USER_CREATED, action::ROLE_CHANGED, action::IMPERSONATION_STARTED] {
            assert_eq!(count(what), 1, "{what} was pushed out");
        }

        // The administrative stream has a cap of its own.
        let more: Vec<StoreOp> = (0..4).map(|n| logged_at(action::BANNED, 399 * day + 200 + n)).collect();
        store.commit(&more).unwrap();
        assert_eq!(log.prune(retention, now).await.unwrap(), 2);
        let left = log.page(None, 100).await.unwrap();
        assert_eq!(left.iter().filter(|e| e.action == action::TOKEN_REQUESTED).count(), 10, "untouched");
        assert_eq!(left.len(), 15);
    }
}
