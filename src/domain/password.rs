use std::borrow::Cow;
use std::fmt;
use std::sync::Mutex;

use base64::Engine;
use base64::engine::general_purpose::STANDARD_NO_PAD;
use unicode_normalization::UnicodeNormalization;

/// A password as given at sign-up: 8 to 128 Unicode scalar values, NFKC-normalised, never truncated.
///
/// NFKC makes the same password typed on two keyboards (a ligature, a full-width digit, a composed accent) hash
/// the same. Its `Debug` prints nothing of the value, so it cannot end up in a log line by accident.
#[derive(Clone)]
pub struct Password(String);

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PasswordError {
    #[error("Password too short")]
    TooShort,
    #[error("Password too long")]
    TooLong,
}

impl Password {
    pub const MIN_CHARS: usize = 8;
    pub const MAX_CHARS: usize = 128;

    /// For sign-up: both bounds, counted on the normalised form, which is what is hashed and what sign-in
    /// checks, so that any password accepted here is accepted there.
    pub fn new(raw: &str) -> Result<Self, PasswordError> {
        let password = Self::for_sign_in(raw)?;
        if password.0.chars().count() < Self::MIN_CHARS {
            return Err(PasswordError::TooShort);
        }
        Ok(password)
    }

    /// For sign-in: only the upper bound (a shorter password simply does not match), so that a policy change
    /// never locks out accounts created under the old one. The raw length is bounded first so that normalising
    /// an absurd input costs nothing (NFKC expands a character into at most 18).
    pub fn for_sign_in(raw: &str) -> Result<Self, PasswordError> {
        if raw.chars().count() > Self::MAX_CHARS {
            return Err(PasswordError::TooLong);
        }
        let normalised: String = raw.nfkc().collect();
        if normalised.chars().count() > Self::MAX_CHARS {
            return Err(PasswordError::TooLong);
        }
        Ok(Self(normalised))
    }

    /// The normalised text, for the policy's checks ([`super::PasswordPolicy`]).
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The normalised bytes to hash.
    pub fn as_bytes(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

/// Whether a stored hash is better-auth's `<salt: 32 hex digits>:<key: 128 hex digits>` (scrypt), kept as it was
/// imported until its owner's next sign-in re-hashes the password with argon2id. An argon2 PHC string starts
/// with `$`, so the two kinds cannot be confused.
pub fn is_legacy_hash(stored: &str) -> bool {
    let hex_digits = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_hexdigit());
    stored.split_once(':').is_some_and(|(salt, key)| hex_digits(salt, 32) && hex_digits(key, 128))
}

/// A stored password hash: an argon2 PHC string (`$argon2id$v=19$m=19456,t=2,p=1$<salt>$<hash>`), or anything
/// else kept as it is (a better-auth scrypt hash from an import, see [`is_legacy_hash`]).
///
/// Every account's hash is in memory, so a PHC string is kept compact: its parameters (the same for every
/// account hashed under one configuration) are stored once per process, and its salt and hash as the bytes their
/// base64 stands for: 51 bytes instead of 97 characters. [`as_phc`](Self::as_phc) gives the string back, byte for
/// byte (the base64 decoder refuses any text it would not write itself, and such text is kept as text).
#[derive(Clone, PartialEq, Eq)]
pub struct PasswordHash(Box<[u8]>);

/// `[TEXT][the string]`, or `[PHC][parameters' index][salt length][salt][hash]`.
const TEXT: u8 = 0;
const PHC: u8 = 1;

/// The parameter parts of the PHC strings seen (`$argon2id$v=19$m=19456,t=2,p=1$`), each once for the process:
/// a few configurations' worth. Bounded, so that a store full of odd parameters cannot grow it without end:
/// beyond it, hashes are kept as text.
static PHC_PARAMETERS: Mutex<Vec<&'static str>> = Mutex::new(Vec::new());
const MAX_PHC_PARAMETERS: usize = 256;

impl PasswordHash {
    pub fn new(stored: &str) -> Self {
        Self::compact(stored).unwrap_or_else(|| {
            let mut bytes = Vec::with_capacity(1 + stored.len());
            bytes.push(TEXT);
            bytes.extend_from_slice(stored.as_bytes());
            Self(bytes.into())
        })
    }

    fn compact(stored: &str) -> Option<Self> {
        let mut parts = stored.rsplitn(3, '$');
        let (hash, salt, parameters) = (parts.next()?, parts.next()?, parts.next()?);
        if !parameters.starts_with("$argon2") {
            return None;
        }
        // The parameters with the `$` that ends them.
        let parameters = &stored[..=parameters.len()];
        let (salt, hash) = (STANDARD_NO_PAD.decode(salt).ok()?, STANDARD_NO_PAD.decode(hash).ok()?);
        let index = u8::try_from(parameters_index(parameters)?).ok()?;
        let mut bytes = Vec::with_capacity(3 + salt.len() + hash.len());
        bytes.extend([PHC, index, u8::try_from(salt.len()).ok()?]);
        bytes.extend(salt);
        bytes.extend(hash);
        Some(Self(bytes.into()))
    }

    /// The stored string.
    pub fn as_phc(&self) -> Cow<'_, str> {
        self.as_stored().as_phc()
    }

    /// Whether this is a hash imported from better-auth (see [`is_legacy_hash`]).
    pub fn is_legacy(&self) -> bool {
        self.as_stored().is_legacy()
    }

    /// Which argon2 cost this hash has (see [`StoredHash::cost`]).
    pub fn cost(&self) -> Option<HashCost> {
        self.as_stored().cost()
    }

    /// The hash borrowed, as an account holds it (beside its name and e-mail address, in one allocation).
    pub fn as_stored(&self) -> StoredHash<'_> {
        StoredHash(&self.0)
    }

    /// The compact form's bytes, for an account to keep beside its other text ([`StoredHash::owned`] gives
    /// the value back).
    pub(super) fn bytes(&self) -> &[u8] {
        &self.0
    }
}

/// A stored password hash borrowed from where it is kept: an account keeps its hash in one allocation with its
/// name and e-mail address, and lends it out as this. The same reads as [`PasswordHash`].
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct StoredHash<'a>(&'a [u8]);

impl<'a> StoredHash<'a> {
    /// Bytes that [`PasswordHash::bytes`] gave.
    pub(super) fn from_bytes(bytes: &'a [u8]) -> Self {
        Self(bytes)
    }

    /// An owned copy.
    pub fn owned(self) -> PasswordHash {
        PasswordHash(self.0.into())
    }

    /// The stored string.
    pub fn as_phc(self) -> Cow<'a, str> {
        match self.0 {
            [PHC, index, salt_len, rest @ ..] => {
                let parameters = lock_parameters().get(usize::from(*index)).copied().unwrap_or_default();
                let (salt, hash) = rest.split_at(usize::from(*salt_len).min(rest.len()));
                let mut phc = String::with_capacity(parameters.len() + 1 + 4 * (salt.len() + hash.len()).div_ceil(3));
                phc.push_str(parameters);
                STANDARD_NO_PAD.encode_string(salt, &mut phc);
                phc.push('$');
                STANDARD_NO_PAD.encode_string(hash, &mut phc);
                Cow::Owned(phc)
            }
            // Made from a `&str`: always UTF-8.
            [_, text @ ..] => String::from_utf8_lossy(text),
            [] => Cow::Borrowed(""),
        }
    }

    /// Whether this is a hash imported from better-auth (see [`is_legacy_hash`]).
    pub fn is_legacy(self) -> bool {
        self.0.first() == Some(&TEXT) && is_legacy_hash(&self.as_phc())
    }

    /// Which argon2 cost this hash has, as a key that is cheap to count by (every account's is counted at
    /// start-up): the index of its parameters in the process's table, or, for a hash kept as text, its
    /// parameters. `None` for anything but an argon2 PHC string.
    pub fn cost(self) -> Option<HashCost> {
        match self.0 {
            [PHC, index, ..] => Some(HashCost::Known(*index)),
            [TEXT, text @ ..] => {
                let text = std::str::from_utf8(text).ok()?;
                argon2_parameters(text).map(|p| HashCost::Text(p.into()))
            }
            _ => None,
        }
    }
}

/// An argon2 cost as [`PasswordHash::cost`] gives it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum HashCost {
    /// An index in the process's table of parameters ([`HashCost::parameters`] gives them).
    Known(u8),
    Text(Box<str>),
}

impl HashCost {
    /// The parameter part of the PHC string (`$argon2id$v=19$m=19456,t=2,p=1$`).
    pub fn parameters(&self) -> Option<Cow<'static, str>> {
        match self {
            Self::Known(index) => lock_parameters().get(usize::from(*index)).map(|p| Cow::Borrowed(*p)),
            Self::Text(p) => Some(Cow::Owned(p.to_string())),
        }
    }
}

/// The parameter part of an argon2 PHC string, up to the `$` before the salt (`$argon2id$v=19$m=19456,t=2,p=1$`):
/// what verifying it costs, the same for every hash made under one configuration. `None` for anything else.
pub fn argon2_parameters(phc: &str) -> Option<&str> {
    let mut parts = phc.rsplitn(3, '$');
    let (_hash, _salt, parameters) = (parts.next()?, parts.next()?, parts.next()?);
    parameters.starts_with("$argon2").then(|| &phc[..=parameters.len()])
}

fn lock_parameters() -> std::sync::MutexGuard<'static, Vec<&'static str>> {
    PHC_PARAMETERS.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The index of `parameters` in [`PHC_PARAMETERS`], added if new and there is room.
fn parameters_index(parameters: &str) -> Option<usize> {
    let mut known = lock_parameters();
    if let Some(index) = known.iter().position(|p| *p == parameters) {
        return Some(index);
    }
    if known.len() >= MAX_PHC_PARAMETERS {
        return None;
    }
    // Kept for the life of the process, like the configuration they come from; bounded above.
    known.push(Box::leak(parameters.into()));
    Some(known.len() - 1)
}

impl From<&str> for PasswordHash {
    fn from(stored: &str) -> Self {
        Self::new(stored)
    }
}

impl From<String> for PasswordHash {
    fn from(stored: String) -> Self {
        Self::new(&stored)
    }
}

impl fmt::Display for PasswordHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.as_phc())
    }
}

impl fmt::Display for StoredHash<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.as_phc())
    }
}

impl fmt::Debug for StoredHash<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PasswordHash(<redacted>)")
    }
}

/// Not the hash itself: a `User` printed for debugging does not carry it into a log.
impl fmt::Debug for PasswordHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PasswordHash(<redacted>)")
    }
}

impl fmt::Debug for Password {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Password(<redacted>)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_count_scalar_values() {
        assert_eq!(Password::new("1234567").err(), Some(PasswordError::TooShort));
        assert!(Password::new("12345678").is_ok());
        assert!(Password::new(&"🔑".repeat(8)).is_ok());
        assert!(Password::new(&"x".repeat(128)).is_ok());
        assert_eq!(Password::new(&"x".repeat(129)).err(), Some(PasswordError::TooLong));
        assert!(Password::for_sign_in("short").is_ok());
        assert_eq!(Password::for_sign_in(&"x".repeat(129)).err(), Some(PasswordError::TooLong));
    }

    /// U+FDFA normalises to 18 characters: 128 of them passed sign-up (counted before NFKC) and were then refused
    /// at sign-in (counted after). Both count after normalisation now.
    #[test]
    fn length_is_counted_after_normalisation_at_sign_up_and_sign_in() {
        let expanding = "\u{FDFA}".repeat(8);
        assert_eq!(Password::new(&expanding).err(), Some(PasswordError::TooLong));
        assert_eq!(Password::for_sign_in(&expanding).err(), Some(PasswordError::TooLong));
        assert!(Password::new(&"\u{FDFA}".repeat(7)).is_ok(), "7 × 18 = 126 characters");
        assert_eq!(Password::new("ﬁﬁﬁ").err(), Some(PasswordError::TooShort), "three ligatures are six letters");
        assert!(Password::new("ﬁﬁﬁﬁ").is_ok(), "four ligatures are eight letters");
    }

    #[test]
    fn normalises_nfkc() {
        let ligatures = Password::new("ﬁﬁﬁﬁﬁﬁﬁﬁ").unwrap();
        let plain = Password::for_sign_in("fifififififififi").unwrap();
        assert_eq!(ligatures.as_bytes(), plain.as_bytes());
    }

    #[test]
    fn a_stored_hash_comes_back_byte_for_byte_and_a_phc_string_is_kept_compact() {
        let phc = "$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHRzYWx0c2FsdA$aGFzaGhhc2hoYXNoaGFzaGhhc2hoYXNoaGFzaGhhc2g";
        let stored = PasswordHash::new(phc);
        assert_eq!(stored.as_phc(), phc);
        assert_eq!(stored.0.len(), 3 + 16 + 32, "the salt and the hash as bytes, not as base64");
        assert_eq!(stored, PasswordHash::from(phc.to_owned()), "the same string, the same value");
        assert!(!stored.is_legacy());
        let other = "$argon2id$v=19$m=65536,t=3,p=4$c2FsdHNhbHQ$aGFzaGhhc2g";
        assert_eq!(PasswordHash::new(other).as_phc(), other, "other parameters");
        assert_ne!(PasswordHash::new(other), stored);

        let scrypt = format!("{}:{}", "a1".repeat(16), "0f".repeat(64));
        let legacy = PasswordHash::new(&scrypt);
        assert_eq!(legacy.as_phc(), scrypt);
        assert!(legacy.is_legacy());
        // Kept as text, and so given back unchanged: base64 with padding, or with bits a decoder would drop, or
        // another alphabet; no salt; not argon2; empty.
        for text in [
            "$argon2id$v=19$m=19456,t=2,p=1$c2FsdA==$aGFzaA",
            "$argon2id$v=19$m=19456,t=2,p=1$c2FsdB$aGFzaA",
            "$argon2id$v=19$m=19456,t=2,p=1$c2-_dA$aGFzaA",
            "$argon2id$aGFzaA",
            "$scrypt$ln=15,r=8,p=1$c2FsdA$aGFzaA",
            "$argon2id$not-used",
            "",
        ] {
            let kept = PasswordHash::new(text);
            assert_eq!(kept.as_phc(), text);
            assert!(!kept.is_legacy(), "{text}");
        }
    }

    /// A hash kept compact and one kept as text name the same cost by the same parameters; anything that is not
    /// argon2 has none.
    #[test]
    fn the_cost_of_a_hash_is_its_parameters() {
        let parameters = "$argon2id$v=19$m=65536,t=3,p=4$";
        let compact = PasswordHash::new(&format!("{parameters}c2FsdHNhbHQ$aGFzaGhhc2g"));
        let text = PasswordHash::new(&format!("{parameters}c2FsdB$aGFzaA"));
        assert!(matches!(compact.cost(), Some(HashCost::Known(_))));
        assert!(matches!(text.cost(), Some(HashCost::Text(_))));
        for hash in [compact, text] {
            assert_eq!(hash.cost().and_then(|c| c.parameters()).as_deref(), Some(parameters));
        }
        assert_eq!(
            argon2_parameters("$argon2id$v=19$m=19456,t=2,p=1$c2FsdA$aGFzaA"),
            Some("$argon2id$v=19$m=19456,t=2,p=1$")
        );
        let scrypt = format!("{}:{}", "a1".repeat(16), "0f".repeat(64));
        for other in [scrypt.as_str(), "$scrypt$ln=15,r=8,p=1$c2FsdA$aGFzaA", "$argon2id$not-used", ""] {
            assert_eq!(PasswordHash::new(other).cost(), None, "{other}");
        }
    }

    #[test]
    fn a_stored_hash_is_not_printed_for_debugging() {
        let stored = PasswordHash::new("$argon2id$v=19$m=19456,t=2,p=1$c2FsdA$aGFzaA");
        assert_eq!(format!("{stored:?}"), "PasswordHash(<redacted>)");
    }

    #[test]
    fn debug_hides_the_value() {
        assert_eq!(format!("{:?}", Password::new("hunter2hunter2").unwrap()), "Password(<redacted>)");
    }

    proptest::proptest! {
        #[test]
        fn any_stored_hash_comes_back_unchanged(
            salt in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..40),
            hash in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..70),
            cost in 1u32..100_000,
            text in ".{0,120}",
        ) {
            let phc = format!(
                "$argon2id$v=19$m={cost},t=2,p=1${}${}",
                STANDARD_NO_PAD.encode(&salt),
                STANDARD_NO_PAD.encode(&hash)
            );
            proptest::prop_assert_eq!(PasswordHash::new(&phc).as_phc().into_owned(), phc);
            proptest::prop_assert_eq!(PasswordHash::new(&text).as_phc().into_owned(), text);
        }
    }
}
