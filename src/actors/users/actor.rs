//! The users actor itself: applies [`super::rules`] in message order to the overlay, writes through it, and
//! publishes to the index once durable. Changes that end a user's sessions (a ban, a new password) are committed
//! by the sessions actor together with the end of those sessions: one transaction.

use std::collections::HashMap;
use std::sync::Arc;

use ractor::{Actor, ActorCell, ActorProcessingErr, ActorRef};

use super::{AttemptPolicy, ExternalError, UsersHandle, UsersMsg};
use crate::actors::attempts::AttemptLimiter;
use crate::actors::inbox::{self, Inbox};
use crate::actors::linked::LinkedAccount;
use crate::actors::overlay::{self, Overlay, Refusal};
use crate::actors::remote::{ForUsers, MemberChange};
use crate::actors::sessions::{StartWith, Started};
use crate::actors::{Indexes, Mailbox, SessionsHandle, Unavailable, Waiting};
use crate::domain::{
    Email, Invitation, InvitationId, Mail, Membership, OneTimeToken, OrgId, Organization, Timestamp, TokenHash,
    TokenKind, User, UserId, Username,
};
use crate::mail::MailQueue;
use crate::store::own::Key;
use crate::store::{Conflict, StoreOp, StoreWriter, convert};

mod accounts;
mod attempts;
mod linked;
mod members;
mod scim;
mod second_factor;
mod tokens;
mod way_in;

pub(in crate::actors) async fn spawn(
    indexes: Arc<Indexes>,
    writer: StoreWriter,
    sessions: SessionsHandle,
    attempts: AttemptPolicy,
    mail: Option<MailQueue>,
    supervisor: ActorCell,
) -> Result<UsersHandle, ActorProcessingErr> {
    let waiting = Waiting::default();
    let actor = UsersActor { indexes, writer, sessions, attempts, mail, waiting: waiting.clone() };
    let (post, inbox) = inbox::inbox();
    let (actor, _) = Actor::spawn_linked(None, actor, inbox, supervisor).await?;
    Ok(UsersHandle(Mailbox::new(actor, waiting), post))
}

pub(super) struct UsersActor {
    /// The calls waiting in this actor's mailbox (see [`crate::actors::mailbox`]).
    waiting: Waiting,
    pub(super) indexes: Arc<Indexes>,
    writer: StoreWriter,
    sessions: SessionsHandle,
    attempts: AttemptPolicy,
    /// Wakes the mail sender once a batch with messages is durable.
    pub(super) mail: Option<MailQueue>,
}

/// Changes not yet durable. Lookups see these first, so messages in one batch build on each other.
pub(super) struct State {
    attempts: AttemptLimiter,
    /// Accounts created or changed (`Some`) or deleted (`None`) in this batch.
    overlay: Overlay<UserId, Option<Arc<User>>>,
    /// The e-mails of the accounts in the overlay: the uniqueness check must see them too.
    emails: HashMap<Email, UserId>,
    /// The username skeletons of the accounts in the overlay (see [`UserIndex::username_look_alike`]), likewise.
    usernames: HashMap<Box<str>, UserId>,
    /// Users whose sessions end with this batch (banned, or given a new password): committed in the same
    /// transaction as the batch, so the change and the end of the sessions are durable together or not at all.
    ending: Vec<UserId>,
    /// Administrators demoted in this batch: the sessions they impersonate end in the same transaction (a ban or a
    /// removal is in `ending`, which ends those too).
    demoted: Vec<UserId>,
    /// One-time tokens issued (`Some`) or used up (`None`) in this batch, published with it.
    tokens: HashMap<TokenHash, Option<Arc<OneTimeToken>>>,
    /// Messages written to the outbox in this batch, handed to the sender once durable.
    pub(super) mails: Vec<Mail>,
    /// Memberships written (`Some`) or ended (`None`) in this batch, published with it.
    pub(super) members: Vec<(OrgId, UserId, Option<Arc<Membership>>)>,
    /// Invitations written or removed in this batch, published with it.
    pub(super) invitations: Vec<(InvitationId, Option<Arc<Invitation>>)>,
    /// The batch is to be flushed after this message: its membership changes must be in the read index before
    /// the next message reads it ([`members`]).
    pub(super) flush_now: bool,
    /// Sign-ins whose session starts in this batch's commit (with their account's re-hashed password, or its
    /// records made or changed through a provider), and how each is answered once the commit's outcome is known.
    starting: Vec<(StartWith, StartAnswer)>,
    /// Sessions whose active organization changes in this batch's commit (a member joining or leaving through
    /// that session, [`members`]).
    activating: Vec<crate::actors::sessions::Activate>,
    /// Organizations deleted in this batch: nobody joins them, and they leave the read index once durable.
    closing_orgs: Vec<OrgId>,
    /// Organizations the organizations actor lent this batch (an invitation accepted into their teams), in their
    /// new version: published once durable, before the loan ends.
    pub(super) lent_orgs: Vec<Arc<Organization>>,
    /// Linked identities added (`Some`) or removed (`None`) in this batch, published with it.
    accounts: HashMap<[u8; 16], Option<Arc<LinkedAccount>>>,
    /// Other nodes' changes (see [`Inbox`]).
    inbox: Inbox<ForUsers>,
}

/// Answers a sign-in of [`State::starting`] with its session, or with why the commit was refused (a conflict
/// with another node's change is the caller's to interpret).
type StartAnswer = Box<dyn FnOnce(Result<Started, Refusal>) + Send>;

/// What a conflict on several nodes means to an external sign-in.
type ExternalGuard = Box<dyn Fn(&Conflict) -> Option<ExternalError> + Send>;

impl Actor for UsersActor {
    type Msg = UsersMsg;
    type State = State;
    type Arguments = Inbox<ForUsers>;

    async fn pre_start(&self, _: ActorRef<UsersMsg>, inbox: Inbox<ForUsers>) -> Result<State, ActorProcessingErr> {
        Ok(State {
            attempts: AttemptLimiter::new(self.attempts.max_failures, self.attempts.window),
            overlay: Overlay::default(),
            emails: HashMap::new(),
            usernames: HashMap::new(),
            ending: Vec::new(),
            demoted: Vec::new(),
            tokens: HashMap::new(),
            mails: Vec::new(),
            starting: Vec::new(),
            activating: Vec::new(),
            closing_orgs: Vec::new(),
            lent_orgs: Vec::new(),
            members: Vec::new(),
            invitations: Vec::new(),
            flush_now: false,
            accounts: HashMap::new(),
            inbox,
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<UsersMsg>,
        msg: UsersMsg,
        state: &mut State,
    ) -> Result<(), ActorProcessingErr> {
        if !self.waiting.take(&msg) {
            return Ok(());
        }
        match msg {
            UsersMsg::Account(msg) => self.account(state, msg),
            UsersMsg::Attempt(msg) => self.attempt(state, msg, &myself),
            UsersMsg::Token(msg) => self.token(state, msg),
            UsersMsg::Linked(msg) => self.linked(state, msg),
            UsersMsg::Members(msg) => self.member_change(state, msg),
            UsersMsg::Factor(msg) => self.factor(state, msg),
            UsersMsg::WayIn(msg) => self.way_in(state, msg),
            UsersMsg::Scim(msg) => self.scim(state, msg),
            UsersMsg::Remote => {
                state.inbox.drain(|change| self.apply_remote(change));
                return Ok(());
            }
            UsersMsg::Flush => {
                self.flush(state).await;
                return Ok(());
            }
        }
        self.after(state, &myself).await
    }
}

impl UsersActor {
    /// After each message: make sure what it staged gets flushed.
    async fn after(&self, state: &mut State, myself: &ActorRef<UsersMsg>) -> Result<(), ActorProcessingErr> {
        if std::mem::take(&mut state.flush_now) || state.overlay.schedule_flush(myself, || UsersMsg::Flush) {
            self.flush(state).await;
        }
        Ok(())
    }

    /// The live token of `user` and `kind` (pending changes first).
    /// Every live token of `user` for `kind`, this batch's included.
    fn live_tokens(&self, state: &State, user: UserId, kind: TokenKind) -> Vec<(TokenHash, Arc<OneTimeToken>)> {
        let mine = |t: &OneTimeToken| t.user_id == user && t.kind == kind;
        let mut live: Vec<(TokenHash, Arc<OneTimeToken>)> = state
            .tokens
            .iter()
            .filter_map(|(h, t)| t.as_ref().filter(|t| mine(t)).map(|t| (*h, Arc::clone(t))))
            .collect();
        for hash in self.indexes.tokens.live(user, kind) {
            if !state.tokens.contains_key(&hash)
                && let Some(token) = self.indexes.tokens.get(&hash)
            {
                live.push((hash, token));
            }
        }
        live
    }

    /// The live token of `user` for `kind` that the client `requested_by` asked for.
    fn token_asked_by(
        &self,
        state: &State,
        user: UserId,
        kind: TokenKind,
        requested_by: Option<[u8; 16]>,
    ) -> Option<TokenHash> {
        self.live_tokens(state, user, kind).into_iter().find(|(_, t)| t.requested_by == requested_by).map(|(h, _)| h)
    }

    /// Ends every live token of `user` for `kind` (the one just used, if any, among them): a new password (set with
    /// a reset link, changed, or set by an administrator) leaves no reset link alive, and an address proven with
    /// one verification link no other verification link: a link asked for before must not undo the change.
    fn end_tokens(&self, state: &mut State, user: UserId, kind: TokenKind) -> Vec<StoreOp> {
        let live = self.live_tokens(state, user, kind);
        live.into_iter()
            .map(|(hash, _)| {
                state.tokens.insert(hash, None);
                StoreOp::DeleteToken(hash)
            })
            .collect()
    }

    /// What a new password ends besides sessions: its reset links, the trusted devices (a password change is how
    /// a user takes a lost device's trust back) and the sign-ins waiting for a second factor after the old one.
    fn end_password_bound(&self, state: &mut State, user: UserId) -> Vec<StoreOp> {
        let mut ops = self.end_tokens(state, user, TokenKind::PasswordReset);
        ops.extend(self.end_tokens(state, user, TokenKind::TrustedDevice));
        ops.extend(self.end_tokens(state, user, TokenKind::TwoFactorChallenge { remember_me: true }));
        ops.extend(self.end_tokens(state, user, TokenKind::TwoFactorChallenge { remember_me: false }));
        ops.extend(self.end_tokens(state, user, TokenKind::TwoFactorOtp));
        ops
    }

    /// The account a live token of `kind` belongs to, if `hash` is one.
    fn token_holder(&self, state: &State, hash: &TokenHash, kind: TokenKind) -> Option<Arc<User>> {
        let now = Timestamp::now();
        let token = match state.tokens.get(hash) {
            Some(pending) => pending.clone(),
            None => self.indexes.tokens.get(hash),
        };
        token.filter(|t| t.kind == kind && !t.is_expired(now)).and_then(|t| self.get(state, t.user_id))
    }

    /// The identities linked to `user` as they will be once the pending batch is durable.
    fn accounts_of(&self, state: &State, user: UserId) -> Vec<Arc<LinkedAccount>> {
        let mut linked: Vec<Arc<LinkedAccount>> =
            self.indexes.accounts.of_user(user).into_iter().filter(|a| !state.accounts.contains_key(&a.id)).collect();
        linked.extend(state.accounts.values().flatten().filter(|a| a.user_id == user).cloned());
        linked
    }

    /// The account `subject` at `provider` is linked to, pending changes first.
    fn identity_owner(&self, state: &State, provider: &str, subject: &str) -> Option<Arc<LinkedAccount>> {
        let pending = state.accounts.values().flatten().find(|a| a.provider == provider && a.subject == subject);
        if let Some(account) = pending {
            return Some(Arc::clone(account));
        }
        self.indexes.accounts.by_identity(provider, subject).filter(|a| !state.accounts.contains_key(&a.id))
    }

    /// Another node's accounts, tokens, memberships and identities, but what this node's own commits have written
    /// since (an older change never undoes a newer one).
    fn apply_remote(&self, ForUsers { users, tokens, members, accounts, gate }: ForUsers) {
        for (id, user) in users {
            let key = Key::User(id.to_bytes());
            if !gate.admits(key) {
                continue;
            }
            gate.applied(key);
            match user {
                Some(user) => self.indexes.users.publish(user),
                None => self.indexes.users.remove(id),
            }
        }
        for (hash, token) in tokens {
            if gate.admits(Key::Token(hash)) {
                self.indexes.tokens.publish(hash, token);
            }
        }
        for change in members {
            let key = change.key();
            if !gate.admits(key) {
                continue;
            }
            gate.applied(key);
            match change {
                MemberChange::Put(m) => self.indexes.members.publish_member(m),
                MemberChange::Delete(org, user) => self.indexes.members.remove_member(org, user),
                MemberChange::PutInvitation(i) => self.indexes.members.publish_invitation(i),
                MemberChange::DeleteInvitation(id) => self.indexes.members.remove_invitation(id),
            }
        }
        for (id, account) in accounts {
            if gate.admits(Key::Account(id)) {
                self.indexes.accounts.publish(id, account);
            }
        }
    }

    pub(super) fn get(&self, state: &State, id: UserId) -> Option<Arc<User>> {
        match state.overlay.get(&id) {
            Some(pending) => pending.clone(),
            None => self.indexes.users.get(id),
        }
    }

    pub(super) fn email_owner(&self, state: &State, email: &Email) -> Option<UserId> {
        state.emails.get(email).copied().or_else(|| self.indexes.users.by_email(email).map(|u| u.id))
    }

    /// Whether `name`, or a name that looks like it, belongs to an account other than `me`, as the pending batch
    /// leaves them.
    pub(super) fn username_taken(&self, state: &State, name: &Username, me: Option<UserId>) -> bool {
        let owner = state.usernames.get(&name.skeleton()).copied().or_else(|| {
            let owner = self.indexes.users.username_look_alike(name)?;
            // An owner that renamed or went in this batch no longer holds it.
            match state.overlay.get(&owner) {
                Some(Some(now)) => now.username().is_some_and(|n| n.skeleton() == name.skeleton()).then_some(owner),
                Some(None) => None,
                None => Some(owner),
            }
        });
        owner.is_some_and(|owner| Some(owner) != me)
    }

    pub(super) fn stage(&self, state: &mut State, user: User, ends_sessions: bool) -> Arc<User> {
        if self.attempts.shared {
            // Several nodes: the record is written whole, computed from what this node holds; the database checks
            // that it still holds that too, so a change another node made meanwhile (a ban) is not undone.
            let before = self.get(state, user.id).map(|u| Box::new(convert::user_record(&u)));
            state.overlay.push_ops([StoreOp::ExpectUser { id: user.id.to_bytes(), record: before }]);
        }
        if ends_sessions {
            state.ending.push(user.id);
        }
        if self.get(state, user.id).is_some_and(|before| before.is_active_admin()) && !user.is_active_admin() {
            state.demoted.push(user.id);
        }
        let user = Arc::new(user);
        state.emails.insert(user.email_address(), user.id);
        if let Some(name) = user.username() {
            state.usernames.insert(name.skeleton(), user.id);
        }
        state.overlay.stage(user.id, Some(Arc::clone(&user)));
        user
    }

    /// The members of `org` as they will be once the pending batch is durable.
    fn members(&self, state: &State, org: OrgId) -> Vec<Arc<User>> {
        let mut ids: Vec<UserId> = self.indexes.users.members_of(org).iter().map(|u| u.id).collect();
        ids.extend(state.overlay.iter().map(|(id, _)| *id));
        ids.sort_unstable();
        ids.dedup();
        ids.into_iter().filter_map(|id| self.get(state, id)).filter(|u| u.organization_id == Some(org)).collect()
    }

    /// Active administrators as they will be once the pending batch is durable.
    fn active_admin_count(&self, state: &State) -> usize {
        let committed =
            self.indexes.users.active_admins().into_iter().filter(|id| state.overlay.get(id).is_none()).count();
        committed + state.overlay.values().flatten().filter(|u| u.is_active_admin()).count()
    }

    async fn flush(&self, state: &mut State) {
        let writes = state.overlay.writes();
        let mut ending = std::mem::take(&mut state.ending);
        ending.sort_unstable();
        ending.dedup();
        let demoted = std::mem::take(&mut state.demoted);
        state.emails.clear();
        state.usernames.clear();
        let (users, writer, sessions) = (&self.indexes.users, &self.writer, &self.sessions);
        let (ending_now, demoted_now) = (ending.clone(), demoted.clone());
        // Each session starts against its account as this batch leaves it (made in it, perhaps).
        let (starts, start_answers): (Vec<_>, Vec<StartAnswer>) = std::mem::take(&mut state.starting)
            .into_iter()
            .map(|(start, answer)| {
                let account = self.get(state, start.user);
                ((start, account), answer)
            })
            .unzip();
        let activating = std::mem::take(&mut state.activating);
        let mut started: Option<Result<Vec<Started>, Refusal>> = None;
        let started_slot = &mut started;
        let commit = |ops| async move {
            if ending_now.is_empty() && demoted_now.is_empty() && starts.is_empty() && activating.is_empty() {
                overlay::write(writer, ops).await
            } else {
                // The sessions actor commits our records with the end of those users' sessions (and of the
                // impersonations by those users and the demoted), the start of the sign-ins' sessions and the
                // sessions' new active organizations: one transaction.
                let committed = sessions.commit_with(ending_now, demoted_now, ops, starts, activating).await;
                let outcome = committed.as_ref().map(|_| ()).map_err(Refusal::clone);
                *started_slot = Some(committed);
                outcome
            }
        };
        let tokens = std::mem::take(&mut state.tokens);
        let accounts = std::mem::take(&mut state.accounts);
        let mails = std::mem::take(&mut state.mails);
        let members = std::mem::take(&mut state.members);
        let invitations = std::mem::take(&mut state.invitations);
        let closed = std::mem::take(&mut state.closing_orgs);
        let lent = std::mem::take(&mut state.lent_orgs);
        // After publishing, before answering: the sessions actor reads the users' new state from the index from
        // then on (a caller's next request, a new session after a password change, is not refused); the tokens
        // are usable and the mail sender has the messages.
        let then = |durable: bool| {
            if !ending.is_empty() || !demoted.is_empty() {
                sessions.unfence(ending.into_iter().chain(demoted).collect());
            }
            if durable {
                // The organizations actor writes this index otherwise; it is waiting for this very deletion
                // (see `Accounts::delete_organization`), so the two never write it at once.
                closed.into_iter().for_each(|org| self.indexes.orgs.remove(org));
                // Likewise for an organization lent to this batch (see `OrgsHandle::lend`).
                lent.into_iter().for_each(|org| self.indexes.orgs.publish(org));
                tokens.into_iter().for_each(|(hash, token)| self.indexes.tokens.publish(hash, token));
                for (org, user, member) in members {
                    match member {
                        Some(member) => self.indexes.members.publish_member(member),
                        None => self.indexes.members.remove_member(org, user),
                    }
                }
                for (id, invitation) in invitations {
                    match invitation {
                        Some(invitation) => self.indexes.members.publish_invitation(invitation),
                        None => self.indexes.members.remove_invitation(id),
                    }
                }
                accounts.into_iter().for_each(|(id, account)| self.indexes.accounts.publish(id, account));
                if let Some(queue) = &self.mail {
                    mails.into_iter().for_each(|mail| queue.push(mail));
                }
            }
        };
        let publish = |(id, user): (UserId, Option<Arc<User>>)| match user {
            Some(user) => users.publish(user),
            None => users.remove(id),
        };
        let flushing = state.overlay.flush_then(commit, publish, then);
        // Other nodes' changes meanwhile: a ban made there does not wait for this commit.
        let apply = |change| self.apply_remote(change);
        let durable = state.inbox.while_flushing(flushing, |change| change.split(&writes), apply).await;
        // After publishing: the signed-in user's next request sees the new records and the session.
        let mut started = match started {
            Some(Ok(started)) if durable => Ok(started.into_iter()),
            Some(Err(refusal)) => Err(refusal),
            _ => Err(Refusal::Unavailable),
        };
        for answer in start_answers {
            answer(match &mut started {
                Ok(each) => Ok(each.next().unwrap_or(Err(Unavailable.into()))),
                Err(refusal) => Err(refusal.clone()),
            });
        }
    }
}

fn put(user: &User) -> StoreOp {
    StoreOp::PutUser(convert::user_record(user))
}
