//! The identity provider's keys and metadata (src/http/provider.rs, issue #46): the JWKS at the jwt plugin's
//! path, the discovery documents at the issuer `<base>/api/auth`, read back by a relying-party library
//! (`openidconnect`'s discovery, which checks the issuer and parses every key), and the administrators' rotation.

use serde_json::{Value, json};

use super::harness::*;

fn kids(jwks: &Value) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = jwks["keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| (str_of(&k["alg"]).to_owned(), str_of(&k["kid"]).to_owned()))
        .collect();
    out.sort();
    out
}

fn key<'a>(list: &'a Value, kid: &str) -> &'a Value {
    list["keys"].as_array().unwrap().iter().find(|k| k["kid"] == kid).unwrap_or_else(|| panic!("{kid} in {list}"))
}

/// The first JWKS request makes one key per algorithm (EdDSA first, as the jwt plugin; ES256; RS256 for relying
/// parties that know nothing else); they are public keys only, stay the same on the next request and across a
/// restart (they were stored), and may be cached briefly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_jwks_publishes_one_public_key_per_algorithm_kept_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start_in(dir.path()).await;
    let r = s.get("/api/auth/jwks").send().await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(
        r.header("cache-control").as_deref(),
        Some("public, max-age=15, stale-while-revalidate=15, stale-if-error=86400")
    );
    let jwks = r.json();
    let keys = jwks["keys"].as_array().unwrap();
    assert_eq!(keys.len(), 3, "{jwks}");
    let shapes: Vec<(&str, &str, Option<&str>)> =
        keys.iter().map(|k| (str_of(&k["alg"]), str_of(&k["kty"]), k["crv"].as_str())).collect();
    assert_eq!(shapes, [("EdDSA", "OKP", Some("Ed25519")), ("ES256", "EC", Some("P-256")), ("RS256", "RSA", None)]);
    for k in keys {
        for private in ["d", "p", "q", "dp", "dq", "qi"] {
            assert!(k.get(private).is_none(), "a private part {private} in {k}");
        }
        assert_eq!(k["use"], "sig");
    }
    let first = kids(&jwks);
    assert_eq!(kids(&s.get("/api/auth/jwks").send().await.json()), first, "made once");
    s.stop().await;

    let s = TestServer::start_in(dir.path()).await;
    assert_eq!(kids(&s.get("/api/auth/jwks").send().await.json()), first, "the same keys after a restart");
    s.stop().await;
}

/// The discovery document is at the issuer, as the plugin serves it (and at RFC 8414's path-inserted form), not
/// at the site's root; `openidconnect`'s discovery accepts it (the issuer matches where it was fetched) and
/// parses the JWKS it names.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_discovery_document_is_served_at_the_issuer_and_a_relying_party_reads_it() {
    let s = TestServer::start().await;
    let issuer = format!("{}/api/auth", s.base);
    let r = s.get("/api/auth/.well-known/openid-configuration").send().await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(r.header("cache-control").unwrap().starts_with("public, max-age=15"));
    let doc = r.json();
    assert_eq!(doc["issuer"], issuer);
    assert_eq!(doc["jwks_uri"], format!("{issuer}/jwks"));
    assert_eq!(doc["authorization_endpoint"], format!("{issuer}/oauth2/authorize"));
    assert_eq!(doc["token_endpoint"], format!("{issuer}/oauth2/token"));
    assert_eq!(doc["code_challenge_methods_supported"], json!(["S256"]));
    assert_eq!(doc["authorization_response_iss_parameter_supported"], true);
    assert_eq!(doc["id_token_signing_alg_values_supported"], json!(["EdDSA", "ES256", "RS256"]));
    assert_eq!(doc["scopes_supported"], json!(["openid", "profile", "email", "offline_access"]));
    assert_eq!(doc["response_types_supported"], json!(["code"]));
    assert!(doc.get("registration_endpoint").is_none(), "dynamic registration is off by default");
    for path in ["/api/auth/.well-known/oauth-authorization-server", "/.well-known/oauth-authorization-server/api/auth"]
    {
        let other = s.get(path).send().await;
        assert_eq!(other.status, 200, "{path}");
        assert_eq!(other.json(), doc, "{path}");
    }
    assert_eq!(s.get("/.well-known/openid-configuration").send().await.status, 404, "the plugin's root is 404 too");
    let post = s.post("/api/auth/.well-known/openid-configuration").send().await;
    assert_eq!(post.status, 405);
    assert_eq!(post.header("allow").as_deref(), Some("GET, HEAD"));
    assert_eq!(s.req(reqwest::Method::HEAD, "/api/auth/jwks").send().await.status, 200);

    let http = openidconnect::reqwest::Client::builder().no_proxy().build().unwrap();
    let metadata = openidconnect::core::CoreProviderMetadata::discover_async(
        openidconnect::IssuerUrl::new(issuer.clone()).unwrap(),
        &http,
    )
    .await
    .expect("openidconnect's discovery accepts the document and its JWKS");
    assert_eq!(metadata.issuer().as_str(), issuer);
    assert_eq!(metadata.jwks().keys().len(), 3, "every key parses as a JWK");
}

/// A rotation publishes the new key at once and has it sign only from its time, the key it replaces signing until
/// then; with no lead the new key signs at once and the old one stays published, retired, until every token it
/// signed has expired. Audited; administrators only; malformed requests refused precisely.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotation_publishes_the_new_key_before_it_signs_and_keeps_the_old_one() {
    let s = TestServer::start().await;
    let admin = s.admin_session().await;
    let before = kids(&s.get("/api/auth/jwks").send().await.json());
    let old_ed = before.iter().find(|(alg, _)| alg == "EdDSA").unwrap().1.clone();
    let old_es = before.iter().find(|(alg, _)| alg == "ES256").unwrap().1.clone();

    let r = s.post("/api/admin/oidc/keys/rotate").cookie(&admin).json(&json!({"algs": ["EdDSA"]})).send().await;
    assert_eq!(r.status, 200, "{}", r.text);
    let list = r.json();
    assert_eq!(list["keys"].as_array().unwrap().len(), 4, "{list}");
    let new_ed = list["keys"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["alg"] == "EdDSA" && k["kid"] != old_ed.as_str())
        .unwrap()
        .clone();
    assert_eq!(new_ed["status"], "next", "published an hour before it signs: {list}");
    let old = key(&list, &old_ed);
    assert_eq!(old["status"], "signing", "the old key signs until then");
    assert_eq!(old["signs_until"], new_ed["signs_from"]);
    let jwks = kids(&s.get("/api/auth/jwks").send().await.json());
    assert!(jwks.contains(&("EdDSA".into(), str_of(&new_ed["kid"]).into())), "the next key is published: {jwks:?}");
    assert!(jwks.contains(&("EdDSA".into(), old_ed.clone())));

    let r = s
        .post("/api/admin/oidc/keys/rotate")
        .cookie(&admin)
        .json(&json!({"algs": ["ES256"], "lead_secs": 0}))
        .send()
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let list = s.get("/api/admin/oidc/keys").cookie(&admin).send().await.json();
    let old = key(&list, &old_es);
    assert_eq!(old["status"], "retired", "{list}");
    let until = chrono::DateTime::parse_from_rfc3339(str_of(&old["signs_until"])).unwrap();
    let published = chrono::DateTime::parse_from_rfc3339(str_of(&old["published_until"])).unwrap();
    assert_eq!((published - until).num_seconds(), 36_000, "published for the ID tokens' ten hours");
    let signing: Vec<&Value> =
        list["keys"].as_array().unwrap().iter().filter(|k| k["alg"] == "ES256" && k["status"] == "signing").collect();
    assert_eq!(signing.len(), 1, "{list}");
    let jwks = kids(&s.get("/api/auth/jwks").send().await.json());
    assert_eq!(jwks.len(), 5, "the retired key is still published: {jwks:?}");
    assert!(jwks.contains(&("ES256".into(), old_es)));

    let audit = s.get("/api/admin/audit?action=oidc.signing_keys_rotated").cookie(&admin).send().await.json();
    let entries = audit["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 2, "{audit}");
    assert!(entries.iter().any(|e| str_of(&e["detail"]).starts_with("EdDSA: new keys ")), "{audit}");

    let user = s.new_user("not-admin-keys").await;
    assert_eq!(s.post("/api/admin/oidc/keys/rotate").cookie(&user.cookie).json(&json!({})).send().await.status, 403);
    assert_eq!(s.get("/api/admin/oidc/keys").send().await.status, 401);
    for (body, why) in [
        (json!({"algs": ["HS256"]}), "algs must name"),
        (json!({"algs": []}), "algs must name"),
        (json!({"algs": "EdDSA"}), "algs must name"),
        (json!({"lead_secs": 2_592_001}), "lead_secs must be"),
        (json!({"lead_secs": -1}), "lead_secs"),
        (json!({"kid": "x"}), "unknown field"),
    ] {
        let r = s.post("/api/admin/oidc/keys/rotate").cookie(&admin).json(&body).send().await;
        assert_eq!(r.status, 400, "{body}: {}", r.text);
        assert!(r.text.contains(why), "{body}: {}", r.text);
    }
    assert_eq!(kids(&s.get("/api/auth/jwks").send().await.json()).len(), 5, "nothing rotated by a refusal");
}

fn is_32_letters(v: &Value) -> bool {
    v.as_str().is_some_and(|s| s.len() == 32 && s.bytes().all(|b| b.is_ascii_alphabetic()))
}

/// An administrator registers a confidential client (its secret shown once, never again), a public native one
/// (no secret; its loopback redirect), changes one, rotates its secret, disables and removes it; each change is
/// audited in its commit without the secret, and raises the `oauth_client.*` webhook event.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn administrators_register_change_and_remove_clients_audited_and_announced() {
    let s = TestServer::start_adjusted(|c| c.webhooks.allow_internal_targets = true).await;
    let admin = s.admin_session().await;
    let (receiver, received) = receiver().await;
    let hook = s
        .post("/api/admin/webhooks")
        .cookie(&admin)
        .json(&json!({"url": format!("http://{receiver}/hook"), "events": ["oauth_client.created", "oauth_client.updated", "oauth_client.deleted"]}))
        .send()
        .await;
    assert_eq!(hook.status, 201, "{}", hook.text);

    let r = s
        .post("/api/admin/oidc/clients")
        .cookie(&admin)
        .json(&json!({"client_name": "Grafana", "redirect_uris": ["https://grafana.example.com/login/generic_oauth"],
                      "scope": "openid profile email api:read", "id_token_signed_response_alg": "RS256"}))
        .send()
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    let made = r.json();
    let client = &made["client"];
    let client_id = str_of(&client["client_id"]).to_owned();
    let secret = str_of(&made["client_secret"]).to_owned();
    assert!(is_32_letters(&client["client_id"]) && is_32_letters(&made["client_secret"]), "{made}");
    assert_eq!(client["token_endpoint_auth_method"], "client_secret_basic");
    assert_eq!(client["application_type"], "web");
    assert_eq!(client["grant_types"], json!(["authorization_code", "refresh_token"]));
    assert_eq!(client["response_types"], json!(["code"]));
    assert_eq!(client["scope"], "openid profile email api:read");
    assert_eq!(client["id_token_signed_response_alg"], "RS256");
    assert_eq!(client["disabled"], false);

    let got = s.get(&format!("/api/admin/oidc/clients/{client_id}")).cookie(&admin).send().await;
    assert_eq!(got.status, 200, "{}", got.text);
    assert_eq!(got.json()["client_secret"], Value::Null, "the secret is shown once");
    assert!(!got.text.contains(&secret));

    let native = s
        .post("/api/admin/oidc/clients")
        .cookie(&admin)
        .json(&json!({"client_name": "CLI", "redirect_uris": ["http://127.0.0.1/callback"],
                      "token_endpoint_auth_method": "none", "application_type": "native"}))
        .send()
        .await;
    assert_eq!(native.status, 201, "{}", native.text);
    let native = native.json();
    assert_eq!(native["client_secret"], Value::Null, "a public client has no secret");
    let native_id = str_of(&native["client"]["client_id"]).to_owned();
    let r = s
        .patch(&format!("/api/admin/oidc/clients/{native_id}"))
        .cookie(&admin)
        .json(&json!({"rotate_secret": true}))
        .send()
        .await;
    assert_eq!(r.status, 400, "{}", r.text);

    let list = s.get("/api/admin/oidc/clients").cookie(&admin).send().await.json();
    let ids: Vec<&str> = list["clients"].as_array().unwrap().iter().map(|c| str_of(&c["client_id"])).collect();
    assert_eq!(ids, [client_id.as_str(), native_id.as_str()], "oldest first");

    let r = s
        .patch(&format!("/api/admin/oidc/clients/{client_id}"))
        .cookie(&admin)
        .json(&json!({"rotate_secret": true, "disabled": true, "client_name": "Grafana (old)"}))
        .send()
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let changed = r.json();
    let new_secret = str_of(&changed["client_secret"]).to_owned();
    assert!(is_32_letters(&changed["client_secret"]) && new_secret != secret);
    assert_eq!(changed["client"]["disabled"], true);
    assert_eq!(changed["client"]["client_name"], "Grafana (old)");

    let r = s.delete(&format!("/api/admin/oidc/clients/{client_id}")).cookie(&admin).send().await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(s.get(&format!("/api/admin/oidc/clients/{client_id}")).cookie(&admin).send().await.status, 404);
    assert_eq!(s.delete(&format!("/api/admin/oidc/clients/{client_id}")).cookie(&admin).send().await.status, 404);

    let audit = s.get("/api/admin/audit?limit=200").cookie(&admin).send().await;
    for secret in [&secret, &new_secret] {
        assert!(!audit.text.contains(secret.as_str()), "no secret in the audit log");
    }
    let audit = audit.json();
    let ours: Vec<(&str, &str)> = audit["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| str_of(&e["action"]).starts_with("oauth_client."))
        .map(|e| (str_of(&e["action"]), str_of(&e["detail"])))
        .collect();
    let actions: Vec<&str> = ours.iter().map(|(a, _)| *a).collect();
    assert_eq!(
        actions,
        [
            "oauth_client.deleted",
            "oauth_client.updated",
            "oauth_client.secret_rotated",
            "oauth_client.created",
            "oauth_client.created"
        ],
        "newest first: {ours:?}"
    );
    assert!(ours.iter().filter(|(_, d)| d.starts_with(&client_id)).count() == 4, "{ours:?}");

    let mut events: Vec<(String, String)> = Vec::new();
    for _ in 0..100 {
        events = received
            .lock()
            .unwrap()
            .iter()
            .map(|body| {
                let v: Value = serde_json::from_str(body).unwrap();
                (
                    str_of(&v["type"]).to_owned(),
                    str_of(&v["data"]["detail"]).split(':').next().unwrap().split(' ').next().unwrap().to_owned(),
                )
            })
            .collect();
        if events.len() == 5 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    for secret in [&secret, &new_secret] {
        assert!(!received.lock().unwrap().iter().any(|b| b.contains(secret.as_str())), "no secret in an event");
    }
    let of_grafana: Vec<&str> = events.iter().filter(|(_, id)| *id == client_id).map(|(e, _)| e.as_str()).collect();
    assert_eq!(
        of_grafana,
        ["oauth_client.created", "oauth_client.updated", "oauth_client.updated", "oauth_client.deleted"],
        "{events:?}"
    );
    assert!(events.contains(&("oauth_client.created".into(), native_id.clone())), "{events:?}");
}

/// A webhook receiver on loopback that answers 200 to everything and keeps each body.
pub(super) async fn receiver() -> (std::net::SocketAddr, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let received = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let kept = std::sync::Arc::clone(&received);
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let kept = std::sync::Arc::clone(&kept);
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    let Ok(n) = conn.read(&mut chunk).await else { return };
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    let text = String::from_utf8_lossy(&buf).to_string();
                    let Some(end) = text.find("\r\n\r\n") else { continue };
                    let length = text[..end]
                        .lines()
                        .find_map(|l| {
                            l.to_ascii_lowercase()
                                .strip_prefix("content-length:")
                                .map(|v| v.trim().parse::<usize>().unwrap())
                        })
                        .unwrap_or(0);
                    if buf.len() >= end + 4 + length {
                        kept.lock().unwrap().push(String::from_utf8_lossy(&buf[end + 4..end + 4 + length]).to_string());
                        let _ =
                            conn.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n").await;
                        return;
                    }
                }
            });
        }
    });
    (addr, received)
}

/// Every rule of a client's fields refuses with a 400 naming the field; nothing is registered by a refusal; only
/// administrators register.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_breaking_a_rule_is_refused_with_the_field_named() {
    let s = TestServer::start().await;
    let admin = s.admin_session().await;
    let web = |extra: Value| {
        let mut body = json!({"client_name": "App", "redirect_uris": ["https://app.example.com/cb"]});
        body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        body
    };
    for (body, why) in [
        (web(json!({"redirect_uris": ["http://app.example.com/cb"]})), "redirect_uris[0]: a web client"),
        (web(json!({"redirect_uris": ["https://app.example.com/cb#x"]})), "fragment"),
        (web(json!({"redirect_uris": ["https://u:p@app.example.com/cb"]})), "user information"),
        (web(json!({"redirect_uris": ["https://127.0.0.1/cb"]})), "not loopback"),
        (web(json!({"redirect_uris": ["/cb"]})), "absolute"),
        (web(json!({"redirect_uris": []})), "Redirect URIs are required"),
        (web(json!({"application_type": "native", "redirect_uris": ["myapp:/cb"]})), "reverse-domain"),
        (web(json!({"post_logout_redirect_uris": ["http://app.example.com/"]})), "post_logout_redirect_uris[0]"),
        (web(json!({"token_endpoint_auth_method": "private_key_jwt"})), "token_endpoint_auth_method"),
        (web(json!({"application_type": "tv"})), "application_type"),
        (web(json!({"grant_types": ["password"]})), "unsupported grant_type password"),
        (web(json!({"grant_types": ["implicit"]})), "unsupported grant_type implicit"),
        (web(json!({"grant_types": ["client_credentials"]})), "a scope of the client's own"),
        (
            web(
                json!({"grant_types": ["client_credentials"], "scope": "api:read", "token_endpoint_auth_method": "none"}),
            ),
            "a public client cannot use client_credentials",
        ),
        (web(json!({"scope": "openid bad\"scope"})), "scope"),
        (web(json!({"id_token_signed_response_alg": "none"})), "id_token_signed_response_alg"),
        (web(json!({"id_token_signed_response_alg": "HS256"})), "id_token_signed_response_alg"),
        (web(json!({"client_name": " "})), "client_name"),
        (web(json!({"client_secret": "mine"})), "unknown field"),
        (json!({"redirect_uris": ["https://app.example.com/cb"]}), "client_name"),
    ] {
        let r = s.post("/api/admin/oidc/clients").cookie(&admin).json(&body).send().await;
        assert_eq!(r.status, 400, "{body}: {}", r.text);
        assert!(r.text.contains(why), "{body}: {}", r.text);
    }
    let list = s.get("/api/admin/oidc/clients").cookie(&admin).send().await.json();
    assert_eq!(list["clients"], json!([]), "nothing registered by a refusal");

    // What is allowed: a machine client with a scope of its own; native loopback and private-use redirects.
    for body in [
        web(json!({"grant_types": ["client_credentials"], "scope": "api:read", "redirect_uris": []})),
        web(json!({"application_type": "native", "token_endpoint_auth_method": "none",
                   "redirect_uris": ["http://127.0.0.1/cb", "http://[::1]:8080/cb", "com.example.app:/cb"]})),
    ] {
        let r = s.post("/api/admin/oidc/clients").cookie(&admin).json(&body).send().await;
        assert_eq!(r.status, 201, "{body}: {}", r.text);
    }
    let user = s.new_user("not-admin-clients").await;
    let r = s.post("/api/admin/oidc/clients").cookie(&user.cookie).json(&web(json!({}))).send().await;
    assert_eq!(r.status, 403);
    assert_eq!(s.get("/api/admin/oidc/clients").send().await.status, 401);
    let r =
        s.patch("/api/admin/oidc/clients/nosuchclient").cookie(&admin).json(&json!({"disabled": true})).send().await;
    assert_eq!(r.status, 404);
    let r = s.get("/api/admin/oidc/clients/bad%20id").cookie(&admin).send().await;
    assert_eq!(r.status, 400, "{}", r.text);
    let r = s.patch("/api/admin/oidc/clients/x").cookie(&admin).json(&json!({})).send().await;
    assert_eq!(r.status, 400, "nothing to change: {}", r.text);
}

/// `service-auth client add` registers a client while no server runs (the embedded store): it prints the id and
/// the secret once, the server then lists the client, and the store holds the secret only as its SHA-256.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_command_line_registers_a_client_whose_secret_is_stored_hashed() {
    use sha2::Digest;
    let root = tempfile::tempdir().unwrap();
    let args = [
        "client",
        "add",
        "--name",
        "Wiki",
        "--redirect-uri",
        "https://wiki.example.com/oauth/callback",
        "--scope",
        "openid email",
    ];
    let (status, out, err) = run_binary(root.path(), &args, &[], "");
    assert!(status.success(), "{out} {err}");
    let client_id = out.lines().find_map(|l| l.strip_prefix("client_id: ")).expect("the client_id printed").to_owned();
    let secret = out
        .lines()
        .find_map(|l| l.strip_prefix("client_secret (shown only this once, store it now): "))
        .expect("the secret printed")
        .to_owned();
    let (status, _, err) =
        run_binary(root.path(), &["client", "add", "--name", "Bad", "--redirect-uri", "http://x.example/cb"], &[], "");
    assert_eq!(status.code(), Some(2), "{err}");
    assert!(err.contains("redirect_uris[0]"), "{err}");

    let data = root.path().join("data");
    let s = TestServer::start_embedded(test_config(&data)).await;
    let admin = s.admin_session().await;
    let got = s.get(&format!("/api/admin/oidc/clients/{client_id}")).cookie(&admin).send().await;
    assert_eq!(got.status, 200, "{}", got.text);
    assert_eq!(got.json()["client"]["scope"], "openid email");
    let audit = s.get("/api/admin/audit?action=oauth_client.created").cookie(&admin).send().await.json();
    assert_eq!(audit["entries"][0]["actor_id"], Value::Null, "the command line");
    s.stop().await;
    let file = std::fs::read(data.join("service-auth.redb")).unwrap();
    let hash: [u8; 32] = sha2::Sha256::digest(secret.as_bytes()).into();
    assert!(!file.windows(secret.len()).any(|w| w == secret.as_bytes()), "the secret is not stored");
    assert!(file.windows(32).any(|w| w == hash), "its SHA-256 is");
}

// --- the flows (issue #46, slice 3): authorize, consent, token, userinfo -----------------------------------------

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use sha2::Digest;

pub(super) const RP: &str = "https://rp.example/cb";

/// Registers a client; answers its id and secret (`None` for a public one).
pub(super) async fn register(s: &TestServer, admin: &str, body: Value) -> (String, Option<String>) {
    let r = s.post("/api/admin/oidc/clients").cookie(admin).json(&body).send().await;
    assert_eq!(r.status, 201, "{}", r.text);
    let v = r.json();
    (str_of(&v["client"]["client_id"]).to_owned(), v["client_secret"].as_str().map(str::to_owned))
}

/// A PKCE verifier and its S256 challenge.
pub(super) fn pkce() -> (String, String) {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).unwrap();
    let verifier = B64.encode(bytes);
    let challenge = B64.encode(sha2::Sha256::digest(verifier.as_bytes()));
    (verifier, challenge)
}

pub(super) fn query(pairs: &[(&str, &str)]) -> String {
    url::form_urlencoded::Serializer::new(String::new()).extend_pairs(pairs).finish()
}

pub(super) async fn authorize(s: &TestServer, cookie: Option<&str>, pairs: &[(&str, &str)]) -> Resp {
    s.get(&format!("/api/auth/oauth2/authorize?{}", query(pairs))).cookie_opt(cookie).send().await
}

/// A redirect's target and its query's parameters.
pub(super) fn location(r: &Resp) -> (String, std::collections::HashMap<String, String>) {
    assert_eq!(r.status, 302, "{} {:?}", r.text, r.header("location"));
    let to = r.header("location").unwrap();
    let url = url::Url::parse(&to).unwrap_or_else(|_| url::Url::parse("http://here").unwrap().join(&to).unwrap());
    let params = url.query_pairs().map(|(k, v)| (k.into_owned(), v.into_owned())).collect();
    (url[..url::Position::AfterPath].to_owned(), params)
}

pub(super) async fn token(s: &TestServer, form: &[(&str, &str)], basic: Option<(&str, &str)>) -> Resp {
    token_on(&s.client, form, basic).await
}

/// [`token`] sent to one node.
pub(super) async fn token_on(node: &Client, form: &[(&str, &str)], basic: Option<(&str, &str)>) -> Resp {
    let mut r = node.post("/api/auth/oauth2/token");
    if let Some((id, secret)) = basic {
        r = r.header(
            "authorization",
            &format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(format!("{id}:{secret}"))),
        );
    }
    r.raw(Some("application/x-www-form-urlencoded"), query(form)).send().await
}

async fn send(s: &TestServer, f: Vec<(String, String)>, id: &str, secret: &str) -> Resp {
    let pairs: Vec<(&str, &str)> = f.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    token(s, &pairs, Some((id, secret))).await
}

pub(super) fn oauth_error(r: &Resp, status: u16, error: &str) {
    assert_eq!(r.status, status, "{}", r.text);
    assert_eq!(r.json()["error"], error, "{}", r.text);
    assert!(r.json()["error_description"].is_string(), "{}", r.text);
}

/// A JWT's header and claims, after checking its signature against the published key it names.
pub(super) async fn verified(s: &TestServer, jwt: &str) -> (Value, Value) {
    let jwks = s.get("/api/auth/jwks").send().await.json();
    let (input, signature) = jwt.rsplit_once('.').unwrap();
    let (header, payload) = input.split_once('.').unwrap();
    let header: Value = serde_json::from_slice(&B64.decode(header).unwrap()).unwrap();
    let claims: Value = serde_json::from_slice(&B64.decode(payload).unwrap()).unwrap();
    let jwk = key(&jwks, str_of(&header["kid"]));
    assert_eq!(jwk["alg"], header["alg"]);
    let signature = B64.decode(signature).unwrap();
    match str_of(&header["alg"]) {
        "EdDSA" => {
            use ed25519_dalek::Verifier;
            let x: [u8; 32] = B64.decode(str_of(&jwk["x"])).unwrap().try_into().unwrap();
            let key = ed25519_dalek::VerifyingKey::from_bytes(&x).unwrap();
            key.verify(input.as_bytes(), &ed25519_dalek::Signature::from_slice(&signature).unwrap())
                .expect("the signature verifies with the published key");
        }
        other => panic!("signed with {other}"),
    }
    (header, claims)
}

/// The whole code flow for a confidential client (Grafana's way: Basic authentication, PKCE): without a session to
/// the sign-in page and back; the consent page; the consent's answer sends the browser back to the client with a
/// code, the request's `state` and the issuer (RFC 9207); the code buys an access token (a JWT, RFC 9068) and an ID
/// token signed with the published key, with the nonce, `at_hash` and `auth_time`; userinfo answers the scopes'
/// claims. The consent is remembered: the next authorization goes straight back with a code.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_code_flow_signs_a_user_in_through_consent_to_a_confidential_client() {
    let s = TestServer::start().await;
    let issuer = format!("{}/api/auth", s.base);
    let admin = s.admin_session().await;
    let (id, secret) = register(&s, &admin, json!({"client_name": "Grafana", "redirect_uris": [RP]})).await;
    let secret = secret.unwrap();
    let u = s.new_user("ida").await;
    let (verifier, challenge) = pkce();
    let request = [
        ("response_type", "code"),
        ("client_id", id.as_str()),
        ("redirect_uri", RP),
        ("scope", "openid profile email"),
        ("state", "st-1"),
        ("nonce", "n-1"),
        ("code_challenge", challenge.as_str()),
        ("code_challenge_method", "S256"),
    ];

    // No session: to the sign-in page, which comes back to this very request.
    let (to, params) = location(&authorize(&s, None, &request).await);
    assert_eq!(to, "http://here/sign-in");
    let back = &params["returnTo"];
    assert!(back.starts_with("/api/auth/oauth2/authorize?"), "{back}");
    assert_eq!(s.get("/sign-in").send().await.status, 200);

    // Signed in, no consent yet: to the consent page with the request.
    let r = s.get(back).cookie(&u.cookie).send().await;
    let (to, params) = location(&r);
    assert_eq!(to, "http://here/consent");
    assert_eq!(params["client_id"], id);
    let page = s.get(&r.header("location").unwrap()).send().await;
    assert_eq!(page.status, 200);
    assert!(page.header("content-security-policy").unwrap().contains("script-src 'self'"));
    assert!(page.text.contains("auth/consent.js"));
    assert_eq!(s.get("/auth/consent.js").send().await.status, 200);
    let named = s.get(&format!("/api/auth/oauth2/public-client?client_id={id}")).send().await;
    assert_eq!(named.json(), json!({"client_id": id, "client_name": "Grafana"}));

    // The page's answer: a code for the client.
    let oauth_query = r.header("location").unwrap().split_once('?').unwrap().1.to_owned();
    let no_session =
        s.post("/api/auth/oauth2/consent").json(&json!({"accept": true, "oauth_query": oauth_query})).send().await;
    assert_eq!(no_session.status, 401);
    let widened = s
        .post("/api/auth/oauth2/consent")
        .cookie(&u.cookie)
        .json(&json!({"accept": true, "scope": "openid offline_access", "oauth_query": oauth_query}))
        .send()
        .await;
    oauth_error(&widened, 400, "invalid_request");
    let r = s
        .post("/api/auth/oauth2/consent")
        .cookie(&u.cookie)
        .json(&json!({"accept": true, "oauth_query": oauth_query}))
        .send()
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json()["redirect"], true);
    let url = url::Url::parse(str_of(&r.json()["url"])).unwrap();
    assert_eq!(&url[..url::Position::AfterPath], RP);
    let params: std::collections::HashMap<String, String> = url.query_pairs().into_owned().collect();
    assert_eq!(params["state"], "st-1");
    assert_eq!(params["iss"], issuer);
    let code = params["code"].clone();

    // The token endpoint: a wrong secret, another method than registered, then the right one.
    let form = [
        ("grant_type", "authorization_code"),
        ("code", code.as_str()),
        ("redirect_uri", RP),
        ("code_verifier", verifier.as_str()),
    ];
    let wrong = token(&s, &form, Some((&id, "not-the-secret"))).await;
    oauth_error(&wrong, 401, "invalid_client");
    assert_eq!(wrong.header("www-authenticate").as_deref(), Some("Basic"));
    let mut posted = form.to_vec();
    posted.extend([("client_id", id.as_str()), ("client_secret", secret.as_str())]);
    oauth_error(&token(&s, &posted, None).await, 401, "invalid_client");
    let r = token(&s, &form, Some((&id, &secret))).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.header("cache-control").as_deref(), Some("no-store"));
    let tokens = r.json();
    assert_eq!(tokens["token_type"], "Bearer");
    assert_eq!(tokens["scope"], "openid profile email");
    assert!(tokens.get("refresh_token").is_none(), "no offline_access, no refresh token");
    let (header, access) = verified(&s, str_of(&tokens["access_token"])).await;
    assert_eq!(header["typ"], "at+jwt");
    assert_eq!((access["sub"].as_str(), access["client_id"].as_str()), (Some(u.id.as_str()), Some(id.as_str())));
    assert_eq!(access["iss"], issuer);
    let (header, claims) = verified(&s, str_of(&tokens["id_token"])).await;
    assert!(header.get("typ").is_none());
    assert_eq!(claims["iss"], issuer);
    assert_eq!(claims["aud"], id);
    assert_eq!(claims["sub"], u.id);
    assert_eq!(claims["nonce"], "n-1");
    assert!(claims["auth_time"].as_i64().unwrap() <= claims["iat"].as_i64().unwrap());
    assert_eq!(claims["exp"].as_i64().unwrap() - claims["iat"].as_i64().unwrap(), 36_000);
    let hash = sha2::Sha512::digest(str_of(&tokens["access_token"]).as_bytes());
    assert_eq!(claims["at_hash"], B64.encode(&hash[..32]), "EdDSA's at_hash is SHA-512's left half");
    assert!(claims.get("sid").is_none(), "sid only for clients that may end the session (the plugin's rule)");

    // Userinfo, by header and by form; not with the ID token.
    let bearer = format!("Bearer {}", str_of(&tokens["access_token"]));
    let r = s.get("/api/auth/oauth2/userinfo").header("authorization", &bearer).send().await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(
        r.json(),
        json!({"sub": u.id, "name": "User ida", "given_name": "User", "family_name": "ida", "email": u.email, "email_verified": false})
    );
    let form = query(&[("access_token", str_of(&tokens["access_token"]))]);
    let r = s.post("/api/auth/oauth2/userinfo").raw(Some("application/x-www-form-urlencoded"), form).send().await;
    assert_eq!(r.json()["sub"], u.id);
    let r = s
        .get("/api/auth/oauth2/userinfo")
        .header("authorization", &format!("Bearer {}", str_of(&tokens["id_token"])))
        .send()
        .await;
    oauth_error(&r, 401, "invalid_token");
    let r = s.get("/api/auth/oauth2/userinfo").send().await;
    assert_eq!(r.status, 401);
    assert_eq!(r.header("www-authenticate").as_deref(), Some("Bearer"));

    // The consent is remembered: straight back to the client with a code, for the same scopes or fewer.
    let mut again = request.to_vec();
    again[3] = ("scope", "openid email");
    let (to, params) = location(&authorize(&s, Some(&u.cookie), &again).await);
    assert_eq!(to, RP);
    assert!(params.contains_key("code"));
    // prompt=consent asks again.
    again.push(("prompt", "consent"));
    assert_eq!(location(&authorize(&s, Some(&u.cookie), &again).await).0, "http://here/consent");
    // A script's request gets the redirect as JSON, as the plugin answers fetch.
    let r = s
        .get(&format!("/api/auth/oauth2/authorize?{}", query(&request)))
        .cookie(&u.cookie)
        .header("accept", "application/json")
        .send()
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json()["redirect"], true);
    // Denied: access_denied to the client, and nothing stored.
    let other = s.new_user("ivo").await;
    let r = s
        .post("/api/auth/oauth2/consent")
        .cookie(&other.cookie)
        .json(&json!({"accept": false, "oauth_query": oauth_query}))
        .send()
        .await;
    let url = url::Url::parse(str_of(&r.json()["url"])).unwrap();
    let params: std::collections::HashMap<String, String> = url.query_pairs().into_owned().collect();
    assert_eq!((params["error"].as_str(), params["state"].as_str()), ("access_denied", "st-1"));
    assert_eq!(location(&authorize(&s, Some(&other.cookie), &request).await).0, "http://here/consent");
    // Audited.
    let audit = s.get("/api/admin/audit?action=oauth_consent.granted").cookie(&admin).send().await.json();
    let audit = audit.to_string();
    assert!(
        audit.contains("oauth_consent.granted") && audit.contains(&format!("{id}: scopes [openid profile email]")),
        "{audit}"
    );
}

/// What the authorization request refuses: an unknown client or a redirect URI not registered byte for byte is
/// shown here (400), never sent anywhere; once both are good, errors go back to the client with `state` and `iss`:
/// `plain` PKCE, a public client without PKCE, a scope the client was not given, another response type, and
/// `prompt=none` without a session (`login_required`) or without consent (`consent_required`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_authorization_request_refuses_precisely() {
    let s = TestServer::start().await;
    let issuer = format!("{}/api/auth", s.base);
    let admin = s.admin_session().await;
    let (id, _) =
        register(&s, &admin, json!({"client_name": "App", "redirect_uris": [RP], "scope": "openid email"})).await;
    let (public, _) = register(
        &s,
        &admin,
        json!({"client_name": "CLI", "application_type": "native", "token_endpoint_auth_method": "none",
               "redirect_uris": ["http://127.0.0.1/cb"]}),
    )
    .await;
    let u = s.new_user("rex").await;
    let (_, challenge) = pkce();
    let base = |client: &'static str| {
        vec![
            ("response_type", "code"),
            ("client_id", client),
            ("redirect_uri", RP),
            ("scope", "openid"),
            ("state", "s"),
        ]
    };
    let id: &'static str = Box::leak(id.into_boxed_str());
    let public: &'static str = Box::leak(public.into_boxed_str());
    let challenge: &'static str = Box::leak(challenge.into_boxed_str());

    // Shown here, not sent.
    for (change, error) in [
        (("redirect_uri", "https://rp.example/cb/"), "invalid_redirect"),
        (("redirect_uri", "https://evil.example/cb"), "invalid_redirect"),
        (("client_id", "nobody"), "invalid_client"),
    ] {
        let mut p = base(id);
        p.retain(|(k, _)| *k != change.0);
        p.push(change);
        let r = authorize(&s, Some(&u.cookie), &p).await;
        oauth_error(&r, 400, error);
        assert!(r.header("location").is_none());
    }

    // Back to the client.
    let to_client = |r: &Resp, error: &str| {
        let (to, params) = location(r);
        assert_eq!(to, RP, "{params:?}");
        assert_eq!(params["error"], error, "{params:?}");
        assert_eq!(params["state"], "s");
        assert_eq!(params["iss"], issuer);
    };
    let mut plain = base(id);
    plain.extend([("code_challenge", challenge), ("code_challenge_method", "plain")]);
    to_client(&authorize(&s, Some(&u.cookie), &plain).await, "invalid_request");
    let mut scope = base(id);
    scope[3] = ("scope", "openid profile");
    to_client(&authorize(&s, Some(&u.cookie), &scope).await, "invalid_scope");
    let mut implicit = base(id);
    implicit[0] = ("response_type", "token");
    to_client(&authorize(&s, Some(&u.cookie), &implicit).await, "unsupported_response_type");
    let mut none = base(id);
    none.push(("prompt", "none"));
    to_client(&authorize(&s, None, &none).await, "login_required");
    to_client(&authorize(&s, Some(&u.cookie), &none).await, "consent_required");

    // A public (native) client: PKCE required; its loopback redirect matches on any port.
    let native = |port_uri: &'static str| {
        vec![
            ("response_type", "code"),
            ("client_id", public),
            ("redirect_uri", port_uri),
            ("scope", "openid"),
            ("state", "s"),
        ]
    };
    let r = authorize(&s, Some(&u.cookie), &native("http://127.0.0.1:53682/cb")).await;
    let (to, params) = location(&r);
    assert_eq!((to.as_str(), params["error"].as_str()), ("http://127.0.0.1:53682/cb", "invalid_request"));
    assert_eq!(params["error_description"], "pkce is required for public clients");
    let mut with_pkce = native("http://127.0.0.1:53682/cb");
    with_pkce.extend([("code_challenge", challenge), ("code_challenge_method", "S256")]);
    assert_eq!(location(&authorize(&s, Some(&u.cookie), &with_pkce).await).0, "http://here/consent");
    oauth_error(&authorize(&s, Some(&u.cookie), &native("http://127.0.0.2:53682/cb")).await, 400, "invalid_redirect");
}

/// A code is redeemed once, by its own client, with its redirect URI and its verifier: another client's code is
/// refused (and spent), a reused one refused, a wrong verifier refused. A public client redeems with its id alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_code_is_single_use_and_bound_to_its_client_redirect_and_verifier() {
    let s = TestServer::start().await;
    let admin = s.admin_session().await;
    let first_party = |name: &str| json!({"client_name": name, "redirect_uris": [RP], "skip_consent": true});
    let (a, a_secret) = register(&s, &admin, first_party("A")).await;
    let (b, b_secret) = register(&s, &admin, first_party("B")).await;
    let (a_secret, b_secret) = (a_secret.unwrap(), b_secret.unwrap());
    let u = s.new_user("cody").await;
    let code_for = |client: String| {
        let s = &s;
        let cookie = u.cookie.clone();
        async move {
            let (verifier, challenge) = pkce();
            let p = [
                ("response_type", "code"),
                ("client_id", client.as_str()),
                ("redirect_uri", RP),
                ("scope", "openid"),
                ("code_challenge", challenge.as_str()),
                ("code_challenge_method", "S256"),
            ];
            let (to, params) = location(&authorize(s, Some(&cookie), &p).await);
            assert_eq!(to, RP, "{params:?}");
            (params["code"].clone(), verifier)
        }
    };
    let form = |code: &str, verifier: &str| {
        vec![
            ("grant_type".to_owned(), "authorization_code".to_owned()),
            ("code".into(), code.into()),
            ("redirect_uri".into(), RP.into()),
            ("code_verifier".into(), verifier.into()),
        ]
    };

    // Another client's code: refused, and spent for its own client too.
    let (code, verifier) = code_for(a.clone()).await;
    oauth_error(&send(&s, form(&code, &verifier), &b, &b_secret).await, 400, "invalid_grant");
    oauth_error(&send(&s, form(&code, &verifier), &a, &a_secret).await, 400, "invalid_grant");

    // Reused: the first redemption works, the second is refused.
    let (code, verifier) = code_for(a.clone()).await;
    assert_eq!(send(&s, form(&code, &verifier), &a, &a_secret).await.status, 200);
    let reused = send(&s, form(&code, &verifier), &a, &a_secret).await;
    oauth_error(&reused, 400, "invalid_grant");
    assert_eq!(reused.json()["error_description"], "invalid code");

    // A wrong verifier, a missing one, another redirect URI.
    let (code, _) = code_for(a.clone()).await;
    oauth_error(&send(&s, form(&code, &pkce().0), &a, &a_secret).await, 400, "invalid_grant");
    let (code, _) = code_for(a.clone()).await;
    let mut missing = form(&code, "x");
    missing.pop();
    oauth_error(&send(&s, missing, &a, &a_secret).await, 400, "invalid_request");
    let (code, verifier) = code_for(a.clone()).await;
    let mut elsewhere = form(&code, &verifier);
    elsewhere[2].1 = "https://rp.example/other".into();
    oauth_error(&send(&s, elsewhere, &a, &a_secret).await, 400, "invalid_grant");

    // Malformed requests.
    oauth_error(&token(&s, &[("code", "x")], Some((&a, &a_secret))).await, 400, "invalid_request");
    oauth_error(&token(&s, &[("grant_type", "password")], Some((&a, &a_secret))).await, 400, "unsupported_grant_type");
    let json_body = s.post("/api/auth/oauth2/token").json(&json!({"grant_type": "authorization_code"})).send().await;
    oauth_error(&json_body, 400, "invalid_request");
    oauth_error(&token(&s, &[("grant_type", "authorization_code")], None).await, 401, "invalid_client");

    // A public client: its id alone, and its verifier.
    let (cli, _) = register(
        &s,
        &admin,
        json!({"client_name": "CLI", "application_type": "native", "token_endpoint_auth_method": "none",
               "redirect_uris": ["http://127.0.0.1/cb"], "skip_consent": true}),
    )
    .await;
    let (verifier, challenge) = pkce();
    let p = [
        ("response_type", "code"),
        ("client_id", cli.as_str()),
        ("redirect_uri", "http://127.0.0.1:41111/cb"),
        ("scope", "openid"),
        ("code_challenge", challenge.as_str()),
        ("code_challenge_method", "S256"),
    ];
    let (_, params) = location(&authorize(&s, Some(&u.cookie), &p).await);
    let f = [
        ("grant_type", "authorization_code"),
        ("code", params["code"].as_str()),
        ("redirect_uri", "http://127.0.0.1:41111/cb"),
        ("code_verifier", verifier.as_str()),
        ("client_id", cli.as_str()),
    ];
    let r = token(&s, &f, None).await;
    assert_eq!(r.status, 200, "{}", r.text);
}

/// A single-page application on any origin, trusted or not, reads the discovery document and the JWKS, redeems
/// its code as a public client, asks userinfo with its bearer token (a preflight allowing `Authorization`) and
/// revokes: those answers say `Access-Control-Allow-Origin: *`, without credentials, and let the page read
/// userinfo's challenge. Found by the Chromium application in tests/rp (its discovery fetch was blocked). The rest
/// of the API stays closed to that origin, and a trusted origin keeps its credentialed answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_on_any_origin_reads_discovery_redeems_its_code_and_asks_userinfo_without_cookies() {
    const APP: &str = "http://localhost:5199";
    const TRUSTED: &str = "https://console.example.com";
    let s = TestServer::start_adjusted(|c| c.trusted_origins = vec![TRUSTED.into()]).await;
    let admin = s.admin_session().await;
    let (cli, _) = register(
        &s,
        &admin,
        json!({"client_name": "SPA", "application_type": "native", "token_endpoint_auth_method": "none",
               "redirect_uris": ["http://localhost/callback"], "skip_consent": true}),
    )
    .await;
    let u = s.new_user("spa").await;
    let open = |r: &Resp, what: &str| {
        assert_eq!(r.header("access-control-allow-origin").as_deref(), Some("*"), "{what}: {:?}", r.headers);
        assert!(r.header("access-control-allow-credentials").is_none(), "{what}");
    };

    for path in ["/api/auth/.well-known/openid-configuration", "/api/auth/jwks"] {
        let r = s.get(path).header("origin", APP).send().await;
        assert_eq!(r.status, 200, "{path}");
        open(&r, path);
    }
    let (verifier, challenge) = pkce();
    let redirect = "http://localhost:5199/callback";
    let p = [
        ("response_type", "code"),
        ("client_id", cli.as_str()),
        ("redirect_uri", redirect),
        ("scope", "openid profile"),
        ("code_challenge", challenge.as_str()),
        ("code_challenge_method", "S256"),
    ];
    let (_, params) = location(&authorize(&s, Some(&u.cookie), &p).await);
    let form = query(&[
        ("grant_type", "authorization_code"),
        ("code", params["code"].as_str()),
        ("redirect_uri", redirect),
        ("code_verifier", verifier.as_str()),
        ("client_id", cli.as_str()),
    ]);
    let r = s
        .post("/api/auth/oauth2/token")
        .header("origin", APP)
        .raw(Some("application/x-www-form-urlencoded"), form)
        .send()
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    open(&r, "token");
    let access = str_of(&r.json()["access_token"]).to_owned();

    // Userinfo with a bearer token: preflighted, then read.
    let pre = s
        .req(reqwest::Method::OPTIONS, "/api/auth/oauth2/userinfo")
        .header("origin", APP)
        .header("access-control-request-method", "GET")
        .header("access-control-request-headers", "authorization")
        .send()
        .await;
    assert_eq!(pre.status, 204);
    open(&pre, "preflight");
    let allowed = pre.header("access-control-allow-headers").unwrap_or_default().to_ascii_lowercase();
    assert!(allowed.split(',').any(|h| h.trim() == "authorization"), "{allowed}");
    let r = s
        .get("/api/auth/oauth2/userinfo")
        .header("origin", APP)
        .header("authorization", &format!("Bearer {access}"))
        .send()
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json()["name"], "User spa");
    open(&r, "userinfo");
    let r = s.get("/api/auth/oauth2/userinfo").header("origin", APP).send().await;
    assert_eq!(r.status, 401);
    open(&r, "userinfo refused");
    let exposed = r.header("access-control-expose-headers").unwrap_or_default().to_ascii_lowercase();
    assert!(exposed.contains("www-authenticate"), "{exposed}");
    let r = s
        .post("/api/auth/oauth2/revoke")
        .header("origin", APP)
        .raw(Some("application/x-www-form-urlencoded"), query(&[("token", &access), ("client_id", &cli)]))
        .send()
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    open(&r, "revoke");

    // Everything else stays closed to that origin: no CORS header on the session, the consent, introspection.
    for (method, path) in [
        (reqwest::Method::GET, "/api/auth/get-session"),
        (reqwest::Method::POST, "/api/auth/oauth2/consent"),
        (reqwest::Method::POST, "/api/auth/oauth2/introspect"),
        (reqwest::Method::GET, "/api/auth/oauth2/end-session"),
    ] {
        let r = s
            .req(reqwest::Method::OPTIONS, path)
            .header("origin", APP)
            .header("access-control-request-method", method.as_str())
            .send()
            .await;
        assert!(r.header("access-control-allow-origin").is_none(), "{path}");
    }
    // A trusted origin keeps its own, credentialed answer on the open endpoints too.
    let r = s.get("/api/auth/jwks").header("origin", TRUSTED).send().await;
    assert_eq!(r.header("access-control-allow-origin").as_deref(), Some(TRUSTED));
    assert_eq!(r.header("access-control-allow-credentials").as_deref(), Some("true"));
}

/// The authorization request as a form (OpenID Connect Core §3.1.2.1 has POST taken as GET): 303 to the same
/// request as a GET, whose answer is the GET's (a code for a signed-in user). A body that is not a form is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_authorization_request_is_taken_as_a_posted_form_too() {
    let s = TestServer::start().await;
    let admin = s.admin_session().await;
    let (id, _) = register(&s, &admin, json!({"client_name": "A", "redirect_uris": [RP], "skip_consent": true})).await;
    let u = s.new_user("poster").await;
    let (_, challenge) = pkce();
    let request = [
        ("response_type", "code"),
        ("client_id", id.as_str()),
        ("redirect_uri", RP),
        ("scope", "openid"),
        ("state", "a state & more"),
        ("code_challenge", challenge.as_str()),
        ("code_challenge_method", "S256"),
    ];
    let r = s
        .post("/api/auth/oauth2/authorize")
        .raw(Some("application/x-www-form-urlencoded"), query(&request))
        .send()
        .await;
    assert_eq!(r.status, 303, "{}", r.text);
    let to = r.header("location").unwrap();
    assert_eq!(to, format!("/api/auth/oauth2/authorize?{}", query(&request)));
    let (back, params) = location(&s.get(&to).cookie(&u.cookie).send().await);
    assert_eq!(back, RP);
    assert_eq!(params["state"], "a state & more");
    assert!(params.contains_key("code"));

    let json_body = s.post("/api/auth/oauth2/authorize").json(&json!({"client_id": id})).send().await;
    oauth_error(&json_body, 400, "invalid_request");
}

/// A ban holds on every step: a code issued before the ban buys no token, the banned user's access token gets
/// no userinfo, and the ended session authorizes nothing (`prompt=none`: `login_required`). A sign-out ends
/// userinfo for the tokens its session got.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_banned_or_signed_out_user_gets_no_code_no_token_and_no_userinfo() {
    let s = TestServer::start().await;
    let admin = s.admin_session().await;
    let (id, secret) =
        register(&s, &admin, json!({"client_name": "A", "redirect_uris": [RP], "skip_consent": true})).await;
    let secret = secret.unwrap();
    let u = s.new_user("bert").await;
    let flow = |cookie: String| {
        let (s, id) = (&s, id.clone());
        async move {
            let (verifier, challenge) = pkce();
            let p = [
                ("response_type", "code"),
                ("client_id", id.as_str()),
                ("redirect_uri", RP),
                ("scope", "openid"),
                ("code_challenge", challenge.as_str()),
                ("code_challenge_method", "S256"),
                ("prompt", "none"),
            ];
            let (_, params) = location(&authorize(s, Some(&cookie), &p).await);
            (params, verifier)
        }
    };
    let redeem = |code: String, verifier: String| {
        let (s, id, secret) = (&s, id.clone(), secret.clone());
        async move {
            let f = [
                ("grant_type", "authorization_code"),
                ("code", code.as_str()),
                ("redirect_uri", RP),
                ("code_verifier", verifier.as_str()),
            ];
            token(s, &f, Some((&id, &secret))).await
        }
    };
    // A token, then a code waiting; then the ban.
    let (params, verifier) = flow(u.cookie.clone()).await;
    let access = redeem(params["code"].clone(), verifier).await.json()["access_token"].as_str().unwrap().to_owned();
    let bearer = format!("Bearer {access}");
    assert_eq!(s.get("/api/auth/oauth2/userinfo").header("authorization", &bearer).send().await.status, 200);
    let (params, verifier) = flow(u.cookie.clone()).await;
    s.patch_ok(&admin, &json!({"userId": u.id, "banned": true})).await;
    oauth_error(&redeem(params["code"].clone(), verifier).await, 400, "invalid_grant");
    oauth_error(
        &s.get("/api/auth/oauth2/userinfo").header("authorization", &bearer).send().await,
        401,
        "invalid_token",
    );
    let (params, _) = flow(u.cookie.clone()).await;
    assert_eq!(params["error"], "login_required");

    // A sign-out ends userinfo for its session's tokens.
    let v = s.new_user("vera").await;
    let (params, verifier) = flow(v.cookie.clone()).await;
    let access = redeem(params["code"].clone(), verifier).await.json()["access_token"].as_str().unwrap().to_owned();
    let bearer = format!("Bearer {access}");
    assert_eq!(s.get("/api/auth/oauth2/userinfo").header("authorization", &bearer).send().await.status, 200);
    s.sign_out(Some(&v.cookie)).await;
    oauth_error(
        &s.get("/api/auth/oauth2/userinfo").header("authorization", &bearer).send().await,
        401,
        "invalid_token",
    );
}

/// The flow reads the service's one clock, as the session rules do: a `max_age` and an access token's lifetime are
/// judged on the time that starts and ends sessions, so no two parts of one request disagree on what "now" is (and
/// the tests that move the clock move all of it).
#[tokio::test]
async fn max_age_and_the_access_tokens_lifetime_follow_the_services_clock() {
    const MIN: std::time::Duration = std::time::Duration::from_secs(60);
    let (s, clock) = TestServer::start_clocked(|_| {}).await;
    let admin = s.admin_session().await;
    let (id, secret) =
        register(&s, &admin, json!({"client_name": "A", "redirect_uris": [RP], "skip_consent": true})).await;
    let secret = secret.unwrap();
    let u = s.new_user("clara").await;
    let (verifier, challenge) = pkce();
    let ask = [
        ("response_type", "code"),
        ("client_id", id.as_str()),
        ("redirect_uri", RP),
        ("scope", "openid"),
        ("code_challenge", challenge.as_str()),
        ("code_challenge_method", "S256"),
        ("prompt", "none"),
        ("max_age", "60"),
    ];
    let (_, params) = location(&authorize(&s, Some(&u.cookie), &ask).await);
    let f = [
        ("grant_type", "authorization_code"),
        ("code", params["code"].as_str()),
        ("redirect_uri", RP),
        ("code_verifier", verifier.as_str()),
    ];
    let r = token(&s, &f, Some((&id, &secret))).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let bearer = format!("Bearer {}", r.json()["access_token"].as_str().unwrap());
    assert_eq!(s.get("/api/auth/oauth2/userinfo").header("authorization", &bearer).send().await.status, 200);

    // Two minutes on: the sign-in is older than max_age asks.
    clock.advance(2 * MIN);
    let (_, params) = location(&authorize(&s, Some(&u.cookie), &ask).await);
    assert_eq!(params["error"], "login_required", "{params:?}");
    // Fifteen minutes after it was issued, the access token has expired, though its session lives on.
    clock.advance(14 * MIN);
    let r = s.get("/api/auth/oauth2/userinfo").header("authorization", &bearer).send().await;
    oauth_error(&r, 401, "invalid_token");
    assert_eq!(s.get("/api/auth/get-session").cookie(&u.cookie).send().await.status, 200);
}

/// `prompt=login` and `max_age` send a signed-in user to the sign-in page, whose way back carries `login_after`:
/// the session from before is not taken for the new sign-in (back to the sign-in page, no code), a session begun
/// since is, however young `max_age` wants it (`max_age=0` came back to the sign-in page for ever), and the ID
/// token's `auth_time` is that sign-in's. The consent page's answer keeps the marker. Found by openid-client's
/// `max_age` check in tests/rp.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prompt_login_and_max_age_take_a_new_sign_in_and_only_a_new_one() {
    let (s, clock) = TestServer::start_clocked(|_| {}).await;
    let admin = s.admin_session().await;
    let (id, secret) =
        register(&s, &admin, json!({"client_name": "A", "redirect_uris": [RP], "skip_consent": true})).await;
    let secret = secret.unwrap();
    let u = s.new_user("lena").await;
    clock.advance(std::time::Duration::from_secs(120));
    let (verifier, challenge) = pkce();
    for extra in [("prompt", "login"), ("max_age", "0"), ("max_age", "60")] {
        let pairs = [
            ("response_type", "code"),
            ("client_id", id.as_str()),
            ("redirect_uri", RP),
            ("scope", "openid"),
            ("nonce", "n"),
            ("code_challenge", challenge.as_str()),
            ("code_challenge_method", "S256"),
            extra,
        ];
        let (to, params) = location(&authorize(&s, Some(&u.cookie), &pairs).await);
        assert_eq!(to, "http://here/sign-in", "{extra:?}");
        let back = params["returnTo"].clone();
        assert!(back.contains("login_after="), "{extra:?}: {back}");
        assert!(!back.contains("prompt=login"), "{back}");

        // The session from before is not the new sign-in: back to the sign-in page, with a new marker.
        let (to, again) = location(&s.get(&back).cookie(&u.cookie).send().await);
        assert_eq!(to, "http://here/sign-in", "{extra:?}: the old session was taken");
        assert_eq!(again["returnTo"].matches("login_after=").count(), 1, "one marker: {}", again["returnTo"]);

        // A sign-in since: the code, whatever max_age says, with that sign-in's auth_time.
        clock.advance(std::time::Duration::from_secs(1));
        let fresh = s.login(&u.email, PASSWORD).await;
        let session = s.get("/api/auth/get-session").cookie(&fresh).send().await.json();
        let signed_in_at =
            chrono::DateTime::parse_from_rfc3339(str_of(&session["session"]["createdAt"])).unwrap().timestamp();
        let (to, params) = location(&s.get(&back).cookie(&fresh).send().await);
        assert_eq!(to, RP, "{extra:?}: {params:?}");
        let form = [
            ("grant_type", "authorization_code"),
            ("code", params["code"].as_str()),
            ("redirect_uri", RP),
            ("code_verifier", verifier.as_str()),
        ];
        let r = token(&s, &form, Some((&id, &secret))).await;
        assert_eq!(r.status, 200, "{}", r.text);
        let (_, claims) = verified(&s, str_of(&r.json()["id_token"])).await;
        let at = claims["auth_time"].as_i64().unwrap();
        assert_eq!(at, signed_in_at, "{extra:?}: auth_time is the new sign-in's");
        clock.advance(std::time::Duration::from_secs(120));
    }

    // Through the consent page: its answer carries the marker and takes the new session.
    let (other, _) = register(&s, &admin, json!({"client_name": "B", "redirect_uris": [RP]})).await;
    let p = [
        ("response_type", "code"),
        ("client_id", other.as_str()),
        ("redirect_uri", RP),
        ("scope", "openid"),
        ("code_challenge", challenge.as_str()),
        ("code_challenge_method", "S256"),
        ("max_age", "0"),
    ];
    let (_, params) = location(&authorize(&s, Some(&u.cookie), &p).await);
    let fresh = s.login(&u.email, PASSWORD).await;
    let r = s.get(&params["returnTo"]).cookie(&fresh).send().await;
    let (to, _) = location(&r);
    assert_eq!(to, "http://here/consent");
    let oauth_query = r.header("location").unwrap().split_once('?').unwrap().1.to_owned();
    assert!(oauth_query.contains("login_after="), "{oauth_query}");
    let r = s
        .post("/api/auth/oauth2/consent")
        .cookie(&fresh)
        .json(&json!({"accept": true, "oauth_query": oauth_query}))
        .send()
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(str_of(&r.json()["url"]).starts_with(&format!("{RP}?code=")), "{}", r.text);
}

/// A signed-in user's grant to a confidential client with `skip_consent`: the token endpoint's answer.
pub(super) async fn granted(s: &TestServer, cookie: &str, client: (&str, &str), scope: &str) -> Value {
    let (verifier, challenge) = pkce();
    let p = [
        ("response_type", "code"),
        ("client_id", client.0),
        ("redirect_uri", RP),
        ("scope", scope),
        ("code_challenge", challenge.as_str()),
        ("code_challenge_method", "S256"),
        ("prompt", "none"),
    ];
    let (_, params) = location(&authorize(s, Some(cookie), &p).await);
    let f = [
        ("grant_type", "authorization_code"),
        ("code", params["code"].as_str()),
        ("redirect_uri", RP),
        ("code_verifier", verifier.as_str()),
    ];
    let r = token(s, &f, Some(client)).await;
    assert_eq!(r.status, 200, "{}", r.text);
    r.json()
}

pub(super) async fn refresh(s: &TestServer, client: (&str, &str), refresh_token: &str, scope: Option<&str>) -> Resp {
    let mut f = vec![("grant_type", "refresh_token"), ("refresh_token", refresh_token)];
    if let Some(scope) = scope {
        f.push(("scope", scope));
    }
    token(s, &f, Some(client)).await
}

pub(super) async fn userinfo_status(s: &TestServer, tokens: &Value) -> u16 {
    let bearer = format!("Bearer {}", str_of(&tokens["access_token"]));
    s.get("/api/auth/oauth2/userinfo").header("authorization", &bearer).send().await.status
}

/// `offline_access` gives a refresh token (opaque; stored only as its hash); each use answers a new one that
/// replaces it (rotation), with a new access token and ID token, for the grant's scopes or fewer; the grant
/// outlives the session that gave it. Presenting a replaced refresh token again ends the whole grant: the newest
/// refresh token and every access token it issued (RFC 9700 §4.14.2). Another client's refresh token is refused
/// and stays good for its own client; without `offline_access` there is no refresh token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refresh_tokens_rotate_and_a_reused_one_ends_the_whole_grant() {
    let s = TestServer::start().await;
    let admin = s.admin_session().await;
    let scope = "openid profile email offline_access";
    let body = json!({"client_name": "A", "redirect_uris": [RP], "skip_consent": true, "scope": scope});
    let (a_id, a_secret) = register(&s, &admin, body.clone()).await;
    let a_secret = a_secret.unwrap();
    let a = (a_id.as_str(), a_secret.as_str());
    let (b_id, b_secret) = register(&s, &admin, body).await;
    let b_secret = b_secret.unwrap();
    let b = (b_id.as_str(), b_secret.as_str());
    let u = s.new_user("rhea").await;

    let none = granted(&s, &u.cookie, a, "openid email").await;
    assert!(none.get("refresh_token").is_none(), "{none}");

    let first = granted(&s, &u.cookie, a, "openid email offline_access").await;
    let keys: Vec<&str> = first.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        ["access_token", "expires_at", "expires_in", "id_token", "refresh_token", "scope", "token_type"],
        "the plugin's fields"
    );
    let r1 = str_of(&first["refresh_token"]).to_owned();
    // Another client's refresh token: refused, and spent for nobody.
    oauth_error(&refresh(&s, b, &r1, None).await, 400, "invalid_grant");
    oauth_error(&refresh(&s, a, "not-a-token", None).await, 400, "invalid_grant");
    // Narrowing is allowed, widening is not.
    oauth_error(&refresh(&s, a, &r1, Some("openid profile")).await, 400, "invalid_scope");

    let r = refresh(&s, a, &r1, None).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.header("cache-control").as_deref(), Some("no-store"));
    let second = r.json();
    let r2 = str_of(&second["refresh_token"]).to_owned();
    assert_ne!(r2, r1);
    assert_eq!(second["scope"], "openid email offline_access");
    let (_, id_claims) = verified(&s, str_of(&second["id_token"])).await;
    assert_eq!(id_claims["sub"], u.id.as_str());
    assert_eq!(userinfo_status(&s, &second).await, 200);

    // The grant outlives its session: offline access is what it is for.
    s.sign_out(Some(&u.cookie)).await;
    let r = refresh(&s, a, &r2, Some("openid")).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let third = r.json();
    assert_eq!(third["scope"], "openid");
    assert_eq!(userinfo_status(&s, &third).await, 200);
    let r3 = str_of(&third["refresh_token"]).to_owned();

    // The first token again: reuse. Everything the grant issued ends.
    let r = refresh(&s, a, &r1, None).await;
    oauth_error(&r, 400, "invalid_grant");
    oauth_error(&refresh(&s, a, &r3, None).await, 400, "invalid_grant");
    for tokens in [&first, &second, &third] {
        assert_eq!(userinfo_status(&s, tokens).await, 401, "{tokens}");
    }
    // Audited once, when the grant ended (no actor, the user as target); a third use finds nothing to end.
    oauth_error(&refresh(&s, a, &r1, None).await, 400, "invalid_grant");
    let entries = s.get("/api/admin/audit?action=oauth_refresh_token.reused").cookie(&admin).send().await.json();
    let entries = entries["entries"].as_array().unwrap().clone();
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert_eq!(entries[0]["target_id"], u.id.as_str(), "{entries:?}");
    assert!(entries[0]["actor_id"].is_null(), "{entries:?}");
    assert_eq!(entries[0]["detail"], format!("{}: refresh token used twice", a.0));
}

/// A ban, a password reset and "sign out everywhere" each end every grant of the user, `offline_access` ones
/// included (refresh tokens and access tokens), in the commit that makes them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ban_a_password_reset_and_signing_out_everywhere_end_the_users_grants() {
    let mail = tempfile::tempdir().unwrap();
    let dir = mail.path().to_owned();
    let s = TestServer::start_adjusted(|c| c.email.directory = Some(dir)).await;
    let admin = s.admin_session().await;
    let body = json!({"client_name": "A", "redirect_uris": [RP], "skip_consent": true,
                      "scope": "openid offline_access"});
    let (id, secret) = register(&s, &admin, body).await;
    let secret = secret.unwrap();
    let a = (id.as_str(), secret.as_str());
    let ended = |tokens: Value| {
        let s = &s;
        async move {
            oauth_error(&refresh(s, a, str_of(&tokens["refresh_token"]), None).await, 400, "invalid_grant");
            assert_eq!(userinfo_status(s, &tokens).await, 401);
        }
    };

    let u = s.new_user("sigrid").await;
    let tokens = granted(&s, &u.cookie, a, "openid offline_access").await;
    let r = s.post("/api/auth/revoke-sessions").cookie(&u.cookie).send().await;
    assert_eq!(r.status, 200, "{}", r.text);
    ended(tokens).await;

    let v = s.new_user("bjorn").await;
    let tokens = granted(&s, &v.cookie, a, "openid offline_access").await;
    s.patch_ok(&admin, &json!({"userId": v.id, "banned": true})).await;
    ended(tokens).await;

    let w = s.new_user("ylva").await;
    let tokens = granted(&s, &w.cookie, a, "openid offline_access").await;
    let r = s.post("/api/auth/request-password-reset").json(&json!({"email": w.email})).send().await;
    assert_eq!(r.status, 200, "{}", r.text);
    let started = std::time::Instant::now();
    let text = loop {
        let file = std::fs::read_dir(mail.path())
            .unwrap()
            .filter_map(|e| e.ok())
            .find(|e| e.path().extension().is_some_and(|x| x == "eml"));
        if let Some(file) = file {
            break std::fs::read_to_string(file.path()).unwrap().replace("=\r\n", "").replace("=\n", "");
        }
        assert!(started.elapsed().as_secs() < 10, "no reset mail");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    let at = text.find("/api/auth/reset-password/").expect("a reset link") + "/api/auth/reset-password/".len();
    let link: String = text[at..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_').collect();
    let r = s
        .post("/api/auth/reset-password")
        .json(&json!({"token": link, "newPassword": "a new password 1"}))
        .send()
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    ended(tokens).await;
}

async fn introspect(s: &TestServer, client: Option<(&str, &str)>, form: &[(&str, &str)]) -> Resp {
    let mut r = s.post("/api/auth/oauth2/introspect");
    if let Some((id, secret)) = client {
        r = r.header(
            "authorization",
            &format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(format!("{id}:{secret}"))),
        );
    }
    r.raw(Some("application/x-www-form-urlencoded"), query(form)).send().await
}

pub(super) async fn active(s: &TestServer, client: (&str, &str), token: &str) -> Value {
    let r = introspect(s, Some(client), &[("token", token)]).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.header("cache-control").as_deref(), Some("no-store"));
    r.json()
}

pub(super) async fn revoke(s: &TestServer, client: (&str, &str), token: &str) -> Resp {
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("{}:{}", client.0, client.1));
    s.post("/api/auth/oauth2/revoke")
        .header("authorization", &format!("Basic {basic}"))
        .raw(Some("application/x-www-form-urlencoded"), query(&[("token", token)]))
        .send()
        .await
}

/// Introspection (RFC 7662) is for confidential clients and tells each only of its own live tokens; revocation
/// (RFC 7009) of an access token or a refresh token ends the whole grant, which introspection and userinfo then
/// refuse at once; an unknown token, or another client's, is answered the same and changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn introspection_tells_a_client_of_its_live_tokens_and_revocation_ends_the_grant() {
    let s = TestServer::start().await;
    let admin = s.admin_session().await;
    let body = json!({"client_name": "A", "redirect_uris": [RP], "skip_consent": true,
                      "scope": "openid email offline_access"});
    let (a_id, a_secret) = register(&s, &admin, body.clone()).await;
    let a_secret = a_secret.unwrap();
    let a = (a_id.as_str(), a_secret.as_str());
    let (b_id, b_secret) = register(&s, &admin, body).await;
    let b_secret = b_secret.unwrap();
    let b = (b_id.as_str(), b_secret.as_str());
    let public = json!({"client_name": "cli", "application_type": "native", "token_endpoint_auth_method": "none",
                        "redirect_uris": ["http://127.0.0.1/cb"]});
    let (p_id, _) = register(&s, &admin, public).await;
    let u = s.new_user("ingrid").await;
    let tokens = granted(&s, &u.cookie, a, "openid email offline_access").await;
    let access = str_of(&tokens["access_token"]);
    let refresh_token = str_of(&tokens["refresh_token"]);

    let v = active(&s, a, access).await;
    assert_eq!(v["active"], true, "{v}");
    assert_eq!(v["sub"], u.id.as_str());
    assert_eq!(v["client_id"], a.0);
    assert_eq!(v["scope"], "openid email offline_access");
    assert_eq!(v["token_type"], "Bearer");
    assert!(str_of(&v["iss"]).ends_with("/api/auth"), "{v}");
    assert!(v["exp"].as_i64().unwrap() > v["iat"].as_i64().unwrap());
    let v = active(&s, a, refresh_token).await;
    assert_eq!(v["active"], true, "{v}");
    assert_eq!(v["sub"], u.id.as_str());
    let r = introspect(&s, Some(a), &[("token", refresh_token), ("token_type_hint", "refresh_token")]).await;
    assert_eq!(r.json()["active"], true, "{}", r.text);
    // Another client's tokens, and anything else, are inactive; nothing else is said.
    assert_eq!(active(&s, b, access).await, json!({"active": false}));
    assert_eq!(active(&s, b, refresh_token).await, json!({"active": false}));
    assert_eq!(active(&s, a, "not a token").await, json!({"active": false}));
    // Only confidential clients, authenticated.
    oauth_error(&introspect(&s, None, &[("token", access), ("client_id", &p_id)]).await, 401, "invalid_client");
    oauth_error(&introspect(&s, None, &[("token", access)]).await, 401, "invalid_client");
    oauth_error(&introspect(&s, Some((a.0, "wrong")), &[("token", access)]).await, 401, "invalid_client");
    oauth_error(&introspect(&s, Some(a), &[]).await, 400, "invalid_request");

    // Revocation: an unknown token and another client's change nothing, with the same answer.
    let r = revoke(&s, a, "not a token").await;
    assert_eq!((r.status, r.text.as_str()), (200, ""));
    assert_eq!(revoke(&s, b, access).await.status, 200);
    assert_eq!(active(&s, a, access).await["active"], true);
    // The access token's revocation ends the grant: the refresh token too.
    assert_eq!(revoke(&s, a, access).await.status, 200);
    assert_eq!(active(&s, a, access).await, json!({"active": false}));
    assert_eq!(active(&s, a, refresh_token).await, json!({"active": false}));
    assert_eq!(userinfo_status(&s, &tokens).await, 401);
    oauth_error(&refresh(&s, a, refresh_token, None).await, 400, "invalid_grant");

    // A refresh token's revocation ends its access tokens.
    let tokens = granted(&s, &u.cookie, a, "openid offline_access").await;
    assert_eq!(revoke(&s, a, str_of(&tokens["refresh_token"])).await.status, 200);
    assert_eq!(active(&s, a, str_of(&tokens["access_token"])).await, json!({"active": false}));
    assert_eq!(userinfo_status(&s, &tokens).await, 401);
}

/// A ban makes the user's tokens inactive at once; a sign-out those of grants without `offline_access`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_banned_users_tokens_and_a_signed_out_sessions_introspect_inactive_at_once() {
    let s = TestServer::start().await;
    let admin = s.admin_session().await;
    let body = json!({"client_name": "A", "redirect_uris": [RP], "skip_consent": true,
                      "scope": "openid offline_access"});
    let (id, secret) = register(&s, &admin, body).await;
    let secret = secret.unwrap();
    let a = (id.as_str(), secret.as_str());
    let u = s.new_user("harald").await;
    let online = granted(&s, &u.cookie, a, "openid").await;
    let offline = granted(&s, &u.cookie, a, "openid offline_access").await;
    assert_eq!(active(&s, a, str_of(&online["access_token"])).await["active"], true);
    s.sign_out(Some(&u.cookie)).await;
    assert_eq!(active(&s, a, str_of(&online["access_token"])).await, json!({"active": false}));
    assert_eq!(active(&s, a, str_of(&offline["access_token"])).await["active"], true);
    assert_eq!(active(&s, a, str_of(&offline["refresh_token"])).await["active"], true);
    s.patch_ok(&admin, &json!({"userId": u.id, "banned": true})).await;
    assert_eq!(active(&s, a, str_of(&offline["access_token"])).await, json!({"active": false}));
    assert_eq!(active(&s, a, str_of(&offline["refresh_token"])).await, json!({"active": false}));
}

/// Client credentials (RFC 6749 §4.4): a confidential client gets an access token of its own for its own scopes
/// (not a user's), with no refresh or ID token; a scope beyond them is `invalid_scope`; a public client, or one
/// not registered for the grant, is `unauthorized_client`. Introspection names the client as the subject.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_credentials_give_a_confidential_client_its_own_scopes_only() {
    let s = TestServer::start().await;
    let admin = s.admin_session().await;
    let body = json!({"client_name": "billing", "grant_types": ["client_credentials"],
                      "scope": "invoices:read invoices:write"});
    let (id, secret) = register(&s, &admin, body).await;
    let secret = secret.unwrap();
    let c = (id.as_str(), secret.as_str());
    let r = token(&s, &[("grant_type", "client_credentials")], Some(c)).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let all = r.json();
    assert_eq!(all["scope"], "invoices:read invoices:write");
    assert!(all.get("refresh_token").is_none() && all.get("id_token").is_none(), "{all}");
    let (header, claims) = verified(&s, str_of(&all["access_token"])).await;
    assert_eq!(header["typ"], "at+jwt");
    assert_eq!(claims["sub"], id.as_str());
    assert!(claims.get("sid").is_none(), "{claims}");
    let v = active(&s, c, str_of(&all["access_token"])).await;
    assert_eq!((v["active"].clone(), v["sub"].clone()), (json!(true), json!(id)), "{v}");
    assert_eq!(userinfo_status(&s, &all).await, 403, "no openid: no userinfo");

    let r = token(&s, &[("grant_type", "client_credentials"), ("scope", "invoices:read")], Some(c)).await;
    assert_eq!(r.json()["scope"], "invoices:read", "{}", r.text);
    for scope in ["openid", "invoices:delete", "invoices:read offline_access"] {
        let r = token(&s, &[("grant_type", "client_credentials"), ("scope", scope)], Some(c)).await;
        oauth_error(&r, 400, "invalid_scope");
    }
    let r = token(&s, &[("grant_type", "client_credentials")], Some((c.0, "wrong"))).await;
    oauth_error(&r, 401, "invalid_client");

    let public = json!({"client_name": "cli", "application_type": "native", "token_endpoint_auth_method": "none",
                        "redirect_uris": ["http://127.0.0.1/cb"], "scope": "openid invoices:read"});
    let (p_id, _) = register(&s, &admin, public).await;
    let r = token(&s, &[("grant_type", "client_credentials"), ("client_id", &p_id)], None).await;
    oauth_error(&r, 400, "unauthorized_client");
    let web = json!({"client_name": "web", "redirect_uris": [RP], "scope": "openid invoices:read"});
    let (w_id, w_secret) = register(&s, &admin, web).await;
    let r = token(&s, &[("grant_type", "client_credentials")], Some((&w_id, &w_secret.unwrap()))).await;
    oauth_error(&r, 400, "unauthorized_client");
}

/// RP-initiated logout: an ID token of a client registered with `enable_end_session` ends its session (the
/// session cookie is cleared when the browser's is that session) and sends the browser to a registered
/// `post_logout_redirect_uri` with `state`; no hint, a client not allowed to, or an unregistered redirect are
/// refused and end nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn end_session_ends_the_hinted_session_and_redirects_only_where_registered() {
    let s = TestServer::start().await;
    let admin = s.admin_session().await;
    let bye = "https://rp.example/bye";
    let body = json!({"client_name": "A", "redirect_uris": [RP], "skip_consent": true, "enable_end_session": true,
                      "post_logout_redirect_uris": [bye], "scope": "openid"});
    let (id, secret) = register(&s, &admin, body).await;
    let secret = secret.unwrap();
    let a = (id.as_str(), secret.as_str());
    let plain = json!({"client_name": "B", "redirect_uris": [RP], "skip_consent": true, "scope": "openid"});
    let (b_id, b_secret) = register(&s, &admin, plain).await;
    let b_secret = b_secret.unwrap();
    let u = s.new_user("astrid").await;
    let tokens = granted(&s, &u.cookie, a, "openid").await;
    let hint = str_of(&tokens["id_token"]).to_owned();
    let (_, claims) = verified(&s, &hint).await;
    assert!(claims["sid"].is_string(), "{claims}");
    let end = |pairs: Vec<(&str, &str)>, cookie: Option<String>| {
        let s = &s;
        let q = query(&pairs);
        async move { s.get(&format!("/api/auth/oauth2/end-session?{q}")).cookie_opt(cookie.as_deref()).send().await }
    };
    let live = |cookie: String| {
        let s = &s;
        async move { s.get("/api/auth/get-session").cookie(&cookie).send().await.json() != Value::Null }
    };

    oauth_error(&end(vec![("post_logout_redirect_uri", bye)], None).await, 400, "invalid_request");
    let r = end(vec![("id_token_hint", &hint), ("post_logout_redirect_uri", "https://evil.example/")], None).await;
    oauth_error(&r, 400, "invalid_request");
    oauth_error(&end(vec![("id_token_hint", "x.y.z")], None).await, 400, "invalid_request");
    let r = end(vec![("id_token_hint", &hint), ("client_id", &b_id)], None).await;
    oauth_error(&r, 400, "invalid_request");
    assert!(live(u.cookie.clone()).await, "nothing refused ends the session");
    // A client not allowed to end sessions (its ID tokens carry no sid either).
    let other = granted(&s, &u.cookie, (&b_id, &b_secret), "openid").await;
    oauth_error(&end(vec![("id_token_hint", str_of(&other["id_token"]))], None).await, 401, "invalid_client");
    assert!(live(u.cookie.clone()).await);

    let r = end(
        vec![("id_token_hint", &hint), ("post_logout_redirect_uri", bye), ("state", "s t")],
        Some(u.cookie.clone()),
    )
    .await;
    let (to, params) = location(&r);
    assert_eq!(to, bye);
    assert_eq!(params["state"], "s t");
    let cleared = r.session_cookie().expect("the session cookie is cleared");
    assert!(cleared.value.is_empty(), "{cleared:?}");
    assert!(!live(u.cookie.clone()).await, "the session has ended");
    assert_eq!(userinfo_status(&s, &tokens).await, 401);
    // Again: nothing left to end, the same answer; without a redirect, an empty 200.
    let r = end(vec![("id_token_hint", &hint)], None).await;
    assert_eq!((r.status, r.text.as_str()), (200, ""));
}

/// A code, then a refresh token, presented on both nodes at the same moment (a replay racing the real use): one
/// answers 200 and the other the protocol's own refusal, each round. On PostgreSQL the loser's commit finds the
/// code or token taken by the other node; that refusal must stay its own request's, never the writer's failure
/// (which answered 500 and refused every write of the node until it reconnected).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_code_or_refresh_token_used_on_two_nodes_at_once_works_once_and_fails_cleanly_once() {
    let s = TestServer::start().await;
    let admin = s.admin_session().await;
    let scope = "openid offline_access";
    let body = json!({"client_name": "A", "redirect_uris": [RP], "skip_consent": true, "scope": scope});
    let (id, secret) = register(&s, &admin, body).await;
    let secret = secret.unwrap();
    let client = (id.as_str(), secret.as_str());
    let u = s.new_user("twin").await;
    let (a, b) = (&s.nodes[0], &s.nodes[s.nodes.len() - 1]);
    for round in 0..6 {
        let (verifier, challenge) = pkce();
        let p = [
            ("response_type", "code"),
            ("client_id", client.0),
            ("redirect_uri", RP),
            ("scope", scope),
            ("code_challenge", challenge.as_str()),
            ("code_challenge_method", "S256"),
        ];
        let (_, params) = location(&authorize(&s, Some(&u.cookie), &p).await);
        let f = [
            ("grant_type", "authorization_code"),
            ("code", params["code"].as_str()),
            ("redirect_uri", RP),
            ("code_verifier", verifier.as_str()),
        ];
        let (one, two) = tokio::join!(token_on(a, &f, Some(client)), token_on(b, &f, Some(client)));
        let mut statuses = [one.status, two.status];
        statuses.sort_unstable();
        assert_eq!(statuses, [200, 400], "round {round}, the code: {} / {}", one.text, two.text);
        let lost = if one.status == 200 { &two } else { &one };
        oauth_error(lost, 400, "invalid_grant");

        // The code's race was a replay: the loser may have ended the winner's grant (when that grant was stored
        // before the loser looked for it), so the refresh tokens' race starts from a grant of its own.
        let won = granted(&s, &u.cookie, client, scope).await;
        let refresh_token = str_of(&won["refresh_token"]).to_owned();
        let f = [("grant_type", "refresh_token"), ("refresh_token", refresh_token.as_str())];
        let (one, two) = tokio::join!(token_on(a, &f, Some(client)), token_on(b, &f, Some(client)));
        let mut statuses = [one.status, two.status];
        statuses.sort_unstable();
        assert_eq!(statuses, [200, 400], "round {round}, the refresh token: {} / {}", one.text, two.text);
    }
    for node in &s.nodes {
        assert_eq!(node.get("/readyz").send().await.status, 200, "every node still takes writes");
    }
}

/// An authorization code presented again after its redemption is refused, and what its first redemption issued
/// ends with it (RFC 9700 §4.2.1): the access token introspects inactive and fails at userinfo, the refresh token
/// is refused, and the reuse is in the audit log (no actor; the user as target). Redeemed on one node and replayed
/// on the other when there are two. The user's other grant to the same client lives on, and a code never issued
/// ends nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reused_code_is_refused_and_ends_the_grant_its_first_redemption_made() {
    let s = TestServer::start().await;
    let admin = s.admin_session().await;
    let scope = "openid offline_access";
    let body = json!({"client_name": "A", "redirect_uris": [RP], "skip_consent": true, "scope": scope});
    let (id, secret) = register(&s, &admin, body).await;
    let secret = secret.unwrap();
    let client = (id.as_str(), secret.as_str());
    let u = s.new_user("reed").await;
    let (a, b) = (&s.nodes[0], &s.nodes[s.nodes.len() - 1]);
    let other = granted(&s, &u.cookie, client, scope).await;

    let (verifier, challenge) = pkce();
    let p = [
        ("response_type", "code"),
        ("client_id", client.0),
        ("redirect_uri", RP),
        ("scope", scope),
        ("code_challenge", challenge.as_str()),
        ("code_challenge_method", "S256"),
    ];
    let (_, params) = location(&authorize(&s, Some(&u.cookie), &p).await);
    let f = [
        ("grant_type", "authorization_code"),
        ("code", params["code"].as_str()),
        ("redirect_uri", RP),
        ("code_verifier", verifier.as_str()),
    ];
    let r = token_on(a, &f, Some(client)).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let first = r.json();
    let (access, refresh_token) = (str_of(&first["access_token"]), str_of(&first["refresh_token"]));
    assert_eq!(active(&s, client, access).await["active"], true);

    let replay = token_on(b, &f, Some(client)).await;
    oauth_error(&replay, 400, "invalid_grant");
    assert_eq!(replay.json()["error_description"], "invalid code");
    for _ in &s.nodes {
        // Introspection alternates between the nodes: each says so.
        assert_eq!(active(&s, client, access).await, json!({"active": false}));
        assert_eq!(userinfo_status(&s, &first).await, 401);
    }
    oauth_error(&refresh(&s, client, refresh_token, None).await, 400, "invalid_grant");
    let entries = s.get("/api/admin/audit?action=oauth_code.reused").cookie(&admin).send().await.json();
    let entries = entries["entries"].as_array().unwrap().clone();
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert_eq!(entries[0]["target_id"], u.id.as_str(), "{entries:?}");
    assert!(entries[0]["actor_id"].is_null(), "{entries:?}");
    assert_eq!(entries[0]["detail"], format!("{}: authorization code used twice", client.0));

    // A third presentation finds nothing more to end; a code never issued ends nothing; the other grant lives.
    oauth_error(&token_on(a, &f, Some(client)).await, 400, "invalid_grant");
    let mut forged = f;
    forged[1].1 = "never-issued";
    oauth_error(&token_on(b, &forged, Some(client)).await, 400, "invalid_grant");
    let entries = s.get("/api/admin/audit?action=oauth_code.reused").cookie(&admin).send().await.json();
    assert_eq!(entries["entries"].as_array().unwrap().len(), 1, "{entries}");
    assert_eq!(active(&s, client, str_of(&other["access_token"])).await["active"], true);
    let r = refresh(&s, client, str_of(&other["refresh_token"]), None).await;
    assert_eq!(r.status, 200, "{}", r.text);
}

/// `service-auth seed --access-tokens` (the grants of benches/provider.sh) writes grants as the token endpoint
/// makes them: a server on the seeded directory verifies each access token with its published key, introspects it
/// active for its session's user and session, and refreshes each refresh token once (rotated: the old one is then
/// a reuse). Before, a benchmark of introspection at scale had no way to make a million grants but the endpoint.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seeded_grants_verify_introspect_and_refresh_as_the_token_endpoints_do() {
    let tmp = tempfile::tempdir().unwrap();
    let mut config = test_config(&tmp.path().join("data"));
    config.base_url = Some("http://seed.example".into());
    let file = |name: &str| tmp.path().join(name);
    let args = service_auth::ops::seed::SeedArgs {
        users: 4,
        sessions: 4,
        access_tokens: 3,
        tokens_out: Some(file("sessions.txt")),
        grants_out: Some(file("grants.txt")),
        client_out: Some(file("client.txt")),
        ..Default::default()
    };
    let report = service_auth::ops::seed::seed(&config, args).await.unwrap();
    assert!(report.contains("3 grants"), "{report}");
    let read = |name: &str| std::fs::read_to_string(file(name)).unwrap();
    let (client_id, secret) =
        read("client.txt").trim().split_once(' ').map(|(a, b)| (a.to_owned(), b.to_owned())).unwrap();
    let client = (client_id.as_str(), secret.as_str());
    let sessions: Vec<String> = read("sessions.txt").lines().map(str::to_owned).collect();
    let grants: Vec<(String, String)> = read("grants.txt")
        .lines()
        .map(|l| l.split_once(' ').map(|(a, r)| (a.to_owned(), r.to_owned())).unwrap())
        .collect();
    assert_eq!(grants.len(), 3);
    assert!(grants.iter().all(|(a, _)| a.len() == grants[0].0.len()), "fixed width, for the load tool");
    let s = TestServer::start_embedded(config).await;

    for (i, (access, refresh_token)) in grants.iter().enumerate() {
        let (header, claims) = verified(&s, access).await;
        assert_eq!(header["typ"], "at+jwt");
        assert_eq!(claims["iss"], "http://seed.example/api/auth");
        let session = s.get("/api/auth/get-session").cookie(&sessions[i]).send().await.json();
        let answer = active(&s, client, access).await;
        assert_eq!(answer["active"], true, "{answer}");
        assert_eq!(answer["sub"], session["user"]["id"], "{answer}");
        assert_eq!(answer["sid"], session["session"]["id"], "{answer}");
        assert_eq!(answer["scope"], "openid profile email offline_access");
        assert_eq!(answer["client_id"], client_id.as_str());

        let r = refresh(&s, client, refresh_token, None).await;
        assert_eq!(r.status, 200, "{}", r.text);
        assert_ne!(str_of(&r.json()["refresh_token"]), refresh_token.as_str());
        oauth_error(&refresh(&s, client, refresh_token, None).await, 400, "invalid_grant");
        assert_eq!(active(&s, client, access).await["active"], false, "the reuse ended the grant");
    }
}

/// A client's authentication is answered from memory once it has authenticated (the embedded store's client cache,
/// src/provider/clients.rs), yet every change of the client holds at the next request: the old secret is refused as
/// soon as the rotation is answered and the new one works, a disabled client is refused, a deleted one is unknown.
/// On two nodes (tests/cluster/run.sh) each authentication reads the database, and the same holds on either node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_authenticated_is_refused_at_once_when_rotated_disabled_or_deleted() {
    let s = TestServer::start().await;
    let admin = s.admin_session().await;
    let body = json!({"client_name": "API", "redirect_uris": [RP], "skip_consent": true,
                      "scope": "openid profile email offline_access"});
    let (id, secret) = register(&s, &admin, body).await;
    let secret = secret.unwrap();
    let u = s.new_user("cache").await;
    let tokens = granted(&s, &u.cookie, (&id, &secret), "openid offline_access").await;
    let access = str_of(&tokens["access_token"]).to_owned();
    // Authenticated several times: from memory after the first.
    for _ in 0..3 {
        assert_eq!(active(&s, (&id, &secret), &access).await["active"], true);
    }
    let change = |body: Value| {
        let (s, admin, id) = (&s, &admin, &id);
        async move {
            let r = s.patch(&format!("/api/admin/oidc/clients/{id}")).cookie(admin).json(&body).send().await;
            assert_eq!(r.status, 200, "{}", r.text);
            r.json()
        }
    };
    let rotated = change(json!({"rotate_secret": true})).await;
    let new_secret = str_of(&rotated["client_secret"]).to_owned();
    oauth_error(&introspect(&s, Some((&id, &secret)), &[("token", &access)]).await, 401, "invalid_client");
    oauth_error(&refresh(&s, (&id, &secret), str_of(&tokens["refresh_token"]), None).await, 401, "invalid_client");
    assert_eq!(active(&s, (&id, &new_secret), &access).await["active"], true);

    change(json!({"disabled": true})).await;
    oauth_error(&introspect(&s, Some((&id, &new_secret)), &[("token", &access)]).await, 401, "invalid_client");
    change(json!({"disabled": false})).await;
    assert_eq!(active(&s, (&id, &new_secret), &access).await["active"], true);

    let r = s.delete(&format!("/api/admin/oidc/clients/{id}")).cookie(&admin).send().await;
    assert_eq!(r.status, 200, "{}", r.text);
    oauth_error(&introspect(&s, Some((&id, &new_secret)), &[("token", &access)]).await, 401, "invalid_client");
}
