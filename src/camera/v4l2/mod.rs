//! V4L2 capture, by concern: [`caps`] (opening a node, its capabilities and formats),
//! [`negotiate`] (format, layout, colorimetry, frame rate), [`buffers`] (MMAP + EXPBUF or
//! DMABUF buffers), [`stream`] (queueing, dequeuing, the capture loop) and [`ioctl`] (the
//! raw calls).

mod buffers;
mod caps;
#[cfg(test)]
pub(crate) mod fake;
mod ioctl;
mod negotiate;
mod stream;

use std::os::fd::AsFd;
use std::path::Path;
use std::sync::Arc;

use v4l::v4l_sys as sys;

use super::pool::{Shared, SlotState};
use super::{BufferMode, CameraConfig, CaptureFormat};
use crate::image::{PixelFormat, fourcc_to_string};
use crate::{Error, Result};
use buffers::{dmabuf_slots, mmap_slots};
use caps::{Caps, enumerate, open_device, supported_list};
use negotiate::negotiate;

pub use caps::{DeviceFormat, list_formats};
pub(crate) use stream::{DeviceQueue, Queue, capture, device_call_error, queue_error, stop};

/// A V4L2 camera just opened and streaming.
pub(crate) struct Opened {
    pub shared: Arc<Shared>,
    pub format: CaptureFormat,
    pub mode: BufferMode,
    /// The driver's card and driver names.
    pub name: String,
}

/// Opens the capture device at `path`, negotiates `config`, sets up the buffers, queues
/// them and starts streaming.
pub(crate) fn open(path: &Path, config: &CameraConfig) -> Result<Opened> {
    let fd = open_device(path)?;
    let caps = Caps::query(fd.as_fd(), path)?;
    let formats = enumerate(fd.as_fd(), caps.buf_type, path)?;
    let dev = format!("{} [{}]", path.display(), caps.name);
    let chosen = match (config.fourcc, config.format) {
        (Some(code), _) => formats
            .iter()
            .find(|f| f.fourcc == code && f.format.is_some())
            .ok_or_else(|| {
                Error::Unsupported(format!(
                    "camera {dev} does not offer {} as a format pinframe can convert; {}",
                    fourcc_to_string(code),
                    supported_list(&formats)
                ))
            })?,
        (None, Some(want)) => formats
            .iter()
            .filter(|f| f.format == Some(want))
            .min_by_key(|f| f.multi_buffer)
            .ok_or_else(|| {
                Error::Unsupported(format!(
                    "camera {dev} does not offer {want}; {}",
                    supported_list(&formats)
                ))
            })?,
        (None, None) => formats.iter().find(|f| f.format.is_some()).ok_or_else(|| {
            Error::Unsupported(format!(
                "camera {dev}: {}; pinframe converts {}",
                supported_list(&formats),
                PixelFormat::SOURCES
                    .iter()
                    .filter(|f| f.v4l2_fourcc().is_some())
                    .map(|f| f.name())
                    .collect::<Vec<_>>()
                    .join(" ")
            ))
        })?,
    }
    .clone();
    let format = negotiate(fd.as_fd(), caps.buf_type, &chosen, config, &dev, &formats)?;
    let num_planes = if caps.buf_type == sys::v4l2_buf_type_V4L2_BUF_TYPE_VIDEO_CAPTURE_MPLANE {
        format.sizeimage.len()
    } else {
        0
    };

    let (memory, mode, slots) = match config.buffer_mode {
        BufferMode::Mmap => {
            let slots = mmap_slots(fd.as_fd(), caps.buf_type, config.buffers, &format, &dev)?;
            (sys::v4l2_memory_V4L2_MEMORY_MMAP, BufferMode::Mmap, slots)
        }
        BufferMode::Dmabuf => {
            let slots = dmabuf_slots(fd.as_fd(), caps.buf_type, config, &format, &dev)?;
            (
                sys::v4l2_memory_V4L2_MEMORY_DMABUF,
                BufferMode::Dmabuf,
                slots,
            )
        }
        BufferMode::Auto => {
            match dmabuf_slots(fd.as_fd(), caps.buf_type, config, &format, &dev) {
                Ok(slots) => (
                    sys::v4l2_memory_V4L2_MEMORY_DMABUF,
                    BufferMode::Dmabuf,
                    slots,
                ),
                Err(e) => {
                    log::info!(
                        "camera {dev}: DMABUF buffers unavailable ({e}); using MMAP + EXPBUF"
                    );
                    // Free whatever the DMABUF attempt requested.
                    let _ = ioctl::reqbufs(
                        fd.as_fd(),
                        caps.buf_type,
                        sys::v4l2_memory_V4L2_MEMORY_DMABUF,
                        0,
                    );
                    let slots =
                        mmap_slots(fd.as_fd(), caps.buf_type, config.buffers, &format, &dev)?;
                    (sys::v4l2_memory_V4L2_MEMORY_MMAP, BufferMode::Mmap, slots)
                }
            }
        }
    };
    let queue = Queue {
        fd,
        buf_type: caps.buf_type,
        memory,
        num_planes,
    };
    let shared = Arc::new(Shared::new(Some(Box::new(queue)), slots));
    {
        let mut state = shared.lock();
        let queue = shared.queue().expect("a V4L2 camera has a queue");
        for i in 0..state.slots.len() {
            queue
                .enqueue(i, &state.slots[i])
                .map_err(|e| queue_error(&dev, i, e))?;
            state.slots[i].state = SlotState::Queued;
        }
        queue.stream(true).map_err(|e| {
            device_call_error(&dev, "VIDIOC_STREAMON (the driver refused to start)", e)
        })?;
        state.streaming = true;
    }
    log::info!(
        "camera {dev}: {format}, {} {} buffers",
        shared.lock().slots.len(),
        mode
    );
    Ok(Opened {
        shared,
        format,
        mode,
        name: caps.name,
    })
}
