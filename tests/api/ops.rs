//! Operations on a data directory through the binary: backup and restore, export and import.

use serde_json::json;

use super::harness::*;

/// Fills the embedded store of `data` (these commands work on the embedded file; one node, in two-node runs too).
async fn populate(data: &std::path::Path) -> (Vec<serde_json::Value>, TestUser) {
    let s = TestServer::start_embedded(test_config(data)).await;
    let admin = s.admin_session().await;
    let u = s.new_user("alice").await;
    let org = s.new_org(&admin, "St Mary", "st-mary").await;
    s.patch_ok(&admin, &json!({"userId": u.id, "role": "qa_manager", "organizationId": org["id"]})).await;
    let users = s.users(&admin).await;
    s.stop().await;
    (users, u)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restored_backup_serves_the_same_users_and_sessions() {
    let root = tempfile::tempdir().unwrap();
    let data = root.path().join("data");
    let (before, alice) = populate(&data).await;
    let (status, _, err) = run_binary(root.path(), &["backup", "--out", "backup.redb"], &[], "");
    assert!(status.success(), "backup: {err}");
    std::fs::remove_dir_all(&data).unwrap();
    let (status, _, err) = run_binary(root.path(), &["restore", "backup.redb"], &[], "");
    assert!(status.success(), "restore: {err}");
    assert!(err.contains("2 users, 1 organizations"), "{err}");

    // The embedded store's own behaviour (its file on disk): one node on it, also in two-node runs.
    let s = TestServer::start_embedded(test_config(&data)).await;
    let admin = s.admin_session().await;
    assert_eq!(s.users(&admin).await, before);
    assert_eq!(s.orgs(&admin).await.len(), 1);
    assert!(s.session(&alice.cookie).await.is_object(), "sessions are part of the backup");
    s.login(&alice.email, PASSWORD).await;
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn export_then_import_into_a_fresh_directory_keeps_accounts_and_memberships() {
    let root = tempfile::tempdir().unwrap();
    let (before, alice) = populate(&root.path().join("data")).await;
    let (status, _, err) = run_binary(root.path(), &["export", "--out", "all.jsonl"], &[], "");
    assert!(status.success(), "export: {err}");
    let text = std::fs::read_to_string(root.path().join("all.jsonl")).unwrap();
    assert!(!text.contains(&alice.cookie), "an export carries no session token");

    let fresh = root.path().join("fresh");
    let env = [("SERVICE_AUTH_DATA_DIR", fresh.to_str().unwrap())];
    let (status, _, err) = run_binary(root.path(), &["import", "all.jsonl"], &env, "");
    assert!(status.success(), "import: {err}");
    let (status, _, err) = run_binary(root.path(), &["import", "all.jsonl"], &env, "");
    assert!(!status.success() && err.contains("duplicate"), "a second import must be refused: {err}");

    let s = TestServer::start_embedded(test_config(&fresh)).await;
    let admin = s.admin_session().await;
    assert_eq!(s.users(&admin).await, before, "same accounts, roles, memberships and creation times");
    assert_eq!(s.get_session_resp(Some(&alice.cookie)).await.json(), serde_json::Value::Null, "sessions stay behind");
    s.login(&alice.email, PASSWORD).await;
    s.stop().await;
}

/// An organization's single sign-on and SCIM survive an export and an import into a fresh directory (issue #48):
/// its SAML provider with its verified domain, the require-SSO policy, the SCIM token (its hash: the token the
/// directory holds keeps working) and the directory's Users. Before, the export carried none of them, so the
/// imported organization had no provider, no policy and a directory whose token was refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_export_carries_sso_and_scim_so_the_imported_directory_works_as_before() {
    let root = tempfile::tempdir().unwrap();
    let data = root.path().join("data");
    let s = TestServer::start_embedded(test_config(&data)).await;
    let admin = s.admin_session().await;
    let org = str_of(&s.new_org(&admin, "Acme", "acme").await["id"]).to_owned();
    let cert = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/saml/idp-cert.pem")).unwrap();
    let registration = json!({
        "providerId": "acme-saml", "issuer": format!("http://{}/api/auth/sso/saml2/sp/metadata?providerId=acme-saml", s.addr),
        "domain": "acme.test", "organizationId": org,
        "samlConfig": {"entryPoint": "https://idp.acme.test/sso", "cert": cert, "idpMetadata": {"entityID": "https://idp.acme.test"}},
    });
    let r = s.post("/api/auth/sso/register").cookie(&admin).json(&registration).send().await;
    assert_eq!(r.status, 200, "{}", r.text);
    let r = s.post("/api/admin/sso/providers/acme-saml/verify-domain").cookie(&admin).send().await;
    assert_eq!(r.status, 200, "{}", r.text);
    let policy = format!("/api/admin/organizations/{org}/sso-policy");
    let r = s.req(reqwest::Method::PUT, &policy).cookie(&admin).json(&json!({"requireSso": true})).send().await;
    assert_eq!(r.status, 200, "{}", r.text);
    let r = s.post(&format!("/api/admin/organizations/{org}/scim-tokens")).cookie(&admin).json(&json!({})).send().await;
    assert_eq!(r.status, 200, "{}", r.text);
    let token = str_of(&r.json()["token"]).to_owned();
    let user = json!({"schemas": ["urn:ietf:params:scim:schemas:core:2.0:User"], "userName": "ada@acme.test",
        "externalId": "00u1", "name": {"givenName": "Ada", "familyName": "Lovelace"}});
    let scim = |s: &TestServer, method: reqwest::Method, path: &str| {
        s.req(method, &format!("/api/auth/scim/v2{path}")).header("authorization", &format!("Bearer {token}"))
    };
    let r = scim(&s, reqwest::Method::POST, "/Users").json(&user).send().await;
    assert_eq!(r.status, 201, "{}", r.text);
    let ada = str_of(&r.json()["id"]).to_owned();
    let before = s.get("/api/auth/sso/providers").cookie(&admin).send().await.json();
    s.stop().await;

    let (status, _, err) = run_binary(root.path(), &["export", "--out", "all.jsonl"], &[], "");
    assert!(status.success(), "export: {err}");
    assert!(err.contains("1 SSO providers, 1 SCIM tokens, 1 SCIM users"), "{err}");
    let text = std::fs::read_to_string(root.path().join("all.jsonl")).unwrap();
    assert!(!text.contains(token.rsplit('_').next().unwrap()), "the export holds the token's hash, not the token");
    let fresh = root.path().join("fresh");
    let env = [("SERVICE_AUTH_DATA_DIR", fresh.to_str().unwrap())];
    let (status, _, err) = run_binary(root.path(), &["import", "all.jsonl"], &env, "");
    assert!(status.success(), "import: {err}");
    assert!(err.contains("1 SSO providers, 1 SCIM tokens, 1 SCIM users"), "{err}");

    let s = TestServer::start_embedded(test_config(&fresh)).await;
    let admin = s.admin_session().await;
    let after = s.get("/api/auth/sso/providers").cookie(&admin).send().await.json();
    // The same provider, verified, with the same certificate (its metadata URL names the new server's address).
    let same = |v: &serde_json::Value| {
        let p = &v["providers"][0];
        (
            p["providerId"].clone(),
            p["type"].clone(),
            p["domain"].clone(),
            p["domainVerified"].clone(),
            p["samlConfig"].clone(),
        )
    };
    assert_eq!(same(&after), same(&before), "{after}");
    assert_eq!(after["providers"].as_array().unwrap().len(), 1);
    let r = s.get(&policy).cookie(&admin).send().await;
    assert_eq!(r.json(), json!({"domains": ["acme.test"], "organizationId": org, "requireSso": true}), "{}", r.text);
    // The policy is in force: the domain's address signs in only through the provider, which starts the SAML flow.
    let r = s.sign_in_body(&json!({"email": "ada@acme.test", "password": PASSWORD})).await;
    assert_auth_error(&r, 403, "SSO_REQUIRED");
    let r = s.post("/api/auth/sign-in/sso").json(&json!({"providerId": "acme-saml", "callbackURL": "/"})).send().await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(str_of(&r.json()["url"]).starts_with("https://idp.acme.test/sso?SAMLRequest="), "{}", r.text);
    // The directory's token works, and finds its User by the index its lookups read.
    let r = scim(&s, reqwest::Method::GET, "/Users?filter=userName%20eq%20%22ada%40acme.test%22").send().await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!((r.json()["totalResults"].clone(), r.json()["Resources"][0]["id"].clone()), (json!(1), json!(ada)));
    let r = scim(&s, reqwest::Method::GET, "/Users?filter=externalId%20eq%20%2200u1%22").send().await;
    assert_eq!(r.json()["totalResults"], 1, "{}", r.text);
    s.stop().await;
}

/// An OpenID Connect provider's client secret moves sealed (issue #48): imported where the exporting directory's
/// `data.key` was copied, the provider starts a sign-in at once; imported without it, the start is refused (503,
/// the secret does not open) until the owner sets the secret again with `sso/update-provider`, after which it starts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exported_oidc_provider_signs_in_where_the_data_key_went_and_after_its_secret_is_set_again_elsewhere() {
    let mut idp = super::oauth::Idp::start();
    let issuer = idp.issuer.clone();
    idp.configure(json!({"clients": [{"client_id": "acme-sso", "client_secret": "s3cret-of-the-idp",
        "redirect_uris": ["http://127.0.0.1:9/api/auth/sso/callback/acme-oidc"]}]}));
    let config = |dir: &std::path::Path| {
        let mut c = test_config(dir);
        c.trusted_origins = vec![issuer.clone()];
        c
    };
    let root = tempfile::tempdir().unwrap();
    let data = root.path().join("data");
    let s = TestServer::start_embedded(config(&data)).await;
    let admin = s.admin_session().await;
    let org = str_of(&s.new_org(&admin, "Acme", "acme").await["id"]).to_owned();
    let registration = json!({"providerId": "acme-oidc", "issuer": issuer, "domain": "acme.test", "organizationId": org,
        "oidcConfig": {"clientId": "acme-sso", "clientSecret": "s3cret-of-the-idp"}});
    let r = s.post("/api/auth/sso/register").cookie(&admin).json(&registration).send().await;
    assert_eq!(r.status, 200, "{}", r.text);
    let r = s.post("/api/admin/sso/providers/acme-oidc/verify-domain").cookie(&admin).send().await;
    assert_eq!(r.status, 200, "{}", r.text);
    s.stop().await;
    let (status, _, err) = run_binary(root.path(), &["export", "--out", "all.jsonl"], &[], "");
    assert!(status.success(), "export: {err}");
    assert!(
        !std::fs::read_to_string(root.path().join("all.jsonl")).unwrap().contains("s3cret"),
        "sealed, not in the clear"
    );
    let start = |s: &TestServer| {
        s.post("/api/auth/sign-in/sso").json(&json!({"providerId": "acme-oidc", "callbackURL": "/"})).send()
    };

    // Where the data key went with the file.
    let with_key = root.path().join("with-key");
    std::fs::create_dir(&with_key).unwrap();
    std::fs::copy(data.join("data.key"), with_key.join("data.key")).unwrap();
    let env = [("SERVICE_AUTH_DATA_DIR", with_key.to_str().unwrap())];
    let (status, _, err) = run_binary(root.path(), &["import", "all.jsonl"], &env, "");
    assert!(status.success() && err.contains("1 OpenID Connect client secret"), "import: {err}");
    let s = TestServer::start_embedded(config(&with_key)).await;
    let r = start(&s).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(str_of(&r.json()["url"]).starts_with(&issuer), "{}", r.text);
    s.stop().await;

    // Where it did not: refused until the secret is set again.
    let elsewhere = root.path().join("elsewhere");
    let env = [("SERVICE_AUTH_DATA_DIR", elsewhere.to_str().unwrap())];
    let (status, _, err) = run_binary(root.path(), &["import", "all.jsonl"], &env, "");
    assert!(status.success(), "import: {err}");
    let s = TestServer::start_embedded(config(&elsewhere)).await;
    assert_eq!(start(&s).await.status, 503, "a secret sealed with another key does not open");
    let admin = s.admin_session().await;
    let change = json!({"providerId": "acme-oidc", "oidcConfig": {"clientSecret": "s3cret-of-the-idp"}});
    let r = s.post("/api/auth/sso/update-provider").cookie(&admin).json(&change).send().await;
    assert_eq!(r.status, 200, "{}", r.text);
    let r = start(&s).await;
    assert_eq!(r.status, 200, "{}", r.text);
    s.stop().await;
}

/// `backup` while a server runs: the server writes the snapshot from one read transaction and keeps serving
/// (sign-ups go on during it); `restore` (server stopped) keeps the store it replaces aside and names it, so a
/// restore of the wrong file is undone by restoring that one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backup_of_a_running_server_then_restore_keeps_the_replaced_store_aside() {
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir(root.path().join("backups")).unwrap();
    let server = ChildServer::spawn(root.path(), BOOTSTRAP_ENV).await;
    assert_eq!(server.sign_up("Alice", "alice@example.com", PASSWORD).await.0, 200);

    // Sign-ins (each a committed session) all through the backup: the server is not stopped or paused for it.
    let during = {
        let client = server.client.clone();
        tokio::spawn(async move {
            for _ in 0..15 {
                let (status, _, _) = client.sign_in("alice@example.com", PASSWORD).await;
                assert_eq!(status, 200, "a sign-in during the backup");
            }
        })
    };
    let dir = root.path().to_path_buf();
    let (status, _, err) =
        tokio::task::spawn_blocking(move || run_binary(&dir, &["backup", "--out", "backups/live.redb"], &[], ""))
            .await
            .unwrap();
    assert!(status.success(), "backup: {err}");
    assert!(err.contains("by the running server") && err.contains(&format!("PID {}", server.child.id())), "{err}");
    during.await.unwrap();
    assert_eq!(server.sign_up("Bob", "bob@example.com", PASSWORD).await.0, 200, "after the backup");
    let control: Vec<_> =
        std::fs::read_dir(root.path().join("data/control")).unwrap().flatten().map(|e| e.file_name()).collect();
    assert_eq!(control, ["socket"], "no staged snapshot is left behind");
    let mode = std::fs::metadata(root.path().join("backups/live.redb")).unwrap();
    assert_eq!(std::os::unix::fs::PermissionsExt::mode(&mode.permissions()) & 0o777, 0o600);
    assert!(server.terminate().success());

    // Restore (the store holds Bob; the backup does not): the replaced store is kept and named.
    let (status, _, err) = run_binary(root.path(), &["restore", "backups/live.redb"], &[], "");
    assert!(status.success(), "restore: {err}");
    let kept = err.split("kept as ").nth(1).and_then(|s| s.split(' ').next()).expect("names the kept store");
    assert!(kept.contains("service-auth.redb.replaced-"), "{err}");
    let kept = std::path::PathBuf::from(kept);
    assert!(kept.exists(), "{}", kept.display());

    let server = ChildServer::spawn(root.path(), &[]).await;
    assert_eq!(server.sign_in("alice@example.com", PASSWORD).await.0, 200, "in the backup");
    assert_eq!(server.sign_in("bob@example.com", PASSWORD).await.0, 401, "after the backup");
    assert!(server.terminate().success());
    // Undo: the kept store back; Bob is there again.
    let (status, _, err) = run_binary(root.path(), &["restore", kept.to_str().unwrap()], &[], "");
    assert!(status.success(), "restore of the kept store: {err}");
    let server = ChildServer::spawn(root.path(), &[]).await;
    assert_eq!(server.sign_in("bob@example.com", PASSWORD).await.0, 200);
    assert!(server.terminate().success());
}
