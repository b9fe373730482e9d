//! Passkeys and passkey ceremonies in the store, read and written for the passkeys facade alone. No actor holds
//! them (so this is no actor, and lives beside the facade that uses it): a sign-in with a passkey, a list or a
//! registration reads what it needs from the store (on a blocking thread), and changes go through the one writer
//! with their audit entries, like every other change. On several nodes each reads the shared database, so a
//! passkey registered on one node signs in on another at once, and a ceremony begun on one is finished on another.

use std::sync::Arc;

use crate::actors::Unavailable;
use crate::domain::{Ceremony, Passkey, Timestamp, TokenHash, UserId};
use crate::store::{Store, StoreOp, StoreWriter, convert};

#[derive(Clone)]
pub struct PasskeyBook {
    store: Arc<Store>,
    writer: StoreWriter,
}

impl PasskeyBook {
    pub(crate) fn new(store: Arc<Store>, writer: StoreWriter) -> Self {
        Self { store, writer }
    }

    /// Runs a store read on a blocking thread; any failure is [`Unavailable`].
    async fn read<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Store) -> Result<T, crate::store::StoreError> + Send + 'static,
    ) -> Result<T, Unavailable> {
        let store = Arc::clone(&self.store);
        let read = tokio::task::spawn_blocking(move || f(&store)).await.map_err(|_| Unavailable)?;
        read.map_err(|error| {
            tracing::warn!(%error, "reading passkeys failed");
            Unavailable
        })
    }

    /// Every passkey of `user`.
    pub async fn of(&self, user: UserId) -> Result<Vec<Passkey>, Unavailable> {
        let records = self.read(move |s| s.passkeys_of(user.to_bytes())).await?;
        Ok(records.into_iter().map(convert::passkey).collect())
    }

    /// How many passkeys each of `users` has, in one trip to a blocking thread.
    pub async fn counts(&self, users: Vec<UserId>) -> Result<Vec<usize>, Unavailable> {
        self.read(move |s| users.iter().map(|u| s.passkeys_of(u.to_bytes()).map(|p| p.len())).collect()).await
    }

    /// Whether `user` has a passkey, read from the store now (never from a copy that another node's deletion could
    /// have made stale), for the caller guard. A store that cannot answer counts as no passkey: the guard then errs
    /// on the side of holding the session back.
    pub async fn holds_any_now(&self, user: UserId) -> bool {
        self.read(move |s| s.passkeys_of(user.to_bytes())).await.is_ok_and(|passkeys| !passkeys.is_empty())
    }

    /// The accounts that have at least one passkey.
    pub async fn owners(&self) -> Result<std::collections::HashSet<UserId>, Unavailable> {
        let records = self.read(|s| s.all_passkeys()).await?;
        Ok(records.into_iter().map(|r| UserId::from_bytes(r.user_id)).collect())
    }

    /// The passkey with this credential id, whoever owns it.
    pub async fn by_credential(&self, credential: Vec<u8>) -> Result<Option<Passkey>, Unavailable> {
        Ok(self.read(move |s| s.passkey_by_credential(&credential)).await?.map(convert::passkey))
    }

    /// Writes `passkey` (new, renamed, or its counter moved on) with `audit`, durable before it returns.
    pub async fn put(&self, passkey: &Passkey, audit: Option<StoreOp>) -> Result<(), Unavailable> {
        let mut ops = vec![StoreOp::PutPasskey(convert::passkey_record(passkey))];
        ops.extend(audit);
        self.write(ops).await
    }

    pub async fn delete(&self, passkey: &Passkey, audit: StoreOp) -> Result<(), Unavailable> {
        let op = StoreOp::DeletePasskey { user: passkey.user_id.to_bytes(), id: passkey.id.to_bytes() };
        self.write(vec![op, audit]).await
    }

    /// Keeps a ceremony's state under the hash of its cookie until its verification takes it.
    pub async fn begin(&self, hash: TokenHash, ceremony: &Ceremony) -> Result<(), Unavailable> {
        self.write(vec![StoreOp::PutPasskeyChallenge(hash, convert::ceremony_record(ceremony))]).await
    }

    /// The ceremony of `hash`, removed so that nobody else can use it; `None` if there is none or it expired.
    pub async fn take(&self, hash: TokenHash) -> Result<Option<Ceremony>, Unavailable> {
        let now = Timestamp::now().as_millis();
        let taken = self.read(move |s| s.take_passkey_challenge(&hash, now)).await?;
        // A record this version cannot read is a ceremony nobody can finish: as good as none.
        Ok(taken.and_then(|r| convert::ceremony(r).ok()))
    }

    /// Deletes the ceremonies that expired unfinished; returns how many.
    pub async fn prune(&self, now: Timestamp) -> Result<usize, Unavailable> {
        self.read(move |s| s.prune_passkey_challenges(now.as_millis())).await
    }

    async fn write(&self, ops: Vec<StoreOp>) -> Result<(), Unavailable> {
        self.writer.write(ops).await.map_err(|error| {
            tracing::warn!(%error, "writing a passkey change failed");
            Unavailable
        })
    }
}
