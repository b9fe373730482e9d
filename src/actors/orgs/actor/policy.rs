//! The organizations actor's side of [`PolicyMsg`]: a new version of the organization (its policy lives in its
//! record), checked against the version this batch already holds, audited in the same commit.

use ractor::ActorRef;

use super::teams::NoOrg;
use super::{OrgsActor, State};
use crate::actors::orgs::OrgsMsg;
use crate::actors::orgs::policy::{PolicyError, PolicyMsg};
use crate::domain::action;

impl NoOrg for PolicyError {
    fn no_org() -> Self {
        PolicyError::OrgNotFound
    }
}

impl OrgsActor {
    pub(super) async fn policy(&self, myself: &ActorRef<OrgsMsg>, state: &mut State, msg: PolicyMsg) {
        match msg {
            PolicyMsg::RequireSso { org, on, caller, reply } => {
                self.change(myself, state, org, caller, reply, |o, _, _| {
                    if o.require_sso == on {
                        // Nothing to write: answered at once, no audit entry.
                        return Ok((on, "", String::new()));
                    }
                    o.require_sso = on;
                    let detail = match on {
                        true => "single sign-on required for its verified domains",
                        false => "single sign-on no longer required",
                    };
                    Ok((on, action::SSO_POLICY_UPDATED, detail.to_owned()))
                })
                .await
            }
        }
    }
}
