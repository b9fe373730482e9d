use std::fmt;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use sha2::{Digest, Sha256};

/// SHA-256 of a session token: how sessions are keyed in memory and on disk.
pub type TokenHash = [u8; 32];

/// A session token: 256 bits from the OS generator, written as 43 characters of unpadded base64url.
///
/// Only its hash is stored, so the data directory (or a backup of it) holds nothing that works as a cookie.
/// `Debug` is redacted so that a token cannot reach a log line by accident. Held inline (43 ASCII bytes), not in a
/// `String`: every session check parses one, and a heap allocation there is measurable.
#[derive(Clone, PartialEq, Eq)]
pub struct SessionToken([u8; SessionToken::ENCODED_LEN]);

impl SessionToken {
    const BYTES: usize = 32;
    const ENCODED_LEN: usize = 43;

    pub fn generate() -> Self {
        let mut bytes = [0u8; Self::BYTES];
        // The OS generator failing means the machine cannot make secrets at all: nothing sensible to go on with.
        getrandom::fill(&mut bytes).expect("the OS random number generator failed");
        let mut encoded = [0u8; Self::ENCODED_LEN];
        let written = URL_SAFE_NO_PAD.encode_slice(bytes, &mut encoded);
        debug_assert_eq!(written.ok(), Some(Self::ENCODED_LEN));
        Self(encoded)
    }

    /// Accepts exactly the shape `generate` produces; anything else cannot be one of our tokens.
    pub fn parse(s: &str) -> Option<Self> {
        let encoded: [u8; Self::ENCODED_LEN] = s.as_bytes().try_into().ok()?;
        // Room for the decoder's estimate (it rounds up to whole 3-byte groups); exactly 32 bytes must come out.
        let mut decoded = [0u8; Self::BYTES + 3];
        let ok = URL_SAFE_NO_PAD.decode_slice(encoded, &mut decoded).is_ok_and(|n| n == Self::BYTES);
        ok.then_some(Self(encoded))
    }

    pub fn hash(&self) -> TokenHash {
        Sha256::digest(self.0).into()
    }

    pub fn as_str(&self) -> &str {
        // Only base64url characters are ever stored (`generate` writes them, `parse` checks them): always ASCII.
        std::str::from_utf8(&self.0).unwrap_or_default()
    }
}

impl fmt::Debug for SessionToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SessionToken(<redacted>)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_tokens_parse_and_differ() {
        let a = SessionToken::generate();
        let b = SessionToken::generate();
        assert_ne!(a, b);
        assert_eq!(a.as_str().len(), 43);
        assert_eq!(SessionToken::parse(a.as_str()), Some(a.clone()));
        assert_ne!(a.hash(), b.hash());
    }

    #[test]
    fn rejects_other_shapes() {
        let t = SessionToken::generate();
        assert!(SessionToken::parse(&t.as_str()[1..]).is_none());
        assert!(SessionToken::parse(&format!("{}=", t.as_str())).is_none());
        assert!(SessionToken::parse(&"+".repeat(43)).is_none());
        assert!(SessionToken::parse("").is_none());
    }
}
