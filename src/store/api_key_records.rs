//! The persisted format of an API key (`@better-auth/api-key`'s `apikey` row). Framed and pinned like the other
//! records ([`super::records`]): a version byte, postcard, golden bytes below.

use serde::{Deserialize, Serialize};

use super::codec::Versioned;

/// One API key. Key: its own UUID v7. The secret is never stored, only its SHA-256 (`hash`), which the session
/// check looks keys up by. The moving counts (`request_count`, `last_request_ms`, `remaining`) are written with
/// each change of the key, not with each use (see docs/reference.md, "API keys").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiKeyRecordV1 {
    pub id: [u8; 16],
    pub user_id: [u8; 16],
    pub hash: [u8; 32],
    pub config_id: String,
    pub name: Option<String>,
    pub start: Option<String>,
    pub prefix: Option<String>,
    pub enabled: bool,
    pub expires_at_ms: Option<i64>,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
    pub rate_limit_enabled: bool,
    pub rate_limit_time_window_ms: Option<i64>,
    pub rate_limit_max: Option<i64>,
    pub request_count: i64,
    pub last_request_ms: Option<i64>,
    pub remaining: Option<i64>,
    pub refill_amount: Option<i64>,
    pub refill_interval_ms: Option<i64>,
    pub last_refill_at_ms: Option<i64>,
    /// JSON object texts, as the plugin stores them.
    pub permissions: Option<String>,
    pub metadata: Option<String>,
}

impl Versioned for ApiKeyRecordV1 {
    const VERSION: u8 = 1;
    const KIND: &'static str = "API key";
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::codec::{decode, encode};

    #[test]
    fn api_key_golden_bytes() {
        let key = ApiKeyRecordV1 {
            id: [1; 16],
            user_id: [2; 16],
            hash: [3; 32],
            config_id: "d".into(),
            name: Some("n".into()),
            start: None,
            prefix: None,
            enabled: true,
            expires_at_ms: None,
            created_at_ms: 1,
            updated_at_ms: 64,
            rate_limit_enabled: false,
            rate_limit_time_window_ms: Some(2),
            rate_limit_max: None,
            request_count: 0,
            last_request_ms: None,
            remaining: None,
            refill_amount: None,
            refill_interval_ms: None,
            last_refill_at_ms: None,
            permissions: None,
            metadata: Some("{}".into()),
        };
        let mut expected = vec![1];
        expected.extend([1; 16]);
        expected.extend([2; 16]);
        expected.extend([3; 32]);
        expected.extend([1, b'd', 1, 1, b'n', 0, 0, 1, 0, 2, 0x80, 0x01, 0, 1, 4, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2]);
        expected.extend(b"{}");
        assert_eq!(encode(&key), expected);
        assert_eq!(decode::<ApiKeyRecordV1>(&expected).unwrap(), key);
    }
}
