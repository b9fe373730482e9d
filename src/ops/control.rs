//! The running server's control socket: a Unix socket in the data directory through which `service-auth backup`
//! gets a snapshot from a server that holds the store, without stopping it, and `service-auth reload` has it read
//! `config.toml` again.
//!
//! The socket is `<data_dir>/control/socket`, in a folder only the server's user can enter (0700): whoever can
//! reach it could as well read the store file beside it, so the file system is the whole of the access check, as
//! for the store itself. One command, one line. `backup`: the answer is `ok <length>` and that many bytes (a
//! complete store file written from one read transaction, as the scheduled backups are), or `error <reason>`.
//! `reload`: `ok <what was applied>` or `error <why nothing changed>`, one line, once the reload is done (its audit
//! entry durable). On PostgreSQL the data directory holds no store: the socket serves `reload` only, and a node
//! whose data directory another running node already serves leaves the socket to it.
//! The snapshot is staged in the control folder and unlinked before it is sent, so nothing stays behind.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::OpsError;
use crate::store::Store;

/// The folder holding the socket, inside the data directory.
const FOLDER: &str = "control";
/// How long a client has to send its command line.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(10);

/// How the socket asks the server to reload its settings: the reply is what was applied, or why nothing changed.
pub type ReloadRequest = tokio::sync::oneshot::Sender<Result<String, String>>;
pub type Reloads = tokio::sync::mpsc::Sender<ReloadRequest>;

/// Where the server of `data_dir` listens.
pub fn socket_path(data_dir: &Path) -> PathBuf {
    data_dir.join(FOLDER).join("socket")
}

/// Serves the control socket of `data_dir` until `stop`. A socket that cannot be made (a path too long for a
/// Unix socket, say) is logged and left out: the server runs on, and `backup` then says the server does not answer.
pub async fn serve(store: Arc<Store>, data_dir: PathBuf, reloads: Reloads, stop: CancellationToken) {
    let path = socket_path(&data_dir);
    if store.postgres().is_some() && UnixStream::connect(&path).is_ok() {
        // Without the embedded store's lock, two nodes may share a folder: the first keeps its socket.
        tracing::warn!(path = %path.display(), "another running server answers on this control socket; `service-auth reload` reaches that one, send this one SIGHUP");
        return;
    }
    let listener = match bind(&path) {
        Ok(listener) => listener,
        Err(error) => {
            tracing::warn!(%error, path = %path.display(), "no control socket: `service-auth backup` needs the server stopped");
            return;
        }
    };
    // One snapshot at a time: a second `backup` waits for the first rather than doubling the disk's work.
    let one_at_a_time = Arc::new(std::sync::Mutex::new(()));
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => accepted,
            () = stop.cancelled() => break,
        };
        let Ok((stream, _)) = stream else { continue };
        let Ok(stream) = stream.into_std() else { continue };
        let folder = data_dir.join(FOLDER);
        let (store, lock, reloads) = (Arc::clone(&store), Arc::clone(&one_at_a_time), reloads.clone());
        tokio::task::spawn_blocking(move || {
            let _turn = lock.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if let Err(error) = answer(stream, &store, &folder, &reloads) {
                tracing::warn!(%error, "control socket: the client went away");
            }
        });
    }
    let _ = std::fs::remove_file(&path);
}

/// Binds the socket in a fresh 0700 folder (a stale socket of a previous run is replaced: this process holds the
/// data directory's lock, so no other server uses it).
fn bind(path: &Path) -> std::io::Result<tokio::net::UnixListener> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    let folder = path.parent().expect("the socket is in a folder");
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(folder)?;
    std::fs::set_permissions(folder, std::fs::Permissions::from_mode(0o700))?;
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    tokio::net::UnixListener::bind(path)
}

/// Reads one command and answers it.
fn answer(mut stream: UnixStream, store: &Store, folder: &Path, reloads: &Reloads) -> std::io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(COMMAND_TIMEOUT))?;
    let mut line = String::new();
    BufReader::new((&stream).take(64)).read_line(&mut line)?;
    match line.trim_end() {
        "backup" if store.postgres().is_some() => {
            return writeln!(stream, "error the store is on PostgreSQL: back the database up with its own tools");
        }
        "backup" => {}
        "reload" => {
            let (reply, answer) = tokio::sync::oneshot::channel();
            let outcome = match reloads.blocking_send(reply) {
                Ok(()) => answer.blocking_recv().unwrap_or_else(|_| Err("the server is stopping".into())),
                Err(_) => Err("the server is stopping".into()),
            };
            return match outcome {
                Ok(summary) => writeln!(stream, "ok {}", summary.replace('\n', " ")),
                Err(why) => writeln!(stream, "error {}", why.replace('\n', " ")),
            };
        }
        _ => return writeln!(stream, "error unknown command (this server knows: backup, reload)"),
    }
    let started = Instant::now();
    let staged = folder.join(format!("backup-{}.redb", uuid::Uuid::now_v7()));
    let snapshot = store.snapshot_to(&staged).and_then(|()| {
        let file = std::fs::File::open(&staged).map_err(|e| crate::store::StoreError::Io(e.to_string()));
        let _ = std::fs::remove_file(&staged);
        file
    });
    let mut file = match snapshot {
        Ok(file) => file,
        Err(error) => {
            let _ = std::fs::remove_file(&staged);
            tracing::error!(%error, "backup through the control socket failed");
            return writeln!(stream, "error {}", error.to_string().replace('\n', " "));
        }
    };
    let length = file.metadata()?.len();
    writeln!(stream, "ok {length}")?;
    std::io::copy(&mut file, &mut stream)?;
    stream.flush()?;
    tracing::info!(bytes = length, took = ?started.elapsed(), "backup sent through the control socket");
    Ok(())
}

/// Asks the server holding `data_dir` for a snapshot and writes it to `out` (readable by its owner only, whole
/// or not at all: staged beside `out`, made durable, renamed). Returns the snapshot's size.
pub fn backup_from_server(data_dir: &Path, out: &Path) -> Result<u64, OpsError> {
    let path = socket_path(data_dir);
    let mut stream = UnixStream::connect(&path).map_err(|e| {
        OpsError::Io(format!(
            "a server holds {} but its control socket {} does not answer ({e}); stop the server and run backup \
             again, or let it write scheduled backups ([backup] dir in config.toml)",
            data_dir.display(),
            path.display()
        ))
    })?;
    let io = |e: std::io::Error| OpsError::Io(format!("reading the backup from the server: {e}"));
    stream.write_all(b"backup\n").map_err(io)?;
    let mut reader = BufReader::new(stream);
    let mut header = String::new();
    reader.read_line(&mut header).map_err(io)?;
    let header = header.trim_end();
    let length: u64 = match header.split_once(' ') {
        Some(("ok", n)) => n.parse().map_err(|_| OpsError::Io(format!("the server answered {header:?}")))?,
        Some(("error", reason)) => return Err(OpsError::Io(format!("the server could not write a backup: {reason}"))),
        _ => return Err(OpsError::Io(format!("the server answered {header:?}"))),
    };
    let staged = staging_name(out);
    let written = (|| {
        let mut file = super::private_file(&staged)?;
        let copied = std::io::copy(&mut reader.by_ref().take(length), &mut file).map_err(io)?;
        if copied != length {
            return Err(OpsError::Io(format!("the server sent {copied} of {length} bytes")));
        }
        file.sync_all().map_err(io)?;
        std::fs::rename(&staged, out).map_err(|e| OpsError::Io(format!("{}: {e}", out.display())))?;
        if let Some(dir) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::File::open(dir).and_then(|d| d.sync_all()).map_err(io)?;
        }
        Ok(length)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&staged);
    }
    written
}

/// Asks the server holding `data_dir` to read its configuration file again. `Ok`: what it applied; `Err`: why
/// nothing changed, or that no server answers.
pub fn reload_server(data_dir: &Path) -> Result<String, ReloadFailed> {
    let path = socket_path(data_dir);
    let mut stream = UnixStream::connect(&path).map_err(|e| {
        ReloadFailed::NoServer(format!(
            "no server answers on {} ({e}): is it running with this data directory? (or send it SIGHUP)",
            path.display()
        ))
    })?;
    let io = |e: std::io::Error| ReloadFailed::NoServer(format!("talking to the server: {e}"));
    stream.write_all(b"reload\n").map_err(io)?;
    let mut line = String::new();
    BufReader::new(stream).read_line(&mut line).map_err(io)?;
    match line.trim_end().split_once(' ') {
        Some(("ok", summary)) => Ok(summary.to_owned()),
        Some(("error", why)) => Err(ReloadFailed::Refused(why.to_owned())),
        _ => Err(ReloadFailed::NoServer(format!("the server answered {:?}", line.trim_end()))),
    }
}

/// Why `service-auth reload` changed nothing.
#[derive(Debug, thiserror::Error)]
pub enum ReloadFailed {
    /// The server read the file and refused it (or could not record the reload): it runs on as before.
    #[error("{0}")]
    Refused(String),
    #[error("{0}")]
    NoServer(String),
}

/// `out` with `.partial` added: where the file is written before it is renamed into place.
fn staging_name(out: &Path) -> PathBuf {
    let mut name = out.file_name().unwrap_or_default().to_os_string();
    name.push(".partial");
    out.with_file_name(name)
}
