//! The identity provider's clients: the applications that sign their users in here, registered by
//! administrators (the admin API, `service-auth client add`). A confidential client's secret is shown once and
//! stored as its SHA-256; a public one (a native or browser app) has none and must use PKCE.
//!
//! Clients are read from the store where they are needed rather than held in memory, as passkeys are: a client
//! disabled or removed on one node is then refused on every node at once, with no change log entry to wait for.
//! (The token endpoint's hot path will keep what it needs of them with the grants.)

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, PoisonError, RwLock};

use sha2::{Digest, Sha256};

use super::keys::Alg;
use crate::domain::{Timestamp, UserId, action};
use crate::store::{ClientRecord, Store, StoreError, StoreOp, StoreWriter, audit};

/// The standard scopes a user grants; the others a client may have are its own (`api:read`), which alone may be
/// given to the client itself (client credentials).
pub const USER_SCOPES: &[&str] = &["openid", "profile", "email", "offline_access"];
const MAX_NAME: usize = 100;
const MAX_URIS: usize = 20;
const MAX_URI: usize = 2048;
const MAX_SCOPES: usize = 50;
const MAX_SCOPE: usize = 64;
/// `client_id` and secrets: 32 letters, as the plugin makes them (a secret is ~182 random bits).
const ID_LEN: usize = 32;

const GRANT_CODE: u8 = 1;
const GRANT_CLIENT_CREDENTIALS: u8 = 2;
/// The device authorization grant (RFC 8628). An older node's view of a client ignores the bit: it serves no
/// device flow, and the client's other grants stay as they were.
const GRANT_DEVICE: u8 = 4;
/// The device authorization grant's name (RFC 8628 §3.4).
pub const DEVICE_GRANT: &str = "urn:ietf:params:oauth:grant-type:device_code";

/// How a client authenticates at the token endpoint (RFC 7591's `token_endpoint_auth_method`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthMethod {
    /// A public client: no secret; PKCE stands in for it.
    None,
    ClientSecretBasic,
    ClientSecretPost,
}

impl AuthMethod {
    pub const fn name(self) -> &'static str {
        match self {
            AuthMethod::None => "none",
            AuthMethod::ClientSecretBasic => "client_secret_basic",
            AuthMethod::ClientSecretPost => "client_secret_post",
        }
    }

    pub fn parse(name: &str) -> Option<AuthMethod> {
        [AuthMethod::None, AuthMethod::ClientSecretBasic, AuthMethod::ClientSecretPost]
            .into_iter()
            .find(|m| m.name() == name)
    }

    const fn code(self) -> u8 {
        match self {
            AuthMethod::None => 0,
            AuthMethod::ClientSecretBasic => 1,
            AuthMethod::ClientSecretPost => 2,
        }
    }

    fn from_code(code: u8) -> AuthMethod {
        match code {
            0 => AuthMethod::None,
            2 => AuthMethod::ClientSecretPost,
            _ => AuthMethod::ClientSecretBasic,
        }
    }
}

/// A client as administrators see it (never its secret); its wire shape is `http::dto::OAuthClient`.
#[derive(Debug, Clone)]
pub struct Client {
    pub id: uuid::Uuid,
    pub client_id: String,
    pub name: String,
    pub auth_method: AuthMethod,
    pub native: bool,
    pub redirect_uris: Vec<String>,
    pub post_logout_redirect_uris: Vec<String>,
    pub scopes: Vec<String>,
    pub grant_types: Vec<&'static str>,
    pub skip_consent: bool,
    pub end_session: bool,
    /// Where a signed logout token is POSTed when a session that gave it a grant ends (back-channel logout).
    pub backchannel_logout_uri: Option<String>,
    pub backchannel_logout_session_required: bool,
    pub disabled: bool,
    pub id_token_alg: Alg,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// What an administrator gives to register a client. `None`: the plugin's default.
#[derive(Debug, Default, Clone)]
pub struct NewClient {
    pub name: String,
    pub redirect_uris: Vec<String>,
    pub post_logout_redirect_uris: Vec<String>,
    /// Default: the standard four.
    pub scopes: Option<Vec<String>>,
    /// Default: `authorization_code` (which brings `refresh_token`).
    pub grant_types: Option<Vec<String>>,
    /// Default: `client_secret_basic`.
    pub auth_method: Option<String>,
    /// `web` (default) or `native`.
    pub application_type: Option<String>,
    pub skip_consent: bool,
    pub enable_end_session: bool,
    pub backchannel_logout_uri: Option<String>,
    pub backchannel_logout_session_required: bool,
    /// Default: EdDSA.
    pub id_token_signed_response_alg: Option<String>,
}

/// What a request asks to change of a client (`client_id`, its kind and its authentication never change).
#[derive(Debug, Default, Clone)]
pub struct ClientChange {
    pub name: Option<String>,
    pub redirect_uris: Option<Vec<String>>,
    pub post_logout_redirect_uris: Option<Vec<String>>,
    pub scopes: Option<Vec<String>>,
    pub grant_types: Option<Vec<String>>,
    pub skip_consent: Option<bool>,
    pub enable_end_session: Option<bool>,
    /// `Some(None)`: no back-channel logout any more.
    pub backchannel_logout_uri: Option<Option<String>>,
    pub backchannel_logout_session_required: Option<bool>,
    pub disabled: Option<bool>,
    pub id_token_signed_response_alg: Option<String>,
    pub rotate_secret: bool,
}

impl ClientChange {
    pub fn is_empty(&self) -> bool {
        self.name.is_none()
            && self.redirect_uris.is_none()
            && self.post_logout_redirect_uris.is_none()
            && self.scopes.is_none()
            && self.grant_types.is_none()
            && self.skip_consent.is_none()
            && self.enable_end_session.is_none()
            && self.backchannel_logout_uri.is_none()
            && self.backchannel_logout_session_required.is_none()
            && self.disabled.is_none()
            && self.id_token_signed_response_alg.is_none()
            && !self.rotate_secret
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// A field breaks a rule; the message names it (the plugin's `invalid_redirect_uri` and
    /// `invalid_client_metadata` cases).
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    InvalidRedirectUri(String),
    #[error("oauth client not found")]
    NotFound,
    #[error("the store is unavailable: {0}")]
    Store(String),
}

impl From<StoreError> for ClientError {
    fn from(e: StoreError) -> Self {
        ClientError::Store(e.to_string())
    }
}

/// Client management. Cheap to clone.
#[derive(Clone)]
pub struct Clients {
    store: Arc<Store>,
    writer: StoreWriter,
    /// On the embedded store: the clients read so far (see [`ClientCache`]).
    cache: Option<Arc<ClientCache>>,
}

/// The clients this node has read, so that authenticating a client (every token, introspection and revocation
/// request) is a lookup in memory instead of a read of the store on a blocking thread, which cost more than the
/// rest of an introspection (BENCHMARKS.md, "The identity provider (#46)"). Only on the embedded store, where
/// every change of a client is a commit of this node's writer, which shows it to [`ClientCache::apply`] before
/// whoever made the change hears it is done: a client disabled, changed or deleted is never answered from here
/// afterwards. On PostgreSQL, clients travel in no change log (another node's change would not reach this cache),
/// so each authentication reads the database, as before.
#[derive(Debug, Default)]
pub struct ClientCache {
    inner: RwLock<CacheInner>,
}

#[derive(Debug, Default)]
struct CacheInner {
    /// Each client's view made once when it was read, shared with every request that authenticates as it.
    clients: HashMap<String, Authenticating>,
    /// Counts the commits that changed a client: a read of the store that began before one is not kept, since it
    /// may have read what the commit replaced.
    generation: u64,
}

impl ClientCache {
    /// Forgets every client when a durable commit of this node changes one (a rare thing; this keeps it simple).
    pub fn apply(&self, ops: &[StoreOp]) {
        if ops.iter().any(|op| matches!(op, StoreOp::PutOAuthClient(_) | StoreOp::DeleteOAuthClient(_))) {
            let mut inner = self.inner.write().unwrap_or_else(PoisonError::into_inner);
            inner.clients.clear();
            inner.generation += 1;
        }
    }

    fn get(&self, client_id: &str) -> (Option<Authenticating>, u64) {
        let inner = self.inner.read().unwrap_or_else(PoisonError::into_inner);
        (inner.clients.get(client_id).cloned(), inner.generation)
    }

    /// Keeps `client`, read from the store after [`Self::get`] answered `generation`, unless a change came since.
    fn keep(&self, client: &Authenticating, generation: u64) {
        let mut inner = self.inner.write().unwrap_or_else(PoisonError::into_inner);
        if inner.generation == generation {
            inner.clients.insert(client.client.client_id.clone(), client.clone());
        }
    }
}

/// What authenticating a client reads: its view, shared and never changed (a change of the client makes a new one,
/// [`ClientCache::apply`]), and its secret's hash. Cloning it counts a reference; it copies nothing of the view.
#[derive(Debug, Clone)]
pub struct Authenticating {
    pub client: Arc<Client>,
    /// `None`: a public client.
    pub secret_hash: Option<[u8; 32]>,
}

impl From<&ClientRecord> for Authenticating {
    fn from(record: &ClientRecord) -> Self {
        Authenticating { client: Arc::new(view(record)), secret_hash: record.secret_hash }
    }
}

impl Clients {
    /// `cache`: on the embedded store only, and the writer's commits shown to it ([`ClientCache`]).
    pub fn new(store: Arc<Store>, writer: StoreWriter, cache: Option<Arc<ClientCache>>) -> Self {
        Self { store, writer, cache }
    }

    async fn read<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Store) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, ClientError> {
        let store = Arc::clone(&self.store);
        tokio::task::spawn_blocking(move || f(&store))
            .await
            .map_err(|e| ClientError::Store(e.to_string()))?
            .map_err(Into::into)
    }

    async fn write(&self, ops: Vec<StoreOp>) -> Result<(), ClientError> {
        self.writer.write(ops).await.map_err(|e| ClientError::Store(e.to_string()))
    }

    async fn find(&self, client_id: &str) -> Result<ClientRecord, ClientError> {
        let client_id = client_id.to_owned();
        self.read(move |s| s.oauth_client(&client_id)).await?.ok_or(ClientError::NotFound)
    }

    /// Every client, oldest first.
    pub async fn list(&self) -> Result<Vec<Client>, ClientError> {
        let mut all = self.read(|s| s.oauth_clients()).await?;
        all.sort_by(|a, b| a.created_at_ms.cmp(&b.created_at_ms).then(a.id.cmp(&b.id)));
        Ok(all.iter().map(view).collect())
    }

    pub async fn get(&self, client_id: &str) -> Result<Client, ClientError> {
        Ok(view(&self.find(client_id).await?))
    }

    /// The client and its secret's hash (`None`: a public client), for the token endpoint's authentication: from
    /// the cache where there is one ([`ClientCache`]).
    pub async fn with_secret(&self, client_id: &str) -> Result<Authenticating, ClientError> {
        let Some(cache) = &self.cache else {
            return Ok(Authenticating::from(&self.find(client_id).await?));
        };
        match cache.get(client_id) {
            (Some(known), _) => Ok(known),
            (None, generation) => {
                let known = Authenticating::from(&self.find(client_id).await?);
                cache.keep(&known, generation);
                Ok(known)
            }
        }
    }

    /// Registers a client; answers it and, for a confidential one, its secret (shown this once). Audited in the
    /// same commit, which raises the `oauth_client.created` webhook event.
    pub async fn create(
        &self,
        new: NewClient,
        by: Option<UserId>,
        ip: &str,
    ) -> Result<(Client, Option<String>), ClientError> {
        self.create_noted(new, by, ip, None).await
    }

    /// [`Self::create`], with `note` at the end of the audit entry's detail (how it was registered).
    pub async fn create_noted(
        &self,
        new: NewClient,
        by: Option<UserId>,
        ip: &str,
        note: Option<&str>,
    ) -> Result<(Client, Option<String>), ClientError> {
        let (record, secret) = build(new, by, Timestamp::now())?;
        let mut logged = created_entry(&record, by, ip);
        if let (StoreOp::PutAudit(entry), Some(note)) = (&mut logged, note) {
            entry.detail.push_str(&format!(" ({note})"));
        }
        self.write(vec![StoreOp::PutOAuthClient(record.clone()), logged]).await?;
        Ok((view(&record), secret))
    }

    /// Changes a client; answers it, and the new secret when it was rotated (the old one stops at once).
    pub async fn update(
        &self,
        client_id: &str,
        change: ClientChange,
        by: UserId,
        ip: &str,
    ) -> Result<(Client, Option<String>), ClientError> {
        let mut record = self.find(client_id).await?;
        let mut changed = Vec::new();
        if let Some(name) = change.name {
            record.name = name;
            changed.push(format!("name {:?}", record.name));
        }
        if let Some(uris) = change.redirect_uris {
            record.redirect_uris = uris;
            changed.push(format!("redirect_uris [{}]", record.redirect_uris.join(" ")));
        }
        if let Some(uris) = change.post_logout_redirect_uris {
            record.post_logout_redirect_uris = uris;
            changed.push(format!("post_logout_redirect_uris [{}]", record.post_logout_redirect_uris.join(" ")));
        }
        if let Some(scopes) = change.scopes {
            record.scopes = scopes;
            changed.push(format!("scopes [{}]", record.scopes.join(" ")));
        }
        if let Some(grants) = change.grant_types {
            record.grants = grant_bits(&grants)?;
            changed.push(format!("grant_types [{}]", grants.join(" ")));
        }
        if let Some(skip) = change.skip_consent {
            record.skip_consent = skip;
            changed.push(format!("skip_consent {skip}"));
        }
        if let Some(end) = change.enable_end_session {
            record.end_session = end;
            changed.push(format!("enable_end_session {end}"));
        }
        if let Some(uri) = change.backchannel_logout_uri {
            changed.push(format!("backchannel_logout_uri {}", uri.as_deref().unwrap_or("none")));
            record.backchannel_logout_uri = uri;
        }
        if let Some(required) = change.backchannel_logout_session_required {
            record.backchannel_session_required = required;
            changed.push(format!("backchannel_logout_session_required {required}"));
        }
        if let Some(disabled) = change.disabled {
            record.disabled = disabled;
            changed.push(format!("disabled {disabled}"));
        }
        if let Some(alg) = change.id_token_signed_response_alg {
            record.id_token_alg = parse_alg(&alg)?.code();
            changed.push(format!("id_token_signed_response_alg {alg}"));
        }
        check(&mut record)?;
        let mut secret = None;
        let target = Some(uuid::Uuid::from_bytes(record.id));
        let mut ops = Vec::new();
        if change.rotate_secret {
            if record.secret_hash.is_none() {
                return Err(ClientError::Invalid("a public client has no secret to rotate".into()));
            }
            let new = random_letters();
            record.secret_hash = Some(hash_secret(&new));
            secret = Some(new);
            let detail = format!("{}: a new secret; the old one no longer works", record.client_id);
            ops.push(audit::entry(action::OAUTH_CLIENT_SECRET_ROTATED, Some(by), target, ip, detail));
        }
        if !changed.is_empty() {
            let detail = format!("{}: {}", record.client_id, changed.join("; "));
            ops.push(audit::entry(action::OAUTH_CLIENT_UPDATED, Some(by), target, ip, detail));
        }
        record.updated_at_ms = Timestamp::now().as_millis();
        ops.insert(0, StoreOp::PutOAuthClient(record.clone()));
        self.write(ops).await?;
        Ok((view(&record), secret))
    }

    /// Removes a client. Audited (`oauth_client.deleted`).
    pub async fn delete(&self, client_id: &str, by: UserId, ip: &str) -> Result<(), ClientError> {
        let record = self.find(client_id).await?;
        let detail = format!("{} {:?}", record.client_id, record.name);
        let logged =
            audit::entry(action::OAUTH_CLIENT_DELETED, Some(by), Some(uuid::Uuid::from_bytes(record.id)), ip, detail);
        self.write(vec![StoreOp::DeleteOAuthClient(record.client_id), logged]).await
    }
}

/// `service-auth client add`: registers a client in the configured store, the server stopped (the embedded store)
/// or running (PostgreSQL). Audited with no actor, like the command line's other changes.
pub fn add_offline(config: &crate::config::Config, new: NewClient) -> Result<(Client, Option<String>), ClientError> {
    let (client, secret, ops) = created_offline(new)?;
    let store = Store::open_configured(config, crate::store::FaultSwitch::default())?;
    store.commit(&ops)?;
    store.close();
    Ok((client, secret))
}

/// A new client registered from the command line (no actor): the client, its secret (for a confidential one),
/// and what to commit, the record and its audit entry. `service-auth client add` and `service-auth seed`.
pub fn created_offline(new: NewClient) -> Result<(Client, Option<String>, Vec<StoreOp>), ClientError> {
    let (record, secret) = build(new, None, Timestamp::now())?;
    let ops = vec![StoreOp::PutOAuthClient(record.clone()), created_entry(&record, None, "")];
    Ok((view(&record), secret, ops))
}

fn created_entry(record: &ClientRecord, by: Option<UserId>, ip: &str) -> StoreOp {
    let kind = if record.secret_hash.is_some() { "confidential" } else { "public" };
    let mut detail = format!(
        "{} {:?} ({kind}): redirect_uris [{}]; scopes [{}]",
        record.client_id,
        record.name,
        record.redirect_uris.join(" "),
        record.scopes.join(" ")
    );
    if let Some(uri) = &record.backchannel_logout_uri {
        detail.push_str(&format!("; backchannel_logout_uri {uri}"));
    }
    audit::entry(action::OAUTH_CLIENT_CREATED, by, Some(uuid::Uuid::from_bytes(record.id)), ip, detail)
}

fn build(new: NewClient, by: Option<UserId>, now: Timestamp) -> Result<(ClientRecord, Option<String>), ClientError> {
    let auth_method = match new.auth_method.as_deref() {
        None => AuthMethod::ClientSecretBasic,
        Some(name) => AuthMethod::parse(name).ok_or_else(|| {
            ClientError::Invalid(format!(
                "token_endpoint_auth_method must be none, client_secret_basic or client_secret_post, not {name:?}"
            ))
        })?,
    };
    let native = match new.application_type.as_deref() {
        None | Some("web") => false,
        Some("native") => true,
        Some(other) => {
            return Err(ClientError::Invalid(format!("application_type must be web or native, not {other:?}")));
        }
    };
    let secret = (auth_method != AuthMethod::None).then(random_letters);
    let mut record = ClientRecord {
        id: uuid::Uuid::now_v7().into_bytes(),
        client_id: random_letters(),
        secret_hash: secret.as_deref().map(hash_secret),
        name: new.name,
        redirect_uris: new.redirect_uris,
        post_logout_redirect_uris: new.post_logout_redirect_uris,
        scopes: new.scopes.unwrap_or_else(|| USER_SCOPES.iter().map(|s| (*s).to_owned()).collect()),
        grants: match new.grant_types {
            None => GRANT_CODE,
            Some(grants) => grant_bits(&grants)?,
        },
        auth_method: auth_method.code(),
        native,
        skip_consent: new.skip_consent,
        end_session: new.enable_end_session,
        disabled: false,
        backchannel_logout_uri: new.backchannel_logout_uri,
        backchannel_session_required: new.backchannel_logout_session_required,
        id_token_alg: match new.id_token_signed_response_alg.as_deref() {
            None => Alg::EdDsa.code(),
            Some(alg) => parse_alg(alg)?.code(),
        },
        created_by: by.map(|u| *uuid::Uuid::from(u).as_bytes()),
        created_at_ms: now.as_millis(),
        updated_at_ms: now.as_millis(),
    };
    check(&mut record)?;
    Ok((record, secret))
}

/// A client as another server kept it (`import-better-auth`: `@better-auth/oauth-provider`'s `oauthClient`, the
/// older `oidcProvider`'s `oauthApplication`): its own `client_id` and its secret's SHA-256, kept, so that the
/// application goes on with the credentials it holds.
#[derive(Debug, Default, Clone)]
pub struct ImportedClient {
    pub client_id: String,
    pub secret_hash: Option<[u8; 32]>,
    pub name: String,
    pub redirect_uris: Vec<String>,
    pub post_logout_redirect_uris: Vec<String>,
    pub scopes: Vec<String>,
    pub grant_types: Vec<String>,
    /// `None`: client_secret_basic.
    pub auth_method: Option<String>,
    pub native: bool,
    pub skip_consent: bool,
    pub enable_end_session: bool,
    pub disabled: bool,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
}

/// The longest `client_id` kept (an imported one: the plugin's are 32 letters).
pub const MAX_CLIENT_ID: usize = 128;

/// An imported client's record, under the rules a registered one obeys (plus its `client_id`'s: 1 to
/// [`MAX_CLIENT_ID`] letters, digits, `-`, `_` or `.`, what the admin API's paths take).
pub fn imported(c: ImportedClient) -> Result<ClientRecord, ClientError> {
    let id_ok = !c.client_id.is_empty()
        && c.client_id.len() <= MAX_CLIENT_ID
        && c.client_id.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if !id_ok {
        return Err(ClientError::Invalid(format!(
            "client_id must be 1 to {MAX_CLIENT_ID} letters, digits, '-', '_' or '.'"
        )));
    }
    let auth_method = match c.auth_method.as_deref() {
        None => AuthMethod::ClientSecretBasic,
        Some(name) => AuthMethod::parse(name).ok_or_else(|| {
            ClientError::Invalid(format!(
                "token_endpoint_auth_method {name:?} is not served (none, client_secret_basic, client_secret_post)"
            ))
        })?,
    };
    let secret_hash = match (auth_method, c.secret_hash) {
        (AuthMethod::None, _) => None,
        (_, Some(hash)) => Some(hash),
        (_, None) => return Err(ClientError::Invalid("a confidential client without a secret".into())),
    };
    let grants = if c.grant_types.is_empty() { GRANT_CODE } else { grant_bits(&c.grant_types)? };
    let mut record = ClientRecord {
        id: uuid::Uuid::now_v7().into_bytes(),
        client_id: c.client_id,
        secret_hash,
        name: c.name,
        redirect_uris: c.redirect_uris,
        post_logout_redirect_uris: c.post_logout_redirect_uris,
        scopes: c.scopes,
        grants,
        auth_method: auth_method.code(),
        native: c.native,
        skip_consent: c.skip_consent,
        end_session: c.enable_end_session,
        disabled: c.disabled,
        backchannel_logout_uri: None,
        backchannel_session_required: false,
        id_token_alg: Alg::EdDsa.code(),
        created_by: None,
        created_at_ms: c.created_at_ms,
        updated_at_ms: c.updated_at_ms,
    };
    check(&mut record)?;
    Ok(record)
}

fn parse_alg(name: &str) -> Result<Alg, ClientError> {
    Alg::parse(name).ok_or_else(|| {
        ClientError::Invalid(format!("id_token_signed_response_alg must be EdDSA, ES256 or RS256, not {name:?}"))
    })
}

fn grant_bits(grants: &[String]) -> Result<u8, ClientError> {
    let mut bits = 0;
    for grant in grants {
        bits |= match grant.as_str() {
            // A refresh token comes with the code flow (the plugin's rule); naming it is allowed.
            "authorization_code" => GRANT_CODE,
            "refresh_token" => 0,
            "client_credentials" => GRANT_CLIENT_CREDENTIALS,
            DEVICE_GRANT => GRANT_DEVICE,
            other => return Err(ClientError::Invalid(format!("unsupported grant_type {other}"))),
        };
    }
    if bits == 0 {
        return Err(ClientError::Invalid(format!(
            "grant_types must include authorization_code, client_credentials or {DEVICE_GRANT}"
        )));
    }
    Ok(bits)
}

/// Every rule a client's fields obey, after a creation or a change (scopes are put in order and de-duplicated).
fn check(record: &mut ClientRecord) -> Result<(), ClientError> {
    let name = record.name.trim();
    if name.is_empty() || name.chars().count() > MAX_NAME || name.chars().any(char::is_control) {
        return Err(ClientError::Invalid(format!(
            "client_name must be 1 to {MAX_NAME} characters, without control characters"
        )));
    }
    record.name = name.to_owned();
    for (field, uris) in
        [("redirect_uris", &record.redirect_uris), ("post_logout_redirect_uris", &record.post_logout_redirect_uris)]
    {
        if uris.len() > MAX_URIS {
            return Err(ClientError::InvalidRedirectUri(format!("{field}: at most {MAX_URIS}")));
        }
        for (i, uri) in uris.iter().enumerate() {
            check_redirect_uri(uri, record.native)
                .map_err(|why| ClientError::InvalidRedirectUri(format!("{field}[{i}]: {why}")))?;
        }
    }
    if let Some(uri) = &record.backchannel_logout_uri {
        check_backchannel_uri(uri).map_err(|why| ClientError::Invalid(format!("backchannel_logout_uri: {why}")))?;
    }
    if record.backchannel_session_required && record.backchannel_logout_uri.is_none() {
        return Err(ClientError::Invalid("backchannel_logout_session_required needs a backchannel_logout_uri".into()));
    }
    if record.grants & GRANT_CODE != 0 && record.redirect_uris.is_empty() {
        return Err(ClientError::InvalidRedirectUri(
            "Redirect URIs are required for authorization_code and implicit grant types".into(),
        ));
    }
    let mut scopes: Vec<String> = Vec::with_capacity(record.scopes.len());
    for scope in &record.scopes {
        let valid = !scope.is_empty()
            && scope.len() <= MAX_SCOPE
            // RFC 6749 §3.3: %x21 / %x23-5B / %x5D-7E.
            && scope.bytes().all(|b| b == 0x21 || (0x23..=0x5b).contains(&b) || (0x5d..=0x7e).contains(&b));
        if !valid {
            return Err(ClientError::Invalid(format!(
                "scope {scope:?}: 1 to {MAX_SCOPE} printable ASCII characters, no space, quote or backslash"
            )));
        }
        if !scopes.contains(scope) {
            scopes.push(scope.clone());
        }
    }
    if scopes.len() > MAX_SCOPES {
        return Err(ClientError::Invalid(format!("at most {MAX_SCOPES} scopes")));
    }
    record.scopes = scopes;
    if record.grants & GRANT_CLIENT_CREDENTIALS != 0 {
        if record.secret_hash.is_none() {
            return Err(ClientError::Invalid("a public client cannot use client_credentials".into()));
        }
        if !record.scopes.iter().any(|s| !USER_SCOPES.contains(&s.as_str())) {
            return Err(ClientError::Invalid(
                "client_credentials needs a scope of the client's own (openid, profile, email and offline_access are \
                 a user's)"
                    .into(),
            ));
        }
    }
    Ok(())
}

/// A redirect URI (the plugin's `validateClientRedirectUri`, RFC 8252 for native apps): absolute, no fragment, no
/// user information; a web client's on https to a host that is not loopback; a native client's may also be http
/// on a loopback address (any port) or a private-use scheme in reverse-domain form (`com.example.app:/cb`).
fn check_redirect_uri(raw: &str, native: bool) -> Result<(), String> {
    if raw.len() > MAX_URI {
        return Err(format!("Redirect URI must be at most {MAX_URI} characters"));
    }
    let url = url::Url::parse(raw).map_err(|_| "Redirect URI must be an absolute URI".to_owned())?;
    if url.fragment().is_some() || raw.contains('#') {
        return Err("Redirect URI must not contain a fragment component".into());
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("Redirect URI must not contain user information".into());
    }
    let loopback = match url.host() {
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => IpAddr::V4(ip).is_loopback(),
        Some(url::Host::Ipv6(ip)) => IpAddr::V6(ip).is_loopback(),
        None => false,
    };
    match url.scheme() {
        "https" if url.host().is_some() && !loopback => Ok(()),
        "http" if native && loopback => Ok(()),
        "http" | "https" if native => {
            Err("a native client's http(s) redirect is https, or http to a loopback address".into())
        }
        "http" | "https" => Err("a web client's redirect URI must be https to a host that is not loopback".into()),
        scheme if native && scheme.contains('.') => Ok(()),
        _ if native => {
            Err("a native client's private-use scheme must be in reverse-domain form (com.example.app)".into())
        }
        _ => Err("a web client's redirect URI must be https to a host that is not loopback".into()),
    }
}

/// A back-channel logout URI (OpenID Connect Back-Channel Logout 1.0 §2.2): absolute, no fragment (the spec), no
/// user information; https, or http to a loopback address (a relying party on the same machine, and the tests).
/// Whether it aims inside the server's network is the deliverer's check, at every attempt, as for the webhooks
/// (`[webhooks] allow_internal_targets`).
fn check_backchannel_uri(raw: &str) -> Result<(), String> {
    if raw.len() > MAX_URI {
        return Err(format!("must be at most {MAX_URI} characters"));
    }
    let url = url::Url::parse(raw).map_err(|_| "must be an absolute https URI".to_owned())?;
    if url.fragment().is_some() || raw.contains('#') {
        return Err("must not contain a fragment component".into());
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("must not contain user information".into());
    }
    let loopback = match url.host() {
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => IpAddr::V4(ip).is_loopback(),
        Some(url::Host::Ipv6(ip)) => IpAddr::V6(ip).is_loopback(),
        None => return Err("must name a host".into()),
    };
    match url.scheme() {
        "https" => Ok(()),
        "http" if loopback => Ok(()),
        _ => Err("must be https (http only to a loopback address)".into()),
    }
}

/// Whether `presented` is one of `client`'s redirect URIs: byte for byte, except that a native client's loopback
/// redirect matches on any port (RFC 8252 §7.3: the app listens on whichever port it was given).
pub fn redirect_uri_matches(registered: &[String], native: bool, presented: &str) -> bool {
    registered.iter().any(|r| {
        r == presented
            || (native && loopback_without_port(r).is_some_and(|a| Some(a) == loopback_without_port(presented)))
    })
}

/// A loopback http URI with its port removed, for RFC 8252's comparison.
fn loopback_without_port(raw: &str) -> Option<String> {
    let mut url = url::Url::parse(raw).ok()?;
    let loopback = match url.host()? {
        url::Host::Domain(d) => d.eq_ignore_ascii_case("localhost"),
        url::Host::Ipv4(ip) => ip.is_loopback(),
        url::Host::Ipv6(ip) => ip.is_loopback(),
    };
    if url.scheme() != "http" || !loopback {
        return None;
    }
    url.set_port(None).ok()?;
    Some(url.to_string())
}

/// 32 letters from the OS generator (rejection sampling keeps them uniform).
fn random_letters() -> String {
    const LETTERS: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    let mut out = String::with_capacity(ID_LEN);
    while out.len() < ID_LEN {
        let mut bytes = [0u8; 64];
        getrandom::fill(&mut bytes).expect("the operating system's random source failed");
        // 208 = 4 × 52: bytes at or above it would favour the first letters.
        for b in bytes.into_iter().filter(|b| *b < 208) {
            if out.len() == ID_LEN {
                break;
            }
            out.push(LETTERS[usize::from(b % 52)] as char);
        }
    }
    out
}

/// What a client secret is stored as (the plugin's hashed form: SHA-256).
pub fn hash_secret(secret: &str) -> [u8; 32] {
    Sha256::digest(secret.as_bytes()).into()
}

fn view(r: &ClientRecord) -> Client {
    let mut grant_types = Vec::new();
    if r.grants & GRANT_CODE != 0 {
        grant_types.extend(["authorization_code", "refresh_token"]);
    }
    if r.grants & GRANT_CLIENT_CREDENTIALS != 0 {
        grant_types.push("client_credentials");
    }
    if r.grants & GRANT_DEVICE != 0 {
        // A device's grant is refreshed as a code flow's is.
        if r.grants & GRANT_CODE == 0 {
            grant_types.push("refresh_token");
        }
        grant_types.push(DEVICE_GRANT);
    }
    Client {
        id: uuid::Uuid::from_bytes(r.id),
        client_id: r.client_id.clone(),
        name: r.name.clone(),
        auth_method: AuthMethod::from_code(r.auth_method),
        native: r.native,
        redirect_uris: r.redirect_uris.clone(),
        post_logout_redirect_uris: r.post_logout_redirect_uris.clone(),
        scopes: r.scopes.clone(),
        grant_types,
        skip_consent: r.skip_consent,
        end_session: r.end_session,
        backchannel_logout_uri: r.backchannel_logout_uri.clone(),
        backchannel_logout_session_required: r.backchannel_session_required,
        disabled: r.disabled,
        id_token_alg: Alg::ALL.into_iter().find(|a| a.code() == r.id_token_alg).unwrap_or(Alg::EdDsa),
        created_at: Timestamp::from_millis(r.created_at_ms),
        updated_at: Timestamp::from_millis(r.updated_at_ms),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redirect_uris_follow_the_plugins_rules() {
        for ok in ["https://app.example.com/cb", "https://app.example.com:8443/cb?x=1"] {
            assert_eq!(check_redirect_uri(ok, false), Ok(()), "{ok}");
        }
        for ok in [
            "http://127.0.0.1:5173/cb",
            "http://[::1]/cb",
            "http://localhost:1/cb",
            "com.example.app:/cb",
            "https://a.example/cb",
        ] {
            assert_eq!(check_redirect_uri(ok, true), Ok(()), "{ok}");
        }
        for bad in [
            "http://app.example.com/cb",
            "https://127.0.0.1/cb",
            "https://a.example/cb#x",
            "https://u:p@a.example/cb",
            "/cb",
            "myapp:/cb",
            "http://127.0.0.1/cb",
        ] {
            assert!(check_redirect_uri(bad, false).is_err(), "{bad}");
        }
        for bad in ["http://app.example.com/cb", "myapp:/cb", "https://a.example/cb#"] {
            assert!(check_redirect_uri(bad, true).is_err(), "{bad}");
        }
    }

    #[test]
    fn redirects_match_exactly_but_native_loopback_on_any_port() {
        let web = vec!["https://a.example/cb".to_owned()];
        assert!(redirect_uri_matches(&web, false, "https://a.example/cb"));
        for other in
            ["https://a.example/cb/", "https://a.example/cb?x", "https://A.example/cb", "https://a.example:443/cb"]
        {
            assert!(!redirect_uri_matches(&web, false, other), "{other}");
        }
        let native = vec!["http://127.0.0.1:1234/cb".to_owned()];
        assert!(redirect_uri_matches(&native, true, "http://127.0.0.1:50123/cb"));
        assert!(!redirect_uri_matches(&native, true, "http://127.0.0.1:50123/other"));
        assert!(!redirect_uri_matches(&native, true, "http://[::1]:50123/cb"), "another loopback address");
        assert!(!redirect_uri_matches(&native, false, "http://127.0.0.1:50123/cb"), "a web client's ports count");
    }

    #[test]
    fn backchannel_uris_are_https_or_loopback_http() {
        for ok in ["https://rp.example/logout", "http://127.0.0.1:9000/bc", "http://localhost/bc"] {
            assert_eq!(check_backchannel_uri(ok), Ok(()), "{ok}");
        }
        for bad in ["http://rp.example/logout", "https://rp.example/l#x", "https://u:p@rp.example/", "/bc", "ftp://a/"]
        {
            assert!(check_backchannel_uri(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn ids_and_secrets_are_32_letters_and_differ() {
        let (a, b) = (random_letters(), random_letters());
        assert_eq!(a.len(), 32);
        assert!(a.bytes().all(|c| c.is_ascii_alphabetic()));
        assert_ne!(a, b);
    }
}
