//! The identity provider's flows (issue #46), on `@better-auth/oauth-provider`'s wire: the authorization request
//! (`/oauth2/authorize`), the consent page's answer (`/oauth2/consent`), the token endpoint's authorization code
//! grant (`/oauth2/token`) and userinfo. The rules are RFC 9700's where they apply: exact redirect URIs (a native
//! client's loopback one on any port), PKCE with S256 only (required of public clients), `iss` in the
//! authorization response (RFC 9207), single-use codes bound to their client and redirect URI.
//!
//! Who is signed in is read from the session index, as every guarded call reads it: a banned user's sessions are
//! no sessions, so a banned user gets no code; a session that must first enrol a second factor is sent to the
//! sign-in page (which sends it on to enrol) and gets no code either; and at the token endpoint the code's session
//! must still be live and its user not banned, so a ban or a sign-out between the two steps ends the grant.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use serde::Serialize;
use sha2::{Digest, Sha256, Sha512};
use subtle::ConstantTimeEq;

use super::{Accounts, Current, Unavailable};
use crate::domain::{OrgId, SessionId, Timestamp, TokenHash, UserId};
use crate::provider::grants::{self as grants, CODE_LIFETIME, GrantError, ORG_CLAIMS_SCOPE, OrgClaims, RefreshError};
use crate::provider::keys::AccessRead;
use crate::provider::{Alg, AuthMethod, Authenticating, Client, ClientError, USER_SCOPES, redirect_uri_matches};
use crate::store::{OAuthCodeRecordV1, OAuthGrantRecord};

/// Access tokens are JWTs (RFC 9068) that live a quarter of an hour: short, since a JWT is valid wherever it is
/// checked offline until it expires (the plugin's default is an hour; userinfo here also checks the session).
pub use crate::provider::grants::ACCESS_TOKEN_LIFETIME;
/// ID tokens: ten hours, as the plugin (and the signing keys' retirement, `provider::keys::MAX_SIGNED_LIFETIME`).
pub const ID_TOKEN_LIFETIME: Duration = Duration::from_secs(36_000);

/// An authorization request's parameters, as they came (RFC 6749 §4.1.1, OpenID Connect Core §3.1.2.1).
#[derive(Debug, Default, Clone)]
pub struct AuthorizeRequest {
    pub client_id: Option<String>,
    pub redirect_uri: Option<String>,
    pub response_type: Option<String>,
    pub scope: Option<String>,
    pub state: Option<String>,
    pub nonce: Option<String>,
    pub code_challenge: Option<String>,
    pub code_challenge_method: Option<String>,
    pub prompt: Option<String>,
    pub max_age: Option<String>,
    /// `login_after` (unix milliseconds): put on the way back from the sign-in page by the provider itself
    /// ([`Authorized::SignIn`]), never by a client.
    pub login_after: Option<String>,
    /// `request` or `request_uri`, which the provider does not support.
    pub request_object: Option<&'static str>,
    /// A parameter given more than once (RFC 6749 §3.1 refuses it).
    pub repeated: Option<String>,
}

/// Where an authorization request leads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Authorized {
    /// The client or its redirect URI cannot be trusted: the error is shown here (400), never sent to a URI.
    Refused { error: &'static str, description: String },
    /// To the client's redirect URI: a code, or an error (with `state` and `iss`).
    Redirect(String),
    /// Nobody is signed in (or `prompt=login`, or the session is older than `max_age`): to the sign-in page, and
    /// back to the same request after, carrying `after` as `login_after`: on the way back only a session begun
    /// since counts (a sign-in from the page), whatever `prompt=login` and `max_age` said. Without it the way
    /// back asked again for ever: `max_age=0` (or any session older than `max_age`, whose holder the page offered
    /// to continue) came back to the sign-in page, and a session from before `prompt=login` was taken as the new
    /// sign-in. `None` when any session will do: nobody was signed in and neither was asked for, or the sign-in
    /// page is only to enrol a second factor in the same session.
    SignIn { after: Option<Timestamp> },
    /// The user has not consented to these scopes yet (or `prompt=consent`): to the consent page.
    Consent,
}

/// What the request asked for, once the client and its redirect URI are known good.
struct Checked {
    client: Client,
    redirect_uri: String,
    scopes: Vec<String>,
    state: Option<String>,
    nonce: Option<String>,
    code_challenge: Option<String>,
    prompt_none: bool,
    prompt_login: bool,
    prompt_consent: bool,
    max_age: Option<u64>,
    /// On the way back from the sign-in page: when the sign-in was asked for (`login_after`).
    login_after: Option<Timestamp>,
}

/// Why the consent page's answer is refused (the plugin's 400 `invalid_request`s).
#[derive(Debug, thiserror::Error)]
pub enum ConsentError {
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
}

/// A token request (RFC 6749 §4.1.3), with the client's credentials from wherever they came.
#[derive(Debug, Default, Clone)]
pub struct TokenRequest {
    pub grant_type: Option<String>,
    pub code: Option<String>,
    pub redirect_uri: Option<String>,
    pub code_verifier: Option<String>,
    /// The refresh token grant's token, and the scopes it may narrow the new access token to.
    pub refresh_token: Option<String>,
    pub scope: Option<String>,
    /// The device authorization grant's code (RFC 8628 §3.4).
    pub device_code: Option<String>,
    /// `client_id` and `client_secret` in the form (`client_secret_post`, or a public client's id alone).
    pub client_id: Option<String>,
    pub client_secret: Option<String>,
    /// `Authorization: Basic` (`client_secret_basic`), decoded.
    pub basic: Option<(String, String)>,
    /// A parameter given more than once.
    pub repeated: Option<String>,
    /// The caller's address, for the audit log.
    pub ip: String,
}

/// The token endpoint's answer (the plugin's fields and order).
#[derive(Debug, Clone, Serialize)]
pub struct Tokens {
    pub access_token: String,
    pub expires_in: u64,
    pub expires_at: i64,
    pub token_type: &'static str,
    /// With `offline_access` granted: a new one at every refresh, which replaces the one used.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refresh_token: Option<String>,
    pub scope: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id_token: Option<String>,
}

/// The token endpoint's refusals (RFC 6749 §5.2's codes; the messages are the plugin's where it has one).
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error("{0}")]
    InvalidRequest(String),
    /// 401; `basic`: the client tried `Authorization: Basic` (the answer then carries `WWW-Authenticate`).
    #[error("{description}")]
    InvalidClient { description: String, basic: bool },
    #[error("{0}")]
    InvalidGrant(String),
    #[error("{0}")]
    UnauthorizedClient(String),
    #[error("{0}")]
    UnsupportedGrantType(String),
    #[error("{0}")]
    InvalidScope(String),
    /// The device grant's answers while its user has not approved (RFC 8628 §3.5).
    #[error("the user has not approved the request yet")]
    AuthorizationPending,
    #[error("polling too frequently: wait the interval, now 5 seconds longer")]
    SlowDown,
    #[error("the user denied the request")]
    AccessDenied,
    #[error("the device code has expired")]
    ExpiredToken,
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
}

impl TokenError {
    /// The RFC 6749 error code.
    pub fn code(&self) -> &'static str {
        match self {
            TokenError::InvalidRequest(_) => "invalid_request",
            TokenError::InvalidClient { .. } => "invalid_client",
            TokenError::InvalidGrant(_) => "invalid_grant",
            TokenError::UnauthorizedClient(_) => "unauthorized_client",
            TokenError::UnsupportedGrantType(_) => "unsupported_grant_type",
            TokenError::InvalidScope(_) => "invalid_scope",
            TokenError::AuthorizationPending => "authorization_pending",
            TokenError::SlowDown => "slow_down",
            TokenError::AccessDenied => "access_denied",
            TokenError::ExpiredToken => "expired_token",
            TokenError::Unavailable(_) => "temporarily_unavailable",
        }
    }
}

/// An RP-initiated logout request (OpenID Connect RP-Initiated Logout 1.0 §2), as it came.
#[derive(Debug, Default, Clone)]
pub struct EndSessionRequest {
    pub id_token_hint: Option<String>,
    pub client_id: Option<String>,
    pub post_logout_redirect_uri: Option<String>,
    pub state: Option<String>,
    /// A parameter given more than once.
    pub repeated: Option<String>,
}

/// Why a logout request is refused: nothing is ended then.
#[derive(Debug, thiserror::Error)]
pub enum EndSessionError {
    /// 400 `invalid_request`.
    #[error("{0}")]
    InvalidRequest(String),
    /// 401 `invalid_client`: unknown, disabled, or not allowed to end sessions.
    #[error("{0}")]
    InvalidClient(String),
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
}

/// What `end-session` does with a request that passed its checks.
#[derive(Debug, Clone)]
pub enum EndSession {
    /// The hint's session ended (or had already): the browser goes on as [`SessionEnded`] says.
    Ended(SessionEnded),
    /// The browser has a session the request does not name: the person is asked (the logout confirmation page).
    Confirm,
    /// No hint and no session: nothing to end; the browser goes to the registered redirect, if any.
    NothingToEnd { redirect: Option<String> },
}

/// A logout request that passed every check: the hint's user and session, if hinted, and where to send the
/// browser afterwards.
struct CheckedLogout {
    hinted: Option<(UserId, SessionId)>,
    redirect: Option<String>,
}

/// What a logout did: the session it ended (its token's hash, so the caller's cookie is cleared if it was that
/// session's), and where to send the browser (the registered `post_logout_redirect_uri` with `state`), if asked.
#[derive(Debug, Clone)]
pub struct SessionEnded {
    pub ended: Option<crate::domain::TokenHash>,
    pub redirect: Option<String>,
}

/// Introspection's answer (RFC 7662 §2.2): `{active: false}` alone, or what the token is. An access token's answer
/// borrows its claims from the token's decoded payload (no copy of each: introspection is the hot path).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Introspection<'a> {
    pub active: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub iss: Option<Cow<'a, str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_id: Option<Cow<'a, str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub azp: Option<Cow<'a, str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sub: Option<Cow<'a, str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sid: Option<Cow<'a, str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exp: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub iat: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scope: Option<Cow<'a, str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token_type: Option<&'static str>,
    /// The organization claims as userinfo reads them: the grant's organization and the member's roles now.
    #[serde(flatten)]
    pub org: Option<OrgClaims>,
}

/// Userinfo's answer: the claims of the scopes the token carries.
#[derive(Debug, Clone, Serialize)]
pub struct UserInfo {
    pub sub: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub picture: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub given_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub family_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub email_verified: Option<bool>,
    #[serde(flatten)]
    pub org: Option<OrgClaims>,
}

#[derive(Debug, thiserror::Error)]
pub enum UserInfoError {
    /// 401 `invalid_token` (RFC 6750 §3.1): not a token of ours, expired, or its session or user is gone.
    #[error("{0}")]
    InvalidToken(String),
    /// 403 `insufficient_scope`: the token was not granted `openid`.
    #[error("the token was not granted the openid scope")]
    InsufficientScope,
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
}

impl From<GrantError> for Unavailable {
    fn from(_: GrantError) -> Self {
        Unavailable
    }
}

impl From<ClientError> for Unavailable {
    fn from(_: ClientError) -> Self {
        Unavailable
    }
}

/// `uri` with `params` added to its query (after any it has).
fn with_query(uri: &str, params: &[(&str, &str)]) -> String {
    match url::Url::parse(uri) {
        Ok(mut url) => {
            url.query_pairs_mut().extend_pairs(params);
            url.to_string()
        }
        // Registered URIs parse (clients.rs checks them); kept whole rather than lost.
        Err(_) => uri.to_owned(),
    }
}

impl Checked {
    /// The client's redirect URI with `params`, the request's `state` and the issuer (RFC 9207).
    fn back(&self, params: &[(&str, &str)], issuer: &str) -> String {
        let mut all: Vec<(&str, &str)> = params.to_vec();
        if let Some(state) = &self.state {
            all.push(("state", state));
        }
        all.push(("iss", issuer));
        with_query(&self.redirect_uri, &all)
    }

    fn error(&self, error: &str, description: &str, issuer: &str) -> Authorized {
        Authorized::Redirect(self.back(&[("error", error), ("error_description", description)], issuer))
    }
}

/// A PKCE verifier (RFC 7636 §4.1): 43 to 128 unreserved characters.
fn valid_verifier(v: &str) -> bool {
    (43..=128).contains(&v.len())
        && v.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~'))
}

/// The OpenID `at_hash`: the left half of the access token's hash with the ID token's algorithm's hash (SHA-512
/// for EdDSA, as the plugin; SHA-256 for ES256 and RS256), base64url.
fn at_hash(alg: Alg, access_token: &str) -> String {
    match alg {
        Alg::EdDsa => B64.encode(&Sha512::digest(access_token.as_bytes())[..32]),
        Alg::Es256 | Alg::Rs256 => B64.encode(&Sha256::digest(access_token.as_bytes())[..16]),
    }
}

#[derive(Serialize)]
struct IdClaims<'a> {
    iss: &'a str,
    sub: &'a str,
    aud: &'a str,
    iat: i64,
    exp: i64,
    auth_time: i64,
    acr: &'static str,
    at_hash: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    nonce: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    sid: Option<&'a str>,
    #[serde(flatten)]
    org: Option<&'a OrgClaims>,
}

impl Accounts {
    /// The session `id` of `user`, if it is live: not expired, nor over the idle or absolute limit.
    pub(super) fn live_session(&self, user: UserId, id: SessionId) -> Option<std::sync::Arc<crate::domain::Session>> {
        let now = self.clock.now();
        let session = self.sessions_of(user).into_iter().map(|(_, s)| s).find(|s| s.id == id)?;
        (self.session_limits.check(&session, now) != super::SessionUse::Over).then_some(session)
    }

    /// The checks that need no session (the plugin's order): the client and its redirect URI first, whose
    /// failures are shown here; then the rest, whose failures go back to the client.
    async fn check_authorization(&self, req: &AuthorizeRequest, issuer: &str) -> Result<Checked, Authorized> {
        let refused =
            |error: &'static str, description: &str| Authorized::Refused { error, description: description.into() };
        let Some(client_id) = req.client_id.as_deref() else {
            return Err(refused("invalid_request", "client_id is required"));
        };
        let client = match self.clients.get(client_id).await {
            Ok(client) => client,
            Err(ClientError::NotFound) => return Err(refused("invalid_client", "unknown client")),
            Err(_) => return Err(refused("temporarily_unavailable", "the service is temporarily unavailable")),
        };
        if client.disabled {
            return Err(refused("client_disabled", "the client is disabled"));
        }
        if !client.grant_types.contains(&"authorization_code") {
            return Err(refused("unauthorized_client", "the client may not use the authorization code grant"));
        }
        let Some(redirect_uri) = req.redirect_uri.clone() else {
            return Err(refused("invalid_request", "redirect_uri is required"));
        };
        if !redirect_uri_matches(&client.redirect_uris, client.native, &redirect_uri) {
            return Err(refused("invalid_redirect", "invalid redirect uri"));
        }
        let mut checked = Checked {
            client,
            redirect_uri,
            scopes: Vec::new(),
            state: req.state.clone(),
            nonce: req.nonce.clone(),
            code_challenge: None,
            prompt_none: false,
            prompt_login: false,
            prompt_consent: false,
            max_age: None,
            // A marker that does not parse is as none: the browser can drop or change any parameter of the
            // request anyway (prompt and max_age too), which is why a relying party checks `auth_time`.
            login_after: req.login_after.as_deref().and_then(|v| v.parse::<i64>().ok()).map(Timestamp::from_millis),
        };
        // From here on the client is known and its redirect URI is its own: errors go back to it.
        if let Some(name) = &req.repeated {
            return Err(checked.error("invalid_request", &format!("{name} is given more than once"), issuer));
        }
        if let Some(which) = req.request_object {
            let error = if which == "request" { "request_not_supported" } else { "request_uri_not_supported" };
            return Err(checked.error(error, &format!("{which} is not supported"), issuer));
        }
        match req.response_type.as_deref() {
            None => return Err(checked.error("invalid_request", "response_type is required", issuer)),
            Some("code") => {}
            Some(_) => {
                return Err(checked.error("unsupported_response_type", "only response_type=code is supported", issuer));
            }
        }
        checked.scopes = match req.scope.as_deref() {
            None => checked.client.scopes.iter().filter(|s| USER_SCOPES.contains(&s.as_str())).cloned().collect(),
            Some(scope) => {
                let mut scopes: Vec<String> = Vec::new();
                for s in scope.split(' ').filter(|s| !s.is_empty()) {
                    if !scopes.iter().any(|k| k == s) {
                        scopes.push(s.to_owned());
                    }
                }
                scopes
            }
        };
        let invalid: Vec<&str> =
            checked.scopes.iter().filter(|s| !checked.client.scopes.contains(s)).map(String::as_str).collect();
        if !invalid.is_empty() {
            let description = format!("The following scopes are invalid: {}", invalid.join(", "));
            return Err(checked.error("invalid_scope", &description, issuer));
        }
        if checked.scopes.is_empty() {
            return Err(checked.error("invalid_scope", "no scope requested", issuer));
        }
        if let Some(prompt) = req.prompt.as_deref() {
            let values: Vec<&str> = prompt.split(' ').filter(|s| !s.is_empty()).collect();
            for value in &values {
                match *value {
                    "none" => checked.prompt_none = true,
                    "login" | "create" => checked.prompt_login = true,
                    "consent" => checked.prompt_consent = true,
                    "select_account" => {}
                    other => {
                        return Err(checked.error("invalid_request", &format!("unsupported prompt {other}"), issuer));
                    }
                }
            }
            if checked.prompt_none && values.len() > 1 {
                return Err(checked.error("invalid_request", "prompt=none cannot be combined", issuer));
            }
        }
        if let Some(max_age) = req.max_age.as_deref() {
            match max_age.parse::<u64>() {
                Ok(secs) => checked.max_age = Some(secs),
                Err(_) => return Err(checked.error("invalid_request", "max_age must be a number of seconds", issuer)),
            }
        }
        match (req.code_challenge.as_deref(), req.code_challenge_method.as_deref()) {
            (None, None) => {}
            (Some(challenge), Some("S256")) => {
                // A SHA-256 in base64url without padding is 43 characters.
                if challenge.len() != 43 || B64.decode(challenge).is_err() {
                    return Err(checked.error("invalid_request", "code_challenge is not an S256 challenge", issuer));
                }
                checked.code_challenge = Some(challenge.to_owned());
            }
            (Some(_), None) => {
                return Err(checked.error("invalid_request", "code_challenge_method is required", issuer));
            }
            (None, Some(_)) => return Err(checked.error("invalid_request", "code_challenge is required", issuer)),
            (Some(_), Some(_)) => {
                return Err(checked.error(
                    "invalid_request",
                    "invalid code_challenge method, only S256 is supported",
                    issuer,
                ));
            }
        }
        if checked.code_challenge.is_none() {
            if checked.client.auth_method == AuthMethod::None {
                return Err(checked.error("invalid_request", "pkce is required for public clients", issuer));
            }
            let offline = checked.scopes.iter().any(|s| s == "offline_access");
            let oidc_nonce = checked.nonce.is_some() && checked.scopes.iter().any(|s| s == "openid");
            if offline && !oidc_nonce {
                return Err(checked.error(
                    "invalid_request",
                    "pkce or OIDC nonce is required when requesting offline_access scope",
                    issuer,
                ));
            }
        }
        Ok(checked)
    }

    /// `GET /oauth2/authorize`: where the request leads, for `caller` (the session cookie's session, if any).
    pub async fn authorize(
        &self,
        req: &AuthorizeRequest,
        caller: Option<&Current>,
        issuer: &str,
    ) -> Result<Authorized, Unavailable> {
        let checked = match self.check_authorization(req, issuer).await {
            Ok(checked) => checked,
            Err(Authorized::Refused { error: "temporarily_unavailable", .. }) => return Err(Unavailable),
            Err(answer) => return Ok(answer),
        };
        self.decide(checked, caller, None, issuer).await
    }

    /// The steps after the checks: the session, the consent, the code. `accepted`: the scopes the consent page
    /// just granted (they are stored first, and the code is issued for them).
    async fn decide(
        &self,
        mut checked: Checked,
        caller: Option<&Current>,
        accepted: Option<Vec<String>>,
        issuer: &str,
    ) -> Result<Authorized, Unavailable> {
        let now = self.clock.now();
        let answering_consent = accepted.is_some();
        let signed_in_enough = |c: &Current| match checked.login_after {
            // Back from the sign-in page: a session begun since it was asked for, however young max_age wants it.
            Some(asked) => c.session.created_at >= asked,
            None => {
                let too_old =
                    checked.max_age.is_some_and(|secs| c.session.created_at.plus(Duration::from_secs(secs)) <= now);
                !too_old && (!checked.prompt_login || answering_consent)
            }
        };
        let current = match caller {
            Some(c) if signed_in_enough(c) => c,
            _ if checked.prompt_none => return Ok(checked.error("login_required", "authentication required", issuer)),
            // A new sign-in is asked for (prompt=login, max_age, or still so on a way back): the way back takes only
            // a session begun since. Otherwise any session will do, as one signed in elsewhere meanwhile.
            _ => {
                let fresh = checked.prompt_login || checked.max_age.is_some() || checked.login_after.is_some();
                return Ok(Authorized::SignIn { after: fresh.then_some(now) });
            }
        };
        if current.is_impersonation() {
            return Ok(checked.error(
                "access_denied",
                "an administrator impersonating a user cannot sign in to applications as them",
                issuer,
            ));
        }
        if self.must_enrol(current).await {
            if checked.prompt_none {
                return Ok(checked.error("interaction_required", "a second factor must be enrolled first", issuer));
            }
            return Ok(Authorized::SignIn { after: None });
        }
        if let Some(scopes) = accepted {
            let client = (checked.client.id, checked.client.client_id.as_str());
            self.grants.give_consent(current.user.id, client, &scopes, &current.session.ip_address).await?;
            checked.scopes = scopes;
        } else if !checked.client.skip_consent {
            let given = self.grants.consent(current.user.id, &checked.client.client_id).await?;
            let covered = given.is_some_and(|given| checked.scopes.iter().all(|s| given.contains(s)));
            if !covered || checked.prompt_consent {
                if checked.prompt_none {
                    return Ok(checked.error("consent_required", "consent required", issuer));
                }
                return Ok(Authorized::Consent);
            }
        }
        let record = OAuthCodeRecordV1 {
            client_id: checked.client.client_id.clone(),
            user_id: current.user.id.to_bytes(),
            session_id: current.session.id.to_bytes(),
            redirect_uri: checked.redirect_uri.clone(),
            scopes: checked.scopes.clone(),
            code_challenge: checked.code_challenge.clone(),
            nonce: checked.nonce.clone(),
            auth_time_ms: current.session.created_at.as_millis(),
            expires_at_ms: now.plus(CODE_LIFETIME).as_millis(),
        };
        let code = self.grants.issue_code(record).await?;
        Ok(Authorized::Redirect(checked.back(&[("code", &code)], issuer)))
    }

    /// `POST /oauth2/consent`: the consent page's answer to the request `req` (its query, checked again in full),
    /// by `current`. Accepted: the scopes (all requested, or `scope`, a subset) are remembered and a code issued;
    /// denied: `access_denied` to the client (a denial is not stored).
    pub async fn answer_consent(
        &self,
        req: &AuthorizeRequest,
        current: &Current,
        accept: bool,
        scope: Option<&str>,
        issuer: &str,
    ) -> Result<Authorized, ConsentError> {
        let checked = match self.check_authorization(req, issuer).await {
            Ok(checked) => checked,
            Err(Authorized::Refused { error: "temporarily_unavailable", .. }) => return Err(Unavailable.into()),
            Err(answer) => return Ok(answer),
        };
        if !accept {
            return Ok(checked.error("access_denied", "User denied access", issuer));
        }
        let scopes = match scope {
            None => checked.scopes.clone(),
            Some(scope) => {
                let narrowed: Vec<String> = scope.split(' ').filter(|s| !s.is_empty()).map(str::to_owned).collect();
                if narrowed.is_empty() || narrowed.iter().any(|s| !checked.scopes.contains(s)) {
                    return Err(ConsentError::Invalid("Scope not originally requested".into()));
                }
                narrowed
            }
        };
        Ok(self.decide(checked, Some(current), Some(scopes), issuer).await?)
    }

    /// The client a token request is from, authenticated as it was registered (RFC 6749 §2.3): a confidential
    /// client by its secret (compared in constant time with the stored hash), a public one by its id alone.
    pub(super) async fn token_client(&self, req: &TokenRequest) -> Result<Arc<Client>, TokenError> {
        let basic = req.basic.is_some();
        let invalid = |description: &str| TokenError::InvalidClient { description: description.into(), basic };
        if basic && (req.client_secret.is_some()) {
            return Err(TokenError::InvalidRequest("more than one client authentication method".into()));
        }
        let client_id = match (&req.basic, &req.client_id) {
            (Some((id, _)), Some(form)) if id != form => {
                return Err(TokenError::InvalidRequest("client_id differs from the authenticated client".into()));
            }
            (Some((id, _)), _) => id.clone(),
            (None, Some(id)) => id.clone(),
            (None, None) => return Err(invalid("client authentication is required")),
        };
        let Authenticating { client, secret_hash } = match self.clients.with_secret(&client_id).await {
            Ok(found) => found,
            Err(ClientError::NotFound) => return Err(invalid("invalid client")),
            Err(_) => return Err(Unavailable.into()),
        };
        if client.disabled {
            return Err(invalid("client is disabled"));
        }
        let presented = match (&req.basic, &req.client_secret) {
            (Some((_, secret)), _) => Some((AuthMethod::ClientSecretBasic, secret)),
            (None, Some(secret)) => Some((AuthMethod::ClientSecretPost, secret)),
            (None, None) => None,
        };
        match (client.auth_method, presented, secret_hash) {
            (AuthMethod::None, None, _) => Ok(client),
            (AuthMethod::None, Some(_), _) => Err(invalid("a public client has no secret")),
            (registered, Some((used, secret)), Some(hash)) => {
                if registered != used {
                    return Err(TokenError::InvalidClient {
                        description: format!("client registered for {} cannot use {}", registered.name(), used.name()),
                        basic,
                    });
                }
                let right: bool = crate::provider::clients::hash_secret(secret).ct_eq(&hash).into();
                if right { Ok(client) } else { Err(invalid("invalid client secret")) }
            }
            (_, _, _) => Err(invalid("client authentication is required")),
        }
    }

    /// `POST /oauth2/token`: the authorization code grant and the refresh token grant.
    pub async fn token(&self, req: &TokenRequest, issuer: &str) -> Result<Tokens, TokenError> {
        if let Some(name) = &req.repeated {
            return Err(TokenError::InvalidRequest(format!("{name} is given more than once")));
        }
        let grant =
            req.grant_type.as_deref().ok_or_else(|| TokenError::InvalidRequest("grant_type is required".into()))?;
        match grant {
            "authorization_code" => self.code_grant(req, issuer).await,
            "refresh_token" => self.refresh_grant(req, issuer).await,
            "client_credentials" => self.client_grant(req, issuer).await,
            crate::provider::clients::DEVICE_GRANT => self.device_grant(req, issuer).await,
            _ => Err(TokenError::UnsupportedGrantType(format!("unsupported grant_type {grant}"))),
        }
    }

    /// The refresh token grant (RFC 6749 §6): the grant's refresh token is replaced by a new one (rotation), and a
    /// new access token (and ID token, with `openid`) issued, for the grant's scopes or fewer (`scope`).
    async fn refresh_grant(&self, req: &TokenRequest, issuer: &str) -> Result<Tokens, TokenError> {
        let client = self.token_client(req).await?;
        if !client.grant_types.contains(&"refresh_token") {
            return Err(TokenError::UnauthorizedClient("the client may not use the refresh token grant".into()));
        }
        let token = req
            .refresh_token
            .as_deref()
            .ok_or_else(|| TokenError::InvalidRequest("refresh_token is required".into()))?;
        let now = self.clock.now();
        let asked: Option<Vec<String>> = req
            .scope
            .as_deref()
            .map(|scope| scope.split(' ').filter(|s| !s.is_empty()).map(str::to_owned).collect())
            .filter(|asked: &Vec<String>| !asked.is_empty());
        let (grant, refresh_token) =
            match self.grants.refresh(token, &client.client_id, asked.as_deref(), now, &req.ip).await {
                Ok(done) => done,
                Err(RefreshError::Invalid) => return Err(TokenError::InvalidGrant("invalid refresh token".into())),
                Err(e @ RefreshError::Reused) => return Err(TokenError::InvalidGrant(e.to_string())),
                Err(e @ RefreshError::Scope(_)) => return Err(TokenError::InvalidScope(e.to_string())),
                Err(RefreshError::Store(_)) => return Err(Unavailable.into()),
            };
        let scopes = asked.unwrap_or_else(|| grant.scopes.clone());
        let user_id = grant
            .user_id
            .map(UserId::from_bytes)
            .ok_or_else(|| TokenError::InvalidGrant("invalid refresh token".into()))?;
        // A ban ends the user's grants in its own commit; this holds for a ban whose change is on its way here.
        if self.indexes.users.get(user_id).is_none_or(|u| u.is_banned_at(now)) {
            return Err(TokenError::InvalidGrant("the user no longer exists or is banned".into()));
        }
        // No nonce: it belongs to the authentication, not to a refresh (OpenID Connect Core §12.2).
        let mut tokens = self.issue(&client, &grant, &scopes, None, issuer).await?;
        tokens.refresh_token = Some(refresh_token);
        Ok(tokens)
    }

    /// The client credentials grant (RFC 6749 §4.4): a confidential client's own access token, for its own scopes
    /// (the ones it was registered with beyond the user scopes), no refresh token, no ID token.
    async fn client_grant(&self, req: &TokenRequest, issuer: &str) -> Result<Tokens, TokenError> {
        let client = self.token_client(req).await?;
        if client.auth_method == AuthMethod::None {
            return Err(TokenError::UnauthorizedClient("a public client cannot use client credentials".into()));
        }
        if !client.grant_types.contains(&"client_credentials") {
            return Err(TokenError::UnauthorizedClient("the client may not use the client credentials grant".into()));
        }
        let own: Vec<String> = client.scopes.iter().filter(|s| !USER_SCOPES.contains(&s.as_str())).cloned().collect();
        if own.is_empty() {
            return Err(TokenError::UnauthorizedClient("client has no authorized client_credentials scopes".into()));
        }
        let scopes = match req.scope.as_deref().map(|s| s.split(' ').filter(|s| !s.is_empty()).collect::<Vec<_>>()) {
            None => own,
            Some(asked) if asked.is_empty() => own,
            Some(asked) => {
                if let Some(beyond) = asked.iter().find(|s| !own.iter().any(|o| o == *s)) {
                    return Err(TokenError::InvalidScope(format!("unable to issue scope {beyond}")));
                }
                let mut scopes: Vec<String> = Vec::new();
                for s in asked {
                    if !scopes.iter().any(|k| k == s) {
                        scopes.push(s.to_owned());
                    }
                }
                scopes
            }
        };
        let now = self.clock.now();
        let grant = OAuthGrantRecord {
            id: grants::new_grant_id(),
            client_id: client.client_id.clone(),
            user_id: None,
            session_id: None,
            scopes: scopes.clone(),
            auth_time_ms: now.as_millis(),
            refresh_hash: None,
            retired: Vec::new(),
            created_at_ms: now.as_millis(),
            updated_at_ms: now.as_millis(),
            expires_at_ms: 0,
            organization: None,
        };
        let tokens = self.issue(&client, &grant, &scopes, None, issuer).await?;
        let access_ends = crate::domain::Timestamp::from_millis(tokens.expires_at * 1000);
        self.grants.make(grant, false, access_ends, "client_credentials", &req.ip).await.map_err(Unavailable::from)?;
        Ok(tokens)
    }

    /// The grant of an access token this provider signed, if the token is valid and its grant, user and (without
    /// `offline_access`) session are live: what introspection and revocation accept. Answers the grant and the
    /// token's claims, borrowed from `payload` (where the token's payload is decoded).
    async fn access_grant<'p>(
        &self,
        token: &str,
        issuer: &str,
        payload: &'p mut Vec<u8>,
    ) -> Result<Option<(Arc<OAuthGrantRecord>, AccessRead<'p>)>, Unavailable> {
        let Some(claims) = self.keys.access_claims(token, payload).await else { return Ok(None) };
        let now = self.clock.now();
        if claims.exp <= now.as_millis() / 1000 || claims.iss != issuer {
            return Ok(None);
        }
        let Some(id) = grants::jti_grant(&claims.jti) else { return Ok(None) };
        let Some(grant) = self.grants.live(id, now).await? else { return Ok(None) };
        if !self.grant_holds(&grant) {
            return Ok(None);
        }
        Ok(Some((grant, claims)))
    }

    /// Whether `grant`'s user (if any) is there and not banned, and, without `offline_access`, its session live.
    fn grant_holds(&self, grant: &OAuthGrantRecord) -> bool {
        let Some(user) = grant.user_id.map(UserId::from_bytes) else { return true };
        let now = self.clock.now();
        if self.indexes.users.get(user).is_none_or(|u| u.is_banned_at(now)) {
            return false;
        }
        grant.scopes.iter().any(|s| s == "offline_access")
            || grant.session_id.is_some_and(|s| self.live_session(user, SessionId::from_bytes(s)).is_some())
    }

    /// `POST /oauth2/introspect` (RFC 7662) by a confidential client: what `token` (an access token or a refresh
    /// token of this client's) is, answered from memory. Anything else, another client's token included, is
    /// `{active: false}`. With `profile` among the token's scopes, the answer carries the organization claims as
    /// userinfo does (the membership now, not as the token was signed: a removal shows at once). `payload`: where an
    /// access token's payload is decoded, which the answer borrows its claims from.
    pub async fn introspect<'p>(
        &self,
        req: &TokenRequest,
        token: &str,
        hint: Option<&str>,
        issuer: &str,
        payload: &'p mut Vec<u8>,
    ) -> Result<Introspection<'p>, TokenError> {
        let client = self.token_client(req).await?;
        if client.auth_method == AuthMethod::None {
            return Err(TokenError::InvalidClient {
                description: "missing required credentials".into(),
                basic: req.basic.is_some(),
            });
        }
        let inactive = Introspection::default();
        // A refresh token is tried first only when the client says it is one (RFC 7662 §2.1's hint).
        if hint == Some("refresh_token")
            && let Some(answer) = self.refresh_introspection(token, &client.client_id, issuer).await?
        {
            return Ok(answer);
        }
        if let Some((grant, claims)) = self.access_grant(token, issuer, payload).await? {
            if grant.client_id != client.client_id {
                return Ok(inactive);
            }
            let org = self.org_claims(&grant, claims.scope.as_deref().unwrap_or("").split(' '));
            return Ok(Introspection {
                active: true,
                iss: Some(claims.iss),
                client_id: claims.client_id,
                azp: claims.azp,
                sub: claims.sub,
                sid: claims.sid,
                exp: Some(claims.exp),
                iat: claims.iat,
                scope: claims.scope,
                token_type: Some("Bearer"),
                org,
            });
        }
        if hint != Some("refresh_token")
            && let Some(answer) = self.refresh_introspection(token, &client.client_id, issuer).await?
        {
            return Ok(answer);
        }
        Ok(inactive)
    }

    /// What introspection says of `token` as a refresh token in force of `client_id`'s, if it is one.
    async fn refresh_introspection(
        &self,
        token: &str,
        client_id: &str,
        issuer: &str,
    ) -> Result<Option<Introspection<'static>>, Unavailable> {
        let now = self.clock.now();
        let Some(grant) = self.grants.by_refresh_token(token, now).await? else { return Ok(None) };
        if grant.client_id != client_id || !self.grant_holds(&grant) {
            return Ok(None);
        }
        Ok(Some(Introspection {
            active: true,
            iss: Some(issuer.to_owned().into()),
            client_id: Some(grant.client_id.clone().into()),
            azp: None,
            sub: grant.user_id.map(|u| UserId::from_bytes(u).to_string().into()),
            sid: grant.session_id.map(|s| SessionId::from_bytes(s).to_string().into()),
            exp: Some(grant.expires_at_ms / 1000),
            iat: Some(grant.updated_at_ms / 1000),
            scope: Some(grant.scopes.join(" ").into()),
            token_type: None,
            org: self.org_claims(&grant, &grant.scopes),
        }))
    }

    /// `POST /oauth2/revoke` (RFC 7009): ends the grant of `token` (an access token or any refresh token of it),
    /// with every token it issued, if it is the calling client's. Anything else changes nothing and is answered
    /// the same (§2.2: an unknown token is no error).
    pub async fn revoke(&self, req: &TokenRequest, token: &str, issuer: &str) -> Result<(), TokenError> {
        let client = self.token_client(req).await?;
        let now = self.clock.now();
        let grant = match self.grants.by_any_refresh_token(token, now).await.map_err(Unavailable::from)? {
            Some(grant) => Some(grant),
            None => self.access_grant(token, issuer, &mut Vec::new()).await?.map(|(grant, _)| grant),
        };
        if let Some(grant) = grant.filter(|g| g.client_id == client.client_id) {
            self.grants.revoke(&grant, &req.ip).await.map_err(Unavailable::from)?;
        }
        Ok(())
    }

    /// `GET|POST /oauth2/end-session`: checks the request in full, then ends the session an ID token this
    /// provider signed for a client registered with `enable_end_session` names (its `sid`, with `sub`) and sends
    /// the browser to the client's registered `post_logout_redirect_uri` if it asks for one. The hint may have
    /// expired (a logout often comes later than ten hours), but its signature must verify against a key still
    /// published. Everything is checked before anything ends: an unregistered redirect is refused, not ignored.
    ///
    /// `browser`: the hash of the caller's session cookie, if any. Without a hint, or with one whose session is
    /// not the browser's (the person signed in again since), nothing here says the person wants this browser
    /// signed out: the answer is [`EndSession::Confirm`], the page that asks them ([`Self::confirm_end_session`]).
    /// Without a hint and without a session there is nothing to end.
    pub async fn end_session(
        &self,
        req: &EndSessionRequest,
        issuer: &str,
        browser: Option<TokenHash>,
    ) -> Result<EndSession, EndSessionError> {
        let checked = self.check_end_session(req, issuer).await?;
        let now = Timestamp::now();
        let browser = browser.and_then(|hash| self.indexes.sessions.get(&hash)).filter(|s| !s.is_expired(now));
        // The browser's session, when it is not the one the hint names.
        let another = browser.filter(|b| checked.hinted.is_none_or(|(_, session)| b.id != session));
        match (checked.hinted, another) {
            (Some((user, session)), None) => {
                // A session already ended (or another's) ends nothing more; the answer is the same.
                let hash = self.sessions_of(user).into_iter().find(|(_, s)| s.id == session).map(|(h, _)| h);
                if let Some(hash) = hash {
                    self.actors.sessions.end(hash).await?;
                }
                Ok(EndSession::Ended(SessionEnded { ended: hash, redirect: checked.redirect }))
            }
            (_, Some(_)) => Ok(EndSession::Confirm),
            (None, None) => Ok(EndSession::NothingToEnd { redirect: checked.redirect }),
        }
    }

    /// The logout confirmation page's answer (the person chose to sign out): the request it carries is checked
    /// again in full, as at `end-session`, then the browser's own session (`browser`) ends. Only that one: the
    /// hint's session, when another, was not the person's to confirm here.
    pub async fn confirm_end_session(
        &self,
        req: &EndSessionRequest,
        issuer: &str,
        browser: TokenHash,
    ) -> Result<SessionEnded, EndSessionError> {
        let checked = self.check_end_session(req, issuer).await?;
        self.actors.sessions.end(browser).await?;
        Ok(SessionEnded { ended: Some(browser), redirect: checked.redirect })
    }

    /// What both steps of a logout check before anything ends: the hint (a verified ID token of this issuer's
    /// for an enabled client allowed to end sessions, the audience `client_id` names if given); without a hint,
    /// the `client_id` given, by the same rules; and the `post_logout_redirect_uri`, registered byte for byte for
    /// that client (none without a client: a redirect nobody registered is never followed).
    async fn check_end_session(&self, req: &EndSessionRequest, issuer: &str) -> Result<CheckedLogout, EndSessionError> {
        let invalid = |why: &str| EndSessionError::InvalidRequest(why.into());
        if let Some(name) = &req.repeated {
            return Err(invalid(&format!("{name} is given more than once")));
        }
        let (hinted, client_id) = match req.id_token_hint.as_deref() {
            Some(hint) => {
                let (typ, claims) =
                    self.keys.verify_fresh(hint).await.ok_or_else(|| invalid("invalid id_token_hint"))?;
                let text = |name: &str| claims.get(name).and_then(serde_json::Value::as_str);
                if typ.is_some() || text("iss") != Some(issuer) {
                    return Err(invalid("invalid id_token_hint"));
                }
                let audience = text("aud").ok_or_else(|| invalid("invalid id_token_hint"))?;
                if req.client_id.as_deref().is_some_and(|id| id != audience) {
                    return Err(invalid("client_id is not the id_token_hint's audience"));
                }
                let user = text("sub").and_then(UserId::parse);
                let session = text("sid").and_then(SessionId::parse);
                (Some((user, session)), Some(audience.to_owned()))
            }
            None => (None, req.client_id.clone()),
        };
        let client = match client_id.as_deref() {
            None => None,
            Some(id) => match self.clients.get(id).await {
                Ok(client) if !client.disabled => Some(client),
                Ok(_) | Err(ClientError::NotFound) => {
                    return Err(EndSessionError::InvalidClient("invalid client".into()));
                }
                Err(_) => return Err(Unavailable.into()),
            },
        };
        if client.as_ref().is_some_and(|c| !c.end_session) {
            return Err(EndSessionError::InvalidClient("The client is not allowed to initiate logout".into()));
        }
        let redirect = match (req.post_logout_redirect_uri.as_deref(), &client) {
            (None, _) => None,
            (Some(uri), Some(client)) if client.post_logout_redirect_uris.iter().any(|r| r == uri) => {
                let state = req.state.as_deref().map(|s| ("state", s));
                Some(with_query(uri, &state.into_iter().collect::<Vec<_>>()))
            }
            (Some(_), Some(_)) => return Err(invalid("post_logout_redirect_uri is not registered for the client")),
            (Some(_), None) => {
                return Err(invalid(
                    "post_logout_redirect_uri needs the client_id or the id_token_hint it is registered for",
                ));
            }
        };
        let hinted = match hinted {
            None => None,
            Some((Some(user), Some(session))) => Some((user, session)),
            Some(_) => return Err(invalid("invalid id_token_hint")),
        };
        Ok(CheckedLogout { hinted, redirect })
    }

    /// The claims of `grant`'s organization for a token of `scopes`: only with [`ORG_CLAIMS_SCOPE`], and only while
    /// the user is still a member of it, with the roles they hold now (a refresh after a role change carries the
    /// new roles; after a removal, or the organization's deletion, none).
    fn org_claims(
        &self,
        grant: &OAuthGrantRecord,
        scopes: impl IntoIterator<Item = impl AsRef<str>>,
    ) -> Option<OrgClaims> {
        let (org, user) = (OrgId::from_bytes(grant.organization?), UserId::from_bytes(grant.user_id?));
        if !scopes.into_iter().any(|s| s.as_ref() == ORG_CLAIMS_SCOPE) {
            return None;
        }
        let member = self.indexes.members.get(org, user)?;
        let organization = self.indexes.orgs.get(org)?;
        Some(OrgClaims {
            org_id: org.to_string(),
            org_slug: organization.slug.as_str().to_owned(),
            org_roles: member.roles.names().into_iter().map(str::to_owned).collect(),
        })
    }

    /// Signs an access token for `grant` with `scopes` (and an ID token when they hold `openid`).
    pub(super) async fn issue(
        &self,
        client: &Client,
        grant: &OAuthGrantRecord,
        scopes: &[String],
        nonce: Option<&str>,
        issuer: &str,
    ) -> Result<Tokens, TokenError> {
        self.keys.ensure().await.map_err(|_| Unavailable)?;
        let now = self.clock.now();
        let mut access = grants::AccessClaims::new(issuer, &client.client_id, grant, scopes, now);
        access.org = self.org_claims(grant, scopes);
        let access_token = self.keys.sign_access(Alg::EdDsa, &mut access).ok_or(Unavailable)?;
        let (sub, sid, scope, iat, exp, org) =
            (access.sub, access.sid.unwrap_or_default(), access.scope, access.iat, access.exp, access.org);
        let id_token = if grant.user_id.is_some() && scopes.iter().any(|s| s == "openid") {
            let alg = client.id_token_alg;
            let hash = at_hash(alg, &access_token);
            let claims = IdClaims {
                iss: issuer,
                sub: &sub,
                aud: &client.client_id,
                iat,
                exp: iat + ID_TOKEN_LIFETIME.as_secs() as i64,
                auth_time: grant.auth_time_ms / 1000,
                acr: "0",
                at_hash: &hash,
                nonce,
                // The plugin names the session only to clients that may end it or hear of its end.
                sid: ((client.end_session || client.backchannel_logout_uri.is_some()) && !sid.is_empty())
                    .then_some(sid.as_str()),
                org: org.as_ref(),
            };
            Some(self.keys.sign(alg, None, &claims).ok_or(Unavailable)?)
        } else {
            None
        };
        Ok(Tokens {
            access_token,
            expires_in: ACCESS_TOKEN_LIFETIME.as_secs(),
            expires_at: exp,
            token_type: "Bearer",
            refresh_token: None,
            scope,
            id_token,
        })
    }

    /// The authorization code grant (RFC 6749 §4.1.3).
    async fn code_grant(&self, req: &TokenRequest, issuer: &str) -> Result<Tokens, TokenError> {
        let client = self.token_client(req).await?;
        if !client.grant_types.contains(&"authorization_code") {
            return Err(TokenError::UnauthorizedClient("the client may not use the authorization code grant".into()));
        }
        let code = req.code.as_deref().ok_or_else(|| TokenError::InvalidRequest("code is required".into()))?;
        let redirect_uri =
            req.redirect_uri.as_deref().ok_or_else(|| TokenError::InvalidRequest("redirect_uri is required".into()))?;
        // Taken before anything else is compared: a code presented once, by anyone, is spent.
        let record = match self.grants.take_code(code).await {
            Ok(record) => record,
            Err(GrantError::InvalidCode) => {
                // Presented again after its redemption: what that redemption issued ends too.
                self.grants.end_replayed(code, &req.ip).await.map_err(Unavailable::from)?;
                return Err(TokenError::InvalidGrant("invalid code".into()));
            }
            Err(GrantError::Store(_)) => return Err(Unavailable.into()),
        };
        if record.client_id != client.client_id {
            return Err(TokenError::InvalidGrant("invalid client_id".into()));
        }
        if record.redirect_uri != redirect_uri {
            return Err(TokenError::InvalidGrant("redirect_uri mismatch".into()));
        }
        match (&record.code_challenge, req.code_verifier.as_deref()) {
            (None, None) => {}
            (Some(_), None) => return Err(TokenError::InvalidRequest("code_verifier is required".into())),
            (None, Some(_)) => {
                return Err(TokenError::InvalidRequest("code_verifier given for a code issued without PKCE".into()));
            }
            (Some(challenge), Some(verifier)) => {
                if !valid_verifier(verifier) {
                    return Err(TokenError::InvalidRequest("code_verifier is malformed".into()));
                }
                let computed = B64.encode(Sha256::digest(verifier.as_bytes()));
                if !bool::from(computed.as_bytes().ct_eq(challenge.as_bytes())) {
                    return Err(TokenError::InvalidGrant("code verification failed".into()));
                }
            }
        }
        let user_id = UserId::from_bytes(record.user_id);
        let session_id = SessionId::from_bytes(record.session_id);
        let now = self.clock.now();
        let user = self
            .indexes
            .users
            .get(user_id)
            .filter(|u| !u.is_banned_at(now))
            .ok_or_else(|| TokenError::InvalidGrant("the user no longer exists or is banned".into()))?;
        let session = self
            .live_session(user_id, session_id)
            .ok_or_else(|| TokenError::InvalidRequest("session no longer exists".into()))?;
        let organization = session.active_organization().map(OrgId::to_bytes);
        if self.must_enrol(&Current { session, user, by_key: false }).await {
            return Err(TokenError::InvalidGrant("the account must enrol a second factor first".into()));
        }
        let offline = record.scopes.iter().any(|s| s == "offline_access");
        let grant = OAuthGrantRecord {
            // Named by the code, so that the code presented again finds the grant to end.
            id: grants::code_grant_id(code),
            client_id: client.client_id.clone(),
            user_id: Some(record.user_id),
            session_id: Some(record.session_id),
            scopes: record.scopes.clone(),
            auth_time_ms: record.auth_time_ms,
            refresh_hash: None,
            retired: Vec::new(),
            created_at_ms: now.as_millis(),
            updated_at_ms: now.as_millis(),
            expires_at_ms: 0,
            organization,
        };
        let mut tokens = self.issue(&client, &grant, &record.scopes, record.nonce.as_deref(), issuer).await?;
        // Made once the tokens are signed (nothing is stored for a request that fails), and before they are
        // answered: a token is never valid for a grant that is not durable.
        let access_ends = crate::domain::Timestamp::from_millis(tokens.expires_at * 1000);
        tokens.refresh_token = self
            .grants
            .make(grant, offline, access_ends, "authorization_code", &req.ip)
            .await
            .map_err(Unavailable::from)?;
        Ok(tokens)
    }

    /// `GET|POST /oauth2/userinfo`: the claims of the token's scopes, for a token this provider signed that has
    /// not expired, whose session is still live and whose user is not banned (a sign-out or a ban ends it at once,
    /// though the JWT itself would still verify until it expires).
    pub async fn userinfo(&self, token: &str, issuer: &str) -> Result<UserInfo, UserInfoError> {
        let invalid = |why: &str| UserInfoError::InvalidToken(why.into());
        let mut payload = Vec::new();
        let claims =
            self.keys.access_claims(token, &mut payload).await.ok_or_else(|| invalid("invalid access token"))?;
        let now = self.clock.now().as_millis() / 1000;
        if claims.exp <= now {
            return Err(invalid("the access token has expired"));
        }
        if claims.iss != issuer {
            return Err(invalid("the access token is another issuer's"));
        }
        // Before the user: a client's own token (client credentials) has no openid, and no user either.
        let scopes: Vec<&str> = claims.scope.as_deref().unwrap_or("").split(' ').collect();
        if !scopes.contains(&"openid") {
            return Err(UserInfoError::InsufficientScope);
        }
        let user_id =
            claims.sub.as_deref().and_then(UserId::parse).ok_or_else(|| invalid("the access token names no user"))?;
        let session_id = claims
            .sid
            .as_deref()
            .and_then(SessionId::parse)
            .ok_or_else(|| invalid("the access token names no session"))?;
        // Its grant, from memory: revoked, or ended with a reused refresh token, a ban, a reset, "sign out
        // everywhere", the token is no longer valid, though the JWT would verify until it expires.
        let grant_id = grants::jti_grant(&claims.jti).ok_or_else(|| invalid("the grant has ended"))?;
        let grant = self
            .grants
            .live(grant_id, self.clock.now())
            .await
            .map_err(Unavailable::from)?
            .ok_or_else(|| invalid("the grant has ended"))?;
        let user = self
            .indexes
            .users
            .get(user_id)
            .filter(|u| !u.is_banned_at(self.clock.now()))
            .ok_or_else(|| invalid("the user no longer exists or is banned"))?;
        // `offline_access` is what outlives the session that granted it.
        if !grant.scopes.iter().any(|s| s == "offline_access") && self.live_session(user_id, session_id).is_none() {
            return Err(invalid("the session has ended"));
        }
        let mut info = UserInfo {
            sub: user_id.to_string(),
            name: None,
            picture: None,
            given_name: None,
            family_name: None,
            email: None,
            email_verified: None,
            org: self.org_claims(&grant, &scopes),
        };
        if scopes.contains(&"profile") {
            let name = user.name().to_owned();
            if let Some((given, family)) = name.rsplit_once(' ') {
                info.given_name = Some(given.to_owned());
                info.family_name = Some(family.to_owned());
            }
            info.name = Some(name);
            info.picture = user.image().map(str::to_owned);
        }
        if scopes.contains(&"email") {
            info.email = Some(user.email().to_owned());
            info.email_verified = Some(user.email_verified);
        }
        Ok(info)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_hash_is_the_left_half_of_the_algorithms_hash() {
        assert_eq!(B64.decode(at_hash(Alg::Rs256, "t")).unwrap().len(), 16);
        assert_eq!(B64.decode(at_hash(Alg::EdDsa, "t")).unwrap().len(), 32);
    }

    #[test]
    fn verifiers_follow_rfc_7636() {
        assert!(valid_verifier(&"a".repeat(43)));
        assert!(!valid_verifier(&"a".repeat(42)));
        assert!(!valid_verifier(&"a".repeat(129)));
        assert!(!valid_verifier(&format!("{}+", "a".repeat(43))));
    }
}
