//! The organizations actor's side of [`RoleMsg`]: each change is a new version of the organization (its roles
//! live in its record, as its teams do), checked against the version this batch already holds, audited in the
//! same commit.

use ractor::ActorRef;

use super::{OrgsActor, State};
use crate::actors::orgs::OrgsMsg;
use crate::actors::orgs::roles::{RoleError, RoleMsg};
use crate::domain::{CustomRole, RoleId, action};

impl OrgsActor {
    pub(super) async fn role(&self, myself: &ActorRef<OrgsMsg>, state: &mut State, msg: RoleMsg) {
        match msg {
            RoleMsg::Create { org, name, grants, limit, caller, reply } => {
                self.change(myself, state, org, caller, reply, |o, now, _| {
                    if limit.is_some_and(|l| o.roles.len() >= l) {
                        return Err(RoleError::TooManyRoles);
                    }
                    if o.roles.iter().any(|r| r.name == name) {
                        return Err(RoleError::NameTaken);
                    }
                    let role = CustomRole { id: RoleId::new(), name, grants, created_at: now, updated_at: None };
                    let detail = format!("{} ({}): {}", role.id, role.name, describe(&role));
                    o.roles.push(role.clone());
                    Ok((role, action::ROLE_CREATED, detail))
                })
                .await
            }
            RoleMsg::Update { org, role, name, grants, caller, reply } => {
                self.change(myself, state, org, caller, reply, |o, now, _| {
                    let at = o.roles.iter().position(|r| role.finds(r)).ok_or(RoleError::RoleNotFound)?;
                    if let Some(new) = &name
                        && o.roles.iter().enumerate().any(|(i, r)| i != at && r.name == *new)
                    {
                        return Err(RoleError::NameTaken);
                    }
                    let r = &mut o.roles[at];
                    let mut detail = format!("{} ({})", r.id, r.name);
                    if let Some(new) = name.filter(|n| *n != r.name) {
                        // Members holding the old name keep it, and it grants nothing from now on (as the plugin).
                        detail.push_str(&format!(": renamed {} -> {new}", r.name));
                        r.name = new;
                    }
                    if let Some(grants) = grants {
                        r.grants = grants;
                        detail.push_str(&format!(": permissions {}", describe(r)));
                    }
                    r.updated_at = Some(now);
                    Ok((r.clone(), action::ROLE_UPDATED, detail))
                })
                .await
            }
            RoleMsg::Delete { org, role, caller, reply } => {
                let members = self.indexes.members.members_of(org);
                self.change(myself, state, org, caller, reply, |o, _, _| {
                    let at = o.roles.iter().position(|r| role.finds(r)).ok_or(RoleError::RoleNotFound)?;
                    // The plugin refuses while any member holds it; pending invitations carrying it do not block.
                    if members.iter().any(|m| m.roles.holds(o.roles[at].name.as_str())) {
                        return Err(RoleError::InUse);
                    }
                    let removed = o.roles.remove(at);
                    let detail = format!("{} ({})", removed.id, removed.name);
                    Ok((removed, action::ROLE_DELETED, detail))
                })
                .await
            }
        }
    }
}

/// `resource:action` pairs, for the audit entry.
fn describe(role: &CustomRole) -> String {
    let pairs: Vec<String> =
        role.grants.iter().flat_map(|(r, actions)| actions.iter().map(move |a| format!("{r}:{a}"))).collect();
    if pairs.is_empty() { "none".into() } else { pairs.join(" ") }
}
