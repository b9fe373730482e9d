//! The actors that own the state: users, organizations, sessions.
//!
//! Each actor is the only writer of its part of the state. Invariants that need one point of truth (unique
//! e-mail, unique slug, the last-admin guard, "a banned user gets no new session") are checked inside the actor,
//! where messages are handled one at a time, so they hold without locks or store transactions.
//!
//! # Reads skip the mailbox
//! Every actor publishes a read index ([`Indexes`]): lock-free maps that `get-session` and the admin lists read
//! directly. A mailbox round trip costs ~1 µs; a map read ~100 ns, and does not queue behind writes.
//!
//! # Durable before visible, batched
//! A change is first checked and recorded in the actor's *pending overlay* (so later messages see it, e.g. a
//! second sign-up with the same e-mail), and its records are queued in a [`Batch`]. The first change of a batch
//! schedules a `Flush` message to the actor itself; everything that arrives before the flush runs joins the batch.
//! The flush hands the whole batch to the store writer in one request and waits for the fsync. Only then does the
//! overlay move into the read index and do callers get their answers. If the store fails, the overlay is
//! dropped and every caller in the batch gets `Unavailable`: memory never runs ahead of the disk.
//!
//! # Bounded mailboxes
//! A call waits at most [`CALL_TIMEOUT`]; at most [`mailbox::MAILBOX_CAP`] calls wait in one mailbox, and a call
//! whose caller has stopped waiting is dropped unopened ([`mailbox`]): a stuck store neither piles up work without
//! end nor has it done later for callers already answered 503.

pub mod api_keys;
mod attempts;
pub mod audit;
pub mod counters;
mod inbox;
mod inline_map;
pub mod linked;
pub mod load;
mod mailbox;
pub mod orgs;
mod overlay;
mod owner_lists;
pub mod remote;
pub mod sessions;
pub mod tokens;
pub mod users;

#[cfg(test)]
mod tests;

use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef, SupervisionEvent};
use tokio_util::sync::CancellationToken;

use mailbox::{Letter, Mailbox, Waiting, call, gone};
pub use orgs::{OrgIndex, OrgsHandle};
pub use sessions::{SessionIndex, SessionsHandle};
pub use users::{UserIndex, UsersHandle};

use crate::config::SessionConfig;
use crate::store::StoreWriter;

/// How long the HTTP side waits for an actor before answering 503. Generous: a call normally takes one fsync. A
/// message whose caller stopped waiting is dropped unopened ([`mailbox`]).
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// The read indexes, shared by the actors (writers) and the HTTP handlers (readers).
#[derive(Default)]
pub struct Indexes {
    pub users: UserIndex,
    pub orgs: OrgIndex,
    /// Memberships and invitations (written by the users actor, which owns them with the accounts).
    pub members: orgs::MemberIndex,
    pub sessions: SessionIndex,
    pub tokens: tokens::TokenIndex,
    pub accounts: linked::AccountIndex,
    /// API keys (written by the sessions actor, which ends them with their owner's sessions).
    pub api_keys: api_keys::ApiKeyIndex,
}

impl Indexes {
    /// With room for `users` accounts and `sessions` sessions in the maps the session check reads.
    pub fn with_capacity(users: usize, sessions: usize) -> Self {
        Self {
            users: UserIndex::with_capacity(users),
            sessions: SessionIndex::with_capacity(sessions),
            ..Self::default()
        }
    }
}

/// The actor handles the HTTP side talks to. Cheap to clone.
#[derive(Clone)]
pub struct Handles {
    pub users: UsersHandle,
    pub orgs: OrgsHandle,
    pub sessions: SessionsHandle,
}

/// The answer when an actor cannot be reached in time, or the store refused the write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the service is temporarily unavailable")]
pub struct Unavailable;

/// The hash of the big read maps by id (accounts, which every session check reads, and memberships; the sessions
/// are filed by their token hash's own first bytes, see `sessions/index.rs`). Their keys are made by the server
/// (random UUIDs, SHA-256 digests of random tokens), never chosen by a client, so a fast seeded hash is enough:
/// SipHash, the standard library's, was a fifth of the start-up time at a million accounts and sessions.
type KeyHash = foldhash::fast::RandomState;

/// A read lock on one of the ordered views of an index. A poisoned lock means a panic while the actor that owns
/// the view published; the view itself is still whole (every update is a single insert or remove), and the
/// actor's death stops the service anyway.
fn read<T>(lock: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A write lock on one of the ordered views of an index (see [`read`]).
fn write<T>(lock: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The running actors under their supervisor.
pub struct System {
    pub handles: Handles,
    root: ActorRef<()>,
}

impl System {
    /// Starts the three actors under a root supervisor. If any of them dies, `fatal` is cancelled: the process
    /// must stop (and a restart reloads everything from the store) rather than serve with a hole in its state.
    pub async fn start(
        indexes: Arc<Indexes>,
        writer: StoreWriter,
        sessions_config: SessionConfig,
        clock: crate::domain::Clock,
        attempts: users::AttemptPolicy,
        mail: Option<crate::mail::MailQueue>,
        fatal: CancellationToken,
    ) -> Result<Self, ActorProcessingErr> {
        let (root, _) = Actor::spawn(None, Root { fatal }, ()).await?;
        let cell = root.get_cell();
        let sessions =
            sessions::spawn(Arc::clone(&indexes), writer.clone(), sessions_config, clock, cell.clone()).await?;
        let users =
            users::spawn(Arc::clone(&indexes), writer.clone(), sessions.clone(), attempts, mail, cell.clone()).await?;
        // After the users actor: a batch that removes teams is committed through it (with the invitations that
        // named them), and it never waits for this one.
        let orgs = orgs::spawn(indexes, writer, sessions.clone(), users.clone(), cell).await?;
        Ok(Self { handles: Handles { users, orgs, sessions }, root })
    }

    /// Lets every actor finish what is in its mailbox, then stops them. Organizations first (a team removed in
    /// flight still needs the users actor to commit it), then users: a ban in flight still needs the sessions
    /// actor to end that user's sessions.
    pub async fn stop(self) {
        let Handles { users, orgs, sessions } = self.handles;
        orgs.drain().await;
        users.drain().await;
        sessions.drain().await;
        self.root.stop(None);
    }
}

/// Supervisor of the three actors; its only job is to notice a death.
struct Root {
    fatal: CancellationToken,
}

impl Actor for Root {
    type Msg = ();
    type State = ();
    type Arguments = ();

    async fn pre_start(&self, _: ActorRef<()>, _: ()) -> Result<(), ActorProcessingErr> {
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        _: ActorRef<()>,
        event: SupervisionEvent,
        _: &mut (),
    ) -> Result<(), ActorProcessingErr> {
        // Only a failure (a panic or an error from a handler) is fatal. A drain at shutdown ends with
        // ActorTerminated, which is expected.
        if let SupervisionEvent::ActorFailed(who, err) = event {
            tracing::error!(actor = ?who.get_id(), error = %err, "actor failed; shutting down");
            self.fatal.cancel();
        }
        Ok(())
    }
}
