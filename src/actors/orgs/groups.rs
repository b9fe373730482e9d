//! SCIM Groups: what an organization's directory sends the organizations actor about the teams it made as Groups,
//! and what it gets back. The actor side is `actor/groups.rs`. A Group is a team of the organization; what only the
//! directory says of it (its `externalId`) is its [`ScimGroupRecordV1`], written in the team's commit. The facade
//! checks the token, the body and that every member is an account the directory provisioned; these messages check
//! what only the actor's order can: that the organization and the team exist, the name is free, and each member
//! is still a member of the organization.

use std::collections::HashSet;

use ractor::RpcReplyPort;

use super::teams::TeamCaller;
use super::{OrgsHandle, OrgsMsg};
use crate::actors::{Unavailable, call, gone};
use crate::domain::{Name, OrgId, Team, TeamId, UserId};
use crate::store::ScimGroupRecordV1;

/// Why a Group change was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum GroupError {
    #[error("Organization not found")]
    OrgNotFound,
    #[error("SCIM Group not found")]
    GroupNotFound,
    /// Another team of the organization has the name, compared without case.
    #[error("SCIM Group displayName already exists")]
    NameTaken,
    /// A member named is no member of the organization (any more).
    #[error("Group member {0} is not a SCIM User of this organization")]
    NotAMember(UserId),
    #[error("You have reached the maximum number of teams")]
    TooManyTeams,
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
}

/// A Group as the directory wants it: created (`team` `None`) or replaced.
pub struct GroupWrite {
    pub org: OrgId,
    pub team: Option<TeamId>,
    pub name: Name,
    /// The directory's record; its `team` is filled in with a new team's id.
    pub record: ScimGroupRecordV1,
    /// The team's members as the directory wants them.
    pub members: Vec<UserId>,
    /// Every account the directory provisioned in the organization: a member of the team outside it (put there in
    /// the application) is none of the directory's business and stays.
    pub directory: HashSet<UserId>,
    /// At most this many teams in the organization, when the Group is new (`[organizations] maximum_teams`).
    pub limit: Option<usize>,
    /// For the audit details: which token.
    pub via: String,
}

pub(in crate::actors) enum GroupMsg {
    Put {
        write: GroupWrite,
        caller: TeamCaller,
        reply: RpcReplyPort<Result<Team, GroupError>>,
    },
    /// The team goes with its members' entries and the directory's record.
    Delete {
        org: OrgId,
        team: TeamId,
        via: String,
        caller: TeamCaller,
        reply: RpcReplyPort<Result<Team, GroupError>>,
    },
}

impl GroupMsg {
    pub(super) fn caller_gone(&self) -> Option<bool> {
        match self {
            Self::Put { reply, .. } | Self::Delete { reply, .. } => gone(reply),
        }
    }
}

impl OrgsHandle {
    /// Creates or replaces a directory's Group: the team, its name, its members and the directory's record in one
    /// commit, each change audited as the organization plugin's team calls are. The team as written.
    pub async fn put_group(&self, write: GroupWrite, caller: TeamCaller) -> Result<Team, GroupError> {
        call(&self.0, |reply| OrgsMsg::Group(GroupMsg::Put { write, caller, reply })).await?
    }

    /// Deletes a directory's Group: its team, with the directory's record.
    pub async fn delete_group(
        &self,
        org: OrgId,
        team: TeamId,
        via: String,
        caller: TeamCaller,
    ) -> Result<Team, GroupError> {
        call(&self.0, |reply| OrgsMsg::Group(GroupMsg::Delete { org, team, via, caller, reply })).await?
    }
}
