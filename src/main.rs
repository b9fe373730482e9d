//! The `service-auth` command: parses the command line and the configuration, then hands over to the library.

use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use service_auth::bootstrap::{self, AdminCreated, AdminError};
use service_auth::config::{self, Config, LogFormat};
use service_auth::ops;
use service_auth::server::Started;
use service_auth::store::StoreError;
use tokio_util::sync::CancellationToken;

#[derive(Parser)]
#[command(version, about = "Authentication and administration service with its own durable store")]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// Configuration file (default: $SERVICE_AUTH_CONFIG, else ./config.toml when present).
    #[arg(long, global = true)]
    config: Option<PathBuf>,
}

#[derive(Subcommand)]
enum Command {
    /// Run the server (the default).
    Serve,
    /// Load and check the configuration (file and environment), print a one-line summary, and exit: 0 when the
    /// server would start with it, 2 with the key named otherwise.
    CheckConfig,
    /// Have the running server read its configuration file again (as SIGHUP does) and print what it applied: the
    /// file is checked as check-config checks it, and one that fails changes nothing (exit 2, with the reason).
    /// The server is found by the data directory of this configuration (its control socket).
    Reload,
    /// Manage administrators.
    Admin {
        #[command(subcommand)]
        command: AdminCommand,
    },
    /// Manage the identity provider's clients (the applications that sign their users in here).
    Client {
        #[command(subcommand)]
        command: ClientCommand,
    },
    /// Fill the data directory with generated users, sessions and organizations (for tests and benchmarks).
    Seed {
        #[arg(long, default_value_t = 0)]
        users: usize,
        #[arg(long, default_value_t = 0)]
        sessions: usize,
        #[arg(long, default_value_t = 0)]
        orgs: usize,
        /// Write the generated session tokens here, one per line.
        #[arg(long)]
        tokens_out: Option<PathBuf>,
        /// Give user1 … user<N> 1,000 more sessions each (what banning a busy account costs, in benchmarks).
        #[arg(long, default_value_t = 0)]
        busy_users: usize,
        /// One more organization, seed-members, whose members are the first N accounts (the administrator its owner).
        #[arg(long, default_value_t = 0)]
        members_in_org: usize,
        /// Make seed-members' members Users of its SCIM directory too (what a SCIM list costs, in benchmarks).
        #[arg(long)]
        scim: bool,
        /// One grant to a seeded confidential client for each of the first N sessions, with its refresh token and
        /// an access token valid for 15 minutes (introspection and token endpoint benchmarks).
        #[arg(long, default_value_t = 0)]
        access_tokens: usize,
        /// Write the grants' tokens here, one grant a line: ACCESS_TOKEN REFRESH_TOKEN.
        #[arg(long)]
        grants_out: Option<PathBuf>,
        /// Write the seeded client's credentials here: CLIENT_ID CLIENT_SECRET.
        #[arg(long)]
        client_out: Option<PathBuf>,
        /// The issuer the access tokens name (default: base_url + /api/auth): http://HOST:PORT/api/auth.
        #[arg(long)]
        issuer: Option<String>,
        /// Erase the data directory's store first (without it, a directory that is not empty is refused).
        #[arg(long)]
        force: bool,
    },
    /// Write a consistent snapshot of the store to FILE: directly when no server runs, else through the running
    /// server (its control socket in the data directory), which keeps serving.
    Backup {
        #[arg(long)]
        out: PathBuf,
    },
    /// Replace the store with a snapshot written by `backup` (server stopped); the replaced store is kept aside.
    Restore { file: PathBuf },
    /// Move the data directory's content into an empty PostgreSQL database (`--to postgres`), or a PostgreSQL
    /// database's content into an empty data directory (`--to embedded`). Servers stopped; the source is kept.
    MigrateStore {
        /// `postgres` or `embedded`.
        #[arg(long, value_parser = ["postgres", "embedded"])]
        to: String,
        /// The PostgreSQL database, as a postgres:// URL (default: [store] url, or $SERVICE_AUTH_STORE_URL).
        #[arg(long)]
        url: Option<String>,
    },
    /// Write users, organizations and memberships as JSON Lines (no session tokens).
    Export {
        /// Output file; standard output when absent.
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Read a file written by `export`, refusing duplicates.
    Import { file: PathBuf },
    /// Bring users (with their passwords), roles, bans and organizations over from a better-auth database, all
    /// or nothing (server stopped). Sessions are not imported.
    #[command(group(clap::ArgGroup::new("source").required(true).args(["sqlite", "postgres"])))]
    ImportBetterAuth {
        /// The better-auth SQLite file (opened read-only).
        #[arg(long)]
        sqlite: Option<PathBuf>,
        /// The better-auth PostgreSQL database, as a postgres:// URL.
        #[arg(long)]
        postgres: Option<String>,
        /// Check and print the report; write nothing.
        #[arg(long)]
        dry_run: bool,
        /// Write better-auth id → new id here, one JSON object per line (for the application's own tables).
        #[arg(long)]
        mapping_out: Option<PathBuf>,
        /// better-auth's secret: with it the second factors (TOTP secrets, backup codes) come over, which
        /// better-auth encrypts with it. Prefer the environment variable: a command line is visible to others.
        #[arg(long, env = "BETTER_AUTH_SECRET", hide_env_values = true)]
        secret: Option<String>,
    },
}

#[derive(Subcommand)]
enum ClientCommand {
    /// Register a client and print its client_id and, for a confidential client, its secret (shown only this
    /// once). Works while no server runs on the embedded store, and any time on PostgreSQL; the admin API
    /// (`POST /api/admin/oidc/clients`) does the same while the server runs.
    Add {
        #[arg(long)]
        name: String,
        /// A redirect URI, matched byte for byte (repeat for several).
        #[arg(long = "redirect-uri")]
        redirect_uris: Vec<String>,
        /// Where RP-initiated logout may send the browser back (repeat for several).
        #[arg(long = "post-logout-redirect-uri")]
        post_logout_redirect_uris: Vec<String>,
        /// Space-separated scopes it may ask for (default: openid profile email offline_access).
        #[arg(long)]
        scope: Option<String>,
        /// authorization_code (the default; brings refresh_token) or client_credentials (repeat for both).
        #[arg(long = "grant-type")]
        grant_types: Vec<String>,
        /// A public client (a native or browser app): no secret, PKCE required.
        #[arg(long)]
        public: bool,
        /// A native app: loopback http redirects (any port) and private-use schemes.
        #[arg(long)]
        native: bool,
        /// A first-party client: no consent page.
        #[arg(long)]
        skip_consent: bool,
        /// May ask for RP-initiated logout.
        #[arg(long)]
        enable_end_session: bool,
        /// Where a signed logout token is POSTed when a user's session ends (back-channel logout).
        #[arg(long)]
        backchannel_logout_uri: Option<String>,
        /// The relying party needs `sid` in its logout tokens.
        #[arg(long)]
        backchannel_logout_session_required: bool,
        /// EdDSA (default), ES256 or RS256.
        #[arg(long)]
        id_token_alg: Option<String>,
    },
}

#[derive(Subcommand)]
enum AdminCommand {
    /// Create an administrator. Works while no server runs. An existing account with that e-mail is refused
    /// unless --promote-existing is given.
    Create {
        #[arg(long)]
        email: String,
        #[arg(long)]
        name: String,
        /// Read the password from standard input (one line). Otherwise $SERVICE_AUTH_ADMIN_PASSWORD, otherwise
        /// a random password is generated and printed once.
        #[arg(long)]
        password_stdin: bool,
        /// Make the existing account with this e-mail the administrator: its password is replaced by the one
        /// given (or generated) and all its sessions end. Only for an account you know to be yours: without
        /// e-mail verification anyone can sign up with any address.
        #[arg(long)]
        promote_existing: bool,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let config = match config::load(cli.config.as_deref()) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("service-auth: configuration error: {e}");
            return ExitCode::from(2);
        }
    };
    if let Some(Command::CheckConfig) = cli.command {
        println!("{}", summary(&config));
        return ExitCode::SUCCESS;
    }
    if let Some(Command::Reload) = cli.command {
        return reload(&config);
    }
    init_logging(&config);
    let source =
        config.source.as_ref().map_or_else(|| "none (built-in defaults)".to_owned(), |p| p.display().to_string());
    tracing::info!(config = %source, data_dir = %config.data_dir.display(), "configuration");
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("service-auth: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match cli.command.unwrap_or(Command::Serve) {
        Command::Serve => runtime.block_on(serve(config)),
        Command::CheckConfig | Command::Reload => unreachable!("answered before logging starts"),
        Command::Admin { command: AdminCommand::Create { email, name, password_stdin, promote_existing } } => {
            runtime.block_on(admin_create(&config, &email, &name, password_stdin, promote_existing))
        }
        Command::Client {
            command:
                ClientCommand::Add {
                    name,
                    redirect_uris,
                    post_logout_redirect_uris,
                    scope,
                    grant_types,
                    public,
                    native,
                    skip_consent,
                    enable_end_session,
                    backchannel_logout_uri,
                    backchannel_logout_session_required,
                    id_token_alg,
                },
        } => {
            let new = service_auth::provider::NewClient {
                name,
                redirect_uris,
                post_logout_redirect_uris,
                scopes: scope.map(|s| s.split(' ').filter(|s| !s.is_empty()).map(str::to_owned).collect()),
                grant_types: (!grant_types.is_empty()).then_some(grant_types),
                auth_method: public.then(|| "none".to_owned()),
                application_type: native.then(|| "native".to_owned()),
                skip_consent,
                enable_end_session,
                backchannel_logout_uri,
                backchannel_logout_session_required,
                id_token_signed_response_alg: id_token_alg,
            };
            match service_auth::provider::clients::add_offline(&config, new) {
                Ok((client, secret)) => {
                    println!("client_id: {}", client.client_id);
                    if let Some(secret) = secret {
                        println!("client_secret (shown only this once, store it now): {secret}");
                    }
                    ExitCode::SUCCESS
                }
                Err(service_auth::provider::ClientError::Store(why)) => {
                    eprintln!("service-auth: {why}: stop the server, or use POST /api/admin/oidc/clients");
                    ExitCode::FAILURE
                }
                Err(e) => {
                    eprintln!("service-auth: {e}");
                    ExitCode::from(2)
                }
            }
        }
        Command::Seed {
            users,
            sessions,
            orgs,
            tokens_out,
            busy_users,
            members_in_org,
            scim,
            access_tokens,
            grants_out,
            client_out,
            issuer,
            force,
        } => {
            let args = ops::seed::SeedArgs {
                users,
                sessions,
                orgs,
                tokens_out,
                busy_users,
                members_in_org,
                scim,
                access_tokens,
                grants_out,
                client_out,
                issuer,
                force,
            };
            report(runtime.block_on(ops::seed::seed(&config, args)))
        }
        Command::Backup { out } => report(ops::backup::backup(&config, &out)),
        Command::Restore { file } => report(ops::backup::restore(&config, &file)),
        Command::MigrateStore { to, url } => {
            let direction = match to.as_str() {
                "postgres" => ops::migrate_store::Direction::ToPostgres,
                _ => ops::migrate_store::Direction::ToEmbedded,
            };
            match url.or_else(|| config.store.url.clone()) {
                Some(url) => report(ops::migrate_store::migrate(&config, direction, &url, config.store.pool_size)),
                None => report(Err(ops::OpsError::Invalid(
                    "migrate-store needs --url postgres://… (or [store] url, or SERVICE_AUTH_STORE_URL)".into(),
                ))),
            }
        }
        Command::Export { out } => report(ops::export::export(&config, out.as_deref())),
        Command::Import { file } => report(ops::export::import(&config, &file)),
        Command::ImportBetterAuth { sqlite, postgres, dry_run, mapping_out, secret } => {
            // clap lets exactly one of the two through.
            let source = match (sqlite, postgres) {
                (Some(path), _) => Some(ops::better_auth::Source::Sqlite(path)),
                (None, url) => url.map(ops::better_auth::Source::Postgres),
            };
            let Some(source) = source else { return ExitCode::from(2) };
            let options = ops::better_auth::Options { source, dry_run, mapping_out, secret };
            report(ops::better_auth::import(&config, &options))
        }
    }
}

/// `reload`: asks the server of this data directory to read its file again; 2 when it refused the file, 1 when
/// no server answers.
fn reload(config: &Config) -> ExitCode {
    match ops::control::reload_server(&config.data_dir) {
        Ok(summary) => {
            println!("reloaded: {summary}");
            ExitCode::SUCCESS
        }
        Err(ops::control::ReloadFailed::Refused(why)) => {
            eprintln!("service-auth: the server changed nothing: {why}");
            ExitCode::from(2)
        }
        Err(ops::control::ReloadFailed::NoServer(why)) => {
            eprintln!("service-auth: {why}");
            ExitCode::FAILURE
        }
    }
}

/// `check-config`'s line: where the configuration came from and what matters most in it.
fn summary(config: &Config) -> String {
    let source = config.source.as_ref().map_or_else(|| "the built-in defaults".to_owned(), |p| p.display().to_string());
    let metrics = config.metrics.listen.map_or_else(|| "off".to_owned(), |a| a.to_string());
    let format = match config.log.format {
        LogFormat::Text => "text",
        LogFormat::Json => "json",
    };
    // Several nodes seal and open each other's secrets: say so where the key is chosen.
    let shared = match config.store.backend {
        service_auth::config::StoreBackend::Postgres => " (PostgreSQL: every node needs this same key file)",
        service_auth::config::StoreBackend::Embedded => "",
    };
    // The providers, with the two keys that decide who may get into which account through them.
    let providers: Vec<String> = config
        .oauth
        .providers
        .iter()
        .map(|p| {
            let mut flags = Vec::new();
            if p.trusted_for_linking {
                flags.push("trusted for linking");
            }
            if p.allow_unverified_email_sign_up {
                flags.push("makes accounts of addresses it does not verify");
            }
            if flags.is_empty() { p.id.clone() } else { format!("{} ({})", p.id, flags.join(", ")) }
        })
        .collect();
    let providers = if providers.is_empty() { String::new() } else { format!(", providers {}", providers.join(", ")) };
    format!(
        "configuration OK ({source}): listen {}, data_dir {}, data key {}{shared}, metrics {metrics}, log {} as \
         {format}{}{providers}",
        config.listen,
        config.data_dir.display(),
        config.data_key_path().display(),
        config.log.level,
        if config.log.access { " with access lines" } else { "" }
    )
}

/// Prints an operation's report (to stderr: `export` may be writing its data to stdout).
fn report(outcome: Result<String, ops::OpsError>) -> ExitCode {
    match outcome {
        Ok(report) => {
            eprintln!("{report}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("service-auth: {e}");
            ExitCode::FAILURE
        }
    }
}

fn init_logging(config: &Config) {
    // The filter was validated with the configuration.
    let filter = tracing_subscriber::EnvFilter::try_new(&config.log.level).unwrap_or_default();
    let logs = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    match config.log.format {
        LogFormat::Text => logs.with_ansi(std::io::stderr().is_terminal()).init(),
        // One object per line; the request's span (its id) on each line logged inside it.
        LogFormat::Json => logs.json().with_current_span(true).with_span_list(false).init(),
    }
}

async fn serve(config: Config) -> ExitCode {
    let listener = match tokio::net::TcpListener::bind(config.listen).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("service-auth: cannot listen on {}: {e}", config.listen);
            return ExitCode::FAILURE;
        }
    };
    let shutdown = CancellationToken::new();
    tokio::spawn(stop_on_signal(shutdown.clone()));
    match service_auth::server::run(listener, config, shutdown, announce).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("service-auth: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Once the server serves: where the console and the account page are (a newcomer's first question; `GET /` links
/// both), and while
/// nobody can administer the service, how to change that (logged first, so whoever reads the next line has it);
/// then one plain line on stdout with the real address (the port may have been 0), which scripts and tests read.
fn announce(started: &Started) {
    tracing::info!("the administration console is at {}", started.console);
    tracing::info!("each user's account page is at {}", started.account);
    if let Some(link) = &started.setup_link {
        tracing::warn!(
            "no administrator yet: create the first one in a browser at {link} (works once, for 30 minutes; a \
             restart logs a new link), or stop the server and run `service-auth admin create --email \
             you@example.com --name You`, or start it with SERVICE_AUTH_BOOTSTRAP_ADMIN_EMAIL and \
             SERVICE_AUTH_BOOTSTRAP_ADMIN_PASSWORD"
        );
    } else if !started.has_admin {
        tracing::warn!(
            "no administrator yet: stop the server and run `service-auth admin create --email you@example.com \
             --name You`, or start it with SERVICE_AUTH_BOOTSTRAP_ADMIN_EMAIL and SERVICE_AUTH_BOOTSTRAP_ADMIN_PASSWORD"
        );
    }
    println!("listening on {}", started.address);
    if let Some(metrics) = started.metrics {
        println!("metrics on {metrics}/metrics");
    }
    let _ = std::io::stdout().flush();
}

/// SIGTERM or Ctrl-C starts a graceful shutdown.
async fn stop_on_signal(shutdown: CancellationToken) {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = ctrl_c => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = ctrl_c.await;
            }
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
    tracing::info!("shutting down");
    shutdown.cancel();
}

async fn admin_create(
    config: &Config,
    email: &str,
    name: &str,
    password_stdin: bool,
    promote_existing: bool,
) -> ExitCode {
    let password = if password_stdin {
        let mut line = String::new();
        if std::io::stdin().lock().read_line(&mut line).is_err() {
            eprintln!("service-auth: cannot read the password from standard input");
            return ExitCode::from(2);
        }
        Some(line.trim_end_matches(['\n', '\r']).to_owned())
    } else {
        std::env::var("SERVICE_AUTH_ADMIN_PASSWORD").ok()
    };
    let generated_password = match bootstrap::create_admin(config, email, name, password, promote_existing).await {
        Ok(AdminCreated::Created { user_id, generated_password }) => {
            println!("created administrator {email} ({user_id})");
            generated_password
        }
        Ok(AdminCreated::Promoted { user_id, generated_password }) => {
            println!(
                "promoted the existing account {email} ({user_id}) to administrator; its password was replaced \
                 and its sessions ended"
            );
            generated_password
        }
        Err(AdminError::Store(StoreError::Locked(holder))) => {
            eprintln!("service-auth: {holder}: stop it, or change roles through the admin API");
            return ExitCode::FAILURE;
        }
        Err(e) => {
            eprintln!("service-auth: {e}");
            return ExitCode::FAILURE;
        }
    };
    if let Some(password) = generated_password {
        println!("generated password (shown only this once, store it now): {password}");
    }
    ExitCode::SUCCESS
}
