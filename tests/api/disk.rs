//! A genuinely full filesystem: a small tmpfs mounted by the test (CI runs as root), filled, then freed. Before
//! the fix, redb latched the first I/O error and every later write was refused until a restart.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::harness::*;

/// A tmpfs of `mib` MiB on a fresh directory, unmounted when dropped.
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    fn mount(mib: u32) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={mib}m"), "tmpfs"])
            .arg(dir.path())
            .status()
            .expect("run mount");
        // No skipping: this test exists to run against a real full disk (CI and developers run as root).
        assert!(status.success(), "mount -t tmpfs failed ({status}); this test needs root");
        Self { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(self.dir.path()).status();
    }
}

/// Writes a file until the filesystem has no room left.
fn fill(path: &Path) -> PathBuf {
    let mut file = std::fs::File::create(path).expect("create filler");
    let chunk = vec![0xA5u8; 64 * 1024];
    while file.write_all(&chunk).is_ok() {}
    let small = [0u8; 512];
    while file.write_all(&small).is_ok() {}
    let _ = file.sync_all();
    path.to_path_buf()
}

async fn readiness(s: &TestServer) -> (u16, Value) {
    let r = s.get("/readyz").send().await;
    (r.status, r.json())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_refuses_writes_then_recovers_without_a_restart() {
    let fs = Tmpfs::mount(16);
    let data = fs.path().join("data");
    // The embedded store's own behaviour (its file on disk): one node on it, also in two-node runs.
    let s = TestServer::start_embedded(test_config(&data)).await;
    let admin = s.admin_session().await;
    assert_eq!(readiness(&s).await.0, 200);

    let filler = fill(&fs.path().join("filler"));
    let mut acknowledged = Vec::new();
    let mut refused = None;
    for n in 0..20_000 {
        let slug = format!("org-{n}");
        match s.create_org(&admin, "Org", &slug).await.status {
            200 => acknowledged.push(slug),
            503 => {
                refused = Some(slug);
                break;
            }
            other => panic!("creating {slug}: {other}"),
        }
    }
    let refused = refused.expect("the full disk never refused a write");
    let (status, body) = readiness(&s).await;
    assert_eq!((status, body["status"].as_str()), (503, Some("unavailable")), "{body}");
    assert_eq!(s.create_org(&admin, "Org", "while-full").await.status, 503, "a write got through a full disk");
    assert_eq!(s.orgs(&admin).await.len(), acknowledged.len(), "reads go on, showing only what was acknowledged");

    std::fs::remove_file(filler).expect("free the space");
    let started = Instant::now();
    while readiness(&s).await.0 != 200 {
        assert!(started.elapsed() < Duration::from_secs(30), "not ready 30 s after the disk had room again");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let r = s.create_org(&admin, "Org", "after-recovery").await;
    assert_eq!(r.status, 200, "writes are still refused after the disk had room again: {}", r.text);
    acknowledged.push("after-recovery".into());
    s.stop().await;

    let s = TestServer::start_embedded(test_config(&data)).await;
    let admin = s.admin_session().await;
    let slugs: Vec<String> = s.orgs(&admin).await.iter().map(|o| o["slug"].as_str().unwrap().to_owned()).collect();
    assert_eq!(slugs.len(), acknowledged.len(), "after a restart");
    assert!(acknowledged.iter().all(|a| slugs.contains(a)), "an acknowledged organization is missing");
    assert!(!slugs.contains(&refused), "the refused organization was written after all");
    s.stop().await;
}
