//! Consistent snapshots of the store: scheduled by the running server, or one-off for a stopped one.
//!
//! A snapshot is a complete redb file written from one read transaction, so it is consistent (every table as of
//! one commit) and the server keeps committing while it is written. Restoring puts such a file back as the data
//! directory's store.
//!
//! The data key (`data_key.rs`) goes with every backup, as `<backup>.key` beside it: the secrets sealed in the
//! store (TOTP secrets) open only with it, so a backup without it would restore accounts whose authenticators no
//! longer work. Restoring puts the key back with the store.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::{OpsError, open_stopped};
use crate::actors::load;
use crate::config::Config;
use crate::data_key;
use crate::domain::RoleSet;
use crate::store::Store;

const PREFIX: &str = "service-auth-";
const SUFFIX: &str = ".redb";

/// Where and how often the running server writes snapshots.
#[derive(Debug, Clone)]
pub struct Schedule {
    pub dir: PathBuf,
    pub every: Duration,
    pub keep: usize,
    /// The data key's file, copied beside each snapshot.
    pub key: PathBuf,
}

/// Writes a snapshot every `schedule.every` until `stop`, keeping the newest `schedule.keep`.
pub async fn run_schedule(store: Arc<Store>, schedule: Schedule, stop: CancellationToken) {
    let mut tick = tokio::time::interval(schedule.every);
    tick.tick().await; // the first tick is immediate; the first snapshot comes one interval after start
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = stop.cancelled() => return,
        }
        let (store, schedule) = (Arc::clone(&store), schedule.clone());
        let outcome = tokio::task::spawn_blocking(move || scheduled_snapshot(&store, &schedule)).await;
        match outcome {
            Ok(Ok((path, took))) => tracing::info!(path = %path.display(), ?took, "backup written"),
            Ok(Err(e)) => tracing::error!(error = %e, "scheduled backup failed"),
            Err(e) => tracing::error!(error = %e, "scheduled backup panicked"),
        }
    }
}

fn scheduled_snapshot(store: &Store, schedule: &Schedule) -> Result<(PathBuf, Duration), OpsError> {
    std::fs::create_dir_all(&schedule.dir).map_err(|e| OpsError::Io(format!("{}: {e}", schedule.dir.display())))?;
    // UTC timestamps sort lexically, so the newest are the last names.
    let name = format!("{PREFIX}{}{SUFFIX}", chrono::Utc::now().format("%Y%m%dT%H%M%S%.3fZ"));
    let path = schedule.dir.join(name);
    let started = Instant::now();
    store.snapshot_to(&path)?;
    data_key::copy_file(&schedule.key, &data_key::beside(&path))
        .map_err(|e| OpsError::Io(format!("cannot copy the data key beside the backup: {e}")))?;
    let took = started.elapsed();
    prune(&schedule.dir, schedule.keep)?;
    Ok((path, took))
}

/// The scheduled snapshots in `dir`, oldest first (empty if `dir` cannot be read).
pub fn snapshots(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut snapshots: Vec<PathBuf> = entries
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with(PREFIX) && n.ends_with(SUFFIX))
        })
        .collect();
    snapshots.sort();
    snapshots
}

/// Deletes all but the newest `keep` snapshots in `dir`.
fn prune(dir: &Path, keep: usize) -> Result<(), OpsError> {
    std::fs::read_dir(dir).map_err(|e| OpsError::Io(e.to_string()))?;
    let snapshots = snapshots(dir);
    let excess = snapshots.len().saturating_sub(keep);
    for old in &snapshots[..excess] {
        std::fs::remove_file(old).map_err(|e| OpsError::Io(format!("{}: {e}", old.display())))?;
        match std::fs::remove_file(data_key::beside(old)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(OpsError::Io(format!("{}: {e}", data_key::beside(old).display())));
            }
            _ => {}
        }
    }
    Ok(())
}

/// Writes a consistent snapshot of the data directory's store to `out`: directly when no server holds the
/// directory, else through the running server's control socket (see [`super::control`]), which writes it from
/// one read transaction while it keeps serving. The data key is copied beside it, to `out.key`.
pub fn backup(config: &Config, out: &Path) -> Result<String, OpsError> {
    let folder = out.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    if !folder.is_dir() {
        return Err(OpsError::Io(format!(
            "cannot write the backup to {}: the folder {} does not exist (create it first)",
            out.display(),
            folder.display()
        )));
    }
    let started = Instant::now();
    let by_server = match open_unless_served(config)? {
        Some(store) => {
            // The OS error alone ("No such file or directory") does not say which path.
            store
                .snapshot_to(out)
                .map_err(|e| OpsError::Io(format!("cannot write the backup to {}: {e}", out.display())))?;
            String::new()
        }
        None => {
            let bytes = super::control::backup_from_server(&config.data_dir, out)?;
            let pid = holder(&config.data_dir).map(|pid| format!(" (PID {pid})")).unwrap_or_default();
            format!(" by the running server{pid} ({bytes} bytes)")
        }
    };
    let key = data_key::beside(out);
    let with_key = data_key::copy_file(&config.data_key_path(), &key)
        .map_err(|e| OpsError::Io(format!("cannot copy the data key to {}: {e}", key.display())))?;
    let key_note = if with_key { format!(", its data key to {}", key.display()) } else { String::new() };
    Ok(format!("backup written to {}{key_note} in {:.1?}{by_server}", out.display(), started.elapsed()))
}

/// The store of a data directory no server holds; `None` when one does.
fn open_unless_served(config: &Config) -> Result<Option<Store>, OpsError> {
    super::refuse_postgres(config)?;
    match Store::open(&config.data_dir) {
        Ok(store) => Ok(Some(store)),
        Err(crate::store::StoreError::Locked(_)) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// The PID of the process holding `data_dir`, as it wrote it.
fn holder(data_dir: &Path) -> Option<u32> {
    crate::store::lock_holder(data_dir)
}

/// Puts a snapshot back as `config.data_dir`'s store (no server may hold the directory). The file first passes
/// the checks a server runs at start-up (schema, every record decodes, unique e-mails and slugs): a backup the
/// server would refuse to start on is refused here, before anything is replaced. The replacement is atomic, and
/// the store it replaces is kept aside in the data directory, named in the report.
pub fn restore(config: &Config, file: &Path) -> Result<String, OpsError> {
    let roles = RoleSet::new(&config.roles.allowed, &config.roles.default);
    let (users, orgs, sessions) = Store::check_file(file, |store| {
        let indexes = load::build(store, &roles)?.indexes;
        Ok((indexes.users.len(), indexes.orgs.list().len(), indexes.sessions.len()))
    })
    .map_err(|e| OpsError::Invalid(format!("{} is not a usable backup: {e}", file.display())))?;
    let key = data_key::beside(file);
    if key.exists() {
        data_key::DataKey::load_file(&key)
            .map_err(|e| OpsError::Invalid(format!("{} is not a usable data key: {e}", key.display())))?;
    }
    drop(open_stopped(config)?); // a clear message when a server runs
    let aside = Store::replace_file(&config.data_dir, file)?;
    let kept = match aside {
        Some(aside) => format!("; the store it replaced is kept as {} (delete it once you are sure)", aside.display()),
        None => String::new(),
    };
    // The key after the store: a crash between the two leaves the new store with the old key, which the report
    // below told nobody about yet; running restore again finishes it.
    let key_note = if data_key::copy_file(&key, &config.data_key_path())
        .map_err(|e| OpsError::Io(format!("cannot put the data key back: {e}")))?
    {
        format!("; its data key into {}", config.data_key_path().display())
    } else {
        format!(
            "; no data key beside the backup ({}), so {} is kept: secrets sealed with another key will not open",
            key.display(),
            config.data_key_path().display()
        )
    };
    Ok(format!(
        "restored {} into {}: {users} users, {orgs} organizations, {sessions} sessions{kept}{key_note}",
        file.display(),
        config.data_dir.display()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{OrgRecordV1, StoreOp};

    fn org(n: u8) -> StoreOp {
        StoreOp::PutOrg(
            OrgRecordV1 { id: [n; 16], name: format!("o{n}"), slug: format!("o{n}"), created_at_ms: 0 }.into(),
        )
    }

    #[test]
    fn backup_wipe_restore_gives_the_same_data() {
        let dir = tempfile::tempdir().unwrap();
        let config = Config { data_dir: dir.path().join("data"), ..Config::default() };
        Store::open(&config.data_dir).unwrap().commit(&[org(1), org(2)]).unwrap();
        let file = dir.path().join("backup.redb");
        backup(&config, &file).unwrap();
        std::fs::remove_dir_all(&config.data_dir).unwrap();
        std::fs::create_dir_all(&config.data_dir).unwrap();
        restore(&config, &file).unwrap();
        let orgs = Store::open(&config.data_dir).unwrap().load().unwrap().orgs;
        assert_eq!(orgs.iter().map(|o| o.id[0]).collect::<Vec<_>>(), vec![1, 2]);
    }

    /// The key travels with the backup: a wiped data directory restored from it opens what the old key sealed.
    #[test]
    fn backup_and_restore_carry_the_data_key() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let config = Config { data_dir: dir.path().join("data"), ..Config::default() };
        Store::open(&config.data_dir).unwrap().commit(&[org(1)]).unwrap();
        let sealed = data_key::DataKey::load_or_create(&config.data_dir).unwrap().seal(b"totp secret", b"ctx");
        let file = dir.path().join("backup.redb");
        assert!(backup(&config, &file).unwrap().contains("backup.redb.key"));
        let key_copy = dir.path().join("backup.redb.key");
        assert_eq!(std::fs::metadata(&key_copy).unwrap().permissions().mode() & 0o777, 0o600);
        std::fs::remove_dir_all(&config.data_dir).unwrap();
        std::fs::create_dir_all(&config.data_dir).unwrap();
        assert!(restore(&config, &file).unwrap().contains("its data key into"));
        let key = data_key::DataKey::load_or_create(&config.data_dir).unwrap();
        assert_eq!(key.open(&sealed, b"ctx").unwrap(), b"totp secret");
        // Without the key beside it, a restore keeps the current key and says so.
        std::fs::remove_file(&key_copy).unwrap();
        assert!(restore(&config, &file).unwrap().contains("no data key beside the backup"));
        assert_eq!(key.open(&sealed, b"ctx").unwrap(), b"totp secret");
    }

    #[test]
    fn backup_and_restore_refuse_a_running_server_and_a_bad_file() {
        let dir = tempfile::tempdir().unwrap();
        let config = Config { data_dir: dir.path().join("data"), ..Config::default() };
        let held = Store::open(&config.data_dir).unwrap();
        let refused = backup(&config, &dir.path().join("b.redb")).unwrap_err().to_string();
        assert!(refused.contains("control socket") && refused.contains("does not answer"), "{refused}");
        drop(held);
        let junk = dir.path().join("junk.redb");
        std::fs::write(&junk, b"not a database").unwrap();
        assert!(restore(&config, &junk).unwrap_err().to_string().contains("not a usable backup"));
    }

    /// Before: restore checked only that records decode, so it put back a store the server then refused to start
    /// on (two accounts with one e-mail, as a double `seed` made).
    #[test]
    fn restore_runs_the_start_up_checks_before_replacing_anything() {
        use crate::store::UserRecord;
        let dir = tempfile::tempdir().unwrap();
        let user = |id: u8| {
            StoreOp::PutUser(UserRecord {
                id: [id; 16],
                name: "Twin".into(),
                email: "twin@example.com".into(),
                image: None,
                role: "user".into(),
                banned: false,
                ban_reason: None,
                organization_id: None,
                password_hash: "$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHQ$aGFzaGhhc2hoYXNo".into(),
                created_at_ms: 0,
                updated_at_ms: 0,
                email_verified: false,
                ban_expires_ms: None,
                two_factor: None,
                username: None,
                display_username: None,
            })
        };
        let broken = Config { data_dir: dir.path().join("broken"), ..Config::default() };
        Store::open(&broken.data_dir).unwrap().commit(&[user(1), user(2)]).unwrap();
        let file = dir.path().join("broken.redb");
        backup(&broken, &file).unwrap();
        let config = Config { data_dir: dir.path().join("data"), ..Config::default() };
        Store::open(&config.data_dir).unwrap().commit(&[org(3)]).unwrap();
        let refused = restore(&config, &file).unwrap_err().to_string();
        assert!(refused.contains("not a usable backup") && refused.contains("e-mail"), "{refused}");
        let kept = Store::open(&config.data_dir).unwrap().load().unwrap();
        assert_eq!((kept.orgs.len(), kept.users.len()), (1, 0), "the current store was touched");
    }

    #[test]
    fn backups_are_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let config = Config { data_dir: dir.path().join("data"), ..Config::default() };
        Store::open(&config.data_dir).unwrap().commit(&[org(1)]).unwrap();
        let file = dir.path().join("b.redb");
        backup(&config, &file).unwrap();
        assert_eq!(std::fs::metadata(&file).unwrap().permissions().mode() & 0o777, 0o600);
        let store = Store::open(&dir.path().join("other")).unwrap();
        data_key::DataKey::load_or_create(dir.path()).unwrap();
        let key = dir.path().join(data_key::FILE_NAME);
        let schedule = Schedule { dir: dir.path().join("backups"), every: Duration::from_secs(1), keep: 2, key };
        let (path, _) = scheduled_snapshot(&store, &schedule).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        let key = data_key::beside(&path);
        assert_eq!(std::fs::metadata(&key).unwrap().permissions().mode() & 0o777, 0o600);
    }

    #[test]
    fn scheduled_snapshots_keep_the_newest() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("data")).unwrap();
        store.commit(&[org(7)]).unwrap();
        data_key::DataKey::load_or_create(dir.path()).unwrap();
        let key = dir.path().join(data_key::FILE_NAME);
        let schedule = Schedule { dir: dir.path().join("backups"), every: Duration::from_secs(1), keep: 2, key };
        for _ in 0..4 {
            scheduled_snapshot(&store, &schedule).unwrap();
            std::thread::sleep(Duration::from_millis(5));
        }
        let left: Vec<_> = std::fs::read_dir(&schedule.dir).unwrap().collect();
        assert_eq!(left.len(), 4, "two snapshots, each with its key");
        assert_eq!(snapshots(&schedule.dir).len(), 2);
    }
}
