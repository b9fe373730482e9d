//! Start-up: the read indexes rebuilt from the store's records.

use std::sync::Arc;

use super::Indexes;
use crate::domain::{Email, Name, OrgId, Organization, RoleSet, Session, SessionId, Slug, Timestamp, User, UserId};
use crate::store::{Loaded, StoreError, StoreOp};

/// Builds the indexes from everything in the store. Also returns the clean-up to commit before serving: sessions
/// that are expired, or whose user is gone or banned (a ban whose session clean-up was cut short by a crash).
pub fn indexes(loaded: Loaded, roles: &RoleSet) -> Result<(Indexes, Vec<StoreOp>), StoreError> {
    let indexes = Indexes::default();
    for r in loaded.orgs {
        let org = Organization {
            id: OrgId::from_bytes(r.id),
            name: Name::from_trusted(r.name),
            slug: Slug::from_trusted(r.slug),
            created_at: Timestamp::from_millis(r.created_at_ms),
        };
        indexes.orgs.publish(Arc::new(org));
    }
    for r in loaded.users {
        let user = User {
            id: UserId::from_bytes(r.id),
            name: Name::from_trusted(r.name),
            email: Email::from_trusted(r.email),
            image: r.image,
            role: roles.from_store(&r.role),
            banned: r.banned,
            ban_reason: r.ban_reason,
            organization_id: r.organization_id.map(OrgId::from_bytes),
            password_hash: r.password_hash,
            created_at: Timestamp::from_millis(r.created_at_ms),
            updated_at: Timestamp::from_millis(r.updated_at_ms),
        };
        if indexes.users.by_email(&user.email).is_some() {
            return Err(StoreError::Corrupt(format!("two accounts share the e-mail of user {}", user.id)));
        }
        indexes.users.publish(Arc::new(user));
    }
    let now = Timestamp::now();
    let mut cleanup = Vec::new();
    for (hash, r) in loaded.sessions {
        let session = Session {
            id: SessionId::from_bytes(r.id),
            user_id: UserId::from_bytes(r.user_id),
            expires_at: Timestamp::from_millis(r.expires_at_ms),
            created_at: Timestamp::from_millis(r.created_at_ms),
            updated_at: Timestamp::from_millis(r.updated_at_ms),
            ip_address: r.ip_address,
            user_agent: r.user_agent,
            remember_me: r.remember_me,
        };
        let live = !session.is_expired(now) && indexes.users.get(session.user_id).is_some_and(|u| !u.banned);
        if live {
            indexes.sessions.publish(hash, Some(Arc::new(session)));
        } else {
            cleanup.push(StoreOp::DeleteSession(hash));
        }
    }
    Ok((indexes, cleanup))
}
