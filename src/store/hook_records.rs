//! Persisted formats of the webhooks: the endpoints administrators register, the messages waiting for each, and
//! the delivery log. Framed like every record ([`super::codec`]); the golden-bytes tests below pin them.

use serde::{Deserialize, Serialize};

use super::codec::Versioned;

/// A webhook endpoint. Key: its UUID.
///
/// The signing key is stored as it is, not hashed: the server must compute an HMAC with it for every message
/// (SECURITY.md says so). It leaves the server only once, in the answer that created or rotated it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WebhookRecordV1 {
    pub id: [u8; 16],
    pub url: String,
    /// The event types subscribed to (each one of [`super::hooks::EVENTS`]).
    pub events: Vec<String>,
    pub description: String,
    /// A disabled endpoint is queued nothing and sent nothing.
    pub enabled: bool,
    /// The signing key (24 random bytes).
    pub secret: Vec<u8>,
    /// During a rotation's grace period: the previous key, which signs beside the new one until `previous_until_ms`.
    pub previous_secret: Option<Vec<u8>>,
    pub previous_until_ms: Option<i64>,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
}

/// A message waiting for delivery to one endpoint. Key: the endpoint, then its place in the endpoint's queue
/// (commit order). Deleted once the endpoint has answered 2xx.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WebhookMessageRecordV1 {
    /// The `webhook-id` (`msg_` and this UUID v7): the same on every attempt, so receivers can drop repeats.
    pub id: [u8; 16],
    pub endpoint: [u8; 16],
    /// The account the event is about: messages about one account are delivered one after the other, in order.
    pub account: Option<[u8; 16]>,
    pub event: String,
    /// The JSON body, exactly as signed and sent.
    pub payload: String,
    pub created_at_ms: i64,
}

/// One delivery attempt, for the delivery log. Key: the endpoint, then this id (UUID v7: time order).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeliveryRecordV1 {
    pub id: [u8; 16],
    pub endpoint: [u8; 16],
    /// The message's `webhook-id` UUID.
    pub message: [u8; 16],
    pub account: Option<[u8; 16]>,
    pub event: String,
    /// 1 for the first attempt.
    pub attempt: u32,
    /// The HTTP status answered; 0 when none came (refused, timed out).
    pub status: u16,
    /// Why the attempt failed, when it did: never the body or a header value.
    pub error: String,
    pub duration_ms: u32,
    pub at_ms: i64,
    /// The body sent, so that an administrator can send it again.
    pub payload: String,
}

impl Versioned for WebhookRecordV1 {
    const VERSION: u8 = 1;
    const KIND: &'static str = "webhook";
}

impl Versioned for WebhookMessageRecordV1 {
    const VERSION: u8 = 1;
    const KIND: &'static str = "webhook message";
}

impl Versioned for DeliveryRecordV1 {
    const VERSION: u8 = 1;
    const KIND: &'static str = "webhook delivery";
}

#[cfg(test)]
mod tests {
    //! Golden bytes: do not update them; add a `…V2` record with a new version byte instead.
    use super::*;
    use crate::store::codec::{decode, encode};

    #[test]
    fn webhook_golden_bytes() {
        let hook = WebhookRecordV1 {
            id: [1; 16],
            url: "https://a".into(),
            events: vec!["user.banned".into()],
            description: "d".into(),
            enabled: true,
            secret: vec![7, 8],
            previous_secret: Some(vec![9]),
            previous_until_ms: Some(64),
            created_at_ms: 1,
            updated_at_ms: 2,
        };
        let mut expected = vec![1];
        expected.extend([1; 16]);
        expected.push(9);
        expected.extend(b"https://a");
        expected.extend([1, 11]);
        expected.extend(b"user.banned");
        expected.extend([1, b'd', 1, 2, 7, 8, 1, 1, 9, 1, 0x80, 0x01, 2, 4]);
        assert_eq!(encode(&hook), expected);
        assert_eq!(decode::<WebhookRecordV1>(&expected).unwrap(), hook);
    }

    #[test]
    fn webhook_message_golden_bytes() {
        let message = WebhookMessageRecordV1 {
            id: [2; 16],
            endpoint: [3; 16],
            account: Some([4; 16]),
            event: "e".into(),
            payload: "{}".into(),
            created_at_ms: -1,
        };
        let mut expected = vec![1];
        expected.extend([2; 16]);
        expected.extend([3; 16]);
        expected.push(1);
        expected.extend([4; 16]);
        expected.extend([1, b'e', 2, b'{', b'}', 1]);
        assert_eq!(encode(&message), expected);
        assert_eq!(decode::<WebhookMessageRecordV1>(&expected).unwrap(), message);
    }

    #[test]
    fn delivery_golden_bytes() {
        let delivery = DeliveryRecordV1 {
            id: [5; 16],
            endpoint: [6; 16],
            message: [7; 16],
            account: None,
            event: "e".into(),
            attempt: 1,
            status: 503,
            error: "x".into(),
            duration_ms: 3,
            at_ms: 4,
            payload: "{}".into(),
        };
        let mut expected = vec![1];
        expected.extend([5; 16]);
        expected.extend([6; 16]);
        expected.extend([7; 16]);
        expected.extend([0, 1, b'e', 1, 0xf7, 0x03, 1, b'x', 3, 8, 2, b'{', b'}']);
        assert_eq!(encode(&delivery), expected);
        assert_eq!(decode::<DeliveryRecordV1>(&expected).unwrap(), delivery);
    }
}
