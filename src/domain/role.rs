use std::fmt;
use std::sync::{OnceLock, RwLock};

/// A role from the configured set. Built only by [`RoleSet::parse`] (or from the store), so a `Role` is always
/// one the configuration allows.
///
/// Four bytes: the role's number in the process's table of role names. Every account holds one and there are only
/// a handful of roles, so the names are kept once each (a shared `Arc<str>` was 16 bytes an account). Two roles
/// are equal exactly when their names are.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Role(u32);

/// The names of the roles other than `admin` (whose number is 0), numbered from 1. They come from the
/// configuration and from the store (a role no longer configured that an account still has), and are kept for
/// the life of the process like the configuration: a few names, never one a request chooses ([`RoleSet::parse`]
/// gives only the configured ones).
static NAMES: RwLock<Vec<&'static str>> = RwLock::new(Vec::new());

/// The first names of [`NAMES`] again, each set once: read without a lock, since every authenticated call may
/// read its caller's role ([`Role::as_str`]), from every thread at once.
static FIRST_NAMES: [OnceLock<&'static str>; 64] = [const { OnceLock::new() }; 64];

impl Role {
    pub const ADMIN: &'static str = "admin";

    /// The administrator role, which every configured set contains.
    pub fn admin() -> Self {
        Self(0)
    }

    pub fn is_admin(&self) -> bool {
        self.0 == 0
    }

    pub fn as_str(&self) -> &'static str {
        match self.0 {
            0 => Self::ADMIN,
            n => {
                let i = usize::try_from(n - 1).unwrap_or(usize::MAX);
                if let Some(name) = FIRST_NAMES.get(i).and_then(OnceLock::get) {
                    return name;
                }
                let names = NAMES.read().unwrap_or_else(std::sync::PoisonError::into_inner);
                names.get(i).copied().unwrap_or_default()
            }
        }
    }

    /// The role named `name`, numbered the first time it is seen.
    fn named(name: &str) -> Self {
        if name == Self::ADMIN {
            return Self::admin();
        }
        let number = |names: &[&str]| names.iter().position(|n| *n == name).map(|i| Self(i as u32 + 1));
        if let Some(role) = number(&NAMES.read().unwrap_or_else(std::sync::PoisonError::into_inner)) {
            return role;
        }
        let mut names = NAMES.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(role) = number(&names) {
            return role;
        }
        let name: &'static str = Box::leak(name.into());
        if let Some(slot) = FIRST_NAMES.get(names.len()) {
            let _ = slot.set(name);
        }
        names.push(name);
        Self(u32::try_from(names.len()).unwrap_or(u32::MAX))
    }
}

impl fmt::Debug for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Role({:?})", self.as_str())
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The roles an administrator may assign, and the one a new account gets.
#[derive(Debug, Clone)]
pub struct RoleSet {
    /// Each with its name, so that parsing one (every account read at start-up) reads no shared table.
    allowed: Vec<(&'static str, Role)>,
    default: Role,
}

impl RoleSet {
    /// `allowed` must contain `admin` and `default` (the configuration is validated before this is built).
    pub fn new(allowed: &[String], default: &str) -> Self {
        let allowed: Vec<(&'static str, Role)> = allowed
            .iter()
            .map(|r| {
                let role = Role::named(r);
                (role.as_str(), role)
            })
            .collect();
        Self { allowed, default: Role::named(default) }
    }

    pub fn parse(&self, s: &str) -> Option<Role> {
        self.allowed.iter().find(|(name, _)| *name == s).map(|(_, role)| role.clone())
    }

    pub fn default_role(&self) -> Role {
        self.default.clone()
    }

    /// A role read from the store. It may have left the configured set since it was assigned; the account
    /// keeps it (and can be moved to an allowed role by an admin) rather than failing start-up.
    pub fn from_store(&self, s: &str) -> Role {
        self.parse(s).unwrap_or_else(|| Role::named(s))
    }

    pub fn allowed(&self) -> impl Iterator<Item = &str> {
        self.allowed.iter().map(|(name, _)| *name)
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

    /// A role is a number: equal roles have equal numbers and names, a role read from the store that is no longer
    /// configured keeps its name, and `admin` is always the same one.
    #[test]
    fn a_role_is_its_number_and_keeps_its_name() {
        assert_eq!(size_of::<Role>(), 4);
        let set = RoleSet::new(&["admin".into(), "role_test_editor".into(), "user".into()], "user");
        let editor = set.parse("role_test_editor").unwrap();
        assert_eq!(editor, set.from_store("role_test_editor"));
        assert_eq!(editor.as_str(), "role_test_editor");
        assert_ne!(editor, set.default_role());
        let gone = set.from_store("role_test_retired");
        assert_eq!(gone.as_str(), "role_test_retired");
        assert!(set.parse("role_test_retired").is_none(), "kept, not made assignable");
        assert_eq!(gone, RoleSet::new(&["admin".into()], "admin").from_store("role_test_retired"));
        assert_eq!(set.parse("admin"), Some(Role::admin()));
        assert!(!editor.is_admin() && Role::admin().is_admin());
        assert_eq!(format!("{editor:?} {editor}"), "Role(\"role_test_editor\") role_test_editor");
    }
}
