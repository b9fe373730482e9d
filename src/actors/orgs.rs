//! The organizations actor: organizations and the uniqueness of their slugs.

use std::sync::Arc;

use ractor::{Actor, ActorCell, ActorProcessingErr, ActorRef, RpcReplyPort};

use super::audit::{self, action};
use super::overlay::{self, Overlay};
use super::{Indexes, Unavailable, call};
use crate::domain::{Name, OrgId, Organization, Slug, Timestamp, UserId};
use crate::store::{StoreOp, StoreWriter, convert};

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
        self.by_slug.pin().insert(org.slug.clone(), org.id);
        self.by_id.pin().insert(org.id, org);
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CreateOrgError {
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
    Flush,
}

/// Typed handle to the organizations actor.
#[derive(Clone)]
pub struct OrgsHandle(ActorRef<OrgsMsg>);

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

    pub(super) async fn drain(&self) {
        let _ = self.0.drain_and_wait(None).await;
    }
}

pub(super) async fn spawn(
    indexes: Arc<Indexes>,
    writer: StoreWriter,
    supervisor: ActorCell,
) -> Result<OrgsHandle, ActorProcessingErr> {
    let (actor, _) = Actor::spawn_linked(None, OrgsActor { indexes, writer }, (), supervisor).await?;
    Ok(OrgsHandle(actor))
}

struct OrgsActor {
    indexes: Arc<Indexes>,
    writer: StoreWriter,
}

#[derive(Default)]
struct State {
    /// Organizations created in this batch, keyed by slug (what the uniqueness check needs).
    overlay: Overlay<Slug, Arc<Organization>>,
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
                state.overlay.add([StoreOp::PutOrg(convert::org_record(&org)), logged], reply, org);
                if state.overlay.schedule_flush(&myself, || OrgsMsg::Flush) {
                    self.flush(state).await;
                }
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
