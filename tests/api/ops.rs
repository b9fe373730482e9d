//! Operations on a data directory through the binary: backup and restore, export and import.

use serde_json::json;

use super::harness::*;

/// Fills the embedded store of `data` (these commands work on the embedded file; one node, in two-node runs too).
async fn populate(data: &std::path::Path) -> (Vec<serde_json::Value>, TestUser) {
    let s = TestServer::start_embedded(test_config(data)).await;
    let admin = s.admin_session().await;
    let u = s.new_user("alice").await;
    let org = s.new_org(&admin, "St Mary", "st-mary").await;
    s.patch_ok(&admin, &json!({"userId": u.id, "role": "qa_manager", "organizationId": org["id"]})).await;
    let users = s.users(&admin).await;
    s.stop().await;
    (users, u)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restored_backup_serves_the_same_users_and_sessions() {
    let root = tempfile::tempdir().unwrap();
    let data = root.path().join("data");
    let (before, alice) = populate(&data).await;
    let (status, _, err) = run_binary(root.path(), &["backup", "--out", "backup.redb"], &[], "");
    assert!(status.success(), "backup: {err}");
    std::fs::remove_dir_all(&data).unwrap();
    let (status, _, err) = run_binary(root.path(), &["restore", "backup.redb"], &[], "");
    assert!(status.success(), "restore: {err}");
    assert!(err.contains("2 users, 1 organizations"), "{err}");

    // The embedded store's own behaviour (its file on disk): one node on it, also in two-node runs.
    let s = TestServer::start_embedded(test_config(&data)).await;
    let admin = s.admin_session().await;
    assert_eq!(s.users(&admin).await, before);
    assert_eq!(s.orgs(&admin).await.len(), 1);
    assert!(s.session(&alice.cookie).await.is_object(), "sessions are part of the backup");
    s.login(&alice.email, PASSWORD).await;
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn export_then_import_into_a_fresh_directory_keeps_accounts_and_memberships() {
    let root = tempfile::tempdir().unwrap();
    let (before, alice) = populate(&root.path().join("data")).await;
    let (status, _, err) = run_binary(root.path(), &["export", "--out", "all.jsonl"], &[], "");
    assert!(status.success(), "export: {err}");
    let text = std::fs::read_to_string(root.path().join("all.jsonl")).unwrap();
    assert!(!text.contains(&alice.cookie), "an export carries no session token");

    let fresh = root.path().join("fresh");
    let env = [("SERVICE_AUTH_DATA_DIR", fresh.to_str().unwrap())];
    let (status, _, err) = run_binary(root.path(), &["import", "all.jsonl"], &env, "");
    assert!(status.success(), "import: {err}");
    let (status, _, err) = run_binary(root.path(), &["import", "all.jsonl"], &env, "");
    assert!(!status.success() && err.contains("duplicate"), "a second import must be refused: {err}");

    let s = TestServer::start_embedded(test_config(&fresh)).await;
    let admin = s.admin_session().await;
    assert_eq!(s.users(&admin).await, before, "same accounts, roles, memberships and creation times");
    assert_eq!(s.get_session_resp(Some(&alice.cookie)).await.json(), serde_json::Value::Null, "sessions stay behind");
    s.login(&alice.email, PASSWORD).await;
    s.stop().await;
}
