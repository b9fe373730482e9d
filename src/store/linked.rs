//! Persisted formats of sign-in through another identity provider (src/oauth): the accounts linked to a user,
//! and the flows in progress between the redirect to a provider and its callback.
//!
//! Framed and pinned like the other records ([`super::records`]): a version byte, postcard, golden bytes below.

use serde::{Deserialize, Serialize};

use super::codec::Versioned;

/// An identity at a provider linked to a user. Key: its own UUID v7. At most one per (provider, subject): the
/// users actor keeps that on one node, the database's unique constraint across nodes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkedAccountRecordV1 {
    pub id: [u8; 16],
    pub user_id: [u8; 16],
    /// The configured provider's id (`[[oauth.providers]] id`).
    pub provider: String,
    /// The provider's stable identifier of the person (`sub`; GitHub's numeric id).
    pub subject: String,
    /// The address the provider gave when the link was made (normalised), for the owner and the administrators.
    pub email: String,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
    /// The provider's tokens sealed with the data directory's key, when `[oauth] store_tokens` is on; `None`
    /// otherwise (the default).
    pub sealed_tokens: Option<Vec<u8>>,
}

/// A sign-in (or a link) started and not yet finished. Key: SHA-256 of the `state` sent to the provider, so a
/// copied data directory holds no usable state. Single use: taken (deleted) by the callback; expires after 10
/// minutes. Held in the store, not in one node's memory, so the callback may reach any node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OAuthFlowRecordV1 {
    pub provider: String,
    /// PKCE (S256): the verifier the token request proves the code with.
    pub pkce_verifier: String,
    /// OpenID Connect: the nonce the ID token must carry (empty for plain OAuth 2).
    pub nonce: String,
    /// SHA-256 of the flow cookie given to the browser that started it: the callback must come from that browser.
    pub browser: [u8; 32],
    /// The `redirect_uri` sent to the provider (the token request repeats it).
    pub redirect_uri: String,
    pub callback_url: String,
    pub error_url: Option<String>,
    pub new_user_url: Option<String>,
    /// `link-social`: the signed-in user the identity is to be linked to; `None` for a sign-in.
    pub link_user: Option<[u8; 16]>,
    pub expires_at_ms: i64,
}

impl Versioned for LinkedAccountRecordV1 {
    const VERSION: u8 = 1;
    const KIND: &'static str = "linked account";
}

impl Versioned for OAuthFlowRecordV1 {
    const VERSION: u8 = 1;
    const KIND: &'static str = "sign-in flow";
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::codec::{decode, encode};

    #[test]
    fn linked_account_golden_bytes() {
        let account = LinkedAccountRecordV1 {
            id: [1; 16],
            user_id: [2; 16],
            provider: "g".into(),
            subject: "s".into(),
            email: "a@b".into(),
            created_at_ms: 1,
            updated_at_ms: 64,
            sealed_tokens: None,
        };
        let mut expected = vec![1];
        expected.extend([1; 16]);
        expected.extend([2; 16]);
        expected.extend([1, b'g', 1, b's', 3, b'a', b'@', b'b', 2, 0x80, 0x01, 0]);
        assert_eq!(encode(&account), expected);
        assert_eq!(decode::<LinkedAccountRecordV1>(&expected).unwrap(), account);
    }

    #[test]
    fn flow_golden_bytes() {
        let flow = OAuthFlowRecordV1 {
            provider: "g".into(),
            pkce_verifier: "v".into(),
            nonce: "n".into(),
            browser: [3; 32],
            redirect_uri: "r".into(),
            callback_url: "/".into(),
            error_url: None,
            new_user_url: Some("/n".into()),
            link_user: Some([4; 16]),
            expires_at_ms: 1,
        };
        let mut expected = vec![1, 1, b'g', 1, b'v', 1, b'n'];
        expected.extend([3; 32]);
        expected.extend([1, b'r', 1, b'/', 0, 1, 2, b'/', b'n', 1]);
        expected.extend([4; 16]);
        expected.push(2);
        assert_eq!(encode(&flow), expected);
        assert_eq!(decode::<OAuthFlowRecordV1>(&expected).unwrap(), flow);
    }
}
