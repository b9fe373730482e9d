//! Persisted formats of the identity provider (src/provider): its signing keys. Framed like every record
//! ([`super::codec`]); the golden-bytes tests below pin them.

use serde::{Deserialize, Serialize};

use super::codec::Versioned;

/// A signing key of the identity provider. Key: its id (the JWK's `kid` is this id's simple form).
///
/// The private key is sealed with the data directory's key ([`crate::data_key`], the context naming the key's id),
/// so a copy of the store alone signs nothing; the public half is derived from it when the key is opened.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SigningKeyRecordV1 {
    pub id: [u8; 16],
    /// 1 EdDSA (Ed25519), 2 ES256 (P-256), 3 RS256 (RSA 2048): `provider::keys::Alg`'s codes.
    pub alg: u8,
    /// The private key, sealed: the Ed25519 seed, the P-256 scalar, or the RSA key's PKCS#8 DER.
    pub sealed: Vec<u8>,
    pub created_at_ms: i64,
    /// When it starts signing: published in the JWKS from its creation, so that relying parties (and the other
    /// nodes) hold it before the first token it signs reaches them.
    pub signs_from_ms: i64,
    /// When it stopped signing (its successor's `signs_from_ms`); `None` while current. It stays published until
    /// every token it signed has expired, then it is deleted.
    pub signs_until_ms: Option<i64>,
}

/// A client of the identity provider (an application that signs its users in here). Key: its `client_id`.
///
/// A confidential client's secret is stored only as its SHA-256 (the plugin's `storeClientSecret: "hashed"`): it
/// is 190 random bits, so a fast hash is enough, and the server never needs it back. Public clients have none.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientRecordV1 {
    /// The audit log's and the webhooks' name for it.
    pub id: [u8; 16],
    pub client_id: String,
    pub secret_hash: Option<[u8; 32]>,
    pub name: String,
    /// Matched byte for byte (a native client's loopback ones ignoring the port, RFC 8252 §7.3).
    pub redirect_uris: Vec<String>,
    pub post_logout_redirect_uris: Vec<String>,
    /// What it may ask for: of the standard scopes, and its own.
    pub scopes: Vec<String>,
    /// Bits: 1 authorization_code (with refresh_token), 2 client_credentials.
    pub grants: u8,
    /// 0 none (public), 1 client_secret_basic, 2 client_secret_post.
    pub auth_method: u8,
    /// `application_type` native (loopback and private-use redirects), else web.
    pub native: bool,
    /// First-party: no consent page (administrators only).
    pub skip_consent: bool,
    /// May ask for RP-initiated logout (administrators only, as the plugin's `enable_end_session`).
    pub end_session: bool,
    pub disabled: bool,
    /// `id_token_signed_response_alg`: `provider::keys::Alg`'s code (1 EdDSA, 2 ES256, 3 RS256).
    pub id_token_alg: u8,
    /// The administrator who registered it (`None`: the command line).
    pub created_by: Option<[u8; 16]>,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
}

impl Versioned for ClientRecordV1 {
    const VERSION: u8 = 1;
    const KIND: &'static str = "oauth client";
}

impl Versioned for SigningKeyRecordV1 {
    const VERSION: u8 = 1;
    const KIND: &'static str = "signing key";
}

#[cfg(test)]
mod tests {
    //! Golden bytes: do not update them; add a `…V2` record with a new version byte instead.
    use super::*;
    use crate::store::codec::{decode, encode};

    #[test]
    fn client_golden_bytes() {
        let client = ClientRecordV1 {
            id: [3; 16],
            client_id: "ab".into(),
            secret_hash: Some([5; 32]),
            name: "n".into(),
            redirect_uris: vec!["r".into()],
            post_logout_redirect_uris: vec![],
            scopes: vec!["openid".into()],
            grants: 1,
            auth_method: 1,
            native: false,
            skip_consent: true,
            end_session: false,
            disabled: false,
            id_token_alg: 1,
            created_by: None,
            created_at_ms: 1,
            updated_at_ms: 2,
        };
        let mut expected = vec![1];
        expected.extend([3; 16]);
        expected.extend([2, b'a', b'b', 1]);
        expected.extend([5; 32]);
        expected.extend([1, b'n', 1, 1, b'r', 0, 1, 6]);
        expected.extend(b"openid");
        expected.extend([1, 1, 0, 1, 0, 0, 1, 0, 2, 4]);
        assert_eq!(encode(&client), expected);
        assert_eq!(decode::<ClientRecordV1>(&expected).unwrap(), client);
    }

    #[test]
    fn signing_key_golden_bytes() {
        let key = SigningKeyRecordV1 {
            id: [1; 16],
            alg: 2,
            sealed: vec![7, 8],
            created_at_ms: 1,
            signs_from_ms: 2,
            signs_until_ms: Some(64),
        };
        let mut expected = vec![1];
        expected.extend([1; 16]);
        expected.extend([2, 2, 7, 8, 2, 4, 1, 0x80, 0x01]);
        assert_eq!(encode(&key), expected);
        assert_eq!(decode::<SigningKeyRecordV1>(&expected).unwrap(), key);
    }
}
