//! The organizations actor's side of [`TeamMsg`]: each change is a new version of the organization (its teams
//! live in its record), checked against the version this batch already holds, audited in the same commit.

use std::sync::Arc;

use ractor::{ActorRef, RpcReplyPort};

use super::{OrgsActor, State};
use crate::actors::orgs::OrgsMsg;
use crate::actors::orgs::teams::{TeamCaller, TeamError, TeamMsg};
use crate::actors::sessions::Activate;
use crate::domain::{Membership, OrgId, Organization, Team, TeamId, TeamMember, Timestamp, UserId, action};
use crate::store::{StoreOp, audit, convert};

/// The refusal of a change to an organization that is not there (or is being deleted): teams and roles alike.
pub(super) trait NoOrg {
    fn no_org() -> Self;
}

impl NoOrg for TeamError {
    fn no_org() -> Self {
        TeamError::OrgNotFound
    }
}

impl NoOrg for crate::actors::orgs::roles::RoleError {
    fn no_org() -> Self {
        Self::OrgNotFound
    }
}

/// What an edit of [`OrgsActor::change_with`] did: the answer, the audit entries (none: nothing changed, answered
/// at once) and the other records written in the same commit.
pub(super) struct Edited<T> {
    pub answer: T,
    pub logged: Vec<(&'static str, String)>,
    pub ops: Vec<StoreOp>,
}

impl OrgsActor {
    pub(super) async fn team(&self, myself: &ActorRef<OrgsMsg>, state: &mut State, msg: TeamMsg) {
        match msg {
            TeamMsg::Create { org, name, limit, caller, reply } => {
                self.change(myself, state, org, caller, reply, |o, now, _| {
                    if limit.is_some_and(|l| o.teams.len() >= l) {
                        return Err(TeamError::TooManyTeams);
                    }
                    let team =
                        Team { id: TeamId::new(), name, created_at: now, updated_at: Some(now), members: Vec::new() };
                    let detail = format!("{} ({})", team.id, team.name);
                    o.teams.push(team.clone());
                    Ok((team, action::TEAM_CREATED, detail))
                })
                .await
            }
            TeamMsg::Update { org, team, name, caller, reply } => {
                self.change(myself, state, org, caller, reply, |o, now, _| {
                    let t = o.teams.iter_mut().find(|t| t.id == team).ok_or(TeamError::TeamNotFound)?;
                    let detail = match &name {
                        Some(n) if *n != t.name => format!("{}: {} -> {n}", t.id, t.name),
                        _ => format!("{} ({})", t.id, t.name),
                    };
                    if let Some(name) = name {
                        t.name = name;
                    }
                    t.updated_at = Some(now);
                    Ok((t.clone(), action::TEAM_UPDATED, detail))
                })
                .await
            }
            TeamMsg::Remove { org, team, keep_last, caller, reply } => {
                self.change(myself, state, org, caller, reply, |o, _, left| {
                    let at = o.teams.iter().position(|t| t.id == team).ok_or(TeamError::TeamNotFound)?;
                    if keep_last && o.teams.len() == 1 {
                        return Err(TeamError::LastTeam);
                    }
                    let removed = o.teams.remove(at);
                    // No session works in it any more (the plugin leaves `activeTeamId` pointing at nothing).
                    left.extend(removed.members.iter().map(|m| Activate::LeftTeam {
                        user: m.user,
                        org,
                        team: Some(team),
                    }));
                    let detail = format!("{} ({})", removed.id, removed.name);
                    Ok((removed, action::TEAM_DELETED, detail))
                })
                .await
            }
            TeamMsg::AddMember { org, team, user, limit, caller, reply } => {
                let membership = self.indexes.members.get(org, user);
                self.change(myself, state, org, caller, reply, |o, now, _| {
                    let membership = membership.ok_or(TeamError::NotAMember)?;
                    let t = o.teams.iter_mut().find(|t| t.id == team).ok_or(TeamError::TeamNotFound)?;
                    if let Some(entry) = t.members.iter().find(|m| m.user == user && m.stands(Some(&membership))) {
                        // Already in it: the plugin answers the existing row. Nothing to write; the answer waits for
                        // the batch all the same, which is harmless.
                        return Ok((entry.clone(), "", String::new()));
                    }
                    t.members.retain(|m| m.user != user);
                    if limit.is_some_and(|l| t.members.len() >= l) {
                        return Err(TeamError::TeamFull);
                    }
                    // Never older than the membership it stands by, whatever the clocks of two nodes say.
                    let entry = TeamMember { user, created_at: now.max(membership.created_at) };
                    t.members.push(entry.clone());
                    let detail = format!("{} ({}): {user}", t.id, t.name);
                    Ok((entry, action::TEAM_MEMBER_ADDED, detail))
                })
                .await
            }
            TeamMsg::RemoveMember { org, team, user, caller, reply } => {
                let membership = self.indexes.members.get(org, user);
                self.change(myself, state, org, caller, reply, |o, _, left| {
                    let t = o.teams.iter_mut().find(|t| t.id == team).ok_or(TeamError::TeamNotFound)?;
                    let standing = t.members.iter().any(|m| m.user == user && m.stands(membership.as_deref()));
                    t.members.retain(|m| m.user != user);
                    if !standing {
                        // A stale entry (see `TeamMember`) is no membership of the team either.
                        return Err(if membership.is_none() { TeamError::NotAMember } else { TeamError::NotInTeam });
                    }
                    let detail = format!("{} ({}): {user}", t.id, t.name);
                    left.push(Activate::LeftTeam { user, org, team: Some(team) });
                    Ok(((), action::TEAM_MEMBER_REMOVED, detail))
                })
                .await
            }
        }
    }

    /// Applies `edit` to the organization as this batch holds it, and stages the new version with its audit entry
    /// (the organization is the audit entry's target). An `edit` that names no action changed nothing: answered
    /// at once. Entries of users no longer members by the membership they were made under are dropped on the way.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn change<T: Send + 'static, E: NoOrg + From<crate::actors::Unavailable> + Send + 'static>(
        &self,
        myself: &ActorRef<OrgsMsg>,
        state: &mut State,
        org: OrgId,
        caller: TeamCaller,
        reply: RpcReplyPort<Result<T, E>>,
        edit: impl FnOnce(&mut Organization, Timestamp, &mut Vec<Activate>) -> Result<(T, &'static str, String), E>,
    ) {
        self.change_with(myself, state, org, caller, reply, |o, now, left| {
            let (answer, logged, detail) = edit(o, now, left)?;
            let logged = if logged.is_empty() { Vec::new() } else { vec![(logged, detail)] };
            Ok(Edited { answer, logged, ops: Vec::new() })
        })
        .await
    }

    /// [`Self::change`] for an edit that logs several audit entries (each its action and detail) and writes other
    /// records with the organization in the same commit (a SCIM Group's).
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn change_with<T: Send + 'static, E: NoOrg + From<crate::actors::Unavailable> + Send + 'static>(
        &self,
        myself: &ActorRef<OrgsMsg>,
        state: &mut State,
        org: OrgId,
        caller: TeamCaller,
        reply: RpcReplyPort<Result<T, E>>,
        edit: impl FnOnce(&mut Organization, Timestamp, &mut Vec<Activate>) -> Result<Edited<T>, E>,
    ) {
        let pending = state.overlay.values().find(|o| o.id == org).cloned();
        let current = pending.or_else(|| self.indexes.orgs.get(org)).filter(|_| !state.deleting.contains(&org));
        let Some(current) = current else {
            let _ = reply.send(Err(E::no_org()));
            return;
        };
        let mut next = Organization::clone(&current);
        let mut left = Vec::new();
        let Edited { answer, logged, ops: more } = match edit(&mut next, Timestamp::now(), &mut left) {
            Ok(done) => done,
            Err(e) => {
                let _ = reply.send(Err(e));
                return;
            }
        };
        if logged.is_empty() {
            let _ = reply.send(Ok(answer));
            return;
        }
        // A team removed (remove-team, a SCIM Group deleted): whatever removed it, the invitations naming it stop.
        let gone = current.teams.iter().filter(|t| !next.teams.iter().any(|n| n.id == t.id));
        state.teams_gone.extend(gone.map(|t| (org, t.id)));
        self.prune(&mut next);
        let next = Arc::new(next);
        state.overlay.stage(next.slug.clone(), Arc::clone(&next));
        let mut ops = vec![StoreOp::PutOrg(convert::org_record(&next))];
        ops.extend(
            logged
                .into_iter()
                .map(|(action, detail)| audit::entry(action, Some(caller.by), Some(org.into()), &caller.ip, detail)),
        );
        ops.extend(more);
        // The sessions working in a team left follow in the same commit (the sessions actor commits it).
        state.activating.extend(left);
        state.overlay.add(ops, reply, answer);
        if state.overlay.schedule_flush(myself, || OrgsMsg::Flush) {
            self.flush(state).await;
        }
    }

    /// Drops the team entries that no longer stand (see [`TeamMember`]).
    fn prune(&self, org: &mut Organization) {
        let members = &self.indexes.members;
        let id = org.id;
        let membership = |user: UserId| -> Option<Arc<Membership>> { members.get(id, user) };
        for team in &mut org.teams {
            team.members.retain(|m| m.stands(membership(m.user).as_deref()));
        }
    }
}
