//! Filling a data directory with many users, sessions and organizations, fast: for start-up measurements, load
//! tests and benchmarks.
//!
//! One password is hashed once and shared by every seeded account (hashing 100,000 passwords would take half an
//! hour at the OWASP floor); records go straight to the store in large transactions. Seeded accounts are
//! `admin@seed.example` (role `admin`) and `user{N}@seed.example` (role `user`), all with [`SEED_PASSWORD`].

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use super::{OpsError, private_file};
use crate::config::Config;
use crate::domain::{
    Email, MemberRoles, Membership, Name, OrgId, OrgRole, Organization, Password, Role, RoleSet, Session, SessionId,
    SessionLimits, SessionRare, SessionToken, Slug, Timestamp, User, UserFields, UserId,
};
use crate::hashing::Hasher;
use crate::store::{ScimUserRecordV1, Store, StoreOp, convert};

/// The password of every seeded account.
pub const SEED_PASSWORD: &str = "seed-password-1";

/// The seeded client's one redirect URI (never visited: the benchmarks read the code from the redirect).
pub const SEED_REDIRECT_URI: &str = "https://app.seed.example/callback";

/// Sessions of each of the `--busy-users`.
pub const BUSY_SESSIONS: usize = 1_000;

/// Records per transaction: large enough that fsyncs do not dominate, small enough to bound memory.
const BATCH: usize = 10_000;

/// What `service-auth seed` creates.
#[derive(Debug, Clone, Default)]
pub struct SeedArgs {
    pub users: usize,
    pub sessions: usize,
    pub orgs: usize,
    /// Where to write the session tokens, one per line (load tests need them; the store keeps only hashes).
    pub tokens_out: Option<PathBuf>,
    /// `user1` … `user<N>` get [`BUSY_SESSIONS`] more sessions each (what a ban costs, in the benchmarks).
    pub busy_users: usize,
    /// One more organization, `seed-members`, whose members are the first N accounts: `admin@seed.example` as its
    /// `owner`, `user1` … `user<N-1>` as `member`s (what `list-members` costs at scale, in the benchmarks).
    pub members_in_org: usize,
    /// Each member of `seed-members` is also a User of that organization's SCIM directory (a record as `POST
    /// /Users` makes: `userName` and the primary e-mail its address), for what a SCIM list costs at scale.
    pub scim: bool,
    /// One grant per seeded session, for the first N sessions (N at most `--sessions`), all to one confidential
    /// client, `Seed client`, with the scopes `openid profile email offline_access` and the user's consent: each
    /// with its refresh token and an access token signed as the token endpoint signs it (valid for a quarter of an
    /// hour from the seed). What introspection and the token endpoint cost at scale, in the benchmarks.
    pub access_tokens: usize,
    /// Where to write the grants' tokens, one grant a line: `ACCESS_TOKEN REFRESH_TOKEN` (live credentials; the
    /// store keeps only the refresh tokens' hashes).
    pub grants_out: Option<PathBuf>,
    /// Where to write the seeded client's credentials: `CLIENT_ID CLIENT_SECRET` (shown nowhere else).
    pub client_out: Option<PathBuf>,
    /// The issuer the access tokens name (`iss`): the server's `base_url` + `/api/auth` when not given; the
    /// server answers only tokens whose issuer is its own, `http://HOST:PORT/api/auth` without a `base_url`.
    pub issuer: Option<String>,
    /// Erase whatever the directory holds first. Without it a directory that is not empty is refused: seeding
    /// twice would duplicate every seeded e-mail (a store the server refuses to start on), and seeding a real
    /// directory would plant an administrator with a published password in it.
    pub force: bool,
}

/// Seeds `config.data_dir` (which no server may hold). Returns a report for the terminal.
pub async fn seed(config: &Config, args: SeedArgs) -> Result<String, OpsError> {
    let started = Instant::now();
    let hasher = Hasher::new(&config.hashing).map_err(|e| OpsError::Invalid(e.to_string()))?;
    let password = Password::new(SEED_PASSWORD).map_err(|e| OpsError::Invalid(e.to_string()))?;
    let hash = hasher.hash(password).await.map_err(|e| OpsError::Invalid(e.to_string()))?;
    let roles = RoleSet::new(&config.roles.allowed, &config.roles.default);
    let (dir, tokens_out) = (config.data_dir.clone(), args.tokens_out.clone());
    let limits = config.session.limits();
    let grants = match args.access_tokens {
        0 => None,
        n if n > args.sessions || args.users == 0 => {
            return Err(OpsError::Invalid(format!(
                "--access-tokens {n} needs as many --sessions (one grant a session) and --users"
            )));
        }
        _ => {
            let issuer = args
                .issuer
                .clone()
                .or_else(|| config.base_url.as_deref().map(|base| format!("{}/api/auth", base.trim_end_matches('/'))));
            let issuer = issuer.ok_or_else(|| {
                OpsError::Invalid(
                    "--access-tokens needs --issuer (the server's http://HOST:PORT/api/auth) or a base_url".into(),
                )
            })?;
            let key = crate::data_key::DataKey::load_or_create_file(&config.data_key_path())
                .map_err(|e| OpsError::Io(format!("the data key: {e}")))?;
            Some(GrantSeed { issuer, key, out: args.grants_out.clone(), client_out: args.client_out.clone() })
        }
    };
    let report = tokio::task::spawn_blocking(move || {
        let store = Store::open(&dir)?;
        if !store.is_empty()? {
            if !args.force {
                return Err(OpsError::Invalid(format!(
                    "{} is not empty; seed only fills an empty data directory (--force erases it first)",
                    dir.display()
                )));
            }
            store.clear()?;
        }
        // Live session tokens: readable by the owner only.
        let mut out = tokens_out.as_deref().map(private_file).transpose()?.map(std::io::BufWriter::new);
        let orgs = seed_orgs(&store, args.orgs)?;
        let user_ids = seed_users(&store, args.users, &hash, &roles, &orgs)?;
        let sessions = if user_ids.is_empty() { 0 } else { args.sessions };
        let granted = seed_sessions(&store, sessions, &user_ids, &limits, out.as_mut(), args.access_tokens)?;
        if let Some(grants) = grants {
            seed_grants(&store, &granted, grants)?;
        }
        let busy = user_ids.get(1..=args.busy_users).unwrap_or_default();
        seed_sessions(&store, busy.len() * BUSY_SESSIONS, busy, &limits, None::<&mut std::io::Sink>, 0)?;
        let members = seed_members(&store, user_ids.get(..args.members_in_org).unwrap_or(&user_ids), args.scim)?;
        if let Some(out) = out.as_mut() {
            out.flush().map_err(|e| OpsError::Io(e.to_string()))?;
        }
        Ok::<_, OpsError>(format!(
            "seeded {} users (admin@seed.example and user<N>@seed.example, password {SEED_PASSWORD:?}), {} sessions, {} grants with their tokens, {} organizations, {} members of seed-members in {:.1?}",
            user_ids.len(),
            sessions,
            args.access_tokens,
            orgs.len() + usize::from(members > 0),
            members,
            started.elapsed()
        ))
    })
    .await
    .map_err(|e| OpsError::Io(e.to_string()))??;
    Ok(report)
}

fn commit_in_batches(store: &Store, ops: impl Iterator<Item = StoreOp>) -> Result<(), OpsError> {
    let mut batch = Vec::with_capacity(BATCH);
    for op in ops {
        batch.push(op);
        if batch.len() == BATCH {
            store.commit(&batch)?;
            batch.clear();
        }
    }
    if !batch.is_empty() {
        store.commit(&batch)?;
    }
    Ok(())
}

fn seed_orgs(store: &Store, n: usize) -> Result<Vec<OrgId>, OpsError> {
    let mut ids = Vec::with_capacity(n);
    let ops = (0..n).map(|i| {
        let org = Organization {
            id: OrgId::new(),
            name: Name::from_trusted(format!("Seed organization {i}")),
            slug: Slug::from_trusted(format!("seed-{i}")),
            logo: None,
            metadata: None,
            created_at: Timestamp::now(),
            teams: Vec::new(),
            roles: Vec::new(),
            require_sso: false,
        };
        ids.push(org.id);
        StoreOp::PutOrg(convert::org_record(&org))
    });
    commit_in_batches(store, ops)?;
    Ok(ids)
}

/// The accounts, each with its primary membership when there are organizations: the record start-up would
/// otherwise write for every account whose `organizationId` has none, all in the first start's one cleanup commit
/// (at 10,000,000 accounts that start took 80 s and peaked at 9.2 GB, against ~25 s and 6.3 GB for every later
/// one: BENCHMARKS.md, round four). Written here as start-up would write it (a `member` since the account was
/// made), the first start is like any other.
fn seed_users(store: &Store, n: usize, hash: &str, roles: &RoleSet, orgs: &[OrgId]) -> Result<Vec<UserId>, OpsError> {
    let mut ids = Vec::with_capacity(n);
    let default_role = roles.default_role();
    let ops = (0..n).flat_map(|i| {
        let (email, role) = match i {
            0 => ("admin@seed.example".to_owned(), Role::admin()),
            _ => (format!("user{i}@seed.example"), default_role.clone()),
        };
        let now = Timestamp::now();
        let user = User::from(UserFields {
            id: UserId::new(),
            name: Name::from_trusted(format!("Seed user {i}")),
            email: Email::from_trusted(email),
            // Seeded accounts work under `require_verification` too.
            email_verified: true,
            image: None,
            role,
            banned: false,
            ban_reason: None,
            ban_expires: None,
            organization_id: (!orgs.is_empty()).then(|| orgs[i % orgs.len()]),
            password_hash: hash.into(),
            created_at: now,
            updated_at: now,
            two_factor: None,
            username: None,
            display_username: None,
        });
        ids.push(user.id);
        let primary = user.organization_id.map(|org| {
            let member = Membership::new(org, user.id, MemberRoles::one(OrgRole::Member), user.created_at);
            StoreOp::PutMember(convert::membership_record(&member))
        });
        std::iter::once(StoreOp::PutUser(convert::user_record(&user))).chain(primary)
    });
    commit_in_batches(store, ops)?;
    Ok(ids)
}

/// The `seed-members` organization and its memberships (nothing when `users` is empty). Written as records, past
/// the membership limit, which bounds what the plugin's calls add, not what a seed may hold.
fn seed_members(store: &Store, users: &[UserId], scim: bool) -> Result<usize, OpsError> {
    if users.is_empty() {
        return Ok(0);
    }
    let now = Timestamp::now();
    let org = Organization {
        id: OrgId::new(),
        name: Name::from_trusted("Seed members".to_owned()),
        slug: Slug::from_trusted("seed-members".to_owned()),
        logo: None,
        metadata: None,
        created_at: now,
        teams: Vec::new(),
        roles: Vec::new(),
        require_sso: false,
    };
    store.commit(&[StoreOp::PutOrg(convert::org_record(&org))])?;
    let ops = users.iter().enumerate().map(|(i, user)| {
        let role = if i == 0 { OrgRole::Owner } else { OrgRole::Member };
        // Joining order is the seed's order: one millisecond apart, so the pages are the same on every load.
        let joined = Timestamp::from_millis(now.as_millis() + i as i64);
        StoreOp::PutMember(convert::membership_record(&Membership::new(org.id, *user, MemberRoles::one(role), joined)))
    });
    commit_in_batches(store, ops)?;
    if scim {
        // Seeded addresses are admin@seed.example and user<i>@seed.example, in the order of `users`.
        let records = users.iter().enumerate().map(|(i, user)| {
            let email = if i == 0 { "admin@seed.example".to_owned() } else { format!("user{i}@seed.example") };
            let at = now.as_millis() + i as i64;
            StoreOp::PutScimUser(ScimUserRecordV1 {
                org: org.id.to_bytes(),
                user: user.to_bytes(),
                user_name: email.clone(),
                external_id: Some(format!("seed-{i}")),
                active: true,
                attributes: serde_json::json!({"emails": [{"value": email, "primary": true}], "displayName": format!("Seed user {i}")})
                    .to_string(),
                created_at_ms: at,
                updated_at_ms: at,
            })
        });
        commit_in_batches(store, records)?;
    }
    Ok(users.len())
}

/// Writes `n` sessions of `users` (in turn); answers the first `keep` of them (what a grant names of one).
fn seed_sessions(
    store: &Store,
    n: usize,
    users: &[UserId],
    limits: &SessionLimits,
    mut tokens: Option<&mut impl Write>,
    keep: usize,
) -> Result<Vec<Session>, OpsError> {
    if users.is_empty() {
        return Ok(Vec::new());
    }
    let mut kept = Vec::with_capacity(keep.min(n));
    let mut failed = None;
    let ops = (0..n).map(|i| {
        let token = SessionToken::generate();
        if let Some(out) = tokens.as_mut()
            && let Err(e) = writeln!(out, "{}", token.as_str())
        {
            failed = Some(e);
        }
        let now = Timestamp::now();
        let session = Session {
            id: SessionId::new(),
            user_id: users[i % users.len()],
            // The end a sign-in under these limits gives (with the idle limit, an hour from now): a fixed seven
            // days made every seeded session's first use a durable write, moving its end back to the idle limit,
            // so benchmarks over many seeded sessions measured those writes instead of the session check.
            expires_at: limits.first_end(now, true, false),
            created_at: now,
            updated_at: now,
            ip_address: "127.0.0.1".into(),
            user_agent: "seed".into(),
            remember_me: true,
            rare: SessionRare::default(),
        };
        let op = StoreOp::PutSession(token.hash(), convert::session_record(&session));
        if i < keep {
            kept.push(session);
        }
        op
    });
    commit_in_batches(store, ops)?;
    match failed {
        Some(e) => Err(OpsError::Io(format!("writing tokens: {e}"))),
        None => Ok(kept),
    }
}

/// What `--access-tokens` needs besides the sessions: the issuer the tokens name, the data directory's key (which
/// seals the signing keys), and where the credentials go.
struct GrantSeed {
    issuer: String,
    key: crate::data_key::DataKey,
    out: Option<PathBuf>,
    client_out: Option<PathBuf>,
}

/// The seeded client, its signing keys, and a grant of each of `sessions` with the user's consent: the records
/// the token endpoint writes (a grant with its refresh token's hash) and the tokens it answers, signed by the keys
/// a server on this directory loads. Tokens go to `seed.out`, the client's credentials to `seed.client_out`.
fn seed_grants(store: &Store, sessions: &[Session], seed: GrantSeed) -> Result<(), OpsError> {
    use crate::provider::grants::{self, AccessClaims};
    use crate::store::{OAuthConsentRecordV1, OAuthGrantRecord};
    let new = crate::provider::NewClient {
        name: "Seed client".into(),
        redirect_uris: vec![SEED_REDIRECT_URI.into()],
        grant_types: Some(vec!["authorization_code".into(), "refresh_token".into()]),
        ..Default::default()
    };
    let (client, secret, ops) =
        crate::provider::clients::created_offline(new).map_err(|e| OpsError::Invalid(e.to_string()))?;
    store.commit(&ops)?;
    if let Some(path) = &seed.client_out {
        let secret = secret.unwrap_or_default();
        writeln!(private_file(path)?, "{} {secret}", client.client_id).map_err(|e| OpsError::Io(e.to_string()))?;
    }
    let now = Timestamp::now();
    let (keys, ops) = crate::provider::keys::OfflineKeys::generate(&seed.key, now.as_millis());
    store.commit(&ops)?;
    let mut out = seed.out.as_deref().map(private_file).transpose()?.map(std::io::BufWriter::new);
    let scopes: Vec<String> = crate::provider::SCOPES.iter().map(|s| (*s).to_owned()).collect();
    let mut failed = None;
    let ops = sessions.iter().flat_map(|session| {
        let mut grant = OAuthGrantRecord {
            id: grants::new_grant_id(),
            client_id: client.client_id.clone(),
            user_id: Some(session.user_id.to_bytes()),
            session_id: Some(session.id.to_bytes()),
            scopes: scopes.clone(),
            auth_time_ms: session.created_at.as_millis(),
            refresh_hash: None,
            retired: Vec::new(),
            created_at_ms: now.as_millis(),
            updated_at_ms: now.as_millis(),
            expires_at_ms: 0,
            organization: None,
        };
        let refresh = grants::give_refresh_token(&mut grant);
        let mut claims = AccessClaims::new(&seed.issuer, &client.client_id, &grant, &scopes, now);
        let access = keys.sign_access(crate::provider::Alg::EdDsa, &mut claims).expect("a key signs now");
        if let Some(out) = out.as_mut()
            && let Err(e) = writeln!(out, "{access} {refresh}")
        {
            failed = Some(e);
        }
        let consent = OAuthConsentRecordV1 {
            user_id: session.user_id.to_bytes(),
            client_id: client.client_id.clone(),
            scopes: scopes.clone(),
            created_at_ms: now.as_millis(),
            updated_at_ms: now.as_millis(),
        };
        [StoreOp::PutOAuthGrant(grant), StoreOp::PutOAuthConsent(consent)]
    });
    commit_in_batches(store, ops)?;
    if let Some(e) = failed {
        return Err(OpsError::Io(format!("writing the grants' tokens: {e}")));
    }
    if let Some(out) = out.as_mut() {
        out.flush().map_err(|e| OpsError::Io(e.to_string()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn seeds_users_sessions_and_orgs_that_load() {
        let dir = tempfile::tempdir().unwrap();
        let tokens = dir.path().join("tokens.txt");
        let config = Config { data_dir: dir.path().join("data"), ..Config::default() };
        let args = SeedArgs {
            users: 25,
            sessions: 40,
            orgs: 3,
            tokens_out: Some(tokens.clone()),
            busy_users: 0,
            members_in_org: 0,
            scim: false,
            force: false,
            ..SeedArgs::default()
        };
        seed(&config, args.clone()).await.unwrap();
        let loaded = Store::open(&config.data_dir).unwrap().load().unwrap();
        assert_eq!((loaded.users.len(), loaded.sessions.len(), loaded.orgs.len()), (25, 40, 3));
        assert_eq!(
            Store::open(&config.data_dir).unwrap().counts().unwrap(),
            (25, 40),
            "what start-up sizes its maps by"
        );
        assert_eq!(loaded.users.iter().filter(|u| u.role == "admin").count(), 1);
        let first = std::fs::read_to_string(&tokens).unwrap().lines().next().unwrap().to_owned();
        let hash = SessionToken::parse(&first).unwrap().hash();
        assert!(loaded.sessions.iter().any(|(h, _)| *h == hash), "a written token opens a seeded session");
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&tokens).unwrap().permissions().mode() & 0o777, 0o600, "live tokens");

        // Before: a second run duplicated every seeded e-mail, and the server then refused to start.
        let again = seed(&config, args.clone()).await.unwrap_err().to_string();
        assert!(again.contains("is not empty") && again.contains("--force"), "{again}");
        seed(&config, SeedArgs { users: 5, force: true, ..args }).await.unwrap();
        let loaded = Store::open(&config.data_dir).unwrap().load().unwrap();
        assert_eq!((loaded.users.len(), loaded.orgs.len()), (5, 3), "--force starts from an empty store");
        let roles = RoleSet::new(&config.roles.allowed, &config.roles.default);
        let store = Store::open(&config.data_dir).unwrap();
        assert!(crate::actors::load::build(&store, &roles).is_ok(), "a server can start on it");
    }

    /// A seeded session is one a sign-in could have made under the configured limits: its first use is a read,
    /// not a write. Before: every seeded session ended seven days out, the idle limit (an hour by default) moved
    /// it back at its first use, a durable write, and the curves over many seeded sessions measured the disk.
    #[tokio::test]
    async fn seeded_sessions_end_where_a_sign_in_would_so_their_first_use_writes_nothing() {
        use crate::domain::SessionUse as Use;
        let dir = tempfile::tempdir().unwrap();
        let config = Config { data_dir: dir.path().join("data"), ..Config::default() };
        let args = SeedArgs {
            users: 3,
            sessions: 5,
            orgs: 0,
            tokens_out: None,
            busy_users: 1,
            members_in_org: 0,
            scim: false,
            force: false,
            ..SeedArgs::default()
        };
        seed(&config, args).await.unwrap();
        let limits = config.session.limits();
        assert!(limits.idle.is_some(), "the default limits have an idle limit, which is what moved the end");
        let loaded = Store::open(&config.data_dir).unwrap().load().unwrap();
        assert_eq!(loaded.sessions.len(), 5 + BUSY_SESSIONS);
        let now = Timestamp::now();
        for (_, record) in loaded.sessions {
            let session = convert::session(record);
            assert_eq!(limits.check(&session, now), Use::Live, "{:?} {:?}", session.created_at, session.expires_at);
        }
    }

    /// Every seeded account of an organization has its primary membership on disk, as start-up would make it, so
    /// the first start after a seed writes nothing. Before: seed wrote the accounts only, and the first start
    /// wrote a membership for each in one commit (at 10,000,000 accounts, 80 s and a 9.2 GB peak).
    #[tokio::test]
    async fn seeded_accounts_have_their_primary_membership_so_the_first_start_writes_none() {
        let dir = tempfile::tempdir().unwrap();
        let config = Config { data_dir: dir.path().join("data"), ..Config::default() };
        let args = SeedArgs { users: 25, sessions: 10, orgs: 3, ..SeedArgs::default() };
        seed(&config, args).await.unwrap();
        let store = Store::open(&config.data_dir).unwrap();
        let loaded = store.load().unwrap();
        assert_eq!(loaded.members.len(), 25, "one primary membership an account");
        for user in &loaded.users {
            let member = loaded.members.iter().find(|m| m.user == user.id).expect("the account's membership");
            assert_eq!(Some(member.org), user.organization_id);
            assert_eq!(MemberRoles::from_bits(member.roles), MemberRoles::one(OrgRole::Member));
            assert_eq!(member.created_at_ms, user.created_at_ms, "joined when the account was made, as start-up says");
        }
        let roles = RoleSet::new(&config.roles.allowed, &config.roles.default);
        let built = crate::actors::load::build(&store, &roles).unwrap();
        assert!(built.cleanup.is_empty(), "the first start writes nothing: {} ops", built.cleanup.len());
        let org = OrgId::from_bytes(loaded.members[0].org);
        let on_disk = loaded.members.iter().filter(|m| m.org == org.to_bytes()).count();
        assert_eq!(built.indexes.members.count(org), on_disk, "every membership loaded");
    }

    #[tokio::test]
    async fn seeds_members_into_one_organization() {
        let dir = tempfile::tempdir().unwrap();
        let config = Config { data_dir: dir.path().join("data"), ..Config::default() };
        let args = SeedArgs { users: 30, members_in_org: 20, ..SeedArgs::default() };
        let report = seed(&config, args).await.unwrap();
        assert!(report.contains("20 members of seed-members"), "{report}");
        let store = Store::open(&config.data_dir).unwrap();
        let loaded = store.load().unwrap();
        let org = loaded.orgs.iter().find(|o| o.slug == "seed-members").expect("the organization");
        assert_eq!(loaded.members.len(), 20);
        assert!(loaded.members.iter().all(|m| m.org == org.id));
        let owners: Vec<_> = loaded.members.iter().filter(|m| MemberRoles::from_bits(m.roles).is_owner()).collect();
        let admin = loaded.users.iter().find(|u| u.role == "admin").unwrap();
        assert_eq!(owners.len(), 1);
        assert_eq!(owners[0].user, admin.id, "the administrator owns it");
        let roles = RoleSet::new(&config.roles.allowed, &config.roles.default);
        assert!(crate::actors::load::build(&store, &roles).is_ok(), "a server can start on it");
        assert!(store.scim_users(None).unwrap().is_empty(), "no directory unless asked");
    }

    #[tokio::test]
    async fn seeds_the_members_as_users_of_the_organizations_directory() {
        let dir = tempfile::tempdir().unwrap();
        let config = Config { data_dir: dir.path().join("data"), ..Config::default() };
        seed(&config, SeedArgs { users: 12, members_in_org: 10, scim: true, ..SeedArgs::default() }).await.unwrap();
        let store = Store::open(&config.data_dir).unwrap();
        let loaded = store.load().unwrap();
        let org = loaded.orgs.iter().find(|o| o.slug == "seed-members").expect("the organization");
        let records = store.scim_users(Some(org.id)).unwrap();
        assert_eq!(records.len(), 10);
        for r in &records {
            let user = loaded.users.iter().find(|u| u.id == r.user).expect("an account of the record");
            assert_eq!(r.user_name, user.email, "userName is the account's address");
        }
    }
}
