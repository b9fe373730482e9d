//! Organizations as teams use them: the better-auth organization plugin's calls (`/api/auth/organization/*`).
//!
//! Reads come from the indexes, checked against the caller's membership as it is now; changes go to the users
//! actor (memberships, invitations, deletion) or the organizations actor (creation, renaming), which check the
//! caller's role again in message order. A global administrator on their own session acts as an owner of every
//! organization; an organization's owner or admin never reaches another organization or any global call.

use std::sync::Arc;
use std::time::Duration;

use super::{Accounts, Current, DeleteOrgError, Unavailable, UpdateOrgError};
use crate::actors::orgs::CreateOrgError;
use crate::actors::users::members::{Caller, CallerSession, Invite, InviteMail, Lent};
pub use crate::actors::users::members::{MemberError, Target};
use crate::domain::{
    Email, Invitation, InvitationId, InvitedTeams, MemberId, MemberRoles, Membership, Name, OrgId, OrgRole,
    Organization, Session, Slug, Timestamp, TokenHash, User, UserId,
};

/// Why an organization call was refused: better-auth's codes (see [`MemberError`] for the members' own).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OrgError {
    #[error("You are not allowed to create a new organization")]
    NotAllowedToCreate,
    #[error("Organization already exists")]
    AlreadyExists,
    #[error("Organization slug already taken")]
    SlugTaken,
    #[error("Organization not found")]
    NotFound,
    #[error("User is not a member of the organization")]
    NotAMember,
    /// The same refusal in the calls that word it so (`list-members`, `get-active-member-role`).
    #[error("You are not a member of this organization")]
    YouAreNotAMember,
    #[error("You are not allowed to update this organization")]
    NotAllowedToUpdate,
    #[error("You are not allowed to delete this organization")]
    NotAllowedToDelete,
    #[error("No active organization")]
    NoActiveOrganization,
    #[error("You are not allowed to list invitations for this organization")]
    NotAllowedToListInvitations,
    #[error("Email verification required to view or list invitations for the session email")]
    EmailVerificationRequired,
    #[error("Inviter is no longer a member of the organization")]
    InviterGone,
    /// invite-member naming teams while teams are off.
    #[error("Teams are not enabled")]
    TeamsNotEnabled,
    #[error(transparent)]
    Member(#[from] MemberError),
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
}

/// An organization with its members (and their accounts) and invitations: `get-full-organization`.
pub struct FullOrganization {
    pub organization: Arc<Organization>,
    pub members: Vec<MemberAndUser>,
    pub invitations: Vec<Arc<Invitation>>,
    /// Its teams, with teams on.
    pub teams: Option<Vec<crate::domain::Team>>,
}

/// A membership with its account.
pub type MemberAndUser = (Arc<Membership>, Arc<User>);

/// An invitation with its organization and the member who sent it (`get-invitation`).
pub type InvitationShown = (Arc<Invitation>, Arc<Organization>, Arc<User>);

/// An invitation with its organization, if that still exists (`list-user-invitations`).
pub type InvitationListed = (Arc<Invitation>, Option<Arc<Organization>>);

/// An organization named by id or slug, or the session's active one.
pub enum OrgRef {
    Id(String),
    Slug(String),
    Active,
}

impl Accounts {
    fn caller(current: &Current) -> Caller {
        let global_admin = current.administrator().is_some();
        Caller { user: current.user.id, actor: current.actor(), global_admin, session: None }
    }

    /// [`Self::caller`] through the session `token`, whose active organization follows the change in its commit.
    fn caller_in(current: &Current, token: TokenHash) -> Caller {
        let session = CallerSession { token, active: current.session.active_organization() };
        Caller { session: Some(session), ..Self::caller(current) }
    }

    /// The organization `reference` names, if it exists (an id that is no UUID names none).
    pub fn find_organization(&self, session: &Session, reference: &OrgRef) -> Result<Arc<Organization>, OrgError> {
        let id = match reference {
            OrgRef::Id(id) => OrgId::parse(id),
            OrgRef::Slug(slug) => {
                return Slug::parse(slug).ok().and_then(|s| self.indexes.orgs.by_slug(&s)).ok_or(OrgError::NotFound);
            }
            OrgRef::Active => Some(session.active_organization().ok_or(OrgError::NoActiveOrganization)?),
        };
        id.and_then(|id| self.indexes.orgs.get(id)).ok_or(OrgError::NotFound)
    }

    /// `current`'s membership of `org`; a global administrator who is not a member gets an owner's.
    pub fn acting_membership(&self, current: &Current, org: OrgId) -> Option<Arc<Membership>> {
        self.indexes.members.get(org, current.user.id).or_else(|| {
            current
                .administrator()
                .map(|u| Arc::new(Membership::new(org, u.id, MemberRoles::one(OrgRole::Owner), Timestamp::now())))
        })
    }

    /// `organization/create`: the caller becomes its owner in the same commit, and the caller's session `active_in`
    /// (unless `keepCurrentActiveOrganization`) works in it from that commit on.
    #[allow(clippy::too_many_arguments)]
    pub async fn create_owned_organization(
        &self,
        current: &Current,
        active_in: Option<TokenHash>,
        name: Name,
        slug: Slug,
        logo: Option<Box<str>>,
        metadata: Option<Box<str>>,
        ip: String,
    ) -> Result<(Arc<Organization>, Arc<Membership>), OrgError> {
        if !self.organizations.members_may_create && current.administrator().is_none() {
            return Err(OrgError::NotAllowedToCreate);
        }
        let by = current.user.id;
        let default_team = self.organizations.teams && self.organizations.default_team;
        let org =
            self.actors.orgs.create_owned(name, slug, logo, metadata, by, active_in, default_team, ip).await.map_err(
                |e| match e {
                    CreateOrgError::SlugTaken => OrgError::AlreadyExists,
                    CreateOrgError::Unavailable(u) => u.into(),
                },
            )?;
        let member = self.indexes.members.get(org.id, current.user.id).unwrap_or_else(|| {
            Arc::new(Membership::new(org.id, current.user.id, MemberRoles::one(OrgRole::Owner), org.created_at))
        });
        Ok((org, member))
    }

    /// Whether `slug` is free (`organization/check-slug`).
    pub fn slug_free(&self, slug: &str) -> bool {
        Slug::parse(slug).ok().is_none_or(|s| self.indexes.orgs.by_slug(&s).is_none())
    }

    /// `organization/update`: a member allowed to (owner or admin) renames it, or changes its logo or metadata.
    #[allow(clippy::too_many_arguments)]
    pub async fn update_owned_organization(
        &self,
        current: &Current,
        org: OrgId,
        name: Option<Name>,
        slug: Option<Slug>,
        logo: Option<Option<Box<str>>>,
        metadata: Option<Box<str>>,
        ip: String,
    ) -> Result<Arc<Organization>, OrgError> {
        let member = self.acting_membership(current, org).ok_or(OrgError::NotAMember)?;
        if !self.member_allows(&member, &[("organization", "update")]) {
            return Err(OrgError::NotAllowedToUpdate);
        }
        self.actors.orgs.update_details(org, name, slug, logo, metadata, current.actor(), ip).await.map_err(|e| match e
        {
            UpdateOrgError::NotFound => OrgError::NotFound,
            UpdateOrgError::SlugTaken => OrgError::SlugTaken,
            UpdateOrgError::Unavailable(u) => u.into(),
        })
    }

    /// `organization/delete`: an owner deletes it with its memberships and invitations (checked again in the
    /// users actor's message order). The caller's session `token`, if it works in it, works in none from the same
    /// commit on (as better-auth clears it); other sessions working in it lose it lazily: every call checks the
    /// membership anyway.
    pub async fn delete_owned_organization(
        &self,
        current: &Current,
        token: TokenHash,
        org: OrgId,
        ip: String,
    ) -> Result<Arc<Organization>, OrgError> {
        let member = self.acting_membership(current, org).ok_or(OrgError::NotAMember)?;
        if !self.member_allows(&member, &[("organization", "delete")]) {
            return Err(OrgError::NotAllowedToDelete);
        }
        let organization = self.indexes.orgs.get(org).ok_or(OrgError::NotFound)?;
        let (actors, by) = (self.actors.clone(), current.user.id);
        let active_in = (current.session.active_organization() == Some(org)).then_some(token);
        let task = self.tasks.spawn(async move {
            let started = actors.orgs.begin_delete(org).await;
            let result = match started {
                Ok(true) => actors.users.delete_organization_as_member(by, org, active_in, ip).await,
                Ok(false) => Err(DeleteOrgError::NotFound),
                Err(u) => Err(u.into()),
            };
            actors.orgs.end_delete(org);
            result
        });
        match task.await.unwrap_or(Err(DeleteOrgError::Unavailable(Unavailable))) {
            Ok(_) => Ok(organization),
            Err(DeleteOrgError::NotFound) => Err(OrgError::NotFound),
            Err(DeleteOrgError::NotAdmin) => Err(OrgError::NotAllowedToDelete),
            Err(DeleteOrgError::NotEmpty(_)) | Err(DeleteOrgError::Unavailable(_)) => Err(Unavailable.into()),
        }
    }

    /// The organizations `user` is a member of, oldest membership first (`organization/list`).
    pub fn organizations_of(&self, user: UserId) -> Vec<Arc<Organization>> {
        self.indexes.members.of_user(user).iter().filter_map(|m| self.indexes.orgs.get(m.org)).collect()
    }

    /// `user`'s memberships with their organizations, oldest membership first (an administrator's view of one
    /// account).
    pub fn memberships_of(&self, user: UserId) -> Vec<(Arc<Membership>, Arc<Organization>)> {
        let memberships = self.indexes.members.of_user(user);
        memberships.into_iter().filter_map(|m| self.indexes.orgs.get(m.org).map(|o| (m, o))).collect()
    }

    /// `get-full-organization`: the organization, at most `members_limit` members with their accounts, and the
    /// invitations the caller may see (those of an inviting role; `owner` invitations only to owners).
    pub fn full_organization(
        &self,
        current: &Current,
        org: &Arc<Organization>,
        members_limit: Option<usize>,
    ) -> Result<FullOrganization, OrgError> {
        let me = self.acting_membership(current, org.id).ok_or(OrgError::NotAMember)?;
        let limit = members_limit.unwrap_or(self.organizations.membership_limit);
        let (page, _) = self.indexes.members.page(org.id, 0, limit);
        let members = self.with_accounts(page);
        let invitations = self.visible_invitations(&me, org.id);
        let teams = self.organizations.teams.then(|| self.teams_of(org));
        Ok(FullOrganization { organization: Arc::clone(org), members, invitations, teams })
    }

    fn visible_invitations(&self, me: &Membership, org: OrgId) -> Vec<Arc<Invitation>> {
        let roles = &me.roles;
        if !self.member_allows(me, &[("invitation", "create")]) {
            return Vec::new();
        }
        let all = self.indexes.members.invitations_of(org);
        all.into_iter().filter(|i| roles.is_owner() || !i.roles.is_owner()).collect()
    }

    fn with_accounts(&self, members: Vec<Arc<Membership>>) -> Vec<MemberAndUser> {
        members.into_iter().filter_map(|m| self.indexes.users.get(m.user).map(|u| (m, u))).collect()
    }

    /// `list-members`: one page and the total, for a member of the organization.
    pub fn member_page(
        &self,
        current: &Current,
        org: OrgId,
        offset: usize,
        limit: Option<usize>,
    ) -> Result<(Vec<MemberAndUser>, usize), OrgError> {
        self.acting_membership(current, org).ok_or(OrgError::YouAreNotAMember)?;
        let limit = limit.filter(|l| *l > 0).unwrap_or(self.organizations.membership_limit);
        let (page, total) = self.indexes.members.page(org, offset, limit);
        Ok((self.with_accounts(page), total))
    }

    /// A membership with its account.
    pub fn member_with_account(&self, member: Arc<Membership>) -> Option<MemberAndUser> {
        self.indexes.users.get(member.user).map(|u| (member, u))
    }

    /// `user`'s membership of `org`.
    pub fn membership(&self, org: OrgId, user: UserId) -> Option<Arc<Membership>> {
        self.indexes.members.get(org, user)
    }

    /// The membership `id` names.
    pub fn membership_by_id(&self, id: MemberId) -> Option<Arc<Membership>> {
        self.indexes.members.by_id(id)
    }

    /// `organization/set-active` (and after create, accept, leave, delete): the session's active organization.
    pub async fn set_active_organization(
        &self,
        session: &Session,
        token_hash: crate::domain::TokenHash,
        org: Option<OrgId>,
    ) -> Result<(), Unavailable> {
        if session.active_organization() == org {
            return Ok(());
        }
        self.actors.sessions.set_active(token_hash, org).await.map(drop)
    }

    /// `update-member-role`: `member` of `org` gets `roles`; the membership as written.
    pub async fn set_member_roles(
        &self,
        current: &Current,
        org: OrgId,
        member: MemberId,
        roles: MemberRoles,
        ip: String,
    ) -> Result<Arc<Membership>, OrgError> {
        Ok(self.actors.users.set_member_roles(Self::caller(current), org, member, roles, ip).await?)
    }

    /// `invite-member`: the invitation (new, or resent with a new expiry) and its mail, in one commit. Without a
    /// mail transport the invitation is made all the same and not mailed, as better-auth does without
    /// `sendInvitationEmail`: the invitee finds it in `list-user-invitations`, and the application hears of it
    /// through the `organization.invitation_created` webhook to deliver it itself.
    ///
    /// `teams` (the plugin's `teamId`, `None` when not given) are checked in the users actor's order: each a team of
    /// `org`, not full.
    #[allow(clippy::too_many_arguments)]
    pub async fn invite(
        &self,
        current: &Current,
        org: OrgId,
        email: Email,
        roles: MemberRoles,
        resend: bool,
        teams: Option<InvitedTeams>,
        ip: String,
    ) -> Result<Arc<Invitation>, OrgError> {
        if teams.is_some() && !self.organizations.teams {
            return Err(OrgError::TeamsNotEnabled);
        }
        let (teams, team_limit) = (teams.unwrap_or_default(), self.organizations.maximum_members_per_team);
        let link = self.organizations.invitation_url.clone();
        let mail = self.templates.clone().map(|templates| {
            Box::new(move |i: &Invitation, org_name: &str, inviter: &str| {
                templates.render_invitation(i, org_name, inviter, link.as_deref())
            }) as InviteMail
        });
        let ttl = Duration::from_secs(self.organizations.invitation_ttl_hours.saturating_mul(3600));
        let limit = self.organizations.invitation_limit;
        let invite = Invite { org, email, roles, resend, ttl, limit, mail, teams, team_limit };
        Ok(self.actors.users.invite(Self::caller(current), invite, ip).await?)
    }

    /// `accept-invitation`: the invitation is used up, the caller joins and the organization becomes the active
    /// one of the session `token`, in one commit. Accepting never verifies the caller's address: only the mailed
    /// verification link does.
    ///
    /// An invitation into teams (teams on) puts the caller in each in that same commit, and with exactly one
    /// makes it the session's active team. The teams live in the organization's record, which the organizations
    /// actor writes: it lends the organization to the users actor for this one commit (as it holds an
    /// organization back while the users actor deletes it), so the membership, the places in the teams and the
    /// invitation's acceptance are durable together or not at all.
    pub async fn accept_invitation(
        &self,
        current: &Current,
        token: TokenHash,
        id: InvitationId,
        ip: String,
    ) -> Result<(Arc<Invitation>, Arc<Membership>), OrgError> {
        let (caller, email) = (Self::caller_in(current, token), current.user.email_address());
        let limit = self.organizations.membership_limit;
        let into_teams =
            self.indexes.members.invitation(id).filter(|i| self.organizations.teams && !i.teams.is_empty());
        let Some(org) = into_teams.map(|i| i.org) else {
            return Ok(self.actors.users.accept_invitation(caller, id, email, limit, None, ip).await?);
        };
        let (actors, team_limit) = (self.actors.clone(), self.organizations.maximum_members_per_team);
        // A task of its own: a caller that goes away mid-way must not end the loan before the users actor has
        // published what it wrote.
        let task = self.tasks.spawn(async move {
            let Some((org, loan)) = actors.orgs.lend(org).await? else {
                return Err(MemberError::OrganizationNotFound);
            };
            let lent = Some(Lent { org, team_limit });
            let accepted = actors.users.accept_invitation(caller, id, email, limit, lent, ip).await;
            drop(loan);
            accepted
        });
        Ok(task.await.unwrap_or(Err(MemberError::Unavailable(Unavailable)))?)
    }

    /// `reject-invitation`: the invitation to the caller's address, rejected.
    pub async fn reject_invitation(
        &self,
        current: &Current,
        id: InvitationId,
        ip: String,
    ) -> Result<Arc<Invitation>, OrgError> {
        let email = current.user.email_address();
        Ok(self.actors.users.reject_invitation(Self::caller(current), id, email, ip).await?)
    }

    /// `cancel-invitation`: the invitation, canceled (owners and admins).
    pub async fn cancel_invitation(
        &self,
        current: &Current,
        id: InvitationId,
        ip: String,
    ) -> Result<Arc<Invitation>, OrgError> {
        Ok(self.actors.users.cancel_invitation(Self::caller(current), id, ip).await?)
    }

    /// `remove-member`: the membership that ended. One's own, through the session `token` that works in the
    /// organization, ends that too, in the same commit.
    pub async fn remove_member(
        &self,
        current: &Current,
        token: TokenHash,
        org: OrgId,
        target: Target,
        ip: String,
    ) -> Result<Arc<Membership>, OrgError> {
        Ok(self.actors.users.remove_member(Self::caller_in(current, token), org, target, ip).await?)
    }

    /// `leave`: the caller's membership that ended; the session `token`, if it works in the organization, ends
    /// that too, in the same commit.
    pub async fn leave(
        &self,
        current: &Current,
        token: TokenHash,
        org: OrgId,
        ip: String,
    ) -> Result<Arc<Membership>, OrgError> {
        Ok(self.actors.users.leave(Self::caller_in(current, token), org, ip).await?)
    }

    /// `get-invitation`: an open invitation to the caller's address, with its organization and inviter.
    pub fn invitation_for(&self, current: &Current, id: InvitationId) -> Result<InvitationShown, OrgError> {
        let invitation = self
            .indexes
            .members
            .invitation(id)
            .filter(|i| i.is_open(Timestamp::now()))
            .ok_or(MemberError::InvitationNotFound)?;
        if invitation.email.as_str() != current.user.email() {
            return Err(MemberError::NotRecipient.into());
        }
        let org = self.indexes.orgs.get(invitation.org).ok_or(OrgError::NotFound)?;
        let inviter = self
            .indexes
            .members
            .get(invitation.org, invitation.inviter)
            .and_then(|m| self.indexes.users.get(m.user))
            .ok_or(OrgError::InviterGone)?;
        Ok((invitation, org, inviter))
    }

    /// `list-invitations`: an organization's invitations, for its members who may invite.
    pub fn invitations_of(&self, current: &Current, org: OrgId) -> Result<Vec<Arc<Invitation>>, OrgError> {
        let me = self.acting_membership(current, org).ok_or(OrgError::YouAreNotAMember)?;
        if !self.member_allows(&me, &[("invitation", "create")]) {
            return Err(OrgError::NotAllowedToListInvitations);
        }
        Ok(self.visible_invitations(&me, org))
    }

    /// `list-user-invitations`: the pending invitations to the caller's address, which must be verified (an
    /// unverified address may be someone else's).
    pub fn invitations_to(&self, current: &Current) -> Result<Vec<InvitationListed>, OrgError> {
        if !current.user.email_verified {
            return Err(OrgError::EmailVerificationRequired);
        }
        let now = Timestamp::now();
        let all = self.indexes.members.invitations_for(&current.user.email_address());
        Ok(all
            .into_iter()
            .filter(|i| i.is_open(now))
            .map(|i| {
                let org = self.indexes.orgs.get(i.org);
                (i, org)
            })
            .collect())
    }
}
