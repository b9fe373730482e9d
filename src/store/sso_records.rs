//! The persisted format of an organization's single sign-on provider (`@better-auth/sso`'s `ssoProvider` row, for
//! OpenID Connect or SAML 2.0). Framed and pinned like the other records ([`super::records`]): a version byte,
//! postcard, golden bytes below. The second format is the first's fields then the SAML part ([`SamlConfigV1`]);
//! the third, the second's then the role mapping ([`RoleMappingV1`]). All are read, the third is written.

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

/// What a SAML 2.0 provider adds: the identity provider it trusts and how its assertions are read. The OpenID
/// Connect fields of the record are empty for it, and its `issuer` is this service's entity ID for it (the
/// plugin's meaning of `issuer` for SAML).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SamlConfigV1 {
    /// The IdP's single sign-on URL (HTTP-Redirect binding).
    pub entry_point: String,
    /// The IdP's entity ID: the Issuer its assertions must carry.
    pub idp_entity_id: String,
    /// The IdP's signing certificates (DER): only these verify its signatures. No private key is ever kept.
    pub certs: Vec<Vec<u8>>,
    /// An Audience accepted beside the SP entity ID.
    pub audience: Option<String>,
    /// Where the browser goes after a sign-in that named no callback URL.
    pub callback_url: Option<String>,
    /// The assertion itself must be signed (a signature over the whole response is not enough).
    pub want_assertions_signed: bool,
    /// The NameID format asked for (`None`: the e-mail address format).
    pub identifier_format: Option<String>,
    /// The attributes read for the address and the name (`None`: `email`, and `name` or the first and last).
    pub mapping_email: Option<String>,
    pub mapping_name: Option<String>,
    pub mapping_first_name: Option<String>,
    pub mapping_last_name: Option<String>,
}

/// The second format: the first's fields, then the SAML part (`None` for an OpenID Connect provider).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SsoProviderRecordV2 {
    pub id: [u8; 16],
    pub provider_id: String,
    pub organization_id: Option<[u8; 16]>,
    pub user_id: [u8; 16],
    pub issuer: String,
    pub domains: Vec<String>,
    pub domain_verified: bool,
    pub verification: Option<(String, i64)>,
    pub client_id: String,
    pub sealed_secret: Vec<u8>,
    pub token_auth: u8,
    pub discovery_endpoint: String,
    pub authorization_endpoint: String,
    pub token_endpoint: String,
    pub jwks_endpoint: String,
    pub userinfo_endpoint: Option<String>,
    pub scopes: Vec<String>,
    pub default_role: String,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
    pub saml: Option<SamlConfigV1>,
}

impl Versioned for SsoProviderRecordV2 {
    const VERSION: u8 = 2;
    const KIND: &'static str = "SSO provider";
}

/// A provider's role mapping (issue #48): the claim or attribute that carries the groups (`None`: the defaults,
/// `domain::DEFAULT_GROUPS_CLAIM` and `DEFAULT_GROUPS_ATTRIBUTES`) and the `(group, role)` pairs, the role by name
/// (`owner`, `admin`, `member` or one the organization defined).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoleMappingV1 {
    pub claim: Option<String>,
    pub pairs: Vec<(String, String)>,
}

/// The third format: the second's fields, then the role mapping (`None`: every new member gets the default role,
/// and a later sign-in changes no one's roles).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SsoProviderRecordV3 {
    pub id: [u8; 16],
    pub provider_id: String,
    pub organization_id: Option<[u8; 16]>,
    pub user_id: [u8; 16],
    pub issuer: String,
    pub domains: Vec<String>,
    pub domain_verified: bool,
    pub verification: Option<(String, i64)>,
    pub client_id: String,
    pub sealed_secret: Vec<u8>,
    pub token_auth: u8,
    pub discovery_endpoint: String,
    pub authorization_endpoint: String,
    pub token_endpoint: String,
    pub jwks_endpoint: String,
    pub userinfo_endpoint: Option<String>,
    pub scopes: Vec<String>,
    pub default_role: String,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
    pub saml: Option<SamlConfigV1>,
    pub role_mapping: Option<RoleMappingV1>,
}

impl Versioned for SsoProviderRecordV3 {
    const VERSION: u8 = 3;
    const KIND: &'static str = "SSO provider";
}

/// The format written.
pub type SsoProviderRecord = SsoProviderRecordV3;

impl From<&crate::domain::RoleMapping> for RoleMappingV1 {
    fn from(m: &crate::domain::RoleMapping) -> Self {
        let pairs = m.pairs().iter().map(|p| (p.group().to_owned(), p.role().as_str().to_owned())).collect();
        Self { claim: m.claim().map(str::to_owned), pairs }
    }
}

impl RoleMappingV1 {
    /// The mapping as the domain holds it (checked when it was written).
    pub fn domain(&self) -> crate::domain::RoleMapping {
        crate::domain::RoleMapping::from_trusted(self.claim.clone(), self.pairs.clone())
    }
}

impl From<SsoProviderRecordV2> for SsoProviderRecordV3 {
    fn from(r: SsoProviderRecordV2) -> Self {
        Self {
            id: r.id,
            provider_id: r.provider_id,
            organization_id: r.organization_id,
            user_id: r.user_id,
            issuer: r.issuer,
            domains: r.domains,
            domain_verified: r.domain_verified,
            verification: r.verification,
            client_id: r.client_id,
            sealed_secret: r.sealed_secret,
            token_auth: r.token_auth,
            discovery_endpoint: r.discovery_endpoint,
            authorization_endpoint: r.authorization_endpoint,
            token_endpoint: r.token_endpoint,
            jwks_endpoint: r.jwks_endpoint,
            userinfo_endpoint: r.userinfo_endpoint,
            scopes: r.scopes,
            default_role: r.default_role,
            created_at_ms: r.created_at_ms,
            updated_at_ms: r.updated_at_ms,
            saml: r.saml,
            role_mapping: None,
        }
    }
}

impl From<SsoProviderRecordV1> for SsoProviderRecordV2 {
    fn from(r: SsoProviderRecordV1) -> Self {
        Self {
            id: r.id,
            provider_id: r.provider_id,
            organization_id: r.organization_id,
            user_id: r.user_id,
            issuer: r.issuer,
            domains: r.domains,
            domain_verified: r.domain_verified,
            verification: r.verification,
            client_id: r.client_id,
            sealed_secret: r.sealed_secret,
            token_auth: r.token_auth,
            discovery_endpoint: r.discovery_endpoint,
            authorization_endpoint: r.authorization_endpoint,
            token_endpoint: r.token_endpoint,
            jwks_endpoint: r.jwks_endpoint,
            userinfo_endpoint: r.userinfo_endpoint,
            scopes: r.scopes,
            default_role: r.default_role,
            created_at_ms: r.created_at_ms,
            updated_at_ms: r.updated_at_ms,
            saml: None,
        }
    }
}

/// A stored provider, of either format.
pub fn decode_sso_provider(bytes: &[u8]) -> Result<SsoProviderRecord, super::StoreError> {
    use super::codec::decode;
    match bytes.first() {
        Some(&SsoProviderRecordV1::VERSION) => {
            decode::<SsoProviderRecordV1>(bytes).map(|v1| SsoProviderRecordV2::from(v1).into())
        }
        Some(&SsoProviderRecordV2::VERSION) => decode::<SsoProviderRecordV2>(bytes).map(Into::into),
        _ => decode::<SsoProviderRecordV3>(bytes),
    }
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
        assert_eq!(
            decode_sso_provider(&expected).unwrap(),
            SsoProviderRecordV3::from(SsoProviderRecordV2::from(provider))
        );
    }

    #[test]
    fn sso_provider_v2_golden_bytes() {
        let v1 = SsoProviderRecordV1 {
            id: [1; 16],
            provider_id: "p".into(),
            organization_id: None,
            user_id: [3; 16],
            issuer: "i".into(),
            domains: vec![],
            domain_verified: false,
            verification: None,
            client_id: String::new(),
            sealed_secret: vec![],
            token_auth: 0,
            discovery_endpoint: String::new(),
            authorization_endpoint: String::new(),
            token_endpoint: String::new(),
            jwks_endpoint: String::new(),
            userinfo_endpoint: None,
            scopes: vec![],
            default_role: "m".into(),
            created_at_ms: 1,
            updated_at_ms: 2,
        };
        let saml = SamlConfigV1 {
            entry_point: "e".into(),
            idp_entity_id: "d".into(),
            certs: vec![vec![7]],
            audience: None,
            callback_url: Some("c".into()),
            want_assertions_signed: true,
            identifier_format: None,
            mapping_email: None,
            mapping_name: None,
            mapping_first_name: None,
            mapping_last_name: None,
        };
        let provider = SsoProviderRecordV2 { saml: Some(saml), ..v1.clone().into() };
        // The first format's bytes after the version byte, then the SAML part.
        let mut expected = vec![2];
        expected.extend(&encode(&v1)[1..]);
        expected.extend([1, 1, b'e', 1, b'd', 1, 1, 7, 0, 1, 1, b'c', 1, 0, 0, 0, 0, 0]);
        assert_eq!(encode(&provider), expected);
        assert_eq!(decode_sso_provider(&expected).unwrap(), SsoProviderRecordV3::from(provider));
    }

    #[test]
    fn sso_provider_v3_golden_bytes() {
        let v2 = SsoProviderRecordV2 {
            id: [1; 16],
            provider_id: "p".into(),
            organization_id: None,
            user_id: [3; 16],
            issuer: "i".into(),
            domains: vec![],
            domain_verified: false,
            verification: None,
            client_id: String::new(),
            sealed_secret: vec![],
            token_auth: 0,
            discovery_endpoint: String::new(),
            authorization_endpoint: String::new(),
            token_endpoint: String::new(),
            jwks_endpoint: String::new(),
            userinfo_endpoint: None,
            scopes: vec![],
            default_role: "m".into(),
            created_at_ms: 1,
            updated_at_ms: 2,
            saml: None,
        };
        let mapping = RoleMappingV1 { claim: Some("g".into()), pairs: vec![("e".into(), "admin".into())] };
        let provider = SsoProviderRecordV3 { role_mapping: Some(mapping), ..v2.clone().into() };
        // The second format's bytes after the version byte, then the role mapping.
        let mut expected = vec![3];
        expected.extend(&encode(&v2)[1..]);
        expected.extend([1, 1, 1, b'g', 1, 1, b'e', 5]);
        expected.extend(b"admin");
        assert_eq!(encode(&provider), expected);
        assert_eq!(decode_sso_provider(&expected).unwrap(), provider);
        // A second-format record reads as one without a mapping.
        assert_eq!(decode_sso_provider(&encode(&v2)).unwrap(), SsoProviderRecordV3::from(v2));
    }
}
