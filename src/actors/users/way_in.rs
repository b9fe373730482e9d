//! The ways in by mail without a password (better-auth's `magicLink` and `emailOTP`): what callers send to the
//! users actor and get back. A link or a code is a one-time token the actor owns like every other; using one is
//! one message that checks it, counts a wrong code, and makes every change the way in implies (an account made, an
//! unproven address's password and sessions ended, the session started) in one commit.

use std::sync::Arc;

use ractor::RpcReplyPort;

use super::{IssueError, UsersHandle, UsersMsg};
use crate::actors::sessions::{Client, Started};
use crate::actors::{Unavailable, call};
use crate::domain::{CodePurpose, Email, ImageUrl, LinkAddress, Mail, Role, TokenHash, User};

/// A way in passed: the account (as written; made by it when `new_user`) and its new session (or why the account
/// may not hold one: banned).
pub struct WayInPassed {
    pub user: Arc<User>,
    pub new_user: bool,
    pub started: Started,
}

/// Why a sign-in link was not accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum LinkError {
    /// Unknown, expired or already used.
    #[error("Invalid token")]
    InvalidToken,
    /// No account has the address, and links may not make one (`[magic_link] sign_up = false`). The link is
    /// used up.
    #[error("Sign-up is disabled")]
    SignUpDisabled,
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
}

/// What a right code is for, besides proving the mailbox.
pub enum CodeUse {
    /// `check-verification-otp`: only whether it is right; it stays live for the call that uses it.
    Check,
    /// `sign-in/email-otp`: a session (an account made for an unknown address when `sign_up`, with `name`,
    /// `image` and `role`).
    SignIn { name: Option<crate::domain::Name>, image: Option<ImageUrl>, role: Role, sign_up: bool, client: Client },
    /// `email-otp/verify-email`: the address is proven.
    VerifyEmail,
    /// `email-otp/reset-password`: a new password (its hash); every session of the account ends with it.
    ResetPassword { password_hash: String },
}

/// What a right code did.
pub enum CodeUsed {
    Checked,
    SignedIn(WayInPassed),
    Verified(Arc<User>),
    Reset,
}

/// Why a code was not accepted (better-auth's `emailOTP` codes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum EmailCodeError {
    /// Past its lifetime: it is gone.
    #[error("OTP expired")]
    Expired,
    /// None kept for this purpose and address, or not this one (counted), or one for a sign-in to an unknown
    /// address when sign-up is off.
    #[error("Invalid OTP")]
    Invalid,
    /// Its wrong tries are used up: it is gone, right or not.
    #[error("Too many attempts")]
    TooManyAttempts,
    /// The code was right, but no account has the address (verification, reset, check).
    #[error("User not found")]
    UserNotFound,
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
}

pub(in crate::actors) enum WayInMsg {
    /// A sign-in link (its token's hash) to `address`, valid for `ttl`, and its message, kept and queued in one
    /// commit; for an address with no account only when `sign_up` (else only audited).
    SendLink {
        token: TokenHash,
        address: LinkAddress,
        ttl: std::time::Duration,
        mail: Mail,
        sign_up: bool,
        ip: String,
        reply: RpcReplyPort<Result<(), IssueError>>,
    },
    /// A sign-in link followed: used up, and `client`'s session started in the same commit.
    UseLink {
        token: TokenHash,
        sign_up: bool,
        role: Role,
        client: Client,
        reply: RpcReplyPort<Result<WayInPassed, LinkError>>,
    },
    /// A code (its keyed hash under `key`, replacing any kept there) for `purpose` to `email`, valid for `ttl`, and
    /// its message, in one commit; kept and sent only for an address with an account, or a sign-in with `sign_up`.
    SendCode {
        key: TokenHash,
        hash: [u8; 32],
        email: Email,
        purpose: CodePurpose,
        ttl: std::time::Duration,
        mail: Mail,
        sign_up: bool,
        ip: String,
        reply: RpcReplyPort<Result<(), IssueError>>,
    },
    /// A code given for `purpose` by whoever holds `email`: checked, a wrong one counted against it (after
    /// `allowed` wrong ones it is gone), a right one used for `then`, all in this one message.
    UseCode {
        key: TokenHash,
        hash: [u8; 32],
        email: Email,
        purpose: CodePurpose,
        allowed: u32,
        then: CodeUse,
        ip: String,
        reply: RpcReplyPort<Result<CodeUsed, EmailCodeError>>,
    },
}

impl WayInMsg {
    pub(super) fn caller_gone(&self) -> Option<bool> {
        use crate::actors::gone;
        match self {
            Self::SendLink { reply, .. } | Self::SendCode { reply, .. } => gone(reply),
            Self::UseLink { reply, .. } => gone(reply),
            // A wrong code counts even when its caller hung up.
            Self::UseCode { .. } => None,
        }
    }
}

impl UsersHandle {
    /// Keeps a sign-in link and queues its message (see [`WayInMsg::SendLink`]).
    pub async fn send_link(
        &self,
        token: TokenHash,
        address: LinkAddress,
        ttl: std::time::Duration,
        mail: Mail,
        sign_up: bool,
        ip: String,
    ) -> Result<(), IssueError> {
        call(&self.0, |reply| UsersMsg::WayIn(WayInMsg::SendLink { token, address, ttl, mail, sign_up, ip, reply }))
            .await?
    }

    /// Uses a sign-in link: the account (made now if need be) and its session, started in the same commit.
    pub async fn use_link(
        &self,
        token: TokenHash,
        sign_up: bool,
        role: Role,
        client: Client,
    ) -> Result<WayInPassed, LinkError> {
        call(&self.0, |reply| UsersMsg::WayIn(WayInMsg::UseLink { token, sign_up, role, client, reply })).await?
    }

    /// Keeps a mailed code and queues its message (see [`WayInMsg::SendCode`]).
    #[allow(clippy::too_many_arguments)]
    pub async fn send_email_code(
        &self,
        key: TokenHash,
        hash: [u8; 32],
        email: Email,
        purpose: CodePurpose,
        ttl: std::time::Duration,
        mail: Mail,
        sign_up: bool,
        ip: String,
    ) -> Result<(), IssueError> {
        call(&self.0, |reply| {
            UsersMsg::WayIn(WayInMsg::SendCode { key, hash, email, purpose, ttl, mail, sign_up, ip, reply })
        })
        .await?
    }

    /// Checks a mailed code and, right, uses it for `then` (see [`WayInMsg::UseCode`]).
    #[allow(clippy::too_many_arguments)]
    pub async fn use_email_code(
        &self,
        key: TokenHash,
        hash: [u8; 32],
        email: Email,
        purpose: CodePurpose,
        allowed: u32,
        then: CodeUse,
        ip: String,
    ) -> Result<CodeUsed, EmailCodeError> {
        call(&self.0, |reply| {
            UsersMsg::WayIn(WayInMsg::UseCode { key, hash, email, purpose, allowed, then, ip, reply })
        })
        .await?
    }
}
