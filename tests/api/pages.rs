//! The pages behind the mailed links, for a deployment without pages of its own: a request that names no
//! `redirectTo`/`callbackURL` gets a link that leads to the service's reset form or "e-mail verified" page, and
//! the whole round trip works with nothing but this server. (The pages in a real browser: tests/browser.)

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::json;

use super::harness::*;

/// Waits (at most 30 s) for a message file in `dir` that `seen` does not hold yet; returns its text with
/// quoted-printable soft line breaks undone.
async fn next_message(dir: &Path, seen: &mut Vec<PathBuf>) -> String {
    let started = Instant::now();
    loop {
        let found = std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .filter_map(|e| e.ok().map(|e| e.path()))
            .find(|p| p.extension().is_some_and(|x| x == "eml") && !seen.contains(p));
        if let Some(file) = found {
            seen.push(file.clone());
            let text = std::fs::read_to_string(file).unwrap();
            return text.replace("=\r\n", "").replace("=\n", "").replace("=3D", "=");
        }
        assert!(started.elapsed() < Duration::from_secs(30), "no new message in {}", dir.display());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The path and query of the first `http://auth.test…` link in a message.
fn link_in(message: &str) -> String {
    let at = message.find("http://auth.test/").expect("a link") + "http://auth.test".len();
    message[at..].split(|c: char| c.is_whitespace()).next().unwrap().to_owned()
}

/// A page as the service serves it: HTML, under the console's policy, never cached, never a referrer.
fn assert_page(r: &Resp, says: &str) {
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.header("content-type").as_deref(), Some("text/html; charset=utf-8"));
    let csp = r.header("content-security-policy").unwrap();
    assert!(csp.contains("script-src 'self'") && csp.contains("frame-ancestors 'none'"), "{csp}");
    assert_eq!(r.header("referrer-policy").as_deref(), Some("no-referrer"));
    assert_eq!(r.header("cache-control").as_deref(), Some("no-store"));
    assert!(r.text.contains(says), "{}", r.text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_pages_of_the_application_the_mailed_links_lead_to_the_services_own() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("mail");
    let configured = dir.clone();
    let s = TestServer::start_adjusted(move |c| {
        c.email.directory = Some(configured);
        c.base_url = Some("http://auth.test".into());
    })
    .await;
    let mut seen = Vec::new();
    let u = s.new_user("pageless").await;

    // Reset: the link redirects to the form, which posts to the API; then the link is spent.
    let r = s.post("/api/auth/request-password-reset").json(&json!({"email": u.email})).send().await;
    assert_eq!(r.status, 200, "{}", r.text);
    let link = link_in(&next_message(&dir, &mut seen).await);
    assert!(link.ends_with("?callbackURL=%2Fauth%2Freset-password"), "{link}");
    let r = s.get(&link).send().await;
    assert_eq!(r.status, 302);
    let form = r.header("location").unwrap();
    assert!(form.starts_with("/auth/reset-password?token="), "{form}");
    let page = s.get(&form).send().await;
    assert_page(&page, r#"<form id="reset""#);
    for asset in ["/auth/pages.css", "/auth/reset-password.js"] {
        let r = s.get(asset).send().await;
        assert_eq!(r.status, 200, "{asset}");
        assert!(r.header("content-security-policy").is_some(), "{asset}");
    }
    assert_eq!(s.get("/auth/nothing.js").send().await.status, 404);
    let token = form.trim_start_matches("/auth/reset-password?token=");
    let r =
        s.post("/api/auth/reset-password").json(&json!({"token": token, "newPassword": "a page-set password"})).send();
    assert_eq!(r.await.status, 200);
    let (status, body, _) = s.sign_in(&u.email, "a page-set password").await;
    assert_eq!(status, 200);
    // The mailed link reached the mailbox, so the address is proven by it.
    assert_eq!(body["user"]["emailVerified"], true);
    let spent = s.get(&link).send().await.header("location").unwrap();
    assert_eq!(spent, "/auth/reset-password?error=INVALID_TOKEN");
    assert_page(&s.get(&spent).send().await, "This link is no longer valid");
    assert_page(&s.get("/auth/reset-password").send().await, "This link is no longer valid");

    // Verification (of another account: the reset proved the first one's address): the link verifies, then lands
    // on the "verified" page; a second time on "no longer valid".
    let u = s.new_user("pageless-verify").await;
    let r = s.post("/api/auth/send-verification-email").json(&json!({"email": u.email})).send().await;
    assert_eq!(r.status, 200, "{}", r.text);
    let link = link_in(&next_message(&dir, &mut seen).await);
    assert!(link.ends_with("&callbackURL=%2Fauth%2Femail-verified"), "{link}");
    let r = s.get(&link).send().await;
    assert_eq!((r.status, r.header("location").as_deref()), (302, Some("/auth/email-verified")));
    assert_page(&s.get("/auth/email-verified").send().await, "E-mail address confirmed");
    let (_, body, _) = s.sign_in(&u.email, PASSWORD).await;
    assert_eq!(body["user"]["emailVerified"], true);
    let again = s.get(&link).send().await.header("location").unwrap();
    assert_eq!(again, "/auth/email-verified?error=INVALID_TOKEN");
    assert_page(&s.get(&again).send().await, "This link is no longer valid");
}

/// Whoever opens the server's address in a browser gets a page linking the console and the account page (not a
/// 404), with or without a query, under the pages' policy; `HEAD` the same, and no other method.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_front_door_links_the_console_and_the_account_page() {
    let s = TestServer::start().await;
    for path in ["/", "/?from=bookmark"] {
        let r = s.get(path).send().await;
        assert_page(&r, r#"<a id="console-link" href="admin/">"#);
        assert!(r.text.contains(r#"<a id="account-link" href="account/">"#), "{}", r.text);
    }
    let r = s.req(reqwest::Method::HEAD, "/").send().await;
    assert_eq!((r.status, r.header("content-type").as_deref()), (200, Some("text/html; charset=utf-8")));
    let r = s.post("/").json(&json!({})).send().await;
    assert_eq!((r.status, r.header("allow").as_deref()), (405, Some("GET, HEAD")));
    // Where it leads: the console's page and the account page.
    let console = s.get("/admin/").send().await;
    assert_eq!(console.status, 200);
    assert_eq!(console.header("content-type").as_deref(), Some("text/html; charset=utf-8"));
    assert_page(&s.get("/account/").send().await, r#"<script type="module" src="../auth/account.js">"#);
    s.stop().await;
}

/// The sign-in, account and invitation pages and their scripts: served under the policy that allows only the
/// service's own script and style (no inline code, no frame), never cached and never sent on as a referrer (their
/// addresses carry a return path or an invitation's id), whatever the query; the scripts are files of their own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sign_in_account_and_invitation_pages_are_served_under_the_policy() {
    let s = TestServer::start().await;
    let pages = [
        ("/sign-in", r#"<form id="password-form""#),
        ("/sign-in?returnTo=https%3A%2F%2Fevil.example%2F", r#"<script type="module" src="auth/sign-in.js">"#),
        ("/account/", r#"<main id="main""#),
        ("/accept-invitation?id=0123", r#"<script type="module" src="auth/accept-invitation.js">"#),
    ];
    for (path, says) in pages {
        let r = s.get(path).send().await;
        assert_page(&r, says);
        assert!(r.header("content-security-policy").unwrap().contains("default-src 'self'"), "{path}");
        assert!(!r.text.contains("<script>") && !r.text.contains("style="), "{path}: inline code");
    }
    for asset in ["common.js", "sign-in.js", "account.js", "accept-invitation.js"] {
        let r = s.get(&format!("/auth/{asset}")).send().await;
        assert_eq!(r.status, 200, "{asset}");
        assert_eq!(r.header("content-type").as_deref(), Some("text/javascript; charset=utf-8"), "{asset}");
        let csp = r.header("content-security-policy").unwrap();
        assert!(csp.contains("script-src 'self'") && csp.contains("frame-ancestors 'none'"), "{asset}: {csp}");
    }
    // The account page and the console are folders: without the slash (relative links would point elsewhere), a
    // redirect to them.
    for (path, folder) in [("/account", "/account/"), ("/admin", "/admin/"), ("/account?x=1", "/account/")] {
        let r = s.get(path).send().await;
        assert_eq!((r.status, r.header("location").as_deref()), (302, Some(folder)), "{path}");
    }
    assert_eq!(s.get("/account/x").send().await.status, 404);
    assert_eq!(s.post("/sign-in").json(&json!({})).send().await.status, 405);
    s.stop().await;
}

/// `GET /api/account/providers`: the configured identity providers by id with the names the buttons show (the
/// preset's, else the id); none configured, an empty list; a query parameter it does not take, a 400.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sign_in_page_learns_the_configured_identity_providers() {
    let s = TestServer::start().await;
    let r = s.get("/api/account/providers").send().await;
    assert_eq!((r.status, r.json()), (200, json!({"providers": []})));
    s.stop().await;

    use service_auth::oauth::config::{ProviderConfig, Secret};
    let s = TestServer::start_adjusted(|c| {
        for text in [
            "id = \"gh\"\npreset = \"github\"\nclient_id = \"gh\"\nclient_secret_env = \"UNUSED\"\n",
            "id = \"corp\"\nissuer = \"https://idp.example\"\nclient_id = \"svc\"\nclient_secret_env = \"UNUSED\"\n",
        ] {
            let mut p: ProviderConfig = toml::from_str(text).unwrap();
            p.client_secret = Some(Secret::new("secret"));
            c.oauth.providers.push(p);
        }
    })
    .await;
    let r = s.get("/api/account/providers").send().await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json(), json!({"providers": [{"id": "corp", "name": "corp"}, {"id": "gh", "name": "GitHub"}]}));
    assert!(!r.text.contains("secret"), "{}", r.text);
    let r = s.get("/api/account/providers?all=1").send().await;
    assert_eq!((r.status, r.json()["code"].as_str()), (400, Some("VALIDATION_ERROR")), "{}", r.text);
    s.stop().await;
}

/// `POST /api/account/totp-qr {uri}`: the QR code of an authenticator's URI as SVG for a signed-in caller, never
/// stored; signed out a 401; anything but an `otpauth://totp/` URI of at most 512 bytes a 400 (a precise one,
/// never a 500), as is an unknown field.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_account_page_gets_the_authenticators_qr_code_as_svg() {
    let s = TestServer::start().await;
    let u = s.new_user("qr").await;
    let uri =
        "otpauth://totp/service-auth:qr%40example.com?secret=JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP&issuer=service-auth";
    let r = s.post("/api/account/totp-qr").json(&json!({"uri": uri})).send().await;
    assert_eq!(r.status, 401, "{}", r.text);
    let r = s.post("/api/account/totp-qr").cookie(&u.cookie).json(&json!({"uri": uri})).send().await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.header("content-type").as_deref(), Some("image/svg+xml"));
    assert_eq!(r.header("cache-control").as_deref(), Some("no-store"));
    assert!(r.text.starts_with("<?xml") && r.text.contains("<svg") && r.text.contains("<path"), "{}", r.text);
    // Another URI, another picture: it draws what it is given.
    let other = uri.replace("JBSWY3DP", "KRUGKIDR");
    let r2 = s.post("/api/account/totp-qr").cookie(&u.cookie).json(&json!({"uri": other})).send().await;
    assert_eq!(r2.status, 200);
    assert_ne!(r.text, r2.text);
    let long = format!("otpauth://totp/x?secret={}", "A".repeat(500));
    for bad in [
        json!({"uri": "https://evil.example/"}),
        json!({"uri": "otpauth://hotp/x?secret=AAAA"}),
        json!({"uri": long}),
        json!({"uri": "otpauth://totp/x\n?secret=AAAA"}),
        json!({"uri": 7}),
        json!({}),
        json!({"uri": uri, "size": 3}),
    ] {
        let r = s.post("/api/account/totp-qr").cookie(&u.cookie).json(&bad).send().await;
        assert_eq!(r.status, 400, "{bad}: {}", r.text);
        assert!(r.json()["code"].is_string(), "{bad}: {}", r.text);
    }
    s.stop().await;
}
