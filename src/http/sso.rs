//! `@better-auth/sso`'s calls: an organization's single sign-on providers (OpenID Connect). See
//! src/accounts/sso.rs for the rules and docs/guides/sso.md for the choices made where the plugin leaves one open.

use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use serde_json::Value;

use super::AppState;
use super::dto::{SUCCESS, SsoPolicy, SsoProvider, SsoProviderList, SsoRegistered, SsoVerificationToken};
use super::extract::{self, Ctx, Fields};
use super::response::{Body, Failure, json, ok};
use crate::accounts::{NewSamlProvider, NewSsoProvider, SsoChange, SsoTokenAuth};
use crate::domain::{EmailDomain, OrgId, OrgRole, RoleMapping, SsoProviderId};

/// The keys of `oidcConfig` this service reads. The plugin's others (`mapping`, `skipDiscovery`, endpoints given
/// by hand, `private_key_jwt`) are refused with a reason rather than ignored.
const OIDC_KEYS: &[&str] = &[
    "clientId",
    "clientSecret",
    "scopes",
    "tokenEndpointAuthentication",
    "pkce",
    "skipDiscovery",
    "discoveryEndpoint",
    "authorizationEndpoint",
    "tokenEndpoint",
    "userInfoEndpoint",
    "jwksEndpoint",
    "mapping",
    "overrideUserInfo",
];

/// `{base_url}/api/auth`, as the request reached us.
fn auth_base(state: &AppState, ctx: &Ctx) -> Result<String, Failure> {
    let own = state.origins.own(ctx.host()).ok_or_else(|| Failure::bad_request("BAD_REQUEST", "No Host header"))?;
    Ok(format!("{own}/api/auth"))
}

/// `POST /api/auth/sso/register` `{providerId, issuer, domain, organizationId, oidcConfig: {clientId,
/// clientSecret, scopes?, tokenEndpointAuthentication?}, defaultRole?, roleMapping?}` → the provider registered.
pub async fn register(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let (_, current) = extract::signed_in(state, req.headers()).await?;
    let body = extract::json_object(req, true, state.body_timeout()).await?;
    body.only(&[
        "providerId",
        "issuer",
        "domain",
        "organizationId",
        "oidcConfig",
        "samlConfig",
        "overrideUserInfo",
        "defaultRole",
        "roleMapping",
    ])?;
    let provider_id =
        SsoProviderId::parse(body.string("providerId")?).map_err(|e| Failure::validation(e.to_string()))?;
    let issuer = body.string("issuer")?.to_owned();
    let domains = domains(body.string("domain")?)?;
    // The plugin makes `organizationId` optional (a provider of its user's own); here a provider always belongs
    // to an organization, whose members it signs in.
    let organization = body
        .optional_string("organizationId")?
        .ok_or_else(|| Failure::validation("organizationId is required: a provider belongs to an organization"))?;
    // Not a UUID: no organization has it, which reads as the caller not being its member.
    let organization = OrgId::parse(organization).unwrap_or_else(|| OrgId::from_bytes([0; 16]));
    refuse_override(&body)?;
    let mapping = role_mapping(&body)?.flatten();
    if let Some(saml) = super::saml::saml_config(&body)? {
        if body.get("oidcConfig").is_some_and(|v| !v.is_null()) {
            return Err(Failure::validation(
                "a provider is OpenID Connect (oidcConfig) or SAML (samlConfig), not both",
            ));
        }
        let new = super::saml::new_provider(provider_id, issuer, domains, organization, &saml, default_role(&body)?)?;
        let new = NewSamlProvider { role_mapping: mapping, ..new };
        let provider = state.accounts.register_saml_provider(&current, new, &ctx.ip.to_string()).await?;
        return Ok(ok(&SsoRegistered::of(&provider, &auth_base(state, &ctx)?)));
    }
    let oidc = oidc_config(&body)?.ok_or_else(|| Failure::validation("oidcConfig or samlConfig is required"))?;
    let new = NewSsoProvider {
        provider_id,
        issuer,
        domains,
        organization,
        client_id: oidc.string("clientId")?.to_owned(),
        client_secret: oidc.optional_string("clientSecret")?.map(str::to_owned),
        token_auth: token_auth(&oidc)?,
        scopes: scopes(&oidc)?,
        default_role: default_role(&body)?,
        role_mapping: mapping,
    };
    let provider = state.accounts.register_sso_provider(&current, new, &ctx.ip.to_string()).await?;
    Ok(ok(&SsoRegistered::of(&provider, &auth_base(state, &ctx)?)))
}

/// `GET /api/auth/sso/providers` → `{providers}`: those of the organizations the caller owns or administers.
pub async fn providers(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let (_, current) = extract::signed_in(state, req.headers()).await?;
    extract::query_only(req.uri().query(), &[])?;
    let providers = state.accounts.sso_providers(&current).await?;
    let base = auth_base(state, &ctx)?;
    Ok(ok(&SsoProviderList { providers: providers.iter().map(|p| SsoProvider::of(p, &base)).collect() }))
}

/// `GET /api/auth/sso/get-provider?providerId=` → the provider.
pub async fn get_provider(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let (_, current) = extract::signed_in(state, req.headers()).await?;
    let query = req.uri().query();
    extract::query_only(query, &["providerId"])?;
    let id = extract::query_value(query, "providerId")
        .ok_or_else(|| Failure::validation("[query.providerId] Invalid input: expected string, received undefined"))?;
    let provider = state.accounts.sso_provider(&current, &id).await?;
    Ok(ok(&SsoProvider::of(&provider, &auth_base(state, &ctx)?)))
}

/// `POST /api/auth/sso/update-provider` `{providerId, issuer?, domain?, oidcConfig?: {clientId?, clientSecret?,
/// scopes?, tokenEndpointAuthentication?}, defaultRole?, roleMapping?}` → the provider changed.
pub async fn update_provider(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let (_, current) = extract::signed_in(state, req.headers()).await?;
    let body = extract::json_object(req, true, state.body_timeout()).await?;
    body.only(&[
        "providerId",
        "issuer",
        "domain",
        "oidcConfig",
        "samlConfig",
        "overrideUserInfo",
        "defaultRole",
        "roleMapping",
    ])?;
    if body.get("samlConfig").is_some_and(|v| !v.is_null()) {
        return Err(saml_not_offered());
    }
    let provider_id = body.string("providerId")?.to_owned();
    refuse_override(&body)?;
    let oidc = oidc_config(&body)?;
    let text = |key: &str| -> Result<Option<String>, Failure> {
        Ok(match &oidc {
            Some(o) => o.optional_string(key)?.map(str::to_owned),
            None => None,
        })
    };
    let change = SsoChange {
        issuer: body.optional_string("issuer")?.map(str::to_owned),
        domains: body.optional_string("domain")?.map(domains).transpose()?,
        client_id: text("clientId")?,
        client_secret: text("clientSecret")?,
        token_auth: oidc.as_ref().map(token_auth).transpose()?.flatten(),
        scopes: oidc.as_ref().map(scopes).transpose()?.flatten(),
        default_role: default_role(&body)?,
        role_mapping: role_mapping(&body)?,
    };
    if change.is_empty() {
        return Err(Failure::bad_request("NO_FIELDS_PROVIDED_FOR_UPDATE", "No fields provided for update"));
    }
    let provider = state.accounts.update_sso_provider(&current, &provider_id, change, &ctx.ip.to_string()).await?;
    Ok(ok(&SsoProvider::of(&provider, &auth_base(state, &ctx)?)))
}

/// `POST /api/auth/sso/delete-provider` `{providerId}` → `{success: true}`.
pub async fn delete_provider(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let (_, current) = extract::signed_in(state, req.headers()).await?;
    let body = extract::json_object(req, true, state.body_timeout()).await?;
    body.only(&["providerId"])?;
    let provider_id = body.string("providerId")?.to_owned();
    state.accounts.delete_sso_provider(&current, &provider_id, &ctx.ip.to_string()).await?;
    Ok(ok(&SUCCESS))
}

/// `POST /api/auth/sso/request-domain-verification` `{providerId}` → 201 `{domainVerificationToken}`: the value
/// of the TXT record `_better-auth-token-{providerId}.{domain}` to publish on each of the provider's domains.
pub async fn request_domain_verification(
    state: &AppState,
    ctx: Ctx,
    req: Request<Incoming>,
) -> Result<Response<Body>, Failure> {
    let (_, current) = extract::signed_in(state, req.headers()).await?;
    let body = extract::json_object(req, true, state.body_timeout()).await?;
    body.only(&["providerId"])?;
    let provider_id = body.string("providerId")?.to_owned();
    let token = state.accounts.request_sso_domain_verification(&current, &provider_id, &ctx.ip.to_string()).await?;
    Ok(json(StatusCode::CREATED, &SsoVerificationToken { domain_verification_token: &token }))
}

/// `POST /api/auth/sso/verify-domain` `{providerId}` → 204 once the TXT record is found on every domain.
pub async fn verify_domain(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let (_, current) = extract::signed_in(state, req.headers()).await?;
    let body = extract::json_object(req, true, state.body_timeout()).await?;
    body.only(&["providerId"])?;
    let provider_id = body.string("providerId")?.to_owned();
    state.accounts.verify_sso_domain(&current, &provider_id, &ctx.ip.to_string()).await?;
    // The plugin's answer: no body.
    let mut response = Response::new(Body::new(bytes::Bytes::new()));
    *response.status_mut() = StatusCode::NO_CONTENT;
    response.headers_mut().insert(hyper::header::CACHE_CONTROL, hyper::header::HeaderValue::from_static("no-store"));
    Ok(response)
}

/// `POST /api/admin/sso/providers/{providerId}/verify-domain` → the provider, its domains verified by a service
/// administrator's word instead of DNS.
pub async fn confirm_domain(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let (_, current) = extract::signed_in(state, req.headers()).await?;
    extract::query_only(req.uri().query(), &[])?;
    let provider_id = req
        .uri()
        .path()
        .strip_prefix("/api/admin/sso/providers/")
        .and_then(|rest| rest.strip_suffix("/verify-domain"))
        .and_then(|id| SsoProviderId::parse(id).ok())
        .ok_or_else(|| Failure::validation("the providerId in the path is malformed"))?;
    let provider = state.accounts.confirm_sso_domain(&current, provider_id.as_str(), &ctx.ip.to_string()).await?;
    Ok(ok(&SsoProvider::of(&provider, &auth_base(state, &ctx)?)))
}

/// The `{id}` segment of `/api/admin/organizations/{id}/sso-policy`.
fn policy_path(req: &Request<Incoming>) -> Result<OrgId, Failure> {
    let path = req.uri().path().trim_start_matches("/api/admin/organizations/");
    let org = path.strip_suffix("/sso-policy").and_then(OrgId::parse);
    org.ok_or_else(|| Failure::validation("the organization id in the path must be a UUID"))
}

/// `GET /api/admin/organizations/{id}/sso-policy` → `{organizationId, requireSso, domains}`: for a service
/// administrator, or an owner or admin of the organization.
pub async fn policy(state: &AppState, _: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let (_, current) = extract::signed_in(state, req.headers()).await?;
    extract::query_only(req.uri().query(), &[])?;
    let org = policy_path(&req)?;
    let policy = state.accounts.sso_policy(&current, org).await?;
    Ok(ok(&SsoPolicy::from(&policy)))
}

/// `PUT /api/admin/organizations/{id}/sso-policy` `{requireSso}` → the policy as it now is: for a service
/// administrator, or an owner of the organization.
pub async fn set_policy(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let (_, current) = extract::signed_in(state, req.headers()).await?;
    extract::query_only(req.uri().query(), &[])?;
    let org = policy_path(&req)?;
    let body = extract::json_object(req, true, state.body_timeout()).await?;
    body.only(&["requireSso"])?;
    let require_sso = body
        .optional_bool("requireSso")?
        .ok_or_else(|| Failure::validation("[body.requireSso] Invalid input: expected boolean, received undefined"))?;
    let policy = state.accounts.set_sso_policy(&current, org, require_sso, &ctx.ip.to_string()).await?;
    Ok(ok(&SsoPolicy::from(&policy)))
}

fn saml_not_offered() -> Failure {
    Failure::bad_request(
        "SAML_NOT_SUPPORTED",
        "A SAML provider's configuration is not changed in place: delete the provider and register it again",
    )
}

pub(super) fn domains(text: &str) -> Result<Vec<EmailDomain>, Failure> {
    EmailDomain::parse_list(text).map_err(|e| Failure::validation(format!("domain: {e}")))
}

/// `overrideUserInfo`: only its default (`false`); an account's profile is not rewritten at each sign-in.
fn refuse_override(body: &Fields) -> Result<(), Failure> {
    if body.optional_bool("overrideUserInfo")? == Some(true) {
        return Err(Failure::validation("overrideUserInfo is not offered: a sign-in does not rewrite the profile"));
    }
    Ok(())
}

/// `oidcConfig`, an object if present, with only the options this service follows set to other than their
/// defaults.
fn oidc_config(body: &Fields) -> Result<Option<Fields>, Failure> {
    let config = match body.get("oidcConfig") {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Object(map)) => Fields::from(map.clone()),
        Some(_) => return Err(Failure::validation("[body.oidcConfig] Invalid input: expected object")),
    };
    config.only(OIDC_KEYS)?;
    if config.optional_bool("pkce")? == Some(false) {
        return Err(Failure::validation("oidcConfig.pkce: PKCE is always used"));
    }
    if config.optional_bool("skipDiscovery")? == Some(true) {
        return Err(Failure::validation(
            "oidcConfig.skipDiscovery: the provider's endpoints are always read from its discovery document",
        ));
    }
    refuse_override(&config)?;
    for key in ["authorizationEndpoint", "tokenEndpoint", "userInfoEndpoint", "jwksEndpoint"] {
        if config.optional_string(key)?.is_some() {
            return Err(Failure::validation(format!(
                "oidcConfig.{key}: the provider's endpoints are read from its discovery document"
            )));
        }
    }
    if config.optional_string("discoveryEndpoint")?.is_some() {
        return Err(Failure::validation(
            "oidcConfig.discoveryEndpoint: discovery is read from {issuer}/.well-known/openid-configuration",
        ));
    }
    if config.get("mapping").is_some_and(|v| !v.is_null()) {
        return Err(Failure::validation("oidcConfig.mapping is not offered: the standard claims are read"));
    }
    Ok(Some(config))
}

fn token_auth(oidc: &Fields) -> Result<Option<SsoTokenAuth>, Failure> {
    match oidc.optional_string("tokenEndpointAuthentication")? {
        None => Ok(None),
        Some("client_secret_basic") => Ok(Some(SsoTokenAuth::ClientSecretBasic)),
        Some("client_secret_post") => Ok(Some(SsoTokenAuth::ClientSecretPost)),
        Some(_) => Err(Failure::validation(
            "oidcConfig.tokenEndpointAuthentication must be client_secret_basic or client_secret_post",
        )),
    }
}

fn scopes(oidc: &Fields) -> Result<Option<Vec<String>>, Failure> {
    match oidc.get("scopes") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| v.as_str().map(str::to_owned))
            .collect::<Option<Vec<_>>>()
            .map(Some)
            .ok_or_else(|| Failure::validation("oidcConfig.scopes must be an array of strings")),
        Some(_) => Err(Failure::validation("oidcConfig.scopes must be an array of strings")),
    }
}

/// `roleMapping`: `{claim?, mappings: [{group, role}]}` (`Some(Some)`), `null` (`Some(None)`: none, or on update
/// the mapping removed), or absent (`None`). Its shape and sizes here; its roles against the organization's by
/// the accounts layer.
fn role_mapping(body: &Fields) -> Result<Option<Option<RoleMapping>>, Failure> {
    let shape = || {
        Failure::validation("[body.roleMapping] Invalid input: expected {claim?: string, mappings: [{group, role}]}")
    };
    let config = match body.get("roleMapping") {
        None => return Ok(None),
        Some(Value::Null) => return Ok(Some(None)),
        Some(Value::Object(map)) => Fields::from(map.clone()),
        Some(_) => return Err(shape()),
    };
    config.only(&["claim", "mappings"])?;
    let Some(Value::Array(items)) = config.get("mappings") else { return Err(shape()) };
    let pairs = items
        .iter()
        .map(|item| match (item.get("group"), item.get("role"), item.as_object().map(|o| o.len())) {
            (Some(Value::String(group)), Some(Value::String(role)), Some(2)) => Ok((group.as_str(), role.as_str())),
            _ => Err(shape()),
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mapping =
        RoleMapping::parse(config.optional_string("claim")?, pairs).map_err(|e| Failure::validation(e.to_string()))?;
    Ok(Some(Some(mapping)))
}

/// `defaultRole`: `member` (the default) or `admin`.
pub(super) fn default_role(body: &Fields) -> Result<Option<OrgRole>, Failure> {
    match body.optional_string("defaultRole")? {
        None => Ok(None),
        Some("member") => Ok(Some(OrgRole::Member)),
        Some("admin") => Ok(Some(OrgRole::Admin)),
        Some(_) => {
            Err(Failure::new(StatusCode::BAD_REQUEST, "VALIDATION_ERROR", "defaultRole must be member or admin"))
        }
    }
}
