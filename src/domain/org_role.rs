//! Roles an organization defines at runtime (better-auth's organization plugin with `dynamicAccessControl`): a
//! name and a permission set over the plugin's default access-control statements, held by members beside (or
//! instead of) the built-in owner, admin and member.

use std::collections::BTreeMap;
use std::fmt;

use super::{Permissions, RoleId, Timestamp};

/// A custom role's name: trimmed, lower-cased (the plugin lower-cases `role` on create and rename), 1 to 64
/// characters without commas (a member's roles are stored comma separated), never a built-in role's name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RoleName(Box<str>);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RoleNameError {
    /// Empty, longer than 64 characters, or with a comma or a control character.
    Invalid,
    /// `owner`, `admin` or `member`.
    BuiltIn,
}

impl RoleName {
    pub const MAX_CHARS: usize = 64;

    pub fn parse(raw: &str) -> Result<Self, RoleNameError> {
        let name = raw.trim().to_lowercase();
        if name.is_empty() || name.chars().count() > Self::MAX_CHARS || name.chars().any(|c| c == ',' || c.is_control())
        {
            return Err(RoleNameError::Invalid);
        }
        // `OrgRole`'s names, spelled here because `membership.rs` (which defines it) builds on this file.
        if matches!(name.as_str(), "owner" | "admin" | "member") {
            return Err(RoleNameError::BuiltIn);
        }
        Ok(Self(name.into_boxed_str()))
    }

    /// A name as stored, or as a member's role list names it (checked when it was written).
    pub fn from_trusted(name: impl Into<Box<str>>) -> Self {
        Self(name.into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for RoleName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What a custom role is granted: actions per resource, every resource one of the default statements'
/// (`organization`, `member`, `invitation`, `team`, `ac`). Actions are not checked against the statements here:
/// the plugin refuses one the creator does not hold ([`Grants::missing_from`]), which refuses an unknown action too.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Grants(BTreeMap<Box<str>, Vec<Box<str>>>);

impl Grants {
    /// `Err` names the first resource that is not one of the statements (the plugin's `INVALID_RESOURCE`).
    pub fn parse<'a>(entries: impl IntoIterator<Item = (&'a str, Vec<&'a str>)>) -> Result<Self, String> {
        let mut map: BTreeMap<Box<str>, Vec<Box<str>>> = BTreeMap::new();
        for (resource, actions) in entries {
            if !Permissions::ORG_OWNER.knows(resource) {
                return Err(resource.to_owned());
            }
            let list = map.entry(resource.into()).or_default();
            for action in actions {
                if !list.iter().any(|a| &**a == action) {
                    list.push(action.into());
                }
            }
        }
        Ok(Self(map))
    }

    /// From the store (checked when written).
    pub fn from_trusted(entries: Vec<(String, Vec<String>)>) -> Self {
        Self(
            entries
                .into_iter()
                .map(|(r, a)| (r.into_boxed_str(), a.into_iter().map(String::into_boxed_str).collect()))
                .collect(),
        )
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &[Box<str>])> {
        self.0.iter().map(|(r, a)| (&**r, a.as_slice()))
    }

    pub fn allows(&self, resource: &str, action: &str) -> bool {
        self.0.get(resource).is_some_and(|a| a.iter().any(|x| &**x == action))
    }

    /// Whether the set has a statement about `resource` (even one granting nothing).
    pub fn knows(&self, resource: &str) -> bool {
        self.0.contains_key(resource)
    }

    /// The `resource:action` pairs granted here that `held` does not grant (the plugin's `missingPermissions`):
    /// nobody grants a role more than they hold themselves.
    pub fn missing_from(&self, held: &impl Fn(&str, &str) -> bool) -> Vec<String> {
        self.iter()
            .flat_map(|(r, actions)| actions.iter().filter(move |a| !held(r, a)).map(move |a| format!("{r}:{a}")))
            .collect()
    }
}

/// A role an organization defined (the plugin's `organizationRole` row).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CustomRole {
    pub id: RoleId,
    pub name: RoleName,
    pub grants: Grants,
    pub created_at: Timestamp,
    /// `null` until the role is first updated, as the plugin's.
    pub updated_at: Option<Timestamp>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_lower_cased_and_never_built_in() {
        assert_eq!(RoleName::parse(" Inviter ").unwrap().as_str(), "inviter");
        assert_eq!(RoleName::parse("Owner"), Err(RoleNameError::BuiltIn));
        assert_eq!(RoleName::parse("a,b"), Err(RoleNameError::Invalid));
        assert_eq!(RoleName::parse("  "), Err(RoleNameError::Invalid));
        assert_eq!(RoleName::parse(&"x".repeat(65)), Err(RoleNameError::Invalid));
    }

    #[test]
    fn grants_name_only_the_statements_and_what_the_creator_lacks() {
        assert_eq!(Grants::parse([("project", vec!["read"])]), Err("project".into()));
        let g = Grants::parse([("invitation", vec!["create", "create"]), ("team", vec!["fly"])]).unwrap();
        assert!(g.allows("invitation", "create") && !g.allows("invitation", "cancel"));
        let admin = |r: &str, a: &str| Permissions::ORG_ADMIN.allows(r, a);
        assert_eq!(g.missing_from(&admin), vec!["team:fly".to_owned()]);
    }
}
