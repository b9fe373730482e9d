//! Export and import of users, organizations and memberships as JSON Lines.
//!
//! One JSON object per line with a `type` field: every `organization` line first, then every `user` line (with
//! its role, ban, membership and password hash in PHC form). Sessions are never exported: they are bearer
//! secrets, and after a move people simply sign in again. Import is all or nothing: every line is checked, any
//! duplicate (in the file or against the data directory) or unusable password hash is reported and nothing is
//! written; then everything is written in one transaction. The file holds password hashes: it is created 0600.

use std::collections::HashSet;
use std::io::{BufRead, BufWriter, IsTerminal, Write};
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::{OpsError, open_stopped, open_stopped_with_faults, private_file};
use crate::config::Config;
use crate::domain::{Email, Name, OrgId, RoleSet, Slug, Timestamp, UserId};
use crate::store::{FaultSwitch, OrgRecord, StoreOp, UserRecord};

#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
enum Line {
    Organization {
        id: String,
        name: String,
        slug: String,
        created_at: String,
    },
    User {
        id: String,
        name: String,
        email: String,
        image: Option<String>,
        role: String,
        banned: bool,
        ban_reason: Option<String>,
        organization_id: Option<String>,
        password_hash: String,
        created_at: String,
        updated_at: String,
        /// Absent in files written before e-mail verification existed: unverified.
        #[serde(default)]
        email_verified: bool,
        /// When a ban ends by itself; absent or null: it lasts until lifted.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ban_expires: Option<String>,
    },
}

/// Writes every organization and user as JSON Lines to `out`, or to standard output. Returns a report.
pub fn export(config: &Config, out: Option<&Path>) -> Result<String, OpsError> {
    let loaded = open_stopped(config)?.load()?;
    let mut sink: Box<dyn Write> = match out {
        Some(path) => Box::new(private_file(path)?),
        None => Box::new(std::io::stdout().lock()),
    };
    let mut w = BufWriter::new(&mut sink);
    let mut orgs = loaded.orgs;
    orgs.sort_by_key(|o| (o.created_at_ms, o.id));
    let mut users = loaded.users;
    users.sort_by_key(|u| (u.created_at_ms, u.id));
    let lines = orgs.iter().map(org_line).chain(users.iter().map(user_line));
    for line in lines {
        serde_json::to_writer(&mut w, &line).map_err(|e| OpsError::Io(e.to_string()))?;
        w.write_all(b"\n").map_err(|e| OpsError::Io(e.to_string()))?;
    }
    w.flush().map_err(|e| OpsError::Io(e.to_string()))?;
    Ok(format!("exported {} organizations and {} users (no sessions)", orgs.len(), users.len()))
}

/// Reads a file written by [`export`] into `config.data_dir`. Returns a report; refuses the whole file, listing
/// every problem, when any line is invalid or a duplicate.
pub fn import(config: &Config, input: &Path) -> Result<String, OpsError> {
    import_with_faults(config, input, FaultSwitch::default())
}

fn import_with_faults(config: &Config, input: &Path, faults: FaultSwitch) -> Result<String, OpsError> {
    let store = open_stopped_with_faults(config, faults)?;
    let existing = store.load()?;
    let roles = RoleSet::new(&config.roles.allowed, &config.roles.default);
    let file = std::fs::File::open(input).map_err(|e| OpsError::Io(format!("{}: {e}", input.display())))?;
    let mut seen = Seen::default();
    for u in &existing.users {
        seen.user_ids.insert(u.id);
        seen.emails.insert(u.email.clone());
    }
    for o in &existing.orgs {
        seen.org_ids.insert(o.id);
        seen.slugs.insert(o.slug.clone());
    }
    let progress = std::io::stderr().is_terminal();
    let (mut ops, mut problems) = (Vec::new(), Vec::new());
    for (n, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line = line.map_err(|e| OpsError::Io(format!("line {}: {e}", n + 1)))?;
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Line>(&line).map_err(|e| e.to_string()).and_then(|l| seen.check(l, &roles)) {
            Ok(op) => ops.push(op),
            Err(problem) => problems.push(format!("line {}: {problem}", n + 1)),
        }
        if progress && n % 10_000 == 0 {
            eprint!("\rchecked {n} lines");
        }
    }
    if progress {
        eprintln!();
    }
    if !problems.is_empty() {
        let shown: Vec<&str> = problems.iter().take(50).map(String::as_str).collect();
        let more = problems.len().saturating_sub(shown.len());
        let tail = if more > 0 { format!("\n… and {more} more") } else { String::new() };
        return Err(OpsError::Invalid(format!(
            "nothing imported: {} problem(s)\n{}{tail}",
            problems.len(),
            shown.join("\n")
        )));
    }
    // One transaction: a crash or a disk error leaves the directory as it was, and a second run can start over.
    store.commit(&ops)?;
    Ok(format!("imported {} organizations and {} users", seen.new_orgs, seen.new_users))
}

/// Identities already taken, in the data directory or earlier in the file.
#[derive(Default)]
struct Seen {
    user_ids: HashSet<[u8; 16]>,
    emails: HashSet<String>,
    org_ids: HashSet<[u8; 16]>,
    slugs: HashSet<String>,
    new_orgs: usize,
    new_users: usize,
}

impl Seen {
    fn check(&mut self, line: Line, roles: &RoleSet) -> Result<StoreOp, String> {
        match line {
            Line::Organization { id, name, slug, created_at } => {
                let id = OrgId::parse(&id).ok_or("organization id is not a UUID")?.to_bytes();
                let name = Name::parse(&name).map_err(|e| format!("organization name {e}"))?;
                let slug = Slug::parse(&slug).map_err(|e| e.to_string())?;
                if !self.org_ids.insert(id) {
                    return Err("duplicate organization id".into());
                }
                if !self.slugs.insert(slug.to_string()) {
                    return Err(format!("duplicate slug {slug}"));
                }
                self.new_orgs += 1;
                let created_at_ms = millis(&created_at)?;
                Ok(StoreOp::PutOrg(OrgRecord {
                    id,
                    name: name.to_string(),
                    slug: slug.to_string(),
                    created_at_ms,
                    logo: None,
                    metadata: None,
                }))
            }
            Line::User {
                id,
                name,
                email,
                image,
                role,
                banned,
                ban_reason,
                organization_id,
                password_hash,
                created_at,
                updated_at,
                email_verified,
                ban_expires,
            } => {
                let id = UserId::parse(&id).ok_or("user id is not a UUID")?.to_bytes();
                let name = Name::parse(&name).map_err(|e| format!("name {e}"))?;
                let email = Email::parse(&email).map_err(|_| format!("invalid e-mail {email:?}"))?;
                let role = roles.parse(&role).ok_or_else(|| format!("role {role:?} is not configured"))?;
                let organization_id = match organization_id {
                    Some(org) => {
                        let org = OrgId::parse(&org).ok_or("organization_id is not a UUID")?.to_bytes();
                        if !self.org_ids.contains(&org) {
                            return Err("organization_id names no organization".into());
                        }
                        Some(org)
                    }
                    None => None,
                };
                crate::hashing::check_stored_hash(&password_hash).map_err(|e| format!("password_hash: {e}"))?;
                if !self.user_ids.insert(id) {
                    return Err("duplicate user id".into());
                }
                if !self.emails.insert(email.to_string()) {
                    return Err(format!("duplicate e-mail {email}"));
                }
                self.new_users += 1;
                let ban_expires_ms = ban_expires.as_deref().map(millis).transpose()?.filter(|_| banned);
                Ok(StoreOp::PutUser(UserRecord {
                    id,
                    name: name.to_string(),
                    email: email.to_string(),
                    image,
                    role: role.to_string(),
                    banned,
                    ban_reason: ban_reason.filter(|_| banned),
                    organization_id,
                    password_hash,
                    created_at_ms: millis(&created_at)?,
                    updated_at_ms: millis(&updated_at)?,
                    email_verified,
                    ban_expires_ms,
                    two_factor: None,
                }))
            }
        }
    }
}

fn millis(rfc3339: &str) -> Result<i64, String> {
    chrono::DateTime::parse_from_rfc3339(rfc3339)
        .map(|t| t.timestamp_millis())
        .map_err(|_| format!("{rfc3339:?} is not an RFC 3339 time"))
}

fn uuid(bytes: [u8; 16]) -> String {
    uuid::Uuid::from_bytes(bytes).to_string()
}

fn org_line(o: &OrgRecord) -> Line {
    Line::Organization {
        id: uuid(o.id),
        name: o.name.clone(),
        slug: o.slug.clone(),
        created_at: Timestamp::from_millis(o.created_at_ms).to_rfc3339(),
    }
}

fn user_line(u: &UserRecord) -> Line {
    Line::User {
        id: uuid(u.id),
        name: u.name.clone(),
        email: u.email.clone(),
        image: u.image.clone(),
        role: u.role.clone(),
        banned: u.banned,
        ban_reason: u.ban_reason.clone(),
        organization_id: u.organization_id.map(uuid),
        password_hash: u.password_hash.clone(),
        created_at: Timestamp::from_millis(u.created_at_ms).to_rfc3339(),
        updated_at: Timestamp::from_millis(u.updated_at_ms).to_rfc3339(),
        email_verified: u.email_verified,
        ban_expires: u.ban_expires_ms.map(|ms| Timestamp::from_millis(ms).to_rfc3339()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;

    fn user(n: u8, org: Option<[u8; 16]>) -> StoreOp {
        StoreOp::PutUser(UserRecord {
            id: [n; 16],
            name: format!("User {n}"),
            email: format!("u{n}@example.com"),
            image: None,
            role: "qa_manager".into(),
            banned: n.is_multiple_of(2),
            ban_reason: (n.is_multiple_of(2)).then(|| "left".into()),
            organization_id: org,
            password_hash: "$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHQ$aGFzaGhhc2hoYXNo".into(),
            created_at_ms: 1_000 + i64::from(n),
            updated_at_ms: 2_000,
            email_verified: n.is_multiple_of(3),
            ban_expires_ms: (n.is_multiple_of(4)).then_some(9_000),
            two_factor: None,
        })
    }

    fn config(dir: &Path, name: &str) -> Config {
        Config { data_dir: dir.join(name), ..Config::default() }
    }

    #[test]
    fn export_import_export_is_identical() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (config(dir.path(), "a"), config(dir.path(), "b"));
        let org = OrgRecord {
            id: [9; 16],
            name: "Org".into(),
            slug: "org".into(),
            created_at_ms: 5,
            logo: None,
            metadata: None,
        };
        Store::open(&a.data_dir)
            .unwrap()
            .commit(&[StoreOp::PutOrg(org), user(1, Some([9; 16])), user(2, None)])
            .unwrap();
        let (first, second) = (dir.path().join("1.jsonl"), dir.path().join("2.jsonl"));
        export(&a, Some(&first)).unwrap();
        assert_eq!(import(&b, &first).unwrap(), "imported 1 organizations and 2 users");
        export(&b, Some(&second)).unwrap();
        assert_eq!(std::fs::read_to_string(&first).unwrap(), std::fs::read_to_string(&second).unwrap());
        assert!(!std::fs::read_to_string(&first).unwrap().contains("session"));
    }

    #[test]
    fn duplicates_and_bad_lines_are_reported_and_nothing_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let a = config(dir.path(), "a");
        Store::open(&a.data_dir).unwrap().commit(&[user(1, None)]).unwrap();
        let file = dir.path().join("in.jsonl");
        export(&a, Some(&file)).unwrap();
        let mut text = std::fs::read_to_string(&file).unwrap();
        text.push_str("{\"type\":\"organization\",\"id\":\"nope\",\"name\":\"x\",\"slug\":\"x\",\"created_at\":\"2026-01-01T00:00:00.000Z\"}\n");
        std::fs::write(&file, text).unwrap();
        let report = import(&a, &file).unwrap_err().to_string();
        assert!(report.contains("nothing imported: 2 problem(s)"), "{report}");
        assert!(report.contains("line 1: duplicate user id"), "{report}");
        assert!(report.contains("line 2: organization id is not a UUID"), "{report}");
        assert_eq!(Store::open(&a.data_dir).unwrap().load().unwrap().orgs.len(), 0);
    }

    /// Before: an imported hash could carry any cost (m = 4 GiB made each sign-in of that user allocate 4 GiB).
    #[test]
    fn a_hash_of_unbounded_cost_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (config(dir.path(), "a"), config(dir.path(), "b"));
        Store::open(&a.data_dir).unwrap().commit(&[user(1, None)]).unwrap();
        let file = dir.path().join("in.jsonl");
        export(&a, Some(&file)).unwrap();
        let text = std::fs::read_to_string(&file).unwrap().replace("m=19456", "m=4194304");
        std::fs::write(&file, text).unwrap();
        let report = import(&b, &file).unwrap_err().to_string();
        assert!(report.contains("line 1: password_hash: cost m=4194304"), "{report}");
    }

    /// Before: 10,000 lines per transaction, so a fault after the first chunk left a partial import that a second
    /// run refused as duplicates. Now the whole file is one transaction.
    #[test]
    fn a_fault_during_import_leaves_nothing_and_a_second_run_succeeds() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (config(dir.path(), "a"), config(dir.path(), "b"));
        let users: Vec<StoreOp> = (0..10_050u32)
            .map(|n| {
                let StoreOp::PutUser(mut r) = user(0, None) else { unreachable!() };
                r.id = *uuid::Uuid::now_v7().as_bytes();
                r.email = format!("u{n}@example.com");
                StoreOp::PutUser(r)
            })
            .collect();
        Store::open(&a.data_dir).unwrap().commit(&users).unwrap();
        let file = dir.path().join("in.jsonl");
        export(&a, Some(&file)).unwrap();
        let faults = FaultSwitch::default();
        faults.fail_commits_after(1, 1);
        let count = || Store::open(&b.data_dir).unwrap().load().unwrap().users.len();
        match import_with_faults(&b, &file, faults) {
            Ok(_) => assert_eq!(count(), 10_050),
            Err(_) => assert_eq!(count(), 0, "a partial import was left behind"),
        }
        let c = config(dir.path(), "c");
        let faults = FaultSwitch::default();
        faults.fail_next_commits(1);
        assert!(import_with_faults(&c, &file, faults).is_err());
        assert_eq!(Store::open(&c.data_dir).unwrap().load().unwrap().users.len(), 0, "a failed import wrote something");
        assert_eq!(import(&c, &file).unwrap(), "imported 0 organizations and 10050 users", "a second run succeeds");
    }

    #[test]
    fn the_export_file_is_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let a = config(dir.path(), "a");
        Store::open(&a.data_dir).unwrap().commit(&[user(1, None)]).unwrap();
        let file = dir.path().join("out.jsonl");
        export(&a, Some(&file)).unwrap();
        assert_eq!(std::fs::metadata(&file).unwrap().permissions().mode() & 0o777, 0o600);
    }
}
