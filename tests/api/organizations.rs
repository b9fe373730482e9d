//! `/api/admin/organizations`: listing, creation, slug and name rules.

use serde_json::{Value, json};

use super::harness::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn organization_list_starts_empty() {
    let s = TestServer::start().await;
    let admin = s.admin_session().await;
    let r = s.list_orgs(Some(&admin)).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(r.content_type().starts_with("application/json"));
    assert_eq!(r.json(), json!({"organizations": []}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_organization_returns_it_and_lists_it() {
    let s = TestServer::start().await;
    let admin = s.admin_session().await;
    let r = s.create_org(&admin, "Acme Pharmacy", "acme-pharmacy").await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(r.content_type().starts_with("application/json"));
    let body = r.json();
    assert_keys(&body, &["organization"]);
    let org = &body["organization"];
    assert_org(org);
    assert_eq!(org["name"], "Acme Pharmacy");
    assert_eq!(org["slug"], "acme-pharmacy");
    assert_recent(&org["created_at"]);
    assert_eq!(s.orgs(&admin).await, vec![org.clone()]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn organizations_are_listed_by_creation_time_then_id() {
    let s = TestServer::start().await;
    let admin = s.admin_session().await;
    let mut created = Vec::new();
    for slug in ["zeta", "alpha", "mid", "beta", "omega"] {
        created.push(s.new_org(&admin, &slug.to_uppercase(), slug).await);
    }
    let listed = s.orgs(&admin).await;
    listed.iter().for_each(assert_org);
    assert_ordered(&listed);
    let mut expected = created.clone();
    expected.sort_by_key(|o| (ts(&o["created_at"]), str_of(&o["id"]).to_owned()));
    assert_eq!(listed, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duplicate_slug_is_409() {
    let s = TestServer::start().await;
    let admin = s.admin_session().await;
    let first = s.new_org(&admin, "Acme", "acme").await;
    let r = s.create_org(&admin, "Another Acme", "acme").await;
    assert_admin_error(&r, 409);
    assert_eq!(s.orgs(&admin).await, vec![first]);
    // The same name with another slug is fine.
    s.new_org(&admin, "Acme", "acme-2").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slug_rules() {
    let s = TestServer::start().await;
    let admin = s.admin_session().await;
    let max = "a".repeat(63);
    let good = ["a", "0", "a-b", "abc-123", "a--b", "9lives", max.as_str()];
    for slug in good {
        let r = s.create_org(&admin, "Org", slug).await;
        assert_eq!(r.status, 200, "slug {slug:?}: {}", r.text);
        assert_eq!(r.json()["organization"]["slug"], slug);
    }
    let too_long = "a".repeat(64);
    let bad = ["", "-a", "a-", "-", "A", "Acme", "a b", " a", "a ", "a_b", "a.b", "a/b", "é", "ａ", too_long.as_str()];
    for slug in bad {
        let r = s.create_org(&admin, "Org", slug).await;
        assert_eq!(r.status, 400, "slug {slug:?}: {}", r.text);
        assert_admin_error(&r, 400);
    }
    assert_eq!(s.orgs(&admin).await.len(), good.len(), "no bad slug was created");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn organization_name_and_body_rules() {
    let s = TestServer::start().await;
    let admin = s.admin_session().await;
    let bad: Vec<Value> = vec![
        json!({"name": "", "slug": "s1"}),
        json!({"name": "   ", "slug": "s2"}),
        json!({"name": "a".repeat(201), "slug": "s3"}),
        json!({"name": 5, "slug": "s4"}),
        json!({"name": null, "slug": "s5"}),
        json!({"slug": "s6"}),
        json!({"name": "Org"}),
        json!({"name": "Org", "slug": 7}),
        json!({"name": "Org", "slug": null}),
        json!([]),
        json!({}),
        json!("Org"),
    ];
    for body in &bad {
        let r = s.post("/api/admin/organizations").cookie(&admin).json(body).send().await;
        assert_eq!(r.status, 400, "POST {body}: {}", r.text);
        assert_admin_error(&r, 400);
    }
    assert!(s.orgs(&admin).await.is_empty());
    for (i, name) in ["a".repeat(200), format!("  {}  ", "b".repeat(200)), "é".repeat(200)].iter().enumerate() {
        let r = s.create_org(&admin, name, &format!("ok-{i}")).await;
        assert_eq!(r.status, 200, "name of {} chars: {}", name.chars().count(), r.text);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_organization_is_read_renamed_and_shows_its_members() {
    let s = TestServer::start().await;
    let admin = s.admin_session().await;
    let org = s.new_org(&admin, "St Mary", "st-mary").await;
    s.new_org(&admin, "Other", "other").await;
    let id = org["id"].as_str().unwrap();
    let (a, b) = (s.new_user("member-a").await, s.new_user("outsider").await);
    s.patch_ok(&admin, &json!({"userId": a.id, "organizationId": id})).await;

    let r = s.get(&format!("/api/admin/organizations/{id}")).cookie(&admin).send().await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(
        (r.json()["organization"]["slug"].clone(), r.json()["organization"]["member_count"].clone()),
        (json!("st-mary"), json!(1))
    );
    let r = s.get(&format!("/api/admin/organizations/{id}/members")).cookie(&admin).send().await;
    let members = r.json()["members"].as_array().unwrap().clone();
    assert_eq!(members.len(), 1);
    // The list of organizations takes no parameters: a page size is refused, not answered with everything.
    let r = s.get("/api/admin/organizations?limit=1").cookie(&admin).send().await;
    assert_eq!(r.status, 400, "{}", r.text);
    assert_eq!(r.json()["error"], "unknown parameter `limit`; this call takes none");
    assert_admin_user(&members[0]);
    assert_eq!(members[0]["id"], json!(a.id));

    // The members come a page at a time when asked, in creation order, with the organization's total.
    let (c, d) = (s.new_user("member-c").await, s.new_user("member-d").await);
    for user in [&c, &d] {
        s.patch_ok(&admin, &json!({"userId": user.id, "organizationId": id})).await;
    }
    let page = |query: String| s.get(&format!("/api/admin/organizations/{id}/members?{query}")).cookie(&admin).send();
    let first = page("limit=2".into()).await;
    assert_eq!(first.status, 200, "{}", first.text);
    let ids = |r: &Value| r["members"].as_array().unwrap().iter().map(|m| m["id"].clone()).collect::<Vec<_>>();
    assert_eq!((ids(&first.json()), first.json()["total"].clone()), (vec![json!(a.id), json!(c.id)], json!(3)));
    let cursor = first.json()["next_cursor"].as_str().expect("a next page").to_owned();
    let rest = page(format!("limit=2&cursor={cursor}")).await.json();
    assert_eq!(
        (ids(&rest), rest["next_cursor"].clone(), rest["total"].clone()),
        (vec![json!(d.id)], Value::Null, json!(3))
    );
    for (query, error) in [
        ("limit=0", "limit must be a whole number from 1 to 1000"),
        ("cursor=nope", "cursor must be a next_cursor from an earlier page"),
        ("q=member", "unknown parameter `q`; allowed: limit, cursor"),
        ("organization_id=none", "unknown parameter `organization_id`; allowed: limit, cursor"),
    ] {
        let r = page(query.into()).await;
        assert_eq!((r.status, r.json()["error"].clone()), (400, json!(error)), "{query}");
    }

    let rename = |body: Value| s.patch(&format!("/api/admin/organizations/{id}")).cookie(&admin).json(&body).send();
    let r = rename(json!({"name": "St Mary Hospital Pharmacy", "slug": "st-mary-hospital"})).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json()["organization"]["slug"], "st-mary-hospital");
    assert_eq!(r.json()["organization"]["created_at"], org["created_at"], "only name and slug change");
    assert_admin_error(&rename(json!({"slug": "other"})).await, 409);
    assert_admin_error(&rename(json!({})).await, 400);
    assert_admin_error(&rename(json!({"slug": "Not A Slug"})).await, 400);
    assert_admin_error(&rename(json!({"owner": "x"})).await, 400);
    let listed = s.orgs(&admin).await;
    assert!(listed.iter().any(|o| o["slug"] == "st-mary-hospital") && !listed.iter().any(|o| o["slug"] == "st-mary"));
    assert_eq!(s.create_org(&admin, "Again", "st-mary").await.status, 200, "the old slug is free again");

    let unknown = uuid::Uuid::now_v7();
    assert_admin_error(&s.get(&format!("/api/admin/organizations/{unknown}")).cookie(&admin).send().await, 404);
    assert_admin_error(&s.get("/api/admin/organizations/not-an-id").cookie(&admin).send().await, 400);
    assert_admin_error(&s.get(&format!("/api/admin/organizations/{id}/members")).cookie(&b.cookie).send().await, 403);
    assert_admin_error(&s.get(&format!("/api/admin/organizations/{id}")).send().await, 401);
    let audit = s.get("/api/admin/audit?limit=50").cookie(&admin).send().await.json();
    assert!(audit["entries"].as_array().unwrap().iter().any(|e| e["action"] == "organization.updated"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_non_empty_organization_is_deleted_only_with_its_members_detached_and_for_good() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start_in(dir.path()).await;
    let admin = s.admin_session().await;
    let org = s.new_org(&admin, "Closing", "closing").await;
    let id = org["id"].as_str().unwrap().to_owned();
    let u = s.new_user("staff").await;
    s.patch_ok(&admin, &json!({"userId": u.id, "organizationId": id})).await;
    let delete = |query: &str| s.delete(&format!("/api/admin/organizations/{id}{query}")).cookie(&admin).send();
    assert_admin_error(&delete("").await, 409);
    assert_admin_error(&delete("?detach_members=maybe").await, 400);
    assert_admin_error(&delete("?cascade=true").await, 400);
    assert_eq!(s.listed_user(&admin, &u.id).await["organization_id"], json!(id), "a refusal changes nothing");
    let r = delete("?detach_members=true").await;
    assert_eq!((r.status, r.json()), (200, json!({"success": true, "detached": 1})), "{}", r.text);
    assert_admin_error(&delete("?detach_members=true").await, 404);
    assert_eq!(s.listed_user(&admin, &u.id).await["organization_id"], Value::Null);
    assert_admin_error(&s.patch_user(&admin, &json!({"userId": u.id, "organizationId": id})).await, 404);
    let empty = s.new_org(&admin, "Empty", "empty").await;
    let r =
        s.delete(&format!("/api/admin/organizations/{}", empty["id"].as_str().unwrap())).cookie(&admin).send().await;
    assert_eq!(r.json(), json!({"success": true, "detached": 0}));
    s.stop().await;

    let s = TestServer::start_in(dir.path()).await;
    let admin = s.admin_session().await;
    assert!(s.orgs(&admin).await.is_empty(), "both deletions are durable");
    assert_eq!(s.listed_user(&admin, &u.id).await["organization_id"], Value::Null);
    assert_eq!(s.create_org(&admin, "Closing again", "closing").await.status, 200, "the slug is free");
    let audit = s.get("/api/admin/audit?limit=50").cookie(&admin).send().await.json();
    let deleted: Vec<&Value> =
        audit["entries"].as_array().unwrap().iter().filter(|e| e["action"] == "organization.deleted").collect();
    assert_eq!(deleted.len(), 2);
    assert!(deleted.iter().any(|e| e["detail"] == "closing; 1 member(s) detached"), "{deleted:?}");
}

/// Joining an organization while it is being deleted: whatever the order, no account is left a member of an
/// organization that no longer exists.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn joins_racing_a_deletion_never_leave_a_member_of_nothing() {
    let s = TestServer::start().await;
    let admin = s.admin_session().await;
    let mut users = Vec::new();
    for i in 0..6 {
        users.push(s.new_user(&format!("racer{i}")).await.id);
    }
    for round in 0..8 {
        let org = s.new_org(&admin, "Race", &format!("race-{round}")).await;
        let id = org["id"].as_str().unwrap().to_owned();
        let path = format!("/api/admin/organizations/{id}");
        let joins: Vec<_> = users
            .iter()
            .map(|u| {
                let (client, admin, body) =
                    (s.client.clone(), admin.clone(), json!({"userId": u, "organizationId": id}));
                tokio::spawn(async move { client.patch_user(&admin, &body).await })
            })
            .collect();
        let deleted = s.delete(&path).cookie(&admin).send().await;
        let mut joined = Vec::new();
        for join in joins {
            joined.push(join.await.unwrap());
        }
        let exists = s.get(&path).cookie(&admin).send().await.status == 200;
        assert!(deleted.status == 200 || deleted.status == 409, "{}", deleted.text);
        assert_eq!(exists, deleted.status == 409, "round {round}");
        for (user, join) in users.iter().zip(&joined) {
            let listed = s.listed_user(&admin, user).await;
            if !exists {
                assert_ne!(listed["organization_id"], json!(id), "round {round}: a member of a deleted organization");
            } else if join.status == 200 {
                assert_eq!(listed["organization_id"], json!(id));
            }
        }
        for user in &users {
            s.patch_ok(&admin, &json!({"userId": user, "organizationId": null})).await;
        }
    }
}
