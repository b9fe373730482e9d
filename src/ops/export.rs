//! Export and import of users, organizations and memberships as JSON Lines. (Being written.)

use std::path::Path;

use super::OpsError;
use crate::config::Config;

/// Writes every organization and user (with membership; password hashes in PHC form, no session tokens) as JSON
/// Lines to `out`, or to standard output. Returns a report for the terminal.
pub fn export(config: &Config, out: Option<&Path>) -> Result<String, OpsError> {
    let _ = (config, out);
    Err(OpsError::Invalid("export is not implemented yet".into()))
}

/// Reads a file written by [`export`] into `config.data_dir`, refusing duplicates with a report.
pub fn import(config: &Config, input: &Path) -> Result<String, OpsError> {
    let _ = (config, input);
    Err(OpsError::Invalid("import is not implemented yet".into()))
}
