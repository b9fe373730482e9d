//! Back-channel logout (OpenID Connect Back-Channel Logout 1.0; issue #46): a relying party registered with a
//! `backchannel_logout_uri` is POSTed a signed `logout_token` when a session that gave it a grant ends (a ban,
//! "sign out everywhere", a sign-out, end-session), through the webhooks' durable queue. The relying party here is a
//! small HTTP listener on loopback in the test itself.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::harness::*;
use super::provider::{RP, granted, register, verified};

/// One POST the relying party received.
#[derive(Debug, Clone)]
struct Received {
    path: String,
    content_type: String,
    logout_token: String,
    /// Answered 200 (else 503).
    accepted: bool,
}

/// A relying party's back-channel endpoint on 127.0.0.1: records every POST; answers 503 to the first `refuse`
/// of them (a relying party down for a moment), 200 to the others.
struct RelyingParty {
    port: u16,
    received: Arc<Mutex<Vec<Received>>>,
}

impl RelyingParty {
    async fn start(refuse: u32) -> Self {
        Self::start_on(0, refuse).await
    }

    async fn start_on(port: u16, refuse: u32) -> Self {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let received = Arc::new(Mutex::new(Vec::new()));
        let answered = Arc::new(Mutex::new(0u32));
        let (log, count) = (Arc::clone(&received), Arc::clone(&answered));
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let (log, count) = (Arc::clone(&log), Arc::clone(&count));
                tokio::spawn(async move {
                    let mut bytes = Vec::new();
                    let mut buf = [0u8; 4096];
                    // The head, then the body its content-length announces.
                    let (head, body) = loop {
                        let n = stream.read(&mut buf).await.unwrap_or(0);
                        if n == 0 {
                            return;
                        }
                        bytes.extend_from_slice(&buf[..n]);
                        let Some(end) = bytes.windows(4).position(|w| w == b"\r\n\r\n") else { continue };
                        let head = String::from_utf8_lossy(&bytes[..end]).into_owned();
                        let length: usize = head
                            .lines()
                            .find_map(|l| {
                                let (k, v) = l.split_once(':')?;
                                k.eq_ignore_ascii_case("content-length").then(|| v.trim().parse().ok())?
                            })
                            .unwrap_or(0);
                        while bytes.len() < end + 4 + length {
                            let n = stream.read(&mut buf).await.unwrap_or(0);
                            if n == 0 {
                                return;
                            }
                            bytes.extend_from_slice(&buf[..n]);
                        }
                        break (head, String::from_utf8_lossy(&bytes[end + 4..end + 4 + length]).into_owned());
                    };
                    let path = head.split(' ').nth(1).unwrap_or_default().to_owned();
                    let content_type = head
                        .lines()
                        .find_map(|l| {
                            let (k, v) = l.split_once(':')?;
                            k.eq_ignore_ascii_case("content-type").then(|| v.trim().to_owned())
                        })
                        .unwrap_or_default();
                    let logout_token = url::form_urlencoded::parse(body.as_bytes())
                        .find(|(k, _)| k == "logout_token")
                        .map(|(_, v)| v.into_owned())
                        .unwrap_or_default();
                    let accepted = {
                        let mut n = count.lock().unwrap();
                        *n += 1;
                        *n > refuse
                    };
                    log.lock().unwrap().push(Received { path, content_type, logout_token, accepted });
                    let status = if accepted { "200 OK" } else { "503 Service Unavailable" };
                    let answer = format!("HTTP/1.1 {status}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
                    let _ = stream.write_all(answer.as_bytes()).await;
                });
            }
        });
        Self { port, received }
    }

    fn uri(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    fn at(&self, path: &str) -> Vec<Received> {
        self.received.lock().unwrap().iter().filter(|r| r.path == path).cloned().collect()
    }

    /// Waits (at most 30 s) until `count` POSTs answered 200 have reached `path`; answers them.
    async fn wait_for(&self, path: &str, count: usize) -> Vec<Received> {
        let started = Instant::now();
        loop {
            let got = self.at(path);
            if got.iter().filter(|r| r.accepted).count() >= count {
                return got;
            }
            assert!(started.elapsed() < Duration::from_secs(30), "waited 30 s for {count} at {path}: {got:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// Checks a logout token as a relying party must (§2.6): signed with a published key, `typ` `logout+jwt`, this
/// issuer, the client as audience, the user, the session its ID token named, the back-channel event, no nonce,
/// and a short life. Answers its claims.
async fn checked(s: &TestServer, token: &str, issuer: &str, client_id: &str, user: &str, sid: &str) -> Value {
    let (header, claims) = verified(s, token).await;
    assert_eq!(header["typ"], "logout+jwt", "{header}");
    assert_eq!(claims["iss"], issuer, "{claims}");
    assert_eq!(claims["aud"], client_id, "{claims}");
    assert_eq!(claims["sub"], user, "{claims}");
    assert_eq!(claims["sid"], sid, "{claims}");
    assert_eq!(claims["events"], json!({"http://schemas.openid.net/event/backchannel-logout": {}}), "{claims}");
    assert!(claims.get("nonce").is_none(), "{claims}");
    assert!(claims["jti"].as_str().is_some_and(|j| !j.is_empty()), "{claims}");
    let (iat, exp) = (claims["iat"].as_i64().unwrap(), claims["exp"].as_i64().unwrap());
    assert_eq!(exp - iat, 120, "{claims}");
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
    assert!((iat - now).abs() < 60, "{claims}");
    claims
}

/// The session an ID token names.
async fn sid_of(s: &TestServer, tokens: &Value) -> String {
    let (_, claims) = verified(s, str_of(&tokens["id_token"])).await;
    str_of(&claims["sid"]).to_owned()
}

/// Signing out everywhere and a ban each send every relying party with a grant of the user, and a
/// `backchannel_logout_uri`, one signed logout token naming the user and the session; the first POST is refused
/// (503) and retried. A client without a back-channel URI, or without a grant of the user, is sent nothing. The
/// discovery document says so, and the ID tokens of a back-channel client name the session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ban_and_signing_out_everywhere_send_each_relying_party_a_signed_logout_token() {
    let s = TestServer::start_adjusted(|c| c.webhooks.allow_internal_targets = true).await;
    let rp = RelyingParty::start(1).await;
    let admin = s.admin_session().await;
    let discovery = s.get("/api/auth/.well-known/openid-configuration").send().await.json();
    assert_eq!(discovery["backchannel_logout_supported"], true);
    assert_eq!(discovery["backchannel_logout_session_supported"], true);
    let issuer = str_of(&discovery["issuer"]).to_owned();

    let body = json!({"client_name": "A", "redirect_uris": [RP], "skip_consent": true, "scope": "openid offline_access",
                      "backchannel_logout_uri": rp.uri("/bc/a"), "backchannel_logout_session_required": true});
    let (a_id, a_secret) = register(&s, &admin, body).await;
    let a_secret = a_secret.unwrap();
    let a = (a_id.as_str(), a_secret.as_str());
    let got = s.get(&format!("/api/admin/oidc/clients/{a_id}")).cookie(&admin).send().await.json();
    assert_eq!(got["client"]["backchannel_logout_uri"], rp.uri("/bc/a"));
    assert_eq!(got["client"]["backchannel_logout_session_required"], true);
    let body = json!({"client_name": "B", "redirect_uris": [RP], "skip_consent": true, "scope": "openid"});
    let (b_id, b_secret) = register(&s, &admin, body).await;
    let b_secret = b_secret.unwrap();
    let body = json!({"client_name": "C", "redirect_uris": [RP], "skip_consent": true, "scope": "openid",
                      "backchannel_logout_uri": rp.uri("/bc/c")});
    register(&s, &admin, body).await;

    // Sign out everywhere: A hears of it (after one refused attempt), B and C do not.
    let u = s.new_user("bc-everywhere").await;
    let tokens = granted(&s, &u.cookie, a, "openid offline_access").await;
    let sid = sid_of(&s, &tokens).await;
    let other = granted(&s, &u.cookie, (&b_id, &b_secret), "openid").await;
    let (_, b_claims) = verified(&s, str_of(&other["id_token"])).await;
    assert!(b_claims.get("sid").is_none(), "a client that neither ends nor hears of sessions: {b_claims}");
    let r = s.post("/api/auth/revoke-sessions").cookie(&u.cookie).send().await;
    assert_eq!(r.status, 200, "{}", r.text);
    let got = rp.wait_for("/bc/a", 1).await;
    assert_eq!(got.iter().map(|r| r.accepted).collect::<Vec<_>>(), [false, true], "refused, then delivered: {got:?}");
    assert_eq!(got[1].content_type, "application/x-www-form-urlencoded");
    let first = checked(&s, &got[1].logout_token, &issuer, &a_id, &u.id, &sid).await;

    // A ban, on another user: one more token, a new jti.
    let v = s.new_user("bc-banned").await;
    let tokens = granted(&s, &v.cookie, a, "openid").await;
    let sid = sid_of(&s, &tokens).await;
    // On the first node (with two, the grant may have been made on the other, and either may send the logout).
    s.nodes[0].patch_ok(&admin, &json!({"userId": v.id, "banned": true})).await;
    let got = rp.wait_for("/bc/a", 2).await;
    let second = checked(&s, &got.last().unwrap().logout_token, &issuer, &a_id, &v.id, &sid).await;
    assert_ne!(first["jti"], second["jti"]);

    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(rp.at("/bc/c").is_empty(), "no grant, no logout: {:?}", rp.at("/bc/c"));
    assert_eq!(rp.at("/bc/a").len(), 3, "one token per logout, and the retry: {:?}", rp.at("/bc/a"));
}

/// One session ended is told about alone: a sign-out, a session revoked by its user, and end-session each send the
/// relying party one token naming that session, never the user's other sessions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sign_out_a_revoked_session_and_end_session_each_name_their_session_alone() {
    let s = TestServer::start_adjusted(|c| c.webhooks.allow_internal_targets = true).await;
    let rp = RelyingParty::start(0).await;
    let admin = s.admin_session().await;
    let issuer = str_of(&s.get("/api/auth/.well-known/openid-configuration").send().await.json()["issuer"]).to_owned();
    let bye = "https://rp.example/bye";
    let body = json!({"client_name": "A", "redirect_uris": [RP], "skip_consent": true, "scope": "openid",
                      "enable_end_session": true, "post_logout_redirect_uris": [bye],
                      "backchannel_logout_uri": rp.uri("/bc")});
    let (a_id, a_secret) = register(&s, &admin, body).await;
    let a_secret = a_secret.unwrap();
    let a = (a_id.as_str(), a_secret.as_str());
    let u = s.new_user("bc-one").await;
    let (one, two, three) = (u.cookie.clone(), s.login(&u.email, PASSWORD).await, s.login(&u.email, PASSWORD).await);
    let sid_one = sid_of(&s, &granted(&s, &one, a, "openid").await).await;
    let hint = granted(&s, &two, a, "openid").await;
    let sid_two = sid_of(&s, &hint).await;
    let sid_three = sid_of(&s, &granted(&s, &three, a, "openid").await).await;
    assert!(sid_one != sid_two && sid_two != sid_three);

    let r = s.post("/api/auth/sign-out").cookie(&one).json(&json!({})).send().await;
    assert_eq!(r.status, 200, "{}", r.text);
    let got = rp.wait_for("/bc", 1).await;
    checked(&s, &got[0].logout_token, &issuer, &a_id, &u.id, &sid_one).await;

    let r = s.post("/api/auth/revoke-session").cookie(&two).json(&json!({"token": three})).send().await;
    assert_eq!(r.status, 200, "{}", r.text);
    let got = rp.wait_for("/bc", 2).await;
    checked(&s, &got[1].logout_token, &issuer, &a_id, &u.id, &sid_three).await;

    let q = super::provider::query(&[("id_token_hint", str_of(&hint["id_token"])), ("post_logout_redirect_uri", bye)]);
    let r = s.get(&format!("/api/auth/oauth2/end-session?{q}")).send().await;
    assert_eq!(r.status, 302, "{}", r.text);
    let got = rp.wait_for("/bc", 3).await;
    checked(&s, &got[2].logout_token, &issuer, &a_id, &u.id, &sid_two).await;

    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(rp.at("/bc").len(), 3, "one token per session ended: {:?}", rp.at("/bc"));
}

/// The code flow on `client` for a skip-consent confidential client: its tokens.
async fn grant_on(client: &Client, cookie: &str, (id, secret): (&str, &str)) -> Value {
    use super::provider::{location, pkce, query};
    let (verifier, challenge) = pkce();
    let p = [
        ("response_type", "code"),
        ("client_id", id),
        ("redirect_uri", RP),
        ("scope", "openid"),
        ("code_challenge", challenge.as_str()),
        ("code_challenge_method", "S256"),
    ];
    let r = client.get(&format!("/api/auth/oauth2/authorize?{}", query(&p))).cookie(cookie).send().await;
    let (_, params) = location(&r);
    let f = [
        ("grant_type", "authorization_code"),
        ("code", params["code"].as_str()),
        ("redirect_uri", RP),
        ("code_verifier", verifier.as_str()),
    ];
    use base64::Engine;
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("{id}:{secret}"));
    let r = client
        .post("/api/auth/oauth2/token")
        .header("authorization", &format!("Basic {basic}"))
        .raw(Some("application/x-www-form-urlencoded"), query(&f))
        .send()
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    r.json()
}

/// `kill -9` right after a ban is acknowledged, with the relying party down: the logout was queued in the ban's
/// commit, so the relying party gets it once the server is back (and it listens again).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_logout_queued_with_a_ban_acknowledged_before_a_kill_9_is_sent_after_the_restart() {
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("config.toml"), "[webhooks]\nallow_internal_targets = true\n").unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let server = ChildServer::spawn(root.path(), BOOTSTRAP_ENV).await;
    let c = &server.client;
    let admin = c.admin_session().await;
    let body = json!({"client_name": "A", "redirect_uris": [RP], "skip_consent": true, "scope": "openid",
                      "backchannel_logout_uri": format!("http://127.0.0.1:{port}/bc")});
    let r = c.post("/api/admin/oidc/clients").cookie(&admin).json(&body).send().await;
    assert_eq!(r.status, 201, "{}", r.text);
    let (id, secret) =
        (str_of(&r.json()["client"]["client_id"]).to_owned(), str_of(&r.json()["client_secret"]).to_owned());
    let u = c.new_user("bc-killed").await;
    let tokens = grant_on(c, &u.cookie, (&id, &secret)).await;
    let sid = {
        use base64::Engine;
        let payload = str_of(&tokens["id_token"]).split('.').nth(1).unwrap().to_owned();
        let claims: Value =
            serde_json::from_slice(&base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(payload).unwrap()).unwrap();
        str_of(&claims["sid"]).to_owned()
    };
    c.patch_ok(&admin, &json!({"userId": u.id, "banned": true})).await;
    server.kill9();

    let rp = RelyingParty::start_on(port, 0).await;
    let server = ChildServer::spawn(root.path(), &[]).await;
    let got = rp.wait_for("/bc", 1).await;
    let (_, payload) = got[0].logout_token.rsplit_once('.').unwrap().0.split_once('.').unwrap();
    use base64::Engine;
    let claims: Value =
        serde_json::from_slice(&base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(payload).unwrap()).unwrap();
    assert_eq!(
        (claims["sub"].as_str(), claims["sid"].as_str(), claims["aud"].as_str()),
        (Some(u.id.as_str()), Some(sid.as_str()), Some(id.as_str()))
    );
    drop(server);
}

/// The back-channel fields' rules, each refusal a 400 naming the field: https or loopback http only, no fragment,
/// `backchannel_logout_session_required` only with a URI, a string or `null`. A change is audited; `null` removes
/// the URI (and the client's ID tokens stop naming the session).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_back_channel_fields_are_checked_audited_and_removable() {
    let s = TestServer::start().await;
    let admin = s.admin_session().await;
    let base = json!({"client_name": "A", "redirect_uris": [RP], "skip_consent": true, "scope": "openid"});
    for (extra, field) in [
        (json!({"backchannel_logout_uri": "http://rp.example/bc"}), "backchannel_logout_uri"),
        (json!({"backchannel_logout_uri": "https://rp.example/bc#x"}), "backchannel_logout_uri"),
        (json!({"backchannel_logout_uri": "/bc"}), "backchannel_logout_uri"),
        (json!({"backchannel_logout_uri": 5}), "backchannel_logout_uri"),
        (json!({"backchannel_logout_session_required": true}), "backchannel_logout_session_required"),
        (json!({"backchannel_logout_session_required": "yes"}), "backchannel_logout_session_required"),
    ] {
        let mut body = base.clone();
        body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        let r = s.post("/api/admin/oidc/clients").cookie(&admin).json(&body).send().await;
        assert_eq!(r.status, 400, "{extra}: {}", r.text);
        assert!(r.text.contains(field), "{extra}: {}", r.text);
    }
    let (id, secret) = register(&s, &admin, base).await;
    let secret = secret.unwrap();
    let path = format!("/api/admin/oidc/clients/{id}");
    let r =
        s.patch(&path).cookie(&admin).json(&json!({"backchannel_logout_uri": "https://rp.example/bc"})).send().await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json()["client"]["backchannel_logout_uri"], "https://rp.example/bc");
    let audit = s.get("/api/admin/audit?action=oauth_client.updated").cookie(&admin).send().await.json();
    assert!(str_of(&audit["entries"][0]["detail"]).contains("backchannel_logout_uri https://rp.example/bc"), "{audit}");
    let u = s.new_user("bc-fields").await;
    let tokens = granted(&s, &u.cookie, (&id, &secret), "openid").await;
    assert!(
        verified(&s, str_of(&tokens["id_token"])).await.1["sid"].is_string(),
        "a back-channel client's ID token names the session"
    );

    let r = s.patch(&path).cookie(&admin).json(&json!({"backchannel_logout_uri": null})).send().await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json()["client"]["backchannel_logout_uri"], Value::Null);
    let tokens = granted(&s, &u.cookie, (&id, &secret), "openid").await;
    assert!(verified(&s, str_of(&tokens["id_token"])).await.1.get("sid").is_none(), "no longer");
}

// --- dynamic client registration (RFC 7591) -----------------------------------------------------------------

fn sha256_hex(text: &str) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(text.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

/// Off by default: `/oauth2/register` is 403 `access_denied` and discovery names no `registration_endpoint`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dynamic_registration_is_off_by_default() {
    let s = TestServer::start().await;
    let admin = s.admin_session().await;
    let discovery = s.get("/api/auth/.well-known/openid-configuration").send().await.json();
    assert!(discovery.get("registration_endpoint").is_none(), "{discovery}");
    let body = json!({"client_name": "X", "redirect_uris": [RP]});
    for cookie in [None, Some(admin.as_str())] {
        let r = s.post("/api/auth/oauth2/register").cookie_opt(cookie).json(&body).send().await;
        assert_eq!(r.status, 403, "{}", r.text);
        assert_eq!(r.json(), json!({"error_description": "Client registration is disabled", "error": "access_denied"}));
    }
}

/// `registration = "token"`: the initial access token (or an administrator's session) registers a client; its
/// secret is shown once and stored hashed; a native app gets a loopback redirect on any port; the registration is
/// audited. Every refusal: no credentials (401 with `WWW-Authenticate: Bearer` and the plugin's body), a wrong
/// token, a signed-in user who is no administrator, a web client's http redirect, a scope beyond the standard ones,
/// client credentials, `skip_consent`, an ill-typed field.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dynamic_registration_takes_the_initial_access_token_or_an_administrator_and_refuses_precisely() {
    let token = "initial-access-token-for-the-tests-0123456789";
    let s = TestServer::start_adjusted(|c| {
        c.provider.registration = service_auth::config::Registration::Token;
        c.provider.registration_token_sha256 = Some(sha256_hex(token));
    })
    .await;
    let admin = s.admin_session().await;
    let discovery = s.get("/api/auth/.well-known/openid-configuration").send().await.json();
    assert_eq!(discovery["registration_endpoint"], format!("{}/oauth2/register", str_of(&discovery["issuer"])));
    let register = |auth: Option<String>, cookie: Option<String>, body: Value| {
        let s = &s;
        async move {
            let mut r = s.post("/api/auth/oauth2/register").cookie_opt(cookie.as_deref()).json(&body);
            if let Some(auth) = auth {
                r = r.header("authorization", &auth);
            }
            r.send().await
        }
    };
    let bearer = Some(format!("Bearer {token}"));
    let web = json!({"client_name": "Wiki", "redirect_uris": [RP], "scope": "openid email"});

    // Who may.
    let r = register(None, None, web.clone()).await;
    assert_eq!(r.status, 401, "{}", r.text);
    assert_eq!(r.header("www-authenticate").as_deref(), Some("Bearer"));
    assert_eq!(r.json(), json!({"error_description": "Authentication required for client registration"}));
    let r = register(Some("Bearer not-the-token".into()), None, web.clone()).await;
    assert_eq!(r.status, 401, "{}", r.text);
    let u = s.new_user("not-an-admin").await;
    let r = register(bearer.clone(), Some(u.cookie.clone()), web.clone()).await;
    assert_eq!((r.status, r.json()["error"].as_str()), (403, Some("access_denied")), "{}", r.text);

    // A confidential web client with the token: 201, the secret once, stored as its hash.
    let r = register(bearer.clone(), None, web.clone()).await;
    assert_eq!(r.status, 201, "{}", r.text);
    assert_eq!(r.header("cache-control").as_deref(), Some("no-store"));
    let made = r.json();
    let id = str_of(&made["client_id"]).to_owned();
    let secret = str_of(&made["client_secret"]).to_owned();
    assert_eq!((id.len(), secret.len()), (32, 32), "{made}");
    assert_eq!(made["client_secret_expires_at"], 0);
    assert!(made["client_id_issued_at"].is_i64(), "{made}");
    assert_eq!(made["token_endpoint_auth_method"], "client_secret_basic");
    assert_eq!(made["scope"], "openid email");
    assert_eq!(made["grant_types"], json!(["authorization_code", "refresh_token"]));
    assert_eq!(made["response_types"], json!(["code"]));
    let shown = s.get(&format!("/api/admin/oidc/clients/{id}")).cookie(&admin).send().await;
    assert_eq!(shown.status, 200, "{}", shown.text);
    assert!(!shown.text.contains(&secret), "the secret is shown once");
    let audit = s.get("/api/admin/audit?action=oauth_client.created").cookie(&admin).send().await.json();
    let entry = &audit["entries"][0];
    assert_eq!(entry["actor_id"], Value::Null, "{entry}");
    assert!(str_of(&entry["detail"]).contains("dynamic registration, initial access token"), "{entry}");
    // It works: the code flow with consent skipped is not given, so the consent page is asked for.
    let r = s
        .get(&format!(
            "/api/auth/oauth2/authorize?{}",
            super::provider::query(&[
                ("response_type", "code"),
                ("client_id", &id),
                ("redirect_uri", RP),
                ("scope", "openid"),
                ("code_challenge", "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"),
                ("code_challenge_method", "S256")
            ])
        ))
        .cookie(&u.cookie)
        .send()
        .await;
    let (to, _) = super::provider::location(&r);
    assert!(to.ends_with("/consent"), "a dynamically registered client asks for consent: {to}");

    // A public native app by an administrator's session, on a loopback redirect.
    let native = json!({"client_name": "CLI", "application_type": "native", "token_endpoint_auth_method": "none",
                        "redirect_uris": ["http://127.0.0.1/callback"], "software_id": "ignored"});
    let r = register(None, Some(admin.clone()), native).await;
    assert_eq!(r.status, 201, "{}", r.text);
    assert!(r.json().get("client_secret").is_none(), "{}", r.text);
    assert_eq!(r.json()["token_endpoint_auth_method"], "none");
    let audit = s.get("/api/admin/audit?action=oauth_client.created").cookie(&admin).send().await.json();
    assert!(audit["entries"][0]["actor_id"].is_string(), "the administrator: {audit}");

    // What is refused, each precisely.
    for (body, status, error) in [
        (json!({"client_name": "A", "redirect_uris": ["http://rp.example/cb"]}), 400, "invalid_redirect_uri"),
        (json!({"client_name": "A"}), 400, "invalid_redirect_uri"),
        (json!({"client_name": "A", "redirect_uris": [RP], "scope": "openid invoices:read"}), 400, "invalid_scope"),
        (
            json!({"client_name": "A", "redirect_uris": [RP], "grant_types": ["client_credentials"]}),
            400,
            "invalid_client_metadata",
        ),
        (
            json!({"client_name": "A", "redirect_uris": [RP], "grant_types": ["password"]}),
            400,
            "invalid_client_metadata",
        ),
        (json!({"client_name": "A", "redirect_uris": [RP], "skip_consent": true}), 400, "invalid_client_metadata"),
        (
            json!({"client_name": "A", "redirect_uris": [RP], "response_types": ["token"]}),
            400,
            "invalid_client_metadata",
        ),
        (json!({"client_name": 7, "redirect_uris": [RP]}), 400, "invalid_client_metadata"),
        (json!({"redirect_uris": [RP]}), 400, "invalid_client_metadata"),
        (
            json!({"client_name": "A", "redirect_uris": [RP], "token_endpoint_auth_method": "private_key_jwt"}),
            400,
            "invalid_client_metadata",
        ),
    ] {
        let r = register(bearer.clone(), None, body.clone()).await;
        assert_eq!((r.status, r.json()["error"].as_str()), (status, Some(error)), "{body}: {}", r.text);
        assert!(r.json()["error_description"].is_string(), "{body}: {}", r.text);
    }
}
