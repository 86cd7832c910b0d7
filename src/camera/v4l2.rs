//! V4L2 devices: open, negotiate the format, allocate or export the buffers, stream.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use v4l::v4l_sys as sys;

use super::ioctl::{self, BufferIo};
use super::{BufferMode, CameraConfig, CameraStats, CaptureFormat, Captured, Shared, Slot};
use crate::image::{Colorimetry, ImageLayout, Matrix, PixelFormat, Plane, Range, fourcc_to_string};
use crate::tensor::{DmaRoute, Memory, Tensor};
use crate::{DType, Error, Result};

/// One format a V4L2 device offers.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct DeviceFormat {
    /// The V4L2 fourcc.
    pub fourcc: u32,
    /// The driver's description.
    pub description: String,
    /// The pinframe format it maps to, if pinframe can convert it.
    pub format: Option<PixelFormat>,
    /// True for the one-buffer-per-plane variants (`NM12`, `YM12`, ...).
    pub multi_buffer: bool,
}

impl DeviceFormat {
    fn describe(&self) -> String {
        match self.format {
            Some(f) => format!("{} ({})", f, fourcc_to_string(self.fourcc)),
            None => format!("{} ({})", fourcc_to_string(self.fourcc), self.description),
        }
    }
}

/// The formats a V4L2 capture device offers, in the driver's order.
pub fn list_formats(path: impl AsRef<Path>) -> Result<Vec<DeviceFormat>> {
    let path = path.as_ref();
    let fd = open_device(path)?;
    let caps = Caps::query(fd.as_fd(), path)?;
    enumerate(fd.as_fd(), caps.buf_type, path)
}

fn open_device(path: &Path) -> Result<OwnedFd> {
    use std::os::unix::fs::OpenOptionsExt;
    // Rust opens files close-on-exec; non-blocking so that DQBUF never blocks.
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map(OwnedFd::from)
        .map_err(|e| Error::io(format!("opening camera {}", path.display()), e))
}

struct Caps {
    buf_type: u32,
    name: String,
}

fn c_string(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

impl Caps {
    fn query(fd: BorrowedFd<'_>, path: &Path) -> Result<Caps> {
        let cap = ioctl::querycap(fd).map_err(|e| {
            if e.raw_os_error() == Some(libc::ENOTTY) {
                Error::InvalidArgument(format!("{} is not a V4L2 device", path.display()))
            } else {
                Error::io(format!("VIDIOC_QUERYCAP on {}", path.display()), e)
            }
        })?;
        let caps = if cap.capabilities & sys::V4L2_CAP_DEVICE_CAPS != 0 {
            cap.device_caps
        } else {
            cap.capabilities
        };
        let buf_type = if caps & sys::V4L2_CAP_VIDEO_CAPTURE != 0 {
            sys::v4l2_buf_type_V4L2_BUF_TYPE_VIDEO_CAPTURE
        } else if caps & sys::V4L2_CAP_VIDEO_CAPTURE_MPLANE != 0 {
            sys::v4l2_buf_type_V4L2_BUF_TYPE_VIDEO_CAPTURE_MPLANE
        } else {
            return Err(Error::Unsupported(format!(
                "{} ({}) is not a video capture device (device caps {caps:#x})",
                path.display(),
                c_string(&cap.card)
            )));
        };
        if caps & sys::V4L2_CAP_STREAMING == 0 {
            return Err(Error::Unsupported(format!(
                "{} ({}) does not support streaming I/O",
                path.display(),
                c_string(&cap.card)
            )));
        }
        Ok(Caps {
            buf_type,
            name: format!("{} ({})", c_string(&cap.card), c_string(&cap.driver)),
        })
    }
}

fn enumerate(fd: BorrowedFd<'_>, buf_type: u32, path: &Path) -> Result<Vec<DeviceFormat>> {
    let mut out = Vec::new();
    for index in 0..1024 {
        let Some(desc) = ioctl::enum_fmt(fd, buf_type, index)
            .map_err(|e| Error::io(format!("VIDIOC_ENUM_FMT on {}", path.display()), e))?
        else {
            break;
        };
        let mapped = if desc.flags & sys::V4L2_FMT_FLAG_COMPRESSED != 0 {
            None
        } else {
            PixelFormat::from_v4l2_fourcc(desc.pixelformat)
        };
        // One buffer per plane needs the multi-planar API.
        let mapped = mapped.filter(|&(_, multi)| {
            !multi || buf_type == sys::v4l2_buf_type_V4L2_BUF_TYPE_VIDEO_CAPTURE_MPLANE
        });
        out.push(DeviceFormat {
            fourcc: desc.pixelformat,
            description: c_string(&desc.description),
            format: mapped.map(|m| m.0),
            multi_buffer: mapped.is_some_and(|m| m.1),
        });
    }
    Ok(out)
}

fn supported_list(formats: &[DeviceFormat]) -> String {
    let ok: Vec<String> = formats
        .iter()
        .filter(|f| f.format.is_some())
        .map(DeviceFormat::describe)
        .collect();
    let other: Vec<String> = formats
        .iter()
        .filter(|f| f.format.is_none())
        .map(DeviceFormat::describe)
        .collect();
    let mut s = if ok.is_empty() {
        "none of its formats can be converted by pinframe".to_string()
    } else {
        format!(
            "formats it offers that pinframe can convert: {}",
            ok.join(", ")
        )
    };
    if !other.is_empty() {
        s.push_str(&format!("; other formats it offers: {}", other.join(", ")));
    }
    s
}

/// Colorimetry from V4L2's colorspace, Y'CbCr encoding and quantization, with the
/// kernel's rules for the defaults (`V4L2_MAP_YCBCR_ENC_DEFAULT`,
/// `V4L2_MAP_QUANTIZATION_DEFAULT`). `None` for non-YUV formats and unknown matrices.
pub(crate) fn colorimetry(
    format: PixelFormat,
    colorspace: u32,
    ycbcr_enc: u32,
    quantization: u32,
) -> Option<Colorimetry> {
    if !format.is_yuv() {
        return None;
    }
    let enc = if ycbcr_enc == sys::v4l2_ycbcr_encoding_V4L2_YCBCR_ENC_DEFAULT {
        match colorspace {
            sys::v4l2_colorspace_V4L2_COLORSPACE_REC709
            | sys::v4l2_colorspace_V4L2_COLORSPACE_DCI_P3 => {
                sys::v4l2_ycbcr_encoding_V4L2_YCBCR_ENC_709
            }
            sys::v4l2_colorspace_V4L2_COLORSPACE_BT2020 => {
                sys::v4l2_ycbcr_encoding_V4L2_YCBCR_ENC_BT2020
            }
            sys::v4l2_colorspace_V4L2_COLORSPACE_SMPTE240M => {
                sys::v4l2_ycbcr_encoding_V4L2_YCBCR_ENC_SMPTE240M
            }
            _ => sys::v4l2_ycbcr_encoding_V4L2_YCBCR_ENC_601,
        }
    } else {
        ycbcr_enc
    };
    let matrix = match enc {
        sys::v4l2_ycbcr_encoding_V4L2_YCBCR_ENC_601
        | sys::v4l2_ycbcr_encoding_V4L2_YCBCR_ENC_XV601
        | sys::v4l2_ycbcr_encoding_V4L2_YCBCR_ENC_SYCC => Matrix::Bt601,
        sys::v4l2_ycbcr_encoding_V4L2_YCBCR_ENC_709
        | sys::v4l2_ycbcr_encoding_V4L2_YCBCR_ENC_XV709 => Matrix::Bt709,
        sys::v4l2_ycbcr_encoding_V4L2_YCBCR_ENC_BT2020 => Matrix::Bt2020,
        other => {
            log::warn!(
                "camera: Y'CbCr encoding {other} has no pinframe matrix; conversions pick one by height"
            );
            return None;
        }
    };
    let range = match quantization {
        sys::v4l2_quantization_V4L2_QUANTIZATION_FULL_RANGE => Range::Full,
        sys::v4l2_quantization_V4L2_QUANTIZATION_LIM_RANGE => Range::Limited,
        _ if colorspace == sys::v4l2_colorspace_V4L2_COLORSPACE_JPEG => Range::Full,
        _ => Range::Limited,
    };
    Some(Colorimetry::new(matrix, range))
}

/// The device end of a camera's buffer queue.
pub(crate) struct Queue {
    fd: OwnedFd,
    buf_type: u32,
    memory: u32,
    /// Planes per buffer for the multi-planar API; 0 for single-planar queues.
    num_planes: usize,
}

impl Queue {
    fn is_dmabuf(&self) -> bool {
        self.memory == sys::v4l2_memory_V4L2_MEMORY_DMABUF
    }

    /// Queues buffer `index` (its dma-buf fds in DMABUF mode).
    pub(crate) fn enqueue(&self, index: usize, slot: &Slot) -> Result<()> {
        let mut io = BufferIo {
            index: index as u32,
            ..BufferIo::default()
        };
        if self.is_dmabuf() {
            for b in 0..slot.tensor.buffer_count() {
                let fd = slot.tensor.buffer_fd(b).ok_or_else(|| {
                    Error::InvalidFd("DMABUF capture buffer without an fd".into())
                })?;
                io.fds[b] = fd.as_raw_fd();
                io.lengths[b] = slot.lengths[b];
            }
        }
        ioctl::qbuf(
            self.fd.as_fd(),
            self.buf_type,
            self.memory,
            self.num_planes,
            &io,
        )
        .map_err(|e| Error::io(format!("VIDIOC_QBUF of buffer {index}"), e))
    }
}

/// A streaming V4L2 camera (the parts not shared with frames).
pub(crate) struct Stream {
    path: String,
}

pub(crate) struct Opened {
    pub stream: Stream,
    pub shared: Arc<Shared>,
    pub format: CaptureFormat,
    pub mode: BufferMode,
    pub name: String,
}

impl Stream {
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
                    PixelFormat::ALL
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
        let shared = Arc::new(Shared::new(Some(queue), slots));
        {
            let mut state = shared.lock();
            let queue = shared.queue.as_ref().expect("V4L2 camera has a queue");
            for (i, slot) in state.slots.iter_mut().enumerate() {
                queue.enqueue(i, slot)?;
                slot.queued = true;
            }
            ioctl::stream(queue.fd.as_fd(), queue.buf_type, true)
                .map_err(|e| Error::io(format!("VIDIOC_STREAMON on {dev}"), e))?;
            state.streaming = true;
        }
        log::info!(
            "camera {dev}: {format}, {} {} buffers",
            shared.lock().slots.len(),
            mode
        );
        Ok(Opened {
            stream: Stream {
                path: path.display().to_string(),
            },
            shared,
            format,
            mode,
            name: caps.name,
        })
    }

    /// Waits for the next filled buffer and marks it held.
    pub(crate) fn dequeue(
        &mut self,
        shared: &Shared,
        layout: &mut ImageLayout,
        timeout: Duration,
        stats: &mut CameraStats,
    ) -> Result<Captured> {
        let queue = shared
            .queue
            .as_ref()
            .ok_or_else(|| Error::Device("camera has no device queue".into()))?;
        let deadline = Instant::now() + timeout;
        loop {
            let remaining = deadline.saturating_duration_since(Instant::now());
            let revents = poll_in(queue.fd.as_fd(), remaining)
                .map_err(|e| Error::io(format!("poll on camera {}", self.path), e))?;
            let got = ioctl::dqbuf(
                queue.fd.as_fd(),
                queue.buf_type,
                queue.memory,
                queue.num_planes,
            )
            .map_err(|e| match e.raw_os_error() {
                Some(libc::ENODEV) => {
                    Error::Disconnected(format!("camera {} vanished (ENODEV)", self.path))
                }
                _ => Error::io(format!("VIDIOC_DQBUF on camera {}", self.path), e),
            })?;
            let Some(io) = got else {
                if revents & (libc::POLLERR | libc::POLLHUP | libc::POLLNVAL) != 0 {
                    return Err(Error::Disconnected(format!(
                        "camera {} reported an error (poll revents {revents:#x}): the device \
                         stopped streaming or vanished",
                        self.path
                    )));
                }
                if remaining.is_zero() {
                    return Err(Error::Timeout(format!(
                        "no frame from camera {} within {:?}",
                        self.path, timeout
                    )));
                }
                continue;
            };
            let mut state = shared.lock();
            let index = io.index as usize;
            let Some(slot) = state.slots.get_mut(index) else {
                return Err(Error::Device(format!(
                    "camera {} returned buffer index {index}, beyond its {} buffers",
                    self.path,
                    state.slots.len()
                )));
            };
            slot.queued = false;
            if io.flags & sys::V4L2_BUF_FLAG_ERROR != 0 {
                stats.errors += 1;
                queue.enqueue(index, slot)?;
                slot.queued = true;
                continue;
            }
            if queue.num_planes > 0 {
                apply_data_offsets(slot, layout, &io)?;
            }
            let frame_layout = slot.tensor.layout().unwrap_or(layout);
            let short = (0..frame_layout.buffer_count()).find(|&b| {
                io.bytesused[b] != 0 && (io.bytesused[b] as usize) < frame_layout.required_len(b)
            });
            if let Some(b) = short {
                log::warn!(
                    "camera {}: buffer {index} plane {b} holds {} bytes, the layout needs {}; \
                     dropping the frame",
                    self.path,
                    io.bytesused[b],
                    frame_layout.required_len(b)
                );
                stats.errors += 1;
                queue.enqueue(index, slot)?;
                slot.queued = true;
                continue;
            }
            slot.held = true;
            let (sec, usec) = io.timestamp;
            return Ok(Captured {
                index,
                sequence: io.sequence,
                timestamp: Duration::new(sec.max(0) as u64, (usec.clamp(0, 999_999) * 1000) as u32),
                bytesused: [io.bytesused[0], io.bytesused[1], io.bytesused[2]],
            });
        }
    }

    /// Stops streaming: the driver lets go of every buffer; frames still held stay
    /// readable and are no longer requeued.
    pub(crate) fn stop(&self, shared: &Shared) {
        let mut state = shared.lock();
        if !state.streaming {
            return;
        }
        state.streaming = false;
        if let Some(queue) = &shared.queue
            && let Err(e) = ioctl::stream(queue.fd.as_fd(), queue.buf_type, false)
        {
            log::warn!("camera {}: VIDIOC_STREAMOFF: {e}", self.path);
        }
        for slot in &mut state.slots {
            slot.queued = false;
        }
    }
}

/// Multi-planar drivers report where each plane's data starts (`data_offset`) only when a
/// buffer is dequeued; a slot whose layout does not match yet gets the offsets (once: the
/// offsets are a property of the format).
fn apply_data_offsets(slot: &mut Slot, layout: &mut ImageLayout, io: &BufferIo) -> Result<()> {
    let base = layout;
    let wanted: Vec<Plane> = base
        .planes()
        .iter()
        .map(|p| Plane {
            offset: p.offset - base_offset(base, p.buffer) + io.data_offsets[p.buffer] as usize,
            ..*p
        })
        .collect();
    let current = slot.tensor.layout().map(|l| l.planes().to_vec());
    if current.as_deref() == Some(&wanted[..]) {
        return Ok(());
    }
    let new = ImageLayout::with_planes(
        base.width(),
        base.height(),
        base.format(),
        DType::U8,
        &wanted,
    )
    .map_err(|e| {
        Error::Device(format!(
            "the driver's plane data offsets give a bad layout: {e}"
        ))
    })?
    .with_colorimetry(base.colorimetry());
    let tensor = Arc::get_mut(&mut slot.tensor).ok_or_else(|| {
        Error::Device("a dequeued capture buffer is still referenced by a frame".into())
    })?;
    tensor.set_layout(new)?;
    *base = new;
    Ok(())
}

/// Offset of the first plane in buffer `buffer` (the data offset already applied).
fn base_offset(layout: &ImageLayout, buffer: usize) -> usize {
    layout
        .planes()
        .iter()
        .filter(|p| p.buffer == buffer)
        .map(|p| p.offset)
        .min()
        .unwrap_or(0)
}

/// `poll(POLLIN)` for up to `timeout`; returns the revents.
fn poll_in(fd: BorrowedFd<'_>, timeout: Duration) -> std::io::Result<i16> {
    let ms = timeout.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32;
    let mut pfd = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    loop {
        // SAFETY: one valid pollfd, for the duration of the call.
        let r = unsafe { libc::poll(&mut pfd, 1, ms) };
        if r < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        return Ok(if r == 0 { 0 } else { pfd.revents });
    }
}

fn negotiate(
    fd: BorrowedFd<'_>,
    buf_type: u32,
    chosen: &DeviceFormat,
    config: &CameraConfig,
    dev: &str,
    formats: &[DeviceFormat],
) -> Result<CaptureFormat> {
    let mplane = buf_type == sys::v4l2_buf_type_V4L2_BUF_TYPE_VIDEO_CAPTURE_MPLANE;
    let pf = chosen
        .format
        .ok_or_else(|| Error::Unsupported("format not convertible".into()))?;
    let mut fmt =
        ioctl::g_fmt(fd, buf_type).map_err(|e| Error::io(format!("VIDIOC_G_FMT on {dev}"), e))?;
    // SAFETY (union access): `fmt.type_` says which member the driver filled; only
    // that member is read or written below.
    if mplane {
        // SAFETY: a multi-planar capture format: `pix_mp` is the active member.
        let pix = unsafe { &mut fmt.fmt.pix_mp };
        if let Some((w, h)) = config.size {
            pix.width = w;
            pix.height = h;
        }
        pix.pixelformat = chosen.fourcc;
        pix.field = sys::v4l2_field_V4L2_FIELD_NONE;
        pix.num_planes = 0;
        pix.plane_fmt = [sys::v4l2_plane_pix_format {
            sizeimage: 0,
            bytesperline: 0,
            reserved: [0; 6],
        }; 8];
    } else {
        // SAFETY: a single-planar capture format: `pix` is the active member.
        let pix = unsafe { &mut fmt.fmt.pix };
        if let Some((w, h)) = config.size {
            pix.width = w;
            pix.height = h;
        }
        pix.pixelformat = chosen.fourcc;
        pix.field = sys::v4l2_field_V4L2_FIELD_NONE;
        pix.bytesperline = 0;
        pix.sizeimage = 0;
    }
    let request = fmt;
    ioctl::s_fmt(fd, &mut fmt).map_err(|e| Error::io(format!("VIDIOC_S_FMT on {dev}"), e))?;
    // Drivers that crop and compose (vivid, scalers) keep the rectangles of an earlier
    // format: a smaller compose leaves the rest of the frame unwritten, a smaller crop
    // shows part of the picture. Reset both for the size the driver chose (it may still
    // shrink the crop to what its scaler can do), then set the format again: changing
    // the rectangles may have changed it. Drivers without the selection API say so.
    // SAFETY: `type_` says which member is active; both start with width and height.
    let (w, h) = if mplane {
        // SAFETY: a multi-planar capture format: `pix_mp` is the active member.
        let p = unsafe { &fmt.fmt.pix_mp };
        (p.width, p.height)
    } else {
        // SAFETY: a single-planar capture format: `pix` is the active member.
        let p = unsafe { &fmt.fmt.pix };
        (p.width, p.height)
    };
    if let Err(e) = ioctl::reset_selection(fd, w, h) {
        log::debug!("camera {dev}: crop/compose rectangles not (all) reset: {e}");
    }
    fmt = request;
    ioctl::s_fmt(fd, &mut fmt).map_err(|e| Error::io(format!("VIDIOC_S_FMT on {dev}"), e))?;

    let (width, height, fourcc, field, bpl, sizes, cs) = if mplane {
        // SAFETY: as above, `pix_mp` is the active member.
        let pix = unsafe { &fmt.fmt.pix_mp };
        let n = (pix.num_planes as usize).min(ioctl::MAX_PLANES);
        // SAFETY: `ycbcr_enc` and `hsv_enc` are both u8; either is a valid read.
        let enc = unsafe { pix.__bindgen_anon_1.ycbcr_enc } as u32;
        (
            pix.width,
            pix.height,
            pix.pixelformat,
            pix.field,
            pix.plane_fmt[..n]
                .iter()
                .map(|p| p.bytesperline)
                .collect::<Vec<_>>(),
            pix.plane_fmt[..n]
                .iter()
                .map(|p| p.sizeimage)
                .collect::<Vec<_>>(),
            (pix.colorspace, enc, pix.quantization as u32),
        )
    } else {
        // SAFETY: as above, `pix` is the active member.
        let pix = unsafe { &fmt.fmt.pix };
        // SAFETY: `ycbcr_enc` and `hsv_enc` are both u32; either is a valid read.
        let enc = unsafe { pix.__bindgen_anon_1.ycbcr_enc };
        (
            pix.width,
            pix.height,
            pix.pixelformat,
            pix.field,
            vec![pix.bytesperline],
            vec![pix.sizeimage],
            (pix.colorspace, enc, pix.quantization),
        )
    };
    if fourcc != chosen.fourcc {
        let got = formats
            .iter()
            .find(|f| f.fourcc == fourcc)
            .map(DeviceFormat::describe)
            .unwrap_or_else(|| fourcc_to_string(fourcc));
        return Err(Error::Unsupported(format!(
            "camera {dev} was asked for {} and chose {got} instead; {}",
            chosen.describe(),
            supported_list(formats)
        )));
    }
    // Progressive frames, or both fields interleaved line by line in one full frame (an
    // image like any other, e.g. an analogue TV input). Separate or sequential fields are
    // half images pinframe does not assemble.
    let interlaced = match field {
        sys::v4l2_field_V4L2_FIELD_NONE | sys::v4l2_field_V4L2_FIELD_ANY => false,
        sys::v4l2_field_V4L2_FIELD_INTERLACED
        | sys::v4l2_field_V4L2_FIELD_INTERLACED_TB
        | sys::v4l2_field_V4L2_FIELD_INTERLACED_BT => true,
        other => {
            return Err(Error::Unsupported(format!(
                "camera {dev} delivers separate or sequential fields (v4l2 field {other}); \
                 pinframe needs whole frames (progressive or interleaved fields)"
            )));
        }
    };
    let bad_layout = |why: String| {
        Error::Unsupported(format!(
            "camera {dev} reports a layout pinframe cannot describe for {width}x{height} {}: {why}; {}",
            chosen.describe(),
            supported_list(formats)
        ))
    };
    let colorimetry = colorimetry(pf, cs.0, cs.1, cs.2);
    let layout = if chosen.multi_buffer {
        if bpl.len() != pf.plane_count() {
            return Err(bad_layout(format!(
                "{} buffers per frame for a {}-plane format",
                bpl.len(),
                pf.plane_count()
            )));
        }
        let planes: Vec<Plane> = bpl
            .iter()
            .enumerate()
            .map(|(i, &stride)| Plane {
                buffer: i,
                offset: 0,
                stride: stride as usize,
            })
            .collect();
        ImageLayout::with_planes(width, height, pf, DType::U8, &planes)
    } else {
        if bpl.len() != 1 {
            return Err(bad_layout(format!(
                "{} buffers per frame for a one-buffer format",
                bpl.len()
            )));
        }
        ImageLayout::with_stride(width, height, pf, DType::U8, bpl[0] as usize)
    }
    .map_err(|e| bad_layout(e.to_string()))?
    .with_colorimetry(colorimetry);
    for (b, &size) in sizes.iter().enumerate() {
        if layout.required_len(b) > size as usize {
            return Err(bad_layout(format!(
                "buffer {b} needs {} bytes for bytesperline {} but sizeimage is {size}",
                layout.required_len(b),
                bpl[b]
            )));
        }
    }

    let frame_interval = frame_rate(fd, buf_type, config.fps, dev);
    Ok(CaptureFormat {
        format: pf,
        fourcc,
        width,
        height,
        multi_planar_api: mplane,
        interlaced,
        bytesperline: bpl,
        sizeimage: sizes,
        v4l2_colorimetry: cs,
        colorimetry,
        frame_interval,
        layout,
    })
}

/// Asks for `fps` (when given and the driver can set it) and reports the interval.
fn frame_rate(
    fd: BorrowedFd<'_>,
    buf_type: u32,
    fps: Option<u32>,
    dev: &str,
) -> Option<(u32, u32)> {
    let read = |fd| -> Option<sys::v4l2_streamparm> { ioctl::g_parm(fd, buf_type).ok() };
    let mut parm = read(fd)?;
    // SAFETY: a capture stream parameter: `capture` is the active member.
    let cap = unsafe { parm.parm.capture };
    if let Some(fps) = fps {
        if cap.capability & sys::V4L2_CAP_TIMEPERFRAME != 0 {
            // SAFETY: as above.
            let c = unsafe { &mut parm.parm.capture };
            c.timeperframe = sys::v4l2_fract {
                numerator: 1,
                denominator: fps,
            };
            if let Err(e) = ioctl::s_parm(fd, &mut parm) {
                log::warn!("camera {dev}: cannot set {fps} fps: {e}");
            }
            parm = read(fd)?;
        } else {
            log::warn!("camera {dev}: the driver cannot set the frame rate; keeping its own");
        }
    }
    // SAFETY: as above.
    let t = unsafe { parm.parm.capture }.timeperframe;
    (t.numerator > 0 && t.denominator > 0).then_some((t.numerator, t.denominator))
}

fn request(fd: BorrowedFd<'_>, buf_type: u32, memory: u32, count: u32, dev: &str) -> Result<usize> {
    let granted = ioctl::reqbufs(fd, buf_type, memory, count).map_err(|e| {
        let what = if memory == sys::v4l2_memory_V4L2_MEMORY_DMABUF {
            "DMABUF"
        } else {
            "MMAP"
        };
        Error::io(
            format!("VIDIOC_REQBUFS ({count} {what} buffers) on {dev}"),
            e,
        )
    })?;
    if granted == 0 {
        return Err(Error::Device(format!("camera {dev} granted no buffers")));
    }
    Ok(granted.min(super::MAX_BUFFERS) as usize)
}

/// Driver-allocated buffers, each plane exported once as a dma-buf and imported.
fn mmap_slots(
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
                    Error::io(
                        format!("VIDIOC_EXPBUF of buffer {index} plane {p} on {dev}"),
                        e,
                    )
                })?,
            );
        }
        let borrowed: Vec<BorrowedFd<'_>> = fds.iter().map(|f| f.as_fd()).collect();
        let tensor = Tensor::<u8>::import_planes(&borrowed, format.layout)?;
        // The tensor holds its own duplicates; `fds` close here.
        slots.push(Slot::new(tensor, [0; 3], Vec::new()));
    }
    Ok(slots)
}

/// pinframe-allocated DMA tensors with the driver's layout, to be queued as DMABUF.
fn dmabuf_slots(
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
    let tensor = Tensor::<u8>::import_planes(&fds, format.layout)?;
    Ok(Slot::new(tensor, lengths, backing))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colorimetry_follows_the_kernel_defaults() {
        let c = |cs, enc, q| colorimetry(PixelFormat::Yuyv, cs, enc, q);
        assert_eq!(
            c(sys::v4l2_colorspace_V4L2_COLORSPACE_SRGB, 0, 0),
            Some(Colorimetry::BT601_LIMITED)
        );
        assert_eq!(
            c(sys::v4l2_colorspace_V4L2_COLORSPACE_REC709, 0, 0),
            Some(Colorimetry::BT709_LIMITED)
        );
        assert_eq!(
            c(sys::v4l2_colorspace_V4L2_COLORSPACE_JPEG, 0, 0),
            Some(Colorimetry::new(Matrix::Bt601, Range::Full))
        );
        assert_eq!(
            c(
                sys::v4l2_colorspace_V4L2_COLORSPACE_BT2020,
                0,
                sys::v4l2_quantization_V4L2_QUANTIZATION_FULL_RANGE
            ),
            Some(Colorimetry::new(Matrix::Bt2020, Range::Full))
        );
        assert_eq!(
            c(
                sys::v4l2_colorspace_V4L2_COLORSPACE_SRGB,
                sys::v4l2_ycbcr_encoding_V4L2_YCBCR_ENC_709,
                sys::v4l2_quantization_V4L2_QUANTIZATION_LIM_RANGE
            ),
            Some(Colorimetry::BT709_LIMITED)
        );
        assert_eq!(
            c(sys::v4l2_colorspace_V4L2_COLORSPACE_SMPTE240M, 0, 0),
            None
        );
        assert_eq!(colorimetry(PixelFormat::Rgb, 8, 0, 0), None);
    }
}
