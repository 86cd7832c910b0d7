//! `DMA_BUF_IOCTL_SYNC`: CPU cache maintenance brackets around CPU access to a dma-buf.

use std::os::fd::{AsRawFd, BorrowedFd};
use std::sync::atomic::{AtomicU64, Ordering};

use super::Access;
use crate::{Error, Result};

const DMA_BUF_SYNC_READ: u64 = 1 << 0;
const DMA_BUF_SYNC_WRITE: u64 = 1 << 1;
const DMA_BUF_SYNC_START: u64 = 0;
const DMA_BUF_SYNC_END: u64 = 1 << 2;

#[repr(C)]
struct DmaBufSync {
    flags: u64,
}

nix::ioctl_write_ptr!(dma_buf_ioctl_sync, b'b', 0, DmaBufSync);

/// Whether a sync opens (START) or closes (END) a CPU access.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SyncPhase {
    Start,
    End,
}

fn direction(access: Access) -> u64 {
    match access {
        Access::Read => DMA_BUF_SYNC_READ,
        Access::Write => DMA_BUF_SYNC_WRITE,
        Access::ReadWrite => DMA_BUF_SYNC_READ | DMA_BUF_SYNC_WRITE,
    }
}

/// Issues one `DMA_BUF_IOCTL_SYNC`, retrying on `EINTR`/`EAGAIN` as the kernel asks.
pub(crate) fn dma_buf_sync(fd: BorrowedFd<'_>, phase: SyncPhase, access: Access) -> Result<()> {
    let phase_flag = match phase {
        SyncPhase::Start => DMA_BUF_SYNC_START,
        SyncPhase::End => DMA_BUF_SYNC_END,
    };
    let arg = DmaBufSync {
        flags: phase_flag | direction(access),
    };
    loop {
        // SAFETY: `arg` is a valid dma_buf_sync struct that outlives the call; the fd is
        // borrowed for the duration of the call.
        match unsafe { dma_buf_ioctl_sync(fd.as_raw_fd(), &arg) } {
            Ok(_) => return Ok(()),
            Err(nix::errno::Errno::EINTR) | Err(nix::errno::Errno::EAGAIN) => continue,
            Err(e) => {
                return Err(Error::io(
                    format!("DMA_BUF_IOCTL_SYNC {phase:?} {access:?}"),
                    e.into(),
                ));
            }
        }
    }
}

/// How many syncs of a buffer (issued ioctls, or requests), by phase and direction.
#[cfg(feature = "testing")]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SyncCounts {
    /// START syncs for read access.
    pub start_read: u64,
    /// START syncs for write access.
    pub start_write: u64,
    /// START syncs for read-write access.
    pub start_read_write: u64,
    /// END syncs for read access.
    pub end_read: u64,
    /// END syncs for write access.
    pub end_write: u64,
    /// END syncs for read-write access.
    pub end_read_write: u64,
}

#[cfg(feature = "testing")]
impl SyncCounts {
    /// All START syncs.
    pub fn starts(&self) -> u64 {
        self.start_read + self.start_write + self.start_read_write
    }
    /// All END syncs.
    pub fn ends(&self) -> u64 {
        self.end_read + self.end_write + self.end_read_write
    }
}

/// Per-buffer counters of syncs, by phase and direction (test hooks: the VM lane checks
/// the directions of issued ioctls, the host that heap and memfd syncs are no-ops).
#[derive(Default)]
pub(crate) struct SyncCounters([AtomicU64; 6]);

impl SyncCounters {
    pub(crate) fn record(&self, phase: SyncPhase, access: Access) {
        let slot = match phase {
            SyncPhase::Start => 0,
            SyncPhase::End => 3,
        } + match access {
            Access::Read => 0,
            Access::Write => 1,
            Access::ReadWrite => 2,
        };
        self.0[slot].fetch_add(1, Ordering::Relaxed);
    }

    #[cfg(feature = "testing")]
    pub(crate) fn snapshot(&self) -> SyncCounts {
        let v = |i: usize| self.0[i].load(Ordering::Relaxed);
        SyncCounts {
            start_read: v(0),
            start_write: v(1),
            start_read_write: v(2),
            end_read: v(3),
            end_write: v(4),
            end_read_write: v(5),
        }
    }
}
