//! The organizations actor itself: checks each change in message order (a slug is taken once), writes through
//! the overlay, and publishes to the index once durable.

use std::sync::Arc;

use ractor::{Actor, ActorCell, ActorProcessingErr, ActorRef};

mod groups;
mod policy;
mod roles;
mod teams;

use super::{CreateOrgError, OrgsHandle, OrgsMsg, UpdateOrgError};
use crate::actors::overlay::{self, Overlay};
use crate::actors::sessions::Activate;
use crate::actors::{Indexes, Mailbox, SessionsHandle, UsersHandle, Waiting};
use crate::domain::{
    MemberRoles, Membership, OrgId, OrgRole, Organization, Slug, Team, TeamId, TeamMember, Timestamp, action,
};
use crate::store::{Conflict, StoreOp, StoreWriter, audit, convert};

pub(in crate::actors) async fn spawn(
    indexes: Arc<Indexes>,
    writer: StoreWriter,
    sessions: SessionsHandle,
    users: UsersHandle,
    supervisor: ActorCell,
) -> Result<OrgsHandle, ActorProcessingErr> {
    let waiting = Waiting::default();
    let actor = OrgsActor { indexes, writer, sessions, users, waiting: waiting.clone() };
    let (actor, _) = Actor::spawn_linked(None, actor, (), supervisor).await?;
    Ok(OrgsHandle(Mailbox::new(actor, waiting)))
}

pub(super) struct OrgsActor {
    indexes: Arc<Indexes>,
    writer: StoreWriter,
    /// Commits a batch that changes a session with it (an owner's session working in the new organization).
    sessions: SessionsHandle,
    /// Commits a batch that removes teams, with the pending invitations that named them (the users actor owns
    /// the invitations).
    users: UsersHandle,
    /// The calls waiting in this actor's mailbox (see [`super::mailbox`]).
    waiting: Waiting,
}

#[derive(Default)]
pub(super) struct State {
    /// Organizations created or changed in this batch, keyed by slug (what the uniqueness check needs).
    overlay: Overlay<Slug, Arc<Organization>>,
    /// Organizations being deleted: left alone until the deletion is over.
    deleting: std::collections::HashSet<OrgId>,
    /// The owners of the organizations created in this batch, published with them.
    owners: Vec<Arc<Membership>>,
    /// Sessions that work in an organization created in this batch from its commit on, and those whose team went
    /// (removed, or their user taken out of it).
    activating: Vec<Activate>,
    /// Teams removed in this batch: the pending invitations naming them no longer do from the same commit on.
    teams_gone: Vec<(OrgId, TeamId)>,
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
            OrgsMsg::Create { name, slug, logo, metadata, owner, active_in, default_team, by, ip, reply } => {
                if state.overlay.get(&slug).is_some() || self.indexes.orgs.slug_taken(&slug) {
                    let _ = reply.send(Err(CreateOrgError::SlugTaken));
                    return Ok(());
                }
                let now = Timestamp::now();
                // The plugin's `defaultTeam`: a team named as the organization, its creator in it, made with it.
                let teams = match owner.filter(|_| default_team) {
                    Some(owner) => vec![Team {
                        id: TeamId::new(),
                        name: name.clone(),
                        created_at: now,
                        updated_at: None,
                        members: vec![TeamMember { user: owner, created_at: now }],
                    }],
                    None => Vec::new(),
                };
                let org = Arc::new(Organization {
                    id: OrgId::new(),
                    name,
                    slug,
                    logo,
                    metadata,
                    created_at: now,
                    teams,
                    roles: Vec::new(),
                    require_sso: false,
                });
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
                let mut ops = vec![StoreOp::PutOrg(convert::org_record(&org)), logged];
                // The creator's membership rides in the organization's own commit: nobody else can know of the
                // organization before it, so nothing else writes this membership meanwhile.
                if let Some(owner) = owner {
                    let member = Arc::new(Membership::new(org.id, owner, MemberRoles::one(OrgRole::Owner), now));
                    ops.push(StoreOp::PutMember(convert::membership_record(&member)));
                    let detail = format!("{} (owner)", org.id);
                    ops.push(audit::entry(action::MEMBER_ADDED, Some(by), Some(owner.into()), &ip, detail));
                    state.owners.push(member);
                }
                // The creator's session works in it from the same commit on (as better-auth's create sets it
                // active): committed by the sessions actor with this batch, never a second call after the answer.
                if let Some(hash) = active_in {
                    // And in its default team, as the plugin's create sets `activeTeamId`.
                    let team = org.teams.first().map(|t| t.id);
                    state.activating.push(Activate::Session { hash, org: Some(org.id), team });
                }
                state.overlay.add_guarded(ops, reply, Ok(org), taken);
                if state.overlay.schedule_flush(&myself, || OrgsMsg::Flush) {
                    self.flush(state).await;
                }
            }
            OrgsMsg::Update { id, name, slug, logo, metadata, by, ip, reply } => {
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
                let logo = logo.filter(|l| *l != current.logo);
                if logo.is_some() {
                    detail.push("logo changed".into());
                }
                let metadata = metadata.filter(|m| Some(m) != current.metadata.as_ref());
                if metadata.is_some() {
                    detail.push("metadata changed".into());
                }
                if detail.is_empty() {
                    let _ = reply.send(Ok(current));
                    return Ok(());
                }
                let org = Arc::new(Organization {
                    name: name.unwrap_or_else(|| current.name.clone()),
                    slug: new_slug.unwrap_or_else(|| current.slug.clone()),
                    logo: logo.unwrap_or_else(|| current.logo.clone()),
                    metadata: metadata.or_else(|| current.metadata.clone()),
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
            OrgsMsg::Lend { id, back, reply } => {
                // What is pending lands first: the borrower builds on the durable version.
                self.flush(state).await;
                let lent = self.indexes.orgs.get(id).filter(|_| !state.deleting.contains(&id));
                let found = lent.is_some();
                if reply.send(lent).is_ok() && found {
                    // Until the borrower has published its version (or gave up): sent or dropped, either ends it.
                    let _ = back.await;
                }
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
            OrgsMsg::Team(msg) => self.team(&myself, state, msg).await,
            OrgsMsg::Group(msg) => self.group(&myself, state, msg).await,
            OrgsMsg::Role(msg) => self.role(&myself, state, msg).await,
            OrgsMsg::Policy(msg) => self.policy(&myself, state, msg).await,
            OrgsMsg::Flush => self.flush(state).await,
        }
        Ok(())
    }
}

impl OrgsActor {
    async fn flush(&self, state: &mut State) {
        let orgs = &self.indexes.orgs;
        let owners = std::mem::take(&mut state.owners);
        let activating = std::mem::take(&mut state.activating);
        let teams_gone = std::mem::take(&mut state.teams_gone);
        let members = &self.indexes.members;
        let (writer, sessions, users) = (&self.writer, &self.sessions, &self.users);
        let commit = |ops| async move {
            if !teams_gone.is_empty() {
                // The users actor strips the removed teams from the pending invitations in its own order and
                // commits them with this batch (and its sessions' changes): one transaction.
                users.commit_teams_removed(ops, activating, teams_gone).await
            } else if activating.is_empty() {
                overlay::write(writer, ops).await
            } else {
                // One transaction with the sessions' new active organization (see
                // docs/design/ending-sessions-with-a-change.md); a conflict comes back as such, for the guards.
                sessions.commit_with(Vec::new(), Vec::new(), ops, Vec::new(), activating).await.map(drop)
            }
        };
        let then = |durable: bool| {
            if durable {
                owners.into_iter().for_each(|m| members.publish_member(m));
            }
        };
        state.overlay.flush_then(commit, |(_, org)| orgs.publish(org), then).await;
    }
}
