//! Webhook endpoints, for administrators: the facade's pass-throughs to [`crate::webhooks::Webhooks`], and the
//! audit log's export (read in pages, oldest first).

use super::Accounts;
use crate::actors::Unavailable;
use crate::domain::{AuditEntry, AuditId, UserId};
pub use crate::webhooks::{Change as WebhookChange, Delivery, Endpoint, WebhookError};

impl Accounts {
    /// The event types an endpoint may subscribe to.
    pub fn webhook_events(&self) -> Vec<&'static str> {
        crate::webhooks::EVENTS.iter().map(|(name, _)| *name).collect()
    }

    pub async fn webhooks(&self) -> Result<Vec<Endpoint>, Unavailable> {
        self.webhooks.list().await
    }

    pub async fn webhook(&self, id: [u8; 16]) -> Result<Endpoint, WebhookError> {
        self.webhooks.get(id).await
    }

    pub async fn create_webhook(
        &self,
        url: &str,
        events: Vec<String>,
        description: Option<String>,
        enabled: bool,
        by: UserId,
        ip: &str,
    ) -> Result<(Endpoint, String), WebhookError> {
        self.webhooks.create(url, events, description, enabled, by, ip).await
    }

    pub async fn update_webhook(
        &self,
        id: [u8; 16],
        change: WebhookChange,
        by: UserId,
        ip: &str,
    ) -> Result<(Endpoint, Option<String>), WebhookError> {
        self.webhooks.update(id, change, by, ip).await
    }

    pub async fn delete_webhook(&self, id: [u8; 16], by: UserId, ip: &str) -> Result<(), WebhookError> {
        self.webhooks.delete(id, by, ip).await
    }

    pub async fn test_webhook(&self, id: [u8; 16], by: UserId, ip: &str) -> Result<String, WebhookError> {
        self.webhooks.test(id, by, ip).await
    }

    pub async fn resend_webhook(
        &self,
        id: [u8; 16],
        delivery: [u8; 16],
        by: UserId,
        ip: &str,
    ) -> Result<String, WebhookError> {
        self.webhooks.resend(id, delivery, by, ip).await
    }

    pub async fn webhook_deliveries(
        &self,
        id: [u8; 16],
        before: Option<[u8; 16]>,
        limit: usize,
    ) -> Result<Vec<Delivery>, WebhookError> {
        self.webhooks.deliveries(id, before, limit).await
    }

    /// Up to `limit` audit entries after `after` (from the oldest when `None`), oldest first: the export's pages.
    pub async fn audit_after(&self, after: Option<AuditId>, limit: usize) -> Result<Vec<AuditEntry>, Unavailable> {
        self.audit.after(after, limit).await
    }
}
