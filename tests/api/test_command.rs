//! The test command (`./test`, README): with a tool missing and no way to install it (not root, or no apt-get), it
//! stops at once with one line naming what to install and how, before setting anything up.

use std::os::unix::fs::symlink;
use std::path::Path;
use std::process::Command;

/// A directory of links to every program on PATH but `left_out`: PATH as it is here, with those tools gone.
fn path_without(farm: &Path, left_out: &[&str]) -> String {
    let path = std::env::var("PATH").unwrap();
    for dir in std::env::split_paths(&path) {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let link = farm.join(&name);
            if left_out.iter().any(|t| name == *t) || link.exists() {
                continue;
            }
            let _ = symlink(entry.path(), link);
        }
    }
    farm.display().to_string()
}

/// Runs `./test args` with `path`. Returns (exit code, stdout, stderr).
fn run_test_command(path: &str, args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("test"))
        .args(args)
        .env("PATH", path)
        .output()
        .expect("run ./test");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_missing_tool_it_cannot_install_stops_with_one_line_saying_what_to_install() {
    let farm = tempfile::tempdir().unwrap();
    // Without apt-get (and brew) it cannot install, as without root: the script installs only as root with apt-get.
    let path = path_without(farm.path(), &["curl", "jq", "apt-get", "brew"]);
    let (code, out, err) = run_test_command(&path, &["--check", "cargo"]);
    assert_eq!(code, Some(2), "{out}{err}");
    assert_eq!(out, "", "nothing set up or run before the message");
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    // (Another tool this machine lacks would be named in the same line.)
    let (names, how) = err.split_once(": install with `").unwrap_or_else(|| panic!("says how: {err}"));
    assert!(names.starts_with("./test: missing ") && names.contains("curl") && names.contains("jq"), "{err}");
    assert!(how.starts_with("sudo apt-get install") && how.contains(" curl") && how.contains(" jq"), "{err}");
    assert!(how.contains("as root ./test installs them itself"), "{err}");
    // No suite needs a package that brings a service: the metrics are checked with prometheus-client in .venv,
    // not with promtool, which comes only in the Prometheus server's package (prometheus.service, enabled at boot).
    assert!(!names.contains("promtool") && !how.contains("prometheus"), "{err}");

    // A suite that needs neither is not held up by them.
    let (_, _, err) = run_test_command(&path, &["--check", "systemd-unit"]);
    assert!(!err.contains("curl") && !err.contains("jq"), "{err}");

    // A misspelt suite is one line too, never a silent run of nothing.
    let (code, _, err) = run_test_command(&path, &["cargoo"]);
    assert_eq!(code, Some(2));
    assert_eq!(err.trim(), "./test: no suite named cargoo (./test --list names them)");
}

/// `./test` runs the timing tests (those that compare how long two answers take, each printing a `timing:` line)
/// after every suite has finished, one at a time, by the part of their name it filters on: `same_time`. A timing
/// test named otherwise runs beside the suites on a loaded machine, where it fails now and then (one did in CI).
/// So every test function of tests/api that prints `timing:` must have `same_time` in its name.
#[test]
fn every_timing_test_is_named_so_that_the_test_command_runs_it_alone() {
    let mut files = vec![Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/api")];
    let mut timing = Vec::new();
    while let Some(path) = files.pop() {
        if path.is_dir() {
            files.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
            continue;
        }
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let source = std::fs::read_to_string(&path).unwrap();
        let mut function = None;
        for line in source.lines() {
            let line = line.trim_start();
            for start in ["async fn ", "fn "] {
                if let Some(rest) = line.strip_prefix(start) {
                    function = rest.split(['(', '<']).next().map(str::to_owned);
                }
            }
            if line.contains("eprintln!(\"timing:") {
                let name = function.clone().unwrap_or_default();
                timing.push(name.clone());
                assert!(
                    name.contains("same_time"),
                    "{}: {name} measures timing but is not named *same_time*, so ./test would run it beside the suites",
                    path.display()
                );
            }
        }
    }
    // The check found the timing tests there are (and would fail if their `timing:` lines were renamed away).
    assert!(timing.len() >= 6, "timing tests found: {timing:?}");
}
