//! `@better-auth/sso`'s SAML 2.0 side: the SP metadata of a provider, the SAML branch of `sign-in/sso` (the
//! AuthnRequest by the HTTP-Redirect binding, and the cookie that binds it to this browser), and the ACS, where
//! the IdP's response arrives by the HTTP-POST binding. The rules are in src/accounts/saml.rs and src/saml.

use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Request, Response, StatusCode};

use serde_json::Value;

use super::AppState;
use super::extract::{self, Ctx, Fields};
use super::response::{Body, Failure, ok, with_cookie};
use crate::accounts::{AcsError, NewSamlProvider, SamlPost, SamlStart, SamlStartError};
use crate::domain::{EmailDomain, OrgId, OrgRole, SsoProviderId};

/// How long the browser keeps the SAML flow's cookie: the flow's own lifetime.
const FLOW_COOKIE_AGE: u64 = 600;
/// The ACS path before the provider's id.
const ACS_PREFIX: &str = "/api/auth/sso/saml2/sp/acs/";

/// `{own origin}/api/auth/sso/saml2/sp/acs/{providerId}`: where the IdP posts its response for the provider.
pub(super) fn acs_url(state: &AppState, ctx: &Ctx, provider_id: &str) -> Result<String, Failure> {
    let own = state.origins.own(ctx.host()).ok_or_else(|| Failure::bad_request("BAD_REQUEST", "No Host header"))?;
    let id: String = url::form_urlencoded::byte_serialize(provider_id.as_bytes()).collect();
    Ok(format!("{own}{ACS_PREFIX}{id}"))
}

/// `GET /api/auth/sso/saml2/sp/metadata?providerId=` → the SP metadata XML (`application/xml`), for the IdP's
/// administrator: entity ID, the ACS (HTTP-POST), `WantAssertionsSigned`, the NameID format. No session needed.
pub async fn metadata(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let query = req.uri().query();
    extract::query_only(query, &["providerId", "format"])?;
    let id = extract::query_value(query, "providerId")
        .ok_or_else(|| Failure::validation("[query.providerId] Invalid input: expected string, received undefined"))?;
    if extract::query_value(query, "format").is_some_and(|f| f != "xml") {
        return Err(Failure::validation("[query.format] only xml is served"));
    }
    let xml = state.accounts.saml_sp_metadata(&id, &acs_url(state, &ctx, &id)?).await?;
    let mut response = Response::new(Body::new(bytes::Bytes::from(xml)));
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/xml"));
    Ok(response)
}

/// The SAML branch of `POST /api/auth/sign-in/sso`, once the provider is known to be a SAML one: 200 `{url,
/// redirect: true}` (the IdP's SSO URL with the deflated AuthnRequest) with `Location`, and the cookie that binds
/// the request to this browser. `callback_url`, `error_url`, `new_user_url`: trusted, checked by the caller.
pub async fn sign_in(
    state: &AppState,
    ctx: &Ctx,
    provider_id: &str,
    callback_url: Option<String>,
    error_url: Option<String>,
    new_user_url: Option<String>,
) -> Result<Response<Body>, Failure> {
    let start = SamlStart {
        provider_id: provider_id.to_owned(),
        acs: acs_url(state, ctx, provider_id)?,
        callback_url,
        error_url,
        new_user_url,
    };
    let started = state.accounts.start_saml(start).await.map_err(|e| match e {
        SamlStartError::NotFound => {
            Failure::new(StatusCode::NOT_FOUND, "NO_PROVIDER_FOUND_FOR_THE_ISSUER", e.to_string())
        }
        SamlStartError::NotVerified => Failure::new(
            StatusCode::UNAUTHORIZED,
            "PROVIDER_DOMAIN_HAS_NOT_BEEN_VERIFIED",
            "Provider domain has not been verified",
        ),
        SamlStartError::Unavailable => Failure::unavailable(),
    })?;
    let mut answer = ok(&serde_json::json!({"redirect": true, "url": started.url}));
    if let Ok(location) = HeaderValue::from_str(&started.url) {
        answer.headers_mut().insert(header::LOCATION, location);
    }
    Ok(with_cookie(answer, flow_cookie(state, &started.browser, FLOW_COOKIE_AGE)))
}

/// The cookie naming this browser's SAML request. `SameSite=None`: the IdP's response comes back as a cross-site
/// POST (the HTTP-POST binding), which carries no `Lax` cookie, and without it the response could not be tied to
/// the browser that asked (the plugin's weakness). HttpOnly, only on the ACS paths; `Secure` when the service's
/// cookies are (a browser keeps a `SameSite=None` cookie only over HTTPS: SAML sign-in needs it).
fn flow_cookie(state: &AppState, value: &str, max_age: u64) -> HeaderValue {
    let secure = if state.cookies.secure { "; Secure" } else { "" };
    let name = flow_cookie_name(state);
    HeaderValue::from_str(&format!(
        "{name}={value}; Max-Age={max_age}; Path=/api/auth/sso/saml2/sp/acs; HttpOnly{secure}; SameSite=None"
    ))
    .unwrap_or_else(|_| HeaderValue::from_static(""))
}

fn flow_cookie_name(state: &AppState) -> String {
    state.cookies.name.replace(".session_token", ".saml_flow")
}

/// `POST /api/auth/sso/saml2/sp/acs/{providerId}` (form: `SAMLResponse`, `RelayState`): the session cookie and
/// 302 to the flow's callback URL (its new-user URL for a new account), as after a provider's callback; for an
/// account with a second factor, the two-factor cookie and 302 with `twoFactorRedirect=true`. A response that is
/// not this provider's IdP's, or that answers no pending request: 400 with the code (nothing known to redirect
/// to). A refusal once this browser's flow is known: 302 to its error URL with `?error=`.
pub async fn acs(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let started = std::time::Instant::now();
    let provider_id = req
        .uri()
        .path()
        .strip_prefix(ACS_PREFIX)
        .filter(|id| !id.is_empty() && !id.contains('/'))
        .map(|id| percent_encoding::percent_decode_str(id).decode_utf8_lossy().into_owned())
        .ok_or_else(|| Failure::validation("the providerId in the path is malformed"))?;
    extract::query_only(req.uri().query(), &[])?;
    let headers = req.headers().clone();
    let form = extract::form_body(req, state.body_timeout()).await?;
    let mut saml_response = None;
    for (key, value) in form {
        match key.as_str() {
            "SAMLResponse" if saml_response.is_none() => saml_response = Some(value),
            "SAMLResponse" => return Err(Failure::bad_request("BAD_REQUEST", "SAMLResponse is given twice")),
            "RelayState" => {}
            other => return Err(extract::unknown_parameter(other, &["SAMLResponse", "RelayState"])),
        }
    }
    let saml_response =
        saml_response.ok_or_else(|| Failure::bad_request("SAML_RESPONSE_MISSING", "SAMLResponse is required"))?;
    let browser = extract::cookie(&headers, &flow_cookie_name(state)).map(str::to_owned);
    let acs = acs_url(state, &ctx, &provider_id)?;
    let post = SamlPost {
        provider_id: &provider_id,
        saml_response: &saml_response,
        acs: &acs,
        browser: browser.as_deref(),
        trusted: super::two_factor::trusted_device(state, &headers),
    };
    let client = extract::client(&ctx, &headers);
    let finished = state.accounts.finish_saml(post, client).await.map_err(|e| match e {
        AcsError::NoProvider => Failure::new(StatusCode::NOT_FOUND, "NO_SAML_PROVIDER_FOUND", e.to_string()),
        AcsError::Response(e) => Failure::bad_request(e.code(), e.to_string()),
        AcsError::UnknownRequest => Failure::bad_request("SAML_UNKNOWN_REQUEST", e.to_string()),
        AcsError::Unavailable => Failure::unavailable(),
    })?;
    let clear = flow_cookie(state, "", 0);
    let answer = super::oauth::finished_answer(state, finished)?;
    state.accounts.metrics.oauth_callback_own.record(started.elapsed().as_secs_f64());
    Ok(with_cookie(answer, clear))
}

/// The keys of `samlConfig` this service reads; the plugin's others are refused by name, with the reason.
const SAML_KEYS: &[&str] = &[
    "entryPoint",
    "cert",
    "audience",
    "callbackUrl",
    "idpInitiatedCallbackUrl",
    "idpMetadata",
    "spMetadata",
    "wantAssertionsSigned",
    "authnRequestsSigned",
    "signatureAlgorithm",
    "digestAlgorithm",
    "identifierFormat",
    "privateKey",
    "decryptionPvk",
    "mapping",
];
const IDP_METADATA_KEYS: &[&str] = &[
    "metadata",
    "entityID",
    "entityURL",
    "cert",
    "singleSignOnService",
    "redirectURL",
    "privateKey",
    "privateKeyPass",
    "isAssertionEncrypted",
    "encPrivateKey",
    "encPrivateKeyPass",
];
const SP_METADATA_KEYS: &[&str] = &[
    "metadata",
    "entityID",
    "binding",
    "privateKey",
    "privateKeyPass",
    "isAssertionEncrypted",
    "encPrivateKey",
    "encPrivateKeyPass",
];
const MAPPING_KEYS: &[&str] = &["id", "email", "name", "emailVerified", "firstName", "lastName", "extraFields"];

/// `samlConfig`, an object if present (`None`: not a SAML registration).
pub(super) fn saml_config(body: &Fields) -> Result<Option<Fields>, Failure> {
    match body.get("samlConfig") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(map)) => {
            let config = Fields::from(map.clone());
            config.only(SAML_KEYS)?;
            Ok(Some(config))
        }
        Some(_) => Err(Failure::validation("[body.samlConfig] Invalid input: expected object")),
    }
}

/// A nested object of `samlConfig` (`idpMetadata`, `spMetadata`, `mapping`), its keys checked.
fn nested(config: &Fields, key: &str, known: &[&str]) -> Result<Option<Fields>, Failure> {
    match config.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(map)) => {
            let nested = Fields::from(map.clone());
            nested.only(known)?;
            Ok(Some(nested))
        }
        Some(_) => Err(Failure::validation(format!("samlConfig.{key} must be an object"))),
    }
}

/// `cert`: one PEM string or an array of them; `label` names it in a refusal.
fn certs(fields: &Fields, label: &str) -> Result<Vec<String>, Failure> {
    let key = "cert";
    match fields.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::String(pem)) => Ok(vec![pem.clone()]),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| v.as_str().map(str::to_owned))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| Failure::validation(format!("{label} must be a PEM certificate or an array of them"))),
        Some(_) => Err(Failure::validation(format!("{label} must be a PEM certificate or an array of them"))),
    }
}

fn refuse(what: &str, why: &str) -> Failure {
    Failure::bad_request("SAML_OPTION_NOT_SUPPORTED", format!("{what}: {why}"))
}

/// The SAML registration from `sso/register`'s body: what this service follows, and a refusal naming each option
/// of the plugin it does not (a private key above all: none is taken, so none is ever echoed).
pub(super) fn new_provider(
    provider_id: SsoProviderId,
    issuer: String,
    domains: Vec<EmailDomain>,
    organization: OrgId,
    config: &Fields,
    default_role: Option<OrgRole>,
) -> Result<NewSamlProvider, Failure> {
    const NO_KEYS: &str = "no private key is taken: AuthnRequests are not signed and assertions not encrypted";
    if config.get("privateKey").is_some_and(|v| !v.is_null())
        || config.get("decryptionPvk").is_some_and(|v| !v.is_null())
    {
        return Err(refuse("samlConfig.privateKey", NO_KEYS));
    }
    if config.optional_bool("authnRequestsSigned")? == Some(true) {
        return Err(refuse("samlConfig.authnRequestsSigned", NO_KEYS));
    }
    if config.optional_string("idpInitiatedCallbackUrl")?.is_some() {
        return Err(refuse("samlConfig.idpInitiatedCallbackUrl", "IdP-initiated sign-in is not offered"));
    }
    // Algorithms of the SP's own signatures, which it does not make: any named is read and ignored.
    config.optional_string("signatureAlgorithm")?;
    config.optional_string("digestAlgorithm")?;
    let idp = nested(config, "idpMetadata", IDP_METADATA_KEYS)?;
    let sp = nested(config, "spMetadata", SP_METADATA_KEYS)?;
    for (part, name) in [(&idp, "idpMetadata"), (&sp, "spMetadata")] {
        let Some(part) = part else { continue };
        for key in ["privateKey", "privateKeyPass", "encPrivateKey", "encPrivateKeyPass"] {
            if part.get(key).is_some_and(|v| !v.is_null()) {
                return Err(refuse(&format!("samlConfig.{name}.{key}"), NO_KEYS));
            }
        }
        if part.optional_bool("isAssertionEncrypted")? == Some(true) {
            return Err(refuse(&format!("samlConfig.{name}.isAssertionEncrypted"), NO_KEYS));
        }
    }
    if let Some(sp) = &sp {
        if sp.optional_string("metadata")?.is_some() {
            return Err(refuse("samlConfig.spMetadata.metadata", "the SP metadata is made from the registration"));
        }
        if sp.optional_string("entityID")?.is_some_and(|e| e != issuer) {
            return Err(refuse("samlConfig.spMetadata.entityID", "the SP entity ID is the registered issuer"));
        }
        if sp.optional_string("binding")?.is_some_and(|b| b != "post" && b != crate::saml::HTTP_POST) {
            return Err(refuse("samlConfig.spMetadata.binding", "the ACS takes the HTTP-POST binding"));
        }
    }
    let mut entry_point = config.optional_string("entryPoint")?.map(str::to_owned);
    let (mut idp_entity_id, mut idp_certs, mut idp_metadata) = (None, Vec::new(), None);
    if let Some(idp) = &idp {
        idp_entity_id = idp.optional_string("entityID")?.map(str::to_owned);
        idp_certs = certs(idp, "samlConfig.idpMetadata.cert")?;
        idp_metadata = idp.optional_string("metadata")?.map(str::to_owned);
        if let Some(Value::Array(services)) = idp.get("singleSignOnService") {
            let redirect = services.iter().find(|s| s["Binding"] == crate::saml::HTTP_REDIRECT);
            if let Some(location) = redirect.and_then(|s| s["Location"].as_str()) {
                entry_point = Some(location.to_owned());
            }
        }
    }
    let mapping = nested(config, "mapping", MAPPING_KEYS)?;
    let text = |key: &str| -> Result<Option<String>, Failure> {
        Ok(match &mapping {
            Some(m) => m.optional_string(key)?.map(str::to_owned),
            None => None,
        })
    };
    if mapping.as_ref().is_some_and(|m| m.get("extraFields").is_some_and(|v| !v.is_null())) {
        return Err(refuse("samlConfig.mapping.extraFields", "only the address and the name are read"));
    }
    Ok(NewSamlProvider {
        provider_id,
        issuer,
        domains,
        organization,
        entry_point,
        certs: certs(config, "samlConfig.cert")?,
        idp_entity_id,
        idp_certs,
        idp_metadata,
        audience: config.optional_string("audience")?.map(str::to_owned),
        callback_url: config.optional_string("callbackUrl")?.map(str::to_owned),
        want_assertions_signed: config.optional_bool("wantAssertionsSigned")?.unwrap_or(false),
        identifier_format: config.optional_string("identifierFormat")?.map(str::to_owned),
        mapping_email: text("email")?,
        mapping_name: text("name")?,
        mapping_first_name: text("firstName")?,
        mapping_last_name: text("lastName")?,
        default_role,
        // `roleMapping` is beside `samlConfig`, not in it: the register handler sets it, as for OpenID Connect.
        role_mapping: None,
    })
}
