//! `/api/auth/*`: sign-up, sign-in, get-session, sign-out, their shapes, cookies and input rules.

use serde_json::{Value, json};

use super::harness::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sign_up_returns_token_user_and_session_cookie() {
    let s = TestServer::start().await;
    let r = s.sign_up_body(&json!({"name": "Alice", "email": "alice@example.com", "password": PASSWORD})).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(r.content_type().starts_with("application/json"), "content-type {:?}", r.content_type());
    assert_eq!(r.header("cache-control").as_deref(), Some("no-store"));
    let body = r.json();
    assert_keys(&body, &["token", "user"]);
    assert_token(&body["token"]);
    assert_new_user(&body["user"], "Alice", "alice@example.com");
    assert_eq!(body["user"]["image"], Value::Null);
    assert_session_set_cookie(&r, true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_session_returns_session_and_user() {
    let s = TestServer::start().await;
    let r = s.sign_up_body(&json!({"name": "Alice", "email": "alice@example.com", "password": PASSWORD})).await;
    let (status, body, cookie) = r.triple();
    assert_eq!(status, 200);
    let cookie = cookie.unwrap();

    let g = s.get_session_resp(Some(&cookie)).await;
    assert_eq!(g.status, 200, "{}", g.text);
    assert!(g.content_type().starts_with("application/json"));
    assert_eq!(g.header("cache-control").as_deref(), Some("no-store"));
    assert!(g.session_cookie().is_none(), "a fresh session must not be re-sent: {:?}", g.set_cookies());
    let got = g.json();
    assert_keys(&got, &["session", "user"]);
    let session = &got["session"];
    assert_session(session);
    assert_eq!(session["token"], body["token"], "session.token is the token sign-up returned");
    assert_eq!(session["userId"], body["user"]["id"]);
    assert_eq!(got["user"], body["user"], "get-session's user is the user sign-up returned");
    assert_recent(&session["createdAt"]);
    // The idle limit's hour (`[session] idle_timeout_secs`), which each use slides (tests/api/session_limits.rs).
    let expires = ts(&session["expiresAt"]) - ts(&session["createdAt"]);
    assert!((expires - HOUR_MS).abs() <= 2_000, "a new session ends an hour on, got {expires} ms");

    // Same answer twice: nothing slid.
    assert_eq!(s.session(&cookie).await, got);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_session_without_a_valid_cookie_is_null() {
    let s = TestServer::start().await;
    let forged = "A".repeat(43);
    let cases: [Option<&str>; 5] = [None, Some(""), Some(&forged), Some("not%20a%20token"), Some("x.y.z")];
    for cookie in cases {
        let r = s.get_session_resp(cookie).await;
        assert_eq!(r.status, 200, "cookie {cookie:?}: {}", r.text);
        assert_eq!(r.json(), Value::Null, "cookie {cookie:?}");
        assert!(r.content_type().starts_with("application/json"), "cookie {cookie:?}: {:?}", r.content_type());
        assert_eq!(r.header("cache-control").as_deref(), Some("no-store"), "cookie {cookie:?}");
    }
    // Another cookie name with a valid token is not a session either.
    let u = s.new_user("alice").await;
    let r = s.get("/api/auth/get-session").header("cookie", &format!("other.session_token={}", u.cookie)).send().await;
    assert_eq!((r.status, r.json()), (200, Value::Null));
    // The real cookie is found next to other cookies.
    let r = s.get("/api/auth/get-session").header("cookie", &format!("a=b; {COOKIE}={}; c=d", u.cookie)).send().await;
    assert_eq!(r.json()["user"]["id"], u.id.as_str(), "session cookie among other cookies");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_records_user_agent_and_peer_address() {
    let s = TestServer::start().await;
    s.new_user("alice").await;
    let r = s
        .post("/api/auth/sign-in/email")
        .header("user-agent", "api-tests/1.0")
        .header("x-forwarded-for", "203.0.113.9")
        .json(&json!({"email": "alice@example.com", "password": PASSWORD}))
        .send()
        .await;
    let (status, _, cookie) = r.triple();
    assert_eq!(status, 200);
    let session = s.session(&cookie.unwrap()).await["session"].clone();
    assert_eq!(session["userAgent"], "api-tests/1.0");
    assert_eq!(session["ipAddress"], "127.0.0.1", "X-Forwarded-For from an untrusted peer must be ignored");

    let cookie = s.login("alice@example.com", PASSWORD).await;
    assert_eq!(s.session(&cookie).await["session"]["userAgent"], "", "no User-Agent gives \"\"");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forwarded_for_is_believed_from_a_trusted_proxy() {
    let s = TestServer::start_adjusted(|c| c.trusted_proxies = vec!["127.0.0.1".parse().unwrap()]).await;
    let r = s
        .post("/api/auth/sign-up/email")
        .header("x-forwarded-for", "203.0.113.9")
        .json(&json!({"name": "Alice", "email": "alice@example.com", "password": PASSWORD}))
        .send()
        .await;
    let (status, _, cookie) = r.triple();
    assert_eq!(status, 200);
    assert_eq!(s.session(&cookie.unwrap()).await["session"]["ipAddress"], "203.0.113.9");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn email_is_trimmed_and_lowercased() {
    let s = TestServer::start().await;
    let (status, body, _) = s.sign_up("Bob", "  Bob@Example.COM ", PASSWORD).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["user"]["email"], "bob@example.com");

    for email in ["BOB@example.com", "  bob@example.com  ", "bob@EXAMPLE.com"] {
        let (status, body, _) = s.sign_in(email, PASSWORD).await;
        assert_eq!(status, 200, "sign-in as {email:?}: {body}");
        assert_eq!(body["user"]["email"], "bob@example.com");
    }
    for email in ["bob@example.com", "BOB@EXAMPLE.COM", " bob@example.com", "bob@example.com\t"] {
        let r = s.sign_up_body(&json!({"name": "Bob 2", "email": email, "password": PASSWORD})).await;
        assert_auth_error(&r, 422, "USER_ALREADY_EXISTS_USE_ANOTHER_EMAIL");
        assert!(r.session_cookie().is_none(), "no cookie on a failed sign-up");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_emails_are_rejected_on_sign_up() {
    let s = TestServer::start().await;
    let too_long = format!("{}@example.com", "a".repeat(243)); // 255 characters
    let cases = [
        "a@b",
        "Alice <a@x.com>",
        "no-at-sign",
        "a@b@example.com",
        "@example.com",
        "alice@",
        "",
        "   ",
        "alice@example",
        too_long.as_str(),
    ];
    for email in cases {
        let r = s.sign_up_body(&json!({"name": "X", "email": email, "password": PASSWORD})).await;
        assert_eq!(r.status, 400, "e-mail {email:?}: {}", r.text);
        assert_auth_error(&r, 400, "INVALID_EMAIL");
    }
    // Nothing was created.
    let admin = s.admin_session().await;
    assert_eq!(s.users(&admin).await.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn password_length_is_counted_in_unicode_scalar_values() {
    // The hard bounds (8 to 128), with the configurable minimum at that floor: the default of 15 has its test
    // in passwords.rs.
    let s = TestServer::start_adjusted(|c| c.passwords.min_length = 8).await;
    let emoji = |n: usize| "😀".repeat(n);
    let rejected = [
        (String::new(), "PASSWORD_TOO_SHORT"),
        ("a".repeat(7), "PASSWORD_TOO_SHORT"),
        (emoji(4), "PASSWORD_TOO_SHORT"), // 8 UTF-16 units, but 4 characters
        ("a".repeat(129), "PASSWORD_TOO_LONG"),
        (emoji(129), "PASSWORD_TOO_LONG"),
    ];
    for (i, (pw, code)) in rejected.iter().enumerate() {
        let r = s.sign_up_body(&json!({"name": "X", "email": format!("r{i}@example.com"), "password": pw})).await;
        assert_auth_error(&r, 400, code);
    }
    let accepted =
        ["xkq7vbn3".to_owned(), "a".repeat(128), emoji(8), emoji(65) /* 130 UTF-16 units */, emoji(128)];
    for (i, pw) in accepted.iter().enumerate() {
        let email = format!("ok{i}@example.com");
        let (status, body, _) = s.sign_up(&format!("OK {i}"), &email, pw).await;
        assert_eq!(status, 200, "password of {} chars: {body}", pw.chars().count());
        let (status, body, _) = s.sign_in(&email, pw).await;
        assert_eq!(status, 200, "sign-in with a password of {} chars: {body}", pw.chars().count());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn password_is_never_truncated() {
    let s = TestServer::start().await;
    let pw: String = (0..128).map(|i| char::from(b'a' + (i % 26) as u8)).collect();
    let (status, body, _) = s.sign_up("Long", "long@example.com", &pw).await;
    assert_eq!(status, 200, "{body}");

    let mut last_changed = pw.clone();
    last_changed.pop();
    last_changed.push('!');
    let wrong = [last_changed, pw[..127].to_owned(), pw[..72].to_owned(), pw[..64].to_owned()];
    let mut first = None;
    for w in &wrong {
        let r = s.sign_in_body(&json!({"email": "long@example.com", "password": w})).await;
        assert_auth_error(&r, 401, "INVALID_EMAIL_OR_PASSWORD");
        first.get_or_insert(r.json());
    }
    // One character more than the stored password: never a success.
    let r = s.sign_in_body(&json!({"email": "long@example.com", "password": format!("{pw}x")})).await;
    assert!(r.status == 400 || r.status == 401, "129-char password: {} {}", r.status, r.text);
    let code = r.json()["code"].clone();
    assert!(code == "PASSWORD_TOO_LONG" || code == "INVALID_EMAIL_OR_PASSWORD", "129-char password: {}", r.text);

    let (status, _, _) = s.sign_in("long@example.com", &pw).await;
    assert_eq!(status, 200, "the exact password still works");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn password_is_nfkc_normalised() {
    let s = TestServer::start().await;
    let (status, body, _) = s.sign_up("Lig", "lig@example.com", "ﬁﬁﬁﬁﬁﬁﬁﬁ").await;
    assert_eq!(status, 200, "{body}");
    let (status, body, _) = s.sign_in("lig@example.com", "fifififififififi").await;
    assert_eq!(status, 200, "NFKC-equivalent password: {body}");
    let (status, _, _) = s.sign_in("lig@example.com", "ﬁﬁﬁﬁﬁﬁﬁﬁ").await;
    assert_eq!(status, 200, "the password as typed");

    // Composed at sign-up, decomposed at sign-in.
    let (status, body, _) = s.sign_up("Cafe", "cafe@example.com", "caf\u{e9}-au-lait-au-lait").await;
    assert_eq!(status, 200, "{body}");
    let (status, body, _) = s.sign_in("cafe@example.com", "cafe\u{301}-au-lait-au-lait").await;
    assert_eq!(status, 200, "decomposed form: {body}");
    let r = s.sign_in_body(&json!({"email": "cafe@example.com", "password": "cafe-au-lait-au-lait"})).await;
    assert_auth_error(&r, 401, "INVALID_EMAIL_OR_PASSWORD");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn name_must_be_1_to_200_characters_after_trimming() {
    let s = TestServer::start().await;
    let bad = [json!(""), json!("   "), json!("\t\n"), json!("a".repeat(201)), json!(format!(" {} ", "é".repeat(201)))];
    for (i, name) in bad.iter().enumerate() {
        let r =
            s.sign_up_body(&json!({"name": name, "email": format!("bad{i}@example.com"), "password": PASSWORD})).await;
        assert_auth_error(&r, 400, "VALIDATION_ERROR");
    }
    let good = ["a".repeat(200), format!("  {}  ", "b".repeat(200)), "é".repeat(200), "X".to_owned()];
    for (i, name) in good.iter().enumerate() {
        let (status, body, _) = s.sign_up(name, &format!("good{i}@example.com"), PASSWORD).await;
        assert_eq!(status, 200, "name of {} chars: {body}", name.chars().count());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_or_ill_typed_fields_are_validation_errors() {
    let s = TestServer::start().await;
    let sign_up = [
        json!({"email": "a@example.com", "password": PASSWORD}),
        json!({"name": "A", "password": PASSWORD}),
        json!({"name": "A", "email": "a@example.com"}),
        json!({"name": "A", "email": "a@example.com", "password": 12345678}),
        json!({"name": 5, "email": "a@example.com", "password": PASSWORD}),
        json!({"name": null, "email": "a@example.com", "password": PASSWORD}),
        json!({"name": "A", "email": ["a@example.com"], "password": PASSWORD}),
        json!({"name": "A", "email": "a@example.com", "password": PASSWORD, "rememberMe": "yes"}),
        json!({"name": "A", "email": "a@example.com", "password": PASSWORD, "image": 5}),
        json!({"name": "A", "email": "a@example.com", "password": PASSWORD, "callbackURL": 5}),
        json!([]),
        json!("name"),
        json!(null),
        json!(5),
    ];
    for body in &sign_up {
        let r = s.sign_up_body(body).await;
        assert_eq!(r.status, 400, "sign-up {body}: {}", r.text);
        assert_auth_error(&r, 400, "VALIDATION_ERROR");
    }
    let sign_in = [
        json!({"password": PASSWORD}),
        json!({"email": "a@example.com"}),
        json!({"email": "a@example.com", "password": 12345678}),
        json!({"email": 5, "password": PASSWORD}),
        json!({"email": "a@example.com", "password": PASSWORD, "rememberMe": "no"}),
        json!([]),
        json!(null),
    ];
    for body in &sign_in {
        let r = s.sign_in_body(body).await;
        assert_eq!(r.status, 400, "sign-in {body}: {}", r.text);
        assert_auth_error(&r, 400, "VALIDATION_ERROR");
    }
    let admin = s.admin_session().await;
    assert_eq!(s.users(&admin).await.len(), 1, "nothing was created");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn role_and_banned_cannot_be_set_at_sign_up() {
    let s = TestServer::start().await;
    for extra in [json!({"role": "admin"}), json!({"banned": true}), json!({"role": "qa_manager", "banned": true})] {
        let mut body = json!({"name": "Mallory", "email": "mallory@example.com", "password": PASSWORD});
        body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        let r = s.sign_up_body(&body).await;
        assert_auth_error(&r, 400, "FIELD_NOT_ALLOWED");
        assert!(r.session_cookie().is_none());
    }
    // Nothing was created: the address is still free, and the account is an ordinary one.
    let (status, body, _) = s.sign_up("Mallory", "mallory@example.com", PASSWORD).await;
    assert_eq!(status, 200, "{body}");
    assert_new_user(&body["user"], "Mallory", "mallory@example.com");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sign_up_with_image_and_without_remember_me() {
    let s = TestServer::start().await;
    let r = s
        .sign_up_body(&json!({
            "name": "Img", "email": "img@example.com", "password": PASSWORD,
            "image": "https://example.com/a.png", "rememberMe": false, "callbackURL": "/welcome"
        }))
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let body = r.json();
    assert_keys(&body, &["token", "user"]);
    assert_eq!(body["user"]["image"], "https://example.com/a.png");
    let cookie = assert_session_set_cookie(&r, false);
    let session = s.session(&cookie).await["session"].clone();
    let lifetime = ts(&session["expiresAt"]) - ts(&session["createdAt"]);
    assert!((lifetime - HOUR_MS).abs() <= 2_000, "rememberMe:false session ends an hour on (idle), got {lifetime} ms");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sign_in_returns_redirect_false_token_and_user() {
    let s = TestServer::start().await;
    let u = s.new_user("alice").await;
    let r = s.sign_in_body(&json!({"email": "alice@example.com", "password": PASSWORD})).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.header("cache-control").as_deref(), Some("no-store"));
    assert!(r.content_type().starts_with("application/json"));
    let body = r.json();
    assert_keys(&body, &["redirect", "token", "user"]);
    assert_eq!(body["redirect"], false);
    assert_token(&body["token"]);
    assert_auth_user(&body["user"]);
    assert_eq!(body["user"]["id"], u.id.as_str());
    assert_eq!(body["user"]["createdAt"], u.user["createdAt"]);
    assert_eq!(body["user"]["role"], "user");
    let cookie = assert_session_set_cookie(&r, true);
    assert_ne!(cookie, u.cookie, "a new session");

    // Both sessions are live and distinct.
    let a = s.session(&u.cookie).await;
    let b = s.session(&cookie).await;
    assert_ne!(a["session"]["id"], b["session"]["id"]);
    assert_ne!(a["session"]["token"], b["session"]["token"]);
    assert_eq!(b["session"]["token"], body["token"]);
    assert_eq!(a["user"]["id"], b["user"]["id"]);
    let lifetime = ts(&b["session"]["expiresAt"]) - ts(&b["session"]["createdAt"]);
    assert!((lifetime - HOUR_MS).abs() <= 2_000, "the idle limit's hour, got {lifetime} ms");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sign_in_with_callback_url_redirects() {
    let s = TestServer::start().await;
    s.new_user("alice").await;
    let r =
        s.sign_in_body(&json!({"email": "alice@example.com", "password": PASSWORD, "callbackURL": "/dashboard"})).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let body = r.json();
    assert_keys(&body, &["redirect", "token", "url", "user"]);
    assert_eq!(body["redirect"], true);
    assert_eq!(body["url"], "/dashboard");
    assert_eq!(r.header("location").as_deref(), Some("/dashboard"));
    assert_session_set_cookie(&r, true);

    // An untrusted absolute callback is refused before any session is made (wire reference §7).
    let r = s
        .sign_in_body(
            &json!({"email": "alice@example.com", "password": PASSWORD, "callbackURL": "https://evil.example/x"}),
        )
        .await;
    assert_auth_error(&r, 403, "INVALID_CALLBACK_URL");
    assert!(r.session_cookie().is_none_or(|c| c.value.is_empty()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sign_in_without_remember_me_gives_a_browser_session() {
    let s = TestServer::start().await;
    s.new_user("alice").await;
    let r = s.sign_in_body(&json!({"email": "alice@example.com", "password": PASSWORD, "rememberMe": false})).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let cookie = assert_session_set_cookie(&r, false);
    let session = s.session(&cookie).await["session"].clone();
    let lifetime = ts(&session["expiresAt"]) - ts(&session["createdAt"]);
    assert!((lifetime - HOUR_MS).abs() <= 2_000, "the idle limit's hour, got {lifetime} ms");

    let r = s.sign_in_body(&json!({"email": "alice@example.com", "password": PASSWORD, "rememberMe": true})).await;
    assert_eq!(r.status, 200);
    assert_session_set_cookie(&r, true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_email_and_wrong_password_get_the_same_401() {
    let s = TestServer::start().await;
    s.new_user("alice").await;
    let wrong = s.sign_in_body(&json!({"email": "alice@example.com", "password": "wrong password"})).await;
    let unknown = s.sign_in_body(&json!({"email": "nobody@example.com", "password": PASSWORD})).await;
    for r in [&wrong, &unknown] {
        assert_auth_error(r, 401, "INVALID_EMAIL_OR_PASSWORD");
        assert_eq!(r.header("cache-control").as_deref(), Some("no-store"));
        assert!(r.session_cookie().is_none_or(|c| c.value.is_empty()), "no session on a failed sign-in");
    }
    assert_eq!(wrong.text, unknown.text, "same body for unknown e-mail and wrong password");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sign_out_ends_only_that_session_and_clears_the_cookie() {
    let s = TestServer::start().await;
    let u = s.new_user("alice").await;
    let other = s.login("alice@example.com", PASSWORD).await;

    let r = s.sign_out(Some(&u.cookie)).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json(), json!({"success": true}));
    assert_eq!(r.header("cache-control").as_deref(), Some("no-store"));
    assert_clears_session_cookie(&r);

    assert_eq!(s.get_session_resp(Some(&u.cookie)).await.json(), Value::Null, "signed-out cookie is dead");
    assert_eq!(s.session(&other).await["user"]["id"], u.id.as_str(), "the other session lives");

    // Signing out a dead session again is still a success.
    let r = s.sign_out(Some(&u.cookie)).await;
    assert_eq!((r.status, r.json()), (200, json!({"success": true})));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sign_out_without_or_with_unknown_cookie_succeeds() {
    let s = TestServer::start().await;
    let unknown = "B".repeat(43);
    for cookie in [None, Some(unknown.as_str())] {
        let r = s.sign_out(cookie).await;
        assert_eq!(r.status, 200, "cookie {cookie:?}: {}", r.text);
        assert_eq!(r.json(), json!({"success": true}));
        assert_clears_session_cookie(&r);
        assert_eq!(r.header("cache-control").as_deref(), Some("no-store"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_sign_ins_are_rate_limited_per_account() {
    let s = TestServer::start().await;
    s.new_user("alice").await;
    let mut limited = None;
    for attempt in 1..=100 {
        let r = s.sign_in_body(&json!({"email": "alice@example.com", "password": format!("wrong-{attempt}")})).await;
        match r.status {
            401 => assert_auth_error(&r, 401, "INVALID_EMAIL_OR_PASSWORD"),
            429 => {
                limited = Some(r);
                break;
            }
            other => panic!("attempt {attempt}: unexpected {other} {}", r.text),
        }
    }
    let r = limited.expect("100 failed sign-ins in a row were never rate limited");
    assert_auth_error_shape(&r);
    let retry = r.header("retry-after").expect("Retry-After header on 429");
    let x_retry = r.header("x-retry-after").expect("X-Retry-After header on 429");
    let secs: u64 = retry.parse().unwrap_or_else(|_| panic!("Retry-After {retry:?} is not a number of seconds"));
    assert!(secs >= 1, "Retry-After {secs}");
    assert_eq!(x_retry, retry, "X-Retry-After equals Retry-After");
    // While limited, even the right password does not get in.
    let (status, body, cookie) = s.sign_in("alice@example.com", PASSWORD).await;
    assert_eq!(status, 429, "right password while rate limited: {body}");
    assert!(cookie.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secure_cookies_get_the_secure_prefix_and_attribute() {
    for (what, secure_config) in [("cookie.secure", true), ("https base_url", false)] {
        let s = TestServer::start_adjusted(|c| {
            c.cookie.secure = secure_config;
            if !secure_config {
                c.base_url = Some("https://auth.example.com".into());
            }
        })
        .await;
        let r = s.sign_up_body(&json!({"name": "A", "email": "a@example.com", "password": PASSWORD})).await;
        assert_eq!(r.status, 200, "{what}: {}", r.text);
        let name = format!("__Secure-{COOKIE}");
        let cookies = r.set_cookies();
        let c = cookies.iter().find(|c| c.name == name).unwrap_or_else(|| panic!("{what}: no {name} in {cookies:?}"));
        let expected = [
            ("httponly", None),
            ("secure", None),
            ("samesite", Some("Lax")),
            ("path", Some("/")),
            ("max-age", Some("604800")),
        ]
        .map(|(k, v)| (k.to_owned(), v.map(str::to_owned)))
        .into();
        assert_eq!(c.attrs, expected, "{what}");
        let g = s.get("/api/auth/get-session").header("cookie", &format!("{name}={}", c.value)).send().await;
        assert_eq!(g.json()["user"]["email"], "a@example.com", "{what}: the prefixed cookie is the session cookie");
        let out =
            s.post("/api/auth/sign-out").header("cookie", &format!("{name}={}", c.value)).json(&json!({})).send().await;
        let cleared = out.set_cookies().into_iter().find(|c| c.name == name).expect("clearing the prefixed cookie");
        assert_eq!(cleared.attr("max-age"), Some("0"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cookie_prefix_is_configurable() {
    let s = TestServer::start_adjusted(|c| c.cookie.prefix = "pharmacy".into()).await;
    let r = s.sign_up_body(&json!({"name": "A", "email": "a@example.com", "password": PASSWORD})).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let cookies = r.set_cookies();
    let c = cookies.iter().find(|c| c.name == "pharmacy.session_token").unwrap_or_else(|| panic!("{cookies:?}"));
    assert!(cookies.iter().all(|c| c.name != COOKIE), "default name not used");
    let g =
        s.get("/api/auth/get-session").header("cookie", &format!("pharmacy.session_token={}", c.value)).send().await;
    assert_eq!(g.json()["user"]["email"], "a@example.com");
}
