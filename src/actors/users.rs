//! The users actor: accounts, the e-mail index, role and ban changes, and the guards on them.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ractor::{Actor, ActorCell, ActorProcessingErr, ActorRef, RpcReplyPort};

use super::attempts::{AttemptLimiter, Row};
use super::audit::{self, action};
use super::batch::Batch;
use super::{Indexes, SessionsHandle, Unavailable, call};
use crate::domain::{Email, Name, OrgId, Role, Timestamp, User, UserId};
use crate::store::{StoreOp, StoreWriter, convert};

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

/// How a sign-in's password check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Checked {
    Verified,
    Wrong,
    /// Never checked (the hashing pool was full): released without counting as a failure.
    NotChecked,
}

/// What [`UsersHandle::ensure_admin`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EnsureAdmin {
    Created(UserId),
    Promoted(UserId),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum EnsureAdminError {
    /// An account with the e-mail exists and promoting it was not asked for: whoever signed up with the
    /// operator's e-mail would otherwise become administrator with their own password.
    #[error("an account with this e-mail already exists")]
    Exists,
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
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
        promote_existing: bool,
        reply: RpcReplyPort<Result<EnsureAdmin, EnsureAdminError>>,
    },
    BeginAttempt {
        email: Email,
        user: Option<UserId>,
        ip: String,
        reply: RpcReplyPort<Result<(), AttemptRefused>>,
    },
    FinishAttempt {
        email: Email,
        user: Option<UserId>,
        checked: Checked,
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

    /// Creates `email` as an administrator. An existing account with that e-mail is refused, unless
    /// `promote_existing`: then it becomes an unbanned administrator with `password_hash` as its password, and
    /// every session it had ends in the same commit.
    pub async fn ensure_admin(
        &self,
        name: Name,
        email: Email,
        password_hash: String,
        promote_existing: bool,
    ) -> Result<EnsureAdmin, EnsureAdminError> {
        call(&self.0, |reply| UsersMsg::EnsureAdmin { name, email, password_hash, promote_existing, reply }).await?
    }

    /// Reserves one password check against the failure limit of `email` (see [`super::attempts`]); `user` is the
    /// account it names, if any, for the audit log. Every reservation must be ended with
    /// [`finish_attempt`](Self::finish_attempt), whatever happens to the request in between.
    pub async fn begin_attempt(&self, email: Email, user: Option<UserId>, ip: String) -> Result<(), AttemptRefused> {
        call(&self.0, |reply| UsersMsg::BeginAttempt { email, user, ip, reply }).await?
    }

    /// Ends a sign-in's password check. A failure is recorded in the audit log (within the bounds described in
    /// [`super::attempts`]) before this returns; a success is recorded with the new session, by the sessions
    /// actor.
    pub async fn finish_attempt(
        &self,
        email: Email,
        user: Option<UserId>,
        checked: Checked,
        ip: String,
    ) -> Result<(), Unavailable> {
        call(&self.0, |reply| UsersMsg::FinishAttempt { email, user, checked, ip, reply }).await?
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
    /// Users whose sessions end with this batch (banned, or given a new password): committed in the same
    /// transaction as the batch, so the change and the end of the sessions are durable together or not at all.
    ending: Vec<UserId>,
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
            ending: Vec::new(),
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
                        audit::entry(action::USER_CREATED, Some(user.id), Some(user.id.into()), &ip, String::new());
                    state.batch.add([put(&user), logged], reply, user);
                }
                Err(e) => drop(reply.send(Err(e))),
            },
            UsersMsg::Update { by, target, change, ip, reply } => match self.update(state, by, target, change) {
                Ok((before, after)) => {
                    let mut ops = vec![put(&after)];
                    ops.extend(
                        changes(&before, &after)
                            .map(|(what, detail)| audit::entry(what, Some(by), Some(after.id.into()), &ip, detail)),
                    );
                    state.batch.add(ops, reply, ());
                }
                Err(e) => drop(reply.send(Err(e))),
            },
            UsersMsg::EnsureAdmin { name, email, password_hash, promote_existing, reply } => {
                match self.ensure_admin(state, name, email, password_hash, promote_existing) {
                    Ok((user, outcome)) => {
                        let detail = match outcome {
                            EnsureAdmin::Created(_) => "administrator created from the command line or bootstrap",
                            EnsureAdmin::Promoted(_) => {
                                "existing account made administrator from the command line or bootstrap; \
                                 password replaced, sessions ended"
                            }
                        };
                        let logged = audit::entry(action::ROLE_CHANGED, None, Some(user.id.into()), "", detail.into());
                        state.batch.add([put(&user), logged], reply, outcome);
                    }
                    Err(e) => drop(reply.send(Err(e))),
                }
            }
            UsersMsg::BeginAttempt { email, user, ip, reply } => match state.attempts.begin(&email, Instant::now()) {
                Ok(()) => drop(reply.send(Ok(()))),
                Err(locked) => {
                    let detail = format!("too many failed sign-ins: {} in this window", locked.failures);
                    let rows = attempt_rows(&locked.row, action::SIGN_IN_REFUSED, user, &ip, detail);
                    state.batch.add_result(rows, reply, Err(AttemptRefused::Locked(locked.wait)));
                }
            },
            UsersMsg::FinishAttempt { email, user, checked, ip, reply } => {
                let now = Instant::now();
                let row =
                    state.attempts.finish(&email, checked != Checked::NotChecked, checked == Checked::Verified, now);
                let detail = if user.is_some() { "wrong password" } else { "unknown e-mail" };
                let rows = attempt_rows(&row, action::SIGN_IN_FAILED, user, &ip, detail.to_owned());
                if rows.is_empty() {
                    let _ = reply.send(Ok(()));
                } else {
                    state.batch.add(rows, reply, ());
                }
            }
            UsersMsg::Flush => return self.flush(state).await,
        }
        if state.batch.schedule_flush(&myself, || UsersMsg::Flush) {
            self.flush(state).await?;
        }
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
        // Every ban ends the sessions, even of an account already banned: a ban is how an administrator makes
        // sure nobody is signed in there.
        if change.banned == Some(true) {
            state.ending.push(user.id);
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
        promote_existing: bool,
    ) -> Result<(Arc<User>, EnsureAdmin), EnsureAdminError> {
        let existing =
            state.pending_emails.get(&email).copied().or_else(|| self.indexes.users.by_email(&email).map(|u| u.id));
        let admin = Role::admin();
        let now = Timestamp::now();
        let (user, outcome) = match existing.and_then(|id| self.get(state, id)) {
            Some(_) if !promote_existing => return Err(EnsureAdminError::Exists),
            Some(current) => {
                // Whoever held this account before (perhaps someone who signed up with the operator's e-mail)
                // loses it: the operator's password replaces theirs and their sessions end.
                state.ending.push(current.id);
                let user = User {
                    role: admin,
                    banned: false,
                    ban_reason: None,
                    password_hash,
                    updated_at: now,
                    ..User::clone(&current)
                };
                (user, EnsureAdmin::Promoted(current.id))
            }
            None => {
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
        Ok((user, outcome))
    }

    /// Active administrators as they will be once the pending batch is durable.
    fn active_admin_count(&self, state: &State) -> usize {
        let committed = self.indexes.users.active_admins().filter(|id| !state.pending.contains_key(id)).count();
        committed + state.pending.values().filter(|u| u.is_active_admin()).count()
    }

    async fn flush(&self, state: &mut State) -> Result<(), ActorProcessingErr> {
        let mut ending = std::mem::take(&mut state.ending);
        let (durable, answers) = if ending.is_empty() {
            state.batch.write(&self.writer).await
        } else {
            // The sessions actor commits our records with the end of those users' sessions: one transaction.
            ending.sort_unstable();
            ending.dedup();
            let (ops, answers) = state.batch.take();
            let committed = self.sessions.commit_ending(ending.clone(), ops).await;
            if committed.is_err() {
                tracing::error!("store write failed; the batch is refused and nothing of it applied");
            }
            (committed.is_ok(), answers)
        };
        let pending = std::mem::take(&mut state.pending);
        state.pending_emails.clear();
        if durable {
            for user in pending.into_values() {
                self.indexes.users.publish(user);
            }
        }
        if !ending.is_empty() {
            // After publishing: from here on the sessions actor reads the users' new state from the index.
            self.sessions.unfence(ending);
        }
        answers.send(durable);
        Ok(())
    }
}

/// The audit rows a sign-in failure or refusal gets under the bounds of [`super::attempts`].
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

fn put(user: &User) -> StoreOp {
    StoreOp::PutUser(convert::user_record(user))
}
