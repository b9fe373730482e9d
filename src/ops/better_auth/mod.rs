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
//! - a `user`, `account`, `organization`, `member` or `session` that is not a table (a view, a virtual or foreign
//!   table): only tables are read, and this is found before any row is;
//! - a password hash that is neither better-auth's scrypt (`saltHex:keyHex`) nor an argon2 PHC string within the
//!   bound ([`crate::hashing::check_stored_hash`]), or argon2 hashes of more than
//!   [`crate::hashing::MAX_OTHER_COSTS`] costs other than the configured one;
//! - a user or organization name this service refuses, an organization slug that is invalid or already taken, a
//!   ban reason `ban-user` would refuse ([`crate::domain::BanReason`]);
//! - a date that is not one, or outside the years 1970–9999 (`createdAt`, `updatedAt`, a ban's `banExpires`);
//! - a value longer than [`MAX_FIELD_BYTES`] (measured, not read).
//!
//! Stopping the command (an error, nothing written): a table of more than [`MAX_ROWS`] rows, or rows taking more
//! than [`MAX_BYTES_READ`] in all.
//!
//! Reported, and the rest of the row imported:
//! - role values not in `[roles] allowed` (the account gets `admin` if that was among its roles, else the first
//!   configured one, else the default role);
//! - memberships naming no imported user or organization, and organization roles other than owner, admin and
//!   member (custom roles are not served: such a membership comes over as `member`). Every other membership comes
//!   over with its roles; each account's first one (by `createdAt`) is its primary organization (`organizationId`);
//! - a ban whose `banExpires` has passed (imported unbanned, as better-auth would lift it at the next sign-in; a
//!   ban that ends later keeps its end);
//! - an empty name (better-auth takes one): the e-mail's local part instead;
//! - an `image` that is not an absolute http(s) URL (sign-up's rule): dropped; one that is comes over normalised
//!   as sign-up keeps it ([`crate::domain::ImageUrl`]);
//! - users without a password (social sign-in only): imported with a password nobody knows; a password reset
//!   gives them one.
//!
//! With `--secret` (better-auth's), the second factors of the two-factor plugin come over ([`two_factor`]). The
//! passkeys of `@better-auth/passkey` (its `passkey` table) and the API keys of `@better-auth/api-key` (its
//! `apikey` table) come over in any case ([`passkeys`], [`api_keys`]), and so do the organization plugin's teams
//! (its `team` and `teamMember` tables, [`teams`]) and the identity provider's clients and users' consents where
//! better-auth was an OAuth provider (`oauthClient` or `oauthApplication`, and `oauthConsent`: [`oauth`]).
//!
//! Pending invitations that have not expired come over with a new id (better-auth's ids are no UUIDs): the links
//! already mailed do not work here, so their organization's admins send them again (`invite-member` with
//! `resend`); the mapping file lists them. Not imported: sessions (people sign in once more), verification tokens,
//! invitations no longer pending, OAuth tokens (the sign-in providers' and the OAuth provider's: see [`oauth`]).
//!
//! Passwords are kept as they are: better-auth's scrypt hashes and argon2 hashes of another cost verify here and
//! are replaced with argon2id at the configured cost at each account's next sign-in (see [`crate::hashing`]).
//! better-auth's ids are not UUIDs, so new ids are minted; the mapping file (`--mapping-out`) lists old id → new
//! id for the application's own tables.

mod api_keys;
mod oauth;
mod passkeys;
mod plan;
mod postgres;
mod sqlite;
mod teams;
mod two_factor;

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};

use super::{OpsError, open_stopped_with_faults, private_file};
use crate::config::Config;
use crate::domain::RoleSet;
use crate::store::StoreOp;

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
    /// better-auth's secret (`BETTER_AUTH_SECRET`): with it the second factors (`twoFactor`) come over.
    pub secret: Option<String>,
}

/// One cell as read, database-neutral.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Cell {
    Null,
    Text(String),
    Bool(bool),
    /// Milliseconds since the epoch.
    Time(i64),
    /// A value longer than [`MAX_FIELD_BYTES`] (its length in bytes, at least): not read whole, never imported.
    TooLong(usize),
}

/// The most rows read from one table. The data directory keeps every account in memory, and the largest one
/// benchmarked holds 1,000,000 (`BENCHMARKS.md`); a table beyond this is refused before anything is written.
pub(crate) const MAX_ROWS: usize = 2_000_000;

/// The longest value read from any field, in bytes. The longest this service keeps is a 2,048-byte image URL;
/// a longer value cannot be imported, and is measured without being read (a 4 MB `banReason` was once taken).
pub(crate) const MAX_FIELD_BYTES: usize = 8 * 1024;

/// What the rows read may take in memory, all tables together (each cell counted with its text): a source
/// crafted to be huge ends the import with a message instead of taking the machine's memory.
pub(crate) const MAX_BYTES_READ: usize = 2 << 30;

/// A text value as read: [`Cell::TooLong`] beyond [`MAX_FIELD_BYTES`] (a reader that cannot stop the database
/// from sending more is bounded here).
pub(crate) fn text_cell(text: String) -> Cell {
    if text.len() > MAX_FIELD_BYTES { Cell::TooLong(text.len()) } else { Cell::Text(text) }
}

/// The rows of one table as they are read, within [`MAX_ROWS`] and the shared [`MAX_BYTES_READ`].
pub(crate) struct Collected<'a> {
    table: &'a str,
    rows: Vec<Vec<Cell>>,
    bytes: &'a mut usize,
}

impl<'a> Collected<'a> {
    pub(crate) fn new(table: &'a str, bytes: &'a mut usize) -> Self {
        Self { table, rows: Vec::new(), bytes }
    }

    pub(crate) fn push(&mut self, row: Vec<Cell>) -> Result<(), OpsError> {
        if self.rows.len() >= MAX_ROWS {
            return Err(OpsError::Invalid(format!(
                "table \"{}\" has more than {MAX_ROWS} rows, more than an import reads",
                self.table
            )));
        }
        let text: usize = row.iter().map(|c| if let Cell::Text(t) = c { t.len() } else { 0 }).sum();
        *self.bytes += text + size_of::<Cell>() * row.len() + size_of::<Vec<Cell>>();
        if *self.bytes > MAX_BYTES_READ {
            return Err(OpsError::Invalid(format!(
                "the tables read take more than {} MiB (at table \"{}\"), more than an import reads",
                MAX_BYTES_READ >> 20,
                self.table
            )));
        }
        self.rows.push(row);
        Ok(())
    }

    pub(crate) fn into_rows(self) -> Vec<Vec<Cell>> {
        self.rows
    }
}

/// What a name in the source is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Found {
    /// A table, with these columns.
    Table(Vec<String>),
    Missing,
    /// Something else of that name: a view (which can compute rows without end: a recursive one took 1.3 GB
    /// in 5.7 s, and counting one as `session` never ended), a virtual or foreign table. Only tables are read.
    NotATable(String),
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
    // The username plugin's, when it was on.
    col("username", Kind::Text, false),
    col("displayUsername", Kind::Text, false),
];
pub(crate) const ACCOUNT: &[Column] = &[
    col("userId", Kind::Text, true),
    col("providerId", Kind::Text, true),
    col("password", Kind::Text, true),
    // The provider's id of the person: what a sign-in through that provider here is matched by.
    col("accountId", Kind::Text, true),
];
pub(crate) const ORGANIZATION: &[Column] = &[
    col("id", Kind::Text, true),
    col("name", Kind::Text, true),
    col("slug", Kind::Text, true),
    col("createdAt", Kind::Time, false),
];
pub(crate) const INVITATION: &[Column] = &[
    col("id", Kind::Text, true),
    col("organizationId", Kind::Text, true),
    col("email", Kind::Text, true),
    col("role", Kind::Text, false),
    col("status", Kind::Text, false),
    col("inviterId", Kind::Text, false),
    col("expiresAt", Kind::Time, false),
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
    /// What `table` is, and its columns when it is a table.
    fn columns(&mut self, table: &str) -> Result<Found, OpsError>;
    /// Every row of table `table`, one cell per column of `columns` (NULL where `present[i]` is false), into
    /// `into` (which refuses more than it may hold).
    fn rows(
        &mut self,
        table: &str,
        columns: &[Column],
        present: &[bool],
        into: &mut Collected<'_>,
    ) -> Result<(), OpsError>;
    /// How many rows table `table` has.
    fn count(&mut self, table: &str) -> Result<u64, OpsError>;
}

/// A table's rows as read, one cell per column asked for.
pub(crate) type Rows = Vec<Vec<Cell>>;

/// The tables as read. `None`: the table does not exist.
#[derive(Debug, Default)]
pub struct Snapshot {
    pub(crate) users: Option<Vec<Vec<Cell>>>,
    pub(crate) accounts: Option<Vec<Vec<Cell>>>,
    pub(crate) orgs: Option<Vec<Vec<Cell>>>,
    pub(crate) members: Option<Vec<Vec<Cell>>>,
    pub(crate) invitations: Option<Vec<Vec<Cell>>>,
    pub(crate) sessions: u64,
    /// The `twoFactor` table (the two-factor plugin), when there is one.
    pub(crate) two_factor: Option<Vec<Vec<Cell>>>,
    /// The `passkey` table (`@better-auth/passkey`), when there is one.
    pub(crate) passkeys: Option<Vec<Vec<Cell>>>,
    /// The `apikey` table (`@better-auth/api-key`), when there is one.
    pub(crate) api_keys: Option<Vec<Vec<Cell>>>,
    /// The `team` and `teamMember` tables (the organization plugin's teams), when there is a `team` table.
    pub(crate) teams: Option<(Rows, Rows)>,
    /// The OAuth provider's clients (`@better-auth/oauth-provider`'s `oauthClient`, the older `oidcProvider`'s
    /// `oauthApplication`) and users' consents (`oauthConsent`), when there are.
    pub(crate) oauth_clients: Option<Rows>,
    pub(crate) oauth_applications: Option<Rows>,
    pub(crate) oauth_consents: Option<Rows>,
    /// Missing tables and required columns.
    pub(crate) missing: Vec<String>,
}

/// Reads the four tables (and counts the sessions) through `reader`. Anything of those names that is not a
/// table is a blocking problem, found before any row is read.
pub(crate) fn read(reader: &mut dyn Reader) -> Result<Snapshot, OpsError> {
    let mut snapshot = Snapshot::default();
    let tables: [(&str, &[Column], bool); 5] = [
        ("user", USER, false),
        ("account", ACCOUNT, false),
        ("organization", ORGANIZATION, true),
        ("member", MEMBER, true),
        ("invitation", INVITATION, true),
    ];
    let (mut missing, mut not_tables) = (Vec::new(), Vec::new());
    let mut have = Vec::new();
    for name in tables.iter().map(|t| t.0).chain(["session"]) {
        have.push(match reader.columns(name)? {
            Found::Table(columns) => Some(columns),
            Found::Missing => None,
            Found::NotATable(kind) => {
                not_tables.push(format!("\"{name}\" is a {kind}, not a table: only tables are read"));
                None
            }
        });
    }
    if !not_tables.is_empty() {
        snapshot.missing = not_tables;
        return Ok(snapshot);
    }
    let has_sessions = have.pop().flatten().is_some();
    let mut bytes = 0;
    let mut read = Vec::new();
    for ((name, columns, optional), have) in tables.into_iter().zip(have) {
        let Some(have) = have else {
            if !optional {
                missing.push(format!("no table \"{name}\": is this a better-auth database?"));
            }
            read.push(None);
            continue;
        };
        let present: Vec<bool> = columns.iter().map(|c| have.iter().any(|h| h == c.name)).collect();
        let absent: Vec<&str> =
            columns.iter().zip(&present).filter(|(c, p)| c.required && !**p).map(|(c, _)| c.name).collect();
        if !absent.is_empty() {
            missing.push(format!("table \"{name}\" has no column {}", absent.join(", ")));
            read.push(None);
            continue;
        }
        if std::io::stderr().is_terminal() {
            eprintln!("reading {name}");
        }
        let mut rows = Collected::new(name, &mut bytes);
        reader.rows(name, columns, &present, &mut rows)?;
        read.push(Some(rows.into_rows()));
    }
    let mut read = read.into_iter();
    (snapshot.users, snapshot.accounts, snapshot.orgs, snapshot.members, snapshot.invitations) = (
        read.next().flatten(),
        read.next().flatten(),
        read.next().flatten(),
        read.next().flatten(),
        read.next().flatten(),
    );
    snapshot.missing = missing;
    snapshot.sessions = if has_sessions { reader.count("session")? } else { 0 };
    // The plugins' tables, each read only when it is a table with the columns its rows need.
    snapshot.two_factor = plugin_table(reader, "twoFactor", two_factor::TWO_FACTOR, &mut bytes, &mut snapshot.missing)?;
    snapshot.passkeys = plugin_table(reader, "passkey", passkeys::PASSKEY, &mut bytes, &mut snapshot.missing)?;
    snapshot.api_keys = plugin_table(reader, "apikey", api_keys::API_KEY, &mut bytes, &mut snapshot.missing)?;
    let teams = plugin_table(reader, "team", teams::TEAM, &mut bytes, &mut snapshot.missing)?;
    if let Some(teams) = teams {
        let places = plugin_table(reader, "teamMember", teams::TEAM_MEMBER, &mut bytes, &mut snapshot.missing)?;
        snapshot.teams = Some((teams, places.unwrap_or_default()));
    }
    let missing = &mut snapshot.missing;
    snapshot.oauth_clients = plugin_table(reader, "oauthClient", oauth::OAUTH_CLIENT, &mut bytes, missing)?;
    snapshot.oauth_applications =
        plugin_table(reader, "oauthApplication", oauth::OAUTH_APPLICATION, &mut bytes, missing)?;
    snapshot.oauth_consents = plugin_table(reader, "oauthConsent", oauth::OAUTH_CONSENT, &mut bytes, missing)?;
    Ok(snapshot)
}

/// A plugin's table, when there is one: `None` when it is missing, or (said in `missing`) not a table or without
/// a column its rows need.
fn plugin_table(
    reader: &mut dyn Reader,
    name: &str,
    columns: &[Column],
    bytes: &mut usize,
    missing: &mut Vec<String>,
) -> Result<Option<Vec<Vec<Cell>>>, OpsError> {
    match reader.columns(name)? {
        Found::Table(have) => {
            let present: Vec<bool> = columns.iter().map(|c| have.iter().any(|h| h == c.name)).collect();
            let absent: Vec<&str> =
                columns.iter().zip(&present).filter(|(c, p)| c.required && !**p).map(|(c, _)| c.name).collect();
            if !absent.is_empty() {
                missing.push(format!("table \"{name}\" lacks {}", absent.join(", ")));
                return Ok(None);
            }
            let mut rows = Collected::new(name, bytes);
            reader.rows(name, columns, &present, &mut rows)?;
            Ok(Some(rows.into_rows()))
        }
        Found::Missing => Ok(None),
        Found::NotATable(kind) => {
            missing.push(format!("\"{name}\" is a {kind}, not a table: only tables are read"));
            Ok(None)
        }
    }
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
    let configured =
        crate::hashing::configured_parameters(&config.hashing).map_err(|e| OpsError::Invalid(e.to_string()))?;
    let hashing = plan::Hashing { configured: &configured, unusable };
    let mut plan = plan(&snapshot, &existing, &roles, hashing, crate::domain::Timestamp::now());
    if let Some(rows) = &snapshot.two_factor {
        // A dry run writes nothing, not even a data key: it checks with a key of its own.
        let key = if options.dry_run {
            crate::data_key::DataKey::ephemeral()
        } else {
            crate::data_key::DataKey::load_or_create_file(&config.data_key_path())
                .map_err(|e| OpsError::Io(format!("the data key: {e}")))?
        };
        two_factor::attach(&mut plan, rows, options.secret.as_deref(), &key);
    }
    if let Some(rows) = &snapshot.passkeys {
        passkeys::attach(&mut plan, rows, &store, crate::domain::Timestamp::now().as_millis());
    }
    if let Some(rows) = &snapshot.api_keys {
        api_keys::attach(&mut plan, rows, &existing, crate::domain::Timestamp::now().as_millis());
    }
    if let Some((teams, places)) = &snapshot.teams {
        teams::attach(&mut plan, teams, places, crate::domain::Timestamp::now().as_millis());
    }
    if snapshot.oauth_clients.is_some() || snapshot.oauth_applications.is_some() {
        oauth::attach(
            &mut plan,
            snapshot.oauth_clients.as_deref(),
            snapshot.oauth_applications.as_deref(),
            snapshot.oauth_consents.as_deref(),
            &store,
            crate::domain::Timestamp::now().as_millis(),
        );
    }

    // Identities of providers this server does not know yet: imported, and said, so the operator adds them.
    let unknown: std::collections::BTreeSet<&str> = plan
        .ops
        .iter()
        .filter_map(|op| match op {
            StoreOp::PutAccount(a) if !config.oauth.providers.iter().any(|p| p.id == a.provider) => {
                Some(a.provider.as_str())
            }
            _ => None,
        })
        .collect();
    let unknown: Vec<String> = unknown.into_iter().map(str::to_owned).collect();
    for provider in unknown {
        plan.notes.push(format!(
            "accounts sign in with {provider}, which is not in [[oauth.providers]] here: add it (id = \"{provider}\", \
             same client) for them to sign in"
        ));
    }
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

/// One JSON object per line: `{"type": "user" | "organization" | "passkey" | …, "better_auth_id": …, "id": …}`. Private: it
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
