//! Heap memory: a zeroed allocation aligned for SIMD and DMA-friendly access.

use std::alloc::Layout;
use std::ptr::NonNull;

use crate::{Error, Result};

/// Alignment of every heap tensor: a cache line, and enough for any SIMD load.
pub const HEAP_ALIGNMENT: usize = 64;

/// An owned, zeroed, 64-byte-aligned allocation.
pub(crate) struct HeapBuffer {
    ptr: NonNull<u8>,
    layout: Layout,
}

// SAFETY: a plain owned allocation with no thread affinity.
unsafe impl Send for HeapBuffer {}
// SAFETY: `&HeapBuffer` only exposes the address; access goes through tensor guards/pins.
unsafe impl Sync for HeapBuffer {}

impl HeapBuffer {
    pub(crate) fn new(len: usize) -> Result<Self> {
        let layout = Layout::from_size_align(len.max(1), HEAP_ALIGNMENT).map_err(|_| {
            Error::InvalidShape(format!("{len} bytes is too large for one allocation"))
        })?;
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(ptr).ok_or_else(|| {
            Error::io(
                format!("allocating {len} bytes"),
                std::io::Error::from(std::io::ErrorKind::OutOfMemory),
            )
        })?;
        Ok(HeapBuffer { ptr, layout })
    }

    pub(crate) fn ptr(&self) -> NonNull<u8> {
        self.ptr
    }
}

impl Drop for HeapBuffer {
    fn drop(&mut self) {
        // SAFETY: ptr was returned by alloc_zeroed with exactly this layout, freed once here.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
}
