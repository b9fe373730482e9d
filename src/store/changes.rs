//! The change log's entries (PostgreSQL backend): what one commit changed, for the other nodes to apply to their
//! indexes. Records travel in the store's own framing ([`codec`]), so a record format change is handled once.
//!
//! Audit entries and the outbox are left out: no node holds them in memory (the audit log is read from the
//! database, and each node sends the mail it queued itself).

use serde::{Deserialize, Serialize};

use super::codec;
use super::{Held, StoreError, StoreOp, TokenHash};

/// Format of an entry: a version byte, then postcard of `Vec<Wire>`. Version 2 added
/// [`Wire::DeleteSessionsOf`] at the end, version 3 the memberships, invitations and linked accounts after it, so
/// older entries read the same; version 4 the API keys after those; version 5 the identity provider's grants;
/// version 6 the uses of API keys' quotas.
pub(crate) const VERSION: u8 = 6;

/// The format of an entry with a grant but no use of a key's quota (the previous release's newest).
pub(crate) const VERSION_WITHOUT_KEY_USES: u8 = 5;

/// The format of an entry with an API key but no grant (the previous release's newest).
pub(crate) const VERSION_WITHOUT_GRANTS: u8 = 4;

/// The format of an entry that carries no API key: the previous release reads it, so a cluster being upgraded one
/// node at a time goes on while no key is made or changed (docs/cluster.md, "Rolling upgrades").
pub(crate) const VERSION_WITHOUT_API_KEYS: u8 = 3;

#[derive(Serialize, Deserialize)]
enum Wire {
    PutUser(Vec<u8>),
    DeleteUser([u8; 16]),
    PutOrg(Vec<u8>),
    DeleteOrg([u8; 16]),
    PutSession(TokenHash, Vec<u8>),
    DeleteSession([u8; 16], TokenHash),
    PutToken(TokenHash, Vec<u8>),
    DeleteToken(TokenHash),
    DeleteSessionsOf([u8; 16], Option<TokenHash>),
    PutMember(Vec<u8>),
    DeleteMember([u8; 16], [u8; 16]),
    PutInvitation(Vec<u8>),
    DeleteInvitation([u8; 16]),
    PutAccount(Vec<u8>),
    DeleteAccount([u8; 16], [u8; 16]),
    PutApiKey(Vec<u8>),
    DeleteApiKey([u8; 16], [u8; 16]),
    PutOAuthGrant(Vec<u8>),
    DeleteOAuthGrant([u8; 16]),
    UseApiKey([u8; 16], [u8; 16], i64),
}

/// The entry for `ops`, or `None` when nothing in them is held in another node's memory.
pub fn encode<'a>(ops: impl IntoIterator<Item = &'a StoreOp>) -> Option<Vec<u8>> {
    let wire: Vec<Wire> = ops
        .into_iter()
        .filter_map(StoreOp::held)
        .map(|held| match held {
            Held::PutUser(r) => Wire::PutUser(codec::encode(r)),
            Held::DeleteUser(id) => Wire::DeleteUser(id),
            Held::PutOrg(r) => Wire::PutOrg(codec::encode_org(r)),
            Held::DeleteOrg(id) => Wire::DeleteOrg(id),
            Held::PutSession(hash, r) => Wire::PutSession(hash, codec::encode(r)),
            Held::DeleteSession(user, hash) => Wire::DeleteSession(user, hash),
            Held::DeleteSessionsOf { user, except } => Wire::DeleteSessionsOf(user, except),
            Held::PutToken(hash, r) => Wire::PutToken(hash, codec::encode_token(r)),
            Held::DeleteToken(hash) => Wire::DeleteToken(hash),
            Held::PutMember(r) => Wire::PutMember(codec::encode(r)),
            Held::DeleteMember(org, user) => Wire::DeleteMember(org, user),
            Held::PutInvitation(r) => Wire::PutInvitation(codec::encode(r)),
            Held::DeleteInvitation(id) => Wire::DeleteInvitation(id),
            Held::PutAccount(r) => Wire::PutAccount(codec::encode(r)),
            Held::DeleteAccount { id, user } => Wire::DeleteAccount(id, user),
            Held::PutApiKey(r) => Wire::PutApiKey(codec::encode(r)),
            Held::DeleteApiKey { id, user } => Wire::DeleteApiKey(id, user),
            Held::PutOAuthGrant(r) => Wire::PutOAuthGrant(codec::encode(r)),
            Held::DeleteOAuthGrant(id) => Wire::DeleteOAuthGrant(id),
            Held::UseApiKey { id, user, at_ms } => Wire::UseApiKey(id, user, at_ms),
        })
        .collect();
    if wire.is_empty() {
        return None;
    }
    // Each entry in the oldest format that holds it, so a cluster mid-upgrade goes on until the new thing is used.
    let uses = wire.iter().any(|w| matches!(w, Wire::UseApiKey(..)));
    let grants = wire.iter().any(|w| matches!(w, Wire::PutOAuthGrant(_) | Wire::DeleteOAuthGrant(_)));
    let keys = wire.iter().any(|w| matches!(w, Wire::PutApiKey(_) | Wire::DeleteApiKey(..)));
    let version = if uses {
        VERSION
    } else if grants {
        VERSION_WITHOUT_KEY_USES
    } else if keys {
        VERSION_WITHOUT_GRANTS
    } else {
        VERSION_WITHOUT_API_KEYS
    };
    let mut bytes = vec![version];
    // postcard cannot fail to serialise plain enums into a growable buffer.
    bytes.extend(postcard::to_stdvec(&wire).unwrap_or_default());
    Some(bytes)
}

/// The changes of one entry.
pub fn decode(bytes: &[u8]) -> Result<Vec<StoreOp>, StoreError> {
    let body = match bytes.split_first() {
        Some((&(1..=VERSION), body)) => body,
        Some((v, _)) => {
            return Err(StoreError::Corrupt(format!(
                "change log entry has format {v}; this version of service-auth reads {VERSION} (a newer node wrote it?)"
            )));
        }
        None => return Err(StoreError::Corrupt("empty change log entry".into())),
    };
    let wire: Vec<Wire> = postcard::from_bytes(body)
        .map_err(|e| StoreError::Corrupt(format!("change log entry does not decode: {e}")))?;
    wire.into_iter()
        .map(|w| {
            Ok(match w {
                Wire::PutUser(b) => StoreOp::PutUser(codec::decode_user(&b)?),
                Wire::DeleteUser(id) => StoreOp::DeleteUser(id),
                Wire::PutOrg(b) => StoreOp::PutOrg(codec::decode_org(&b)?),
                Wire::DeleteOrg(id) => StoreOp::DeleteOrg(id),
                // A token or session a newer release wrote in a format this one does not read: this node's copy
                // (if any) is dropped, the record stays for the newer nodes (codec's rolling-upgrade rule).
                Wire::PutSession(hash, b) => match codec::read_session(&b)? {
                    Some(record) => StoreOp::PutSession(hash, record),
                    None => StoreOp::DeleteSession(codec::session_user(&b)?, hash),
                },
                Wire::DeleteSession(user, hash) => StoreOp::DeleteSession(user, hash),
                Wire::PutToken(hash, b) => match codec::read_token(&b)? {
                    Some(record) => StoreOp::PutToken(hash, record),
                    None => StoreOp::DeleteToken(hash),
                },
                Wire::DeleteToken(hash) => StoreOp::DeleteToken(hash),
                Wire::DeleteSessionsOf(user, except) => StoreOp::DeleteSessionsOf { user, except },
                Wire::PutMember(b) => StoreOp::PutMember(codec::decode_member(&b)?),
                Wire::DeleteMember(org, user) => StoreOp::DeleteMember(org, user),
                Wire::PutInvitation(b) => StoreOp::PutInvitation(codec::decode_invitation(&b)?),
                Wire::DeleteInvitation(id) => StoreOp::DeleteInvitation(id),
                Wire::PutAccount(b) => StoreOp::PutAccount(codec::decode(&b)?),
                Wire::DeleteAccount(id, user) => StoreOp::DeleteAccount { id, user },
                Wire::PutApiKey(b) => StoreOp::PutApiKey(codec::decode(&b)?),
                Wire::DeleteApiKey(id, user) => StoreOp::DeleteApiKey { id, user },
                Wire::PutOAuthGrant(b) => StoreOp::PutOAuthGrant(super::provider_records::decode_grant(&b)?),
                Wire::DeleteOAuthGrant(id) => StoreOp::DeleteOAuthGrant(id),
                Wire::UseApiKey(id, user, at_ms) => StoreOp::UseApiKey { id, user, at_ms },
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::records::{AuditRecordV1, OrgRecordV1};

    #[test]
    fn an_entry_round_trips_and_leaves_out_what_no_node_holds() {
        let org: crate::store::OrgRecord =
            OrgRecordV1 { id: [1; 16], name: "A".into(), slug: "a".into(), created_at_ms: 5 }.into();
        let audit = AuditRecordV1 {
            id: [2; 16],
            at_ms: 1,
            action: "x".into(),
            actor: None,
            target: None,
            ip_address: String::new(),
            detail: String::new(),
        };
        let ops =
            [StoreOp::PutOrg(org.clone()), StoreOp::PutAudit(audit.clone()), StoreOp::DeleteSession([3; 16], [4; 32])];
        let bytes = encode(&ops).unwrap();
        assert_eq!(decode(&bytes).unwrap(), vec![StoreOp::PutOrg(org), StoreOp::DeleteSession([3; 16], [4; 32])]);
        assert_eq!(encode(&[StoreOp::PutAudit(audit)]), None);
        let mut newer = bytes.clone();
        newer[0] = VERSION + 1;
        assert!(matches!(decode(&newer), Err(StoreError::Corrupt(_))));
    }

    /// An entry with an API key is format 4 and round-trips; one without keeps the format the previous release
    /// reads (3), so a cluster mid-upgrade goes on until someone makes a key.
    #[test]
    fn only_an_entry_with_an_api_key_is_written_in_the_new_format() {
        let key = crate::store::api_key_records::ApiKeyRecordV1 {
            id: [1; 16],
            user_id: [2; 16],
            hash: [3; 32],
            config_id: "default".into(),
            name: None,
            start: None,
            prefix: None,
            enabled: true,
            expires_at_ms: None,
            created_at_ms: 1,
            updated_at_ms: 1,
            rate_limit_enabled: true,
            rate_limit_time_window_ms: Some(1),
            rate_limit_max: Some(1),
            request_count: 0,
            last_request_ms: None,
            remaining: None,
            refill_amount: None,
            refill_interval_ms: None,
            last_refill_at_ms: None,
            permissions: None,
            metadata: None,
        };
        let ops = [StoreOp::PutApiKey(key), StoreOp::DeleteApiKey { id: [5; 16], user: [2; 16] }];
        let bytes = encode(&ops).unwrap();
        assert_eq!(bytes[0], 4);
        assert_eq!(decode(&bytes).unwrap(), ops.to_vec());
        assert_eq!(encode(&[StoreOp::DeleteSession([3; 16], [4; 32])]).unwrap()[0], 3);
        // A use of a key's quota only in the newest format; a grant alone keeps the previous release's.
        let used = [StoreOp::UseApiKey { id: [5; 16], user: [2; 16], at_ms: 77 }];
        let bytes = encode(&used).unwrap();
        assert_eq!((bytes[0], decode(&bytes).unwrap()), (VERSION, used.to_vec()));
        assert_eq!(encode(&[StoreOp::DeleteOAuthGrant([6; 16])]).unwrap()[0], VERSION_WITHOUT_KEY_USES);
    }

    /// The entry carries exactly what [`StoreOp::held`] names, in order, a refresh as the session it writes:
    /// the other nodes apply what this node holds, nothing more or less.
    #[test]
    fn an_entry_carries_every_held_op_and_only_those() {
        use crate::store::records::{InvitationRecord, MembershipRecord, SessionRecordV3, TokenRecordV3};
        let session: crate::store::SessionRecord = SessionRecordV3 {
            id: [1; 16],
            user_id: [2; 16],
            expires_at_ms: 10,
            created_at_ms: 1,
            updated_at_ms: 1,
            ip_address: String::new(),
            user_agent: String::new(),
            remember_me: true,
            impersonated_by: None,
            active_organization: Some([4; 16]),
        }
        .into();
        let member = MembershipRecord { org: [4; 16], user: [2; 16], roles: 1, created_at_ms: 1, custom: Vec::new() };
        // Into a team: the other nodes learn of the invitation's teams too.
        let invitation = InvitationRecord {
            id: [7; 16],
            org: [4; 16],
            email: "a@b.c".into(),
            roles: 4,
            inviter: [2; 16],
            status: 0,
            expires_at_ms: 9,
            created_at_ms: 1,
            teams: vec![[8; 16]],
        };
        let token: crate::store::TokenRecord = TokenRecordV3 {
            kind: 1,
            user_id: [2; 16],
            created_at_ms: 1,
            expires_at_ms: 9,
            requested_by: None,
            failures: 0,
        }
        .into();
        let ops = [
            StoreOp::ReserveAttempt { email: "a@b.c".into(), max: 3, window_ms: 1, now_ms: 1 },
            StoreOp::RefreshSession([5; 32], session.clone()),
            StoreOp::ExpectUser { id: [2; 16], record: None },
            StoreOp::PutToken([6; 32], token),
            StoreOp::DeleteToken([6; 32]),
            StoreOp::DeleteSessionsOf { user: [2; 16], except: Some([5; 32]) },
            StoreOp::EndAttempt { email: "a@b.c".into(), verified: true },
            StoreOp::DeleteOutbox([3; 16]),
            StoreOp::DeleteUser([2; 16]),
            StoreOp::DeleteOrg([4; 16]),
            StoreOp::DeleteAudit([3; 16]),
            StoreOp::PutMember(member),
            StoreOp::ExpectOwner([4; 16]),
            StoreOp::DeleteMember([4; 16], [2; 16]),
            StoreOp::PutInvitation(invitation),
            StoreOp::DeleteInvitation([7; 16]),
            // Webhooks: read from the store by each node's deliverer, held by none.
            StoreOp::DeleteWebhook([7; 16]),
            StoreOp::SetWebhookFailing { id: [7; 16], since_ms: Some(1) },
            StoreOp::DeleteWebhookMessage { endpoint: [7; 16], seq: 1 },
            StoreOp::DeleteDeliveriesBefore { before_ms: 1 },
        ];
        let decoded = decode(&encode(&ops).unwrap()).unwrap();
        let sent: Vec<Held<'_>> = ops.iter().filter_map(StoreOp::held).collect();
        assert_eq!(decoded.iter().map(|op| op.held().unwrap()).collect::<Vec<_>>(), sent);
        assert_eq!(decoded[0], StoreOp::PutSession([5; 32], session));
    }
}
