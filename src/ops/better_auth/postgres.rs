//! Reading a better-auth PostgreSQL database (the schema better-auth's migrations create: quoted camelCase
//! columns, `boolean`, `timestamp`/`timestamptz`), in the connection's current schema.
//!
//! Only base tables are read (a view, a foreign table, a materialised view is refused before any row is read);
//! rows are streamed, not gathered by the client first, and each text value is cut by the server to one byte
//! past what could ever be imported, so that a longer one is known to be too long without being sent whole.

use postgres::fallible_iterator::FallibleIterator;
use postgres::{Client, NoTls};

use super::{Cell, Collected, Column, Found, Kind, MAX_FIELD_BYTES, Reader};
use crate::ops::OpsError;

pub(crate) struct PostgresReader {
    client: Client,
}

impl PostgresReader {
    /// Connects without TLS: the command runs next to the database (a TLS-only server refuses with a message).
    pub(crate) fn connect(url: &str) -> Result<Self, OpsError> {
        let client =
            Client::connect(url, NoTls).map_err(|e| OpsError::Invalid(format!("cannot connect to PostgreSQL: {e}")))?;
        Ok(Self { client })
    }
}

fn db_error(e: postgres::Error) -> OpsError {
    OpsError::Invalid(format!("reading the PostgreSQL database: {e}"))
}

fn quoted(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

impl Reader for PostgresReader {
    fn columns(&mut self, table: &str) -> Result<Found, OpsError> {
        let kind = self
            .client
            .query_opt(
                "SELECT table_type::text FROM information_schema.tables \
                 WHERE table_schema = current_schema() AND table_name = $1",
                &[&table],
            )
            .map_err(db_error)?;
        match kind.map(|row| row.get::<_, String>(0)) {
            None => return Ok(Found::Missing),
            Some(kind) if kind != "BASE TABLE" => return Ok(Found::NotATable(kind.to_lowercase())),
            Some(_) => {}
        }
        let rows = self
            .client
            .query(
                "SELECT column_name::text FROM information_schema.columns \
                 WHERE table_schema = current_schema() AND table_name = $1",
                &[&table],
            )
            .map_err(db_error)?;
        Ok(Found::Table(rows.iter().map(|r| r.get(0)).collect()))
    }

    fn rows(
        &mut self,
        table: &str,
        columns: &[Column],
        present: &[bool],
        into: &mut Collected<'_>,
    ) -> Result<(), OpsError> {
        // Every column is converted in SQL to one of three types, whatever its declared type. Text is cut to one
        // character more than the bound (so a longer value still shows as too long); a time comes as a float so
        // that `infinity` or a year beyond 294276 is a value the plan names, not a failed cast.
        let list: Vec<String> = columns
            .iter()
            .zip(present)
            .map(|(c, p)| match (c.kind, p) {
                (Kind::Text, true) => format!("left({}::text, {})", quoted(c.name), MAX_FIELD_BYTES + 1),
                (Kind::Bool, true) => format!("{}::boolean", quoted(c.name)),
                (Kind::Time, true) => format!("(extract(epoch from {}) * 1000)::float8", quoted(c.name)),
                (Kind::Text, false) => "NULL::text".into(),
                (Kind::Bool, false) => "NULL::boolean".into(),
                (Kind::Time, false) => "NULL::float8".into(),
            })
            .collect();
        let sql = format!("SELECT {} FROM {}", list.join(", "), quoted(table));
        let no_params: [&(dyn postgres::types::ToSql + Sync); 0] = [];
        let mut rows = self.client.query_raw(&sql, no_params).map_err(db_error)?;
        while let Some(row) = rows.next().map_err(db_error)? {
            let mut cells = Vec::with_capacity(columns.len());
            for (i, c) in columns.iter().enumerate() {
                let cell = match c.kind {
                    Kind::Text => row.try_get::<_, Option<String>>(i).map(|v| v.map_or(Cell::Null, super::text_cell)),
                    Kind::Bool => row.try_get::<_, Option<bool>>(i).map(|v| v.map_or(Cell::Null, Cell::Bool)),
                    Kind::Time => row.try_get::<_, Option<f64>>(i).map(|v| v.map_or(Cell::Null, time_cell)),
                };
                cells.push(cell.map_err(db_error)?);
            }
            into.push(cells)?;
        }
        Ok(())
    }

    fn count(&mut self, table: &str) -> Result<u64, OpsError> {
        let row = self.client.query_one(&format!("SELECT count(*) FROM {}", quoted(table)), &[]).map_err(db_error)?;
        Ok(u64::try_from(row.get::<_, i64>(0)).unwrap_or(0))
    }
}

/// Milliseconds as PostgreSQL computed them: rounded, saturating (an absurd value lands out of range, where the
/// plan names it); `infinity` is no time.
#[allow(clippy::cast_possible_truncation)]
fn time_cell(ms: f64) -> Cell {
    if ms.is_finite() { Cell::Time(ms.round() as i64) } else { Cell::Text(ms.to_string()) }
}
