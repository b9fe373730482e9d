//! The teams of a better-auth database (the organization plugin with `teams: {enabled: true}`: its `team` and
//! `teamMember` tables): each team comes over into its organization with the users in it, so `list-teams`,
//! `list-team-members` and `list-user-teams` answer here what they answered there.
//!
//! A team lives in its organization's record here, so a team comes over only with its organization. Its
//! members' places count while their membership of the organization is at most as old (see
//! `crate::domain::TeamMember`): a place is given the later of its own `createdAt` and the membership's, so a
//! `teamMember` row written a moment before its `member` row (the plugin's create writes both) still counts.
//!
//! Blocking: a team without its id or with a name the server refuses. Reported and dropped: teams of
//! organizations not imported, places of users not imported or with no membership of the team's organization
//! (better-auth deletes those rows with the membership; one left over counted for nothing there either), a
//! place of an unknown team. Sessions do not come over, so neither does `activeTeamId`; invitations' `teamId` is
//! not carried.

use std::collections::HashMap;

use super::plan::{Mapping, Plan};
use super::{Cell, Column, Kind};
use crate::domain::{Name, TeamId};
use crate::store::{StoreOp, TeamMemberRecordV1, TeamRecordV1};

pub(crate) const TEAM: &[Column] = &[
    Column { name: "id", kind: Kind::Text, required: true },
    Column { name: "name", kind: Kind::Text, required: true },
    Column { name: "organizationId", kind: Kind::Text, required: true },
    Column { name: "createdAt", kind: Kind::Time, required: false },
    Column { name: "updatedAt", kind: Kind::Time, required: false },
];

pub(crate) const TEAM_MEMBER: &[Column] = &[
    Column { name: "teamId", kind: Kind::Text, required: true },
    Column { name: "userId", kind: Kind::Text, required: true },
    Column { name: "createdAt", kind: Kind::Time, required: false },
];

fn text(cell: &Cell) -> Option<&str> {
    if let Cell::Text(t) = cell { Some(t.as_str()) } else { None }
}

fn time(cell: &Cell) -> Option<i64> {
    if let Cell::Time(ms) = cell { Some(*ms) } else { None }
}

/// Puts each team of `teams` whose organization is imported into that organization's record in `plan`, with
/// the places of `places` that count.
pub(crate) fn attach(plan: &mut Plan, teams: &[Vec<Cell>], places: &[Vec<Cell>], now_ms: i64) {
    let new_id = |kind: &str| -> HashMap<String, [u8; 16]> {
        plan.mapping
            .iter()
            .filter(|m| m.kind == kind)
            .filter_map(|m| Some((m.better_auth_id.clone(), *uuid::Uuid::parse_str(&m.id).ok()?.as_bytes())))
            .collect()
    };
    let (orgs, users) = (new_id("organization"), new_id("user"));
    // When each imported user joined each imported organization.
    let joined: HashMap<([u8; 16], [u8; 16]), i64> = plan
        .ops
        .iter()
        .filter_map(|op| match op {
            StoreOp::PutMember(m) => Some(((m.org, m.user), m.created_at_ms)),
            _ => None,
        })
        .collect();
    let (mut made, mut problems, mut dropped_teams) = (HashMap::new(), Vec::new(), 0);
    for row in teams {
        let (Some(id), Some(org)) = (text(&row[0]), text(&row[2])) else {
            problems.push("a team without its id or organizationId".to_owned());
            continue;
        };
        let Some(&org) = orgs.get(org) else {
            dropped_teams += 1;
            continue;
        };
        let name = match text(&row[1]).map(Name::parse) {
            Some(Ok(name)) => name,
            _ => {
                problems.push(format!("team {id}: a name the server refuses (1 to 200 characters)"));
                continue;
            }
        };
        let created_at_ms = time(&row[3]).unwrap_or(now_ms);
        let team = TeamRecordV1 {
            id: TeamId::new().to_bytes(),
            name: name.to_string(),
            created_at_ms,
            updated_at_ms: time(&row[4]),
            members: Vec::new(),
        };
        if made.insert(id.to_owned(), (org, team)).is_some() {
            problems.push(format!("team {id}: twice"));
        }
    }
    let (mut placed, mut dropped_places) = (0, 0);
    for row in places {
        let place = (text(&row[0]).and_then(|t| made.get_mut(t)), text(&row[1]).and_then(|u| users.get(u)));
        let (Some((org, team)), Some(&user)) = place else {
            dropped_places += 1;
            continue;
        };
        let Some(&since) = joined.get(&(*org, user)) else {
            dropped_places += 1;
            continue;
        };
        if team.members.iter().any(|m| m.user == user) {
            continue;
        }
        let created_at_ms = time(&row[2]).unwrap_or(now_ms).max(since);
        team.members.push(TeamMemberRecordV1 { user, created_at_ms });
        placed += 1;
    }
    if plan.blocked_by("team(s)", &problems) {
        return;
    }
    if dropped_teams > 0 {
        plan.notes.push(format!("{dropped_teams} team(s) of organizations not imported: dropped"));
    }
    if dropped_places > 0 {
        plan.notes.push(format!(
            "{dropped_places} team member row(s) of users or teams not imported, or without a membership: dropped"
        ));
    }
    let count = made.len();
    // better-auth's team ids are no UUIDs: the mapping file says which team became which.
    for (better_auth_id, (_, team)) in &made {
        plan.mapping.push(Mapping {
            kind: "team",
            better_auth_id: better_auth_id.clone(),
            id: uuid::Uuid::from_bytes(team.id).to_string(),
            key: team.name.clone(),
        });
    }
    // In the order better-auth made them, as list-teams lists them.
    let mut made: Vec<([u8; 16], TeamRecordV1)> = made.into_values().collect();
    made.sort_by_key(|(_, t)| t.created_at_ms);
    for op in &mut plan.ops {
        if let StoreOp::PutOrg(o) = op {
            o.teams.extend(made.iter().filter(|(org, _)| *org == o.id).map(|(_, t)| t.clone()));
        }
    }
    if count > 0 {
        plan.notes.push(format!("{count} team(s) imported with {placed} member place(s)"));
    }
}
