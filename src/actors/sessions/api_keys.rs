//! The API keys' messages to the sessions actor: what callers send and get back. Keys live with the sessions
//! because a key is a way into the owner's account that must end with it: a ban or a removal ends every session
//! and every key of the account in one commit (docs/design/ending-sessions-with-a-change.md), and a key is not
//! created for an account whose sessions are being ended.

use std::sync::Arc;

use ractor::RpcReplyPort;

use super::{SessionsHandle, SessionsMsg};
use crate::actors::{Unavailable, call, gone};
use crate::domain::api_key::{KeyName, KeyRefusal};
use crate::domain::{ApiKey, ApiKeyId, Timestamp, UserId};

/// Who changes a key, for the audit log: the owner or an administrator (`by`), from `ip`.
#[derive(Debug, Clone)]
pub struct KeyActor {
    pub by: UserId,
    pub ip: String,
}

/// What an update changes; `None` leaves a field as it is.
#[derive(Debug, Clone, Default)]
pub struct KeyChange {
    pub name: Option<KeyName>,
    pub enabled: Option<bool>,
    /// `Some(None)`: never expires.
    pub expires_at: Option<Option<Timestamp>>,
    /// JSON object text.
    pub metadata: Option<String>,
    /// Server-only (an administrator's): the request window, the quota, the permissions.
    pub rate_limit_enabled: Option<bool>,
    pub rate_limit_time_window_ms: Option<i64>,
    pub rate_limit_max: Option<i64>,
    pub remaining: Option<i64>,
    /// Refill amount and interval (ms), set together.
    pub refill: Option<(i64, i64)>,
    /// `Some(None)`: none.
    pub permissions: Option<Option<String>>,
}

impl KeyChange {
    pub fn is_empty(&self) -> bool {
        self.name.is_none()
            && self.enabled.is_none()
            && self.expires_at.is_none()
            && self.metadata.is_none()
            && self.rate_limit_enabled.is_none()
            && self.rate_limit_time_window_ms.is_none()
            && self.rate_limit_max.is_none()
            && self.remaining.is_none()
            && self.refill.is_none()
            && self.permissions.is_none()
    }

    /// `key` with this change made at `now`.
    pub(super) fn apply(self, key: &ApiKey, now: Timestamp) -> ApiKey {
        let mut next = key.clone();
        if let Some(name) = self.name {
            next.name = Some(name.as_str().to_owned());
        }
        next.enabled = self.enabled.unwrap_or(key.enabled);
        next.expires_at = self.expires_at.unwrap_or(key.expires_at);
        if let Some(metadata) = self.metadata {
            next.metadata = Some(metadata);
        }
        next.rate_limit_enabled = self.rate_limit_enabled.unwrap_or(key.rate_limit_enabled);
        next.rate_limit_time_window_ms = self.rate_limit_time_window_ms.or(key.rate_limit_time_window_ms);
        next.rate_limit_max = self.rate_limit_max.or(key.rate_limit_max);
        if let Some((amount, interval)) = self.refill {
            next.refill_amount = Some(amount);
            next.refill_interval_ms = Some(interval);
        }
        if let Some(permissions) = self.permissions {
            next.permissions = permissions;
        }
        if let Some(remaining) = self.remaining {
            // A new quota is a new count: the window's count goes on.
            let mut usage = next.usage();
            usage.remaining = Some(remaining);
            next.usage = Arc::new(std::sync::Mutex::new(usage));
        }
        next.updated_at = now;
        next
    }
}

/// Why a change to a key was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// No such key, or not the expected owner's (the same answer: no one learns another's key ids).
    #[error("API Key not found")]
    NotFound,
    /// The owner is banned (or being banned): no key is made for them.
    #[error("User is banned")]
    Banned,
    /// The owner does not exist (removed meanwhile).
    #[error("Unauthorized or invalid session")]
    UnknownUser,
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
}

/// A change to the API keys.
pub enum KeyMsg {
    /// A new key (built by the facade, its secret already hashed), for its owner.
    Create { key: Arc<ApiKey>, actor: KeyActor, reply: RpcReplyPort<Result<Arc<ApiKey>, KeyError>> },
    /// A change to key `id`, which must be `owner`'s.
    Update {
        id: ApiKeyId,
        owner: UserId,
        change: KeyChange,
        actor: KeyActor,
        reply: RpcReplyPort<Result<Arc<ApiKey>, KeyError>>,
    },
    /// Key `id` deleted, if it is `owner`'s.
    Delete { id: ApiKeyId, owner: UserId, actor: KeyActor, reply: RpcReplyPort<Result<(), KeyError>> },
    /// Every key past its expiry at `now` deleted (the plugin's `deleteAllExpiredApiKeys`); how many.
    SweepExpired { now: Timestamp, reply: RpcReplyPort<Result<usize, Unavailable>> },
    /// One use at `now` of key `id`, which has a quota: checked and counted as [`ApiKey::use_at`] does, the quota's
    /// use written before the answer. `Ok(Err(_))`: the key refuses it.
    Use { id: ApiKeyId, now: Timestamp, limits_on: bool, reply: RpcReplyPort<Result<Result<(), KeyRefusal>, KeyError>> },
}

impl KeyMsg {
    pub(super) fn caller_gone(&self) -> Option<bool> {
        match self {
            Self::Create { reply, .. } | Self::Update { reply, .. } => gone(reply),
            Self::Delete { reply, .. } => gone(reply),
            Self::SweepExpired { reply, .. } => gone(reply),
            Self::Use { reply, .. } => gone(reply),
        }
    }
}

impl SessionsHandle {
    /// Stores a new key, audited; refused for an unknown or banned owner, or one whose sessions are being ended.
    pub async fn create_api_key(&self, key: Arc<ApiKey>, actor: KeyActor) -> Result<Arc<ApiKey>, KeyError> {
        call(&self.0, |reply| SessionsMsg::ApiKey(KeyMsg::Create { key, actor, reply })).await?
    }

    /// Changes `owner`'s key `id`, audited; the key as changed.
    pub async fn update_api_key(
        &self,
        id: ApiKeyId,
        owner: UserId,
        change: KeyChange,
        actor: KeyActor,
    ) -> Result<Arc<ApiKey>, KeyError> {
        call(&self.0, |reply| SessionsMsg::ApiKey(KeyMsg::Update { id, owner, change, actor, reply })).await?
    }

    /// Deletes `owner`'s key `id`, audited.
    pub async fn delete_api_key(&self, id: ApiKeyId, owner: UserId, actor: KeyActor) -> Result<(), KeyError> {
        call(&self.0, |reply| SessionsMsg::ApiKey(KeyMsg::Delete { id, owner, actor, reply })).await?
    }

    /// Uses key `id` (one with a quota) at `now`, durably; `Ok(Err(_))` when the key refuses the use.
    pub async fn use_api_key(
        &self,
        id: ApiKeyId,
        now: Timestamp,
        limits_on: bool,
    ) -> Result<Result<(), KeyRefusal>, KeyError> {
        call(&self.0, |reply| SessionsMsg::ApiKey(KeyMsg::Use { id, now, limits_on, reply })).await?
    }

    /// Deletes every expired key; how many.
    pub async fn sweep_expired_api_keys(&self) -> Result<usize, Unavailable> {
        let now = Timestamp::now();
        call(&self.0, |reply| SessionsMsg::ApiKey(KeyMsg::SweepExpired { now, reply })).await?
    }
}
