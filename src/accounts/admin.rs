//! The administrators' calls: accounts on others' behalf (the better-auth admin plugin's), impersonation,
//! listings, organizations and the audit log.

use std::sync::Arc;

use super::{
    Accounts, Client, CreateOrgError, Current, DeleteOrgError, Page, Revoke, Unavailable, UpdateOrgError,
    UpdateUserError, UserChange, UserQuery,
};
use crate::actors::sessions::{CreateSessionError, Start};
use crate::actors::users::{CreateUserError, DeleteUserError, NewUser};
use crate::domain::{
    AuditEntry, AuditId, Email, Name, OrgId, Organization, Password, PasswordContext, Session, SessionId, SessionToken,
    Slug, Timestamp, TokenHash, User, UserId, Username,
};
use crate::hashing::HashError;

/// Errors of the administrator's calls on accounts (the better-auth admin plugin's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AdminError {
    #[error("User already exists. Use another email.")]
    EmailTaken,
    /// The username, one that looks like it, or a reserved name.
    #[error("Username is already taken. Please try another.")]
    UsernameTaken,
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
    #[error("You cannot leave the organization as the only owner")]
    LastOwner,
    #[error("You cannot impersonate admins")]
    CannotImpersonateAdmin,
    #[error("The user is banned")]
    TargetBanned,
    #[error("The service is busy. Please try again in a moment.")]
    Busy,
    /// The new password is refused by the policy (too short for the account, listed, or a context word).
    #[error(transparent)]
    Password(#[from] crate::domain::PasswordRefused),
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
            UpdateUserError::LastOwner => Self::LastOwner,
            UpdateUserError::UsernameTaken => Self::UsernameTaken,
            UpdateUserError::Unavailable(u) => Self::Unavailable(u),
        }
    }
}

/// A session as an administrator names it: by its token, or by the handle (its id) a session list shows.
pub enum SessionRef {
    Token(SessionToken),
    Id(SessionId),
}

/// An account an administrator creates (the admin plugin's create-user), validated. `None` for a role: the default
/// one; for a password: one nobody knows.
pub struct AdminNewUser {
    pub name: Name,
    pub email: Email,
    pub password: Option<Password>,
    pub role: Option<crate::domain::Role>,
    /// The username plugin's `data.username` and `data.displayUsername`.
    pub username: Option<Username>,
    pub display_username: Option<Box<str>>,
}

impl Accounts {
    /// Creates an account on behalf of administrator `by`. Without a password the account gets one nobody knows
    /// (its owner sets theirs with a reset link).
    pub async fn create_user_by(&self, by: UserId, new: AdminNewUser, ip: &str) -> Result<Arc<User>, AdminError> {
        let AdminNewUser { name, email, password, role, username, display_username } = new;
        if self.indexes.users.by_email(&email).is_some() {
            return Err(AdminError::EmailTaken);
        }
        let password = match password {
            Some(p) => {
                let context = PasswordContext { email: email.as_str(), name: name.as_str(), second_factor: false };
                self.vet_password(&p, context).await?;
                p
            }
            None => Password::for_sign_in(SessionToken::generate().as_str()).map_err(|_| Unavailable)?,
        };
        let password_hash = self.hasher.hash(password).await.map_err(AdminError::from_hash)?;
        let role = role.unwrap_or_else(|| self.roles.default_role());
        // An administrator may give a reserved name (a staff account's); another account's or its look-alike is
        // refused by the actor.
        let new = NewUser { name, email, image: None, role, password_hash, username, display_username };
        self.actors.users.create_by(by, new, ip.to_owned()).await.map_err(|e| match e {
            CreateUserError::EmailTaken => AdminError::EmailTaken,
            CreateUserError::UsernameTaken => AdminError::UsernameTaken,
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
        let user = self.indexes.users.get(target).ok_or(AdminError::UserNotFound)?;
        self.vet_password_of(&user, &password).await?;
        let password_hash = self.hasher.hash(password).await.map_err(AdminError::from_hash)?;
        let change = UserChange { password_hash: Some(password_hash), ..UserChange::default() };
        self.update_user(by, target, change, ip.to_owned()).await?;
        Ok(())
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

    /// The session an administrator names, whoever its user: its token hash and user. By token, only a live one;
    /// by the handle a session list shows, any still held. A handle is found by a scan of every session (ids are
    /// not indexed: an index would cost every session bytes for an administrator's rare call), on a blocking thread: it reads every
    /// session from wherever it is in memory, a time the event loop's other connections (checking sessions) would
    /// otherwise wait through.
    pub async fn find_session(&self, named: SessionRef) -> Result<Option<(TokenHash, UserId)>, Unavailable> {
        match named {
            SessionRef::Token(token) => {
                let live = self.indexes.sessions.get(&token.hash()).filter(|s| !s.is_expired(Timestamp::now()));
                Ok(live.map(|session| (token.hash(), session.user_id)))
            }
            SessionRef::Id(id) => {
                let indexes = Arc::clone(&self.indexes);
                tokio::task::spawn_blocking(move || indexes.sessions.find_by_id(id)).await.map_err(|_| Unavailable)
            }
        }
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
        Ok((token, Current { session, user, by_key: false }))
    }

    /// Ends the impersonation session `session` (audited as its end) on behalf of the administrator behind it.
    pub async fn stop_impersonating(&self, session: &Session, hash: TokenHash, ip: &str) -> Result<(), Unavailable> {
        let Some(by) = session.impersonated_by() else { return Ok(()) };
        self.actors.sessions.revoke(session.user_id, by, Revoke::Impersonation(hash), ip.to_owned()).await.map(drop)
    }

    // --- administration ---------------------------------------------------------------------------------------

    /// Every user, ordered by creation.
    pub fn users(&self) -> Vec<Arc<User>> {
        self.indexes.users.list()
    }

    /// The page of users `query` asks for (see [`UserQuery`]), found on a blocking thread: a condition no index
    /// serves passes over every account, and must not hold up the session checks queued behind it.
    pub async fn find_users(&self, query: UserQuery) -> Result<Page, Unavailable> {
        let accounts = self.clone();
        tokio::task::spawn_blocking(move || query.run(&accounts)).await.map_err(|_| Unavailable)
    }

    /// Applies `change` to `target` on behalf of administrator `by`; returns the account as it was written, so the
    /// answer shows this change and not whatever the index holds a moment later.
    pub async fn update_user(
        &self,
        by: UserId,
        target: UserId,
        change: UserChange,
        ip: String,
    ) -> Result<Arc<User>, UpdateUserError> {
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

    pub fn member_count(&self, org: OrgId) -> usize {
        self.indexes.users.member_count(org)
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

    /// A page of the audit entries `search` matches (see [`crate::actors::audit::AuditLog::search`]).
    pub async fn search_audit(
        &self,
        search: super::AuditSearch,
        before: Option<AuditId>,
        limit: usize,
    ) -> Result<super::AuditFound, Unavailable> {
        self.audit.search(search, before, limit).await
    }
}
