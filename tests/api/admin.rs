//! `/api/admin/users`: listing, role changes, bans, memberships, guards and access control.

use serde_json::{Value, json};

use super::harness::*;

const RANDOM_UUID: &str = "0b6f5e1c-3d7a-4c1e-9a52-6f1d2e3c4b5a";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn user_list_shows_the_bootstrap_admin() {
    let s = TestServer::start().await;
    let admin = s.admin_session().await;
    let r = s.list_users(Some(&admin)).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(r.content_type().starts_with("application/json"));
    let body = r.json();
    assert_keys(&body, &["users"]);
    let users = body["users"].as_array().unwrap();
    assert_eq!(users.len(), 1, "{body}");
    let a = &users[0];
    assert_admin_user(a);
    assert_eq!(a["email"], ADMIN_EMAIL);
    assert_eq!(a["name"], ADMIN_NAME);
    assert_eq!(a["role"], "admin");
    assert_eq!(a["banned"], false);
    assert_eq!(a["organization_id"], Value::Null);
    let me = s.session(&admin).await;
    assert_eq!(a["id"], me["user"]["id"]);
    assert_eq!(me["user"]["role"], "admin");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn user_list_has_every_account_in_creation_order_without_secrets() {
    let s = TestServer::start().await;
    let admin = s.admin_session().await;
    let mut created = Vec::new();
    for tag in ["carol", "alice", "bob"] {
        created.push(s.new_user(tag).await);
    }
    let r = s.list_users(Some(&admin)).await;
    assert!(!r.text.contains("argon2") && !r.text.contains(PASSWORD) && !r.text.contains(ADMIN_PASSWORD), "{}", r.text);
    let users = r.json()["users"].as_array().unwrap().clone();
    assert_eq!(users.len(), 4);
    users.iter().for_each(assert_admin_user);
    assert_ordered(&users);
    assert_eq!(users[0]["email"], ADMIN_EMAIL, "the bootstrap admin came first");
    for u in &created {
        let listed = users.iter().find(|l| l["id"] == u.id.as_str()).expect("listed");
        let expected = json!({
            "id": u.id, "name": u.user["name"], "email": u.email, "role": "user",
            "organization_id": null, "banned": false, "created_at": u.user["createdAt"],
        });
        assert_eq!(listed, &expected);
    }
    // Creation order (distinct milliseconds are likely but not certain, so compare as the contract orders).
    let ids: Vec<_> = users[1..].iter().map(|u| u["id"].clone()).collect();
    let mut by_creation: Vec<_> = created.iter().map(|u| (ts(&u.user["createdAt"]), u.id.clone())).collect();
    by_creation.sort();
    assert_eq!(ids, by_creation.into_iter().map(|(_, id)| Value::from(id)).collect::<Vec<_>>());
}

/// Each admin endpoint, as a request with the given cookie (valid bodies where there is one).
async fn call_each_admin_endpoint(s: &TestServer, cookie: Option<&str>, target: &str) -> Vec<(String, Resp)> {
    vec![
        ("GET users".into(), s.list_users(cookie).await),
        (
            "PATCH users".into(),
            s.patch("/api/admin/users")
                .cookie_opt(cookie)
                .json(&json!({"userId": target, "role": "qa_manager"}))
                .send()
                .await,
        ),
        ("GET organizations".into(), s.list_orgs(cookie).await),
        (
            "POST organizations".into(),
            s.post("/api/admin/organizations")
                .cookie_opt(cookie)
                .json(&json!({"name": "Org", "slug": "org"}))
                .send()
                .await,
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_endpoints_without_a_valid_session_are_401() {
    let s = TestServer::start().await;
    let u = s.new_user("alice").await;
    let signed_out = s.admin_session().await;
    assert_eq!(s.sign_out(Some(&signed_out)).await.status, 200);
    let forged = "C".repeat(43);
    for cookie in [None, Some(forged.as_str()), Some(signed_out.as_str())] {
        for (what, r) in call_each_admin_endpoint(&s, cookie, &u.id).await {
            assert_eq!(r.status, 401, "{what} with cookie {cookie:?}: {}", r.text);
            assert_admin_error(&r, 401);
        }
    }
    let admin = s.admin_session().await;
    assert_eq!(s.listed_user(&admin, &u.id).await["role"], "user", "nothing changed");
    assert!(s.orgs(&admin).await.is_empty(), "nothing created");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_endpoints_for_non_admins_are_403() {
    let s = TestServer::start().await;
    let admin = s.admin_session().await;
    let u = s.new_user("alice").await;
    let qa = s.new_user("quentin").await;
    s.patch_ok(&admin, &json!({"userId": qa.id, "role": "qa_manager"})).await;
    let pic = s.new_user("pia").await;
    s.patch_ok(&admin, &json!({"userId": pic.id, "role": "pharmacist_in_charge"})).await;
    for who in [&u, &qa, &pic] {
        for (what, r) in call_each_admin_endpoint(&s, Some(&who.cookie), &u.id).await {
            assert_eq!(r.status, 403, "{what} as {}: {}", who.email, r.text);
            assert_admin_error(&r, 403);
        }
    }
    assert_eq!(s.listed_user(&admin, &u.id).await["role"], "user", "nothing changed");
    assert!(s.orgs(&admin).await.is_empty(), "nothing created");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patch_role_changes_the_role_everywhere() {
    let s = TestServer::start().await;
    let admin = s.admin_session().await;
    let u = s.new_user("alice").await;
    for role in ["pharmacist_in_charge", "qa_manager", "user", "qa_manager"] {
        s.patch_ok(&admin, &json!({"userId": u.id, "role": role})).await;
        let listed = s.listed_user(&admin, &u.id).await;
        assert_eq!(listed["role"], role);
        assert_eq!(listed["banned"], false);
        let me = s.session(&u.cookie).await;
        assert_eq!(me["user"]["role"], role, "get-session sees the new role at once");
    }
    // role together with banned:false (the interface's "role together with banned")
    s.patch_ok(&admin, &json!({"userId": u.id, "role": "user", "banned": false})).await;
    assert_eq!(s.listed_user(&admin, &u.id).await["role"], "user");
    assert!(s.session(&u.cookie).await.is_object(), "banned:false does not end sessions");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patch_rejects_bad_bodies_with_400() {
    let s = TestServer::start().await;
    let admin = s.admin_session().await;
    let u = s.new_user("alice").await;
    let id = u.id.as_str();
    let bad = [
        json!({"role": "qa_manager"}),
        json!({"userId": null, "role": "qa_manager"}),
        json!({"userId": 5, "role": "qa_manager"}),
        json!({"userId": "not-a-uuid", "role": "qa_manager"}),
        json!({"userId": format!("{id}x"), "role": "qa_manager"}),
        json!({"userId": id}),
        json!({"userId": id, "foo": 1}),
        json!({"userId": id, "role": "qa_manager", "email": "x@example.com"}),
        json!({"userId": id, "role": "superuser"}),
        json!({"userId": id, "role": "Admin"}),
        json!({"userId": id, "role": ""}),
        json!({"userId": id, "role": 5}),
        json!({"userId": id, "role": null}),
        json!({"userId": id, "banned": "true"}),
        json!({"userId": id, "banned": 1}),
        json!({"userId": id, "banReason": 5}),
        json!({"userId": id, "organizationId": "not-a-uuid"}),
        json!({"userId": id, "organizationId": 5}),
        json!([]),
        json!({}),
        json!(null),
        json!("userId"),
    ];
    for body in &bad {
        let r = s.patch_user(&admin, body).await;
        assert_eq!(r.status, 400, "PATCH {body}: {}", r.text);
        assert_admin_error(&r, 400);
    }
    let listed = s.listed_user(&admin, id).await;
    assert_eq!((listed["role"].clone(), listed["banned"].clone()), (json!("user"), json!(false)), "unchanged");
    assert!(s.session(&u.cookie).await.is_object(), "still signed in");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patch_unknown_user_or_organization_is_404() {
    let s = TestServer::start().await;
    let admin = s.admin_session().await;
    let u = s.new_user("alice").await;
    for body in [json!({"userId": RANDOM_UUID, "role": "qa_manager"}), json!({"userId": RANDOM_UUID, "banned": true})] {
        let r = s.patch_user(&admin, &body).await;
        assert_admin_error(&r, 404);
    }
    let r = s.patch_user(&admin, &json!({"userId": u.id, "organizationId": RANDOM_UUID})).await;
    assert_admin_error(&r, 404);
    // A user id is no organization id.
    let r = s.patch_user(&admin, &json!({"userId": u.id, "organizationId": u.id})).await;
    assert_admin_error(&r, 404);
    assert_eq!(s.listed_user(&admin, &u.id).await["organization_id"], Value::Null);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ban_ends_every_session_and_blocks_sign_in_until_unbanned() {
    let s = TestServer::start().await;
    let admin = s.admin_session().await;
    let u = s.new_user("alice").await;
    let second = s.login(&u.email, PASSWORD).await;
    let bystander = s.new_user("bob").await;

    s.patch_ok(&admin, &json!({"userId": u.id, "banned": true, "banReason": "spam"})).await;
    for cookie in [&u.cookie, &second] {
        assert_eq!(s.get_session_resp(Some(cookie)).await.json(), Value::Null, "banned user's session ended");
    }
    assert!(s.session(&bystander.cookie).await.is_object(), "other users keep their sessions");
    let listed = s.listed_user(&admin, &u.id).await;
    assert_eq!(listed["banned"], true);

    let r = s.sign_in_body(&json!({"email": u.email, "password": PASSWORD})).await;
    assert_auth_error(&r, 403, "BANNED_USER");
    assert!(r.session_cookie().is_none_or(|c| c.value.is_empty()));
    let r = s.sign_in_body(&json!({"email": u.email, "password": "wrong password"})).await;
    assert_auth_error(&r, 401, "INVALID_EMAIL_OR_PASSWORD");

    s.patch_ok(&admin, &json!({"userId": u.id, "banned": false})).await;
    assert_eq!(s.listed_user(&admin, &u.id).await["banned"], false);
    let fresh = s.login(&u.email, PASSWORD).await;
    let me = s.session(&fresh).await;
    assert_eq!(me["user"]["banned"], false);
    assert_eq!(me["user"]["banReason"], Value::Null);
    for cookie in [&u.cookie, &second] {
        assert_eq!(s.get_session_resp(Some(cookie)).await.json(), Value::Null, "old sessions stay ended");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn banned_admin_loses_admin_access_at_once() {
    let s = TestServer::start().await;
    let admin = s.admin_session().await;
    let a2 = s.new_user("second-admin").await;
    s.patch_ok(&admin, &json!({"userId": a2.id, "role": "admin"})).await;
    assert_eq!(s.list_users(Some(&a2.cookie)).await.status, 200);

    s.patch_ok(&admin, &json!({"userId": a2.id, "banned": true})).await;
    let r = s.list_users(Some(&a2.cookie)).await;
    assert_admin_error(&r, 401);
    let r = s.patch_user(&a2.cookie, &json!({"userId": a2.id, "banned": false})).await;
    assert_admin_error(&r, 401);
    assert_eq!(s.listed_user(&admin, &a2.id).await["banned"], true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ban_reason_alone_is_a_change() {
    let s = TestServer::start().await;
    let admin = s.admin_session().await;
    let u = s.new_user("alice").await;
    s.patch_ok(&admin, &json!({"userId": u.id, "banReason": "under review"})).await;
    assert_eq!(s.listed_user(&admin, &u.id).await["banned"], false, "a reason alone does not ban");
    assert!(s.session(&u.cookie).await.is_object(), "nor end sessions");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_cannot_ban_themselves() {
    let s = TestServer::start().await;
    let admin = s.admin_session().await;
    let me = s.session(&admin).await["user"]["id"].clone();
    // Even with another admin around (so it is not the last-admin guard that answers).
    let a2 = s.new_user("second-admin").await;
    s.patch_ok(&admin, &json!({"userId": a2.id, "role": "admin"})).await;
    let r = s.patch_user(&admin, &json!({"userId": me, "banned": true})).await;
    assert_admin_error(&r, 400);
    assert_eq!(s.list_users(Some(&admin)).await.status, 200, "still signed in and admin");
    assert_eq!(s.listed_user(&admin, str_of(&me)).await["banned"], false);
    let r = s.patch_user(&a2.cookie, &json!({"userId": a2.id, "banned": true, "role": "admin"})).await;
    assert_admin_error(&r, 400);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_last_unbanned_admin_cannot_be_demoted() {
    let s = TestServer::start().await;
    let admin = s.admin_session().await;
    let me = str_of(&s.session(&admin).await["user"]["id"]).to_owned();

    // Sole admin demoting themselves: 409, nothing changes.
    let r = s.patch_user(&admin, &json!({"userId": me, "role": "user"})).await;
    assert_admin_error(&r, 409);
    assert_eq!(s.listed_user(&admin, &me).await["role"], "admin");
    // Re-asserting one's own admin role is no demotion.
    s.patch_ok(&admin, &json!({"userId": me, "role": "admin"})).await;

    // A banned admin does not count: with B admin but banned, the bootstrap admin is still the last one.
    let b = s.new_user("bert").await;
    s.patch_ok(&admin, &json!({"userId": b.id, "role": "admin"})).await;
    s.patch_ok(&admin, &json!({"userId": b.id, "banned": true})).await;
    let r = s.patch_user(&admin, &json!({"userId": me, "role": "qa_manager"})).await;
    assert_admin_error(&r, 409);
    assert_eq!(s.listed_user(&admin, &me).await["role"], "admin");

    // With a second unbanned admin, demotion works and counts from the very next request.
    let c = s.new_user("cleo").await;
    s.patch_ok(&admin, &json!({"userId": c.id, "role": "admin"})).await;
    s.patch_ok(&admin, &json!({"userId": me, "role": "user"})).await;
    let r = s.list_users(Some(&admin)).await;
    assert_admin_error(&r, 403);

    // Now C is the last unbanned admin: cannot demote or ban herself, and B (banned) can be demoted freely.
    let r = s.patch_user(&c.cookie, &json!({"userId": c.id, "role": "pharmacist_in_charge"})).await;
    assert_admin_error(&r, 409);
    s.patch_ok(&c.cookie, &json!({"userId": b.id, "role": "user"})).await;
    let listed = s.users(&c.cookie).await;
    let roles: Vec<_> = listed.iter().map(|u| (u["email"].clone(), u["role"].clone(), u["banned"].clone())).collect();
    assert_eq!(
        roles,
        vec![
            (json!(ADMIN_EMAIL), json!("user"), json!(false)),
            (json!("bert@example.com"), json!("user"), json!(true)),
            (json!("cleo@example.com"), json!("admin"), json!(false)),
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unbanning_restores_an_admin_so_the_other_can_step_down() {
    let s = TestServer::start().await;
    let admin = s.admin_session().await;
    let me = str_of(&s.session(&admin).await["user"]["id"]).to_owned();
    let b = s.new_user("bert").await;
    s.patch_ok(&admin, &json!({"userId": b.id, "role": "admin", "banned": true})).await;
    let r = s.patch_user(&admin, &json!({"userId": me, "role": "user"})).await;
    assert_admin_error(&r, 409);
    s.patch_ok(&admin, &json!({"userId": b.id, "banned": false})).await;
    s.patch_ok(&admin, &json!({"userId": me, "role": "user"})).await;
    let b_cookie = s.login(&b.email, PASSWORD).await;
    assert_eq!(s.list_users(Some(&b_cookie)).await.status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_promoted_users_existing_session_is_admin_at_once() {
    let s = TestServer::start().await;
    let admin = s.admin_session().await;
    let u = s.new_user("alice").await;
    assert_admin_error(&s.list_users(Some(&u.cookie)).await, 403);
    s.patch_ok(&admin, &json!({"userId": u.id, "role": "admin"})).await;
    assert_eq!(s.list_users(Some(&u.cookie)).await.status, 200, "same cookie, now admin");
    assert_eq!(s.list_orgs(Some(&u.cookie)).await.status, 200);
    assert_eq!(s.session(&u.cookie).await["user"]["role"], "admin");

    // And a demotion takes effect on the next request of that same session.
    s.patch_ok(&admin, &json!({"userId": u.id, "role": "qa_manager"})).await;
    assert_admin_error(&s.list_users(Some(&u.cookie)).await, 403);
    assert_admin_error(&s.create_org(&u.cookie, "X", "x").await, 403);
    assert!(s.session(&u.cookie).await.is_object(), "demotion does not end the session");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn membership_is_set_moved_and_removed() {
    let s = TestServer::start().await;
    let admin = s.admin_session().await;
    let u = s.new_user("alice").await;
    let org_a = s.new_org(&admin, "Acme", "acme").await;
    let org_b = s.new_org(&admin, "Beta", "beta").await;

    for org in [&org_a, &org_b] {
        s.patch_ok(&admin, &json!({"userId": u.id, "organizationId": org["id"]})).await;
        assert_eq!(s.listed_user(&admin, &u.id).await["organization_id"], org["id"]);
        assert_eq!(s.session(&u.cookie).await["user"]["organizationId"], org["id"]);
    }
    // Role and membership in one request.
    s.patch_ok(&admin, &json!({"userId": u.id, "organizationId": org_a["id"], "role": "qa_manager"})).await;
    let listed = s.listed_user(&admin, &u.id).await;
    assert_eq!((listed["organization_id"].clone(), listed["role"].clone()), (org_a["id"].clone(), json!("qa_manager")));

    s.patch_ok(&admin, &json!({"userId": u.id, "organizationId": null})).await;
    assert_eq!(s.listed_user(&admin, &u.id).await["organization_id"], Value::Null);
    assert_eq!(s.session(&u.cookie).await["user"]["organizationId"], Value::Null);
    // Other users are untouched.
    assert_eq!(s.session(&admin).await["user"]["organizationId"], Value::Null);
}

/// Pages of `GET /api/admin/users` with a cursor, while users keep being created: no user twice, none missing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn users_page_with_a_cursor_stable_under_inserts_and_filter() {
    let s = TestServer::start().await;
    let admin = s.admin_session().await;
    for n in 0..7 {
        s.new_user(&format!("page{n}")).await;
    }
    let mut seen: Vec<String> = Vec::new();
    let mut cursor: Option<String> = None;
    let mut added = 0;
    loop {
        let path = match &cursor {
            Some(c) => format!("/api/admin/users?limit=3&cursor={c}"),
            None => "/api/admin/users?limit=3".to_owned(),
        };
        let r = s.get(&path).cookie(&admin).send().await;
        assert_eq!(r.status, 200, "{}", r.text);
        let page = r.json();
        seen.extend(page["users"].as_array().unwrap().iter().map(|u| u["id"].as_str().unwrap().to_owned()));
        if added < 2 {
            // A user created between two pages comes at the end, not twice and not never.
            s.new_user(&format!("late{added}")).await;
            added += 1;
        }
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => break,
        }
    }
    let all: Vec<String> = s.users(&admin).await.iter().map(|u| u["id"].as_str().unwrap().to_owned()).collect();
    assert_eq!(seen, all, "pages lost or repeated a user");

    let r = s.get("/api/admin/users?q=PAGE1&role=user&banned=false&organization_id=none").cookie(&admin).send().await;
    let found: Vec<Value> = r.json()["users"].as_array().unwrap().clone();
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0]["email"], "page1@example.com");
    for bad in ["limit=0", "limit=x", "cursor=nope", "role=superuser", "banned=maybe", "sort=name"] {
        let r = s.get(&format!("/api/admin/users?{bad}")).cookie(&admin).send().await;
        assert_admin_error(&r, 400);
        let name = bad.split('=').next().unwrap();
        assert!(r.text.contains(name), "the error names {name}: {}", r.text);
    }
}

/// `match=prefix`: the start of an e-mail, from the e-mail index, in creation order and paged with the same cursor,
/// stable while matching accounts are created between pages.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_email_prefix_pages_in_creation_order_from_the_index() {
    let s = TestServer::start().await;
    let admin = s.admin_session().await;
    for tag in ["pharm-b", "other", "pharm-a", "pharm-c", "xpharm"] {
        s.new_user(tag).await;
    }
    let page = |cursor: Option<String>| {
        let path = match cursor {
            Some(c) => format!("/api/admin/users?q=Pharm-&match=prefix&limit=2&cursor={c}"),
            None => "/api/admin/users?q=Pharm-&match=prefix&limit=2".to_owned(),
        };
        let (s, admin) = (&s, &admin);
        async move { s.get(&path).cookie(admin).send().await.json() }
    };
    let first = page(None).await;
    let emails = |p: &Value| -> Vec<String> {
        p["users"].as_array().unwrap().iter().map(|u| u["email"].as_str().unwrap().to_owned()).collect()
    };
    assert_eq!(emails(&first), ["pharm-b@example.com", "pharm-a@example.com"], "creation order, not e-mail order");
    s.new_user("pharm-d").await;
    let second = page(first["next_cursor"].as_str().map(str::to_owned)).await;
    assert_eq!(emails(&second), ["pharm-c@example.com", "pharm-d@example.com"]);
    assert_eq!(second["next_cursor"], Value::Null, "no gap, no repeat, nothing after the last");
    let r = s.get("/api/admin/users?q=pharm&match=prefix&role=user").cookie(&admin).send().await.json();
    assert_eq!(emails(&r).len(), 4, "xpharm does not start with it: {r}");
    let r = s.get("/api/admin/users?q=pharm").cookie(&admin).send().await.json();
    assert_eq!(emails(&r).len(), 5, "contains finds xpharm too");
    assert_admin_error(&s.get("/api/admin/users?q=a&match=regex").cookie(&admin).send().await, 400);
}
