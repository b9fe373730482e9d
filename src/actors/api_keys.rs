//! The API keys' read index, kept by the sessions actor (which ends them with their owner's sessions): by the
//! SHA-256 of the secret for the session check (one lock-free read, as a session's), by id, and by owner.
//! Loaded at start, changed in the sessions actor's batches, and on several nodes from the change log.

use std::sync::Arc;

use crate::domain::{ApiKey, ApiKeyId, TokenHash, UserId};

#[derive(Default)]
pub struct ApiKeyIndex {
    by_hash: papaya::HashMap<TokenHash, Arc<ApiKey>, super::KeyHash>,
    by_id: papaya::HashMap<ApiKeyId, TokenHash, super::KeyHash>,
    by_user: papaya::HashMap<UserId, Arc<[ApiKeyId]>, super::KeyHash>,
}

impl ApiKeyIndex {
    /// The key whose secret hashes to `hash`.
    pub fn by_hash(&self, hash: &TokenHash) -> Option<Arc<ApiKey>> {
        self.by_hash.pin().get(hash).cloned()
    }

    pub fn get(&self, id: ApiKeyId) -> Option<Arc<ApiKey>> {
        let hash = *self.by_id.pin().get(&id)?;
        self.by_hash(&hash)
    }

    /// Every key of `user`, oldest first.
    pub fn of_user(&self, user: UserId) -> Vec<Arc<ApiKey>> {
        let ids = self.by_user.pin().get(&user).cloned();
        let mut found: Vec<Arc<ApiKey>> =
            ids.iter().flat_map(|ids| ids.iter()).filter_map(|id| self.get(*id)).collect();
        found.sort_by_key(|k| (k.created_at, k.id));
        found
    }

    /// The keys of every user in `users`.
    pub fn of_users(&self, users: &[UserId]) -> Vec<Arc<ApiKey>> {
        users.iter().flat_map(|u| self.of_user(*u)).collect()
    }

    /// Every key (the expiry sweep; keys are few next to sessions).
    pub fn all(&self) -> Vec<Arc<ApiKey>> {
        self.by_hash.pin().values().cloned().collect()
    }

    pub fn len(&self) -> usize {
        self.by_hash.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Only the sessions actor (and the start-up load before it) publishes: one writer, so read-modify-write of a
    /// user's list is safe. `None` removes `id`.
    pub(crate) fn publish(&self, id: ApiKeyId, key: Option<Arc<ApiKey>>) {
        let by_user = self.by_user.pin();
        if let Some(hash) = self.by_id.pin().remove(&id).copied()
            && let Some(old) = self.by_hash.pin().remove(&hash).cloned()
        {
            super::owner_lists::remove(&by_user, old.user_id, id);
        }
        if let Some(key) = key {
            super::owner_lists::add(&by_user, key.user_id, id);
            self.by_id.pin().insert(id, key.hash);
            self.by_hash.pin().insert(key.hash, key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Timestamp;
    use crate::domain::api_key::Usage;
    use std::sync::Mutex;

    fn key(user: UserId, hash: u8, at: i64) -> Arc<ApiKey> {
        Arc::new(ApiKey {
            id: ApiKeyId::new(),
            user_id: user,
            hash: [hash; 32],
            config_id: "default".into(),
            name: None,
            start: None,
            prefix: None,
            enabled: true,
            expires_at: None,
            created_at: Timestamp::from_millis(at),
            updated_at: Timestamp::from_millis(at),
            rate_limit_enabled: true,
            rate_limit_time_window_ms: None,
            rate_limit_max: None,
            refill_amount: None,
            refill_interval_ms: None,
            permissions: None,
            metadata: None,
            usage: Arc::new(Mutex::new(Usage::default())),
        })
    }

    #[test]
    fn a_key_is_found_by_hash_id_and_owner_until_removed() {
        let index = ApiKeyIndex::default();
        let (alice, bob) = (UserId::new(), UserId::new());
        let (a1, a2, b1) = (key(alice, 1, 1), key(alice, 2, 2), key(bob, 3, 3));
        for k in [&a1, &a2, &b1] {
            index.publish(k.id, Some(Arc::clone(k)));
        }
        assert_eq!(index.by_hash(&[2; 32]).unwrap().id, a2.id);
        assert_eq!(index.get(b1.id).unwrap().user_id, bob);
        assert_eq!(index.of_user(alice).iter().map(|k| k.id).collect::<Vec<_>>(), vec![a1.id, a2.id]);
        index.publish(a1.id, None);
        assert!(index.by_hash(&[1; 32]).is_none());
        assert!(index.get(a1.id).is_none());
        assert_eq!(index.of_user(alice).len(), 1);
        assert_eq!(index.len(), 2);
        // Republished (an update): still one entry under its owner.
        index.publish(a2.id, Some(Arc::clone(&a2)));
        assert_eq!(index.of_user(alice).len(), 1);
    }
}
