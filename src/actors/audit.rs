//! Audit entries. Each is written in the same store transaction as the change it records, so the log can neither
//! miss a change nor record one that did not happen.

use uuid::Uuid;

use crate::domain::{AuditEntry, UserId};
use crate::store::{StoreOp, convert};

/// Actions recorded in the audit log.
pub mod action {
    pub const USER_CREATED: &str = "user.created";
    pub const ROLE_CHANGED: &str = "user.role_changed";
    pub const BANNED: &str = "user.banned";
    pub const UNBANNED: &str = "user.unbanned";
    pub const BAN_REASON_CHANGED: &str = "user.ban_reason_changed";
    pub const ORGANIZATION_CHANGED: &str = "user.organization_changed";
    pub const ORGANIZATION_CREATED: &str = "organization.created";
    pub const SIGN_IN_SUCCEEDED: &str = "sign_in.succeeded";
    pub const SIGN_IN_FAILED: &str = "sign_in.failed";
    pub const SIGN_IN_REFUSED: &str = "sign_in.refused";
    /// Failures beyond the per-minute budget of itemised rows, counted into one row.
    pub const SIGN_IN_FAILURES_SUMMARISED: &str = "sign_in.failures_summarised";
}

/// An audit entry as a store operation. `detail` must never carry a secret.
pub(crate) fn entry(action: &str, actor: Option<UserId>, target: Option<Uuid>, ip: &str, detail: String) -> StoreOp {
    StoreOp::PutAudit(convert::audit_record(&AuditEntry::new(action, actor, target, ip, detail)))
}
