//! `GET /api/admin/users/export?format=csv|json&…`: the filtered user list as a file, with the filters of
//! `GET /api/admin/users` (`q`, `match`, `role`, `banned`, `organization_id`) and every match, in creation order.
//!
//! Streamed: the matching accounts are picked in one pass (references into the index, a few bytes each), then
//! written [`CHUNK`] users at a time into the answer while it is sent, so an export of a million accounts never
//! holds its text whole in memory, and a client that reads slowly only slows its own export.

use bytes::Bytes;
use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Request, Response};
use tokio::sync::mpsc;

use super::AppState;
use super::admin::users_query;
use super::dto::AdminUser;
use super::extract::Ctx;
use super::extract::{self, Refusal};
use super::response::{Body, Failure};
use crate::accounts::Window;
use crate::domain::{Timestamp, User};

/// Users written per chunk of the answer.
const CHUNK: usize = 128;
/// The columns of the CSV file: the fields of a user in `GET /api/admin/users`, in that order.
const CSV_HEADER: &str = "id,name,email,role,organization_id,banned,created_at\r\n";

#[derive(Clone, Copy, PartialEq, Eq)]
enum Format {
    Csv,
    Json,
}

pub async fn users(state: &AppState, _: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    extract::administrator(state, req.headers(), Refusal::Plain).await?;
    let (format, filters) = format_and_filters(req.uri().query().unwrap_or(""))?;
    let mut query = users_query(state.accounts.roles(), &filters)?;
    query.window = Window::Offset { offset: 0, limit: None };
    query.count = false;
    let users = state.accounts.find_users(query).await?.users;

    let (tx, rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(4);
    tokio::spawn(async move {
        let mut first = true;
        let opening = match format {
            Format::Csv => CSV_HEADER.as_bytes().to_vec(),
            Format::Json => b"[".to_vec(),
        };
        if tx.send(Ok(Bytes::from(opening))).await.is_err() {
            return;
        }
        for chunk in users.chunks(CHUNK) {
            let mut out = Vec::with_capacity(chunk.len() * 160);
            for user in chunk {
                match format {
                    Format::Csv => csv_row(&mut out, user),
                    Format::Json => {
                        if !std::mem::replace(&mut first, false) {
                            out.push(b',');
                        }
                        let _ = serde_json::to_writer(&mut out, &AdminUser::from(&**user));
                    }
                }
            }
            // The client went away: stop writing.
            if tx.send(Ok(Bytes::from(out))).await.is_err() {
                return;
            }
        }
        if format == Format::Json {
            let _ = tx.send(Ok(Bytes::from_static(b"]"))).await;
        }
    });

    let (content_type, extension) = match format {
        Format::Csv => ("text/csv; charset=utf-8", "csv"),
        Format::Json => ("application/json", "json"),
    };
    let day = &Timestamp::now().to_rfc3339()[..10];
    let disposition = format!("attachment; filename=\"users-{day}.{extension}\"");
    let mut response = Response::new(Body::stream(rx));
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    if let Ok(value) = HeaderValue::from_str(&disposition) {
        headers.insert(header::CONTENT_DISPOSITION, value);
    }
    Ok(response)
}

/// The `format` and the rest, the list's filters (as a query of `GET /api/admin/users` without its window).
fn format_and_filters(query: &str) -> Result<(Format, String), Failure> {
    let mut format = None;
    let mut filters = url::form_urlencoded::Serializer::new(String::new());
    for (key, value) in url::form_urlencoded::parse(query.as_bytes()) {
        match &*key {
            "format" if value == "csv" => format = Some(Format::Csv),
            "format" if value == "json" => format = Some(Format::Json),
            "format" => return Err(Failure::validation("format must be csv or json")),
            "limit" | "cursor" => {
                return Err(Failure::validation(format!("{key} is not taken: an export holds every match")));
            }
            _ => drop(filters.append_pair(&key, &value)),
        }
    }
    let format = format.ok_or_else(|| Failure::validation("format is required: csv or json"))?;
    Ok((format, filters.finish()))
}

/// One user as a CSV line (RFC 4180: CRLF, quoted where needed).
fn csv_row(out: &mut Vec<u8>, u: &User) {
    let org = u.organization_id.map(|o| o.to_string()).unwrap_or_default();
    let fields = [
        u.id.to_string(),
        u.name().to_owned(),
        u.email().to_owned(),
        u.role.as_str().to_owned(),
        org,
        u.banned.to_string(),
        u.created_at.to_rfc3339(),
    ];
    for (i, field) in fields.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        csv_field(out, field);
    }
    out.extend_from_slice(b"\r\n");
}

/// A field, quoted when it holds a comma, quote or line break, and defused when a spreadsheet would take it for a
/// formula (a name is anyone's choice: `=HYPERLINK(…)` would run in the administrator's spreadsheet): such a field
/// starts with `'`, as OWASP advises.
fn csv_field(out: &mut Vec<u8>, field: &str) {
    let formula = field.starts_with(['=', '+', '-', '@', '\t', '\r']);
    let quoted = formula || field.contains([',', '"', '\n', '\r']);
    if quoted {
        out.push(b'"');
    }
    if formula {
        out.push(b'\'');
    }
    for byte in field.bytes() {
        if byte == b'"' {
            out.push(b'"');
        }
        out.push(byte);
    }
    if quoted {
        out.push(b'"');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(text: &str) -> String {
        let mut out = Vec::new();
        csv_field(&mut out, text);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn csv_fields_are_quoted_where_needed_and_formulas_defused() {
        assert_eq!(field("Alice"), "Alice");
        assert_eq!(field("Lind, Anna"), "\"Lind, Anna\"");
        assert_eq!(field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(field("two\nlines"), "\"two\nlines\"");
        assert_eq!(field("=HYPERLINK(\"x\")"), "\"'=HYPERLINK(\"\"x\"\")\"");
        assert_eq!(field("+1"), "\"'+1\"");
        assert_eq!(field("-"), "\"'-\"");
        assert_eq!(field("@home"), "\"'@home\"");
        assert_eq!(field("a-b@c.d"), "a-b@c.d", "only the first character makes a formula");
    }
}
