//! The users actor's one-time token messages: issuing a mailed link, and using one to verify an e-mail address
//! or reset a password.

use std::sync::Arc;

use super::{State, UsersActor, put};
use crate::actors::users::rules::{self, Changed};
use crate::actors::users::tokens::TokenMsg;
use crate::actors::users::{IssueError, OwnChange, ResetError};
use crate::domain::{OneTimeToken, SessionToken, Timestamp, TokenKind, User, UserFields, action, requester};
use crate::mail::MailQueue;
use crate::store::{StoreOp, audit, convert};

impl UsersActor {
    /// One-time tokens: mailed links issued and used.
    pub(super) fn token(&self, state: &mut State, msg: TokenMsg) {
        match msg {
            TokenMsg::Issue { kind, email, ttl, compose, ip, reply } => {
                // Refused before the address is looked up: the refusal says nothing about which accounts exist.
                if self.mail.as_ref().is_some_and(MailQueue::is_full) {
                    let _ = reply.send(Err(IssueError::OutboxFull));
                    return;
                }
                let account = self.email_owner(state, &email).and_then(|id| self.get(state, id));
                let needed = |u: &User| kind != TokenKind::EmailVerification || !u.email_verified;
                let Some(user) = account.filter(|u| needed(u)) else {
                    let detail = format!("{} requested for an unknown or verified e-mail", kind_name(kind));
                    state.overlay.add([audit::entry(action::TOKEN_REQUESTED, None, None, &ip, detail)], reply, ());
                    return;
                };
                let token = SessionToken::generate();
                let hash = token.hash();
                let now = Timestamp::now();
                let requested_by = requester(&ip);
                let expires_at = now.plus(ttl);
                let issued = Arc::new(OneTimeToken {
                    kind,
                    user_id: user.id,
                    created_at: now,
                    expires_at,
                    requested_by,
                    failures: 0,
                    code: None,
                    address: None,
                });
                let mut ops = Vec::new();
                // A newer request invalidates the older link the same client asked for, and no other: whoever
                // asks from elsewhere cannot kill a link the account's owner already holds.
                if let Some(old) = self.token_asked_by(state, user.id, kind, requested_by) {
                    state.tokens.insert(old, None);
                    ops.push(StoreOp::DeleteToken(old));
                }
                let mail = compose(&user, &token);
                ops.push(StoreOp::PutToken(hash, convert::token_record(&issued)));
                ops.push(StoreOp::PutOutbox(convert::mail_record(&mail)));
                let id = Some(user.id);
                let detail = kind_name(kind).to_owned();
                ops.push(audit::entry(action::TOKEN_REQUESTED, id, id.map(Into::into), &ip, detail));
                state.tokens.insert(hash, Some(issued));
                state.mails.push(mail);
                state.overlay.add(ops, reply, ());
            }
            TokenMsg::VerifyEmail { token, ip, reply } => {
                let Some(user) = self.token_holder(state, &token, TokenKind::EmailVerification) else {
                    let _ = reply.send(Err(ResetError::InvalidToken));
                    return;
                };
                let verified =
                    User::from(UserFields { email_verified: true, updated_at: Timestamp::now(), ..user.fields() });
                let user = self.stage(state, verified, false);
                let mut ops = vec![put(&user)];
                ops.extend(self.end_tokens(state, user.id, TokenKind::EmailVerification));
                let id = Some(user.id);
                ops.push(audit::entry(action::EMAIL_VERIFIED, id, id.map(Into::into), &ip, String::new()));
                state.overlay.add(ops, reply, ());
            }
            TokenMsg::ResetPassword { token, password_hash, ip, reply } => {
                let Some(user) = self.token_holder(state, &token, TokenKind::PasswordReset) else {
                    let _ = reply.send(Err(ResetError::InvalidToken));
                    return;
                };
                let proven_before = user.email_verified;
                let change = OwnChange::Password { password_hash, end_sessions: true };
                let Changed { user, ends_sessions } = rules::apply_own_change(&user, change, Timestamp::now());
                // The link reached the mailbox: the address is proven from now on (and so may be linked to).
                let user = User::from(UserFields { email_verified: true, ..user.fields() });
                let user = self.stage(state, user, ends_sessions);
                let mut ops = vec![put(&user)];
                // This link and every other reset link of the account (other clients may have asked for some).
                ops.extend(self.end_password_bound(state, user.id));
                let id = Some(user.id);
                let detail = "password reset with a mailed link; every session ended".to_owned();
                ops.push(audit::entry(action::PASSWORD_RESET, id, id.map(Into::into), &ip, detail));
                if !proven_before {
                    ops.extend(self.end_unproven_links(state, &user, &ip, "a password reset with a mailed link"));
                }
                state.overlay.add(ops, reply, ());
            }
        }
    }
}

fn kind_name(kind: TokenKind) -> &'static str {
    match kind {
        TokenKind::PasswordReset => "password reset",
        TokenKind::EmailVerification => "e-mail verification",
        TokenKind::TwoFactorChallenge { .. } => "two-factor sign-in",
        TokenKind::TrustedDevice => "trusted device",
        TokenKind::TwoFactorOtp => "mailed second-factor code",
        TokenKind::MagicLink => "sign-in link",
        TokenKind::EmailCode(_) => "mailed code",
    }
}
