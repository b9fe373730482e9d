//! What the identity provider grants: authorization codes waiting to be redeemed, and users' consents to clients.
//!
//! Both are kept in the store, read by the node that needs them, as the sign-in flows through other providers are
//! (src/accounts/oauth.rs): a code issued on one node is redeemed on any, and a consent given on one is seen by
//! all at once, with no change log entry to wait for. A code is taken once: on one node a claim in memory keeps a
//! second redemption out while the first one's take commits; across nodes the store refuses the second take
//! ([`crate::store::Conflict::CodeUsed`]).

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use sha2::{Digest, Sha256};

use crate::domain::{Timestamp, UserId, action};
use crate::store::{OAuthCodeRecordV1, OAuthConsentRecordV1, Store, StoreError, StoreOp, StoreWriter, audit};

/// How long a code may wait for its redemption (the plugin's `codeExpiresIn`).
pub const CODE_LIFETIME: Duration = Duration::from_secs(600);

#[derive(Debug, thiserror::Error)]
pub enum GrantError {
    /// Unknown, expired, or redeemed already (here or on another node).
    #[error("invalid code")]
    InvalidCode,
    #[error("the store is unavailable: {0}")]
    Store(String),
}

impl From<StoreError> for GrantError {
    fn from(e: StoreError) -> Self {
        GrantError::Store(e.to_string())
    }
}

/// Codes and consents. Cheap to share (`Arc`).
pub struct Grants {
    store: Arc<Store>,
    writer: StoreWriter,
    /// The codes (their hashes) a token request on this node is redeeming: from before the code is read until its
    /// take is durable, no other request of this node gets it.
    taking: Mutex<HashSet<[u8; 32]>>,
}

impl std::fmt::Debug for Grants {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Grants").finish_non_exhaustive()
    }
}

/// A code being redeemed by one request ([`Grants::take_code`]); released when dropped.
struct Claim<'a> {
    grants: &'a Grants,
    hash: [u8; 32],
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        self.grants.taking.lock().unwrap_or_else(PoisonError::into_inner).remove(&self.hash);
    }
}

impl Grants {
    pub fn new(store: Arc<Store>, writer: StoreWriter) -> Self {
        Self { store, writer, taking: Mutex::new(HashSet::new()) }
    }

    async fn read<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Store) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, GrantError> {
        let store = Arc::clone(&self.store);
        tokio::task::spawn_blocking(move || f(&store))
            .await
            .map_err(|e| GrantError::Store(e.to_string()))?
            .map_err(Into::into)
    }

    /// Stores `record` under a new code, durably; answers the code (shown to the client once, stored only as its
    /// SHA-256).
    pub async fn issue_code(&self, record: OAuthCodeRecordV1) -> Result<String, GrantError> {
        let code = random_token();
        let hash = sha256(&code);
        self.writer
            .write(vec![StoreOp::PutOAuthCode(hash, record)])
            .await
            .map_err(|e| GrantError::Store(e.to_string()))?;
        Ok(code)
    }

    /// Redeems `code`: answers what it was issued for and deletes it, durably, so it is never redeemed again.
    /// `InvalidCode` when it is unknown, expired, taken already, or being taken by another request.
    pub async fn take_code(&self, code: &str) -> Result<OAuthCodeRecordV1, GrantError> {
        let hash = sha256(code);
        let fresh = self.taking.lock().unwrap_or_else(PoisonError::into_inner).insert(hash);
        if !fresh {
            return Err(GrantError::InvalidCode);
        }
        let _claim = Claim { grants: self, hash };
        let record = self.read(move |s| s.oauth_code(&hash)).await?.ok_or(GrantError::InvalidCode)?;
        match self.writer.write(vec![StoreOp::TakeOAuthCode(hash)]).await {
            Ok(()) => {}
            Err(StoreError::Conflict(_)) => return Err(GrantError::InvalidCode),
            Err(e) => return Err(GrantError::Store(e.to_string())),
        }
        if record.expires_at_ms < Timestamp::now().as_millis() {
            return Err(GrantError::InvalidCode);
        }
        Ok(record)
    }

    /// The scopes `user` consented to give `client_id`, if they ever did.
    pub async fn consent(&self, user: UserId, client_id: &str) -> Result<Option<Vec<String>>, GrantError> {
        let client_id = client_id.to_owned();
        let found = self.read(move |s| s.oauth_consent(user.to_bytes(), &client_id)).await?;
        Ok(found.map(|c| c.scopes))
    }

    /// Records `user`'s consent to give `client` (its record id names it in the audit log) `scopes`, added to any
    /// given before. Audited in the same commit.
    pub async fn give_consent(
        &self,
        user: UserId,
        client: (uuid::Uuid, &str),
        scopes: &[String],
        ip: &str,
    ) -> Result<(), GrantError> {
        let (target, client_id) = client;
        let owned = client_id.to_owned();
        let before = self.read(move |s| s.oauth_consent(user.to_bytes(), &owned)).await?;
        let now = Timestamp::now().as_millis();
        let mut record = before.unwrap_or(OAuthConsentRecordV1 {
            user_id: user.to_bytes(),
            client_id: client_id.to_owned(),
            scopes: Vec::new(),
            created_at_ms: now,
            updated_at_ms: now,
        });
        for scope in scopes {
            if !record.scopes.contains(scope) {
                record.scopes.push(scope.clone());
            }
        }
        record.updated_at_ms = now;
        let detail = format!("{}: scopes [{}]", client_id, record.scopes.join(" "));
        let logged = audit::entry(action::OAUTH_CONSENT_GRANTED, Some(user), Some(target), ip, detail);
        self.writer
            .write(vec![StoreOp::PutOAuthConsent(record), logged])
            .await
            .map_err(|e| GrantError::Store(e.to_string()))
    }
}

pub fn sha256(text: &str) -> [u8; 32] {
    Sha256::digest(text.as_bytes()).into()
}

/// 256 random bits, base64url: a code, an access token's id.
pub fn random_token() -> String {
    use base64::Engine;
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).expect("the operating system's random source failed");
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}
