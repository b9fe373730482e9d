//! SCIM provisioning's messages to the users actor: what an organization's directory does to the accounts it
//! provisions, each one commit with its audit entries and the directory's record of the account
//! ([`ScimUserRecordV1`]); the actor's side is `actor/scim.rs`.
//!
//! Deactivating is a ban (its reason [`DEACTIVATED`]): every session ends and sign-in is refused in the same commit,
//! by the machinery every ban uses; reactivating lifts only that ban, never one an administrator set.

use std::sync::Arc;

use ractor::RpcReplyPort;

use super::{NewUser, UsersHandle, UsersMsg};
use crate::actors::{Unavailable, call};
use crate::domain::{Name, OrgId, User, UserId};
use crate::store::ScimUserRecordV1;

/// The ban reason of an account its organization's directory deactivated.
pub const DEACTIVATED: &str = "Deactivated by the organization's directory (SCIM)";

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ScimError {
    /// The primary e-mail belongs to an account already (RFC 7644 `uniqueness`; an account is never linked by
    /// its address alone).
    #[error("An account already uses this email")]
    EmailTaken,
    #[error("SCIM User not found")]
    UserNotFound,
    #[error("organization not found")]
    OrganizationNotFound,
    /// Deactivating or deleting the last active administrator of the service.
    #[error("the last active administrator cannot be deactivated or deleted")]
    LastAdmin,
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
}

/// A change an organization's directory makes to one of its accounts.
pub struct ScimChange {
    pub org: OrgId,
    pub user: UserId,
    /// The account's new name, when it changed.
    pub name: Option<Name>,
    /// The hash of the password the directory sets (`password` on PUT or PATCH): every session of the account
    /// ends with it, as with a password an administrator sets.
    pub password_hash: Option<String>,
    /// The directory's record as it is to be written (its `active` is the account's new state).
    pub record: ScimUserRecordV1,
    /// Whom the audit log names: the token's maker.
    pub by: UserId,
    /// For the audit details: which token.
    pub via: String,
}

pub(in crate::actors) enum ScimMsg {
    /// Creates the account (no password: it signs in as the organization arranges) and its membership of `org` as
    /// `member`, with the directory's record; `record.user` is filled in with the new account's id.
    Provision {
        org: OrgId,
        user: NewUser,
        record: ScimUserRecordV1,
        by: UserId,
        via: String,
        ip: String,
        reply: RpcReplyPort<Result<Arc<User>, ScimError>>,
    },
    Change {
        change: ScimChange,
        ip: String,
        reply: RpcReplyPort<Result<Arc<User>, ScimError>>,
    },
    /// Ends the membership of `org` and the directory's record; the account too when no other organization has
    /// it (then every session ends with it).
    Deprovision {
        org: OrgId,
        user: UserId,
        by: UserId,
        via: String,
        ip: String,
        reply: RpcReplyPort<Result<(), ScimError>>,
    },
}

impl ScimMsg {
    pub(super) fn caller_gone(&self) -> Option<bool> {
        use crate::actors::gone;
        match self {
            Self::Provision { reply, .. } => gone(reply),
            Self::Change { reply, .. } => gone(reply),
            Self::Deprovision { reply, .. } => gone(reply),
        }
    }
}

impl UsersHandle {
    /// Provisions an account for organization `org`'s directory: the account, its membership and the directory's
    /// record in one commit.
    pub async fn scim_provision(
        &self,
        org: OrgId,
        user: NewUser,
        record: ScimUserRecordV1,
        by: UserId,
        via: String,
        ip: String,
    ) -> Result<Arc<User>, ScimError> {
        call(&self.0, |reply| UsersMsg::Scim(ScimMsg::Provision { org, user, record, by, via, ip, reply })).await?
    }

    /// Writes the directory's change to an account: its record, its name, and a deactivation (every session ends,
    /// sign-in is refused) or reactivation, in one commit.
    pub async fn scim_change(&self, change: ScimChange, ip: String) -> Result<Arc<User>, ScimError> {
        call(&self.0, |reply| UsersMsg::Scim(ScimMsg::Change { change, ip, reply })).await?
    }

    /// Deprovisions an account from `org`: see [`ScimMsg::Deprovision`].
    pub async fn scim_deprovision(
        &self,
        org: OrgId,
        user: UserId,
        by: UserId,
        via: String,
        ip: String,
    ) -> Result<(), ScimError> {
        call(&self.0, |reply| UsersMsg::Scim(ScimMsg::Deprovision { org, user, by, via, ip, reply })).await?
    }
}
