//! A second factor: TOTP (RFC 6238: HMAC-SHA1, 6 digits, 30-second steps, one step either side accepted) and
//! single-use backup codes, as better-auth's `twoFactor` plugin makes them, so its client and the authenticator
//! apps its users enrolled work unchanged.
//!
//! What an account holds ([`TwoFactor`]): the TOTP secret sealed with the data key (never in the clear at rest),
//! whether a first code confirmed it, the last time step accepted (a code is accepted once), and the backup codes
//! as keyed hashes (never recoverable: a new set replaces them all).

use hmac::{Hmac, Mac};
use sha1::Sha1;
use sha2::Sha256;

/// Seconds per TOTP step.
pub const STEP_SECS: u64 = 30;
/// Digits of a code.
pub const DIGITS: u32 = 6;
/// Backup codes in a set.
pub const BACKUP_CODES: usize = 10;
/// How long a sign-in waits for its second factor (better-auth's two-factor cookie: 10 minutes).
pub const CHALLENGE_TTL: std::time::Duration = std::time::Duration::from_secs(600);
/// Wrong codes one sign-in may try before it must start again with the password (better-auth's 5).
pub const CHALLENGE_ATTEMPTS: u32 = 5;
/// How long a trusted device skips the second factor (better-auth's 30 days).
pub const TRUSTED_DEVICE_TTL: std::time::Duration = std::time::Duration::from_secs(30 * 86_400);
/// How long a code sent by mail works (better-auth's `otpOptions.period` default: 3 minutes).
pub const OTP_TTL: std::time::Duration = std::time::Duration::from_secs(180);
/// Wrong tries one mailed code takes before a new one must be asked for (better-auth's `allowedAttempts`: 5).
pub const OTP_ATTEMPTS: u32 = 5;

/// An account's second factor. Cheap to clone: a handful of short byte strings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TwoFactor {
    /// The TOTP key (better-auth's: the UTF-8 bytes of a 32-character random string), sealed with the data key
    /// and bound to the account (see [`secret_context`]).
    pub sealed_secret: Box<[u8]>,
    /// A first code has confirmed the authenticator: until then sign-in asks for no second factor.
    pub enabled: bool,
    /// The last time step whose code was accepted: that step and older ones are refused from then on (replay).
    pub last_step: u64,
    /// Keyed hashes of the backup codes not used yet ([`backup_code_hash`]).
    pub backup_codes: Box<[[u8; 32]]>,
}

/// The associated data a TOTP secret is sealed with: a secret copied to another account does not open.
pub fn secret_context(user: &[u8; 16]) -> Vec<u8> {
    let mut context = b"service-auth totp secret v1:".to_vec();
    context.extend_from_slice(user);
    context
}

/// A new TOTP key as better-auth makes one: 32 characters of `a-zA-Z0-9`, used as bytes.
pub fn new_secret() -> Vec<u8> {
    random_string(32, b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789").into_bytes()
}

/// Ten backup codes as better-auth shows them: `xxxxx-xxxxx` of `a-zA-Z0-9`.
pub fn new_backup_codes() -> Vec<String> {
    (0..BACKUP_CODES)
        .map(|_| {
            let code = random_string(10, b"abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ");
            format!("{}-{}", &code[..5], &code[5..])
        })
        .collect()
}

/// A backup code's stored form: HMAC-SHA256 under a key derived from the data key, over the account and the
/// code. A copy of the store alone cannot be searched for codes (about 60 bits each) without the key.
pub fn backup_code_hash(mac_key: &[u8; 32], user: &[u8; 16], code: &str) -> [u8; 32] {
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(mac_key).expect("HMAC takes any key length");
    mac.update(b"service-auth backup code v1:");
    mac.update(user);
    mac.update(code.trim().as_bytes());
    mac.finalize().into_bytes().into()
}

/// A code to mail: six decimal digits, as better-auth's `generateRandomString(6, "0-9")`.
pub fn new_otp() -> String {
    random_string(DIGITS as usize, b"0123456789")
}

/// Where a mailed code is kept: derived from what it was sent for (the sign-in's challenge token, or the session
/// token), as better-auth keys it by the two-factor cookie or the session. Neither the code nor the cookie it
/// belongs to can be read from the key.
pub fn otp_key(scope: &[u8; 32]) -> [u8; 32] {
    use sha2::Digest;
    let mut hash = Sha256::new();
    hash.update(b"service-auth mailed code v1:");
    hash.update(scope);
    hash.finalize().into()
}

/// A mailed code's stored form: HMAC-SHA256 under the data key's MAC key, over the account, its key and the code,
/// so a copy of the store cannot be searched for the code (a million candidates) without the key.
pub fn otp_hash(mac_key: &[u8; 32], user: &[u8; 16], key: &[u8; 32], code: &str) -> [u8; 32] {
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(mac_key).expect("HMAC takes any key length");
    mac.update(b"service-auth mailed code v1:");
    mac.update(user);
    mac.update(key);
    mac.update(code.trim().as_bytes());
    mac.finalize().into_bytes().into()
}

/// The code of `secret` for time step `step` (RFC 4226's HOTP with RFC 6238's counter), six digits.
pub fn code_at(secret: &[u8], step: u64) -> u32 {
    let mut mac = <Hmac<Sha1> as Mac>::new_from_slice(secret).expect("HMAC takes any key length");
    mac.update(&step.to_be_bytes());
    let digest = mac.finalize().into_bytes();
    let offset = usize::from(digest[19] & 0x0f);
    let binary =
        u32::from_be_bytes([digest[offset] & 0x7f, digest[offset + 1], digest[offset + 2], digest[offset + 3]]);
    binary % 10u32.pow(DIGITS)
}

/// The time step of `unix_secs`.
pub fn step_of(unix_secs: u64) -> u64 {
    unix_secs / STEP_SECS
}

/// The step whose code `code` is, among the current one and one either side, and newer than `last_step`
/// (a code accepted once is refused after). Every candidate is computed and compared in constant time, so the
/// answer's time does not say which step matched.
pub fn verify(secret: &[u8], code: &str, now_step: u64, last_step: u64) -> Option<u64> {
    let code = code.trim();
    if code.len() != DIGITS as usize || !code.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let mut matched = None;
    for step in [now_step.saturating_sub(1), now_step, now_step + 1] {
        let expected = format!("{:06}", code_at(secret, step));
        let equal: bool = subtle::ConstantTimeEq::ct_eq(expected.as_bytes(), code.as_bytes()).into();
        if equal && step > last_step && matched.is_none() {
            matched = Some(step);
        }
    }
    matched
}

/// The `otpauth://` URI an authenticator app scans, as better-auth's `createOTP(…).url(issuer, email)` writes it.
pub fn uri(secret: &[u8], issuer: &str, account: &str) -> String {
    use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
    // JavaScript's encodeURIComponent for the label, and URLSearchParams (form encoding: a space is `+`) for the
    // query, as the plugin builds it.
    const COMPONENT: &AsciiSet = &NON_ALPHANUMERIC
        .remove(b'-')
        .remove(b'_')
        .remove(b'.')
        .remove(b'!')
        .remove(b'~')
        .remove(b'*')
        .remove(b'\'')
        .remove(b'(')
        .remove(b')');
    let form = |s: &str| url::form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
    format!(
        "otpauth://totp/{}:{}?secret={}&issuer={}&digits={DIGITS}&period={STEP_SECS}",
        utf8_percent_encode(issuer, COMPONENT),
        utf8_percent_encode(account, COMPONENT),
        base32(secret),
        form(issuer)
    )
}

/// RFC 4648 base32 without padding (what authenticator apps read).
pub fn base32(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 32] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
    let mut out = String::with_capacity(bytes.len().div_ceil(5) * 8);
    let (mut buffer, mut bits) = (0u32, 0u32);
    for &byte in bytes {
        buffer = (buffer << 8) | u32::from(byte);
        bits += 8;
        while bits >= 5 {
            bits -= 5;
            out.push(ALPHABET[((buffer >> bits) & 31) as usize] as char);
        }
    }
    if bits > 0 {
        out.push(ALPHABET[((buffer << (5 - bits)) & 31) as usize] as char);
    }
    out
}

/// RFC 4648 base32 (padding and case ignored); `None` for a character outside the alphabet.
pub fn base32_decode(text: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(text.len() * 5 / 8);
    let (mut buffer, mut bits) = (0u32, 0u32);
    for c in text.trim_end_matches('=').bytes() {
        let value = match c.to_ascii_uppercase() {
            c @ b'A'..=b'Z' => c - b'A',
            c @ b'2'..=b'7' => c - b'2' + 26,
            _ => return None,
        };
        buffer = (buffer << 5) | u32::from(value);
        bits += 5;
        if bits >= 8 {
            bits -= 8;
            out.push((buffer >> bits) as u8);
        }
    }
    Some(out)
}

/// `len` characters of `alphabet`, without modulo bias (rejection sampling over the OS generator).
pub(crate) fn random_string(len: usize, alphabet: &[u8]) -> String {
    let limit = 256 - 256 % alphabet.len();
    let mut out = String::with_capacity(len);
    while out.len() < len {
        let mut bytes = [0u8; 64];
        getrandom::fill(&mut bytes).expect("the OS random number generator failed");
        for b in bytes {
            if usize::from(b) < limit && out.len() < len {
                out.push(alphabet[usize::from(b) % alphabet.len()] as char);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 6238 appendix B, SHA-1: the 8-digit values, of which a 6-digit code is the last six digits.
    #[test]
    fn rfc_6238_test_vectors() {
        let secret = b"12345678901234567890";
        let vectors: [(u64, u32); 6] = [
            (59, 94_287_082),
            (1_111_111_109, 7_081_804),
            (1_111_111_111, 14_050_471),
            (1_234_567_890, 89_005_924),
            (2_000_000_000, 69_279_037),
            (20_000_000_000, 65_353_130),
        ];
        for (time, eight_digits) in vectors {
            assert_eq!(code_at(secret, step_of(time)), eight_digits % 1_000_000, "T = {time}");
        }
    }

    #[test]
    fn one_step_either_side_and_never_twice() {
        let secret = b"12345678901234567890";
        let now = step_of(1_234_567_890);
        let code = |step| format!("{:06}", code_at(secret, step));
        assert_eq!(verify(secret, &code(now), now, 0), Some(now));
        assert_eq!(verify(secret, &code(now - 1), now, 0), Some(now - 1));
        assert_eq!(verify(secret, &code(now + 1), now, 0), Some(now + 1));
        assert_eq!(verify(secret, &code(now - 2), now, 0), None, "two steps back is too old");
        assert_eq!(verify(secret, &code(now + 2), now, 0), None);
        assert_eq!(verify(secret, &code(now), now, now), None, "a code accepted once is refused");
        assert_eq!(verify(secret, &code(now - 1), now, now), None, "and so is an older one");
        assert_eq!(verify(secret, &code(now + 1), now, now), Some(now + 1));
        assert_eq!(verify(secret, "12345", now, 0), None);
        assert_eq!(verify(secret, "abcdef", now, 0), None);
        assert_eq!(verify(secret, &format!(" {} ", code(now)), now, 0), Some(now));
    }

    #[test]
    fn base32_round_trips_and_matches_rfc_4648() {
        assert_eq!(base32(b"foobar"), "MZXW6YTBOI");
        assert_eq!(base32(b"f"), "MY");
        assert_eq!(base32_decode("MZXW6YTBOI======").unwrap(), b"foobar");
        assert_eq!(base32_decode("mzxw6ytboi").unwrap(), b"foobar");
        assert!(base32_decode("MZ1").is_none());
        let secret = new_secret();
        assert_eq!(base32_decode(&base32(&secret)).unwrap(), secret);
    }

    #[test]
    fn the_uri_is_what_authenticator_apps_read() {
        let uri = uri(b"12345678901234567890", "My App", "alice@example.com");
        assert_eq!(
            uri,
            "otpauth://totp/My%20App:alice%40example.com?secret=GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ&issuer=My+App&digits=6&period=30"
        );
    }

    #[test]
    fn secrets_and_codes_have_better_auths_shapes() {
        let secret = new_secret();
        assert_eq!(secret.len(), 32);
        assert!(secret.iter().all(u8::is_ascii_alphanumeric));
        let codes = new_backup_codes();
        assert_eq!(codes.len(), 10);
        for code in &codes {
            assert_eq!((code.len(), &code[5..6]), (11, "-"), "{code}");
        }
        let key = [7; 32];
        let user = [1; 16];
        assert_eq!(backup_code_hash(&key, &user, &codes[0]), backup_code_hash(&key, &user, &codes[0]));
        assert_ne!(backup_code_hash(&key, &user, &codes[0]), backup_code_hash(&key, &[2; 16], &codes[0]));
        assert_ne!(backup_code_hash(&key, &user, &codes[0]), backup_code_hash(&[8; 32], &user, &codes[0]));
    }

    #[test]
    fn mailed_codes_are_six_digits_and_hashed_per_account_and_key() {
        let code = new_otp();
        assert!(code.len() == 6 && code.bytes().all(|b| b.is_ascii_digit()), "{code}");
        let (mac, user, key) = ([7; 32], [1; 16], otp_key(&[3; 32]));
        assert_ne!(key, otp_key(&[4; 32]));
        let hash = otp_hash(&mac, &user, &key, &code);
        assert_eq!(hash, otp_hash(&mac, &user, &key, &format!(" {code} ")));
        assert_ne!(hash, otp_hash(&mac, &[2; 16], &key, &code));
        assert_ne!(hash, otp_hash(&mac, &user, &otp_key(&[4; 32]), &code));
        assert_ne!(hash, otp_hash(&[8; 32], &user, &key, &code));
    }
}
