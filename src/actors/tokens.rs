//! Read index of one-time tokens (password resets), kept by the users actor: by the token's hash, and the one
//! live token of each user and kind (a newer request invalidates the older token).

use std::sync::Arc;

use crate::domain::{OneTimeToken, TokenHash, TokenKind, UserId};

#[derive(Default)]
pub struct TokenIndex {
    by_hash: papaya::HashMap<TokenHash, Arc<OneTimeToken>>,
    latest: papaya::HashMap<(UserId, TokenKind), TokenHash>,
}

impl TokenIndex {
    pub fn get(&self, hash: &TokenHash) -> Option<Arc<OneTimeToken>> {
        self.by_hash.pin().get(hash).cloned()
    }

    /// The live token of `user` for `kind`, if any.
    pub fn latest(&self, user: UserId, kind: TokenKind) -> Option<TokenHash> {
        self.latest.pin().get(&(user, kind)).copied()
    }

    pub(crate) fn publish(&self, hash: TokenHash, token: Option<Arc<OneTimeToken>>) {
        match token {
            Some(token) => {
                self.latest.pin().insert((token.user_id, token.kind), hash);
                self.by_hash.pin().insert(hash, token);
            }
            None => {
                if let Some(old) = self.by_hash.pin().remove(&hash) {
                    let key = (old.user_id, old.kind);
                    let latest = self.latest.pin();
                    if latest.get(&key) == Some(&hash) {
                        latest.remove(&key);
                    }
                }
            }
        }
    }
}
