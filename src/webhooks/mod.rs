//! Webhooks: endpoints administrators register, the messages each change queues for them (written by the store in
//! the change's own commit: [`crate::store::hooks`]), and their delivery ([`deliver`]) under the Standard Webhooks
//! specification ([`sign`]).
//!
//! This module is what the facade calls to manage endpoints. Every change to an endpoint is audited in its own
//! commit. A secret leaves the server once, in the answer that created or rotated it.

pub mod backchannel;
pub mod deliver;
pub mod sign;
pub mod target;

use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::actors::Unavailable;
use crate::config::WebhooksConfig;
use crate::domain::{Timestamp, UserId};
use crate::store::hooks::is_event;
use crate::store::{DeliveryRecordV1, Store, StoreOp, StoreWriter, WebhookMessageRecordV1, WebhookRecordV1, audit};

pub use crate::store::hooks::EVENTS;

/// Audit actions of the endpoints' changes.
pub mod action {
    pub const CREATED: &str = "webhook.created";
    pub const UPDATED: &str = "webhook.updated";
    pub const SECRET_ROTATED: &str = "webhook.secret_rotated";
    pub const DELETED: &str = "webhook.deleted";
    pub const TEST_SENT: &str = "webhook.test_sent";
    pub const RESENT: &str = "webhook.resent";
}

/// The longest grace period of a rotated secret.
pub const MAX_GRACE: Duration = Duration::from_secs(7 * 86_400);
/// The grace period when the request names none.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(86_400);
const MAX_URL: usize = 2048;
const MAX_DESCRIPTION: usize = 200;

/// An endpoint as administrators see it (never its secret); its wire shape is `http::dto::Webhook`.
#[derive(Debug, Clone)]
pub struct Endpoint {
    pub id: String,
    pub url: String,
    pub events: Vec<String>,
    pub description: String,
    pub enabled: bool,
    /// A message has waited longer than `[webhooks] failing_after_secs`; cleared by the next delivery.
    pub failing: bool,
    pub failing_since: Option<String>,
    /// While a rotated secret still signs beside the new one: until when.
    pub previous_secret_expires_at: Option<String>,
    /// Messages waiting for delivery.
    pub queued: u64,
    pub created_at: String,
    pub updated_at: String,
}

/// One delivery attempt as the log shows it; its wire shape is `http::dto::WebhookDelivery`.
#[derive(Debug, Clone)]
pub struct Delivery {
    pub id: String,
    pub message_id: String,
    pub event: String,
    pub account_id: Option<String>,
    pub attempt: u32,
    /// The HTTP status answered, or `null` when none came (refused, timed out).
    pub status: Option<u16>,
    pub success: bool,
    pub error: Option<String>,
    pub duration_ms: u32,
    pub at: String,
}

/// What a request asks to change of an endpoint.
#[derive(Debug, Default)]
pub struct Change {
    pub url: Option<String>,
    pub events: Option<Vec<String>>,
    pub description: Option<String>,
    pub enabled: Option<bool>,
    /// Rotate the secret; the old one signs beside the new one for this long.
    pub rotate: Option<Duration>,
}

#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    #[error("{0}")]
    Invalid(String),
    /// The URL aims inside the server's network ([`target`]).
    #[error(
        "url must not point inside the server's network: {0} (allowed only with [webhooks] allow_internal_targets, for local development)"
    )]
    Internal(target::Blocked),
    #[error("webhook endpoint not found")]
    NotFound,
    #[error("delivery not found")]
    DeliveryNotFound,
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
}

/// Endpoint management. Cheap to clone.
#[derive(Clone)]
pub struct Webhooks {
    store: Arc<Store>,
    writer: StoreWriter,
    allow_http: bool,
    allow_internal: bool,
}

impl Webhooks {
    pub(crate) fn new(store: Arc<Store>, writer: StoreWriter, config: &WebhooksConfig) -> Self {
        Self { store, writer, allow_http: config.allow_http, allow_internal: config.allow_internal_targets }
    }

    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Store) -> Result<T, crate::store::StoreError> + Send + 'static,
    ) -> Result<T, Unavailable> {
        let store = Arc::clone(&self.store);
        let done = tokio::task::spawn_blocking(move || f(&store)).await;
        done.map_err(|_| Unavailable)?.map_err(|_| Unavailable)
    }

    async fn write(&self, ops: Vec<StoreOp>) -> Result<(), Unavailable> {
        self.writer.write(ops).await.map_err(|_| Unavailable)
    }

    /// Every endpoint, oldest first.
    pub async fn list(&self) -> Result<Vec<Endpoint>, Unavailable> {
        let all = self.blocking(|s| s.webhooks()).await?;
        let mut out = Vec::with_capacity(all.len());
        for (record, failing) in all {
            let id = record.id;
            let (_, queued) = self.blocking(move |s| s.webhook_queue(id, 0)).await?;
            out.push(view(&record, failing, queued));
        }
        out.sort_by(|a, b| a.created_at.cmp(&b.created_at).then(a.id.cmp(&b.id)));
        Ok(out)
    }

    async fn find(&self, id: [u8; 16]) -> Result<(WebhookRecordV1, Option<i64>), WebhookError> {
        let all = self.blocking(|s| s.webhooks()).await?;
        all.into_iter().find(|(r, _)| r.id == id).ok_or(WebhookError::NotFound)
    }

    pub async fn get(&self, id: [u8; 16]) -> Result<Endpoint, WebhookError> {
        let (record, failing) = self.find(id).await?;
        let (_, queued) = self.blocking(move |s| s.webhook_queue(id, 0)).await?;
        Ok(view(&record, failing, queued))
    }

    /// Registers an endpoint; answers it and its secret (shown this once).
    pub async fn create(
        &self,
        url: &str,
        events: Vec<String>,
        description: Option<String>,
        enabled: bool,
        by: UserId,
        ip: &str,
    ) -> Result<(Endpoint, String), WebhookError> {
        let url = self.check_url(url)?;
        let events = check_events(events)?;
        let description = check_description(description.unwrap_or_default())?;
        let now = Timestamp::now().as_millis();
        let key = sign::new_key();
        let record = WebhookRecordV1 {
            id: uuid::Uuid::now_v7().into_bytes(),
            url,
            events,
            description,
            enabled,
            secret: key.clone(),
            previous_secret: None,
            previous_until_ms: None,
            created_at_ms: now,
            updated_at_ms: now,
        };
        let detail = format!("{} [{}]", record.url, record.events.join(", "));
        let logged = audit::entry(action::CREATED, Some(by), Some(uuid::Uuid::from_bytes(record.id)), ip, detail);
        self.write(vec![StoreOp::PutWebhook(record.clone()), logged]).await?;
        Ok((view(&record, None, 0), sign::secret_string(&key)))
    }

    /// Changes an endpoint; answers it, and the new secret when it was rotated.
    pub async fn update(
        &self,
        id: [u8; 16],
        change: Change,
        by: UserId,
        ip: &str,
    ) -> Result<(Endpoint, Option<String>), WebhookError> {
        let (mut record, failing) = self.find(id).await?;
        let mut changed = Vec::new();
        if let Some(url) = change.url {
            record.url = self.check_url(&url)?;
            changed.push(format!("url {}", record.url));
        }
        if let Some(events) = change.events {
            record.events = check_events(events)?;
            changed.push(format!("events [{}]", record.events.join(", ")));
        }
        if let Some(description) = change.description {
            record.description = check_description(description)?;
            changed.push("description".to_owned());
        }
        if let Some(enabled) = change.enabled {
            record.enabled = enabled;
            changed.push(format!("enabled {enabled}"));
        }
        let now = Timestamp::now();
        record.updated_at_ms = now.as_millis();
        let mut ops = Vec::new();
        let target = Some(uuid::Uuid::from_bytes(id));
        let mut secret = None;
        if let Some(grace) = change.rotate {
            let key = sign::new_key();
            let old = std::mem::replace(&mut record.secret, key.clone());
            let until = now.plus(grace).as_millis();
            (record.previous_secret, record.previous_until_ms) =
                if grace.is_zero() { (None, None) } else { (Some(old), Some(until)) };
            secret = Some(sign::secret_string(&key));
            let detail = format!("the previous secret signs for {} more seconds", grace.as_secs());
            ops.push(audit::entry(action::SECRET_ROTATED, Some(by), target, ip, detail));
        }
        if !changed.is_empty() {
            ops.push(audit::entry(action::UPDATED, Some(by), target, ip, changed.join("; ")));
        }
        ops.insert(0, StoreOp::PutWebhook(record.clone()));
        self.write(ops).await?;
        let (_, queued) = self.blocking(move |s| s.webhook_queue(id, 0)).await?;
        Ok((view(&record, failing, queued), secret))
    }

    /// Removes an endpoint with its queue and its delivery log.
    pub async fn delete(&self, id: [u8; 16], by: UserId, ip: &str) -> Result<(), WebhookError> {
        let (record, _) = self.find(id).await?;
        let logged = audit::entry(action::DELETED, Some(by), Some(uuid::Uuid::from_bytes(id)), ip, record.url);
        self.write(vec![StoreOp::DeleteWebhook(id), logged]).await?;
        Ok(())
    }

    /// Queues a `webhook.test` message for the endpoint (whatever it subscribes to); answers its message id.
    pub async fn test(&self, id: [u8; 16], by: UserId, ip: &str) -> Result<String, WebhookError> {
        let (record, _) = self.find(id).await?;
        let now = Timestamp::now();
        let message_id = uuid::Uuid::now_v7();
        let payload = serde_json::json!({
            "type": "webhook.test",
            "timestamp": now.to_rfc3339(),
            "data": {"webhook_id": uuid::Uuid::from_bytes(record.id).hyphenated().to_string()},
        });
        let message = WebhookMessageRecordV1 {
            id: message_id.into_bytes(),
            endpoint: id,
            account: None,
            event: "webhook.test".into(),
            payload: payload.to_string(),
            created_at_ms: now.as_millis(),
        };
        let logged = audit::entry(action::TEST_SENT, Some(by), Some(uuid::Uuid::from_bytes(id)), ip, String::new());
        self.write(vec![StoreOp::PutWebhookMessage(message), logged]).await?;
        Ok(message_name(message_id.into_bytes()))
    }

    /// Queues the message of a logged attempt again, with its `webhook-id` (receivers that keep ids drop it as
    /// a repeat; that is the point of the id).
    pub async fn resend(&self, id: [u8; 16], delivery: [u8; 16], by: UserId, ip: &str) -> Result<String, WebhookError> {
        self.find(id).await?;
        let found = self.blocking(move |s| s.deliveries(id, None, usize::MAX)).await?;
        let attempt = found.into_iter().find(|d| d.id == delivery).ok_or(WebhookError::DeliveryNotFound)?;
        let message = WebhookMessageRecordV1 {
            id: attempt.message,
            endpoint: id,
            account: attempt.account,
            event: attempt.event.clone(),
            payload: attempt.payload,
            created_at_ms: Timestamp::now().as_millis(),
        };
        let detail = format!("{} {}", attempt.event, message_name(attempt.message));
        let logged = audit::entry(action::RESENT, Some(by), Some(uuid::Uuid::from_bytes(id)), ip, detail);
        self.write(vec![StoreOp::PutWebhookMessage(message), logged]).await?;
        Ok(message_name(attempt.message))
    }

    /// Up to `limit` attempts before `before`, newest first.
    pub async fn deliveries(
        &self,
        id: [u8; 16],
        before: Option<[u8; 16]>,
        limit: usize,
    ) -> Result<Vec<Delivery>, WebhookError> {
        self.find(id).await?;
        let found = self.blocking(move |s| s.deliveries(id, before, limit)).await?;
        Ok(found.iter().map(delivery_view).collect())
    }

    /// An endpoint's URL: https, or http to a loopback address (or anywhere with `[webhooks] allow_http`); no
    /// credentials in it (they would be shown to every administrator); not an internal address or name unless
    /// `[webhooks] allow_internal_targets` (the name's addresses are checked at each delivery: [`target`]).
    fn check_url(&self, raw: &str) -> Result<String, WebhookError> {
        let bad = |why: &str| WebhookError::Invalid(format!("url {why}"));
        if raw.len() > MAX_URL {
            return Err(bad(&format!("must be at most {MAX_URL} characters")));
        }
        let url = url::Url::parse(raw).map_err(|_| bad("must be an absolute http(s) URL"))?;
        if !url.username().is_empty() || url.password().is_some() {
            return Err(bad("must not carry a user name or password"));
        }
        if url.fragment().is_some() {
            return Err(bad("must not have a #fragment"));
        }
        let loopback = match url.host() {
            Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
            Some(url::Host::Ipv4(ip)) => IpAddr::V4(ip).is_loopback(),
            Some(url::Host::Ipv6(ip)) => IpAddr::V6(ip).is_loopback(),
            None => return Err(bad("must name a host")),
        };
        match url.scheme() {
            "https" => {}
            "http" if loopback || self.allow_http => {}
            "http" => {
                return Err(bad(
                    "must be https:// (http:// only to a loopback address, or with [webhooks] allow_http)",
                ));
            }
            _ => return Err(bad("must be an absolute http(s) URL")),
        }
        if !self.allow_internal
            && let Some(host) = url.host()
        {
            target::check_host(host).map_err(WebhookError::Internal)?;
        }
        Ok(url.to_string())
    }
}

fn check_events(events: Vec<String>) -> Result<Vec<String>, WebhookError> {
    if events.is_empty() {
        return Err(WebhookError::Invalid("events must name at least one event type".into()));
    }
    let mut out: Vec<String> = Vec::new();
    for event in events {
        if !is_event(&event) {
            let known: Vec<&str> = EVENTS.iter().map(|(n, _)| *n).collect();
            return Err(WebhookError::Invalid(format!("unknown event {event:?}; known: {}", known.join(", "))));
        }
        if !out.contains(&event) {
            out.push(event);
        }
    }
    Ok(out)
}

fn check_description(text: String) -> Result<String, WebhookError> {
    if text.chars().count() > MAX_DESCRIPTION || text.chars().any(char::is_control) {
        return Err(WebhookError::Invalid(format!(
            "description must be at most {MAX_DESCRIPTION} characters, without control characters"
        )));
    }
    Ok(text)
}

/// The log entry of attempt `number` to send `message` from `queue`: its answer (`status`, 0 without one, and what
/// went wrong), its time from `started` when a connection was made (without one the time says only how the far side
/// refused: at once, a closed port; after the time limit, a filtered one; it is not recorded). The payload is what
/// the queue holds: a webhook's body, or a logout's claims, never a token.
fn delivery_log(
    queue: [u8; 16],
    message: &WebhookMessageRecordV1,
    number: u32,
    (status, error): (u16, &str),
    started: Option<Instant>,
    now: Timestamp,
) -> DeliveryRecordV1 {
    DeliveryRecordV1 {
        id: uuid::Uuid::now_v7().into_bytes(),
        endpoint: queue,
        message: message.id,
        account: message.account,
        event: message.event.clone(),
        attempt: number,
        status,
        error: error.to_owned(),
        duration_ms: started.map_or(0, |at| u32::try_from(at.elapsed().as_millis()).unwrap_or(u32::MAX)),
        at_ms: now.as_millis(),
        payload: message.payload.clone(),
    }
}

/// The `webhook-id` of a message.
pub fn message_name(id: [u8; 16]) -> String {
    format!("msg_{}", uuid::Uuid::from_bytes(id).simple())
}

fn rfc3339(ms: i64) -> String {
    Timestamp::from_millis(ms).to_rfc3339()
}

fn view(record: &WebhookRecordV1, failing: Option<i64>, queued: u64) -> Endpoint {
    let now = Timestamp::now().as_millis();
    Endpoint {
        id: uuid::Uuid::from_bytes(record.id).hyphenated().to_string(),
        url: record.url.clone(),
        events: record.events.clone(),
        description: record.description.clone(),
        enabled: record.enabled,
        failing: failing.is_some(),
        failing_since: failing.map(rfc3339),
        previous_secret_expires_at: record.previous_until_ms.filter(|until| *until > now).map(rfc3339),
        queued,
        created_at: rfc3339(record.created_at_ms),
        updated_at: rfc3339(record.updated_at_ms),
    }
}

fn delivery_view(d: &DeliveryRecordV1) -> Delivery {
    Delivery {
        id: uuid::Uuid::from_bytes(d.id).hyphenated().to_string(),
        message_id: message_name(d.message),
        event: d.event.clone(),
        account_id: d.account.map(|a| uuid::Uuid::from_bytes(a).hyphenated().to_string()),
        attempt: d.attempt,
        status: (d.status != 0).then_some(d.status),
        success: (200..300).contains(&d.status),
        error: (!d.error.is_empty()).then(|| d.error.clone()),
        duration_ms: d.duration_ms,
        at: rfc3339(d.at_ms),
    }
}
