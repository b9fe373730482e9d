//! SCIM Groups, the facade's side: a Group is a team of the token's organization that its directory made (the
//! teams people made in the application are not the directory's to change). The directory's records (its Users,
//! its Groups' `externalId`) are read from the store where needed, as the Users calls read them; the team changes
//! through the organizations actor, with the Group's record, in one commit.

use std::collections::HashSet;

use serde_json::Value;

use super::scim::{scim_filter, unavailable};
use super::{Accounts, Fault, Paging, ScimCaller, ScimScopes};
use crate::actors::orgs::groups::{GroupError, GroupWrite};
use crate::actors::orgs::teams::TeamCaller;
use crate::domain::{Team, TeamId, UserId};
use crate::scim::group::{self, GroupInput, MemberShown};
use crate::scim::{filter, list_response};
use crate::store::ScimGroupRecordV1;

fn not_found() -> Fault {
    Fault::status(404, "SCIM Group not found")
}

impl From<GroupError> for Fault {
    fn from(e: GroupError) -> Self {
        match e {
            GroupError::OrgNotFound | GroupError::GroupNotFound => not_found(),
            GroupError::NameTaken => Fault { status: 409, scim_type: Some("uniqueness"), detail: e.to_string() },
            GroupError::NotAMember(_) => Fault::bad("invalidValue", e.to_string()),
            GroupError::TooManyTeams => Fault::status(409, e.to_string()),
            GroupError::Unavailable(u) => unavailable(u),
        }
    }
}

/// What a Group call reads of the organization's directory: its Users and its Groups' records.
struct Directory {
    users: HashSet<UserId>,
    groups: Vec<ScimGroupRecordV1>,
}

impl Accounts {
    /// Groups are teams: without the organization plugin's teams there are none (ResourceTypes then lists no Group).
    fn scim_groups_on(&self) -> Result<(), Fault> {
        if self.organizations.teams {
            Ok(())
        } else {
            Err(Fault::status(501, "Groups are teams of the organization, and teams are not enabled on this server"))
        }
    }

    /// Whether this server has Groups (for the discovery documents).
    pub fn scim_has_groups(&self) -> bool {
        self.organizations.teams
    }

    async fn scim_directory(&self, caller: &ScimCaller) -> Result<Directory, Fault> {
        let users = self.scim_records(caller).await?;
        let users = users.into_iter().map(|r| UserId::from_bytes(r.user)).collect();
        let org = caller.org.to_bytes();
        let groups = self.scim_read(move |s| s.scim_groups(Some(org))).await?;
        Ok(Directory { users, groups })
    }

    /// The directory's Groups as they stand: each record whose team is still there (an owner may have removed the
    /// team through the plugin's routes), oldest first.
    fn scim_group_teams<'a>(&self, caller: &ScimCaller, dir: &'a Directory) -> Vec<(&'a ScimGroupRecordV1, Team)> {
        let Some(org) = self.indexes.orgs.get(caller.org) else { return Vec::new() };
        let teams = self.teams_of(&org);
        let mut found: Vec<(&ScimGroupRecordV1, Team)> = dir
            .groups
            .iter()
            .filter_map(|r| teams.iter().find(|t| t.id.to_bytes() == r.team).map(|t| (r, t.clone())))
            .collect();
        found.sort_by_key(|(_, t)| (t.created_at, t.id.to_bytes()));
        found
    }

    fn scim_render_group(dir: &Directory, record: &ScimGroupRecordV1, team: &Team, base: &str) -> Value {
        // Only the directory's Users are its members: a member put in the team in the application is no resource
        // of this directory's.
        let members: Vec<MemberShown> = team
            .members
            .iter()
            .filter_map(|m| dir.users.contains(&m.user).then_some(MemberShown { user: m.user }))
            .collect();
        group::render(
            &team.id.to_string(),
            team.name.as_str(),
            record.external_id.as_deref(),
            &members,
            team.created_at,
            team.updated_at.unwrap_or(team.created_at),
            base,
        )
    }

    fn scim_find_group<'a>(
        &self,
        caller: &ScimCaller,
        dir: &'a Directory,
        id: &str,
    ) -> Result<(&'a ScimGroupRecordV1, Team), Fault> {
        let team = TeamId::parse(id).ok_or_else(not_found)?;
        self.scim_group_teams(caller, dir).into_iter().find(|(_, t)| t.id == team).ok_or_else(not_found)
    }

    /// A page of the caller's organization's Groups that `filter` matches (all of them without one).
    pub async fn scim_list_groups(
        &self,
        caller: &ScimCaller,
        filter: Option<&str>,
        paging: Paging,
        base: &str,
    ) -> Result<Value, Fault> {
        Self::scim_allows(caller, ScimScopes::GROUPS_READ)?;
        self.scim_groups_on()?;
        let filter = scim_filter(filter)?;
        Ok(list_response(self.scim_matched_groups(caller, filter.as_ref(), base).await?, paging))
    }

    pub(super) async fn scim_matched_groups(
        &self,
        caller: &ScimCaller,
        filter: Option<&filter::Filter>,
        base: &str,
    ) -> Result<Vec<Value>, Fault> {
        let dir = self.scim_directory(caller).await?;
        Ok(self
            .scim_group_teams(caller, &dir)
            .iter()
            .map(|(r, t)| Self::scim_render_group(&dir, r, t, base))
            .filter(|resource| filter.is_none_or(|f| f.matches(resource)))
            .collect())
    }

    pub async fn scim_get_group(&self, caller: &ScimCaller, id: &str, base: &str) -> Result<Value, Fault> {
        Self::scim_allows(caller, ScimScopes::GROUPS_READ)?;
        self.scim_groups_on()?;
        let dir = self.scim_directory(caller).await?;
        let (record, team) = self.scim_find_group(caller, &dir, id)?;
        Ok(Self::scim_render_group(&dir, record, &team, base))
    }

    /// `POST /Groups`: a new team of the organization with the members listed. Answers the resource.
    pub async fn scim_create_group(
        &self,
        caller: &ScimCaller,
        body: &Value,
        base: &str,
        ip: &str,
    ) -> Result<Value, Fault> {
        Self::scim_allows(caller, ScimScopes::GROUPS_WRITE)?;
        self.scim_groups_on()?;
        let input = group::parse(body)?;
        let dir = self.scim_directory(caller).await?;
        self.scim_write_group(caller, dir, None, input, base, ip).await
    }

    /// `PUT /Groups/{id}`: the body replaces the Group (its name, `externalId` and the directory's members).
    pub async fn scim_replace_group(
        &self,
        caller: &ScimCaller,
        id: &str,
        body: &Value,
        base: &str,
        ip: &str,
    ) -> Result<Value, Fault> {
        Self::scim_allows(caller, ScimScopes::GROUPS_WRITE)?;
        self.scim_groups_on()?;
        let dir = self.scim_directory(caller).await?;
        let (_, team) = self.scim_find_group(caller, &dir, id)?;
        let input = group::parse(body)?;
        self.scim_write_group(caller, dir, Some(team.id), input, base, ip).await
    }

    /// `PATCH /Groups/{id}`: the operations applied to the resource, which is then checked as a replacement is.
    pub async fn scim_patch_group(
        &self,
        caller: &ScimCaller,
        id: &str,
        body: &Value,
        base: &str,
        ip: &str,
    ) -> Result<Value, Fault> {
        Self::scim_allows(caller, ScimScopes::GROUPS_WRITE)?;
        self.scim_groups_on()?;
        let dir = self.scim_directory(caller).await?;
        let (record, team) = self.scim_find_group(caller, &dir, id)?;
        let mut resource = Self::scim_render_group(&dir, record, &team, base);
        group::patch(&mut resource, body)?;
        let input = group::parse(&resource)?;
        let team = team.id;
        self.scim_write_group(caller, dir, Some(team), input, base, ip).await
    }

    async fn scim_write_group(
        &self,
        caller: &ScimCaller,
        dir: Directory,
        team: Option<TeamId>,
        input: GroupInput,
        base: &str,
        ip: &str,
    ) -> Result<Value, Fault> {
        if let Some(unknown) = input.members.iter().find(|u| !dir.users.contains(u)) {
            return Err(GroupError::NotAMember(*unknown).into());
        }
        let others = dir.groups.iter().filter(|r| Some(r.team) != team.map(|t| t.to_bytes()));
        if input.external_id.is_some() && others.clone().any(|r| r.external_id == input.external_id) {
            return Err(Fault { status: 409, scim_type: Some("uniqueness"), detail: "externalId is taken".into() });
        }
        let write = GroupWrite {
            org: caller.org,
            team,
            name: input.display_name,
            record: ScimGroupRecordV1 {
                org: caller.org.to_bytes(),
                team: team.map(|t| t.to_bytes()).unwrap_or_default(),
                external_id: input.external_id,
            },
            members: input.members,
            directory: dir.users.clone(),
            limit: self.organizations.maximum_teams,
            via: format!("SCIM token {}", caller.token),
        };
        let record = write.record.clone();
        let caller_of = TeamCaller { by: caller.on_behalf_of, ip: ip.to_owned() };
        let written = self.actors.orgs.put_group(write, caller_of).await?;
        let record = ScimGroupRecordV1 { team: written.id.to_bytes(), ..record };
        let written = self.standing(caller.org, written);
        Ok(Self::scim_render_group(&dir, &record, &written, base))
    }

    /// `DELETE /Groups/{id}`: the team goes, with its members' entries (their memberships of the organization
    /// stay).
    pub async fn scim_delete_group(&self, caller: &ScimCaller, id: &str, ip: &str) -> Result<(), Fault> {
        Self::scim_allows(caller, ScimScopes::GROUPS_WRITE)?;
        self.scim_groups_on()?;
        let dir = self.scim_directory(caller).await?;
        let (_, team) = self.scim_find_group(caller, &dir, id)?;
        let via = format!("SCIM token {}", caller.token);
        let caller_of = TeamCaller { by: caller.on_behalf_of, ip: ip.to_owned() };
        self.actors.orgs.delete_group(caller.org, team.id, via, caller_of).await?;
        Ok(())
    }
}
