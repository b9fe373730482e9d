//! The per-user lists of a read index (a user's API keys, a user's linked accounts), kept as `Arc<[id]>` so a
//! reader clones one pointer. Written once here so each index only says which list an entry belongs to.

use std::hash::{BuildHasher, Hash};
use std::sync::Arc;

type Lists<'a, K, I, S, G> = papaya::HashMapRef<'a, K, Arc<[I]>, S, G>;

/// Takes `id` out of `owner`'s list; the entry goes when the list empties, so a user with none costs nothing.
pub(crate) fn remove<K, I, S, G>(lists: &Lists<'_, K, I, S, G>, owner: K, id: I)
where
    K: Hash + Eq + Send + Sync,
    I: Copy + PartialEq + Send + Sync,
    S: BuildHasher,
    G: papaya::Guard,
{
    let rest: Vec<I> =
        lists.get(&owner).map(|ids| ids.iter().copied().filter(|i| *i != id).collect()).unwrap_or_default();
    if rest.is_empty() {
        lists.remove(&owner);
    } else {
        lists.insert(owner, rest.into());
    }
}

/// Adds `id` at the end of `owner`'s list.
pub(crate) fn add<K, I, S, G>(lists: &Lists<'_, K, I, S, G>, owner: K, id: I)
where
    K: Hash + Eq + Send + Sync,
    I: Copy + Send + Sync,
    S: BuildHasher,
    G: papaya::Guard,
{
    let mut ids = lists.get(&owner).map(|ids| ids.to_vec()).unwrap_or_default();
    ids.push(id);
    lists.insert(owner, ids.into());
}
