//! The persisted format of an organization's single sign-on provider (`@better-auth/sso`'s `ssoProvider` row, for
//! OpenID Connect). Framed and pinned like the other records ([`super::records`]): a version byte, postcard, golden
//! bytes below.

use serde::{Deserialize, Serialize};

use super::codec::Versioned;

/// One single sign-on provider. Key: its `providerId` (the last segment of its callback URL).
///
/// The client secret is sealed with the data directory's key ([`crate::data_key`], the context naming the
/// record's id), as the identity provider's signing keys are: the server must send it back to the provider, so a
/// hash would not do, and a copy of the store alone gives nobody the secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SsoProviderRecordV1 {
    /// The audit log's and the webhooks' name for it.
    pub id: [u8; 16],
    pub provider_id: String,
    /// The organization it signs people into (`None`: one a service administrator registered for no organization).
    pub organization_id: Option<[u8; 16]>,
    /// Who registered it.
    pub user_id: [u8; 16],
    /// The OpenID provider's issuer, exactly as its discovery document names it.
    pub issuer: String,
    /// The e-mail domains it answers for, lower-cased, in the order given.
    pub domains: Vec<String>,
    /// Whether the domains were proven (a DNS TXT record, or an administrator's confirmation); reset when they change.
    pub domain_verified: bool,
    /// The token the DNS TXT record must carry, while a verification is pending, and until when (ms).
    pub verification: Option<(String, i64)>,
    pub client_id: String,
    pub sealed_secret: Vec<u8>,
    /// 1 client_secret_basic, 2 client_secret_post.
    pub token_auth: u8,
    /// What discovery gave at registration (shown to administrators; sign-in reads the document again).
    pub discovery_endpoint: String,
    pub authorization_endpoint: String,
    pub token_endpoint: String,
    pub jwks_endpoint: String,
    pub userinfo_endpoint: Option<String>,
    /// Scopes asked for beyond `openid` (empty: `email profile`).
    pub scopes: Vec<String>,
    /// The role a first sign-in makes its new member: `domain::OrgRole`'s name.
    pub default_role: String,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
}

impl Versioned for SsoProviderRecordV1 {
    const VERSION: u8 = 1;
    const KIND: &'static str = "SSO provider";
}

#[cfg(test)]
mod tests {
    //! Golden bytes: do not update them; add a `…V2` record with a new version byte instead.
    use super::*;
    use crate::store::codec::{decode, encode};

    #[test]
    fn sso_provider_golden_bytes() {
        let provider = SsoProviderRecordV1 {
            id: [1; 16],
            provider_id: "p".into(),
            organization_id: Some([2; 16]),
            user_id: [3; 16],
            issuer: "i".into(),
            domains: vec!["d".into()],
            domain_verified: true,
            verification: Some(("t".into(), 1)),
            client_id: "c".into(),
            sealed_secret: vec![9],
            token_auth: 1,
            discovery_endpoint: "e".into(),
            authorization_endpoint: "a".into(),
            token_endpoint: "t".into(),
            jwks_endpoint: "j".into(),
            userinfo_endpoint: None,
            scopes: vec![],
            default_role: "member".into(),
            created_at_ms: 1,
            updated_at_ms: 2,
        };
        let mut expected = vec![1];
        expected.extend([1; 16]);
        expected.extend([1, b'p', 1]);
        expected.extend([2; 16]);
        expected.extend([3; 16]);
        expected.extend([1, b'i', 1, 1, b'd', 1, 1, 1, b't', 2, 1, b'c', 1, 9, 1]);
        expected.extend([1, b'e', 1, b'a', 1, b't', 1, b'j', 0, 0, 6]);
        expected.extend(b"member");
        expected.extend([2, 4]);
        assert_eq!(encode(&provider), expected);
        assert_eq!(decode::<SsoProviderRecordV1>(&expected).unwrap(), provider);
    }
}
