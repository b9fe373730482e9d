//! API keys (`@better-auth/api-key`): made, listed, changed and deleted by their owner or an administrator, and
//! turned into their owner's session by the header (`x-api-key`), checked from memory like a session.

use std::sync::Arc;
use std::time::Duration;

use super::{Accounts, Current};
use crate::actors::Unavailable;
use crate::actors::sessions::{KeyActor, KeyChange, KeyError};
use crate::domain::api_key::{
    ApiKeySecret, KEY_LENGTH, KeyName, KeyPermissions, KeyPrefix, KeyRefusal, MAX_PRESENTED_LENGTH, Usage,
    hash_presented,
};
use crate::domain::{ApiKey, ApiKeyId, Session, SessionId, SessionRare, Timestamp, UserId};

/// Why a key presented in the header opens no session (the plugin's codes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum KeyAuthError {
    /// Shorter than a key can be: 403, as the plugin answers it.
    #[error("Invalid API key.")]
    Malformed,
    #[error("Invalid API key.")]
    Unknown,
    #[error("API Key is disabled")]
    Disabled,
    #[error("API Key has expired")]
    Expired,
    #[error("API Key has reached its usage limit")]
    UsageExceeded,
    /// The key's window is spent: try again in this many milliseconds.
    #[error("Rate limit exceeded.")]
    RateLimited(i64),
    /// The owner is banned (until the ban ends, or the commit that deletes the key reaches this node).
    #[error("User is banned")]
    OwnerBanned,
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
}

/// Why a call about keys was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApiKeyError {
    #[error("API Key not found")]
    NotFound,
    #[error("The expiresIn is smaller than the predefined minimum value.")]
    ExpiresInTooSmall,
    #[error("The expiresIn is larger than the predefined maximum value.")]
    ExpiresInTooLarge,
    #[error("Metadata is disabled.")]
    MetadataDisabled,
    #[error("No values to update.")]
    NothingToUpdate,
    #[error("User is banned")]
    Banned,
    #[error("Unauthorized or invalid session")]
    UnknownUser,
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
}

impl From<KeyError> for ApiKeyError {
    fn from(e: KeyError) -> Self {
        match e {
            KeyError::NotFound => Self::NotFound,
            KeyError::Banned => Self::Banned,
            KeyError::UnknownUser => Self::UnknownUser,
            KeyError::Unavailable(u) => Self::Unavailable(u),
        }
    }
}

/// Whose keys a call is about, and who makes it (audited as the actor).
#[derive(Debug, Clone, Copy)]
pub struct KeyOwner {
    pub owner: UserId,
    pub by: UserId,
}

/// A new key's fields, parsed. The server-only ones (`permissions`, the window, the quota) only from an
/// administrator: the handler refuses them from anyone else.
#[derive(Debug, Clone, Default)]
pub struct NewKey {
    pub name: Option<KeyName>,
    pub prefix: Option<KeyPrefix>,
    /// Seconds.
    pub expires_in: Option<u64>,
    /// JSON object text.
    pub metadata: Option<String>,
    pub permissions: Option<KeyPermissions>,
    pub rate_limit_enabled: Option<bool>,
    pub rate_limit_time_window_ms: Option<i64>,
    pub rate_limit_max: Option<i64>,
    pub remaining: Option<i64>,
    pub refill: Option<(i64, i64)>,
}

/// The plugin's `keyExpiration` bounds, in days.
const MIN_EXPIRES_IN_DAYS: f64 = 1.0;
const MAX_EXPIRES_IN_DAYS: f64 = 365.0;

/// `expiresIn` (seconds) within the plugin's bounds (1 to 365 days).
pub fn check_expires_in(secs: u64) -> Result<(), ApiKeyError> {
    #[allow(clippy::cast_precision_loss)] // seconds far below 2^52
    let days = secs as f64 / 86_400.0;
    if days < MIN_EXPIRES_IN_DAYS {
        return Err(ApiKeyError::ExpiresInTooSmall);
    }
    if days > MAX_EXPIRES_IN_DAYS {
        return Err(ApiKeyError::ExpiresInTooLarge);
    }
    Ok(())
}

/// The answer of `verify`.
#[derive(Debug, Clone)]
pub struct Verified {
    pub key: Option<Arc<ApiKey>>,
    pub error: Option<KeyAuthError>,
}

impl Accounts {
    /// The header that carries a key when keys open sessions (`None`: they do not).
    pub fn api_key_header(&self) -> Option<&str> {
        self.api_keys.sessions.then_some(self.api_keys.header.as_str())
    }

    /// Whether keys may carry metadata.
    pub fn api_key_metadata_enabled(&self) -> bool {
        self.api_keys.enable_metadata
    }

    /// The session a key presented in the header opens: its owner's, for this request only (no cookie, nothing
    /// stored), counted against the key's window. Read from memory like a session: a hash and two map reads (and
    /// for a key with a quota, the use written first).
    pub async fn api_key_session(&self, presented: &str) -> Result<Current, KeyAuthError> {
        if self.freshness.check().is_err() {
            return Err(Unavailable.into());
        }
        let key = self.check_key(presented, None).await?;
        let now = Timestamp::now();
        let user = self.indexes.users.get(key.user_id).ok_or(KeyAuthError::Unknown)?;
        if user.is_banned_at(now) {
            return Err(KeyAuthError::OwnerBanned);
        }
        let session = Session {
            id: SessionId::from_bytes(key.id.to_bytes()),
            user_id: key.user_id,
            expires_at: key.expires_at.unwrap_or_else(|| now.plus(Duration::from_secs(self.session_lifetime_secs()))),
            created_at: now,
            updated_at: now,
            ip_address: Default::default(),
            user_agent: Default::default(),
            remember_me: false,
            rare: SessionRare::new(None, None),
        };
        Ok(Current { session: Arc::new(session), user, by_key: true })
    }

    /// The key `presented` names, used once (counted), if it opens; `asked` permissions must all be held.
    async fn check_key(&self, presented: &str, asked: Option<&KeyPermissions>) -> Result<Arc<ApiKey>, KeyAuthError> {
        if presented.len() < KEY_LENGTH {
            return Err(KeyAuthError::Malformed);
        }
        if presented.len() > MAX_PRESENTED_LENGTH {
            return Err(KeyAuthError::Unknown);
        }
        // The lookup is by a SHA-256 of the whole key: no comparison of secret bytes happens outside the map's
        // equality on digests, which tells nothing about the key.
        let key = self.indexes.api_keys.by_hash(&hash_presented(presented)).ok_or(KeyAuthError::Unknown)?;
        if let Some(asked) = asked {
            let held = key.permissions.as_deref().and_then(KeyPermissions::from_json);
            if !held.is_some_and(|held| held.allows_all(asked)) {
                return Err(KeyAuthError::Unknown);
            }
        }
        let (now, limits_on) = (Timestamp::now(), self.api_keys.rate_limit_enabled);
        let used = if key.has_quota() {
            // Written before the request goes on: a quota holds across a crash, a restart and every node.
            match self.actors.sessions.use_api_key(key.id, now, limits_on).await {
                Ok(used) => used,
                Err(KeyError::NotFound) => return Err(KeyAuthError::Unknown),
                Err(_) => return Err(Unavailable.into()),
            }
        } else {
            key.use_at(now, limits_on)
        };
        used.map_err(|r| match r {
            KeyRefusal::Disabled => KeyAuthError::Disabled,
            KeyRefusal::Expired => KeyAuthError::Expired,
            KeyRefusal::UsageExceeded => KeyAuthError::UsageExceeded,
            KeyRefusal::RateLimited(ms) => KeyAuthError::RateLimited(ms),
        })?;
        Ok(key)
    }

    fn session_lifetime_secs(&self) -> u64 {
        // The plugin's fallback: the session's `expiresIn` (7 days by default).
        7 * 86_400
    }

    /// `verify`: whether `presented` is a live key holding `asked`, counted as a use; the key without its secret.
    pub async fn verify_api_key(
        &self,
        presented: &str,
        asked: Option<&KeyPermissions>,
    ) -> Result<Verified, Unavailable> {
        if self.freshness.check().is_err() {
            return Err(Unavailable);
        }
        Ok(match self.check_key(presented, asked).await {
            Ok(key) => Verified { key: Some(key), error: None },
            Err(KeyAuthError::Unavailable(u)) => return Err(u),
            Err(e) => Verified { key: None, error: Some(e) },
        })
    }

    /// A new key for `who.owner`, with the configured defaults: its secret (shown once) and the key.
    pub async fn create_api_key(
        &self,
        who: KeyOwner,
        new: NewKey,
        ip: String,
    ) -> Result<(ApiKeySecret, Arc<ApiKey>), ApiKeyError> {
        if new.metadata.is_some() && !self.api_keys.enable_metadata {
            return Err(ApiKeyError::MetadataDisabled);
        }
        if let Some(secs) = new.expires_in {
            check_expires_in(secs)?;
        }
        let secret = ApiKeySecret::generate(new.prefix.as_ref());
        let now = Timestamp::now();
        let config = &self.api_keys;
        let key = ApiKey {
            id: ApiKeyId::new(),
            user_id: who.owner,
            hash: secret.hash(),
            config_id: "default".into(),
            name: new.name.map(|n| n.as_str().to_owned()),
            start: Some(secret.start()),
            prefix: new.prefix.map(|p| p.as_str().to_owned()),
            enabled: true,
            expires_at: new.expires_in.map(|s| now.plus(Duration::from_secs(s))),
            created_at: now,
            updated_at: now,
            rate_limit_enabled: new.rate_limit_enabled.unwrap_or(config.rate_limit_enabled),
            rate_limit_time_window_ms: Some(new.rate_limit_time_window_ms.unwrap_or(config.rate_limit_time_window_ms)),
            rate_limit_max: Some(new.rate_limit_max.unwrap_or(config.rate_limit_max)),
            refill_amount: new.refill.map(|r| r.0),
            refill_interval_ms: new.refill.map(|r| r.1),
            permissions: new.permissions.map(|p| p.to_json()),
            metadata: new.metadata,
            usage: Arc::new(std::sync::Mutex::new(Usage {
                remaining: new.remaining.or(new.refill.map(|r| r.0)),
                ..Usage::default()
            })),
        };
        let actor = KeyActor { by: who.by, ip };
        let key = self.actors.sessions.create_api_key(Arc::new(key), actor).await?;
        Ok((secret, key))
    }

    /// Key `id` if it is `owner`'s (another's is not found: no one learns another's key ids).
    pub fn api_key(&self, owner: UserId, id: ApiKeyId) -> Result<Arc<ApiKey>, ApiKeyError> {
        self.indexes.api_keys.get(id).filter(|k| k.user_id == owner).ok_or(ApiKeyError::NotFound)
    }

    /// Every key of `owner`, oldest first.
    pub fn api_keys_of(&self, owner: UserId) -> Vec<Arc<ApiKey>> {
        self.indexes.api_keys.of_user(owner)
    }

    /// Changes `who.owner`'s key `id`.
    pub async fn update_api_key(
        &self,
        who: KeyOwner,
        id: ApiKeyId,
        change: KeyChange,
        ip: String,
    ) -> Result<Arc<ApiKey>, ApiKeyError> {
        // Not the owner's: not found, before saying what is wrong with the change (as the plugin orders it).
        self.api_key(who.owner, id)?;
        if change.is_empty() {
            return Err(ApiKeyError::NothingToUpdate);
        }
        let actor = KeyActor { by: who.by, ip };
        Ok(self.actors.sessions.update_api_key(id, who.owner, change, actor).await?)
    }

    /// Deletes `who.owner`'s key `id`.
    pub async fn delete_api_key(&self, who: KeyOwner, id: ApiKeyId, ip: String) -> Result<(), ApiKeyError> {
        let actor = KeyActor { by: who.by, ip };
        Ok(self.actors.sessions.delete_api_key(id, who.owner, actor).await?)
    }

    /// Deletes every expired key (`delete-all-expired-api-keys`, and the housekeeping's sweep); how many.
    pub async fn sweep_expired_api_keys(&self) -> Result<usize, Unavailable> {
        self.actors.sessions.sweep_expired_api_keys().await
    }
}
