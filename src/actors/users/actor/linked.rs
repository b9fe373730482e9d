//! The users actor's linked-account messages: signing an identity at another provider in (or linking it), and
//! removing a way into an account.

use super::{StartAnswer, State, UsersActor};
use crate::actors::Unavailable;
use crate::actors::overlay::Refusal;
use crate::actors::users::{ExternalSession, ExternalSignIn, UsersMsg};

impl UsersActor {
    /// Linked accounts. `handle` sends only these here (UsersMsg::External, UsersMsg::Unlink): the others are not this kind's.
    pub(super) fn linked(&self, state: &mut State, msg: UsersMsg) {
        match msg {
            UsersMsg::External { identity, link_to, role, start, ip, reply } => {
                match self.external(state, identity, link_to, role, &ip) {
                    Ok((mut ops, outcome, guard)) => {
                        let start = start.and_then(|s| self.external_start(state, &outcome, link_to, s, &mut ops));
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
            UsersMsg::Unlink { user, account, by, ip, reply } => match self.unlink(state, user, account, by, &ip) {
                Ok(ops) => state.overlay.add(ops, reply, ()),
                Err(e) => drop(reply.send(Err(e))),
            },
            _ => unreachable!("not a message of this kind: `handle` dispatches by kind"),
        }
    }
}
