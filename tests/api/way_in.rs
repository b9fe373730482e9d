//! Sign-in links and mailed codes (better-auth's `magicLink` and `emailOTP` wire), read from a real SMTP server as
//! the mail tests do: every call and every refusal, over HTTP against the real server.

use serde_json::{Value, json};

use super::harness::*;
use super::mail::{SmtpSink, with_smtp};

/// Mail on, both ways in on with `adjust`'s changes, and the mail limits out of the way (the tests send more than
/// three messages from one address).
fn ways_in(
    smtp: &SmtpSink,
    adjust: impl FnOnce(&mut service_auth::config::Config),
) -> impl FnOnce(&mut service_auth::config::Config) {
    let mail = with_smtp(smtp.url());
    move |c| {
        mail(c);
        c.magic_link.enabled = true;
        c.email_otp.enabled = true;
        c.rate_limit.mail_per_address = 1000;
        c.rate_limit.mail_per_email = 1000;
        adjust(c);
    }
}

/// The link of the `n`-th message (counting from 1), quoted-printable undone, as a path on this server.
async fn mailed_link(smtp: &SmtpSink, n: usize) -> String {
    let message = smtp.wait_for(n).await.remove(n - 1);
    assert!(message.contains("Subject: Your sign-in link"), "{message}");
    let text = message.replace("=\r\n", "").replace("=\n", "").replace("=3D", "=");
    let at = text.find("http://auth.test/api/auth/magic-link/verify?").expect("a sign-in link");
    let link: String = text[at..].chars().take_while(|c| !c.is_whitespace() && *c != '<' && *c != '"').collect();
    link.trim_start_matches("http://auth.test").to_owned()
}

/// The six-digit code of the `n`-th message, whose subject must be `subject`.
async fn mailed_code(smtp: &SmtpSink, n: usize, subject: &str) -> String {
    let message = smtp.wait_for(n).await.remove(n - 1);
    assert!(message.contains(&format!("Subject: {subject}")), "{message}");
    let code = message.lines().map(str::trim).find(|l| l.len() == 6 && l.bytes().all(|b| b.is_ascii_digit()));
    code.unwrap_or_else(|| panic!("no code in {message}")).to_owned()
}

async fn ask_link(s: &TestServer, body: Value) -> Resp {
    s.post("/api/auth/sign-in/magic-link").json(&body).send().await
}

async fn post(s: &TestServer, path: &str, body: Value) -> Resp {
    s.post(&format!("/api/auth/{path}")).json(&body).send().await
}

fn coded(r: &Resp) -> (u16, Value) {
    (r.status, r.json()["code"].clone())
}

async fn audit_actions(s: &TestServer, admin: &str) -> Vec<(String, String)> {
    let audit = s.get("/api/admin/audit?limit=200").cookie(admin).send().await.json();
    let entries = audit["entries"].as_array().unwrap().iter();
    entries.map(|e| (str_of(&e["action"]).to_owned(), e["detail"].as_str().unwrap_or_default().to_owned())).collect()
}

/// A link to an address with no account makes it (verified, named after the address), signs in, redirects to
/// `newUserCallbackURL`, and works once; a second use redirects with `error=INVALID_TOKEN`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_magic_link_signs_a_new_address_up_once() {
    let smtp = SmtpSink::start();
    let s = TestServer::start_adjusted(ways_in(&smtp, |_| {})).await;
    let admin = s.admin_session().await;
    let body = json!({"email": "New.Comer@Example.com", "callbackURL": "/home", "newUserCallbackURL": "/welcome"});
    let r = ask_link(&s, body).await;
    assert_eq!((r.status, r.json()), (200, json!({"status": true})), "{}", r.text);
    let link = mailed_link(&smtp, 1).await;
    assert!(link.contains("callbackURL=%2Fhome") && link.contains("newUserCallbackURL=%2Fwelcome"), "{link}");
    let r = s.get(&link).send().await;
    assert_eq!((r.status, r.header("location").as_deref()), (302, Some("/welcome")), "{}", r.text);
    let cookie = r.session_cookie().expect("a session cookie").value;
    let session = s.session(&cookie).await;
    assert_eq!(session["user"]["email"], "new.comer@example.com");
    assert_eq!(
        (session["user"]["emailVerified"].clone(), session["user"]["name"].clone()),
        (json!(true), json!("new.comer"))
    );
    // Single use.
    let r = s.get(&link).send().await;
    assert_eq!((r.status, r.header("location").as_deref()), (302, Some("/home?error=INVALID_TOKEN")));
    assert!(r.session_cookie().is_none());
    let actions = audit_actions(&s, &admin).await;
    for action in ["user.link_requested", "user.created", "sign_in.magic_link", "sign_in.succeeded"] {
        assert!(actions.iter().any(|(a, _)| a == action), "{action} not in {actions:?}");
    }
}

/// Without `callbackURL`, the link answers `{token, user, session}` with the cookie. An account whose address was
/// never proven loses its password and every session first (better-auth's `revokeUnprovenAccountAccess`), and its
/// address is proven; a proven account keeps both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_magic_link_to_an_unproven_account_ends_its_password_and_sessions() {
    let smtp = SmtpSink::start();
    let s = TestServer::start_adjusted(ways_in(&smtp, |_| {})).await;
    let squatter = s.new_user("squatted").await;
    assert_eq!(ask_link(&s, json!({"email": squatter.email})).await.status, 200);
    let link = mailed_link(&smtp, 1).await;
    let link = link.replace("&callbackURL=%2F", "");
    let r = s.get(&link).send().await;
    assert_eq!(r.status, 200, "{}", r.text);
    let answer = r.json();
    assert_keys(&answer, &["token", "user", "session"]);
    assert_eq!(answer["user"]["emailVerified"], true);
    assert_eq!(answer["session"]["token"], answer["token"]);
    let owner = r.session_cookie().expect("a session cookie").value;
    assert_eq!(s.session(&squatter.cookie).await, Value::Null, "the squatter's session ended");
    assert_eq!(s.sign_in(&squatter.email, PASSWORD).await.0, 401, "the squatter's password ended");
    assert_eq!(s.session(&owner).await["user"]["emailVerified"], true);

    // Proven now: the next link keeps the session it finds (and there is no password to keep).
    assert_eq!(ask_link(&s, json!({"email": squatter.email, "callbackURL": "/in"})).await.status, 200);
    let r = s.get(&mailed_link(&smtp, 2).await).send().await;
    assert_eq!((r.status, r.header("location").as_deref()), (302, Some("/in")));
    assert_ne!(s.session(&owner).await, Value::Null, "a proven account keeps its sessions");

    // A proven account with a password keeps it.
    let proven = s.new_user("proven").await;
    s.mark_verified(&s.admin_session().await, &proven.id).await;
    assert_eq!(ask_link(&s, json!({"email": proven.email})).await.status, 200);
    assert_eq!(s.get(&mailed_link(&smtp, 3).await).send().await.status, 302);
    assert_ne!(s.session(&proven.cookie).await, Value::Null);
    assert_eq!(s.sign_in(&proven.email, PASSWORD).await.0, 200);
}

/// The same answer for a known and an unknown address; redirects off the trusted origins refused (403, nothing
/// mailed); a malformed address or body refused; with sign-up off, nothing goes to an unknown address.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_magic_link_request_says_nothing_about_accounts_and_refuses_bad_input() {
    let smtp = SmtpSink::start();
    let s = TestServer::start_adjusted(ways_in(&smtp, |c| c.magic_link.sign_up = false)).await;
    let known = s.new_user("known").await;
    let (a, b) =
        (ask_link(&s, json!({"email": known.email})).await, ask_link(&s, json!({"email": "nobody@example.com"})).await);
    assert_eq!((a.status, a.text.clone()), (b.status, b.text.clone()));
    assert_eq!(a.json(), json!({"status": true}));
    for field in ["callbackURL", "newUserCallbackURL", "errorCallbackURL"] {
        let r = ask_link(&s, json!({"email": known.email, field: "https://evil.example/x"})).await;
        assert_auth_error(&r, 403, "INVALID_CALLBACK_URL");
    }
    assert_auth_error(&ask_link(&s, json!({"email": "not-an-address"})).await, 400, "VALIDATION_ERROR");
    assert_auth_error(&ask_link(&s, json!({"email": known.email, "extra": 1})).await, 400, "VALIDATION_ERROR");
    assert_auth_error(&ask_link(&s, json!({"email": known.email, "metadata": 3})).await, 400, "VALIDATION_ERROR");
    assert_eq!(ask_link(&s, json!({"email": known.email, "metadata": {"a": 1}})).await.status, 200);
    // Two messages, both to the known address: none to the unknown one, none for the refused requests.
    let messages = smtp.wait_for(2).await;
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let messages = if smtp.messages().len() > messages.len() { smtp.messages() } else { messages };
    assert_eq!(messages.len(), 2);
    assert!(messages.iter().all(|m| m.contains(&format!("To: {}", known.email))), "{messages:?}");

    // Verification: each redirect checked before the token; a bad token goes to errorCallbackURL.
    let r = s.get("/api/auth/magic-link/verify?token=x&errorCallbackURL=https%3A%2F%2Fevil.example").send().await;
    assert_auth_error(&r, 403, "INVALID_CALLBACK_URL");
    let r = s.get("/api/auth/magic-link/verify?token=x&callbackURL=%2Fa&errorCallbackURL=%2Foops").send().await;
    assert_eq!((r.status, r.header("location").as_deref()), (302, Some("/oops?error=INVALID_TOKEN")));
    let r = s.get("/api/auth/magic-link/verify?token=x").send().await;
    assert_eq!((r.status, r.header("location").as_deref()), (302, Some("/?error=INVALID_TOKEN")));
}

/// With sign-up off, a link to an address that has since lost its account (or never had one) cannot make one:
/// `error=new_user_signup_disabled`. And a link dies with its lifetime.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_magic_link_expires_and_makes_no_account_when_sign_up_is_off() {
    let smtp = SmtpSink::start();
    let s = TestServer::start_adjusted(ways_in(&smtp, |c| {
        c.magic_link.sign_up = false;
        c.magic_link.ttl_secs = 2;
    }))
    .await;
    let admin = s.admin_session().await;
    let gone = s.new_user("leaving").await;
    assert_eq!(ask_link(&s, json!({"email": gone.email, "callbackURL": "/x"})).await.status, 200);
    let link = mailed_link(&smtp, 1).await;
    let removed = s.post("/api/auth/admin/remove-user").cookie(&admin).json(&json!({"userId": gone.id})).send().await;
    assert_eq!(removed.status, 200, "{}", removed.text);
    let r = s.get(&link).send().await;
    assert_eq!(r.header("location").as_deref(), Some("/x?error=new_user_signup_disabled"));

    let stays = s.new_user("slow").await;
    assert_eq!(ask_link(&s, json!({"email": stays.email, "callbackURL": "/x"})).await.status, 200);
    let link = mailed_link(&smtp, 2).await;
    tokio::time::sleep(std::time::Duration::from_millis(2_200)).await;
    assert_eq!(s.get(&link).send().await.header("location").as_deref(), Some("/x?error=INVALID_TOKEN"));
}

/// Off (the default): every route of both plugins answers 404, as a server without them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ways_in_by_mail_are_off_by_default() {
    let s = TestServer::start().await;
    assert_auth_error(&ask_link(&s, json!({"email": "a@example.com"})).await, 404, "NOT_FOUND");
    assert_auth_error(&s.get("/api/auth/magic-link/verify?token=x").send().await, 404, "NOT_FOUND");
    for path in [
        "email-otp/send-verification-otp",
        "email-otp/check-verification-otp",
        "sign-in/email-otp",
        "email-otp/verify-email",
        "email-otp/request-password-reset",
        "forget-password/email-otp",
        "email-otp/reset-password",
    ] {
        assert_auth_error(&post(&s, path, json!({"email": "a@example.com"})).await, 404, "NOT_FOUND");
    }
}

/// A sign-in code to a new address makes the account and signs in (`{token, user}` and the cookie); a used code
/// is refused; a new code kills the one before; a code of one purpose does not serve another.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sign_in_code_signs_in_once_and_only_the_latest_code_works() {
    let smtp = SmtpSink::start();
    let s = TestServer::start_adjusted(ways_in(&smtp, |_| {})).await;
    let send = |email: &'static str, kind: &'static str| {
        post(&s, "email-otp/send-verification-otp", json!({"email": email, "type": kind}))
    };
    let r = send("Fresh@Example.com", "sign-in").await;
    assert_eq!((r.status, r.json()), (200, json!({"success": true})), "{}", r.text);
    let first = mailed_code(&smtp, 1, "Your sign-in code").await;
    assert_eq!(send("fresh@example.com", "sign-in").await.status, 200);
    let second = mailed_code(&smtp, 2, "Your sign-in code").await;
    if first != second {
        let r = post(&s, "sign-in/email-otp", json!({"email": "fresh@example.com", "otp": first})).await;
        assert_eq!(coded(&r), (400, json!("INVALID_OTP")), "the older code died with the newer one");
    }
    let r = post(&s, "sign-in/email-otp", json!({"email": "fresh@example.com", "otp": second, "name": "Fresh Person"}))
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_keys(&r.json(), &["token", "user"]);
    assert_eq!(
        (r.json()["user"]["name"].clone(), r.json()["user"]["emailVerified"].clone()),
        (json!("Fresh Person"), json!(true))
    );
    let cookie = r.session_cookie().expect("a cookie").value;
    assert_eq!(s.session(&cookie).await["user"]["email"], "fresh@example.com");
    let r = post(&s, "sign-in/email-otp", json!({"email": "fresh@example.com", "otp": second})).await;
    assert_eq!(coded(&r), (400, json!("INVALID_OTP")), "used up");

    // Purposes: a verification code does not sign in, and a sign-in code does not verify.
    assert_eq!(send("fresh@example.com", "email-verification").await.status, 200);
    let verification = mailed_code(&smtp, 3, "Your verification code").await;
    let r = post(&s, "sign-in/email-otp", json!({"email": "fresh@example.com", "otp": verification})).await;
    assert_eq!(coded(&r), (400, json!("INVALID_OTP")));
    let r = post(&s, "email-otp/verify-email", json!({"email": "fresh@example.com", "otp": verification})).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!((r.json()["status"].clone(), r.json()["token"].clone()), (json!(true), Value::Null));

    // Malformed input.
    assert_eq!(coded(&send("not-an-address", "sign-in").await), (400, json!("INVALID_EMAIL")));
    assert_eq!(coded(&send("a@example.com", "change-email").await), (400, json!("INVALID_OTP_TYPE")));
    assert_eq!(coded(&send("a@example.com", "other").await), (400, json!("VALIDATION_ERROR")));
    let r = post(&s, "sign-in/email-otp", json!({"email": "a@example.com", "otp": "1", "role": "admin"})).await;
    assert_eq!(coded(&r), (400, json!("VALIDATION_ERROR")));
}

/// `allowedAttempts` (3): three wrong codes answer `INVALID_OTP`, the fourth call `TOO_MANY_ATTEMPTS` even with the
/// right code, and the code is gone. `check-verification-otp` does not use a right code up, and counts a wrong one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_code_survives_three_wrong_tries_and_a_check_does_not_use_it() {
    let smtp = SmtpSink::start();
    let s = TestServer::start_adjusted(ways_in(&smtp, |_| {})).await;
    let u = s.new_user("guessed").await;
    assert_eq!(
        post(&s, "email-otp/send-verification-otp", json!({"email": u.email, "type": "email-verification"}))
            .await
            .status,
        200
    );
    let code = mailed_code(&smtp, 1, "Your verification code").await;
    let wrong = if code == "000000" { "111111" } else { "000000" };
    let check = |otp: &str| {
        post(
            &s,
            "email-otp/check-verification-otp",
            json!({"email": u.email, "type": "email-verification", "otp": otp}),
        )
    };
    assert_eq!((check(&code).await.status, check(&code).await.json()), (200, json!({"success": true})));
    assert_eq!(coded(&check(wrong).await), (400, json!("INVALID_OTP")));
    let verify = |otp: &str| post(&s, "email-otp/verify-email", json!({"email": u.email, "otp": otp}));
    assert_eq!(coded(&verify(wrong).await), (400, json!("INVALID_OTP")));
    assert_eq!(coded(&verify(wrong).await), (400, json!("INVALID_OTP")));
    assert_eq!(coded(&verify(&code).await), (403, json!("TOO_MANY_ATTEMPTS")), "the right code after three wrong");
    assert_eq!(coded(&verify(&code).await), (400, json!("INVALID_OTP")), "gone");
    assert_eq!(s.session(&u.cookie).await["user"]["emailVerified"], false);
}

/// Wrong codes count against the account's failure limit too (one budget with passwords): past it, even a sign-in
/// with the right password answers 429.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_codes_count_against_the_accounts_failure_limit() {
    let smtp = SmtpSink::start();
    let s = TestServer::start_adjusted(ways_in(&smtp, |c| {
        c.rate_limit.failures_per_account = 4;
        c.email_otp.allowed_attempts = 100;
    }))
    .await;
    let u = s.new_user("budget").await;
    assert_eq!(
        post(&s, "email-otp/send-verification-otp", json!({"email": u.email, "type": "sign-in"})).await.status,
        200
    );
    let code = mailed_code(&smtp, 1, "Your sign-in code").await;
    let wrong = if code == "000000" { "111111" } else { "000000" };
    for _ in 0..4 {
        let r = post(&s, "sign-in/email-otp", json!({"email": u.email, "otp": wrong})).await;
        assert_eq!(coded(&r), (400, json!("INVALID_OTP")));
    }
    let r = post(&s, "sign-in/email-otp", json!({"email": u.email, "otp": code})).await;
    assert_eq!(r.status, 429, "{}", r.text);
    assert!(r.header("retry-after").is_some());
    assert_eq!(s.sign_in(&u.email, PASSWORD).await.0, 429, "one budget with the password");
}

/// A reset code sets a new password once, ends every session and proves the address; a bad password is refused
/// before the code is looked at (it stays usable); an address without an account gets no mail, the same answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_code_sets_a_new_password_once_ending_every_session() {
    let smtp = SmtpSink::start();
    let s = TestServer::start_adjusted(ways_in(&smtp, |_| {})).await;
    let admin = s.admin_session().await;
    let u = s.new_user("resetting").await;
    let other = s.login(&u.email, PASSWORD).await;
    let known = post(&s, "email-otp/request-password-reset", json!({"email": u.email})).await;
    let unknown = post(&s, "forget-password/email-otp", json!({"email": "nobody@example.com"})).await;
    assert_eq!((known.status, known.json()), (200, json!({"success": true})));
    assert_eq!((unknown.status, unknown.text.clone()), (known.status, known.text.clone()));
    let code = mailed_code(&smtp, 1, "Your password reset code").await;
    let reset = |otp: &str, password: &str| {
        post(&s, "email-otp/reset-password", json!({"email": u.email, "otp": otp, "password": password}))
    };
    assert_eq!(coded(&reset(&code, "short").await), (400, json!("PASSWORD_TOO_SHORT")));
    let r = reset(&code, "a brand new password").await;
    assert_eq!((r.status, r.json()), (200, json!({"success": true})), "{}", r.text);
    assert_eq!((s.session(&u.cookie).await, s.session(&other).await), (Value::Null, Value::Null));
    assert_eq!(s.sign_in(&u.email, PASSWORD).await.0, 401);
    let cookie = s.login(&u.email, "a brand new password").await;
    assert_eq!(s.session(&cookie).await["user"]["emailVerified"], true, "proven by the code");
    assert_eq!(coded(&reset(&code, "another new password").await), (400, json!("INVALID_OTP")), "used up");
    // The second forget-password went nowhere: only one message.
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert_eq!(smtp.messages().len(), 1);
    // A verification code to an unknown address: the same answer, nothing sent.
    let r = post(
        &s,
        "email-otp/send-verification-otp",
        json!({"email": "nobody@example.com", "type": "email-verification"}),
    )
    .await;
    assert_eq!(r.json(), json!({"success": true}));
    let r = post(&s, "email-otp/verify-email", json!({"email": "nobody@example.com", "otp": "123456"})).await;
    assert_eq!(coded(&r), (400, json!("INVALID_OTP")));
    let actions = audit_actions(&s, &admin).await;
    assert!(actions.iter().any(|(a, d)| a == "user.password_reset" && d.contains("mailed code")), "{actions:?}");
}

/// A code past its lifetime: `OTP_EXPIRED`, and it is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_code_is_refused() {
    let smtp = SmtpSink::start();
    let s = TestServer::start_adjusted(ways_in(&smtp, |c| c.email_otp.ttl_secs = 1)).await;
    let u = s.new_user("late").await;
    assert_eq!(
        post(&s, "email-otp/send-verification-otp", json!({"email": u.email, "type": "sign-in"})).await.status,
        200
    );
    let code = mailed_code(&smtp, 1, "Your sign-in code").await;
    tokio::time::sleep(std::time::Duration::from_millis(1_200)).await;
    let r = post(&s, "sign-in/email-otp", json!({"email": u.email, "otp": code})).await;
    assert_eq!(coded(&r), (400, json!("OTP_EXPIRED")));
    let r = post(&s, "sign-in/email-otp", json!({"email": u.email, "otp": code})).await;
    assert_eq!(coded(&r), (400, json!("INVALID_OTP")));
}
