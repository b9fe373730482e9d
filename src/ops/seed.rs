//! Filling a data directory with many users, sessions and organizations, fast. (Being written.)

use std::path::PathBuf;

use super::OpsError;
use crate::config::Config;

/// What `service-auth seed` creates.
#[derive(Debug, Clone, Default)]
pub struct SeedArgs {
    pub users: usize,
    pub sessions: usize,
    pub orgs: usize,
    /// Where to write the session tokens, one per line (load tests need them; the store keeps only hashes).
    pub tokens_out: Option<PathBuf>,
}

/// Seeds `config.data_dir` (which no server may hold). Returns a report for the terminal.
pub async fn seed(config: &Config, args: SeedArgs) -> Result<String, OpsError> {
    let _ = (config, args);
    Err(OpsError::Invalid("seed is not implemented yet".into()))
}
