//! Rules for every endpoint: content types, malformed and oversized bodies, unknown paths, wrong methods,
//! `Cache-Control`, cross-site refusal, and "no input produces a 5xx".

use std::collections::BTreeSet;

use proptest::prelude::*;
use proptest::test_runner::{Config as ProptestConfig, TestRunner};
use reqwest::Method;
use serde_json::{Value, json};

use super::harness::*;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Family {
    Auth,
    Admin,
}

/// The endpoints that take a body, with the family of their errors.
const BODY_ENDPOINTS: &[(&str, &str, Family)] = &[
    ("POST", "/api/auth/sign-up/email", Family::Auth),
    ("POST", "/api/auth/sign-in/email", Family::Auth),
    ("POST", "/api/auth/sign-out", Family::Auth),
    ("PATCH", "/api/admin/users", Family::Admin),
    ("POST", "/api/admin/organizations", Family::Admin),
];

fn method(m: &str) -> Method {
    Method::from_bytes(m.as_bytes()).unwrap()
}

fn assert_family_error(r: &Resp, status: u16, family: Family, what: &str) {
    assert_eq!(r.status, status, "{what}: {}", r.text);
    match family {
        Family::Auth => assert_auth_error_shape(r),
        Family::Admin => assert_admin_error(r, status),
    }
}

/// A request to an endpoint of `BODY_ENDPOINTS`, with the admin cookie on admin endpoints.
fn to_endpoint(s: &TestServer, admin: &str, (m, path, family): (&str, &str, Family)) -> Req {
    let req = s.req(method(m), path);
    if family == Family::Admin { req.cookie(admin) } else { req }
}

/// A valid body for each endpoint; `n` keeps e-mails and slugs unique.
fn valid_body(path: &str, n: usize, target_user: &str) -> Value {
    match path {
        "/api/auth/sign-up/email" => {
            json!({"name": "N", "email": format!("valid{n}@example.com"), "password": PASSWORD})
        }
        "/api/auth/sign-in/email" => json!({"email": ADMIN_EMAIL, "password": ADMIN_PASSWORD}),
        "/api/auth/sign-out" => json!({}),
        "/api/admin/users" => {
            json!({"userId": target_user, "role": if n.is_multiple_of(2) { "qa_manager" } else { "user" }})
        }
        "/api/admin/organizations" => json!({"name": "Org", "slug": format!("org-{n}")}),
        _ => unreachable!(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_json_content_type_is_415() {
    let s = TestServer::start().await;
    let admin = s.admin_session().await;
    let u = s.new_user("alice").await;
    let types = [
        Some("text/plain"),
        Some("application/x-www-form-urlencoded"),
        Some("multipart/form-data; boundary=x"),
        Some("text/json"),
        Some("application/jsonx"),
        None,
    ];
    for (n, &ep) in BODY_ENDPOINTS.iter().enumerate() {
        let body = serde_json::to_vec(&valid_body(ep.1, n, &u.id)).unwrap();
        for ct in types {
            let r = to_endpoint(&s, &admin, ep).raw(ct, body.clone()).send().await;
            assert_family_error(&r, 415, ep.2, &format!("{} {} with Content-Type {ct:?}", ep.0, ep.1));
        }
    }
    let form = s.post("/api/auth/sign-in/email").raw(
        Some("application/x-www-form-urlencoded"),
        format!("email=admin%40example.com&password={}", ADMIN_PASSWORD.replace(' ', "+")),
    );
    assert_auth_error_shape(&form.send().await);
    // Nothing happened.
    assert_eq!(s.listed_user(&admin, &u.id).await["role"], "user");
    assert!(s.orgs(&admin).await.is_empty());
    assert_eq!(s.users(&admin).await.len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_with_parameters_is_accepted() {
    let s = TestServer::start().await;
    let admin = s.admin_session().await;
    let u = s.new_user("alice").await;
    for ct in ["application/json; charset=utf-8", "application/json;charset=UTF-8", "Application/JSON"] {
        for (n, &ep) in BODY_ENDPOINTS.iter().enumerate() {
            let n = n + 10 * ct.len();
            let body = serde_json::to_vec(&valid_body(ep.1, n, &u.id)).unwrap();
            let r = to_endpoint(&s, &admin, ep).raw(Some(ct), body).send().await;
            assert_eq!(r.status, 200, "{} {} with Content-Type {ct:?}: {}", ep.0, ep.1, r.text);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_json_is_400() {
    let s = TestServer::start().await;
    let admin = s.admin_session().await;
    let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
    let deep_obj = format!("{}1{}", "{\"a\":".repeat(10_000), "}".repeat(10_000));
    let bodies: Vec<Vec<u8>> = vec![
        b"{\"name\":".to_vec(),
        b"{name: 1}".to_vec(),
        b"{\"a\": 1} trailing".to_vec(),
        b"{\"a\": 1,}".to_vec(),
        b"'single'".to_vec(),
        vec![0xff, 0xfe, b'{', b'}'],
        b"{\"password\": \"\xc3\x28\"}".to_vec(),
        br#"{"name": "\ud800"}"#.to_vec(),
        br#"{"password": 1e400}"#.to_vec(),
        b"\x00".to_vec(),
        deep.into_bytes(),
        deep_obj.into_bytes(),
    ];
    for &ep in BODY_ENDPOINTS {
        for body in &bodies {
            let r = to_endpoint(&s, &admin, ep).raw(Some("application/json"), body.clone()).send().await;
            let shown = String::from_utf8_lossy(&body[..body.len().min(40)]).into_owned();
            assert_family_error(&r, 400, ep.2, &format!("{} {} with body {shown:?}", ep.0, ep.1));
        }
    }
    assert_eq!(s.list_users(Some(&admin)).await.status, 200, "server still fine");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn body_over_64_kib_is_413() {
    let s = TestServer::start().await;
    let admin = s.admin_session().await;
    let u = s.new_user("alice").await;
    for (n, &ep) in BODY_ENDPOINTS.iter().enumerate() {
        // Valid JSON padded with whitespace to one byte over 64 KiB.
        let mut body = serde_json::to_vec(&valid_body(ep.1, n, &u.id)).unwrap();
        body.resize(64 * 1024 + 1, b' ');
        let r = to_endpoint(&s, &admin, ep).raw(Some("application/json"), body).send().await;
        assert_family_error(&r, 413, ep.2, &format!("{} {} with 64 KiB + 1", ep.0, ep.1));
        // A big string value, not just padding.
        let big = json!({"name": "x".repeat(70_000), "email": "big@example.com", "password": PASSWORD, "slug": "big"});
        let r = to_endpoint(&s, &admin, ep).json(&big).send().await;
        assert_family_error(&r, 413, ep.2, &format!("{} {} with 70 kB", ep.0, ep.1));
    }
    // Exactly 64 KiB is not too big: this sign-in is processed (and fails on the password).
    let mut body = serde_json::to_vec(&json!({"email": "alice@example.com", "password": "wrong password"})).unwrap();
    body.resize(64 * 1024, b' ');
    let r = s.post("/api/auth/sign-in/email").raw(Some("application/json"), body).send().await;
    assert_auth_error(&r, 401, "INVALID_EMAIL_OR_PASSWORD");
    assert_eq!(s.users(&admin).await.len(), 2, "nothing was created");
    assert!(s.orgs(&admin).await.is_empty());
}

/// A sign-up whose JSON `body` is sent with `Transfer-Encoding: chunked`, in chunks of at most `size` bytes.
fn chunked_sign_up(addr: std::net::SocketAddr, body: &[u8], size: usize) -> Vec<u8> {
    let mut request = format!(
        "POST /api/auth/sign-up/email HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
    )
    .into_bytes();
    for chunk in body.chunks(size) {
        request.extend(format!("{:x}\r\n", chunk.len()).bytes());
        request.extend(chunk);
        request.extend(b"\r\n");
    }
    request.extend(b"0\r\n\r\n");
    request
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chunked_body_over_64_kib_is_413() {
    let s = TestServer::start().await;
    let mut payload =
        serde_json::to_vec(&json!({"name": "N", "email": "chunk@example.com", "password": PASSWORD})).unwrap();
    payload.resize(64 * 1024 + 100, b' ');
    let (status, text) = raw_http(s.addr, &chunked_sign_up(s.addr, &payload, 8 * 1024)).await;
    assert_eq!(status, 413, "{text}");
    // A small chunked body is fine, in one chunk or in several (read whole: the chunks joined in order).
    for (email, size) in [("chunk@example.com", usize::MAX), ("chunks@example.com", 7)] {
        let body = serde_json::to_vec(&json!({"name": "N", "email": email, "password": PASSWORD})).unwrap();
        let (status, text) = raw_http(s.addr, &chunked_sign_up(s.addr, &body, size)).await;
        assert_eq!(status, 200, "{text}");
        assert!(text.contains(email), "{text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_paths_are_404() {
    let s = TestServer::start().await;
    let cases = [
        ("GET", "/api/auth/nope", Some(Family::Auth)),
        ("POST", "/api/auth/sign-in", Some(Family::Auth)),
        ("POST", "/api/auth/sign-up", Some(Family::Auth)),
        ("GET", "/api/auth/get-session/", Some(Family::Auth)),
        ("POST", "/api/auth/sign-in/email/", Some(Family::Auth)),
        ("GET", "/api/auth/", Some(Family::Auth)),
        ("GET", "/api/admin/nope", Some(Family::Admin)),
        ("GET", "/api/admin/users/", Some(Family::Admin)),
        ("GET", "/api/admin/users/123", Some(Family::Admin)),
        ("DELETE", "/api/admin/users/0b6f5e1c-3d7a-4c1e-9a52-6f1d2e3c4b5a", Some(Family::Admin)),
        ("GET", "/api/admin/organization", Some(Family::Admin)),
        // (`/` itself leads to the console: tests/api/pages.rs.)
        ("GET", "/index.html", None),
        ("GET", "/api", None),
        ("GET", "/favicon.ico", None),
        ("GET", "/API/AUTH/GET-SESSION", None),
        ("POST", "/api/admin", None),
    ];
    for (m, path, family) in cases {
        let r = s.req(method(m), path).send().await;
        assert_eq!(r.status, 404, "{m} {path}: {}", r.text);
        if let Some(family) = family {
            assert_family_error(&r, 404, family, &format!("{m} {path}"));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_method_is_405_with_allow() {
    let s = TestServer::start().await;
    let admin = s.admin_session().await;
    let cases: &[(&str, &str, &[&str], Family)] = &[
        ("GET", "/api/auth/sign-up/email", &["POST"], Family::Auth),
        ("GET", "/api/auth/sign-in/email", &["POST"], Family::Auth),
        ("PUT", "/api/auth/sign-in/email", &["POST"], Family::Auth),
        ("DELETE", "/api/auth/sign-in/email", &["POST"], Family::Auth),
        ("GET", "/api/auth/sign-out", &["POST"], Family::Auth),
        ("POST", "/api/auth/get-session", &["GET"], Family::Auth),
        ("DELETE", "/api/auth/get-session", &["GET"], Family::Auth),
        ("DELETE", "/api/admin/users", &["GET", "PATCH"], Family::Admin),
        ("POST", "/api/admin/users", &["GET", "PATCH"], Family::Admin),
        ("PUT", "/api/admin/users", &["GET", "PATCH"], Family::Admin),
        ("PUT", "/api/admin/organizations", &["GET", "POST"], Family::Admin),
        ("PATCH", "/api/admin/organizations", &["GET", "POST"], Family::Admin),
        ("DELETE", "/api/admin/organizations", &["GET", "POST"], Family::Admin),
    ];
    for &(m, path, allowed, family) in cases {
        for cookie in [None, Some(admin.as_str())] {
            let r = s.req(method(m), path).cookie_opt(cookie).json(&json!({})).send().await;
            let what = format!("{m} {path} (cookie: {})", cookie.is_some());
            assert_family_error(&r, 405, family, &what);
            let allow = r.allow();
            let expected: BTreeSet<String> = allowed.iter().map(|m| m.to_string()).collect();
            let tolerated: BTreeSet<String> = ["HEAD", "OPTIONS"].map(String::from).into();
            assert!(expected.is_subset(&allow), "{what}: Allow {allow:?} lacks {expected:?}");
            assert!(
                allow.iter().all(|a| expected.contains(a) || tolerated.contains(a)),
                "{what}: Allow {allow:?} names methods the path does not take"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_auth_answer_carries_no_store() {
    let s = TestServer::start().await;
    let admin = s.admin_session().await;
    let banned = s.new_user("banned").await;
    s.patch_ok(&admin, &json!({"userId": banned.id, "banned": true})).await;
    let u = s.new_user("alice").await;
    let mut answers: Vec<(String, Resp)> = vec![
        (
            "sign-up 200".into(),
            s.sign_up_body(&json!({"name": "B", "email": "b@example.com", "password": PASSWORD})).await,
        ),
        ("sign-up 400".into(), s.sign_up_body(&json!({"name": "B"})).await),
        ("sign-up 400 email".into(), s.sign_up_body(&json!({"name": "B", "email": "x", "password": PASSWORD})).await),
        (
            "sign-up 422".into(),
            s.sign_up_body(&json!({"name": "B", "email": "b@example.com", "password": PASSWORD})).await,
        ),
        ("sign-in 200".into(), s.sign_in_body(&json!({"email": "b@example.com", "password": PASSWORD})).await),
        ("sign-in 401".into(), s.sign_in_body(&json!({"email": "b@example.com", "password": "nope nope"})).await),
        ("sign-in 403".into(), s.sign_in_body(&json!({"email": banned.email, "password": PASSWORD})).await),
        ("sign-in 415".into(), s.post("/api/auth/sign-in/email").raw(Some("text/plain"), "{}").send().await),
        (
            "sign-in 400 malformed".into(),
            s.post("/api/auth/sign-in/email").raw(Some("application/json"), "{").send().await,
        ),
        (
            "sign-in 413".into(),
            s.post("/api/auth/sign-in/email").raw(Some("application/json"), vec![b' '; 70_000]).send().await,
        ),
        ("get-session null".into(), s.get_session_resp(None).await),
        ("get-session 200".into(), s.get_session_resp(Some(&u.cookie)).await),
        ("get-session 405".into(), s.post("/api/auth/get-session").json(&json!({})).send().await),
        ("sign-out 200".into(), s.sign_out(Some(&u.cookie)).await),
        ("sign-out 405".into(), s.get("/api/auth/sign-out").send().await),
    ];
    answers.push(("sign-out no cookie".into(), s.sign_out(None).await));
    let missing: Vec<String> = answers
        .iter()
        .filter(|(_, r)| r.header("cache-control").as_deref() != Some("no-store"))
        .map(|(what, r)| format!("{what} (status {}, Cache-Control {:?})", r.status, r.header("cache-control")))
        .collect();
    assert!(missing.is_empty(), "auth answers without Cache-Control: no-store: {missing:#?}");
}

// ---------------------------------------------------------------------------------------------------------------
// Cross-site requests

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cross_site_state_changes_with_a_cookie_are_refused() {
    let s = TestServer::start().await;
    let admin = s.admin_session().await;
    let u = s.new_user("alice").await;
    let refused: [(&str, &str); 4] = [
        ("origin", "https://evil.example"),
        ("origin", "null"),
        ("origin", "http://127.0.0.1:1"),
        ("sec-fetch-site", "cross-site"),
    ];
    for (h, v) in refused {
        let what = format!("{h}: {v}");
        let r = s.post("/api/auth/sign-out").cookie(&u.cookie).header(h, v).json(&json!({})).send().await;
        assert_eq!(r.status, 403, "sign-out with {what}: {}", r.text);
        assert_auth_error_shape(&r);
        assert!(s.session(&u.cookie).await.is_object(), "sign-out with {what} must not end the session");

        let r = s
            .post("/api/auth/sign-in/email")
            .cookie(&u.cookie)
            .header(h, v)
            .json(&json!({"email": u.email, "password": PASSWORD}))
            .send()
            .await;
        assert_eq!(r.status, 403, "sign-in with a cookie and {what}: {}", r.text);
        assert_auth_error_shape(&r);

        let r = s
            .patch("/api/admin/users")
            .cookie(&admin)
            .header(h, v)
            .json(&json!({"userId": u.id, "banned": true}))
            .send()
            .await;
        assert_admin_error(&r, 403);
        let r = s
            .post("/api/admin/organizations")
            .cookie(&admin)
            .header(h, v)
            .json(&json!({"name": "Evil", "slug": "evil"}))
            .send()
            .await;
        assert_admin_error(&r, 403);
    }
    assert_eq!(s.listed_user(&admin, &u.id).await["banned"], false);
    assert!(s.orgs(&admin).await.is_empty());

    // Reads are not state changes.
    let r = s.get("/api/auth/get-session").cookie(&u.cookie).header("origin", "https://evil.example").send().await;
    assert_eq!(r.json()["user"]["id"], u.id.as_str());
    let r = s.list_users(Some(&admin)).await;
    assert_eq!(r.status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn own_and_trusted_origins_and_cookieless_requests_pass() {
    let s = TestServer::start_adjusted(|c| c.trusted_origins = vec!["http://localhost:5173".into()]).await;
    let admin = s.admin_session().await;
    let own = s.base.clone();
    let allowed: [(&str, &str); 4] = [
        ("origin", own.as_str()),
        ("origin", "http://localhost:5173"),
        ("sec-fetch-site", "same-origin"),
        ("sec-fetch-site", "same-site"),
    ];
    for (i, (h, v)) in allowed.iter().enumerate() {
        let r = s.create_org_with_header(&admin, &format!("ok-{i}"), h, v).await;
        assert_eq!(r.status, 200, "POST organization with {h}: {v}: {}", r.text);
    }
    // Without a cookie, sign-up and sign-in from a foreign origin are not refused by this rule.
    let r = s
        .post("/api/auth/sign-up/email")
        .header("origin", "http://localhost:5173")
        .json(&json!({"name": "A", "email": "a@example.com", "password": PASSWORD}))
        .send()
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let (_, _, cookie) = r.triple();
    let r = s.post("/api/auth/sign-out").cookie(&cookie.unwrap()).header("origin", &own).json(&json!({})).send().await;
    assert_eq!((r.status, r.json()), (200, json!({"success": true})));
}

impl Client {
    async fn create_org_with_header(&self, cookie: &str, slug: &str, h: &str, v: &str) -> Resp {
        self.post("/api/admin/organizations")
            .cookie(cookie)
            .header(h, v)
            .json(&json!({"name": "Org", "slug": slug}))
            .send()
            .await
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Fuzzing: nothing produces a 5xx, errors keep their family's shape

pub(super) const VOCABULARY: &[&str] = &[
    "name",
    "email",
    "password",
    "image",
    "rememberMe",
    "callbackURL",
    "userId",
    "role",
    "banned",
    "banReason",
    "organizationId",
    "slug",
];

fn json_leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(Value::from),
        ".{0,40}".prop_map(Value::from),
        prop::sample::select(vec![
            "admin@example.com",
            "x@example.com",
            "correct horse battery",
            "passw0rd-long",
            "admin",
            "user",
            "0b6f5e1c-3d7a-4c1e-9a52-6f1d2e3c4b5a",
            "a-slug",
            "/dashboard",
            "",
        ])
        .prop_map(Value::from),
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    json_leaf().prop_recursive(3, 24, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::btree_map(json_key(), inner, 0..5).prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn json_key() -> impl Strategy<Value = String> {
    prop_oneof![3 => prop::sample::select(VOCABULARY).prop_map(String::from), 1 => ".{0,12}"]
}

/// Request bodies: mostly objects over the endpoints' own field names, some arbitrary JSON, some arbitrary bytes.
fn body() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        6 => prop::collection::btree_map(json_key(), json_value(), 0..7)
            .prop_map(|m| serde_json::to_vec(&Value::Object(m.into_iter().collect())).unwrap()),
        2 => json_value().prop_map(|v| serde_json::to_vec(&v).unwrap()),
        1 => prop::collection::vec(any::<u8>(), 0..200),
    ]
}

#[test]
fn arbitrary_bodies_never_produce_5xx() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let s = rt.block_on(TestServer::start());
    let admin = rt.block_on(s.admin_session());
    let mut runner =
        TestRunner::new(ProptestConfig { cases: 160, failure_persistence: None, ..ProptestConfig::default() });
    let strategy = (0..BODY_ENDPOINTS.len(), body(), any::<bool>());
    let result = runner.run(&strategy, |(i, body, with_cookie)| {
        let (m, path, family) = BODY_ENDPOINTS[i];
        let r = rt.block_on(async {
            let req = s.req(method(m), path).raw(Some("application/json"), body.clone());
            (if with_cookie { req.cookie(&admin) } else { req }).send().await
        });
        let shown = String::from_utf8_lossy(&body).into_owned();
        prop_assert!(r.status < 500, "{m} {path} {shown:?} -> {} {}", r.status, r.text);
        if r.status >= 400 {
            let v: Value =
                serde_json::from_str(&r.text).map_err(|e| TestCaseError::fail(format!("{e}: {}", r.text)))?;
            let expected: &[&str] = if family == Family::Auth { &["code", "message"] } else { &["error"] };
            let got: Vec<&str> = v.as_object().map(|o| o.keys().map(String::as_str).collect()).unwrap_or_default();
            let mut exp = expected.to_vec();
            exp.sort();
            prop_assert_eq!(got, exp, "{} {} {:?} -> {} {}", m, path, shown, r.status, r.text);
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    // (A fuzzed sign-out may have ended `admin`: sign in afresh.)
    let admin = rt.block_on(s.admin_session());
    assert_eq!(rt.block_on(s.list_users(Some(&admin))).status, 200, "server still serves");
    rt.block_on(s.stop());
}
