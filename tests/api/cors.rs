//! CORS: preflights and actual answers for the configured trusted origins, nothing for any other origin, and the
//! cross-site rule unchanged beside it. (tests/browser/ shows the same in a real browser.)

use reqwest::Method;
use serde_json::json;
use service_auth::http::ROUTES;

use super::harness::*;

const TRUSTED: &str = "http://localhost:5173";

async fn server() -> TestServer {
    TestServer::start_adjusted(|c| c.trusted_origins = vec![TRUSTED.into(), "https://app.example.com".into()]).await
}

/// A route's path with its `{param}` segments filled in.
fn concrete(path: &str) -> String {
    path.split('/').map(|seg| if seg.starts_with('{') { "x" } else { seg }).collect::<Vec<_>>().join("/")
}

fn cors_headers(r: &Resp) -> Vec<String> {
    r.headers.keys().map(|k| k.as_str().to_owned()).filter(|k| k.starts_with("access-control-")).collect()
}

fn varies_on_origin(r: &Resp) -> bool {
    r.headers
        .get_all("vary")
        .iter()
        .any(|v| v.to_str().unwrap().split(',').any(|p| p.trim().eq_ignore_ascii_case("origin")))
}

async fn preflight(s: &TestServer, path: &str, origin: &str, method: &Method) -> Resp {
    s.req(Method::OPTIONS, path)
        .header("origin", origin)
        .header("access-control-request-method", method.as_str())
        .header("access-control-request-headers", "content-type")
        .send()
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trusted_origins_preflight_gets_204_with_its_origin_the_routes_methods_and_max_age() {
    let s = server().await;
    for (path, methods) in ROUTES {
        let path = concrete(path);
        let r = preflight(&s, &path, TRUSTED, &methods[0]).await;
        assert_eq!(r.status, 204, "OPTIONS {path}: {}", r.text);
        assert!(r.text.is_empty(), "OPTIONS {path} has a body: {}", r.text);
        assert_eq!(r.header("access-control-allow-origin").as_deref(), Some(TRUSTED), "{path}");
        assert_eq!(r.header("access-control-allow-credentials").as_deref(), Some("true"), "{path}");
        let want = methods.iter().map(Method::as_str).collect::<Vec<_>>().join(", ");
        assert_eq!(r.header("access-control-allow-methods"), Some(want), "{path}");
        let headers = r.header("access-control-allow-headers").unwrap_or_default().to_ascii_lowercase();
        assert!(headers.split(',').any(|h| h.trim() == "content-type"), "{path}: {headers}");
        let max_age: u64 = r.header("access-control-max-age").expect("max-age").parse().expect("seconds");
        assert!((60..=7200).contains(&max_age), "{path}: {max_age}");
        assert!(varies_on_origin(&r), "{path}");
        let mut allow = r.allow();
        assert!(allow.remove("OPTIONS"), "{path}: Allow lacks OPTIONS");
        // HEAD goes with GET, as in a 405's Allow.
        assert_eq!(allow.remove("HEAD"), methods.contains(&Method::GET), "{path}: HEAD");
        assert_eq!(allow, methods.iter().map(|m| m.as_str().to_owned()).collect(), "{path}");
    }
    // The second trusted origin gets itself back, never the first.
    let r = preflight(&s, "/api/admin/users", "https://app.example.com", &Method::PATCH).await;
    assert_eq!(r.header("access-control-allow-origin").as_deref(), Some("https://app.example.com"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn any_other_origins_preflight_gets_204_without_a_cors_header() {
    let s = server().await;
    let own = s.base.clone();
    let others = [
        "http://127.0.0.1:5173",      // the same host by another name is another origin
        "http://localhost:5174",      // another port
        "https://localhost:5173",     // another scheme
        "http://localhost:5173.evil", // a longer host
        "null",                       // sandboxed frames and file: pages
        own.as_str(),                 // our own origin: same-origin requests need no CORS
    ];
    for origin in others {
        let r = preflight(&s, "/api/auth/sign-in/email", origin, &Method::POST).await;
        assert_eq!(r.status, 204, "{origin}: {}", r.text);
        assert_eq!(cors_headers(&r), Vec::<String>::new(), "{origin}");
        assert!(varies_on_origin(&r), "{origin}");
    }
    // Without an Origin at all, OPTIONS just lists the methods.
    let r = s.req(Method::OPTIONS, "/api/admin/users").send().await;
    assert_eq!(r.status, 204);
    assert_eq!(r.allow(), ["GET", "HEAD", "OPTIONS", "PATCH"].map(String::from).into());
    assert_eq!(cors_headers(&r), Vec::<String>::new());
    // A server without trusted origins answers no origin.
    let plain = TestServer::start().await;
    let r = preflight(&plain, "/api/auth/sign-in/email", TRUSTED, &Method::POST).await;
    assert_eq!((r.status, cors_headers(&r)), (204, vec![]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn options_on_an_unknown_path_stays_404() {
    let s = server().await;
    for path in ["/index.html", "/api/auth/nothing", "/api/auth/reset-password/", "/api/admin/users/x"] {
        let r = preflight(&s, path, TRUSTED, &Method::POST).await;
        assert_eq!(r.status, 404, "{path}: {}", r.text);
        assert_auth_or_admin_error(&r, path);
    }
}

fn assert_auth_or_admin_error(r: &Resp, path: &str) {
    if path.starts_with("/api/admin/") { assert_admin_error(r, 404) } else { assert_auth_error_shape(r) }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn actual_answers_carry_the_origin_for_trusted_origins_only() {
    let s = server().await;
    let body = json!({"name": "A", "email": "a@example.com", "password": PASSWORD});
    let r = s.post("/api/auth/sign-up/email").header("origin", TRUSTED).json(&body).send().await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.header("access-control-allow-origin").as_deref(), Some(TRUSTED));
    assert_eq!(r.header("access-control-allow-credentials").as_deref(), Some("true"));
    assert!(varies_on_origin(&r));
    // The wait of a 429 is readable by the page.
    let exposed = r.header("access-control-expose-headers").unwrap_or_default().to_ascii_lowercase();
    assert!(exposed.contains("x-retry-after"), "{exposed}");
    let (_, _, cookie) = r.triple();
    let cookie = cookie.expect("session cookie");

    // Errors too, so the page can read the code.
    let wrong = json!({"email": "a@example.com", "password": "not the password"});
    let r = s.post("/api/auth/sign-in/email").header("origin", TRUSTED).json(&wrong).send().await;
    assert_eq!(r.status, 401);
    assert_eq!(r.header("access-control-allow-origin").as_deref(), Some(TRUSTED));
    assert_eq!(r.json()["code"], "INVALID_EMAIL_OR_PASSWORD");

    // Reading the session with the cookie, the way a same-site page on another port sends it.
    let r = s.get("/api/auth/get-session").cookie(&cookie).header("origin", TRUSTED).send().await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["user"]["email"], "a@example.com");
    assert_eq!(r.header("access-control-allow-origin").as_deref(), Some(TRUSTED));

    // Another origin: the same answers, but nothing that lets a browser show them to the page.
    for origin in ["http://127.0.0.1:5173", "https://evil.example", "null"] {
        let r = s.get("/api/auth/get-session").cookie(&cookie).header("origin", origin).send().await;
        assert_eq!(r.status, 200, "{origin}");
        assert_eq!(cors_headers(&r), Vec::<String>::new(), "{origin}");
        assert!(varies_on_origin(&r), "{origin}");
    }
    let r = s.get("/api/auth/get-session").cookie(&cookie).send().await;
    assert_eq!(cors_headers(&r), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cross_site_rule_still_holds_beside_cors() {
    let s = server().await;
    let admin = s.admin_session().await;
    let org = |slug: &str| json!({"name": "Org", "slug": slug});
    // A trusted origin with the cookie: accepted, and readable.
    let r = s
        .post("/api/admin/organizations")
        .cookie(&admin)
        .header("origin", TRUSTED)
        .header("sec-fetch-site", "same-site")
        .json(&org("trusted"))
        .send()
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.header("access-control-allow-origin").as_deref(), Some(TRUSTED));
    // An untrusted origin with the cookie: still 403, and no CORS header.
    let r = s
        .post("/api/admin/organizations")
        .cookie(&admin)
        .header("origin", "https://evil.example")
        .json(&org("evil"))
        .send()
        .await;
    assert_eq!(r.status, 403, "{}", r.text);
    assert_eq!(cors_headers(&r), Vec::<String>::new());
    // A trusted origin that the browser marks cross-site: still refused (a trusted origin only relaxes the
    // `Origin` check), and the page may read why.
    let r = s
        .post("/api/admin/organizations")
        .cookie(&admin)
        .header("origin", TRUSTED)
        .header("sec-fetch-site", "cross-site")
        .json(&org("cross"))
        .send()
        .await;
    assert_eq!(r.status, 403, "{}", r.text);
    assert_eq!(r.header("access-control-allow-origin").as_deref(), Some(TRUSTED));
    // An OPTIONS request never changes anything, whatever its body: nothing was created by any of them.
    let r = s
        .req(Method::OPTIONS, "/api/admin/organizations")
        .cookie(&admin)
        .header("origin", "https://evil.example")
        .json(&org("opt"))
        .send()
        .await;
    assert_eq!(r.status, 204);
    let list = s.get("/api/admin/organizations").cookie(&admin).send().await.json();
    let slugs: Vec<&str> =
        list["organizations"].as_array().unwrap().iter().map(|o| o["slug"].as_str().unwrap()).collect();
    assert_eq!(slugs, ["trusted"]);
}
