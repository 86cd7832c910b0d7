//! CPU mappings: the CPU-mapping guard's Rust face (the guard itself is in `guard.rs`),
//! [`MmapOwner`] (a mapping unmapped exactly once) and [`HostPin`] (a stable host address
//! that keeps its buffer alive).

use std::ffi::c_void;
use std::fmt;
use std::marker::PhantomData;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::guard;
use super::storage::BufferStorage;
use crate::{DType, Error, Result};

/// Live CPU mappings made by pinframe (a leak detector for tests and `pinframe info`).
static LIVE_MAPPINGS: AtomicUsize = AtomicUsize::new(0);

/// A hold on the shared side of the process-wide CPU-mapping guard, released on drop.
/// While any thread holds the shared side, no thread is inside
/// [`with_cpu_mappings_excluded`].
///
/// Taken on a thread that is itself inside `with_cpu_mappings_excluded`, the hold is
/// granted at once (the exclusive side already keeps every other thread out) and turns
/// into an ordinary shared hold when the section ends.
pub struct CpuMappingShared {
    /// Not `Send`: the hold belongs to the thread that took it (the guard keeps a
    /// per-thread record).
    _thread: PhantomData<*const ()>,
}

/// Takes the shared side of the process-wide CPU-mapping guard. Hold it around any `mmap` or
/// `munmap` of a buffer a GPU driver may also map, if you make such calls yourself.
///
/// It never waits for the calling thread itself: holds nest, and inside the thread's own
/// [`with_cpu_mappings_excluded`] section it returns at once (see [`CpuMappingShared`]).
pub fn cpu_mapping_shared() -> CpuMappingShared {
    guard::shared_acquire();
    CpuMappingShared {
        _thread: PhantomData,
    }
}

impl Drop for CpuMappingShared {
    fn drop(&mut self) {
        guard::shared_release();
    }
}

impl fmt::Debug for CpuMappingShared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("CpuMappingShared")
    }
}

/// Runs `f` while no thread creates or removes a CPU mapping through pinframe (the exclusive
/// side of the CPU-mapping guard). The GL backend runs every `eglDestroyImage` inside it.
///
/// With the `shared-guard` feature the guard is the one in `libpinframe.so.0`, shared by
/// every copy of pinframe in the process built with the feature.
///
/// Inside `f`, on this thread: existing mappings can be used (mapping an already mapped
/// tensor, syncing, reading a pin); a *new* mapping (the first `map()` or `pin_host()` of
/// a buffer) returns [`Error::InvalidArgument`] instead of waiting for this very section;
/// a tensor or pin dropped inside `f` is unmapped when the section ends. Sections nest, and
/// a section opened while this thread holds a [`CpuMappingShared`] sets that hold aside
/// until it ends. A panic in `f` ends the section and propagates.
pub fn with_cpu_mappings_excluded<R>(f: impl FnOnce() -> R) -> R {
    let _section = guard::exclusive_section();
    f()
}

/// Counts an unmap that the guard ran at the end of an exclusive section.
unsafe extern "C" fn deferred_unmap_done(_ctx: *mut c_void) {
    LIVE_MAPPINGS.fetch_sub(1, Ordering::SeqCst);
}

/// The number of CPU mappings pinframe currently holds (each `mmap` of a tensor counts once,
/// until its owner unmaps it).
#[cfg(feature = "testing")]
pub fn live_cpu_mappings() -> usize {
    LIVE_MAPPINGS.load(Ordering::SeqCst)
}

/// One `mmap` of a file descriptor, unmapped exactly once, by this owner's `Drop`. There is
/// no other way to unmap it, so a mapping can never be released twice.
pub(crate) struct MmapOwner {
    ptr: NonNull<u8>,
    len: usize,
    writable: bool,
}

// SAFETY: the mapping is plain shared memory; the owner only hands out its address, and the
// unmap in Drop is a process-wide operation valid from any thread.
unsafe impl Send for MmapOwner {}
// SAFETY: as above; `&MmapOwner` exposes no interior mutation of its own.
unsafe impl Sync for MmapOwner {}

impl MmapOwner {
    /// Maps `len` bytes of `fd` from offset 0, shared, read-write when the fd allows it and
    /// read-only otherwise.
    /// `_shared` proves the caller holds the shared side of the CPU-mapping guard.
    /// Inside the calling thread's own exclusive section it refuses (see
    /// [`with_cpu_mappings_excluded`]).
    pub(crate) fn map(fd: BorrowedFd<'_>, len: usize, _shared: &CpuMappingShared) -> Result<Self> {
        guard::check_may_map()?;
        if len == 0 {
            return Err(Error::InvalidArgument("cannot map an empty buffer".into()));
        }
        let mut writable = true;
        // SAFETY: a fresh mapping at an address the kernel chooses (null hint), of a length
        // the caller checked against the buffer's size; it aliases no Rust object.
        let mut ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            let err = std::io::Error::last_os_error();
            if !matches!(err.raw_os_error(), Some(libc::EACCES) | Some(libc::EPERM)) {
                return Err(Error::io(format!("mmap of {len} bytes"), err));
            }
            // A read-only fd (or a write-sealed memfd): map it read-only.
            writable = false;
            // SAFETY: as above, read-only.
            ptr = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    len,
                    libc::PROT_READ,
                    libc::MAP_SHARED,
                    fd.as_raw_fd(),
                    0,
                )
            };
            if ptr == libc::MAP_FAILED {
                return Err(Error::last_os(format!("mmap (read-only) of {len} bytes")));
            }
        }
        LIVE_MAPPINGS.fetch_add(1, Ordering::SeqCst);
        Ok(MmapOwner {
            // A successful mmap never returns null.
            ptr: NonNull::new(ptr.cast()).expect("mmap returned null"),
            len,
            writable,
        })
    }

    /// Start of the mapping.
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// True if the mapping allows writes.
    pub fn writable(&self) -> bool {
        self.writable
    }
}

impl Drop for MmapOwner {
    fn drop(&mut self) {
        // SAFETY: the mapping is this owner's, and once deferred it is never touched again
        // (the owner is being dropped); the guard unmaps it when the section ends.
        let deferred = unsafe {
            guard::defer_unmap(
                self.ptr.as_ptr().cast(),
                self.len,
                deferred_unmap_done,
                std::ptr::null_mut(),
            )
        };
        if deferred {
            return;
        }
        let _shared = cpu_mapping_shared();
        // SAFETY: ptr/len are exactly what mmap returned; this owner is the only one that
        // unmaps it and Drop runs once. Every borrower (tensor guards, pins) holds an Arc
        // that keeps this owner alive, so nothing uses the range after this point.
        let rc = unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
        if rc != 0 {
            log::error!(
                "munmap of {} bytes failed: {}",
                self.len,
                std::io::Error::last_os_error()
            );
        }
        LIVE_MAPPINGS.fetch_sub(1, Ordering::SeqCst);
    }
}

impl fmt::Debug for MmapOwner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "MmapOwner({:p}, {} bytes)", self.ptr, self.len)
    }
}

/// A stable host address for a tensor's data, handed once to an inference runtime.
///
/// A pin holds an `Arc` over the tensor's buffer (its mapping and its fd) and borrows
/// nothing: the tensor can be used through `&mut` (e.g. as a conversion destination) and
/// even dropped, and the address stays valid until the last clone of the pin drops. The
/// window covers the tensor's logical bytes, from its first byte to the end of its last
/// row's data. A pin issues no cache maintenance: bracket each CPU access with
/// [`Tensor::sync_for_cpu`](crate::Tensor::sync_for_cpu) and
/// [`Tensor::sync_for_device`](crate::Tensor::sync_for_device).
#[derive(Clone)]
pub struct HostPin<'a> {
    ptr: NonNull<u8>,
    len: usize,
    dtype: DType,
    writable: bool,
    _keepalive: Arc<BufferStorage>,
    _lifetime: PhantomData<&'a ()>,
}

// SAFETY: the pin only carries an address into memory kept alive by the Arc'd storage
// (itself Send + Sync); what the holder does with the raw pointer is its own `unsafe`.
unsafe impl Send for HostPin<'_> {}
// SAFETY: as above; no method mutates through `&self` except via raw pointers the caller
// dereferences under its own `unsafe`.
unsafe impl Sync for HostPin<'_> {}

impl HostPin<'static> {
    pub(crate) fn new(storage: Arc<BufferStorage>, len: usize, dtype: DType) -> Result<Self> {
        let shared = cpu_mapping_shared();
        let ptr = storage.cpu_ptr(&shared)?;
        let writable = storage.cpu_writable(&shared)?;
        if len > storage.len() {
            return Err(Error::InvalidArgument(format!(
                "pin window of {len} bytes exceeds the {}-byte buffer",
                storage.len()
            )));
        }
        Ok(HostPin {
            ptr,
            len,
            dtype,
            writable,
            _keepalive: storage,
            _lifetime: PhantomData,
        })
    }
}

impl HostPin<'_> {
    /// The first byte of the pinned window.
    pub fn as_ptr(&self) -> *const u8 {
        self.ptr.as_ptr()
    }

    /// The first byte of the pinned window, writable. Writing through it is the caller's
    /// `unsafe` responsibility: no other access may race with it, and read-only imported
    /// buffers must not be written.
    pub fn as_mut_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Length of the window in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True if the window is empty (never, for pins of real tensors).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The element type of the pinned tensor.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// True if the CPU may write the window: false for buffers imported from a read-only
    /// fd or a write-sealed memfd, which are mapped read-only (a write through
    /// [`as_mut_ptr`](HostPin::as_mut_ptr) would fault). Bindings that hand the address
    /// to other code (numpy, DLPack) mark such views read-only.
    pub fn writable(&self) -> bool {
        self.writable
    }

    /// The largest power of two dividing the address (0 for a null address).
    pub fn alignment(&self) -> usize {
        let addr = self.ptr.as_ptr() as usize;
        if addr == 0 {
            0
        } else {
            1 << addr.trailing_zeros()
        }
    }

    /// Starts a CPU access through the pin, as [`Tensor::sync_for_cpu`](crate::Tensor::sync_for_cpu)
    /// does (on dma-bufs `DMA_BUF_IOCTL_SYNC` START; no-op on heap and memfd memory), for
    /// pin holders inside the crate (runtime bindings) that do not hold the tensor.
    #[cfg_attr(not(feature = "litert"), allow(dead_code))]
    pub(crate) fn sync_for_cpu(&self, access: crate::Access) -> Result<()> {
        self._keepalive.sync(super::sync::SyncPhase::Start, access)
    }

    /// Ends a CPU access through the pin ([`Tensor::sync_for_device`](crate::Tensor::sync_for_device)).
    #[cfg_attr(not(feature = "litert"), allow(dead_code))]
    pub(crate) fn sync_for_device(&self, access: crate::Access) -> Result<()> {
        self._keepalive.sync(super::sync::SyncPhase::End, access)
    }

    /// Holds off every writer of the pinned tensor (a [`map_mut`](crate::Tensor::map_mut)
    /// guard, a conversion into it) until the returned guard drops, waiting first for a
    /// writer that is at work. A runtime that reads the pinned memory takes this for the
    /// length of each read, as `runtime::litert::CompiledModel::run` (feature `litert`)
    /// does for every bound input; readers share it.
    ///
    /// Writes through the raw pointers of pins are not covered (they are the holder's
    /// `unsafe`). On the thread that holds a writer of the tensor this returns
    /// [`Error::InvalidArgument`] instead of waiting for itself.
    pub fn lock_read(&self) -> Result<PinReadGuard<'_>> {
        self._keepalive.access().enter_read()?;
        Ok(PinReadGuard {
            storage: &self._keepalive,
            _not_send: PhantomData,
        })
    }

    /// [`lock_read`](Self::lock_read) without a guard, for holders of many pins at once
    /// (a runtime's bound inputs) that release them with [`unlock_read`](Self::unlock_read)
    /// on the same thread.
    #[cfg_attr(not(feature = "litert"), allow(dead_code))]
    pub(crate) fn enter_read(&self) -> Result<()> {
        self._keepalive.access().enter_read()
    }

    /// Ends a read taken with [`enter_read`](Self::enter_read) on this thread.
    #[cfg_attr(not(feature = "litert"), allow(dead_code))]
    pub(crate) fn unlock_read(&self) {
        self._keepalive.access().exit_read()
    }

    /// True while some reader holds [`lock_read`](Self::lock_read) of this buffer (a
    /// test hook).
    #[cfg(feature = "testing")]
    pub fn readers(&self) -> usize {
        self._keepalive.access().readers()
    }

    /// The memory kind of the pinned buffer.
    pub fn memory(&self) -> crate::Memory {
        self._keepalive.memory()
    }

    /// The file descriptor of the pinned buffer (dma-buf or memfd), kept open by the pin;
    /// `None` for heap memory.
    pub fn fd(&self) -> Option<BorrowedFd<'_>> {
        self._keepalive.fd()
    }

    /// The window as a byte slice.
    ///
    /// # Safety
    /// For the lifetime of the slice, nothing may write the window: no `map_mut` guard of the
    /// tensor, no conversion into it, no device writes, no writes through another pin.
    pub unsafe fn as_slice(&self) -> &[u8] {
        // SAFETY: ptr..ptr+len lies inside the mapping kept alive by `_keepalive`; the caller
        // guarantees the absence of concurrent writers.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

/// A read of a pinned tensor's memory: while it lives, no writer of the tensor runs (see
/// [`HostPin::lock_read`]). Not `Send`: it is released on the thread that took it.
#[must_use = "the read hold ends when the guard drops"]
pub struct PinReadGuard<'a> {
    storage: &'a BufferStorage,
    /// The lock knows its readers by thread: the guard must drop where it was taken.
    _not_send: PhantomData<*const ()>,
}

impl Drop for PinReadGuard<'_> {
    fn drop(&mut self) {
        self.storage.access().exit_read();
    }
}

impl fmt::Debug for PinReadGuard<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PinReadGuard").finish_non_exhaustive()
    }
}

impl fmt::Debug for HostPin<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HostPin")
            .field("dtype", &self.dtype)
            .field("ptr", &self.ptr)
            .field("len", &self.len)
            .field("alignment", &self.alignment())
            .field("writable", &self.writable)
            .finish()
    }
}
