//! `service-auth migrate-store`: moves a data directory's content between the embedded store and a PostgreSQL
//! database (docs/cluster.md), in either direction. Everything is read from the source, then written to the
//! target in one transaction: the target is complete or untouched. The target must hold no account, organization
//! or session; the source is left as it was. The embedded side must not be held by a running server.

use super::{OpsError, open_embedded_stopped};
use crate::config::Config;
use crate::store::{Record, Store, StoreOp};

/// Where the content goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    ToPostgres,
    ToEmbedded,
}

/// Audit entries read per page from the source.
const AUDIT_PAGE: usize = 10_000;

pub fn migrate(config: &Config, direction: Direction, url: &str, pool_size: usize) -> Result<String, OpsError> {
    let embedded = open_embedded_stopped(config, crate::store::FaultSwitch::default())?;
    let postgres = Store::connect_postgres(url, pool_size)?;
    let (from, to, target) = match direction {
        Direction::ToPostgres => (&embedded, &postgres, "the PostgreSQL database"),
        Direction::ToEmbedded => (&postgres, &embedded, "the data directory"),
    };
    if !to.is_empty()? {
        return Err(OpsError::Invalid(format!(
            "{target} already holds accounts, organizations or sessions; migrate-store only fills an empty store"
        )));
    }
    let mut ops = Vec::new();
    let (mut users, mut orgs, mut sessions, mut audit) = (0usize, 0usize, 0usize, 0usize);
    from.visit(|record| {
        ops.push(match record {
            Record::Org(r) => {
                orgs += 1;
                StoreOp::PutOrg(r)
            }
            Record::User(r) => {
                users += 1;
                StoreOp::PutUser(r)
            }
            Record::Session(hash, r) => {
                sessions += 1;
                StoreOp::PutSession(hash, r)
            }
            Record::Token(hash, r) => StoreOp::PutToken(hash, r),
            Record::Account(r) => StoreOp::PutAccount(r),
            Record::ApiKey(r) => StoreOp::PutApiKey(r),
            Record::Outbox(r) => StoreOp::PutOutbox(r),
            Record::Member(r) => StoreOp::PutMember(r),
            Record::Invitation(r) => StoreOp::PutInvitation(r),
        });
        Ok(())
    })?;
    // Passkeys are not held in memory, so `visit` (the start-up load) leaves them out; ceremonies in flight are not
    // moved (five minutes at most, and no server runs meanwhile).
    let passkeys = from.all_passkeys()?;
    let keys = passkeys.len();
    ops.extend(passkeys.into_iter().map(StoreOp::PutPasskey));
    // The identity provider's signing keys move sealed as they are: the nodes of the target read the same key file.
    ops.extend(from.signing_keys()?.into_iter().map(StoreOp::PutSigningKey));
    ops.extend(from.oauth_clients()?.into_iter().map(StoreOp::PutOAuthClient));
    // Single sign-on providers move with their secrets sealed as they are (the target reads the same key file).
    ops.extend(from.sso_providers()?.into_iter().map(|p| StoreOp::PutSsoProvider(Box::new(p))));
    ops.extend(from.scim_tokens()?.into_iter().map(StoreOp::PutScimToken));
    ops.extend(from.scim_users(None)?.into_iter().map(StoreOp::PutScimUser));
    ops.extend(from.scim_groups(None)?.into_iter().map(StoreOp::PutScimGroup));
    let mut before = None;
    loop {
        let page = from.audit_page(before, AUDIT_PAGE)?;
        let Some(last) = page.last() else { break };
        before = Some(last.id);
        audit += page.len();
        ops.extend(page.into_iter().map(StoreOp::PutAudit));
    }
    to.commit(&ops)?;
    to.close();
    from.close();
    Ok(format!(
        "moved {users} users, {orgs} organizations, {sessions} sessions, {keys} passkeys and {audit} audit entries into \
         {target}"
    ))
}
