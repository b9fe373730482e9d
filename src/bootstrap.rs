//! The first administrator: `service-auth admin create` and the `SERVICE_AUTH_BOOTSTRAP_ADMIN_*` variables.
//!
//! Neither has a default password: an auth service that ships `admin/admin` is compromised on its first day.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use tokio_util::sync::CancellationToken;

use crate::actors::users::{AdminVia, EnsureAdmin, EnsureAdminError};
use crate::config::{BootstrapAdmin, Config};
use crate::domain::{Email, Name, Password};
use crate::runtime::{AppError, Core};
use crate::store::FaultSwitch;
use crate::store::StoreError;

/// What `admin create` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AdminCreated {
    /// A new account with role `admin`. `generated_password` is `Some` when no password was supplied: print it
    /// once, it is not stored anywhere in clear.
    Created { user_id: String, generated_password: Option<String> },
    /// The existing account with that e-mail now has role `admin`, is not banned, has the given (or generated)
    /// password, and none of its sessions are left.
    Promoted { user_id: String, generated_password: Option<String> },
}

#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{0}")]
    Invalid(String),
    /// Promoting was not asked for. Without this refusal, whoever signed up with the operator's e-mail before the
    /// operator ran the command would become administrator, keeping their own password and session.
    #[error(
        "an account with the e-mail {0} already exists, and anyone could have created it by signing up; \
         refusing to make it an administrator. If it is yours, run again with --promote-existing \
         (SERVICE_AUTH_BOOTSTRAP_ADMIN_PROMOTE_EXISTING=true for the bootstrap variables): its password is \
         replaced by the one given and all its sessions end"
    )]
    Exists(String),
}

/// Creates the account `email` with role `admin`, working directly on `config.data_dir`. An existing account
/// with that e-mail is refused unless `promote_existing`; then it is promoted, gets the password, and its
/// sessions end. Fails with `StoreError::Locked` while a server holds the directory.
pub async fn create_admin(
    config: &Config,
    email: &str,
    name: &str,
    password: Option<String>,
    promote_existing: bool,
) -> Result<AdminCreated, AdminError> {
    let (password, generated) = match password {
        Some(p) => (p, false),
        None => (generate_password(), true),
    };
    let core = Core::start(config, FaultSwitch::default(), CancellationToken::new()).await.map_err(|e| match e {
        AppError::Store(e) => AdminError::Store(e),
        other => AdminError::Invalid(other.to_string()),
    })?;
    let outcome = ensure(&core, email, name, password.clone(), promote_existing).await;
    core.stop().await;
    let generated_password = generated.then_some(password);
    Ok(match outcome? {
        EnsureAdmin::Created(id) => AdminCreated::Created { user_id: id.to_string(), generated_password },
        EnsureAdmin::Promoted(id) => AdminCreated::Promoted { user_id: id.to_string(), generated_password },
    })
}

/// At `serve`: when no account has role `admin` yet, creates the configured one (or, only when told to, promotes
/// the existing account with that e-mail). When an administrator exists it does nothing, so changing the
/// variables later cannot reset an administrator's password.
pub(crate) async fn bootstrap(core: &Core, admin: &BootstrapAdmin) -> Result<(), AppError> {
    if core.accounts.any_admin() {
        tracing::info!("an administrator exists; the bootstrap variables are ignored");
        return Ok(());
    }
    match ensure(core, &admin.email, &admin.name, admin.password.clone(), admin.promote_existing).await {
        Ok(EnsureAdmin::Created(id)) => tracing::info!(user = %id, "bootstrap administrator created"),
        Ok(EnsureAdmin::Promoted(id)) => tracing::info!(user = %id, "existing account promoted to administrator"),
        Err(e) => return Err(AppError::Startup(format!("bootstrap administrator: {e}"))),
    }
    Ok(())
}

async fn ensure(
    core: &Core,
    email: &str,
    name: &str,
    password: String,
    promote_existing: bool,
) -> Result<EnsureAdmin, AdminError> {
    let email = Email::parse(email).map_err(|_| AdminError::Invalid(format!("invalid e-mail address `{email}`")))?;
    let name = Name::parse(name).map_err(|e| AdminError::Invalid(format!("name {e}")))?;
    let password = Password::new(&password).map_err(|e| AdminError::Invalid(format!("{e}: 8 to 128 characters")))?;
    let hash = core.accounts.hash(password).await.map_err(|e| AdminError::Invalid(e.to_string()))?;
    let outcome = core.users().ensure_admin(name, email.clone(), hash, promote_existing, AdminVia::CommandLine).await;
    outcome.map_err(|e| match e {
        EnsureAdminError::Exists => AdminError::Exists(email.as_str().to_owned()),
        EnsureAdminError::Unavailable(_) => AdminError::Store(StoreError::Io("the store refused the write".into())),
    })
}

/// 144 random bits as 24 URL-safe characters: strong, and easy to paste.
fn generate_password() -> String {
    let mut bytes = [0u8; 18];
    getrandom::fill(&mut bytes).expect("the OS random number generator failed");
    URL_SAFE_NO_PAD.encode(bytes)
}
