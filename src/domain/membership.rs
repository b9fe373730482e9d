//! Organizations as teams use them: who belongs to which organization in which role, and the invitations that
//! bring people in. The roles and what they may do are better-auth's organization plugin's defaults.

use std::fmt;

use super::{
    CustomRole, Email, Grants, InvitationId, MemberId, OrgId, Permissions, RoleName, TeamId, Timestamp, UserId,
};

/// One of an organization's roles.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum OrgRole {
    Owner,
    Admin,
    Member,
}

impl OrgRole {
    pub const ALL: [OrgRole; 3] = [OrgRole::Owner, OrgRole::Admin, OrgRole::Member];

    pub fn as_str(self) -> &'static str {
        match self {
            OrgRole::Owner => "owner",
            OrgRole::Admin => "admin",
            OrgRole::Member => "member",
        }
    }

    fn bit(self) -> u8 {
        match self {
            OrgRole::Owner => 1,
            OrgRole::Admin => 2,
            OrgRole::Member => 4,
        }
    }

    /// better-auth's default access control for the role (`owner`, `admin`, `member`).
    pub fn permissions(self) -> Permissions {
        match self {
            OrgRole::Owner => Permissions::ORG_OWNER,
            OrgRole::Admin => Permissions::ORG_ADMIN,
            OrgRole::Member => Permissions::ORG_MEMBER,
        }
    }
}

/// The roles a member holds: one or more of [`OrgRole`] (better-auth stores several as `"admin,owner"`), and the
/// organization's own roles by name (`dynamicAccessControl`). Never empty: built only by [`MemberRoles::parse`],
/// [`MemberRoles::one`] or from the store.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MemberRoles {
    bits: u8,
    /// Custom roles, by name, as given. A name the organization no longer defines grants nothing (as the plugin).
    custom: Box<[RoleName]>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RolesError {
    Empty,
    /// The names that are no role of ours, nor (with `dynamicAccessControl`) of the organization.
    Unknown(Vec<String>),
}

impl MemberRoles {
    pub fn one(role: OrgRole) -> Self {
        Self { bits: role.bit(), custom: Box::new([]) }
    }

    /// Roles as better-auth takes them: a list, each entry possibly comma separated, trimmed, empties dropped.
    /// Only the built-in roles: see [`MemberRoles::parse_in`] for an organization's own.
    pub fn parse<'a>(names: impl IntoIterator<Item = &'a str>) -> Result<Self, RolesError> {
        Self::parse_in(names, |_| false)
    }

    /// [`MemberRoles::parse`], where a name `defined` says the organization has is one of its custom roles
    /// (matched exactly, as the plugin's check).
    pub fn parse_in<'a>(
        names: impl IntoIterator<Item = &'a str>,
        defined: impl Fn(&str) -> bool,
    ) -> Result<Self, RolesError> {
        let mut bits = 0;
        let mut custom: Vec<RoleName> = Vec::new();
        let mut unknown = Vec::new();
        for name in names.into_iter().flat_map(|n| n.split(',')).map(str::trim).filter(|n| !n.is_empty()) {
            match OrgRole::ALL.iter().find(|r| r.as_str() == name) {
                Some(role) => bits |= role.bit(),
                None if defined(name) => {
                    if !custom.iter().any(|c| c.as_str() == name) {
                        custom.push(RoleName::from_trusted(name));
                    }
                }
                None => unknown.push(name.to_owned()),
            }
        }
        if !unknown.is_empty() {
            return Err(RolesError::Unknown(unknown));
        }
        if bits == 0 && custom.is_empty() {
            return Err(RolesError::Empty);
        }
        Ok(Self { bits, custom: custom.into() })
    }

    /// From the store: unknown bits are dropped, and nothing left reads as `member`.
    pub fn from_bits(bits: u8) -> Self {
        Self::from_store(bits, Vec::new())
    }

    /// From the store, with the custom roles' names.
    pub fn from_store(bits: u8, custom: Vec<String>) -> Self {
        let custom: Box<[RoleName]> = custom.into_iter().map(RoleName::from_trusted).collect();
        match bits & 7 {
            0 if custom.is_empty() => Self::one(OrgRole::Member),
            b => Self { bits: b, custom },
        }
    }

    pub fn bits(&self) -> u8 {
        self.bits
    }

    /// The custom roles' names (none without `dynamicAccessControl`).
    pub fn custom(&self) -> &[RoleName] {
        &self.custom
    }

    pub fn has(&self, role: OrgRole) -> bool {
        self.bits & role.bit() != 0
    }

    /// Whether one of the roles is the custom role `name`.
    pub fn holds(&self, name: &str) -> bool {
        self.custom.iter().any(|c| c.as_str() == name)
    }

    pub fn is_owner(&self) -> bool {
        self.has(OrgRole::Owner)
    }

    /// The same roles, in whatever order the custom ones were named (`==` tells `auditor,pm` from `pm,auditor`,
    /// which grant the same).
    pub fn same_as(&self, other: &Self) -> bool {
        self.bits == other.bits
            && self.custom.len() == other.custom.len()
            && self.custom.iter().all(|c| other.custom.contains(c))
    }

    pub fn roles(&self) -> impl Iterator<Item = OrgRole> + '_ {
        OrgRole::ALL.into_iter().filter(move |r| self.has(*r))
    }

    /// Whether one of the roles is granted every action asked for (better-auth's `hasPermission`): the built-in
    /// ones by the default statements, the custom ones by the organization's definitions `defined` (a name it no
    /// longer defines grants nothing). Roles are not merged: one of them must grant all of it.
    pub fn allows_all_in(&self, defined: &[CustomRole], wanted: &[(&str, &str)]) -> bool {
        !wanted.is_empty()
            && (self.roles().any(|r| r.permissions().allows_all(wanted.iter().copied()))
                || self.granted(defined).any(|g| wanted.iter().all(|(r, a)| g.allows(r, a))))
    }

    pub fn allows_in(&self, defined: &[CustomRole], resource: &str, action: &str) -> bool {
        self.allows_all_in(defined, &[(resource, action)])
    }

    /// [`MemberRoles::allows_all_in`] over the built-in roles only.
    pub fn allows_all(&self, wanted: &[(&str, &str)]) -> bool {
        self.allows_all_in(&[], wanted)
    }

    /// [`MemberRoles::allows_in`] over the built-in roles only.
    pub fn allows(&self, resource: &str, action: &str) -> bool {
        self.allows_all_in(&[], &[(resource, action)])
    }

    /// The grants of the custom roles held that `defined` still defines.
    pub fn granted<'a>(&'a self, defined: &'a [CustomRole]) -> impl Iterator<Item = &'a Grants> + 'a {
        defined.iter().filter(|d| self.holds(d.name.as_str())).map(|d| &d.grants)
    }
}

impl MemberRoles {
    /// Every role's name: the built-in ones first, then the organization's own.
    pub fn names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self.roles().map(OrgRole::as_str).collect();
        names.extend(self.custom.iter().map(RoleName::as_str));
        names
    }
}

impl fmt::Display for MemberRoles {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.names().join(","))
    }
}

/// A user's membership of an organization. One per (organization, user).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Membership {
    pub id: MemberId,
    pub org: OrgId,
    pub user: UserId,
    pub roles: MemberRoles,
    pub created_at: Timestamp,
}

impl Membership {
    pub fn new(org: OrgId, user: UserId, roles: MemberRoles, created_at: Timestamp) -> Self {
        Self { id: MemberId::of(org, user), org, user, roles, created_at }
    }

    /// A membership for tests: `user` in `org` with one `role`, made `at_ms` milliseconds after the epoch (the
    /// joining order the indexes keep).
    #[cfg(test)]
    pub fn fixture(org: OrgId, user: UserId, at_ms: i64, role: OrgRole) -> std::sync::Arc<Self> {
        std::sync::Arc::new(Self::new(org, user, MemberRoles::one(role), Timestamp::from_millis(at_ms)))
    }
}

/// Where an invitation stands. Only a pending one that has not expired can be accepted or rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InvitationStatus {
    Pending,
    Accepted,
    Rejected,
    Canceled,
}

impl InvitationStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            InvitationStatus::Pending => "pending",
            InvitationStatus::Accepted => "accepted",
            InvitationStatus::Rejected => "rejected",
            InvitationStatus::Canceled => "canceled",
        }
    }

    pub fn code(self) -> u8 {
        match self {
            InvitationStatus::Pending => 0,
            InvitationStatus::Accepted => 1,
            InvitationStatus::Rejected => 2,
            InvitationStatus::Canceled => 3,
        }
    }

    pub fn from_code(code: u8) -> Self {
        match code {
            0 => InvitationStatus::Pending,
            1 => InvitationStatus::Accepted,
            2 => InvitationStatus::Rejected,
            _ => InvitationStatus::Canceled,
        }
    }
}

/// An invitation of an e-mail address into an organization with a role.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invitation {
    pub id: InvitationId,
    pub org: OrgId,
    pub email: Email,
    pub roles: MemberRoles,
    pub inviter: UserId,
    pub status: InvitationStatus,
    pub expires_at: Timestamp,
    pub created_at: Timestamp,
    /// The teams accepting puts the invitee in (teams on; empty otherwise).
    pub teams: InvitedTeams,
}

impl Invitation {
    /// Pending and not expired at `now`: the only kind that can be accepted, rejected or shown to its recipient.
    pub fn is_open(&self, now: Timestamp) -> bool {
        self.status == InvitationStatus::Pending && self.expires_at > now
    }
}

/// The teams an invitation puts its invitee in (the plugin's `invitation.teamId`, its ids joined by commas): each
/// at most once, in the order the inviter named them. Empty: into no team (`teamId: null`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InvitedTeams(Vec<TeamId>);

impl InvitedTeams {
    /// `ids` in their order, a repeated one kept once (the plugin would store it twice and, accepting, add the
    /// invitee to it once but count two teams, so not make it the active one).
    pub fn new(ids: impl IntoIterator<Item = TeamId>) -> Self {
        let mut teams: Vec<TeamId> = Vec::new();
        for id in ids {
            if !teams.contains(&id) {
                teams.push(id);
            }
        }
        Self(teams)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = TeamId> + '_ {
        self.0.iter().copied()
    }

    /// The one team named, when there is exactly one (accepting makes it the session's active team).
    pub fn only(&self) -> Option<TeamId> {
        match self.0.as_slice() {
            [one] => Some(*one),
            _ => None,
        }
    }

    /// The same teams but `team` (a removed team leaves the invitations that named it).
    pub fn without(&self, team: TeamId) -> Self {
        Self(self.0.iter().copied().filter(|t| *t != team).collect())
    }

    pub fn contains(&self, team: TeamId) -> bool {
        self.0.contains(&team)
    }

    /// The plugin's `teamId`: the ids joined by commas, `None` for no team.
    pub fn joined(&self) -> Option<String> {
        (!self.0.is_empty()).then(|| self.0.iter().map(ToString::to_string).collect::<Vec<_>>().join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_parse_as_better_auth_splits_them() {
        let both = MemberRoles::parse(["admin, owner"]).unwrap();
        assert!(both.has(OrgRole::Owner) && both.has(OrgRole::Admin) && !both.has(OrgRole::Member));
        assert_eq!(both.to_string(), "owner,admin");
        assert_eq!(MemberRoles::parse(["", " , "]), Err(RolesError::Empty));
        assert_eq!(MemberRoles::parse(["member", "boss"]), Err(RolesError::Unknown(vec!["boss".into()])));
        assert_eq!(MemberRoles::from_bits(0), MemberRoles::one(OrgRole::Member));
    }

    #[test]
    fn the_same_roles_are_the_same_in_any_order() {
        let (ab, ba) = (
            MemberRoles::from_store(2, vec!["a".into(), "b".into()]),
            MemberRoles::from_store(2, vec!["b".into(), "a".into()]),
        );
        assert!(ab.same_as(&ba) && ab != ba);
        assert!(!ab.same_as(&MemberRoles::from_store(2, vec!["a".into()])));
        assert!(!ab.same_as(&MemberRoles::from_store(4, vec!["a".into(), "b".into()])));
        assert!(!MemberRoles::from_store(2, vec!["a".into()]).same_as(&MemberRoles::from_store(2, vec!["c".into()])));
    }

    #[test]
    fn default_permissions_are_better_auths() {
        let (owner, admin, member) =
            (MemberRoles::one(OrgRole::Owner), MemberRoles::one(OrgRole::Admin), MemberRoles::one(OrgRole::Member));
        assert!(owner.allows("organization", "delete") && !admin.allows("organization", "delete"));
        assert!(
            admin.allows("organization", "update")
                && admin.allows_all(&[("member", "delete"), ("invitation", "cancel")])
        );
        assert!(!member.allows("member", "create") && !member.allows("invitation", "create"));
        assert!(member.allows("ac", "read"));
        assert!(!owner.allows_all(&[]), "nothing asked is not a permission");
        assert!(!owner.allows("user", "ban"), "no organization role reaches the service's own administration");
    }

    #[test]
    fn a_membership_id_is_the_same_for_the_same_pair() {
        let (org, user) = (OrgId::new(), UserId::new());
        assert_eq!(MemberId::of(org, user), MemberId::of(org, user));
        assert_ne!(MemberId::of(org, user), MemberId::of(org, UserId::new()));
    }

    #[test]
    fn invited_teams_keep_their_order_once_each_and_join_with_commas() {
        let (a, b) = (TeamId::new(), TeamId::new());
        let teams = InvitedTeams::new([a, b, a]);
        assert_eq!(teams.joined(), Some(format!("{a},{b}")));
        assert_eq!(teams.only(), None);
        assert_eq!(teams.without(a).only(), Some(b));
        assert_eq!(teams.without(a).without(b).joined(), None, "none left: `teamId: null`");
        assert!(InvitedTeams::default().is_empty());
    }
}
