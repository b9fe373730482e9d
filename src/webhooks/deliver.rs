//! The deliverer: one task per node that sends each endpoint's queue.
//!
//! - At least once: a message leaves the queue only after the endpoint answered 2xx (and a crash between the
//!   answer and the deletion sends it again, with the same `webhook-id`).
//! - In commit order per account: of one account's messages only the first in the queue is ever out; the next
//!   starts once it is delivered. Messages about different accounts go out side by side (`[webhooks]
//!   concurrency`).
//! - Retries back off exponentially (1 s, 2 s, 4 s … `max_backoff_secs`); a message undelivered
//!   `failing_after_secs` after its change marks the endpoint failing, and is still retried: nothing is dropped.
//! - Never in a request's way: requests only write the queue (in their own commit); this task is woken after such a
//!   commit, and polls besides (another node's commits on PostgreSQL).
//! - Several nodes: one node delivers an endpoint's queue at a time, holding a lease in PostgreSQL that it renews;
//!   when it dies the lease runs out and another node takes the queue over where the store says it stands.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use tokio::sync::Notify;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::backchannel::{LogoutAttempt, LogoutSigner};
use super::target::{self, Blocked, Resolver};
use super::{delivery_log, message_name, sign};
use crate::config::WebhooksConfig;
use crate::domain::Timestamp;
use crate::store::hooks::BACKCHANNEL_QUEUE;
use crate::store::{Store, StoreOp, StoreWriter, WebhookMessageRecordV1, WebhookRecordV1};

/// How long a node holds an endpoint's lease; renewed at every round, so well before it runs out.
const LEASE: Duration = Duration::from_secs(10);
/// How often the queues are read when nothing wakes the deliverer: another node's commits (PostgreSQL) are seen
/// this late at most; on one node every commit that queues a message wakes it at once.
const POLL_SHARED: Duration = Duration::from_millis(200);
const POLL_ALONE: Duration = Duration::from_secs(2);
/// Messages read per endpoint and round.
const WINDOW: usize = 1000;

/// The deliverer's settings a reload may change (`[webhooks] timeout_ms`, `max_backoff_secs`,
/// `failing_after_secs`, `concurrency`, `log_retention_days`, `proxy`), read at each round. Whether internal targets
/// and `http://` are allowed stays as at start: it decided which endpoints were registered. Cheap to clone.
#[derive(Clone)]
pub struct DeliverySettings(Arc<ArcSwap<Live>>);

/// The settings in effect and the client built from them (its time limit and proxy are the client's own).
struct Live {
    config: WebhooksConfig,
    client: reqwest::Client,
}

impl DeliverySettings {
    fn new(config: &WebhooksConfig) -> Self {
        Self(Arc::new(ArcSwap::from_pointee(Live { config: config.clone(), client: client(config) })))
    }

    /// Puts `config`'s live settings in effect from the next round (`config` validated); attempts under way end
    /// with the client they started with. The client, and so its pooled connections, is replaced only when its
    /// own settings changed.
    pub fn apply(&self, config: &WebhooksConfig) {
        let old = self.0.load();
        let mut next = old.config.clone();
        next.timeout_ms = config.timeout_ms;
        next.max_backoff_secs = config.max_backoff_secs;
        next.failing_after_secs = config.failing_after_secs;
        next.concurrency = config.concurrency;
        next.log_retention_days = config.log_retention_days;
        next.proxy = config.proxy.clone();
        if next == old.config {
            return;
        }
        let same_client = next.timeout_ms == old.config.timeout_ms && next.proxy == old.config.proxy;
        let client = if same_client { old.client.clone() } else { client(&next) };
        self.0.store(Arc::new(Live { config: next, client }));
    }
}

/// The HTTP client the attempts use: `config`'s time limit and proxy, every name checked by the resolver.
fn client(config: &WebhooksConfig) -> reqwest::Client {
    let timeout = Duration::from_millis(config.timeout_ms);
    let proxy = config.proxy.as_deref().map(|p| reqwest::Proxy::all(p).expect("a proxy URL checked by the config"));
    let resolver = Resolver {
        allow_internal: config.allow_internal_targets,
        proxy_host: config.proxy.as_deref().and_then(|p| url::Url::parse(p).ok()?.host_str().map(str::to_owned)),
    };
    let builder = reqwest::Client::builder()
        .use_rustls_tls()
        .timeout(timeout)
        .connect_timeout(timeout)
        // Every name is resolved here, internal addresses dropped: the client connects only to what was checked.
        .dns_resolver(Arc::new(resolver))
        // A redirect is an answer like any other non-2xx: the message is not sent to a URL nobody registered.
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("service-auth/", env!("CARGO_PKG_VERSION"), " (webhooks)"));
    // A proxy only when configured: one named by the environment (HTTPS_PROXY …) would carry every message, and
    // resolve every name, out of this check's sight.
    let builder = match proxy {
        Some(proxy) => builder.proxy(proxy),
        None => builder.no_proxy(),
    };
    builder.build().expect("an HTTP client with rustls")
}

/// Starts the deliverer on this node; with `logouts`, it sends the identity provider's back-channel logouts too.
/// The settings it answers change the running deliverer's on a reload.
pub fn start(
    config: &WebhooksConfig,
    store: Arc<Store>,
    writer: StoreWriter,
    logouts: Option<Arc<dyn LogoutSigner>>,
    stop: CancellationToken,
) -> (DeliverySettings, tokio::task::JoinHandle<()>) {
    let settings = DeliverySettings::new(config);
    let deliverer = Deliverer {
        shared: store.postgres().is_some(),
        signal: store.hooks_signal(),
        store,
        writer,
        client: settings.0.load().client.clone(),
        config: config.clone(),
        settings: settings.clone(),
        retries: HashMap::new(),
        out: HashSet::new(),
        leased: HashMap::new(),
        pruned: None,
        logouts,
    };
    (settings, tokio::spawn(deliverer.run(stop)))
}

struct Deliverer {
    store: Arc<Store>,
    writer: StoreWriter,
    /// The settings of this round (taken from `settings` at its start).
    client: reqwest::Client,
    config: WebhooksConfig,
    settings: DeliverySettings,
    signal: Arc<Notify>,
    shared: bool,
    /// Attempts so far and the next one's time, per message (`endpoint`, place in its queue).
    retries: HashMap<([u8; 16], u64), Retry>,
    /// What is out now: (endpoint, account or message).
    out: HashSet<([u8; 16], [u8; 16])>,
    /// Endpoints this node holds the lease of, and when it was last renewed.
    leased: HashMap<[u8; 16], Instant>,
    /// When the delivery log was last trimmed.
    pruned: Option<Instant>,
    /// What signs the back-channel logouts ([`BACKCHANNEL_QUEUE`]), when this node sends them.
    logouts: Option<Arc<dyn LogoutSigner>>,
}

#[derive(Clone, Copy)]
struct Retry {
    attempts: u32,
    next: Instant,
}

/// What one attempt came to.
struct Attempted {
    endpoint: [u8; 16],
    seq: u64,
    group: [u8; 16],
    delivered: bool,
}

impl Deliverer {
    async fn run(mut self, stop: CancellationToken) {
        let mut attempts: JoinSet<Attempted> = JoinSet::new();
        loop {
            let wake = match self.round(&mut attempts).await {
                Ok(wake) => wake,
                Err(error) => {
                    tracing::warn!(%error, "webhook queues not read; trying again");
                    Instant::now() + Duration::from_secs(1)
                }
            };
            tokio::select! {
                () = stop.cancelled() => break,
                Some(done) = attempts.join_next() => {
                    if let Ok(done) = done {
                        self.finish(done);
                    }
                    // Several may end together: take them all before reading the queues again.
                    while let Some(Ok(done)) = attempts.try_join_next() {
                        self.finish(done);
                    }
                }
                () = self.signal.notified() => {}
                () = tokio::time::sleep_until(wake.into()) => {}
            }
        }
        // Attempts under way are dropped: their messages stay queued and go out again after the restart.
        attempts.abort_all();
    }

    fn finish(&mut self, done: Attempted) {
        self.out.remove(&(done.endpoint, done.group));
        let key = (done.endpoint, done.seq);
        if done.delivered {
            self.retries.remove(&key);
            return;
        }
        let retry = self.retries.entry(key).or_insert(Retry { attempts: 0, next: Instant::now() });
        retry.attempts += 1;
        let backoff = Duration::from_secs(1u64 << (retry.attempts - 1).min(20))
            .min(Duration::from_secs(self.config.max_backoff_secs));
        retry.next = Instant::now() + backoff;
    }

    /// Reads the endpoints and their queues, starts every attempt that is due; answers when to look again.
    async fn round(&mut self, attempts: &mut JoinSet<Attempted>) -> Result<Instant, String> {
        let live = self.settings.0.load_full();
        (self.config, self.client) = (live.config.clone(), live.client.clone());
        let now = Instant::now();
        let mut wake = now + if self.shared { POLL_SHARED } else { POLL_ALONE };
        let endpoints = self.blocking(|s| s.webhooks()).await?;
        let mut live: HashSet<[u8; 16]> = endpoints.iter().map(|(e, _)| e.id).collect();
        live.insert(BACKCHANNEL_QUEUE);
        self.retries.retain(|(endpoint, _), _| live.contains(endpoint));
        self.leased.retain(|endpoint, _| live.contains(endpoint));
        if !endpoints.is_empty() || self.logouts.is_some() {
            self.prune_log().await;
        }
        if let Some(signer) = self.logouts.clone() {
            wake = wake.min(self.logouts(attempts, signer, now).await?);
        }
        for (endpoint, failing) in endpoints {
            if !endpoint.enabled || !self.lease(endpoint.id).await {
                continue;
            }
            let id = endpoint.id;
            let (queue, _) = self.blocking(move |s| s.webhook_queue(id, WINDOW)).await?;
            let endpoint = Arc::new(endpoint);
            let mut heads = HashSet::new();
            let mut busy = self.out.iter().filter(|(e, _)| *e == id).count();
            for (seq, message) in queue {
                let group = message.account.unwrap_or(message.id);
                // Only the first message of each account may go: the next waits until it is delivered.
                if !heads.insert(group) || self.out.contains(&(id, group)) {
                    continue;
                }
                let retry = self.retries.get(&(id, seq)).copied();
                if let Some(retry) = retry
                    && retry.next > now
                {
                    wake = wake.min(retry.next);
                    continue;
                }
                if busy >= self.config.concurrency {
                    break;
                }
                busy += 1;
                self.out.insert((id, group));
                let attempt = Attempt {
                    endpoint: Arc::clone(&endpoint),
                    failing,
                    seq,
                    message,
                    number: retry.map_or(1, |r| r.attempts + 1),
                    client: self.client.clone(),
                    allow_internal: self.config.allow_internal_targets,
                    writer: self.writer.clone(),
                    failing_after: Duration::from_secs(self.config.failing_after_secs),
                };
                attempts.spawn(attempt.run(group));
            }
        }
        Ok(wake)
    }

    /// Starts every back-channel logout that is due; answers when to look again. They go out side by side (no
    /// order among them: each is one session's end at one relying party), at most `concurrency` at once.
    async fn logouts(
        &mut self,
        attempts: &mut JoinSet<Attempted>,
        signer: Arc<dyn LogoutSigner>,
        now: Instant,
    ) -> Result<Instant, String> {
        let mut wake = now + if self.shared { POLL_SHARED } else { POLL_ALONE };
        if !self.lease(BACKCHANNEL_QUEUE).await {
            return Ok(wake);
        }
        let (queue, _) = self.blocking(|s| s.webhook_queue(BACKCHANNEL_QUEUE, WINDOW)).await?;
        let mut busy = self.out.iter().filter(|(e, _)| *e == BACKCHANNEL_QUEUE).count();
        for (seq, message) in queue {
            let group = message.id;
            if self.out.contains(&(BACKCHANNEL_QUEUE, group)) {
                continue;
            }
            let retry = self.retries.get(&(BACKCHANNEL_QUEUE, seq)).copied();
            if let Some(retry) = retry
                && retry.next > now
            {
                wake = wake.min(retry.next);
                continue;
            }
            if busy >= self.config.concurrency {
                break;
            }
            busy += 1;
            self.out.insert((BACKCHANNEL_QUEUE, group));
            let attempt = LogoutAttempt {
                seq,
                message,
                number: retry.map_or(1, |r| r.attempts + 1),
                client: self.client.clone(),
                allow_internal: self.config.allow_internal_targets,
                writer: self.writer.clone(),
                signer: Arc::clone(&signer),
            };
            attempts.spawn(async move {
                let delivered = attempt.run().await;
                Attempted { endpoint: BACKCHANNEL_QUEUE, seq, group, delivered }
            });
        }
        Ok(wake)
    }

    /// Whether this node delivers `endpoint` now (always on one node); the lease is renewed at most once a second.
    async fn lease(&mut self, endpoint: [u8; 16]) -> bool {
        if !self.shared {
            return true;
        }
        if self.leased.get(&endpoint).is_some_and(|at| at.elapsed() < Duration::from_secs(1)) {
            return true;
        }
        let leased = if endpoint == BACKCHANNEL_QUEUE {
            self.blocking(move |s| s.lease_queue(endpoint, LEASE)).await
        } else {
            self.blocking(move |s| s.lease_webhook(endpoint, LEASE)).await
        };
        match leased {
            Ok(true) => {
                self.leased.insert(endpoint, Instant::now());
                true
            }
            _ => {
                self.leased.remove(&endpoint);
                false
            }
        }
    }

    /// Trims the delivery log to `[webhooks] log_retention_days`, about once an hour.
    async fn prune_log(&mut self) {
        if self.pruned.is_some_and(|at| at.elapsed() < Duration::from_secs(3600)) {
            return;
        }
        self.pruned = Some(Instant::now());
        let keep = Duration::from_secs(self.config.log_retention_days * 86_400);
        let before_ms = Timestamp::now().as_millis() - keep.as_millis() as i64;
        if self.writer.write(vec![StoreOp::DeleteDeliveriesBefore { before_ms }]).await.is_err() {
            tracing::warn!("the webhook delivery log was not trimmed");
        }
    }

    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Store) -> Result<T, crate::store::StoreError> + Send + 'static,
    ) -> Result<T, String> {
        let store = Arc::clone(&self.store);
        let done = tokio::task::spawn_blocking(move || f(&store)).await;
        done.map_err(|e| e.to_string())?.map_err(|e| e.to_string())
    }
}

/// One attempt at one message.
struct Attempt {
    endpoint: Arc<WebhookRecordV1>,
    failing: Option<i64>,
    seq: u64,
    message: WebhookMessageRecordV1,
    number: u32,
    client: reqwest::Client,
    allow_internal: bool,
    writer: StoreWriter,
    failing_after: Duration,
}

impl Attempt {
    async fn run(self, group: [u8; 16]) -> Attempted {
        let started = Instant::now();
        let now = Timestamp::now();
        let id = message_name(self.message.id);
        let timestamp = now.as_millis().div_euclid(1000);
        let mut keys: Vec<&[u8]> = vec![&self.endpoint.secret];
        if let (Some(previous), Some(until)) = (&self.endpoint.previous_secret, self.endpoint.previous_until_ms)
            && until > now.as_millis()
        {
            keys.push(previous);
        }
        let signature = sign::signature(&keys, &id, timestamp, &self.message.payload);
        let (status, error, connected) = match self.vet() {
            Err(_) => (0, "blocked".to_owned(), false),
            Ok(()) => {
                let sent = self
                    .client
                    .post(&self.endpoint.url)
                    .header("content-type", "application/json")
                    .header("webhook-id", &id)
                    .header("webhook-timestamp", timestamp.to_string())
                    .header("webhook-signature", signature)
                    .body(self.message.payload.clone())
                    .send()
                    .await;
                match sent {
                    Ok(answer) => {
                        let status = answer.status();
                        let error = if status.is_success() { String::new() } else { format!("answered {status}") };
                        (status.as_u16(), error, true)
                    }
                    Err(e) => {
                        let error = target::describe(&e);
                        let connected = error != "connect" && error != "blocked";
                        (0, error, connected)
                    }
                }
            }
        };
        let delivered = (200..300).contains(&status);
        let log = delivery_log(
            self.endpoint.id,
            &self.message,
            self.number,
            (status, &error),
            connected.then_some(started),
            now,
        );
        let mut ops = vec![StoreOp::PutDelivery(log)];
        if delivered {
            ops.push(StoreOp::DeleteWebhookMessage { endpoint: self.endpoint.id, seq: self.seq });
            if self.failing.is_some() {
                ops.push(StoreOp::SetWebhookFailing { id: self.endpoint.id, since_ms: None });
            }
        } else {
            tracing::warn!(webhook = %uuid::Uuid::from_bytes(self.endpoint.id), message = %id, attempt = self.number, %error, "webhook not delivered; will retry");
            let waited = now.as_millis() - self.message.created_at_ms;
            if self.failing.is_none() && waited >= self.failing_after.as_millis() as i64 {
                ops.push(StoreOp::SetWebhookFailing { id: self.endpoint.id, since_ms: Some(now.as_millis()) });
            }
        }
        // Delivered but not removed (the store refused the write): it goes out again (at least once).
        let recorded = self.writer.write(ops).await.is_ok();
        Attempted { endpoint: self.endpoint.id, seq: self.seq, group, delivered: delivered && recorded }
    }
}

impl Attempt {
    /// The URL's host checked again at each attempt (`[webhooks] allow_internal_targets` may have been on when it
    /// was registered): a literal address never reaches the resolver, which checks the names.
    fn vet(&self) -> Result<(), Blocked> {
        if self.allow_internal {
            return Ok(());
        }
        let url = url::Url::parse(&self.endpoint.url).map_err(|_| Blocked("not a URL".into()))?;
        url.host().map_or(Ok(()), target::check_host)
    }
}
