//! `GET /api/admin/audit/export`: many entries, streamed oldest first, every one present once, in both formats, and
//! the time window.

use serde_json::{Value, json};

use super::harness::TestServer;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_export_is_complete_and_in_order() {
    let server = TestServer::start().await;
    let client = &server.client;
    let admin = client.admin_session().await;
    let user = client.new_user("exported").await;
    // 2,504 role changes, each an audit entry, from 8 writers at once (one account each, its role toggled every
    // time): several pages of the export.
    let mut targets = Vec::new();
    for w in 0..8 {
        targets.push(client.new_user(&format!("exported{w}")).await.id);
    }
    let writers: Vec<_> = targets
        .into_iter()
        .map(|id| {
            let (client, admin) = (client.clone(), admin.clone());
            tokio::spawn(async move {
                for n in 0..313 {
                    let role = if n % 2 == 0 { "qa_manager" } else { "user" };
                    let r = client.patch_user(&admin, &json!({"userId": id, "role": role})).await;
                    assert_eq!(r.status, 200, "{}", r.text);
                }
            })
        })
        .collect();
    for w in writers {
        w.await.unwrap();
    }
    // What the paged API lists, newest first, reversed.
    let mut paged = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let path = match &cursor {
            Some(c) => format!("/api/admin/audit?limit=500&cursor={c}"),
            None => "/api/admin/audit?limit=500".to_owned(),
        };
        let page = client.get(&path).cookie(&admin).send().await.json();
        paged.extend(page["entries"].as_array().unwrap().iter().map(|e| e["id"].as_str().unwrap().to_owned()));
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => break,
        }
    }
    paged.reverse();
    assert!(paged.len() > 2500, "{}", paged.len());

    let exported = client.get("/api/admin/audit/export").cookie(&admin).send().await;
    assert_eq!(exported.status, 200, "{}", exported.text);
    assert_eq!(exported.content_type(), "application/x-ndjson");
    assert!(exported.header("content-disposition").unwrap().starts_with("attachment"));
    let rows: Vec<Value> = exported.text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let ids: Vec<String> = rows.iter().map(|r| r["id"].as_str().unwrap().to_owned()).collect();
    assert_eq!(ids, paged, "the export is not the whole log in order");
    // The documented shape: these keys, in this order, and no other.
    let shape = ["id", "at", "action", "actor_id", "target_id", "ip_address", "detail"];
    for (line, r) in exported.text.lines().zip(&rows) {
        assert_eq!(r.as_object().unwrap().len(), shape.len(), "{line}");
        let places: Vec<usize> = shape.iter().map(|k| line.find(&format!("\"{k}\":")).unwrap()).collect();
        assert!(places.windows(2).all(|w| w[0] < w[1]), "{line}");
    }

    let csv = client.get("/api/admin/audit/export?format=csv").cookie(&admin).send().await;
    assert_eq!(csv.content_type(), "text/csv; charset=utf-8");
    let lines: Vec<&str> = csv.text.split("\r\n").filter(|l| !l.is_empty()).collect();
    assert_eq!(lines[0], "id,at,action,actor_id,target_id,ip_address,detail");
    assert_eq!(lines.len(), paged.len() + 1);
    assert!(lines[1..].iter().zip(&paged).all(|(line, id)| line.starts_with(&format!("\"{id}\","))));

    // A window: from the 1,000th entry's time to the 2,000th's, exclusive.
    let at = |i: usize| rows[i]["at"].as_str().unwrap().to_owned();
    let (from, to) = (at(1000), at(2000));
    let windowed = client.get(&format!("/api/admin/audit/export?from={from}&to={to}")).cookie(&admin).send().await.text;
    let inside: Vec<Value> = windowed.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    // The stored time is finer than the millisecond shown, so an entry in a boundary's millisecond may fall on
    // either side of it; every other entry must be exactly where the window says.
    let count = |keep: &dyn Fn(&str) -> bool| rows.iter().filter(|r| keep(r["at"].as_str().unwrap())).count();
    let surely = count(&|at| at > from.as_str() && at < to.as_str());
    let at_most = count(&|at| at >= from.as_str() && at <= to.as_str());
    assert!((surely..=at_most).contains(&inside.len()), "{} not in {surely}..={at_most}", inside.len());
    assert!(inside.iter().all(|r| (from.as_str()..=to.as_str()).contains(&r["at"].as_str().unwrap())));

    for bad in ["format=xml", "from=yesterday", "limit=5"] {
        let refused = client.get(&format!("/api/admin/audit/export?{bad}")).cookie(&admin).send().await;
        assert_eq!(refused.status, 400, "{bad}");
    }
    let refused = client.get("/api/admin/audit/export").cookie(&user.cookie).send().await;
    assert_eq!(refused.status, 403);
    server.stop().await;
}

/// Not a check: the server's resident memory while it streams an export of `AUDIT_EXPORT_ROWS` (default 1,000,000)
/// entries, written straight into a fresh store first. Prints the row count, the bytes, the time, and the
/// process's resident set before, at its peak during, and after. Run by hand (BENCHMARKS.md):
/// `cargo test --release --test api measure_audit_export_memory -- --ignored --nocapture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement, run by hand"]
async fn measure_audit_export_memory() {
    use super::harness::{BOOTSTRAP_ENV, ChildServer};
    use service_auth::store::{AuditRecordV1, Store, StoreOp};
    let rows: usize = std::env::var("AUDIT_EXPORT_ROWS").ok().and_then(|v| v.parse().ok()).unwrap_or(1_000_000);
    let root = tempfile::tempdir().unwrap();
    let data = root.path().join("data");
    let dir = data.clone();
    tokio::task::spawn_blocking(move || {
        let store = Store::open(&dir).unwrap();
        // Recent entries (retention deletes those older than a year), one a millisecond, ending now.
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64;
        let start = now - rows as u64;
        for chunk in 0..rows.div_ceil(10_000) {
            let ops: Vec<StoreOp> = (chunk * 10_000..((chunk + 1) * 10_000).min(rows))
                .map(|n| {
                    let id = uuid::Builder::from_unix_timestamp_millis(start + n as u64, &[n as u8; 10]).into_uuid();
                    StoreOp::PutAudit(AuditRecordV1 {
                        id: id.into_bytes(),
                        at_ms: (start + n as u64) as i64,
                        action: "user.role_changed".into(),
                        actor: Some([1; 16]),
                        target: Some([2; 16]),
                        ip_address: "203.0.113.7".into(),
                        detail: "qa_manager -> pharmacist_in_charge".into(),
                    })
                })
                .collect();
            store.commit(&ops).unwrap();
        }
    })
    .await
    .unwrap();
    // Room for them all beside the bootstrap's entries (the default cap is 1,000,000).
    std::fs::write(root.path().join("config.toml"), "[audit]\nmax_entries = 5000000\n").unwrap();
    let server = ChildServer::spawn(root.path(), BOOTSTRAP_ENV).await;
    let pid = server.child.id();
    let rss = |field: &str| -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        let line = status.lines().find(|l| l.starts_with(field)).unwrap().to_owned();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    };
    let admin = server.client.admin_session().await;
    let before = rss("VmRSS:");
    let started = std::time::Instant::now();
    let http = reqwest::Client::new();
    let mut answer = http
        .get(format!("{}/api/admin/audit/export?format=ndjson", server.client.base))
        .header("cookie", format!("{}={admin}", super::harness::COOKIE))
        .send()
        .await
        .unwrap();
    let (mut bytes, mut lines, mut peak) = (0usize, 0usize, before);
    while let Some(chunk) = answer.chunk().await.unwrap() {
        bytes += chunk.len();
        lines += chunk.iter().filter(|b| **b == b'\n').count();
        peak = peak.max(rss("VmRSS:"));
    }
    let after = rss("VmRSS:");
    eprintln!(
        "export of {lines} entries ({rows} written + the bootstrap's), {:.1} MB in {:.1} s; server RSS before {} MiB, \
         peak during {} MiB, after {} MiB",
        bytes as f64 / 1e6,
        started.elapsed().as_secs_f64(),
        before / 1024,
        peak / 1024,
        after / 1024
    );
    assert!(lines > rows);
    drop(server);
}
