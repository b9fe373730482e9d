//! The administration console at `/admin/` (embedded files and their headers) and `GET /api/admin/status`.

use serde_json::json;

use super::harness::*;

const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                   frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_files_carry_a_strict_policy_and_revalidate() {
    let s = TestServer::start().await;
    for (path, content_type, marker) in [
        ("/admin/", "text/html; charset=utf-8", "<script type=\"module\" src=\"app.js\"></script>"),
        ("/admin/app.js", "text/javascript; charset=utf-8", "credentials: \"same-origin\""),
        ("/admin/console.css", "text/css; charset=utf-8", ":focus-visible"),
    ] {
        let r = s.get(path).send().await;
        assert_eq!(r.status, 200, "{path}: {}", r.text);
        assert_eq!(r.content_type(), content_type, "{path}");
        assert!(r.text.contains(marker), "{path} is not the console's file");
        assert_eq!(r.header("content-security-policy").as_deref(), Some(CSP), "{path}");
        assert_eq!(r.header("referrer-policy").as_deref(), Some("no-referrer"), "{path}");
        assert_eq!(r.header("x-content-type-options").as_deref(), Some("nosniff"), "{path}");
        assert_eq!(r.header("cache-control").as_deref(), Some("no-cache"), "{path}");
        // The browser revalidates every time; the same ETag back is a 304 without a body, another is the file.
        let etag = r.header("etag").expect("an ETag");
        assert!(etag.starts_with('"') && etag.ends_with('"') && etag.len() > 10, "{etag}");
        let again = s.get(path).header("if-none-match", &etag).send().await;
        assert_eq!(again.status, 304, "{path}");
        assert!(again.text.is_empty());
        assert_eq!(again.header("etag"), Some(etag.clone()));
        assert_eq!(again.header("content-security-policy").as_deref(), Some(CSP));
        let stale = s.get(path).header("if-none-match", "\"an-older-build\"").send().await;
        assert_eq!(stale.status, 200, "{path}");
        assert_eq!(stale.text, r.text);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_console_files_are_served_and_only_to_get() {
    let s = TestServer::start().await;
    for path in ["/admin/index.html", "/admin/app.js.map", "/admin/..%2fCargo.toml", "/admin/x/app.js"] {
        let r = s.get(path).send().await;
        assert_eq!(r.status, 404, "{path}: {}", r.text);
        assert_eq!(r.json()["code"], "NOT_FOUND", "{path}");
    }
    let r = s.post("/admin/").json(&json!({})).send().await;
    assert_eq!(r.status, 405);
    assert_eq!(r.allow(), ["GET".to_owned(), "HEAD".to_owned()].into());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_is_for_administrators_and_counts_what_the_server_holds() {
    let backups = tempfile::tempdir().unwrap();
    // A snapshot as the schedule names them; other files in the directory are not backups.
    std::fs::write(backups.path().join("service-auth-20260101T000000.000Z.redb"), b"x").unwrap();
    std::fs::write(backups.path().join("notes.txt"), b"x").unwrap();
    let dir = backups.path().to_path_buf();
    // Scheduled backups and the store file's size are the embedded store's: one node on it, in two-node runs too.
    let s = TestServer::start_embedded_adjusted(move |c| c.backup.dir = Some(dir)).await;
    let r = s.get("/api/admin/status").send().await;
    assert_eq!((r.status, r.json()), (401, json!({"error": "authentication required"})));
    let user = s.new_user("status").await;
    let r = s.get("/api/admin/status").cookie(&user.cookie).send().await;
    assert_eq!((r.status, r.json()), (403, json!({"error": "administrator role required"})));

    let admin = s.admin_session().await;
    s.new_org(&admin, "Status Org", "status-org").await;
    let r = s.get("/api/admin/status").cookie(&admin).send().await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.header("cache-control").as_deref(), Some("no-store"));
    let body = r.json();
    assert_eq!(body["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(body["signed_in_as"]["email"], ADMIN_EMAIL);
    assert_eq!(body["users"], 2);
    assert_eq!(body["sessions"], 2);
    assert_eq!(body["organizations"], 1);
    assert!(body["store_bytes"].as_u64().unwrap() > 0, "{body}");
    assert_eq!(body["backups_configured"], true);
    let modified = chrono::DateTime::parse_from_rfc3339(body["last_backup_at"].as_str().unwrap()).unwrap();
    assert!((chrono::Utc::now().timestamp() - modified.timestamp()).abs() < 60, "{body}");
    assert!(body["roles"].as_array().unwrap().contains(&json!("admin")));
    // The store's path and the backup directory stay the operator's business.
    assert!(!r.text.contains(backups.path().to_str().unwrap()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_without_backups_says_so() {
    let s = TestServer::start().await;
    let admin = s.admin_session().await;
    let body = s.get("/api/admin/status").cookie(&admin).send().await.json();
    assert_eq!(body["backups_configured"], false);
    assert_eq!(body["last_backup_at"], json!(null));
    assert_eq!(body["users"], 1);
}
