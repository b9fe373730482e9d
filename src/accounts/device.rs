//! The device authorization grant (RFC 8628, issue #46) for command-line tools and TVs: the device's request
//! (`/oauth2/device_authorization`), the `/device` page's two calls (which request a user code names; the user's
//! decision), and the token endpoint's polls (`grant_type=urn:ietf:params:oauth:grant-type:device_code`).
//!
//! The rules are the code flow's where they apply (src/accounts/idp.rs): the client authenticates as at the token
//! endpoint, asks only for scopes it was registered with, and must be registered for the grant (a public client
//! too, so that a public client of the code flow cannot start device requests by surprise); the page needs a live
//! session of an account that is not banned and has enrolled what its role requires, and an impersonation may not
//! approve. The approval is remembered as a consent, audited, in the same commit; the tokens are issued as the
//! code flow issues them, once.

use serde::Serialize;

use super::idp::{TokenError, TokenRequest, Tokens};
use super::{Accounts, Current, Unavailable};
use crate::domain::{SessionId, UserId, action};
use crate::provider::USER_SCOPES;
use crate::provider::devices::{DevicePoll, UserCode};
use crate::provider::grants;
use crate::store::{DeviceDecisionV1, OAuthGrantRecord};

/// The device authorization endpoint's answer (RFC 8628 §3.2, the plugin's field order).
#[derive(Debug, Clone, Serialize)]
pub struct DeviceAuthorization {
    pub device_code: String,
    pub user_code: String,
    pub verification_uri: String,
    pub verification_uri_complete: String,
    pub expires_in: u64,
    pub interval: u32,
}

/// A pending request as the `/device` page shows it before the user decides.
#[derive(Debug, Clone)]
pub struct DeviceRequest {
    pub user_code: String,
    pub client_id: String,
    pub client_name: String,
    pub scopes: Vec<String>,
}

/// Why the page's call is refused.
#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    /// Malformed, unknown, expired, decided already, or its client gone: one answer for all, which says nothing of
    /// other people's codes.
    #[error("the code is not valid: check it, or start again on the device")]
    InvalidCode,
    /// The account must enrol a second factor before it may sign in to applications.
    #[error("a second factor must be enrolled first")]
    MustEnrol,
    #[error("an administrator impersonating a user cannot sign in to applications as them")]
    Impersonation,
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
}

impl Accounts {
    /// `POST /oauth2/device_authorization`: a new request of the calling client for `req.scope` (the client's user
    /// scopes when none are named). `site` is the server's own origin, where the `/device` page is.
    pub async fn device_authorization(
        &self,
        req: &TokenRequest,
        site: &str,
    ) -> Result<DeviceAuthorization, TokenError> {
        if let Some(name) = &req.repeated {
            return Err(TokenError::InvalidRequest(format!("{name} is given more than once")));
        }
        let client = self.token_client(req).await?;
        if !client.grant_types.contains(&crate::provider::clients::DEVICE_GRANT) {
            return Err(TokenError::UnauthorizedClient("the client may not use the device authorization grant".into()));
        }
        let scopes: Vec<String> = match req.scope.as_deref().filter(|s| !s.trim().is_empty()) {
            None => client.scopes.iter().filter(|s| USER_SCOPES.contains(&s.as_str())).cloned().collect(),
            Some(scope) => {
                let mut scopes: Vec<String> = Vec::new();
                for s in scope.split(' ').filter(|s| !s.is_empty()) {
                    if !client.scopes.iter().any(|c| c == s) {
                        return Err(TokenError::InvalidScope(format!("The following scopes are invalid: {s}")));
                    }
                    if !scopes.iter().any(|k| k == s) {
                        scopes.push(s.to_owned());
                    }
                }
                scopes
            }
        };
        if scopes.is_empty() {
            return Err(TokenError::InvalidScope("no scope requested".into()));
        }
        let now = self.clock.now();
        let started = self.grants.start_device(&client.client_id, scopes, now).await.map_err(Unavailable::from)?;
        let user_code = started.user_code.shown();
        let verification_uri = format!("{site}/device");
        let verification_uri_complete = format!("{verification_uri}?user_code={user_code}");
        Ok(DeviceAuthorization {
            device_code: started.device_code,
            user_code,
            verification_uri,
            verification_uri_complete,
            expires_in: crate::provider::devices::DEVICE_LIFETIME.as_secs(),
            interval: started.record.interval_secs,
        })
    }

    /// Who may answer a device request on the page: the same as who may authorize a client in the code flow.
    async fn may_approve(&self, current: &Current) -> Result<(), DeviceError> {
        if current.is_impersonation() {
            return Err(DeviceError::Impersonation);
        }
        if self.must_enrol(current).await {
            return Err(DeviceError::MustEnrol);
        }
        Ok(())
    }

    /// The `/device` page's first call: which pending request `typed` (a user code as a person typed it) names.
    pub async fn device_request(&self, current: &Current, typed: &str) -> Result<DeviceRequest, DeviceError> {
        self.may_approve(current).await?;
        let code = UserCode::parse(typed).ok_or(DeviceError::InvalidCode)?;
        let now = self.clock.now();
        let (_, record) =
            self.grants.pending_device(&code, now).await.map_err(Unavailable::from)?.ok_or(DeviceError::InvalidCode)?;
        let client = match self.clients.get(&record.client_id).await {
            Ok(client) if !client.disabled => client,
            Ok(_) | Err(crate::provider::ClientError::NotFound) => return Err(DeviceError::InvalidCode),
            Err(_) => return Err(Unavailable.into()),
        };
        Ok(DeviceRequest {
            user_code: code.shown(),
            client_id: client.client_id,
            client_name: client.name,
            scopes: record.scopes,
        })
    }

    /// The page's answer: `approve`, or deny, the pending request `typed` names, as `current`. An approval is
    /// remembered as `current`'s consent to the client for the request's scopes and audited
    /// (`oauth_device.approved`), in the commit that records it; a denial stores nothing else.
    pub async fn decide_device(&self, current: &Current, typed: &str, approve: bool) -> Result<(), DeviceError> {
        self.may_approve(current).await?;
        let code = UserCode::parse(typed).ok_or(DeviceError::InvalidCode)?;
        let now = self.clock.now();
        let (hash, record) =
            self.grants.pending_device(&code, now).await.map_err(Unavailable::from)?.ok_or(DeviceError::InvalidCode)?;
        let client = match self.clients.get(&record.client_id).await {
            Ok(client) if !client.disabled => client,
            Ok(_) | Err(crate::provider::ClientError::NotFound) => return Err(DeviceError::InvalidCode),
            Err(_) => return Err(Unavailable.into()),
        };
        let (decision, ops) = if approve {
            let target = (client.id, client.client_id.as_str());
            let ip = &current.session.ip_address;
            let ops = self
                .grants
                .consent_ops(current.user.id, target, &record.scopes, action::OAUTH_DEVICE_APPROVED, ip)
                .await
                .map_err(Unavailable::from)?;
            let decision = DeviceDecisionV1::Approved {
                user_id: current.user.id.to_bytes(),
                session_id: current.session.id.to_bytes(),
                auth_time_ms: current.session.created_at.as_millis(),
            };
            (decision, ops)
        } else {
            (DeviceDecisionV1::Denied, Vec::new())
        };
        let decided = self
            .grants
            .decide_device((hash, record.user_code_hash), decision, ops, now)
            .await
            .map_err(Unavailable::from)?;
        if decided { Ok(()) } else { Err(DeviceError::InvalidCode) }
    }

    /// The device authorization grant (RFC 8628 §3.4): one poll. Approved, the tokens are issued as the code flow
    /// issues them (an ID token with `openid`, a refresh token with `offline_access`), once.
    pub(super) async fn device_grant(&self, req: &TokenRequest, issuer: &str) -> Result<Tokens, TokenError> {
        let client = self.token_client(req).await?;
        if !client.grant_types.contains(&crate::provider::clients::DEVICE_GRANT) {
            return Err(TokenError::UnauthorizedClient("the client may not use the device authorization grant".into()));
        }
        let device_code =
            req.device_code.as_deref().ok_or_else(|| TokenError::InvalidRequest("device_code is required".into()))?;
        let now = self.clock.now();
        let record = match self.grants.poll_device(device_code, &client.client_id, now).await {
            Ok(DevicePoll::Approved(record)) => record,
            Ok(DevicePoll::Unknown | DevicePoll::OtherClient) => {
                return Err(TokenError::InvalidGrant("invalid device code".into()));
            }
            Ok(DevicePoll::Expired) => return Err(TokenError::ExpiredToken),
            Ok(DevicePoll::Pending) => return Err(TokenError::AuthorizationPending),
            Ok(DevicePoll::SlowDown) => return Err(TokenError::SlowDown),
            Ok(DevicePoll::Denied) => return Err(TokenError::AccessDenied),
            Err(_) => return Err(Unavailable.into()),
        };
        let DeviceDecisionV1::Approved { user_id, session_id, auth_time_ms } = record.decision else {
            return Err(TokenError::InvalidGrant("invalid device code".into()));
        };
        // What held at the approval must still hold: the user not banned since, the approving session live, the
        // second factor enrolled if the role wants one (as at the code flow's token request).
        let user = self
            .indexes
            .users
            .get(UserId::from_bytes(user_id))
            .filter(|u| !u.is_banned_at(now))
            .ok_or_else(|| TokenError::InvalidGrant("the user no longer exists or is banned".into()))?;
        let session = self
            .live_session(UserId::from_bytes(user_id), SessionId::from_bytes(session_id))
            .ok_or_else(|| TokenError::InvalidGrant("the session that approved the request has ended".into()))?;
        let organization = session.active_organization().map(crate::domain::OrgId::to_bytes);
        if self.must_enrol(&Current { session, user, by_key: false }).await {
            return Err(TokenError::InvalidGrant("the account must enrol a second factor first".into()));
        }
        let offline = record.scopes.iter().any(|s| s == "offline_access");
        let grant = OAuthGrantRecord {
            id: grants::new_grant_id(),
            client_id: client.client_id.clone(),
            user_id: Some(user_id),
            session_id: Some(session_id),
            scopes: record.scopes.clone(),
            auth_time_ms,
            refresh_hash: None,
            retired: Vec::new(),
            created_at_ms: now.as_millis(),
            updated_at_ms: now.as_millis(),
            expires_at_ms: 0,
            organization,
        };
        let mut tokens = self.issue(&client, &grant, &record.scopes, None, issuer).await?;
        let access_ends = crate::domain::Timestamp::from_millis(tokens.expires_at * 1000);
        tokens.refresh_token =
            self.grants.make(grant, offline, access_ends, "device_code", &req.ip).await.map_err(Unavailable::from)?;
        Ok(tokens)
    }
}
