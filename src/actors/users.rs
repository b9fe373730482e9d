//! The users actor: accounts, the e-mail index, role and ban changes, and the guards on them.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ractor::{Actor, ActorCell, ActorProcessingErr, ActorRef, RpcReplyPort};

use super::attempts::AttemptLimiter;
use super::audit::{self, action};
use super::batch::Batch;
use super::{Indexes, SessionsHandle, Unavailable, call};
use crate::domain::{Email, Name, OrgId, Role, Timestamp, User, UserId};
use crate::store::{StoreOp, StoreWriter, UserRecordV1};

/// Read index of users: by id, and by normalised e-mail.
#[derive(Default)]
pub struct UserIndex {
    by_id: papaya::HashMap<UserId, Arc<User>>,
    by_email: papaya::HashMap<Email, UserId>,
}

impl UserIndex {
    pub fn get(&self, id: UserId) -> Option<Arc<User>> {
        self.by_id.pin().get(&id).cloned()
    }

    pub fn by_email(&self, email: &Email) -> Option<Arc<User>> {
        let id = *self.by_email.pin().get(email)?;
        self.get(id)
    }

    /// Every user, ordered by creation time, then id.
    pub fn list(&self) -> Vec<Arc<User>> {
        let mut users: Vec<Arc<User>> = self.by_id.pin().values().cloned().collect();
        users.sort_unstable_by_key(|u| (u.created_at, u.id));
        users
    }

    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    /// Whether any account has role `admin` (banned or not): the bootstrap variables act only when none has.
    pub fn any_admin(&self) -> bool {
        self.by_id.pin().values().any(|u| u.role.is_admin())
    }

    /// Used at load and after a durable write; only the users actor writes.
    pub(crate) fn publish(&self, user: Arc<User>) {
        self.by_email.pin().insert(user.email.clone(), user.id);
        self.by_id.pin().insert(user.id, user);
    }

    fn active_admins(&self) -> impl Iterator<Item = UserId> {
        self.by_id.pin().values().filter(|u| u.is_active_admin()).map(|u| u.id).collect::<Vec<_>>().into_iter()
    }
}

/// A new account, validated.
pub struct NewUser {
    pub name: Name,
    pub email: Email,
    pub image: Option<String>,
    pub role: Role,
    pub password_hash: String,
}

/// An administrator's change to an account. `None` leaves a field as it is.
#[derive(Debug, Default, Clone)]
pub struct UserChange {
    pub role: Option<Role>,
    /// `Some(true)` bans, `Some(false)` unbans (and forgets the reason).
    pub banned: Option<bool>,
    /// Recorded only on an account that is (or is being) banned.
    pub ban_reason: Option<String>,
    /// `Some(None)` removes the account from its organization.
    pub organization: Option<Option<OrgId>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CreateUserError {
    #[error("User already exists. Use another email.")]
    EmailTaken,
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum UpdateUserError {
    #[error("caller is no longer an administrator")]
    NotAdmin,
    #[error("user not found")]
    UserNotFound,
    #[error("organization not found")]
    OrganizationNotFound,
    #[error("you cannot ban yourself")]
    SelfBan,
    #[error("the last active administrator cannot be demoted or banned")]
    LastAdmin,
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
}

/// Why a sign-in may not check a password now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AttemptRefused {
    #[error("too many failed sign-ins for this account; retry after {0:?}")]
    Locked(Duration),
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
}

/// What [`UsersHandle::ensure_admin`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EnsureAdmin {
    Created(UserId),
    Promoted(UserId),
}

pub enum UsersMsg {
    Create {
        user: NewUser,
        ip: String,
        reply: RpcReplyPort<Result<Arc<User>, CreateUserError>>,
    },
    Update {
        by: UserId,
        target: UserId,
        change: UserChange,
        ip: String,
        reply: RpcReplyPort<Result<(), UpdateUserError>>,
    },
    EnsureAdmin {
        name: Name,
        email: Email,
        password_hash: String,
        reply: RpcReplyPort<Result<EnsureAdmin, Unavailable>>,
    },
    BeginAttempt {
        user: UserId,
        ip: String,
        reply: RpcReplyPort<Result<(), AttemptRefused>>,
    },
    FinishAttempt {
        user: Option<UserId>,
        success: bool,
        ip: String,
        reply: RpcReplyPort<Result<(), Unavailable>>,
    },
    Flush,
}

/// Typed handle to the users actor.
#[derive(Clone)]
pub struct UsersHandle(ActorRef<UsersMsg>);

impl UsersHandle {
    /// Creates an account (sign-up from address `ip`).
    pub async fn create(&self, user: NewUser, ip: String) -> Result<Arc<User>, CreateUserError> {
        call(&self.0, |reply| UsersMsg::Create { user, ip, reply }).await?
    }

    /// Applies `change` to `target` on behalf of administrator `by`, calling from `ip`. A ban ends every session
    /// of `target` before this returns.
    pub async fn update(
        &self,
        by: UserId,
        target: UserId,
        change: UserChange,
        ip: String,
    ) -> Result<(), UpdateUserError> {
        call(&self.0, |reply| UsersMsg::Update { by, target, change, ip, reply }).await?
    }

    /// Creates `email` as an administrator, or makes the existing account with that e-mail an unbanned
    /// administrator (keeping its password). `password_hash` is used only when creating.
    pub async fn ensure_admin(
        &self,
        name: Name,
        email: Email,
        password_hash: String,
    ) -> Result<EnsureAdmin, Unavailable> {
        call(&self.0, |reply| UsersMsg::EnsureAdmin { name, email, password_hash, reply }).await?
    }

    /// Reserves one password check against `user`'s failure limit (see [`super::attempts`]). A refusal is
    /// recorded in the audit log before it is answered. Every reservation must be ended with
    /// [`finish_attempt`](Self::finish_attempt).
    pub async fn begin_attempt(&self, user: UserId, ip: String) -> Result<(), AttemptRefused> {
        call(&self.0, |reply| UsersMsg::BeginAttempt { user, ip, reply }).await?
    }

    /// Ends a sign-in's password check (`user` is `None` for an unknown e-mail). A failure is recorded in the
    /// audit log before this returns; a success is recorded with the new session, by the sessions actor.
    pub async fn finish_attempt(&self, user: Option<UserId>, success: bool, ip: String) -> Result<(), Unavailable> {
        call(&self.0, |reply| UsersMsg::FinishAttempt { user, success, ip, reply }).await?
    }

    pub(super) async fn drain(&self) {
        let _ = self.0.drain_and_wait(None).await;
    }
}

/// The per-account limit on failed sign-ins.
#[derive(Debug, Clone, Copy)]
pub struct AttemptPolicy {
    pub max_failures: u32,
    pub window: Duration,
}

pub(super) async fn spawn(
    indexes: Arc<Indexes>,
    writer: StoreWriter,
    sessions: SessionsHandle,
    attempts: AttemptPolicy,
    supervisor: ActorCell,
) -> Result<UsersHandle, ActorProcessingErr> {
    let actor = UsersActor { indexes, writer, sessions, attempts };
    let (actor, _) = Actor::spawn_linked(None, actor, (), supervisor).await?;
    Ok(UsersHandle(actor))
}

struct UsersActor {
    indexes: Arc<Indexes>,
    writer: StoreWriter,
    sessions: SessionsHandle,
    attempts: AttemptPolicy,
}

/// Changes not yet durable. Lookups see these first, so messages in one batch build on each other.
struct State {
    attempts: AttemptLimiter,
    pending: HashMap<UserId, Arc<User>>,
    pending_emails: HashMap<Email, UserId>,
    /// Users banned in this batch: their sessions are ended after the write, before anyone is answered.
    banned: Vec<UserId>,
    batch: Batch,
}

impl Actor for UsersActor {
    type Msg = UsersMsg;
    type State = State;
    type Arguments = ();

    async fn pre_start(&self, _: ActorRef<UsersMsg>, _: ()) -> Result<State, ActorProcessingErr> {
        Ok(State {
            attempts: AttemptLimiter::new(self.attempts.max_failures, self.attempts.window),
            pending: HashMap::new(),
            pending_emails: HashMap::new(),
            banned: Vec::new(),
            batch: Batch::default(),
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<UsersMsg>,
        msg: UsersMsg,
        state: &mut State,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            UsersMsg::Create { user, ip, reply } => match self.create(state, user) {
                Ok(user) => {
                    let logged =
                        audit::entry(action::USER_CREATED, Some(user.id), Some(user.id.to_bytes()), &ip, String::new());
                    state.batch.add([put(&user), logged], reply, user);
                }
                Err(e) => drop(reply.send(Err(e))),
            },
            UsersMsg::Update { by, target, change, ip, reply } => match self.update(state, by, target, change) {
                Ok((before, after)) => {
                    let mut ops = vec![put(&after)];
                    ops.extend(
                        changes(&before, &after)
                            .map(|(what, detail)| audit::entry(what, Some(by), Some(after.id.to_bytes()), &ip, detail)),
                    );
                    state.batch.add(ops, reply, ());
                }
                Err(e) => drop(reply.send(Err(e))),
            },
            UsersMsg::EnsureAdmin { name, email, password_hash, reply } => {
                let (user, outcome) = self.ensure_admin(state, name, email, password_hash);
                let detail = format!("administrator set up from the command line or bootstrap: {}", user.email);
                let logged = audit::entry(action::ROLE_CHANGED, None, Some(user.id.to_bytes()), "", detail);
                state.batch.add([put(&user), logged], reply, outcome);
            }
            UsersMsg::BeginAttempt { user, ip, reply } => match state.attempts.begin(user, Instant::now()) {
                Ok(()) => drop(reply.send(Ok(()))),
                Err(wait) => {
                    let detail = "too many failed sign-ins".to_owned();
                    let logged = audit::entry(action::SIGN_IN_REFUSED, Some(user), Some(user.to_bytes()), &ip, detail);
                    state.batch.add_result([logged], reply, Err(AttemptRefused::Locked(wait)));
                }
            },
            UsersMsg::FinishAttempt { user, success, ip, reply } => {
                if let Some(user) = user {
                    state.attempts.finish(user, success);
                }
                if success {
                    let _ = reply.send(Ok(()));
                } else {
                    let detail = if user.is_some() { "wrong password" } else { "unknown e-mail" }.to_owned();
                    let logged = audit::entry(action::SIGN_IN_FAILED, user, user.map(UserId::to_bytes), &ip, detail);
                    state.batch.add([logged], reply, ());
                }
            }
            UsersMsg::Flush => return self.flush(state).await,
        }
        state.batch.schedule_flush(&myself, || UsersMsg::Flush);
        Ok(())
    }
}

impl UsersActor {
    fn get(&self, state: &State, id: UserId) -> Option<Arc<User>> {
        state.pending.get(&id).cloned().or_else(|| self.indexes.users.get(id))
    }

    fn stage(&self, state: &mut State, user: Arc<User>) {
        state.pending_emails.insert(user.email.clone(), user.id);
        state.pending.insert(user.id, user);
    }

    fn email_taken(&self, state: &State, email: &Email) -> bool {
        state.pending_emails.contains_key(email) || self.indexes.users.by_email(email).is_some()
    }

    fn create(&self, state: &mut State, new: NewUser) -> Result<Arc<User>, CreateUserError> {
        if self.email_taken(state, &new.email) {
            return Err(CreateUserError::EmailTaken);
        }
        let now = Timestamp::now();
        let user = Arc::new(User {
            id: UserId::new(),
            name: new.name,
            email: new.email,
            image: new.image,
            role: new.role,
            banned: false,
            ban_reason: None,
            organization_id: None,
            password_hash: new.password_hash,
            created_at: now,
            updated_at: now,
        });
        self.stage(state, Arc::clone(&user));
        Ok(user)
    }

    fn update(
        &self,
        state: &mut State,
        by: UserId,
        target: UserId,
        change: UserChange,
    ) -> Result<(Arc<User>, Arc<User>), UpdateUserError> {
        // The HTTP side checked the caller's role when the request came in; check again here, in message order,
        // so a demotion that landed in between is honoured.
        if !self.get(state, by).is_some_and(|u| u.is_active_admin()) {
            return Err(UpdateUserError::NotAdmin);
        }
        let current = self.get(state, target).ok_or(UpdateUserError::UserNotFound)?;
        if change.banned == Some(true) && target == by {
            return Err(UpdateUserError::SelfBan);
        }
        if let Some(Some(org)) = change.organization
            && self.indexes.orgs.get(org).is_none()
        {
            return Err(UpdateUserError::OrganizationNotFound);
        }
        let mut user = User::clone(&current);
        if let Some(role) = change.role {
            user.role = role;
        }
        if let Some(banned) = change.banned {
            user.banned = banned;
            user.ban_reason = None;
        }
        // A reason describes a ban: kept while the account is banned, dropped with the ban.
        if user.banned && change.ban_reason.is_some() {
            user.ban_reason = change.ban_reason;
        }
        if let Some(org) = change.organization {
            user.organization_id = org;
        }
        if current.is_active_admin() && !user.is_active_admin() && self.active_admin_count(state) <= 1 {
            return Err(UpdateUserError::LastAdmin);
        }
        user.updated_at = Timestamp::now();
        if user.banned && !current.banned {
            state.banned.push(user.id);
        }
        let user = Arc::new(user);
        self.stage(state, Arc::clone(&user));
        Ok((current, user))
    }

    fn ensure_admin(
        &self,
        state: &mut State,
        name: Name,
        email: Email,
        password_hash: String,
    ) -> (Arc<User>, EnsureAdmin) {
        let existing =
            state.pending_emails.get(&email).copied().or_else(|| self.indexes.users.by_email(&email).map(|u| u.id));
        let admin = Role::admin();
        let (user, outcome) = match existing.and_then(|id| self.get(state, id)) {
            Some(current) => {
                let user = User {
                    role: admin,
                    banned: false,
                    ban_reason: None,
                    updated_at: Timestamp::now(),
                    ..User::clone(&current)
                };
                (user, EnsureAdmin::Promoted(current.id))
            }
            None => {
                let now = Timestamp::now();
                let id = UserId::new();
                let user = User {
                    id,
                    name,
                    email,
                    image: None,
                    role: admin,
                    banned: false,
                    ban_reason: None,
                    organization_id: None,
                    password_hash,
                    created_at: now,
                    updated_at: now,
                };
                (user, EnsureAdmin::Created(id))
            }
        };
        let user = Arc::new(user);
        self.stage(state, Arc::clone(&user));
        (user, outcome)
    }

    /// Active administrators as they will be once the pending batch is durable.
    fn active_admin_count(&self, state: &State) -> usize {
        let committed = self.indexes.users.active_admins().filter(|id| !state.pending.contains_key(id)).count();
        committed + state.pending.values().filter(|u| u.is_active_admin()).count()
    }

    async fn flush(&self, state: &mut State) -> Result<(), ActorProcessingErr> {
        let (durable, answers) = state.batch.write(&self.writer).await;
        let pending = std::mem::take(&mut state.pending);
        state.pending_emails.clear();
        let banned = std::mem::take(&mut state.banned);
        if durable {
            for user in pending.into_values() {
                self.indexes.users.publish(user);
            }
            // The index now says "banned", so no new session can start for them (the sessions actor checks it);
            // end the existing ones before anyone hears that the ban is done.
            for id in banned {
                if let Err(Unavailable) = self.sessions.revoke_user(id).await {
                    // Their sessions stop working anyway (every session check looks at the user's current state);
                    // the records are removed at the next start.
                    tracing::error!(user = %id, "could not end the sessions of a banned user");
                }
            }
        }
        answers.send(durable);
        Ok(())
    }
}

/// What an administrator's change did, as audit actions with their details.
fn changes<'a>(before: &'a User, after: &'a User) -> impl Iterator<Item = (&'static str, String)> + 'a {
    let org = |o: Option<OrgId>| o.map_or_else(|| "none".to_owned(), |id| id.to_string());
    let role =
        (before.role != after.role).then(|| (action::ROLE_CHANGED, format!("{} -> {}", before.role, after.role)));
    let ban = match (before.banned, after.banned) {
        (false, true) => Some((action::BANNED, after.ban_reason.clone().unwrap_or_default())),
        (true, false) => Some((action::UNBANNED, String::new())),
        _ if before.ban_reason != after.ban_reason => {
            Some((action::BAN_REASON_CHANGED, after.ban_reason.clone().unwrap_or_default()))
        }
        _ => None,
    };
    let membership = (before.organization_id != after.organization_id).then(|| {
        (action::ORGANIZATION_CHANGED, format!("{} -> {}", org(before.organization_id), org(after.organization_id)))
    });
    [role, ban, membership].into_iter().flatten()
}

/// The persisted form of a user.
pub(crate) fn record(user: &User) -> UserRecordV1 {
    UserRecordV1 {
        id: user.id.to_bytes(),
        name: user.name.as_str().to_owned(),
        email: user.email.as_str().to_owned(),
        image: user.image.clone(),
        role: user.role.as_str().to_owned(),
        banned: user.banned,
        ban_reason: user.ban_reason.clone(),
        organization_id: user.organization_id.map(OrgId::to_bytes),
        password_hash: user.password_hash.clone(),
        created_at_ms: user.created_at.as_millis(),
        updated_at_ms: user.updated_at.as_millis(),
    }
}

fn put(user: &User) -> StoreOp {
    StoreOp::PutUser(record(user))
}
