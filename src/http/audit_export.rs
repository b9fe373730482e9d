//! `GET /api/admin/audit/export?from=&to=&format=ndjson|csv`: the audit log from `from` (inclusive) to `to`
//! (exclusive), oldest first, streamed in pages: the answer never holds more than a page and a few chunks in
//! memory, however long the log. The record shape is documented in docs/reference.md and does not change.

use bytes::Bytes;
use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Request, Response, StatusCode};
use tokio::sync::mpsc;

use super::AppState;
use super::dto::AuditEntry as Shown;
use super::extract::{self, Ctx, Refusal};
use super::response::{Body, Failure};
use crate::domain::{AuditEntry, AuditId};

/// Entries read per page.
const PAGE: usize = 1000;
/// Pages buffered ahead of a slow reader at most.
const AHEAD: usize = 2;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Format {
    Ndjson,
    Csv,
}

pub async fn export(state: &AppState, _: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    extract::administrator(state, req.headers(), Refusal::Plain).await?;
    let query = req.uri().query();
    extract::query_only(query, &["from", "to", "format"])?;
    let from = extract::query_value(query, "from").map(|v| time("from", &v)).transpose()?;
    let to = extract::query_value(query, "to").map(|v| time("to", &v)).transpose()?;
    let format = match extract::query_value(query, "format").as_deref() {
        None | Some("ndjson") => Format::Ndjson,
        Some("csv") => Format::Csv,
        Some(_) => return Err(Failure::validation("format must be ndjson or csv")),
    };
    // The largest id of the millisecond before `from`: every entry from `from` on sorts after it.
    let start = from.filter(|ms| *ms > 0).map(|ms| {
        let id = uuid::Builder::from_unix_timestamp_millis(ms as u64 - 1, &[0xff; 10]).into_uuid();
        AuditId::from_bytes(id.into_bytes())
    });
    let (tx, rx) = mpsc::channel(AHEAD);
    let accounts = state.accounts.clone();
    tokio::spawn(async move {
        let mut after = start;
        if format == Format::Csv {
            let head = "id,at,action,actor_id,target_id,ip_address,detail\r\n";
            if tx.send(Ok(Bytes::from_static(head.as_bytes()))).await.is_err() {
                return;
            }
        }
        loop {
            let page = match accounts.audit_after(after, PAGE).await {
                Ok(page) => page,
                Err(_) => {
                    // Cut off without the final chunk: the client sees an incomplete download, never a short one.
                    let _ = tx.send(Err(std::io::Error::other("the audit log could not be read"))).await;
                    return;
                }
            };
            let full = page.len() == PAGE;
            let mut chunk = Vec::with_capacity(page.len() * 160);
            let mut ended = false;
            for entry in &page {
                if to.is_some_and(|to| entry.at.as_millis() >= to) {
                    ended = true;
                    break;
                }
                write(&mut chunk, entry, format);
            }
            after = page.last().map(|e| e.id);
            if !chunk.is_empty() && tx.send(Ok(Bytes::from(chunk))).await.is_err() {
                return;
            }
            if ended || !full {
                return;
            }
        }
    });
    let mut response = Response::new(Body::stream(rx));
    *response.status_mut() = StatusCode::OK;
    let (kind, ext) = match format {
        Format::Ndjson => ("application/x-ndjson", "ndjson"),
        Format::Csv => ("text/csv; charset=utf-8", "csv"),
    };
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(kind));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    let disposition = format!("attachment; filename=\"audit.{ext}\"");
    if let Ok(value) = HeaderValue::from_str(&disposition) {
        headers.insert(header::CONTENT_DISPOSITION, value);
    }
    Ok(response)
}

/// `from` / `to`: an RFC 3339 time (`2026-11-01T00:00:00Z`), a date (`2026-11-01`, midnight UTC), or
/// milliseconds since 1970.
fn time(name: &str, value: &str) -> Result<i64, Failure> {
    let bad = || Failure::validation(format!("{name} must be an RFC 3339 time, a date (YYYY-MM-DD) or milliseconds"));
    if let Ok(ms) = value.parse::<i64>() {
        return (ms >= 0).then_some(ms).ok_or_else(bad);
    }
    let text = if value.len() == 10 { format!("{value}T00:00:00Z") } else { value.to_owned() };
    let parsed = chrono::DateTime::parse_from_rfc3339(&text).map_err(|_| bad())?;
    let ms = parsed.timestamp_millis();
    (ms >= 0).then_some(ms).ok_or_else(bad)
}

fn write(out: &mut Vec<u8>, entry: &AuditEntry, format: Format) {
    match format {
        Format::Ndjson => {
            let _ = serde_json::to_writer(&mut *out, &Shown::from(entry));
            out.push(b'\n');
        }
        Format::Csv => {
            let cells = [
                entry.id.to_string(),
                entry.at.to_rfc3339(),
                entry.action.clone(),
                entry.actor.map(|a| a.to_string()).unwrap_or_default(),
                entry.target.map(|t| t.hyphenated().to_string()).unwrap_or_default(),
                entry.ip_address.clone(),
                entry.detail.clone(),
            ];
            for (i, cell) in cells.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                csv_cell(out, cell);
            }
            out.extend_from_slice(b"\r\n");
        }
    }
}

/// One CSV cell (RFC 4180): quoted, quotes doubled. A cell a spreadsheet would run as a formula (`=`, `+`, `-`,
/// `@` first) is prefixed with `'`: an audit detail is partly written by users (names, reasons).
fn csv_cell(out: &mut Vec<u8>, cell: &str) {
    out.push(b'"');
    if cell.starts_with(['=', '+', '-', '@', '\t', '\r']) {
        out.push(b'\'');
    }
    out.extend_from_slice(cell.replace('"', "\"\"").as_bytes());
    out.push(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_and_cells() {
        assert_eq!(time("from", "1970-01-01T00:00:01Z").ok(), Some(1000));
        assert_eq!(time("from", "1970-01-02").ok(), Some(86_400_000));
        assert_eq!(time("from", "5").ok(), Some(5));
        assert!(time("from", "yesterday").is_err());
        let mut out = Vec::new();
        csv_cell(&mut out, "=cmd|\"x\"");
        assert_eq!(String::from_utf8(out).unwrap(), "\"'=cmd|\"\"x\"\"\"");
    }
}
