//! Mail: messages rendered from the repository's templates (`templates/`), and the sender that empties the
//! durable outbox.
//!
//! A message is written to the outbox in the same commit as what it announces (a reset token), so a request
//! never waits on the mail server and a crash between the answer and the send loses nothing: the outbox is read
//! again at start-up. The sender retries with backoff and deletes a message once a server has accepted it
//! (at least once: a crash between the acceptance and the deletion sends it again).

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use lettre::message::{Mailbox, MultiPart};
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::domain::{Mail, MailId, SessionToken, Timestamp, TokenKind, User};
use crate::store::{StoreOp, StoreWriter};

const RESET_TEXT: &str = include_str!("../templates/reset-password.txt");
const RESET_HTML: &str = include_str!("../templates/reset-password.html");
const VERIFY_TEXT: &str = include_str!("../templates/verify-email.txt");
const VERIFY_HTML: &str = include_str!("../templates/verify-email.html");

/// The longest wait between two attempts at one message.
const MAX_BACKOFF: Duration = Duration::from_secs(300);

/// Renders messages: the templates, the public URL links start with, and the reset lifetime.
pub struct Templates {
    link_base: String,
    reset_ttl: Duration,
    verify_ttl: Duration,
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
        }
    }

    pub fn ttl(&self, kind: TokenKind) -> Duration {
        match kind {
            TokenKind::PasswordReset => self.reset_ttl,
            TokenKind::EmailVerification => self.verify_ttl,
        }
    }

    /// The message for `user` that carries `token` (and the client's `callbackURL`) in its link.
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
        };
        if let Some(callback) = callback {
            link.push(if link.contains('?') { '&' } else { '?' });
            link.push_str("callbackURL=");
            link.extend(url::form_urlencoded::byte_serialize(callback.as_bytes()));
        }
        let minutes = (self.ttl(kind).as_secs() / 60).to_string();
        // The account's name is not in the message: anyone can choose it (at sign-up), and a security mail that
        // opens with text of the requester's choosing ("…confirm at https://evil.test instead") is a phishing
        // vehicle with this server's genuine sender and link beside it.
        let fill = |template: &str, escape: fn(&str) -> String| {
            template
                .replace("{{email}}", &escape(user.email.as_str()))
                .replace("{{minutes}}", &minutes)
                .replace("{{link}}", &escape(&link))
        };
        Mail {
            id: MailId::new(),
            to: user.email.clone(),
            subject: subject.to_owned(),
            text: fill(text, str::to_owned),
            html: fill(html, html_escape),
            created_at: Timestamp::now(),
        }
    }
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;").replace('\'', "&#39;")
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

/// Hands committed messages to the sender. Cheap to clone.
#[derive(Clone)]
pub struct MailQueue(mpsc::UnboundedSender<Mail>);

impl MailQueue {
    /// `mail` is already in the outbox; this only wakes the sender.
    pub fn push(&self, mail: Mail) {
        let _ = self.0.send(mail);
    }
}

/// Starts the sender when a transport is configured, with what the outbox held at start-up.
pub fn start(
    config: &Config,
    writer: StoreWriter,
    outbox: Vec<Mail>,
    depth: metrics::Gauge,
    stop: CancellationToken,
) -> Option<(MailQueue, tokio::task::JoinHandle<()>)> {
    let transport = Transport::from_config(config)?;
    let from: Mailbox = config.email.from.parse().ok()?;
    let (tx, rx) = mpsc::unbounded_channel();
    let sender = Sender { transport, from, writer, due: outbox.into_iter().map(Pending::now).collect(), depth };
    Some((MailQueue(tx), tokio::spawn(sender.run(rx, stop))))
}

struct Pending {
    mail: Mail,
    attempts: u32,
    next: Instant,
}

impl Pending {
    fn now(mail: Mail) -> Self {
        Self { mail, attempts: 0, next: Instant::now() }
    }
}

struct Sender {
    transport: Transport,
    from: Mailbox,
    writer: StoreWriter,
    due: VecDeque<Pending>,
    /// Messages not sent yet (the metrics' outbox depth).
    depth: metrics::Gauge,
}

impl Sender {
    async fn run(mut self, mut rx: mpsc::UnboundedReceiver<Mail>, stop: CancellationToken) {
        loop {
            self.depth.set(self.due.len() as f64);
            let wake = self.due.iter().map(|p| p.next).min();
            let sleep = async {
                match wake {
                    Some(at) => tokio::time::sleep_until(at.into()).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = stop.cancelled() => return,
                received = rx.recv() => match received {
                    Some(mail) => self.due.push_back(Pending::now(mail)),
                    None => return,
                },
                () = sleep => self.send_due().await,
            }
        }
    }

    async fn send_due(&mut self) {
        let now = Instant::now();
        let (ready, waiting): (Vec<_>, Vec<_>) = self.due.drain(..).partition(|p| p.next <= now);
        self.due.extend(waiting);
        for mut pending in ready {
            match self.send(&pending.mail).await {
                Ok(()) => {
                    let deleted = self.writer.write(vec![StoreOp::DeleteOutbox(pending.mail.id.to_bytes())]).await;
                    if deleted.is_err() {
                        // Sent, but still in the outbox: it goes out once more after a restart (at least once).
                        tracing::warn!(mail = %pending.mail.id, "mail sent but not removed from the outbox");
                    }
                }
                Err(error) => {
                    pending.attempts += 1;
                    let backoff = Duration::from_secs(1 << pending.attempts.min(9)).min(MAX_BACKOFF);
                    // The error names the server's answer, never the message (which carries a token).
                    tracing::warn!(mail = %pending.mail.id, attempts = pending.attempts, %error, ?backoff, "mail not sent; will retry");
                    pending.next = Instant::now() + backoff;
                    self.due.push_back(pending);
                }
            }
        }
    }

    async fn send(&self, mail: &Mail) -> Result<(), SendError> {
        let to: Mailbox = mail.to.as_str().parse().map_err(|e| SendError::Permanent(format!("recipient: {e}")))?;
        let message = Message::builder()
            .from(self.from.clone())
            .to(to)
            .subject(&mail.subject)
            .multipart(MultiPart::alternative_plain_html(mail.text.clone(), mail.html.clone()))
            .map_err(|e| SendError::Permanent(e.to_string()))?;
        self.transport.send(message, mail.id).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{Email, Name, Role};

    #[test]
    fn a_reset_message_carries_the_link_and_not_the_name() {
        let config = Config { base_url: Some("https://auth.example.com/".into()), ..Config::default() };
        let templates = Templates::new(&config);
        let now = Timestamp::now();
        let user = User {
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
            rendered: Default::default(),
        };
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
    }
}
