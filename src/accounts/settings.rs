//! The settings a reload may replace while the server runs (`service-auth reload`, SIGHUP): each is held behind
//! an `ArcSwap`, read without a lock on every request, and swapped whole, so a request sees the old settings or
//! the new ones, never half of each.

use std::sync::Arc;

use super::{Accounts, PasswordCheck};
use crate::actors::Unavailable;
use crate::config::Config;
use crate::domain::action;

impl Accounts {
    /// Puts the facade's live settings of `config` in effect: the password policy (`[passwords]`, and
    /// `[two_factor] issuer`, one of its context words). `config` has been validated.
    pub fn apply_settings(&self, config: &Config) {
        self.passwords.store(Arc::new(PasswordCheck::new(config)));
    }

    /// The audit entry of a reload, durable before the reload is answered. `detail` names the sections that
    /// changed and those left for a restart (never a value: a section may hold a secret).
    pub async fn audit_reload(&self, detail: String) -> Result<(), Unavailable> {
        self.audit.write(crate::store::audit::entry(action::SETTINGS_RELOADED, None, None, "", detail)).await
    }
}
