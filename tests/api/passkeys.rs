//! Passkeys over HTTP, as `@better-auth/passkey`'s client calls them, with a software authenticator
//! (webauthn-authenticator-rs's `SoftPasskey`): registrations and sign-ins carry real signatures over the server's
//! challenges, so every refusal below is the server's verification refusing, not a stub.

use serde_json::{Value, json};
use webauthn_authenticator_rs::WebauthnAuthenticator;
use webauthn_authenticator_rs::prelude::{CreationChallengeResponse, RequestChallengeResponse, Url};
use webauthn_authenticator_rs::softpasskey::SoftPasskey;

use super::harness::{
    ADMIN_EMAIL, ADMIN_PASSWORD, PASSWORD, Resp, TestServer, cluster, run_binary, str_of, test_config,
};

/// The page the test "browser" runs on: configured as the passkeys' origin (and trusted, as an application's
/// page must be to send cookies with its requests).
const ORIGIN: &str = "http://localhost:3000";
const CEREMONY_COOKIE: &str = "service-auth.better-auth-passkey";

pub(super) fn with_passkeys(c: &mut service_auth::config::Config) {
    c.passkeys.rp_id = Some("localhost".into());
    c.passkeys.origins = vec![ORIGIN.into()];
    c.trusted_origins = vec![ORIGIN.into()];
}

async fn server() -> TestServer {
    TestServer::start_adjusted(with_passkeys).await
}

/// A browser with one authenticator: what `passkeyClient()` does with `@simplewebauthn/browser`.
pub(super) struct Browser {
    authenticator: SoftPasskey,
    origin: Url,
}

impl Browser {
    pub(super) fn new() -> Self {
        Self { authenticator: SoftPasskey::new(true), origin: Url::parse(ORIGIN).unwrap() }
    }

    /// Runs the authenticator on registration options; the response as the client posts it.
    fn create(&mut self, options: &Value) -> Value {
        let ccr: CreationChallengeResponse = serde_json::from_value(json!({"publicKey": options})).unwrap();
        let credential =
            self.authenticator.do_registration(self.origin.clone(), ccr).expect("the authenticator registers");
        serde_json::to_value(credential).unwrap()
    }

    /// Runs the authenticator on sign-in options. A discoverable credential is one the authenticator finds by the
    /// relying party alone; the software authenticator needs its id, so the test names the one it holds
    /// (`credential`): the options the server sent are otherwise unchanged, and so is what it must verify.
    fn get(&mut self, options: &Value, credential: &str) -> Value {
        let mut options = options.clone();
        options["allowCredentials"] = json!([{"type": "public-key", "id": credential}]);
        let rcr: RequestChallengeResponse = serde_json::from_value(json!({"publicKey": options})).unwrap();
        let assertion =
            self.authenticator.do_authentication(self.origin.clone(), rcr).expect("the authenticator signs");
        serde_json::to_value(assertion).unwrap()
    }
}

/// The ceremony cookie an options answer set.
fn ceremony(r: &Resp) -> String {
    let cookie = r.set_cookies().into_iter().find(|c| c.name == CEREMONY_COOKIE).expect("a ceremony cookie");
    cookie.value
}

fn cookies(session: Option<&str>, ceremony: Option<&str>) -> String {
    let mut pairs = Vec::new();
    if let Some(s) = session {
        pairs.push(format!("service-auth.session_token={s}"));
    }
    if let Some(c) = ceremony {
        pairs.push(format!("{CEREMONY_COOKIE}={c}"));
    }
    pairs.join("; ")
}

async fn register_options(server: &TestServer, session: &str) -> Resp {
    server
        .client
        .get("/api/auth/passkey/generate-register-options")
        .header("cookie", &cookies(Some(session), None))
        .send()
        .await
}

async fn verify_registration(server: &TestServer, session: &str, ceremony: Option<&str>, body: &Value) -> Resp {
    server
        .client
        .post("/api/auth/passkey/verify-registration")
        .header("cookie", &cookies(Some(session), ceremony))
        .header("origin", ORIGIN)
        .json(body)
        .send()
        .await
}

async fn sign_in_options(server: &TestServer, session: Option<&str>) -> Resp {
    let req = server.client.get("/api/auth/passkey/generate-authenticate-options");
    match session {
        Some(s) => req.header("cookie", &cookies(Some(s), None)).send().await,
        None => req.send().await,
    }
}

async fn verify_sign_in(server: &TestServer, ceremony: Option<&str>, response: &Value) -> Resp {
    let mut req = server.client.post("/api/auth/passkey/verify-authentication").header("origin", ORIGIN);
    if ceremony.is_some() {
        req = req.header("cookie", &cookies(None, ceremony));
    }
    req.json(&json!({"response": response})).send().await
}

/// Registers a passkey for `session` and returns the answer (the passkey).
pub(super) async fn register(server: &TestServer, browser: &mut Browser, session: &str, name: Option<&str>) -> Value {
    let options = register_options(server, session).await;
    assert_eq!(options.status, 200, "{}", options.text);
    let response = browser.create(&options.json());
    let mut body = json!({"response": response});
    if let Some(name) = name {
        body["name"] = json!(name);
    }
    let r = verify_registration(server, session, Some(&ceremony(&options)), &body).await;
    assert_eq!(r.status, 200, "{}", r.text);
    r.json()
}

/// Signs in with a passkey alone: options without a session, the authenticator's assertion, the verification.
pub(super) async fn sign_in(server: &TestServer, browser: &mut Browser, credential: &str) -> Resp {
    let options = sign_in_options(server, None).await;
    assert_eq!(options.status, 200, "{}", options.text);
    let assertion = browser.get(&options.json(), credential);
    verify_sign_in(server, Some(&ceremony(&options)), &assertion).await
}

async fn list(server: &TestServer, session: &str) -> Vec<Value> {
    let r = server.client.get("/api/auth/passkey/list-user-passkeys").cookie(session).send().await;
    assert_eq!(r.status, 200, "{}", r.text);
    r.json().as_array().unwrap().clone()
}

async fn audit_actions(server: &TestServer) -> Vec<(String, String)> {
    let admin = server.client.admin_session().await;
    let r = server.client.get("/api/admin/audit?limit=200").cookie(&admin).send().await;
    assert_eq!(r.status, 200, "{}", r.text);
    r.json()["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (str_of(&e["action"]).to_owned(), str_of(&e["detail"]).to_owned()))
        .collect()
}

#[tokio::test]
async fn register_list_rename_sign_in_with_the_passkey_alone_and_delete() {
    let server = server().await;
    let alice = server.client.new_user("passkey-alice").await;
    let mut browser = Browser::new();

    let options = register_options(&server, &alice.cookie).await;
    assert_eq!(options.status, 200, "{}", options.text);
    let o = options.json();
    assert_eq!(o["rp"]["id"], "localhost");
    assert_eq!(o["user"]["name"], alice.email.as_str());
    assert_eq!(o["authenticatorSelection"]["residentKey"], "preferred");
    assert_eq!(o["authenticatorSelection"]["userVerification"], "required");
    let cookie = options.set_cookies().into_iter().find(|c| c.name == CEREMONY_COOKIE).unwrap();
    assert!(cookie.attrs.contains_key("httponly"), "{cookie:?}");
    assert_eq!(cookie.attrs.get("max-age"), Some(&Some("300".to_owned())), "{cookie:?}");

    let response = browser.create(&o);
    let r = verify_registration(
        &server,
        &alice.cookie,
        Some(&ceremony(&options)),
        &json!({"response": response, "name": "Laptop"}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let passkey = r.json();
    assert_eq!(passkey["name"], "Laptop");
    assert_eq!(passkey["userId"], alice.id.as_str());
    assert_eq!(passkey["credentialID"], response["id"], "the credential id as the browser names it");
    for key in ["id", "publicKey", "deviceType", "transports", "createdAt", "aaguid"] {
        assert!(passkey[key].is_string(), "{key}: {passkey}");
    }
    assert!(passkey["counter"].is_u64() && passkey["backedUp"].is_boolean(), "{passkey}");
    let credential = str_of(&passkey["credentialID"]).to_owned();

    assert_eq!(list(&server, &alice.cookie).await, vec![passkey.clone()]);

    let r = server
        .client
        .post("/api/auth/passkey/update-passkey")
        .cookie(&alice.cookie)
        .json(&json!({"id": passkey["id"], "name": "  Work laptop "}))
        .send()
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json()["passkey"]["name"], "Work laptop");
    assert_eq!(list(&server, &alice.cookie).await[0]["name"], "Work laptop");

    // Signed out, the passkey alone opens a session.
    server.client.sign_out(Some(&alice.cookie)).await;
    let options = sign_in_options(&server, None).await;
    assert_eq!(options.status, 200, "{}", options.text);
    assert_eq!(options.json()["allowCredentials"], json!([]), "a discoverable sign-in names no credential");
    let assertion = browser.get(&options.json(), &credential);
    let r = verify_sign_in(&server, Some(&ceremony(&options)), &assertion).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let (_, body, session) = r.triple();
    assert_eq!(body["user"]["id"], alice.id.as_str());
    assert_eq!(body["session"]["userId"], alice.id.as_str());
    let session = session.expect("a session cookie");
    assert_eq!(server.client.session(&session).await["user"]["email"], alice.email.as_str());

    let r = server
        .client
        .post("/api/auth/passkey/delete-passkey")
        .cookie(&session)
        .json(&json!({"id": passkey["id"]}))
        .send()
        .await;
    assert_eq!((r.status, r.json()), (200, json!({"status": true})));
    assert!(list(&server, &session).await.is_empty());
    let r = sign_in(&server, &mut browser, &credential).await;
    assert_eq!((r.status, str_of(&r.json()["code"])), (401, "PASSKEY_NOT_FOUND"), "{}", r.text);

    let actions = audit_actions(&server).await;
    for (action, detail) in [
        ("passkey.registered", format!("passkey {}", str_of(&passkey["id"]))),
        ("passkey.renamed", format!("passkey {}", str_of(&passkey["id"]))),
        ("passkey.deleted", format!("passkey {}", str_of(&passkey["id"]))),
        ("sign_in.succeeded", "passkey".to_owned()),
    ] {
        assert!(actions.contains(&(action.to_owned(), detail.clone())), "no {action} {detail:?} in {actions:?}");
    }
    server.stop().await;
}

#[tokio::test]
async fn a_ceremony_is_single_use_bound_to_its_cookie_and_to_its_kind_and_account() {
    let server = server().await;
    let alice = server.client.new_user("ceremony-alice").await;
    let bob = server.client.new_user("ceremony-bob").await;
    let mut browser = Browser::new();

    let options = register_options(&server, &alice.cookie).await;
    let body = json!({"response": browser.create(&options.json())});
    let code = |r: &Resp| (r.status, str_of(&r.json()["code"]).to_owned());
    // Without the cookie, or with another account's session: refused, and the ceremony is spent either way.
    let r = verify_registration(&server, &alice.cookie, None, &body).await;
    assert_eq!(code(&r), (400, "CHALLENGE_NOT_FOUND".into()));
    let r = verify_registration(&server, &bob.cookie, Some(&ceremony(&options)), &body).await;
    assert_eq!(code(&r), (401, "YOU_ARE_NOT_ALLOWED_TO_REGISTER_THIS_PASSKEY".into()));
    let r = verify_registration(&server, &alice.cookie, Some(&ceremony(&options)), &body).await;
    assert_eq!(code(&r), (400, "CHALLENGE_NOT_FOUND".into()), "a ceremony is used once");
    assert!(list(&server, &alice.cookie).await.is_empty() && list(&server, &bob.cookie).await.is_empty());

    // Used once: the second verification of the same answer finds no ceremony.
    let passkey = register(&server, &mut browser, &alice.cookie, None).await;
    assert_eq!(passkey["name"], Value::Null);
    let credential = str_of(&passkey["credentialID"]).to_owned();
    let options = sign_in_options(&server, None).await;
    let assertion = browser.get(&options.json(), &credential);
    assert_eq!(verify_sign_in(&server, Some(&ceremony(&options)), &assertion).await.status, 200);
    let r = verify_sign_in(&server, Some(&ceremony(&options)), &assertion).await;
    assert_eq!(code(&r), (400, "CHALLENGE_NOT_FOUND".into()));
    let r = verify_sign_in(&server, None, &assertion).await;
    assert_eq!(code(&r), (400, "CHALLENGE_NOT_FOUND".into()));

    // A registration's ceremony is not a sign-in's, and the other way round.
    let options = register_options(&server, &alice.cookie).await;
    let r = verify_sign_in(&server, Some(&ceremony(&options)), &assertion).await;
    assert_eq!(code(&r), (400, "CHALLENGE_NOT_FOUND".into()));
    let options = sign_in_options(&server, None).await;
    let r = verify_registration(&server, &alice.cookie, Some(&ceremony(&options)), &body).await;
    assert_eq!(code(&r), (400, "CHALLENGE_NOT_FOUND".into()));

    // An assertion made for one challenge does not verify with another's cookie.
    let first = sign_in_options(&server, None).await;
    let second = sign_in_options(&server, None).await;
    let assertion = browser.get(&first.json(), &credential);
    let r = verify_sign_in(&server, Some(&ceremony(&second)), &assertion).await;
    assert_eq!(code(&r), (400, "AUTHENTICATION_FAILED".into()));
    server.stop().await;
}

#[tokio::test]
async fn registration_refusals() {
    let server = server().await;
    let alice = server.client.new_user("refusals-alice").await;
    let mut browser = Browser::new();
    let code = |r: &Resp| (r.status, str_of(&r.json()["code"]).to_owned());

    let r = server.client.get("/api/auth/passkey/generate-register-options").send().await;
    assert_eq!(code(&r), (401, "UNAUTHORIZED".into()));
    let r = server
        .client
        .get("/api/auth/passkey/generate-register-options?authenticatorAttachment=usb")
        .cookie(&alice.cookie)
        .send()
        .await;
    assert_eq!(code(&r), (400, "VALIDATION_ERROR".into()));
    let r = server.client.get("/api/auth/passkey/generate-register-options?nmae=x").cookie(&alice.cookie).send().await;
    assert_eq!(code(&r), (400, "VALIDATION_ERROR".into()));
    let r = server
        .client
        .get("/api/auth/passkey/generate-register-options?authenticatorAttachment=platform&name=alice%20at%20work")
        .cookie(&alice.cookie)
        .send()
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json()["authenticatorSelection"]["authenticatorAttachment"], "platform");
    assert_eq!(r.json()["user"]["name"], "alice at work");

    // No Origin header: refused as the plugin does.
    let options = register_options(&server, &alice.cookie).await;
    let body = json!({"response": browser.create(&options.json())});
    let r = server
        .client
        .post("/api/auth/passkey/verify-registration")
        .header("cookie", &cookies(Some(&alice.cookie), Some(&ceremony(&options))))
        .json(&body)
        .send()
        .await;
    assert_eq!(code(&r), (400, "FAILED_TO_VERIFY_REGISTRATION".into()));

    // Made on a page of another origin (the origin the authenticator signed is not configured).
    let options = register_options(&server, &alice.cookie).await;
    let mut elsewhere = Browser { origin: Url::parse("http://localhost:4000").unwrap(), ..Browser::new() };
    let body = json!({"response": elsewhere.create(&options.json())});
    let r = verify_registration(&server, &alice.cookie, Some(&ceremony(&options)), &body).await;
    assert_eq!(code(&r), (400, "FAILED_TO_VERIFY_REGISTRATION".into()));

    // A tampered answer, a missing one, an unknown field.
    let options = register_options(&server, &alice.cookie).await;
    let mut response = browser.create(&options.json());
    response["response"]["clientDataJSON"] = json!("e30");
    let r =
        verify_registration(&server, &alice.cookie, Some(&ceremony(&options)), &json!({"response": response})).await;
    assert_eq!(code(&r), (400, "FAILED_TO_VERIFY_REGISTRATION".into()));
    let r = verify_registration(&server, &alice.cookie, None, &json!({"name": "x"})).await;
    assert_eq!(code(&r), (400, "VALIDATION_ERROR".into()));
    let r = verify_registration(&server, &alice.cookie, None, &json!({"response": {}, "createSesion": true})).await;
    assert_eq!(code(&r), (400, "VALIDATION_ERROR".into()));
    assert!(list(&server, &alice.cookie).await.is_empty(), "nothing was registered");

    // An administrator impersonating the user may not add a way into the account.
    let admin = server.client.admin_session().await;
    let r = server
        .client
        .post("/api/auth/admin/impersonate-user")
        .cookie(&admin)
        .json(&json!({"userId": alice.id}))
        .send()
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let acting = r.session_cookie().unwrap().value;
    let r = register_options(&server, &acting).await;
    assert_eq!(code(&r), (403, "NOT_ALLOWED_WHILE_IMPERSONATING".into()));

    // With createSession, a second session is opened and its cookie set.
    let options = register_options(&server, &alice.cookie).await;
    let body = json!({"response": browser.create(&options.json()), "createSession": true});
    let r = verify_registration(&server, &alice.cookie, Some(&ceremony(&options)), &body).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let (_, answer, session) = r.triple();
    assert_eq!(answer["user"]["id"], alice.id.as_str());
    assert_eq!(answer["userId"], alice.id.as_str());
    let session = session.expect("the new session's cookie");
    assert_ne!(session, alice.cookie);
    assert_eq!(answer["session"]["token"], session.as_str());
    assert_eq!(server.client.session(&session).await["user"]["id"], alice.id.as_str());
    server.stop().await;
}

#[tokio::test]
async fn sign_in_refusals_and_a_signed_in_callers_options() {
    let server = server().await;
    let alice = server.client.new_user("signin-alice").await;
    let mut browser = Browser::new();
    let passkey = register(&server, &mut browser, &alice.cookie, Some("Key")).await;
    let credential = str_of(&passkey["credentialID"]).to_owned();
    let code = |r: &Resp| (r.status, str_of(&r.json()["code"]).to_owned());

    // Signed in, the options list the caller's passkeys, and the sign-in verifies against them.
    let options = sign_in_options(&server, Some(&alice.cookie)).await;
    assert_eq!(options.json()["allowCredentials"][0]["id"], credential.as_str());
    let assertion = browser.get(&options.json(), &credential);
    assert_eq!(verify_sign_in(&server, Some(&ceremony(&options)), &assertion).await.status, 200);

    // No Origin header.
    let options = sign_in_options(&server, None).await;
    let assertion = browser.get(&options.json(), &credential);
    let r = server
        .client
        .post("/api/auth/passkey/verify-authentication")
        .header("cookie", &cookies(None, Some(&ceremony(&options))))
        .json(&json!({"response": assertion}))
        .send()
        .await;
    assert_eq!(code(&r), (400, "ORIGIN_MISSING".into()));

    // A credential nobody registered.
    let mut stranger = Browser::new();
    let options = register_options(&server, &alice.cookie).await;
    stranger.create(&options.json());
    let options = sign_in_options(&server, None).await;
    let mut assertion = browser.get(&options.json(), &credential);
    assertion["id"] = json!("AAAA");
    assertion["rawId"] = json!("AAAA");
    let r = verify_sign_in(&server, Some(&ceremony(&options)), &assertion).await;
    assert_eq!(code(&r), (401, "PASSKEY_NOT_FOUND".into()));

    // A banned account's passkey opens nothing, and the refusal is audited.
    let admin = server.client.admin_session().await;
    server.client.patch_ok(&admin, &json!({"userId": alice.id, "banned": true})).await;
    let r = sign_in(&server, &mut browser, &credential).await;
    assert_eq!(code(&r), (403, "BANNED_USER".into()));
    assert!(r.session_cookie().is_none_or(|c| c.value.is_empty()));
    server.client.patch_ok(&admin, &json!({"userId": alice.id, "banned": false})).await;
    assert_eq!(sign_in(&server, &mut browser, &credential).await.status, 200);
    let actions = audit_actions(&server).await;
    assert!(actions.contains(&("sign_in.refused".into(), "account is banned; passkey".into())), "{actions:?}");
    server.stop().await;
}

/// A failed assertion spends from the account's one failure budget (the password's and the codes'): after the
/// budget, even a right assertion waits for the window, the password with it; each failure is audited as a
/// sign-in's.
#[tokio::test]
async fn failed_assertions_spend_the_accounts_failure_budget() {
    let server = TestServer::start_adjusted(|c| {
        with_passkeys(c);
        c.rate_limit.failures_per_account = 3;
    })
    .await;
    let alice = server.client.new_user("assert-budget").await;
    let mut browser = Browser::new();
    let passkey = register(&server, &mut browser, &alice.cookie, None).await;
    let credential = str_of(&passkey["credentialID"]).to_owned();
    let code = |r: &Resp| (r.status, str_of(&r.json()["code"]).to_owned());
    for n in 0..3 {
        let options = sign_in_options(&server, None).await;
        let mut assertion = browser.get(&options.json(), &credential);
        // Another signature: what a stolen credential id without its private key sends.
        let signature = str_of(&assertion["response"]["signature"]).to_owned();
        let flipped = if signature.starts_with('A') { "B" } else { "A" };
        assertion["response"]["signature"] = json!(format!("{flipped}{}", &signature[1..]));
        let r = verify_sign_in(&server, Some(&ceremony(&options)), &assertion).await;
        assert_eq!(code(&r), (400, "AUTHENTICATION_FAILED".into()), "failure {n}");
    }
    let r = sign_in(&server, &mut browser, &credential).await;
    assert_eq!(code(&r), (429, "TOO_MANY_REQUESTS".into()), "{}", r.text);
    assert!(r.header("retry-after").is_some());
    assert_eq!(server.client.sign_in(&alice.email, PASSWORD).await.0, 429, "one budget: the password waits too");
    let actions = audit_actions(&server).await;
    let failed = ("sign_in.failed".to_owned(), "wrong second factor (a code or a passkey assertion)".to_owned());
    assert!(actions.contains(&failed), "{actions:?}");
    assert!(actions.iter().any(|(a, _)| a == "sign_in.refused"), "{actions:?}");
    server.stop().await;
}

#[tokio::test]
async fn only_the_owner_renames_or_deletes_a_passkey() {
    let server = server().await;
    let alice = server.client.new_user("owner-alice").await;
    let bob = server.client.new_user("owner-bob").await;
    let mut browser = Browser::new();
    let passkey = register(&server, &mut browser, &alice.cookie, Some("Mine")).await;
    let code = |r: &Resp| (r.status, str_of(&r.json()["code"]).to_owned());
    let post =
        |path: &str, cookie: Option<&str>, body: Value| server.client.post(path).cookie_opt(cookie).json(&body).send();

    let r = post("/api/auth/passkey/update-passkey", Some(&bob.cookie), json!({"id": passkey["id"], "name": "Taken"}))
        .await;
    assert_eq!(code(&r), (404, "PASSKEY_NOT_FOUND".into()));
    let r = post("/api/auth/passkey/delete-passkey", Some(&bob.cookie), json!({"id": passkey["id"]})).await;
    assert_eq!(code(&r), (404, "PASSKEY_NOT_FOUND".into()));
    let r = post("/api/auth/passkey/delete-passkey", Some(&alice.cookie), json!({"id": "not-an-id"})).await;
    assert_eq!(code(&r), (404, "PASSKEY_NOT_FOUND".into()));
    let r = post("/api/auth/passkey/update-passkey", Some(&alice.cookie), json!({"id": passkey["id"], "name": "   "}))
        .await;
    assert_eq!(code(&r), (400, "VALIDATION_ERROR".into()));
    let r = post("/api/auth/passkey/update-passkey", Some(&alice.cookie), json!({"id": passkey["id"]})).await;
    assert_eq!(code(&r), (400, "VALIDATION_ERROR".into()));
    let r = post("/api/auth/passkey/delete-passkey", None, json!({"id": passkey["id"]})).await;
    assert_eq!(code(&r), (401, "UNAUTHORIZED".into()));
    let r = server.client.get("/api/auth/passkey/list-user-passkeys").send().await;
    assert_eq!(code(&r), (401, "UNAUTHORIZED".into()));
    assert_eq!(list(&server, &alice.cookie).await, vec![passkey], "unchanged");
    assert!(list(&server, &bob.cookie).await.is_empty());
    server.stop().await;
}

#[tokio::test]
async fn an_accounts_passkeys_go_with_the_account() {
    let server = server().await;
    let alice = server.client.new_user("gone-alice").await;
    let mut browser = Browser::new();
    let passkey = register(&server, &mut browser, &alice.cookie, None).await;
    let credential = str_of(&passkey["credentialID"]).to_owned();
    let r = server
        .client
        .post("/api/auth/delete-user")
        .cookie(&alice.cookie)
        .json(&json!({"password": PASSWORD}))
        .send()
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let r = sign_in(&server, &mut browser, &credential).await;
    assert_eq!((r.status, str_of(&r.json()["code"])), (401, "PASSKEY_NOT_FOUND"), "{}", r.text);
    server.stop().await;
}

#[tokio::test]
async fn administrators_see_an_accounts_passkeys() {
    let server = server().await;
    let alice = server.client.new_user("admin-view-alice").await;
    let mut browser = Browser::new();
    let passkey = register(&server, &mut browser, &alice.cookie, Some("Phone")).await;
    let admin = server.client.admin_session().await;
    let path = format!("/api/admin/users/{}/passkeys", alice.id);
    let r = server.client.get(&path).cookie(&admin).send().await;
    assert_eq!(r.status, 200, "{}", r.text);
    let listed = r.json()["passkeys"].clone();
    assert_eq!(listed.as_array().unwrap().len(), 1);
    assert_eq!((&listed[0]["id"], &listed[0]["name"]), (&passkey["id"], &json!("Phone")));
    assert!(listed[0].get("publicKey").is_none() && listed[0]["created_at"].is_string(), "{listed}");
    let status = |r: &Resp| (r.status, r.json().get("error").is_some());
    assert_eq!(status(&server.client.get(&path).cookie(&alice.cookie).send().await), (403, true));
    assert_eq!(status(&server.client.get(&path).send().await), (401, true));
    let unknown = format!("/api/admin/users/{}/passkeys", uuid::Uuid::now_v7());
    assert_eq!(status(&server.client.get(&unknown).cookie(&admin).send().await), (404, true));
    let r = server.client.get("/api/admin/users/nope/passkeys").cookie(&admin).send().await;
    assert_eq!(status(&r), (400, true));
    server.stop().await;
}

/// `migrate-store` brings the passkeys along (no node holds them in memory, so the start-up load it copies leaves
/// them out): a passkey registered on a data directory signs in on two nodes over PostgreSQL after the move.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrate_store_moves_the_passkeys() {
    let pg = tokio::task::spawn_blocking(cluster::Postgres::start).await.unwrap();
    let (source, target) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let config = |dir: &std::path::Path| {
        let mut c = test_config(dir);
        with_passkeys(&mut c);
        c
    };
    let s = TestServer::start_with_faults(config(&source.path().join("data")), Default::default()).await;
    let alice = s.client.new_user("moved-alice").await;
    let mut browser = Browser::new();
    let passkey = register(&s, &mut browser, &alice.cookie, Some("Key")).await;
    s.stop().await;

    let url = cluster::database_for(&pg.url(), target.path()).await;
    let (status, _, err) = run_binary(source.path(), &["migrate-store", "--to", "postgres", "--url", &url], &[], "");
    assert!(status.success() && err.contains(", 1 passkeys and"), "{err}");
    let c = TestServer::start_cluster(config(target.path()), &pg.url()).await;
    let r = sign_in(&c, &mut browser, str_of(&passkey["credentialID"])).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(list(&c, &alice.cookie).await[0]["name"], "Key");
    c.stop().await;
}

/// `[two_factor] required_for_roles`: a passkey is a second factor. An administrator without one may register a
/// passkey (as they may enrol an authenticator) and then reaches everything; without it again (deleted), nothing
/// but enrolment. The status page counts administrators with neither.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_administrator_with_only_a_passkey_meets_the_second_factor_policy() {
    let server = TestServer::start_adjusted(|c| {
        with_passkeys(c);
        c.two_factor.required_for_roles = vec!["admin".into()];
    })
    .await;
    let admin = server.client.admin_session().await;
    let status = |cookie: String| {
        let server = &server;
        async move { server.client.get("/api/admin/status").cookie(&cookie).send().await }
    };
    let r = server.client.list_users(Some(&admin)).await;
    assert_eq!(r.status, 403, "no second factor yet: {}", r.text);
    assert_eq!(status(admin.clone()).await.status, 403);

    let mut browser = Browser::new();
    let passkey = register(&server, &mut browser, &admin, Some("Admin key")).await;
    let r = server.client.list_users(Some(&admin)).await;
    assert_eq!(r.status, 200, "a passkey is a second factor: {}", r.text);
    let r = server.client.get("/api/auth/admin/list-users").cookie(&admin).send().await;
    assert_eq!(r.status, 200, "{}", r.text);
    let r = status(admin.clone()).await;
    assert_eq!(r.json()["administrators_without_second_factor"], 0, "{}", r.text);
    // The user object's twoFactorEnabled stays better-auth's: the twoFactor plugin's authenticator.
    assert_eq!(server.client.session(&admin).await["user"]["twoFactorEnabled"], false);
    // The password is one factor: with the passkey as the second, the account signs in with the passkey.
    let (status, body, cookie) = server.client.sign_in(ADMIN_EMAIL, ADMIN_PASSWORD).await;
    assert_eq!((status, str_of(&body["code"]), cookie), (403, "PASSKEY_REQUIRED", None), "{body}");
    let r = sign_in(&server, &mut browser, str_of(&passkey["credentialID"])).await;
    assert_eq!(r.status, 200, "{}", r.text);

    let r = server
        .client
        .post("/api/auth/passkey/delete-passkey")
        .cookie(&admin)
        .json(&json!({"id": passkey["id"]}))
        .send()
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let r = server.client.list_users(Some(&admin)).await;
    assert_eq!(r.status, 403, "checked against the store on every request: {}", r.text);
    let (status, body, _) = server.client.sign_in(ADMIN_EMAIL, ADMIN_PASSWORD).await;
    assert_eq!(status, 200, "without the passkey, the password opens a session that can only enrol: {body}");
    server.stop().await;
}

/// A ceremony older than its lifetime is refused as an unknown one (400 `CHALLENGE_NOT_FOUND`), registration and
/// sign-in alike. The lifetime (five minutes) is shortened to one second for the test.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ceremony_older_than_its_lifetime_is_refused() {
    let server = TestServer::start_adjusted(|c| {
        with_passkeys(c);
        c.passkeys.ceremony_lifetime = Some(std::time::Duration::from_secs(1));
    })
    .await;
    let alice = server.client.new_user("passkey-expiry").await;
    let mut browser = Browser::new();

    let options = register_options(&server, &alice.cookie).await;
    assert_eq!(options.status, 200, "{}", options.text);
    let response = browser.create(&options.json());
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    let r =
        verify_registration(&server, &alice.cookie, Some(&ceremony(&options)), &json!({"response": response})).await;
    assert_eq!((r.status, str_of(&r.json()["code"])), (400, "CHALLENGE_NOT_FOUND"), "{}", r.text);

    // A fresh ceremony in time registers; its sign-in ceremony, left to expire, is refused.
    let passkey = register(&server, &mut browser, &alice.cookie, None).await;
    let credential = str_of(&passkey["credentialID"]).to_owned();
    let options = sign_in_options(&server, None).await;
    let assertion = browser.get(&options.json(), &credential);
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    let r = verify_sign_in(&server, Some(&ceremony(&options)), &assertion).await;
    assert_eq!((r.status, str_of(&r.json()["code"])), (400, "CHALLENGE_NOT_FOUND"), "{}", r.text);
    let r = sign_in(&server, &mut browser, &credential).await;
    assert_eq!(r.status, 200, "in time, the same passkey signs in: {}", r.text);
    server.stop().await;
}

/// What `@simplewebauthn/server` (under `@better-auth/passkey`) takes from a registration's attestation object:
/// the credential id and the COSE public key's exact bytes, from the attested credential data of the
/// authenticator data (rpIdHash 32, flags 1, counter 4, AAGUID 16, id length 2, id, COSE key).
fn attested(attestation_object: &[u8]) -> (Vec<u8>, Vec<u8>) {
    use serde_cbor_2::Value;
    let Value::Map(object) = serde_cbor_2::from_slice::<Value>(attestation_object).unwrap() else { panic!() };
    let Some(Value::Bytes(data)) = object.get(&Value::Text("authData".into())) else { panic!("no authData") };
    let id_len = usize::from(u16::from_be_bytes([data[53], data[54]]));
    let id = data[55..55 + id_len].to_vec();
    let rest = &data[55 + id_len..];
    let mut reader = serde_cbor_2::Deserializer::from_slice(rest);
    let _: Value = serde::Deserialize::deserialize(&mut reader).unwrap();
    (id, rest[..reader.byte_offset()].to_vec())
}

/// A passkey registered with better-auth (the row `@better-auth/passkey` 1.7 writes, made from the software
/// authenticator's registration) comes over with `import-better-auth`, and its owner signs in here with the same
/// authenticator: the credential, its key and its counter are the ones better-auth kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_passkey_imported_from_better_auth_signs_in_here() {
    use base64::Engine;
    use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
    let root = tempfile::tempdir().unwrap();
    let mut browser = Browser::new();
    // The registration the browser made on better-auth's page (same relying party): the options as the plugin
    // sends them; better-auth checked the challenge, the import takes what it stored.
    let options = json!({
        "rp": {"id": "localhost", "name": "better-auth"},
        "user": {"id": URL_SAFE_NO_PAD.encode(b"ba-user-pk"), "name": "moved@example.com", "displayName": "Moved"},
        "challenge": URL_SAFE_NO_PAD.encode([7u8; 32]),
        "pubKeyCredParams": [{"type": "public-key", "alg": -7}, {"type": "public-key", "alg": -257}],
        "timeout": 60000,
        "authenticatorSelection":
            {"residentKey": "preferred", "requireResidentKey": false, "userVerification": "preferred"},
        "attestation": "none"
    });
    let response = browser.create(&options);
    let object = URL_SAFE_NO_PAD.decode(str_of(&response["response"]["attestationObject"])).unwrap();
    let (credential_id, public_key) = attested(&object);
    let credential = URL_SAFE_NO_PAD.encode(&credential_id);
    assert_eq!(credential, str_of(&response["id"]), "the id the browser names is the attested one");

    let db = rusqlite::Connection::open(root.path().join("ba.db")).unwrap();
    db.execute_batch(
        r#"CREATE TABLE "user" ("id" text PRIMARY KEY, "name" text, "email" text, "emailVerified" integer,
             "image" text, "createdAt" date, "updatedAt" date, "role" text, "banned" integer, "banReason" text,
             "banExpires" date);
           CREATE TABLE "account" ("id" text PRIMARY KEY, "accountId" text, "providerId" text, "userId" text,
             "password" text, "createdAt" date, "updatedAt" date);
           CREATE TABLE "passkey" ("id" text NOT NULL PRIMARY KEY, "name" text, "publicKey" text NOT NULL,
             "userId" text NOT NULL REFERENCES "user" ("id"), "credentialID" text NOT NULL, "counter" integer NOT NULL,
             "deviceType" text NOT NULL, "backedUp" integer NOT NULL, "transports" text, "createdAt" date,
             "aaguid" text);
           INSERT INTO "user" VALUES ('ba-user-pk', 'Moved', 'moved@example.com', 1, NULL,
             '2025-05-01T10:00:00.000Z', '2025-05-01T10:00:00.000Z', 'user', 0, NULL, NULL);"#,
    )
    .unwrap();
    db.execute(
        r#"INSERT INTO "passkey" VALUES ('ba-passkey-1', 'Old laptop', ?1, 'ba-user-pk', ?2, 0, 'singleDevice', 0,
           'internal', '2025-06-01T10:00:00.000Z', '00000000-0000-0000-0000-000000000000')"#,
        rusqlite::params![STANDARD.encode(&public_key), credential],
    )
    .unwrap();
    drop(db);
    let (status, out, err) = run_binary(root.path(), &["import-better-auth", "--sqlite", "ba.db"], &[], "");
    assert!(status.success(), "import: {out}{err}");
    assert!(format!("{out}{err}").contains("1 passkey(s) imported"), "{out}{err}");
    // The same credential twice is refused: nothing is written.
    let (status, out, err) = run_binary(root.path(), &["import-better-auth", "--sqlite", "ba.db"], &[], "");
    assert!(!status.success(), "a second import: {out}{err}");

    let mut config = test_config(&root.path().join("data"));
    with_passkeys(&mut config);
    let server = TestServer::start_embedded(config).await;
    let r = sign_in(&server, &mut browser, &credential).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let (_, body, session) = r.triple();
    assert_eq!(body["user"]["email"], "moved@example.com");
    let listed = list(&server, &session.unwrap()).await;
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!((str_of(&listed[0]["name"]), str_of(&listed[0]["credentialID"])), ("Old laptop", credential.as_str()));
    assert_eq!(str_of(&listed[0]["publicKey"]), STANDARD.encode(&public_key));
    assert_eq!(listed[0]["createdAt"], "2025-06-01T10:00:00.000Z");
    // Its counter moved on from the imported one: the next sign-in with the same authenticator works too.
    assert_eq!(sign_in(&server, &mut browser, &credential).await.status, 200);
    server.stop().await;
}
