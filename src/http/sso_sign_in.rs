//! `@better-auth/sso`'s sign-in: `POST sign-in/sso` (which provider, then to its authorization endpoint) and the
//! OpenID Connect redirect back, `GET sso/callback/{providerId}`. The flow and the answers are those of the
//! sign-in through `[[oauth.providers]]` (src/http/oauth.rs); the rules are src/accounts/sso_oidc.rs's.

use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Request, Response, StatusCode};
use serde_json::Value;

use super::AppState;
use super::extract::{self, Ctx};
use super::oauth::{FLOW_COOKIE_AGE, finished_answer, flow_cookie, flow_cookie_name, scopes, trusted_urls};
use super::response::{Body, Failure, ok, with_cookie};
use crate::accounts::oauth::Callback;
use crate::accounts::{SsoChoice, SsoProtocol, SsoSignInError, SsoStart, SsoStarted};
use crate::domain::{Email, EmailDomain, Slug, SsoProviderId};

/// The plugin's body keys.
const KEYS: &[&str] = &[
    "email",
    "organizationSlug",
    "providerId",
    "domain",
    "callbackURL",
    "errorCallbackURL",
    "newUserCallbackURL",
    "scopes",
    "loginHint",
    "additionalParams",
    "requestSignUp",
    "providerType",
];

#[derive(serde::Serialize)]
struct Started<'a> {
    redirect: bool,
    url: &'a str,
}

/// `POST /api/auth/sign-in/sso` `{callbackURL, email? | organizationSlug? | providerId? | domain?,
/// errorCallbackURL?, newUserCallbackURL?, scopes?, loginHint?}` → `{url, redirect: true}` (and `Location`), the
/// flow cookie set. A provider whose domains are not verified signs nobody in (401, the plugin's answer with
/// domain verification on).
pub async fn sign_in(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let body = extract::json_object(req, true, state.body_timeout()).await?;
    body.only(KEYS)?;
    let (callback_url, error_url, new_user_url) = trusted_urls(state, &ctx, &body)?;
    let callback_url = callback_url
        .ok_or_else(|| Failure::validation("[body.callbackURL] Invalid input: expected string, received undefined"))?;
    let protocol = match body.optional_string("providerType")? {
        None => None,
        Some("oidc") => Some(SsoProtocol::Oidc),
        Some("saml") => Some(SsoProtocol::Saml),
        Some(_) => {
            return Err(Failure::validation("[body.providerType] Invalid option: expected \"oidc\" or \"saml\""));
        }
    };
    // The plugin sends them to the provider as they are; here the authorization request is the service's own.
    match body.get("additionalParams") {
        None | Some(Value::Null) => {}
        Some(Value::Object(m)) if m.is_empty() => {}
        Some(_) => {
            return Err(Failure::validation("additionalParams is not offered: the authorization request is fixed"));
        }
    }
    body.optional_bool("requestSignUp")?;
    let email = match body.optional_string("email")? {
        Some(e) => Some(Email::parse(e).map_err(|e| Failure::validation(format!("[body.email] {e}")))?),
        None => None,
    };
    let domain = match body.optional_string("domain")? {
        Some(d) => Some(EmailDomain::parse(d).map_err(|e| Failure::validation(format!("[body.domain] {e}")))?),
        None => None,
    };
    let choice = if let Some(id) = body.optional_string("providerId")? {
        let id = SsoProviderId::parse(id).map_err(|e| Failure::validation(format!("[body.providerId] {e}")))?;
        SsoChoice::ProviderId(id.as_str().to_owned())
    } else if let Some(slug) = body.optional_string("organizationSlug")? {
        // A slug no organization could have names none.
        let slug = Slug::parse(slug).map_err(|_| not_found())?;
        SsoChoice::Organization(slug)
    } else if let Some(domain) = domain {
        SsoChoice::Domain(domain.as_str().to_owned())
    } else if let Some(email) = &email {
        let domain = email.as_str().rsplit_once('@').map(|(_, d)| d.to_ascii_lowercase()).unwrap_or_default();
        SsoChoice::Domain(domain)
    } else {
        return Err(Failure::bad_request(
            "EMAIL_ORGANIZATIONSLUG_DOMAIN_OR_PROVIDERID_IS_REQUIRED",
            "email, organizationSlug, domain or providerId is required",
        ));
    };
    let login_hint = match body.optional_string("loginHint")? {
        Some(hint) if hint.chars().count() > 320 || hint.chars().any(char::is_control) => {
            return Err(Failure::validation("[body.loginHint] at most 320 characters, no control characters"));
        }
        Some(hint) => Some(hint.to_owned()),
        None => email.as_ref().map(|e| e.as_str().to_owned()),
    };
    let own = state.origins.own(ctx.host()).ok_or_else(|| Failure::bad_request("BAD_REQUEST", "No Host header"))?;
    // A SAML provider's start takes them back (the handler knows the ACS URL it needs).
    let start_urls = (callback_url.clone(), error_url.clone(), new_user_url.clone());
    let start = SsoStart {
        choice,
        auth_base: format!("{own}/api/auth"),
        callback_url,
        error_url,
        new_user_url,
        scopes: scopes(&body)?,
        login_hint,
        protocol,
    };
    let started = state.accounts.start_sso(start).await.map_err(|e| match e {
        SsoSignInError::NotFound => not_found(),
        SsoSignInError::NotVerified => Failure::new(
            StatusCode::UNAUTHORIZED,
            "PROVIDER_DOMAIN_HAS_NOT_BEEN_VERIFIED",
            "Provider domain has not been verified",
        ),
        SsoSignInError::OidcNotConfigured => {
            Failure::bad_request("OIDC_PROVIDER_IS_NOT_CONFIGURED", "OIDC provider is not configured")
        }
        SsoSignInError::SamlNotConfigured => {
            Failure::bad_request("SAML_PROVIDER_IS_NOT_CONFIGURED", "SAML provider is not configured")
        }
        SsoSignInError::Provider(e) => {
            tracing::warn!(error = %e, "a single sign-on provider's discovery failed");
            Failure::new(StatusCode::BAD_GATEWAY, "PROVIDER_UNAVAILABLE", "The identity provider cannot be reached")
        }
        SsoSignInError::Unavailable => Failure::unavailable(),
    })?;
    let started = match started {
        SsoStarted::Oidc(started) => started,
        SsoStarted::Saml { provider_id } => {
            let (callback_url, error_url, new_user_url) = (Some(start_urls.0), start_urls.1, start_urls.2);
            return super::saml::sign_in(state, &ctx, &provider_id, callback_url, error_url, new_user_url).await;
        }
    };
    let mut answer = ok(&Started { redirect: true, url: &started.url });
    if let Ok(location) = HeaderValue::from_str(&started.url) {
        answer.headers_mut().insert(header::LOCATION, location);
    }
    Ok(with_cookie(answer, flow_cookie(state, &started.browser, FLOW_COOKIE_AGE)))
}

fn not_found() -> Failure {
    Failure::new(StatusCode::NOT_FOUND, "NO_PROVIDER_FOUND_FOR_THE_ISSUER", "No provider found for the issuer")
}

/// `GET /api/auth/sso/callback/{providerId}?code&state[&iss]`: as `callback/{provider}` answers (the session
/// cookie and 302 to the callback URL or the new-user URL; the second factor's cookie and 302 with
/// `twoFactorRedirect=true`; 302 to the error URL with `?error=`); 400 `STATE_NOT_FOUND` without a state, or with
/// one that was used, expired or never given.
pub async fn callback(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let started = std::time::Instant::now();
    let provider_id = req.uri().path().rsplit('/').next().unwrap_or_default().to_owned();
    let query = req.uri().query();
    let value = |name: &str| extract::query_value(query, name);
    let Some(state_param) = value("state") else {
        return Err(Failure::bad_request("STATE_NOT_FOUND", "State not found"));
    };
    let (code, error, error_description, iss) =
        (value("code"), value("error"), value("error_description"), value("iss"));
    let headers = req.headers();
    let browser = extract::cookie(headers, &flow_cookie_name(state)).map(str::to_owned);
    let client = extract::client(&ctx, headers);
    let callback = Callback {
        provider: &provider_id,
        state: &state_param,
        code: code.as_deref(),
        error: error.as_deref(),
        error_description: error_description.as_deref(),
        iss: iss.as_deref(),
        browser: browser.as_deref(),
        signed_in: None,
        trusted: super::two_factor::trusted_device(state, headers),
    };
    let mut waited = std::time::Duration::ZERO;
    let finished = state.accounts.finish_sso(&provider_id, callback, client, &mut waited).await;
    let answer = finished_answer(state, finished).map(|answer| with_cookie(answer, flow_cookie(state, "", 0)));
    // The callback's own time, as a social provider's callback records it: not what it waited for at the provider.
    state.accounts.metrics.oauth_callback_own.record(started.elapsed().saturating_sub(waited).as_secs_f64());
    answer
}
