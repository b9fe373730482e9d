//! The session limits of NIST SP 800-63B-4 at AAL2 (#47): an idle limit (ASVS 7.3.1) and an absolute one
//! (ASVS 7.3.2), `[session] idle_timeout_secs` and `absolute_lifetime_secs`, reached in hours by the clock the test
//! holds ([`TestServer::start_clocked`]). On two nodes (`tests/cluster/run.sh session_limits`) the client alternates
//! between them, so a use written by one is what the other reads.

use std::time::Duration;

use serde_json::{Value, json};

use super::harness::{DAY_MS, HOUR_MS, PASSWORD, TestServer, ts};

const MIN: Duration = Duration::from_secs(60);

/// get-session's `session`, or null, without writing anything (`disableRefresh`).
async fn peek(s: &TestServer, cookie: &str) -> Value {
    let r = s.get("/api/auth/get-session?disableRefresh=true").cookie(cookie).send().await;
    assert_eq!(r.status, 200, "{}", r.text);
    r.json()["session"].clone()
}

/// A call of another route than get-session, which needs the caller's session.
async fn guarded_call(s: &TestServer, cookie: &str) -> u16 {
    s.get("/api/auth/api-key/list").cookie(cookie).send().await.status
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_unused_for_the_idle_limit_ends_and_each_use_moves_it() {
    let (s, clock) = TestServer::start_clocked(|_| {}).await;
    let u = s.new_user("idle").await;
    let first = s.session(&u.cookie).await["session"].clone();
    assert_eq!(ts(&first["expiresAt"]) - ts(&first["createdAt"]), HOUR_MS, "a new session ends an hour on: {first}");

    // Used after 50 minutes: get-session writes the use (the cookie goes out again) and the end is an hour on.
    clock.advance(50 * MIN);
    let r = s.get_session_resp(Some(&u.cookie)).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(r.session_cookie().is_some_and(|c| c.value == u.cookie), "the use moved the end: {:?}", r.set_cookies());
    let used = r.json()["session"].clone();
    assert_eq!(ts(&used["expiresAt"]) - ts(&used["updatedAt"]), HOUR_MS, "{used}");
    let slid = ts(&used["expiresAt"]) - ts(&first["expiresAt"]);
    assert!((50 * 60_000..50 * 60_000 + 5_000).contains(&slid), "{first} -> {used}");
    assert_eq!(used["createdAt"], first["createdAt"]);

    // Any call is a use: 50 minutes on (100 since the sign-in), another route; its use is written behind the
    // answer.
    clock.advance(50 * MIN);
    assert_eq!(guarded_call(&s, &u.cookie).await, 200);
    let mut moved = peek(&s, &u.cookie).await;
    for _ in 0..100 {
        if ts(&moved["expiresAt"]) > ts(&used["expiresAt"]) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        moved = peek(&s, &u.cookie).await;
    }
    let slid = ts(&moved["expiresAt"]) - ts(&used["expiresAt"]);
    assert!((50 * 60_000..50 * 60_000 + 5_000).contains(&slid), "{used} -> {moved}");

    // Unused: live 59 minutes on, over after the hour, for every call.
    clock.advance(59 * MIN);
    assert!(peek(&s, &u.cookie).await.is_object(), "live within the hour");
    clock.advance(2 * MIN);
    let r = s.get_session_resp(Some(&u.cookie)).await;
    assert_eq!(r.json(), Value::Null, "an hour unused: no session");
    assert_eq!(guarded_call(&s, &u.cookie).await, 401);
    // Signing in again gives a session that works.
    let again = s.login(&u.email, PASSWORD).await;
    assert_eq!(guarded_call(&s, &again).await, 200);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_use_carries_a_session_past_the_absolute_limit() {
    // A rememberMe: false session would last two days here: the absolute limit ends it after one all the same.
    let (s, clock) = TestServer::start_clocked(|c| c.session.short_expires_in_secs = 2 * 86_400).await;
    let u = s.new_user("absolute").await;
    let r = s.sign_in_body(&json!({"email": u.email, "password": PASSWORD, "rememberMe": false})).await;
    let (_, _, short) = r.triple();
    let short = short.expect("a session cookie");

    // Used every half hour (well within the idle limit) for 23 and a half hours: live throughout.
    for _ in 1..48 {
        clock.advance(30 * MIN);
        for cookie in [&u.cookie, &short] {
            assert!(s.session(cookie).await["session"].is_object());
        }
    }
    for cookie in [&u.cookie, &short] {
        let session = peek(&s, cookie).await;
        assert_eq!(ts(&session["expiresAt"]) - ts(&session["createdAt"]), DAY_MS, "capped at a day: {session}");
    }
    // The 24th hour: over, however it was used.
    clock.advance(30 * MIN);
    for cookie in [&u.cookie, &short] {
        assert_eq!(s.get_session_resp(Some(cookie)).await.json(), Value::Null, "past the absolute limit");
        assert_eq!(guarded_call(&s, cookie).await, 401);
    }
    let again = s.login(&u.email, PASSWORD).await;
    assert_eq!(guarded_call(&s, &again).await, 200, "a new sign-in starts a new day");
    s.stop().await;
}

/// Both limits at 0: better-auth's behaviour, a week that slides when the session is used a day after its last
/// extension (`updateAge`), with no end but that.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_both_limits_off_a_session_slides_as_in_better_auth() {
    let (s, clock) = TestServer::start_clocked(|c| {
        c.session.absolute_lifetime_secs = 0;
        c.session.idle_timeout_secs = 0;
    })
    .await;
    let u = s.new_user("week").await;
    let first = s.session(&u.cookie).await["session"].clone();
    assert_eq!(ts(&first["expiresAt"]) - ts(&first["createdAt"]), 7 * DAY_MS);
    clock.advance(23 * 60 * MIN);
    let r = s.get_session_resp(Some(&u.cookie)).await;
    assert!(r.session_cookie().is_none(), "used within a day of the last extension: not extended");
    clock.advance(2 * 60 * MIN);
    let r = s.get_session_resp(Some(&u.cookie)).await;
    assert!(r.session_cookie().is_some(), "used a day after: extended");
    let extended = r.json()["session"].clone();
    assert_eq!(ts(&extended["expiresAt"]) - ts(&extended["updatedAt"]), 7 * DAY_MS, "{extended}");
    // Six days unused (beyond any idle limit, beyond a day): still live (looked at without a use); seven: over.
    clock.advance(6 * 24 * 60 * MIN);
    assert!(peek(&s, &u.cookie).await.is_object());
    clock.advance(24 * 60 * MIN);
    assert_eq!(guarded_call(&s, &u.cookie).await, 401);
    s.stop().await;
}

/// ASVS 7.1.2 (#47): `[session] max_per_account`: a sign-in beyond the limit ends the account's oldest session in
/// the commit that starts the new one, audited; an administrator's impersonation of the account neither counts nor
/// is ended. Off by default.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sign_in_beyond_the_limit_ends_the_oldest_session_audited() {
    let s = TestServer::start_adjusted(|c| c.session.max_per_account = 2).await;
    let admin = s.admin_session().await;
    let u = s.new_user("many").await;
    let second = s.login(&u.email, PASSWORD).await;
    let r = s.post("/api/auth/admin/impersonate-user").cookie(&admin).json(&json!({"userId": u.id})).send().await;
    assert_eq!(r.status, 200, "{}", r.text);
    let impersonation = r.session_cookie().expect("the impersonation's cookie").value;

    let third = s.login(&u.email, PASSWORD).await;
    assert_eq!(s.get_session_resp(Some(&u.cookie)).await.json(), Value::Null, "the oldest ended");
    assert_eq!(guarded_call(&s, &u.cookie).await, 401);
    for cookie in [&second, &third, &impersonation] {
        assert!(peek(&s, cookie).await.is_object(), "the two newest and the impersonation live on");
    }
    let fourth = s.login(&u.email, PASSWORD).await;
    assert_eq!(peek(&s, &second).await, Value::Null);
    assert!(peek(&s, &third).await.is_object() && peek(&s, &fourth).await.is_object());

    let audit = s.get("/api/admin/audit?limit=50").cookie(&admin).send().await.json();
    let ended: Vec<&Value> = audit["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["action"] == "session.revoked" && e["target_id"] == json!(u.id))
        .collect();
    assert_eq!(ended.len(), 2, "one entry per sign-in that ended one: {audit}");
    assert!(
        ended.iter().all(|e| e["detail"] == "1 oldest session(s) ended by the limit of 2 per account"),
        "{ended:?}"
    );

    // Off by default: any number of sessions.
    let plain = TestServer::start().await;
    let v = plain.new_user("plenty").await;
    for _ in 0..3 {
        plain.login(&v.email, PASSWORD).await;
    }
    assert!(peek(&plain, &v.cookie).await.is_object());
    s.stop().await;
}
