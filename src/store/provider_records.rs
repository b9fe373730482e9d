//! Persisted formats of the identity provider (src/provider): its signing keys. Framed like every record
//! ([`super::codec`]); the golden-bytes tests below pin them.

use serde::{Deserialize, Serialize};

use super::codec::Versioned;

/// A signing key of the identity provider. Key: its id (the JWK's `kid` is this id's simple form).
///
/// The private key is sealed with the data directory's key ([`crate::data_key`], the context naming the key's id),
/// so a copy of the store alone signs nothing; the public half is derived from it when the key is opened.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SigningKeyRecordV1 {
    pub id: [u8; 16],
    /// 1 EdDSA (Ed25519), 2 ES256 (P-256), 3 RS256 (RSA 2048): `provider::keys::Alg`'s codes.
    pub alg: u8,
    /// The private key, sealed: the Ed25519 seed, the P-256 scalar, or the RSA key's PKCS#8 DER.
    pub sealed: Vec<u8>,
    pub created_at_ms: i64,
    /// When it starts signing: published in the JWKS from its creation, so that relying parties (and the other
    /// nodes) hold it before the first token it signs reaches them.
    pub signs_from_ms: i64,
    /// When it stopped signing (its successor's `signs_from_ms`); `None` while current. It stays published until
    /// every token it signed has expired, then it is deleted.
    pub signs_until_ms: Option<i64>,
}

/// A client of the identity provider (an application that signs its users in here). Key: its `client_id`.
///
/// A confidential client's secret is stored only as its SHA-256 (the plugin's `storeClientSecret: "hashed"`): it
/// is 190 random bits, so a fast hash is enough, and the server never needs it back. Public clients have none.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientRecordV1 {
    /// The audit log's and the webhooks' name for it.
    pub id: [u8; 16],
    pub client_id: String,
    pub secret_hash: Option<[u8; 32]>,
    pub name: String,
    /// Matched byte for byte (a native client's loopback ones ignoring the port, RFC 8252 §7.3).
    pub redirect_uris: Vec<String>,
    pub post_logout_redirect_uris: Vec<String>,
    /// What it may ask for: of the standard scopes, and its own.
    pub scopes: Vec<String>,
    /// Bits: 1 authorization_code (with refresh_token), 2 client_credentials.
    pub grants: u8,
    /// 0 none (public), 1 client_secret_basic, 2 client_secret_post.
    pub auth_method: u8,
    /// `application_type` native (loopback and private-use redirects), else web.
    pub native: bool,
    /// First-party: no consent page (administrators only).
    pub skip_consent: bool,
    /// May ask for RP-initiated logout (administrators only, as the plugin's `enable_end_session`).
    pub end_session: bool,
    pub disabled: bool,
    /// `id_token_signed_response_alg`: `provider::keys::Alg`'s code (1 EdDSA, 2 ES256, 3 RS256).
    pub id_token_alg: u8,
    /// The administrator who registered it (`None`: the command line).
    pub created_by: Option<[u8; 16]>,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
}

/// A client of the identity provider, second format: the first's fields, then where it hears of its users'
/// sign-outs (OpenID Connect Back-Channel Logout 1.0). Written in the first format when it has no back-channel URI,
/// so a node of the release before reads every other client as before.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientRecordV2 {
    pub id: [u8; 16],
    pub client_id: String,
    pub secret_hash: Option<[u8; 32]>,
    pub name: String,
    pub redirect_uris: Vec<String>,
    pub post_logout_redirect_uris: Vec<String>,
    pub scopes: Vec<String>,
    pub grants: u8,
    pub auth_method: u8,
    pub native: bool,
    pub skip_consent: bool,
    pub end_session: bool,
    pub disabled: bool,
    pub id_token_alg: u8,
    pub created_by: Option<[u8; 16]>,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
    /// `backchannel_logout_uri`: where a signed logout token is POSTed when a session it was given ends.
    pub backchannel_logout_uri: Option<String>,
    /// `backchannel_logout_session_required`: the relying party needs `sid` in the token (it always carries one
    /// when the grant came from a session).
    pub backchannel_session_required: bool,
}

/// The client record this release writes and reads.
pub type ClientRecord = ClientRecordV2;

impl From<ClientRecordV1> for ClientRecordV2 {
    fn from(r: ClientRecordV1) -> Self {
        Self {
            id: r.id,
            client_id: r.client_id,
            secret_hash: r.secret_hash,
            name: r.name,
            redirect_uris: r.redirect_uris,
            post_logout_redirect_uris: r.post_logout_redirect_uris,
            scopes: r.scopes,
            grants: r.grants,
            auth_method: r.auth_method,
            native: r.native,
            skip_consent: r.skip_consent,
            end_session: r.end_session,
            disabled: r.disabled,
            id_token_alg: r.id_token_alg,
            created_by: r.created_by,
            created_at_ms: r.created_at_ms,
            updated_at_ms: r.updated_at_ms,
            backchannel_logout_uri: None,
            backchannel_session_required: false,
        }
    }
}

/// An authorization code of the identity provider, waiting for the client to redeem it at the token endpoint.
/// Key: the SHA-256 of the code (the code itself is never stored). Read from the store by the node that redeems it
/// and taken once ([`super::StoreOp::TakeOAuthCode`]), like a sign-in flow, so any node can redeem it and none
/// twice.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OAuthCodeRecordV1 {
    pub client_id: String,
    pub user_id: [u8; 16],
    /// The session that authorized it: the ID token's `sid`, and it must still be live at the token endpoint.
    pub session_id: [u8; 16],
    /// The exact `redirect_uri` of the authorization request, which the token request must repeat.
    pub redirect_uri: String,
    /// The scopes granted, in the request's order.
    pub scopes: Vec<String>,
    /// PKCE's S256 challenge (base64url of the verifier's SHA-256); `None` for a confidential client that sent none.
    pub code_challenge: Option<String>,
    pub nonce: Option<String>,
    /// When the session was made (the ID token's `auth_time`).
    pub auth_time_ms: i64,
    pub expires_at_ms: i64,
}

/// A device authorization request (RFC 8628) of the identity provider, waiting for its user to approve or deny it
/// on the `/device` page and for the device to poll the token endpoint. Key: the SHA-256 of the device code; the
/// user code is found through the SHA-256 of its normalized form (neither code is stored). Read from the store by
/// the node that needs it, as an authorization code is, so a request started on one node is approved on another
/// and polled on a third; the decision and the redemption are guarded across nodes
/// ([`super::StoreOp::DecideOAuthDevice`], [`super::StoreOp::TakeOAuthDevice`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OAuthDeviceRecordV1 {
    pub client_id: String,
    /// The SHA-256 of the user code (its 8 characters, upper case, without the dash).
    pub user_code_hash: [u8; 32],
    /// The scopes asked for, in the request's order.
    pub scopes: Vec<String>,
    /// What the user said on the page.
    pub decision: DeviceDecisionV1,
    /// The last poll of the token endpoint (`None` before the first) and the interval the device must keep
    /// between polls, in seconds: 5, plus 5 at every `slow_down` (RFC 8628 §3.5).
    pub polled_at_ms: Option<i64>,
    pub interval_secs: u32,
    pub created_at_ms: i64,
    pub expires_at_ms: i64,
}

/// What the user said of a device authorization request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum DeviceDecisionV1 {
    Pending,
    /// Approved by `user_id` in session `session_id` (the tokens' `sid`; the ID token's `auth_time` is the
    /// session's start).
    Approved {
        user_id: [u8; 16],
        session_id: [u8; 16],
        auth_time_ms: i64,
    },
    Denied,
}

/// A user's consent to a client: the scopes they granted it. Key: the user's id and the `client_id`. A new
/// authorization asking for no more than these scopes skips the consent page.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OAuthConsentRecordV1 {
    pub user_id: [u8; 16],
    pub client_id: String,
    pub scopes: Vec<String>,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
}

impl OAuthConsentRecordV1 {
    /// The store's key: the user's id, then the `client_id`'s bytes.
    pub fn key(user_id: [u8; 16], client_id: &str) -> Vec<u8> {
        let mut key = user_id.to_vec();
        key.extend_from_slice(client_id.as_bytes());
        key
    }
}

/// A grant of the identity provider: what one redemption of an authorization code (or one client credentials
/// request) gave a client, and every token issued from it since. Key: its id, which every token it issued names
/// (the access tokens' `jti`, the refresh token's first bytes), so a token is checked against its grant in memory
/// and ending the grant ends all of them. Held in every node's memory (`provider::grants`) and carried by the
/// change log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OAuthGrantRecordV1 {
    pub id: [u8; 16],
    pub client_id: String,
    /// `None`: the client's own grant (client credentials), for no user.
    pub user_id: Option<[u8; 16]>,
    /// The session that authorized it (the tokens' `sid`).
    pub session_id: Option<[u8; 16]>,
    pub scopes: Vec<String>,
    /// When the session was made (the ID token's `auth_time`).
    pub auth_time_ms: i64,
    /// The SHA-256 of the refresh token in force (`None`: no refresh token, `offline_access` was not granted).
    pub refresh_hash: Option<[u8; 32]>,
    /// The SHA-256s of the last refresh tokens it replaced, newest last: one presented again ends the grant.
    pub retired: Vec<[u8; 32]>,
    pub created_at_ms: i64,
    /// Its last refresh (its creation until then).
    pub updated_at_ms: i64,
    /// When nothing it issued is valid any more: its refresh token's end, else its access token's.
    pub expires_at_ms: i64,
}

/// A grant of the identity provider, second format: the first's fields, then the organization that was active in
/// the session that authorized it, whose claims its tokens carry (with the member's roles as they are at each
/// issue). Written in the first format when it has none, so a node of the release before reads every other grant
/// as before.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OAuthGrantRecordV2 {
    pub id: [u8; 16],
    pub client_id: String,
    pub user_id: Option<[u8; 16]>,
    pub session_id: Option<[u8; 16]>,
    pub scopes: Vec<String>,
    pub auth_time_ms: i64,
    pub refresh_hash: Option<[u8; 32]>,
    pub retired: Vec<[u8; 32]>,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
    pub expires_at_ms: i64,
    /// The session's active organization when the grant was made (`None`: none was, or a client's own grant).
    pub organization: Option<[u8; 16]>,
}

/// The grant record this release writes and reads.
pub type OAuthGrantRecord = OAuthGrantRecordV2;

impl From<OAuthGrantRecordV1> for OAuthGrantRecordV2 {
    fn from(r: OAuthGrantRecordV1) -> Self {
        Self {
            id: r.id,
            client_id: r.client_id,
            user_id: r.user_id,
            session_id: r.session_id,
            scopes: r.scopes,
            auth_time_ms: r.auth_time_ms,
            refresh_hash: r.refresh_hash,
            retired: r.retired,
            created_at_ms: r.created_at_ms,
            updated_at_ms: r.updated_at_ms,
            expires_at_ms: r.expires_at_ms,
            organization: None,
        }
    }
}

impl Versioned for OAuthGrantRecordV1 {
    const VERSION: u8 = 1;
    const KIND: &'static str = "oauth grant";
}

impl Versioned for OAuthGrantRecordV2 {
    const VERSION: u8 = 2;
    const KIND: &'static str = "oauth grant";

    /// A grant without an organization is written in the first format: the second is the first's fields then an
    /// option, so those bytes are the second's without its trailing `None` (a golden test holds it). Only a grant
    /// made in an organization needs every node upgraded.
    fn framed(&self) -> Vec<u8> {
        let mut bytes = vec![Self::VERSION];
        bytes.extend(postcard::to_stdvec(self).unwrap_or_default());
        if self.organization.is_none() {
            bytes.truncate(bytes.len() - 1);
            bytes[0] = OAuthGrantRecordV1::VERSION;
        }
        bytes
    }
}

/// A grant record in either format, as the current one: the first has no organization.
pub fn decode_grant(bytes: &[u8]) -> Result<OAuthGrantRecord, super::StoreError> {
    match bytes.first() {
        Some(&OAuthGrantRecordV1::VERSION) => super::codec::decode::<OAuthGrantRecordV1>(bytes).map(Into::into),
        _ => super::codec::decode::<OAuthGrantRecordV2>(bytes),
    }
}

impl Versioned for OAuthCodeRecordV1 {
    const VERSION: u8 = 1;
    const KIND: &'static str = "oauth authorization code";
}

impl Versioned for OAuthDeviceRecordV1 {
    const VERSION: u8 = 1;
    const KIND: &'static str = "oauth device authorization";
}

impl Versioned for OAuthConsentRecordV1 {
    const VERSION: u8 = 1;
    const KIND: &'static str = "oauth consent";
}

impl Versioned for ClientRecordV1 {
    const VERSION: u8 = 1;
    const KIND: &'static str = "oauth client";
}

impl Versioned for ClientRecordV2 {
    const VERSION: u8 = 2;
    const KIND: &'static str = "oauth client";

    /// A client without a back-channel URI is written in the first format: the second is the first's fields then
    /// an option and a flag, so those bytes are the second's without its trailing `None` and `false` (a golden
    /// test holds it). Only a client with a back-channel URI needs every node upgraded.
    fn framed(&self) -> Vec<u8> {
        let mut bytes = vec![Self::VERSION];
        bytes.extend(postcard::to_stdvec(self).unwrap_or_default());
        if self.backchannel_logout_uri.is_none() && !self.backchannel_session_required {
            bytes.truncate(bytes.len() - 2);
            bytes[0] = ClientRecordV1::VERSION;
        }
        bytes
    }
}

/// A client record in either format, as the current one: the first has no back-channel logout.
pub fn decode_client(bytes: &[u8]) -> Result<ClientRecord, super::StoreError> {
    match bytes.first() {
        Some(&ClientRecordV1::VERSION) => super::codec::decode::<ClientRecordV1>(bytes).map(Into::into),
        _ => super::codec::decode::<ClientRecordV2>(bytes),
    }
}

impl Versioned for SigningKeyRecordV1 {
    const VERSION: u8 = 1;
    const KIND: &'static str = "signing key";
}

/// A grant's id, as its tokens carry it (base64url): what logs and audit entries name a grant by.
pub fn grant_id_text(id: [u8; 16]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(id)
}

#[cfg(test)]
mod tests {
    //! Golden bytes: do not update them; add a `…V2` record with a new version byte instead.
    use super::*;
    use crate::store::codec::{decode, encode};

    #[test]
    fn client_golden_bytes() {
        let client = ClientRecordV1 {
            id: [3; 16],
            client_id: "ab".into(),
            secret_hash: Some([5; 32]),
            name: "n".into(),
            redirect_uris: vec!["r".into()],
            post_logout_redirect_uris: vec![],
            scopes: vec!["openid".into()],
            grants: 1,
            auth_method: 1,
            native: false,
            skip_consent: true,
            end_session: false,
            disabled: false,
            id_token_alg: 1,
            created_by: None,
            created_at_ms: 1,
            updated_at_ms: 2,
        };
        let mut expected = vec![1];
        expected.extend([3; 16]);
        expected.extend([2, b'a', b'b', 1]);
        expected.extend([5; 32]);
        expected.extend([1, b'n', 1, 1, b'r', 0, 1, 6]);
        expected.extend(b"openid");
        expected.extend([1, 1, 0, 1, 0, 0, 1, 0, 2, 4]);
        assert_eq!(encode(&client), expected);
        assert_eq!(decode::<ClientRecordV1>(&expected).unwrap(), client);
    }

    #[test]
    fn client_v2_golden_bytes() {
        let client = ClientRecordV2 {
            backchannel_logout_uri: Some("b".into()),
            backchannel_session_required: true,
            ..ClientRecordV1 {
                id: [3; 16],
                client_id: "ab".into(),
                secret_hash: None,
                name: "n".into(),
                redirect_uris: vec![],
                post_logout_redirect_uris: vec![],
                scopes: vec![],
                grants: 1,
                auth_method: 0,
                native: false,
                skip_consent: false,
                end_session: false,
                disabled: false,
                id_token_alg: 1,
                created_by: None,
                created_at_ms: 1,
                updated_at_ms: 2,
            }
            .into()
        };
        let mut expected = vec![2];
        expected.extend([3; 16]);
        expected.extend([2, b'a', b'b', 0, 1, b'n', 0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0, 2, 4, 1, 1, b'b', 1]);
        assert_eq!(encode(&client), expected);
        assert_eq!(decode::<ClientRecordV2>(&expected).unwrap(), client);
        assert_eq!(decode_client(&expected).unwrap(), client);
        // Without one, the first format's bytes, which the release before reads.
        let plain = ClientRecordV2 { backchannel_logout_uri: None, backchannel_session_required: false, ..client };
        let v1: ClientRecordV1 = decode(&encode(&plain)).unwrap();
        assert_eq!(encode(&v1), encode(&plain));
        assert_eq!(decode_client(&encode(&plain)).unwrap(), plain);
    }

    #[test]
    fn code_golden_bytes() {
        let code = OAuthCodeRecordV1 {
            client_id: "c".into(),
            user_id: [2; 16],
            session_id: [3; 16],
            redirect_uri: "r".into(),
            scopes: vec!["openid".into()],
            code_challenge: Some("x".into()),
            nonce: None,
            auth_time_ms: 1,
            expires_at_ms: 2,
        };
        let mut expected = vec![1, 1, b'c'];
        expected.extend([2; 16]);
        expected.extend([3; 16]);
        expected.extend([1, b'r', 1, 6]);
        expected.extend(b"openid");
        expected.extend([1, 1, b'x', 0, 2, 4]);
        assert_eq!(encode(&code), expected);
        assert_eq!(decode::<OAuthCodeRecordV1>(&expected).unwrap(), code);
    }

    #[test]
    fn device_golden_bytes() {
        let device = OAuthDeviceRecordV1 {
            client_id: "c".into(),
            user_code_hash: [2; 32],
            scopes: vec!["openid".into()],
            decision: DeviceDecisionV1::Approved { user_id: [3; 16], session_id: [4; 16], auth_time_ms: 1 },
            polled_at_ms: Some(2),
            interval_secs: 5,
            created_at_ms: 3,
            expires_at_ms: 4,
        };
        let mut expected = vec![1, 1, b'c'];
        expected.extend([2; 32]);
        expected.extend([1, 6]);
        expected.extend(b"openid");
        expected.push(1);
        expected.extend([3; 16]);
        expected.extend([4; 16]);
        expected.extend([2, 1, 4, 5, 6, 8]);
        assert_eq!(encode(&device), expected);
        assert_eq!(decode::<OAuthDeviceRecordV1>(&expected).unwrap(), device);
        let pending = OAuthDeviceRecordV1 { decision: DeviceDecisionV1::Pending, polled_at_ms: None, ..device };
        assert_eq!(decode::<OAuthDeviceRecordV1>(&encode(&pending)).unwrap(), pending);
    }

    #[test]
    fn grant_golden_bytes() {
        let grant = OAuthGrantRecordV1 {
            id: [1; 16],
            client_id: "c".into(),
            user_id: Some([2; 16]),
            session_id: None,
            scopes: vec!["openid".into()],
            auth_time_ms: 1,
            refresh_hash: Some([3; 32]),
            retired: vec![[4; 32]],
            created_at_ms: 2,
            updated_at_ms: 3,
            expires_at_ms: 4,
        };
        let mut expected = vec![1];
        expected.extend([1; 16]);
        expected.extend([1, b'c', 1]);
        expected.extend([2; 16]);
        expected.extend([0, 1, 6]);
        expected.extend(b"openid");
        expected.extend([2, 1]);
        expected.extend([3; 32]);
        expected.push(1);
        expected.extend([4; 32]);
        expected.extend([4, 6, 8]);
        assert_eq!(encode(&grant), expected);
        assert_eq!(decode::<OAuthGrantRecordV1>(&expected).unwrap(), grant);
    }

    #[test]
    fn grant_v2_golden_bytes() {
        let v1 = OAuthGrantRecordV1 {
            id: [1; 16],
            client_id: "c".into(),
            user_id: Some([2; 16]),
            session_id: None,
            scopes: vec![],
            auth_time_ms: 1,
            refresh_hash: None,
            retired: vec![],
            created_at_ms: 2,
            updated_at_ms: 3,
            expires_at_ms: 4,
        };
        let grant = OAuthGrantRecordV2 { organization: Some([5; 16]), ..v1.clone().into() };
        let mut expected = vec![2];
        expected.extend([1; 16]);
        expected.extend([1, b'c', 1]);
        expected.extend([2; 16]);
        expected.extend([0, 0, 2, 0, 0, 4, 6, 8, 1]);
        expected.extend([5; 16]);
        assert_eq!(encode(&grant), expected);
        assert_eq!(decode::<OAuthGrantRecordV2>(&expected).unwrap(), grant);
        assert_eq!(decode_grant(&expected).unwrap(), grant);
        // Without one, the first format's bytes, which the release before reads.
        let plain = OAuthGrantRecordV2 { organization: None, ..grant };
        assert_eq!(encode(&plain), encode(&v1));
        assert_eq!(decode_grant(&encode(&v1)).unwrap(), plain);
    }

    #[test]
    fn consent_golden_bytes() {
        let consent = OAuthConsentRecordV1 {
            user_id: [4; 16],
            client_id: "c".into(),
            scopes: vec!["email".into()],
            created_at_ms: 1,
            updated_at_ms: 2,
        };
        let mut expected = vec![1];
        expected.extend([4; 16]);
        expected.extend([1, b'c', 1, 5]);
        expected.extend(b"email");
        expected.extend([2, 4]);
        assert_eq!(encode(&consent), expected);
        assert_eq!(decode::<OAuthConsentRecordV1>(&expected).unwrap(), consent);
    }

    #[test]
    fn signing_key_golden_bytes() {
        let key = SigningKeyRecordV1 {
            id: [1; 16],
            alg: 2,
            sealed: vec![7, 8],
            created_at_ms: 1,
            signs_from_ms: 2,
            signs_until_ms: Some(64),
        };
        let mut expected = vec![1];
        expected.extend([1; 16]);
        expected.extend([2, 2, 7, 8, 2, 4, 1, 0x80, 0x01]);
        assert_eq!(encode(&key), expected);
        assert_eq!(decode::<SigningKeyRecordV1>(&expected).unwrap(), key);
    }
}
