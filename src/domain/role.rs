use std::fmt;
use std::sync::Arc;

/// A role from the configured set. Built only by [`RoleSet::parse`] (or from the store), so a `Role` is always
/// one the configuration allows. Backed by a shared `Arc<str>`: a hundred thousand users share a handful of
/// role strings.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Role(Arc<str>);

impl Role {
    pub const ADMIN: &'static str = "admin";

    /// The administrator role, which every configured set contains.
    pub fn admin() -> Self {
        Self(Arc::from(Self::ADMIN))
    }

    pub fn is_admin(&self) -> bool {
        &*self.0 == Self::ADMIN
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The roles an administrator may assign, and the one a new account gets.
#[derive(Debug, Clone)]
pub struct RoleSet {
    allowed: Vec<Role>,
    default: Role,
}

impl RoleSet {
    /// `allowed` must contain `admin` and `default` (the configuration is validated before this is built).
    pub fn new(allowed: &[String], default: &str) -> Self {
        let allowed: Vec<Role> = allowed.iter().map(|r| Role(Arc::from(r.as_str()))).collect();
        let default = allowed.iter().find(|r| r.as_str() == default).cloned().unwrap_or_else(|| Role(default.into()));
        Self { allowed, default }
    }

    pub fn parse(&self, s: &str) -> Option<Role> {
        self.allowed.iter().find(|r| r.as_str() == s).cloned()
    }

    pub fn default_role(&self) -> Role {
        self.default.clone()
    }

    /// A role read from the store. It may have left the configured set since it was assigned; the account
    /// keeps it (and can be moved to an allowed role by an admin) rather than failing start-up.
    pub fn from_store(&self, s: &str) -> Role {
        self.parse(s).unwrap_or_else(|| Role(s.into()))
    }

    pub fn allowed(&self) -> impl Iterator<Item = &str> {
        self.allowed.iter().map(Role::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_configured_roles_parse() {
        let set = RoleSet::new(&["admin".into(), "qa_manager".into(), "user".into()], "user");
        assert!(set.parse("qa_manager").is_some());
        assert!(set.parse("superuser").is_none());
        assert!(set.parse("Admin").is_none());
        assert!(set.parse("admin").unwrap().is_admin());
        assert_eq!(set.default_role().as_str(), "user");
    }
}
