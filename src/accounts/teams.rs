//! An organization's teams (the organization plugin with `teams: {enabled: true}`): reads from the organizations'
//! index, changes through the organizations actor, which owns the teams with the organization they belong to.
//!
//! Who may do what is the plugin's default access control (`team:create|update|delete` for the teams,
//! `member:update|delete` for their members), judged on the caller's membership as it is now; the actor then
//! checks, in its message order, that the organization, the team and the member are still there. Every team
//! operation is a method here, callable from other facades too (SCIM's Groups), not only from the routes.

use std::sync::Arc;

use super::{Accounts, Current, Unavailable};
use crate::actors::orgs::teams::{TeamCaller, TeamError};
use crate::domain::{Name, OrgId, Organization, Team, TeamId, TeamMember, TeamMemberId, TokenHash, UserId};

/// Why a team call was refused: the plugin's codes, each route's own where they differ.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TeamsError {
    #[error("Teams are not enabled")]
    NotEnabled,
    #[error("No active organization")]
    NoActiveOrganization,
    #[error("Organization not found")]
    OrgNotFound,
    #[error("Team not found")]
    TeamNotFound,
    /// create-team by a non-member (the plugin's words).
    #[error("You are not allowed to invite users to this organization")]
    NotAllowedToInvite,
    #[error("You are not allowed to create teams in this organization")]
    NotAllowedToCreate,
    #[error("You have reached the maximum number of teams")]
    TooManyTeams,
    /// list-teams by a non-member.
    #[error("You are not allowed to access this organization as an owner")]
    NotAllowedToAccess,
    #[error("You are not allowed to update this team")]
    NotAllowedToUpdate,
    #[error("You are not allowed to delete this team")]
    NotAllowedToDeleteThis,
    #[error("You are not allowed to delete teams in this organization")]
    NotAllowedToDelete,
    #[error("Unable to remove last team")]
    LastTeam,
    /// The caller, or the user named, is no member of the organization.
    #[error("User is not a member of the organization")]
    NotAMember,
    #[error("You are not allowed to create a new member")]
    NotAllowedToAddMember,
    #[error("You are not allowed to remove a team member")]
    NotAllowedToRemoveMember,
    #[error("User is not a member of the team")]
    NotInTeam,
    /// set-active-team for a team the caller is not in (403 there, where the other routes answer 400).
    #[error("User is not a member of the team")]
    NotInThisTeam,
    #[error("Team member limit reached")]
    TeamFull,
    #[error("You do not have an active team")]
    NoActiveTeam,
    #[error("You are not a member of this organization")]
    YouAreNotAMember,
    #[error("You are not allowed to update this member")]
    NotAllowedToUpdateMember,
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
}

impl From<TeamError> for TeamsError {
    fn from(e: TeamError) -> Self {
        match e {
            TeamError::OrgNotFound => Self::OrgNotFound,
            TeamError::TeamNotFound => Self::TeamNotFound,
            TeamError::TooManyTeams => Self::TooManyTeams,
            TeamError::LastTeam => Self::LastTeam,
            TeamError::NotAMember => Self::NotAMember,
            TeamError::NotInTeam => Self::NotInTeam,
            TeamError::TeamFull => Self::TeamFull,
            TeamError::Unavailable(u) => Self::Unavailable(u),
        }
    }
}

/// A team member as the plugin answers it: `{id, teamId, userId, createdAt}`.
pub struct TeamMemberShown {
    pub id: TeamMemberId,
    pub team: TeamId,
    pub entry: TeamMember,
}

/// A team with the organization it belongs to.
pub type TeamOf = (OrgId, Team);

impl Accounts {
    fn teams_on(&self) -> Result<(), TeamsError> {
        if self.organizations.teams { Ok(()) } else { Err(TeamsError::NotEnabled) }
    }

    pub(super) fn team_caller(current: &Current, ip: String) -> TeamCaller {
        TeamCaller { by: current.actor(), ip }
    }

    /// The organization named, or the session's active one.
    fn team_org(current: &Current, org: Option<OrgId>) -> Result<OrgId, TeamsError> {
        org.or_else(|| current.session.active_organization()).ok_or(TeamsError::NoActiveOrganization)
    }

    /// The teams of `org` as they stand, each with only the members whose entries stand (see [`TeamMember`]).
    pub fn teams_of(&self, org: &Organization) -> Vec<Team> {
        org.teams.iter().map(|t| self.standing(org.id, t.clone())).collect()
    }

    /// The organization named (or the active one), once the caller's membership there allows `action` on
    /// `resource`: the check every team change opens with. `outsider` and `denied` are the route's own codes for a
    /// caller who is no member and for one whose roles do not allow it (the plugin words them per route).
    fn allowed_in(
        &self,
        current: &Current,
        org: Option<OrgId>,
        (resource, action): (&str, &str),
        outsider: TeamsError,
        denied: TeamsError,
    ) -> Result<OrgId, TeamsError> {
        let org = Self::team_org(current, org)?;
        let me = self.acting_membership(current, org).ok_or(outsider)?;
        if self.member_allows(&me, &[(resource, action)]) { Ok(org) } else { Err(denied) }
    }

    /// `create-team`: a team of the organization named (or the active one), for a member allowed `team:create`.
    pub async fn create_team(
        &self,
        current: &Current,
        org: Option<OrgId>,
        name: Name,
        ip: String,
    ) -> Result<TeamOf, TeamsError> {
        self.teams_on()?;
        use TeamsError::{NotAllowedToCreate, NotAllowedToInvite};
        let org = self.allowed_in(current, org, ("team", "create"), NotAllowedToInvite, NotAllowedToCreate)?;
        let limit = self.organizations.maximum_teams;
        Ok((org, self.actors.orgs.create_team(org, name, limit, Self::team_caller(current, ip)).await?))
    }

    /// `list-teams`: every team of the organization, for any member.
    pub fn list_teams(&self, current: &Current, org: Option<OrgId>) -> Result<(OrgId, Vec<Team>), TeamsError> {
        self.teams_on()?;
        let org = Self::team_org(current, org)?;
        self.acting_membership(current, org).ok_or(TeamsError::NotAllowedToAccess)?;
        let org = self.indexes.orgs.get(org).ok_or(TeamsError::OrgNotFound)?;
        Ok((org.id, self.teams_of(&org)))
    }

    /// `update-team`: renames it (or only moves its `updatedAt`), for a member allowed `team:update`.
    pub async fn update_team(
        &self,
        current: &Current,
        org: Option<OrgId>,
        team: TeamId,
        name: Option<Name>,
        ip: String,
    ) -> Result<TeamOf, TeamsError> {
        self.teams_on()?;
        use TeamsError::NotAllowedToUpdate;
        let org = self.allowed_in(current, org, ("team", "update"), NotAllowedToUpdate, NotAllowedToUpdate)?;
        let updated = self.actors.orgs.update_team(org, team, name, Self::team_caller(current, ip)).await?;
        Ok((org, self.standing(org, updated)))
    }

    pub(super) fn standing(&self, org: OrgId, team: Team) -> Team {
        let members = &self.indexes.members;
        Team { members: team.standing(|u| members.get(org, u)).cloned().collect(), ..team }
    }

    /// `remove-team`: removes it with its members' entries, for a member allowed `team:delete`; never the team the
    /// caller's session works in (`active_team`), nor the organization's last (unless allowed). The pending
    /// invitations naming it name it no more from the same commit on (the organizations actor commits a removal
    /// through the users actor, which owns the invitations).
    pub async fn remove_team(
        &self,
        current: &Current,
        org: Option<OrgId>,
        team: TeamId,
        active_team: Option<TeamId>,
        ip: String,
    ) -> Result<Team, TeamsError> {
        self.teams_on()?;
        let org = Self::team_org(current, org)?;
        let me = self.acting_membership(current, org).ok_or(TeamsError::NotAllowedToDeleteThis)?;
        if active_team == Some(team) {
            return Err(TeamsError::NotAllowedToDeleteThis);
        }
        if !self.member_allows(&me, &[("team", "delete")]) {
            return Err(TeamsError::NotAllowedToDelete);
        }
        let keep_last = !self.organizations.allow_removing_all_teams;
        Ok(self.actors.orgs.remove_team(org, team, keep_last, Self::team_caller(current, ip)).await?)
    }

    /// `add-team-member`: puts `user`, a member of the organization, in `team`, for a member allowed
    /// `member:update`. Idempotent.
    pub async fn add_team_member(
        &self,
        current: &Current,
        org: Option<OrgId>,
        team: TeamId,
        user: UserId,
        ip: String,
    ) -> Result<TeamMemberShown, TeamsError> {
        self.teams_on()?;
        use TeamsError::{NotAMember, NotAllowedToAddMember};
        let org = self.allowed_in(current, org, ("member", "update"), NotAMember, NotAllowedToAddMember)?;
        self.indexes.members.get(org, user).ok_or(TeamsError::NotAMember)?;
        let limit = self.organizations.maximum_members_per_team;
        let entry = self.actors.orgs.add_team_member(org, team, user, limit, Self::team_caller(current, ip)).await?;
        Ok(TeamMemberShown { id: entry.id(team), team, entry })
    }

    /// `remove-team-member`: takes `user` out of `team`, for a member allowed `member:delete`.
    pub async fn remove_team_member(
        &self,
        current: &Current,
        org: Option<OrgId>,
        team: TeamId,
        user: UserId,
        ip: String,
    ) -> Result<(), TeamsError> {
        self.teams_on()?;
        use TeamsError::{NotAMember, NotAllowedToRemoveMember};
        let org = self.allowed_in(current, org, ("member", "delete"), NotAMember, NotAllowedToRemoveMember)?;
        self.indexes.members.get(org, user).ok_or(TeamsError::NotAMember)?;
        Ok(self.actors.orgs.remove_team_member(org, team, user, Self::team_caller(current, ip)).await?)
    }

    /// `list-team-members`: the members of `team` (or the session's active team), for a member of that team.
    pub fn list_team_members(
        &self,
        current: &Current,
        team: Option<TeamId>,
    ) -> Result<Vec<TeamMemberShown>, TeamsError> {
        self.teams_on()?;
        let team = team.or_else(|| current.session.active_team()).ok_or(TeamsError::NoActiveTeam)?;
        let (org, team) = self.caller_team(current, team).ok_or(TeamsError::TeamNotFound)?;
        let team = self.standing(org.id, team);
        if !team.members.iter().any(|m| m.user == current.user.id) {
            return Err(TeamsError::NotInTeam);
        }
        Ok(team
            .members
            .into_iter()
            .map(|entry| TeamMemberShown { id: entry.id(team.id), team: team.id, entry })
            .collect())
    }

    /// `set-active-team`: the session `token_hash` (the caller's) works in `team` of its active organization, for a
    /// member of the team; `Some(None)` clears it; `None` checks the active team again (cleared if it no longer
    /// holds). The team worked in, if any.
    pub async fn set_active_team(
        &self,
        current: &Current,
        token_hash: TokenHash,
        team: Option<Option<TeamId>>,
    ) -> Result<Option<TeamOf>, TeamsError> {
        self.teams_on()?;
        let team = match team {
            Some(None) => {
                if current.session.active_team().is_some() {
                    self.actors.sessions.set_active_team(token_hash, None).await?;
                }
                return Ok(None);
            }
            Some(Some(team)) => team,
            None => match current.session.active_team() {
                Some(team) => team,
                None => return Ok(None),
            },
        };
        let org = current.session.active_organization().ok_or(TeamsError::NoActiveOrganization)?;
        let org = self.indexes.orgs.get(org).ok_or(TeamsError::TeamNotFound)?;
        let team = org.teams.iter().find(|t| t.id == team).cloned().ok_or(TeamsError::TeamNotFound)?;
        let team = self.standing(org.id, team);
        if !team.members.iter().any(|m| m.user == current.user.id) {
            return Err(TeamsError::NotInThisTeam);
        }
        if current.session.active_team() != Some(team.id) {
            self.actors.sessions.set_active_team(token_hash, Some(team.id)).await?;
        }
        Ok(Some((org.id, team)))
    }

    /// `team` if it belongs to one of the caller's organizations. A team of another organization is not found
    /// (the plugin says the caller is not in it): whether it exists is none of the caller's business, and the
    /// look-up costs the caller's memberships, not every organization.
    fn caller_team(&self, current: &Current, team: TeamId) -> Option<(Arc<Organization>, Team)> {
        let mine = self.indexes.members.of_user(current.user.id);
        mine.iter()
            .filter_map(|m| self.indexes.orgs.get(m.org))
            .find_map(|o| o.teams.iter().find(|t| t.id == team).cloned().map(|t| (Arc::clone(&o), t)))
    }

    /// `list-user-teams`: the teams `user` (the caller by default) is in, in the organization named, or in every
    /// organization they belong to (only for oneself). Another user's need the caller's `member:update` there.
    pub fn list_user_teams(
        &self,
        current: &Current,
        user: Option<UserId>,
        org: Option<OrgId>,
    ) -> Result<Vec<TeamOf>, TeamsError> {
        self.teams_on()?;
        let user = user.unwrap_or(current.user.id);
        let orgs: Vec<OrgId> = if user == current.user.id {
            match org {
                Some(org) => {
                    self.indexes.members.get(org, user).ok_or(TeamsError::YouAreNotAMember)?;
                    vec![org]
                }
                None => self.indexes.members.of_user(user).iter().map(|m| m.org).collect(),
            }
        } else {
            use TeamsError::{NotAllowedToUpdateMember, YouAreNotAMember};
            let org =
                self.allowed_in(current, org, ("member", "update"), YouAreNotAMember, NotAllowedToUpdateMember)?;
            self.indexes.members.get(org, user).ok_or(TeamsError::NotAMember)?;
            vec![org]
        };
        let mut teams = Vec::new();
        for org in orgs.into_iter().filter_map(|o| self.indexes.orgs.get(o)) {
            for team in self.teams_of(&org) {
                if team.members.iter().any(|m| m.user == user) {
                    teams.push((org.id, team));
                }
            }
        }
        Ok(teams)
    }
}
