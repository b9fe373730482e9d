//! Password hashing: argon2id on a bounded pool of blocking threads, and the verification of hashes imported
//! from better-auth (scrypt, or argon2 at another cost), which are kept as they are until their owner's next
//! sign-in replaces them with one at the configured cost.
//!
//! # Every check costs the same, whatever the account
//! A check's time must not tell an unknown e-mail from a wrong password, whichever hash the account has. An
//! imported `m=65536,t=3,p=4` hash took 0.15 s to check against 0.02 s for an unknown e-mail: existence shown.
//! So each verify runs one verification at every cost on file: the configured argon2id cost, each other argon2
//! cost some account still has (at most [`MAX_OTHER_COSTS`], the dearest first), and scrypt while any scrypt
//! hash remains; the account's own hash at its cost, a dummy at every other. The set shrinks by itself as
//! imported accounts sign in and are re-hashed. A stored cost is bounded ([`check_stored_hash`]), so a check
//! costs at most the configured one, four at the bound and a scrypt.
//!
//! One argon2id hash at the OWASP floor (19 MiB, t = 2) takes ~20 ms of one core. Run on the async runtime it
//! would stall every connection on that worker, so each hash runs on a worker thread of the pool's own, behind a
//! semaphore with one permit per worker.
//!
//! # A cap that holds
//! The permit moves into the job and is released when the hash ends, not when the request ends: a client that
//! disconnects mid-hash cannot start another one while its first still burns a core and 19 MiB. The wait for a
//! permit is bounded three ways, and a request over any bound gets [`HashError::Busy`] (503 with `Retry-After`)
//! at once instead of piling up: the queue's length, the time waited, and the wait the queue ahead predicts (its
//! length over the workers, times the pace the pool keeps). The last makes a flood's excess fail in microseconds
//! rather than after a full timeout in the queue. A request already in the queue asks again as it waits, and
//! leaves as soon as the pool's pace says its turn cannot come within the timeout: a flood slows the hashing
//! threads down (they share the cores with the requests), so what was predicted at admission can turn out
//! optimistic, and a request that learns it early should not sit out the whole timeout to be told so.
//!
//! Admission asks for more than staying does: a request joins only while the predicted wait is within half the
//! timeout ([`ADMIT_WITHIN`]), and leaves only once it is beyond the whole. A queue filled to exactly what the
//! pace promised sent its back away at every wobble of the pace, after whatever it had waited: in a flood of
//! 1,000 sign-ins, 160–280 of the 503s a run were requests that had queued for 0.1–1.8 s; with the margin, 0–2
//! (BENCHMARKS.md, "Overload, step four"). The store writer commits on a thread of its own, so it never waits
//! behind hashes.
//!
//! # Memory: workers × the argon2 cost, no more
//! Each worker keeps one argon2 block buffer (`memory_kib`) and reuses it for every hash. Allocated per hash, the
//! 19 MiB buffers ended up spread over the allocator's per-thread arenas, which keep freed memory: a flood of
//! sign-ins left the server hundreds of MiB larger than the pool needs (BENCHMARKS.md). A stored hash that asks
//! for more memory than the configured cost (an import, at most [`MAX_MEMORY_KIB`]) gets a buffer of its own for
//! that one verify.
//!
//! # The workers' priority
//! The workers run at the same scheduling priority as the event loops. They ran at nice 10 once, to give session
//! checks a core at once; but then a flood's own refusals and a busy session check took the cores, the pool
//! hashed at a third of its pace and signed in a third as many (130 against 350 in five seconds of a 1,000
//! sign-in flood), while get-session's p99 at the same priority is still under 5 ms (BENCHMARKS.md).

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, mpsc};
use std::time::{Duration, Instant};

use argon2::password_hash::PasswordHasher;
use argon2::password_hash::phc::{Output, ParamsString, PasswordHash, Salt};
use argon2::{Algorithm, Argon2, Block, Params, Version};
use subtle::ConstantTimeEq;

use metrics::Histogram;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, oneshot};

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
    workers: usize,
    /// Jobs for the worker threads; they end when this is dropped.
    jobs: Mutex<mpsc::Sender<Job>>,
    /// How long one worker's turn takes, nanoseconds: what the queue's wait is predicted from ([`Pace`]).
    slot_nanos: AtomicU64,
    pace: Mutex<Pace>,
    max_queue: usize,
    queue_timeout: Duration,
    /// Requests that have joined the queue, that have left it (whichever way), and that have left it with a
    /// worker: the queue is first in, first out, so those granted a worker were all ahead of any still waiting.
    joined: AtomicUsize,
    left: AtomicUsize,
    granted: AtomicUsize,
    /// Hashes running now, and the most ever seen at once: what shows the cap holds.
    running: AtomicUsize,
    peak_running: AtomicUsize,
    /// How long each hash waited for a worker (a no-op unless metrics are on).
    wait_time: Histogram,
    /// A hash of a random password made with the current parameters. Verifying against it costs exactly what a
    /// real verify costs, so an unknown e-mail answers in the same time as a wrong password.
    dummy_hash: String,
    /// The same for a better-auth scrypt hash: a random salt and key (a scrypt verify costs the same whatever
    /// the key, and a random one matches nothing).
    dummy_legacy: String,
    /// The parameter part of the hashes made here (`$argon2id$v=19$m=19456,t=2,p=1$`): a stored hash with other
    /// parameters is re-hashed at its owner's next sign-in.
    configured: String,
}

/// What is on file, for a verify to cost as much whichever account it is for ([`Hasher::verify`]).
#[derive(Debug, Clone, Default)]
pub struct OnFile {
    /// Some account still has a better-auth scrypt hash.
    pub legacy: bool,
    /// The argon2 costs of the hashes on file, as parameter parts of PHC strings (the configured one among
    /// them or not: it is verified at anyway).
    pub argon2: Vec<std::borrow::Cow<'static, str>>,
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
        let started = Instant::now();
        let dummy_hash = hash_blocking(&params, &random)?;
        // The first guess at a turn, until hashes under load teach better. This hash allocates its memory afresh
        // (~25 ms here, against ~15 ms for a worker's hash in its kept buffer), so the guess errs long, the side
        // a flood's first wave needs: its turns are longer still.
        let slot_nanos = AtomicU64::new(nanos(started.elapsed()));
        let jobs = start_workers(workers, params.block_count())?;
        let mut salt_and_key = [0u8; 16 + LEGACY_KEY_LEN];
        getrandom::fill(&mut salt_and_key).map_err(|e| HashError::Failed(e.to_string()))?;
        let (salt, key) = salt_and_key.split_at(16);
        let dummy_legacy = format!("{}:{}", hex::encode(salt), hex::encode(key));
        let configured = crate::domain::argon2_parameters(&dummy_hash).unwrap_or_default().to_owned();
        Ok(Self {
            inner: Arc::new(Inner {
                params,
                permits: Arc::new(Semaphore::new(workers)),
                workers,
                jobs: Mutex::new(jobs),
                slot_nanos,
                pace: Mutex::new(Pace::default()),
                max_queue: config.max_queue,
                queue_timeout: Duration::from_millis(config.queue_timeout_ms),
                joined: AtomicUsize::new(0),
                left: AtomicUsize::new(0),
                granted: AtomicUsize::new(0),
                running: AtomicUsize::new(0),
                peak_running: AtomicUsize::new(0),
                wait_time,
                dummy_hash,
                dummy_legacy,
                configured,
            }),
        })
    }

    /// Hashes a new password into a PHC string.
    pub async fn hash(&self, password: Password) -> Result<String, HashError> {
        let inner = Arc::clone(&self.inner);
        self.run(move |memory| hash_with(&inner.params, password.as_bytes(), memory)).await?
    }

    /// Verifies `password` against `stored`, or against dummies when there is no account, so that every case
    /// costs the same: one verification at each cost on file (see the module's documentation). A malformed
    /// stored hash, or one above the bound, verifies nothing rather than failing the request.
    pub async fn verify(&self, password: Password, stored: Option<String>, on_file: OnFile) -> Result<bool, HashError> {
        let inner = Arc::clone(&self.inner);
        let others = inner.other_costs(&on_file.argon2);
        self.run(move |memory| {
            let stored = stored.as_deref();
            let legacy = stored.and_then(parse_legacy);
            let own = stored.filter(|_| legacy.is_none()).and_then(|s| Some((s, crate::domain::argon2_parameters(s)?)));
            let mut verified = None;
            // The configured cost: the account's hash, or the dummy.
            match own {
                Some((phc, parameters)) if parameters == inner.configured => {
                    verified = Some(verify_with(phc, password.as_bytes(), memory));
                }
                _ => dummy(verify_with(&inner.dummy_hash, password.as_bytes(), memory)),
            }
            // Every other argon2 cost on file: the account's hash at its own, a dummy at each of the rest.
            for parameters in &others {
                match own {
                    Some((phc, own)) if own == parameters => verified = Some(verify_with(phc, password.as_bytes(), memory)),
                    _ => dummy(verify_with(&dummy_at(parameters), password.as_bytes(), memory)),
                }
            }
            // An argon2 hash of a cost not counted yet (a change in between), or not argon2 at all.
            if verified.is_none()
                && let Some((phc, _)) = own
            {
                verified = Some(match check_stored_hash(phc) {
                    Ok(()) => verify_with(phc, password.as_bytes(), memory),
                    Err(problem) => {
                        tracing::error!(%problem, "a stored password hash cannot be verified safely; the sign-in fails");
                        false
                    }
                });
            }
            // scrypt while any account has such a hash.
            match legacy {
                Some(hash) => verified = Some(hash.verify(&password)),
                None if on_file.legacy => {
                    dummy(parse_legacy(&inner.dummy_legacy).is_some_and(|dummy| dummy.verify(&password)));
                }
                None => {}
            }
            verified.unwrap_or(false)
        })
        .await
    }

    /// Whether `stored` should be replaced at its owner's next sign-in: a better-auth scrypt hash, or argon2 with
    /// other parameters than the configured ones (an import's, or this server's before a change of `[hashing]`).
    pub fn needs_rehash(&self, stored: crate::domain::StoredHash<'_>) -> bool {
        stored.is_legacy()
            || stored.cost().and_then(|c| c.parameters()).is_some_and(|p| p != self.inner.configured.as_str())
    }

    /// Hashes waiting for a worker now.
    pub fn waiting(&self) -> usize {
        self.inner.waiting()
    }

    /// The most hashes that ever ran at once.
    pub fn peak_running(&self) -> usize {
        self.inner.peak_running.load(Ordering::Relaxed)
    }

    async fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Vec<Block>) -> T + Send + 'static,
    ) -> Result<T, HashError> {
        let permit = self.permit().await?;
        let inner = Arc::clone(&self.inner);
        let (tx, rx) = oneshot::channel();
        let job: Job = Box::new(move |memory| {
            // Held until the hash is done, whether or not anyone still waits for it.
            let permit = permit;
            let now = inner.running.fetch_add(1, Ordering::Relaxed) + 1;
            inner.peak_running.fetch_max(now, Ordering::Relaxed);
            let started = Instant::now();
            let out = f(memory);
            inner.hash_ended(started);
            inner.running.fetch_sub(1, Ordering::Relaxed);
            // Free before the answer goes out: a client that sends its next request as soon as it has this
            // answer must find the worker free, not a 503 from a pool that only looks busy.
            drop(permit);
            let _ = tx.send(out);
        });
        let sent = self.inner.jobs.lock().unwrap_or_else(PoisonError::into_inner).send(job);
        sent.map_err(|_| HashError::Failed("the hashing workers have stopped".into()))?;
        rx.await.map_err(|_| HashError::Failed("a hashing job ended without an answer".into()))
    }

    async fn permit(&self) -> Result<OwnedSemaphorePermit, HashError> {
        let inner = &self.inner;
        if let Ok(permit) = Arc::clone(&inner.permits).try_acquire_owned() {
            inner.wait_time.record(0.0);
            return Ok(permit);
        }
        let started = Instant::now();
        if self.refuses(inner.waiting()) {
            return Err(HashError::Busy);
        }
        // Counted out of the queue however this ends, a request future dropped mid-wait (its client gone) too.
        let place = Place::join(inner);
        let acquire = Arc::clone(&inner.permits).acquire_owned();
        tokio::pin!(acquire);
        loop {
            tokio::select! {
                biased;
                permit = &mut acquire => {
                    inner.wait_time.record(started.elapsed());
                    inner.granted.fetch_add(1, Ordering::Relaxed);
                    return permit.map_err(|_| HashError::Busy);
                }
                () = tokio::time::sleep(RECHECK.min(inner.queue_timeout.saturating_sub(started.elapsed()))) => {
                    let waited = started.elapsed();
                    if waited >= inner.queue_timeout
                        || waited + self.predicted_wait(place.ahead()) > inner.queue_timeout
                    {
                        inner.wait_time.record(waited);
                        return Err(HashError::Busy);
                    }
                }
            }
        }
    }

    /// Whether a request arriving now would be refused: no worker is free, and the queue is full or predicts a
    /// wait beyond the timeout. Costs four atomic loads, so a handler can ask before any other work (reading the
    /// body, reserving a sign-in attempt) and refuse a flood's excess for almost nothing. A hint only: the request
    /// that goes on is still admitted or refused by [`permit`](Self::permit), which counts itself into the queue.
    pub fn saturated(&self) -> bool {
        self.inner.permits.available_permits() == 0 && self.refuses(self.inner.waiting())
    }

    /// The admission rule for a request with `ahead` others queued before it.
    fn refuses(&self, ahead: usize) -> bool {
        let inner = &self.inner;
        ahead >= inner.max_queue || self.predicted_wait(ahead) > inner.queue_timeout / ADMIT_WITHIN
    }

    /// The wait of a request with `ahead` others queued before it: the hashes running now end (at most one turn),
    /// then the queue ahead goes through the workers in rounds of one turn each ([`Pace`]).
    fn predicted_wait(&self, ahead: usize) -> Duration {
        let inner = &self.inner;
        let rounds = 1 + ahead / inner.workers;
        Duration::from_nanos(inner.slot_nanos.load(Ordering::Relaxed)).saturating_mul(rounds as u32)
    }
}

/// A request joins the queue only while its predicted wait is within this fraction (1/n) of the timeout, so that
/// the pace may grow by that factor before anyone admitted has to leave (see the module's documentation).
const ADMIT_WITHIN: u32 = 2;

/// How often a queued request asks again whether its turn can still come within the timeout (and at the timeout
/// itself, when that comes sooner).
const RECHECK: Duration = Duration::from_millis(20);

impl Inner {
    /// The argon2 costs of `on_file` a verify runs a verification at besides the configured one: each once, only
    /// those within the bound (a hash above it is never verified), the dearest first, at most
    /// [`MAX_OTHER_COSTS`].
    fn other_costs(&self, on_file: &[std::borrow::Cow<'static, str>]) -> Vec<String> {
        let mut others: Vec<(u64, String)> = on_file
            .iter()
            .filter(|p| **p != self.configured)
            .filter_map(|p| Some((stored_cost(&dummy_at(p)).ok()?, p.to_string())))
            .collect();
        others.sort_unstable_by(|a, b| b.cmp(a));
        others.dedup_by(|a, b| a.1 == b.1);
        others.truncate(MAX_OTHER_COSTS);
        others.into_iter().map(|(_, p)| p).collect()
    }

    fn waiting(&self) -> usize {
        // `left` first: read the other way round, a request leaving in between could make it exceed `joined`.
        let left = self.left.load(Ordering::Relaxed);
        self.joined.load(Ordering::Relaxed).saturating_sub(left)
    }

    /// Learns the pool's pace from a hash that began at `started` and has just ended.
    fn hash_ended(&self, started: Instant) {
        let now = Instant::now();
        let waiting = self.waiting() > 0;
        let sample =
            self.pace.lock().unwrap_or_else(PoisonError::into_inner).sample(now, started, waiting, self.workers);
        let sample = nanos(sample);
        // Up fast, down slowly: an estimate that lags a machine getting busier admits a queue that cannot be
        // served in time, one that lags a machine getting quieter only refuses a little early for a few hashes.
        let _ = self.slot_nanos.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |avg| {
            Some(if sample > avg { avg + (sample - avg) / 2 } else { avg - (avg - sample) / 8 })
        });
    }
}

/// The pool's pace: how long a worker's turn takes, seen from the queue. While requests wait, a turn is more than
/// the hash: the permit passes to the next request, that request's task waits to be polled by an event loop
/// serving a flood of connections, and the worker thread waits for a core shared with the event loops. In a flood
/// of 1,000 sign-ins on two cores, a queue that predicted its wait from the hashes' own time timed out 100 to 180
/// requests a run at 3 s; predicting from the turn, none to a few (BENCHMARKS.md, overload). So while requests
/// wait, a turn is measured as the time since the hash `workers` hashes ago ended: all the workers were busy in
/// between, each for one turn.
#[derive(Default)]
struct Pace {
    /// When the last `workers` hashes ended, while requests were waiting; cleared when one ends with none waiting.
    ends: std::collections::VecDeque<Instant>,
}

impl Pace {
    fn sample(&mut self, now: Instant, started: Instant, waiting: bool, workers: usize) -> Duration {
        if !waiting {
            self.ends.clear();
            return now - started;
        }
        self.ends.push_back(now);
        if self.ends.len() <= workers {
            return now - started;
        }
        let first = self.ends.pop_front().unwrap_or(now);
        now - first
    }
}

/// A request's place in the queue, from joining until it leaves it, whichever way.
struct Place<'a> {
    inner: &'a Inner,
    /// How many joined before this one.
    ticket: usize,
    /// How many of those had left without a worker (given up, or their client gone) by the time this one joined.
    gave_up_before: usize,
}

impl<'a> Place<'a> {
    fn join(inner: &'a Inner) -> Self {
        let granted = inner.granted.load(Ordering::Relaxed);
        let gave_up_before = inner.left.load(Ordering::Relaxed).saturating_sub(granted);
        Self { inner, ticket: inner.joined.fetch_add(1, Ordering::Relaxed), gave_up_before }
    }

    /// Requests ahead of this one now: those that joined before it, less those granted a worker since (first in,
    /// first out: all were ahead) and those that had given up before it joined. One ahead that gives up later
    /// still counts, so the estimate can only err long; in a flood it is the back of the queue that gives up.
    fn ahead(&self) -> usize {
        self.ticket.saturating_sub(self.inner.granted.load(Ordering::Relaxed) + self.gave_up_before)
    }
}

impl Drop for Place<'_> {
    fn drop(&mut self) {
        self.inner.left.fetch_add(1, Ordering::Relaxed);
    }
}

/// A hashing job: runs on a worker thread, given that worker's argon2 memory.
type Job = Box<dyn FnOnce(&mut Vec<Block>) + Send>;

/// Starts `workers` threads taking jobs from one channel. Each allocates its `blocks` of argon2 memory at its
/// first job and keeps it; they end when the sender is dropped (the [`Hasher`] with it).
fn start_workers(workers: usize, blocks: usize) -> Result<mpsc::Sender<Job>, HashError> {
    let (tx, rx) = mpsc::channel::<Job>();
    let rx = Arc::new(Mutex::new(rx));
    for n in 0..workers {
        let rx = Arc::clone(&rx);
        std::thread::Builder::new()
            .name(format!("argon2-{n}"))
            .spawn(move || {
                let mut memory: Vec<Block> = Vec::new();
                loop {
                    let job = rx.lock().unwrap_or_else(PoisonError::into_inner).recv();
                    let Ok(job) = job else { return };
                    if memory.len() < blocks {
                        memory = vec![Block::default(); blocks];
                    }
                    // A panic in one hash fails that request (its answer channel is dropped), not the worker:
                    // the pool keeps as many threads as it has permits.
                    let _ = std::panic::catch_unwind(AssertUnwindSafe(|| job(&mut memory)));
                }
            })
            .map_err(|e| HashError::Failed(format!("starting a hashing worker: {e}")))?;
    }
    Ok(tx)
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// The dearest argon2 hash this server verifies besides its own configured cost (an imported one): at most
/// 64 MiB ([`MAX_MEMORY_KIB`]), 256 MiB of passes over memory in all ([`MAX_WORK_KIB`]: 4 passes over 64 MiB, 13
/// over 19 MiB) and 16 lanes. RFC 9106's second recommended setting (64 MiB, t = 3, p = 4), PHP's default and
/// node-argon2's are within it; one such verification takes ~0.15 s of one core here (the configured cost
/// ~0.02 s). A hash above it is refused at import and never verified: at the former bound (256 MiB, t = 16,
/// p = 16) one attempt took 3.3 s and 280 MB, and every check of an unknown e-mail would have paid it too.
pub const MAX_MEMORY_KIB: u32 = 64 * 1024;
pub const MAX_WORK_KIB: u64 = 4 * 64 * 1024;
pub const MAX_LANES: u32 = 16;

/// The most argon2 costs besides the configured one that a verify runs a verification at (the dearest of those
/// on file). An import brings at most this many ([`crate::ops::better_auth`]); beyond it, as after many
/// changes of `[hashing]`, the cheapest are not padded and the accounts that have them can be told apart.
pub const MAX_OTHER_COSTS: usize = 2;

/// The outcome of a dummy verification, kept from the optimiser: the work is the point.
fn dummy(outcome: bool) {
    std::hint::black_box(outcome);
}

/// A dummy hash with `parameters` (the parameter part of a PHC string): a zero salt and output, which no
/// password gives. Verifying against it costs what a real hash of those parameters costs.
fn dummy_at(parameters: &str) -> String {
    format!("{parameters}AAAAAAAAAAAAAAAAAAAAAA$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")
}

/// better-auth's scrypt: N = 2^14, r = 16, p = 1, a 64-byte key. Fixed, so a legacy hash has a bounded cost.
const LEGACY_LOG_N: u8 = 14;
const LEGACY_R: u32 = 16;
const LEGACY_KEY_LEN: usize = 64;

/// A better-auth password hash, `<salt: 32 hex digits>:<key: 128 hex digits>`, as that library stores it.
struct LegacyHash<'a> {
    /// The salt's hex *text*: better-auth feeds the text, not the 16 bytes it encodes, to scrypt.
    salt_hex: &'a str,
    key: [u8; LEGACY_KEY_LEN],
}

impl LegacyHash<'_> {
    /// scrypt of the NFKC password (the [`Password`] is already normalised), compared in constant time.
    fn verify(&self, password: &Password) -> bool {
        let Ok(params) = scrypt::Params::new(LEGACY_LOG_N, LEGACY_R, 1, LEGACY_KEY_LEN) else { return false };
        let mut derived = [0u8; LEGACY_KEY_LEN];
        if scrypt::scrypt(password.as_bytes(), self.salt_hex.as_bytes(), &params, &mut derived).is_err() {
            return false;
        }
        derived.ct_eq(&self.key).into()
    }
}

fn parse_legacy(stored: &str) -> Option<LegacyHash<'_>> {
    if !crate::domain::is_legacy_hash(stored) {
        return None;
    }
    let (salt_hex, key_hex) = stored.split_once(':')?;
    let mut key = [0u8; LEGACY_KEY_LEN];
    hex::decode_to_slice(key_hex, &mut key).ok()?;
    Some(LegacyHash { salt_hex, key })
}

/// Whether `phc` is an argon2 hash this server can verify at a bounded cost, or a better-auth scrypt hash (whose
/// cost is fixed).
pub fn check_stored_hash(phc: &str) -> Result<(), String> {
    if crate::domain::is_legacy_hash(phc) {
        return Ok(());
    }
    stored_cost(phc).map(drop)
}

/// The work of verifying the argon2 hash `phc` (KiB of memory × passes), if within the bound.
fn stored_cost(phc: &str) -> Result<u64, String> {
    let parsed = PasswordHash::new(phc).map_err(|e| format!("not a PHC string ({e})"))?;
    if !matches!(parsed.algorithm.as_str(), "argon2id" | "argon2i" | "argon2d") {
        return Err(format!("algorithm {} is not argon2", parsed.algorithm));
    }
    let params = Params::try_from(&parsed).map_err(|e| format!("argon2 parameters: {e}"))?;
    let work = u64::from(params.m_cost()) * u64::from(params.t_cost());
    if params.m_cost() > MAX_MEMORY_KIB || work > MAX_WORK_KIB || params.p_cost() > MAX_LANES {
        return Err(format!(
            "cost m={} KiB, t={}, p={} is above the bound (m <= {MAX_MEMORY_KIB} KiB, m × t <= {MAX_WORK_KIB}, \
             p <= {MAX_LANES})",
            params.m_cost(),
            params.t_cost(),
            params.p_cost()
        ));
    }
    Ok(work)
}

/// The parameter part of the hashes `config` makes (`$argon2id$v=19$m=19456,t=2,p=1$`).
pub fn configured_parameters(config: &HashingConfig) -> Result<String, HashError> {
    let params = Params::new(config.memory_kib, config.iterations, config.parallelism, None)
        .map_err(|e| HashError::Params(e.to_string()))?;
    let string = ParamsString::try_from(&params).map_err(|e| HashError::Params(e.to_string()))?;
    Ok(format!("${}$v={}${string}$", Algorithm::Argon2id.ident(), u32::from(Version::V0x13)))
}

/// An argon2id hash (at the configured cost) of a random password that is never shown: for an imported account
/// that had no password, so that nobody can sign in to it until a password reset sets one.
pub fn hash_unknown_password(config: &HashingConfig) -> Result<String, HashError> {
    let params = Params::new(config.memory_kib, config.iterations, config.parallelism, None)
        .map_err(|e| HashError::Params(e.to_string()))?;
    let mut random = [0u8; 32];
    getrandom::fill(&mut random).map_err(|e| HashError::Failed(e.to_string()))?;
    hash_blocking(&params, &random)
}

fn hash_blocking(params: &Params, password: &[u8]) -> Result<String, HashError> {
    let argon = Argon2::new(Algorithm::Argon2id, Version::V0x13, params.clone());
    argon.hash_password(password).map(|h| h.to_string()).map_err(|e| HashError::Failed(e.to_string()))
}

/// [`hash_blocking`] in a worker's `memory`: the same PHC string (argon2id v19, a random 16-byte salt, a 32-byte
/// output), without allocating the blocks.
fn hash_with(params: &Params, password: &[u8], memory: &mut [Block]) -> Result<String, HashError> {
    let failed = |e: &dyn std::fmt::Display| HashError::Failed(e.to_string());
    let mut salt = [0u8; 16];
    getrandom::fill(&mut salt).map_err(|e| failed(&e))?;
    let mut out = [0u8; Params::DEFAULT_OUTPUT_LEN];
    let argon = Argon2::new(Algorithm::Argon2id, Version::V0x13, params.clone());
    argon.hash_password_into_with_memory(password, &salt, &mut out, memory).map_err(|e| failed(&e))?;
    let phc = PasswordHash {
        algorithm: Algorithm::Argon2id.ident(),
        version: Some(Version::V0x13.into()),
        params: ParamsString::try_from(params).map_err(|e| failed(&e))?,
        salt: Some(Salt::new(&salt).map_err(|e| failed(&e))?),
        hash: Some(Output::new(&out).map_err(|e| failed(&e))?),
    };
    Ok(phc.to_string())
}

/// Whether `password` matches the argon2 PHC string `stored`, computed in a worker's `memory` (or, for a stored
/// cost above it, in a buffer of its own). The outputs are compared in constant time. The caller has checked the
/// cost is bounded ([`check_stored_hash`]).
fn verify_with(stored: &str, password: &[u8], memory: &mut [Block]) -> bool {
    let Ok(parsed) = PasswordHash::new(stored) else { return false };
    let (Some(salt), Some(expected)) = (&parsed.salt, &parsed.hash) else { return false };
    let Ok(algorithm) = Algorithm::try_from(parsed.algorithm.as_str()) else { return false };
    let Ok(version) = parsed.version.map_or(Ok(Version::default()), Version::try_from) else { return false };
    let Ok(params) = Params::try_from(&parsed) else { return false };
    let mut out = vec![0u8; expected.len()];
    let argon = Argon2::new(algorithm, version, params.clone());
    let computed = if params.block_count() <= memory.len() {
        argon.hash_password_into_with_memory(password, salt, &mut out, &mut memory[..params.block_count()])
    } else {
        argon.hash_password_into(password, salt, &mut out)
    };
    computed.is_ok() && bool::from(out.ct_eq(expected.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hasher() -> Hasher {
        Hasher::new(&HashingConfig::default()).unwrap()
    }

    /// Some account still has a better-auth scrypt hash.
    fn scrypt_on_file() -> OnFile {
        OnFile { legacy: true, ..OnFile::default() }
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
        // One runs and two wait, so nine of twelve are refused when all twelve arrive within one hash. On a loaded
        // machine they may spread over a few hashes, so six is asked for; a queue without bound refuses none.
        let busy = busy_of(&small_pool(2, 60_000), 12).await;
        assert!(busy >= 6, "only {busy} of 12 refused with one worker and a queue of two");
    }

    /// `saturated` says yes exactly when a request arriving now would be refused, and no again once the pool
    /// has room.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn saturated_while_a_request_would_be_refused() {
        let h = small_pool(1, 60_000);
        assert!(!h.saturated(), "an idle pool");
        let (running, queued) = (h.clone(), h.clone());
        let first = tokio::spawn(async move { running.hash(Password::new("correct horse").unwrap()).await });
        while h.inner.permits.available_permits() > 0 {
            tokio::task::yield_now().await;
        }
        assert!(!h.saturated(), "the worker is busy but the queue has room");
        let second = tokio::spawn(async move { queued.hash(Password::new("correct horse").unwrap()).await });
        while h.waiting() == 0 {
            tokio::task::yield_now().await;
        }
        assert!(h.saturated(), "the worker is busy and the queue of one is full");
        assert!(matches!(h.hash(Password::new("correct horse").unwrap()).await, Err(HashError::Busy)));
        first.await.unwrap().unwrap();
        second.await.unwrap().unwrap();
        assert!(!h.saturated(), "the pool is idle again");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_wait_for_a_worker_is_bounded() {
        let busy = busy_of(&small_pool(100, 1), 6).await;
        assert!(busy >= 1, "nobody gave up after a 1 ms wait behind a 20 ms hash");
    }

    /// Holds the pool's only permit (a worker busy for as long as the test likes) and starts a hash that queues
    /// behind it, once the queue has room by the prediction.
    async fn queued_behind_a_held_worker(
        h: &Hasher,
    ) -> (OwnedSemaphorePermit, tokio::task::JoinHandle<Result<String, HashError>>) {
        let held = Arc::clone(&h.inner.permits).acquire_owned().await.unwrap();
        h.inner.slot_nanos.store(1, Ordering::Relaxed);
        let queued = {
            let h = h.clone();
            tokio::spawn(async move { h.hash(Password::new("correct horse").unwrap()).await })
        };
        while h.waiting() == 0 {
            tokio::task::yield_now().await;
        }
        (held, queued)
    }

    /// The issue: the queue's count went up on joining and down after the wait, so a request dropped mid-wait
    /// (its client gone) stayed counted for good, and enough of them made the pool refuse everyone.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_request_dropped_while_queued_leaves_the_queue() {
        let h = small_pool(10, 60_000);
        let (held, queued) = queued_behind_a_held_worker(&h).await;
        queued.abort();
        let _ = queued.await;
        assert_eq!(h.waiting(), 0);
        drop(held);
        h.hash(Password::new("correct horse").unwrap()).await.unwrap();
    }

    /// Admitted by an optimistic pace, a queued request leaves as soon as the pace learnt since says its turn
    /// cannot come within the timeout: within a few checks, not at the timeout.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_queued_request_leaves_once_the_pace_says_its_turn_comes_too_late() {
        let h = small_pool(10, 30_000);
        let (_held, queued) = queued_behind_a_held_worker(&h).await;
        let learnt = Instant::now();
        h.inner.slot_nanos.store(nanos(Duration::from_secs(60)), Ordering::Relaxed);
        assert!(matches!(queued.await.unwrap(), Err(HashError::Busy)));
        assert!(learnt.elapsed() < Duration::from_secs(10), "left only after {:?}", learnt.elapsed());
    }

    /// Joining asks for a predicted wait within half the timeout; staying, only within the whole. With turns of
    /// 10 s and a timeout of 30 s, a request with nobody queued ahead joins (10 s), one with somebody ahead does
    /// not (20 s); at 20 s a turn, a newcomer is refused while the request already queued, its turn 20 s away,
    /// stays.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn joining_asks_for_half_the_timeout_and_staying_for_the_whole() {
        let h = small_pool(10, 30_000);
        h.inner.slot_nanos.store(nanos(Duration::from_secs(10)), Ordering::Relaxed);
        assert!(!h.refuses(0), "a predicted 10 s of a 30 s timeout");
        assert!(h.refuses(1), "a predicted 20 s of a 30 s timeout is beyond half of it");

        let (held, queued) = queued_behind_a_held_worker(&h).await;
        h.inner.slot_nanos.store(nanos(Duration::from_secs(20)), Ordering::Relaxed);
        assert!(h.saturated());
        assert!(matches!(h.hash(Password::new("correct horse").unwrap()).await, Err(HashError::Busy)));
        // Long enough for several rechecks.
        tokio::time::sleep(RECHECK * 5).await;
        assert!(!queued.is_finished(), "left the queue though its turn comes within the timeout");
        drop(held);
        queued.await.unwrap().unwrap();
    }

    /// A prediction that never learns better (hashes believed to take a nanosecond, none ending) still ends the
    /// wait at the timeout.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_optimistic_prediction_still_ends_the_wait_at_the_timeout() {
        let h = small_pool(10, 100);
        // Before the request queues: its wait starts later, so this clock can only over-count it (taken after,
        // a loaded machine's delay in getting back here was counted off the wait and failed the check).
        let started = Instant::now();
        let (_held, queued) = queued_behind_a_held_worker(&h).await;
        let waited = tokio::time::timeout(Duration::from_secs(10), queued).await.expect("the wait did not end");
        assert!(matches!(waited.unwrap(), Err(HashError::Busy)));
        assert!(started.elapsed() >= Duration::from_millis(90), "left after {:?}", started.elapsed());
    }

    /// While requests wait, a turn is the time since the hash `workers` hashes ago ended; otherwise, and until
    /// that many have ended, the hash's own time.
    #[test]
    fn the_pace_is_a_turn_of_every_worker_while_requests_wait() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut pace = Pace::default();
        // Two workers; each hash takes 20 ms of its own, but they end 50 ms apart while requests wait.
        assert_eq!(pace.sample(t0 + ms(50), t0 + ms(30), true, 2), ms(20));
        assert_eq!(pace.sample(t0 + ms(100), t0 + ms(80), true, 2), ms(20));
        assert_eq!(pace.sample(t0 + ms(150), t0 + ms(130), true, 2), ms(100));
        assert_eq!(pace.sample(t0 + ms(200), t0 + ms(180), true, 2), ms(100));
        // Nobody waiting: the hash's own time, and the turns are measured afresh.
        assert_eq!(pace.sample(t0 + ms(250), t0 + ms(230), false, 2), ms(20));
        assert_eq!(pace.sample(t0 + ms(300), t0 + ms(280), true, 2), ms(20));
    }

    #[tokio::test]
    async fn hashes_are_argon2id_at_the_configured_cost_and_verify() {
        let h = hasher();
        let phc = h.hash(Password::new("correct horse").unwrap()).await.unwrap();
        assert!(phc.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"), "{phc}");
        assert!(
            h.verify(Password::for_sign_in("correct horse").unwrap(), Some(phc.clone()), OnFile::default())
                .await
                .unwrap()
        );
        assert!(
            !h.verify(Password::for_sign_in("correct horsf").unwrap(), Some(phc), OnFile::default()).await.unwrap()
        );
    }

    /// Hashes made in a worker's reused memory are ordinary PHC strings, and verifying in that memory agrees with
    /// the library's own verifier, also for a stored cost above the buffer (an import) and after the buffer held
    /// another hash.
    #[test]
    fn hashing_in_reused_memory_matches_the_library() {
        use argon2::password_hash::PasswordVerifier;
        let params = Params::new(19_456, 2, 1, None).unwrap();
        let mut memory = vec![Block::default(); params.block_count()];
        let phc = hash_with(&params, b"correct horse", &mut memory).unwrap();
        assert!(phc.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"), "{phc}");
        let parsed = PasswordHash::new(&phc).unwrap();
        assert!(Argon2::default().verify_password(b"correct horse", &parsed).is_ok());
        assert!(verify_with(&phc, b"correct horse", &mut memory));
        assert!(!verify_with(&phc, b"correct horsf", &mut memory));
        let bigger = hash_blocking(&Params::new(32_768, 2, 2, None).unwrap(), b"correct horse").unwrap();
        assert!(verify_with(&bigger, b"correct horse", &mut memory));
        assert!(!verify_with(&bigger, b"correct horsf", &mut memory));
        assert!(!verify_with("garbage", b"correct horse", &mut memory));
    }

    #[test]
    fn stored_hashes_are_bounded_in_cost() {
        let floor = "$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHQ$aGFzaGhhc2hoYXNo";
        assert_eq!(check_stored_hash(floor), Ok(()));
        let huge = "$argon2id$v=19$m=4194304,t=2,p=1$c2FsdHNhbHQ$aGFzaGhhc2hoYXNo";
        assert!(check_stored_hash(huge).unwrap_err().contains("m=4194304"));
        assert!(check_stored_hash("$argon2id$v=19$m=19456,t=100,p=1$c2FsdHNhbHQ$aGFzaGhhc2hoYXNo").is_err());
        // The bound: 64 MiB, 256 MiB of passes, 16 lanes. The former bound's largest (3.3 s, 280 MB) is above it.
        for within in ["m=65536,t=3,p=4", "m=65536,t=4,p=1", "m=7168,t=5,p=1", "m=19456,t=13,p=1", "m=65536,t=4,p=16"] {
            assert_eq!(check_stored_hash(&format!("$argon2id$v=19${within}$c2FsdHNhbHQ$aGFzaGhhc2hoYXNo")), Ok(()));
        }
        for above in
            ["m=262144,t=16,p=16", "m=65537,t=1,p=1", "m=65536,t=5,p=1", "m=19456,t=14,p=1", "m=65536,t=1,p=17"]
        {
            assert!(
                check_stored_hash(&format!("$argon2id$v=19${above}$c2FsdHNhbHQ$aGFzaGhhc2hoYXNo")).is_err(),
                "{above}"
            );
        }
        assert!(check_stored_hash("$2b$12$abcdefghijklmnopqrstuu").is_err(), "bcrypt is not argon2");
        assert!(check_stored_hash("garbage").is_err());
        assert_eq!(check_stored_hash(BETTER_AUTH_HASH), Ok(()), "a better-auth scrypt hash has a fixed cost");
        assert!(check_stored_hash(&BETTER_AUTH_HASH[1..]).is_err(), "a salt of 31 digits is not one");
    }

    /// Made by better-auth 1.7.25 (`hashPassword` from `better-auth/crypto`, Node's scrypt) for "correct horse
    /// battery": the same hash must verify here.
    const BETTER_AUTH_HASH: &str = include_str!("../tests/migration/fixtures/better-auth-hash.txt");

    #[tokio::test]
    async fn better_auth_scrypt_hashes_verify_as_they_are() {
        let h = hasher();
        let stored = BETTER_AUTH_HASH.trim().to_owned();
        assert!(crate::domain::is_legacy_hash(&stored));
        let right = Password::for_sign_in("correct horse battery").unwrap();
        assert!(h.verify(right.clone(), Some(stored.clone()), scrypt_on_file()).await.unwrap());
        assert!(h.verify(right, Some(stored.clone()), OnFile::default()).await.unwrap());
        let wrong = Password::for_sign_in("correct horse batterz").unwrap();
        assert!(!h.verify(wrong, Some(stored.clone()), scrypt_on_file()).await.unwrap());
        // One bit off in the key: refused.
        let mut flipped = stored.clone();
        let last = flipped.pop().unwrap();
        flipped.push(if last == '0' { '1' } else { '0' });
        assert!(
            !h.verify(Password::for_sign_in("correct horse battery").unwrap(), Some(flipped), scrypt_on_file())
                .await
                .unwrap()
        );
    }

    /// While legacy hashes remain, a wrong password on either kind of account and an unknown e-mail each cost
    /// one argon2 and one scrypt verification. Compared on the fastest of 15 runs each (other tests load the
    /// machine meanwhile, and noise only ever adds time): within a factor of two, where skipping either
    /// verification would make one of them 4 to 5 times faster.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn unknown_and_wrong_passwords_take_the_same_time_for_both_hash_kinds() {
        let h = hasher();
        let argon = h.hash(Password::new("correct horse").unwrap()).await.unwrap();
        let legacy = BETTER_AUTH_HASH.trim().to_owned();
        let wrong = || Password::for_sign_in("wrong password").unwrap();
        let fastest = |v: Vec<Duration>| v.into_iter().min().unwrap();
        let (mut a, mut l, mut u) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..15 {
            for (stored, out) in [(Some(argon.clone()), &mut a), (Some(legacy.clone()), &mut l), (None, &mut u)] {
                let started = std::time::Instant::now();
                assert!(!h.verify(wrong(), stored, scrypt_on_file()).await.unwrap());
                out.push(started.elapsed());
            }
        }
        let (a, l, u) = (fastest(a), fastest(l), fastest(u));
        // Within a factor of two: a machine running several builds moved even the fastest of 15 apart by more
        // than a third, while a skipped verification makes one kind four to five times faster.
        let close = |x: Duration, y: Duration| x.max(y) < x.min(y) * 2;
        assert!(close(a, u) && close(l, u), "argon2 {a:?}, scrypt {l:?}, unknown {u:?}");
    }

    /// RFC 9106's second recommended setting, the one an imported hash showed the issue with.
    const RFC_9106: &str = "$argon2id$v=19$m=65536,t=3,p=4$";

    fn on_file(costs: &[&'static str]) -> OnFile {
        OnFile { legacy: false, argon2: costs.iter().map(|c| std::borrow::Cow::Borrowed(*c)).collect() }
    }

    /// An imported argon2 hash of another cost verifies, and is what a sign-in replaces; the server's own are not.
    #[tokio::test]
    async fn a_hash_of_another_cost_verifies_and_is_to_be_replaced() {
        let h = hasher();
        let imported = hash_blocking(&Params::new(65_536, 3, 4, None).unwrap(), b"correct horse").unwrap();
        assert!(imported.starts_with(RFC_9106), "{imported}");
        let right = Password::for_sign_in("correct horse").unwrap();
        for costs in [on_file(&[]), on_file(&[RFC_9106])] {
            assert!(h.verify(right.clone(), Some(imported.clone()), costs).await.unwrap());
        }
        let wrong = Password::for_sign_in("correct horsf").unwrap();
        assert!(!h.verify(wrong, Some(imported.clone()), on_file(&[RFC_9106])).await.unwrap());
        assert!(h.needs_rehash(crate::domain::PasswordHash::new(&imported).as_stored()));
        let own = h.hash(Password::new("correct horse").unwrap()).await.unwrap();
        assert!(!h.needs_rehash(crate::domain::PasswordHash::new(&own).as_stored()));
        assert!(h.needs_rehash(crate::domain::PasswordHash::new(BETTER_AUTH_HASH.trim()).as_stored()));
        assert!(!h.needs_rehash(crate::domain::PasswordHash::new("garbage").as_stored()), "nothing to replace it from");
    }

    /// The dummies a verify runs: each cost on file but the configured one, once, within the bound, the dearest
    /// first, at most [`MAX_OTHER_COSTS`].
    #[test]
    fn the_other_costs_are_bounded_and_dearest_first() {
        let h = hasher();
        assert_eq!(configured_parameters(&HashingConfig::default()).unwrap(), h.inner.configured);
        let configured = "$argon2id$v=19$m=19456,t=2,p=1$";
        let cheap = "$argon2id$v=19$m=7168,t=5,p=1$";
        let above = "$argon2id$v=19$m=262144,t=16,p=16$";
        let dearest = "$argon2id$v=19$m=65536,t=4,p=1$";
        let costs = on_file(&[configured, cheap, RFC_9106, above, RFC_9106, dearest]).argon2;
        assert_eq!(h.inner.other_costs(&costs), [dearest, RFC_9106]);
        assert!(h.inner.other_costs(&on_file(&[configured]).argon2).is_empty());
    }

    /// The issue: a wrong password on an account with an imported `m=65536,t=3,p=4` hash took 0.15 s, an unknown
    /// e-mail 0.02 s. With that cost on file, a wrong password on either kind of account and an unknown e-mail
    /// each run one verification at both costs. Compared on the fastest of 7 runs each, within a factor of three,
    /// where the unpadded checks differ 5 to 8 times.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn unknown_and_wrong_passwords_take_the_same_time_with_another_argon2_cost_on_file() {
        let h = hasher();
        let own = h.hash(Password::new("correct horse").unwrap()).await.unwrap();
        let imported = hash_blocking(&Params::new(65_536, 3, 4, None).unwrap(), b"correct horse").unwrap();
        let wrong = || Password::for_sign_in("wrong password").unwrap();
        let fastest = |v: Vec<Duration>| v.into_iter().min().unwrap();
        let (mut o, mut i, mut u) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..7 {
            for (stored, out) in [(Some(own.clone()), &mut o), (Some(imported.clone()), &mut i), (None, &mut u)] {
                let started = std::time::Instant::now();
                assert!(!h.verify(wrong(), stored, on_file(&[RFC_9106])).await.unwrap());
                out.push(started.elapsed());
            }
        }
        let (o, i, u) = (fastest(o), fastest(i), fastest(u));
        // Within a factor of three: a machine running several builds moved even the fastest of 7 apart by more
        // than twice, while the unpadded checks differ 5 to 8 times.
        let close = |x: Duration, y: Duration| x.max(y) < x.min(y) * 3;
        assert!(close(o, u) && close(i, u), "own cost {o:?}, imported cost {i:?}, unknown {u:?}");
    }

    #[tokio::test]
    async fn a_hash_of_unbounded_cost_is_never_verified() {
        let h = hasher();
        let huge = "$argon2id$v=19$m=4194304,t=2,p=1$c2FsdHNhbHQ$aGFzaGhhc2hoYXNo".to_owned();
        assert!(
            !h.verify(Password::for_sign_in("anything at all").unwrap(), Some(huge), OnFile::default()).await.unwrap()
        );
    }

    #[tokio::test]
    async fn unknown_account_never_verifies() {
        let h = hasher();
        assert!(!h.verify(Password::for_sign_in("anything at all").unwrap(), None, OnFile::default()).await.unwrap());
        assert!(
            !h.verify(Password::for_sign_in("anything at all").unwrap(), Some("garbage".into()), OnFile::default())
                .await
                .unwrap()
        );
    }
}
