//! Password hashing: argon2id on a bounded pool of blocking threads.
//!
//! One argon2id hash at the OWASP floor (19 MiB, t = 2) takes ~20 ms of one core. Run on the async runtime it
//! would stall every connection on that worker, so each hash runs in `spawn_blocking`, behind a semaphore sized to
//! the cores: a burst of sign-ins queues here instead of piling up blocking threads (and 19 MiB each).

use std::sync::Arc;

use argon2::password_hash::phc::PasswordHash;
use argon2::password_hash::{PasswordHasher, PasswordVerifier};
use argon2::{Algorithm, Argon2, Params, Version};
use tokio::sync::Semaphore;

use crate::config::HashingConfig;
use crate::domain::Password;

#[derive(Debug, thiserror::Error)]
pub enum HashError {
    #[error("invalid argon2 parameters: {0}")]
    Params(String),
    #[error("hashing failed: {0}")]
    Failed(String),
}

/// The hashing pool. Cheap to clone.
#[derive(Clone)]
pub struct Hasher {
    inner: Arc<Inner>,
}

struct Inner {
    params: Params,
    permits: Semaphore,
    /// A hash of a random password made with the current parameters. Verifying against it costs exactly what a
    /// real verify costs, so an unknown e-mail answers in the same time as a wrong password.
    dummy_hash: String,
}

impl Hasher {
    pub fn new(config: &HashingConfig) -> Result<Self, HashError> {
        let params = Params::new(config.memory_kib, config.iterations, config.parallelism, None)
            .map_err(|e| HashError::Params(e.to_string()))?;
        let workers = match config.workers {
            0 => std::thread::available_parallelism().map_or(2, |n| n.get()),
            n => n,
        };
        let mut random = [0u8; 32];
        getrandom::fill(&mut random).map_err(|e| HashError::Failed(e.to_string()))?;
        let dummy_hash = hash_blocking(&params, &random)?;
        Ok(Self { inner: Arc::new(Inner { params, permits: Semaphore::new(workers), dummy_hash }) })
    }

    /// Hashes a new password into a PHC string.
    pub async fn hash(&self, password: Password) -> Result<String, HashError> {
        let inner = Arc::clone(&self.inner);
        self.run(move || hash_blocking(&inner.params, password.as_bytes())).await?
    }

    /// Verifies `password` against `phc`, or against the dummy hash when there is no account, so both cases
    /// cost one full verify. Returns `false` for a malformed stored hash rather than failing the request.
    pub async fn verify(&self, password: Password, phc: Option<String>) -> bool {
        let inner = Arc::clone(&self.inner);
        let known = phc.is_some();
        let outcome = self
            .run(move || {
                let stored = phc.as_deref().unwrap_or(&inner.dummy_hash);
                let ok = PasswordHash::new(stored)
                    .is_ok_and(|parsed| Argon2::default().verify_password(password.as_bytes(), &parsed).is_ok());
                ok && known
            })
            .await;
        outcome.unwrap_or(false)
    }

    async fn run<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> Result<T, HashError> {
        let _permit = self.inner.permits.acquire().await.map_err(|e| HashError::Failed(e.to_string()))?;
        tokio::task::spawn_blocking(f).await.map_err(|e| HashError::Failed(e.to_string()))
    }
}

fn hash_blocking(params: &Params, password: &[u8]) -> Result<String, HashError> {
    let argon = Argon2::new(Algorithm::Argon2id, Version::V0x13, params.clone());
    argon.hash_password(password).map(|h| h.to_string()).map_err(|e| HashError::Failed(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hasher() -> Hasher {
        Hasher::new(&HashingConfig::default()).unwrap()
    }

    #[tokio::test]
    async fn hashes_are_argon2id_at_the_configured_cost_and_verify() {
        let h = hasher();
        let phc = h.hash(Password::new("correct horse").unwrap()).await.unwrap();
        assert!(phc.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"), "{phc}");
        assert!(h.verify(Password::for_sign_in("correct horse").unwrap(), Some(phc.clone())).await);
        assert!(!h.verify(Password::for_sign_in("correct horsf").unwrap(), Some(phc)).await);
    }

    #[tokio::test]
    async fn unknown_account_never_verifies() {
        let h = hasher();
        assert!(!h.verify(Password::for_sign_in("anything at all").unwrap(), None).await);
        assert!(!h.verify(Password::for_sign_in("anything at all").unwrap(), Some("garbage".into())).await);
    }
}
