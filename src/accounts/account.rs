//! A signed-in user's calls about their own account: password, profile, sessions, deletion.

use std::sync::Arc;
use std::time::Duration;

use tracing::Instrument;

use super::auth::check_password;
use super::{Accounts, Client, Current, Revoke, SignInError, Unavailable};
use crate::actors::sessions::{CreateSessionError, Start};
use crate::actors::users::{DeleteUserError, OwnChange, OwnChangeError};
use crate::domain::{ImageUrl, Name, Password, Session, SessionToken, TokenHash, User, UserId, Username};
use crate::hashing::HashError;

/// A user's change to their profile (update-user); `None` leaves a field as it is, `Some(None)` removes the
/// picture.
pub struct Profile {
    pub name: Option<Name>,
    pub image: Option<Option<ImageUrl>>,
    pub username: Option<Username>,
    pub display_username: Option<Box<str>>,
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
    /// The username, one that looks like it, or a reserved name.
    #[error("Username is already taken. Please try another.")]
    UsernameTaken,
    #[error("The service is busy. Please try again in a moment.")]
    Busy,
    /// The new password is refused by the policy (too short for the account, listed, or a context word).
    #[error(transparent)]
    Password(#[from] crate::domain::PasswordRefused),
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
}

impl From<SignInError> for AccountError {
    fn from(e: SignInError) -> Self {
        match e {
            // A password check alone (what account changes make) never asks for the passkey.
            SignInError::InvalidCredentials
            | SignInError::Banned
            | SignInError::EmailNotVerified
            | SignInError::PasskeyRequired
            | SignInError::SsoRequired => Self::InvalidPassword,
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

impl Accounts {
    /// Checks `password` against `user`'s, under the same per-e-mail failure limit as a sign-in (a wrong
    /// confirmation counts as a failed sign-in), in a task that finishes whatever the connection does.
    pub(super) async fn confirm_password(
        &self,
        user: &Arc<User>,
        password: Password,
        ip: &str,
    ) -> Result<(), AccountError> {
        let check = check_password(self.clone(), user.email_address(), Some(Arc::clone(user)), password, ip.to_owned());
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
        // After the current password: a caller who does not know it learns nothing of the policy's verdict.
        self.vet_password_of(&current.user, &new_password).await?;
        let password_hash = self.hasher.hash(new_password).await?;
        let change = OwnChange::Password { password_hash, end_sessions: revoke_other_sessions };
        let user = self.change_own(current, change, &client.ip_address).await?;
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

    /// The caller's name, picture, username and its display form.
    pub async fn update_profile(
        &self,
        current: &Current,
        profile: Profile,
        ip: &str,
    ) -> Result<Arc<User>, AccountError> {
        let Profile { name, image, username, display_username } = profile;
        // The actor checks the name again in order; this refuses a reserved name and a display form that looks
        // like another account's name, which only this layer checks.
        if self.username_refused(username.as_ref(), display_username.as_deref(), Some(&current.user)) {
            return Err(AccountError::UsernameTaken);
        }
        self.change_own(current, OwnChange::Profile { name, image, username, display_username }, ip).await
    }

    async fn change_own(&self, current: &Current, change: OwnChange, ip: &str) -> Result<Arc<User>, AccountError> {
        let (user, by) = (current.user.id, current.actor());
        self.actors.users.change_own(user, by, change, ip.to_owned()).await.map_err(|e| match e {
            OwnChangeError::UserNotFound => AccountError::UserNotFound,
            OwnChangeError::UsernameTaken => AccountError::UsernameTaken,
            OwnChangeError::Unavailable(u) => AccountError::Unavailable(u),
        })
    }

    /// The caller's live sessions with their token hashes, oldest first; an administrator's impersonation is not
    /// the user's to see (nor to pick out and end).
    pub fn own_sessions(&self, user: UserId) -> Vec<(TokenHash, Arc<Session>)> {
        let mut sessions = self.sessions_of(user);
        sessions.retain(|(_, s)| s.impersonated_by().is_none());
        sessions
    }

    /// Ends some of the caller's own sessions; returns how many ended. Audited as the caller's, or as the
    /// administrator's behind an impersonation.
    pub async fn revoke_own_sessions(&self, current: &Current, which: Revoke, ip: &str) -> Result<usize, Unavailable> {
        self.actors.sessions.revoke(current.user.id, current.actor(), which, ip.to_owned()).await
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
}
