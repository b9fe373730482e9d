//! Roles an organization defines at runtime (the organization plugin's `dynamicAccessControl` with its default
//! statements as `ac`): reads from the organizations' index, changes through the organizations actor, which owns
//! the roles with the organization they belong to.
//!
//! Who may do what is the plugin's: `ac:create|read|update|delete` on the caller's roles as they are now, and
//! nobody grants a role a permission their own roles do not hold (`missingPermissions`). The actor then checks, in
//! its message order, the name, the limit, and that no member holds a role deleted.

use super::{Accounts, Current, Unavailable};
use crate::actors::orgs::roles::{RoleError, RoleRef};
use crate::actors::orgs::teams::TeamCaller;
use crate::domain::{CustomRole, Grants, MemberRoles, Membership, OrgId, Organization, RoleName};

/// Why a role call was refused: the plugin's codes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RolesError {
    /// `dynamic_roles` off: the routes do not exist, as without the plugin's option.
    #[error("Not found")]
    NotEnabled,
    #[error("You must be in an organization to create a role")]
    NoOrganizationToCreate,
    #[error("No active organization")]
    NoActiveOrganization,
    #[error("Organization not found")]
    OrgNotFound,
    #[error("You are not a member of this organization")]
    NotAMember,
    #[error("You are not allowed to create a role")]
    NotAllowedToCreate { missing: Vec<String> },
    #[error("You are not allowed to list a role")]
    NotAllowedToList,
    #[error("You are not allowed to read a role")]
    NotAllowedToRead,
    #[error("You are not allowed to update a role")]
    NotAllowedToUpdate { missing: Vec<String> },
    #[error("You are not allowed to delete a role")]
    NotAllowedToDelete,
    #[error("That role name is already taken")]
    NameTaken,
    #[error("Cannot delete a pre-defined role")]
    PreDefined,
    #[error("Role not found")]
    RoleNotFound,
    #[error("This organization has too many roles")]
    TooManyRoles,
    #[error("Cannot delete a role that is assigned to members. Please reassign the members to a different role first")]
    InUse,
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
}

impl From<RoleError> for RolesError {
    fn from(e: RoleError) -> Self {
        match e {
            RoleError::OrgNotFound => Self::OrgNotFound,
            RoleError::RoleNotFound => Self::RoleNotFound,
            RoleError::NameTaken => Self::NameTaken,
            RoleError::TooManyRoles => Self::TooManyRoles,
            RoleError::InUse => Self::InUse,
            RoleError::Unavailable(u) => Self::Unavailable(u),
        }
    }
}

/// A role with the organization it belongs to.
pub type RoleOf = (OrgId, CustomRole);

impl Accounts {
    fn roles_on(&self) -> Result<(), RolesError> {
        if self.organizations.dynamic_roles { Ok(()) } else { Err(RolesError::NotEnabled) }
    }

    /// The roles `org` defined, as permission checks judge them: none while `dynamic_roles` is off (a role left
    /// over from when it was on grants nothing then).
    pub fn defined_roles<'a>(&self, org: &'a Organization) -> &'a [CustomRole] {
        if self.organizations.dynamic_roles { &org.roles } else { &[] }
    }

    /// Whether `member`'s roles allow every `(resource, action)` in `wanted`, the organization's own roles included
    /// (better-auth's `hasPermission` with `dynamicAccessControl`).
    pub fn member_allows(&self, member: &Membership, wanted: &[(&str, &str)]) -> bool {
        let org = self.indexes.orgs.get(member.org);
        let defined = org.as_deref().map_or(&[][..], |o| self.defined_roles(o));
        member.roles.allows_all_in(defined, wanted)
    }

    /// The permission sets of `member`'s custom roles that the organization defines (has-permission judges each
    /// as a role of its own).
    pub fn custom_grants(&self, member: &Membership) -> Vec<Grants> {
        let org = self.indexes.orgs.get(member.org);
        let defined = org.as_deref().map_or(&[][..], |o| self.defined_roles(o));
        member.roles.granted(defined).cloned().collect()
    }

    /// Role names as update-member-role and has-permission take them: the built-in ones, and (with `dynamic_roles`)
    /// the ones `org` defines, matched exactly.
    pub fn parse_member_roles<'a>(
        &self,
        org: OrgId,
        names: impl IntoIterator<Item = &'a str>,
    ) -> Result<MemberRoles, crate::domain::RolesError> {
        let found = self.indexes.orgs.get(org);
        let defined = found.as_deref().map_or(&[][..], |o| self.defined_roles(o));
        MemberRoles::parse_in(names, |name| defined.iter().any(|r| r.name.as_str() == name))
    }

    /// The organization named (or the active one) and the caller's membership there, once it allows `ac:action`.
    fn role_org(
        &self,
        current: &Current,
        org: Option<OrgId>,
        action: &str,
        none: RolesError,
        denied: RolesError,
    ) -> Result<(std::sync::Arc<Organization>, std::sync::Arc<Membership>), RolesError> {
        let org = org.or_else(|| current.session.active_organization()).ok_or(none)?;
        let me = self.acting_membership(current, org).ok_or(RolesError::NotAMember)?;
        let found = self.indexes.orgs.get(org).ok_or(RolesError::OrgNotFound)?;
        if !me.roles.allows_in(self.defined_roles(&found), "ac", action) {
            return Err(denied);
        }
        Ok((found, me))
    }

    /// What `grants` grants that the caller's own roles do not (none for a global administrator, who acts as an
    /// owner, nor for an owner: the plugin's creator holds every statement).
    fn missing(&self, org: &Organization, me: &Membership, grants: &Grants) -> Vec<String> {
        let defined = self.defined_roles(org);
        grants.missing_from(&|r, a| me.roles.allows_in(defined, r, a))
    }

    /// `create-role`: a role of the organization named (or the active one), for a member allowed `ac:create`
    /// whose own roles hold every permission it grants.
    pub async fn create_role(
        &self,
        current: &Current,
        org: Option<OrgId>,
        name: RoleName,
        grants: Grants,
        ip: String,
    ) -> Result<RoleOf, RolesError> {
        self.roles_on()?;
        let denied = RolesError::NotAllowedToCreate { missing: Vec::new() };
        let (org, me) = self.role_org(current, org, "create", RolesError::NoOrganizationToCreate, denied)?;
        let missing = self.missing(&org, &me, &grants);
        if !missing.is_empty() {
            return Err(RolesError::NotAllowedToCreate { missing });
        }
        let limit = self.organizations.maximum_roles;
        let caller = TeamCaller { by: current.actor(), ip };
        Ok((org.id, self.actors.orgs.create_role(org.id, name, grants, limit, caller).await?))
    }

    /// `list-roles`: the roles the organization defined (not owner, admin, member), for a member allowed `ac:read`.
    pub fn list_roles(&self, current: &Current, org: Option<OrgId>) -> Result<(OrgId, Vec<CustomRole>), RolesError> {
        self.roles_on()?;
        use RolesError::{NoActiveOrganization, NotAllowedToList};
        let (org, _) = self.role_org(current, org, "read", NoActiveOrganization, NotAllowedToList)?;
        Ok((org.id, org.roles.clone()))
    }

    /// `get-role`: one role of the organization, for a member allowed `ac:read`.
    pub fn get_role(&self, current: &Current, org: Option<OrgId>, role: &RoleRef) -> Result<RoleOf, RolesError> {
        self.roles_on()?;
        use RolesError::{NoActiveOrganization, NotAllowedToRead};
        let (org, _) = self.role_org(current, org, "read", NoActiveOrganization, NotAllowedToRead)?;
        let found = org.roles.iter().find(|r| role.finds(r)).ok_or(RolesError::RoleNotFound)?;
        Ok((org.id, found.clone()))
    }

    /// `update-role`: renames it, or replaces its permissions (within the caller's own), for a member allowed
    /// `ac:update`.
    pub async fn update_role(
        &self,
        current: &Current,
        org: Option<OrgId>,
        role: RoleRef,
        name: Option<RoleName>,
        grants: Option<Grants>,
        ip: String,
    ) -> Result<RoleOf, RolesError> {
        self.roles_on()?;
        let denied = RolesError::NotAllowedToUpdate { missing: Vec::new() };
        let (org, me) = self.role_org(current, org, "update", RolesError::NoActiveOrganization, denied)?;
        if !org.roles.iter().any(|r| role.finds(r)) {
            return Err(RolesError::RoleNotFound);
        }
        if let Some(grants) = &grants {
            let missing = self.missing(&org, &me, grants);
            if !missing.is_empty() {
                return Err(RolesError::NotAllowedToUpdate { missing });
            }
        }
        let caller = TeamCaller { by: current.actor(), ip };
        Ok((org.id, self.actors.orgs.update_role(org.id, role, name, grants, caller).await?))
    }

    /// `delete-role`: for a member allowed `ac:delete`; never a built-in role, nor one a member holds.
    pub async fn delete_role(
        &self,
        current: &Current,
        org: Option<OrgId>,
        role: RoleRef,
        ip: String,
    ) -> Result<(), RolesError> {
        self.roles_on()?;
        use RolesError::{NoActiveOrganization, NotAllowedToDelete};
        let (org, _) = self.role_org(current, org, "delete", NoActiveOrganization, NotAllowedToDelete)?;
        if let RoleRef::Name(name) = &role
            && crate::domain::OrgRole::ALL.iter().any(|r| r.as_str() == name)
        {
            return Err(RolesError::PreDefined);
        }
        let caller = TeamCaller { by: current.actor(), ip };
        self.actors.orgs.delete_role(org.id, role, caller).await?;
        Ok(())
    }
}
