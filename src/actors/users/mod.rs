//! The users actor: accounts, the e-mail index, role and ban changes, and the guards on them.
//!
//! - this file: the handle and the one message enum, a variant per kind of message;
//! - one module per kind, what callers send and get back (the kind's enum, its replies and errors, and the
//!   handle's `async fn`s that send it): [`accounts`], [`attempts`], [`tokens`], [`linked`], [`members`],
//!   [`second_factor`]; the actor's side of each is the module of the same name under `actor/`;
//! - [`index`]: the read index;
//! - [`rules`]: the rules of a change, pure functions;
//! - `actor`: the actor, which applies the rules in message order and writes through the overlay.

mod accounts;
mod actor;
mod attempts;
mod index;
mod linked;
pub mod members;
pub mod rules;
mod scim;
mod second_factor;
mod tokens;
mod way_in;

use accounts::AccountMsg;
pub use accounts::{
    AdminVia, CreateUserError, DeleteOrgError, DeleteUserError, EnsureAdmin, EnsureAdminError, NewUser, OwnChange,
    OwnChangeError, UpdateUserError, UserChange,
};
pub(super) use actor::spawn;
use attempts::AttemptMsg;
pub use attempts::{AttemptPolicy, AttemptRefused, Checked, UpgradedStart};
pub(crate) use index::Apart;
pub use index::{Place, UserIndex};
use linked::LinkedMsg;
pub use linked::{
    ExternalError, ExternalIdentity, ExternalOutcome, ExternalSession, ExternalSignIn, ExternalStart, SsoRoles,
    SsoSignIn, UnlinkError,
};
use members::MemberMsg;
use scim::ScimMsg;
pub use scim::{DEACTIVATED, ScimChange, ScimError};
use second_factor::FactorMsg;
pub use second_factor::{CodeError, FactorChange, FactorError, PassError, Passed, Proof};
use tokens::TokenMsg;
pub use tokens::{Compose, IssueError, ResetError};
use way_in::WayInMsg;
pub use way_in::{CodeUse, CodeUsed, EmailCodeError, LinkError, WayInPassed};

use super::Unavailable;

/// A message to the users actor: one variant per kind, each kind's enum in its module. `handle` has one arm per
/// variant, and each kind's actor-side module matches its own enum whole.
pub(super) enum UsersMsg {
    /// Accounts, and the organizations they belong to ([`accounts`]).
    Account(AccountMsg),
    /// Sign-in attempts against the failure limit ([`attempts`]).
    Attempt(AttemptMsg),
    /// Mailed links ([`tokens`]).
    Token(TokenMsg),
    /// Identities at other providers ([`linked`]).
    Linked(LinkedMsg),
    /// A change to an organization's members or invitations ([`members`]).
    Members(MemberMsg),
    /// The second factor ([`second_factor`]).
    Factor(FactorMsg),
    /// Accounts, one-time tokens, memberships and linked identities another node changed wait in the actor's
    /// inbox ([`super::inbox::Inbox`]): into the read indexes.
    Remote,
    /// Sign-in links and mailed codes ([`way_in`]).
    WayIn(WayInMsg),
    /// What an organization's directory does to its accounts over SCIM ([`scim`]).
    Scim(ScimMsg),
    Flush,
}

impl super::Letter for UsersMsg {
    fn caller_gone(&self) -> Option<bool> {
        match self {
            Self::Account(msg) => msg.caller_gone(),
            Self::Attempt(msg) => msg.caller_gone(),
            Self::Token(msg) => msg.caller_gone(),
            Self::Linked(msg) => msg.caller_gone(),
            Self::Members(msg) => msg.caller_gone(),
            Self::Factor(msg) => msg.caller_gone(),
            Self::WayIn(msg) => msg.caller_gone(),
            Self::Scim(msg) => msg.caller_gone(),
            // Another node's changes: this node's memory must follow them whatever.
            Self::Remote => None,
            Self::Flush => None,
        }
    }
}

/// Typed handle to the users actor. Its `async fn`s are in the module of each kind of message.
#[derive(Clone)]
pub struct UsersHandle(pub(super) super::Mailbox<UsersMsg>, pub(super) super::inbox::Post<super::remote::ForUsers>);

impl UsersHandle {
    /// Hands another node's accounts, tokens, memberships and linked identities to the actor's inbox; returns once
    /// they are in the read indexes.
    pub(super) async fn apply_remote(&self, change: super::remote::ForUsers) -> Result<(), Unavailable> {
        self.1.deliver(&self.0, UsersMsg::Remote, change).await
    }

    pub(in crate::actors) async fn drain(&self) {
        let _ = self.0.drain_and_wait(None).await;
    }
}
