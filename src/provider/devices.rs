//! Device authorization requests (RFC 8628): a command-line tool or a TV asks for a device code and a user code,
//! shows the user code, and polls the token endpoint while its user approves or denies the request on the
//! `/device` page, signed in on another device.
//!
//! A request is a store record ([`OAuthDeviceRecordV1`]) read by the node that needs it, as an authorization code
//! is ([`super::grants`]): started on one node, it is approved on another and polled on any. Neither code is
//! stored, only their SHA-256. What changes a request changes the stored one as it is at the commit (a poll's time
//! and interval, the decision, the redemption), guarded across nodes, so a poll never undoes a decision and a
//! request is decided once and redeemed once. On one node a claim in memory ([`Grants::taking`]) keeps two requests
//! of this node from working on one device request at once.

use std::time::Duration;

use sha2::{Digest, Sha256};

use super::grants::{Claim, GrantError, Grants, random_token, sha256};
use crate::domain::Timestamp;
use crate::store::{DeviceDecisionV1, OAuthDeviceRecordV1, StoreError, StoreOp};

/// How long a request waits for its user (the plugin's `expiresIn` default).
pub const DEVICE_LIFETIME: Duration = Duration::from_secs(30 * 60);
/// The interval a device must keep between polls at first (the plugin's `interval` default, RFC 8628 §3.2's).
pub const POLL_INTERVAL_SECS: u32 = 5;
/// What a `slow_down` adds to the interval (RFC 8628 §3.5).
pub const SLOW_DOWN_SECS: u32 = 5;
/// The longest interval a device is held to: a device that keeps polling too fast is refused, not starved.
const MAX_INTERVAL_SECS: u32 = 60;

/// The user code's alphabet (the plugin's): capitals and digits without `0 O 1 I`, which people misread; 32
/// characters, so a random byte's low five bits pick one without bias.
const ALPHABET: &[u8; 32] = b"ABCDEFGHJKLMNPQRSTUVWXYZ23456789";
const USER_CODE_LEN: usize = 8;

/// A user code: 8 characters of [`ALPHABET`], shown as `XXXX-XXXX`. Typed by a person, so what they type is read
/// leniently (lower case, spaces and dashes anywhere), then must be exactly that.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserCode(String);

impl UserCode {
    /// What a person typed, or `None` if it cannot be a user code.
    pub fn parse(typed: &str) -> Option<Self> {
        if typed.len() > 64 {
            return None;
        }
        let code: String =
            typed.chars().filter(|c| !matches!(c, '-' | ' ' | '\t')).map(|c| c.to_ascii_uppercase()).collect();
        (code.len() == USER_CODE_LEN && code.bytes().all(|b| ALPHABET.contains(&b))).then_some(Self(code))
    }

    fn generate() -> Self {
        let mut bytes = [0u8; USER_CODE_LEN];
        getrandom::fill(&mut bytes).expect("the operating system's random source failed");
        Self(bytes.iter().map(|b| char::from(ALPHABET[usize::from(b & 31)])).collect())
    }

    /// As shown to people: `XXXX-XXXX`.
    pub fn shown(&self) -> String {
        format!("{}-{}", &self.0[..4], &self.0[4..])
    }

    /// What the store keeps of it. 40 bits do not resist a search of the hashes by whoever reads the store, which
    /// would learn codes that live half an hour and each name one pending request; the hash keeps the codes out
    /// of backups and logs of the database, as the device codes' (256 bits) are.
    fn hash(&self) -> [u8; 32] {
        let mut hasher = Sha256::new();
        hasher.update(b"service-auth device user code\0");
        hasher.update(self.0.as_bytes());
        hasher.finalize().into()
    }
}

/// A request just started: the codes the device shows and keeps (each given out this once).
#[derive(Debug)]
pub struct DeviceStarted {
    pub device_code: String,
    pub user_code: UserCode,
    pub record: OAuthDeviceRecordV1,
}

/// What a poll of the token endpoint found.
#[derive(Debug)]
pub enum DevicePoll {
    /// Not a device code of ours, redeemed already, or pruned.
    Unknown,
    /// Another client's device code: refused, and nothing about the request changes.
    OtherClient,
    Expired,
    /// Still waiting for its user.
    Pending,
    /// Polled before the interval passed: the interval is now this many seconds.
    SlowDown,
    /// Denied: the request is gone with this answer.
    Denied,
    /// Approved, and now redeemed (gone): the request as it was.
    Approved(OAuthDeviceRecordV1),
}

impl Grants {
    /// Starts a request of `client_id` for `scopes`, durably.
    pub async fn start_device(
        &self,
        client_id: &str,
        scopes: Vec<String>,
        now: Timestamp,
    ) -> Result<DeviceStarted, GrantError> {
        // A user code names one request: a new one is drawn if it is taken (one chance in 2^40 per pending one).
        let mut user_code = UserCode::generate();
        for _ in 0..3 {
            let hash = user_code.hash();
            if self.read(move |s| s.oauth_device_by_user_code(&hash)).await?.is_none() {
                break;
            }
            user_code = UserCode::generate();
        }
        let device_code = random_token();
        let record = OAuthDeviceRecordV1 {
            client_id: client_id.to_owned(),
            user_code_hash: user_code.hash(),
            scopes,
            decision: DeviceDecisionV1::Pending,
            polled_at_ms: None,
            interval_secs: POLL_INTERVAL_SECS,
            created_at_ms: now.as_millis(),
            expires_at_ms: now.plus(DEVICE_LIFETIME).as_millis(),
        };
        self.writer.write(vec![StoreOp::PutOAuthDevice(sha256(&device_code), record.clone())]).await?;
        Ok(DeviceStarted { device_code, user_code, record })
    }

    /// The pending, unexpired request `user_code` names, with its device code's hash. A request decided already,
    /// or expired, is as none: the page says the same of every code it cannot use.
    pub async fn pending_device(
        &self,
        user_code: &UserCode,
        now: Timestamp,
    ) -> Result<Option<([u8; 32], OAuthDeviceRecordV1)>, GrantError> {
        let hash = user_code.hash();
        let found = self.read(move |s| s.oauth_device_by_user_code(&hash)).await?;
        Ok(found.filter(|(_, r)| r.decision == DeviceDecisionV1::Pending && r.expires_at_ms >= now.as_millis()))
    }

    /// Records the user's decision on the pending request `hash` (whose user code's hash is `user_code_hash`), with
    /// `ops` (the consent and its audit entry) in the same commit. `false` when it is no longer pending (decided or
    /// redeemed meanwhile, here or on another node): nothing is written then.
    pub async fn decide_device(
        &self,
        (hash, user_code_hash): ([u8; 32], [u8; 32]),
        decision: DeviceDecisionV1,
        mut ops: Vec<StoreOp>,
        now: Timestamp,
    ) -> Result<bool, GrantError> {
        // Two answers to one request exclude each other by a claim on the user code's hash, not on the device
        // code's, which the device's polls hold: an answer given while a poll is in flight must not be turned
        // away as an invalid code. A poll and an answer need no exclusion: each changes only its own fields of
        // the stored request as it is at the commit (PollOAuthDevice the poll's time and interval), and a poll
        // redeems only a request it read decided, after the answer's commit.
        let Some(_claim) = self.claim(user_code_hash) else { return Ok(false) };
        let found = self.read(move |s| s.oauth_device(&hash)).await?;
        if !found.is_some_and(|r| r.decision == DeviceDecisionV1::Pending && r.expires_at_ms >= now.as_millis()) {
            return Ok(false);
        }
        ops.insert(0, StoreOp::DecideOAuthDevice { hash, decision });
        match self.writer.write(ops).await {
            Ok(()) => Ok(true),
            Err(StoreError::Conflict(_)) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// A poll of the token endpoint by `client_id` with `device_code` at `now` (RFC 8628 §3.4, §3.5).
    pub async fn poll_device(
        &self,
        device_code: &str,
        client_id: &str,
        now: Timestamp,
    ) -> Result<DevicePoll, GrantError> {
        let hash = sha256(device_code);
        // Two polls of one device code at once: the second came before the interval passed.
        let Some(_claim) = self.claim(hash) else { return Ok(DevicePoll::SlowDown) };
        let Some(record) = self.read(move |s| s.oauth_device(&hash)).await? else { return Ok(DevicePoll::Unknown) };
        if record.client_id != client_id {
            return Ok(DevicePoll::OtherClient);
        }
        let now_ms = now.as_millis();
        if record.expires_at_ms < now_ms {
            return Ok(DevicePoll::Expired);
        }
        let too_soon = record.polled_at_ms.is_some_and(|at| now_ms - at < i64::from(record.interval_secs) * 1000);
        if too_soon {
            let interval_secs = (record.interval_secs + SLOW_DOWN_SECS).min(MAX_INTERVAL_SECS);
            self.writer.write(vec![StoreOp::PollOAuthDevice { hash, at_ms: now_ms, interval_secs }]).await?;
            return Ok(DevicePoll::SlowDown);
        }
        match record.decision {
            DeviceDecisionV1::Pending => {
                let poll = StoreOp::PollOAuthDevice { hash, at_ms: now_ms, interval_secs: record.interval_secs };
                self.writer.write(vec![poll]).await?;
                Ok(DevicePoll::Pending)
            }
            DeviceDecisionV1::Denied | DeviceDecisionV1::Approved { .. } => {
                match self.writer.write(vec![StoreOp::TakeOAuthDevice(hash)]).await {
                    Ok(()) => {}
                    // Redeemed on another node a moment ago.
                    Err(StoreError::Conflict(_)) => return Ok(DevicePoll::Unknown),
                    Err(e) => return Err(e.into()),
                }
                Ok(if record.decision == DeviceDecisionV1::Denied {
                    DevicePoll::Denied
                } else {
                    DevicePoll::Approved(record)
                })
            }
        }
    }

    fn claim(&self, hash: [u8; 32]) -> Option<Claim<'_>> {
        let fresh = self.taking.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(hash);
        fresh.then_some(Claim { grants: self, hash })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_codes_are_eight_unambiguous_characters_read_leniently() {
        for _ in 0..100 {
            let code = UserCode::generate();
            let shown = code.shown();
            assert_eq!(shown.len(), 9);
            assert_eq!(&shown[4..5], "-");
            assert!(!shown.contains(['0', 'O', '1', 'I']), "{shown}");
            assert_eq!(UserCode::parse(&shown), Some(code.clone()));
            assert_eq!(UserCode::parse(&shown.to_lowercase()), Some(code));
        }
        assert_eq!(UserCode::parse("wdjb mjht").map(|c| c.shown()).as_deref(), Some("WDJB-MJHT"));
        for bad in ["", "WDJB-MJH", "WDJB-MJHTX", "WDJB-MJH0", "WDJB-MJHI", "WDJB_MJHT", "ŴDJB-MJHT"] {
            assert_eq!(UserCode::parse(bad), None, "{bad}");
        }
        assert_ne!(UserCode::parse("WDJBMJHT").unwrap().hash(), UserCode::parse("WDJBMJHK").unwrap().hash());
    }
}
