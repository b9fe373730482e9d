//! `/api/auth/organization/*-team*`: the organization plugin's team calls (`teams: {enabled: true}`), with its
//! shapes and codes. Each handler reads parse → facade → answer; the helpers that read requests are the
//! organization family's (`org_plugin`).

use hyper::body::Incoming;
use hyper::{Request, Response};

use super::AppState;
use super::dto::{Message, PluginTeam, PluginTeamMember};
use super::extract::{Ctx, Fields};
use super::fields::validated_name;
use super::org_plugin::{body, ip, query, signed_in};
use super::response::{Body, Failure, ok};
use crate::accounts::{TeamMemberShown, TeamsError};
use crate::domain::{OrgId, TeamId, UserId};

/// `organizationId` as the plugin reads it: absent or empty means the active organization; an id that is no
/// UUID names no organization the caller is in.
fn org_id(raw: Option<&str>) -> Option<OrgId> {
    raw.filter(|id| !id.is_empty()).map(|id| OrgId::parse(id).unwrap_or_else(|| OrgId::from_bytes([0; 16])))
}

/// A `teamId` that is no UUID names no team.
fn team_id(raw: &str) -> Result<TeamId, Failure> {
    TeamId::parse(raw).ok_or_else(|| TeamsError::TeamNotFound.into())
}

/// A `userId` that is no UUID names no member.
fn user_id(raw: &str) -> Result<UserId, Failure> {
    UserId::parse(raw).ok_or_else(|| TeamsError::NotAMember.into())
}

fn team_member(shown: &TeamMemberShown) -> PluginTeamMember {
    PluginTeamMember {
        created_at: shown.entry.created_at,
        id: shown.id,
        team_id: shown.team,
        user_id: shown.entry.user,
    }
}

/// `POST create-team` `{name, organizationId?}`: the team.
pub async fn create(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let (_, current) = signed_in(state, &req).await?;
    let body = body(state, req, &["name", "organizationId"]).await?;
    let name = validated_name(body.string("name")?)?;
    let org = org_id(body.optional_string("organizationId")?);
    let (org, team) = state.accounts.create_team(&current, org, name, ip(&ctx)).await?;
    Ok(ok(&PluginTeam::new(org, &team)))
}

/// `GET list-teams` `?organizationId`: every team of the organization.
pub async fn list(state: &AppState, _: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let (_, current) = signed_in(state, &req).await?;
    let q = query(&req, &["organizationId"])?;
    let org = org_id(q("organizationId").as_deref());
    let (org, teams) = state.accounts.list_teams(&current, org)?;
    Ok(ok(&teams.iter().map(|t| PluginTeam::new(org, t)).collect::<Vec<_>>()))
}

/// `POST update-team` `{teamId, data: {name?, organizationId?}}`: the team as updated. The organization sits in
/// `data` (the plugin's shape) and only says where the team is: it is never moved.
pub async fn update(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let (_, current) = signed_in(state, &req).await?;
    let body = body(state, req, &["teamId", "data"]).await?;
    let team = body.string("teamId")?;
    let Some(serde_json::Value::Object(data)) = body.get("data") else {
        return Err(Failure::validation("[body.data] Invalid input: expected object"));
    };
    let data = Fields::from(data.clone());
    data.only(&["name", "organizationId"])?;
    let name = data.optional_string("name")?.map(validated_name).transpose()?;
    let org = org_id(data.optional_string("organizationId")?);
    let team = team_id(team)?;
    let (org, updated) = state.accounts.update_team(&current, org, team, name, ip(&ctx)).await?;
    Ok(ok(&PluginTeam::new(org, &updated)))
}

/// `POST remove-team` `{teamId, organizationId?}`: `{message}`.
pub async fn remove(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let (_, current) = signed_in(state, &req).await?;
    let body = body(state, req, &["teamId", "organizationId"]).await?;
    let team = team_id(body.string("teamId")?)?;
    let org = org_id(body.optional_string("organizationId")?);
    state.accounts.remove_team(&current, org, team, current.session.active_team(), ip(&ctx)).await?;
    Ok(ok(&Message { message: "Team removed successfully." }))
}

/// `POST add-team-member` `{teamId, userId, organizationId?}`: the user's entry in the team.
pub async fn add_member(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let (_, current) = signed_in(state, &req).await?;
    let body = body(state, req, &["teamId", "userId", "organizationId"]).await?;
    let (team, user) = (body.string("teamId")?, body.string("userId")?);
    let org = org_id(body.optional_string("organizationId")?);
    let (team, user) = (team_id(team)?, user_id(user)?);
    let added = state.accounts.add_team_member(&current, org, team, user, ip(&ctx)).await?;
    Ok(ok(&team_member(&added)))
}

/// `POST remove-team-member` `{teamId, userId, organizationId?}`: `{message}`.
pub async fn remove_member(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let (_, current) = signed_in(state, &req).await?;
    let body = body(state, req, &["teamId", "userId", "organizationId"]).await?;
    let (team, user) = (body.string("teamId")?, body.string("userId")?);
    let org = org_id(body.optional_string("organizationId")?);
    let (team, user) = (team_id(team)?, user_id(user)?);
    state.accounts.remove_team_member(&current, org, team, user, ip(&ctx)).await?;
    Ok(ok(&Message { message: "Team member removed successfully." }))
}

/// `GET list-team-members` `?teamId`: the team's members, for a member of the team.
pub async fn list_members(state: &AppState, _: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let (_, current) = signed_in(state, &req).await?;
    let q = query(&req, &["teamId"])?;
    let team = q("teamId").filter(|t| !t.is_empty()).map(|t| team_id(&t)).transpose()?;
    let members = state.accounts.list_team_members(&current, team)?;
    Ok(ok(&members.iter().map(team_member).collect::<Vec<_>>()))
}

/// `GET list-user-teams` `?userId&organizationId`: the teams the user (the caller by default) is in.
pub async fn list_user_teams(state: &AppState, _: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let (_, current) = signed_in(state, &req).await?;
    let q = query(&req, &["userId", "organizationId"])?;
    let user = q("userId").filter(|u| !u.is_empty()).map(|u| user_id(&u)).transpose()?;
    let org = org_id(q("organizationId").as_deref());
    let teams = state.accounts.list_user_teams(&current, user, org)?;
    Ok(ok(&teams.iter().map(|(org, t)| PluginTeam::new(*org, t)).collect::<Vec<_>>()))
}

/// `POST set-active-team` `{teamId?: string | null}`: the team the session works in from now on, or `null` when
/// cleared (or none was named nor active).
pub async fn set_active(state: &AppState, _: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let (token, current) = signed_in(state, &req).await?;
    let body = body(state, req, &["teamId"]).await?;
    let team = match body.nullable_string("teamId")? {
        Some(Some(id)) => Some(Some(team_id(id)?)),
        Some(None) => Some(None),
        None => None,
    };
    match state.accounts.set_active_team(&current, token.hash(), team).await? {
        Some((org, team)) => Ok(ok(&PluginTeam::new(org, &team))),
        None => Ok(ok(&serde_json::Value::Null)),
    }
}
