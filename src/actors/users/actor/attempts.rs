//! The users actor's sign-in attempt messages: the failure limit's reservations and their end, and a sign-in
//! that upgrades its password's hash in the commit that starts its session.

use std::time::{Duration, Instant};

use ractor::ActorRef;

use super::{StartAnswer, State, UsersActor, put};
use crate::actors::Unavailable;
use crate::actors::attempts::Row;
use crate::actors::users::attempts::AttemptMsg;
use crate::actors::users::{AttemptRefused, Checked, UsersMsg};
use crate::domain::{Timestamp, User, UserFields, UserId, action};
use crate::store::{Conflict, StoreError, StoreOp, audit};

impl UsersActor {
    /// Sign-in attempts.
    pub(super) fn attempt(&self, state: &mut State, msg: AttemptMsg, myself: &ActorRef<UsersMsg>) {
        match msg {
            AttemptMsg::Begin { email, user, ip, reply } => match state.attempts.begin(&email, Instant::now()) {
                Ok(()) if self.attempts.shared => {
                    // Several nodes: this node's count is not the whole story; the database's is (one write per
                    // check, grouped with the others). Refused there: this node's reservation is given back.
                    let reserve = StoreOp::ReserveAttempt {
                        email: email.as_str().to_owned(),
                        max: self.attempts.max_failures,
                        window_ms: self.attempts.window.as_millis() as i64,
                        now_ms: Timestamp::now().as_millis(),
                    };
                    // A request of its own to the writer (a savepoint of its own), not part of this actor's batch:
                    // a refusal must not take other callers' changes down with it.
                    let (writer, me) = (self.writer.clone(), myself.clone());
                    tokio::spawn(async move {
                        let answer = match writer.write(vec![reserve]).await {
                            Ok(()) => Ok(()),
                            Err(StoreError::Conflict(Conflict::Locked { wait_ms, .. })) => {
                                // Answered by the actor, once the lock's audit row is durable (as when this
                                // node's own count reaches the budget).
                                let wait = Duration::from_millis(wait_ms.max(1_000) as u64);
                                let refused = AttemptMsg::LockedElsewhere { email, user, ip, wait, reply };
                                if let Err(error) = me.send_message(UsersMsg::Attempt(refused)) {
                                    tracing::error!(%error, "the users actor is gone");
                                }
                                return;
                            }
                            Err(error) => {
                                tracing::error!(%error, "the shared failure limit could not be checked");
                                let _ = me.send_message(UsersMsg::Attempt(AttemptMsg::ReleaseLocal { email }));
                                Err(AttemptRefused::Unavailable(Unavailable))
                            }
                        };
                        let _ = reply.send(answer);
                    });
                }
                Ok(()) => drop(reply.send(Ok(()))),
                Err(locked) => {
                    let detail = format!("too many failed sign-ins: {} in this window", locked.failures);
                    let rows = attempt_rows(&locked.row, action::SIGN_IN_REFUSED, user, &ip, detail);
                    state.overlay.add_result(rows, reply, Err(AttemptRefused::Locked(locked.wait)));
                }
            },
            AttemptMsg::Finish { email, user, checked, code, ip, reply } => {
                let now = Instant::now();
                let row =
                    state.attempts.finish(&email, checked != Checked::NotChecked, checked == Checked::Verified, now);
                let detail = match (code, user.is_some()) {
                    (true, _) => "wrong second factor (a code or a passkey assertion)",
                    (false, true) => "wrong password",
                    (false, false) => "unknown e-mail",
                };
                let mut rows = attempt_rows(&row, action::SIGN_IN_FAILED, user, &ip, detail.to_owned());
                if self.attempts.shared && checked != Checked::Wrong {
                    let verified = checked == Checked::Verified;
                    rows.push(StoreOp::EndAttempt { email: email.as_str().to_owned(), verified });
                }
                if rows.is_empty() {
                    let _ = reply.send(Ok(()));
                } else {
                    state.overlay.add(rows, reply, ());
                }
            }
            // Stages nothing: the flush `handle` checks for afterwards finds nothing new to schedule.
            AttemptMsg::ReleaseLocal { email } => {
                state.attempts.finish(&email, false, false, Instant::now());
            }
            AttemptMsg::LockedElsewhere { email, user, ip, wait, reply } => {
                let row = state.attempts.refused_elsewhere(&email, Instant::now());
                let detail = "too many failed sign-ins in this window (counted over every node)".to_owned();
                let rows = attempt_rows(&row, action::SIGN_IN_REFUSED, user, &ip, detail);
                if rows.is_empty() {
                    let _ = reply.send(Err(AttemptRefused::Locked(wait)));
                } else {
                    state.overlay.add_result(rows, reply, Err(AttemptRefused::Locked(wait)));
                }
            }
            AttemptMsg::SignInUpgrading { from, to, start, reply } => {
                match self.get(state, start.user).filter(|u| u.password_hash().as_phc() == from.as_str()) {
                    // Not the hash that was verified any more (a password change won the race): leave it.
                    None => drop(reply.send(Ok(None))),
                    Some(current) => {
                        let user = self.stage(
                            state,
                            User::from(UserFields { password_hash: to.into(), ..current.fields() }),
                            false,
                        );
                        state.overlay.add_unanswered([put(&user)]);
                        let answer: StartAnswer = Box::new(move |committed| {
                            let started = committed.unwrap_or(Err(Unavailable.into()));
                            let _ = reply.send(started.map(Some));
                        });
                        state.starting.push((start, answer));
                    }
                }
            }
        }
    }
}

/// The audit rows a sign-in failure or refusal gets under the bounds of [`crate::actors::attempts`].
fn attempt_rows(row: &Row, what: &'static str, user: Option<UserId>, ip: &str, detail: String) -> Vec<StoreOp> {
    let one = |what, detail| audit::entry(what, user, user.map(Into::into), ip, detail);
    match row {
        Row::None => Vec::new(),
        Row::One => vec![one(what, detail)],
        Row::WithSummary(n) => vec![
            audit::entry(
                action::SIGN_IN_FAILURES_SUMMARISED,
                None,
                None,
                "",
                format!("{n} failed or refused sign-ins in the previous minute were counted, not itemised"),
            ),
            one(what, detail),
        ],
    }
}
