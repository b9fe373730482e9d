//! The service facade: what the HTTP handlers (and nothing else in the front end) call.
//!
//! Reads go to the lock-free indexes, changes to the owning actor, passwords to the hashing pool; an operation
//! that needs several of them (sign-up: hash, create the account, start a session; sign-in: reserve an attempt,
//! verify, report, start a session) is orchestrated here, so a handler reads parse → facade → answer and no actor
//! waits on another one's work. Each operation has its own error enum, whose messages are the ones clients see.

mod account;
mod admin;
mod api_keys;
mod auth;
mod consents;
mod device;
mod id_token;
mod idp;
pub mod oauth;
mod org_roles;
mod organizations;
mod passkeys;
mod passwords;
mod provider;
mod query;
mod recovery;
mod saml;
mod scim;
mod scim_groups;
mod settings;
mod setup;
mod sso;
mod sso_oidc;
mod sso_policy;
mod sso_roles;
mod teams;
mod two_factor;
mod usernames;
mod way_in;
mod webhooks;

use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use tokio_util::task::TaskTracker;

use crate::actors::audit::AuditLog;
use crate::actors::counters::Counters;
// What the front end needs of the actors' vocabulary, re-exported so that `http/` names only this facade (a test
// in `http/` keeps it so).
pub use crate::actors::Unavailable;
pub use crate::actors::audit::{AuditSearch, Found as AuditFound};
pub use crate::actors::counters::{Counter, FLUSH_INTERVAL as COUNTERS_FLUSH_INTERVAL, Series};
pub use crate::actors::orgs::roles::RoleRef;
pub use crate::actors::orgs::{CreateOrgError, UpdateOrgError};
pub use crate::actors::sessions::KeyChange;
pub use crate::actors::sessions::{Client, Revoke};
pub use crate::actors::users::{DeleteOrgError, Place, UnlinkError, UpdateUserError, UserChange};
use crate::actors::{Handles, Indexes};
use crate::domain::{
    Clock, Password, RoleSet, Session, SessionLimits, SessionToken, SessionUse, Timestamp, User, UserId,
};
use crate::hashing::{HashError, Hasher};
use crate::mail::Templates;
use crate::metrics::{Levels, Metrics};
pub use crate::provider::clients::DEVICE_GRANT;
pub use crate::provider::{CLAIMS as PROVIDER_CLAIMS, SCOPES as PROVIDER_SCOPES};
use crate::store::Store;
use crate::store::follower::Freshness;
pub use account::{AccountError, Profile};
pub use admin::{AdminError, AdminNewUser, SessionRef};
pub use api_keys::{ApiKeyError, KeyAuthError, KeyOwner, NewKey, Verified as VerifiedKey, check_expires_in};
pub use auth::{SSO_REQUIRED, SignInError, SignInOutcome, SignUp, SignUpError, SignedIn, SignedUp};
pub use consents::{Consent, ConsentsError, consent_id};
pub use device::{DeviceAuthorization, DeviceError, DeviceRequest};
pub use id_token::{IdTokenError, IdTokenProof, IdTokenSignIn};
pub use idp::{
    AuthorizeRequest, Authorized, ConsentError, EndSession, EndSessionError, EndSessionRequest, Introspection,
    SessionEnded, TokenError, TokenRequest, Tokens, UserInfo, UserInfoError,
};
pub use org_roles::{RoleOf, RolesError};
pub use organizations::{FullOrganization, MemberError, OrgError, OrgRef, Target};
pub use passkeys::{
    Attachment, CeremonyToken, PasskeyBook, PasskeyError, Passkeys, credential_id_base64url, public_key_base64,
};
pub use passwords::PasswordCheck;
pub use provider::{
    Alg, AuthMethod, ClientChange, ClientError, Jwk, Key as SigningKey, KeyError, KeyStatus, NewClient, OAuthClient,
    Registrant, RegistrationError,
};
pub use query::{Field, Filter, Operator, Order, Page, Search, TextField, UserQuery, Window};
pub use recovery::{MailError, ResetPasswordError};
pub use saml::{AcsError, NewSamlProvider, SamlPost, SamlStart, SamlStartError};
pub use scim::discovery as scim_discovery;
pub use scim::{BearerError, Fault, Paging, ScimCaller, ScimScopes, ScimTokenError, TokenView};
pub use setup::{SETUP_LINK_TTL, SetupError, SetupLink};
pub use sso::{NewSsoProvider, SamlView, SsoChange, SsoError, SsoProvider, SsoProviders, TokenAuth as SsoTokenAuth};
pub use sso_oidc::{SsoChoice, SsoProtocol, SsoSignInError, SsoStart, SsoStarted};
pub use sso_policy::{SsoPolicy, SsoPolicyError};
pub use teams::{TeamMemberShown, TeamOf, TeamsError};
pub use two_factor::{Code, CodeFor, Enrolment, TwoFactorError, Verified};
pub use way_in::{CodeOutcome, CodeUseError, EmailCodeUse, LinkRequest, LinkSignIn, LinkSignInError, WayInError};
pub use webhooks::{Delivery, Endpoint, WebhookChange, WebhookError};

/// The facade. Cheap to clone; built by [`crate::runtime::Core`].
#[derive(Clone)]
pub struct Accounts {
    pub(crate) indexes: Arc<Indexes>,
    pub(crate) actors: Handles,
    pub(crate) hasher: Hasher,
    pub(crate) roles: RoleSet,
    pub(crate) audit: AuditLog,
    /// Only for its health: whether it accepts commits.
    pub(crate) store: Arc<Store>,
    /// What a session's end follows (`[session]`: its lifetime and refresh, the absolute and idle limits).
    pub(crate) session_limits: SessionLimits,
    /// The time the session rules read: the system clock, unless a test moved it (`store::FaultSwitch`).
    pub(crate) clock: Clock,
    /// Work that must finish even when its request is gone (a sign-in's password check); shutdown waits for it.
    pub(crate) tasks: TaskTracker,
    /// Message templates, when a mail transport is configured (`None`: the calls that send mail are refused).
    pub(crate) templates: Option<Arc<Templates>>,
    /// Sign-up opens no session and sign-in is refused until the address is verified.
    pub(crate) require_verification: bool,
    /// Who may create organizations, their limits, the invitations' lifetime and link.
    pub(crate) organizations: crate::config::OrganizationsConfig,
    /// The server's metrics (no-ops unless a metrics listener is configured).
    pub metrics: Arc<Metrics>,
    /// How far behind the shared database this node's state may be (always fresh on the embedded store).
    pub(crate) freshness: Arc<Freshness>,
    /// Webhook endpoints: their management (the deliverer runs on its own).
    pub(crate) webhooks: crate::webhooks::Webhooks,
    /// The deliverer's `[webhooks]` limits, replaced by a reload.
    pub(crate) webhook_delivery: crate::webhooks::deliver::DeliverySettings,
    /// The overview's counters (sign-ins, failures, sign-ups, lock-outs, resets per hour and day).
    pub(crate) counters: Arc<Counters>,
    /// The mail sender's queue, for the overview's outbox health (`None` without a mail transport).
    pub(crate) outbox: Option<crate::mail::MailQueue>,
    /// Sign-in through other identity providers: the providers and the flows in progress.
    pub(crate) flows: Arc<oauth::Flows>,
    /// Seals the secrets the server reads back (a TOTP secret).
    pub(crate) data_key: Arc<crate::data_key::DataKey>,
    /// The `issuer` of new TOTP URIs when the client gives none.
    pub(crate) two_factor_issuer: Arc<str>,
    /// Roles whose accounts must have a second factor before their sessions can do anything else.
    pub(crate) two_factor_roles: Arc<[String]>,
    /// `[two_factor] codes_by_mail`: the factor may be passed with a mailed code (when mail is configured).
    pub(crate) codes_by_mail: bool,
    /// The passkeys' relying party and store.
    pub(crate) passkeys: Arc<Passkeys>,
    /// The identity provider's signing keys.
    pub(crate) keys: Arc<crate::provider::KeyRing>,
    /// `[api_keys]`: the header, the key's session, the defaults of new keys.
    pub(crate) api_keys: Arc<crate::config::ApiKeysConfig>,
    /// `[session] fresh_age_secs`: how young a session must be for the sensitive calls (`None`: any age); replaced
    /// by a reload ([`Accounts::apply_settings`]).
    pub(crate) fresh_age: Arc<ArcSwap<Option<Duration>>>,
    /// What a new password must be, and the optional range lookup; replaced whole by a reload
    /// ([`Accounts::apply_settings`]).
    pub(crate) passwords: Arc<ArcSwap<PasswordCheck>>,
    /// `[magic_link]`: sign-in by a mailed link.
    pub(crate) magic_link: crate::config::MagicLinkConfig,
    /// `[email_otp]`: sign-in, verification and reset by a mailed code.
    pub(crate) email_otp: crate::config::EmailOtpConfig,
    /// The identity provider's clients.
    pub(crate) clients: crate::provider::Clients,
    /// `[username]`: the rules of usernames, when they are on (`None`: off).
    pub(crate) usernames: Option<Arc<crate::domain::UsernameRules>>,
    /// The identity provider's authorization codes and users' consents.
    pub(crate) grants: Arc<crate::provider::Grants>,
    /// Who may register a client at `/oauth2/register` (`[provider]`, read at start).
    pub(crate) registration: Arc<crate::config::ProviderConfig>,
    /// Organizations' single sign-on providers.
    pub(crate) sso: Arc<SsoProviders>,
    /// Organizations' SCIM tokens.
    pub(crate) scim: crate::scim::Tokens,
}

/// The outbox as the overview shows it: messages this node holds (waiting or being sent) and its cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outbox {
    pub waiting: usize,
    pub max: usize,
}

/// Why `/readyz` says 503.
#[derive(Debug)]
pub enum NotReady {
    /// The store refuses commits (a disk error, or the database is unreachable); the detail is for the log.
    Writes(String),
    /// Several nodes: this node has not caught up with the database for this long (its follower polls every
    /// 250 ms): it may be about to refuse session checks, and its writes fail.
    Stale(Duration),
}

/// A valid session and its user, as they are right now.
pub struct Current {
    pub session: Arc<Session>,
    pub user: Arc<User>,
    /// An API key standing in for its owner (`x-api-key`): a session made for this request, by no sign-in.
    pub by_key: bool,
}

impl Current {
    /// The caller as an administrator: their current role is `admin`, and this is their own session, not an
    /// impersonation. An administrator acting as someone else has that person's rights, never more, whatever
    /// role the person is given meanwhile; and an impersonation never grants an administrator's rights.
    pub fn administrator(&self) -> Option<&Arc<User>> {
        (self.user.role.is_admin() && self.session.impersonated_by().is_none()).then_some(&self.user)
    }

    /// Whom the audit log names for what this session does: the administrator behind an impersonation, else the
    /// user.
    pub fn actor(&self) -> UserId {
        self.session.impersonated_by().unwrap_or(self.user.id)
    }

    pub fn is_impersonation(&self) -> bool {
        self.session.impersonated_by().is_some()
    }
}

impl Accounts {
    /// Whether this session may do nothing but enrol a second factor (and sign out): `[two_factor]
    /// required_for_roles` names the account's role and it has none: neither an authenticator that is on
    /// ([`User::has_second_factor`]) nor a passkey. An administrator's impersonation is not held back (the
    /// administrator proved who they are on their own session).
    ///
    /// Passkeys are not held in memory: for an account of such a role without an authenticator, each call reads
    /// the store (on a blocking thread, never on the event loop), so a passkey deleted on another node counts no
    /// longer at once. Only those accounts pay it; every other caller answers without waiting.
    pub async fn must_enrol(&self, current: &Current) -> bool {
        !current.is_impersonation()
            && self.has_no_required_authenticator(&current.user)
            && !self.passkeys.book.holds_any_now(current.user.id).await
    }

    /// Whether `user` must sign in with a passkey: its role is in `[two_factor] required_for_roles`, it has no
    /// authenticator, and a passkey is what meets that rule for it ([`Self::must_enrol`]). A password or a provider
    /// is one factor; a session they opened would pass the rule on the passkey's strength without it.
    pub async fn passkey_required(&self, user: &User) -> bool {
        self.has_no_required_authenticator(user) && self.passkeys.book.holds_any_now(user.id).await
    }

    /// `[two_factor] required_for_roles` names `user`'s role and it has no authenticator that is on: its second
    /// factor, if it has one, is a passkey (the store knows; memory does not).
    fn has_no_required_authenticator(&self, user: &User) -> bool {
        self.two_factor_roles.iter().any(|r| r == user.role.as_str()) && !user.has_second_factor()
    }

    /// `[two_factor] required_for_roles`.
    pub fn two_factor_roles(&self) -> &[String] {
        &self.two_factor_roles
    }

    /// Administrators (not banned) with neither an authenticator that is on nor a passkey, for the console's
    /// status page.
    pub async fn administrators_without_second_factor(&self) -> Result<usize, Unavailable> {
        let without_totp: Vec<UserId> = self
            .indexes
            .users
            .active_admins()
            .into_iter()
            .filter(|id| self.indexes.users.get(*id).is_some_and(|u| !u.has_second_factor()))
            .collect();
        if without_totp.is_empty() {
            return Ok(0);
        }
        let with_passkey = self.passkeys.book.owners().await?;
        Ok(without_totp.iter().filter(|id| !with_passkey.contains(id)).count())
    }

    pub fn roles(&self) -> &RoleSet {
        &self.roles
    }

    /// Whether any account has role `admin` (banned or not): the bootstrap variables act only when none has.
    pub fn any_admin(&self) -> bool {
        self.indexes.users.any_admin()
    }

    /// Hashes a new password on the pool (the first administrator's, from the command line).
    pub(crate) async fn hash(&self, password: Password) -> Result<String, HashError> {
        self.hasher.hash(password).await
    }

    // --- the caller's session: the hot path --------------------------------------------------------------

    /// The session behind `token`, if it is live and its user exists and is not banned. Two map reads, no actor
    /// hop: this is the hot path of every application behind us. Reading the user's *current* state here is what
    /// makes a ban or a demotion count from the very next request.
    ///
    /// Several nodes: a state too far behind the database may miss a sign-out or ban made elsewhere, so it vouches
    /// for no session (fail closed). That is `Unavailable` (503), never "no session" (401): a client told 401
    /// takes its user for signed out, for the length of an outage.
    ///
    /// A use that moves the session's end enough to be written (the idle limit's slide, an extension) has the
    /// sessions actor write it without waiting for it: the request goes on at once.
    pub fn current(&self, token: &SessionToken) -> Result<Option<Current>, Unavailable> {
        if self.freshness.check().is_err() {
            return Err(Unavailable);
        }
        Ok(self.lookup(token).map(|(current, due)| {
            if due {
                self.actors.sessions.touch(token.hash());
            }
            current
        }))
    }

    /// [`current`](Self::current) without the freshness check, for callers that made it already; with whether this
    /// use is due to be written ([`SessionUse::Due`]). The session's end holds both limits
    /// ([`SessionLimits`]): the check is a few compares, and allocates nothing.
    fn lookup(&self, token: &SessionToken) -> Option<(Current, bool)> {
        let session = self.indexes.sessions.get(&token.hash())?;
        let now = self.clock.now();
        let due = match self.session_limits.check(&session, now) {
            SessionUse::Over => return None,
            SessionUse::Live => false,
            SessionUse::Due => true,
        };
        let user = self.indexes.users.get(session.user_id).filter(|u| !u.is_banned_at(now))?;
        // An impersonation lives only while the administrator behind it is one: banned, demoted or removed (here or
        // on another node), it ends with that change, and until the ending is applied it is refused here.
        if let Some(admin) = session.impersonated_by().as_ref() {
            self.indexes.users.get(*admin).filter(|a| a.role.is_admin() && !a.is_banned_at(now))?;
        }
        Some((Current { session, user, by_key: false }, due))
    }

    /// [`current`](Self::current) for get-session: a use due to be written (extended, or slid by the idle limit) is
    /// written before the answer when `may_refresh`, and the flag says so (the cookie then goes out again); without
    /// `may_refresh` (`disableRefresh`) nothing is written, as in better-auth. `None` also when the session ended
    /// between the read and the refresh.
    pub async fn session(
        &self,
        token: &SessionToken,
        may_refresh: bool,
    ) -> Result<Option<(Current, bool)>, Unavailable> {
        if self.freshness.check().is_err() {
            return Err(Unavailable);
        }
        let Some((current, due)) = self.lookup(token) else { return Ok(None) };
        if !due || !may_refresh {
            return Ok(Some((current, false)));
        }
        let refreshed = self.actors.sessions.refresh(token.hash()).await?;
        Ok(refreshed.map(|session| {
            let moved = session.expires_at != current.session.expires_at;
            (Current { session, user: current.user, by_key: false }, moved)
        }))
    }

    /// Whether `current`'s session was made within `[session] fresh_age_secs` (better-auth's `freshAge`; 0: always):
    /// what the calls that change how the account is signed into ask of it, so that a stolen or forgotten old
    /// session cannot. An API key's session never is (unless the check is off), though it is made for each request:
    /// a key is a lasting secret, not a sign-in, so it cannot make another key or change the password or a factor
    /// (ASVS 7.5.1); the plugin's own session for a key would pass better-auth's check.
    pub fn is_fresh(&self, current: &Current) -> bool {
        self.fresh_age
            .load()
            .is_none_or(|age| !current.by_key && current.session.created_at.plus(age) > self.clock.now())
    }

    // --- operations -------------------------------------------------------------------------------------------

    /// The levels a metrics scrape shows: accounts, sessions, organizations, hashes waiting.
    pub fn levels(&self) -> Levels {
        Levels {
            users: self.indexes.users.len(),
            sessions: self.indexes.sessions.len(),
            organizations: self.indexes.orgs.len(),
            hash_queue: self.hasher.waiting(),
            legacy_hashes: self.indexes.users.legacy_hashes(),
            newer_records_skipped: crate::store::newer_records_skipped(),
        }
    }

    /// The overview's series as of now: the last 24 hours and 30 days of each [`Counter`], every node's.
    pub async fn activity(&self) -> Result<Series, Unavailable> {
        self.counters.series(Timestamp::now()).await
    }

    /// Accounts created since `since` (newest first in the creation index: stops at the first older one).
    pub fn created_since(&self, since: Timestamp) -> usize {
        let mut n = 0;
        self.indexes.users.scan(None, true, |u| {
            let newer = u.created_at >= since;
            n += usize::from(newer);
            newer
        });
        n
    }

    /// The outbox's health, when mail is configured.
    pub fn outbox(&self) -> Option<Outbox> {
        self.outbox.as_ref().map(|q| {
            let (waiting, max) = q.depth();
            Outbox { waiting, max }
        })
    }

    /// `Ok` while the store accepts commits and (several nodes) this node's state is fresh; otherwise why not.
    pub fn readiness(&self) -> Result<(), NotReady> {
        if let Err(reason) = self.store.accepts_writes() {
            return Err(NotReady::Writes(reason));
        }
        self.freshness.ready().map_err(NotReady::Stale)
    }

    /// Waits (at most `limit`) for the work requests started and left behind, while the actors still answer.
    pub(crate) async fn finish_background_work(&self, limit: Duration) {
        self.tasks.close();
        if tokio::time::timeout(limit, self.tasks.wait()).await.is_err() {
            tracing::warn!("background request work still running after {limit:?}; stopping anyway");
        }
    }
}

/// The store's file in `data_dir` (its size is on the console's status panel).
pub fn store_file(data_dir: &std::path::Path) -> std::path::PathBuf {
    crate::store::file_in(data_dir)
}

/// When the newest scheduled snapshot in the backup directory `dir` was written, if there is one.
pub fn newest_backup(dir: &std::path::Path) -> Option<std::time::SystemTime> {
    crate::ops::backup::snapshots(dir)
        .into_iter()
        .filter_map(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok())
        .max()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use tokio_util::sync::CancellationToken;

    use crate::alloc_count::allocations_in;
    use crate::config::Config;
    use crate::domain::{Session, SessionId, SessionRare, SessionToken, Timestamp, User};
    use crate::runtime::Core;
    use crate::store::{FaultSwitch, Store, StoreOp, convert};

    /// A core started on a store of one account with a session of an hour, and whatever `more` adds for that
    /// account, under the default configuration changed by `configure`. The directory lives as long as the core.
    async fn one_account(
        more: impl FnOnce(&User, Timestamp) -> Vec<StoreOp>,
        configure: impl FnOnce(&mut Config),
    ) -> (tempfile::TempDir, Core, User, SessionToken) {
        let dir = tempfile::tempdir().unwrap();
        let now = Timestamp::now();
        let user = User::fixture("one@example.com", now);
        let token = SessionToken::generate();
        let session = Session {
            id: SessionId::new(),
            user_id: user.id,
            expires_at: now.plus(Duration::from_secs(3600)),
            created_at: now,
            updated_at: now,
            ip_address: "127.0.0.1".into(),
            user_agent: "test".into(),
            remember_me: true,
            rare: SessionRare::default(),
        };
        let mut ops = vec![
            StoreOp::PutUser(convert::user_record(&user)),
            StoreOp::PutSession(token.hash(), convert::session_record(&session)),
        ];
        ops.extend(more(&user, now));
        Store::open(dir.path()).unwrap().commit(&ops).unwrap();
        let mut config = Config { data_dir: dir.path().into(), ..Config::default() };
        configure(&mut config);
        let core = Core::start(&config, FaultSwitch::default(), CancellationToken::new()).await.unwrap();
        (dir, core, user, token)
    }

    /// The session check behind every request of every application (the cookie's token parsed and hashed, the
    /// session and its user read and checked) allocates nothing: at a million sessions and tens of thousands of
    /// checks a second, an allocation per check is the allocator's locks and the cache misses of fresh memory,
    /// a cost no functional test sees and a benchmark shows only as noise.
    #[tokio::test]
    async fn the_session_check_allocates_nothing() {
        let (_dir, core, user, token) = one_account(|_, _| Vec::new(), |_| ()).await;
        let cookie = token.as_str().to_owned();
        let check = || SessionToken::parse(&cookie).and_then(|token| core.accounts.current(&token).unwrap());
        // The first check may set up what a thread needs once (the maps' reclamation records).
        assert!(check().is_some(), "the stored session opens");
        let (current, allocations) = allocations_in(check);
        assert_eq!(current.map(|c| c.user.id), Some(user.id));
        assert_eq!(allocations, 0, "the session check allocated {allocations} times");
        core.stop().await;
    }

    /// `[two_factor] required_for_roles` asks the store whether an account of such a role without an authenticator
    /// has a passkey, on every call such an account makes. That read must leave the event loop to the other
    /// connections: the guard's future waits for it instead of reading in place. A read in place answers at the
    /// first poll. To make "awaited on a blocking thread" certain rather than likely (on a loaded machine a woken
    /// blocking thread can finish the read before the first poll), every thread of the runtime's blocking pool is
    /// held busy while the guard is polled once, so a read sent there cannot have run yet.
    #[test]
    fn the_passkey_policy_reads_the_store_off_the_event_loop() {
        use std::task::{Context, Waker};

        use crate::domain::{Passkey, PasskeyId};

        const BLOCKING_THREADS: usize = 4;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .max_blocking_threads(BLOCKING_THREADS)
            .build()
            .unwrap();
        runtime.block_on(async {
            let passkey = |user: &User, now| Passkey {
                id: PasskeyId::new(),
                user_id: user.id,
                name: None,
                credential_id: vec![1, 2, 3],
                public_key: vec![4, 5, 6],
                counter: 0,
                backup_eligible: false,
                backed_up: false,
                transports: Vec::new(),
                aaguid: None,
                created_at: now,
            };
            let (_dir, core, _, token) = one_account(
                |user, now| vec![StoreOp::PutPasskey(convert::passkey_record(&passkey(user, now)))],
                |config| config.two_factor.required_for_roles = vec!["user".into()],
            )
            .await;
            let current = core.accounts.current(&token).unwrap().expect("the stored session opens");

            // Every blocking thread waits for `release`: a read handed to the pool queues behind them.
            let (release, held) = std::sync::mpsc::channel::<()>();
            let held = Arc::new(std::sync::Mutex::new(held));
            let blockers: Vec<_> = (0..BLOCKING_THREADS)
                .map(|_| {
                    let held = Arc::clone(&held);
                    tokio::task::spawn_blocking(move || drop(held.lock().map(|h| h.recv())))
                })
                .collect();
            let must = {
                let mut check = std::pin::pin!(core.accounts.must_enrol(&current));
                let first = check.as_mut().poll(&mut Context::from_waker(Waker::noop()));
                assert!(first.is_pending(), "the passkey policy read the store on the event loop's thread");
                drop(release);
                for blocker in blockers {
                    blocker.await.unwrap();
                }
                tokio::time::timeout(Duration::from_secs(30), check).await.expect("the read finishes")
            };
            assert!(!must, "a passkey meets the policy");
            core.stop().await;
        });
    }
}
