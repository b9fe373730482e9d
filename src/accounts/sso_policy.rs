//! An organization's single sign-on policy: "require SSO" for the verified domains of its providers (issue #48).
//!
//! While it is on, an address of such a domain (or of a subdomain of one: the rule that chooses a provider by
//! domain at `sign-in/sso`) signs in only through a single sign-on provider of that organization. Every other way
//! in is refused with `SSO_REQUIRED` (403): a password (by e-mail or username), sign-up, the mailed ways (a sign-in
//! link, a sign-in or reset code, a reset link), a configured provider's sign-in (`sign-in/social`, a generic
//! OAuth provider, an ID token; src/accounts/oauth.rs, once the provider names the address) and a passkey's
//! (src/accounts/passkeys, once a right assertion names the account). What decides is the address's domain, never
//! whether an account has it, so an unknown address of the domain gets the answer a known one gets, after the same
//! work (the password is still verified, against a dummy for an unknown address). Sign-in by username is the
//! exception that keeps names secret: there the refusal comes only after a right password, and a wrong one is
//! refused as any.
//!
//! Service administrators keep their way in: an account with the role `admin` whose password is right signs in by
//! password (with its second factor) whatever the policy, and so do its passkeys and a provider's identity of it;
//! its mailed ways are refused like everyone's (the answer to a mailed way cannot depend on the account without
//! telling who has one).

use std::sync::Arc;

use super::{Accounts, Current, Unavailable};
use crate::actors::orgs::policy::PolicyError;
use crate::domain::{Email, OrgId, User};

/// An organization's policy as its owners see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SsoPolicy {
    pub organization_id: OrgId,
    pub require_sso: bool,
    /// The verified domains of its providers, which the policy covers (with their subdomains), in order.
    pub domains: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SsoPolicyError {
    #[error("Organization not found")]
    OrgNotFound,
    /// Neither a service administrator nor an owner of the organization.
    #[error("Only an owner of the organization or a service administrator may change its single sign-on policy")]
    Forbidden,
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
}

impl From<PolicyError> for SsoPolicyError {
    fn from(e: PolicyError) -> Self {
        match e {
            PolicyError::OrgNotFound => Self::OrgNotFound,
            PolicyError::Unavailable(u) => Self::Unavailable(u),
        }
    }
}

impl Accounts {
    /// `org`'s policy, for a service administrator or one of its owners and admins (who manage its providers).
    pub async fn sso_policy(&self, current: &Current, org: OrgId) -> Result<SsoPolicy, SsoPolicyError> {
        let found = self.indexes.orgs.get(org).ok_or(SsoPolicyError::OrgNotFound)?;
        let manager =
            self.indexes.members.get(org, current.user.id).is_some_and(|m| super::sso::is_org_admin(&m.roles));
        if current.administrator().is_none() && !manager {
            return Err(SsoPolicyError::Forbidden);
        }
        self.policy_view(org, found.require_sso).await
    }

    /// Requires single sign-on for `org`'s verified domains, or stops requiring it: an owner's choice (not an
    /// admin's of the organization: it decides how every member signs in) or a service administrator's. Audited
    /// (`sso_policy.updated`, webhook `organization.sso_policy_updated`) in the organization's commit; nothing is
    /// written when the setting is already so.
    pub async fn set_sso_policy(
        &self,
        current: &Current,
        org: OrgId,
        require_sso: bool,
        ip: &str,
    ) -> Result<SsoPolicy, SsoPolicyError> {
        self.indexes.orgs.get(org).ok_or(SsoPolicyError::OrgNotFound)?;
        // An owner on their own session: an administrator impersonating one acts as the administrator or not at all.
        let owner = !current.is_impersonation()
            && self.indexes.members.get(org, current.user.id).is_some_and(|m| m.roles.is_owner());
        if current.administrator().is_none() && !owner {
            return Err(SsoPolicyError::Forbidden);
        }
        let caller = Self::team_caller(current, ip.to_owned());
        let now = self.actors.orgs.require_sso(org, require_sso, caller).await?;
        self.policy_view(org, now).await
    }

    async fn policy_view(&self, org: OrgId, require_sso: bool) -> Result<SsoPolicy, SsoPolicyError> {
        let providers = self.sso.all().await.map_err(|_| Unavailable)?;
        let mut domains: Vec<String> = Vec::new();
        let verified = providers.iter().filter(|p| p.domain_verified && p.organization_id == Some(org.to_bytes()));
        for domain in verified.flat_map(|p| p.domains.iter()) {
            if !domains.contains(domain) {
                domains.push(domain.clone());
            }
        }
        Ok(SsoPolicy { organization_id: org, require_sso, domains })
    }

    /// The organizations whose policy covers `email`: each requires single sign-on and has a provider whose
    /// domains are verified and hold the address's domain (or a parent of it). Empty when no organization
    /// requires single sign-on at all, which is known without reading the store.
    pub(super) async fn sso_required_by(&self, email: &Email) -> Result<Vec<OrgId>, Unavailable> {
        let requiring = self.indexes.orgs.requiring_sso();
        if requiring.is_empty() {
            return Ok(Vec::new());
        }
        let Some((_, domain)) = email.as_str().rsplit_once('@') else { return Ok(Vec::new()) };
        let domain = domain.to_ascii_lowercase();
        let providers = self.sso.all().await.map_err(|_| Unavailable)?;
        let mut orgs = Vec::new();
        for provider in providers.iter().filter(|p| p.domain_verified) {
            let Some(org) = provider.organization_id.map(OrgId::from_bytes) else { continue };
            let covers = provider.domains.iter().any(|d| super::sso_oidc::domain_matches(&domain, d));
            if covers && requiring.contains(&org) && !orgs.contains(&org) {
                orgs.push(org);
            }
        }
        Ok(orgs)
    }

    /// Whether the policy refuses `email`'s ways in that are not single sign-on, whoever has the address.
    pub(super) async fn sso_refuses_address(&self, email: &Email) -> Result<bool, Unavailable> {
        Ok(!self.sso_required_by(email).await?.is_empty())
    }

    /// Whether the policy refuses `user` a way in that is not single sign-on, once it is known who they are (a
    /// right password, a reset link's holder): a service administrator is never refused.
    pub(super) async fn sso_refuses_user(&self, user: &Arc<User>) -> Result<bool, Unavailable> {
        if user.role.is_admin() {
            return Ok(false);
        }
        self.sso_refuses_address(&user.email_address()).await
    }
}
