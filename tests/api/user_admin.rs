//! An account as the console's user page shows it, for administrators: its organizations
//! (`GET /api/admin/users/{id}/memberships`) and who has which second factor (`GET
//! /api/admin/users/second-factors`). The linked identities (`/api/admin/users/{id}/accounts`) need a provider and
//! are tested in oauth.rs.

use serde_json::{Value, json};
use service_auth::domain::two_factor::{base32_decode, code_at, step_of};

use super::harness::{PASSWORD, TestServer};

fn now_secs() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs()
}

/// Turns TOTP on for the account of `cookie`, as an authenticator app would (RFC 6238 from the enrolment's URI).
async fn enable_totp(s: &TestServer, cookie: &str) {
    let r =
        s.client.post("/api/auth/two-factor/enable").cookie(cookie).json(&json!({"password": PASSWORD})).send().await;
    assert_eq!(r.status, 200, "{}", r.text);
    let uri = r.json()["totpURI"].as_str().unwrap().to_owned();
    let secret = uri.split_once('?').unwrap().1.split('&').find_map(|p| p.strip_prefix("secret=")).unwrap();
    let secret = base32_decode(secret).unwrap();
    // The server accepts one step either side, so a step ending meanwhile does not matter.
    let code = format!("{:06}", code_at(&secret, step_of(now_secs())));
    let r = s.client.post("/api/auth/two-factor/verify-totp").cookie(cookie).json(&json!({"code": code})).send().await;
    assert_eq!(r.status, 200, "{}", r.text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memberships_name_each_organization_with_its_role_and_the_primary_one() {
    let s = TestServer::start().await;
    let admin = s.client.admin_session().await;
    let ann = s.client.new_user("memberships-ann").await;
    let path = format!("/api/admin/users/{}/memberships", ann.id);

    let r = s.client.get(&path).cookie(&admin).send().await;
    assert_eq!((r.status, r.json()), (200, json!({"memberships": []})), "{}", r.text);

    // The primary organization, assigned by an administrator; then one Ann creates herself (she owns it).
    let primary = s.client.new_org(&admin, "St Mary Pharmacy", "st-mary").await;
    s.client.patch_ok(&admin, &json!({"userId": ann.id, "organizationId": primary["id"]})).await;
    let r = s
        .client
        .post("/api/auth/organization/create")
        .cookie(&ann.cookie)
        .json(&json!({"name": "Ann's Lab", "slug": "anns-lab"}))
        .send()
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let own = r.json()["id"].as_str().unwrap().to_owned();

    let r = s.client.get(&path).cookie(&admin).send().await;
    assert_eq!(r.status, 200, "{}", r.text);
    let listed = r.json()["memberships"].as_array().unwrap().clone();
    let shown: Vec<Value> = listed
        .iter()
        .map(|m| json!([m["organization_id"], m["organization_name"], m["organization_slug"], m["role"], m["primary"]]))
        .collect();
    assert_eq!(
        shown,
        [
            json!([primary["id"], "St Mary Pharmacy", "st-mary", "member", true]),
            json!([own, "Ann's Lab", "anns-lab", "owner", false]),
        ]
    );
    for m in &listed {
        let mut keys: Vec<&str> = m.as_object().unwrap().keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            ["created_at", "organization_id", "organization_name", "organization_slug", "primary", "role"]
        );
    }

    // Not an administrator, no session, an unknown account, a bad id, a stray parameter.
    assert_eq!(s.client.get(&path).cookie(&ann.cookie).send().await.status, 403);
    assert_eq!(s.client.get(&path).send().await.status, 401);
    let unknown = "/api/admin/users/01890000-0000-7000-8000-000000000000/memberships";
    let r = s.client.get(unknown).cookie(&admin).send().await;
    assert_eq!((r.status, r.json()["error"].as_str()), (404, Some("user not found")));
    assert_eq!(s.client.get("/api/admin/users/nope/memberships").cookie(&admin).send().await.status, 400);
    assert_eq!(s.client.get(&format!("{path}?x=1")).cookie(&admin).send().await.status, 400);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn second_factors_say_who_has_which_for_a_page_of_ids() {
    let s = TestServer::start().await;
    let admin = s.client.admin_session().await;
    let on = s.client.new_user("factors-on").await;
    let pending = s.client.new_user("factors-pending").await;
    let off = s.client.new_user("factors-off").await;
    enable_totp(&s, &on.cookie).await;
    let r = s
        .client
        .post("/api/auth/two-factor/enable")
        .cookie(&pending.cookie)
        .json(&json!({"password": PASSWORD}))
        .send()
        .await;
    assert_eq!(r.status, 200, "{}", r.text);

    let unknown = "01890000-0000-7000-8000-000000000000";
    let path = format!("/api/admin/users/second-factors?ids={},{unknown},{},{}", off.id, pending.id, on.id);
    let r = s.client.get(&path).cookie(&admin).send().await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(
        r.json(),
        json!({"users": [
            {"id": off.id, "totp": "off", "backup_codes_left": null, "passkeys": 0},
            {"id": pending.id, "totp": "pending", "backup_codes_left": null, "passkeys": 0},
            {"id": on.id, "totp": "on", "backup_codes_left": 10, "passkeys": 0},
        ]}),
        "in the order asked, the unknown id left out"
    );
    // The list's items keep their seven keys: the factors are only here.
    let listed = s.client.listed_user(&admin, &on.id).await;
    assert_eq!(listed.as_object().unwrap().len(), 7, "{listed}");

    // An administrator's reset: off again.
    let reset = format!("/api/admin/users/{}/two-factor/reset", on.id);
    assert_eq!(s.client.post(&reset).cookie(&admin).json(&json!({})).send().await.status, 200);
    let r = s.client.get(&format!("/api/admin/users/second-factors?ids={}", on.id)).cookie(&admin).send().await;
    assert_eq!(r.json()["users"][0]["totp"], "off");

    // Refusals: not an administrator, no ids, a bad id, too many, a stray parameter.
    assert_eq!(s.client.get(&path).cookie(&off.cookie).send().await.status, 403);
    assert_eq!(s.client.get(&path).send().await.status, 401);
    for bad in [
        "/api/admin/users/second-factors".to_owned(),
        "/api/admin/users/second-factors?ids=nope".to_owned(),
        format!("/api/admin/users/second-factors?ids={}", vec![unknown; 1001].join(",")),
        format!("/api/admin/users/second-factors?ids={}&limit=3", on.id),
    ] {
        let r = s.client.get(&bad).cookie(&admin).send().await;
        assert_eq!(r.status, 400, "{bad}: {}", r.text);
    }
    s.stop().await;
}
