//! Micro-benchmarks of what every session check does: parse the cookie, hash the token, look the session and its
//! user up, serialise the answer; of the stored record codec; and of what metrics and the request's log span add.
//! `cargo bench --bench hot_path`.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use hyper::header::{COOKIE, HeaderMap, HeaderValue};
use service_auth::actors::load;
use service_auth::domain::{RoleSet, SessionToken};
use service_auth::store::{Loaded, SessionRecord, UserRecord, codec};

const USERS: usize = 100_000;

fn user(i: usize) -> UserRecord {
    let mut id = [0u8; 16];
    id[..8].copy_from_slice(&(i as u64).to_be_bytes());
    UserRecord {
        id,
        name: format!("User {i}"),
        email: format!("user{i}@example.com"),
        image: None,
        role: "user".into(),
        banned: false,
        ban_reason: None,
        organization_id: None,
        password_hash: "$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHRzYWx0$aGFzaGhhc2hoYXNoaGFzaGhhc2hoYXNoaGFzaA".into(),
        created_at_ms: 1_795_338_902_123,
        updated_at_ms: 1_795_338_902_123,
        email_verified: false,
        ban_expires_ms: None,
        two_factor: None,
        username: None,
        display_username: None,
    }
}

fn session(user: &UserRecord) -> SessionRecord {
    SessionRecord {
        id: user.id,
        user_id: user.id,
        expires_at_ms: i64::MAX / 2,
        created_at_ms: 1_795_338_902_123,
        updated_at_ms: 1_795_338_902_123,
        ip_address: "203.0.113.7".into(),
        user_agent: "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36".into(),
        remember_me: true,
        impersonated_by: None,
        active_organization: None,
        active_team: None,
    }
}

fn hot_path(c: &mut Criterion) {
    let tokens: Vec<SessionToken> = (0..USERS).map(|_| SessionToken::generate()).collect();
    let users: Vec<UserRecord> = (0..USERS).map(user).collect();
    let sessions = tokens.iter().zip(&users).map(|(t, u)| (t.hash(), session(u))).collect();
    let roles = RoleSet::new(&["admin".into(), "user".into()], "user");
    let indexes =
        load::indexes(Loaded { users: users.clone(), sessions, ..Loaded::default() }, &roles).unwrap().indexes;
    let token = tokens[USERS / 2].clone();
    let mut headers = HeaderMap::new();
    let cookie = format!("theme=dark; service-auth.session_token={}; other=1", token.as_str());
    headers.insert(COOKIE, HeaderValue::from_str(&cookie).unwrap());

    c.bench_function("cookie parse + token hash", |b| {
        b.iter(|| {
            let value = service_auth::http::extract::cookie(black_box(&headers), "service-auth.session_token").unwrap();
            SessionToken::parse(value).unwrap().hash()
        })
    });
    let hash = token.hash();
    c.bench_function("session + user index lookup (100k)", |b| {
        b.iter(|| {
            let session = indexes.sessions.get(black_box(&hash)).unwrap();
            indexes.users.get(session.user_id).unwrap()
        })
    });
    let found = indexes.users.get(indexes.sessions.get(&hash).unwrap().user_id).unwrap();
    c.bench_function("user JSON (auth shape)", |b| {
        b.iter(|| serde_json::to_vec(&service_auth::http::dto::AuthUser::from(black_box(&*found))).unwrap())
    });
    let hasher = service_auth::hashing::Hasher::new(&service_auth::config::HashingConfig::default()).unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let phc = runtime.block_on(hasher.hash(service_auth::domain::Password::new("correct horse").unwrap())).unwrap();
    let mut group = c.benchmark_group("argon2id");
    group.sample_size(20);
    group.bench_function("verify at the OWASP floor (one core)", |b| {
        b.iter(|| {
            let password = service_auth::domain::Password::for_sign_in("correct horse").unwrap();
            runtime.block_on(hasher.verify(password, Some(phc.clone()), service_auth::hashing::OnFile::default()))
        })
    });
    group.finish();
    let record = users[7].clone();
    let bytes = codec::encode(&record);
    c.bench_function("user record encode", |b| b.iter(|| codec::encode(black_box(&record))));
    c.bench_function("user record decode", |b| b.iter(|| codec::decode_user(black_box(&bytes)).unwrap()));
}

/// What every request adds for operations: the route's counter and latency histogram (with `[metrics] listen`), and
/// the log span that carries its request id (enabled at the default level, info).
fn observability(c: &mut Criterion) {
    use service_auth::metrics::{HTTP_DURATION, HTTP_REQUESTS, Metrics};
    let m = Metrics::new(true);
    let route = || vec![::metrics::Label::new("route", "/api/auth/get-session")];
    let mut labels = route();
    labels.push(::metrics::Label::new("status", "200"));
    let requests = m.counter(HTTP_REQUESTS, labels);
    let latency = m.histogram(HTTP_DURATION, route());
    let mut n = 0u32;
    c.bench_function("metrics: count one request and record its latency", |b| {
        b.iter(|| {
            requests.increment(1);
            latency.record(black_box(0.000_05));
            // The server folds recorded latencies into buckets every 5 s; here every 64k requests.
            n = n.wrapping_add(1);
            if n.is_multiple_of(65_536) {
                m.upkeep();
            }
        })
    });
    let logs = tracing_subscriber::fmt().with_writer(std::io::sink).with_env_filter("info").finish();
    tracing::subscriber::with_default(logs, || {
        c.bench_function("log span with the request id, entered once (level info)", |b| {
            b.iter(|| {
                let span = tracing::info_span!("request", request_id = black_box("0123456789abcdef0123456789abcdef"));
                span.in_scope(|| black_box(1))
            })
        });
    });
}

/// The second step of a sign-in with a second factor, its CPU part (#28: at most 50 µs, no password hash): the
/// TOTP secret opened with the data key, and the code checked against the three steps of the window.
fn second_factor(c: &mut Criterion) {
    use service_auth::domain::two_factor;
    let dir = tempfile::tempdir().unwrap();
    let key = service_auth::data_key::DataKey::load_or_create(dir.path()).unwrap();
    let user = [7u8; 16];
    let secret = two_factor::new_secret();
    let sealed = key.seal(&secret, &two_factor::secret_context(&user));
    let step = two_factor::step_of(1_800_000_000);
    let code = format!("{:06}", two_factor::code_at(&secret, step + 1));
    c.bench_function("TOTP verification: open the sealed secret, check the window", |b| {
        b.iter(|| {
            let secret = key.open(black_box(&sealed), &two_factor::secret_context(&user)).unwrap();
            two_factor::verify(&secret, black_box(&code), step, 0).unwrap()
        })
    });
    let mac = key.mac_key();
    c.bench_function("backup code: keyed hash", |b| {
        b.iter(|| two_factor::backup_code_hash(&mac, &user, black_box("abcde-12345")))
    });
}

criterion_group!(benches, hot_path, observability, second_factor);
criterion_main!(benches);
