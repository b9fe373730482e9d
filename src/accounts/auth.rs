//! Sign-up, sign-in and sign-out: an account's way in, and the password check a sign-in shares with the calls
//! that confirm a password (see [`super::account`]).

use std::sync::Arc;
use std::time::Duration;

use tracing::Instrument;

use super::{Accounts, Client, Counter, Unavailable};
use crate::actors::sessions::{CreateSessionError, Start, StartWith};
use crate::actors::users::{AttemptRefused, Checked, CreateUserError, NewUser};
use crate::domain::{
    Email, ImageUrl, Name, Password, PasswordContext, Session, SessionToken, TokenKind, User, Username,
};
use crate::hashing::{HashError, OnFile};

/// A new account as the sign-up form gives it, validated.
pub struct SignUp {
    pub name: Name,
    pub email: Email,
    pub password: Password,
    pub image: Option<ImageUrl>,
    pub remember_me: bool,
    /// better-auth's `username` plugin: the name (format checked) and its display form.
    pub username: Option<Username>,
    pub display_username: Option<Box<str>>,
}

/// What sign-up and sign-in give: the new session's token, the session and the account.
pub struct SignedIn {
    pub token: SessionToken,
    pub session: Arc<Session>,
    pub user: Arc<User>,
}

/// What a right password gives: a session, or (the account has a second factor, and this browser is not a trusted
/// device of it) a challenge to prove it with (the two-factor cookie's token).
pub enum SignInOutcome {
    In(SignedIn),
    SecondFactor {
        challenge: SessionToken,
    },
    /// A trusted device: a session, and the device's renewed token.
    Trusted(SignedIn, SessionToken),
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
    /// The address is in a domain whose organization requires single sign-on ([`super::sso_policy`]).
    #[error("{SSO_REQUIRED}")]
    SsoRequired,
    /// The username, one that looks like it, or a reserved name.
    #[error("Username is already taken. Please try another.")]
    UsernameTaken,
    /// Every hashing worker is busy: a short overload, retry in a second.
    #[error("The service is busy. Please try again in a moment.")]
    Busy,
    /// The new password is refused by the policy (too short for the account, listed, or a context word).
    #[error(transparent)]
    Password(#[from] crate::domain::PasswordRefused),
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
    /// The password is right, but it is one factor and this account's second is a passkey: it signs in with the
    /// passkey ([`Accounts::passkey_required`]).
    #[error("This account signs in with its passkey")]
    PasskeyRequired,
    /// The address is in a domain whose organization requires single sign-on ([`super::sso_policy`]), and the
    /// account is not a service administrator's.
    #[error("{SSO_REQUIRED}")]
    SsoRequired,
    #[error("The service is busy. Please try again in a moment.")]
    Busy,
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
}

/// What a way in refused by an organization's single sign-on policy answers (with the code `SSO_REQUIRED`).
pub const SSO_REQUIRED: &str =
    "Your organization requires single sign-on for this address: sign in with SSO (sign-in/sso with your email)";

/// How a password sign-in names its account.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SignInBy {
    /// Its address: the single sign-on policy answers by the address's domain alone, right password or not.
    Email,
    /// Its username: the policy answers only after a right password, so that it does not tell which names exist.
    Username,
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
    /// Whether the hashing pool would refuse a hash asked for now ([`Hasher::saturated`]): sign-in and sign-up
    /// answer 503 before reading the body, so a flood's excess costs neither a parse nor an attempt reservation.
    pub fn hashing_saturated(&self) -> bool {
        self.hasher.saturated()
    }

    pub async fn sign_up(&self, form: SignUp, client: Client) -> Result<SignedUp, SignUpError> {
        let signed_up = self.sign_up_uncounted(form, client).await;
        if signed_up.is_ok() {
            self.counters.count(Counter::SignUp);
        }
        signed_up
    }

    async fn sign_up_uncounted(&self, form: SignUp, client: Client) -> Result<SignedUp, SignUpError> {
        // Before anything that looks at accounts: the domain alone decides, so the answer tells nothing of them.
        if self.sso_refuses_address(&form.email).await? {
            return Err(SignUpError::SsoRequired);
        }
        // Checked again inside the users actor; this early look only saves a 20 ms hash on an obvious duplicate.
        if self.indexes.users.by_email(&form.email).is_some() {
            return Err(SignUpError::EmailTaken);
        }
        if self.username_refused(form.username.as_ref(), form.display_username.as_deref(), None) {
            return Err(SignUpError::UsernameTaken);
        }
        let context = PasswordContext { email: form.email.as_str(), name: form.name.as_str(), second_factor: false };
        self.vet_password(&form.password, context).await?;
        let password_hash = self.hasher.hash(form.password).await?;
        let new = NewUser {
            name: form.name,
            email: form.email,
            image: form.image,
            role: self.roles.default_role(),
            password_hash,
            username: form.username,
            display_username: form.display_username,
        };
        let user = self.actors.users.create(new, client.ip_address.clone()).await.map_err(|e| match e {
            CreateUserError::EmailTaken => SignUpError::EmailTaken,
            CreateUserError::UsernameTaken => SignUpError::UsernameTaken,
            CreateUserError::NotAdmin => SignUpError::Unavailable(Unavailable),
            CreateUserError::Unavailable(u) => SignUpError::Unavailable(u),
        })?;
        if self.require_verification {
            // The account exists either way; if this mail fails, the user asks for another link.
            let sent =
                self.mail_link(TokenKind::EmailVerification, user.email_address(), None, &client.ip_address).await;
            if sent.is_err() {
                tracing::warn!(user = %user.id, "could not issue the verification link of a new account");
            }
            return Ok(SignedUp::VerifyFirst(user));
        }
        let (token, session) = self.actors.sessions.create(user.id, form.remember_me, client, Start::SignUp).await?;
        Ok(SignedUp::In(SignedIn { token, session, user }))
    }

    /// A sign-in with e-mail and password; `trusted` is the trusted-device cookie's token, if the browser sent one.
    pub async fn sign_in(
        &self,
        email: Email,
        password: Password,
        remember_me: bool,
        trusted: Option<SessionToken>,
        client: Client,
    ) -> Result<SignInOutcome, SignInError> {
        let user = self.indexes.users.by_email(&email);
        self.sign_in_counted(SignInBy::Email, email, user, password, remember_me, trusted, client).await
    }

    /// A sign-in of `user` (`None`: nobody has the e-mail or username given), its attempts counted under `email`
    /// (the account's address, or the key an unknown username counts under), and counted in the overview.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn sign_in_counted(
        &self,
        by: SignInBy,
        email: Email,
        user: Option<Arc<User>>,
        password: Password,
        remember_me: bool,
        trusted: Option<SessionToken>,
        client: Client,
    ) -> Result<SignInOutcome, SignInError> {
        let outcome = self.sign_in_uncounted(by, email, user, password, remember_me, trusted, client).await;
        // An overloaded or unavailable service decided nothing about the caller: not counted. A right password
        // that still needs its second factor is not a sign-in yet.
        let counted = match &outcome {
            Ok(SignInOutcome::In(_) | SignInOutcome::Trusted(..)) => Some(Counter::SignInSucceeded),
            Ok(SignInOutcome::SecondFactor { .. }) | Err(SignInError::PasskeyRequired) => None,
            Err(
                SignInError::InvalidCredentials
                | SignInError::Banned
                | SignInError::EmailNotVerified
                | SignInError::SsoRequired,
            ) => Some(Counter::SignInFailed),
            Err(SignInError::Locked(_)) => Some(Counter::LockedOut),
            Err(SignInError::Busy | SignInError::Unavailable(_)) => None,
        };
        if let Some(counter) = counted {
            self.counters.count(counter);
        }
        outcome
    }

    #[allow(clippy::too_many_arguments)]
    async fn sign_in_uncounted(
        &self,
        by: SignInBy,
        email: Email,
        user: Option<Arc<User>>,
        password: Password,
        remember_me: bool,
        trusted: Option<SessionToken>,
        client: Client,
    ) -> Result<SignInOutcome, SignInError> {
        // Kept only for an account whose hash is not at the configured cost (an import's scrypt or argon2, or this
        // server's before a change of `[hashing]`): it is re-hashed at that cost.
        let upgrade = user
            .as_ref()
            .filter(|u| self.hasher.needs_rehash(u.password_hash()))
            .map(|u| (u.password_hash().to_string(), password.clone()));
        let check = check_password(self.clone(), email.clone(), user.clone(), password, client.ip_address.clone());
        // A task of its own: hyper drops a handler whose client has closed the connection, and dropped between
        // the reservation and its end, the reservation would count against the account for good (anyone could
        // lock any account by hanging up). As a task it always ends, counting the outcome as it came out.
        let verified = self.tasks.spawn(check.in_current_span()).await.map_err(|_| Unavailable)??;
        // The organization's single sign-on policy, after the password's check either way (so its answer takes
        // the same time for every address of the domain). By address: the domain alone decides, and only a
        // service administrator's right password passes. By username: only a right password learns of it.
        let administrator = verified && user.as_ref().is_some_and(|u| u.role.is_admin());
        let refused = match by {
            SignInBy::Email => !administrator && self.sso_refuses_address(&email).await?,
            SignInBy::Username => match &user {
                Some(user) if verified => self.sso_refuses_user(user).await?,
                _ => false,
            },
        };
        if refused {
            return Err(SignInError::SsoRequired);
        }
        let user = user.filter(|_| verified).ok_or(SignInError::InvalidCredentials)?;
        if self.require_verification && !user.email_verified {
            return Err(SignInError::EmailNotVerified);
        }
        // A banned account is refused as such below, whatever its factors.
        if !user.is_banned_at(crate::domain::Timestamp::now()) && self.passkey_required(&user).await {
            return Err(SignInError::PasskeyRequired);
        }
        if user.has_second_factor() {
            match trusted.filter(|t| self.trusted_device(user.id, t)) {
                // Refused like any sign-in of a banned account, before a challenge says the password was right.
                _ if user.is_banned_at(crate::domain::Timestamp::now()) => return Err(SignInError::Banned),
                Some(device) => {
                    let (token, session) =
                        self.actors.sessions.create(user.id, remember_me, client, Start::SignIn).await?;
                    let next = SessionToken::generate();
                    self.actors.users.rotate_trust(device.hash(), next.hash()).await?;
                    let user = self.indexes.users.get(user.id).unwrap_or(user);
                    return Ok(SignInOutcome::Trusted(SignedIn { token, session, user }, next));
                }
                None => {
                    // An imported hash is replaced here too: every sign-in of this account stops at this step.
                    let rehash = match upgrade {
                        Some((from, password)) => self.hasher.hash(password).await.ok().map(|to| (from, to)),
                        None => None,
                    };
                    let challenge = self.actors.users.challenge(user.id, remember_me, rehash).await?;
                    return Ok(SignInOutcome::SecondFactor { challenge });
                }
            }
        }
        if let Some((from, password)) = upgrade {
            // The old hash is replaced in the commit that starts the session. If every hashing worker
            // is busy, the sign-in still succeeds and the next one replaces it.
            if let Ok(to) = self.hasher.hash(password).await {
                let start = StartWith { user: user.id, remember_me, client: client.clone() };
                if let Some((token, session)) = self.actors.users.sign_in_upgrading(from, to, start).await? {
                    let user = self.indexes.users.get(user.id).unwrap_or(user);
                    return Ok(SignInOutcome::In(SignedIn { token, session, user }));
                }
            }
        }
        let (token, session) = self.actors.sessions.create(user.id, remember_me, client, Start::SignIn).await?;
        let user = self.indexes.users.get(user.id).unwrap_or(user);
        Ok(SignInOutcome::In(SignedIn { token, session, user }))
    }

    /// Ends the session of `token`; ending one that does not exist succeeds.
    pub async fn sign_out(&self, token: &SessionToken) -> Result<(), Unavailable> {
        self.actors.sessions.end(token.hash()).await
    }
}

/// A sign-in's password check: reserve an attempt, verify, report the outcome (see [`Accounts::sign_in`]).
pub(super) async fn check_password(
    accounts: Accounts,
    email: Email,
    user: Option<Arc<User>>,
    password: Password,
    ip: String,
) -> Result<bool, SignInError> {
    let users = &accounts.actors.users;
    let id = user.as_ref().map(|u| u.id);
    let user_had_factor = user.as_ref().is_some_and(|u| u.has_second_factor());
    users.begin_attempt(email.clone(), id, ip.clone()).await.map_err(|e| match e {
        AttemptRefused::Locked(wait) => SignInError::Locked(wait),
        AttemptRefused::Unavailable(u) => SignInError::Unavailable(u),
    })?;
    // An unknown e-mail costs the same verifications as a wrong password (against dummies, one at each cost on
    // file), so the answer time does not tell which accounts exist.
    let index = &accounts.indexes.users;
    let on_file = OnFile { legacy: index.legacy_hashes() > 0, argon2: index.argon2_costs() };
    let verified = accounts.hasher.verify(password, user.map(|u| u.password_hash().to_string()), on_file).await;
    // A right password clears the account's failures only where it is the whole proof: with a second factor on,
    // only a right second factor does, so that signing in again does not reset the count of wrong codes.
    let second_factor = id.is_some() && user_had_factor;
    let checked = match verified {
        Ok(true) if second_factor => Checked::NotChecked,
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
