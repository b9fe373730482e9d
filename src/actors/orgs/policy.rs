//! An organization's single sign-on policy: what callers send the organizations actor about it, and what they get
//! back. The actor side is `actor/policy.rs`. Whether the caller may change it (an owner of the organization, or
//! a service administrator) is the facade's check; the policy lives in the organization's record, so it changes
//! in the organization's order and travels the change log with it to every node.

use ractor::RpcReplyPort;

use super::teams::TeamCaller;
use super::{OrgsHandle, OrgsMsg};
use crate::actors::{Unavailable, call, gone};
use crate::domain::OrgId;

/// Why a policy change was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    #[error("Organization not found")]
    OrgNotFound,
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
}

pub(in crate::actors) enum PolicyMsg {
    /// Single sign-on required (`true`) or not for the organization's verified domains; the answer is the
    /// setting as it now is. Setting what is already set changes nothing and audits nothing.
    RequireSso { org: OrgId, on: bool, caller: TeamCaller, reply: RpcReplyPort<Result<bool, PolicyError>> },
}

impl PolicyMsg {
    pub(super) fn caller_gone(&self) -> Option<bool> {
        match self {
            Self::RequireSso { reply, .. } => gone(reply),
        }
    }
}

impl OrgsHandle {
    /// Requires single sign-on for `org`'s verified domains (`on`), or stops requiring it.
    pub async fn require_sso(&self, org: OrgId, on: bool, caller: TeamCaller) -> Result<bool, PolicyError> {
        call(&self.0, |reply| OrgsMsg::Policy(PolicyMsg::RequireSso { org, on, caller, reply })).await?
    }
}
