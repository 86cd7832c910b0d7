//! pinframe tensors behind GStreamer buffers: allocation (a dma-buf when the platform has
//! one, else a memfd), wrapping as `GstMemory` without a copy, and the tensors each memory
//! carries (its qdata) so a buffer finds its tensor again frame after frame.

use std::os::fd::{AsRawFd, BorrowedFd, IntoRawFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use gst_allocators::prelude::*;
use pinframe::{DType, Element, ImageLayout, Memory, Tensor};

use crate::qdata::Key;
use crate::settings::MemoryChoice;

/// A tensor of one of the element types pinframe writes.
#[derive(Debug)]
pub(crate) enum AnyTensor {
    U8(Tensor<u8>),
    I8(Tensor<i8>),
    F16(Tensor<half::f16>),
    F32(Tensor<f32>),
}

/// Runs `$body` with `$t` bound to the typed tensor inside an [`AnyTensor`].
macro_rules! with_tensor {
    ($any:expr, $t:ident => $body:expr) => {
        match $any {
            $crate::buffers::AnyTensor::U8($t) => $body,
            $crate::buffers::AnyTensor::I8($t) => $body,
            $crate::buffers::AnyTensor::F16($t) => $body,
            $crate::buffers::AnyTensor::F32($t) => $body,
        }
    };
}
pub(crate) use with_tensor;

impl AnyTensor {
    pub(crate) fn memory(&self) -> Memory {
        with_tensor!(self, t => t.memory())
    }
    pub(crate) fn fd(&self) -> Option<BorrowedFd<'_>> {
        with_tensor!(self, t => t.fd())
    }
}

/// Where one pool allocates.
#[derive(Clone, Debug)]
pub(crate) struct Placement {
    /// The property's choice.
    pub(crate) memory: MemoryChoice,
    /// The caps say `memory:DMABuf`: a memfd will not do.
    pub(crate) require_dma: bool,
    /// Bytes allocated for tensors through this placement (the element's stats:
    /// `allocated-bytes`), probes included.
    pub(crate) allocated: Arc<AtomicU64>,
}

fn allocate_typed<T: Element>(
    layout: &ImageLayout,
    place: &Placement,
) -> pinframe::Result<Tensor<T>> {
    match &place.memory {
        MemoryChoice::Dma(route) => {
            let elems = layout.allocation_len(0).div_ceil(size_of::<T>());
            let mut t = Tensor::<T>::new_dma_via(&[elems], route)?;
            t.set_layout(*layout)?;
            Ok(t)
        }
        MemoryChoice::System if place.require_dma => Err(pinframe::Error::InvalidArgument(
            "the caps ask for memory:DMABuf but dma-route=system".into(),
        )),
        MemoryChoice::System => Tensor::with_layout(*layout, Some(Memory::Shm)),
        MemoryChoice::Auto if place.require_dma => Tensor::with_layout(*layout, Some(Memory::Dma)),
        MemoryChoice::Auto => Tensor::with_layout(*layout, Some(Memory::Dma)).or_else(|e| {
            log::debug!("pinframeconvert: no dma-buf ({e}); pool buffers are memfds");
            Tensor::with_layout(*layout, Some(Memory::Shm))
        }),
    }
}

/// A tensor for one pool buffer, laid out as `layout` (one buffer).
pub(crate) fn allocate(layout: &ImageLayout, place: &Placement) -> pinframe::Result<AnyTensor> {
    let t = allocate_any(layout, place)?;
    place
        .allocated
        .fetch_add(layout.allocation_len(0) as u64, Ordering::Relaxed);
    Ok(t)
}

/// A batch tensor of `count` slices laid out as `slice` (tight, what NNStreamer's
/// static tensors are) for one pool buffer: `Tensor::image_batch` as a dma-buf through the
/// library's default route when the placement allows it and its slices come out tight
/// (rows that are a whole number of its DMA row alignment), else memfds.
pub(crate) fn allocate_batch(
    slice: &ImageLayout,
    count: usize,
    place: &Placement,
) -> pinframe::Result<AnyTensor> {
    fn typed<T: Element>(
        slice: &ImageLayout,
        count: usize,
        place: &Placement,
    ) -> pinframe::Result<Tensor<T>> {
        let make = |memory: Memory| {
            Tensor::<T>::image_batch(count, slice.width(), slice.height(), slice.format(), memory)
        };
        match &place.memory {
            MemoryChoice::Dma(_) => Err(pinframe::Error::InvalidArgument(
                "batch tensors take dma-route=auto or system".into(),
            )),
            MemoryChoice::System => make(Memory::Shm),
            MemoryChoice::Auto => match make(Memory::Dma) {
                Ok(t) if t.layout() == Some(slice) => Ok(t),
                Ok(_) => {
                    log::debug!(
                        "pinframeconvert: a dma-buf batch pads its rows; batch buffers are memfds"
                    );
                    make(Memory::Shm)
                }
                Err(e) => {
                    log::debug!(
                        "pinframeconvert: no dma-buf batch ({e}); batch buffers are memfds"
                    );
                    make(Memory::Shm)
                }
            },
        }
    }
    let t = match slice.dtype() {
        DType::U8 => AnyTensor::U8(typed(slice, count, place)?),
        DType::I8 => AnyTensor::I8(typed(slice, count, place)?),
        DType::F16 => AnyTensor::F16(typed(slice, count, place)?),
        DType::F32 => AnyTensor::F32(typed(slice, count, place)?),
        other => {
            return Err(pinframe::Error::Unsupported(format!(
                "pinframeconvert writes u8, i8, f16 or f32, not {other}"
            )));
        }
    };
    let slice_layout = with_tensor!(&t, t => t.layout().copied());
    if slice_layout.as_ref() != Some(slice) {
        return Err(pinframe::Error::InvalidLayout(format!(
            "a batch tensor's slices are laid out as {slice_layout:?}, the caps need {slice:?}"
        )));
    }
    let bytes = with_tensor!(&t, t => t.slice_bytes() * t.batch_len());
    place.allocated.fetch_add(bytes as u64, Ordering::Relaxed);
    Ok(t)
}

fn allocate_any(layout: &ImageLayout, place: &Placement) -> pinframe::Result<AnyTensor> {
    Ok(match layout.dtype() {
        DType::U8 => AnyTensor::U8(allocate_typed(layout, place)?),
        DType::I8 => AnyTensor::I8(allocate_typed(layout, place)?),
        DType::F16 => AnyTensor::F16(allocate_typed(layout, place)?),
        DType::F32 => AnyTensor::F32(allocate_typed(layout, place)?),
        other => {
            return Err(pinframe::Error::Unsupported(format!(
                "pinframeconvert writes u8, i8, f16 or f32, not {other}"
            )));
        }
    })
}

/// Bytes of the allocation that [`probe`] makes: one page, never a frame.
pub(crate) const PROBE_BYTES: usize = 4096;

/// Checks, before a pool is configured, that `place` can be allocated at all, without
/// allocating a frame (with little CMA, a frame-sized probe can take the memory the pool
/// then needs): a one-page dma-buf through the same route when the placement needs
/// DMA, nothing otherwise (memfds and the memfd fallback do not fail for want of a
/// route). Returns the bytes it allocated (and freed again).
pub(crate) fn probe(place: &Placement) -> pinframe::Result<usize> {
    let n = probe_uncounted(place)?;
    place.allocated.fetch_add(n as u64, Ordering::Relaxed);
    Ok(n)
}

fn probe_uncounted(place: &Placement) -> pinframe::Result<usize> {
    match &place.memory {
        MemoryChoice::Dma(route) => {
            drop(Tensor::<u8>::new_dma_via(&[PROBE_BYTES], route)?);
            Ok(PROBE_BYTES)
        }
        MemoryChoice::System if place.require_dma => Err(pinframe::Error::InvalidArgument(
            "the caps ask for memory:DMABuf but dma-route=system".into(),
        )),
        MemoryChoice::Auto if place.require_dma => {
            drop(Tensor::<u8>::new(&[PROBE_BYTES], Some(Memory::Dma))?);
            Ok(PROBE_BYTES)
        }
        MemoryChoice::System | MemoryChoice::Auto => Ok(0),
    }
}

/// The allocators that wrap tensors' fds as GStreamer memory.
#[derive(Debug, Clone)]
pub(crate) struct Allocators {
    dmabuf: gst_allocators::DmaBufAllocator,
    fd: gst_allocators::FdAllocator,
}

impl Allocators {
    pub(crate) fn new() -> Allocators {
        Allocators {
            dmabuf: gst_allocators::DmaBufAllocator::new(),
            fd: gst_allocators::FdAllocator::new(),
        }
    }

    /// The first `len` bytes of `tensor`'s buffer as GStreamer memory (dma-buf memory for
    /// a dma-buf, fd memory for a memfd), over a duplicate of its fd: no copy, and the
    /// mapping is kept between maps, so the address downstream sees is stable.
    pub(crate) fn wrap(&self, tensor: &AnyTensor, len: usize) -> Result<gst::Memory, String> {
        let fd = tensor
            .fd()
            .ok_or_else(|| "a pool tensor has no fd".to_string())?;
        let owned = fd
            .try_clone_to_owned()
            .map_err(|e| format!("duplicating fd {}: {e}", fd.as_raw_fd()))?;
        let flags = gst_allocators::FdMemoryFlags::KEEP_MAPPED;
        let raw = owned.into_raw_fd();
        // SAFETY: `raw` is an open fd this call owns (just duplicated); the allocator takes
        // ownership and closes it when the memory is freed. `len` is at most the buffer's
        // size (the layout was validated against it when the tensor was made).
        let mem = unsafe {
            match tensor.memory() {
                Memory::Dma => self.dmabuf.alloc_dmabuf_with_flags(raw, len, flags),
                _ => self.fd.alloc_fd(raw, len, flags),
            }
        };
        mem.map_err(|e| {
            // SAFETY: the allocator failed, so it did not take the fd: close it here.
            drop(unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(raw) });
            format!("wrapping a pool tensor as GStreamer memory: {e}")
        })
    }
}

/// An output buffer's tensor (qdata of its memory).
pub(crate) static OUTPUT: Key<Mutex<AnyTensor>> = Key::new("output-tensor");

/// The tensors a source memory was imported as (qdata of the memory holding plane 0).
pub(crate) static SOURCE: Key<SourceImports> = Key::new("source-imports");

/// The imports of one source memory: usually one, more only if the layout changed.
#[derive(Default)]
pub(crate) struct SourceImports {
    entries: Mutex<Vec<SourceEntry>>,
}

struct SourceEntry {
    layout: ImageLayout,
    /// `(st_dev, st_ino)` of the fds of buffers 1.. (the memory itself is buffer 0).
    others: Vec<(u64, u64)>,
    tensor: Arc<Tensor<u8>>,
}

/// Imports kept per memory when a layout changes (renegotiation) before the oldest goes.
const IMPORTS_PER_MEMORY: usize = 4;

/// The identity of the buffer behind `fd` (what the library's caches key on).
pub(crate) fn identity(fd: BorrowedFd<'_>) -> Result<(u64, u64), String> {
    let st =
        nix::sys::stat::fstat(fd.as_raw_fd()).map_err(|e| format!("fstat of a dma-buf: {e}"))?;
    Ok((st.st_dev as u64, st.st_ino as u64))
}

impl SourceImports {
    /// A cache holding `tensor` (a pool buffer we allocated ourselves).
    pub(crate) fn with(layout: ImageLayout, tensor: Tensor<u8>) -> SourceImports {
        SourceImports {
            entries: Mutex::new(vec![SourceEntry {
                layout,
                others: Vec::new(),
                tensor: Arc::new(tensor),
            }]),
        }
    }

    /// The tensor imported for `layout` over `fds`, importing it now if there is none.
    /// `Ok((tensor, true))` when it was imported by this call.
    pub(crate) fn get_or_import(
        &self,
        layout: &ImageLayout,
        fds: &[BorrowedFd<'_>],
    ) -> Result<(Arc<Tensor<u8>>, bool), String> {
        let others = fds[1..]
            .iter()
            .map(|fd| identity(*fd))
            .collect::<Result<Vec<_>, _>>()?;
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(e) = entries
            .iter()
            .find(|e| e.layout == *layout && e.others == others)
        {
            return Ok((e.tensor.clone(), false));
        }
        // SAFETY: the element takes CPU views of a source tensor only inside
        // `convert_frame`, while it holds the input buffer that owns these memories; by
        // GStreamer's ownership rules nobody writes a buffer (or memory) another element
        // holds a reference to, and a pool refills a memory (a camera capturing into it)
        // only once every buffer over it was returned. The GL backend takes no CPU view.
        let tensor = Arc::new(
            unsafe { Tensor::<u8>::import_planes(fds, *layout) }.map_err(|e| e.to_string())?,
        );
        if entries.len() >= IMPORTS_PER_MEMORY {
            entries.remove(0);
        }
        entries.push(SourceEntry {
            layout: *layout,
            others,
            tensor: tensor.clone(),
        });
        Ok((tensor, true))
    }
}
