//! Prometheus metrics: one recorder per server (not the process-wide one, so servers in one process, as in the
//! tests, count apart), the handles the parts of the server record into, and the scrape.
//!
//! Recording is cheap on purpose: a handle is an atomic counter or a lock-free histogram bucket, resolved once at
//! start (per route, per status on first use), so a request takes no lock and allocates nothing for its labels.
//! With `[metrics] listen` unset every handle is a no-op and nothing is recorded at all.
//!
//! The text is rendered by `metrics-exporter-prometheus` in the Prometheus text format (0.0.4), which
//! `promtool check metrics` accepts as it is.

use metrics::{Counter, Gauge, Histogram, Key, Label, Metadata, Recorder, SharedString, Unit};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle, PrometheusRecorder};

/// Requests answered, by route pattern and status.
pub const HTTP_REQUESTS: &str = "service_auth_http_requests_total";
/// Time from the request's headers to its answer, by route pattern.
pub const HTTP_DURATION: &str = "service_auth_http_request_duration_seconds";
/// Requests refused by a rate limit (429), by route pattern.
pub const RATE_LIMITED: &str = "service_auth_rate_limited_total";
/// Sign-ins by outcome: `success`, or the error code answered.
pub const SIGN_INS: &str = "service_auth_sign_ins_total";
/// Password hashes waiting for a worker now, and how long each waited.
pub const HASH_QUEUE: &str = "service_auth_hashing_queue_depth";
pub const HASH_WAIT: &str = "service_auth_hashing_wait_seconds";
/// Store commits: duration (fsync included) and requests grouped into each.
pub const COMMIT_DURATION: &str = "service_auth_store_commit_duration_seconds";
pub const COMMIT_BATCH: &str = "service_auth_store_commit_batch_requests";
/// A provider's callback, its own part: the handler's time less the time it waited for the provider (discovery,
/// token exchange, keys, user info).
pub const OAUTH_CALLBACK_OWN: &str = "service_auth_oauth_callback_own_seconds";
/// What the server holds.
pub const USERS: &str = "service_auth_users";
pub const SESSIONS: &str = "service_auth_sessions";
pub const ORGANIZATIONS: &str = "service_auth_organizations";
pub const OUTBOX: &str = "service_auth_mail_outbox_depth";
/// Seconds since the oldest message this node holds was written (0 when none): how late mail is running.
pub const OUTBOX_OLDEST: &str = "service_auth_mail_outbox_oldest_seconds";
/// Mail messages given up, by reason: `refused` (the server refused them for good, 5xx) or `expired` (not sent
/// before their link's lifetime).
pub const MAIL_FAILED: &str = "service_auth_mail_failed_total";
/// Accounts whose password hash is still one imported from better-auth (replaced at their next sign-in).
pub const LEGACY_HASHES: &str = "service_auth_legacy_password_hashes";
/// Records a newer release wrote in a format this one does not read and skipped (sessions, one-time tokens): a
/// cluster in the middle of a rolling upgrade (docs/cluster.md). Per process.
pub const NEWER_RECORDS_SKIPPED: &str = "service_auth_store_newer_records_skipped_total";

/// Latency buckets, seconds: from a cached session check (tens of microseconds) to a queued hash (seconds).
const SECONDS_BUCKETS: &[f64] =
    &[0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];
/// Group-commit sizes: 1 (idle) up to the writer's maximum of 1024.
const BATCH_BUCKETS: &[f64] = &[1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0];

/// The recorder and the handles that are not per route. Cheap to share behind an `Arc`.
pub struct Metrics {
    recorder: Option<(PrometheusRecorder, PrometheusHandle)>,
    pub hash_wait: Histogram,
    pub commit_duration: Histogram,
    pub commit_batch: Histogram,
    pub oauth_callback_own: Histogram,
    pub outbox: Gauge,
    pub outbox_oldest: Gauge,
    hash_queue: Gauge,
    users: Gauge,
    sessions: Gauge,
    organizations: Gauge,
    legacy_hashes: Gauge,
    newer_skipped: Counter,
}

/// What the scrape reads from the running server at that moment.
#[derive(Debug, Clone, Copy, Default)]
pub struct Levels {
    pub users: usize,
    pub sessions: usize,
    pub organizations: usize,
    pub hash_queue: usize,
    pub legacy_hashes: usize,
    /// Records of a newer format skipped so far ([`NEWER_RECORDS_SKIPPED`]).
    pub newer_records_skipped: u64,
}

impl Metrics {
    /// Recording metrics (`enabled`, i.e. a metrics listener is configured), or handles that do nothing.
    pub fn new(enabled: bool) -> Self {
        if !enabled {
            return Self {
                recorder: None,
                hash_wait: Histogram::noop(),
                commit_duration: Histogram::noop(),
                commit_batch: Histogram::noop(),
                oauth_callback_own: Histogram::noop(),
                outbox: Gauge::noop(),
                outbox_oldest: Gauge::noop(),
                hash_queue: Gauge::noop(),
                users: Gauge::noop(),
                sessions: Gauge::noop(),
                organizations: Gauge::noop(),
                legacy_hashes: Gauge::noop(),
                newer_skipped: Counter::noop(),
            };
        }
        let recorder = PrometheusBuilder::new()
            .set_buckets(SECONDS_BUCKETS)
            .and_then(|b| b.set_buckets_for_metric(Matcher::Full(COMMIT_BATCH.into()), BATCH_BUCKETS))
            .expect("the bucket lists are not empty")
            .build_recorder();
        describe(&recorder);
        let handle = recorder.handle();
        let m = Self {
            hash_wait: recorder.register_histogram(&Key::from_static_name(HASH_WAIT), &META),
            commit_duration: recorder.register_histogram(&Key::from_static_name(COMMIT_DURATION), &META),
            commit_batch: recorder.register_histogram(&Key::from_static_name(COMMIT_BATCH), &META),
            oauth_callback_own: recorder.register_histogram(&Key::from_static_name(OAUTH_CALLBACK_OWN), &META),
            outbox: recorder.register_gauge(&Key::from_static_name(OUTBOX), &META),
            outbox_oldest: recorder.register_gauge(&Key::from_static_name(OUTBOX_OLDEST), &META),
            hash_queue: recorder.register_gauge(&Key::from_static_name(HASH_QUEUE), &META),
            users: recorder.register_gauge(&Key::from_static_name(USERS), &META),
            sessions: recorder.register_gauge(&Key::from_static_name(SESSIONS), &META),
            organizations: recorder.register_gauge(&Key::from_static_name(ORGANIZATIONS), &META),
            legacy_hashes: recorder.register_gauge(&Key::from_static_name(LEGACY_HASHES), &META),
            newer_skipped: recorder.register_counter(&Key::from_static_name(NEWER_RECORDS_SKIPPED), &META),
            recorder: Some((recorder, handle)),
        };
        // Present from the first scrape, before any sign-in or mail.
        m.outbox.set(0.0);
        m.outbox_oldest.set(0.0);
        m.mail_failed("refused").absolute(0);
        m.mail_failed("expired").absolute(0);
        m.sign_in("success").absolute(0);
        m
    }

    pub fn enabled(&self) -> bool {
        self.recorder.is_some()
    }

    /// A counter with `labels`, registered on first use (a map lookup: for per-route handles resolved once, and
    /// for events as rare and costly as a sign-in).
    pub fn counter(&self, name: &'static str, labels: Vec<Label>) -> Counter {
        match &self.recorder {
            Some((recorder, _)) => recorder.register_counter(&Key::from_parts(name, labels), &META),
            None => Counter::noop(),
        }
    }

    pub fn histogram(&self, name: &'static str, labels: Vec<Label>) -> Histogram {
        match &self.recorder {
            Some((recorder, _)) => recorder.register_histogram(&Key::from_parts(name, labels), &META),
            None => Histogram::noop(),
        }
    }

    /// The counter of mail given up for `reason`.
    pub fn mail_failed(&self, reason: &'static str) -> Counter {
        self.counter(MAIL_FAILED, vec![Label::from_static_parts("reason", reason)])
    }

    /// The counter of password range lookups of one outcome (`listed`, `absent`, `failed`).
    pub fn password_range_lookup(&self, outcome: &'static str) -> Counter {
        self.counter("service_auth_password_range_lookups_total", vec![Label::from_static_parts("outcome", outcome)])
    }

    /// The sign-in counter of one outcome.
    pub fn sign_in(&self, outcome: &'static str) -> Counter {
        self.counter(SIGN_INS, vec![Label::from_static_parts("outcome", outcome)])
    }

    /// Folds the histograms recorded since the last call into their buckets. Called every few seconds whether or
    /// not anyone scrapes, so memory stays bounded.
    pub fn upkeep(&self) {
        if let Some((_, handle)) = &self.recorder {
            handle.run_upkeep();
        }
    }

    /// The Prometheus text of everything, with the levels read now.
    pub fn render(&self, levels: Levels) -> String {
        let Some((_, handle)) = &self.recorder else { return String::new() };
        self.users.set(levels.users as f64);
        self.sessions.set(levels.sessions as f64);
        self.organizations.set(levels.organizations as f64);
        self.hash_queue.set(levels.hash_queue as f64);
        self.legacy_hashes.set(levels.legacy_hashes as f64);
        self.newer_skipped.absolute(levels.newer_records_skipped);
        handle.render()
    }
}

static META: Metadata<'static> = Metadata::new(module_path!(), metrics::Level::INFO, Some(module_path!()));

fn describe(r: &PrometheusRecorder) {
    let help = |text: &'static str| SharedString::const_str(text);
    let seconds = Some(Unit::Seconds);
    r.describe_counter(HTTP_REQUESTS.into(), None, help("HTTP requests answered, by route pattern and status."));
    r.describe_histogram(HTTP_DURATION.into(), seconds, help("HTTP request duration, by route pattern."));
    r.describe_counter(RATE_LIMITED.into(), None, help("Requests refused by a rate limit (429), by route pattern."));
    r.describe_counter(SIGN_INS.into(), None, help("Sign-ins by outcome: success, or the error code answered."));
    r.describe_counter(
        MAIL_FAILED.into(),
        None,
        help("Mail messages given up: refused for good by the server, or not sent before their link expired."),
    );
    r.describe_gauge(HASH_QUEUE.into(), None, help("Password hashes waiting for a hashing worker."));
    r.describe_histogram(HASH_WAIT.into(), seconds, help("Time a password hash waited for a hashing worker."));
    r.describe_histogram(COMMIT_DURATION.into(), seconds, help("Store commit duration, fsync included."));
    r.describe_histogram(COMMIT_BATCH.into(), None, help("Write requests grouped into one store commit."));
    r.describe_histogram(
        OAUTH_CALLBACK_OWN.into(),
        seconds,
        help("A provider's callback, less the time spent waiting for the provider (token exchange, keys, user info)."),
    );
    r.describe_gauge(USERS.into(), None, help("Accounts."));
    r.describe_gauge(SESSIONS.into(), None, help("Sessions held (expired ones until the next sweep)."));
    r.describe_gauge(ORGANIZATIONS.into(), None, help("Organizations."));
    r.describe_gauge(OUTBOX.into(), None, help("Mail messages waiting to be sent."));
    r.describe_gauge(
        OUTBOX_OLDEST.into(),
        Some(Unit::Seconds),
        help("Age of the oldest mail message waiting to be sent (0 when none)."),
    );
    r.describe_gauge(
        LEGACY_HASHES.into(),
        None,
        help("Accounts whose password hash is still one imported from better-auth (re-hashed at their next sign-in)."),
    );
    r.describe_counter(
        NEWER_RECORDS_SKIPPED.into(),
        None,
        help("Sessions and one-time tokens a newer release wrote in a format this one does not read, skipped."),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disabled_metrics_record_and_render_nothing() {
        let m = Metrics::new(false);
        m.counter(HTTP_REQUESTS, vec![Label::new("route", "/x")]).increment(1);
        m.commit_duration.record(0.5);
        assert!(!m.enabled());
        assert_eq!(m.render(Levels::default()), "");
    }

    #[test]
    fn rendered_text_has_help_types_and_buckets() {
        let m = Metrics::new(true);
        m.counter(HTTP_REQUESTS, vec![Label::new("route", "/x"), Label::new("status", "200")]).increment(3);
        m.commit_batch.record(3.0);
        m.upkeep();
        let text = m.render(Levels { users: 7, legacy_hashes: 2, ..Levels::default() });
        assert!(text.contains("# TYPE service_auth_http_requests_total counter"), "{text}");
        assert!(text.contains("service_auth_http_requests_total{route=\"/x\",status=\"200\"} 3"), "{text}");
        assert!(text.contains("service_auth_users 7"), "{text}");
        assert!(text.contains("service_auth_legacy_password_hashes 2"), "{text}");
        assert!(text.contains("service_auth_store_commit_batch_requests_bucket{le=\"4\"} 1"), "{text}");
        assert!(text.contains("service_auth_sign_ins_total{outcome=\"success\"} 0"), "{text}");
    }
}
