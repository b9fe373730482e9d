//! Sign-in (and linking) with an ID token the client got from the provider itself: better-auth's `idToken` on
//! `sign-in/social` and `link-social` (a native SDK, Google One Tap). No flow and no redirect: the token is checked
//! against the provider's published keys ([`crate::oauth::OAuth::verify_id_token`]), then the identity is admitted
//! under the callback's rules ([`Accounts::admit`]: no silent takeover), and the session is started as a
//! password's is: a banned account is refused, and an account with a second factor gets the challenge, not a
//! session (unless this browser is one of its trusted devices). As in the callback, the session starts in the
//! commit that writes the account's records (one commit in all).

use super::oauth::{AdmitAs, Admitted, Entry, Refused};
use super::{Accounts, Client, SignedIn, Unavailable};
use crate::actors::sessions::CreateSessionError;
use crate::domain::{SessionToken, UserId};
use crate::oauth::{OAuthError, Tokens};

/// What the client brought (better-auth's `idToken` object).
pub struct IdTokenProof {
    pub provider: String,
    pub token: String,
    /// The nonce the client asked the provider for; when given, the token must carry it.
    pub nonce: Option<String>,
    pub access_token: Option<String>,
    pub refresh_token: Option<String>,
    /// When the access token expires, ms since the epoch.
    pub expires_at_ms: Option<i64>,
}

/// How an ID-token sign-in ended well.
pub enum IdTokenSignIn {
    /// A session (`new_user`: the account was made now).
    In { signed_in: SignedIn, new_user: bool },
    /// A session through a trusted device of an account with a second factor, and the device's renewed token.
    Trusted(SignedIn, SessionToken),
    /// The account has a second factor: no session yet, the challenge to prove it with.
    SecondFactor { challenge: SessionToken },
}

/// Why an ID token did not sign in or link; the messages are better-auth's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum IdTokenError {
    #[error("Provider not found")]
    ProviderNotFound,
    /// The provider issues no ID tokens (GitHub).
    #[error("id_token not supported")]
    NotSupported,
    /// Signature, issuer, audience, expiry, algorithm or nonce.
    #[error("Invalid token")]
    InvalidToken,
    /// The provider's discovery document or keys could not be read.
    #[error("The identity provider cannot be reached")]
    ProviderUnavailable,
    #[error("Failed to get user info")]
    UserInfo,
    #[error("User email not found")]
    EmailNotFound,
    #[error("account not linked")]
    NotLinked,
    #[error("unable to link account")]
    UnableToLink,
    #[error("Social account already linked")]
    AlreadyLinked,
    #[error("Account not linked - linking not allowed")]
    LinkingNotAllowed,
    #[error("Account not linked - different emails not allowed")]
    DifferentEmails,
    #[error("Email not verified")]
    EmailNotVerified,
    #[error("You have been banned from this application. Please contact support if you believe this is an error.")]
    Banned,
    /// The account's second factor is a passkey: it signs in with that, as after a password.
    #[error("This account signs in with its passkey")]
    PasskeyRequired,
    /// An organization's single sign-on policy covers the address.
    #[error("{}", super::SSO_REQUIRED)]
    SsoRequired,
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
}

impl Accounts {
    /// `sign-in/social {provider, idToken}`: the account the token's identity signs into (found, linked under the
    /// callback's rules, or made), and its session or second-factor challenge. `trusted`: this browser's trusted
    /// device cookie.
    pub async fn sign_in_with_id_token(
        &self,
        proof: IdTokenProof,
        trusted: Option<SessionToken>,
        client: Client,
    ) -> Result<IdTokenSignIn, IdTokenError> {
        let (user, new_user, entered) = match self.admit_id_token(proof, None, trusted.clone(), &client).await? {
            Admitted::User { user, new_user, entered } => (user, new_user, entered),
            Admitted::Linked => return Err(IdTokenError::UnableToLink),
        };
        let entered = match entered {
            Some(entered) => entered,
            None => self.enter(user, trusted, client).await,
        };
        let entered = entered.map_err(|e| match e {
            CreateSessionError::Banned => IdTokenError::Banned,
            CreateSessionError::UnknownUser => IdTokenError::UnableToLink,
            CreateSessionError::Unavailable(u) => IdTokenError::Unavailable(u),
        })?;
        Ok(match entered {
            Entry::Session(signed_in, Some(device)) => IdTokenSignIn::Trusted(signed_in, device),
            Entry::Session(signed_in, None) => IdTokenSignIn::In { signed_in, new_user },
            Entry::SecondFactor(challenge) => IdTokenSignIn::SecondFactor { challenge },
            Entry::PasskeyRequired => return Err(IdTokenError::PasskeyRequired),
        })
    }

    /// `link-social {provider, idToken}`: links the token's identity to `user` (the caller), as better-auth does:
    /// only an address the provider verified (or a provider trusted for linking), and only the account's own
    /// address; an identity already linked to `user` is a success.
    pub async fn link_with_id_token(
        &self,
        proof: IdTokenProof,
        user: UserId,
        client: Client,
    ) -> Result<(), IdTokenError> {
        match self.admit_id_token(proof, Some(user), None, &client).await? {
            Admitted::Linked => Ok(()),
            Admitted::User { .. } => Err(IdTokenError::UnableToLink),
        }
    }

    async fn admit_id_token(
        &self,
        proof: IdTokenProof,
        link_user: Option<UserId>,
        trusted: Option<SessionToken>,
        client: &Client,
    ) -> Result<Admitted, IdTokenError> {
        let provider = self.flows.oauth.provider(&proof.provider).ok_or(IdTokenError::ProviderNotFound)?;
        let verified = self
            .flows
            .oauth
            .verify_id_token(&provider, &proof.token, proof.nonce.as_deref(), proof.access_token.as_deref())
            .await;
        let identity = verified.map_err(|e| {
            tracing::warn!(provider = %proof.provider, error = %e, "an ID token was refused");
            match e {
                OAuthError::IdTokenNotSupported => IdTokenError::NotSupported,
                OAuthError::Discovery(_) => IdTokenError::ProviderUnavailable,
                OAuthError::UserInfo(_) => IdTokenError::UserInfo,
                OAuthError::IdToken(_) | OAuthError::Exchange(_) => IdTokenError::InvalidToken,
            }
        })?;
        let tokens = Tokens {
            access_token: proof.access_token.unwrap_or_default(),
            refresh_token: proof.refresh_token,
            id_token: Some(proof.token),
            expires_at_ms: proof.expires_at_ms,
        };
        self.admit(AdmitAs::configured(&provider), identity, tokens, link_user, trusted, client).await.map_err(
            |refused| match refused {
                Refused::EmailNotFound => IdTokenError::EmailNotFound,
                Refused::UserInfo => IdTokenError::UserInfo,
                Refused::NotLinked => IdTokenError::NotLinked,
                Refused::UnverifiedEmail => IdTokenError::EmailNotVerified,
                Refused::LinkingNotAllowed => IdTokenError::LinkingNotAllowed,
                Refused::LinkedElsewhere if link_user.is_some() => IdTokenError::AlreadyLinked,
                Refused::LinkedElsewhere | Refused::UserGone => IdTokenError::UnableToLink,
                Refused::EmailMismatch => IdTokenError::DifferentEmails,
                Refused::EmailNotVerified => IdTokenError::EmailNotVerified,
                Refused::SsoRequired => IdTokenError::SsoRequired,
                Refused::Unavailable => IdTokenError::Unavailable(Unavailable),
            },
        )
    }
}
