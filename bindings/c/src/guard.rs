//! The CPU-mapping guard from C, and the table that makes it one per process.

use std::ffi::c_void;
use std::mem::offset_of;

use pinframe::tensor::guard::{GuardTable, local_guard_table};

use crate::status::{Failure, call, pinframe_status};

/// The process-wide CPU-mapping guard as a table of functions: what copies of pinframe
/// built with the `shared-guard` feature (the Python module, the GStreamer plugin, Rust
/// applications) call, so that every copy in a process uses this library's one guard.
/// C and C++ applications use `pinframe_with_cpu_mappings_excluded` instead.
///
/// Every function acts on the calling thread's record and never waits for a lock the
/// calling thread holds. The layout only grows at its end; `version` changes when a
/// field's meaning does.
#[repr(C)]
#[allow(non_camel_case_types)]
pub struct pinframe_guard_table {
    /// `sizeof(pinframe_guard_table)` of the library that made it.
    pub struct_size: usize,
    /// `PINFRAME_GUARD_ABI_VERSION`.
    pub version: u32,
    /// Takes (or nests) the shared side; returns 0, or 1 when granted under the calling
    /// thread's own exclusive section.
    pub shared_acquire: unsafe extern "C" fn() -> i32,
    /// Releases one shared hold of the calling thread.
    pub shared_release: unsafe extern "C" fn(),
    /// Opens (or nests) an exclusive section on the calling thread.
    pub exclusive_acquire: unsafe extern "C" fn(),
    /// Closes one level of the calling thread's exclusive section.
    pub exclusive_release: unsafe extern "C" fn(),
    /// 1 when the calling thread holds the exclusive side.
    pub thread_excludes: unsafe extern "C" fn() -> i32,
    /// 1 when some thread holds the exclusive side.
    pub excluded_now: unsafe extern "C" fn() -> i32,
    /// Inside the calling thread's exclusive section: records `munmap(addr, len)` for the
    /// end of the section (then `done(ctx)`) and returns 1; outside one returns 0.
    pub defer_unmap: unsafe extern "C" fn(
        addr: *mut c_void,
        len: usize,
        done: Option<unsafe extern "C" fn(ctx: *mut c_void)>,
        ctx: *mut c_void,
    ) -> i32,
    /// Threads waiting for either side now.
    pub waiters: unsafe extern "C" fn() -> usize,
}

/// The guard table's version (what `pinframe_get_guard_table()->version` holds).
pub const PINFRAME_GUARD_ABI_VERSION: u32 = 1;

// The table handed out is pinframe's own `GuardTable`; this is its C declaration. Field
// for field the same layout, checked here at compile time.
const _: () = {
    assert!(size_of::<pinframe_guard_table>() == size_of::<GuardTable>());
    assert!(align_of::<pinframe_guard_table>() == align_of::<GuardTable>());
    assert!(offset_of!(pinframe_guard_table, version) == offset_of!(GuardTable, version));
    assert!(
        offset_of!(pinframe_guard_table, shared_acquire) == offset_of!(GuardTable, shared_acquire)
    );
    assert!(
        offset_of!(pinframe_guard_table, shared_release) == offset_of!(GuardTable, shared_release)
    );
    assert!(
        offset_of!(pinframe_guard_table, exclusive_acquire)
            == offset_of!(GuardTable, exclusive_acquire)
    );
    assert!(
        offset_of!(pinframe_guard_table, exclusive_release)
            == offset_of!(GuardTable, exclusive_release)
    );
    assert!(
        offset_of!(pinframe_guard_table, thread_excludes)
            == offset_of!(GuardTable, thread_excludes)
    );
    assert!(offset_of!(pinframe_guard_table, excluded_now) == offset_of!(GuardTable, excluded_now));
    assert!(offset_of!(pinframe_guard_table, defer_unmap) == offset_of!(GuardTable, defer_unmap));
    assert!(offset_of!(pinframe_guard_table, waiters) == offset_of!(GuardTable, waiters));
    assert!(PINFRAME_GUARD_ABI_VERSION == pinframe::tensor::guard::GUARD_ABI_VERSION);
};

/// The process-wide CPU-mapping guard of this library: the table its own pinframe uses.
/// Never NULL; static (never freed).
///
/// Ownership: the table belongs to the library.
#[unsafe(no_mangle)]
pub extern "C" fn pinframe_get_guard_table() -> *const pinframe_guard_table {
    // The library's own copy of pinframe is built without `shared-guard` (so this is the
    // table it uses itself); built with it (when a workspace build unifies features),
    // it loads libpinframe.so.0, which is this very object, so the table is the same.
    local_guard_table() as *const GuardTable as *const pinframe_guard_table
}

/// Runs `callback(ctx)` while no thread creates or removes a CPU mapping through pinframe
/// (the exclusive side of the CPU-mapping guard), in this library and in every copy of
/// pinframe in the process built with the `shared-guard` feature. Run a driver call that
/// may unmap a range twice (Adreno's `eglDestroyImage`) inside it.
///
/// Inside the callback, on this thread: mapped tensors can be used, a first mapping of a
/// tensor is `PINFRAME_ERROR_INVALID_INPUT` (instead of waiting for itself forever), and a
/// tensor or pin freed inside it is unmapped when the section ends. Sections nest. The
/// callback must return normally (no `longjmp` out of it, no C++ exception through it).
///
/// Ownership: borrows `ctx` for the callback.
///
/// # Safety
/// `callback` is a valid function; it is called once with `ctx`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pinframe_with_cpu_mappings_excluded(
    callback: Option<unsafe extern "C" fn(ctx: *mut c_void)>,
    ctx: *mut c_void,
) -> pinframe_status {
    call(|| {
        let callback = callback.ok_or_else(|| Failure::null("callback"))?;
        // SAFETY: the caller's contract: a valid function, called once with its ctx.
        pinframe::with_cpu_mappings_excluded(|| unsafe { callback(ctx) });
        Ok(())
    })
}
