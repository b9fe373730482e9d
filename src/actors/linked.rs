//! Identities at other providers linked to accounts (src/oauth), and their read index, kept by the users actor:
//! by id, by (provider, subject) and by user. Loaded at start, changed in the users actor's batches (one identity
//! links to one account: checked there, in message order), and on several nodes from the change log.

use std::sync::Arc;

use crate::domain::{Timestamp, UserId};
use crate::store::linked::LinkedAccountRecordV1;

/// One identity linked to one account.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkedAccount {
    pub id: [u8; 16],
    pub user_id: UserId,
    pub provider: String,
    pub subject: String,
    /// The address the provider gave when the link was made.
    pub email: String,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub sealed_tokens: Option<Vec<u8>>,
}

impl LinkedAccount {
    /// The id as better-auth's `account.id` carries it: a hyphenated UUID.
    pub fn id_string(&self) -> String {
        uuid::Uuid::from_bytes(self.id).hyphenated().to_string()
    }

    pub fn record(&self) -> LinkedAccountRecordV1 {
        LinkedAccountRecordV1 {
            id: self.id,
            user_id: self.user_id.to_bytes(),
            provider: self.provider.clone(),
            subject: self.subject.clone(),
            email: self.email.clone(),
            created_at_ms: self.created_at.as_millis(),
            updated_at_ms: self.updated_at.as_millis(),
            sealed_tokens: self.sealed_tokens.clone(),
        }
    }

    pub fn from_record(r: LinkedAccountRecordV1) -> Self {
        Self {
            id: r.id,
            user_id: UserId::from_bytes(r.user_id),
            provider: r.provider,
            subject: r.subject,
            email: r.email,
            created_at: Timestamp::from_millis(r.created_at_ms),
            updated_at: Timestamp::from_millis(r.updated_at_ms),
            sealed_tokens: r.sealed_tokens,
        }
    }
}

#[derive(Default)]
pub struct AccountIndex {
    by_id: papaya::HashMap<[u8; 16], Arc<LinkedAccount>>,
    by_identity: papaya::HashMap<(String, String), [u8; 16]>,
    by_user: papaya::HashMap<UserId, Arc<[[u8; 16]]>>,
}

impl AccountIndex {
    pub fn get(&self, id: &[u8; 16]) -> Option<Arc<LinkedAccount>> {
        self.by_id.pin().get(id).cloned()
    }

    /// The account linked to `subject` at `provider`, if any.
    pub fn by_identity(&self, provider: &str, subject: &str) -> Option<Arc<LinkedAccount>> {
        let id = *self.by_identity.pin().get(&(provider.to_owned(), subject.to_owned()))?;
        self.get(&id)
    }

    /// Every identity linked to `user`, oldest first.
    pub fn of_user(&self, user: UserId) -> Vec<Arc<LinkedAccount>> {
        let ids = self.by_user.pin().get(&user).cloned();
        let mut found: Vec<Arc<LinkedAccount>> =
            ids.iter().flat_map(|ids| ids.iter()).filter_map(|id| self.get(id)).collect();
        found.sort_by_key(|a| (a.created_at, a.id));
        found
    }

    /// Only the users actor (and the start-up load before it) publishes: one writer, so read-modify-write of a
    /// user's list is safe. `None` removes `id`.
    pub(crate) fn publish(&self, id: [u8; 16], account: Option<Arc<LinkedAccount>>) {
        let by_user = self.by_user.pin();
        if let Some(old) = self.by_id.pin().remove(&id) {
            self.by_identity.pin().remove(&(old.provider.clone(), old.subject.clone()));
            super::owner_lists::remove(&by_user, old.user_id, id);
        }
        if let Some(account) = account {
            super::owner_lists::add(&by_user, account.user_id, id);
            self.by_identity.pin().insert((account.provider.clone(), account.subject.clone()), id);
            self.by_id.pin().insert(id, account);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn account(user: UserId, provider: &str, subject: &str, at: i64) -> Arc<LinkedAccount> {
        Arc::new(LinkedAccount {
            id: *uuid::Uuid::now_v7().as_bytes(),
            user_id: user,
            provider: provider.into(),
            subject: subject.into(),
            email: "a@example.com".into(),
            created_at: Timestamp::from_millis(at),
            updated_at: Timestamp::from_millis(at),
            sealed_tokens: None,
        })
    }

    #[test]
    fn an_identity_is_found_by_provider_and_subject_and_by_user_until_removed() {
        let index = AccountIndex::default();
        let (alice, bob) = (UserId::new(), UserId::new());
        let (a1, a2, b1) = (account(alice, "g", "1", 1), account(alice, "h", "1", 2), account(bob, "g", "2", 3));
        for a in [&a1, &a2, &b1] {
            index.publish(a.id, Some(Arc::clone(a)));
        }
        assert_eq!(index.by_identity("g", "1").unwrap().user_id, alice);
        assert_eq!(index.by_identity("h", "2"), None);
        assert_eq!(index.of_user(alice).iter().map(|a| a.id).collect::<Vec<_>>(), vec![a1.id, a2.id]);
        index.publish(a1.id, None);
        assert_eq!(index.by_identity("g", "1"), None);
        assert_eq!(index.of_user(alice).len(), 1);
        index.publish(a2.id, None);
        assert!(index.of_user(alice).is_empty());
        assert_eq!(index.of_user(bob).len(), 1);
    }

    #[test]
    fn the_record_round_trips() {
        let a = account(UserId::new(), "g", "s", 5);
        assert_eq!(LinkedAccount::from_record(a.record()), *a);
    }
}
