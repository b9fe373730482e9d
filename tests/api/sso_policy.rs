//! An organization's single sign-on policy (`/api/admin/organizations/{id}/sso-policy`): who may read and change
//! it, and what it refuses while it is on: every way in that is not the organization's provider, for every address
//! of its verified domains, known or not, with one answer; a service administrator's password still signs in.
//! Against the real OpenID Connect provider the single sign-on tests start (tests/api/sso.rs).

use std::time::Instant;

use serde_json::{Value, json};

use super::harness::*;
use super::oauth::{Browser, redirected_to};
use super::org_plugin::ok;
use super::sso::{Setup, audit_actions, setup_adjusted, sso_sign_in, verified};

fn policy_path(t: &Setup) -> String {
    format!("/api/admin/organizations/{}/sso-policy", t.org)
}

async fn put_policy(t: &Setup, cookie: &str, body: &Value) -> Resp {
    t.s.req(reqwest::Method::PUT, &policy_path(t)).cookie(cookie).json(body).send().await
}

/// The server of tests/api/sso.rs with sign-in links and mailed codes on, `acme` registered for the
/// organization with `example.com` (the service administrator's domain, and its owner's) confirmed.
async fn with_policy_domain() -> Setup {
    let t = setup_adjusted(|c| {
        c.magic_link.enabled = true;
        c.email_otp.enabled = true;
        c.rate_limit.failures_per_account = 1000;
        c.rate_limit.sign_in_per_address = 1000;
        c.rate_limit.sign_up_per_address = 1000;
        c.rate_limit.mail_per_address = 1000;
        c.rate_limit.mail_per_email = 1000;
    })
    .await;
    verified(&t, "example.com", None).await;
    t
}

fn assert_sso_required(r: &Resp) {
    assert_eq!(r.status, 403, "{}", r.text);
    assert_eq!(r.json()["code"], "SSO_REQUIRED", "{}", r.text);
}

/// Only an owner or a service administrator changes the policy (an admin of the organization reads it; a plain
/// member and a stranger do neither); the answer names the verified domains it covers; each change is audited
/// once (setting what is set writes nothing); malformed input is a precise 400.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_an_owner_or_a_service_administrator_changes_the_policy_and_each_change_is_audited() {
    let t = with_policy_domain().await;
    let s = &t.s;
    let read = ok(&s.get(&policy_path(&t)).cookie(&t.owner.cookie).send().await);
    assert_eq!(read, json!({"domains": ["example.com"], "organizationId": t.org, "requireSso": false}));

    let stranger = s.new_user("stranger").await;
    let refused = put_policy(&t, &stranger.cookie, &json!({"requireSso": true})).await;
    assert_eq!(refused.status, 403, "{}", refused.text);
    assert_eq!(s.get(&policy_path(&t)).cookie(&stranger.cookie).send().await.status, 403);
    let unknown = format!("/api/admin/organizations/{}/sso-policy", uuid::Uuid::now_v7());
    let admin = s.admin_session().await;
    assert_eq!(s.get(&unknown).cookie(&admin).send().await.status, 404);
    for (body, names) in [
        (json!({"requireSso": "yes"}), "requireSso"),
        (json!({}), "requireSso"),
        (json!({"requireSso": true, "other": 1}), "other"),
    ] {
        let r = put_policy(&t, &admin, &body).await;
        assert_eq!(r.status, 400, "{body}: {}", r.text);
        assert!(r.json()["error"].as_str().unwrap().contains(names), "{body}: {}", r.text);
    }
    let bad_path = s.get("/api/admin/organizations/not-a-uuid/sso-policy").cookie(&admin).send().await;
    assert_eq!(bad_path.status, 400, "{}", bad_path.text);

    let on = ok(&put_policy(&t, &t.owner.cookie, &json!({"requireSso": true})).await);
    assert_eq!(on["requireSso"], true);
    ok(&put_policy(&t, &t.owner.cookie, &json!({"requireSso": true})).await);
    let off = ok(&put_policy(&t, &admin, &json!({"requireSso": false})).await);
    assert_eq!(off["requireSso"], false);
    assert_eq!(ok(&s.get(&policy_path(&t)).cookie(&admin).send().await)["requireSso"], false);
    let changes = audit_actions(s).await.into_iter().filter(|a| a == "sso_policy.updated").count();
    assert_eq!(changes, 2, "on, then off: the repeated setting wrote nothing");
}

/// While the policy is on, every way in to an address of the verified domain that is not its provider answers
/// 403 `SSO_REQUIRED`, the same for a known address with its right or a wrong password and for an unknown one
/// (and a subdomain); sign-up, reset links and mailed ways in alike. The service administrator of that domain
/// still signs in by password, other domains are untouched, and the provider signs people in. Off, passwords
/// work again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn while_sso_is_required_no_other_way_in_works_for_the_domain_and_administrators_keep_theirs() {
    let t = with_policy_domain().await;
    let s = &t.s;
    let (status, _, _) = s.sign_up("Bob", "bob@example.com", PASSWORD).await;
    assert_eq!(status, 200);
    let (status, _, _) = s.sign_up("Olga", "olga@other.test", PASSWORD).await;
    assert_eq!(status, 200);
    s.login("bob@example.com", PASSWORD).await;
    ok(&put_policy(&t, &t.owner.cookie, &json!({"requireSso": true})).await);

    let answers: Vec<Resp> = vec![
        s.sign_in_body(&json!({"email": "bob@example.com", "password": PASSWORD})).await,
        s.sign_in_body(&json!({"email": "bob@example.com", "password": "a wrong password"})).await,
        s.sign_in_body(&json!({"email": "nobody@example.com", "password": PASSWORD})).await,
        s.sign_in_body(&json!({"email": "bob@eu.example.com", "password": PASSWORD})).await,
        s.sign_in_body(&json!({"email": t.owner.email, "password": PASSWORD})).await,
    ];
    for answer in &answers {
        assert_sso_required(answer);
        assert_eq!(answer.text, answers[0].text, "one answer for every address of the domain");
    }
    let signed_up = s.sign_up_body(&json!({"name": "New", "email": "new@example.com", "password": PASSWORD})).await;
    assert_sso_required(&signed_up);
    let again = s.sign_up_body(&json!({"name": "Bob", "email": "bob@example.com", "password": PASSWORD})).await;
    assert_eq!(again.text, signed_up.text, "a taken address answers as a free one");
    for (path, body) in [
        ("/api/auth/request-password-reset", json!({"email": "bob@example.com"})),
        ("/api/auth/request-password-reset", json!({"email": "nobody@example.com"})),
        ("/api/auth/sign-in/magic-link", json!({"email": "bob@example.com"})),
        ("/api/auth/email-otp/send-verification-otp", json!({"email": "bob@example.com", "type": "sign-in"})),
        ("/api/auth/email-otp/send-verification-otp", json!({"email": "bob@example.com", "type": "forget-password"})),
        ("/api/auth/sign-in/email-otp", json!({"email": "bob@example.com", "otp": "123456"})),
    ] {
        let r = s.post(path).json(&body).send().await;
        assert_sso_required(&r);
    }

    // The service administrator (admin@example.com) keeps the password; other domains are untouched.
    s.admin_session().await;
    s.login("olga@other.test", PASSWORD).await;
    let r = s.post("/api/auth/sign-in/magic-link").json(&json!({"email": "olga@other.test"})).send().await;
    assert_eq!(r.status, 200, "{}", r.text);
    // The organization's provider signs the domain's people in.
    let mut browser = Browser::new(s);
    let through = sso_sign_in(&mut browser, s, &json!({"email": "carol@example.com"}), "carol@example.com").await;
    assert_eq!(redirected_to(&through), "/welcome");
    assert!(browser.session(s).is_some(), "a session through the provider");

    ok(&put_policy(&t, &t.owner.cookie, &json!({"requireSso": false})).await);
    s.login("bob@example.com", PASSWORD).await;
}

/// The policy's answer takes the time a password check takes, for a known address (right or wrong password) and
/// for an unknown one: the password is verified either way, so the time does not tell who has an account.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_policys_refusal_takes_the_same_time_for_known_and_unknown_addresses() {
    let t = with_policy_domain().await;
    let s = &t.s;
    let (status, _, _) = s.sign_up("Bob", "bob@example.com", PASSWORD).await;
    assert_eq!(status, 200);
    ok(&put_policy(&t, &t.owner.cookie, &json!({"requireSso": true})).await);
    let (mut known, mut unknown) = (Vec::new(), Vec::new());
    for i in 0..20 {
        for (email, samples) in [("bob@example.com", &mut known), ("ghost@example.com", &mut unknown)] {
            let started = Instant::now();
            let r = s.sign_in_body(&json!({"email": email, "password": format!("password-{i}")})).await;
            samples.push(started.elapsed().as_secs_f64() * 1000.0);
            assert_sso_required(&r);
        }
    }
    // The fastest of each, as tests/api/security.rs measures: noise only ever adds time.
    let fastest = |v: Vec<f64>| v.into_iter().fold(f64::INFINITY, f64::min);
    let (k, u) = (fastest(known), fastest(unknown));
    eprintln!("timing: SSO_REQUIRED for a known address {k:.1} ms, an unknown one {u:.1} ms");
    assert!(k > 5.0 && u > 5.0, "both must run a full argon2id verify: {k:.1} / {u:.1} ms");
    assert!(k.max(u) < 2.0 * k.min(u), "the two differ too much: known {k:.1} ms vs unknown {u:.1} ms");
}

/// A social sign-in (`sign-in/social` through a configured provider, `local` on the same OpenID Connect provider,
/// by its redirect or with an ID token the app got) and a passkey sign-in are refused as a password is while the policy is on: by the address's domain, before any
/// account is made or linked (an unknown address too), and a passkey only once its assertion is right (only then
/// is its account known). The service administrator keeps both ways in; other domains are untouched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn while_sso_is_required_social_and_passkey_sign_in_are_refused_too() {
    let t = setup_adjusted(|c| {
        // The provider's origin (trusted by the SSO setup), kept beside the passkeys' page.
        let issuer = c.trusted_origins[0].clone();
        super::passkeys::with_passkeys(c);
        c.trusted_origins.push(issuer.clone());
        c.oauth.providers = vec![super::oauth::provider("local", &issuer, "svc", true)];
    })
    .await;
    verified(&t, "example.com", None).await;
    let s = &t.s;
    let admin = s.admin_session().await;
    let admin_id = s.session(&admin).await["user"]["id"].as_str().unwrap().to_owned();
    s.mark_verified(&admin, &admin_id).await;
    let bob = s.new_user("bob").await;
    s.mark_verified(&admin, &bob.id).await;
    let mut bobs_key = super::passkeys::Browser::new();
    let bobs = super::passkeys::register(s, &mut bobs_key, &bob.cookie, None).await;
    let mut admins_key = super::passkeys::Browser::new();
    let admins = super::passkeys::register(s, &mut admins_key, &admin, None).await;
    let credential = |p: &Value| p["credentialID"].as_str().unwrap().to_owned();
    let (status, olga, _) = s.sign_up("Olga", "olga@other.test", PASSWORD).await;
    assert_eq!(status, 200, "{olga}");
    s.mark_verified(&admin, olga["user"]["id"].as_str().unwrap()).await;
    let social = |login: &'static str| async move {
        let mut browser = Browser::new(s);
        let page = browser.start(s, "/api/auth/sign-in/social", &json!({"provider": "local"})).await;
        let page = browser.through_provider(&page, login).await;
        (redirected_to(&page), browser.session(s))
    };
    // Before the policy: Bob's social sign-in and passkey work.
    assert_eq!(social("bob@example.com").await.0, "/home");
    assert_eq!(super::passkeys::sign_in(s, &mut bobs_key, &credential(&bobs)).await.status, 200);

    ok(&put_policy(&t, &t.owner.cookie, &json!({"requireSso": true})).await);
    for login in ["bob@example.com", "nobody@example.com", "carl@eu.example.com"] {
        let (to, session) = social(login).await;
        assert_eq!(to, "/oops?error=SSO_REQUIRED", "{login}");
        assert_eq!(session, None, "{login}");
    }
    let users = s.get("/api/admin/users?q=example.com").cookie(&admin).send().await.json();
    let emails: Vec<&str> = users["users"].as_array().unwrap().iter().filter_map(|u| u["email"].as_str()).collect();
    assert!(!emails.iter().any(|e| e.starts_with("nobody@") || e.starts_with("carl@")), "no account made: {emails:?}");
    // An ID token the app got from the provider itself (`sign-in/social` with `idToken`): the same refusal, as JSON.
    let (token, access) = super::oauth::id_token_from_provider(s, &t.idp.issuer, "bob@example.com", "n-1").await;
    let proof = json!({"provider": "local", "idToken": {"token": token, "nonce": "n-1", "accessToken": access}});
    let by_token = s.post("/api/auth/sign-in/social").json(&proof).send().await;
    assert_sso_required(&by_token);
    assert!(by_token.session_cookie().is_none_or(|c| c.value.is_empty()), "no session");
    let refused = super::passkeys::sign_in(s, &mut bobs_key, &credential(&bobs)).await;
    assert_sso_required(&refused);
    assert!(refused.session_cookie().is_none_or(|c| c.value.is_empty()), "no session");

    // The service administrator (admin@example.com) keeps both; another domain is untouched.
    let (to, session) = social(super::harness::ADMIN_EMAIL).await;
    assert_eq!((to.as_str(), session.is_some()), ("/home", true));
    assert_eq!(super::passkeys::sign_in(s, &mut admins_key, &credential(&admins)).await.status, 200);
    let (to, session) = social("olga@other.test").await;
    assert_eq!((to.as_str(), session.is_some()), ("/home", true));

    ok(&put_policy(&t, &t.owner.cookie, &json!({"requireSso": false})).await);
    assert_eq!(social("bob@example.com").await.0, "/home");
    assert_eq!(super::passkeys::sign_in(s, &mut bobs_key, &credential(&bobs)).await.status, 200);
}
