//! The logout confirmation page (OpenID Connect RP-Initiated Logout 1.0; issue #46): `end-session` without an
//! `id_token_hint`, or with one whose session is not the browser's, ends nothing by itself; it sends the browser to
//! `/sign-out`, where the signed-in person confirms (`POST /oauth2/end-session/confirm`) or stays signed in.

use serde_json::{Value, json};

use super::harness::*;
use super::provider::{RP, granted, oauth_error, query, register, userinfo_status};

const BYE: &str = "https://rp.example/bye";

/// A client allowed to end sessions, with [`BYE`] registered; answers its id and secret.
async fn logout_client(s: &TestServer, admin: &str, name: &str, bye: &str) -> (String, String) {
    let body = json!({"client_name": name, "redirect_uris": [RP], "skip_consent": true, "enable_end_session": true,
                      "post_logout_redirect_uris": [bye], "scope": "openid"});
    let (id, secret) = register(s, admin, body).await;
    (id, secret.unwrap())
}

async fn end(s: &TestServer, pairs: &[(&str, &str)], cookie: Option<&str>) -> Resp {
    s.get(&format!("/api/auth/oauth2/end-session?{}", query(pairs))).cookie_opt(cookie).send().await
}

async fn confirm(s: &TestServer, logout_query: &str, cookie: Option<&str>) -> Resp {
    s.post("/api/auth/oauth2/end-session/confirm")
        .cookie_opt(cookie)
        .json(&json!({"logout_query": logout_query}))
        .send()
        .await
}

async fn live(s: &TestServer, cookie: &str) -> bool {
    s.get("/api/auth/get-session").cookie(cookie).send().await.json() != Value::Null
}

/// The query `end-session` passed on to the confirmation page, from its `Location`.
fn asked(r: &Resp) -> String {
    assert_eq!(r.status, 302, "{}", r.text);
    let to = r.header("location").unwrap();
    let q = to.strip_prefix("/sign-out?").unwrap_or_else(|| panic!("not the confirmation page: {to}"));
    q.to_owned()
}

/// Without a hint a signed-in browser is asked, nothing ended; the page is served under the pages' policy; the
/// confirmation refuses another site and a caller without a session, then ends the browser's session (its cookie
/// cleared, the grant it gave gone) and sends the browser to the registered redirect with `state`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_logout_without_a_hint_is_confirmed_by_the_person_then_ends_their_session() {
    let s = TestServer::start().await;
    let admin = s.admin_session().await;
    let (id, secret) = logout_client(&s, &admin, "A", BYE).await;
    let u = s.new_user("agnes").await;
    let tokens = granted(&s, &u.cookie, (&id, &secret), "openid").await;

    let r = end(&s, &[("client_id", &id), ("post_logout_redirect_uri", BYE), ("state", "s t")], Some(&u.cookie)).await;
    let q = asked(&r);
    assert!(r.session_cookie().is_none(), "nothing is cleared before the person says so");
    assert!(live(&s, &u.cookie).await, "asking ends nothing");
    // The same as a form posted from the relying party's site: 303 to the GET, which asks.
    let form = query(&[("client_id", &id), ("post_logout_redirect_uri", BYE), ("state", "s t")]);
    let r = s
        .post("/api/auth/oauth2/end-session")
        .raw(Some("application/x-www-form-urlencoded"), form.clone())
        .send()
        .await;
    assert_eq!(r.status, 303, "{}", r.text);
    assert_eq!(r.header("location").unwrap(), format!("/api/auth/oauth2/end-session?{form}"));

    let page = s.get(&format!("/sign-out?{q}")).cookie(&u.cookie).send().await;
    assert_eq!(page.status, 200);
    assert!(page.content_type().starts_with("text/html"), "{}", page.content_type());
    assert!(page.header("content-security-policy").unwrap().contains("script-src 'self'"));
    assert_eq!(page.header("cache-control").as_deref(), Some("no-store"));
    assert!(page.text.contains("auth/sign-out.js"));
    let script = s.get("/auth/sign-out.js").send().await;
    assert_eq!(script.status, 200);
    assert!(script.text.contains("/api/auth/oauth2/end-session/confirm"));

    // Cross-site request forgery: a page on another site cannot confirm for the person.
    let r = s
        .post("/api/auth/oauth2/end-session/confirm")
        .cookie(&u.cookie)
        .header("origin", "https://evil.example")
        .json(&json!({"logout_query": q}))
        .send()
        .await;
    assert_eq!(r.status, 403, "{}", r.text);
    assert_auth_error(&confirm(&s, &q, None).await, 401, "UNAUTHORIZED");
    assert!(live(&s, &u.cookie).await, "nothing refused ends the session");

    let r = confirm(&s, &q, Some(&u.cookie)).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json(), json!({"redirect": true, "url": format!("{BYE}?state=s+t")}));
    assert_clears_session_cookie(&r);
    assert!(!live(&s, &u.cookie).await, "the session has ended");
    assert_eq!(userinfo_status(&s, &tokens).await, 401, "the grant ended with its session");
    // Signed out now: the page is the signed-out page, and a confirmation has nothing to end.
    assert_auth_error(&confirm(&s, &q, Some(&u.cookie)).await, 401, "UNAUTHORIZED");
}

/// A hint whose session is no longer the browser's (the person signed in again since): the browser is asked, and
/// confirming ends the browser's session, then goes to the signed-out page (no redirect asked for). A hint whose
/// session is the browser's still ends it at once, as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hint_naming_another_session_than_the_browsers_asks_first() {
    let s = TestServer::start().await;
    let admin = s.admin_session().await;
    let (id, secret) = logout_client(&s, &admin, "A", BYE).await;
    let u = s.new_user("bertil").await;
    let tokens = granted(&s, &u.cookie, (&id, &secret), "openid").await;
    let hint = str_of(&tokens["id_token"]).to_owned();
    assert_eq!(s.sign_out(Some(&u.cookie)).await.status, 200);
    let again = s.login(&u.email, PASSWORD).await;

    let q = asked(&end(&s, &[("id_token_hint", &hint)], Some(&again)).await);
    assert!(live(&s, &again).await, "a stale hint does not end the new session");
    let r = confirm(&s, &q, Some(&again)).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json(), json!({"redirect": true, "url": "/sign-out"}));
    assert!(!live(&s, &again).await);

    // The hint of the browser's own session: ended without asking.
    let third = s.login(&u.email, PASSWORD).await;
    let fresh = granted(&s, &third, (&id, &secret), "openid").await;
    let r = end(&s, &[("id_token_hint", str_of(&fresh["id_token"]))], Some(&third)).await;
    assert_eq!((r.status, r.text.as_str()), (200, ""));
    assert!(!live(&s, &third).await);
}

/// Every refusal ends nothing: a redirect not registered for the client given, or given without a client, another
/// client's redirect, a client_id that is not the hint's audience, an unknown client or one not allowed to end
/// sessions, a parameter given twice, a body that is not a form; the confirmation checks its query again. Without
/// a hint and a session there is nothing to end: the registered redirect, or the signed-out page.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_refused_logout_ends_nothing_and_no_session_has_nothing_to_end() {
    let s = TestServer::start().await;
    let admin = s.admin_session().await;
    let (a, a_secret) = logout_client(&s, &admin, "A", BYE).await;
    let other_bye = "https://other.example/bye";
    let (b, _) = logout_client(&s, &admin, "B", other_bye).await;
    let plain =
        json!({"client_name": "C", "redirect_uris": [RP], "post_logout_redirect_uris": [BYE], "scope": "openid"});
    let (c, _) = register(&s, &admin, plain).await;
    let u = s.new_user("cecilia").await;
    let cookie = Some(u.cookie.as_str());
    let hint = str_of(&granted(&s, &u.cookie, (&a, &a_secret), "openid").await["id_token"]).to_owned();

    let r = end(&s, &[("post_logout_redirect_uri", BYE)], cookie).await;
    oauth_error(&r, 400, "invalid_request");
    let r = end(&s, &[("client_id", &a), ("post_logout_redirect_uri", "https://evil.example/")], cookie).await;
    oauth_error(&r, 400, "invalid_request");
    // A foreign client_id: another client's redirect under A's id, A's under B's, B's id with A's hint.
    oauth_error(
        &end(&s, &[("client_id", &a), ("post_logout_redirect_uri", other_bye)], cookie).await,
        400,
        "invalid_request",
    );
    oauth_error(
        &end(&s, &[("client_id", &b), ("post_logout_redirect_uri", BYE)], cookie).await,
        400,
        "invalid_request",
    );
    oauth_error(&end(&s, &[("id_token_hint", &hint), ("client_id", &b)], cookie).await, 400, "invalid_request");
    oauth_error(&end(&s, &[("client_id", "no-such-client")], cookie).await, 401, "invalid_client");
    oauth_error(&end(&s, &[("client_id", &c)], cookie).await, 401, "invalid_client");
    let twice = format!("/api/auth/oauth2/end-session?client_id={a}&client_id={a}");
    oauth_error(&s.get(&twice).cookie(&u.cookie).send().await, 400, "invalid_request");
    let r = s.post("/api/auth/oauth2/end-session").json(&json!({"client_id": a})).send().await;
    oauth_error(&r, 400, "invalid_request");
    // The confirmation's query is the request again, refused the same.
    let forged = query(&[("client_id", &a), ("post_logout_redirect_uri", "https://evil.example/")]);
    oauth_error(&confirm(&s, &forged, cookie).await, 400, "invalid_request");
    oauth_error(&confirm(&s, &query(&[("client_id", &c)]), cookie).await, 401, "invalid_client");
    let r = s.post("/api/auth/oauth2/end-session/confirm").cookie(&u.cookie).json(&json!({"other": 1})).send().await;
    assert_eq!(r.status, 400, "{}", r.text);
    assert!(live(&s, &u.cookie).await, "nothing refused ends the session");

    // No hint, no session: nothing to end.
    let r = end(&s, &[("client_id", &a), ("post_logout_redirect_uri", BYE), ("state", "x")], None).await;
    assert_eq!(r.header("location").as_deref(), Some(format!("{BYE}?state=x").as_str()));
    let r = end(&s, &[], None).await;
    assert_eq!((r.status, r.header("location").as_deref()), (302, Some("/sign-out")));
    oauth_error(
        &end(&s, &[("client_id", &a), ("post_logout_redirect_uri", other_bye)], None).await,
        400,
        "invalid_request",
    );
    assert!(live(&s, &u.cookie).await);
}
