//! The read index of users: by id, and by normalised e-mail. Only the users actor writes it.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::domain::{Email, User, UserId};

#[derive(Default)]
pub struct UserIndex {
    by_id: papaya::HashMap<UserId, Arc<User>>,
    by_email: papaya::HashMap<Email, UserId>,
    /// Accounts whose password hash is still a better-auth scrypt hash (imported, not yet signed in since).
    legacy_hashes: AtomicUsize,
}

impl UserIndex {
    pub fn get(&self, id: UserId) -> Option<Arc<User>> {
        self.by_id.pin().get(&id).cloned()
    }

    pub fn by_email(&self, email: &Email) -> Option<Arc<User>> {
        let id = *self.by_email.pin().get(email)?;
        self.get(id)
    }

    /// Every user, ordered by creation time, then id.
    pub fn list(&self) -> Vec<Arc<User>> {
        let mut users: Vec<Arc<User>> = self.by_id.pin().values().cloned().collect();
        users.sort_unstable_by_key(|u| (u.created_at, u.id));
        users
    }

    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    /// Whether any account has role `admin` (banned or not): the bootstrap variables act only when none has.
    pub fn any_admin(&self) -> bool {
        self.by_id.pin().values().any(|u| u.role.is_admin())
    }

    /// How many accounts still have a better-auth scrypt hash.
    pub fn legacy_hashes(&self) -> usize {
        self.legacy_hashes.load(Ordering::Relaxed)
    }

    /// Used at load and after a durable write; only the users actor writes.
    pub(crate) fn publish(&self, user: Arc<User>) {
        let legacy = user.has_legacy_hash();
        self.by_email.pin().insert(user.email.clone(), user.id);
        let by_id = self.by_id.pin();
        let was_legacy = by_id.insert(user.id, user).is_some_and(|old| old.has_legacy_hash());
        self.count_legacy(was_legacy, legacy);
    }

    /// After a durable deletion.
    pub(crate) fn remove(&self, id: UserId) {
        if let Some(user) = self.by_id.pin().remove(&id) {
            self.by_email.pin().remove(&user.email);
            self.count_legacy(user.has_legacy_hash(), false);
        }
    }

    fn count_legacy(&self, before: bool, after: bool) {
        match (before, after) {
            (false, true) => drop(self.legacy_hashes.fetch_add(1, Ordering::Relaxed)),
            (true, false) => drop(self.legacy_hashes.fetch_sub(1, Ordering::Relaxed)),
            _ => {}
        }
    }

    pub(super) fn active_admins(&self) -> Vec<UserId> {
        self.by_id.pin().values().filter(|u| u.is_active_admin()).map(|u| u.id).collect()
    }
}
