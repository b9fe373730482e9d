//! Sign-in through another identity provider: OpenID Connect (any provider by its issuer, with discovery) and
//! GitHub's OAuth 2, always the authorization code flow with PKCE (S256).
//!
//! - [`config`]: `[[oauth.providers]]`, presets, secrets;
//! - [`cache`]: discovery documents and signing keys kept as the provider's cache headers say;
//! - [`github`]: GitHub's user API;
//! - this file: the authorization URL, and the callback's code exchange and ID token check (issuer, audience,
//!   expiry, nonce, signature with the provider's keys, only the algorithms its metadata names), through the
//!   `openidconnect` crate. Which account the identity signs into is the users actor's (`ExternalIdentity`); the
//!   flow's state is the store's (src/accounts/oauth.rs).
//!
//! Outgoing requests never follow redirects (a provider's endpoint cannot bounce the server elsewhere) and time
//! out after [`TIMEOUT`]. No token, code or secret is ever logged.

pub mod cache;
pub mod config;
pub mod github;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;

use openidconnect::core::{
    CoreAuthenticationFlow, CoreClient, CoreIdToken, CoreIdTokenClaims, CoreJsonWebKeySet, CoreProviderMetadata,
    CoreUserInfoClaims,
};
use openidconnect::{
    AccessToken, AuthorizationCode, ClientId, ClientSecret, CsrfToken, IssuerUrl, Nonce, OAuth2TokenResponse,
    PkceCodeChallenge, PkceCodeVerifier, RedirectUrl, Scope, TokenResponse,
};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use self::cache::Cached;
use self::config::{OAuthConfig, Preset, ProviderConfig, ProviderKind};

/// How long a request to a provider may take.
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// Who signed in, as the provider says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub subject: String,
    pub email: Option<String>,
    pub email_verified: bool,
    pub name: Option<String>,
    pub picture: Option<String>,
    /// The ID token's `amr` (RFC 8176): how the provider says the person authenticated, as it signed it (empty
    /// without an ID token, or when it names none).
    pub amr: Vec<String>,
}

/// The provider's tokens from the callback's exchange, kept (sealed) only with `[oauth] store_tokens = true`.
#[derive(Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Tokens {
    pub access_token: String,
    pub refresh_token: Option<String>,
    pub id_token: Option<String>,
    /// When the access token expires, ms since the epoch.
    pub expires_at_ms: Option<i64>,
}

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Tokens(<redacted>)")
    }
}

impl Tokens {
    fn of<T: OAuth2TokenResponse>(tokens: &T, id_token: Option<String>) -> Self {
        let expires_at_ms = tokens.expires_in().map(|d| crate::domain::Timestamp::now().plus(d).as_millis());
        Self {
            access_token: tokens.access_token().secret().clone(),
            refresh_token: tokens.refresh_token().map(|t| t.secret().clone()),
            id_token,
            expires_at_ms,
        }
    }

    /// What the tokens are sealed to: the provider and the person, so a sealed value cannot be moved to another
    /// linked account and still open.
    pub fn context(provider: &str, subject: &str) -> Vec<u8> {
        format!("oauth-tokens\0{provider}\0{subject}").into_bytes()
    }
}

/// What a discovery document names (see [`OAuth::discover`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Discovered {
    pub authorization_endpoint: String,
    /// Empty when the document names none (a provider of the implicit flow only, which cannot serve here).
    pub token_endpoint: String,
    pub jwks_uri: String,
    pub userinfo_endpoint: Option<String>,
    pub token_endpoint_auth_methods: Vec<String>,
}

/// Why [`OAuth::discover`] found no usable discovery document.
#[derive(Debug, thiserror::Error)]
pub enum DiscoveryFailure {
    /// No answer, or not a success.
    #[error("{0}")]
    Unreachable(String),
    /// An answer that is not an OpenID Provider's discovery document.
    #[error("{0}")]
    NotADocument(String),
    /// A document that names another issuer (OpenID Connect Discovery §4.3).
    #[error("{0}")]
    IssuerMismatch(String),
}

/// Where to send the browser, and what the callback needs to finish (kept in the store, not the browser).
pub struct Authorization {
    pub url: String,
    pub pkce_verifier: String,
    pub nonce: String,
}

/// Why a callback did not give an identity. `code()` is what the error redirect's `?error=` says.
#[derive(Debug, thiserror::Error)]
pub enum OAuthError {
    #[error("the provider's discovery document or keys could not be read: {0}")]
    Discovery(String),
    #[error("the provider refused the authorization code: {0}")]
    Exchange(String),
    #[error("the ID token is not valid: {0}")]
    IdToken(String),
    #[error("the provider's user information could not be read: {0}")]
    UserInfo(String),
    /// An ID token brought by the client, for a provider that issues none (GitHub).
    #[error("this provider issues no ID tokens")]
    IdTokenNotSupported,
}

impl OAuthError {
    pub fn code(&self) -> &'static str {
        match self {
            Self::Discovery(_) => "provider_unavailable",
            Self::Exchange(_) => "invalid_code",
            Self::IdToken(_) => "invalid_id_token",
            Self::UserInfo(_) => "unable_to_get_user_info",
            Self::IdTokenNotSupported => "id_token_not_supported",
        }
    }
}

/// Every configured provider and the HTTP client that speaks to them.
pub struct OAuth {
    /// Replaced whole by a reload ([`OAuth::install`]), read without a lock. A request holds the `Arc` of the
    /// provider it started with until it ends, so a reload never changes a provider under a request.
    providers: ArcSwap<HashMap<String, Arc<Provider>>>,
    http: reqwest::Client,
}

/// The providers a reload would put in effect ([`OAuth::prepare`]), each new or changed OpenID Connect provider's
/// discovery document read already.
pub struct Prepared {
    providers: HashMap<String, Arc<Provider>>,
    /// The configuration of what `providers` holds, in the file's order: the new file's, except where a
    /// provider's discovery failed (the one in effect, or none for a provider the file adds).
    pub in_effect: Vec<ProviderConfig>,
    /// Each provider left as it was, and why (its discovery failed).
    pub refused: Vec<String>,
}

pub struct Provider {
    pub config: ProviderConfig,
    metadata: Cached<CoreProviderMetadata>,
    keys: Cached<CoreJsonWebKeySet>,
}

impl Provider {
    fn new(config: ProviderConfig, metadata: Cached<CoreProviderMetadata>) -> Self {
        Self { config, metadata, keys: Cached::default() }
    }

    /// A provider not in the configuration (an organization's single sign-on provider, from the store), with
    /// caches of its own: signed in through exactly as a configured one.
    pub fn unconfigured(config: ProviderConfig) -> Self {
        Self::new(config, Cached::default())
    }
}

impl OAuth {
    pub fn new(config: &OAuthConfig) -> Self {
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(TIMEOUT)
            .user_agent(concat!("service-auth/", env!("CARGO_PKG_VERSION")))
            .build()
            .unwrap_or_default();
        let providers = config
            .providers
            .iter()
            .map(|p| (p.id.clone(), Arc::new(Provider::new(p.clone(), Cached::default()))))
            .collect();
        Self { providers: ArcSwap::from_pointee(providers), http }
    }

    pub fn provider(&self, id: &str) -> Option<Arc<Provider>> {
        self.providers.load().get(id).cloned()
    }

    pub fn is_empty(&self) -> bool {
        self.providers.load().is_empty()
    }

    /// Every configured provider's id and the name a sign-in button shows (the preset's, else the id), by id.
    pub fn names(&self) -> Vec<(String, String)> {
        let mut names: Vec<(String, String)> = self
            .providers
            .load()
            .values()
            .map(|p| {
                let name = match p.config.preset {
                    Some(Preset::Google) => "Google",
                    Some(Preset::Microsoft) => "Microsoft",
                    Some(Preset::Apple) => "Apple",
                    Some(Preset::Github) => "GitHub",
                    None => p.config.id.as_str(),
                };
                (p.config.id.clone(), name.to_owned())
            })
            .collect();
        names.sort_unstable();
        names
    }

    /// A reload's providers, made ready before anything changes: an unchanged provider is kept as it is (its
    /// cached documents with it); a new or changed OpenID Connect provider's discovery document is read now, and
    /// one whose discovery fails is not put in effect (the one in effect stays; a new one is not added), so that
    /// a typo in an issuer does not take a working sign-in away. A GitHub provider has nothing to discover.
    pub async fn prepare(&self, wanted: &[ProviderConfig]) -> Prepared {
        let current = self.providers.load_full();
        let mut prepared = Prepared { providers: HashMap::new(), in_effect: Vec::new(), refused: Vec::new() };
        for config in wanted {
            let old = current.get(&config.id);
            let ready = match (old, config.kind(), config.issuer_url()) {
                (Some(old), _, _) if old.config == *config => Ok(old.clone()),
                (_, ProviderKind::Oidc, Some(issuer)) => match self.read_metadata(&issuer).await {
                    Ok(document) => Ok(Arc::new(Provider::new(config.clone(), Cached::with(document)))),
                    Err(why) => Err(why.to_string()),
                },
                _ => Ok(Arc::new(Provider::new(config.clone(), Cached::default()))),
            };
            let kept = match (ready, old) {
                (Ok(ready), _) => ready,
                (Err(why), Some(old)) => {
                    prepared.refused.push(format!("provider {:?} kept as it was (discovery failed: {why})", config.id));
                    old.clone()
                }
                (Err(why), None) => {
                    prepared.refused.push(format!("provider {:?} not added (discovery failed: {why})", config.id));
                    continue;
                }
            };
            prepared.in_effect.push(kept.config.clone());
            prepared.providers.insert(config.id.clone(), kept);
        }
        prepared
    }

    /// Puts `prepared` in effect: the next request finds its providers. Requests under way finish with the
    /// provider they hold.
    pub fn install(&self, prepared: Prepared) {
        self.providers.store(Arc::new(prepared.providers));
    }

    /// The authorization URL for a new flow with `state`, answered to `redirect_uri`; `scopes` are asked for in
    /// addition to the configured ones.
    pub async fn authorize(
        &self,
        provider: &Provider,
        state: &str,
        redirect_uri: &str,
        scopes: &[String],
        login_hint: Option<&str>,
    ) -> Result<Authorization, OAuthError> {
        let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
        let redirect = RedirectUrl::new(redirect_uri.to_owned()).map_err(|e| OAuthError::Discovery(e.to_string()))?;
        let mut wanted = provider.config.scopes();
        wanted.extend(scopes.iter().filter(|s| !provider.config.scopes().contains(s)).cloned());
        let state = state.to_owned();
        let (url, nonce) = match provider.config.kind() {
            ProviderKind::Oidc => {
                let metadata = self.metadata(provider, false).await?;
                let client =
                    CoreClient::from_provider_metadata(metadata, client_id(provider), None).set_redirect_uri(redirect);
                let nonce = random_token();
                let n = nonce.clone();
                let mut request = client
                    .authorize_url(
                        CoreAuthenticationFlow::AuthorizationCode,
                        move || CsrfToken::new(state),
                        move || Nonce::new(n),
                    )
                    .set_pkce_challenge(challenge);
                for scope in wanted.iter().filter(|s| *s != "openid") {
                    request = request.add_scope(Scope::new(scope.clone()));
                }
                if let Some(mode) = provider.config.response_mode() {
                    request = request.add_extra_param("response_mode", mode);
                }
                if let Some(hint) = login_hint {
                    request = request.add_extra_param("login_hint", hint.to_owned());
                }
                let (url, _, _) = request.url();
                (url, nonce)
            }
            ProviderKind::Github => {
                let client = github_client(provider)?.set_redirect_uri(redirect);
                let mut request = client.authorize_url(move || CsrfToken::new(state)).set_pkce_challenge(challenge);
                for scope in &wanted {
                    request = request.add_scope(oauth2::Scope::new(scope.clone()));
                }
                if let Some(hint) = login_hint {
                    request = request.add_extra_param("login", hint.to_owned());
                }
                let (url, _) = request.url();
                (url, String::new())
            }
        };
        Ok(Authorization { url: url.to_string(), pkce_verifier: verifier.secret().clone(), nonce })
    }

    /// The callback: exchanges `code` (with the flow's PKCE verifier) and says who signed in. OpenID Connect: the
    /// ID token must be valid and carry the flow's `nonce`; claims it lacks (some providers put the address only
    /// there) are read from the user-info endpoint, which must name the same subject. The time spent waiting for
    /// the provider (discovery, token exchange, keys, user info) is added to `waited`.
    pub async fn finish(
        &self,
        provider: &Provider,
        code: &str,
        pkce_verifier: &str,
        nonce: &str,
        redirect_uri: &str,
        waited: &mut Duration,
    ) -> Result<(Identity, Tokens), OAuthError> {
        let redirect = RedirectUrl::new(redirect_uri.to_owned()).map_err(|e| OAuthError::Exchange(e.to_string()))?;
        let code = AuthorizationCode::new(code.to_owned());
        let verifier = PkceCodeVerifier::new(pkce_verifier.to_owned());
        match provider.config.kind() {
            ProviderKind::Oidc => {
                let metadata = timed(waited, self.metadata(provider, false)).await?;
                let mut client =
                    CoreClient::from_provider_metadata(metadata.clone(), client_id(provider), secret(provider))
                        .set_redirect_uri(redirect);
                if provider.config.secret_in_body {
                    client = client.set_auth_type(openidconnect::AuthType::RequestBody);
                }
                let request = client
                    .exchange_code(code)
                    .map_err(|e| OAuthError::Exchange(e.to_string()))?
                    .set_pkce_verifier(verifier);
                let tokens = timed(waited, request.request_async(&self.http))
                    .await
                    .map_err(|e| OAuthError::Exchange(describe(&e)))?;
                let id_token = tokens.id_token().ok_or_else(|| OAuthError::IdToken("the provider sent none".into()))?;
                let claims = self.verified_claims(provider, &metadata, id_token, Some(nonce), waited).await?;
                let access_token = tokens.access_token().clone();
                let identity = self.identity(provider, &metadata, &claims, Some(access_token), waited).await?;
                let kept = Tokens::of(&tokens, Some(id_token.to_string()));
                Ok((identity, kept))
            }
            ProviderKind::Github => {
                let client = github_client(provider)?.set_redirect_uri(redirect);
                let request = client.exchange_code(code).set_pkce_verifier(verifier);
                let tokens = timed(waited, request.request_async(&self.http))
                    .await
                    .map_err(|e| OAuthError::Exchange(describe(&e)))?;
                let bearer = tokens.access_token().secret();
                let user = timed(waited, self.github_get(github::USER_URL, bearer)).await?;
                let emails = timed(waited, self.github_get(github::EMAILS_URL, bearer)).await.ok();
                let identity = github::identity(&user, emails.as_deref()).map_err(OAuthError::UserInfo)?;
                Ok((identity, Tokens::of(&tokens, None)))
            }
        }
    }

    /// better-auth's `idToken` sign-in: an ID token the client got from the provider itself (a native SDK, Google
    /// One Tap), checked as the callback checks its own (signature against the provider's published keys with
    /// only the algorithms its metadata names, issuer, audience = this service's client id, expiry), and its
    /// `nonce` when the client names the one it used. Only OpenID Connect providers issue ID tokens.
    pub async fn verify_id_token(
        &self,
        provider: &Provider,
        token: &str,
        nonce: Option<&str>,
        access_token: Option<&str>,
    ) -> Result<Identity, OAuthError> {
        if provider.config.kind() != ProviderKind::Oidc {
            return Err(OAuthError::IdTokenNotSupported);
        }
        let id_token: CoreIdToken =
            token.parse().map_err(|e: serde_json::Error| OAuthError::IdToken(format!("not a signed JWT: {e}")))?;
        let mut waited = Duration::ZERO;
        let metadata = self.metadata(provider, false).await?;
        let claims = self.verified_claims(provider, &metadata, &id_token, nonce, &mut waited).await?;
        let access_token = access_token.map(|t| AccessToken::new(t.to_owned()));
        self.identity(provider, &metadata, &claims, access_token, &mut waited).await
    }

    /// The claims of `id_token` once it is valid for `provider` (see [`Self::verify_id_token`]); `nonce`: the one
    /// it must carry, or `None` to accept any (only for a token the client brought without naming one, as
    /// better-auth does).
    async fn verified_claims(
        &self,
        provider: &Provider,
        metadata: &CoreProviderMetadata,
        id_token: &CoreIdToken,
        nonce: Option<&str>,
        waited: &mut Duration,
    ) -> Result<CoreIdTokenClaims, OAuthError> {
        // Apple's SDKs put the SHA-256 (hex) of the app's nonce in the token; better-auth accepts either.
        let hashed_too = provider.config.preset == Some(config::Preset::Apple);
        let verify = |keys: CoreJsonWebKeySet| {
            let with_keys = metadata.clone().set_jwks(keys);
            let client = CoreClient::from_provider_metadata(with_keys, client_id(provider), secret(provider));
            id_token.claims(&client.id_token_verifier(), nonce_check(nonce, hashed_too)).cloned()
        };
        match verify(timed(waited, self.keys(provider, metadata, false)).await?) {
            Ok(claims) => Ok(claims),
            // A key the cached set lacks: the provider may have rotated its keys. Fetched again, once.
            Err(openidconnect::ClaimsVerificationError::SignatureVerification(_)) => {
                verify(timed(waited, self.keys(provider, metadata, true)).await?)
                    .map_err(|e| OAuthError::IdToken(e.to_string()))
            }
            Err(e) => Err(OAuthError::IdToken(e.to_string())),
        }
    }

    /// Who a valid ID token names; claims it lacks (some providers put the address only there) are read from the
    /// user-info endpoint with `access_token`, which must name the same subject.
    async fn identity(
        &self,
        provider: &Provider,
        metadata: &CoreProviderMetadata,
        claims: &CoreIdTokenClaims,
        access_token: Option<AccessToken>,
        waited: &mut Duration,
    ) -> Result<Identity, OAuthError> {
        let mut identity = Identity {
            subject: claims.subject().as_str().to_owned(),
            email: claims.email().map(|e| e.as_str().to_owned()),
            email_verified: claims.email_verified().unwrap_or(false),
            name: claims.name().and_then(|n| n.get(None)).map(|n| n.as_str().to_owned()),
            picture: claims.picture().and_then(|p| p.get(None)).map(|p| p.as_str().to_owned()),
            amr: claims.auth_method_refs().into_iter().flatten().map(|m| m.as_str().to_owned()).collect(),
        };
        if let (None, Some(_), Some(access_token)) = (&identity.email, metadata.userinfo_endpoint(), access_token) {
            let client = CoreClient::from_provider_metadata(metadata.clone(), client_id(provider), secret(provider));
            let request = client
                .user_info(access_token, Some(claims.subject().clone()))
                .map_err(|e| OAuthError::UserInfo(e.to_string()))?;
            let info: CoreUserInfoClaims = timed(waited, request.request_async(&self.http))
                .await
                .map_err(|e| OAuthError::UserInfo(describe(&e)))?;
            identity.email = info.email().map(|e| e.as_str().to_owned());
            identity.email_verified = info.email_verified().unwrap_or(false);
            if identity.name.is_none() {
                identity.name = info.name().and_then(|n| n.get(None)).map(|n| n.as_str().to_owned());
            }
            if identity.picture.is_none() {
                identity.picture = info.picture().and_then(|p| p.get(None)).map(|p| p.as_str().to_owned());
            }
        }
        Ok(identity)
    }

    async fn github_get(&self, url: &str, bearer: &str) -> Result<Vec<u8>, OAuthError> {
        let answer = self
            .http
            .get(url)
            .bearer_auth(bearer)
            .header("accept", "application/vnd.github+json")
            .send()
            .await
            .map_err(|e| OAuthError::UserInfo(e.without_url().to_string()))?;
        if !answer.status().is_success() {
            return Err(OAuthError::UserInfo(format!("{url} answered {}", answer.status())));
        }
        Ok(answer.bytes().await.map_err(|e| OAuthError::UserInfo(e.to_string()))?.to_vec())
    }

    /// The provider's discovery document; its `issuer` must be the configured one exactly.
    async fn metadata(&self, provider: &Provider, refetch: bool) -> Result<CoreProviderMetadata, OAuthError> {
        let issuer = provider.config.issuer_url().ok_or_else(|| OAuthError::Discovery("no issuer".into()))?;
        provider
            .metadata
            .get(refetch, || async {
                self.read_metadata(&issuer).await.map_err(|e| OAuthError::Discovery(e.to_string()))
            })
            .await
    }

    /// `issuer`'s discovery document, read now (no cache), its `issuer` checked: for a provider registered while
    /// the server runs (an organization's single sign-on), whose endpoints are shown to its administrators. The
    /// failures are told apart, as `@better-auth/sso` does: what the caller got wrong (a document that is not one,
    /// another issuer) is theirs to fix; a provider that does not answer is not.
    pub async fn discover(&self, issuer: &str) -> Result<Discovered, DiscoveryFailure> {
        let (metadata, _) = self.read_metadata(issuer).await?;
        let methods = metadata
            .token_endpoint_auth_methods_supported()
            .map(|m| m.iter().map(|m| m.as_ref().to_owned()).collect())
            .unwrap_or_default();
        Ok(Discovered {
            authorization_endpoint: metadata.authorization_endpoint().url().to_string(),
            token_endpoint: metadata.token_endpoint().map(|u| u.url().to_string()).unwrap_or_default(),
            jwks_uri: metadata.jwks_uri().url().to_string(),
            userinfo_endpoint: metadata.userinfo_endpoint().map(|u| u.url().to_string()),
            token_endpoint_auth_methods: methods,
        })
    }

    async fn read_metadata(&self, issuer: &str) -> Result<(CoreProviderMetadata, Duration), DiscoveryFailure> {
        // One trailing slash of the issuer is not doubled (`https://tenant.example/` serves
        // `https://tenant.example/.well-known/…`); the document must still name the issuer exactly.
        let url = format!("{}/.well-known/openid-configuration", issuer.trim_end_matches('/'));
        let (body, fresh) = self.fetch(&url).await.map_err(|e| match e {
            OAuthError::Discovery(why) => DiscoveryFailure::Unreachable(why),
            other => DiscoveryFailure::Unreachable(other.to_string()),
        })?;
        let metadata: CoreProviderMetadata =
            serde_json::from_slice(&body).map_err(|e| DiscoveryFailure::NotADocument(format!("{url}: {e}")))?;
        let expected = IssuerUrl::new(issuer.to_owned()).map_err(|e| DiscoveryFailure::NotADocument(e.to_string()))?;
        if metadata.issuer() != &expected {
            return Err(DiscoveryFailure::IssuerMismatch(format!(
                "{url} names the issuer {:?}, not {issuer:?}",
                metadata.issuer().as_str()
            )));
        }
        Ok((metadata, fresh))
    }

    async fn keys(
        &self,
        provider: &Provider,
        metadata: &CoreProviderMetadata,
        refetch: bool,
    ) -> Result<CoreJsonWebKeySet, OAuthError> {
        let url = metadata.jwks_uri().url().to_string();
        provider
            .keys
            .get(refetch, || async {
                let (body, fresh) = self.fetch(&url).await?;
                let keys: CoreJsonWebKeySet =
                    serde_json::from_slice(&body).map_err(|e| OAuthError::Discovery(format!("{url}: {e}")))?;
                Ok((keys, fresh))
            })
            .await
    }

    async fn fetch(&self, url: &str) -> Result<(Vec<u8>, Duration), OAuthError> {
        let answer = self.http.get(url).send().await.map_err(|e| OAuthError::Discovery(e.without_url().to_string()))?;
        if !answer.status().is_success() {
            return Err(OAuthError::Discovery(format!("{url} answered {}", answer.status())));
        }
        let fresh = cache::freshness(answer.headers().get("cache-control").and_then(|v| v.to_str().ok()));
        let body = answer.bytes().await.map_err(|e| OAuthError::Discovery(e.to_string()))?;
        Ok((body.to_vec(), fresh))
    }
}

/// `future`, its time added to `waited` (the time a callback spends on the provider, left out of its own).
async fn timed<T>(waited: &mut Duration, future: impl std::future::Future<Output = T>) -> T {
    let started = std::time::Instant::now();
    let out = future.await;
    *waited += started.elapsed();
    out
}

/// The nonce check: the claim must be `expected` (compared in constant time; with `hashed_too`, or its SHA-256 in
/// hex), or anything when nothing is expected.
fn nonce_check(expected: Option<&str>, hashed_too: bool) -> impl FnOnce(Option<&Nonce>) -> Result<(), String> + '_ {
    move |claimed: Option<&Nonce>| {
        let Some(expected) = expected else { return Ok(()) };
        let claimed = claimed.ok_or("missing nonce claim")?;
        let digest = |s: &str| Sha256::digest(s.as_bytes());
        let exact = bool::from(digest(claimed.secret()).ct_eq(&digest(expected)));
        let hashed = hashed_too && bool::from(digest(claimed.secret()).ct_eq(&digest(&hex::encode(digest(expected)))));
        if exact || hashed { Ok(()) } else { Err("nonce mismatch".into()) }
    }
}

fn client_id(provider: &Provider) -> ClientId {
    ClientId::new(provider.config.client_id.clone())
}

fn secret(provider: &Provider) -> Option<ClientSecret> {
    provider.config.client_secret.as_ref().map(|s| ClientSecret::new(s.expose().to_owned()))
}

type GithubClient = oauth2::basic::BasicClient<
    oauth2::EndpointSet,
    oauth2::EndpointNotSet,
    oauth2::EndpointNotSet,
    oauth2::EndpointNotSet,
    oauth2::EndpointSet,
>;

fn github_client(provider: &Provider) -> Result<GithubClient, OAuthError> {
    let bad = |e: oauth2::url::ParseError| OAuthError::Discovery(e.to_string());
    let mut client = oauth2::basic::BasicClient::new(oauth2::ClientId::new(provider.config.client_id.clone()))
        .set_auth_uri(oauth2::AuthUrl::new(github::AUTHORIZE_URL.into()).map_err(bad)?)
        .set_token_uri(oauth2::TokenUrl::new(github::TOKEN_URL.into()).map_err(bad)?);
    if let Some(secret) = &provider.config.client_secret {
        client = client.set_client_secret(oauth2::ClientSecret::new(secret.expose().to_owned()));
    }
    Ok(client)
}

/// A request error without what might carry a secret (the token endpoint's answer body is kept: it says why).
fn describe<E: std::error::Error>(e: &E) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(inner) = source {
        text.push_str(": ");
        text.push_str(&inner.to_string());
        source = inner.source();
    }
    text
}

/// 256 random bits, base64url: a `state`, a nonce, a flow cookie.
pub fn random_token() -> String {
    use base64::Engine;
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).expect("the system's random source");
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nonce_is_checked_when_one_is_expected_and_its_hash_only_for_apple() {
        let plain = Nonce::new("app-nonce".into());
        let hashed = Nonce::new(hex::encode(Sha256::digest(b"app-nonce")));
        assert!(nonce_check(Some("app-nonce"), false)(Some(&plain)).is_ok());
        assert!(nonce_check(Some("app-nonce"), false)(Some(&hashed)).is_err(), "the hash only where Apple sends it");
        assert!(nonce_check(Some("app-nonce"), true)(Some(&hashed)).is_ok());
        assert!(nonce_check(Some("app-nonce"), true)(Some(&plain)).is_ok());
        assert!(nonce_check(Some("another"), true)(Some(&plain)).is_err());
        assert!(nonce_check(Some("app-nonce"), true)(None).is_err(), "expected, and missing");
        // None expected (a client's token without a nonce): any, or none, is accepted, as better-auth does.
        assert!(nonce_check(None, false)(None).is_ok());
        assert!(nonce_check(None, false)(Some(&plain)).is_ok());
    }
}
