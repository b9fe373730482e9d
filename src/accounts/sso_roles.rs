//! An SSO provider's groups mapped to its organization's roles (issue #48): the mapping checked where it is set
//! (`sso/register`, `sso/update-provider`), and the roles a sign-in through the provider gives, from the groups the
//! identity provider signed (an ID token's claim, a SAML assertion's attribute). What a sign-in does with them to
//! an existing member is the users actor's rule ([`SsoRoles`]); docs/guides/sso.md says it for administrators.

use base64::Engine;

use super::sso::default_role;
use super::{Accounts, Current, SsoError};
use crate::actors::users::SsoRoles;
use crate::domain::{
    DEFAULT_GROUPS_ATTRIBUTES, DEFAULT_GROUPS_CLAIM, MappedRole, MemberRoles, OrgId, OrgRole, RoleMapping,
};
use crate::saml::Signed;
use crate::store::SsoProviderRecord;

impl Accounts {
    /// `roleMapping` as `current` may set it for `org`: each role one the organization has now (a role it defined,
    /// by its exact name), and `owner` only from one of its owners (or a service administrator), as
    /// update-member-role asks: nobody hands out through the provider what they could not give themselves.
    pub(super) fn check_role_mapping(
        &self,
        current: &Current,
        org: OrgId,
        mapping: &RoleMapping,
    ) -> Result<(), SsoError> {
        for pair in mapping.pairs() {
            let role = pair.role().as_str();
            if self.parse_member_roles(org, [role]).is_err() {
                return Err(SsoError::Invalid(format!(
                    "roleMapping: {role:?} is not a role of the organization (owner, admin, member, or one it defined)"
                )));
            }
        }
        if grants_owner(mapping) && !self.acting_membership(current, org).is_some_and(|m| m.roles.is_owner()) {
            return Err(SsoError::OwnerMapping);
        }
        Ok(())
    }

    /// The organization a sign-in through `record` joins, with the roles it gives, and where they come from:
    /// without a role mapping, the default role; with one, the roles of every pair whose group is among `groups`
    /// (those the organization still defines: a role deleted since gives nothing), or the default role when none
    /// matched.
    pub(super) fn sso_membership(
        &self,
        record: &SsoProviderRecord,
        groups: &[&str],
    ) -> (Option<(OrgId, MemberRoles)>, SsoRoles) {
        let Some(org) = record.organization_id.map(OrgId::from_bytes) else { return (None, SsoRoles::Default) };
        let default = MemberRoles::one(default_role(&record.default_role));
        let Some(mapping) = record.role_mapping.as_ref().map(|m| m.domain()) else {
            return (Some((org, default)), SsoRoles::Default);
        };
        let held: Vec<&str> =
            mapping.roles_of(groups).into_iter().filter(|r| self.parse_member_roles(org, [*r]).is_ok()).collect();
        let roles = match held.is_empty() {
            true => default,
            false => self.parse_member_roles(org, held).unwrap_or(default),
        };
        (Some((org, roles)), SsoRoles::Mapped { grants_owner: grants_owner(&mapping) })
    }
}

fn grants_owner(mapping: &RoleMapping) -> bool {
    mapping.pairs().iter().any(|p| *p.role() == MappedRole::BuiltIn(OrgRole::Owner))
}

/// The groups in claim `claim` (default `groups`) of an ID token the callback verified (its signature, issuer,
/// audience, expiry and nonce): the strings of an array, or the one string; anything else names none. Read from
/// the token's own payload because the claim's name is the provider's to choose.
pub(super) fn id_token_groups(id_token: &str, claim: Option<&str>) -> Vec<String> {
    let claims = id_token
        .split('.')
        .nth(1)
        .and_then(|payload| base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(payload).ok())
        .and_then(|json| serde_json::from_slice::<serde_json::Value>(&json).ok());
    let strings = |v: &serde_json::Value| -> Vec<String> {
        match v {
            serde_json::Value::String(s) => vec![s.clone()],
            serde_json::Value::Array(items) => items.iter().filter_map(|i| i.as_str().map(str::to_owned)).collect(),
            _ => Vec::new(),
        }
    };
    claims.as_ref().and_then(|c| c.get(claim.unwrap_or(DEFAULT_GROUPS_CLAIM))).map(strings).unwrap_or_default()
}

/// The groups a verified SAML assertion names: every value of attribute `attribute`, or of the usual ones
/// ([`DEFAULT_GROUPS_ATTRIBUTES`]) when the provider names none.
pub(super) fn assertion_groups<'a>(signed: &'a Signed, attribute: Option<&'a str>) -> Vec<&'a str> {
    match attribute {
        Some(name) => signed.attribute_values(name).collect(),
        None => DEFAULT_GROUPS_ATTRIBUTES.iter().flat_map(|name| signed.attribute_values(name)).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(payload: &serde_json::Value) -> String {
        let b64 = |b: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b);
        format!("{}.{}.sig", b64(br#"{"alg":"RS256"}"#), b64(payload.to_string().as_bytes()))
    }

    #[test]
    fn an_id_tokens_groups_are_its_claims_strings() {
        let t = token(&serde_json::json!({"groups": ["eng", 7, "ops"], "roles": "admins", "other": {"a": 1}}));
        assert_eq!(id_token_groups(&t, None), ["eng", "ops"]);
        assert_eq!(id_token_groups(&t, Some("roles")), ["admins"]);
        assert!(id_token_groups(&t, Some("other")).is_empty());
        assert!(id_token_groups(&t, Some("missing")).is_empty());
        assert!(id_token_groups("not a token", None).is_empty());
    }
}
