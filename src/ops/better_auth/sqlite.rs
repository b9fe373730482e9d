//! Reading a better-auth SQLite file. better-auth's SQLite adapter stores dates as ISO 8601 text and booleans as
//! 0/1; other tools writing the same schema use integers (seconds or milliseconds), which are read as well.
//!
//! The file is the operator's, but its content may not be what it claims: only tables are read (a view, even
//! a recursive one that never ends, is refused by its type in `sqlite_master` before any row is read), each
//! value is measured before it is read (`octet_length`, which SQLite answers from the record's header), and
//! SQLite itself refuses to build any value over [`MAX_VALUE_BYTES`]. (Generated columns are not among the
//! columns `pragma_table_info` lists, so their expressions are never evaluated.)

use std::path::Path;

use rusqlite::limits::Limit;
use rusqlite::types::Value;
use rusqlite::{Connection, OpenFlags};

use super::{Cell, Collected, Column, Found, Kind, MAX_FIELD_BYTES, Reader};
use crate::ops::OpsError;

/// The largest string or blob SQLite builds for this reader (its own default is 1,000,000,000 bytes).
const MAX_VALUE_BYTES: i32 = 16 << 20;

pub(crate) struct SqliteReader {
    db: Connection,
}

impl SqliteReader {
    /// Opens `path` read-only: the import never changes the source.
    pub(crate) fn open(path: &Path) -> Result<Self, OpsError> {
        if !path.is_file() {
            return Err(OpsError::Io(format!("{}: no such file", path.display())));
        }
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let db = Connection::open_with_flags(path, flags).map_err(|e| sqlite_error(path, e))?;
        db.set_limit(Limit::SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES).map_err(|e| sqlite_error(path, e))?;
        // A file that is not SQLite fails on the first read, not at open: check here for a clear message.
        db.query_row("SELECT count(*) FROM sqlite_master", [], |_| Ok(())).map_err(|e| sqlite_error(path, e))?;
        Ok(Self { db })
    }
}

fn sqlite_error(path: &Path, e: rusqlite::Error) -> OpsError {
    OpsError::Invalid(format!("{}: cannot read as SQLite: {e}", path.display()))
}

fn db_error(e: rusqlite::Error) -> OpsError {
    OpsError::Invalid(format!("reading the SQLite database: {e}"))
}

/// `"name"`, with any `"` doubled: table and column names come from our own constants, but quoting them is what
/// lets `user` (a keyword) be a table name.
fn quoted(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

impl Reader for SqliteReader {
    fn columns(&mut self, table: &str) -> Result<Found, OpsError> {
        // Names are case-insensitive in SQLite: `USER` is the table `user` reads.
        let kind: Option<(String, Option<String>)> = self
            .db
            .query_row(
                "SELECT type, sql FROM sqlite_master WHERE lower(name) = lower(?1) AND type IN ('table', 'view')",
                [table],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )
            .map(Some)
            .or_else(|e| if e == rusqlite::Error::QueryReturnedNoRows { Ok(None) } else { Err(e) })
            .map_err(db_error)?;
        match kind {
            None => return Ok(Found::Missing),
            Some((kind, _)) if kind != "table" => return Ok(Found::NotATable(kind)),
            // A virtual table's rows come from its module's code, not from the file.
            Some((_, Some(sql))) if sql.trim_start().to_ascii_uppercase().starts_with("CREATE VIRTUAL") => {
                return Ok(Found::NotATable("virtual table".into()));
            }
            Some(_) => {}
        }
        let mut stmt = self.db.prepare("SELECT name FROM pragma_table_info(?1)").map_err(db_error)?;
        let names: Vec<String> =
            stmt.query_map([table], |row| row.get(0)).map_err(db_error)?.collect::<Result<_, _>>().map_err(db_error)?;
        Ok(Found::Table(names))
    }

    fn rows(
        &mut self,
        table: &str,
        columns: &[Column],
        present: &[bool],
        into: &mut Collected<'_>,
    ) -> Result<(), OpsError> {
        // Each column twice: its length, which SQLite reads from the record without the value, and the value
        // only when that length is within the bound.
        let list: Vec<String> = columns
            .iter()
            .zip(present)
            .map(|(c, p)| match p {
                true => {
                    let q = quoted(c.name);
                    format!("octet_length({q}), CASE WHEN octet_length({q}) <= {MAX_FIELD_BYTES} THEN {q} END")
                }
                false => "NULL, NULL".into(),
            })
            .collect();
        let sql = format!("SELECT {} FROM {}", list.join(", "), quoted(table));
        let mut stmt = self.db.prepare(&sql).map_err(db_error)?;
        let mut rows = stmt.query([]).map_err(db_error)?;
        while let Some(row) = rows.next().map_err(db_error)? {
            let mut cells = Vec::with_capacity(columns.len());
            for (i, c) in columns.iter().enumerate() {
                let length: Option<i64> = row.get(2 * i).map_err(db_error)?;
                let length = length.and_then(|n| usize::try_from(n).ok()).unwrap_or(0);
                if length > MAX_FIELD_BYTES {
                    cells.push(Cell::TooLong(length));
                    continue;
                }
                let value: Value = row.get(2 * i + 1).map_err(db_error)?;
                cells.push(cell(value, c.kind));
            }
            into.push(cells)?;
        }
        Ok(())
    }

    fn count(&mut self, table: &str) -> Result<u64, OpsError> {
        let sql = format!("SELECT count(*) FROM {}", quoted(table));
        let n: i64 = self.db.query_row(&sql, [], |row| row.get(0)).map_err(db_error)?;
        Ok(u64::try_from(n).unwrap_or(0))
    }
}

fn cell(value: Value, kind: Kind) -> Cell {
    match (value, kind) {
        (Value::Null, _) => Cell::Null,
        (Value::Integer(n), Kind::Bool) => Cell::Bool(n != 0),
        (Value::Text(t), Kind::Bool) => Cell::Bool(matches!(t.as_str(), "1" | "true" | "TRUE")),
        // Seconds or milliseconds: anything below 10^11 is seconds (10^11 ms is 1973). `i64::MIN` has no absolute
        // value (`abs` wrapped it to 1970 once); any value out of range is refused by the plan.
        (Value::Integer(n), Kind::Time) => Cell::Time(if n.unsigned_abs() < 100_000_000_000 { n * 1000 } else { n }),
        // Saturating: an absurd real lands out of range, where the plan names it; NaN and infinities are no time.
        #[allow(clippy::cast_possible_truncation)]
        (Value::Real(r), Kind::Time) if r.is_finite() => Cell::Time(r as i64),
        (Value::Real(r), Kind::Time) => Cell::Text(r.to_string()),
        (Value::Text(t), Kind::Time) => super::plan::parse_time(&t).map_or(Cell::Text(t), Cell::Time),
        (Value::Text(t), Kind::Text) => Cell::Text(t),
        (Value::Integer(n), Kind::Text) => Cell::Text(n.to_string()),
        (Value::Real(r), Kind::Text) => Cell::Text(r.to_string()),
        (Value::Blob(b), _) => super::text_cell(String::from_utf8_lossy(&b).into_owned()),
        (Value::Real(r), Kind::Bool) => Cell::Bool(r != 0.0),
    }
}
