//! The sessions actor: creating, extending and ending sessions.
//!
//! - this file: what callers see (the handle, its messages, the values and errors they carry);
//! - [`index`]: the read index;
//! - `actor`: the actor, which handles the messages in order and writes through the overlay.

mod actor;
mod api_keys;
mod index;

use std::sync::Arc;

use ractor::RpcReplyPort;

use super::overlay::Refusal;
use super::{Mailbox, Unavailable, call, gone};
use crate::domain::{OrgId, Session, SessionToken, TeamId, Timestamp, TokenHash, UserId};
use crate::store::StoreOp;

pub(super) use actor::spawn;
pub use api_keys::{KeyActor, KeyChange, KeyError};
pub use index::SessionIndex;

/// Where sessions work from a commit on (the organization plugin's active organization and team), committed by the
/// sessions actor with another actor's records ([`SessionsHandle::commit_with`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Activate {
    /// The session `hash` (the caller's: joining, creating, leaving) works in `org` and its `team` (or in none).
    Session { hash: TokenHash, org: Option<OrgId>, team: Option<TeamId> },
    /// `user` is no longer in `team` of `org` (`None`: in any team of it, having left the organization): every
    /// session of theirs working there works in no team.
    LeftTeam { user: UserId, org: OrgId, team: Option<TeamId> },
}

impl Activate {
    /// The session `hash` works in `org` (or none), in no team.
    pub fn org(hash: TokenHash, org: Option<OrgId>) -> Self {
        Self::Session { hash, org, team: None }
    }
}

/// Where a sign-in comes from (the client's address and user agent), recorded on the session.
#[derive(Debug, Clone, Default)]
pub struct Client {
    pub ip_address: String,
    pub user_agent: String,
}

/// Which of their own sessions a user ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Revoke {
    /// One session, if it is theirs (anyone else's is left alone, silently).
    One(TokenHash),
    All,
    /// Every one but this (the caller's current session).
    AllBut(TokenHash),
    /// An impersonation session, ended by the administrator behind it (audited as the end of the impersonation).
    Impersonation(TokenHash),
}

/// A session to start with another actor's records: a sign-in that replaces an imported password hash, or one
/// through another identity provider (with the account's records and link).
#[derive(Debug, Clone)]
pub struct StartWith {
    pub user: UserId,
    pub remember_me: bool,
    pub client: Client,
}

/// What starting a session gives: its token and the session.
pub type Started = Result<(SessionToken, Arc<Session>), CreateSessionError>;

/// Why a session starts; a sign-in is recorded in the audit log with its session (a sign-up's account creation
/// is recorded by the users actor).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    SignIn,
    /// A sign-in with a passkey (alone): audited and refused like [`Start::SignIn`], the detail saying so.
    Passkey,
    SignUp,
    /// A new session for a user whose sessions were just ended on their own request (a password change).
    Renewal,
    /// Administrator `by` acting as the user: at most [`IMPERSONATION_LIFETIME`], never extended, audited.
    Impersonation {
        by: UserId,
    },
}

pub use crate::domain::IMPERSONATION_LIFETIME;

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CreateSessionError {
    #[error("the account is banned")]
    Banned,
    #[error("the account does not exist")]
    UnknownUser,
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
}

pub(super) enum SessionsMsg {
    Create {
        user: UserId,
        remember_me: bool,
        client: Client,
        start: Start,
        reply: RpcReplyPort<Result<(SessionToken, Arc<Session>), CreateSessionError>>,
    },
    /// Removes those of `candidates` (found expired at `now` by a scan of the index off the actor) that still
    /// are: one may have been refreshed since the scan.
    SweepExpired {
        candidates: Vec<TokenHash>,
        now: Timestamp,
        reply: RpcReplyPort<Result<usize, Unavailable>>,
    },
    /// A use of the session that moves its end enough to be written ([`crate::domain::SessionUse::Due`]): the
    /// session as it then is (unchanged if another use wrote it meanwhile).
    Refresh {
        hash: TokenHash,
        reply: RpcReplyPort<Result<Option<Arc<Session>>, Unavailable>>,
    },
    /// [`Refresh`](Self::Refresh) that nobody waits for: a use by any call of the session (not get-session), whose
    /// request goes on meanwhile.
    Touch {
        hash: TokenHash,
    },
    /// The session's active organization (`organization/set-active`); `None` clears it.
    SetActive {
        hash: TokenHash,
        org: Option<OrgId>,
        reply: RpcReplyPort<Result<Option<Arc<Session>>, Unavailable>>,
    },
    /// The session's active team (`organization/set-active-team`), one of its active organization's; `None` clears it.
    SetActiveTeam {
        hash: TokenHash,
        team: Option<TeamId>,
        reply: RpcReplyPort<Result<Option<Arc<Session>>, Unavailable>>,
    },
    End {
        hash: TokenHash,
        reply: RpcReplyPort<Result<(), Unavailable>>,
    },
    /// A user ending their own sessions, or an administrator (`by`) ending a user's.
    Revoke {
        user: UserId,
        by: UserId,
        which: Revoke,
        ip: String,
        reply: RpcReplyPort<Result<usize, Unavailable>>,
    },
    /// Another actor's records, committed together with the end of every session of `users` and of every
    /// impersonation by `users` or `impersonators` (administrators banned, removed or demoted by the records).
    /// Also starts a session for each of `starts` (sign-ins), in the same transaction.
    CommitEnding {
        users: Vec<UserId>,
        impersonators: Vec<UserId>,
        ops: Vec<StoreOp>,
        /// With the account each starts for, as the records leave it (perhaps created by them).
        starts: Vec<(StartWith, Option<Arc<crate::domain::User>>)>,
        /// Sessions whose active organization or team changes, in the same transaction.
        actives: Vec<Activate>,
        reply: RpcReplyPort<Result<Vec<Started>, Refusal>>,
    },
    /// The users of a [`CommitEnding`](Self::CommitEnding) are published in their new state: stop fencing them.
    Unfence {
        users: Vec<UserId>,
    },
    /// Sessions another node started, extended or ended wait in the actor's inbox ([`super::inbox::Inbox`]):
    /// into the read index.
    Remote,
    Flush,
    /// The API keys' changes ([`api_keys`]).
    ApiKey(api_keys::KeyMsg),
}

impl super::Letter for SessionsMsg {
    fn caller_gone(&self) -> Option<bool> {
        match self {
            Self::Create { reply, .. } => gone(reply),
            Self::SweepExpired { reply, .. } | Self::Revoke { reply, .. } => gone(reply),
            Self::Refresh { reply, .. } => gone(reply),
            // Counted, so a flood of uses cannot grow the mailbox past its cap; never gone (nobody waits).
            Self::Touch { .. } => Some(false),
            Self::SetActive { reply, .. } | Self::SetActiveTeam { reply, .. } => gone(reply),
            Self::End { reply, .. } => gone(reply),
            // The users actor waits for its outcome without a timeout: its memory must match the disk.
            Self::CommitEnding { .. } => None,
            // Another node's changes: this node's memory must follow them whatever.
            Self::Remote => None,
            Self::Unfence { .. } | Self::Flush => None,
            Self::ApiKey(msg) => msg.caller_gone(),
        }
    }
}

/// Typed handle to the sessions actor.
#[derive(Clone)]
pub struct SessionsHandle(
    pub(super) Mailbox<SessionsMsg>,
    pub(super) Arc<super::Indexes>,
    pub(super) super::inbox::Post<super::remote::ForSessions>,
);

impl SessionsHandle {
    /// Hands another node's sessions to the actor's inbox; returns once they are in the read index.
    pub(super) async fn apply_remote(&self, change: super::remote::ForSessions) -> Result<(), Unavailable> {
        self.2.deliver(&self.0, SessionsMsg::Remote, change).await
    }

    /// Starts a session with a new token. Refused for a banned or unknown account, checked in message order after
    /// any ban, so a ban and a sign-in racing each other cannot leave a live session behind.
    pub async fn create(
        &self,
        user: UserId,
        remember_me: bool,
        client: Client,
        start: Start,
    ) -> Result<(SessionToken, Arc<Session>), CreateSessionError> {
        call(&self.0, |reply| SessionsMsg::Create { user, remember_me, client, start, reply }).await?
    }

    /// Removes expired sessions from memory and disk; returns how many.
    ///
    /// The scan over every session (a million take tens of milliseconds) runs on a blocking thread, not in the
    /// actor: on an event loop's thread it stalled the requests queued behind it, and in the actor it held up
    /// every sign-in and refresh meanwhile. The actor then ends only those still expired.
    pub async fn sweep_expired(&self) -> Result<usize, Unavailable> {
        let index = Arc::clone(&self.1);
        let now = Timestamp::now();
        let candidates =
            tokio::task::spawn_blocking(move || index.sessions.expired(now)).await.map_err(|_| Unavailable)?;
        call(&self.0, |reply| SessionsMsg::SweepExpired { candidates, now, reply }).await?
    }

    /// Writes a use of a session: its end moves as `[session]` says (extended, or slid by the idle limit, never past
    /// the absolute one). `None` when it has ended or expired meanwhile.
    pub async fn refresh(&self, hash: TokenHash) -> Result<Option<Arc<Session>>, Unavailable> {
        call(&self.0, |reply| SessionsMsg::Refresh { hash, reply }).await?
    }

    /// [`refresh`](Self::refresh) without waiting: for the session check of any call, which answers at once. Skipped
    /// when the mailbox is full (a later use writes it).
    pub fn touch(&self, hash: TokenHash) {
        super::mailbox::cast_counted(&self.0, SessionsMsg::Touch { hash });
    }

    /// Sets the active organization of the session `hash` (whose caller the facade has checked is a member);
    /// `None` when the session has ended meanwhile.
    pub async fn set_active(&self, hash: TokenHash, org: Option<OrgId>) -> Result<Option<Arc<Session>>, Unavailable> {
        call(&self.0, |reply| SessionsMsg::SetActive { hash, org, reply }).await?
    }

    /// Sets the active team of the session `hash` (whose caller the facade has checked is in it, a team of the
    /// session's active organization); `None` when the session has ended meanwhile.
    pub async fn set_active_team(
        &self,
        hash: TokenHash,
        team: Option<TeamId>,
    ) -> Result<Option<Arc<Session>>, Unavailable> {
        call(&self.0, |reply| SessionsMsg::SetActiveTeam { hash, team, reply }).await?
    }

    /// Ends one session (sign-out). Ending an unknown session succeeds.
    pub async fn end(&self, hash: TokenHash) -> Result<(), Unavailable> {
        call(&self.0, |reply| SessionsMsg::End { hash, reply }).await?
    }

    /// Ends sessions of `user` as `which` says, on behalf of `by` (the user, or an administrator), with an audit
    /// entry; returns how many ended. Only ever `user`'s.
    pub async fn revoke(&self, user: UserId, by: UserId, which: Revoke, ip: String) -> Result<usize, Unavailable> {
        call(&self.0, |reply| SessionsMsg::Revoke { user, by, which, ip, reply }).await?
    }

    /// Commits `ops` (another actor's records: a ban, a new password) in one transaction with the end of every
    /// session of `users`, so that both are durable or neither is; and starts the sessions `starts` (sign-ins,
    /// checked like [`create`](Self::create), against the account as `ops` leave it) in it too (an imported password
    /// hash replaced at sign-in, an account found or made through a provider: one answer per start, in order).
    /// Until [`unfence`](Self::unfence), no session of `users` is created or extended: one could otherwise slip in
    /// between the list of sessions to end and the publication of the change that ends them. See
    /// docs/design/ending-sessions-with-a-change.md.
    ///
    /// An administrator among `users` (banned, removed, given a new password), or among `impersonators` (demoted),
    /// loses the sessions they impersonate in the same commit: an impersonation never outlives its administrator's
    /// authority.
    ///
    /// No timeout: the caller must learn the real outcome, or its memory would disagree with the disk. A conflict
    /// with another node's change is handed back as such, so the caller answers it as on one node.
    pub(super) async fn commit_with(
        &self,
        users: Vec<UserId>,
        impersonators: Vec<UserId>,
        ops: Vec<StoreOp>,
        starts: Vec<(StartWith, Option<Arc<crate::domain::User>>)>,
        actives: Vec<Activate>,
    ) -> Result<Vec<Started>, Refusal> {
        let msg = |reply| SessionsMsg::CommitEnding { users, impersonators, ops, starts, actives, reply };
        match self.0.call(msg, None).await {
            Ok(ractor::rpc::CallResult::Success(result)) => result,
            _ => Err(Refusal::Unavailable),
        }
    }

    /// Ends the fence of [`commit_with`](Self::commit_with), once the caller has published its change.
    pub fn unfence(&self, users: Vec<UserId>) {
        let _ = self.0.send_message(SessionsMsg::Unfence { users });
    }

    pub(super) async fn drain(&self) {
        let _ = self.0.drain_and_wait(None).await;
    }
}
