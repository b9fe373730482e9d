//! Fields that several route families read the same way: checked once here, so that a family never borrows
//! from another (names, pictures, e-mail refusals, redirect targets, a ban's reason and end).

use super::AppState;
use super::extract::{Ctx, Fields};
use super::response::Failure;
use crate::domain::{BanReason, ImageUrl, Name, Timestamp};

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
