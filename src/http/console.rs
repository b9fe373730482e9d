//! The administration console: one page, one script module and one style sheet, embedded at compile time from
//! `console/` and served at `/admin/`, and what its status page shows and does: `GET /api/admin/status` (the
//! numbers), `GET /api/admin/config` (the configuration in effect), `POST /api/admin/test-mail`.
//!
//! The console is a client of the same API as everyone else (same guards, same audit); it holds no token: the
//! session cookie is HttpOnly, and the script never reads an answer that carries one (see `console/app.js`).

use std::path::Path;
use std::sync::LazyLock;
use std::time::SystemTime;

use bytes::Bytes;
use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Request, Response, StatusCode};
use serde_json::json;
use sha2::{Digest, Sha256};

use super::AppState;
use super::dto::{ConfigInEffect, LastDelivery, MailQueued};
use super::extract::Ctx;
use super::extract::{self, Refusal};
use super::response::{Body, Failure, json as answer, ok};
use crate::domain::Email;

/// What the browser may do with the console's answers: only our own script and style (no inline code, so an
/// injected `<script>` or `style=` does nothing), never inside a frame (no click-jacking), no `<base>` tricks, and
/// forms post only here.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; style-src 'self'; \
     img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

/// One embedded file: its name under `/admin/`, type and bytes, and an ETag over the bytes.
struct Asset {
    name: &'static str,
    content_type: &'static str,
    body: &'static [u8],
    etag: HeaderValue,
}

impl Asset {
    fn new(name: &'static str, content_type: &'static str, body: &'static [u8]) -> Self {
        // The ETag is the content's hash, so a new build with other assets never matches a cached copy.
        let digest = Sha256::digest(body);
        let hex: String = digest[..12].iter().map(|b| format!("{b:02x}")).collect();
        let etag = HeaderValue::from_str(&format!("\"{hex}\"")).unwrap_or(HeaderValue::from_static("\"0\""));
        Self { name, content_type, body, etag }
    }
}

/// A script module of `console/` (each page beyond the shell is a module of its own, imported by `app.js`).
macro_rules! script {
    ($name:literal) => {
        Asset::new($name, "text/javascript; charset=utf-8", crate::embedded_file!("console", $name))
    };
}

static ASSETS: LazyLock<Vec<Asset>> = LazyLock::new(|| {
    vec![
        Asset::new("", "text/html; charset=utf-8", crate::embedded_file!("console", "index.html")),
        script!("app.js"),
        Asset::new("console.css", "text/css; charset=utf-8", crate::embedded_file!("console", "console.css")),
        // Console, round two: the user-agent parser, the overview, the audit search, the users' tools.
        script!("ua.js"),
        script!("overview.js"),
        script!("audit.js"),
        script!("users.js"),
        script!("webhooks.js"),
        script!("clients.js"),
        // Delegated administration: an organization's owners and admins (#29).
        script!("orgadmin.js"),
        // An organization's single sign-on providers, policy and SCIM tokens (#48).
        script!("sso.js"),
    ]
});

/// `GET /admin/` and `GET /admin/{asset}`: the console's files. `Cache-Control: no-cache` with an ETag: the
/// browser keeps a copy but asks every time (a 304 costs a few bytes), so an upgraded server never runs with the
/// previous version's script.
pub fn asset(req: &Request<Incoming>) -> Result<Response<Body>, Failure> {
    let name = req.uri().path().trim_start_matches("/admin/");
    let asset = ASSETS
        .iter()
        .find(|a| a.name == name)
        .ok_or_else(|| Failure::with_status(StatusCode::NOT_FOUND, "Not found"))?;
    let fresh = req
        .headers()
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|tag| tag.trim() == asset.etag || tag.trim() == "*");
    let mut response = if fresh {
        let mut response = Response::new(Body::default());
        *response.status_mut() = StatusCode::NOT_MODIFIED;
        response
    } else {
        let mut response = Response::new(Body::new(Bytes::from_static(asset.body)));
        response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(asset.content_type));
        response
    };
    let headers = response.headers_mut();
    headers.insert(header::ETAG, asset.etag.clone());
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CONTENT_SECURITY_POLICY));
    // The console's addresses carry user ids; no other site needs to see them.
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    Ok(response)
}

/// `GET /api/admin/status`: who is signed in, the version, the counts, the store's size and the newest backup.
/// Numbers only, for administrators; paths are left out (they are the operator's business, not the page's).
pub async fn status(state: &AppState, _: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let admin = extract::administrator(state, req.headers(), Refusal::Plain).await?;
    extract::query_only(req.uri().query(), &[])?;
    let store_bytes = tokio::fs::metadata(&state.store_file).await.map(|m| m.len()).ok();
    let last_backup_at = match state.backup_dir.clone() {
        Some(dir) => tokio::task::spawn_blocking(move || newest_backup(&dir)).await.ok().flatten(),
        None => None,
    };
    let levels = state.accounts.levels();
    let without_second_factor = state.accounts.administrators_without_second_factor().await?;
    Ok(ok(&json!({
        "version": env!("CARGO_PKG_VERSION"),
        "signed_in_as": {"id": admin.id, "email": admin.email(), "name": admin.name()},
        "roles": state.accounts.roles().allowed().collect::<Vec<_>>(),
        "users": levels.users,
        "sessions": levels.sessions,
        "organizations": levels.organizations,
        "store_bytes": store_bytes,
        "backups_configured": state.backup_dir.is_some(),
        "last_backup_at": last_backup_at,
        "administrators_without_second_factor": without_second_factor,
        "second_factor_required_for": state.accounts.two_factor_roles(),
    })))
}

/// `GET /api/admin/config`: the configuration in effect (file, environment and defaults; every value that may
/// hold a credential redacted, client secrets left out), for the status page.
pub async fn config(state: &AppState, _: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    extract::administrator(state, req.headers(), Refusal::Plain).await?;
    extract::query_only(req.uri().query(), &[])?;
    let view = state.settings.load();
    let last_delivery = state.accounts.last_delivery().map(|d| LastDelivery {
        at: d.at.to_rfc3339(),
        ok: d.error.is_none(),
        error: d.error,
    });
    Ok(ok(&ConfigInEffect {
        source: view.source.as_deref(),
        settings: &view.settings,
        live: crate::config::LIVE,
        reloaded_at: view.reloaded_at.map(|at| at.to_rfc3339()),
        need_restart: &view.need_restart,
        mail_configured: state.accounts.outbox().is_some(),
        last_delivery,
    }))
}

/// `POST /api/admin/test-mail` `{to}` → 202 `{mail_id}`: a test message queued through the durable outbox,
/// audited (`mail.test_queued`); whether it went out shows on the status page (`last_delivery`).
pub async fn test_mail(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let admin = extract::administrator(state, req.headers(), Refusal::Plain).await?;
    let body = extract::json_object(req, true, state.body_timeout()).await?;
    body.only(&["to"])?;
    let to = Email::parse(body.string("to")?).map_err(|_| Failure::validation("to must be an e-mail address"))?;
    let id = state.accounts.send_test_mail(admin.id, &to, &ctx.ip.to_string()).await?;
    Ok(answer(StatusCode::ACCEPTED, &MailQueued { mail_id: id.to_string() }))
}

/// When the newest snapshot in the backup directory was written (RFC 3339), if there is one.
fn newest_backup(dir: &Path) -> Option<String> {
    let newest: SystemTime = crate::accounts::newest_backup(dir)?;
    Some(chrono::DateTime::<chrono::Utc>::from(newest).to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The audit page's words name actions the server writes (`domain::audit::action`): none is a stale or misspelt
    /// code. An action added later without words shows its code until they are added (the page
    /// falls back to it), so a new action does not break this test; the ones that have words keep them honest.
    #[test]
    fn the_audit_actions_in_words_are_the_servers_actions() {
        let domain = include_str!("../domain/audit.rs");
        let module = &domain[domain.find("pub mod action {").unwrap()..];
        let module = &module[..module.find("\n}").unwrap()];
        let actions: Vec<&str> =
            module.lines().filter_map(|l| l.trim().strip_prefix("pub const ")?.split('"').nth(1)).collect();
        assert!(actions.len() > 40, "{actions:?}");
        let script = std::str::from_utf8(include_bytes!("../../console/audit.js")).unwrap();
        let table = &script[script.find("export const ACTION_WORDS = {").unwrap()..];
        let table = &table[..table.find("};").unwrap()];
        let worded: Vec<&str> = table.lines().filter_map(|l| l.trim().strip_prefix('"')?.split('"').next()).collect();
        for code in &worded {
            assert!(actions.contains(code), "{code} has words in console/audit.js but is no action of the server");
        }
    }

    #[test]
    fn every_asset_has_its_type_and_a_distinct_etag() {
        let names: Vec<&str> = ASSETS.iter().map(|a| a.name).collect();
        assert_eq!(names[..3], ["", "app.js", "console.css"]);
        assert!(ASSETS[0].content_type.starts_with("text/html"));
        assert!(ASSETS[2].content_type.starts_with("text/css"));
        for asset in ASSETS.iter().filter(|a| a.name.ends_with(".js")) {
            assert!(asset.content_type.starts_with("text/javascript"), "{}", asset.name);
        }
        let mut etags: Vec<_> = ASSETS.iter().map(|a| a.etag.clone()).collect();
        etags.sort_unstable_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
        etags.dedup();
        assert_eq!(etags.len(), ASSETS.len(), "two assets share an ETag");
    }

    /// Every module a script imports (`from "./x.js"`) is served: a module left out of [`ASSETS`] would be a 404
    /// and a blank console.
    #[test]
    fn every_imported_module_is_served() {
        for asset in ASSETS.iter().filter(|a| a.name.ends_with(".js")) {
            let script = std::str::from_utf8(asset.body).unwrap();
            for import in script.split("from \"./").skip(1) {
                let name = import.split('"').next().unwrap();
                assert!(ASSETS.iter().any(|a| a.name == name), "{} imports {name}, which is not served", asset.name);
            }
        }
    }

    /// The page may load only its own files: no inline script or style anywhere in it, and it names the
    /// script and the style sheet that the router serves.
    #[test]
    fn the_page_has_no_inline_script_or_style() {
        let page = std::str::from_utf8(ASSETS[0].body).unwrap();
        assert!(page.contains(r#"<script type="module" src="app.js"></script>"#));
        assert!(page.contains(r#"<link rel="stylesheet" href="console.css">"#));
        assert!(!page.contains("style="), "inline style attribute");
        assert!(!page.contains("<style"), "inline style element");
        assert_eq!(page.matches("<script").count(), 1, "one script, from a file");
        for asset in ASSETS.iter().filter(|a| a.name.ends_with(".js")) {
            let script = std::str::from_utf8(asset.body).unwrap();
            // innerHTML would turn a user's name into markup; the scripts build nodes and set text only.
            assert!(!script.contains("innerHTML"), "{} must not use innerHTML", asset.name);
            assert!(!script.contains("eval("), "{} must not use eval", asset.name);
        }
    }
}
