//! First run without a terminal: while no administrator exists, `serve` logs a one-time setup link where the
//! first administrator is created in a browser. (The page itself in Chromium: tests/browser/pages.test.mjs; the
//! link's expiry after 30 minutes: the unit test beside `accounts::setup`.)

use serde_json::{Value, json};

use super::harness::*;

/// The setup link the server logged, as a path with its query.
fn logged_link(server: &ChildServer) -> String {
    let log = server.stderr();
    let lines: Vec<&str> = log.lines().filter(|l| l.contains("/admin/setup?token=")).collect();
    assert_eq!(lines.len(), 1, "the link is logged exactly once:\n{log}");
    let at = lines[0].find("/admin/setup?token=").unwrap();
    let link = lines[0][at..].split(|c: char| c.is_whitespace() || c == '"' || c == ')').next().unwrap();
    assert_eq!(link.len(), "/admin/setup?token=".len() + 43, "{link}");
    link.to_owned()
}

fn token_of(link: &str) -> &str {
    link.trim_start_matches("/admin/setup?token=")
}

async fn set_up(server: &ChildServer, token: &str, email: &str) -> Resp {
    let body = json!({"token": token, "name": "First Admin", "email": email, "password": "an opening passphrase"});
    server.post("/api/admin/setup").json(&body).send().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_setup_link_creates_the_first_administrator_once_and_never_again() {
    let root = tempfile::tempdir().unwrap();
    let server = ChildServer::spawn(root.path(), &[("SERVICE_AUTH_LOG", "info")]).await;
    let link = logged_link(&server);
    let page = server.get(&link).send().await;
    assert_eq!(page.status, 200);
    assert!(page.text.contains(r#"<form id="setup""#), "{}", page.text);
    assert_eq!(page.header("cache-control").as_deref(), Some("no-store"));
    assert!(page.header("content-security-policy").unwrap().contains("script-src 'self'"));

    // Not the link's token: refused, and the link still works.
    let wrong = set_up(&server, "x".repeat(43).as_str(), "first@example.com").await;
    assert_eq!(
        (wrong.status, wrong.json()["error"].as_str().unwrap().starts_with("This setup link is not valid")),
        (403, true)
    );
    // An e-mail someone signed up with is never made administrator by the link; the link survives the refusal.
    let (status, _, _) = server.sign_up("Squatter", "taken@example.com", PASSWORD).await;
    assert_eq!(status, 200);
    let taken = set_up(&server, token_of(&link), "taken@example.com").await;
    assert_eq!(taken.status, 409, "{}", taken.text);

    let created = set_up(&server, token_of(&link), "first@example.com").await;
    assert_eq!(created.status, 200, "{}", created.text);
    assert_eq!(created.json()["user"]["email"], "first@example.com");
    let admin = server.login("first@example.com", "an opening passphrase").await;
    let me = server.users(&admin).await.into_iter().find(|u| u["email"] == "first@example.com").unwrap();
    assert_eq!(me["role"], "admin");
    let audit = server.get("/api/admin/audit?limit=100").cookie(&admin).send().await.json();
    let detail = "first administrator created through the one-time setup link";
    let entry = audit["entries"].as_array().unwrap().iter().find(|e| e["detail"] == detail).cloned();
    let entry = entry.unwrap_or_else(|| panic!("the creation is audited: {audit}"));
    assert_eq!((&entry["target_id"], &entry["ip_address"]), (&me["id"], &json!("127.0.0.1")));

    // Spent: the same link again, for another account, is refused, and the page says it is set up.
    let again = set_up(&server, token_of(&link), "second@example.com").await;
    assert_eq!(again.status, 403, "{}", again.text);
    assert!(server.get(&link).send().await.text.contains("This service has an administrator"));
    assert!(server.users(&admin).await.iter().all(|u| u["email"] != "second@example.com"));
    assert!(server.terminate().success());

    // A restart with an administrator: no link at all.
    let server = ChildServer::spawn(root.path(), &[("SERVICE_AUTH_LOG", "info")]).await;
    assert!(!server.stderr().contains("/admin/setup"), "{}", server.stderr());
    assert_eq!(set_up(&server, token_of(&link), "third@example.com").await.status, 403);
    assert!(server.terminate().success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_an_administrator_there_is_no_link_and_the_call_is_refused() {
    let root = tempfile::tempdir().unwrap();
    let mut env = BOOTSTRAP_ENV.to_vec();
    env.push(("SERVICE_AUTH_LOG", "info"));
    let server = ChildServer::spawn(root.path(), &env).await;
    assert!(!server.stderr().contains("/admin/setup"), "{}", server.stderr());
    let refused = set_up(&server, &"A".repeat(43), "intruder@example.com").await;
    assert_eq!(refused.status, 403);
    let page = server.get("/admin/setup").send().await;
    assert!(page.text.contains("This service has an administrator"), "{}", page.text);
    let admin = server.login(ADMIN_EMAIL, ADMIN_PASSWORD).await;
    let users: Vec<Value> = server.users(&admin).await;
    assert!(users.iter().all(|u| u["email"] != "intruder@example.com"));
    assert!(server.terminate().success());
}

/// A restart issues a new link; the one logged before is dead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_replaces_the_link() {
    let root = tempfile::tempdir().unwrap();
    let server = ChildServer::spawn(root.path(), &[("SERVICE_AUTH_LOG", "info")]).await;
    let first = logged_link(&server);
    assert!(server.terminate().success());
    let server = ChildServer::spawn(root.path(), &[("SERVICE_AUTH_LOG", "info")]).await;
    let second = logged_link(&server);
    assert_ne!(first, second);
    assert_eq!(set_up(&server, token_of(&first), "old@example.com").await.status, 403);
    assert_eq!(set_up(&server, token_of(&second), "new@example.com").await.status, 200);
    assert!(server.terminate().success());
}
