//! Standard Webhooks signatures: `v1,<base64 of HMAC-SHA256(key, "<id>.<timestamp>.<body>")>`, one per key, separated
//! by spaces, so that during a rotation's grace period a receiver holding either key accepts the message.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The prefix of a secret as administrators and the Standard Webhooks libraries spell it.
pub const SECRET_PREFIX: &str = "whsec_";

/// A new signing key: 24 random bytes (the specification asks for 24 to 64).
pub fn new_key() -> Vec<u8> {
    let mut key = vec![0; 24];
    getrandom::fill(&mut key).expect("the operating system's random source");
    key
}

/// The key as it is shown once to the administrator: `whsec_` and its base64.
pub fn secret_string(key: &[u8]) -> String {
    format!("{SECRET_PREFIX}{}", STANDARD.encode(key))
}

/// The `webhook-signature` header's value for `body` sent as message `id` at `timestamp` (Unix seconds).
pub fn signature(keys: &[&[u8]], id: &str, timestamp: i64, body: &str) -> String {
    keys.iter()
        .map(|key| {
            // HMAC takes a key of any length.
            let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC accepts any key length");
            mac.update(id.as_bytes());
            mac.update(b".");
            mac.update(timestamp.to_string().as_bytes());
            mac.update(b".");
            mac.update(body.as_bytes());
            format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()))
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example of the Standard Webhooks specification's reference test vectors (its libraries' own tests):
    /// secret `whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw`, id `msg_p5jXN8AQM9LWM0D4loKWxJek`, timestamp 1614265330,
    /// body `{"test": 2432232314}`.
    #[test]
    fn the_specifications_test_vector() {
        let key = STANDARD.decode("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let signed = signature(&[&key], "msg_p5jXN8AQM9LWM0D4loKWxJek", 1_614_265_330, r#"{"test": 2432232314}"#);
        assert_eq!(signed, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
    }

    #[test]
    fn two_keys_sign_side_by_side() {
        let signed = signature(&[b"a", b"b"], "msg_1", 1, "{}");
        let parts: Vec<&str> = signed.split(' ').collect();
        assert_eq!(parts.len(), 2);
        assert!(parts.iter().all(|p| p.starts_with("v1,")) && parts[0] != parts[1]);
        assert!(secret_string(&new_key()).starts_with("whsec_"));
    }
}
