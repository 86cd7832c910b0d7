//! A global allocator that counts: allocations made (by the whole process and by the
//! calling thread) and the bytes the Rust heap holds. A test binary that wants the
//! counts installs it:
//!
//! ```ignore
//! #[global_allocator]
//! static ALLOCATOR: common::counting_alloc::CountingAllocator =
//!     common::counting_alloc::CountingAllocator;
//! ```
//!
//! Only allocations through Rust's allocator are counted: C libraries' mallocs (Mesa,
//! LiteRT) are not (glibc's `mallinfo2` counts those).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

/// The counting allocator: forwards every call to [`System`].
pub struct CountingAllocator;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);
static LIVE_BYTES: AtomicI64 = AtomicI64::new(0);

thread_local! {
    static THREAD_ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

fn count(ptr: *mut u8, grown_by: i64) -> *mut u8 {
    if !ptr.is_null() {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        LIVE_BYTES.fetch_add(grown_by, Ordering::Relaxed);
        // try_with: a thread's last deallocations may run after its locals are gone.
        let _ = THREAD_ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
    }
    ptr
}

// SAFETY: every call is forwarded to the system allocator unchanged. The counters are
// atomics and a thread-local Cell with a const initialiser, so counting neither
// allocates nor re-enters the allocator.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's layout, under the caller's contract.
        count(unsafe { System.alloc(layout) }, layout.size() as i64)
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's layout, under the caller's contract.
        count(unsafe { System.alloc_zeroed(layout) }, layout.size() as i64)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE_BYTES.fetch_sub(layout.size() as i64, Ordering::Relaxed);
        // SAFETY: `ptr` came from System with this layout (every allocation here does).
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let grown_by = new_size as i64 - layout.size() as i64;
        // SAFETY: forwarded; `ptr` came from System with `layout`.
        count(unsafe { System.realloc(ptr, layout, new_size) }, grown_by)
    }
}

/// Panics unless this binary installed [`CountingAllocator`]: without it every count
/// reads 0 and a test of "no allocations" would pass whatever happened. (The test
/// harness allocates before any test runs, so an installed counter is never 0.)
fn installed() {
    assert!(
        ALLOCATIONS.load(Ordering::SeqCst) > 0,
        "this test binary has not installed common::counting_alloc::CountingAllocator as \
         its #[global_allocator]"
    );
}

/// Allocations (and reallocations) the whole process has made so far.
pub fn allocations() -> u64 {
    installed();
    ALLOCATIONS.load(Ordering::SeqCst)
}

/// Allocations (and reallocations) the calling thread has made so far.
pub fn thread_allocations() -> u64 {
    installed();
    THREAD_ALLOCATIONS.with(|c| c.get())
}

/// Bytes the Rust heap holds now (all threads).
pub fn live_bytes() -> i64 {
    installed();
    LIVE_BYTES.load(Ordering::SeqCst)
}
