//! SAML 2.0 single sign-on per organization (`@better-auth/sso`'s SAML side), orchestrated: a provider registered
//! with its IdP's entity ID and signing certificates; the AuthnRequest a sign-in sends by the HTTP-Redirect
//! binding, kept in the store as a sign-in flow (single use, bound to the browser that started it by a cookie,
//! 10 minutes) under the hash of its ID; and the ACS, where a response posted by the HTTP-POST binding is checked
//! ([`crate::saml`]: the signature with the registered certificates, one assertion, issuer, audience, times, the
//! bearer confirmation), matched to the pending request of this browser that it answers, its assertion ID
//! remembered until it expires (a replay is refused on every node and after a restart), and signed in under the
//! organization's rules.
//!
//! Where the plugin is weaker (docs/guides/sso.md): the bearer confirmation's `NotOnOrAfter` is checked; a response
//! is accepted only from the browser whose request it answers (the plugin accepts any pending request's response
//! in any browser); IdP-initiated sign-in is not offered; the register answer never carries a private key (none is
//! taken: requests are not signed and assertions not encrypted).

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::oauth::{AdmitAs, CallbackError, FLOW_LIFETIME, Finished, FlowStarted};
use super::sso::{SsoError, SsoProvider, check_default_role, check_domains, mapping_detail, view};
use super::sso_roles::assertion_groups;
use super::{Accounts, Client, Current};
use crate::actors::users::SsoSignIn;
use crate::domain::{AssertedMultiFactor, EmailDomain, OrgId, OrgRole, RoleMapping, SsoProviderId, Timestamp, action};
use crate::oauth::{Identity, Tokens, random_token};
use crate::saml::{AuthnRequest, EMAIL_FORMAT, Expected, SamlError, Signed};
use crate::store::linked::OAuthFlowRecordV1;
use crate::store::{SamlConfigV1, SsoProviderRecord, StoreError, StoreOp, audit};

const MAX_URL: usize = 2048;
const MAX_CERTS: usize = 4;
const MAX_METADATA: usize = 100 * 1024;
const MAX_NAME: usize = 256;

/// What `POST /sso/register` gives for a SAML provider.
#[derive(Debug, Clone)]
pub struct NewSamlProvider {
    pub provider_id: SsoProviderId,
    /// This service's entity ID for the provider (the plugin's `issuer` for SAML).
    pub issuer: String,
    pub domains: Vec<EmailDomain>,
    pub organization: OrgId,
    /// `samlConfig.entryPoint`: the IdP's single sign-on URL (its metadata's HTTP-Redirect one wins).
    pub entry_point: Option<String>,
    /// `samlConfig.cert`: one or several PEM certificates.
    pub certs: Vec<String>,
    /// `samlConfig.idpMetadata.entityID` (the metadata's wins).
    pub idp_entity_id: Option<String>,
    /// `samlConfig.idpMetadata.cert`.
    pub idp_certs: Vec<String>,
    /// `samlConfig.idpMetadata.metadata`: the IdP's metadata XML.
    pub idp_metadata: Option<String>,
    pub audience: Option<String>,
    pub callback_url: Option<String>,
    pub want_assertions_signed: bool,
    pub identifier_format: Option<String>,
    pub mapping_email: Option<String>,
    pub mapping_name: Option<String>,
    pub mapping_first_name: Option<String>,
    pub mapping_last_name: Option<String>,
    pub default_role: Option<OrgRole>,
    /// `roleMapping`: which of the IdP's groups (an attribute of its assertions) give which roles.
    pub role_mapping: Option<RoleMapping>,
}

/// A SAML sign-in to start: where the ACS is (this service's URL as the browser reaches it) and where the
/// browser goes after (trusted URLs, checked by the handler).
pub struct SamlStart {
    pub provider_id: String,
    pub acs: String,
    pub callback_url: Option<String>,
    pub error_url: Option<String>,
    pub new_user_url: Option<String>,
}

/// Why a SAML sign-in could not start.
#[derive(Debug, thiserror::Error)]
pub enum SamlStartError {
    #[error("No provider found for the issuer")]
    NotFound,
    /// Its domains are not proven (DNS, or an administrator): it signs nobody in yet.
    #[error("Provider domain has not been verified")]
    NotVerified,
    #[error("the store is unavailable")]
    Unavailable,
}

/// A response posted to the ACS.
pub struct SamlPost<'a> {
    pub provider_id: &'a str,
    pub saml_response: &'a str,
    /// This ACS's URL as the browser reached it (the AuthnRequest named it; the response must too).
    pub acs: &'a str,
    /// The SAML flow cookie the browser sent.
    pub browser: Option<&'a str>,
    pub trusted: Option<crate::domain::SessionToken>,
}

/// Why the ACS refused a response outright (no flow of this browser is known to send it back to).
#[derive(Debug, thiserror::Error)]
pub enum AcsError {
    #[error("No SAML provider found")]
    NoProvider,
    /// The response is not one this provider's IdP signed, or is malformed.
    #[error(transparent)]
    Response(SamlError),
    /// It answers no pending request (never made, answered already, expired, or of another provider).
    #[error("The response answers no pending sign-in: it was finished already, expired, or never started")]
    UnknownRequest,
    #[error("the store is unavailable")]
    Unavailable,
}

impl Accounts {
    /// `sso/register` with `samlConfig`: a SAML 2.0 provider for an organization, by one of its owners or admins
    /// (or a service administrator). The IdP is named by its entity ID and signing certificates, given or read from
    /// its metadata XML (nothing is fetched). Audited in the same commit (`sso_provider.created`).
    pub async fn register_saml_provider(
        &self,
        current: &Current,
        new: NewSamlProvider,
        ip: &str,
    ) -> Result<SsoProvider, SsoError> {
        let org = new.organization;
        let id = new.provider_id.as_str();
        self.may_register_sso_provider(current, org, id).await?;
        let issuer = check_entity_id(&new.issuer)?;
        let domains = check_domains(new.domains.clone())?;
        let default_role = check_default_role(new.default_role)?;
        if let Some(mapping) = &new.role_mapping {
            self.check_role_mapping(current, org, mapping)?;
        }
        let saml = saml_config(&new)?;
        let now = Timestamp::now();
        let record = SsoProviderRecord {
            id: uuid::Uuid::now_v7().into_bytes(),
            provider_id: id.to_owned(),
            organization_id: Some(org.to_bytes()),
            user_id: current.user.id.to_bytes(),
            issuer,
            domains: domains.iter().map(|d| d.as_str().to_owned()).collect(),
            domain_verified: false,
            verification: None,
            client_id: String::new(),
            sealed_secret: Vec::new(),
            token_auth: 0,
            discovery_endpoint: String::new(),
            authorization_endpoint: String::new(),
            token_endpoint: String::new(),
            jwks_endpoint: String::new(),
            userinfo_endpoint: None,
            scopes: Vec::new(),
            default_role: default_role.as_str().to_owned(),
            created_at_ms: now.as_millis(),
            updated_at_ms: now.as_millis(),
            saml: Some(saml),
            role_mapping: new.role_mapping.as_ref().map(Into::into),
        };
        let saml = record.saml.as_ref().map(|s| (s.idp_entity_id.clone(), s.certs.len())).unwrap_or_default();
        let detail = format!(
            "{}: SAML; entity ID {}; IdP {} ({} certificate(s)); domain {}; default role {}{}",
            record.provider_id,
            record.issuer,
            saml.0,
            saml.1,
            record.domains.join(","),
            record.default_role,
            mapping_detail(new.role_mapping.as_ref())
        );
        let logged = audit::entry(action::SSO_PROVIDER_CREATED, Some(current.actor()), Some(org.into()), ip, detail);
        self.sso.write(vec![StoreOp::PutSsoProvider(Box::new(record.clone())), logged]).await?;
        Ok(view(&record))
    }

    /// `sso/saml2/sp/metadata?providerId=`: the SP metadata of a SAML provider (public, as the plugin serves it).
    /// `acs`: this provider's ACS URL.
    pub async fn saml_sp_metadata(&self, provider_id: &str, acs: &str) -> Result<String, SsoError> {
        let record = self.sso.find(provider_id).await?.ok_or(SsoError::NotFound)?;
        let saml = record.saml.as_ref().ok_or(SsoError::NotFound)?;
        let format = saml.identifier_format.as_deref().unwrap_or(EMAIL_FORMAT);
        Ok(crate::saml::sp_metadata(&record.issuer, acs, saml.want_assertions_signed, format))
    }

    /// Starts a SAML sign-in (only through a provider whose domains are verified, as an OpenID Connect one): the
    /// AuthnRequest's redirect URL, its flow written to the store (under the hash of
    /// its ID, bound to the browser by the returned cookie value) before it is given out.
    pub async fn start_saml(&self, start: SamlStart) -> Result<FlowStarted, SamlStartError> {
        let record = self.sso.find(&start.provider_id).await.map_err(|_| SamlStartError::Unavailable)?;
        let record = record.ok_or(SamlStartError::NotFound)?;
        let saml = record.saml.as_ref().ok_or(SamlStartError::NotFound)?;
        if !record.domain_verified {
            return Err(SamlStartError::NotVerified);
        }
        let id = crate::saml::request_id();
        let browser = random_token();
        let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let request = AuthnRequest {
            id: &id,
            issue_instant: &now,
            destination: &saml.entry_point,
            acs: &start.acs,
            sp_entity_id: &record.issuer,
            name_id_format: saml.identifier_format.as_deref().unwrap_or(EMAIL_FORMAT),
        };
        // RelayState is the plugin's habit and some IdPs want one; the response is bound by its InResponseTo and
        // the browser's cookie, not by it.
        let url = request.redirect_url(&random_token());
        let callback_url = start.callback_url.or_else(|| saml.callback_url.clone()).unwrap_or_else(|| "/".to_owned());
        let flow = OAuthFlowRecordV1 {
            provider: flow_provider(&record.provider_id),
            pkce_verifier: String::new(),
            nonce: id.clone(),
            browser: sha256(&browser),
            redirect_uri: start.acs,
            callback_url,
            error_url: start.error_url,
            new_user_url: start.new_user_url,
            link_user: None,
            expires_at_ms: Timestamp::now().plus(FLOW_LIFETIME).as_millis(),
        };
        self.sso
            .write(vec![StoreOp::PutFlow(request_key(&id), flow)])
            .await
            .map_err(|_| SamlStartError::Unavailable)?;
        Ok(FlowStarted { url, browser })
    }

    /// The ACS: the response checked ([`Self::saml_acs`]), then the identity it asserts signed in as after an
    /// OpenID Connect provider of the organization: its account found, linked (only when the address is in a
    /// verified domain of this provider) or made, and made a member of the provider's organization with the
    /// provider's default role, in the session's commit; bans and the second-factor rules as for any sign-in.
    pub async fn finish_saml(
        &self,
        post: SamlPost<'_>,
        client: Client,
    ) -> Result<Result<Finished, CallbackError>, AcsError> {
        let (flow, record, signed) = match self.saml_acs(&post).await? {
            Ok(found) => found,
            Err(refused) => return Ok(Err(refused)),
        };
        let saml = record.saml.as_ref().ok_or(AcsError::NoProvider)?;
        let email = saml
            .mapping_email
            .as_deref()
            .map_or_else(|| signed.attribute("email").or_else(|| signed.attribute("mail")), |m| signed.attribute(m))
            .unwrap_or(&signed.name_id)
            .to_lowercase();
        let name = match (&saml.mapping_name, &saml.mapping_first_name, &saml.mapping_last_name) {
            (Some(m), _, _) => signed.attribute(m).map(str::to_owned),
            (None, first, last) => {
                let first = signed.attribute(first.as_deref().unwrap_or("firstName"));
                let last = signed.attribute(last.as_deref().unwrap_or("lastName"));
                let joined = [first, last].into_iter().flatten().collect::<Vec<_>>().join(" ");
                signed
                    .attribute("name")
                    .or_else(|| signed.attribute("displayName"))
                    .map(str::to_owned)
                    .or((!joined.is_empty()).then_some(joined))
            }
        };
        // The organization proved it holds the provider's domains (no sign-in starts otherwise): its IdP's word on
        // an address of those domains is as good as a verification, and is what lets it join an existing account;
        // an address outside them is refused, as through an OpenID Connect provider of the organization.
        let domain = email.rsplit_once('@').map(|(_, d)| d.to_owned()).unwrap_or_default();
        let vouched = record.domain_verified && record.domains.iter().any(|d| in_domain(&domain, d));
        if !vouched {
            let error_url = flow.error_url.clone().unwrap_or_else(|| flow.callback_url.clone());
            let why = format!("the address is not in a verified domain of {}", record.provider_id);
            return Ok(Err(CallbackError::Redirect {
                error_url,
                code: "email_domain_not_allowed",
                description: Some(why),
            }));
        }
        let identity = Identity {
            subject: signed.name_id.clone(),
            email: Some(email),
            email_verified: vouched,
            name,
            picture: None,
            amr: Vec::new(),
        };
        // The groups the signed assertion names, mapped to the organization's roles when the provider maps them.
        let attribute = record.role_mapping.as_ref().and_then(|m| m.claim.as_deref());
        let (join, roles) = self.sso_membership(&record, &assertion_groups(&signed, attribute));
        // The signed assertion's `AuthnContextClassRef`: a multi-factor class stands in for the second factor here
        // (docs/guides/sso.md names the classes).
        let multi_factor = AssertedMultiFactor::from_authn_context(signed.authn_contexts.iter().map(String::as_str));
        let how = AdmitAs {
            provider: record.provider_id.clone(),
            trusted: true,
            sign_up_unverified: true,
            sso: Some(SsoSignIn { join, roles, multi_factor }),
        };
        let tokens = Tokens { access_token: String::new(), refresh_token: None, id_token: None, expires_at_ms: None };
        let trusted = post.trusted.clone();
        let admitted = self.admit(how, identity, tokens, None, trusted.clone(), &client).await;
        Ok(self.conclude(flow, admitted, trusted, client).await)
    }

    /// The ACS: checks a posted response and returns the flow of this browser it answers, taken (single use),
    /// with the verified assertion. Refusals before a flow of this browser is known are [`AcsError`]s; after, they
    /// are redirects to the flow's error URL ([`CallbackError::Redirect`]), and the flow is spent either way.
    pub async fn saml_acs(
        &self,
        post: &SamlPost<'_>,
    ) -> Result<Result<(OAuthFlowRecordV1, SsoProviderRecord, Signed), CallbackError>, AcsError> {
        let record = self.sso.find(post.provider_id).await.map_err(|_| AcsError::Unavailable)?;
        let record = record.ok_or(AcsError::NoProvider)?;
        let saml = record.saml.as_ref().ok_or(AcsError::NoProvider)?;
        // Signature first: nothing an unsigned document says is looked up.
        let signed = crate::saml::verify(post.saml_response, &saml.certs).map_err(AcsError::Response)?;
        let key = request_key(&signed.in_response_to);
        let _claim = self.flows.claim(key).ok_or(AcsError::UnknownRequest)?;
        let flow = match self.read_flow(&key).await {
            Ok(flow) => flow,
            Err(CallbackError::NoFlow) => return Err(AcsError::UnknownRequest),
            Err(_) => return Err(AcsError::Unavailable),
        };
        // Another provider's request: not ours to spend.
        if flow.provider != flow_provider(&record.provider_id) {
            return Err(AcsError::UnknownRequest);
        }
        let fail = |code: &'static str, description: Option<String>| CallbackError::Redirect {
            error_url: flow.error_url.clone().unwrap_or_else(|| flow.callback_url.clone()),
            code,
            description,
        };
        let now = Timestamp::now().as_millis();
        let checked = (|| {
            // The request was made by this browser (its cookie), for this ACS.
            let same_browser = post.browser.is_some_and(|b| bool::from(sha256(b).ct_eq(&flow.browser)));
            if !same_browser {
                return Err(fail("state_mismatch", None));
            }
            if flow.expires_at_ms < now {
                return Err(fail("state_expired", None));
            }
            let mut audiences = vec![record.issuer.as_str()];
            audiences.extend(saml.audience.as_deref());
            let expected = Expected { audiences: &audiences, acs: &flow.redirect_uri, now_ms: now };
            signed
                .check(&saml.idp_entity_id, &expected)
                .map_err(|e| fail("invalid_saml_response", Some(e.code().to_owned())))?;
            if saml.want_assertions_signed && !signed.assertion_signed {
                return Err(fail("invalid_saml_response", Some("SAML_ASSERTION_SIGNATURE_REQUIRED".to_owned())));
            }
            Ok(())
        })();
        // The assertion's ID, remembered until it expires: the same assertion is never taken twice, whatever
        // request it is shown with, on any node, across restarts.
        let seen = assertion_key(&record.provider_id, &signed.id);
        let replayed = match self.read_flow(&seen).await {
            Ok(_) => true,
            Err(CallbackError::NoFlow) => false,
            Err(_) => return Err(AcsError::Unavailable),
        };
        let mut ops = vec![StoreOp::TakeFlow(key)];
        if checked.is_ok() && !replayed {
            let until = signed.valid_until_ms().unwrap_or(now).max(now) + crate::saml::CLOCK_SKEW_MS;
            ops.push(StoreOp::PutFlow(seen, replay_marker(&record.provider_id, until)));
        }
        match self.flows.writer.write(ops).await {
            Ok(()) => {}
            Err(StoreError::Conflict(_)) => return Err(AcsError::UnknownRequest),
            Err(_) => return Err(AcsError::Unavailable),
        }
        if let Err(refused) = checked {
            return Ok(Err(refused));
        }
        if replayed {
            return Ok(Err(fail("replay_detected", None)));
        }
        Ok(Ok((flow, record, signed)))
    }
}

/// The flow's `provider` for a SAML request: never a configured provider's id nor an OpenID Connect SSO
/// provider's, so no OAuth callback can finish it.
fn flow_provider(provider_id: &str) -> String {
    format!("saml:{provider_id}")
}

/// The flow store's key of a pending AuthnRequest: the hash of its ID.
fn request_key(request_id: &str) -> [u8; 32] {
    sha256(&format!("saml-request\0{request_id}"))
}

/// The flow store's key remembering an assertion: its provider and ID, hashed.
fn assertion_key(provider_id: &str, assertion_id: &str) -> [u8; 32] {
    sha256(&format!("saml-assertion\0{provider_id}\0{assertion_id}"))
}

/// What remembers a used assertion: a flow no browser holds (its browser hash is of nothing anyone has) that no
/// callback can finish, swept with the flows once `until` has passed.
fn replay_marker(provider_id: &str, until: i64) -> OAuthFlowRecordV1 {
    OAuthFlowRecordV1 {
        provider: format!("saml-assertion:{provider_id}"),
        pkce_verifier: String::new(),
        nonce: String::new(),
        browser: [0; 32],
        redirect_uri: String::new(),
        callback_url: String::new(),
        error_url: None,
        new_user_url: None,
        link_user: None,
        expires_at_ms: until,
    }
}

/// An address's domain is the provider's, or one under it (the plugin's `domainMatches`).
fn in_domain(domain: &str, provider: &str) -> bool {
    domain == provider || domain.strip_suffix(provider).is_some_and(|head| head.ends_with('.'))
}

fn sha256(text: &str) -> [u8; 32] {
    Sha256::digest(text.as_bytes()).into()
}

/// The SAML part of a registration, checked: the IdP's entity ID, certificates and SSO URL (from its metadata XML
/// when given, which wins, as in the plugin), the optional settings.
fn saml_config(new: &NewSamlProvider) -> Result<SamlConfigV1, SsoError> {
    let invalid = |m: &str| SsoError::Invalid(m.to_owned());
    let metadata = match new.idp_metadata.as_deref() {
        Some(xml) if xml.len() > MAX_METADATA => {
            return Err(invalid("samlConfig.idpMetadata.metadata is larger than 100 KiB"));
        }
        Some(xml) => Some(
            crate::saml::idp_metadata(xml)
                .map_err(|e| SsoError::Invalid(format!("samlConfig.idpMetadata.metadata: {e}")))?,
        ),
        None => None,
    };
    let entity_id = match (&metadata, &new.idp_entity_id) {
        (Some(m), _) => m.entity_id.clone(),
        (None, Some(id)) => id.trim().to_owned(),
        (None, None) => {
            return Err(invalid(
                "SAML manual IdP configuration requires idpMetadata.entityID; issuer identifies the service provider",
            ));
        }
    };
    if entity_id.is_empty() || entity_id.len() > MAX_URL || entity_id.chars().any(char::is_control) {
        return Err(invalid("samlConfig.idpMetadata.entityID must be 1 to 2048 characters"));
    }
    let mut certs = metadata.as_ref().map(|m| m.certs.clone()).unwrap_or_default();
    if certs.is_empty() {
        let given = if new.idp_certs.is_empty() { &new.certs } else { &new.idp_certs };
        for pem in given {
            certs.push(crate::saml::certificate(pem).map_err(|e| SsoError::Invalid(format!("samlConfig.cert: {e}")))?);
        }
    }
    if certs.is_empty() {
        return Err(SsoError::Invalid(
            "CERT_SOURCE_MISSING: samlConfig needs the IdP's signing certificate (cert, idpMetadata.cert or \
             idpMetadata.metadata)"
                .into(),
        ));
    }
    if certs.len() > MAX_CERTS {
        return Err(SsoError::Invalid(format!("samlConfig.cert: at most {MAX_CERTS} certificates")));
    }
    let entry_point = metadata
        .as_ref()
        .and_then(|m| m.redirect_sso.clone())
        .or_else(|| new.entry_point.clone())
        .ok_or_else(|| invalid("samlConfig.entryPoint is required"))?;
    check_url(&entry_point, "samlConfig.entryPoint")?;
    let text = |value: &Option<String>, key: &str| -> Result<Option<String>, SsoError> {
        match value {
            Some(v) if v.is_empty() || v.len() > MAX_NAME || v.chars().any(char::is_control) => {
                Err(SsoError::Invalid(format!("{key} must be 1 to {MAX_NAME} characters")))
            }
            other => Ok(other.clone()),
        }
    };
    // Where a sign-in that names none goes: a path on this service only (the sign-in's own `callbackURL` is
    // checked against the trusted origins; this one is an organization admin's, and must not send people away).
    if let Some(url) = &new.callback_url
        && (!url.starts_with('/') || url.starts_with("//") || url.contains('\\') || url.len() > MAX_URL)
    {
        return Err(invalid("samlConfig.callbackUrl must be a path on this service (/…)"));
    }
    Ok(SamlConfigV1 {
        entry_point,
        idp_entity_id: entity_id,
        certs,
        audience: text(&new.audience, "samlConfig.audience")?,
        callback_url: new.callback_url.clone(),
        want_assertions_signed: new.want_assertions_signed,
        identifier_format: text(&new.identifier_format, "samlConfig.identifierFormat")?,
        mapping_email: text(&new.mapping_email, "samlConfig.mapping.email")?,
        mapping_name: text(&new.mapping_name, "samlConfig.mapping.name")?,
        mapping_first_name: text(&new.mapping_first_name, "samlConfig.mapping.firstName")?,
        mapping_last_name: text(&new.mapping_last_name, "samlConfig.mapping.lastName")?,
    })
}

/// The SP's entity ID for the provider (the plugin's `issuer`): an absolute URI (a URL, often the metadata URL
/// with its `?providerId=`, or a URN), as SAML core §8.3.6 asks.
fn check_entity_id(issuer: &str) -> Result<String, SsoError> {
    let bad =
        || SsoError::Invalid("issuer (the SP entity ID) must be an absolute URI of at most 1024 characters".into());
    if issuer.is_empty() || issuer.len() > 1024 || issuer.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err(bad());
    }
    url::Url::parse(issuer).map_err(|_| bad())?;
    Ok(issuer.to_owned())
}

fn check_url(url: &str, key: &str) -> Result<(), SsoError> {
    let bad = || SsoError::Invalid(format!("{key} must be an http or https URL without a fragment"));
    if url.len() > MAX_URL {
        return Err(bad());
    }
    let parsed = url::Url::parse(url).map_err(|_| bad())?;
    if !matches!(parsed.scheme(), "http" | "https") || parsed.fragment().is_some() || parsed.host_str().is_none() {
        return Err(bad());
    }
    Ok(())
}
