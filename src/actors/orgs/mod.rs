//! The organizations actor: organizations and the uniqueness of their slugs.
//!
//! - this file: what callers see (the handle, its messages, the errors they carry);
//! - [`index`]: the read index;
//! - `actor`: the actor, which handles the messages in order and writes through the overlay.

mod actor;
pub mod groups;
mod index;
pub mod members;
pub mod policy;
pub mod roles;
mod roster;
pub mod teams;

use std::sync::Arc;

use ractor::RpcReplyPort;

use super::{Mailbox, Unavailable, call, gone};
use crate::domain::{Name, OrgId, Organization, Slug, TokenHash, UserId};

pub(super) use actor::spawn;
pub use index::OrgIndex;
pub use members::MemberIndex;

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CreateOrgError {
    #[error("an organization with this slug already exists")]
    SlugTaken,
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum UpdateOrgError {
    #[error("organization not found")]
    NotFound,
    #[error("an organization with this slug already exists")]
    SlugTaken,
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
}

pub(super) enum OrgsMsg {
    Create {
        name: Name,
        slug: Slug,
        /// better-auth's `logo` and `metadata` (JSON text).
        logo: Option<Box<str>>,
        metadata: Option<Box<str>>,
        /// Who becomes its `owner`, in the same commit (`organization/create`); `None` for an administrator's
        /// organization without members.
        owner: Option<UserId>,
        /// The owner's session that works in it from the same commit on (`organization/create` without
        /// `keepCurrentActiveOrganization`): the organizations actor hands that commit to the sessions actor.
        active_in: Option<TokenHash>,
        /// With teams on: a team named as the organization, the owner in it (the plugin's `defaultTeam`).
        default_team: bool,
        by: UserId,
        ip: String,
        reply: RpcReplyPort<Result<Arc<Organization>, CreateOrgError>>,
    },
    Update {
        id: OrgId,
        name: Option<Name>,
        slug: Option<Slug>,
        /// `Some(None)` removes the logo.
        logo: Option<Option<Box<str>>>,
        metadata: Option<Box<str>>,
        by: UserId,
        ip: String,
        reply: RpcReplyPort<Result<Arc<Organization>, UpdateOrgError>>,
    },
    /// No change to `id` until [`OrgsMsg::EndDelete`]: its deletion is under way in the users actor.
    BeginDelete {
        id: OrgId,
        reply: RpcReplyPort<bool>,
    },
    EndDelete {
        id: OrgId,
    },
    /// Organization `id` as it is once everything pending is durable, for the users actor to write its next version
    /// in one of its own commits (an invitation accepted into its teams); no other message is handled until `back`
    /// says the loan is over (see [`OrgsHandle::lend`]).
    Lend {
        id: OrgId,
        back: tokio::sync::oneshot::Receiver<()>,
        reply: RpcReplyPort<Option<Arc<Organization>>>,
    },
    /// Organizations another node created, changed (`Some`) or deleted (`None`): into the read index.
    Remote {
        orgs: Vec<(OrgId, Option<Arc<Organization>>)>,
        gate: crate::store::own::Gate,
        reply: RpcReplyPort<()>,
    },
    Team(teams::TeamMsg),
    Group(groups::GroupMsg),
    Role(roles::RoleMsg),
    Policy(policy::PolicyMsg),
    Flush,
}

impl super::Letter for OrgsMsg {
    fn caller_gone(&self) -> Option<bool> {
        match self {
            Self::Create { reply, .. } => gone(reply),
            Self::Update { reply, .. } => gone(reply),
            Self::BeginDelete { reply, .. } => gone(reply),
            Self::Lend { reply, .. } => gone(reply),
            Self::Team(msg) => msg.caller_gone(),
            Self::Group(msg) => msg.caller_gone(),
            Self::Role(msg) => msg.caller_gone(),
            Self::Policy(msg) => msg.caller_gone(),
            // Another node's changes: this node's memory must follow them whatever.
            Self::Remote { .. } => None,
            Self::EndDelete { .. } | Self::Flush => None,
        }
    }
}

/// An organization lent by [`OrgsHandle::lend`]: the loan ends when this is dropped.
pub struct Loan {
    _done: tokio::sync::oneshot::Sender<()>,
}

/// Typed handle to the organizations actor.
#[derive(Clone)]
pub struct OrgsHandle(pub(super) Mailbox<OrgsMsg>);

impl OrgsHandle {
    /// Organizations another node created, changed or deleted; returns once they are in the read index.
    pub(in crate::actors) async fn apply_remote(
        &self,
        orgs: Vec<(OrgId, Option<Arc<Organization>>)>,
        gate: crate::store::own::Gate,
    ) -> Result<(), Unavailable> {
        call(&self.0, |reply| OrgsMsg::Remote { orgs, gate, reply }).await
    }

    /// Creates an organization on behalf of administrator `by`, calling from address `ip`.
    pub async fn create(
        &self,
        name: Name,
        slug: Slug,
        by: UserId,
        ip: String,
    ) -> Result<Arc<Organization>, CreateOrgError> {
        let (logo, metadata, owner, active_in, default_team) = (None, None, None, None, false);
        call(&self.0, |reply| OrgsMsg::Create {
            name,
            slug,
            logo,
            metadata,
            owner,
            active_in,
            default_team,
            by,
            ip,
            reply,
        })
        .await?
    }

    /// `organization/create`: an organization whose `owner` is `by`, and in which `by`'s session `active_in` works,
    /// in the same commit; with `default_team`, a team of its name with the owner in it, in that commit too.
    #[allow(clippy::too_many_arguments)]
    pub async fn create_owned(
        &self,
        name: Name,
        slug: Slug,
        logo: Option<Box<str>>,
        metadata: Option<Box<str>>,
        by: UserId,
        active_in: Option<TokenHash>,
        default_team: bool,
        ip: String,
    ) -> Result<Arc<Organization>, CreateOrgError> {
        let owner = Some(by);
        call(&self.0, |reply| OrgsMsg::Create {
            name,
            slug,
            logo,
            metadata,
            owner,
            active_in,
            default_team,
            by,
            ip,
            reply,
        })
        .await?
    }

    /// Renames organization `id` (name, slug or both) on behalf of administrator `by`.
    pub async fn update(
        &self,
        id: OrgId,
        name: Option<Name>,
        slug: Option<Slug>,
        by: UserId,
        ip: String,
    ) -> Result<Arc<Organization>, UpdateOrgError> {
        let (logo, metadata) = (None, None);
        call(&self.0, |reply| OrgsMsg::Update { id, name, slug, logo, metadata, by, ip, reply }).await?
    }

    /// `organization/update`: [`update`](Self::update) with the logo and metadata too.
    #[allow(clippy::too_many_arguments)]
    pub async fn update_details(
        &self,
        id: OrgId,
        name: Option<Name>,
        slug: Option<Slug>,
        logo: Option<Option<Box<str>>>,
        metadata: Option<Box<str>>,
        by: UserId,
        ip: String,
    ) -> Result<Arc<Organization>, UpdateOrgError> {
        call(&self.0, |reply| OrgsMsg::Update { id, name, slug, logo, metadata, by, ip, reply }).await?
    }

    /// Holds every change to `id` back while the users actor deletes it (with its memberships, in one commit);
    /// `false` if there is no such organization. Must be followed by [`end_delete`](Self::end_delete).
    pub async fn begin_delete(&self, id: OrgId) -> Result<bool, Unavailable> {
        call(&self.0, |reply| OrgsMsg::BeginDelete { id, reply }).await
    }

    pub fn end_delete(&self, id: OrgId) {
        let _ = self.0.send_message(OrgsMsg::EndDelete { id });
    }

    /// Lends organization `id` (`None` if there is none) to a change another actor commits with its own records: a
    /// place in its teams that must be durable in the same commit as a membership (accept-invitation). Until the
    /// [`Loan`] is dropped this actor handles nothing else, so nothing it writes can land between the version lent
    /// and the one the borrower publishes. Loans are short (one commit of the users actor, which never waits for
    /// this actor) and rare, so holding every organization back is simpler than queueing per organization.
    pub async fn lend(&self, id: OrgId) -> Result<Option<(Arc<Organization>, Loan)>, Unavailable> {
        let (done, back) = tokio::sync::oneshot::channel();
        let lent = call(&self.0, |reply| OrgsMsg::Lend { id, back, reply }).await?;
        Ok(lent.map(|org| (org, Loan { _done: done })))
    }

    pub(super) async fn drain(&self) {
        let _ = self.0.drain_and_wait(None).await;
    }
}
