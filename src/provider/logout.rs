//! Back-channel logout tokens (OpenID Connect Back-Channel Logout 1.0 §2.4): what the provider POSTs to a relying
//! party's `backchannel_logout_uri` when a session that gave it a grant ends. Queued by the store in the commit
//! that ends the session ([`crate::store::hooks::logouts`]), sent by the webhooks' deliverer, signed here.

use serde::Serialize;

use super::keys::{Alg, KeyRing};
use crate::domain::Timestamp;
use crate::store::hooks::Logout;

/// A logout token's lifetime (the plugin's): a relying party refuses one older than that.
pub const LOGOUT_TOKEN_LIFETIME_SECS: i64 = 120;
/// The event that makes a JWT a logout token (§2.4).
pub const BACKCHANNEL_EVENT: &str = "http://schemas.openid.net/event/backchannel-logout";

#[derive(Serialize)]
struct Claims<'a> {
    iss: &'a str,
    sub: &'a str,
    aud: &'a str,
    iat: i64,
    exp: i64,
    jti: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    sid: Option<&'a str>,
    /// `{"http://schemas.openid.net/event/backchannel-logout": {}}`.
    events: serde_json::Value,
    // Never a `nonce` (§2.4: a logout token with one is refused).
}

/// The signed logout token of `logout` (header `typ: logout+jwt`, §2.4), with the client's ID token algorithm;
/// `None` when no key of it signs now.
pub fn logout_token(keys: &KeyRing, issuer: &str, logout: &Logout, jti: &str, now: Timestamp) -> Option<String> {
    let alg = Alg::ALL.into_iter().find(|a| a.code() == logout.alg).unwrap_or(Alg::EdDsa);
    let iat = now.as_millis() / 1000;
    let claims = Claims {
        iss: issuer,
        sub: &logout.sub,
        aud: &logout.client_id,
        iat,
        exp: iat + LOGOUT_TOKEN_LIFETIME_SECS,
        jti,
        sid: logout.sid.as_deref(),
        events: serde_json::json!({ BACKCHANNEL_EVENT: {} }),
    };
    keys.sign(alg, Some("logout+jwt"), &claims)
}
