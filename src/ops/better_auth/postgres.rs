//! Reading a better-auth PostgreSQL database (the schema better-auth's migrations create: quoted camelCase
//! columns, `boolean`, `timestamp`/`timestamptz`), in the connection's current schema.

use postgres::{Client, NoTls};

use super::{Cell, Column, Kind, Reader};
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
    fn columns(&mut self, table: &str) -> Result<Option<Vec<String>>, OpsError> {
        let rows = self
            .client
            .query(
                "SELECT column_name::text FROM information_schema.columns \
                 WHERE table_schema = current_schema() AND table_name = $1",
                &[&table],
            )
            .map_err(db_error)?;
        let names: Vec<String> = rows.iter().map(|r| r.get(0)).collect();
        Ok((!names.is_empty()).then_some(names))
    }

    fn rows(&mut self, table: &str, columns: &[Column], present: &[bool]) -> Result<Vec<Vec<Cell>>, OpsError> {
        // Every column is converted in SQL to one of three types, whatever its declared type.
        let list: Vec<String> = columns
            .iter()
            .zip(present)
            .map(|(c, p)| match (c.kind, p) {
                (Kind::Text, true) => format!("{}::text", quoted(c.name)),
                (Kind::Bool, true) => format!("{}::boolean", quoted(c.name)),
                (Kind::Time, true) => format!("(extract(epoch from {}) * 1000)::bigint", quoted(c.name)),
                (Kind::Text, false) => "NULL::text".into(),
                (Kind::Bool, false) => "NULL::boolean".into(),
                (Kind::Time, false) => "NULL::bigint".into(),
            })
            .collect();
        let sql = format!("SELECT {} FROM {}", list.join(", "), quoted(table));
        let rows = self.client.query(&sql, &[]).map_err(db_error)?;
        let mut out = Vec::with_capacity(rows.len());
        for row in rows {
            let mut cells = Vec::with_capacity(columns.len());
            for (i, c) in columns.iter().enumerate() {
                let cell = match c.kind {
                    Kind::Text => row.try_get::<_, Option<String>>(i).map(|v| v.map_or(Cell::Null, Cell::Text)),
                    Kind::Bool => row.try_get::<_, Option<bool>>(i).map(|v| v.map_or(Cell::Null, Cell::Bool)),
                    Kind::Time => row.try_get::<_, Option<i64>>(i).map(|v| v.map_or(Cell::Null, Cell::Time)),
                };
                cells.push(cell.map_err(db_error)?);
            }
            out.push(cells);
        }
        Ok(out)
    }

    fn count(&mut self, table: &str) -> Result<u64, OpsError> {
        if self.columns(table)?.is_none() {
            return Ok(0);
        }
        let row = self.client.query_one(&format!("SELECT count(*) FROM {}", quoted(table)), &[]).map_err(db_error)?;
        Ok(u64::try_from(row.get::<_, i64>(0)).unwrap_or(0))
    }
}
