//! Configuration: built-in defaults, then `config.toml`, then environment overrides.
//!
//! Every key is documented in the repository's `config.toml`. An unknown key or a bad value stops start-up with a
//! message that names the key, because a typo in an auth service's configuration (say `trusted_orgins`) silently
//! falling back to a default is a security bug.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

use serde::Deserialize;

/// The whole configuration of a server. `Config::default()` is the built-in default set.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Address to listen on (`SERVICE_AUTH_LISTEN`).
    pub listen: SocketAddr,
    /// Directory of the embedded store (`SERVICE_AUTH_DATA_DIR`).
    pub data_dir: PathBuf,
    /// tracing filter (`SERVICE_AUTH_LOG`).
    pub log: String,
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
    /// Set from `SERVICE_AUTH_BOOTSTRAP_ADMIN_*` only, never from the file: a password does not belong in a
    /// file that gets committed.
    #[serde(skip)]
    pub bootstrap_admin: Option<BootstrapAdmin>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CookieConfig {
    /// The part of the cookie name before `.session_token`.
    pub prefix: String,
    /// Force `Secure` cookies with the `__Secure-` name prefix even when `base_url` is not https.
    pub secure: bool,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SessionConfig {
    /// Lifetime of a remembered session, seconds.
    pub expires_in_secs: u64,
    /// A session used this long after its last refresh is extended, seconds.
    pub update_age_secs: u64,
    /// Lifetime of a `rememberMe: false` session, seconds.
    pub short_expires_in_secs: u64,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RolesConfig {
    /// Roles an administrator may assign. Must contain `admin` and `default`.
    pub allowed: Vec<String>,
    /// Role of a new account.
    pub default: String,
}

#[derive(Debug, Clone, Deserialize)]
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
}

/// The account created or promoted at `serve` when no administrator exists yet.
#[derive(Clone)]
pub struct BootstrapAdmin {
    pub email: String,
    pub name: String,
    pub password: String,
}

impl std::fmt::Debug for BootstrapAdmin {
    // Never print the password, not even in a debug dump of the config.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BootstrapAdmin")
            .field("email", &self.email)
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl Default for Config {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 3000)),
            data_dir: PathBuf::from("./data"),
            log: "info".to_owned(),
            base_url: None,
            trusted_origins: Vec::new(),
            trusted_proxies: Vec::new(),
            cookie: CookieConfig::default(),
            session: SessionConfig::default(),
            roles: RolesConfig::default(),
            hashing: HashingConfig::default(),
            bootstrap_admin: None,
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
        Self { expires_in_secs: 7 * 86_400, update_age_secs: 86_400, short_expires_in_secs: 86_400 }
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

impl Default for HashingConfig {
    fn default() -> Self {
        Self { memory_kib: 19_456, iterations: 2, parallelism: 1, workers: 0 }
    }
}

impl Config {
    /// Whether cookies get `Secure` and the `__Secure-` prefix.
    pub fn secure_cookies(&self) -> bool {
        self.cookie.secure || self.base_url.as_deref().is_some_and(|u| u.starts_with("https://"))
    }
}
