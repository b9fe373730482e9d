//! The identity provider's keys, for the JWKS, the discovery document and administrators: the facade's
//! pass-throughs to [`crate::provider::KeyRing`].

use std::sync::Arc;
use std::time::Duration;

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::Accounts;
use crate::config::Registration;
use crate::domain::UserId;
pub use crate::provider::{
    Alg, AuthMethod, Client as OAuthClient, ClientChange, ClientError, Jwk, Key, KeyError, KeyStatus, NewClient,
};

impl Accounts {
    /// The published keys, as the store holds them now (another node's rotation of a moment ago included); the
    /// first keys are made here when none exist yet (the jwt plugin's first use).
    pub async fn jwks(&self) -> Result<Vec<Jwk>, KeyError> {
        self.keys.refresh().await?;
        self.keys.ensure().await?;
        Ok(self.keys.jwks())
    }

    /// The algorithms ID tokens may be signed with, the default (EdDSA, as the plugin signs) first.
    pub fn signing_algs(&self) -> Vec<&'static str> {
        Alg::ALL.iter().map(|alg| alg.name()).collect()
    }

    /// Every key held, for administrators (none made by asking), as the store has them now.
    pub async fn signing_keys(&self) -> Result<Vec<Arc<Key>>, KeyError> {
        self.keys.refresh().await?;
        Ok(self.keys.keys())
    }

    /// Rotates the keys of `algs`: the new ones are published now and sign `lead` from now. Audited.
    pub async fn rotate_signing_keys(
        &self,
        algs: &[Alg],
        lead: Duration,
        by: UserId,
        ip: &str,
    ) -> Result<Vec<Arc<Key>>, KeyError> {
        self.keys.rotate(algs, lead, by, ip).await
    }

    /// Housekeeping: reads the keys other nodes made, and deletes those whose tokens have all expired.
    pub async fn refresh_signing_keys(&self) -> Result<(), KeyError> {
        self.keys.refresh().await
    }

    /// Housekeeping: deletes the authorization codes, grants and sign-in flows past their end; how many.
    pub async fn prune_expired_grants(&self) -> Result<usize, crate::provider::grants::GrantError> {
        self.grants.prune_expired().await
    }

    /// Every client of the identity provider, oldest first.
    pub async fn oauth_clients(&self) -> Result<Vec<OAuthClient>, ClientError> {
        self.clients.list().await
    }

    pub async fn oauth_client(&self, client_id: &str) -> Result<OAuthClient, ClientError> {
        self.clients.get(client_id).await
    }

    /// Registers a client; its secret (confidential clients) is in this answer only. Audited.
    pub async fn create_oauth_client(
        &self,
        new: NewClient,
        by: UserId,
        ip: &str,
    ) -> Result<(OAuthClient, Option<String>), ClientError> {
        self.clients.create(new, Some(by), ip).await
    }

    pub async fn update_oauth_client(
        &self,
        client_id: &str,
        change: ClientChange,
        by: UserId,
        ip: &str,
    ) -> Result<(OAuthClient, Option<String>), ClientError> {
        self.clients.update(client_id, change, by, ip).await
    }

    pub async fn delete_oauth_client(&self, client_id: &str, by: UserId, ip: &str) -> Result<(), ClientError> {
        self.clients.delete(client_id, by, ip).await
    }

    /// Whether `/oauth2/register` is served (the discovery document names it only then).
    pub fn registration_open(&self) -> bool {
        self.registration.registration != Registration::Off
    }

    /// Dynamic client registration (RFC 7591), as `[provider] registration` allows it: the client's standard
    /// scopes only, no client credentials, no first-party or end-session rights (those are an administrator's to
    /// give, with the admin API). Audited like an administrator's registration, noting how it came.
    pub async fn register_client(
        &self,
        who: Registrant<'_>,
        new: NewClient,
        ip: &str,
    ) -> Result<(OAuthClient, Option<String>), RegistrationError> {
        let by = match (self.registration.registration, who) {
            (Registration::Off, _) => return Err(RegistrationError::Disabled),
            (_, Registrant::Administrator(id)) => Some(id),
            (_, Registrant::SignedIn) => return Err(RegistrationError::Forbidden),
            (Registration::Token, Registrant::Token(token)) => {
                let expected = self.registration.registration_token_hash().ok_or(RegistrationError::Unauthenticated)?;
                let presented: [u8; 32] = Sha256::digest(token.as_bytes()).into();
                if !bool::from(presented.ct_eq(&expected)) {
                    return Err(RegistrationError::Unauthenticated);
                }
                None
            }
            (_, Registrant::Token(_) | Registrant::Nobody) => return Err(RegistrationError::Unauthenticated),
        };
        if let Some(scopes) = &new.scopes
            && let Some(other) = scopes.iter().find(|s| !crate::provider::USER_SCOPES.contains(&s.as_str()))
        {
            return Err(RegistrationError::InvalidScope(format!("cannot request scope {other}")));
        }
        if new.grant_types.as_ref().is_some_and(|g| g.iter().any(|g| g == "client_credentials")) {
            return Err(RegistrationError::InvalidMetadata(
                "unsupported grant_type client_credentials: a service's client is registered by an administrator"
                    .into(),
            ));
        }
        let new = NewClient { skip_consent: false, enable_end_session: false, ..new };
        let note = if by.is_some() { "dynamic registration" } else { "dynamic registration, initial access token" };
        self.clients.create_noted(new, by, ip, Some(note)).await.map_err(|e| match e {
            ClientError::InvalidRedirectUri(m) => RegistrationError::InvalidRedirectUri(m),
            ClientError::Invalid(m) => RegistrationError::InvalidMetadata(m),
            ClientError::NotFound | ClientError::Store(_) => RegistrationError::Unavailable,
        })
    }
}

/// Who asks to register a client at `/oauth2/register`.
#[derive(Debug, Clone, Copy)]
pub enum Registrant<'a> {
    /// An administrator's own session.
    Administrator(UserId),
    /// A session that is not an administrator's.
    SignedIn,
    /// `Authorization: Bearer <token>`, no session.
    Token(&'a str),
    Nobody,
}

/// Why a registration is refused (RFC 7591 §3.2.2's codes, as the plugin answers them).
#[derive(Debug, thiserror::Error)]
pub enum RegistrationError {
    #[error("Client registration is disabled")]
    Disabled,
    /// No session and no (right) initial access token.
    #[error("Authentication required for client registration")]
    Unauthenticated,
    #[error("an administrator's session is required to register a client")]
    Forbidden,
    #[error("{0}")]
    InvalidRedirectUri(String),
    #[error("{0}")]
    InvalidMetadata(String),
    #[error("{0}")]
    InvalidScope(String),
    #[error("the store is unavailable")]
    Unavailable,
}
