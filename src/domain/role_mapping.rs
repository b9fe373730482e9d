//! An SSO provider's role mapping (issue #48): which groups the identity provider says a person is in give which
//! of the organization's roles. The groups travel in an ID token claim (OpenID Connect) or an assertion attribute
//! (SAML) that the provider's administrators name; the pairs are checked against the organization's roles where
//! they are set (src/accounts/sso_roles.rs), since only it knows the roles it defined.

use super::{OrgRole, RoleName};

/// The claim an OpenID Connect provider's groups are read from when none is named (Okta, Entra ID, Keycloak,
/// Authentik and oidc-provider all call it so).
pub const DEFAULT_GROUPS_CLAIM: &str = "groups";

/// The attributes a SAML provider's groups are read from when none is named: the common short name (Okta's
/// usual, Google's, Keycloak's) and the one Entra ID and ADFS send by default.
pub const DEFAULT_GROUPS_ATTRIBUTES: &[&str] =
    &["groups", "http://schemas.microsoft.com/ws/2008/06/identity/claims/groups"];

/// A role a group maps to: a built-in one, or (by name) one the organization defines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MappedRole {
    BuiltIn(OrgRole),
    Custom(RoleName),
}

impl MappedRole {
    /// Trimmed and lower-cased, as the organization plugin takes role names.
    pub fn parse(raw: &str) -> Result<Self, RoleMappingError> {
        let name = raw.trim().to_lowercase();
        if let Some(role) = OrgRole::ALL.into_iter().find(|r| r.as_str() == name) {
            return Ok(Self::BuiltIn(role));
        }
        RoleName::parse(&name).map(Self::Custom).map_err(|_| {
            RoleMappingError(format!("roleMapping: {raw:?} is not a role name (1 to 64 characters, no comma)"))
        })
    }

    pub fn as_str(&self) -> &str {
        match self {
            Self::BuiltIn(role) => role.as_str(),
            Self::Custom(name) => name.as_str(),
        }
    }
}

/// One pair: members of `group` get `role`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupRole {
    group: Box<str>,
    role: MappedRole,
}

impl GroupRole {
    pub fn group(&self) -> &str {
        &self.group
    }

    pub fn role(&self) -> &MappedRole {
        &self.role
    }
}

/// The claim or attribute that carries the groups (`None`: the defaults above) and the pairs, at least one, at
/// most [`RoleMapping::MAX_PAIRS`], no pair twice. Group names are compared exactly (case and all: Entra ID sends
/// object ids, Okta names), once trimmed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoleMapping {
    claim: Option<Box<str>>,
    pairs: Vec<GroupRole>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct RoleMappingError(pub String);

impl RoleMapping {
    pub const MAX_PAIRS: usize = 100;
    /// A group's name, and the claim's, in characters: Entra ID's object ids are 36, distinguished names as
    /// ADFS sends them run longer.
    pub const MAX_NAME: usize = 256;

    pub fn parse<'a>(
        claim: Option<&str>,
        pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Self, RoleMappingError> {
        let claim = match claim.map(str::trim) {
            None => None,
            Some(c) if valid_name(c) => Some(c.into()),
            Some(_) => {
                return Err(RoleMappingError(format!(
                    "roleMapping.claim must be 1 to {} characters without control characters",
                    Self::MAX_NAME
                )));
            }
        };
        let mut out: Vec<GroupRole> = Vec::new();
        for (group, role) in pairs {
            let group = group.trim();
            if !valid_name(group) {
                return Err(RoleMappingError(format!(
                    "roleMapping: a group's name must be 1 to {} characters without control characters",
                    Self::MAX_NAME
                )));
            }
            let pair = GroupRole { group: group.into(), role: MappedRole::parse(role)? };
            if !out.contains(&pair) {
                out.push(pair);
            }
        }
        if out.is_empty() || out.len() > Self::MAX_PAIRS {
            return Err(RoleMappingError(format!("roleMapping.mappings must hold 1 to {} pairs", Self::MAX_PAIRS)));
        }
        Ok(Self { claim, pairs: out })
    }

    /// From the store (checked when written).
    pub fn from_trusted(claim: Option<String>, pairs: Vec<(String, String)>) -> Self {
        let role = |r: &str| match OrgRole::ALL.into_iter().find(|b| b.as_str() == r) {
            Some(b) => MappedRole::BuiltIn(b),
            None => MappedRole::Custom(RoleName::from_trusted(r)),
        };
        let pairs = pairs.into_iter().map(|(g, r)| GroupRole { role: role(&r), group: g.into() }).collect();
        Self { claim: claim.map(Into::into), pairs }
    }

    /// The claim or attribute named, `None` for the defaults.
    pub fn claim(&self) -> Option<&str> {
        self.claim.as_deref()
    }

    pub fn pairs(&self) -> &[GroupRole] {
        &self.pairs
    }

    /// The names of the roles of every pair whose group is among `groups`, each once, in the pairs' order.
    pub fn roles_of<'a>(&'a self, groups: &[&str]) -> Vec<&'a str> {
        let mut roles: Vec<&str> = Vec::new();
        for pair in self.pairs.iter().filter(|p| groups.contains(&&*p.group)) {
            if !roles.contains(&pair.role.as_str()) {
                roles.push(pair.role.as_str());
            }
        }
        roles
    }

    /// `claim: pairs`, for the audit log: `groups: eng-admins=admin, staff=member`.
    pub fn describe(&self) -> String {
        let pairs: Vec<String> = self.pairs.iter().map(|p| format!("{}={}", p.group, p.role.as_str())).collect();
        format!("{}: {}", self.claim().unwrap_or("(default claim)"), pairs.join(", "))
    }
}

fn valid_name(name: &str) -> bool {
    !name.is_empty() && name.chars().count() <= RoleMapping::MAX_NAME && !name.chars().any(char::is_control)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_are_checked_trimmed_and_de_duplicated() {
        let m = RoleMapping::parse(Some(" roles "), [("eng", " Admin"), ("eng", "admin"), ("ops", "Inviter")]).unwrap();
        assert_eq!(m.claim(), Some("roles"));
        assert_eq!(m.pairs().len(), 2);
        assert_eq!(m.pairs()[0].role(), &MappedRole::BuiltIn(OrgRole::Admin));
        assert_eq!(m.pairs()[1].role().as_str(), "inviter");
        for bad in [vec![], vec![("", "admin")], vec![("  ", "admin")], vec![("a\nb", "admin")], vec![("eng", "")]] {
            assert!(RoleMapping::parse(None, bad.clone()).is_err(), "{bad:?}");
        }
        assert!(RoleMapping::parse(None, [("eng", "a,b")]).is_err());
        assert!(RoleMapping::parse(Some(""), [("eng", "admin")]).is_err());
        let many: Vec<String> = (0..=RoleMapping::MAX_PAIRS).map(|n| format!("g{n}")).collect();
        assert!(RoleMapping::parse(None, many.iter().map(|g| (g.as_str(), "member"))).is_err());
        assert!(RoleMapping::parse(None, [(&*"x".repeat(RoleMapping::MAX_NAME + 1), "member")]).is_err());
    }

    #[test]
    fn the_roles_of_every_matching_group_count_once_and_groups_match_exactly() {
        let m = RoleMapping::parse(None, [("eng", "admin"), ("ops", "member"), ("leads", "admin"), ("Ops", "owner")])
            .unwrap();
        assert_eq!(m.roles_of(&["eng", "ops", "leads"]), ["admin", "member"]);
        assert_eq!(m.roles_of(&["OPS"]), Vec::<&str>::new());
        assert_eq!(m.roles_of(&[]), Vec::<&str>::new());
        assert_eq!(m.describe(), "(default claim): eng=admin, ops=member, leads=admin, Ops=owner");
    }
}
