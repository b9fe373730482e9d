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
async fn receiver() -> (std::net::SocketAddr, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
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
