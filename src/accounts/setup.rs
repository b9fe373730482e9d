//! The first administrator from a browser: while no administrator exists, `serve` issues one setup link
//! (`/admin/setup?token=…`, logged once, valid 30 minutes, single use) where the first administrator is created.
//! The token lives only in this process's memory and only as its SHA-256; a restart issues a new one and the old
//! one is dead. The bootstrap variables and `admin create` remain the ways without a browser.

use std::time::{Duration, Instant};

use subtle::ConstantTimeEq;

use super::{Accounts, Unavailable};
use crate::actors::users::{AdminVia, EnsureAdmin, EnsureAdminError};
use crate::domain::{Email, Name, Password, PasswordContext, SessionToken, TokenHash, UserId};
use crate::hashing::HashError;

/// How long a setup link works after start-up.
pub const SETUP_LINK_TTL: Duration = Duration::from_secs(30 * 60);

/// The one setup link of this process, if it issued one and it was not used.
#[derive(Default)]
pub struct SetupLink {
    /// Held across the whole creation, so two uses of one link cannot both create an administrator.
    slot: tokio::sync::Mutex<Option<Issued>>,
}

struct Issued {
    hash: TokenHash,
    expires: Instant,
}

impl Issued {
    /// Whether `given` is this link's token and the link is still live at `now`; the comparison takes the same
    /// time however much of the token is right.
    fn accepts(&self, given: &str, now: Instant) -> bool {
        let Some(token) = SessionToken::parse(given) else { return false };
        bool::from(token.hash().ct_eq(&self.hash)) && now < self.expires
    }
}

/// Why the setup link did not create an administrator.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SetupError {
    /// Not this process's token, used, expired, or never issued (an administrator existed at start).
    #[error(
        "This setup link is not valid: it was used, it expired (30 minutes), or the server restarted since. The server logs a new one at start while no administrator exists."
    )]
    InvalidLink,
    #[error("An administrator exists already: sign in to the console.")]
    AdminExists,
    /// The e-mail belongs to an account someone signed up with: never made administrator by a link.
    #[error("An account with this e-mail exists already: choose another address.")]
    EmailTaken,
    #[error("The service is busy. Please try again in a moment.")]
    Busy,
    #[error("{0}")]
    Hashing(String),
    /// The new password is refused by the policy (too short for the account, listed, or a context word).
    #[error(transparent)]
    Password(#[from] crate::domain::PasswordRefused),
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
}

impl SetupLink {
    /// Issues the link's token (replacing any earlier one), live for `ttl` from now. The caller logs it once.
    pub async fn issue(&self, ttl: Duration) -> SessionToken {
        let token = SessionToken::generate();
        *self.slot.lock().await = Some(Issued { hash: token.hash(), expires: Instant::now() + ttl });
        token
    }

    /// Whether a live link was issued and not used yet (what the setup page shows).
    pub async fn is_open(&self) -> bool {
        self.slot.lock().await.as_ref().is_some_and(|i| Instant::now() < i.expires)
    }
}

impl Accounts {
    /// Creates the first administrator with the setup link's `token`. The link is spent by a success, and closed
    /// once an administrator exists; a refusal of the input (a taken e-mail) leaves it usable.
    pub async fn set_up_first_admin(
        &self,
        link: &SetupLink,
        token: &str,
        name: Name,
        email: Email,
        password: Password,
        ip: String,
    ) -> Result<UserId, SetupError> {
        let mut slot = link.slot.lock().await;
        if !slot.as_ref().is_some_and(|issued| issued.accepts(token, Instant::now())) {
            return Err(SetupError::InvalidLink);
        }
        if self.any_admin() {
            *slot = None;
            return Err(SetupError::AdminExists);
        }
        let context = PasswordContext { email: email.as_str(), name: name.as_str(), second_factor: false };
        self.vet_password(&password, context).await?;
        let hash = self.hash(password).await.map_err(|e| match e {
            HashError::Busy => SetupError::Busy,
            other => SetupError::Hashing(other.to_string()),
        })?;
        let via = AdminVia::SetupLink { ip };
        match self.actors.users.ensure_admin(name, email, hash, false, via).await {
            Ok(EnsureAdmin::Created(id) | EnsureAdmin::Promoted(id)) => {
                *slot = None;
                Ok(id)
            }
            Err(EnsureAdminError::Exists) => Err(SetupError::EmailTaken),
            Err(EnsureAdminError::Unavailable(u)) => Err(SetupError::Unavailable(u)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_accepts_its_own_token_until_it_expires_and_nothing_else() {
        let token = SessionToken::generate();
        let now = Instant::now();
        let issued = Issued { hash: token.hash(), expires: now + SETUP_LINK_TTL };
        assert!(issued.accepts(token.as_str(), now));
        assert!(issued.accepts(token.as_str(), now + SETUP_LINK_TTL - Duration::from_secs(1)));
        assert!(!issued.accepts(token.as_str(), now + SETUP_LINK_TTL), "expired");
        assert!(!issued.accepts(SessionToken::generate().as_str(), now), "another token");
        assert!(!issued.accepts("", now) && !issued.accepts(&token.as_str()[..42], now), "not a token");
    }
}
