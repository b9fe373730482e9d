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
    assert_eq!(
        err.trim(),
        "service-auth: cannot write the backup to no/such/folder/b.redb: the folder no/such/folder does not exist \
         (create it first)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_announces_itself_only_once_it_serves_and_says_how_to_add_an_administrator() {
    let root = tempfile::tempdir().unwrap();
    let server = ChildServer::spawn(root.path(), &[("SERVICE_AUTH_LOG", "info")]).await;
    assert_eq!(server.get("/healthz").send().await.status, 200, "it serves once it says so");
    let err = server.stderr();
    // Where to go next: the console's address, with the port actually served.
    let console = format!("the administration console is at {}/admin/", server.base);
    assert!(err.contains(&console), "{err}");
    let account = format!("each user's account page is at {}/account/", server.base);
    assert!(err.contains(&account), "{err}");
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

    // A second server on the same (locked) directory fails without ever saying "listening on", and says which
    // directory and which process holds it.
    let (status, out, err) = run_binary(root.path(), &["serve"], &[], "");
    assert!(!status.success());
    assert!(!out.contains("listening on"), "announced a server that never served: {out}");
    let data = root.path().join("data");
    let expected = format!(
        "the data directory {} is in use by another service-auth process (PID {})",
        data.display(),
        server.child.id()
    );
    assert!(err.contains(&expected), "{err}");
    let (_, _, err) = run_binary(root.path(), &["export", "--out", "x.jsonl"], &[], "");
    assert!(err.contains(&expected), "{err}");
    assert!(server.terminate().success());

    // With an administrator there is no such hint.
    let mut env = BOOTSTRAP_ENV.to_vec();
    env.push(("SERVICE_AUTH_LOG", "info"));
    let server = ChildServer::spawn(root.path(), &env).await;
    assert_eq!(server.get("/healthz").send().await.status, 200);
    assert!(!server.stderr().contains("no administrator yet"), "{}", server.stderr());
    assert!(server.terminate().success());
}

/// Before: `cargo install` (the README's first command) built a 125 MiB binary, its line tables and symbols kept.
/// What keeps it small is checked here, in every test run: the release profile drops the debug information, and
/// the profiling profile is where line tables are kept. The size itself is checked by tests/binary.sh whenever it
/// builds the release binary: in CI (`./test --size`), `./test --release`, a suite run alone.
#[test]
fn the_release_profile_keeps_the_installed_binary_small() {
    let manifest: toml::Table = include_str!("../../Cargo.toml").parse().expect("Cargo.toml");
    let profile = |name: &str| manifest["profile"][name].as_table().unwrap_or_else(|| panic!("[profile.{name}]"));
    let release = profile("release");
    let no_debug = [toml::Value::Boolean(false), toml::Value::Integer(0), toml::Value::String("none".into())];
    assert!(release.get("debug").is_none_or(|d| no_debug.contains(d)), "release keeps debug information: {release:?}");
    // Stripping only the debug information left the symbol table: 27.5 MB.
    let stripped = [toml::Value::String("symbols".into()), toml::Value::Boolean(true)];
    assert!(release.get("strip").is_some_and(|s| stripped.contains(s)), "release is not stripped: {release:?}");
    let profiling = profile("profiling");
    assert_eq!(profiling["inherits"].as_str(), Some("release"), "{profiling:?}");
    assert_eq!(profiling["debug"].as_str(), Some("line-tables-only"), "{profiling:?}");
    assert_eq!(profiling["strip"].as_str(), Some("none"), "{profiling:?}");
}
