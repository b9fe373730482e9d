//! What a commit tells the webhooks: the events its ops amount to, one message per subscribed endpoint, written by
//! the backend into the same transaction (so an event is queued if and only if its change is committed, in commit
//! order). Both backends feed [`Fanout`] each op *before* applying it, with a way to read an account as the
//! transaction sees it, so the account's state before and after the change is known exactly.
//!
//! Payloads carry ids and the changed fields, never a password hash, a token or a secret.

use std::collections::HashMap;

use serde_json::{Value, json};

use super::hook_records::{WebhookMessageRecordV1, WebhookRecordV1};
use super::records::{AuditRecordV1, InvitationRecord, UserRecord};
use super::{StoreError, StoreOp};
use crate::domain::{Timestamp, action};

/// Where an event comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// One of these audit actions is in the commit; the event is about the audit entry's target.
    Audit(&'static [&'static str]),
    /// An account's name, e-mail, image, verification, organization or ban reason changed.
    ProfileDiff,
    /// Every session of an account ended (a ban, a new password, "sign out everywhere"): not a single sign-out.
    AllSessionsEnded,
}

/// Every event type, and what raises it. An event for another audited change (`organization.created`, …) is one
/// line here: its payload then carries the target's id, the actor's id and the audit detail. The event names are
/// the webhooks' wire (`organization.invitation_created` is raised by `invitation.sent`); the audit actions that
/// raise them are [`action`]'s, so an event cannot name an action the audit log does not write, and a test
/// keeps one action from raising two events.
pub const EVENTS: &[(&str, Source)] = &[
    ("user.created", Source::Audit(&[action::USER_CREATED])),
    ("user.updated", Source::ProfileDiff),
    ("user.deleted", Source::Audit(&[action::USER_DELETED])),
    ("user.banned", Source::Audit(&[action::BANNED])),
    ("user.unbanned", Source::Audit(&[action::UNBANNED, action::BAN_EXPIRED])),
    ("user.role_changed", Source::Audit(&[action::ROLE_CHANGED])),
    ("user.password_changed", Source::Audit(&[action::PASSWORD_CHANGED, action::PASSWORD_SET, action::PASSWORD_RESET])),
    ("session.revoked", Source::AllSessionsEnded),
    // Organizations (the plugin's calls and the administrators'): the organization's id, the actor and the
    // audit entry's detail.
    ("organization.created", Source::Audit(&[action::ORGANIZATION_CREATED])),
    ("organization.updated", Source::Audit(&[action::ORGANIZATION_UPDATED])),
    ("organization.deleted", Source::Audit(&[action::ORGANIZATION_DELETED])),
    // Memberships: the member's account, the actor, and the detail naming the organization (and the roles).
    ("member.added", Source::Audit(&[action::MEMBER_ADDED])),
    ("member.role_changed", Source::Audit(&[action::MEMBER_ROLE_CHANGED])),
    ("member.removed", Source::Audit(&[action::MEMBER_REMOVED, action::MEMBER_LEFT])),
    // Each invite-member that succeeds (a resend too, with the same invitation id), mailed or not: without a mail
    // transport this is how the application learns of an invitation to deliver it itself. The invitation's
    // fields, and whether the service mailed it.
    ("organization.invitation_created", Source::Audit(&[action::INVITATION_SENT])),
    // Teams: the organization's id, the actor, and the detail naming the team (and the user put in or taken out).
    ("organization.team_created", Source::Audit(&[action::TEAM_CREATED])),
    ("organization.team_updated", Source::Audit(&[action::TEAM_UPDATED])),
    ("organization.team_deleted", Source::Audit(&[action::TEAM_DELETED])),
    ("organization.team_member_added", Source::Audit(&[action::TEAM_MEMBER_ADDED])),
    ("organization.team_member_removed", Source::Audit(&[action::TEAM_MEMBER_REMOVED])),
    ("organization.role_created", Source::Audit(&[action::ROLE_CREATED])),
    ("organization.role_updated", Source::Audit(&[action::ROLE_UPDATED])),
    ("organization.role_deleted", Source::Audit(&[action::ROLE_DELETED])),
    // API keys, by their owner or an administrator: the owner's account, the actor, and the key's id (and name).
    ("api_key.created", Source::Audit(&[action::API_KEY_CREATED])),
    ("api_key.updated", Source::Audit(&[action::API_KEY_UPDATED])),
    ("api_key.deleted", Source::Audit(&[action::API_KEY_DELETED])),
    // The identity provider's clients (administrators' changes): the client's id, the actor, and the detail
    // naming its `client_id` and what changed. Never its secret.
    ("oauth_client.created", Source::Audit(&[action::OAUTH_CLIENT_CREATED])),
    ("oauth_client.updated", Source::Audit(&[action::OAUTH_CLIENT_UPDATED, action::OAUTH_CLIENT_SECRET_ROTATED])),
    ("oauth_client.deleted", Source::Audit(&[action::OAUTH_CLIENT_DELETED])),
    // A user's consent to a client withdrawn (by the user or an administrator): the user's account, the actor, and
    // the detail naming the `client_id`. The application may end what it holds for the user.
    ("oauth_consent.revoked", Source::Audit(&[action::OAUTH_CONSENT_REVOKED])),
    // A user's grants to a client: made (a code or a device's approval redeemed; not a refresh), and ended before
    // their end (revoked by the client, the consent withdrawn, a reused code or refresh token): the user's account,
    // the actor, and the detail naming the `client_id`, the grant's id and why. Never a token.
    ("oauth_grant.issued", Source::Audit(&[action::OAUTH_GRANT_ISSUED])),
    (
        "oauth_grant.revoked",
        Source::Audit(&[action::OAUTH_GRANT_REVOKED, action::OAUTH_CODE_REUSED, action::OAUTH_REFRESH_TOKEN_REUSED]),
    ),
    // An organization's single sign-on providers: the organization's id, the actor, and the detail naming the
    // provider and what changed. Never its client secret.
    ("organization.sso_provider_created", Source::Audit(&[action::SSO_PROVIDER_CREATED])),
    ("organization.sso_provider_updated", Source::Audit(&[action::SSO_PROVIDER_UPDATED])),
    ("organization.sso_provider_deleted", Source::Audit(&[action::SSO_PROVIDER_DELETED])),
    // Its domains verified: from now on an address of them signs in through it.
    ("organization.sso_domain_verified", Source::Audit(&[action::SSO_DOMAIN_VERIFIED])),
    // Single sign-on required (or no longer) for its verified domains: from now on their passwords do not sign in.
    ("organization.sso_policy_updated", Source::Audit(&[action::SSO_POLICY_UPDATED])),
    // SCIM tokens of an organization (its owner's or an administrator's changes): the organization's id, the
    // actor, and the detail naming the token's id, scopes and expiry. Never the token.
    ("scim_token.created", Source::Audit(&[action::SCIM_TOKEN_CREATED])),
    ("scim_token.revoked", Source::Audit(&[action::SCIM_TOKEN_REVOKED])),
];

/// Whether `name` is an event type.
pub fn is_event(name: &str) -> bool {
    EVENTS.iter().any(|(n, _)| *n == name)
}

/// Whether `ops` can raise an event at all: a commit of nothing else (a session refreshed, a token used) reads no
/// endpoint and no account.
pub fn may_raise<'a>(mut ops: impl Iterator<Item = &'a StoreOp>) -> bool {
    ops.any(|op| match op {
        StoreOp::PutUser(_) | StoreOp::DeleteUser(_) | StoreOp::DeleteSessionsOf { .. } => true,
        StoreOp::PutAudit(entry) => EVENTS
            .iter()
            .any(|(_, source)| matches!(source, Source::Audit(actions) if actions.contains(&entry.action.as_str()))),
        _ => false,
    })
}

/// One event of a commit.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub name: &'static str,
    pub account: Option<[u8; 16]>,
    pub data: Value,
}

/// The endpoints a commit fans out to, and what it has seen of the accounts so far.
pub struct Fanout {
    endpoints: Vec<WebhookRecordV1>,
    /// Each account as the transaction holds it after the ops fed so far (`None`: deleted).
    current: HashMap<[u8; 16], Option<UserRecord>>,
    /// Each account as it was before the last change fed, for the payloads of audit-raised events.
    prior: HashMap<[u8; 16], Option<UserRecord>>,
    now: Timestamp,
    /// The invitation last written, and whether its mail followed it: an invitation's audit entry comes after
    /// both in its request's ops (`actors::users::members`).
    invitation: Option<(InvitationRecord, bool)>,
    /// The messages to write, in commit order.
    pub messages: Vec<WebhookMessageRecordV1>,
}

impl Fanout {
    /// `None` when no endpoint is enabled: the commit then reads nothing more and queues nothing.
    pub fn new(endpoints: impl IntoIterator<Item = WebhookRecordV1>) -> Option<Self> {
        let endpoints: Vec<WebhookRecordV1> = endpoints.into_iter().filter(|e| e.enabled).collect();
        (!endpoints.is_empty()).then(|| Self {
            endpoints,
            current: HashMap::new(),
            prior: HashMap::new(),
            now: Timestamp::now(),
            invitation: None,
            messages: Vec::new(),
        })
    }

    /// Feeds `op`, before it is applied; `read` reads an account as the transaction holds it now.
    pub fn op(
        &mut self,
        op: &StoreOp,
        read: &mut dyn FnMut([u8; 16]) -> Result<Option<UserRecord>, StoreError>,
    ) -> Result<(), StoreError> {
        let events = match op {
            StoreOp::PutUser(after) => {
                let before = self.account(after.id, read)?;
                let event = before.as_ref().and_then(|b| profile_diff(b, after));
                self.prior.insert(after.id, before);
                self.current.insert(after.id, Some(after.clone()));
                event.into_iter().collect()
            }
            StoreOp::DeleteUser(id) => {
                let before = self.account(*id, read)?;
                self.prior.insert(*id, before);
                self.current.insert(*id, None);
                Vec::new()
            }
            StoreOp::PutInvitation(invitation) => {
                self.invitation = Some((invitation.clone(), false));
                Vec::new()
            }
            StoreOp::PutOutbox(_) => {
                if let Some((_, mailed)) = self.invitation.as_mut() {
                    *mailed = true;
                }
                Vec::new()
            }
            StoreOp::PutAudit(entry) => self.audited(entry, read)?,
            StoreOp::DeleteSessionsOf { user, except } => vec![Event {
                name: "session.revoked",
                account: Some(*user),
                data: json!({"user_id": id(*user), "all": except.is_none()}),
            }],
            _ => Vec::new(),
        };
        for event in events {
            self.queue(event);
        }
        Ok(())
    }

    /// Forgets what was seen of the accounts `ops` touch (a request refused under its savepoint).
    pub fn forget(&mut self, ops: &[StoreOp], queued_before: usize) {
        self.messages.truncate(queued_before);
        self.invitation = None;
        for op in ops {
            let id = match op {
                StoreOp::PutUser(r) => r.id,
                StoreOp::DeleteUser(id) => *id,
                _ => continue,
            };
            self.current.remove(&id);
            self.prior.remove(&id);
        }
    }

    fn account(
        &mut self,
        id: [u8; 16],
        read: &mut dyn FnMut([u8; 16]) -> Result<Option<UserRecord>, StoreError>,
    ) -> Result<Option<UserRecord>, StoreError> {
        match self.current.get(&id) {
            Some(seen) => Ok(seen.clone()),
            None => read(id),
        }
    }

    fn audited(
        &mut self,
        entry: &AuditRecordV1,
        read: &mut dyn FnMut([u8; 16]) -> Result<Option<UserRecord>, StoreError>,
    ) -> Result<Vec<Event>, StoreError> {
        let Some(name) = EVENTS.iter().find_map(|(name, source)| match source {
            Source::Audit(actions) if actions.contains(&entry.action.as_str()) => Some(*name),
            _ => None,
        }) else {
            return Ok(Vec::new());
        };
        let Some(target) = entry.target else { return Ok(Vec::new()) };
        let now = self.account(target, read)?;
        let before = self.prior.get(&target).cloned().flatten();
        let mut data = json!({});
        let fields = data.as_object_mut().expect("an object");
        // An organization's event is about the organization, a client's about the client; every other about an
        // account.
        let subject = if name.starts_with("organization.") || name.starts_with("scim_token.") {
            "organization_id"
        } else if name.starts_with("oauth_client.") {
            "oauth_client_id"
        } else {
            "user_id"
        };
        fields.insert(subject.into(), id(target).into());
        let user = now.as_ref();
        match (name, user) {
            ("user.created", Some(u)) => {
                fields.insert("email".into(), u.email.clone().into());
                fields.insert("name".into(), u.name.clone().into());
                fields.insert("role".into(), u.role.clone().into());
                fields.insert("email_verified".into(), u.email_verified.into());
                fields.insert("organization_id".into(), u.organization_id.map(id).into());
            }
            ("user.banned", Some(u)) => {
                fields.insert("ban_reason".into(), u.ban_reason.clone().into());
                fields.insert("ban_expires".into(), u.ban_expires_ms.map(rfc3339).into());
            }
            ("user.unbanned", _) => {
                let why = if entry.action == action::BAN_EXPIRED { "expired" } else { "lifted" };
                fields.insert("reason".into(), why.into());
            }
            ("user.role_changed", Some(u)) => {
                fields.insert("role".into(), u.role.clone().into());
                fields.insert("previous_role".into(), before.map(|b| b.role).into());
            }
            ("user.password_changed", _) => {
                let by = match entry.action.as_str() {
                    action::PASSWORD_SET => "administrator",
                    action::PASSWORD_RESET => "reset",
                    _ => "user",
                };
                fields.insert("by".into(), by.into());
            }
            ("user.deleted", _) => {}
            ("organization.invitation_created", _) => {
                let Some((invitation, mailed)) = self.invitation.take() else { return Ok(Vec::new()) };
                let roles = crate::domain::MemberRoles::from_bits(invitation.roles);
                fields.insert("invitation_id".into(), id(invitation.id).into());
                fields.insert("email".into(), invitation.email.into());
                fields.insert("role".into(), roles.to_string().into());
                fields.insert("inviter_id".into(), id(invitation.inviter).into());
                fields.insert("expires_at".into(), rfc3339(invitation.expires_at_ms).into());
                fields.insert("mailed".into(), mailed.into());
            }
            _ => {
                // An event added by one line in EVENTS: what the audit entry says.
                fields.insert("actor_id".into(), entry.actor.map(id).into());
                fields.insert("detail".into(), entry.detail.clone().into());
            }
        }
        Ok(vec![Event { name, account: Some(target), data }])
    }

    fn queue(&mut self, event: Event) {
        let at = rfc3339(self.now.as_millis());
        for endpoint in &self.endpoints {
            if !endpoint.events.iter().any(|e| e == event.name) {
                continue;
            }
            let payload = json!({"type": event.name, "timestamp": at, "data": event.data}).to_string();
            self.messages.push(WebhookMessageRecordV1 {
                id: uuid::Uuid::now_v7().into_bytes(),
                endpoint: endpoint.id,
                account: event.account,
                event: event.name.to_owned(),
                payload,
                created_at_ms: self.now.as_millis(),
            });
        }
    }
}

/// The queue of the identity provider's back-channel logout messages (OpenID Connect Back-Channel Logout 1.0):
/// kept beside the endpoints' queues, in the same tables, so that a logout is queued in the very commit that ends
/// the session and is delivered, retried and kept across a crash as a webhook is. No endpoint has this id (theirs
/// are UUID v7s, whose version nibble this one's 13th byte, `-`, is not).
pub const BACKCHANNEL_QUEUE: [u8; 16] = *b"backchannel-lgou";
/// The `event` of such a message (never one of [`EVENTS`]: no endpoint subscribes to it).
pub const BACKCHANNEL_EVENT: &str = "backchannel.logout";

/// What a back-channel logout message holds: what the logout token will say, and where it goes. Signed only when
/// it is sent (by the deliverer, with the provider's keys), so a message waiting across a key rotation is signed
/// with the key in force, and its `iat` and `exp` are the attempt's.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Logout {
    pub uri: String,
    pub client_id: String,
    pub sub: String,
    pub sid: Option<String>,
    /// The client's `id_token_signed_response_alg` code: the relying party verifies the token as it verifies its ID
    /// tokens.
    pub alg: u8,
}

/// Which sessions of an account a request ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended<'a> {
    /// These sessions (their ids).
    Sessions(&'a [[u8; 16]]),
    /// Every one, and every grant of the account with them.
    All,
}

/// The back-channel logout messages a request owes: one per client with a `backchannel_logout_uri` and a grant of
/// `user` from an ended session (each session once per client). `grants` are the account's grants before the
/// request; `client` reads a client as the transaction holds it.
pub fn logouts(
    user: [u8; 16],
    ended: Ended<'_>,
    grants: impl IntoIterator<Item = super::OAuthGrantRecord>,
    client: &mut dyn FnMut(&str) -> Result<Option<super::ClientRecord>, StoreError>,
) -> Result<Vec<WebhookMessageRecordV1>, StoreError> {
    let now = Timestamp::now().as_millis();
    let mut seen: Vec<(String, Option<[u8; 16]>)> = Vec::new();
    let mut out = Vec::new();
    for grant in grants {
        if grant.user_id != Some(user) {
            continue;
        }
        let ends = match ended {
            Ended::All => true,
            Ended::Sessions(ids) => grant.session_id.is_some_and(|sid| ids.contains(&sid)),
        };
        let key = (grant.client_id.clone(), grant.session_id);
        if !ends || seen.contains(&key) {
            continue;
        }
        seen.push(key);
        let Some(found) = client(&grant.client_id)? else { continue };
        let Some(uri) = found.backchannel_logout_uri.filter(|_| !found.disabled) else { continue };
        let logout = Logout {
            uri,
            client_id: found.client_id,
            sub: crate::domain::UserId::from_bytes(user).to_string(),
            sid: grant.session_id.map(|s| crate::domain::SessionId::from_bytes(s).to_string()),
            alg: found.id_token_alg,
        };
        out.push(WebhookMessageRecordV1 {
            id: uuid::Uuid::now_v7().into_bytes(),
            endpoint: BACKCHANNEL_QUEUE,
            // No order among them: one relying party that does not answer holds up no other.
            account: None,
            event: BACKCHANNEL_EVENT.to_owned(),
            payload: serde_json::to_string(&logout).expect("a logout serialises"),
            created_at_ms: now,
        });
    }
    Ok(out)
}

/// Whether `ops` end a session, so that the commit looks for back-channel logouts to queue.
pub fn ends_sessions<'a>(mut ops: impl Iterator<Item = &'a StoreOp>) -> bool {
    ops.any(|op| matches!(op, StoreOp::DeleteSession(..) | StoreOp::DeleteSessionsOf { .. }))
}

/// `user.updated` when a field an application may mirror changed: the names of those fields, and their values.
fn profile_diff(before: &UserRecord, after: &UserRecord) -> Option<Event> {
    let mut changed = Vec::new();
    let mut data = serde_json::Map::new();
    data.insert("user_id".into(), id(after.id).into());
    let mut field = |name: &str, differs: bool, value: Value| {
        if differs {
            changed.push(Value::from(name));
            data.insert(name.into(), value);
        }
    };
    field("name", before.name != after.name, after.name.clone().into());
    field("email", before.email != after.email, after.email.clone().into());
    field("image", before.image != after.image, after.image.clone().into());
    field("username", before.username != after.username, after.username.clone().into());
    field("display_username", before.display_username != after.display_username, after.display_username.clone().into());
    field("email_verified", before.email_verified != after.email_verified, after.email_verified.into());
    field("organization_id", before.organization_id != after.organization_id, after.organization_id.map(id).into());
    // A ban's reason changed while it stays banned (a new ban is user.banned).
    let reason_only = before.banned && after.banned && before.ban_reason != after.ban_reason;
    field("ban_reason", reason_only, after.ban_reason.clone().into());
    if changed.is_empty() {
        return None;
    }
    data.insert("changed".into(), Value::Array(changed));
    Some(Event { name: "user.updated", account: Some(after.id), data: Value::Object(data) })
}

fn id(bytes: [u8; 16]) -> String {
    uuid::Uuid::from_bytes(bytes).hyphenated().to_string()
}

fn rfc3339(ms: i64) -> String {
    Timestamp::from_millis(ms).to_rfc3339()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::records::AuditRecordV1;

    fn endpoint(events: &[&str]) -> WebhookRecordV1 {
        WebhookRecordV1 {
            id: [9; 16],
            url: "https://example.com/hook".into(),
            events: events.iter().map(|e| (*e).to_owned()).collect(),
            description: String::new(),
            enabled: true,
            secret: vec![1; 24],
            previous_secret: None,
            previous_until_ms: None,
            created_at_ms: 0,
            updated_at_ms: 0,
        }
    }

    fn user(banned: bool, role: &str) -> UserRecord {
        UserRecord {
            id: [1; 16],
            name: "Ann".into(),
            email: "ann@example.com".into(),
            image: None,
            role: role.into(),
            banned,
            ban_reason: banned.then(|| "spam".into()),
            organization_id: None,
            password_hash: "$argon2id$secret-hash".into(),
            created_at_ms: 1,
            updated_at_ms: 1,
            email_verified: false,
            ban_expires_ms: None,
            two_factor: None,
            username: None,
            display_username: None,
        }
    }

    fn audit(action: &str) -> StoreOp {
        StoreOp::PutAudit(AuditRecordV1 {
            id: [3; 16],
            at_ms: 1,
            action: action.into(),
            actor: Some([2; 16]),
            target: Some([1; 16]),
            ip_address: String::new(),
            detail: String::new(),
        })
    }

    fn run(endpoints: Vec<WebhookRecordV1>, stored: Option<UserRecord>, ops: &[StoreOp]) -> Vec<Value> {
        let mut fanout = Fanout::new(endpoints).expect("an endpoint");
        for op in ops {
            fanout.op(op, &mut |_| Ok(stored.clone())).unwrap();
        }
        fanout.messages.iter().map(|m| serde_json::from_str(&m.payload).unwrap()).collect()
    }

    /// An audit entry raises the first event that lists its action: an action listed twice would never raise the
    /// second. And an event raised by audit entries names at least one.
    #[test]
    fn each_audit_action_raises_at_most_one_event() {
        let mut seen = std::collections::HashSet::new();
        for (name, source) in EVENTS {
            if let Source::Audit(actions) = source {
                assert!(!actions.is_empty(), "{name} is raised by no audit action");
                for action in *actions {
                    assert!(seen.insert(*action), "{action} raises {name} and an earlier event");
                }
            }
        }
    }

    #[test]
    fn a_ban_is_user_banned_and_session_revoked_and_never_carries_the_hash() {
        let all: Vec<&str> = EVENTS.iter().map(|(n, _)| *n).collect();
        let ops = [
            StoreOp::PutUser(user(true, "user")),
            StoreOp::DeleteSessionsOf { user: [1; 16], except: None },
            audit("user.banned"),
        ];
        let sent = run(vec![endpoint(&all)], Some(user(false, "user")), &ops);
        let types: Vec<&str> = sent.iter().map(|m| m["type"].as_str().unwrap()).collect();
        assert_eq!(types, ["session.revoked", "user.banned"]);
        assert_eq!(sent[1]["data"]["ban_reason"], "spam");
        for message in &sent {
            assert!(!message.to_string().contains("argon2"), "{message}");
        }
    }

    #[test]
    fn only_subscribed_endpoints_get_a_message_and_a_role_change_names_both_roles() {
        let ops = [StoreOp::PutUser(user(false, "admin")), audit("user.role_changed")];
        let sent =
            run(vec![endpoint(&["user.role_changed"]), endpoint(&["user.deleted"])], Some(user(false, "user")), &ops);
        assert_eq!(sent.len(), 1);
        assert_eq!(sent[0]["data"]["role"], "admin");
        assert_eq!(sent[0]["data"]["previous_role"], "user");
    }

    #[test]
    fn a_profile_change_lists_the_changed_fields_and_a_rehash_is_no_event() {
        let mut renamed = user(false, "user");
        renamed.name = "Ann B.".into();
        let sent = run(vec![endpoint(&["user.updated"])], Some(user(false, "user")), &[StoreOp::PutUser(renamed)]);
        assert_eq!(sent[0]["data"]["changed"], json!(["name"]));
        assert_eq!(sent[0]["data"]["name"], "Ann B.");
        let named = UserRecord {
            username: Some("ann_b".into()),
            display_username: Some("Ann_B".into()),
            ..user(false, "user")
        };
        let sent = run(vec![endpoint(&["user.updated"])], Some(user(false, "user")), &[StoreOp::PutUser(named)]);
        assert_eq!(sent[0]["data"]["changed"], json!(["username", "display_username"]));
        assert_eq!(
            (&sent[0]["data"]["username"], &sent[0]["data"]["display_username"]),
            (&json!("ann_b"), &json!("Ann_B"))
        );
        let mut rehashed = user(false, "user");
        rehashed.password_hash = "$argon2id$other".into();
        rehashed.updated_at_ms = 5;
        assert!(
            run(vec![endpoint(&["user.updated"])], Some(user(false, "user")), &[StoreOp::PutUser(rehashed)]).is_empty()
        );
    }

    #[test]
    fn organization_and_membership_events_name_their_subject() {
        let all: Vec<&str> = EVENTS.iter().map(|(n, _)| *n).collect();
        let ops = [audit("organization.created"), audit("member.added"), audit("member.left")];
        let sent = run(vec![endpoint(&all)], Some(user(false, "user")), &ops);
        let types: Vec<&str> = sent.iter().map(|m| m["type"].as_str().unwrap()).collect();
        assert_eq!(types, ["organization.created", "member.added", "member.removed"]);
        assert!(sent[0]["data"]["organization_id"].is_string() && sent[0]["data"]["user_id"].is_null());
        assert!(sent[1]["data"]["user_id"].is_string() && sent[1]["data"]["actor_id"].is_string());
    }

    fn invitation() -> InvitationRecord {
        InvitationRecord {
            id: [7; 16],
            org: [1; 16],
            email: "new@example.com".into(),
            roles: 0,
            inviter: [2; 16],
            status: 0,
            expires_at_ms: 172_800_000,
            created_at_ms: 0,
            teams: Vec::new(),
        }
    }

    #[test]
    fn an_invitation_carries_what_delivering_it_takes_and_whether_it_was_mailed() {
        let hooked = || vec![endpoint(&["organization.invitation_created"])];
        let unmailed = run(hooked(), None, &[StoreOp::PutInvitation(invitation()), audit("invitation.sent")]);
        assert_eq!(unmailed.len(), 1);
        let data = &unmailed[0]["data"];
        assert_eq!(unmailed[0]["type"], "organization.invitation_created");
        assert_eq!(data["organization_id"], id([1; 16]));
        assert_eq!(data["invitation_id"], id([7; 16]));
        assert_eq!((data["email"].as_str(), data["role"].as_str()), (Some("new@example.com"), Some("member")));
        assert_eq!(data["inviter_id"], id([2; 16]));
        assert_eq!(data["expires_at"], "1970-01-03T00:00:00.000Z");
        assert_eq!(data["mailed"], false);
        let outbox = StoreOp::PutOutbox(crate::store::records::OutboxRecordV1 {
            id: [8; 16],
            to: "new@example.com".into(),
            subject: String::new(),
            text: String::new(),
            html: String::new(),
            created_at_ms: 0,
        });
        let mailed = run(hooked(), None, &[StoreOp::PutInvitation(invitation()), outbox, audit("invitation.sent")]);
        assert_eq!(mailed[0]["data"]["mailed"], true);
    }

    #[test]
    fn no_enabled_endpoint_is_no_fanout() {
        assert!(Fanout::new([WebhookRecordV1 { enabled: false, ..endpoint(&["user.banned"]) }]).is_none());
    }
}
