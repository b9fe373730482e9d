//! What a role may do, as data: better-auth's access-control statements, a list of actions per resource. The admin
//! plugin's `has-permission` answers from here; an organization's roles (owner, admin, member) will be more tables
//! of the same shape.

/// Actions per resource that a role is granted.
#[derive(Debug, Clone, Copy)]
pub struct Permissions(&'static [(&'static str, &'static [&'static str])]);

impl Permissions {
    /// The `admin` role of the admin plugin: everything on users and sessions, except impersonating administrators
    /// (`impersonate-admins`), which no role here is granted.
    pub const ADMIN: Self = Self(&[
        ("user", &["create", "list", "set-role", "ban", "impersonate", "delete", "set-password", "get", "update"]),
        ("session", &["list", "revoke", "delete"]),
    ]);

    /// An organization's `owner` (better-auth's organization plugin, `ownerAc`).
    pub const ORG_OWNER: Self = Self(&[
        ("organization", &["update", "delete"]),
        ("member", &["create", "update", "delete"]),
        ("invitation", &["create", "cancel"]),
        ("team", &["create", "update", "delete"]),
        ("ac", &["create", "read", "update", "delete"]),
    ]);

    /// An organization's `admin` (`adminAc`): the owner's, except deleting the organization.
    pub const ORG_ADMIN: Self = Self(&[
        ("organization", &["update"]),
        ("member", &["create", "update", "delete"]),
        ("invitation", &["create", "cancel"]),
        ("team", &["create", "update", "delete"]),
        ("ac", &["create", "read", "update", "delete"]),
    ]);

    /// An organization's `member` (`memberAc`): reading the access control, nothing else.
    pub const ORG_MEMBER: Self =
        Self(&[("organization", &[]), ("member", &[]), ("invitation", &[]), ("team", &[]), ("ac", &["read"])]);

    /// Whether `action` on `resource` is granted.
    pub fn allows(&self, resource: &str, action: &str) -> bool {
        self.0.iter().any(|(r, actions)| *r == resource && actions.contains(&action))
    }

    /// Whether the role has a statement about `resource` (even one granting nothing).
    pub fn knows(&self, resource: &str) -> bool {
        self.0.iter().any(|(r, _)| *r == resource)
    }

    /// Whether every action asked for is granted.
    pub fn allows_all<'a>(&self, wanted: impl IntoIterator<Item = (&'a str, &'a str)>) -> bool {
        wanted.into_iter().all(|(resource, action)| self.allows(resource, action))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_admin_role_is_granted_users_and_sessions_but_never_impersonating_administrators() {
        let admin = Permissions::ADMIN;
        assert!(admin.allows_all([("user", "list"), ("user", "ban"), ("session", "revoke")]));
        assert!(!admin.allows("user", "impersonate-admins"));
        assert!(!admin.allows("organization", "list"), "an unknown resource is not granted");
        assert!(!admin.allows_all([("user", "list"), ("session", "update")]), "one refusal refuses all");
    }
}
