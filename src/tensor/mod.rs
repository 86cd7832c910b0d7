//! Tensors over heap, memfd or DMA-BUF memory, with map guards, host pins and cache sync.

mod access;
pub(crate) mod dma;
pub mod guard;
mod heap;
pub(crate) mod pin;
mod shm;
mod storage;
pub(crate) mod sync;

use std::fmt;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::ptr::NonNull;
use std::str::FromStr;
use std::sync::Arc;

pub use dma::{DEFAULT_DMA_HEAPS, DmaRoute, dma_heap_order, primary_nodes, render_nodes};
pub use guard::{CpuMappingGuard, cpu_mapping_guard};
pub use heap::HEAP_ALIGNMENT;
pub use pin::{
    CpuMappingShared, HostPin, PinReadGuard, cpu_mapping_shared, with_cpu_mappings_excluded,
};

use storage::BufferStorage;
use sync::SyncPhase;

use crate::image::{ImageLayout, PixelFormat, Plane};
use crate::{Element, Error, Result};

/// Row pitch alignment of images allocated in DMA memory (what display, camera and GPU
/// hardware commonly require).
pub const DMA_ROW_ALIGNMENT: usize = 64;

/// Where a tensor's bytes live.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Memory {
    /// Process heap, 64-byte aligned. Not shareable with devices or other processes.
    Heap,
    /// A sealed memfd mapped `MAP_SHARED`: another process can map its fd.
    Shm,
    /// A DMA-BUF: shareable with devices (camera, GPU, NPU) without copies.
    Dma,
}

impl Memory {
    /// Lowercase name.
    pub const fn name(self) -> &'static str {
        match self {
            Memory::Heap => "heap",
            Memory::Shm => "shm",
            Memory::Dma => "dma",
        }
    }
}

impl fmt::Display for Memory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Memory {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "heap" => Ok(Memory::Heap),
            "shm" | "memfd" => Ok(Memory::Shm),
            "dma" | "dmabuf" | "dma-buf" => Ok(Memory::Dma),
            _ => Err(Error::InvalidArgument(format!(
                "unknown memory {s:?}; expected heap, shm or dma"
            ))),
        }
    }
}

/// Which memory a tensor constructor allocates: what their `memory` argument takes.
/// `None`, `Some(memory)` and a bare [`Memory`] convert into it, so
/// `Tensor::new(&shape, None)` and `Tensor::new(&shape, Some(Memory::Dma))` read as before.
///
/// | request | tries, in order | for |
/// | --- | --- | --- |
/// | [`Auto`](MemoryRequest::Auto) (`None`) | Shm, Heap | tensors only the CPU touches (the CPU backend's destinations, scratch) |
/// | [`Device`](MemoryRequest::Device) | Dma, Shm, Heap | tensors a GPU, NPU or camera should reach without a copy (GL destinations, runtime inputs) |
/// | [`Only(m)`](MemoryRequest::Only) (`Some(m)`) | `m` | exactly that kind: an error naming every route tried if it cannot be had |
///
/// `Auto` never takes DMA memory: on many boards a dma-buf comes from a small CMA pool the
/// camera, display and NPU need, and a tensor nothing but the CPU touches should not spend
/// it. A fallback (Device without DMA memory) is logged at debug level; the tensor's
/// [`memory`](Tensor::memory) says what it got, and every buffer of a multi-buffer image
/// is in that memory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum MemoryRequest {
    /// CPU memory another process can map by fd (a memfd), else the heap.
    #[default]
    Auto,
    /// The best memory devices can use without a copy: a dma-buf, else a memfd, else the
    /// heap.
    Device,
    /// Exactly this kind of memory.
    Only(Memory),
}

impl MemoryRequest {
    /// The kinds tried, in order.
    fn order(self) -> &'static [Memory] {
        match self {
            MemoryRequest::Auto => &[Memory::Shm, Memory::Heap],
            MemoryRequest::Device => &[Memory::Dma, Memory::Shm, Memory::Heap],
            MemoryRequest::Only(Memory::Heap) => &[Memory::Heap],
            MemoryRequest::Only(Memory::Shm) => &[Memory::Shm],
            MemoryRequest::Only(Memory::Dma) => &[Memory::Dma],
        }
    }

    /// Lowercase name (`auto`, `device`, or the memory's own name).
    pub const fn name(self) -> &'static str {
        match self {
            MemoryRequest::Auto => "auto",
            MemoryRequest::Device => "device",
            MemoryRequest::Only(m) => m.name(),
        }
    }
}

impl From<Memory> for MemoryRequest {
    fn from(m: Memory) -> Self {
        MemoryRequest::Only(m)
    }
}

impl From<Option<Memory>> for MemoryRequest {
    fn from(m: Option<Memory>) -> Self {
        m.map_or(MemoryRequest::Auto, MemoryRequest::Only)
    }
}

impl fmt::Display for MemoryRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for MemoryRequest {
    type Err = Error;
    /// `auto`, `device`, or a [`Memory`] name (`heap`, `shm`/`memfd`, `dma`).
    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "auto" => Ok(MemoryRequest::Auto),
            "device" => Ok(MemoryRequest::Device),
            other => other
                .parse::<Memory>()
                .map(MemoryRequest::Only)
                .map_err(|_| {
                    Error::InvalidArgument(format!(
                        "unknown memory {s:?}; expected auto, device, heap, shm or dma"
                    ))
                }),
        }
    }
}

/// The direction of a CPU access, for cache maintenance.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Access {
    /// The CPU reads (caches are invalidated at the start).
    Read,
    /// The CPU writes (caches are flushed at the end).
    Write,
    /// The CPU reads and writes.
    ReadWrite,
}

/// An n-dimensional array of `T` in heap, memfd or DMA-BUF memory, optionally described as
/// an image by an [`ImageLayout`].
///
/// Access the elements through [`map`](Tensor::map) / [`map_mut`](Tensor::map_mut) guards
/// (which bracket the access with `DMA_BUF_IOCTL_SYNC` on dma-bufs), or hand a persistent
/// [`HostPin`] to an inference runtime and bracket each access with
/// [`sync_for_cpu`](Tensor::sync_for_cpu) / [`sync_for_device`](Tensor::sync_for_device).
pub struct Tensor<T: Element> {
    buffers: Vec<Arc<BufferStorage>>,
    /// Bytes of each buffer the tensor's data covers (from byte 0).
    extents: Vec<usize>,
    shape: Vec<usize>,
    layout: Option<ImageLayout>,
    /// For a batch of images ([`Tensor::image_batch`]): how many, and the bytes from one
    /// slice to the next; `layout` is slice 0's.
    batch: Option<Batch>,
    memory: Memory,
    dma_route: Option<DmaRoute>,
    _element: PhantomData<T>,
}

/// How the images of a batch tensor follow each other in its one buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Batch {
    count: usize,
    slice_bytes: usize,
}

/// One allocated buffer and how it was made.
struct Allocation {
    storage: Arc<BufferStorage>,
    route: Option<DmaRoute>,
}

fn allocate(len: usize, memory: Memory) -> Result<Allocation> {
    match memory {
        Memory::Heap => Ok(Allocation {
            storage: Arc::new(BufferStorage::heap(len)?),
            route: None,
        }),
        Memory::Shm => {
            let fd = shm::create_memfd(c"pinframe-tensor", len, true)?;
            Ok(Allocation {
                storage: Arc::new(BufferStorage::from_fd(fd, len, Memory::Shm, None)),
                route: None,
            })
        }
        Memory::Dma => allocate_dma(dma::allocate(len)?),
    }
}

fn allocate_dma((fd, route): (OwnedFd, DmaRoute)) -> Result<Allocation> {
    let actual = fd_size(fd.as_fd(), Memory::Dma)?;
    // GBM buffers already belong to the render node; attach the others to it.
    let attachment = match route {
        DmaRoute::Gbm(_) => None,
        _ => dma::PrimeAttachment::attach(fd.as_fd()),
    };
    Ok(Allocation {
        storage: Arc::new(BufferStorage::from_fd(fd, actual, Memory::Dma, attachment)),
        route: Some(route),
    })
}

/// Allocates one buffer per entry of `lens`, all in the first kind of `request`'s order
/// that can hold every one of them (never a mix: the tensor reports one memory). An
/// explicit kind that fails is its own error; a fallback is logged at debug level.
fn allocate_all(lens: &[usize], request: MemoryRequest) -> Result<Vec<Allocation>> {
    let mut last = None;
    for &m in request.order() {
        match lens.iter().map(|&len| allocate(len, m)).collect() {
            Ok(all) => {
                if let Some(e) = last {
                    log::debug!("{request} memory fell back to {m}: {e}");
                }
                return Ok(all);
            }
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| Error::InvalidArgument("no memory kind".into())))
}

/// Size of the buffer behind `fd`: `lseek(SEEK_END)` for dma-bufs, `fstat` for memfds.
fn fd_size(fd: BorrowedFd<'_>, memory: Memory) -> Result<usize> {
    match memory {
        Memory::Dma => {
            // SAFETY: lseek on a borrowed, open fd has no memory-safety preconditions.
            let end = unsafe { libc::lseek(fd.as_raw_fd(), 0, libc::SEEK_END) };
            if end < 0 {
                return Err(Error::last_os("lseek(SEEK_END) on a dma-buf"));
            }
            // SAFETY: as above; dma-bufs only accept SEEK_SET to 0 to rewind.
            unsafe { libc::lseek(fd.as_raw_fd(), 0, libc::SEEK_SET) };
            Ok(end as usize)
        }
        _ => {
            let st =
                nix::sys::stat::fstat(fd.as_raw_fd()).map_err(|e| Error::io("fstat", e.into()))?;
            Ok(st.st_size as usize)
        }
    }
}

/// Duplicates a caller's fd (close-on-exec) and tells what it is.
fn dup_buffer_fd(fd: BorrowedFd<'_>) -> Result<(OwnedFd, Memory, usize)> {
    let raw = fd.as_raw_fd();
    let owned = fd.try_clone_to_owned().map_err(|e| {
        if e.raw_os_error() == Some(libc::EBADF) {
            Error::InvalidFd(format!("fd {raw} is not open"))
        } else {
            Error::io(format!("duplicating fd {raw}"), e)
        }
    })?;
    let memory = if dma::is_dmabuf(owned.as_fd()) {
        Memory::Dma
    } else if shm::is_memfd(owned.as_fd()) {
        Memory::Shm
    } else {
        let what = std::fs::read_link(format!("/proc/self/fd/{}", owned.as_raw_fd()))
            .map(|p| p.display().to_string())
            .unwrap_or_else(|_| "unknown".into());
        return Err(Error::InvalidFd(format!(
            "fd {raw} ({what}) is neither a dma-buf nor a memfd"
        )));
    };
    // A memfd's seal before its size: an unsealed one is refused as such, however small.
    let size = match memory {
        Memory::Shm => shm::sealed_len(owned.as_fd(), raw)?,
        _ => fd_size(owned.as_fd(), memory)?,
    };
    Ok((owned, memory, size))
}

fn element_count(shape: &[usize]) -> Result<usize> {
    let mut n: usize = 1;
    for &d in shape {
        if d == 0 {
            return Err(Error::InvalidShape(format!(
                "shape {shape:?} has a zero dimension"
            )));
        }
        n = n
            .checked_mul(d)
            .ok_or_else(|| Error::InvalidShape(format!("shape {shape:?} overflows")))?;
    }
    Ok(n)
}

impl<T: Element> Tensor<T> {
    /// A zero-filled tensor of `shape` in `memory` (see [`MemoryRequest`]: `None` = a
    /// memfd, else the heap; [`MemoryRequest::Device`] = a dma-buf first). An explicit
    /// memory kind that cannot be allocated is an error naming every route tried.
    pub fn new(shape: &[usize], memory: impl Into<MemoryRequest>) -> Result<Self> {
        Self::new_in(shape, memory.into())
    }

    fn new_in(shape: &[usize], memory: MemoryRequest) -> Result<Self> {
        let bytes = element_count(shape)?
            .checked_mul(size_of::<T>())
            .filter(|&b| b <= isize::MAX as usize)
            .ok_or_else(|| Error::InvalidShape(format!("shape {shape:?} overflows")))?;
        let a = allocate_all(&[bytes], memory)?.remove(0);
        Ok(Tensor {
            memory: a.storage.memory(),
            buffers: vec![a.storage],
            extents: vec![bytes],
            shape: shape.to_vec(),
            layout: None,
            batch: None,
            dma_route: a.route,
            _element: PhantomData,
        })
    }

    /// A zero-filled DMA tensor of `shape` allocated through one given route only (a
    /// dma-heap by name, udmabuf, or GBM; `DmaRoute::Gbm(String::new())` = first render
    /// node), for callers that need a specific kind of buffer (e.g. contiguous CMA memory).
    pub fn new_dma_via(shape: &[usize], route: &DmaRoute) -> Result<Self> {
        let bytes = element_count(shape)?
            .checked_mul(size_of::<T>())
            .filter(|&b| b <= isize::MAX as usize)
            .ok_or_else(|| Error::InvalidShape(format!("shape {shape:?} overflows")))?;
        let a = allocate_dma(dma::allocate_via(bytes, route)?)?;
        Ok(Tensor {
            memory: Memory::Dma,
            buffers: vec![a.storage],
            extents: vec![bytes],
            shape: shape.to_vec(),
            layout: None,
            batch: None,
            dma_route: a.route,
            _element: PhantomData,
        })
    }

    /// An image tensor of `T` elements in `memory` (see [`MemoryRequest`]). DMA images get
    /// rows aligned to [`DMA_ROW_ALIGNMENT`] bytes; heap and memfd images are tightly
    /// packed.
    pub fn image(
        width: u32,
        height: u32,
        format: PixelFormat,
        memory: impl Into<MemoryRequest>,
    ) -> Result<Self> {
        Self::image_in(width, height, format, memory.into())
    }

    fn image_in(
        width: u32,
        height: u32,
        format: PixelFormat,
        memory: MemoryRequest,
    ) -> Result<Self> {
        let aligned =
            || ImageLayout::with_row_alignment(width, height, format, T::DTYPE, DMA_ROW_ALIGNMENT);
        let tight = || ImageLayout::tight(width, height, format, T::DTYPE);
        let mut last = None;
        for &m in memory.order() {
            let layout = if m == Memory::Dma {
                aligned()?
            } else {
                tight()?
            };
            match Self::with_layout_in(layout, MemoryRequest::Only(m)) {
                Ok(t) => {
                    if let Some(e) = last {
                        log::debug!("{memory} image tensor fell back to {m}: {e}");
                    }
                    return Ok(t);
                }
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| Error::InvalidArgument("no memory kind".into())))
    }

    /// An image tensor with an explicit layout (strides, plane offsets, several buffers)
    /// in `memory` (see [`MemoryRequest`]); every buffer is in the same kind of memory.
    /// The layout's element type must be `T`.
    pub fn with_layout(layout: ImageLayout, memory: impl Into<MemoryRequest>) -> Result<Self> {
        Self::with_layout_in(layout, memory.into())
    }

    fn with_layout_in(layout: ImageLayout, memory: MemoryRequest) -> Result<Self> {
        check_dtype::<T>(&layout)?;
        let lens: Vec<usize> = (0..layout.buffer_count())
            .map(|b| layout.allocation_len(b))
            .collect();
        let allocations = allocate_all(&lens, memory)?;
        let route = allocations.iter().find_map(|a| a.route.clone());
        let buffers: Vec<_> = allocations.into_iter().map(|a| a.storage).collect();
        let extents = (0..layout.buffer_count())
            .map(|b| layout.required_len(b))
            .collect();
        Ok(Tensor {
            memory: buffers[0].memory(),
            buffers,
            extents,
            shape: layout.shape(),
            layout: Some(layout),
            batch: None,
            dma_route: route,
            _element: PhantomData,
        })
    }

    /// A batch of `count` images of one size and format in one buffer, slice `i` after
    /// slice `i - 1`: shape `[count, h, w, c]` for packed outputs (NHWC), `[count, 3, h, w]`
    /// for planar RGB (NCHW). Each slice is laid out as [`Tensor::image`] would lay out
    /// one image (tight rows in heap and memfd memory, so the whole tensor is one dense
    /// array a runtime can bind as one input; DMA rows aligned to
    /// [`DMA_ROW_ALIGNMENT`]). [`ImageProcessor::convert_batch`](crate::ImageProcessor::convert_batch)
    /// fills it; [`slice_layout`](Tensor::slice_layout) addresses one slice.
    ///
    /// ```
    /// use pinframe::{Memory, PixelFormat, Tensor};
    /// let t = Tensor::<f32>::image_batch(16, 224, 224, PixelFormat::PlanarRgb, Memory::Heap)?;
    /// assert_eq!(t.shape(), &[16, 3, 224, 224]);
    /// assert_eq!(t.batch_len(), 16);
    /// assert_eq!(t.slice_layout(1)?.planes()[0].offset, 3 * 224 * 224 * 4);
    /// # Ok::<(), pinframe::Error>(())
    /// ```
    pub fn image_batch(
        count: usize,
        width: u32,
        height: u32,
        format: PixelFormat,
        memory: impl Into<MemoryRequest>,
    ) -> Result<Self> {
        if count == 0 {
            return Err(Error::InvalidShape(
                "a batch holds at least one image (count 0 given)".into(),
            ));
        }
        let memory = memory.into();
        let mut last = None;
        for &m in memory.order() {
            let layout = if m == Memory::Dma {
                ImageLayout::with_row_alignment(width, height, format, T::DTYPE, DMA_ROW_ALIGNMENT)?
            } else {
                ImageLayout::tight(width, height, format, T::DTYPE)?
            };
            if layout.buffer_count() != 1 {
                return Err(Error::InvalidLayout(format!(
                    "{format} spans {} buffers; a batch holds images of one buffer each",
                    layout.buffer_count()
                )));
            }
            let slice_bytes = layout.allocation_len(0);
            let bytes = slice_bytes
                .checked_mul(count)
                .filter(|&b| b <= isize::MAX as usize)
                .ok_or_else(|| {
                    Error::InvalidShape(format!(
                        "a batch of {count} {width}x{height} {format} images overflows"
                    ))
                })?;
            match allocate_all(&[bytes], MemoryRequest::Only(m)) {
                Ok(mut a) => {
                    let a = a.remove(0);
                    if let Some(e) = last {
                        log::debug!("{memory} batch tensor fell back to {m}: {e}");
                    }
                    let mut shape = vec![count];
                    shape.extend(layout.shape());
                    return Ok(Tensor {
                        memory: a.storage.memory(),
                        buffers: vec![a.storage],
                        extents: vec![bytes],
                        shape,
                        layout: Some(layout),
                        batch: Some(Batch { count, slice_bytes }),
                        dma_route: a.route,
                        _element: PhantomData,
                    });
                }
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| Error::InvalidArgument("no memory kind".into())))
    }

    /// How many images the tensor holds: `count` for a batch from
    /// [`image_batch`](Tensor::image_batch), else 1.
    pub fn batch_len(&self) -> usize {
        self.batch.map_or(1, |b| b.count)
    }

    /// The layout of image `index` of a batch (offsets in the tensor's one buffer); for a
    /// single image, index 0 is its layout. An error for a tensor without a layout or an
    /// index past the batch.
    pub fn slice_layout(&self, index: usize) -> Result<ImageLayout> {
        let layout = self
            .layout
            .ok_or_else(|| Error::InvalidArgument("the tensor has no image layout".into()))?;
        if index >= self.batch_len() {
            return Err(Error::InvalidArgument(format!(
                "slice {index} of a batch of {}",
                self.batch_len()
            )));
        }
        let Some(batch) = self.batch else {
            return Ok(layout);
        };
        let shift = index * batch.slice_bytes;
        let planes: Vec<Plane> = layout
            .planes()
            .iter()
            .map(|p| Plane {
                offset: p.offset + shift,
                ..*p
            })
            .collect();
        Ok(ImageLayout::with_planes(
            layout.width(),
            layout.height(),
            layout.format(),
            layout.dtype(),
            &planes,
        )?
        .with_modifier(layout.modifier())
        .with_colorimetry(layout.colorimetry()))
    }

    /// Bytes from one slice of a batch to the next (for a single image, its buffer's
    /// length), for code that addresses the slices itself.
    pub fn slice_bytes(&self) -> usize {
        self.batch.map_or(self.extents[0], |b| b.slice_bytes)
    }

    /// Imports a dma-buf or memfd holding one image. The fd is duplicated (the caller
    /// keeps its own), recognised as a dma-buf or a memfd, and its size (`lseek(SEEK_END)`
    /// for dma-bufs) checked against the layout. A memfd must carry `F_SEAL_SHRINK`
    /// (else [`Error::ImportRefused`]): a buffer truncated under a live mapping would turn
    /// every access past the new end into a `SIGBUS`. Dma-bufs cannot change size. Anything
    /// else is an error.
    ///
    /// # Safety
    ///
    /// An imported buffer has other holders pinframe cannot see: the exporter, devices
    /// (a camera, a GPU), other processes, other tensors imported from the same fd. The
    /// tensor's CPU views are Rust slices, so the caller promises Rust's aliasing rule for
    /// them, as for a `memmap2::Mmap` of a file:
    ///
    /// - while a read view is alive (a [`MapGuard`] from [`map`](Tensor::map), or a slice
    ///   from [`HostPin::as_slice`] over this tensor), nobody else writes the bytes it
    ///   covers;
    /// - while a [`MapGuardMut`] from [`map_mut`](Tensor::map_mut) is alive, nobody else
    ///   reads or writes them.
    ///
    /// Writes by others between views are fine: that is the normal hand-over (a camera
    /// fills the buffer while it is queued, a GPU renders into it, then the CPU maps it;
    /// on dma-bufs the views' syncs keep caches right). Every element type accepts any bit
    /// pattern, so a broken promise yields no invalid value, but views whose bytes change
    /// under them are still undefined behaviour (the compiler may assume they do not). A
    /// caller that cannot promise this must not take views: it reads through a pin's raw
    /// address ([`HostPin::as_ptr`]) with its own synchronisation.
    pub unsafe fn import(fd: impl AsFd, layout: ImageLayout) -> Result<Self> {
        // SAFETY: the caller's contract, forwarded unchanged.
        unsafe { Self::import_planes(&[fd.as_fd()], layout) }
    }

    /// Imports an image whose planes live in several buffers (`Plane::buffer` indexes `fds`),
    /// e.g. V4L2's NV12M. All fds must be of the same kind, and memfds must carry
    /// `F_SEAL_SHRINK` (see [`import`](Tensor::import)).
    ///
    /// # Safety
    ///
    /// As for [`import`](Tensor::import), for every buffer.
    pub unsafe fn import_planes(fds: &[BorrowedFd<'_>], layout: ImageLayout) -> Result<Self> {
        check_dtype::<T>(&layout)?;
        if fds.len() != layout.buffer_count() {
            return Err(Error::InvalidLayout(format!(
                "layout spans {} buffer(s), {} fd(s) given",
                layout.buffer_count(),
                fds.len()
            )));
        }
        let mut owned = Vec::with_capacity(fds.len());
        for fd in fds {
            owned.push(dup_buffer_fd(*fd)?);
        }
        let memory = owned[0].1;
        if owned.iter().any(|o| o.1 != memory) {
            return Err(Error::InvalidFd(
                "the buffers of one image must all be dma-bufs or all memfds".into(),
            ));
        }
        let sizes: Vec<usize> = owned.iter().map(|o| o.2).collect();
        layout.validate_buffers(&sizes)?;
        let buffers: Vec<_> = owned
            .into_iter()
            .map(|(fd, memory, size)| Arc::new(BufferStorage::from_fd(fd, size, memory, None)))
            .collect();
        let extents = (0..layout.buffer_count())
            .map(|b| layout.required_len(b))
            .collect();
        Ok(Tensor {
            buffers,
            extents,
            shape: layout.shape(),
            layout: Some(layout),
            batch: None,
            memory,
            dma_route: None,
            _element: PhantomData,
        })
    }

    /// The shape.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// Number of elements in the shape.
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    /// Always false: tensors have at least one element.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Where the bytes live.
    pub fn memory(&self) -> Memory {
        self.memory
    }

    /// For self-allocated DMA tensors, the route that allocated them.
    pub fn dma_route(&self) -> Option<&DmaRoute> {
        self.dma_route.as_ref()
    }

    /// The image layout, for image tensors.
    pub fn layout(&self) -> Option<&ImageLayout> {
        self.layout.as_ref()
    }

    /// Describes the tensor's buffer(s) as the image `layout`, validated against the
    /// buffer sizes. The shape is unchanged: the layout can address a region of the
    /// tensor, such as one tile of a batch. A batch tensor becomes one image (the
    /// layout's) for conversions: [`batch_len`](Tensor::batch_len) is 1 afterwards.
    pub fn set_layout(&mut self, layout: ImageLayout) -> Result<()> {
        check_dtype::<T>(&layout)?;
        let sizes: Vec<usize> = self.buffers.iter().map(|b| b.len()).collect();
        layout.validate_buffers(&sizes)?;
        for (b, extent) in self.extents.iter_mut().enumerate() {
            *extent = (*extent).max(layout.required_len(b));
        }
        self.layout = Some(layout);
        self.batch = None;
        Ok(())
    }

    /// The fd of the (first) buffer, for memfd and dma-buf tensors.
    pub fn fd(&self) -> Option<BorrowedFd<'_>> {
        self.buffers[0].fd()
    }

    /// The fd of buffer `index` of a multi-buffer image.
    pub fn buffer_fd(&self, index: usize) -> Option<BorrowedFd<'_>> {
        self.buffers.get(index).and_then(|b| b.fd())
    }

    /// A token alive exactly as long as buffer `index`'s memory (held by this tensor and
    /// any pin over it). Caches keyed by buffer identity (the GL backend's EGL images) use
    /// it to drop their entries together with the tensor.
    #[cfg_attr(not(feature = "gl"), allow(dead_code))]
    pub(crate) fn buffer_token(
        &self,
        index: usize,
    ) -> Option<std::sync::Weak<dyn std::any::Any + Send + Sync>> {
        let weak: std::sync::Weak<dyn std::any::Any + Send + Sync> =
            Arc::downgrade(self.buffers.get(index)?) as _;
        Some(weak)
    }

    /// Number of buffers (more than one only for multi-buffer images).
    pub fn buffer_count(&self) -> usize {
        self.buffers.len()
    }

    /// Size in bytes of buffer `index` (the whole allocation, not only the data).
    pub fn buffer_len(&self, index: usize) -> Option<usize> {
        self.buffers.get(index).map(|b| b.len())
    }

    /// Maps the tensor for reading. On dma-bufs the guard issues `DMA_BUF_IOCTL_SYNC`
    /// START|READ now and END|READ when it drops.
    pub fn map(&self) -> Result<MapGuard<'_, T>> {
        let view = self.begin_cpu_access(Access::Read, false)?;
        Ok(MapGuard { tensor: self, view })
    }

    /// Maps the tensor for writing. On dma-bufs the guard issues START|READ|WRITE now and
    /// END|READ|WRITE when it drops: a `&mut [T]` can be read as well as written, so the
    /// CPU cache must be valid at the start and flushed at the end.
    ///
    /// The guard also holds the write side of the tensor's access lock: it waits while a
    /// runtime reads the tensor through a pin ([`HostPin::lock_read`], taken by
    /// `runtime::litert::CompiledModel::run`, feature `litert`, for every bound
    /// input), and such reads wait for the guard to drop. A thread that holds a read of
    /// its own gets [`Error::InvalidArgument`] instead of waiting for itself.
    pub fn map_mut(&mut self) -> Result<MapGuardMut<'_, T>> {
        let write = self.write_hold()?;
        let view = self.begin_cpu_access(Access::ReadWrite, true)?;
        Ok(MapGuardMut {
            tensor: self,
            view,
            _write: write,
        })
    }

    /// The first bytes `self` and `other` both address, when they do: two tensors over one
    /// dma-buf or memfd (imported twice) whose planes intersect, each plane counted from
    /// its first byte to the end of its last row. Two tensors over one mapping (the same
    /// storage) overlap whatever their planes: a shared and a mutable slice of one mapping
    /// may not coexist. A conversion refuses such a source and destination (it would read
    /// what it is writing); disjoint regions of one file convert.
    pub(crate) fn overlap_with<U: Element>(&self, other: &Tensor<U>) -> Option<Overlap> {
        let extents = |buffers: &[Arc<BufferStorage>], layout: Option<&ImageLayout>| {
            let mut out = [(0usize, 0usize, 0usize); MAX_BUFFERS + 1];
            let mut n = 0;
            match layout {
                Some(l) => {
                    for (i, p) in l.planes().iter().enumerate() {
                        out[n] = (p.buffer, p.offset, l.plane_end(i));
                        n += 1;
                    }
                }
                None => {
                    for (i, b) in buffers.iter().enumerate() {
                        out[n] = (i, 0, b.len());
                        n += 1;
                    }
                }
            }
            (out, n)
        };
        // A batch addresses its whole buffer, not only slice 0.
        let (mine, m) = extents(
            &self.buffers,
            self.layout().filter(|_| self.batch.is_none()),
        );
        let (theirs, t) = extents(
            &other.buffers,
            other.layout().filter(|_| other.batch.is_none()),
        );
        for &(i, start, end) in &mine[..m] {
            for &(j, other_start, other_end) in &theirs[..t] {
                let (a, b) = (&self.buffers[i], &other.buffers[j]);
                let same_file = a.identity() == b.identity();
                if Arc::ptr_eq(a, b) || (same_file && start < other_end && other_start < end) {
                    return Some(Overlap {
                        buffer: i,
                        bytes: start..end,
                        other_buffer: j,
                        other_bytes: other_start..other_end,
                    });
                }
            }
        }
        None
    }

    /// Takes the write side of every buffer's access lock (in buffer order, as every
    /// writer does), for writers that do not map the tensor (the GL backend rendering into
    /// an imported dma-buf). Holds `Arc`s, not a borrow, so the tensor stays usable
    /// through `&mut` while the hold lives.
    pub(crate) fn write_hold(&self) -> Result<WriteHold> {
        let mut hold = WriteHold {
            buffers: [None, None, None],
        };
        for (slot, b) in hold.buffers.iter_mut().zip(&self.buffers) {
            b.access().enter_write()?;
            *slot = Some(b.clone());
        }
        Ok(hold)
    }

    fn begin_cpu_access(&self, access: Access, write: bool) -> Result<MappedView> {
        let shared = cpu_mapping_shared();
        let mut ptrs = [None; MAX_BUFFERS];
        for (i, b) in self.buffers.iter().enumerate() {
            if write && !b.cpu_writable(&shared)? {
                return Err(Error::InvalidArgument(
                    "tensor is read-only (imported from a read-only fd or a write-sealed memfd)"
                        .into(),
                ));
            }
            ptrs[i] = Some(b.cpu_ptr(&shared)?);
        }
        for (i, b) in self.buffers.iter().enumerate() {
            if let Err(e) = b.sync(SyncPhase::Start, access) {
                for started in &self.buffers[..i] {
                    let _ = started.sync(SyncPhase::End, access);
                }
                return Err(e);
            }
        }
        Ok(MappedView { ptrs, access })
    }

    fn end_cpu_access(&self, access: Access) {
        for b in &self.buffers {
            if let Err(e) = b.sync(SyncPhase::End, access) {
                log::error!("ending CPU access to a dma-buf: {e}");
            }
        }
    }

    /// A stable host address for the tensor's data, valid until the last clone of the pin
    /// drops (even after the tensor drops). The window runs from the first byte to the end
    /// of the data (no pitch padding after the last row). Single-buffer tensors only.
    pub fn pin_host(&self) -> Result<HostPin<'static>> {
        if self.buffers.len() != 1 {
            return Err(Error::Unsupported(format!(
                "pin_host needs a single-buffer tensor; this image spans {} buffers",
                self.buffers.len()
            )));
        }
        HostPin::new(self.buffers[0].clone(), self.extents[0], T::DTYPE)
    }

    /// Starts a CPU access by a pin holder: on dma-bufs, `DMA_BUF_IOCTL_SYNC` START in the
    /// direction of `access` (invalidates stale CPU cache lines before reading). No-op on
    /// heap and memfd memory.
    pub fn sync_for_cpu(&self, access: Access) -> Result<()> {
        for b in &self.buffers {
            b.sync(SyncPhase::Start, access)?;
        }
        Ok(())
    }

    /// Ends a CPU access by a pin holder and hands the buffer back to devices: on dma-bufs,
    /// `DMA_BUF_IOCTL_SYNC` END in the direction of `access` (flushes CPU writes). No-op on
    /// heap and memfd memory.
    pub fn sync_for_device(&self, access: Access) -> Result<()> {
        for b in &self.buffers {
            b.sync(SyncPhase::End, access)?;
        }
        Ok(())
    }

    /// The memory of each buffer (a test hook: all equal to `memory()`).
    #[cfg(feature = "testing")]
    pub(crate) fn buffer_memories(&self) -> Vec<Memory> {
        self.buffers.iter().map(|b| b.memory()).collect()
    }

    /// Sync ioctls issued on buffer 0 so far, by phase and direction (a test hook).
    #[cfg(feature = "testing")]
    pub(crate) fn dma_sync_counts(&self) -> sync::SyncCounts {
        self.buffers[0].sync_counts()
    }

    /// Syncs asked of buffer 0 so far, issued or not (a test hook).
    #[cfg(feature = "testing")]
    pub(crate) fn sync_requests(&self) -> sync::SyncCounts {
        self.buffers[0].sync_requests()
    }
}

fn check_dtype<T: Element>(layout: &ImageLayout) -> Result<()> {
    if layout.dtype() != T::DTYPE {
        return Err(Error::InvalidLayout(format!(
            "layout holds {} elements but the tensor's element type is {}",
            layout.dtype(),
            T::DTYPE
        )));
    }
    if layout.buffer_count() > MAX_BUFFERS {
        return Err(Error::InvalidLayout(format!(
            "layout spans {} buffers; at most {MAX_BUFFERS} are supported",
            layout.buffer_count()
        )));
    }
    Ok(())
}

/// At most one buffer per plane, and formats have at most three planes.
const MAX_BUFFERS: usize = 3;

/// Addresses of a tensor's buffers during one CPU access (kept in an array: mapping
/// allocates nothing).
struct MappedView {
    ptrs: [Option<NonNull<u8>>; MAX_BUFFERS],
    access: Access,
}

impl MappedView {
    fn bytes(&self, buffer: usize, len: usize) -> &[u8] {
        let p = self.ptrs[buffer].expect("buffer index checked by caller");
        // SAFETY: p is the CPU address of a live buffer (the guard borrows the tensor, whose
        // Arc keeps it alive) and len is at most the buffer's size (extents are validated
        // against buffer sizes; the buffer cannot shrink: dma-bufs have a fixed size and
        // memfds are shrink-sealed, ours at creation, imported ones checked by import).
        // Writers through this tensor need `&mut Tensor` (map_mut), so none exists while
        // this shared guard lives; pin holders writing concurrently break HostPin's
        // contract, and other holders of an imported buffer break `Tensor::import`'s.
        unsafe { std::slice::from_raw_parts(p.as_ptr(), len) }
    }

    fn bytes_mut(&mut self, buffer: usize, len: usize) -> &mut [u8] {
        let p = self.ptrs[buffer].expect("buffer index checked by caller");
        // SAFETY: as in `bytes`, and the mut guard holds `&mut Tensor`, so this is the only
        // guard; `&mut self` ties the slice to one borrow of the guard.
        unsafe { std::slice::from_raw_parts_mut(p.as_ptr(), len) }
    }
}

/// A read mapping of a tensor; derefs to the elements of its (first) buffer, from byte 0 to
/// the end of the data. Dropping it ends the CPU access (sync END on dma-bufs).
pub struct MapGuard<'a, T: Element> {
    tensor: &'a Tensor<T>,
    view: MappedView,
}

impl<T: Element> MapGuard<'_, T> {
    /// The bytes of buffer `index` (for a multi-buffer image: where its planes live).
    pub fn buffer_bytes(&self, index: usize) -> &[u8] {
        assert!(
            index < self.tensor.buffers.len(),
            "buffer index out of range"
        );
        self.view.bytes(index, self.tensor.extents[index])
    }

    /// All of the first buffer's data as bytes.
    pub fn as_bytes(&self) -> &[u8] {
        self.buffer_bytes(0)
    }
}

impl<T: Element> Deref for MapGuard<'_, T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        let bytes = self.view.bytes(0, self.tensor.extents[0]);
        // Extents and buffer addresses are multiples of T's size and alignment (layouts
        // check offsets/strides, mappings are page aligned, heap is 64-byte aligned).
        bytemuck::cast_slice(bytes)
    }
}

impl<T: Element> Drop for MapGuard<'_, T> {
    fn drop(&mut self) {
        self.tensor.end_cpu_access(self.view.access);
    }
}

/// A write mapping of a tensor; derefs mutably to the elements of its (first) buffer.
/// Dropping it ends the CPU access (sync END on dma-bufs, flushing the writes).
pub struct MapGuardMut<'a, T: Element> {
    tensor: &'a mut Tensor<T>,
    view: MappedView,
    /// Declared after `view`: released after the CPU access ends (`Drop` below).
    _write: WriteHold,
}

/// Bytes two tensors both address (see [`Tensor::overlap_with`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Overlap {
    /// The first tensor's buffer index and its bytes there.
    pub(crate) buffer: usize,
    pub(crate) bytes: std::ops::Range<usize>,
    /// The second tensor's buffer index and its bytes there.
    pub(crate) other_buffer: usize,
    pub(crate) other_bytes: std::ops::Range<usize>,
}

/// The write side of a tensor's access lock, on each of its buffers; released on drop.
pub(crate) struct WriteHold {
    buffers: [Option<Arc<BufferStorage>>; MAX_BUFFERS],
}

impl Drop for WriteHold {
    fn drop(&mut self) {
        for b in self.buffers.iter().flatten() {
            b.access().exit_write();
        }
    }
}

impl<T: Element> MapGuardMut<'_, T> {
    /// The bytes of buffer `index`.
    pub fn buffer_bytes(&self, index: usize) -> &[u8] {
        assert!(
            index < self.tensor.buffers.len(),
            "buffer index out of range"
        );
        self.view.bytes(index, self.tensor.extents[index])
    }

    /// The bytes of buffer `index`, writable.
    pub fn buffer_bytes_mut(&mut self, index: usize) -> &mut [u8] {
        assert!(
            index < self.tensor.buffers.len(),
            "buffer index out of range"
        );
        let len = self.tensor.extents[index];
        self.view.bytes_mut(index, len)
    }

    /// All of the first buffer's data as bytes.
    pub fn as_bytes(&self) -> &[u8] {
        self.buffer_bytes(0)
    }

    /// All of the first buffer's data as writable bytes.
    pub fn as_bytes_mut(&mut self) -> &mut [u8] {
        self.buffer_bytes_mut(0)
    }
}

impl<T: Element> Deref for MapGuardMut<'_, T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        bytemuck::cast_slice(self.view.bytes(0, self.tensor.extents[0]))
    }
}

impl<T: Element> DerefMut for MapGuardMut<'_, T> {
    fn deref_mut(&mut self) -> &mut [T] {
        let len = self.tensor.extents[0];
        bytemuck::cast_slice_mut(self.view.bytes_mut(0, len))
    }
}

impl<T: Element> Drop for MapGuardMut<'_, T> {
    fn drop(&mut self) {
        self.tensor.end_cpu_access(self.view.access);
    }
}

impl<T: Element> fmt::Debug for Tensor<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Tensor");
        d.field("dtype", &T::DTYPE)
            .field("shape", &self.shape)
            .field("memory", &self.memory);
        if let Some(l) = &self.layout {
            d.field("layout", l);
        }
        if let Some(b) = &self.batch {
            d.field("batch", &b.count);
        }
        if let Some(r) = &self.dma_route {
            d.field("dma_route", r);
        }
        d.finish()
    }
}
