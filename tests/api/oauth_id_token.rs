//! Sign-in and linking with an ID token the client brings (better-auth's `idToken` on `sign-in/social` and
//! `link-social`), against a provider's published half served on loopback by the test: its discovery document and
//! its keys (JWKS), with the `Cache-Control` a test chooses, counting how often each is read. The tokens are real
//! RS256 JWTs signed here with the provider's key (or another one), so every check the server makes (signature,
//! algorithm, issuer, audience, expiry, nonce) is made for real. tests/api/oauth.rs has the same sign-in with a
//! token the real oidc-provider issued.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use chrono::{Duration, Utc};
use openidconnect::core::{
    CoreHmacKey, CoreIdToken, CoreIdTokenClaims, CoreJwsSigningAlgorithm, CoreRsaPrivateSigningKey,
};
use openidconnect::{
    Audience, EmptyAdditionalClaims, EndUserEmail, IssuerUrl, JsonWebKeyId, Nonce, PrivateSigningKey, StandardClaims,
    SubjectIdentifier,
};
use serde_json::{Value, json};
use service_auth::oauth::config::{ProviderConfig, Secret};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::harness::*;

const PROVIDER_KEY: &str = include_str!("keys/id_token_provider.pem");
/// Another key, published nowhere, under the same key id.
const FOREIGN_KEY: &str = include_str!("keys/id_token_foreign.pem");

// ---------------------------------------------------------------------------------------------------------------
// The provider's published half

/// Discovery and JWKS on loopback, and the provider's signing key.
struct Issuer {
    url: String,
    key: CoreRsaPrivateSigningKey,
    discovery_reads: Arc<AtomicUsize>,
    jwks_reads: Arc<AtomicUsize>,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for Issuer {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl Issuer {
    /// Serves with `cache_control` on both documents.
    async fn start(cache_control: &'static str) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let key = rsa_key(PROVIDER_KEY);
        let discovery = json!({
            "issuer": url,
            "authorization_endpoint": format!("{url}/auth"),
            "token_endpoint": format!("{url}/token"),
            "jwks_uri": format!("{url}/jwks"),
            "response_types_supported": ["code"],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["RS256"],
        })
        .to_string();
        let jwks = json!({"keys": [key.as_verification_key()]}).to_string();
        let (discovery_reads, jwks_reads) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let counters = (Arc::clone(&discovery_reads), Arc::clone(&jwks_reads));
        let server = tokio::spawn(async move {
            loop {
                let Ok((mut socket, _)) = listener.accept().await else { return };
                let (discovery, jwks, counters) = (discovery.clone(), jwks.clone(), counters.clone());
                tokio::spawn(async move {
                    let mut request = Vec::new();
                    let mut buf = [0u8; 1024];
                    while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                        match socket.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => request.extend_from_slice(&buf[..n]),
                        }
                    }
                    let line = String::from_utf8_lossy(&request);
                    let path = line.split_whitespace().nth(1).unwrap_or("");
                    let (status, body) = match path {
                        "/.well-known/openid-configuration" => {
                            counters.0.fetch_add(1, Ordering::SeqCst);
                            ("200 OK", discovery)
                        }
                        "/jwks" => {
                            counters.1.fetch_add(1, Ordering::SeqCst);
                            ("200 OK", jwks)
                        }
                        _ => ("404 Not Found", "{}".to_owned()),
                    };
                    let answer = format!(
                        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nCache-Control: {cache_control}\r\n\
                         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = socket.write_all(answer.as_bytes()).await;
                    let _ = socket.shutdown().await;
                });
            }
        });
        Self { url, key, discovery_reads, jwks_reads, server }
    }

    /// A good token's claims for `email`: this issuer, for the client `svc`, verified, valid for ten minutes.
    fn claims(&self, email: &str) -> Claims {
        Claims {
            issuer: self.url.clone(),
            audience: "svc".into(),
            subject: format!("sub-{email}"),
            email: email.into(),
            verified: true,
            nonce: None,
            expires_in: 600,
        }
    }

    fn sign(&self, claims: &Claims) -> String {
        sign(claims, &self.key)
    }

    fn reads(&self) -> (usize, usize) {
        (self.discovery_reads.load(Ordering::SeqCst), self.jwks_reads.load(Ordering::SeqCst))
    }
}

fn rsa_key(pem: &str) -> CoreRsaPrivateSigningKey {
    CoreRsaPrivateSigningKey::from_pem(pem, Some(JsonWebKeyId::new("key-1".into()))).unwrap()
}

#[derive(Clone)]
struct Claims {
    issuer: String,
    audience: String,
    subject: String,
    email: String,
    verified: bool,
    nonce: Option<String>,
    /// Seconds from now; negative: expired that long ago.
    expires_in: i64,
}

fn id_token_claims(c: &Claims) -> CoreIdTokenClaims {
    let expires = Utc::now() + Duration::seconds(c.expires_in);
    let issued = expires.min(Utc::now()) - Duration::seconds(60);
    let standard = StandardClaims::new(SubjectIdentifier::new(c.subject.clone()))
        .set_email(Some(EndUserEmail::new(c.email.clone())))
        .set_email_verified(Some(c.verified));
    let claims = CoreIdTokenClaims::new(
        IssuerUrl::new(c.issuer.clone()).unwrap(),
        vec![Audience::new(c.audience.clone())],
        expires,
        issued,
        standard,
        EmptyAdditionalClaims {},
    );
    claims.set_nonce(c.nonce.clone().map(Nonce::new))
}

/// An RS256 ID token with `claims`, signed with `key`.
fn sign(claims: &Claims, key: &CoreRsaPrivateSigningKey) -> String {
    let alg = CoreJwsSigningAlgorithm::RsaSsaPkcs1V15Sha256;
    CoreIdToken::new(id_token_claims(claims), key, alg, None, None).unwrap().to_string()
}

fn provider(id: &str, issuer: &str, client_id: &str, trusted: bool) -> ProviderConfig {
    let text =
        format!("id = \"{id}\"\nissuer = \"{issuer}\"\nclient_id = \"{client_id}\"\nclient_secret_env = \"UNUSED\"\n");
    let mut p: ProviderConfig = toml::from_str(&text).unwrap();
    p.trusted_for_linking = trusted;
    p.client_secret = Some(Secret::new(format!("{client_id}-secret")));
    p
}

/// A service with `local` (client `svc`, trusted for linking) and `other` (client `svc2`, not) on `issuer`, and
/// `gh`, the GitHub preset.
async fn setup(cache_control: &'static str) -> (TestServer, Issuer) {
    let issuer = Issuer::start(cache_control).await;
    let url = issuer.url.clone();
    let server = TestServer::start_adjusted(|c| {
        let mut github: ProviderConfig =
            toml::from_str("id = \"gh\"\npreset = \"github\"\nclient_id = \"gh\"\nclient_secret_env = \"UNUSED\"\n")
                .unwrap();
        github.client_secret = Some(Secret::new("gh-secret"));
        c.oauth.providers = vec![provider("local", &url, "svc", true), provider("other", &url, "svc2", false), github];
    })
    .await;
    (server, issuer)
}

async fn sign_in(server: &TestServer, provider: &str, id_token: Value) -> Resp {
    let body = json!({"provider": provider, "idToken": id_token});
    server.client.post("/api/auth/sign-in/social").json(&body).send().await
}

async fn link(server: &TestServer, cookie: &str, provider: &str, id_token: Value) -> Resp {
    let body = json!({"provider": provider, "idToken": id_token});
    server.client.post("/api/auth/link-social").cookie(cookie).json(&body).send().await
}

/// A 200 of `sign-in/social` with `idToken`: better-auth's `{redirect: false, token, user}` (no `url`) and the
/// session cookie, which get-session accepts; the user.
async fn signed_in(server: &TestServer, resp: &Resp) -> Value {
    assert_eq!(resp.status, 200, "{}", resp.text);
    let body = resp.json();
    assert_keys(&body, &["redirect", "token", "user"]);
    assert_eq!(body["redirect"], false);
    let cookie = resp.session_cookie().expect("the session cookie").value;
    assert_eq!(body["token"], cookie.as_str());
    let session = server.client.session(&cookie).await;
    assert_eq!(session["user"]["id"], body["user"]["id"]);
    body["user"].clone()
}

fn refused(resp: &Resp, status: u16, code: &str) {
    assert_auth_error(resp, status, code);
    assert!(resp.session_cookie().is_none(), "no session: {:?}", resp.set_cookies());
}

// ---------------------------------------------------------------------------------------------------------------
// Tests

#[tokio::test]
async fn a_good_id_token_signs_up_then_signs_in_and_the_keys_are_read_once_while_fresh() {
    let (server, issuer) = setup("public, max-age=600").await;
    let mut claims = issuer.claims("nina@example.com");
    claims.nonce = Some("n-1".into());
    let token = issuer.sign(&claims);
    let first = sign_in(&server, "local", json!({"token": token, "nonce": "n-1", "accessToken": "at"})).await;
    let user = signed_in(&server, &first).await;
    assert_eq!(user["email"], "nina@example.com");
    assert_eq!(user["emailVerified"], true);
    // Without a nonce from the client, the token's is not checked (better-auth's rule): the same account.
    let again = sign_in(&server, "local", json!({"token": issuer.sign(&issuer.claims("nina@example.com"))})).await;
    assert_eq!(signed_in(&server, &again).await["id"], user["id"]);
    // Fresh for ten minutes: discovery and keys were read once for both sign-ins.
    assert_eq!(issuer.reads(), (1, 1));
    let cookie = again.session_cookie().unwrap().value;
    let accounts = server.client.get("/api/auth/list-accounts").cookie(&cookie).send().await.json();
    assert_eq!(accounts.as_array().unwrap().len(), 1, "{accounts}");
    assert_eq!(accounts[0]["providerId"], "local");
    assert_eq!(accounts[0]["accountId"], "sub-nina@example.com");
}

#[tokio::test]
async fn keys_the_provider_says_not_to_cache_are_read_again() {
    let (server, issuer) = setup("no-store").await;
    for _ in 0..2 {
        let resp = sign_in(&server, "local", json!({"token": issuer.sign(&issuer.claims("olga@example.com"))})).await;
        signed_in(&server, &resp).await;
    }
    assert_eq!(issuer.reads(), (2, 2));
}

#[tokio::test]
async fn bad_id_tokens_are_refused() {
    let (server, issuer) = setup("max-age=600").await;
    let good = issuer.claims("paul@example.com");
    let with = |change: &dyn Fn(&mut Claims)| {
        let mut c = good.clone();
        change(&mut c);
        c
    };
    let cases: Vec<(&str, String, Option<&str>)> = vec![
        ("another audience", issuer.sign(&with(&|c| c.audience = "someone-else".into())), None),
        ("another issuer", issuer.sign(&with(&|c| c.issuer = format!("{}/other", issuer.url))), None),
        ("expired", issuer.sign(&with(&|c| c.expires_in = -120)), None),
        ("another nonce", issuer.sign(&with(&|c| c.nonce = Some("n-1".into()))), Some("n-2")),
        ("no nonce, one expected", issuer.sign(&good), Some("n-1")),
        ("signed by a key the provider does not publish", sign(&good, &rsa_key(FOREIGN_KEY)), None),
        ("HS256 with the client secret: not an algorithm the metadata names", hs256(&good, "svc-secret"), None),
        ("not a JWT", "x".into(), None),
    ];
    for (case, token, nonce) in cases {
        let resp = sign_in(&server, "local", json!({"token": token, "nonce": nonce})).await;
        assert_eq!(resp.status, 401, "{case}: {}", resp.text);
        refused(&resp, 401, "INVALID_TOKEN");
    }
    // The key set was read once per node: a token under an unknown signature does not make the server fetch it
    // again within a minute (a flood of forged tokens is not a flood of requests to the provider).
    assert_eq!(issuer.reads().1, server.nodes.len());
    // Another provider entry on the same issuer is another client: a token for `svc` is not for it.
    let resp = sign_in(&server, "other", json!({"token": issuer.sign(&good)})).await;
    refused(&resp, 401, "INVALID_TOKEN");
    // Nothing was signed in or made.
    let admin = server.client.admin_session().await;
    assert!(server.client.users(&admin).await.iter().all(|u| u["email"] != "paul@example.com"));
}

fn hs256(claims: &Claims, secret: &str) -> String {
    let key = CoreHmacKey::new(secret.as_bytes());
    CoreIdToken::new(id_token_claims(claims), &key, CoreJwsSigningAlgorithm::HmacSha256, None, None)
        .unwrap()
        .to_string()
}

#[tokio::test]
async fn unknown_providers_providers_without_id_tokens_and_bad_bodies_are_named() {
    let (server, issuer) = setup("max-age=600").await;
    let token = issuer.sign(&issuer.claims("quinn@example.com"));
    refused(&sign_in(&server, "nope", json!({"token": token})).await, 404, "PROVIDER_NOT_FOUND");
    // GitHub issues no ID tokens.
    refused(&sign_in(&server, "gh", json!({"token": token})).await, 404, "ID_TOKEN_NOT_SUPPORTED");
    for bad in [json!({}), json!({"token": 7}), json!("a string"), json!({"token": token, "extra": 1})] {
        let resp = sign_in(&server, "local", bad.clone()).await;
        assert_eq!(resp.status, 400, "{bad}: {}", resp.text);
    }
    let resp = server
        .client
        .post("/api/auth/sign-in/social")
        .json(&json!({"provider": "local", "idToken": {"token": token}, "callbackURL": "https://evil.example/"}))
        .send()
        .await;
    refused(&resp, 403, "INVALID_CALLBACK_URL");
    assert_eq!(issuer.reads(), (0, 0), "refused before the provider was asked");
}

#[tokio::test]
async fn an_id_token_follows_the_callbacks_linking_rules() {
    let (server, issuer) = setup("max-age=600").await;
    let rita = server.client.new_user("rita").await;
    // Unverified at the trusted provider, or verified at an untrusted one: no way into Rita's account.
    let mut unverified = issuer.claims("rita@example.com");
    unverified.verified = false;
    refused(&sign_in(&server, "local", json!({"token": issuer.sign(&unverified)})).await, 401, "OAUTH_LINK_ERROR");
    let mut untrusted = issuer.claims("rita@example.com");
    untrusted.audience = "svc2".into();
    refused(&sign_in(&server, "other", json!({"token": issuer.sign(&untrusted)})).await, 401, "OAUTH_LINK_ERROR");
    // Verified at the trusted provider, but Rita's own address was never proven here: refused.
    let resp = sign_in(&server, "local", json!({"token": issuer.sign(&issuer.claims("rita@example.com"))})).await;
    refused(&resp, 401, "OAUTH_LINK_ERROR");
    // Verified at the trusted provider, her address proven: linked to Rita's account and signed into it.
    let admin = server.client.admin_session().await;
    server.client.mark_verified(&admin, &rita.id).await;
    let resp = sign_in(&server, "local", json!({"token": issuer.sign(&issuer.claims("rita@example.com"))})).await;
    assert_eq!(signed_in(&server, &resp).await["id"], rita.id.as_str());
    let accounts = server.client.get("/api/auth/list-accounts").cookie(&rita.cookie).send().await.json();
    let providers: Vec<&str> = accounts.as_array().unwrap().iter().map(|a| a["providerId"].as_str().unwrap()).collect();
    assert_eq!(providers, ["credential", "local"]);

    // A banned account stays banned.
    server.client.patch_ok(&admin, &json!({"userId": rita.id, "banned": true})).await;
    let resp = sign_in(&server, "local", json!({"token": issuer.sign(&issuer.claims("rita@example.com"))})).await;
    refused(&resp, 403, "BANNED_USER");
}

#[tokio::test]
async fn an_account_with_a_second_factor_gets_the_challenge_not_a_session() {
    let (server, issuer) = setup("max-age=600").await;
    let enrolled = super::two_factor::enrolled(&server, "sam").await;
    server.client.mark_verified(&server.client.admin_session().await, &enrolled.id).await;
    let resp = sign_in(&server, "local", json!({"token": issuer.sign(&issuer.claims(&enrolled.email))})).await;
    assert_eq!(resp.status, 200, "{}", resp.text);
    assert_eq!(resp.json(), json!({"twoFactorRedirect": true, "twoFactorMethods": ["totp"]}));
    assert!(resp.session_cookie().is_none());
    let challenge = resp.set_cookies().into_iter().find(|c| c.name == "service-auth.two_factor").expect("challenge");
    // The challenge is the sign-in step's: a right code opens the session.
    let step = super::two_factor::settled_step().await;
    // The enrolment used this step's code: the next one (one step either side is accepted).
    let code = super::two_factor::code(&enrolled.secret, step + 1);
    let done = super::two_factor::verify_totp(&server, None, Some(&challenge.value), &code, false).await;
    assert_eq!(done.status, 200, "{}", done.text);
    assert_eq!(done.json()["user"]["id"], enrolled.id.as_str());
}

#[tokio::test]
async fn link_social_with_an_id_token_links_at_once_under_better_auths_rules() {
    let (server, issuer) = setup("max-age=600").await;
    let tom = server.client.new_user("tom").await;
    let uma = server.client.new_user("uma").await;
    let anonymous = server
        .client
        .post("/api/auth/link-social")
        .json(&json!({"provider": "local", "idToken": {"token": issuer.sign(&issuer.claims("tom@example.com"))}}))
        .send()
        .await;
    assert_auth_error(&anonymous, 401, "UNAUTHORIZED");
    // Unverified, at a provider not trusted for linking: not linked.
    let mut unverified = issuer.claims("tom@example.com");
    unverified.verified = false;
    unverified.audience = "svc2".into();
    let resp = link(&server, &tom.cookie, "other", json!({"token": issuer.sign(&unverified)})).await;
    assert_auth_error(&resp, 401, "LINKING_NOT_ALLOWED");
    // Another address than the account's: not linked.
    let resp =
        link(&server, &tom.cookie, "local", json!({"token": issuer.sign(&issuer.claims("x@example.com"))})).await;
    assert_auth_error(&resp, 401, "LINKING_DIFFERENT_EMAILS_NOT_ALLOWED");
    let resp = link(&server, &tom.cookie, "local", json!({"token": "x"})).await;
    assert_auth_error(&resp, 401, "INVALID_TOKEN");
    // Tom's own, verified: linked; again: still a success.
    let token = issuer.sign(&issuer.claims("tom@example.com"));
    for _ in 0..2 {
        let resp = link(&server, &tom.cookie, "local", json!({"token": token})).await;
        assert_eq!(resp.status, 200, "{}", resp.text);
        assert_eq!(resp.json(), json!({"url": "", "status": true, "redirect": false}));
        assert!(resp.session_cookie().is_none(), "a link opens no session");
    }
    let accounts = server.client.get("/api/auth/list-accounts").cookie(&tom.cookie).send().await.json();
    assert_eq!(accounts.as_array().unwrap().len(), 2, "{accounts}");
    // Tom's identity is Tom's: Uma cannot link it.
    let resp = link(&server, &uma.cookie, "local", json!({"token": token})).await;
    assert_auth_error(&resp, 409, "SOCIAL_ACCOUNT_ALREADY_LINKED");
    // GitHub issues no ID tokens.
    let resp = link(&server, &tom.cookie, "gh", json!({"token": token})).await;
    assert_auth_error(&resp, 404, "ID_TOKEN_NOT_SUPPORTED");
}

/// #44 item 2, by ID token: an address the provider does not assert as verified makes no account (before, it made
/// one, and whoever held it kept it after the owner's recovery); `EMAIL_NOT_VERIFIED`, nothing made.
#[tokio::test]
async fn an_id_token_of_an_unverified_address_makes_no_account() {
    let (server, issuer) = setup("max-age=600").await;
    let mut unverified = issuer.claims("vic@example.com");
    unverified.verified = false;
    refused(&sign_in(&server, "local", json!({"token": issuer.sign(&unverified)})).await, 403, "EMAIL_NOT_VERIFIED");
    let admin = server.client.admin_session().await;
    assert!(server.client.users(&admin).await.iter().all(|u| u["email"] != "vic@example.com"), "no account made");
    // The owner's own sign-up is not blocked.
    assert_eq!(server.client.sign_up("Vic", "vic@example.com", PASSWORD).await.0, 200);
}
