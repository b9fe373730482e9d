//! The organizations actor: organizations and the uniqueness of their slugs.

use std::sync::Arc;

use ractor::{Actor, ActorCell, ActorProcessingErr, ActorRef, RpcReplyPort};

use super::audit::{self, action};
use super::overlay::{self, Overlay};
use super::{Indexes, Mailbox, Unavailable, Waiting, call, gone};
use crate::domain::{Name, OrgId, Organization, Slug, Timestamp, UserId};
use crate::store::{Conflict, StoreOp, StoreWriter, convert};

/// Read index of organizations: by id, and by slug.
#[derive(Default)]
pub struct OrgIndex {
    by_id: papaya::HashMap<OrgId, Arc<Organization>>,
    by_slug: papaya::HashMap<Slug, OrgId>,
}

impl OrgIndex {
    pub fn get(&self, id: OrgId) -> Option<Arc<Organization>> {
        self.by_id.pin().get(&id).cloned()
    }

    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    pub(crate) fn slug_taken(&self, slug: &Slug) -> bool {
        self.by_slug.pin().contains_key(slug)
    }

    /// Every organization, ordered by creation time, then id.
    pub fn list(&self) -> Vec<Arc<Organization>> {
        let mut orgs: Vec<Arc<Organization>> = self.by_id.pin().values().cloned().collect();
        orgs.sort_unstable_by_key(|o| (o.created_at, o.id));
        orgs
    }

    pub(crate) fn publish(&self, org: Arc<Organization>) {
        if let Some(old) = self.by_id.pin().insert(org.id, Arc::clone(&org))
            && old.slug != org.slug
        {
            self.by_slug.pin().remove(&old.slug);
        }
        self.by_slug.pin().insert(org.slug.clone(), org.id);
    }

    /// After a durable deletion.
    pub(crate) fn remove(&self, id: OrgId) {
        if let Some(old) = self.by_id.pin().remove(&id) {
            self.by_slug.pin().remove(&old.slug);
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CreateOrgError {
    #[error("an organization with this slug already exists")]
    SlugTaken,
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum UpdateOrgError {
    #[error("organization not found")]
    NotFound,
    #[error("an organization with this slug already exists")]
    SlugTaken,
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
}

pub enum OrgsMsg {
    Create {
        name: Name,
        slug: Slug,
        by: UserId,
        ip: String,
        reply: RpcReplyPort<Result<Arc<Organization>, CreateOrgError>>,
    },
    Update {
        id: OrgId,
        name: Option<Name>,
        slug: Option<Slug>,
        by: UserId,
        ip: String,
        reply: RpcReplyPort<Result<Arc<Organization>, UpdateOrgError>>,
    },
    /// No change to `id` until [`OrgsMsg::EndDelete`]: its deletion is under way in the users actor.
    BeginDelete {
        id: OrgId,
        reply: RpcReplyPort<bool>,
    },
    EndDelete {
        id: OrgId,
    },
    /// Organizations another node created, changed (`Some`) or deleted (`None`): into the read index.
    Remote {
        orgs: Vec<(OrgId, Option<Arc<Organization>>)>,
        gate: crate::store::own::Gate,
        reply: RpcReplyPort<()>,
    },
    Flush,
}

impl super::Letter for OrgsMsg {
    fn caller_gone(&self) -> Option<bool> {
        match self {
            Self::Create { reply, .. } => gone(reply),
            Self::Update { reply, .. } => gone(reply),
            Self::BeginDelete { reply, .. } => gone(reply),
            // Another node's changes: this node's memory must follow them whatever.
            Self::Remote { .. } => None,
            Self::EndDelete { .. } | Self::Flush => None,
        }
    }
}

/// Typed handle to the organizations actor.
#[derive(Clone)]
pub struct OrgsHandle(pub(super) Mailbox<OrgsMsg>);

impl OrgsHandle {
    /// Creates an organization on behalf of administrator `by`, calling from address `ip`.
    pub async fn create(
        &self,
        name: Name,
        slug: Slug,
        by: UserId,
        ip: String,
    ) -> Result<Arc<Organization>, CreateOrgError> {
        call(&self.0, |reply| OrgsMsg::Create { name, slug, by, ip, reply }).await?
    }

    /// Renames organization `id` (name, slug or both) on behalf of administrator `by`.
    pub async fn update(
        &self,
        id: OrgId,
        name: Option<Name>,
        slug: Option<Slug>,
        by: UserId,
        ip: String,
    ) -> Result<Arc<Organization>, UpdateOrgError> {
        call(&self.0, |reply| OrgsMsg::Update { id, name, slug, by, ip, reply }).await?
    }

    /// Holds every change to `id` back while the users actor deletes it (with its memberships, in one commit);
    /// `false` if there is no such organization. Must be followed by [`end_delete`](Self::end_delete).
    pub async fn begin_delete(&self, id: OrgId) -> Result<bool, Unavailable> {
        call(&self.0, |reply| OrgsMsg::BeginDelete { id, reply }).await
    }

    pub fn end_delete(&self, id: OrgId) {
        let _ = self.0.send_message(OrgsMsg::EndDelete { id });
    }

    pub(super) async fn drain(&self) {
        let _ = self.0.drain_and_wait(None).await;
    }
}

pub(super) async fn spawn(
    indexes: Arc<Indexes>,
    writer: StoreWriter,
    supervisor: ActorCell,
) -> Result<OrgsHandle, ActorProcessingErr> {
    let waiting = Waiting::default();
    let actor = OrgsActor { indexes, writer, waiting: waiting.clone() };
    let (actor, _) = Actor::spawn_linked(None, actor, (), supervisor).await?;
    Ok(OrgsHandle(Mailbox::new(actor, waiting)))
}

struct OrgsActor {
    indexes: Arc<Indexes>,
    writer: StoreWriter,
    /// The calls waiting in this actor's mailbox (see [`super::mailbox`]).
    waiting: Waiting,
}

#[derive(Default)]
struct State {
    /// Organizations created or changed in this batch, keyed by slug (what the uniqueness check needs).
    overlay: Overlay<Slug, Arc<Organization>>,
    /// Organizations being deleted: left alone until the deletion is over.
    deleting: std::collections::HashSet<OrgId>,
}

impl Actor for OrgsActor {
    type Msg = OrgsMsg;
    type State = State;
    type Arguments = ();

    async fn pre_start(&self, _: ActorRef<OrgsMsg>, _: ()) -> Result<State, ActorProcessingErr> {
        Ok(State::default())
    }

    async fn handle(
        &self,
        myself: ActorRef<OrgsMsg>,
        msg: OrgsMsg,
        state: &mut State,
    ) -> Result<(), ActorProcessingErr> {
        if !self.waiting.take(&msg) {
            return Ok(());
        }
        match msg {
            OrgsMsg::Create { name, slug, by, ip, reply } => {
                if state.overlay.get(&slug).is_some() || self.indexes.orgs.slug_taken(&slug) {
                    let _ = reply.send(Err(CreateOrgError::SlugTaken));
                    return Ok(());
                }
                let org = Arc::new(Organization { id: OrgId::new(), name, slug, created_at: Timestamp::now() });
                state.overlay.stage(org.slug.clone(), Arc::clone(&org));
                let logged = audit::entry(
                    action::ORGANIZATION_CREATED,
                    Some(by),
                    Some(org.id.into()),
                    &ip,
                    org.slug.to_string(),
                );
                let slug = org.slug.to_string();
                let taken = move |c: &Conflict| {
                    matches!(c, Conflict::SlugTaken(s) if *s == slug).then_some(CreateOrgError::SlugTaken)
                };
                let ops = [StoreOp::PutOrg(convert::org_record(&org)), logged];
                state.overlay.add_guarded(ops, reply, Ok(org), taken);
                if state.overlay.schedule_flush(&myself, || OrgsMsg::Flush) {
                    self.flush(state).await;
                }
            }
            OrgsMsg::Update { id, name, slug, by, ip, reply } => {
                // One pending version per organization: the overlay is keyed by slug, so a second rename in one
                // batch would leave two versions to publish in no particular order.
                if state.overlay.values().any(|o| o.id == id) {
                    self.flush(state).await;
                }
                let Some(current) = self.indexes.orgs.get(id).filter(|_| !state.deleting.contains(&id)) else {
                    let _ = reply.send(Err(UpdateOrgError::NotFound));
                    return Ok(());
                };
                let new_slug = slug.filter(|s| *s != current.slug);
                if let Some(slug) = &new_slug
                    && (state.overlay.get(slug).is_some() || self.indexes.orgs.slug_taken(slug))
                {
                    let _ = reply.send(Err(UpdateOrgError::SlugTaken));
                    return Ok(());
                }
                let mut detail = Vec::new();
                if let Some(name) = name.as_ref().filter(|n| **n != current.name) {
                    detail.push(format!("name: {} -> {name}", current.name));
                }
                if let Some(slug) = &new_slug {
                    detail.push(format!("slug: {} -> {slug}", current.slug));
                }
                if detail.is_empty() {
                    let _ = reply.send(Ok(current));
                    return Ok(());
                }
                let org = Arc::new(Organization {
                    name: name.unwrap_or_else(|| current.name.clone()),
                    slug: new_slug.unwrap_or_else(|| current.slug.clone()),
                    ..Organization::clone(&current)
                });
                state.overlay.stage(org.slug.clone(), Arc::clone(&org));
                let logged =
                    audit::entry(action::ORGANIZATION_UPDATED, Some(by), Some(id.into()), &ip, detail.join("; "));
                let slug = org.slug.to_string();
                let taken = move |c: &Conflict| {
                    matches!(c, Conflict::SlugTaken(s) if *s == slug).then_some(UpdateOrgError::SlugTaken)
                };
                let ops = [StoreOp::PutOrg(convert::org_record(&org)), logged];
                state.overlay.add_guarded(ops, reply, Ok(org), taken);
                if state.overlay.schedule_flush(&myself, || OrgsMsg::Flush) {
                    self.flush(state).await;
                }
            }
            OrgsMsg::BeginDelete { id, reply } => {
                // Whatever is pending for it is made durable first, so nothing of this actor's lands after the
                // deletion and brings the organization back.
                self.flush(state).await;
                let exists = self.indexes.orgs.get(id).is_some() && state.deleting.insert(id);
                let _ = reply.send(exists);
            }
            OrgsMsg::EndDelete { id } => {
                state.deleting.remove(&id);
            }
            OrgsMsg::Remote { orgs, gate, reply } => {
                for (id, org) in orgs {
                    let key = crate::store::own::Key::Org(id.to_bytes());
                    if !gate.admits(key) {
                        continue;
                    }
                    gate.applied(key);
                    match org {
                        Some(org) => self.indexes.orgs.publish(org),
                        None => self.indexes.orgs.remove(id),
                    }
                }
                let _ = reply.send(());
            }
            OrgsMsg::Flush => self.flush(state).await,
        }
        Ok(())
    }
}

impl OrgsActor {
    async fn flush(&self, state: &mut State) {
        let orgs = &self.indexes.orgs;
        state.overlay.flush(|ops| overlay::write(&self.writer, ops), |(_, org)| orgs.publish(org)).await;
    }
}
