//! Reading a better-auth SQLite file. better-auth's SQLite adapter stores dates as ISO 8601 text and booleans as
//! 0/1; other tools writing the same schema use integers (seconds or milliseconds), which are read as well.

use std::path::Path;

use rusqlite::types::Value;
use rusqlite::{Connection, OpenFlags};

use super::{Cell, Column, Kind, Reader};
use crate::ops::OpsError;

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
    fn columns(&mut self, table: &str) -> Result<Option<Vec<String>>, OpsError> {
        let mut stmt = self.db.prepare("SELECT name FROM pragma_table_info(?1)").map_err(db_error)?;
        let names: Vec<String> =
            stmt.query_map([table], |row| row.get(0)).map_err(db_error)?.collect::<Result<_, _>>().map_err(db_error)?;
        Ok((!names.is_empty()).then_some(names))
    }

    fn rows(&mut self, table: &str, columns: &[Column], present: &[bool]) -> Result<Vec<Vec<Cell>>, OpsError> {
        let list: Vec<String> =
            columns.iter().zip(present).map(|(c, p)| if *p { quoted(c.name) } else { "NULL".into() }).collect();
        let sql = format!("SELECT {} FROM {}", list.join(", "), quoted(table));
        let mut stmt = self.db.prepare(&sql).map_err(db_error)?;
        let mut rows = stmt.query([]).map_err(db_error)?;
        let mut out = Vec::new();
        while let Some(row) = rows.next().map_err(db_error)? {
            let mut cells = Vec::with_capacity(columns.len());
            for (i, c) in columns.iter().enumerate() {
                let value: Value = row.get(i).map_err(db_error)?;
                cells.push(cell(value, c.kind));
            }
            out.push(cells);
        }
        Ok(out)
    }

    fn count(&mut self, table: &str) -> Result<u64, OpsError> {
        if self.columns(table)?.is_none() {
            return Ok(0);
        }
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
        // Seconds or milliseconds: anything below 10^11 is seconds (10^11 ms is 1973).
        (Value::Integer(n), Kind::Time) => Cell::Time(if n.abs() < 100_000_000_000 { n * 1000 } else { n }),
        #[allow(clippy::cast_possible_truncation)]
        (Value::Real(r), Kind::Time) => Cell::Time(r as i64),
        (Value::Text(t), Kind::Time) => super::plan::parse_time(&t).map_or(Cell::Text(t), Cell::Time),
        (Value::Text(t), Kind::Text) => Cell::Text(t),
        (Value::Integer(n), Kind::Text) => Cell::Text(n.to_string()),
        (Value::Real(r), Kind::Text) => Cell::Text(r.to_string()),
        (Value::Blob(b), _) => Cell::Text(String::from_utf8_lossy(&b).into_owned()),
        (Value::Real(r), Kind::Bool) => Cell::Bool(r != 0.0),
    }
}
