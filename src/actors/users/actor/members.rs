//! The users actor's membership messages ([`crate::actors::users::members`]): each change is checked against the
//! read index and flushed at once (they are rare), so the index is the whole truth for the next message and no
//! pending state spans two messages.

use std::sync::Arc;

use ractor::RpcReplyPort;

use super::{State, UsersActor};
use crate::actors::overlay::Refusal;
use crate::actors::sessions::Activate;
use crate::actors::users::UpdateUserError;
use crate::actors::users::members::{Caller, Invite, Lent, MemberError, MemberMsg, Target};
use crate::domain::{
    Email, Invitation, InvitationId, InvitationStatus, InvitedTeams, MemberId, MemberRoles, Membership, OrgId, OrgRole,
    Organization, Team, TeamId, TeamMember, Timestamp, User, UserFields, UserId, action,
};
use crate::store::{Conflict, StoreOp, audit, convert};

/// A change checked: the records to commit (the memberships and invitations to publish once durable are staged in
/// the state) and the answer.
type Changed<T> = Result<(Vec<StoreOp>, T), MemberError>;

impl UsersActor {
    pub(super) fn member_change(&self, state: &mut State, msg: MemberMsg) {
        // Another node's commit that would leave no owner: a change of roles leaves the organization without one,
        // an ending membership takes its only one.
        let only_owner = MemberError::OnlyOwner;
        match msg {
            MemberMsg::SetRoles { caller, org, member, roles, ip, reply } => {
                let done = self.set_roles(state, caller, org, member, roles, &ip);
                commit(state, done, reply, MemberError::WithoutAnOwner);
            }
            MemberMsg::Remove { caller, org, target, ip, reply } => {
                let done = self.remove(state, caller, org, target, &ip);
                let done = done.inspect(|(_, m)| state.activating.extend(left(&caller, m)));
                commit(state, done, reply, only_owner);
            }
            MemberMsg::Leave { caller, org, ip, reply } => {
                let done = self.leave(state, caller, org, &ip);
                let done = done.inspect(|(_, m)| state.activating.extend(left(&caller, m)));
                commit(state, done, reply, only_owner);
            }
            MemberMsg::Invite { caller, invite, ip, reply } => {
                let done = self.invite(state, caller, invite, &ip);
                commit(state, done, reply, only_owner);
            }
            MemberMsg::Accept { caller, id, email, member_limit, lent, ip, reply } => {
                let done = self.accept(state, caller, id, email, member_limit, lent, &ip);
                commit(state, done, reply, only_owner);
            }
            MemberMsg::Reject { caller, id, email, ip, reply } => {
                let done = self.reject(state, caller, id, email, &ip);
                commit(state, done, reply, only_owner);
            }
            MemberMsg::Cancel { caller, id, ip, reply } => {
                let done = self.cancel(state, caller, id, &ip);
                commit(state, done, reply, only_owner);
            }
            MemberMsg::CommitTeamsRemoved { mut ops, activating, teams, reply } => {
                ops.extend(self.strip_teams(state, &teams));
                state.activating.extend(activating);
                state.flush_now = true;
                state.overlay.add_answering(ops, reply, Ok(()), |c| Some(Err(Refusal::Conflict(c.clone()))));
            }
        }
    }

    /// Whether `roles` allow `action` on `resource` in `org`, the roles it defined included (`dynamicAccessControl`).
    fn allows(&self, roles: &MemberRoles, org: OrgId, resource: &str, action: &str) -> bool {
        let found = self.indexes.orgs.get(org);
        roles.allows_in(found.as_deref().map_or(&[][..], |o| o.roles.as_slice()), resource, action)
    }

    /// The roles `caller` acts with in `org`: their membership's, or an owner's for a global administrator.
    fn acting_roles(&self, caller: &Caller, org: OrgId) -> Option<MemberRoles> {
        let own = self.indexes.members.get(org, caller.user).map(|m| m.roles.clone());
        match own {
            _ if caller.global_admin => Some(MemberRoles::one(OrgRole::Owner)),
            own => own,
        }
    }

    /// `update-member-role`.
    fn set_roles(
        &self,
        state: &mut State,
        caller: Caller,
        org: OrgId,
        member: MemberId,
        roles: MemberRoles,
        ip: &str,
    ) -> Changed<Arc<Membership>> {
        let owners = |org| self.indexes.members.owners(org);
        let acting = self.acting_roles(&caller, org).ok_or(MemberError::MemberNotFound)?;
        let target = self.indexes.members.by_id(member).ok_or(MemberError::MemberNotFound)?;
        if target.org != org {
            return Err(MemberError::NotAllowedToUpdateMember);
        }
        // Only an owner grants or takes away `owner`.
        if (target.roles.is_owner() || roles.is_owner()) && !acting.is_owner() {
            return Err(MemberError::NotAllowedToUpdateMember);
        }
        let demotes_owner = target.roles.is_owner() && !roles.is_owner();
        if demotes_owner && owners(org) <= 1 {
            return Err(MemberError::WithoutAnOwner);
        }
        if !acting.is_owner() && !self.allows(&acting, org, "member", "update") {
            return Err(MemberError::NotAllowedToUpdateMember);
        }
        let detail = format!("{}: {} -> {}", org, target.roles, roles);
        let updated = Arc::new(Membership { roles, ..Membership::clone(&target) });
        let mut ops = vec![StoreOp::PutMember(convert::membership_record(&updated))];
        if demotes_owner {
            ops.push(StoreOp::ExpectOwner(org.to_bytes()));
        }
        ops.push(audit::entry(action::MEMBER_ROLE_CHANGED, Some(caller.actor), Some(target.user.into()), ip, detail));
        state.members.push((org, target.user, Some(Arc::clone(&updated))));
        Ok((ops, updated))
    }

    /// `remove-member`.
    fn remove(
        &self,
        state: &mut State,
        caller: Caller,
        org: OrgId,
        target: Target,
        ip: &str,
    ) -> Changed<Arc<Membership>> {
        let owners = |org| self.indexes.members.owners(org);
        let now = Timestamp::now();
        let acting = self.acting_roles(&caller, org).ok_or(MemberError::MemberNotFound)?;
        let found = match target {
            Target::Email(email) => {
                self.email_owner(state, &email).and_then(|user| self.indexes.members.get(org, user))
            }
            Target::Member(id) => self.indexes.members.by_id(id),
        };
        let found = found.ok_or(MemberError::MemberNotFound)?;
        if found.roles.is_owner() && (!acting.is_owner() || owners(found.org) <= 1) {
            return Err(MemberError::OnlyOwner);
        }
        if !self.allows(&acting, org, "member", "delete") {
            return Err(MemberError::NotAllowedToDeleteMember);
        }
        if found.org != org {
            return Err(MemberError::MemberNotFound);
        }
        Ok((self.end_membership(state, &caller, &found, ip, action::MEMBER_REMOVED, now), found))
    }

    /// `leave`.
    fn leave(&self, state: &mut State, caller: Caller, org: OrgId, ip: &str) -> Changed<Arc<Membership>> {
        let owners = |org| self.indexes.members.owners(org);
        let now = Timestamp::now();
        let found = self.indexes.members.get(org, caller.user).ok_or(MemberError::MemberNotFound)?;
        if found.roles.is_owner() && owners(org) <= 1 {
            return Err(MemberError::OnlyOwner);
        }
        Ok((self.end_membership(state, &caller, &found, ip, action::MEMBER_LEFT, now), found))
    }

    /// `invite-member`.
    fn invite(
        &self,
        state: &mut State,
        caller: Caller,
        Invite { org, email, roles, resend, ttl, limit, mail, teams, team_limit }: Invite,
        ip: &str,
    ) -> Changed<Arc<Invitation>> {
        let now = Timestamp::now();
        if mail.is_some() && self.mail.as_ref().is_some_and(crate::mail::MailQueue::is_full) {
            return Err(MemberError::OutboxFull);
        }
        let acting = self.acting_roles(&caller, org).ok_or(MemberError::MemberNotFound)?;
        if !self.allows(&acting, org, "invitation", "create") {
            return Err(MemberError::NotAllowedToInvite);
        }
        if roles.is_owner() && !acting.is_owner() {
            return Err(MemberError::NotAllowedToInviteWithRole);
        }
        if self.email_owner(state, &email).is_some_and(|u| self.indexes.members.get(org, u).is_some()) {
            return Err(MemberError::AlreadyMember);
        }
        let organization = self.indexes.orgs.get(org).ok_or(MemberError::OrganizationNotFound)?;
        let inviter = self.get(state, caller.actor).map(|u| u.email().to_owned()).unwrap_or_default();
        let pending: Vec<Arc<Invitation>> =
            self.indexes.members.invitations_of(org).into_iter().filter(|i| i.is_open(now)).collect();
        let invitation = match pending.iter().find(|i| i.email == email) {
            Some(_) if !resend => return Err(MemberError::AlreadyInvited),
            Some(existing) => {
                if existing.roles.is_owner() && !acting.is_owner() {
                    return Err(MemberError::NotAllowedToInviteWithRole);
                }
                Invitation { expires_at: now.plus(ttl), ..Invitation::clone(existing) }
            }
            None if pending.len() >= limit => return Err(MemberError::InvitationLimitReached),
            None => {
                for team in teams.iter() {
                    let members = self.team_members(&organization, team).ok_or(MemberError::TeamNotFound)?;
                    if team_limit.is_some_and(|l| members >= l) {
                        return Err(MemberError::TeamFull);
                    }
                }
                Invitation {
                    id: InvitationId::random(),
                    org,
                    email,
                    roles,
                    inviter: caller.user,
                    status: InvitationStatus::Pending,
                    expires_at: now.plus(ttl),
                    created_at: now,
                    teams,
                }
            }
        };
        let invitation = Arc::new(invitation);
        let mut detail = format!("{} as {} into {}", invitation.email, invitation.roles, organization.slug);
        detail.push_str(&teams_named(&invitation));
        // The invitation first, its mail (if any) next, the audit entry last: the webhook's fan-out reads
        // them in this order (`store::hooks`).
        let mut ops = vec![StoreOp::PutInvitation(convert::invitation_record(&invitation))];
        match mail {
            Some(mail) => {
                let message = mail(&invitation, organization.name.as_str(), &inviter);
                ops.push(StoreOp::PutOutbox(convert::mail_record(&message)));
                state.mails.push(message);
            }
            None => detail.push_str("; not mailed (no mail transport)"),
        }
        ops.push(audit::entry(action::INVITATION_SENT, Some(caller.actor), Some(org.into()), ip, detail));
        state.invitations.push((invitation.id, Some(Arc::clone(&invitation))));
        Ok((ops, invitation))
    }

    /// `accept-invitation`; with the invitation's organization `lent`, the caller takes a place in each of the
    /// teams it names, in the same commit (a new version of the organization, published with the membership).
    #[allow(clippy::too_many_arguments)]
    fn accept(
        &self,
        state: &mut State,
        caller: Caller,
        id: InvitationId,
        email: Email,
        member_limit: usize,
        lent: Option<Lent>,
        ip: &str,
    ) -> Changed<(Arc<Invitation>, Arc<Membership>)> {
        let now = Timestamp::now();
        let invitation =
            self.indexes.members.invitation(id).filter(|i| i.is_open(now)).ok_or(MemberError::InvitationNotFound)?;
        if invitation.email != email {
            return Err(MemberError::NotRecipient);
        }
        let org = invitation.org;
        if self.indexes.orgs.get(org).is_none() {
            return Err(MemberError::OrganizationNotFound);
        }
        let existing = self.indexes.members.get(org, caller.user);
        if existing.is_none() && self.indexes.members.count(org) >= member_limit {
            return Err(MemberError::MembershipLimitReached);
        }
        // Checked before anything is staged: a team gone (or full) leaves the invitation pending. Without a loan
        // (teams off, or turned off since it was sent) its teams are ignored, as the plugin then ignores them.
        let joined_at = existing.as_ref().map_or(now, |m| now.max(m.created_at));
        let placed = match &lent {
            Some(lent) if !invitation.teams.is_empty() => {
                Some(self.placed_in_teams(lent, &invitation.teams, caller.user, joined_at)?)
            }
            _ => None,
        };
        let only_team = placed.as_ref().and(invitation.teams.only());
        let accepted = Arc::new(Invitation { status: InvitationStatus::Accepted, ..Invitation::clone(&invitation) });
        let mut ops = vec![StoreOp::PutInvitation(convert::invitation_record(&accepted))];
        // In every team already (invited although a member of them): nothing of the organization changes.
        if let Some((org_now, added)) = placed
            && !added.is_empty()
        {
            ops.push(StoreOp::PutOrg(convert::org_record(&org_now)));
            for team in added {
                let detail = format!("{} ({}): {}", team.id, team.name, caller.user);
                ops.push(audit::entry(action::TEAM_MEMBER_ADDED, Some(caller.actor), Some(org.into()), ip, detail));
            }
            state.lent_orgs.push(org_now);
        }
        // Already a member (joined otherwise meanwhile): the invitation is used up, the membership kept.
        let member = match existing {
            Some(member) => member,
            None => {
                let member = Arc::new(Membership::new(org, caller.user, invitation.roles.clone(), now));
                ops.push(StoreOp::PutMember(convert::membership_record(&member)));
                // The membership's own entry, about the account (the invitation's is about the organization).
                let detail = format!("{} as {}", org, invitation.roles);
                ops.push(audit::entry(action::MEMBER_ADDED, Some(caller.actor), Some(caller.user.into()), ip, detail));
                state.members.push((org, caller.user, Some(Arc::clone(&member))));
                member
            }
        };
        let detail = format!("{} as {}{}", invitation.email, invitation.roles, teams_named(&accepted));
        ops.push(audit::entry(action::INVITATION_ACCEPTED, Some(caller.actor), Some(org.into()), ip, detail));
        state.invitations.push((id, Some(Arc::clone(&accepted))));
        state.activating.extend(joined(&caller, org, only_team));
        Ok((ops, (accepted, member)))
    }

    /// How many members of `team` of `org` stand now (see [`crate::domain::TeamMember`]); `None` if `org` has no
    /// such team.
    fn team_members(&self, org: &Organization, team: TeamId) -> Option<usize> {
        let found = org.teams.iter().find(|t| t.id == team)?;
        Some(found.standing(|u| self.indexes.members.get(org.id, u)).count())
    }

    /// The `lent` organization with `user` in each of `teams` (already in one: left as is, as add-team-member is
    /// idempotent), and the teams they were added to; refused if a team is gone or full.
    fn placed_in_teams(
        &self,
        lent: &Lent,
        teams: &InvitedTeams,
        user: UserId,
        joined_at: Timestamp,
    ) -> Result<(Arc<Organization>, Vec<Team>), MemberError> {
        let mut next = Organization::clone(&lent.org);
        let mut added = Vec::new();
        for id in teams.iter() {
            let standing = self.team_members(&next, id).ok_or(MemberError::TeamNotFound)?;
            let team = next.teams.iter_mut().find(|t| t.id == id).ok_or(MemberError::TeamNotFound)?;
            // Already in it by the membership they have now (invited although a member): nothing to add.
            let membership = self.indexes.members.get(next.id, user);
            if team.members.iter().any(|m| m.user == user && m.stands(membership.as_deref())) {
                continue;
            }
            if lent.team_limit.is_some_and(|l| standing >= l) {
                return Err(MemberError::TeamFull);
            }
            team.members.retain(|m| m.user != user);
            team.members.push(TeamMember { user, created_at: joined_at });
            added.push(team.clone());
        }
        Ok((Arc::new(next), added))
    }

    /// The pending invitations naming any of `teams` (each with its organization), without them: the ops that
    /// write them (the invitations are staged to publish with the batch). remove-team's part in the plugin's
    /// `invitation.teamId` (an invitation left naming no team is into none: `teamId: null`).
    fn strip_teams(&self, state: &mut State, teams: &[(OrgId, TeamId)]) -> Vec<StoreOp> {
        let mut stripped: Vec<Invitation> = Vec::new();
        for &(org, team) in teams {
            for invitation in self.indexes.members.invitations_of(org) {
                if invitation.status != InvitationStatus::Pending {
                    continue;
                }
                // Two teams of one invitation removed in one batch: the second strips the first's result.
                let at = stripped.iter().position(|i| i.id == invitation.id);
                let current = at.map_or(&*invitation, |at| &stripped[at]);
                if !current.teams.contains(team) {
                    continue;
                }
                let next = Invitation { teams: current.teams.without(team), ..current.clone() };
                match at {
                    Some(at) => stripped[at] = next,
                    None => stripped.push(next),
                }
            }
        }
        stripped
            .into_iter()
            .map(|i| {
                let i = Arc::new(i);
                state.invitations.push((i.id, Some(Arc::clone(&i))));
                StoreOp::PutInvitation(convert::invitation_record(&i))
            })
            .collect()
    }

    /// `reject-invitation`.
    fn reject(
        &self,
        state: &mut State,
        caller: Caller,
        id: InvitationId,
        email: Email,
        ip: &str,
    ) -> Changed<Arc<Invitation>> {
        let invitation = self
            .indexes
            .members
            .invitation(id)
            .filter(|i| i.status == InvitationStatus::Pending)
            .ok_or(MemberError::InvitationNotFound)?;
        if invitation.email != email {
            return Err(MemberError::NotRecipient);
        }
        self.close_invitation(state, &caller, &invitation, InvitationStatus::Rejected, ip)
    }

    /// `cancel-invitation`.
    fn cancel(&self, state: &mut State, caller: Caller, id: InvitationId, ip: &str) -> Changed<Arc<Invitation>> {
        let invitation = self.indexes.members.invitation(id).ok_or(MemberError::InvitationNotFound)?;
        let acting = self.acting_roles(&caller, invitation.org).ok_or(MemberError::MemberNotFound)?;
        if !self.allows(&acting, invitation.org, "invitation", "cancel") {
            return Err(MemberError::NotAllowedToCancel);
        }
        if self.indexes.orgs.get(invitation.org).is_none() {
            return Err(MemberError::OrganizationNotFound);
        }
        self.close_invitation(state, &caller, &invitation, InvitationStatus::Canceled, ip)
    }

    fn close_invitation(
        &self,
        state: &mut State,
        caller: &Caller,
        invitation: &Invitation,
        status: InvitationStatus,
        ip: &str,
    ) -> Changed<Arc<Invitation>> {
        let closed = Arc::new(Invitation { status, ..invitation.clone() });
        let what = match status {
            InvitationStatus::Rejected => action::INVITATION_REJECTED,
            _ => action::INVITATION_CANCELED,
        };
        let ops = vec![
            StoreOp::PutInvitation(convert::invitation_record(&closed)),
            audit::entry(what, Some(caller.actor), Some(invitation.org.into()), ip, invitation.email.to_string()),
        ];
        state.invitations.push((closed.id, Some(Arc::clone(&closed))));
        Ok((ops, closed))
    }

    /// The ops that end `member`'s membership: the record, the guard that an owner is left (several nodes), the
    /// account's primary organization when it was this one, and the audit entry.
    fn end_membership(
        &self,
        state: &mut State,
        caller: &Caller,
        member: &Membership,
        ip: &str,
        what: &'static str,
        now: Timestamp,
    ) -> Vec<StoreOp> {
        let mut ops = Vec::new();
        if let Some(user) = self.get(state, member.user).filter(|u| u.organization_id == Some(member.org)) {
            let detached = User::from(UserFields { organization_id: None, updated_at: now, ..user.fields() });
            let detached = self.stage(state, detached, false);
            ops.push(StoreOp::PutUser(convert::user_record(&detached)));
        }
        ops.push(StoreOp::DeleteMember(member.org.to_bytes(), member.user.to_bytes()));
        if member.roles.is_owner() {
            ops.push(StoreOp::ExpectOwner(member.org.to_bytes()));
        }
        let detail = format!("{} ({})", member.org, member.roles);
        ops.push(audit::entry(what, Some(caller.actor), Some(member.user.into()), ip, detail));
        state.members.push((member.org, member.user, None));
        ops
    }

    /// The membership ops of an administrator's change of `before`'s primary organization to `after`'s: the old
    /// membership ends, the new one begins as `member` (or is kept as it is). `Err` when `before` is the last owner
    /// of the organization it leaves.
    pub(super) fn primary_moved(
        &self,
        state: &mut State,
        before: &User,
        after: &User,
    ) -> Result<Vec<StoreOp>, UpdateUserError> {
        let mut ops = Vec::new();
        if before.organization_id == after.organization_id {
            return Ok(ops);
        }
        if let Some(old) = before.organization_id
            && let Some(member) = self.indexes.members.get(old, before.id)
        {
            if member.roles.is_owner() && self.indexes.members.owners(old) <= 1 {
                return Err(UpdateUserError::LastOwner);
            }
            ops.push(StoreOp::DeleteMember(old.to_bytes(), before.id.to_bytes()));
            if member.roles.is_owner() {
                ops.push(StoreOp::ExpectOwner(old.to_bytes()));
            }
            state.members.push((old, before.id, None));
        }
        if let Some(new) = after.organization_id
            && self.indexes.members.get(new, after.id).is_none()
        {
            let member = Arc::new(Membership::new(new, after.id, MemberRoles::one(OrgRole::Member), after.updated_at));
            ops.push(StoreOp::PutMember(convert::membership_record(&member)));
            state.members.push((new, after.id, Some(member)));
        }
        state.flush_now = true;
        Ok(ops)
    }

    /// The ops that end every membership of `user` (the account is being removed), before its own record goes.
    pub(super) fn memberships_end_with(&self, state: &mut State, user: UserId) -> Vec<StoreOp> {
        let members = self.indexes.members.of_user(user);
        if !members.is_empty() {
            state.flush_now = true;
        }
        members
            .iter()
            .map(|m| {
                state.members.push((m.org, user, None));
                StoreOp::DeleteMember(m.org.to_bytes(), user.to_bytes())
            })
            .collect()
    }

    /// The ops that end every membership and invitation of `org` (it is being deleted), before its own record.
    pub(super) fn org_members_end(&self, state: &mut State, org: OrgId) -> Vec<StoreOp> {
        state.flush_now = true;
        let mut ops = Vec::new();
        for m in self.indexes.members.members_of(org) {
            state.members.push((org, m.user, None));
            ops.push(StoreOp::DeleteMember(org.to_bytes(), m.user.to_bytes()));
        }
        for i in self.indexes.members.invitations_of(org) {
            state.invitations.push((i.id, None));
            ops.push(StoreOp::DeleteInvitation(i.id.to_bytes()));
        }
        ops
    }
}

/// Which of another node's conflicts is this change's own: the last owner, or an organization gone meanwhile.
fn conflict_of(last_owner: MemberError) -> impl FnOnce(&Conflict) -> Option<MemberError> + Send + 'static {
    move |c: &Conflict| match c {
        Conflict::LastOwner { .. } => Some(last_owner),
        Conflict::OrganizationGone { .. } => Some(MemberError::OrganizationNotFound),
        _ => None,
    }
}

/// Answers a checked change: refused at once, or committed (flushed after this message: the next one reads the
/// index) and answered once durable, with another node's conflict as this change's own refusal.
fn commit<T: Send + 'static>(
    state: &mut State,
    done: Changed<T>,
    reply: RpcReplyPort<Result<T, MemberError>>,
    last_owner: MemberError,
) {
    match done {
        Ok((ops, value)) => {
            state.flush_now = true;
            state.overlay.add_guarded(ops, reply, Ok(value), conflict_of(last_owner));
        }
        Err(e) => drop(reply.send(Err(e))),
    }
}

/// The caller's session's active organization after joining `org`, committed with the joining (a failure between
/// the two would leave a member who joined but whose session works elsewhere). `None`: unchanged. Joining exactly
/// one team (`team`) makes it the session's active team too, as the plugin does; several leave it alone.
fn joined(caller: &Caller, org: OrgId, team: Option<TeamId>) -> Option<Activate> {
    let session = caller.session?;
    match team {
        Some(team) => Some(Activate::Session { hash: session.token, org: Some(org), team: Some(team) }),
        None => (session.active != Some(org)).then_some(Activate::org(session.token, Some(org))),
    }
}

/// What the audit detail of an invitation adds for its teams: `; teams <id>, <id>` (nothing for none).
fn teams_named(invitation: &Invitation) -> String {
    invitation.teams.joined().map(|ids| format!("; teams {}", ids.replace(',', ", "))).unwrap_or_default()
}

/// The caller's session's active organization after `ended` ended: cleared when it was the caller's own
/// membership of the organization the session works in (else the session would still name it). `None`: unchanged.
/// Whoever's membership it was, no session of theirs works in a team of that organization any more.
fn left(caller: &Caller, ended: &Membership) -> impl Iterator<Item = Activate> {
    let teams = Activate::LeftTeam { user: ended.user, org: ended.org, team: None };
    let own = caller
        .session
        .filter(|session| ended.user == caller.user && session.active == Some(ended.org))
        .map(|session| Activate::org(session.token, None));
    own.into_iter().chain([teams])
}
