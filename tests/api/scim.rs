//! SCIM 2.0 provisioning (src/http/scim.rs, issue #48): an organization's tokens, the Users of its directory
//! (created, deactivated, reactivated, deleted, with sign-in and sessions checked at each step), one organization's
//! token seeing nothing of another's, filters and paging, SCIM Errors on every refusal, and the request shapes
//! Okta's and Microsoft Entra ID's provisioning documentation shows.

use serde_json::{Value, json};

use super::harness::*;

const SCIM: &str = "/api/auth/scim/v2";
const USER_SCHEMA: &str = "urn:ietf:params:scim:schemas:core:2.0:User";
const PATCH_SCHEMA: &str = "urn:ietf:params:scim:api:messages:2.0:PatchOp";
const ERROR_SCHEMA: &str = "urn:ietf:params:scim:api:messages:2.0:Error";

/// An organization made by the administrator and a token of it with every scope.
async fn org_and_token(s: &TestServer, admin: &str, slug: &str) -> (String, String) {
    let org = s.new_org(admin, &format!("Org {slug}"), slug).await;
    let id = str_of(&org["id"]).to_owned();
    let r = s.post(&format!("/api/admin/organizations/{id}/scim-tokens")).cookie(admin).json(&json!({})).send().await;
    assert_eq!(r.status, 200, "{}", r.text);
    (id, str_of(&r.json()["token"]).to_owned())
}

fn scim(s: &TestServer, method: reqwest::Method, path: &str, token: &str) -> Req {
    s.req(method, &format!("{SCIM}{path}")).header("authorization", &format!("Bearer {token}"))
}

async fn send_scim(s: &TestServer, method: reqwest::Method, path: &str, token: &str, body: Option<&Value>) -> Resp {
    let r = scim(s, method, path, token);
    match body {
        Some(b) => r.raw(Some("application/scim+json"), serde_json::to_vec(b).unwrap()).send().await,
        None => r.send().await,
    }
}

fn user_body(user_name: &str) -> Value {
    json!({
        "schemas": [USER_SCHEMA],
        "userName": user_name,
        "name": {"givenName": "Ada", "familyName": "Lovelace"},
        "emails": [{"value": user_name, "type": "work", "primary": true}],
        "active": true,
    })
}

/// A SCIM Error of `status` (and `scimType`), as `application/scim+json`.
fn assert_scim_error(r: &Resp, status: u16, scim_type: Option<&str>) {
    assert_eq!(r.status, status, "{}", r.text);
    assert!(r.content_type().starts_with("application/scim+json"), "{}", r.content_type());
    let body = r.json();
    assert_eq!(body["schemas"], json!([ERROR_SCHEMA]), "{body}");
    assert_eq!(body["status"], json!(status.to_string()), "{body}");
    assert_eq!(body["scimType"].as_str(), scim_type, "{body}");
}

async fn patch_active(s: &TestServer, token: &str, id: &str, active: bool) -> Resp {
    let body = json!({"schemas": [PATCH_SCHEMA], "Operations": [{"op": "replace", "value": {"active": active}}]});
    send_scim(s, reqwest::Method::PATCH, &format!("/Users/{id}"), token, Some(&body)).await
}

/// The directory's life of one account: created (with a password Okta sends when it syncs them), it signs in;
/// deactivated, its session ends and sign-in is refused in the same answer; reactivated, it signs in again;
/// deleted, the account is gone (its address free again) and the resource 404.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provisioned_user_signs_in_until_deactivated_and_is_gone_once_deleted() {
    let s = TestServer::start().await;
    let admin = s.admin_session().await;
    let (org, token) = org_and_token(&s, &admin, "acme").await;
    let mut body = user_body("ada@acme.example");
    body["password"] = json!(PASSWORD);
    let r = send_scim(&s, reqwest::Method::POST, "/Users", &token, Some(&body)).await;
    assert_eq!(r.status, 201, "{}", r.text);
    assert!(r.content_type().starts_with("application/scim+json"));
    let made = r.json();
    let id = str_of(&made["id"]).to_owned();
    assert_eq!(r.header("location").as_deref(), made["meta"]["location"].as_str());
    assert!(str_of(&made["meta"]["location"]).ends_with(&format!("{SCIM}/Users/{id}")));
    assert_eq!((made["userName"].clone(), made["active"].clone()), (json!("ada@acme.example"), json!(true)));
    assert!(made.get("password").is_none(), "never answered: {made}");
    // The account is a member of the organization, named from the directory's name.
    let listed = s.listed_user(&admin, &id).await;
    assert_eq!(listed["name"], "Ada Lovelace", "{listed}");
    let members = s.get(&format!("/api/admin/organizations/{org}/members")).cookie(&admin).send().await;
    assert!(members.text.contains(&id), "{}", members.text);

    let cookie = s.login("ada@acme.example", PASSWORD).await;
    assert_ne!(s.session(&cookie).await, Value::Null);

    let r = patch_active(&s, &token, &id, false).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json()["active"], false);
    assert_eq!(s.session(&cookie).await, Value::Null, "the deactivation ended the session");
    let r = s.sign_in_body(&json!({"email": "ada@acme.example", "password": PASSWORD})).await;
    assert_auth_error(&r, 403, "BANNED_USER");
    let got = send_scim(&s, reqwest::Method::GET, &format!("/Users/{id}"), &token, None).await;
    assert_eq!(got.json()["active"], false);

    let r = patch_active(&s, &token, &id, true).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let cookie = s.login("ada@acme.example", PASSWORD).await;

    let r = send_scim(&s, reqwest::Method::DELETE, &format!("/Users/{id}"), &token, None).await;
    assert_eq!(r.status, 204, "{}", r.text);
    assert_eq!(s.session(&cookie).await, Value::Null, "the deletion ended the session");
    let r = s.sign_in_body(&json!({"email": "ada@acme.example", "password": PASSWORD})).await;
    assert_eq!(r.status, 401, "{}", r.text);
    assert!(s.users(&admin).await.iter().all(|u| u["id"] != id.as_str()), "the account is gone");
    assert_scim_error(&send_scim(&s, reqwest::Method::GET, &format!("/Users/{id}"), &token, None).await, 404, None);
    assert_scim_error(&send_scim(&s, reqwest::Method::DELETE, &format!("/Users/{id}"), &token, None).await, 404, None);

    let actions: Vec<String> = s.get("/api/admin/audit?limit=500").cookie(&admin).send().await.json()["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| str_of(&e["action"]).to_owned())
        .collect();
    for action in ["scim_token.created", "user.created", "member.added", "user.banned", "user.unbanned", "user.deleted"]
    {
        assert!(actions.iter().any(|a| a == action), "{action} not audited: {actions:?}");
    }
    s.stop().await;
}

/// An account another organization also has keeps its account when one directory deletes it: only that
/// organization's membership ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_an_account_another_organization_has_ends_only_the_membership() {
    let s = TestServer::start().await;
    let admin = s.admin_session().await;
    let (org, token) = org_and_token(&s, &admin, "one").await;
    let mut body = user_body("bo@one.example");
    body["password"] = json!(PASSWORD);
    let r = send_scim(&s, reqwest::Method::POST, "/Users", &token, Some(&body)).await;
    assert_eq!(r.status, 201, "{}", r.text);
    let id = str_of(&r.json()["id"]).to_owned();
    // The account joins a second organization through the organization plugin's invitation.
    let owner = s.new_user("owner-two").await;
    let r = s
        .post("/api/auth/organization/create")
        .cookie(&owner.cookie)
        .json(&json!({"name": "Two", "slug": "two"}))
        .send()
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let two = str_of(&r.json()["id"]).to_owned();
    let invite = json!({"email": "bo@one.example", "role": "member", "organizationId": two});
    let r = s.post("/api/auth/organization/invite-member").cookie(&owner.cookie).json(&invite).send().await;
    assert_eq!(r.status, 200, "{}", r.text);
    let invitation = str_of(&r.json()["id"]).to_owned();
    let bo = s.login("bo@one.example", PASSWORD).await;
    let r = s
        .post("/api/auth/organization/accept-invitation")
        .cookie(&bo)
        .json(&json!({"invitationId": invitation}))
        .send()
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let r = send_scim(&s, reqwest::Method::DELETE, &format!("/Users/{id}"), &token, None).await;
    assert_eq!(r.status, 204, "{}", r.text);
    assert!(s.users(&admin).await.iter().any(|u| u["id"] == id.as_str()), "the account stays");
    assert_ne!(s.session(&bo).await, Value::Null, "and its session");
    let memberships = s.get(&format!("/api/admin/users/{id}/memberships")).cookie(&admin).send().await;
    assert!(memberships.text.contains(&two), "{}", memberships.text);
    assert_scim_error(&send_scim(&s, reqwest::Method::GET, &format!("/Users/{id}"), &token, None).await, 404, None);
    let members = s.get(&format!("/api/admin/organizations/{org}/members")).cookie(&admin).send().await;
    assert!(!members.text.contains(&id), "{}", members.text);
    s.stop().await;
}

/// One organization's token sees nothing of another's: its users are 404 to every method, and absent from lists
/// and filters.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_organizations_token_sees_nothing_of_anothers() {
    let s = TestServer::start().await;
    let admin = s.admin_session().await;
    let (_, a) = org_and_token(&s, &admin, "alpha").await;
    let (_, b) = org_and_token(&s, &admin, "beta").await;
    let r = send_scim(&s, reqwest::Method::POST, "/Users", &a, Some(&user_body("al@alpha.example"))).await;
    assert_eq!(r.status, 201, "{}", r.text);
    let id = str_of(&r.json()["id"]).to_owned();
    let path = format!("/Users/{id}");
    assert_scim_error(&send_scim(&s, reqwest::Method::GET, &path, &b, None).await, 404, None);
    assert_scim_error(
        &send_scim(&s, reqwest::Method::PUT, &path, &b, Some(&user_body("al@alpha.example"))).await,
        404,
        None,
    );
    assert_scim_error(&patch_active(&s, &b, &id, false).await, 404, None);
    assert_scim_error(&send_scim(&s, reqwest::Method::DELETE, &path, &b, None).await, 404, None);
    let list = send_scim(&s, reqwest::Method::GET, "/Users", &b, None).await.json();
    assert_eq!(list["totalResults"], 0, "{list}");
    let filtered = send_scim(&s, reqwest::Method::GET, "/Users?filter=userName%20pr", &b, None).await.json();
    assert_eq!(filtered["totalResults"], 0, "{filtered}");
    // Still there for its own organization, and still active.
    let got = send_scim(&s, reqwest::Method::GET, &path, &a, None).await;
    assert_eq!((got.status, got.json()["active"].clone()), (200, json!(true)), "{}", got.text);
    s.stop().await;
}

/// Tokens: an owner or an administrator makes them (another member, a stranger, no session: refused); the token
/// is in the creating answer only; a revoked, expired or altered token is a 401 with the bearer challenge; a
/// token without the write scope reads but does not write (403).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_are_made_by_owners_and_administrators_shown_once_and_revoked() {
    let s = TestServer::start().await;
    let admin = s.admin_session().await;
    let owner = s.new_user("scim-owner").await;
    let r = s
        .post("/api/auth/organization/create")
        .cookie(&owner.cookie)
        .json(&json!({"name": "Own", "slug": "own"}))
        .send()
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let org = str_of(&r.json()["id"]).to_owned();
    let tokens = format!("/api/admin/organizations/{org}/scim-tokens");
    let stranger = s.new_user("scim-stranger").await;
    assert_eq!(s.post(&tokens).cookie(&stranger.cookie).json(&json!({})).send().await.status, 403);
    assert_eq!(s.get(&tokens).cookie(&stranger.cookie).send().await.status, 403);
    assert_eq!(s.post(&tokens).json(&json!({})).send().await.status, 401);
    let r = s
        .post("/api/admin/organizations/00000000-0000-0000-0000-000000000000/scim-tokens")
        .cookie(&admin)
        .json(&json!({}))
        .send()
        .await;
    assert_eq!(r.status, 404, "{}", r.text);
    for bad in [
        json!({"scopes": ["root"]}),
        json!({"scopes": []}),
        json!({"expiresAt": "yesterday"}),
        json!({"expiresAt": "2001-01-01T00:00:00Z"}),
        json!({"other": 1}),
    ] {
        let r = s.post(&tokens).cookie(&owner.cookie).json(&bad).send().await;
        assert_eq!(r.status, 400, "{bad}: {}", r.text);
    }

    let r = s.post(&tokens).cookie(&owner.cookie).json(&json!({"scopes": ["scim.users.read"]})).send().await;
    assert_eq!(r.status, 200, "{}", r.text);
    let read_only = r.json();
    let read_token = str_of(&read_only["token"]).to_owned();
    assert!(read_token.starts_with("scim_"), "{read_token}");
    let r = s.post(&tokens).cookie(&admin).json(&json!({"expiresAt": "2100-01-01T00:00:00Z"})).send().await;
    assert_eq!(r.status, 200, "{}", r.text);
    let full = r.json();
    assert_eq!(full["expiresAt"], "2100-01-01T00:00:00.000Z", "{full}");
    let full_token = str_of(&full["token"]).to_owned();

    let listed = s.get(&tokens).cookie(&owner.cookie).send().await;
    assert_eq!(listed.status, 200, "{}", listed.text);
    assert_eq!(listed.json()["tokens"].as_array().unwrap().len(), 2);
    assert!(!listed.text.contains(&read_token[10..]) && !listed.text.contains(&full_token[10..]), "no token listed");

    assert_eq!(send_scim(&s, reqwest::Method::GET, "/Users", &read_token, None).await.status, 200);
    assert_scim_error(
        &send_scim(&s, reqwest::Method::POST, "/Users", &read_token, Some(&user_body("r@own.example"))).await,
        403,
        None,
    );
    assert_eq!(
        send_scim(&s, reqwest::Method::POST, "/Users", &full_token, Some(&user_body("r@own.example"))).await.status,
        201
    );

    for presented in [String::new(), "nope".into(), format!("{}x", &full_token[..full_token.len() - 1])] {
        let r = send_scim(&s, reqwest::Method::GET, "/Users", &presented, None).await;
        assert_scim_error(&r, 401, None);
        assert_eq!(r.header("www-authenticate").as_deref(), Some("Bearer realm=\"SCIM\""));
    }
    let r = s.get(&format!("{SCIM}/Users")).send().await;
    assert_scim_error(&r, 401, None);

    let id = str_of(&read_only["id"]);
    let r = s.delete(&format!("{tokens}/{id}")).cookie(&owner.cookie).send().await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_scim_error(&send_scim(&s, reqwest::Method::GET, "/Users", &read_token, None).await, 401, None);
    assert_eq!(s.delete(&format!("{tokens}/{id}")).cookie(&owner.cookie).send().await.status, 404);
    assert_eq!(send_scim(&s, reqwest::Method::GET, "/Users", &full_token, None).await.status, 200, "the other stays");
    s.stop().await;
}

/// Filters (RFC 7644 §3.4.2.2: `eq co sw pr`, `and or not`, value filters) and paging (`startIndex`, `count`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_filter_and_page() {
    let s = TestServer::start().await;
    let admin = s.admin_session().await;
    let (_, token) = org_and_token(&s, &admin, "filters").await;
    for (name, external, title) in [("ann", "e1", "Engineer"), ("bob", "e2", "Manager"), ("cat", "e3", "Engineer")] {
        let mut body = user_body(&format!("{name}@filters.example"));
        body["externalId"] = json!(external);
        body["title"] = json!(title);
        let r = send_scim(&s, reqwest::Method::POST, "/Users", &token, Some(&body)).await;
        assert_eq!(r.status, 201, "{}", r.text);
    }
    let names = |v: &Value| -> Vec<String> {
        v["Resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|u| str_of(&u["userName"]).split('@').next().unwrap().to_owned())
            .collect()
    };
    let list = |filter: &str| {
        let q: String = url::form_urlencoded::byte_serialize(filter.as_bytes()).collect();
        let path = format!("/Users?filter={q}");
        let (s, token) = (&s, token.clone());
        async move { send_scim(s, reqwest::Method::GET, &path, &token, None).await }
    };
    for (filter, want) in [
        (r#"userName eq "BOB@filters.example""#, vec!["bob"]),
        (r#"externalId eq "e3""#, vec!["cat"]),
        (r#"externalId eq "E3""#, vec![]),
        (r#"title eq "Engineer" and USERNAME eq "Ann@Filters.example""#, vec!["ann"]),
        (r#"userName eq "ann@filters.example" and title eq "Manager""#, vec![]),
        (r#"userName co "NN@""#, vec!["ann"]),
        (r#"userName sw "b""#, vec!["bob"]),
        ("title pr", vec!["ann", "bob", "cat"]),
        (r#"title eq "Engineer" and userName sw "c""#, vec!["cat"]),
        (r#"userName sw "a" or userName sw "b""#, vec!["ann", "bob"]),
        (r#"not (title eq "Engineer")"#, vec!["bob"]),
        (r#"emails[type eq "work" and value ew "ann@filters.example"]"#, vec!["ann"]),
        (r#"emails.value eq "cat@filters.example""#, vec!["cat"]),
    ] {
        let r = list(filter).await;
        assert_eq!(r.status, 200, "{filter}: {}", r.text);
        let page = r.json();
        assert_eq!(names(&page), want, "{filter}");
        assert_eq!(page["totalResults"], want.len(), "{filter}");
    }
    let page = send_scim(&s, reqwest::Method::GET, "/Users?startIndex=2&count=1", &token, None).await.json();
    assert_eq!(
        (page["totalResults"].clone(), page["startIndex"].clone(), page["itemsPerPage"].clone()),
        (json!(3), json!(2), json!(1))
    );
    assert_eq!(names(&page), ["bob"]);
    let page = send_scim(&s, reqwest::Method::GET, "/Users?count=0", &token, None).await.json();
    assert_eq!((page["totalResults"].clone(), page["Resources"].clone()), (json!(3), json!([])));
    // POST /.search (RFC 7644 §3.4.3) answers as the list does.
    let search = json!({"schemas": ["urn:ietf:params:scim:api:messages:2.0:SearchRequest"], "filter": "userName sw \"c\"", "startIndex": 1, "count": 10});
    for path in ["/Users/.search", "/.search"] {
        let r = send_scim(&s, reqwest::Method::POST, path, &token, Some(&search)).await;
        assert_eq!(r.status, 200, "{path}: {}", r.text);
        assert_eq!(names(&r.json()), ["cat"]);
    }
    for bad in ["userName xx \"a\"", "userName eq", "(userName pr", "urn:x:y:userName pr"] {
        assert_scim_error(&list(bad).await, 400, Some("invalidFilter"));
    }
    assert_scim_error(
        &send_scim(&s, reqwest::Method::GET, "/Users?startIndex=x", &token, None).await,
        400,
        Some("invalidValue"),
    );
    s.stop().await;
}

/// Every refusal under the SCIM root is a SCIM Error, unknown paths and wrong methods included; the discovery
/// documents answer without a token and refuse writes with 405.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_are_scim_errors_and_discovery_answers() {
    let s = TestServer::start().await;
    let admin = s.admin_session().await;
    let (_, token) = org_and_token(&s, &admin, "errors").await;
    let spc = s.get(&format!("{SCIM}/ServiceProviderConfig")).send().await;
    assert_eq!(spc.status, 200, "{}", spc.text);
    assert!(spc.content_type().starts_with("application/scim+json"));
    assert_eq!(
        (spc.json()["patch"]["supported"].clone(), spc.json()["filter"]["supported"].clone()),
        (json!(true), json!(true))
    );
    let types = s.get(&format!("{SCIM}/ResourceTypes")).send().await.json();
    assert_eq!(types["Resources"][0]["endpoint"], "/Users", "{types}");
    assert_eq!(s.get(&format!("{SCIM}/ResourceTypes/User")).send().await.status, 200);
    let schema = s.get(&format!("{SCIM}/Schemas/{USER_SCHEMA}")).send().await;
    assert_eq!(schema.status, 200, "{}", schema.text);
    assert_eq!(schema.json()["attributes"][0]["name"], "userName");
    assert_scim_error(&s.get(&format!("{SCIM}/Schemas/urn:nope")).send().await, 404, None);
    for path in ["/ServiceProviderConfig", "/Schemas", "/ResourceTypes"] {
        for method in [reqwest::Method::POST, reqwest::Method::PUT, reqwest::Method::PATCH, reqwest::Method::DELETE] {
            let r =
                s.req(method.clone(), &format!("{SCIM}{path}")).raw(Some("application/scim+json"), "{}").send().await;
            assert_scim_error(&r, 405, None);
        }
    }
    assert_scim_error(&s.get(&format!("{SCIM}/Nothing")).send().await, 404, None);
    assert_scim_error(&send_scim(&s, reqwest::Method::GET, "/Bulk", &token, None).await, 404, None);

    let post = |body: &'static str, content_type: &'static str| {
        scim(&s, reqwest::Method::POST, "/Users", &token).raw(Some(content_type), body).send()
    };
    assert_scim_error(&post("{", "application/scim+json").await, 400, Some("invalidSyntax"));
    assert_scim_error(&post("[]", "application/scim+json").await, 400, Some("invalidSyntax"));
    assert_scim_error(&post("{}", "text/plain").await, 415, None);
    assert_scim_error(&post("{\"userName\": \"x@y.z\"}", "application/json").await, 400, Some("invalidValue"));
    assert_scim_error(
        &post(r#"{"schemas": ["urn:ietf:params:scim:schemas:core:2.0:User"]}"#, "application/json").await,
        400,
        Some("invalidValue"),
    );
    let r = send_scim(&s, reqwest::Method::POST, "/Users", &token, Some(&user_body("dup@errors.example"))).await;
    assert_eq!(r.status, 201, "{}", r.text);
    let id = str_of(&r.json()["id"]).to_owned();
    let r = send_scim(&s, reqwest::Method::POST, "/Users", &token, Some(&user_body("dup@errors.example"))).await;
    assert_scim_error(&r, 409, Some("uniqueness"));
    // The address of an account that exists already is not taken over (never linked by its address alone).
    let taken = s.new_user("taken").await;
    let r = send_scim(&s, reqwest::Method::POST, "/Users", &token, Some(&user_body(&taken.email))).await;
    assert_scim_error(&r, 409, Some("uniqueness"));
    let bad_patch = json!({"schemas": [PATCH_SCHEMA], "Operations": [{"op": "replace", "path": "id", "value": "x"}]});
    let r = send_scim(&s, reqwest::Method::PATCH, &format!("/Users/{id}"), &token, Some(&bad_patch)).await;
    assert_scim_error(&r, 400, Some("mutability"));
    let bad_patch =
        json!({"schemas": [PATCH_SCHEMA], "Operations": [{"op": "replace", "path": "nothing", "value": "x"}]});
    let r = send_scim(&s, reqwest::Method::PATCH, &format!("/Users/{id}"), &token, Some(&bad_patch)).await;
    assert_scim_error(&r, 400, Some("invalidPath"));
    assert_scim_error(&send_scim(&s, reqwest::Method::GET, "/Users/not-a-uuid", &token, None).await, 404, None);
    s.stop().await;
}

/// The requests Okta's SCIM 2.0 provisioning guide shows (its test suite's shapes: a lookup by `userName eq`,
/// a create with `password` and `groups: []`, a PATCH of `active` by a pathless replace, a PUT of the whole
/// user), and Microsoft Entra ID's (a lookup by `userName eq` with `count=1`, a create with the enterprise
/// extension, PATCH with capitalised `op`s, string booleans, value-filtered paths, and the manager).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn okta_and_entra_request_shapes_are_served() {
    let s = TestServer::start().await;
    let admin = s.admin_session().await;
    let (_, token) = org_and_token(&s, &admin, "idp").await;

    // Okta.
    let r = send_scim(
        &s,
        reqwest::Method::GET,
        "/Users?filter=userName%20eq%20%22okta%40idp.example%22&startIndex=1&count=100",
        &token,
        None,
    )
    .await;
    assert_eq!((r.status, r.json()["totalResults"].clone()), (200, json!(0)), "{}", r.text);
    let okta = json!({
        "schemas": [USER_SCHEMA],
        "userName": "okta@idp.example",
        "name": {"givenName": "Okta", "familyName": "User"},
        "emails": [{"primary": true, "value": "okta@idp.example", "type": "work"}],
        "displayName": "Okta User",
        "locale": "en-US",
        "externalId": "00ujl29u0le5T6Aj10h7",
        "groups": [],
        "password": "1mz050nq-LONG-enough",
        "active": true
    });
    let r = send_scim(&s, reqwest::Method::POST, "/Users", &token, Some(&okta)).await;
    assert_eq!(r.status, 201, "{}", r.text);
    let okta_id = str_of(&r.json()["id"]).to_owned();
    let r = send_scim(
        &s,
        reqwest::Method::GET,
        "/Users?filter=userName%20eq%20%22okta%40idp.example%22&startIndex=1&count=100",
        &token,
        None,
    )
    .await;
    assert_eq!(r.json()["Resources"][0]["id"], okta_id.as_str());
    let deactivate = json!({"schemas": [PATCH_SCHEMA], "Operations": [{"op": "replace", "value": {"active": false}}]});
    let r = send_scim(&s, reqwest::Method::PATCH, &format!("/Users/{okta_id}"), &token, Some(&deactivate)).await;
    assert_eq!((r.status, r.json()["active"].clone()), (200, json!(false)), "{}", r.text);
    let mut put = okta.clone();
    put["id"] = json!(okta_id);
    put["active"] = json!(true);
    put["name"]["givenName"] = json!("Okra");
    put["displayName"] = Value::Null;
    put.as_object_mut().unwrap().remove("password");
    let r = send_scim(&s, reqwest::Method::PUT, &format!("/Users/{okta_id}"), &token, Some(&put)).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!((r.json()["active"].clone(), r.json()["name"]["givenName"].clone()), (json!(true), json!("Okra")));
    assert_eq!(s.listed_user(&admin, &okta_id).await["name"], "Okra User");

    // Entra ID.
    let r = send_scim(
        &s,
        reqwest::Method::GET,
        "/Users?filter=userName+eq+%22entra%40idp.example%22&count=1",
        &token,
        None,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let entra = json!({
        "schemas": [USER_SCHEMA, "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User"],
        "externalId": "0a21f0f2-8d2a-4f8e-bf98-7363c4aed4ef",
        "userName": "entra@idp.example",
        "active": true,
        "addresses": [{"primary": true, "type": "work", "formatted": "1 Main St"}],
        "displayName": "Entra User",
        "emails": [{"primary": true, "type": "work", "value": "entra@idp.example"}],
        "meta": {"resourceType": "User"},
        "name": {"familyName": "User", "givenName": "Entra"},
        "phoneNumbers": [{"primary": true, "type": "mobile", "value": "+1 555 0100"}],
        "title": "Engineer",
        "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User": {"department": "R&D", "employeeNumber": "42"}
    });
    let r = send_scim(&s, reqwest::Method::POST, "/Users", &token, Some(&entra)).await;
    assert_eq!(r.status, 201, "{}", r.text);
    let made = r.json();
    let entra_id = str_of(&made["id"]).to_owned();
    assert_eq!(made["urn:ietf:params:scim:schemas:extension:enterprise:2.0:User"]["department"], "R&D");
    let ops = json!({"schemas": [PATCH_SCHEMA], "Operations": [
        {"op": "Replace", "path": "title", "value": "Lead"},
        {"op": "Add", "path": "emails[type eq \"work\"].value", "value": "entra@idp.example"},
        {"op": "Replace", "path": "name.givenName", "value": "Entrada"},
        {"op": "Add", "path": "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User:manager", "value": "2819c223"},
        {"op": "Remove", "path": "phoneNumbers[type eq \"mobile\"]"},
        {"op": "Replace", "path": "active", "value": "False"}
    ]});
    let r = send_scim(&s, reqwest::Method::PATCH, &format!("/Users/{entra_id}"), &token, Some(&ops)).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let after = r.json();
    assert_eq!((after["title"].clone(), after["active"].clone()), (json!("Lead"), json!(false)), "{after}");
    assert_eq!(after["name"]["givenName"], "Entrada");
    assert!(after.get("phoneNumbers").is_none(), "{after}");
    assert_eq!(after["urn:ietf:params:scim:schemas:extension:enterprise:2.0:User"]["manager"], "2819c223");
    assert_eq!(s.listed_user(&admin, &entra_id).await["banned"], true, "deactivated");
    let r = send_scim(&s, reqwest::Method::DELETE, &format!("/Users/{entra_id}"), &token, None).await;
    assert_eq!(r.status, 204, "{}", r.text);
    s.stop().await;
}

const GROUP_SCHEMA: &str = "urn:ietf:params:scim:schemas:core:2.0:Group";

/// Provisions `user_name` with a password (so the test can sign in as the account); its SCIM id.
async fn provisioned(s: &TestServer, token: &str, user_name: &str) -> String {
    let mut body = user_body(user_name);
    body["password"] = json!(PASSWORD);
    let r = send_scim(s, reqwest::Method::POST, "/Users", token, Some(&body)).await;
    assert_eq!(r.status, 201, "{}", r.text);
    str_of(&r.json()["id"]).to_owned()
}

/// The ids of the teams the signed-in user is in, through the organization plugin's own route.
async fn teams_of(s: &TestServer, cookie: &str) -> Vec<(String, String)> {
    let r = s.get("/api/auth/organization/list-user-teams").cookie(cookie).send().await;
    assert_eq!(r.status, 200, "{}", r.text);
    r.json().as_array().unwrap().iter().map(|t| (str_of(&t["id"]).to_owned(), str_of(&t["name"]).to_owned())).collect()
}

fn members_of(group: &Value) -> Vec<String> {
    group["members"].as_array().unwrap().iter().map(|m| str_of(&m["value"]).to_owned()).collect()
}

/// A directory's Group is a team of the token's organization: created with its members (who then see the team
/// through the organization plugin's routes), found by filters, renamed and its members changed by PATCH and PUT,
/// deleted; its name unique in the organization without case; members only the directory's own Users; another
/// organization's token sees none of it; each change audited as the team calls are.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn groups_are_teams_of_the_organization_with_the_directorys_users_as_members() {
    let s = TestServer::start_adjusted(|c| c.organizations.teams = true).await;
    let admin = s.admin_session().await;
    let (org, token) = org_and_token(&s, &admin, "acme").await;
    let (_, other) = org_and_token(&s, &admin, "other").await;
    let ada = provisioned(&s, &token, "ada@acme.example").await;
    let bob = provisioned(&s, &token, "bob@acme.example").await;
    let carl = provisioned(&s, &other, "carl@other.example").await;

    let types = send_scim(&s, reqwest::Method::GET, "/ResourceTypes/Group", &token, None).await;
    assert_eq!(types.status, 200, "{}", types.text);
    assert_eq!(types.json()["endpoint"], "/Groups");
    let schema = send_scim(&s, reqwest::Method::GET, &format!("/Schemas/{GROUP_SCHEMA}"), &token, None).await;
    assert_eq!(schema.status, 200, "{}", schema.text);

    let body = json!({"schemas": [GROUP_SCHEMA], "displayName": "Engineering", "externalId": "eng-1",
        "members": [{"value": ada, "type": "User"}]});
    let r = send_scim(&s, reqwest::Method::POST, "/Groups", &token, Some(&body)).await;
    assert_eq!(r.status, 201, "{}", r.text);
    assert!(r.content_type().starts_with("application/scim+json"));
    let made = r.json();
    let id = str_of(&made["id"]).to_owned();
    assert_eq!(r.header("location").as_deref(), made["meta"]["location"].as_str());
    assert_eq!((made["displayName"].clone(), made["externalId"].clone()), (json!("Engineering"), json!("eng-1")));
    assert_eq!(members_of(&made), [ada.as_str()]);
    assert_eq!(made["members"][0]["type"], "User");
    assert!(str_of(&made["members"][0]["$ref"]).ends_with(&format!("/Users/{ada}")), "{made}");

    // The team, seen by its member through the organization plugin's routes.
    let ada_cookie = s.login("ada@acme.example", PASSWORD).await;
    assert_eq!(teams_of(&s, &ada_cookie).await, [(id.clone(), "Engineering".to_owned())]);
    let r = s.get(&format!("/api/auth/organization/list-team-members?teamId={id}")).cookie(&ada_cookie).send().await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json()[0]["userId"], ada.as_str(), "{}", r.text);
    let bob_cookie = s.login("bob@acme.example", PASSWORD).await;
    assert!(teams_of(&s, &bob_cookie).await.is_empty());

    // The name is the organization's team's, unique without case; members only the directory's own Users.
    let again = json!({"schemas": [GROUP_SCHEMA], "displayName": "ENGINEERING"});
    assert_scim_error(
        &send_scim(&s, reqwest::Method::POST, "/Groups", &token, Some(&again)).await,
        409,
        Some("uniqueness"),
    );
    for stranger in [carl.as_str(), "no-such-user", "00000000-0000-7000-8000-000000000000"] {
        let body = json!({"schemas": [GROUP_SCHEMA], "displayName": "Sales", "members": [{"value": stranger}]});
        let r = send_scim(&s, reqwest::Method::POST, "/Groups", &token, Some(&body)).await;
        assert_scim_error(&r, 400, Some("invalidValue"));
    }
    let no_name = json!({"schemas": [GROUP_SCHEMA], "members": []});
    assert_scim_error(
        &send_scim(&s, reqwest::Method::POST, "/Groups", &token, Some(&no_name)).await,
        400,
        Some("invalidValue"),
    );

    // Filters.
    for (filter, found) in [
        ("displayName eq \"engineering\"", 1),
        ("externalId eq \"eng-1\"", 1),
        ("displayName sw \"Sal\"", 0),
        (&format!("members.value eq \"{ada}\"") as &str, 1),
    ] {
        let path = format!("/Groups?filter={}", urlencode(filter));
        let r = send_scim(&s, reqwest::Method::GET, &path, &token, None).await;
        assert_eq!(r.status, 200, "{filter}: {}", r.text);
        assert_eq!(r.json()["totalResults"], found, "{filter}: {}", r.text);
    }

    // PATCH: Bob joins, the Group is renamed; then Ada leaves by a value filter.
    let patch = json!({"schemas": [PATCH_SCHEMA], "Operations": [
        {"op": "add", "path": "members", "value": [{"value": bob}]},
        {"op": "replace", "path": "displayName", "value": "Platform"},
    ]});
    let r = send_scim(&s, reqwest::Method::PATCH, &format!("/Groups/{id}"), &token, Some(&patch)).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(
        (r.json()["displayName"].clone(), members_of(&r.json())),
        (json!("Platform"), vec![ada.clone(), bob.clone()])
    );
    assert_eq!(teams_of(&s, &bob_cookie).await, [(id.clone(), "Platform".to_owned())]);
    let patch = json!({"schemas": [PATCH_SCHEMA], "Operations": [
        {"op": "remove", "path": format!("members[value eq \"{ada}\"]")},
    ]});
    let r = send_scim(&s, reqwest::Method::PATCH, &format!("/Groups/{id}"), &token, Some(&patch)).await;
    assert_eq!(members_of(&r.json()), [bob.as_str()], "{}", r.text);
    assert!(teams_of(&s, &ada_cookie).await.is_empty());

    // PUT replaces: no members; the externalId gone.
    let put = json!({"schemas": [GROUP_SCHEMA], "displayName": "Platform", "members": []});
    let r = send_scim(&s, reqwest::Method::PUT, &format!("/Groups/{id}"), &token, Some(&put)).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(members_of(&r.json()).is_empty() && r.json().get("externalId").is_none(), "{}", r.text);
    assert!(teams_of(&s, &bob_cookie).await.is_empty());

    // Another organization's token sees nothing of it.
    assert_scim_error(&send_scim(&s, reqwest::Method::GET, &format!("/Groups/{id}"), &other, None).await, 404, None);
    assert_scim_error(&send_scim(&s, reqwest::Method::DELETE, &format!("/Groups/{id}"), &other, None).await, 404, None);
    assert_eq!(send_scim(&s, reqwest::Method::GET, "/Groups", &other, None).await.json()["totalResults"], 0);

    let r = send_scim(&s, reqwest::Method::DELETE, &format!("/Groups/{id}"), &token, None).await;
    assert_eq!(r.status, 204, "{}", r.text);
    assert_scim_error(&send_scim(&s, reqwest::Method::GET, &format!("/Groups/{id}"), &token, None).await, 404, None);
    assert_eq!(send_scim(&s, reqwest::Method::GET, "/Groups", &token, None).await.json()["totalResults"], 0);
    let teams =
        s.get(&format!("/api/auth/organization/list-teams?organizationId={org}")).cookie(&ada_cookie).send().await;
    assert!(!teams.text.contains(&id), "the team is gone: {}", teams.text);

    let actions: Vec<String> = s.get("/api/admin/audit?limit=500").cookie(&admin).send().await.json()["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| str_of(&e["action"]).to_owned())
        .collect();
    for action in ["team.created", "team.updated", "team.member_added", "team.member_removed", "team.deleted"] {
        assert!(actions.iter().any(|a| a == action), "{action} not audited: {actions:?}");
    }
}

/// A token without the Groups scopes is refused them; a server without teams has no Groups (and says so).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn groups_need_their_scopes_and_teams() {
    let s = TestServer::start().await;
    let admin = s.admin_session().await;
    let (_, token) = org_and_token(&s, &admin, "acme").await;
    let body = json!({"schemas": [GROUP_SCHEMA], "displayName": "Engineering"});
    assert_scim_error(&send_scim(&s, reqwest::Method::POST, "/Groups", &token, Some(&body)).await, 501, None);
    let types = send_scim(&s, reqwest::Method::GET, "/ResourceTypes", &token, None).await.json();
    assert!(types["Resources"].as_array().unwrap().iter().all(|t| t["id"] != "Group"), "{types}");

    let s = TestServer::start_adjusted(|c| c.organizations.teams = true).await;
    let admin = s.admin_session().await;
    let org = str_of(&s.new_org(&admin, "Acme", "acme").await["id"]).to_owned();
    let r = s
        .post(&format!("/api/admin/organizations/{org}/scim-tokens"))
        .cookie(&admin)
        .json(&json!({"scopes": ["scim.users.read", "scim.users.write"]}))
        .send()
        .await;
    let users_only = str_of(&r.json()["token"]).to_owned();
    assert_scim_error(&send_scim(&s, reqwest::Method::GET, "/Groups", &users_only, None).await, 403, None);
    assert_scim_error(&send_scim(&s, reqwest::Method::POST, "/Groups", &users_only, Some(&body)).await, 403, None);
}

/// Searches (RFC 7644 §3.4.3) of Users, of Groups and from the root (both types), and `attributes` /
/// `excludedAttributes` (§3.9) on every read and write; what the Schemas answer says a User must have (`emails`,
/// `active`) and what a Group's member carries, and a User made without `emails` reads back with them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn searches_and_projections_follow_rfc_7644() {
    let s = TestServer::start_adjusted(|c| c.organizations.teams = true).await;
    let admin = s.admin_session().await;
    let (org, token) = org_and_token(&s, &admin, "acme").await;
    let ada = provisioned(&s, &token, "ada@acme.example").await;
    // A userName that is an address stands for `emails`, kept as the one primary e-mail.
    let bare = json!({"schemas": [USER_SCHEMA], "userName": "Bo@Acme.example"});
    let r = send_scim(&s, reqwest::Method::POST, "/Users", &token, Some(&bare)).await;
    assert_eq!(r.status, 201, "{}", r.text);
    assert_eq!(r.json()["emails"], json!([{"value": "bo@acme.example", "primary": true}]), "{}", r.text);
    let bo = str_of(&r.json()["id"]).to_owned();
    let body = json!({"schemas": [GROUP_SCHEMA], "displayName": "Eng", "members": [{"value": ada}]});
    let r = send_scim(&s, reqwest::Method::POST, "/Groups?excludedAttributes=members", &token, Some(&body)).await;
    assert_eq!(r.status, 201, "{}", r.text);
    assert!(r.json().get("members").is_none() && r.header("location").is_some(), "{}", r.text);
    let group = str_of(&r.json()["id"]).to_owned();

    let search = |path: &'static str, body: Value| {
        let (s, token) = (&s, token.clone());
        async move { send_scim(s, reqwest::Method::POST, path, &token, Some(&body)).await }
    };
    let ids = |page: &Value| -> Vec<String> {
        page["Resources"].as_array().unwrap().iter().map(|r| str_of(&r["id"]).to_owned()).collect()
    };
    const SEARCH: &str = "urn:ietf:params:scim:api:messages:2.0:SearchRequest";
    let r = search(
        "/Groups/.search",
        json!({"schemas": [SEARCH], "filter": "displayName eq \"eng\"",
        "excludedAttributes": ["members"]}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(ids(&r.json()), [group.as_str()]);
    assert!(r.json()["Resources"][0].get("members").is_none(), "{}", r.text);
    // From the root: Users then Groups; a filter on an attribute of one type matches none of the other.
    let r = search("/.search", json!({"schemas": [SEARCH]})).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(ids(&r.json()), [ada.as_str(), bo.as_str(), group.as_str()]);
    let r = search(
        "/.search",
        json!({"schemas": [SEARCH], "filter": "displayName pr or userName sw \"bo\"",
        "attributes": ["userName", "displayName"], "count": 10}),
    )
    .await;
    assert_eq!(ids(&r.json()), [bo.as_str(), group.as_str()], "{}", r.text);
    assert_eq!(r.json()["Resources"][0], json!({"schemas": [USER_SCHEMA], "id": bo, "userName": "Bo@Acme.example"}));
    let r = search("/.search", json!({"schemas": [SEARCH], "attributes": ["a b"]})).await;
    assert_scim_error(&r, 400, Some("invalidValue"));
    let users_only = s
        .post(&format!("/api/admin/organizations/{org}/scim-tokens"))
        .cookie(&admin)
        .json(&json!({"scopes": ["scim.users.read"]}))
        .send()
        .await;
    let users_only = str_of(&users_only.json()["token"]).to_owned();
    let r = send_scim(&s, reqwest::Method::POST, "/.search", &users_only, Some(&json!({"schemas": [SEARCH]}))).await;
    assert_eq!(ids(&r.json()), [ada.as_str(), bo.as_str()], "only what the token may read: {}", r.text);
    assert_scim_error(
        &send_scim(&s, reqwest::Method::POST, "/Groups/.search", &users_only, Some(&json!({"schemas": [SEARCH]})))
            .await,
        403,
        None,
    );

    // attributes and excludedAttributes on reads and writes.
    let r = send_scim(&s, reqwest::Method::GET, &format!("/Users/{ada}?attributes=userName"), &token, None).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json(), json!({"schemas": [USER_SCHEMA], "id": ada, "userName": "ada@acme.example"}));
    assert!(r.header("content-location").is_some_and(|l| l.ends_with(&format!("/Users/{ada}"))));
    let path = format!("/Users/{ada}?excludedAttributes=name,emails.type");
    let r = send_scim(&s, reqwest::Method::GET, &path, &token, None).await;
    assert!(r.json().get("name").is_none(), "{}", r.text);
    assert_eq!(r.json()["emails"], json!([{"value": "ada@acme.example", "primary": true}]), "{}", r.text);
    let path = "/Users?filter=userName%20sw%20%22ada%22&attributes=emails.value,name.givenName";
    let r = send_scim(&s, reqwest::Method::GET, path, &token, None).await;
    let found = &r.json()["Resources"][0];
    assert_eq!(
        (found["emails"].clone(), found["name"].clone()),
        (json!([{"value": "ada@acme.example"}]), json!({"givenName": "Ada"}))
    );
    let patch = json!({"schemas": [PATCH_SCHEMA], "Operations": [{"op": "add",
        "path": "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User", "value": {"department": "R&D"}}]});
    let path = format!("/Users/{ada}?attributes=urn:ietf:params:scim:schemas:extension:enterprise:2.0:User");
    let r = send_scim(&s, reqwest::Method::PATCH, &path, &token, Some(&patch)).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json()["urn:ietf:params:scim:schemas:extension:enterprise:2.0:User"], json!({"department": "R&D"}));
    assert!(r.json().get("userName").is_none(), "{}", r.text);
    let r =
        send_scim(&s, reqwest::Method::GET, &format!("/Groups/{group}?attributes=members.value"), &token, None).await;
    assert_eq!(r.json()["members"], json!([{"value": ada}]), "{}", r.text);
    assert_scim_error(
        &send_scim(&s, reqwest::Method::GET, "/Users?attributes=urn:x:y", &token, None).await,
        400,
        Some("invalidValue"),
    );

    // The Schemas answer: what a User must carry, and a member's sub-attributes (RFC 7643 §8.7.1).
    let schema = s.get(&format!("{SCIM}/Schemas/{USER_SCHEMA}")).send().await.json();
    let attribute = |schema: &Value, name: &str| {
        schema["attributes"].as_array().unwrap().iter().find(|a| a["name"] == name).cloned().unwrap()
    };
    assert_eq!(attribute(&schema, "emails")["required"], true);
    assert_eq!(attribute(&schema, "emails")["subAttributes"][0]["required"], true);
    assert_eq!(attribute(&schema, "active")["required"], true);
    let schema = s.get(&format!("{SCIM}/Schemas/{GROUP_SCHEMA}")).send().await.json();
    let subs: Vec<Value> =
        attribute(&schema, "members")["subAttributes"].as_array().unwrap().iter().map(|a| a["name"].clone()).collect();
    assert_eq!(subs, [json!("value"), json!("$ref"), json!("type")]);
    s.stop().await;
}

/// The Group requests Okta's Group Push and Microsoft Entra ID's provisioning documentation show: Okta's lookups
/// with `excludedAttributes=members`, a rename by a pathless `replace` that restates the Group's `id`, members
/// added with their `display` and removed by a value filter; Entra ID's lookup by `displayName` with
/// `excludedAttributes=members`, `Add`/`Remove` of `members` with a `name` on the operation and a `displayName`
/// on each member, its membership check `id eq … and members eq …`, and a `Replace` of `displayName`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn okta_and_entra_group_requests_are_served() {
    let s = TestServer::start_adjusted(|c| c.organizations.teams = true).await;
    let admin = s.admin_session().await;
    let (_, token) = org_and_token(&s, &admin, "idp").await;
    let ada = provisioned(&s, &token, "ada@idp.example").await;
    let bob = provisioned(&s, &token, "bob@idp.example").await;
    let patch = |id: String, ops: Value| {
        let (s, token) = (&s, token.clone());
        async move {
            let body = json!({"schemas": [PATCH_SCHEMA], "Operations": ops});
            send_scim(s, reqwest::Method::PATCH, &format!("/Groups/{id}"), &token, Some(&body)).await
        }
    };

    // Okta.
    let r =
        send_scim(&s, reqwest::Method::GET, "/Groups?excludedAttributes=members&startIndex=1&count=100", &token, None)
            .await;
    assert_eq!((r.status, r.json()["totalResults"].clone()), (200, json!(0)), "{}", r.text);
    let body = json!({"schemas": [GROUP_SCHEMA], "displayName": "Test SCIMv2", "members": []});
    let r = send_scim(&s, reqwest::Method::POST, "/Groups", &token, Some(&body)).await;
    assert_eq!(r.status, 201, "{}", r.text);
    let okta = str_of(&r.json()["id"]).to_owned();
    let r =
        send_scim(&s, reqwest::Method::GET, &format!("/Groups/{okta}?excludedAttributes=members"), &token, None).await;
    assert_eq!((r.status, r.json().get("members").is_none()), (200, true), "{}", r.text);
    let r = patch(okta.clone(), json!([{"op": "replace", "value": {"id": okta, "displayName": "Okta Renamed"}}])).await;
    assert_eq!((r.status, r.json()["displayName"].clone()), (200, json!("Okta Renamed")), "{}", r.text);
    let r = patch(okta.clone(), json!([{"op": "replace", "value": {"id": bob, "displayName": "x"}}])).await;
    assert_scim_error(&r, 400, Some("mutability"));
    let r = patch(
        okta.clone(),
        json!([{"op": "add", "path": "members",
        "value": [{"value": ada, "display": "ada@idp.example"}, {"value": bob, "display": "bob@idp.example"}]}]),
    )
    .await;
    assert_eq!(members_of(&r.json()), [ada.as_str(), bob.as_str()], "{}", r.text);
    let r = patch(okta.clone(), json!([{"op": "remove", "path": format!("members[value eq \"{ada}\"]")}])).await;
    assert_eq!(members_of(&r.json()), [bob.as_str()], "{}", r.text);
    let r = send_scim(&s, reqwest::Method::DELETE, &format!("/Groups/{okta}"), &token, None).await;
    assert_eq!(r.status, 204, "{}", r.text);

    // Entra ID.
    let lookup = format!("/Groups?excludedAttributes=members&filter={}", urlencode("displayName eq \"Sales\""));
    let r = send_scim(&s, reqwest::Method::GET, &lookup, &token, None).await;
    assert_eq!((r.status, r.json()["totalResults"].clone()), (200, json!(0)), "{}", r.text);
    let body = json!({"externalId": "8aa1a0c0-c4c3-4bc0-b4a5-2ef676900159", "displayName": "Sales", "members": [],
        "meta": {"resourceType": "Group"}, "schemas": [GROUP_SCHEMA]});
    let r = send_scim(&s, reqwest::Method::POST, "/Groups", &token, Some(&body)).await;
    assert_eq!(r.status, 201, "{}", r.text);
    let entra = str_of(&r.json()["id"]).to_owned();
    let r = send_scim(&s, reqwest::Method::GET, &lookup, &token, None).await;
    assert_eq!(r.json()["totalResults"], 1, "{}", r.text);
    let r = patch(
        entra.clone(),
        json!([{"name": "addMember", "op": "Add", "path": "members",
        "value": [{"displayName": "Bob", "value": bob}]}]),
    )
    .await;
    assert_eq!((r.status, members_of(&r.json())), (200, vec![bob.clone()]), "{}", r.text);
    let is_member = |user: &str| {
        let filter = urlencode(&format!("id eq \"{entra}\" and members eq \"{user}\""));
        let path = format!("/Groups?filter={filter}&excludedAttributes=members");
        let (s, token) = (&s, token.clone());
        async move { send_scim(s, reqwest::Method::GET, &path, &token, None).await.json()["totalResults"].clone() }
    };
    assert_eq!(is_member(&bob).await, 1);
    assert_eq!(is_member(&ada).await, 0);
    let r = patch(
        entra.clone(),
        json!([{"name": "removeMember", "op": "Remove", "path": "members",
        "value": [{"displayName": "Bob", "value": bob}]}]),
    )
    .await;
    assert_eq!((r.status, members_of(&r.json()).len()), (200, 0), "{}", r.text);
    assert_eq!(is_member(&bob).await, 0);
    let r = patch(entra.clone(), json!([{"op": "Replace", "path": "displayName", "value": "Sales EMEA"}])).await;
    assert_eq!((r.status, r.json()["displayName"].clone()), (200, json!("Sales EMEA")), "{}", r.text);
    let r = send_scim(&s, reqwest::Method::DELETE, &format!("/Groups/{entra}"), &token, None).await;
    assert_eq!(r.status, 204, "{}", r.text);
    s.stop().await;
}

/// The Python that has scim2-tester: the repository's `.venv` (where `./test` installs tests/requirements.txt), else
/// `python3` on PATH. Nothing is installed from here: a missing package fails at once, saying how to get it.
fn python_with_scim2_tester() -> std::ffi::OsString {
    let venv = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python3");
    let python: std::ffi::OsString = if venv.exists() { venv.into_os_string() } else { "python3".into() };
    let present = std::process::Command::new(&python).args(["-c", "import scim2_tester, httpx2"]).output();
    assert!(
        present.is_ok_and(|o| o.status.success()),
        "scim2-tester is not installed: run ./test once (it installs tests/requirements.txt into .venv), or \
         `python3 -m pip install -r tests/requirements.txt`"
    );
    python
}

/// scim2-tester (PyPI), which checks a SCIM server against RFC 7643 and 7644 (discovery documents, then create,
/// read, list, search, replace, PATCH add/replace/remove and delete of every attribute of Users and Groups, with
/// `attributes`/`excludedAttributes`), run against the real server through tests/api/scim_tester.py: no check
/// may end in ERROR or CRITICAL (the plugin itself fails 15).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scim2_tester_finds_no_failure() {
    let python = python_with_scim2_tester();
    let s = TestServer::start_adjusted(|c| c.organizations.teams = true).await;
    let admin = s.admin_session().await;
    let (_, token) = org_and_token(&s, &admin, "tester").await;
    let root = format!("http://{}{SCIM}", s.addr);
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/api/scim_tester.py");
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(python).arg(script).arg(root).arg(token).output().expect("python3 scim_tester.py")
    })
    .await
    .unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    let summary = report.lines().last().unwrap_or_default().to_owned();
    assert!(
        out.status.success(),
        "scim2-tester failed ({}):\n{report}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    // Each resource type was exercised, not only the discovery documents.
    for resource in ["[User]", "[Group]"] {
        assert!(
            report.lines().any(|l| l.starts_with("SUCCESS") && l.contains(resource)),
            "no {resource} check: {report}"
        );
    }
    assert!(summary.starts_with("scim2-tester: ") && summary.contains("SUCCESS"), "{summary}");
    s.stop().await;
}

fn urlencode(text: &str) -> String {
    url::form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

/// `password` on PUT and PATCH sets the account's password, checked as every new password is (a listed, short,
/// context-word or non-string one is 400 `invalidValue` and changes nothing); it is never returned; a new one ends
/// every session of the account, as a password an administrator sets does, and is audited without the password.
/// The same password sent again (a directory pushing it with each profile update) changes nothing and ends no
/// session. A service administrator's password is not the directory's to set (403). Before: PUT and PATCH
/// ignored `password`, so the old one kept working and the new one did not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_directory_sets_the_password_on_put_and_patch_under_the_policy_and_ends_the_sessions() {
    let s = TestServer::start().await;
    let admin = s.admin_session().await;
    let (_, token) = org_and_token(&s, &admin, "acme").await;
    let id = provisioned(&s, &token, "ada@acme.example").await;
    let phone = s.login("ada@acme.example", PASSWORD).await;
    let laptop = s.login("ada@acme.example", PASSWORD).await;
    let path = format!("/Users/{id}");
    let patch = |value: Value| json!({"schemas": [PATCH_SCHEMA], "Operations": [{"op": "replace", "path": "password", "value": value}]});

    // Refused: on the breached list, too short, the account's own name, not a string.
    for bad in [json!("passwordpassword"), json!("short1"), json!("ada lovelace forever"), json!(42)] {
        let r = send_scim(&s, reqwest::Method::PATCH, &path, &token, Some(&patch(bad.clone()))).await;
        assert_scim_error(&r, 400, Some("invalidValue"));
        assert!(!r.text.contains("passwordpassword"), "the refusal does not echo the password: {}", r.text);
    }
    let mut put = user_body("ada@acme.example");
    put["password"] = json!("qwerty123456789");
    assert_scim_error(&send_scim(&s, reqwest::Method::PUT, &path, &token, Some(&put)).await, 400, Some("invalidValue"));
    assert_ne!(s.session(&phone).await, Value::Null, "a refused password ends nothing");
    s.login("ada@acme.example", PASSWORD).await;

    // PATCH (Entra's pathless form): set, never returned, every session ended, the old password refused.
    let new = "a new and quite unguessable phrase";
    let body = json!({"schemas": [PATCH_SCHEMA], "Operations": [{"op": "Replace", "value": {"password": new}}]});
    let r = send_scim(&s, reqwest::Method::PATCH, &path, &token, Some(&body)).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(r.json().get("password").is_none() && !r.text.contains(new), "never returned: {}", r.text);
    assert_eq!(s.session(&phone).await, Value::Null, "the new password ended the session");
    assert_eq!(s.session(&laptop).await, Value::Null, "and every other");
    let r = s.sign_in_body(&json!({"email": "ada@acme.example", "password": PASSWORD})).await;
    assert_eq!(r.status, 401, "the old password: {}", r.text);
    let signed_in = s.login("ada@acme.example", new).await;
    let got = send_scim(&s, reqwest::Method::GET, &path, &token, None).await;
    assert!(got.json().get("password").is_none(), "{}", got.text);

    // PUT (Okta's form, with the whole user): the same password again changes nothing; another one is set.
    put["password"] = json!(new);
    let r = send_scim(&s, reqwest::Method::PUT, &path, &token, Some(&put)).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_ne!(s.session(&signed_in).await, Value::Null, "the same password again ends no session");
    let newer = "another phrase for the loom";
    put["password"] = json!(newer);
    let r = send_scim(&s, reqwest::Method::PUT, &path, &token, Some(&put)).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(r.json().get("password").is_none());
    assert_eq!(s.session(&signed_in).await, Value::Null);
    s.login("ada@acme.example", newer).await;

    // Audited twice (the two changes), naming SCIM, never the password.
    let audit = s.get("/api/admin/audit?action=user.password_set").cookie(&admin).send().await;
    let entries = audit.json()["entries"].as_array().unwrap().clone();
    assert_eq!(entries.len(), 2, "{}", audit.text);
    assert!(entries.iter().all(|e| str_of(&e["detail"]).contains("over SCIM")), "{}", audit.text);
    assert!(!audit.text.contains(new) && !audit.text.contains(newer), "{}", audit.text);

    // An account the service's administrators made an administrator: its password is not the directory's.
    let r =
        s.post("/api/auth/admin/set-role").cookie(&admin).json(&json!({"userId": id, "role": "admin"})).send().await;
    assert_eq!(r.status, 200, "{}", r.text);
    let r = send_scim(&s, reqwest::Method::PATCH, &path, &token, Some(&patch(json!("yet another long phrase")))).await;
    assert_scim_error(&r, 403, None);
    s.login("ada@acme.example", newer).await;
    s.stop().await;
}
