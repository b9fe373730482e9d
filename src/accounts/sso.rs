//! Single sign-on per organization (`@better-auth/sso`, OpenID Connect): the providers an organization's owners
//! and admins (or a service administrator) register, on the plugin's wire.
//!
//! Providers are read from the store where they are needed, as the identity provider's clients are: a provider
//! changed or removed on one node is used so on every node at once, with no change log entry to wait for. The
//! client secret is sealed with the data directory's key and never shown again, not even in the register answer
//! (the plugin echoes it). Discovery is read with the sign-in machinery of `[[oauth.providers]]`
//! ([`crate::oauth::OAuth::discover`]), and only from trusted origins (the plugin's rule): registering a provider
//! makes the server fetch its URLs, so an organization's admin must not be able to point it at any host.

use std::sync::Arc;

use subtle::ConstantTimeEq;

use super::{Accounts, Current};
use crate::domain::{EmailDomain, OrgId, OrgRole, RoleMapping, SsoProviderId, Timestamp, UserId, action};
use crate::oauth::DiscoveryFailure;
use crate::store::{RoleMappingV1, SamlConfigV1, SsoProviderRecord, Store, StoreError, StoreOp, StoreWriter, audit};

/// The plugin's reserved `providerId`s (better-auth's own account providers), refused as an SSO provider's; the
/// configured `[[oauth.providers]]` ids are refused too.
const RESERVED: &[&str] = &["credential", "email-otp", "magic-link", "phone-number", "anonymous", "siwe"];
const MAX_SCOPES: usize = 20;
const MAX_SCOPE: usize = 64;
const MAX_DOMAINS: usize = 20;
const MAX_URL: usize = 2048;
const MAX_CLIENT_ID: usize = 256;
const MAX_SECRET: usize = 1024;
/// How long a domain verification token may be published before it must be asked for again (the plugin's week).
const VERIFICATION_TTL_MS: i64 = 7 * 24 * 3600 * 1000;
/// The plugin's `generateRandomString` alphabet.
const TOKEN_ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

/// How the server authenticates at the provider's token endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenAuth {
    ClientSecretBasic,
    ClientSecretPost,
}

impl TokenAuth {
    pub const fn name(self) -> &'static str {
        match self {
            TokenAuth::ClientSecretBasic => "client_secret_basic",
            TokenAuth::ClientSecretPost => "client_secret_post",
        }
    }

    pub(super) const fn code(self) -> u8 {
        match self {
            TokenAuth::ClientSecretBasic => 1,
            TokenAuth::ClientSecretPost => 2,
        }
    }

    pub(super) fn from_code(code: u8) -> Self {
        if code == 2 { TokenAuth::ClientSecretPost } else { TokenAuth::ClientSecretBasic }
    }
}

/// A provider as its administrators see it (never its secret); its wire shape is `http::dto::SsoProvider`.
#[derive(Debug, Clone)]
pub struct SsoProvider {
    pub id: uuid::Uuid,
    pub provider_id: String,
    pub organization_id: Option<OrgId>,
    pub user_id: UserId,
    pub issuer: String,
    pub domains: Vec<String>,
    pub domain_verified: bool,
    pub client_id: String,
    pub token_auth: TokenAuth,
    pub discovery_endpoint: String,
    pub authorization_endpoint: String,
    pub token_endpoint: String,
    pub jwks_endpoint: String,
    pub userinfo_endpoint: Option<String>,
    pub scopes: Vec<String>,
    pub default_role: OrgRole,
    /// Which of the identity provider's groups give which of the organization's roles (`None`: none do).
    pub role_mapping: Option<RoleMapping>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    /// A SAML 2.0 provider's part (`None`: OpenID Connect).
    pub saml: Option<SamlView>,
}

/// A SAML provider's configuration as administrators see it: the IdP's certificates by fingerprint (the register
/// answer gives them back as PEM; no private key is ever taken or shown).
#[derive(Debug, Clone)]
pub struct SamlView {
    pub entry_point: String,
    pub idp_entity_id: String,
    /// The IdP's signing certificates, PEM.
    pub certs: Vec<String>,
    /// Their SHA-256 fingerprints, `AB:CD:…`.
    pub fingerprints: Vec<String>,
    pub audience: Option<String>,
    pub callback_url: Option<String>,
    pub want_assertions_signed: bool,
    pub identifier_format: String,
    pub mapping_email: Option<String>,
    pub mapping_name: Option<String>,
    pub mapping_first_name: Option<String>,
    pub mapping_last_name: Option<String>,
}

impl SsoProvider {
    /// The plugin's `domain`: the domains joined by commas.
    pub fn domain(&self) -> String {
        self.domains.join(",")
    }
}

/// What `POST /sso/register` gives (OpenID Connect).
#[derive(Debug, Clone)]
pub struct NewSsoProvider {
    pub provider_id: SsoProviderId,
    pub issuer: String,
    pub domains: Vec<EmailDomain>,
    pub organization: OrgId,
    pub client_id: String,
    pub client_secret: Option<String>,
    pub token_auth: Option<TokenAuth>,
    pub scopes: Option<Vec<String>>,
    /// Default: `member`.
    pub default_role: Option<OrgRole>,
    /// `roleMapping`: which of the provider's groups (a claim of its ID tokens) give which roles.
    pub role_mapping: Option<RoleMapping>,
}

/// What `POST /sso/update-provider` changes (`None`: kept).
#[derive(Debug, Clone, Default)]
pub struct SsoChange {
    pub issuer: Option<String>,
    pub domains: Option<Vec<EmailDomain>>,
    pub client_id: Option<String>,
    pub client_secret: Option<String>,
    pub token_auth: Option<TokenAuth>,
    pub scopes: Option<Vec<String>>,
    pub default_role: Option<OrgRole>,
    /// `Some(None)`: the mapping removed (`roleMapping: null`).
    pub role_mapping: Option<Option<RoleMapping>>,
}

impl SsoChange {
    pub fn is_empty(&self) -> bool {
        self.issuer.is_none()
            && self.domains.is_none()
            && self.client_id.is_none()
            && self.client_secret.is_none()
            && self.token_auth.is_none()
            && self.scopes.is_none()
            && self.default_role.is_none()
            && self.role_mapping.is_none()
    }
}

/// Why a provider call was refused; the messages are the plugin's where it has one.
#[derive(Debug, thiserror::Error)]
pub enum SsoError {
    #[error("Organization not found")]
    OrgNotFound,
    #[error("You are not a member of the organization")]
    NotMember,
    #[error("You must be an organization owner or admin to register SSO providers")]
    NotOrgAdmin,
    #[error("Provider not found")]
    NotFound,
    #[error("You don't have access to this provider")]
    NoAccess,
    #[error("This providerId is reserved and cannot be used for an SSO provider")]
    Reserved,
    #[error("SSO provider with this providerId already exists")]
    Exists,
    /// A field breaks a rule; the message names it.
    #[error("{0}")]
    Invalid(String),
    /// The issuer or a discovered endpoint is not on a trusted origin (`trusted_origins`, or `base_url`'s).
    #[error("{0} is not on a trusted origin")]
    UntrustedOrigin(String),
    /// The discovery document could not be read (the provider did not answer, or not with a success).
    #[error("OIDC discovery failed: {0}")]
    Discovery(String),
    /// What the issuer's discovery URL answered is not a discovery document, or lacks what sign-in needs.
    #[error("OIDC discovery returned invalid data: {0}")]
    NotADiscoveryDocument(String),
    /// The discovery document names another issuer.
    #[error("OIDC issuer mismatch: {0}")]
    IssuerMismatch(String),
    #[error("Domain has already been verified")]
    DomainVerified,
    #[error("No pending domain verification exists")]
    NoPendingVerification,
    /// The TXT record was not found on one of the domains (the message names it).
    #[error("Unable to verify domain ownership for {0}. Try again later")]
    VerificationFailed(String),
    /// The DNS lookup itself failed (no answer, a server failure).
    #[error("Unable to verify domain ownership: {0}")]
    Dns(String),
    /// The provider changed (its domains, or another verification) while its DNS records were read.
    #[error("SSO provider changed while domain verification was in progress. Reload the provider and try again")]
    Changed,
    /// Another organization's provider holds one of the domains, verified.
    #[error("{0} is verified for another single sign-on provider")]
    DomainTaken(String),
    /// A service administrator's call, made by someone else.
    #[error("Only a service administrator may confirm a provider's domains")]
    NotAdministrator,
    /// A role mapping that gives `owner`, set by someone who is not an owner of the organization.
    #[error("Only an owner of the organization may map a group to the owner role")]
    OwnerMapping,
    #[error("the store is unavailable: {0}")]
    Store(String),
}

impl From<StoreError> for SsoError {
    fn from(e: StoreError) -> Self {
        SsoError::Store(e.to_string())
    }
}

/// The providers' store and the origins their URLs may be on. Built by [`crate::runtime::Core`].
pub struct SsoProviders {
    store: Arc<Store>,
    writer: StoreWriter,
    /// `trusted_origins` and `base_url`'s origin, as `scheme://host[:port]`.
    trusted: Vec<String>,
    /// `[sso] nameserver`: the DNS server the TXT records are asked of; `None`: the system's.
    nameserver: Option<std::net::SocketAddr>,
    /// Each provider signed in through, as the sign-in machinery holds it (with its discovery document and keys
    /// cached), by `providerId`: kept while its record (id, `updated_at_ms`) is the same.
    #[allow(clippy::type_complexity)]
    pub(super) signing_in:
        std::sync::Mutex<std::collections::HashMap<String, ([u8; 16], i64, Arc<crate::oauth::Provider>)>>,
}

impl SsoProviders {
    pub fn new(
        store: Arc<Store>,
        writer: StoreWriter,
        base_url: Option<&str>,
        trusted: &[String],
        nameserver: Option<std::net::SocketAddr>,
    ) -> Self {
        let mut trusted: Vec<String> = trusted.iter().filter_map(|o| origin_of(o)).collect();
        trusted.extend(base_url.and_then(origin_of));
        Self { store, writer, trusted, nameserver, signing_in: Default::default() }
    }

    /// The TXT records at `name` (each record's strings joined, as the plugin joins them); none when the name
    /// has none or does not exist. A resolver is made for each verification: nothing is cached, so a record
    /// published a minute after a failed attempt is found by the next one.
    async fn txt(&self, name: &str) -> Result<Vec<String>, SsoError> {
        use hickory_resolver::Resolver;
        use hickory_resolver::config::{ConnectionConfig, NameServerConfig, ResolverConfig};
        use hickory_resolver::net::runtime::TokioRuntimeProvider;
        use hickory_resolver::proto::rr::RData;
        let dns = |e: &dyn std::fmt::Display| SsoError::Dns(e.to_string());
        let mut builder = match self.nameserver {
            Some(at) => {
                let mut udp = ConnectionConfig::udp();
                udp.port = at.port();
                let mut tcp = ConnectionConfig::tcp();
                tcp.port = at.port();
                let server = NameServerConfig::new(at.ip(), true, vec![udp, tcp]);
                Resolver::builder_with_config(
                    ResolverConfig::from_name_servers(vec![server]),
                    TokioRuntimeProvider::default(),
                )
            }
            None => Resolver::builder(TokioRuntimeProvider::default()).map_err(|e| dns(&e))?,
        };
        builder.options_mut().timeout = std::time::Duration::from_secs(5);
        builder.options_mut().attempts = 2;
        let resolver = builder.build().map_err(|e| dns(&e))?;
        match resolver.txt_lookup(name).await {
            Ok(found) => Ok(found
                .answers()
                .iter()
                .filter_map(|r| match &r.data {
                    RData::TXT(txt) => {
                        Some(txt.txt_data.iter().map(|part| String::from_utf8_lossy(part)).collect::<String>())
                    }
                    _ => None,
                })
                .collect()),
            Err(e) if e.is_no_records_found() => Ok(Vec::new()),
            Err(e) => Err(dns(&e)),
        }
    }

    async fn read<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Store) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, SsoError> {
        let store = Arc::clone(&self.store);
        tokio::task::spawn_blocking(move || f(&store))
            .await
            .map_err(|e| SsoError::Store(e.to_string()))?
            .map_err(Into::into)
    }

    pub(super) async fn find(&self, provider_id: &str) -> Result<Option<SsoProviderRecord>, SsoError> {
        let provider_id = provider_id.to_owned();
        self.read(move |s| s.sso_provider(&provider_id)).await
    }

    pub(super) async fn all(&self) -> Result<Vec<SsoProviderRecord>, SsoError> {
        self.read(|s| s.sso_providers()).await
    }

    pub(super) async fn write(&self, ops: Vec<StoreOp>) -> Result<(), SsoError> {
        self.writer.write(ops).await.map_err(|e| SsoError::Store(e.to_string()))
    }

    pub(super) fn check_trusted(&self, url: &str) -> Result<(), SsoError> {
        match origin_of(url) {
            Some(origin) if self.trusted.contains(&origin) => Ok(()),
            _ => Err(SsoError::UntrustedOrigin(url.to_owned())),
        }
    }
}

impl Accounts {
    /// What registering provider `id` for organization `org` needs, whatever its protocol: the organization exists
    /// (a stranger is told only that they are not a member), `current` is one of its owners or admins (or a
    /// service administrator acting as one), and the id is neither reserved, a configured provider's, nor taken.
    pub(super) async fn may_register_sso_provider(
        &self,
        current: &Current,
        org: OrgId,
        id: &str,
    ) -> Result<(), SsoError> {
        if self.indexes.orgs.get(org).is_none() {
            return Err(if current.administrator().is_some() { SsoError::OrgNotFound } else { SsoError::NotMember });
        }
        let me = self.acting_membership(current, org).ok_or(SsoError::NotMember)?;
        if !is_org_admin(&me.roles) {
            return Err(SsoError::NotOrgAdmin);
        }
        if RESERVED.contains(&id) || self.flows.oauth.provider(id).is_some() {
            return Err(SsoError::Reserved);
        }
        if self.sso.find(id).await?.is_some() {
            return Err(SsoError::Exists);
        }
        Ok(())
    }

    /// `sso/register`: an OpenID Connect provider for an organization, by one of its owners or admins (or a service
    /// administrator). Its discovery document is read now (from a trusted origin only) and must name the issuer
    /// given. Audited in the same commit (`organization.sso_provider_created`).
    pub async fn register_sso_provider(
        &self,
        current: &Current,
        new: NewSsoProvider,
        ip: &str,
    ) -> Result<SsoProvider, SsoError> {
        let org = new.organization;
        let id = new.provider_id.as_str();
        self.may_register_sso_provider(current, org, id).await?;
        let issuer = check_issuer(&new.issuer)?;
        let client_id = check_client_id(&new.client_id)?;
        let secret = match new.client_secret.as_deref() {
            Some(s) if !s.is_empty() => check_secret(s)?,
            _ => {
                return Err(SsoError::Invalid(
                    "clientSecret is required when using client_secret_basic or client_secret_post authentication"
                        .into(),
                ));
            }
        };
        let scopes = check_scopes(new.scopes.unwrap_or_default())?;
        let domains = check_domains(new.domains)?;
        let default_role = check_default_role(new.default_role)?;
        if let Some(mapping) = &new.role_mapping {
            self.check_role_mapping(current, org, mapping)?;
        }
        let discovered = self.discover_sso(&issuer).await?;
        let token_auth = new.token_auth.unwrap_or_else(|| preferred_auth(&discovered.token_endpoint_auth_methods));
        let now = Timestamp::now();
        let record_id = uuid::Uuid::now_v7().into_bytes();
        let record = SsoProviderRecord {
            id: record_id,
            provider_id: id.to_owned(),
            organization_id: Some(org.to_bytes()),
            user_id: current.user.id.to_bytes(),
            discovery_endpoint: discovery_url(&issuer),
            issuer,
            domains: domains.iter().map(|d| d.as_str().to_owned()).collect(),
            domain_verified: false,
            verification: None,
            client_id,
            sealed_secret: self.data_key.seal(secret.as_bytes(), &secret_context(&record_id)),
            token_auth: token_auth.code(),
            authorization_endpoint: discovered.authorization_endpoint,
            token_endpoint: discovered.token_endpoint,
            jwks_endpoint: discovered.jwks_uri,
            userinfo_endpoint: discovered.userinfo_endpoint,
            scopes,
            default_role: default_role.as_str().to_owned(),
            created_at_ms: now.as_millis(),
            updated_at_ms: now.as_millis(),
            saml: None,
            role_mapping: new.role_mapping.as_ref().map(Into::into),
        };
        let detail = format!(
            "{}: issuer {}; domain {}; client_id {}; default role {}{}",
            record.provider_id,
            record.issuer,
            record.domains.join(","),
            record.client_id,
            record.default_role,
            mapping_detail(new.role_mapping.as_ref())
        );
        let logged = audit::entry(action::SSO_PROVIDER_CREATED, Some(current.actor()), Some(org.into()), ip, detail);
        self.sso.write(vec![StoreOp::PutSsoProvider(Box::new(record.clone())), logged]).await?;
        Ok(view(&record))
    }

    /// `sso/providers`: those of the organizations where the caller is an owner or admin (every one, for a
    /// service administrator), oldest first.
    pub async fn sso_providers(&self, current: &Current) -> Result<Vec<SsoProvider>, SsoError> {
        let mut all = self.sso.all().await?;
        all.retain(|r| self.may_manage(current, r));
        all.sort_by(|a, b| a.created_at_ms.cmp(&b.created_at_ms).then(a.id.cmp(&b.id)));
        Ok(all.iter().map(view).collect())
    }

    /// `sso/get-provider`.
    pub async fn sso_provider(&self, current: &Current, provider_id: &str) -> Result<SsoProvider, SsoError> {
        Ok(view(&self.managed_sso_provider(current, provider_id).await?))
    }

    /// `sso/update-provider`: a partial change. A new issuer is discovered again; new domains are unverified
    /// again (the plugin's rule). Audited (`organization.sso_provider_updated`), never naming the secret.
    pub async fn update_sso_provider(
        &self,
        current: &Current,
        provider_id: &str,
        change: SsoChange,
        ip: &str,
    ) -> Result<SsoProvider, SsoError> {
        let mut record = self.managed_sso_provider(current, provider_id).await?;
        let mut changed = Vec::new();
        let oidc_change = change.client_id.is_some()
            || change.client_secret.is_some()
            || change.token_auth.is_some()
            || change.scopes.is_some();
        if record.saml.is_some() && oidc_change {
            return Err(SsoError::Invalid("oidcConfig cannot change a SAML provider".into()));
        }
        if let Some(issuer) = change.issuer {
            let issuer = check_issuer(&issuer)?;
            // A SAML provider's issuer is this service's entity ID for it: nothing to discover.
            if issuer != record.issuer && record.saml.is_some() {
                record.issuer = issuer;
                changed.push(format!("issuer {}", record.issuer));
            } else if issuer != record.issuer {
                let discovered = self.discover_sso(&issuer).await?;
                record.discovery_endpoint = discovery_url(&issuer);
                record.authorization_endpoint = discovered.authorization_endpoint;
                record.token_endpoint = discovered.token_endpoint;
                record.jwks_endpoint = discovered.jwks_uri;
                record.userinfo_endpoint = discovered.userinfo_endpoint;
                record.issuer = issuer;
                changed.push(format!("issuer {}", record.issuer));
            }
        }
        if let Some(domains) = change.domains {
            let domains: Vec<String> = check_domains(domains)?.iter().map(|d| d.as_str().to_owned()).collect();
            if domains != record.domains {
                record.domains = domains;
                record.domain_verified = false;
                record.verification = None;
                changed.push(format!("domain {} (not verified)", record.domains.join(",")));
            }
        }
        if let Some(client_id) = change.client_id {
            record.client_id = check_client_id(&client_id)?;
            changed.push(format!("client_id {}", record.client_id));
        }
        if let Some(secret) = change.client_secret {
            let secret = check_secret(&secret)?;
            record.sealed_secret = self.data_key.seal(secret.as_bytes(), &secret_context(&record.id));
            changed.push("a new client secret".to_owned());
        }
        if let Some(auth) = change.token_auth {
            record.token_auth = auth.code();
            changed.push(format!("tokenEndpointAuthentication {}", auth.name()));
        }
        if let Some(scopes) = change.scopes {
            record.scopes = check_scopes(scopes)?;
            changed.push(format!("scopes [{}]", record.scopes.join(" ")));
        }
        if let Some(role) = change.default_role {
            record.default_role = check_default_role(Some(role))?.as_str().to_owned();
            changed.push(format!("default role {}", record.default_role));
        }
        if let Some(mapping) = change.role_mapping {
            if let (Some(m), Some(org)) = (&mapping, record.organization_id.map(OrgId::from_bytes)) {
                self.check_role_mapping(current, org, m)?;
            }
            let stored = mapping.as_ref().map(RoleMappingV1::from);
            if stored != record.role_mapping {
                record.role_mapping = stored;
                changed.push(match &mapping {
                    Some(m) => format!("role mapping changed to {}", m.describe()),
                    None => "role mapping removed".to_owned(),
                });
            }
        }
        record.updated_at_ms = Timestamp::now().as_millis();
        let mut ops = vec![StoreOp::PutSsoProvider(Box::new(record.clone()))];
        if !changed.is_empty() {
            let detail = format!("{}: {}", record.provider_id, changed.join("; "));
            let org = record.organization_id.map(uuid::Uuid::from_bytes);
            ops.push(audit::entry(action::SSO_PROVIDER_UPDATED, Some(current.actor()), org, ip, detail));
        }
        self.sso.write(ops).await?;
        Ok(view(&record))
    }

    /// `sso/delete-provider`. Audited (`organization.sso_provider_deleted`).
    pub async fn delete_sso_provider(&self, current: &Current, provider_id: &str, ip: &str) -> Result<(), SsoError> {
        let record = self.managed_sso_provider(current, provider_id).await?;
        let detail = format!("{}: issuer {}", record.provider_id, record.issuer);
        let org = record.organization_id.map(uuid::Uuid::from_bytes);
        let logged = audit::entry(action::SSO_PROVIDER_DELETED, Some(current.actor()), org, ip, detail);
        self.sso.write(vec![StoreOp::DeleteSsoProvider(record.provider_id), logged]).await
    }

    /// `sso/request-domain-verification`: the token the DNS TXT record `_better-auth-token-{providerId}.{domain}`
    /// must carry (as `_better-auth-token-{providerId}={token}`, or alone) on every domain of the provider, valid
    /// seven days; the pending one again while it is valid (the plugin's rule). The token is no secret: it is
    /// published in DNS for anyone to read, and proves only that whoever publishes it controls the zone.
    /// Audited (`sso_provider.domain_verification_requested`) when a new one is made.
    pub async fn request_sso_domain_verification(
        &self,
        current: &Current,
        provider_id: &str,
        ip: &str,
    ) -> Result<String, SsoError> {
        let mut record = self.managed_sso_provider(current, provider_id).await?;
        if record.domain_verified {
            return Err(SsoError::DomainVerified);
        }
        let now = Timestamp::now().as_millis();
        if let Some((token, until)) = &record.verification
            && *until > now
        {
            return Ok(token.clone());
        }
        let token = crate::domain::two_factor::random_string(24, TOKEN_ALPHABET);
        record.verification = Some((token.clone(), now.saturating_add(VERIFICATION_TTL_MS)));
        record.updated_at_ms = now;
        let detail = format!("{}: domain {}", record.provider_id, record.domains.join(","));
        let org = record.organization_id.map(uuid::Uuid::from_bytes);
        let logged = audit::entry(action::SSO_DOMAIN_VERIFICATION_REQUESTED, Some(current.actor()), org, ip, detail);
        self.sso.write(vec![StoreOp::PutSsoProvider(Box::new(record)), logged]).await?;
        Ok(token)
    }

    /// `sso/verify-domain`: looks the TXT record up on every domain of the provider; all found, its domains are
    /// verified (and only then does sign-in by e-mail domain choose it, or its sign-ins link to existing accounts).
    /// Audited (`sso_provider.domain_verified`). A domain already verified for another provider is refused: an
    /// address's domain chooses one provider.
    pub async fn verify_sso_domain(&self, current: &Current, provider_id: &str, ip: &str) -> Result<(), SsoError> {
        let record = self.managed_sso_provider(current, provider_id).await?;
        if record.domain_verified {
            return Err(SsoError::DomainVerified);
        }
        // One DNS label (the plugin's IDENTIFIER_TOO_LONG past 63): a `providerId` of at most 40 characters keeps
        // it at 59 (held by `domain::sso`'s tests), so no registered provider can fail here.
        let label = verification_label(&record.provider_id);
        let now = Timestamp::now().as_millis();
        let token = match &record.verification {
            Some((token, until)) if *until > now => token.clone(),
            _ => return Err(SsoError::NoPendingVerification),
        };
        self.refuse_claimed_domains(&record).await?;
        let expected = format!("{label}={token}");
        for domain in &record.domains {
            let found = self.sso.txt(&format!("{label}.{domain}.")).await?;
            let matches = |value: &str| {
                let value = value.trim().as_bytes();
                bool::from(value.ct_eq(expected.as_bytes())) || bool::from(value.ct_eq(token.as_bytes()))
            };
            if !found.iter().any(|v| matches(v)) {
                return Err(SsoError::VerificationFailed(domain.clone()));
            }
        }
        self.mark_domain_verified(current, record, "a DNS TXT record", ip).await
    }

    /// A service administrator's confirmation that the organization holds the provider's domains, without DNS
    /// (a domain whose zone cannot take a TXT record, say). Audited as a DNS verification is, naming the way.
    pub async fn confirm_sso_domain(
        &self,
        current: &Current,
        provider_id: &str,
        ip: &str,
    ) -> Result<SsoProvider, SsoError> {
        if current.administrator().is_none() {
            return Err(SsoError::NotAdministrator);
        }
        let record = self.managed_sso_provider(current, provider_id).await?;
        if record.domain_verified {
            return Err(SsoError::DomainVerified);
        }
        self.refuse_claimed_domains(&record).await?;
        self.mark_domain_verified(current, record.clone(), "an administrator's confirmation", ip).await?;
        let verified = self.sso.find(provider_id).await?.ok_or(SsoError::NotFound)?;
        Ok(view(&verified))
    }

    async fn refuse_claimed_domains(&self, record: &SsoProviderRecord) -> Result<(), SsoError> {
        let others = self.sso.all().await?;
        let claimed = others.iter().filter(|o| o.domain_verified && o.provider_id != record.provider_id);
        for other in claimed {
            if let Some(domain) = record.domains.iter().find(|d| other.domains.contains(d)) {
                return Err(SsoError::DomainTaken(domain.clone()));
            }
        }
        Ok(())
    }

    /// Marks `checked`'s domains verified, unless the provider changed while they were checked (the DNS lookup
    /// takes time; a change of domains meanwhile must not be verified by the old ones' records): the stored copy
    /// is read again right before the write.
    async fn mark_domain_verified(
        &self,
        current: &Current,
        checked: SsoProviderRecord,
        how: &str,
        ip: &str,
    ) -> Result<(), SsoError> {
        let mut now = self.sso.find(&checked.provider_id).await?.ok_or(SsoError::NotFound)?;
        if now != checked {
            return Err(SsoError::Changed);
        }
        now.domain_verified = true;
        now.verification = None;
        now.updated_at_ms = Timestamp::now().as_millis();
        let detail = format!("{}: domain {} verified by {how}", now.provider_id, now.domains.join(","));
        let org = now.organization_id.map(uuid::Uuid::from_bytes);
        let logged = audit::entry(action::SSO_DOMAIN_VERIFIED, Some(current.actor()), org, ip, detail);
        self.sso.write(vec![StoreOp::PutSsoProvider(Box::new(now)), logged]).await
    }

    /// The provider, once the caller may manage it: 404 when there is none, and when the caller is not a member
    /// of its organization (whose providers are none of their business: the answer does not tell them the id is
    /// taken); 403 for a member who is not an owner or admin (the plugin's answer).
    pub(super) async fn managed_sso_provider(
        &self,
        current: &Current,
        provider_id: &str,
    ) -> Result<SsoProviderRecord, SsoError> {
        let record = self.sso.find(provider_id).await?.ok_or(SsoError::NotFound)?;
        if self.may_manage(current, &record) {
            return Ok(record);
        }
        let member = record
            .organization_id
            .map(OrgId::from_bytes)
            .is_some_and(|org| self.indexes.members.get(org, current.user.id).is_some());
        Err(if member { SsoError::NoAccess } else { SsoError::NotFound })
    }

    fn may_manage(&self, current: &Current, record: &SsoProviderRecord) -> bool {
        if current.administrator().is_some() {
            return true;
        }
        let Some(org) = record.organization_id.map(OrgId::from_bytes) else { return false };
        self.indexes.members.get(org, current.user.id).is_some_and(|m| is_org_admin(&m.roles))
    }

    async fn discover_sso(&self, issuer: &str) -> Result<crate::oauth::Discovered, SsoError> {
        self.sso.check_trusted(&discovery_url(issuer))?;
        let discovered = self.flows.oauth.discover(issuer).await.map_err(|e| match e {
            DiscoveryFailure::Unreachable(why) => SsoError::Discovery(why),
            DiscoveryFailure::NotADocument(why) => SsoError::NotADiscoveryDocument(why),
            DiscoveryFailure::IssuerMismatch(why) => SsoError::IssuerMismatch(why),
        })?;
        if discovered.token_endpoint.is_empty() {
            return Err(SsoError::NotADiscoveryDocument("the discovery document names no token_endpoint".into()));
        }
        // The server will send the secret and codes to these, and read keys and claims from them.
        for url in [&discovered.authorization_endpoint, &discovered.token_endpoint, &discovered.jwks_uri] {
            self.sso.check_trusted(url)?;
        }
        if let Some(url) = &discovered.userinfo_endpoint {
            self.sso.check_trusted(url)?;
        }
        Ok(discovered)
    }
}

/// The audit detail's words for a new provider's role mapping, when it has one.
pub(super) fn mapping_detail(mapping: Option<&RoleMapping>) -> String {
    mapping.map(|m| format!("; role mapping {}", m.describe())).unwrap_or_default()
}

pub(super) fn is_org_admin(roles: &crate::domain::MemberRoles) -> bool {
    roles.has(OrgRole::Owner) || roles.has(OrgRole::Admin)
}

/// What the client secret is sealed to: the provider's record, so a sealed value moved to another one does not open.
pub(super) fn secret_context(record_id: &[u8; 16]) -> Vec<u8> {
    let mut context = b"sso-client-secret\0".to_vec();
    context.extend_from_slice(record_id);
    context
}

/// The first label of the TXT record's name: the plugin's default `tokenPrefix`, then the provider's id.
fn verification_label(provider_id: &str) -> String {
    format!("_better-auth-token-{provider_id}")
}

fn discovery_url(issuer: &str) -> String {
    format!("{}/.well-known/openid-configuration", issuer.trim_end_matches('/'))
}

/// `scheme://host[:port]` of an http(s) URL, lower-cased, the default port left out.
pub(super) fn origin_of(url: &str) -> Option<String> {
    let url = url::Url::parse(url).ok()?;
    matches!(url.scheme(), "http" | "https").then(|| url.origin().ascii_serialization())
}

/// The token endpoint authentication the provider supports, preferring Basic (the plugin's order).
fn preferred_auth(supported: &[String]) -> TokenAuth {
    if supported.is_empty() || supported.iter().any(|m| m == "client_secret_basic") {
        TokenAuth::ClientSecretBasic
    } else if supported.iter().any(|m| m == "client_secret_post") {
        TokenAuth::ClientSecretPost
    } else {
        TokenAuth::ClientSecretBasic
    }
}

/// An issuer: an `http(s)` URL with no query or fragment (OpenID Connect Discovery §3).
pub(super) fn check_issuer(issuer: &str) -> Result<String, SsoError> {
    let bad = || SsoError::Invalid("issuer must be an http or https URL with no query or fragment".into());
    if issuer.len() > MAX_URL {
        return Err(bad());
    }
    let url = url::Url::parse(issuer).map_err(|_| bad())?;
    if !matches!(url.scheme(), "http" | "https") || url.query().is_some() || url.fragment().is_some() {
        return Err(bad());
    }
    if url.host_str().is_none() || !url.username().is_empty() || url.password().is_some() {
        return Err(bad());
    }
    Ok(issuer.to_owned())
}

fn check_client_id(client_id: &str) -> Result<String, SsoError> {
    if client_id.is_empty() || client_id.len() > MAX_CLIENT_ID || client_id.chars().any(char::is_control) {
        return Err(SsoError::Invalid(format!(
            "oidcConfig.clientId must be 1 to {MAX_CLIENT_ID} bytes without control characters"
        )));
    }
    Ok(client_id.to_owned())
}

fn check_secret(secret: &str) -> Result<String, SsoError> {
    if secret.is_empty() || secret.len() > MAX_SECRET || secret.chars().any(char::is_control) {
        return Err(SsoError::Invalid(format!(
            "oidcConfig.clientSecret must be 1 to {MAX_SECRET} bytes without control characters"
        )));
    }
    Ok(secret.to_owned())
}

/// Scopes beyond `openid` (which is always asked for), de-duplicated in order.
fn check_scopes(scopes: Vec<String>) -> Result<Vec<String>, SsoError> {
    let mut out: Vec<String> = Vec::new();
    for scope in scopes {
        let ok = !scope.is_empty()
            && scope.len() <= MAX_SCOPE
            && scope.bytes().all(|b| b.is_ascii_graphic() && b != b'"' && b != b'\\');
        if !ok {
            return Err(SsoError::Invalid(format!(
                "oidcConfig.scopes: each scope is 1 to {MAX_SCOPE} printable ASCII characters without spaces"
            )));
        }
        if scope != "openid" && !out.contains(&scope) {
            out.push(scope);
        }
    }
    if out.len() > MAX_SCOPES {
        return Err(SsoError::Invalid(format!("oidcConfig.scopes: at most {MAX_SCOPES}")));
    }
    Ok(out)
}

pub(super) fn check_domains(domains: Vec<EmailDomain>) -> Result<Vec<EmailDomain>, SsoError> {
    if domains.is_empty() || domains.len() > MAX_DOMAINS {
        return Err(SsoError::Invalid(format!("domain must name 1 to {MAX_DOMAINS} domains")));
    }
    Ok(domains)
}

/// A first sign-in never makes an owner: whoever controls the provider would hold the organization.
pub(super) fn check_default_role(role: Option<OrgRole>) -> Result<OrgRole, SsoError> {
    match role.unwrap_or(OrgRole::Member) {
        OrgRole::Owner => Err(SsoError::Invalid("defaultRole must be member or admin".into())),
        role => Ok(role),
    }
}

/// A provider's stored `default_role`: `admin`, or `member` (a first sign-in never makes an owner).
pub(super) fn default_role(stored: &str) -> OrgRole {
    match stored {
        "admin" => OrgRole::Admin,
        _ => OrgRole::Member,
    }
}

pub(super) fn view(r: &SsoProviderRecord) -> SsoProvider {
    SsoProvider {
        id: uuid::Uuid::from_bytes(r.id),
        provider_id: r.provider_id.clone(),
        organization_id: r.organization_id.map(OrgId::from_bytes),
        user_id: UserId::from_bytes(r.user_id),
        issuer: r.issuer.clone(),
        domains: r.domains.iter().map(|d| EmailDomain::from_trusted(d.clone()).to_string()).collect(),
        domain_verified: r.domain_verified,
        client_id: r.client_id.clone(),
        token_auth: TokenAuth::from_code(r.token_auth),
        discovery_endpoint: r.discovery_endpoint.clone(),
        authorization_endpoint: r.authorization_endpoint.clone(),
        token_endpoint: r.token_endpoint.clone(),
        jwks_endpoint: r.jwks_endpoint.clone(),
        userinfo_endpoint: r.userinfo_endpoint.clone(),
        scopes: r.scopes.clone(),
        default_role: default_role(&r.default_role),
        role_mapping: r.role_mapping.as_ref().map(|m| m.domain()),
        created_at: Timestamp::from_millis(r.created_at_ms),
        updated_at: Timestamp::from_millis(r.updated_at_ms),
        saml: r.saml.as_ref().map(saml_view),
    }
}

fn saml_view(s: &SamlConfigV1) -> SamlView {
    use base64::Engine;
    let pem = |der: &Vec<u8>| {
        let body = base64::engine::general_purpose::STANDARD.encode(der);
        let lines: Vec<&str> = body.as_bytes().chunks(64).map(|c| std::str::from_utf8(c).unwrap_or_default()).collect();
        format!("-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----\n", lines.join("\n"))
    };
    SamlView {
        entry_point: s.entry_point.clone(),
        idp_entity_id: s.idp_entity_id.clone(),
        certs: s.certs.iter().map(pem).collect(),
        fingerprints: s.certs.iter().map(|c| crate::saml::fingerprint(c)).collect(),
        audience: s.audience.clone(),
        callback_url: s.callback_url.clone(),
        want_assertions_signed: s.want_assertions_signed,
        identifier_format: s.identifier_format.clone().unwrap_or_else(|| crate::saml::EMAIL_FORMAT.to_owned()),
        mapping_email: s.mapping_email.clone(),
        mapping_name: s.mapping_name.clone(),
        mapping_first_name: s.mapping_first_name.clone(),
        mapping_last_name: s.mapping_last_name.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_are_compared_normalised() {
        assert_eq!(origin_of("HTTP://Idp.Test:80/x").as_deref(), Some("http://idp.test"));
        assert_eq!(origin_of("https://idp.test:8443/").as_deref(), Some("https://idp.test:8443"));
        assert_eq!(origin_of("ftp://idp.test"), None);
    }

    #[test]
    fn issuers_are_urls_without_query_or_fragment() {
        assert!(check_issuer("https://idp.test/tenant").is_ok());
        for bad in
            ["idp.test", "ftp://idp.test", "https://idp.test/?a=1", "https://idp.test/#x", "https://u:p@idp.test"]
        {
            assert!(check_issuer(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_first_sign_in_never_makes_an_owner() {
        assert_eq!(check_default_role(None).unwrap(), OrgRole::Member);
        assert_eq!(check_default_role(Some(OrgRole::Admin)).unwrap(), OrgRole::Admin);
        assert!(check_default_role(Some(OrgRole::Owner)).is_err());
    }
}
