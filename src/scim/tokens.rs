//! An organization's SCIM bearer tokens: made by its owner or an administrator, shown once, stored as the SHA-256
//! of their secret part, found by the id they carry (`scim_<id>_<secret>`), compared in constant time. Read from
//! the store at each SCIM call, so a token revoked on one node is refused on every node at once.

use std::sync::Arc;

use base64::Engine;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::domain::{OrgId, Timestamp, UserId, action};
use crate::store::{ScimTokenRecordV1, Store, StoreError, StoreOp, StoreWriter, audit};

const PREFIX: &str = "scim_";
/// `scim_`, the id's 32 hex digits, `_`, 43 base64url characters (256 random bits).
const TOKEN_LEN: usize = 5 + 32 + 1 + 43;
/// An organization's most tokens at once (the plugin's `maxActiveCredentials`): enough to rotate with overlap.
pub const MAX_TOKENS: usize = 5;

/// What a token allows, RFC-style scope names (the plugin's): reading and writing users, and groups.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scopes(u8);

impl Scopes {
    pub const USERS_READ: Scopes = Scopes(1);
    pub const USERS_WRITE: Scopes = Scopes(2);
    pub const GROUPS_READ: Scopes = Scopes(4);
    pub const GROUPS_WRITE: Scopes = Scopes(8);
    pub const ALL: Scopes = Scopes(15);
    const NAMES: [(&str, u8); 4] =
        [("scim.users.read", 1), ("scim.users.write", 2), ("scim.groups.read", 4), ("scim.groups.write", 8)];

    /// The scopes named; an unknown name is refused with what is known.
    pub fn parse<'a>(names: impl IntoIterator<Item = &'a str>) -> Result<Scopes, TokenError> {
        let mut bits = 0;
        for name in names {
            let Some((_, bit)) = Self::NAMES.iter().find(|(n, _)| *n == name) else {
                return Err(TokenError::Invalid(format!(
                    "unknown scope {name:?}: scim.users.read, scim.users.write, scim.groups.read or scim.groups.write"
                )));
            };
            bits |= bit;
        }
        if bits == 0 {
            return Err(TokenError::Invalid("scopes must name at least one scope".into()));
        }
        Ok(Scopes(bits))
    }

    /// The bits a token record keeps.
    pub const fn bits(self) -> u8 {
        self.0
    }

    /// The scopes of a record's bits (bits of no scope are dropped).
    pub const fn from_bits(bits: u8) -> Scopes {
        Scopes(bits & Self::ALL.0)
    }

    pub fn names(self) -> Vec<&'static str> {
        Self::NAMES.iter().filter(|(_, bit)| self.0 & bit != 0).map(|(n, _)| *n).collect()
    }

    pub fn allows(self, needed: Scopes) -> bool {
        self.0 & needed.0 == needed.0
    }
}

/// A token as listed: never its secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenView {
    pub id: uuid::Uuid,
    pub org: OrgId,
    pub scopes: Scopes,
    pub expires_at: Option<Timestamp>,
    pub created_at: Timestamp,
    pub created_by: UserId,
}

/// Who a SCIM call comes from: the organization its token belongs to, and what the token allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caller {
    pub org: OrgId,
    pub token: uuid::Uuid,
    pub scopes: Scopes,
    /// The token's maker, whom the audit log names for what the directory does with it.
    pub on_behalf_of: UserId,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    #[error("{0}")]
    Invalid(String),
    #[error("SCIM token not found")]
    NotFound,
    #[error("the organization has {MAX_TOKENS} SCIM tokens already; revoke one first")]
    TooMany,
    #[error("the store is unavailable: {0}")]
    Store(String),
}

impl From<StoreError> for TokenError {
    fn from(e: StoreError) -> Self {
        TokenError::Store(e.to_string())
    }
}

/// Why a SCIM call's bearer token was refused (RFC 6750: all 401).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BearerError {
    #[error("SCIM bearer token is required")]
    Missing,
    #[error("Invalid SCIM bearer token")]
    Invalid,
    #[error("the store is unavailable: {0}")]
    Store(String),
}

/// The tokens' management. Cheap to clone.
#[derive(Clone)]
pub struct Tokens {
    store: Arc<Store>,
    writer: StoreWriter,
}

impl Tokens {
    pub fn new(store: Arc<Store>, writer: StoreWriter) -> Self {
        Self { store, writer }
    }

    async fn read<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Store) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let store = Arc::clone(&self.store);
        tokio::task::spawn_blocking(move || f(&store)).await.map_err(|e| StoreError::Io(e.to_string()))?
    }

    /// Organization `org`'s tokens, oldest first.
    pub async fn list(&self, org: OrgId) -> Result<Vec<TokenView>, TokenError> {
        let org_bytes = org.to_bytes();
        let mut found: Vec<ScimTokenRecordV1> =
            self.read(|s| s.scim_tokens()).await?.into_iter().filter(|t| t.org == org_bytes).collect();
        found.sort_by_key(|t| (t.created_at_ms, t.id));
        Ok(found.iter().map(view).collect())
    }

    /// Makes a token for `org`; answers it and the token itself (shown this once). Audited in the same commit
    /// (`scim_token.created`, which raises the webhook event of that name).
    pub async fn create(
        &self,
        org: OrgId,
        scopes: Scopes,
        expires_at: Option<Timestamp>,
        by: UserId,
        ip: &str,
    ) -> Result<(TokenView, String), TokenError> {
        let now = Timestamp::now();
        if expires_at.is_some_and(|at| at <= now) {
            return Err(TokenError::Invalid("expiresAt must be in the future".into()));
        }
        let live = self.list(org).await?.into_iter().filter(|t| t.expires_at.is_none_or(|at| at > now)).count();
        if live >= MAX_TOKENS {
            return Err(TokenError::TooMany);
        }
        let id = uuid::Uuid::now_v7();
        let mut secret = [0u8; 32];
        getrandom::fill(&mut secret).expect("the operating system's random source failed");
        let secret = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(secret);
        let token = format!("{PREFIX}{}_{secret}", id.simple());
        let record = ScimTokenRecordV1 {
            id: id.into_bytes(),
            org: org.to_bytes(),
            secret_hash: hash(&secret),
            scopes: scopes.0,
            expires_at_ms: expires_at.map(Timestamp::as_millis),
            created_by: by.to_bytes(),
            created_at_ms: now.as_millis(),
        };
        let expiry = expires_at.map_or_else(|| "never".to_owned(), Timestamp::to_rfc3339);
        let detail = format!("{id}: scopes [{}]; expires {expiry}", scopes.names().join(" "));
        let logged = audit::entry(action::SCIM_TOKEN_CREATED, Some(by), Some(org.into()), ip, detail);
        self.writer.write(vec![StoreOp::PutScimToken(record.clone()), logged]).await?;
        Ok((view(&record), token))
    }

    /// Revokes token `id` of `org` (another organization's is not found). It stops working at once, on every
    /// node. Audited (`scim_token.revoked`).
    pub async fn revoke(&self, org: OrgId, id: uuid::Uuid, by: UserId, ip: &str) -> Result<(), TokenError> {
        let key = id.into_bytes();
        let record = self.read(move |s| s.scim_token(key)).await?;
        let Some(record) = record.filter(|r| r.org == org.to_bytes()) else {
            return Err(TokenError::NotFound);
        };
        let logged = audit::entry(action::SCIM_TOKEN_REVOKED, Some(by), Some(org.into()), ip, id.to_string());
        self.writer.write(vec![StoreOp::DeleteScimToken(record.id), logged]).await?;
        Ok(())
    }

    /// The caller a presented bearer token stands for. A token not of our format, unknown, revoked, expired, or
    /// whose secret differs is refused alike.
    pub async fn authenticate(&self, presented: &str) -> Result<Caller, BearerError> {
        let Some((id, secret)) = split(presented) else {
            return Err(BearerError::Invalid);
        };
        let key = id.into_bytes();
        let record = self.read(move |s| s.scim_token(key)).await.map_err(|e| BearerError::Store(e.to_string()))?;
        let Some(record) = record else {
            return Err(BearerError::Invalid);
        };
        let same: bool = hash(secret).ct_eq(&record.secret_hash).into();
        let expired = record.expires_at_ms.is_some_and(|at| at <= Timestamp::now().as_millis());
        if !same || expired {
            return Err(BearerError::Invalid);
        }
        Ok(Caller {
            org: OrgId::from_bytes(record.org),
            token: id,
            scopes: Scopes(record.scopes),
            on_behalf_of: UserId::from_bytes(record.created_by),
        })
    }
}

fn hash(secret: &str) -> [u8; 32] {
    Sha256::digest(secret.as_bytes()).into()
}

/// The id and the secret part of a token of our format.
fn split(token: &str) -> Option<(uuid::Uuid, &str)> {
    if token.len() != TOKEN_LEN || !token.is_ascii() {
        return None;
    }
    let rest = token.strip_prefix(PREFIX)?;
    let (id, secret) = (&rest[..32], &rest[32..]);
    let secret = secret.strip_prefix('_')?;
    Some((uuid::Uuid::try_parse(id).ok()?, secret))
}

fn view(r: &ScimTokenRecordV1) -> TokenView {
    TokenView {
        id: uuid::Uuid::from_bytes(r.id),
        org: OrgId::from_bytes(r.org),
        scopes: Scopes(r.scopes),
        expires_at: r.expires_at_ms.map(Timestamp::from_millis),
        created_at: Timestamp::from_millis(r.created_at_ms),
        created_by: UserId::from_bytes(r.created_by),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_splits_into_its_id_and_secret_and_nothing_else_does() {
        let id = uuid::Uuid::now_v7();
        let secret = "A".repeat(43);
        let token = format!("scim_{}_{secret}", id.simple());
        assert_eq!(split(&token), Some((id, secret.as_str())));
        assert_eq!(split(&token[1..]), None);
        assert_eq!(split(&format!("scim_{}-{secret}", id.simple())), None);
        assert_eq!(split(&format!("scim_{}_{secret}é", id.simple())), None);
        assert_eq!(split(""), None);
    }

    #[test]
    fn scopes_parse_by_name_and_check_by_bits() {
        let s = Scopes::parse(["scim.users.read", "scim.users.write"]).unwrap();
        assert!(s.allows(Scopes::USERS_READ) && s.allows(Scopes::USERS_WRITE) && !s.allows(Scopes::GROUPS_READ));
        assert_eq!(s.names(), ["scim.users.read", "scim.users.write"]);
        assert!(Scopes::parse(["admin"]).is_err());
        assert!(Scopes::parse([]).is_err());
    }
}
