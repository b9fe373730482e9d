//! Upgrading and going back: a data directory (or a backup) written by a newer version is refused at start with
//! a message that says so, and is left for the newer version to open again.

use redb::{Database, ReadableTable, TableDefinition};

use super::harness::*;

/// What a future release would write: the store's layout stamp, one above this release's. (The test names the
/// storage engine to forge that file; the product does not.)
const META: TableDefinition<&str, u32> = TableDefinition::new("meta");

fn stamp(file: &std::path::Path, version: Option<u32>) -> u32 {
    let db = Database::create(file).unwrap();
    let tx = db.begin_write().unwrap();
    let found = {
        let mut meta = tx.open_table(META).unwrap();
        let current = meta.get("schema_version").unwrap().expect("a stamped store").value();
        if let Some(v) = version {
            meta.insert("schema_version", v).unwrap();
        }
        version.unwrap_or(current)
    };
    tx.commit().unwrap();
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_data_directory_from_a_newer_version_stops_start_up_with_a_clear_message() {
    let root = tempfile::tempdir().unwrap();
    // A real store with an account, then "upgraded" by a future release.
    let server = ChildServer::spawn(root.path(), BOOTSTRAP_ENV).await;
    server.new_user("alice").await;
    assert_eq!(server.terminate().code(), Some(0));
    let file = root.path().join("data").join("service-auth.redb");
    let current = stamp(&file, None);
    stamp(&file, Some(current + 1));

    for args in [&["serve"][..], &["export", "--out", "accounts.jsonl"], &["backup", "--out", "copy.redb"]] {
        let (status, out, err) = run_binary(root.path(), args, &[], "");
        assert!(!status.success(), "{args:?} on a newer store: {status:?} {out:?} {err:?}");
        let want = format!("data schema {}; this version reads schema {current} and older", current + 1);
        assert!(err.contains("written by a newer version of service-auth") && err.contains(&want), "{args:?}: {err}");
        assert!(err.contains("service-auth.redb"), "the file is named: {err}");
    }
    // Refused, not rewritten: the newer version would still find its own stamp.
    assert_eq!(stamp(&file, None), current + 1);

    // A backup taken by a newer version is refused by restore too, and the current store stays.
    let other = tempfile::tempdir().unwrap();
    drop(service_auth::store::Store::open(&other.path().join("data")).expect("a fresh store"));
    let (status, _, err) = run_binary(other.path(), &["restore", file.to_str().unwrap()], &[], "");
    assert!(!status.success() && err.contains("written by a newer version of service-auth"), "restore: {err}");
    let (status, _, err) = run_binary(other.path(), &["export", "--out", "accounts.jsonl"], &[], "");
    assert!(status.success(), "the current store still opens: {err}");
}
