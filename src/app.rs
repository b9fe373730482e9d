//! Wiring: open the store, load the state, start the actors, bootstrap the first admin, serve until shut down.

use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::actors::users::AttemptPolicy;
use crate::actors::{self, System};
use crate::config::Config;
use crate::domain::RoleSet;
use crate::hashing::Hasher;
use crate::http::limits::AddressLimits;
use crate::http::origins::Origins;
use crate::http::response::CookieSettings;
use crate::http::{self, AppState};
use crate::store::{Store, StoreError, StoreWriter};

#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{0}")]
    Startup(String),
    #[error("an internal actor failed; restart to reload the state from the store")]
    ActorFailed,
}

/// The loaded state with its actors running: what both the server and the `admin create` command work on.
pub(crate) struct Core {
    pub indexes: Arc<actors::Indexes>,
    /// For readers that need a consistent snapshot of the file (backups); writes go through the actors.
    pub store: Arc<Store>,
    pub system: System,
    pub hasher: Hasher,
    pub roles: RoleSet,
    pub audit: crate::actors::audit::AuditLog,
    /// Kept to close the writer at stop, after the actors' last flushes.
    writer: StoreWriter,
    writer_done: crate::store::WriterDone,
}

impl Core {
    /// Opens the data directory, loads everything into the read indexes, and starts the writer and the actors.
    pub async fn start(config: &Config, fatal: CancellationToken) -> Result<Self, AppError> {
        let roles = RoleSet::new(&config.roles.allowed, &config.roles.default);
        let hasher = Hasher::new(&config.hashing).map_err(|e| AppError::Startup(e.to_string()))?;
        let (data_dir, faults, set) = (config.data_dir.clone(), config.store_faults.clone(), roles.clone());
        let (store, indexes, cleanup) = tokio::task::spawn_blocking(move || {
            let store = Store::open_with_faults(&data_dir, faults)?;
            let (indexes, cleanup) = actors::load::build(&store, &set)?;
            Ok::<_, StoreError>((store, indexes, cleanup))
        })
        .await
        .map_err(|e| AppError::Startup(e.to_string()))??;
        let store = Arc::new(store);
        if !cleanup.is_empty() {
            tracing::info!(sessions = cleanup.len(), "removing expired and revoked sessions");
            let store = Arc::clone(&store);
            tokio::task::spawn_blocking(move || store.commit(&cleanup))
                .await
                .map_err(|e| AppError::Startup(e.to_string()))??;
        }
        tracing::info!(users = indexes.users.len(), sessions = indexes.sessions.len(), "state loaded");
        let indexes = Arc::new(indexes);
        let (writer, writer_done) = StoreWriter::spawn(Arc::clone(&store))?;
        let limits = &config.rate_limit;
        let attempts = AttemptPolicy {
            max_failures: limits.failures_per_account,
            window: Duration::from_secs(limits.account_window_secs),
        };
        let system = System::start(Arc::clone(&indexes), writer.clone(), config.session.clone(), attempts, fatal)
            .await
            .map_err(|e| AppError::Startup(e.to_string()))?;
        let audit = crate::actors::audit::AuditLog::new(Arc::clone(&store), writer.clone());
        Ok(Self { indexes, store, system, hasher, roles, audit, writer, writer_done })
    }

    /// Stops the actors after their mailboxes are empty, then waits for the writer to commit what it holds.
    pub async fn stop(self) {
        self.system.stop().await;
        // The actors have flushed their last batches: the writer writes what it holds, then ends.
        self.writer.close().await;
        self.writer_done.wait().await;
    }
}

/// Housekeeping, once a minute: forget the rate-limit state of addresses back to a full allowance, and every ten
/// minutes remove expired sessions from memory and disk (a session nobody presents again would otherwise stay
/// forever).
async fn housekeeping(state: Arc<AppState>, stop: CancellationToken) {
    let mut tick = tokio::time::interval(Duration::from_secs(60));
    for round in 0u64.. {
        tokio::select! {
            _ = tick.tick() => {}
            () = stop.cancelled() => return,
        }
        state.limits.sweep();
        if round % 10 == 0 {
            match state.actors.sessions.sweep_expired().await {
                Ok(0) => {}
                Ok(n) => tracing::info!(sessions = n, "expired sessions removed"),
                Err(_) => tracing::warn!("could not remove expired sessions; will retry"),
            }
        }
    }
}

/// Every connection is a file descriptor. At the open-file limit `accept` fails (and keeps failing) while clients
/// wait, so: raise the soft limit to the hard one, and keep the connection cap far enough below it for the store,
/// backups, logs and the listener.
fn connection_budget(wanted: usize) -> usize {
    let limit = match rlimit::increase_nofile_limit(u64::MAX) {
        Ok(limit) => limit,
        Err(error) => {
            tracing::warn!(%error, "cannot read or raise the open-file limit; max_connections is used as it is");
            return wanted;
        }
    };
    let budget = limit.saturating_sub(64.min(limit / 2)).max(1);
    match usize::try_from(budget) {
        Ok(budget) if budget < wanted => {
            tracing::warn!(
                open_files = limit,
                max_connections = budget,
                "the open-file limit is lower than max_connections allows for; connections are capped lower"
            );
            budget
        }
        _ => wanted,
    }
}

/// Runs the server on `listener` until `shutdown` is cancelled, then stops accepting, finishes the requests in
/// flight, makes everything durable and returns.
pub async fn run(listener: TcpListener, mut config: Config, shutdown: CancellationToken) -> Result<(), AppError> {
    config.limits.max_connections = connection_budget(config.limits.max_connections);
    let fatal = CancellationToken::new();
    let core = Core::start(&config, fatal.clone()).await?;
    if let Some(admin) = &config.bootstrap_admin
        && let Err(e) = crate::admin::bootstrap(&core, admin).await
    {
        // Release the data directory before reporting: the caller may well start again on it.
        core.stop().await;
        return Err(e);
    }
    let state = Arc::new(AppState {
        indexes: Arc::clone(&core.indexes),
        actors: core.system.handles.clone(),
        hasher: core.hasher.clone(),
        roles: core.roles.clone(),
        cookies: CookieSettings::new(&config.cookie.prefix, config.secure_cookies(), config.session.expires_in_secs),
        origins: Origins::new(config.base_url.as_deref(), &config.trusted_origins),
        trusted_proxies: config.trusted_proxies.clone(),
        store: Arc::clone(&core.store),
        connection_limits: config.limits.clone(),
        limits: AddressLimits::new(
            config.rate_limit.sign_in_per_address,
            config.rate_limit.sign_up_per_address,
            Duration::from_secs(config.rate_limit.window_secs),
        ),
        update_age: Duration::from_secs(config.session.update_age_secs),
        tasks: tokio_util::task::TaskTracker::new(),
    });
    tracing::info!(address = ?listener.local_addr().ok(), "serving");
    let stop = CancellationToken::new();
    tokio::spawn(housekeeping(Arc::clone(&state), stop.clone()));
    if let Some(dir) = &config.backup.dir {
        let schedule = crate::ops::backup::Schedule {
            dir: dir.clone(),
            every: Duration::from_secs(config.backup.interval_secs),
            keep: config.backup.keep,
        };
        tokio::spawn(crate::ops::backup::run_schedule(Arc::clone(&core.store), schedule, stop.clone()));
    }
    let serving = tokio::spawn(http::serve(listener, Arc::clone(&state), stop.clone()));
    tokio::select! {
        () = shutdown.cancelled() => {}
        () = fatal.cancelled() => {}
    }
    stop.cancel();
    let _ = serving.await;
    // Requests are done; work they started that outlives them (password checks of clients that left) ends now,
    // while the actors still take messages.
    state.tasks.close();
    if tokio::time::timeout(Duration::from_secs(30), state.tasks.wait()).await.is_err() {
        tracing::warn!("background request work still running after 30 s; stopping anyway");
    }
    core.stop().await;
    if fatal.is_cancelled() {
        return Err(AppError::ActorFailed);
    }
    tracing::info!("stopped; everything acknowledged is on disk");
    Ok(())
}
