//! SAML 2.0 Web Browser SSO as a service provider (SAML profiles §4.1), the part that needs no state: the
//! AuthnRequest sent by the HTTP-Redirect binding, the SP metadata, and the checks of a Response that came back by
//! the HTTP-POST binding. Which request a response answers, which browser it belongs to, and whether its assertion
//! was seen before are the caller's (src/accounts/saml.rs): they need the store.
//!
//! The XML signature is checked by Bergshamra's XML-DSig (a maintained, pure-Rust implementation tested against
//! xmlsec's interoperability suite), never here: with the IdP's registered certificates only (a key or certificate
//! inside the document is never trusted), and its position check against signature wrapping. The document is
//! parsed once, by Uppsala with DTDs forbidden (so no entity, internal or external, is ever expanded and nothing
//! is fetched), and every value used is read from the element the signature covers, by node, never found again
//! by name: a second assertion, signed or not, is refused before anything is read.

use std::io::Write;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use bergshamra_dsig::{DsigContext, VerifyResult};
use bergshamra_keys::KeysManager;
use uppsala::{Document, NodeId};

pub const PROTOCOL: &str = "urn:oasis:names:tc:SAML:2.0:protocol";
pub const ASSERTION: &str = "urn:oasis:names:tc:SAML:2.0:assertion";
const METADATA: &str = "urn:oasis:names:tc:SAML:2.0:metadata";
const DSIG: &str = "http://www.w3.org/2000/09/xmldsig#";
const XMLENC: &str = "http://www.w3.org/2001/04/xmlenc#";
const BEARER: &str = "urn:oasis:names:tc:SAML:2.0:cm:bearer";
const SUCCESS: &str = "urn:oasis:names:tc:SAML:2.0:status:Success";
pub const HTTP_POST: &str = "urn:oasis:names:tc:SAML:2.0:bindings:HTTP-POST";
pub const HTTP_REDIRECT: &str = "urn:oasis:names:tc:SAML:2.0:bindings:HTTP-Redirect";
/// What an address-shaped NameID is asked for unless the provider names another format.
pub const EMAIL_FORMAT: &str = "urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress";

/// The largest `SAMLResponse` read (base64, as posted): the plugin's `maxResponseSize`.
pub const MAX_RESPONSE: usize = 256 * 1024;
/// How far the IdP's clock may be from ours, either way, for every time a response carries.
pub const CLOCK_SKEW_MS: i64 = 2 * 60 * 1000;
/// The most attribute values kept of an assertion (a name, an address, and the person's groups: Entra ID sends
/// at most 150 group ids in a SAML token before it sends a link to Graph instead).
const MAX_ATTRIBUTES: usize = 256;

/// Why a response was refused. The code is what the ACS answers (`code`, or `error_description` in a redirect).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SamlError {
    #[error("SAMLResponse is larger than {MAX_RESPONSE} bytes")]
    TooLarge,
    #[error("SAMLResponse is not base64")]
    NotBase64,
    /// A DOCTYPE (and so any entity declaration): SAML never needs one, and it is refused unread.
    #[error("the response carries a DOCTYPE, which SAML never needs")]
    Doctype,
    #[error("the response is not well-formed XML: {0}")]
    InvalidXml(String),
    #[error("the document is not a SAML 2.0 Response")]
    NotAResponse,
    #[error("the response's status is not Success: {0}")]
    Status(String),
    #[error("the response carries no assertion")]
    NoAssertion,
    /// More than one assertion anywhere in the document (a signature wrapping attempt, or an IdP we do not serve).
    #[error("the response carries more than one assertion")]
    MultipleAssertions,
    #[error("encrypted assertions are not accepted")]
    Encrypted,
    /// No signature of the registered certificates covers the assertion (or the response around it).
    #[error("the assertion is not signed by the identity provider's registered certificate: {0}")]
    Signature(String),
    #[error("the assertion's issuer is not the identity provider")]
    Issuer,
    #[error("the response's Destination is not this service's ACS URL")]
    Destination,
    #[error("the assertion is not for this service provider (Audience)")]
    Audience,
    #[error("the assertion is not valid now (NotBefore/NotOnOrAfter)")]
    Expired,
    /// No bearer SubjectConfirmation whose data names this ACS, is still valid and answers a request.
    #[error("no bearer SubjectConfirmation for this ACS URL that is still valid")]
    Confirmation,
    #[error("the bearer confirmation's Recipient is not this service's ACS URL")]
    Recipient,
    #[error("the bearer confirmation has expired (NotOnOrAfter)")]
    ConfirmationExpired,
    /// No `InResponseTo`: an IdP-initiated (unsolicited) response, which is not accepted.
    #[error("IdP-initiated sign-in is not allowed: the response answers no request")]
    Unsolicited,
    /// The response's and the assertion's `InResponseTo` differ.
    #[error("the response's InResponseTo differs from its assertion's")]
    InResponseTo,
    #[error("the assertion names no subject (NameID)")]
    NoSubject,
    #[error("the assertion carries no AuthnStatement")]
    NoAuthnStatement,
}

impl SamlError {
    /// The machine-readable code (the plugin's where it has one).
    pub const fn code(&self) -> &'static str {
        match self {
            Self::TooLarge => "SAML_RESPONSE_TOO_LARGE",
            Self::NotBase64 | Self::InvalidXml(_) => "SAML_INVALID_XML",
            Self::Doctype => "SAML_DTD_FORBIDDEN",
            Self::NotAResponse => "SAML_NOT_A_RESPONSE",
            Self::Status(_) => "SAML_STATUS_NOT_SUCCESS",
            Self::NoAssertion => "SAML_NO_ASSERTION",
            Self::MultipleAssertions => "SAML_MULTIPLE_ASSERTIONS",
            Self::Encrypted => "SAML_ENCRYPTED_ASSERTION",
            Self::Signature(_) => "SAML_SIGNATURE_INVALID",
            Self::Issuer => "SAML_ISSUER_MISMATCH",
            Self::Destination => "SAML_DESTINATION_MISMATCH",
            Self::Audience => "SAML_AUDIENCE_MISMATCH",
            Self::Expired => "SAML_ASSERTION_EXPIRED",
            Self::Confirmation => "SAML_BEARER_CONFIRMATION_MISSING",
            Self::Recipient => "SAML_RECIPIENT_MISMATCH",
            Self::ConfirmationExpired => "SAML_BEARER_CONFIRMATION_EXPIRED",
            Self::Unsolicited => "SAML_UNSOLICITED_RESPONSE",
            Self::InResponseTo => "SAML_IN_RESPONSE_TO_MISMATCH",
            Self::NoSubject => "SAML_NO_SUBJECT",
            Self::NoAuthnStatement => "SAML_NO_AUTHN_STATEMENT",
        }
    }
}

/// An assertion whose signature was verified, as the signed element says it; its conditions not checked yet
/// ([`Signed::check`]).
#[derive(Debug, Clone)]
pub struct Signed {
    /// The assertion's `ID` (the replay cache's key).
    pub id: String,
    pub issuer: String,
    /// The request it answers: the bearer confirmation's `InResponseTo` (inside the signature), the same as the
    /// response's when it has one.
    pub in_response_to: String,
    pub destination: Option<String>,
    pub name_id: String,
    pub attributes: Vec<(String, String)>,
    /// Each AuthnStatement's `AuthnContextClassRef`: how the IdP says the person authenticated.
    pub authn_contexts: Vec<String>,
    /// The signature covers the assertion itself (not only the response around it).
    pub assertion_signed: bool,
    not_before_ms: Option<i64>,
    not_on_or_after_ms: Option<i64>,
    audiences: Vec<Vec<String>>,
    /// Each bearer confirmation: its Recipient, NotOnOrAfter, whether it has a NotBefore, and InResponseTo.
    bearers: Vec<Bearer>,
}

#[derive(Debug, Clone)]
struct Bearer {
    recipient: Option<String>,
    not_on_or_after_ms: Option<i64>,
    not_before: bool,
}

/// What the conditions of an assertion are checked against.
pub struct Expected<'a> {
    /// This service's entity ID and any other audience the provider was registered with.
    pub audiences: &'a [&'a str],
    /// This provider's ACS URL (`{base}/sso/saml2/sp/acs/{providerId}`).
    pub acs: &'a str,
    pub now_ms: i64,
}

impl Signed {
    /// The SAML profiles' checks (§4.1.4.2–3, core §2.5.1): Destination (when present), Issuer, the Conditions'
    /// window, the AudienceRestrictions, and a bearer SubjectConfirmation whose data names this ACS and is still
    /// valid (the plugin checks neither that data's NotOnOrAfter nor its absence). `idp` is the registered IdP's
    /// entity ID. Each time is allowed [`CLOCK_SKEW_MS`] either way.
    pub fn check(&self, idp: &str, expected: &Expected<'_>) -> Result<(), SamlError> {
        if self.issuer != idp {
            return Err(SamlError::Issuer);
        }
        if self.destination.as_deref().is_some_and(|d| d != expected.acs) {
            return Err(SamlError::Destination);
        }
        let now = expected.now_ms;
        if self.not_before_ms.is_some_and(|t| now < t.saturating_sub(CLOCK_SKEW_MS))
            || self.not_on_or_after_ms.is_some_and(|t| now >= t.saturating_add(CLOCK_SKEW_MS))
        {
            return Err(SamlError::Expired);
        }
        // Every AudienceRestriction must name us, and there must be one (profiles §4.1.4.2).
        if self.audiences.is_empty()
            || !self.audiences.iter().all(|names| names.iter().any(|a| expected.audiences.contains(&a.as_str())))
        {
            return Err(SamlError::Audience);
        }
        // One bearer confirmation that satisfies all: the closest refusal is named otherwise.
        let mut refusal = SamlError::Confirmation;
        for bearer in &self.bearers {
            if bearer.recipient.as_deref() != Some(expected.acs) {
                refusal = SamlError::Recipient;
                continue;
            }
            match bearer.not_on_or_after_ms {
                Some(t) if now < t.saturating_add(CLOCK_SKEW_MS) && !bearer.not_before => return Ok(()),
                _ => refusal = SamlError::ConfirmationExpired,
            }
        }
        Err(refusal)
    }

    /// Until when the assertion may be presented (its conditions' or its bearer confirmation's end, the later,
    /// with the skew): how long its ID is remembered against a replay.
    pub fn valid_until_ms(&self) -> Option<i64> {
        let ends = self.bearers.iter().filter_map(|b| b.not_on_or_after_ms).chain(self.not_on_or_after_ms);
        ends.max().map(|t| t.saturating_add(CLOCK_SKEW_MS))
    }

    /// The first value of the attribute `name`.
    pub fn attribute(&self, name: &str) -> Option<&str> {
        self.attributes.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    /// Every value of the attribute `name` (a multi-valued one, such as the person's groups), in order.
    pub fn attribute_values<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.attributes.iter().filter(move |(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

/// One IdP signing certificate, from PEM (`-----BEGIN CERTIFICATE-----`) or bare base64 (as metadata carries
/// it): its DER, once it reads as an X.509 certificate with a key that can verify.
pub fn certificate(text: &str) -> Result<Vec<u8>, String> {
    let body: String = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.starts_with("-----"))
        .collect::<Vec<_>>()
        .concat()
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    let der = STANDARD.decode(body.as_bytes()).map_err(|_| "a certificate is not PEM or base64".to_owned())?;
    bergshamra_keys::loader::load_x509_cert_der(&der).map_err(|e| format!("a certificate does not read: {e}"))?;
    Ok(der)
}

/// The SHA-256 fingerprint of a certificate, as `AB:CD:…` (what administrators compare with their IdP's console).
pub fn fingerprint(der: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(der).iter().map(|b| format!("{b:02X}")).collect::<Vec<_>>().join(":")
}

/// Reads a posted `SAMLResponse` and verifies its signature against `certs` (DER): the one assertion it carries,
/// read from the signed element. Nothing here says whether the assertion is valid now or for us: [`Signed::check`].
pub fn verify(saml_response: &str, certs: &[Vec<u8>]) -> Result<Signed, SamlError> {
    if saml_response.len() > MAX_RESPONSE {
        return Err(SamlError::TooLarge);
    }
    let compact: String = saml_response.chars().filter(|c| !c.is_ascii_whitespace()).collect();
    let bytes = STANDARD.decode(compact.as_bytes()).map_err(|_| SamlError::NotBase64)?;
    let text = String::from_utf8(bytes).map_err(|_| SamlError::InvalidXml("not UTF-8".into()))?;
    let doc = parse(&text)?;
    let root = doc.document_element().ok_or(SamlError::NotAResponse)?;
    if !is(&doc, root, PROTOCOL, "Response") {
        return Err(SamlError::NotAResponse);
    }
    if !doc.get_elements_by_tag_name_ns(ASSERTION, "EncryptedAssertion").is_empty()
        || !doc.get_elements_by_tag_name_ns(XMLENC, "EncryptedData").is_empty()
    {
        return Err(SamlError::Encrypted);
    }
    // Exactly one assertion in the whole document, and a child of the response: nothing else to be confused with.
    let assertions = doc.get_elements_by_tag_name_ns(ASSERTION, "Assertion");
    let assertion = match assertions.as_slice() {
        [] => return Err(SamlError::NoAssertion),
        [one] if doc.parent(*one) == Some(root) => *one,
        _ => return Err(SamlError::MultipleAssertions),
    };
    let status = doc
        .first_child_element_by_name_ns(root, PROTOCOL, "Status")
        .and_then(|s| doc.first_child_element_by_name_ns(s, PROTOCOL, "StatusCode"))
        .and_then(|c| doc.get_attribute(c, "Value"))
        .unwrap_or_default();
    if status != SUCCESS {
        return Err(SamlError::Status(status.to_owned()));
    }
    let assertion_signed = signed_by(&doc, &text, root, assertion, certs)?;
    Ok(Signed { assertion_signed, ..read_assertion(&doc, root, assertion)? })
}

fn parse(text: &str) -> Result<Document<'_>, SamlError> {
    // Refused before the parser sees it: Uppsala refuses it too (forbid_dtd), this names the reason.
    if text.contains("<!DOCTYPE") || text.contains("<!ENTITY") {
        return Err(SamlError::Doctype);
    }
    uppsala::Parser::new()
        .with_forbid_dtd(true)
        .with_forbid_entities(true)
        .parse(text)
        .map_err(|e| SamlError::InvalidXml(e.to_string()))
}

fn is(doc: &Document<'_>, node: NodeId, ns: &str, name: &str) -> bool {
    doc.element(node).is_some_and(|e| e.matches_name_ns(ns, name))
}

/// Whether a signature by one of `certs` covers `assertion`: a valid signature whose reference is the assertion
/// itself or the whole response (which contains it); `true` when the assertion's own signature does. Every
/// signature of the document is verified (a response may be signed at both levels); a signature that fails is no
/// refusal when another covers the assertion.
fn signed_by(
    doc: &Document<'_>,
    text: &str,
    root: NodeId,
    assertion: NodeId,
    certs: &[Vec<u8>],
) -> Result<bool, SamlError> {
    let mut keys = KeysManager::new();
    for der in certs {
        let key = bergshamra_keys::loader::load_x509_cert_der(der).map_err(|e| SamlError::Signature(e.to_string()))?;
        keys.add_key(key);
    }
    // Trusted keys only, the reference position check against wrapping, every reference digested; `ID` is
    // among the ID attributes it knows (a duplicate ID in the document is refused).
    let context = DsigContext::new(keys);
    let results = match bergshamra_dsig::verify::verify_all_document_with_source(&context, doc, Some(text)) {
        Ok(results) => results,
        Err(bergshamra_core::Error::MissingElement(_)) => {
            return Err(SamlError::Signature("the response carries no signature".into()));
        }
        Err(e) => return Err(SamlError::Signature(e.to_string())),
    };
    let mut why = String::from("no signature covers the assertion");
    let mut covered = None;
    for result in results {
        match result {
            VerifyResult::Valid { signature_node, references, .. } => {
                // The signature must be inside what it signs (enveloped) and cover exactly that element.
                let covers = |target: NodeId| {
                    references.iter().all(|r| r.resolved_node == Some(target) || (r.uri.is_empty() && target == root))
                        && doc.parent(signature_node) == Some(target)
                };
                if !references.is_empty() && covers(assertion) {
                    covered = Some(true);
                } else if !references.is_empty() && covers(root) {
                    covered = covered.or(Some(false));
                }
            }
            VerifyResult::Invalid { reason } => why = reason,
        }
    }
    covered.ok_or(SamlError::Signature(why))
}

fn read_assertion(doc: &Document<'_>, root: NodeId, assertion: NodeId) -> Result<Signed, SamlError> {
    let child = |parent: NodeId, name: &str| doc.first_child_element_by_name_ns(parent, ASSERTION, name);
    let children = |parent: NodeId, name: &str| doc.child_elements_by_name_ns(parent, ASSERTION, name);
    let text = |node: NodeId| doc.text_content_deep(node).trim().to_owned();
    let attr = |node: NodeId, name: &str| doc.get_attribute(node, name).map(str::to_owned);
    let time = |node: NodeId, name: &str| -> Result<Option<i64>, SamlError> {
        match doc.get_attribute(node, name) {
            None => Ok(None),
            Some(t) => chrono::DateTime::parse_from_rfc3339(t.trim())
                .map(|t| Some(t.timestamp_millis()))
                .map_err(|_| SamlError::InvalidXml(format!("{name} is not an xs:dateTime"))),
        }
    };
    let id = attr(assertion, "ID").filter(|s| !s.is_empty()).ok_or(SamlError::NoAssertion)?;
    let issuer = child(assertion, "Issuer").map(text).unwrap_or_default();
    // The response's issuer, when it names one, is the assertion's (core §3.2.2).
    if let Some(outer) = child(root, "Issuer").map(text)
        && outer != issuer
    {
        return Err(SamlError::Issuer);
    }
    let subject = child(assertion, "Subject").ok_or(SamlError::NoSubject)?;
    let name_id = child(subject, "NameID").map(text).filter(|n| !n.is_empty()).ok_or(SamlError::NoSubject)?;
    let mut bearers = Vec::new();
    let mut answers: Option<String> = None;
    for confirmation in children(subject, "SubjectConfirmation") {
        if doc.get_attribute(confirmation, "Method") != Some(BEARER) {
            continue;
        }
        let Some(data) = child(confirmation, "SubjectConfirmationData") else {
            bearers.push(Bearer { recipient: None, not_on_or_after_ms: None, not_before: false });
            continue;
        };
        if let Some(request) = attr(data, "InResponseTo").filter(|r| !r.is_empty()) {
            if answers.as_ref().is_some_and(|a| *a != request) {
                return Err(SamlError::InResponseTo);
            }
            answers = Some(request);
        }
        bearers.push(Bearer {
            recipient: attr(data, "Recipient"),
            not_on_or_after_ms: time(data, "NotOnOrAfter")?,
            not_before: doc.get_attribute(data, "NotBefore").is_some(),
        });
    }
    if bearers.is_empty() {
        return Err(SamlError::Confirmation);
    }
    // An answer to a request must say so inside the signature: the response's own attribute may be outside it.
    let in_response_to = answers.ok_or(SamlError::Unsolicited)?;
    if doc.get_attribute(root, "InResponseTo").is_some_and(|outer| !outer.is_empty() && outer != in_response_to) {
        return Err(SamlError::InResponseTo);
    }
    let (mut not_before_ms, mut not_on_or_after_ms, mut audiences) = (None, None, Vec::new());
    if let Some(conditions) = child(assertion, "Conditions") {
        not_before_ms = time(conditions, "NotBefore")?;
        not_on_or_after_ms = time(conditions, "NotOnOrAfter")?;
        for restriction in children(conditions, "AudienceRestriction") {
            audiences.push(children(restriction, "Audience").into_iter().map(text).collect());
        }
    }
    let statements = children(assertion, "AuthnStatement");
    if statements.is_empty() {
        return Err(SamlError::NoAuthnStatement);
    }
    let authn_contexts = statements
        .into_iter()
        .filter_map(|statement| child(statement, "AuthnContext"))
        .filter_map(|context| child(context, "AuthnContextClassRef"))
        .map(text)
        .take(MAX_ATTRIBUTES)
        .collect();
    let mut attributes = Vec::new();
    for statement in children(assertion, "AttributeStatement") {
        for attribute in children(statement, "Attribute") {
            let Some(name) = attr(attribute, "Name") else { continue };
            // Every value, in order: the first is the attribute's value for a single-valued one (an address).
            for value in children(attribute, "AttributeValue").into_iter().map(text).filter(|v| !v.is_empty()) {
                if attributes.len() < MAX_ATTRIBUTES {
                    attributes.push((name.clone(), value));
                }
            }
        }
    }
    Ok(Signed {
        id,
        issuer,
        in_response_to,
        destination: attr(root, "Destination"),
        name_id,
        attributes,
        authn_contexts,
        assertion_signed: false,
        not_before_ms,
        not_on_or_after_ms,
        audiences,
        bearers,
    })
}

/// A fresh request ID: `_` and 32 hex digits (an xs:ID must not start with a digit), 128 random bits.
pub fn request_id() -> String {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).expect("the system's random source");
    format!("_{}", hex::encode(bytes))
}

/// What an AuthnRequest says.
pub struct AuthnRequest<'a> {
    pub id: &'a str,
    pub issue_instant: &'a str,
    /// The IdP's single sign-on URL.
    pub destination: &'a str,
    pub acs: &'a str,
    pub sp_entity_id: &'a str,
    pub name_id_format: &'a str,
}

impl AuthnRequest<'_> {
    pub fn xml(&self) -> String {
        format!(
            "<samlp:AuthnRequest xmlns:samlp=\"{PROTOCOL}\" xmlns:saml=\"{ASSERTION}\" ID=\"{}\" Version=\"2.0\" \
             IssueInstant=\"{}\" Destination=\"{}\" ProtocolBinding=\"{HTTP_POST}\" \
             AssertionConsumerServiceURL=\"{}\"><saml:Issuer>{}</saml:Issuer>\
             <samlp:NameIDPolicy Format=\"{}\" AllowCreate=\"true\"/></samlp:AuthnRequest>",
            escape(self.id),
            escape(self.issue_instant),
            escape(self.destination),
            escape(self.acs),
            escape(self.sp_entity_id),
            escape(self.name_id_format),
        )
    }

    /// The HTTP-Redirect binding (bindings §3.4.4): the request deflated, base64, URL-encoded, with `RelayState`,
    /// added to the IdP's single sign-on URL (whose own query is kept).
    pub fn redirect_url(&self, relay_state: &str) -> String {
        let mut deflater = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
        // Writing to a Vec cannot fail.
        let _ = deflater.write_all(self.xml().as_bytes());
        let deflated = deflater.finish().unwrap_or_default();
        let query = url::form_urlencoded::Serializer::new(String::new())
            .append_pair("SAMLRequest", &STANDARD.encode(deflated))
            .append_pair("RelayState", relay_state)
            .finish();
        let separator = if self.destination.contains('?') { '&' } else { '?' };
        format!("{}{separator}{query}", self.destination)
    }
}

/// The SP metadata of one provider: its entity ID, one ACS by HTTP-POST, whether assertions must be signed, and
/// the NameID format asked for.
pub fn sp_metadata(entity_id: &str, acs: &str, want_assertions_signed: bool, name_id_format: &str) -> String {
    format!(
        "<?xml version=\"1.0\"?>\n<md:EntityDescriptor xmlns:md=\"{METADATA}\" entityID=\"{}\">\
         <md:SPSSODescriptor AuthnRequestsSigned=\"false\" WantAssertionsSigned=\"{want_assertions_signed}\" \
         protocolSupportEnumeration=\"{PROTOCOL}\"><md:NameIDFormat>{}</md:NameIDFormat>\
         <md:AssertionConsumerService Binding=\"{HTTP_POST}\" Location=\"{}\" index=\"0\" isDefault=\"true\"/>\
         </md:SPSSODescriptor></md:EntityDescriptor>",
        escape(entity_id),
        escape(name_id_format),
        escape(acs),
    )
}

/// What an IdP's metadata says that a service provider needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdpMetadata {
    pub entity_id: String,
    /// The signing certificates (DER); a `KeyDescriptor` without `use` signs too.
    pub certs: Vec<Vec<u8>>,
    /// The single sign-on URL of the HTTP-Redirect binding, when it has one.
    pub redirect_sso: Option<String>,
}

/// Reads an IdP's metadata XML (an `EntityDescriptor` with an `IDPSSODescriptor`), DTDs refused as in a response.
pub fn idp_metadata(xml: &str) -> Result<IdpMetadata, String> {
    let doc = parse(xml).map_err(|e| e.to_string())?;
    let root = doc.document_element().ok_or("the metadata is empty")?;
    let descriptor = if is(&doc, root, METADATA, "EntityDescriptor") {
        root
    } else {
        return Err("the metadata is not an EntityDescriptor".into());
    };
    let entity_id = doc.get_attribute(descriptor, "entityID").unwrap_or_default().trim().to_owned();
    if entity_id.is_empty() {
        return Err("the metadata names no entityID".into());
    }
    let idp = doc
        .first_child_element_by_name_ns(descriptor, METADATA, "IDPSSODescriptor")
        .ok_or("the metadata has no IDPSSODescriptor")?;
    let mut certs = Vec::new();
    for key in doc.child_elements_by_name_ns(idp, METADATA, "KeyDescriptor") {
        if doc.get_attribute(key, "use").is_some_and(|u| u != "signing") {
            continue;
        }
        for cert in doc.get_elements_by_tag_name_ns(DSIG, "X509Certificate") {
            if doc.ancestors(cert).contains(&key) {
                certs.push(certificate(&doc.text_content_deep(cert))?);
            }
        }
    }
    let redirect_sso = doc
        .child_elements_by_name_ns(idp, METADATA, "SingleSignOnService")
        .into_iter()
        .find(|s| doc.get_attribute(*s, "Binding") == Some(HTTP_REDIRECT))
        .and_then(|s| doc.get_attribute(s, "Location").map(str::to_owned));
    Ok(IdpMetadata { entity_id, certs, redirect_sso })
}

fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b64(xml: &str) -> String {
        STANDARD.encode(xml)
    }

    #[test]
    fn a_doctype_is_refused_before_anything_is_parsed() {
        let xml = "<?xml version=\"1.0\"?><!DOCTYPE r [<!ENTITY x SYSTEM \"http://127.0.0.1:9/x\">]><r>&x;</r>";
        assert_eq!(verify(&b64(xml), &[]).unwrap_err(), SamlError::Doctype);
    }

    #[test]
    fn two_assertions_are_refused_whatever_signs_them() {
        let xml = format!(
            "<samlp:Response xmlns:samlp=\"{PROTOCOL}\" xmlns:saml=\"{ASSERTION}\"><samlp:Status><samlp:StatusCode \
             Value=\"{SUCCESS}\"/></samlp:Status><saml:Assertion ID=\"a\"/><saml:Assertion ID=\"b\"/></samlp:Response>"
        );
        assert_eq!(verify(&b64(&xml), &[]).unwrap_err(), SamlError::MultipleAssertions);
        let nested = format!(
            "<samlp:Response xmlns:samlp=\"{PROTOCOL}\" xmlns:saml=\"{ASSERTION}\"><samlp:Extensions>\
             <saml:Assertion ID=\"a\"/></samlp:Extensions></samlp:Response>"
        );
        assert_eq!(verify(&b64(&nested), &[]).unwrap_err(), SamlError::MultipleAssertions);
    }

    #[test]
    fn an_unsigned_assertion_is_refused() {
        let xml = format!(
            "<samlp:Response xmlns:samlp=\"{PROTOCOL}\" xmlns:saml=\"{ASSERTION}\"><samlp:Status><samlp:StatusCode \
             Value=\"{SUCCESS}\"/></samlp:Status><saml:Assertion ID=\"a\"/></samlp:Response>"
        );
        assert!(matches!(verify(&b64(&xml), &[]).unwrap_err(), SamlError::Signature(_)));
    }

    #[test]
    fn the_authn_request_deflates_into_the_redirect_binding() {
        let request = AuthnRequest {
            id: "_1",
            issue_instant: "2026-01-01T00:00:00Z",
            destination: "https://idp.test/sso?tenant=a&b",
            acs: "https://sp.test/acs",
            sp_entity_id: "https://sp.test/\"meta\"",
            name_id_format: EMAIL_FORMAT,
        };
        let url = url::Url::parse(&request.redirect_url("relay")).unwrap();
        let query: std::collections::HashMap<_, _> = url.query_pairs().into_owned().collect();
        assert_eq!(query["tenant"], "a");
        assert_eq!(query["RelayState"], "relay");
        let deflated = STANDARD.decode(&query["SAMLRequest"]).unwrap();
        let mut xml = String::new();
        std::io::Read::read_to_string(&mut flate2::read::DeflateDecoder::new(deflated.as_slice()), &mut xml).unwrap();
        assert_eq!(xml, request.xml());
        assert!(xml.contains("<saml:Issuer>https://sp.test/&quot;meta&quot;</saml:Issuer>"));
        uppsala::parse(&xml).unwrap();
    }

    #[test]
    fn request_ids_are_xml_ids_and_differ() {
        let (a, b) = (request_id(), request_id());
        assert_ne!(a, b);
        assert!(a.starts_with('_') && a.len() == 33);
    }
}
