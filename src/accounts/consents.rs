//! Users' consents to the identity provider's clients (issue #46): what the user allowed each application, their
//! own calls to see, narrow and withdraw it (`@better-auth/oauth-provider`'s `get-consent(s)`, `update-consent`,
//! `delete-consent`), and an administrator's list and withdrawal. A withdrawn consent is gone from the store at
//! once, so the next authorization of that client shows the consent page again, on any node.
//!
//! A consent is stored under the user and the `client_id`; its `id` on the wire is derived from both
//! ([`consent_id`]), so it names one user's consent and no other: looking up an id among the caller's own consents
//! finds someone else's no more than a made-up one (404 either way, never a hint that it exists).

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use sha2::{Digest, Sha256};

use super::{Accounts, Unavailable};
use crate::domain::{Timestamp, UserId};
use crate::provider::ClientError;
use crate::store::OAuthConsentRecordV1;

/// A user's consent to a client, as its owner and administrators see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Consent {
    /// [`consent_id`] of the user and the client.
    pub id: String,
    pub client_id: String,
    /// The client's name; `None` once the client is removed (the consent can still be withdrawn).
    pub client_name: Option<String>,
    pub user_id: UserId,
    pub scopes: Vec<String>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

#[derive(Debug, thiserror::Error)]
pub enum ConsentsError {
    /// No consent of this user has this id (another user's included).
    #[error("no consent")]
    NotFound,
    /// The consent's client is removed: it has no scopes left to give.
    #[error("client not found")]
    ClientNotFound,
    /// A scope the client was not registered with.
    #[error("unable to provide scopes to {0}")]
    InvalidScopes(String),
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
}

impl From<crate::provider::grants::GrantError> for ConsentsError {
    fn from(_: crate::provider::grants::GrantError) -> Self {
        ConsentsError::Unavailable(Unavailable)
    }
}

/// The wire id of `user`'s consent to `client_id`: 128 bits of SHA-256 over both, base64url. Stable (the same
/// consent keeps its id when its scopes change) and unguessable from the `client_id` alone.
pub fn consent_id(user: UserId, client_id: &str) -> String {
    let mut hash = Sha256::new();
    hash.update(b"service-auth oauth consent\0");
    hash.update(user.to_bytes());
    hash.update(client_id.as_bytes());
    B64.encode(&hash.finalize()[..16])
}

impl Accounts {
    /// Every consent `user` has given, by `client_id`, with the clients' names.
    pub async fn consents(&self, user: UserId) -> Result<Vec<Consent>, ConsentsError> {
        let records = self.grants.consents_of(user).await?;
        if records.is_empty() {
            return Ok(Vec::new());
        }
        let clients = self.clients.list().await.map_err(|_| Unavailable)?;
        Ok(records
            .into_iter()
            .map(|r| {
                let name = clients.iter().find(|c| c.client_id == r.client_id).map(|c| c.name.clone());
                shown(user, r, name)
            })
            .collect())
    }

    /// `user`'s consent whose [`consent_id`] is `id`.
    pub async fn consent(&self, user: UserId, id: &str) -> Result<Consent, ConsentsError> {
        self.consents(user).await?.into_iter().find(|c| c.id == id).ok_or(ConsentsError::NotFound)
    }

    /// The owner's change of their consent `id`: it now grants `scopes` (each one the client was registered
    /// with), as the plugin's `update-consent`. Audited.
    pub async fn update_consent(
        &self,
        user: UserId,
        id: &str,
        scopes: Vec<String>,
        ip: &str,
    ) -> Result<Consent, ConsentsError> {
        let found = self.consent(user, id).await?;
        let client = match self.clients.get(&found.client_id).await {
            Ok(client) => client,
            Err(ClientError::NotFound) => return Err(ConsentsError::ClientNotFound),
            Err(_) => return Err(Unavailable.into()),
        };
        if !scopes.iter().all(|s| client.scopes.contains(s)) {
            return Err(ConsentsError::InvalidScopes(client.client_id.clone()));
        }
        let mut unique: Vec<String> = Vec::with_capacity(scopes.len());
        for scope in scopes {
            if !unique.contains(&scope) {
                unique.push(scope);
            }
        }
        let record =
            self.grants.set_consent_scopes(user, &found.client_id, unique, ip).await?.ok_or(ConsentsError::NotFound)?;
        Ok(shown(user, record, Some(client.name)))
    }

    /// Withdraws `user`'s consent `id`, by `by` (the user, or an administrator): the client's next authorization
    /// asks for consent again. Audited (`oauth_consent.revoked`, also a webhook event).
    pub async fn withdraw_consent(&self, user: UserId, id: &str, by: UserId, ip: &str) -> Result<(), ConsentsError> {
        let found = self.consent(user, id).await?;
        if self.grants.withdraw_consent(user, &found.client_id, by, ip).await? {
            Ok(())
        } else {
            // Withdrawn a moment ago by another request (or node).
            Err(ConsentsError::NotFound)
        }
    }
}

fn shown(user: UserId, r: OAuthConsentRecordV1, client_name: Option<String>) -> Consent {
    Consent {
        id: consent_id(user, &r.client_id),
        client_id: r.client_id,
        client_name,
        user_id: user,
        scopes: r.scopes,
        created_at: Timestamp::from_millis(r.created_at_ms),
        updated_at: Timestamp::from_millis(r.updated_at_ms),
    }
}
