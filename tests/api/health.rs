//! What a load balancer or monitor points at: liveness (`/healthz`, better-auth's `/api/auth/ok`), readiness
//! (`/readyz`, 503 with a reason while the store refuses writes) and `HEAD` on every `GET` route.

use reqwest::Method;
use serde_json::json;

use super::harness::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ok_and_healthz_answer_without_a_session() {
    let s = TestServer::start().await;
    let r = s.get("/api/auth/ok").send().await;
    assert_eq!((r.status, r.json()), (200, json!({"ok": true})));
    assert_eq!(r.header("content-type").as_deref(), Some("application/json"));
    let r = s.get("/healthz").send().await;
    assert_eq!((r.status, r.json()), (200, json!({"status": "alive"})));
    let r = s.post("/api/auth/ok").send().await;
    assert_eq!(r.status, 405);
    assert_eq!(r.allow(), ["GET", "HEAD"].map(String::from).into());
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_follows_the_store_refusing_writes() {
    let dir = tempfile::tempdir().unwrap();
    let faults = service_auth::store::FaultSwitch::default();
    let s = TestServer::start_with_faults(test_config(dir.path()), faults.clone()).await;
    let r = s.get("/readyz").send().await;
    assert_eq!((r.status, r.json()), (200, json!({"status": "ready"})));

    faults.fail_next_commits(1000);
    let r = s.get("/readyz").send().await;
    assert_eq!(r.status, 503, "{}", r.text);
    let body = r.json();
    assert_eq!(body["status"], "unavailable");
    assert!(body["reason"].as_str().is_some_and(|reason| !reason.is_empty()), "{body}");
    // A write is refused meanwhile, as readiness said.
    let r = s.sign_up_body(&json!({"name": "Bob", "email": "bob@example.com", "password": PASSWORD})).await;
    assert_eq!(r.status, 503, "{}", r.text);
    assert_eq!(s.get("/healthz").send().await.status, 200, "alive even while not ready");

    faults.fail_next_commits(0);
    let r = s.get("/readyz").send().await;
    assert_eq!((r.status, r.json()), (200, json!({"status": "ready"})));
    s.new_user("bob").await;
    s.stop().await;
}

/// Every GET route answers HEAD with the GET's status and headers (Content-Length included) and no body; HEAD on
/// a route without GET is 405 like any other method.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn head_is_answered_for_every_get_route_without_a_body() {
    let s = TestServer::start().await;
    let admin = s.admin_session().await;
    for (path, methods) in service_auth::http::ROUTES {
        let path = path.replace("{token}", "not-a-token");
        let get = s.get(&path).cookie(&admin).send().await;
        let head = s.req(Method::HEAD, &path).cookie(&admin).send().await;
        if !methods.contains(&hyper::Method::GET) {
            assert_eq!(head.status, 405, "HEAD {path}");
            let allow = head.allow();
            assert!(!allow.is_empty() && !allow.contains("GET"), "HEAD {path}: {allow:?}");
            continue;
        }
        assert_eq!(head.status, get.status, "HEAD {path}");
        assert_eq!(head.text, "", "HEAD {path} has a body");
        for name in ["content-type", "content-length", "cache-control", "x-content-type-options", "location"] {
            // The configuration view is the answering node's own (its address, its data directory): on two nodes
            // the GET and the HEAD may reach different ones, whose answers differ in length.
            if name == "content-length" && path == "/api/admin/config" && s.nodes.len() > 1 {
                continue;
            }
            assert_eq!(head.header(name), get.header(name), "HEAD {path}: {name}");
        }
    }
    // On the wire: the headers, then nothing.
    let (status, text) =
        raw_http(s.addr, b"HEAD /api/auth/ok HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").await;
    assert_eq!(status, 200);
    assert!(text.ends_with("\r\n\r\n"), "bytes after the headers: {text:?}");
    assert!(text.to_ascii_lowercase().contains("content-length: 11\r\n"), "{text}");
    s.stop().await;
}

/// Before: the OpenAPI document went into the binary as its 1 MB of indented JSON (4% of the release binary) and
/// was sent so to every client. Now the binary holds it gzip-compressed: a client that accepts gzip gets those
/// bytes (`Content-Encoding: gzip`), one that does not (or refuses it with `q=0`) the document itself; both are
/// docs/openapi.json, byte for byte.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openapi_document_is_sent_gzip_compressed_to_clients_that_accept_it() {
    use std::io::Read;
    let s = TestServer::start().await;
    let file = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/openapi.json")).unwrap();
    let http = reqwest::Client::new();
    let url = format!("http://{}/api/openapi.json", s.addr);
    let get = |accept: Option<&'static str>| {
        let request = http.get(&url);
        let request = match accept {
            Some(value) => request.header("accept-encoding", value),
            None => request,
        };
        async move {
            let r = request.send().await.expect("GET /api/openapi.json");
            assert_eq!(r.status(), 200);
            assert_eq!(r.headers()["content-type"], "application/json");
            assert_eq!(r.headers()["vary"], "Accept-Encoding");
            let encoding = r.headers().get("content-encoding").map(|v| v.to_str().unwrap().to_owned());
            (encoding, r.bytes().await.unwrap().to_vec())
        }
    };
    for accept in ["gzip", "br;q=1.0, gzip;q=0.8, *;q=0.1", "GZIP", "x-gzip", "deflate, *"] {
        let (encoding, body) = get(Some(accept)).await;
        assert_eq!(encoding.as_deref(), Some("gzip"), "{accept}");
        assert!(body.len() < file.len() / 5, "{accept}: {} bytes sent", body.len());
        let mut inflated = Vec::new();
        flate2::read::GzDecoder::new(body.as_slice()).read_to_end(&mut inflated).expect("gzip");
        assert!(inflated == file, "{accept}: the inflated document is docs/openapi.json");
    }
    for accept in [None, Some("identity"), Some("gzip;q=0"), Some("br, deflate"), Some("*;q=0"), Some("gzip;q=x")] {
        let (encoding, body) = get(accept).await;
        assert_eq!(encoding, None, "{accept:?}");
        assert!(body == file, "{accept:?}: the document is docs/openapi.json");
    }
    s.stop().await;
}
