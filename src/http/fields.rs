//! Fields that several route families read the same way: checked once here, so that a family never borrows
//! from another (names, pictures, e-mail refusals, redirect targets, a ban's reason and end).

use super::AppState;
use super::extract::{Ctx, Fields};
use super::response::Failure;
use hyper::StatusCode;

use crate::domain::{BanReason, ImageUrl, Name, Timestamp, Username, display_username};

pub fn validated_name(raw: &str) -> Result<Name, Failure> {
    Name::parse(raw).map_err(|e| Failure::validation(format!("[body.name] {e}")))
}

/// An `image` as sign-up and update-user take it, parsed and normalised ([`ImageUrl`]).
pub fn image_url(url: &str) -> Result<ImageUrl, Failure> {
    ImageUrl::parse(url).map_err(|e| Failure::validation(format!("[body.image] {e}")))
}

/// `url` if it is a safe relative path or an absolute URL on a trusted origin.
pub fn safe_redirect(state: &AppState, ctx: &Ctx, url: &str) -> Option<String> {
    (super::origins::safe_relative_path(url) || state.origins.is_trusted_url(url, ctx.host())).then(|| url.to_owned())
}

/// A URL as a `Location` value: header values are bytes, and a raw non-ASCII URL is either refused by
/// the header type or misread by the client; percent-encoded, it means the same to everyone. The JSON `url`
/// field keeps the string as given, as the auth library does.
pub fn location_value(url: &str) -> String {
    const UNSAFE: &percent_encoding::AsciiSet =
        &percent_encoding::CONTROLS.add(b' ').add(b'"').add(b'<').add(b'>').add(b'`').add(b'{').add(b'}');
    percent_encoding::utf8_percent_encode(url, UNSAFE).to_string()
}

pub fn invalid_email() -> Failure {
    Failure::bad_request("INVALID_EMAIL", "Invalid email")
}

/// Longest ban with an end: beyond ten years, lift it by hand.
const MAX_BAN_SECS: u64 = 10 * 365 * 86_400;

/// `banExpiresIn` (whole seconds from `now`, 1 to ten years) as the moment the ban ends; absent or null: no end.
pub fn ban_expiry(body: &Fields, now: Timestamp) -> Result<Option<Timestamp>, Failure> {
    let Some(secs) = body.optional_u64("banExpiresIn")? else { return Ok(None) };
    if !(1..=MAX_BAN_SECS).contains(&secs) {
        return Err(Failure::validation(format!(
            "banExpiresIn must be a whole number of seconds from 1 to {MAX_BAN_SECS}"
        )));
    }
    Ok(Some(now.plus(std::time::Duration::from_secs(secs))))
}

/// `banReason` if given: `None` when absent or blank, a validation error when [`BanReason`] refuses it.
pub fn ban_reason(body: &Fields) -> Result<Option<BanReason>, Failure> {
    let Some(raw) = body.optional_string("banReason")? else { return Ok(None) };
    BanReason::parse(raw).map_err(|e| Failure::validation(e.to_string()))
}

/// `username` and `displayUsername` as sign-up (`sign_up: true`) and update-user take them, as better-auth's
/// `username` plugin does: the name checked as typed (400 with the plugin's code), then normalised; at sign-up a
/// `displayUsername` alone that is a valid name becomes the name too, and the display form defaults to the name
/// as typed. With usernames off, either field is refused, as any field the server does not have.
pub fn username_fields(
    state: &AppState,
    body: &Fields,
    sign_up: bool,
) -> Result<(Option<Username>, Option<Box<str>>), Failure> {
    let (typed, display) = (body.optional_string("username")?, body.optional_string("displayUsername")?);
    let Some(rules) = state.accounts.username_rules() else {
        return match ["username", "displayUsername"].into_iter().find(|f| body.has(f)) {
            Some(field) => Err(Failure::bad_request("FIELD_NOT_ALLOWED", format!("{field} is not allowed to be set"))),
            None => Ok((None, None)),
        };
    };
    let typed = match (typed, display) {
        (None, Some(display)) if sign_up && rules.parse(display).is_ok() => Some(display),
        _ => typed,
    };
    let name = typed.map(|t| rules.parse(t).map_err(|e| Failure::bad_request(e.code(), e.to_string()))).transpose()?;
    let display = match display.or(if sign_up { typed } else { None }) {
        Some(d) => {
            Some(display_username(d).map_err(|e| Failure::bad_request("INVALID_DISPLAY_USERNAME", e.to_string()))?)
        }
        None => None,
    };
    Ok((name, display))
}

/// A `username` as sign-in by username and the availability check take it: refused with 422 and the plugin's
/// code, as the plugin does (404 when usernames are off, as a server without the plugin).
pub fn username_422(state: &AppState, typed: &str) -> Result<Username, Failure> {
    let rules =
        state.accounts.username_rules().ok_or_else(|| Failure::new(StatusCode::NOT_FOUND, "NOT_FOUND", "Not found"))?;
    rules.parse(typed).map_err(|e| Failure::new(StatusCode::UNPROCESSABLE_ENTITY, e.code(), e.to_string()))
}

#[cfg(test)]
mod tests {
    use hyper::header::HeaderValue;

    use super::*;

    #[test]
    fn location_is_percent_encoded() {
        assert_eq!(location_value("/dashboard?x=1"), "/dashboard?x=1");
        assert_eq!(location_value("/café dé"), "/caf%C3%A9%20d%C3%A9");
        assert!(HeaderValue::from_str(&location_value("/ünïcödé/路径")).is_ok());
    }
}
