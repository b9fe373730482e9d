use uuid::Uuid;

use super::{AuditId, Timestamp, UserId};

/// The actions a caller who proved nothing can cause at will (an unknown e-mail costs nothing to type): a
/// mailed link asked for, a sign-in failed or refused, and the summary of failures. Retention keeps them in a
/// stream of their own, capped apart (`[audit] max_anonymous_entries`), so that no amount of them can push an
/// administrator's change, an account's creation or an impersonation out of the log.
pub const ANONYMOUS_ACTIONS: &[&str] = &[
    "user.link_requested",
    "sign_in.failed",
    "sign_in.refused",
    "sign_in.failures_summarised",
    "sign_in.second_factor_failed",
    "user.two_factor_code_mailed",
];

/// Whether entries of `action` belong to the anonymous stream ([`ANONYMOUS_ACTIONS`]).
pub fn is_anonymous_action(action: &str) -> bool {
    ANONYMOUS_ACTIONS.contains(&action)
}

/// One entry of the audit log: an administrative change or a sign-in outcome. `detail` never carries a secret
/// (no password, token or hash): it is shown to every administrator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditEntry {
    pub id: AuditId,
    pub at: Timestamp,
    /// What happened, e.g. `user.role_changed`, `sign_in.failed`.
    pub action: String,
    /// Who did it: the administrator, or the account signing in.
    pub actor: Option<UserId>,
    /// What it was done to: a user or an organization.
    pub target: Option<Uuid>,
    /// The client address the request came from (empty for the command line).
    pub ip_address: String,
    /// Short human-readable detail, e.g. `qa_manager -> admin`.
    pub detail: String,
}

impl AuditEntry {
    /// An entry stamped now.
    pub fn new(action: &str, actor: Option<UserId>, target: Option<Uuid>, ip: &str, detail: String) -> Self {
        Self {
            id: AuditId::new(),
            at: Timestamp::now(),
            action: action.to_owned(),
            actor,
            target,
            ip_address: ip.to_owned(),
            detail,
        }
    }
}
