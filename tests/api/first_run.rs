//! What a newcomer meets first: `check-config`, error messages that name the key, variable or path, the start-up
//! lines of `serve`, and relative paths in a configuration file.

use std::path::Path;
use std::process::Command;

use super::harness::*;

/// Runs the binary in `dir` with no service-auth variable set but `env`. Returns (exit code, stdout, stderr).
fn run_clean(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_service-auth"));
    cmd.args(args).current_dir(dir);
    for (key, _) in std::env::vars() {
        if key.starts_with("SERVICE_AUTH_") {
            cmd.env_remove(key);
        }
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run service-auth");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn check_config_summarises_a_good_file_and_names_the_key_of_a_bad_one() {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("conf");
    std::fs::create_dir(&conf).unwrap();
    std::fs::write(conf.join("auth.toml"), "data_dir = \"state\"\n[metrics]\nlisten = \"127.0.0.1:9100\"\n").unwrap();
    let (code, out, err) = run_clean(dir.path(), &["check-config", "--config", "conf/auth.toml"], &[]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out.lines().count(), 1, "{out}");
    assert!(out.starts_with("configuration OK (conf/auth.toml): listen 127.0.0.1:3000"), "{out}");
    assert!(out.contains("data_dir conf/state,"), "a relative data_dir is the file's folder's: {out}");
    assert!(out.contains("metrics 127.0.0.1:9100"), "{out}");
    // The environment still wins, relative to where the command runs.
    let (_, out, _) =
        run_clean(dir.path(), &["check-config", "--config", "conf/auth.toml"], &[("SERVICE_AUTH_DATA_DIR", "x")]);
    assert!(out.contains("data_dir x,"), "{out}");
    assert!(out.contains("data key x/data.key,"), "the key is in the data directory unless named: {out}");
    // Several nodes: the summary says that each needs the same key file.
    let (_, out, _) = run_clean(
        dir.path(),
        &["check-config", "--config", "conf/auth.toml"],
        &[
            ("SERVICE_AUTH_STORE_BACKEND", "postgres"),
            ("SERVICE_AUTH_STORE_URL", "postgres://db.internal/auth"),
            ("SERVICE_AUTH_DATA_KEY_FILE", "/run/keys/auth.key"),
        ],
    );
    assert!(out.contains("data key /run/keys/auth.key (PostgreSQL: every node needs this same key file)"), "{out}");

    let cases: &[(&str, &str)] = &[
        ("[hashing]\nmemory_kib = 1024\n", "`hashing.memory_kib` = 1024 is below"),
        (
            "listen = \"127.0.0.1:1\"\n\n[limits]\nmax_conections = 5\n",
            "line 4: `limits.max_conections`: unknown field",
        ),
        ("[log]\nformat = \"xml\"\n", "line 2: `log.format`"),
    ];
    for (text, expected) in cases {
        std::fs::write(conf.join("bad.toml"), text).unwrap();
        let (code, out, err) = run_clean(dir.path(), &["check-config", "--config", "conf/bad.toml"], &[]);
        assert_eq!(code, Some(2), "{text}: {out}{err}");
        assert!(err.contains("conf/bad.toml") && err.contains(expected), "{text}: {err}");
    }
    let (code, _, err) =
        run_clean(dir.path(), &["check-config", "--config", "conf/auth.toml"], &[("SERVICE_AUTH_LOG", "[[")]);
    assert_eq!(code, Some(2));
    assert!(err.contains("the environment: `SERVICE_AUTH_LOG`") && !err.contains("auth.toml"), "{err}");
}

#[test]
fn backup_into_a_missing_folder_names_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let (status, _, err) = run_binary(dir.path(), &["backup", "--out", "no/such/folder/b.redb"], &[], "");
    assert!(!status.success());
    assert!(err.contains("no/such/folder/b.redb"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_announces_itself_only_once_it_serves_and_says_how_to_add_an_administrator() {
    let root = tempfile::tempdir().unwrap();
    let server = ChildServer::spawn(root.path(), &[("SERVICE_AUTH_LOG", "info")]).await;
    assert_eq!(server.get("/healthz").send().await.status, 200, "it serves once it says so");
    let err = server.stderr();
    assert!(err.contains("no administrator yet") && err.contains("service-auth admin create"), "{err}");
    assert!(
        err.contains("config=none") && err.contains(&format!("data_dir={}", root.path().join("data").display())),
        "{err}"
    );
    assert!(!err.contains("Some("), "{err}");
    // The data key is made at first start, private, and announced by its path only.
    let key = root.path().join("data/data.key");
    let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&key).unwrap().permissions());
    assert_eq!((mode & 0o777, std::fs::read(&key).unwrap().len()), (0o600, 32));
    assert!(err.contains("created the data key"), "{err}");

    // A second server on the same (locked) directory fails without ever saying "listening on".
    let (status, out, err) = run_binary(root.path(), &["serve"], &[], "");
    assert!(!status.success());
    assert!(!out.contains("listening on"), "announced a server that never served: {out}");
    assert!(!err.is_empty());
    assert!(server.terminate().success());

    // With an administrator there is no such hint.
    let mut env = BOOTSTRAP_ENV.to_vec();
    env.push(("SERVICE_AUTH_LOG", "info"));
    let server = ChildServer::spawn(root.path(), &env).await;
    assert_eq!(server.get("/healthz").send().await.status, 200);
    assert!(!server.stderr().contains("no administrator yet"), "{}", server.stderr());
    assert!(server.terminate().success());
}

/// README's walk-through, pasted as written into `sh` (only the address changed), against a real server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_walk_through_runs_as_written() {
    for tool in ["curl", "jq"] {
        let found = Command::new("sh").args(["-c", &format!("command -v {tool}")]).output().unwrap().status.success();
        assert!(
            found,
            "the walk-through needs {tool}: install it (Debian: apt-get install -y {tool}), as .ci/run does"
        );
    }
    let readme = include_str!("../../README.md");
    let section = &readme[readme.find("## A walk through").expect("the walk-through section")..];
    let block = section.split("```sh\n").nth(1).and_then(|b| b.split("```").next()).expect("its sh block");
    assert!(block.contains("B=http://127.0.0.1:3000\n"), "{block}");

    let root = tempfile::tempdir().unwrap();
    let env = [
        ("SERVICE_AUTH_BOOTSTRAP_ADMIN_EMAIL", "admin@example.com"),
        ("SERVICE_AUTH_BOOTSTRAP_ADMIN_PASSWORD", "a long passphrase"),
    ];
    let server = ChildServer::spawn(root.path(), &env).await;
    let script = block.replace("B=http://127.0.0.1:3000\n", &format!("B={}\n", server.base));
    let out = tokio::task::spawn_blocking(move || Command::new("sh").args(["-eu", "-c", &script]).output().unwrap())
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(!stdout.contains("\"error\"") && !stdout.contains("\"code\""), "a call failed:\n{stdout}");
    assert_eq!(stdout.matches("{\"success\":true}").count(), 4, "three PATCHes and the sign-out:\n{stdout}");
    assert!(stdout.contains("\"slug\":\"st-mary\""), "{stdout}");
    let admin = server.login("admin@example.com", "a long passphrase").await;
    let alice = server.users(&admin).await.into_iter().find(|u| u["email"] == "alice@example.com").unwrap();
    assert_eq!(alice["role"], "pharmacist_in_charge");
    assert!(alice["organization_id"].is_string() && alice["banned"] == false, "{alice}");
}
