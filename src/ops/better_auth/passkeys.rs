//! The passkeys of a better-auth database (`@better-auth/passkey`'s `passkey` table): each credential comes over
//! with its id, its COSE public key, its counter and its flags, so its owner signs in here with the same passkey.
//!
//! The plugin stores what `@simplewebauthn/server` gave it at registration: `credentialID` as unpadded base64url,
//! `publicKey` as base64 of the COSE key's bytes, `deviceType` `singleDevice` or `multiDevice` (backup eligible),
//! `backedUp`, `transports` comma-separated, `aaguid` as a UUID. These are exactly the fields a passkey record here
//! keeps (`crate::store::PasskeyRecordV1`); better-auth's passkey ids are no UUIDs, so new ids are minted and the
//! mapping file lists them.
//!
//! Blocking: a credential id or public key that does not decode (or a key that is no COSE key this service can
//! verify with), a counter that is not a 32-bit count, a credential id twice, or one already registered in the
//! data directory. Reported and dropped: the passkeys of users not imported.

use std::collections::{HashMap, HashSet};

use base64::Engine;
use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE_NO_PAD};

use super::plan::{Mapping, Plan};
use super::{Cell, Column, Kind};
use crate::store::{PasskeyRecordV1, Store, StoreOp};

pub(crate) const PASSKEY: &[Column] = &[
    Column { name: "id", kind: Kind::Text, required: true },
    Column { name: "name", kind: Kind::Text, required: false },
    Column { name: "publicKey", kind: Kind::Text, required: true },
    Column { name: "userId", kind: Kind::Text, required: true },
    Column { name: "credentialID", kind: Kind::Text, required: true },
    Column { name: "counter", kind: Kind::Text, required: false },
    Column { name: "deviceType", kind: Kind::Text, required: false },
    Column { name: "backedUp", kind: Kind::Bool, required: false },
    Column { name: "transports", kind: Kind::Text, required: false },
    Column { name: "createdAt", kind: Kind::Time, required: false },
    Column { name: "aaguid", kind: Kind::Text, required: false },
];

fn text(cell: &Cell) -> Option<&str> {
    if let Cell::Text(t) = cell { Some(t.as_str()) } else { None }
}

/// base64 in either alphabet, padded or not (the plugin writes `publicKey` padded standard and `credentialID`
/// unpadded base64url; other tools writing the schema differ).
fn decode(text: &str) -> Option<Vec<u8>> {
    let text = text.trim().trim_end_matches('=');
    let bytes = if text.contains(['-', '_']) { URL_SAFE_NO_PAD.decode(text) } else { STANDARD_NO_PAD.decode(text) };
    bytes.ok().filter(|b| !b.is_empty())
}

/// One row as a record for account `user`, or why it cannot be one.
fn record(row: &[Cell], user: [u8; 16], now_ms: i64) -> Result<PasskeyRecordV1, &'static str> {
    let credential_id = text(&row[4]).and_then(decode).ok_or("a credentialID that is not base64url")?;
    let public_key = text(&row[2]).and_then(decode).ok_or("a publicKey that is not base64")?;
    if crate::domain::cose_key(&public_key).is_none() {
        return Err("a publicKey that is no COSE key this service verifies with");
    }
    let counter = match &row[5] {
        Cell::Null => 0,
        cell => text(cell).and_then(|t| t.trim().parse::<u32>().ok()).ok_or("a counter that is not a count")?,
    };
    let name = text(&row[1]).and_then(|n| crate::domain::Name::parse(n).ok()).map(|n| n.as_str().to_owned());
    let transports = text(&row[8])
        .map(|t| t.split(',').map(str::trim).filter(|t| !t.is_empty()).map(str::to_owned).collect())
        .unwrap_or_default();
    let aaguid = text(&row[10])
        .and_then(|a| uuid::Uuid::parse_str(a.trim()).ok())
        .filter(|a| !a.is_nil())
        .map(|a| a.into_bytes());
    Ok(PasskeyRecordV1 {
        id: crate::domain::PasskeyId::new().to_bytes(),
        user_id: user,
        name,
        credential_id,
        public_key,
        counter,
        backup_eligible: text(&row[6]) == Some("multiDevice"),
        backed_up: matches!(row[7], Cell::Bool(true)),
        transports,
        aaguid,
        created_at_ms: if let Cell::Time(ms) = row[9] { ms } else { now_ms },
    })
}

/// Adds each passkey of `rows` whose owner is imported to `plan`; `store`: the data directory, for credentials
/// already registered there.
pub(crate) fn attach(plan: &mut Plan, rows: &[Vec<Cell>], store: &Store, now_ms: i64) {
    let users: HashMap<&str, (String, String)> = plan
        .mapping
        .iter()
        .filter(|m| m.kind == "user")
        .map(|m| (m.better_auth_id.as_str(), (m.id.clone(), m.key.clone())))
        .collect();
    let (mut records, mut mapping, mut problems, mut dropped) = (Vec::new(), Vec::new(), Vec::new(), 0);
    let mut seen = HashSet::new();
    for row in rows {
        let (Some(id), Some(owner)) = (text(&row[0]), text(&row[3])) else {
            problems.push("a passkey without its id or userId".to_owned());
            continue;
        };
        let Some((user, email)) = users.get(owner) else {
            dropped += 1;
            continue;
        };
        let Some(user_id) = crate::domain::UserId::parse(user) else { continue };
        match record(row, user_id.to_bytes(), now_ms) {
            Err(why) => problems.push(format!("passkey {id}: {why}")),
            Ok(r) if !seen.insert(r.credential_id.clone()) => {
                problems.push(format!("passkey {id}: its credential id is another passkey's too"));
            }
            Ok(r) => match store.passkey_by_credential(&r.credential_id) {
                Ok(None) => {
                    mapping.push(Mapping {
                        kind: "passkey",
                        better_auth_id: id.to_owned(),
                        id: crate::domain::PasskeyId::from_bytes(r.id).to_string(),
                        key: email.clone(),
                    });
                    records.push(r);
                }
                Ok(Some(_)) => problems.push(format!("passkey {id}: its credential is registered here already")),
                Err(e) => problems.push(format!("passkey {id}: reading the data directory: {e}")),
            },
        }
    }
    if dropped > 0 {
        plan.notes.push(format!("{dropped} passkey(s) of users not imported: dropped"));
    }
    if plan.blocked_by("passkey(s)", &problems) {
        return;
    }
    if !records.is_empty() {
        plan.notes.push(format!("{} passkey(s) imported: their owners sign in with them here", records.len()));
    }
    plan.mapping.extend(mapping);
    plan.ops.extend(records.into_iter().map(StoreOp::PutPasskey));
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::engine::general_purpose::STANDARD;

    #[test]
    fn both_alphabets_padded_or_not() {
        assert_eq!(decode("+/8=").unwrap(), [0xfb, 0xff]);
        assert_eq!(decode("-_8").unwrap(), [0xfb, 0xff]);
        assert_eq!(decode(&STANDARD.encode(b"abc")).unwrap(), b"abc");
        assert_eq!(decode(""), None);
        assert_eq!(decode("not base64!"), None);
    }
}
