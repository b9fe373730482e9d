//! Persisted formats of SCIM provisioning (src/scim): the bearer tokens an organization's directory calls with, and
//! what the directory said of each user it provisioned. Framed like every record ([`super::codec`]); the
//! golden-bytes tests below pin them.

use serde::{Deserialize, Serialize};

use super::codec::Versioned;

/// A SCIM bearer token of one organization. Key: its id, which the token itself carries (so it is found without a
/// scan); the secret part is stored only as its SHA-256 (256 random bits: a fast hash is enough) and compared in
/// constant time. A revoked token is deleted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScimTokenRecordV1 {
    pub id: [u8; 16],
    pub org: [u8; 16],
    pub secret_hash: [u8; 32],
    /// Bits: 1 `scim.users.read`, 2 `scim.users.write`, 4 `scim.groups.read`, 8 `scim.groups.write`.
    pub scopes: u8,
    pub expires_at_ms: Option<i64>,
    /// The administrator or owner who made it.
    pub created_by: [u8; 16],
    pub created_at_ms: i64,
}

/// What an organization's directory said of one account it provisioned. Key: the organization and the account
/// (the SCIM resource's id is the account's id: an account provisioned by two organizations has a record in each,
/// and each token sees only its own organization's).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScimUserRecordV1 {
    pub org: [u8; 16],
    pub user: [u8; 16],
    /// Unique in the organization, compared without case (RFC 7643 §4.1.1: caseExact false).
    pub user_name: String,
    pub external_id: Option<String>,
    pub active: bool,
    /// The rest of the resource as the directory sent it (name, displayName, emails, the enterprise extension…):
    /// a JSON object text, rendered back as it came.
    pub attributes: String,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
}

/// An organization's team its directory made as a SCIM Group. Key: the organization and the team (the Group's id
/// is the team's id). The team itself (its name, the `displayName`, and its members) is the organization's record;
/// this one holds what only the directory says, and marks the team as the directory's: the teams an
/// organization's people made in the application are not Groups its directory may change or delete.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScimGroupRecordV1 {
    pub org: [u8; 16],
    pub team: [u8; 16],
    /// Unique in the organization (compared with case: RFC 7643 §3.1, caseExact).
    pub external_id: Option<String>,
}

/// What a directory finds one of its accounts by, without reading the organization's every record: its userName
/// (compared without case, so the key holds it lowercased) or its externalId (compared with case). These are the
/// lookups identity providers send before each create (`filter=userName eq "…"`), and what a write checks for
/// uniqueness; both stores keep an index of them, written in the commit that writes the record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScimLookup {
    kind: LookupKind,
    value: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LookupKind {
    UserName,
    ExternalId,
}

impl ScimLookup {
    pub fn user_name(name: &str) -> Self {
        Self { kind: LookupKind::UserName, value: name.to_lowercase() }
    }

    pub fn external_id(id: &str) -> Self {
        Self { kind: LookupKind::ExternalId, value: id.to_owned() }
    }

    /// The value as the index holds it (a userName lowercased).
    pub fn value(&self) -> &str {
        &self.value
    }

    pub fn is_user_name(&self) -> bool {
        self.kind == LookupKind::UserName
    }

    /// Whether `record` is one this lookup finds.
    pub fn matches(&self, record: &ScimUserRecordV1) -> bool {
        match self.kind {
            LookupKind::UserName => record.user_name.to_lowercase() == self.value,
            LookupKind::ExternalId => record.external_id.as_deref() == Some(self.value.as_str()),
        }
    }

    /// The embedded store's index key of every record this lookup finds in `org`: the organization, the kind, the
    /// value's length and bytes (so that no value is a prefix of another's key), then the account.
    pub(crate) fn prefix(&self, org: [u8; 16]) -> Vec<u8> {
        let mut key = Vec::with_capacity(16 + 1 + 4 + self.value.len() + 16);
        key.extend(org);
        key.push(match self.kind {
            LookupKind::UserName => b'u',
            LookupKind::ExternalId => b'e',
        });
        key.extend((self.value.len() as u32).to_be_bytes());
        key.extend(self.value.as_bytes());
        key
    }
}

impl ScimUserRecordV1 {
    /// The lookups that find this record.
    pub fn lookups(&self) -> Vec<ScimLookup> {
        let external = self.external_id.as_deref().map(ScimLookup::external_id);
        std::iter::once(ScimLookup::user_name(&self.user_name)).chain(external).collect()
    }

    /// Its keys in the embedded store's index ([`ScimLookup::prefix`] then the account).
    pub(crate) fn lookup_keys(&self) -> Vec<Vec<u8>> {
        let key = |l: ScimLookup| {
            let mut key = l.prefix(self.org);
            key.extend(self.user);
            key
        };
        self.lookups().into_iter().map(key).collect()
    }
}

impl Versioned for ScimGroupRecordV1 {
    const VERSION: u8 = 1;
    const KIND: &'static str = "SCIM group";
}

impl Versioned for ScimTokenRecordV1 {
    const VERSION: u8 = 1;
    const KIND: &'static str = "SCIM token";
}

impl Versioned for ScimUserRecordV1 {
    const VERSION: u8 = 1;
    const KIND: &'static str = "SCIM user";
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::codec::{decode, encode};

    #[test]
    fn scim_token_golden_bytes() {
        let token = ScimTokenRecordV1 {
            id: [1; 16],
            org: [2; 16],
            secret_hash: [3; 32],
            scopes: 3,
            expires_at_ms: Some(5),
            created_by: [4; 16],
            created_at_ms: 1,
        };
        let mut expected = vec![1];
        expected.extend([1; 16]);
        expected.extend([2; 16]);
        expected.extend([3; 32]);
        expected.extend([3, 1, 10]);
        expected.extend([4; 16]);
        expected.push(2);
        assert_eq!(encode(&token), expected);
        assert_eq!(decode::<ScimTokenRecordV1>(&expected).unwrap(), token);
    }

    #[test]
    fn scim_user_golden_bytes() {
        let user = ScimUserRecordV1 {
            org: [1; 16],
            user: [2; 16],
            user_name: "u".into(),
            external_id: None,
            active: true,
            attributes: "{}".into(),
            created_at_ms: 1,
            updated_at_ms: 2,
        };
        let mut expected = vec![1];
        expected.extend([1; 16]);
        expected.extend([2; 16]);
        expected.extend([1, b'u', 0, 1, 2, b'{', b'}', 2, 4]);
        assert_eq!(encode(&user), expected);
        assert_eq!(decode::<ScimUserRecordV1>(&expected).unwrap(), user);
    }

    #[test]
    fn scim_group_golden_bytes() {
        let group = ScimGroupRecordV1 { org: [1; 16], team: [2; 16], external_id: Some("g".into()) };
        let mut expected = vec![1];
        expected.extend([1; 16]);
        expected.extend([2; 16]);
        expected.extend([1, 1, b'g']);
        assert_eq!(encode(&group), expected);
        assert_eq!(decode::<ScimGroupRecordV1>(&expected).unwrap(), group);
    }

    #[test]
    fn lookups_find_a_user_name_without_case_and_an_external_id_with_it() {
        let record = ScimUserRecordV1 {
            org: [1; 16],
            user: [2; 16],
            user_name: "Ann@Example.com".into(),
            external_id: Some("00uA".into()),
            active: true,
            attributes: "{}".into(),
            created_at_ms: 1,
            updated_at_ms: 1,
        };
        assert!(ScimLookup::user_name("ann@EXAMPLE.com").matches(&record));
        assert!(ScimLookup::external_id("00uA").matches(&record));
        assert!(!ScimLookup::external_id("00ua").matches(&record));
        let keys = record.lookup_keys();
        assert_eq!(keys.len(), 2);
        assert!(keys[0].starts_with(&ScimLookup::user_name("ANN@example.COM").prefix([1; 16])));
        assert!(keys[1].starts_with(&ScimLookup::external_id("00uA").prefix([1; 16])));
        // A value is never a prefix of another's key: "ab" and "abc" differ in the length before the bytes.
        assert!(
            !ScimLookup::user_name("abc").prefix([1; 16]).starts_with(&ScimLookup::user_name("ab").prefix([1; 16]))
        );
    }
}
