//! The sessions actor itself: creates, extends and ends sessions in message order, writes through the overlay,
//! and publishes to the index once durable.

mod api_keys;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use ractor::{Actor, ActorCell, ActorProcessingErr, ActorRef};

use super::{Activate, Client, CreateSessionError, Revoke, SessionsHandle, SessionsMsg, Start, StartWith, Started};
use crate::actors::inbox::{self, Inbox};
use crate::actors::overlay::{self, Overlay, Refusal};
use crate::actors::remote::{ForSessions, SessionChange};
use crate::actors::{Indexes, Mailbox, Unavailable, Waiting};
use crate::config::SessionConfig;
use crate::domain::{
    ApiKey, ApiKeyId, Clock, Session, SessionId, SessionLimits, SessionRare, SessionToken, SessionUse, Timestamp,
    TokenHash, User, UserId, action,
};
use crate::store::own::Key;
use crate::store::{Conflict, StoreOp, StoreWriter, audit, convert};

pub(in crate::actors) async fn spawn(
    indexes: Arc<Indexes>,
    writer: StoreWriter,
    config: SessionConfig,
    clock: Clock,
    supervisor: ActorCell,
) -> Result<SessionsHandle, ActorProcessingErr> {
    let waiting = Waiting::default();
    let limits = config.limits();
    let max_per_account = usize::try_from(config.max_per_account).ok().filter(|max| *max > 0);
    let actor = SessionsActor {
        indexes: Arc::clone(&indexes),
        writer,
        limits,
        max_per_account,
        clock,
        waiting: waiting.clone(),
    };
    let (post, inbox) = inbox::inbox();
    let (actor, _) = Actor::spawn_linked(None, actor, inbox, supervisor).await?;
    Ok(SessionsHandle(Mailbox::new(actor, waiting), indexes, post))
}

struct SessionsActor {
    indexes: Arc<Indexes>,
    writer: StoreWriter,
    /// What a session's end follows: its lifetime, the absolute and idle limits.
    limits: SessionLimits,
    /// The time those limits are read against (the system clock unless a test moves it).
    clock: Clock,
    /// `[session] max_per_account` (`None`: no limit).
    max_per_account: Option<usize>,
    /// The calls waiting in this actor's mailbox (see [`super::mailbox`]).
    waiting: Waiting,
}

struct State {
    /// Sessions created, changed (`Some`) or ended (`None`) in this batch.
    overlay: Overlay<TokenHash, Option<Arc<Session>>>,
    /// Users whose sessions are being ended with a change to their account: no session starts or extends.
    fenced: HashSet<UserId>,
    /// Other nodes' changes (see [`Inbox`]).
    inbox: Inbox<ForSessions>,
    /// API keys created, changed (`Some`) or deleted (`None`) in this batch: published with it, or dropped.
    keys: HashMap<ApiKeyId, Option<Arc<ApiKey>>>,
}

impl Actor for SessionsActor {
    type Msg = SessionsMsg;
    type State = State;
    type Arguments = Inbox<ForSessions>;

    async fn pre_start(
        &self,
        _: ActorRef<SessionsMsg>,
        inbox: Inbox<ForSessions>,
    ) -> Result<State, ActorProcessingErr> {
        Ok(State { overlay: Overlay::default(), fenced: HashSet::new(), inbox, keys: HashMap::new() })
    }

    async fn handle(
        &self,
        myself: ActorRef<SessionsMsg>,
        msg: SessionsMsg,
        state: &mut State,
    ) -> Result<(), ActorProcessingErr> {
        if !self.waiting.take(&msg) {
            return Ok(());
        }
        match msg {
            SessionsMsg::Create { user, remember_me, client, start, reply } => {
                let ip = client.ip_address.clone();
                let logged = |what, detail: &str| audit::entry(what, Some(user), Some(user.into()), &ip, detail.into());
                let account = self.indexes.users.get(user);
                match (self.create(state, account, user, remember_me, client, start), start) {
                    (Ok((token, hash, session)), start) => {
                        let mut ops = self.end_the_oldest(state, &session, &ip);
                        state.overlay.stage(hash, Some(Arc::clone(&session)));
                        ops.push(put(hash, &session));
                        match start {
                            Start::SignIn => ops.push(logged(action::SIGN_IN_SUCCEEDED, "")),
                            Start::Passkey => ops.push(logged(action::SIGN_IN_SUCCEEDED, "passkey")),
                            Start::Impersonation { by } => ops.push(audit::entry(
                                action::IMPERSONATION_STARTED,
                                Some(by),
                                Some(user.into()),
                                &ip,
                                format!("until {}", session.expires_at.to_rfc3339()),
                            )),
                            Start::SignUp | Start::Renewal => {}
                        }
                        state.overlay.add(ops, reply, (token, session));
                    }
                    (Err(CreateSessionError::Banned), Start::SignIn | Start::Passkey) => {
                        let detail =
                            if start == Start::Passkey { "account is banned; passkey" } else { "account is banned" };
                        let refused = logged(action::SIGN_IN_REFUSED, detail);
                        state.overlay.add_result([refused], reply, Err(CreateSessionError::Banned));
                    }
                    (Err(e), _) => drop(reply.send(Err(e))),
                }
            }
            SessionsMsg::SweepExpired { candidates, now, reply } => {
                // The sessions ended since the last sweep are gone from the index by now.
                self.indexes.sessions.forget_unused_agents();
                let expired: Vec<(UserId, TokenHash)> = candidates
                    .into_iter()
                    .filter_map(|hash| self.get(state, &hash).filter(|s| s.is_expired(now)).map(|s| (s.user_id, hash)))
                    .collect();
                if expired.is_empty() {
                    drop(reply.send(Ok(0))); // nothing to write: no commit (and no fsync) every ten minutes
                } else {
                    let count = expired.len();
                    for (_, hash) in &expired {
                        state.overlay.stage(*hash, None);
                    }
                    state.overlay.add(expired.into_iter().map(delete), reply, count);
                }
            }
            SessionsMsg::Refresh { hash, reply } => match self.renew(state, hash) {
                Renewal::Written(session) => {
                    // Several nodes: ended on another node a moment ago, it stays ended (see `RefreshSession`).
                    let refresh = StoreOp::RefreshSession(hash, convert::session_record(&session));
                    state.overlay.add([refresh], reply, Some(session));
                }
                Renewal::AsItIs(session) => drop(reply.send(Ok(Some(session)))),
                Renewal::Ended => drop(reply.send(Ok(None))),
            },
            SessionsMsg::Touch { hash } => {
                if let Renewal::Written(session) = self.renew(state, hash) {
                    state.overlay.add_unanswered([StoreOp::RefreshSession(hash, convert::session_record(&session))]);
                }
            }
            SessionsMsg::SetActive { hash, org, reply } => match self.get(state, &hash) {
                Some(current) if !current.is_expired(Timestamp::now()) => {
                    if current.active_organization() == org {
                        let _ = reply.send(Ok(Some(current)));
                        return Ok(());
                    }
                    let session = Arc::new(current.with_active_organization(org));
                    state.overlay.stage(hash, Some(Arc::clone(&session)));
                    // Like a refresh: a session ended on another node meanwhile stays ended.
                    let write = StoreOp::RefreshSession(hash, convert::session_record(&session));
                    state.overlay.add([write], reply, Some(session));
                }
                _ => drop(reply.send(Ok(None))),
            },
            SessionsMsg::SetActiveTeam { hash, team, reply } => match self.get(state, &hash) {
                Some(current) if !current.is_expired(Timestamp::now()) => {
                    if current.active_team() == team {
                        let _ = reply.send(Ok(Some(current)));
                        return Ok(());
                    }
                    let session = Arc::new(current.with_active_team(team));
                    state.overlay.stage(hash, Some(Arc::clone(&session)));
                    // Like a refresh: a session ended on another node meanwhile stays ended.
                    let write = StoreOp::RefreshSession(hash, convert::session_record(&session));
                    state.overlay.add([write], reply, Some(session));
                }
                _ => drop(reply.send(Ok(None))),
            },
            SessionsMsg::End { hash, reply } => match state.overlay.get(&hash) {
                // Already ending in this batch: answer with the same commit, not before it.
                Some(None) => state.overlay.add([], reply, ()),
                _ if let Some(session) = self.get(state, &hash) => {
                    state.overlay.stage(hash, None);
                    state.overlay.add([delete((session.user_id, hash))], reply, ());
                }
                _ => drop(reply.send(Ok(()))),
            },
            // Already ending in this batch: answered with its commit, not before.
            SessionsMsg::Revoke { which: Revoke::One(hash) | Revoke::Impersonation(hash), reply, .. }
                if matches!(state.overlay.get(&hash), Some(None)) =>
            {
                state.overlay.add([], reply, 0);
            }
            SessionsMsg::Revoke { user, by, which, ip, reply } => {
                let live = |hash: &TokenHash| self.get(state, hash).is_some_and(|s| s.user_id == user);
                let mut hashes: Vec<TokenHash> = match which {
                    Revoke::One(hash) | Revoke::Impersonation(hash) => vec![hash],
                    Revoke::All | Revoke::AllBut(_) => {
                        self.indexes.sessions.of_users(&[user]).into_iter().map(|(_, h)| h).collect()
                    }
                };
                hashes.extend(
                    state
                        .overlay
                        .iter()
                        .filter(|(_, s)| s.as_ref().is_some_and(|s| s.user_id == user))
                        .map(|(h, _)| *h),
                );
                hashes.sort_unstable();
                hashes.dedup();
                hashes.retain(|h| live(h) && !matches!(which, Revoke::AllBut(keep) if keep == *h));
                let count = hashes.len();
                for hash in &hashes {
                    state.overlay.stage(*hash, None);
                }
                let mut ops: Vec<StoreOp> = match which {
                    Revoke::One(_) | Revoke::Impersonation(_) => {
                        hashes.into_iter().map(|h| delete((user, h))).collect()
                    }
                    // Every session of the account in the store, those this node has not seen included (started
                    // on another node a moment ago); `count` is what this node ended.
                    Revoke::All => vec![end_all(user, None)],
                    Revoke::AllBut(keep) => vec![end_all(user, Some(keep))],
                };
                if count > 0 && matches!(which, Revoke::Impersonation(_)) {
                    let ended =
                        audit::entry(action::IMPERSONATION_STOPPED, Some(by), Some(user.into()), &ip, "".into());
                    ops.push(ended);
                } else if count > 0 {
                    // An administrator impersonating the user ends them as the user, and is named as the actor.
                    let whose = if by == user { "their user" } else { "an administrator" };
                    let detail = format!("{count} session(s) ended by {whose}");
                    ops.push(audit::entry(action::SESSIONS_REVOKED, Some(by), Some(user.into()), &ip, detail));
                }
                state.overlay.add(ops, reply, count);
            }
            SessionsMsg::CommitEnding { users, impersonators, mut ops, starts, actives, reply } => {
                let admins: Vec<UserId> = users.iter().chain(&impersonators).copied().collect();
                let mut ending = self.indexes.sessions.of_users(&users);
                ending.extend(self.indexes.sessions.impersonated_by(&admins));
                ending.extend(state.overlay.iter().filter_map(|(h, s)| {
                    let session = s.as_ref()?;
                    let by = session.impersonated_by();
                    let ends = users.contains(&session.user_id) || by.is_some_and(|a| admins.contains(&a));
                    ends.then_some((session.user_id, *h))
                }));
                ending.sort_unstable();
                ending.dedup();
                for (_, hash) in &ending {
                    state.overlay.stage(*hash, None);
                }
                // The sign-ins of this commit start before the fence: a sign-in by a mailed link to an account whose
                // address was unproven ends its other sessions and starts its own in one commit. Their records follow
                // the ends (below), so the new session is not among those deleted.
                let mut start_ops = Vec::new();
                let started = starts
                    .into_iter()
                    .map(|(start, account)| self.start_with(state, start, account, &mut start_ops))
                    .collect();
                // Fenced until published: no other session of `users` and no impersonation by `admins` starts
                // meanwhile.
                state.fenced.extend(admins);
                // Every session of each account in the store, those this node has not seen included; and the
                // impersonations by the administrators among them or demoted, as this node knows them (a session
                // check refuses any other once the change is applied here).
                ops.extend(users.iter().map(|&user| end_all(user, None)));
                // Their API keys too: a key is a way into the account, and ends with its sessions.
                let keys = self.end_api_keys_of(state, &users);
                ops.extend(keys);
                ops.extend(ending.into_iter().filter(|(user, _)| !users.contains(user)).map(delete));
                // A member joining or leaving through this session: its active organization follows in the same
                // transaction (a session that has ended, in this commit or before, has none to change).
                let now = Timestamp::now();
                for active in actives {
                    let moved: Vec<(TokenHash, Session)> = match active {
                        Activate::Session { hash, org, team } => self
                            .get(state, &hash)
                            .filter(|s| !s.is_expired(now))
                            .map(|s| (hash, s.with_active_organization(org).with_active_team(team)))
                            .into_iter()
                            .collect(),
                        // Every session of the user this node knows (each node holds them all): those working in
                        // the team (or any team of the organization) left.
                        Activate::LeftTeam { user, org, team } => self
                            .indexes
                            .sessions
                            .of_user(user)
                            .into_iter()
                            .filter_map(|(hash, _)| Some(hash).zip(self.get(state, &hash)))
                            .filter(|(_, s)| !s.is_expired(now) && s.active_organization() == Some(org))
                            .filter(|(_, s)| s.active_team().is_some_and(|t| team.is_none_or(|left| left == t)))
                            .map(|(hash, s)| (hash, s.with_active_team(None)))
                            .collect(),
                    };
                    for (hash, session) in moved {
                        let session = Arc::new(session);
                        state.overlay.stage(hash, Some(Arc::clone(&session)));
                        ops.push(StoreOp::RefreshSession(hash, convert::session_record(&session)));
                    }
                }
                ops.extend(start_ops);
                // A conflict (several nodes) is the users actor's to answer: its change broke a rule of the cluster.
                let conflict = |c: &Conflict| Some(Err(Refusal::Conflict(c.clone())));
                state.overlay.add_answering(ops, reply, Ok(started), conflict);
            }
            SessionsMsg::Unfence { users } => {
                for user in users {
                    state.fenced.remove(&user);
                }
            }
            SessionsMsg::Remote => state.inbox.drain(|change| self.apply_remote(change)),
            SessionsMsg::Flush => return self.flush(state).await,
            SessionsMsg::ApiKey(msg) => self.api_key(state, msg),
        }
        if state.overlay.schedule_flush(&myself, || SessionsMsg::Flush) {
            self.flush(state).await?;
        }
        Ok(())
    }
}

impl SessionsActor {
    /// A sign-in's session, staged with its records in `ops` (a refusal of a banned account is recorded too).
    /// `account`: the account as the users actor's batch leaves it (it may be created in that very commit, so not
    /// in the read index yet).
    fn start_with(
        &self,
        state: &mut State,
        start: StartWith,
        account: Option<Arc<User>>,
        ops: &mut Vec<StoreOp>,
    ) -> Started {
        let StartWith { user, remember_me, client } = start;
        let ip = client.ip_address.clone();
        let logged = |what, detail: &str| audit::entry(what, Some(user), Some(user.into()), &ip, detail.into());
        match self.create(state, account, user, remember_me, client, Start::SignIn) {
            Ok((token, hash, session)) => {
                ops.extend(self.end_the_oldest(state, &session, &ip));
                state.overlay.stage(hash, Some(Arc::clone(&session)));
                ops.push(put(hash, &session));
                ops.push(logged(action::SIGN_IN_SUCCEEDED, ""));
                Ok((token, session))
            }
            Err(e) => {
                if e == CreateSessionError::Banned {
                    ops.push(logged(action::SIGN_IN_REFUSED, "account is banned"));
                }
                Err(e)
            }
        }
    }

    async fn flush(&self, state: &mut State) -> Result<(), ActorProcessingErr> {
        let sessions = &self.indexes.sessions;
        let writes = state.overlay.writes();
        let keys = std::mem::take(&mut state.keys);
        let api_keys = &self.indexes.api_keys;
        let publish_keys = |durable: bool| {
            if durable {
                keys.into_iter().for_each(|(id, key)| api_keys.publish(id, key));
            }
        };
        let flushing = state.overlay.flush_then(
            |ops| overlay::write(&self.writer, ops),
            |(hash, s)| sessions.publish(hash, s),
            publish_keys,
        );
        // Other nodes' changes meanwhile: a ban or sign-out made there does not wait for this commit.
        state.inbox.while_flushing(flushing, |change| change.split(&writes), |change| self.apply_remote(change)).await;
        Ok(())
    }

    /// Another node's sessions, but what this node's own commits have written since (a refresh committed on
    /// another node before a sign-out here does not bring the session back).
    fn apply_remote(&self, ForSessions { sessions, api_keys, key_uses, gate }: ForSessions) {
        for (id, key) in api_keys {
            if gate.admits(Key::ApiKey(id.to_bytes())) {
                gate.applied(Key::ApiKey(id.to_bytes()));
                self.indexes.api_keys.publish(id, key);
            }
        }
        // Counted on this node's copy as the database counted it (a copy already short of it catches up when
        // this node's next use is refused and reads the key back).
        for (id, at) in key_uses {
            if gate.admits(Key::ApiKey(id.to_bytes())) {
                gate.applied(Key::ApiKey(id.to_bytes()));
                if let Some(key) = self.indexes.api_keys.get(id) {
                    key.take_quota_at(at).ok();
                }
            }
        }
        let index = &self.indexes.sessions;
        let apply = |user: UserId, hash: TokenHash, session: Option<Arc<Session>>| {
            if gate.admits_session(user.to_bytes(), hash) {
                gate.applied(Key::Session(hash));
                index.publish(hash, session);
            }
        };
        for change in sessions {
            match change {
                SessionChange::Put(hash, session) => apply(session.user_id, hash, Some(session)),
                SessionChange::Delete(user, hash) => apply(user, hash, None),
                SessionChange::DeleteAllOf(user, kept) => {
                    for (_, hash) in index.of_users(&[user]) {
                        if Some(hash) != kept {
                            apply(user, hash, None);
                        }
                    }
                }
            }
        }
    }

    /// Whether `user` exists, is not banned, and is not having their sessions ended right now.
    fn may_hold_session(&self, state: &State, user: UserId) -> bool {
        let now = Timestamp::now();
        !state.fenced.contains(&user) && self.indexes.users.get(user).is_some_and(|u| !u.is_banned_at(now))
    }

    fn get(&self, state: &State, hash: &TokenHash) -> Option<Arc<Session>> {
        match state.overlay.get(hash) {
            Some(pending) => pending.clone(),
            None => self.indexes.sessions.get(hash),
        }
    }

    /// `[session] max_per_account`: the ends of the oldest live sessions of `new`'s account beyond the limit, once
    /// `new` starts, staged, with their audit entry, for the commit that starts it (ASVS 7.1.2). An impersonation
    /// neither counts nor is ended, and starts none of this. Several nodes: a session another node started a moment
    /// ago is not counted yet (the next sign-in counts it).
    fn end_the_oldest(&self, state: &mut State, new: &Session, ip: &str) -> Vec<StoreOp> {
        let Some(max) = self.max_per_account.filter(|_| new.impersonated_by().is_none()) else { return Vec::new() };
        let user = new.user_id;
        let staged = state.overlay.iter().filter(|(_, s)| s.as_ref().is_some_and(|s| s.user_id == user));
        let mut hashes: Vec<TokenHash> = self.indexes.sessions.of_users(&[user]).into_iter().map(|(_, h)| h).collect();
        hashes.extend(staged.map(|(h, _)| *h));
        hashes.sort_unstable();
        hashes.dedup();
        let now = self.clock.now();
        let mut live: Vec<(Timestamp, TokenHash)> = hashes
            .into_iter()
            .filter_map(|hash| self.get(state, &hash).map(|s| (s, hash)))
            .filter(|(s, _)| s.impersonated_by().is_none() && self.limits.check(s, now) != SessionUse::Over)
            .map(|(s, hash)| (s.created_at, hash))
            .collect();
        let excess = (live.len() + 1).saturating_sub(max);
        if excess == 0 {
            return Vec::new();
        }
        live.sort_unstable();
        let mut ops: Vec<StoreOp> = live
            .into_iter()
            .take(excess)
            .map(|(_, hash)| {
                state.overlay.stage(hash, None);
                delete((user, hash))
            })
            .collect();
        let detail = format!("{excess} oldest session(s) ended by the limit of {max} per account");
        ops.push(audit::entry(action::SESSIONS_REVOKED, Some(user), Some(user.into()), ip, detail));
        ops
    }

    /// A use of session `hash` now: staged with its new end when it moves enough to be written (another use may
    /// have written it since the caller's check; the check is made again here, in message order).
    fn renew(&self, state: &mut State, hash: TokenHash) -> Renewal {
        let Some(current) = self.get(state, &hash) else { return Renewal::Ended };
        let now = self.clock.now();
        match self.limits.check(&current, now) {
            SessionUse::Over => Renewal::Ended,
            SessionUse::Live => Renewal::AsItIs(current),
            // A banned (or being banned) user's session is not extended: it is about to end, and a refresh
            // written after its end would bring it back.
            SessionUse::Due if !self.may_hold_session(state, current.user_id) => Renewal::AsItIs(current),
            SessionUse::Due => {
                let session = Arc::new(Session {
                    expires_at: self.limits.renewed_end(&current, now),
                    updated_at: now,
                    ..Session::clone(&current)
                });
                state.overlay.stage(hash, Some(Arc::clone(&session)));
                Renewal::Written(session)
            }
        }
    }

    /// A new session for `user`, whose account is `account` (the read index's, or the users actor's newer one).
    fn create(
        &self,
        state: &State,
        account: Option<Arc<User>>,
        user: UserId,
        remember_me: bool,
        client: Client,
        start: Start,
    ) -> Result<(SessionToken, TokenHash, Arc<Session>), CreateSessionError> {
        let now = self.clock.now();
        match account {
            None => return Err(CreateSessionError::UnknownUser),
            Some(u) if u.is_banned_at(now) => return Err(CreateSessionError::Banned),
            Some(_) => {}
        }
        // A ban reaches us as a `CommitEnding` (fencing the user) before the users actor publishes it, and the
        // fence lasts until the ban is in the index: in our message order, no session can slip past a ban. (Once
        // the ban is published, the check above answers `Banned`, even before the fence is lifted.)
        if state.fenced.contains(&user) {
            return Err(CreateSessionError::Unavailable(Unavailable));
        }
        // Likewise an impersonation by an administrator being banned, demoted or removed; one who no longer is an
        // active administrator starts none.
        if let Start::Impersonation { by } = start {
            let active = self.indexes.users.get(by).is_some_and(|a| a.is_active_admin());
            if !active || state.fenced.contains(&by) {
                return Err(CreateSessionError::Unavailable(Unavailable));
            }
        }
        let token = SessionToken::generate();
        let hash = token.hash();
        let impersonated_by = match start {
            Start::Impersonation { by } => Some(by),
            _ => None,
        };
        // An impersonation is never extended, and its cookie ends with the browser.
        let remember_me = remember_me && impersonated_by.is_none();
        let session = Arc::new(Session {
            id: SessionId::new(),
            user_id: user,
            expires_at: self.limits.first_end(now, remember_me, impersonated_by.is_some()),
            created_at: now,
            updated_at: now,
            ip_address: client.ip_address.into(),
            user_agent: self.indexes.sessions.user_agent(&client.user_agent),
            remember_me,
            rare: SessionRare::new(impersonated_by, None),
        });
        Ok((token, hash, session))
    }
}

/// What a use of a session comes to in the actor.
enum Renewal {
    /// Its new end, staged: the caller writes it.
    Written(Arc<Session>),
    /// Live, nothing to write (or, for a user being banned, nothing that may be).
    AsItIs(Arc<Session>),
    /// Gone or over.
    Ended,
}

fn put(hash: TokenHash, session: &Session) -> StoreOp {
    StoreOp::PutSession(hash, convert::session_record(session))
}

fn delete((user, hash): (UserId, TokenHash)) -> StoreOp {
    StoreOp::DeleteSession(user.to_bytes(), hash)
}

fn end_all(user: UserId, except: Option<TokenHash>) -> StoreOp {
    StoreOp::DeleteSessionsOf { user: user.to_bytes(), except }
}
