//! Teams: what callers send the organizations actor about an organization's teams, and what they get back. The
//! actor side is `actor/teams.rs`. Whether the caller may do it (their role's `team` and `member` permissions)
//! is the facade's check; these messages check what only the actor's order can: that the organization and the
//! team exist, the user is a member, and the limits.

use ractor::RpcReplyPort;

use super::{OrgsHandle, OrgsMsg};
use crate::actors::{Unavailable, call, gone};
use crate::domain::{Name, OrgId, Team, TeamId, TeamMember, UserId};

/// Why a team change was refused (the plugin's messages).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TeamError {
    #[error("Organization not found")]
    OrgNotFound,
    #[error("Team not found")]
    TeamNotFound,
    #[error("You have reached the maximum number of teams")]
    TooManyTeams,
    #[error("Unable to remove last team")]
    LastTeam,
    #[error("User is not a member of the organization")]
    NotAMember,
    #[error("User is not a member of the team")]
    NotInTeam,
    #[error("Team member limit reached")]
    TeamFull,
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
}

/// Who asks, and from where (for the audit entry).
pub struct TeamCaller {
    pub by: UserId,
    pub ip: String,
}

pub(in crate::actors) enum TeamMsg {
    Create {
        org: OrgId,
        name: Name,
        limit: Option<usize>,
        caller: TeamCaller,
        reply: RpcReplyPort<Result<Team, TeamError>>,
    },
    Update {
        org: OrgId,
        team: TeamId,
        name: Option<Name>,
        caller: TeamCaller,
        reply: RpcReplyPort<Result<Team, TeamError>>,
    },
    /// `keep_last`: the organization's only team cannot go (`allowRemovingAllTeams` off).
    Remove {
        org: OrgId,
        team: TeamId,
        keep_last: bool,
        caller: TeamCaller,
        reply: RpcReplyPort<Result<Team, TeamError>>,
    },
    /// Idempotent: a user already in the team gets their entry back.
    AddMember {
        org: OrgId,
        team: TeamId,
        user: UserId,
        limit: Option<usize>,
        caller: TeamCaller,
        reply: RpcReplyPort<Result<TeamMember, TeamError>>,
    },
    RemoveMember {
        org: OrgId,
        team: TeamId,
        user: UserId,
        caller: TeamCaller,
        reply: RpcReplyPort<Result<(), TeamError>>,
    },
}

impl TeamMsg {
    pub(super) fn caller_gone(&self) -> Option<bool> {
        match self {
            Self::Create { reply, .. } | Self::Update { reply, .. } | Self::Remove { reply, .. } => gone(reply),
            Self::AddMember { reply, .. } => gone(reply),
            Self::RemoveMember { reply, .. } => gone(reply),
        }
    }
}

impl OrgsHandle {
    /// A team named `name` in `org` (at most `limit` teams in it).
    pub async fn create_team(
        &self,
        org: OrgId,
        name: Name,
        limit: Option<usize>,
        caller: TeamCaller,
    ) -> Result<Team, TeamError> {
        call(&self.0, |reply| OrgsMsg::Team(TeamMsg::Create { org, name, limit, caller, reply })).await?
    }

    /// Renames `team` of `org` (`None`: only its `updatedAt` moves, as the plugin's `data: {}` does).
    pub async fn update_team(
        &self,
        org: OrgId,
        team: TeamId,
        name: Option<Name>,
        caller: TeamCaller,
    ) -> Result<Team, TeamError> {
        call(&self.0, |reply| OrgsMsg::Team(TeamMsg::Update { org, team, name, caller, reply })).await?
    }

    /// Removes `team` of `org` with its members' entries; the team removed.
    pub async fn remove_team(
        &self,
        org: OrgId,
        team: TeamId,
        keep_last: bool,
        caller: TeamCaller,
    ) -> Result<Team, TeamError> {
        call(&self.0, |reply| OrgsMsg::Team(TeamMsg::Remove { org, team, keep_last, caller, reply })).await?
    }

    /// Puts `user`, a member of `org`, in `team` (at most `limit` members in it); their entry.
    pub async fn add_team_member(
        &self,
        org: OrgId,
        team: TeamId,
        user: UserId,
        limit: Option<usize>,
        caller: TeamCaller,
    ) -> Result<TeamMember, TeamError> {
        call(&self.0, |reply| OrgsMsg::Team(TeamMsg::AddMember { org, team, user, limit, caller, reply })).await?
    }

    /// Takes `user` out of `team`.
    pub async fn remove_team_member(
        &self,
        org: OrgId,
        team: TeamId,
        user: UserId,
        caller: TeamCaller,
    ) -> Result<(), TeamError> {
        call(&self.0, |reply| OrgsMsg::Team(TeamMsg::RemoveMember { org, team, user, caller, reply })).await?
    }
}
