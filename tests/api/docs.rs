//! What docs/reference.md promises about an answer's shape, checked against the answer.

use std::path::Path;

use serde_json::json;

use super::harness::*;

/// Before: the reference promised `"url": null` on a sign-in without `callbackURL`; the server (like better-auth
/// 1.7.25, whose `url` is the absent `callbackURL`, dropped by JSON) sends no `url` key at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reference_describes_a_sign_in_without_callback_as_answered() {
    let reference = include_str!("../../docs/reference.md");
    let section = &reference[reference.find("### `POST /api/auth/sign-in/email`").expect("the sign-in section")..];
    let row = section.lines().find(|l| l.starts_with("| 200 |")).expect("its 200 row");
    assert!(!row.contains(r#""url": null"#), "{row}");
    assert!(row.starts_with(r#"| 200 | `{"redirect": false, "token", "user": User}`"#), "{row}");

    let s = TestServer::start().await;
    let u = s.new_user("plain").await;
    let body = s.sign_in_body(&json!({"email": u.email, "password": PASSWORD})).await.json();
    let mut keys: Vec<&str> = body.as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(keys, ["redirect", "token", "user"]);
    assert_eq!(body["redirect"], false);
}

// ---------------------------------------------------------------------------------------------------------------
// The README and every guide in docs/guides/, run as a reader pastes them.
//
// Each `sh` or `bash` block of a document runs, in order, in one bash (`-e`, so a failing command stops it), with
// the binary `cargo test` built first on PATH as `service-auth`, in a scratch directory of the test's own, with
// `PORT` set to a free loopback port (the documents start their server on `${PORT:-3000}`: the one substitution,
// and one a reader may use too). A block directly followed by an `output` block must print exactly that on
// standard output, where `…` stands for any text within a line and a line of `…` alone for any lines; a block
// without one must print nothing. `<!-- not run: why -->` on the line before a block leaves it out (installing,
// systemd, a command that would run this very test): keep those few.

/// One runnable block: where it starts (1-based line), its text, what it must print (if shown).
struct Block {
    line: usize,
    text: String,
    output: Option<String>,
}

/// The runnable blocks of a Markdown document, in order. Panics on a document the rules above do not allow: an
/// `output` block after nothing runnable, a `not run` marker without a reason or before no block.
fn runnable_blocks(name: &str, doc: &str) -> Vec<Block> {
    let lines: Vec<&str> = doc.lines().collect();
    let mut blocks: Vec<Block> = Vec::new();
    // Whether the last fenced block seen ran (only blank lines may stand between it and an `output` block).
    let mut last_ran = false;
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let Some(info) = line.strip_prefix("```") else {
            if !line.trim().is_empty() {
                last_ran = false;
            }
            assert!(
                !line.starts_with("<!-- not run") || lines.get(i + 1).is_some_and(|l| l.starts_with("```")),
                "{name}:{}: a `not run` marker stands directly before the block it leaves out",
                i + 1
            );
            i += 1;
            continue;
        };
        let start = i;
        let end = (i + 1..lines.len())
            .find(|&j| lines[j].starts_with("```"))
            .unwrap_or_else(|| panic!("{name}:{}: the block is never closed", start + 1));
        let text = lines[start + 1..end].iter().map(|l| format!("{l}\n")).collect::<String>();
        let marker = start.checked_sub(1).map(|p| lines[p]).filter(|l| l.starts_with("<!-- not run"));
        if let Some(marker) = marker {
            let reason = marker.trim_start_matches("<!-- not run").trim_end_matches("-->").trim_start_matches(':');
            assert!(!reason.trim().is_empty(), "{name}:{}: say why the block is not run", start);
        }
        match info.trim() {
            "sh" | "bash" if marker.is_none() => {
                blocks.push(Block { line: start + 1, text, output: None });
                last_ran = true;
            }
            "output" => {
                assert!(
                    last_ran && blocks.last().is_some_and(|b| b.output.is_none()),
                    "{name}:{}: an `output` block follows the block it shows, which runs",
                    start + 1
                );
                blocks.last_mut().unwrap().output = Some(text);
                last_ran = false;
            }
            _ => last_ran = false,
        }
        i = end + 1;
    }
    blocks
}

/// Whether `actual` is what `expected` shows: line by line, `…` any text within a line, a line of `…` alone any
/// number of lines. Trailing spaces and blank lines at the end do not count.
fn output_matches(expected: &str, actual: &str) -> bool {
    fn norm(s: &str) -> Vec<&str> {
        let mut v: Vec<&str> = s.lines().map(str::trim_end).collect();
        while v.last().is_some_and(|l| l.is_empty()) {
            v.pop();
        }
        v
    }
    fn line_matches(pattern: &str, text: &str) -> bool {
        let mut parts = pattern.split('…');
        let first = parts.next().unwrap_or("");
        let Some(mut rest) = text.strip_prefix(first) else { return false };
        let parts: Vec<&str> = parts.collect();
        for (k, part) in parts.iter().enumerate() {
            if k == parts.len() - 1 {
                return rest.ends_with(part);
            }
            match rest.find(part) {
                Some(at) => rest = &rest[at + part.len()..],
                None => return false,
            }
        }
        rest.is_empty()
    }
    fn lines_match(p: &[&str], t: &[&str]) -> bool {
        match p.split_first() {
            None => t.is_empty(),
            Some((&"…", more)) => (0..=t.len()).any(|k| lines_match(more, &t[k..])),
            Some((first, more)) => {
                t.split_first().is_some_and(|(l, rest)| line_matches(first, l) && lines_match(more, rest))
            }
        }
    }
    lines_match(&norm(expected), &norm(actual))
}

#[test]
fn expected_output_matches_with_ellipses() {
    assert!(output_matches("{\"token\":\"…\",\"user\":{…}}\n", "{\"token\":\"abc\",\"user\":{\"id\":1}}\n"));
    assert!(output_matches("a\n…\nz\n", "a\nb\nc\nz"));
    assert!(output_matches("a\n…\nz\n", "a\nz\n"));
    assert!(!output_matches("{\"status\":true}\n", "{\"status\":false}\n"));
    assert!(!output_matches("a…b\n", "a-b-c\n"), "the text after the last … ends the line");
    assert!(!output_matches("one\n", "one\ntwo\n"), "no line more");
    assert!(!output_matches("…x…y\n", "y x\n"), "in order");
}

/// A loopback port free now (the document's server binds it a moment later).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Runs the document at `path` (from the repository's root) as the rules above say; panics with the block, what
/// it printed and its standard error when a block fails or prints something else than shown.
fn run_document(path: &str) {
    for tool in ["curl", "jq", "oathtool", "bash"] {
        let found = std::process::Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .unwrap()
            .status
            .success();
        assert!(
            found,
            "the guides need {tool}: install it (Debian: apt-get install -y {tool}), or run ./test, which does as root"
        );
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join(path)).unwrap_or_else(|e| panic!("{path}: {e}"));
    let blocks = runnable_blocks(path, &doc);
    assert!(!blocks.is_empty(), "{path} has no block to run");

    let dir = tempfile::tempdir().unwrap();
    let mut driver = String::from("set -e\n");
    for (n, block) in blocks.iter().enumerate() {
        let file = dir.path().join(format!("block-{n}.sh"));
        std::fs::write(&file, &block.text).unwrap();
        // The marker starts a line of its own whether or not the block's output ended with a newline.
        driver.push_str(&format!("printf '\\n\\036{n}\\036\\n'\n. '{}'\n", file.display()));
    }
    driver.push_str("printf '\\n\\036end\\036\\n'\n");
    let binary = Path::new(env!("CARGO_BIN_EXE_service-auth"));
    let path_var = format!("{}:{}", binary.parent().unwrap().display(), std::env::var("PATH").unwrap_or_default());
    let (stdout_file, stderr_file) = (dir.path().join("stdout"), dir.path().join("stderr"));
    let mut cmd = std::process::Command::new("bash");
    cmd.args(["-c", &driver])
        .current_dir(dir.path())
        .env("PATH", path_var)
        .env("PORT", free_port().to_string())
        .env("TMPDIR", dir.path())
        .stdin(std::process::Stdio::null())
        .stdout(std::fs::File::create(&stdout_file).unwrap())
        .stderr(std::fs::File::create(&stderr_file).unwrap());
    for (key, _) in std::env::vars() {
        if key.starts_with("SERVICE_AUTH_") || key == "BASE" || key == "CURL_HOME" {
            cmd.env_remove(key);
        }
    }
    // Its own process group, so that a server a document left running (or one a failed block never stopped) is
    // stopped with it.
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let mut child = cmd.spawn().expect("bash");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if std::time::Instant::now() > deadline {
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    let _ = std::process::Command::new("kill")
        .args(["-TERM", "--", &format!("-{}", child.id())])
        .stderr(std::process::Stdio::null())
        .status();
    let _ = child.kill();
    let _ = child.wait();
    let stdout = std::fs::read_to_string(&stdout_file).unwrap();
    let stderr = std::fs::read_to_string(&stderr_file).unwrap();

    let mut printed: Vec<(String, String)> = Vec::new();
    for part in stdout.split("\n\u{1e}").skip(1) {
        let (tag, text) = part.split_once("\u{1e}\n").expect("a marker");
        printed.push((tag.to_string(), text.to_string()));
    }
    for (n, block) in blocks.iter().enumerate() {
        let Some((_, out)) = printed.iter().find(|(tag, _)| *tag == n.to_string()) else { break };
        let finished =
            printed.iter().any(|(tag, _)| *tag == (n + 1).to_string() || (tag == "end" && n + 1 == blocks.len()));
        let show = |why: &str| -> ! {
            panic!(
                "{path}:{}: {why}\n--- the block:\n{}--- it printed:\n{out}\n--- standard error:\n{stderr}",
                block.line, block.text
            )
        };
        if !finished {
            show(match status {
                None => "still running after 5 minutes",
                Some(_) => "a command failed (bash -e stopped here)",
            });
        }
        match &block.output {
            Some(expected) if !output_matches(expected, out) => {
                show(&format!("printed something else than shown:\n{expected}"))
            }
            None if !out.trim().is_empty() => {
                show("printed something the document does not show (add an `output` block)")
            }
            _ => {}
        }
    }
    assert_eq!(
        printed.last().map(|(t, _)| t.as_str()),
        Some("end"),
        "{path}: the document did not run to its end\n{stdout}\n{stderr}"
    );
    assert!(status.is_some_and(|s| s.success()), "{path}: bash ended with {status:?}\n{stderr}");
}

#[test]
fn every_guide_is_run() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut guides: Vec<String> = std::fs::read_dir(root.join("docs/guides"))
        .unwrap()
        .map(|e| format!("docs/guides/{}", e.unwrap().file_name().to_string_lossy()))
        .filter(|p| p.ends_with(".md"))
        .collect();
    guides.sort();
    let listed: Vec<String> =
        DOCUMENTS.iter().filter(|d| d.starts_with("docs/guides/")).map(|d| d.to_string()).collect();
    let mut sorted = listed.clone();
    sorted.sort();
    assert_eq!(sorted, guides, "DOCUMENTS lists every guide in docs/guides/ (and only those besides the README)");
}

/// One test per document (they run in parallel), and `DOCUMENTS`, which `every_guide_is_run` holds against
/// docs/guides/.
macro_rules! documents {
    ($($name:ident => $path:literal),* $(,)?) => {
        const DOCUMENTS: &[&str] = &[$($path),*];
        $(
            #[test]
            fn $name() {
                run_document($path);
            }
        )*
    };
}

documents! {
    the_readme_runs_as_written => "README.md",
    first_steps_runs_as_written => "docs/guides/first-steps.md",
    two_factor_runs_as_written => "docs/guides/two-factor.md",
    api_keys_runs_as_written => "docs/guides/api-keys.md",
    usernames_runs_as_written => "docs/guides/usernames.md",
    organizations_runs_as_written => "docs/guides/organizations.md",
    mail_runs_as_written => "docs/guides/mail.md",
    webhooks_runs_as_written => "docs/guides/webhooks.md",
    administration_runs_as_written => "docs/guides/administration.md",
    sign_in_with_a_provider_runs_as_written => "docs/guides/sign-in-with-a-provider.md",
    scim_runs_as_written => "docs/guides/scim.md",
    sso_runs_as_written => "docs/guides/sso.md",
    front_end_runs_as_written => "docs/guides/front-end.md",
    operations_runs_as_written => "docs/guides/operations.md",
    migration_runs_as_written => "docs/guides/migration.md",
    sign_in_to_grafana_runs_as_written => "docs/guides/sign-in-to-grafana.md",
}

/// GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens.
fn anchor_of(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The text of a Markdown document outside its fenced blocks.
fn prose(doc: &str) -> Vec<&str> {
    let mut fenced = false;
    doc.lines()
        .filter(|l| {
            if l.starts_with("```") {
                fenced = !fenced;
                return false;
            }
            !fenced
        })
        .collect()
}

/// Before: the guides were cut out of the README by hand, and a link into a section that moved would lead nowhere.
/// Every relative link of the README, the guides and the pages they send readers to names a file that exists, and
/// its `#anchor` a heading of that file.
#[test]
fn the_readme_and_the_guides_link_to_what_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut checked = 0;
    for doc in DOCUMENTS.iter().chain(&["docs/testing.md", "docs/architecture.md"]) {
        let text = std::fs::read_to_string(root.join(doc)).unwrap();
        let folder = root.join(doc).parent().unwrap().to_path_buf();
        for line in prose(&text) {
            for link in line.split("](").skip(1).filter_map(|rest| rest.split(')').next()) {
                if link.contains("://") || link.starts_with("mailto:") || link.contains(' ') {
                    continue;
                }
                let (file, anchor) = link.split_once('#').unwrap_or((link, ""));
                let target = if file.is_empty() { root.join(doc) } else { folder.join(file) };
                assert!(target.exists(), "{doc}: the link {link} leads to no file");
                if !anchor.is_empty() {
                    let target_text = std::fs::read_to_string(&target).unwrap();
                    let anchors: Vec<String> = prose(&target_text)
                        .into_iter()
                        .filter(|l| l.starts_with('#'))
                        .map(|l| anchor_of(l.trim_start_matches('#')))
                        .collect();
                    assert!(
                        anchors.iter().any(|a| a == anchor),
                        "{doc}: the link {link} names no heading of {}",
                        if file.is_empty() { doc } else { file }
                    );
                }
                checked += 1;
            }
        }
    }
    assert!(checked > 50, "only {checked} links found: the scan is broken");
}

#[test]
fn anchors_are_githubs() {
    assert_eq!(
        anchor_of(" Organizations as teams: `/api/auth/organization/*`"),
        "organizations-as-teams-apiauthorganization"
    );
    assert_eq!(anchor_of("The console's screenshots"), "the-consoles-screenshots");
}
