//! The sign-in attempt messages to the users actor: what callers send and get back. A reservation against the
//! account's one failure budget (see [`crate::actors::attempts`]) before a password or a code is checked, its end
//! once it was, and a sign-in that upgrades its password's hash in the commit that starts its session; the
//! actor's side is `actor/attempts.rs`.

use std::sync::Arc;
use std::time::Duration;

use ractor::RpcReplyPort;

use super::{UsersHandle, UsersMsg};
use crate::actors::sessions::{CreateSessionError, StartWith};
use crate::actors::{Unavailable, call};
use crate::domain::{Email, SessionToken, UserId};

/// Why a sign-in may not check a password now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AttemptRefused {
    #[error("too many failed sign-ins for this account; retry after {0:?}")]
    Locked(Duration),
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
}

/// How a sign-in's password check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Checked {
    Verified,
    Wrong,
    /// Never checked (the hashing pool was full): released without counting as a failure.
    NotChecked,
}

/// What [`UsersHandle::sign_in_upgrading`] gives: the new session, or `None` when nothing was done.
pub type UpgradedStart = Result<Option<(SessionToken, Arc<crate::domain::Session>)>, CreateSessionError>;

/// The per-account limit on failed sign-ins.
#[derive(Debug, Clone, Copy)]
pub struct AttemptPolicy {
    pub max_failures: u32,
    pub window: Duration,
    /// Several nodes share the limit: each check is also reserved in the database (docs/cluster.md).
    pub shared: bool,
}

/// A sign-in attempt: its reservation against the failure limit, its end, a sign-in upgrading its hash.
pub(in crate::actors) enum AttemptMsg {
    Begin {
        email: Email,
        user: Option<UserId>,
        ip: String,
        reply: RpcReplyPort<Result<(), AttemptRefused>>,
    },
    Finish {
        email: Email,
        user: Option<UserId>,
        checked: Checked,
        /// A second factor's code was checked, not a password (for the audit log's wording).
        code: bool,
        ip: String,
        reply: RpcReplyPort<Result<(), Unavailable>>,
    },
    /// A reservation the shared limit could not be asked about: give back the one this node took.
    ReleaseLocal {
        email: Email,
    },
    /// A reservation the shared limit refused (its count, over every node, reached the budget): the one this node
    /// took is given back, the lock is audited as this node's own count's would be, and the caller answered
    /// `Locked(wait)` once that row is durable.
    LockedElsewhere {
        email: Email,
        user: Option<UserId>,
        ip: String,
        wait: Duration,
        reply: RpcReplyPort<Result<(), AttemptRefused>>,
    },
    SignInUpgrading {
        from: String,
        to: String,
        start: StartWith,
        reply: RpcReplyPort<UpgradedStart>,
    },
}

impl AttemptMsg {
    pub(super) fn caller_gone(&self) -> Option<bool> {
        use crate::actors::gone;
        match self {
            Self::Begin { reply, .. } => gone(reply),
            Self::SignInUpgrading { reply, .. } => gone(reply),
            // Each ends a reservation made earlier: dropped, it would count against the account until its window
            // ends.
            Self::Finish { .. } | Self::ReleaseLocal { .. } | Self::LockedElsewhere { .. } => None,
        }
    }
}

impl UsersHandle {
    /// Reserves one password check against the failure limit of `email` (see [`crate::actors::attempts`]); `user` is the
    /// account it names, if any, for the audit log. Every reservation must be ended with
    /// [`finish_attempt`](Self::finish_attempt), whatever happens to the request in between.
    pub async fn begin_attempt(&self, email: Email, user: Option<UserId>, ip: String) -> Result<(), AttemptRefused> {
        call(&self.0, |reply| UsersMsg::Attempt(AttemptMsg::Begin { email, user, ip, reply })).await?
    }

    /// Ends a sign-in's password check. A failure is recorded in the audit log (within the bounds described in
    /// [`crate::actors::attempts`]) before this returns; a success is recorded with the new session, by the sessions
    /// actor.
    pub async fn finish_attempt(
        &self,
        email: Email,
        user: Option<UserId>,
        checked: Checked,
        ip: String,
    ) -> Result<(), Unavailable> {
        call(&self.0, |reply| UsersMsg::Attempt(AttemptMsg::Finish { email, user, checked, code: false, ip, reply }))
            .await?
    }

    /// Ends a reservation made for a second factor's code: the same budget as the password's (one limit per
    /// account across every factor), recorded as a wrong code.
    pub async fn finish_code_attempt(
        &self,
        email: Email,
        user: UserId,
        checked: Checked,
        ip: String,
    ) -> Result<(), Unavailable> {
        call(&self.0, |reply| {
            UsersMsg::Attempt(AttemptMsg::Finish { email, user: Some(user), checked, code: true, ip, reply })
        })
        .await?
    }

    /// A sign-in whose password was verified against an imported hash `from`: replaces it with `to` (argon2id) and
    /// starts the session in the same commit, so that neither is durable without the other. `Ok(None)`: the hash
    /// is no longer `from` (changed meanwhile), nothing was done, and the session is to be started as usual.
    pub async fn sign_in_upgrading(&self, from: String, to: String, start: StartWith) -> UpgradedStart {
        call(&self.0, |reply| UsersMsg::Attempt(AttemptMsg::SignInUpgrading { from, to, start, reply })).await?
    }
}
