//! The second factor's messages to the users actor: what callers send and get back. The factor is part of the
//! account record, so the actor that owns accounts applies these in message order with every other change to them
//! (a password change ending the trusted devices, a code accepted once across concurrent requests).

use std::sync::Arc;

use ractor::RpcReplyPort;

use super::{IssueError, UsersHandle, UsersMsg};
use crate::actors::sessions::{Client, Started};
use crate::actors::{Unavailable, call};
use crate::domain::{Mail, OneTimeToken, SessionToken, TokenHash, User, UserId};

/// A change to an account's second factor.
#[derive(Debug, Clone)]
pub enum FactorChange {
    /// Enrolment starts (or starts over while not yet confirmed): a new sealed TOTP secret and backup codes.
    Enrol { sealed_secret: Box<[u8]>, backup_codes: Box<[[u8; 32]]> },
    /// The first good code of the authenticator (its time step): the factor is on.
    Confirm { step: u64 },
    /// A new set of backup codes: the old ones die.
    NewBackupCodes { backup_codes: Box<[[u8; 32]]> },
    /// Off, by the user: the factor is forgotten and every trusted device ends.
    Disable,
    /// Off, by administrator `by`: the factor is forgotten, every session and every trusted device ends.
    Reset { by: UserId },
}

/// Why a change to the second factor was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FactorError {
    #[error("User not found")]
    UserNotFound,
    /// `Enrol` while the factor is on.
    #[error("TOTP is already enabled")]
    AlreadyEnabled,
    /// `Confirm` without an enrolment.
    #[error("TOTP not enabled")]
    NotEnrolled,
    /// `NewBackupCodes` or `Disable` without the factor on.
    #[error("Two factor isn't enabled")]
    NotEnabled,
    /// `Confirm` with a time step already used (the same code sent twice).
    #[error("Invalid code")]
    Replayed,
    /// `Reset` by someone who is no longer an administrator (checked in message order).
    #[error("administrator role required")]
    NotAdmin,
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
}

/// What proves the second factor of a sign-in.
#[derive(Debug, Clone, Copy)]
pub enum Proof {
    /// The TOTP time step whose code was given (`None`: the code is none of the window's): accepted once, and only
    /// newer than the last one accepted. The code is matched where the secret can be opened; whether the match
    /// counts is decided here, in the message that takes the challenge's attempt.
    Totp { step: Option<u64> },
    /// A backup code's keyed hash: used up.
    BackupCode { hash: [u8; 32] },
    /// A mailed code's keyed hash and the key it is kept under: used up.
    MailedCode { key: TokenHash, hash: [u8; 32] },
}

/// Why a sign-in's second factor was not accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PassError {
    /// No live challenge (unknown, expired, used, or ended after too many wrong codes).
    #[error("Invalid two factor cookie")]
    InvalidChallenge,
    /// A wrong code (no TOTP step, one already used, a backup code not or no longer among the account's, a mailed
    /// code that is not the one kept): counted, and the challenge goes on.
    #[error("Invalid code")]
    Refused,
    /// A wrong code that was the challenge's last allowed one: counted, and the challenge ended with it.
    #[error("Too many attempts. Please request a new code.")]
    Exhausted,
    /// The account has no second factor on any more (disabled or reset meanwhile).
    #[error("TOTP not enabled")]
    NotEnabled,
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
}

/// Why a signed-in session's mailed code (`two-factor/verify-otp` with a session) was not accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CodeError {
    /// Not the code kept, or none is: counted against the code and audited.
    #[error("Invalid code")]
    Wrong,
    /// The account is gone (deleted in another request).
    #[error("User not found")]
    AccountGone,
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
}

/// A challenge passed: the account (as written), whether its session is remembered, and the session itself,
/// started in the commit that ends the challenge (or why the account may not hold one: banned meanwhile).
pub struct Passed {
    pub user: Arc<User>,
    pub remember_me: bool,
    pub started: Started,
}

pub(in crate::actors) enum FactorMsg {
    Change {
        user: UserId,
        /// Whom the audit log names: the user, the administrator impersonating them, or the resetting one.
        by: UserId,
        change: FactorChange,
        ip: String,
        reply: RpcReplyPort<Result<Arc<User>, FactorError>>,
    },
    /// A sign-in whose password was right, for an account with the factor on: a challenge token (the cookie).
    /// `rehash`: the password's imported hash `from` (still on file) replaced by `to`, in the same commit (the
    /// re-hash a sign-in makes, which a sign-in through a second factor would otherwise never reach).
    Challenge {
        user: UserId,
        remember_me: bool,
        token: TokenHash,
        rehash: Option<(String, String)>,
        reply: RpcReplyPort<Result<(), Unavailable>>,
    },
    /// The challenge's proof, checked and counted in this one message: passed, the challenge ends, the proof is
    /// used up, with `trust` a trusted device starts, and `client`'s session starts, all in one commit (a failure
    /// leaves the challenge live, never used up without a session); refused, the failure is counted against the
    /// challenge (at the last allowed one it ends) and the mailed code tried, audited, before the answer.
    Pass {
        challenge: TokenHash,
        proof: Proof,
        trust: Option<TokenHash>,
        client: Client,
        reply: RpcReplyPort<Result<Passed, PassError>>,
    },
    /// A wrong authenticator code for a signed-in session (`verify-totp` with a session): audited. It has no count
    /// of its own: the account's failure budget, reserved before the check, is its limit.
    Failed { user: UserId, ip: String, reply: RpcReplyPort<Result<(), Unavailable>> },
    /// A code to mail to the account: kept (as `token`, under `key`, replacing an earlier one there) and its
    /// message queued in the outbox, in one commit.
    SendCode {
        key: TokenHash,
        token: OneTimeToken,
        mail: Mail,
        ip: String,
        reply: RpcReplyPort<Result<(), IssueError>>,
    },
    /// A signed-in account's mailed code (`two-factor/verify-otp` with a session), used up; a wrong one is counted
    /// against the code and audited in this same message.
    UseCode { user: UserId, key: TokenHash, hash: [u8; 32], ip: String, reply: RpcReplyPort<Result<(), CodeError>> },
    /// A sign-in on a trusted device: the device's token is replaced by `next` (a stolen copy of the old cookie
    /// stops working once the owner signs in).
    Rotate { old: TokenHash, next: TokenHash, reply: RpcReplyPort<Result<(), Unavailable>> },
}

impl FactorMsg {
    pub(super) fn caller_gone(&self) -> Option<bool> {
        use crate::actors::gone;
        match self {
            Self::Change { reply, .. } => gone(reply),
            Self::Challenge { reply, .. } => gone(reply),
            Self::Pass { reply, .. } => gone(reply),
            // A wrong code counts even when its caller hung up.
            Self::Failed { .. } => None,
            Self::Rotate { reply, .. } => gone(reply),
            Self::SendCode { reply, .. } => gone(reply),
            Self::UseCode { reply, .. } => gone(reply),
        }
    }
}

impl UsersHandle {
    /// Applies `change` to `user`'s second factor on behalf of `by`.
    pub async fn change_factor(
        &self,
        user: UserId,
        by: UserId,
        change: FactorChange,
        ip: String,
    ) -> Result<Arc<User>, FactorError> {
        call(&self.0, |reply| UsersMsg::Factor(FactorMsg::Change { user, by, change, ip, reply })).await?
    }

    /// Starts a sign-in's challenge: returns the token its cookie carries.
    pub async fn challenge(
        &self,
        user: UserId,
        remember_me: bool,
        rehash: Option<(String, String)>,
    ) -> Result<SessionToken, Unavailable> {
        let token = SessionToken::generate();
        let hash = token.hash();
        call(&self.0, |reply| UsersMsg::Factor(FactorMsg::Challenge { user, remember_me, token: hash, rehash, reply }))
            .await??;
        Ok(token)
    }

    /// Checks `proof` against `challenge`: passed, it ends and `client`'s session starts in the same commit (with
    /// `trust`, a trusted device too); refused, the failure is counted and audited before this returns
    /// ([`PassError::Refused`], or [`PassError::Exhausted`] when that ended the challenge).
    pub async fn pass(
        &self,
        challenge: TokenHash,
        proof: Proof,
        trust: Option<TokenHash>,
        client: Client,
    ) -> Result<Passed, PassError> {
        call(&self.0, |reply| UsersMsg::Factor(FactorMsg::Pass { challenge, proof, trust, client, reply })).await?
    }

    /// Records a wrong authenticator code given by `user`'s signed-in session.
    pub async fn code_failed(&self, user: UserId, ip: String) -> Result<(), Unavailable> {
        call(&self.0, |reply| UsersMsg::Factor(FactorMsg::Failed { user, ip, reply })).await?
    }

    /// Keeps a mailed code (`token`, under `key`) and queues its message, in one commit.
    pub async fn send_code(
        &self,
        key: TokenHash,
        token: OneTimeToken,
        mail: Mail,
        ip: String,
    ) -> Result<(), IssueError> {
        call(&self.0, |reply| UsersMsg::Factor(FactorMsg::SendCode { key, token, mail, ip, reply })).await?
    }

    /// Uses up the signed-in `user`'s mailed code under `key`, if its hash is `hash`.
    pub async fn use_code(&self, user: UserId, key: TokenHash, hash: [u8; 32], ip: String) -> Result<(), CodeError> {
        call(&self.0, |reply| UsersMsg::Factor(FactorMsg::UseCode { user, key, hash, ip, reply })).await?
    }

    /// Replaces a trusted device's token `old` by `next` (same account, a new 30 days).
    pub async fn rotate_trust(&self, old: TokenHash, next: TokenHash) -> Result<(), Unavailable> {
        call(&self.0, |reply| UsersMsg::Factor(FactorMsg::Rotate { old, next, reply })).await?
    }
}
