//! The users actor's sign-in links and mailed codes ([`crate::actors::users::way_in`]). A link or a code is a
//! one-time token; using one is a single message: the check, the count of a wrong code, and every change it
//! implies are staged together, so parallel guesses cannot pass the limit and nothing is half done.

use std::sync::Arc;

use super::{StartAnswer, State, UsersActor, put};
use crate::actors::Unavailable;
use crate::actors::overlay::Refusal;
use crate::actors::sessions::{Client, StartWith};
use crate::actors::users::rules::{self, Changed};
use crate::actors::users::way_in::{CodeUse, CodeUsed, EmailCodeError, LinkError, WayInMsg, WayInPassed};
use crate::actors::users::{IssueError, OwnChange};
use crate::domain::{
    CodePurpose, Email, OneTimeToken, Role, Timestamp, TokenHash, TokenKind, User, UserFields, UserId, action,
    requester,
};
use crate::mail::MailQueue;
use crate::store::{Conflict, StoreOp, audit, convert};

/// How a way in through the mailbox reached its account: the account as staged, whether it was made now, and the
/// ops that go with it.
struct Reached {
    user: Arc<User>,
    new_user: bool,
    ops: Vec<StoreOp>,
}

impl UsersActor {
    pub(super) fn way_in(&self, state: &mut State, msg: WayInMsg) {
        match msg {
            WayInMsg::SendLink { token, address, ttl, mail, sign_up, ip, reply } => {
                // Refused before the address is looked up: the refusal says nothing about which accounts exist.
                if self.mail.as_ref().is_some_and(MailQueue::is_full) {
                    let _ = reply.send(Err(IssueError::OutboxFull));
                    return;
                }
                let owner = self.email_owner(state, &address.email);
                let Some(user_id) = owner.or_else(|| sign_up.then(UserId::new)) else {
                    let detail = "sign-in link requested for an unknown e-mail (sign-up is off)".to_owned();
                    state.overlay.add([audit::entry(action::TOKEN_REQUESTED, None, None, &ip, detail)], reply, ());
                    return;
                };
                let now = Timestamp::now();
                // Each link lives on its own until used or expired (better-auth's): a newer one does not end it.
                let issued = OneTimeToken {
                    kind: TokenKind::MagicLink,
                    user_id,
                    created_at: now,
                    expires_at: now.plus(ttl),
                    requested_by: requester(&ip),
                    failures: 0,
                    code: None,
                    address: Some(Arc::new(address)),
                };
                let known = owner.map(Into::into);
                let detail = if owner.is_some() { "sign-in link" } else { "sign-in link for a new account" };
                let ops = [
                    StoreOp::PutToken(token, convert::token_record(&issued)),
                    StoreOp::PutOutbox(convert::mail_record(&mail)),
                    audit::entry(action::TOKEN_REQUESTED, owner, known, &ip, detail.to_owned()),
                ];
                state.tokens.insert(token, Some(Arc::new(issued)));
                state.mails.push(mail);
                state.overlay.add(ops, reply, ());
            }
            WayInMsg::UseLink { token, sign_up, role, client, reply } => {
                let now = Timestamp::now();
                let link = self
                    .live_token(state, &token)
                    .filter(|t| t.kind == TokenKind::MagicLink && !t.is_expired(now))
                    .and_then(|t| t.address.clone().map(|a| (t.user_id, a)));
                let Some((issued_for, address)) = link else {
                    let _ = reply.send(Err(LinkError::InvalidToken));
                    return;
                };
                // Used up whatever follows, as better-auth consumes it before it looks for the account.
                state.tokens.insert(token, None);
                let spent = StoreOp::DeleteToken(token);
                let name = address.name.clone();
                let reached = self.reach(state, issued_for, &address.email, name, role, sign_up, &client.ip_address);
                let Some(mut reached) = reached else {
                    state.overlay.add_result([spent], reply, Err(LinkError::SignUpDisabled));
                    return;
                };
                reached.ops.push(spent);
                let id = Some(reached.user.id);
                let logged =
                    audit::entry(action::SIGN_IN_MAGIC_LINK, id, id.map(Into::into), &client.ip_address, "".into());
                reached.ops.push(logged);
                let taken =
                    |c: &Conflict| matches!(c, Conflict::EmailTaken(_)).then_some(LinkError::Unavailable(Unavailable));
                self.start_reached(state, reached, client, move |passed| {
                    let _ = reply.send(passed.map_err(|refusal| match refusal {
                        Refusal::Conflict(c) => taken(&c).unwrap_or(LinkError::Unavailable(Unavailable)),
                        Refusal::Unavailable => LinkError::Unavailable(Unavailable),
                    }));
                });
            }
            WayInMsg::SendCode { key, hash, email, purpose, ttl, mail, sign_up, ip, reply } => {
                if self.mail.as_ref().is_some_and(MailQueue::is_full) {
                    let _ = reply.send(Err(IssueError::OutboxFull));
                    return;
                }
                let owner = self.email_owner(state, &email);
                let new_account = (purpose == CodePurpose::SignIn && sign_up).then(UserId::new);
                let Some(user_id) = owner.or(new_account) else {
                    // Nothing is sent, and a code kept there before is dropped (better-auth's): the answer is the
                    // same as for a known address.
                    let mut ops = Vec::new();
                    if self.live_token(state, &key).is_some() {
                        state.tokens.insert(key, None);
                        ops.push(StoreOp::DeleteToken(key));
                    }
                    let detail = format!("{} code requested for an unknown e-mail", purpose.as_str());
                    ops.push(audit::entry(action::TOKEN_REQUESTED, None, None, &ip, detail));
                    state.overlay.add(ops, reply, ());
                    return;
                };
                let now = Timestamp::now();
                // One per purpose and address: this one replaces the one kept there (better-auth's latest wins).
                let issued = OneTimeToken {
                    kind: TokenKind::EmailCode(purpose),
                    user_id,
                    created_at: now,
                    expires_at: now.plus(ttl),
                    requested_by: requester(&ip),
                    failures: 0,
                    code: Some(hash),
                    address: None,
                };
                let detail = format!("{} code", purpose.as_str());
                let ops = [
                    StoreOp::PutToken(key, convert::token_record(&issued)),
                    StoreOp::PutOutbox(convert::mail_record(&mail)),
                    audit::entry(action::TOKEN_REQUESTED, owner, owner.map(Into::into), &ip, detail),
                ];
                state.tokens.insert(key, Some(Arc::new(issued)));
                state.mails.push(mail);
                state.overlay.add(ops, reply, ());
            }
            WayInMsg::UseCode { key, hash, email, purpose, allowed, then, ip, reply } => {
                match self.check_code(state, key, &hash, purpose, allowed) {
                    Err((e, ops)) if ops.is_empty() => drop(reply.send(Err(e))),
                    Err((e, ops)) => state.overlay.add_result(ops, reply, Err(e)),
                    Ok(issued_for) => self.use_code(state, key, issued_for, email, then, ip, reply),
                }
            }
        }
    }

    /// The live code under `key` for `purpose`, compared in constant time: right, the account it was issued for;
    /// wrong, the refusal and what it stages (one more wrong try; the code gone when expired or its tries used up).
    fn check_code(
        &self,
        state: &mut State,
        key: TokenHash,
        hash: &[u8; 32],
        purpose: CodePurpose,
        allowed: u32,
    ) -> Result<UserId, (EmailCodeError, Vec<StoreOp>)> {
        let Some(code) = self.live_token(state, &key).filter(|t| t.kind == TokenKind::EmailCode(purpose)) else {
            return Err((EmailCodeError::Invalid, Vec::new()));
        };
        let mut gone = |e| {
            state.tokens.insert(key, None);
            Err((e, vec![StoreOp::DeleteToken(key)]))
        };
        if code.is_expired(Timestamp::now()) {
            return gone(EmailCodeError::Expired);
        }
        if code.failures >= allowed {
            return gone(EmailCodeError::TooManyAttempts);
        }
        let right: bool = code.code.is_some_and(|kept| subtle::ConstantTimeEq::ct_eq(&kept[..], &hash[..]).into());
        if !right {
            let counted = OneTimeToken { failures: code.failures + 1, ..OneTimeToken::clone(&code) };
            let op = StoreOp::PutToken(key, convert::token_record(&counted));
            state.tokens.insert(key, Some(Arc::new(counted)));
            return Err((EmailCodeError::Invalid, vec![op]));
        }
        Ok(code.user_id)
    }

    /// A right code used for `then`: it is used up (but by a check), and what it is for is staged with it.
    #[allow(clippy::too_many_arguments)]
    fn use_code(
        &self,
        state: &mut State,
        key: TokenHash,
        issued_for: UserId,
        email: Email,
        then: CodeUse,
        ip: String,
        reply: ractor::RpcReplyPort<Result<CodeUsed, EmailCodeError>>,
    ) {
        let owner = self.email_owner(state, &email).and_then(|id| self.get(state, id));
        if let CodeUse::Check = then {
            // better-auth's "restore": a right check leaves the code for the call that uses it.
            let _ = reply.send(if owner.is_some() { Ok(CodeUsed::Checked) } else { Err(EmailCodeError::UserNotFound) });
            return;
        }
        state.tokens.insert(key, None);
        let spent = StoreOp::DeleteToken(key);
        match then {
            CodeUse::Check => unreachable!("answered above"),
            CodeUse::SignIn { name, image: _, role, sign_up, client } => {
                let Some(mut reached) = self.reach(state, issued_for, &email, name, role, sign_up, &ip) else {
                    // better-auth answers a sign-in code to an unknown address with sign-up off as a wrong code.
                    state.overlay.add_result([spent], reply, Err(EmailCodeError::Invalid));
                    return;
                };
                reached.ops.push(spent);
                let id = Some(reached.user.id);
                reached.ops.push(audit::entry(action::SIGN_IN_EMAIL_CODE, id, id.map(Into::into), &ip, "".into()));
                self.start_reached(state, reached, client, move |passed| {
                    let _ = reply
                        .send(passed.map(CodeUsed::SignedIn).map_err(|_| EmailCodeError::Unavailable(Unavailable)));
                });
            }
            CodeUse::VerifyEmail => {
                let Some(current) = owner else {
                    state.overlay.add_result([spent], reply, Err(EmailCodeError::UserNotFound));
                    return;
                };
                let now = Timestamp::now();
                let verified = User::from(UserFields { email_verified: true, updated_at: now, ..current.fields() });
                let user = self.stage(state, verified, false);
                let mut ops = vec![put(&user), spent];
                ops.extend(self.end_tokens(state, user.id, TokenKind::EmailVerification));
                let id = Some(user.id);
                ops.push(audit::entry(
                    action::EMAIL_VERIFIED,
                    id,
                    id.map(Into::into),
                    &ip,
                    "with a mailed code".into(),
                ));
                state.overlay.add(ops, reply, CodeUsed::Verified(user));
            }
            CodeUse::ResetPassword { password_hash } => {
                let Some(current) = owner else {
                    state.overlay.add_result([spent], reply, Err(EmailCodeError::UserNotFound));
                    return;
                };
                let proven_before = current.email_verified;
                let change = OwnChange::Password { password_hash, end_sessions: true };
                let Changed { user, ends_sessions } = rules::apply_own_change(&current, change, Timestamp::now());
                // The code reached the mailbox: the address is proven from now on.
                let user = User::from(UserFields { email_verified: true, ..user.fields() });
                let user = self.stage(state, user, ends_sessions);
                let mut ops = vec![put(&user), spent];
                ops.extend(self.end_password_bound(state, user.id));
                let id = Some(user.id);
                let detail = "password reset with a mailed code; every session ended".to_owned();
                ops.push(audit::entry(action::PASSWORD_RESET, id, id.map(Into::into), &ip, detail));
                if !proven_before {
                    ops.extend(self.end_unproven_links(state, &user, &ip, "a password reset with a mailed code"));
                }
                state.overlay.add(ops, reply, CodeUsed::Reset);
            }
        }
    }

    /// The account a way in through the mailbox of `email` signs in: the one with the address (its password and
    /// sessions ended first if the address was never proven, [`rules::prove_by_mailbox`]), or one made now with
    /// the id the link or code was issued for, when `sign_up`. `None`: no account, and sign-up is off.
    #[allow(clippy::too_many_arguments)]
    fn reach(
        &self,
        state: &mut State,
        issued_for: UserId,
        email: &Email,
        name: Option<crate::domain::Name>,
        role: Role,
        sign_up: bool,
        ip: &str,
    ) -> Option<Reached> {
        let now = Timestamp::now();
        if let Some(current) = self.email_owner(state, email).and_then(|id| self.get(state, id)) {
            let Some(Changed { user, ends_sessions }) = rules::prove_by_mailbox(&current, now) else {
                // Written unchanged, so that on PostgreSQL its guard lets one node, not two, use one link or code.
                let user = self.stage(state, User::clone(&current), false);
                return Some(Reached { ops: vec![put(&user)], user, new_user: false });
            };
            let user = self.stage(state, user, ends_sessions);
            let mut ops = vec![put(&user)];
            ops.extend(self.end_password_bound(state, user.id));
            let by = "a sign-in through the mailbox (the password and every session ended)";
            ops.extend(self.end_unproven_links(state, &user, ip, by));
            return Some(Reached { user, new_user: false, ops });
        }
        if !sign_up {
            return None;
        }
        let user = self.stage(state, rules::mailbox_sign_up(issued_for, email.clone(), name, role, now), false);
        let id = Some(user.id);
        let created = audit::entry(action::USER_CREATED, id, id.map(Into::into), ip, "through the mailbox".into());
        Some(Reached { ops: vec![put(&user), created], user, new_user: true })
    }

    /// Stages `reached`'s ops and starts `client`'s session in the same commit; `answer` gets the outcome.
    fn start_reached(
        &self,
        state: &mut State,
        reached: Reached,
        client: Client,
        answer: impl FnOnce(Result<WayInPassed, Refusal>) + Send + 'static,
    ) {
        let Reached { user, new_user, ops } = reached;
        state.overlay.add_unanswered(ops);
        let start = StartWith { user: user.id, remember_me: true, client };
        let answer: StartAnswer =
            Box::new(move |committed| answer(committed.map(|started| WayInPassed { user, new_user, started })));
        state.starting.push((start, answer));
    }
}
