//! The users actor's linked-account messages: signing an identity at another provider in (or linking it), and
//! removing a way into an account.

use std::sync::Arc;

use super::{ExternalGuard, StartAnswer, State, UsersActor, put};
use crate::actors::Unavailable;
use crate::actors::linked::LinkedAccount;
use crate::actors::overlay::Refusal;
use crate::actors::sessions::StartWith;
use crate::actors::users::linked::LinkedMsg;
use crate::actors::users::rules;
use crate::actors::users::{
    ExternalError, ExternalIdentity, ExternalOutcome, ExternalSession, ExternalSignIn, ExternalStart, NewUser,
    SsoRoles, UnlinkError,
};
use crate::domain::{MemberRoles, Membership, Timestamp, TokenKind, User, UserFields, UserId, action};
use crate::store::{Conflict, StoreOp, audit, convert};

impl UsersActor {
    /// Linked accounts: an identity at another provider signed in or linked, a way in removed.
    pub(super) fn linked(&self, state: &mut State, msg: LinkedMsg) {
        match msg {
            LinkedMsg::External { identity, link_to, role, start, ip, reply } => {
                let asserted = identity.sso.as_ref().is_some_and(|sso| sso.multi_factor.is_some());
                match self.external(state, *identity, link_to, role, &ip) {
                    Ok((mut ops, outcome, guard)) => {
                        let start =
                            start.and_then(|s| self.external_start(state, &outcome, link_to, s, asserted, &mut ops));
                        match start {
                            None => {
                                let signed_in = ExternalSignIn { outcome, session: None };
                                state.overlay.add_guarded(ops, reply, Ok(signed_in), guard)
                            }
                            // The session starts in this batch's commit: answered with it, or with what a
                            // conflict means to this sign-in (as without a session).
                            Some((with, device_renewed)) => {
                                state.overlay.add_unanswered(ops);
                                let answer: StartAnswer = Box::new(move |committed| {
                                    let answer = match committed {
                                        Ok(started) => {
                                            let session = Some(ExternalSession { started, device_renewed });
                                            Ok(ExternalSignIn { outcome, session })
                                        }
                                        Err(Refusal::Conflict(c)) => Err(guard(&c).unwrap_or(Unavailable.into())),
                                        Err(Refusal::Unavailable) => Err(Unavailable.into()),
                                    };
                                    let _ = reply.send(answer);
                                });
                                state.starting.push((with, answer));
                            }
                        }
                    }
                    Err(e) => drop(reply.send(Err(e))),
                }
            }
            LinkedMsg::Unlink { user, account, by, ip, reply } => match self.unlink(state, user, account, by, &ip) {
                Ok(ops) => state.overlay.add(ops, reply, ()),
                Err(e) => drop(reply.send(Err(e))),
            },
        }
    }

    /// The rules of [`LinkedMsg::External`]: the ops to write, the answer once durable, and what a conflict on
    /// several nodes means.
    fn external(
        &self,
        state: &mut State,
        identity: ExternalIdentity,
        link_to: Option<UserId>,
        role: crate::domain::Role,
        ip: &str,
    ) -> Result<(Vec<StoreOp>, ExternalOutcome, ExternalGuard), ExternalError> {
        let now = Timestamp::now();
        let linked_elsewhere = {
            let (p, s) = (identity.provider.clone(), identity.subject.clone());
            move |c: &Conflict| match c {
                Conflict::AccountTaken { provider, subject } if *provider == p && *subject == s => {
                    Some(ExternalError::LinkedElsewhere)
                }
                Conflict::EmailTaken(_) => Some(ExternalError::NotLinked),
                _ => None,
            }
        };
        let guard: ExternalGuard = Box::new(linked_elsewhere);
        if let Some(existing) = self.identity_owner(state, &identity.provider, &identity.subject) {
            let user = self.get(state, existing.user_id).ok_or(ExternalError::Unavailable(Unavailable))?;
            if link_to.is_some_and(|asking| asking != user.id) {
                return Err(ExternalError::LinkedElsewhere);
            }
            // The newest tokens replace the ones kept, when they are kept.
            let mut ops = Vec::new();
            if let Some(sealed) = identity.sealed_tokens.clone() {
                let refreshed =
                    Arc::new(LinkedAccount { sealed_tokens: Some(sealed), updated_at: now, ..(*existing).clone() });
                state.accounts.insert(refreshed.id, Some(Arc::clone(&refreshed)));
                ops.push(StoreOp::PutAccount(refreshed.record()));
            }
            if link_to.is_some() {
                return Ok((ops, ExternalOutcome::Linked(user), guard));
            }
            ops.push(signed_in_audit(&identity, &user, ip));
            ops.extend(self.sso_join(state, &identity, &user, ip));
            return Ok((ops, ExternalOutcome::Existing(user), guard));
        }
        let link = |state: &mut State, user: &User| {
            let account = Arc::new(LinkedAccount {
                id: *uuid::Uuid::now_v7().as_bytes(),
                user_id: user.id,
                provider: identity.provider.clone(),
                subject: identity.subject.clone(),
                email: identity.email.as_str().to_owned(),
                created_at: now,
                updated_at: now,
                sealed_tokens: identity.sealed_tokens.clone(),
            });
            state.accounts.insert(account.id, Some(Arc::clone(&account)));
            let detail = format!("{} ({})", identity.provider, identity.email.as_str());
            let logged = audit::entry(action::ACCOUNT_LINKED, Some(user.id), Some(user.id.into()), ip, detail);
            vec![StoreOp::PutAccount(account.record()), logged]
        };
        if let Some(asking) = link_to {
            let user = self.get(state, asking).ok_or(ExternalError::UserGone)?;
            rules::explicit_link(&user, &identity)?;
            let ops = link(state, &user);
            return Ok((ops, ExternalOutcome::Linked(user), guard));
        }
        if let Some(owner) = self.email_owner(state, &identity.email) {
            let user = self.get(state, owner).ok_or(ExternalError::Unavailable(Unavailable))?;
            // No silent takeover, of the account or by whoever signed it up with someone else's address.
            rules::implicit_link(&user, &identity)?;
            let mut ops = link(state, &user);
            ops.push(signed_in_audit(&identity, &user, ip));
            ops.extend(self.sso_join(state, &identity, &user, ip));
            return Ok((ops, ExternalOutcome::Linked(user), guard));
        }
        rules::external_sign_up(&identity)?;
        let new = NewUser {
            name: identity.name.clone(),
            email: identity.email.clone(),
            image: identity.image.clone(),
            role,
            // No password: this account signs in through the provider, or sets one with a reset link. An empty
            // hash verifies nothing (hashing::Hasher::verify) and shows no "credential" account.
            password_hash: String::new(),
            username: None,
            display_username: None,
        };
        let made = rules::new_account(new, now);
        // An organization's single sign-on makes the account its member: that organization is its primary one, as
        // for an account a directory provisions (SCIM).
        let organization_id = match identity.sso.as_ref().and_then(|sso| sso.join.as_ref()) {
            Some((org, _)) if self.indexes.orgs.get(*org).is_some() => Some(*org),
            _ => made.organization_id,
        };
        let created =
            User::from(UserFields { email_verified: identity.email_verified, organization_id, ..made.fields() });
        let user = self.stage(state, created, false);
        let detail = match identity.sso {
            Some(_) => format!("through single sign-on {}", identity.provider),
            None => format!("through {}", identity.provider),
        };
        let mut ops =
            vec![put(&user), audit::entry(action::USER_CREATED, Some(user.id), Some(user.id.into()), ip, detail)];
        ops.extend(link(state, &user));
        if identity.sso.is_some() {
            ops.push(signed_in_audit(&identity, &user, ip));
            ops.extend(self.sso_join(state, &identity, &user, ip));
        }
        Ok((ops, ExternalOutcome::Created(user), guard))
    }

    /// An organization's single sign-on: `user` joins the provider's organization with its default role (or the
    /// roles its groups map to), in the sign-in's commit (audited `member.added`, which raises its webhook event).
    /// Not when banned (a refused sign-in joins nothing), or when the organization is gone. Already a member: the
    /// roles change only with a role mapping ([`Self::sso_roles`]); without one a second sign-in changes nothing,
    /// and never lowers or raises a role given since.
    fn sso_join(&self, state: &mut State, identity: &ExternalIdentity, user: &User, ip: &str) -> Vec<StoreOp> {
        let Some(sso) = identity.sso.as_ref() else { return Vec::new() };
        let Some((org, roles)) = sso.join.clone() else { return Vec::new() };
        let now = Timestamp::now();
        let pending = state.members.iter().any(|(o, u, m)| *o == org && *u == user.id && m.is_some());
        if pending || user.is_banned_at(now) || self.indexes.orgs.get(org).is_none() {
            return Vec::new();
        }
        if let Some(member) = self.indexes.members.get(org, user.id) {
            return self.sso_roles(state, &member, roles, sso.roles, &identity.provider, ip);
        }
        let member = Arc::new(Membership::new(org, user.id, roles.clone(), now));
        state.members.push((org, user.id, Some(Arc::clone(&member))));
        state.flush_now = true;
        let detail = format!("{org} as {roles}, through single sign-on {}", identity.provider);
        vec![
            StoreOp::PutMember(convert::membership_record(&member)),
            audit::entry(action::MEMBER_ADDED, Some(user.id), Some(user.id.into()), ip, detail),
        ]
    }

    /// A member's roles at a sign-in through a provider with a role mapping: the mapped ones replace them, audited
    /// `member.role_changed` (its webhook event) in the sign-in's commit, the member as actor and the provider
    /// named. Kept as they are when nothing changes, without a mapping, when the member is an owner and the
    /// mapping grants no ownership, or when it would take the organization's last owner (checked again by the
    /// shared database on several nodes, [`StoreOp::ExpectOwner`]).
    fn sso_roles(
        &self,
        state: &mut State,
        member: &Membership,
        roles: MemberRoles,
        from: SsoRoles,
        provider: &str,
        ip: &str,
    ) -> Vec<StoreOp> {
        let SsoRoles::Mapped { grants_owner } = from else { return Vec::new() };
        let demotes_owner = member.roles.is_owner() && !roles.is_owner();
        if roles.same_as(&member.roles)
            || (demotes_owner && (!grants_owner || self.indexes.members.owners(member.org) <= 1))
        {
            return Vec::new();
        }
        let detail = format!("{}: {} -> {}, by single sign-on {provider}", member.org, member.roles, roles);
        let updated = Arc::new(Membership { roles, ..member.clone() });
        state.members.push((member.org, member.user, Some(Arc::clone(&updated))));
        state.flush_now = true;
        let mut ops = vec![StoreOp::PutMember(convert::membership_record(&updated))];
        if demotes_owner {
            ops.push(StoreOp::ExpectOwner(member.org.to_bytes()));
        }
        ops.push(audit::entry(action::MEMBER_ROLE_CHANGED, Some(member.user), Some(member.user.into()), ip, detail));
        ops
    }

    /// Whether an external sign-in's session starts in the batch's commit (`Some`, and whether through the
    /// browser's trusted device, renewed by ops added to `ops`), or is left to the caller: a link; an address not
    /// verified under `require_verification`; an account with a second factor, banned (refused before any
    /// challenge, as after a password) or without a live trusted device of its own in this browser. A banned
    /// account without a second factor is refused by the session's start itself, recorded in the same commit.
    /// `multi_factor`: the provider asserted a multi-factor authentication, which stands in for the second factor
    /// (the session starts here, as for an account without one, its trusted device left as it is).
    fn external_start(
        &self,
        state: &mut State,
        outcome: &ExternalOutcome,
        link_to: Option<UserId>,
        start: ExternalStart,
        multi_factor: bool,
        ops: &mut Vec<StoreOp>,
    ) -> Option<(StartWith, bool)> {
        if link_to.is_some() {
            return None;
        }
        let (ExternalOutcome::Existing(user) | ExternalOutcome::Linked(user) | ExternalOutcome::Created(user)) =
            outcome;
        if start.verified_only && !user.email_verified {
            return None;
        }
        if multi_factor {
            return Some((StartWith { user: user.id, remember_me: true, client: start.client }, false));
        }
        if !user.has_second_factor() && start.factor_roles.iter().any(|r| r == user.role.as_str()) {
            return None;
        }
        let mut device_renewed = false;
        if user.has_second_factor() {
            if user.is_banned_at(Timestamp::now()) {
                return None;
            }
            let (old, next) = start.device?;
            ops.extend(self.renew_device(state, old, next, Some(user.id))?);
            device_renewed = true;
        }
        Some((StartWith { user: user.id, remember_me: true, client: start.client }, device_renewed))
    }

    /// What a password reset through a mailed link does to an account whose address was not proven until then:
    /// the address is proven now (audited here; its verification links are spent), and every identity linked to
    /// the account ends, each audited. Whoever held the address before its owner (an account made from an address
    /// a provider did not verify, or an identity the squatter linked) must not keep a way in through the owner's
    /// recovery. Which identities were linked while the address was unproven cannot be told apart from later ones
    /// (no record says when it was proven), so all of them end; the owner links hers again once signed in.
    /// `by` names what proved it, for the audit log ("a password reset with a mailed link").
    pub(super) fn end_unproven_links(&self, state: &mut State, user: &User, ip: &str, by: &str) -> Vec<StoreOp> {
        let id = Some(user.id);
        let mut ops = self.end_tokens(state, user.id, TokenKind::EmailVerification);
        let detail = format!("proven by {by}");
        ops.push(audit::entry(action::EMAIL_VERIFIED, id, id.map(Into::into), ip, detail));
        for account in self.accounts_of(state, user.id) {
            state.accounts.insert(account.id, None);
            ops.push(StoreOp::DeleteAccount { id: account.id, user: user.id.to_bytes() });
            let detail = format!(
                "{} ({}): linked while the address was unproven, ended by {by}",
                account.provider, account.email
            );
            ops.push(audit::entry(action::ACCOUNT_UNLINKED, id, id.map(Into::into), ip, detail));
        }
        ops
    }

    /// The rules of [`LinkedMsg::Unlink`].
    fn unlink(
        &self,
        state: &mut State,
        user: UserId,
        account: Option<[u8; 16]>,
        by: UserId,
        ip: &str,
    ) -> Result<Vec<StoreOp>, UnlinkError> {
        let current = self.get(state, user).ok_or(UnlinkError::NotFound)?;
        let linked = self.accounts_of(state, user);
        let has_password = !current.password_hash().to_string().is_empty();
        let ways_in = linked.len() + usize::from(has_password);
        let removed = match account {
            Some(id) => Some(linked.iter().find(|a| a.id == id).cloned().ok_or(UnlinkError::NotFound)?),
            None if has_password => None,
            None => return Err(UnlinkError::NotFound),
        };
        if ways_in <= 1 {
            return Err(UnlinkError::LastWayIn);
        }
        Ok(match removed {
            Some(a) => {
                state.accounts.insert(a.id, None);
                let logged =
                    audit::entry(action::ACCOUNT_UNLINKED, Some(by), Some(user.into()), ip, a.provider.clone());
                vec![StoreOp::DeleteAccount { id: a.id, user: user.to_bytes() }, logged]
            }
            None => {
                let changed = User::from(UserFields {
                    password_hash: "".into(),
                    updated_at: Timestamp::now(),
                    ..current.fields()
                });
                let changed = self.stage(state, changed, false);
                let logged =
                    audit::entry(action::ACCOUNT_UNLINKED, Some(by), Some(user.into()), ip, "credential".into());
                vec![put(&changed), logged]
            }
        })
    }
}

/// The audit entry of an external sign-in: through an organization's single sign-on, or another provider.
fn signed_in_audit(identity: &ExternalIdentity, user: &User, ip: &str) -> StoreOp {
    let action = if identity.sso.is_some() { action::SIGN_IN_SSO } else { action::SIGN_IN_PROVIDER };
    let detail = match identity.sso.as_ref().and_then(|sso| sso.multi_factor.as_ref()) {
        Some(asserted) => {
            format!("{}: multi-factor asserted by the provider ({})", identity.provider, asserted.as_str())
        }
        None => identity.provider.clone(),
    };
    audit::entry(action, Some(user.id), Some(user.id.into()), ip, detail)
}
