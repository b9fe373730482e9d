//! Usernames (better-auth's `username` plugin wire): sign-up with a username, sign-in by it, the availability
//! check, update-user, and every refusal, over HTTP against the real server (on both nodes in a cluster run).

use std::time::Instant;

use serde_json::{Value, json};

use super::harness::*;

fn on(c: &mut service_auth::config::Config) {
    c.username.enabled = true;
}

async fn post(s: &Client, path: &str, body: Value) -> Resp {
    s.post(&format!("/api/auth/{path}")).json(&body).send().await
}

async fn sign_up(s: &Client, tag: &str, extra: Value) -> Resp {
    let mut body = json!({"name": format!("User {tag}"), "email": format!("{tag}@example.com"), "password": PASSWORD});
    body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    s.sign_up_body(&body).await
}

async fn available(s: &Client, name: &str) -> Value {
    let r = post(s, "is-username-available", json!({"username": name})).await;
    assert_eq!(r.status, 200, "{name}: {}", r.text);
    r.json()["available"].clone()
}

/// A sign-up with `username` keeps it lower-cased and `displayUsername` as typed; the user object carries both
/// in sign-up's, sign-in's, get-session's and the admin list's answers; sign-in by the name in any case opens a
/// session (with `callbackURL`: `redirect: true` and the `Location`), on every node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_username_signs_up_and_signs_in_on_every_node() {
    let s = TestServer::start_adjusted(on).await;
    let r = sign_up(&s.nodes[0], "ana", json!({"username": "Ana_B.42"})).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let user = r.json()["user"].clone();
    assert_eq!((&user["username"], &user["displayUsername"]), (&json!("ana_b.42"), &json!("Ana_B.42")));
    for node in &s.nodes {
        let r = post(node, "sign-in/username", json!({"username": "ANA_b.42", "password": PASSWORD})).await;
        assert_eq!(r.status, 200, "{}", r.text);
        let body = r.json();
        assert_eq!(
            (&body["redirect"], &body["user"]["id"], &body["user"]["username"]),
            (&json!(false), &user["id"], &json!("ana_b.42"))
        );
        assert!(body["token"].is_string() && body.get("url").is_none_or(Value::is_null), "{body}");
        let cookie = r.session_cookie().expect("a session cookie").value;
        let session = node.session(&cookie).await;
        assert_eq!(
            (&session["user"]["username"], &session["user"]["displayUsername"]),
            (&json!("ana_b.42"), &json!("Ana_B.42"))
        );
        assert_eq!(available(node, "ana_b.42").await, json!(false));
    }
    let r =
        post(&s, "sign-in/username", json!({"username": "ana_b.42", "password": PASSWORD, "callbackURL": "/welcome"}))
            .await;
    assert_eq!(
        (r.status, r.json()["redirect"].clone(), r.json()["url"].clone()),
        (200, json!(true), json!("/welcome"))
    );
    assert_eq!(r.header("location").as_deref(), Some("/welcome"));
    let admin = s.admin_session().await;
    let listed = s.get("/api/auth/admin/list-users?limit=100").cookie(&admin).send().await.json();
    let listed = listed["users"].as_array().unwrap().iter().find(|u| u["id"] == user["id"]).unwrap().clone();
    assert_eq!(listed["username"], "ana_b.42");
    // A `displayUsername` alone that is a valid name becomes the name too; one without a username has neither.
    let r = sign_up(&s, "bo", json!({"displayUsername": "Bo_Display"})).await;
    assert_eq!(
        (&r.json()["user"]["username"], &r.json()["user"]["displayUsername"]),
        (&json!("bo_display"), &json!("Bo_Display"))
    );
    let r = sign_up(&s, "cy", json!({})).await;
    assert!(r.json()["user"].get("username").is_none(), "{}", r.text);
    s.stop().await;
}

/// A name is taken in any case, and so are its look-alikes (same confusable skeleton) and the reserved names:
/// sign-up is refused with 400 `USERNAME_IS_ALREADY_TAKEN` and makes no account; the availability check says
/// `false` for each, on every node, and `true` for a free name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn taken_look_alike_and_reserved_names_are_refused() {
    let s = TestServer::start_adjusted(|c| {
        on(c);
        c.username.reserved = vec!["acme".into()];
    })
    .await;
    assert_eq!(sign_up(&s.nodes[0], "first", json!({"username": "PayPal"})).await.status, 200);
    for (n, name) in
        ["paypal", "PAYPAL", "paypa1", "PayPaI", "admin", "adrnin", "r00t", "Support", "acme"].iter().enumerate()
    {
        let node = &s.nodes[n % s.nodes.len()];
        let r = sign_up(node, &format!("taker{n}"), json!({"username": name})).await;
        assert_auth_error(&r, 400, "USERNAME_IS_ALREADY_TAKEN");
        assert_eq!(node.sign_in(&format!("taker{n}@example.com"), PASSWORD).await.0, 401, "{name}: no account made");
        assert_eq!(available(node, name).await, json!(false), "{name}");
    }
    for node in &s.nodes {
        assert_eq!(available(node, "paypal_fan").await, json!(true));
    }
    s.stop().await;
}

/// Every malformed name gets the plugin's code: 400 at sign-up and update-user, 422 at sign-in and the
/// availability check; an empty name or password at sign-in is 401 `INVALID_USERNAME_OR_PASSWORD`; a display
/// form with a control character is 400 `INVALID_DISPLAY_USERNAME`; a body of the wrong shape a 400.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_usernames_get_the_plugins_codes() {
    let s = TestServer::start_adjusted(on).await;
    let cases = [
        ("ab", "USERNAME_TOO_SHORT"),
        (&"a".repeat(31)[..], "USERNAME_TOO_LONG"),
        ("ana b", "INVALID_USERNAME"),
        ("ana-b", "INVALID_USERNAME"),
        ("ａｎａ", "INVALID_USERNAME"),
    ];
    let user = s.new_user("editor").await;
    for (name, code) in cases {
        assert_auth_error(&sign_up(&s, "bad", json!({"username": name})).await, 400, code);
        let r = s.post("/api/auth/update-user").cookie(&user.cookie).json(&json!({"username": name})).send().await;
        assert_auth_error(&r, 400, code);
        assert_auth_error(
            &post(&s, "sign-in/username", json!({"username": name, "password": PASSWORD})).await,
            422,
            code,
        );
        assert_auth_error(&post(&s, "is-username-available", json!({"username": name})).await, 422, code);
    }
    assert_auth_error(&post(&s, "is-username-available", json!({"username": ""})).await, 422, "INVALID_USERNAME");
    for body in [json!({"username": "", "password": PASSWORD}), json!({"username": "someone", "password": ""})] {
        assert_auth_error(&post(&s, "sign-in/username", body).await, 401, "INVALID_USERNAME_OR_PASSWORD");
    }
    let r = sign_up(&s, "bad", json!({"username": "fine_name", "displayUsername": "a\u{202E}b"})).await;
    assert_auth_error(&r, 400, "INVALID_DISPLAY_USERNAME");
    for (path, body) in [
        ("sign-in/username", json!({"username": 7, "password": PASSWORD})),
        ("sign-in/username", json!({"password": PASSWORD})),
        ("sign-in/username", json!({"username": "someone", "password": PASSWORD, "extra": 1})),
        ("is-username-available", json!({})),
        ("is-username-available", json!({"username": ["a"]})),
    ] {
        let r = post(&s, path, body.clone()).await;
        assert_eq!(r.status, 400, "{path} {body}: {}", r.text);
    }
    assert_auth_error(&sign_up(&s, "bad", json!({"username": 42})).await, 400, "VALIDATION_ERROR");
    assert_eq!(s.sign_in("bad@example.com", PASSWORD).await.0, 401, "no refused sign-up made an account");
    s.stop().await;
}

/// An unknown name and a wrong password are the same 401 `INVALID_USERNAME_OR_PASSWORD`; failures by username
/// spend the account's budget under its address, so the lock holds by e-mail too (and the other way); an unknown
/// name is locked like an unknown address.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sign_in_by_username_shares_the_accounts_failure_budget() {
    let s = TestServer::start_adjusted(|c| {
        on(c);
        c.rate_limit.failures_per_account = 3;
    })
    .await;
    assert_eq!(sign_up(&s, "dora", json!({"username": "dora"})).await.status, 200);
    let wrong = |name: &str| json!({"username": name, "password": "a wrong password"});
    for name in ["dora", "nobody_here"] {
        assert_auth_error(&post(&s, "sign-in/username", wrong(name)).await, 401, "INVALID_USERNAME_OR_PASSWORD");
    }
    assert_eq!(s.sign_in("dora@example.com", "a wrong password").await.0, 401);
    assert_auth_error(&post(&s, "sign-in/username", wrong("dora")).await, 401, "INVALID_USERNAME_OR_PASSWORD");
    // Three failures, two by name and one by address: locked both ways, the right password included.
    assert_auth_error(
        &post(&s, "sign-in/username", json!({"username": "dora", "password": PASSWORD})).await,
        429,
        "TOO_MANY_REQUESTS",
    );
    assert_eq!(s.sign_in("dora@example.com", PASSWORD).await.0, 429);
    for _ in 0..2 {
        assert_eq!(post(&s, "sign-in/username", wrong("nobody_here")).await.status, 401);
    }
    assert_auth_error(&post(&s, "sign-in/username", wrong("NOBODY_HERE")).await, 429, "TOO_MANY_REQUESTS");
    s.stop().await;
}

/// An unknown name costs the verification a wrong password costs (the medians of 21 alternating tries within
/// 35 % of each other, each a full hash), so the time does not tell which names exist. Named `*same_time` so that
/// `./test` runs it with the other timing tests, alone on a quiet machine, not beside the suites.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_username_and_a_wrong_password_take_the_same_time() {
    let s = TestServer::start_adjusted(|c| {
        on(c);
        c.rate_limit.failures_per_account = 1000;
    })
    .await;
    assert_eq!(sign_up(&s, "eve", json!({"username": "eve_known"})).await.status, 200);
    let mut samples = [Vec::new(), Vec::new()];
    // Two rounds to warm up (the first requests pay for connections and caches), then 21 measured.
    for i in 0..23 {
        for (name, times) in ["eve_known", "eve_unknown"].iter().zip(samples.iter_mut()) {
            let t = Instant::now();
            let r = post(&s, "sign-in/username", json!({"username": name, "password": format!("wrong-{i}")})).await;
            if i >= 2 {
                times.push(t.elapsed().as_secs_f64() * 1000.0);
            }
            assert_eq!(r.status, 401);
        }
    }
    let [known, unknown] = samples.map(|mut v| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    });
    eprintln!("timing: median wrong password {known:.1} ms, unknown username {unknown:.1} ms");
    assert!(known > 5.0 && unknown > 5.0, "each must run a verification: {known:.1} / {unknown:.1} ms");
    assert!(
        (known - unknown).abs() < 0.35 * known.max(unknown),
        "wrong password {known:.1} ms vs unknown {unknown:.1} ms"
    );
    s.stop().await;
}

/// update-user sets a name (the old one is free again at once), keeps a new display form apart, lets the owner
/// re-send their own name in another case, and refuses another account's name or its look-alike; the name
/// survives a restart (read back from the store).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn update_user_changes_and_frees_usernames_and_they_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = test_config(dir.path());
    on(&mut config);
    let s = TestServer::start_with(config.clone()).await;
    let a = s.new_user("fay").await;
    let b = s.new_user("gus").await;
    let update = |cookie: &str, body: Value| s.post("/api/auth/update-user").cookie(cookie).json(&body).send();
    assert_eq!(update(&a.cookie, json!({"username": "Fay_One"})).await.status, 200);
    assert_eq!(available(&s, "fay_one").await, json!(false));
    assert_auth_error(&update(&b.cookie, json!({"username": "FAY_ONE"})).await, 400, "USERNAME_IS_ALREADY_TAKEN");
    assert_auth_error(&update(&b.cookie, json!({"username": "fay_0ne"})).await, 400, "USERNAME_IS_ALREADY_TAKEN");
    assert_eq!(update(&a.cookie, json!({"username": "FAY_one"})).await.status, 200, "one's own name, another case");
    let r = update(&a.cookie, json!({"username": "fay_two", "displayUsername": "Fay Two"})).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(available(&s, "fay_one").await, json!(true), "the old name is free again");
    assert_eq!(update(&b.cookie, json!({"username": "fay_one"})).await.status, 200);
    let session = s.session(&a.cookie).await;
    assert_eq!(
        (&session["user"]["username"], &session["user"]["displayUsername"]),
        (&json!("fay_two"), &json!("Fay Two"))
    );
    s.stop().await;
    let s = TestServer::start_with(config).await;
    let r = post(&s, "sign-in/username", json!({"username": "fay_two", "password": PASSWORD})).await;
    assert_eq!((r.status, r.json()["user"]["displayUsername"].clone()), (200, json!("Fay Two")), "{}", r.text);
    assert_eq!(available(&s, "fay_one").await, json!(false), "gus's, after the restart");
    s.stop().await;
}

/// Off (the default), the plugin's calls are 404 as on a server without it, and a `username` field is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usernames_are_off_by_default() {
    let s = TestServer::start().await;
    for path in ["sign-in/username", "is-username-available"] {
        let r = post(&s, path, json!({"username": "someone", "password": PASSWORD})).await;
        assert_eq!(r.status, 404, "{path}: {}", r.text);
    }
    assert_auth_error(&sign_up(&s, "hal", json!({"username": "hal"})).await, 400, "FIELD_NOT_ALLOWED");
    let u = s.new_user("ivy").await;
    let r = s.post("/api/auth/update-user").cookie(&u.cookie).json(&json!({"username": "ivy"})).send().await;
    assert_auth_error(&r, 400, "FIELD_NOT_ALLOWED");
    s.stop().await;
}

/// Two sign-ups with one name at once, on the two nodes in a cluster run (one node otherwise): one account gets
/// it, the other sign-up is the plugin's 400 (the users actor on one node; PostgreSQL's unique constraint across
/// two), never a 5xx, and the loser made no account.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_name_claimed_twice_at_once_goes_to_one_account() {
    let s = TestServer::start_adjusted(on).await;
    for round in 0..6 {
        let name = format!("race_{round}");
        let claims: Vec<_> = (0..2)
            .map(|n| {
                let node = s.nodes[n % s.nodes.len()].clone();
                let name = name.clone();
                tokio::spawn(
                    async move { sign_up(&node, &format!("racer{round}x{n}"), json!({"username": name})).await },
                )
            })
            .collect();
        let mut answers = Vec::new();
        for claim in claims {
            answers.push(claim.await.unwrap());
        }
        answers.sort_by_key(|r| r.status);
        assert_eq!(answers[0].status, 200, "{}", answers[0].text);
        assert_auth_error(&answers[1], 400, "USERNAME_IS_ALREADY_TAKEN");
        let winner = answers[0].json()["user"]["email"].as_str().unwrap().to_owned();
        let loser = if winner.ends_with("x0@example.com") {
            winner.replace("x0@", "x1@")
        } else {
            winner.replace("x1@", "x0@")
        };
        assert_eq!(s.sign_in(&loser, PASSWORD).await.0, 401, "{loser} made no account");
        let r = post(&s, "sign-in/username", json!({"username": name, "password": PASSWORD})).await;
        assert_eq!(r.json()["user"]["email"], winner.as_str());
    }
    s.stop().await;
}

/// The admin plugin's create-user takes `data.username` (a reserved name too: an administrator names staff
/// accounts) and update-user `data.username`, audited as a profile change; another account's name or its
/// look-alike is 400 `USERNAME_IS_ALREADY_TAKEN`; get-user (what the console's user page reads) carries both
/// fields.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_plugin_creates_and_changes_usernames_audited() {
    let s = TestServer::start_adjusted(on).await;
    let admin = s.admin_session().await;
    let create = |data: Value, tag: &str| {
        let body = json!({"email": format!("{tag}@example.com"), "name": tag, "password": PASSWORD, "data": data});
        s.post("/api/auth/admin/create-user").cookie(&admin).json(&body).send()
    };
    let r = create(json!({"username": "Support", "displayUsername": "Support Team"}), "staff").await;
    assert_eq!(r.status, 200, "{}", r.text);
    let staff = r.json()["user"].clone();
    assert_eq!((&staff["username"], &staff["displayUsername"]), (&json!("support"), &json!("Support Team")));
    assert_auth_error(&create(json!({"username": "supp0rt"}), "copy").await, 400, "USERNAME_IS_ALREADY_TAKEN");
    assert_eq!(create(json!({"role": "admin"}), "sneaky").await.status, 400);
    assert_auth_error(&create(json!({"username": "a b"}), "bad").await, 400, "INVALID_USERNAME");
    let user = s.new_user("kim").await;
    let update = |data: Value| {
        s.post("/api/auth/admin/update-user").cookie(&admin).json(&json!({"userId": user.id, "data": data})).send()
    };
    let r = update(json!({"username": "Kim_K"})).await;
    assert_eq!((r.status, r.json()["username"].clone()), (200, json!("kim_k")), "{}", r.text);
    assert_auth_error(&update(json!({"username": "SUPPORT"})).await, 400, "USERNAME_IS_ALREADY_TAKEN");
    let got = s.get(&format!("/api/auth/admin/get-user?id={}", user.id)).cookie(&admin).send().await.json();
    assert_eq!(got["username"], "kim_k");
    let audit = s.get("/api/admin/audit?limit=200").cookie(&admin).send().await.json();
    let changed =
        audit["entries"].as_array().unwrap().iter().any(|e| {
            e["action"] == "user.profile_updated" && e["detail"].as_str().is_some_and(|d| d.contains("username"))
        });
    assert!(changed, "the change of username is audited: {audit}");
    s.stop().await;
}

/// The import from better-auth brings the username plugin's columns: an imported name signs in (normalised: NFKC
/// and lower-case), keeps its display form, and is taken for new accounts; an account without one has neither.
/// Two accounts whose names are one after normalisation stop the import, naming the account.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_better_auth_import_brings_usernames() {
    const HASH: &str = include_str!("../migration/fixtures/better-auth-hash.txt");
    const OLD_PASSWORD: &str = "correct horse battery";
    let write = |path: &std::path::Path, rows: &[(&str, Option<&str>, Option<&str>)]| {
        let db = rusqlite::Connection::open(path).unwrap();
        db.execute_batch(
            r#"CREATE TABLE "user" ("id" text PRIMARY KEY, "name" text, "email" text, "emailVerified" integer,
                 "image" text, "createdAt" date, "updatedAt" date, "role" text, "banned" integer, "banReason" text,
                 "banExpires" date, "username" text, "displayUsername" text);
               CREATE TABLE "account" ("id" text PRIMARY KEY, "accountId" text, "providerId" text, "userId" text,
                 "password" text, "createdAt" date, "updatedAt" date);"#,
        )
        .unwrap();
        for (n, (email, username, display)) in rows.iter().enumerate() {
            let id = format!("ba{n:030}");
            db.execute(
                r#"INSERT INTO "user" VALUES (?1, 'Old User', ?2, 1, NULL, '2025-05-01T10:00:00.000Z',
                   '2025-05-01T10:00:00.000Z', 'user', 0, NULL, NULL, ?3, ?4)"#,
                rusqlite::params![id, email, username, display],
            )
            .unwrap();
            db.execute(
                r#"INSERT INTO "account" VALUES (?1, ?2, 'credential', ?2, ?3, '2025-05-01T10:00:00.000Z',
                   '2025-05-01T10:00:00.000Z')"#,
                rusqlite::params![format!("acc{n}"), id, HASH.trim()],
            )
            .unwrap();
        }
    };
    let twins = tempfile::tempdir().unwrap();
    write(
        &twins.path().join("ba.db"),
        &[("a@example.com", Some("same"), None), ("b@example.com", Some("ＳＡＭＥ"), None)],
    );
    let (status, _, err) = run_binary(twins.path(), &["import-better-auth", "--sqlite", "ba.db"], &[], "");
    assert!(!status.success() && err.contains("b@example.com: the username \"same\" is another account's"), "{err}");

    let root = tempfile::tempdir().unwrap();
    write(
        &root.path().join("ba.db"),
        &[("ann@example.com", Some("ann_old"), Some("Ann_Old")), ("bo@example.com", None, None)],
    );
    let (status, _, err) = run_binary(root.path(), &["import-better-auth", "--sqlite", "ba.db"], &[], "");
    assert!(status.success(), "import: {err}");
    let mut config = test_config(&root.path().join("data"));
    on(&mut config);
    let s = TestServer::start_embedded(config).await;
    let r = post(&s, "sign-in/username", json!({"username": "ANN_OLD", "password": OLD_PASSWORD})).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(
        (&r.json()["user"]["email"], &r.json()["user"]["displayUsername"]),
        (&json!("ann@example.com"), &json!("Ann_Old"))
    );
    assert_eq!(available(&s, "ann_old").await, json!(false));
    let (status, body, _) = s.sign_in("bo@example.com", OLD_PASSWORD).await;
    assert!(status == 200 && body["user"].get("username").is_none(), "{body}");
    s.stop().await;
}
