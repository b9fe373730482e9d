//! The rules of account changes, as pure functions over what the users actor knows at that moment: no actor, no
//! store and no hashing, so each rule is tested alone (below) in microseconds.

use super::{
    DeleteUserError, EnsureAdmin, EnsureAdminError, ExternalError, ExternalIdentity, NewUser, OwnChange,
    UpdateUserError, UserChange,
};
use crate::domain::{Email, Name, OrgId, Role, Timestamp, User, UserFields, UserId, action};

/// What the state around a change looks like, as the actor sees it (pending changes included).
pub struct Snapshot<'a> {
    /// The administrator asking, as they are now (`None`: the account is gone).
    pub caller: Option<&'a User>,
    /// Unbanned administrators once the pending batch is durable.
    pub active_admins: usize,
    pub org_exists: &'a dyn Fn(OrgId) -> bool,
}

/// A change the actor stages, and whether it ends every session of the account in the same commit.
#[derive(Debug)]
pub struct Changed {
    pub user: User,
    pub ends_sessions: bool,
}

pub fn new_account(new: NewUser, now: Timestamp) -> User {
    User::from(UserFields {
        id: UserId::new(),
        name: new.name,
        email: new.email,
        email_verified: false,
        image: new.image.map(Into::into),
        role: new.role,
        banned: false,
        ban_reason: None,
        ban_expires: None,
        organization_id: None,
        password_hash: new.password_hash.into(),
        created_at: now,
        updated_at: now,
        two_factor: None,
        username: new.username,
        display_username: new.display_username,
    })
}

/// An account made by a way in through the mailbox (a sign-in link or code to an address with no account yet):
/// the address is proven by that very mail, and there is no password. `id` is the one the link or code was
/// issued for; the name is the one given, else the address's local part (a name must not be empty here).
pub fn mailbox_sign_up(id: UserId, email: Email, name: Option<Name>, role: Role, now: Timestamp) -> User {
    let name = name
        .or_else(|| Name::parse(email.as_str().split('@').next().unwrap_or_default()).ok())
        .unwrap_or_else(|| Name::from_trusted("user".to_owned()));
    let new = NewUser {
        name,
        email,
        image: None,
        role,
        password_hash: String::new(),
        username: None,
        display_username: None,
    };
    User::from(UserFields { id, email_verified: true, ..new_account(new, now).fields() })
}

/// What a way in through the mailbox does to an account whose address was never proven (better-auth's
/// `revokeUnprovenAccountAccess`): whoever made the account with that address may not be its owner, so the
/// password they set ends with every session, and the address is proven from now on. A proven account is left
/// as it is (`None`).
pub fn prove_by_mailbox(current: &User, now: Timestamp) -> Option<Changed> {
    (!current.email_verified).then(|| Changed {
        user: User::from(UserFields {
            email_verified: true,
            password_hash: "".into(),
            updated_at: now,
            ..current.fields()
        }),
        ends_sessions: true,
    })
}

/// An administrator's change to `current`.
pub fn apply_change(
    snapshot: &Snapshot<'_>,
    current: &User,
    change: UserChange,
    now: Timestamp,
) -> Result<Changed, UpdateUserError> {
    // The HTTP side checked the caller's role when the request came in; the actor checks again, in message
    // order, so a demotion that landed in between is honoured.
    let caller = snapshot.caller.filter(|c| c.is_active_admin()).ok_or(UpdateUserError::NotAdmin)?;
    if change.banned == Some(true) && current.id == caller.id {
        return Err(UpdateUserError::SelfBan);
    }
    if let Some(Some(org)) = change.organization
        && !(snapshot.org_exists)(org)
    {
        return Err(UpdateUserError::OrganizationNotFound);
    }
    let mut user = current.fields();
    if let Some(role) = change.role {
        user.role = role;
    }
    if let Some(banned) = change.banned {
        user.banned = banned;
        user.ban_reason = None;
        user.ban_expires = change.ban_expires.filter(|_| banned);
    }
    // A reason describes a ban: kept while the account is banned, dropped with the ban.
    if user.banned && change.ban_reason.is_some() {
        user.ban_reason = change.ban_reason.map(Into::into);
    }
    if let Some(org) = change.organization {
        user.organization_id = org;
    }
    if let Some(name) = change.name {
        user.name = name;
    }
    if let Some(image) = change.image {
        user.image = image.map(Into::into);
    }
    if change.username.is_some() {
        user.username = change.username;
    }
    if change.display_username.is_some() {
        user.display_username = change.display_username;
    }
    if let Some(verified) = change.email_verified {
        user.email_verified = verified;
    }
    let new_password = change.password_hash.is_some();
    if let Some(hash) = change.password_hash {
        user.password_hash = hash.into();
    }
    user.updated_at = now;
    let user = User::from(user);
    if current.is_active_admin() && !user.is_active_admin() && snapshot.active_admins <= 1 {
        return Err(UpdateUserError::LastAdmin);
    }
    // Every ban ends the sessions, even of an account already banned: a ban is how an administrator makes sure
    // nobody is signed in there. So does a password the administrator sets (after a lost phone, say).
    Ok(Changed { user, ends_sessions: change.banned == Some(true) || new_password })
}

/// `current` with its ban lifted, if the ban has run out by `now`.
pub fn lift_expired_ban(current: &User, now: Timestamp) -> Option<User> {
    let ran_out = current.banned && current.ban_expires().is_some_and(|end| end <= now);
    ran_out.then(|| {
        current.with(|u| {
            u.banned = false;
            u.ban_reason = None;
            u.ban_expires = None;
            u.updated_at = now;
        })
    })
}

/// A user's own change: a new password (which may end every session) or a new name and picture.
pub fn apply_own_change(current: &User, change: OwnChange, now: Timestamp) -> Changed {
    let mut user = current.fields();
    let ends_sessions = match change {
        OwnChange::Password { password_hash, end_sessions } => {
            user.password_hash = password_hash.into();
            end_sessions
        }
        OwnChange::Profile { name, image, username, display_username } => {
            if let Some(name) = name {
                user.name = name;
            }
            // As the plugin: a new username without a display form keeps the old display form.
            if username.is_some() {
                user.username = username;
            }
            if display_username.is_some() {
                user.display_username = display_username;
            }
            if let Some(image) = image {
                user.image = image.map(Into::into);
            }
            false
        }
    };
    user.updated_at = now;
    let user = user.into();
    Changed { user, ends_sessions }
}

/// Whether `user` may delete their account: not the last active administrator.
pub fn may_delete(user: &User, active_admins: usize) -> Result<(), DeleteUserError> {
    if user.is_active_admin() && active_admins <= 1 {
        return Err(DeleteUserError::LastAdmin);
    }
    Ok(())
}

/// The first administrator, from the command line or the bootstrap variables.
pub struct AdminSetup {
    pub name: Name,
    pub email: Email,
    pub password_hash: String,
    /// Take over an existing account with that e-mail (the operator said so explicitly).
    pub promote_existing: bool,
}

pub fn set_up_admin(
    existing: Option<&User>,
    setup: AdminSetup,
    now: Timestamp,
) -> Result<(Changed, EnsureAdmin), EnsureAdminError> {
    match existing {
        // Anyone can sign up with any address: the account may be a squatter's.
        Some(_) if !setup.promote_existing => Err(EnsureAdminError::Exists),
        // Whoever held the account before loses it: the operator's password replaces theirs, their sessions end.
        Some(current) => {
            let user = User::from(UserFields {
                role: Role::admin(),
                banned: false,
                ban_reason: None,
                ban_expires: None,
                password_hash: setup.password_hash.into(),
                updated_at: now,
                ..current.fields()
            });
            Ok((Changed { user, ends_sessions: true }, EnsureAdmin::Promoted(current.id)))
        }
        None => {
            let new = NewUser {
                name: setup.name,
                email: setup.email,
                image: None,
                role: Role::admin(),
                password_hash: setup.password_hash,
                username: None,
                display_username: None,
            };
            let user = new_account(new, now);
            let id = user.id;
            Ok((Changed { user, ends_sessions: false }, EnsureAdmin::Created(id)))
        }
    }
}

/// What an administrator's change did, as audit actions with their details.
pub fn changes<'a>(before: &'a User, after: &'a User) -> impl Iterator<Item = (&'static str, String)> + 'a {
    let org = |o: Option<OrgId>| o.map_or_else(|| "none".to_owned(), |id| id.to_string());
    let role =
        (before.role != after.role).then(|| (action::ROLE_CHANGED, format!("{} -> {}", before.role, after.role)));
    let ban_detail = || {
        let reason = after.ban_reason().unwrap_or_default().to_owned();
        match after.ban_expires() {
            Some(end) if reason.is_empty() => format!("until {}", end.to_rfc3339()),
            Some(end) => format!("{reason} (until {})", end.to_rfc3339()),
            None => reason,
        }
    };
    let ban = match (before.banned, after.banned) {
        (false, true) => Some((action::BANNED, ban_detail())),
        (true, true) if before.ban_expires() != after.ban_expires() => Some((action::BANNED, ban_detail())),
        (true, false) => Some((action::UNBANNED, String::new())),
        _ if before.ban_reason() != after.ban_reason() => {
            Some((action::BAN_REASON_CHANGED, after.ban_reason().unwrap_or_default().to_owned()))
        }
        _ => None,
    };
    let membership = (before.organization_id != after.organization_id).then(|| {
        (action::ORGANIZATION_CHANGED, format!("{} -> {}", org(before.organization_id), org(after.organization_id)))
    });
    let mut profile = Vec::new();
    if before.name() != after.name() {
        profile.push("name");
    }
    if before.image() != after.image() {
        profile.push("image");
    }
    if before.username() != after.username() {
        profile.push("username");
    }
    if before.display_username() != after.display_username() {
        profile.push("display username");
    }
    if before.email_verified != after.email_verified {
        profile.push(if after.email_verified { "e-mail marked verified" } else { "e-mail marked unverified" });
    }
    let profile = (!profile.is_empty()).then(|| (action::PROFILE_UPDATED, profile.join(", ")));
    let password = (before.password_hash() != after.password_hash())
        .then(|| (action::PASSWORD_SET, "set by an administrator; every session ended".to_owned()));
    [role, ban, membership, profile, password].into_iter().flatten()
}

/// Whether administrator `caller` may remove `target`: not themself, not the last active administrator.
pub fn may_remove(caller: Option<&User>, target: &User, active_admins: usize) -> Result<(), DeleteUserError> {
    let caller = caller.filter(|c| c.is_active_admin()).ok_or(DeleteUserError::NotAdmin)?;
    if caller.id == target.id {
        return Err(DeleteUserError::SelfRemoval);
    }
    may_delete(target, active_admins)
}

/// Whether an identity another provider vouched for joins `account`, the one with its address here, when it signs
/// in (not a link the owner asked for): only when the provider asserts the address verified, is trusted for
/// linking, *and* the account's own address has been proven here (`email_verified`: by a mailed link, by a reset
/// through one, by an administrator, or the account was made by a provider that verified it). Without the last,
/// anyone could sign up with someone else's address (verification is optional) and have the owner's identity
/// handed to that account when she signs in, both keeping a key. Refused: the owner links it once signed in.
pub fn implicit_link(account: &User, identity: &ExternalIdentity) -> Result<(), ExternalError> {
    if identity.email_verified && identity.trusted && account.email_verified {
        Ok(())
    } else {
        Err(ExternalError::NotLinked)
    }
}

/// Whether signed-in `account` may link an identity it asked for (`link-social`, by redirect or with an ID token:
/// both come here), as better-auth's `linkSocial` decides: the provider asserts the address verified or is trusted
/// for linking, and the address is the account's own (an identity of another address may be someone else's).
pub fn explicit_link(account: &User, identity: &ExternalIdentity) -> Result<(), ExternalError> {
    if !(identity.email_verified || identity.trusted) {
        return Err(ExternalError::LinkingNotAllowed);
    }
    if account.email() != identity.email.as_str() {
        return Err(ExternalError::EmailMismatch);
    }
    Ok(())
}

/// Whether an identity whose address has no account here may make one: only with an address the provider asserts
/// as verified, unless its configuration says otherwise (`allow_unverified_email_sign_up`). Otherwise whoever
/// claims someone else's address at a lax provider would hold the account its owner signs up for later.
pub fn external_sign_up(identity: &ExternalIdentity) -> Result<(), ExternalError> {
    if identity.email_verified || identity.sign_up_unverified { Ok(()) } else { Err(ExternalError::UnverifiedEmail) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{BanReason, RoleSet};

    fn roles() -> RoleSet {
        RoleSet::new(&["admin".into(), "qa_manager".into(), "user".into()], "user")
    }

    fn account(email: &str, role: &str) -> User {
        let new = NewUser {
            name: Name::parse("Someone").unwrap(),
            email: Email::parse(email).unwrap(),
            image: None,
            role: roles().parse(role).unwrap(),
            password_hash: "old hash".into(),
            username: None,
            display_username: None,
        };
        new_account(new, Timestamp::from_millis(1))
    }

    fn snapshot<'a>(caller: &'a User, active_admins: usize, orgs: &'a dyn Fn(OrgId) -> bool) -> Snapshot<'a> {
        Snapshot { caller: Some(caller), active_admins, org_exists: orgs }
    }

    fn change() -> UserChange {
        UserChange::default()
    }

    const NO_ORGS: &dyn Fn(OrgId) -> bool = &|_| false;
    const NOW: Timestamp = Timestamp::from_millis(2);

    #[test]
    fn the_mailbox_proves_an_unproven_address_and_ends_its_password_and_sessions() {
        let unproven =
            User::from(UserFields { password_hash: "$argon2id$x".into(), ..account("m@example.com", "user").fields() });
        let Changed { user, ends_sessions } = prove_by_mailbox(&unproven, Timestamp::now()).unwrap();
        assert!(user.email_verified && ends_sessions && user.password_hash().to_string().is_empty());
        let proven = User::from(UserFields { email_verified: true, ..unproven.fields() });
        assert!(prove_by_mailbox(&proven, Timestamp::now()).is_none(), "a proven account keeps everything");
        let id = UserId::new();
        let made = mailbox_sign_up(
            id,
            Email::parse("ada.l@example.com").unwrap(),
            None,
            roles().parse("user").unwrap(),
            Timestamp::now(),
        );
        assert_eq!((made.id, made.name(), made.email_verified), (id, "ada.l", true));
        assert!(made.password_hash().to_string().is_empty());
    }

    #[test]
    fn the_last_active_administrator_can_be_neither_demoted_nor_banned() {
        let (admin, other) = (account("a@example.com", "admin"), account("b@example.com", "admin"));
        let demote = UserChange { role: roles().parse("user"), ..change() };
        let r = apply_change(&snapshot(&other, 1, NO_ORGS), &admin, demote.clone(), NOW);
        assert_eq!(r.unwrap_err(), UpdateUserError::LastAdmin);
        let ban = UserChange { banned: Some(true), ..change() };
        assert_eq!(
            apply_change(&snapshot(&other, 1, NO_ORGS), &admin, ban, NOW).unwrap_err(),
            UpdateUserError::LastAdmin
        );
        let done = apply_change(&snapshot(&other, 2, NO_ORGS), &admin, demote, NOW).unwrap();
        assert_eq!((done.user.role.as_str(), done.user.updated_at), ("user", NOW));
    }

    #[test]
    fn an_administrator_cannot_ban_themselves_and_a_demoted_caller_is_refused() {
        let admin = account("a@example.com", "admin");
        let ban = UserChange { banned: Some(true), ..change() };
        assert_eq!(
            apply_change(&snapshot(&admin, 5, NO_ORGS), &admin, ban.clone(), NOW).unwrap_err(),
            UpdateUserError::SelfBan
        );
        let demoted = account("d@example.com", "qa_manager");
        let target = account("t@example.com", "user");
        assert_eq!(
            apply_change(&snapshot(&demoted, 5, NO_ORGS), &target, ban.clone(), NOW).unwrap_err(),
            UpdateUserError::NotAdmin
        );
        let gone = Snapshot { caller: None, active_admins: 5, org_exists: NO_ORGS };
        assert_eq!(apply_change(&gone, &target, ban, NOW).unwrap_err(), UpdateUserError::NotAdmin);
    }

    #[test]
    fn a_ban_ends_sessions_every_time_and_its_reason_lives_with_it() {
        let (admin, target) = (account("a@example.com", "admin"), account("t@example.com", "user"));
        let s = snapshot(&admin, 1, NO_ORGS);
        let ban = UserChange { banned: Some(true), ban_reason: BanReason::parse("left").unwrap(), ..change() };
        let banned = apply_change(&s, &target, ban.clone(), NOW).unwrap();
        assert!(banned.ends_sessions && banned.user.banned);
        assert_eq!(banned.user.ban_reason(), Some("left"));
        assert!(apply_change(&s, &banned.user, ban, NOW).unwrap().ends_sessions, "a second ban ends them again");
        let reason_only = UserChange { ban_reason: BanReason::parse("ignored").unwrap(), ..change() };
        assert_eq!(apply_change(&s, &target, reason_only, NOW).unwrap().user.ban_reason(), None);
        let unban = UserChange { banned: Some(false), ..change() };
        let unbanned = apply_change(&s, &banned.user, unban, NOW).unwrap();
        assert!(!unbanned.ends_sessions && unbanned.user.ban_reason().is_none());
    }

    #[test]
    fn a_membership_needs_an_existing_organization() {
        let (admin, target) = (account("a@example.com", "admin"), account("t@example.com", "user"));
        let org = OrgId::new();
        let join = UserChange { organization: Some(Some(org)), ..change() };
        let r = apply_change(&snapshot(&admin, 1, NO_ORGS), &target, join.clone(), NOW);
        assert_eq!(r.unwrap_err(), UpdateUserError::OrganizationNotFound);
        let exists: &dyn Fn(OrgId) -> bool = &|o| o == org;
        assert_eq!(
            apply_change(&snapshot(&admin, 1, exists), &target, join, NOW).unwrap().user.organization_id,
            Some(org)
        );
    }

    fn setup(promote_existing: bool) -> AdminSetup {
        AdminSetup {
            name: Name::parse("Operator").unwrap(),
            email: Email::parse("op@example.com").unwrap(),
            password_hash: "operator hash".into(),
            promote_existing,
        }
    }

    #[test]
    fn an_existing_account_becomes_administrator_only_when_asked_and_then_loses_its_password_and_sessions() {
        let mut squatter = account("op@example.com", "user");
        squatter.banned = true;
        assert_eq!(set_up_admin(Some(&squatter), setup(false), NOW).unwrap_err(), EnsureAdminError::Exists);
        let (changed, outcome) = set_up_admin(Some(&squatter), setup(true), NOW).unwrap();
        assert_eq!(outcome, EnsureAdmin::Promoted(squatter.id));
        assert!(changed.ends_sessions && changed.user.role.is_admin() && !changed.user.banned);
        assert_eq!(changed.user.password_hash().as_phc(), "operator hash");
        let (created, outcome) = set_up_admin(None, setup(false), NOW).unwrap();
        assert_eq!(outcome, EnsureAdmin::Created(created.user.id));
        assert!(!created.ends_sessions && created.user.role.is_admin());
    }

    #[test]
    fn a_new_password_ends_sessions_only_when_asked_and_a_profile_change_never() {
        let user = account("u@example.com", "user");
        let keep = OwnChange::Password { password_hash: "new".into(), end_sessions: false };
        let changed = apply_own_change(&user, keep, NOW);
        assert_eq!((changed.user.password_hash().as_phc().as_ref(), changed.ends_sessions), ("new", false));
        let end = OwnChange::Password { password_hash: "new".into(), end_sessions: true };
        assert!(apply_own_change(&user, end, NOW).ends_sessions);
        let profile = OwnChange::Profile {
            name: Some(Name::parse("Renamed").unwrap()),
            image: Some(None),
            username: None,
            display_username: None,
        };
        let changed = apply_own_change(&user, profile, NOW);
        assert_eq!((changed.user.name(), changed.user.image(), changed.ends_sessions), ("Renamed", None, false));
        assert_eq!(changed.user.password_hash(), user.password_hash());
    }

    #[test]
    fn the_last_active_administrator_cannot_delete_their_account() {
        let admin = account("a@example.com", "admin");
        assert_eq!(may_delete(&admin, 1), Err(DeleteUserError::LastAdmin));
        assert_eq!(may_delete(&admin, 2), Ok(()));
        assert_eq!(may_delete(&account("u@example.com", "user"), 1), Ok(()));
    }

    #[test]
    fn an_administrator_removes_others_but_never_themself_nor_the_last_administrator() {
        let (admin, other_admin, user) =
            (account("a@example.com", "admin"), account("b@example.com", "admin"), account("u@example.com", "user"));
        assert_eq!(may_remove(Some(&admin), &admin, 2), Err(DeleteUserError::SelfRemoval));
        assert_eq!(may_remove(Some(&admin), &user, 1), Ok(()));
        assert_eq!(may_remove(Some(&admin), &other_admin, 2), Ok(()));
        assert_eq!(may_remove(Some(&user), &admin, 2), Err(DeleteUserError::NotAdmin));
        assert_eq!(may_remove(None, &user, 2), Err(DeleteUserError::NotAdmin));
    }

    #[test]
    fn a_password_set_by_an_administrator_ends_the_sessions_and_is_audited_without_the_hash() {
        let (admin, target) = (account("a@example.com", "admin"), account("t@example.com", "user"));
        let set = UserChange { password_hash: Some("new hash".into()), ..change() };
        let changed = apply_change(&snapshot(&admin, 1, NO_ORGS), &target, set, NOW).unwrap();
        assert!(changed.ends_sessions);
        assert_eq!(changed.user.password_hash().as_phc(), "new hash");
        let diff: Vec<_> = changes(&target, &changed.user).collect();
        assert_eq!(diff.len(), 1);
        assert_eq!(diff[0].0, action::PASSWORD_SET);
        assert!(!diff[0].1.contains("new hash"));
    }

    #[test]
    fn the_audit_diff_names_each_change() {
        let before = account("t@example.com", "user");
        let org = OrgId::new();
        let after = User::from(UserFields {
            role: roles().parse("qa_manager").unwrap(),
            banned: true,
            ban_reason: Some("why".into()),
            organization_id: Some(org),
            ..before.fields()
        });
        let diff: Vec<_> = changes(&before, &after).collect();
        assert_eq!(
            diff,
            [
                (action::ROLE_CHANGED, "user -> qa_manager".to_owned()),
                (action::BANNED, "why".to_owned()),
                (action::ORGANIZATION_CHANGED, format!("none -> {org}")),
            ]
        );
        assert_eq!(changes(&before, &before).count(), 0);
    }

    #[test]
    fn a_ban_with_an_end_stops_counting_then_and_is_lifted_by_housekeeping() {
        let (admin, target) = (account("a@example.com", "admin"), account("t@example.com", "user"));
        let end = Timestamp::from_millis(1_000);
        let ban = UserChange { banned: Some(true), ban_expires: Some(end), ..change() };
        let banned = apply_change(&snapshot(&admin, 1, NO_ORGS), &target, ban, NOW).unwrap().user;
        assert!(banned.is_banned_at(Timestamp::from_millis(999)));
        assert!(!banned.is_banned_at(end), "the ban ends at its end, not a moment later");
        assert_eq!(lift_expired_ban(&banned, Timestamp::from_millis(999)), None);
        let lifted = lift_expired_ban(&banned, end).unwrap();
        assert!(!lifted.banned && lifted.ban_expires().is_none() && lifted.ban_reason().is_none());
        let diff: Vec<_> = changes(&target, &banned).collect();
        assert_eq!(diff, [(action::BANNED, "until 1970-01-01T00:00:01.000Z".to_owned())]);

        let forever = UserChange { banned: Some(true), ..change() };
        let banned = apply_change(&snapshot(&admin, 1, NO_ORGS), &banned, forever, NOW).unwrap().user;
        assert_eq!(banned.ban_expires(), None, "a new ban without an end replaces the end");
        assert_eq!(lift_expired_ban(&banned, Timestamp::from_millis(i64::MAX)), None);
        let unban = UserChange { banned: Some(false), ban_expires: Some(end), ..change() };
        assert_eq!(apply_change(&snapshot(&admin, 1, NO_ORGS), &banned, unban, NOW).unwrap().user.ban_expires(), None);
    }

    #[test]
    fn an_administrator_edits_the_profile_and_the_audit_names_the_fields() {
        let (admin, target) = (account("a@example.com", "admin"), account("t@example.com", "user"));
        let edit = UserChange {
            name: Some(Name::parse("New Name").unwrap()),
            image: Some(None),
            email_verified: Some(true),
            ..change()
        };
        let changed = apply_change(&snapshot(&admin, 1, NO_ORGS), &target, edit, NOW).unwrap();
        assert!(!changed.ends_sessions);
        assert_eq!(changed.user.name(), "New Name");
        let diff: Vec<_> = changes(&target, &changed.user).collect();
        assert_eq!(diff, [(action::PROFILE_UPDATED, "name, e-mail marked verified".to_owned())]);
    }

    fn identity(email: &str, email_verified: bool, trusted: bool, sign_up_unverified: bool) -> ExternalIdentity {
        ExternalIdentity {
            provider: "idp".into(),
            subject: "s".into(),
            email: Email::parse(email).unwrap(),
            email_verified,
            name: Name::parse("Someone").unwrap(),
            image: None,
            trusted,
            sign_up_unverified,
            sealed_tokens: None,
            sso: None,
        }
    }

    #[test]
    fn an_identity_joins_an_account_by_address_only_when_both_sides_proved_it() {
        let unproven = account("o@example.com", "user");
        let proven = User::from(UserFields { email_verified: true, ..unproven.fields() });
        let good = identity("o@example.com", true, true, false);
        assert_eq!(implicit_link(&proven, &good), Ok(()));
        assert_eq!(implicit_link(&unproven, &good), Err(ExternalError::NotLinked), "the local address unproven");
        for (verified, trusted) in [(false, true), (true, false), (false, false)] {
            let id = identity("o@example.com", verified, trusted, false);
            assert_eq!(implicit_link(&proven, &id), Err(ExternalError::NotLinked), "{verified} {trusted}");
        }
    }

    #[test]
    fn an_explicit_link_needs_a_verified_address_or_a_trusted_provider_and_the_same_address() {
        let owner = account("o@example.com", "user");
        assert_eq!(explicit_link(&owner, &identity("o@example.com", true, false, false)), Ok(()));
        assert_eq!(explicit_link(&owner, &identity("o@example.com", false, true, false)), Ok(()));
        let neither = identity("o@example.com", false, false, false);
        assert_eq!(explicit_link(&owner, &neither), Err(ExternalError::LinkingNotAllowed));
        let other = identity("x@example.com", true, true, false);
        assert_eq!(explicit_link(&owner, &other), Err(ExternalError::EmailMismatch));
    }

    #[test]
    fn an_unverified_address_makes_no_account_unless_the_provider_allows_it() {
        assert_eq!(external_sign_up(&identity("n@example.com", true, false, false)), Ok(()));
        let unverified = identity("n@example.com", false, true, false);
        assert_eq!(external_sign_up(&unverified), Err(ExternalError::UnverifiedEmail));
        assert_eq!(external_sign_up(&identity("n@example.com", false, false, true)), Ok(()));
    }
}
