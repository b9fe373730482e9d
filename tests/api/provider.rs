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
