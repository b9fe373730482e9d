//! Read index of one-time tokens (password resets, e-mail verifications), kept by the users actor: by the token's
//! hash, and the live tokens of each user and kind. A newer request replaces the link the same client asked for
//! before, and no other: a client cannot kill the link someone else asked for (the account's owner, say).

use std::sync::Arc;

use crate::domain::{OneTimeToken, TokenHash, TokenKind, UserId};

#[derive(Default)]
pub struct TokenIndex {
    by_hash: papaya::HashMap<TokenHash, Arc<OneTimeToken>>,
    /// Each account's live tokens of each kind: one per client that asked (a handful).
    live: papaya::HashMap<(UserId, TokenKind), Arc<[TokenHash]>>,
}

impl TokenIndex {
    pub fn get(&self, hash: &TokenHash) -> Option<Arc<OneTimeToken>> {
        self.by_hash.pin().get(hash).cloned()
    }

    /// Every token of `user` for `kind` not used or replaced yet (some may have expired).
    pub fn live(&self, user: UserId, kind: TokenKind) -> Vec<TokenHash> {
        self.live.pin().get(&(user, kind)).map(|hashes| hashes.to_vec()).unwrap_or_default()
    }

    /// The token of `user` for `kind` that the client `requested_by` asked for, if any.
    pub fn asked_by(&self, user: UserId, kind: TokenKind, requested_by: Option<[u8; 16]>) -> Option<TokenHash> {
        self.live(user, kind).into_iter().find(|h| self.get(h).is_some_and(|t| t.requested_by == requested_by))
    }

    /// Only the users actor (and the start-up load before it) publishes: one writer, so read-modify-write of a
    /// user's list is safe.
    pub(crate) fn publish(&self, hash: TokenHash, token: Option<Arc<OneTimeToken>>) {
        let live = self.live.pin();
        match token {
            Some(token) => {
                let key = (token.user_id, token.kind);
                let mut hashes = live.get(&key).map(|h| h.to_vec()).unwrap_or_default();
                if !hashes.contains(&hash) {
                    hashes.push(hash);
                }
                self.by_hash.pin().insert(hash, token);
                live.insert(key, hashes.into());
            }
            None => {
                if let Some(old) = self.by_hash.pin().remove(&hash) {
                    let key = (old.user_id, old.kind);
                    let rest: Vec<TokenHash> =
                        live.get(&key).map(|h| h.iter().copied().filter(|h| *h != hash).collect()).unwrap_or_default();
                    if rest.is_empty() {
                        live.remove(&key);
                    } else {
                        live.insert(key, rest.into());
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Timestamp;

    fn token(user: UserId, requested_by: u8) -> Arc<OneTimeToken> {
        let now = Timestamp::now();
        Arc::new(OneTimeToken {
            kind: TokenKind::PasswordReset,
            user_id: user,
            created_at: now,
            expires_at: now,
            requested_by: Some([requested_by; 16]),
            failures: 0,
            code: None,
            address: None,
        })
    }

    #[test]
    fn each_client_has_its_own_live_token_per_account() {
        let index = TokenIndex::default();
        let user = UserId::new();
        index.publish([1; 32], Some(token(user, 1)));
        index.publish([2; 32], Some(token(user, 2)));
        assert_eq!(index.live(user, TokenKind::PasswordReset), vec![[1; 32], [2; 32]]);
        assert_eq!(index.asked_by(user, TokenKind::PasswordReset, Some([2; 16])), Some([2; 32]));
        assert_eq!(index.asked_by(user, TokenKind::PasswordReset, Some([3; 16])), None);
        assert!(index.live(user, TokenKind::EmailVerification).is_empty());
        index.publish([1; 32], None);
        assert_eq!(index.live(user, TokenKind::PasswordReset), vec![[2; 32]]);
        index.publish([2; 32], None);
        assert!(index.live(user, TokenKind::PasswordReset).is_empty() && index.get(&[2; 32]).is_none());
    }
}
