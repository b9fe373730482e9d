//! The users actor: accounts, the e-mail index, role and ban changes, and the guards on them.
//!
//! - this file: what callers see (the handle, its messages, the values and errors they carry);
//! - [`index`]: the read index;
//! - [`rules`]: the rules of a change, pure functions;
//! - `actor`: the actor, which applies the rules in message order and writes through the overlay.

mod actor;
mod index;
pub mod members;
pub mod rules;
mod second_factor;

use std::sync::Arc;
use std::time::Duration;

use ractor::RpcReplyPort;

pub(super) use actor::spawn;
pub(crate) use index::Apart;
pub use index::{Place, UserIndex};
use members::MemberMsg;
use second_factor::FactorMsg;
pub use second_factor::{FactorChange, FactorError, PassError, Passed, Proof};

use super::sessions::{Client, CreateSessionError, StartWith, Started};
use super::{Unavailable, call};
use crate::domain::{
    Email, ImageUrl, Mail, Name, OrgId, Role, SessionToken, Timestamp, TokenHash, TokenKind, User, UserId,
};

/// A new account, validated.
pub struct NewUser {
    pub name: Name,
    pub email: Email,
    pub image: Option<ImageUrl>,
    pub role: Role,
    pub password_hash: String,
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
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CreateUserError {
    #[error("User already exists. Use another email.")]
    EmailTaken,
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
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
}

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
    /// Name and picture; `None` leaves a field as it is, `Some(None)` removes the picture.
    Profile { name: Option<Name>, image: Option<Option<ImageUrl>> },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum OwnChangeError {
    /// The account is gone (deleted in another request).
    #[error("User not found")]
    UserNotFound,
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

/// An identity another provider vouched for (src/oauth), as the callback gives it.
#[derive(Debug, Clone)]
pub struct ExternalIdentity {
    /// The configured provider's id.
    pub provider: String,
    /// The provider's stable identifier of the person.
    pub subject: String,
    pub email: Email,
    /// Whether the provider asserts it verified the address.
    pub email_verified: bool,
    pub name: Name,
    pub image: Option<ImageUrl>,
    /// `[[oauth.providers]] trusted_for_linking`: its verified addresses may link to an existing account.
    pub trusted: bool,
    /// `[[oauth.providers]] allow_unverified_email_sign_up`: an address it does not assert as verified may still
    /// make a new account.
    pub sign_up_unverified: bool,
    /// The provider's tokens sealed with the data directory's key (`[oauth] store_tokens`), kept with the link.
    pub sealed_tokens: Option<Vec<u8>>,
}

/// Which account an identity signs into.
#[derive(Debug, Clone)]
pub enum ExternalOutcome {
    /// The identity was linked to this account before.
    Existing(Arc<User>),
    /// Linked now: to the signed-in user who asked (`link-social`), or to the account with the same address
    /// (verified by a trusted provider).
    Linked(Arc<User>),
    /// A new account, with no password.
    Created(Arc<User>),
}

/// A sign-in's session, to start in the commit that writes its account's records (see [`UsersMsg::External`]).
#[derive(Debug, Clone)]
pub struct ExternalStart {
    pub client: Client,
    /// `require_verification`: an account whose address is not verified gets no session (the caller refuses it).
    pub verified_only: bool,
    /// This browser's trusted device (its token's hash) and the hash of the token to replace it with: an account
    /// with a second factor signs in through a live one of its own, renewed in the same commit.
    pub device: Option<(TokenHash, TokenHash)>,
    /// `[two_factor] required_for_roles`: an account of such a role without an authenticator is left to the
    /// caller, which reads whether a passkey is its second factor (the store, not memory, knows).
    pub factor_roles: Arc<[String]>,
}

/// What [`UsersHandle::external`] gives.
#[derive(Debug)]
pub struct ExternalSignIn {
    pub outcome: ExternalOutcome,
    /// The session started with the account's records, when one was asked for and the account needs no second
    /// step; `None` leaves the sign-in to the caller (a link, a second factor without a trusted device, an address
    /// not verified under `require_verification`).
    pub session: Option<ExternalSession>,
}

/// A session started in an external sign-in's commit.
#[derive(Debug)]
pub struct ExternalSession {
    /// The session, or why it was refused (a banned account: recorded as a refused sign-in in the same commit).
    pub started: Started,
    /// Through the trusted device: it was renewed (its token is the one the caller gave to replace it).
    pub device_renewed: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ExternalError {
    /// An account has this address, and the provider is not trusted for linking or does not assert that it
    /// verified the address: no silent takeover. The owner may link the identity once signed in.
    /// (Also when the account's own address was never proven: whoever signed up with it may not be its owner.)
    #[error("account not linked")]
    NotLinked,
    /// No account here has the address, and the provider does not assert it verified it: no account is made
    /// from it (unless the provider's `allow_unverified_email_sign_up`).
    #[error("email not verified")]
    UnverifiedEmail,
    /// A link the signed-in user asked for, of an identity whose address the provider does not assert as
    /// verified, at a provider not trusted for linking ([`rules::explicit_link`]).
    #[error("linking not allowed")]
    LinkingNotAllowed,
    /// The identity is linked to another account.
    #[error("account already linked to different user")]
    LinkedElsewhere,
    /// `link-social`: the provider's address is not the signed-in user's.
    #[error("email doesn't match")]
    EmailMismatch,
    /// `link-social`: the account asking is gone.
    #[error("User not found")]
    UserGone,
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum UnlinkError {
    #[error("Account not found")]
    NotFound,
    /// The account would have no way in left.
    #[error("You can't unlink your last account")]
    LastWayIn,
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
}

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

/// What [`UsersHandle::sign_in_upgrading`] gives: the new session, or `None` when nothing was done.
pub type UpgradedStart = Result<Option<(SessionToken, Arc<crate::domain::Session>)>, CreateSessionError>;

pub(super) enum UsersMsg {
    IssueToken {
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
    BeginAttempt {
        email: Email,
        user: Option<UserId>,
        ip: String,
        reply: RpcReplyPort<Result<(), AttemptRefused>>,
    },
    SignInUpgrading {
        from: String,
        to: String,
        start: StartWith,
        reply: RpcReplyPort<UpgradedStart>,
    },
    FinishAttempt {
        email: Email,
        user: Option<UserId>,
        checked: Checked,
        /// A second factor's code was checked, not a password (for the audit log's wording).
        code: bool,
        ip: String,
        reply: RpcReplyPort<Result<(), Unavailable>>,
    },
    /// Deletes an organization and, in the same commit, detaches its members (only with `detach`). `as_member`:
    /// `by` deletes it as one of its members allowed to (an owner), not as a global administrator.
    DeleteOrg {
        by: UserId,
        org: OrgId,
        detach: bool,
        as_member: bool,
        ip: String,
        reply: RpcReplyPort<Result<usize, DeleteOrgError>>,
    },
    /// A change to an organization's members or invitations ([`members`]).
    Members(MemberMsg),
    LiftExpiredBans {
        reply: RpcReplyPort<Result<usize, Unavailable>>,
    },
    /// A reservation the shared limit refused: give back the one this node took.
    ReleaseLocal {
        email: Email,
    },
    /// Signs an identity at another provider in: its account, linked now, or created (see [`ExternalOutcome`]).
    /// With `link_to`, links it to that signed-in account instead. With `start` (a sign-in), the session starts in
    /// the same commit as the account's records and their audit entries, unless the account needs a second step.
    External {
        identity: ExternalIdentity,
        link_to: Option<UserId>,
        role: crate::domain::Role,
        start: Option<ExternalStart>,
        ip: String,
        reply: RpcReplyPort<Result<ExternalSignIn, ExternalError>>,
    },
    /// Removes a linked identity (`Some(id)`) or the password (`None`, better-auth's "credential" account) of
    /// `user`, never the last way in; `by` is who asked (the user, or an administrator).
    Unlink {
        user: UserId,
        account: Option<[u8; 16]>,
        by: UserId,
        ip: String,
        reply: RpcReplyPort<Result<(), UnlinkError>>,
    },
    /// Accounts, one-time tokens, memberships and linked identities another node changed wait in the actor's
    /// inbox ([`super::inbox::Inbox`]): into the read indexes.
    Remote,
    /// The second factor ([`second_factor`]).
    Factor(FactorMsg),
    Flush,
}

impl super::Letter for UsersMsg {
    fn caller_gone(&self) -> Option<bool> {
        use super::gone;
        match self {
            Self::IssueToken { reply, .. } => gone(reply),
            Self::VerifyEmail { reply, .. } | Self::ResetPassword { reply, .. } => gone(reply),
            Self::ChangeOwn { reply, .. } => gone(reply),
            Self::Delete { reply, .. } => gone(reply),
            Self::Create { reply, .. } => gone(reply),
            Self::Update { reply, .. } => gone(reply),
            Self::EnsureAdmin { reply, .. } => gone(reply),
            Self::BeginAttempt { reply, .. } => gone(reply),
            Self::Factor(msg) => msg.caller_gone(),
            Self::SignInUpgrading { reply, .. } => gone(reply),
            Self::DeleteOrg { reply, .. } => gone(reply),
            Self::Members(msg) => msg.caller_gone(),
            Self::LiftExpiredBans { reply } => gone(reply),
            Self::External { reply, .. } => gone(reply),
            Self::Unlink { reply, .. } => gone(reply),
            // Ends a reservation made earlier: dropped, it would count against the account until its window ends.
            Self::FinishAttempt { .. } => None,
            // Another node's changes: this node's memory must follow them whatever.
            Self::Remote => None,
            Self::ReleaseLocal { .. } | Self::Flush => None,
        }
    }
}

/// Typed handle to the users actor.
#[derive(Clone)]
pub struct UsersHandle(pub(super) super::Mailbox<UsersMsg>, pub(super) super::inbox::Post<super::remote::ForUsers>);

impl UsersHandle {
    /// Hands another node's accounts, tokens, memberships and linked identities to the actor's inbox; returns once
    /// they are in the read indexes.
    pub(super) async fn apply_remote(&self, change: super::remote::ForUsers) -> Result<(), Unavailable> {
        self.1.deliver(&self.0, UsersMsg::Remote, change).await
    }

    /// Creates an account (sign-up from address `ip`).
    pub async fn create(&self, user: NewUser, ip: String) -> Result<Arc<User>, CreateUserError> {
        call(&self.0, |reply| UsersMsg::Create { user, by: None, ip, reply }).await?
    }

    /// Creates an account on behalf of administrator `by` (checked again in message order).
    pub async fn create_by(&self, by: UserId, user: NewUser, ip: String) -> Result<Arc<User>, CreateUserError> {
        call(&self.0, |reply| UsersMsg::Create { user, by: Some(by), ip, reply }).await?
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
        call(&self.0, |reply| UsersMsg::Update { by, target, change, ip, reply }).await?
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
        call(&self.0, |reply| UsersMsg::EnsureAdmin { name, email, password_hash, promote_existing, via, reply })
            .await?
    }

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
        call(&self.0, |reply| UsersMsg::IssueToken { kind, email, ttl, compose, ip, reply }).await?
    }

    /// Uses the verification token `token` (once): the account's address is verified.
    pub async fn verify_email(&self, token: TokenHash, ip: String) -> Result<(), ResetError> {
        call(&self.0, |reply| UsersMsg::VerifyEmail { token, ip, reply }).await?
    }

    /// Uses the reset token `token` (once): the new password, the end of every session and the end of the token
    /// in one commit.
    pub async fn reset_password(&self, token: TokenHash, password_hash: String, ip: String) -> Result<(), ResetError> {
        call(&self.0, |reply| UsersMsg::ResetPassword { token, password_hash, ip, reply }).await?
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
        call(&self.0, |reply| UsersMsg::ChangeOwn { user, by, change, ip, reply }).await?
    }

    /// Deletes the account and, in the same commit, every session of it (its membership goes with the record).
    pub async fn delete(&self, user: UserId, ip: String) -> Result<(), DeleteUserError> {
        call(&self.0, |reply| UsersMsg::Delete { user, by: None, ip, reply }).await?
    }

    /// Removes `user`'s account on behalf of administrator `by`: never their own, never the last administrator.
    pub async fn remove_by(&self, by: UserId, user: UserId, ip: String) -> Result<(), DeleteUserError> {
        call(&self.0, |reply| UsersMsg::Delete { user, by: Some(by), ip, reply }).await?
    }

    /// Reserves one password check against the failure limit of `email` (see [`super::attempts`]); `user` is the
    /// account it names, if any, for the audit log. Every reservation must be ended with
    /// [`finish_attempt`](Self::finish_attempt), whatever happens to the request in between.
    pub async fn begin_attempt(&self, email: Email, user: Option<UserId>, ip: String) -> Result<(), AttemptRefused> {
        call(&self.0, |reply| UsersMsg::BeginAttempt { email, user, ip, reply }).await?
    }

    /// Ends a sign-in's password check. A failure is recorded in the audit log (within the bounds described in
    /// [`super::attempts`]) before this returns; a success is recorded with the new session, by the sessions
    /// actor.
    pub async fn finish_attempt(
        &self,
        email: Email,
        user: Option<UserId>,
        checked: Checked,
        ip: String,
    ) -> Result<(), Unavailable> {
        call(&self.0, |reply| UsersMsg::FinishAttempt { email, user, checked, code: false, ip, reply }).await?
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
        call(&self.0, |reply| UsersMsg::FinishAttempt { email, user: Some(user), checked, code: true, ip, reply })
            .await?
    }

    /// A sign-in whose password was verified against an imported hash `from`: replaces it with `to` (argon2id) and
    /// starts the session in the same commit, so that neither is durable without the other. `Ok(None)`: the hash
    /// is no longer `from` (changed meanwhile), nothing was done, and the session is to be started as usual.
    pub async fn sign_in_upgrading(&self, from: String, to: String, start: StartWith) -> UpgradedStart {
        call(&self.0, |reply| UsersMsg::SignInUpgrading { from, to, start, reply }).await?
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
        call(&self.0, |reply| UsersMsg::DeleteOrg { by, org, detach, as_member: false, ip, reply }).await?
    }

    /// Deletes organization `org` on behalf of `by`, one of its members allowed to (an owner, checked in message
    /// order), with its memberships and invitations.
    pub async fn delete_organization_as_member(
        &self,
        by: UserId,
        org: OrgId,
        ip: String,
    ) -> Result<usize, DeleteOrgError> {
        call(&self.0, |reply| UsersMsg::DeleteOrg { by, org, detach: true, as_member: true, ip, reply }).await?
    }

    /// Lifts (durably, audited) every ban that has run out; returns how many. Such bans already stopped counting
    /// when they ran out: this only brings the records in line.
    pub async fn lift_expired_bans(&self) -> Result<usize, Unavailable> {
        call(&self.0, |reply| UsersMsg::LiftExpiredBans { reply }).await?
    }

    /// Signs `identity` in, or links it to `link_to`; with `start`, the session too, in one commit (see
    /// [`UsersMsg::External`]).
    pub async fn external(
        &self,
        identity: ExternalIdentity,
        link_to: Option<UserId>,
        role: crate::domain::Role,
        start: Option<ExternalStart>,
        ip: String,
    ) -> Result<ExternalSignIn, ExternalError> {
        call(&self.0, |reply| UsersMsg::External { identity, link_to, role, start, ip, reply }).await?
    }

    /// Removes one way into `user`'s account (see [`UsersMsg::Unlink`]).
    pub async fn unlink(
        &self,
        user: UserId,
        account: Option<[u8; 16]>,
        by: UserId,
        ip: String,
    ) -> Result<(), UnlinkError> {
        call(&self.0, |reply| UsersMsg::Unlink { user, account, by, ip, reply }).await?
    }

    pub(in crate::actors) async fn drain(&self) {
        let _ = self.0.drain_and_wait(None).await;
    }
}

/// The per-account limit on failed sign-ins.
#[derive(Debug, Clone, Copy)]
pub struct AttemptPolicy {
    pub max_failures: u32,
    pub window: Duration,
    /// Several nodes share the limit: each check is also reserved in the database (docs/cluster.md).
    pub shared: bool,
}
