//! Sign-in through another identity provider, end to end against a real OpenID Connect provider: `oidc-provider`
//! (npm, OpenID Certified) started on loopback by each test (tests/oidc/provider.mjs), driven through plain HTTP
//! as a browser would be: the service's start call, the provider's login page, its redirect back, the service's
//! callback. Nothing is mocked: the ID tokens are the provider's, signed with its keys.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};

use serde_json::{Value, json};
use service_auth::config::Config;
use service_auth::oauth::config::{ProviderConfig, Secret};

use super::harness::*;

// ---------------------------------------------------------------------------------------------------------------
// The provider

/// A running oidc-provider: its issuer, and its stdin (closing it ends the provider).
pub(super) struct Idp {
    pub(super) issuer: String,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: BufReader<std::process::ChildStdout>,
}

impl Idp {
    pub(super) fn start() -> Self {
        let dir = node_packages("oidc", "oidc-provider");
        let mut child = Command::new("node")
            .arg(dir.join("provider.mjs"))
            .current_dir(&dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("node tests/oidc/provider.mjs");
        let stdin = child.stdin.take();
        let mut lines = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        lines.read_line(&mut line).expect("the provider's first line");
        let issuer = serde_json::from_str::<Value>(&line).expect("issuer line")["issuer"].as_str().unwrap().to_owned();
        Self { issuer, child, stdin, lines }
    }

    /// Registers the clients (and the provider's misbehaviour, if any) once the service's address is known.
    pub(super) fn configure(&mut self, options: Value) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{options}").unwrap();
        stdin.flush().unwrap();
        let mut line = String::new();
        self.lines.read_line(&mut line).expect("the provider's ready line");
        assert!(line.contains("ready"), "{line}");
    }
}

impl Drop for Idp {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(super) fn provider(id: &str, issuer: &str, client_id: &str, trusted: bool) -> ProviderConfig {
    let text =
        format!("id = \"{id}\"\nissuer = \"{issuer}\"\nclient_id = \"{client_id}\"\nclient_secret_env = \"UNUSED\"\n");
    let mut p: ProviderConfig = toml::from_str(&text).unwrap();
    p.trusted_for_linking = trusted;
    p.client_secret = Some(Secret::new(format!("{client_id}-secret")));
    p
}

/// A service with two providers on one oidc-provider: `local` (trusted for linking) and `other` (not), the
/// provider misbehaving as `misbehaviour` says (`{}`: not at all).
async fn setup(misbehaviour: Value) -> (TestServer, Idp) {
    setup_adjusted(misbehaviour, |_| {}).await
}

/// [`setup`], with the server's configuration adjusted further by `adjust`.
async fn setup_adjusted(misbehaviour: Value, adjust: impl FnOnce(&mut Config)) -> (TestServer, Idp) {
    let mut idp = Idp::start();
    let issuer = idp.issuer.clone();
    let server = TestServer::start_adjusted(|c| {
        c.oauth.providers = vec![provider("local", &issuer, "svc", true), provider("other", &issuer, "svc2", false)];
        adjust(c);
    })
    .await;
    let base = format!("http://{}", server.addr);
    // The third: an app of the same client that gets its ID token itself (an SDK) and brings it as `idToken`.
    let uris = |id: &str| {
        json!([
            format!("{base}/api/auth/callback/{id}"),
            format!("{base}/api/auth/oauth2/callback/{id}"),
            format!("{base}/app/callback"),
        ])
    };
    let mut options = json!({"clients": [
        {"client_id": "svc", "client_secret": "svc-secret", "redirect_uris": uris("local")},
        {"client_id": "svc2", "client_secret": "svc2-secret", "redirect_uris": uris("other")},
    ]});
    if let (Some(o), Some(m)) = (options.as_object_mut(), misbehaviour.as_object()) {
        o.extend(m.clone());
    }
    idp.configure(options);
    (server, idp)
}

// ---------------------------------------------------------------------------------------------------------------
// A browser: cookies per host, redirects followed by hand

pub(super) struct Browser {
    http: reqwest::Client,
    pub(super) jar: HashMap<String, HashMap<String, String>>,
    /// Callbacks go to this node (the last one on two nodes: the flow started on the first). Both nodes are one
    /// service behind one origin, so they share the cookies of the first.
    callback_base: Option<String>,
    service_host: String,
    /// Two nodes: a request through the harness's client returns once both nodes have applied every change, so
    /// what the browser changed on one node is seen on the other (as after the harness's own requests).
    sync: Option<Client>,
}

pub(super) struct Page {
    pub(super) url: String,
    pub(super) status: u16,
    pub(super) location: Option<String>,
    pub(super) body: String,
}

impl Browser {
    /// A browser of one server (a [`ChildServer`]'s client).
    pub(super) fn of(client: &Client) -> Self {
        let http = reqwest::Client::builder().no_proxy().redirect(reqwest::redirect::Policy::none()).build().unwrap();
        Self { http, jar: HashMap::new(), callback_base: None, service_host: Self::host(&client.base), sync: None }
    }

    pub(super) fn new(server: &TestServer) -> Self {
        let http = reqwest::Client::builder().no_proxy().redirect(reqwest::redirect::Policy::none()).build().unwrap();
        let callback_base = server.nodes.last().map(|n| n.base.clone()).filter(|b| *b != server.client.base);
        let sync = callback_base.as_ref().map(|_| server.client.clone());
        Self { http, jar: HashMap::new(), callback_base, service_host: Self::host(&server.client.base), sync }
    }

    /// The cookie jar's key for `url`: its host and port, the first node's for every node.
    fn jar_key(&self, url: &str) -> String {
        match &self.callback_base {
            Some(other) if url.starts_with(other.as_str()) => self.service_host.clone(),
            _ => Self::host(url),
        }
    }

    pub(super) fn host(url: &str) -> String {
        url::Url::parse(url)
            .map(|u| format!("{}:{}", u.host_str().unwrap_or(""), u.port_or_known_default().unwrap_or(0)))
            .unwrap()
    }

    fn cookie_header(&self, url: &str) -> String {
        let jar = self.jar.get(&self.jar_key(url));
        jar.map(|c| c.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join("; ")).unwrap_or_default()
    }

    pub(super) fn session(&self, server: &TestServer) -> Option<String> {
        self.jar.get(&Self::host(&server.client.base)).and_then(|c| c.get(COOKIE)).cloned()
    }

    pub(super) async fn send(&mut self, method: reqwest::Method, url: &str, body: Option<(&str, String)>) -> Page {
        let mut req = self.http.request(method, url).header("cookie", self.cookie_header(url));
        if let Some((content_type, body)) = body {
            req = req.header("content-type", content_type).body(body);
        }
        let resp = req.send().await.expect("request");
        let status = resp.status().as_u16();
        let host = self.jar_key(url);
        for value in resp.headers().get_all("set-cookie") {
            let cookie = SetCookie::parse(value.to_str().unwrap());
            let jar = self.jar.entry(host.clone()).or_default();
            if cookie.attr("max-age") == Some("0") {
                jar.remove(&cookie.name);
            } else {
                jar.insert(cookie.name.clone(), cookie.value.clone());
            }
        }
        let location = resp
            .headers()
            .get("location")
            .map(|l| url::Url::parse(url).unwrap().join(l.to_str().unwrap()).unwrap().to_string());
        let body = resp.text().await.unwrap_or_default();
        if let Some(client) = &self.sync {
            client.get("/api/auth/ok").send().await;
        }
        Page { url: url.to_owned(), status, location, body }
    }

    async fn post_json(&mut self, url: &str, body: &Value) -> Page {
        self.send(reqwest::Method::POST, url, Some(("application/json", body.to_string()))).await
    }

    /// Follows `url` through the provider (logging in as `login` when it asks) until the service's callback
    /// answers; returns that answer.
    pub(super) async fn through_provider(&mut self, url: &str, login: &str) -> Page {
        let callback = self.up_to_callback(url, login).await;
        self.send(reqwest::Method::GET, &callback, None).await
    }

    /// Follows `url` through the provider (logging in as `login` when it asks) up to the redirect back to the
    /// service's callback; returns the callback's URL, not requested yet.
    pub(super) async fn up_to_callback(&mut self, url: &str, login: &str) -> String {
        let is_callback = |url: &str| {
            ["/api/auth/callback/", "/api/auth/oauth2/callback/", "/api/auth/sso/callback/"]
                .iter()
                .any(|p| url.contains(p))
        };
        let mut page = self.send(reqwest::Method::GET, url, None).await;
        for _ in 0..12 {
            match (page.status, page.location.clone()) {
                (300..=399, Some(next)) => {
                    let next = match (&self.callback_base, next.contains("/api/auth/")) {
                        (Some(other), true) => format!("{other}{}", &next[next.find("/api/auth/").unwrap()..]),
                        _ => next,
                    };
                    if is_callback(&next) {
                        return next;
                    }
                    page = self.send(reqwest::Method::GET, &next, None).await;
                }
                (200, _) if page.body.contains("name=\"login\"") => {
                    let form =
                        format!("login={}", url::form_urlencoded::byte_serialize(login.as_bytes()).collect::<String>());
                    let at = page.url.clone();
                    page =
                        self.send(reqwest::Method::POST, &at, Some(("application/x-www-form-urlencoded", form))).await;
                }
                _ => panic!("stuck at {} ({}): {}", page.url, page.status, page.body),
            }
        }
        panic!("too many redirects");
    }

    /// `sign-in/social` for `provider` as `login`: the callback's answer.
    async fn sign_in(&mut self, server: &TestServer, provider: &str, login: &str) -> Page {
        let start = self.start(server, "/api/auth/sign-in/social", &json!({"provider": provider})).await;
        self.through_provider(&start, login).await
    }

    pub(super) async fn start(&mut self, server: &TestServer, path: &str, body: &Value) -> String {
        self.start_at(&server.client, path, body).await
    }

    /// [`Self::start`] on the server `client` speaks to.
    pub(super) async fn start_at(&mut self, client: &Client, path: &str, body: &Value) -> String {
        let mut body = body.clone();
        let fields = body.as_object_mut().unwrap();
        for (k, v) in [("callbackURL", "/home"), ("newUserCallbackURL", "/welcome"), ("errorCallbackURL", "/oops")] {
            // link-social has no new-user URL: it makes no account.
            if !(path.ends_with("link-social") && k == "newUserCallbackURL") {
                fields.entry(k).or_insert(json!(v));
            }
        }
        let page = self.post_json(&format!("{}{path}", client.base), &body).await;
        assert_eq!(page.status, 200, "{}", page.body);
        let answer: Value = serde_json::from_str(&page.body).unwrap();
        assert_eq!(answer["redirect"], true);
        assert_eq!(page.location.as_deref(), answer["url"].as_str(), "Location is the URL");
        answer["url"].as_str().unwrap().to_owned()
    }
}

pub(super) fn redirected_to(page: &Page) -> String {
    assert_eq!(page.status, 302, "{} answered {}: {}", page.url, page.status, page.body);
    let location = page.location.clone().unwrap();
    let url = url::Url::parse(&location).unwrap();
    match url.query() {
        Some(q) => format!("{}?{q}", url.path()),
        None => url.path().to_owned(),
    }
}

pub(super) fn error_of(page: &Page) -> String {
    let target = redirected_to(page);
    assert!(target.starts_with("/oops?"), "expected the error URL, got {target}");
    extract_query(&target, "error")
}

pub(super) fn extract_query(target: &str, name: &str) -> String {
    let query = target.split_once('?').map(|(_, q)| q).unwrap_or("");
    url::form_urlencoded::parse(query.as_bytes())
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.into_owned())
        .unwrap_or_default()
}

pub(super) async fn accounts_of(server: &TestServer, cookie: &str) -> Vec<Value> {
    let resp = server.client.get("/api/auth/list-accounts").cookie(cookie).send().await;
    assert_eq!(resp.status, 200, "{}", resp.text);
    resp.json().as_array().unwrap().clone()
}

pub(super) fn providers(accounts: &[Value]) -> Vec<&str> {
    accounts.iter().map(|a| a["providerId"].as_str().unwrap()).collect()
}

// ---------------------------------------------------------------------------------------------------------------
// Tests

#[tokio::test]
async fn a_new_identity_gets_an_account_without_a_password_and_returns_to_it() {
    let (server, _idp) = setup(json!({})).await;
    let mut browser = Browser::new(&server);
    let first = browser.sign_in(&server, "local", "alice@example.com").await;
    assert_eq!(redirected_to(&first), "/welcome", "a new account goes to newUserCallbackURL");
    let cookie = browser.session(&server).expect("a session cookie");
    let session = server.client.session(&cookie).await;
    assert_eq!(session["user"]["email"], "alice@example.com");
    assert_eq!(session["user"]["emailVerified"], true, "the provider verified it");
    assert_eq!(session["user"]["name"], "Alice");
    let accounts = accounts_of(&server, &cookie).await;
    assert_eq!(providers(&accounts), ["local"], "no password, so no credential account");
    assert_eq!(accounts[0]["accountId"], "alice@example.com");
    assert_eq!(accounts[0]["userId"], session["user"]["id"]);

    // Returning, from another browser: the same account, to callbackURL.
    let mut other = Browser::new(&server);
    let again = other.sign_in(&server, "local", "alice@example.com").await;
    assert_eq!(redirected_to(&again), "/home");
    let again = server.client.session(&other.session(&server).unwrap()).await;
    assert_eq!(again["user"]["id"], session["user"]["id"]);

    // No password: nothing signs in with one, not even an empty one.
    for password in ["", "anything at all"] {
        let resp = server.client.sign_in_body(&json!({"email": "alice@example.com", "password": password})).await;
        assert!(resp.status == 401 || resp.status == 400, "{}: {}", resp.status, resp.text);
    }

    // Audited: the creation through the provider and the link, then the returning sign-in.
    let admin = server.client.admin_session().await;
    let audit = server.client.get("/api/admin/audit?limit=50").cookie(&admin).send().await.json();
    let actions: Vec<&str> =
        audit["entries"].as_array().unwrap().iter().map(|e| e["action"].as_str().unwrap()).collect();
    for wanted in ["user.created", "account.linked", "sign_in.provider"] {
        assert!(actions.contains(&wanted), "{wanted} missing from {actions:?}");
    }
}

#[tokio::test]
async fn an_address_that_has_an_account_links_only_when_verified_by_a_trusted_provider() {
    let (server, _idp) = setup(json!({})).await;
    let bob = server.client.new_user("bob").await;
    // Unverified by the trusted provider: refused, with a code that says why.
    let mut browser = Browser::new(&server);
    let unverified = browser.sign_in(&server, "local", "bob@example.com#unverified").await;
    assert_eq!(error_of(&unverified), "account_not_linked");
    assert_eq!(browser.session(&server), None);
    // Verified, by a provider not trusted for linking: refused too.
    let untrusted = Browser::new(&server).sign_in(&server, "other", "bob@example.com").await;
    assert_eq!(error_of(&untrusted), "account_not_linked");
    assert_eq!(providers(&accounts_of(&server, &bob.cookie).await), ["credential"], "nothing was linked");
    // Verified by the trusted provider, but Bob's own address was never proven here (anyone may sign up with any
    // address): refused too.
    let unproven = Browser::new(&server).sign_in(&server, "local", "bob@example.com").await;
    assert_eq!(error_of(&unproven), "account_not_linked");
    assert_eq!(providers(&accounts_of(&server, &bob.cookie).await), ["credential"], "nothing was linked");
    // Verified by the trusted provider, Bob's address proven: linked to Bob's account, and signed in as Bob.
    server.client.mark_verified(&server.client.admin_session().await, &bob.id).await;
    let mut trusted = Browser::new(&server);
    let linked = trusted.sign_in(&server, "local", "bob@example.com").await;
    assert_eq!(redirected_to(&linked), "/home", "an existing account: callbackURL");
    let session = server.client.session(&trusted.session(&server).unwrap()).await;
    assert_eq!(session["user"]["id"], bob.id.as_str());
    assert_eq!(providers(&accounts_of(&server, &bob.cookie).await), ["credential", "local"]);
}

/// The owner's recovery of the account that has `email`: a reset link asked for, read from the mail (the
/// `n`th message), and used with `password`.
async fn reset_by_mail(server: &TestServer, smtp: &super::mail::SmtpSink, n: usize, email: &str, password: &str) {
    let asked = super::mail::request_reset(server, email).await;
    assert_eq!(asked.status, 200, "{}", asked.text);
    let mail = smtp.wait_for(n).await.remove(n - 1);
    let token = super::mail::token_in(&mail);
    let body = json!({"newPassword": password, "token": token});
    let done = server.client.post("/api/auth/reset-password").json(&body).send().await;
    assert_eq!((done.status, done.json()), (200, json!({"status": true})), "{}", done.text);
}

/// #44 item 1. Before: anyone who signed up with someone else's address (verification is off by default) was
/// handed the owner's identity when she signed in through a provider trusted for linking, and both kept a key
/// (the squatter's password still signed in). Now an identity joins an account by its address only once the
/// account's own address is proven: refused until then; the owner recovers the account with a mailed reset (which
/// proves the address and ends the squatter's password and sessions), and then her identity links.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_account_signed_up_with_someone_elses_address_is_not_handed_her_identity() {
    let smtp = super::mail::SmtpSink::start();
    let (server, _idp) = setup_adjusted(json!({}), |c| c.email.smtp_url = Some(smtp.url())).await;
    let (status, _, squatter) = server.client.sign_up("Squatter", "vera@example.com", "a lodger's own key").await;
    assert_eq!(status, 200);
    let squatter = squatter.expect("the squatter's session");
    let mut owner = Browser::new(&server);
    let refused = owner.sign_in(&server, "local", "vera@example.com").await;
    assert_eq!(error_of(&refused), "account_not_linked");
    assert_eq!(owner.session(&server), None);
    assert_eq!(providers(&accounts_of(&server, &squatter).await), ["credential"], "nothing was linked");

    reset_by_mail(&server, &smtp, 1, "vera@example.com", "the owner's new password").await;
    assert_eq!(server.client.sign_in("vera@example.com", "a lodger's own key").await.0, 401);
    assert_eq!(server.client.session(&squatter).await, Value::Null, "the squatter's session ended");
    let mut owner = Browser::new(&server);
    let linked = owner.sign_in(&server, "local", "vera@example.com").await;
    assert_eq!(redirected_to(&linked), "/home", "the address is proven: her identity joins her account");
    let session = server.client.session(&owner.session(&server).unwrap()).await;
    assert_eq!(
        (&session["user"]["email"], &session["user"]["emailVerified"]),
        (&json!("vera@example.com"), &json!(true))
    );
}

/// #44 item 2. Before: an address the provider said it had not verified made the account, the owner's sign-up was
/// then refused as a duplicate, and after her recovery (a mailed reset) that identity still signed in to her
/// account. Now no account is made from such an address unless the provider's configuration says so
/// (`allow_unverified_email_sign_up`); where it does, the owner's reset proves the address and ends every identity
/// linked while it was unproven, audited.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unverified_address_makes_no_account_and_the_owners_reset_ends_what_was_linked_before_her() {
    let smtp = super::mail::SmtpSink::start();
    let (server, _idp) = setup_adjusted(json!({}), |c| {
        c.email.smtp_url = Some(smtp.url());
        // `other` makes accounts of addresses it does not verify; `local` keeps the default.
        c.oauth.providers[1].allow_unverified_email_sign_up = true;
    })
    .await;
    let admin = server.client.admin_session().await;
    let mut attacker = Browser::new(&server);
    let refused = attacker.sign_in(&server, "local", "wanda@example.com#unverified").await;
    assert_eq!(error_of(&refused), "email_not_verified");
    assert_eq!(attacker.session(&server), None);
    assert!(server.client.users(&admin).await.iter().all(|u| u["email"] != "wanda@example.com"), "no account");

    // Where the configuration allows it: made, unproven, and the owner's sign-up is a duplicate.
    let mut attacker = Browser::new(&server);
    let made = attacker.sign_in(&server, "other", "wanda@example.com#unverified").await;
    assert_eq!(redirected_to(&made), "/welcome");
    let attackers = attacker.session(&server).expect("a session");
    assert_eq!(server.client.session(&attackers).await["user"]["emailVerified"], false);
    assert_eq!(server.client.sign_up("Wanda", "wanda@example.com", PASSWORD).await.0, 422);

    reset_by_mail(&server, &smtp, 1, "wanda@example.com", "the owner's new password").await;
    assert_eq!(server.client.session(&attackers).await, Value::Null, "the attacker's session ended");
    let mut again = Browser::new(&server);
    let refused = again.sign_in(&server, "other", "wanda@example.com#unverified").await;
    assert_eq!(error_of(&refused), "account_not_linked", "the identity was ended with the reset");
    assert_eq!(again.session(&server), None);
    let owner = server.client.login("wanda@example.com", "the owner's new password").await;
    assert_eq!(server.client.session(&owner).await["user"]["emailVerified"], true, "proven by the reset");
    assert_eq!(providers(&accounts_of(&server, &owner).await), ["credential"]);
    let audit = server.client.get("/api/admin/audit?action=account.unlinked").cookie(&admin).send().await.json();
    let details: Vec<&str> = audit["entries"].as_array().unwrap().iter().filter_map(|e| e["detail"].as_str()).collect();
    assert!(
        details.iter().any(|d| d.starts_with("other (wanda@example.com)") && d.contains("ended by a password reset")),
        "{audit}"
    );
}

/// #44 item 3. Before: link-social by redirect linked an identity whose address a provider not trusted for linking
/// did not assert as verified (the ID-token link refused it with `LINKING_NOT_ALLOWED`), and it then signed in to
/// the account after the owner changed her password. Now both links apply one rule: the redirect answers
/// better-auth's `unable_to_link_account`, and an address that provider verified still links.
#[tokio::test]
async fn link_social_by_redirect_refuses_what_the_id_token_link_refuses() {
    let (server, idp) = setup(json!({})).await;
    let xena = server.client.new_user("xena").await;
    let mut browser = Browser::new(&server);
    browser.jar.entry(Browser::host(&server.client.base)).or_default().insert(COOKIE.into(), xena.cookie.clone());
    let url =
        browser.start(&server, "/api/auth/link-social", &json!({"provider": "other", "callbackURL": "/linked"})).await;
    let refused = browser.through_provider(&url, "xena@example.com#unverified").await;
    assert_eq!(error_of(&refused), "unable_to_link_account");
    assert_eq!(providers(&accounts_of(&server, &xena.cookie).await), ["credential"], "nothing was linked");
    let mut elsewhere = Browser::new(&server);
    let signed_in = elsewhere.sign_in(&server, "other", "xena@example.com#unverified").await;
    assert_eq!(error_of(&signed_in), "account_not_linked");
    assert_eq!(elsewhere.session(&server), None);
    // The same provider, an address it verified: linked.
    browser.jar.remove(&Browser::host(&idp.issuer));
    let url =
        browser.start(&server, "/api/auth/link-social", &json!({"provider": "other", "callbackURL": "/linked"})).await;
    let done = browser.through_provider(&url, "xena@example.com").await;
    assert_eq!(redirected_to(&done), "/linked");
    assert_eq!(providers(&accounts_of(&server, &xena.cookie).await), ["credential", "other"]);
}

#[tokio::test]
async fn a_signed_in_user_links_and_unlinks_but_never_the_last_way_in() {
    let (server, idp) = setup(json!({})).await;
    let carol = server.client.new_user("carol").await;
    let mut browser = Browser::new(&server);
    browser.jar.entry(Browser::host(&server.client.base)).or_default().insert(COOKIE.into(), carol.cookie.clone());
    // link-social needs a session.
    let anonymous = server.client.post("/api/auth/link-social").json(&json!({"provider": "other"})).send().await;
    assert_auth_error(&anonymous, 401, "UNAUTHORIZED");
    // Through the untrusted provider, an address it verified: the owner asked, so it links (same address).
    let url =
        browser.start(&server, "/api/auth/link-social", &json!({"provider": "other", "callbackURL": "/linked"})).await;
    let done = browser.through_provider(&url, "carol@example.com").await;
    assert_eq!(redirected_to(&done), "/linked");
    let accounts = accounts_of(&server, &carol.cookie).await;
    assert_eq!(providers(&accounts), ["credential", "other"]);
    // The identity now signs into Carol's account.
    let mut elsewhere = Browser::new(&server);
    let signed_in = elsewhere.sign_in(&server, "other", "carol@example.com").await;
    assert_eq!(redirected_to(&signed_in), "/home");
    assert_eq!(server.client.session(&elsewhere.session(&server).unwrap()).await["user"]["id"], carol.id.as_str());
    // Another address is not linked to Carol (signed out at the provider first, to log in as someone else).
    browser.jar.remove(&Browser::host(&idp.issuer));
    let url = browser.start(&server, "/api/auth/link-social", &json!({"provider": "local"})).await;
    let mismatch = browser.through_provider(&url, "dave@example.com").await;
    // better-auth 1.7.25's code (this was `email_doesn't_match`).
    assert_eq!(error_of(&mismatch), "email_does_not_match");

    // Unlink the password, then the identity is the last way in and stays.
    let unlink = |body: Value| server.client.post("/api/auth/unlink-account").cookie(&carol.cookie).json(&body).send();
    let other_id = accounts[1]["id"].as_str().unwrap().to_owned();
    let resp = unlink(json!({"accountId": "no-such"})).await;
    assert_auth_error(&resp, 400, "ACCOUNT_NOT_FOUND");
    let resp = unlink(json!({"accountId": carol.id, "providerId": "credential"})).await;
    assert_eq!(resp.status, 200, "{}", resp.text);
    assert_eq!(providers(&accounts_of(&server, &carol.cookie).await), ["other"]);
    let (status, _, _) = server.client.sign_in("carol@example.com", PASSWORD).await;
    assert_eq!(status, 401, "the password is gone");
    let resp = unlink(json!({"accountId": other_id})).await;
    assert_auth_error(&resp, 400, "FAILED_TO_UNLINK_LAST_ACCOUNT");
    assert_eq!(providers(&accounts_of(&server, &carol.cookie).await), ["other"]);
}

#[tokio::test]
async fn a_state_is_used_once_and_only_by_the_browser_that_started_it() {
    let (server, _idp) = setup(json!({})).await;
    let mut browser = Browser::new(&server);
    let url = browser.start(&server, "/api/auth/sign-in/social", &json!({"provider": "local"})).await;
    let flow_cookie = browser.jar[&Browser::host(&server.client.base)].clone();
    let done = browser.through_provider(&url, "erin@example.com").await;
    assert_eq!(redirected_to(&done), "/welcome");
    // The same callback again, with the flow's cookie: the state was used.
    let mut replay = Browser::new(&server);
    replay.jar.insert(Browser::host(&server.client.base), flow_cookie);
    let again = replay.send(reqwest::Method::GET, &done.url, None).await;
    assert_eq!(again.status, 400, "{}", again.body);
    assert!(again.body.contains("STATE_NOT_FOUND"), "{}", again.body);
    assert_eq!(replay.session(&server), None);

    // A flow finished by another browser (one without its cookie: a login CSRF) is refused, and burnt.
    let mut victim = Browser::new(&server);
    let url = victim.start(&server, "/api/auth/sign-in/social", &json!({"provider": "local"})).await;
    let mut attacker = Browser::new(&server);
    attacker.callback_base = victim.callback_base.clone();
    let stolen = attacker.through_provider(&url, "mallory@example.com").await;
    assert_eq!(error_of(&stolen), "state_mismatch");
    assert_eq!(attacker.session(&server), None);

    // No state at all.
    let resp = server.client.get("/api/auth/callback/local?code=x").send().await;
    assert_auth_error(&resp, 400, "STATE_NOT_FOUND");
}

#[tokio::test]
async fn an_id_token_with_another_nonce_is_refused() {
    let (server, _idp) = setup(json!({})).await;
    let mut browser = Browser::new(&server);
    let url = browser.start(&server, "/api/auth/sign-in/social", &json!({"provider": "local"})).await;
    let mut tampered = url::Url::parse(&url).unwrap();
    let pairs: Vec<(String, String)> = tampered
        .query_pairs()
        .map(|(k, v)| {
            let v = if k == "nonce" { "another-nonce".to_owned() } else { v.into_owned() };
            (k.into_owned(), v)
        })
        .collect();
    assert!(pairs.iter().any(|(k, _)| k == "nonce"), "the request carries a nonce");
    assert!(pairs.iter().any(|(k, v)| k == "code_challenge_method" && v == "S256"), "PKCE S256");
    tampered.query_pairs_mut().clear().extend_pairs(pairs);
    let done = browser.through_provider(tampered.as_str(), "frank@example.com").await;
    assert_eq!(error_of(&done), "invalid_id_token");
    assert_eq!(browser.session(&server), None);
}

#[tokio::test]
async fn an_id_token_signed_by_a_key_the_provider_does_not_publish_is_refused() {
    let (server, _idp) = setup(json!({"foreignKey": true})).await;
    let mut browser = Browser::new(&server);
    let done = browser.sign_in(&server, "local", "grace@example.com").await;
    assert_eq!(error_of(&done), "invalid_id_token");
    assert_eq!(browser.session(&server), None);
}

#[tokio::test]
async fn an_expired_id_token_is_refused() {
    let (server, _idp) = setup(json!({"clockSkewSecs": -7200})).await;
    let mut browser = Browser::new(&server);
    let done = browser.sign_in(&server, "local", "heidi@example.com").await;
    assert_eq!(error_of(&done), "invalid_id_token");
    assert!(extract_query(&redirected_to(&done), "error_description").to_lowercase().contains("expire"));
    assert_eq!(browser.session(&server), None);
}

#[tokio::test]
async fn a_banned_account_stays_banned_through_a_provider() {
    let (server, _idp) = setup(json!({})).await;
    let mut browser = Browser::new(&server);
    browser.sign_in(&server, "local", "ivan@example.com").await;
    let id = server.client.session(&browser.session(&server).unwrap()).await["user"]["id"].as_str().unwrap().to_owned();
    let admin = server.client.admin_session().await;
    server.client.patch_ok(&admin, &json!({"userId": id, "banned": true})).await;
    let mut again = Browser::new(&server);
    let refused = again.sign_in(&server, "local", "ivan@example.com").await;
    // What better-auth redirects with: its admin plugin's session hook throws BANNED_USER, which the callback
    // passes on with the message (this was `banned`).
    assert_eq!(error_of(&refused), "BANNED_USER");
    let description = extract_query(&redirected_to(&refused), "error_description");
    assert_eq!(
        description,
        "You have been banned from this application. Please contact support if you believe this is an error."
    );
    assert_eq!(again.session(&server), None);
}

/// `[two_factor] required_for_roles`: an administrator whose only second factor is a passkey signs in with it. A
/// provider, like a password, is one factor: its sign-in is refused (`passkey_required`), never a session the
/// passkey would pass the rule for without taking part.
#[tokio::test]
async fn a_passkey_as_the_required_second_factor_is_not_skipped_through_a_provider() {
    let (server, _idp) = setup_adjusted(json!({}), |c| {
        super::passkeys::with_passkeys(c);
        c.two_factor.required_for_roles = vec!["admin".into()];
    })
    .await;
    let admin = server.client.admin_session().await;
    let admin_id = server.client.session(&admin).await["user"]["id"].as_str().unwrap().to_owned();
    let mut device = super::passkeys::Browser::new();
    super::passkeys::register(&server, &mut device, &admin, None).await;
    // An identity joins an account by its address only once that address is proven (the role's second factor
    // comes first: without it the administrator may do nothing else).
    server.client.mark_verified(&admin, &admin_id).await;
    let mut browser = Browser::new(&server);
    let refused = browser.sign_in(&server, "local", ADMIN_EMAIL).await;
    assert_eq!(error_of(&refused), "passkey_required");
    assert_eq!(browser.session(&server), None);
}

/// The provider vouches for one factor, as a password does: an account with a second factor gets the challenge
/// `sign-in/email` gives (the two-factor cookie, no session), and the callback sends the browser to the app's
/// callback URL with `twoFactorRedirect=true`, where the app asks for the code. A trusted device skips the step.
#[tokio::test]
async fn a_second_factor_still_applies_through_a_provider() {
    const TWO_FACTOR_COOKIE: &str = "service-auth.two_factor";
    const TRUST_COOKIE: &str = "service-auth.trust_device";
    let (server, _idp) = setup(json!({})).await;
    let host = Browser::host(&server.client.base);
    let enrolled = super::two_factor::enrolled(&server, "tessa").await;
    let admin = server.client.admin_session().await;
    // An identity joins an account by its address only once that address is proven.
    server.client.mark_verified(&admin, &enrolled.id).await;
    // Linked at once (a trusted provider that verified the address), into an account with the factor on.
    let mut browser = Browser::new(&server);
    let start = json!({"provider": "local", "callbackURL": "/home?tab=1"});
    let url = browser.start(&server, "/api/auth/sign-in/social", &start).await;
    let done = browser.through_provider(&url, &enrolled.email).await;
    assert_eq!(redirected_to(&done), "/home?tab=1&twoFactorRedirect=true", "the query is kept");
    assert_eq!(browser.session(&server), None, "no session before the second factor");
    let challenge = browser.jar[&host].get(TWO_FACTOR_COOKIE).cloned().expect("the two-factor cookie");
    assert!(!browser.jar[&host].keys().any(|k| k.ends_with(".oauth_flow")), "the flow cookie is cleared");
    let session =
        browser.send(reqwest::Method::GET, &format!("{}/api/auth/get-session", server.client.base), None).await;
    assert_eq!((session.status, session.body.as_str()), (200, "null"));

    // The app's next call, as after sign-in/email: a right code opens the session.
    let step = super::two_factor::settled_step().await;
    // The enrolment used this step's code: the next one (one step either side is accepted).
    let code = super::two_factor::code(&enrolled.secret, step + 1);
    let passed = super::two_factor::verify_totp(&server, None, Some(&challenge), &code, true).await;
    assert_eq!(passed.status, 200, "{}", passed.text);
    let cookie = passed.session_cookie().expect("the session cookie").value;
    assert_eq!(server.client.session(&cookie).await["user"]["id"], enrolled.id.as_str());
    let trust = passed.set_cookies().into_iter().find(|c| c.name == TRUST_COOKIE).expect("a trusted device").value;

    // The trusted device skips the step, and its cookie is renewed.
    let mut trusted = Browser::new(&server);
    trusted.jar.entry(host.clone()).or_default().insert(TRUST_COOKIE.to_owned(), trust.clone());
    let again = trusted.sign_in(&server, "local", &enrolled.email).await;
    assert_eq!(redirected_to(&again), "/home");
    let cookie = trusted.session(&server).expect("a session through the trusted device");
    assert_eq!(server.client.session(&cookie).await["user"]["id"], enrolled.id.as_str());
    assert_ne!(trusted.jar[&host].get(TRUST_COOKIE), Some(&trust), "renewed");
    assert!(!trusted.jar[&host].contains_key(TWO_FACTOR_COOKIE));

    // Another browser, through the generic plugin's path: the step again.
    let mut other = Browser::new(&server);
    let url = other.start(&server, "/api/auth/sign-in/oauth2", &json!({"providerId": "local"})).await;
    let done = other.through_provider(&url, &enrolled.email).await;
    assert!(done.url.contains("/api/auth/oauth2/callback/local"), "{}", done.url);
    assert_eq!(redirected_to(&done), "/home?twoFactorRedirect=true");
    assert_eq!(other.session(&server), None);
    assert!(other.jar[&host].contains_key(TWO_FACTOR_COOKIE));

    // An account without a second factor: a session at once, as before.
    let plain = server.client.new_user("ulla").await;
    server.client.mark_verified(&admin, &plain.id).await;
    let mut browser = Browser::new(&server);
    let done = browser.sign_in(&server, "local", &plain.email).await;
    assert_eq!(redirected_to(&done), "/home");
    let cookie = browser.session(&server).expect("a session");
    assert_eq!(server.client.session(&cookie).await["user"]["id"], plain.id.as_str());
    assert!(!browser.jar[&host].contains_key(TWO_FACTOR_COOKIE));
}

#[tokio::test]
async fn the_start_calls_check_their_input() {
    let (server, _idp) = setup(json!({})).await;
    let post = |path: &str, body: Value| server.client.post(path).json(&body).send();
    let resp =
        post("/api/auth/sign-in/social", json!({"provider": "local", "callbackURL": "https://evil.example/x"})).await;
    assert_auth_error(&resp, 403, "INVALID_CALLBACK_URL");
    let resp =
        post("/api/auth/sign-in/social", json!({"provider": "local", "errorCallbackURL": "//evil.example"})).await;
    assert_auth_error(&resp, 403, "INVALID_ERROR_CALLBACK_URL");
    let resp = post("/api/auth/sign-in/social", json!({"provider": "nope"})).await;
    assert_auth_error(&resp, 404, "PROVIDER_NOT_FOUND");
    let resp = post("/api/auth/sign-in/social", json!({"provider": "local", "idToken": {"token": "x"}})).await;
    assert_auth_error(&resp, 401, "INVALID_TOKEN");
    // disableRedirect: the URL without Location; the generic plugin's call by providerId.
    let resp = post("/api/auth/sign-in/oauth2", json!({"providerId": "local", "disableRedirect": true})).await;
    assert_eq!(resp.status, 200, "{}", resp.text);
    assert_eq!(resp.json()["redirect"], false);
    assert!(resp.header("location").is_none());
    let url = resp.json()["url"].as_str().unwrap().to_owned();
    assert!(url.contains("oauth2%2Fcallback%2Flocal"), "{url}");
    let cookie = resp.set_cookies().into_iter().find(|c| c.name.ends_with(".oauth_flow")).expect("the flow cookie");
    assert_eq!(cookie.attr("samesite"), Some("Lax"));
    assert!(cookie.attrs.contains_key("httponly"));
}

#[tokio::test]
async fn the_generic_plugins_paths_sign_in_too() {
    let (server, _idp) = setup(json!({})).await;
    let mut browser = Browser::new(&server);
    let url = browser.start(&server, "/api/auth/sign-in/oauth2", &json!({"providerId": "local"})).await;
    let done = browser.through_provider(&url, "judy@example.com").await;
    assert!(done.url.contains("/api/auth/oauth2/callback/local"), "{}", done.url);
    assert_eq!(redirected_to(&done), "/welcome");
    assert!(browser.session(&server).is_some());
}

/// Signs `kim@example.com` in on an embedded server with `store_tokens` as given; what the store then holds of
/// the linked account: (provider, subject, sealed tokens), and the data directory.
async fn stored_accounts(store_tokens: bool) -> (Vec<(String, String, Option<Vec<u8>>)>, tempfile::TempDir) {
    let mut idp = Idp::start();
    let issuer = idp.issuer.clone();
    let dir = tempfile::tempdir().unwrap();
    let mut config = test_config(dir.path());
    config.oauth.store_tokens = store_tokens;
    config.oauth.providers = vec![provider("local", &issuer, "svc", true)];
    let server = TestServer::start_embedded(config).await;
    let base = format!("http://{}", server.addr);
    idp.configure(json!({"clients": [
        {"client_id": "svc", "client_secret": "svc-secret", "redirect_uris": [format!("{base}/api/auth/callback/local")]},
    ]}));
    let mut browser = Browser::new(&server);
    let done = browser.sign_in(&server, "local", "kim@example.com").await;
    assert_eq!(redirected_to(&done), "/welcome");
    server.stop().await;

    let store = service_auth::store::Store::open(dir.path()).unwrap();
    let mut sealed = Vec::new();
    store
        .visit(|record| {
            if let service_auth::store::Record::Account(a) = record {
                sealed.push((a.provider, a.subject, a.sealed_tokens));
            }
            Ok(())
        })
        .unwrap();
    store.close();
    (sealed, dir)
}

#[tokio::test]
async fn without_store_tokens_no_token_is_kept() {
    let (accounts, _dir) = stored_accounts(false).await;
    assert_eq!(accounts.len(), 1);
    assert_eq!(accounts[0].2, None);
}

#[tokio::test]
async fn with_store_tokens_the_providers_tokens_are_kept_sealed_with_the_data_key() {
    let (sealed, dir) = stored_accounts(true).await;
    let [(provider, subject, Some(sealed))] = &sealed[..] else { panic!("one account with tokens: {sealed:?}") };
    let key = service_auth::data_key::DataKey::load_or_create(dir.path()).unwrap();
    let context = service_auth::oauth::Tokens::context(provider, subject);
    let tokens: service_auth::oauth::Tokens = serde_json::from_slice(&key.open(sealed, &context).unwrap()).unwrap();
    assert!(!tokens.access_token.is_empty() && tokens.id_token.is_some());
    assert!(key.open(sealed, b"another context").is_err(), "bound to its account");
    let file = std::fs::read(service_auth::store::file_in(dir.path())).unwrap();
    let access = tokens.access_token.as_bytes();
    assert!(!file.windows(access.len()).any(|w| w == access), "the access token is not in the store in the clear");
}

#[tokio::test]
async fn an_administrator_sees_and_unlinks_a_users_identities_but_never_the_last_way_in() {
    let (server, _idp) = setup(json!({})).await;
    let admin = server.client.admin_session().await;
    // Carol: a password and an identity of `other`, linked by herself. Alice: only an identity of `local`.
    let carol = server.client.new_user("carol").await;
    let mut browser = Browser::new(&server);
    browser.jar.entry(Browser::host(&server.client.base)).or_default().insert(COOKIE.into(), carol.cookie.clone());
    let url = browser.start(&server, "/api/auth/link-social", &json!({"provider": "other"})).await;
    browser.through_provider(&url, "carol@example.com").await;
    let mut alice_browser = Browser::new(&server);
    alice_browser.sign_in(&server, "local", "alice@example.com").await;
    let alice = server.client.session(&alice_browser.session(&server).unwrap()).await["user"]["id"]
        .as_str()
        .unwrap()
        .to_owned();

    let accounts = |id: &str| format!("/api/admin/users/{id}/accounts");
    let r = server.client.get(&accounts(&carol.id)).cookie(&admin).send().await;
    assert_eq!(r.status, 200, "{}", r.text);
    let listed = r.json();
    assert_eq!(listed["password"], true);
    let linked = listed["accounts"].as_array().unwrap();
    assert_eq!(linked.len(), 1, "{listed}");
    let mut keys: Vec<&str> = linked[0].as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(keys, ["account_id", "created_at", "email", "id", "provider_id"], "no token, ever");
    assert_eq!((&linked[0]["provider_id"], &linked[0]["email"]), (&json!("other"), &json!("carol@example.com")));
    let carols = linked[0]["id"].as_str().unwrap().to_owned();
    let r = server.client.get(&accounts(&alice)).cookie(&admin).send().await;
    assert_eq!(r.json()["password"], false);
    let alices = r.json()["accounts"][0]["id"].as_str().unwrap().to_owned();

    // Refusals: not an administrator, no session, an unknown account, a bad id, an identity of someone else.
    assert_eq!(server.client.get(&accounts(&carol.id)).cookie(&carol.cookie).send().await.status, 403);
    assert_eq!(server.client.get(&accounts(&carol.id)).send().await.status, 401);
    let nobody = "01890000-0000-7000-8000-000000000000";
    assert_eq!(server.client.get(&accounts(nobody)).cookie(&admin).send().await.status, 404);
    assert_eq!(server.client.get("/api/admin/users/x/accounts").cookie(&admin).send().await.status, 400);
    let unlink = |user: &str, account: &str| format!("/api/admin/users/{user}/accounts/{account}");
    assert_eq!(server.client.delete(&unlink(&carol.id, &carols)).cookie(&carol.cookie).send().await.status, 403);
    assert_eq!(server.client.delete(&unlink(nobody, &carols)).cookie(&admin).send().await.status, 404);
    let r = server.client.delete(&unlink(&carol.id, &alices)).cookie(&admin).send().await;
    assert_eq!(r.status, 404, "Alice's identity is not Carol's: {}", r.text);

    // Alice's only way in stays: 409, saying why.
    let r = server.client.delete(&unlink(&alice, &alices)).cookie(&admin).send().await;
    assert_eq!(r.status, 409, "{}", r.text);
    assert!(r.json()["error"].as_str().unwrap().contains("last way in"), "{}", r.text);
    assert_eq!(
        server.client.get(&accounts(&alice)).cookie(&admin).send().await.json()["accounts"].as_array().unwrap().len(),
        1
    );

    // Carol's identity goes; her password stays, and the identity no longer signs in to her account.
    let r = server.client.delete(&unlink(&carol.id, &carols)).cookie(&admin).send().await;
    assert_eq!((r.status, r.json()), (200, json!({"success": true})), "{}", r.text);
    let r = server.client.get(&accounts(&carol.id)).cookie(&admin).send().await;
    assert_eq!(r.json(), json!({"password": true, "accounts": []}));
    assert_eq!(providers(&accounts_of(&server, &carol.cookie).await), ["credential"]);
    let again = server.client.delete(&unlink(&carol.id, &carols)).cookie(&admin).send().await;
    assert_eq!(again.status, 404, "already gone");

    // Audited in the same commit: the administrator unlinked `other` from Carol's account.
    let audit = server.client.get("/api/admin/audit?action=account.unlinked").cookie(&admin).send().await.json();
    let entries = audit["entries"].as_array().unwrap();
    let admin_id = server.client.session(&admin).await["user"]["id"].clone();
    assert!(
        entries
            .iter()
            .any(|e| e["actor_id"] == admin_id && e["target_id"] == carol.id.as_str() && e["detail"] == "other"),
        "{audit}"
    );
}

/// An ID token for `login`, got from the provider by the app itself (as a native SDK or Google One Tap does): the
/// code flow as the service's own client `svc` (same audience), with PKCE and `nonce`, back to the app's redirect
/// URI, then the token request. (ID token, access token.)
pub(super) async fn id_token_from_provider(
    server: &TestServer,
    issuer: &str,
    login: &str,
    nonce: &str,
) -> (String, String) {
    use base64::Engine;
    use sha2::Digest;
    let app = format!("http://{}/app/callback", server.addr);
    let verifier = "an-app-s-own-pkce-verifier-of-43-characters-or-more";
    let challenge = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(verifier));
    let mut url = url::Url::parse(&format!("{issuer}/auth")).unwrap();
    url.query_pairs_mut()
        .append_pair("client_id", "svc")
        .append_pair("response_type", "code")
        .append_pair("scope", "openid email profile")
        .append_pair("redirect_uri", &app)
        .append_pair("state", "app-state")
        .append_pair("nonce", nonce)
        .append_pair("code_challenge", &challenge)
        .append_pair("code_challenge_method", "S256");
    let mut browser = Browser::new(server);
    let mut page = browser.send(reqwest::Method::GET, url.as_str(), None).await;
    let mut code = None;
    for _ in 0..12 {
        match (page.status, page.location.clone()) {
            (300..=399, Some(next)) if next.starts_with(&app) => {
                code = Some(extract_query(&next, "code"));
                break;
            }
            (300..=399, Some(next)) => page = browser.send(reqwest::Method::GET, &next, None).await,
            (200, _) if page.body.contains("name=\"login\"") => {
                let form =
                    format!("login={}", url::form_urlencoded::byte_serialize(login.as_bytes()).collect::<String>());
                let at = page.url.clone();
                page =
                    browser.send(reqwest::Method::POST, &at, Some(("application/x-www-form-urlencoded", form))).await;
            }
            _ => panic!("stuck at {} ({}): {}", page.url, page.status, page.body),
        }
    }
    let code = code.expect("the provider's code");
    let answer = reqwest::Client::builder()
        .no_proxy()
        .build()
        .unwrap()
        .post(format!("{issuer}/token"))
        .basic_auth("svc", Some("svc-secret"))
        .form(&[
            ("grant_type", "authorization_code"),
            ("code", &code),
            ("redirect_uri", &app),
            ("code_verifier", verifier),
        ])
        .send()
        .await
        .unwrap();
    let tokens: Value = answer.json().await.unwrap();
    let token = |name: &str| tokens[name].as_str().unwrap_or_else(|| panic!("no {name}: {tokens}")).to_owned();
    (token("id_token"), token("access_token"))
}

/// better-auth's `idToken` sign-in with a token the real provider issued: the nonce the app used is checked, the
/// audience is the provider entry's client, and a good token gives the session at once. This provider keeps the
/// address out of the ID token when it issues an access token (OpenID Connect's default): with the app's access
/// token it is read from the user-info endpoint (which must name the same subject), without it there is none.
#[tokio::test]
async fn an_id_token_the_app_got_from_the_provider_signs_in_without_a_redirect() {
    let (server, idp) = setup(json!({})).await;
    let (token, access) = id_token_from_provider(&server, &idp.issuer, "lena@example.com", "app-nonce-1").await;
    let post = |body: Value| server.client.post("/api/auth/sign-in/social").json(&body).send();
    let resp = post(json!({"provider": "local", "idToken": {"token": token, "nonce": "another-nonce"}})).await;
    assert_auth_error(&resp, 401, "INVALID_TOKEN");
    // `other` is the client svc2: a token issued to svc is not for it.
    let resp = post(json!({"provider": "other", "idToken": {"token": token}})).await;
    assert_auth_error(&resp, 401, "INVALID_TOKEN");
    assert!(resp.session_cookie().is_none());
    let resp = post(json!({"provider": "local", "idToken": {"token": token, "nonce": "app-nonce-1"}})).await;
    assert_auth_error(&resp, 401, "USER_EMAIL_NOT_FOUND");
    let proof = json!({"token": token, "nonce": "app-nonce-1", "accessToken": access});
    let resp = post(json!({"provider": "local", "idToken": proof})).await;
    assert_eq!(resp.status, 200, "{}", resp.text);
    let body = resp.json();
    assert_eq!(body["redirect"], false);
    assert!(body.get("url").is_none(), "{body}");
    assert_eq!(body["user"]["email"], "lena@example.com");
    let cookie = resp.session_cookie().expect("the session cookie").value;
    assert_eq!(body["token"], cookie.as_str());
    let session = server.client.session(&cookie).await;
    assert_eq!(session["user"]["email"], "lena@example.com");
    assert_eq!(providers(&accounts_of(&server, &cookie).await), ["local"]);
}

/// The callback's own time (what the server does once the provider has answered) is recorded apart from the time
/// spent waiting for the provider.
#[tokio::test]
async fn a_callbacks_own_time_is_measured_apart_from_the_providers() {
    let (server, _idp, metrics) = setup_with_metrics().await;
    let mut browser = Browser::new(&server);
    let done = browser.sign_in(&server, "local", "mona@example.com").await;
    assert_eq!(redirected_to(&done), "/welcome");
    let text = scrape(metrics).await;
    let count = metric(&text, "service_auth_oauth_callback_own_seconds_count");
    let sum = metric(&text, "service_auth_oauth_callback_own_seconds_sum");
    let total =
        metric(&text, "service_auth_http_request_duration_seconds_sum{route=\"/api/auth/callback/{provider}\"}");
    assert_eq!(count, 1.0, "{text}");
    // Less than the whole request: the token exchange and the keys were left out.
    assert!(sum > 0.0 && sum < total, "own {sum} s of {total} s");
}

/// The callback's own commits: the flow's take (written while the provider is asked), then the account's records
/// and the session in one commit: two write requests to the store, for a new account and for a returning one (the
/// session had a commit of its own before, three in all). Every audit entry is still written.
#[tokio::test]
async fn a_callback_writes_the_take_then_the_account_with_its_session() {
    let (server, _idp, metrics) = setup_with_metrics().await;
    for landing in ["/welcome", "/home"] {
        let mut browser = Browser::new(&server);
        let url = browser.start(&server, "/api/auth/sign-in/social", &json!({"provider": "local"})).await;
        let callback = browser.up_to_callback(&url, "olga@example.com").await;
        let before = metric(&scrape(metrics).await, "service_auth_store_commit_batch_requests_sum");
        let done = browser.send(reqwest::Method::GET, &callback, None).await;
        let after = metric(&scrape(metrics).await, "service_auth_store_commit_batch_requests_sum");
        assert_eq!(redirected_to(&done), landing);
        assert_eq!(after - before, 2.0, "write requests of the callback ({landing})");
        let cookie = browser.session(&server).expect("a session");
        assert_eq!(server.client.session(&cookie).await["user"]["email"], "olga@example.com");
    }
    let admin = server.client.admin_session().await;
    let audit = server.client.get("/api/admin/audit?limit=50").cookie(&admin).send().await.json();
    let actions: Vec<&str> =
        audit["entries"].as_array().unwrap().iter().map(|e| e["action"].as_str().unwrap()).collect();
    let count = |wanted: &str| actions.iter().filter(|a| **a == wanted).count();
    assert_eq!(count("user.created"), 1, "olga, through the provider: {actions:?}");
    assert_eq!(count("account.linked"), 1, "{actions:?}");
    assert_eq!(count("sign_in.provider"), 1, "the returning sign-in: {actions:?}");
    assert!(count("sign_in.succeeded") >= 2, "both sign-ins: {actions:?}");
}

/// The same callback twice at once (a replay racing the real one): one finishes, with a session; the other finds
/// the state used, and starts none.
#[tokio::test]
async fn a_callback_replayed_in_parallel_signs_in_once() {
    let (server, _idp) = setup(json!({})).await;
    let mut cookie = None;
    for (login, landing) in [("petra@example.com", "/welcome"), ("petra@example.com", "/home")] {
        let mut browser = Browser::new(&server);
        let url = browser.start(&server, "/api/auth/sign-in/social", &json!({"provider": "local"})).await;
        let callback = browser.up_to_callback(&url, login).await;
        let mut replay = Browser::new(&server);
        replay.jar = browser.jar.clone();
        let (one, two) = tokio::join!(
            browser.send(reqwest::Method::GET, &callback, None),
            replay.send(reqwest::Method::GET, &callback, None)
        );
        let mut statuses = [one.status, two.status];
        statuses.sort_unstable();
        assert_eq!(statuses, [302, 400], "{} / {}", one.body, two.body);
        let (won, lost, winner, loser) =
            if one.status == 302 { (&one, &two, &browser, &replay) } else { (&two, &one, &replay, &browser) };
        assert_eq!(redirected_to(won), landing);
        assert!(lost.body.contains("STATE_NOT_FOUND"), "{}", lost.body);
        cookie = Some(winner.session(&server).expect("a session"));
        assert_eq!(loser.session(&server), None);
    }
    // Two flows, two sessions: the replays started none.
    let own = server.client.get("/api/auth/list-sessions").cookie(&cookie.unwrap()).send().await;
    assert_eq!(own.json().as_array().unwrap().len(), 2, "one session per flow: {}", own.text);
}

/// [`setup`] with a metrics listener: the server, the provider and the metrics address.
async fn setup_with_metrics() -> (TestServer, Idp, std::net::SocketAddr) {
    let mut idp = Idp::start();
    let issuer = idp.issuer.clone();
    let server = TestServer::start_adjusted(|c| {
        c.oauth.providers = vec![provider("local", &issuer, "svc", true)];
        c.metrics.listen = Some(super::metrics::ANY_PORT);
    })
    .await;
    let metrics = server.metrics();
    let base = format!("http://{}", server.addr);
    idp.configure(json!({"clients": [
        {"client_id": "svc", "client_secret": "svc-secret", "redirect_uris": [format!("{base}/api/auth/callback/local")]},
    ]}));
    (server, idp, metrics)
}

pub(super) async fn scrape(metrics: std::net::SocketAddr) -> String {
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    client.get(format!("http://{metrics}/metrics")).send().await.unwrap().text().await.unwrap()
}

/// The value of the sample `name` (with its labels, as rendered); 0 when absent.
pub(super) fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name).and_then(|rest| rest.strip_prefix(' ')))
        .map(|v| v.trim().parse().unwrap())
        .unwrap_or(0.0)
}

/// The cumulative counts of `service_auth_oauth_callback_own_seconds`'s buckets: (upper bound in seconds, count).
pub(super) fn own_time_buckets(text: &str) -> Vec<(f64, f64)> {
    buckets_of(text, "service_auth_oauth_callback_own_seconds_bucket{le=\"")
}

/// One phase of a callbacks' own-time measurement: how many of the `count` callbacks between the scrapes `before`
/// and `after` ([`own_time_buckets`]) fell in each bucket, as p50 and p99 to the bucket and the share within each
/// bound up to 25 ms. Asserts that the histogram saw exactly `count`.
pub(super) fn own_time_phase(before: &[(f64, f64)], after: &[(f64, f64)], count: usize) -> String {
    let buckets: Vec<(f64, f64)> = after.iter().zip(before).map(|((le, a), (_, b))| (*le, a - b)).collect();
    let total = buckets.last().map(|(_, c)| *c).unwrap_or(0.0);
    assert_eq!(total as usize, count);
    let within = |q: f64| buckets.iter().find(|(_, c)| *c >= q * total).map(|(le, _)| *le).unwrap_or(f64::INFINITY);
    let shares: Vec<String> = buckets
        .iter()
        .filter(|(le, _)| *le <= 0.025)
        .map(|(le, c)| format!("<= {} ms: {:.1}%", le * 1000.0, 100.0 * c / total))
        .collect();
    format!("own time p50 <= {} ms, p99 <= {} ms; {}", within(0.5) * 1000.0, within(0.99) * 1000.0, shares.join(", "))
}

/// The cumulative counts of the buckets whose lines start with `prefix` (up to the bound's opening quote).
fn buckets_of(text: &str, prefix: &str) -> Vec<(f64, f64)> {
    text.lines()
        .filter_map(|l| l.strip_prefix(prefix))
        .filter_map(|rest| {
            let (le, count) = rest.split_once("\"} ")?;
            let le = if le == "+Inf" { f64::INFINITY } else { le.parse().ok()? };
            Some((le, count.trim().parse().ok()?))
        })
        .collect()
}

/// The callback's own time, for BENCHMARKS.md (#30): `OAUTH_CALLBACKS` (default 300) sign-ins through
/// oidc-provider one after another, each a new account (the flow taken while the provider is asked; the account,
/// its link and the session in the next commit), then as many returning ones (the same two commits). The
/// server's `service_auth_oauth_callback_own_seconds` histogram leaves out the time the callback waited for the
/// provider (the token exchange, the keys); printed: the share of callbacks within each bucket, the buckets p50 and
/// p99 fall in, and the whole callback's mean for comparison.
/// `cargo test --release --test api measure_callback_own_time -- --ignored --nocapture`
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement, run by hand"]
async fn measure_callback_own_time() {
    let count: usize = std::env::var("OAUTH_CALLBACKS").ok().and_then(|v| v.parse().ok()).unwrap_or(300);
    let (server, _idp, metrics) = setup_with_metrics().await;
    let route = "{route=\"/api/auth/callback/{provider}\"}";
    let mut before = own_time_buckets(&scrape(metrics).await);
    let (mut whole_sum, mut whole_count, mut own_sum) = (0.0, 0.0, 0.0);
    let first = scrape(metrics).await;
    let mut commit_sum = metric(&first, "service_auth_store_commit_duration_seconds_sum");
    let mut commit_n = metric(&first, "service_auth_store_commit_duration_seconds_count");
    let mut commits_before = buckets_of(&first, "service_auth_store_commit_duration_seconds_bucket{le=\"");
    for (phase, landing) in [("new accounts", "/welcome"), ("returning accounts", "/home")] {
        for n in 0..count {
            let mut browser = Browser::new(&server);
            let done = browser.sign_in(&server, "local", &format!("measured{n}@example.com")).await;
            assert_eq!(redirected_to(&done), landing);
        }
        let text = scrape(metrics).await;
        let after = own_time_buckets(&text);
        let buckets: Vec<(f64, f64)> = after.iter().zip(&before).map(|((le, a), (_, b))| (*le, a - b)).collect();
        let total = buckets.last().map(|(_, c)| *c).unwrap_or(0.0);
        assert_eq!(total as usize, count, "{text}");
        let within = |q: f64| buckets.iter().find(|(_, c)| *c >= q * total).map(|(le, _)| *le).unwrap_or(f64::INFINITY);
        let shares: Vec<String> = buckets
            .iter()
            .filter(|(le, _)| *le <= 0.025)
            .map(|(le, c)| format!("<= {} ms: {:.1}%", le * 1000.0, 100.0 * c / total))
            .collect();
        let sum = metric(&text, &format!("service_auth_http_request_duration_seconds_sum{route}")) - whole_sum;
        let calls = metric(&text, &format!("service_auth_http_request_duration_seconds_count{route}")) - whole_count;
        let own = metric(&text, "service_auth_oauth_callback_own_seconds_sum") - own_sum;
        // The store's commits in the phase (each callback's two, each fsynced, and the start's one; grouped when
        // they meet in the writer).
        let commits = metric(&text, "service_auth_store_commit_duration_seconds_sum") - commit_sum;
        let commit_count = metric(&text, "service_auth_store_commit_duration_seconds_count") - commit_n;
        let commit_buckets = buckets_of(&text, "service_auth_store_commit_duration_seconds_bucket{le=\"");
        let commit_shares: Vec<String> = commit_buckets
            .iter()
            .zip(&commits_before)
            .filter(|((le, _), _)| [0.001, 0.0025, 0.005, 0.01].contains(le))
            .map(|((le, a), (_, b))| format!("<= {} ms: {:.1}%", le * 1000.0, 100.0 * (a - b) / commit_count))
            .collect();
        commits_before = commit_buckets;
        println!(
            "{phase}: {count} callbacks; own time mean {:.2} ms, p50 <= {} ms, p99 <= {} ms; {}; whole callback \
             (provider included) mean {:.2} ms; store commits in the phase: {commit_count}, mean {:.2} ms, {}",
            1000.0 * own / total,
            within(0.5) * 1000.0,
            within(0.99) * 1000.0,
            shares.join(", "),
            1000.0 * sum / calls,
            1000.0 * commits / commit_count,
            commit_shares.join(", "),
        );
        whole_sum += sum;
        whole_count += calls;
        own_sum += own;
        commit_sum += commits;
        commit_n += commit_count;
        before = after;
    }
}
