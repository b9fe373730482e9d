//! The identity provider: OAuth 2.1 and OpenID Connect for other applications, services and command-line tools,
//! on the wire of `@better-auth/oauth-provider` (1.7) and better-auth's `jwt` plugin, so that their client and any
//! certified relying party work unchanged (docs/oidc-provider.md).
//!
//! Built in slices (issue #46): the signing keys and the discovery document ([`keys`]), the clients
//! administrators register ([`clients`]); the codes, consents and grants of the flows ([`grants`]), which the
//! facade's flows (src/accounts/idp.rs) use; the back-channel logout tokens ([`logout`]).
//!
//! This module is a rung below the facade, beside the webhooks: it owns the provider's state that is neither an
//! account's nor a session's. The keys are no actor ([`keys`] says why); nor are the grants, whose index follows
//! the store writer's commits and the change log ([`grants`] says why).

pub mod clients;
pub mod devices;
pub mod grants;
pub mod keys;
pub mod logout;

pub use clients::{
    AuthMethod, Authenticating, Client, ClientCache, ClientChange, ClientError, Clients, NewClient, USER_SCOPES,
    redirect_uri_matches,
};
pub use grants::{GrantIndex, Grants};
pub use keys::{Alg, Jwk, Key, KeyError, KeyRing, KeyStatus};

/// The scopes every client may ask for (the plugin's defaults): `openid` for an ID token, `profile` and `email`
/// for those claims at userinfo, `offline_access` for a refresh token.
pub const SCOPES: &[&str] = &["openid", "profile", "email", "offline_access"];

/// The claims the provider may answer (the plugin's list for the scopes above): the discovery document's
/// `claims_supported`.
pub const CLAIMS: &[&str] = &[
    "sub",
    "iss",
    "aud",
    "exp",
    "iat",
    "sid",
    "scope",
    "azp",
    "name",
    "picture",
    "given_name",
    "family_name",
    "email",
    "email_verified",
    // With `profile`, from the session's active organization when the grant was made (grants::OrgClaims).
    "org_id",
    "org_slug",
    "org_roles",
];
