//! Buffers: driver-allocated (MMAP, each exported once as a dma-buf) or pinframe's own DMA
//! tensors queued as DMABUF.

use std::os::fd::{AsFd, BorrowedFd};

use v4l::v4l_sys as sys;

use super::ioctl;
use crate::camera::pool::Slot;
use crate::camera::{CameraConfig, CaptureFormat};
use crate::tensor::{DmaRoute, Memory, Tensor};
use crate::{Error, Result};

/// `VIDIOC_REQBUFS` of `count` buffers of `memory`. A queue that cannot stream that kind
/// of memory at all is [`Error::Unsupported`]; a driver that refuses or fails otherwise
/// is [`Error::Device`].
fn request(fd: BorrowedFd<'_>, buf_type: u32, memory: u32, count: u32, dev: &str) -> Result<usize> {
    let what = if memory == sys::v4l2_memory_V4L2_MEMORY_DMABUF {
        "DMABUF"
    } else {
        "MMAP"
    };
    let granted = match ioctl::reqbufs(fd, buf_type, memory, count) {
        Ok(g) => g,
        Err(e) => {
            if e.raw_os_error() == Some(libc::ENODEV) {
                return Err(Error::Disconnected(format!(
                    "camera {dev} vanished (VIDIOC_REQBUFS: {e})"
                )));
            }
            // A request for no buffers fails only when the memory kind itself is
            // unsupported (and frees nothing: none were granted).
            return Err(match ioctl::reqbufs(fd, buf_type, memory, 0) {
                Err(probe) if probe.raw_os_error() == Some(libc::EINVAL) => Error::Unsupported(
                    format!("camera {dev} cannot stream {what} buffers (VIDIOC_REQBUFS: {e})"),
                ),
                _ => Error::Device(format!(
                    "VIDIOC_REQBUFS ({count} {what} buffers) on {dev}: the driver refused: {e}"
                )),
            });
        }
    };
    if granted == 0 {
        return Err(Error::Device(format!(
            "camera {dev} granted no {what} buffers"
        )));
    }
    Ok(granted.min(crate::camera::MAX_BUFFERS) as usize)
}

/// Driver-allocated buffers, each plane exported once as a dma-buf and imported.
pub(super) fn mmap_slots(
    fd: BorrowedFd<'_>,
    buf_type: u32,
    count: u32,
    format: &CaptureFormat,
    dev: &str,
) -> Result<Vec<Slot>> {
    let n = request(fd, buf_type, sys::v4l2_memory_V4L2_MEMORY_MMAP, count, dev)?;
    let planes = format.layout.buffer_count();
    let mut slots = Vec::with_capacity(n);
    for index in 0..n {
        let mut fds = Vec::with_capacity(planes);
        for p in 0..planes {
            fds.push(
                ioctl::expbuf(fd, buf_type, index as u32, p as u32).map_err(|e| {
                    let what = format!("VIDIOC_EXPBUF of buffer {index} plane {p}");
                    match e.raw_os_error() {
                        Some(libc::ENOTTY) | Some(libc::EINVAL) => Error::Unsupported(format!(
                            "camera {dev} cannot export its buffers as dma-bufs ({what}: {e})"
                        )),
                        _ => super::device_call_error(dev, &what, e),
                    }
                })?,
            );
        }
        let borrowed: Vec<BorrowedFd<'_>> = fds.iter().map(|f| f.as_fd()).collect();
        // SAFETY: the driver writes a buffer only while it is queued, and the slot's tensor
        // is reachable only through a `Frame`, which exists only while the buffer is
        // dequeued: map guards borrow the frame, and a pin over it keeps the buffer from
        // being requeued (see `Frame`). So no CPU view is alive while the driver writes.
        let tensor = unsafe { Tensor::<u8>::import_planes(&borrowed, format.layout)? };
        // The tensor holds its own duplicates; `fds` close here.
        slots.push(Slot::new(tensor, [0; 3], Vec::new()));
    }
    Ok(slots)
}

/// pinframe-allocated DMA tensors with the driver's layout, to be queued as DMABUF.
pub(super) fn dmabuf_slots(
    fd: BorrowedFd<'_>,
    buf_type: u32,
    config: &CameraConfig,
    format: &CaptureFormat,
    dev: &str,
) -> Result<Vec<Slot>> {
    let count = config.buffers;
    let planes = format.layout.buffer_count();
    // Allocate first (a platform without DMA memory fails before touching the device).
    let route = config.dma_route.as_ref();
    let first = allocate_dmabuf(format, planes, route)?;
    let n = request(
        fd,
        buf_type,
        sys::v4l2_memory_V4L2_MEMORY_DMABUF,
        count,
        dev,
    )?;
    let mut slots = Vec::with_capacity(n);
    slots.push(first);
    for _ in 1..n {
        slots.push(allocate_dmabuf(format, planes, route)?);
    }
    Ok(slots)
}

fn allocate_dmabuf(
    format: &CaptureFormat,
    planes: usize,
    route: Option<&DmaRoute>,
) -> Result<Slot> {
    let mut backing = Vec::with_capacity(planes);
    let mut lengths = [0u32; 3];
    for (b, length) in lengths.iter_mut().enumerate().take(planes) {
        let len = (format.sizeimage[b] as usize).max(format.layout.allocation_len(b));
        let t = match route {
            Some(r) => Tensor::<u8>::new_dma_via(&[len], r)?,
            None => Tensor::<u8>::new(&[len], Some(Memory::Dma))?,
        };
        let actual = t.buffer_len(0).unwrap_or(len);
        *length = u32::try_from(actual).map_err(|_| {
            Error::Unsupported(format!("capture buffer of {actual} bytes is too large"))
        })?;
        backing.push(t);
    }
    let fds: Vec<BorrowedFd<'_>> = backing
        .iter()
        .map(|t| {
            t.fd()
                .ok_or_else(|| Error::InvalidFd("DMA tensor without an fd".into()))
        })
        .collect::<Result<_>>()?;
    // SAFETY: the buffers are pinframe's own, held only by `backing` (never mapped or
    // handed out) and by the driver, which writes them only while they are queued; the
    // slot's tensor is reachable only through a `Frame`, alive only while the buffer is
    // dequeued (map guards borrow the frame, a pin keeps the buffer from being requeued).
    let tensor = unsafe { Tensor::<u8>::import_planes(&fds, format.layout)? };
    Ok(Slot::new(tensor, lengths, backing))
}
