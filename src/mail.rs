//! Mail: messages rendered from the repository's templates (`templates/`), and the sender that empties the
//! durable outbox.
//!
//! A message is written to the outbox in the same commit as what it announces (a reset token), so a request
//! never waits on the mail server and a crash between the answer and the send loses nothing: the outbox is read
//! again at start-up. The sender retries with backoff and deletes a message once a server has accepted it
//! (at least once: a crash between the acceptance and the deletion sends it again).
//!
//! A flood of requests must not delay the next real one past its link's life, so the sender sends several
//! messages at once (`[email] send_concurrency`), takes the newest ready message first, keeps at most one waiting
//! message per recipient and subject (a newer one replaces an older one still waiting), and the outbox has a
//! cap (`[email] max_outbox`) beyond which requests for mail are refused.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use lettre::message::{Mailbox, MultiPart};
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::domain::{CodePurpose, Email, Mail, MailId, SessionToken, Timestamp, TokenKind, User, action};
use crate::store::{Claim, PgStore, StoreOp, StoreWriter, audit};

const RESET_TEXT: &str = include_str!("../templates/reset-password.txt");
const RESET_HTML: &str = include_str!("../templates/reset-password.html");
const VERIFY_TEXT: &str = include_str!("../templates/verify-email.txt");
const VERIFY_HTML: &str = include_str!("../templates/verify-email.html");
const INVITATION_TEXT: &str = include_str!("../templates/invitation.txt");
const INVITATION_HTML: &str = include_str!("../templates/invitation.html");
const CODE_TEXT: &str = include_str!("../templates/two-factor-code.txt");
const CODE_HTML: &str = include_str!("../templates/two-factor-code.html");
const TEST_TEXT: &str = include_str!("../templates/test-mail.txt");
const TEST_HTML: &str = include_str!("../templates/test-mail.html");
const MAGIC_LINK_TEXT: &str = include_str!("../templates/magic-link.txt");
const MAGIC_LINK_HTML: &str = include_str!("../templates/magic-link.html");
const EMAIL_CODE_TEXT: &str = include_str!("../templates/email-code.txt");
const EMAIL_CODE_HTML: &str = include_str!("../templates/email-code.html");

/// Where a reset link leads when the application named no page of its own: the service's form (`http::pages`).
pub const RESET_PAGE: &str = "/auth/reset-password";
/// Where a verification link leads when the application named no page of its own (`http::pages`).
pub const VERIFIED_PAGE: &str = "/auth/email-verified";

/// The longest wait between two attempts at one message.
const MAX_BACKOFF: Duration = Duration::from_secs(300);

/// Renders messages: the templates, the public URL links start with, and the reset lifetime.
pub struct Templates {
    link_base: String,
    reset_ttl: Duration,
    verify_ttl: Duration,
    magic_link_ttl: Duration,
    email_code_ttl: Duration,
}

impl Templates {
    pub fn new(config: &Config) -> Self {
        let base = config
            .email
            .link_base_url
            .clone()
            .or_else(|| config.base_url.clone())
            .unwrap_or_else(|| format!("http://{}", config.listen));
        Self {
            link_base: base.trim_end_matches('/').to_owned(),
            reset_ttl: Duration::from_secs(config.email.reset_token_ttl_secs),
            verify_ttl: Duration::from_secs(config.email.verification_token_ttl_secs),
            magic_link_ttl: Duration::from_secs(config.magic_link.ttl_secs),
            email_code_ttl: Duration::from_secs(config.email_otp.ttl_secs),
        }
    }

    pub fn ttl(&self, kind: TokenKind) -> Duration {
        match kind {
            TokenKind::PasswordReset => self.reset_ttl,
            TokenKind::EmailVerification => self.verify_ttl,
            TokenKind::TwoFactorChallenge { .. } => crate::domain::two_factor::CHALLENGE_TTL,
            TokenKind::TrustedDevice => crate::domain::two_factor::TRUSTED_DEVICE_TTL,
            TokenKind::TwoFactorOtp => crate::domain::two_factor::OTP_TTL,
            TokenKind::MagicLink => self.magic_link_ttl,
            TokenKind::EmailCode(_) => self.email_code_ttl,
        }
    }

    /// The message for `user` that carries `token` (and the client's `callbackURL`, else the service's own page)
    /// in its link.
    pub fn render(&self, kind: TokenKind, user: &User, token: &SessionToken, callback: Option<&str>) -> Mail {
        let (mut link, subject, text, html) = match kind {
            TokenKind::PasswordReset => (
                format!("{}/api/auth/reset-password/{}", self.link_base, token.as_str()),
                "Reset your password",
                RESET_TEXT,
                RESET_HTML,
            ),
            TokenKind::EmailVerification => (
                format!("{}/api/auth/verify-email?token={}", self.link_base, token.as_str()),
                "Confirm your e-mail address",
                VERIFY_TEXT,
                VERIFY_HTML,
            ),
            // Cookies, never links: nothing calls this with them (`issue_token` takes only the mailed kinds); a
            // mailed code has its own message ([`Templates::render_code`]).
            TokenKind::TwoFactorChallenge { .. }
            | TokenKind::TrustedDevice
            | TokenKind::TwoFactorOtp
            | TokenKind::MagicLink
            | TokenKind::EmailCode(_) => {
                unreachable!("a {kind:?} token is never an account's mailed link")
            }
        };
        // Without a page of the application's own, the link leads to the service's, so a deployment without
        // pages works end to end; the link endpoints redirect there as to any callback.
        let callback = callback.unwrap_or(match kind {
            TokenKind::PasswordReset => RESET_PAGE,
            // The verification link; the cookie kinds never get here (above).
            _ => VERIFIED_PAGE,
        });
        link.push(if link.contains('?') { '&' } else { '?' });
        link.push_str("callbackURL=");
        link.extend(url::form_urlencoded::byte_serialize(callback.as_bytes()));
        let minutes = (self.ttl(kind).as_secs() / 60).to_string();
        // The account's name is not in the message: anyone can choose it (at sign-up), and a security mail that
        // opens with text of the requester's choosing ("…confirm at https://evil.test instead") is a phishing
        // vehicle with this server's genuine sender and link beside it.
        let fill = |template: &str, escape: fn(&str) -> String| {
            template
                .replace("{{email}}", &escape(user.email()))
                .replace("{{minutes}}", &minutes)
                .replace("{{link}}", &escape(&link))
        };
        Mail {
            id: MailId::new(),
            to: user.email_address(),
            subject: subject.to_owned(),
            text: fill(text, str::to_owned),
            html: fill(html, html_escape),
            created_at: Timestamp::now(),
        }
    }
}

impl Templates {
    /// An administrator's test message to `to` (`POST /api/admin/test-mail`): no link, no token.
    pub fn render_test(&self, to: &Email) -> Mail {
        let now = Timestamp::now();
        let time = now.to_rfc3339();
        Mail {
            id: MailId::new(),
            to: to.clone(),
            subject: "service-auth test message".to_owned(),
            text: TEST_TEXT.replace("{{time}}", &time),
            html: TEST_HTML.replace("{{time}}", &time),
            created_at: now,
        }
    }

    /// The message carrying a second-factor `code` to `user` (`two-factor/send-otp`).
    pub fn render_code(&self, user: &User, code: &str) -> Mail {
        let minutes = (crate::domain::two_factor::OTP_TTL.as_secs() / 60).to_string();
        let fill = |template: &str, escape: fn(&str) -> String| {
            template
                .replace("{{email}}", &escape(user.email()))
                .replace("{{minutes}}", &minutes)
                .replace("{{code}}", code)
        };
        Mail {
            id: MailId::new(),
            to: user.email_address(),
            subject: "Your sign-in code".to_owned(),
            text: fill(CODE_TEXT, str::to_owned),
            html: fill(CODE_HTML, html_escape),
            created_at: Timestamp::now(),
        }
    }

    /// The link a sign-in link's mail carries: better-auth's, `magic-link/verify` itself with the token and the
    /// client's redirects (`callbackURL` defaults to `/`), opened as a browser would.
    pub fn magic_link_url(
        &self,
        token: &SessionToken,
        callback: Option<&str>,
        new_user_callback: Option<&str>,
        error_callback: Option<&str>,
    ) -> String {
        let mut query = url::form_urlencoded::Serializer::new(String::new());
        query.append_pair("token", token.as_str());
        query.append_pair("callbackURL", callback.unwrap_or("/"));
        if let Some(url) = new_user_callback {
            query.append_pair("newUserCallbackURL", url);
        }
        if let Some(url) = error_callback {
            query.append_pair("errorCallbackURL", url);
        }
        format!("{}/api/auth/magic-link/verify?{}", self.link_base, query.finish())
    }

    /// The message carrying a sign-in `link` (`sign-in/magic-link`) to `to`, who may have no account yet (so it
    /// names none).
    pub fn render_magic_link(&self, to: &Email, link: &str) -> Mail {
        let minutes = self.magic_link_ttl.as_secs().div_ceil(60).to_string();
        let fill = |template: &str, escape: fn(&str) -> String| {
            template
                .replace("{{email}}", &escape(to.as_str()))
                .replace("{{minutes}}", &minutes)
                .replace("{{link}}", &escape(link))
        };
        Mail {
            id: MailId::new(),
            to: to.clone(),
            subject: "Your sign-in link".to_owned(),
            text: fill(MAGIC_LINK_TEXT, str::to_owned),
            html: fill(MAGIC_LINK_HTML, html_escape),
            created_at: Timestamp::now(),
        }
    }

    /// The message carrying a six-digit `code` for `purpose` (`email-otp/send-verification-otp`,
    /// `request-password-reset`) to `to`.
    pub fn render_email_code(&self, to: &Email, code: &str, purpose: CodePurpose) -> Mail {
        let minutes = self.email_code_ttl.as_secs().div_ceil(60).to_string();
        let (subject, what) = match purpose {
            CodePurpose::SignIn => ("Your sign-in code", "sign in"),
            CodePurpose::EmailVerification => ("Your verification code", "confirm this e-mail address"),
            CodePurpose::PasswordReset => ("Your password reset code", "reset your password"),
        };
        let fill = |template: &str, escape: fn(&str) -> String| {
            template
                .replace("{{email}}", &escape(to.as_str()))
                .replace("{{minutes}}", &minutes)
                .replace("{{what}}", what)
                .replace("{{code}}", code)
        };
        Mail {
            id: MailId::new(),
            to: to.clone(),
            subject: subject.to_owned(),
            text: fill(EMAIL_CODE_TEXT, str::to_owned),
            html: fill(EMAIL_CODE_HTML, html_escape),
            created_at: Timestamp::now(),
        }
    }

    /// The message announcing `invitation` into `organization` from `inviter` (an e-mail address). The link is
    /// `link` with `{id}` replaced by the invitation's id (`[organizations] invitation_url`), by default this
    /// server's base URL followed by `/accept-invitation?id=<id>`: the service's own page (`http::pages`), which
    /// calls `organization/accept-invitation`, unless the application names a page of its own. The id is the invitation's secret: it reaches only the invitee (and the
    /// organization's admins, who can invite anyway).
    pub fn render_invitation(
        &self,
        invitation: &crate::domain::Invitation,
        organization: &str,
        inviter: &str,
        link: Option<&str>,
    ) -> Mail {
        let id = invitation.id.to_string();
        let link = match link {
            Some(template) => template.replace("{id}", &id),
            None => format!("{}/accept-invitation?id={id}", self.link_base),
        };
        let hours = ((invitation.expires_at.as_millis() - invitation.created_at.as_millis()).max(0) / 3_600_000)
            .max(1)
            .to_string();
        let role = invitation.roles.to_string();
        let fill = |template: &str, escape: fn(&str) -> String| {
            template
                .replace("{{email}}", &escape(invitation.email.as_str()))
                .replace("{{inviter}}", &escape(inviter))
                .replace("{{organization}}", &escape(organization))
                .replace("{{role}}", &escape(&role))
                .replace("{{hours}}", &hours)
                .replace("{{link}}", &escape(&link))
        };
        Mail {
            id: MailId::new(),
            to: invitation.email.clone(),
            subject: "You are invited to join an organization".to_owned(),
            text: fill(INVITATION_TEXT, str::to_owned),
            html: fill(INVITATION_HTML, html_escape),
            created_at: Timestamp::now(),
        }
    }
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;").replace('\'', "&#39;")
}

/// Where messages go and whom they come from (`[email] smtp_url` or `directory`, and `from`): replaced whole by a
/// reload ([`MailQueue::apply`]). A send already under way finishes on the route it started with; the next
/// attempt, a retry included, takes the new one.
struct Route {
    transport: Transport,
    from: Mailbox,
    /// The settings it was made from: a reload that leaves them as they are keeps the route (and the SMTP
    /// transport's pooled connections).
    made_from: (Option<String>, Option<PathBuf>, String),
}

impl Route {
    /// `None` without a transport. `config` has been validated (the URL and the sender parse).
    fn from_config(config: &Config) -> Option<Self> {
        let e = &config.email;
        let from = e.from.parse().ok()?;
        let made_from = (e.smtp_url.clone(), e.directory.clone(), e.from.clone());
        Some(Self { transport: Transport::from_config(config)?, from, made_from })
    }
}

/// Where messages go.
enum Transport {
    Smtp(AsyncSmtpTransport<Tokio1Executor>),
    Directory(PathBuf),
}

impl Transport {
    fn from_config(config: &Config) -> Option<Self> {
        if let Some(url) = &config.email.smtp_url {
            // Checked when the configuration was loaded.
            return AsyncSmtpTransport::<Tokio1Executor>::from_url(url).ok().map(|b| Self::Smtp(b.build()));
        }
        let dir = config.email.directory.as_ref()?;
        private_directory(dir);
        Some(Self::Directory(dir.clone()))
    }

    async fn send(&self, message: Message, id: MailId) -> Result<(), SendError> {
        match self {
            Self::Smtp(smtp) => smtp.send(message).await.map(drop).map_err(SendError::from_smtp),
            Self::Directory(dir) => {
                let path = dir.join(format!("{id}.eml"));
                let bytes = message.formatted();
                tokio::task::spawn_blocking(move || write_private(&path, &bytes))
                    .await
                    .map_err(|e| SendError::Transient(e.to_string()))?
                    .map_err(|e| SendError::Transient(e.to_string()))
            }
        }
    }
}

/// Creates the mail directory readable by this user alone (0700): each message in it carries a live link.
/// A directory that already exists is left as the operator made it, with a warning if others can read it.
fn private_directory(dir: &Path) {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    if let Err(error) = std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir) {
        tracing::error!(%error, dir = %dir.display(), "cannot create the mail directory");
        return;
    }
    if std::fs::metadata(dir).is_ok_and(|m| m.permissions().mode() & 0o077 != 0) {
        tracing::warn!(dir = %dir.display(), "the mail directory can be read by other users; its messages carry live links");
    }
}

/// Writes one message file readable by this user alone (0600), whole or not at all: written beside its final
/// name, then renamed (a reader of the directory never sees half a message). The name is the message's id, so
/// a message sent twice (a crash between the write and the outbox's deletion) is one file.
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let staged = path.with_extension("eml.tmp");
    let mut file = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(&staged)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    std::fs::rename(&staged, path)
}

/// Why a message was not sent.
#[derive(Debug)]
enum SendError {
    /// Worth another try: the server was unreachable, busy, or answered 4xx.
    Transient(String),
    /// The server refused the message for good (5xx): sending it again would be refused again.
    Permanent(String),
}

impl SendError {
    fn from_smtp(error: lettre::transport::smtp::Error) -> Self {
        if error.is_permanent() { Self::Permanent(error.to_string()) } else { Self::Transient(error.to_string()) }
    }
}

impl std::fmt::Display for SendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Transient(e) | Self::Permanent(e) => f.write_str(e),
        }
    }
}

/// Hands committed messages to the sender, and says when the outbox is full. Cheap to clone.
#[derive(Clone)]
pub struct MailQueue {
    tx: mpsc::UnboundedSender<Mail>,
    /// Messages this node holds and has not finished with (waiting, or being sent).
    held: Arc<AtomicUsize>,
    max: usize,
    /// This node's last attempt, for the console's status page.
    last: Arc<Mutex<Option<Delivery>>>,
    /// Shared with the sender, which reads it at each attempt.
    route: Arc<ArcSwap<Route>>,
}

/// How this node's last attempt to hand a message to the mail server ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    pub at: Timestamp,
    /// The server's refusal or the connection's error (`None`: accepted). Never the message, which may carry a
    /// token.
    pub error: Option<String>,
}

impl MailQueue {
    /// Puts a reloaded `[email]` transport and sender in effect for the next attempts (`config` validated). A
    /// configuration without a transport changes nothing: the server started with mail, and turning it off (or
    /// on) changes what the API offers, so it waits for a restart (the reload leaves it out).
    pub fn apply(&self, config: &Config) {
        let e = &config.email;
        let current = &self.route.load().made_from;
        if (&current.0, &current.1, &current.2) == (&e.smtp_url, &e.directory, &e.from) {
            return;
        }
        if let Some(route) = Route::from_config(config) {
            self.route.store(Arc::new(route));
        }
    }

    /// `mail` is already in the outbox; this only wakes the sender.
    pub fn push(&self, mail: Mail) {
        self.held.fetch_add(1, Ordering::Relaxed);
        if self.tx.send(mail).is_err() {
            self.held.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Whether the outbox holds `[email] max_outbox` messages: requests for mail are refused (503
    /// `MAIL_OUTBOX_FULL`) until the sender has worked some off. Checked before a request looks anything up, so
    /// the refusal says nothing about which accounts exist.
    pub fn is_full(&self) -> bool {
        self.held.load(Ordering::Relaxed) >= self.max
    }

    /// Messages this node holds and has not finished with, and the most it holds (`[email] max_outbox`).
    pub fn depth(&self) -> (usize, usize) {
        (self.held.load(Ordering::Relaxed), self.max)
    }

    /// How this node's last attempt ended, if it has made one since it started.
    pub fn last_delivery(&self) -> Option<Delivery> {
        self.last.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }
}

/// What the sender reports: messages held, the age of the oldest, messages given up (refused for good by the
/// server, or not sent before their link expired).
#[derive(Clone)]
pub struct MailMetrics {
    pub depth: metrics::Gauge,
    pub oldest: metrics::Gauge,
    pub refused: metrics::Counter,
    pub expired: metrics::Counter,
}

/// Starts the sender when a transport is configured, with what the outbox held at start-up.
pub fn start(
    config: &Config,
    writer: StoreWriter,
    outbox: Vec<Mail>,
    metrics: MailMetrics,
    claims: Option<Arc<PgStore>>,
    stop: CancellationToken,
) -> Option<(MailQueue, tokio::task::JoinHandle<()>)> {
    let route = Arc::new(ArcSwap::from_pointee(Route::from_config(config)?));
    let (tx, rx) = mpsc::unbounded_channel();
    let held = Arc::new(AtomicUsize::new(outbox.len()));
    let last = Arc::new(Mutex::new(None));
    let mut sender = Sender {
        route: Arc::clone(&route),
        writer,
        waiting: HashMap::new(),
        sending: HashMap::new(),
        arrivals: 0,
        superseded: Vec::new(),
        given_up: Vec::new(),
        give_up_after: Duration::from_secs(
            config.email.reset_token_ttl_secs.max(config.email.verification_token_ttl_secs),
        ),
        claims,
        concurrency: config.email.send_concurrency.max(1),
        pace: (config.rate_limit.mail_per_email > 0).then(|| Pace {
            max: config.rate_limit.mail_per_email as usize,
            window: Duration::from_secs(config.rate_limit.window_secs),
        }),
        started: HashMap::new(),
        held: Arc::clone(&held),
        last: Arc::clone(&last),
        metrics,
    };
    for mail in outbox {
        sender.arrive(mail);
    }
    let queue = MailQueue { tx, held, max: config.email.max_outbox, last, route };
    Some((queue, tokio::spawn(sender.run(rx, stop))))
}

/// Messages to one recipient with one subject (one kind of link): a newer one makes an older one that is still
/// waiting pointless (its link is replaced, or the recipient gets a working link from the newer one anyway).
type Key = (String, String);

fn key(mail: &Mail) -> Key {
    (mail.to.as_str().to_owned(), mail.subject.clone())
}

struct Pending {
    mail: Mail,
    attempts: u32,
    next: Instant,
    /// Arrival order at this sender: the newest ready message goes first.
    arrival: u64,
}

/// What one send came to.
struct Sent {
    pending: Pending,
    outcome: Outcome,
}

enum Outcome {
    Sent,
    Failed(SendError),
    /// Several nodes: another node holds the message for this much longer.
    Held(Duration),
    /// Several nodes: another node has sent it.
    Gone,
}

/// How long a node owns a message it claimed: longer than an attempt can take (lettre's SMTP timeout is 60 s).
const LEASE: Duration = Duration::from_secs(120);

/// Claims the message for this node on the shared store; on one node, every message is this node's.
async fn claim(claims: Option<Arc<PgStore>>, id: MailId) -> Result<Claim, String> {
    let Some(pg) = claims else { return Ok(Claim::Claimed) };
    let claimed = tokio::task::spawn_blocking(move || pg.claim_outbox(id.to_bytes(), LEASE)).await;
    claimed.map_err(|e| e.to_string())?.map_err(|e| e.to_string())
}

struct Sender {
    /// The transport and the sender address, as last reloaded.
    route: Arc<ArcSwap<Route>>,
    writer: StoreWriter,
    /// Messages not being sent now, at most one per recipient and subject.
    waiting: HashMap<Key, Pending>,
    /// Messages being sent now, with when each was written.
    sending: HashMap<Key, Timestamp>,
    arrivals: u64,
    /// Messages superseded by newer ones: deleted from the outbox at the next turn of the loop, in one commit.
    superseded: Vec<MailId>,
    /// Messages given up, and their audit entries: written at the next turn of the loop.
    given_up: Vec<StoreOp>,
    /// A transient failure is retried until the message is this old (the longest link lifetime: its link is dead
    /// by then), then given up.
    give_up_after: Duration,
    /// Several nodes: the shared outbox, where a node claims each message before sending it.
    claims: Option<Arc<PgStore>>,
    concurrency: usize,
    /// At most this many messages to one recipient per window, whoever asked: the bound on mail-bombing one
    /// mailbox (the request limits are per client, so that no client can spend the owner's allowance).
    pace: Option<Pace>,
    /// When each recipient's recent sends started (those within the window).
    started: HashMap<String, VecDeque<Instant>>,
    held: Arc<AtomicUsize>,
    /// Shared with [`MailQueue::last_delivery`].
    last: Arc<Mutex<Option<Delivery>>>,
    metrics: MailMetrics,
}

#[derive(Clone, Copy)]
struct Pace {
    max: usize,
    window: Duration,
}

impl Sender {
    /// A message arrives (from a commit, or from the outbox at start-up): it replaces a waiting one to the same
    /// recipient with the same subject.
    fn arrive(&mut self, mail: Mail) {
        self.arrivals += 1;
        let pending = Pending { mail, attempts: 0, next: Instant::now(), arrival: self.arrivals };
        if let Some(older) = self.waiting.insert(key(&pending.mail), pending) {
            self.supersede(older);
        }
    }

    fn supersede(&mut self, older: Pending) {
        self.superseded.push(older.mail.id);
        self.held.fetch_sub(1, Ordering::Relaxed);
    }

    async fn run(mut self, mut rx: mpsc::UnboundedReceiver<Mail>, stop: CancellationToken) {
        let mut sends: JoinSet<Sent> = JoinSet::new();
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            self.forget_superseded().await;
            self.forget_old_sends();
            self.start_ready(&mut sends);
            self.report();
            // The next message that may start (none while every slot is busy, or its recipient's message is out).
            let wake = self
                .waiting
                .iter()
                .filter(|(k, _)| self.sending.len() < self.concurrency && !self.sending.contains_key(*k))
                .map(|(k, p)| self.due(k, p))
                .min();
            let sleep = async {
                match wake {
                    Some(at) => tokio::time::sleep_until(at.into()).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = stop.cancelled() => return,
                received = rx.recv() => match received {
                    Some(mail) => {
                        self.arrive(mail);
                        // A burst arrives together: take all of it before choosing what goes first.
                        while let Ok(mail) = rx.try_recv() {
                            self.arrive(mail);
                        }
                    }
                    None => return,
                },
                Some(done) = sends.join_next() => match done {
                    Ok(sent) => self.finish(sent),
                    Err(error) => tracing::error!(%error, "a mail send task failed"),
                },
                () = sleep => {}
                // The oldest message's age grows while nothing happens.
                _ = tick.tick() => {}
            }
        }
    }

    /// Starts sends while fewer than `concurrency` are under way: the newest ready message first, so a request
    /// made now is not queued behind a backlog (a flood of requests delays the flood, not the next user).
    fn start_ready(&mut self, sends: &mut JoinSet<Sent>) {
        let now = Instant::now();
        while self.sending.len() < self.concurrency {
            let newest = self
                .waiting
                .iter()
                .filter(|(k, p)| self.due(k, p) <= now && !self.sending.contains_key(*k))
                .max_by_key(|(_, p)| p.arrival)
                .map(|(k, _)| k.clone());
            let Some(k) = newest else { return };
            let Some(pending) = self.waiting.remove(&k) else { return };
            if self.pace.is_some() {
                self.started.entry(k.0.clone()).or_default().push_back(now);
            }
            self.sending.insert(k, pending.mail.created_at);
            let route = self.route.load_full();
            let message = message(&route.from, &pending.mail);
            let (writer, claims) = (self.writer.clone(), self.claims.clone());
            sends.spawn(async move {
                let id = pending.mail.id;
                let outcome = match claim(claims, id).await {
                    Ok(Claim::Claimed) => match message {
                        Ok(message) => {
                            route.transport.send(message, id).await.map_or_else(Outcome::Failed, |()| Outcome::Sent)
                        }
                        Err(e) => Outcome::Failed(e),
                    },
                    Ok(Claim::Held(wait)) => Outcome::Held(wait),
                    Ok(Claim::Gone) => Outcome::Gone,
                    Err(e) => Outcome::Failed(SendError::Transient(format!("cannot claim the message: {e}"))),
                };
                if matches!(outcome, Outcome::Sent) {
                    let deleted = writer.write(vec![StoreOp::DeleteOutbox(id.to_bytes())]).await;
                    if deleted.is_err() {
                        // Sent, but still in the outbox: it goes out once more after a restart (at least once).
                        tracing::warn!(mail = %id, "mail sent but not removed from the outbox");
                    }
                }
                Sent { pending, outcome }
            });
        }
    }

    fn finish(&mut self, Sent { mut pending, outcome }: Sent) {
        let k = key(&pending.mail);
        self.sending.remove(&k);
        let attempt = match &outcome {
            Outcome::Sent => Some(None),
            Outcome::Failed(error) => {
                Some(Some(error.to_string().chars().filter(|c| !c.is_control()).take(300).collect()))
            }
            Outcome::Held(_) | Outcome::Gone => None,
        };
        if let Some(error) = attempt {
            *self.last.lock().unwrap_or_else(std::sync::PoisonError::into_inner) =
                Some(Delivery { at: Timestamp::now(), error });
        }
        match outcome {
            // Sent here, or by the node that held it.
            Outcome::Sent | Outcome::Gone => {
                self.held.fetch_sub(1, Ordering::Relaxed);
            }
            Outcome::Held(wait) => {
                // Another node is sending it: look again when its lease ends (it may die mid-send).
                pending.next = Instant::now() + wait + Duration::from_secs(1);
                self.wait_again(k, pending);
            }
            Outcome::Failed(SendError::Permanent(reason)) => self.give_up(pending, "refused", &reason),
            Outcome::Failed(error) if pending.mail.created_at.plus(self.give_up_after) <= Timestamp::now() => {
                self.give_up(pending, "expired", &format!("not sent before its link expired; last error: {error}"));
            }
            Outcome::Failed(error) => {
                pending.attempts += 1;
                let backoff = Duration::from_secs(1 << pending.attempts.min(9)).min(MAX_BACKOFF);
                // The error names the server's answer, never the message (which carries a token).
                tracing::warn!(mail = %pending.mail.id, attempts = pending.attempts, %error, ?backoff, "mail not sent; will retry");
                pending.next = Instant::now() + backoff;
                self.wait_again(k, pending);
            }
        }
    }

    /// `pending` waits for its next attempt, unless a newer message to the same recipient came while it was out:
    /// then that one replaces it.
    fn wait_again(&mut self, k: Key, pending: Pending) {
        match self.waiting.entry(k) {
            std::collections::hash_map::Entry::Occupied(_) => self.supersede(pending),
            std::collections::hash_map::Entry::Vacant(slot) => {
                slot.insert(pending);
            }
        }
    }

    /// Stops trying `pending`: it leaves the outbox, and an audit entry (which administrators read) says to whom
    /// and why, in one commit; the metric counts it by `reason`.
    fn give_up(&mut self, pending: Pending, reason: &'static str, error: &str) {
        self.held.fetch_sub(1, Ordering::Relaxed);
        let mail = &pending.mail;
        // The server's answer, never the message (which carries a token); bounded.
        let error: String = error.chars().filter(|c| !c.is_control()).take(300).collect();
        tracing::error!(mail = %mail.id, to = %mail.to.as_str(), %error, reason, "mail given up");
        match reason {
            "refused" => self.metrics.refused.increment(1),
            _ => self.metrics.expired.increment(1),
        }
        let detail = format!("{reason}: to {}, \"{}\": {error}", mail.to.as_str(), mail.subject);
        self.given_up.push(StoreOp::DeleteOutbox(mail.id.to_bytes()));
        self.given_up.push(audit::entry(action::MAIL_FAILED, None, None, "", detail));
    }

    /// When `pending` may start: at its next attempt, once its recipient is under the pace.
    fn due(&self, (to, _): &Key, pending: &Pending) -> Instant {
        let Some(pace) = self.pace else { return pending.next };
        let recent = self.started.get(to).map(|s| s.iter().filter(|t| t.elapsed() < pace.window).collect::<Vec<_>>());
        match recent {
            Some(recent) if recent.len() >= pace.max => {
                pending.next.max(*recent[recent.len() - pace.max] + pace.window)
            }
            _ => pending.next,
        }
    }

    /// Forgets the sends older than the pace's window.
    fn forget_old_sends(&mut self) {
        let Some(pace) = self.pace else { return };
        self.started.retain(|_, starts| {
            while starts.front().is_some_and(|t| t.elapsed() >= pace.window) {
                starts.pop_front();
            }
            !starts.is_empty()
        });
    }

    /// Writes down what the loop decided: superseded messages leave the outbox, given-up ones with their audit
    /// entries.
    async fn forget_superseded(&mut self) {
        if self.superseded.is_empty() && self.given_up.is_empty() {
            return;
        }
        let mut ops: Vec<StoreOp> = self.superseded.drain(..).map(|id| StoreOp::DeleteOutbox(id.to_bytes())).collect();
        ops.append(&mut self.given_up);
        if self.writer.write(ops).await.is_err() {
            // Left in the outbox: tried again after a restart (and superseded or given up again).
            tracing::warn!("superseded or given-up mail not removed from the outbox");
        }
    }

    fn report(&self) {
        self.metrics.depth.set(self.held.load(Ordering::Relaxed) as f64);
        let now = Timestamp::now().as_millis();
        let oldest = self.waiting.values().map(|p| p.mail.created_at).chain(self.sending.values().copied()).min();
        let age = oldest.map_or(0, |at| now.saturating_sub(at.as_millis()).max(0));
        self.metrics.oldest.set(age as f64 / 1000.0);
    }
}

fn message(from: &Mailbox, mail: &Mail) -> Result<Message, SendError> {
    let to: Mailbox = mail.to.as_str().parse().map_err(|e| SendError::Permanent(format!("recipient: {e}")))?;
    Message::builder()
        .from(from.clone())
        .to(to)
        .subject(&mail.subject)
        .multipart(MultiPart::alternative_plain_html(mail.text.clone(), mail.html.clone()))
        .map_err(|e| SendError::Permanent(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{Email, Name, Role, UserFields};

    #[test]
    fn a_reset_message_carries_the_link_and_not_the_name() {
        let config = Config { base_url: Some("https://auth.example.com/".into()), ..Config::default() };
        let templates = Templates::new(&config);
        let now = Timestamp::now();
        let user = User::from(UserFields {
            id: crate::domain::UserId::new(),
            name: Name::parse("Ann. URGENT: confirm at https://evil.test/ instead of the link below").unwrap(),
            email: Email::parse("ann@example.com").unwrap(),
            email_verified: false,
            image: None,
            role: Role::admin(),
            banned: false,
            ban_reason: None,
            ban_expires: None,
            organization_id: None,
            password_hash: "".into(),
            created_at: now,
            updated_at: now,
            two_factor: None,
            username: None,
            display_username: None,
        });
        let token = SessionToken::generate();
        let mail = templates.render(TokenKind::PasswordReset, &user, &token, Some("/reset?x=1"));
        let link =
            format!("https://auth.example.com/api/auth/reset-password/{}?callbackURL=%2Freset%3Fx%3D1", token.as_str());
        assert!(mail.text.contains(&link), "{}", mail.text);
        assert!(mail.text.contains("60 minutes"));
        for body in [&mail.text, &mail.html] {
            assert!(!body.contains("URGENT") && !body.contains("evil.test"), "the name is in the message: {body}");
        }
        assert_eq!(mail.to.as_str(), "ann@example.com");
        let verify = templates.render(TokenKind::EmailVerification, &user, &token, Some("/welcome"));
        let link =
            format!("https://auth.example.com/api/auth/verify-email?token={}&callbackURL=%2Fwelcome", token.as_str());
        assert!(verify.text.contains(&link) && verify.subject.contains("e-mail"), "{}", verify.text);
        assert!(!verify.text.contains("URGENT") && !verify.html.contains("URGENT"), "{}", verify.text);

        // No page of the application's: the links lead to the service's own pages.
        let reset = templates.render(TokenKind::PasswordReset, &user, &token, None);
        let link = format!(
            "https://auth.example.com/api/auth/reset-password/{}?callbackURL=%2Fauth%2Freset-password",
            token.as_str()
        );
        assert!(reset.text.contains(&link), "{}", reset.text);
        let verify = templates.render(TokenKind::EmailVerification, &user, &token, None);
        let link = format!(
            "https://auth.example.com/api/auth/verify-email?token={}&callbackURL=%2Fauth%2Femail-verified",
            token.as_str()
        );
        assert!(verify.text.contains(&link), "{}", verify.text);
    }

    /// Before: the plain-text templates were wrapped at a fixed width, so a sentence broke wherever the column fell
    /// ("…within the\nnext 60 minutes…"), and again where the mail program wrapped it. Each paragraph is one line
    /// now, which every mail program wraps to its own width.
    #[test]
    fn plain_text_mail_breaks_lines_only_between_paragraphs() {
        for template in [RESET_TEXT, VERIFY_TEXT] {
            for line in template.lines().filter(|l| !l.is_empty()) {
                let ends_a_sentence = line.ends_with(['.', ':', ',']);
                assert!(ends_a_sentence || line == "{{link}}", "a line breaks mid-sentence: {line:?}");
            }
            assert!(template.contains("\n\n{{link}}\n\n"), "the link stands alone");
        }
    }
}
