//! Consistent snapshots of the store: scheduled by the running server, or one-off for a stopped one.
//! (Being written.)

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::store::Store;

/// Where and how often the running server writes snapshots.
#[derive(Debug, Clone)]
pub struct Schedule {
    pub dir: PathBuf,
    pub every: Duration,
    pub keep: usize,
}

/// Writes a snapshot every `schedule.every` until `stop`.
pub async fn run_schedule(store: Arc<Store>, schedule: Schedule, stop: CancellationToken) {
    let _ = (store, schedule);
    stop.cancelled().await;
}

/// Writes a consistent snapshot of a stopped server's data directory to `out`.
pub fn backup(config: &crate::config::Config, out: &std::path::Path) -> Result<String, super::OpsError> {
    let _ = (config, out);
    Err(super::OpsError::Invalid("backup is not implemented yet".into()))
}

/// Puts a snapshot back as `config.data_dir`'s store (no server may hold the directory).
pub fn restore(config: &crate::config::Config, file: &std::path::Path) -> Result<String, super::OpsError> {
    let _ = (config, file);
    Err(super::OpsError::Invalid("restore is not implemented yet".into()))
}
