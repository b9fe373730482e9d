//! The ways in by mail without a password, on better-auth's `magicLink` and `emailOTP` wire: a sign-in link, and
//! six-digit codes to sign in, to prove the address and to reset the password. Asking for either answers the same,
//! in the same time, whether or not the address has an account.

use std::sync::Arc;
use std::time::Duration;

use super::recovery::LINK_ANSWER_FLOOR;
use super::{Accounts, Client, Counter, SignedIn, Unavailable};
use crate::actors::sessions::CreateSessionError;
use crate::actors::users::{
    AttemptRefused, Checked, CodeUse, CodeUsed, EmailCodeError, IssueError, LinkError, WayInPassed,
};
use crate::domain::{
    CodePurpose, Email, ImageUrl, LinkAddress, Name, Password, PasswordContext, PasswordRefused, SessionToken, User,
    email_code_hash, email_code_key, two_factor,
};
use crate::hashing::HashError;

/// `sign-in/magic-link`'s request, validated (the redirects already checked against the trusted origins).
pub struct LinkRequest {
    pub email: Email,
    pub name: Option<Name>,
    pub callback: Option<String>,
    pub new_user_callback: Option<String>,
    pub error_callback: Option<String>,
}

/// Why a link or a code was not sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum WayInError {
    /// `[magic_link]` or `[email_otp]` is off (or no mail transport): the route is not offered.
    #[error("Not found")]
    Disabled,
    #[error("Too much mail is waiting to be sent. Please try again later.")]
    OutboxFull,
    /// The address is in a domain whose organization requires single sign-on (see `accounts::sso_policy`).
    #[error("{}", super::SSO_REQUIRED)]
    SsoRequired,
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
}

/// A sign-in link followed: the session, and whether the link made the account.
pub struct LinkSignIn {
    pub signed_in: SignedIn,
    pub new_user: bool,
}

/// Why a sign-in link signed nobody in (better-auth answers each with a redirect carrying `error=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum LinkSignInError {
    #[error("Not found")]
    Disabled,
    #[error("Invalid token")]
    InvalidToken,
    #[error("Sign-up is disabled")]
    SignUpDisabled,
    /// The address is in a domain whose organization requires single sign-on (see `accounts::sso_policy`).
    #[error("{}", super::SSO_REQUIRED)]
    SsoRequired,
    #[error("You have been banned from this application. Please contact support if you believe this is an error.")]
    Banned,
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
}

/// What a mailed code is given for.
pub enum EmailCodeUse {
    /// `email-otp/check-verification-otp`: only whether it is right (it stays usable).
    Check(CodePurpose),
    /// `sign-in/email-otp`, with the name and picture for an account made by it.
    SignIn { name: Option<Name>, image: Option<ImageUrl> },
    /// `email-otp/verify-email`.
    VerifyEmail,
    /// `email-otp/reset-password`.
    ResetPassword(Password),
}

/// What a right code did.
pub enum CodeOutcome {
    Checked,
    SignedIn(SignedIn),
    Verified(Arc<User>),
    Reset,
}

/// Why a mailed code was not accepted (better-auth's codes, and this server's failure limit).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CodeUseError {
    #[error("Not found")]
    Disabled,
    #[error("OTP expired")]
    Expired,
    #[error("Invalid OTP")]
    Invalid,
    #[error("Too many attempts")]
    TooManyAttempts,
    #[error("User not found")]
    UserNotFound,
    /// The address is in a domain whose organization requires single sign-on (see `accounts::sso_policy`).
    #[error("{}", super::SSO_REQUIRED)]
    SsoRequired,
    /// The account's failure limit (`[rate_limit]`), shared with passwords and second factors.
    #[error("Too many requests. Please try again later.")]
    Locked(Duration),
    #[error("You have been banned from this application. Please contact support if you believe this is an error.")]
    Banned,
    #[error("The service is busy. Please try again in a moment.")]
    Busy,
    /// A reset's new password is refused by the policy (too short for the account, listed, a context word).
    #[error(transparent)]
    Password(#[from] PasswordRefused),
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
}

impl From<IssueError> for WayInError {
    fn from(e: IssueError) -> Self {
        match e {
            IssueError::OutboxFull => Self::OutboxFull,
            IssueError::Unavailable(u) => Self::Unavailable(u),
        }
    }
}

impl Accounts {
    /// Whether sign-in links are offered (`[magic_link] enabled`, with a mail transport).
    pub fn offers_magic_links(&self) -> bool {
        self.magic_link.enabled && self.templates.is_some()
    }

    /// Whether mailed codes are offered (`[email_otp] enabled`, with a mail transport).
    pub fn offers_email_codes(&self) -> bool {
        self.email_otp.enabled && self.templates.is_some()
    }

    /// `sign-in/magic-link`: a link to `request.email`, kept (as a hash) and mailed through the outbox in one
    /// commit; for an address with no account only when sign-up is on. The same answer in the same time either
    /// way.
    pub async fn request_magic_link(&self, request: LinkRequest, ip: &str) -> Result<(), WayInError> {
        let started = tokio::time::Instant::now();
        let templates = self.templates.as_ref().filter(|_| self.magic_link.enabled).ok_or(WayInError::Disabled)?;
        let LinkRequest { email, name, callback, new_user_callback, error_callback } = request;
        if self.sso_refuses_address(&email).await? {
            return Err(WayInError::SsoRequired);
        }
        let token = SessionToken::generate();
        let link = templates.magic_link_url(
            &token,
            callback.as_deref(),
            new_user_callback.as_deref(),
            error_callback.as_deref(),
        );
        let mail = templates.render_magic_link(&email, &link);
        let ttl = Duration::from_secs(self.magic_link.ttl_secs);
        let address = LinkAddress { email, name };
        let sign_up = self.magic_link.sign_up;
        self.actors.users.send_link(token.hash(), address, ttl, mail, sign_up, ip.to_owned()).await?;
        tokio::time::sleep_until(started + LINK_ANSWER_FLOOR).await;
        Ok(())
    }

    /// `magic-link/verify`: the link used up, and a session for its address's account (made now when there is
    /// none and sign-up is on; an account whose address was never proven loses its password and sessions first),
    /// in one commit.
    pub async fn magic_link_sign_in(&self, token: &str, client: Client) -> Result<LinkSignIn, LinkSignInError> {
        if !self.offers_magic_links() {
            return Err(LinkSignInError::Disabled);
        }
        let token = SessionToken::parse(token).ok_or(LinkSignInError::InvalidToken)?;
        // A link mailed before the organization required single sign-on: refused, and left unused.
        let address = self.indexes.tokens.get(&token.hash()).and_then(|t| t.address.as_ref().map(|a| a.email.clone()));
        if let Some(email) = address
            && self.sso_refuses_address(&email).await?
        {
            return Err(LinkSignInError::SsoRequired);
        }
        let role = self.roles.default_role();
        let used = self.actors.users.use_link(token.hash(), self.magic_link.sign_up, role, client).await;
        let passed = used.map_err(|e| match e {
            LinkError::InvalidToken => LinkSignInError::InvalidToken,
            LinkError::SignUpDisabled => LinkSignInError::SignUpDisabled,
            LinkError::Unavailable(u) => LinkSignInError::Unavailable(u),
        })?;
        let new_user = passed.new_user;
        let signed_in = self.passed(passed).map_err(|e| match e {
            CreateSessionError::Banned => LinkSignInError::Banned,
            CreateSessionError::UnknownUser | CreateSessionError::Unavailable(_) => Unavailable.into(),
        })?;
        self.counters.count(Counter::SignInSucceeded);
        Ok(LinkSignIn { signed_in, new_user })
    }

    /// `email-otp/send-verification-otp` and `request-password-reset`: a new six-digit code for `purpose`,
    /// kept as a keyed hash (replacing the one before) and mailed in one commit, when the address has an account
    /// (or, for a sign-in, when sign-up is on). The same answer in the same time either way.
    pub async fn send_email_code(&self, email: Email, purpose: CodePurpose, ip: &str) -> Result<(), WayInError> {
        let started = tokio::time::Instant::now();
        let templates = self.templates.as_ref().filter(|_| self.email_otp.enabled).ok_or(WayInError::Disabled)?;
        // A code that signs in or sets a password; one that proves the address is no way in.
        let way_in = matches!(purpose, CodePurpose::SignIn | CodePurpose::PasswordReset);
        if way_in && self.sso_refuses_address(&email).await? {
            return Err(WayInError::SsoRequired);
        }
        let code = two_factor::new_otp();
        let key = email_code_key(purpose, &email);
        let hash = email_code_hash(&self.data_key.mac_key(), &key, &code);
        let mail = templates.render_email_code(&email, &code, purpose);
        let ttl = Duration::from_secs(self.email_otp.ttl_secs);
        let sign_up = self.email_otp.sign_up;
        let users = &self.actors.users;
        users.send_email_code(key, hash, email, purpose, ttl, mail, sign_up, ip.to_owned()).await?;
        tokio::time::sleep_until(started + LINK_ANSWER_FLOOR).await;
        Ok(())
    }

    /// A mailed code given for `use_`: checked and counted by the users actor in one message (a wrong one counts
    /// against the code, `[email_otp] allowed_attempts`), and against the account's failure limit, reserved
    /// before the check as for a password.
    pub async fn use_email_code(
        &self,
        email: Email,
        code: &str,
        use_: EmailCodeUse,
        client: Client,
    ) -> Result<CodeOutcome, CodeUseError> {
        if !self.offers_email_codes() {
            return Err(CodeUseError::Disabled);
        }
        // By the domain alone, before the code is looked at (one mailed before the policy came on stays unused).
        let way_in = matches!(use_, EmailCodeUse::SignIn { .. } | EmailCodeUse::ResetPassword(_));
        if way_in && self.sso_refuses_address(&email).await? {
            return Err(CodeUseError::SsoRequired);
        }
        let users = &self.actors.users;
        let ip = client.ip_address.clone();
        let account = self.indexes.users.by_email(&email);
        // A reset's new password is vetted before the code is looked at (as its length is), so a refused one neither
        // spends nor counts the code. An address without an account is vetted by its own words, so the answer does
        // not tell whether one exists.
        if let EmailCodeUse::ResetPassword(password) = &use_ {
            match &account {
                Some(user) => self.vet_password_of(user, password).await?,
                None => {
                    let context = PasswordContext { email: email.as_str(), name: "", second_factor: false };
                    self.vet_password(password, context).await?
                }
            }
        }
        let owner = account.map(|u| u.id);
        users.begin_attempt(email.clone(), owner, ip.clone()).await.map_err(|e| match e {
            AttemptRefused::Locked(wait) => CodeUseError::Locked(wait),
            AttemptRefused::Unavailable(u) => CodeUseError::Unavailable(u),
        })?;
        // A task of its own, as a password check is: dropped between the reservation and its end (the client
        // hanging up), the reservation would count against the account for good.
        let this = self.clone();
        let (checking, ip2, code) = (email.clone(), ip.clone(), code.to_owned());
        let checked = self
            .tasks
            .spawn(async move { this.check_and_use(checking, code, use_, client, ip2).await })
            .await
            .map_err(|_| Unavailable)?;
        let outcome = match &checked {
            Ok(_) => Checked::Verified,
            Err(CodeUseError::Invalid | CodeUseError::Expired | CodeUseError::TooManyAttempts) => Checked::Wrong,
            Err(_) => Checked::NotChecked,
        };
        match owner {
            Some(id) => users.finish_code_attempt(email, id, outcome, ip).await?,
            None => users.finish_attempt(email, None, outcome, ip).await?,
        }
        match &checked {
            Ok(CodeOutcome::SignedIn(_)) => self.counters.count(Counter::SignInSucceeded),
            Ok(CodeOutcome::Reset) => self.counters.count(Counter::PasswordReset),
            _ => {}
        }
        checked
    }

    async fn check_and_use(
        &self,
        email: Email,
        code: String,
        use_: EmailCodeUse,
        client: Client,
        ip: String,
    ) -> Result<CodeOutcome, CodeUseError> {
        let (purpose, then) = match use_ {
            EmailCodeUse::Check(purpose) => (purpose, CodeUse::Check),
            EmailCodeUse::SignIn { name, image } => {
                let role = self.roles.default_role();
                let sign_up = self.email_otp.sign_up;
                (CodePurpose::SignIn, CodeUse::SignIn { name, image, role, sign_up, client })
            }
            EmailCodeUse::VerifyEmail => (CodePurpose::EmailVerification, CodeUse::VerifyEmail),
            EmailCodeUse::ResetPassword(password) => {
                let password_hash = self.hasher.hash(password).await.map_err(|e| match e {
                    HashError::Busy => CodeUseError::Busy,
                    HashError::Params(_) | HashError::Failed(_) => CodeUseError::Unavailable(Unavailable),
                })?;
                (CodePurpose::PasswordReset, CodeUse::ResetPassword { password_hash })
            }
        };
        let key = email_code_key(purpose, &email);
        let hash = email_code_hash(&self.data_key.mac_key(), &key, &code);
        let allowed = self.email_otp.allowed_attempts;
        let used = self.actors.users.use_email_code(key, hash, email, purpose, allowed, then, ip).await;
        match used.map_err(|e| match e {
            EmailCodeError::Expired => CodeUseError::Expired,
            EmailCodeError::Invalid => CodeUseError::Invalid,
            EmailCodeError::TooManyAttempts => CodeUseError::TooManyAttempts,
            EmailCodeError::UserNotFound => CodeUseError::UserNotFound,
            EmailCodeError::Unavailable(u) => CodeUseError::Unavailable(u),
        })? {
            CodeUsed::Checked => Ok(CodeOutcome::Checked),
            CodeUsed::Verified(user) => Ok(CodeOutcome::Verified(user)),
            CodeUsed::Reset => Ok(CodeOutcome::Reset),
            CodeUsed::SignedIn(passed) => self.passed(passed).map(CodeOutcome::SignedIn).map_err(|e| match e {
                CreateSessionError::Banned => CodeUseError::Banned,
                CreateSessionError::UnknownUser | CreateSessionError::Unavailable(_) => Unavailable.into(),
            }),
        }
    }

    /// The session a way in through the mailbox started, with its account as now published.
    fn passed(&self, passed: WayInPassed) -> Result<SignedIn, CreateSessionError> {
        let (token, session) = passed.started?;
        let user = self.indexes.users.get(passed.user.id).unwrap_or(passed.user);
        Ok(SignedIn { token, session, user })
    }
}
