//! The service facade: what the HTTP handlers (and nothing else in the front end) call.
//!
//! Reads go to the lock-free indexes, changes to the owning actor, passwords to the hashing pool; an operation
//! that needs several of them (sign-up: hash, create the account, start a session; sign-in: reserve an attempt,
//! verify, report, start a session) is orchestrated here, so a handler reads parse → facade → answer and no actor
//! waits on another one's work. Each operation has its own error enum, whose messages are the ones clients see.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::task::TaskTracker;
use tracing::Instrument;

use crate::actors::audit::AuditLog;
use crate::actors::orgs::{CreateOrgError, UpdateOrgError};
use crate::actors::sessions::{Client, CreateSessionError, Revoke, Start, StartWith};
use crate::actors::users::{
    AttemptRefused, Checked, Compose, CreateUserError, DeleteOrgError, DeleteUserError, IssueError, NewUser, OwnChange,
    OwnChangeError, Place, ResetError, UpdateUserError, UserChange,
};
use crate::actors::{Handles, Indexes, Unavailable};
use crate::domain::{
    AuditEntry, AuditId, Email, Name, OrgId, Organization, Password, RoleSet, Session, SessionToken, Slug, Timestamp,
    TokenHash, TokenKind, User, UserId,
};
use crate::hashing::{HashError, Hasher};
use crate::mail::Templates;
use crate::metrics::{Levels, Metrics};
use crate::store::Store;
use crate::store::follower::Freshness;

/// The earliest a request for a mailed link is answered: longer than either case (a link issued or not) takes,
/// so neither can be told by its time.
const LINK_ANSWER_FLOOR: Duration = Duration::from_millis(40);

/// The facade. Cheap to clone; built by [`crate::runtime::Core`].
#[derive(Clone)]
pub struct Accounts {
    pub(crate) indexes: Arc<Indexes>,
    pub(crate) actors: Handles,
    pub(crate) hasher: Hasher,
    pub(crate) roles: RoleSet,
    pub(crate) audit: AuditLog,
    /// Only for its health: whether it accepts commits.
    pub(crate) store: Arc<Store>,
    /// A remembered session used this long after its last refresh is extended.
    pub(crate) update_age: Duration,
    /// Work that must finish even when its request is gone (a sign-in's password check); shutdown waits for it.
    pub(crate) tasks: TaskTracker,
    /// Message templates, when a mail transport is configured (`None`: the calls that send mail are refused).
    pub(crate) templates: Option<Arc<Templates>>,
    /// Sign-up opens no session and sign-in is refused until the address is verified.
    pub(crate) require_verification: bool,
    /// The server's metrics (no-ops unless a metrics listener is configured).
    pub metrics: Arc<Metrics>,
    /// How far behind the shared database this node's state may be (always fresh on the embedded store).
    pub(crate) freshness: Arc<Freshness>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum MailError {
    /// No transport is configured: nothing could ever be delivered.
    #[error("Sending e-mail is not configured on this server")]
    NotConfigured,
    /// The outbox is full (`[email] max_outbox`): 503 until the sender has worked some off.
    #[error("Too much mail is waiting to be sent. Please try again later.")]
    OutboxFull,
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
}

/// A new account as the sign-up form gives it, validated.
pub struct SignUp {
    pub name: Name,
    pub email: Email,
    pub password: Password,
    pub image: Option<String>,
    pub remember_me: bool,
}

/// Why `/readyz` says 503.
#[derive(Debug)]
pub enum NotReady {
    /// The store refuses commits (a disk error, or the database is unreachable); the detail is for the log.
    Writes(String),
    /// Several nodes: this node has not caught up with the database for this long, and refuses session checks.
    Stale(Duration),
}

/// A valid session and its user, as they are right now.
pub struct Current {
    pub session: Arc<Session>,
    pub user: Arc<User>,
}

/// What sign-up and sign-in give: the new session's token, the session and the account.
pub struct SignedIn {
    pub token: SessionToken,
    pub session: Arc<Session>,
    pub user: Arc<User>,
}

/// What sign-up gives: a session, or (when addresses must be verified first) only the account, a link having been
/// mailed.
pub enum SignedUp {
    In(SignedIn),
    VerifyFirst(Arc<User>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SignUpError {
    #[error("User already exists. Use another email.")]
    EmailTaken,
    /// Every hashing worker is busy: a short overload, retry in a second.
    #[error("The service is busy. Please try again in a moment.")]
    Busy,
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SignInError {
    /// Unknown e-mail and wrong password alike: the answer does not say which accounts exist.
    #[error("Invalid email or password")]
    InvalidCredentials,
    #[error("Too many requests. Please try again later.")]
    Locked(Duration),
    #[error("You have been banned from this application. Please contact support if you believe this is an error.")]
    Banned,
    /// The password is right, but the address must be verified first.
    #[error("Email not verified")]
    EmailNotVerified,
    #[error("The service is busy. Please try again in a moment.")]
    Busy,
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ResetPasswordError {
    #[error("Invalid token")]
    InvalidToken,
    #[error("The service is busy. Please try again in a moment.")]
    Busy,
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
}

/// Errors of the administrator's calls on accounts (the better-auth admin plugin's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AdminError {
    #[error("User already exists. Use another email.")]
    EmailTaken,
    #[error("User not found")]
    UserNotFound,
    #[error("administrator role required")]
    NotAdmin,
    #[error("You cannot remove yourself")]
    SelfRemoval,
    #[error("You cannot ban yourself")]
    SelfBan,
    #[error("the last active administrator cannot be demoted, banned or removed")]
    LastAdmin,
    #[error("organization not found")]
    OrganizationNotFound,
    #[error("You cannot impersonate admins")]
    CannotImpersonateAdmin,
    #[error("The user is banned")]
    TargetBanned,
    #[error("The service is busy. Please try again in a moment.")]
    Busy,
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
}

impl AdminError {
    fn from_hash(e: HashError) -> Self {
        match e {
            HashError::Busy => Self::Busy,
            HashError::Params(_) | HashError::Failed(_) => Self::Unavailable(Unavailable),
        }
    }
}

impl From<UpdateUserError> for AdminError {
    fn from(e: UpdateUserError) -> Self {
        match e {
            UpdateUserError::NotAdmin => Self::NotAdmin,
            UpdateUserError::UserNotFound => Self::UserNotFound,
            UpdateUserError::OrganizationNotFound => Self::OrganizationNotFound,
            UpdateUserError::SelfBan => Self::SelfBan,
            UpdateUserError::LastAdmin => Self::LastAdmin,
            UpdateUserError::Unavailable(u) => Self::Unavailable(u),
        }
    }
}

/// Errors of the calls a signed-in user makes about their own account.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AccountError {
    /// The current password given to confirm the change is wrong.
    #[error("Invalid password")]
    InvalidPassword,
    #[error("Too many requests. Please try again later.")]
    Locked(Duration),
    /// The account went away meanwhile (deleted in another request).
    #[error("User not found")]
    UserNotFound,
    #[error("The last administrator cannot delete their account")]
    LastAdmin,
    #[error("The service is busy. Please try again in a moment.")]
    Busy,
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
}

impl From<SignInError> for AccountError {
    fn from(e: SignInError) -> Self {
        match e {
            SignInError::InvalidCredentials | SignInError::Banned | SignInError::EmailNotVerified => {
                Self::InvalidPassword
            }
            SignInError::Locked(wait) => Self::Locked(wait),
            SignInError::Busy => Self::Busy,
            SignInError::Unavailable(u) => Self::Unavailable(u),
        }
    }
}

impl From<HashError> for AccountError {
    fn from(e: HashError) -> Self {
        match e {
            HashError::Busy => Self::Busy,
            HashError::Params(_) | HashError::Failed(_) => Self::Unavailable(Unavailable),
        }
    }
}

impl From<HashError> for SignUpError {
    fn from(e: HashError) -> Self {
        match e {
            HashError::Busy => Self::Busy,
            HashError::Params(_) | HashError::Failed(_) => Self::Unavailable(Unavailable),
        }
    }
}

impl From<CreateSessionError> for SignUpError {
    fn from(_: CreateSessionError) -> Self {
        // The account was created a moment ago; only an unavailable store can refuse its first session.
        Self::Unavailable(Unavailable)
    }
}

impl From<CreateSessionError> for SignInError {
    fn from(e: CreateSessionError) -> Self {
        match e {
            CreateSessionError::Banned => Self::Banned,
            // The account vanished between the password check and now: to the caller it never existed.
            CreateSessionError::UnknownUser => Self::InvalidCredentials,
            CreateSessionError::Unavailable(u) => Self::Unavailable(u),
        }
    }
}

impl Accounts {
    pub fn roles(&self) -> &RoleSet {
        &self.roles
    }

    /// Whether any account has role `admin` (banned or not): the bootstrap variables act only when none has.
    pub fn any_admin(&self) -> bool {
        self.indexes.users.any_admin()
    }

    /// Hashes a new password on the pool (the first administrator's, from the command line).
    pub(crate) async fn hash(&self, password: Password) -> Result<String, HashError> {
        self.hasher.hash(password).await
    }

    // --- the caller's session: the hot path --------------------------------------------------------------

    /// The session behind `token`, if it is live and its user exists and is not banned. Two map reads, no actor
    /// hop: this is the hot path of every application behind us. Reading the user's *current* state here is what
    /// makes a ban or a demotion count from the very next request.
    pub fn current(&self, token: &SessionToken) -> Option<Current> {
        // Several nodes: a state too far behind the database may miss a sign-out or ban made elsewhere, so it
        // vouches for no session (fail closed); `session` answers 503 then.
        if self.freshness.check().is_err() {
            return None;
        }
        self.lookup(token)
    }

    /// [`current`](Self::current) without the freshness check, for callers that made it already.
    fn lookup(&self, token: &SessionToken) -> Option<Current> {
        let session = self.indexes.sessions.get(&token.hash())?;
        let now = Timestamp::now();
        if session.is_expired(now) {
            return None;
        }
        let user = self.indexes.users.get(session.user_id).filter(|u| !u.is_banned_at(now))?;
        Some(Current { session, user })
    }

    /// [`current`](Self::current), extended to a full lifetime when it is due (a remembered session used more than
    /// `update_age` after its last refresh) and `may_refresh`. The flag says whether it was extended (the cookie
    /// then goes out again). `None` also when the session ended between the read and the refresh.
    pub async fn session(
        &self,
        token: &SessionToken,
        may_refresh: bool,
    ) -> Result<Option<(Current, bool)>, Unavailable> {
        if self.freshness.check().is_err() {
            return Err(Unavailable);
        }
        let Some(current) = self.lookup(token) else { return Ok(None) };
        let due = current.session.remember_me && current.session.updated_at.plus(self.update_age) <= Timestamp::now();
        if !due || !may_refresh {
            return Ok(Some((current, false)));
        }
        let refreshed = self.actors.sessions.refresh(token.hash()).await?;
        Ok(refreshed.map(|session| (Current { session, user: current.user }, true)))
    }

    // --- auth -----------------------------------------------------------------------------------------------

    /// Whether the hashing pool would refuse a hash asked for now ([`Hasher::saturated`]): sign-in and sign-up
    /// answer 503 before reading the body, so a flood's excess costs neither a parse nor an attempt reservation.
    pub fn hashing_saturated(&self) -> bool {
        self.hasher.saturated()
    }

    pub async fn sign_up(&self, form: SignUp, client: Client) -> Result<SignedUp, SignUpError> {
        // Checked again inside the users actor; this early look only saves a 20 ms hash on an obvious duplicate.
        if self.indexes.users.by_email(&form.email).is_some() {
            return Err(SignUpError::EmailTaken);
        }
        let password_hash = self.hasher.hash(form.password).await?;
        let new = NewUser {
            name: form.name,
            email: form.email,
            image: form.image,
            role: self.roles.default_role(),
            password_hash,
        };
        let user = self.actors.users.create(new, client.ip_address.clone()).await.map_err(|e| match e {
            CreateUserError::EmailTaken => SignUpError::EmailTaken,
            CreateUserError::NotAdmin => SignUpError::Unavailable(Unavailable),
            CreateUserError::Unavailable(u) => SignUpError::Unavailable(u),
        })?;
        if self.require_verification {
            // The account exists either way; if this mail fails, the user asks for another link.
            let sent = self.mail_link(TokenKind::EmailVerification, user.email.clone(), None, &client.ip_address).await;
            if sent.is_err() {
                tracing::warn!(user = %user.id, "could not issue the verification link of a new account");
            }
            return Ok(SignedUp::VerifyFirst(user));
        }
        let (token, session) = self.actors.sessions.create(user.id, form.remember_me, client, Start::SignUp).await?;
        Ok(SignedUp::In(SignedIn { token, session, user }))
    }

    pub async fn sign_in(
        &self,
        email: Email,
        password: Password,
        remember_me: bool,
        client: Client,
    ) -> Result<SignedIn, SignInError> {
        let user = self.indexes.users.by_email(&email);
        // Kept only for an account whose hash was imported from better-auth: it is re-hashed with argon2id.
        let legacy =
            user.as_ref().filter(|u| u.has_legacy_hash()).map(|u| (u.password_hash.to_string(), password.clone()));
        let check = check_password(self.clone(), email, user.clone(), password, client.ip_address.clone());
        // A task of its own: hyper drops a handler whose client has closed the connection, and dropped between
        // the reservation and its end, the reservation would count against the account for good (anyone could
        // lock any account by hanging up). As a task it always ends, counting the outcome as it came out.
        let verified = self.tasks.spawn(check.in_current_span()).await.map_err(|_| Unavailable)??;
        let user = user.filter(|_| verified).ok_or(SignInError::InvalidCredentials)?;
        if self.require_verification && !user.email_verified {
            return Err(SignInError::EmailNotVerified);
        }
        if let Some((from, password)) = legacy {
            // The imported scrypt hash is replaced in the commit that starts the session. If every hashing worker
            // is busy, the sign-in still succeeds and the next one replaces it.
            if let Ok(to) = self.hasher.hash(password).await {
                let start = StartWith { user: user.id, remember_me, client: client.clone() };
                if let Some((token, session)) = self.actors.users.sign_in_upgrading(from, to, start).await? {
                    let user = self.indexes.users.get(user.id).unwrap_or(user);
                    return Ok(SignedIn { token, session, user });
                }
            }
        }
        let (token, session) = self.actors.sessions.create(user.id, remember_me, client, Start::SignIn).await?;
        let user = self.indexes.users.get(user.id).unwrap_or(user);
        Ok(SignedIn { token, session, user })
    }

    /// Ends the session of `token`; ending one that does not exist succeeds.
    pub async fn sign_out(&self, token: &SessionToken) -> Result<(), Unavailable> {
        self.actors.sessions.end(token.hash()).await
    }

    // --- a user's own account ----------------------------------------------------------------------------

    /// Checks `password` against `user`'s, under the same per-e-mail failure limit as a sign-in (a wrong
    /// confirmation counts as a failed sign-in), in a task that finishes whatever the connection does.
    async fn confirm_password(&self, user: &Arc<User>, password: Password, ip: &str) -> Result<(), AccountError> {
        let check = check_password(self.clone(), user.email.clone(), Some(Arc::clone(user)), password, ip.to_owned());
        match self.tasks.spawn(check.in_current_span()).await.map_err(|_| Unavailable)?? {
            true => Ok(()),
            false => Err(AccountError::InvalidPassword),
        }
    }

    /// Changes the caller's password after checking the current one. With `revoke_other_sessions` every session
    /// of the account ends in the same commit as the new password, and a new session is started for the caller
    /// (its token and session are returned).
    pub async fn change_password(
        &self,
        current: &Current,
        current_password: Password,
        new_password: Password,
        revoke_other_sessions: bool,
        client: Client,
    ) -> Result<(Arc<User>, Option<(SessionToken, Arc<Session>)>), AccountError> {
        self.confirm_password(&current.user, current_password, &client.ip_address).await?;
        let password_hash = self.hasher.hash(new_password).await?;
        let change = OwnChange::Password { password_hash, end_sessions: revoke_other_sessions };
        let user = self.change_own(current.user.id, change, &client.ip_address).await?;
        if !revoke_other_sessions {
            return Ok((user, None));
        }
        let remember = current.session.remember_me;
        let started = self.actors.sessions.create(user.id, remember, client, Start::Renewal).await;
        let (token, session) = started.map_err(|e| match e {
            CreateSessionError::Unavailable(u) => AccountError::Unavailable(u),
            CreateSessionError::Banned | CreateSessionError::UnknownUser => AccountError::UserNotFound,
        })?;
        Ok((user, Some((token, session))))
    }

    /// The caller's name and picture.
    pub async fn update_profile(
        &self,
        user: UserId,
        name: Option<Name>,
        image: Option<Option<String>>,
        ip: &str,
    ) -> Result<Arc<User>, AccountError> {
        self.change_own(user, OwnChange::Profile { name, image }, ip).await
    }

    async fn change_own(&self, user: UserId, change: OwnChange, ip: &str) -> Result<Arc<User>, AccountError> {
        self.actors.users.change_own(user, change, ip.to_owned()).await.map_err(|e| match e {
            OwnChangeError::UserNotFound => AccountError::UserNotFound,
            OwnChangeError::Unavailable(u) => AccountError::Unavailable(u),
        })
    }

    /// The caller's live sessions with their token hashes, oldest first; an administrator's impersonation is not
    /// the user's to see (nor to pick out and end).
    pub fn own_sessions(&self, user: UserId) -> Vec<(TokenHash, Arc<Session>)> {
        let mut sessions = self.sessions_of(user);
        sessions.retain(|(_, s)| s.impersonated_by.is_none());
        sessions
    }

    /// Ends some of the caller's own sessions; returns how many ended.
    pub async fn revoke_own_sessions(&self, user: UserId, which: Revoke, ip: &str) -> Result<usize, Unavailable> {
        self.actors.sessions.revoke(user, user, which, ip.to_owned()).await
    }

    /// Deletes the caller's account after checking their password: the account, its membership and every
    /// session go in one commit.
    pub async fn delete_account(&self, current: &Current, password: Password, ip: &str) -> Result<(), AccountError> {
        self.confirm_password(&current.user, password, ip).await?;
        self.actors.users.delete(current.user.id, ip.to_owned()).await.map_err(|e| match e {
            DeleteUserError::UserNotFound | DeleteUserError::NotAdmin | DeleteUserError::SelfRemoval => {
                AccountError::UserNotFound
            }
            DeleteUserError::LastAdmin => AccountError::LastAdmin,
            DeleteUserError::Unavailable(u) => AccountError::Unavailable(u),
        })
    }

    // --- password reset by mail -----------------------------------------------------------------------------

    /// Mails a reset link to the account with `email`, if there is one. The answer is the same either way, and
    /// takes the same time.
    pub async fn request_password_reset(
        &self,
        email: Email,
        callback: Option<String>,
        ip: &str,
    ) -> Result<(), MailError> {
        self.mail_link(TokenKind::PasswordReset, email, callback, ip).await
    }

    /// Mails a verification link to the account with `email`, if there is one whose address is not verified yet.
    /// The answer is the same either way, and takes the same time.
    pub async fn send_verification_email(
        &self,
        email: Email,
        callback: Option<String>,
        ip: &str,
    ) -> Result<(), MailError> {
        self.mail_link(TokenKind::EmailVerification, email, callback, ip).await
    }

    async fn mail_link(
        &self,
        kind: TokenKind,
        email: Email,
        callback: Option<String>,
        ip: &str,
    ) -> Result<(), MailError> {
        let started = tokio::time::Instant::now();
        let templates = Arc::clone(self.templates.as_ref().ok_or(MailError::NotConfigured)?);
        let ttl = templates.ttl(kind);
        let compose: Compose = Box::new(move |user, token| templates.render(kind, user, token, callback.as_deref()));
        self.actors.users.issue_token(kind, email, ttl, compose, ip.to_owned()).await.map_err(|e| match e {
            IssueError::OutboxFull => MailError::OutboxFull,
            IssueError::Unavailable(u) => MailError::Unavailable(u),
        })?;
        // Whether a link was issued costs a little more (a token, a rendered message) than not; answering no sooner
        // than a fixed time after the request came in makes both cases take the same time.
        tokio::time::sleep_until(started + LINK_ANSWER_FLOOR).await;
        Ok(())
    }

    /// Marks the address of the verification token's account as verified (once).
    pub async fn verify_email(&self, token: &SessionToken, ip: &str) -> Result<(), ResetPasswordError> {
        self.actors.users.verify_email(token.hash(), ip.to_owned()).await.map_err(|e| match e {
            ResetError::InvalidToken => ResetPasswordError::InvalidToken,
            ResetError::Unavailable(u) => ResetPasswordError::Unavailable(u),
        })
    }

    /// Whether `token` is a live reset token (the link in the mail leads to the form, or to an error).
    pub fn reset_token_is_valid(&self, token: &SessionToken) -> bool {
        let now = Timestamp::now();
        self.indexes.tokens.get(&token.hash()).is_some_and(|t| t.kind == TokenKind::PasswordReset && !t.is_expired(now))
    }

    /// Sets a new password with a reset token (once), ending every session of the account.
    pub async fn reset_password(
        &self,
        token: &SessionToken,
        new_password: Password,
        ip: &str,
    ) -> Result<(), ResetPasswordError> {
        if !self.reset_token_is_valid(token) {
            return Err(ResetPasswordError::InvalidToken);
        }
        let hash = self.hasher.hash(new_password).await.map_err(|e| match e {
            HashError::Busy => ResetPasswordError::Busy,
            HashError::Params(_) | HashError::Failed(_) => ResetPasswordError::Unavailable(Unavailable),
        })?;
        self.actors.users.reset_password(token.hash(), hash, ip.to_owned()).await.map_err(|e| match e {
            ResetError::InvalidToken => ResetPasswordError::InvalidToken,
            ResetError::Unavailable(u) => ResetPasswordError::Unavailable(u),
        })
    }

    // --- administration (the better-auth admin plugin's calls) ------------------------------------------------

    /// Creates an account on behalf of administrator `by`. Without a password the account gets one nobody knows
    /// (its owner sets theirs with a reset link).
    pub async fn create_user_by(
        &self,
        by: UserId,
        name: Name,
        email: Email,
        password: Option<Password>,
        role: Option<crate::domain::Role>,
        ip: &str,
    ) -> Result<Arc<User>, AdminError> {
        if self.indexes.users.by_email(&email).is_some() {
            return Err(AdminError::EmailTaken);
        }
        let password = match password {
            Some(p) => p,
            None => Password::for_sign_in(SessionToken::generate().as_str()).map_err(|_| Unavailable)?,
        };
        let password_hash = self.hasher.hash(password).await.map_err(AdminError::from_hash)?;
        let role = role.unwrap_or_else(|| self.roles.default_role());
        let new = NewUser { name, email, image: None, role, password_hash };
        self.actors.users.create_by(by, new, ip.to_owned()).await.map_err(|e| match e {
            CreateUserError::EmailTaken => AdminError::EmailTaken,
            CreateUserError::NotAdmin => AdminError::NotAdmin,
            CreateUserError::Unavailable(u) => AdminError::Unavailable(u),
        })
    }

    /// Sets `target`'s password on behalf of administrator `by`; every session of the account ends with it.
    pub async fn set_user_password(
        &self,
        by: UserId,
        target: UserId,
        password: Password,
        ip: &str,
    ) -> Result<(), AdminError> {
        let password_hash = self.hasher.hash(password).await.map_err(AdminError::from_hash)?;
        let change = UserChange { password_hash: Some(password_hash), ..UserChange::default() };
        Ok(self.update_user(by, target, change, ip.to_owned()).await?)
    }

    /// Removes `target`'s account on behalf of administrator `by`, with its sessions, in one commit.
    pub async fn remove_user_by(&self, by: UserId, target: UserId, ip: &str) -> Result<(), AdminError> {
        self.actors.users.remove_by(by, target, ip.to_owned()).await.map_err(|e| match e {
            DeleteUserError::UserNotFound => AdminError::UserNotFound,
            DeleteUserError::NotAdmin => AdminError::NotAdmin,
            DeleteUserError::SelfRemoval => AdminError::SelfRemoval,
            DeleteUserError::LastAdmin => AdminError::LastAdmin,
            DeleteUserError::Unavailable(u) => AdminError::Unavailable(u),
        })
    }

    /// Ends sessions of `target` on behalf of administrator `by`; returns how many ended.
    pub async fn revoke_user_sessions(
        &self,
        by: UserId,
        target: UserId,
        which: Revoke,
        ip: &str,
    ) -> Result<usize, Unavailable> {
        self.actors.sessions.revoke(target, by, which, ip.to_owned()).await
    }

    /// The live session behind `token`, whoever its user (an administrator ending it).
    pub fn current_any(&self, token: &SessionToken) -> Option<Arc<Session>> {
        self.indexes.sessions.get(&token.hash()).filter(|s| !s.is_expired(Timestamp::now()))
    }

    /// The session with id `id` (a handle from a session list): its token hash and user.
    pub fn session_by_id(&self, id: crate::domain::SessionId) -> Option<(TokenHash, UserId)> {
        self.indexes.sessions.find_by_id(id)
    }

    pub fn user(&self, id: UserId) -> Option<Arc<User>> {
        self.indexes.users.get(id)
    }

    /// The live sessions of `user`, impersonations included, oldest first.
    pub fn sessions_of(&self, user: UserId) -> Vec<(TokenHash, Arc<Session>)> {
        let now = Timestamp::now();
        let mut sessions = self.indexes.sessions.of_user(user);
        sessions.retain(|(_, s)| !s.is_expired(now));
        sessions
    }

    /// Starts a session as `target` for administrator `by` (never as another administrator): at most an hour,
    /// never extended, marked with `by`, audited with the session.
    pub async fn impersonate(
        &self,
        by: UserId,
        target: UserId,
        client: Client,
    ) -> Result<(SessionToken, Current), AdminError> {
        let user = self.indexes.users.get(target).ok_or(AdminError::UserNotFound)?;
        if user.role.is_admin() {
            return Err(AdminError::CannotImpersonateAdmin);
        }
        let start = Start::Impersonation { by };
        let (token, session) =
            self.actors.sessions.create(target, false, client, start).await.map_err(|e| match e {
                CreateSessionError::Banned => AdminError::TargetBanned,
                CreateSessionError::UnknownUser => AdminError::UserNotFound,
                CreateSessionError::Unavailable(u) => AdminError::Unavailable(u),
            })?;
        Ok((token, Current { session, user }))
    }

    /// Ends the impersonation session `session` (audited as its end) on behalf of the administrator behind it.
    pub async fn stop_impersonating(&self, session: &Session, hash: TokenHash, ip: &str) -> Result<(), Unavailable> {
        let Some(by) = session.impersonated_by.as_deref().copied() else { return Ok(()) };
        self.actors.sessions.revoke(session.user_id, by, Revoke::Impersonation(hash), ip.to_owned()).await.map(drop)
    }

    // --- administration ---------------------------------------------------------------------------------------

    /// Every user, ordered by creation.
    pub fn users(&self) -> Vec<Arc<User>> {
        self.indexes.users.list()
    }

    pub fn user_count(&self) -> usize {
        self.indexes.users.len()
    }

    /// Sessions held in memory: the live ones and the expired ones the next sweep removes.
    pub fn session_count(&self) -> usize {
        self.indexes.sessions.len()
    }

    /// Visits users in creation order (newest first with `descending`) after `after`, until `visit` says stop.
    pub fn scan_users(&self, after: Option<Place>, descending: bool, visit: impl FnMut(&Arc<User>) -> bool) {
        self.indexes.users.scan(after, descending, visit);
    }

    /// The users whose (lower-case) e-mail starts with `prefix`, in e-mail order.
    pub fn users_with_email_prefix(&self, prefix: &str) -> Vec<Arc<User>> {
        self.indexes.users.with_email_prefix(prefix)
    }

    pub async fn update_user(
        &self,
        by: UserId,
        target: UserId,
        change: UserChange,
        ip: String,
    ) -> Result<(), UpdateUserError> {
        self.actors.users.update(by, target, change, ip).await
    }

    /// Every organization, ordered by creation.
    pub fn organizations(&self) -> Vec<Arc<Organization>> {
        self.indexes.orgs.list()
    }

    pub fn organization(&self, id: OrgId) -> Option<Arc<Organization>> {
        self.indexes.orgs.get(id)
    }

    /// The members of `org`, ordered by creation.
    pub fn members(&self, org: OrgId) -> Vec<Arc<User>> {
        self.indexes.users.members_of(org)
    }

    /// Visits the members of `org` in creation order after `after`, until `visit` says stop.
    pub fn scan_members(&self, org: OrgId, after: Option<Place>, visit: impl FnMut(&Arc<User>) -> bool) {
        self.indexes.users.scan_org(org, after, visit);
    }

    pub async fn update_organization(
        &self,
        id: OrgId,
        name: Option<Name>,
        slug: Option<Slug>,
        by: UserId,
        ip: String,
    ) -> Result<Arc<Organization>, UpdateOrgError> {
        self.actors.orgs.update(id, name, slug, by, ip).await
    }

    /// Deletes organization `id` on behalf of administrator `by`; with `detach`, its members leave it in the same
    /// commit, otherwise a non-empty organization is refused. Returns how many members were detached.
    ///
    /// Runs as a tracked task: the organizations actor holds changes to `id` back until the deletion is over, and
    /// that hold must be released even if the client hangs up.
    pub async fn delete_organization(
        &self,
        by: UserId,
        id: OrgId,
        detach: bool,
        ip: String,
    ) -> Result<usize, DeleteOrgError> {
        let actors = self.actors.clone();
        let task = self.tasks.spawn(async move {
            let started = actors.orgs.begin_delete(id).await;
            let result = match started {
                Ok(true) => actors.users.delete_organization(by, id, detach, ip).await,
                Ok(false) => Err(DeleteOrgError::NotFound),
                Err(u) => Err(u.into()),
            };
            actors.orgs.end_delete(id);
            result
        });
        task.await.unwrap_or(Err(DeleteOrgError::Unavailable(Unavailable)))
    }

    pub async fn create_organization(
        &self,
        name: Name,
        slug: Slug,
        by: UserId,
        ip: String,
    ) -> Result<Arc<Organization>, CreateOrgError> {
        self.actors.orgs.create(name, slug, by, ip).await
    }

    /// Up to `limit` audit entries older than `before`, newest first.
    pub async fn audit(&self, before: Option<AuditId>, limit: usize) -> Result<Vec<AuditEntry>, Unavailable> {
        self.audit.page(before, limit).await
    }

    // --- operations -------------------------------------------------------------------------------------------

    /// The levels a metrics scrape shows: accounts, sessions, organizations, hashes waiting.
    pub fn levels(&self) -> Levels {
        Levels {
            users: self.indexes.users.len(),
            sessions: self.indexes.sessions.len(),
            organizations: self.indexes.orgs.len(),
            hash_queue: self.hasher.waiting(),
            legacy_hashes: self.indexes.users.legacy_hashes(),
        }
    }

    /// How many accounts still have a password hash imported from better-auth (replaced at their next sign-in).
    pub fn legacy_hashes(&self) -> usize {
        self.indexes.users.legacy_hashes()
    }

    /// `Ok` while the store accepts commits and (several nodes) this node's state is fresh; otherwise why not.
    pub fn readiness(&self) -> Result<(), NotReady> {
        if let Err(reason) = self.store.accepts_writes() {
            return Err(NotReady::Writes(reason));
        }
        self.freshness.check().map_err(NotReady::Stale)
    }

    /// Waits (at most `limit`) for the work requests started and left behind, while the actors still answer.
    pub(crate) async fn finish_background_work(&self, limit: Duration) {
        self.tasks.close();
        if tokio::time::timeout(limit, self.tasks.wait()).await.is_err() {
            tracing::warn!("background request work still running after {limit:?}; stopping anyway");
        }
    }
}

/// A sign-in's password check: reserve an attempt, verify, report the outcome (see [`Accounts::sign_in`]).
async fn check_password(
    accounts: Accounts,
    email: Email,
    user: Option<Arc<User>>,
    password: Password,
    ip: String,
) -> Result<bool, SignInError> {
    let users = &accounts.actors.users;
    let id = user.as_ref().map(|u| u.id);
    users.begin_attempt(email.clone(), id, ip.clone()).await.map_err(|e| match e {
        AttemptRefused::Locked(wait) => SignInError::Locked(wait),
        AttemptRefused::Unavailable(u) => SignInError::Unavailable(u),
    })?;
    // An unknown e-mail costs the same verify as a wrong password (against a dummy hash), so the answer time
    // does not tell which accounts exist.
    let legacy_present = accounts.indexes.users.legacy_hashes() > 0;
    let verified = accounts.hasher.verify(password, user.map(|u| u.password_hash.to_string()), legacy_present).await;
    let checked = match verified {
        Ok(true) => Checked::Verified,
        Ok(false) => Checked::Wrong,
        Err(_) => Checked::NotChecked,
    };
    users.finish_attempt(email, id, checked, ip).await?;
    verified.map_err(|e| match e {
        HashError::Busy => SignInError::Busy,
        HashError::Params(_) | HashError::Failed(_) => SignInError::Unavailable(Unavailable),
    })
}
