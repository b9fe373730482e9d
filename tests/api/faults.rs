//! Store faults: when the disk refuses a write, the request gets 503 with the family's error body, memory does
//! not run ahead of the disk, reads keep working, and nothing of the refused change appears later.

use serde_json::{Value, json};

use super::harness::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_write_is_503_and_leaves_memory_and_disk_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let config = test_config(dir.path());
    let faults = service_auth::store::FaultSwitch::default();
    let s = TestServer::start_with_faults(config.clone(), faults.clone()).await;
    let admin = s.admin_session().await;
    let u = s.new_user("alice").await;
    let users_before = s.users(&admin).await;

    faults.fail_next_commits(1000);
    let r = s.sign_up_body(&json!({"name": "Bob", "email": "bob@example.com", "password": PASSWORD})).await;
    assert_eq!(r.status, 503, "{}", r.text);
    assert_eq!(r.json()["code"], "SERVICE_UNAVAILABLE");
    assert!(r.session_cookie().is_none(), "no cookie for a session that does not exist");
    let r = s.patch_user(&admin, &json!({"userId": u.id, "role": "qa_manager"})).await;
    assert_eq!(r.status, 503, "{}", r.text);
    assert_eq!(r.json().as_object().unwrap().keys().collect::<Vec<_>>(), ["error"]);
    assert_eq!(s.create_org(&admin, "Org", "org").await.status, 503);
    assert_eq!(s.sign_in(&u.email, PASSWORD).await.0, 503, "a sign-in needs a durable session");
    let r = s.sign_out(Some(&u.cookie)).await;
    assert_eq!(r.status, 503, "a sign-out that is not durable is not acknowledged");

    // Reads keep working and show none of the refused changes.
    assert!(s.session(&u.cookie).await.is_object(), "the refused sign-out did not end the session in memory");
    assert_eq!(s.users(&admin).await, users_before, "memory ran ahead of the disk");
    assert!(s.orgs(&admin).await.is_empty());

    faults.fail_next_commits(0);
    assert_eq!(s.sign_in("bob@example.com", PASSWORD).await.0, 401, "the refused sign-up left an account behind");
    s.patch_ok(&admin, &json!({"userId": u.id, "role": "qa_manager"})).await;
    assert_eq!(s.create_org(&admin, "Org", "org").await.status, 200, "the slug was not left reserved");
    let (status, _, _) = s.sign_up("Bob", "bob@example.com", PASSWORD).await;
    assert_eq!(status, 200, "the e-mail was not left reserved");
    s.stop().await;

    // The embedded store's own behaviour (its file on disk): one node on it, also in two-node runs.
    let s = TestServer::start_embedded(test_config(dir.path())).await;
    let admin = s.admin_session().await;
    let listed: Vec<Value> = s.users(&admin).await;
    assert_eq!(listed.len(), 3);
    assert_eq!(s.listed_user(&admin, &u.id).await["role"], "qa_manager");
    assert_eq!(s.orgs(&admin).await.len(), 1);
    s.stop().await;
}
