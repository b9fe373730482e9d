//! The sessions actor: creating, extending and ending sessions.

use std::collections::{BTreeSet, HashSet};
use std::ops::RangeInclusive;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use ractor::{Actor, ActorCell, ActorProcessingErr, ActorRef, RpcReplyPort};

use super::audit::{self, action};
use super::overlay::{self, Overlay, Refusal};
use super::remote::SessionChange;
use super::{Indexes, KeyHash, Mailbox, Unavailable, Waiting, call, gone, read, write};
use crate::config::SessionConfig;
use crate::domain::{Session, SessionId, SessionToken, Timestamp, TokenHash, UserAgent, UserId};
use crate::store::own::{Gate, Key};
use crate::store::{Conflict, StoreOp, StoreWriter, convert};

/// Read index of sessions, keyed by the SHA-256 of the token, and the tokens of each user (so that ending or
/// listing one user's sessions touches only theirs, not every session).
#[derive(Default)]
pub struct SessionIndex {
    by_hash: papaya::HashMap<TokenHash, Arc<Session>, KeyHash>,
    /// Every session's user and token hash, in that order: one user's sessions are a range. An ordered set of
    /// 48-byte keys costs about half of a map from user to a list of hashes (an entry, a list and a table slot per
    /// user, and the list copied on every change); only the sessions actor writes it, and only calls about one
    /// account's sessions (list, revoke, ban) read it, never the session check.
    by_user: RwLock<BTreeSet<(UserId, TokenHash)>>,
    /// The impersonation sessions by the administrator behind each: when that administrator is banned, demoted or
    /// removed, these end with the change. Few (an administrator's temporary state), so a set beside `by_user`.
    by_impersonator: RwLock<BTreeSet<(UserId, TokenHash)>>,
    /// One copy of each user agent the sessions have (see [`UserAgent`]); only the sessions actor and start-up use
    /// it, so the lock is never contended.
    agents: Mutex<HashSet<UserAgent>>,
}

impl SessionIndex {
    pub fn with_capacity(sessions: usize) -> Self {
        Self { by_hash: papaya::HashMap::with_capacity_and_hasher(sessions, KeyHash::default()), ..Self::default() }
    }

    pub fn get(&self, hash: &TokenHash) -> Option<Arc<Session>> {
        self.by_hash.pin().get(hash).cloned()
    }

    pub fn len(&self) -> usize {
        self.by_hash.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_hash.is_empty()
    }

    /// Used after a durable write; only the sessions actor writes.
    pub(crate) fn publish(&self, hash: TokenHash, session: Option<Arc<Session>>) {
        match session {
            Some(session) => {
                let (user, impersonator) = (session.user_id, session.impersonated_by.as_deref().copied());
                if self.by_hash.pin().insert(hash, session).is_none() {
                    write(&self.by_user).insert((user, hash));
                    if let Some(admin) = impersonator {
                        write(&self.by_impersonator).insert((admin, hash));
                    }
                }
            }
            None => {
                if let Some(old) = self.by_hash.pin().remove(&hash) {
                    write(&self.by_user).remove(&(old.user_id, hash));
                    if let Some(admin) = old.impersonated_by.as_deref() {
                        write(&self.by_impersonator).remove(&(*admin, hash));
                    }
                }
            }
        }
    }

    /// At start-up, before anything reads the index: the session check's map only.
    /// [`finish_load`](Self::finish_load) then builds the sessions by user in one pass.
    pub(crate) fn publish_loaded(&self, hash: TokenHash, session: Arc<Session>) {
        if let Some(admin) = session.impersonated_by.as_deref() {
            write(&self.by_impersonator).insert((*admin, hash));
        }
        self.by_hash.pin().insert(hash, session);
    }

    /// Takes back a session given to [`publish_loaded`](Self::publish_loaded) (its account is gone or banned).
    pub(crate) fn unpublish_loaded(&self, hash: &TokenHash) {
        if let Some(old) = self.by_hash.pin().remove(hash)
            && let Some(admin) = old.impersonated_by.as_deref()
        {
            write(&self.by_impersonator).remove(&(*admin, *hash));
        }
    }

    /// `loaded`: the user and token hash of every session given to [`publish_loaded`](Self::publish_loaded). The
    /// store hands them over in this order, so the sort is a pass that finds them sorted.
    pub(crate) fn finish_load(&self, loaded: Vec<(UserId, TokenHash)>) {
        *write(&self.by_user) = loaded.into_iter().collect();
    }

    /// The shared copy of user agent `text`, made on its first use.
    pub(crate) fn user_agent(&self, text: &str) -> UserAgent {
        let mut agents = self.agents.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(agent) = agents.get(text) {
            return agent.clone();
        }
        let agent = UserAgent::from(text);
        agents.insert(agent.clone());
        agent
    }

    /// Drops the copies of user agents that no session holds any more; returns how many are left.
    fn forget_unused_agents(&self) -> usize {
        let mut agents = self.agents.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        agents.retain(|agent| agent.holders() > 1);
        agents.len()
    }

    /// The live sessions of `user` with their token hashes, oldest first.
    pub fn of_user(&self, user: UserId) -> Vec<(TokenHash, Arc<Session>)> {
        let hashes: Vec<TokenHash> = read(&self.by_user).range(of(user)).map(|(_, h)| *h).collect();
        let by_hash = self.by_hash.pin();
        let mut sessions: Vec<_> = hashes.iter().filter_map(|h| Some((*h, by_hash.get(h)?.clone()))).collect();
        sessions.sort_unstable_by_key(|(_, s)| (s.created_at, s.id));
        sessions
    }

    /// The session with id `id`: its hash and user. A scan (an administrator's rare call; ids are not indexed).
    pub fn find_by_id(&self, id: SessionId) -> Option<(TokenHash, UserId)> {
        self.by_hash.pin().iter().find(|(_, s)| s.id == id).map(|(h, s)| (*h, s.user_id))
    }

    fn expired(&self, now: Timestamp) -> Vec<(UserId, TokenHash)> {
        self.by_hash.pin().iter().filter(|(_, s)| s.is_expired(now)).map(|(h, s)| (s.user_id, *h)).collect()
    }

    fn of_users(&self, users: &[UserId]) -> Vec<(UserId, TokenHash)> {
        let by_user = read(&self.by_user);
        users.iter().flat_map(|u| by_user.range(of(*u)).copied()).collect()
    }

    /// The impersonation sessions `admins` hold, as (impersonated user, token hash).
    fn impersonated_by(&self, admins: &[UserId]) -> Vec<(UserId, TokenHash)> {
        let hashes: Vec<TokenHash> = {
            let by_impersonator = read(&self.by_impersonator);
            admins.iter().flat_map(|a| by_impersonator.range(of(*a)).map(|(_, h)| *h)).collect()
        };
        let by_hash = self.by_hash.pin();
        hashes.into_iter().filter_map(|h| Some((by_hash.get(&h)?.user_id, h))).collect()
    }
}

/// The range of `user`'s entries in [`SessionIndex::by_user`].
fn of(user: UserId) -> RangeInclusive<(UserId, TokenHash)> {
    (user, [0; 32])..=(user, [u8::MAX; 32])
}

/// Where a sign-in comes from (the client's address and user agent), recorded on the session.
#[derive(Debug, Clone, Default)]
pub struct Client {
    pub ip_address: String,
    pub user_agent: String,
}

/// Which of their own sessions a user ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Revoke {
    /// One session, if it is theirs (anyone else's is left alone, silently).
    One(TokenHash),
    All,
    /// Every one but this (the caller's current session).
    AllBut(TokenHash),
    /// An impersonation session, ended by the administrator behind it (audited as the end of the impersonation).
    Impersonation(TokenHash),
}

/// A session to start with another actor's records (a sign-in that replaces an imported password hash).
#[derive(Debug, Clone)]
pub struct StartWith {
    pub user: UserId,
    pub remember_me: bool,
    pub client: Client,
}

/// What starting a session gives: its token and the session.
pub type Started = Result<(SessionToken, Arc<Session>), CreateSessionError>;

/// Why a session starts; a sign-in is recorded in the audit log with its session (a sign-up's account creation
/// is recorded by the users actor).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    SignIn,
    SignUp,
    /// A new session for a user whose sessions were just ended on their own request (a password change).
    Renewal,
    /// Administrator `by` acting as the user: at most [`IMPERSONATION_LIFETIME`], never extended, audited.
    Impersonation {
        by: UserId,
    },
}

/// How long an impersonation session lasts: an administrator acting as someone else is a temporary state.
pub const IMPERSONATION_LIFETIME: Duration = Duration::from_secs(3600);

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CreateSessionError {
    #[error("the account is banned")]
    Banned,
    #[error("the account does not exist")]
    UnknownUser,
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
}

pub enum SessionsMsg {
    Create {
        user: UserId,
        remember_me: bool,
        client: Client,
        start: Start,
        reply: RpcReplyPort<Result<(SessionToken, Arc<Session>), CreateSessionError>>,
    },
    SweepExpired {
        reply: RpcReplyPort<Result<usize, Unavailable>>,
    },
    Refresh {
        hash: TokenHash,
        reply: RpcReplyPort<Result<Option<Arc<Session>>, Unavailable>>,
    },
    End {
        hash: TokenHash,
        reply: RpcReplyPort<Result<(), Unavailable>>,
    },
    /// A user ending their own sessions, or an administrator (`by`) ending a user's.
    Revoke {
        user: UserId,
        by: UserId,
        which: Revoke,
        ip: String,
        reply: RpcReplyPort<Result<usize, Unavailable>>,
    },
    /// Another actor's records, committed together with the end of every session of `users` and of every
    /// impersonation by `users` or `impersonators` (administrators banned, removed or demoted by the records).
    /// Also starts a session for each of `starts` (sign-ins), in the same transaction.
    CommitEnding {
        users: Vec<UserId>,
        impersonators: Vec<UserId>,
        ops: Vec<StoreOp>,
        starts: Vec<StartWith>,
        reply: RpcReplyPort<Result<Vec<Started>, Refusal>>,
    },
    /// The users of a [`CommitEnding`](Self::CommitEnding) are published in their new state: stop fencing them.
    Unfence {
        users: Vec<UserId>,
    },
    /// Sessions another node started, extended or ended: into the read index.
    Remote {
        sessions: Vec<SessionChange>,
        gate: Gate,
        reply: RpcReplyPort<()>,
    },
    Flush,
}

impl super::Letter for SessionsMsg {
    fn caller_gone(&self) -> Option<bool> {
        match self {
            Self::Create { reply, .. } => gone(reply),
            Self::SweepExpired { reply } | Self::Revoke { reply, .. } => gone(reply),
            Self::Refresh { reply, .. } => gone(reply),
            Self::End { reply, .. } => gone(reply),
            // The users actor waits for its outcome without a timeout: its memory must match the disk.
            Self::CommitEnding { .. } => None,
            // Another node's changes: this node's memory must follow them whatever.
            Self::Remote { .. } => None,
            Self::Unfence { .. } | Self::Flush => None,
        }
    }
}

/// Typed handle to the sessions actor.
#[derive(Clone)]
pub struct SessionsHandle(pub(super) Mailbox<SessionsMsg>);

impl SessionsHandle {
    /// Starts a session with a new token. Refused for a banned or unknown account, checked in message order after
    /// any ban, so a ban and a sign-in racing each other cannot leave a live session behind.
    pub async fn create(
        &self,
        user: UserId,
        remember_me: bool,
        client: Client,
        start: Start,
    ) -> Result<(SessionToken, Arc<Session>), CreateSessionError> {
        call(&self.0, |reply| SessionsMsg::Create { user, remember_me, client, start, reply }).await?
    }

    /// Removes expired sessions from memory and disk; returns how many.
    pub async fn sweep_expired(&self) -> Result<usize, Unavailable> {
        call(&self.0, |reply| SessionsMsg::SweepExpired { reply }).await?
    }

    /// Extends a session to the full lifetime from now. `None` when it has ended or expired meanwhile.
    pub async fn refresh(&self, hash: TokenHash) -> Result<Option<Arc<Session>>, Unavailable> {
        call(&self.0, |reply| SessionsMsg::Refresh { hash, reply }).await?
    }

    /// Ends one session (sign-out). Ending an unknown session succeeds.
    pub async fn end(&self, hash: TokenHash) -> Result<(), Unavailable> {
        call(&self.0, |reply| SessionsMsg::End { hash, reply }).await?
    }

    /// Ends sessions of `user` as `which` says, on behalf of `by` (the user, or an administrator), with an audit
    /// entry; returns how many ended. Only ever `user`'s.
    pub async fn revoke(&self, user: UserId, by: UserId, which: Revoke, ip: String) -> Result<usize, Unavailable> {
        call(&self.0, |reply| SessionsMsg::Revoke { user, by, which, ip, reply }).await?
    }

    /// Commits `ops` (another actor's records: a ban, a new password) in one transaction with the end of every
    /// session of `users`, so that both are durable or neither is; and starts the sessions `starts` (sign-ins,
    /// checked like [`create`](Self::create)) in it too (an imported password hash replaced at sign-in: one answer
    /// per start, in order). Until [`unfence`](Self::unfence), no session of `users` is created or extended: one
    /// could otherwise slip in between the list of sessions to end and the publication of the change that ends
    /// them. See docs/design/ending-sessions-with-a-change.md.
    ///
    /// An administrator among `users` (banned, removed, given a new password), or among `impersonators` (demoted),
    /// loses the sessions they impersonate in the same commit: an impersonation never outlives its administrator's
    /// authority.
    ///
    /// No timeout: the caller must learn the real outcome, or its memory would disagree with the disk. A conflict
    /// with another node's change is handed back as such, so the caller answers it as on one node.
    pub(super) async fn commit_with(
        &self,
        users: Vec<UserId>,
        impersonators: Vec<UserId>,
        ops: Vec<StoreOp>,
        starts: Vec<StartWith>,
    ) -> Result<Vec<Started>, Refusal> {
        let msg = |reply| SessionsMsg::CommitEnding { users, impersonators, ops, starts, reply };
        match self.0.call(msg, None).await {
            Ok(ractor::rpc::CallResult::Success(result)) => result,
            _ => Err(Refusal::Unavailable),
        }
    }

    /// Ends the fence of [`commit_with`](Self::commit_with), once the caller has published its change.
    pub fn unfence(&self, users: Vec<UserId>) {
        let _ = self.0.send_message(SessionsMsg::Unfence { users });
    }

    pub(super) async fn drain(&self) {
        let _ = self.0.drain_and_wait(None).await;
    }
}

pub(super) async fn spawn(
    indexes: Arc<Indexes>,
    writer: StoreWriter,
    config: SessionConfig,
    supervisor: ActorCell,
) -> Result<SessionsHandle, ActorProcessingErr> {
    let waiting = Waiting::default();
    let actor = SessionsActor { indexes, writer, config, waiting: waiting.clone() };
    let (actor, _) = Actor::spawn_linked(None, actor, (), supervisor).await?;
    Ok(SessionsHandle(Mailbox::new(actor, waiting)))
}

struct SessionsActor {
    indexes: Arc<Indexes>,
    writer: StoreWriter,
    config: SessionConfig,
    /// The calls waiting in this actor's mailbox (see [`super::mailbox`]).
    waiting: Waiting,
}

#[derive(Default)]
struct State {
    /// Sessions created, changed (`Some`) or ended (`None`) in this batch.
    overlay: Overlay<TokenHash, Option<Arc<Session>>>,
    /// Users whose sessions are being ended with a change to their account: no session starts or extends.
    fenced: HashSet<UserId>,
}

impl Actor for SessionsActor {
    type Msg = SessionsMsg;
    type State = State;
    type Arguments = ();

    async fn pre_start(&self, _: ActorRef<SessionsMsg>, _: ()) -> Result<State, ActorProcessingErr> {
        Ok(State::default())
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
                match (self.create(state, user, remember_me, client, start), start) {
                    (Ok((token, hash, session)), start) => {
                        state.overlay.stage(hash, Some(Arc::clone(&session)));
                        let mut ops = vec![put(hash, &session)];
                        match start {
                            Start::SignIn => ops.push(logged(action::SIGN_IN_SUCCEEDED, "")),
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
                    (Err(CreateSessionError::Banned), Start::SignIn) => {
                        let refused = logged(action::SIGN_IN_REFUSED, "account is banned");
                        state.overlay.add_result([refused], reply, Err(CreateSessionError::Banned));
                    }
                    (Err(e), _) => drop(reply.send(Err(e))),
                }
            }
            SessionsMsg::SweepExpired { reply } => {
                // The sessions ended since the last sweep are gone from the index by now.
                self.indexes.sessions.forget_unused_agents();
                let now = Timestamp::now();
                let expired = self.indexes.sessions.expired(now);
                let count = expired.len();
                for (_, hash) in &expired {
                    state.overlay.stage(*hash, None);
                }
                state.overlay.add(expired.into_iter().map(delete), reply, count);
            }
            SessionsMsg::Refresh { hash, reply } => match self.get(state, &hash) {
                // A banned (or being banned) user's session is not extended: it is about to end, and a refresh
                // written after its end would bring it back.
                Some(current)
                    if !current.is_expired(Timestamp::now()) && self.may_hold_session(state, current.user_id) =>
                {
                    let now = Timestamp::now();
                    let session = Arc::new(Session {
                        expires_at: now.plus(self.lifetime(current.remember_me)),
                        updated_at: now,
                        ..Session::clone(&current)
                    });
                    state.overlay.stage(hash, Some(Arc::clone(&session)));
                    let refresh = StoreOp::RefreshSession(hash, convert::session_record(&session));
                    // Several nodes: ended on another node a moment ago, it stays ended (the caller sees none).
                    let gone = |c: &Conflict| (*c == Conflict::SessionGone).then_some(Ok(None));
                    state.overlay.add_answering([refresh], reply, Ok(Some(session)), gone);
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
            SessionsMsg::CommitEnding { users, impersonators, mut ops, starts, reply } => {
                let admins: Vec<UserId> = users.iter().chain(&impersonators).copied().collect();
                let mut ending = self.indexes.sessions.of_users(&users);
                ending.extend(self.indexes.sessions.impersonated_by(&admins));
                ending.extend(state.overlay.iter().filter_map(|(h, s)| {
                    let session = s.as_ref()?;
                    let by = session.impersonated_by.as_deref();
                    let ends = users.contains(&session.user_id) || by.is_some_and(|a| admins.contains(a));
                    ends.then_some((session.user_id, *h))
                }));
                ending.sort_unstable();
                ending.dedup();
                for (_, hash) in &ending {
                    state.overlay.stage(*hash, None);
                }
                // Fenced until published: no session of `users` and no impersonation by `admins` starts meanwhile.
                state.fenced.extend(admins);
                // Every session of each account in the store, those this node has not seen included; and the
                // impersonations by the administrators among them or demoted, as this node knows them (a session
                // check refuses any other once the change is applied here).
                ops.extend(users.iter().map(|&user| end_all(user, None)));
                ops.extend(ending.into_iter().filter(|(user, _)| !users.contains(user)).map(delete));
                let started = starts.into_iter().map(|start| self.start_with(state, start, &mut ops)).collect();
                // A conflict (several nodes) is the users actor's to answer: its change broke a rule of the cluster.
                let conflict = |c: &Conflict| Some(Err(Refusal::Conflict(c.clone())));
                state.overlay.add_answering(ops, reply, Ok(started), conflict);
            }
            SessionsMsg::Unfence { users } => {
                for user in users {
                    state.fenced.remove(&user);
                }
            }
            SessionsMsg::Remote { sessions, gate, reply } => {
                // Only what this node's own commits have not written since (a refresh committed on another node
                // before a sign-out here does not bring the session back).
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
                let _ = reply.send(());
            }
            SessionsMsg::Flush => return self.flush(state).await,
        }
        if state.overlay.schedule_flush(&myself, || SessionsMsg::Flush) {
            self.flush(state).await?;
        }
        Ok(())
    }
}

impl SessionsActor {
    /// A sign-in's session, staged with its records in `ops` (a refusal of a banned account is recorded too).
    fn start_with(&self, state: &mut State, start: StartWith, ops: &mut Vec<StoreOp>) -> Started {
        let StartWith { user, remember_me, client } = start;
        let ip = client.ip_address.clone();
        let logged = |what, detail: &str| audit::entry(what, Some(user), Some(user.into()), &ip, detail.into());
        match self.create(state, user, remember_me, client, Start::SignIn) {
            Ok((token, hash, session)) => {
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
        state.overlay.flush(|ops| overlay::write(&self.writer, ops), |(hash, s)| sessions.publish(hash, s)).await;
        Ok(())
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

    fn lifetime(&self, remember_me: bool) -> Duration {
        let secs = if remember_me { self.config.expires_in_secs } else { self.config.short_expires_in_secs };
        Duration::from_secs(secs)
    }

    fn create(
        &self,
        state: &State,
        user: UserId,
        remember_me: bool,
        client: Client,
        start: Start,
    ) -> Result<(SessionToken, TokenHash, Arc<Session>), CreateSessionError> {
        let now = Timestamp::now();
        match self.indexes.users.get(user) {
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
        let (lifetime, impersonated_by) = match start {
            Start::Impersonation { by } => (IMPERSONATION_LIFETIME.min(self.lifetime(false)), Some(by)),
            _ => (self.lifetime(remember_me), None),
        };
        let session = Arc::new(Session {
            id: SessionId::new(),
            user_id: user,
            expires_at: now.plus(lifetime),
            created_at: now,
            updated_at: now,
            ip_address: client.ip_address.into(),
            user_agent: self.indexes.sessions.user_agent(&client.user_agent),
            // An impersonation is never extended, and its cookie ends with the browser.
            remember_me: remember_me && impersonated_by.is_none(),
            impersonated_by: impersonated_by.map(Box::new),
        });
        Ok((token, hash, session))
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn session(user: UserId, created_ms: i64) -> Arc<Session> {
        let at = Timestamp::from_millis(created_ms);
        Arc::new(Session {
            id: SessionId::new(),
            user_id: user,
            expires_at: at,
            created_at: at,
            updated_at: at,
            ip_address: "192.0.2.1".into(),
            user_agent: "test".into(),
            remember_me: true,
            impersonated_by: None,
        })
    }

    #[test]
    fn sessions_share_one_copy_of_each_user_agent_until_none_holds_it() {
        let index = SessionIndex::default();
        let (a, b, c) = (index.user_agent("Firefox"), index.user_agent("Firefox"), index.user_agent("curl"));
        assert_eq!(a.as_str(), "Firefox");
        assert_eq!(a.holders(), 3, "the index's copy, a and b: one text");
        assert_eq!(index.forget_unused_agents(), 2, "both still held");
        drop((a, b));
        assert_eq!(index.forget_unused_agents(), 1, "only curl is left");
        assert_eq!(index.user_agent("Firefox").holders(), 2, "made again on its next use");
        drop(c);
    }

    /// Three users side by side in the ordered set; the middle one's hashes at both ends of the hash range.
    #[test]
    fn a_users_sessions_are_theirs_only_after_every_change_and_after_a_load() {
        let (before, user, after) =
            (UserId::from_bytes([1; 16]), UserId::from_bytes([2; 16]), UserId::from_bytes([3; 16]));
        let (low, mid, high) = ([0; 32], [7; 32], [u8::MAX; 32]);
        let sessions = [
            (high, session(user, 3)),
            (low, session(user, 1)),
            ([5; 32], session(before, 1)),
            ([6; 32], session(after, 1)),
            (mid, session(user, 2)),
        ];
        let hashes = |index: &SessionIndex, u| index.of_user(u).into_iter().map(|(h, _)| h).collect::<Vec<_>>();

        let index = SessionIndex::default();
        for (hash, s) in &sessions {
            index.publish(*hash, Some(Arc::clone(s)));
        }
        index.publish(mid, Some(session(user, 2)));
        assert_eq!(hashes(&index, user), [low, mid, high], "oldest first; a refresh does not duplicate");
        assert_eq!(index.of_users(&[before, after]), [(before, [5; 32]), (after, [6; 32])]);

        index.publish(low, None);
        index.publish([9; 32], None);
        assert_eq!(hashes(&index, user), [mid, high]);
        assert_eq!(index.len(), 4);

        let loaded = SessionIndex::default();
        let mut pairs = Vec::new();
        for (hash, s) in &sessions {
            pairs.push((s.user_id, *hash));
            loaded.publish_loaded(*hash, Arc::clone(s));
        }
        loaded.finish_load(pairs);
        assert_eq!(hashes(&loaded, user), [low, mid, high]);
        assert_eq!(hashes(&loaded, after), [[6; 32]]);
        assert!(loaded.of_user(UserId::from_bytes([4; 16])).is_empty());
    }
}
