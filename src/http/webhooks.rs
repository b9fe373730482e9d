//! `/api/admin/webhooks`: webhook endpoints, their delivery log, a test message and resending, for administrators.
//! A secret is in the answer that created or rotated it, and nowhere else.

use std::time::Duration;

use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use serde_json::Value;

use super::AppState;
use super::dto::{
    MessageQueued, OneWebhook, SUCCESS, Webhook, WebhookAndSecret, WebhookDeliveries, WebhookDelivery, WebhookList,
};
use super::extract::{self, Ctx, Fields, Refusal};
use super::response::{Body, Failure, json as answer, ok};
use crate::accounts::WebhookChange;

const MAX_GRACE_SECS: u64 = 7 * 86_400;
const DEFAULT_GRACE_SECS: u64 = 86_400;
const DEFAULT_LOG_PAGE: usize = 50;
const MAX_LOG_PAGE: usize = 500;

/// The `{id}` segment of `/api/admin/webhooks/{id}[/…]`.
fn endpoint_id(req: &Request<Incoming>) -> Result<[u8; 16], Failure> {
    let id = req.uri().path().trim_start_matches("/api/admin/webhooks/").split('/').next().unwrap_or_default();
    uuid::Uuid::parse_str(id)
        .ok()
        .filter(|_| id.len() == 36)
        .map(uuid::Uuid::into_bytes)
        .ok_or_else(|| Failure::validation("the webhook id in the path must be a UUID"))
}

fn events(body: &Fields, required: bool) -> Result<Option<Vec<String>>, Failure> {
    match body.get("events") {
        None | Some(Value::Null) if !required => Ok(None),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| v.as_str().map(str::to_owned))
            .collect::<Option<Vec<_>>>()
            .map(Some)
            .ok_or_else(|| Failure::validation("events must be an array of event type names")),
        _ => Err(Failure::validation("events must be an array of event type names")),
    }
}

/// `GET /api/admin/webhooks` → `{webhooks, events}` (the event types one may subscribe to).
pub async fn list(state: &AppState, _: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    extract::administrator(state, req.headers(), Refusal::Plain).await?;
    extract::query_only(req.uri().query(), &[])?;
    let webhooks = state.accounts.webhooks().await?;
    let webhooks = webhooks.iter().map(Webhook::from).collect();
    Ok(ok(&WebhookList { events: state.accounts.webhook_events(), webhooks }))
}

/// `POST /api/admin/webhooks` `{url, events, description?, enabled?}` → 201 `{webhook, secret}`.
pub async fn create(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let admin = extract::administrator(state, req.headers(), Refusal::Plain).await?;
    let body = extract::json_object(req, true, state.body_timeout()).await?;
    body.only(&["url", "events", "description", "enabled"])?;
    let url = body.string("url")?.to_owned();
    let events = events(&body, true)?.unwrap_or_default();
    let description = body.optional_string("description")?.map(str::to_owned);
    let enabled = body.optional_bool("enabled")?.unwrap_or(true);
    let ip = ctx.ip.to_string();
    let (webhook, secret) = state.accounts.create_webhook(&url, events, description, enabled, admin.id, &ip).await?;
    Ok(answer(StatusCode::CREATED, &WebhookAndSecret { secret: Some(&secret), webhook: Webhook::from(&webhook) }))
}

/// `GET /api/admin/webhooks/{id}` → `{webhook}`.
pub async fn get(state: &AppState, _: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    extract::administrator(state, req.headers(), Refusal::Plain).await?;
    extract::query_only(req.uri().query(), &[])?;
    let webhook = state.accounts.webhook(endpoint_id(&req)?).await?;
    Ok(ok(&OneWebhook { webhook: Webhook::from(&webhook) }))
}

/// `PATCH /api/admin/webhooks/{id}` `{url?, events?, description?, enabled?, rotate_secret?, grace_secs?}` →
/// `{webhook, secret}` (`secret` only when rotated, else `null`).
pub async fn update(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let admin = extract::administrator(state, req.headers(), Refusal::Plain).await?;
    let id = endpoint_id(&req)?;
    let body = extract::json_object(req, true, state.body_timeout()).await?;
    body.only(&["url", "events", "description", "enabled", "rotate_secret", "grace_secs"])?;
    let rotate = body.optional_bool("rotate_secret")?.unwrap_or(false);
    let grace = body.optional_u64("grace_secs")?;
    if grace.is_some() && !rotate {
        return Err(Failure::validation("grace_secs goes with rotate_secret: true"));
    }
    let grace = grace.unwrap_or(DEFAULT_GRACE_SECS);
    if grace > MAX_GRACE_SECS {
        return Err(Failure::validation(format!("grace_secs must be 0 to {MAX_GRACE_SECS}")));
    }
    let change = WebhookChange {
        url: body.optional_string("url")?.map(str::to_owned),
        events: events(&body, false)?,
        description: body.optional_string("description")?.map(str::to_owned),
        enabled: body.optional_bool("enabled")?,
        rotate: rotate.then(|| Duration::from_secs(grace)),
    };
    if change.url.is_none()
        && change.events.is_none()
        && change.description.is_none()
        && change.enabled.is_none()
        && change.rotate.is_none()
    {
        return Err(Failure::validation("nothing to change: give url, events, description, enabled or rotate_secret"));
    }
    let ip = ctx.ip.to_string();
    let (webhook, secret) = state.accounts.update_webhook(id, change, admin.id, &ip).await?;
    Ok(ok(&WebhookAndSecret { secret: secret.as_deref(), webhook: Webhook::from(&webhook) }))
}

/// `DELETE /api/admin/webhooks/{id}` → `{success: true}`: the endpoint, its queue and its delivery log.
pub async fn delete(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let admin = extract::administrator(state, req.headers(), Refusal::Plain).await?;
    let id = endpoint_id(&req)?;
    extract::query_only(req.uri().query(), &[])?;
    state.accounts.delete_webhook(id, admin.id, &ctx.ip.to_string()).await?;
    Ok(ok(&SUCCESS))
}

/// `POST /api/admin/webhooks/{id}/test` → 202 `{message_id}`: a `webhook.test` message is queued.
pub async fn test(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let admin = extract::administrator(state, req.headers(), Refusal::Plain).await?;
    let id = endpoint_id(&req)?;
    extract::discard_body(req, state.body_timeout()).await;
    let message_id = state.accounts.test_webhook(id, admin.id, &ctx.ip.to_string()).await?;
    Ok(answer(StatusCode::ACCEPTED, &MessageQueued { message_id: &message_id }))
}

/// `POST /api/admin/webhooks/{id}/resend` `{delivery_id}` → 202 `{message_id}`: that attempt's message is queued
/// again, with its `webhook-id`.
pub async fn resend(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let admin = extract::administrator(state, req.headers(), Refusal::Plain).await?;
    let id = endpoint_id(&req)?;
    let body = extract::json_object(req, true, state.body_timeout()).await?;
    body.only(&["delivery_id"])?;
    let delivery = uuid::Uuid::parse_str(body.string("delivery_id")?)
        .map_err(|_| Failure::validation("delivery_id must be a delivery's id"))?;
    let message_id = state.accounts.resend_webhook(id, delivery.into_bytes(), admin.id, &ctx.ip.to_string()).await?;
    Ok(answer(StatusCode::ACCEPTED, &MessageQueued { message_id: &message_id }))
}

/// `GET /api/admin/webhooks/{id}/deliveries[?limit=&cursor=]` → `{deliveries, next_cursor}`, newest first.
pub async fn deliveries(state: &AppState, _: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    extract::administrator(state, req.headers(), Refusal::Plain).await?;
    let id = endpoint_id(&req)?;
    let query = req.uri().query();
    extract::query_only(query, &["limit", "cursor"])?;
    let limit = match extract::query_param(query, "limit") {
        None => DEFAULT_LOG_PAGE,
        Some(v) => v
            .parse()
            .ok()
            .filter(|n| (1..=MAX_LOG_PAGE).contains(n))
            .ok_or_else(|| Failure::validation(format!("limit must be a whole number from 1 to {MAX_LOG_PAGE}")))?,
    };
    let before = match extract::query_param(query, "cursor") {
        None => None,
        Some(c) => Some(
            uuid::Uuid::parse_str(c).map_err(|_| Failure::validation("cursor must be a delivery id"))?.into_bytes(),
        ),
    };
    let deliveries = state.accounts.webhook_deliveries(id, before, limit).await?;
    let next_cursor = (deliveries.len() == limit).then(|| deliveries.last().map(|d| d.id.as_str())).flatten();
    Ok(ok(&WebhookDeliveries { deliveries: deliveries.iter().map(WebhookDelivery::from).collect(), next_cursor }))
}
