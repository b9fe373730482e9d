//! Start-up: the read indexes rebuilt from the store's records.
//!
//! The accounts (with the organizations, tokens and mail) and the sessions (with the memberships) are read and
//! indexed on two threads at once, from one snapshot ([`Store::visit_split`]): each half is about half of a start's
//! time. So a session is checked against its account, and a membership against its account and organization, only
//! once both are read, in [`finish`].

use std::collections::HashMap;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::sessions::SessionIndex;
use super::users::{Apart, UserIndex};
use super::{Indexes, KeyHash};
use crate::domain::{
    Mail, MemberRoles, Membership, OneTimeToken, OrgId, OrgRole, RoleSet, Timestamp, TokenHash, User, UserId,
};
use crate::store::{Loaded, Record, Store, StoreError, StoreOp, Visitor, convert};

/// Where a start-up's time went (logged with the state loaded). The first two are counted from the start of the
/// load: the two halves are read at the same time.
#[derive(Debug, Clone, Copy, Default)]
pub struct LoadTimes {
    /// Reading, decoding and indexing the organizations and accounts (and tokens and outbox, which are few).
    pub users: Duration,
    /// The same for the sessions, then reading and sorting the memberships, on the second thread.
    pub sessions: Duration,
    /// Beyond the later of the two: checking the sessions and memberships against their accounts, indexing the
    /// memberships and building the ordered views (creation order, e-mail order, members, sessions by user), of
    /// which the e-mail order and the members by organization start on another thread as soon as the accounts are
    /// read.
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

/// The indexes of everything in `store`, with the checks a server makes before it serves; also what `restore`
/// runs on a backup before it replaces anything, so the two cannot drift apart.
pub fn build(store: &Store, roles: &RoleSet) -> Result<Built, StoreError> {
    let (users, sessions) = store.counts()?;
    // Sized from the store's counts: maps grown one insert at a time copy themselves at every doubling, and leave
    // the old tables behind until they are reclaimed.
    let indexes = Indexes::with_capacity(to_usize(users), to_usize(sessions));
    load(indexes, roles, |accounts, sessions| store.visit_split(accounts, sessions))
}

fn to_usize(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

/// Builds the indexes from records already in memory (benchmarks, tools), one half after the other.
pub fn indexes(loaded: Loaded, roles: &RoleSet) -> Result<Built, StoreError> {
    let Loaded { users, orgs, members, invitations, sessions: records, accounts: linked, api_keys } = loaded;
    load(Indexes::default(), roles, |accounts, sessions| {
        let held = orgs.into_iter().map(Record::Org).chain(users.into_iter().map(Record::User));
        let held =
            held.chain(members.into_iter().map(Record::Member)).chain(invitations.into_iter().map(Record::Invitation));
        let held = held.chain(linked.into_iter().map(Record::Account));
        for record in held.chain(api_keys.into_iter().map(Record::ApiKey)) {
            accounts.record(record)?;
        }
        // The accounts' views start building now, while the sessions are indexed.
        accounts.done();
        records.into_iter().try_for_each(|(hash, record)| sessions.record(Record::Session(hash, record)))
    })
}

/// Fills `indexes` with what `read` hands to the two halves, then checks and finishes them.
fn load(
    indexes: Indexes,
    roles: &RoleSet,
    read: impl FnOnce(&mut Accounts<'_>, &mut Sessions<'_>) -> Result<(), StoreError>,
) -> Result<Built, StoreError> {
    let (started, now) = (Instant::now(), Timestamp::now());
    let mut accounts = Accounts::new(&indexes, roles, now, started);
    let mut sessions = Sessions::new(&indexes.sessions, now, started);
    read(&mut accounts, &mut sessions)?;
    let (accounts, sessions) = (accounts.finish(), sessions.finish());
    finish(indexes, accounts, sessions)
}

/// Indexes the organizations, accounts, one-time tokens and outbox (in that order, as the store hands them out).
struct Accounts<'i> {
    indexes: &'i Indexes,
    roles: &'i RoleSet,
    now: Timestamp,
    started: Instant,
    /// Expired tokens, and those of deleted accounts or replaced by a newer one.
    cleanup: Vec<StoreOp>,
    outbox: Vec<Mail>,
    /// Every account, in the store's order: shared with the thread that builds two of their views once read.
    users: Vec<Arc<User>>,
    shared: Option<Arc<Vec<Arc<User>>>>,
    /// Accounts read and not yet in the index: published a batch at a time (see `InlineMap::insert_many`), and
    /// before any other record, which may look one up.
    unpublished: Vec<Arc<User>>,
    /// Every account's id, organization and ban flag, for the checks of the sessions and memberships in
    /// [`finish`] (the accounts themselves are shared with the views' thread by then).
    held: Vec<Held>,
    /// Memberships, when the store hands them to this side (PostgreSQL does).
    members: Members,
    /// That thread: it starts when the accounts are read and runs while the sessions are, and then while
    /// [`finish`] checks the sessions and memberships and builds the other views.
    email: Option<JoinHandle<Result<Apart, UserId>>>,
    read: Option<Duration>,
}

/// What the accounts' half leaves for [`finish`].
struct AccountsRead {
    held: Vec<Held>,
    members: Members,
    cleanup: Vec<StoreOp>,
    outbox: Vec<Mail>,
    users: Arc<Vec<Arc<User>>>,
    email: JoinHandle<Result<Apart, UserId>>,
    read: Duration,
}

impl<'i> Accounts<'i> {
    fn new(indexes: &'i Indexes, roles: &'i RoleSet, now: Timestamp, started: Instant) -> Self {
        Self {
            indexes,
            roles,
            now,
            started,
            cleanup: Vec::new(),
            outbox: Vec::new(),
            users: Vec::new(),
            shared: None,
            unpublished: Vec::with_capacity(BATCH),
            held: Vec::new(),
            members: Members::default(),
            email: None,
            read: None,
        }
    }

    fn finish(mut self) -> AccountsRead {
        self.done();
        let email = self.email.take().unwrap_or_else(|| std::thread::spawn(|| UserIndex::build_apart(&[])));
        let (held, members) = (self.held, self.members);
        AccountsRead {
            held,
            members,
            cleanup: self.cleanup,
            outbox: self.outbox,
            users: self.shared.unwrap_or_default(),
            email,
            read: self.read.unwrap_or_default(),
        }
    }
}

/// How many loaded entries are handed to an index at once.
const BATCH: usize = 256;

impl Visitor for Accounts<'_> {
    fn record(&mut self, record: Record) -> Result<(), StoreError> {
        let indexes = self.indexes;
        let user = matches!(record, Record::User(_));
        if !self.unpublished.is_empty() && (!user || self.unpublished.len() == BATCH) {
            indexes.users.publish_loaded_many(&mut self.unpublished);
        }
        match record {
            Record::Org(r) => {
                let org = convert::org(r);
                if indexes.orgs.slug_taken(&org.slug) {
                    return Err(StoreError::Corrupt(format!("two organizations share the slug of {}", org.id)));
                }
                indexes.orgs.publish(Arc::new(org));
            }
            Record::User(r) => {
                // Two accounts with one e-mail are refused where the e-mail order is built.
                let user = Arc::new(convert::user(r, self.roles));
                self.held.push(Held { id: user.id, org: user.organization_id, banned: user.banned });
                self.users.push(Arc::clone(&user));
                self.unpublished.push(user);
            }
            Record::Token(hash, r) => {
                let token = convert::token(r)?;
                let live = !token.is_expired(self.now) && indexes.users.contains(token.user_id);
                // Of two live tokens of one user, kind and requesting client (a crash between issuing and cleaning
                // up), the newer wins.
                let same = |t: &OneTimeToken| indexes.tokens.asked_by(t.user_id, t.kind, t.requested_by);
                let newer = |t: &OneTimeToken| {
                    same(t).and_then(|h| indexes.tokens.get(&h)).is_none_or(|old| old.created_at <= t.created_at)
                };
                if live && (!token.kind.is_link() || newer(&token)) {
                    if let Some(old) = same(&token).filter(|_| token.kind.is_link()) {
                        indexes.tokens.publish(old, None);
                        self.cleanup.push(StoreOp::DeleteToken(old));
                    }
                    indexes.tokens.publish(hash, Some(Arc::new(token)));
                } else {
                    self.cleanup.push(StoreOp::DeleteToken(hash));
                }
            }
            Record::Outbox(r) => self.outbox.push(convert::mail(r)),
            // Checked against the organizations and accounts in `finish`.
            Record::Member(r) => self.members.push(&r),
            Record::Invitation(r) => {
                let invitation = convert::invitation(&r);
                if indexes.orgs.get(invitation.org).is_some() {
                    indexes.members.publish_invitation(Arc::new(invitation));
                } else {
                    self.cleanup.push(StoreOp::DeleteInvitation(r.id));
                }
            }

            // Read after the users: an identity of an account that is gone is removed.
            Record::Account(r) => {
                let account = crate::actors::linked::LinkedAccount::from_record(r);
                if indexes.users.contains(account.user_id) {
                    indexes.accounts.publish(account.id, Some(Arc::new(account)));
                } else {
                    let user = account.user_id.to_bytes();
                    self.cleanup.push(StoreOp::DeleteAccount { id: account.id, user });
                }
            }
            // Read after the users: a key of an account that is gone, or past its expiry, is removed.
            Record::ApiKey(r) => {
                let key = convert::api_key(r);
                if indexes.users.contains(key.user_id) && !key.is_expired(self.now) {
                    indexes.api_keys.publish(key.id, Some(Arc::new(key)));
                } else {
                    self.cleanup.push(StoreOp::DeleteApiKey { id: key.id.to_bytes(), user: key.user_id.to_bytes() });
                }
            }
            Record::Session(..) => unreachable!("the store hands the sessions to the other half"),
        }
        Ok(())
    }

    /// Starts building two of the accounts' views on another thread, which the sessions' half leaves the second
    /// core to once it is read too.
    fn done(&mut self) {
        self.indexes.users.publish_loaded_many(&mut self.unpublished);
        if self.read.is_none() {
            self.read = Some(self.started.elapsed());
            self.members.sort();
            let users = Arc::new(std::mem::take(&mut self.users));
            let shared = Arc::clone(&users);
            self.shared = Some(users);
            self.email = Some(std::thread::spawn(move || UserIndex::build_apart(&shared)));
        }
    }
}

/// Indexes the sessions. Whether a session's account exists and may hold it is checked in [`finish`], once the
/// accounts are read too; only the expiry is checked here.
struct Sessions<'i> {
    index: &'i SessionIndex,
    now: Timestamp,
    started: Instant,
    /// Every unexpired session as [`SessionIndex::loaded`] keeps it, in the store's order (by user).
    unexpired: Vec<(UserId, u64)>,
    /// Sessions read and not yet in the index (a batch at a time, as the accounts).
    unpublished: Vec<(TokenHash, Arc<crate::domain::Session>)>,
    expired: Vec<StoreOp>,
    /// The memberships, which the embedded store hands to this side after the sessions.
    members: Members,
    read: Option<Duration>,
}

/// What the sessions' half leaves for [`finish`].
struct SessionsRead {
    unexpired: Vec<(UserId, u64)>,
    expired: Vec<StoreOp>,
    members: Members,
    read: Duration,
}

impl<'i> Sessions<'i> {
    fn new(index: &'i SessionIndex, now: Timestamp, started: Instant) -> Self {
        Self {
            index,
            now,
            started,
            unexpired: Vec::new(),
            unpublished: Vec::with_capacity(BATCH),
            expired: Vec::new(),
            members: Members::default(),
            read: None,
        }
    }

    fn finish(mut self) -> SessionsRead {
        self.done();
        let read = self.read.unwrap_or_default();
        SessionsRead { unexpired: self.unexpired, expired: self.expired, members: self.members, read }
    }
}

impl Visitor for Sessions<'_> {
    fn record(&mut self, record: Record) -> Result<(), StoreError> {
        let (hash, r) = match record {
            Record::Session(hash, r) => (hash, r),
            Record::Member(r) => {
                self.members.push(&r);
                return Ok(());
            }
            _ => unreachable!("the store hands only sessions and memberships to this half"),
        };
        let agent = self.index.user_agent(&r.user_agent);
        let session = convert::session_with_agent(r, agent);
        if session.is_expired(self.now) {
            self.expired.push(StoreOp::DeleteSession(session.user_id.to_bytes(), hash));
        } else {
            self.unexpired.push(SessionIndex::loaded(session.user_id, &hash));
            self.unpublished.push((hash, Arc::new(session)));
            if self.unpublished.len() == BATCH {
                self.index.publish_loaded_many(&mut self.unpublished);
            }
        }
        Ok(())
    }

    fn done(&mut self) {
        self.index.publish_loaded_many(&mut self.unpublished);
        if self.read.is_none() {
            self.members.sort();
            self.read = Some(self.started.elapsed());
        }
    }
}

/// An account as the checks in [`finish`] need it: 34 bytes. Whether a banned account's ban is still on, and an
/// account's creation time (the date of a primary membership made for it), are read from the account itself, for
/// the few that need it.
struct Held {
    id: UserId,
    org: Option<OrgId>,
    banned: bool,
}

/// The memberships read, by (user, organization) once sorted: each with its key beside it, so that sorting them
/// and walking them beside the accounts reads the list in order, not every membership from wherever it is.
#[derive(Default)]
struct Members(Vec<((UserId, OrgId), Arc<Membership>)>);

impl Members {
    fn push(&mut self, r: &crate::store::MembershipRecord) {
        let member = convert::membership(r);
        self.0.push(((member.user, member.org), Arc::new(member)));
    }

    /// The store hands them over by organization: a merge of as many sorted runs as there are organizations.
    fn sort(&mut self) {
        self.0.sort_by_key(|a| a.0);
    }

    fn merge(&mut self, other: Members) {
        if self.0.is_empty() {
            *self = other;
        } else if !other.0.is_empty() {
            self.0.extend(other.0);
            self.sort();
        }
    }

    /// The memberships to index, in (user, organization) order: those whose account and organization exist, and
    /// each account's primary one. A membership whose account or organization is gone goes with them; an account's
    /// organization (`organizationId`) is its primary membership, so one written before memberships existed (or by
    /// an import, which writes accounts only) gets its record now, as a `member` since it joined, with the id
    /// every node derives alike. Both lists are walked side by side in user order: no look-up per record (at
    /// 10,000,000 accounts a look-up in a map of them, and one in the memberships by user, for each, were most of
    /// the memberships' part of a start).
    fn check(
        self,
        indexes: &Indexes,
        held: &[Held],
        cleanup: &mut Vec<StoreOp>,
    ) -> Vec<((UserId, OrgId), Arc<Membership>)> {
        // Asked once for each organization: in user order the organizations of one membership and the next differ
        // (asking the organizations' index each time was 10,000,000 look-ups, each taking and dropping a reference).
        let mut orgs: HashMap<OrgId, bool, KeyHash> = HashMap::default();
        let mut org_exists = |org: OrgId| *orgs.entry(org).or_insert_with(|| indexes.orgs.get(org).is_some());
        let mut drop_member =
            |(user, org): (UserId, OrgId)| cleanup.push(StoreOp::DeleteMember(org.to_bytes(), user.to_bytes()));
        // Kept in place: those kept move to the front of the list (`kept` of them), those dropped behind them, and
        // the list is cut after the kept ones. A second list of them all was another 40 bytes a membership to fill.
        let mut all = self.0;
        let (mut kept, mut next) = (0, 0);
        let mut added = Vec::new();
        for account in held {
            let start = kept;
            while let Some(&(key, _)) = all.get(next).filter(|((user, _), _)| *user <= account.id) {
                if key.0 == account.id && org_exists(key.1) {
                    all.swap(kept, next);
                    kept += 1;
                } else {
                    drop_member(key);
                }
                next += 1;
            }
            let Some(org) = account.org else { continue };
            if all[start..kept].iter().all(|((_, o), _)| *o != org) {
                // The account was published before the check: it is there.
                let Some(created_at) = indexes.users.loaded_created_at(account.id) else { continue };
                let member = Membership::new(org, account.id, MemberRoles::one(OrgRole::Member), created_at);
                added.push(((account.id, org), Arc::new(member)));
            }
        }
        all[next..].iter().for_each(|&(key, _)| drop_member(key));
        all.truncate(kept);
        if !added.is_empty() {
            cleanup.extend(added.iter().map(|(_, m)| StoreOp::PutMember(convert::membership_record(m))));
            // Two sorted runs (none of the added ones was there): one merge.
            all.extend(added);
            all.sort_by_key(|a| a.0);
        }
        all
    }
}

/// Drops the sessions whose account is gone or banned, and installs the ordered views. Fails when two accounts
/// share an e-mail address.
fn finish(indexes: Indexes, accounts: AccountsRead, sessions: SessionsRead) -> Result<Built, StoreError> {
    let read = Instant::now();
    let (now, mut cleanup) = (Timestamp::now(), accounts.cleanup);
    cleanup.extend(sessions.expired);
    // Both lists are walked side by side in user order, as the memberships are: one look-up in the accounts' map
    // per session was a random read each (the store hands one account's sessions over together, so one per
    // account: still 10,000,000 at that scale). The embedded store hands both over in that order; PostgreSQL's need
    // not.
    let (mut held, mut live) = (accounts.held, sessions.unexpired);
    if !held.is_sorted_by(|a, b| a.id <= b.id) {
        held.sort_unstable_by_key(|h| h.id);
    }
    if !live.is_sorted() {
        live.sort_unstable();
    }
    let mut owners = held.iter().peekable();
    let mut last: Option<(UserId, bool)> = None;
    live.retain(|&(user, under)| {
        let may = match last {
            Some((id, may)) if id == user => may,
            _ => {
                while owners.next_if(|a| a.id < user).is_some() {}
                // A banned account's ban may have ended: `may_hold_session` reads it (without taking a reference to
                // the account, since the views' thread is counting references to the same accounts meanwhile).
                owners.peek().is_some_and(|a| a.id == user && (!a.banned || indexes.users.may_hold_session(user, now)))
            }
        };
        last = Some((user, may));
        if !may {
            for hash in indexes.sessions.unpublish_loaded(user, under) {
                cleanup.push(StoreOp::DeleteSession(user.to_bytes(), hash));
            }
        }
        may
    });
    indexes.sessions.finish_load(live);
    let mut members = accounts.members;
    members.merge(sessions.members);
    let members = members.check(&indexes, &held, &mut cleanup);
    // Gone before the memberships' views are allocated.
    drop(held);
    indexes.members.load(members);
    // The views' thread alone, it was still building them when this one had been done for a third of the time (3.4
    // of 7 s at 10,000,000 accounts). So that thread builds the two costliest (their trees are built from accounts
    // read from all over memory), and this one the others meanwhile.
    let views = UserIndex::build_views(&accounts.users);
    drop(accounts.users);
    // A panic there is a bug, not bad data: the same as a panic here.
    match accounts.email.join().unwrap_or_else(|p| std::panic::resume_unwind(p)) {
        Ok(email) => indexes.users.install(views, email),
        Err(id) => return Err(StoreError::Corrupt(format!("two accounts share the e-mail of user {id}"))),
    }
    let times = LoadTimes { users: accounts.read, sessions: sessions.read, views: read.elapsed() };
    Ok(Built { indexes, cleanup, outbox: accounts.outbox, times })
}
