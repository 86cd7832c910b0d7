//! Test hooks: process-wide counters the test suites assert on (live CPU mappings, dma-buf
//! sync ioctls, EGL images). Not part of the supported API: compiled only with the
//! `testing` feature, which the crate's own tests turn on through a dev-dependency on
//! itself.

use crate::{Element, Tensor};

pub use crate::tensor::sync::SyncCounts;

pub use crate::tensor::pin::live_cpu_mappings;

pub use crate::tensor::guard::{cpu_mapping_guard_id, cpu_mapping_guard_waiters};

pub use crate::tensor::dma::{DmaProbeFailures, dma_probe_failures};

/// The memory of each of `tensor`'s buffers.
pub fn buffer_memories<T: Element>(tensor: &Tensor<T>) -> Vec<crate::Memory> {
    tensor.buffer_memories()
}

/// Syncs asked of `tensor`'s buffer 0 so far (by map guards, `sync_for_cpu`,
/// `sync_for_device`), by phase and direction, whether or not they issued an ioctl: on heap
/// and memfd memory every one is a no-op, so [`dma_sync_counts`] stays zero.
pub fn sync_requests<T: Element>(tensor: &Tensor<T>) -> SyncCounts {
    tensor.sync_requests()
}

/// Sync ioctls issued on `tensor`'s buffer 0 so far, by phase and direction.
pub fn dma_sync_counts<T: Element>(tensor: &Tensor<T>) -> SyncCounts {
    tensor.dma_sync_counts()
}

#[cfg(feature = "gl")]
pub use crate::gl::import::{GlImageCounters, gl_image_counters};
