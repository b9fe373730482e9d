//! The pages the binary serves to people, for a deployment without pages of its own. Static files embedded from
//! `pages/`, no build step, under the console's Content-Security-Policy; the scripts are clients of the same API as
//! everyone else (`/api/auth/*`, with the session cookie).
//!
//! - `GET /`: the front door, a page linking the console and the account page.
//! - `GET /sign-in?returnTo=<path>`: e-mail and password, the second factor's step, passkeys and the configured
//!   identity providers; then back to `returnTo` when it is a path on this site (anything else: the account page).
//! - `GET /account/`: a signed-in user's own account (profile, password, second factor, passkeys, sessions, linked
//!   identities, organizations and invitations).
//! - `GET /accept-invitation?id=`: the page the invitation mail links to (see `mail::Templates`).
//! - `GET /consent?<authorization request>`: the identity provider's consent page (docs/oidc-provider.md).
//! - `GET /sign-out?<end-session request>`: the identity provider's logout confirmation page, and the signed-out
//!   page (docs/oidc-provider.md).
//! - The pages behind the mailed links when a reset or verification request names no `redirectTo`/`callbackURL`:
//!   `GET /auth/reset-password?token=` is a form that posts the new password to `POST /api/auth/reset-password`;
//!   `GET /auth/email-verified` says the address is confirmed; both show "no longer valid" for `?error=` (the link
//!   endpoints add it) or a missing token.
//!
//! And the two calls the pages need beyond better-auth's wire: `GET /api/account/providers` (the sign-in buttons)
//! and `POST /api/account/totp-qr` (the authenticator's QR code, drawn here so the page needs no QR library).

use std::sync::LazyLock;

use bytes::Bytes;
use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Request, Response, StatusCode};

use super::AppState;
use super::console::CONTENT_SECURITY_POLICY;
use super::dto::{ProviderName, Providers};
use super::extract::{self, Ctx};
use super::response::{Body, Failure, ok};

const RESET_HTML: &[u8] = include_bytes!("../../pages/reset-password.html");
const VERIFIED_HTML: &[u8] = include_bytes!("../../pages/email-verified.html");
const INVALID_HTML: &[u8] = include_bytes!("../../pages/link-invalid.html");
const SETUP_HTML: &[u8] = include_bytes!("../../pages/setup.html");
const SET_UP_HTML: &[u8] = include_bytes!("../../pages/setup-done.html");
const HOME_HTML: &[u8] = include_bytes!("../../pages/home.html");
const SIGN_IN_HTML: &[u8] = include_bytes!("../../pages/sign-in.html");
const ACCOUNT_HTML: &[u8] = include_bytes!("../../pages/account.html");
const INVITATION_HTML: &[u8] = include_bytes!("../../pages/accept-invitation.html");
const CONSENT_HTML: &[u8] = include_bytes!("../../pages/consent.html");
const SIGN_OUT_HTML: &[u8] = include_bytes!("../../pages/sign-out.html");
const DEVICE_HTML: &[u8] = include_bytes!("../../pages/device.html");

/// The files the pages load, by their name under `/auth/`.
static ASSETS: LazyLock<[(&str, &str, &[u8]); 10]> = LazyLock::new(|| {
    [
        ("pages.css", "text/css; charset=utf-8", crate::embedded_file!("pages", "pages.css")),
        ("reset-password.js", "text/javascript; charset=utf-8", crate::embedded_file!("pages", "reset-password.js")),
        ("setup.js", "text/javascript; charset=utf-8", crate::embedded_file!("pages", "setup.js")),
        // The sign-in, account and invitation pages, and what they share (the API call, WebAuthn's encoding).
        ("common.js", "text/javascript; charset=utf-8", crate::embedded_file!("pages", "common.js")),
        ("sign-in.js", "text/javascript; charset=utf-8", crate::embedded_file!("pages", "sign-in.js")),
        ("account.js", "text/javascript; charset=utf-8", crate::embedded_file!("pages", "account.js")),
        (
            "accept-invitation.js",
            "text/javascript; charset=utf-8",
            crate::embedded_file!("pages", "accept-invitation.js"),
        ),
        ("consent.js", "text/javascript; charset=utf-8", crate::embedded_file!("pages", "consent.js")),
        ("sign-out.js", "text/javascript; charset=utf-8", crate::embedded_file!("pages", "sign-out.js")),
        ("device.js", "text/javascript; charset=utf-8", crate::embedded_file!("pages", "device.js")),
    ]
});

/// `GET /`: a small page linking the console and the account page, the two places a person opening the server's
/// address may be looking for (an administrator, or a user of an application that signs in here).
pub fn root() -> Response<Body> {
    page(HOME_HTML)
}

/// Where the console is served (see `http::console`); `/` links it and the start-up log names it.
pub const CONSOLE_PATH: &str = "/admin/";

/// Where a user manages their own account; `/` links it and the start-up log names it.
pub const ACCOUNT_PATH: &str = "/account/";

/// `GET /account` and `GET /admin`: to the folder (`/account/`, `/admin/`), where the page's relative links work.
/// A 302, as the rest of the service's redirects (a browser keeps a 301 for good, and schema checkers of the
/// document expect 302). The query is not carried over.
pub fn to_folder(folder: &'static str) -> Response<Body> {
    let mut response = Response::new(Body::default());
    *response.status_mut() = StatusCode::FOUND;
    response.headers_mut().insert(header::LOCATION, HeaderValue::from_static(folder));
    response
}

/// `GET /sign-in`: the sign-in page. `returnTo` is read by the page itself, which follows it only when it is a
/// path on this site (the open-redirect rule is in `pages/common.js`, `returnPath`).
pub fn sign_in() -> Response<Body> {
    page(SIGN_IN_HTML)
}

/// `GET /account/`: a signed-in user's own account (the page sends anyone else to `/sign-in`).
pub fn account() -> Response<Body> {
    page(ACCOUNT_HTML)
}

/// `GET /consent?<authorization request>`: the identity provider's consent page (which application asks for what;
/// allow or deny), where `/api/auth/oauth2/authorize` sends a user who has not consented to these scopes yet.
pub fn consent() -> Response<Body> {
    page(CONSENT_HTML)
}

/// `GET /sign-out?<end-session request>`: the logout confirmation page, where `/api/auth/oauth2/end-session`
/// sends a browser whose session the request does not name (sign out, or stay signed in); without a session, the
/// signed-out page.
pub fn sign_out() -> Response<Body> {
    page(SIGN_OUT_HTML)
}

/// `GET /device?user_code=`: the identity provider's device page (RFC 8628 §3.3), where a person enters the code a
/// command-line tool or a TV shows (or arrives with it from `verification_uri_complete`), signs in if needed, sees
/// which application asks for what, and approves or denies.
pub fn device() -> Response<Body> {
    page(DEVICE_HTML)
}

/// `GET /accept-invitation?id=`: the organization, the inviter, accept or reject.
pub fn accept_invitation() -> Response<Body> {
    page(INVITATION_HTML)
}

/// `GET /api/account/providers`: the identity providers a sign-in page offers, `{providers: [{id, name}]}`. Public:
/// the sign-in page shows them to anyone, and the ids are in every callback URL anyway.
pub fn providers(state: &AppState, req: &Request<Incoming>) -> Result<Response<Body>, Failure> {
    extract::query_only(req.uri().query(), &[])?;
    let names = state.accounts.oauth().names();
    Ok(ok(&Providers { providers: names.iter().map(|(id, name)| ProviderName { id, name }).collect() }))
}

/// The longest `otpauth://` URI drawn: the enrolment's (issuer, account e-mail, a 32-character secret) is well
/// under it; a QR code of this size still scans from a phone held to a laptop's screen.
const MAX_OTPAUTH_URI: usize = 512;

/// `POST /api/account/totp-qr {uri}`: the QR code of an authenticator's `otpauth://totp/` URI, as SVG, for the
/// account page's enrolment (the page shows the URI as text beside it). Only for a signed-in caller, the same
/// callers as the enrolment itself (a session that must enrol a second factor included); it draws what it is given
/// and keeps nothing. The URI holds the secret: the answer is never stored, and the secret is in the body, never
/// in an address a log could keep.
pub async fn totp_qr(state: &AppState, _: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    extract::signed_in_enrolling(state, req.headers()).await?;
    let body = extract::json_object(req, true, state.body_timeout()).await?;
    body.only(&["uri"])?;
    let uri = body.string("uri")?;
    if !uri.starts_with("otpauth://totp/") || uri.len() > MAX_OTPAUTH_URI || uri.chars().any(char::is_control) {
        return Err(Failure::validation(format!(
            "uri must be an otpauth://totp/ URI of at most {MAX_OTPAUTH_URI} bytes"
        )));
    }
    let code = qrcode::QrCode::with_error_correction_level(uri.as_bytes(), qrcode::EcLevel::M)
        .map_err(|_| Failure::validation("uri is too long for a QR code"))?;
    let svg = code.render::<qrcode::render::svg::Color<'_>>().min_dimensions(220, 220).quiet_zone(true).build();
    let mut response = Response::new(Body::new(Bytes::from(svg)));
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("image/svg+xml"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(response)
}

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
        let pages = [RESET_HTML, VERIFIED_HTML, INVALID_HTML, SETUP_HTML, SET_UP_HTML];
        for page in pages.into_iter().chain([
            HOME_HTML,
            SIGN_IN_HTML,
            ACCOUNT_HTML,
            INVITATION_HTML,
            CONSENT_HTML,
            SIGN_OUT_HTML,
        ]) {
            let page = std::str::from_utf8(page).unwrap();
            assert!(page.contains(r#"<html lang="en">"#));
            // The setup pages and the account page are one folder down (/admin/, /account/), the front page, the
            // sign-in and invitation pages at the top: each names the files from where it is.
            let prefix = ["../auth/", "auth/"].into_iter().find(|p| page.contains(&format!("\"{p}"))).unwrap_or("");
            assert!(page.contains(&format!(r#"<link rel="stylesheet" href="{prefix}pages.css">"#)));
            assert!(!page.contains("style=") && !page.contains("<style"), "inline style");
            for script in page.split("<script").skip(1) {
                let src = script.split("src=\"").nth(1).and_then(|s| s.split('"').next()).expect("a script file");
                let src = src.trim_start_matches(prefix);
                assert!(ASSETS.iter().any(|(n, _, _)| *n == src), "{src} is not served");
            }
        }
        for (name, _, body) in ASSETS.iter() {
            let text = std::str::from_utf8(body).unwrap();
            assert!(!text.contains("innerHTML") && !text.contains("eval("), "{name}");
        }
    }
}
