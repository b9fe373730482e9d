//! SAML 2.0 single sign-on per organization, end to end against a real identity provider: samlify (npm) started by
//! each test (tests/saml/idp.mjs), which reads the service's SP metadata, parses the AuthnRequest the service sent
//! by the HTTP-Redirect binding, and signs the response (xml-crypto) that the test posts to the ACS by the
//! HTTP-POST binding, as the IdP's page makes a browser do. Nothing is mocked: the signatures are the IdP's. The
//! refusals bend the IdP's response as an attacker (or a misconfigured IdP) would.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use serde_json::{Value, json};

use super::harness::*;
use super::org_plugin::ok;

/// A running samlify identity provider: its entity ID, SSO URL and signing certificate (and another, untrusted).
struct SamlIdp {
    entity_id: String,
    sso: String,
    cert: String,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: BufReader<ChildStdout>,
}

impl SamlIdp {
    fn start() -> Self {
        let dir = node_packages("saml", "samlify");
        let mut child = Command::new("node")
            .arg(dir.join("idp.mjs"))
            .current_dir(&dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("node tests/saml/idp.mjs");
        let stdin = child.stdin.take();
        let mut lines = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        lines.read_line(&mut line).expect("the IdP's first line");
        let first: Value = serde_json::from_str(&line).expect("the IdP's first line is JSON");
        Self {
            entity_id: first["entityID"].as_str().unwrap().to_owned(),
            sso: first["sso"].as_str().unwrap().to_owned(),
            cert: first["cert"].as_str().unwrap().to_owned(),
            child,
            stdin,
            lines,
        }
    }

    /// The IdP's answer to the AuthnRequest in `url` (the redirect the service gave), for `email`, bent as
    /// `variant` says: `{SAMLResponse, RelayState, acs, requestId}`.
    fn login(&mut self, sp_metadata: &str, url: &str, email: &str, variant: Value) -> Value {
        let stdin = self.stdin.as_mut().unwrap();
        let line = json!({"sp": sp_metadata, "login": url, "email": email, "name": "Ann Example", "variant": variant});
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
        let mut answer = String::new();
        self.lines.read_line(&mut answer).expect("the IdP's answer");
        let answer: Value = serde_json::from_str(&answer).expect("the IdP's answer is JSON");
        assert!(answer.get("error").is_none(), "the IdP failed: {}", answer["error"]);
        answer
    }
}

impl Drop for SamlIdp {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const PROVIDER: &str = "acme-saml";

struct Setup {
    s: TestServer,
    idp: SamlIdp,
    owner: TestUser,
    org: String,
    metadata: String,
}

fn flow_cookie_name() -> String {
    COOKIE.replace(".session_token", ".saml_flow")
}

fn registration(s: &TestServer, idp: &SamlIdp, org: &str) -> Value {
    json!({
        "providerId": PROVIDER,
        "issuer": format!("http://{}/api/auth/sso/saml2/sp/metadata?providerId={PROVIDER}", s.addr),
        "domain": "acme.test",
        "organizationId": org,
        "samlConfig": {
            "entryPoint": idp.sso,
            "cert": idp.cert,
            "idpMetadata": {"entityID": idp.entity_id},
            "wantAssertionsSigned": true,
            "callbackUrl": "/welcome",
        },
    })
}

async fn setup() -> Setup {
    setup_adjusted(|_| {}).await
}

/// [`setup`], the server's configuration adjusted by `extra`.
async fn setup_adjusted(extra: impl FnOnce(&mut service_auth::config::Config)) -> Setup {
    let idp = SamlIdp::start();
    let s = TestServer::start_adjusted(extra).await;
    let owner = s.new_user("owner").await;
    let created = s.post("/api/auth/organization/create").cookie(&owner.cookie);
    let org =
        ok(&created.json(&json!({"name": "Acme", "slug": "acme"})).send().await)["id"].as_str().unwrap().to_owned();
    let registered = s.post("/api/auth/sso/register").cookie(&owner.cookie).json(&registration(&s, &idp, &org));
    ok(&registered.send().await);
    let admin = s.admin_session().await;
    confirm_domain(&s, &admin).await;
    let metadata = s.get(&format!("/api/auth/sso/saml2/sp/metadata?providerId={PROVIDER}")).send().await;
    assert_eq!(metadata.status, 200, "{}", metadata.text);
    Setup { s, idp, owner, org, metadata: metadata.text }
}

/// A service administrator's confirmation of the provider's domains (a sign-in through it needs them proven).
async fn confirm_domain(s: &TestServer, admin: &str) {
    let confirmed = s.post(&format!("/api/admin/sso/providers/{PROVIDER}/verify-domain")).cookie(admin).send().await;
    assert_eq!(confirmed.status, 200, "{}", confirmed.text);
}

/// A sign-in started in a browser: the IdP URL the service sent it to, and the cookie binding the request to it.
struct Started {
    url: String,
    browser: String,
}

async fn start(s: &TestServer) -> Started {
    let body = json!({"providerId": PROVIDER, "callbackURL": "/dashboard", "errorCallbackURL": "/sso-error"});
    let r = s.post("/api/auth/sign-in/sso").json(&body).send().await;
    let answer = ok(&r);
    assert_eq!(answer["redirect"], true);
    let url = answer["url"].as_str().unwrap().to_owned();
    assert_eq!(r.header("location").as_deref(), Some(url.as_str()));
    let cookie = r.set_cookies().into_iter().find(|c| c.name == flow_cookie_name()).expect("the SAML flow cookie");
    assert!(cookie.attrs.contains_key("httponly"), "{cookie:?}");
    assert_eq!(cookie.attr("samesite"), Some("None"), "the IdP's POST is cross-site: {cookie:?}");
    Started { url, browser: format!("{}={}", flow_cookie_name(), cookie.value) }
}

/// Posts the IdP's answer to the ACS as the IdP's page makes the browser do, with the browser's cookies.
async fn post_acs(s: &TestServer, answer: &Value, cookies: Option<&str>) -> Resp {
    let mut form = url::form_urlencoded::Serializer::new(String::new());
    form.append_pair("SAMLResponse", answer["SAMLResponse"].as_str().unwrap());
    if let Some(relay) = answer["RelayState"].as_str() {
        form.append_pair("RelayState", relay);
    }
    let mut post = s
        .post(&format!("/api/auth/sso/saml2/sp/acs/{PROVIDER}"))
        .header("origin", "https://idp.saml.test")
        .header("sec-fetch-site", "cross-site");
    if let Some(cookies) = cookies {
        post = post.header("cookie", cookies);
    }
    post.raw(Some("application/x-www-form-urlencoded"), form.finish()).send().await
}

/// Signs `email` in through the IdP in a fresh browser: the ACS's answer.
async fn sign_in(t: &mut Setup, email: &str, variant: Value) -> Resp {
    let started = start(&t.s).await;
    let answer = t.idp.login(&t.metadata, &started.url, email, variant);
    post_acs(&t.s, &answer, Some(&started.browser)).await
}

/// The ACS redirected to the flow's error URL with `error` (and, when given, `error_description`), no session.
fn assert_redirected_error(r: &Resp, error: &str, description: Option<&str>) {
    assert_eq!(r.status, 302, "{}", r.text);
    let location = r.header("location").unwrap();
    let url = url::Url::parse(&format!("http://x{location}")).unwrap();
    assert_eq!(url.path(), "/sso-error", "{location}");
    let query: HashMap<String, String> = url.query_pairs().into_owned().collect();
    assert_eq!(query.get("error").map(String::as_str), Some(error), "{location}");
    if let Some(description) = description {
        assert_eq!(query.get("error_description").map(String::as_str), Some(description), "{location}");
    }
    assert!(r.session_cookie().is_none_or(|c| c.value.is_empty()), "a refusal set a session");
}

fn minutes_from_now(minutes: i64) -> String {
    let t = chrono::Utc::now() + chrono::Duration::minutes(minutes);
    t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

async fn members(t: &Setup) -> Vec<Value> {
    let path = format!("/api/auth/organization/list-members?organizationId={}", t.org);
    ok(&t.s.get(&path).cookie(&t.owner.cookie).send().await)["members"].as_array().unwrap().clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_signs_in_through_the_idp_and_joins_the_organization_once() {
    let mut t = setup().await;
    // The SP metadata the IdP was configured from.
    let acs = format!("http://{}/api/auth/sso/saml2/sp/acs/{PROVIDER}", t.s.addr);
    assert!(t.metadata.contains(&format!("Location=\"{acs}\"")), "{}", t.metadata);
    assert!(t.metadata.contains("WantAssertionsSigned=\"true\""), "{}", t.metadata);
    assert!(
        t.metadata.contains(
            &format!("entityID=\"http://{}/api/auth/sso/saml2/sp/metadata?providerId={PROVIDER}\"", t.s.addr)
                .replace('&', "&amp;")
        )
    );

    let started = start(&t.s).await;
    assert!(started.url.starts_with(&format!("{}?SAMLRequest=", t.idp.sso)), "{}", started.url);
    let answer = t.idp.login(&t.metadata, &started.url, "ann@acme.test", json!({}));
    assert_eq!(answer["acs"], acs.as_str());
    let r = post_acs(&t.s, &answer, Some(&started.browser)).await;
    assert_eq!(r.status, 302, "{}", r.text);
    assert_eq!(r.header("location").as_deref(), Some("/dashboard"));
    let cookie = r.session_cookie().expect("a session").value;
    let session = t.s.session(&cookie).await;
    assert_eq!(session["user"]["email"], "ann@acme.test");
    assert_eq!(session["user"]["name"], "Ann Example");
    // The flow's cookie is spent with it.
    let flow = r.set_cookies().into_iter().find(|c| c.name == flow_cookie_name()).expect("the flow cookie cleared");
    assert_eq!(flow.attr("max-age"), Some("0"));

    let ann: Vec<Value> = members(&t).await.into_iter().filter(|m| m["user"]["email"] == "ann@acme.test").collect();
    assert_eq!(ann.len(), 1, "{ann:?}");
    assert_eq!(ann[0]["role"], "member");

    // A second sign-in is the same account, and no second membership.
    let again = sign_in(&mut t, "ann@acme.test", json!({})).await;
    assert_eq!(again.status, 302, "{}", again.text);
    let second = t.s.session(&again.session_cookie().unwrap().value).await;
    assert_eq!(second["user"]["id"], session["user"]["id"]);
    assert_eq!(members(&t).await.iter().filter(|m| m["user"]["email"] == "ann@acme.test").count(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_misdirected_and_expired_responses_are_refused() {
    let mut t = setup().await;
    let refused = |r: &Resp, code: &str| {
        assert_auth_error(r, 400, code);
        assert!(r.session_cookie().is_none_or(|c| c.value.is_empty()));
    };
    // Not signed at all; signed with a key the provider was not registered with.
    refused(&sign_in(&mut t, "ann@acme.test", json!({"sign": "none"})).await, "SAML_SIGNATURE_INVALID");
    refused(&sign_in(&mut t, "ann@acme.test", json!({"key": "other"})).await, "SAML_SIGNATURE_INVALID");
    refused(&sign_in(&mut t, "ann@acme.test", json!({"key": "other", "sign": "both"})).await, "SAML_SIGNATURE_INVALID");
    // Signature wrapping: the signed assertion kept, an unsigned one for another address put first.
    refused(&sign_in(&mut t, "ann@acme.test", json!({"wrap": "mallory@acme.test"})).await, "SAML_MULTIPLE_ASSERTIONS");
    // Only the response is signed, and the provider wants the assertion itself signed.
    let r = sign_in(&mut t, "ann@acme.test", json!({"sign": "response"})).await;
    assert_redirected_error(&r, "invalid_saml_response", Some("SAML_ASSERTION_SIGNATURE_REQUIRED"));

    // Signed by the IdP, but not for us, not here, or not now.
    let bent = [
        (json!({"Audience": "https://another-sp.test/metadata"}), "SAML_AUDIENCE_MISMATCH"),
        (json!({"SubjectRecipient": "https://another-sp.test/acs"}), "SAML_RECIPIENT_MISMATCH"),
        (json!({"Destination": "https://another-sp.test/acs"}), "SAML_DESTINATION_MISMATCH"),
        (json!({"Issuer": "https://another-idp.test/metadata"}), "SAML_ISSUER_MISMATCH"),
        (
            json!({"ConditionsNotBefore": minutes_from_now(-20), "ConditionsNotOnOrAfter": minutes_from_now(-5)}),
            "SAML_ASSERTION_EXPIRED",
        ),
        (json!({"ConditionsNotBefore": minutes_from_now(5)}), "SAML_ASSERTION_EXPIRED"),
        // The bearer confirmation expired while the conditions still hold: the plugin lets this one in.
        (json!({"SubjectConfirmationDataNotOnOrAfter": minutes_from_now(-5)}), "SAML_BEARER_CONFIRMATION_EXPIRED"),
    ];
    for (variant, code) in bent {
        let r = sign_in(&mut t, "ann@acme.test", variant.clone()).await;
        assert_redirected_error(&r, "invalid_saml_response", Some(code));
    }
    // Within the two minutes' skew, it is accepted.
    let r = sign_in(&mut t, "ann@acme.test", json!({"ConditionsNotBefore": minutes_from_now(1)})).await;
    assert_eq!(r.status, 302, "{}", r.text);
    assert_eq!(r.header("location").as_deref(), Some("/dashboard"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_document_with_a_doctype_is_refused_and_its_entity_never_fetched() {
    let mut t = setup().await;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let doctype =
        format!("<?xml version=\"1.0\"?><!DOCTYPE samlp:Response [<!ENTITY x SYSTEM \"http://127.0.0.1:{port}/x\">]>");
    let started = start(&t.s).await;
    let mut answer = t.idp.login(&t.metadata, &started.url, "ann@acme.test", json!({"doctype": doctype}));
    let r = post_acs(&t.s, &answer, Some(&started.browser)).await;
    assert_auth_error(&r, 400, "SAML_DTD_FORBIDDEN");
    // An internal entity (a billion laughs' first step) too.
    let xml = String::from_utf8(base64_decode(answer["SAMLResponse"].as_str().unwrap())).unwrap();
    let laughs = xml.replacen(
        &doctype,
        "<!DOCTYPE r [<!ENTITY a \"aaaaaaaaaa\"><!ENTITY b \"&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;\">]>",
        1,
    );
    answer["SAMLResponse"] = json!(base64_encode(laughs.as_bytes()));
    assert_auth_error(&post_acs(&t.s, &answer, Some(&started.browser)).await, 400, "SAML_DTD_FORBIDDEN");
    assert!(listener.accept().is_err(), "the server fetched the external entity");
    // The request is still pending: a refused document spends nothing, and the right response still signs in.
    let good = t.idp.login(&t.metadata, &started.url, "ann@acme.test", json!({}));
    let r = post_acs(&t.s, &good, Some(&started.browser)).await;
    assert_eq!(r.status, 302, "{}", r.text);
    // Garbage is a 400, never a 500.
    let garbage = [
        json!({"SAMLResponse": "%%%"}),
        json!({"SAMLResponse": base64_encode(b"<notxml")}),
        json!({"SAMLResponse": base64_encode(b"<a/>")}),
    ];
    for answer in garbage {
        let r = post_acs(&t.s, &answer, Some(&started.browser)).await;
        assert_eq!(r.status, 400, "{}", r.text);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_response_answers_one_request_of_one_browser_once() {
    let mut t = setup().await;
    // Replayed as it was: the request it answers is spent.
    let started = start(&t.s).await;
    let answer = t.idp.login(&t.metadata, &started.url, "ann@acme.test", json!({}));
    assert_eq!(post_acs(&t.s, &answer, Some(&started.browser)).await.status, 302);
    assert_auth_error(&post_acs(&t.s, &answer, Some(&started.browser)).await, 400, "SAML_UNKNOWN_REQUEST");

    // Browser A's request answered, posted from browser B (login CSRF, a session swap): refused, and A's request
    // is spent with it.
    let a = start(&t.s).await;
    let b = start(&t.s).await;
    let for_a = t.idp.login(&t.metadata, &a.url, "ann@acme.test", json!({}));
    assert_redirected_error(&post_acs(&t.s, &for_a, Some(&b.browser)).await, "state_mismatch", None);
    assert_auth_error(&post_acs(&t.s, &for_a, Some(&a.browser)).await, 400, "SAML_UNKNOWN_REQUEST");
    // No cookie at all.
    let c = start(&t.s).await;
    let for_c = t.idp.login(&t.metadata, &c.url, "ann@acme.test", json!({}));
    assert_redirected_error(&post_acs(&t.s, &for_c, None).await, "state_mismatch", None);

    // A response naming another browser's request (b's) in its InResponseTo, posted by the browser that asked
    // for d: it answers b's request, so b's browser is the only one it could sign in.
    let b_request = t.idp.login(&t.metadata, &b.url, "ann@acme.test", json!({}))["requestId"].clone();
    let d = start(&t.s).await;
    let answer = t.idp.login(&t.metadata, &d.url, "ann@acme.test", json!({"InResponseTo": b_request}));
    assert_redirected_error(&post_acs(&t.s, &answer, Some(&d.browser)).await, "state_mismatch", None);
    // A request never made; and none at all (IdP-initiated, not offered).
    let answer = t.idp.login(&t.metadata, &d.url, "ann@acme.test", json!({"InResponseTo": "_never-made"}));
    assert_auth_error(&post_acs(&t.s, &answer, Some(&d.browser)).await, 400, "SAML_UNKNOWN_REQUEST");
    let answer = t.idp.login(&t.metadata, &d.url, "ann@acme.test", json!({"InResponseTo": ""}));
    assert_auth_error(&post_acs(&t.s, &answer, Some(&d.browser)).await, 400, "SAML_UNSOLICITED_RESPONSE");

    // The same assertion (its ID) in a response to a new request of the right browser: a replay.
    let first = sign_in(&mut t, "ann@acme.test", json!({"AssertionID": "_assertion-once"})).await;
    assert_eq!(first.status, 302, "{}", first.text);
    assert_eq!(first.header("location").as_deref(), Some("/dashboard"));
    let replay = sign_in(&mut t, "ann@acme.test", json!({"AssertionID": "_assertion-once"})).await;
    assert_redirected_error(&replay, "replay_detected", None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_verified_domain_signs_in_joins_an_existing_account_and_bans_hold() {
    let mut t = setup().await;
    let admin = t.s.admin_session().await;
    let (status, body, _) = t.s.sign_up("Bob", "bob@acme.test", PASSWORD).await;
    assert_eq!(status, 200, "{body}");
    let bob = str_of(&body["user"]["id"]).to_owned();
    t.s.mark_verified(&admin, &bob).await;
    // The organization holds acme.test (confirmed in `setup`): its IdP's word joins Bob's account.
    let r = sign_in(&mut t, "bob@acme.test", json!({})).await;
    assert_eq!(r.status, 302, "{}", r.text);
    let session = t.s.session(&r.session_cookie().unwrap().value).await;
    assert_eq!(session["user"]["id"], bob.as_str());
    // An address outside the provider's domains is not the IdP's to assert (an existing account or a new one).
    let r = sign_in(&mut t, "owner@example.com", json!({})).await;
    assert_redirected_error(&r, "email_domain_not_allowed", None);
    let r = sign_in(&mut t, "someone@elsewhere.test", json!({})).await;
    assert_redirected_error(&r, "email_domain_not_allowed", None);

    // A banned account gets no session through its IdP either.
    let banned = t.s.post("/api/auth/admin/ban-user").cookie(&admin).json(&json!({"userId": bob})).send().await;
    assert_eq!(banned.status, 200, "{}", banned.text);
    assert_redirected_error(&sign_in(&mut t, "bob@acme.test", json!({})).await, "BANNED_USER", None);

    // A provider whose domains are not proven signs nobody in.
    let mut other = registration(&t.s, &t.idp, &t.org);
    other["providerId"] = json!("unproven");
    other["domain"] = json!("unproven.test");
    ok(&t.s.post("/api/auth/sso/register").cookie(&t.owner.cookie).json(&other).send().await);
    let body = json!({"providerId": "unproven", "callbackURL": "/dashboard"});
    let r = t.s.post("/api/auth/sign-in/sso").json(&body).send().await;
    assert_auth_error(&r, 401, "PROVIDER_DOMAIN_HAS_NOT_BEEN_VERIFIED");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn register_takes_no_private_key_and_shows_the_certificate_by_fingerprint() {
    let t = setup().await;
    let (s, owner) = (&t.s, &t.owner.cookie);
    let one = ok(&s.get(&format!("/api/auth/sso/get-provider?providerId={PROVIDER}")).cookie(owner).send().await);
    assert_eq!(one["type"], "saml");
    assert!(one.get("oidcConfig").is_none(), "{one}");
    assert_eq!(one["samlConfig"]["entryPoint"], t.idp.sso.as_str());
    assert_eq!(one["samlConfig"]["wantAssertionsSigned"], true);
    let fingerprint = one["samlConfig"]["certificate"][0]["fingerprintSha256"].as_str().unwrap();
    assert_eq!(fingerprint.len(), 32 * 3 - 1, "{fingerprint}");

    let register = |change: &dyn Fn(&mut Value)| {
        let mut body = registration(s, &t.idp, &t.org);
        body["providerId"] = json!("another");
        change(&mut body);
        s.post("/api/auth/sso/register").cookie(owner).json(&body).send()
    };
    let key = "-----BEGIN PRIVATE KEY-----\nMIIEvg==\n-----END PRIVATE KEY-----\n";
    for (change, code) in [
        (json!({"privateKey": key}), "SAML_OPTION_NOT_SUPPORTED"),
        (json!({"spMetadata": {"privateKey": key}}), "SAML_OPTION_NOT_SUPPORTED"),
        (json!({"idpMetadata": {"entityID": "x", "encPrivateKey": key}}), "SAML_OPTION_NOT_SUPPORTED"),
        (json!({"authnRequestsSigned": true}), "SAML_OPTION_NOT_SUPPORTED"),
        (json!({"idpInitiatedCallbackUrl": "/x"}), "SAML_OPTION_NOT_SUPPORTED"),
        (json!({"cert": "not a certificate"}), "VALIDATION_ERROR"),
        (json!({"cert": null}), "VALIDATION_ERROR"),
        (json!({"idpMetadata": null}), "VALIDATION_ERROR"),
        (json!({"entryPoint": "javascript:alert(1)"}), "VALIDATION_ERROR"),
        (json!({"unknown": 1}), "VALIDATION_ERROR"),
    ] {
        let r = register(&|b: &mut Value| {
            for (k, v) in change.as_object().unwrap() {
                b["samlConfig"][k] = v.clone();
            }
        })
        .await;
        assert_eq!(r.status, 400, "{change}: {}", r.text);
        assert_eq!(r.json()["code"], code, "{change}: {}", r.text);
        assert!(!r.text.contains("PRIVATE KEY"), "{}", r.text);
    }
    // The IdP's metadata XML instead of the fields (what Okta and Entra ID download).
    let metadata = format!(
        "<md:EntityDescriptor xmlns:md=\"urn:oasis:names:tc:SAML:2.0:metadata\" xmlns:ds=\"http://www.w3.org/2000/09/xmldsig#\" \
         entityID=\"{}\"><md:IDPSSODescriptor protocolSupportEnumeration=\"urn:oasis:names:tc:SAML:2.0:protocol\">\
         <md:KeyDescriptor use=\"signing\"><ds:KeyInfo><ds:X509Data><ds:X509Certificate>{}</ds:X509Certificate>\
         </ds:X509Data></ds:KeyInfo></md:KeyDescriptor><md:SingleSignOnService \
         Binding=\"urn:oasis:names:tc:SAML:2.0:bindings:HTTP-Redirect\" Location=\"{}\"/></md:IDPSSODescriptor>\
         </md:EntityDescriptor>",
        t.idp.entity_id,
        t.idp.cert.lines().filter(|l| !l.starts_with("-----")).collect::<String>(),
        t.idp.sso
    );
    let r = register(&|b: &mut Value| {
        b["samlConfig"] = json!({"idpMetadata": {"metadata": metadata}});
    })
    .await;
    let registered = ok(&r);
    assert_eq!(registered["samlConfig"]["entryPoint"], t.idp.sso.as_str());
    assert_eq!(registered["samlConfig"]["idpMetadata"]["entityID"], t.idp.entity_id.as_str());
    assert!(registered["oidcConfig"].is_null(), "{registered}");
    // Metadata of a provider that is not there, or not SAML: 404.
    assert_eq!(s.get("/api/auth/sso/saml2/sp/metadata?providerId=nobody").send().await.status, 404);
}

fn base64_decode(text: &str) -> Vec<u8> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.decode(text).unwrap()
}

fn base64_encode(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// `sign-in/sso` finds the SAML provider as it finds an OpenID Connect one (by e-mail, domain or organization
/// slug) and sends the browser to the IdP; `providerType` naming the protocol it does not speak is refused with
/// the plugin's answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sign_in_sso_reaches_the_saml_provider_by_email_domain_or_organization() {
    let t = setup().await;
    for by in [json!({"email": "carol@acme.test"}), json!({"domain": "acme.test"}), json!({"organizationSlug": "acme"})]
    {
        let mut body = json!({"callbackURL": "/dashboard"});
        body.as_object_mut().unwrap().extend(by.as_object().unwrap().clone());
        let r = t.s.post("/api/auth/sign-in/sso").json(&body).send().await;
        let url = str_of(&ok(&r)["url"]).to_owned();
        assert!(url.starts_with(&t.idp.sso) && url.contains("SAMLRequest="), "{by}: {url}");
        assert!(r.set_cookies().iter().any(|c| c.name == flow_cookie_name()), "{by}: the SAML flow cookie");
    }
    let body = json!({"providerId": PROVIDER, "callbackURL": "/dashboard", "providerType": "oidc"});
    let r = t.s.post("/api/auth/sign-in/sso").json(&body).send().await;
    assert_auth_error(&r, 400, "OIDC_PROVIDER_IS_NOT_CONFIGURED");
    let body = json!({"providerId": PROVIDER, "callbackURL": "/dashboard", "providerType": "saml"});
    ok(&t.s.post("/api/auth/sign-in/sso").json(&body).send().await);
}

/// An account with a second factor is asked for it after its IdP's sign-in (as after a password), unless the
/// signed assertion's `AuthnContextClassRef` is a multi-factor class: then the IdP's word stands in for it, and
/// the audit entry says so.
/// A SAML provider's role mapping reads the groups from every value of an assertion attribute: Entra ID's and
/// ADFS's groups attribute by default, the one named (`roleMapping.claim`) otherwise; each sign-in sets the roles.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_idps_group_attribute_maps_to_the_organizations_roles() {
    const ENTRA: &str = "http://schemas.microsoft.com/ws/2008/06/identity/claims/groups";
    let mut t = setup().await;
    let role_of = |members: Vec<Value>| {
        let ann = members.into_iter().find(|m| m["user"]["email"] == "ann@acme.test").expect("ann is a member");
        ann["role"].as_str().unwrap().to_owned()
    };
    let update = |mapping: Value| json!({"providerId": PROVIDER, "roleMapping": mapping});
    let admins = json!({"mappings": [{"group": "Admins", "role": "admin"}]});
    let r =
        t.s.post("/api/auth/sso/update-provider").cookie(&t.owner.cookie).json(&update(admins.clone())).send().await;
    assert_eq!(ok(&r)["roleMapping"], json!({"claim": null, "mappings": admins["mappings"]}));

    let groups = |name: &str, values: &[&str]| json!({"attributes": {name: values}});
    let r = sign_in(&mut t, "ann@acme.test", groups(ENTRA, &["Staff", "Admins"])).await;
    assert_eq!(r.status, 302, "{}", r.text);
    assert_eq!(role_of(members(&t).await), "admin", "the second value of the default attribute matched");

    let named = json!({"claim": "memberOf", "mappings": [{"group": "Admins", "role": "admin"}]});
    ok(&t.s.post("/api/auth/sso/update-provider").cookie(&t.owner.cookie).json(&update(named)).send().await);
    let r = sign_in(&mut t, "ann@acme.test", groups(ENTRA, &["Admins"])).await;
    assert_eq!(r.status, 302, "{}", r.text);
    assert_eq!(role_of(members(&t).await), "member", "only the attribute named is read: no group, the default role");
    let r = sign_in(&mut t, "ann@acme.test", groups("memberOf", &["Admins"])).await;
    assert_eq!(r.status, 302, "{}", r.text);
    assert_eq!(role_of(members(&t).await), "admin");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_second_factor_is_asked_unless_the_idp_asserts_a_multi_factor_context() {
    let mut t = setup().await;
    let admin = t.s.admin_session().await;
    let (status, body, cookie) = t.s.sign_up("Tess", "tess@acme.test", PASSWORD).await;
    assert_eq!(status, 200, "{body}");
    let user = TestUser {
        id: str_of(&body["user"]["id"]).to_owned(),
        email: "tess@acme.test".into(),
        cookie: cookie.unwrap(),
        user: body["user"].clone(),
    };
    t.s.mark_verified(&admin, &user.id).await;
    let tess = super::two_factor::enrol(&t.s, user).await;

    // PasswordProtectedTransport (the IdP's default here), and a single-factor Smartcard: the challenge.
    for class in ["", "urn:oasis:names:tc:SAML:2.0:ac:classes:Smartcard"] {
        let variant = if class.is_empty() { json!({}) } else { json!({"authnContext": class}) };
        let r = sign_in(&mut t, &tess.email, variant).await;
        assert_eq!(r.status, 302, "{}", r.text);
        assert_eq!(r.header("location").as_deref(), Some("/dashboard?twoFactorRedirect=true"), "{class}");
        assert!(r.session_cookie().is_none_or(|c| c.value.is_empty()), "no session before the second factor");
        assert!(r.set_cookies().iter().any(|c| c.name.ends_with(".two_factor")), "the two-factor cookie");
    }

    for class in [
        "http://schemas.microsoft.com/claims/multipleauthn",
        "urn:oasis:names:tc:SAML:2.0:ac:classes:MobileTwoFactorContract",
        "https://refeds.org/profile/mfa",
    ] {
        let r = sign_in(&mut t, &tess.email, json!({"authnContext": class})).await;
        assert_eq!(r.status, 302, "{}", r.text);
        assert_eq!(r.header("location").as_deref(), Some("/dashboard"), "{class}");
        let session = t.s.session(&r.session_cookie().expect("a session").value).await;
        assert_eq!(session["user"]["id"], tess.id.as_str());
    }
    let audit = t.s.get("/api/admin/audit?limit=100&action=sign_in.sso").cookie(&admin).send().await.json();
    let asserted: Vec<&str> = audit["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["detail"].as_str())
        .filter(|d| d.contains("multi-factor asserted by the provider (AuthnContextClassRef "))
        .collect();
    assert_eq!(asserted.len(), 3, "{audit}");
}

/// The ACS's own time, for BENCHMARKS.md (#48, "an SSO callback's server time p99 <= 10 ms"): `SAML_SIGN_INS`
/// (default 300) sign-ins through samlify one after another, new accounts then returning ones; the ACS waits for
/// no provider, so its whole time is recorded in `service_auth_oauth_callback_own_seconds`, read by bucket as
/// `sso::measure_sso_callback_own_time` reads it. The IdP's signing happens before the ACS is called and is not in it.
/// `cargo test --release --test api saml::measure_acs_own_time -- --ignored --nocapture`
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement, run by hand"]
async fn measure_acs_own_time() {
    let count: usize = std::env::var("SAML_SIGN_INS").ok().and_then(|v| v.parse().ok()).unwrap_or(300);
    let mut t = setup_adjusted(|c| c.metrics.listen = Some(super::metrics::ANY_PORT)).await;
    let metrics = t.s.metrics();
    let mut before = super::oauth::own_time_buckets(&super::oauth::scrape(metrics).await);
    for phase in ["new accounts", "returning accounts"] {
        for n in 0..count {
            let r = sign_in(&mut t, &format!("m{n}@acme.test"), json!({})).await;
            assert_eq!(r.status, 302, "{}", r.text);
        }
        let after = super::oauth::own_time_buckets(&super::oauth::scrape(metrics).await);
        println!(
            "{phase}: {count} SAML responses at the ACS; {}",
            super::oauth::own_time_phase(&before, &after, count)
        );
        before = after;
    }
}
