//! The second factor, as better-auth's `twoFactor` plugin offers it: enrolment of an authenticator app (TOTP),
//! backup codes, and the sign-in step between a right password and a session.
//!
//! The TOTP secret is sealed with the data key before it reaches the users actor, and opened here only to check a
//! code: the store never holds it in the clear. Every code checked at sign-in spends from the account's one
//! failure budget (the password's, [`crate::actors::attempts`]); only a right second factor clears it, never a
//! right password alone, so a password does not buy an endless supply of guesses at the code.

use std::sync::Arc;
use std::time::Duration;

use tracing::Instrument;

use super::account::AccountError;
use super::auth::SignedIn;
use super::{Accounts, Client, Current, Unavailable};
use crate::actors::sessions::CreateSessionError;
use crate::actors::users::IssueError;
use crate::actors::users::{AttemptRefused, Checked, CodeError, FactorChange, FactorError, PassError, Proof};
use crate::domain::two_factor::{self, OTP_ATTEMPTS, OTP_TTL, TwoFactor};
use crate::domain::{OneTimeToken, Password, SessionToken, Timestamp, TokenHash, TokenKind, User, UserId};

/// Errors of the two-factor calls; the messages are better-auth's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TwoFactorError {
    #[error("Invalid password")]
    InvalidPassword,
    #[error("TOTP is already enabled")]
    AlreadyEnabled,
    #[error("TOTP not enabled")]
    TotpNotEnabled,
    #[error("Two factor isn't enabled")]
    NotEnabled,
    #[error("Invalid code")]
    InvalidCode,
    #[error("Invalid backup code")]
    InvalidBackupCode,
    #[error("Invalid two factor cookie")]
    InvalidCookie,
    #[error("Too many attempts. Please request a new code.")]
    TooManyAttempts,
    /// A mailed code tried too often (the sign-in's challenge, if any, goes on: a new code may be asked for).
    #[error("Too many attempts. Please request a new code.")]
    CodeUsedUp,
    /// Codes by mail are off (`[two_factor] codes_by_mail`) or no mail transport is configured.
    #[error("OTP is not available")]
    OtpNotConfigured,
    /// A mailed code asked for by an account whose factor is not on: a code by mail passes a factor, it is not
    /// one of its own.
    #[error("OTP not enabled")]
    OtpNotEnabled,
    /// No live mailed code (never sent, expired, or used).
    #[error("OTP has expired")]
    OtpExpired,
    #[error("Too much mail is waiting to be sent. Please try again later.")]
    OutboxFull,
    #[error("Too many failed verification attempts. Your account is temporarily locked. Please try again later.")]
    AccountLocked(Duration),
    /// A password confirmation refused by the failure limit.
    #[error("Too many requests. Please try again later.")]
    Locked(Duration),
    #[error("User not found")]
    UserNotFound,
    #[error("The service is busy. Please try again in a moment.")]
    Busy,
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
}

impl From<AccountError> for TwoFactorError {
    fn from(e: AccountError) -> Self {
        match e {
            // Confirming a password vets no new one: a refusal by the policy cannot come from here.
            AccountError::InvalidPassword | AccountError::Password(_) => Self::InvalidPassword,
            AccountError::Locked(wait) => Self::Locked(wait),
            // A password check changes no username either.
            AccountError::UserNotFound | AccountError::LastAdmin | AccountError::UsernameTaken => Self::UserNotFound,
            AccountError::Busy => Self::Busy,
            AccountError::Unavailable(u) => Self::Unavailable(u),
        }
    }
}

impl From<FactorError> for TwoFactorError {
    fn from(e: FactorError) -> Self {
        match e {
            FactorError::UserNotFound | FactorError::NotAdmin => Self::UserNotFound,
            FactorError::AlreadyEnabled => Self::AlreadyEnabled,
            FactorError::NotEnrolled => Self::TotpNotEnabled,
            FactorError::NotEnabled => Self::NotEnabled,
            FactorError::Replayed => Self::InvalidCode,
            FactorError::Unavailable(u) => Self::Unavailable(u),
        }
    }
}

/// A new enrolment: the URI for the authenticator app and the backup codes, shown this once.
pub struct Enrolment {
    pub totp_uri: String,
    pub backup_codes: Vec<String>,
}

/// How a sign-in's second factor is proven.
pub enum Code {
    Totp(String),
    Backup(String),
    /// A code from `two-factor/send-otp`'s mail.
    Mailed(String),
}

/// What a mailed code is for: a sign-in waiting at its second factor (the two-factor cookie's token), or a
/// signed-in session (its token).
pub enum CodeFor<'a> {
    Challenge(&'a SessionToken),
    Session(&'a SessionToken, &'a Current),
}

/// A challenge passed: the session, and the trusted device's new token when one was asked for.
pub struct Verified {
    pub signed_in: SignedIn,
    pub remember_me: bool,
    pub trusted: Option<SessionToken>,
}

impl Accounts {
    /// `POST two-factor/enable`: after the password, a new secret and ten backup codes (replacing an enrolment not
    /// confirmed yet); the factor is on once [`Accounts::confirm_totp`] accepts a first code.
    pub async fn enable_two_factor(
        &self,
        current: &Current,
        password: Password,
        issuer: Option<&str>,
        ip: &str,
    ) -> Result<Enrolment, TwoFactorError> {
        if current.user.has_second_factor() {
            return Err(TwoFactorError::AlreadyEnabled);
        }
        self.confirm_password(&current.user, password, ip).await?;
        let id = current.user.id.to_bytes();
        let secret = two_factor::new_secret();
        let sealed_secret = self.data_key.seal(&secret, &two_factor::secret_context(&id)).into_boxed_slice();
        let codes = two_factor::new_backup_codes();
        let backup_codes = self.hash_backup_codes(current.user.id, &codes);
        let change = FactorChange::Enrol { sealed_secret, backup_codes };
        let user = self.actors.users.change_factor(current.user.id, current.actor(), change, ip.to_owned()).await?;
        let issuer = issuer.unwrap_or(&self.two_factor_issuer);
        Ok(Enrolment { totp_uri: two_factor::uri(&secret, issuer, user.email()), backup_codes: codes })
    }

    /// `POST two-factor/get-totp-uri`: the enrolled secret's URI again, after the password.
    pub async fn totp_uri(&self, current: &Current, password: Password, ip: &str) -> Result<String, TwoFactorError> {
        let factor = current.user.two_factor().cloned().ok_or(TwoFactorError::TotpNotEnabled)?;
        self.confirm_password(&current.user, password, ip).await?;
        let secret = self.open_secret(&current.user, &factor)?;
        Ok(two_factor::uri(&secret, &self.two_factor_issuer, current.user.email()))
    }

    /// `POST two-factor/verify-totp` with a session: a code of the enrolled authenticator. The first one turns the
    /// factor on; each is accepted once. Like every code, it spends from the account's one failure budget, reserved
    /// before the check (a stolen session cannot guess at line speed, nor past the lock), and a wrong one is
    /// audited; a right one clears the count, as a right second factor does at sign-in.
    pub async fn confirm_totp(&self, current: &Current, code: &str, ip: &str) -> Result<Arc<User>, TwoFactorError> {
        let (me, user, actor) = (self.clone(), Arc::clone(&current.user), current.actor());
        let (code, ip) = (code.to_owned(), ip.to_owned());
        // A task of its own, as a sign-in's password check: dropped between the reservation and its end (the
        // client hung up), the reservation would count against the account until its window ends.
        let check = async move { me.check_totp(&user, actor, &code, ip).await };
        self.tasks.spawn(check.in_current_span()).await.map_err(|_| Unavailable)?
    }

    /// [`Accounts::confirm_totp`]'s reservation, check and outcome.
    async fn check_totp(
        &self,
        user: &User,
        actor: UserId,
        code: &str,
        ip: String,
    ) -> Result<Arc<User>, TwoFactorError> {
        let factor = user.two_factor().cloned().ok_or(TwoFactorError::TotpNotEnabled)?;
        let users = &self.actors.users;
        users.begin_attempt(user.email_address(), Some(user.id), ip.clone()).await.map_err(|e| match e {
            AttemptRefused::Locked(wait) => TwoFactorError::AccountLocked(wait),
            AttemptRefused::Unavailable(u) => TwoFactorError::Unavailable(u),
        })?;
        let secret = match self.open_secret(user, &factor) {
            Ok(secret) => secret,
            Err(e) => {
                users.finish_code_attempt(user.email_address(), user.id, Checked::NotChecked, ip).await?;
                return Err(e);
            }
        };
        let confirmed = match two_factor::verify(&secret, code, now_step(), factor.last_step) {
            Some(step) => users.change_factor(user.id, actor, FactorChange::Confirm { step }, ip.clone()).await,
            None => Err(FactorError::Replayed),
        };
        let checked = match &confirmed {
            Ok(_) => Checked::Verified,
            // No step of the window, or one already used (a race with another request): a wrong code.
            Err(FactorError::Replayed) => Checked::Wrong,
            Err(_) => Checked::NotChecked,
        };
        if checked == Checked::Wrong {
            users.code_failed(user.id, ip.clone()).await?;
        }
        users.finish_code_attempt(user.email_address(), user.id, checked, ip).await?;
        Ok(confirmed?)
    }

    /// `POST two-factor/generate-backup-codes`: ten new codes after the password; the old ones die.
    pub async fn new_backup_codes(
        &self,
        current: &Current,
        password: Password,
        ip: &str,
    ) -> Result<Vec<String>, TwoFactorError> {
        if !current.user.has_second_factor() {
            return Err(TwoFactorError::NotEnabled);
        }
        self.confirm_password(&current.user, password, ip).await?;
        let codes = two_factor::new_backup_codes();
        let backup_codes = self.hash_backup_codes(current.user.id, &codes);
        let change = FactorChange::NewBackupCodes { backup_codes };
        self.actors.users.change_factor(current.user.id, current.actor(), change, ip.to_owned()).await?;
        Ok(codes)
    }

    /// `POST two-factor/disable`: after the password, the factor is forgotten and every trusted device ends.
    pub async fn disable_two_factor(
        &self,
        current: &Current,
        password: Password,
        ip: &str,
    ) -> Result<Arc<User>, TwoFactorError> {
        if current.user.two_factor().is_none() {
            return Err(TwoFactorError::NotEnabled);
        }
        self.confirm_password(&current.user, password, ip).await?;
        Ok(self
            .actors
            .users
            .change_factor(current.user.id, current.actor(), FactorChange::Disable, ip.to_owned())
            .await?)
    }

    /// An administrator's reset of `user`'s second factor: forgotten, and every session and trusted device of the
    /// account ends, in one commit. `Ok(false)`: the account had none.
    pub async fn reset_two_factor(&self, admin: UserId, user: UserId, ip: &str) -> Result<bool, TwoFactorError> {
        let target = self.indexes.users.get(user).ok_or(TwoFactorError::UserNotFound)?;
        if target.two_factor().is_none() {
            return Ok(false);
        }
        self.actors.users.change_factor(user, admin, FactorChange::Reset { by: admin }, ip.to_owned()).await?;
        Ok(true)
    }

    /// The account a trusted-device cookie vouches for, if it is live and the account's.
    pub(super) fn trusted_device(&self, user: UserId, token: &SessionToken) -> bool {
        let now = crate::domain::Timestamp::now();
        self.indexes.tokens.get(&token.hash()).is_some_and(|t| {
            t.kind == crate::domain::TokenKind::TrustedDevice && t.user_id == user && !t.is_expired(now)
        })
    }

    /// The sign-in step: `challenge` (the two-factor cookie) proven with `code`. A wrong code counts against the
    /// challenge (five, then it ends) and against the account's failure budget; a right one ends the challenge,
    /// uses the code up and opens the session (with `trust`, a trusted device too).
    pub async fn verify_challenge(
        &self,
        challenge: &SessionToken,
        code: Code,
        trust: bool,
        client: Client,
    ) -> Result<Verified, TwoFactorError> {
        let hash = challenge.hash();
        let user = self.challenged(&hash)?;
        let factor = user.two_factor().cloned().filter(|f| f.enabled).ok_or(TwoFactorError::TotpNotEnabled)?;
        let ip = client.ip_address.clone();
        let users = &self.actors.users;
        // One budget for the account, whichever factor is tried.
        users.begin_attempt(user.email_address(), Some(user.id), ip.clone()).await.map_err(|e| match e {
            AttemptRefused::Locked(wait) => TwoFactorError::AccountLocked(wait),
            AttemptRefused::Unavailable(u) => TwoFactorError::Unavailable(u),
        })?;
        // Only what needs the data key or the clock is worked out here; whether the proof passes is decided by the
        // users actor in the message that takes the challenge's attempt, so its five hold under any concurrency.
        let proof = match &code {
            Code::Totp(code) => match self.open_secret(&user, &factor) {
                Ok(secret) => Proof::Totp { step: two_factor::verify(&secret, code, now_step(), factor.last_step) },
                Err(e) => {
                    users.finish_code_attempt(user.email_address(), user.id, Checked::NotChecked, ip).await?;
                    return Err(e);
                }
            },
            Code::Backup(code) => Proof::BackupCode { hash: self.backup_code_hash(user.id, code) },
            Code::Mailed(code) => {
                let key = two_factor::otp_key(&hash);
                // No live code, or one with no try left: nothing to check (better-auth's answers for either).
                if let Err(e) = self.live_code(&user, &key) {
                    users.finish_code_attempt(user.email_address(), user.id, Checked::NotChecked, ip).await?;
                    return Err(e);
                }
                Proof::MailedCode { key, hash: self.otp_hash(&user, &key, code) }
            }
        };
        let trusted = trust.then(SessionToken::generate);
        let passed = users.pass(hash, proof, trusted.as_ref().map(SessionToken::hash), client).await;
        let checked = match &passed {
            Ok(_) => Checked::Verified,
            Err(PassError::Refused | PassError::Exhausted) => Checked::Wrong,
            Err(_) => Checked::NotChecked,
        };
        users.finish_code_attempt(user.email_address(), user.id, checked, ip).await?;
        let passed = passed.map_err(|e| match e {
            PassError::Refused => match code {
                Code::Totp(_) | Code::Mailed(_) => TwoFactorError::InvalidCode,
                Code::Backup(_) => TwoFactorError::InvalidBackupCode,
            },
            PassError::Exhausted => TwoFactorError::TooManyAttempts,
            PassError::InvalidChallenge => TwoFactorError::InvalidCookie,
            PassError::NotEnabled => TwoFactorError::TotpNotEnabled,
            PassError::Unavailable(u) => TwoFactorError::Unavailable(u),
        })?;
        let remember_me = passed.remember_me;
        // Started by the users actor in the commit that ended the challenge.
        let (token, session) = passed.started.map_err(|e| match e {
            // The password was right; a ban since is the ban's answer at the next sign-in.
            CreateSessionError::Banned | CreateSessionError::UnknownUser => TwoFactorError::InvalidCookie,
            CreateSessionError::Unavailable(u) => TwoFactorError::Unavailable(u),
        })?;
        let user = self.indexes.users.get(passed.user.id).unwrap_or(passed.user);
        Ok(Verified { signed_in: SignedIn { token, session, user }, remember_me, trusted })
    }

    /// Whether codes by mail are offered: `[two_factor] codes_by_mail` and a mail transport.
    pub fn offers_codes_by_mail(&self) -> bool {
        self.codes_by_mail && self.templates.is_some()
    }

    /// `POST two-factor/send-otp`: a new six-digit code for the account, kept as a keyed hash (replacing the one
    /// sent before for the same sign-in or session) and mailed through the outbox, in one commit.
    pub async fn send_code(&self, to: CodeFor<'_>, ip: &str) -> Result<(), TwoFactorError> {
        let templates =
            self.templates.as_ref().filter(|_| self.codes_by_mail).ok_or(TwoFactorError::OtpNotConfigured)?;
        let (scope, user) = match to {
            CodeFor::Challenge(token) => {
                let hash = token.hash();
                (hash, self.challenged(&hash)?)
            }
            CodeFor::Session(token, current) => (token.hash(), Arc::clone(&current.user)),
        };
        if !has_totp(&user) {
            return Err(TwoFactorError::OtpNotEnabled);
        }
        let key = two_factor::otp_key(&scope);
        let code = two_factor::new_otp();
        let now = Timestamp::now();
        let token = OneTimeToken {
            kind: TokenKind::TwoFactorOtp,
            user_id: user.id,
            created_at: now,
            expires_at: now.plus(OTP_TTL),
            requested_by: None,
            failures: 0,
            code: Some(self.otp_hash(&user, &key, &code)),
            address: None,
        };
        let mail = templates.render_code(&user, &code);
        self.actors.users.send_code(key, token, mail, ip.to_owned()).await.map_err(|e| match e {
            IssueError::OutboxFull => TwoFactorError::OutboxFull,
            IssueError::Unavailable(u) => TwoFactorError::Unavailable(u),
        })
    }

    /// `POST two-factor/verify-otp` with a session: the code mailed for this session, used up. A wrong one counts
    /// against the code (five, then a new one must be asked for) and the account's failure budget.
    pub async fn confirm_code(
        &self,
        token: &SessionToken,
        current: &Current,
        code: &str,
        ip: &str,
    ) -> Result<(), TwoFactorError> {
        let user = &current.user;
        if !has_totp(user) {
            return Err(TwoFactorError::OtpNotEnabled);
        }
        let users = &self.actors.users;
        let ip = ip.to_owned();
        users.begin_attempt(user.email_address(), Some(user.id), ip.clone()).await.map_err(|e| match e {
            AttemptRefused::Locked(wait) => TwoFactorError::AccountLocked(wait),
            AttemptRefused::Unavailable(u) => TwoFactorError::Unavailable(u),
        })?;
        let key = two_factor::otp_key(&token.hash());
        // Right or wrong, the users actor decides and counts, in one message: the code's five hold under any
        // concurrency.
        let checked = match self.live_code(user, &key) {
            Ok(()) => users.use_code(user.id, key, self.otp_hash(user, &key, code), ip.clone()).await,
            Err(e) => {
                users.finish_code_attempt(user.email_address(), user.id, Checked::NotChecked, ip).await?;
                return Err(e);
            }
        };
        match checked {
            Ok(()) => {
                users.finish_code_attempt(user.email_address(), user.id, Checked::Verified, ip).await?;
                Ok(())
            }
            Err(CodeError::Wrong) => {
                // Counted against the code and audited by the users actor, in the message that checked it.
                users.finish_code_attempt(user.email_address(), user.id, Checked::Wrong, ip).await?;
                Err(TwoFactorError::InvalidCode)
            }
            Err(CodeError::AccountGone) => {
                // Deleted meanwhile: it has no factor to check any more.
                users.finish_code_attempt(user.email_address(), user.id, Checked::NotChecked, ip).await?;
                Err(TwoFactorError::OtpNotEnabled)
            }
            Err(CodeError::Unavailable(u)) => {
                users.finish_code_attempt(user.email_address(), user.id, Checked::NotChecked, ip).await?;
                Err(TwoFactorError::Unavailable(u))
            }
        }
    }

    /// The account a live sign-in challenge (the two-factor cookie's token hash) waits for.
    fn challenged(&self, hash: &TokenHash) -> Result<Arc<User>, TwoFactorError> {
        let now = Timestamp::now();
        let pending = self
            .indexes
            .tokens
            .get(hash)
            .filter(|t| matches!(t.kind, TokenKind::TwoFactorChallenge { .. }) && !t.is_expired(now))
            .ok_or(TwoFactorError::InvalidCookie)?;
        self.indexes.users.get(pending.user_id).ok_or(TwoFactorError::InvalidCookie)
    }

    /// Whether a mailed code is kept under `key` for `user` with tries left: `Err` when there is none live
    /// (better-auth's `OTP_HAS_EXPIRED`) or it has had its five wrong tries. Whether the code given is that one is
    /// the users actor's to decide, in the message that counts a wrong one.
    fn live_code(&self, user: &User, key: &TokenHash) -> Result<(), TwoFactorError> {
        let now = Timestamp::now();
        let kept = self
            .indexes
            .tokens
            .get(key)
            .filter(|t| t.kind == TokenKind::TwoFactorOtp && t.user_id == user.id && !t.is_expired(now))
            .filter(|t| t.code.is_some())
            .ok_or(TwoFactorError::OtpExpired)?;
        if kept.failures >= OTP_ATTEMPTS {
            return Err(TwoFactorError::CodeUsedUp);
        }
        Ok(())
    }

    fn otp_hash(&self, user: &User, key: &TokenHash, code: &str) -> [u8; 32] {
        two_factor::otp_hash(&self.data_key.mac_key(), &user.id.to_bytes(), key, code)
    }

    /// Ten backup codes' stored forms.
    fn hash_backup_codes(&self, user: UserId, codes: &[String]) -> Box<[[u8; 32]]> {
        codes.iter().map(|c| self.backup_code_hash(user, c)).collect()
    }

    fn backup_code_hash(&self, user: UserId, code: &str) -> [u8; 32] {
        two_factor::backup_code_hash(&self.data_key.mac_key(), &user.to_bytes(), code)
    }

    /// The account's TOTP key. A store whose key was lost (restored without its `.key`) cannot open it: the
    /// account then signs in with a backup code, or an administrator resets its factor.
    fn open_secret(&self, user: &User, factor: &TwoFactor) -> Result<Vec<u8>, TwoFactorError> {
        self.data_key.open(&factor.sealed_secret, &two_factor::secret_context(&user.id.to_bytes())).map_err(|e| {
            tracing::error!(user = %user.id, error = %e, "a TOTP secret does not open with this data key");
            TwoFactorError::Unavailable(Unavailable)
        })
    }
}

/// An authenticator enrolled and confirmed: what a mailed code stands in for.
fn has_totp(user: &User) -> bool {
    user.two_factor().is_some_and(|f| f.enabled)
}

fn now_step() -> u64 {
    let secs = crate::domain::Timestamp::now().as_millis().max(0) as u64 / 1000;
    two_factor::step_of(secs)
}
