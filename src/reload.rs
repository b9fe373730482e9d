//! Settings without a restart: `service-auth reload` (through the control socket) or SIGHUP reads `config.toml`
//! again, checks it as `check-config` does, and puts what may change live in effect; the rest waits for a restart
//! and the answer, the log and the audit entry say which.
//!
//! A file that does not load (a syntax error, an unknown key, a bad value) changes nothing: the reason goes to the
//! log and to `service-auth reload`, which exits non-zero. Nothing is closed or restarted: each live setting is
//! held behind an `ArcSwap` that the requests read without a lock, and replaced whole.

use std::sync::Arc;

use crate::config::{self, Config};
use crate::http::AppState;

/// Reloads the running server's settings; one reload at a time.
pub struct Reloader {
    state: Arc<AppState>,
    /// The configuration as loaded (before the server's own adjustments, such as the connection budget), with
    /// the live settings of the last reload: what a new file is compared with.
    in_effect: tokio::sync::Mutex<Config>,
}

/// What a reload did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reloaded {
    /// The sections whose live settings changed and are now in effect.
    pub applied: Vec<&'static str>,
    /// The sections that changed in the file but only take effect at the next start.
    pub need_restart: Vec<&'static str>,
    /// What the file asked for and this reload left as it was, with why: an `[[oauth.providers]]` whose discovery
    /// failed (the provider in effect stays).
    pub not_applied: Vec<String>,
}

impl std::fmt::Display for Reloaded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let list = |names: &[&str]| names.iter().map(|n| format!("[{n}]")).collect::<Vec<_>>().join(", ");
        match self.applied.as_slice() {
            [] => f.write_str("nothing to apply")?,
            applied => write!(f, "applied {}", list(applied))?,
        }
        if !self.need_restart.is_empty() {
            write!(f, "; changed but applied only at the next start: {}", list(&self.need_restart))?;
        }
        if !self.not_applied.is_empty() {
            write!(f, "; not applied: [oauth] {}", self.not_applied.join(", "))?;
        }
        Ok(())
    }
}

impl Reloader {
    /// `loaded`: the configuration the server started with, as `config::load` gave it.
    pub fn new(state: Arc<AppState>, loaded: Config) -> Self {
        Self { state, in_effect: tokio::sync::Mutex::new(loaded) }
    }

    /// Reads the file the server started with again and applies what may change live. `Err` says why nothing
    /// changed.
    pub async fn reload(&self) -> Result<Reloaded, String> {
        let mut in_effect = self.in_effect.lock().await;
        let Some(source) = in_effect.source.clone() else {
            return Err("the server started without a configuration file: there is nothing to read again".into());
        };
        // The same load as at start (and as `check-config`): the file, then the environment, then every check.
        let read = tokio::task::spawn_blocking(move || config::load(Some(&source)))
            .await
            .map_err(|e| format!("reading the configuration: {e}"))?;
        let new = read.map_err(|e| e.to_string())?;
        let mut next = in_effect.clone();
        copy_live(&new, &mut next);
        let need_restart = differing(&next, &new);
        // The providers are made ready (discovered) before anything changes; one whose discovery fails stays as it
        // was, and `next` says what is in effect.
        let providers = match next.oauth.providers != in_effect.oauth.providers {
            true => Some(self.state.accounts.oauth().prepare(&next.oauth.providers).await),
            false => None,
        };
        let mut not_applied = Vec::new();
        if let Some(prepared) = &providers {
            next.oauth.providers = prepared.in_effect.clone();
            not_applied = prepared.refused.clone();
        }
        let reloaded = Reloaded { applied: differing(&in_effect, &next), need_restart, not_applied };
        // Audited before anything changes: a store that refuses the entry refuses the reload.
        self.state
            .accounts
            .audit_reload(reloaded.to_string())
            .await
            .map_err(|_| "the store does not accept writes: nothing changed".to_owned())?;
        self.state.apply_settings(&next);
        if let Some(prepared) = providers {
            self.state.accounts.oauth().install(prepared);
        }
        self.state.record_reload(&next, reloaded.need_restart.clone());
        *in_effect = next;
        Ok(reloaded)
    }

    /// [`reload`](Self::reload), its outcome logged (for SIGHUP, which has no one to answer).
    pub async fn reload_logged(&self) -> Result<Reloaded, String> {
        let outcome = self.reload().await;
        match &outcome {
            Ok(reloaded) if reloaded.need_restart.is_empty() && reloaded.not_applied.is_empty() => {
                tracing::info!("configuration reloaded: {reloaded}")
            }
            Ok(reloaded) => tracing::warn!("configuration reloaded: {reloaded}"),
            Err(why) => tracing::error!("configuration not reloaded, nothing changed: {why}"),
        }
        outcome
    }
}

/// Copies the settings a reload may change ([`config::LIVE`]) from `from` into `to`.
fn copy_live(from: &Config, to: &mut Config) {
    to.passwords = from.passwords.clone();
    let (limits, new) = (&mut to.rate_limit, &from.rate_limit);
    limits.sign_in_per_address = new.sign_in_per_address;
    limits.sign_up_per_address = new.sign_up_per_address;
    limits.mail_per_address = new.mail_per_address;
    to.session.fresh_age_secs = from.session.fresh_age_secs;
    // Which providers there are, and each one's settings (secret included); whether their tokens are kept decides
    // what the linked accounts hold, and waits for a restart.
    to.oauth.providers = from.oauth.providers.clone();
    // What the deliverer reads at each round; whether internal targets and http:// are allowed decided which
    // endpoints were registered, and stays.
    let (hooks, new) = (&mut to.webhooks, &from.webhooks);
    hooks.timeout_ms = new.timeout_ms;
    hooks.max_backoff_secs = new.max_backoff_secs;
    hooks.failing_after_secs = new.failing_after_secs;
    hooks.concurrency = new.concurrency;
    hooks.log_retention_days = new.log_retention_days;
    hooks.proxy = new.proxy.clone();
    // The transport may change, not whether there is one: with mail on or off the API offers different calls
    // (verification, magic links, codes by mail), decided at start.
    let has_mail = |c: &Config| c.email.smtp_url.is_some() || c.email.directory.is_some();
    if has_mail(from) && has_mail(to) {
        to.email.smtp_url = from.email.smtp_url.clone();
        to.email.directory = from.email.directory.clone();
        to.email.from = from.email.from.clone();
    }
}

/// The top-level sections (and keys) of `a` and `b` that differ. Every field is named, so a key added to
/// `Config` without a place here does not compile.
fn differing(a: &Config, b: &Config) -> Vec<&'static str> {
    let Config {
        listen,
        data_dir,
        data_key_file,
        log,
        base_url,
        trusted_origins,
        trusted_proxies,
        cookie,
        session,
        roles,
        hashing,
        rate_limit,
        backup,
        limits,
        audit,
        organizations,
        api_keys,
        sso,
        email,
        metrics,
        store,
        passkeys,
        two_factor,
        magic_link,
        email_otp,
        webhooks,
        provider,
        passwords,
        oauth,
        username,
        // From the environment only (the bootstrap administrator) and the file's path: not the file's content.
        bootstrap_admin: _,
        source: _,
    } = a;
    let mut names = Vec::new();
    macro_rules! compare {
        ($($field:ident),*) => {
            $( if *$field != b.$field { names.push(stringify!($field)); } )*
        };
    }
    compare!(
        listen,
        data_dir,
        data_key_file,
        log,
        base_url,
        trusted_origins,
        trusted_proxies,
        cookie,
        session,
        roles,
        hashing,
        rate_limit,
        backup,
        limits,
        audit,
        organizations,
        api_keys,
        sso,
        email,
        metrics,
        store,
        passkeys,
        two_factor,
        magic_link,
        email_otp,
        webhooks,
        provider,
        passwords,
        oauth,
        username
    );
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn live_settings_are_applied_and_the_rest_named_for_a_restart() {
        let old = Config::default();
        let mut new = old.clone();
        new.passwords.min_length = 20;
        new.rate_limit.sign_in_per_address = 7;
        new.rate_limit.failures_per_account = 3;
        new.listen = "127.0.0.1:4000".parse().unwrap();
        let mut next = old.clone();
        copy_live(&new, &mut next);
        assert_eq!(differing(&old, &next), ["rate_limit", "passwords"]);
        assert_eq!(differing(&next, &new), ["listen", "rate_limit"], "failures_per_account waits for a restart");
        assert_eq!(next.passwords.min_length, 20);
        assert_eq!(next.rate_limit.failures_per_account, old.rate_limit.failures_per_account);
        assert_eq!(next.listen, old.listen);
        let reloaded =
            Reloaded { applied: differing(&old, &next), need_restart: differing(&next, &new), not_applied: vec![] };
        assert_eq!(
            reloaded.to_string(),
            "applied [rate_limit], [passwords]; changed but applied only at the next start: [listen], [rate_limit]"
        );
    }

    #[test]
    fn the_mail_transport_changes_live_but_mail_is_not_turned_on_or_off() {
        let mut on = Config::default();
        on.email.directory = Some("/tmp/mail-a".into());
        let mut moved = on.clone();
        moved.email.directory = None;
        moved.email.smtp_url = Some("smtp://127.0.0.1:2525".into());
        moved.email.from = "Ops <ops@example.com>".into();
        moved.session.fresh_age_secs = 60;
        let mut next = on.clone();
        copy_live(&moved, &mut next);
        assert_eq!((differing(&on, &next), differing(&next, &moved)), (vec!["session", "email"], vec![]));
        assert_eq!(next.email, moved.email);

        let off = Config::default();
        let mut next = on.clone();
        copy_live(&off, &mut next);
        assert_eq!((differing(&on, &next), differing(&next, &off)), (vec![], vec!["email"]), "mail stays on");
        let mut next = off.clone();
        copy_live(&on, &mut next);
        assert_eq!((differing(&off, &next), differing(&next, &on)), (vec![], vec!["email"]), "mail stays off");
    }
}
