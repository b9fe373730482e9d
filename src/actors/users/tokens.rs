//! The one-time token messages to the users actor: what callers send and get back. A mailed link issued (the
//! token and its message in one commit), and one used to verify an address or reset a password; the actor's side
//! is `actor/tokens.rs`.

use std::time::Duration;

use ractor::RpcReplyPort;

use super::{UsersHandle, UsersMsg};
use crate::actors::{Unavailable, call};
use crate::domain::{Email, Mail, SessionToken, TokenHash, TokenKind, User};

/// Renders the message for an account and its new token (the actor writes it to the outbox in the same commit as
/// the token).
pub type Compose = Box<dyn FnOnce(&User, &SessionToken) -> Mail + Send>;

/// Why no link was issued.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum IssueError {
    /// The outbox holds `[email] max_outbox` messages: nothing more is accepted until the sender works some off.
    #[error("Too much mail is waiting to be sent. Please try again later.")]
    OutboxFull,
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ResetError {
    /// Unknown, expired, already used, or replaced by a newer request.
    #[error("Invalid token")]
    InvalidToken,
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
}

/// A mailed link: issued, or used.
pub(in crate::actors) enum TokenMsg {
    Issue {
        kind: TokenKind,
        email: Email,
        ttl: Duration,
        compose: Compose,
        ip: String,
        reply: RpcReplyPort<Result<(), IssueError>>,
    },
    VerifyEmail {
        token: TokenHash,
        ip: String,
        reply: RpcReplyPort<Result<(), ResetError>>,
    },
    ResetPassword {
        token: TokenHash,
        password_hash: String,
        ip: String,
        reply: RpcReplyPort<Result<(), ResetError>>,
    },
}

impl TokenMsg {
    pub(super) fn caller_gone(&self) -> Option<bool> {
        use crate::actors::gone;
        match self {
            Self::Issue { reply, .. } => gone(reply),
            Self::VerifyEmail { reply, .. } | Self::ResetPassword { reply, .. } => gone(reply),
        }
    }
}

impl UsersHandle {
    /// Issues a token of `kind` for the account with `email`, if there is one (and, for a verification, if its
    /// address is not verified yet): the token (replacing an older one of that kind) and the message announcing it
    /// are written in one commit. Otherwise an audit entry is, so both cases cost one commit and answer alike.
    pub async fn issue_token(
        &self,
        kind: TokenKind,
        email: Email,
        ttl: Duration,
        compose: Compose,
        ip: String,
    ) -> Result<(), IssueError> {
        call(&self.0, |reply| UsersMsg::Token(TokenMsg::Issue { kind, email, ttl, compose, ip, reply })).await?
    }

    /// Uses the verification token `token` (once): the account's address is verified.
    pub async fn verify_email(&self, token: TokenHash, ip: String) -> Result<(), ResetError> {
        call(&self.0, |reply| UsersMsg::Token(TokenMsg::VerifyEmail { token, ip, reply })).await?
    }

    /// Uses the reset token `token` (once): the new password, the end of every session and the end of the token
    /// in one commit.
    pub async fn reset_password(&self, token: TokenHash, password_hash: String, ip: String) -> Result<(), ResetError> {
        call(&self.0, |reply| UsersMsg::Token(TokenMsg::ResetPassword { token, password_hash, ip, reply })).await?
    }
}
