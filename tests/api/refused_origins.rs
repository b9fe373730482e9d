//! A browser page on an origin outside `trusted_origins` is logged once per origin: enough for an operator to see
//! which application they forgot to trust, without a line per request.

use super::harness::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_refused_origin_is_logged_once() {
    let root = tempfile::tempdir().unwrap();
    let server = ChildServer::spawn(root.path(), &[("SERVICE_AUTH_LOG", "warn")]).await;
    for origin in
        ["https://app.example.com", "https://app.example.com", "https://other.example", "https://app.example.com"]
    {
        let r = server.get("/api/auth/get-session").header("origin", origin).send().await;
        assert_eq!(r.status, 200);
        assert!(r.header("access-control-allow-origin").is_none(), "not trusted: no CORS");
    }
    // The service's own origin needs no CORS and is no refusal.
    let own = server.base.clone();
    assert_eq!(server.get("/api/auth/get-session").header("origin", &own).send().await.status, 200);
    assert!(server.terminate().success());
    let log = std::fs::read_dir(root.path())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("stderr-"))
        .map(|e| std::fs::read_to_string(e.path()).unwrap())
        .collect::<String>();
    let refusals: Vec<&str> = log.lines().filter(|l| l.contains("refused a browser page on another origin")).collect();
    assert_eq!(refusals.len(), 2, "{log}");
    assert!(refusals[0].contains("https://app.example.com") && refusals[1].contains("https://other.example"), "{log}");
    assert!(refusals.iter().all(|l| !l.contains(&own)), "{log}");
}
