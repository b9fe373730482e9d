//! The token endpoint under load: refresh grants or authorization code grants per second against a running
//! server, with `--conns` clients each sending its next request as soon as its previous answer came.
//!
//! ```sh
//! service-auth seed --users 100000 --sessions 100000 --access-tokens 100000 --issuer http://127.0.0.1:3951/api/auth \
//!   --tokens-out sessions.txt --grants-out grants.txt --client-out client.txt
//! cargo run --release --example grants -- refresh --grants grants.txt --client client.txt --conns 64 --secs 10
//! cargo run --release --example grants -- code --sessions sessions.txt --client client.txt --conns 64 --secs 10
//! ```
//!
//! `refresh`: each client owns every `conns`-th grant of `--grants` (the seed's `ACCESS REFRESH` lines) and
//! refreshes them in turn, each time with the refresh token the previous answer gave (rotation: the old one would be
//! a reuse and end the grant). The file is written back with the tokens in force at the end, so the next run goes on
//! from there. `code`: each client signs in as the seeded sessions it owns (the first `--users` of `--sessions`,
//! whose users consented to the seeded client), asks `oauth2/authorize` for a code with PKCE (S256) and redeems it at
//! the token endpoint: one grant is those two requests. Both authenticate the seeded client with
//! `client_secret_basic`. Prints one line: `grants/s p50_ms p99_ms failures` (latency of one grant, both requests
//! for a code), which benches/provider.sh reads.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD as B64};
use clap::{Parser, Subcommand};
use sha2::Digest;

#[derive(Parser)]
struct Args {
    #[command(subcommand)]
    mode: Mode,
    /// The server, on loopback.
    #[arg(long, global = true, default_value = "http://127.0.0.1:3951")]
    url: String,
    /// `CLIENT_ID CLIENT_SECRET` (`service-auth seed --client-out`).
    #[arg(long, global = true)]
    client: Option<PathBuf>,
    /// Clients sending at once, each on its own connection.
    #[arg(long, global = true, default_value_t = 64)]
    conns: usize,
    /// How long, seconds.
    #[arg(long, global = true, default_value_t = 10)]
    secs: u64,
}

#[derive(Subcommand)]
enum Mode {
    /// Refresh grants, rotating each refresh token (`--grants`: the seed's `ACCESS REFRESH` lines, rewritten).
    Refresh {
        #[arg(long)]
        grants: PathBuf,
    },
    /// Authorization code grants with PKCE: authorize with a seeded session's cookie, then redeem the code.
    Code {
        /// Session tokens, one a line (`service-auth seed --tokens-out`).
        #[arg(long)]
        sessions: PathBuf,
        /// How many of the first sessions to sign in with (those whose users consented: `--access-tokens`).
        #[arg(long, default_value_t = 1000)]
        users: usize,
        #[arg(long, default_value = "https://app.seed.example/callback")]
        redirect_uri: String,
        #[arg(long, default_value = "service-auth.session_token")]
        cookie: String,
    },
}

struct Outcome {
    /// Each grant's time, microseconds.
    times: Vec<u32>,
    failures: u64,
    /// `refresh`: the tokens this client holds at the end, by line.
    held: Vec<(usize, String)>,
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let client_file = args.client.as_ref().expect("--client FILE (service-auth seed --client-out)");
    let text = std::fs::read_to_string(client_file).expect("the client file");
    let (id, secret) = text.trim().split_once(' ').expect("CLIENT_ID CLIENT_SECRET");
    let basic = Arc::new(format!("Basic {}", STANDARD.encode(format!("{id}:{secret}"))));
    let client_id = Arc::new(id.to_owned());
    let url = Arc::new(args.url.trim_end_matches('/').to_owned());
    // The clock starts once the file is read and stops when the clients are done, before it is written back:
    // reading and writing a million grants took seconds of a five-second run, and counted as if no grant was made.
    let window = Duration::from_secs(args.secs);

    let mut tasks = Vec::new();
    match &args.mode {
        Mode::Refresh { grants } => {
            let lines: Vec<(String, String)> = std::fs::read_to_string(grants)
                .expect("the grants file")
                .lines()
                .map(|l| l.split_once(' ').map(|(a, r)| (a.to_owned(), r.to_owned())).expect("ACCESS REFRESH"))
                .collect();
            assert!(lines.len() >= args.conns, "fewer grants than --conns");
            let shares: Vec<Vec<(usize, String)>> = (0..args.conns)
                .map(|c| {
                    lines.iter().enumerate().skip(c).step_by(args.conns).map(|(i, (_, r))| (i, r.clone())).collect()
                })
                .collect();
            let (started, deadline) = (Instant::now(), Instant::now() + window);
            for mine in shares {
                let (http, url, basic) = (connection(), Arc::clone(&url), Arc::clone(&basic));
                tasks.push(tokio::spawn(async move { refresh_loop(http, &url, &basic, mine, deadline).await }));
            }
            let outcomes = join(tasks).await;
            let elapsed = started.elapsed();
            let mut lines = lines;
            for (i, token) in outcomes.iter().flat_map(|o| o.held.iter()) {
                lines[*i].1.clone_from(token);
            }
            let text: String = lines.iter().map(|(a, r)| format!("{a} {r}\n")).collect();
            std::fs::write(grants, text).expect("writing the grants back");
            report(&outcomes, elapsed);
        }
        Mode::Code { sessions, users, redirect_uri, cookie } => {
            let tokens: Vec<String> = std::fs::read_to_string(sessions)
                .expect("the sessions file")
                .lines()
                .take(*users)
                .map(str::to_owned)
                .collect();
            assert!(tokens.len() >= args.conns, "fewer sessions than --conns");
            let shares: Vec<Vec<String>> = (0..args.conns)
                .map(|c| tokens.iter().skip(c).step_by(args.conns).map(|t| format!("{cookie}={t}")).collect())
                .collect();
            let (started, deadline) = (Instant::now(), Instant::now() + window);
            for mine in shares {
                let (http, url, basic) = (connection(), Arc::clone(&url), Arc::clone(&basic));
                let (client_id, redirect) = (Arc::clone(&client_id), redirect_uri.clone());
                tasks.push(tokio::spawn(async move {
                    code_loop(http, &url, &basic, &client_id, &redirect, mine, deadline).await
                }));
            }
            let outcomes = join(tasks).await;
            report(&outcomes, started.elapsed());
        }
    }
}

/// One connection's client: no redirects followed (the code is in the first one), no pool beyond one connection.
fn connection() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .pool_max_idle_per_host(1)
        .build()
        .expect("an HTTP client")
}

async fn join(tasks: Vec<tokio::task::JoinHandle<Outcome>>) -> Vec<Outcome> {
    let mut outcomes = Vec::new();
    for task in tasks {
        outcomes.push(task.await.expect("a client task"));
    }
    outcomes
}

fn report(outcomes: &[Outcome], elapsed: Duration) {
    let mut times: Vec<u32> = outcomes.iter().flat_map(|o| o.times.iter().copied()).collect();
    times.sort_unstable();
    let failures: u64 = outcomes.iter().map(|o| o.failures).sum();
    let pct = |p: f64| times.get(((times.len() as f64 * p) as usize).min(times.len().saturating_sub(1)));
    let ms = |v: Option<&u32>| v.map_or(0.0, |v| f64::from(*v) / 1000.0);
    println!("{:.1} {:.2} {:.2} {failures}", times.len() as f64 / elapsed.as_secs_f64(), ms(pct(0.5)), ms(pct(0.99)));
}

fn form(pairs: &[(&str, &str)]) -> String {
    url::form_urlencoded::Serializer::new(String::new()).extend_pairs(pairs).finish()
}

async fn refresh_loop(
    http: reqwest::Client,
    url: &str,
    basic: &str,
    mut mine: Vec<(usize, String)>,
    deadline: Instant,
) -> Outcome {
    let mut out = Outcome { times: Vec::new(), failures: 0, held: Vec::new() };
    let token_url = format!("{url}/api/auth/oauth2/token");
    let mut next = 0;
    while Instant::now() < deadline {
        let count = mine.len();
        let (_, token) = &mut mine[next];
        next = (next + 1) % count;
        let t0 = Instant::now();
        let sent = http
            .post(&token_url)
            .header("authorization", basic)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(form(&[("grant_type", "refresh_token"), ("refresh_token", token)]))
            .send()
            .await;
        let answer = match sent {
            Ok(r) if r.status() == 200 => r.json::<serde_json::Value>().await.ok(),
            _ => None,
        };
        match answer.as_ref().and_then(|a| a["refresh_token"].as_str()) {
            Some(new) => {
                *token = new.to_owned();
                out.times.push(t0.elapsed().as_micros() as u32);
            }
            None => out.failures += 1,
        }
    }
    out.held = mine;
    out
}

async fn code_loop(
    http: reqwest::Client,
    url: &str,
    basic: &str,
    client_id: &str,
    redirect_uri: &str,
    cookies: Vec<String>,
    deadline: Instant,
) -> Outcome {
    let mut out = Outcome { times: Vec::new(), failures: 0, held: Vec::new() };
    let token_url = format!("{url}/api/auth/oauth2/token");
    let mut n = 0usize;
    while Instant::now() < deadline {
        let cookie = &cookies[n % cookies.len()];
        n += 1;
        let mut verifier = [0u8; 32];
        getrandom::fill(&mut verifier).expect("random bytes");
        let verifier = B64.encode(verifier);
        let challenge = B64.encode(sha2::Sha256::digest(verifier.as_bytes()));
        let state = format!("s{n}");
        let query = form(&[
            ("response_type", "code"),
            ("client_id", client_id),
            ("redirect_uri", redirect_uri),
            ("scope", "openid profile email offline_access"),
            ("state", &state),
            ("code_challenge", &challenge),
            ("code_challenge_method", "S256"),
        ]);
        let t0 = Instant::now();
        let sent = http.get(format!("{url}/api/auth/oauth2/authorize?{query}")).header("cookie", cookie).send().await;
        let code = sent.ok().filter(|r| r.status() == 302).and_then(|r| {
            let to = r.headers().get("location")?.to_str().ok()?;
            let to = url::Url::parse(to).ok()?;
            to.query_pairs().find(|(k, _)| k == "code").map(|(_, v)| v.into_owned())
        });
        let Some(code) = code else {
            out.failures += 1;
            continue;
        };
        let sent = http
            .post(&token_url)
            .header("authorization", basic)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(form(&[
                ("grant_type", "authorization_code"),
                ("code", &code),
                ("redirect_uri", redirect_uri),
                ("code_verifier", &verifier),
            ]))
            .send()
            .await;
        let redeemed = match sent {
            Ok(r) if r.status() == 200 => r.bytes().await.is_ok(),
            _ => false,
        };
        match redeemed {
            true => out.times.push(t0.elapsed().as_micros() as u32),
            false => out.failures += 1,
        }
    }
    out
}
