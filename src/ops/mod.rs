//! Operations on a data directory outside the request path: seeding, backups, export and import.

pub mod backup;
pub mod export;
pub mod seed;

/// Why an operation failed; messages are meant for a person at a terminal.
#[derive(Debug, thiserror::Error)]
pub enum OpsError {
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    #[error("{0}")]
    Io(String),
    #[error("{0}")]
    Invalid(String),
}
