//! The organizations' read index: by id, and by slug.

use std::sync::Arc;

use crate::domain::{OrgId, Organization, Slug};

/// Read index of organizations: by id, and by slug.
#[derive(Default)]
pub struct OrgIndex {
    by_id: papaya::HashMap<OrgId, Arc<Organization>>,
    by_slug: papaya::HashMap<Slug, OrgId>,
    /// Those that require single sign-on for their verified domains: a sign-in by password looks further only
    /// when there is one.
    requiring_sso: papaya::HashSet<OrgId>,
}

impl OrgIndex {
    pub fn get(&self, id: OrgId) -> Option<Arc<Organization>> {
        self.by_id.pin().get(&id).cloned()
    }

    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    pub fn by_slug(&self, slug: &Slug) -> Option<Arc<Organization>> {
        let id = *self.by_slug.pin().get(slug)?;
        self.get(id)
    }

    pub(crate) fn slug_taken(&self, slug: &Slug) -> bool {
        self.by_slug.pin().contains_key(slug)
    }

    /// Every organization, ordered by creation time, then id.
    pub fn list(&self) -> Vec<Arc<Organization>> {
        let mut orgs: Vec<Arc<Organization>> = self.by_id.pin().values().cloned().collect();
        orgs.sort_unstable_by_key(|o| (o.created_at, o.id));
        orgs
    }

    /// The organizations that require single sign-on for their verified domains.
    pub fn requiring_sso(&self) -> Vec<OrgId> {
        self.requiring_sso.pin().iter().copied().collect()
    }

    pub(crate) fn publish(&self, org: Arc<Organization>) {
        match org.require_sso {
            true => self.requiring_sso.pin().insert(org.id),
            false => self.requiring_sso.pin().remove(&org.id),
        };
        if let Some(old) = self.by_id.pin().insert(org.id, Arc::clone(&org))
            && old.slug != org.slug
        {
            self.by_slug.pin().remove(&old.slug);
        }
        self.by_slug.pin().insert(org.slug.clone(), org.id);
    }

    /// After a durable deletion.
    pub(crate) fn remove(&self, id: OrgId) {
        self.requiring_sso.pin().remove(&id);
        if let Some(old) = self.by_id.pin().remove(&id) {
            self.by_slug.pin().remove(&old.slug);
        }
    }
}
