//! Logs: JSON lines, the request id (a trusted proxy's, or generated) on the request's lines and in its answer,
//! and the access line, which never shows a cookie.

use std::time::Duration;

use serde_json::{Value, json};

use super::harness::*;

/// The server's stderr as JSON objects, once `wanted` holds for one of them (at most 10 s). Every line must be
/// JSON: a text line among them would break a log collector.
async fn json_lines_until(server: &ChildServer, wanted: impl Fn(&Value) -> bool) -> Vec<Value> {
    for _ in 0..100 {
        let text = server.stderr();
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("a log line is not JSON ({e}): {l:?}")))
            .collect();
        if lines.iter().any(&wanted) {
            return lines;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no such log line; stderr:\n{}", server.stderr())
}

fn request_id(line: &Value) -> Option<&str> {
    line["span"]["request_id"].as_str()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_logs_carry_the_request_id_of_a_trusted_proxy_or_a_generated_one() {
    let root = tempfile::tempdir().unwrap();
    let config = root.path().join("service-auth.toml");
    std::fs::write(&config, "trusted_proxies = [\"127.0.0.1\"]\n[log]\nformat = \"json\"\naccess = true\n").unwrap();
    let config = config.to_str().unwrap();
    let server =
        ChildServer::spawn(root.path(), &[("SERVICE_AUTH_CONFIG", config), ("SERVICE_AUTH_LOG", "info")]).await;

    let r = server
        .get("/api/auth/get-session")
        .header("x-request-id", "edge-7f3a:42")
        .cookie("secret-cookie-value-0123456789")
        .send()
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("x-request-id").as_deref(), Some("edge-7f3a:42"), "the proxy's id is echoed");
    let r = server.sign_up_body(&json!({"name": "A", "email": "a@example.com", "password": "Zq9#xW"})).await;
    let generated = r.header("x-request-id").expect("an id on every answer");
    assert!(generated.len() == 32 && generated.bytes().all(|b| b.is_ascii_hexdigit()), "{generated}");
    let forged = server.get("/healthz").header("x-request-id", "bad id\"with quotes").send().await;
    assert_ne!(forged.header("x-request-id").as_deref(), Some("bad id\"with quotes"));

    let lines = json_lines_until(&server, |l| request_id(l) == Some(generated.as_str())).await;
    let access = |id: &str| {
        lines
            .iter()
            .find(|l| request_id(l) == Some(id) && l["target"] == "access")
            .unwrap_or_else(|| panic!("no access line with request id {id}: {lines:#?}"))
    };
    let line = access("edge-7f3a:42");
    let fields = &line["fields"];
    assert_eq!(fields["method"], "GET", "{line}");
    assert_eq!(fields["route"], "/api/auth/get-session");
    assert_eq!(fields["status"], 200);
    assert_eq!(fields["client"], "127.0.0.1");
    assert!(fields["duration_ms"].as_f64().is_some_and(|ms| ms >= 0.0), "{line}");
    assert_eq!(line["level"], "INFO");
    let line = access(&generated);
    assert_eq!((&line["fields"]["route"], &line["fields"]["status"]), (&json!("/api/auth/sign-up/email"), &json!(400)));
    let text = server.stderr();
    assert!(!text.contains("secret-cookie-value"), "a cookie reached the log");
    assert!(!text.contains("Zq9#xW"), "a password reached the log");
    // The lines of start-up name the configuration file and the data directory.
    assert!(lines.iter().any(|l| l["fields"]["config"] == config), "{lines:#?}");
    assert!(server.terminate().success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_id_from_a_peer_that_is_not_a_trusted_proxy_is_replaced() {
    let s = TestServer::start().await;
    let r = s.get("/healthz").header("x-request-id", "chosen-by-the-client").send().await;
    let id = r.header("x-request-id").expect("an id on every answer");
    assert_ne!(id, "chosen-by-the-client");
    assert_eq!(id.len(), 32);
    let other = s.get("/nope").send().await.header("x-request-id").unwrap();
    assert_ne!(id, other, "each request gets its own id");
    s.stop().await;
}
