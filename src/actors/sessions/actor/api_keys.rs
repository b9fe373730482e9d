//! What the sessions actor does with the API keys' messages: stages them with their audit entries and answers once
//! durable. Keys changed in a batch are pending in `State::keys` (lookups see them) and published with the batch.

use std::sync::Arc;

use super::super::api_keys::{KeyActor, KeyError, KeyMsg};
use super::{SessionsActor, State};
use crate::domain::api_key::KeyRefusal;
use crate::domain::{ApiKey, ApiKeyId, Timestamp, UserId, action};
use crate::store::{Conflict, StoreOp, audit, convert};

impl SessionsActor {
    pub(super) fn api_key(&self, state: &mut State, msg: KeyMsg) {
        match msg {
            KeyMsg::Create { key, actor, reply } => {
                let now = Timestamp::now();
                let refused = match self.indexes.users.get(key.user_id) {
                    None => Some(KeyError::UnknownUser),
                    Some(u) if u.is_banned_at(now) => Some(KeyError::Banned),
                    // Its sessions are being ended (a ban, a removal in flight): a key made now would outlive it.
                    Some(_) if state.fenced.contains(&key.user_id) => {
                        Some(KeyError::Unavailable(crate::actors::Unavailable))
                    }
                    Some(_) => None,
                };
                if let Some(e) = refused {
                    drop(reply.send(Err(e)));
                    return;
                }
                state.keys.insert(key.id, Some(Arc::clone(&key)));
                let ops =
                    [StoreOp::PutApiKey(convert::api_key_record(&key)), logged(action::API_KEY_CREATED, &key, &actor)];
                state.overlay.add(ops, reply, key);
            }
            KeyMsg::Update { id, owner, change, actor, reply } => {
                let Some(current) = self.api_key_of(state, id, owner) else {
                    drop(reply.send(Err(KeyError::NotFound)));
                    return;
                };
                let key = Arc::new(change.apply(&current, Timestamp::now()));
                state.keys.insert(id, Some(Arc::clone(&key)));
                let ops =
                    [StoreOp::PutApiKey(convert::api_key_record(&key)), logged(action::API_KEY_UPDATED, &key, &actor)];
                state.overlay.add(ops, reply, key);
            }
            KeyMsg::Delete { id, owner, actor, reply } => {
                let Some(current) = self.api_key_of(state, id, owner) else {
                    drop(reply.send(Err(KeyError::NotFound)));
                    return;
                };
                state.keys.insert(id, None);
                let ops = [delete_key(&current), logged(action::API_KEY_DELETED, &current, &actor)];
                state.overlay.add(ops, reply, ());
            }
            KeyMsg::Use { id, now, limits_on, reply } => {
                let Some(key) = self.api_key_now(state, id) else {
                    drop(reply.send(Err(KeyError::NotFound)));
                    return;
                };
                if let Err(refusal) = key.use_at(now, limits_on) {
                    drop(reply.send(Ok(Err(refusal))));
                    return;
                }
                // Counted on this node's copy now; the store counts it on its own (on several nodes, the database's,
                // which may know of uses this node has not seen yet: then its refusal is the answer).
                let (id, user) = (id.to_bytes(), key.user_id.to_bytes());
                let ops = [StoreOp::UseApiKey { id, user, at_ms: now.as_millis() }];
                let answer = |c: &Conflict| match c {
                    Conflict::QuotaSpent { .. } => Some(Ok(Err(KeyRefusal::UsageExceeded))),
                    Conflict::ApiKeyGone { .. } => Some(Err(KeyError::NotFound)),
                    _ => None,
                };
                state.overlay.add_answering(ops, reply, Ok(Ok(())), answer);
            }
            KeyMsg::SweepExpired { now, reply } => {
                let mut expired: Vec<Arc<ApiKey>> =
                    self.indexes.api_keys.all().into_iter().filter(|k| k.is_expired(now)).collect();
                expired.retain(|k| !matches!(state.keys.get(&k.id), Some(None)));
                expired.extend(state.keys.values().flatten().filter(|k| k.is_expired(now)).cloned());
                expired.sort_by_key(|k| k.id);
                expired.dedup_by_key(|k| k.id);
                if expired.is_empty() {
                    drop(reply.send(Ok(0)));
                    return;
                }
                let count = expired.len();
                for key in &expired {
                    state.keys.insert(key.id, None);
                }
                state.overlay.add(expired.iter().map(|k| delete_key(k)), reply, count);
            }
        }
    }

    /// Key `id` as this batch leaves it, if it is `owner`'s.
    fn api_key_of(&self, state: &State, id: ApiKeyId, owner: UserId) -> Option<Arc<ApiKey>> {
        self.api_key_now(state, id).filter(|key| key.user_id == owner)
    }

    /// Key `id` as this batch leaves it.
    fn api_key_now(&self, state: &State, id: ApiKeyId) -> Option<Arc<ApiKey>> {
        match state.keys.get(&id) {
            Some(pending) => pending.clone(),
            None => self.indexes.api_keys.get(id),
        }
    }

    /// The keys of `users` as this batch leaves them, staged as deleted: they end with the change that ends their
    /// owners' sessions, in its commit.
    pub(super) fn end_api_keys_of(&self, state: &mut State, users: &[UserId]) -> Vec<StoreOp> {
        let mut ending: Vec<Arc<ApiKey>> = self.indexes.api_keys.of_users(users);
        ending.retain(|k| !matches!(state.keys.get(&k.id), Some(None)));
        ending.extend(state.keys.values().flatten().filter(|k| users.contains(&k.user_id)).cloned());
        ending.sort_by_key(|k| k.id);
        ending.dedup_by_key(|k| k.id);
        for key in &ending {
            state.keys.insert(key.id, None);
        }
        ending.iter().map(|k| delete_key(k)).collect()
    }
}

fn delete_key(key: &ApiKey) -> StoreOp {
    StoreOp::DeleteApiKey { id: key.id.to_bytes(), user: key.user_id.to_bytes() }
}

/// The audit entry of a change to `key`: the owner is the target, the key's id (and name) the detail; never its
/// secret or hash.
fn logged(what: &str, key: &ApiKey, actor: &KeyActor) -> StoreOp {
    let detail = match &key.name {
        Some(name) => format!("key {} ({name})", key.id),
        None => format!("key {}", key.id),
    };
    audit::entry(what, Some(actor.by), Some(key.user_id.into()), &actor.ip, detail)
}
