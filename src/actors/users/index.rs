//! The read index of users: by id, in creation order and in e-mail order. Only the users actor writes it.
//!
//! The two ordered views serve the administrator's lists at any scale: a page in creation order starts where the
//! cursor points (no sort, no count of what came before), and an e-mail prefix is a range. The e-mail order is
//! also the lookup by e-mail (sign-in, sign-up): a tree of pointers to the accounts, ordered by their own
//! addresses, so no address is held twice (a hash map from e-mail to id cost ~100 bytes per account: its entry, a
//! second copy of the address and a table slot). A lookup is ~20 comparisons, nothing beside a password hash.
//! The views are behind read-write locks, not lock-free maps, because only those calls read them and only the
//! users actor writes them; the session check never touches them.

use std::borrow::Borrow;
use std::cmp::Ordering;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::marker::PhantomData;
use std::ops::Bound;
use std::sync::atomic::{AtomicUsize, Ordering as Atomic};
use std::sync::{Arc, RwLock};

use crate::actors::inline_map::{InlineMap, Key};
use crate::actors::{KeyHash, read, write};
use crate::domain::{Email, HashCost, OrgId, Timestamp, User, UserId, Username};

/// An account holds its id: its slot keeps the key's 64-bit hash as a tag (16-byte slots), and the id is compared
/// in the account once the tag matches (a read the caller makes anyway: it takes a reference to the account).
impl Key<User> for UserId {
    type Kept = u64;
    fn kept(&self, hash: u64) -> u64 {
        hash
    }
    fn is(&self, hash: u64, kept: &u64, user: &User) -> bool {
        *kept == hash && user.id == *self
    }
    fn of(_: &u64, user: &User) -> Self {
        user.id
    }
    fn hash_of(kept: &u64, _: &User, _: &KeyHash) -> u64 {
        *kept
    }
}

/// A user's place in the creation order: the admin lists' order, and the key their cursors name.
pub type Place = (Timestamp, UserId);

#[derive(Default)]
pub struct UserIndex {
    /// The session check's map: entries in its table, reads that never wait (see [`InlineMap`]).
    by_id: InlineMap<UserId, User>,
    by_created: RwLock<BTreeSet<InOrder<Created>>>,
    by_email_order: RwLock<BTreeSet<ByEmail>>,
    /// Members of each organization in creation order (only accounts that have one).
    by_org: RwLock<BTreeSet<InOrder<Member>>>,
    /// Unbanned administrators: the last-admin guard counts them on every administrative change.
    active_admins: RwLock<HashSet<UserId>>,
    /// Bans with an end, by their end: housekeeping lifts the ones that ran out without a pass over everyone.
    bans_ending: RwLock<BTreeSet<(Timestamp, UserId)>>,
    /// Usernames: the normalised name (sign-in by username) and its confusable skeleton (what a new name is
    /// checked against: equal names have equal skeletons, so this alone keeps names unique). Only accounts with a
    /// username are here. An import may bring two look-alikes: the skeleton then names the first.
    usernames: RwLock<Usernames>,
    /// Accounts whose password hash is still a better-auth scrypt hash (imported, not yet signed in since).
    legacy_hashes: AtomicUsize,
    /// Accounts with an administrator's role, banned or not: whether there is any is asked at start and by the
    /// first-administrator page, which anyone may open. It was a scan of the accounts until one was found: with one
    /// administrator among 10,000,000 accounts, millions of reads for one unauthenticated request.
    admins: AtomicUsize,
    /// Accounts by the argon2 cost of their hash: an unknown e-mail's check costs one verification at each cost
    /// on file ([`crate::hashing`]). Compact hashes by their parameters' index, counted without a lock (every
    /// account is counted at start-up); those kept as text (rare) by their parameters.
    costs: Costs,
    /// Entries taken out of an ordered view and put back elsewhere by a change (tests: a change that keeps an
    /// order's key must replace its entry in place).
    #[cfg(test)]
    moves: AtomicUsize,
}

struct Costs {
    known: Box<[AtomicUsize; 256]>,
    text: std::sync::Mutex<HashMap<Box<str>, usize>>,
}

impl Default for Costs {
    fn default() -> Self {
        Self { known: Box::new(std::array::from_fn(|_| AtomicUsize::new(0))), text: Default::default() }
    }
}

impl Costs {
    fn count(&self, hash: crate::domain::StoredHash<'_>, added: bool) {
        match hash.cost() {
            Some(HashCost::Known(index)) => {
                let counter = &self.known[usize::from(index)];
                if added {
                    counter.fetch_add(1, Atomic::Relaxed);
                } else {
                    counter.fetch_sub(1, Atomic::Relaxed);
                }
            }
            Some(HashCost::Text(parameters)) => {
                let mut text = self.text.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                let n = text.entry(parameters).or_default();
                *n = if added { *n + 1 } else { n.saturating_sub(1) };
                text.retain(|_, n| *n > 0);
            }
            None => {}
        }
    }

    fn present(&self) -> Vec<std::borrow::Cow<'static, str>> {
        let known = (0..=u8::MAX).filter(|i| self.known[usize::from(*i)].load(Atomic::Relaxed) > 0);
        let mut present: Vec<_> = known.filter_map(|i| HashCost::Known(i).parameters()).collect();
        let text = self.text.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        present.extend(text.keys().map(|p| std::borrow::Cow::Owned(p.to_string())));
        present
    }
}

/// The ordered views of the index but two, built apart at start-up (see [`UserIndex::build_views`]).
pub(crate) struct Views {
    by_created: BTreeSet<InOrder<Created>>,
    active_admins: HashSet<UserId>,
    bans_ending: BTreeSet<(Timestamp, UserId)>,
    usernames: Usernames,
}

/// The accounts by username and by the username's skeleton (see [`UserIndex::by_username`]).
#[derive(Default)]
struct Usernames {
    by_name: HashMap<Box<str>, UserId, KeyHash>,
    by_skeleton: HashMap<Box<str>, UserId, KeyHash>,
}

impl Usernames {
    fn add(&mut self, user: &User) {
        if let Some(name) = user.username() {
            self.by_name.insert(name.as_str().into(), user.id);
            self.by_skeleton.entry(name.skeleton()).or_insert(user.id);
        }
    }

    fn remove(&mut self, user: &User) {
        if let Some(name) = user.username() {
            if self.by_name.get(name.as_str()) == Some(&user.id) {
                self.by_name.remove(name.as_str());
            }
            let skeleton = name.skeleton();
            if self.by_skeleton.get(&skeleton) == Some(&user.id) {
                self.by_skeleton.remove(&skeleton);
            }
        }
    }
}

/// The e-mail order and the members by organization, built apart at start-up (see [`UserIndex::build_apart`]).
pub(crate) struct Apart {
    by_email_order: BTreeSet<ByEmail>,
    by_org: BTreeSet<InOrder<Member>>,
}

/// An order of accounts: the key an account sorts by, read from the account.
trait Order {
    type Key: Ord;
    fn key(user: &User) -> Self::Key;
}

/// The creation order.
struct Created;

impl Order for Created {
    type Key = Place;
    fn key(user: &User) -> Place {
        (user.created_at, user.id)
    }
}

/// The members of each organization in creation order.
struct Member;

/// The view holds only accounts that have an organization; `None` sorts them before any that has one.
type MemberKey = (Option<OrgId>, Place);

impl Order for Member {
    type Key = MemberKey;
    fn key(user: &User) -> MemberKey {
        (user.organization_id, (user.created_at, user.id))
    }
}

/// An account in a view ordered by `O`: the view holds a pointer per account, and the key is read from the
/// account, not copied beside it (8 bytes an entry instead of the creation order's 32 and the members' 40).
struct InOrder<O>(Arc<User>, PhantomData<O>);

impl<O: Order> InOrder<O> {
    fn new(user: Arc<User>) -> Self {
        Self(user, PhantomData)
    }
}

impl<O: Order> PartialEq for InOrder<O> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl<O: Order> Eq for InOrder<O> {}

impl<O: Order> PartialOrd for InOrder<O> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<O: Order> Ord for InOrder<O> {
    fn cmp(&self, other: &Self) -> Ordering {
        O::key(&self.0).cmp(&O::key(&other.0))
    }
}

/// What a view is searched with: a bare key, or an entry, which has one. The views are sets of entries looked up
/// by bare keys (a cursor's place), so both borrow as this.
trait Probe<K> {
    fn probe(&self) -> K;
}

impl Probe<Place> for Place {
    fn probe(&self) -> Place {
        *self
    }
}

impl Probe<MemberKey> for MemberKey {
    fn probe(&self) -> MemberKey {
        *self
    }
}

impl<O: Order> Probe<O::Key> for InOrder<O> {
    fn probe(&self) -> O::Key {
        O::key(&self.0)
    }
}

impl<O: Order + 'static> Borrow<dyn Probe<O::Key>> for InOrder<O> {
    fn borrow(&self) -> &(dyn Probe<O::Key> + 'static) {
        self
    }
}

impl<K: Ord> PartialEq for dyn Probe<K> {
    fn eq(&self, other: &Self) -> bool {
        self.probe() == other.probe()
    }
}

impl<K: Ord> Eq for dyn Probe<K> {}

impl<K: Ord> PartialOrd for dyn Probe<K> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<K: Ord> Ord for dyn Probe<K> {
    fn cmp(&self, other: &Self) -> Ordering {
        self.probe().cmp(&other.probe())
    }
}

/// A user ordered by e-mail address, looked up by it: the ordered e-mail view holds a pointer per user, not a
/// second copy of every address. Compared as bytes (the order of the text), read from the account's own text.
struct ByEmail(Arc<User>);

impl Borrow<[u8]> for ByEmail {
    fn borrow(&self) -> &[u8] {
        self.0.email_bytes()
    }
}

impl PartialEq for ByEmail {
    fn eq(&self, other: &Self) -> bool {
        self.0.email_bytes() == other.0.email_bytes()
    }
}

impl Eq for ByEmail {}

impl PartialOrd for ByEmail {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for ByEmail {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.email_bytes().cmp(other.0.email_bytes())
    }
}

/// The first eight bytes of `email` as a number that orders as the bytes do (shorter addresses padded with zeros,
/// which sort first, as a shorter prefix does).
fn email_prefix(text: &[u8]) -> u64 {
    let mut bytes = [0; 8];
    let n = text.len().min(8);
    bytes[..n].copy_from_slice(&text[..n]);
    u64::from_be_bytes(bytes)
}

impl UserIndex {
    pub fn with_capacity(users: usize) -> Self {
        Self { by_id: InlineMap::with_capacity(users), ..Self::default() }
    }

    pub fn get(&self, id: UserId) -> Option<Arc<User>> {
        self.by_id.get(&id)
    }

    /// Whether account `id` exists, without taking a reference to it: start-up asks this for every membership
    /// (every account may have one), and a reference would write to each account's counter, one more read from
    /// anywhere in memory each.
    pub fn contains(&self, id: UserId) -> bool {
        self.by_id.contains_key(&id)
    }

    /// Not before [`finish_load`](Self::finish_load) at start-up (the e-mail order is built there).
    pub fn by_email(&self, email: &Email) -> Option<Arc<User>> {
        read(&self.by_email_order).get(email.as_str().as_bytes()).map(|u| Arc::clone(&u.0))
    }

    /// The account whose username is `name` (normalised).
    pub fn by_username(&self, name: &Username) -> Option<Arc<User>> {
        let id = read(&self.usernames).by_name.get(name.as_str()).copied()?;
        self.get(id)
    }

    /// The account whose username looks like `name` (the same confusable skeleton), `name` itself included.
    pub fn username_look_alike(&self, name: &Username) -> Option<UserId> {
        self.username_skeleton_owner(&name.skeleton())
    }

    /// The account whose username has this confusable skeleton.
    pub fn username_skeleton_owner(&self, skeleton: &str) -> Option<UserId> {
        read(&self.usernames).by_skeleton.get(skeleton).copied()
    }

    /// Every user, ordered by creation time, then id.
    pub fn list(&self) -> Vec<Arc<User>> {
        read(&self.by_created).iter().map(|u| Arc::clone(&u.0)).collect()
    }

    /// Visits users in creation order (newest first with `descending`), starting after `after`, until `visit`
    /// returns `false`.
    pub fn scan(&self, after: Option<Place>, descending: bool, mut visit: impl FnMut(&Arc<User>) -> bool) {
        let users = read(&self.by_created);
        let range = match &after {
            None => users.range::<dyn Probe<Place>, _>(..),
            Some(place) if descending => {
                users.range::<dyn Probe<Place>, _>((Bound::Unbounded, Bound::Excluded(place as _)))
            }
            Some(place) => users.range::<dyn Probe<Place>, _>((Bound::Excluded(place as _), Bound::Unbounded)),
        };
        if descending {
            range.rev().map(|u| &u.0).take_while(|u| visit(u)).for_each(drop);
        } else {
            range.map(|u| &u.0).take_while(|u| visit(u)).for_each(drop);
        }
    }

    /// The users whose e-mail starts with `prefix` (normalised, lower-case), in e-mail order.
    pub fn with_email_prefix(&self, prefix: &str) -> Vec<Arc<User>> {
        let emails = read(&self.by_email_order);
        let from: (Bound<&[u8]>, Bound<&[u8]>) = (Bound::Included(prefix.as_bytes()), Bound::Unbounded);
        emails.range::<[u8], _>(from).take_while(|u| u.0.email().starts_with(prefix)).map(|u| u.0.clone()).collect()
    }

    /// Visits the members of `org` in creation order, starting after `after`, until `visit` returns `false`.
    pub fn scan_org(&self, org: OrgId, after: Option<Place>, mut visit: impl FnMut(&Arc<User>) -> bool) {
        let start: MemberKey = match after {
            Some(place) => (Some(org), place),
            None => (Some(org), (Timestamp::from_millis(i64::MIN), UserId::from_bytes([0; 16]))),
        };
        let first = if after.is_some() { Bound::Excluded(&start as _) } else { Bound::Included(&start as _) };
        let members = read(&self.by_org);
        members
            .range::<dyn Probe<MemberKey>, _>((first, Bound::Unbounded))
            .map(|m| &m.0)
            .take_while(|u| u.organization_id == Some(org) && visit(u))
            .for_each(drop);
    }

    /// How many accounts have `org` as their organization: counted in the view, no account copied out.
    pub fn member_count(&self, org: OrgId) -> usize {
        let mut count = 0;
        self.scan_org(org, None, |_| {
            count += 1;
            true
        });
        count
    }

    /// The members of `org`, in creation order.
    pub fn members_of(&self, org: OrgId) -> Vec<Arc<User>> {
        let mut members = Vec::new();
        self.scan_org(org, None, |u| {
            members.push(Arc::clone(u));
            true
        });
        members
    }

    /// Accounts whose ban has an end at or before `now`.
    pub fn bans_ended_by(&self, now: Timestamp) -> Vec<UserId> {
        read(&self.bans_ending).iter().take_while(|(end, _)| *end <= now).map(|(_, id)| *id).collect()
    }

    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    /// Whether any account has role `admin` (banned or not): the bootstrap variables act only when none has.
    pub fn any_admin(&self) -> bool {
        self.admins.load(Atomic::Relaxed) > 0
    }

    /// How many accounts still have a better-auth scrypt hash.
    pub fn legacy_hashes(&self) -> usize {
        self.legacy_hashes.load(Atomic::Relaxed)
    }

    /// The argon2 costs of the hashes on file, each once (as the parameter part of a PHC string).
    pub fn argon2_costs(&self) -> Vec<std::borrow::Cow<'static, str>> {
        self.costs.present()
    }

    /// Used at load and after a durable write; only the users actor writes.
    /// At start-up, before anything reads the index: the maps only. [`finish_load`](Self::finish_load) then builds
    /// the ordered views in one pass, sorting once instead of a million scattered tree inserts.
    #[cfg(test)]
    pub(crate) fn publish_loaded(&self, user: Arc<User>) {
        self.count(None, Some(&user));
        self.costs.count(user.password_hash(), true);
        self.by_id.insert(user.id, user);
    }

    /// `publish_loaded` (tests) for many at once (drained), their slots fetched ahead: how start-up publishes.
    pub(crate) fn publish_loaded_many(&self, users: &mut Vec<Arc<User>>) {
        for user in users.iter() {
            self.count(None, Some(user));
            self.costs.count(user.password_hash(), true);
        }
        self.by_id.insert_many(users.drain(..).map(|user| (user.id, user)));
    }

    /// Builds the ordered views of the accounts loaded, from the map (start-up builds them on two threads with
    /// [`build_apart`](Self::build_apart), [`build_views`](Self::build_views) and [`install`](Self::install)).
    #[cfg(test)]
    pub(crate) fn finish_load(&self) -> Result<(), UserId> {
        let users: Vec<Arc<User>> = self.by_id.values();
        let apart = Self::build_apart(&users)?;
        self.install(Self::build_views(&users), apart);
        Ok(())
    }

    /// The e-mail order and the members by organization of `users`, each in one sort. Two accounts with one e-mail
    /// (a store written wrongly) are refused: the id of one of them. The costliest of the views (their trees are
    /// built from accounts read in their order, from all over memory), so start-up builds them on a thread of
    /// their own while the other thread checks the sessions and memberships and then builds the other views.
    pub(crate) fn build_apart(users: &[Arc<User>]) -> Result<Apart, UserId> {
        // Sorted with each address's first eight bytes beside its pointer: most comparisons end there, without
        // reading two accounts and two addresses from all over memory (at 1,000,000 accounts the views took 1.0 s
        // of CPU with the addresses compared through the pointers, 0.7 s so).
        let mut by_email: Vec<(u64, ByEmail)> =
            users.iter().map(|u| (email_prefix(u.email_bytes()), ByEmail(Arc::clone(u)))).collect();
        by_email.sort_unstable();
        // Two equal addresses have equal first eight bytes: only those are read through the pointers (reading every
        // neighbour's address from wherever its account is took as long as the sort).
        if let Some(twins) = by_email.windows(2).find(|pair| pair[0].0 == pair[1].0 && pair[0].1 == pair[1].1) {
            return Err(twins[1].1.0.id);
        }
        let by_email: Vec<ByEmail> = by_email.into_iter().map(|(_, u)| u).collect();
        // The members: each organization's in creation order, then the organizations in order. Sorting them whole
        // compared a million pairs of accounts through their pointers, twenty times each; organizations are few.
        // Hashed as the other maps of ids are (foldhash, not SipHash): it is asked once per account.
        let mut by_org: HashMap<OrgId, Vec<Arc<User>>, KeyHash> = HashMap::default();
        for user in users {
            if let Some(org) = user.organization_id {
                by_org.entry(org).or_default().push(Arc::clone(user));
            }
        }
        let mut by_org: Vec<_> = by_org.into_iter().collect();
        by_org.sort_unstable_by_key(|(org, _)| *org);
        for (_, members) in &mut by_org {
            // Accounts read in id order are nearly in creation order already: a pass that finds them so.
            members.sort_by_key(|u| Created::key(u));
        }
        // Already sorted: built in one pass each.
        Ok(Apart {
            by_email_order: by_email.into_iter().collect(),
            by_org: by_org.into_iter().flat_map(|(_, members)| members).map(InOrder::new).collect(),
        })
    }

    /// The other ordered views of `users`, each in one sort (users read in id order are nearly in creation order
    /// already).
    pub(crate) fn build_views(users: &[Arc<User>]) -> Views {
        let by_created: BTreeSet<InOrder<Created>> = users.iter().cloned().map(InOrder::new).collect();
        Views {
            by_created,
            active_admins: users.iter().filter(|u| u.is_active_admin()).map(|u| u.id).collect(),
            bans_ending: users.iter().filter(|u| u.banned).filter_map(|u| Some((u.ban_expires()?, u.id))).collect(),
            usernames: {
                let mut names = Usernames::default();
                users.iter().filter(|u| u.username().is_some()).for_each(|u| names.add(u));
                names
            },
        }
    }

    /// Makes `views` and `apart` (of the accounts published with
    /// [`publish_loaded_many`](Self::publish_loaded_many)) the ordered views.
    pub(crate) fn install(&self, views: Views, apart: Apart) {
        *write(&self.by_created) = views.by_created;
        *write(&self.by_email_order) = apart.by_email_order;
        *write(&self.by_org) = apart.by_org;
        *write(&self.active_admins) = views.active_admins;
        *write(&self.bans_ending) = views.bans_ending;
        *write(&self.usernames) = views.usernames;
    }

    /// Whether account `id` exists and is not banned at `now`, without taking a reference to it (start-up asks
    /// this for every session while another thread builds the views from the same accounts).
    pub(crate) fn may_hold_session(&self, id: UserId, now: Timestamp) -> bool {
        self.by_id.get_with(&id, |u| !u.is_banned_at(now)).unwrap_or(false)
    }

    /// When account `id` was created, read as [`may_hold_session`](Self::may_hold_session) reads (start-up dates an
    /// account's primary membership with it when the store has none).
    pub(crate) fn loaded_created_at(&self, id: UserId) -> Option<Timestamp> {
        self.by_id.get_with(&id, |u| u.created_at)
    }

    pub(crate) fn publish(&self, user: Arc<User>) {
        let old = self.by_id.insert(user.id, Arc::clone(&user));
        self.count(old.as_deref(), Some(&user));
        if old.as_ref().is_none_or(|o| o.password_hash() != user.password_hash()) {
            if let Some(old) = &old {
                self.costs.count(old.password_hash(), false);
            }
            self.costs.count(user.password_hash(), true);
        }
        match &old {
            Some(old) => self.relist(old, user),
            None => self.list_in_views(user),
        }
    }

    /// Moves a changed account in the views. Most changes (a profile, a password, a session's account) leave every
    /// order's key as it was: the entry is then replaced where it is, one search per view, where taking it out and
    /// putting it back searched each view twice, and through the slower probe (a profile update's publication was
    /// 43 % of the users actor's time under the random-session load with 10 % update-user).
    fn relist(&self, old: &User, user: Arc<User>) {
        let moved = |same: bool| {
            #[cfg(test)]
            let _ = self.moves.fetch_add(usize::from(!same), Atomic::Relaxed);
            !same
        };
        if old.username() != user.username() {
            let mut names = write(&self.usernames);
            names.remove(old);
            names.add(&user);
        }
        let (was_member, member) = (old.organization_id.is_some(), user.organization_id.is_some());
        if was_member && moved(member && Member::key(old) == Member::key(&user)) {
            write(&self.by_org).remove(&Member::key(old) as &dyn Probe<MemberKey>);
        }
        if member {
            write(&self.by_org).replace(InOrder::new(Arc::clone(&user)));
        }
        if old.is_active_admin() && !user.is_active_admin() {
            write(&self.active_admins).remove(&old.id);
        }
        if user.is_active_admin() {
            write(&self.active_admins).insert(user.id);
        }
        // As `unlist` and `list_in_views` key an ending ban: any end on the old account, an end of a ban now.
        let (was_ending, ending) =
            (old.ban_expires().map(|end| (end, old.id)), user.ban_expires().filter(|_| user.banned));
        if let Some(key) = was_ending.filter(|&key| moved(ending.map(|end| (end, user.id)) == Some(key))) {
            write(&self.bans_ending).remove(&key);
        }
        if let Some(end) = ending {
            write(&self.bans_ending).insert((end, user.id));
        }
        if moved(Created::key(old) == Created::key(&user)) {
            write(&self.by_created).remove(&Created::key(old) as &dyn Probe<Place>);
        }
        write(&self.by_created).replace(InOrder::new(Arc::clone(&user)));
        if moved(old.email_bytes() == user.email_bytes()) {
            write(&self.by_email_order).remove(old.email_bytes());
        }
        write(&self.by_email_order).replace(ByEmail(user));
    }

    /// `replace`, not `insert`: an entry equal in order (the same account, unchanged in that order) must still
    /// point to the new version of the account.
    fn list_in_views(&self, user: Arc<User>) {
        if user.username().is_some() {
            write(&self.usernames).add(&user);
        }
        if user.organization_id.is_some() {
            write(&self.by_org).replace(InOrder::new(Arc::clone(&user)));
        }
        if user.is_active_admin() {
            write(&self.active_admins).insert(user.id);
        }
        if let Some(end) = user.ban_expires().filter(|_| user.banned) {
            write(&self.bans_ending).insert((end, user.id));
        }
        write(&self.by_created).replace(InOrder::new(Arc::clone(&user)));
        write(&self.by_email_order).replace(ByEmail(user));
    }

    fn unlist(&self, user: &User) {
        if user.username().is_some() {
            write(&self.usernames).remove(user);
        }
        let place = Created::key(user);
        if user.organization_id.is_some() {
            write(&self.by_org).remove(&Member::key(user) as &dyn Probe<MemberKey>);
        }
        write(&self.active_admins).remove(&user.id);
        if let Some(end) = user.ban_expires() {
            write(&self.bans_ending).remove(&(end, user.id));
        }
        write(&self.by_created).remove(&place as &dyn Probe<Place>);
        write(&self.by_email_order).remove(user.email_bytes());
    }

    /// The counters, for `new` replacing `old` (either absent: an account added, or removed).
    fn count(&self, old: Option<&User>, new: Option<&User>) {
        let change = |counter: &AtomicUsize, has: fn(&User) -> bool| {
            let (before, after) = (old.is_some_and(has), new.is_some_and(has));
            match (before, after) {
                (false, true) => drop(counter.fetch_add(1, Atomic::Relaxed)),
                (true, false) => drop(counter.fetch_sub(1, Atomic::Relaxed)),
                _ => {}
            }
        };
        change(&self.legacy_hashes, User::has_legacy_hash);
        change(&self.admins, |u| u.role.is_admin());
    }

    /// After a durable deletion.
    pub(crate) fn remove(&self, id: UserId) {
        if let Some(user) = self.by_id.remove(&id) {
            self.count(Some(&user), None);
            self.costs.count(user.password_hash(), false);
            self.unlist(&user);
        }
    }

    pub(crate) fn active_admins(&self) -> Vec<UserId> {
        read(&self.active_admins).iter().copied().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{Name, Role, UserFields};

    fn user(email: &str, ms: i64) -> Arc<User> {
        Arc::new(User::from(UserFields {
            role: Role::admin(),
            ..User::fixture(email, Timestamp::from_millis(ms)).fields()
        }))
    }

    /// The map the session check reads keeps each account in its table: a 16-byte slot at a load of 3/4 after a
    /// load sized by `with_capacity` (~22 bytes; papaya, before, boxed each entry beside a table of pointers).
    #[test]
    fn a_loaded_account_costs_under_twenty_four_bytes_of_map() {
        let users: Vec<_> =
            (0..20_000).map(|n| Arc::new(User::fixture(&format!("u{n}@x.io"), Timestamp::from_millis(n)))).collect();
        let (index, bytes) = crate::alloc_count::bytes_in(|| {
            let index = UserIndex::with_capacity(users.len());
            for batch in users.chunks(256) {
                index.publish_loaded_many(&mut batch.to_vec());
            }
            index
        });
        let per_account = bytes / 20_000;
        assert!(per_account < 24, "{per_account} bytes of map per account");
        assert!(users.iter().all(|u| index.get(u.id).is_some_and(|found| Arc::ptr_eq(&found, u))));
    }

    #[test]
    fn the_ordered_views_follow_every_change() {
        let index = UserIndex::default();
        let (b, a, c) = (user("b@x.io", 1), user("a@x.io", 2), user("ab@y.io", 3));
        for u in [&b, &a, &c] {
            index.publish(Arc::clone(u));
        }
        let emails = |users: Vec<Arc<User>>| users.iter().map(|u| u.email().to_string()).collect::<Vec<_>>();
        assert_eq!(emails(index.list()), ["b@x.io", "a@x.io", "ab@y.io"]);
        assert_eq!(emails(index.with_email_prefix("a")), ["a@x.io", "ab@y.io"]);
        assert_eq!(emails(index.with_email_prefix("c")), Vec::<String>::new());

        let renamed = Arc::new(User::from(UserFields { name: Name::parse("M").unwrap(), ..a.fields() }));
        index.publish(Arc::clone(&renamed));
        assert_eq!(index.list()[1].name(), "M", "a change replaces, never duplicates");
        assert_eq!(index.with_email_prefix("a@").len(), 1);

        let mut seen = Vec::new();
        index.scan(Some((b.created_at, b.id)), false, |u| {
            seen.push(u.email().to_string());
            true
        });
        assert_eq!(seen, ["a@x.io", "ab@y.io"]);
        seen.clear();
        index.scan(Some((c.created_at, c.id)), true, |u| {
            seen.push(u.email().to_string());
            seen.is_empty()
        });
        assert_eq!(seen, ["a@x.io"], "newest first, stopping when told");

        assert!(index.contains(a.id));
        index.remove(a.id);
        assert!(!index.contains(a.id) && index.contains(b.id));
        assert_eq!(emails(index.list()), ["b@x.io", "ab@y.io"]);
        assert_eq!(emails(index.with_email_prefix("a")), ["ab@y.io"]);
    }

    /// A change that keeps every order's key (a new name, a new picture) replaces the account's entries in place;
    /// one that changes a key (a new address) moves that view's entry, and only that one.
    #[test]
    fn a_change_that_keeps_the_orders_replaces_in_place() {
        let index = UserIndex::default();
        let org = OrgId::new();
        let ending = Timestamp::from_millis(50);
        let a = Arc::new(User::from(UserFields { organization_id: Some(org), ..user("a@x.io", 1).fields() }));
        let banned =
            Arc::new(User::from(UserFields { banned: true, ban_expires: Some(ending), ..user("b@x.io", 2).fields() }));
        index.publish(Arc::clone(&a));
        index.publish(Arc::clone(&banned));
        let renamed = Arc::new(User::from(UserFields { name: Name::parse("A2").unwrap(), ..a.fields() }));
        index.publish(Arc::clone(&renamed));
        index.publish(Arc::new(User::from(UserFields { name: Name::parse("B2").unwrap(), ..banned.fields() })));
        assert_eq!(index.moves.load(Atomic::Relaxed), 0, "a rename moved an entry");
        assert_eq!(index.members_of(org)[0].name(), "A2");
        assert_eq!(index.list()[0].name(), "A2");
        assert_eq!(index.by_email(&a.email_address()).map(|u| u.name().to_string()), Some("A2".into()));
        assert_eq!(index.bans_ended_by(ending), [banned.id]);

        let moved = Arc::new(User::from(UserFields { email: Email::parse("z@x.io").unwrap(), ..renamed.fields() }));
        index.publish(Arc::clone(&moved));
        assert_eq!(index.moves.load(Atomic::Relaxed), 1, "a new address moves the e-mail order's entry alone");
        assert!(index.by_email(&a.email_address()).is_none());
        assert_eq!(index.with_email_prefix("").len(), 2);
    }

    /// Whether an administrator exists is counted as accounts change, not looked for among them.
    #[test]
    fn whether_an_administrator_exists_follows_the_accounts() {
        let index = UserIndex::default();
        let plain = Arc::new(User::fixture("p@x.io", Timestamp::from_millis(1)));
        index.publish_loaded_many(&mut vec![Arc::clone(&plain)]);
        assert!(!index.any_admin());
        let admin = user("a@x.io", 2);
        index.publish_loaded_many(&mut vec![Arc::clone(&admin)]);
        assert!(index.any_admin(), "loaded");
        index.publish(Arc::new(User::from(UserFields { banned: true, ..admin.fields() })));
        assert!(index.any_admin(), "a banned administrator's account is still one");
        index.publish(Arc::new(User::from(UserFields { role: plain.fields().role, ..admin.fields() })));
        assert!(!index.any_admin(), "the role taken away");
        index.publish(Arc::clone(&admin));
        assert!(index.any_admin(), "given back");
        index.remove(admin.id);
        assert!(!index.any_admin(), "removed");
        index.remove(plain.id);
        assert!(!index.any_admin());
    }

    #[test]
    fn members_admins_and_ending_bans_are_kept_as_they_change() {
        let index = UserIndex::default();
        let (org, other) = (OrgId::new(), OrgId::new());
        let (x, y) = (user("x@x.io", 1), user("y@x.io", 2));
        index.publish(Arc::new(User::from(UserFields { organization_id: Some(org), ..y.fields() })));
        index.publish(Arc::new(User::from(UserFields { organization_id: Some(org), ..x.fields() })));
        let ids = |users: Vec<Arc<User>>| users.iter().map(|u| u.id).collect::<Vec<_>>();
        assert_eq!(ids(index.members_of(org)), [x.id, y.id], "in creation order");
        assert_eq!(index.member_count(org), 2);
        assert_eq!(index.active_admins().len(), 2);

        let end = Timestamp::from_millis(50);
        let banned =
            User::from(UserFields { banned: true, ban_expires: Some(end), organization_id: Some(other), ..x.fields() });
        index.publish(Arc::new(banned));
        assert_eq!(ids(index.members_of(org)), [y.id], "moved out");
        assert_eq!((index.member_count(org), index.member_count(other)), (1, 1));
        let renamed =
            User::from(UserFields { name: Name::parse("Y2").unwrap(), organization_id: Some(org), ..y.fields() });
        index.publish(Arc::new(renamed));
        assert_eq!(index.members_of(org)[0].name(), "Y2", "a member's entry is the account as it is now");
        assert_eq!(ids(index.members_of(other)), [x.id]);
        assert_eq!(index.active_admins(), [y.id], "a banned administrator is not an active one");
        assert_eq!(index.bans_ended_by(Timestamp::from_millis(49)), Vec::<UserId>::new());
        assert_eq!(index.bans_ended_by(end), [x.id]);
        index.publish(Arc::clone(&x));
        assert_eq!(index.bans_ended_by(end), Vec::<UserId>::new(), "lifted");
        index.remove(y.id);
        assert!(index.members_of(org).is_empty());
        assert_eq!(index.member_count(org), 0);
        assert_eq!(index.active_admins(), [x.id]);
    }

    #[test]
    fn a_bulk_load_builds_the_same_views_as_one_publish_at_a_time() {
        let org = OrgId::new();
        let users = [
            user("c@x.io", 3),
            Arc::new(User::from(UserFields { organization_id: Some(org), ..user("a@x.io", 1).fields() })),
            Arc::new(User::from(UserFields {
                banned: true,
                ban_expires: Some(Timestamp::from_millis(9)),
                ..user("b@x.io", 2).fields()
            })),
        ];
        let (one_by_one, bulk) = (UserIndex::default(), UserIndex::default());
        for u in &users {
            one_by_one.publish(Arc::clone(u));
            bulk.publish_loaded(Arc::clone(u));
        }
        bulk.finish_load().unwrap();
        let ids = |v: Vec<Arc<User>>| v.iter().map(|u| u.id).collect::<Vec<_>>();
        for index in [&one_by_one, &bulk] {
            assert_eq!(ids(index.list()), [users[1].id, users[2].id, users[0].id]);
            assert_eq!(ids(index.with_email_prefix("")), [users[1].id, users[2].id, users[0].id]);
            assert_eq!(ids(index.members_of(org)), [users[1].id]);
            let mut admins = index.active_admins();
            admins.sort();
            let mut want = vec![users[0].id, users[1].id];
            want.sort();
            assert_eq!(admins, want);
            assert_eq!(index.bans_ended_by(Timestamp::from_millis(9)), [users[2].id]);
            assert_eq!(index.by_email(&users[2].email_address()).map(|u| u.id), Some(users[2].id));
        }
    }

    #[test]
    fn the_email_prefix_orders_as_the_addresses_do() {
        let emails: Vec<Email> = ["abcdefgh@x.io", "a@x.io", "abcdefg@x.io", "b@x.io", "abcdefghi@x.io", "ab@x.io"]
            .into_iter()
            .map(|e| Email::parse(e).unwrap())
            .collect();
        let mut by_text: Vec<&str> = emails.iter().map(Email::as_str).collect();
        by_text.sort_unstable();
        let mut by_prefix: Vec<(u64, &str)> =
            emails.iter().map(|e| (email_prefix(e.as_str().as_bytes()), e.as_str())).collect();
        by_prefix.sort_unstable();
        assert_eq!(by_prefix.into_iter().map(|(_, e)| e).collect::<Vec<_>>(), by_text);
    }

    #[test]
    fn a_bulk_load_lists_each_organizations_members_in_creation_order() {
        let (a, b) = (OrgId::new(), OrgId::new());
        // Given in neither creation nor organization order, with one account in none.
        let users: Vec<Arc<User>> = [(5, Some(b)), (2, Some(a)), (9, Some(a)), (1, None), (3, Some(b)), (4, Some(a))]
            .into_iter()
            .map(|(ms, org)| {
                Arc::new(User::from(UserFields { organization_id: org, ..user(&format!("u{ms}@x.io"), ms).fields() }))
            })
            .collect();
        let (one_by_one, bulk) = (UserIndex::default(), UserIndex::default());
        for u in &users {
            one_by_one.publish(Arc::clone(u));
            bulk.publish_loaded(Arc::clone(u));
        }
        bulk.finish_load().unwrap();
        let created = |members: Vec<Arc<User>>| members.iter().map(|u| u.created_at.as_millis()).collect::<Vec<_>>();
        for index in [&one_by_one, &bulk] {
            assert_eq!(created(index.members_of(a)), [2, 4, 9]);
            assert_eq!(created(index.members_of(b)), [3, 5]);
        }
    }

    #[test]
    fn the_lookup_by_email_is_the_email_order() {
        let index = UserIndex::default();
        let (a, b) = (user("a@x.io", 1), user("b@x.io", 2));
        index.publish(Arc::clone(&a));
        index.publish(Arc::clone(&b));
        assert_eq!(index.by_email(&a.email_address()).map(|u| u.id), Some(a.id));
        assert!(index.by_email(&Email::parse("c@x.io").unwrap()).is_none());

        let moved = Arc::new(User::from(UserFields { email: Email::parse("z@x.io").unwrap(), ..a.fields() }));
        index.publish(Arc::clone(&moved));
        assert!(index.by_email(&a.email_address()).is_none(), "the old address no longer finds the account");
        assert_eq!(index.by_email(&moved.email_address()).map(|u| u.id), Some(a.id));
        index.remove(a.id);
        assert!(index.by_email(&moved.email_address()).is_none());
        assert_eq!(index.by_email(&b.email_address()).map(|u| u.id), Some(b.id));
    }

    #[test]
    fn a_load_with_two_accounts_sharing_an_email_is_refused() {
        let index = UserIndex::default();
        let (a, b, c) = (user("a@x.io", 1), user("b@x.io", 2), user("a@x.io", 3));
        for u in [&a, &b, &c] {
            index.publish_loaded(Arc::clone(u));
        }
        let twin = index.finish_load().unwrap_err();
        assert!(twin == a.id || twin == c.id, "names one of the two");

        let fine = UserIndex::default();
        fine.publish_loaded(a);
        fine.publish_loaded(b);
        assert_eq!(fine.finish_load(), Ok(()));
    }
}
