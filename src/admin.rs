//! The first administrator: `service-auth admin create` and the `SERVICE_AUTH_BOOTSTRAP_ADMIN_*` variables.

use crate::config::Config;

/// What `admin create` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AdminCreated {
    /// A new account with role `admin`. `generated_password` is `Some` when no password was supplied: print it
    /// once, it is not stored anywhere in clear.
    Created { user_id: String, generated_password: Option<String> },
    /// An existing account with that e-mail now has role `admin` (its password is unchanged).
    Promoted { user_id: String },
}

#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    #[error("{0}")]
    Invalid(String),
}

/// Creates the account `email` with role `admin`, or promotes the existing account with that e-mail, working
/// directly on `config.data_dir`. Fails with `StoreError::Locked` while a server holds the directory.
pub async fn create_admin(
    config: &Config,
    email: &str,
    name: &str,
    password: Option<String>,
) -> Result<AdminCreated, AdminError> {
    let _ = (config, email, name, password);
    todo!("being written")
}
