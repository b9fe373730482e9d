//! The read index of users: by id, and by normalised e-mail. Only the users actor writes it.

use std::sync::Arc;

use crate::domain::{Email, User, UserId};

#[derive(Default)]
pub struct UserIndex {
    by_id: papaya::HashMap<UserId, Arc<User>>,
    by_email: papaya::HashMap<Email, UserId>,
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

    /// Used at load and after a durable write; only the users actor writes.
    pub(crate) fn publish(&self, user: Arc<User>) {
        self.by_email.pin().insert(user.email.clone(), user.id);
        self.by_id.pin().insert(user.id, user);
    }

    /// After a durable deletion.
    pub(crate) fn remove(&self, id: UserId) {
        if let Some(user) = self.by_id.pin().remove(&id) {
            self.by_email.pin().remove(&user.email);
        }
    }

    /// The ids of the users for which `keep` holds. A scan of every user.
    pub(crate) fn matching(&self, keep: impl Fn(&User) -> bool) -> Vec<UserId> {
        self.by_id.pin().values().filter(|u| keep(u)).map(|u| u.id).collect()
    }

    pub(super) fn active_admins(&self) -> Vec<UserId> {
        self.by_id.pin().values().filter(|u| u.is_active_admin()).map(|u| u.id).collect()
    }
}
