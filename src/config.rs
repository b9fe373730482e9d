//! Configuration: built-in defaults, then `config.toml`, then environment overrides.
//!
//! Every key is documented in the repository's `config.toml`. An unknown key or a bad value stops start-up with a
//! message that names the key, because a typo in an auth service's configuration (say `trusted_orgins`) silently
//! falling back to a default is a security bug.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The whole configuration of a server. `Config::default()` is the built-in default set.
/// What `service-auth reload` (or SIGHUP) puts in effect without a restart, as the docs list it
/// (`docs/guides/operations.md`); `crate::reload` copies exactly these.
pub const LIVE: &[&str] = &[
    "[passwords]",
    "[rate_limit] sign_in_per_address, sign_up_per_address, mail_per_address",
    "[session] fresh_age_secs",
    "[[oauth.providers]] (each new or changed OpenID Connect provider discovered first)",
    "[email] smtp_url, directory, from (while mail stays on)",
    "[webhooks] timeout_ms, max_backoff_secs, failing_after_secs, concurrency, log_retention_days, proxy",
];

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Address to listen on (`SERVICE_AUTH_LISTEN`).
    pub listen: SocketAddr,
    /// Directory of the embedded store (`SERVICE_AUTH_DATA_DIR`).
    pub data_dir: PathBuf,
    /// The file of the key that seals secrets at rest (`SERVICE_AUTH_DATA_KEY_FILE`); `None`: `data.key` in
    /// `data_dir`. Several nodes on one PostgreSQL database must all point at the same key (a copy of one file).
    pub data_key_file: Option<PathBuf>,
    /// What is logged and how. `log = "info"` (a filter alone) is accepted too, as older files have it.
    #[serde(deserialize_with = "log_table_or_filter")]
    pub log: LogConfig,
    /// The public URL clients use, e.g. `https://auth.example.com`. Its origin is trusted for cross-site checks;
    /// an `https` URL turns secure cookies on. `None`: the origin is taken from the request's `Host`.
    pub base_url: Option<String>,
    /// Other origins (scheme://host[:port]) allowed to send state-changing requests with the session cookie.
    pub trusted_origins: Vec<String>,
    /// Direct peers whose `X-Forwarded-For` header is believed.
    pub trusted_proxies: Vec<IpAddr>,
    pub cookie: CookieConfig,
    pub session: SessionConfig,
    pub roles: RolesConfig,
    pub hashing: HashingConfig,
    pub rate_limit: RateLimitConfig,
    pub backup: BackupConfig,
    pub limits: LimitsConfig,
    pub audit: AuditConfig,
    pub organizations: OrganizationsConfig,
    pub api_keys: ApiKeysConfig,
    /// Single sign-on per organization (`@better-auth/sso`'s calls under /api/auth/sso/).
    pub sso: SsoConfig,
    pub email: EmailConfig,
    pub metrics: MetricsConfig,
    pub store: StoreConfig,
    pub passkeys: PasskeysConfig,
    pub two_factor: TwoFactorConfig,
    /// Sign-in by a mailed link (better-auth's `magicLink`).
    pub magic_link: MagicLinkConfig,
    /// Usernames (better-auth's `username`): sign-up with one, sign-in by one, the availability check.
    pub username: UsernameConfig,
    /// Sign-in, address verification and password reset by a mailed six-digit code (better-auth's `emailOTP`).
    pub email_otp: EmailOtpConfig,
    pub webhooks: WebhooksConfig,
    /// The identity provider (docs/oidc-provider.md): dynamic client registration.
    pub provider: ProviderConfig,
    pub passwords: PasswordsConfig,
    /// Sign-in through other identity providers (`[[oauth.providers]]`).
    pub oauth: crate::oauth::config::OAuthConfig,
    /// Set from `SERVICE_AUTH_BOOTSTRAP_ADMIN_*` only, never from the file: a password does not belong in a
    /// file that gets committed.
    #[serde(skip)]
    pub bootstrap_admin: Option<BootstrapAdmin>,
    /// The file this configuration was read from; `None`: the built-in defaults.
    #[serde(skip)]
    pub source: Option<PathBuf>,
}

/// What a new password must be (NIST SP 800-63B-4 §3.1.1.2; docs/guides/first-steps.md "Passwords"). Checked at sign-up, change, reset
/// and when an administrator sets one; never at sign-in.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct PasswordsConfig {
    /// The shortest password of an account without a second factor (NIST: 15 for a password used alone).
    pub min_length: usize,
    /// The shortest password of an account with an authenticator on (NIST: 8 for a password that is one factor
    /// of two).
    pub min_length_with_second_factor: usize,
    /// The service's names, refused inside passwords (besides "service-auth" and `two_factor.issuer`).
    pub context_words: Vec<String>,
    /// A k-anonymity range API of the Have I Been Pwned shape (`https://api.pwnedpasswords.com/range/`): the
    /// first five hex digits of the password's SHA-1 are appended and nothing else is sent. Unset: no lookup,
    /// the shipped list only. `https://`, or `http://` to a loopback address.
    #[serde(serialize_with = "without_password")]
    pub range_url: Option<String>,
    /// The lookup's time limit, milliseconds. A lookup that fails or times out lets the password through (the
    /// shipped list has already been checked): sign-up never depends on another service being up.
    pub range_timeout_ms: u64,
}

impl Default for PasswordsConfig {
    fn default() -> Self {
        Self {
            min_length: 15,
            min_length_with_second_factor: 8,
            context_words: Vec::new(),
            range_url: None,
            range_timeout_ms: 2_000,
        }
    }
}

/// Who may register a client of the identity provider at `POST /api/auth/oauth2/register` (RFC 7591).
#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Registration {
    /// Nobody: clients are registered by administrators (the admin API, the console, the command line).
    #[default]
    Off,
    /// An administrator's session.
    Admin,
    /// The initial access token (`Authorization: Bearer`, RFC 7591 §3), or an administrator's session.
    Token,
}

/// The identity provider (docs/oidc-provider.md).
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct ProviderConfig {
    /// Dynamic client registration: `off` (the default), `admin` or `token`.
    pub registration: Registration,
    /// With `registration = "token"`: the SHA-256 of the initial access token, 64 hex digits (the token itself is
    /// never in the file: `printf %s "$TOKEN" | sha256sum`).
    pub registration_token_sha256: Option<String>,
}

impl ProviderConfig {
    /// The initial access token's SHA-256, when one is configured.
    pub fn registration_token_hash(&self) -> Option<[u8; 32]> {
        let hex = self.registration_token_sha256.as_deref()?;
        let mut out = [0u8; 32];
        for (i, byte) in out.iter_mut().enumerate() {
            *byte = u8::from_str_radix(hex.get(i * 2..i * 2 + 2)?, 16).ok()?;
        }
        (hex.len() == 64).then_some(out)
    }
}

/// Webhooks (docs/reference.md): how deliveries are attempted. Endpoints themselves are managed through
/// `/api/admin/webhooks`.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct WebhooksConfig {
    /// Endpoints may use `http://` on any host (otherwise `https://` only, `http://` only to a loopback address).
    pub allow_http: bool,
    /// Endpoints may be on internal addresses and names (loopback, private, link-local, metadata services,
    /// `localhost`, `*.internal` …): for local development only. Off: refused at registration and at every
    /// delivery, after resolving the name (`crate::webhooks::target`).
    pub allow_internal_targets: bool,
    /// The proxy deliveries go through (`http://host:port`). Unset: none, whatever `HTTPS_PROXY` and the other
    /// proxy variables of the environment say.
    #[serde(serialize_with = "without_password")]
    pub proxy: Option<String>,
    /// One attempt's time limit (connection, request and answer), milliseconds.
    pub timeout_ms: u64,
    /// The longest wait between two attempts at one message, seconds.
    pub max_backoff_secs: u64,
    /// A message still undelivered this long after its change marks its endpoint failing, seconds. It is still
    /// retried (every `max_backoff_secs`): nothing is dropped.
    pub failing_after_secs: u64,
    /// Messages delivered at once per endpoint (each to a different account).
    pub concurrency: usize,
    /// How long the delivery log keeps an attempt, days.
    pub log_retention_days: u64,
}

impl Default for WebhooksConfig {
    fn default() -> Self {
        Self {
            allow_http: false,
            allow_internal_targets: false,
            proxy: None,
            timeout_ms: 10_000,
            max_backoff_secs: 3600,
            failing_after_secs: 3 * 86_400,
            concurrency: 8,
            log_retention_days: 30,
        }
    }
}

/// Logging: the filter, the line format, and whether each request gets an access line.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct LogConfig {
    /// A level or a tracing filter, e.g. `info` or `warn,service_auth=debug` (`SERVICE_AUTH_LOG`).
    pub level: String,
    /// `text` for people, `json` (one object per line) for log collectors (`SERVICE_AUTH_LOG_FORMAT`).
    pub format: LogFormat,
    /// One line per request: method, route, status, duration, request id, client address. Never a header value,
    /// cookie, token or body.
    pub access: bool,
}

#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

impl Default for LogConfig {
    fn default() -> Self {
        Self { level: "info".to_owned(), format: LogFormat::Text, access: false }
    }
}

/// A URL setting as the configuration view shows it (`GET /api/admin/config`): its password, if any, replaced by
/// `redacted`; a value that is no URL only as `set`. Every setting that may carry a credential goes through here;
/// the others hold none, and the client secrets are not serialised at all.
fn without_password<S: serde::Serializer>(value: &Option<String>, s: S) -> Result<S::Ok, S::Error> {
    match value.as_deref().map(url::Url::parse) {
        None => s.serialize_none(),
        Some(Ok(mut url)) => {
            if url.password().is_some() {
                let _ = url.set_password(Some("redacted"));
            }
            s.serialize_str(url.as_str())
        }
        Some(Err(_)) => s.serialize_str("set"),
    }
}

/// `[log]` as a table, or `log = "filter"` as before the table existed.
fn log_table_or_filter<'de, D: serde::Deserializer<'de>>(d: D) -> Result<LogConfig, D::Error> {
    struct Either;
    impl<'de> serde::de::Visitor<'de> for Either {
        type Value = LogConfig;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a [log] table, or a filter string such as \"info\"")
        }
        fn visit_str<E: serde::de::Error>(self, level: &str) -> Result<LogConfig, E> {
            Ok(LogConfig { level: level.to_owned(), ..LogConfig::default() })
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<LogConfig, A::Error> {
            LogConfig::deserialize(serde::de::value::MapAccessDeserializer::new(map))
        }
    }
    d.deserialize_any(Either)
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct CookieConfig {
    /// The part of the cookie name before `.session_token`.
    pub prefix: String,
    /// Force `Secure` cookies with the `__Secure-` name prefix even when `base_url` is not https.
    pub secure: bool,
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct SessionConfig {
    /// Lifetime of a remembered session, seconds.
    pub expires_in_secs: u64,
    /// A session used this long after its last refresh is extended, seconds.
    pub update_age_secs: u64,
    /// Lifetime of a `rememberMe: false` session, seconds.
    pub short_expires_in_secs: u64,
    /// better-auth's `freshAge`: a session made this long ago or less may change the password or a second factor,
    /// list the sessions, add or delete a passkey, create, update or delete its own API keys, or unlink an identity; older ones are answered 403 `SESSION_NOT_FRESH`
    /// (sign in again). Seconds; 0 turns the check off, as in better-auth.
    pub fresh_age_secs: u64,
    /// No session outlives this from its sign-in, however it is used or extended (NIST SP 800-63B-4 AAL2: sign in
    /// again at least every 24 hours; ASVS 7.3.2). Seconds (1 day); 0: no such limit (better-auth's behaviour).
    pub absolute_lifetime_secs: u64,
    /// A session unused this long ends (NIST SP 800-63B-4 AAL2: an inactivity limit of an hour; ASVS 7.3.1): each
    /// use moves its end to this far from now. Seconds (1 hour); 0: no such limit (better-auth's behaviour).
    pub idle_timeout_secs: u64,
    /// At most this many sessions per account (ASVS 7.1.2): a new sign-in ends the oldest beyond it, in the same
    /// commit, audited. 0 (the default): no limit. An administrator's impersonation neither counts nor is ended.
    pub max_per_account: u32,
}

impl SessionConfig {
    /// `fresh_age_secs` as the check reads it (`None`: off).
    pub fn fresh_age(&self) -> Option<Duration> {
        (self.fresh_age_secs > 0).then(|| Duration::from_secs(self.fresh_age_secs))
    }

    /// The durations a session's end follows.
    pub fn limits(&self) -> crate::domain::SessionLimits {
        let secs = Duration::from_secs;
        crate::domain::SessionLimits {
            lifetime: secs(self.expires_in_secs),
            short_lifetime: secs(self.short_expires_in_secs),
            update_age: secs(self.update_age_secs),
            absolute: (self.absolute_lifetime_secs > 0).then(|| secs(self.absolute_lifetime_secs)),
            idle: (self.idle_timeout_secs > 0).then(|| secs(self.idle_timeout_secs)),
        }
    }
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct RolesConfig {
    /// Roles an administrator may assign. Must contain `admin` and `default`.
    pub allowed: Vec<String>,
    /// Role of a new account.
    pub default: String,
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct HashingConfig {
    /// argon2id memory cost in KiB; at least 19456 (the OWASP floor).
    pub memory_kib: u32,
    /// argon2id iterations; at least 2.
    pub iterations: u32,
    /// argon2id lanes; at least 1.
    pub parallelism: u32,
    /// Hashes that may run at once; 0 means one per CPU core.
    pub workers: usize,
    /// Requests that may wait for a hashing worker; beyond that a request is answered 503 at once.
    pub max_queue: usize,
    /// Longest wait for a hashing worker, milliseconds; then 503 with `Retry-After`. A request the queue predicts
    /// would wait more than half of it is refused at once, and one waiting leaves as soon as the prediction says
    /// its turn comes after the whole of it.
    pub queue_timeout_ms: u64,
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct RateLimitConfig {
    /// Sign-in requests per client address per `window_secs`; 0 turns the limit off.
    pub sign_in_per_address: u32,
    /// Sign-up requests per client address per `window_secs`; 0 turns the limit off.
    pub sign_up_per_address: u32,
    /// Window of the two per-address limits, seconds.
    pub window_secs: u64,
    /// Failed sign-ins per account per `account_window_secs` before it is locked until the window ends.
    pub failures_per_account: u32,
    pub account_window_secs: u64,
    /// Calls that send mail per client address, and per e-mail address from one client address, per
    /// `window_secs`. `mail_per_email` also bounds the messages delivered to one address per window, whoever
    /// asked: one client cannot spend a recipient's allowance, and many cannot flood the mailbox.
    pub mail_per_address: u32,
    pub mail_per_email: u32,
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct BackupConfig {
    /// Directory for scheduled snapshots of the running server; `None` turns them off.
    pub dir: Option<PathBuf>,
    /// Seconds between snapshots.
    pub interval_secs: u64,
    /// Snapshots kept; older ones are deleted.
    pub keep: usize,
}

impl Default for BackupConfig {
    fn default() -> Self {
        Self { dir: None, interval_secs: 3600, keep: 24 }
    }
}

/// How mail leaves the server. With neither `smtp_url` nor `directory` set, the calls that send mail answer 400
/// `EMAIL_NOT_CONFIGURED`.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct EmailConfig {
    /// `smtp://host:port` (STARTTLS when offered), `smtps://host:port` (TLS), with `user:password@` when the
    /// server wants a login; `?tls=required` refuses a server without STARTTLS.
    #[serde(serialize_with = "without_password")]
    pub smtp_url: Option<String>,
    /// Development: write each message as an `.eml` file here instead of sending it.
    pub directory: Option<PathBuf>,
    /// The sender, e.g. `"Pharmacy QA <no-reply@example.com>"`.
    pub from: String,
    /// The public URL that links in mails start with (`…/api/auth/reset-password/<token>`); defaults to
    /// `base_url`, else `http://` + `listen`.
    pub link_base_url: Option<String>,
    /// Lifetime of a password-reset link, seconds.
    pub reset_token_ttl_secs: u64,
    /// Lifetime of an e-mail verification link, seconds.
    pub verification_token_ttl_secs: u64,
    /// Accounts must verify their e-mail address: sign-up mails a link and opens no session, and sign-in of an
    /// unverified account is refused (403 `EMAIL_NOT_VERIFIED`). Needs a mail transport.
    pub require_verification: bool,
    /// Messages sent at once (each over its own SMTP connection); at least 1.
    pub send_concurrency: usize,
    /// Messages the outbox may hold on this node; beyond it requests for mail are refused (503
    /// `MAIL_OUTBOX_FULL`) until the sender has worked some off. At least 1.
    pub max_outbox: usize,
}

impl Default for EmailConfig {
    fn default() -> Self {
        Self {
            smtp_url: None,
            directory: None,
            from: "service-auth <no-reply@localhost.localdomain>".to_owned(),
            link_base_url: None,
            reset_token_ttl_secs: 3600,
            verification_token_ttl_secs: 86_400,
            require_verification: false,
            send_concurrency: 4,
            max_outbox: 10_000,
        }
    }
}

/// The Prometheus listener: a separate address, off unless set, so metrics are never exposed on the public port
/// by accident.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct MetricsConfig {
    /// Address of the `GET /metrics` listener, host:port (`SERVICE_AUTH_METRICS_LISTEN`); `None`: no metrics.
    pub listen: Option<SocketAddr>,
    /// Open connections to the metrics listener at most; further ones wait in the kernel's accept queue. Kept
    /// apart from `[limits] max_connections`, so that clients of this port cannot take the public port's places
    /// (or the open files they were counted from).
    pub max_connections: usize,
}

impl Default for MetricsConfig {
    fn default() -> Self {
        Self { listen: None, max_connections: 16 }
    }
}

/// Where the durable copy of the state lives: the embedded file (one node), or a PostgreSQL database shared by
/// several nodes (docs/cluster.md).
#[derive(Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct StoreConfig {
    /// `embedded` or `postgres` (`SERVICE_AUTH_STORE_BACKEND`).
    pub backend: StoreBackend,
    /// With `postgres`: a `postgres://` URL (`SERVICE_AUTH_STORE_URL`). May hold a password, so never printed.
    #[serde(serialize_with = "without_password")]
    pub url: Option<String>,
    /// With `postgres`: connections for reads outside the start-up load (audit pages), besides the writer's and
    /// the follower's own.
    pub pool_size: usize,
    /// With `postgres`: seconds session checks keep answering from memory after the node last heard from
    /// PostgreSQL; then they refuse (503) until it catches up again.
    pub max_staleness_secs: u64,
}

#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum StoreBackend {
    #[default]
    Embedded,
    Postgres,
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self { backend: StoreBackend::Embedded, url: None, pool_size: 4, max_staleness_secs: 5 }
    }
}

impl std::fmt::Debug for StoreConfig {
    // The URL may carry a password: only whether one is set.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreConfig")
            .field("backend", &self.backend)
            .field("url", &self.url.as_ref().map(|_| "<set>"))
            .field("pool_size", &self.pool_size)
            .field("max_staleness_secs", &self.max_staleness_secs)
            .finish()
    }
}

/// The second factor (authenticator apps, backup codes).
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq, Default)]
#[serde(deny_unknown_fields, default)]
pub struct TwoFactorConfig {
    /// The name authenticator apps show beside the account (`issuer` in the `otpauth://` URI) when the client
    /// gives none; `None`: "service-auth".
    pub issuer: Option<String>,
    /// Roles that must have a second factor: an account of one of them without one gets a session that can only
    /// enrol one (or sign out). Empty: nobody is required to.
    pub required_for_roles: Vec<String>,
    /// Whether an account with the factor on may pass it with a code mailed to its address (`two-factor/send-otp`,
    /// `verify-otp`; mail must be configured). Off by default: whoever reads the mailbox can also reset the
    /// password, so a mailed code makes the second factor no stronger than the mailbox.
    pub codes_by_mail: bool,
}

/// Sign-in by a mailed link (`sign-in/magic-link`, `magic-link/verify`). Off by default: a new way in is the
/// deployment's choice, as better-auth's plugin is; on, it needs a mail transport.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct MagicLinkConfig {
    pub enabled: bool,
    /// How long a link works, seconds (better-auth's `expiresIn`, 300).
    pub ttl_secs: u64,
    /// Whether a link to an address with no account makes one (better-auth's `disableSignUp: false`).
    pub sign_up: bool,
}

impl Default for MagicLinkConfig {
    fn default() -> Self {
        Self { enabled: false, ttl_secs: 300, sign_up: true }
    }
}

/// Usernames (`sign-in/username`, `is-username-available`, `username` at sign-up and update-user). Off by
/// default, as better-auth's plugin is opt-in; off, those calls answer 404 and a `username` field is refused.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct UsernameConfig {
    pub enabled: bool,
    /// The plugin's `minUsernameLength` (3) and `maxUsernameLength` (30), in characters.
    pub min_length: usize,
    pub max_length: usize,
    /// Names refused besides the built-in list (docs/guides/usernames.md), with their look-alikes.
    pub reserved: Vec<String>,
}

impl Default for UsernameConfig {
    fn default() -> Self {
        Self { enabled: false, min_length: 3, max_length: 30, reserved: Vec::new() }
    }
}

/// Mailed six-digit codes (`email-otp/*`, `sign-in/email-otp`, `forget-password/email-otp`). Off by default, as
/// [`MagicLinkConfig`]; on, it needs a mail transport.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct EmailOtpConfig {
    pub enabled: bool,
    /// How long a code works, seconds (better-auth's `expiresIn`, 300).
    pub ttl_secs: u64,
    /// Wrong codes a code survives (better-auth's `allowedAttempts`, 3): the next try, right or not, is refused
    /// and the code is gone. Each wrong code also counts against the account's sign-in failure limit.
    pub allowed_attempts: u32,
    /// Whether a sign-in code to an address with no account is sent and makes one (better-auth's
    /// `disableSignUp: false`).
    pub sign_up: bool,
}

impl Default for EmailOtpConfig {
    fn default() -> Self {
        Self { enabled: false, ttl_secs: 300, allowed_attempts: 3, sign_up: true }
    }
}

/// How long the audit log keeps its entries, and how many at most.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct AuditConfig {
    /// Entries older than this many days are deleted.
    pub retain_days: u64,
    /// Entries kept at most; the oldest beyond it are deleted. Counts everything but what anonymous callers
    /// cause (below), so that no flood of those can push administrative history out.
    pub max_entries: u64,
    /// Entries that anonymous callers cause (mailed links asked for, failed and refused sign-ins) kept at most,
    /// apart from `max_entries`.
    pub max_anonymous_entries: u64,
}

impl Default for AuditConfig {
    fn default() -> Self {
        Self { retain_days: 365, max_entries: 1_000_000, max_anonymous_entries: 1_000_000 }
    }
}

/// Organizations as teams use them (the better-auth organization plugin's calls), with its defaults.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct OrganizationsConfig {
    /// Whether every signed-in user may create organizations (`allowUserToCreateOrganization`); `false`: only
    /// administrators.
    pub members_may_create: bool,
    /// Members of one organization at most (`membershipLimit`), for invitations accepted.
    pub membership_limit: usize,
    /// Pending invitations of one organization at most (`invitationLimit`).
    pub invitation_limit: usize,
    /// Hours an invitation stays open (`invitationExpiresIn`, 48 hours).
    pub invitation_ttl_hours: u64,
    /// The link the invitation mail carries, `{id}` standing for the invitation's id; default:
    /// `<link base>/accept-invitation?id={id}`, the service's own page that shows the invitation and accepts or
    /// declines it.
    pub invitation_url: Option<String>,
    /// The plugin's teams (`teams.enabled`, off by default as in the plugin): the team calls answer "Teams are not
    /// enabled" without it. Turn it on only once every node of a cluster runs a release that reads teams.
    pub teams: bool,
    /// With teams on, a new organization gets a team of its name with its creator in it (`defaultTeam.enabled`).
    pub default_team: bool,
    /// Teams of one organization at most (`maximumTeams`); none when absent, as in the plugin.
    pub maximum_teams: Option<usize>,
    /// Members of one team at most (`maximumMembersPerTeam`); none when absent, as in the plugin.
    pub maximum_members_per_team: Option<usize>,
    /// Whether an organization's last team may be removed (`allowRemovingAllTeams`, off).
    pub allow_removing_all_teams: bool,
    /// Roles an organization defines at runtime (`dynamicAccessControl.enabled`, off by default as in the plugin),
    /// over the plugin's default statements (`ac: defaultAc`): the role calls answer 404 without it, and
    /// has-permission and the member calls know only owner, admin and member. Turn it on only once every node of
    /// a cluster runs a release that reads roles.
    pub dynamic_roles: bool,
    /// Roles of one organization at most (`maximumRolesPerOrganization`); none when absent, as in the plugin.
    pub maximum_roles: Option<usize>,
}

impl Default for OrganizationsConfig {
    fn default() -> Self {
        Self {
            members_may_create: true,
            membership_limit: 100,
            invitation_limit: 100,
            invitation_ttl_hours: 48,
            invitation_url: None,
            teams: false,
            default_team: true,
            maximum_teams: None,
            maximum_members_per_team: None,
            allow_removing_all_teams: false,
            dynamic_roles: false,
            maximum_roles: None,
        }
    }
}

/// API keys (`@better-auth/api-key`'s calls), with its defaults, but `sessions` on.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct ApiKeysConfig {
    /// A key in `header` turns a request into its owner's session (`enableSessionForAPIKeys`; the plugin's default
    /// is off, this service's on).
    pub sessions: bool,
    /// The header that carries a key (`apiKeyHeaders`), lower-case.
    pub header: String,
    /// The per-key request window (`rateLimit`): on, and its length and count, given to each new key.
    pub rate_limit_enabled: bool,
    pub rate_limit_time_window_ms: i64,
    pub rate_limit_max: i64,
    /// Whether keys may carry metadata (`enableMetadata`, off by default as in the plugin).
    pub enable_metadata: bool,
}

impl Default for ApiKeysConfig {
    fn default() -> Self {
        Self {
            sessions: true,
            header: "x-api-key".into(),
            rate_limit_enabled: true,
            rate_limit_time_window_ms: 86_400_000,
            rate_limit_max: 10,
            enable_metadata: false,
        }
    }
}

/// Single sign-on per organization.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct SsoConfig {
    /// The DNS server `verify-domain` asks for a provider's TXT record (`address:port`); `None`: the system's
    /// resolvers (`/etc/resolv.conf`).
    pub nameserver: Option<SocketAddr>,
}

/// Connection limits: how much of the server one client can hold.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct LimitsConfig {
    /// Open connections at most; further clients wait in the kernel's accept queue.
    pub max_connections: usize,
    /// Seconds a client gets to send a request's headers; also how long an idle keep-alive connection stays.
    pub header_read_timeout_secs: u64,
    /// Seconds a client gets to send a request's body.
    pub body_read_timeout_secs: u64,
    /// Open connections from one client address (IPv6: one /64) at most; more are closed at once.
    pub max_connections_per_address: usize,
    /// Seconds an answer may wait for the client to read it; a client that stops reading is disconnected.
    pub write_timeout_secs: u64,
    /// Threads serving connections, each a single-threaded event loop; 0: one per core.
    pub io_threads: usize,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        Self {
            max_connections: 10_000,
            header_read_timeout_secs: 10,
            body_read_timeout_secs: 10,
            max_connections_per_address: 256,
            write_timeout_secs: 10,
            io_threads: 0,
        }
    }
}

/// The account created or promoted at `serve` when no administrator exists yet.
#[derive(Clone, PartialEq, Eq)]
pub struct BootstrapAdmin {
    pub email: String,
    pub name: String,
    pub password: String,
    /// `SERVICE_AUTH_BOOTSTRAP_ADMIN_PROMOTE_EXISTING=true`: an existing account with the e-mail becomes the
    /// administrator (its password replaced, its sessions ended). Without it such an account stops start-up.
    pub promote_existing: bool,
}

impl std::fmt::Debug for BootstrapAdmin {
    // Never print the password, not even in a debug dump of the config.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BootstrapAdmin")
            .field("email", &self.email)
            .field("name", &self.name)
            .field("promote_existing", &self.promote_existing)
            .finish_non_exhaustive()
    }
}

impl Default for Config {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 3000)),
            data_dir: PathBuf::from("./data"),
            data_key_file: None,
            log: LogConfig::default(),
            base_url: None,
            trusted_origins: Vec::new(),
            trusted_proxies: Vec::new(),
            cookie: CookieConfig::default(),
            session: SessionConfig::default(),
            roles: RolesConfig::default(),
            hashing: HashingConfig::default(),
            rate_limit: RateLimitConfig::default(),
            backup: BackupConfig::default(),
            audit: AuditConfig::default(),
            organizations: OrganizationsConfig::default(),
            api_keys: ApiKeysConfig::default(),
            sso: SsoConfig::default(),
            email: EmailConfig::default(),
            limits: LimitsConfig::default(),
            metrics: MetricsConfig::default(),
            store: StoreConfig::default(),
            webhooks: WebhooksConfig::default(),
            provider: ProviderConfig::default(),
            passwords: PasswordsConfig::default(),
            two_factor: TwoFactorConfig::default(),
            magic_link: MagicLinkConfig::default(),
            username: UsernameConfig::default(),
            email_otp: EmailOtpConfig::default(),
            passkeys: PasskeysConfig::default(),
            oauth: Default::default(),
            bootstrap_admin: None,
            source: None,
        }
    }
}

impl Default for CookieConfig {
    fn default() -> Self {
        Self { prefix: "service-auth".to_owned(), secure: false }
    }
}

impl Default for SessionConfig {
    fn default() -> Self {
        Self {
            expires_in_secs: 7 * 86_400,
            update_age_secs: 86_400,
            short_expires_in_secs: 86_400,
            fresh_age_secs: 86_400,
            absolute_lifetime_secs: 86_400,
            idle_timeout_secs: 3_600,
            max_per_account: 0,
        }
    }
}

impl Default for RolesConfig {
    fn default() -> Self {
        Self {
            allowed: ["admin", "pharmacist_in_charge", "qa_manager", "user"].map(String::from).to_vec(),
            default: "user".to_owned(),
        }
    }
}

impl Default for RateLimitConfig {
    fn default() -> Self {
        Self {
            sign_in_per_address: 30,
            sign_up_per_address: 10,
            window_secs: 60,
            failures_per_account: 10,
            account_window_secs: 300,
            mail_per_address: 3,
            mail_per_email: 3,
        }
    }
}

impl Default for HashingConfig {
    fn default() -> Self {
        Self { memory_kib: 19_456, iterations: 2, parallelism: 1, workers: 0, max_queue: 256, queue_timeout_ms: 3_000 }
    }
}

impl Config {
    /// Makes the relative paths of a file's configuration relative to `folder`, the file's own.
    fn resolve_paths(&mut self, folder: &Path) {
        let resolve = |path: &mut PathBuf| {
            if path.is_relative() {
                *path = folder.join(&*path);
            }
        };
        resolve(&mut self.data_dir);
        if let Some(file) = &mut self.data_key_file {
            resolve(file);
        }
        if let Some(dir) = &mut self.backup.dir {
            resolve(dir);
        }
        if let Some(dir) = &mut self.email.directory {
            resolve(dir);
        }
        self.oauth.resolve_paths(folder);
    }

    /// The data key's file: `data_key_file`, else `data.key` in the data directory.
    pub fn data_key_path(&self) -> PathBuf {
        crate::data_key::path_for(&self.data_dir, self.data_key_file.as_deref())
    }

    /// Whether cookies get `Secure` and the `__Secure-` prefix.
    pub fn secure_cookies(&self) -> bool {
        self.cookie.secure || self.base_url.as_deref().is_some_and(|u| u.starts_with("https://"))
    }
}

/// A range API's base: the prefix is appended to it, so it carries no query or fragment.
fn is_range_url(text: &str) -> bool {
    let Ok(url) = url::Url::parse(text) else { return false };
    let loopback = match url.host() {
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        Some(url::Host::Domain(name)) => name == "localhost",
        None => false,
    };
    let scheme_ok = url.scheme() == "https" || (url.scheme() == "http" && loopback);
    scheme_ok
        && url.query().is_none()
        && url.fragment().is_none()
        && url.username().is_empty()
        && url.password().is_none()
}

/// Why the configuration cannot be used. Each message names the file or variable and the key.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {path}: {error}")]
    Read { path: String, error: std::io::Error },
    #[error("{path}: {message}")]
    Parse { path: String, message: String },
    #[error("{origin}: `{key}` {problem}")]
    Invalid { origin: String, key: String, problem: String },
}

/// Loads the configuration: the file named by `explicit` (`--config`), else `$SERVICE_AUTH_CONFIG`, else
/// `./config.toml` when present, else the built-in defaults; then the environment overrides; then checks it.
pub fn load(explicit: Option<&Path>) -> Result<Config, ConfigError> {
    load_from(explicit, |key| std::env::var(key).ok())
}

/// [`load`] with the environment passed in, so tests do not touch the process environment.
pub fn load_from(explicit: Option<&Path>, env: impl Fn(&str) -> Option<String>) -> Result<Config, ConfigError> {
    let named = explicit.map(Path::to_path_buf).or_else(|| env("SERVICE_AUTH_CONFIG").map(PathBuf::from));
    let file = named.or_else(|| Some(PathBuf::from("config.toml")).filter(|p| p.is_file()));
    let (mut config, source) = match file {
        Some(path) => {
            let mut config = read_file(&path)?;
            // Paths in a file mean the same wherever the server is started from: relative to the file.
            let folder = path.parent().map(Path::to_path_buf).unwrap_or_default();
            config.resolve_paths(&folder);
            let source = path.display().to_string();
            config.source = Some(path);
            (config, source)
        }
        None => (Config::default(), "the built-in defaults".to_owned()),
    };
    apply_env(&mut config, &env)?;
    let invalid = |(key, problem)| ConfigError::Invalid { origin: source.clone(), key, problem };
    config.oauth.read_secrets(&env).map_err(invalid)?;
    config.validate().map_err(|(key, problem)| ConfigError::Invalid { origin: source, key, problem })?;
    Ok(config)
}

fn read_file(path: &Path) -> Result<Config, ConfigError> {
    let text =
        std::fs::read_to_string(path).map_err(|error| ConfigError::Read { path: path.display().to_string(), error })?;
    parse(&text).map_err(|message| ConfigError::Parse { path: path.display().to_string(), message })
}

/// Parses TOML text into a configuration (without environment overrides or checks). Errors name the key.
pub fn parse(text: &str) -> Result<Config, String> {
    toml::from_str(text).map_err(|e: toml::de::Error| {
        // Name the table and the line of an unknown key, as for a bad value.
        if let Some(field) = unknown_field(e.message()) {
            let (start, end) = e.span().map_or((0, text.len()), |s| (s.start.min(text.len()), s.end.min(text.len())));
            return match line_of_key(text, start, end, field) {
                Some(offset) => {
                    let line = text[..offset].lines().count() + 1;
                    let key = key_at(text, offset).unwrap_or_else(|| field.to_owned());
                    format!("line {line}: `{key}`: {}", e.message())
                }
                None => e.message().to_owned(),
            };
        }
        match e.span() {
            Some(span) => {
                let start = span.start.min(text.len());
                let line = text[..start].lines().count().max(1);
                match key_at(text, start) {
                    Some(key) => format!("line {line}: `{key}`: {}", e.message()),
                    None => format!("line {line}: {}", e.message()),
                }
            }
            None => e.message().to_owned(),
        }
    })
}

/// The key that an "unknown field `x`, expected …" message names.
fn unknown_field(message: &str) -> Option<&str> {
    message.strip_prefix("unknown field `")?.split_once('`').map(|(field, _)| field)
}

/// Byte offset of the first line in `text[start..end]` that assigns `field` (`field =`, `"field" =`, or a dotted
/// key ending in it).
fn line_of_key(text: &str, start: usize, end: usize, field: &str) -> Option<usize> {
    let mut offset = text[..start].rfind('\n').map_or(0, |i| i + 1);
    // The span is the key itself, or (older parsers) the whole table: search whole lines either way.
    let end = text[end..].find('\n').map_or(text.len(), |i| end + i);
    for line in text[offset..end].split_inclusive('\n') {
        if let Some((key, _)) = line.split_once('=') {
            let last = key.trim().rsplit('.').next().unwrap_or_default().trim().trim_matches(['"', '\'']);
            if last == field {
                return Some(offset);
            }
        }
        offset += line.len();
    }
    None
}

/// The dotted key whose value sits at byte `offset`: the `key =` on that line, under the last `[table]` above.
fn key_at(text: &str, offset: usize) -> Option<String> {
    let line_start = text[..offset].rfind('\n').map_or(0, |i| i + 1);
    let line = text[line_start..].lines().next()?;
    let key = line.split_once('=')?.0.trim();
    let table = text[..line_start].lines().rev().map(str::trim).find(|l| l.starts_with('[') && l.ends_with(']'));
    Some(match table {
        Some(t) => format!("{}.{key}", t.trim_matches(['[', ']'])),
        None => key.to_owned(),
    })
}

fn apply_env(config: &mut Config, env: &impl Fn(&str) -> Option<String>) -> Result<(), ConfigError> {
    let invalid = |key: &str, problem: String| ConfigError::Invalid {
        origin: "the environment".to_owned(),
        key: key.to_owned(),
        problem,
    };
    if let Some(listen) = env("SERVICE_AUTH_LISTEN") {
        config.listen = listen.parse().map_err(|_| {
            invalid("SERVICE_AUTH_LISTEN", format!("= {listen:?} is not host:port (e.g. 127.0.0.1:3000)"))
        })?;
    }
    if let Some(listen) = env("SERVICE_AUTH_METRICS_LISTEN") {
        let addr = listen.parse().map_err(|_| {
            invalid("SERVICE_AUTH_METRICS_LISTEN", format!("= {listen:?} is not host:port (e.g. 127.0.0.1:9100)"))
        })?;
        config.metrics.listen = Some(addr);
    }
    if let Some(backend) = env("SERVICE_AUTH_STORE_BACKEND") {
        config.store.backend = match backend.as_str() {
            "embedded" => StoreBackend::Embedded,
            "postgres" => StoreBackend::Postgres,
            _ => {
                return Err(invalid(
                    "SERVICE_AUTH_STORE_BACKEND",
                    format!("= {backend:?} is not embedded or postgres"),
                ));
            }
        };
    }
    if let Some(url) = env("SERVICE_AUTH_STORE_URL") {
        config.store.url = Some(url);
    }
    if let Some(dir) = env("SERVICE_AUTH_DATA_DIR") {
        config.data_dir = PathBuf::from(dir);
    }
    if let Some(file) = env("SERVICE_AUTH_DATA_KEY_FILE") {
        config.data_key_file = Some(PathBuf::from(file));
    }
    if let Some(level) = env("SERVICE_AUTH_LOG") {
        // Checked here, so that a bad value is reported as the variable's, not the file's.
        if tracing_subscriber::EnvFilter::try_new(&level).is_err() {
            return Err(invalid(
                "SERVICE_AUTH_LOG",
                format!("= {level:?} is not a log level or filter (e.g. \"info\")"),
            ));
        }
        config.log.level = level;
    }
    if let Some(format) = env("SERVICE_AUTH_LOG_FORMAT") {
        config.log.format = match format.as_str() {
            "text" => LogFormat::Text,
            "json" => LogFormat::Json,
            _ => return Err(invalid("SERVICE_AUTH_LOG_FORMAT", format!("= {format:?} is not text or json"))),
        };
    }
    let email = env("SERVICE_AUTH_BOOTSTRAP_ADMIN_EMAIL");
    let password = env("SERVICE_AUTH_BOOTSTRAP_ADMIN_PASSWORD");
    let promote_existing = match env("SERVICE_AUTH_BOOTSTRAP_ADMIN_PROMOTE_EXISTING").as_deref() {
        None | Some("false" | "0") => false,
        Some("true" | "1") => true,
        Some(other) => {
            return Err(invalid(
                "SERVICE_AUTH_BOOTSTRAP_ADMIN_PROMOTE_EXISTING",
                format!("= {other:?} is not true or false"),
            ));
        }
    };
    config.bootstrap_admin = match (email, password) {
        (Some(email), Some(password)) => Some(BootstrapAdmin {
            email,
            password,
            name: env("SERVICE_AUTH_BOOTSTRAP_ADMIN_NAME").unwrap_or_else(|| "Administrator".to_owned()),
            promote_existing,
        }),
        (Some(_), None) => {
            return Err(invalid("SERVICE_AUTH_BOOTSTRAP_ADMIN_PASSWORD", "is required with ..._ADMIN_EMAIL".into()));
        }
        (None, Some(_)) => {
            return Err(invalid("SERVICE_AUTH_BOOTSTRAP_ADMIN_EMAIL", "is required with ..._ADMIN_PASSWORD".into()));
        }
        (None, None) => None,
    };
    Ok(())
}

impl Config {
    /// Checks every value; the error is (key, problem).
    pub fn validate(&self) -> Result<(), (String, String)> {
        let fail = |key: &str, problem: String| Err((key.to_owned(), problem));
        if tracing_subscriber::EnvFilter::try_new(&self.log.level).is_err() {
            return fail("log.level", format!("= {:?} is not a log level or filter (e.g. \"info\")", self.log.level));
        }
        if let Some(url) = &self.base_url
            && !is_origin_url(url, true)
        {
            return fail("base_url", format!("= {url:?} must be http(s)://host[:port] with no path"));
        }
        if let Some(bad) = self.trusted_origins.iter().find(|o| !is_origin_url(o, false)) {
            return fail("trusted_origins", format!("entry {bad:?} must be scheme://host[:port] with no path"));
        }
        let prefix = &self.cookie.prefix;
        if prefix.is_empty()
            || prefix.len() > 64
            || !prefix.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
        {
            return fail("cookie.prefix", format!("= {prefix:?} must be 1 to 64 characters of A-Z a-z 0-9 . _ -"));
        }
        let s = &self.session;
        if s.expires_in_secs == 0 || s.short_expires_in_secs == 0 {
            return fail("session.expires_in_secs", "and session.short_expires_in_secs must be above 0".into());
        }
        if s.update_age_secs == 0 || s.update_age_secs >= s.expires_in_secs {
            return fail("session.update_age_secs", "must be above 0 and below session.expires_in_secs".into());
        }
        // Under a minute, a session would end between the requests of one page.
        if (1..60).contains(&s.absolute_lifetime_secs) {
            return fail("session.absolute_lifetime_secs", "must be 0 (no limit) or at least 60".into());
        }
        if (1..60).contains(&s.idle_timeout_secs) {
            return fail("session.idle_timeout_secs", "must be 0 (no limit) or at least 60".into());
        }
        if let Some(bad) = self.roles.allowed.iter().find(|r| !is_role_name(r)) {
            return fail("roles.allowed", format!("entry {bad:?} must be 1 to 64 characters of a-z 0-9 _ -"));
        }
        if !self.roles.allowed.iter().any(|r| r == "admin") {
            return fail("roles.allowed", "must contain \"admin\"".into());
        }
        if !self.roles.allowed.contains(&self.roles.default) {
            return fail("roles.default", format!("= {:?} is not in roles.allowed", self.roles.default));
        }
        if let Some(bad) = self.two_factor.required_for_roles.iter().find(|r| !self.roles.allowed.contains(r)) {
            return fail("two_factor.required_for_roles", format!("entry {bad:?} is not in roles.allowed"));
        }
        if self.two_factor.issuer.as_deref().is_some_and(|i| i.trim().is_empty() || i.len() > 64 || i.contains(':')) {
            return fail("two_factor.issuer", "must be 1 to 64 characters without ':'".into());
        }
        let p = &self.passwords;
        if !(8..=64).contains(&p.min_length) {
            return fail("passwords.min_length", format!("= {} must be 8 to 64", p.min_length));
        }
        if !(8..=p.min_length).contains(&p.min_length_with_second_factor) {
            return fail("passwords.min_length_with_second_factor", "must be 8 to passwords.min_length".into());
        }
        if p.context_words.iter().any(|w| w.trim().chars().count() < 4 || w.len() > 128) {
            return fail("passwords.context_words", "entries must be 4 to 128 characters".into());
        }
        if let Some(url) = &p.range_url
            && !is_range_url(url)
        {
            return fail(
                "passwords.range_url",
                format!("= {url:?} must be an https:// URL (http:// only to a loopback address), without query"),
            );
        }
        if p.range_timeout_ms == 0 {
            return fail("passwords.range_timeout_ms", "must be at least 1".into());
        }
        let h = &self.hashing;
        if h.memory_kib < 19_456 {
            return fail("hashing.memory_kib", format!("= {} is below the OWASP floor 19456", h.memory_kib));
        }
        if h.iterations < 2 {
            return fail("hashing.iterations", format!("= {} is below the OWASP floor 2", h.iterations));
        }
        if h.parallelism == 0 {
            return fail("hashing.parallelism", "must be at least 1".into());
        }
        if h.queue_timeout_ms == 0 {
            return fail("hashing.queue_timeout_ms", "must be at least 1".into());
        }
        if let Err((key, problem)) = self.passkeys.check() {
            return fail(key, problem);
        }
        let r = &self.rate_limit;
        if r.window_secs == 0 || r.account_window_secs == 0 {
            return fail("rate_limit.window_secs", "and rate_limit.account_window_secs must be above 0".into());
        }
        let e = &self.email;
        if e.smtp_url.is_some() && e.directory.is_some() {
            return fail("email.smtp_url", "and email.directory cannot both be set".into());
        }
        if e.from.parse::<lettre::message::Mailbox>().is_err() {
            return fail("email.from", format!("= {:?} is not a mailbox (name <address> or address)", e.from));
        }
        if let Some(url) = &e.smtp_url
            && lettre::AsyncSmtpTransport::<lettre::Tokio1Executor>::from_url(url).is_err()
        {
            return fail("email.smtp_url", "is not an smtp:// or smtps:// URL".into());
        }
        if e.reset_token_ttl_secs == 0 || e.verification_token_ttl_secs == 0 {
            return fail("email.reset_token_ttl_secs", "and email.verification_token_ttl_secs must be above 0".into());
        }
        if e.send_concurrency == 0 || e.max_outbox == 0 {
            return fail("email.send_concurrency", "and email.max_outbox must be above 0".into());
        }
        if e.require_verification && e.smtp_url.is_none() && e.directory.is_none() {
            return fail(
                "email.require_verification",
                "needs email.smtp_url or email.directory to send the links".into(),
            );
        }
        let mail = e.smtp_url.is_some() || e.directory.is_some();
        if self.magic_link.enabled && !mail {
            return fail("magic_link.enabled", "needs email.smtp_url or email.directory to send the links".into());
        }
        if self.email_otp.enabled && !mail {
            return fail("email_otp.enabled", "needs email.smtp_url or email.directory to send the codes".into());
        }
        if !(1..=self.username.max_length).contains(&self.username.min_length) || self.username.max_length > 100 {
            return fail("username.min_length", "and username.max_length: 1 <= min_length <= max_length <= 100".into());
        }
        if !(1..=86_400).contains(&self.magic_link.ttl_secs) {
            return fail("magic_link.ttl_secs", "must be 1 to 86400".into());
        }
        if !(1..=86_400).contains(&self.email_otp.ttl_secs) {
            return fail("email_otp.ttl_secs", "must be 1 to 86400".into());
        }
        if !(1..=100).contains(&self.email_otp.allowed_attempts) {
            return fail("email_otp.allowed_attempts", "must be 1 to 100".into());
        }
        let orgs = &self.organizations;
        if orgs.membership_limit == 0 || orgs.invitation_limit == 0 || orgs.invitation_ttl_hours == 0 {
            return Err((
                "organizations.membership_limit".into(),
                "organizations.membership_limit, invitation_limit and invitation_ttl_hours must be above 0".into(),
            ));
        }
        if orgs.maximum_teams == Some(0) || orgs.maximum_members_per_team == Some(0) || orgs.maximum_roles == Some(0) {
            return fail(
                "organizations.maximum_teams",
                "maximum_teams, maximum_members_per_team and maximum_roles must be above 0".into(),
            );
        }
        if orgs.invitation_url.as_deref().is_some_and(|u| !u.contains("{id}") || url::Url::parse(u).is_err()) {
            return Err(("organizations.invitation_url".into(), "must be an absolute URL containing {id}".into()));
        }
        let keys = &self.api_keys;
        if hyper::header::HeaderName::from_bytes(keys.header.as_bytes()).map_or(true, |h| h.as_str() != keys.header) {
            return fail("api_keys.header", "must be a lower-case HTTP header name".into());
        }
        if keys.rate_limit_time_window_ms <= 0 || keys.rate_limit_max <= 0 {
            return fail("api_keys.rate_limit_time_window_ms", "and api_keys.rate_limit_max must be above 0".into());
        }
        if self.audit.retain_days == 0 || self.audit.max_entries == 0 || self.audit.max_anonymous_entries == 0 {
            return fail(
                "audit.retain_days",
                "audit.max_entries and audit.max_anonymous_entries must be above 0".into(),
            );
        }
        if self.backup.interval_secs == 0 || self.backup.keep == 0 {
            return fail("backup.interval_secs", "and backup.keep must be above 0".into());
        }
        let l = &self.limits;
        if l.max_connections == 0
            || l.header_read_timeout_secs == 0
            || l.body_read_timeout_secs == 0
            || l.max_connections_per_address == 0
            || l.write_timeout_secs == 0
        {
            return fail(
                "limits",
                "max_connections, max_connections_per_address and the timeouts must be above 0".into(),
            );
        }
        if self.metrics.max_connections == 0 || self.metrics.max_connections > 1024 {
            return fail("metrics.max_connections", format!("= {} must be 1 to 1024", self.metrics.max_connections));
        }
        if let Some(metrics) = self.metrics.listen
            && metrics == self.listen
        {
            return fail("metrics.listen", format!("= \"{metrics}\" is the public listen address; use another port"));
        }
        if r.failures_per_account == 0 {
            return fail("rate_limit.failures_per_account", "must be at least 1".into());
        }
        self.oauth.validate()?;
        let store = &self.store;
        if store.backend == StoreBackend::Postgres {
            match &store.url {
                None => return fail("store.url", "is required with store.backend = \"postgres\"".into()),
                // The parser's message would quote the URL, password and all: only say what is wrong.
                Some(url) if !url.starts_with("postgres://") && !url.starts_with("postgresql://") => {
                    return fail("store.url", "must start with postgres:// or postgresql://".into());
                }
                Some(url) if url.parse::<postgres::Config>().is_err() => {
                    return fail("store.url", "is not a valid PostgreSQL connection URL".into());
                }
                Some(_) => {}
            }
        } else if store.url.is_some() {
            return fail("store.url", "is only used with store.backend = \"postgres\"".into());
        }
        if !(1..=64).contains(&store.pool_size) {
            return fail("store.pool_size", format!("= {} must be 1 to 64", store.pool_size));
        }
        if store.max_staleness_secs == 0 || store.max_staleness_secs > 3600 {
            return fail("store.max_staleness_secs", format!("= {} must be 1 to 3600", store.max_staleness_secs));
        }
        let provider = &self.provider;
        match (provider.registration, &provider.registration_token_sha256) {
            (_, Some(_)) if provider.registration_token_hash().is_none() => {
                return fail("provider.registration_token_sha256", "must be 64 hex digits (a SHA-256)".into());
            }
            (Registration::Token, None) => {
                return fail(
                    "provider.registration_token_sha256",
                    "is required with registration = \"token\" (the initial access token's SHA-256)".into(),
                );
            }
            (Registration::Off | Registration::Admin, Some(_)) => {
                return fail("provider.registration_token_sha256", "is only used with registration = \"token\"".into());
            }
            _ => {}
        }
        let hooks = &self.webhooks;
        if !(100..=120_000).contains(&hooks.timeout_ms) {
            return fail("webhooks.timeout_ms", format!("= {} must be 100 to 120000", hooks.timeout_ms));
        }
        if !(1..=86_400).contains(&hooks.max_backoff_secs) {
            return fail("webhooks.max_backoff_secs", format!("= {} must be 1 to 86400", hooks.max_backoff_secs));
        }
        if hooks.failing_after_secs == 0 {
            return fail("webhooks.failing_after_secs", "must be at least 1".to_owned());
        }
        if !(1..=256).contains(&hooks.concurrency) {
            return fail("webhooks.concurrency", format!("= {} must be 1 to 256", hooks.concurrency));
        }
        if !(1..=3650).contains(&hooks.log_retention_days) {
            return fail("webhooks.log_retention_days", format!("= {} must be 1 to 3650", hooks.log_retention_days));
        }
        if let Some(proxy) = &hooks.proxy {
            let parsed = url::Url::parse(proxy).ok().filter(|u| {
                matches!(u.scheme(), "http" | "https") && u.host().is_some() && u.path() == "/" && u.query().is_none()
            });
            if parsed.is_none() {
                return fail("webhooks.proxy", "must be a URL such as http://proxy.example:3128".to_owned());
            }
        }
        Ok(())
    }
}

fn is_role_name(role: &str) -> bool {
    (1..=64).contains(&role.len())
        && role.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"_-".contains(&b))
}

/// `scheme://host[:port]`, optionally with one trailing `/`; with `http_only`, the scheme is http or https.
/// Passkeys (WebAuthn): the domain credentials are bound to (the relying party) and the pages that may use them.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct PasskeysConfig {
    /// The relying party id, a domain: credentials work on it and its subdomains only. Default: `base_url`'s
    /// host when that is a domain name, else `localhost`.
    pub rp_id: Option<String>,
    /// The name authenticators show. Default: `service-auth`.
    pub rp_name: Option<String>,
    /// Origins (scheme://host[:port]) whose pages may register and use passkeys: `https`, or `http` on
    /// `localhost`, on `rp_id` or a subdomain of it. Default: `base_url`'s origin and each of `trusted_origins` on
    /// `rp_id`; with neither, `http://localhost:<listen port>`.
    pub origins: Vec<String>,
    /// Not a configuration key: how long a ceremony waits for its verification when set (five minutes
    /// otherwise). Tests shorten it to see a ceremony expire without waiting five minutes.
    #[serde(skip)]
    pub ceremony_lifetime: Option<std::time::Duration>,
}

/// The relying party as configured, defaults filled in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelyingParty {
    pub id: String,
    pub name: String,
    /// At least one; each on `id` or a subdomain of it.
    pub origins: Vec<url::Url>,
}

impl PasskeysConfig {
    /// The explicitly configured values, checked; the defaults need none.
    fn check(&self) -> Result<(), (&'static str, String)> {
        if let Some(id) = &self.rp_id
            && !is_domain(id)
        {
            return Err((
                "passkeys.rp_id",
                format!("= {id:?} must be a lower-case domain name (no scheme, port or IP)"),
            ));
        }
        if self.rp_name.as_deref().is_some_and(|n| n.trim().is_empty() || n.len() > 200) {
            return Err(("passkeys.rp_name", "must be 1 to 200 characters".into()));
        }
        let rp_id = self.rp_id.as_deref();
        for origin in &self.origins {
            let parsed = url::Url::parse(origin).ok().filter(|u| is_origin_url(origin, true) && u.domain().is_some());
            let Some(url) = parsed else {
                return Err((
                    "passkeys.origins",
                    format!("entry {origin:?} must be http(s)://domain[:port] with no path"),
                ));
            };
            let host = url.domain().unwrap_or_default();
            let local = host == "localhost" || host.ends_with(".localhost");
            if url.scheme() != "https" && !local {
                return Err((
                    "passkeys.origins",
                    format!("entry {origin:?} must be https (browsers allow http only on localhost)"),
                ));
            }
            if let Some(id) = rp_id
                && !on_domain(host, id)
            {
                return Err((
                    "passkeys.origins",
                    format!("entry {origin:?} is not on passkeys.rp_id {id:?} or a subdomain of it"),
                ));
            }
        }
        Ok(())
    }
}

/// Whether `host` is `domain` or a subdomain of it.
fn on_domain(host: &str, domain: &str) -> bool {
    host == domain || host.strip_suffix(domain).is_some_and(|rest| rest.ends_with('.'))
}

/// A domain name as a relying party id: lower-case labels of letters, digits and hyphens, not an IP address.
fn is_domain(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.parse::<IpAddr>().is_err()
        && s.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        })
}

impl Config {
    /// The passkeys' relying party: `[passkeys]` with its defaults filled in from `base_url`, `trusted_origins`
    /// and `listen`.
    pub fn relying_party(&self) -> RelyingParty {
        let base = self.base_url.as_deref().and_then(|u| url::Url::parse(u).ok());
        let id = self.passkeys.rp_id.clone().unwrap_or_else(|| {
            base.as_ref().and_then(|u| u.domain()).map_or_else(|| "localhost".to_owned(), str::to_owned)
        });
        let name = self.passkeys.rp_name.clone().unwrap_or_else(|| "service-auth".to_owned());
        let mut origins: Vec<url::Url> = if self.passkeys.origins.is_empty() {
            base.iter()
                .chain(self.trusted_origins.iter().filter_map(|o| url::Url::parse(o).ok()).collect::<Vec<_>>().iter())
                .filter(|u| u.domain().is_some_and(|h| on_domain(h, &id)))
                .cloned()
                .collect()
        } else {
            self.passkeys.origins.iter().filter_map(|o| url::Url::parse(o).ok()).collect()
        };
        if origins.is_empty() {
            let port = self.listen.port();
            origins.extend(url::Url::parse(&format!("http://{id}:{port}")).ok());
        }
        RelyingParty { id, name, origins }
    }
}

fn is_origin_url(url: &str, http_only: bool) -> bool {
    let Some((scheme, rest)) = url.split_once("://") else { return false };
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    let scheme_ok = if http_only {
        scheme == "http" || scheme == "https"
    } else {
        !scheme.is_empty() && scheme.bytes().all(|b| b.is_ascii_alphanumeric() || b"+.-".contains(&b))
    };
    scheme_ok && !rest.is_empty() && !rest.contains(['/', '?', '#', '@', ' '])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: std::collections::HashMap<String, String> =
            pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn defaults_are_valid() {
        assert_eq!(Config::default().validate(), Ok(()));
    }

    #[test]
    fn passkeys_default_from_the_base_url_and_check_what_is_set() {
        let rp = Config::default().relying_party();
        assert_eq!((rp.id.as_str(), rp.name.as_str()), ("localhost", "service-auth"));
        assert_eq!(rp.origins.iter().map(url::Url::as_str).collect::<Vec<_>>(), ["http://localhost:3000/"]);
        let config = Config {
            base_url: Some("https://auth.example.com".into()),
            trusted_origins: vec!["https://app.example.com".into(), "https://other.test".into()],
            ..Config::default()
        };
        let rp = config.relying_party();
        assert_eq!(rp.id, "auth.example.com");
        assert_eq!(rp.origins.iter().map(url::Url::as_str).collect::<Vec<_>>(), ["https://auth.example.com/"]);
        let ip = Config { base_url: Some("http://127.0.0.1:3000".into()), ..Config::default() };
        assert_eq!(ip.relying_party().id, "localhost");
        let bad = |passkeys: PasskeysConfig| Config { passkeys, ..Config::default() }.validate().unwrap_err().0;
        assert_eq!(
            bad(PasskeysConfig { rp_id: Some("https://x.example".into()), ..Default::default() }),
            "passkeys.rp_id"
        );
        assert_eq!(bad(PasskeysConfig { rp_id: Some("10.0.0.1".into()), ..Default::default() }), "passkeys.rp_id");
        assert_eq!(bad(PasskeysConfig { rp_name: Some(" ".into()), ..Default::default() }), "passkeys.rp_name");
        let origins = |rp_id: &str, origin: &str| PasskeysConfig {
            rp_id: Some(rp_id.into()),
            origins: vec![origin.into()],
            ..Default::default()
        };
        assert_eq!(bad(origins("example.com", "http://app.example.com")), "passkeys.origins");
        assert_eq!(bad(origins("example.com", "https://example.com.evil.test")), "passkeys.origins");
        assert_eq!(bad(origins("example.com", "https://notexample.com")), "passkeys.origins");
        assert_eq!(bad(origins("example.com", "https://app.example.com/path")), "passkeys.origins");
        let good = Config { passkeys: origins("example.com", "https://app.example.com:8443"), ..Config::default() };
        assert_eq!(good.validate(), Ok(()));
        let local = Config { passkeys: origins("localhost", "http://localhost:5173"), ..Config::default() };
        assert_eq!(local.validate(), Ok(()));
    }

    #[test]
    fn the_repository_config_file_documents_exactly_the_defaults() {
        assert_eq!(parse(include_str!("../config.toml")).unwrap(), Config::default());
    }

    #[test]
    fn unknown_keys_are_named() {
        let e = parse("listen = \"127.0.0.1:1\"\ntrusted_orgins = []\n").unwrap_err();
        assert!(e.contains("unknown field `trusted_orgins`"), "{e}");
        let e = parse("listen = 5\n").unwrap_err();
        assert!(e.contains("line 1: `listen`"), "{e}");
        let e = parse("log = \"x\"\n[hashing]\nworkers = \"two\"\n").unwrap_err();
        assert!(e.contains("line 3: `hashing.workers`"), "{e}");
        let e = parse("[hashing]\nmemry_kib = 1\n").unwrap_err();
        assert!(e.starts_with("line 2: `hashing.memry_kib`: unknown field `memry_kib`"), "{e}");
        let e = parse("listen = \"127.0.0.1:1\"\n\n[cookie]\nprefix = \"x\"\n\n[limits]\nmax_connections = 5\nmax_conections = 5\n")
            .unwrap_err();
        assert!(e.starts_with("line 8: `limits.max_conections`: unknown field"), "{e}");
        let e = parse("log = \"info\"\ntrusted_orgins = []\n").unwrap_err();
        assert!(e.starts_with("line 2: `trusted_orgins`: unknown field"), "{e}");
    }

    #[test]
    fn bad_values_are_named() {
        let check = |text: &str, key: &str| {
            let config = parse(text).unwrap();
            let (k, problem) = config.validate().unwrap_err();
            assert_eq!(k, key, "{problem}");
        };
        check("[hashing]\nmemory_kib = 1024\n", "hashing.memory_kib");
        check("[hashing]\niterations = 1\n", "hashing.iterations");
        check("[roles]\nallowed = [\"user\"]\n", "roles.allowed");
        check("[roles]\ndefault = \"guest\"\n", "roles.default");
        check("base_url = \"ftp://x\"\n", "base_url");
        check("trusted_origins = [\"http://a.example/path\"]\n", "trusted_origins");
        check("[cookie]\nprefix = \"a b\"\n", "cookie.prefix");
        check("[session]\nupdate_age_secs = 999999999\n", "session.update_age_secs");
        check("[session]\nabsolute_lifetime_secs = 59\n", "session.absolute_lifetime_secs");
        check("[session]\nidle_timeout_secs = 1\n", "session.idle_timeout_secs");
        check("log = \"[[[\"\n", "log.level");
        check("[log]\nlevel = \"[[[\"\n", "log.level");
        check("listen = \"127.0.0.1:3000\"\n[metrics]\nlisten = \"127.0.0.1:3000\"\n", "metrics.listen");
        check("[metrics]\nmax_connections = 0\n", "metrics.max_connections");
    }

    #[test]
    fn two_factor_roles_must_be_configured_roles_and_the_issuer_a_label() {
        let key = |text: &str| parse(text).unwrap().validate().unwrap_err().0;
        assert_eq!(key("[two_factor]\nrequired_for_roles = [\"root\"]\n"), "two_factor.required_for_roles");
        assert_eq!(key("[two_factor]\nissuer = \"a:b\"\n"), "two_factor.issuer");
        let ok = parse("[two_factor]\nrequired_for_roles = [\"admin\"]\nissuer = \"Pharmacy QA\"\n").unwrap();
        assert!(ok.validate().is_ok());
    }

    #[test]
    fn the_password_rules_are_checked() {
        let key = |text: &str| parse(text).unwrap().validate().unwrap_err().0;
        assert_eq!(key("[passwords]\nmin_length = 7\n"), "passwords.min_length");
        assert_eq!(
            key("[passwords]\nmin_length = 12\nmin_length_with_second_factor = 13\n"),
            "passwords.min_length_with_second_factor"
        );
        assert_eq!(key("[passwords]\ncontext_words = [\"abc\"]\n"), "passwords.context_words");
        for url in ["http://example.com/range/", "https://example.com/range/?x=1", "ftp://127.0.0.1/", "range"] {
            assert_eq!(key(&format!("[passwords]\nrange_url = {url:?}\n")), "passwords.range_url", "{url}");
        }
        assert_eq!(key("[passwords]\nrange_timeout_ms = 0\n"), "passwords.range_timeout_ms");
        let ok =
            "[passwords]\nmin_length = 12\nrange_url = \"http://127.0.0.1:9/range/\"\ncontext_words = [\"Acme\"]\n";
        assert!(parse(ok).unwrap().validate().is_ok());
        assert!(
            parse("[passwords]\nrange_url = \"https://api.pwnedpasswords.com/range/\"\n").unwrap().validate().is_ok()
        );
        assert_eq!(Config::default().passwords.min_length, 15, "NIST SP 800-63B-4's minimum for a password used alone");
    }

    #[test]
    fn the_postgres_store_needs_a_valid_url_and_sane_bounds() {
        let check = |text: &str, key: &str| {
            let (k, problem) = parse(text).unwrap().validate().unwrap_err();
            assert_eq!(k, key, "{problem}");
            assert!(!problem.contains("secret"), "the password leaked into the message: {problem}");
        };
        check("[store]\nbackend = \"postgres\"\n", "store.url");
        check("[store]\nbackend = \"postgres\"\nurl = \"mysql://u:secret@h/db\"\n", "store.url");
        check("[store]\nbackend = \"postgres\"\nurl = \"postgres://u:secret@h:notaport/db\"\n", "store.url");
        check("[store]\nurl = \"postgres://h/db\"\n", "store.url");
        check("[store]\npool_size = 0\n", "store.pool_size");
        check("[store]\nmax_staleness_secs = 0\n", "store.max_staleness_secs");
        let e = parse("[store]\nbackend = \"mysql\"\n").unwrap_err();
        assert!(e.contains("store.backend"), "{e}");
        let ok = parse("[store]\nbackend = \"postgres\"\nurl = \"postgres://u:secret@db.internal/auth\"\n").unwrap();
        assert_eq!(ok.validate(), Ok(()));
        assert!(!format!("{ok:?}").contains("secret"), "Debug printed the URL");
        let via_env = load_from(
            None,
            env(&[("SERVICE_AUTH_STORE_BACKEND", "postgres"), ("SERVICE_AUTH_STORE_URL", "postgres://h/db")]),
        )
        .unwrap();
        assert_eq!(
            (via_env.store.backend, via_env.store.url.as_deref()),
            (StoreBackend::Postgres, Some("postgres://h/db"))
        );
        let e = load_from(None, env(&[("SERVICE_AUTH_STORE_BACKEND", "pg")])).unwrap_err().to_string();
        assert!(e.contains("SERVICE_AUTH_STORE_BACKEND"), "{e}");
    }

    #[test]
    fn environment_beats_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.toml");
        std::fs::write(&path, "listen = \"127.0.0.1:1\"\ndata_dir = \"/from/file\"\n").unwrap();
        let c = load_from(Some(&path), env(&[("SERVICE_AUTH_LISTEN", "0.0.0.0:8080"), ("SERVICE_AUTH_LOG", "debug")]))
            .unwrap();
        assert_eq!(c.listen.to_string(), "0.0.0.0:8080");
        assert_eq!(c.data_dir, PathBuf::from("/from/file"));
        assert_eq!(c.log.level, "debug");
        let via_env = load_from(None, env(&[("SERVICE_AUTH_CONFIG", path.to_str().unwrap())])).unwrap();
        assert_eq!(via_env.data_dir, PathBuf::from("/from/file"));
        let e = load_from(Some(&path), env(&[("SERVICE_AUTH_LISTEN", "nope")])).unwrap_err().to_string();
        assert!(e.contains("SERVICE_AUTH_LISTEN"), "{e}");
        let missing = load_from(Some(&dir.path().join("absent.toml")), env(&[])).unwrap_err();
        assert!(matches!(missing, ConfigError::Read { .. }));
    }

    #[test]
    fn relative_paths_in_a_file_are_relative_to_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.toml");
        std::fs::write(
            &path,
            "data_dir = \"./data\"\ndata_key_file = \"keys/data.key\"\n[backup]\ndir = \"backups\"\n",
        )
        .unwrap();
        let c = load_from(Some(&path), env(&[])).unwrap();
        assert_eq!(c.data_dir, dir.path().join("./data"));
        assert_eq!(c.data_key_path(), dir.path().join("keys/data.key"));
        assert_eq!(Config::default().data_key_path(), PathBuf::from("./data/data.key"));
        let c = load_from(Some(&path), env(&[("SERVICE_AUTH_DATA_KEY_FILE", "/run/secrets/k")])).unwrap();
        assert_eq!(c.data_key_path(), PathBuf::from("/run/secrets/k"));
        assert_eq!(c.backup.dir, Some(dir.path().join("backups")));
        assert_eq!(c.source.as_deref(), Some(path.as_path()));
        // The environment is the shell's: relative to where the server starts.
        let c = load_from(Some(&path), env(&[("SERVICE_AUTH_DATA_DIR", "here")])).unwrap();
        assert_eq!(c.data_dir, PathBuf::from("here"));
        assert_eq!(
            load_from(None, env(&[])).map(|c| c.source.is_none()).ok(),
            Some(!Path::new("config.toml").is_file())
        );
    }

    #[test]
    fn log_is_a_table_or_a_filter_and_a_bad_variable_is_named() {
        let c = parse("[log]\nlevel = \"debug\"\nformat = \"json\"\naccess = true\n").unwrap();
        assert_eq!(c.log, LogConfig { level: "debug".into(), format: LogFormat::Json, access: true });
        assert_eq!(parse("log = \"warn\"\n").unwrap().log, LogConfig { level: "warn".into(), ..LogConfig::default() });
        let e = parse("[log]\nformat = \"xml\"\n").unwrap_err();
        assert!(e.contains("log.format") && e.contains("line 2"), "{e}");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.toml");
        std::fs::write(&path, "").unwrap();
        let e = load_from(Some(&path), env(&[("SERVICE_AUTH_LOG", "[[[")])).unwrap_err().to_string();
        assert!(e.starts_with("the environment: `SERVICE_AUTH_LOG`"), "{e}");
        let e = load_from(Some(&path), env(&[("SERVICE_AUTH_LOG_FORMAT", "xml")])).unwrap_err().to_string();
        assert!(e.contains("SERVICE_AUTH_LOG_FORMAT"), "{e}");
    }

    #[test]
    fn bootstrap_variables_come_in_pairs() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.toml");
        std::fs::write(&path, "").unwrap();
        let both =
            env(&[("SERVICE_AUTH_BOOTSTRAP_ADMIN_EMAIL", "a@b.co"), ("SERVICE_AUTH_BOOTSTRAP_ADMIN_PASSWORD", "pw")]);
        let c = load_from(Some(&path), both).unwrap();
        assert_eq!(c.bootstrap_admin.unwrap().name, "Administrator");
        let e = load_from(Some(&path), env(&[("SERVICE_AUTH_BOOTSTRAP_ADMIN_EMAIL", "a@b.co")])).unwrap_err();
        assert!(e.to_string().contains("SERVICE_AUTH_BOOTSTRAP_ADMIN_PASSWORD"), "{e}");
    }

    #[test]
    fn debug_never_prints_the_bootstrap_password() {
        let admin = BootstrapAdmin {
            email: "a@b.co".into(),
            name: "A".into(),
            password: "hunter2hunter2".into(),
            promote_existing: false,
        };
        assert!(!format!("{admin:?}").contains("hunter2"));
    }
}
