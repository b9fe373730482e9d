//! The users actor's second-factor messages ([`crate::actors::users::second_factor`]): the factor is part of the
//! account, so each change is staged like any other change to it (one writer, in message order; on PostgreSQL the
//! record is guarded like every account write, so two nodes cannot both accept one code).

use std::sync::Arc;

use super::{StartAnswer, State, UsersActor, put};
use crate::actors::Unavailable;
use crate::actors::sessions::StartWith;
use crate::actors::users::second_factor::{CodeError, FactorChange, FactorError, FactorMsg, PassError, Passed, Proof};
use crate::domain::two_factor::{CHALLENGE_ATTEMPTS, CHALLENGE_TTL, OTP_ATTEMPTS, TRUSTED_DEVICE_TTL};
use crate::domain::{OneTimeToken, Timestamp, TokenHash, TokenKind, TwoFactor, User, UserFields, UserId, action};
use crate::store::{StoreOp, audit, convert};

/// A challenge passed, before its commit: the account as written and whether its session is remembered.
type Passing = (Arc<User>, bool);

impl UsersActor {
    pub(super) fn factor(&self, state: &mut State, msg: FactorMsg) {
        match msg {
            FactorMsg::Change { user, by, change, ip, reply } => match self.change_factor(state, user, by, change, &ip)
            {
                Ok((user, ops)) => state.overlay.add(ops, reply, user),
                Err(e) => drop(reply.send(Err(e))),
            },
            FactorMsg::Challenge { user, remember_me, token, rehash, reply } => {
                let challenge = self.cookie_token(TokenKind::TwoFactorChallenge { remember_me }, user, CHALLENGE_TTL);
                let mut ops = vec![StoreOp::PutToken(token, convert::token_record(&challenge))];
                state.tokens.insert(token, Some(Arc::new(challenge)));
                // Not the hash that was verified any more (a password change won the race): leave it.
                if let Some((from, to)) = rehash
                    && let Some(current) = self.get(state, user).filter(|u| u.password_hash().as_phc() == from.as_str())
                {
                    let rehashed = User::from(UserFields { password_hash: to.into(), ..current.fields() });
                    ops.push(put(&self.stage(state, rehashed, false)));
                }
                state.overlay.add(ops, reply, ());
            }
            FactorMsg::Pass { challenge, proof, trust, client, reply } => {
                // The check and the count of its failure are one message: a challenge's attempts are taken in
                // message order, so parallel wrong codes cannot all be checked before the first is counted.
                match self.pass(state, challenge, proof, trust, &client.ip_address) {
                    // The session starts in the commit that ends the challenge (as a sign-in upgrading its
                    // password's hash does): both are durable or neither is, so a failed commit leaves the
                    // challenge for the next try rather than used up without a session.
                    Ok(((user, remember_me), ops)) => {
                        state.overlay.add_unanswered(ops);
                        let start = StartWith { user: user.id, remember_me, client };
                        let answer: StartAnswer = Box::new(move |committed| {
                            let passed = committed.map(|started| Passed { user, remember_me, started });
                            let _ = reply.send(passed.map_err(|_| PassError::Unavailable(Unavailable)));
                        });
                        state.starting.push((start, answer));
                    }
                    Err((e, ops)) if ops.is_empty() => drop(reply.send(Err(e))),
                    Err((e, ops)) => state.overlay.add_result(ops, reply, Err(e)),
                }
            }
            FactorMsg::Failed { user, ip, reply } => {
                let detail = "wrong authenticator code for a signed-in session".to_owned();
                let ops = [audit::entry(action::SECOND_FACTOR_FAILED, Some(user), Some(user.into()), &ip, detail)];
                state.overlay.add(ops, reply, ());
            }
            FactorMsg::SendCode { key, token, mail, ip, reply } => {
                if self.mail.as_ref().is_some_and(crate::mail::MailQueue::is_full) {
                    let _ = reply.send(Err(crate::actors::users::IssueError::OutboxFull));
                    return;
                }
                let user = token.user_id;
                let ops = [
                    StoreOp::PutToken(key, convert::token_record(&token)),
                    StoreOp::PutOutbox(convert::mail_record(&mail)),
                    audit::entry(action::TWO_FACTOR_CODE_MAILED, Some(user), Some(user.into()), &ip, String::new()),
                ];
                state.tokens.insert(key, Some(Arc::new(token)));
                state.mails.push(mail);
                state.overlay.add(ops, reply, ());
            }
            FactorMsg::UseCode { user, key, hash, ip, reply } => {
                let Some(current) = self.get(state, user) else {
                    let _ = reply.send(Err(CodeError::AccountGone));
                    return;
                };
                if !self.mailed_code_matches(state, &current, &key, &hash) {
                    // Counted here, in the message that checked it: the code's five hold under any concurrency.
                    let mut ops = self.count_mailed_failure(state, &key).into_iter().collect::<Vec<_>>();
                    let detail = "wrong mailed code for a signed-in session".to_owned();
                    ops.push(audit::entry(action::SECOND_FACTOR_FAILED, Some(user), Some(user.into()), &ip, detail));
                    state.overlay.add_result(ops, reply, Err(CodeError::Wrong));
                    return;
                }
                // The account is written (unchanged) so that its guard on PostgreSQL lets one node, not two, use
                // the code; the code goes with it.
                let user = self.stage(state, User::clone(&current), false);
                state.tokens.insert(key, None);
                let id = Some(user.id);
                let detail = "mailed code accepted for a signed-in session".to_owned();
                let ops = [
                    put(&user),
                    StoreOp::DeleteToken(key),
                    audit::entry(action::SECOND_FACTOR_PASSED, id, id.map(Into::into), &ip, detail),
                ];
                state.overlay.add(ops, reply, ());
            }
            FactorMsg::Rotate { old, next, reply } => match self.renew_device(state, old, next, None) {
                Some(ops) => state.overlay.add(ops, reply, ()),
                None => drop(reply.send(Ok(()))),
            },
        }
    }

    fn change_factor(
        &self,
        state: &mut State,
        id: UserId,
        by: UserId,
        change: FactorChange,
        ip: &str,
    ) -> Result<(Arc<User>, Vec<StoreOp>), FactorError> {
        let current = self.get(state, id).ok_or(FactorError::UserNotFound)?;
        let factor = current.two_factor();
        let now = Timestamp::now();
        let mut ends_sessions = false;
        let mut ends_devices = false;
        let (next, what, detail): (Option<TwoFactor>, &str, &str) = match change {
            FactorChange::Enrol { sealed_secret, backup_codes } => {
                if factor.is_some_and(|f| f.enabled) {
                    return Err(FactorError::AlreadyEnabled);
                }
                let enrolling = TwoFactor { sealed_secret, enabled: false, last_step: 0, backup_codes };
                (Some(enrolling), action::TWO_FACTOR_ENROLMENT, "authenticator enrolment started")
            }
            FactorChange::Confirm { step } => {
                let f = factor.ok_or(FactorError::NotEnrolled)?;
                if step <= f.last_step {
                    return Err(FactorError::Replayed);
                }
                let what = if f.enabled { None } else { Some(action::TWO_FACTOR_ENABLED) };
                let on = TwoFactor { enabled: true, last_step: step, ..f.clone() };
                match what {
                    Some(what) => (Some(on), what, "authenticator confirmed; second factor on"),
                    // A code checked again with the factor already on: only the step moves (no audit row).
                    None => (Some(on), "", ""),
                }
            }
            FactorChange::NewBackupCodes { backup_codes } => {
                let f = factor.filter(|f| f.enabled).ok_or(FactorError::NotEnabled)?;
                let renewed = TwoFactor { backup_codes, ..f.clone() };
                (Some(renewed), action::TWO_FACTOR_BACKUP_CODES, "new backup codes; the old ones no longer work")
            }
            FactorChange::Disable => {
                factor.ok_or(FactorError::NotEnabled)?;
                ends_devices = true;
                (None, action::TWO_FACTOR_DISABLED, "second factor turned off; trusted devices ended")
            }
            FactorChange::Reset { by } => {
                if !self.get(state, by).is_some_and(|a| a.is_active_admin()) {
                    return Err(FactorError::NotAdmin);
                }
                ends_devices = true;
                ends_sessions = true;
                (
                    None,
                    action::TWO_FACTOR_RESET,
                    "second factor reset by an administrator; sessions and trusted devices ended",
                )
            }
        };
        let user = User::from(UserFields { two_factor: next.map(Arc::new), updated_at: now, ..current.fields() });
        let user = self.stage(state, user, ends_sessions);
        let mut ops = vec![put(&user)];
        if ends_devices {
            ops.extend(self.end_tokens(state, id, TokenKind::TrustedDevice));
            ops.extend(self.end_tokens(state, id, TokenKind::TwoFactorChallenge { remember_me: true }));
            ops.extend(self.end_tokens(state, id, TokenKind::TwoFactorChallenge { remember_me: false }));
            ops.extend(self.end_tokens(state, id, TokenKind::TwoFactorOtp));
        }
        if !what.is_empty() {
            ops.push(audit::entry(what, Some(by), Some(id.into()), ip, detail.into()));
        }
        Ok((user, ops))
    }

    /// Checks `proof` against the live challenge and, in the same message, either passes it (the challenge ends,
    /// the proof is used up) or counts the failure against it (at [`CHALLENGE_ATTEMPTS`] it ends) and against the
    /// mailed code tried, audited. A refusal's ops (the count, the row) are committed before it is answered.
    fn pass(
        &self,
        state: &mut State,
        challenge: TokenHash,
        proof: Proof,
        trust: Option<TokenHash>,
        ip: &str,
    ) -> Result<(Passing, Vec<StoreOp>), (PassError, Vec<StoreOp>)> {
        let plain = |e| (e, Vec::new());
        // A challenge with no attempt left is deleted at its last failure: live means one is left for this check.
        let pending = self
            .live_token(state, &challenge)
            .filter(|t| !t.is_expired(Timestamp::now()) && t.failures < CHALLENGE_ATTEMPTS)
            .ok_or(plain(PassError::InvalidChallenge))?;
        let TokenKind::TwoFactorChallenge { remember_me } = pending.kind else {
            return Err(plain(PassError::InvalidChallenge));
        };
        let current = self.get(state, pending.user_id).ok_or(plain(PassError::InvalidChallenge))?;
        let factor = current.two_factor().filter(|f| f.enabled).ok_or(plain(PassError::NotEnabled))?;
        let mut mailed = None;
        let accepted = match proof {
            Proof::Totp { step: Some(step) } if step > factor.last_step => {
                Some((TwoFactor { last_step: step, ..factor.clone() }, "authenticator code"))
            }
            Proof::Totp { .. } => None,
            Proof::BackupCode { hash } => {
                let left: Box<[[u8; 32]]> = factor.backup_codes.iter().filter(|h| **h != hash).copied().collect();
                (left.len() < factor.backup_codes.len())
                    .then(|| (TwoFactor { backup_codes: left, ..factor.clone() }, "backup code (used up)"))
            }
            Proof::MailedCode { key, hash } => {
                mailed = Some(key);
                self.mailed_code_matches(state, &current, &key, &hash).then(|| (factor.clone(), "mailed code"))
            }
        };
        let Some((used, what)) = accepted else {
            return Err(self.count_failure(state, challenge, &pending, mailed, current.id, ip));
        };
        if let Some(key) = mailed {
            state.tokens.insert(key, None);
        }
        let user = User::from(UserFields { two_factor: Some(Arc::new(used)), ..current.fields() });
        let user = self.stage(state, user, false);
        state.tokens.insert(challenge, None);
        let mut ops = vec![put(&user), StoreOp::DeleteToken(challenge)];
        ops.extend(mailed.map(StoreOp::DeleteToken));
        if let Some(device) = trust {
            let trusted = self.cookie_token(TokenKind::TrustedDevice, user.id, TRUSTED_DEVICE_TTL);
            ops.push(StoreOp::PutToken(device, convert::token_record(&trusted)));
            state.tokens.insert(device, Some(Arc::new(trusted)));
        }
        let id = Some(user.id);
        let detail =
            format!("second factor passed with a {what}{}", if trust.is_some() { "; device trusted" } else { "" });
        ops.push(audit::entry(action::SECOND_FACTOR_PASSED, id, id.map(Into::into), ip, detail));
        Ok(((user, remember_me), ops))
    }

    /// A wrong code for `challenge` (and for the mailed code under `mailed`, if one was tried): counted in the
    /// tokens themselves, so that every node counts one challenge's five (and one mailed code's), and audited.
    fn count_failure(
        &self,
        state: &mut State,
        challenge: TokenHash,
        pending: &OneTimeToken,
        mailed: Option<TokenHash>,
        user: UserId,
        ip: &str,
    ) -> (PassError, Vec<StoreOp>) {
        let mut ops = Vec::new();
        let counted = OneTimeToken { failures: pending.failures + 1, ..pending.clone() };
        let ended = counted.failures >= CHALLENGE_ATTEMPTS;
        if ended {
            state.tokens.insert(challenge, None);
            ops.push(StoreOp::DeleteToken(challenge));
        } else {
            ops.push(StoreOp::PutToken(challenge, convert::token_record(&counted)));
            state.tokens.insert(challenge, Some(Arc::new(counted)));
        }
        // A mailed code keeps its count (better-auth's): past the limit it is refused until a new one is asked for.
        if let Some(key) = mailed {
            ops.extend(self.count_mailed_failure(state, &key));
        }
        let detail = match (ended, mailed.is_some()) {
            (true, true) => "wrong mailed code; the sign-in must start again",
            (true, false) => "wrong code; the sign-in must start again",
            (false, true) => "wrong mailed code",
            (false, false) => "wrong code",
        };
        ops.push(audit::entry(action::SECOND_FACTOR_FAILED, Some(user), Some(user.into()), ip, detail.into()));
        (if ended { PassError::Exhausted } else { PassError::Refused }, ops)
    }

    /// One more failure on the mailed code under `key`, if there is one live.
    fn count_mailed_failure(&self, state: &mut State, key: &TokenHash) -> Option<StoreOp> {
        let code = self.live_token(state, key).filter(|t| t.kind == TokenKind::TwoFactorOtp)?;
        let counted = OneTimeToken { failures: code.failures + 1, ..OneTimeToken::clone(&code) };
        let op = StoreOp::PutToken(*key, convert::token_record(&counted));
        state.tokens.insert(*key, Some(Arc::new(counted)));
        Some(op)
    }

    /// A token carried by a cookie (a challenge, a trusted device): no requesting client, so several live at
    /// once, one per browser.
    /// Replaces the trusted device `old` by `next` (a new 30 days): the ops, or `None` when `old` is no trusted
    /// device (or, with `of`, no live one of that account).
    pub(super) fn renew_device(
        &self,
        state: &mut State,
        old: TokenHash,
        next: TokenHash,
        of: Option<UserId>,
    ) -> Option<[StoreOp; 2]> {
        let now = Timestamp::now();
        let device = self.live_token(state, &old).filter(|t| {
            t.kind == TokenKind::TrustedDevice && of.is_none_or(|user| t.user_id == user && !t.is_expired(now))
        })?;
        let renewed = self.cookie_token(TokenKind::TrustedDevice, device.user_id, TRUSTED_DEVICE_TTL);
        let ops = [StoreOp::DeleteToken(old), StoreOp::PutToken(next, convert::token_record(&renewed))];
        state.tokens.insert(old, None);
        state.tokens.insert(next, Some(Arc::new(renewed)));
        Some(ops)
    }

    fn cookie_token(&self, kind: TokenKind, user: UserId, ttl: std::time::Duration) -> OneTimeToken {
        let now = Timestamp::now();
        OneTimeToken {
            kind,
            user_id: user,
            created_at: now,
            expires_at: now.plus(ttl),
            requested_by: None,
            failures: 0,
            code: None,
            address: None,
        }
    }

    /// Whether `hash` is the live mailed code of `user` kept under `key`, with tries left (compared in constant
    /// time).
    fn mailed_code_matches(&self, state: &State, user: &User, key: &TokenHash, hash: &[u8; 32]) -> bool {
        let Some(code) = self.live_token(state, key) else { return false };
        let Some(kept) = code.code.filter(|_| {
            code.kind == TokenKind::TwoFactorOtp
                && code.user_id == user.id
                && !code.is_expired(Timestamp::now())
                && code.failures < OTP_ATTEMPTS
        }) else {
            return false;
        };
        subtle::ConstantTimeEq::ct_eq(kept.as_slice(), hash.as_slice()).into()
    }

    /// The token `hash`, this batch's changes first.
    pub(super) fn live_token(&self, state: &State, hash: &TokenHash) -> Option<Arc<OneTimeToken>> {
        match state.tokens.get(hash) {
            Some(pending) => pending.clone(),
            None => self.indexes.tokens.get(hash),
        }
    }
}
