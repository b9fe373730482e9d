//! Settings without a restart (#50): `service-auth reload` and SIGHUP read `config.toml` again and put its live
//! settings in effect; a file that fails the checks changes nothing; a reload drops no request.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::json;

use super::harness::{BOOTSTRAP_ENV, ChildServer, PASSWORD, run_binary};

const CONFIG_ENV: (&str, &str) = ("SERVICE_AUTH_CONFIG", "config.toml");

fn write_config(root: &Path, text: &str) {
    std::fs::write(root.join("config.toml"), text).unwrap();
}

fn hangup(server: &ChildServer) {
    let ok = Command::new("kill").arg("-HUP").arg(server.child.id().to_string()).status().expect("kill -HUP");
    assert!(ok.success(), "kill -HUP failed");
}

/// Signs up `<tag>@example.com` with `password`; the status and the error code, if any.
async fn sign_up(server: &ChildServer, tag: &str, password: &str) -> (u16, String) {
    let (status, body, _) = server.sign_up("Reload", &format!("{tag}@example.com"), password).await;
    (status, body["code"].as_str().unwrap_or_default().to_owned())
}

/// Waits (at most 10 s) until the server's log holds `needle` `count` times.
async fn log_holds(server: &ChildServer, needle: &str, count: usize) {
    for _ in 0..100 {
        if server.stderr().matches(needle).count() >= count {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the log never said {needle:?} {count} times:\n{}", server.stderr());
}

#[tokio::test]
async fn a_reload_applies_the_new_password_policy_and_a_bad_file_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write_config(root, "[passwords]\nmin_length = 15\n");
    let env: Vec<(&str, &str)> =
        BOOTSTRAP_ENV.iter().copied().chain([CONFIG_ENV, ("SERVICE_AUTH_LOG", "info")]).collect();
    let server = ChildServer::spawn(root, &env).await;
    assert_eq!(sign_up(&server, "before", PASSWORD).await, (200, String::new()), "15 characters are enough");

    // `service-auth reload`: the server reads the file, applies it, and says what it applied.
    write_config(root, "[passwords]\nmin_length = 20\n");
    let (status, out, err) = run_binary(root, &["reload"], &[CONFIG_ENV], "");
    assert!(status.success(), "reload: {out} {err}");
    assert_eq!(out.trim(), "reloaded: applied [passwords]");
    assert_eq!(sign_up(&server, "after", PASSWORD).await, (400, "PASSWORD_TOO_SHORT".into()));

    // A setting that needs a restart is named, not applied; the live one beside it is.
    write_config(root, "[passwords]\nmin_length = 18\n[audit]\nretain_days = 5\n");
    let (status, out, err) = run_binary(root, &["reload"], &[CONFIG_ENV], "");
    assert!(status.success(), "reload: {out} {err}");
    assert_eq!(out.trim(), "reloaded: applied [passwords]; changed but applied only at the next start: [audit]");
    assert_eq!(sign_up(&server, "short", "Plum-Kettle-Orbit").await, (400, "PASSWORD_TOO_SHORT".into()));
    assert_eq!(sign_up(&server, "long", "Plum-Kettle-Orbit9").await, (200, String::new()));

    // A file that fails the checks: the command says why and exits 2; SIGHUP logs why; nothing changes.
    write_config(root, "[passwords]\nmin_length = 15\nmin_lenght = 12\n");
    let (status, out, err) = run_binary(root, &["reload"], &[CONFIG_ENV], "");
    assert_eq!(status.code(), Some(2), "{out} {err}");
    assert!(err.contains("min_lenght"), "the unknown key is named: {err}");
    hangup(&server);
    log_holds(&server, "configuration not reloaded, nothing changed", 1).await;
    assert!(server.stderr().contains("min_lenght"), "{}", server.stderr());
    assert_eq!(sign_up(&server, "still", "Plum-Kettle-Orbit").await, (400, "PASSWORD_TOO_SHORT".into()));

    // SIGHUP with a good file applies it.
    write_config(root, "[passwords]\nmin_length = 15\n[audit]\nretain_days = 5\n");
    hangup(&server);
    log_holds(&server, "configuration reloaded", 3).await;
    assert_eq!(sign_up(&server, "again", PASSWORD).await, (200, String::new()));

    // Each applied reload is in the audit log, what changed in its detail; the refused one is not.
    let admin = server.admin_session().await;
    let audit = server.get("/api/admin/audit?limit=500").cookie(&admin).send().await.json();
    let reloads: Vec<String> = audit["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["action"] == "config.reloaded")
        .map(|e| e["detail"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        reloads,
        [
            "applied [passwords]; changed but applied only at the next start: [audit]",
            "applied [passwords]; changed but applied only at the next start: [audit]",
            "applied [passwords]",
        ],
        "newest first"
    );
}

#[tokio::test]
async fn without_a_server_reload_says_so_and_fails() {
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), "");
    let (status, out, err) = run_binary(dir.path(), &["reload"], &[CONFIG_ENV], "");
    assert_eq!(status.code(), Some(1), "{out} {err}");
    assert!(err.contains("no server answers"), "{err}");
}

/// Reloads under load: clients keep asking get-session on kept-alive connections while the file changes and the
/// server reloads it again and again (by SIGHUP and by the command); no request may fail. Times nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reloading_under_load_fails_no_request() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_owned();
    write_config(&root, "[rate_limit]\nsign_in_per_address = 30\n");
    let env = [CONFIG_ENV, ("SERVICE_AUTH_LOG", "info")];
    let server = ChildServer::spawn(&root, &env).await;
    let cookie = server.new_user("load").await.cookie;
    let done = Arc::new(AtomicBool::new(false));
    let (served, failed) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let clients: Vec<_> = (0..8)
        .map(|_| {
            let (client, cookie) = (server.client.clone(), cookie.clone());
            let (done, served, failed) = (Arc::clone(&done), Arc::clone(&served), Arc::clone(&failed));
            tokio::spawn(async move {
                while !done.load(Ordering::Relaxed) {
                    match client.get("/api/auth/get-session").cookie(&cookie).try_send().await {
                        Ok(r) if r.status == 200 && r.text.contains("\"session\"") => {
                            served.fetch_add(1, Ordering::Relaxed)
                        }
                        _ => failed.fetch_add(1, Ordering::Relaxed),
                    };
                }
            })
        })
        .collect();
    for round in 0..6u32 {
        tokio::time::sleep(Duration::from_millis(300)).await;
        write_config(
            &root,
            &format!("[rate_limit]\nsign_in_per_address = {}\n[passwords]\nmin_length = {}\n", 30 + round, 15 + round),
        );
        if round % 2 == 0 {
            hangup(&server);
            // Each reload logs the line, the command's too.
            log_holds(&server, "configuration reloaded", round as usize + 1).await;
        } else {
            let root = root.clone();
            let (status, out, err) =
                tokio::task::spawn_blocking(move || run_binary(&root, &["reload"], &[CONFIG_ENV], "")).await.unwrap();
            assert!(status.success(), "reload: {out} {err}");
            assert_eq!(out.trim(), "reloaded: applied [rate_limit], [passwords]");
        }
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    done.store(true, Ordering::Relaxed);
    for client in clients {
        client.await.unwrap();
    }
    let (served, failed) = (served.load(Ordering::Relaxed), failed.load(Ordering::Relaxed));
    assert_eq!(failed, 0, "{failed} of {} requests failed during the reloads", served + failed);
    assert!(served > 100, "the load ran: {served} requests");
    // The last reload is in effect: 20 characters now.
    let (status, body, _) = server
        .sign_up_body(&json!({"name": "Late", "email": "late@example.com", "password": "Plum-Kettle-Orbit-9"}))
        .await
        .triple();
    assert_eq!((status, body["code"].as_str()), (400, Some("PASSWORD_TOO_SHORT")), "{body}");
}

/// The status page's configuration view (#50): every section as in effect, no credential (a URL's password shows
/// as `redacted`), which settings are live; after a reload, the new live value, when, and what waits for a
/// restart (shown still at its old value, since that is what runs). Administrators only.
#[tokio::test]
async fn the_configuration_view_shows_what_is_in_effect_and_no_secret() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let secrets = "[email]\nsmtp_url = \"smtp://mailer:hunter2-secret@127.0.0.1:9\"\n\
                   [webhooks]\nproxy = \"http://proxyuser:proxy-secret@127.0.0.1:3128\"\n";
    write_config(root, &format!("[passwords]\nmin_length = 15\n{secrets}"));
    let env: Vec<(&str, &str)> = BOOTSTRAP_ENV.iter().copied().chain([CONFIG_ENV]).collect();
    let server = ChildServer::spawn(root, &env).await;
    let admin = server.admin_session().await;
    let view = server.get("/api/admin/config").cookie(&admin).send().await;
    assert_eq!(view.status, 200, "{}", view.text);
    for secret in ["hunter2-secret", "proxy-secret"] {
        assert!(!view.text.contains(secret), "{secret} shown: {}", view.text);
    }
    let shown = view.json();
    assert_eq!(shown["settings"]["email"]["smtp_url"], "smtp://mailer:redacted@127.0.0.1:9");
    assert_eq!(shown["settings"]["webhooks"]["proxy"], "http://proxyuser:redacted@127.0.0.1:3128/");
    assert_eq!(shown["settings"]["passwords"]["min_length"], 15);
    assert_eq!(shown["settings"]["audit"]["retain_days"], 365, "a default is shown as in effect");
    assert!(shown["source"].as_str().is_some_and(|s| s.ends_with("config.toml")), "{shown}");
    assert_eq!((shown["reloaded_at"].clone(), shown["need_restart"].clone()), (json!(null), json!([])));
    assert!(shown["live"].as_array().unwrap().contains(&json!("[passwords]")), "{shown}");

    write_config(root, &format!("[passwords]\nmin_length = 20\n[audit]\nretain_days = 5\n{secrets}"));
    let (status, out, err) = run_binary(root, &["reload"], &[CONFIG_ENV], "");
    assert!(status.success(), "reload: {out} {err}");
    let shown = server.get("/api/admin/config").cookie(&admin).send().await.json();
    assert_eq!(shown["settings"]["passwords"]["min_length"], 20, "the live setting as now in effect");
    assert_eq!(shown["settings"]["audit"]["retain_days"], 365, "a restart-only setting keeps the value that runs");
    assert_eq!(shown["need_restart"], json!(["audit"]));
    assert!(shown["reloaded_at"].is_string(), "{shown}");

    let password = "Plum-Kettle-Orbit-Lantern-9";
    let (status, body, _) = server.sign_up("Viewer", "viewer@example.com", password).await;
    assert_eq!(status, 200, "{body}");
    let (_, _, cookie) = server.sign_in("viewer@example.com", password).await;
    let r = server.get("/api/admin/config").cookie(&cookie.unwrap()).send().await;
    assert_eq!(r.status, 403, "{}", r.text);
    assert_eq!(server.get("/api/admin/config?x=1").cookie(&admin).send().await.status, 400);
}

/// The `.eml` files in `dir` (none when it does not exist yet).
fn mails_in(dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut mails: Vec<String> = entries
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "eml"))
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect();
    mails.sort();
    mails
}

/// Waits (at most 10 s) until `dir` holds `count` messages; returns them.
async fn wait_for_mails(dir: &Path, count: usize) -> Vec<String> {
    for _ in 0..100 {
        let mails = mails_in(dir);
        if mails.len() >= count {
            return mails;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{} never held {count} messages", dir.display());
}

/// More live settings (#50): `[session] fresh_age_secs` and the mail transport and sender (`[email] directory` or
/// `smtp_url`, `from`) change with a reload. Mail cannot be turned off live (whether it is on decides which calls
/// the API offers), so a file without a transport is named for a restart and the messages keep going out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_moves_the_mail_to_the_new_transport_and_sender_and_applies_the_fresh_age() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let mail = |dir: &str, from: &str| format!("[email]\ndirectory = \"{dir}\"\nfrom = \"{from}\"\n");
    write_config(root, &mail("mail-a", "Before <before@example.com>"));
    let env: Vec<(&str, &str)> = BOOTSTRAP_ENV.iter().copied().chain([CONFIG_ENV]).collect();
    let server = ChildServer::spawn(root, &env).await;
    let (status, _, cookie) = server.sign_up("Fresh", "fresh@example.com", PASSWORD).await;
    assert_eq!(status, 200);
    let cookie = cookie.unwrap();
    let reset = || {
        server
            .post("/api/auth/request-password-reset")
            .json(&json!({"email": "fresh@example.com", "redirectTo": "/reset"}))
            .send()
    };
    assert_eq!(reset().await.status, 200);
    let before = wait_for_mails(&root.join("mail-a"), 1).await;
    assert!(before[0].contains("From: Before <before@example.com>"), "{}", before[0]);

    let text = format!("[session]\nfresh_age_secs = 1\n{}", mail("mail-b", "After <after@example.com>"));
    write_config(root, &text);
    let (status, out, err) = run_binary(root, &["reload"], &[CONFIG_ENV], "");
    assert!(status.success(), "reload: {out} {err}");
    assert_eq!(out.trim(), "reloaded: applied [session], [email]");

    assert_eq!(reset().await.status, 200);
    let after = wait_for_mails(&root.join("mail-b"), 1).await;
    assert!(after[0].contains("From: After <after@example.com>"), "{}", after[0]);
    assert_eq!(mails_in(&root.join("mail-a")).len(), 1, "nothing more went to the old transport");

    // The session was made before the window of one second was set; it is older than that now.
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    let r = server.get("/api/auth/list-sessions").cookie(&cookie).send().await;
    assert_eq!((r.status, r.json()["code"].clone()), (403, json!("SESSION_NOT_FRESH")), "{}", r.text);

    // No transport in the file: named for a restart; the mail still goes out, by the reloaded transport.
    write_config(root, "[session]\nfresh_age_secs = 0\n");
    let (status, out, err) = run_binary(root, &["reload"], &[CONFIG_ENV], "");
    assert!(status.success(), "reload: {out} {err}");
    assert_eq!(out.trim(), "reloaded: applied [session]; changed but applied only at the next start: [email]");
    assert_eq!(server.get("/api/auth/list-sessions").cookie(&cookie).send().await.status, 200, "the check is off");
    assert_eq!(reset().await.status, 200);
    assert_eq!(wait_for_mails(&root.join("mail-b"), 2).await.len(), 2);
}

/// The attempts of `hook` in its delivery log, once there are at least `count` (at most 30 s).
async fn logged_attempts(server: &ChildServer, admin: &str, hook: &str, count: usize) -> Vec<serde_json::Value> {
    for _ in 0..300 {
        let log = server.get(&format!("/api/admin/webhooks/{hook}/deliveries")).cookie(admin).send().await;
        assert_eq!(log.status, 200, "{}", log.text);
        let found = log.json()["deliveries"].as_array().unwrap().clone();
        if found.len() >= count {
            return found;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{count} attempts of {hook} never logged");
}

/// The webhooks' delivery limits are live (#50): an endpoint that takes the connection and never answers times
/// out at `[webhooks] timeout_ms`; after a reload that raises it, the next attempts wait for the new limit. What
/// decided which endpoints were registered (`allow_internal_targets`) is named for a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_changes_the_webhook_time_limit_of_the_next_attempts() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    // The kernel completes the handshake into the backlog; nobody reads: every attempt waits for its time limit.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://127.0.0.1:{}/hook", silent.local_addr().unwrap().port());
    let hooks = |timeout_ms: u64, internal: bool| {
        format!("[webhooks]\nallow_internal_targets = {internal}\nmax_backoff_secs = 1\ntimeout_ms = {timeout_ms}\n")
    };
    write_config(root, &hooks(200, true));
    let env: Vec<(&str, &str)> = BOOTSTRAP_ENV.iter().copied().chain([CONFIG_ENV]).collect();
    let server = ChildServer::spawn(root, &env).await;
    let admin = server.admin_session().await;
    let created = server
        .post("/api/admin/webhooks")
        .cookie(&admin)
        .json(&json!({"url": url, "events": ["user.created"]}))
        .send()
        .await;
    assert_eq!(created.status, 201, "{}", created.text);
    let hook = created.json()["webhook"]["id"].as_str().unwrap().to_owned();
    let sent = server.post(&format!("/api/admin/webhooks/{hook}/test")).cookie(&admin).send().await;
    assert_eq!(sent.status, 202, "{}", sent.text);
    let before = logged_attempts(&server, &admin, &hook, 2).await;
    for attempt in &before {
        assert_eq!(attempt["error"], "timed out", "{attempt}");
        assert!(attempt["duration_ms"].as_u64().unwrap() < 1_000, "the 200 ms limit: {attempt}");
    }

    write_config(root, &hooks(2_500, false));
    let (status, out, err) = run_binary(root, &["reload"], &[CONFIG_ENV], "");
    assert!(status.success(), "reload: {out} {err}");
    assert_eq!(out.trim(), "reloaded: applied [webhooks]; changed but applied only at the next start: [webhooks]");
    // The attempt under way when the file changed may still end at the old limit; the one after it waits longer.
    let seen = logged_attempts(&server, &admin, &hook, 1).await.len();
    let after = logged_attempts(&server, &admin, &hook, seen + 2).await;
    let longest = after.iter().filter_map(|a| a["duration_ms"].as_u64()).max().unwrap();
    assert!(longest >= 2_400, "no attempt waited for the new 2.5 s limit: {after:?}");
    assert!(after.iter().all(|a| a["error"] == "timed out"), "{after:?}");
    drop(silent);
}

/// `[[oauth.providers]]` for `local` on `issuer`, its secret from `IDP_SECRET`.
fn provider_section(issuer: &str) -> String {
    format!(
        "[[oauth.providers]]\nid = \"local\"\nissuer = \"{issuer}\"\nclient_id = \"svc\"\nclient_secret_env = \"IDP_SECRET\"\n"
    )
}

/// `sign-in/social` for `provider`: the status and the error code, if any.
async fn start_social(server: &ChildServer, provider: &str) -> (u16, String) {
    let body = json!({"provider": provider, "callbackURL": "/home"});
    let resp = server.client.post("/api/auth/sign-in/social").json(&body).send().await;
    (resp.status, resp.json()["code"].as_str().unwrap_or_default().to_owned())
}

/// Providers live (#50): one added by a reload signs in; one whose discovery fails is not put in effect and the
/// reload says so; a bad section changes nothing; a flow started before its provider was removed is refused at the
/// callback (to its error URL), and the provider is refused at the start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_added_by_reload_signs_in_and_one_removed_is_refused() {
    use super::oauth::{Browser, Idp, error_of, redirected_to};
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write_config(root, "");
    let env = [CONFIG_ENV, ("IDP_SECRET", "svc-secret"), ("SERVICE_AUTH_LOG", "info")];
    let server = ChildServer::spawn(root, &env).await;
    let mut idp = Idp::start();
    let base = &server.client.base;
    idp.configure(json!({"clients": [
        {"client_id": "svc", "client_secret": "svc-secret", "redirect_uris": [format!("{base}/api/auth/callback/local")]},
    ]}));
    assert_eq!(start_social(&server, "local").await, (404, "PROVIDER_NOT_FOUND".into()), "not configured yet");

    // A provider whose discovery fails is not added, and the reload says why; the rest of the file applies.
    write_config(root, &format!("[passwords]\nmin_length = 16\n{}", provider_section("http://127.0.0.1:9")));
    let (status, out, err) = run_binary(root, &["reload"], &env[..2], "");
    assert!(status.success(), "reload: {out} {err}");
    assert!(
        out.contains("applied [passwords]; not applied: [oauth] provider \"local\" not added (discovery failed"),
        "{out}"
    );
    assert_eq!(start_social(&server, "local").await, (404, "PROVIDER_NOT_FOUND".into()));

    // Added: usable at once.
    write_config(root, &provider_section(&idp.issuer));
    let (status, out, err) = run_binary(root, &["reload"], &env[..2], "");
    assert!(status.success(), "reload: {out} {err}");
    assert_eq!(out.trim(), "reloaded: applied [passwords], [oauth]");
    let mut browser = Browser::of(&server.client);
    let start = browser.start_at(&server.client, "/api/auth/sign-in/social", &json!({"provider": "local"})).await;
    let page = browser.through_provider(&start, "alice@example.com").await;
    assert_eq!(redirected_to(&page), "/welcome", "signed in through the provider the reload added");

    // A bad section (an empty client_id): the command says which key and exits 2; the provider stays usable.
    write_config(root, &provider_section(&idp.issuer).replace("client_id = \"svc\"", "client_id = \"\""));
    let (status, out, err) = run_binary(root, &["reload"], &env[..2], "");
    assert_eq!(status.code(), Some(2), "{out} {err}");
    assert!(err.contains("oauth.providers[0].client_id"), "{err}");
    // A changed issuer that does not answer: the provider in effect is kept.
    write_config(root, &provider_section("http://127.0.0.1:9"));
    let (status, out, err) = run_binary(root, &["reload"], &env[..2], "");
    assert!(status.success(), "reload: {out} {err}");
    assert!(out.contains("nothing to apply; not applied: [oauth] provider \"local\" kept as it was"), "{out}");
    assert_eq!(start_social(&server, "local").await.0, 200, "the provider in effect still starts flows");

    // A flow in flight when its provider is removed: refused at the callback, to its error URL, cleanly.
    let mut late = Browser::of(&server.client);
    let start = late.start_at(&server.client, "/api/auth/sign-in/social", &json!({"provider": "local"})).await;
    let callback = late.up_to_callback(&start, "bob@example.com").await;
    write_config(root, "");
    let (status, out, err) = run_binary(root, &["reload"], &env[..2], "");
    assert!(status.success(), "reload: {out} {err}");
    assert_eq!(out.trim(), "reloaded: applied [oauth]");
    let page = late.send(reqwest::Method::GET, &callback, None).await;
    assert_eq!(error_of(&page), "oauth_provider_not_found");
    assert_eq!(start_social(&server, "local").await, (404, "PROVIDER_NOT_FOUND".into()), "removed");
}
