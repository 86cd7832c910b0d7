//! Camera capture: V4L2 streaming into DMA-BUFs, every frame a [`Tensor<u8>`], and a
//! synthetic camera with the same interface.
//!
//! ```no_run
//! use pinframe::camera::{Camera, CameraConfig};
//! use pinframe::{ImageProcessor, PixelFormat, Tensor, Memory, Access};
//!
//! let mut cam = Camera::open("/dev/video0", CameraConfig::new(1280, 720, PixelFormat::Yuyv))?;
//! let mut dst = Tensor::<f32>::image(640, 640, PixelFormat::PlanarRgb, None)?;
//! let mut proc = ImageProcessor::new()?;
//! for _ in 0..100 {
//!     let frame = cam.next_frame()?;       // a dma-buf tensor with the driver's layout
//!     proc.convert(&frame, &mut dst)?;     // `&frame` derefs to `&Tensor<u8>`
//!     dst.sync_for_cpu(Access::Read)?;
//!     // ... run inference on the destination ...
//!     dst.sync_for_device(Access::Read)?;
//! }                                        // each frame goes back to the driver on drop
//! # Ok::<(), pinframe::Error>(())
//! ```
//!
//! Buffers: in [`BufferMode::Dmabuf`] pinframe allocates one DMA tensor per capture
//! buffer with the driver's layout and queues it with `V4L2_MEMORY_DMABUF`; in
//! [`BufferMode::Mmap`] the driver allocates, and each buffer is exported once with
//! `VIDIOC_EXPBUF` and imported as a tensor. Either way a frame is a dma-buf, and the same
//! buffer is the same tensor frame after frame (so GPU imports are cached by identity).

mod ioctl;
mod synthetic;
mod v4l2;

use std::fmt;
use std::mem::ManuallyDrop;
use std::ops::Deref;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use crate::image::{Colorimetry, ImageLayout, PixelFormat};
use crate::tensor::{DmaRoute, Tensor};
use crate::{Error, Result};

pub use v4l2::{DeviceFormat, list_formats};

/// How capture buffers are allocated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum BufferMode {
    /// [`Dmabuf`](BufferMode::Dmabuf) when pinframe can allocate DMA memory here, else
    /// [`Mmap`](BufferMode::Mmap) (the fallback is logged and visible in
    /// [`Camera::buffer_mode`]).
    #[default]
    Auto,
    /// pinframe allocates a DMA tensor per buffer (dma-heap, udmabuf or GBM) with the
    /// driver's layout and queues it with `V4L2_MEMORY_DMABUF`. Fails at `open` when DMA
    /// memory cannot be allocated. For the synthetic camera: DMA tensors.
    Dmabuf,
    /// The driver allocates (`V4L2_MEMORY_MMAP`); each buffer is exported once with
    /// `VIDIOC_EXPBUF` and imported as a tensor. For the synthetic camera: memfd tensors.
    Mmap,
}

impl BufferMode {
    /// Lowercase name.
    pub const fn name(self) -> &'static str {
        match self {
            BufferMode::Auto => "auto",
            BufferMode::Dmabuf => "dmabuf",
            BufferMode::Mmap => "mmap",
        }
    }
}

impl fmt::Display for BufferMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for BufferMode {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "auto" => Ok(BufferMode::Auto),
            "dmabuf" | "dma" => Ok(BufferMode::Dmabuf),
            "mmap" => Ok(BufferMode::Mmap),
            _ => Err(Error::InvalidArgument(format!(
                "unknown buffer mode {s:?}; expected auto, dmabuf or mmap"
            ))),
        }
    }
}

/// What to ask a camera for. Unset fields keep the driver's current choice.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CameraConfig {
    /// Frame size; `None` keeps the device's current size.
    pub size: Option<(u32, u32)>,
    /// Pixel format; `None` picks the first format in the driver's list that pinframe
    /// can convert.
    pub format: Option<PixelFormat>,
    /// An exact V4L2 fourcc to ask for (e.g. `NM12` for NV12 with one buffer per plane
    /// on a multi-planar device); overrides `format`. It must map to a format pinframe
    /// converts.
    pub fourcc: Option<u32>,
    /// Frames per second to ask for; `None` keeps the driver's rate (the synthetic
    /// camera then runs unpaced).
    pub fps: Option<u32>,
    /// Capture buffers to request (the driver may grant more). Default 4.
    pub buffers: u32,
    /// How buffers are allocated.
    pub buffer_mode: BufferMode,
    /// In DMABUF mode, the one allocation route to use (e.g. `DmaRoute::Gbm` for buffers
    /// of the GPU's DRM device, which some EGL drivers need to import them); `None` = the
    /// tensor layer's usual order (dma-heaps, udmabuf, GBM). Ignored by the synthetic
    /// camera.
    pub dma_route: Option<DmaRoute>,
    /// How long [`Camera::next_frame`] waits for a frame. Default 5 s.
    pub timeout: Duration,
}

/// Default number of capture buffers.
pub const DEFAULT_BUFFERS: u32 = 4;
/// Most capture buffers a camera may use.
pub const MAX_BUFFERS: u32 = 32;

impl Default for CameraConfig {
    fn default() -> Self {
        CameraConfig {
            size: None,
            format: None,
            fourcc: None,
            fps: None,
            buffers: DEFAULT_BUFFERS,
            buffer_mode: BufferMode::Auto,
            dma_route: None,
            timeout: Duration::from_secs(5),
        }
    }
}

impl CameraConfig {
    /// Asks for `width`x`height` in `format`, everything else default.
    pub fn new(width: u32, height: u32, format: PixelFormat) -> Self {
        CameraConfig {
            size: Some((width, height)),
            format: Some(format),
            ..CameraConfig::default()
        }
    }

    /// Asks for an exact V4L2 fourcc (see [`CameraConfig::fourcc`]).
    pub fn with_fourcc(mut self, fourcc: u32) -> Self {
        self.fourcc = Some(fourcc);
        self
    }

    /// Sets the frame rate to ask for.
    pub fn with_fps(mut self, fps: u32) -> Self {
        self.fps = Some(fps);
        self
    }

    /// Sets the number of capture buffers.
    pub fn with_buffers(mut self, buffers: u32) -> Self {
        self.buffers = buffers;
        self
    }

    /// Sets the buffer mode.
    pub fn with_buffer_mode(mut self, mode: BufferMode) -> Self {
        self.buffer_mode = mode;
        self
    }

    /// Sets the DMABUF allocation route (see [`CameraConfig::dma_route`]).
    pub fn with_dma_route(mut self, route: DmaRoute) -> Self {
        self.dma_route = Some(route);
        self
    }

    /// Sets how long [`Camera::next_frame`] waits.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    fn validate(&self) -> Result<()> {
        if self.buffers == 0 || self.buffers > MAX_BUFFERS {
            return Err(Error::InvalidArgument(format!(
                "camera buffer count {} is out of range 1..={MAX_BUFFERS}",
                self.buffers
            )));
        }
        if let Some((w, h)) = self.size
            && (w == 0 || h == 0)
        {
            return Err(Error::InvalidArgument(format!(
                "camera frame size {w}x{h} is empty"
            )));
        }
        if self.fps == Some(0) {
            return Err(Error::InvalidArgument("camera frame rate 0 fps".into()));
        }
        if self.timeout.is_zero() {
            return Err(Error::InvalidArgument("camera timeout of 0".into()));
        }
        Ok(())
    }
}

/// What a camera delivers, as the driver (or the synthetic camera) chose it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct CaptureFormat {
    /// The pixel format.
    pub format: PixelFormat,
    /// The V4L2 fourcc (e.g. `NV12` or `NM12`); the DRM fourcc for the synthetic camera.
    pub fourcc: u32,
    /// Frame width in pixels.
    pub width: u32,
    /// Frame height in pixels.
    pub height: u32,
    /// True when the device uses the multi-planar API (`V4L2_BUF_TYPE_VIDEO_CAPTURE_MPLANE`).
    pub multi_planar_api: bool,
    /// True when each frame holds two interleaved fields (`V4L2_FIELD_INTERLACED*`, as
    /// from an analogue TV input); false for progressive frames.
    pub interlaced: bool,
    /// `bytesperline` of each V4L2 plane (one entry per buffer of a frame).
    pub bytesperline: Vec<u32>,
    /// `sizeimage` of each V4L2 plane.
    pub sizeimage: Vec<u32>,
    /// V4L2 `colorspace`, `ycbcr_enc` and `quantization` as reported (0 = default).
    pub v4l2_colorimetry: (u32, u32, u32),
    /// The colorimetry that follows from them (`None` for RGB/grey or when unknown).
    pub colorimetry: Option<Colorimetry>,
    /// Time per frame (numerator, denominator) in seconds, when the driver reports one.
    pub frame_interval: Option<(u32, u32)>,
    /// The layout every frame has (strides, planes, buffers, colorimetry).
    pub layout: ImageLayout,
}

impl CaptureFormat {
    /// Frames per second from [`frame_interval`](CaptureFormat::frame_interval).
    pub fn fps(&self) -> Option<f64> {
        self.frame_interval
            .filter(|&(n, d)| n > 0 && d > 0)
            .map(|(n, d)| d as f64 / n as f64)
    }
}

impl fmt::Display for CaptureFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}x{} {} ({}{}), bytesperline {:?}, sizeimage {:?}",
            self.width,
            self.height,
            self.format,
            crate::image::fourcc_to_string(self.fourcc),
            if self.multi_planar_api {
                ", mplane"
            } else {
                ""
            },
            self.bytesperline,
            self.sizeimage
        )?;
        if let Some(c) = self.colorimetry {
            write!(f, ", {c}")?;
        }
        if let Some(fps) = self.fps() {
            write!(f, ", {fps:.2} fps")?;
        }
        Ok(())
    }
}

/// A V4L2 camera, or the synthetic one; hands out [`Frame`]s.
pub struct Camera {
    inner: Inner,
    shared: Arc<Shared>,
    format: CaptureFormat,
    mode: BufferMode,
    name: String,
    timeout: Duration,
    stats: CameraStats,
    last_sequence: Option<u32>,
}

enum Inner {
    V4l2(v4l2::Stream),
    Synthetic(synthetic::Pattern),
}

/// Counters of what a camera delivered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CameraStats {
    /// Frames handed out.
    pub frames: u64,
    /// Frames the driver skipped (gaps in the sequence numbers).
    pub dropped: u64,
    /// Buffers the driver returned flagged `V4L2_BUF_FLAG_ERROR` or shorter than the
    /// layout; they are requeued and not handed out.
    pub errors: u64,
}

impl Camera {
    /// Opens a V4L2 capture device, negotiates `config` and starts streaming.
    ///
    /// A device whose formats pinframe cannot convert, or that reports a layout pinframe
    /// cannot describe, fails here with a message listing what it supports.
    pub fn open(path: impl AsRef<Path>, config: CameraConfig) -> Result<Camera> {
        config.validate()?;
        let opened = v4l2::Stream::open(path.as_ref(), &config)?;
        Ok(Camera {
            shared: opened.shared.clone(),
            format: opened.format,
            mode: opened.mode,
            name: opened.name,
            timeout: config.timeout,
            stats: CameraStats::default(),
            last_sequence: None,
            inner: Inner::V4l2(opened.stream),
        })
    }

    /// A synthetic camera: a moving test pattern (colour bars scrolling sideways, a
    /// grey ramp and a bouncing white box) in YUYV or NV12 (default YUYV, 640x480),
    /// BT.601 limited range, in DMA (or, in [`BufferMode::Mmap`], memfd) tensors.
    /// Runs unpaced unless `config.fps` is set.
    pub fn synthetic(config: CameraConfig) -> Result<Camera> {
        config.validate()?;
        let (pattern, shared, format, mode) = synthetic::Pattern::new(&config)?;
        Ok(Camera {
            shared,
            name: format!(
                "synthetic {}x{} {}",
                format.width, format.height, format.format
            ),
            format,
            mode,
            timeout: config.timeout,
            stats: CameraStats::default(),
            last_sequence: None,
            inner: Inner::Synthetic(pattern),
        })
    }

    /// What the camera delivers.
    pub fn format(&self) -> &CaptureFormat {
        &self.format
    }

    /// The layout of every frame.
    pub fn layout(&self) -> &ImageLayout {
        &self.format.layout
    }

    /// The buffer mode in use (never `Auto`).
    pub fn buffer_mode(&self) -> BufferMode {
        self.mode
    }

    /// Number of capture buffers (what the driver granted).
    pub fn buffer_count(&self) -> usize {
        self.shared.lock().slots.len()
    }

    /// Buffers held by the application now (frames not yet dropped).
    pub fn held_buffers(&self) -> usize {
        self.shared.lock().slots.iter().filter(|s| s.held).count()
    }

    /// The device's driver and card name (or "synthetic ...").
    pub fn name(&self) -> &str {
        &self.name
    }

    /// True for [`Camera::synthetic`].
    pub fn is_synthetic(&self) -> bool {
        matches!(self.inner, Inner::Synthetic(_))
    }

    /// Frames delivered, dropped and errored so far.
    pub fn stats(&self) -> CameraStats {
        self.stats
    }

    /// Frames the driver dropped so far (sequence gaps).
    pub fn dropped_frames(&self) -> u64 {
        self.stats.dropped
    }

    /// Waits (up to the configured timeout) for the next frame.
    ///
    /// Errors, by [`kind`](crate::Error::kind): every buffer is held by undropped frames
    /// ([`Error::AllBuffersHeld`], at once, never blocking: drop a frame and ask again), no
    /// frame within the timeout ([`Error::Timeout`]: ask again), the device vanished
    /// ([`Error::Disconnected`]: reopen it when it is back) or the driver failed the
    /// stream ([`Error::Device`]: reopen).
    pub fn next_frame(&mut self) -> Result<Frame> {
        self.next_frame_timeout(self.timeout)
    }

    /// [`next_frame`](Camera::next_frame) with an explicit timeout.
    pub fn next_frame_timeout(&mut self, timeout: Duration) -> Result<Frame> {
        {
            let state = self.shared.lock();
            if let Some(e) = &state.error {
                return Err(Error::Device(e.clone()));
            }
            let n = state.slots.len();
            if state.slots.iter().all(|s| s.held) {
                return Err(Error::AllBuffersHeld { buffers: n });
            }
        }
        let captured = match &mut self.inner {
            Inner::V4l2(s) => s.dequeue(
                &self.shared,
                &mut self.format.layout,
                timeout,
                &mut self.stats,
            )?,
            Inner::Synthetic(p) => p.render(&self.shared)?,
        };
        if let Some(last) = self.last_sequence {
            let gap = captured.sequence.wrapping_sub(last).wrapping_sub(1);
            // A sequence that went backwards (driver restart) is not a gap.
            if gap < u32::MAX / 2 {
                self.stats.dropped += gap as u64;
            }
        }
        self.last_sequence = Some(captured.sequence);
        self.stats.frames += 1;
        let tensor = self.shared.lock().slots[captured.index].tensor.clone();
        Ok(Frame {
            tensor: ManuallyDrop::new(tensor),
            shared: self.shared.clone(),
            index: captured.index,
            sequence: captured.sequence,
            timestamp: captured.timestamp,
            bytesused: captured.bytesused,
            planes: self.format.layout.buffer_count(),
        })
    }
}

impl fmt::Debug for Camera {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Camera")
            .field("name", &self.name)
            .field("format", &self.format)
            .field("mode", &self.mode)
            .field("stats", &self.stats)
            .finish()
    }
}

impl Drop for Camera {
    fn drop(&mut self) {
        if let Inner::V4l2(s) = &self.inner {
            s.stop(&self.shared);
        }
    }
}

/// One captured frame: derefs to the buffer's [`Tensor<u8>`] (a dma-buf for V4L2
/// cameras) with the frame's layout and colorimetry. Dropping it gives the buffer back to
/// the driver. Frames may be held (and sent to other threads); when every buffer is held,
/// [`Camera::next_frame`] returns an error instead of blocking.
pub struct Frame {
    tensor: ManuallyDrop<Arc<Tensor<u8>>>,
    shared: Arc<Shared>,
    index: usize,
    sequence: u32,
    timestamp: Duration,
    bytesused: [u32; 3],
    planes: usize,
}

impl Frame {
    /// The frame's tensor.
    pub fn tensor(&self) -> &Tensor<u8> {
        &self.tensor
    }

    /// The driver's frame sequence number.
    pub fn sequence(&self) -> u32 {
        self.sequence
    }

    /// Capture time as the driver stamped it (`CLOCK_MONOTONIC` for most drivers; time
    /// since the camera opened for the synthetic one).
    pub fn timestamp(&self) -> Duration {
        self.timestamp
    }

    /// Bytes of image data in the frame (summed over its buffers).
    pub fn bytesused(&self) -> usize {
        self.bytesused[..self.planes]
            .iter()
            .map(|&b| b as usize)
            .sum()
    }

    /// Bytes used in buffer `plane` of the frame (0 past the last buffer).
    pub fn plane_bytesused(&self, plane: usize) -> usize {
        if plane < self.planes {
            self.bytesused[plane] as usize
        } else {
            0
        }
    }

    /// The capture buffer index this frame occupies.
    pub fn buffer_index(&self) -> usize {
        self.index
    }
}

impl Deref for Frame {
    type Target = Tensor<u8>;
    fn deref(&self) -> &Tensor<u8> {
        &self.tensor
    }
}

impl AsRef<Tensor<u8>> for Frame {
    fn as_ref(&self) -> &Tensor<u8> {
        &self.tensor
    }
}

impl fmt::Debug for Frame {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Frame")
            .field("buffer", &self.index)
            .field("sequence", &self.sequence)
            .field("timestamp", &self.timestamp)
            .field("bytesused", &self.bytesused())
            .field("tensor", &*self.tensor)
            .finish()
    }
}

impl Drop for Frame {
    fn drop(&mut self) {
        // SAFETY: the tensor is dropped exactly once, here, and not used afterwards. It
        // goes before the buffer is released so that whoever reuses the slot next holds
        // the only reference to it.
        unsafe { ManuallyDrop::drop(&mut self.tensor) };
        self.shared.release(self.index);
    }
}

/// What a source produced for one frame.
pub(crate) struct Captured {
    pub index: usize,
    pub sequence: u32,
    pub timestamp: Duration,
    pub bytesused: [u32; 3],
}

/// State shared by a camera and its frames: the device (to requeue buffers when frames
/// drop, even from another thread) and the buffer slots.
pub(crate) struct Shared {
    queue: Option<v4l2::Queue>,
    state: Mutex<State>,
}

pub(crate) struct State {
    pub slots: Vec<Slot>,
    /// The device streams (buffers released by frames are queued again).
    pub streaming: bool,
    /// A failure found while requeueing from a frame's drop; reported by the next
    /// `next_frame`.
    pub error: Option<String>,
}

/// One capture buffer.
pub(crate) struct Slot {
    /// The buffer as a tensor (the same tensor for the life of the camera).
    pub tensor: Arc<Tensor<u8>>,
    /// Held by a [`Frame`].
    pub held: bool,
    /// With the driver.
    pub queued: bool,
    /// Per-plane dma-buf size to queue (DMABUF mode).
    pub lengths: [u32; 3],
    /// DMABUF mode: the allocations behind the tensor's fds.
    pub _backing: Vec<Tensor<u8>>,
}

impl Slot {
    /// A free slot (neither held nor queued) over `tensor`; `lengths` and `backing` as
    /// the fields say (zeros and none outside DMABUF mode).
    pub(crate) fn new(tensor: Tensor<u8>, lengths: [u32; 3], backing: Vec<Tensor<u8>>) -> Self {
        Slot {
            tensor: Arc::new(tensor),
            held: false,
            queued: false,
            lengths,
            _backing: backing,
        }
    }
}

impl Shared {
    pub(crate) fn new(queue: Option<v4l2::Queue>, slots: Vec<Slot>) -> Self {
        Shared {
            queue,
            state: Mutex::new(State {
                slots,
                streaming: false,
                error: None,
            }),
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Gives buffer `index` back: to the driver while streaming.
    fn release(&self, index: usize) {
        let mut state = self.lock();
        let streaming = state.streaming;
        let Some(slot) = state.slots.get_mut(index) else {
            return;
        };
        slot.held = false;
        if let (Some(queue), true) = (&self.queue, streaming) {
            match queue.enqueue(index, slot) {
                Ok(()) => slot.queued = true,
                Err(e) => {
                    log::error!("camera: requeueing buffer {index}: {e}");
                    state
                        .error
                        .get_or_insert_with(|| format!("requeueing buffer {index}: {e}"));
                }
            }
        }
    }
}
