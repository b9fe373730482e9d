//! Roles an organization defines (`dynamicAccessControl`): what callers send the organizations actor, and what
//! they get back. The actor side is `actor/roles.rs`. Whether the caller may do it (their roles' `ac`
//! permissions, and holding every permission they grant) is the facade's check; these messages check what only
//! the actor's order can: that the organization and the role exist, the name is free, the limit, and that no
//! member holds a role deleted.

use ractor::RpcReplyPort;

use super::teams::TeamCaller;
use super::{OrgsHandle, OrgsMsg};
use crate::actors::{Unavailable, call, gone};
use crate::domain::{CustomRole, Grants, OrgId, RoleId, RoleName};

/// Why a role change was refused (the plugin's messages).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RoleError {
    #[error("Organization not found")]
    OrgNotFound,
    #[error("Role not found")]
    RoleNotFound,
    #[error("That role name is already taken")]
    NameTaken,
    #[error("This organization has too many roles")]
    TooManyRoles,
    #[error("Cannot delete a role that is assigned to members. Please reassign the members to a different role first")]
    InUse,
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
}

/// A role as a request names it: by id, or by its exact name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RoleRef {
    Id(RoleId),
    Name(String),
}

impl RoleRef {
    pub fn finds(&self, role: &CustomRole) -> bool {
        match self {
            RoleRef::Id(id) => role.id == *id,
            RoleRef::Name(name) => role.name.as_str() == name,
        }
    }
}

pub(in crate::actors) enum RoleMsg {
    Create {
        org: OrgId,
        name: RoleName,
        grants: Grants,
        limit: Option<usize>,
        caller: TeamCaller,
        reply: RpcReplyPort<Result<CustomRole, RoleError>>,
    },
    /// A new name, a new permission set (replacing the old), or both.
    Update {
        org: OrgId,
        role: RoleRef,
        name: Option<RoleName>,
        grants: Option<Grants>,
        caller: TeamCaller,
        reply: RpcReplyPort<Result<CustomRole, RoleError>>,
    },
    Delete {
        org: OrgId,
        role: RoleRef,
        caller: TeamCaller,
        reply: RpcReplyPort<Result<CustomRole, RoleError>>,
    },
}

impl RoleMsg {
    pub(super) fn caller_gone(&self) -> Option<bool> {
        match self {
            Self::Create { reply, .. } | Self::Update { reply, .. } | Self::Delete { reply, .. } => gone(reply),
        }
    }
}

impl OrgsHandle {
    /// A role `name` of `org` granting `grants` (at most `limit` roles in it).
    pub async fn create_role(
        &self,
        org: OrgId,
        name: RoleName,
        grants: Grants,
        limit: Option<usize>,
        caller: TeamCaller,
    ) -> Result<CustomRole, RoleError> {
        call(&self.0, |reply| OrgsMsg::Role(RoleMsg::Create { org, name, grants, limit, caller, reply })).await?
    }

    /// Renames `role` of `org`, or replaces its permissions, or both; the role as it now is.
    pub async fn update_role(
        &self,
        org: OrgId,
        role: RoleRef,
        name: Option<RoleName>,
        grants: Option<Grants>,
        caller: TeamCaller,
    ) -> Result<CustomRole, RoleError> {
        call(&self.0, |reply| OrgsMsg::Role(RoleMsg::Update { org, role, name, grants, caller, reply })).await?
    }

    /// Deletes `role` of `org`, unless a member holds it; the role deleted.
    pub async fn delete_role(&self, org: OrgId, role: RoleRef, caller: TeamCaller) -> Result<CustomRole, RoleError> {
        call(&self.0, |reply| OrgsMsg::Role(RoleMsg::Delete { org, role, caller, reply })).await?
    }
}
