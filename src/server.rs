//! The server: start the core, bootstrap the first administrator, serve HTTP, keep house, stop cleanly.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::actors::audit::{AuditLog, Retention};
use crate::actors::{SessionsHandle, UsersHandle};
use crate::config::Config;
use crate::domain::Timestamp;
use crate::http::{self, AppState};
use crate::runtime::{AppError, Core};
use crate::store::FaultSwitch;

/// What a server reports once it serves: the store is open, the state loaded, the first administrator made.
#[derive(Debug, Clone)]
pub struct Started {
    /// The address it answers on (the real port when 0 was asked for).
    pub address: SocketAddr,
    /// The metrics listener's address, when one is configured.
    pub metrics: Option<SocketAddr>,
    /// Whether an administrator exists: without one nobody can manage the service yet.
    pub has_admin: bool,
    /// Where a browser opens the administration console (`base_url`, else the address served, and `/admin/`).
    pub console: String,
    /// Where a user manages their own account (the same base, and `/account/`).
    pub account: String,
    /// Without an administrator: the one-time link where the first one is created in a browser. It holds a live
    /// token: it goes to the server's log once, nowhere else.
    pub setup_link: Option<String>,
}

/// Runs the server on `listener` until `shutdown` is cancelled, then stops accepting, finishes the requests in
/// flight, makes everything durable and returns. `started` is called once it serves (not before: start-up can
/// still fail on a locked or invalid data directory).
pub async fn run(
    listener: TcpListener,
    config: Config,
    shutdown: CancellationToken,
    started: impl FnOnce(&Started) + Send,
) -> Result<(), AppError> {
    serve_until(listener, config, FaultSwitch::default(), shutdown, started, AfterStop::LeaveToExit).await
}

/// What becomes of the read indexes once everything is on disk.
#[derive(Clone, Copy, PartialEq, Eq)]
enum AfterStop {
    /// Freed, as any value: a server inside a process that goes on (the tests' harness).
    Free,
    /// Left to the process's exit, which is next: the kernel takes the memory back at once, where freeing every
    /// account, session and membership one allocation at a time took 13.9 s at 10,000,000 accounts (longer than the
    /// start that built them), and a restart waits for it.
    LeaveToExit,
}

/// [`run`] with a [`FaultSwitch`] the caller keeps: the test seam for the store's failure path.
#[doc(hidden)]
pub async fn run_with_faults(
    listener: TcpListener,
    config: Config,
    faults: FaultSwitch,
    shutdown: CancellationToken,
    started: impl FnOnce(&Started) + Send,
) -> Result<(), AppError> {
    serve_until(listener, config, faults, shutdown, started, AfterStop::Free).await
}

async fn serve_until(
    listener: TcpListener,
    mut config: Config,
    faults: FaultSwitch,
    shutdown: CancellationToken,
    started: impl FnOnce(&Started) + Send,
    after: AfterStop,
) -> Result<(), AppError> {
    // What a reload compares the file with: the configuration as loaded, before the adjustments below.
    let loaded = config.clone();
    // The metrics listener's connections are open files too: set aside before the public port's share.
    let metrics_connections = config.metrics.listen.map_or(0, |_| config.metrics.max_connections);
    config.limits.max_connections = connection_budget(config.limits.max_connections, metrics_connections);
    // Bound before anything starts, so a taken metrics port stops start-up at once and says which.
    let metrics_listener =
        match config.metrics.listen {
            Some(addr) => Some(TcpListener::bind(addr).await.map_err(|e| {
                AppError::Startup(format!("cannot listen for metrics ([metrics] listen) on {addr}: {e}"))
            })?),
            None => None,
        };
    if let Some(addr) = config.metrics.listen
        && !addr.ip().is_loopback()
    {
        // The metrics listener has no authentication: anyone who reaches it reads the traffic figures.
        tracing::warn!(
            address = %addr,
            "the metrics listener is not on a loopback address; make sure only the monitoring network reaches it"
        );
    }
    let fatal = CancellationToken::new();
    let core = Core::start(&config, faults, fatal.clone()).await?;
    if let Some(admin) = &config.bootstrap_admin
        && let Err(e) = crate::bootstrap::bootstrap(&core, admin).await
    {
        // Release the data directory before reporting: the caller may well start again on it.
        core.stop().await;
        return Err(e);
    }
    let state = Arc::new(AppState::new(&config, core.accounts.clone()));
    tracing::info!(address = %display_addr(&listener), "serving");
    let stop = CancellationToken::new();
    let chores = Chores {
        state: Arc::clone(&state),
        sessions: core.sessions().clone(),
        users: core.users().clone(),
        audit: core.audit.clone(),
        retention: core.retention,
    };
    let housekeeping = tokio::spawn(chores.run(stop.clone()));
    if let Some(dir) = &config.backup.dir {
        let schedule = crate::ops::backup::Schedule {
            dir: dir.clone(),
            every: Duration::from_secs(config.backup.interval_secs),
            keep: config.backup.keep,
            key: config.data_key_path(),
        };
        tokio::spawn(crate::ops::backup::run_schedule(Arc::clone(&core.store), schedule, stop.clone()));
    }
    // `service-auth backup` and `service-auth reload` while this server runs (see ops::control), and SIGHUP.
    let (reloads, requests) = tokio::sync::mpsc::channel(4);
    let data_dir = config.data_dir.clone();
    tokio::spawn(crate::ops::control::serve(Arc::clone(&core.store), data_dir, reloads, stop.clone()));
    let reloader = crate::reload::Reloader::new(Arc::clone(&state), loaded);
    tokio::spawn(reload_on_request(reloader, requests, stop.clone()));
    if let Some(metrics_listener) = &metrics_listener {
        tracing::info!(address = %display_addr(metrics_listener), "metrics at /metrics");
    }
    let address = listener.local_addr().map_err(|e| AppError::Startup(format!("the listener has no address: {e}")))?;
    let has_admin = core.accounts.any_admin();
    let base = public_base(&config, address);
    core.set_issuer(&base);
    let setup_link = match has_admin {
        true => None,
        false => {
            let token = state.setup.issue(crate::accounts::SETUP_LINK_TTL).await;
            Some(format!("{base}/admin/setup?token={}", token.as_str()))
        }
    };
    let report = Started {
        address,
        metrics: metrics_listener.as_ref().and_then(|l| l.local_addr().ok()),
        has_admin,
        setup_link,
        console: format!("{base}{}", http::CONSOLE_PATH),
        account: format!("{base}{}", http::ACCOUNT_PATH),
    };
    if let Some(metrics_listener) = metrics_listener {
        let cap = config.metrics.max_connections;
        let (accounts, write_timeout) = (state.accounts.clone(), Duration::from_secs(config.limits.write_timeout_secs));
        tokio::spawn(http::serve_metrics(metrics_listener, cap, accounts, write_timeout, stop.clone()));
    }
    // Kept to the end, for `AfterStop`.
    let kept = Arc::clone(&state);
    let serving = tokio::spawn(http::serve(listener, state, stop.clone()));
    started(&report);
    tokio::select! {
        () = shutdown.cancelled() => {}
        () = fatal.cancelled() => {}
    }
    stop.cancel();
    let _ = serving.await;
    let _ = housekeeping.await;
    core.stop().await;
    if fatal.is_cancelled() {
        return Err(AppError::ActorFailed);
    }
    tracing::info!("stopped; everything acknowledged is on disk");
    if after == AfterStop::LeaveToExit {
        // The store is closed: nothing in the state has anything left to write.
        std::mem::forget(kept);
    }
    Ok(())
}

/// Reloads the settings on each request of the control socket (answered) and on each SIGHUP (logged), one at a
/// time, until `stop`.
async fn reload_on_request(
    reloader: crate::reload::Reloader,
    mut requests: tokio::sync::mpsc::Receiver<crate::ops::control::ReloadRequest>,
    stop: CancellationToken,
) {
    use tokio::signal::unix::{SignalKind, signal};
    // Without a SIGHUP handler the signal would end the process (its default): a server that cannot listen for it
    // says so, and `service-auth reload` still works.
    let mut hangups = match signal(SignalKind::hangup()) {
        Ok(hangups) => Some(hangups),
        Err(error) => {
            tracing::warn!(%error, "cannot listen for SIGHUP; use `service-auth reload`");
            None
        }
    };
    loop {
        let hangup = async {
            match hangups.as_mut() {
                Some(hangups) => hangups.recv().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            request = requests.recv() => {
                let Some(reply) = request else { return };
                let outcome = reloader.reload_logged().await;
                let _ = reply.send(outcome.map(|r| r.to_string()));
            }
            Some(()) = hangup => {
                let _ = reloader.reload_logged().await;
            }
            () = stop.cancelled() => return,
        }
    }
}

/// Where a browser reaches this server: `base_url`, else the address it listens on (loopback for an unspecified
/// one, which a browser cannot open).
fn public_base(config: &Config, address: SocketAddr) -> String {
    if let Some(base) = &config.base_url {
        return base.trim_end_matches('/').to_owned();
    }
    let mut address = address;
    if address.ip().is_unspecified() {
        address.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
    }
    format!("http://{address}")
}

/// A listener's address as `127.0.0.1:3000` (or `?` if the OS cannot say).
fn display_addr(listener: &TcpListener) -> String {
    listener.local_addr().map_or_else(|_| "?".to_owned(), |a| a.to_string())
}

/// Housekeeping, once a minute: forget the rate-limit state of addresses back to a full allowance, trim the
/// audit log to its retention, lift bans that have run out (they stopped counting when they did; this writes it
/// down and audits it), delete passkey ceremonies that expired unfinished, read the identity provider's signing keys
/// again (another node's rotation; those whose tokens have all expired are deleted), delete the authorization codes,
/// grants and sign-in flows past their end; every ten minutes remove expired sessions from memory and disk (a
/// session nobody presents again would otherwise stay forever).
struct Chores {
    state: Arc<AppState>,
    sessions: SessionsHandle,
    users: UsersHandle,
    audit: AuditLog,
    retention: Retention,
}

impl Chores {
    async fn run(self, stop: CancellationToken) {
        let mut tick = tokio::time::interval(Duration::from_secs(60));
        for round in 0u64.. {
            tokio::select! {
                _ = tick.tick() => {}
                () = stop.cancelled() => return,
            }
            // A round stuck on the database (a read on a connection frozen on the way) must not hold shutdown up:
            // every chore is idempotent and each of its writes atomic, so one abandoned midway is simply redone.
            tokio::select! {
                () = self.round(round) => {}
                () = stop.cancelled() => return,
            }
        }
    }

    async fn round(&self, round: u64) {
        self.state.rate_limits.load().sweep();
        match self.audit.prune(self.retention, Timestamp::now()).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(entries = n, "audit entries past their retention removed"),
            Err(_) => tracing::warn!("could not trim the audit log; will retry"),
        }
        match self.users.lift_expired_bans().await {
            Ok(0) => {}
            Ok(n) => tracing::info!(users = n, "bans that ran out lifted"),
            Err(_) => tracing::warn!("could not lift bans that ran out; will retry"),
        }
        match self.state.accounts.prune_passkey_ceremonies().await {
            Ok(0) => {}
            Ok(n) => tracing::debug!(ceremonies = n, "passkey ceremonies that expired unfinished removed"),
            Err(_) => tracing::warn!("could not remove expired passkey ceremonies; will retry"),
        }
        if let Err(error) = self.state.accounts.refresh_signing_keys().await {
            tracing::warn!(%error, "could not read the signing keys again; will retry");
        }
        match self.state.accounts.prune_expired_grants().await {
            Ok(0) => {}
            Ok(n) => {
                tracing::debug!(records = n, "authorization codes, grants and sign-in flows past their end removed")
            }
            Err(_) => tracing::warn!("could not remove expired authorization codes and grants; will retry"),
        }
        if round.is_multiple_of(10) {
            match self.sessions.sweep_expired().await {
                Ok(0) => {}
                Ok(n) => tracing::info!(sessions = n, "expired sessions removed"),
                Err(_) => tracing::warn!("could not remove expired sessions; will retry"),
            }
            // Expired API keys are refused already (KEY_EXPIRED); this removes them from memory and the store.
            match self.state.accounts.sweep_expired_api_keys().await {
                Ok(0) => {}
                Ok(n) => tracing::info!(api_keys = n, "expired API keys removed"),
                Err(_) => tracing::warn!("could not remove expired API keys; will retry"),
            }
        }
    }
}

/// Every connection is a file descriptor. At the open-file limit `accept` fails (and keeps failing) while clients
/// wait, so: raise the soft limit to the hard one, and keep the connection cap far enough below it for the store,
/// backups, logs, the listeners and the `reserved` connections of the metrics listener (capped on their own).
fn connection_budget(wanted: usize, reserved: usize) -> usize {
    let limit = match rlimit::increase_nofile_limit(u64::MAX) {
        Ok(limit) => limit,
        Err(error) => {
            tracing::warn!(%error, "cannot read or raise the open-file limit; max_connections is used as it is");
            return wanted;
        }
    };
    let reserved = u64::try_from(reserved).unwrap_or(u64::MAX);
    let budget = limit.saturating_sub(64.min(limit / 2)).saturating_sub(reserved).max(1);
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
