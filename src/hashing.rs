//! Password hashing: argon2id on a bounded pool of blocking threads.
//!
//! One argon2id hash at the OWASP floor (19 MiB, t = 2) takes ~20 ms of one core. Run on the async runtime it
//! would stall every connection on that worker, so each hash runs in `spawn_blocking`, behind a semaphore sized to
//! the cores.
//!
//! # A cap that holds
//! The permit moves into the blocking closure and is released when the hash ends, not when the request ends: a
//! client that disconnects mid-hash cannot start another one while its first still burns a core and 19 MiB. The
//! wait for a permit is bounded twice, by a queue length and by a time, and a request over either bound gets
//! [`HashError::Busy`] (503 with `Retry-After`) at once instead of piling up. The store writer commits on a
//! thread of its own, so it never waits behind hashes.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use argon2::password_hash::phc::PasswordHash;
use argon2::password_hash::{PasswordHasher, PasswordVerifier};
use argon2::{Algorithm, Argon2, Params, Version};
use std::time::Instant;

use metrics::Histogram;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::config::HashingConfig;
use crate::domain::Password;

#[derive(Debug, thiserror::Error)]
pub enum HashError {
    #[error("invalid argon2 parameters: {0}")]
    Params(String),
    #[error("hashing failed: {0}")]
    Failed(String),
    /// Every worker is busy and the queue is full, or the wait ran out.
    #[error("every hashing worker is busy")]
    Busy,
}

/// The hashing pool. Cheap to clone.
#[derive(Clone)]
pub struct Hasher {
    inner: Arc<Inner>,
}

struct Inner {
    params: Params,
    permits: Arc<Semaphore>,
    max_queue: usize,
    queue_timeout: Duration,
    /// Requests waiting for a permit now.
    waiting: AtomicUsize,
    /// Hashes running now, and the most ever seen at once: what shows the cap holds.
    running: AtomicUsize,
    peak_running: AtomicUsize,
    /// How long each hash waited for a worker (a no-op unless metrics are on).
    wait_time: Histogram,
    /// A hash of a random password made with the current parameters. Verifying against it costs exactly what a
    /// real verify costs, so an unknown e-mail answers in the same time as a wrong password.
    dummy_hash: String,
}

impl Hasher {
    pub fn new(config: &HashingConfig) -> Result<Self, HashError> {
        Self::observed(config, Histogram::noop())
    }

    /// [`new`](Self::new), recording each hash's wait for a worker into `wait_time`.
    pub fn observed(config: &HashingConfig, wait_time: Histogram) -> Result<Self, HashError> {
        let params = Params::new(config.memory_kib, config.iterations, config.parallelism, None)
            .map_err(|e| HashError::Params(e.to_string()))?;
        let workers = match config.workers {
            0 => std::thread::available_parallelism().map_or(2, |n| n.get()),
            n => n,
        };
        let mut random = [0u8; 32];
        getrandom::fill(&mut random).map_err(|e| HashError::Failed(e.to_string()))?;
        let dummy_hash = hash_blocking(&params, &random)?;
        Ok(Self {
            inner: Arc::new(Inner {
                params,
                permits: Arc::new(Semaphore::new(workers)),
                max_queue: config.max_queue,
                queue_timeout: Duration::from_millis(config.queue_timeout_ms),
                waiting: AtomicUsize::new(0),
                running: AtomicUsize::new(0),
                peak_running: AtomicUsize::new(0),
                wait_time,
                dummy_hash,
            }),
        })
    }

    /// Hashes a new password into a PHC string.
    pub async fn hash(&self, password: Password) -> Result<String, HashError> {
        let inner = Arc::clone(&self.inner);
        self.run(move || hash_blocking(&inner.params, password.as_bytes())).await?
    }

    /// Verifies `password` against `phc`, or against the dummy hash when there is no account, so both cases
    /// cost one full verify. A malformed stored hash verifies nothing rather than failing the request.
    pub async fn verify(&self, password: Password, phc: Option<String>) -> Result<bool, HashError> {
        let inner = Arc::clone(&self.inner);
        let known = phc.is_some();
        self.run(move || {
            let stored = phc.as_deref().unwrap_or(&inner.dummy_hash);
            if let Err(problem) = check_stored_hash(stored) {
                tracing::error!(%problem, "a stored password hash cannot be verified safely; the sign-in fails");
                return false;
            }
            let ok = PasswordHash::new(stored)
                .is_ok_and(|parsed| Argon2::default().verify_password(password.as_bytes(), &parsed).is_ok());
            ok && known
        })
        .await
    }

    /// Hashes waiting for a worker now.
    pub fn waiting(&self) -> usize {
        self.inner.waiting.load(Ordering::Relaxed)
    }

    /// The most hashes that ever ran at once.
    pub fn peak_running(&self) -> usize {
        self.inner.peak_running.load(Ordering::Relaxed)
    }

    async fn run<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> Result<T, HashError> {
        let permit = self.permit().await?;
        let inner = Arc::clone(&self.inner);
        tokio::task::spawn_blocking(move || {
            // Held until the hash is done, whether or not anyone still waits for it.
            let _permit = permit;
            let now = inner.running.fetch_add(1, Ordering::Relaxed) + 1;
            inner.peak_running.fetch_max(now, Ordering::Relaxed);
            let out = f();
            inner.running.fetch_sub(1, Ordering::Relaxed);
            out
        })
        .await
        .map_err(|e| HashError::Failed(e.to_string()))
    }

    async fn permit(&self) -> Result<OwnedSemaphorePermit, HashError> {
        let inner = &self.inner;
        if let Ok(permit) = Arc::clone(&inner.permits).try_acquire_owned() {
            inner.wait_time.record(0.0);
            return Ok(permit);
        }
        let started = Instant::now();
        if inner.waiting.fetch_add(1, Ordering::Relaxed) >= inner.max_queue {
            inner.waiting.fetch_sub(1, Ordering::Relaxed);
            return Err(HashError::Busy);
        }
        let waited = tokio::time::timeout(inner.queue_timeout, Arc::clone(&inner.permits).acquire_owned()).await;
        inner.waiting.fetch_sub(1, Ordering::Relaxed);
        inner.wait_time.record(started.elapsed());
        match waited {
            Ok(Ok(permit)) => Ok(permit),
            Ok(Err(_)) | Err(_) => Err(HashError::Busy),
        }
    }
}

/// The most a stored hash may ask of a verify: 256 MiB, 16 passes, 16 lanes. A hash from elsewhere (an import)
/// with m = 4 GiB would make every sign-in of that account allocate 4 GiB; such a hash is refused at import and
/// never verified.
const MAX_MEMORY_KIB: u32 = 256 * 1024;
const MAX_ITERATIONS: u32 = 16;
const MAX_LANES: u32 = 16;

/// Whether `phc` is an argon2 hash this server can verify at a bounded cost.
pub fn check_stored_hash(phc: &str) -> Result<(), String> {
    let parsed = PasswordHash::new(phc).map_err(|e| format!("not a PHC string ({e})"))?;
    if !matches!(parsed.algorithm.as_str(), "argon2id" | "argon2i" | "argon2d") {
        return Err(format!("algorithm {} is not argon2", parsed.algorithm));
    }
    let params = Params::try_from(&parsed).map_err(|e| format!("argon2 parameters: {e}"))?;
    if params.m_cost() > MAX_MEMORY_KIB || params.t_cost() > MAX_ITERATIONS || params.p_cost() > MAX_LANES {
        return Err(format!(
            "cost m={} KiB, t={}, p={} is above the bound (m <= {MAX_MEMORY_KIB}, t <= {MAX_ITERATIONS}, p <= {MAX_LANES})",
            params.m_cost(),
            params.t_cost(),
            params.p_cost()
        ));
    }
    Ok(())
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

    fn small_pool(max_queue: usize, queue_timeout_ms: u64) -> Hasher {
        Hasher::new(&HashingConfig { workers: 1, max_queue, queue_timeout_ms, ..HashingConfig::default() }).unwrap()
    }

    /// The issue: the permit was dropped with the request future while the blocking hash went on, so clients
    /// that went away early could run any number of hashes at once.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn abandoned_hashes_keep_their_worker_until_they_end() {
        let h = small_pool(1000, 60_000);
        for _ in 0..20 {
            let h = h.clone();
            // The request goes away almost at once; its hash must still count against the single worker.
            let started = tokio::spawn(async move { h.hash(Password::new("correct horse").unwrap()).await });
            tokio::time::sleep(Duration::from_millis(2)).await;
            started.abort();
        }
        // Let whatever started finish.
        h.hash(Password::new("correct horse").unwrap()).await.unwrap();
        assert_eq!(h.peak_running(), 1, "more hashes ran at once than there are workers");
    }

    /// Starts `n` hashes at once; returns how many were refused as busy.
    async fn busy_of(h: &Hasher, n: usize) -> usize {
        let calls: Vec<_> = (0..n)
            .map(|_| {
                let h = h.clone();
                tokio::spawn(async move { h.hash(Password::new("correct horse").unwrap()).await })
            })
            .collect();
        let mut busy = 0;
        for call in calls {
            if let Err(HashError::Busy) = call.await.unwrap() {
                busy += 1;
            }
        }
        busy
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_full_queue_answers_busy_at_once() {
        // One runs, two wait, and of twelve at least nine are refused (timing may let a few more through).
        let busy = busy_of(&small_pool(2, 60_000), 12).await;
        assert!(busy >= 6, "only {busy} of 12 refused with one worker and a queue of two");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_wait_for_a_worker_is_bounded() {
        let busy = busy_of(&small_pool(100, 1), 6).await;
        assert!(busy >= 1, "nobody gave up after a 1 ms wait behind a 20 ms hash");
    }

    #[tokio::test]
    async fn hashes_are_argon2id_at_the_configured_cost_and_verify() {
        let h = hasher();
        let phc = h.hash(Password::new("correct horse").unwrap()).await.unwrap();
        assert!(phc.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"), "{phc}");
        assert!(h.verify(Password::for_sign_in("correct horse").unwrap(), Some(phc.clone())).await.unwrap());
        assert!(!h.verify(Password::for_sign_in("correct horsf").unwrap(), Some(phc)).await.unwrap());
    }

    #[test]
    fn stored_hashes_are_bounded_in_cost() {
        let floor = "$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHQ$aGFzaGhhc2hoYXNo";
        assert_eq!(check_stored_hash(floor), Ok(()));
        let huge = "$argon2id$v=19$m=4194304,t=2,p=1$c2FsdHNhbHQ$aGFzaGhhc2hoYXNo";
        assert!(check_stored_hash(huge).unwrap_err().contains("m=4194304"));
        assert!(check_stored_hash("$argon2id$v=19$m=19456,t=100,p=1$c2FsdHNhbHQ$aGFzaGhhc2hoYXNo").is_err());
        assert!(check_stored_hash("$2b$12$abcdefghijklmnopqrstuu").is_err(), "bcrypt is not argon2");
        assert!(check_stored_hash("garbage").is_err());
    }

    #[tokio::test]
    async fn a_hash_of_unbounded_cost_is_never_verified() {
        let h = hasher();
        let huge = "$argon2id$v=19$m=4194304,t=2,p=1$c2FsdHNhbHQ$aGFzaGhhc2hoYXNo".to_owned();
        assert!(!h.verify(Password::for_sign_in("anything at all").unwrap(), Some(huge)).await.unwrap());
    }

    #[tokio::test]
    async fn unknown_account_never_verifies() {
        let h = hasher();
        assert!(!h.verify(Password::for_sign_in("anything at all").unwrap(), None).await.unwrap());
        assert!(!h.verify(Password::for_sign_in("anything at all").unwrap(), Some("garbage".into())).await.unwrap());
    }
}
