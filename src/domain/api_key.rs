//! API keys (`@better-auth/api-key`'s wire): the secret a script or a service sends in `x-api-key`, the values a
//! key carries, and its per-key request window. The secret is never stored: only its SHA-256, as the plugin
//! stores it (base64url of the digest there, the digest's bytes here), so keys imported from better-auth keep
//! working.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex};

use sha2::{Digest, Sha256};

use super::{ApiKeyId, Timestamp, TokenHash, UserId};

/// The plugin's `defaultKeyLength`: the random part of every key, after its prefix.
pub const KEY_LENGTH: usize = 64;
/// The plugin's `startingCharactersConfig.charactersLength`: how much of a key (its prefix included) is kept in
/// clear as `start`, for people to tell their keys apart.
pub const START_LENGTH: usize = 6;
/// The plugin's prefix and name bounds (`minimumPrefixLength`…`maximumNameLength`).
pub const MAX_PREFIX_LENGTH: usize = 32;
pub const MAX_NAME_LENGTH: usize = 32;
/// The longest key a header may present and still be hashed: the longest prefix and the random part. Anything
/// longer is no key of ours, refused without hashing it.
pub const MAX_PRESENTED_LENGTH: usize = MAX_PREFIX_LENGTH + KEY_LENGTH;
/// Metadata is held in memory with the key: its JSON text is bounded.
pub const MAX_METADATA_BYTES: usize = 4096;

/// A new key's secret: its prefix and 64 letters `[a-zA-Z]` from the OS generator (the plugin's alphabet; 64 ×
/// log2(52) ≈ 365 bits). Shown once, to its creator; `Debug` is redacted.
pub struct ApiKeySecret(String);

impl ApiKeySecret {
    pub fn generate(prefix: Option<&KeyPrefix>) -> Self {
        const LETTERS: &[u8; 52] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
        let mut key = String::with_capacity(MAX_PRESENTED_LENGTH);
        key.push_str(prefix.map_or("", KeyPrefix::as_str));
        let mut buf = [0u8; 128];
        while key.len() < prefix.map_or(0, |p| p.as_str().len()) + KEY_LENGTH {
            getrandom::fill(&mut buf).expect("the OS random number generator failed");
            // 52 × 4 = 208: bytes at or above it are dropped, so every letter is equally likely.
            for b in buf.iter().filter(|b| **b < 208) {
                if key.len() == prefix.map_or(0, |p| p.as_str().len()) + KEY_LENGTH {
                    break;
                }
                key.push(LETTERS[usize::from(*b % 52)] as char);
            }
        }
        Self(key)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn hash(&self) -> TokenHash {
        hash_presented(&self.0)
    }

    /// The first characters kept in clear (`start`).
    pub fn start(&self) -> String {
        self.0.chars().take(START_LENGTH).collect()
    }
}

impl fmt::Debug for ApiKeySecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKeySecret(<redacted>)")
    }
}

/// SHA-256 of a presented key, as the plugin's `defaultKeyHasher` computes it (before its base64url).
pub fn hash_presented(key: &str) -> TokenHash {
    Sha256::digest(key.as_bytes()).into()
}

/// The stored form of a better-auth `apikey.key` (SHA-256, base64url without padding), as bytes; `None` for
/// anything else (a key stored in clear with `disableKeyHashing`, which cannot be imported as a hash).
pub fn hash_from_stored(text: &str) -> Option<TokenHash> {
    use base64::Engine;
    let mut out = [0u8; 35];
    let n = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode_slice(text.as_bytes(), &mut out).ok()?;
    (n == 32).then(|| out[..32].try_into().ok()).flatten()
}

/// A key's prefix: 1 to 32 characters of `[a-zA-Z0-9_-]` (the plugin's regex and bounds).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyPrefix(String);

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum KeyFieldError {
    #[error("Invalid prefix format, must be alphanumeric and contain only underscores and hyphens.")]
    PrefixFormat,
    #[error("The prefix length is either too large or too small.")]
    PrefixLength,
    #[error("The name length is either too large or too small.")]
    NameLength,
}

impl KeyPrefix {
    pub fn parse(s: &str) -> Result<Self, KeyFieldError> {
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') {
            return Err(KeyFieldError::PrefixFormat);
        }
        if s.len() > MAX_PREFIX_LENGTH {
            return Err(KeyFieldError::PrefixLength);
        }
        Ok(Self(s.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A key's name: 1 to 32 characters (counted as the plugin counts them: UTF-16 units).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyName(String);

impl KeyName {
    pub fn parse(s: &str) -> Result<Self, KeyFieldError> {
        let units = s.encode_utf16().count();
        if units == 0 || units > MAX_NAME_LENGTH {
            return Err(KeyFieldError::NameLength);
        }
        Ok(Self(s.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// What a key may do, as better-auth's access-control statements: actions per resource. Only the server side
/// (an administrator here) sets them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyPermissions(pub BTreeMap<String, Vec<String>>);

impl KeyPermissions {
    /// Whether every action asked for is granted (`role(keyPermissions).authorize(asked)`).
    pub fn allows_all(&self, asked: &KeyPermissions) -> bool {
        asked.0.iter().all(|(resource, actions)| {
            self.0.get(resource).is_some_and(|granted| actions.iter().all(|a| granted.contains(a)))
        })
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string(&self.0).unwrap_or_default()
    }

    pub fn from_json(text: &str) -> Option<Self> {
        serde_json::from_str(text).ok().map(Self)
    }
}

/// One API key, as the read index holds it (the secret's hash, never the secret).
#[derive(Debug, Clone)]
pub struct ApiKey {
    pub id: ApiKeyId,
    pub user_id: UserId,
    pub hash: TokenHash,
    /// The plugin's `configId` (always `default` for keys made here; imported keys keep theirs).
    pub config_id: String,
    pub name: Option<String>,
    pub start: Option<String>,
    pub prefix: Option<String>,
    pub enabled: bool,
    pub expires_at: Option<Timestamp>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub rate_limit_enabled: bool,
    pub rate_limit_time_window_ms: Option<i64>,
    pub rate_limit_max: Option<i64>,
    pub refill_amount: Option<i64>,
    pub refill_interval_ms: Option<i64>,
    /// JSON object text, as the plugin stores it.
    pub permissions: Option<String>,
    /// JSON object text.
    pub metadata: Option<String>,
    /// The request window and quota: changed by every use, shared by every version of the key the index
    /// publishes (an update keeps the count). The window is counted in memory, per node; a quota's use is also
    /// written before the request goes on (see [`ApiKey::has_quota`]).
    pub usage: Arc<Mutex<Usage>>,
}

/// A key's moving counts: requests in the current window, the last request, the quota left and when it was last
/// refilled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Usage {
    pub request_count: i64,
    pub last_request: Option<Timestamp>,
    /// `None`: no quota.
    pub remaining: Option<i64>,
    /// The last refill (`None`: never; the interval then counts from the key's creation).
    pub last_refill_at: Option<Timestamp>,
}

/// Why a key does not open a session (the plugin's codes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyRefusal {
    Disabled,
    Expired,
    UsageExceeded,
    /// The window's requests are spent; try again in this many milliseconds.
    RateLimited(i64),
}

impl ApiKey {
    pub fn is_expired(&self, now: Timestamp) -> bool {
        self.expires_at.is_some_and(|at| at <= now)
    }

    /// The current counts.
    pub fn usage(&self) -> Usage {
        *self.usage.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether the key has a quota (`remaining`). Its uses are counted exactly: each is written before the request
    /// it opens goes on, so neither a restart nor a second node gives uses back. A key without one is only
    /// windowed, in memory, per node.
    pub fn has_quota(&self) -> bool {
        self.usage().remaining.is_some()
    }

    /// The quota after one more use at `now`, as the plugin counts it: refilled to `refill_amount` once
    /// `refill_interval_ms` has passed since the last refill, then one taken; `None` when none is left. `usage`
    /// unchanged when there is no quota.
    fn quota_after(&self, usage: Usage, now: Timestamp) -> Option<Usage> {
        let Some(mut left) = usage.remaining else { return Some(usage) };
        let mut last_refill_at = usage.last_refill_at;
        if let (Some(interval), Some(amount)) = (self.refill_interval_ms, self.refill_amount) {
            let since = last_refill_at.unwrap_or(self.created_at);
            if now.as_millis() - since.as_millis() > interval {
                left = amount;
                last_refill_at = Some(now);
            }
        }
        (left > 0).then_some(Usage { remaining: Some(left - 1), last_refill_at, ..usage })
    }

    /// One use of the quota alone at `now` (no window, no enabled or expiry check): how a node counts a use another
    /// node made, and how the store counts one against the copy it holds.
    pub fn take_quota_at(&self, now: Timestamp) -> Result<(), KeyRefusal> {
        let mut usage = self.usage.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        *usage = self.quota_after(*usage, now).ok_or(KeyRefusal::UsageExceeded)?;
        Ok(())
    }

    /// One use of the key at `now`, as the plugin's `validateApiKey` checks and counts it: disabled, expired, quota
    /// (with its refill), then the request window. A refused use is not counted.
    pub fn use_at(&self, now: Timestamp, limits_on: bool) -> Result<(), KeyRefusal> {
        if !self.enabled {
            return Err(KeyRefusal::Disabled);
        }
        if self.is_expired(now) {
            return Err(KeyRefusal::Expired);
        }
        let mut usage = self.usage.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let Usage { remaining, last_refill_at, .. } = self.quota_after(*usage, now).ok_or(KeyRefusal::UsageExceeded)?;
        let windowed = limits_on && self.rate_limit_enabled;
        let (count, last) = match (windowed, self.rate_limit_time_window_ms, self.rate_limit_max) {
            (true, Some(window), Some(max)) => match usage.last_request {
                None => (1, Some(now)),
                Some(last) => {
                    let since = now.as_millis() - last.as_millis();
                    if since > window {
                        (1, Some(now))
                    } else if usage.request_count >= max {
                        return Err(KeyRefusal::RateLimited(window - since));
                    } else {
                        (usage.request_count + 1, Some(now))
                    }
                }
            },
            _ => (usage.request_count, Some(now)),
        };
        *usage = Usage { request_count: count, last_request: last, remaining, last_refill_at };
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(max: Option<i64>, remaining: Option<i64>) -> ApiKey {
        let now = Timestamp::from_millis(1_000_000);
        ApiKey {
            id: ApiKeyId::new(),
            user_id: UserId::new(),
            hash: [0; 32],
            config_id: "default".into(),
            name: None,
            start: None,
            prefix: None,
            enabled: true,
            expires_at: None,
            created_at: now,
            updated_at: now,
            rate_limit_enabled: true,
            rate_limit_time_window_ms: Some(1000),
            rate_limit_max: max,
            refill_amount: None,
            refill_interval_ms: None,
            permissions: None,
            metadata: None,
            usage: Arc::new(Mutex::new(Usage { remaining, ..Usage::default() })),
        }
    }

    #[test]
    fn a_generated_key_is_its_prefix_and_64_letters() {
        let prefix = KeyPrefix::parse("ab_-9").unwrap();
        let a = ApiKeySecret::generate(Some(&prefix));
        let b = ApiKeySecret::generate(None);
        assert_eq!(a.as_str().len(), 5 + KEY_LENGTH);
        assert!(a.as_str().starts_with("ab_-9"));
        assert!(a.as_str()[5..].bytes().all(|c| c.is_ascii_alphabetic()));
        assert_eq!(b.as_str().len(), KEY_LENGTH);
        assert_eq!(a.start(), "ab_-9".to_owned() + &a.as_str()[5..6]);
        assert_ne!(a.hash(), b.hash());
    }

    #[test]
    fn the_hash_is_the_plugins_sha256_base64url() {
        // better-auth's defaultKeyHasher("abc") = base64url(SHA-256("abc")), no padding.
        let stored = "ungWv48Bz-pBQUDeXa4iI7ADYaOWF3qctBD_YfIAFa0";
        assert_eq!(hash_from_stored(stored), Some(hash_presented("abc")));
        assert_eq!(hash_from_stored("abc"), None);
    }

    #[test]
    fn prefixes_and_names_have_the_plugins_bounds() {
        assert_eq!(KeyPrefix::parse("a b"), Err(KeyFieldError::PrefixFormat));
        assert_eq!(KeyPrefix::parse(""), Err(KeyFieldError::PrefixFormat));
        assert_eq!(KeyPrefix::parse(&"a".repeat(33)), Err(KeyFieldError::PrefixLength));
        assert!(KeyPrefix::parse(&"a".repeat(32)).is_ok());
        assert_eq!(KeyName::parse(""), Err(KeyFieldError::NameLength));
        assert_eq!(KeyName::parse(&"é".repeat(33)), Err(KeyFieldError::NameLength));
        assert!(KeyName::parse(&"é".repeat(32)).is_ok());
    }

    #[test]
    fn the_window_allows_max_then_refuses_until_it_has_passed() {
        let k = key(Some(2), None);
        let t = Timestamp::from_millis(2_000_000);
        assert_eq!(k.use_at(t, true), Ok(()));
        assert_eq!(k.use_at(t, true), Ok(()));
        assert_eq!(k.use_at(Timestamp::from_millis(2_000_400), true), Err(KeyRefusal::RateLimited(600)));
        assert_eq!(k.usage().request_count, 2);
        assert_eq!(k.use_at(Timestamp::from_millis(2_001_001), true), Ok(()));
        assert_eq!(k.usage().request_count, 1);
        // Off in the configuration: counted as a use, never refused.
        let k = key(Some(1), None);
        for _ in 0..5 {
            assert_eq!(k.use_at(t, false), Ok(()));
        }
    }

    #[test]
    fn a_quota_runs_out_and_a_disabled_or_expired_key_is_refused_uncounted() {
        let k = key(None, Some(1));
        let t = Timestamp::from_millis(2_000_000);
        assert_eq!(k.use_at(t, true), Ok(()));
        assert_eq!(k.use_at(t, true), Err(KeyRefusal::UsageExceeded));
        let mut k = key(Some(10), None);
        k.enabled = false;
        assert_eq!(k.use_at(t, true), Err(KeyRefusal::Disabled));
        k.enabled = true;
        k.expires_at = Some(t);
        assert_eq!(k.use_at(t, true), Err(KeyRefusal::Expired));
        assert_eq!(k.usage(), Usage::default());
    }

    #[test]
    fn a_refill_comes_once_per_interval_not_at_every_use_after_it() {
        let mut k = key(None, Some(1));
        k.rate_limit_enabled = false;
        (k.refill_amount, k.refill_interval_ms) = (Some(2), Some(1000));
        let at = |ms: i64| Timestamp::from_millis(1_000_000 + ms);
        assert_eq!(k.use_at(at(10), true), Ok(()));
        assert_eq!(k.use_at(at(20), true), Err(KeyRefusal::UsageExceeded));
        // The interval has passed: two again, and the interval starts over from this refill.
        assert_eq!(k.use_at(at(1_001), true), Ok(()));
        assert_eq!(k.usage().last_refill_at, Some(at(1_001)));
        assert_eq!(k.use_at(at(1_002), true), Ok(()));
        assert_eq!(k.use_at(at(1_003), true), Err(KeyRefusal::UsageExceeded));
        assert_eq!(k.take_quota_at(at(1_500)), Err(KeyRefusal::UsageExceeded));
        assert_eq!(k.take_quota_at(at(2_002)), Ok(()));
        assert_eq!(k.usage().remaining, Some(1));
    }

    #[test]
    fn permissions_must_hold_every_asked_action() {
        let granted = KeyPermissions::from_json(r#"{"files":["read","write"]}"#).unwrap();
        assert!(granted.allows_all(&KeyPermissions::from_json(r#"{"files":["read"]}"#).unwrap()));
        assert!(!granted.allows_all(&KeyPermissions::from_json(r#"{"files":["delete"]}"#).unwrap()));
        assert!(!granted.allows_all(&KeyPermissions::from_json(r#"{"users":["read"]}"#).unwrap()));
    }
}
