//! The linked-account messages to the users actor: what callers send and get back. An identity at another
//! provider signed in (its account found, linked or made, and with a sign-in its session started in the same
//! commit) or linked to the signed-in account, and a way into an account removed; the actor's side is
//! `actor/linked.rs`.

use std::sync::Arc;

use ractor::RpcReplyPort;

use super::{UsersHandle, UsersMsg};
use crate::actors::sessions::{Client, Started};
use crate::actors::{Unavailable, call};
use crate::domain::{AssertedMultiFactor, Email, ImageUrl, MemberRoles, Name, OrgId, TokenHash, User, UserId};

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
    /// An organization's single sign-on provider vouched for it (not one of `[[oauth.providers]]`).
    pub sso: Option<SsoSignIn>,
}

/// What a sign-in through an organization's single sign-on provider adds to an external one: it is audited as
/// such (`sign_in.sso`), and the account joins the provider's organization with the provider's default role (or
/// the roles its groups map to) in the sign-in's commit (unless it is a member already, or banned); with a role
/// mapping, an existing member's roles become the mapped ones too ([`SsoRoles`]).
#[derive(Debug, Clone)]
pub struct SsoSignIn {
    /// The provider's organization and the roles its new members get; `None`: a provider of no organization.
    pub join: Option<(OrgId, MemberRoles)>,
    /// Whether `join`'s roles come from the provider's role mapping, and so are an existing member's too.
    pub roles: SsoRoles,
    /// The provider asserted a multi-factor authentication: it stands in for the account's second factor at this
    /// sign-in (no challenge, no passkey asked for), and the audit entry says what the provider said.
    pub multi_factor: Option<AssertedMultiFactor>,
}

/// Where an SSO sign-in's roles come from (docs/guides/sso.md, "Groups and roles").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SsoRoles {
    /// The provider's default role, given on joining only: a later sign-in changes no one's roles.
    Default,
    /// The provider's role mapping (the default role when no group matched): the identity provider is the source
    /// of truth for the roles of the members who sign in through it, so an existing member's roles become these.
    /// Never the organization's last owner's `owner`; and `owner` is taken from nobody unless `grants_owner` (the
    /// mapping maps a group to owner, which only an owner can have set): ownership is the organization's to
    /// change otherwise.
    Mapped { grants_owner: bool },
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

/// A sign-in's session, to start in the commit that writes its account's records (see [`LinkedMsg::External`]).
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
    /// verified, at a provider not trusted for linking ([`super::rules::explicit_link`]).
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

/// An identity at another provider, or a way into an account.
pub(in crate::actors) enum LinkedMsg {
    /// Signs an identity at another provider in: its account, linked now, or created (see [`ExternalOutcome`]).
    /// With `link_to`, links it to that signed-in account instead. With `start` (a sign-in), the session starts in
    /// the same commit as the account's records and their audit entries, unless the account needs a second step.
    External {
        /// Boxed: the largest field of any message, it would size every message of the mailbox.
        identity: Box<ExternalIdentity>,
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
}

impl LinkedMsg {
    pub(super) fn caller_gone(&self) -> Option<bool> {
        use crate::actors::gone;
        match self {
            Self::External { reply, .. } => gone(reply),
            Self::Unlink { reply, .. } => gone(reply),
        }
    }
}

impl UsersHandle {
    /// Signs `identity` in, or links it to `link_to`; with `start`, the session too, in one commit (see
    /// [`LinkedMsg::External`]).
    pub async fn external(
        &self,
        identity: ExternalIdentity,
        link_to: Option<UserId>,
        role: crate::domain::Role,
        start: Option<ExternalStart>,
        ip: String,
    ) -> Result<ExternalSignIn, ExternalError> {
        call(&self.0, |reply| {
            UsersMsg::Linked(LinkedMsg::External { identity: Box::new(identity), link_to, role, start, ip, reply })
        })
        .await?
    }

    /// Removes one way into `user`'s account (see [`LinkedMsg::Unlink`]).
    pub async fn unlink(
        &self,
        user: UserId,
        account: Option<[u8; 16]>,
        by: UserId,
        ip: String,
    ) -> Result<(), UnlinkError> {
        call(&self.0, |reply| UsersMsg::Linked(LinkedMsg::Unlink { user, account, by, ip, reply })).await?
    }
}
