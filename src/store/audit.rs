//! Audit entries as store operations: the one way every writer (an actor, the mail sender) records one, in the
//! same commit as the change it records, so the log can neither miss a change nor record one that did not happen.

use uuid::Uuid;

use super::{OAuthGrantRecord, StoreOp, convert};
use crate::domain::{AuditEntry, UserId, action};

/// An audit entry as a store operation. `detail` must never carry a secret.
pub fn entry(action: &str, actor: Option<UserId>, target: Option<Uuid>, ip: &str, detail: String) -> StoreOp {
    StoreOp::PutAudit(convert::audit_record(&AuditEntry::new(action, actor, target, ip, detail)))
}

/// The audit entry of `action` about `grant`, by `by`, `how` it was made or why it ended: `None` for a client's own
/// grant (client credentials), which concerns no user ([`action::OAUTH_GRANT_ISSUED`] says why it is not audited).
/// The detail names the client, the grant (its id as its tokens carry it, which opens nothing) and its scopes;
/// never a token.
pub fn grant_entry(
    action: &'static str,
    by: Option<UserId>,
    grant: &OAuthGrantRecord,
    how: &str,
    ip: &str,
) -> Option<StoreOp> {
    let user = UserId::from_bytes(grant.user_id?);
    let detail =
        format!("{}: {how}, grant {} [{}]", grant.client_id, super::grant_id_text(grant.id), grant.scopes.join(" "));
    Some(entry(action, by, Some(user.into()), ip, detail))
}

/// The entry of a grant ended with every session of its user (a ban, a password reset, "sign out everywhere"),
/// written by the store in that commit, since only the store's transaction knows which grants those are. No actor
/// and no address: the change's own entry in the same commit has them.
pub fn grant_ended_with_sessions(grant: &OAuthGrantRecord) -> Option<StoreOp> {
    grant_entry(action::OAUTH_GRANT_REVOKED, None, grant, "every session of the account ended", "")
}
