//! `GET /`, which leads to the console, and the pages behind the links the service mails, for a deployment without pages of its own: when a reset or
//! verification request names no `redirectTo`/`callbackURL`, the mailed link leads here (see `mail::Templates`).
//! `GET /auth/reset-password?token=` is a form that posts the new password to `POST /api/auth/reset-password`;
//! `GET /auth/email-verified` says the address is confirmed; both show "no longer valid" for `?error=` (the
//! link endpoints add it) or a missing token. Static files embedded from `pages/`, no build step, under the
//! console's Content-Security-Policy.

use bytes::Bytes;
use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Request, Response, StatusCode};

use super::console::CONTENT_SECURITY_POLICY;
use super::extract;
use super::response::{Body, Failure};

const RESET_HTML: &[u8] = include_bytes!("../../pages/reset-password.html");
const VERIFIED_HTML: &[u8] = include_bytes!("../../pages/email-verified.html");
const INVALID_HTML: &[u8] = include_bytes!("../../pages/link-invalid.html");
const SETUP_HTML: &[u8] = include_bytes!("../../pages/setup.html");
const SET_UP_HTML: &[u8] = include_bytes!("../../pages/setup-done.html");

/// The files the pages load, by their name under `/auth/`.
const ASSETS: &[(&str, &str, &[u8])] = &[
    ("pages.css", "text/css; charset=utf-8", include_bytes!("../../pages/pages.css")),
    ("reset-password.js", "text/javascript; charset=utf-8", include_bytes!("../../pages/reset-password.js")),
    ("setup.js", "text/javascript; charset=utf-8", include_bytes!("../../pages/setup.js")),
];

/// `GET /`: to the console, the one page a person opening the server's address can use (there is no account page
/// yet). A 302, not a 301: a browser keeps a permanent redirect for good, and `/` may lead elsewhere in a later
/// version (a page linking the console and the account page). The query, if any, is not carried over.
pub fn root() -> Response<Body> {
    let mut response = Response::new(Body::default());
    *response.status_mut() = StatusCode::FOUND;
    let headers = response.headers_mut();
    headers.insert(header::LOCATION, HeaderValue::from_static(CONSOLE_PATH));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

/// Where the console is served (see `http::console`); `/` leads there and the start-up log names it.
pub const CONSOLE_PATH: &str = "/admin/";

/// `GET /auth/reset-password`: the form while the address carries a token, else "no longer valid".
pub fn reset_password(req: &Request<Incoming>) -> Result<Response<Body>, Failure> {
    let query = req.uri().query();
    let usable = extract::query_value(query, "error").is_none()
        && extract::query_value(query, "token").is_some_and(|t| !t.is_empty());
    Ok(page(if usable { RESET_HTML } else { INVALID_HTML }))
}

/// `GET /auth/email-verified`: "confirmed", or "no longer valid" when the link endpoint added `?error=`.
pub fn email_verified(req: &Request<Incoming>) -> Result<Response<Body>, Failure> {
    let failed = extract::query_value(req.uri().query(), "error").is_some();
    Ok(page(if failed { INVALID_HTML } else { VERIFIED_HTML }))
}

/// The first-run setup page (`GET /admin/setup`, see `http::setup`): the form, or "set up already".
pub fn setup(has_admin: bool) -> Response<Body> {
    page(if has_admin { SET_UP_HTML } else { SETUP_HTML })
}

/// `GET /auth/{asset}`: the style sheet and the forms' scripts.
pub fn asset(req: &Request<Incoming>) -> Result<Response<Body>, Failure> {
    let name = req.uri().path().trim_start_matches("/auth/");
    let (_, content_type, body) = ASSETS
        .iter()
        .find(|(n, _, _)| *n == name)
        .ok_or_else(|| Failure::with_status(StatusCode::NOT_FOUND, "Not found"))?;
    Ok(answer(content_type, body, "no-cache"))
}

/// A page: never stored (its address may carry a live token), and never sent on as a referrer.
fn page(body: &'static [u8]) -> Response<Body> {
    answer("text/html; charset=utf-8", body, "no-store")
}

fn answer(content_type: &'static str, body: &'static [u8], cache: &'static str) -> Response<Body> {
    let mut response = Response::new(Body::new(Bytes::from_static(body)));
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CONTENT_SECURITY_POLICY));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pages load only their own files: no inline script or style, and every file they name is served.
    #[test]
    fn the_pages_have_no_inline_script_or_style_and_name_only_served_files() {
        for page in [RESET_HTML, VERIFIED_HTML, INVALID_HTML, SETUP_HTML, SET_UP_HTML] {
            let page = std::str::from_utf8(page).unwrap();
            assert!(page.contains(r#"<html lang="en">"#));
            // The setup pages are under /admin/: their files are named from there.
            let prefix = if page.contains("../auth/") { "../auth/" } else { "" };
            assert!(page.contains(&format!(r#"<link rel="stylesheet" href="{prefix}pages.css">"#)));
            assert!(!page.contains("style=") && !page.contains("<style"), "inline style");
            for script in page.split("<script").skip(1) {
                let src = script.split("src=\"").nth(1).and_then(|s| s.split('"').next()).expect("a script file");
                let src = src.trim_start_matches(prefix);
                assert!(ASSETS.iter().any(|(n, _, _)| *n == src), "{src} is not served");
            }
        }
        for (name, _, body) in ASSETS {
            let text = std::str::from_utf8(body).unwrap();
            assert!(!text.contains("innerHTML") && !text.contains("eval("), "{name}");
        }
    }
}
