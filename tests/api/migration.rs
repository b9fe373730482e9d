//! Moving from better-auth: an imported account signs in with its old password, which is then re-hashed.
//! (The end-to-end run with a real better-auth server is `tests/migration/`.)

use std::path::Path;
use std::time::Instant;

use serde_json::Value;

use super::harness::*;

/// Made by better-auth 1.7.25 (`hashPassword`) for this password.
const HASH: &str = include_str!("../migration/fixtures/better-auth-hash.txt");
const OLD_PASSWORD: &str = "correct horse battery";

/// A better-auth SQLite file (the columns the importer reads) with one user per e-mail, all with [`HASH`].
fn better_auth_file(path: &Path, emails: &[&str]) {
    better_auth_file_with(path, emails, HASH.trim());
}

/// The same with `hash` for every user.
fn better_auth_file_with(path: &Path, emails: &[&str], hash: &str) {
    let db = rusqlite::Connection::open(path).unwrap();
    db.execute_batch(
        r#"CREATE TABLE "user" ("id" text PRIMARY KEY, "name" text, "email" text, "emailVerified" integer,
             "image" text, "createdAt" date, "updatedAt" date, "role" text, "banned" integer, "banReason" text,
             "banExpires" date);
           CREATE TABLE "account" ("id" text PRIMARY KEY, "accountId" text, "providerId" text, "userId" text,
             "password" text, "createdAt" date, "updatedAt" date);"#,
    )
    .unwrap();
    for (n, email) in emails.iter().enumerate() {
        let id = format!("ba{n:030}");
        db.execute(
            r#"INSERT INTO "user" VALUES (?1, 'Old User', ?2, 1, NULL, '2025-05-01T10:00:00.000Z',
               '2025-05-01T10:00:00.000Z', 'user', 0, NULL, NULL)"#,
            rusqlite::params![id, email],
        )
        .unwrap();
        db.execute(
            r#"INSERT INTO "account" VALUES (?1, ?2, 'credential', ?2, ?3, '2025-05-01T10:00:00.000Z',
               '2025-05-01T10:00:00.000Z')"#,
            rusqlite::params![format!("acc{n}"), id, hash],
        )
        .unwrap();
    }
}

fn import(root: &Path, emails: &[&str]) {
    better_auth_file(&root.join("ba.db"), emails);
    let (status, _, err) = run_binary(root, &["import-better-auth", "--sqlite", "ba.db"], &[], "");
    assert!(status.success(), "import: {err}");
}

/// The stored hash of `email`, read with `export` (server stopped).
fn stored_hash(root: &Path, email: &str) -> String {
    let (status, out, err) = run_binary(root, &["export"], &[], "");
    assert!(status.success(), "export: {err}");
    out.lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|l| l["email"] == email)
        .map(|l| l["password_hash"].as_str().unwrap().to_owned())
        .unwrap()
}

/// The `service_auth_legacy_password_hashes` gauge of a scrape of the metrics listener.
async fn legacy_gauge(addr: std::net::SocketAddr) -> f64 {
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let text = client.get(format!("http://{addr}/metrics")).send().await.unwrap().text().await.unwrap();
    let line = text.lines().find(|l| l.starts_with("service_auth_legacy_password_hashes ")).expect(&text);
    line.rsplit_once(' ').unwrap().1.parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_imported_user_signs_in_with_the_old_password_and_the_hash_becomes_argon2id() {
    let root = tempfile::tempdir().unwrap();
    let data = root.path().join("data");
    import(root.path(), &["old@example.com"]);
    assert_eq!(stored_hash(root.path(), "old@example.com"), HASH.trim());

    let mut config = test_config(&data);
    config.metrics.listen = Some(super::metrics::ANY_PORT);
    // The embedded store's own behaviour (its file on disk): one node on it, also in two-node runs.
    let s = TestServer::start_embedded(config).await;
    let metrics = s.metrics();
    // Once the server answers, its metrics listener is bound too (before that, a scrape may find nothing).
    assert_eq!(s.get("/api/auth/ok").send().await.status, 200);
    assert_eq!(legacy_gauge(metrics).await, 1.0);
    assert_eq!(s.sign_in("old@example.com", "not the password").await.0, 401);
    let (status, body, cookie) = s.sign_in("old@example.com", OLD_PASSWORD).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["user"]["createdAt"], "2025-05-01T10:00:00.000Z");
    let cookie = cookie.unwrap();
    // The new hash is in force at once: the old password still works (now against argon2id).
    assert_eq!(legacy_gauge(metrics).await, 0.0);
    assert_eq!(s.sign_in("old@example.com", OLD_PASSWORD).await.0, 200);
    s.stop().await;

    let hash = stored_hash(root.path(), "old@example.com");
    assert!(hash.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"), "{hash}");
    // The session and the hash were made durable together: both are there after a restart.
    let s = TestServer::start_embedded(test_config(&data)).await;
    assert!(s.session(&cookie).await.is_object());
    assert_eq!(s.sign_in("old@example.com", OLD_PASSWORD).await.0, 200);
    s.stop().await;
}

/// The median time (ms) of a wrong-password sign-in for each of `emails`, over `rounds` rounds taking them in
/// turn (so the machine's noise falls on all of them alike); every attempt must answer 401.
async fn wrong_password_medians<const N: usize>(s: &TestServer, emails: [&str; N], rounds: usize) -> [f64; N] {
    let mut samples: [Vec<f64>; N] = std::array::from_fn(|_| Vec::new());
    for i in 0..rounds {
        for (email, times) in emails.iter().zip(samples.iter_mut()) {
            let t = Instant::now();
            let (status, _, _) = s.sign_in(email, &format!("wrong-password-{i}")).await;
            times.push(t.elapsed().as_secs_f64() * 1000.0);
            assert_eq!(status, 401);
        }
    }
    samples.map(|mut v| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    })
}

/// While legacy hashes remain, a wrong password on a better-auth account, a wrong password on an argon2id
/// account and an unknown e-mail take the same time (each runs one argon2 and one scrypt verification).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_email_and_wrong_password_take_the_same_time_with_legacy_hashes() {
    let root = tempfile::tempdir().unwrap();
    import(root.path(), &["legacy@example.com"]);
    let mut config = test_config(&root.path().join("data"));
    config.rate_limit.failures_per_account = 1000;
    let s = TestServer::start_with(config).await;
    s.new_user("modern").await;
    let [l, m, u] =
        wrong_password_medians(&s, ["legacy@example.com", "modern@example.com", "ghost@example.com"], 20).await;
    eprintln!("timing: median unknown e-mail {u:.1} ms, wrong scrypt password {l:.1} ms, wrong argon2 {m:.1} ms");
    assert!(u > 5.0 && l > 5.0 && m > 5.0, "each must run full verifications: {u:.1} / {l:.1} / {m:.1} ms");
    for (what, x) in [("scrypt", l), ("argon2", m)] {
        assert!((u - x).abs() < 0.35 * u.max(x), "unknown {u:.1} ms vs wrong {what} password {x:.1} ms");
    }
    s.stop().await;
}

/// An argon2id hash of [`OLD_PASSWORD`] at RFC 9106's second recommended setting (m = 64 MiB, t = 3, p = 4), as
/// an application that hashed with node-argon2's defaults has them.
fn rfc_9106_hash() -> String {
    use argon2::password_hash::PasswordHasher;
    let params = argon2::Params::new(65_536, 3, 4, None).unwrap();
    let argon = argon2::Argon2::new(argon2::Algorithm::Argon2id, argon2::Version::V0x13, params);
    argon.hash_password(OLD_PASSWORD.as_bytes()).unwrap().to_string()
}

/// Before: an imported argon2 hash of another cost stayed as it was after a sign-in (only scrypt hashes were
/// replaced), so every check of that account kept paying its cost. Now the sign-in replaces it with one at the
/// configured cost, seen in the store through `export`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_imported_argon2_hash_of_another_cost_is_replaced_at_sign_in() {
    let root = tempfile::tempdir().unwrap();
    let data = root.path().join("data");
    let imported = rfc_9106_hash();
    assert!(imported.starts_with("$argon2id$v=19$m=65536,t=3,p=4$"), "{imported}");
    better_auth_file_with(&root.path().join("ba.db"), &["argon@example.com"], &imported);
    let (status, _, err) = run_binary(root.path(), &["import-better-auth", "--sqlite", "ba.db"], &[], "");
    assert!(status.success(), "import: {err}");
    assert_eq!(stored_hash(root.path(), "argon@example.com"), imported);

    let s = TestServer::start_embedded(test_config(&data)).await;
    assert_eq!(s.sign_in("argon@example.com", "not the password").await.0, 401);
    assert_eq!(s.sign_in("argon@example.com", OLD_PASSWORD).await.0, 200);
    assert_eq!(s.sign_in("argon@example.com", OLD_PASSWORD).await.0, 200, "the new hash verifies");
    s.stop().await;
    let hash = stored_hash(root.path(), "argon@example.com");
    assert!(hash.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"), "{hash}");
}

/// Before: the importer took argon2 hashes up to m = 256 MiB, t = 16, p = 16 (3.3 s and 280 MB an attempt). Now
/// above 64 MiB and 256 MiB of passes it refuses the file, naming the account, and writes nothing.
#[test]
fn the_importer_refuses_argon2_hashes_above_the_bound() {
    let root = tempfile::tempdir().unwrap();
    let dear = "$argon2id$v=19$m=262144,t=16,p=16$c2FsdHNhbHRzYWx0c2FsdA$aGFzaGhhc2hoYXNoaGFzaGhhc2hoYXNoaGFzaGhhc2g";
    better_auth_file_with(&root.path().join("ba.db"), &["dear@example.com"], dear);
    let (status, out, err) = run_binary(root.path(), &["import-better-auth", "--sqlite", "ba.db"], &[], "");
    assert!(!status.success(), "imported: {out}");
    assert!(
        err.contains("dear@example.com: the argon2 password hash's cost m=262144 KiB, t=16, p=16 is above the bound"),
        "{err}"
    );
    let (status, out, _) = run_binary(root.path(), &["export"], &[], "");
    assert!(status.success() && !out.contains("dear@example.com"), "{out}");
}

/// Before: with an imported `m=65536,t=3,p=4` hash, a wrong password on that account took 0.14–0.16 s and an
/// unknown e-mail 0.02 s: the account's existence showed. Now an unknown e-mail, a wrong password on it and one on
/// an account of the configured cost each run one verification at both costs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_email_and_wrong_password_take_the_same_time_with_imported_argon2_hashes() {
    let root = tempfile::tempdir().unwrap();
    better_auth_file_with(&root.path().join("ba.db"), &["argon@example.com"], &rfc_9106_hash());
    let (status, _, err) = run_binary(root.path(), &["import-better-auth", "--sqlite", "ba.db"], &[], "");
    assert!(status.success(), "import: {err}");
    let mut config = test_config(&root.path().join("data"));
    config.rate_limit.failures_per_account = 1000;
    let s = TestServer::start_with(config).await;
    s.new_user("modern").await;
    let [i, m, u] =
        wrong_password_medians(&s, ["argon@example.com", "modern@example.com", "ghost@example.com"], 15).await;
    eprintln!("timing: median unknown e-mail {u:.1} ms, wrong password on m=65536 {i:.1} ms, on m=19456 {m:.1} ms");
    for (what, x) in [("the imported cost", i), ("the configured cost", m)] {
        assert!((u - x).abs() < 0.35 * u.max(x), "unknown {u:.1} ms vs a wrong password at {what} {x:.1} ms");
    }
    s.stop().await;
}

/// A key `@better-auth/api-key` 1.7 made (its `apikey` row: the key's SHA-256 in base64url, owner in `referenceId`)
/// comes over with `import-better-auth` and opens its owner's session here in `x-api-key`, with its name, prefix
/// and limits; a disabled one stays refused, and a key kept unhashed (`disableKeyHashing`) blocks the import.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_api_key_made_by_better_auth_keeps_working_after_the_import() {
    use base64::Engine;
    use sha2::Digest;
    let root = tempfile::tempdir().unwrap();
    let path = root.path().join("ba.db");
    better_auth_file(&path, &["keys@example.com"]);
    let hashed = |key: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(key));
    // As the plugin makes them: a prefix and 64 letters.
    let (live, off) = (format!("ba_liv{}", "K".repeat(61)), format!("ba_off{}", "Q".repeat(61)));
    let db = rusqlite::Connection::open(&path).unwrap();
    db.execute_batch(
        r#"CREATE TABLE "apikey" ("id" text PRIMARY KEY, "configId" text NOT NULL, "name" text, "start" text,
             "referenceId" text NOT NULL, "prefix" text, "key" text NOT NULL, "refillInterval" integer,
             "refillAmount" integer, "lastRefillAt" date, "enabled" integer, "rateLimitEnabled" integer,
             "rateLimitTimeWindow" integer, "rateLimitMax" integer, "requestCount" integer, "remaining" integer,
             "lastRequest" date, "expiresAt" date, "createdAt" date NOT NULL, "updatedAt" date NOT NULL,
             "permissions" text, "metadata" text);"#,
    )
    .unwrap();
    let user = format!("ba{:030}", 0);
    let insert = r#"INSERT INTO "apikey" VALUES (?1, 'default', ?2, 'ba_liv', ?3, 'ba_', ?4, NULL, NULL, NULL, ?5,
        1, 86400000, 10, 0, NULL, NULL, NULL, '2025-06-01T10:00:00.000Z', '2025-06-01T10:00:00.000Z',
        '{"files":["read"]}', '{"team":"ci"}')"#;
    db.execute(insert, rusqlite::params!["ba-key-1", "deploy", user, hashed(&live), 1]).unwrap();
    db.execute(insert, rusqlite::params!["ba-key-2", "old", user, hashed(&off), 0]).unwrap();
    // A row the plugin wrote with `disableKeyHashing`: the key itself, which is never imported.
    db.execute(insert, rusqlite::params!["ba-key-3", "plain", user, "ba_plainKey", 1]).unwrap();
    let (status, out, err) = run_binary(root.path(), &["import-better-auth", "--sqlite", "ba.db"], &[], "");
    assert!(!status.success() && err.contains("disableKeyHashing"), "an unhashed key must block: {out}{err}");
    db.execute(r#"DELETE FROM "apikey" WHERE "id" = 'ba-key-3'"#, []).unwrap();
    drop(db);
    let (status, out, err) = run_binary(root.path(), &["import-better-auth", "--sqlite", "ba.db"], &[], "");
    assert!(status.success() && format!("{out}{err}").contains("2 API key(s) imported"), "import: {out}{err}");

    let s = TestServer::start_embedded(test_config(&root.path().join("data"))).await;
    let session = s.get("/api/auth/get-session").header("x-api-key", &live).send().await;
    assert_eq!(session.status, 200, "{}", session.text);
    assert_eq!(session.json()["user"]["email"], "keys@example.com");
    let refused = s.get("/api/auth/get-session").header("x-api-key", &off).send().await;
    assert_eq!(refused.json()["code"], "KEY_DISABLED", "{}", refused.text);
    let (_, _, cookie) = s.sign_in("keys@example.com", OLD_PASSWORD).await;
    let listed = s.get("/api/auth/api-key/list").cookie(&cookie.unwrap()).send().await.json();
    let keys = listed["apiKeys"].as_array().cloned().unwrap_or_default();
    let deploy = keys.iter().find(|k| k["name"] == "deploy").unwrap_or_else(|| panic!("{listed}"));
    assert_eq!(
        (&deploy["prefix"], &deploy["start"], &deploy["rateLimitMax"]),
        (&"ba_".into(), &"ba_liv".into(), &10.into())
    );
    assert_eq!(deploy["metadata"], serde_json::json!({"team": "ci"}), "{deploy}");
    assert_eq!(deploy["createdAt"], "2025-06-01T10:00:00.000Z");
    s.stop().await;
}

/// Where better-auth was an OAuth provider, its clients come over with their `client_id` and secret and its users'
/// consents with them: `@better-auth/oauth-provider`'s `oauthClient` (the secret's SHA-256 in base64url) and the
/// older `oidcProvider`'s `oauthApplication` (the secret kept plain, hashed on the way in). After the import an
/// imported user signs in to the confidential client with no consent page (their consent came over) and the client
/// redeems the code with the secret it always had; the old plugin's client authenticates with its own; a secret kept
/// encrypted blocks the import.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oauth_clients_and_consents_made_by_better_auth_keep_working_after_the_import() {
    use super::provider::{RP, authorize, location, pkce, token};
    use base64::Engine;
    use sha2::Digest;
    let root = tempfile::tempdir().unwrap();
    let path = root.path().join("ba.db");
    better_auth_file(&path, &["rp-user@example.com"]);
    let user = format!("ba{:030}", 0);
    let (client_id, secret) = ("GrafanaClientIdOfThirtyTwoLetter", "TheSecretTheApplicationHoldsNow1");
    let hashed = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(secret));
    let db = rusqlite::Connection::open(&path).unwrap();
    db.execute_batch(
        r#"CREATE TABLE "oauthClient" ("id" text PRIMARY KEY, "clientId" text NOT NULL UNIQUE, "clientSecret" text,
             "disabled" integer, "skipConsent" integer, "enableEndSession" integer, "scopes" text,
             "clientCredentialsScopes" text, "userId" text, "createdAt" date, "updatedAt" date, "name" text,
             "redirectUris" text NOT NULL, "postLogoutRedirectUris" text, "tokenEndpointAuthMethod" text,
             "applicationType" text, "grantTypes" text, "responseTypes" text);
           CREATE TABLE "oauthApplication" ("id" text PRIMARY KEY, "name" text, "clientId" text UNIQUE,
             "clientSecret" text, "redirectURLs" text, "type" text, "disabled" integer, "userId" text,
             "createdAt" date, "updatedAt" date);
           CREATE TABLE "oauthConsent" ("id" text PRIMARY KEY, "clientId" text NOT NULL, "userId" text,
             "referenceId" text, "scopes" text NOT NULL, "createdAt" date, "updatedAt" date);"#,
    )
    .unwrap();
    let insert = r#"INSERT INTO "oauthClient" VALUES (?1, ?2, ?3, 0, 0, 0, '["openid","profile","email"]', '[]', NULL,
        '2025-06-01T10:00:00.000Z', '2025-06-01T10:00:00.000Z', ?4, ?5, NULL, ?6, 'web', '["authorization_code"]',
        '["code"]')"#;
    db.execute(
        insert,
        rusqlite::params!["c1", client_id, hashed, "Grafana", format!(r#"["{RP}"]"#), "client_secret_basic"],
    )
    .unwrap();
    db.execute(
        insert,
        rusqlite::params![
            "c2",
            "PublicAppClientIdOfThirtyTwoLett",
            None::<String>,
            "CLI",
            format!(r#"["{RP}"]"#),
            "none"
        ],
    )
    .unwrap();
    // The older plugin's default kept the secret itself.
    db.execute(
        r#"INSERT INTO "oauthApplication" VALUES ('a1', 'Old wiki', 'OldWikiClientIdOfThirtyTwoLetter',
           'OldWikiSecretOfThirtyTwoLettersX', ?1, 'web', 0, NULL, '2024-01-01T00:00:00.000Z', '2024-01-01T00:00:00.000Z')"#,
        rusqlite::params![RP],
    )
    .unwrap();
    db.execute(
        r#"INSERT INTO "oauthConsent" VALUES ('k1', ?1, ?2, NULL, '["openid","profile"]', '2025-06-02T10:00:00.000Z',
           '2025-06-02T10:00:00.000Z')"#,
        rusqlite::params![client_id, user],
    )
    .unwrap();
    // A client whose secret was kept encrypted (disableJwtPlugin): never carried over.
    db.execute(
        insert,
        rusqlite::params![
            "c3",
            "SealedClientIdOfThirtyTwoLetters",
            "ab".repeat(72),
            "Sealed",
            format!(r#"["{RP}"]"#),
            "client_secret_basic"
        ],
    )
    .unwrap();
    let (status, out, err) = run_binary(root.path(), &["import-better-auth", "--sqlite", "ba.db"], &[], "");
    assert!(
        !status.success() && err.contains("SealedClientIdOfThirtyTwoLetters"),
        "an encrypted secret must block: {out}{err}"
    );
    db.execute(r#"DELETE FROM "oauthClient" WHERE "id" = 'c3'"#, []).unwrap();
    drop(db);
    let (status, out, err) = run_binary(root.path(), &["import-better-auth", "--sqlite", "ba.db"], &[], "");
    let said = format!("{out}{err}");
    assert!(
        status.success() && said.contains("3 OAuth client(s) imported") && said.contains("1 OAuth consent(s)"),
        "import: {said}"
    );

    let s = TestServer::start_embedded(test_config(&root.path().join("data"))).await;
    let (_, _, cookie) = s.sign_in("rp-user@example.com", OLD_PASSWORD).await;
    let cookie = cookie.unwrap();
    let consents = s.get("/api/auth/oauth2/get-consents").cookie(&cookie).send().await.json();
    assert_eq!(consents[0]["clientId"], client_id, "{consents}");
    assert_eq!(consents[0]["clientName"], "Grafana");
    assert_eq!(consents[0]["scopes"], serde_json::json!(["openid", "profile"]));
    assert_eq!(consents[0]["createdAt"], "2025-06-02T10:00:00.000Z");

    // Consented already: straight back to the client with a code, which the secret it always had redeems.
    let (verifier, challenge) = pkce();
    let request = [
        ("response_type", "code"),
        ("client_id", client_id),
        ("redirect_uri", RP),
        ("scope", "openid profile"),
        ("code_challenge", challenge.as_str()),
        ("code_challenge_method", "S256"),
    ];
    let (to, params) = location(&authorize(&s, Some(&cookie), &request).await);
    assert_eq!(to, RP, "{params:?}");
    let form = [
        ("grant_type", "authorization_code"),
        ("code", params["code"].as_str()),
        ("redirect_uri", RP),
        ("code_verifier", verifier.as_str()),
    ];
    let r = token(&s, &form, Some((client_id, secret))).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json()["scope"], "openid profile");
    // A wider request asks: the consent covered openid and profile only.
    let wider: Vec<(&str, &str)> =
        request.iter().map(|&(k, v)| if k == "scope" { (k, "openid email") } else { (k, v) }).collect();
    assert_eq!(location(&authorize(&s, Some(&cookie), &wider).await).0, "http://here/consent");

    // The old plugin's client, by the secret it kept plain; a wrong one is refused.
    let bogus = [
        ("grant_type", "authorization_code"),
        ("code", "no-such-code"),
        ("redirect_uri", RP),
        ("code_verifier", verifier.as_str()),
    ];
    let old = token(&s, &bogus, Some(("OldWikiClientIdOfThirtyTwoLetter", "OldWikiSecretOfThirtyTwoLettersX"))).await;
    assert_eq!((old.status, old.json()["error"].clone()), (400, "invalid_grant".into()), "{}", old.text);
    let wrong = token(&s, &bogus, Some(("OldWikiClientIdOfThirtyTwoLetter", "not-the-secret"))).await;
    assert_eq!(wrong.status, 401, "{}", wrong.text);
    let public = s.get("/api/auth/oauth2/public-client?client_id=PublicAppClientIdOfThirtyTwoLett").send().await;
    assert_eq!(public.json()["client_name"], "CLI", "{}", public.text);
    s.stop().await;
}
