//! The memberships' and invitations' read index: by organization (in joining order, for `list-members`' pages),
//! by user (for `organization/list`) and by id; invitations by id, by organization and by e-mail.
//!
//! One lock over all of it: the users actor publishes a batch's memberships after its commit, and every read is a
//! few look-ups or one page of an organization's [`Roster`], which costs the page, not the organization.
//!
//! Every account may be a member (an account's `organizationId` is a membership, so a store seeded or imported
//! with one per account has as many memberships as accounts), so the views hold little beside each membership: by
//! user, an ordered map whose range for one user is their memberships; by organization, its roster; by id, a map to
//! the membership. Before, a map from user to a map of their organizations cost ~260 bytes a membership (an outer
//! entry and slot, and an inner table of its own for what is, for nearly every account, one membership), and the
//! map by id ~100 more (its entry was the (organization, user) to look up in the other), ~500 bytes in all: at
//! 10,000,000 accounts, 4 GB of the 11 GB resident.

use std::borrow::Borrow;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::ops::Bound;
use std::sync::{Arc, RwLock};

use super::roster::Roster;
use crate::actors::{KeyHash, read, write};
use crate::domain::{Email, Invitation, InvitationId, MemberId, Membership, OrgId, Timestamp, UserId};

#[derive(Default)]
pub struct MemberIndex {
    inner: RwLock<Inner>,
}

#[derive(Default)]
struct Inner {
    /// Each organization's members in joining order.
    by_org: HashMap<OrgId, Roster>,
    /// Every membership by (user, organization): one user's memberships are a range of it. A set of pointers
    /// ordered by the memberships' own (user, organization), not a map from a copy of that key: 8 bytes an entry
    /// instead of 40.
    by_user: BTreeSet<ByUser>,
    /// Every membership by its id. A hash set, not an ordered set of pointers to the memberships: ids are random, so
    /// each comparison of a lookup in such a set would read another membership from anywhere in memory (start-up
    /// inserts every membership). A set of pointers hashed by the membership's id, not a map from id to pointer:
    /// 8 bytes a slot instead of 24 (the id is in the membership already).
    by_id: HashSet<ById, KeyHash>,
    invitations: HashMap<InvitationId, Arc<Invitation>>,
    invitations_by_org: HashMap<OrgId, BTreeSet<(Timestamp, InvitationId)>>,
    invitations_by_email: HashMap<Email, BTreeSet<(Timestamp, InvitationId)>>,
}

/// A membership in [`Inner::by_id`]: hashed and compared by its id, looked up by an id.
struct ById(Arc<Membership>);

impl Hash for ById {
    fn hash<H: Hasher>(&self, state: &mut H) {
        // As `MemberId` hashes, so that a lookup by a bare id finds it.
        self.0.id.hash(state);
    }
}

impl PartialEq for ById {
    fn eq(&self, other: &Self) -> bool {
        self.0.id == other.0.id
    }
}

impl Eq for ById {}

impl Borrow<MemberId> for ById {
    fn borrow(&self) -> &MemberId {
        &self.0.id
    }
}

/// A membership's key in [`Inner::by_user`].
type UserKey = (UserId, OrgId);

/// A membership in [`Inner::by_user`]: ordered by its (user, organization), read from the membership, and looked
/// up by a bare key (both borrow as a [`Keyed`]).
struct ByUser(Arc<Membership>);

/// What [`Inner::by_user`] is searched with: an entry, or a bare key.
trait Keyed {
    fn key(&self) -> UserKey;
}

impl Keyed for UserKey {
    fn key(&self) -> UserKey {
        *self
    }
}

impl Keyed for ByUser {
    fn key(&self) -> UserKey {
        (self.0.user, self.0.org)
    }
}

impl<'a> Borrow<dyn Keyed + 'a> for ByUser {
    fn borrow(&self) -> &(dyn Keyed + 'a) {
        self
    }
}

impl PartialEq for dyn Keyed + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl Eq for dyn Keyed + '_ {}

impl PartialOrd for dyn Keyed + '_ {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for dyn Keyed + '_ {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.key().cmp(&other.key())
    }
}

impl PartialEq for ByUser {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl Eq for ByUser {}

impl PartialOrd for ByUser {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for ByUser {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.key().cmp(&other.key())
    }
}

/// `user`'s entries in [`Inner::by_user`].
fn of(set: &BTreeSet<ByUser>, user: UserId) -> impl Iterator<Item = &Arc<Membership>> {
    let (first, last): (UserKey, UserKey) =
        ((user, OrgId::from_bytes([0; 16])), (user, OrgId::from_bytes([u8::MAX; 16])));
    set.range::<dyn Keyed, _>((Bound::Included(&first as &dyn Keyed), Bound::Included(&last as &dyn Keyed)))
        .map(|m| &m.0)
}

impl MemberIndex {
    /// `user`'s membership of `org`, if any.
    pub fn get(&self, org: OrgId, user: UserId) -> Option<Arc<Membership>> {
        read(&self.inner).by_user.get(&(user, org) as &dyn Keyed).map(|m| Arc::clone(&m.0))
    }

    pub fn by_id(&self, id: MemberId) -> Option<Arc<Membership>> {
        read(&self.inner).by_id.get(&id).map(|m| Arc::clone(&m.0))
    }

    /// Every membership of `user`, oldest first.
    pub fn of_user(&self, user: UserId) -> Vec<Arc<Membership>> {
        let mut all: Vec<Arc<Membership>> = of(&read(&self.inner).by_user, user).cloned().collect();
        all.sort_unstable_by_key(|m| (m.created_at, m.org));
        all
    }

    /// How many members `org` has.
    pub fn count(&self, org: OrgId) -> usize {
        read(&self.inner).by_org.get(&org).map_or(0, Roster::len)
    }

    /// How many of `org`'s members are owners.
    pub fn owners(&self, org: OrgId) -> usize {
        read(&self.inner).by_org.get(&org).map_or(0, Roster::owners)
    }

    /// One page of `org`'s members in joining order, and how many it has.
    pub fn page(&self, org: OrgId, offset: usize, limit: usize) -> (Vec<Arc<Membership>>, usize) {
        let inner = read(&self.inner);
        let Some(members) = inner.by_org.get(&org) else { return (Vec::new(), 0) };
        (members.page(offset, limit), members.len())
    }

    /// Every member of `org`, in joining order.
    pub fn members_of(&self, org: OrgId) -> Vec<Arc<Membership>> {
        self.page(org, 0, usize::MAX).0
    }

    pub fn invitation(&self, id: InvitationId) -> Option<Arc<Invitation>> {
        read(&self.inner).invitations.get(&id).cloned()
    }

    /// Every invitation of `org`, oldest first.
    pub fn invitations_of(&self, org: OrgId) -> Vec<Arc<Invitation>> {
        let inner = read(&self.inner);
        let ids = inner.invitations_by_org.get(&org);
        ids.into_iter().flatten().filter_map(|(_, id)| inner.invitations.get(id).cloned()).collect()
    }

    /// Every invitation sent to `email`, oldest first.
    pub fn invitations_for(&self, email: &Email) -> Vec<Arc<Invitation>> {
        let inner = read(&self.inner);
        let ids = inner.invitations_by_email.get(email);
        ids.into_iter().flatten().filter_map(|(_, id)| inner.invitations.get(id).cloned()).collect()
    }

    pub(crate) fn publish_member(&self, member: Arc<Membership>) {
        let mut inner = write(&self.inner);
        if let Some(ByUser(old)) = inner.by_user.replace(ByUser(Arc::clone(&member)))
            && let Some(list) = inner.by_org.get_mut(&old.org)
        {
            list.remove(&(old.created_at, old.user));
        }
        // `replace`, not `insert`: a set keeps the entry it has, and that is the old version.
        inner.by_id.replace(ById(Arc::clone(&member)));
        inner.by_org.entry(member.org).or_default().insert(member);
    }

    /// Start-up: every membership at once, in (user, organization) order, none twice, into an empty index. The
    /// ordered map is built in one pass with full nodes and the rosters from sorted runs, instead of a membership at
    /// a time into nodes and runs that split half empty; the set by id is sized once.
    pub(crate) fn load(&self, members: Vec<((UserId, OrgId), Arc<Membership>)>) {
        let mut inner = write(&self.inner);
        if !(inner.by_user.is_empty() && members.is_sorted_by(|a, b| a.0 < b.0)) {
            drop(inner);
            members.into_iter().for_each(|(_, m)| self.publish_member(m));
            return;
        }
        // Each organization's members, by the key beside each (no read of the membership), in a map hashed as the
        // other maps of ids are (10,000,000 look-ups in a map of a hundred organizations: SipHash was most of it).
        let mut by_org: HashMap<OrgId, Vec<Arc<Membership>>, KeyHash> = HashMap::default();
        for ((_, org), m) in &members {
            by_org.entry(*org).or_default().push(Arc::clone(m));
        }
        // The keys are not needed any more: the list shrinks to its pointers (8 bytes a membership, not 40) before
        // the views are allocated beside it.
        let mut by_user: Vec<ByUser> = members.into_iter().map(|(_, m)| ByUser(m)).collect();
        by_user.shrink_to_fit();
        inner.by_id.reserve(by_user.len());
        let mut rosters = HashMap::with_capacity(by_org.len());
        for (org, members) in by_org {
            // Indexed by id one organization at a time: in the order the store handed them over (by organization,
            // then user), so in the order they were allocated, where the list by user reads them from all over.
            for m in &members {
                inner.by_id.insert(ById(Arc::clone(m)));
            }
            rosters.insert(org, Roster::from_members(members));
        }
        inner.by_org = rosters;
        // Sorted already: `collect` finds it so and builds the tree bottom up.
        inner.by_user = by_user.into_iter().collect();
    }

    pub(crate) fn remove_member(&self, org: OrgId, user: UserId) {
        let mut inner = write(&self.inner);
        let Some(ByUser(old)) = inner.by_user.take(&(user, org) as &dyn Keyed) else { return };
        inner.by_id.remove(&old.id);
        if let Some(list) = inner.by_org.get_mut(&org) {
            list.remove(&(old.created_at, old.user));
            if list.is_empty() {
                inner.by_org.remove(&org);
            }
        }
    }

    pub(crate) fn publish_invitation(&self, invitation: Arc<Invitation>) {
        let mut inner = write(&self.inner);
        let key = (invitation.created_at, invitation.id);
        if let Some(old) = inner.invitations.insert(invitation.id, Arc::clone(&invitation)) {
            Self::unlist(&mut inner, &old);
        }
        inner.invitations_by_org.entry(invitation.org).or_default().insert(key);
        inner.invitations_by_email.entry(invitation.email.clone()).or_default().insert(key);
    }

    pub(crate) fn remove_invitation(&self, id: InvitationId) {
        let mut inner = write(&self.inner);
        if let Some(old) = inner.invitations.remove(&id) {
            Self::unlist(&mut inner, &old);
        }
    }

    fn unlist(inner: &mut Inner, old: &Invitation) {
        let key = (old.created_at, old.id);
        if let Some(set) = inner.invitations_by_org.get_mut(&old.org) {
            set.remove(&key);
            if set.is_empty() {
                inner.invitations_by_org.remove(&old.org);
            }
        }
        if let Some(set) = inner.invitations_by_email.get_mut(&old.email) {
            set.remove(&key);
            if set.is_empty() {
                inner.invitations_by_email.remove(&old.email);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::OrgRole;

    #[test]
    fn memberships_by_org_user_and_id_follow_changes() {
        let index = MemberIndex::default();
        let (org, other) = (OrgId::new(), OrgId::new());
        let (a, b) = (UserId::new(), UserId::new());
        index.publish_member(Membership::fixture(org, a, 2, OrgRole::Owner));
        index.publish_member(Membership::fixture(org, b, 1, OrgRole::Member));
        index.publish_member(Membership::fixture(other, a, 3, OrgRole::Member));
        assert_eq!(index.page(org, 0, 10).0.iter().map(|m| m.user).collect::<Vec<_>>(), vec![b, a]);
        assert_eq!((index.count(org), index.owners(org)), (2, 1));
        index.publish_member(Membership::fixture(org, a, 2, OrgRole::Admin));
        assert_eq!((index.count(org), index.owners(org)), (2, 0), "a role change replaces, never adds");
        let by_id = index.by_id(MemberId::of(org, a)).unwrap();
        assert!(by_id.roles.has(OrgRole::Admin), "the id finds the new version, not the old one");
        assert_eq!(index.by_id(MemberId::of(org, b)).unwrap().user, b);
        index.remove_member(org, b);
        assert!(index.get(org, b).is_none() && index.by_id(MemberId::of(org, b)).is_none());
        assert_eq!(index.of_user(a).len(), 2);
        assert_eq!(index.page(org, 1, 10), (Vec::new(), 1));
    }

    /// Every account may be a member (see the module's comment), so a membership costs its own allocation and a
    /// share of the views' nodes (its roster's run, the ordered map's node), never a table of its own: 10,000
    /// memberships are published with fewer allocations than memberships (a map from user to a map of
    /// organizations made one inner table each).
    #[test]
    fn a_membership_has_no_table_of_its_own() {
        let index = MemberIndex::default();
        let org = OrgId::new();
        let members: Vec<_> =
            (0..10_000).map(|n| Membership::fixture(org, UserId::new(), n, OrgRole::Member)).collect();
        let ((), allocations) = crate::alloc_count::allocations_in(|| {
            for m in &members {
                index.publish_member(Arc::clone(m));
            }
        });
        assert!(allocations < 10_000, "{allocations} allocations for 10,000 memberships");
        assert_eq!(index.count(org), 10_000);
        assert_eq!(index.get(org, members[1234].user).unwrap().user, members[1234].user);
        assert!(index.get(OrgId::new(), members[1234].user).is_none());
    }

    fn sorted(members: &[Arc<Membership>]) -> Vec<((UserId, OrgId), Arc<Membership>)> {
        let mut all: Vec<_> = members.iter().map(|m| ((m.user, m.org), Arc::clone(m))).collect();
        all.sort_by_key(|(key, _)| *key);
        all
    }

    /// What start-up builds at once answers as what memberships published one at a time build.
    #[test]
    fn a_load_answers_as_memberships_published_one_by_one() {
        let (orgs, users) = ([OrgId::new(), OrgId::new()], [UserId::new(), UserId::new(), UserId::new()]);
        let mut members = Vec::new();
        for (n, user) in users.iter().enumerate() {
            members.push(Membership::fixture(orgs[0], *user, 10 - n as i64, OrgRole::Member));
        }
        members.push(Membership::fixture(orgs[1], users[1], 1, OrgRole::Owner));
        let (loaded, published) = (MemberIndex::default(), MemberIndex::default());
        loaded.load(sorted(&members));
        members.iter().for_each(|m| published.publish_member(Arc::clone(m)));
        for index in [&loaded, &published] {
            let joined: Vec<UserId> = users.iter().rev().copied().collect();
            assert_eq!(index.page(orgs[0], 0, 10).0.iter().map(|m| m.user).collect::<Vec<_>>(), joined);
            assert_eq!((index.count(orgs[1]), index.owners(orgs[1]), index.owners(orgs[0])), (1, 1, 0));
            assert_eq!(index.of_user(users[1]).len(), 2);
            assert_eq!(index.by_id(MemberId::of(orgs[1], users[1])).unwrap().user, users[1]);
            assert!(index.by_id(MemberId::of(orgs[1], users[0])).is_none());
        }
        loaded.remove_member(orgs[0], users[0]);
        loaded.publish_member(Membership::fixture(orgs[1], users[2], 20, OrgRole::Admin));
        assert_eq!((loaded.count(orgs[0]), loaded.count(orgs[1])), (2, 2), "a loaded index takes changes");
    }

    /// The guard on a membership's bytes in the index at start-up (beside the membership's own allocation): its
    /// entry in the ordered set by user (a pointer, in full nodes: it was a 40-byte key and pointer, 89 bytes in
    /// all), in the set by id (8 bytes and a control byte in a table at most 7/8 full) and in its roster (a pointer,
    /// runs without spare room: it was 32 bytes with a copy of the member's place, 57 in all): about 33 bytes.
    #[test]
    fn a_loaded_membership_costs_under_forty_bytes_of_index() {
        let org = OrgId::new();
        let members: Vec<_> =
            (0..20_000).map(|n| Membership::fixture(org, UserId::new(), n, OrgRole::Member)).collect();
        let members = sorted(&members);
        // The list handed over becomes the ordered map's input, freed once it is built: its bytes were the index's.
        let handed = members.capacity() * std::mem::size_of::<((UserId, OrgId), Arc<Membership>)>();
        let index = MemberIndex::default();
        let ((), bytes) = crate::alloc_count::bytes_in(|| index.load(members));
        let per_member = (bytes + handed as i64) / 20_000;
        assert!(per_member < 40, "{per_member} bytes of index per membership");
        assert_eq!(index.count(org), 20_000);
    }

    #[test]
    fn an_entry_by_id_or_by_user_is_one_pointer() {
        assert_eq!(std::mem::size_of::<ById>(), 8);
        assert_eq!(std::mem::size_of::<ByUser>(), 8);
    }
}
