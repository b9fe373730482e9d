//! The users actor's account messages: creating, changing, removing and lifting the bans of accounts, setting up
//! an administrator, and deleting an organization (which detaches its accounts in the same commit).

use std::sync::Arc;

use ractor::RpcReplyPort;

use super::{State, UsersActor, put};
use crate::actors::Unavailable;
use crate::actors::sessions::Activate;
use crate::actors::users::accounts::{AccountMsg, OrgDeleter};
use crate::actors::users::rules::{self, AdminSetup, Changed, Snapshot};
use crate::actors::users::{
    AdminVia, CreateUserError, DeleteOrgError, DeleteUserError, EnsureAdmin, EnsureAdminError, NewUser, OwnChange,
    OwnChangeError, UpdateUserError, UserChange,
};
use crate::domain::{OrgId, Timestamp, User, UserFields, UserId, action};
use crate::store::{Conflict, StoreOp, audit};

impl UsersActor {
    /// Accounts and the organizations they belong to: one method per message.
    pub(super) fn account(&self, state: &mut State, msg: AccountMsg) {
        match msg {
            AccountMsg::Create { user, by, ip, reply } => self.create_account(state, user, by, ip, reply),
            AccountMsg::Update { by, target, change, ip, reply } => {
                self.update_account(state, by, target, change, ip, reply)
            }
            AccountMsg::EnsureAdmin { name, email, password_hash, promote_existing, via, reply } => {
                let setup = AdminSetup { name, email, password_hash, promote_existing };
                self.ensure_admin(state, setup, via, reply)
            }
            AccountMsg::ChangeOwn { user, by, change, ip, reply } => {
                self.change_own(state, user, by, change, ip, reply)
            }
            AccountMsg::Delete { user, by, ip, reply } => self.delete_account(state, user, by, ip, reply),
            AccountMsg::LiftExpiredBans { reply } => self.lift_expired_bans(state, reply),
            AccountMsg::DeleteOrg { by, org, deleter, ip, reply } => {
                self.delete_org(state, by, org, deleter, ip, reply)
            }
        }
    }

    fn create_account(
        &self,
        state: &mut State,
        user: NewUser,
        by: Option<UserId>,
        ip: String,
        reply: Reply<Arc<User>, CreateUserError>,
    ) {
        let refused = match by {
            Some(admin) if !self.get(state, admin).is_some_and(|a| a.is_active_admin()) => {
                Some(CreateUserError::NotAdmin)
            }
            _ if self.email_owner(state, &user.email).is_some() => Some(CreateUserError::EmailTaken),
            _ if user.username.as_ref().is_some_and(|n| self.username_taken(state, n, None)) => {
                Some(CreateUserError::UsernameTaken)
            }
            _ => None,
        };
        if let Some(e) = refused {
            let _ = reply.send(Err(e));
        } else {
            let user = self.stage(state, rules::new_account(user, Timestamp::now()), false);
            let detail = if by.is_some() { "created by an administrator" } else { "" };
            let actor = by.or(Some(user.id));
            let logged = audit::entry(action::USER_CREATED, actor, Some(user.id.into()), &ip, detail.into());
            // Several nodes: another node may have taken the address a moment ago.
            let email = user.email().to_owned();
            let taken = move |c: &Conflict| match c {
                Conflict::EmailTaken(e) if *e == email => Some(CreateUserError::EmailTaken),
                Conflict::UsernameTaken(_) => Some(CreateUserError::UsernameTaken),
                _ => None,
            };
            state.overlay.add_guarded([put(&user), logged], reply, Ok(user), taken);
        }
    }

    fn update_account(
        &self,
        state: &mut State,
        by: UserId,
        target: UserId,
        change: UserChange,
        ip: String,
        reply: Reply<Arc<User>, UpdateUserError>,
    ) {
        let Some(current) = self.get(state, target) else {
            let _ = reply.send(Err(UpdateUserError::UserNotFound));
            return;
        };
        let caller = self.get(state, by);
        let (orgs, closing) = (&self.indexes.orgs, &state.closing_orgs);
        let snapshot = Snapshot {
            caller: caller.as_deref(),
            active_admins: self.active_admin_count(state),
            org_exists: &|org| orgs.get(org).is_some() && !closing.contains(&org),
        };
        if change.username.as_ref().is_some_and(|name| self.username_taken(state, name, Some(target))) {
            let _ = reply.send(Err(UpdateUserError::UsernameTaken));
            return;
        }
        let new_password = change.password_hash.is_some();
        let changed = rules::apply_change(&snapshot, &current, change, Timestamp::now());
        let changed = changed.and_then(|c| self.primary_moved(state, &current, &c.user).map(|ops| (c, ops)));
        match changed {
            Ok((Changed { user, ends_sessions }, membership_ops)) => {
                let after = self.stage(state, user, ends_sessions);
                let mut ops = vec![put(&after)];
                ops.extend(membership_ops);
                if new_password {
                    ops.extend(self.end_password_bound(state, after.id));
                }
                ops.extend(
                    rules::changes(&current, &after)
                        .map(|(what, detail)| audit::entry(what, Some(by), Some(after.id.into()), &ip, detail)),
                );
                // Several nodes: an administrator demoted elsewhere at the same time may make this one the
                // last; PostgreSQL's guard then refuses it as the actor would have. Likewise a move into an
                // organization another node deleted meanwhile.
                let id = after.id.to_bytes();
                let last = move |c: &Conflict| match c {
                    Conflict::LastAdmin => Some(UpdateUserError::LastAdmin),
                    Conflict::LastOwner { .. } => Some(UpdateUserError::LastOwner),
                    Conflict::OrganizationGone { user } if *user == id => Some(UpdateUserError::OrganizationNotFound),
                    Conflict::UsernameTaken(_) => Some(UpdateUserError::UsernameTaken),
                    _ => None,
                };
                state.overlay.add_guarded(ops, reply, Ok(after), last);
            }
            Err(e) => drop(reply.send(Err(e))),
        }
    }

    fn ensure_admin(
        &self,
        state: &mut State,
        setup: AdminSetup,
        via: AdminVia,
        reply: Reply<EnsureAdmin, EnsureAdminError>,
    ) {
        let existing = self.email_owner(state, &setup.email).and_then(|id| self.get(state, id));
        match rules::set_up_admin(existing.as_deref(), setup, Timestamp::now()) {
            Ok((Changed { user, ends_sessions }, outcome)) => {
                let user = self.stage(state, user, ends_sessions);
                let detail = match (outcome, &via) {
                    (EnsureAdmin::Created(_), AdminVia::CommandLine) => {
                        "administrator created from the command line or bootstrap"
                    }
                    (EnsureAdmin::Created(_), AdminVia::SetupLink { .. }) => {
                        "first administrator created through the one-time setup link"
                    }
                    (EnsureAdmin::Promoted(_), _) => {
                        "existing account made administrator from the command line or bootstrap; \
                         password replaced, sessions ended"
                    }
                };
                let ip = match &via {
                    AdminVia::CommandLine => "",
                    AdminVia::SetupLink { ip } => ip.as_str(),
                };
                let mut ops = vec![put(&user)];
                if let EnsureAdmin::Promoted(_) = outcome {
                    ops.extend(self.end_password_bound(state, user.id));
                }
                ops.push(audit::entry(action::ROLE_CHANGED, None, Some(user.id.into()), ip, detail.into()));
                state.overlay.add(ops, reply, outcome);
            }
            Err(e) => drop(reply.send(Err(e))),
        }
    }

    fn change_own(
        &self,
        state: &mut State,
        user: UserId,
        by: UserId,
        change: OwnChange,
        ip: String,
        reply: Reply<Arc<User>, OwnChangeError>,
    ) {
        let Some(current) = self.get(state, user) else {
            let _ = reply.send(Err(OwnChangeError::UserNotFound));
            return;
        };
        if let OwnChange::Profile { username: Some(name), .. } = &change
            && self.username_taken(state, name, Some(current.id))
        {
            let _ = reply.send(Err(OwnChangeError::UsernameTaken));
            return;
        }
        // A user's own profile edit is not audited; one made through an impersonation is, naming the
        // administrator (as every row written through an impersonation does).
        let impersonated = by != user;
        let what = match &change {
            OwnChange::Password { end_sessions: true, .. } => {
                Some((action::PASSWORD_CHANGED, "password changed; every session ended"))
            }
            OwnChange::Password { .. } => Some((action::PASSWORD_CHANGED, "password changed")),
            OwnChange::Profile { .. } if impersonated => Some((action::PROFILE_UPDATED, "profile updated")),
            OwnChange::Profile { .. } => None,
        };
        let new_password = matches!(change, OwnChange::Password { .. });
        let Changed { user, ends_sessions } = rules::apply_own_change(&current, change, Timestamp::now());
        let user = self.stage(state, user, ends_sessions);
        let mut ops = vec![put(&user)];
        if new_password {
            ops.extend(self.end_password_bound(state, user.id));
        }
        if let Some((what, detail)) = what {
            let detail = if impersonated { format!("{detail}, while impersonating") } else { detail.into() };
            ops.push(audit::entry(what, Some(by), Some(user.id.into()), &ip, detail));
        }
        // Several nodes: another node may have given the username away a moment ago.
        let taken = |c: &Conflict| matches!(c, Conflict::UsernameTaken(_)).then_some(OwnChangeError::UsernameTaken);
        state.overlay.add_guarded(ops, reply, Ok(user), taken);
    }

    fn delete_account(
        &self,
        state: &mut State,
        user: UserId,
        by: Option<UserId>,
        ip: String,
        reply: Reply<(), DeleteUserError>,
    ) {
        let Some(current) = self.get(state, user) else {
            let _ = reply.send(Err(DeleteUserError::UserNotFound));
            return;
        };
        let admins = self.active_admin_count(state);
        let allowed = match by {
            Some(admin) => rules::may_remove(self.get(state, admin).as_deref(), &current, admins),
            None => rules::may_delete(&current, admins),
        };
        if let Err(e) = allowed {
            let _ = reply.send(Err(e));
            return;
        }
        // The sessions end in the same commit (through the sessions actor, like a ban), and so do the
        // identities linked to the account.
        state.ending.push(user);
        let unlinked: Vec<StoreOp> = self
            .accounts_of(state, user)
            .into_iter()
            .map(|a| {
                state.accounts.insert(a.id, None);
                StoreOp::DeleteAccount { id: a.id, user: user.to_bytes() }
            })
            .collect();
        state.overlay.push_ops(unlinked);
        state.overlay.stage(user, None);
        let detail = current.email().to_owned();
        let logged = audit::entry(action::USER_DELETED, by.or(Some(user)), Some(user.into()), &ip, detail);
        let last = |c: &Conflict| (*c == Conflict::LastAdmin).then_some(DeleteUserError::LastAdmin);
        // Its memberships go first (they name the account).
        let mut ops = self.memberships_end_with(state, user);
        ops.extend([StoreOp::DeleteUser(user.to_bytes()), logged]);
        state.overlay.add_guarded(ops, reply, Ok(()), last);
    }

    fn lift_expired_bans(&self, state: &mut State, reply: Reply<usize, Unavailable>) {
        let now = Timestamp::now();
        let ran_out = |u: &User| u.banned && u.ban_expires().is_some_and(|end| end <= now);
        let mut candidates: Vec<UserId> = self.indexes.users.bans_ended_by(now);
        candidates.extend(state.overlay.values().flatten().filter(|u| ran_out(u)).map(|u| u.id));
        candidates.sort_unstable();
        candidates.dedup();
        let mut ops = Vec::new();
        for id in candidates {
            if let Some(lifted) = self.get(state, id).and_then(|u| rules::lift_expired_ban(&u, now)) {
                let lifted = self.stage(state, lifted, false);
                ops.push(put(&lifted));
                ops.push(audit::entry(action::BAN_EXPIRED, None, Some(id.into()), "", String::new()));
            }
        }
        if ops.is_empty() {
            let _ = reply.send(Ok(0));
            return;
        }
        let count = ops.len() / 2;
        state.overlay.add(ops, reply, count);
    }

    fn delete_org(
        &self,
        state: &mut State,
        by: UserId,
        org: OrgId,
        deleter: OrgDeleter,
        ip: String,
        reply: Reply<usize, DeleteOrgError>,
    ) {
        let Some(organization) = self.indexes.orgs.get(org).filter(|_| !state.closing_orgs.contains(&org)) else {
            let _ = reply.send(Err(DeleteOrgError::NotFound));
            return;
        };
        let admin = self.get(state, by).is_some_and(|a| a.is_active_admin());
        let (allowed, detach) = match deleter {
            // An owner (the role allowed to delete it) of this organization, right now.
            OrgDeleter::Member { .. } => {
                let owner = self.indexes.members.get(org, by).is_some_and(|m| m.roles.allows("organization", "delete"));
                (owner || admin, true)
            }
            OrgDeleter::Administrator { detach } => (admin, detach),
        };
        if !allowed {
            let _ = reply.send(Err(DeleteOrgError::NotAdmin));
            return;
        }
        let members = self.members(state, org);
        let memberships = self.indexes.members.count(org);
        if (!members.is_empty() || memberships > 0) && !detach {
            let _ = reply.send(Err(DeleteOrgError::NotEmpty(members.len().max(memberships))));
            return;
        }
        let now = Timestamp::now();
        let mut ops = Vec::with_capacity(members.len() + 2);
        for member in &members {
            let detached = User::from(UserFields { organization_id: None, updated_at: now, ..member.fields() });
            ops.push(put(&self.stage(state, detached, false)));
        }
        let detail = format!("{}; {} member(s) detached", organization.slug, members.len().max(memberships));
        ops.extend(self.org_members_end(state, org));
        ops.push(StoreOp::DeleteOrg(org.to_bytes()));
        ops.push(audit::entry(action::ORGANIZATION_DELETED, Some(by), Some(org.into()), &ip, detail));
        state.closing_orgs.push(org);
        // The caller's session stops working in it in the same commit (through the sessions actor, as a member
        // leaving does), never in a second call after the answer.
        if let OrgDeleter::Member { active_in: Some(session) } = deleter {
            state.activating.push(Activate::org(session, None));
        }
        // Several nodes: an account another node moved into it meanwhile keeps it (the database's
        // membership reference), answered as a non-empty organization.
        let gone = org.to_bytes();
        let has_members = move |c: &Conflict| {
            matches!(c, Conflict::OrganizationHasMembers { org } if *org == gone).then_some(DeleteOrgError::NotEmpty(1))
        };
        state.overlay.add_guarded(ops, reply, Ok(members.len().max(memberships)), has_members);
    }
}

/// Where a message of this kind is answered.
type Reply<T, E> = RpcReplyPort<Result<T, E>>;
