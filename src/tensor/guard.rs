//! The CPU-mapping guard (DESIGN.md invariant 1): one reader-writer lock per process, with
//! a per-thread record that makes it re-entrant, and the C ABI through which several
//! copies of pinframe in one process share it.
//!
//! # Why a guard
//! Some drivers (Adreno's) unmap an imported range a second time inside `eglDestroyImage`.
//! If another thread placed a mapping at that address in between, the second unmap tears
//! it down. So every `mmap`/`munmap` pinframe makes holds the *shared* side, and every
//! `eglDestroyImage` runs under the *exclusive* side ([`with_cpu_mappings_excluded`](crate::with_cpu_mappings_excluded)).
//!
//! # The per-thread record (no self-deadlock)
//! Each thread records how deep it holds either side. With it, no call on one thread can
//! wait for a lock that same thread holds:
//! - a shared hold taken while the thread already holds the shared side nests;
//! - a shared hold taken while the thread holds the exclusive side is granted at once
//!   (the exclusive side already keeps every other thread out) and becomes an ordinary
//!   shared hold when the section ends, so a token may outlive the section;
//! - an exclusive section opened while the thread holds the shared side first sets that
//!   hold aside (the thread is not inside an `mmap` while it calls in here, so nothing it
//!   protects is in flight), waits for the exclusive side, and takes the shared side back
//!   when the section ends;
//! - exclusive sections nest.
//!
//! What the exclusive side promises stays literally true on its own thread too: while a
//! section runs, pinframe makes no CPU mapping and removes none. A *new* mapping asked for
//! inside the section (a first `map()` or `pin_host()` of a buffer) is an
//! `Error::InvalidArgument` instead of a deadlock, and the
//! unmapping of a buffer whose last owner drops inside the section is deferred: the thread
//! unmaps it when the section ends, still holding the exclusive side. Refusing (rather
//! than letting the holder map) keeps the hazard closed even when the section spans more
//! than one driver call, where a driver's second unmap may come after pinframe code ran.
//!
//! # One guard per process, however many copies
//! A process may link pinframe several times (the Python module and the GStreamer plugin
//! in one `gst-python` process; an application plus a plugin), each copy with its own
//! statics. The guard's state (the lock *and* the per-thread record, since two copies
//! share one thread) is reached through a table of `extern "C"` functions,
//! [`GuardTable`]. Without the `shared-guard` feature a copy uses its own table. With it,
//! a copy uses the table that `libpinframe.so.0` (bindings/c) returns from
//! `pinframe_get_guard_table()`, found at run time with `dlopen("libpinframe.so.0")`: the
//! dynamic loader loads one object per soname, so every copy (each maybe loaded with
//! `RTLD_LOCAL`, which hides symbols from the others and defeats a `dlsym(RTLD_DEFAULT)`)
//! reaches the same one, and `libpinframe.so` itself exports the table its own copy uses.
//! A copy built with the feature that cannot load `libpinframe.so.0` refuses to map (an
//! `Error::Unsupported` naming the library) rather than
//! silently guarding alone.

use std::cell::{Cell, RefCell};
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};

use crate::{Error, Result};

/// Version of [`GuardTable`]'s layout and semantics. A copy refuses a table of another
/// version (a different `libpinframe.so.0` major version would carry another soname).
pub const GUARD_ABI_VERSION: u32 = 1;

/// The soname a copy built with `shared-guard` loads the process-wide guard from.
pub const GUARD_LIBRARY: &str = "libpinframe.so.0";

/// The name of the function `libpinframe.so` exports that returns its [`GuardTable`].
pub const GUARD_SYMBOL: &str = "pinframe_get_guard_table";

/// Called (with its `ctx`) after a deferred unmap ran, so the copy that deferred it can
/// count it.
pub type DeferredUnmapDone = unsafe extern "C" fn(ctx: *mut c_void);

/// The process-wide guard as a C table: what `libpinframe.so` exports and what every copy
/// of pinframe calls (its own table without `shared-guard`). All functions act on the
/// calling thread's record; none blocks on a lock the calling thread holds.
#[repr(C)]
#[derive(Debug)]
pub struct GuardTable {
    /// `size_of::<GuardTable>()` of the library that made it (fields are only appended).
    pub struct_size: usize,
    /// [`GUARD_ABI_VERSION`].
    pub version: u32,
    /// Takes (or nests) the shared side. Returns 0 when taken or nested, 1 when granted
    /// under the calling thread's own exclusive section.
    pub shared_acquire: unsafe extern "C" fn() -> i32,
    /// Releases one shared hold of the calling thread (taken by `shared_acquire`).
    pub shared_release: unsafe extern "C" fn(),
    /// Opens (or nests) an exclusive section on the calling thread.
    pub exclusive_acquire: unsafe extern "C" fn(),
    /// Closes one level of the calling thread's exclusive section; the outermost runs the
    /// deferred unmaps, then releases.
    pub exclusive_release: unsafe extern "C" fn(),
    /// 1 when the calling thread holds the exclusive side, else 0.
    pub thread_excludes: unsafe extern "C" fn() -> i32,
    /// 1 when some thread holds the exclusive side, else 0.
    pub excluded_now: unsafe extern "C" fn() -> i32,
    /// Inside the calling thread's exclusive section: records `munmap(addr, len)` to run
    /// when the section ends (then `done(ctx)`), and returns 1. Outside one: does nothing
    /// and returns 0 (the caller unmaps under the shared side).
    ///
    /// Safety: `addr`/`len` are a mapping the caller owns and never uses again once this
    /// returns 1.
    pub defer_unmap: unsafe extern "C" fn(
        addr: *mut c_void,
        len: usize,
        done: Option<DeferredUnmapDone>,
        ctx: *mut c_void,
    ) -> i32,
    /// Threads waiting for either side now (a test hook: proves who waits on whose lock).
    pub waiters: unsafe extern "C" fn() -> usize,
}

/// The lock: a reader-writer lock with separate lock and unlock calls (the C ABI cannot
/// carry Rust guard objects; `std::sync::RwLock` only hands out guards), writer-preferring
/// so that a stream of mappings cannot starve an `eglDestroyImage`, and counting who
/// waits. Hand-written on `Mutex` + `Condvar` for those three reasons.
struct Lock {
    state: Mutex<LockState>,
    changed: Condvar,
    waiters: AtomicUsize,
    exclusive: AtomicBool,
}

struct LockState {
    readers: usize,
    writer: bool,
    writers_waiting: usize,
    /// Threads blocked in `lock_shared` (woken only when there are some: a notify costs
    /// a futex syscall even with nobody waiting).
    readers_waiting: usize,
}

impl Lock {
    const fn new() -> Self {
        Lock {
            state: Mutex::new(LockState {
                readers: 0,
                writer: false,
                writers_waiting: 0,
                readers_waiting: 0,
            }),
            changed: Condvar::new(),
            waiters: AtomicUsize::new(0),
            exclusive: AtomicBool::new(false),
        }
    }

    fn state(&self) -> MutexGuard<'_, LockState> {
        // The mutex only guards counters and no code panics while holding it.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn wait<'a>(&self, g: MutexGuard<'a, LockState>) -> MutexGuard<'a, LockState> {
        self.changed.wait(g).unwrap_or_else(|e| e.into_inner())
    }

    fn lock_shared(&self) {
        let mut s = self.state();
        if s.writer || s.writers_waiting > 0 {
            s.readers_waiting += 1;
            self.waiters.fetch_add(1, Ordering::SeqCst);
            while s.writer || s.writers_waiting > 0 {
                s = self.wait(s);
            }
            self.waiters.fetch_sub(1, Ordering::SeqCst);
            s.readers_waiting -= 1;
        }
        s.readers += 1;
    }

    fn unlock_shared(&self) {
        let mut s = self.state();
        s.readers = s.readers.saturating_sub(1);
        if s.readers == 0 && s.writers_waiting > 0 {
            self.changed.notify_all();
        }
    }

    fn lock_exclusive(&self) {
        let mut s = self.state();
        if s.writer || s.readers > 0 {
            s.writers_waiting += 1;
            self.waiters.fetch_add(1, Ordering::SeqCst);
            while s.writer || s.readers > 0 {
                s = self.wait(s);
            }
            self.waiters.fetch_sub(1, Ordering::SeqCst);
            s.writers_waiting -= 1;
        }
        s.writer = true;
        self.exclusive.store(true, Ordering::SeqCst);
    }

    fn unlock_exclusive(&self) {
        let mut s = self.state();
        s.writer = false;
        self.exclusive.store(false, Ordering::SeqCst);
        if s.writers_waiting > 0 || s.readers_waiting > 0 {
            self.changed.notify_all();
        }
    }
}

/// This copy's guard (the process-wide one unless `shared-guard` routes elsewhere).
static LOCK: Lock = Lock::new();

/// A munmap waiting for the end of the thread's exclusive section.
struct Deferred {
    addr: usize,
    len: usize,
    done: Option<DeferredUnmapDone>,
    ctx: usize,
}

thread_local! {
    /// Nesting depth of the thread's shared holds (one real lock underneath).
    static SHARED_DEPTH: Cell<usize> = const { Cell::new(0) };
    /// Nesting depth of the thread's exclusive section.
    static EXCLUSIVE_DEPTH: Cell<usize> = const { Cell::new(0) };
    /// Shared holds set aside by the exclusive section (taken before it, or granted
    /// inside it), taken back when it ends.
    static SET_ASIDE: Cell<usize> = const { Cell::new(0) };
    /// Unmaps deferred to the end of the thread's exclusive section.
    static DEFERRED: RefCell<Vec<Deferred>> = const { RefCell::new(Vec::new()) };
}

unsafe extern "C" fn local_shared_acquire() -> i32 {
    if EXCLUSIVE_DEPTH.get() > 0 {
        SET_ASIDE.set(SET_ASIDE.get() + 1);
        return 1;
    }
    let depth = SHARED_DEPTH.get();
    if depth == 0 {
        LOCK.lock_shared();
    }
    SHARED_DEPTH.set(depth + 1);
    0
}

unsafe extern "C" fn local_shared_release() {
    if EXCLUSIVE_DEPTH.get() > 0 {
        SET_ASIDE.set(SET_ASIDE.get().saturating_sub(1));
        return;
    }
    match SHARED_DEPTH.get() {
        0 => log::error!("pinframe: a CPU-mapping guard release without a hold (ignored)"),
        1 => {
            SHARED_DEPTH.set(0);
            LOCK.unlock_shared();
        }
        d => SHARED_DEPTH.set(d - 1),
    }
}

unsafe extern "C" fn local_exclusive_acquire() {
    let depth = EXCLUSIVE_DEPTH.get();
    if depth > 0 {
        EXCLUSIVE_DEPTH.set(depth + 1);
        return;
    }
    let shared = SHARED_DEPTH.replace(0);
    if shared > 0 {
        LOCK.unlock_shared();
    }
    SET_ASIDE.set(shared);
    LOCK.lock_exclusive();
    EXCLUSIVE_DEPTH.set(1);
}

unsafe extern "C" fn local_exclusive_release() {
    match EXCLUSIVE_DEPTH.get() {
        0 => {
            log::error!("pinframe: an exclusive-section release without a section (ignored)");
            return;
        }
        1 => {}
        d => {
            EXCLUSIVE_DEPTH.set(d - 1);
            return;
        }
    }
    run_deferred();
    EXCLUSIVE_DEPTH.set(0);
    LOCK.unlock_exclusive();
    let shared = SET_ASIDE.replace(0);
    if shared > 0 {
        LOCK.lock_shared();
        SHARED_DEPTH.set(shared);
    }
}

/// Runs the unmaps deferred during the ending section (the exclusive side still held).
fn run_deferred() {
    loop {
        let batch = DEFERRED
            .try_with(|d| std::mem::take(&mut *d.borrow_mut()))
            .unwrap_or_default();
        if batch.is_empty() {
            return;
        }
        for d in batch {
            unmap_now(d.addr, d.len);
            if let Some(done) = d.done {
                // SAFETY: `done` and `ctx` were handed to `defer_unmap` together by a copy
                // of pinframe that stays loaded while its mappings exist.
                unsafe { done(d.ctx as *mut c_void) };
            }
        }
    }
}

fn unmap_now(addr: usize, len: usize) {
    // SAFETY: `defer_unmap`'s caller handed over a mapping it owned (exactly what mmap
    // returned) and never uses again; it is unmapped once, here.
    let rc = unsafe { libc::munmap(addr as *mut c_void, len) };
    if rc != 0 {
        log::error!(
            "munmap of {len} bytes (deferred to the end of an exclusive section) failed: {}",
            std::io::Error::last_os_error()
        );
    }
}

unsafe extern "C" fn local_thread_excludes() -> i32 {
    (EXCLUSIVE_DEPTH.get() > 0) as i32
}

unsafe extern "C" fn local_excluded_now() -> i32 {
    LOCK.exclusive.load(Ordering::SeqCst) as i32
}

unsafe extern "C" fn local_defer_unmap(
    addr: *mut c_void,
    len: usize,
    done: Option<DeferredUnmapDone>,
    ctx: *mut c_void,
) -> i32 {
    if EXCLUSIVE_DEPTH.get() == 0 {
        return 0;
    }
    let item = Deferred {
        addr: addr as usize,
        len,
        done,
        ctx: ctx as usize,
    };
    let mut item = Some(item);
    let _ = DEFERRED.try_with(|d| d.borrow_mut().push(item.take().expect("pushed once")));
    if let Some(item) = item {
        // The thread is being torn down (its deferred list is gone): the exclusive side
        // is held, so unmapping now is safe from every other thread.
        unmap_now(item.addr, item.len);
        if let Some(done) = item.done {
            // SAFETY: as in `run_deferred`.
            unsafe { done(item.ctx as *mut c_void) };
        }
    }
    1
}

unsafe extern "C" fn local_waiters() -> usize {
    LOCK.waiters.load(Ordering::SeqCst)
}

/// This copy's own guard, as a table.
static LOCAL_TABLE: GuardTable = GuardTable {
    struct_size: size_of::<GuardTable>(),
    version: GUARD_ABI_VERSION,
    shared_acquire: local_shared_acquire,
    shared_release: local_shared_release,
    exclusive_acquire: local_exclusive_acquire,
    exclusive_release: local_exclusive_release,
    thread_excludes: local_thread_excludes,
    excluded_now: local_excluded_now,
    defer_unmap: local_defer_unmap,
    waiters: local_waiters,
};

/// This copy's own guard table: what `libpinframe.so`'s `pinframe_get_guard_table` returns
/// (bindings/c). Not for other uses: a copy reaches the process-wide guard through
/// [`cpu_mapping_shared`](crate::cpu_mapping_shared) and
/// [`with_cpu_mappings_excluded`](crate::with_cpu_mappings_excluded).
#[doc(hidden)]
pub fn local_guard_table() -> &'static GuardTable {
    &LOCAL_TABLE
}

/// Which CPU-mapping guard this copy of pinframe uses.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CpuMappingGuard {
    /// Its own (built without the `shared-guard` feature): process-wide only if no other
    /// copy of pinframe is linked into the process.
    Local,
    /// The one `libpinframe.so.0` exports (built with `shared-guard`), shared by every
    /// copy built with the feature.
    Shared {
        /// The file the guard lives in, as the dynamic loader reports it.
        library: String,
    },
}

/// The guard this copy of pinframe uses. With the `shared-guard` feature, an error (the
/// same one a mapping would return) when `libpinframe.so.0` cannot be loaded; bindings
/// call it when they load, to fail then rather than at the first mapping.
pub fn cpu_mapping_guard() -> Result<CpuMappingGuard> {
    #[cfg(feature = "shared-guard")]
    {
        let table = shared::table()?;
        Ok(CpuMappingGuard::Shared {
            library: shared::library_of(table),
        })
    }
    #[cfg(not(feature = "shared-guard"))]
    Ok(CpuMappingGuard::Local)
}

/// The table every call goes through.
fn table() -> &'static GuardTable {
    #[cfg(feature = "shared-guard")]
    {
        // Unresolved: this copy can make no mapping (`check_may_map` refuses), so its own
        // lock covers everything it does; the failure is logged once by `shared::table`.
        shared::table().unwrap_or(&LOCAL_TABLE)
    }
    #[cfg(not(feature = "shared-guard"))]
    &LOCAL_TABLE
}

/// Takes the shared side for the calling thread (nesting, never self-blocking).
pub(super) fn shared_acquire() {
    // SAFETY: table functions have no preconditions beyond being called on a live thread.
    unsafe { (table().shared_acquire)() };
}

/// Releases one shared hold taken by [`shared_acquire`].
pub(super) fn shared_release() {
    // SAFETY: as above; paired with one `shared_acquire` by the caller's token.
    unsafe { (table().shared_release)() };
}

/// Opens an exclusive section; [`ExclusiveSection`]'s drop closes it (also on unwind).
pub(super) fn exclusive_section() -> ExclusiveSection {
    // SAFETY: as above.
    unsafe { (table().exclusive_acquire)() };
    ExclusiveSection(())
}

/// An open exclusive section of the calling thread.
pub(super) struct ExclusiveSection(());

impl Drop for ExclusiveSection {
    fn drop(&mut self) {
        // SAFETY: paired with the `exclusive_acquire` that made this value.
        unsafe { (table().exclusive_release)() };
    }
}

/// Whether a new CPU mapping may be made on this thread now: not inside the thread's own
/// exclusive section, and (with `shared-guard`) only under the process-wide guard.
pub(super) fn check_may_map() -> Result<()> {
    #[cfg(feature = "shared-guard")]
    shared::table()?;
    // SAFETY: as above.
    if unsafe { (table().thread_excludes)() } != 0 {
        return Err(Error::InvalidArgument(
            "cannot make a CPU mapping inside with_cpu_mappings_excluded on the thread that \
             holds it (the section promises that no mapping is made while it runs): map or pin \
             the tensor before the section, or after it returns"
                .into(),
        ));
    }
    Ok(())
}

/// Defers `munmap(addr, len)` to the end of the calling thread's exclusive section, if it
/// is in one (returns true; `done(ctx)` runs after the unmap). False: not in a section.
///
/// # Safety
/// `addr`/`len` are a mapping the caller owns; when this returns true the caller must
/// never use or unmap it again.
pub(super) unsafe fn defer_unmap(
    addr: *mut c_void,
    len: usize,
    done: DeferredUnmapDone,
    ctx: *mut c_void,
) -> bool {
    // SAFETY: the caller's contract is the table function's.
    unsafe { (table().defer_unmap)(addr, len, Some(done), ctx) != 0 }
}

/// Threads waiting on the guard now (test hook).
#[cfg(feature = "testing")]
pub fn cpu_mapping_guard_waiters() -> usize {
    // SAFETY: as above.
    unsafe { (table().waiters)() }
}

/// The address of the guard table this copy uses: equal in two copies exactly when they
/// share one guard (test hook).
#[cfg(feature = "testing")]
pub fn cpu_mapping_guard_id() -> usize {
    table() as *const GuardTable as usize
}

#[cfg(feature = "shared-guard")]
mod shared {
    //! Finding the process-wide guard in `libpinframe.so.0`.

    use std::ffi::CStr;
    use std::sync::OnceLock;

    use super::{GUARD_ABI_VERSION, GUARD_LIBRARY, GUARD_SYMBOL, GuardTable};
    use crate::{Error, Result};

    static RESOLVED: OnceLock<std::result::Result<&'static GuardTable, String>> = OnceLock::new();

    /// The process-wide table, loaded once; the error says why it cannot be.
    pub(super) fn table() -> Result<&'static GuardTable> {
        RESOLVED
            .get_or_init(|| {
                let r = resolve();
                if let Err(e) = &r {
                    log::error!("pinframe: {e}");
                }
                r
            })
            .as_ref()
            .copied()
            .map_err(|e| Error::Unsupported(e.clone()))
    }

    fn resolve() -> std::result::Result<&'static GuardTable, String> {
        let fail = |why: String| {
            format!(
                "this copy of pinframe was built with the `shared-guard` feature, so its \
                 CPU mappings go through the guard in {GUARD_LIBRARY}, but {why}; install \
                 libpinframe (bindings/c, see the README's \"C and C++\") or put its directory \
                 on LD_LIBRARY_PATH"
            )
        };
        // SAFETY: loading libpinframe.so.0 runs only its Rust runtime's initialisers; it
        // is already loaded (then this only takes a reference) when any other copy found
        // it, because the loader matches an already loaded object by its soname.
        let lib = unsafe {
            libloading::os::unix::Library::open(
                Some(GUARD_LIBRARY),
                libc::RTLD_NOW | libc::RTLD_LOCAL,
            )
        }
        .map_err(|e| fail(format!("it cannot be loaded ({e})")))?;
        // SAFETY: `pinframe_get_guard_table` is declared in pinframe.h with this signature.
        let get = unsafe {
            lib.get::<unsafe extern "C" fn() -> *const GuardTable>(GUARD_SYMBOL.as_bytes())
        }
        .map_err(|e| fail(format!("it exports no {GUARD_SYMBOL} ({e})")))?;
        // SAFETY: the function takes no arguments and returns a pointer to a static table.
        let ptr = unsafe { get() };
        // The library stays loaded for the life of the process: the table is static in it.
        std::mem::forget(lib);
        if ptr.is_null() {
            return Err(fail(format!("its {GUARD_SYMBOL} returned null")));
        }
        // SAFETY: non-null, and it points to the library's static table, which lives as
        // long as the library (forever, see above). Only the two leading fields are read
        // before the size and version say the rest has this layout.
        let (size, version) = unsafe { ((*ptr).struct_size, (*ptr).version) };
        if version != GUARD_ABI_VERSION || size < size_of::<GuardTable>() {
            return Err(fail(format!(
                "its guard table has version {version} and {size} bytes, this copy needs \
                 version {GUARD_ABI_VERSION} and at least {} bytes",
                size_of::<GuardTable>()
            )));
        }
        // SAFETY: as above, now that the layout is known to match.
        Ok(unsafe { &*ptr })
    }

    /// The file that holds `table`, as the dynamic loader names it.
    pub(super) fn library_of(table: &'static GuardTable) -> String {
        // SAFETY: dladdr only reads the loader's tables; `info` is plain data it fills.
        let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
        // SAFETY: as above; the address is a live static.
        let found = unsafe { libc::dladdr(table as *const GuardTable as *const _, &mut info) };
        if found == 0 || info.dli_fname.is_null() {
            return GUARD_LIBRARY.to_string();
        }
        // SAFETY: dladdr returned a NUL-terminated path owned by the loader.
        let name = unsafe { CStr::from_ptr(info.dli_fname) };
        name.to_string_lossy().into_owned()
    }
}
