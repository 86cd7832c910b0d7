//! One buffer behind a tensor, shared (through `Arc`) by the tensor and its pins.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::{Mutex, OnceLock};

use super::access::AccessLock;
use super::dma::PrimeAttachment;
use super::heap::HeapBuffer;
use super::pin::{CpuMappingShared, MmapOwner};
#[cfg(feature = "testing")]
use super::sync::SyncCounts;
use super::sync::{SyncCounters, SyncPhase, dma_buf_sync};
use super::{Access, Memory};
use crate::{Error, Result};

/// What holds the bytes.
enum Backing {
    Heap(HeapBuffer),
    Fd {
        fd: OwnedFd,
        /// Created on first CPU access, kept until the storage drops (unmapped once).
        mapping: OnceLock<MmapOwner>,
        map_lock: Mutex<()>,
        /// Declared after `mapping` so it is released after the CPU mapping.
        _attachment: Option<PrimeAttachment>,
    },
}

/// A buffer: heap memory, a memfd or a dma-buf, with its lazily made CPU mapping.
pub(crate) struct BufferStorage {
    backing: Backing,
    len: usize,
    memory: Memory,
    /// Every sync asked of this buffer (by map guards and pin holders), no-ops included.
    requests: SyncCounters,
    /// The `DMA_BUF_IOCTL_SYNC`s actually issued.
    syncs: SyncCounters,
    /// Readers through pins against writers through the tensor (see `access.rs`).
    access: AccessLock,
    /// [`identity`](Self::identity), found once: a file's inode never changes, and every
    /// conversion asks (one `fstat` per buffer per frame otherwise).
    identity: OnceLock<(u64, u64)>,
}

impl BufferStorage {
    pub(crate) fn heap(len: usize) -> Result<Self> {
        Ok(BufferStorage {
            backing: Backing::Heap(HeapBuffer::new(len)?),
            len,
            memory: Memory::Heap,
            requests: SyncCounters::default(),
            syncs: SyncCounters::default(),
            access: AccessLock::default(),
            identity: OnceLock::new(),
        })
    }

    /// A buffer over an fd of `len` bytes: `memory` is `Shm` for memfds, `Dma` for dma-bufs.
    pub(crate) fn from_fd(
        fd: OwnedFd,
        len: usize,
        memory: Memory,
        attachment: Option<PrimeAttachment>,
    ) -> Self {
        BufferStorage {
            backing: Backing::Fd {
                fd,
                mapping: OnceLock::new(),
                map_lock: Mutex::new(()),
                _attachment: attachment,
            },
            len,
            memory,
            requests: SyncCounters::default(),
            syncs: SyncCounters::default(),
            access: AccessLock::default(),
            identity: OnceLock::new(),
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// What the buffer is, whoever holds it: the file's `(st_dev, st_ino)` for fds (two
    /// imports of one dma-buf or memfd are the same buffer), the address for heap memory.
    pub(crate) fn identity(&self) -> (u64, u64) {
        *self.identity.get_or_init(|| match &self.backing {
            Backing::Heap(h) => (u64::MAX, h.ptr().as_ptr() as u64),
            Backing::Fd { fd, .. } => match nix::sys::stat::fstat(fd.as_raw_fd()) {
                Ok(st) => (st.st_dev, st.st_ino),
                // An fd that cannot be stat'ed is unlike every other (its own address).
                Err(_) => (u64::MAX - 1, fd as *const OwnedFd as u64),
            },
        })
    }

    /// The lock pin readers and tensor writers of this buffer take.
    pub(crate) fn access(&self) -> &AccessLock {
        &self.access
    }

    pub(crate) fn memory(&self) -> Memory {
        self.memory
    }

    pub(crate) fn fd(&self) -> Option<BorrowedFd<'_>> {
        match &self.backing {
            Backing::Heap(_) => None,
            Backing::Fd { fd, .. } => Some(fd.as_fd()),
        }
    }

    /// The CPU address of the buffer, mapping it on first use; `shared` proves the caller
    /// holds the shared side of the CPU-mapping guard.
    pub(crate) fn cpu_ptr(&self, shared: &CpuMappingShared) -> Result<NonNull<u8>> {
        match &self.backing {
            Backing::Heap(h) => Ok(h.ptr()),
            Backing::Fd {
                fd,
                mapping,
                map_lock,
                ..
            } => {
                if let Some(m) = mapping.get() {
                    return Ok(ptr_of(m));
                }
                let _one_mapper = map_lock.lock().unwrap_or_else(|e| e.into_inner());
                if let Some(m) = mapping.get() {
                    return Ok(ptr_of(m));
                }
                let m = MmapOwner::map(fd.as_fd(), self.len, shared)?;
                let p = ptr_of(&m);
                // Cannot already be set: we hold map_lock and checked above.
                let _ = mapping.set(m);
                Ok(p)
            }
        }
    }

    /// True if the CPU may write the buffer (maps it if needed).
    pub(crate) fn cpu_writable(&self, shared: &CpuMappingShared) -> Result<bool> {
        self.cpu_ptr(shared)?;
        Ok(match &self.backing {
            Backing::Heap(_) => true,
            Backing::Fd { mapping, .. } => mapping.get().is_some_and(MmapOwner::writable),
        })
    }

    /// Opens or closes a CPU access: `DMA_BUF_IOCTL_SYNC` on dma-bufs, nothing otherwise
    /// (heap and memfd memory are always coherent for the CPU).
    pub(crate) fn sync(&self, phase: SyncPhase, access: Access) -> Result<()> {
        self.requests.record(phase, access);
        if self.memory != Memory::Dma {
            return Ok(());
        }
        let fd = self
            .fd()
            .ok_or_else(|| Error::InvalidFd("dma-buf storage without an fd".into()))?;
        dma_buf_sync(fd, phase, access)?;
        self.syncs.record(phase, access);
        Ok(())
    }

    #[cfg(feature = "testing")]
    pub(crate) fn sync_counts(&self) -> SyncCounts {
        self.syncs.snapshot()
    }

    #[cfg(feature = "testing")]
    pub(crate) fn sync_requests(&self) -> SyncCounts {
        self.requests.snapshot()
    }
}

fn ptr_of(m: &MmapOwner) -> NonNull<u8> {
    // A live mapping's address is never null.
    NonNull::new(m.as_ptr()).expect("mapping at null")
}
