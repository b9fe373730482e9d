//! `import-better-auth`: users, their passwords, roles, bans and organizations from a better-auth database.
//!
//! better-auth keeps its data in tables `user`, `account` (the `credential` provider's row holds the password
//! hash), and, with the organization plugin, `organization` and `member`. They are read through one small
//! interface ([`Reader`]), implemented once per database (`sqlite.rs`, `postgres.rs`); everything after the
//! reading is the same for both: [`plan`] checks every row and builds the records, and a real run writes them in
//! one transaction, or nothing when any problem blocks.
//!
//! # What blocks, what is reported and dropped
//! Blocking (a real run writes nothing; a dry run says so and fails):
//! - a missing `user` or `account` table, or a missing column without which a row means nothing;
//! - a user without an e-mail (NULL or empty), or with one that is not an address;
//! - two users whose e-mails differ only in case (this service's addresses are case-insensitive: which account
//!   keeps the address is the operator's choice), or an e-mail already in the data directory;
//! - a password hash that is neither better-auth's scrypt (`saltHex:keyHex`) nor a bounded argon2 PHC string;
//! - a user or organization name this service refuses, an organization slug that is invalid or already taken.
//!
//! Reported, and the rest of the row imported:
//! - role values not in `[roles] allowed` (the account gets `admin` if that was among its roles, else the first
//!   configured one, else the default role);
//! - memberships beyond the first (this service has one organization per account), memberships naming no
//!   imported user or organization, and the organization roles (owner/admin/member), which have no counterpart;
//! - a ban whose `banExpires` has passed (imported unbanned, as better-auth would lift it at the next sign-in; a
//!   ban that ends later keeps its end);
//! - an empty name (better-auth takes one): the e-mail's local part instead;
//! - an `image` that is not an absolute http(s) URL (sign-up's rule): dropped;
//! - users without a password (social sign-in only): imported with a password nobody knows; a password reset
//!   gives them one.
//!
//! Not imported: sessions (people sign in once more), verification tokens, invitations, OAuth tokens.
//!
//! Passwords are kept as they are: better-auth's scrypt hashes verify here and are replaced with argon2id at each
//! account's next sign-in (see [`crate::hashing`]). better-auth's ids are not UUIDs, so new ids are minted; the
//! mapping file (`--mapping-out`) lists old id → new id for the application's own tables.

mod plan;
mod postgres;
mod sqlite;

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};

use super::{OpsError, open_stopped_with_faults, private_file};
use crate::config::Config;
use crate::domain::RoleSet;

pub use plan::{Mapping, Plan, plan};

/// Where the better-auth data is.
#[derive(Debug, Clone)]
pub enum Source {
    Sqlite(PathBuf),
    /// A `postgres://` URL.
    Postgres(String),
}

/// What the command line asked for.
#[derive(Debug, Clone)]
pub struct Options {
    pub source: Source,
    /// Check and report only; write nothing.
    pub dry_run: bool,
    /// Write old id → new id here (JSON Lines), on a real run.
    pub mapping_out: Option<PathBuf>,
}

/// One cell as read, database-neutral.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Cell {
    Null,
    Text(String),
    Bool(bool),
    /// Milliseconds since the epoch.
    Time(i64),
}

/// How a column is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Text,
    Bool,
    Time,
}

/// A column to read; a column the table lacks reads as NULL, and `required` makes its absence a blocking problem.
pub(crate) struct Column {
    pub name: &'static str,
    pub kind: Kind,
    pub required: bool,
}

const fn col(name: &'static str, kind: Kind, required: bool) -> Column {
    Column { name, kind, required }
}

pub(crate) const USER: &[Column] = &[
    col("id", Kind::Text, true),
    col("name", Kind::Text, false),
    col("email", Kind::Text, true),
    col("emailVerified", Kind::Bool, false),
    col("image", Kind::Text, false),
    col("createdAt", Kind::Time, false),
    col("updatedAt", Kind::Time, false),
    col("role", Kind::Text, false),
    col("banned", Kind::Bool, false),
    col("banReason", Kind::Text, false),
    col("banExpires", Kind::Time, false),
];
pub(crate) const ACCOUNT: &[Column] =
    &[col("userId", Kind::Text, true), col("providerId", Kind::Text, true), col("password", Kind::Text, true)];
pub(crate) const ORGANIZATION: &[Column] = &[
    col("id", Kind::Text, true),
    col("name", Kind::Text, true),
    col("slug", Kind::Text, true),
    col("createdAt", Kind::Time, false),
];
pub(crate) const MEMBER: &[Column] = &[
    col("organizationId", Kind::Text, true),
    col("userId", Kind::Text, true),
    col("role", Kind::Text, false),
    col("createdAt", Kind::Time, false),
];

/// Reading one better-auth database: the only part that differs between SQLite and PostgreSQL.
pub(crate) trait Reader {
    /// The columns of `table`, or `None` when there is no such table.
    fn columns(&mut self, table: &str) -> Result<Option<Vec<String>>, OpsError>;
    /// Every row of `table`, one cell per column of `columns` (NULL where `present[i]` is false).
    fn rows(&mut self, table: &str, columns: &[Column], present: &[bool]) -> Result<Vec<Vec<Cell>>, OpsError>;
    /// How many rows `table` has (0 when it does not exist).
    fn count(&mut self, table: &str) -> Result<u64, OpsError>;
}

/// The tables as read. `None`: the table does not exist.
#[derive(Debug, Default)]
pub struct Snapshot {
    pub(crate) users: Option<Vec<Vec<Cell>>>,
    pub(crate) accounts: Option<Vec<Vec<Cell>>>,
    pub(crate) orgs: Option<Vec<Vec<Cell>>>,
    pub(crate) members: Option<Vec<Vec<Cell>>>,
    pub(crate) sessions: u64,
    /// Missing tables and required columns.
    pub(crate) missing: Vec<String>,
}

/// Reads the four tables (and counts the sessions) through `reader`.
pub(crate) fn read(reader: &mut dyn Reader) -> Result<Snapshot, OpsError> {
    let mut snapshot = Snapshot::default();
    let mut table = |name: &str, columns: &[Column], optional: bool, missing: &mut Vec<String>| {
        let Some(have) = reader.columns(name)? else {
            if !optional {
                missing.push(format!("no table \"{name}\": is this a better-auth database?"));
            }
            return Ok::<_, OpsError>(None);
        };
        let present: Vec<bool> = columns.iter().map(|c| have.iter().any(|h| h == c.name)).collect();
        let absent: Vec<&str> =
            columns.iter().zip(&present).filter(|(c, p)| c.required && !**p).map(|(c, _)| c.name).collect();
        if !absent.is_empty() {
            missing.push(format!("table \"{name}\" has no column {}", absent.join(", ")));
            return Ok(None);
        }
        if std::io::stderr().is_terminal() {
            eprintln!("reading {name}");
        }
        reader.rows(name, columns, &present).map(Some)
    };
    let mut missing = Vec::new();
    snapshot.users = table("user", USER, false, &mut missing)?;
    snapshot.accounts = table("account", ACCOUNT, false, &mut missing)?;
    snapshot.orgs = table("organization", ORGANIZATION, true, &mut missing)?;
    snapshot.members = table("member", MEMBER, true, &mut missing)?;
    snapshot.missing = missing;
    snapshot.sessions = reader.count("session")?;
    Ok(snapshot)
}

/// Runs the command: reads the source, checks everything against the data directory, and (unless a dry run or a
/// blocking problem) writes it all in one transaction. Returns the report; a blocking problem is an error whose
/// message is the report.
pub fn import(config: &Config, options: &Options) -> Result<String, OpsError> {
    import_with_faults(config, options, crate::store::FaultSwitch::default())
}

/// [`import`] with the store's test seam.
fn import_with_faults(
    config: &Config,
    options: &Options,
    faults: crate::store::FaultSwitch,
) -> Result<String, OpsError> {
    // First, so that a directory a server holds is refused before anything is read.
    let store = open_stopped_with_faults(config, faults)?;
    let existing = store.load()?;
    let snapshot = match &options.source {
        Source::Sqlite(path) => read(&mut sqlite::SqliteReader::open(path)?)?,
        Source::Postgres(url) => read(&mut postgres::PostgresReader::connect(url)?)?,
    };
    let roles = RoleSet::new(&config.roles.allowed, &config.roles.default);
    let unusable = || crate::hashing::hash_unknown_password(&config.hashing).map_err(|e| e.to_string());
    let plan = plan(&snapshot, &existing, &roles, unusable, crate::domain::Timestamp::now());
    let report = plan.report(options.dry_run);
    if !plan.blocking.is_empty() {
        return Err(OpsError::Invalid(report));
    }
    if options.dry_run {
        return Ok(report);
    }
    if let Some(path) = &options.mapping_out {
        write_mapping(path, &plan.mapping)?;
    }
    if std::io::stderr().is_terminal() {
        eprintln!("writing {} records in one transaction", plan.ops.len());
    }
    // One transaction: a crash or a disk error leaves the directory as it was, and a second run can start over.
    if let Err(e) = store.commit(&plan.ops) {
        if let Some(path) = &options.mapping_out {
            let _ = std::fs::remove_file(path);
        }
        return Err(e.into());
    }
    Ok(report)
}

/// One JSON object per line: `{"type": "user" | "organization", "better_auth_id": …, "id": …}`. Private: it
/// lists e-mails.
fn write_mapping(path: &Path, mapping: &[Mapping]) -> Result<(), OpsError> {
    let file = private_file(path)?;
    let mut w = std::io::BufWriter::new(file);
    let io = |e: std::io::Error| OpsError::Io(format!("{}: {e}", path.display()));
    for m in mapping {
        serde_json::to_writer(&mut w, m).map_err(|e| OpsError::Io(e.to_string()))?;
        w.write_all(b"\n").map_err(io)?;
    }
    w.flush().map_err(io)?;
    w.get_ref().sync_all().map_err(io)
}

#[cfg(test)]
mod tests;
