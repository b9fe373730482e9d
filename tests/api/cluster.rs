//! Several nodes on one PostgreSQL (docs/cluster.md): the rules one node's actors can no longer keep alone, held
//! across nodes; a database outage. Each test starts a PostgreSQL server of its own (Debian's `postgresql`) and
//! two nodes on it.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;

use super::harness::*;

/// A PostgreSQL server and two nodes on it, with the default test configuration (adjusted).
async fn two_nodes(
    adjust: impl FnOnce(&mut service_auth::config::Config),
) -> (cluster::Postgres, TestServer, tempfile::TempDir) {
    let pg = tokio::task::spawn_blocking(cluster::Postgres::start).await.unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let mut config = test_config(tmp.path());
    adjust(&mut config);
    let server = TestServer::start_cluster(config, &pg.url()).await;
    (pg, server, tmp)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_email_signed_up_on_both_nodes_at_once_has_one_winner() {
    let (_pg, s, _tmp) = two_nodes(|_| {}).await;
    let (a, b) = (&s.nodes[0], &s.nodes[1]);
    for round in 0..10 {
        let email = format!("race{round}@example.com");
        let (one, two) = tokio::join!(a.sign_up("One", &email, PASSWORD), b.sign_up("Two", &email, PASSWORD));
        let mut statuses = [one.0, two.0];
        statuses.sort_unstable();
        assert_eq!(statuses, [200, 422], "round {round}: {one:?} {two:?}");
        let loser = if one.0 == 422 { &one.1 } else { &two.1 };
        assert_eq!(loser["code"], "USER_ALREADY_EXISTS_USE_ANOTHER_EMAIL", "{loser}");
        // Both nodes agree on who won: the winner's name, and one account.
        let winner = if one.0 == 200 { "One" } else { "Two" };
        for node in [a, b] {
            let session = node.session(&node.login(&email, PASSWORD).await).await;
            assert_eq!(session["user"]["name"], winner);
        }
    }
    let admin = a.admin_session().await;
    for node in [a, b] {
        let races = node.users(&admin).await.into_iter().filter(|u| u["email"].as_str().unwrap().starts_with("race"));
        assert_eq!(races.count(), 10);
    }
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_admins_demoting_each_other_on_different_nodes_leave_one() {
    let (_pg, s, _tmp) = two_nodes(|_| {}).await;
    let (a, b) = (&s.nodes[0], &s.nodes[1]);
    let first = a.admin_session().await;
    let first_id = a.session(&first).await["user"]["id"].as_str().unwrap().to_owned();
    let second = a.new_user("second").await;
    a.patch_ok(&first, &json!({"userId": second.id, "role": "admin"})).await;
    let second_on_b = b.login(&second.email, PASSWORD).await;
    for round in 0..5 {
        let (demote_second, demote_first) =
            (json!({"userId": second.id, "role": "user"}), json!({"userId": first_id, "role": "user"}));
        let (x, y) = tokio::join!(a.patch_user(&first, &demote_second), b.patch_user(&second_on_b, &demote_first));
        let mut statuses = [x.status, y.status];
        statuses.sort_unstable();
        // The later one finds itself demoted (403) or would demote the last administrator (409): never both 200.
        assert!(
            statuses == [200, 403] || statuses == [200, 409],
            "round {round}: {} {} / {} {}",
            x.status,
            x.text,
            y.status,
            y.text
        );
        let (remaining, demoted, node) =
            if x.status == 200 { (&first, &second.id, a) } else { (&second_on_b, &first_id, b) };
        for n in [a, b] {
            let admins = n.users(remaining).await.into_iter().filter(|u| u["role"] == "admin").count();
            assert_eq!(admins, 1, "round {round}: {admins} administrators");
        }
        node.patch_ok(remaining, &json!({"userId": demoted, "role": "admin"})).await;
    }
    s.stop().await;
}

/// PostgreSQL stopped for 10 s under two nodes: writes answer 503 at once; session checks answer from memory for
/// at most `max_staleness_secs` (5), then refuse with 503 (fail closed) and `/readyz` says why; once PostgreSQL is
/// back, the nodes catch up and answer as before, and a change made on one is seen on the other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_stopped_for_10_s_gives_503s_and_fail_closed_checks_then_full_recovery() {
    let (pg, s, _tmp) = two_nodes(|_| {}).await;
    let (a, b) = (&s.nodes[0], &s.nodes[1]);
    let alice = a.new_user("alice").await;
    let pg = std::sync::Arc::new(pg);
    let stopper = std::sync::Arc::clone(&pg);
    tokio::task::spawn_blocking(move || stopper.pause()).await.unwrap();
    let stopped = Instant::now();
    // Requests straight to a node: the client's wait for replication needs the database.
    let direct = |c: &Client| Client::new(c.base.trim_start_matches("http://").parse().unwrap());
    let (a_direct, b_direct) = (direct(a), direct(b));

    let write = a_direct.sign_up("Late", "late@example.com", PASSWORD).await;
    assert_eq!(write.0, 503, "a write without the database: {:?}", write.1);
    assert!(stopped.elapsed() < Duration::from_secs(2), "the refusal took {:?}", stopped.elapsed());
    for node in [&a_direct, &b_direct] {
        let r = node.get_session_resp(Some(&alice.cookie)).await;
        assert_eq!(r.status, 200, "a session check within max_staleness_secs answers from memory: {}", r.text);
        assert_eq!(r.json()["user"]["email"], alice.email);
    }
    tokio::time::sleep(Duration::from_secs(6).saturating_sub(stopped.elapsed())).await;
    for node in [&a_direct, &b_direct] {
        let r = node.get_session_resp(Some(&alice.cookie)).await;
        assert_eq!(r.status, 503, "a session check past max_staleness_secs must refuse: {}", r.text);
        let ready = node.get("/readyz").send().await;
        assert_eq!(ready.status, 503);
        assert_eq!(ready.json()["status"], "unavailable");
    }
    tokio::time::sleep(Duration::from_secs(10).saturating_sub(stopped.elapsed())).await;
    let starter = std::sync::Arc::clone(&pg);
    tokio::task::spawn_blocking(move || starter.resume()).await.unwrap();

    let back = Instant::now();
    for node in [&a_direct, &b_direct] {
        while node.get("/readyz").send().await.status != 200 {
            assert!(back.elapsed() < Duration::from_secs(10), "not ready 10 s after PostgreSQL came back");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    println!("both nodes ready {:?} after PostgreSQL came back", back.elapsed());
    assert_eq!(a.session(&alice.cookie).await["user"]["email"], alice.email);
    let bob = b.new_user("bob").await;
    assert_eq!(a.session(&bob.cookie).await["user"]["email"], bob.email, "node A sees node B's sign-up");
    let out = a.sign_out(Some(&bob.cookie)).await;
    assert_eq!(out.status, 200);
    assert_eq!(b.get_session_resp(Some(&bob.cookie)).await.text, "null", "node B sees node A's sign-out");
    s.stop().await;
}

/// Before: a node that had lost the database for longer than `max_staleness_secs` answered get-session 503, but
/// every other call that needs the caller's session 401 `UNAUTHORIZED`, as if its user had signed out: clients
/// and the console signed their users out for the length of an outage. Now each answers 503 with the documented
/// error body; a request without a session is still 401; once the database is back the same cookies work.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_node_answers_503_not_401_to_every_signed_in_call() {
    let (pg, s, _tmp) = two_nodes(|c| c.store.max_staleness_secs = 1).await;
    let a = &s.nodes[0];
    let alice = a.new_user("alice").await;
    let admin = a.admin_session().await;
    let pg = std::sync::Arc::new(pg);
    let stopper = std::sync::Arc::clone(&pg);
    tokio::task::spawn_blocking(move || stopper.pause()).await.unwrap();
    // Straight to the node: the client's wait for replication needs the database.
    let node = Client::new(a.base.trim_start_matches("http://").parse().unwrap());
    let stopped = Instant::now();
    while node.get_session_resp(Some(&alice.cookie)).await.status != 503 {
        assert!(stopped.elapsed() < Duration::from_secs(15), "the node never stopped vouching for sessions");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let user = |r: Req| r.cookie(&alice.cookie);
    let administrator = |r: Req| r.cookie(&admin);
    let calls: Vec<(&str, Req)> = vec![
        ("list-sessions", user(node.get("/api/auth/list-sessions"))),
        ("update-user", user(node.post("/api/auth/update-user")).json(&json!({"name": "Renamed"}))),
        (
            "change-password",
            user(node.post("/api/auth/change-password"))
                .json(&json!({"currentPassword": PASSWORD, "newPassword": "another-password-1"})),
        ),
        ("revoke-sessions", user(node.post("/api/auth/revoke-sessions")).json(&json!({}))),
        ("revoke-other-sessions", user(node.post("/api/auth/revoke-other-sessions")).json(&json!({}))),
        ("revoke-session", user(node.post("/api/auth/revoke-session")).json(&json!({"token": alice.cookie}))),
        ("delete-user", user(node.post("/api/auth/delete-user")).json(&json!({"password": PASSWORD}))),
        ("stop-impersonating", user(node.post("/api/auth/admin/stop-impersonating")).json(&json!({}))),
        ("admin/list-users", administrator(node.get("/api/auth/admin/list-users"))),
        (
            "admin/has-permission",
            administrator(node.post("/api/auth/admin/has-permission"))
                .json(&json!({"permissions": {"user": ["list"]}})),
        ),
        ("admin/ban-user", administrator(node.post("/api/auth/admin/ban-user")).json(&json!({"userId": alice.id}))),
        ("/api/admin/users", administrator(node.get("/api/admin/users"))),
        ("/api/admin/organizations", administrator(node.get("/api/admin/organizations"))),
        ("/api/admin/audit", administrator(node.get("/api/admin/audit"))),
        ("/api/admin/status", administrator(node.get("/api/admin/status"))),
    ];
    for (call, request) in calls {
        let r = request.send().await;
        assert_eq!(r.status, 503, "{call} on a stale node: {}", r.text);
        let body = r.json();
        if call.starts_with("/api/admin/") {
            assert_eq!(body, json!({"error": "The service is temporarily unavailable"}), "{call}");
        } else {
            assert_eq!(body["code"], "SERVICE_UNAVAILABLE", "{call}: {body}");
        }
    }
    // Without a session there is nothing to vouch for: still 401.
    assert_eq!(node.get("/api/auth/list-sessions").send().await.status, 401);

    let starter = std::sync::Arc::clone(&pg);
    tokio::task::spawn_blocking(move || starter.resume()).await.unwrap();
    let back = Instant::now();
    while node.get("/readyz").send().await.status != 200 {
        assert!(back.elapsed() < Duration::from_secs(15), "not ready 15 s after PostgreSQL came back");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let listed = user(node.get("/api/auth/list-sessions")).send().await;
    assert_eq!(listed.status, 200, "the outage signed alice out: {}", listed.text);
    assert_eq!(node.users(&admin).await.len(), 2, "nothing was done while the node was stale");
    s.stop().await;
}

/// 200 wrong passwords for one account at once, spread over both nodes: at most the account limit (5) of
/// password checks run in the whole cluster, not 5 per node; the rest are refused with 429.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_wrong_passwords_over_both_nodes_hold_the_account_limit() {
    let (_pg, s, _tmp) = two_nodes(|c| c.rate_limit.failures_per_account = 5).await;
    s.nodes[0].new_user("target").await;
    let body = json!({"email": "target@example.com", "password": "wrong password!"});
    let addrs: Vec<std::net::SocketAddr> =
        s.nodes.iter().map(|n| n.base.trim_start_matches("http://").parse().unwrap()).collect();
    let requests: Vec<_> = (0..200)
        .map(|i| {
            let client = Client::new(addrs[i % 2]);
            let body = body.clone();
            tokio::spawn(async move { client.sign_in_body(&body).await.status })
        })
        .collect();
    let mut statuses = Vec::new();
    for r in requests {
        statuses.push(r.await.unwrap());
    }
    let verified = statuses.iter().filter(|&&s| s == 401).count();
    let limited = statuses.iter().filter(|&&s| s == 429).count();
    // A check the hashing pool sheds because the machine is saturated is a 503 with Retry-After (src/hashing.rs):
    // no password was checked for it, so it is allowed here; seen once in CI at load 15, among the five checks.
    let shed = statuses.iter().filter(|&&s| s == 503).count();
    eprintln!(
        "200 parallel wrong passwords over two nodes -> {verified} verified (401), {limited} refused (429), {shed} shed (503)"
    );
    assert_eq!(verified + limited + shed, 200, "only 401, 429 and the pool's 503 expected: {statuses:?}");
    assert!(verified <= 5, "{verified} password checks ran across the nodes; the limit is 5");
    for node in &s.nodes {
        assert_eq!(node.sign_in("target@example.com", PASSWORD).await.0, 429, "the lock holds on every node");
    }
    s.stop().await;
}

/// `service-auth migrate-store`: an embedded data directory into an empty PostgreSQL database, where two nodes
/// serve it (accounts, organizations, sessions, audit log); a second run is refused; then back into an empty
/// data directory, where one embedded server serves the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrate_store_moves_a_data_directory_to_postgres_and_back() {
    let pg = tokio::task::spawn_blocking(cluster::Postgres::start).await.unwrap();
    let (source, cluster_dir, back) =
        (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let s = TestServer::start_with_faults(
        test_config(&source.path().join("data")),
        service_auth::store::FaultSwitch::default(),
    )
    .await;
    let alice = s.new_user("alice").await;
    let admin = s.admin_session().await;
    s.new_org(&admin, "St Mary", "st-mary").await;
    s.patch_ok(&admin, &json!({"userId": alice.id, "role": "qa_manager"})).await;
    s.stop().await;

    let url = cluster::database_for(&pg.url(), cluster_dir.path()).await;
    let (status, _, err) = run_binary(source.path(), &["migrate-store", "--to", "postgres", "--url", &url], &[], "");
    assert!(status.success(), "{err}");
    assert!(err.contains("moved 2 users, 1 organizations, 2 sessions"), "{err}");
    let (status, _, err) = run_binary(source.path(), &["migrate-store", "--to", "postgres", "--url", &url], &[], "");
    assert!(!status.success() && err.contains("only fills an empty store"), "a second run must be refused: {err}");

    let c = TestServer::start_cluster(test_config(cluster_dir.path()), &pg.url()).await;
    for node in &c.nodes {
        assert_eq!(node.session(&alice.cookie).await["user"]["role"], "qa_manager");
        assert_eq!(node.orgs(&admin).await.len(), 1);
        let audit = node.get("/api/admin/audit").cookie(&admin).send().await;
        assert!(audit.text.contains("user.role_changed"), "the audit log came along: {}", audit.text);
    }
    c.stop().await;

    let (status, _, err) = run_binary(back.path(), &["migrate-store", "--to", "embedded", "--url", &url], &[], "");
    assert!(status.success(), "{err}");
    let e = TestServer::start_with_faults(
        test_config(&back.path().join("data")),
        service_auth::store::FaultSwitch::default(),
    )
    .await;
    assert_eq!(e.session(&alice.cookie).await["user"]["email"], alice.email);
    assert_eq!(e.orgs(&admin).await.len(), 1);
    e.stop().await;
}

/// `kill -9` of one node (the real binary) while it acknowledges sign-ups: every sign-up it answered 200 to can
/// sign in on the other node; nothing acknowledged is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_of_one_node_under_load_loses_nothing_acknowledged() {
    let pg = tokio::task::spawn_blocking(cluster::Postgres::start).await.unwrap();
    let (root_a, root_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let url = cluster::database_for(&pg.url(), root_a.path()).await;
    let shared = [("SERVICE_AUTH_STORE_BACKEND", "postgres"), ("SERVICE_AUTH_STORE_URL", url.as_str())];
    let a = ChildServer::spawn(root_a.path(), &[&shared[..], BOOTSTRAP_ENV].concat()).await;
    let b = ChildServer::spawn(root_b.path(), &shared).await;
    let answered = Arc::new(AtomicUsize::new(0));
    let load: Vec<_> = (0..8)
        .map(|worker| {
            let client = a.client.clone();
            let answered = Arc::clone(&answered);
            tokio::spawn(async move {
                let mut acknowledged = Vec::new();
                for n in 0.. {
                    let email = format!("w{worker}-{n}@example.com");
                    let body = json!({"name": "Load", "email": email, "password": PASSWORD});
                    match client.post("/api/auth/sign-up/email").json(&body).try_send().await {
                        Ok(r) if r.status == 200 => {
                            acknowledged.push(email);
                            answered.fetch_add(1, Ordering::Relaxed);
                        }
                        Ok(_) => {}
                        Err(_) => return acknowledged,
                    }
                }
                acknowledged
            })
        })
        .collect();
    // The kill lands while sign-ups are in flight, once a few dozen are through (a count, not a time: on a loaded
    // machine each sign-up's hash takes longer).
    let deadline = Instant::now() + Duration::from_secs(60);
    while answered.load(Ordering::Relaxed) < 24 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    a.kill9();
    let mut acknowledged = Vec::new();
    for worker in load {
        acknowledged.extend(worker.await.unwrap());
    }
    assert!(acknowledged.len() >= 8, "the load got only {} sign-ups through", acknowledged.len());
    // Node B applies what node A committed within milliseconds; give it a moment, then every account signs in.
    tokio::time::sleep(Duration::from_millis(500)).await;
    for email in &acknowledged {
        let (status, body, _) = b.sign_in(email, PASSWORD).await;
        assert_eq!(status, 200, "{email} was acknowledged by the killed node but is unknown to the other: {body}");
    }
    eprintln!("kill -9 under load: {} acknowledged sign-ups, all present on the other node", acknowledged.len());
    drop(b);
}

/// A database migrated by a newer version (a schema migration this version does not have) is refused at connect,
/// with a message that says so, and left as it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_migrated_by_a_newer_version_is_refused() {
    let pg = tokio::task::spawn_blocking(cluster::Postgres::start).await.unwrap();
    let url = pg.url();
    let refused = tokio::task::spawn_blocking(move || {
        drop(service_auth::store::Store::connect_postgres(&url, 1).expect("a fresh database is migrated"));
        let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        admin
            .execute(
                "INSERT INTO refinery_schema_history (version, name, applied_on, checksum) \
                 VALUES (99, 'later', '2030-01-01T00:00:00Z', '1')",
                &[],
            )
            .unwrap();
        let refused = service_auth::store::Store::connect_postgres(&url, 1).err().expect("a newer schema was accepted");
        let still: i64 =
            admin.query_one("SELECT count(*) FROM refinery_schema_history WHERE version = 99", &[]).unwrap().get(0);
        (refused.to_string(), still)
    })
    .await
    .unwrap();
    assert!(refused.0.contains("newer version of service-auth"), "{}", refused.0);
    assert_eq!(refused.1, 1);
}

/// A ban on node A racing the account's own profile change on node B: whichever commits second was computed from
/// an account that has changed since and answers 503 (retry) instead of writing over the other; an acknowledged
/// ban is never undone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ban_on_one_node_is_never_undone_by_a_racing_change_on_the_other() {
    let (_pg, s, _tmp) = two_nodes(|_| {}).await;
    let (a, b) = (&s.nodes[0], &s.nodes[1]);
    let admin = a.admin_session().await;
    let target = a.new_user("target").await;
    let (mut renamed, mut retried) = (0, 0);
    for round in 0..10 {
        let own = b.login(&target.email, PASSWORD).await;
        let (ban, rename) = (json!({"userId": target.id, "banned": true}), json!({"name": format!("Round {round}")}));
        let (banned, changed) =
            tokio::join!(a.patch_user(&admin, &ban), b.post("/api/auth/update-user").cookie(&own).json(&rename).send());
        assert!([200, 503].contains(&banned.status), "round {round}: {} {}", banned.status, banned.text);
        assert!([200, 401, 503].contains(&changed.status), "round {round}: {} {}", changed.status, changed.text);
        renamed += usize::from(changed.status == 200);
        if banned.status == 503 {
            // The rename won: the ban, retried as a client would, goes through.
            retried += 1;
            a.patch_ok(&admin, &ban).await;
        }
        for node in [a, b] {
            assert!(node.listed_user(&admin, &target.id).await["banned"] == true, "round {round}: the ban was undone");
            assert_eq!(node.get_session_resp(Some(&own)).await.text, "null", "round {round}");
        }
        a.patch_ok(&admin, &json!({"userId": target.id, "banned": false})).await;
    }
    eprintln!("ban racing a rename on the other node: {renamed} renames went through, {retried} bans were retried");
    s.stop().await;
}

/// A session ended on one node stays ended when another node's refresh of it (written from what that node held)
/// commits after the end: the refresh writes nothing back, and refuses nothing committed beside it (it used to
/// fail its whole batch: a background use-write made the sign-ins of its batch answer 503).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refresh_never_brings_back_a_session_ended_on_another_node() {
    use service_auth::store::{SessionRecord, Store, StoreOp};
    let pg = tokio::task::spawn_blocking(cluster::Postgres::start).await.unwrap();
    let url = pg.url();
    tokio::task::spawn_blocking(move || {
        let store = Store::connect_postgres(&url, 1).unwrap();
        let session = SessionRecord {
            id: [1; 16],
            user_id: [2; 16],
            expires_at_ms: i64::MAX / 2,
            created_at_ms: 1,
            updated_at_ms: 1,
            ip_address: String::new(),
            user_agent: String::new(),
            remember_me: true,
            impersonated_by: None,
            active_organization: None,
            active_team: None,
        };
        store.commit(&[StoreOp::PutSession([8; 32], session.clone())]).unwrap();
        let refreshed = SessionRecord { updated_at_ms: 2, ..session.clone() };
        store.commit(&[StoreOp::RefreshSession([8; 32], refreshed.clone())]).expect("a live session refreshes");
        store.commit(&[StoreOp::DeleteSession([2; 16], [8; 32])]).unwrap();
        // The late refresh in one request with a sign-in's new session: the sign-in is written, the refresh not.
        let signed_in = SessionRecord { id: [3; 16], ..session.clone() };
        let late = store
            .commit(&[StoreOp::PutSession([9; 32], signed_in.clone()), StoreOp::RefreshSession([8; 32], refreshed)]);
        assert!(late.is_ok(), "a refresh of an ended session failed what was committed with it: {late:?}");
        let sessions = store.load().unwrap().sessions;
        assert_eq!(sessions.len(), 1, "the ended session came back, or the sign-in was lost");
        assert_eq!(sessions[0].1, signed_in);
        store.close();
    })
    .await
    .unwrap();
}

/// Nodes whose runtime goes away without a stop (a test that ends, an embedding that drops the server) let go of
/// every database connection: the follower is a thread of its own, not a task the runtime would end, and used to
/// keep its connection and, through the store, the writer's and the pool's, for the life of the process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_dropped_without_a_stop_close_their_database_connections() {
    let pg = tokio::task::spawn_blocking(cluster::Postgres::start).await.unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let (config, base) = (test_config(tmp.path()), pg.url());
    // The nodes on a runtime of their own, dropped after one request has gone through both.
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        runtime.block_on(async {
            let s = TestServer::start_cluster(config, &base).await;
            let admin = s.nodes[0].admin_session().await;
            assert_eq!(s.nodes[1].list_users(Some(&admin)).await.status, 200);
        });
    })
    .join()
    .unwrap();
    let url = pg.url();
    let left = tokio::task::spawn_blocking(move || {
        let mut watcher = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let others: i64 = watcher
                .query_one(
                    "SELECT count(*) FROM pg_stat_activity \
                     WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()",
                    &[],
                )
                .unwrap()
                .get(0);
            if others == 0 || Instant::now() > deadline {
                return others;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    })
    .await
    .unwrap();
    assert_eq!(left, 0, "connections still open 10 s after the nodes' runtime was dropped");
}

/// Two nodes with test hooks, `max_staleness_secs` long enough that a paused follower does not make its node
/// refuse session checks meanwhile; a client of each node that does not wait for replication (it cannot while a
/// follower is paused).
async fn two_nodes_with_hooks(
    adjust: impl FnOnce(&mut service_auth::config::Config),
) -> (cluster::Postgres, TestServer, [service_auth::store::FaultSwitch; 2], [Client; 2], tempfile::TempDir) {
    let pg = tokio::task::spawn_blocking(cluster::Postgres::start).await.unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let mut config = test_config(tmp.path());
    config.store.max_staleness_secs = 600;
    adjust(&mut config);
    let faults = [service_auth::store::FaultSwitch::default(), service_auth::store::FaultSwitch::default()];
    let server = TestServer::start_cluster_with_faults(config, &pg.url(), faults.clone()).await;
    let direct = |c: &Client| Client::new(c.base.trim_start_matches("http://").parse().unwrap());
    let clients = [direct(&server.nodes[0]), direct(&server.nodes[1])];
    (pg, server, faults, clients, tmp)
}

/// Issue 26.1: node B's follower is behind while a session is refreshed on node A and then signed out on B. The
/// refresh (an older change log entry) reaches B after B's own sign-out: B must not serve the session again.
/// Before: B answered the session once its follower caught up, while the database held none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_older_refresh_from_another_node_does_not_bring_back_a_session_signed_out_here() {
    let (_pg, s, faults, [a_direct, b_direct], _tmp) = two_nodes_with_hooks(|c| c.session.update_age_secs = 1).await;
    let (a, b) = (&s.nodes[0], &s.nodes[1]);
    let alice = a.new_user("alice").await;
    // Due for a refresh at the next check.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    faults[1].pause_follower(true);
    let refreshed = a_direct.get_session_resp(Some(&alice.cookie)).await;
    assert_eq!(refreshed.status, 200);
    assert!(refreshed.session_cookie().is_some(), "node A extended the session: {}", refreshed.text);
    assert_eq!(b_direct.sign_out(Some(&alice.cookie)).await.status, 200);
    assert_eq!(b_direct.get_session_resp(Some(&alice.cookie)).await.text, "null");
    faults[1].pause_follower(false);
    // Any request through the replicating client returns once both nodes have applied the whole log.
    b.get("/healthz").send().await;
    for (name, node) in [("A", a), ("B", b)] {
        assert_eq!(node.get_session_resp(Some(&alice.cookie)).await.text, "null", "node {name} serves it again");
    }
    s.stop().await;
}

/// Issue 26.1: an account renames itself on node A; an administrator removes it on node B, whose follower is
/// behind. Before: B applied the older rename after its own removal and let the removed account sign in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_older_change_from_another_node_does_not_bring_back_an_account_removed_here() {
    let (_pg, s, faults, [a_direct, b_direct], _tmp) = two_nodes_with_hooks(|_| {}).await;
    let (a, b) = (&s.nodes[0], &s.nodes[1]);
    let admin = a.admin_session().await;
    let bob = a.new_user("bob").await;
    faults[1].pause_follower(true);
    let renamed =
        a_direct.post("/api/auth/update-user").cookie(&bob.cookie).json(&json!({"name": "Robert"})).send().await;
    assert_eq!(renamed.status, 200, "{}", renamed.text);
    let removed =
        b_direct.post("/api/auth/admin/remove-user").cookie(&admin).json(&json!({"userId": bob.id})).send().await;
    assert_eq!(removed.status, 200, "{}", removed.text);
    faults[1].pause_follower(false);
    b.get("/healthz").send().await;
    for (name, node) in [("A", a), ("B", b)] {
        let (status, body, _) = node.sign_in(&bob.email, PASSWORD).await;
        assert_eq!(status, 401, "node {name} lets the removed account sign in: {body}");
        assert!(node.users(&admin).await.iter().all(|u| u["id"] != bob.id.as_str()), "node {name} lists it");
    }
    s.stop().await;
}

/// Issue 26.3: a sign-in on node A a moment before node B's administrator sets a new password (B has not seen the
/// new session yet): that session ends too, on both nodes and in the database. Before: only the sessions B knew
/// of were deleted, and the new one stayed valid everywhere, across restarts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_password_set_on_one_node_ends_a_session_only_the_other_node_has_seen() {
    let (pg, s, faults, [a_direct, b_direct], _tmp) = two_nodes_with_hooks(|_| {}).await;
    let (a, b) = (&s.nodes[0], &s.nodes[1]);
    let admin = a.admin_session().await;
    let carol = a.new_user("carol").await;
    faults[1].pause_follower(true);
    let (status, _, fresh) = a_direct.sign_in(&carol.email, PASSWORD).await;
    assert_eq!(status, 200);
    let fresh = fresh.unwrap();
    let set = b_direct
        .post("/api/auth/admin/set-user-password")
        .cookie(&admin)
        .json(&json!({"userId": carol.id, "newPassword": "set by the admin"}))
        .send()
        .await;
    assert_eq!(set.status, 200, "{}", set.text);
    faults[1].pause_follower(false);
    b.get("/healthz").send().await;
    for (name, node) in [("A", a), ("B", b)] {
        for cookie in [&carol.cookie, &fresh] {
            assert_eq!(node.get_session_resp(Some(cookie)).await.text, "null", "node {name} still serves a session");
        }
    }
    let (url, id) = (cluster::database_for(&pg.url(), &test_config(_tmp.path()).data_dir).await, carol.id.clone());
    let left = tokio::task::spawn_blocking(move || {
        let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        let id = uuid::Uuid::parse_str(&id).unwrap();
        client
            .query_one("SELECT count(*) FROM sessions WHERE user_id = $1", &[&id.as_bytes().as_slice()])
            .unwrap()
            .get::<_, i64>(0)
    })
    .await
    .unwrap();
    assert_eq!(left, 0, "sessions of the account left in the database");
    s.stop().await;
}

/// Issue 26.2: the reply to the COMMIT of a ban is lost (the database committed it). Before: the retry on a new
/// connection conflicted with its own committed record; the ban answered 503 and node A kept the account
/// unbanned in memory (old session valid, new sign-ins 200) while the database and node B had it banned.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ban_whose_commit_reply_is_lost_is_answered_and_applied_on_the_acting_node() {
    let (_pg, s, faults, [a_direct, _], _tmp) = two_nodes_with_hooks(|_| {}).await;
    let (a, b) = (&s.nodes[0], &s.nodes[1]);
    let admin = a.admin_session().await;
    let dave = a.new_user("dave").await;
    faults[0].lose_next_commit_replies(1);
    let ban = a_direct.post("/api/auth/admin/ban-user").cookie(&admin).json(&json!({"userId": dave.id})).send().await;
    assert_eq!(ban.status, 200, "{}", ban.text);
    b.get("/healthz").send().await;
    for (name, node) in [("A", a), ("B", b)] {
        assert_eq!(node.get_session_resp(Some(&dave.cookie)).await.text, "null", "node {name}: the old session");
        assert_eq!(node.sign_in(&dave.email, PASSWORD).await.0, 403, "node {name}: a new sign-in");
        assert_eq!(node.listed_user(&admin, &dave.id).await["banned"], true, "node {name}");
    }
    s.stop().await;
}

/// Issue 26.2: a failed-sign-in reservation whose commit reply is lost counts once, not twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sign_in_reservation_whose_commit_reply_is_lost_counts_once() {
    let (_pg, s, faults, [a_direct, _], _tmp) = two_nodes_with_hooks(|c| c.rate_limit.failures_per_account = 2).await;
    s.nodes[0].new_user("erin").await;
    faults[0].lose_next_commit_replies(1);
    assert_eq!(a_direct.sign_in("erin@example.com", "wrong password!").await.0, 401);
    assert_eq!(a_direct.sign_in("erin@example.com", "wrong password!").await.0, 401, "the first one counted twice");
    assert_eq!(a_direct.sign_in("erin@example.com", "wrong password!").await.0, 429, "the limit still holds");
    s.stop().await;
}

/// Issue 25.14: PostgreSQL goes away and nothing is written: each node's `/readyz` turns 503 within a few of its
/// follower's polls, not `max_staleness_secs` (30 s here) later, while session checks still answer from memory.
/// Before: both nodes answered 200 until the first failed write or for 30 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_follows_the_followers_last_contact_with_the_database() {
    let (pg, s, _tmp) = two_nodes(|c| c.store.max_staleness_secs = 30).await;
    let alice = s.nodes[0].new_user("alice").await;
    let direct = |c: &Client| Client::new(c.base.trim_start_matches("http://").parse().unwrap());
    let nodes = [direct(&s.nodes[0]), direct(&s.nodes[1])];
    let pg = std::sync::Arc::new(pg);
    let stopper = std::sync::Arc::clone(&pg);
    tokio::task::spawn_blocking(move || stopper.pause()).await.unwrap();
    let stopped = Instant::now();
    for node in &nodes {
        loop {
            let ready = node.get("/readyz").send().await;
            if ready.status == 503 {
                assert_eq!(ready.json()["status"], "unavailable");
                break;
            }
            assert!(stopped.elapsed() < Duration::from_secs(10), "still ready 10 s after the database went away");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let session = node.get_session_resp(Some(&alice.cookie)).await;
        assert_eq!(session.status, 200, "within max_staleness_secs session checks answer: {}", session.text);
    }
    eprintln!("both nodes not ready {:?} after PostgreSQL stopped", stopped.elapsed());
    let starter = std::sync::Arc::clone(&pg);
    tokio::task::spawn_blocking(move || starter.resume()).await.unwrap();
    let back = Instant::now();
    for node in &nodes {
        while node.get("/readyz").send().await.status != 200 {
            assert!(back.elapsed() < Duration::from_secs(10), "not ready 10 s after PostgreSQL came back");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    s.stop().await;
}

/// A TCP proxy on loopback in front of PostgreSQL that can freeze the connections it carries: they stay open and
/// every byte sent is accepted, but nothing more passes either way (a stuck middlebox; TCP keepalives see a
/// healthy peer). Connections made after a freeze pass.
struct FreezingProxy {
    addr: std::net::SocketAddr,
    connections: std::sync::Arc<std::sync::Mutex<Vec<std::sync::Arc<std::sync::atomic::AtomicBool>>>>,
}

impl FreezingProxy {
    async fn start(upstream: std::net::SocketAddr) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let connections = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let registry = std::sync::Arc::clone(&connections);
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = tokio::net::TcpStream::connect(upstream).await else { continue };
                let frozen = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
                registry.lock().unwrap().push(std::sync::Arc::clone(&frozen));
                let (client_read, client_write) = client.into_split();
                let (server_read, server_write) = server.into_split();
                tokio::spawn(Self::pump(client_read, server_write, std::sync::Arc::clone(&frozen)));
                tokio::spawn(Self::pump(server_read, client_write, frozen));
            }
        });
        Self { addr, connections }
    }

    async fn pump(
        mut from: tokio::net::tcp::OwnedReadHalf,
        mut to: tokio::net::tcp::OwnedWriteHalf,
        frozen: std::sync::Arc<std::sync::atomic::AtomicBool>,
    ) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let is_frozen = || frozen.load(std::sync::atomic::Ordering::SeqCst);
        let mut buf = vec![0; 16 * 1024];
        loop {
            let n = match from.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            if is_frozen() {
                // Both sockets held open, nothing forwarded, ever.
                std::future::pending::<()>().await;
            }
            if to.write_all(&buf[..n]).await.is_err() {
                return;
            }
        }
    }

    /// Freezes every connection open now.
    fn freeze_existing(&self) {
        for frozen in self.connections.lock().unwrap().iter() {
            frozen.store(true, std::sync::atomic::Ordering::SeqCst);
        }
    }
}

/// Issue 26.4: every database connection of a node freezes (a proxy that keeps them open and forwards nothing
/// more), while new connections work. The node gives the frozen ones up and recovers by itself: writes, session
/// checks and readiness come back. Before: the writer and the follower waited forever; every write took 10 s
/// then 503, session checks 503 after `max_staleness_secs`, and the node had not recovered minutes later.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_recovers_by_itself_from_frozen_database_connections() {
    let pg = tokio::task::spawn_blocking(cluster::Postgres::start).await.unwrap();
    let upstream = pg.url().trim_start_matches("postgres://postgres@").split('/').next().unwrap().parse().unwrap();
    let proxy = FreezingProxy::start(upstream).await;
    let tmp = tempfile::tempdir().unwrap();
    let mut config = test_config(tmp.path());
    config.store.backend = service_auth::config::StoreBackend::Postgres;
    config.store.url = Some(format!("postgres://postgres@{}/postgres", proxy.addr));
    let s = TestServer::start_with_faults(config, service_auth::store::FaultSwitch::default()).await;
    let alice = s.new_user("alice").await;
    proxy.freeze_existing();
    let frozen = Instant::now();
    for n in 0.. {
        let (status, _, _) = s.sign_up("Late", &format!("late{n}@example.com"), PASSWORD).await;
        if status == 200 {
            break;
        }
        assert_eq!(status, 503);
        assert!(frozen.elapsed() < Duration::from_secs(90), "no write went through 90 s after the freeze");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let writes = frozen.elapsed();
    loop {
        let session = s.get_session_resp(Some(&alice.cookie)).await;
        let ready = s.get("/readyz").send().await;
        if session.status == 200 && ready.status == 200 {
            assert_eq!(session.json()["user"]["email"], alice.email);
            break;
        }
        assert!(frozen.elapsed() < Duration::from_secs(90), "session checks or readiness not back 90 s after it");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    eprintln!(
        "frozen connections: writes back after {writes:?}, session checks and readiness after {:?}",
        frozen.elapsed()
    );
    s.stop().await;
}

/// Issue 26.6: two nodes' batches that need the same account row and the administrators' lock, each in the
/// order its requests come: node A's first request rewrites administrator X (its row), its second demotes
/// administrator Y (the lock); node B's one request demotes X (the lock, then X's row). B is made to queue for
/// the lock first, A behind it holding X's row: crosswise. Before: PostgreSQL killed one as a deadlock and its
/// whole batch failed, degrading that node's store. After: both commit (the locks are taken in one order, and a
/// victim would be run again).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_nodes_batches_taking_the_same_locks_crosswise_both_commit() {
    use service_auth::store::{Store, StoreOp, UserRecord};
    const ADMINS_LOCK: i64 = 0x7361_0003;
    let pg = tokio::task::spawn_blocking(cluster::Postgres::start).await.unwrap();
    let url = pg.url();
    tokio::task::spawn_blocking(move || {
        let (a, b) = (Store::connect_postgres(&url, 1).unwrap(), Store::connect_postgres(&url, 1).unwrap());
        let admin = |n: u8| UserRecord {
            id: [n; 16],
            name: format!("Admin {n}"),
            email: format!("admin{n}@example.com"),
            image: None,
            role: "admin".into(),
            banned: false,
            ban_reason: None,
            organization_id: None,
            password_hash: String::new(),
            created_at_ms: 0,
            updated_at_ms: 0,
            email_verified: true,
            ban_expires_ms: None,
            two_factor: None,
            username: None,
            display_username: None,
        };
        let (x, y, z) = (admin(1), admin(2), admin(3));
        a.commit(&[StoreOp::PutUser(x.clone()), StoreOp::PutUser(y.clone()), StoreOp::PutUser(z)]).unwrap();
        let demoted = |r: &UserRecord| UserRecord { role: "user".into(), ..r.clone() };
        let renamed = UserRecord { name: "X renamed".into(), ..x.clone() };

        let mut holder = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        let waiting = |client: &mut postgres::Client, n: i64| loop {
            let queued: i64 = client
                .query_one("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted", &[])
                .unwrap()
                .get(0);
            if queued >= n {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let mut hold = holder.transaction().unwrap();
        hold.execute("SELECT pg_advisory_xact_lock($1)", &[&ADMINS_LOCK]).unwrap();
        let mut watcher = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        std::thread::scope(|scope| {
            let on_b = scope.spawn(|| b.commit_batch(&[&[StoreOp::PutUser(demoted(&x))]]));
            waiting(&mut watcher, 1);
            let on_a =
                scope.spawn(|| a.commit_batch(&[&[StoreOp::PutUser(renamed)], &[StoreOp::PutUser(demoted(&y))]]));
            waiting(&mut watcher, 2);
            hold.commit().unwrap();
            let (on_a, on_b) = (on_a.join().unwrap(), on_b.join().unwrap());
            assert!(on_a.is_ok() && on_b.is_ok(), "a batch failed: node A {on_a:?}, node B {on_b:?}");
            for result in on_a.unwrap().into_iter().chain(on_b.unwrap()) {
                assert!(result.is_ok(), "{result:?}");
            }
        });
        assert!(a.health().is_ok() && b.health().is_ok(), "a store is degraded");
        let users = a.load().unwrap().users;
        assert_eq!(users.iter().find(|u| u.id == [2; 16]).unwrap().role, "user", "node A's second request");
        a.close();
        b.close();
    })
    .await
    .unwrap();
}

/// The last owner across nodes: two owners of one organization remove each other at once, one through each node.
/// Each node's actor sees two owners and lets its removal through; PostgreSQL's `ExpectOwner`, counting under a
/// lock of the organization's row, refuses the second, so the organization always keeps exactly one owner.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_owners_removing_each_other_on_different_nodes_leave_one() {
    let (_pg, s, _tmp) = two_nodes(|_| {}).await;
    let (a, b) = (&s.nodes[0], &s.nodes[1]);
    let admin = a.admin_session().await;
    let (one, two) = (a.new_user("one").await, a.new_user("two").await);
    let two_on_b = b.login(&two.email, PASSWORD).await;
    let created = a
        .post("/api/auth/organization/create")
        .cookie(&one.cookie)
        .json(&json!({"name": "Race", "slug": "race"}))
        .send()
        .await;
    assert_eq!(created.status, 200, "{}", created.text);
    let org = created.json()["id"].as_str().unwrap().to_owned();
    let members = |node: &'static str| {
        let (client, cookie) = if node == "a" { (a, admin.clone()) } else { (b, admin.clone()) };
        let org = org.clone();
        async move {
            let r = client
                .get(&format!("/api/auth/organization/list-members?organizationId={org}"))
                .cookie(&cookie)
                .send()
                .await;
            assert_eq!(r.status, 200, "{}", r.text);
            r.json()["members"].as_array().unwrap().clone()
        }
    };
    let owners = |list: &[serde_json::Value]| list.iter().filter(|m| m["role"] == "owner").count();
    for round in 0..5 {
        // Both owners again: `two` joins (the administrator's primary membership) and `one` makes them an owner.
        a.patch_ok(&admin, &json!({"userId": two.id, "organizationId": org})).await;
        let list = members("a").await;
        let two_member = list.iter().find(|m| m["userId"] == two.id.as_str()).unwrap()["id"].clone();
        let made = a
            .post("/api/auth/organization/update-member-role")
            .cookie(&one.cookie)
            .json(&json!({"memberId": two_member, "role": "owner", "organizationId": org}))
            .send()
            .await;
        assert_eq!(made.status, 200, "round {round}: {}", made.text);
        // Node b must know `two` is an owner before it acts for them.
        let started = Instant::now();
        while owners(&members("b").await) < 2 {
            assert!(started.elapsed() < Duration::from_secs(10), "node b never saw the second owner");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let remove = |email: &str| json!({"memberIdOrEmail": email, "organizationId": org});
        let (x, y) = tokio::join!(
            a.post("/api/auth/organization/remove-member").cookie(&one.cookie).json(&remove(&two.email)).send(),
            b.post("/api/auth/organization/remove-member").cookie(&two_on_b).json(&remove(&one.email)).send(),
        );
        let mut statuses = [x.status, y.status];
        statuses.sort_unstable();
        assert_eq!(statuses, [200, 400], "round {round}: {} {} / {} {}", x.status, x.text, y.status, y.text);
        let refused = if x.status == 400 { &x } else { &y };
        let code = refused.json()["code"].as_str().unwrap().to_owned();
        assert!(
            code == "YOU_CANNOT_LEAVE_THE_ORGANIZATION_AS_THE_ONLY_OWNER" || code == "MEMBER_NOT_FOUND",
            "round {round}: {}",
            refused.text
        );
        for node in ["a", "b"] {
            let started = Instant::now();
            loop {
                let list = members(node).await;
                if list.len() == 1 {
                    assert_eq!(owners(&list), 1, "round {round}: node {node}: {list:?}");
                    break;
                }
                assert!(started.elapsed() < Duration::from_secs(10), "round {round}: node {node} holds {list:?}");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        // The one removed is no member any more on either node: they can no longer act in it.
        let (gone, gone_cookie) = if x.status == 200 { (&two, two_on_b.clone()) } else { (&one, one.cookie.clone()) };
        for node in [a, b] {
            let r = node
                .get(&format!("/api/auth/organization/list-members?organizationId={org}"))
                .cookie(&gone_cookie)
                .send()
                .await;
            let refused = (r.status, r.json()["code"].clone());
            assert_eq!(refused, (403, json!("YOU_ARE_NOT_A_MEMBER_OF_THIS_ORGANIZATION")), "{}", gone.email);
        }
        // The survivor is `one` again for the next round.
        if x.status != 200 {
            // `two` is the owner now: swap the roles of the two accounts for the next round.
            a.patch_ok(&admin, &json!({"userId": one.id, "organizationId": org})).await;
            let list = members("a").await;
            let one_member = list.iter().find(|m| m["userId"] == one.id.as_str()).unwrap()["id"].clone();
            let two_on_a = a.login(&two.email, PASSWORD).await;
            let made = a
                .post("/api/auth/organization/update-member-role")
                .cookie(&two_on_a)
                .json(&json!({"memberId": one_member, "role": "owner", "organizationId": org}))
                .send()
                .await;
            assert_eq!(made.status, 200, "{}", made.text);
            let r = a
                .post("/api/auth/organization/leave")
                .cookie(&two_on_a)
                .json(&json!({"organizationId": org}))
                .send()
                .await;
            assert_eq!(r.status, 200, "{}", r.text);
        }
    }
    s.stop().await;
}

/// A row of the test's database locked by a transaction of the test's own (`SELECT … FOR UPDATE`), so a node's
/// commit that needs the row waits, in flight, until [`release`](Self::release). On a thread of its own: the
/// synchronous client holds the transaction open across the test's awaits.
struct RowLock {
    release: std::sync::mpsc::Sender<()>,
    holder: std::thread::JoinHandle<()>,
    url: String,
}

impl RowLock {
    /// Locks the rows `select` (a `SELECT … FOR UPDATE` with one `bytea` parameter, `id`) finds; returns once held.
    async fn take(url: &str, select: &'static str, id: [u8; 16]) -> Self {
        let (release, released) = std::sync::mpsc::channel::<()>();
        let (locked, held) = tokio::sync::oneshot::channel();
        let connect = url.to_owned();
        let holder = std::thread::spawn(move || {
            let mut client = postgres::Client::connect(&connect, postgres::NoTls).unwrap();
            let mut tx = client.transaction().unwrap();
            let rows = tx.query(select, &[&id.as_slice()]).unwrap();
            assert!(!rows.is_empty(), "no row to lock: {select}");
            locked.send(()).unwrap();
            let _ = released.recv();
            tx.commit().unwrap();
        });
        held.await.expect("the row lock was taken");
        Self { release, holder, url: url.to_owned() }
    }

    /// Returns once a statement beginning with `statement` waits for a lock (the node's commit, behind this one).
    async fn waited_for_by(&self, statement: &str) {
        let (url, pattern) = (self.url.clone(), format!("{statement}%"));
        tokio::task::spawn_blocking(move || {
            let mut watcher = postgres::Client::connect(&url, postgres::NoTls).unwrap();
            loop {
                let waiting: i64 = watcher
                    .query_one(
                        "SELECT count(*) FROM pg_stat_activity \
                         WHERE wait_event_type = 'Lock' AND datname = current_database() AND query LIKE $1",
                        &[&pattern],
                    )
                    .unwrap()
                    .get(0);
                if waiting > 0 {
                    return;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        })
        .await
        .unwrap();
    }

    fn release(self) {
        self.release.send(()).unwrap();
        self.holder.join().unwrap();
    }
}

/// Two nodes with test hooks (direct clients: a request through the replicating one would wait for a node whose
/// commit the test holds), and the URL of their database.
async fn two_nodes_and_their_database() -> (cluster::Postgres, TestServer, [Client; 2], String, tempfile::TempDir) {
    let mut data_dir = None;
    let (pg, s, _faults, clients, tmp) = two_nodes_with_hooks(|c| data_dir = Some(c.data_dir.clone())).await;
    let url = cluster::database_for(&pg.url(), &data_dir.unwrap()).await;
    (pg, s, clients, url, tmp)
}

fn id_bytes(id: &str) -> [u8; 16] {
    *uuid::Uuid::parse_str(id).unwrap().as_bytes()
}

/// Polls node `b`'s get-session with `cookie` until it finds none, checking each time that `in_flight` (node B's
/// own request, whose commit the test holds) has not ended: the change must reach B while its commit waits.
async fn refused_while_in_flight(b: &Client, cookie: &str, in_flight: &tokio::task::JoinHandle<Resp>) {
    loop {
        assert!(
            !in_flight.is_finished(),
            "node B's own request ended (its commit gave up on the held row) before the change from node A \
             reached B: B applied it only after its own commit"
        );
        if b.get_session_resp(Some(cookie)).await.text == "null" {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Issue #33 target 5: a ban made on node A reaches node B while B's users actor waits for a commit of its own.
/// The test holds in PostgreSQL the row of the account B's administrator renames, so B's commit stays in flight,
/// and meanwhile bans another account on A. Before: the actor took A's ban only after its commit (it takes no
/// message while its flush awaits the database), so under writes B served a banned account's session for as long
/// as its commits lasted. After: refused while B's commit is still held; released, B's rename is acknowledged,
/// and neither change undid the other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ban_from_another_node_does_not_wait_for_this_nodes_commit_in_flight() {
    let (_pg, s, [a_direct, b_direct], url, _tmp) = two_nodes_and_their_database().await;
    let (a, b) = (&s.nodes[0], &s.nodes[1]);
    let admin = a.admin_session().await;
    let (victim, renamed) = (a.new_user("victim").await, a.new_user("renamed").await);
    assert_eq!(b_direct.session(&victim.cookie).await["user"]["id"], victim.id.as_str());

    let lock = RowLock::take(&url, "SELECT 1 FROM users WHERE id = $1 FOR UPDATE", id_bytes(&renamed.id)).await;
    let rename = tokio::spawn({
        let (b, admin) = (b_direct.clone(), admin.clone());
        let body = json!({"userId": renamed.id, "data": {"name": "Renamed on B"}});
        async move { b.post("/api/auth/admin/update-user").cookie(&admin).json(&body).send().await }
    });
    // B's batch takes its accounts' rows up front, before writing anything.
    lock.waited_for_by("SELECT 1 FROM users WHERE id = ANY").await;
    a_direct.patch_ok(&admin, &json!({"userId": victim.id, "banned": true})).await;
    refused_while_in_flight(&b_direct, &victim.cookie, &rename).await;

    lock.release();
    let rename = rename.await.unwrap();
    assert_eq!(rename.status, 200, "node B's own write: {}", rename.text);
    // Through the replicating client: both nodes have applied the whole change log.
    b.get("/healthz").send().await;
    for (name, node) in [("A", a), ("B", b)] {
        assert_eq!(node.listed_user(&admin, &renamed.id).await["name"], "Renamed on B", "node {name}");
        assert_eq!(node.listed_user(&admin, &victim.id).await["banned"], true, "node {name}");
        assert_eq!(node.get_session_resp(Some(&victim.cookie)).await.text, "null", "node {name}");
        assert_eq!(node.session(&renamed.cookie).await["user"]["name"], "Renamed on B", "node {name}");
    }
    s.stop().await;
}

/// The same for the sessions actor: an administrator ends every session of an account on node A while node B's
/// sessions actor waits for a commit of its own (a sign-out, whose session row the test holds). Before: B served
/// the ended session until its own commit was over. After: refused while it is still held; released, the
/// sign-out is acknowledged and both sessions stay ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_ended_on_another_node_do_not_wait_for_this_nodes_commit_in_flight() {
    let (_pg, s, [a_direct, b_direct], url, _tmp) = two_nodes_and_their_database().await;
    let (a, b) = (&s.nodes[0], &s.nodes[1]);
    let admin = a.admin_session().await;
    let (victim, leaving) = (a.new_user("victim").await, a.new_user("leaving").await);
    assert_eq!(b_direct.session(&victim.cookie).await["user"]["id"], victim.id.as_str());

    let lock = RowLock::take(&url, "SELECT 1 FROM sessions WHERE user_id = $1 FOR UPDATE", id_bytes(&leaving.id)).await;
    let sign_out = tokio::spawn({
        let (b, cookie) = (b_direct.clone(), leaving.cookie.clone());
        async move { b.sign_out(Some(&cookie)).await }
    });
    lock.waited_for_by("DELETE FROM sessions WHERE user_id").await;
    let revoked = a_direct
        .post("/api/auth/admin/revoke-user-sessions")
        .cookie(&admin)
        .json(&json!({"userId": victim.id}))
        .send()
        .await;
    assert_eq!(revoked.status, 200, "{}", revoked.text);
    refused_while_in_flight(&b_direct, &victim.cookie, &sign_out).await;

    lock.release();
    let sign_out = sign_out.await.unwrap();
    assert_eq!(sign_out.status, 200, "node B's own write: {}", sign_out.text);
    b.get("/healthz").send().await;
    for (name, node) in [("A", a), ("B", b)] {
        for cookie in [&victim.cookie, &leaving.cookie] {
            assert_eq!(node.get_session_resp(Some(cookie)).await.text, "null", "node {name}");
        }
    }
    s.stop().await;
}

/// Waits (at most 5 s) until `node` (a direct client: nothing waits for its follower) serves the session `cookie`.
async fn seen_on(node: &Client, cookie: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while node.get_session_resp(Some(cookie)).await.text == "null" {
        assert!(Instant::now() < deadline, "the other node never saw the session: its follower stopped?");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// postcard's length prefix (LEB128).
fn varint(mut n: usize, out: &mut Vec<u8>) {
    while n >= 0x80 {
        out.push((n as u8 & 0x7f) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// Rolling upgrades (docs/cluster.md, "Rolling upgrades"): records of the next release's formats on the shared
/// database, met by this release's nodes as the rule says. A session rewritten by a newer node in a format above
/// this release's, and a one-time token of such a format, come through the change log: both nodes drop the
/// session (refused on both, never served from the older copy) and keep following (a later sign-up reaches the
/// other node, both stay ready); a node starting on that database loads without them. An account of a newer
/// format may not be skipped: a node starting then refuses, naming it, before serving. Before: each node's
/// follower stopped at the token ("newer than this version of service-auth reads"), both went not ready, and a
/// node could not start on the database.
///
/// "The previous release's binary": there is no release tag, and the release before this one predates the rule,
/// so running its binary (a second build of the crate at the commit before: not measured; the crate alone
/// rebuilds in about two minutes here with the dependencies already built, and a clean target dir costs the whole
/// dependency build again) would show only that it reads what this release writes. That
/// is held without a second build by `store::codec::tests::this_release_writes_what_the_previous_one_reads`
/// (the formats written, pinned to those the previous release reads). This test plays the newer node instead:
/// it writes exactly the bytes a release one ahead would write (the change log's entry format 3, records with a
/// higher version byte and the session's `id` and `user_id` first) and shows how this release, as the older
/// node of the next upgrade, handles them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_of_a_newer_release_are_skipped_or_refused_as_the_upgrade_rule_says() {
    let (_pg, s, [a, b], url, _tmp) = two_nodes_and_their_database().await;
    let user = a.new_user("upgraded").await;
    seen_on(&b, &user.cookie).await;
    let uid = id_bytes(&user.id);
    let db_url = url.clone();
    tokio::task::spawn_blocking(move || {
        let mut db = postgres::Client::connect(&db_url, postgres::NoTls).unwrap();
        let row = db.query_one("SELECT hash, record FROM sessions WHERE user_id = $1", &[&uid.as_slice()]).unwrap();
        let (hash, mut session): (Vec<u8>, Vec<u8>) = (row.get(0), row.get(1));
        // The newer formats: one above the newest version byte this release reads (a session without a team
        // is still written in an older one), a field added at the end.
        session[0] =
            <service_auth::store::records::SessionRecordV4 as service_auth::store::codec::Versioned>::VERSION + 1;
        session.extend([1, 7]);
        let token = vec![9u8, 1, 2, 3];
        let token_hash = [9u8; 32];
        db.execute("UPDATE sessions SET record = $1 WHERE hash = $2", &[&session, &hash]).unwrap();
        db.execute("INSERT INTO tokens (hash, record) VALUES ($1, $2)", &[&token_hash.as_slice(), &token]).unwrap();
        // The change log entry: format 3, postcard of [PutSession(hash, record), PutToken(hash, record)].
        let mut entry = vec![3, 2, 4];
        entry.extend(&hash);
        varint(session.len(), &mut entry);
        entry.extend(&session);
        entry.push(6);
        entry.extend(token_hash);
        varint(token.len(), &mut entry);
        entry.extend(&token);
        db.execute("INSERT INTO changes (node, ops) VALUES ($1, $2)", &[&uuid::Uuid::new_v4(), &entry]).unwrap();
        db.execute("SELECT pg_notify('service_auth_changes', 'newer')", &[]).unwrap();
    })
    .await
    .unwrap();

    for (name, node) in [("A", &a), ("B", &b)] {
        let deadline = Instant::now() + Duration::from_secs(5);
        while node.get_session_resp(Some(&user.cookie)).await.text != "null" {
            assert!(Instant::now() < deadline, "node {name} still serves the session from its older copy");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    // Both still follow the change log: a later sign-up on A signs in on B, and both stay ready.
    let later = a.new_user("later").await;
    seen_on(&b, &later.cookie).await;
    tokio::time::sleep(Duration::from_millis(2500)).await;
    for (name, node) in [("A", &a), ("B", &b)] {
        let ready = node.get("/readyz").send().await;
        assert_eq!(ready.status, 200, "node {name}: {}", ready.text);
    }

    // A node starting now loads without the skipped records; with an account of a newer format it refuses.
    let refused = tokio::task::spawn_blocking(move || {
        let store = service_auth::store::Store::connect_postgres(&url, 1).unwrap();
        let loaded = store.load().expect("a node starts with the newer session and token skipped");
        assert!(!loaded.sessions.iter().any(|(_, r)| r.user_id == uid), "the newer session was loaded");
        assert!(loaded.users.iter().any(|u| u.id == uid));
        let mut db = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        db.execute("UPDATE users SET record = set_byte(record, 0, 9) WHERE id = $1", &[&uid.as_slice()]).unwrap();
        store.load().expect_err("an account of a newer format was loaded").to_string()
    })
    .await
    .unwrap();
    assert!(
        refused.contains("user record has format version 9, newer than") && refused.contains("upgrade this node"),
        "{refused}"
    );
    s.stop().await;
}
