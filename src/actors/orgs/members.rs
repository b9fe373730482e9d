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

use std::collections::{BTreeMap, BTreeSet, HashMap};
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
    /// Every membership by (user, organization): one user's memberships are a range of it.
    by_user: BTreeMap<(UserId, OrgId), Arc<Membership>>,
    /// Every membership by its id. A hash map, not an ordered set of pointers to the memberships: ids are random, so
    /// each comparison of a lookup in such a set would read another membership from anywhere in memory (start-up
    /// inserts every membership).
    by_id: HashMap<MemberId, Arc<Membership>, KeyHash>,
    invitations: HashMap<InvitationId, Arc<Invitation>>,
    invitations_by_org: HashMap<OrgId, BTreeSet<(Timestamp, InvitationId)>>,
    invitations_by_email: HashMap<Email, BTreeSet<(Timestamp, InvitationId)>>,
}

/// The range of `user`'s entries in [`Inner::by_user`].
fn of(user: UserId) -> std::ops::RangeInclusive<(UserId, OrgId)> {
    (user, OrgId::from_bytes([0; 16]))..=(user, OrgId::from_bytes([u8::MAX; 16]))
}

impl MemberIndex {
    /// `user`'s membership of `org`, if any.
    pub fn get(&self, org: OrgId, user: UserId) -> Option<Arc<Membership>> {
        read(&self.inner).by_user.get(&(user, org)).cloned()
    }

    /// Whether `user` is a member of `org` (start-up asks this for every account with an organization).
    pub fn contains(&self, org: OrgId, user: UserId) -> bool {
        read(&self.inner).by_user.contains_key(&(user, org))
    }

    pub fn by_id(&self, id: MemberId) -> Option<Arc<Membership>> {
        read(&self.inner).by_id.get(&id).cloned()
    }

    /// Every membership of `user`, oldest first.
    pub fn of_user(&self, user: UserId) -> Vec<Arc<Membership>> {
        let mut all: Vec<Arc<Membership>> = read(&self.inner).by_user.range(of(user)).map(|(_, m)| m.clone()).collect();
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
        if let Some(old) = inner.by_user.insert((member.user, member.org), Arc::clone(&member))
            && let Some(list) = inner.by_org.get_mut(&old.org)
        {
            list.remove(&(old.created_at, old.user));
        }
        inner.by_id.insert(member.id, Arc::clone(&member));
        inner.by_org.entry(member.org).or_default().insert(member);
    }

    pub(crate) fn remove_member(&self, org: OrgId, user: UserId) {
        let mut inner = write(&self.inner);
        let Some(old) = inner.by_user.remove(&(user, org)) else { return };
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
        assert!(index.contains(org, members[1234].user) && !index.contains(OrgId::new(), members[1234].user));
    }
}
