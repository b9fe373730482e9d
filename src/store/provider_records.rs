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
