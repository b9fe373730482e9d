//! Vetting a new password (NIST SP 800-63B-4 §3.1.1.2): the configured policy (length, the shipped list, context
//! words; `domain::PasswordPolicy`), then, when configured, a k-anonymity range lookup of the Have I Been Pwned
//! shape. Every route where a password is chosen calls [`Accounts::vet_password`] before hashing it.

use std::time::Duration;

use sha1::{Digest, Sha1};

use super::Accounts;
use crate::config::Config;
use crate::domain::{Password, PasswordContext, PasswordPolicy, PasswordRefused, User};

/// The policy and the optional range lookup, built once from the configuration.
pub struct PasswordCheck {
    pub(crate) policy: PasswordPolicy,
    range: Option<RangeLookup>,
}

impl PasswordCheck {
    pub fn new(config: &Config) -> Self {
        let p = &config.passwords;
        let mut names: Vec<&str> = vec!["service-auth"];
        names.extend(config.two_factor.issuer.as_deref());
        names.extend(p.context_words.iter().map(String::as_str));
        let policy = PasswordPolicy::new(p.min_length, p.min_length_with_second_factor, &names);
        let range = p.range_url.as_deref().map(|url| RangeLookup::new(url, Duration::from_millis(p.range_timeout_ms)));
        Self { policy, range }
    }
}

/// A range API: `GET <base><first five hex digits of SHA-1>` answers lines `<the other 35 digits>:<count>`.
struct RangeLookup {
    base: String,
    client: reqwest::Client,
}

/// Why a lookup gave no answer (for the log: never the password or its hash).
#[derive(Debug, thiserror::Error)]
enum LookupFailed {
    #[error("request failed: {0}")]
    Request(String),
    #[error("answered {0}")]
    Status(reqwest::StatusCode),
    #[error("the answer is not a range")]
    Malformed,
}

impl RangeLookup {
    fn new(base: &str, timeout: Duration) -> Self {
        let client = reqwest::Client::builder()
            .use_rustls_tls()
            .timeout(timeout)
            .connect_timeout(timeout)
            .redirect(reqwest::redirect::Policy::none())
            // Only the configured URL: no proxy the environment names would see which prefixes are asked for.
            .no_proxy()
            .user_agent(concat!("service-auth/", env!("CARGO_PKG_VERSION"), " (password check)"))
            .build()
            .unwrap_or_default();
        Self { base: base.to_owned(), client }
    }

    /// Whether the range lists `password` with a count above zero. Only the five-digit prefix leaves the process;
    /// `Add-Padding` asks the service to pad its answer so that its size says nothing of the prefix either.
    async fn is_breached(&self, password: &Password) -> Result<bool, LookupFailed> {
        let digest = hex::encode_upper(Sha1::digest(password.as_bytes()));
        let (prefix, suffix) = digest.split_at(5);
        let answer = self
            .client
            .get(format!("{}{prefix}", self.base))
            .header("Add-Padding", "true")
            .send()
            .await
            .map_err(|e| LookupFailed::Request(e.without_url().to_string()))?;
        if !answer.status().is_success() {
            return Err(LookupFailed::Status(answer.status()));
        }
        let body = answer.text().await.map_err(|e| LookupFailed::Request(e.without_url().to_string()))?;
        count_in_range(&body, suffix).map(|count| count > 0)
    }
}

/// The count the range gives `suffix` (0 when absent; padding lines have count 0).
fn count_in_range(body: &str, suffix: &str) -> Result<u64, LookupFailed> {
    for line in body.lines() {
        let (listed, count) = line.trim().split_once(':').ok_or(LookupFailed::Malformed)?;
        if listed.len() != 35 || !listed.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(LookupFailed::Malformed);
        }
        if listed.eq_ignore_ascii_case(suffix) {
            return count.parse().map_err(|_| LookupFailed::Malformed);
        }
    }
    Ok(0)
}

impl Accounts {
    /// Whether `password` may become the password of the account `context` describes. A range lookup that fails
    /// lets the password through (fail-open, logged and counted): the shipped list has been checked by then, and
    /// sign-up, reset and change must not stop because another service is down.
    pub(crate) async fn vet_password(
        &self,
        password: &Password,
        context: PasswordContext<'_>,
    ) -> Result<(), PasswordRefused> {
        // The check in effect when the request came: a reload meanwhile swaps in another without waiting for this
        // one (an owned handle, as the range lookup below awaits).
        let check = self.passwords.load_full();
        check.policy.check(password, context)?;
        let Some(range) = &check.range else { return Ok(()) };
        let looked_up = range.is_breached(password).await;
        let outcome = match &looked_up {
            Ok(true) => "listed",
            Ok(false) => "absent",
            Err(_) => "failed",
        };
        self.metrics.password_range_lookup(outcome).increment(1);
        match looked_up {
            Ok(true) => Err(PasswordRefused::Compromised),
            Ok(false) => Ok(()),
            Err(e) => {
                tracing::warn!(error = %e, "the password range lookup failed: only the shipped list was checked");
                Ok(())
            }
        }
    }

    /// [`vet_password`](Self::vet_password) for an existing account.
    pub(crate) async fn vet_password_of(&self, user: &User, password: &Password) -> Result<(), PasswordRefused> {
        let context =
            PasswordContext { email: user.email(), name: user.name(), second_factor: user.has_second_factor() };
        self.vet_password(password, context).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_range_is_read_as_the_service_writes_it() {
        let suffix = "1E4C9B93F3F0682250B6CF8331B7EE68FD8";
        let body = format!(
            "0018A45C4D1DEF81644B54AB7F969B88D65:0\r\n{suffix}:3730471\r\n00D4F6E8FA6EECAD2A3AA415EEC418D38EC:2"
        );
        assert_eq!(count_in_range(&body, suffix).unwrap(), 3_730_471);
        assert_eq!(count_in_range(&body, &suffix.to_lowercase()).unwrap(), 3_730_471);
        assert_eq!(count_in_range(&body, "0018A45C4D1DEF81644B54AB7F969B88D65").unwrap(), 0, "padding");
        assert_eq!(count_in_range(&body, "FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF").unwrap(), 0);
        assert_eq!(count_in_range("", suffix).unwrap(), 0);
        assert!(count_in_range("<html>not a range</html>", suffix).is_err());
        assert!(count_in_range(&format!("{suffix}:many"), suffix).is_err());
    }
}
