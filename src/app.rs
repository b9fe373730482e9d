//! Wiring: open the store, start the actors, bootstrap the first admin, serve HTTP until shut down.

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::config::Config;

#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    #[error("{0}")]
    Startup(String),
}

/// Runs the server on `listener` until `shutdown` is cancelled, then stops accepting, finishes the requests in
/// flight, makes everything durable and returns.
pub async fn run(listener: TcpListener, config: Config, shutdown: CancellationToken) -> Result<(), AppError> {
    let _ = (listener, config, shutdown);
    todo!("being written")
}
