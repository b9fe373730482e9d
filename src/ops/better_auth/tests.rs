//! Small better-auth SQLite files built with the schema better-auth's migrations create (the end-to-end test
//! with a real better-auth server is `tests/migration/`).

use std::path::{Path, PathBuf};

use rusqlite::{Connection, params};

use super::*;
use crate::store::{Store, StoreOp};

/// better-auth 1.7's SQLite schema with the admin and organization plugins (dates as ISO text, booleans 0/1).
const SCHEMA: &str = r#"
CREATE TABLE "user" ("id" text NOT NULL PRIMARY KEY, "name" text NOT NULL, "email" text NOT NULL UNIQUE,
  "emailVerified" integer NOT NULL, "image" text, "createdAt" date NOT NULL, "updatedAt" date NOT NULL,
  "role" text, "banned" integer, "banReason" text, "banExpires" date);
CREATE TABLE "session" ("id" text NOT NULL PRIMARY KEY, "expiresAt" date NOT NULL, "token" text NOT NULL UNIQUE,
  "createdAt" date NOT NULL, "updatedAt" date NOT NULL, "ipAddress" text, "userAgent" text,
  "userId" text NOT NULL REFERENCES "user" ("id"), "impersonatedBy" text, "activeOrganizationId" text);
CREATE TABLE "account" ("id" text NOT NULL PRIMARY KEY, "accountId" text NOT NULL, "providerId" text NOT NULL,
  "userId" text NOT NULL REFERENCES "user" ("id"), "accessToken" text, "refreshToken" text, "idToken" text,
  "accessTokenExpiresAt" date, "refreshTokenExpiresAt" date, "scope" text, "password" text,
  "createdAt" date NOT NULL, "updatedAt" date NOT NULL);
CREATE TABLE "organization" ("id" text NOT NULL PRIMARY KEY, "name" text NOT NULL, "slug" text NOT NULL UNIQUE,
  "logo" text, "createdAt" date NOT NULL, "metadata" text);
CREATE TABLE "member" ("id" text NOT NULL PRIMARY KEY, "organizationId" text NOT NULL, "userId" text NOT NULL,
  "role" text NOT NULL, "createdAt" date NOT NULL);
CREATE TABLE "invitation" ("id" text NOT NULL PRIMARY KEY, "organizationId" text NOT NULL, "email" text NOT NULL,
  "role" text, "status" text NOT NULL, "expiresAt" date NOT NULL, "createdAt" date NOT NULL,
  "inviterId" text NOT NULL);
"#;

/// Made by better-auth 1.7.25 for "correct horse battery".
const HASH: &str = include_str!("../../../tests/migration/fixtures/better-auth-hash.txt");

struct Db {
    conn: Connection,
    path: PathBuf,
}

impl Db {
    fn new(dir: &Path) -> Self {
        let path = dir.join("better-auth.db");
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch(SCHEMA).unwrap();
        Self { conn, path }
    }

    #[allow(clippy::too_many_arguments)]
    fn user(&self, id: &str, email: Option<&str>, role: Option<&str>, banned: bool, expires: Option<&str>) {
        self.conn
            .execute(
                r#"INSERT INTO "user" VALUES (?1, ?2, ?3, 1, NULL, '2026-01-02T03:04:05.678Z',
                   '2026-01-03T03:04:05.678Z', ?4, ?5, ?6, ?7)"#,
                params![id, format!("Name {id}"), email, role, i64::from(banned), banned.then_some("spam"), expires],
            )
            .unwrap();
    }

    fn password(&self, user: &str, hash: &str) {
        self.conn
            .execute(
                r#"INSERT INTO "account" ("id", "accountId", "providerId", "userId", "password", "createdAt",
                   "updatedAt") VALUES (?1, ?2, 'credential', ?2, ?3, '2026-01-02T03:04:05.678Z',
                   '2026-01-02T03:04:05.678Z')"#,
                params![format!("acc-{user}"), user, hash],
            )
            .unwrap();
    }

    fn org(&self, id: &str, slug: &str) {
        self.conn
            .execute(
                r#"INSERT INTO "organization" VALUES (?1, ?2, ?3, NULL, '2026-01-01T00:00:00.000Z', '{}')"#,
                params![id, format!("Org {slug}"), slug],
            )
            .unwrap();
    }

    fn member(&self, org: &str, user: &str, at: &str) {
        self.conn
            .execute(
                r#"INSERT INTO "member" VALUES (?1, ?2, ?3, 'member', ?4)"#,
                params![format!("m-{org}-{user}"), org, user, at],
            )
            .unwrap();
    }
}

fn config(dir: &Path) -> Config {
    Config { data_dir: dir.join("data"), ..Config::default() }
}

fn options(db: &Db) -> Options {
    Options { source: Source::Sqlite(db.path.clone()), dry_run: false, mapping_out: None, secret: None }
}

fn stored(config: &Config) -> crate::store::Loaded {
    Store::open(&config.data_dir).unwrap().load().unwrap()
}

#[test]
fn users_passwords_roles_bans_and_organizations_come_over_with_a_mapping() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::new(dir.path());
    db.user("uAdmin0000000000000000000000000", Some("Admin@Example.com"), Some("user,admin"), false, None);
    db.user("uBanned000000000000000000000000", Some("banned@example.com"), Some("user"), true, None);
    db.user("uOdd00000000000000000000000000", Some("odd@example.com"), Some("superuser"), false, None);
    db.user("uLapsed00000000000000000000000", Some("lapsed@example.com"), None, true, Some("2020-01-01T00:00:00.000Z"));
    db.user("uSocial00000000000000000000000", Some("social@example.com"), None, false, None);
    db.user("uLater000000000000000000000000", Some("later@example.com"), None, true, Some("2999-01-01T00:00:00.000Z"));
    for user in ["uAdmin0000000000000000000000000", "uBanned000000000000000000000000", "uOdd00000000000000000000000000"]
    {
        db.password(user, HASH.trim());
    }
    db.password("uLapsed00000000000000000000000", HASH.trim());
    db.password("uLater000000000000000000000000", HASH.trim());
    db.conn
        .execute(
            r#"UPDATE "user" SET "image" = 'javascript:alert(1)' WHERE "id" = 'uOdd00000000000000000000000000'"#,
            [],
        )
        .unwrap();
    db.conn
        .execute(
            r#"UPDATE "user" SET "image" = 'https://cdn.example.com/a.png' WHERE "email" = 'Admin@Example.com'"#,
            [],
        )
        .unwrap();
    db.conn.execute(r#"UPDATE "user" SET "name" = '' WHERE "email" = 'social@example.com'"#, []).unwrap();
    db.org("o1", "st-mary");
    db.org("o2", "north");
    db.member("o2", "uAdmin0000000000000000000000000", "2026-02-01T00:00:00.000Z");
    db.member("o1", "uAdmin0000000000000000000000000", "2026-01-15T00:00:00.000Z");
    db.member("o1", "uBanned000000000000000000000000", "2026-01-15T00:00:00.000Z");
    let owner_row = r#"UPDATE "member" SET "role" = 'owner, boss' WHERE "id" = 'm-o1-uAdmin0000000000000000000000000'"#;
    db.conn.execute(owner_row, []).unwrap();
    for (id, status, expires) in [
        ("i-open", "pending", "2999-01-01T00:00:00.000Z"),
        ("i-expired", "pending", "2020-01-01T00:00:00.000Z"),
        ("i-used", "accepted", "2999-01-01T00:00:00.000Z"),
    ] {
        db.conn
            .execute(
                r#"INSERT INTO "invitation" VALUES (?1, 'o1', 'New@Example.com', 'admin', ?2, ?3,
                   '2026-03-01T00:00:00.000Z', 'uAdmin0000000000000000000000000')"#,
                params![id, status, expires],
            )
            .unwrap();
    }
    let config = config(dir.path());
    let mapping = dir.path().join("mapping.jsonl");
    let report = import(&config, &Options { mapping_out: Some(mapping.clone()), ..options(&db) }).unwrap();
    assert!(
        report.contains("imported: 6 users (1 administrators, 2 banned; 5 with better-auth password hashes"),
        "{report}"
    );
    assert!(report.contains("2 organizations, 3 memberships, 1 pending invitations"), "{report}");
    assert!(report.contains("2 invitation(s) no longer pending (or expired): not imported"), "{report}");
    // The closing line says what stays behind: not the pending invitations, which come over.
    assert!(report.ends_with("verification tokens, invitations no longer pending"), "{report}");
    assert!(report.contains("role \"superuser\" imported as user (superuser"), "{report}");
    assert!(!report.contains("dropped (one organization per account"), "{report}");
    assert!(report.contains("lapsed@example.com: the ban expired; imported unbanned"), "{report}");
    assert!(report.contains("social@example.com: no password"), "{report}");

    let loaded = stored(&config);
    let by_email = |e: &str| loaded.users.iter().find(|u| u.email == e).unwrap().clone();
    let admin = by_email("admin@example.com");
    assert_eq!((admin.role.as_str(), admin.banned, admin.email_verified), ("admin", false, true));
    assert_eq!(admin.password_hash, HASH.trim(), "the hash is kept as it is");
    assert_eq!(admin.image.as_deref(), Some("https://cdn.example.com/a.png"));
    assert_eq!(by_email("odd@example.com").image, None);
    assert!(report.contains("odd@example.com: image dropped"), "{report}");
    assert_eq!(admin.created_at_ms, parse_time_ok("2026-01-02T03:04:05.678Z"));
    let st_mary = loaded.orgs.iter().find(|o| o.slug == "st-mary").unwrap();
    assert_eq!(admin.organization_id, Some(st_mary.id), "the first membership is the primary one");
    let north = loaded.orgs.iter().find(|o| o.slug == "north").unwrap();
    let mut of_admin: Vec<[u8; 16]> = loaded.members.iter().filter(|m| m.user == admin.id).map(|m| m.org).collect();
    of_admin.sort_unstable();
    let mut both = vec![st_mary.id, north.id];
    both.sort_unstable();
    assert_eq!(of_admin, both, "every membership comes over");
    let [open] = &loaded.invitations[..] else { panic!("one invitation: {:?}", loaded.invitations) };
    let open = (open.org, open.inviter, open.email.as_str(), open.roles, open.status);
    assert_eq!(open, (st_mary.id, admin.id, "new@example.com", 2, 0), "pending, from an imported inviter");
    let roles =
        |org: [u8; 16], user: [u8; 16]| loaded.members.iter().find(|m| m.org == org && m.user == user).unwrap().roles;
    assert_eq!(roles(st_mary.id, admin.id), 1, "owner, the custom role left out");
    assert!(report.contains("role(s) boss not served here, left out"), "{report}");
    assert_eq!((roles(north.id, admin.id), roles(st_mary.id, by_email("banned@example.com").id)), (4, 4));
    let banned = by_email("banned@example.com");
    assert_eq!((banned.banned, banned.ban_reason.as_deref()), (true, Some("spam")));
    assert!(!by_email("lapsed@example.com").banned);
    let later = by_email("later@example.com");
    assert_eq!((later.banned, later.ban_expires_ms), (true, Some(parse_time_ok("2999-01-01T00:00:00.000Z"))));
    assert!(by_email("social@example.com").password_hash.starts_with("$argon2id$"));
    assert_eq!(by_email("social@example.com").name, "social", "an empty name becomes the e-mail's local part");

    let lines: Vec<serde_json::Value> =
        std::fs::read_to_string(&mapping).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 9, "6 users, 2 organizations, 1 invitation");
    let invited = lines.iter().find(|l| l["type"] == "invitation").unwrap();
    assert_eq!(
        (invited["better_auth_id"].clone(), invited["key"].clone()),
        (serde_json::json!("i-open"), serde_json::json!("new@example.com"))
    );
    let line = lines.iter().find(|l| l["better_auth_id"] == "uAdmin0000000000000000000000000").unwrap();
    assert_eq!(line["id"], uuid::Uuid::from_bytes(admin.id).to_string());
    assert_eq!(line["type"], "user");
}

fn parse_time_ok(t: &str) -> i64 {
    plan::parse_time(t).unwrap()
}

#[test]
fn times_in_the_forms_databases_write_are_read() {
    let ms = 1_767_323_045_678;
    assert_eq!(plan::parse_time("2026-01-02T03:04:05.678Z"), Some(ms));
    assert_eq!(plan::parse_time("2026-01-02 03:04:05.678"), Some(ms));
    assert_eq!(plan::parse_time("2026-01-02 03:04:05.678+00"), Some(ms));
    assert_eq!(plan::parse_time("2026-01-02 04:04:05.678+01:00"), Some(ms));
    assert_eq!(plan::parse_time("2026-01-02"), Some(1_767_312_000_000));
    assert_eq!(plan::parse_time("yesterday"), None);
}

#[test]
fn a_missing_table_is_reported_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("other.db");
    Connection::open(&path).unwrap().execute_batch(r#"CREATE TABLE "user" ("id" text, "email" text);"#).unwrap();
    let config = config(dir.path());
    let options = Options { source: Source::Sqlite(path), dry_run: false, mapping_out: None, secret: None };
    let report = import(&config, &options).unwrap_err().to_string();
    assert!(report.contains("nothing imported"), "{report}");
    assert!(report.contains("no table \"account\""), "{report}");
    assert!(stored(&config).users.is_empty());
    let not_sqlite = dir.path().join("text.db");
    std::fs::write(&not_sqlite, "this is not a database file, just text").unwrap();
    let options = Options { source: Source::Sqlite(not_sqlite), dry_run: false, mapping_out: None, secret: None };
    assert!(import(&config, &options).unwrap_err().to_string().contains("cannot read as SQLite"));
}

/// NULL e-mail, two e-mails differing in case, a bcrypt hash, an e-mail already in the data directory: each is
/// named in the report, and the valid rows beside them are not written either.
#[test]
fn unexpected_rows_block_the_whole_import_with_a_clear_report() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path());
    let present = crate::store::UserRecord {
        id: [7; 16],
        name: "Here".into(),
        email: "here@example.com".into(),
        image: None,
        role: "user".into(),
        banned: false,
        ban_reason: None,
        organization_id: None,
        password_hash: HASH.trim().into(),
        created_at_ms: 1,
        updated_at_ms: 1,
        email_verified: false,
        ban_expires_ms: None,
        two_factor: None,
        username: None,
        display_username: None,
    };
    Store::open(&config.data_dir).unwrap().commit(&[StoreOp::PutUser(present)]).unwrap();
    let path = dir.path().join("bad.db");
    let conn = Connection::open(&path).unwrap();
    // NOT NULL dropped on e-mail, as in a hand-made or damaged database.
    // NOT NULL dropped on the user's id too: a user row without one is named, not a crash.
    let schema = SCHEMA.replace(r#""email" text NOT NULL UNIQUE"#, r#""email" text"#);
    conn.execute_batch(&schema.replacen(r#""id" text NOT NULL PRIMARY KEY"#, r#""id" text UNIQUE"#, 1)).unwrap();
    let db = Db { conn, path };
    db.user("good", Some("good@example.com"), None, false, None);
    db.user("nomail", None, None, false, None);
    db.user("upper", Some("Same@Example.com"), None, false, None);
    db.user("lower", Some("same@example.com"), None, false, None);
    db.user("bcrypt", Some("bcrypt@example.com"), None, false, None);
    db.user("here", Some("HERE@example.com"), None, false, None);
    db.conn.execute(r#"INSERT INTO "user" ("name", "email", "emailVerified", "createdAt", "updatedAt") VALUES ('No Id', 'noid@example.com', 0, '2026-01-01', '2026-01-01')"#, []).unwrap();
    db.password("good", HASH.trim());
    db.password("bcrypt", "$2b$10$abcdefghijklmnopqrstuuABCDEFGHIJKLMNOPQRSTUVWXYZ01234");
    for dry_run in [true, false] {
        let report = import(&config, &Options { dry_run, ..options(&db) }).unwrap_err().to_string();
        assert!(report.contains("5 blocking problem(s)"), "{report}");
        assert!(report.contains("a user without an id (e-mail \"noid@example.com\")"), "{report}");
        assert!(report.contains("user \"nomail\": no e-mail (NULL or empty)"), "{report}");
        assert!(
            report.contains("e-mail same@example.com: 2 users differ only in its case (\"upper\", \"lower\")"),
            "{report}"
        );
        assert!(report.contains("bcrypt@example.com: the password hash is in another format"), "{report}");
        assert!(report.contains("here@example.com already has an account in the data directory"), "{report}");
        let loaded = stored(&config);
        assert_eq!(loaded.users.len(), 1, "nothing written");
    }
}

#[test]
fn a_dry_run_reports_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::new(dir.path());
    db.user("a", Some("a@example.com"), Some("admin"), false, None);
    db.password("a", HASH.trim());
    let config = config(dir.path());
    let mapping = dir.path().join("mapping.jsonl");
    let dry = Options { dry_run: true, mapping_out: Some(mapping.clone()), ..options(&db) };
    let report = import(&config, &dry).unwrap();
    assert!(report.contains("would import (dry run, nothing written): 1 users (1 administrators"), "{report}");
    assert!(stored(&config).users.is_empty());
    assert!(!mapping.exists());
}

#[test]
fn a_directory_a_server_holds_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::new(dir.path());
    let config = config(dir.path());
    let held = Store::open(&config.data_dir).unwrap();
    let report = import(&config, &options(&db)).unwrap_err().to_string();
    assert!(report.contains("is in use by another service-auth process"), "{report}");
    drop(held);
}

/// A disk error at the commit: nothing of the import is in the store, no mapping file is left, and a second run
/// succeeds.
#[test]
fn a_fault_at_the_commit_leaves_nothing_and_a_second_run_succeeds() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::new(dir.path());
    db.user("a", Some("a@example.com"), Some("admin"), false, None);
    db.password("a", HASH.trim());
    db.org("o1", "st-mary");
    db.member("o1", "a", "2026-01-01T00:00:00.000Z");
    let config = config(dir.path());
    let mapping = dir.path().join("mapping.jsonl");
    let options = Options { mapping_out: Some(mapping.clone()), ..options(&db) };
    let faults = crate::store::FaultSwitch::default();
    faults.fail_next_commits(1);
    assert!(import_with_faults(&config, &options, faults).is_err());
    let loaded = stored(&config);
    assert!(loaded.users.is_empty() && loaded.orgs.is_empty(), "a failed import wrote something");
    assert!(!mapping.exists(), "a mapping file names ids that do not exist");
    assert!(import(&config, &options).unwrap().contains("imported: 1 users"));
    assert_eq!(std::fs::read_to_string(&mapping).unwrap().lines().count(), 2);
}

/// Runs the import on another thread and gives its outcome, or fails the test if it has not ended within 20 s
/// (the old reader counted a recursive view forever, holding the data directory's lock).
fn import_within(config: &Config, options: &Options) -> Result<String, String> {
    let (config, options) = (config.clone(), options.clone());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || drop(tx.send(import(&config, &options).map_err(|e| e.to_string()))));
    rx.recv_timeout(std::time::Duration::from_secs(20)).expect("the import was still running after 20 s")
}

/// Before: a `user` table that was a view was read as one (an infinitely recursive one grew to 1.3 GB in 5.7 s),
/// and a `session` view that never ends was counted for ever. Now anything of those names that is not a table
/// is named, before any row is read, and nothing is written.
#[test]
fn views_are_refused_before_any_row_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::new(dir.path());
    db.user("a", Some("a@example.com"), None, false, None);
    db.password("a", HASH.trim());
    let config = config(dir.path());
    db.conn
        .execute_batch(
            r#"DROP TABLE "session";
               CREATE VIEW "session" AS WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r)
                 SELECT n AS "id" FROM r;"#,
        )
        .unwrap();
    let report = import_within(&config, &Options { dry_run: true, ..options(&db) }).unwrap_err();
    assert!(report.contains("\"session\" is a view, not a table: only tables are read"), "{report}");

    // A plain view as `user` (over a real table, so the old reader imported it): refused as well.
    db.conn
        .execute_batch(
            r#"DROP VIEW "session";
               ALTER TABLE "user" RENAME TO "real_user";
               CREATE VIEW "USER" AS SELECT * FROM "real_user";"#,
        )
        .unwrap();
    let report = import_within(&config, &options(&db)).unwrap_err();
    assert!(report.contains("\"user\" is a view, not a table"), "{report}");
    assert!(stored(&config).users.is_empty(), "nothing written");
}

/// Before: a 4 MB `banReason` with U+202E, BEL and ESC was imported; `createdAt` of year 10000 was served as
/// `+10000-01-01…`; `banExpires = i64::MAX` showed as year −262143, and `i64::MIN` wrapped to 1970 (a panic in
/// a debug build). Now each is a blocking problem naming the user and the column, a value longer than anything
/// kept is measured without being read, and a picture too long to keep is dropped like any unusable one.
#[test]
fn hostile_values_are_named_blocking_problems() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::new(dir.path());
    for id in ["huge", "bidi", "y10000", "max", "min", "words", "pic"] {
        db.user(id, Some(&format!("{id}@example.com")), None, id != "y10000" && id != "pic", None);
        db.password(id, HASH.trim());
    }
    let set = |id: &str, column: &str, value: &dyn rusqlite::ToSql| {
        let sql = format!(r#"UPDATE "user" SET "{column}" = ?1 WHERE "id" = ?2"#);
        db.conn.execute(&sql, params![value, id]).unwrap();
    };
    let huge = format!("a\u{202E}gnp.exe\u{7}\u{1b}[31m{}", "x".repeat(4 << 20));
    set("huge", "banReason", &huge);
    set("bidi", "banReason", &"a\u{202E}gnp.exe\u{7}\u{1b}[31m");
    set("y10000", "createdAt", &253_402_300_800_000_i64);
    set("max", "banExpires", &i64::MAX);
    set("min", "banExpires", &i64::MIN);
    set("words", "banExpires", &"next tuesday");
    set("pic", "image", &format!("data:image/png;base64,{}", "A".repeat(100_000)));
    let config = config(dir.path());
    let report = import(&config, &options(&db)).unwrap_err().to_string();
    let too_long =
        format!("user \"huge\": banReason is {} bytes or more, longer than any value kept here (8192)", huge.len());
    for expected in [
        too_long.as_str(),
        "user bidi@example.com: banReason must not contain bidirectional control characters",
        "user y10000@example.com: createdAt +10000-01-01T00:00:00+00:00 is outside the years 1970–9999",
        "user max@example.com: banExpires ",
        "user min@example.com: banExpires ",
        "user words@example.com: banExpires \"next tuesday\" is not a date",
        "pic@example.com: image dropped",
        "6 blocking problem(s)",
    ] {
        assert!(report.contains(expected), "{expected:?} not in {report}");
    }
    assert_eq!(report.matches("is outside the years 1970–9999").count(), 3, "{report}");
    assert!(stored(&config).users.is_empty(), "nothing written");
}

/// The read keeps within its bounds: the rows of one table, and the memory of all of them.
#[test]
fn the_rows_read_are_bounded() {
    let mut bytes = 0;
    let mut rows = Collected::new("user", &mut bytes);
    rows.push(vec![Cell::Text("x".repeat(100)), Cell::Null]).unwrap();
    assert_eq!(text_cell("y".repeat(MAX_FIELD_BYTES)), Cell::Text("y".repeat(MAX_FIELD_BYTES)));
    assert_eq!(text_cell("y".repeat(MAX_FIELD_BYTES + 1)), Cell::TooLong(MAX_FIELD_BYTES + 1));
    let mut bytes = MAX_BYTES_READ - 10;
    let mut rows = Collected::new("user", &mut bytes);
    let refused = rows.push(vec![Cell::Text("x".repeat(100))]).unwrap_err().to_string();
    assert!(refused.contains("more than an import reads"), "{refused}");
}

/// Imported argon2 hashes: within the bound they come over (and are re-hashed at sign-in, `tests/api/migration.rs`);
/// above it, or with more costs than a check can pay for, the import is blocked.
#[test]
fn argon2_hashes_above_the_bound_or_of_too_many_costs_are_refused() {
    // The plan checks a hash's form and cost, never verifies it: any salt and output do.
    let hash = |m: u32, t: u32, p: u32| {
        format!("$argon2id$v=19$m={m},t={t},p={p}$c2FsdHNhbHRzYWx0c2FsdA$aGFzaGhhc2hoYXNoaGFzaGhhc2hoYXNoaGFzaGhhc2g")
    };
    let dir = tempfile::tempdir().unwrap();
    let db = Db::new(dir.path());
    db.user("rfc", Some("rfc@example.com"), None, false, None);
    db.password("rfc", &hash(65_536, 3, 4));
    db.user("own", Some("own@example.com"), None, false, None);
    db.password("own", &hash(19_456, 2, 1));
    let config = config(dir.path());
    let report = import(&config, &Options { dry_run: true, ..options(&db) }).unwrap();
    assert!(report.contains("would import (dry run, nothing written): 2 users"), "{report}");

    db.user("dear", Some("dear@example.com"), None, false, None);
    db.password("dear", &hash(262_144, 16, 16));
    let report = import(&config, &options(&db)).unwrap_err().to_string();
    assert!(
        report
            .contains("dear@example.com: the argon2 password hash's cost m=262144 KiB, t=16, p=16 is above the bound"),
        "{report}"
    );
    db.conn.execute(r#"DELETE FROM "account" WHERE "userId" = 'dear'"#, []).unwrap();
    db.conn.execute(r#"DELETE FROM "user" WHERE "id" = 'dear'"#, []).unwrap();

    for (id, (m, t)) in [("b", (32_768, 2)), ("c", (7_168, 5))] {
        db.user(id, Some(&format!("{id}@example.com")), None, false, None);
        db.password(id, &hash(m, t, 1));
    }
    let report = import(&config, &options(&db)).unwrap_err().to_string();
    assert!(report.contains("the argon2 password hashes have 3 costs other than the configured"), "{report}");
    assert!(stored(&config).users.is_empty(), "nothing written");
}

/// The two-factor plugin's table as better-auth 1.7 creates it on SQLite.
const TWO_FACTOR_SCHEMA: &str = r#"
ALTER TABLE "user" ADD COLUMN "twoFactorEnabled" integer;
CREATE TABLE "twoFactor" ("id" text NOT NULL PRIMARY KEY, "secret" text NOT NULL, "backupCodes" text NOT NULL,
  "userId" text NOT NULL REFERENCES "user" ("id"), "verified" integer, "failedVerificationCount" integer,
  "lockedUntil" date);
"#;

/// Made by better-auth 1.7.25's `symmetricEncrypt` with this secret (see `two_factor.rs`'s tests).
const BA_SECRET: &str = "a-better-auth-secret-for-the-import-test-0123456789";
const BA_TOTP: &str = "868f9473f322f2adda46075394f8fb9691b252a4fb9bc607d8df08d6ea5591da8e760a89fe45d8d78404ba9d55125c763e54ee136616f03202b8ff132f7385646341c91899cb15a3";
const BA_CODES: &str = "a42e7868b5392d206538b9fd3308358c868594ebc96b1da984cff999f9c3d633418bc57cd6352e809393bef5a0089d676b0290b89394ebf2172ba1b4c55ccf83e6a911f437";

fn two_factor_db(dir: &Path) -> Db {
    let db = Db::new(dir);
    db.user("uTfa000000000000000000000000000", Some("tfa@example.com"), None, false, None);
    db.password("uTfa000000000000000000000000000", HASH.trim());
    db.conn.execute_batch(TWO_FACTOR_SCHEMA).unwrap();
    db.conn
        .execute(
            r#"INSERT INTO "twoFactor" VALUES ('tf1', ?1, ?2, 'uTfa000000000000000000000000000', 1, 0, NULL)"#,
            params![BA_TOTP, BA_CODES],
        )
        .unwrap();
    db
}

#[test]
fn second_factors_come_over_with_the_secret_sealed_with_the_data_key() {
    use crate::domain::two_factor::{backup_code_hash, secret_context};
    let dir = tempfile::tempdir().unwrap();
    let db = two_factor_db(dir.path());
    let config = config(dir.path());
    let report = import(&config, &Options { secret: Some(BA_SECRET.into()), ..options(&db) }).unwrap();
    assert!(report.contains("1 second factor(s)"), "{report}");
    let users = stored(&config).users;
    let user = users.iter().find(|u| u.email == "tfa@example.com").unwrap();
    let factor = user.two_factor.as_ref().expect("the factor came over");
    assert!(factor.enabled);
    let key = crate::data_key::DataKey::load_or_create_file(&config.data_key_path()).unwrap();
    let opened = key.open(&factor.sealed_secret, &secret_context(&user.id)).unwrap();
    assert_eq!(opened, b"JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP", "the key better-auth verified codes with");
    let hashes: Vec<[u8; 32]> =
        ["abcde-12345", "fghij-67890"].iter().map(|c| backup_code_hash(&key.mac_key(), &user.id, c)).collect();
    assert_eq!(factor.backup_codes, hashes);
}

#[test]
fn without_the_secret_factors_are_reported_and_with_a_wrong_one_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let db = two_factor_db(dir.path());
    let config = config(dir.path());
    let wrong = import(&config, &Options { secret: Some("not it".into()), ..options(&db) }).unwrap_err().to_string();
    assert!(wrong.contains("do not decrypt") && wrong.contains("nothing imported"), "{wrong}");
    assert!(stored(&config).users.is_empty(), "a blocking problem writes nothing");
    let report = import(&config, &options(&db)).unwrap();
    assert!(report.contains("without --secret"), "{report}");
    let users = stored(&config).users;
    assert!(users.iter().all(|u| u.two_factor.is_none()));
}

/// A better-auth user who signed in with a provider there keeps that identity here: the `account` row becomes a
/// linked identity, and, with no password there, the account has none here either (not an unknown one).
#[test]
fn accounts_at_other_providers_come_over_as_linked_identities() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::new(dir.path());
    db.user("uGoogle00000000000000000000000", Some("g@example.com"), None, false, None);
    db.user("uBoth0000000000000000000000000", Some("both@example.com"), None, false, None);
    db.password("uBoth0000000000000000000000000", HASH.trim());
    for (user, provider, subject) in [
        ("uGoogle00000000000000000000000", "google", "1092837465"),
        ("uBoth0000000000000000000000000", "keycloak", "kc-7"),
    ] {
        db.conn
            .execute(
                r#"INSERT INTO "account" ("id", "accountId", "providerId", "userId", "createdAt", "updatedAt")
                   VALUES (?1, ?2, ?3, ?4, '2026-01-02T03:04:05.678Z', '2026-01-02T03:04:05.678Z')"#,
                params![format!("acc-{provider}"), subject, provider, user],
            )
            .unwrap();
    }
    let config = config(dir.path());
    let report = import(&config, &options(&db)).unwrap();
    assert!(report.contains("2 identities at other providers"), "{report}");
    assert!(report.contains("accounts sign in with google, which is not in [[oauth.providers]]"), "{report}");
    assert!(!report.contains("g@example.com: no password"), "{report}");
    let loaded = stored(&config);
    let user = |e: &str| loaded.users.iter().find(|u| u.email == e).unwrap().clone();
    let (google, both) = (user("g@example.com"), user("both@example.com"));
    assert_eq!(google.password_hash, "", "no password there, none here: the provider is the way in");
    assert_eq!(both.password_hash, HASH.trim());
    let mut linked: Vec<_> =
        loaded.accounts.iter().map(|a| (a.user_id, a.provider.as_str(), a.subject.as_str())).collect();
    linked.sort();
    let mut expected = vec![(google.id, "google", "1092837465"), (both.id, "keycloak", "kc-7")];
    expected.sort();
    assert_eq!(linked, expected);
}

/// The organization plugin's team tables as better-auth 1.7.25 creates them on SQLite with `teams: {enabled: true}`.
const TEAMS_SCHEMA: &str = r#"
CREATE TABLE "team" ("id" text NOT NULL PRIMARY KEY, "name" text NOT NULL,
  "organizationId" text NOT NULL REFERENCES "organization" ("id") ON DELETE CASCADE, "createdAt" date NOT NULL,
  "updatedAt" date, "memberCount" integer);
CREATE TABLE "teamMember" ("id" text NOT NULL PRIMARY KEY,
  "teamId" text NOT NULL REFERENCES "team" ("id") ON DELETE CASCADE,
  "userId" text NOT NULL REFERENCES "user" ("id") ON DELETE CASCADE, "createdAt" date, "membershipKey" text UNIQUE);
"#;

/// Before: the `team` and `teamMember` tables were not read, so an organization came over without its teams.
#[test]
fn teams_come_over_into_their_organizations_with_the_users_in_them() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::new(dir.path());
    db.conn.execute_batch(TEAMS_SCHEMA).unwrap();
    db.user("uAnn", Some("ann@example.com"), None, false, None);
    db.user("uBob", Some("bob@example.com"), None, false, None);
    db.org("oWard", "ward");
    db.member("oWard", "uAnn", "2026-01-01T00:00:00.010Z");
    db.member("oWard", "uBob", "2026-01-02T00:00:00.000Z");
    let team = |id: &str, name: &str, org: &str, at: &str, updated: Option<&str>| {
        db.conn
            .execute(r#"INSERT INTO "team" VALUES (?1, ?2, ?3, ?4, ?5, 0)"#, params![id, name, org, at, updated])
            .unwrap();
    };
    let place = |team: &str, user: &str, at: &str| {
        db.conn
            .execute(
                r#"INSERT INTO "teamMember" VALUES (?1, ?2, ?3, ?4, ?1)"#,
                params![format!("tm-{team}-{user}"), team, user, at],
            )
            .unwrap();
    };
    // Rows of an organization and a user this import leaves out (as if they had gone meanwhile).
    db.conn.execute_batch("PRAGMA foreign_keys = OFF;").unwrap();
    team("tDefault", "Org ward", "oWard", "2026-01-01T00:00:00.000Z", None);
    team("tNights", "Nights", "oWard", "2026-01-03T00:00:00.000Z", Some("2026-01-04T00:00:00.000Z"));
    team("tGone", "Gone", "oNotImported", "2026-01-03T00:00:00.000Z", None);
    // Written by the plugin's create a moment before the owner's membership: it counts all the same.
    place("tDefault", "uAnn", "2026-01-01T00:00:00.000Z");
    place("tNights", "uAnn", "2026-01-03T00:00:00.000Z");
    place("tNights", "uBob", "2026-01-03T00:00:00.000Z");
    place("tNights", "uNobody", "2026-01-03T00:00:00.000Z");
    let config = config(dir.path());
    let mapping_out = Some(dir.path().join("map.jsonl"));
    let report = import(&config, &Options { mapping_out, ..options(&db) }).unwrap();
    assert!(report.contains("2 team(s) imported with 3 member place(s)"), "{report}");
    assert!(report.contains("1 team(s) of organizations not imported"), "{report}");
    let loaded = stored(&config);
    let org = &loaded.orgs[0];
    let names: Vec<&str> = org.teams.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["Org ward", "Nights"], "in the order they were made");
    assert_eq!(org.teams[0].updated_at_ms, None);
    assert_eq!(org.teams[1].updated_at_ms, Some(parse_time_ok("2026-01-04T00:00:00.000Z")));
    let user_id = |email: &str| loaded.users.iter().find(|u| u.email == email).unwrap().id;
    let (ann, bob) = (user_id("ann@example.com"), user_id("bob@example.com"));
    let members = |n: usize| org.teams[n].members.iter().map(|m| m.user).collect::<Vec<_>>();
    assert_eq!((members(0), members(1)), (vec![ann], vec![ann, bob]));
    let mapped = std::fs::read_to_string(dir.path().join("map.jsonl")).unwrap();
    assert!(mapped.contains(r#""type":"team","better_auth_id":"tNights""#), "{mapped}");
    // Each place counts: never older than the membership it stands by.
    for team in &org.teams {
        for m in &team.members {
            let joined = loaded.members.iter().find(|x| x.org == org.id && x.user == m.user).unwrap().created_at_ms;
            assert!(m.created_at_ms >= joined, "{m:?} would not count");
        }
    }
}

#[test]
fn a_team_name_the_server_refuses_blocks_the_import() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::new(dir.path());
    db.conn.execute_batch(TEAMS_SCHEMA).unwrap();
    db.user("uAnn", Some("ann@example.com"), None, false, None);
    db.org("oWard", "ward");
    db.conn
        .execute(r#"INSERT INTO "team" VALUES ('tEmpty', '', 'oWard', '2026-01-01T00:00:00.000Z', NULL, 0)"#, [])
        .unwrap();
    let config = config(dir.path());
    let report = import(&config, &options(&db)).unwrap_err().to_string();
    assert!(report.contains("team tEmpty: a name the server refuses"), "{report}");
    assert!(stored(&config).orgs.is_empty(), "nothing written");
}
