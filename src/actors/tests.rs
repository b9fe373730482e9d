//! The actors against a disk the test controls: a write can be held, then committed or failed. These are the
//! orderings no HTTP test can pin down (an answer before its commit, a ban whose sessions survive it, staged work
//! at shutdown).

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::users::{AttemptPolicy, UserChange};
use super::{Indexes, System, Unavailable};
use crate::config::{RolesConfig, SessionConfig};
use crate::domain::{
    Email, Name, OrgId, Organization, Role, RoleSet, Session, SessionId, SessionRare, SessionToken, Slug, Timestamp,
    User, UserFields, UserId,
};
use crate::store::{ManualDisk, Store, StoreOp, StoreWriter, convert};

/// Long enough for any message to be handled on a loaded machine; used only where the wait must time out for
/// the test to pass (a correct actor sends nothing), never for what must happen.
const QUIET: Duration = Duration::from_millis(200);
/// The patience for what must happen.
const PATIENCE: Duration = Duration::from_secs(10);

struct World {
    system: System,
    indexes: Arc<Indexes>,
    disk: ManualDisk,
    store: Arc<Store>,
    admin: UserId,
    user: UserId,
    /// The user's two sessions.
    sessions: [SessionToken; 2],
    _dir: tempfile::TempDir,
}

fn user(email: &str, role: Role) -> User {
    let now = Timestamp::now();
    User::from(UserFields {
        id: UserId::new(),
        name: Name::parse("Test").unwrap(),
        email: Email::parse(email).unwrap(),
        email_verified: false,
        image: None,
        role,
        banned: false,
        ban_reason: None,
        ban_expires: None,
        organization_id: None,
        password_hash: "$argon2id$not-used".into(),
        created_at: now,
        updated_at: now,
        two_factor: None,
        username: None,
        display_username: None,
    })
}

fn session(user: UserId) -> (SessionToken, StoreOp) {
    session_for(user, Duration::from_secs(3600))
}

fn session_for(user: UserId, lifetime: Duration) -> (SessionToken, StoreOp) {
    let token = SessionToken::generate();
    let now = Timestamp::now();
    let session = Session {
        id: SessionId::new(),
        user_id: user,
        expires_at: now.plus(lifetime),
        created_at: now,
        updated_at: now,
        ip_address: "".into(),
        user_agent: "".into(),
        remember_me: true,
        rare: SessionRare::default(),
    };
    let op = StoreOp::PutSession(token.hash(), convert::session_record(&session));
    (token, op)
}

/// An administrator, a user with two sessions, on disk and loaded, with the actors writing to a manual disk.
async fn world() -> World {
    world_with(AttemptPolicy { max_failures: 10, window: Duration::from_secs(60), shared: false }).await
}

/// [`world`] with the failure limit `attempts` (`shared`: each check reserved in the store, as on PostgreSQL).
async fn world_with(attempts: AttemptPolicy) -> World {
    world_with_more(attempts, |_| Vec::new()).await
}

/// The world, with the records `more` makes for the user on disk too.
async fn world_with_more(attempts: AttemptPolicy, more: impl FnOnce(UserId) -> Vec<StoreOp>) -> World {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(dir.path()).unwrap());
    let roles = RoleSet::new(&RolesConfig::default().allowed, &RolesConfig::default().default);
    let (admin, member) = (user("admin@example.com", Role::admin()), user("user@example.com", roles.default_role()));
    let (first, put_first) = session(member.id);
    let (second, put_second) = session(member.id);
    let mut ops = vec![
        StoreOp::PutUser(convert::user_record(&admin)),
        StoreOp::PutUser(convert::user_record(&member)),
        put_first,
        put_second,
    ];
    ops.extend(more(member.id));
    store.commit(&ops).unwrap();
    let indexes = Arc::new(super::load::build(&store, &roles).unwrap().indexes);
    let (writer, disk) = StoreWriter::manual(Arc::clone(&store));
    let system = System::start(
        Arc::clone(&indexes),
        writer,
        SessionConfig::default(),
        Default::default(),
        attempts,
        None,
        CancellationToken::new(),
    )
    .await
    .unwrap();
    World { system, indexes, disk, store, admin: admin.id, user: member.id, sessions: [first, second], _dir: dir }
}

fn ban() -> UserChange {
    UserChange { banned: Some(true), ..UserChange::default() }
}

fn stored_sessions(store: &Store) -> usize {
    store.load().unwrap().sessions.len()
}

/// Before: the ban was committed alone and acknowledged, then the sessions were ended in a second commit whose
/// failure was only logged; a second ban did not retry, and an unban brought the sessions back.
#[tokio::test]
async fn a_ban_and_the_end_of_its_sessions_are_durable_together_or_not_at_all() {
    let mut w = world().await;
    let users = w.system.handles.users.clone();
    let (admin, target) = (w.admin, w.user);

    // The disk refuses the ban: nothing of it anywhere, the sessions live on.
    let banning = tokio::spawn({
        let users = users.clone();
        async move { users.update(admin, target, ban(), String::new()).await }
    });
    let write = w.disk.next(PATIENCE).await.expect("the ban is written");
    let ends = |user: UserId| StoreOp::DeleteSessionsOf { user: user.to_bytes(), except: None };
    assert!(write.ops().contains(&ends(target)), "the ban's commit does not end its sessions: {:?}", write.ops());
    write.fail();
    assert!(banning.await.unwrap().is_err(), "a refused ban was acknowledged");
    assert!(!w.indexes.users.get(target).unwrap().banned);
    assert!(w.indexes.sessions.get(&w.sessions[0].hash()).is_some());
    assert_eq!(stored_sessions(&w.store), 2);
    assert!(w.disk.next(QUIET).await.is_none(), "something was written after the refusal");

    // The same ban again: the ban and the end of both sessions, in one commit.
    let banning = tokio::spawn({
        let users = users.clone();
        async move { users.update(admin, target, ban(), String::new()).await }
    });
    w.disk.next(PATIENCE).await.expect("the ban is written").commit();
    banning.await.unwrap().unwrap();
    assert!(w.indexes.users.get(target).unwrap().banned);
    assert!(w.indexes.sessions.get(&w.sessions[0].hash()).is_none());
    assert!(w.indexes.sessions.get(&w.sessions[1].hash()).is_none());
    assert_eq!(stored_sessions(&w.store), 0);

    // An unban brings nothing back.
    let unban = UserChange { banned: Some(false), ..UserChange::default() };
    let unbanning = tokio::spawn(async move { users.update(admin, target, unban, String::new()).await });
    w.disk.next(PATIENCE).await.expect("the unban is written").commit();
    unbanning.await.unwrap().unwrap();
    assert!(w.indexes.sessions.get(&w.sessions[0].hash()).is_none());
    assert_eq!(stored_sessions(&w.store), 0);
}

/// The sweep ends the sessions that have expired, durably, and no other; its scan over every session runs off
/// the actor and the event loop (a million sessions take tens of milliseconds to walk).
#[tokio::test]
async fn the_sweep_ends_expired_sessions_durably_and_no_other() {
    let mut expiring = None;
    let mut w =
        world_with_more(AttemptPolicy { max_failures: 10, window: Duration::from_secs(60), shared: false }, |user| {
            let (token, op) = session_for(user, Duration::from_secs(1));
            expiring = Some(token);
            vec![op]
        })
        .await;
    let expiring = expiring.unwrap().hash();
    assert!(w.indexes.sessions.get(&expiring).is_some(), "the short session is loaded while it lasts");
    tokio::time::sleep(Duration::from_millis(1100)).await;

    let sessions = w.system.handles.sessions.clone();
    let sweeping = tokio::spawn(async move { sessions.sweep_expired().await });
    let write = w.disk.next(PATIENCE).await.expect("the sweep writes the deletion");
    assert_eq!(write.ops(), &[StoreOp::DeleteSession(w.user.to_bytes(), expiring)]);
    tokio::time::sleep(QUIET).await;
    assert!(!sweeping.is_finished(), "the sweep answered before its commit");
    write.commit();
    assert_eq!(sweeping.await.unwrap(), Ok(1));
    assert!(w.indexes.sessions.get(&expiring).is_none());
    assert!(w.sessions.iter().all(|t| w.indexes.sessions.get(&t.hash()).is_some()), "a live session was swept");
    assert_eq!(stored_sessions(&w.store), 2);
    // Nothing left to sweep: nothing written.
    assert_eq!(w.system.handles.sessions.sweep_expired().await, Ok(0));
    assert!(w.disk.next(QUIET).await.is_none(), "an empty sweep wrote something");
}

/// A sign-out queued behind a failing one for the same session is not answered from the failed attempt: it
/// writes the deletion itself and answers once that is durable.
#[tokio::test]
async fn a_sign_out_behind_a_failed_one_answers_only_after_its_own_commit() {
    let mut w = world().await;
    let sessions = w.system.handles.sessions.clone();
    let hash = w.sessions[0].hash();
    let first = tokio::spawn({
        let sessions = sessions.clone();
        async move { sessions.end(hash).await }
    });
    // The first sign-out's write is held, so the actor is busy flushing; the second one queues behind it...
    let held = w.disk.next(PATIENCE).await.expect("the sign-out is written");
    let second = tokio::spawn(async move { sessions.end(hash).await });
    tokio::time::sleep(QUIET).await;
    assert!(!first.is_finished() && !second.is_finished(), "a sign-out was answered before its commit");
    held.fail();
    assert_eq!(first.await.unwrap(), Err(Unavailable));
    // ...and, the first having failed, it does the deletion itself and answers only once that is durable.
    let retry = w.disk.next(PATIENCE).await.expect("the second sign-out writes its own deletion");
    tokio::time::sleep(QUIET).await;
    assert!(!second.is_finished(), "the second sign-out was answered before its commit");
    retry.commit();
    assert_eq!(second.await.unwrap(), Ok(()));
    assert!(w.indexes.sessions.get(&hash).is_none());
}

/// Before: a sign-out of a session already being ended in the current batch was answered at once, before
/// anything was on disk, and with success even when that commit then failed. Now it shares the batch's commit.
#[tokio::test]
async fn sign_outs_in_one_batch_are_answered_by_its_commit() {
    let mut w = world().await;
    let sessions = w.system.handles.sessions.clone();
    let (hash, other) = (w.sessions[0].hash(), w.sessions[1].hash());
    // Hold a first write so that the next messages gather in one batch behind it.
    let blocker = tokio::spawn({
        let sessions = sessions.clone();
        async move { sessions.end(other).await }
    });
    let held = w.disk.next(PATIENCE).await.expect("first write");
    let ends: Vec<_> = (0..2)
        .map(|_| {
            let sessions = sessions.clone();
            tokio::spawn(async move { sessions.end(hash).await })
        })
        .collect();
    tokio::time::sleep(QUIET).await;
    held.commit();
    blocker.await.unwrap().unwrap();
    let batch = w.disk.next(PATIENCE).await.expect("the batch with both sign-outs");
    tokio::time::sleep(QUIET).await;
    assert!(ends.iter().all(|e| !e.is_finished()), "a sign-out in the batch was answered before its commit");
    batch.fail();
    for end in ends {
        assert_eq!(end.await.unwrap(), Err(Unavailable), "answered success for a deletion that never happened");
    }
    assert!(w.indexes.sessions.get(&hash).is_some());
}

/// Before: at shutdown the actors drained their mailboxes but refused their own `Flush`, so a change staged from
/// the last messages was never written and its caller got no answer but a dropped port.
#[tokio::test]
async fn work_staged_while_draining_is_flushed_not_dropped() {
    let mut w = world().await;
    let orgs = w.system.handles.orgs.clone();
    let create = |slug: &'static str| {
        let orgs = orgs.clone();
        let by = w.admin;
        tokio::spawn(async move {
            orgs.create(Name::parse("Org").unwrap(), Slug::parse(slug).unwrap(), by, String::new()).await
        })
    };
    let first = create("first");
    let held = w.disk.next(PATIENCE).await.expect("first organization written");
    let second = create("second");
    tokio::time::sleep(QUIET).await; // the second is in the mailbox, ahead of the drain
    let stopping = tokio::spawn(w.system.stop());
    tokio::time::sleep(QUIET).await;
    held.commit();
    first.await.unwrap().unwrap();
    let write = w.disk.next(PATIENCE).await.expect("the second organization was staged and never written");
    write.commit();
    second.await.unwrap().expect("the second organization was durable but its caller got an error");
    stopping.await.unwrap();
    assert_eq!(w.store.load().unwrap().orgs.len(), 2);
}

/// A store read whole loads every record (the maps sized from the store's counts, the sessions by account built
/// at the end); a bad record stops the load, with what is wrong with it.
#[test]
fn a_load_reads_every_record_or_stops_at_the_first_bad_one() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let roles = RoleSet::new(&RolesConfig::default().allowed, &RolesConfig::default().default);
    let member = user("member@example.com", roles.default_role());
    let mut ops = vec![StoreOp::PutUser(convert::user_record(&member))];
    ops.extend((0..30_000).map(|_| session(member.id).1));
    store.commit(&ops).unwrap();
    let built = super::load::build(&store, &roles).unwrap();
    assert_eq!((built.indexes.users.len(), built.indexes.sessions.len()), (1, 30_000));
    assert_eq!(built.indexes.sessions.of_user(member.id).len(), 30_000);

    let twin = || Organization {
        id: OrgId::new(),
        name: Name::parse("Twin").unwrap(),
        slug: Slug::parse("twin").unwrap(),
        logo: None,
        metadata: None,
        created_at: Timestamp::now(),
        teams: Vec::new(),
        roles: Vec::new(),
        require_sso: false,
    };
    store
        .commit(&[StoreOp::PutOrg(convert::org_record(&twin())), StoreOp::PutOrg(convert::org_record(&twin()))])
        .unwrap();
    let refused = super::load::build(&store, &roles).err().unwrap().to_string();
    assert!(refused.contains("share the slug"), "{refused}");
}

/// Start-up checks the memberships against the accounts and organizations in one walk beside the accounts: an
/// account's organization without a record gets one (written by the cleanup), a membership of an account or an
/// organization that is gone is removed, and the others are indexed as they are, however the ids interleave.
#[test]
fn a_load_keeps_the_memberships_of_what_exists_and_gives_each_account_its_organization() {
    use crate::domain::{MemberRoles, Membership, OrgRole};
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let roles = RoleSet::new(&RolesConfig::default().allowed, &RolesConfig::default().default);
    let org = |slug: &str| Organization {
        id: OrgId::new(),
        name: Name::parse("Org").unwrap(),
        slug: Slug::parse(slug).unwrap(),
        logo: None,
        metadata: None,
        created_at: Timestamp::now(),
        teams: Vec::new(),
        roles: Vec::new(),
        require_sso: false,
    };
    let (first, second, gone_org) = (org("first"), org("second"), OrgId::new());
    let mut users: Vec<User> = (0..6).map(|n| user(&format!("u{n}@example.com"), roles.default_role())).collect();
    users.sort_by_key(|u| u.id);
    // 0: organization, no record; 1: organization and its record, and one more; 2: a record, no organization;
    // 3: a record of an organization that is gone; 5: no organization, no record. Account 4 is never stored.
    users[0].organization_id = Some(first.id);
    users[1].organization_id = Some(second.id);
    let member = |org: OrgId, user: &User, role| {
        StoreOp::PutMember(convert::membership_record(&Membership::new(
            org,
            user.id,
            MemberRoles::one(role),
            user.created_at,
        )))
    };
    let mut ops = vec![StoreOp::PutOrg(convert::org_record(&first)), StoreOp::PutOrg(convert::org_record(&second))];
    ops.extend(
        users.iter().enumerate().filter(|(n, _)| *n != 4).map(|(_, u)| StoreOp::PutUser(convert::user_record(u))),
    );
    ops.push(member(second.id, &users[1], OrgRole::Owner));
    ops.push(member(first.id, &users[1], OrgRole::Admin));
    ops.push(member(first.id, &users[2], OrgRole::Member));
    ops.push(member(gone_org, &users[3], OrgRole::Member));
    ops.push(member(first.id, &users[4], OrgRole::Member));
    store.commit(&ops).unwrap();

    let built = super::load::build(&store, &roles).unwrap();
    let members = &built.indexes.members;
    let orgs_of = |n: usize| {
        let mut orgs: Vec<OrgId> = members.of_user(users[n].id).iter().map(|m| m.org).collect();
        orgs.sort();
        orgs
    };
    let mut both = vec![first.id, second.id];
    both.sort();
    assert_eq!(orgs_of(0), [first.id], "the organization became a membership");
    assert_eq!(orgs_of(1), both);
    assert!(members.get(second.id, users[1].id).unwrap().roles.is_owner(), "a record is kept as it is");
    assert_eq!(orgs_of(2), [first.id]);
    assert!(orgs_of(3).is_empty() && orgs_of(4).is_empty() && orgs_of(5).is_empty());
    assert_eq!(members.count(first.id), 3);
    let made = members.by_id(crate::domain::MemberId::of(first.id, users[0].id)).unwrap();
    assert_eq!(made.created_at, users[0].created_at, "dated as the account");
    let mut cleanup: Vec<String> = built
        .cleanup
        .iter()
        .filter_map(|op| match op {
            StoreOp::PutMember(r) => Some(format!("put {}", UserId::from_bytes(r.user))),
            StoreOp::DeleteMember(_, user) => Some(format!("delete {}", UserId::from_bytes(*user))),
            _ => None,
        })
        .collect();
    cleanup.sort();
    let mut want =
        vec![format!("put {}", users[0].id), format!("delete {}", users[3].id), format!("delete {}", users[4].id)];
    want.sort();
    assert_eq!(cleanup, want);
}

/// Start-up walks the sessions beside the accounts in user order: the sessions of an account that is gone or
/// banned are removed (from the index and, by the cleanup, from the store), those of an account whose ban has
/// ended and of the others are kept, and an expired one is removed; the same when the sessions are handed over in
/// another order (as PostgreSQL may), however the ids interleave.
#[test]
fn a_load_keeps_only_the_sessions_an_existing_unbanned_account_may_hold() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let roles = RoleSet::new(&RolesConfig::default().allowed, &RolesConfig::default().default);
    let mut users: Vec<User> = (0..6).map(|n| user(&format!("s{n}@example.com"), roles.default_role())).collect();
    users.sort_by_key(|u| u.id);
    // 0, 5: plain; 1: banned for good; 2: banned until an hour ago; 3: never stored; 4: banned for an hour more.
    let banned = |u: &User, expires: Option<Timestamp>| u.with(|f| (f.banned, f.ban_expires) = (true, expires));
    let now = Timestamp::now();
    users[1] = banned(&users[1], None);
    users[2] = banned(&users[2], Some(Timestamp::from_millis(now.as_millis() - 3_600_000)));
    users[4] = banned(&users[4], Some(now.plus(Duration::from_secs(3600))));
    let mut ops: Vec<StoreOp> = users
        .iter()
        .enumerate()
        .filter(|(n, _)| *n != 3)
        .map(|(_, u)| StoreOp::PutUser(convert::user_record(u)))
        .collect();
    let mut tokens = Vec::new();
    for (n, u) in users.iter().enumerate() {
        for _ in 0..3 {
            let (token, op) = session(u.id);
            tokens.push((n, token.hash()));
            ops.push(op);
        }
    }
    let (expired, put_expired) = session_for(users[0].id, Duration::ZERO);
    ops.push(put_expired);
    store.commit(&ops).unwrap();

    let kept = |n: usize| [0, 2, 5].contains(&n);
    let check = |built: &super::load::Built| {
        let sessions = &built.indexes.sessions;
        for (n, hash) in &tokens {
            assert_eq!(sessions.get(hash).is_some(), kept(*n), "a session of account {n}");
        }
        assert!(sessions.get(&expired.hash()).is_none());
        for (n, u) in users.iter().enumerate() {
            assert_eq!(sessions.of_user(u.id).len(), if kept(n) { 3 } else { 0 }, "the sessions of account {n}");
        }
        let mut removed: Vec<_> = built
            .cleanup
            .iter()
            .filter_map(|op| match op {
                StoreOp::DeleteSession(user, hash) => Some((UserId::from_bytes(*user), *hash)),
                _ => None,
            })
            .collect();
        removed.sort();
        let mut want: Vec<_> = tokens.iter().filter(|(n, _)| !kept(*n)).map(|(n, h)| (users[*n].id, *h)).collect();
        want.push((users[0].id, expired.hash()));
        want.sort();
        assert_eq!(removed, want);
    };
    check(&super::load::build(&store, &roles).unwrap());
    let mut loaded = store.load().unwrap();
    loaded.sessions.reverse();
    loaded.users.reverse();
    check(&super::load::indexes(loaded, &roles).unwrap());
}

/// The e-mail order is built on a thread of its own while the other views are built beside the checks: two
/// accounts sharing an address still refuse the load, and with distinct addresses every view is there.
#[test]
fn a_load_refuses_two_accounts_sharing_an_email_and_builds_every_view_otherwise() {
    let roles = RoleSet::new(&RolesConfig::default().allowed, &RolesConfig::default().default);
    let (a, b, twin) = (
        user("a@example.com", roles.default_role()),
        user("b@example.com", Role::admin()),
        user("a@example.com", roles.default_role()),
    );
    let loaded = |users: &[&User]| crate::store::Loaded {
        users: users.iter().map(|u| convert::user_record(u)).collect(),
        ..Default::default()
    };
    let refused = super::load::indexes(loaded(&[&a, &b, &twin]), &roles).err().unwrap().to_string();
    assert!(refused.contains("share the e-mail"), "{refused}");
    let built = super::load::indexes(loaded(&[&a, &b]), &roles).unwrap();
    let users = &built.indexes.users;
    assert_eq!(users.by_email(&b.email_address()).map(|u| u.id), Some(b.id));
    assert_eq!(users.list().len(), 2, "the creation order");
    assert_eq!(users.active_admins(), [b.id]);
}

/// Before: a call whose caller had stopped waiting (its 10 s over, or its request dropped) still ran once the
/// actor got to it. While the store was stuck calls piled up behind the flush in progress, and each then did its
/// work for nobody: here a sign-in's attempt, reserved in the shared database after its caller had been answered
/// 503. Now the actor drops such a message unopened.
#[tokio::test]
async fn a_call_whose_caller_is_gone_does_no_work() {
    let mut w = world_with(AttemptPolicy { max_failures: 10, window: Duration::from_secs(60), shared: true }).await;
    let users = w.system.handles.users.clone();
    let (admin, target) = (w.admin, w.user);
    let email = Email::parse("user@example.com").unwrap();
    // A change whose write is held: the actor waits in its flush, as it does while the store is stuck.
    let rename = UserChange { name: Some(Name::parse("Renamed").unwrap()), ..UserChange::default() };
    let renaming = tokio::spawn({
        let users = users.clone();
        async move { users.update(admin, target, rename, String::new()).await }
    });
    let held = w.disk.next(PATIENCE).await.expect("the change is written");
    // A sign-in's attempt waits in the mailbox behind it, and its caller gives up.
    let attempt = tokio::spawn({
        let (users, email) = (users.clone(), email.clone());
        async move { users.begin_attempt(email, Some(target), String::new()).await }
    });
    tokio::time::sleep(QUIET).await;
    attempt.abort();
    assert!(attempt.await.unwrap_err().is_cancelled());
    held.commit();
    renaming.await.unwrap().unwrap();
    if let Some(write) = w.disk.next(QUIET).await {
        panic!("the attempt of a caller long gone was written: {:?}", write.ops());
    }
    // A caller who waits is served as before.
    let attempt = tokio::spawn(async move { users.begin_attempt(email, Some(target), String::new()).await });
    let reserve = w.disk.next(PATIENCE).await.expect("a waiting caller's attempt is reserved");
    assert!(matches!(reserve.ops(), [StoreOp::ReserveAttempt { .. }]), "{:?}", reserve.ops());
    reserve.commit();
    attempt.await.unwrap().unwrap();
}

/// Before: an actor's mailbox had no bound: behind a stuck store every call waited its whole 10 s and left its
/// message behind. Now at most `MAILBOX_CAP` calls wait in one mailbox; the next is refused at once, and the
/// ones whose callers gave up are dropped unopened once the store answers.
#[tokio::test]
async fn a_full_mailbox_refuses_at_once_and_sheds_what_expired() {
    use super::mailbox::MAILBOX_CAP;
    let mut w = world().await;
    let orgs = w.system.handles.orgs.clone();
    let by = w.admin;
    let create = |slug: String| {
        let orgs = orgs.clone();
        tokio::spawn(async move {
            orgs.create(Name::parse("Org").unwrap(), Slug::parse(&slug).unwrap(), by, String::new()).await
        })
    };
    let first = create("first".into());
    let held = w.disk.next(PATIENCE).await.expect("first organization written");
    let waiting: Vec<_> = (0..MAILBOX_CAP).map(|i| create(format!("org-{i}"))).collect();
    while orgs.0.waiting.count() < MAILBOX_CAP {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Refused without waiting for the actor: well before the 10 s a call may wait.
    let one_more = create("one-more".into());
    let refused = tokio::time::timeout(Duration::from_secs(5), one_more).await;
    assert!(matches!(refused, Ok(Ok(Err(_)))), "a call beyond the bound was not refused at once");
    for call in &waiting {
        call.abort();
    }
    for call in waiting {
        let _ = call.await;
    }
    held.commit();
    first.await.unwrap().unwrap();
    let shedding = tokio::time::Instant::now();
    while orgs.0.waiting.count() > 0 {
        assert!(shedding.elapsed() < PATIENCE, "{} places still taken", orgs.0.waiting.count());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    if let Some(write) = w.disk.next(QUIET).await {
        panic!("calls whose callers were gone were written: {} ops", write.ops().len());
    }
    assert_eq!(w.indexes.orgs.len(), 1);
}

/// An organization with one team (nobody in it), and a pending invitation of `user@example.com` into that team.
fn org_and_invitation(inviter: UserId) -> (Organization, crate::domain::Invitation) {
    use crate::domain::{InvitationId, InvitationStatus, InvitedTeams, MemberRoles, OrgRole, Team, TeamId};
    let now = Timestamp::now();
    let team = Team {
        id: TeamId::new(),
        name: Name::parse("Ward").unwrap(),
        created_at: now,
        updated_at: None,
        members: vec![],
    };
    let org = Organization {
        id: OrgId::new(),
        name: Name::parse("Org").unwrap(),
        slug: Slug::parse("org").unwrap(),
        logo: None,
        metadata: None,
        created_at: now,
        teams: vec![team.clone()],
        roles: Vec::new(),
        require_sso: false,
    };
    let invitation = crate::domain::Invitation {
        id: InvitationId::random(),
        org: org.id,
        email: Email::parse("user@example.com").unwrap(),
        roles: MemberRoles::one(OrgRole::Member),
        inviter,
        status: InvitationStatus::Pending,
        expires_at: now.plus(Duration::from_secs(3600)),
        created_at: now,
        teams: InvitedTeams::new([team.id]),
    };
    (org, invitation)
}

/// The world with [`org_and_invitation`] on disk: the organization and the invitation.
async fn world_with_an_invitation_into_a_team() -> (World, Organization, crate::domain::Invitation) {
    let (org, invitation) = org_and_invitation(UserId::new());
    let ops = vec![
        StoreOp::PutOrg(convert::org_record(&org)),
        StoreOp::PutInvitation(convert::invitation_record(&invitation)),
    ];
    let policy = AttemptPolicy { max_failures: 10, window: Duration::from_secs(60), shared: false };
    (world_with_more(policy, move |_| ops).await, org, invitation)
}

fn joiner(user: UserId) -> super::users::members::Caller {
    super::users::members::Caller { user, actor: user, global_admin: false, session: None }
}

/// Accepting an invitation into a team writes the membership, the invitation's acceptance and the organization's
/// new version (the user in the team) in one commit, and while the organizations actor has lent the
/// organization it changes nothing (a team created meanwhile waits, then builds on the lent version's successor).
#[tokio::test]
async fn an_acceptance_into_a_team_is_one_commit_and_the_lending_actor_waits_for_it() {
    use super::orgs::teams::TeamCaller;
    use super::users::members::Lent;
    let (mut w, org, invitation) = world_with_an_invitation_into_a_team().await;
    let (orgs, users) = (w.system.handles.orgs.clone(), w.system.handles.users.clone());
    let (lent, loan) = orgs.lend(org.id).await.unwrap().expect("the organization is lent");

    // Another change of the organization waits for the loan to end.
    let mut creating = tokio::spawn({
        let orgs = orgs.clone();
        let caller = TeamCaller { by: w.admin, ip: String::new() };
        async move { orgs.create_team(org.id, Name::parse("Nights").unwrap(), None, caller).await }
    });
    assert!(tokio::time::timeout(QUIET, &mut creating).await.is_err(), "a change while the organization is lent");

    let user = w.user;
    let accepting = tokio::spawn(async move {
        let lent = Some(Lent { org: lent, team_limit: None });
        let email = Email::parse("user@example.com").unwrap();
        users.accept_invitation(joiner(user), invitation.id, email, 100, lent, String::new()).await
    });
    let write = w.disk.next(PATIENCE).await.expect("the acceptance is written");
    let kinds: Vec<&str> = write
        .ops()
        .iter()
        .filter_map(|op| match op {
            StoreOp::PutOrg(_) => Some("organization"),
            StoreOp::PutMember(_) => Some("membership"),
            StoreOp::PutInvitation(_) => Some("invitation"),
            _ => None,
        })
        .collect();
    assert_eq!(kinds, ["invitation", "organization", "membership"], "one commit: {:?}", write.ops());
    write.commit();
    let (accepted, member) = accepting.await.unwrap().unwrap();
    assert_eq!((accepted.status, member.user), (crate::domain::InvitationStatus::Accepted, user));
    let published = w.indexes.orgs.get(org.id).unwrap();
    assert!(published.teams[0].members.iter().any(|m| m.user == user && m.stands(Some(&member))));

    drop(loan);
    w.disk.next(PATIENCE).await.expect("the team created after the loan is written").commit();
    creating.await.unwrap().unwrap();
    let after = w.indexes.orgs.get(org.id).unwrap();
    assert_eq!(after.teams.len(), 2);
    assert!(after.teams[0].members.iter().any(|m| m.user == user), "the place in the team kept: {after:?}");
}

/// A team the invitation names that the organization no longer has: refused before anything is written, the
/// invitation still pending (remove-team takes a team out of pending invitations, so this is the race of an
/// acceptance with a removal, which the plugin answers the same).
#[tokio::test]
async fn an_acceptance_into_a_team_gone_writes_nothing_and_leaves_the_invitation_pending() {
    use super::users::members::{Lent, MemberError};
    let (mut w, org, invitation) = world_with_an_invitation_into_a_team().await;
    let (orgs, users) = (w.system.handles.orgs.clone(), w.system.handles.users.clone());
    let (lent, loan) = orgs.lend(org.id).await.unwrap().unwrap();
    let without = Arc::new(Organization { teams: Vec::new(), ..Organization::clone(&lent) });
    let email = Email::parse("user@example.com").unwrap();
    let lent = Some(Lent { org: without, team_limit: None });
    let refused = users.accept_invitation(joiner(w.user), invitation.id, email, 100, lent, String::new()).await;
    assert_eq!(refused.unwrap_err(), MemberError::TeamNotFound);
    drop(loan);
    assert!(w.disk.next(QUIET).await.is_none(), "something was written");
    assert!(w.indexes.members.get(org.id, w.user).is_none());
    assert!(w.indexes.members.invitation(invitation.id).unwrap().is_open(Timestamp::now()));
}
