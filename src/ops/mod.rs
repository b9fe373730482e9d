//! Operations on a data directory outside the request path: seeding, backups, export and import, and the import
//! of a better-auth database.

pub mod backup;
pub mod better_auth;
pub mod control;
pub mod export;
pub mod migrate_store;
pub mod seed;

/// Creates `path` for data that includes password hashes or live tokens: readable by its owner only (0600).
fn private_file(path: &std::path::Path) -> Result<std::fs::File, OpsError> {
    crate::store::create_private(path).map_err(|e| OpsError::Io(format!("{}: {e}", path.display())))
}

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

/// Opens the store of a data directory that no server holds; a running server gets a message saying so.
fn open_stopped(config: &crate::config::Config) -> Result<crate::store::Store, OpsError> {
    open_stopped_with_faults(config, crate::store::FaultSwitch::default())
}

/// [`open_stopped`] with the store's test seam. These commands work on the embedded file: with
/// `[store] backend = "postgres"` they are refused rather than silently working on a directory nobody serves.
fn open_stopped_with_faults(
    config: &crate::config::Config,
    faults: crate::store::FaultSwitch,
) -> Result<crate::store::Store, OpsError> {
    refuse_postgres(config)?;
    open_embedded_stopped(config, faults)
}

/// These commands work on the embedded file: with `[store] backend = "postgres"` they are refused rather than
/// silently working on a directory nobody serves.
fn refuse_postgres(config: &crate::config::Config) -> Result<(), OpsError> {
    if config.store.backend == crate::config::StoreBackend::Postgres {
        return Err(OpsError::Invalid(
            "this command works on the embedded store, and [store] backend is \"postgres\": use PostgreSQL's own \
             tools (pg_dump) for backups, or `migrate-store --to embedded` to bring the data into a directory"
                .into(),
        ));
    }
    Ok(())
}

/// The embedded store of `config.data_dir`, whatever the configured backend (`migrate-store` moves it).
fn open_embedded_stopped(
    config: &crate::config::Config,
    faults: crate::store::FaultSwitch,
) -> Result<crate::store::Store, OpsError> {
    crate::store::Store::open_with_faults(&config.data_dir, faults).map_err(|e| match e {
        crate::store::StoreError::Locked(holder) => {
            OpsError::Invalid(format!("{holder}: stop it first (`service-auth backup` works while it runs)",))
        }
        other => other.into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// With PostgreSQL configured, a command on the embedded file would work on a directory nobody serves.
    #[test]
    fn embedded_commands_are_refused_when_the_store_is_postgres() {
        let dir = tempfile::tempdir().unwrap();
        let mut config = crate::config::Config { data_dir: dir.path().to_path_buf(), ..Default::default() };
        config.store.backend = crate::config::StoreBackend::Postgres;
        config.store.url = Some("postgres://db.invalid/auth".into());
        let refused = backup::backup(&config, &dir.path().join("b.redb")).unwrap_err().to_string();
        assert!(refused.contains("pg_dump") && refused.contains("migrate-store"), "{refused}");
        assert!(!dir.path().join("service-auth.redb").exists(), "the embedded store was created anyway");
    }
}
