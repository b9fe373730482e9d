//! An organization's teams (better-auth's organization plugin with `teams: {enabled: true}`): named groups of the
//! organization's members.

use super::{Membership, Name, TeamId, TeamMemberId, Timestamp, UserId};

/// A team of an organization, with its members.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Team {
    pub id: TeamId,
    pub name: Name,
    pub created_at: Timestamp,
    /// `null` until the team is first updated (the plugin's `updatedAt` on a default team), else the last change.
    pub updated_at: Option<Timestamp>,
    /// Oldest first, one entry per user.
    pub members: Vec<TeamMember>,
}

/// A user's place in a team.
///
/// The entry counts only while the user is a member of the organization by the membership that was current when
/// they were put in the team: the plugin deletes a user's team rows when their membership ends, and here the
/// memberships are another actor's, so an entry older than the user's membership (or without one) is ignored
/// and dropped at the team's next change instead. A user who leaves and joins again is in no team.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TeamMember {
    pub user: UserId,
    pub created_at: Timestamp,
}

impl TeamMember {
    pub fn id(&self, team: TeamId) -> TeamMemberId {
        TeamMemberId::of(team, self.user)
    }

    /// Whether the entry stands, given the user's membership of the team's organization now.
    pub fn stands(&self, membership: Option<&Membership>) -> bool {
        membership.is_some_and(|m| m.created_at <= self.created_at)
    }
}

impl Team {
    /// The members whose entries stand (see [`TeamMember`]), `membership` giving each user's membership now.
    pub fn standing<'a, M: std::ops::Deref<Target = Membership>>(
        &'a self,
        membership: impl Fn(UserId) -> Option<M> + 'a,
    ) -> impl Iterator<Item = &'a TeamMember> + 'a {
        self.members.iter().filter(move |m| m.stands(membership(m.user).as_deref()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{MemberRoles, OrgId, OrgRole};

    #[test]
    fn an_entry_stands_only_by_the_membership_it_was_made_under() {
        let (org, user) = (OrgId::new(), UserId::new());
        let entry = TeamMember { user, created_at: Timestamp::from_millis(2_000) };
        let member = |at| Membership::new(org, user, MemberRoles::one(OrgRole::Member), Timestamp::from_millis(at));
        assert!(entry.stands(Some(&member(1_000))));
        assert!(entry.stands(Some(&member(2_000))), "put in the team as they joined (a default team)");
        assert!(!entry.stands(Some(&member(3_000))), "left and joined again: in no team");
        assert!(!entry.stands(None), "no longer a member");
    }
}
