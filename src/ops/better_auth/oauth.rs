//! The identity provider's clients and users' consents from a better-auth database where it was an OAuth provider:
//! `@better-auth/oauth-provider`'s `oauthClient` table (the 1.7 line), or the older `oidcProvider` plugin's
//! `oauthApplication`, and the `oauthConsent` table both keep.
//!
//! A client keeps its `client_id` and its secret, so applications go on with the credentials they hold: the plugin
//! stores a secret as the unpadded base64url of its SHA-256 (`storeClientSecret: "hashed"`, its default with the
//! jwt plugin), which is what this service keeps, decoded; the older plugin's default kept the secret itself
//! (`"plain"`), which is hashed here and never stored. A secret kept encrypted (`disableJwtPlugin`, or a custom
//! hash) cannot be carried over and blocks: the operator deletes that row and registers the client again after the
//! import. Consents come over for the users and clients imported, so people are not asked again.
//!
//! Not imported: access and refresh tokens (`oauthAccessToken`, `oauthRefreshToken`). Access tokens here are JWTs
//! this service signs, and a refresh token belongs to a grant whose rotation and reuse history the other server
//! kept; carrying opaque tokens over would mean honouring a second kind of token for their whole life. Relying
//! parties sign their users in once more, with no consent page since the consents came over.
//!
//! Blocking: a client the rules of a registered one refuse (name, redirect URIs, scopes, grant types, a
//! `private_key_jwt` client), a `client_id` twice or already in the data directory, a secret in another form, a
//! date that is not one. Reported and dropped: consents of users or clients not imported, consents the older
//! plugin marks as not given.

use std::collections::{HashMap, HashSet};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;

use super::plan::{Mapping, Plan, date};
use super::{Cell, Column, Kind};
use crate::provider::clients::{ImportedClient, hash_secret, imported};
use crate::store::{OAuthConsentRecordV1, Store, StoreOp};

const fn col(name: &'static str, kind: Kind, required: bool) -> Column {
    Column { name, kind, required }
}

/// `@better-auth/oauth-provider`'s clients.
pub(crate) const OAUTH_CLIENT: &[Column] = &[
    col("id", Kind::Text, false),
    col("clientId", Kind::Text, true),
    col("clientSecret", Kind::Text, false),
    col("disabled", Kind::Bool, false),
    col("skipConsent", Kind::Bool, false),
    col("enableEndSession", Kind::Bool, false),
    col("scopes", Kind::Text, false),
    col("clientCredentialsScopes", Kind::Text, false),
    col("name", Kind::Text, false),
    col("redirectUris", Kind::Text, true),
    col("postLogoutRedirectUris", Kind::Text, false),
    col("tokenEndpointAuthMethod", Kind::Text, false),
    col("applicationType", Kind::Text, false),
    col("grantTypes", Kind::Text, false),
    col("createdAt", Kind::Time, false),
    col("updatedAt", Kind::Time, false),
];

/// The older `oidcProvider` plugin's clients.
pub(crate) const OAUTH_APPLICATION: &[Column] = &[
    col("id", Kind::Text, false),
    col("clientId", Kind::Text, true),
    col("clientSecret", Kind::Text, false),
    col("name", Kind::Text, false),
    col("redirectURLs", Kind::Text, true),
    col("type", Kind::Text, false),
    col("disabled", Kind::Bool, false),
    col("createdAt", Kind::Time, false),
    col("updatedAt", Kind::Time, false),
];

/// Users' consents (both plugins: `scopes` a list in the new one, space-separated in the old, which also says
/// whether the consent was given).
pub(crate) const OAUTH_CONSENT: &[Column] = &[
    col("clientId", Kind::Text, true),
    col("userId", Kind::Text, false),
    col("scopes", Kind::Text, true),
    col("consentGiven", Kind::Bool, false),
    col("createdAt", Kind::Time, false),
    col("updatedAt", Kind::Time, false),
];

fn text(cell: &Cell) -> Option<&str> {
    if let Cell::Text(t) = cell { Some(t.as_str()) } else { None }
}

fn flag(cell: &Cell) -> bool {
    matches!(cell, Cell::Bool(true))
}

/// A list as a better-auth adapter keeps `string[]`: JSON text (SQLite, and most adapters), a PostgreSQL array's
/// text (`{a,b}`), or (the older plugin's `redirectURLs` and `scopes`) items separated by commas or spaces.
fn list(cell: &Cell) -> Vec<String> {
    let Some(t) = text(cell).map(str::trim) else { return Vec::new() };
    if let Ok(items) = serde_json::from_str::<Vec<String>>(t) {
        return items;
    }
    let inner = t.strip_prefix('{').and_then(|t| t.strip_suffix('}')).unwrap_or(t);
    inner.split([',', ' ']).map(|s| s.trim().trim_matches('"')).filter(|s| !s.is_empty()).map(str::to_owned).collect()
}

/// The SHA-256 a stored client secret stands for: the plugin's hash (43 characters of base64url), or, for the
/// older plugin (`plain`), the secret itself hashed here. `Err` for anything else (encrypted, a custom hash).
fn secret_hash(stored: &str, plain_allowed: bool) -> Result<[u8; 32], &'static str> {
    if stored.len() == 43
        && let Ok(bytes) = B64.decode(stored)
        && let Ok(hash) = <[u8; 32]>::try_from(bytes.as_slice())
    {
        return Ok(hash);
    }
    // The older plugin made secrets of 32 letters and, by default, kept them as they were.
    if plain_allowed && (16..=64).contains(&stored.len()) && stored.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return Ok(hash_secret(stored));
    }
    Err("its secret is neither the plugin's SHA-256 nor a plain one (stored encrypted, or by a custom hash): delete \
         the row and register the client again after the import")
}

fn client_from_new(row: &[Cell], now_ms: i64) -> Result<ImportedClient, String> {
    let client_id = text(&row[1]).unwrap_or_default().to_owned();
    let auth_method = text(&row[11]).map(str::to_owned);
    let public = auth_method.as_deref() == Some("none");
    let secret = match text(&row[2]) {
        Some(stored) if !public => Some(secret_hash(stored, false)?),
        _ => None,
    };
    let grant_types = list(&row[13]);
    let mut scopes = list(&row[6]);
    if scopes.is_empty() {
        scopes = crate::provider::USER_SCOPES.iter().map(|s| (*s).to_owned()).collect();
    }
    // The plugin keeps a client's client_credentials scopes apart; here they are among its scopes.
    if grant_types.iter().any(|g| g == "client_credentials") {
        for scope in list(&row[7]) {
            if !scopes.contains(&scope) {
                scopes.push(scope);
            }
        }
    }
    let created = date(&row[14], "createdAt")?.unwrap_or(now_ms);
    Ok(ImportedClient {
        name: text(&row[8]).filter(|n| !n.trim().is_empty()).unwrap_or(&client_id).to_owned(),
        client_id,
        secret_hash: secret,
        redirect_uris: list(&row[9]),
        post_logout_redirect_uris: list(&row[10]),
        scopes,
        grant_types,
        auth_method,
        native: text(&row[12]) == Some("native"),
        skip_consent: flag(&row[4]),
        enable_end_session: flag(&row[5]),
        disabled: flag(&row[3]),
        created_at_ms: created,
        updated_at_ms: date(&row[15], "updatedAt")?.unwrap_or(created),
    })
}

fn client_from_old(row: &[Cell], now_ms: i64) -> Result<ImportedClient, String> {
    let client_id = text(&row[1]).unwrap_or_default().to_owned();
    // `public` (and a native app without a secret) authenticate with PKCE alone.
    let kind = text(&row[5]).unwrap_or("web");
    let secret = match text(&row[2]) {
        Some(stored) if kind != "public" => Some(secret_hash(stored, true)?),
        _ => None,
    };
    let public = secret.is_none();
    let created = date(&row[7], "createdAt")?.unwrap_or(now_ms);
    Ok(ImportedClient {
        name: text(&row[3]).filter(|n| !n.trim().is_empty()).unwrap_or(&client_id).to_owned(),
        client_id,
        secret_hash: secret,
        redirect_uris: list(&row[4]),
        scopes: crate::provider::USER_SCOPES.iter().map(|s| (*s).to_owned()).collect(),
        auth_method: public.then(|| "none".to_owned()),
        native: kind == "native",
        disabled: flag(&row[6]),
        created_at_ms: created,
        updated_at_ms: date(&row[8], "updatedAt")?.unwrap_or(created),
        ..ImportedClient::default()
    })
}

/// Adds the clients of `new` (`oauthClient`) and `old` (`oauthApplication`) rows, and the consents of `consents`
/// whose user and client are imported, to `plan`; `store`: the data directory, for clients already there.
pub(crate) fn attach(
    plan: &mut Plan,
    new: Option<&[Vec<Cell>]>,
    old: Option<&[Vec<Cell>]>,
    consents: Option<&[Vec<Cell>]>,
    store: &Store,
    now_ms: i64,
) {
    let (mut records, mut problems) = (Vec::new(), Vec::new());
    let mut seen = HashSet::new();
    let rows =
        new.unwrap_or_default().iter().map(|r| (r, true)).chain(old.unwrap_or_default().iter().map(|r| (r, false)));
    for (row, is_new) in rows {
        let id = text(&row[1]).unwrap_or("(no clientId)").to_owned();
        let built = if is_new { client_from_new(row, now_ms) } else { client_from_old(row, now_ms) };
        let record = built.and_then(|c| imported(c).map_err(|e| e.to_string()));
        match record {
            Err(why) => problems.push(format!("OAuth client {id}: {why}")),
            Ok(r) if !seen.insert(r.client_id.clone()) => {
                problems.push(format!("OAuth client {id}: its client_id is another client's in the import"));
            }
            Ok(r) => match store.oauth_client(&r.client_id) {
                Ok(Some(_)) => problems.push(format!("OAuth client {id}: already in the data directory")),
                Err(e) => problems.push(format!("OAuth client {id}: the data directory cannot be read: {e}")),
                Ok(None) => {
                    let better_auth_id = text(&row[0]);
                    plan.mapping.push(Mapping {
                        kind: "oauth_client",
                        better_auth_id: better_auth_id.unwrap_or(&r.client_id).to_owned(),
                        id: r.client_id.clone(),
                        key: r.name.clone(),
                    });
                    records.push(r);
                }
            },
        }
    }
    if plan.blocked_by("OAuth client(s)", &problems) {
        return;
    }
    let users: HashMap<&str, String> =
        plan.mapping.iter().filter(|m| m.kind == "user").map(|m| (m.better_auth_id.as_str(), m.id.clone())).collect();
    let scopes_of: HashMap<&str, &[String]> =
        records.iter().map(|r| (r.client_id.as_str(), r.scopes.as_slice())).collect();
    let (mut given, mut dropped, mut bad) = (Vec::new(), 0, Vec::new());
    let mut pairs = HashSet::new();
    for row in consents.unwrap_or_default() {
        if matches!(row[3], Cell::Bool(false)) {
            dropped += 1;
            continue;
        }
        let user = text(&row[1]).and_then(|u| users.get(u)).and_then(|u| crate::domain::UserId::parse(u));
        let client = text(&row[0]).and_then(|c| scopes_of.get_key_value(c));
        let (Some(user), Some((client_id, allowed))) = (user, client) else {
            dropped += 1;
            continue;
        };
        if !pairs.insert((user.to_bytes(), *client_id)) {
            continue;
        }
        let created = match date(&row[4], "createdAt") {
            Ok(at) => at.unwrap_or(now_ms),
            Err(why) => {
                bad.push(format!("a consent to {client_id}: {why}"));
                continue;
            }
        };
        let updated = date(&row[5], "updatedAt").ok().flatten().unwrap_or(created);
        // Only what the client may still ask for: a scope it lost is asked again if it ever asks for it.
        let scopes: Vec<String> = list(&row[2]).into_iter().filter(|s| allowed.contains(s)).collect();
        given.push(OAuthConsentRecordV1 {
            user_id: user.to_bytes(),
            client_id: (*client_id).to_owned(),
            scopes,
            created_at_ms: created,
            updated_at_ms: updated,
        });
    }
    if plan.blocked_by("OAuth consent(s)", &bad) {
        return;
    }
    if !records.is_empty() {
        plan.notes.push(format!(
            "{} OAuth client(s) imported with their client_id and secret; their access and refresh tokens are not \
             (users sign in to them once more)",
            records.len()
        ));
    }
    if !given.is_empty() {
        plan.notes.push(format!("{} OAuth consent(s) imported", given.len()));
    }
    if dropped > 0 {
        plan.notes.push(format!("{dropped} OAuth consent(s) of users or clients not imported, or not given: dropped"));
    }
    plan.ops.extend(records.into_iter().map(StoreOp::PutOAuthClient));
    plan.ops.extend(given.into_iter().map(StoreOp::PutOAuthConsent));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_and_secrets_as_the_adapters_keep_them() {
        let t = |s: &str| Cell::Text(s.into());
        assert_eq!(list(&t(r#"["openid","email"]"#)), ["openid", "email"]);
        assert_eq!(list(&t("{openid,email}")), ["openid", "email"]);
        assert_eq!(list(&t("openid email")), ["openid", "email"]);
        assert_eq!(
            list(&t("https://a.example/cb,https://b.example/cb")),
            ["https://a.example/cb", "https://b.example/cb"]
        );
        assert!(list(&Cell::Null).is_empty());
        let hashed = B64.encode(hash_secret("s3cret"));
        assert_eq!(secret_hash(&hashed, false), Ok(hash_secret("s3cret")));
        assert_eq!(
            secret_hash("abcdefghijklmnopqrstuvwxyzABCDEF", true),
            Ok(hash_secret("abcdefghijklmnopqrstuvwxyzABCDEF"))
        );
        assert!(secret_hash("abcdefghijklmnopqrstuvwxyzABCDEF", false).is_err(), "the new plugin never keeps it plain");
        assert!(secret_hash(&"0a".repeat(72), true).is_err(), "encrypted (nonce, secret and tag in hex)");
    }
}
