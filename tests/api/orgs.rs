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
