//! The identity provider's keys, for the JWKS, the discovery document and administrators: the facade's
//! pass-throughs to [`crate::provider::KeyRing`].

use std::sync::Arc;
use std::time::Duration;

use super::Accounts;
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
}
