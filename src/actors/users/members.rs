//! Memberships and invitations: the better-auth organization plugin's changes, what callers send and get back.
//! Each is checked in the users actor's message order against the state as it is (the caller's membership and
//! role, the owners left, the limits), so that two requests racing each other cannot both pass a rule only one of
//! them may pass (the last owner); the actor's side is `actor/members.rs`.
//!
//! The users actor owns memberships with the accounts: an account's `organizationId` is its primary membership,
//! and a change to one is a change to the other in the same commit.

use std::sync::Arc;
use std::time::Duration;

use ractor::RpcReplyPort;

use super::{UsersHandle, UsersMsg};
use crate::actors::call;
use crate::actors::overlay::Refusal;
use crate::actors::sessions::Activate;
use crate::domain::{
    Email, Invitation, InvitationId, InvitedTeams, Mail, MemberId, MemberRoles, Membership, OrgId, Organization,
    TeamId, TokenHash, UserId,
};
use crate::store::StoreOp;

/// Who calls: the user whose session it is, whom the audit log names (the administrator behind an impersonation),
/// and whether they are a global administrator on their own session (who may act as an owner of every
/// organization).
#[derive(Debug, Clone, Copy)]
pub struct Caller {
    pub user: UserId,
    pub actor: UserId,
    pub global_admin: bool,
    /// The session the call comes from, when its active organization follows the change: joining
    /// (`accept-invitation`) makes the organization active, ending one's own membership (`leave`, `remove-member`
    /// of oneself) clears it if it was the active one, in the change's commit.
    pub session: Option<CallerSession>,
}

/// A caller's session (its token's hash) and the organization it works in now.
#[derive(Debug, Clone, Copy)]
pub struct CallerSession {
    pub token: TokenHash,
    pub active: Option<OrgId>,
}

/// Renders the invitation's message (organization name and inviter are the actor's to fill in).
pub type InviteMail = Box<dyn FnOnce(&Invitation, &str, &str) -> Mail + Send>;

/// Whom `remove-member` removes.
#[derive(Debug, Clone)]
pub enum Target {
    Member(MemberId),
    Email(Email),
}

/// `invite-member`; `resend` sends a pending invitation again with a new expiry. `mail` is `None` without a mail
/// transport: the invitation stands all the same, unmailed, as better-auth's without `sendInvitationEmail` (the
/// invitee sees it in `list-user-invitations`; the `organization.invitation_created` webhook lets the application
/// deliver it).
pub struct Invite {
    pub org: OrgId,
    pub email: Email,
    pub roles: MemberRoles,
    pub resend: bool,
    pub ttl: Duration,
    /// The organization's most pending invitations.
    pub limit: usize,
    pub mail: Option<InviteMail>,
    /// The teams of `org` accepting puts the invitee in (teams on), and their most members each
    /// (`maximum_members_per_team`).
    pub teams: InvitedTeams,
    pub team_limit: Option<usize>,
}

/// What accepting an invitation that names teams needs: its organization as the organizations actor lent it (see
/// [`crate::actors::orgs::OrgsHandle::lend`]: no other change to it until the acceptance is published, so the new
/// version written with the membership is built on the latest), and the teams' most members.
pub struct Lent {
    pub org: Arc<Organization>,
    pub team_limit: Option<usize>,
}

/// Why a change was refused: better-auth's codes and messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum MemberError {
    #[error("Member not found")]
    MemberNotFound,
    #[error("Organization not found")]
    OrganizationNotFound,
    #[error("You are not allowed to update this member")]
    NotAllowedToUpdateMember,
    #[error("You are not allowed to delete this member")]
    NotAllowedToDeleteMember,
    #[error("You cannot leave the organization without an owner")]
    WithoutAnOwner,
    #[error("You cannot leave the organization as the only owner")]
    OnlyOwner,
    #[error("You are not allowed to invite users to this organization")]
    NotAllowedToInvite,
    #[error("You are not allowed to invite a user with this role")]
    NotAllowedToInviteWithRole,
    #[error("User is already a member of this organization")]
    AlreadyMember,
    #[error("User is already invited to this organization")]
    AlreadyInvited,
    #[error("Invitation limit reached")]
    InvitationLimitReached,
    #[error("Invitation not found")]
    InvitationNotFound,
    #[error("You are not the recipient of the invitation")]
    NotRecipient,
    #[error("Organization membership limit reached")]
    MembershipLimitReached,
    #[error("You are not allowed to cancel this invitation")]
    NotAllowedToCancel,
    #[error("Too much mail is waiting to be sent. Please try again later.")]
    OutboxFull,
    /// A team the invitation names is not one of its organization's (any more).
    #[error("Team not found")]
    TeamNotFound,
    #[error("Team member limit reached")]
    TeamFull,
    #[error(transparent)]
    Unavailable(#[from] crate::actors::Unavailable),
}

/// The reply of a change that gives back a membership (the one written, or the one that ended).
type MemberReply = RpcReplyPort<Result<Arc<Membership>, MemberError>>;
/// The reply of a change that gives back an invitation (as written).
type InvitationReply = RpcReplyPort<Result<Arc<Invitation>, MemberError>>;
/// The reply of an accepted invitation: the invitation used up and the membership.
type AcceptReply = RpcReplyPort<Result<(Arc<Invitation>, Arc<Membership>), MemberError>>;

/// A change to an organization's members or invitations by `caller`, each answered with what it wrote.
pub(in crate::actors) enum MemberMsg {
    /// `update-member-role`.
    SetRoles { caller: Caller, org: OrgId, member: MemberId, roles: MemberRoles, ip: String, reply: MemberReply },
    /// `remove-member`: the membership that ended.
    Remove { caller: Caller, org: OrgId, target: Target, ip: String, reply: MemberReply },
    /// `leave`: the caller's membership that ended.
    Leave { caller: Caller, org: OrgId, ip: String, reply: MemberReply },
    /// `invite-member`.
    Invite { caller: Caller, invite: Invite, ip: String, reply: InvitationReply },
    /// `accept-invitation`, by the account with the invited e-mail: the invitation used up and the membership.
    /// `lent`: the invitation's organization, when the invitation names teams.
    Accept {
        caller: Caller,
        id: InvitationId,
        email: Email,
        member_limit: usize,
        lent: Option<Lent>,
        ip: String,
        reply: AcceptReply,
    },
    /// `reject-invitation`, by the account with the invited e-mail.
    Reject { caller: Caller, id: InvitationId, email: Email, ip: String, reply: InvitationReply },
    /// `cancel-invitation`.
    Cancel { caller: Caller, id: InvitationId, ip: String, reply: InvitationReply },
    /// The organizations actor's batch that removes `teams` (each of its organization): committed here, with the
    /// pending invitations that named them naming them no more, and the sessions' changes `activating`.
    CommitTeamsRemoved {
        ops: Vec<StoreOp>,
        activating: Vec<Activate>,
        teams: Vec<(OrgId, TeamId)>,
        reply: RpcReplyPort<Result<(), Refusal>>,
    },
}

impl MemberMsg {
    pub(super) fn caller_gone(&self) -> Option<bool> {
        use crate::actors::gone;
        match self {
            Self::SetRoles { reply, .. } | Self::Remove { reply, .. } | Self::Leave { reply, .. } => gone(reply),
            Self::Invite { reply, .. } | Self::Reject { reply, .. } | Self::Cancel { reply, .. } => gone(reply),
            // Into a lent organization: the loan waits for this very answer (see `accept_invitation`).
            Self::Accept { lent: Some(_), .. } => None,
            Self::Accept { reply, .. } => gone(reply),
            // Another actor's batch, whose caller waits for its real outcome.
            Self::CommitTeamsRemoved { .. } => None,
        }
    }
}

impl UsersHandle {
    /// `update-member-role`: `member` of `org` gets `roles`; the membership as written.
    pub async fn set_member_roles(
        &self,
        caller: Caller,
        org: OrgId,
        member: MemberId,
        roles: MemberRoles,
        ip: String,
    ) -> Result<Arc<Membership>, MemberError> {
        call(&self.0, |reply| UsersMsg::Members(MemberMsg::SetRoles { caller, org, member, roles, ip, reply })).await?
    }

    /// `remove-member`: the membership that ended.
    pub async fn remove_member(
        &self,
        caller: Caller,
        org: OrgId,
        target: Target,
        ip: String,
    ) -> Result<Arc<Membership>, MemberError> {
        call(&self.0, |reply| UsersMsg::Members(MemberMsg::Remove { caller, org, target, ip, reply })).await?
    }

    /// `leave`: the caller's membership that ended.
    pub async fn leave(&self, caller: Caller, org: OrgId, ip: String) -> Result<Arc<Membership>, MemberError> {
        call(&self.0, |reply| UsersMsg::Members(MemberMsg::Leave { caller, org, ip, reply })).await?
    }

    /// `invite-member`: the invitation (new, or resent with a new expiry) and its mail, in one commit.
    pub async fn invite(&self, caller: Caller, invite: Invite, ip: String) -> Result<Arc<Invitation>, MemberError> {
        call(&self.0, |reply| UsersMsg::Members(MemberMsg::Invite { caller, invite, ip, reply })).await?
    }

    /// `accept-invitation`: the invitation used up and the caller's membership, in one commit; with the places in
    /// the invitation's teams in it too (a new version of the `lent` organization).
    pub async fn accept_invitation(
        &self,
        caller: Caller,
        id: InvitationId,
        email: Email,
        member_limit: usize,
        lent: Option<Lent>,
        ip: String,
    ) -> Result<(Arc<Invitation>, Arc<Membership>), MemberError> {
        let has_loan = lent.is_some();
        let msg = |reply| UsersMsg::Members(MemberMsg::Accept { caller, id, email, member_limit, lent, ip, reply });
        if !has_loan {
            return call(&self.0, msg).await?;
        }
        // The real outcome, without a timeout: given up on while its commit is being written, the loan would end
        // and the organizations actor build its next version on one without the places this commit writes.
        match self.0.call(msg, None).await {
            Ok(ractor::rpc::CallResult::Success(result)) => result,
            _ => Err(MemberError::Unavailable(crate::actors::Unavailable)),
        }
    }

    /// `reject-invitation`: the invitation as rejected.
    pub async fn reject_invitation(
        &self,
        caller: Caller,
        id: InvitationId,
        email: Email,
        ip: String,
    ) -> Result<Arc<Invitation>, MemberError> {
        call(&self.0, |reply| UsersMsg::Members(MemberMsg::Reject { caller, id, email, ip, reply })).await?
    }

    /// Commits the organizations actor's batch `ops`, which removes `teams`, with the pending invitations that named
    /// them stripped of them, in one transaction (see [`MemberMsg::CommitTeamsRemoved`]). No timeout: the caller
    /// must learn the real outcome, or its memory would disagree with the disk; a conflict with another node's
    /// change comes back as such.
    pub(in crate::actors) async fn commit_teams_removed(
        &self,
        ops: Vec<StoreOp>,
        activating: Vec<Activate>,
        teams: Vec<(OrgId, TeamId)>,
    ) -> Result<(), Refusal> {
        let msg = |reply| UsersMsg::Members(MemberMsg::CommitTeamsRemoved { ops, activating, teams, reply });
        match self.0.call(msg, None).await {
            Ok(ractor::rpc::CallResult::Success(result)) => result,
            _ => Err(Refusal::Unavailable),
        }
    }

    /// `cancel-invitation`: the invitation as canceled.
    pub async fn cancel_invitation(
        &self,
        caller: Caller,
        id: InvitationId,
        ip: String,
    ) -> Result<Arc<Invitation>, MemberError> {
        call(&self.0, |reply| UsersMsg::Members(MemberMsg::Cancel { caller, id, ip, reply })).await?
    }
}
