//! The second factor as better-auth's `twoFactor` plugin speaks it: enrolment, TOTP (replay, the ±1 window), the
//! sign-in step with its cookie (five wrong codes, the account's failure budget), backup codes, trusted devices,
//! turning it off, an administrator's reset, and `[two_factor] required_for_roles`.
//!
//! Codes are computed here from the secret in the enrolment's URI with RFC 6238 (the crate's own function, which
//! its unit tests hold to the RFC's test vectors), as an authenticator app would.

use serde_json::{Value, json};
use service_auth::domain::two_factor::{base32_decode, code_at, step_of};

use super::harness::{
    ADMIN_EMAIL, ADMIN_PASSWORD, COOKIE, PASSWORD, Resp, TestServer, TestUser, assert_auth_user, test_config,
};

const TWO_FACTOR_COOKIE: &str = "service-auth.two_factor";
const TRUST_COOKIE: &str = "service-auth.trust_device";

fn now_secs() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs()
}

/// The current TOTP step, waiting first when it ends within three seconds: the server reads the clock a moment
/// later, and a test about which steps are accepted must not straddle a step's end.
pub(super) async fn settled_step() -> u64 {
    let left = 30 - now_secs() % 30;
    if left <= 3 {
        tokio::time::sleep(std::time::Duration::from_secs(left + 1)).await;
    }
    step_of(now_secs())
}

pub(super) fn code(secret: &[u8], step: u64) -> String {
    format!("{:06}", code_at(secret, step))
}

/// The key an authenticator app reads from the enrolment's URI.
fn secret_of(uri: &str) -> Vec<u8> {
    let query = uri.split_once('?').unwrap().1;
    let secret = query.split('&').find_map(|p| p.strip_prefix("secret=")).unwrap();
    base32_decode(secret).unwrap()
}

fn cookie_of(resp: &Resp, name: &str) -> Option<super::harness::SetCookie> {
    resp.set_cookies().into_iter().find(|c| c.name == name)
}

/// An account with the factor on: (session cookie, secret, backup codes, e-mail, id).
pub(super) struct Enrolled {
    pub(super) session: String,
    pub(super) secret: Vec<u8>,
    pub(super) backup_codes: Vec<String>,
    pub(super) email: String,
    pub(super) id: String,
}

pub(super) async fn enrolled(s: &TestServer, tag: &str) -> Enrolled {
    enrol(s, s.client.new_user(tag).await).await
}

/// `user`'s authenticator enrolled and turned on.
pub(super) async fn enrol(s: &TestServer, user: TestUser) -> Enrolled {
    let r = s
        .client
        .post("/api/auth/two-factor/enable")
        .cookie(&user.cookie)
        .json(&json!({"password": PASSWORD}))
        .send()
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let body = r.json();
    let secret = secret_of(body["totpURI"].as_str().unwrap());
    let backup_codes: Vec<String> =
        body["backupCodes"].as_array().unwrap().iter().map(|c| c.as_str().unwrap().to_owned()).collect();
    let step = settled_step().await;
    let r = verify_totp(s, Some(&user.cookie), None, &code(&secret, step), false).await;
    assert_eq!(r.status, 200, "{}", r.text);
    Enrolled { session: user.cookie, secret, backup_codes, email: user.email, id: user.id }
}

pub(super) async fn verify_totp(
    s: &TestServer,
    session: Option<&str>,
    challenge: Option<&str>,
    code: &str,
    trust: bool,
) -> Resp {
    verify(s, "/api/auth/two-factor/verify-totp", session, challenge, code, trust).await
}

async fn verify(
    s: &TestServer,
    path: &str,
    session: Option<&str>,
    challenge: Option<&str>,
    code: &str,
    trust: bool,
) -> Resp {
    let mut cookies = Vec::new();
    if let Some(session) = session {
        cookies.push(format!("{COOKIE}={session}"));
    }
    if let Some(challenge) = challenge {
        cookies.push(format!("{TWO_FACTOR_COOKIE}={challenge}"));
    }
    let mut req = s.client.post(path).json(&json!({"code": code, "trustDevice": trust}));
    if !cookies.is_empty() {
        req = req.header("cookie", &cookies.join("; "));
    }
    req.send().await
}

/// Signs in with the password; for an account with the factor on, the challenge cookie's value.
async fn challenge(s: &TestServer, email: &str, trust: Option<&str>) -> Resp {
    let mut req = s.client.post("/api/auth/sign-in/email").json(&json!({"email": email, "password": PASSWORD}));
    if let Some(trust) = trust {
        req = req.header("cookie", &format!("{TRUST_COOKIE}={trust}"));
    }
    req.send().await
}

async fn challenge_cookie(s: &TestServer, email: &str) -> String {
    let r = challenge(s, email, None).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json(), json!({"twoFactorRedirect": true, "twoFactorMethods": ["totp"]}));
    cookie_of(&r, TWO_FACTOR_COOKIE).expect("a two-factor cookie").value
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enrolment_then_sign_in_through_the_second_factor() {
    let s = TestServer::start().await;
    let user = s.client.new_user("tfa-enrol").await;
    let enable = |password: &'static str| {
        s.client.post("/api/auth/two-factor/enable").cookie(&user.cookie).json(&json!({"password": password})).send()
    };
    let wrong = enable("not the password").await;
    assert_eq!((wrong.status, wrong.json()["code"].clone()), (400, json!("INVALID_PASSWORD")));
    let r = enable(PASSWORD).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let body = r.json();
    assert_eq!(body["method"], "totp");
    let uri = body["totpURI"].as_str().unwrap();
    assert!(uri.starts_with("otpauth://totp/service-auth:tfa-enrol%40example.com?secret="), "{uri}");
    assert!(uri.ends_with("&issuer=service-auth&digits=6&period=30"), "{uri}");
    let codes = body["backupCodes"].as_array().unwrap();
    assert_eq!(codes.len(), 10);
    assert!(codes.iter().all(|c| c.as_str().unwrap().len() == 11), "{codes:?}");
    let secret = secret_of(uri);

    // Not on until a first code: sign-in still opens a session, and the user says so.
    let session = s.client.session(&user.cookie).await;
    assert_eq!(session["user"]["twoFactorEnabled"], false);
    assert_eq!(s.client.sign_in(&user.email, PASSWORD).await.0, 200);

    let step = settled_step().await;
    let r = verify_totp(&s, Some(&user.cookie), None, &code(&secret, step + 5), false).await;
    assert_eq!((r.status, r.json()["code"].clone()), (401, json!("INVALID_CODE")));
    let r = verify_totp(&s, Some(&user.cookie), None, &code(&secret, step), false).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json()["user"]["twoFactorEnabled"], true);
    assert_eq!(r.json()["token"], user.cookie.as_str());
    assert_auth_user(&r.json()["user"]);
    let again = enable(PASSWORD).await;
    assert_eq!((again.status, again.json()["code"].clone()), (400, json!("TOTP_ALREADY_ENABLED")));

    // The sign-in step: no session, the plugin's answer and its cookie.
    let r = challenge(&s, &user.email, None).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json(), json!({"twoFactorRedirect": true, "twoFactorMethods": ["totp"]}));
    assert!(r.session_cookie().is_none(), "no session before the second factor");
    let pending = cookie_of(&r, TWO_FACTOR_COOKIE).expect("the two-factor cookie");
    assert_eq!(pending.attr("max-age"), Some("600"));
    assert_eq!(pending.attr("path"), Some("/"));
    assert_eq!(pending.attr("samesite"), Some("Lax"));
    assert!(pending.attrs.contains_key("httponly"));

    let step = settled_step().await;
    let r = verify_totp(&s, None, None, &code(&secret, step + 1), false).await;
    assert_eq!((r.status, r.json()["code"].clone()), (401, json!("INVALID_TWO_FACTOR_COOKIE")));
    let r = verify_totp(&s, None, Some("not-a-challenge"), &code(&secret, step + 1), false).await;
    assert_eq!((r.status, r.json()["code"].clone()), (401, json!("INVALID_TWO_FACTOR_COOKIE")));
    let r = verify_totp(&s, None, Some(&pending.value), &code(&secret, step + 1), false).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let session = r.session_cookie().expect("a session").value;
    assert_eq!(r.json()["token"], session.as_str());
    assert_eq!(cookie_of(&r, TWO_FACTOR_COOKIE).unwrap().attr("max-age"), Some("0"), "the challenge cookie cleared");
    assert!(cookie_of(&r, TRUST_COOKIE).is_none(), "no trusted device unless asked");
    assert_eq!(s.client.session(&session).await["user"]["twoFactorEnabled"], true);

    // The challenge is used up.
    let r = verify_totp(&s, None, Some(&pending.value), &code(&secret, step), false).await;
    assert_eq!((r.status, r.json()["code"].clone()), (401, json!("INVALID_TWO_FACTOR_COOKIE")));
    // A wrong password is still the password's answer, with no challenge.
    let (status, body, _) = s.client.sign_in(&user.email, "wrong password!").await;
    assert_eq!((status, body["code"].clone()), (401, json!("INVALID_EMAIL_OR_PASSWORD")));
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_code_is_accepted_once_and_one_step_either_side() {
    let s = TestServer::start().await;
    let user = s.client.new_user("tfa-window").await;
    let r = s
        .client
        .post("/api/auth/two-factor/enable")
        .cookie(&user.cookie)
        .json(&json!({"password": PASSWORD}))
        .send()
        .await;
    let secret = secret_of(r.json()["totpURI"].as_str().unwrap());
    let step = settled_step().await;
    let verify = |c: String| {
        let cookie = user.cookie.clone();
        let s = &s;
        async move { verify_totp(s, Some(&cookie), None, &c, false).await }
    };
    // Two steps away is refused on either side; one step back, now and one step ahead, in that order, are not.
    assert_eq!(verify(code(&secret, step - 3)).await.status, 401);
    assert_eq!(verify(code(&secret, step + 3)).await.status, 401);
    assert_eq!(verify(code(&secret, step - 1)).await.status, 200);
    assert_eq!(verify(code(&secret, step)).await.status, 200);
    // Replay: the same code again, and an older one.
    let replayed = verify(code(&secret, step)).await;
    assert_eq!((replayed.status, replayed.json()["code"].clone()), (401, json!("INVALID_CODE")));
    assert_eq!(verify(code(&secret, step - 1)).await.status, 401);
    assert_eq!(verify(code(&secret, step + 1)).await.status, 200);
    assert_eq!(verify(code(&secret, step + 1)).await.status, 401);

    // At sign-in too: the step used above is refused with a challenge.
    let pending = challenge_cookie(&s, &user.email).await;
    let r = verify_totp(&s, None, Some(&pending), &code(&secret, step + 1), false).await;
    assert_eq!((r.status, r.json()["code"].clone()), (401, json!("INVALID_CODE")));
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_challenge_ends_after_five_wrong_codes() {
    let s = TestServer::start().await;
    let e = enrolled(&s, "tfa-five").await;
    let pending = challenge_cookie(&s, &e.email).await;
    for n in 1..=4 {
        let r = verify_totp(&s, None, Some(&pending), "000000", false).await;
        assert_eq!((r.status, r.json()["code"].clone()), (401, json!("INVALID_CODE")), "wrong code {n}");
    }
    let r = verify(&s, "/api/auth/two-factor/verify-backup-code", None, Some(&pending), "aaaaa-bbbbb", false).await;
    assert_eq!((r.status, r.json()["code"].clone()), (400, json!("TOO_MANY_ATTEMPTS_REQUEST_NEW_CODE")));
    assert_eq!(cookie_of(&r, TWO_FACTOR_COOKIE).unwrap().attr("max-age"), Some("0"));
    // Even the right code no longer opens it: sign in again.
    let step = settled_step().await;
    let r = verify_totp(&s, None, Some(&pending), &code(&e.secret, step + 1), false).await;
    assert_eq!((r.status, r.json()["code"].clone()), (401, json!("INVALID_TWO_FACTOR_COOKIE")));
    let pending = challenge_cookie(&s, &e.email).await;
    assert_eq!(verify_totp(&s, None, Some(&pending), &code(&e.secret, step + 1), false).await.status, 200);
    s.stop().await;
}

/// Thirty wrong codes at once on one challenge: its five are taken in the users actor, in the message that checks
/// each code, so no more than five are checked (one audit row each) however many arrive together; the rest find
/// the challenge over, or the account locked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_wrong_codes_check_at_most_the_challenges_five() {
    // A budget larger than the burst, so that the challenge's own limit is what holds. One node: on PostgreSQL each
    // node counts a challenge's codes in its own users actor (docs/cluster.md), and the account's failure budget,
    // which PostgreSQL holds for the whole cluster, bounds the total (`wrong_codes_spend_the_accounts_failure_budget`
    // runs on both).
    let s = TestServer::start_embedded_adjusted(|c| c.rate_limit.failures_per_account = 100).await;
    let admin = s.client.admin_session().await;
    let e = enrolled(&s, "tfa-burst").await;
    let pending = challenge_cookie(&s, &e.email).await;
    let mut burst = tokio::task::JoinSet::new();
    for n in 0..30 {
        let header = format!("{TWO_FACTOR_COOKIE}={pending}");
        // Backup codes and TOTP codes alike: one limit for the challenge, whichever factor is tried.
        let (path, code) = match n % 2 {
            0 => ("/api/auth/two-factor/verify-totp", "000000"),
            _ => ("/api/auth/two-factor/verify-backup-code", "aaaaa-bbbbb"),
        };
        let req = s.client.post(path).header("cookie", &header).json(&json!({"code": code}));
        burst.spawn(async move { req.send().await });
    }
    let mut answers = std::collections::BTreeMap::<String, usize>::new();
    while let Some(r) = burst.join_next().await {
        let r = r.unwrap();
        *answers.entry(format!("{} {}", r.status, r.json()["code"].as_str().unwrap_or_default())).or_default() += 1;
    }
    let checked: usize = answers
        .iter()
        .filter(|(answer, _)| answer.contains("INVALID_CODE") || answer.contains("INVALID_BACKUP_CODE"))
        .map(|(_, n)| n)
        .sum::<usize>()
        + answers.get("400 TOO_MANY_ATTEMPTS_REQUEST_NEW_CODE").copied().unwrap_or(0);
    assert_eq!(checked, 5, "answers that checked a code: {answers:?}");
    assert_eq!(answers.get("400 TOO_MANY_ATTEMPTS_REQUEST_NEW_CODE"), Some(&1), "{answers:?}");
    let entries = s.client.get("/api/admin/audit?limit=500").cookie(&admin).send().await.json()["entries"].clone();
    let failed = entries
        .as_array()
        .unwrap()
        .iter()
        .filter(|x| x["target_id"] == e.id.as_str() && x["action"] == "sign_in.second_factor_failed")
        .count();
    assert_eq!(failed, 5, "codes checked and counted by the server: {answers:?}");
    s.stop().await;
}

/// `verify-totp` with a session (an enrolment being confirmed, or a code checked again) spends from the account's
/// one failure budget like a sign-in's code: a stolen session's guesses are audited and locked out after the
/// budget, the password sign-in with them, and the owner's right code works once the window ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_codes_with_a_session_are_throttled_and_audited() {
    // A window long enough for the forty codes and the sign-in after them on a loaded machine (two nodes on
    // PostgreSQL commit each audited failure there), short enough to wait out at the end.
    const WINDOW: std::time::Duration = std::time::Duration::from_secs(20);
    let s = TestServer::start_adjusted(|c| c.rate_limit.account_window_secs = WINDOW.as_secs()).await;
    let admin = s.client.admin_session().await;
    let user = s.client.new_user("tfa-session-guess").await;
    let r = s
        .client
        .post("/api/auth/two-factor/enable")
        .cookie(&user.cookie)
        .json(&json!({"password": PASSWORD}))
        .send()
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let secret = secret_of(r.json()["totpURI"].as_str().unwrap());
    let mut answers = Vec::new();
    let first_failure = std::time::Instant::now();
    for n in 0..40 {
        let r = verify_totp(&s, Some(&user.cookie), None, &format!("{n:06}"), false).await;
        if r.status == 429 {
            assert_eq!(r.json()["code"], "ACCOUNT_TEMPORARILY_LOCKED", "{}", r.text);
            assert!(r.header("retry-after").is_some());
        }
        answers.push(r.status);
    }
    // The default budget: ten failures per window, then locked until it ends.
    assert_eq!(answers.iter().filter(|s| **s == 401).count(), 10, "{answers:?}");
    assert_eq!(answers.iter().filter(|s| **s == 429).count(), 30, "{answers:?}");
    assert_eq!(s.client.sign_in(&user.email, PASSWORD).await.0, 429, "one budget: the password is locked too");
    let entries = s.client.get("/api/admin/audit?limit=500").cookie(&admin).send().await.json()["entries"].clone();
    let mine: Vec<&Value> = entries.as_array().unwrap().iter().filter(|x| x["target_id"] == user.id.as_str()).collect();
    let failed = mine.iter().filter(|x| x["action"] == "sign_in.second_factor_failed").count();
    assert_eq!(failed, 10, "one row per wrong code checked");
    // The lock's own row is written by the node that refused: on one node its own count reached the budget; with
    // two nodes sharing it each counted five, and PostgreSQL's count refused.
    assert!(mine.iter().any(|x| x["action"] == "sign_in.refused"), "the lock is recorded");
    // The window ends: the owner's right code confirms the enrolment and clears the count.
    tokio::time::sleep(WINDOW.saturating_sub(first_failure.elapsed()) + std::time::Duration::from_secs(1)).await;
    let step = settled_step().await;
    let r = verify_totp(&s, Some(&user.cookie), None, &code(&secret, step), false).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json()["user"]["twoFactorEnabled"], true);
    s.stop().await;
}

/// One budget per account across factors: wrong codes lock the account like wrong passwords, and a right password
/// does not reset the count (only a right second factor does).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_codes_spend_the_accounts_failure_budget() {
    let s = TestServer::start_adjusted(|c| c.rate_limit.failures_per_account = 4).await;
    let e = enrolled(&s, "tfa-budget").await;
    for n in 0..4 {
        // A fresh challenge each time: the password is right, and does not clear the count.
        let pending = challenge_cookie(&s, &e.email).await;
        let r = verify_totp(&s, None, Some(&pending), "000000", false).await;
        assert_eq!(r.status, 401, "wrong code {n}: {}", r.text);
    }
    let (status, body, _) = s.client.sign_in(&e.email, PASSWORD).await;
    assert_eq!((status, body["code"].clone()), (429, json!("TOO_MANY_REQUESTS")), "the password is locked out too");
    s.stop().await;

    let s = TestServer::start_adjusted(|c| c.rate_limit.failures_per_account = 3).await;
    let e = enrolled(&s, "tfa-budget2").await;
    let pending = challenge_cookie(&s, &e.email).await;
    for _ in 0..2 {
        assert_eq!(verify_totp(&s, None, Some(&pending), "000000", false).await.status, 401);
    }
    // The third failure is the password's.
    assert_eq!(s.client.sign_in(&e.email, "a wrong password").await.0, 401);
    let r = verify_totp(&s, None, Some(&pending), "000000", false).await;
    assert_eq!((r.status, r.json()["code"].clone()), (429, json!("ACCOUNT_TEMPORARILY_LOCKED")), "{}", r.text);
    assert!(r.header("retry-after").is_some());
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backup_codes_are_single_use_and_replaced_as_a_set() {
    let s = TestServer::start().await;
    let e = enrolled(&s, "tfa-backup").await;
    let path = "/api/auth/two-factor/verify-backup-code";
    let pending = challenge_cookie(&s, &e.email).await;
    let r = verify(&s, path, None, Some(&pending), "zzzzz-zzzzz", false).await;
    assert_eq!((r.status, r.json()["code"].clone()), (401, json!("INVALID_BACKUP_CODE")));
    let r = verify(&s, path, None, Some(&pending), &e.backup_codes[0], false).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let session = r.session_cookie().unwrap().value;
    assert_eq!(s.client.session(&session).await["user"]["email"], e.email.as_str());
    // Used up.
    let pending = challenge_cookie(&s, &e.email).await;
    let r = verify(&s, path, None, Some(&pending), &e.backup_codes[0], false).await;
    assert_eq!((r.status, r.json()["code"].clone()), (401, json!("INVALID_BACKUP_CODE")));

    let generate = |password: &'static str| {
        s.client
            .post("/api/auth/two-factor/generate-backup-codes")
            .cookie(&e.session)
            .json(&json!({"password": password}))
            .send()
    };
    assert_eq!(generate("not the password").await.json()["code"], "INVALID_PASSWORD");
    let r = generate(PASSWORD).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json()["status"], true);
    let fresh: Vec<String> =
        r.json()["backupCodes"].as_array().unwrap().iter().map(|c| c.as_str().unwrap().to_owned()).collect();
    assert_eq!(fresh.len(), 10);
    // An old code that was never used dies with the set; a new one works.
    let r = verify(&s, path, None, Some(&pending), &e.backup_codes[1], false).await;
    assert_eq!(r.status, 401);
    let r = verify(&s, path, None, Some(&pending), &fresh[0], false).await;
    assert_eq!(r.status, 200, "{}", r.text);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trusted_device_skips_the_factor_until_the_password_changes() {
    let s = TestServer::start().await;
    let e = enrolled(&s, "tfa-trust").await;
    let pending = challenge_cookie(&s, &e.email).await;
    let step = settled_step().await;
    let r = verify_totp(&s, None, Some(&pending), &code(&e.secret, step + 1), true).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let trust = cookie_of(&r, TRUST_COOKIE).expect("a trusted-device cookie");
    assert_eq!(trust.attr("max-age"), Some("2592000"));
    assert!(trust.attrs.contains_key("httponly"));

    // The device signs in with the password alone, and its cookie is renewed (the old value stops working).
    let r = challenge(&s, &e.email, Some(&trust.value)).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(r.json()["token"].is_string(), "a session: {}", r.text);
    let renewed = cookie_of(&r, TRUST_COOKIE).expect("renewed").value;
    assert_ne!(renewed, trust.value);
    let r = challenge(&s, &e.email, Some(&trust.value)).await;
    assert_eq!(r.json()["twoFactorRedirect"], true, "the old cookie is spent");
    // Another account's trusted device is not this one's.
    let other = enrolled(&s, "tfa-trust-other").await;
    assert_eq!(challenge(&s, &other.email, Some(&renewed)).await.json()["twoFactorRedirect"], true);

    // A password change ends every trusted device.
    let r = s
        .client
        .post("/api/auth/change-password")
        .cookie(&e.session)
        .json(&json!({"currentPassword": PASSWORD, "newPassword": "an entirely new one"}))
        .send()
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let r = s
        .client
        .post("/api/auth/sign-in/email")
        .header("cookie", &format!("{TRUST_COOKIE}={renewed}"))
        .json(&json!({"email": e.email, "password": "an entirely new one"}))
        .send()
        .await;
    assert_eq!(r.json()["twoFactorRedirect"], true, "{}", r.text);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disable_forgets_the_factor_and_the_trusted_devices() {
    let s = TestServer::start().await;
    let e = enrolled(&s, "tfa-disable").await;
    let uri = s
        .client
        .post("/api/auth/two-factor/get-totp-uri")
        .cookie(&e.session)
        .json(&json!({"password": PASSWORD}))
        .send()
        .await;
    assert_eq!(uri.status, 200, "{}", uri.text);
    assert_eq!(secret_of(uri.json()["totpURI"].as_str().unwrap()), e.secret, "the same secret again");
    let wrong = s
        .client
        .post("/api/auth/two-factor/get-totp-uri")
        .cookie(&e.session)
        .json(&json!({"password": "nope nope"}))
        .send()
        .await;
    assert_eq!(wrong.json()["code"], "INVALID_PASSWORD");

    let pending = challenge_cookie(&s, &e.email).await;
    let step = settled_step().await;
    let r = verify_totp(&s, None, Some(&pending), &code(&e.secret, step + 1), true).await;
    let trust = cookie_of(&r, TRUST_COOKIE).unwrap().value;

    let disable = |password: &'static str| {
        s.client.post("/api/auth/two-factor/disable").cookie(&e.session).json(&json!({"password": password})).send()
    };
    assert_eq!(disable("not the password").await.json()["code"], "INVALID_PASSWORD");
    let r = disable(PASSWORD).await;
    assert_eq!((r.status, r.json()), (200, json!({"status": true})));
    assert_eq!(cookie_of(&r, TRUST_COOKIE).unwrap().attr("max-age"), Some("0"));
    let (status, body, cookie) = s.client.sign_in(&e.email, PASSWORD).await;
    assert_eq!((status, body["user"]["twoFactorEnabled"].clone()), (200, json!(false)));
    assert!(cookie.is_some());
    let r = disable(PASSWORD).await;
    assert_eq!((r.status, r.json()["code"].clone()), (400, json!("TWO_FACTOR_NOT_ENABLED")));
    let r = s
        .client
        .post("/api/auth/two-factor/get-totp-uri")
        .cookie(&e.session)
        .json(&json!({"password": PASSWORD}))
        .send()
        .await;
    assert_eq!((r.status, r.json()["code"].clone()), (400, json!("TOTP_NOT_ENABLED")));
    let r = s
        .client
        .post("/api/auth/two-factor/generate-backup-codes")
        .cookie(&e.session)
        .json(&json!({"password": PASSWORD}))
        .send()
        .await;
    assert_eq!((r.status, r.json()["code"].clone()), (400, json!("TWO_FACTOR_NOT_ENABLED")));

    // Enrolled again, the old trusted device no longer vouches.
    let r = s
        .client
        .post("/api/auth/two-factor/enable")
        .cookie(&e.session)
        .json(&json!({"password": PASSWORD}))
        .send()
        .await;
    let secret = secret_of(r.json()["totpURI"].as_str().unwrap());
    let step = settled_step().await;
    assert_eq!(verify_totp(&s, Some(&e.session), None, &code(&secret, step), false).await.status, 200);
    assert_eq!(challenge(&s, &e.email, Some(&trust)).await.json()["twoFactorRedirect"], true);
    // Without a session every enrolment call is 401.
    for path in ["enable", "get-totp-uri", "generate-backup-codes", "disable"] {
        let r =
            s.client.post(&format!("/api/auth/two-factor/{path}")).json(&json!({"password": PASSWORD})).send().await;
        assert_eq!(r.status, 401, "{path}: {}", r.text);
    }
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_administrator_resets_a_users_factor_and_everything_it_opened() {
    let s = TestServer::start().await;
    let admin = s.client.admin_session().await;
    let e = enrolled(&s, "tfa-reset").await;
    let pending = challenge_cookie(&s, &e.email).await;
    let step = settled_step().await;
    let r = verify_totp(&s, None, Some(&pending), &code(&e.secret, step + 1), true).await;
    let trust = cookie_of(&r, TRUST_COOKIE).unwrap().value;
    let path = format!("/api/admin/users/{}/two-factor/reset", e.id);

    let other = s.client.new_user("tfa-reset-other").await;
    let r = s.client.post(&path).cookie(&other.cookie).json(&json!({})).send().await;
    assert_eq!(r.status, 403, "{}", r.text);
    let r = s.client.post(&path).json(&json!({})).send().await;
    assert_eq!(r.status, 401);
    let r = s.client.post("/api/admin/users/not-a-uuid/two-factor/reset").cookie(&admin).json(&json!({})).send().await;
    assert_eq!(r.status, 400);

    let r = s.client.post(&path).cookie(&admin).json(&json!({})).send().await;
    assert_eq!((r.status, r.json()), (200, json!({"success": true, "reset": true})), "{}", r.text);
    assert_eq!(s.client.get_session_resp(Some(&e.session)).await.json(), Value::Null, "every session ended");
    let r = challenge(&s, &e.email, Some(&trust)).await;
    assert_eq!(r.json()["user"]["twoFactorEnabled"], false, "signs in with the password alone: {}", r.text);
    let r = s.client.post(&path).cookie(&admin).json(&json!({})).send().await;
    assert_eq!(r.json(), json!({"success": true, "reset": false}));

    let entries = s.client.get("/api/admin/audit?limit=500").cookie(&admin).send().await.json()["entries"].clone();
    let actions: Vec<&str> = entries.as_array().unwrap().iter().map(|e| e["action"].as_str().unwrap()).collect();
    for expected in [
        "user.two_factor_enrolment",
        "user.two_factor_enabled",
        "user.two_factor_reset",
        "sign_in.second_factor_passed",
    ] {
        assert!(actions.contains(&expected), "{expected} not in {actions:?}");
    }
    assert!(!entries.to_string().contains(&e.backup_codes[0]), "a backup code in the audit log");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_codes_and_disabling_are_audited() {
    let s = TestServer::start().await;
    let admin = s.client.admin_session().await;
    let e = enrolled(&s, "tfa-audit").await;
    let pending = challenge_cookie(&s, &e.email).await;
    assert_eq!(verify_totp(&s, None, Some(&pending), "000000", false).await.status, 401);
    let r = s
        .client
        .post("/api/auth/two-factor/disable")
        .cookie(&e.session)
        .json(&json!({"password": PASSWORD}))
        .send()
        .await;
    assert_eq!(r.status, 200);
    let entries = s.client.get("/api/admin/audit?limit=500").cookie(&admin).send().await.json()["entries"].clone();
    let mine: Vec<&Value> = entries.as_array().unwrap().iter().filter(|x| x["target_id"] == e.id.as_str()).collect();
    let actions: Vec<&str> = mine.iter().map(|x| x["action"].as_str().unwrap()).collect();
    assert!(actions.contains(&"sign_in.second_factor_failed"), "{actions:?}");
    assert!(actions.contains(&"user.two_factor_disabled"), "{actions:?}");
    s.stop().await;
}

/// `[two_factor] required_for_roles`: an administrator without a second factor can reach nothing but enrolment,
/// get-session and sign-out; with one, everything.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_role_that_requires_a_second_factor_can_only_enrol_until_it_has_one() {
    let s = TestServer::start_adjusted(|c| c.two_factor.required_for_roles = vec!["admin".into()]).await;
    let admin = s.client.admin_session().await;
    let r = s.client.list_users(Some(&admin)).await;
    assert_eq!(r.status, 403, "{}", r.text);
    assert!(r.json()["error"].as_str().unwrap().contains("second factor"), "{}", r.text);
    let r = s.client.get("/api/auth/admin/list-users").cookie(&admin).send().await;
    assert_eq!((r.status, r.json()["code"].clone()), (403, json!("TWO_FACTOR_REQUIRED")));
    let r = s.client.post("/api/auth/update-user").cookie(&admin).json(&json!({"name": "X"})).send().await;
    assert_eq!(r.status, 403);
    assert_eq!(s.client.session(&admin).await["user"]["email"], ADMIN_EMAIL);
    // A plain user is not held back.
    let user = s.client.new_user("tfa-policy").await;
    let r = s.client.post("/api/auth/update-user").cookie(&user.cookie).json(&json!({"name": "Y"})).send().await;
    assert_eq!(r.status, 200, "{}", r.text);

    let r = s
        .client
        .post("/api/auth/two-factor/enable")
        .cookie(&admin)
        .json(&json!({"password": ADMIN_PASSWORD}))
        .send()
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let secret = secret_of(r.json()["totpURI"].as_str().unwrap());
    let step = settled_step().await;
    assert_eq!(verify_totp(&s, Some(&admin), None, &code(&secret, step), false).await.status, 200);
    let r = s.client.list_users(Some(&admin)).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(s.client.sign_out(Some(&admin)).await.status, 200);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_status_page_counts_administrators_without_a_second_factor() {
    let s = TestServer::start().await;
    let admin = s.client.admin_session().await;
    let status = s.client.get("/api/admin/status").cookie(&admin).send().await.json();
    assert_eq!(status["administrators_without_second_factor"], 1, "{status}");
    let r = s
        .client
        .post("/api/auth/two-factor/enable")
        .cookie(&admin)
        .json(&json!({"password": ADMIN_PASSWORD}))
        .send()
        .await;
    let secret = secret_of(r.json()["totpURI"].as_str().unwrap());
    let step = settled_step().await;
    assert_eq!(verify_totp(&s, Some(&admin), None, &code(&secret, step), false).await.status, 200);
    let status = s.client.get("/api/admin/status").cookie(&admin).send().await.json();
    assert_eq!(status["administrators_without_second_factor"], 0, "{status}");
    s.stop().await;
}

/// The secret is sealed at rest: the store file holds neither it nor its base32 form, and a restart (which reads
/// it back through the data key) still verifies codes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_secret_is_sealed_at_rest_and_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start_in(dir.path()).await;
    let e = enrolled(&s, "tfa-rest").await;
    s.stop().await;
    if let Ok(bytes) = std::fs::read(dir.path().join("service-auth.redb")) {
        let b32 = service_auth::domain::two_factor::base32(&e.secret);
        assert!(!bytes.windows(e.secret.len()).any(|w| w == e.secret.as_slice()), "the raw secret in the store");
        assert!(!bytes.windows(b32.len()).any(|w| w == b32.as_bytes()), "the base32 secret in the store");
        for code in &e.backup_codes {
            assert!(!bytes.windows(code.len()).any(|w| w == code.as_bytes()), "a backup code in the store");
        }
    }
    let s = TestServer::start_in(dir.path()).await;
    let pending = challenge_cookie(&s, &e.email).await;
    let step = settled_step().await;
    assert_eq!(verify_totp(&s, None, Some(&pending), &code(&e.secret, step + 1), false).await.status, 200);
    s.stop().await;
}

// Codes by mail (`two-factor/send-otp`, `verify-otp`), read from a real SMTP server as the mail tests do.

use super::mail::{SmtpSink, with_smtp};

/// Mail on, and codes by mail (`[two_factor] codes_by_mail`).
fn codes_by_mail(smtp: &SmtpSink) -> impl FnOnce(&mut service_auth::config::Config) {
    let mail = with_smtp(smtp.url());
    move |c| {
        mail(c);
        c.two_factor.codes_by_mail = true;
    }
}

/// The six-digit code of the `n`-th message (counting from 1) once it has arrived.
async fn mailed_code(smtp: &SmtpSink, n: usize) -> String {
    let message = smtp.wait_for(n).await.remove(n - 1);
    assert!(message.contains("Subject: Your sign-in code"), "{message}");
    let code = message.lines().map(str::trim).find(|l| l.len() == 6 && l.bytes().all(|b| b.is_ascii_digit()));
    code.unwrap_or_else(|| panic!("no code in {message}")).to_owned()
}

async fn send_otp(s: &TestServer, session: Option<&str>, challenge: Option<&str>) -> Resp {
    let mut cookies = Vec::new();
    if let Some(session) = session {
        cookies.push(format!("{COOKIE}={session}"));
    }
    if let Some(challenge) = challenge {
        cookies.push(format!("{TWO_FACTOR_COOKIE}={challenge}"));
    }
    let mut req = s.client.post("/api/auth/two-factor/send-otp");
    if !cookies.is_empty() {
        req = req.header("cookie", &cookies.join("; "));
    }
    req.send().await
}

async fn verify_otp(s: &TestServer, session: Option<&str>, challenge: Option<&str>, code: &str, trust: bool) -> Resp {
    verify(s, "/api/auth/two-factor/verify-otp", session, challenge, code, trust).await
}

fn coded(r: &Resp) -> (u16, Value) {
    (r.status, r.json()["code"].clone())
}

/// A code mailed for a sign-in passes its second factor once; a wrong one counts against the challenge and is
/// audited; the code dies with the challenge it was sent for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mailed_code_passes_the_sign_in_step_once() {
    let smtp = SmtpSink::start();
    let s = TestServer::start_adjusted(codes_by_mail(&smtp)).await;
    let admin = s.client.admin_session().await;
    let e = enrolled(&s, "tfa-otp").await;
    let r = challenge(&s, &e.email, None).await;
    assert_eq!(r.json(), json!({"twoFactorRedirect": true, "twoFactorMethods": ["totp", "otp"]}));
    let pending = cookie_of(&r, TWO_FACTOR_COOKIE).unwrap().value;
    let r = verify_otp(&s, None, Some(&pending), "123456", false).await;
    assert_eq!(coded(&r), (400, json!("OTP_HAS_EXPIRED")), "no code sent yet");
    let r = send_otp(&s, None, Some(&pending)).await;
    assert_eq!((r.status, r.json()), (200, json!({"status": true})), "{}", r.text);
    let code = mailed_code(&smtp, 1).await;
    let wrong = if code == "000000" { "111111" } else { "000000" };
    assert_eq!(coded(&verify_otp(&s, None, Some(&pending), wrong, false).await), (401, json!("INVALID_CODE")));
    let r = verify_otp(&s, None, Some(&pending), &code, true).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_auth_user(&r.json()["user"]);
    assert_eq!(r.json()["user"]["email"], e.email.as_str());
    let session = r.session_cookie().expect("a session cookie").value;
    assert_eq!(s.client.session(&session).await["user"]["id"], e.id.as_str());
    assert!(cookie_of(&r, TRUST_COOKIE).is_some(), "trustDevice: the trusted-device cookie");
    // Used up with its challenge: a new sign-in has no code until it asks for one.
    let again = challenge_cookie_with(&s, &e.email, &["totp", "otp"]).await;
    assert_eq!(coded(&verify_otp(&s, None, Some(&again), &code, false).await), (400, json!("OTP_HAS_EXPIRED")));
    assert_eq!(
        coded(&verify_otp(&s, None, Some(&pending), &code, false).await),
        (401, json!("INVALID_TWO_FACTOR_COOKIE"))
    );
    // Without a challenge or a session.
    assert_eq!(coded(&send_otp(&s, None, None).await), (401, json!("INVALID_TWO_FACTOR_COOKIE")));

    let entries = s.client.get("/api/admin/audit?limit=500").cookie(&admin).send().await.json()["entries"].clone();
    let mine: Vec<&Value> = entries.as_array().unwrap().iter().filter(|x| x["target_id"] == e.id.as_str()).collect();
    let has = |action: &str, detail: &str| mine.iter().any(|x| x["action"] == action && x["detail"] == detail);
    assert!(has("user.two_factor_code_mailed", ""), "{mine:?}");
    assert!(has("sign_in.second_factor_failed", "wrong mailed code"), "{mine:?}");
    assert!(has("sign_in.second_factor_passed", "second factor passed with a mailed code; device trusted"), "{mine:?}");
    assert!(!entries.to_string().contains(&code), "a code in the audit log");
    s.stop().await;
}

async fn challenge_cookie_with(s: &TestServer, email: &str, methods: &[&str]) -> String {
    let r = challenge(s, email, None).await;
    assert_eq!(r.json(), json!({"twoFactorRedirect": true, "twoFactorMethods": methods}), "{}", r.text);
    cookie_of(&r, TWO_FACTOR_COOKIE).expect("a two-factor cookie").value
}

/// Five wrong codes end the sign-in (the challenge's five count every factor), and mailed codes spend the
/// account's one failure budget like the others.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_mailed_codes_end_the_challenge_and_spend_the_accounts_budget() {
    let smtp = SmtpSink::start();
    let s = TestServer::start_adjusted(codes_by_mail(&smtp)).await;
    let e = enrolled(&s, "tfa-otp-five").await;
    let pending = challenge_cookie_with(&s, &e.email, &["totp", "otp"]).await;
    assert_eq!(send_otp(&s, None, Some(&pending)).await.status, 200);
    let code = mailed_code(&smtp, 1).await;
    let wrong = if code == "000000" { "111111" } else { "000000" };
    assert_eq!(coded(&verify_totp(&s, None, Some(&pending), "000000", false).await), (401, json!("INVALID_CODE")));
    for n in 2..=4 {
        let r = verify_otp(&s, None, Some(&pending), wrong, false).await;
        assert_eq!(coded(&r), (401, json!("INVALID_CODE")), "wrong code {n}");
    }
    let r = verify_otp(&s, None, Some(&pending), wrong, false).await;
    assert_eq!(coded(&r), (400, json!("TOO_MANY_ATTEMPTS_REQUEST_NEW_CODE")));
    assert_eq!(cookie_of(&r, TWO_FACTOR_COOKIE).unwrap().attr("max-age"), Some("0"));
    assert_eq!(
        coded(&verify_otp(&s, None, Some(&pending), &code, false).await),
        (401, json!("INVALID_TWO_FACTOR_COOKIE"))
    );
    s.stop().await;

    let smtp = SmtpSink::start();
    let s = TestServer::start_adjusted(|c| {
        codes_by_mail(&smtp)(c);
        c.rate_limit.failures_per_account = 3;
    })
    .await;
    let e = enrolled(&s, "tfa-otp-budget").await;
    for n in 0..3 {
        // A fresh challenge and code each time: the password is right, and does not clear the count.
        let pending = challenge_cookie_with(&s, &e.email, &["totp", "otp"]).await;
        assert_eq!(send_otp(&s, None, Some(&pending)).await.status, 200);
        let code = mailed_code(&smtp, n + 1).await;
        let wrong = if code == "000000" { "111111" } else { "000000" };
        let r = verify_otp(&s, None, Some(&pending), wrong, false).await;
        assert_eq!(r.status, 401, "wrong code {n}: {}", r.text);
        if n == 2 {
            // The budget is spent: even the right code is refused now.
            let r = verify_otp(&s, None, Some(&pending), &code, false).await;
            assert_eq!(coded(&r), (429, json!("ACCOUNT_TEMPORARILY_LOCKED")), "{}", r.text);
        }
    }
    s.stop().await;
}

/// With a session (better-auth's other use of the calls): the code sent for this session, used once; five wrong
/// tries spend it (a new one must be asked for). An account without the factor is not sent one; nor is anyone
/// while codes by mail are off.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signed_in_session_verifies_a_mailed_code() {
    let smtp = SmtpSink::start();
    let s = TestServer::start_adjusted(codes_by_mail(&smtp)).await;
    let e = enrolled(&s, "tfa-otp-session").await;
    assert_eq!(send_otp(&s, Some(&e.session), None).await.status, 200);
    let code = mailed_code(&smtp, 1).await;
    let wrong = if code == "000000" { "111111" } else { "000000" };
    for n in 1..=5 {
        let r = verify_otp(&s, Some(&e.session), None, wrong, false).await;
        assert_eq!(coded(&r), (401, json!("INVALID_CODE")), "wrong code {n}");
    }
    let r = verify_otp(&s, Some(&e.session), None, &code, false).await;
    assert_eq!(coded(&r), (400, json!("TOO_MANY_ATTEMPTS_REQUEST_NEW_CODE")), "spent by five wrong tries");
    assert_eq!(send_otp(&s, Some(&e.session), None).await.status, 200);
    let code = mailed_code(&smtp, 2).await;
    let r = verify_otp(&s, Some(&e.session), None, &code, false).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(
        (r.json()["token"].as_str(), r.json()["user"]["id"].as_str()),
        (Some(e.session.as_str()), Some(e.id.as_str()))
    );
    let r = verify_otp(&s, Some(&e.session), None, &code, false).await;
    assert_eq!(coded(&r), (400, json!("OTP_HAS_EXPIRED")), "used once");

    let plain = s.client.new_user("tfa-otp-none").await;
    assert_eq!(coded(&send_otp(&s, Some(&plain.cookie), None).await), (400, json!("OTP_NOT_ENABLED")));
    let r = s
        .client
        .post("/api/auth/two-factor/enable")
        .cookie(&plain.cookie)
        .json(&json!({"password": PASSWORD, "method": "otp"}))
        .send()
        .await;
    assert_eq!(coded(&r), (400, json!("OTP_NOT_CONFIGURED")), "a mailed code is not a factor of its own");
    s.stop().await;

    // Mail configured, codes by mail off (the default): not offered, refused.
    let smtp = SmtpSink::start();
    let s = TestServer::start_adjusted(with_smtp(smtp.url())).await;
    let e = enrolled(&s, "tfa-otp-off").await;
    let pending = challenge_cookie_with(&s, &e.email, &["totp"]).await;
    assert_eq!(coded(&send_otp(&s, None, Some(&pending)).await), (400, json!("OTP_NOT_CONFIGURED")));
    assert_eq!(coded(&send_otp(&s, Some(&e.session), None).await), (400, json!("OTP_NOT_CONFIGURED")));
    s.stop().await;
}

/// Two nodes on one PostgreSQL: a code sent through one node (kept in the store, in the change log) passes the
/// sign-in on the other, once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_code_sent_through_one_node_verifies_on_the_other() {
    let smtp = SmtpSink::start();
    let pg = tokio::task::spawn_blocking(super::harness::cluster::Postgres::start).await.unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let mut config = super::harness::test_config(tmp.path());
    codes_by_mail(&smtp)(&mut config);
    let s = TestServer::start_cluster(config, &pg.url()).await;
    let (a, b) = (&s.nodes[0], &s.nodes[1]);
    let user = a.new_user("tfa-otp-nodes").await;
    let r =
        a.post("/api/auth/two-factor/enable").cookie(&user.cookie).json(&json!({"password": PASSWORD})).send().await;
    let secret = secret_of(r.json()["totpURI"].as_str().unwrap());
    let step = settled_step().await;
    let r = b
        .post("/api/auth/two-factor/verify-totp")
        .cookie(&user.cookie)
        .json(&json!({"code": code(&secret, step)}))
        .send()
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let r = a.post("/api/auth/sign-in/email").json(&json!({"email": user.email, "password": PASSWORD})).send().await;
    let pending = cookie_of(&r, TWO_FACTOR_COOKIE).expect("a two-factor cookie").value;
    let with_cookie = |node: &super::harness::Client, path: &str, body: Value| {
        node.post(path).header("cookie", &format!("{TWO_FACTOR_COOKIE}={pending}")).json(&body).send()
    };
    assert_eq!(with_cookie(a, "/api/auth/two-factor/send-otp", json!({})).await.status, 200);
    let code = mailed_code(&smtp, 1).await;
    let r = with_cookie(b, "/api/auth/two-factor/verify-otp", json!({"code": code})).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let session = r.session_cookie().expect("a session cookie").value;
    assert_eq!(a.session(&session).await["user"]["id"], user.id.as_str());
    let r = with_cookie(a, "/api/auth/two-factor/verify-otp", json!({"code": code})).await;
    assert_eq!(coded(&r), (401, json!("INVALID_TWO_FACTOR_COOKIE")), "used once, on every node");
    s.stop().await;
}

/// The step that passes a challenge ends it, uses its code up and starts the session in one commit: a store
/// failure at any point of it leaves either the session (and the challenge gone) or the challenge live with its
/// code unused, never a challenge used up without a session (the step was once two commits: a failure between
/// them answered 503 and left the sign-in to start over from the password).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_failure_in_the_second_factor_step_leaves_both_or_neither() {
    let dir = tempfile::tempdir().unwrap();
    let faults = service_auth::store::FaultSwitch::default();
    let s = TestServer::start_with_faults(test_config(dir.path()), faults.clone()).await;
    let e = enrolled(&s, "tfa-fault").await;
    let path = "/api/auth/two-factor/verify-backup-code";
    // The first commit of the step fails; then the second one (the first one spared).
    for (n, spared) in [0, 1].into_iter().enumerate() {
        let code = &e.backup_codes[n];
        let pending = challenge_cookie(&s, &e.email).await;
        faults.fail_commits_after(spared, 1);
        let r = verify(&s, path, None, Some(&pending), code, false).await;
        faults.fail_next_commits(0);
        let session = match r.status {
            200 => r.session_cookie().expect("a session cookie").value,
            503 => {
                // Neither: the challenge is live and the code unused, so the same step passes now.
                let again = verify(&s, path, None, Some(&pending), code, false).await;
                assert_eq!(again.status, 200, "spared {spared}: the challenge or its code was used up: {}", again.text);
                again.session_cookie().expect("a session cookie").value
            }
            other => panic!("spared {spared}: {other} {}", r.text),
        };
        // Both: the session is real and the challenge is over.
        assert_eq!(s.client.session(&session).await["user"]["email"], e.email.as_str());
        let over = verify(&s, path, None, Some(&pending), &e.backup_codes[9], false).await;
        assert_eq!(
            (over.status, over.json()["code"].clone()),
            (401, json!("INVALID_TWO_FACTOR_COOKIE")),
            "spared {spared}"
        );
    }
    s.stop().await;
}
