//! Mailed links: password reset and address verification, answered in the same time whether a link went out.

use std::sync::Arc;
use std::time::Duration;

use super::{Accounts, Unavailable};
use crate::actors::users::{Compose, IssueError, ResetError};
use crate::domain::{Email, Password, SessionToken, Timestamp, TokenKind};
use crate::hashing::HashError;

/// The earliest a request for a mailed link is answered: longer than either case (a link issued or not) takes,
/// so neither can be told by its time.
pub(super) const LINK_ANSWER_FLOOR: Duration = Duration::from_millis(40);

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum MailError {
    /// No transport is configured: nothing could ever be delivered.
    #[error("Sending e-mail is not configured on this server")]
    NotConfigured,
    /// The outbox is full (`[email] max_outbox`): 503 until the sender has worked some off.
    #[error("Too much mail is waiting to be sent. Please try again later.")]
    OutboxFull,
    /// The address is in a domain whose organization requires single sign-on (see `accounts::sso_policy`).
    #[error("{}", super::SSO_REQUIRED)]
    SsoRequired,
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ResetPasswordError {
    #[error("Invalid token")]
    InvalidToken,
    /// The address is in a domain whose organization requires single sign-on (see `accounts::sso_policy`).
    #[error("{}", super::SSO_REQUIRED)]
    SsoRequired,
    #[error("The service is busy. Please try again in a moment.")]
    Busy,
    /// The new password is refused by the policy (too short for the account, listed, or a context word).
    #[error(transparent)]
    Password(#[from] crate::domain::PasswordRefused),
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
}

impl Accounts {
    /// Mails a reset link to the account with `email`, if there is one. The answer is the same either way, and
    /// takes the same time.
    pub async fn request_password_reset(
        &self,
        email: Email,
        callback: Option<String>,
        ip: &str,
    ) -> Result<(), MailError> {
        // By the domain alone: the answer must not depend on whether the address has an account.
        if self.sso_refuses_address(&email).await? {
            return Err(MailError::SsoRequired);
        }
        self.mail_link(TokenKind::PasswordReset, email, callback, ip).await
    }

    /// Mails a verification link to the account with `email`, if there is one whose address is not verified yet.
    /// The answer is the same either way, and takes the same time.
    pub async fn send_verification_email(
        &self,
        email: Email,
        callback: Option<String>,
        ip: &str,
    ) -> Result<(), MailError> {
        self.mail_link(TokenKind::EmailVerification, email, callback, ip).await
    }

    pub(super) async fn mail_link(
        &self,
        kind: TokenKind,
        email: Email,
        callback: Option<String>,
        ip: &str,
    ) -> Result<(), MailError> {
        let started = tokio::time::Instant::now();
        let templates = Arc::clone(self.templates.as_ref().ok_or(MailError::NotConfigured)?);
        let ttl = templates.ttl(kind);
        let compose: Compose = Box::new(move |user, token| templates.render(kind, user, token, callback.as_deref()));
        self.actors.users.issue_token(kind, email, ttl, compose, ip.to_owned()).await.map_err(|e| match e {
            IssueError::OutboxFull => MailError::OutboxFull,
            IssueError::Unavailable(u) => MailError::Unavailable(u),
        })?;
        // Whether a link was issued costs a little more (a token, a rendered message) than not; answering no sooner
        // than a fixed time after the request came in makes both cases take the same time.
        tokio::time::sleep_until(started + LINK_ANSWER_FLOOR).await;
        Ok(())
    }

    /// Marks the address of the verification token's account as verified (once).
    pub async fn verify_email(&self, token: &SessionToken, ip: &str) -> Result<(), ResetPasswordError> {
        self.actors.users.verify_email(token.hash(), ip.to_owned()).await.map_err(|e| match e {
            ResetError::InvalidToken => ResetPasswordError::InvalidToken,
            ResetError::Unavailable(u) => ResetPasswordError::Unavailable(u),
        })
    }

    /// Whether `token` is a live reset token (the link in the mail leads to the form, or to an error).
    pub fn reset_token_is_valid(&self, token: &SessionToken) -> bool {
        let now = Timestamp::now();
        self.indexes.tokens.get(&token.hash()).is_some_and(|t| t.kind == TokenKind::PasswordReset && !t.is_expired(now))
    }

    /// Sets a new password with a reset token (once), ending every session of the account.
    pub async fn reset_password(
        &self,
        token: &SessionToken,
        new_password: Password,
        ip: &str,
    ) -> Result<(), ResetPasswordError> {
        let now = Timestamp::now();
        let reset =
            self.indexes.tokens.get(&token.hash()).filter(|t| t.kind == TokenKind::PasswordReset && !t.is_expired(now));
        let user = reset.and_then(|t| self.indexes.users.get(t.user_id)).ok_or(ResetPasswordError::InvalidToken)?;
        // A link mailed before the organization required single sign-on sets no password (its holder is known
        // now, so a service administrator's still does).
        if self.sso_refuses_user(&user).await? {
            return Err(ResetPasswordError::SsoRequired);
        }
        self.vet_password_of(&user, &new_password).await?;
        let hash = self.hasher.hash(new_password).await.map_err(|e| match e {
            HashError::Busy => ResetPasswordError::Busy,
            HashError::Params(_) | HashError::Failed(_) => ResetPasswordError::Unavailable(Unavailable),
        })?;
        self.actors.users.reset_password(token.hash(), hash, ip.to_owned()).await.map_err(|e| match e {
            ResetError::InvalidToken => ResetPasswordError::InvalidToken,
            ResetError::Unavailable(u) => ResetPasswordError::Unavailable(u),
        })?;
        self.counters.count(super::Counter::PasswordReset);
        Ok(())
    }
}
