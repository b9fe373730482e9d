//! The hash map the session check reads: accounts by id and sessions by token hash. One writer (the actor that
//! owns the map, or start-up's loader), readers on every event loop that never wait for it.
//!
//! Why not a crate. papaya (used before) boxes every entry: at 10,000,000 sessions a 48–64-byte allocation each
//! beside a table of pointers, two dependent misses before the `Arc` itself, and ~16 % of a start's CPU spent
//! inserting. `scc::HashIndex` keeps its entries inline in buckets of 32 with lock-free reads, but it is built for
//! many writers (a lock per bucket, entries it cannot reuse until its epoch passes), holds each bucket's metadata
//! beside the entries and sizes its array in powers of two, which at 10,000,000 entries is 16,777,216 slots of
//! 40 bytes for the sessions (a load of 0.6). Here only one thread writes and the readers need only `get`, so a
//! small table does it, sized to what start-up loads:
//!
//! - open addressing with linear probing over one array of slots, each a pointer (from `Arc::into_raw`) and what
//!   the slot keeps of its key ([`Key::Kept`]): the whole key when the value does not hold it (a session's token
//!   hash: 40-byte slots), a 64-bit tag when it does (an account's id is in the account: 16-byte slots, the key
//!   compared in the account once the tag matches). No allocation per entry;
//! - sized by [`InlineMap::with_capacity`] to a load of 3/4 (not the next power of two: the slot is found by
//!   multiplying the hash by the length), rebuilt at twice the live entries when live and removed slots pass 7/8;
//! - a slot's key is written once, before its pointer is first published (release), and never again while the
//!   table lives: a reader that sees a pointer (acquire) reads a complete key. A removal leaves a tombstone that
//!   keeps the key; the same key (or one that keeps the same) can take it again, others skip it until a rebuild;
//! - a replaced or removed `Arc` and a table replaced by a rebuild are retired through [`seize`] (papaya's own
//!   reclamation, already a dependency of ours through it): freed once no reader that could have loaded them is
//!   still inside its guard. A reader takes a reference by incrementing the count inside its guard.
//!
//! Writes are serialised by a mutex (uncontended: one writer per map by design; the lock makes a second one safe,
//! not fast). Reads take no lock: one guard (a thread-local counter and a fence), the table pointer, the slots.

use std::cell::UnsafeCell;
use std::hash::{BuildHasher, Hash};
use std::marker::PhantomData;
use std::mem::MaybeUninit;
use std::ops::ControlFlow;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use seize::{Collector, Guard, LocalGuard};

use super::KeyHash;

/// A key of an [`InlineMap`] of `V`s: what a slot keeps of it, and how a slot is recognised as its.
pub(crate) trait Key<V>: Copy + Eq + Hash {
    /// Written once into a slot, before the slot's pointer.
    type Kept: Copy + PartialEq + Send + Sync;
    /// Where the key is filed: its probe starts at this hash scaled to the table.
    fn hash_with(&self, hasher: &KeyHash) -> u64 {
        hasher.hash_one(self)
    }
    fn kept(&self, hash: u64) -> Self::Kept;
    /// Whether the entry (`kept`, `value`) is this key's (`hash` is this key's hash).
    fn is(&self, hash: u64, kept: &Self::Kept, value: &V) -> bool;
    /// The key of an entry.
    fn of(kept: &Self::Kept, value: &V) -> Self;
    /// The hash of an entry's key, for a rebuild.
    fn hash_of(kept: &Self::Kept, value: &V, hasher: &KeyHash) -> u64 {
        Self::of(kept, value).hash_with(hasher)
    }
}

/// Live entries at most this share of the slots after [`InlineMap::with_capacity`]: 3/4.
const LOAD_SIZED: (usize, usize) = (3, 4);
/// Live and removed entries at most this share of the slots before a rebuild: 7/8.
const LOAD_MAX: (usize, usize) = (7, 8);
const MIN_SLOTS: usize = 16;

struct Slot<Kept, V> {
    kept: UnsafeCell<MaybeUninit<Kept>>,
    /// Null: never used in this table (a probe ends here). [`tomb`]: removed. Otherwise `Arc::into_raw` of the
    /// entry's value, a reference the table owns.
    value: AtomicPtr<V>,
}

/// The marker of a removed entry: never an `Arc`'s pointer (an allocation is never at address `align_of::<V>()`).
fn tomb<V>() -> *mut V {
    NonNull::<V>::dangling().as_ptr()
}

struct Table<Kept, V> {
    slots: Box<[Slot<Kept, V>]>,
}

impl<Kept, V> Table<Kept, V> {
    fn new(len: usize) -> Box<Self> {
        let len = len.max(MIN_SLOTS);
        // Zeroed memory: the allocator hands large tables over as fresh pages, touched as the slots are used, instead
        // of writing every slot (`Box::new_zeroed_slice` is newer than our minimum Rust).
        let layout = std::alloc::Layout::array::<Slot<Kept, V>>(len).expect("a table fits in memory");
        // SAFETY: `layout` is not zero-sized (`len` ≥ 16 slots of at least 8 bytes).
        let raw = unsafe { std::alloc::alloc_zeroed(layout) }.cast::<Slot<Kept, V>>();
        if raw.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        prefer_huge_pages(raw.cast(), layout.size());
        // SAFETY: `raw` is an allocation of `len` slots made with the global allocator and `Layout::array`, as a
        // boxed slice is; all zeros is a valid `Slot` (an uninitialised key inside `UnsafeCell`, a null `AtomicPtr`).
        let slots = unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(raw, len)) };
        Box::new(Self { slots })
    }

    /// The first slot of `hash`'s probe: the hash scaled to the length, so the length need not be a power of two.
    fn home(&self, hash: u64) -> usize {
        // The product's high half is below the length (< 2^64): the cast loses nothing.
        ((u128::from(hash) * self.slots.len() as u128) >> 64) as usize
    }

    fn next(&self, i: usize) -> usize {
        if i + 1 == self.slots.len() { 0 } else { i + 1 }
    }
}

/// Asks the kernel to back a large table with transparent huge pages where it can. A table of hundreds of megabytes
/// in 4 KiB pages is more pages than any TLB holds, and every insert and every session check lands on a random one:
/// a page-table walk on top of the cache miss. In 2 MiB pages the same table is a few hundred, and the kernel zeroes
/// it in a few hundred faults instead of a hundred thousand. Advice only: where huge pages are off (or the kernel
/// is not Linux) nothing changes.
fn prefer_huge_pages(start: *mut u8, bytes: usize) {
    /// Below this a table is a few huge pages at most: not worth a system call.
    const WORTH_IT: usize = 8 << 20;
    #[cfg(target_os = "linux")]
    if bytes >= WORTH_IT {
        // SAFETY: `sysconf` reads a constant of the system.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096).max(1);
        let from = (start as usize).next_multiple_of(page);
        let to = (start as usize + bytes) / page * page;
        // SAFETY: advice on whole pages inside our own allocation; it changes no byte of it. Its result is ignored:
        // a kernel without transparent huge pages refuses, and the table works the same.
        unsafe {
            libc::madvise(from as *mut libc::c_void, to - from, libc::MADV_HUGEPAGE);
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (start, bytes, WORTH_IT);
}

/// See the module's documentation.
pub(crate) struct InlineMap<K: Key<V>, V> {
    table: AtomicPtr<Table<K::Kept, V>>,
    hasher: KeyHash,
    live: AtomicUsize,
    /// The writer's lock, and the slots of the current table ever used (live and removed).
    writer: Mutex<usize>,
    collector: Collector,
    /// Holds `Arc<V>`s and keys: sent and shared as they are.
    _owns: PhantomData<(Arc<V>, K)>,
}

impl<K: Key<V>, V> Default for InlineMap<K, V> {
    fn default() -> Self {
        Self::with_capacity(0)
    }
}

impl<K: Key<V>, V> InlineMap<K, V> {
    /// Room for `entries` at a load of 3/4 before the first rebuild.
    pub(crate) fn with_capacity(entries: usize) -> Self {
        Self::with_slots(entries.saturating_mul(LOAD_SIZED.1) / LOAD_SIZED.0)
    }

    fn with_slots(slots: usize) -> Self {
        Self {
            table: AtomicPtr::new(Box::into_raw(Table::new(slots))),
            hasher: KeyHash::default(),
            live: AtomicUsize::new(0),
            writer: Mutex::new(0),
            collector: Collector::new(),
            _owns: PhantomData,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.live.load(Ordering::Relaxed)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The slots of the current table (tests: what the map holds).
    #[cfg(test)]
    fn slots(&self) -> usize {
        let _writer = self.lock();
        // SAFETY: only the writer replaces or retires the table, and we hold its lock.
        let table = unsafe { &*self.table.load(Ordering::Acquire) };
        table.slots.len()
    }

    /// The entry of `key`: a new reference to its value.
    pub(crate) fn get(&self, key: &K) -> Option<Arc<V>> {
        let guard = self.collector.enter();
        let value = self.find(&guard, key)?;
        // SAFETY: `value` is an `Arc`'s pointer the table held when `find` loaded it inside `guard`, and a retired
        // reference is dropped only after every guard entered before its retirement is gone: the count is at least
        // one while we add ours.
        unsafe {
            Arc::increment_strong_count(value);
            Some(Arc::from_raw(value))
        }
    }

    /// What `read` makes of the value of `key`, without taking a reference (no write to the value's counter).
    pub(crate) fn get_with<R>(&self, key: &K, read: impl FnOnce(&V) -> R) -> Option<R> {
        let guard = self.collector.enter();
        let value = self.find(&guard, key)?;
        // SAFETY: as in `get`, the value stays alive while `guard` does.
        Some(read(unsafe { &*value }))
    }

    pub(crate) fn contains_key(&self, key: &K) -> bool {
        self.get_with(key, |_| ()).is_some()
    }

    fn find(&self, guard: &LocalGuard<'_>, key: &K) -> Option<*const V> {
        let hash = key.hash_with(&self.hasher);
        self.probe(guard, hash, |kept, entry| {
            if key.is(hash, kept, entry) {
                ControlFlow::Break(std::ptr::from_ref(entry))
            } else {
                ControlFlow::Continue(())
            }
        })
    }

    /// Visits every entry whose key's hash ([`Key::hash_with`]) is `hash`: the keys filed under it (a probe, as a
    /// miss of `get` costs).
    pub(crate) fn with_hash(&self, hash: u64, mut visit: impl FnMut(K, &V)) {
        let guard = self.collector.enter();
        self.probe::<()>(&guard, hash, |kept, entry| {
            if K::hash_of(kept, entry, &self.hasher) == hash {
                visit(K::of(kept, entry), entry);
            }
            ControlFlow::Continue(())
        });
    }

    /// Walks `hash`'s probe in the table `guard` protects, from its first slot to the first never used, handing each
    /// live entry's key and value to `visit` until it breaks with an answer.
    fn probe<R>(
        &self,
        guard: &LocalGuard<'_>,
        hash: u64,
        mut visit: impl FnMut(&K::Kept, &V) -> ControlFlow<R>,
    ) -> Option<R> {
        // SAFETY: the table is replaced only by a rebuild, which retires the old one through the collector: it
        // stays allocated while `guard` lives.
        let table = unsafe { &*guard.protect(&self.table, Ordering::Acquire) };
        let mut i = table.home(hash);
        // Ends: a table always keeps at least an eighth of its slots null (`LOAD_MAX`).
        loop {
            let slot = &table.slots[i];
            let value = guard.protect(&slot.value, Ordering::Acquire);
            if value.is_null() {
                return None;
            }
            if value != tomb() {
                // SAFETY: the key was written before the pointer was first stored (release; our load acquired
                // a pointer stored at or after that), and a slot's key is never written again in this table. The
                // value is an `Arc`'s, and a retired reference is dropped only after every guard entered before its
                // retirement is gone: both live while `guard` does.
                let (kept, entry) = unsafe { ((*slot.kept.get()).assume_init_ref(), &*value) };
                if let ControlFlow::Break(answer) = visit(kept, entry) {
                    return Some(answer);
                }
            }
            i = table.next(i);
        }
    }

    /// Every entry, under one guard: a snapshot of no particular instant (entries changed while it runs may or may
    /// not be seen), as papaya's was.
    pub(crate) fn pin(&self) -> Pinned<'_, K, V> {
        let guard = self.collector.enter();
        let table = guard.protect(&self.table, Ordering::Acquire);
        Pinned { guard, table, _map: PhantomData }
    }

    /// Every value, each a new reference.
    #[cfg(test)]
    pub(crate) fn values(&self) -> Vec<Arc<V>> {
        let pinned = self.pin();
        pinned
            .iter()
            .map(|(_, value)| {
                // SAFETY: `value` points into a live `Arc`'s allocation while `pinned`'s guard is (see `get`).
                unsafe {
                    Arc::increment_strong_count(value);
                    Arc::from_raw(value)
                }
            })
            .collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, usize> {
        self.writer.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Makes `value` the entry of `key`; the value it replaces, if any.
    pub(crate) fn insert(&self, key: K, value: Arc<V>) -> Option<Arc<V>> {
        let mut used = self.lock();
        self.insert_hashed(&mut used, key, key.hash_with(&self.hasher), value)
    }

    /// Inserts `entries` (start-up's load) with the slot of each fetched while earlier ones are written: in a table
    /// of hundreds of megabytes every insert is a cache miss, and one at a time they queue; a few in flight
    /// overlap.
    pub(crate) fn insert_many(&self, entries: impl IntoIterator<Item = (K, Arc<V>)>) {
        const AHEAD: usize = 16;
        let mut used = self.lock();
        let mut flight: std::collections::VecDeque<(K, u64, Arc<V>)> = std::collections::VecDeque::with_capacity(AHEAD);
        for (key, value) in entries {
            let hash = key.hash_with(&self.hasher);
            // SAFETY: only the writer (we hold its lock) replaces or retires the table.
            let table = unsafe { &*self.table.load(Ordering::Acquire) };
            prefetch(&table.slots[table.home(hash)]);
            if flight.len() == AHEAD
                && let Some((key, hash, value)) = flight.pop_front()
            {
                self.insert_hashed(&mut used, key, hash, value);
            }
            flight.push_back((key, hash, value));
        }
        for (key, hash, value) in flight {
            self.insert_hashed(&mut used, key, hash, value);
        }
    }

    fn insert_hashed(&self, used: &mut usize, key: K, hash: u64, value: Arc<V>) -> Option<Arc<V>> {
        let current = self.table.load(Ordering::Acquire);
        // SAFETY: only the writer (we hold its lock) replaces or retires the table.
        let table = unsafe { &*current };
        let kept = key.kept(hash);
        let mut i = table.home(hash);
        let mut free = None;
        let found = loop {
            let slot = &table.slots[i];
            let old = slot.value.load(Ordering::Acquire);
            if old.is_null() {
                break None;
            }
            // SAFETY: a used slot's key is written and never written again (see `find`); only we write.
            let slot_kept = unsafe { (*slot.kept.get()).assume_init_ref() };
            if old == tomb() {
                // A tombstone that keeps exactly what this key keeps can be this key's slot: a reader that finds
                // it reads a key that is this one's.
                if free.is_none() && *slot_kept == kept {
                    free = Some(i);
                }
            // SAFETY: a live pointer of the current table; only we retire it.
            } else if key.is(hash, slot_kept, unsafe { &*old }) {
                break Some((i, old));
            }
            i = table.next(i);
        };
        let new = Arc::into_raw(value).cast_mut();
        if let Some((i, old)) = found {
            table.slots[i].value.store(new, Ordering::Release);
            return Some(self.retire_taking(old));
        }
        self.live.fetch_add(1, Ordering::Relaxed);
        if let Some(i) = free {
            table.slots[i].value.store(new, Ordering::Release);
            return None;
        }
        let slot = &table.slots[i];
        // SAFETY: the slot's pointer is null: no reader reads its key (they read a key only behind a pointer), and
        // we are the only writer.
        unsafe { (*slot.kept.get()).write(kept) };
        slot.value.store(new, Ordering::Release);
        *used += 1;
        if *used * LOAD_MAX.1 > table.slots.len() * LOAD_MAX.0 {
            *used = self.rebuild(current);
        }
        None
    }

    /// Removes the entry of `key`; its value, if it had one.
    pub(crate) fn remove(&self, key: &K) -> Option<Arc<V>> {
        let _writer = self.lock();
        let hash = key.hash_with(&self.hasher);
        // SAFETY: only the writer replaces or retires the table.
        let table = unsafe { &*self.table.load(Ordering::Acquire) };
        let mut i = table.home(hash);
        loop {
            let slot = &table.slots[i];
            let old = slot.value.load(Ordering::Acquire);
            if old.is_null() {
                return None;
            }
            if old != tomb() {
                // SAFETY: a used slot's written key, and a live pointer only we retire.
                let (kept, entry) = unsafe { ((*slot.kept.get()).assume_init_ref(), &*old) };
                if key.is(hash, kept, entry) {
                    slot.value.store(tomb(), Ordering::Release);
                    self.live.fetch_sub(1, Ordering::Relaxed);
                    return Some(self.retire_taking(old));
                }
            }
            i = table.next(i);
        }
    }

    /// A new reference to `old` for the caller, and the table's own reference retired: readers that loaded the
    /// pointer may still be adding theirs.
    fn retire_taking(&self, old: *mut V) -> Arc<V> {
        // SAFETY: `old` is an `Arc::into_raw` pointer whose reference the table owned and no longer holds: no
        // reader that enters from now on can load it. The reclaimer drops that one reference, once.
        unsafe {
            Arc::increment_strong_count(old);
            self.collector.retire(old, drop_arc::<V>);
            Arc::from_raw(old)
        }
    }

    /// Moves the live entries of `current` (the current table; the caller holds the writer's lock) into a table
    /// twice their number, makes it current and retires `current`; the slots used in the new one.
    fn rebuild(&self, current: *mut Table<K::Kept, V>) -> usize {
        let live = self.len();
        let new = Table::<K::Kept, V>::new(live * 2);
        // SAFETY: only the writer replaces or retires the table, and it is retired below, after this last use.
        let table = unsafe { &*current };
        for slot in &table.slots {
            let value = slot.value.load(Ordering::Acquire);
            if value.is_null() || value == tomb() {
                continue;
            }
            // SAFETY: a used slot's written key, and a live pointer only we retire.
            let (kept, entry) = unsafe { ((*slot.kept.get()).assume_init_ref(), &*value) };
            let mut i = new.home(K::hash_of(kept, entry, &self.hasher));
            while !new.slots[i].value.load(Ordering::Relaxed).is_null() {
                i = new.next(i);
            }
            // SAFETY: the new table is not published yet: no one else reads or writes it.
            unsafe { (*new.slots[i].kept.get()).write(*kept) };
            // The table's reference moves with the pointer: the old table owns none once it is replaced.
            new.slots[i].value.store(value, Ordering::Relaxed);
        }
        self.table.store(Box::into_raw(new), Ordering::Release);
        // SAFETY: `current` came from `Box::into_raw`, and no reader entering from now on can load it. Dropping the
        // table drops its slots only, not the values they point to (now the new table's).
        unsafe { self.collector.retire(current, seize::reclaim::boxed::<Table<K::Kept, V>>) };
        live
    }
}

/// Asks the processor to bring `slot`'s cache line in, without waiting for it.
fn prefetch<T>(slot: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: SSE is part of x86-64 itself, and a prefetch reads nothing the program sees (any address is allowed;
    // this one is a live slot).
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(std::ptr::from_ref(slot).cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = slot;
}

/// Drops the reference a retired pointer stood for.
///
/// # Safety
/// `value` comes from `Arc::into_raw`, and its reference is dropped once.
unsafe fn drop_arc<V>(value: *mut V, _: &Collector) {
    // SAFETY: the caller's.
    drop(unsafe { Arc::from_raw(value) });
}

impl<K: Key<V>, V> Drop for InlineMap<K, V> {
    fn drop(&mut self) {
        let table = *self.table.get_mut();
        // SAFETY: `&mut self`: no reader or writer is left, and the current table was never retired; it owns one
        // reference to each live value. Retired tables and values are the collector's, freed when it drops next.
        unsafe {
            let table = Box::from_raw(table);
            for slot in &table.slots {
                let value = slot.value.load(Ordering::Relaxed);
                if !value.is_null() && value != tomb() {
                    drop(Arc::from_raw(value));
                }
            }
        }
    }
}

// SAFETY: the map owns `Arc<V>`s and `K::Kept`s and hands out `Arc<V>`s and `&V`s to any thread: what `Arc<V>`
// needs (`V: Send + Sync`) and keys that may be shared. The `UnsafeCell` keys are written only by the writer, under
// its lock, before any reader can read them (see `find`).
unsafe impl<K: Key<V> + Send + Sync, V: Send + Sync> Sync for InlineMap<K, V> {}
// SAFETY: as `Sync`.
unsafe impl<K: Key<V> + Send + Sync, V: Send + Sync> Send for InlineMap<K, V> {}

/// The map's entries under one guard (see [`InlineMap::pin`]).
pub(crate) struct Pinned<'m, K: Key<V>, V> {
    guard: LocalGuard<'m>,
    table: *const Table<K::Kept, V>,
    _map: PhantomData<&'m InlineMap<K, V>>,
}

impl<K: Key<V>, V> Pinned<'_, K, V> {
    pub(crate) fn iter(&self) -> impl Iterator<Item = (K, &V)> + '_ {
        // SAFETY: the table was loaded inside `self.guard`, which keeps it allocated while `self` lives.
        let table = unsafe { &*self.table };
        table.slots.iter().filter_map(|slot| {
            let value = self.guard.protect(&slot.value, Ordering::Acquire);
            if value.is_null() || value == tomb() {
                return None;
            }
            // SAFETY: as in `InlineMap::find`: the key is complete behind the pointer, the value alive in the guard.
            let (kept, value) = unsafe { ((*slot.kept.get()).assume_init_ref(), &*value) };
            Some((K::of(kept, value), value))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;

    /// A value that holds its key, as an account does; and a checksum a torn or freed read would break.
    #[derive(Debug)]
    struct Item {
        id: u64,
        check: u64,
    }

    impl Item {
        fn new(id: u64) -> Arc<Self> {
            Arc::new(Self { id, check: !id })
        }
    }

    /// Keyed by the value's own id, with a tag in the slot (an account's shape).
    #[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
    struct Id(u64);

    impl Key<Item> for Id {
        type Kept = u64;
        fn kept(&self, hash: u64) -> u64 {
            hash
        }
        fn is(&self, hash: u64, kept: &u64, value: &Item) -> bool {
            *kept == hash && value.id == self.0
        }
        fn of(_: &u64, value: &Item) -> Self {
            Self(value.id)
        }
        fn hash_of(kept: &u64, _: &Item, _: &KeyHash) -> u64 {
            *kept
        }
    }

    /// Keyed by a whole key in the slot (a session's shape).
    #[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
    struct Whole([u8; 32]);

    impl Key<Item> for Whole {
        type Kept = [u8; 32];
        /// Filed by its first eight bytes, as a token hash is.
        fn hash_with(&self, _: &KeyHash) -> u64 {
            u64::from_le_bytes(self.0[..8].try_into().unwrap())
        }
        fn kept(&self, _: u64) -> [u8; 32] {
            self.0
        }
        fn is(&self, _: u64, kept: &[u8; 32], _: &Item) -> bool {
            *kept == self.0
        }
        fn of(kept: &[u8; 32], _: &Item) -> Self {
            Self(*kept)
        }
    }

    fn whole(n: u64) -> Whole {
        let mut key = [0; 32];
        key[..8].copy_from_slice(&n.to_le_bytes());
        key[24..].copy_from_slice(&n.to_be_bytes());
        Whole(key)
    }

    #[test]
    fn entries_are_found_replaced_removed_and_kept_through_rebuilds() {
        let map: InlineMap<Id, Item> = InlineMap::default();
        for n in 0..10_000 {
            assert!(map.insert(Id(n), Item::new(n)).is_none());
        }
        assert_eq!(map.len(), 10_000);
        assert!(map.slots() >= 10_000 * 8 / 7, "rebuilt as it grew");
        for n in 0..10_000 {
            assert_eq!(map.get(&Id(n)).map(|i| i.id), Some(n));
        }
        assert!(map.get(&Id(10_000)).is_none());
        let old = map.insert(Id(5), Arc::new(Item { id: 5, check: 0 })).unwrap();
        assert_eq!(old.check, !5, "the replaced value, still alive for its holder");
        assert_eq!(map.get_with(&Id(5), |i| i.check), Some(0));
        assert_eq!(map.len(), 10_000);
        for n in (0..10_000).step_by(2) {
            assert_eq!(map.remove(&Id(n)).map(|i| i.id), Some(n));
        }
        assert!(map.remove(&Id(0)).is_none());
        assert_eq!(map.len(), 5_000);
        assert!(!map.contains_key(&Id(4)) && map.contains_key(&Id(3)));
        // A removed key comes back (into its tombstone), and churn past the load limit rebuilds without losing any.
        assert!(map.insert(Id(4), Item::new(4)).is_none());
        for n in 20_000..60_000 {
            map.insert(Id(n), Item::new(n));
            map.remove(&Id(n));
        }
        assert_eq!(map.len(), 5_001);
        let mut ids: Vec<u64> = map.pin().iter().map(|(k, v)| (assert_eq!(k.0, v.id), k.0).1).collect();
        ids.sort_unstable();
        let expected: Vec<u64> = (0..10_000).filter(|n| n % 2 == 1 || *n == 4).collect();
        assert_eq!(ids, expected);
        assert_eq!(map.values().len(), 5_001);
    }

    #[test]
    fn a_load_inserted_many_at_a_time_is_the_same_map() {
        let map: InlineMap<Id, Item> = InlineMap::with_capacity(1_000);
        map.insert(Id(3), Arc::new(Item { id: 3, check: 0 }));
        map.insert_many((0..3_000).map(|n| (Id(n), Item::new(n))));
        assert_eq!(map.len(), 3_000, "grew past its capacity, and 3 was replaced, not doubled");
        assert!((0..3_000).all(|n| map.get_with(&Id(n), |i| (i.id, i.check)) == Some((n, !n))));
        map.insert_many(std::iter::empty());
        assert_eq!(map.len(), 3_000);
    }

    #[test]
    fn a_whole_key_in_the_slot_is_compared_whole() {
        let map: InlineMap<Whole, Item> = InlineMap::with_capacity(100);
        let slots = map.slots();
        for n in 0..75 {
            map.insert(whole(n), Item::new(n));
        }
        assert_eq!(map.slots(), slots, "sized for 100 at 3/4: no rebuild for 75");
        let mut near = whole(3);
        near.0[31] ^= 1;
        assert!(map.get(&near).is_none(), "a key equal in its first bytes is another key");
        assert_eq!(map.get(&whole(3)).map(|i| i.id), Some(3));
        map.remove(&whole(3));
        map.insert(whole(3), Item::new(33));
        assert_eq!(map.get(&whole(3)).map(|i| i.id), Some(33));
        assert_eq!(map.pin().iter().filter(|(k, _)| *k == whole(3)).count(), 1);
    }

    #[test]
    fn the_keys_filed_under_a_hash_are_all_found_by_it() {
        let map: InlineMap<Whole, Item> = InlineMap::default();
        let (mut twin, mut other) = (whole(7), whole(8));
        twin.0[31] = 1;
        other.0[31] = 1;
        for (n, key) in [whole(7), twin, whole(8), other].into_iter().enumerate() {
            map.insert(key, Item::new(n as u64));
        }
        map.insert(whole(9), Item::new(9));
        map.remove(&whole(9));
        let filed = |hash: u64| {
            let mut found = Vec::new();
            map.with_hash(hash, |key, item| found.push((key, item.id)));
            found.sort_unstable_by_key(|(_, id)| *id);
            found
        };
        assert_eq!(filed(7), [(whole(7), 0), (twin, 1)]);
        assert_eq!(filed(8), [(whole(8), 2), (other, 3)]);
        assert!(filed(9).is_empty(), "removed");
        assert!(filed(10).is_empty());
    }

    #[test]
    fn values_live_as_long_as_a_holder_or_the_map_holds_them() {
        let map: InlineMap<Id, Item> = InlineMap::default();
        let item = Item::new(1);
        map.insert(Id(1), Arc::clone(&item));
        assert_eq!(Arc::strong_count(&item), 2);
        drop(map.remove(&Id(1)));
        map.insert(Id(2), Arc::clone(&item));
        drop(map);
        assert_eq!(Arc::strong_count(&item), 1, "the map's references, retired or not, all dropped with it");
    }

    #[test]
    fn the_slots_are_the_entries_bytes() {
        assert_eq!(size_of::<Slot<u64, Item>>(), 16);
        assert_eq!(size_of::<Slot<[u8; 32], Item>>(), 40);
        let map: InlineMap<Id, Item> = InlineMap::with_capacity(30_000);
        let items: Vec<_> = (0..30_000).map(Item::new).collect();
        let ((), bytes) = crate::alloc_count::bytes_in(|| {
            for item in &items {
                map.insert(Id(item.id), Arc::clone(item));
            }
        });
        assert_eq!(bytes, 0, "no allocation per entry");
        assert!(map.slots() * 3 <= 30_000 * 4 + 16, "{} slots: a load of 3/4", map.slots());
    }

    /// Readers look up keys that are always there, and keys that come and go, while the writer replaces,
    /// removes, inserts and rebuilds: a present key is always found, and every value read is whole.
    #[test]
    fn readers_see_whole_entries_while_the_writer_changes_and_rebuilds_the_table() {
        let map: Arc<InlineMap<Whole, Item>> = Arc::new(InlineMap::with_capacity(64));
        for n in 0..64 {
            map.insert(whole(n), Item::new(n));
        }
        let done = Arc::new(AtomicBool::new(false));
        let readers: Vec<_> = (0..3)
            .map(|r| {
                let (map, done) = (Arc::clone(&map), Arc::clone(&done));
                std::thread::spawn(move || {
                    let mut reads = 0u64;
                    while !done.load(Ordering::Relaxed) || reads < 1_000 {
                        for n in 0..64 {
                            let item = map.get(&whole(n)).expect("a key never removed is always found");
                            assert!(item.id == n || item.id == n + 1_000_000, "{item:?}");
                            assert_eq!(item.check, !item.id);
                        }
                        let passing = 1_000 + (reads * 7 + r) % 5_000;
                        if let Some(item) = map.get(&whole(passing)) {
                            assert_eq!((item.id, item.check), (passing, !passing));
                        }
                        let count = map.pin().iter().inspect(|(k, v)| assert_eq!(v.check, !v.id, "{k:?}")).count();
                        assert!(count >= 64);
                        reads += 1;
                    }
                    reads
                })
            })
            .collect();
        for round in 0..20u64 {
            for n in 0..64 {
                let id = if round % 2 == 0 { n + 1_000_000 } else { n };
                map.insert(whole(n), Arc::new(Item { id, check: !id }));
            }
            for n in 1_000..6_000 {
                map.insert(whole(n), Item::new(n));
                if n % 3 != 0 {
                    map.remove(&whole(n));
                }
            }
            for n in 1_000..6_000 {
                map.remove(&whole(n));
            }
        }
        done.store(true, Ordering::Relaxed);
        for reader in readers {
            assert!(reader.join().unwrap() >= 1_000);
        }
        assert_eq!(map.len(), 64);
    }
}
