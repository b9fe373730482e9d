//! The organizations actor's side of [`GroupMsg`]: a directory's Group is a team of the organization, so each
//! change is a new version of the organization, checked against the version this batch holds, with an audit entry
//! per change as the organization plugin's team calls make (so the same webhook events follow), and the
//! directory's record in the same commit.

use std::collections::HashMap;
use std::sync::Arc;

use ractor::ActorRef;

use super::teams::{Edited, NoOrg};
use super::{OrgsActor, State};
use crate::actors::orgs::OrgsMsg;
use crate::actors::orgs::groups::{GroupError, GroupMsg, GroupWrite};
use crate::actors::sessions::Activate;
use crate::domain::{Membership, Team, TeamId, TeamMember, UserId, action};
use crate::store::StoreOp;

impl NoOrg for GroupError {
    fn no_org() -> Self {
        GroupError::OrgNotFound
    }
}

impl OrgsActor {
    pub(super) async fn group(&self, myself: &ActorRef<OrgsMsg>, state: &mut State, msg: GroupMsg) {
        match msg {
            GroupMsg::Put { write, caller, reply } => {
                let GroupWrite { org, team, name, mut record, members, directory, limit, via } = write;
                let via = format!("over SCIM, {via}");
                // The organization's memberships now, read before the edit (a team entry stands by one).
                let memberships: HashMap<UserId, Arc<Membership>> =
                    self.indexes.members.members_of(org).into_iter().map(|m| (m.user, m)).collect();
                self.change_with(myself, state, org, caller, reply, move |o, now, left| {
                    let lower = name.as_str().to_lowercase();
                    if o.teams.iter().any(|t| Some(t.id) != team && t.name.as_str().to_lowercase() == lower) {
                        return Err(GroupError::NameTaken);
                    }
                    let mut logged = Vec::new();
                    let at = match team {
                        Some(id) => {
                            let at = o.teams.iter().position(|t| t.id == id).ok_or(GroupError::GroupNotFound)?;
                            let t = &mut o.teams[at];
                            let detail = if t.name != name {
                                format!("{}: {} -> {name} ({via})", t.id, t.name)
                            } else {
                                format!("{} ({}) ({via})", t.id, t.name)
                            };
                            t.name = name;
                            t.updated_at = Some(now);
                            logged.push((action::TEAM_UPDATED, detail));
                            at
                        }
                        None => {
                            if limit.is_some_and(|l| o.teams.len() >= l) {
                                return Err(GroupError::TooManyTeams);
                            }
                            let t = Team {
                                id: TeamId::new(),
                                name,
                                created_at: now,
                                updated_at: Some(now),
                                members: Vec::new(),
                            };
                            logged.push((action::TEAM_CREATED, format!("{} ({}) ({via})", t.id, t.name)));
                            o.teams.push(t);
                            o.teams.len() - 1
                        }
                    };
                    let t = &mut o.teams[at];
                    record.team = t.id.to_bytes();
                    // The directory's members it no longer lists leave; the others stay.
                    let wanted: std::collections::HashSet<UserId> = members.iter().copied().collect();
                    let (gone, kept): (Vec<TeamMember>, Vec<TeamMember>) = std::mem::take(&mut t.members)
                        .into_iter()
                        .partition(|m| directory.contains(&m.user) && !wanted.contains(&m.user));
                    t.members = kept;
                    for m in gone {
                        if m.stands(memberships.get(&m.user).map(|m| &**m)) {
                            left.push(Activate::LeftTeam { user: m.user, org, team: Some(t.id) });
                            let detail = format!("{} ({}): {} ({via})", t.id, t.name, m.user);
                            logged.push((action::TEAM_MEMBER_REMOVED, detail));
                        }
                    }
                    for user in members {
                        let membership = memberships.get(&user).ok_or(GroupError::NotAMember(user))?;
                        if t.members.iter().any(|m| m.user == user && m.stands(Some(membership))) {
                            continue;
                        }
                        t.members.retain(|m| m.user != user);
                        // Never older than the membership it stands by, whatever the clocks of two nodes say.
                        t.members.push(TeamMember { user, created_at: now.max(membership.created_at) });
                        logged.push((action::TEAM_MEMBER_ADDED, format!("{} ({}): {user} ({via})", t.id, t.name)));
                    }
                    let answer = t.clone();
                    Ok(Edited { answer, logged, ops: vec![StoreOp::PutScimGroup(record)] })
                })
                .await
            }
            GroupMsg::Delete { org, team, via, caller, reply } => {
                self.change_with(myself, state, org, caller, reply, |o, _, left| {
                    let at = o.teams.iter().position(|t| t.id == team).ok_or(GroupError::GroupNotFound)?;
                    let removed = o.teams.remove(at);
                    // No session works in it any more, as when the plugin's remove-team takes a team away.
                    left.extend(removed.members.iter().map(|m| Activate::LeftTeam {
                        user: m.user,
                        org,
                        team: Some(team),
                    }));
                    let logged =
                        vec![(action::TEAM_DELETED, format!("{} ({}) (over SCIM, {via})", removed.id, removed.name))];
                    let ops = vec![StoreOp::DeleteScimGroup { org: org.to_bytes(), team: team.to_bytes() }];
                    Ok(Edited { answer: removed, logged, ops })
                })
                .await
            }
        }
    }
}
