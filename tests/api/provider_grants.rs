//! The identity provider's grants (issue #46): the claims of the organization a grant was made in and of the user's
//! roles in it now; and `oauth_grant.issued` and `oauth_grant.revoked` in the audit log and as webhook events.

use serde_json::{Value, json};

use super::consents::consent_to;
use super::harness::*;
use super::org_plugin::{ok, post};
use super::provider::{RP, active, granted, oauth_error, receiver, refresh, register, revoke, token, verified};

/// The webhook bodies `received` holds once there are `n` of them (waiting up to ten seconds).
async fn events(received: &std::sync::Arc<std::sync::Mutex<Vec<String>>>, n: usize) -> Vec<Value> {
    let mut events: Vec<Value> = Vec::new();
    for _ in 0..100 {
        events = received.lock().unwrap().iter().map(|b| serde_json::from_str(b).unwrap()).collect();
        if events.len() >= n {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    events
}

/// The grant id an `oauth_grant.*` detail names (`<client_id>: <how>, grant <id> [<scopes>]`).
fn grant_of(detail: &str) -> &str {
    detail.split("grant ").nth(1).and_then(|rest| rest.split(' ').next()).unwrap_or_default()
}

/// A code redeemed is `oauth_grant.issued` (no actor, the user as target, the detail naming the client, the grant
/// type, the grant and its scopes); its refreshes are not, nor is a client's own token (client credentials).
/// Revoked by its client (RFC 7009) it is `oauth_grant.revoked` with no actor; with the consent an administrator
/// withdrew, `oauth_grant.revoked` with the administrator as actor; a reused refresh token's end raises
/// `oauth_grant.revoked` too; a ban, ending every grant of the user, writes one `oauth_grant.revoked` per grant
/// (no actor: the ban's own entry names the administrator). Each entry is written in its change's commit and
/// becomes the webhook event of the same name, in commit order; neither the log nor an event holds a token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grants_issued_and_revoked_are_audited_and_announced_without_their_tokens() {
    let s = TestServer::start_adjusted(|c| c.webhooks.allow_internal_targets = true).await;
    let admin = s.admin_session().await;
    let admin_id = s.get("/api/auth/get-session").cookie(&admin).send().await.json()["user"]["id"].clone();
    let (receiver, received) = receiver().await;
    let hook = s
        .post("/api/admin/webhooks")
        .cookie(&admin)
        .json(
            &json!({"url": format!("http://{receiver}/hook"), "events": ["oauth_grant.issued", "oauth_grant.revoked"]}),
        )
        .send()
        .await;
    assert_eq!(hook.status, 201, "{}", hook.text);
    let body = json!({"client_name": "Mail", "redirect_uris": [RP], "scope": "openid offline_access api:read",
                      "grant_types": ["authorization_code", "refresh_token", "client_credentials"]});
    let (id, secret) = register(&s, &admin, body).await;
    let secret = secret.unwrap();
    let a = (id.as_str(), secret.as_str());
    let u = s.new_user("tove").await;
    let scope = "openid offline_access";
    consent_to(&s, &u.cookie, &id, scope).await;

    let first = granted(&s, &u.cookie, a, scope).await;
    let r = refresh(&s, a, str_of(&first["refresh_token"]), None).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let refreshed = r.json();
    let own = token(&s, &[("grant_type", "client_credentials")], Some(a)).await;
    assert_eq!(own.status, 200, "{}", own.text);
    let r = revoke(&s, a, str_of(&refreshed["refresh_token"])).await;
    assert_eq!(r.status, 200, "{}", r.text);
    oauth_error(&refresh(&s, a, str_of(&refreshed["refresh_token"]), None).await, 400, "invalid_grant");

    let second = granted(&s, &u.cookie, a, scope).await;
    let consents = s.get(&format!("/api/admin/users/{}/consents", u.id)).cookie(&admin).send().await.json();
    let consent = str_of(&consents["consents"][0]["id"]).to_owned();
    let r = s.delete(&format!("/api/admin/users/{}/consents/{consent}", u.id)).cookie(&admin).send().await;
    assert_eq!(r.status, 200, "{}", r.text);
    oauth_error(&refresh(&s, a, str_of(&second["refresh_token"]), None).await, 400, "invalid_grant");

    consent_to(&s, &u.cookie, &id, scope).await;
    let third = granted(&s, &u.cookie, a, scope).await;
    assert_eq!(refresh(&s, a, str_of(&third["refresh_token"]), None).await.status, 200);
    oauth_error(&refresh(&s, a, str_of(&third["refresh_token"]), None).await, 400, "invalid_grant");
    let fourth = granted(&s, &u.cookie, a, scope).await;
    s.patch_ok(&admin, &json!({"userId": u.id, "banned": true})).await;
    oauth_error(&refresh(&s, a, str_of(&fourth["refresh_token"]), None).await, 400, "invalid_grant");

    let audit = s.get("/api/admin/audit?limit=200").cookie(&admin).send().await;
    for tokens in [&first, &refreshed, &second, &third, &fourth, &own.json()] {
        for field in ["access_token", "refresh_token", "id_token"] {
            if let Some(t) = tokens[field].as_str() {
                assert!(!audit.text.contains(t), "no token in the audit log");
                assert!(!received.lock().unwrap().iter().any(|b| b.contains(t)), "no token in an event");
            }
        }
    }
    let mut ours: Vec<Value> = audit.json()["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| str_of(&e["action"]).starts_with("oauth_grant.") || e["action"] == "oauth_refresh_token.reused")
        .cloned()
        .collect();
    ours.reverse();
    let seen: Vec<(&str, &str)> = ours.iter().map(|e| (str_of(&e["action"]), str_of(&e["detail"]))).collect();
    let actions: Vec<&str> = seen.iter().map(|(a, _)| *a).collect();
    assert_eq!(
        actions,
        [
            "oauth_grant.issued",
            "oauth_grant.revoked",
            "oauth_grant.issued",
            "oauth_grant.revoked",
            "oauth_grant.issued",
            "oauth_refresh_token.reused",
            "oauth_grant.issued",
            "oauth_grant.revoked"
        ],
        "one issued per code (none for the refreshes or the client's own token), oldest first: {seen:?}"
    );
    for entry in &ours {
        assert_eq!(entry["target_id"], u.id.as_str(), "{entry}");
        assert!(str_of(&entry["detail"]).starts_with(&format!("{id}: ")), "{entry}");
    }
    let detail = |i: usize| str_of(&ours[i]["detail"]);
    let grant = grant_of(detail(0));
    assert_eq!(grant.len(), 22, "a grant's id: {}", detail(0));
    assert_eq!(detail(0), format!("{id}: authorization_code, grant {grant} [openid offline_access]"));
    assert_eq!(detail(1), format!("{id}: revoked by the client, grant {grant} [openid offline_access]"));
    assert!(ours[0]["actor_id"].is_null() && ours[1]["actor_id"].is_null(), "{ours:?}");
    let grant = grant_of(detail(2));
    assert_ne!(grant, grant_of(detail(0)));
    assert_eq!(detail(3), format!("{id}: consent withdrawn, grant {grant} [openid offline_access]"));
    assert_eq!(ours[3]["actor_id"], admin_id, "the administrator who withdrew the consent");
    let grant = grant_of(detail(6));
    assert_eq!(detail(7), format!("{id}: every session of the account ended, grant {grant} [openid offline_access]"));
    assert!(ours[7]["actor_id"].is_null(), "the ban's own entry names its administrator: {ours:?}");

    let sent = events(&received, 8).await;
    let types: Vec<&str> = sent.iter().map(|e| str_of(&e["type"])).collect();
    assert_eq!(
        types,
        [
            "oauth_grant.issued",
            "oauth_grant.revoked",
            "oauth_grant.issued",
            "oauth_grant.revoked",
            "oauth_grant.issued",
            "oauth_grant.revoked",
            "oauth_grant.issued",
            "oauth_grant.revoked"
        ],
        "{sent:?}"
    );
    for (event, entry) in sent.iter().zip(&ours) {
        assert_eq!(event["data"]["user_id"], u.id.as_str(), "{event}");
        assert_eq!(event["data"]["detail"], entry["detail"], "{event}");
        assert_eq!(event["data"]["actor_id"], entry["actor_id"], "{event}");
    }
}

/// The `org_*` claims of the access token, the ID token, userinfo and the access token's introspection by `client`
/// of `tokens` (`null` where absent), after checking both tokens' signatures and that the token is active.
async fn org_claims(s: &TestServer, client: (&str, &str), tokens: &Value) -> [Value; 4] {
    let (_, access) = verified(s, str_of(&tokens["access_token"])).await;
    let (_, id) = verified(s, str_of(&tokens["id_token"])).await;
    let bearer = format!("Bearer {}", str_of(&tokens["access_token"]));
    let r = s.get("/api/auth/oauth2/userinfo").header("authorization", &bearer).send().await;
    assert_eq!(r.status, 200, "{}", r.text);
    let introspected = introspected_org(s, client, str_of(&tokens["access_token"])).await;
    [pick_org(&access), pick_org(&id), pick_org(&r.json()), introspected]
}

fn pick_org(v: &Value) -> Value {
    json!({"org_id": v["org_id"], "org_slug": v["org_slug"], "org_roles": v["org_roles"]})
}

/// The `org_*` claims of `token`'s introspection by `client`, which must find it active.
async fn introspected_org(s: &TestServer, client: (&str, &str), token: &str) -> Value {
    let v = active(s, client, token).await;
    assert_eq!(v["active"], true, "{v}");
    pick_org(&v)
}

/// With `profile`, a grant made while the session had an active organization carries it (`org_id`, `org_slug`)
/// and the member's roles (`org_roles`) in the access token, the ID token, userinfo and introspection (of its
/// access and its refresh tokens); without `profile`, or without an active organization, there are none. A refresh
/// keeps the organization but reads the roles again: a role change shows in the next tokens, and at userinfo and
/// introspection at once; a removal takes every `org_*` claim away, at introspection at once too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_carry_the_active_organization_and_the_members_roles_as_they_are_now() {
    let s = TestServer::start().await;
    let admin = s.admin_session().await;
    let body = json!({"client_name": "Grafana", "redirect_uris": [RP], "skip_consent": true,
                      "scope": "openid profile email offline_access"});
    let (id, secret) = register(&s, &admin, body).await;
    let secret = secret.unwrap();
    let a = (id.as_str(), secret.as_str());
    let (ann, bob, cai) = (s.new_user("ann").await, s.new_user("bob").await, s.new_user("cai").await);
    let org = ok(&post(&s, "create", &ann.cookie, &json!({"name": "Acme", "slug": "acme"})).await);
    let org = str_of(&org["id"]).to_owned();
    s.patch_ok(&admin, &json!({"userId": bob.id, "organizationId": org})).await;
    ok(&post(&s, "set-active", &bob.cookie, &json!({"organizationId": org})).await);
    let none = json!({"org_id": null, "org_slug": null, "org_roles": null});
    let of = |roles: Value| json!({"org_id": org, "org_slug": "acme", "org_roles": roles});

    let owner = granted(&s, &ann.cookie, a, "openid profile").await;
    let owns = of(json!(["owner"]));
    assert_eq!(org_claims(&s, a, &owner).await, [owns.clone(), owns.clone(), owns.clone(), owns]);
    let tokens = granted(&s, &bob.cookie, a, "openid profile offline_access").await;
    let member = of(json!(["member"]));
    assert_eq!(org_claims(&s, a, &tokens).await, [member.clone(), member.clone(), member.clone(), member.clone()]);
    assert_eq!(introspected_org(&s, a, str_of(&tokens["refresh_token"])).await, member, "the refresh token's");
    let nothing = [none.clone(), none.clone(), none.clone(), none.clone()];
    let unscoped = granted(&s, &bob.cookie, a, "openid email offline_access").await;
    assert_eq!(org_claims(&s, a, &unscoped).await, nothing, "no profile, no claims");
    assert_eq!(introspected_org(&s, a, str_of(&unscoped["refresh_token"])).await, none, "nor for its refresh token");
    let outside = granted(&s, &cai.cookie, a, "openid profile").await;
    assert_eq!(org_claims(&s, a, &outside).await, nothing, "no active organization");

    let members =
        s.get(&format!("/api/auth/organization/list-members?organizationId={org}")).cookie(&ann.cookie).send().await;
    let members = ok(&members)["members"].clone();
    let bobs = members.as_array().unwrap().iter().find(|m| m["userId"] == bob.id.as_str()).unwrap()["id"].clone();
    let change = json!({"memberId": bobs, "role": ["admin", "member"], "organizationId": org});
    ok(&post(&s, "update-member-role", &ann.cookie, &change).await);
    let both = of(json!(["admin", "member"]));
    let [access, _, info, introspected] = org_claims(&s, a, &tokens).await;
    assert_eq!(access, of(json!(["member"])), "a signed token keeps what it was signed with");
    assert_eq!(info, both, "userinfo reads the membership now");
    assert_eq!(introspected, both, "and so does introspection");
    assert_eq!(introspected_org(&s, a, str_of(&tokens["refresh_token"])).await, both);
    let r = refresh(&s, a, str_of(&tokens["refresh_token"]), None).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let tokens = r.json();
    assert_eq!(org_claims(&s, a, &tokens).await, [both.clone(), both.clone(), both.clone(), both]);

    ok(&post(&s, "remove-member", &ann.cookie, &json!({"memberIdOrEmail": bob.email, "organizationId": org})).await);
    let removed = introspected_org(&s, a, str_of(&tokens["access_token"])).await;
    assert_eq!(removed, none, "a token signed before the removal introspects without them at once");
    assert_eq!(introspected_org(&s, a, str_of(&tokens["refresh_token"])).await, none);
    let r = refresh(&s, a, str_of(&tokens["refresh_token"]), None).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(org_claims(&s, a, &r.json()).await, nothing, "a removed member has none");
}
