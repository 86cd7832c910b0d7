//! DMA-BUF memory: allocation (dma-heap → udmabuf → GBM), detection, and PRIME attachment.
//!
//! PRIME import/export and GEM handles go through the `drm` crate. The dma-heap,
//! udmabuf (and, in `sync.rs`, dma-buf sync) ioctls are declared here with nix's ioctl
//! macros: no maintained crate covers them (`drm` is about DRM devices only).
//!
//! Heap order: `PINFRAME_DMA_HEAPS` (comma-separated heap names under `/dev/dma_heap/`)
//! when set, else [`DEFAULT_DMA_HEAPS`]: contiguous CMA heaps first (what camera ISPs,
//! display controllers and NPUs without an IOMMU need), then the system heap.

use std::fs::{File, OpenOptions};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use nix::fcntl::SealFlag;

use crate::{Error, Result};

/// Dma-heap names tried in order when `PINFRAME_DMA_HEAPS` is not set.
pub const DEFAULT_DMA_HEAPS: [&str; 4] = ["linux,cma", "reserved", "default_cma_region", "system"];

/// `statfs` magic of the dma-buf pseudo filesystem.
const DMA_BUF_MAGIC: libc::c_long = 0x444d_4142;

#[repr(C)]
struct DmaHeapAllocationData {
    len: u64,
    fd: u32,
    fd_flags: u32,
    heap_flags: u64,
}
nix::ioctl_readwrite!(dma_heap_ioctl_alloc, b'H', 0, DmaHeapAllocationData);

#[repr(C)]
struct UdmabufCreate {
    memfd: u32,
    flags: u32,
    offset: u64,
    size: u64,
}
const UDMABUF_FLAGS_CLOEXEC: u32 = 0x01;
nix::ioctl_write_ptr!(udmabuf_create, b'u', 0x42, UdmabufCreate);

/// A DRM device file, for the `drm` crate's PRIME and GEM calls (its traits are
/// implemented on the caller's own type).
struct Card<F: AsFd>(F);

impl<F: AsFd> AsFd for Card<F> {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.0.as_fd()
    }
}

impl<F: AsFd> drm::Device for Card<F> {}
impl<F: AsFd> drm::control::Device for Card<F> {}

/// Allocation routes found unusable in this process, each with why: a dma-heap or
/// `/dev/udmabuf` that does not open, or no DRM node that yields a GBM device. Probing again
/// per tensor would repeat the same failing opens (and, for GBM, load a DRI driver per node
/// each time), and a running system's device nodes do not come and go. An allocation that
/// fails on a route that did open (a CMA pool exhausted for now, a size a route refuses)
/// is not remembered: it may succeed later or at another size.
struct Unavailable {
    heaps: Mutex<Vec<(String, String)>>,
    udmabuf: OnceLock<String>,
    #[cfg_attr(not(feature = "gbm"), allow(dead_code))]
    gbm: OnceLock<String>,
}

static UNAVAILABLE: Unavailable = Unavailable {
    heaps: Mutex::new(Vec::new()),
    udmabuf: OnceLock::new(),
    gbm: OnceLock::new(),
};

/// Probes that ran and failed, per route kind (heap, udmabuf, GBM). With failures
/// remembered, each route counts once however many tensors are allocated afterwards.
static FAILED_PROBES: [AtomicU64; 3] = [AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)];
const PROBE_HEAP: usize = 0;
const PROBE_UDMABUF: usize = 1;
#[cfg_attr(not(feature = "gbm"), allow(dead_code))]
const PROBE_GBM: usize = 2;

fn remembered(why: &str) -> String {
    format!("{why} (remembered from the first attempt in this process)")
}

/// Records that a route's probe failed (counted every time one runs) and that the route
/// is unusable; returns `why` for the error message.
fn remember(slot: &OnceLock<String>, probe: usize, why: String) -> String {
    FAILED_PROBES[probe].fetch_add(1, Ordering::Relaxed);
    let _ = slot.set(why.clone());
    why
}

/// Failed DMA allocation probes so far, per route kind (a test hook: proves a failed
/// probe is not repeated per tensor).
#[cfg(feature = "testing")]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DmaProbeFailures {
    /// Dma-heaps that did not open.
    pub heap: u64,
    /// `/dev/udmabuf` not opening.
    pub udmabuf: u64,
    /// GBM with no usable DRM device.
    pub gbm: u64,
}

/// The failed DMA allocation probes this process made (each remembered, never repeated).
#[cfg(feature = "testing")]
pub fn dma_probe_failures() -> DmaProbeFailures {
    let v = |i: usize| FAILED_PROBES[i].load(Ordering::Relaxed);
    DmaProbeFailures {
        heap: v(PROBE_HEAP),
        udmabuf: v(PROBE_UDMABUF),
        gbm: v(PROBE_GBM),
    }
}

/// Which route produced a self-allocated dma-buf.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DmaRoute {
    /// A dma-heap, by name (`/dev/dma_heap/<name>`).
    Heap(String),
    /// `/dev/udmabuf` over a sealed memfd.
    Udmabuf,
    /// A linear GBM buffer on a DRM device (render node, else primary node), by path.
    Gbm(String),
}

/// True if `fd` refers to a dma-buf.
pub(crate) fn is_dmabuf(fd: BorrowedFd<'_>) -> bool {
    let mut st = std::mem::MaybeUninit::<libc::statfs>::uninit();
    // SAFETY: fstatfs writes a statfs struct into the provided buffer on success.
    let rc = unsafe { libc::fstatfs(fd.as_raw_fd(), st.as_mut_ptr()) };
    // SAFETY: rc == 0 means fstatfs initialised the struct.
    rc == 0 && unsafe { st.assume_init() }.f_type as libc::c_long == DMA_BUF_MAGIC
}

/// The dma-heap names to try, in order.
pub fn dma_heap_order() -> Vec<String> {
    match std::env::var("PINFRAME_DMA_HEAPS") {
        Ok(list) if !list.trim().is_empty() => list
            .split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect(),
        _ => DEFAULT_DMA_HEAPS.iter().map(|s| s.to_string()).collect(),
    }
}

/// Allocates a dma-buf of at least `len` bytes through the first route that works. On
/// failure the error lists every route tried and why it failed.
pub(crate) fn allocate(len: usize) -> Result<(OwnedFd, DmaRoute)> {
    let page = page_size();
    let len = len
        .checked_next_multiple_of(page)
        .ok_or_else(|| Error::InvalidShape(format!("{len} bytes is too large")))?;
    let mut tried = Vec::new();
    for name in dma_heap_order() {
        match alloc_from_heap(&name, len) {
            Ok(fd) => return Ok((fd, DmaRoute::Heap(name))),
            Err(e) => tried.push(format!("/dev/dma_heap/{name}: {e}")),
        }
    }
    match alloc_udmabuf(len) {
        Ok(fd) => return Ok((fd, DmaRoute::Udmabuf)),
        Err(e) => tried.push(format!("/dev/udmabuf: {e}")),
    }
    match alloc_gbm(len) {
        Ok((fd, node)) => return Ok((fd, DmaRoute::Gbm(node))),
        Err(e) => tried.push(format!("GBM: {e}")),
    }
    Err(Error::MemoryUnavailable {
        requested: "DMA",
        tried,
    })
}

/// Allocates a dma-buf of at least `len` bytes through one given route only
/// (`DmaRoute::Gbm` with an empty path means the first render node that works).
pub(crate) fn allocate_via(len: usize, route: &DmaRoute) -> Result<(OwnedFd, DmaRoute)> {
    let len = len
        .checked_next_multiple_of(page_size())
        .ok_or_else(|| Error::InvalidShape(format!("{len} bytes is too large")))?;
    let result = match route {
        DmaRoute::Heap(name) => alloc_from_heap(name, len).map(|fd| (fd, route.clone())),
        DmaRoute::Udmabuf => alloc_udmabuf(len).map(|fd| (fd, DmaRoute::Udmabuf)),
        DmaRoute::Gbm(_) => alloc_gbm(len).map(|(fd, node)| (fd, DmaRoute::Gbm(node))),
    };
    result.map_err(|e| Error::MemoryUnavailable {
        requested: "DMA",
        tried: vec![format!("{route:?}: {e}")],
    })
}

fn describe_open_error(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "does not exist".into(),
        std::io::ErrorKind::PermissionDenied => "permission denied".into(),
        _ => e.to_string(),
    }
}

fn alloc_from_heap(name: &str, len: usize) -> std::result::Result<OwnedFd, String> {
    let mut known = UNAVAILABLE.heaps.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, why)) = known.iter().find(|(n, _)| n == name) {
        return Err(remembered(why));
    }
    let heap = match OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_CLOEXEC)
        .open(format!("/dev/dma_heap/{name}"))
    {
        Ok(f) => f,
        Err(e) => {
            let why = describe_open_error(&e);
            known.push((name.to_string(), why.clone()));
            FAILED_PROBES[PROBE_HEAP].fetch_add(1, Ordering::Relaxed);
            return Err(why);
        }
    };
    drop(known);
    let mut data = DmaHeapAllocationData {
        len: len as u64,
        fd: 0,
        fd_flags: (libc::O_RDWR | libc::O_CLOEXEC) as u32,
        heap_flags: 0,
    };
    // SAFETY: `data` is a valid dma_heap_allocation_data for the duration of the call.
    unsafe { dma_heap_ioctl_alloc(heap.as_raw_fd(), &mut data) }
        .map_err(|e| format!("DMA_HEAP_IOCTL_ALLOC of {len} bytes: {e}"))?;
    // SAFETY: on success the kernel returned a new fd that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(data.fd as i32) })
}

fn alloc_udmabuf(len: usize) -> std::result::Result<OwnedFd, String> {
    if let Some(why) = UNAVAILABLE.udmabuf.get() {
        return Err(remembered(why));
    }
    let dev = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_CLOEXEC)
        .open("/dev/udmabuf")
        .map_err(|e| remember(&UNAVAILABLE.udmabuf, PROBE_UDMABUF, describe_open_error(&e)))?;
    let memfd =
        super::shm::create_memfd(c"pinframe-udmabuf", len, false).map_err(|e| e.to_string())?;
    // udmabuf requires F_SEAL_SHRINK (the pages must not go away) and forbids F_SEAL_WRITE.
    super::shm::add_seals(memfd.as_fd(), SealFlag::F_SEAL_SHRINK).map_err(|e| e.to_string())?;
    let create = UdmabufCreate {
        memfd: memfd.as_raw_fd() as u32,
        flags: UDMABUF_FLAGS_CLOEXEC,
        offset: 0,
        size: len as u64,
    };
    // SAFETY: `create` is a valid udmabuf_create struct for the duration of the call.
    let fd = unsafe { udmabuf_create(dev.as_raw_fd(), &create) }
        .map_err(|e| format!("UDMABUF_CREATE of {len} bytes: {e}"))?;
    // SAFETY: on success the ioctl returns a new dma-buf fd that nothing else owns. The
    // dma-buf holds its own references to the memfd's pages, so the memfd may close.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// DRM render nodes, in number order.
pub fn render_nodes() -> Vec<String> {
    dri_nodes("renderD")
}

/// DRM primary nodes (`/dev/dri/card*`), in number order.
pub fn primary_nodes() -> Vec<String> {
    dri_nodes("card")
}

fn dri_nodes(prefix: &str) -> Vec<String> {
    let mut nodes: Vec<String> = std::fs::read_dir("/dev/dri")
        .map(|dir| {
            dir.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(prefix))
                .map(|n| format!("/dev/dri/{n}"))
                .collect()
        })
        .unwrap_or_default();
    nodes.sort();
    nodes
}

/// The GBM device that last allocated successfully, kept for the process: creating a GBM
/// device loads a DRI driver, far too slow to repeat per tensor.
#[cfg(feature = "gbm")]
static GBM_DEVICE: std::sync::Mutex<Option<(gbm::Device<File>, String)>> =
    std::sync::Mutex::new(None);

#[cfg(feature = "gbm")]
fn alloc_gbm(len: usize) -> std::result::Result<(OwnedFd, String), String> {
    // Allocate a linear 32-bit buffer 1024 pixels (4096 bytes) wide and tall enough to
    // hold `len` bytes: every GBM backend supports that format, unlike R8.
    const ROW_BYTES: usize = 4096;
    let height = u32::try_from(len.div_ceil(ROW_BYTES))
        .map_err(|_| format!("{len} bytes is too large for a GBM buffer"))?;
    let mut errors = Vec::new();
    let mut cached = GBM_DEVICE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((device, node)) = cached.as_ref() {
        match gbm_export(device, height) {
            Ok(fd) => return Ok((fd, node.clone())),
            Err(e) => errors.push(format!("{node}: {e}")),
        }
    } else if let Some(why) = UNAVAILABLE.gbm.get() {
        return Err(remembered(why));
    }
    // Render nodes first (what GPUs allocate on); then primary nodes, because drivers
    // whose GBM allocates dumb buffers (vgem, simple display controllers) only allow
    // those on the primary node (EACCES on the render node).
    let nodes: Vec<String> = render_nodes().into_iter().chain(primary_nodes()).collect();
    if nodes.is_empty() {
        return Err(remember(
            &UNAVAILABLE.gbm,
            PROBE_GBM,
            "no DRM device in /dev/dri".into(),
        ));
    }
    let mut any_device = cached.is_some();
    for node in nodes {
        let file = match OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_CLOEXEC)
            .open(&node)
        {
            Ok(f) => f,
            Err(e) => {
                errors.push(format!("{node}: {}", describe_open_error(&e)));
                continue;
            }
        };
        let device = match gbm::Device::new(file) {
            Ok(d) => d,
            Err(e) => {
                errors.push(format!("{node}: gbm_create_device: {e}"));
                continue;
            }
        };
        any_device = true;
        match gbm_export(&device, height) {
            Ok(fd) => {
                *cached = Some((device, node.clone()));
                return Ok((fd, node));
            }
            Err(e) => errors.push(format!("{node}: {e}")),
        }
    }
    let errors = errors.join(", ");
    if any_device {
        // A device opened but refused this buffer: another size may work.
        return Err(errors);
    }
    Err(remember(&UNAVAILABLE.gbm, PROBE_GBM, errors))
}

/// Allocates a linear buffer 1024 ARGB pixels wide and exports it as a writable dma-buf.
#[cfg(feature = "gbm")]
fn gbm_export(device: &gbm::Device<File>, height: u32) -> std::result::Result<OwnedFd, String> {
    use gbm::{BufferObjectFlags, Format};
    let mut last = String::new();
    for usage in [
        BufferObjectFlags::LINEAR | BufferObjectFlags::RENDERING,
        BufferObjectFlags::LINEAR,
    ] {
        let bo = match device.create_buffer_object::<()>(1024, height, Format::Argb8888, usage) {
            Ok(bo) => bo,
            Err(e) => {
                last = format!("gbm_bo_create({usage:?}): {e}");
                continue;
            }
        };
        // gbm_bo_get_fd exports read-only on some drivers (vgem): export the GEM handle
        // ourselves with DRM_RDWR so the CPU can map it writable.
        // SAFETY: reading the u32 member of the handle union, which is what DRM-backed GBM
        // devices fill in.
        let handle = unsafe { bo.handle().u32_ };
        let handle = drm::control::from_u32::<drm::buffer::Handle>(handle)
            .ok_or_else(|| "gbm_bo_get_handle returned GEM handle 0".to_string())?;
        // The exported dma-buf holds its own reference to the buffer, so the bo may drop.
        use drm::control::Device as _;
        return Card(device.as_fd())
            .buffer_to_prime_fd(handle, drm::RDWR | drm::CLOEXEC)
            .map_err(|e| format!("PRIME_HANDLE_TO_FD: {e}"));
    }
    Err(last)
}

#[cfg(not(feature = "gbm"))]
fn alloc_gbm(_len: usize) -> std::result::Result<(OwnedFd, String), String> {
    Err("not compiled in (enable the `gbm` feature)".into())
}

/// The process's shared render-node fd used for PRIME attachments, if any node opens.
fn attach_device() -> Option<Arc<Card<File>>> {
    static DEVICE: OnceLock<Option<Arc<Card<File>>>> = OnceLock::new();
    DEVICE
        .get_or_init(|| {
            render_nodes().into_iter().find_map(|node| {
                OpenOptions::new()
                    .read(true)
                    .write(true)
                    .custom_flags(libc::O_CLOEXEC)
                    .open(node)
                    .ok()
                    .map(|f| Arc::new(Card(f)))
            })
        })
        .clone()
}

/// A dma-buf imported into a DRM device (a GEM handle), so that the exporter sees an
/// attachment: CMA heaps only do cache maintenance in `DMA_BUF_IOCTL_SYNC` for attached
/// buffers. The handle is closed when this drops.
pub(crate) struct PrimeAttachment {
    device: Arc<Card<File>>,
    handle: drm::buffer::Handle,
}

impl PrimeAttachment {
    /// Attaches a self-allocated dma-buf to the first render node, if there is one.
    /// Only for buffers pinframe allocated itself: GEM handles are shared per dma-buf per
    /// DRM file, so attaching a buffer someone else also attached would let one close
    /// detach both.
    pub(crate) fn attach(fd: BorrowedFd<'_>) -> Option<Self> {
        use drm::control::Device as _;
        let device = attach_device()?;
        // (The kernel never hands out GEM handle 0, which the crate's handle type excludes.)
        match device.prime_fd_to_buffer(fd) {
            Ok(handle) => Some(PrimeAttachment { device, handle }),
            Err(e) => {
                log::debug!("PRIME attach of a dma-buf to the render node failed: {e}");
                None
            }
        }
    }
}

impl Drop for PrimeAttachment {
    fn drop(&mut self) {
        use drm::control::Device as _;
        // The handle came from PRIME_FD_TO_HANDLE on this device and is closed once, here.
        if let Err(e) = self.device.close_buffer(self.handle) {
            log::warn!("DRM_IOCTL_GEM_CLOSE failed: {e}");
        }
    }
}

pub(crate) fn page_size() -> usize {
    // SAFETY: sysconf has no memory-safety preconditions.
    let v = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if v > 0 { v as usize } else { 4096 }
}
