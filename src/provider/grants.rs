//! What the identity provider grants: authorization codes waiting to be redeemed, and users' consents to clients.
//!
//! Both are kept in the store, read by the node that needs them, as the sign-in flows through other providers are
//! (src/accounts/oauth.rs): a code issued on one node is redeemed on any, and a consent given on one is seen by
//! all at once, with no change log entry to wait for. A code is taken once: on one node a claim in memory keeps a
//! second redemption out while the first one's take commits; across nodes the store refuses the second take
//! ([`crate::store::Conflict::CodeUsed`]).
//!
//! The grants themselves (what a redeemed code or a client credentials request gave a client, and every token
//! issued from it since) are held in every node's memory ([`GrantIndex`]): userinfo and introspection answer from
//! it, so a revoked grant is inactive at once. The index follows every durable commit of this node (the store
//! writer shows it each one, [`crate::store::OnCommit`]: a ban's or a password reset's commit ends the user's
//! grants, staged by the actors) and the other nodes' through the change log. A refresh reads its grant from the
//! store on PostgreSQL (the one truth about which refresh token is in force; from memory on the embedded store,
//! where this node's writer is the only one), and its rotation is guarded across nodes
//! ([`crate::store::Conflict::RefreshUsed`]).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::domain::{Timestamp, UserId, action};
use crate::store::{
    OAuthCodeRecordV1, OAuthConsentRecordV1, OAuthGrantRecord, Store, StoreError, StoreOp, StoreWriter, audit,
    grant_id_text,
};

/// How long a code may wait for its redemption (the plugin's `codeExpiresIn`).
pub const CODE_LIFETIME: Duration = Duration::from_secs(600);
/// How long a refresh token is valid, from its issue (the plugin's `refreshTokenExpiresIn`): each refresh
/// issues a new one for as long again.
pub const REFRESH_LIFETIME: Duration = Duration::from_secs(30 * 86_400);
/// How many rotated-out refresh tokens a grant remembers: one of them presented again ends the grant (RFC 9700
/// §4.14.2). An older one is merely refused: by then the grant has been refreshed this many times since, by
/// whoever holds the newest token, and the older token gets nothing.
pub const RETIRED_KEPT: usize = 8;
/// How long an ended grant's id is remembered, so that a change log entry that made it (applied late) does not
/// bring it back: longer than any access token lives.
const ENDED_KEPT_MS: i64 = 3_600_000;

/// The grants that have not ended, as memory holds them. Cheap to share (`Arc`).
#[derive(Debug, Default)]
pub struct GrantIndex {
    inner: RwLock<IndexInner>,
}

#[derive(Debug, Default)]
struct IndexInner {
    grants: HashMap<[u8; 16], Arc<OAuthGrantRecord>>,
    by_user: HashMap<[u8; 16], HashSet<[u8; 16]>>,
    /// Ended grants, and when: a late entry that made one does not bring it back.
    ended: HashMap<[u8; 16], i64>,
}

impl IndexInner {
    fn put(&mut self, grant: &OAuthGrantRecord) {
        if self.ended.contains_key(&grant.id) {
            return;
        }
        // The newest of each grant wins: a change log entry applied after this node's own later refresh of the
        // same grant does not undo it.
        if self.grants.get(&grant.id).is_some_and(|held| held.updated_at_ms > grant.updated_at_ms) {
            return;
        }
        if let Some(user) = grant.user_id {
            self.by_user.entry(user).or_default().insert(grant.id);
        }
        self.grants.insert(grant.id, Arc::new(grant.clone()));
    }

    fn end(&mut self, id: [u8; 16], now_ms: i64) {
        if let Some(grant) = self.grants.remove(&id)
            && let Some(user) = grant.user_id
            && let Some(ids) = self.by_user.get_mut(&user)
        {
            ids.remove(&id);
            if ids.is_empty() {
                self.by_user.remove(&user);
            }
        }
        self.ended.insert(id, now_ms);
    }

    fn prune(&mut self, now_ms: i64) {
        self.ended.retain(|_, at| now_ms - *at < ENDED_KEPT_MS);
        let past: Vec<[u8; 16]> = self.grants.values().filter(|g| g.expires_at_ms < now_ms).map(|g| g.id).collect();
        for id in past {
            self.end(id, now_ms);
        }
    }
}

impl GrantIndex {
    /// The index of `grants` (those the store holds, read at start).
    pub fn load(grants: Vec<OAuthGrantRecord>) -> Self {
        let index = Self::default();
        {
            let mut inner = index.write();
            for grant in &grants {
                inner.put(grant);
            }
        }
        index
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, IndexInner> {
        self.inner.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// Applies the grants' part of a durable change (this node's commit, or another node's from the change
    /// log): grants made, refreshed, ended; every grant of a user whose sessions all ended.
    pub fn apply(&self, ops: &[StoreOp]) {
        let touches = |op: &StoreOp| {
            matches!(
                op,
                StoreOp::PutOAuthGrant(_)
                    | StoreOp::RotateOAuthGrant { .. }
                    | StoreOp::DeleteOAuthGrant(_)
                    | StoreOp::DeleteSessionsOf { except: None, .. }
            )
        };
        if !ops.iter().any(touches) {
            return;
        }
        let now = Timestamp::now().as_millis();
        let mut inner = self.write();
        for op in ops {
            match op {
                StoreOp::PutOAuthGrant(grant) | StoreOp::RotateOAuthGrant { grant, .. } => inner.put(grant),
                StoreOp::DeleteOAuthGrant(id) => inner.end(*id, now),
                StoreOp::DeleteSessionsOf { user, except: None } => {
                    let ids: Vec<[u8; 16]> = inner.by_user.get(user).into_iter().flatten().copied().collect();
                    for id in ids {
                        inner.end(id, now);
                    }
                }
                _ => {}
            }
        }
    }

    /// Forgets the grants past their end and the ended ones remembered long enough (housekeeping: a pass over
    /// every grant, once a minute, not one per refresh). A grant past its end is refused before this, by
    /// [`Self::lookup`] and [`Self::get`].
    pub fn prune(&self, now_ms: i64) {
        self.write().prune(now_ms);
    }

    /// What memory knows of grant `id`.
    pub fn lookup(&self, id: [u8; 16], now_ms: i64) -> Lookup {
        let inner = self.inner.read().unwrap_or_else(PoisonError::into_inner);
        match inner.grants.get(&id) {
            Some(grant) if grant.expires_at_ms >= now_ms => Lookup::Live(Arc::clone(grant)),
            Some(_) => Lookup::Ended,
            None if inner.ended.contains_key(&id) => Lookup::Ended,
            None => Lookup::Unheard,
        }
    }

    /// The grant `id`, if it has not ended (nor passed its end).
    pub fn get(&self, id: [u8; 16], now_ms: i64) -> Option<Arc<OAuthGrantRecord>> {
        let inner = self.inner.read().unwrap_or_else(PoisonError::into_inner);
        inner.grants.get(&id).filter(|g| g.expires_at_ms >= now_ms).cloned()
    }

    /// The grants `user` gave `client_id` that have not ended.
    pub fn of(&self, user: [u8; 16], client_id: &str) -> Vec<[u8; 16]> {
        let inner = self.inner.read().unwrap_or_else(PoisonError::into_inner);
        let ids = inner.by_user.get(&user).into_iter().flatten();
        ids.filter(|id| inner.grants.get(*id).is_some_and(|g| g.client_id == client_id)).copied().collect()
    }

    /// How many grants are held.
    pub fn len(&self) -> usize {
        self.inner.read().unwrap_or_else(PoisonError::into_inner).grants.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// What memory knows of a grant.
pub enum Lookup {
    Live(Arc<OAuthGrantRecord>),
    /// Ended here, or passed its end.
    Ended,
    /// Never heard of: made on another node a moment ago, or ended more than an hour ago, or never made.
    Unheard,
}

/// Why a refresh token is refused.
#[derive(Debug, thiserror::Error)]
pub enum RefreshError {
    /// Not a refresh token of ours, expired, ended, or another client's.
    #[error("invalid refresh token")]
    Invalid,
    /// A refresh token rotated out already, presented again: the grant has been ended with every token it issued.
    #[error("the refresh token was used already; the grant has been revoked")]
    Reused,
    /// A scope asked for that the grant does not hold (nothing is spent).
    #[error("unable to issue scope {0}")]
    Scope(String),
    #[error("the store is unavailable: {0}")]
    Store(String),
}

/// A refresh token: the grant's id, then 256 random bits (base64url). Only its SHA-256 is stored; the id lets the
/// grant be found without an index of hashes, and gives nothing without the random part.
fn refresh_token(id: [u8; 16]) -> (String, [u8; 32]) {
    let mut bytes = [0u8; 48];
    bytes[..16].copy_from_slice(&id);
    getrandom::fill(&mut bytes[16..]).expect("the operating system's random source failed");
    let token = B64.encode(bytes);
    let hash = sha256(&token);
    (token, hash)
}

/// Gives `grant` its first refresh token: the grant then lasts as long as the token ([`REFRESH_LIFETIME`] from its
/// creation). Answers the token (stored only as its SHA-256). What [`Grants::make`] does with `offline_access`,
/// and `service-auth seed --access-tokens` (src/ops/seed.rs) for the grants it writes.
pub fn give_refresh_token(grant: &mut OAuthGrantRecord) -> String {
    let (token, hash) = refresh_token(grant.id);
    grant.refresh_hash = Some(hash);
    grant.expires_at_ms = Timestamp::from_millis(grant.created_at_ms).plus(REFRESH_LIFETIME).as_millis();
    token
}

/// How long an access token is valid (the plugin's `accessTokenExpiresIn` default is an hour; ours is shorter,
/// since introspection and userinfo know a revocation at once but a resource server checking the signature alone
/// does not).
pub const ACCESS_TOKEN_LIFETIME: Duration = Duration::from_secs(900);

/// An access token's claims (RFC 9068), signed with the header `typ: at+jwt`: made in one place, so the token
/// endpoint and `service-auth seed` mint the same tokens.
#[derive(Debug, serde::Serialize)]
pub struct AccessClaims {
    pub iss: String,
    pub sub: String,
    pub aud: String,
    pub client_id: String,
    pub azp: String,
    pub scope: String,
    /// `None` for a client's own token (client credentials): no session.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sid: Option<String>,
    pub iat: i64,
    pub exp: i64,
    pub jti: String,
    /// The user's organization, when the grant has one and the scopes cover it ([`OrgClaims`]).
    #[serde(flatten)]
    pub org: Option<OrgClaims>,
}

/// The claims of the organization a grant was made in (the session's active one) and of the user's membership of
/// it now: in the access token, the ID token and at userinfo, when the token's scopes hold `profile` (what
/// describes the person to the application, as `name` does; Grafana's and most relying parties' default scopes
/// hold it, so no new scope needs configuring). The plugin leaves these to the operator's
/// `customAccessTokenClaims`, `customIdTokenClaims` and `customUserInfoClaims` (its `postLogin.consentReferenceId`
/// being the organization); their names here are docs/oidc-provider.md's.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct OrgClaims {
    pub org_id: String,
    pub org_slug: String,
    /// The member's roles, as the organization plugin names them (`owner`, `admin`, `member`, and the
    /// organization's own roles).
    pub org_roles: Vec<String>,
}

/// The scope that brings [`OrgClaims`].
pub const ORG_CLAIMS_SCOPE: &str = "profile";

impl AccessClaims {
    /// The claims of an access token of `grant` (`client_id`'s) for `scopes`, issued by `issuer` at `now`, valid
    /// for [`ACCESS_TOKEN_LIFETIME`]: `sub` is the user, or the client for a client's own grant.
    pub fn new(issuer: &str, client_id: &str, grant: &OAuthGrantRecord, scopes: &[String], now: Timestamp) -> Self {
        let iat = now.as_millis() / 1000;
        AccessClaims {
            iss: issuer.to_owned(),
            sub: grant.user_id.map_or_else(|| client_id.to_owned(), |u| UserId::from_bytes(u).to_string()),
            aud: client_id.to_owned(),
            client_id: client_id.to_owned(),
            azp: client_id.to_owned(),
            scope: scopes.join(" "),
            sid: grant.session_id.map(|s| crate::domain::SessionId::from_bytes(s).to_string()),
            iat,
            exp: iat + ACCESS_TOKEN_LIFETIME.as_secs() as i64,
            jti: access_jti(grant.id),
            org: None,
        }
    }
}

/// The grant a refresh token names, if it is shaped as one.
fn refresh_grant(token: &str) -> Option<[u8; 16]> {
    let bytes = B64.decode(token).ok().filter(|b| b.len() == 48)?;
    bytes[..16].try_into().ok()
}

/// An access token's `jti`: the grant's id, then 128 random bits (base64url).
pub fn access_jti(id: [u8; 16]) -> String {
    let mut bytes = [0u8; 32];
    bytes[..16].copy_from_slice(&id);
    getrandom::fill(&mut bytes[16..]).expect("the operating system's random source failed");
    B64.encode(bytes)
}

/// The grant an access token's `jti` names (before its tag, src/provider/keys.rs `AccessTag`, if it has one).
pub fn jti_grant(jti: &str) -> Option<[u8; 16]> {
    let id = jti.split_once('.').map_or(jti, |(id, _)| id);
    let bytes = B64.decode(id).ok().filter(|b| b.len() == 32)?;
    bytes[..16].try_into().ok()
}

/// A new grant's id.
pub fn new_grant_id() -> [u8; 16] {
    *uuid::Uuid::now_v7().as_bytes()
}

/// The id of the grant that redeeming `code` makes: derived from the code (a hash of its hash), so that the code
/// presented again, on any node and after its record is gone, names the grant to end (RFC 9700 §4.2.1) without a
/// record kept of which code made which grant. The grant's id, which its tokens carry, tells nothing of the code.
pub fn code_grant_id(code: &str) -> [u8; 16] {
    let mut hasher = Sha256::new();
    hasher.update(b"service-auth oauth grant of code\0");
    hasher.update(sha256(code));
    let digest: [u8; 32] = hasher.finalize().into();
    let mut id = [0u8; 16];
    id.copy_from_slice(&digest[..16]);
    id
}

#[derive(Debug, thiserror::Error)]
pub enum GrantError {
    /// Unknown, expired, or redeemed already (here or on another node).
    #[error("invalid code")]
    InvalidCode,
    #[error("the store is unavailable: {0}")]
    Store(String),
}

impl From<StoreError> for GrantError {
    fn from(e: StoreError) -> Self {
        GrantError::Store(e.to_string())
    }
}

/// Codes and consents. Cheap to share (`Arc`).
pub struct Grants {
    pub(super) store: Arc<Store>,
    pub(super) writer: StoreWriter,
    /// The codes (their hashes) a token request on this node is redeeming: from before the code is read until its
    /// take is durable, no other request of this node gets it.
    /// Device requests too (src/provider/devices.rs), by the SHA-256 of their device code.
    pub(super) taking: Mutex<HashSet<[u8; 32]>>,
    /// The grants a refresh on this node is rotating: a second refresh of the same grant waits for the first to
    /// be durable (or to fail) and then reads the grant as it left it, so that on one node, as across nodes, one
    /// of two uses of a token wins and the other is its reuse.
    refreshing: Mutex<HashSet<[u8; 16]>>,
    /// Woken each time a grant leaves `refreshing`.
    refreshed: tokio::sync::Notify,
    index: Arc<GrantIndex>,
}

/// A grant being refreshed by one request ([`Grants::refresh`]); released when dropped.
struct Refreshing<'a> {
    grants: &'a Grants,
    id: [u8; 16],
}

impl Drop for Refreshing<'_> {
    fn drop(&mut self) {
        self.grants.refreshing.lock().unwrap_or_else(PoisonError::into_inner).remove(&self.id);
        self.grants.refreshed.notify_waiters();
    }
}

impl std::fmt::Debug for Grants {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Grants").finish_non_exhaustive()
    }
}

/// A code being redeemed by one request ([`Grants::take_code`]); released when dropped.
pub(super) struct Claim<'a> {
    pub(super) grants: &'a Grants,
    pub(super) hash: [u8; 32],
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        self.grants.taking.lock().unwrap_or_else(PoisonError::into_inner).remove(&self.hash);
    }
}

impl Grants {
    pub fn new(store: Arc<Store>, writer: StoreWriter, index: Arc<GrantIndex>) -> Self {
        Self {
            store,
            writer,
            taking: Mutex::new(HashSet::new()),
            refreshing: Mutex::new(HashSet::new()),
            refreshed: tokio::sync::Notify::new(),
            index,
        }
    }

    /// The grant `id`, if it has not ended: from memory. Only a grant memory has not heard of at all (made on
    /// another node a moment ago, its change log entry on its way) is read from the store, once; an ended one is
    /// known ended without a read.
    pub async fn live(&self, id: [u8; 16], now: Timestamp) -> Result<Option<Arc<OAuthGrantRecord>>, GrantError> {
        match self.index.lookup(id, now.as_millis()) {
            Lookup::Live(grant) => Ok(Some(grant)),
            Lookup::Ended => Ok(None),
            Lookup::Unheard => {
                let found = self.read(move |s| s.oauth_grant(id)).await?;
                let live = found.filter(|g| g.expires_at_ms >= now.as_millis());
                if let Some(grant) = &live {
                    self.index.apply(&[StoreOp::PutOAuthGrant(grant.clone())]);
                }
                Ok(self.index.get(id, now.as_millis()))
            }
        }
    }

    /// Makes `grant` (by the grant type `how`, from address `ip`), durably, audited in the same commit when it is a
    /// user's; with `offline`, a refresh token too (answered; stored only as its SHA-256) and the grant lasts as
    /// long as it. Otherwise the grant ends with its access token (`access_ends`).
    pub async fn make(
        &self,
        mut grant: OAuthGrantRecord,
        offline: bool,
        access_ends: Timestamp,
        how: &str,
        ip: &str,
    ) -> Result<Option<String>, GrantError> {
        let refresh = match offline {
            true => Some(give_refresh_token(&mut grant)),
            false => {
                grant.refresh_hash = None;
                grant.expires_at_ms = access_ends.as_millis();
                None
            }
        };
        let logged = audit::grant_entry(action::OAUTH_GRANT_ISSUED, None, &grant, how, ip);
        self.writer.write([StoreOp::PutOAuthGrant(grant)].into_iter().chain(logged).collect()).await?;
        Ok(refresh)
    }

    /// Uses the refresh token `token` of `client_id`'s grant: answers the grant as it now is, with the new refresh
    /// token that replaces this one (durably). A rotated-out token presented again ends the grant, durably, with
    /// every token it issued ([`RefreshError::Reused`]). The grant's access tokens last no longer than `access_ends`
    /// unless refreshed: the grant itself lasts as long as its new refresh token.
    /// `scopes` (the request's, if any) must all be the grant's; else it is refused and nothing is spent.
    pub async fn refresh(
        &self,
        token: &str,
        client_id: &str,
        scopes: Option<&[String]>,
        now: Timestamp,
        ip: &str,
    ) -> Result<(OAuthGrantRecord, String), RefreshError> {
        let id = refresh_grant(token).ok_or(RefreshError::Invalid)?;
        let _claim = self.refreshing(id).await;
        let found = match self.store.postgres() {
            // On the embedded store this node's writer makes every change of a grant and shows it to the index
            // before its caller hears of it, and no other refresh of this grant runs here meanwhile (the claim
            // above): memory is the truth, and a read of the store on a blocking thread, the costliest step of a
            // refresh at a million grants (BENCHMARKS.md, "The identity provider (#46)"), is saved.
            None => self.index.get(id, now.as_millis()).map(|grant| grant.as_ref().clone()),
            // On PostgreSQL another node may have rotated it a moment ago, its change log entry on its way.
            Some(_) => {
                let store = Arc::clone(&self.store);
                tokio::task::spawn_blocking(move || store.oauth_grant(id))
                    .await
                    .map_err(|e| RefreshError::Store(e.to_string()))?
                    .map_err(|e| RefreshError::Store(e.to_string()))?
            }
        };
        let Some(grant) = found else { return Err(RefreshError::Invalid) };
        // Another client's token is refused without effect: it is not that client's to end.
        if grant.client_id != client_id || grant.expires_at_ms < now.as_millis() {
            return Err(RefreshError::Invalid);
        }
        let hash = sha256(token);
        let current = grant.refresh_hash.is_some_and(|h| bool::from(h.ct_eq(&hash)));
        if !current {
            let reused = grant.retired.iter().any(|h| bool::from(h.ct_eq(&hash)));
            return Err(if reused { self.end_reused(id, ip).await } else { RefreshError::Invalid });
        }
        if let Some(beyond) = scopes.into_iter().flatten().find(|s| !grant.scopes.contains(s)) {
            return Err(RefreshError::Scope(beyond.clone()));
        }
        let (new_token, new_hash) = refresh_token(id);
        let mut next = grant.clone();
        next.retired.push(hash);
        if next.retired.len() > RETIRED_KEPT {
            next.retired.remove(0);
        }
        next.refresh_hash = Some(new_hash);
        next.updated_at_ms = now.as_millis().max(grant.updated_at_ms + 1);
        next.expires_at_ms = now.plus(REFRESH_LIFETIME).as_millis();
        match self.writer.write(vec![StoreOp::RotateOAuthGrant { from: hash, grant: next.clone() }]).await {
            Ok(()) => Ok((next, new_token)),
            // Another node used the same token a moment ago.
            Err(StoreError::Conflict(_)) => Err(self.end_reused(id, ip).await),
            Err(e) => Err(RefreshError::Store(e.to_string())),
        }
    }

    /// Waits until no other request of this node is refreshing grant `id`, and claims it. (Refusing the second
    /// request at once, as a reuse, ended the grant before the first had read it: both uses failed.)
    async fn refreshing(&self, id: [u8; 16]) -> Refreshing<'_> {
        loop {
            // Registered before the look, so a release between the look and the wait is not missed.
            let released = self.refreshed.notified();
            let mut released = std::pin::pin!(released);
            released.as_mut().enable();
            if self.refreshing.lock().unwrap_or_else(PoisonError::into_inner).insert(id) {
                return Refreshing { grants: self, id };
            }
            released.await;
        }
    }

    /// Ends grant `id` after one of its refresh tokens was used twice.
    async fn end_reused(&self, id: [u8; 16], ip: &str) -> RefreshError {
        tracing::warn!(grant = %grant_id_text(id), "a refresh token was used twice: its grant is revoked");
        let mut ops = vec![StoreOp::DeleteOAuthGrant(id)];
        // Audited when it ends a grant that was live (not when a third use finds it ended already), in the same
        // commit, as a reused code is.
        if let Ok(Some(grant)) = self.live(id, Timestamp::now()).await {
            let user = grant.user_id.map(UserId::from_bytes);
            let detail = format!("{}: refresh token used twice", grant.client_id);
            ops.push(audit::entry(action::OAUTH_REFRESH_TOKEN_REUSED, None, user.map(Into::into), ip, detail));
        }
        match self.writer.write(ops).await {
            Ok(()) => RefreshError::Reused,
            Err(e) => RefreshError::Store(e.to_string()),
        }
    }

    /// The live grant whose refresh token in force is `token` (memory only; see [`Self::live`]).
    pub async fn by_refresh_token(
        &self,
        token: &str,
        now: Timestamp,
    ) -> Result<Option<Arc<OAuthGrantRecord>>, GrantError> {
        let Some(id) = refresh_grant(token) else { return Ok(None) };
        let hash = sha256(token);
        let grant = self.live(id, now).await?;
        Ok(grant.filter(|g| g.refresh_hash.is_some_and(|h| bool::from(h.ct_eq(&hash)))))
    }

    /// The grant a refresh token of it names, the one in force or one it replaced (for revocation).
    pub async fn by_any_refresh_token(
        &self,
        token: &str,
        now: Timestamp,
    ) -> Result<Option<Arc<OAuthGrantRecord>>, GrantError> {
        let Some(id) = refresh_grant(token) else { return Ok(None) };
        let hash = sha256(token);
        let grant = self.live(id, now).await?;
        let ours = |g: &Arc<OAuthGrantRecord>| {
            g.refresh_hash.is_some_and(|h| bool::from(h.ct_eq(&hash)))
                || g.retired.iter().any(|h| bool::from(h.ct_eq(&hash)))
        };
        Ok(grant.filter(ours))
    }

    /// Ends `grant` at its client's request (RFC 7009), durably, with every token it issued; audited in the same
    /// commit when it is a user's.
    pub async fn revoke(&self, grant: &OAuthGrantRecord, ip: &str) -> Result<(), GrantError> {
        let logged = audit::grant_entry(action::OAUTH_GRANT_REVOKED, None, grant, "revoked by the client", ip);
        Ok(self.writer.write([StoreOp::DeleteOAuthGrant(grant.id)].into_iter().chain(logged).collect()).await?)
    }

    /// Housekeeping: deletes from the store the codes and grants past their end (and the sign-in flows through
    /// other providers likewise), and forgets them in memory; how many records went. Every node does it for its own
    /// memory; on several nodes the deletes of one make the others' find nothing.
    pub async fn prune_expired(&self) -> Result<usize, GrantError> {
        let now = Timestamp::now().as_millis();
        let pruned = self.read(move |s| s.prune_expired_grants(now)).await?;
        self.index.prune(now);
        Ok(pruned)
    }

    pub(super) async fn read<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Store) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, GrantError> {
        let store = Arc::clone(&self.store);
        tokio::task::spawn_blocking(move || f(&store))
            .await
            .map_err(|e| GrantError::Store(e.to_string()))?
            .map_err(Into::into)
    }

    /// Stores `record` under a new code, durably; answers the code (shown to the client once, stored only as its
    /// SHA-256).
    pub async fn issue_code(&self, record: OAuthCodeRecordV1) -> Result<String, GrantError> {
        let code = random_token();
        let hash = sha256(&code);
        self.writer
            .write(vec![StoreOp::PutOAuthCode(hash, record)])
            .await
            .map_err(|e| GrantError::Store(e.to_string()))?;
        Ok(code)
    }

    /// Redeems `code`: answers what it was issued for and deletes it, durably, so it is never redeemed again.
    /// `InvalidCode` when it is unknown, expired, taken already, or being taken by another request.
    pub async fn take_code(&self, code: &str) -> Result<OAuthCodeRecordV1, GrantError> {
        let hash = sha256(code);
        let fresh = self.taking.lock().unwrap_or_else(PoisonError::into_inner).insert(hash);
        if !fresh {
            return Err(GrantError::InvalidCode);
        }
        let _claim = Claim { grants: self, hash };
        let record = self.read(move |s| s.oauth_code(&hash)).await?.ok_or(GrantError::InvalidCode)?;
        match self.writer.write(vec![StoreOp::TakeOAuthCode(hash)]).await {
            Ok(()) => {}
            Err(StoreError::Conflict(_)) => return Err(GrantError::InvalidCode),
            Err(e) => return Err(GrantError::Store(e.to_string())),
        }
        if record.expires_at_ms < Timestamp::now().as_millis() {
            return Err(GrantError::InvalidCode);
        }
        Ok(record)
    }

    /// After `code` was refused as unknown or spent: if it was redeemed before, ends the grant that redemption made
    /// (its access and refresh tokens), durably and audited in the same commit, since whoever presents a code twice
    /// may have stolen it (RFC 9700 §4.2.1, OAuth 2.1 §4.1.3). `true` when a grant ended. A code never issued, or
    /// refused at its first redemption, made no grant and ends nothing.
    pub async fn end_replayed(&self, code: &str, ip: &str) -> Result<bool, GrantError> {
        let id = code_grant_id(code);
        let Some(grant) = self.live(id, Timestamp::now()).await? else { return Ok(false) };
        tracing::warn!(grant = %grant_id_text(id), client_id = %grant.client_id,
            "an authorization code was presented again: the grant it made is revoked");
        let user = grant.user_id.map(UserId::from_bytes);
        let detail = format!("{}: authorization code used twice", grant.client_id);
        let logged = audit::entry(action::OAUTH_CODE_REUSED, None, user.map(Into::into), ip, detail);
        self.writer.write(vec![StoreOp::DeleteOAuthGrant(id), logged]).await?;
        Ok(true)
    }

    /// The scopes `user` consented to give `client_id`, if they ever did.
    pub async fn consent(&self, user: UserId, client_id: &str) -> Result<Option<Vec<String>>, GrantError> {
        let client_id = client_id.to_owned();
        let found = self.read(move |s| s.oauth_consent(user.to_bytes(), &client_id)).await?;
        Ok(found.map(|c| c.scopes))
    }

    /// Records `user`'s consent to give `client` (its record id names it in the audit log) `scopes`, added to any
    /// given before. Audited in the same commit.
    pub async fn give_consent(
        &self,
        user: UserId,
        client: (uuid::Uuid, &str),
        scopes: &[String],
        ip: &str,
    ) -> Result<(), GrantError> {
        let ops = self.consent_ops(user, client, scopes, action::OAUTH_CONSENT_GRANTED, ip).await?;
        self.writer.write(ops).await.map_err(|e| GrantError::Store(e.to_string()))
    }

    /// What remembering `user`'s consent to give `client` `scopes` (added to any given before) writes: the consent
    /// and its audit entry (`action`, the user acting on the client), to be committed together.
    pub async fn consent_ops(
        &self,
        user: UserId,
        client: (uuid::Uuid, &str),
        scopes: &[String],
        action: &'static str,
        ip: &str,
    ) -> Result<Vec<StoreOp>, GrantError> {
        let (target, client_id) = client;
        let owned = client_id.to_owned();
        let before = self.read(move |s| s.oauth_consent(user.to_bytes(), &owned)).await?;
        let now = Timestamp::now().as_millis();
        let mut record = before.unwrap_or(OAuthConsentRecordV1 {
            user_id: user.to_bytes(),
            client_id: client_id.to_owned(),
            scopes: Vec::new(),
            created_at_ms: now,
            updated_at_ms: now,
        });
        for scope in scopes {
            if !record.scopes.contains(scope) {
                record.scopes.push(scope.clone());
            }
        }
        record.updated_at_ms = now;
        let detail = format!("{}: scopes [{}]", client_id, record.scopes.join(" "));
        let logged = audit::entry(action, Some(user), Some(target), ip, detail);
        Ok(vec![StoreOp::PutOAuthConsent(record), logged])
    }
}

impl Grants {
    /// Every consent `user` has given, by `client_id`.
    pub async fn consents_of(&self, user: UserId) -> Result<Vec<OAuthConsentRecordV1>, GrantError> {
        self.read(move |s| s.oauth_consents_of(user.to_bytes())).await
    }

    /// Sets the scopes of `user`'s consent to `client_id` to `scopes` (its owner's change): the next authorization
    /// asking for a scope outside them shows the consent page again. Audited in the same commit. `None` when there
    /// is no such consent.
    pub async fn set_consent_scopes(
        &self,
        user: UserId,
        client_id: &str,
        scopes: Vec<String>,
        ip: &str,
    ) -> Result<Option<OAuthConsentRecordV1>, GrantError> {
        let owned = client_id.to_owned();
        let Some(mut record) = self.read(move |s| s.oauth_consent(user.to_bytes(), &owned)).await? else {
            return Ok(None);
        };
        record.scopes = scopes;
        record.updated_at_ms = Timestamp::now().as_millis();
        let detail = format!("{}: scopes [{}]", client_id, record.scopes.join(" "));
        let logged = audit::entry(action::OAUTH_CONSENT_UPDATED, Some(user), Some(user.into()), ip, detail);
        self.writer
            .write(vec![StoreOp::PutOAuthConsent(record.clone()), logged])
            .await
            .map_err(|e| GrantError::Store(e.to_string()))?;
        Ok(Some(record))
    }

    /// Withdraws `user`'s consent to `client_id`, by `by` (the user, or an administrator): the next authorization
    /// shows the consent page again, and the grants the user gave the client end in the same commit (its refresh
    /// tokens stop at once; its access tokens fail introspection and userinfo). Audited in the same commit (and
    /// raises `oauth_consent.revoked`). `false` when there was no such consent.
    pub async fn withdraw_consent(
        &self,
        user: UserId,
        client_id: &str,
        by: UserId,
        ip: &str,
    ) -> Result<bool, GrantError> {
        let owned = client_id.to_owned();
        if self.read(move |s| s.oauth_consent(user.to_bytes(), &owned)).await?.is_none() {
            return Ok(false);
        }
        let logged = audit::entry(action::OAUTH_CONSENT_REVOKED, Some(by), Some(user.into()), ip, client_id.to_owned());
        let gone = StoreOp::DeleteOAuthConsent { user: user.to_bytes(), client_id: client_id.to_owned() };
        let mut ops = vec![gone, logged];
        // A withdrawal means the application no longer acts for the user: what it was given ends with it (the
        // plugin's delete-consent leaves the tokens be). A grant made on another node a moment ago, whose change
        // log entry has not reached this one, is missed; its access token lives 15 minutes.
        let now = Timestamp::now().as_millis();
        for grant in self.index.of(user.to_bytes(), client_id).into_iter().filter_map(|id| self.index.get(id, now)) {
            ops.push(StoreOp::DeleteOAuthGrant(grant.id));
            ops.extend(audit::grant_entry(action::OAUTH_GRANT_REVOKED, Some(by), &grant, "consent withdrawn", ip));
        }
        self.writer.write(ops).await.map_err(|e| GrantError::Store(e.to_string()))?;
        Ok(true)
    }
}

pub fn sha256(text: &str) -> [u8; 32] {
    Sha256::digest(text.as_bytes()).into()
}

/// 256 random bits, base64url: a code, an access token's id.
pub fn random_token() -> String {
    use base64::Engine;
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).expect("the operating system's random source failed");
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}
