//! Test builds only: a global allocator that counts each thread's allocations, so that a test can hold a hot path
//! to allocating nothing. A regression there (a `String` built per request, a `Vec` collected to look something
//! up) costs every request of every application behind us, yet shows in no functional test and only as noise in
//! a benchmark; counted, it fails at once.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

struct Counting;

thread_local! {
    // `const`, and a `Cell` without destructor: reading it never allocates, so the allocator may use it.
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
    /// Bytes allocated less bytes freed by this thread (as asked for, not as the allocator rounds them).
    static BYTES: Cell<i64> = const { Cell::new(0) };
}

fn count() {
    // `try_with`: a thread being torn down may still free and allocate after its locals are gone.
    let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
}

fn grow(bytes: i64) {
    let _ = BYTES.try_with(|n| n.set(n.get() + bytes));
}

fn size(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

// SAFETY: every call is handed on unchanged to the system allocator; counting touches no allocated memory.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        grow(size(layout.size()));
        // SAFETY: the caller's guarantees for `layout` are `System.alloc`'s.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count();
        grow(size(layout.size()));
        // SAFETY: as `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        grow(size(new_size) - size(layout.size()));
        // SAFETY: `ptr` came from this allocator, that is from `System`, with `layout`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        grow(-size(layout.size()));
        // SAFETY: `ptr` came from this allocator, that is from `System`, with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static COUNTING: Counting = Counting;

/// What `f` returns, and how many allocations (and reallocations) this thread made while it ran.
pub fn allocations_in<R>(f: impl FnOnce() -> R) -> (R, u64) {
    let before = ALLOCATIONS.with(Cell::get);
    let result = f();
    (result, ALLOCATIONS.with(Cell::get) - before)
}

/// What `f` returns, and how many bytes this thread allocated and did not free while it ran (what a structure
/// built by `f` holds, when `f` frees its temporaries and nothing else).
pub fn bytes_in<R>(f: impl FnOnce() -> R) -> (R, i64) {
    let before = BYTES.with(Cell::get);
    let result = f();
    (result, BYTES.with(Cell::get) - before)
}
