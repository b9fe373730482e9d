//! The account messages to the users actor: what callers send and get back. Creating, changing and removing
//! accounts, setting up an administrator, lifting the bans that ran out, and deleting an organization (its
//! accounts are detached in the same commit); the actor's side is `actor/accounts.rs`.

use std::sync::Arc;

use ractor::RpcReplyPort;

use super::{UsersHandle, UsersMsg};
use crate::actors::{Unavailable, call};
use crate::domain::{Email, ImageUrl, Name, OrgId, Role, Timestamp, TokenHash, User, UserId, Username};

/// A new account, validated.
pub struct NewUser {
    pub name: Name,
    pub email: Email,
    pub image: Option<ImageUrl>,
    pub role: Role,
    pub password_hash: String,
    /// better-auth's `username` (checked against the taken and reserved names by the actor) and
    /// `displayUsername`.
    pub username: Option<Username>,
    pub display_username: Option<Box<str>>,
}

/// An administrator's change to an account. `None` leaves a field as it is.
#[derive(Debug, Default, Clone)]
pub struct UserChange {
    pub role: Option<Role>,
    /// `Some(true)` bans, `Some(false)` unbans (and forgets the reason).
    pub banned: Option<bool>,
    /// Recorded only on an account that is (or is being) banned.
    pub ban_reason: Option<crate::domain::BanReason>,
    /// With `banned: Some(true)`: when the ban ends by itself (`None`: when lifted).
    pub ban_expires: Option<Timestamp>,
    pub name: Option<Name>,
    /// `Some(None)` removes the picture.
    pub image: Option<Option<ImageUrl>>,
    pub email_verified: Option<bool>,
    /// `Some(None)` removes the account from its organization.
    pub organization: Option<Option<OrgId>>,
    /// A new password (its hash) set by the administrator: every session of the account ends with it.
    pub password_hash: Option<String>,
    /// better-auth's `username` (refused if another account has it or a look-alike) and `displayUsername`.
    pub username: Option<Username>,
    pub display_username: Option<Box<str>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CreateUserError {
    #[error("User already exists. Use another email.")]
    EmailTaken,
    /// The username, or one that looks like it, is another account's.
    #[error("Username is already taken. Please try another.")]
    UsernameTaken,
    /// The administrator creating it is no longer one (checked in message order).
    #[error("administrator role required")]
    NotAdmin,
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum UpdateUserError {
    #[error("administrator role required")]
    NotAdmin,
    #[error("user not found")]
    UserNotFound,
    #[error("organization not found")]
    OrganizationNotFound,
    #[error("you cannot ban yourself")]
    SelfBan,
    #[error("the last active administrator cannot be demoted or banned")]
    LastAdmin,
    /// Moving the account out of the organization it is the last owner of.
    #[error("the account is the last owner of its organization")]
    LastOwner,
    /// Another account has the username, or one that looks like it.
    #[error("Username is already taken. Please try another.")]
    UsernameTaken,
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
}

/// Who asks [`UsersHandle::ensure_admin`] for an administrator, for the audit log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AdminVia {
    /// `admin create` or the bootstrap variables: the operator at the server's terminal.
    CommandLine,
    /// The one-time setup link the server logs while no administrator exists, from this client address.
    SetupLink { ip: String },
}

/// What [`UsersHandle::ensure_admin`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EnsureAdmin {
    Created(UserId),
    Promoted(UserId),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum EnsureAdminError {
    /// An account with the e-mail exists and promoting it was not asked for: whoever signed up with the
    /// operator's e-mail would otherwise become administrator with their own password.
    #[error("an account with this e-mail already exists")]
    Exists,
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
}

/// A change a user makes to their own account.
#[derive(Debug, Clone)]
pub enum OwnChange {
    /// A new password (its hash); `end_sessions` ends every session of the account in the same commit.
    Password { password_hash: String, end_sessions: bool },
    /// Name, picture, username and its display form; `None` leaves a field as it is, `Some(None)` removes the
    /// picture.
    Profile {
        name: Option<Name>,
        image: Option<Option<ImageUrl>>,
        username: Option<Username>,
        display_username: Option<Box<str>>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum OwnChangeError {
    /// The account is gone (deleted in another request).
    #[error("User not found")]
    UserNotFound,
    /// The username, or one that looks like it, is another account's.
    #[error("Username is already taken. Please try another.")]
    UsernameTaken,
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DeleteUserError {
    #[error("User not found")]
    UserNotFound,
    #[error("administrator role required")]
    NotAdmin,
    /// An administrator removes other accounts, not their own (that is `delete-user`, with the password).
    #[error("You cannot remove yourself")]
    SelfRemoval,
    /// Deleting the last active administrator would leave nobody to administer the service.
    #[error("The last administrator cannot delete their account")]
    LastAdmin,
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DeleteOrgError {
    #[error("administrator role required")]
    NotAdmin,
    #[error("organization not found")]
    NotFound,
    /// Members would be left pointing at nothing; the caller must ask for them to be detached.
    #[error("the organization has {0} member(s); remove them first or pass detach_members=true")]
    NotEmpty(usize),
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
}

/// Who deletes an organization, and what goes with it in the deletion's commit.
#[derive(Debug, Clone, Copy)]
pub(in crate::actors) enum OrgDeleter {
    /// A global administrator (the admin API): the members are detached with `detach`, otherwise a non-empty
    /// organization is refused.
    Administrator { detach: bool },
    /// One of its members allowed to (an owner, or a global administrator on their own session), checked in
    /// message order (`organization/delete`): its memberships and invitations go with it. `active_in`: the
    /// caller's session, which works in it; it works in none from the same commit on.
    Member { active_in: Option<TokenHash> },
}

/// A change to accounts (and to the organizations they belong to).
pub(in crate::actors) enum AccountMsg {
    Create {
        user: NewUser,
        by: Option<UserId>,
        ip: String,
        reply: RpcReplyPort<Result<Arc<User>, CreateUserError>>,
    },
    Update {
        by: UserId,
        target: UserId,
        change: UserChange,
        ip: String,
        reply: RpcReplyPort<Result<Arc<User>, UpdateUserError>>,
    },
    EnsureAdmin {
        name: Name,
        email: Email,
        password_hash: String,
        promote_existing: bool,
        via: AdminVia,
        reply: RpcReplyPort<Result<EnsureAdmin, EnsureAdminError>>,
    },
    ChangeOwn {
        user: UserId,
        /// Whom the audit log names: the user, or the administrator impersonating them.
        by: UserId,
        change: OwnChange,
        ip: String,
        reply: RpcReplyPort<Result<Arc<User>, OwnChangeError>>,
    },
    Delete {
        user: UserId,
        by: Option<UserId>,
        ip: String,
        reply: RpcReplyPort<Result<(), DeleteUserError>>,
    },
    LiftExpiredBans {
        reply: RpcReplyPort<Result<usize, Unavailable>>,
    },
    /// Deletes an organization and, in the same commit, detaches its members (as `deleter` says).
    DeleteOrg {
        by: UserId,
        org: OrgId,
        deleter: OrgDeleter,
        ip: String,
        reply: RpcReplyPort<Result<usize, DeleteOrgError>>,
    },
}

impl AccountMsg {
    pub(super) fn caller_gone(&self) -> Option<bool> {
        use crate::actors::gone;
        match self {
            Self::Create { reply, .. } => gone(reply),
            Self::Update { reply, .. } => gone(reply),
            Self::ChangeOwn { reply, .. } => gone(reply),
            Self::EnsureAdmin { reply, .. } => gone(reply),
            Self::Delete { reply, .. } => gone(reply),
            Self::LiftExpiredBans { reply } => gone(reply),
            Self::DeleteOrg { reply, .. } => gone(reply),
        }
    }
}

impl UsersHandle {
    /// Creates an account (sign-up from address `ip`).
    pub async fn create(&self, user: NewUser, ip: String) -> Result<Arc<User>, CreateUserError> {
        call(&self.0, |reply| UsersMsg::Account(AccountMsg::Create { user, by: None, ip, reply })).await?
    }

    /// Creates an account on behalf of administrator `by` (checked again in message order).
    pub async fn create_by(&self, by: UserId, user: NewUser, ip: String) -> Result<Arc<User>, CreateUserError> {
        call(&self.0, |reply| UsersMsg::Account(AccountMsg::Create { user, by: Some(by), ip, reply })).await?
    }

    /// Applies `change` to `target` on behalf of administrator `by`, calling from `ip`. A ban ends every session
    /// of `target` before this returns. Returns the account as it was written.
    pub async fn update(
        &self,
        by: UserId,
        target: UserId,
        change: UserChange,
        ip: String,
    ) -> Result<Arc<User>, UpdateUserError> {
        call(&self.0, |reply| UsersMsg::Account(AccountMsg::Update { by, target, change, ip, reply })).await?
    }

    /// Creates `email` as an administrator. An existing account with that e-mail is refused, unless
    /// `promote_existing`: then it becomes an unbanned administrator with `password_hash` as its password, and
    /// every session it had ends in the same commit.
    pub async fn ensure_admin(
        &self,
        name: Name,
        email: Email,
        password_hash: String,
        promote_existing: bool,
        via: AdminVia,
    ) -> Result<EnsureAdmin, EnsureAdminError> {
        call(&self.0, |reply| {
            UsersMsg::Account(AccountMsg::EnsureAdmin { name, email, password_hash, promote_existing, via, reply })
        })
        .await?
    }

    /// A user's change to their own account, made by `by` (the user, or an administrator impersonating them: the
    /// audit log names them). A new password with `end_sessions` ends every session of the account in the same
    /// commit.
    pub async fn change_own(
        &self,
        user: UserId,
        by: UserId,
        change: OwnChange,
        ip: String,
    ) -> Result<Arc<User>, OwnChangeError> {
        call(&self.0, |reply| UsersMsg::Account(AccountMsg::ChangeOwn { user, by, change, ip, reply })).await?
    }

    /// Deletes the account and, in the same commit, every session of it (its membership goes with the record).
    pub async fn delete(&self, user: UserId, ip: String) -> Result<(), DeleteUserError> {
        call(&self.0, |reply| UsersMsg::Account(AccountMsg::Delete { user, by: None, ip, reply })).await?
    }

    /// Removes `user`'s account on behalf of administrator `by`: never their own, never the last administrator.
    pub async fn remove_by(&self, by: UserId, user: UserId, ip: String) -> Result<(), DeleteUserError> {
        call(&self.0, |reply| UsersMsg::Account(AccountMsg::Delete { user, by: Some(by), ip, reply })).await?
    }

    /// Deletes organization `org` on behalf of administrator `by`. Its members are detached in the same commit
    /// when `detach`; otherwise a non-empty organization is refused. Returns how many members were detached. The
    /// organization leaves the read index before this returns, and no account joins it meanwhile.
    pub async fn delete_organization(
        &self,
        by: UserId,
        org: OrgId,
        detach: bool,
        ip: String,
    ) -> Result<usize, DeleteOrgError> {
        let deleter = OrgDeleter::Administrator { detach };
        call(&self.0, |reply| UsersMsg::Account(AccountMsg::DeleteOrg { by, org, deleter, ip, reply })).await?
    }

    /// Deletes organization `org` on behalf of `by`, one of its members allowed to (an owner, checked in message
    /// order), with its memberships and invitations; the session `active_in` (the caller's, working in it) works in
    /// none from the same commit on.
    pub async fn delete_organization_as_member(
        &self,
        by: UserId,
        org: OrgId,
        active_in: Option<TokenHash>,
        ip: String,
    ) -> Result<usize, DeleteOrgError> {
        let deleter = OrgDeleter::Member { active_in };
        call(&self.0, |reply| UsersMsg::Account(AccountMsg::DeleteOrg { by, org, deleter, ip, reply })).await?
    }

    /// Lifts (durably, audited) every ban that has run out; returns how many. Such bans already stopped counting
    /// when they ran out: this only brings the records in line.
    pub async fn lift_expired_bans(&self) -> Result<usize, Unavailable> {
        call(&self.0, |reply| UsersMsg::Account(AccountMsg::LiftExpiredBans { reply })).await?
    }
}
