//! What every handler shares: the facade, and the front end's own settings.

use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;

use super::metrics::RouteMetrics;
use super::origins::Origins;
use super::rate_limits::AddressLimits;
use super::request_id::RequestIds;
use super::response::CookieSettings;
use crate::accounts::Accounts;
use crate::config::{Config, LimitsConfig, RateLimitConfig};
use crate::domain::Timestamp;

pub struct AppState {
    pub accounts: Accounts,
    pub cookies: CookieSettings,
    pub origins: Origins,
    /// Direct peers whose `X-Forwarded-For` header is believed.
    pub trusted_proxies: Vec<IpAddr>,
    /// Per-address limits on sign-in, sign-up and the calls that send mail; replaced whole by a reload
    /// ([`AppState::apply_settings`]), read without a lock.
    pub rate_limits: ArcSwap<AddressLimits>,
    /// Connection count, per-address share and timeouts.
    pub connections: LimitsConfig,
    /// The store's file and the scheduled backups' directory, for the console's status panel.
    pub store_file: PathBuf,
    pub backup_dir: Option<PathBuf>,
    /// Requests, latencies and refusals per route (no-ops without a metrics listener).
    pub route_metrics: RouteMetrics,
    pub request_ids: RequestIds,
    /// `[log] access`: one line per request.
    pub access_log: bool,
    /// The first-run setup link, while no administrator exists (issued at start, see `accounts::setup`).
    pub setup: crate::accounts::SetupLink,
    /// Origins outside `trusted_origins` seen so far, each logged once.
    pub refused_origins: super::refused_origins::RefusedOrigins,
    /// The configuration in effect as `GET /api/admin/config` shows it; replaced by each reload.
    pub settings: ArcSwap<SettingsView>,
}

/// The configuration in effect, secrets left out ([`Config`]'s serialisation redacts them), and what the last
/// reload left for a restart.
pub struct SettingsView {
    pub settings: serde_json::Value,
    /// The file the server reads (`None`: built-in defaults and the environment only).
    pub source: Option<String>,
    pub reloaded_at: Option<Timestamp>,
    /// Sections changed in the file by the last reload that only a restart puts in effect.
    pub need_restart: Vec<&'static str>,
}

impl SettingsView {
    fn of(config: &Config, reloaded_at: Option<Timestamp>, need_restart: Vec<&'static str>) -> Self {
        Self {
            // Plain data: serialising it cannot fail.
            settings: serde_json::to_value(config).unwrap_or_default(),
            source: config.source.as_ref().map(|p| p.display().to_string()),
            reloaded_at,
            need_restart,
        }
    }
}

impl AppState {
    pub fn new(config: &Config, accounts: Accounts) -> Self {
        let limits = &config.rate_limit;
        Self {
            cookies: CookieSettings::new(
                &config.cookie.prefix,
                config.secure_cookies(),
                config.session.expires_in_secs,
            ),
            origins: Origins::new(config.base_url.as_deref(), &config.trusted_origins),
            trusted_proxies: config.trusted_proxies.clone(),
            rate_limits: ArcSwap::from_pointee(address_limits(limits)),
            connections: config.limits.clone(),
            store_file: crate::accounts::store_file(&config.data_dir),
            backup_dir: config.backup.dir.clone(),
            route_metrics: RouteMetrics::new(&accounts.metrics),
            request_ids: RequestIds::new(),
            access_log: config.log.access,
            setup: crate::accounts::SetupLink::default(),
            refused_origins: Default::default(),
            settings: ArcSwap::from_pointee(SettingsView::of(config, None, Vec::new())),
            accounts,
        }
    }

    /// Puts the front end's live settings of `config` in effect, and the facade's. `config` has been validated.
    /// The address limits are replaced only when theirs changed: a new set starts every address's allowance
    /// afresh.
    pub fn apply_settings(&self, config: &Config) {
        let limits = address_limits(&config.rate_limit);
        if limits.quotas() != self.rate_limits.load().quotas() {
            self.rate_limits.store(Arc::new(limits));
        }
        self.accounts.apply_settings(config);
    }

    /// What the configuration view shows after a reload put `config`'s live settings in effect; `need_restart`:
    /// the sections the file changed that wait for a restart. The connection limits shown stay those the server
    /// runs with (its budget, set at start).
    pub fn record_reload(&self, config: &Config, need_restart: Vec<&'static str>) {
        let mut shown = config.clone();
        shown.limits = self.connections.clone();
        self.settings.store(Arc::new(SettingsView::of(&shown, Some(Timestamp::now()), need_restart)));
    }

    pub fn body_timeout(&self) -> Duration {
        Duration::from_secs(self.connections.body_read_timeout_secs)
    }
}

/// The per-address limits `[rate_limit]` sets.
fn address_limits(limits: &RateLimitConfig) -> AddressLimits {
    AddressLimits::with_mail(
        limits.sign_in_per_address,
        limits.sign_up_per_address,
        limits.mail_per_address,
        limits.mail_per_email,
        Duration::from_secs(limits.window_secs),
    )
}
