//! Passkeys: WebAuthn credentials an account signs in with, and the ceremonies that register and use them.

use webauthn_rs::prelude::COSEKey;

use super::{Name, PasskeyId, Timestamp, UserId};

/// A registered passkey. What it proves is checked by the WebAuthn library against `public_key`; this type only
/// carries what the store keeps and the client lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Passkey {
    pub id: PasskeyId,
    pub user_id: UserId,
    pub name: Option<Name>,
    pub credential_id: Vec<u8>,
    /// COSE_Key bytes, as the authenticator gave them.
    pub public_key: Vec<u8>,
    pub counter: u32,
    /// Synced across devices (better-auth's `deviceType: "multiDevice"`).
    pub backup_eligible: bool,
    pub backed_up: bool,
    pub transports: Vec<String>,
    pub aaguid: Option<uuid::Uuid>,
    pub created_at: Timestamp,
}

/// The COSE key `public_key` holds, as the WebAuthn library verifies with; `None` for bytes it cannot read. The
/// one reader of a stored key: a sign-in rebuilds its credential with it, and an import checks each key with it
/// before it writes one.
pub fn cose_key(public_key: &[u8]) -> Option<COSEKey> {
    let key: serde_cbor_2::Value = serde_cbor_2::from_slice(public_key).ok()?;
    COSEKey::try_from(&key).ok()
}

/// Which ceremony a challenge belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CeremonyKind {
    Registration,
    Authentication,
}

impl CeremonyKind {
    pub fn code(self) -> u8 {
        match self {
            Self::Registration => 1,
            Self::Authentication => 2,
        }
    }

    pub fn from_code(code: u8) -> Option<Self> {
        match code {
            1 => Some(Self::Registration),
            2 => Some(Self::Authentication),
            _ => None,
        }
    }
}

/// A ceremony between its options and its verification: what was asked of the authenticator (the library's state,
/// opaque here), for whom, until when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ceremony {
    pub kind: CeremonyKind,
    /// Registration: the account the passkey is for. Authentication: the signed-in caller, if any (the options then
    /// list the caller's passkeys).
    pub user: Option<UserId>,
    pub state: Vec<u8>,
    pub expires_at: Timestamp,
}
