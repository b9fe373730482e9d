//! The loaded state with its actors running: what both the server and the `admin create` command work on.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::accounts::Accounts;
use crate::actors::audit::{AuditLog, Retention};
use crate::actors::users::AttemptPolicy;
use crate::actors::{self, System};
use crate::config::Config;
use crate::domain::RoleSet;
use crate::hashing::Hasher;
use crate::mail::Templates;
use crate::metrics::Metrics;
use crate::store::follower::{self, Freshness};
use crate::store::{CommitMetrics, FaultSwitch, Store, StoreError, StoreWriter, WriterDone};
use crate::webhooks::backchannel::LogoutSigner;

#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{0}")]
    Startup(String),
    #[error("an internal actor failed; restart to reload the state from the store")]
    ActorFailed,
}

/// The running core: store, indexes, actors, hashing pool, and the facade over them.
pub struct Core {
    pub accounts: Accounts,
    /// For the work that needs the whole file (scheduled backups); writes go through the actors.
    pub(crate) store: Arc<Store>,
    pub(crate) audit: AuditLog,
    pub(crate) retention: Retention,
    system: System,
    /// The mail sender, when a transport is configured; stopped before the writer.
    mail_stop: CancellationToken,
    mailer: Option<tokio::task::JoinHandle<()>>,
    /// The webhook deliverer; stopped with the mail sender (what it has not sent stays queued).
    hooks: tokio::task::JoinHandle<()>,
    /// The issuer the back-channel logout tokens name: `base_url`'s, else the served address's, known once the
    /// server listens ([`Core::set_issuer`]). The deliverer holds logouts back until then.
    logout_issuer: Arc<OnceLock<String>>,
    /// Kept to close the writer at stop, after the actors' last flushes.
    writer: StoreWriter,
    writer_done: WriterDone,
    /// With PostgreSQL: the thread applying the other nodes' changes.
    follower: Option<Follower>,
    /// The overview counters' flush, stopped (with a last flush) before the writer.
    counters_flush: CountersFlush,
}

/// Signs the back-channel logouts the webhooks' deliverer sends, with the identity provider's keys.
struct ProviderLogouts {
    keys: Arc<crate::provider::KeyRing>,
    issuer: Arc<OnceLock<String>>,
}

impl LogoutSigner for ProviderLogouts {
    fn sign(&self, logout: &crate::store::hooks::Logout, jti: &str) -> Option<String> {
        let issuer = self.issuer.get()?;
        crate::provider::logout::logout_token(&self.keys, issuer, logout, jti, crate::domain::Timestamp::now())
    }
}

/// The counters' flush task and its stop. Dropped without [`Core::stop`] it still tells the task to end: the task
/// holds the store, and with it the data directory's lock.
struct CountersFlush {
    stop: CancellationToken,
    task: Option<tokio::task::JoinHandle<()>>,
}

/// How long a stop waits for the counters' last flush and for the webhook deliverer.
const STOP_PATIENCE: Duration = Duration::from_secs(5);

impl CountersFlush {
    /// Stops the task after its last flush.
    async fn stop(mut self) {
        self.stop.cancel();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for CountersFlush {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// The follower thread and its stop flag. Dropping it (the core dropped without [`Core::stop`], as when the
/// runtime under it goes away) still tells the thread to end: it is no task of the runtime, and would otherwise
/// hold its database connection, and through its store the writer's and the pool's, for the life of the process.
struct Follower {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Follower {
    /// Stops the thread and waits for it to end.
    async fn stop(mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = tokio::task::spawn_blocking(move || thread.join()).await;
        }
    }
}

impl Drop for Follower {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

impl Core {
    /// Opens the data directory, loads everything into the read indexes (with the start-up checks), removes
    /// sessions that must not be loaded, and starts the writer and the actors. `faults` is a test seam that makes
    /// commits fail on demand; `fatal` is cancelled if an actor dies.
    pub async fn start(config: &Config, faults: FaultSwitch, fatal: CancellationToken) -> Result<Self, AppError> {
        let roles = RoleSet::new(&config.roles.allowed, &config.roles.default);
        let metrics = Arc::new(Metrics::new(config.metrics.listen.is_some()));
        let hasher = Hasher::observed(&config.hashing, metrics.hash_wait.clone())
            .map_err(|e| AppError::Startup(e.to_string()))?;
        // Before the store: a key that cannot be read or created stops start-up before anything is written.
        let key_path = config.data_key_path();
        let data_key = tokio::task::spawn_blocking(move || crate::data_key::DataKey::load_or_create_file(&key_path))
            .await
            .map_err(|e| AppError::Startup(e.to_string()))?
            .map_err(|e| AppError::Startup(format!("the data key: {e}")))?;
        // The session rules' clock: the system clock, unless the test harness that holds `faults` moves it.
        let clock = faults.clock();
        let (opened, set) = (config.clone(), roles.clone());
        let (store, built) = tokio::task::spawn_blocking(move || {
            let store = Store::open_configured(&opened, faults)?;
            let built = actors::load::build(&store, &set)?;
            Ok::<_, StoreError>((store, built))
        })
        .await
        .map_err(|e| AppError::Startup(e.to_string()))??;
        let store = Arc::new(store);
        let actors::load::Built { indexes, cleanup, outbox, times } = built;
        if !cleanup.is_empty() {
            tracing::info!(sessions = cleanup.len(), "removing expired and revoked sessions");
            let store = Arc::clone(&store);
            tokio::task::spawn_blocking(move || store.commit(&cleanup))
                .await
                .map_err(|e| AppError::Startup(e.to_string()))??;
        }
        tracing::info!(
            users = indexes.users.len(),
            sessions = indexes.sessions.len(),
            legacy_password_hashes = indexes.users.legacy_hashes(),
            users_ms = times.users.as_millis(),
            sessions_ms = times.sessions.as_millis(),
            views_ms = times.views.as_millis(),
            "state loaded"
        );
        give_back_load_memory();
        let indexes = Arc::new(indexes);
        let commits = CommitMetrics { duration: metrics.commit_duration.clone(), batch: metrics.commit_batch.clone() };
        // The identity provider's grants: read now, then kept by every durable commit of this node (the writer
        // shows it each one) and by the follower.
        let grant_index = {
            let store = Arc::clone(&store);
            let now = clock.now().as_millis();
            let grants = tokio::task::spawn_blocking(move || store.oauth_grants(now))
                .await
                .map_err(|e| AppError::Startup(e.to_string()))??;
            Arc::new(crate::provider::GrantIndex::load(grants))
        };
        // The clients read so far, on the embedded store alone (src/provider/clients.rs, `ClientCache`).
        let client_cache = store.postgres().is_none().then(|| Arc::new(crate::provider::ClientCache::default()));
        let on_commit: crate::store::OnCommit = {
            let (index, cache) = (Arc::clone(&grant_index), client_cache.clone());
            Arc::new(move |ops| {
                index.apply(ops);
                if let Some(cache) = &cache {
                    cache.apply(ops);
                }
            })
        };
        let (writer, writer_done) = StoreWriter::spawn_with(Arc::clone(&store), commits, Some(on_commit))?;
        let limits = &config.rate_limit;
        let attempts = AttemptPolicy {
            max_failures: limits.failures_per_account,
            window: Duration::from_secs(limits.account_window_secs),
            shared: store.postgres().is_some(),
        };
        if !outbox.is_empty() {
            tracing::info!(messages = outbox.len(), "mail waiting in the outbox");
        }
        let mail_stop = CancellationToken::new();
        let mail_metrics = crate::mail::MailMetrics {
            depth: metrics.outbox.clone(),
            oldest: metrics.outbox_oldest.clone(),
            refused: metrics.mail_failed("refused"),
            expired: metrics.mail_failed("expired"),
        };
        let claims = store.postgres().cloned();
        let (mail, mailer) =
            match crate::mail::start(config, writer.clone(), outbox, mail_metrics, claims, mail_stop.clone()) {
                Some((queue, task)) => (Some(queue), Some(task)),
                None => (None, None),
            };
        let sessions_config = config.session.clone();
        let system = System::start(
            Arc::clone(&indexes),
            writer.clone(),
            sessions_config,
            clock.clone(),
            attempts,
            mail.clone(),
            fatal,
        )
        .await
        .map_err(|e| AppError::Startup(e.to_string()))?;
        let freshness = match store.postgres() {
            Some(_) => Freshness::within(Duration::from_secs(config.store.max_staleness_secs)),
            None => Freshness::always(),
        };
        let follower = match store.postgres() {
            Some(pg) => Some(start_follower(
                Arc::clone(pg),
                Arc::clone(&freshness),
                system.handles.clone(),
                Arc::clone(&grant_index),
                &roles,
            )?),
            None => None,
        };
        let audit = AuditLog::new(Arc::clone(&store), writer.clone());
        let book = crate::accounts::PasskeyBook::new(Arc::clone(&store), writer.clone());
        let passkeys = Arc::new(
            crate::accounts::Passkeys::new(&config.relying_party(), config.passkeys.ceremony_lifetime, book)
                .map_err(AppError::Startup)?,
        );
        let counters = Arc::new(crate::actors::counters::Counters::new(Arc::clone(&store), writer.clone()));
        let stop = CancellationToken::new();
        let task = tokio::spawn(Arc::clone(&counters).run(stop.clone()));
        let counters_flush = CountersFlush { stop, task: Some(task) };
        let data_key = Arc::new(data_key);
        let keys = {
            let (store, writer, data_key) = (Arc::clone(&store), writer.clone(), Arc::clone(&data_key));
            tokio::task::spawn_blocking(move || crate::provider::KeyRing::load(store, writer, data_key))
                .await
                .map_err(|e| AppError::Startup(e.to_string()))?
                .map_err(|e| AppError::Startup(e.to_string()))?
        };
        let keys = Arc::new(keys);
        let logout_issuer = Arc::new(OnceLock::new());
        let logouts: Arc<dyn LogoutSigner> =
            Arc::new(ProviderLogouts { keys: Arc::clone(&keys), issuer: Arc::clone(&logout_issuer) });
        let (delivery, hooks) = crate::webhooks::deliver::start(
            &config.webhooks,
            Arc::clone(&store),
            writer.clone(),
            Some(logouts),
            mail_stop.clone(),
        );
        let accounts = Accounts {
            indexes,
            actors: system.handles.clone(),
            hasher,
            roles,
            audit: audit.clone(),
            store: Arc::clone(&store),
            session_limits: config.session.limits(),
            clock,
            tasks: TaskTracker::new(),
            templates: mail.as_ref().map(|_| Arc::new(Templates::new(config))),
            outbox: mail,
            require_verification: config.email.require_verification,
            organizations: config.organizations.clone(),
            metrics,
            freshness,
            counters,
            flows: Arc::new(crate::accounts::oauth::Flows::new(&config.oauth, writer.clone())),
            data_key,
            webhooks: crate::webhooks::Webhooks::new(Arc::clone(&store), writer.clone(), &config.webhooks),
            webhook_delivery: delivery,
            two_factor_issuer: config.two_factor.issuer.as_deref().unwrap_or("service-auth").into(),
            two_factor_roles: config.two_factor.required_for_roles.clone().into(),
            codes_by_mail: config.two_factor.codes_by_mail,
            passkeys,
            keys,
            api_keys: Arc::new(config.api_keys.clone()),
            passwords: Arc::new(arc_swap::ArcSwap::from_pointee(crate::accounts::PasswordCheck::new(config))),
            fresh_age: Arc::new(arc_swap::ArcSwap::from_pointee(config.session.fresh_age())),
            magic_link: config.magic_link.clone(),
            email_otp: config.email_otp.clone(),
            clients: crate::provider::Clients::new(Arc::clone(&store), writer.clone(), client_cache),
            usernames: config.username.enabled.then(|| {
                let u = &config.username;
                Arc::new(crate::domain::UsernameRules::new(u.min_length, u.max_length, &u.reserved))
            }),
            grants: Arc::new(crate::provider::Grants::new(Arc::clone(&store), writer.clone(), grant_index)),
            registration: Arc::new(config.provider.clone()),
            sso: Arc::new(crate::accounts::SsoProviders::new(
                Arc::clone(&store),
                writer.clone(),
                config.base_url.as_deref(),
                &config.trusted_origins,
                config.sso.nameserver,
            )),
            scim: crate::scim::Tokens::new(Arc::clone(&store), writer.clone()),
        };
        let retention = Retention {
            max_age: Duration::from_secs(config.audit.retain_days.saturating_mul(86_400)),
            max_entries: config.audit.max_entries,
            max_anonymous_entries: config.audit.max_anonymous_entries,
        };
        Ok(Self {
            accounts,
            store,
            audit,
            retention,
            system,
            writer,
            writer_done,
            mail_stop,
            mailer,
            hooks,
            logout_issuer,
            follower,
            counters_flush,
        })
    }

    /// Sets the issuer of the back-channel logout tokens (`<base>/api/auth`): a logout has no request whose `Host`
    /// it could be taken from, as an ID token's is when `base_url` is not set.
    pub(crate) fn set_issuer(&self, base: &str) {
        let _ = self.logout_issuer.set(format!("{base}/api/auth"));
    }

    pub(crate) fn users(&self) -> &actors::UsersHandle {
        &self.system.handles.users
    }

    pub(crate) fn sessions(&self) -> &actors::SessionsHandle {
        &self.system.handles.sessions
    }

    /// Lets the work that requests left behind finish, stops the actors after their mailboxes are empty, then
    /// waits for the writer to commit what it holds.
    pub async fn stop(self) {
        self.accounts.finish_background_work(Duration::from_secs(30)).await;
        if let Some(follower) = self.follower {
            follower.stop().await;
        }
        self.system.stop().await;
        // What is not sent yet stays in the outbox, for the next start.
        self.mail_stop.cancel();
        if let Some(mailer) = self.mailer {
            let _ = mailer.await;
        }
        // The last counts, after the last request that could add one; and the webhook deliverer. Both may be
        // waiting on a frozen database connection, so neither may hold the stop for long: counts not written are
        // the few seconds a crash loses too (docs/reference.md), and messages not delivered stay queued.
        if tokio::time::timeout(STOP_PATIENCE, self.counters_flush.stop()).await.is_err() {
            tracing::warn!("the last counts were not written within {STOP_PATIENCE:?}; stopping anyway");
        }
        let mut hooks = self.hooks;
        if tokio::time::timeout(STOP_PATIENCE, &mut hooks).await.is_err() {
            hooks.abort();
        }
        // The actors have flushed their last batches: the writer writes what it holds, then ends.
        self.writer.close().await;
        self.writer_done.wait().await;
        self.store.close();
    }
}

/// Starts the follower of the PostgreSQL change log: each other node's change goes to the actors that own it, and
/// the follower moves on only once they have applied it (so a change is never skipped, only retried).
fn start_follower(
    pg: Arc<crate::store::PgStore>,
    freshness: Arc<Freshness>,
    handles: actors::Handles,
    grants: Arc<crate::provider::GrantIndex>,
    roles: &RoleSet,
) -> Result<Follower, AppError> {
    let stop = Arc::new(AtomicBool::new(false));
    let runtime = tokio::runtime::Handle::current();
    let roles = roles.clone();
    let own = Arc::clone(pg.own());
    let apply = move |entry: follower::Entry| {
        let gate = crate::store::own::Gate::new(entry.seq, entry.resync, Arc::clone(&own));
        // The grants are no actor's: their index takes its part first (it keeps the newest of each by itself).
        grants.apply(&entry.ops);
        let change = actors::remote::RemoteChange::from_ops(entry.ops, &roles, gate).map_err(|e| e.to_string())?;
        // The follower is an OS thread of its own, outside the runtime: it may block on the actors' answer.
        runtime.block_on(handles.apply_remote(change)).map_err(|e| e.to_string())
    };
    let thread = follower::spawn(pg, freshness, Arc::clone(&stop), apply)
        .map_err(|e| AppError::Startup(format!("cannot start the change log follower: {e}")))?;
    Ok(Follower { stop, thread: Some(thread) })
}

/// Hands the pages the load's temporaries left free inside glibc's heaps back to the kernel. Start-up's lists
/// (the accounts and sessions to check, the memberships to sort, the batches) are freed by now, but the pages in
/// the middle of a heap stay resident until something asks: `malloc_trim` does, in a few milliseconds. At
/// 1,000,000 accounts and sessions it took 638 → 607 MB resident; at 10,000,000 nothing (the lists were large
/// enough for glibc to map each on its own, and their pages went back when each was freed).
fn give_back_load_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `malloc_trim` only returns free memory of the allocator's own heaps; it touches no live allocation.
    unsafe {
        libc::malloc_trim(0);
    }
}
