//! The second factors of a better-auth database (its `twoFactor` table), with `--secret`: better-auth encrypts the
//! TOTP secret and the backup codes with its own secret (`symmetricEncrypt`: XChaCha20-Poly1305 under the SHA-256
//! of the secret, hex of nonce ‖ ciphertext ‖ tag, optionally in a `$ba$<version>$` envelope). Each is decrypted
//! here, the TOTP secret sealed again with this data directory's key and the backup codes kept as keyed hashes
//! (as enrolment here does), so nobody enrols again.
//!
//! Without `--secret` the factors cannot be read: the accounts come over without one (reported), and sign in with
//! their password alone until they enrol again. A row that does not decrypt with the secret given blocks the
//! import (a wrong secret would otherwise drop every factor silently).

use std::collections::HashMap;

use chacha20poly1305::aead::{Aead, KeyInit};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use sha2::{Digest, Sha256};

use super::plan::Plan;
use super::{Cell, Column, Kind};
use crate::data_key::DataKey;
use crate::domain::two_factor;
use crate::store::{StoreOp, TwoFactorRecordV1};

pub(crate) const TWO_FACTOR: &[Column] = &[
    Column { name: "userId", kind: Kind::Text, required: true },
    Column { name: "secret", kind: Kind::Text, required: true },
    Column { name: "backupCodes", kind: Kind::Text, required: true },
    Column { name: "verified", kind: Kind::Bool, required: false },
];

/// Decrypts a value better-auth's `symmetricEncrypt` made with `secret`.
pub(crate) fn decrypt(secret: &str, data: &str) -> Option<String> {
    // `$ba$<version>$<hex>`: the versioned form (BETTER_AUTH_SECRETS); the secret given is that version's.
    let hex_text = match data.strip_prefix("$ba$") {
        Some(rest) => rest.split_once('$')?.1,
        None => data,
    };
    let bytes = hex::decode(hex_text).ok()?;
    if bytes.len() < 24 + 16 {
        return None;
    }
    let key: [u8; 32] = Sha256::digest(secret.as_bytes()).into();
    let (nonce, ciphertext) = bytes.split_at(24);
    let plain = XChaCha20Poly1305::new(&key.into()).decrypt(XNonce::from_slice(nonce), ciphertext).ok()?;
    String::from_utf8(plain).ok()
}

/// The TOTP key better-auth verifies with: the secret's UTF-8 bytes, or for `base32:<secret>` (imported from
/// another provider) the decoded bytes.
fn totp_key(secret: &str) -> Option<Vec<u8>> {
    match secret.strip_prefix("base32:") {
        Some(encoded) => two_factor::base32_decode(encoded),
        None => Some(secret.as_bytes().to_vec()),
    }
}

/// The backup codes as stored: encrypted JSON (the plugin's default), or plain JSON (`storeBackupCodes: "plain"`).
fn backup_codes(secret: &str, stored: &str) -> Option<Vec<String>> {
    let json = if stored.trim_start().starts_with('[') { stored.to_owned() } else { decrypt(secret, stored)? };
    serde_json::from_str(&json).ok()
}

fn text(cell: &Cell) -> Option<&str> {
    if let Cell::Text(t) = cell { Some(t.as_str()) } else { None }
}

/// Adds each enrolled factor of `rows` to its imported account in `plan`. `secret`: better-auth's; `key`: this
/// data directory's.
pub(crate) fn attach(plan: &mut Plan, rows: &[Vec<Cell>], secret: Option<&str>, key: &DataKey) {
    // Rows confirmed (better-auth's `verified`: NULL and true both mean on).
    let enrolled: Vec<&Vec<Cell>> = rows.iter().filter(|r| !matches!(r.get(3), Some(Cell::Bool(false)))).collect();
    if enrolled.is_empty() {
        return;
    }
    let Some(secret) = secret else {
        plan.notes.push(format!(
            "{} account(s) have a second factor in better-auth: without --secret it cannot be read, so they come \
             over without one (they sign in with the password and enrol again)",
            enrolled.len()
        ));
        return;
    };
    let ids: HashMap<&str, [u8; 16]> = plan
        .mapping
        .iter()
        .filter(|m| m.kind == "user")
        .filter_map(|m| Some((m.better_auth_id.as_str(), crate::domain::UserId::parse(&m.id)?.to_bytes())))
        .collect();
    let mut factors: HashMap<[u8; 16], TwoFactorRecordV1> = HashMap::new();
    let mut unreadable = Vec::new();
    for row in enrolled {
        let (Some(user), Some(sealed), Some(codes)) = (text(&row[0]), text(&row[1]), text(&row[2])) else {
            unreadable.push("(a row without its user, secret or codes)".to_owned());
            continue;
        };
        let Some(id) = ids.get(user) else { continue };
        let key_bytes = decrypt(secret, sealed).and_then(|s| totp_key(&s));
        let codes = backup_codes(secret, codes);
        let (Some(key_bytes), Some(codes)) = (key_bytes, codes) else {
            unreadable.push(user.to_owned());
            continue;
        };
        let backup_codes = codes.iter().map(|c| two_factor::backup_code_hash(&key.mac_key(), id, c)).collect();
        let sealed_secret = key.seal(&key_bytes, &two_factor::secret_context(id));
        factors.insert(*id, TwoFactorRecordV1 { sealed_secret, enabled: true, last_step: 0, backup_codes });
    }
    if !unreadable.is_empty() {
        let shown: Vec<String> = unreadable.iter().take(5).cloned().collect();
        plan.blocking.push(format!(
            "{} second factor(s) do not decrypt with the --secret given (is it BETTER_AUTH_SECRET, or the version of \
             it that encrypted them?): users {}",
            unreadable.len(),
            shown.join(", ")
        ));
        return;
    }
    let mut attached = 0;
    for op in &mut plan.ops {
        if let StoreOp::PutUser(user) = op
            && let Some(factor) = factors.remove(&user.id)
        {
            user.two_factor = Some(factor);
            attached += 1;
        }
    }
    plan.notes.push(format!(
        "{attached} second factor(s) (authenticator app and backup codes) imported: nobody enrols again"
    ));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Made by better-auth 1.7.25's `symmetricEncrypt` (node, `better-auth/crypto`) with this secret.
    const SECRET: &str = "a-better-auth-secret-for-the-import-test-0123456789";
    const TOTP: &str = "868f9473f322f2adda46075394f8fb9691b252a4fb9bc607d8df08d6ea5591da8e760a89fe45d8d78404ba9d55125c763e54ee136616f03202b8ff132f7385646341c91899cb15a3";
    const CODES: &str = "a42e7868b5392d206538b9fd3308358c868594ebc96b1da984cff999f9c3d633418bc57cd6352e809393bef5a0089d676b0290b89394ebf2172ba1b4c55ccf83e6a911f437";

    #[test]
    fn better_auths_encryption_is_read() {
        assert_eq!(decrypt(SECRET, TOTP).as_deref(), Some("JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP"));
        assert_eq!(backup_codes(SECRET, CODES).unwrap(), ["abcde-12345", "fghij-67890"]);
        assert_eq!(decrypt(SECRET, &format!("$ba$1${TOTP}")).as_deref(), Some("JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP"));
        assert_eq!(decrypt("another secret", TOTP), None);
        assert_eq!(decrypt(SECRET, "zz"), None);
        assert_eq!(backup_codes(SECRET, r#"["plain-codes"]"#).unwrap(), ["plain-codes"]);
        assert_eq!(totp_key("base32:MZXW6YTBOI").unwrap(), b"foobar");
    }
}
