//! Audit entries as store operations: the one way every writer (an actor, the mail sender) records one, in the
//! same commit as the change it records, so the log can neither miss a change nor record one that did not happen.

use uuid::Uuid;

use super::{StoreOp, convert};
use crate::domain::{AuditEntry, UserId};

/// An audit entry as a store operation. `detail` must never carry a secret.
pub fn entry(action: &str, actor: Option<UserId>, target: Option<Uuid>, ip: &str, detail: String) -> StoreOp {
    StoreOp::PutAudit(convert::audit_record(&AuditEntry::new(action, actor, target, ip, detail)))
}
