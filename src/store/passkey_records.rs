//! Persisted formats of passkeys (WebAuthn credentials) and of the challenges a ceremony keeps between its options
//! and its verification. Framed like every record (`[format version][postcard]`, see [`super::records`]) and pinned
//! by the golden-bytes tests below.
//!
//! A passkey keeps the credential as the authenticator gave it (its id and its COSE public key, the bytes
//! better-auth's plugin stores too), not a library's serialisation of it: a credential must outlive an upgrade of
//! the WebAuthn library, and one imported from better-auth has only these fields.

use serde::{Deserialize, Serialize};

use super::codec::Versioned;

/// A passkey. Key: its owner's id ‖ its own id, so one account's passkeys are one range; a second index finds one
/// by credential id (the only thing a sign-in with a passkey alone names).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PasskeyRecordV1 {
    pub id: [u8; 16],
    pub user_id: [u8; 16],
    /// Given by the user; `None` until named.
    pub name: Option<String>,
    pub credential_id: Vec<u8>,
    /// The credential's public key, a COSE_Key (CBOR), exactly as in the authenticator data.
    pub public_key: Vec<u8>,
    /// The authenticator's signature counter as last seen (0: the authenticator keeps none).
    pub counter: u32,
    /// May exist on several devices (synced): better-auth's `deviceType` `multiDevice`, else `singleDevice`.
    pub backup_eligible: bool,
    pub backed_up: bool,
    /// Hints for the browser (`internal`, `usb`, `hybrid` …), as the browser reported them.
    pub transports: Vec<String>,
    /// The authenticator model, when it said (all zeros from most platforms).
    pub aaguid: Option<[u8; 16]>,
    pub created_at_ms: i64,
}

/// What a ceremony's options promised, kept until its verification (at most five minutes). Key: SHA-256 of the
/// random token in the browser's challenge cookie, so the state is bound to that browser and a copy of the store
/// holds nothing a browser could present. Taken (deleted) by the verification that uses it: single use.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PasskeyChallengeRecordV1 {
    /// 1: registration, 2: authentication.
    pub kind: u8,
    /// Registration: the account the passkey is for. Authentication: the signed-in caller, if any.
    pub user_id: Option<[u8; 16]>,
    /// The WebAuthn library's ceremony state (challenge, policy, allowed credentials), as its own JSON. Short-lived
    /// by nature: one a later version cannot read is refused like an expired one.
    pub state: Vec<u8>,
    pub expires_at_ms: i64,
}

impl Versioned for PasskeyRecordV1 {
    const VERSION: u8 = 1;
    const KIND: &'static str = "passkey";
}

impl Versioned for PasskeyChallengeRecordV1 {
    const VERSION: u8 = 1;
    const KIND: &'static str = "passkey challenge";
}

/// The key of a passkey in the embedded store: owner ‖ id.
pub(crate) fn passkey_key(user: [u8; 16], id: [u8; 16]) -> [u8; 32] {
    let mut key = [0; 32];
    key[..16].copy_from_slice(&user);
    key[16..].copy_from_slice(&id);
    key
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::codec::{decode, encode};

    #[test]
    fn passkey_golden_bytes() {
        let passkey = PasskeyRecordV1 {
            id: [1; 16],
            user_id: [2; 16],
            name: Some("Key".into()),
            credential_id: vec![9, 8],
            public_key: vec![0xa5],
            counter: 300,
            backup_eligible: true,
            backed_up: false,
            transports: vec!["usb".into()],
            aaguid: Some([3; 16]),
            created_at_ms: 64,
        };
        let mut expected = vec![1];
        expected.extend([1; 16]);
        expected.extend([2; 16]);
        expected.extend([1, 3, b'K', b'e', b'y', 2, 9, 8, 1, 0xa5, 0xac, 0x02, 1, 0, 1, 3, b'u', b's', b'b', 1]);
        expected.extend([3; 16]);
        expected.extend([0x80, 0x01]);
        assert_eq!(encode(&passkey), expected);
        assert_eq!(decode::<PasskeyRecordV1>(&expected).unwrap(), passkey);
    }

    #[test]
    fn passkey_challenge_golden_bytes() {
        let challenge = PasskeyChallengeRecordV1 { kind: 2, user_id: None, state: b"{}".to_vec(), expires_at_ms: -1 };
        let expected = vec![1, 2, 0, 2, b'{', b'}', 1];
        assert_eq!(encode(&challenge), expected);
        assert_eq!(decode::<PasskeyChallengeRecordV1>(&expected).unwrap(), challenge);
    }

    #[test]
    fn a_users_passkeys_are_one_range() {
        assert_eq!(&passkey_key([1; 16], [2; 16])[..16], &[1; 16]);
        assert!(passkey_key([1; 16], [0xff; 16]) < passkey_key([2; 16], [0; 16]));
    }
}
