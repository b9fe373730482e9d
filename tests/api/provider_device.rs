//! The device authorization grant (RFC 8628, issue #46; src/accounts/device.rs): a command-line tool's request at
//! `/oauth2/device_authorization`, its user's approval or denial through the `/device` page's calls, and every
//! answer of the token endpoint's polls. The service's clock is the test's (`start_clocked`), so intervals and
//! the half-hour lifetime pass at once; on two nodes (tests/cluster/run.sh) requests alternate between them, so a
//! request started on one is approved and polled on the other.

use std::time::Duration;

use serde_json::{Value, json};

use super::harness::*;
use super::provider::{oauth_error, query, register, token, token_on, verified};

const DEVICE_GRANT: &str = "urn:ietf:params:oauth:grant-type:device_code";
const SEC: Duration = Duration::from_secs(1);

/// A public command-line client registered for the device grant.
async fn cli(s: &TestServer, admin: &str) -> String {
    let body = json!({
        "client_name": "deploy-cli",
        "token_endpoint_auth_method": "none",
        "grant_types": [DEVICE_GRANT],
        "scope": "openid profile email offline_access",
    });
    register(s, admin, body).await.0
}

async fn start(s: &Client, form: &[(&str, &str)]) -> Resp {
    s.post("/api/auth/oauth2/device_authorization")
        .raw(Some("application/x-www-form-urlencoded"), query(form))
        .send()
        .await
}

async fn started(s: &Client, client_id: &str, scope: &str) -> Value {
    let r = start(s, &[("client_id", client_id), ("scope", scope)]).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.header("cache-control").as_deref(), Some("no-store"));
    r.json()
}

async fn poll(s: &Client, client_id: &str, device_code: &str) -> Resp {
    token_on(s, &[("grant_type", DEVICE_GRANT), ("device_code", device_code), ("client_id", client_id)], None).await
}

async fn look_up(s: &Client, cookie: &str, user_code: &str) -> Resp {
    s.get(&format!("/api/auth/oauth2/device?{}", query(&[("user_code", user_code)]))).cookie(cookie).send().await
}

async fn decide(s: &Client, cookie: &str, user_code: &str, accept: bool) -> Resp {
    s.post("/api/auth/oauth2/device")
        .cookie(cookie)
        .json(&json!({"user_code": user_code, "accept": accept}))
        .send()
        .await
}

/// The whole flow: discovery names the endpoint and the grant; the request answers RFC 8628 §3.2's fields (a user
/// code of 8 unambiguous characters as XXXX-XXXX, a complete URI carrying it); polls before the approval are
/// `authorization_pending`, one before the interval passed `slow_down` (and the interval is 5 s longer after); the
/// page's call names the client and the scopes (the code typed in lower case, without its dash); after the approval
/// the next poll gets the code flow's tokens (an ID token for the user, signed with the published key; a refresh
/// token that refreshes), and the device code is spent: polled again, `invalid_grant`. The approval is audited and
/// remembered as a consent, and the redemption as the grant it made (`oauth_grant.issued`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approved_device_gets_the_code_flows_tokens_once_and_polls_are_paced() {
    let (s, clock) = TestServer::start_clocked(|_| {}).await;
    let admin = s.admin_session().await;
    let id = cli(&s, &admin).await;
    let doc = s.get("/api/auth/.well-known/openid-configuration").send().await.json();
    assert_eq!(doc["device_authorization_endpoint"], format!("{}/api/auth/oauth2/device_authorization", s.base));
    assert!(doc["grant_types_supported"].as_array().unwrap().contains(&json!(DEVICE_GRANT)), "{doc}");
    let client = s.get(&format!("/api/admin/oidc/clients/{id}")).cookie(&admin).send().await.json();
    assert_eq!(client["client"]["grant_types"], json!(["refresh_token", DEVICE_GRANT]), "{client}");

    let d = started(&s, &id, "openid email offline_access").await;
    assert_keys(
        &d,
        &["device_code", "user_code", "verification_uri", "verification_uri_complete", "expires_in", "interval"],
    );
    let user_code = str_of(&d["user_code"]).to_owned();
    assert_eq!(user_code.len(), 9, "{user_code}");
    assert_eq!(&user_code[4..5], "-");
    assert!(
        user_code.replace('-', "").bytes().all(|b| b"ABCDEFGHJKLMNPQRSTUVWXYZ23456789".contains(&b)),
        "{user_code}"
    );
    assert_eq!(d["verification_uri"], format!("{}/device", s.base));
    assert_eq!(d["verification_uri_complete"], format!("{}/device?user_code={user_code}", s.base));
    assert_eq!(d["expires_in"], 1800);
    assert_eq!(d["interval"], 5);
    let device_code = str_of(&d["device_code"]).to_owned();

    oauth_error(&poll(&s, &id, &device_code).await, 400, "authorization_pending");
    oauth_error(&poll(&s, &id, &device_code).await, 400, "slow_down");
    // The interval is now 10 seconds: 6 are too few, 10 are enough.
    clock.advance(6 * SEC);
    oauth_error(&poll(&s, &id, &device_code).await, 400, "slow_down");
    clock.advance(15 * SEC);
    oauth_error(&poll(&s, &id, &device_code).await, 400, "authorization_pending");

    let u = s.new_user("devon").await;
    let typed = user_code.replace('-', "").to_lowercase();
    let r = look_up(&s, &u.cookie, &typed).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(
        r.json(),
        json!({"client_id": id, "client_name": "deploy-cli", "scope": "openid email offline_access", "user_code": user_code})
    );
    let r = decide(&s, &u.cookie, &typed, true).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json(), json!({"success": true}));
    // Decided: the code names nothing the page can use any more.
    assert_auth_error(&look_up(&s, &u.cookie, &user_code).await, 400, "INVALID_USER_CODE");

    clock.advance(20 * SEC);
    let r = poll(&s, &id, &device_code).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let tokens = r.json();
    assert_eq!(tokens["token_type"], "Bearer");
    assert_eq!(tokens["scope"], "openid email offline_access");
    let (_, claims) = verified(&s, str_of(&tokens["id_token"])).await;
    assert_eq!(claims["sub"], u.id.as_str());
    assert_eq!(claims["aud"], id.as_str());
    assert_eq!(claims["iss"], format!("{}/api/auth", s.base));
    let bearer = format!("Bearer {}", str_of(&tokens["access_token"]));
    let info = s.get("/api/auth/oauth2/userinfo").header("authorization", &bearer).send().await;
    assert_eq!(info.status, 200, "{}", info.text);
    assert_eq!(info.json()["email"], u.email.as_str());

    // Redeemed once.
    clock.advance(20 * SEC);
    oauth_error(&poll(&s, &id, &device_code).await, 400, "invalid_grant");

    // The refresh token refreshes, as the code flow's.
    let refresh = str_of(&tokens["refresh_token"]).to_owned();
    let r = token(&s, &[("grant_type", "refresh_token"), ("refresh_token", &refresh), ("client_id", &id)], None).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(r.json()["refresh_token"].is_string());

    let audit = s.get("/api/admin/audit?action=oauth_device.approved").cookie(&admin).send().await.text;
    assert!(audit.contains(&format!("{id}: scopes [openid email offline_access]")), "{audit}");
    // The redemption made a grant (audited once: the refresh continues it).
    let issued = s.get("/api/admin/audit?action=oauth_grant.issued").cookie(&admin).send().await.json();
    let issued = issued["entries"].as_array().unwrap().clone();
    assert_eq!(issued.len(), 1, "{issued:?}");
    assert_eq!(issued[0]["target_id"], u.id.as_str());
    let detail = str_of(&issued[0]["detail"]);
    assert!(detail.starts_with(&format!("{id}: device_code, grant ")), "{detail}");
    assert!(detail.ends_with(" [openid email offline_access]"), "{detail}");
    let consents = s.get(&format!("/api/admin/users/{}/consents", u.id)).cookie(&admin).send().await.text;
    assert!(consents.contains(&id), "the approval is remembered as a consent: {consents}");
}

/// A denial is `access_denied` once, then the code is gone (`invalid_grant`); another client's device code gets
/// `invalid_grant` and leaves the request as it was; past its half hour a request is `expired_token`, and the page
/// can no longer use its code. The request itself: a client not registered for the grant (a public one included)
/// gets `unauthorized_client`, a scope the client was not registered with `invalid_scope`, a wrong secret
/// `invalid_client`, a confidential client registered for the grant its request with its secret.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn denial_expiry_another_clients_code_and_bad_requests_get_rfc_8628s_answers() {
    let (s, clock) = TestServer::start_clocked(|_| {}).await;
    let admin = s.admin_session().await;
    let id = cli(&s, &admin).await;
    let other = cli(&s, &admin).await;
    let u = s.new_user("dana").await;

    let d = started(&s, &id, "openid").await;
    let device_code = str_of(&d["device_code"]).to_owned();
    oauth_error(&poll(&s, &other, &device_code).await, 400, "invalid_grant");
    oauth_error(&poll(&s, &id, &device_code).await, 400, "authorization_pending");
    let r = decide(&s, &u.cookie, str_of(&d["user_code"]), false).await;
    assert_eq!(r.status, 200, "{}", r.text);
    clock.advance(6 * SEC);
    oauth_error(&poll(&s, &id, &device_code).await, 400, "access_denied");
    clock.advance(6 * SEC);
    oauth_error(&poll(&s, &id, &device_code).await, 400, "invalid_grant");

    let d = started(&s, &id, "openid").await;
    clock.advance(31 * 60 * SEC);
    oauth_error(&poll(&s, &id, str_of(&d["device_code"])).await, 400, "expired_token");
    let u = s.new_user("dora").await;
    assert_auth_error(&look_up(&s, &u.cookie, str_of(&d["user_code"])).await, 400, "INVALID_USER_CODE");
    assert_auth_error(&decide(&s, &u.cookie, str_of(&d["user_code"]), true).await, 400, "INVALID_USER_CODE");

    // Clients not registered for the grant: a code-flow client, public or confidential.
    let (web, secret) = register(
        &s,
        &admin,
        json!({"client_name": "web", "redirect_uris": ["https://rp.example/cb"], "scope": "openid",
               "token_endpoint_auth_method": "client_secret_post"}),
    )
    .await;
    let native = register(
        &s,
        &admin,
        json!({"client_name": "app", "application_type": "native", "token_endpoint_auth_method": "none",
               "redirect_uris": ["http://127.0.0.1/cb"]}),
    )
    .await
    .0;
    oauth_error(&start(&s, &[("client_id", &native)]).await, 400, "unauthorized_client");
    let secret = secret.unwrap();
    oauth_error(&start(&s, &[("client_id", &web), ("client_secret", &secret)]).await, 400, "unauthorized_client");
    oauth_error(&start(&s, &[("client_id", &id), ("scope", "openid admin")]).await, 400, "invalid_scope");
    oauth_error(&start(&s, &[("client_id", "nobody")]).await, 401, "invalid_client");
    oauth_error(&start(&s, &[]).await, 401, "invalid_client");
    let r = s.post("/api/auth/oauth2/device_authorization").json(&json!({"client_id": id})).send().await;
    oauth_error(&r, 400, "invalid_request");
    oauth_error(&start(&s, &[("client_id", &id), ("client_id", &id)]).await, 400, "invalid_request");

    // A confidential client registered for the grant authenticates with its secret.
    let (tv, tv_secret) = register(
        &s,
        &admin,
        json!({"client_name": "tv", "grant_types": [DEVICE_GRANT], "scope": "openid profile",
               "token_endpoint_auth_method": "client_secret_post"}),
    )
    .await;
    let tv_secret = tv_secret.unwrap();
    oauth_error(&start(&s, &[("client_id", &tv)]).await, 401, "invalid_client");
    oauth_error(&start(&s, &[("client_id", &tv), ("client_secret", "wrong")]).await, 401, "invalid_client");
    let r = start(&s, &[("client_id", &tv), ("client_secret", &tv_secret)]).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let code = str_of(&r.json()["device_code"]).to_owned();
    let f = [("grant_type", DEVICE_GRANT), ("device_code", &code), ("client_id", &tv), ("client_secret", &tv_secret)];
    oauth_error(&token(&s, &f, None).await, 400, "authorization_pending");
    let f = [("grant_type", DEVICE_GRANT), ("client_id", &tv), ("client_secret", &tv_secret)];
    oauth_error(&token(&s, &f, None).await, 400, "invalid_request");
}

/// A ban between the approval and the poll: no tokens (`invalid_grant`); a banned user's page calls are refused
/// (no session). Codes the page cannot use all get the same answer, malformed or unknown; the page's calls count
/// against the address's sign-in limit, so codes cannot be tried in bulk (429). The page needs a session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ban_stops_the_device_and_wrong_codes_are_answered_alike_and_throttled() {
    let (s, clock) = TestServer::start_clocked(|c| c.rate_limit.sign_in_per_address = 12).await;
    let admin = s.admin_session().await;
    let id = cli(&s, &admin).await;
    let u = s.new_user("bernd").await;
    let d = started(&s, &id, "openid offline_access").await;
    assert_eq!(decide(&s, &u.cookie, str_of(&d["user_code"]), true).await.status, 200);
    s.patch_ok(&admin, &json!({"userId": u.id, "banned": true})).await;
    oauth_error(&poll(&s, &id, str_of(&d["device_code"])).await, 400, "invalid_grant");
    let d = started(&s, &id, "openid").await;
    assert_eq!(look_up(&s, &u.cookie, str_of(&d["user_code"])).await.status, 401, "a banned user has no session");
    assert_eq!(look_up(&s, "", str_of(&d["user_code"])).await.status, 401);
    clock.advance(10 * SEC);
    oauth_error(&poll(&s, &id, str_of(&d["device_code"])).await, 400, "authorization_pending");

    let v = s.new_user("vanja").await;
    let unknown = look_up(&s, &v.cookie, "BCDF-GHJK").await;
    let malformed = look_up(&s, &v.cookie, "0000-0000").await;
    assert_auth_error(&unknown, 400, "INVALID_USER_CODE");
    assert_auth_error(&malformed, 400, "INVALID_USER_CODE");
    assert_eq!(unknown.json()["message"], malformed.json()["message"], "one answer for every unusable code");
    let mut limited = false;
    for _ in 0..30 {
        let r = look_up(&s, &v.cookie, "BCDF-GHJK").await;
        if r.status == 429 {
            limited = true;
            break;
        }
        assert_eq!(r.status, 400, "{}", r.text);
    }
    assert!(limited, "wrong codes are throttled");
}

/// Two nodes (tests/cluster/run.sh; one node otherwise, where the same holds): a request started on the first is
/// looked up and approved on the second, which also holds the pace the first set (a poll there before the interval
/// is `slow_down`). Two approvals of one code at once, one per node: one is taken, the other gets
/// `INVALID_USER_CODE`; two polls at once after it, one per node: one gets the tokens, the other nothing (the device
/// code is redeemed once across the nodes), and the code is spent on both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_started_on_one_node_is_approved_and_polled_on_the_other_and_redeemed_once() {
    let (s, clock) = TestServer::start_clocked(|_| {}).await;
    let admin = s.admin_session().await;
    let id = cli(&s, &admin).await;
    let u = s.new_user("nodes").await;
    let (a, b) = (&s.nodes[0], &s.nodes[s.nodes.len() - 1]);
    for round in 0..4 {
        let d = started(a, &id, "openid offline_access").await;
        let (device_code, user_code) = (str_of(&d["device_code"]).to_owned(), str_of(&d["user_code"]).to_owned());
        oauth_error(&poll(a, &id, &device_code).await, 400, "authorization_pending");
        oauth_error(&poll(b, &id, &device_code).await, 400, "slow_down");
        clock.advance(11 * SEC);
        oauth_error(&poll(b, &id, &device_code).await, 400, "authorization_pending");

        let r = look_up(b, &u.cookie, &user_code).await;
        assert_eq!(r.status, 200, "round {round}: {}", r.text);
        assert_eq!(r.json()["client_id"], id.as_str());
        let (one, two) = tokio::join!(decide(a, &u.cookie, &user_code, true), decide(b, &u.cookie, &user_code, true));
        let mut statuses = [one.status, two.status];
        statuses.sort_unstable();
        assert_eq!(statuses, [200, 400], "round {round}, the approvals: {} / {}", one.text, two.text);
        assert_auth_error(if one.status == 400 { &one } else { &two }, 400, "INVALID_USER_CODE");

        clock.advance(11 * SEC);
        let (one, two) = tokio::join!(poll(a, &id, &device_code), poll(b, &id, &device_code));
        let mut statuses = [one.status, two.status];
        statuses.sort_unstable();
        assert_eq!(statuses, [200, 400], "round {round}, the polls: {} / {}", one.text, two.text);
        let (won, lost) = if one.status == 200 { (one, two) } else { (two, one) };
        // The loser came while the winner held the request (one node: slow_down) or after it was redeemed.
        let error = lost.json()["error"].as_str().unwrap_or_default().to_owned();
        assert!(["invalid_grant", "slow_down"].contains(&error.as_str()), "round {round}: {}", lost.text);
        let (_, claims) = verified(&s, str_of(&won.json()["id_token"])).await;
        assert_eq!(claims["sub"], u.id.as_str());
        assert!(won.json()["refresh_token"].is_string(), "{}", won.text);
        clock.advance(11 * SEC);
        for node in [a, b] {
            oauth_error(&poll(node, &id, &device_code).await, 400, "invalid_grant");
        }
    }
}

/// A public client's id ships inside the tool, so anyone may start requests with it, and each is a record kept for
/// an hour and a half: requests count against the address's sign-up limit (429 `TOO_MANY_REQUESTS` with
/// `Retry-After`), as sign-ups, which also store something for whoever asks, do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn device_requests_count_against_the_addresss_sign_up_limit() {
    let s = TestServer::start_adjusted(|c| c.rate_limit.sign_up_per_address = 4).await;
    let admin = s.admin_session().await;
    let id = cli(&s, &admin).await;
    let mut limited = None;
    for i in 0..20 {
        let r = start(&s, &[("client_id", &id)]).await;
        if r.status == 429 {
            limited = Some((i, r));
            break;
        }
        assert_eq!(r.status, 200, "{}", r.text);
    }
    let (allowed, r) = limited.expect("device requests are throttled");
    assert!(allowed >= 4, "the limit's burst is allowed: {allowed}");
    assert_auth_error(&r, 429, "TOO_MANY_REQUESTS");
    assert!(r.header("retry-after").is_some_and(|secs| secs.parse::<u64>().is_ok_and(|s| s > 0)), "{:?}", r.headers);
}

/// Who may approve is who may authorize a client in the code flow: an administrator impersonating someone cannot
/// approve for them (403 `IMPERSONATION`), and an account whose role requires a second factor it has not enrolled
/// is refused until it enrols (403 `TWO_FACTOR_REQUIRED`, which sends the page to the sign-in page and on to
/// enrolment), at the look-up and at the answer alike. Neither decides anything: the request still waits, and the
/// person it is for approves it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_impersonation_or_an_account_without_its_required_factor_cannot_approve() {
    let (s, clock) = TestServer::start_clocked(|c| {
        c.roles.allowed.push("operator".into());
        c.two_factor.required_for_roles = vec!["operator".into()];
    })
    .await;
    let admin = s.admin_session().await;
    let id = cli(&s, &admin).await;
    let d = started(&s, &id, "openid").await;
    let (device_code, code) = (str_of(&d["device_code"]), str_of(&d["user_code"]));

    let helped = s.new_user("helped").await;
    let r = s.post("/api/auth/admin/impersonate-user").cookie(&admin).json(&json!({"userId": helped.id})).send().await;
    assert_eq!(r.status, 200, "{}", r.text);
    let acting = r.session_cookie().expect("the impersonation's cookie").value;
    assert_auth_error(&look_up(&s, &acting, code).await, 403, "IMPERSONATION");
    assert_auth_error(&decide(&s, &acting, code, true).await, 403, "IMPERSONATION");

    let operator = s.new_user("operator").await;
    s.patch_ok(&admin, &json!({"userId": operator.id, "role": "operator"})).await;
    assert_auth_error(&look_up(&s, &operator.cookie, code).await, 403, "TWO_FACTOR_REQUIRED");
    assert_auth_error(&decide(&s, &operator.cookie, code, true).await, 403, "TWO_FACTOR_REQUIRED");

    oauth_error(&poll(&s, &id, device_code).await, 400, "authorization_pending");
    assert_eq!(decide(&s, &helped.cookie, code, true).await.status, 200);
    clock.advance(10 * SEC);
    let r = poll(&s, &id, device_code).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let (_, claims) = verified(&s, str_of(&r.json()["id_token"])).await;
    assert_eq!(claims["sub"], helped.id.as_str());
}

/// An approval is remembered as a consent the person sees among the apps they allowed; withdrawing it ends what
/// the device was given (its refresh token is refused, its access token stops at userinfo), as for the code flow.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn withdrawing_the_approval_ends_the_devices_tokens() {
    let (s, clock) = TestServer::start_clocked(|_| {}).await;
    let admin = s.admin_session().await;
    let id = cli(&s, &admin).await;
    let u = s.new_user("withdraws").await;
    let d = started(&s, &id, "openid email offline_access").await;
    assert_eq!(decide(&s, &u.cookie, str_of(&d["user_code"]), true).await.status, 200);
    let r = poll(&s, &id, str_of(&d["device_code"])).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let tokens = r.json();
    let bearer = format!("Bearer {}", str_of(&tokens["access_token"]));
    assert_eq!(s.get("/api/auth/oauth2/userinfo").header("authorization", &bearer).send().await.status, 200);

    let list = s.get("/api/auth/oauth2/get-consents").cookie(&u.cookie).send().await.json();
    let consent = list.as_array().unwrap().iter().find(|c| c["clientId"] == id.as_str()).expect("the approval");
    assert_eq!(consent["scopes"], json!(["openid", "email", "offline_access"]), "{consent}");
    let r =
        s.post("/api/auth/oauth2/delete-consent").cookie(&u.cookie).json(&json!({"id": consent["id"]})).send().await;
    assert_eq!(r.status, 200, "{}", r.text);

    clock.advance(SEC);
    let refresh = str_of(&tokens["refresh_token"]);
    let r = token(&s, &[("grant_type", "refresh_token"), ("refresh_token", refresh), ("client_id", &id)], None).await;
    oauth_error(&r, 400, "invalid_grant");
    assert_eq!(s.get("/api/auth/oauth2/userinfo").header("authorization", &bearer).send().await.status, 401);
}

/// The person's answer is taken while the device polls: polls in flight (here eight at once without pause, each a
/// `slow_down` that writes) never turn the answer away as an invalid code, and the device's next poll in its time
/// gets the tokens. Before, an answer and a poll of one request excluded each other on a node, and the answer
/// that met a poll in flight was refused as `INVALID_USER_CODE`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_given_while_the_device_polls_is_taken() {
    let (s, clock) = TestServer::start_clocked(|_| {}).await;
    let admin = s.admin_session().await;
    let id = cli(&s, &admin).await;
    let u = s.new_user("busy").await;
    for round in 0..5 {
        let d = started(&s, &id, "openid").await;
        let device_code = str_of(&d["device_code"]).to_owned();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let pollers: Vec<_> = (0..8)
            .map(|i| {
                let (node, id, device_code) = (s.nodes[i % s.nodes.len()].clone(), id.clone(), device_code.clone());
                let stop = std::sync::Arc::clone(&stop);
                tokio::spawn(async move {
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        let r = poll(&node, &id, &device_code).await;
                        assert_eq!(r.status, 400, "{}", r.text);
                    }
                })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(100)).await;
        let answered = decide(&s, &u.cookie, str_of(&d["user_code"]), true).await;
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for poller in pollers {
            poller.await.unwrap();
        }
        assert_eq!(answered.status, 200, "round {round}: {}", answered.text);
        clock.advance(61 * SEC);
        let r = poll(&s, &id, &device_code).await;
        assert_eq!(r.status, 200, "round {round}: {}", r.text);
    }
}

/// A page on another origin (a TV's web app) runs the device grant with `fetch`: the device authorization request
/// and the token endpoint's polls answer any origin (`*`, no credentials), and their preflights allow the
/// `Authorization` header a confidential client's Basic credentials need; the device page's own calls, which
/// approve with the user's cookie, stay closed to that origin. Before, the device authorization request carried no
/// CORS header: the browser kept its answer from the page.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_on_another_origin_starts_the_device_grant_and_polls_but_cannot_approve() {
    const APP: &str = "https://tv.example";
    let s = TestServer::start().await;
    let admin = s.admin_session().await;
    let id = cli(&s, &admin).await;
    let open = |r: &Resp, what: &str| {
        assert_eq!(r.header("access-control-allow-origin").as_deref(), Some("*"), "{what}: {:?}", r.headers);
        assert!(r.header("access-control-allow-credentials").is_none(), "{what}");
    };
    for path in ["/api/auth/oauth2/device_authorization", "/api/auth/oauth2/token"] {
        let pre = s
            .req(reqwest::Method::OPTIONS, path)
            .header("origin", APP)
            .header("access-control-request-method", "POST")
            .header("access-control-request-headers", "authorization")
            .send()
            .await;
        assert_eq!(pre.status, 204, "{path}");
        open(&pre, path);
        let methods = pre.header("access-control-allow-methods").unwrap_or_default();
        assert!(methods.split(", ").any(|m| m == "POST"), "{path}: {methods}");
        let allowed = pre.header("access-control-allow-headers").unwrap_or_default().to_ascii_lowercase();
        assert!(allowed.split(',').any(|h| h.trim() == "authorization"), "{path}: {allowed}");
    }
    let r = s
        .post("/api/auth/oauth2/device_authorization")
        .header("origin", APP)
        .raw(Some("application/x-www-form-urlencoded"), query(&[("client_id", &id), ("scope", "openid")]))
        .send()
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    open(&r, "device_authorization");
    let device_code = r.json()["device_code"].as_str().unwrap().to_owned();
    let r = s
        .post("/api/auth/oauth2/token")
        .header("origin", APP)
        .raw(
            Some("application/x-www-form-urlencoded"),
            query(&[("grant_type", DEVICE_GRANT), ("device_code", &device_code), ("client_id", &id)]),
        )
        .send()
        .await;
    oauth_error(&r, 400, "authorization_pending");
    open(&r, "the poll's refusal, which the page must read");
    for method in ["GET", "POST"] {
        let pre = s
            .req(reqwest::Method::OPTIONS, "/api/auth/oauth2/device")
            .header("origin", APP)
            .header("access-control-request-method", method)
            .send()
            .await;
        assert!(pre.header("access-control-allow-origin").is_none(), "{method} /oauth2/device: {:?}", pre.headers);
    }
}
