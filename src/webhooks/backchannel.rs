//! Back-channel logout (OpenID Connect Back-Channel Logout 1.0): the identity provider's logout tokens, queued by
//! the store in the commit that ends a session ([`crate::store::hooks::logouts`]) and sent by the webhooks'
//! deliverer, with its retries, its checks of the target and its one sending node per queue.
//!
//! A message is signed when it is sent, not when it is queued: the keys live above this module (it is given a
//! [`LogoutSigner`]), and a token signed at the attempt carries the attempt's `iat` and `exp` and the key in force.

use std::time::{Duration, Instant};

use super::target::{self, Blocked, describe};
use crate::domain::Timestamp;
use crate::store::hooks::{BACKCHANNEL_QUEUE, Logout};
use crate::store::{StoreOp, StoreWriter, WebhookMessageRecordV1};

/// How long a logout is tried before it is given up: a relying party that has been away a day has let its own
/// sessions expire, or will meet the user signed out at the provider when it next asks.
pub const GIVE_UP_AFTER: Duration = Duration::from_secs(86_400);

/// Signs a logout token (the identity provider's keys, given by the runtime).
pub trait LogoutSigner: Send + Sync {
    /// The compact JWS of `logout`'s token with `jti`, or `None` when it cannot be signed now (no key of the
    /// client's algorithm signs yet, the issuer is not known yet): the message then waits for the next attempt.
    fn sign(&self, logout: &Logout, jti: &str) -> Option<String>;
}

/// One attempt at one logout.
pub(super) struct LogoutAttempt {
    pub seq: u64,
    pub message: WebhookMessageRecordV1,
    pub number: u32,
    pub client: reqwest::Client,
    pub allow_internal: bool,
    pub writer: StoreWriter,
    pub signer: std::sync::Arc<dyn LogoutSigner>,
}

impl LogoutAttempt {
    /// Whether the message left the queue (delivered, or given up).
    pub async fn run(self) -> bool {
        let started = Instant::now();
        let now = Timestamp::now();
        let logout: Option<Logout> = serde_json::from_str(&self.message.payload).ok();
        let expired = now.as_millis() - self.message.created_at_ms >= GIVE_UP_AFTER.as_millis() as i64;
        let (status, error, connected) = match &logout {
            // A message this release cannot read (written by a newer one) is left for the nodes that can.
            None => return false,
            Some(_) if expired => (0, "given up".to_owned(), false),
            Some(logout) => self.send(logout).await,
        };
        let delivered = (200..300).contains(&status);
        // What the token said and where it went, never the token.
        let log = super::delivery_log(
            BACKCHANNEL_QUEUE,
            &self.message,
            self.number,
            (status, &error),
            connected.then_some(started),
            now,
        );
        let mut ops = vec![StoreOp::PutDelivery(log)];
        let done = delivered || expired;
        if done {
            ops.push(StoreOp::DeleteWebhookMessage { endpoint: BACKCHANNEL_QUEUE, seq: self.seq });
        }
        if !delivered {
            let client = logout.as_ref().map_or("", |l| l.client_id.as_str());
            let message = uuid::Uuid::from_bytes(self.message.id);
            if expired {
                tracing::warn!(client, %message, attempt = self.number, "back-channel logout given up after a day");
            } else {
                tracing::warn!(client, %message, attempt = self.number, %error, "back-channel logout not delivered; will retry");
            }
        }
        done && self.writer.write(ops).await.is_ok()
    }

    /// POSTs the token (§2.5: `application/x-www-form-urlencoded`, `logout_token`); answers the status (0: none),
    /// what went wrong, and whether a connection was made.
    async fn send(&self, logout: &Logout) -> (u16, String, bool) {
        if let Err(Blocked(_)) = self.vet(&logout.uri) {
            return (0, "blocked".to_owned(), false);
        }
        let jti = uuid::Uuid::from_bytes(self.message.id).simple().to_string();
        let Some(token) = self.signer.sign(logout, &jti) else {
            return (0, "not signed yet".to_owned(), false);
        };
        let body = url::form_urlencoded::Serializer::new(String::new()).append_pair("logout_token", &token).finish();
        let sent = self
            .client
            .post(&logout.uri)
            .header("content-type", "application/x-www-form-urlencoded")
            .header("cache-control", "no-store")
            .body(body)
            .send()
            .await;
        match sent {
            Ok(answer) => {
                let status = answer.status();
                let error = if status.is_success() { String::new() } else { format!("answered {status}") };
                (status.as_u16(), error, true)
            }
            Err(e) => {
                let error = describe(&e);
                let connected = error != "connect" && error != "blocked";
                (0, error, connected)
            }
        }
    }

    /// The URI's host checked at each attempt, as a webhook's ([`target`]).
    fn vet(&self, uri: &str) -> Result<(), Blocked> {
        if self.allow_internal {
            return Ok(());
        }
        let url = url::Url::parse(uri).map_err(|_| Blocked("not a URL".into()))?;
        url.host().map_or(Ok(()), target::check_host)
    }
}
