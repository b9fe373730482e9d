//! Users' consents to the identity provider's clients (issue #46): the owner's calls on
//! `@better-auth/oauth-provider`'s wire (`get-consents`, `get-consent`, `update-consent`, `delete-consent`) and
//! administrators' list and withdrawal; a withdrawn consent makes the next authorization ask again.

use serde_json::{Value, json};

use super::harness::*;
use super::provider::{
    RP, authorize, location, oauth_error, pkce, receiver, refresh, register, token, userinfo_status,
};

/// Signs `cookie`'s user into `client` through the consent page: answers the code's redirect.
pub(super) async fn consent_to(s: &TestServer, cookie: &str, client: &str, scope: &str) {
    let (_, challenge) = pkce();
    let request = [
        ("response_type", "code"),
        ("client_id", client),
        ("redirect_uri", RP),
        ("scope", scope),
        ("state", "st"),
        ("code_challenge", challenge.as_str()),
        ("code_challenge_method", "S256"),
    ];
    let r = authorize(s, Some(cookie), &request).await;
    let (to, _) = location(&r);
    assert_eq!(to, "http://here/consent");
    let oauth_query = r.header("location").unwrap().split_once('?').unwrap().1.to_owned();
    let r = s
        .post("/api/auth/oauth2/consent")
        .cookie(cookie)
        .json(&json!({"accept": true, "oauth_query": oauth_query}))
        .send()
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
}

/// Where a fresh authorization of `client` for `scope` leads `cookie`'s user: `/consent` or the client.
async fn leads_to(s: &TestServer, cookie: &str, client: &str, scope: &str) -> String {
    let (_, challenge) = pkce();
    let request = [
        ("response_type", "code"),
        ("client_id", client),
        ("redirect_uri", RP),
        ("scope", scope),
        ("code_challenge", challenge.as_str()),
        ("code_challenge_method", "S256"),
    ];
    location(&authorize(s, Some(cookie), &request).await).0
}

/// The owner's calls, each with its refusals: the list names the client; one consent by its id; another user's
/// id is 404 as an unknown one (never 401, which would tell it exists); narrowing the scopes makes the next
/// authorization for a scope given up ask again, a scope the client was not registered with is 400; withdrawal
/// (an empty 200, as the plugin) makes the next authorization ask again, and a second withdrawal is 404. Audited.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_lists_narrows_and_withdraws_their_consents_and_is_asked_again() {
    let s = TestServer::start().await;
    let admin = s.admin_session().await;
    let (grafana, _) = register(&s, &admin, json!({"client_name": "Grafana", "redirect_uris": [RP]})).await;
    let (wiki, _) = register(&s, &admin, json!({"client_name": "Wiki", "redirect_uris": [RP]})).await;
    let ada = s.new_user("ada").await;
    let bob = s.new_user("bob").await;
    consent_to(&s, &ada.cookie, &grafana, "openid profile email").await;
    consent_to(&s, &ada.cookie, &wiki, "openid").await;
    consent_to(&s, &bob.cookie, &grafana, "openid").await;
    assert_eq!(leads_to(&s, &ada.cookie, &grafana, "openid profile email").await, RP, "remembered");

    assert_eq!(s.get("/api/auth/oauth2/get-consents").send().await.status, 401);
    let r = s.get("/api/auth/oauth2/get-consents").cookie(&ada.cookie).send().await;
    assert_eq!(r.status, 200, "{}", r.text);
    let list = r.json();
    let list = list.as_array().unwrap();
    assert_eq!(list.len(), 2, "{list:?}");
    let mine = list.iter().find(|c| c["clientId"] == grafana.as_str()).unwrap().clone();
    assert_eq!(mine["clientName"], "Grafana");
    assert_eq!(mine["userId"], ada.id.as_str());
    assert_eq!(mine["scopes"], json!(["openid", "profile", "email"]));
    assert!(mine["createdAt"].as_str().unwrap().ends_with('Z'), "{mine}");
    let id = mine["id"].as_str().unwrap().to_owned();

    let r = s.get(&format!("/api/auth/oauth2/get-consent?id={id}")).cookie(&ada.cookie).send().await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json(), mine);
    let bobs = s.get("/api/auth/oauth2/get-consents").cookie(&bob.cookie).send().await.json();
    let bobs_id = bobs[0]["id"].as_str().unwrap().to_owned();
    assert_ne!(bobs_id, id, "one id per user and client");
    for other in [bobs_id.as_str(), "not-a-consent"] {
        let r = s.get(&format!("/api/auth/oauth2/get-consent?id={other}")).cookie(&ada.cookie).send().await;
        oauth_error(&r, 404, "not_found");
        let r = s.post("/api/auth/oauth2/delete-consent").cookie(&ada.cookie).json(&json!({"id": other})).send().await;
        oauth_error(&r, 404, "not_found");
        let r = s
            .post("/api/auth/oauth2/update-consent")
            .cookie(&ada.cookie)
            .json(&json!({"id": other, "update": {"scopes": ["openid"]}}))
            .send()
            .await;
        oauth_error(&r, 404, "not_found");
    }
    assert_eq!(s.get("/api/auth/oauth2/get-consent").cookie(&ada.cookie).send().await.status, 400);
    for bad in [
        json!({}),
        json!({"id": id}),
        json!({"id": id, "update": {"scopes": "openid"}}),
        json!({"id": 7, "update": {"scopes": []}}),
        json!({"id": id, "update": {"scopes": ["openid"], "x": 1}}),
    ] {
        let r = s.post("/api/auth/oauth2/update-consent").cookie(&ada.cookie).json(&bad).send().await;
        assert_eq!(r.status, 400, "{bad} {}", r.text);
    }

    // Narrowed to openid: profile must be asked for again; a scope the client does not have is refused.
    let r = s
        .post("/api/auth/oauth2/update-consent")
        .cookie(&ada.cookie)
        .json(&json!({"id": id, "update": {"scopes": ["openid", "api:write"]}}))
        .send()
        .await;
    oauth_error(&r, 400, "invalid_request");
    let r = s
        .post("/api/auth/oauth2/update-consent")
        .cookie(&ada.cookie)
        .json(&json!({"id": id, "update": {"scopes": ["openid"]}}))
        .send()
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json()["scopes"], json!(["openid"]));
    assert_eq!(r.json()["id"], id.as_str(), "the same consent");
    assert_eq!(leads_to(&s, &ada.cookie, &grafana, "openid").await, RP);
    assert_eq!(leads_to(&s, &ada.cookie, &grafana, "openid profile").await, "http://here/consent");

    // Withdrawn: asked again; Bob's consent to the same client is untouched.
    let r = s.post("/api/auth/oauth2/delete-consent").cookie(&ada.cookie).json(&json!({"id": id})).send().await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.text, "", "the plugin's endpoint answers nothing");
    assert_eq!(leads_to(&s, &ada.cookie, &grafana, "openid").await, "http://here/consent");
    assert_eq!(leads_to(&s, &bob.cookie, &grafana, "openid").await, RP);
    let r = s.post("/api/auth/oauth2/delete-consent").cookie(&ada.cookie).json(&json!({"id": id})).send().await;
    oauth_error(&r, 404, "not_found");
    let left = s.get("/api/auth/oauth2/get-consents").cookie(&ada.cookie).send().await.json();
    assert_eq!(left.as_array().unwrap().len(), 1);
    assert_eq!(left[0]["clientId"], wiki.as_str());

    let audit = s.get("/api/admin/audit?limit=200").cookie(&admin).send().await.json();
    let ours: Vec<(&str, &str, &str)> = audit["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| matches!(str_of(&e["action"]), "oauth_consent.updated" | "oauth_consent.revoked"))
        .map(|e| (str_of(&e["action"]), str_of(&e["detail"]), e["target_id"].as_str().unwrap_or("")))
        .collect();
    assert_eq!(
        ours,
        [
            ("oauth_consent.revoked", grafana.as_str(), ada.id.as_str()),
            ("oauth_consent.updated", format!("{grafana}: scopes [openid]").as_str(), ada.id.as_str()),
        ],
        "newest first"
    );
}

/// An administrator lists a user's consents and withdraws one: the user is asked again, the withdrawal is audited
/// with the administrator as its actor and announced as `oauth_consent.revoked`; an unknown user or consent is
/// 404, a user's own session gets 403.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_administrator_withdraws_a_users_consent_audited_and_announced() {
    let s = TestServer::start_adjusted(|c| c.webhooks.allow_internal_targets = true).await;
    let admin = s.admin_session().await;
    let (receiver, received) = receiver().await;
    let hook = s
        .post("/api/admin/webhooks")
        .cookie(&admin)
        .json(&json!({"url": format!("http://{receiver}/hook"), "events": ["oauth_consent.revoked"]}))
        .send()
        .await;
    assert_eq!(hook.status, 201, "{}", hook.text);
    let (grafana, _) = register(&s, &admin, json!({"client_name": "Grafana", "redirect_uris": [RP]})).await;
    let ada = s.new_user("ada").await;
    consent_to(&s, &ada.cookie, &grafana, "openid email").await;

    let path = format!("/api/admin/users/{}/consents", ada.id);
    assert_eq!(s.get(&path).cookie(&ada.cookie).send().await.status, 403);
    let r = s.get(&path).cookie(&admin).send().await;
    assert_eq!(r.status, 200, "{}", r.text);
    let consents = r.json()["consents"].clone();
    assert_eq!(consents.as_array().unwrap().len(), 1);
    assert_eq!(consents[0]["clientName"], "Grafana");
    assert_eq!(consents[0]["scopes"], json!(["openid", "email"]));
    let id = str_of(&consents[0]["id"]).to_owned();

    let nobody = "00000000-0000-7000-8000-000000000000";
    assert_eq!(s.get(&format!("/api/admin/users/{nobody}/consents")).cookie(&admin).send().await.status, 404);
    assert_eq!(s.get("/api/admin/users/not-a-uuid/consents").cookie(&admin).send().await.status, 400);
    assert_eq!(s.delete(&format!("{path}/unknown")).cookie(&admin).send().await.status, 404);
    assert_eq!(s.delete(&format!("{path}/{id}")).cookie(&ada.cookie).send().await.status, 403);

    let r = s.delete(&format!("{path}/{id}")).cookie(&admin).send().await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json(), json!({"success": true}));
    assert_eq!(s.delete(&format!("{path}/{id}")).cookie(&admin).send().await.status, 404);
    assert_eq!(s.get(&path).cookie(&admin).send().await.json()["consents"], json!([]));
    assert_eq!(leads_to(&s, &ada.cookie, &grafana, "openid").await, "http://here/consent");

    let admin_id = s.get("/api/auth/get-session").cookie(&admin).send().await.json()["user"]["id"].clone();
    let audit = s.get("/api/admin/audit?limit=200").cookie(&admin).send().await.json();
    let entry = audit["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["action"] == "oauth_consent.revoked")
        .expect("audited")
        .clone();
    assert_eq!(entry["actor_id"], admin_id, "{entry}");
    assert_eq!(entry["target_id"], ada.id.as_str(), "{entry}");
    assert_eq!(entry["detail"], grafana.as_str(), "{entry}");

    let mut events: Vec<Value> = Vec::new();
    for _ in 0..100 {
        events = received.lock().unwrap().iter().map(|b| serde_json::from_str(b).unwrap()).collect();
        if !events.is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["type"], "oauth_consent.revoked");
    assert_eq!(events[0]["data"]["user_id"], ada.id.as_str());
    assert_eq!(events[0]["data"]["actor_id"], admin_id);
    assert_eq!(events[0]["data"]["detail"], grafana.as_str());
}

/// Withdrawing consent ends what the client was given with it: its refresh token is refused and its access token
/// no longer answers at userinfo, in the same commit; another client's grant for the same user goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_withdrawal_ends_the_clients_refresh_and_access_tokens() {
    let s = TestServer::start().await;
    let admin = s.admin_session().await;
    let scope = "openid email offline_access";
    let body = json!({"client_name": "Mail app", "redirect_uris": [RP], "scope": scope});
    let (a, a_secret) = register(&s, &admin, body.clone()).await;
    let (b, b_secret) = register(&s, &admin, body).await;
    let (a_secret, b_secret) = (a_secret.unwrap(), b_secret.unwrap());
    let u = s.new_user("tove").await;
    let mut tokens = Vec::new();
    for (id, secret) in [(a.as_str(), a_secret.as_str()), (b.as_str(), b_secret.as_str())] {
        let (verifier, challenge) = pkce();
        let request = [
            ("response_type", "code"),
            ("client_id", id),
            ("redirect_uri", RP),
            ("scope", scope),
            ("code_challenge", challenge.as_str()),
            ("code_challenge_method", "S256"),
        ];
        let r = authorize(&s, Some(&u.cookie), &request).await;
        let oauth_query = r.header("location").unwrap().split_once('?').unwrap().1.to_owned();
        let r = s
            .post("/api/auth/oauth2/consent")
            .cookie(&u.cookie)
            .json(&json!({"accept": true, "oauth_query": oauth_query}))
            .send()
            .await;
        let url = url::Url::parse(str_of(&r.json()["url"])).unwrap();
        let code = url.query_pairs().find(|(k, _)| k == "code").unwrap().1.into_owned();
        let form = [
            ("grant_type", "authorization_code"),
            ("code", code.as_str()),
            ("redirect_uri", RP),
            ("code_verifier", verifier.as_str()),
        ];
        let r = token(&s, &form, Some((id, secret))).await;
        assert_eq!(r.status, 200, "{}", r.text);
        tokens.push(r.json());
    }
    assert_eq!(userinfo_status(&s, &tokens[0]).await, 200);

    let list = s.get("/api/auth/oauth2/get-consents").cookie(&u.cookie).send().await.json();
    let id = list.as_array().unwrap().iter().find(|c| c["clientId"] == a.as_str()).unwrap()["id"].clone();
    let r = s.post("/api/auth/oauth2/delete-consent").cookie(&u.cookie).json(&json!({"id": id})).send().await;
    assert_eq!(r.status, 200, "{}", r.text);

    let refreshed = refresh(&s, (&a, &a_secret), str_of(&tokens[0]["refresh_token"]), None).await;
    oauth_error(&refreshed, 400, "invalid_grant");
    assert_eq!(userinfo_status(&s, &tokens[0]).await, 401, "the access token ended with the grant");
    let other = refresh(&s, (&b, &b_secret), str_of(&tokens[1]["refresh_token"]), None).await;
    assert_eq!(other.status, 200, "the other client's grant goes on: {}", other.text);
}
