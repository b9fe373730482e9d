//! The API keys of a better-auth database (`@better-auth/api-key`'s `apikey` table): each key comes over with its
//! hash, so the keys already handed out keep working here, with their name, prefix, expiry, enabled flag, limits,
//! quota, permissions and metadata.
//!
//! The plugin stores a key as the unpadded base64url of its SHA-256 (`defaultKeyHasher`); a key here is looked up
//! by the same SHA-256, so the hash is all that is needed and no key is ever seen. The owner is `referenceId` (the
//! 1.7 line) or `userId` (earlier schemas). better-auth's key ids are no UUIDs: new ids are minted and the mapping
//! file lists them.
//!
//! Blocking: a `key` that is not a SHA-256 in base64url (a plugin run with `disableKeyHashing` stores the keys
//! themselves: those are not imported, the operator issues new ones), a count or date that is not one,
//! permissions or metadata that are not JSON objects, a key twice, or one already in the data directory. Reported
//! and dropped: the keys of users not imported, and keys owned by an organization (`references: "organization"`,
//! which this service does not serve).

use std::collections::{HashMap, HashSet};

use super::plan::{Mapping, Plan, date};
use super::{Cell, Column, Kind};
use crate::domain::api_key::hash_from_stored;
use crate::store::api_key_records::ApiKeyRecordV1;
use crate::store::{Loaded, StoreOp};

pub(crate) const API_KEY: &[Column] = &[
    Column { name: "id", kind: Kind::Text, required: true },
    Column { name: "key", kind: Kind::Text, required: true },
    Column { name: "referenceId", kind: Kind::Text, required: false },
    Column { name: "userId", kind: Kind::Text, required: false },
    Column { name: "configId", kind: Kind::Text, required: false },
    Column { name: "name", kind: Kind::Text, required: false },
    Column { name: "start", kind: Kind::Text, required: false },
    Column { name: "prefix", kind: Kind::Text, required: false },
    Column { name: "enabled", kind: Kind::Bool, required: false },
    Column { name: "expiresAt", kind: Kind::Time, required: false },
    Column { name: "createdAt", kind: Kind::Time, required: false },
    Column { name: "updatedAt", kind: Kind::Time, required: false },
    Column { name: "rateLimitEnabled", kind: Kind::Bool, required: false },
    Column { name: "rateLimitTimeWindow", kind: Kind::Text, required: false },
    Column { name: "rateLimitMax", kind: Kind::Text, required: false },
    Column { name: "requestCount", kind: Kind::Text, required: false },
    Column { name: "lastRequest", kind: Kind::Time, required: false },
    Column { name: "remaining", kind: Kind::Text, required: false },
    Column { name: "refillAmount", kind: Kind::Text, required: false },
    Column { name: "refillInterval", kind: Kind::Text, required: false },
    Column { name: "lastRefillAt", kind: Kind::Time, required: false },
    Column { name: "permissions", kind: Kind::Text, required: false },
    Column { name: "metadata", kind: Kind::Text, required: false },
];

fn text(cell: &Cell) -> Option<&str> {
    if let Cell::Text(t) = cell { Some(t.as_str()) } else { None }
}

/// A count (NULL: none); a number the database kept as a real counts if it is whole.
fn count(cell: &Cell, what: &'static str) -> Result<Option<i64>, &'static str> {
    match cell {
        Cell::Null => Ok(None),
        Cell::Text(t) => {
            let t = t.trim();
            t.parse::<i64>()
                .ok()
                .or_else(|| t.parse::<f64>().ok().filter(|f| f.fract() == 0.0 && f.abs() < 9e15).map(|f| f as i64))
                .filter(|n| *n >= 0)
                .map(Some)
                .ok_or(what)
        }
        _ => Err(what),
    }
}

/// JSON object text (NULL: none), as the plugin keeps permissions and metadata.
fn object(cell: &Cell, what: &'static str) -> Result<Option<String>, &'static str> {
    match cell {
        Cell::Null => Ok(None),
        Cell::Text(t) => match serde_json::from_str::<serde_json::Value>(t) {
            Ok(serde_json::Value::Object(_)) => Ok(Some(t.clone())),
            Ok(serde_json::Value::Null) => Ok(None),
            _ => Err(what),
        },
        _ => Err(what),
    }
}

/// One row as a record for account `user`, or why it cannot be one.
fn record(row: &[Cell], user: [u8; 16], now_ms: i64) -> Result<ApiKeyRecordV1, String> {
    let hash = text(&row[1])
        .and_then(hash_from_stored)
        .ok_or("a key that is not a SHA-256 hash (was disableKeyHashing on?)")?;
    let created = date(&row[10], "createdAt")?.unwrap_or(now_ms);
    let owned = |cell: &Cell| text(cell).map(str::to_owned);
    Ok(ApiKeyRecordV1 {
        id: crate::domain::ApiKeyId::new().to_bytes(),
        user_id: user,
        hash,
        config_id: owned(&row[4]).unwrap_or_else(|| "default".into()),
        name: owned(&row[5]),
        start: owned(&row[6]),
        prefix: owned(&row[7]),
        // The plugin's defaults where a column is NULL or absent.
        enabled: !matches!(row[8], Cell::Bool(false)),
        expires_at_ms: date(&row[9], "expiresAt")?,
        created_at_ms: created,
        updated_at_ms: date(&row[11], "updatedAt")?.unwrap_or(created),
        rate_limit_enabled: !matches!(row[12], Cell::Bool(false)),
        rate_limit_time_window_ms: count(&row[13], "a rateLimitTimeWindow that is not a count")?,
        rate_limit_max: count(&row[14], "a rateLimitMax that is not a count")?,
        request_count: count(&row[15], "a requestCount that is not a count")?.unwrap_or(0),
        last_request_ms: date(&row[16], "lastRequest")?,
        remaining: count(&row[17], "a remaining that is not a count")?,
        refill_amount: count(&row[18], "a refillAmount that is not a count")?,
        refill_interval_ms: count(&row[19], "a refillInterval that is not a count")?,
        last_refill_at_ms: date(&row[20], "lastRefillAt")?,
        permissions: object(&row[21], "permissions that are not a JSON object")?,
        metadata: object(&row[22], "metadata that is not a JSON object")?,
    })
}

/// Adds each API key of `rows` whose owner is imported to `plan`; `existing`: the data directory, for keys already
/// there.
pub(crate) fn attach(plan: &mut Plan, rows: &[Vec<Cell>], existing: &Loaded, now_ms: i64) {
    let users: HashMap<&str, (String, String)> = plan
        .mapping
        .iter()
        .filter(|m| m.kind == "user")
        .map(|m| (m.better_auth_id.as_str(), (m.id.clone(), m.key.clone())))
        .collect();
    let mut seen: HashSet<[u8; 32]> = existing.api_keys.iter().map(|k| k.hash).collect();
    let (mut records, mut mapping, mut problems, mut dropped) = (Vec::new(), Vec::new(), Vec::new(), 0);
    for row in rows {
        let Some(id) = text(&row[0]) else {
            problems.push("an API key without its id".to_owned());
            continue;
        };
        let owner = text(&row[2]).or_else(|| text(&row[3]));
        let Some((user, email)) = owner.and_then(|o| users.get(o)) else {
            dropped += 1;
            continue;
        };
        let Some(user_id) = crate::domain::UserId::parse(user) else { continue };
        match record(row, user_id.to_bytes(), now_ms) {
            Err(why) => problems.push(format!("API key {id}: {why}")),
            Ok(r) if !seen.insert(r.hash) => {
                problems.push(format!("API key {id}: the same key is another API key's, here or in the import"));
            }
            Ok(r) => {
                mapping.push(Mapping {
                    kind: "api_key",
                    better_auth_id: id.to_owned(),
                    id: crate::domain::ApiKeyId::from_bytes(r.id).to_string(),
                    key: email.clone(),
                });
                records.push(r);
            }
        }
    }
    if dropped > 0 {
        plan.notes.push(format!("{dropped} API key(s) of users not imported (or of organizations): dropped"));
    }
    if plan.blocked_by("API key(s)", &problems) {
        return;
    }
    if !records.is_empty() {
        plan.notes.push(format!("{} API key(s) imported: they keep working here", records.len()));
    }
    plan.mapping.extend(mapping);
    plan.ops.extend(records.into_iter().map(StoreOp::PutApiKey));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_objects() {
        assert_eq!(count(&Cell::Text("86400000".into()), "x"), Ok(Some(86_400_000)));
        assert_eq!(count(&Cell::Text("10.0".into()), "x"), Ok(Some(10)));
        assert_eq!(count(&Cell::Null, "x"), Ok(None));
        assert!(count(&Cell::Text("-1".into()), "x").is_err());
        assert!(count(&Cell::Text("ten".into()), "x").is_err());
        assert_eq!(object(&Cell::Text(r#"{"a":["b"]}"#.into()), "x"), Ok(Some(r#"{"a":["b"]}"#.into())));
        assert_eq!(object(&Cell::Text("null".into()), "x"), Ok(None));
        assert!(object(&Cell::Text("[1]".into()), "x").is_err());
    }
}
