//! Signing in through an organization's single sign-on provider over OpenID Connect (`@better-auth/sso`'s
//! `sign-in/sso` and `sso/callback/{providerId}`): the provider chosen (by id, organization or e-mail domain; only
//! one whose domains are verified), then the same flow as `[[oauth.providers]]` (src/accounts/oauth.rs and
//! src/oauth: discovery, PKCE S256, state bound to the browser, a nonce the ID token must carry, the ID token's
//! issuer, audience, expiry and signature checked against the provider's keys). SAML is not here: the provider
//! chosen is handed to src/accounts/saml.rs when it is a SAML one.
//!
//! What a sign-in through such a provider does to accounts (the users actor's rules, in the sign-in's commit):
//! an identity already linked signs into its account; a new address makes an account (its address verified only
//! when the provider says `email_verified: true`) and joins the provider's organization with its default role; an
//! account with the same address is linked only when the provider says `email_verified: true` and the account's
//! own address was proven here. The address must be in one of the provider's (verified) domains: an
//! organization's provider does not vouch for addresses of domains it was not proven to hold.

use std::sync::{Arc, PoisonError};
use std::time::Duration;

use super::oauth::{AdmitAs, Callback, CallbackError, Finished, FlowStart, FlowStarted, Refused, StartError};
use super::sso::{TokenAuth, secret_context};
use super::sso_roles::id_token_groups;
use super::{Accounts, Client, SsoError};
use crate::actors::users::SsoSignIn;
use crate::domain::{AssertedMultiFactor, Slug};
use crate::oauth::config::{ProviderConfig, ProviderKind, Secret};
use crate::oauth::{OAuthError, Provider};
use crate::store::SsoProviderRecord;

/// How `sign-in/sso` names the provider (the plugin's order: `providerId`, `organizationSlug`, then the domain).
#[derive(Debug, Clone)]
pub enum SsoChoice {
    ProviderId(String),
    Organization(Slug),
    /// `domain`, or the domain of `email`, lower-cased.
    Domain(String),
}

/// A sign-in to start, the URLs validated by the handler (trusted ones).
pub struct SsoStart {
    pub choice: SsoChoice,
    /// `{origin}/api/auth`, as the request reached us: the callback is `{base}/sso/callback/{providerId}`.
    pub auth_base: String,
    pub callback_url: String,
    pub error_url: Option<String>,
    pub new_user_url: Option<String>,
    pub scopes: Vec<String>,
    pub login_hint: Option<String>,
    /// `providerType`: the protocol the client insists on, if any.
    pub protocol: Option<SsoProtocol>,
}

/// An SSO provider's protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SsoProtocol {
    Oidc,
    Saml,
}

/// How `sign-in/sso` goes on: to the OpenID Connect provider's authorization URL, or, for a SAML provider, to
/// its own start (src/accounts/saml.rs), which needs the ACS URL the handler knows.
pub enum SsoStarted {
    Oidc(FlowStarted),
    Saml { provider_id: String },
}

/// Why `sign-in/sso` did not start; the messages are the plugin's.
#[derive(Debug, thiserror::Error)]
pub enum SsoSignInError {
    #[error("No provider found for the issuer")]
    NotFound,
    /// Its domains are not proven (DNS, or an administrator): it signs nobody in yet.
    #[error("Provider domain has not been verified")]
    NotVerified,
    /// `providerType` names a protocol the provider does not speak (the plugin's messages).
    #[error("OIDC provider is not configured")]
    OidcNotConfigured,
    #[error("SAML provider is not configured")]
    SamlNotConfigured,
    #[error("the identity provider cannot be reached: {0}")]
    Provider(OAuthError),
    #[error("the store is unavailable")]
    Unavailable,
}

/// The name an SSO flow is started with, and its callback must give: apart from `[[oauth.providers]]`'s, so
/// neither callback finishes the other's flows.
fn flow_name(provider_id: &str) -> String {
    format!("sso:{provider_id}")
}

impl Accounts {
    /// `sign-in/sso` to an OpenID Connect provider: the authorization URL (state, nonce, PKCE S256) and the
    /// cookie that binds the flow to this browser; the flow is durable before the URL is given out.
    pub async fn start_sso(&self, start: SsoStart) -> Result<SsoStarted, SsoSignInError> {
        let record = self.choose_sso_provider(&start.choice).await?;
        match (start.protocol, record.saml.is_some()) {
            (Some(SsoProtocol::Oidc), true) => return Err(SsoSignInError::OidcNotConfigured),
            (Some(SsoProtocol::Saml), false) => return Err(SsoSignInError::SamlNotConfigured),
            (_, true) => return Ok(SsoStarted::Saml { provider_id: record.provider_id }),
            (_, false) => {}
        }
        if !record.domain_verified {
            return Err(SsoSignInError::NotVerified);
        }
        let provider = self.sso_sign_in_provider(&record).ok_or(SsoSignInError::Unavailable)?;
        let flow = FlowStart {
            provider: flow_name(&record.provider_id),
            redirect_uri: format!("{}/sso/callback/{}", start.auth_base, record.provider_id),
            callback_url: start.callback_url,
            error_url: start.error_url,
            new_user_url: start.new_user_url,
            link_user: None,
            scopes: start.scopes,
            login_hint: start.login_hint,
        };
        let started = self.start_flow_at(&provider, flow).await.map_err(|e| match e {
            StartError::Provider(e) => SsoSignInError::Provider(e),
            StartError::ProviderNotFound => SsoSignInError::NotFound,
            StartError::Unavailable(_) => SsoSignInError::Unavailable,
        })?;
        Ok(SsoStarted::Oidc(started))
    }

    /// `sso/callback/{providerId}`: the flow finished as a configured provider's is (see
    /// [`Self::exchange_flow`]), then the identity signed in under this module's rules. A provider removed, or
    /// whose domains are no longer verified, since the flow started finishes nothing (`invalid_provider`).
    pub async fn finish_sso(
        &self,
        provider_id: &str,
        callback: Callback<'_>,
        client: Client,
        waited: &mut Duration,
    ) -> Result<Finished, CallbackError> {
        let name = flow_name(provider_id);
        let callback = Callback { provider: &name, ..callback };
        let record = self.sso.find(provider_id).await.map_err(|_| CallbackError::Unavailable)?;
        let record = record.filter(|r| r.domain_verified);
        let built = record.as_ref().and_then(|r| self.sso_sign_in_provider(r));
        let lookup = |flow: &str| built.clone().filter(|_| flow == name);
        let trusted = callback.trusted.clone();
        let exchanged = self.exchange_flow(&callback, lookup, waited).await;
        let (flow, _, identity, tokens) = match exchanged {
            Err(CallbackError::Redirect { error_url, code: "oauth_provider_not_found", description }) => {
                return Err(CallbackError::Redirect { error_url, code: "invalid_provider", description });
            }
            other => other?,
        };
        let record = record.ok_or(CallbackError::Unavailable)?;
        let fail = super::oauth::flow_failure(&flow);
        let in_domains = identity.email.as_deref().and_then(|e| e.rsplit_once('@')).is_some_and(|(_, domain)| {
            let domain = domain.to_ascii_lowercase();
            record.domains.iter().any(|d| domain_matches(&domain, d))
        });
        if identity.email.is_some() && !in_domains {
            let why = format!("the address is not in a domain of {}", record.provider_id);
            return Err(fail("email_domain_not_allowed", Some(why)));
        }
        // The groups the verified ID token names, mapped to the organization's roles when the provider maps them.
        let claim = record.role_mapping.as_ref().and_then(|m| m.claim.as_deref());
        let groups = tokens.id_token.as_deref().map(|t| id_token_groups(t, claim)).unwrap_or_default();
        let (join, roles) = self.sso_membership(&record, &groups.iter().map(String::as_str).collect::<Vec<_>>());
        // The ID token's `amr`, checked with its signature: a multi-factor sign-in at the provider stands in for
        // the second factor here (docs/guides/sso.md names the values).
        let multi_factor = AssertedMultiFactor::from_amr(identity.amr.iter().map(String::as_str));
        let how = AdmitAs {
            provider: record.provider_id.clone(),
            // The address is in the provider's proven domains: its verified word may join an existing account.
            trusted: true,
            // The organization's own directory: a first sign-in makes the account, verified only on its word.
            sign_up_unverified: true,
            sso: Some(SsoSignIn { join, roles, multi_factor }),
        };
        let admitted = self.admit(how, identity, tokens, None, trusted.clone(), &client).await;
        // The plugin's OpenID Connect callback words it so (with spaces; its SAML callback says `account_not_linked`).
        if let Err(Refused::NotLinked) = admitted {
            return Err(fail("account not linked", None));
        }
        self.conclude(flow, admitted, trusted, client).await
    }

    /// The provider `choice` names: by id; the organization's (a verified one first, then the oldest); the one
    /// whose domains hold the domain (exactly, or as a subdomain), a verified one first (no two verified providers
    /// share a domain).
    async fn choose_sso_provider(&self, choice: &SsoChoice) -> Result<SsoProviderRecord, SsoSignInError> {
        let store = |_: SsoError| SsoSignInError::Unavailable;
        let mut found = match choice {
            SsoChoice::ProviderId(id) => {
                return self.sso.find(id).await.map_err(store)?.ok_or(SsoSignInError::NotFound);
            }
            SsoChoice::Organization(slug) => {
                let org = self.indexes.orgs.by_slug(slug).ok_or(SsoSignInError::NotFound)?;
                let mut all = self.sso.all().await.map_err(store)?;
                all.retain(|r| r.organization_id == Some(org.id.to_bytes()));
                all
            }
            SsoChoice::Domain(domain) => {
                let mut all = self.sso.all().await.map_err(store)?;
                all.retain(|r| r.domains.iter().any(|d| domain_matches(domain, d)));
                all
            }
        };
        found.sort_by(|a, b| {
            b.domain_verified.cmp(&a.domain_verified).then(a.created_at_ms.cmp(&b.created_at_ms)).then(a.id.cmp(&b.id))
        });
        found.into_iter().next().ok_or(SsoSignInError::NotFound)
    }

    /// The provider of `record` as the sign-in machinery takes it, built once per version of the record (so its
    /// discovery document and keys are cached as a configured provider's are); `None` when its secret does not
    /// open (a data directory's key that is not the one it was sealed with).
    fn sso_sign_in_provider(&self, record: &SsoProviderRecord) -> Option<Arc<Provider>> {
        let mut built = self.sso.signing_in.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((id, updated_at_ms, provider)) = built.get(&record.provider_id)
            && *id == record.id
            && *updated_at_ms == record.updated_at_ms
        {
            return Some(Arc::clone(provider));
        }
        let secret = match self.data_key.open(&record.sealed_secret, &secret_context(&record.id)) {
            Ok(secret) => String::from_utf8(secret).ok()?,
            Err(_) => {
                tracing::error!(provider = %record.provider_id, "a single sign-on provider's client secret does not open");
                return None;
            }
        };
        let scopes = match record.scopes.is_empty() {
            true => Vec::new(),
            false => std::iter::once("openid".to_owned()).chain(record.scopes.iter().cloned()).collect(),
        };
        let config = ProviderConfig {
            id: record.provider_id.clone(),
            preset: None,
            kind: Some(ProviderKind::Oidc),
            issuer: Some(record.issuer.clone()),
            tenant: None,
            client_id: record.client_id.clone(),
            client_secret_env: None,
            client_secret_file: None,
            scopes,
            trusted_for_linking: true,
            allow_unverified_email_sign_up: true,
            client_secret: Some(Secret::new(secret)),
            secret_in_body: record.token_auth == TokenAuth::ClientSecretPost.code(),
        };
        let provider = Arc::new(Provider::unconfigured(config));
        built.insert(record.provider_id.clone(), (record.id, record.updated_at_ms, Arc::clone(&provider)));
        Some(provider)
    }
}

/// The plugin's `domainMatches`: `domain` is `of`, or a subdomain of it (both lower case).
pub(super) fn domain_matches(domain: &str, of: &str) -> bool {
    domain == of || domain.strip_suffix(of).is_some_and(|rest| rest.ends_with('.'))
}

#[cfg(test)]
mod tests {
    use super::domain_matches;

    #[test]
    fn a_domain_matches_itself_and_its_subdomains_only() {
        assert!(domain_matches("acme.test", "acme.test"));
        assert!(domain_matches("eu.acme.test", "acme.test"));
        assert!(!domain_matches("notacme.test", "acme.test"));
        assert!(!domain_matches("acme.test.evil", "acme.test"));
    }
}
