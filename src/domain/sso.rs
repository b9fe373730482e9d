//! Single sign-on per organization: the names a provider is known by.

use std::fmt;

/// A single sign-on provider's `providerId`: 1 to 40 characters of `A-Z`, `a-z`, `0-9`, `-` and `_`. It is the
/// last segment of the provider's callback URL and part of the DNS name its domain is verified under
/// (`_better-auth-token-{providerId}`, which must stay one DNS label of at most 63 characters), so nothing that
/// would need escaping in either.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SsoProviderId(String);

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("providerId must be 1 to 40 characters of A-Z, a-z, 0-9, '-' and '_'")]
pub struct SsoProviderIdError;

impl SsoProviderId {
    pub const MAX: usize = 40;

    pub fn parse(s: &str) -> Result<Self, SsoProviderIdError> {
        let ok = (1..=Self::MAX).contains(&s.len())
            && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if ok { Ok(Self(s.to_owned())) } else { Err(SsoProviderIdError) }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for SsoProviderId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// An e-mail domain a provider answers for: a DNS name of at least two labels, lower-cased (`Acme.Test` is
/// `acme.test`: domains are case-insensitive, and an address's domain is compared in lower case), each label 1 to
/// 63 characters of `a-z`, `0-9` and `-` not starting or ending with `-`, 253 characters at most.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EmailDomain(String);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a domain name (labels of a-z, 0-9 and '-', at least two, 253 characters at most)")]
pub struct EmailDomainError(pub String);

impl EmailDomain {
    pub fn parse(s: &str) -> Result<Self, EmailDomainError> {
        let lower = s.trim().to_ascii_lowercase();
        let labels: Vec<&str> = lower.split('.').collect();
        let ok = lower.len() <= 253
            && labels.len() >= 2
            && labels.iter().all(|l| {
                (1..=63).contains(&l.len())
                    && !l.starts_with('-')
                    && !l.ends_with('-')
                    && l.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            });
        if ok { Ok(Self(lower)) } else { Err(EmailDomainError(s.to_owned())) }
    }

    /// The plugin's `domain`: one domain or several separated by commas (`acme.test,acme.org`), de-duplicated.
    pub fn parse_list(s: &str) -> Result<Vec<Self>, EmailDomainError> {
        let mut out: Vec<Self> = Vec::new();
        for part in s.split(',') {
            let domain = Self::parse(part)?;
            if !out.contains(&domain) {
                out.push(domain);
            }
        }
        Ok(out)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub(crate) fn from_trusted(s: String) -> Self {
        Self(s)
    }
}

impl fmt::Display for EmailDomain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A provider's assertion that the person authenticated with more than one factor at this sign-in: what lets an
/// SSO sign-in skip the second factor here (issue #48). Only made from what the provider signed (an ID token's
/// `amr`, a SAML assertion's `AuthnContextClassRef`); it says which values counted, for the audit log.
///
/// OpenID Connect (`amr`, RFC 8176 §2): `mfa`, or methods of two different kinds among something known (`pwd`,
/// `pin`, `kba`), something held (`otp`, `hwk`, `swk`, `sms`, `tel`, `sc`, `pop`) and something one is (`fpt`,
/// `face`, `iris`, `retina`, `vbm`). A lone method is one factor, whatever it is (`otp` alone, `hwk` alone), and
/// `mca`, `rba`, `geo`, `wia`, `user` are not factors of any kind.
///
/// SAML (`AuthnContextClassRef`): the classes that name more than one factor, [`MULTI_FACTOR_CLASSES`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AssertedMultiFactor(String);

/// The SAML authentication context classes taken as multi-factor: the SAML 2.0 classes whose definition requires
/// two factors (authn-context §3.4: `MobileTwoFactorContract`, `MobileTwoFactorUnregistered`, and `SmartcardPKI`,
/// a smart card with its PIN), the REFEDS MFA profile (Shibboleth, InCommon, Okta), Microsoft's
/// `multipleauthn` (ADFS, Entra ID) and OpenID PAPE's multi-factor policies (which some IdPs put in SAML too).
pub const MULTI_FACTOR_CLASSES: &[&str] = &[
    "urn:oasis:names:tc:SAML:2.0:ac:classes:MobileTwoFactorContract",
    "urn:oasis:names:tc:SAML:2.0:ac:classes:MobileTwoFactorUnregistered",
    "urn:oasis:names:tc:SAML:2.0:ac:classes:SmartcardPKI",
    "https://refeds.org/profile/mfa",
    "http://schemas.microsoft.com/claims/multipleauthn",
    "http://schemas.openid.net/pape/policies/2007/06/multi-factor",
    "http://schemas.openid.net/pape/policies/2007/06/multi-factor-physical",
];

/// The kind of factor an RFC 8176 method is, `None` for a value that is no factor (or unknown).
fn factor_kind(method: &str) -> Option<u8> {
    match method {
        "pwd" | "pin" | "kba" => Some(0),
        "otp" | "hwk" | "swk" | "sms" | "tel" | "sc" | "pop" => Some(1),
        "fpt" | "face" | "iris" | "retina" | "vbm" => Some(2),
        _ => None,
    }
}

impl AssertedMultiFactor {
    /// From an ID token's `amr`, when it says multi-factor (see the type).
    pub fn from_amr<'a>(amr: impl IntoIterator<Item = &'a str>) -> Option<Self> {
        let amr: Vec<&str> = amr.into_iter().collect();
        let mut kinds = amr.iter().filter_map(|m| factor_kind(m)).collect::<Vec<u8>>();
        kinds.sort_unstable();
        kinds.dedup();
        (amr.contains(&"mfa") || kinds.len() >= 2).then(|| Self(format!("amr {}", amr.join(" "))))
    }

    /// From a SAML assertion's `AuthnContextClassRef`s, when one is a multi-factor class (see the type).
    pub fn from_authn_context<'a>(classes: impl IntoIterator<Item = &'a str>) -> Option<Self> {
        let class = classes.into_iter().map(str::trim).find(|c| MULTI_FACTOR_CLASSES.contains(c))?;
        Some(Self(format!("AuthnContextClassRef {class}")))
    }

    /// What the provider said that counted: `amr pwd otp`, `AuthnContextClassRef …`.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provider_ids_fit_a_url_segment_and_a_dns_label() {
        assert!(SsoProviderId::parse("acme-okta_1").is_ok());
        for bad in ["", "a/b", "a b", "é", "a.b", &"x".repeat(41)] {
            assert!(SsoProviderId::parse(bad).is_err(), "{bad:?}");
        }
        assert_eq!(format!("_better-auth-token-{}", "x".repeat(SsoProviderId::MAX)).len(), 59);
    }

    #[test]
    fn domains_are_dns_names_in_lower_case() {
        assert_eq!(EmailDomain::parse(" Acme.Test ").unwrap().as_str(), "acme.test");
        let list = EmailDomain::parse_list("acme.test,ACME.test, acme.org").unwrap();
        assert_eq!(list.iter().map(EmailDomain::as_str).collect::<Vec<_>>(), ["acme.test", "acme.org"]);
        for bad in ["", "acme", "-a.test", "a-.test", "a..test", "a_b.test", "acme.test,", "user@acme.test"] {
            assert!(EmailDomain::parse_list(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn multi_factor_is_mfa_or_two_kinds_of_factor_or_a_multi_factor_class() {
        let amr = |v: &[&str]| AssertedMultiFactor::from_amr(v.iter().copied()).is_some();
        assert!(amr(&["mfa"]));
        assert!(amr(&["pwd", "otp"]));
        assert!(amr(&["swk", "pin"]));
        assert!(amr(&["hwk", "fpt"]));
        assert!(!amr(&["pwd"]));
        assert!(!amr(&["otp"]));
        assert!(!amr(&["hwk", "swk"]), "two things held are one kind of factor");
        assert!(!amr(&["pwd", "kba"]));
        assert!(!amr(&["pwd", "mca", "rba"]));
        assert!(!amr(&[]));
        assert_eq!(AssertedMultiFactor::from_amr(["pwd", "otp"]).unwrap().as_str(), "amr pwd otp");
        let saml = |v: &[&str]| AssertedMultiFactor::from_authn_context(v.iter().copied()).is_some();
        assert!(saml(&["http://schemas.microsoft.com/claims/multipleauthn"]));
        assert!(saml(&[
            "urn:oasis:names:tc:SAML:2.0:ac:classes:PasswordProtectedTransport",
            "https://refeds.org/profile/mfa"
        ]));
        assert!(!saml(&["urn:oasis:names:tc:SAML:2.0:ac:classes:PasswordProtectedTransport"]));
        assert!(!saml(&["urn:oasis:names:tc:SAML:2.0:ac:classes:Smartcard"]));
        assert!(!saml(&[]));
    }
}
