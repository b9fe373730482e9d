//! The users actor's SCIM messages ([`crate::actors::users::scim`]): provisioning, changing (deactivating is a
//! ban) and deprovisioning an organization's accounts, each checked against the state as it is and committed
//! with its audit entries and the directory's record. Membership changes flush at once, as the organization
//! plugin's do, so the read index is the whole truth for the next message.

use std::sync::Arc;

use ractor::RpcReplyPort;

use super::{State, UsersActor, put};
use crate::actors::users::rules;
use crate::actors::users::scim::{DEACTIVATED, ScimChange, ScimError, ScimMsg};
use crate::actors::users::{DeleteUserError, NewUser};
use crate::domain::{MemberRoles, Membership, OrgId, OrgRole, Timestamp, User, UserFields, UserId, action};
use crate::store::{Conflict, ScimUserRecordV1, StoreOp, audit, convert};

impl UsersActor {
    pub(super) fn scim(&self, state: &mut State, msg: ScimMsg) {
        match msg {
            ScimMsg::Provision { org, user, record, by, via, ip, reply } => {
                self.scim_provision(state, org, user, record, by, &via, &ip, reply)
            }
            ScimMsg::Change { change, ip, reply } => self.scim_change(state, change, &ip, reply),
            ScimMsg::Deprovision { org, user, by, via, ip, reply } => {
                self.scim_deprovision(state, org, user, by, &via, &ip, reply)
            }
        }
    }

    fn org_open(&self, state: &State, org: OrgId) -> bool {
        self.indexes.orgs.get(org).is_some() && !state.closing_orgs.contains(&org)
    }

    #[allow(clippy::too_many_arguments)]
    fn scim_provision(
        &self,
        state: &mut State,
        org: OrgId,
        new: NewUser,
        mut record: ScimUserRecordV1,
        by: UserId,
        via: &str,
        ip: &str,
        reply: Reply<Arc<User>>,
    ) {
        if !self.org_open(state, org) {
            let _ = reply.send(Err(ScimError::OrganizationNotFound));
            return;
        }
        if self.email_owner(state, &new.email).is_some() {
            let _ = reply.send(Err(ScimError::EmailTaken));
            return;
        }
        let now = Timestamp::now();
        let made = rules::new_account(new, now);
        let active = record.active;
        // Its primary organization is the one whose directory made it; a directory's account is deactivated (a
        // ban) from its first commit when the directory says so.
        let user = User::from(UserFields {
            organization_id: Some(org),
            banned: !active,
            ban_reason: (!active).then(|| DEACTIVATED.into()),
            ..made.fields()
        });
        let user = self.stage(state, user, false);
        record.user = user.id.to_bytes();
        let member = Arc::new(Membership::new(org, user.id, MemberRoles::one(OrgRole::Member), now));
        state.members.push((org, user.id, Some(Arc::clone(&member))));
        state.flush_now = true;
        let target = Some(user.id.into());
        let mut ops = vec![
            put(&user),
            StoreOp::PutMember(convert::membership_record(&member)),
            StoreOp::PutScimUser(record),
            audit::entry(action::USER_CREATED, Some(by), target, ip, format!("provisioned over SCIM by {org} ({via})")),
            audit::entry(action::MEMBER_ADDED, Some(by), target, ip, format!("{org} as member, over SCIM ({via})")),
        ];
        if !active {
            ops.push(audit::entry(action::BANNED, Some(by), target, ip, format!("{DEACTIVATED}: {org} ({via})")));
        }
        // Several nodes: another node may have taken the address a moment ago, or deleted the organization.
        let email = user.email().to_owned();
        let conflict = move |c: &Conflict| match c {
            Conflict::EmailTaken(e) if *e == email => Some(ScimError::EmailTaken),
            Conflict::OrganizationGone { .. } => Some(ScimError::OrganizationNotFound),
            _ => None,
        };
        state.overlay.add_guarded(ops, reply, Ok(user), conflict);
    }

    fn scim_change(&self, state: &mut State, change: ScimChange, ip: &str, reply: Reply<Arc<User>>) {
        let ScimChange { org, user, name, password_hash, record, by, via } = change;
        let Some(current) = self.get(state, user).filter(|_| self.indexes.members.get(org, user).is_some()) else {
            let _ = reply.send(Err(ScimError::UserNotFound));
            return;
        };
        let deactivates = !record.active && !current.banned;
        // Only the directory's own ban is lifted by it: an administrator's stays.
        let reactivates = record.active && current.banned && current.ban_reason() == Some(DEACTIVATED);
        if deactivates && current.is_active_admin() && self.active_admin_count(state) <= 1 {
            let _ = reply.send(Err(ScimError::LastAdmin));
            return;
        }
        let target = Some(user.into());
        let mut ops = Vec::new();
        let mut fields = current.fields();
        let renamed = name.filter(|n| n.as_str() != current.name());
        let new_password = password_hash.is_some();
        let touched = renamed.is_some() || deactivates || reactivates || new_password;
        if let Some(name) = renamed {
            fields.name = name;
        }
        if let Some(hash) = password_hash {
            fields.password_hash = hash.into();
            let detail = format!("set over SCIM by {org} ({via}); every session ended");
            ops.push(audit::entry(action::PASSWORD_SET, Some(by), target, ip, detail));
        }
        if deactivates {
            (fields.banned, fields.ban_reason, fields.ban_expires) = (true, Some(DEACTIVATED.into()), None);
            ops.push(audit::entry(action::BANNED, Some(by), target, ip, format!("{DEACTIVATED}: {org} ({via})")));
        }
        if reactivates {
            (fields.banned, fields.ban_reason, fields.ban_expires) = (false, None, None);
            ops.push(audit::entry(
                action::UNBANNED,
                Some(by),
                target,
                ip,
                format!("reactivated over SCIM: {org} ({via})"),
            ));
        }
        let after = if touched {
            fields.updated_at = Timestamp::now();
            // A deactivation ends every session of the account in this commit (through the sessions actor, as a
            // ban does): nothing signed in outlives the directory's answer. So does a new password, with the
            // tokens the old one stood behind (a reset link, a trusted device), as an administrator's does.
            let after = self.stage(state, User::from(fields), deactivates || new_password);
            ops.insert(0, put(&after));
            if new_password {
                ops.extend(self.end_password_bound(state, after.id));
            }
            after
        } else {
            current
        };
        let detail = format!("{org}: userName {:?} ({via})", record.user_name);
        ops.push(StoreOp::PutScimUser(record));
        ops.push(audit::entry(action::SCIM_USER_UPDATED, Some(by), target, ip, detail));
        let last = |c: &Conflict| (*c == Conflict::LastAdmin).then_some(ScimError::LastAdmin);
        state.overlay.add_guarded(ops, reply, Ok(after), last);
    }

    #[allow(clippy::too_many_arguments)]
    fn scim_deprovision(
        &self,
        state: &mut State,
        org: OrgId,
        user: UserId,
        by: UserId,
        via: &str,
        ip: &str,
        reply: Reply<()>,
    ) {
        let Some(current) = self.get(state, user) else {
            let _ = reply.send(Err(ScimError::UserNotFound));
            return;
        };
        let memberships = self.indexes.members.of_user(user);
        let elsewhere = memberships.iter().any(|m| m.org != org);
        let target = Some(user.into());
        let mut ops = vec![StoreOp::DeleteScimUser { org: org.to_bytes(), user: user.to_bytes() }];
        if elsewhere {
            // Another organization has the account: only this one's membership ends (and its primary organization,
            // when it was this one).
            if self.indexes.members.get(org, user).is_some() {
                state.members.push((org, user, None));
                state.flush_now = true;
                ops.push(StoreOp::DeleteMember(org.to_bytes(), user.to_bytes()));
                let detail = format!("{org}, deprovisioned over SCIM ({via})");
                ops.push(audit::entry(action::MEMBER_REMOVED, Some(by), target, ip, detail));
            }
            if current.organization_id == Some(org) {
                let moved = UserFields { organization_id: None, updated_at: Timestamp::now(), ..current.fields() };
                let moved = self.stage(state, User::from(moved), false);
                ops.insert(0, put(&moved));
            }
            state.overlay.add(ops, reply, ());
            return;
        }
        if let Err(DeleteUserError::LastAdmin) = rules::may_delete(&current, self.active_admin_count(state)) {
            let _ = reply.send(Err(ScimError::LastAdmin));
            return;
        }
        // No other organization has it: the account goes, as an administrator's removal does, with its sessions,
        // linked identities and memberships in the same commit.
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
        ops.extend(self.memberships_end_with(state, user));
        ops.push(StoreOp::DeleteUser(user.to_bytes()));
        let detail = format!("{}, deprovisioned over SCIM by {org} ({via})", current.email());
        ops.push(audit::entry(action::USER_DELETED, Some(by), target, ip, detail));
        let last = |c: &Conflict| (*c == Conflict::LastAdmin).then_some(ScimError::LastAdmin);
        state.overlay.add_guarded(ops, reply, Ok(()), last);
    }
}

/// Where a message of this kind is answered.
type Reply<T> = RpcReplyPort<Result<T, ScimError>>;
