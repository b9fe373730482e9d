//! Restarts, crashes, the first administrator, the command line, configuration, session lifetime.

use std::time::Duration;

use serde_json::{Value, json};

use super::harness::*;
use service_auth::config::BootstrapAdmin;
use tokio_util::sync::CancellationToken;

// ---------------------------------------------------------------------------------------------------------------
// A populated service and its check after a restart or crash

struct World {
    admin: String,
    alice: TestUser,
    bob: TestUser,
    carol: TestUser,
    dave: TestUser,
    /// Carol's signed-out session.
    carol_old: String,
    /// Carol's session from the last write.
    carol_new: String,
    users: Vec<Value>,
    orgs: Vec<Value>,
    /// get-session answers of the live sessions, taken before the last write.
    sessions: Vec<(String, Value)>,
}

/// Users, roles, a promotion, a ban, organizations, a membership, sessions and a sign-out. The last request is a
/// state change (a sign-in) so that a crash right after it tests the durability of an acknowledged write.
async fn populate(c: &Client) -> World {
    let admin = c.admin_session().await;
    let alice = c.new_user("alice").await;
    let bob = c.new_user("bob").await;
    let carol = c.new_user("carol").await;
    let dave = c.new_user("dave").await;
    c.patch_ok(&admin, &json!({"userId": alice.id, "role": "qa_manager"})).await;
    c.patch_ok(&admin, &json!({"userId": bob.id, "role": "admin"})).await;
    let org = c.new_org(&admin, "Acme Pharmacy", "acme").await;
    c.new_org(&admin, "Beta", "beta").await;
    c.patch_ok(&admin, &json!({"userId": alice.id, "organizationId": org["id"]})).await;
    c.patch_ok(&admin, &json!({"userId": dave.id, "banned": true})).await;
    assert_eq!(c.sign_out(Some(&carol.cookie)).await.status, 200);

    let users = c.users(&admin).await;
    assert_eq!(users.len(), 5);
    let orgs = c.orgs(&admin).await;
    let mut sessions = Vec::new();
    for cookie in [&admin, &alice.cookie, &bob.cookie] {
        sessions.push((cookie.clone(), c.session(cookie).await));
    }
    assert_eq!(sessions[1].1["user"]["organizationId"], org["id"]);

    let carol_new = c.login(&carol.email, PASSWORD).await;
    let carol_old = carol.cookie.clone();
    World { admin, alice, bob, carol, dave, carol_old, carol_new, users, orgs, sessions }
}

async fn verify(c: &Client, w: &World) {
    for (cookie, before) in &w.sessions {
        let r = c.get_session_resp(Some(cookie)).await;
        assert_eq!(r.json(), *before, "a live session is unchanged");
    }
    assert_eq!(c.users(&w.admin).await, w.users, "user list");
    assert_eq!(c.orgs(&w.admin).await, w.orgs, "organization list");
    let carol = c.session(&w.carol_new).await;
    assert_eq!(carol["user"]["id"], w.carol.id.as_str(), "the session of the last acknowledged write");
    assert_eq!(c.get_session_resp(Some(&w.carol_old)).await.json(), Value::Null, "signed-out session stays dead");
    assert_eq!(c.get_session_resp(Some(&w.dave.cookie)).await.json(), Value::Null, "banned user's session stays dead");
    let r = c.sign_in_body(&json!({"email": w.dave.email, "password": PASSWORD})).await;
    assert_auth_error(&r, 403, "BANNED_USER");
    assert_eq!(c.list_users(Some(&w.bob.cookie)).await.status, 200, "promoted admin is still admin");
    assert_admin_error(&c.list_users(Some(&w.alice.cookie)).await, 403);
    // Indexes were rebuilt: e-mail and slug are still taken, the password hash still verifies.
    let r = c.sign_up_body(&json!({"name": "Again", "email": "ALICE@example.com", "password": PASSWORD})).await;
    assert_auth_error(&r, 422, "USER_ALREADY_EXISTS_USE_ANOTHER_EMAIL");
    assert_admin_error(&c.create_org(&w.admin, "Acme again", "acme").await, 409);
    c.login(&w.alice.email, PASSWORD).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_restart_keeps_everything() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start_in(dir.path()).await;
    let w = populate(&s).await;
    s.stop().await;

    let s = TestServer::start_in(dir.path()).await;
    verify(&s, &w).await;
    s.stop().await;

    // And once more, after a restart that itself wrote (sign-ins in `verify`).
    let s = TestServer::start_in(dir.path()).await;
    assert_eq!(s.users(&w.admin).await, w.users);
    assert!(s.session(&w.carol_new).await.is_object());
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_right_after_acknowledged_writes_loses_nothing() {
    let root = tempfile::tempdir().unwrap();
    let server = ChildServer::spawn(root.path(), BOOTSTRAP_ENV).await;
    let w = populate(&server).await;
    server.kill9(); // immediately after the last 2xx

    let server = ChildServer::spawn(root.path(), BOOTSTRAP_ENV).await;
    verify(&server, &w).await;
    // One more acknowledged write, one more crash.
    let erin = server.new_user("erin").await;
    server.kill9();

    let server = ChildServer::spawn(root.path(), BOOTSTRAP_ENV).await;
    assert_eq!(server.session(&erin.cookie).await["user"]["id"], erin.id.as_str());
    assert_eq!(server.users(&w.admin).await.len(), 6);
    server.kill9();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_exits_zero_after_making_everything_durable() {
    let root = tempfile::tempdir().unwrap();
    let server = ChildServer::spawn(root.path(), BOOTSTRAP_ENV).await;
    let admin = server.admin_session().await;
    let u = server.new_user("alice").await;
    server.patch_ok(&admin, &json!({"userId": u.id, "role": "pharmacist_in_charge"})).await;
    let log = server.stderr();
    let status = server.terminate();
    assert!(status.success(), "exit status after SIGTERM: {status:?}; stderr before:\n{log}");

    let server = ChildServer::spawn(root.path(), &[]).await;
    let me = server.session(&u.cookie).await;
    assert_eq!(me["user"]["role"], "pharmacist_in_charge");
    let status = server.terminate();
    assert!(status.success(), "{status:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_server_on_the_same_directory_is_refused() {
    let root = tempfile::tempdir().unwrap();
    let server = ChildServer::spawn(root.path(), BOOTSTRAP_ENV).await;
    let u = server.new_user("alice").await;
    let (status, out, err) = run_binary(root.path(), &["serve"], &[], "");
    assert!(!status.success(), "second server on a held directory: {status:?} {out:?} {err:?}");
    assert!(!err.trim().is_empty(), "a message says why");
    // The first one is unharmed.
    assert_eq!(server.session(&u.cookie).await["user"]["id"], u.id.as_str());
    server.kill9();
}

// ---------------------------------------------------------------------------------------------------------------
// The first administrator

fn bootstrap(email: &str, name: &str, password: &str) -> Option<BootstrapAdmin> {
    Some(BootstrapAdmin { email: email.into(), name: name.into(), password: password.into(), promote_existing: false })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bootstrap_admin_is_created_when_there_is_no_admin() {
    let s = TestServer::start().await;
    let r = s.sign_in_body(&json!({"email": ADMIN_EMAIL, "password": ADMIN_PASSWORD})).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let user = &r.json()["user"];
    assert_auth_user(user);
    assert_eq!(user["email"], ADMIN_EMAIL);
    assert_eq!(user["name"], ADMIN_NAME);
    assert_eq!(user["role"], "admin");
    assert_eq!(user["banned"], false);
    let r = s.sign_in_body(&json!({"email": ADMIN_EMAIL, "password": "not the password"})).await;
    assert_auth_error(&r, 401, "INVALID_EMAIL_OR_PASSWORD");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bootstrap_changes_nothing_once_an_admin_exists() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start_in(dir.path()).await;
    let admin = s.admin_session().await;
    let before = s.users(&admin).await;
    s.stop().await;

    // Same e-mail, other password and name.
    let mut config = test_config(dir.path());
    config.bootstrap_admin = bootstrap(ADMIN_EMAIL, "Someone Else", "a different password");
    let s = TestServer::start_with(config).await;
    let r = s.sign_in_body(&json!({"email": ADMIN_EMAIL, "password": "a different password"})).await;
    assert_auth_error(&r, 401, "INVALID_EMAIL_OR_PASSWORD");
    let admin = s.admin_session().await;
    assert_eq!(s.users(&admin).await, before);
    s.stop().await;

    // Another e-mail: not created.
    let mut config = test_config(dir.path());
    config.bootstrap_admin = bootstrap("second@example.com", "Second", "second password");
    let s = TestServer::start_with(config).await;
    let r = s.sign_in_body(&json!({"email": "second@example.com", "password": "second password"})).await;
    assert_auth_error(&r, 401, "INVALID_EMAIL_OR_PASSWORD");
    let admin = s.admin_session().await;
    assert_eq!(s.users(&admin).await, before);
    s.stop().await;
}

/// The take-over the hardening issue showed: someone signs up with the operator's e-mail before the operator's
/// first start with the bootstrap variables. Before: the squatter became administrator, keeping their password and
/// session. Now: start-up refuses and says why, and only an explicit promotion takes the account over, replacing
/// the password and ending the squatter's sessions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bootstrap_refuses_an_account_someone_registered_first() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = test_config(dir.path());
    config.bootstrap_admin = None;
    // Starts on the embedded store in between (`server::run`): one node on it, also in two-node runs.
    let s = TestServer::start_embedded(config).await;
    let squatter = s.new_user("boss").await;
    s.stop().await;

    let mut config = test_config(dir.path());
    config.bootstrap_admin = bootstrap("  BOSS@example.com ", "Other Name", "bootstrap password");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let refused = service_auth::server::run(listener, config.clone(), CancellationToken::new(), |_| {}).await;
    let message = refused.expect_err("start-up must refuse to promote an account anyone could have made").to_string();
    assert!(message.contains("already exists") && message.contains("PROMOTE_EXISTING"), "{message}");

    config.bootstrap_admin.as_mut().unwrap().promote_existing = true;
    let s = TestServer::start_embedded(config).await;
    assert_eq!(s.session(&squatter.cookie).await, Value::Null, "the squatter's session ended");
    let r = s.sign_in_body(&json!({"email": squatter.email, "password": PASSWORD})).await;
    assert_auth_error(&r, 401, "INVALID_EMAIL_OR_PASSWORD");
    let admin = s.login("boss@example.com", "bootstrap password").await;
    let users = s.users(&admin).await;
    assert_eq!(users.len(), 1, "no second account: {users:?}");
    assert_eq!((users[0]["id"].clone(), users[0]["role"].clone()), (json!(squatter.id), json!("admin")));
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_bootstrap_nobody_is_admin() {
    let s = TestServer::start_adjusted(|c| c.bootstrap_admin = None).await;
    let r = s.sign_in_body(&json!({"email": ADMIN_EMAIL, "password": ADMIN_PASSWORD})).await;
    assert_auth_error(&r, 401, "INVALID_EMAIL_OR_PASSWORD");
    let first = s.new_user("first").await;
    assert_eq!(first.user["role"], "user", "the first account is no admin");
    assert_admin_error(&s.list_users(Some(&first.cookie)).await, 403);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_create_command_creates_and_promotes_only_when_told() {
    let root = tempfile::tempdir().unwrap();
    let create = |args: &[&str], env: &[(&str, &str)], stdin: &str| {
        let mut all = vec!["admin", "create"];
        all.extend_from_slice(args);
        run_binary(root.path(), &all, env, stdin)
    };
    let (status, out, err) =
        create(&["--email", "cli@example.com", "--name", "Cli Admin", "--password-stdin"], &[], "cli password 123\n");
    assert!(status.success(), "admin create: {status:?} {out:?} {err:?}");

    let server = ChildServer::spawn(root.path(), &[]).await;
    let cli = server.login("cli@example.com", "cli password 123").await;
    let me = server.session(&cli).await;
    assert_eq!((me["user"]["role"].clone(), me["user"]["name"].clone()), (json!("admin"), json!("Cli Admin")));
    let reg = server.new_user("reg").await;
    // While a server holds the directory the command refuses.
    let (status, out, err) =
        create(&["--email", "x@example.com", "--name", "X", "--password-stdin"], &[], "x password 123\n");
    assert!(!status.success(), "admin create while serving must fail: {out:?} {err:?}");
    assert!(!(out.trim().is_empty() && err.trim().is_empty()), "with a message");
    assert!(server.terminate().success());

    // An existing account is refused without --promote-existing, and nothing changes.
    let promote = ["--email", "reg@example.com", "--name", "Reg"];
    let env = [("SERVICE_AUTH_ADMIN_PASSWORD", "env password 123")];
    let (status, out, err) = create(&promote, &env, "");
    assert!(!status.success(), "admin create on a registered e-mail must refuse: {out:?} {err:?}");
    assert!(err.contains("already exists") && err.contains("--promote-existing"), "says why and how: {err:?}");
    let server = ChildServer::spawn(root.path(), &[]).await;
    assert_eq!(server.list_users(Some(&reg.cookie)).await.status, 403, "not promoted");
    assert!(server.terminate().success());

    // With the flag: promoted, the given password replaces the old one, and the old sessions end.
    let (status, out, err) = create(&[&promote[..], &["--promote-existing"]].concat(), &env, "");
    assert!(status.success(), "admin create --promote-existing: {status:?} {out:?} {err:?}");
    let server = ChildServer::spawn(root.path(), &[]).await;
    assert_eq!(server.list_users(Some(&reg.cookie)).await.status, 401, "the old session ended");
    let reg_admin = server.login("reg@example.com", "env password 123").await;
    assert_eq!(server.list_users(Some(&reg_admin)).await.status, 200, "promoted");
    let users = server.users(&cli).await;
    assert_eq!(users.len(), 2, "x@example.com was not created: {users:?}");
    let r = server.sign_in_body(&json!({"email": "reg@example.com", "password": PASSWORD})).await;
    assert_auth_error(&r, 401, "INVALID_EMAIL_OR_PASSWORD");
    assert!(server.terminate().success());
}

// ---------------------------------------------------------------------------------------------------------------
// Configuration

#[test]
fn bad_configuration_stops_start_up_naming_the_key() {
    let root = tempfile::tempdir().unwrap();
    let cases = [
        ("bogus_key = 1\n", "bogus_key"),
        ("listen = \"not an address\"\n", "listen"),
        ("[session]\nexpires_in = 5\n", "expires_in"),
        ("[roles]\nallowed = \"admin\"\n", "allowed"),
    ];
    for (i, (text, key)) in cases.iter().enumerate() {
        let file = format!("bad-{i}.toml");
        std::fs::write(root.path().join(&file), text).unwrap();
        let (status, out, err) = run_binary(root.path(), &["serve", "--config", &file], &[], "");
        assert!(!status.success(), "config {text:?} was accepted");
        assert!(err.contains(key) || out.contains(key), "config {text:?}: message does not name {key:?}: {err:?}");
    }
    // ./config.toml is read when present.
    std::fs::write(root.path().join("config.toml"), "bogus_key = 1\n").unwrap();
    let (status, _, err) = run_binary(root.path(), &["serve"], &[], "");
    assert!(!status.success() && err.contains("bogus_key"), "./config.toml not read: {err:?}");
}

// ---------------------------------------------------------------------------------------------------------------
// Session lifetime, with short configured durations

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_used_session_slides_and_the_refresh_is_durable() {
    let dir = tempfile::tempdir().unwrap();
    let config = |update_age_secs| {
        let mut c = test_config(dir.path());
        c.session.expires_in_secs = 3600;
        c.session.update_age_secs = update_age_secs;
        c.session.short_expires_in_secs = 3600;
        c
    };
    let s = TestServer::start_with(config(1)).await;
    let u = s.new_user("alice").await;
    let r = s.sign_in_body(&json!({"email": u.email, "password": PASSWORD, "rememberMe": false})).await;
    let (_, _, short) = r.triple();
    let short = short.unwrap();
    let before = s.session(&u.cookie).await["session"].clone();
    let short_before = s.session(&short).await["session"].clone();
    tokio::time::sleep(Duration::from_millis(1500)).await;

    let r = s.get_session_resp(Some(&u.cookie)).await;
    let c = r.session_cookie().expect("a refreshed session re-sends the cookie");
    assert_eq!(c.value, u.cookie, "same token");
    assert_eq!(c.attr("max-age"), Some("3600"));
    let after = r.json()["session"].clone();
    assert!(ts(&after["expiresAt"]) >= ts(&before["expiresAt"]) + 1000, "expiresAt moved: {before} -> {after}");
    assert!((ts(&after["expiresAt"]) - now_ms() - 3_600_000).abs() < 5_000, "expires an hour from now: {after}");
    assert!(ts(&after["updatedAt"]) > ts(&before["updatedAt"]));
    assert_eq!(after["createdAt"], before["createdAt"]);
    assert_eq!(after["id"], before["id"]);
    // Not again right away.
    let r = s.get_session_resp(Some(&u.cookie)).await;
    assert!(r.session_cookie().is_none(), "refreshed again within update_age");

    // rememberMe:false never slides.
    let r = s.get_session_resp(Some(&short)).await;
    assert!(r.session_cookie().is_none(), "a rememberMe:false session slid");
    assert_eq!(r.json()["session"], short_before);
    s.stop().await;

    // Restarted with a long update age, so the check below reads what is on disk and does not slide it again (a
    // restart on a loaded machine can take longer than one second).
    let s = TestServer::start_with(config(3600)).await;
    assert_eq!(s.session(&u.cookie).await["session"]["expiresAt"], after["expiresAt"], "refresh survived restart");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_session_is_no_session() {
    let s = TestServer::start_adjusted(|c| {
        c.session.expires_in_secs = 2;
        c.session.update_age_secs = 1;
        c.session.short_expires_in_secs = 2;
    })
    .await;
    let r = s.sign_in_body(&json!({"email": ADMIN_EMAIL, "password": ADMIN_PASSWORD})).await;
    assert_eq!(r.session_cookie().unwrap().attr("max-age"), Some("2"));
    let (_, _, admin) = r.triple();
    let admin = admin.unwrap();
    let r = s.sign_in_body(&json!({"email": ADMIN_EMAIL, "password": ADMIN_PASSWORD, "rememberMe": false})).await;
    let (_, _, short) = r.triple();
    let short = short.unwrap();
    tokio::time::sleep(Duration::from_millis(2500)).await;
    for cookie in [&admin, &short] {
        assert_eq!(s.get_session_resp(Some(cookie)).await.json(), Value::Null, "expired session");
        assert_admin_error(&s.list_users(Some(cookie)).await, 401);
    }
}
