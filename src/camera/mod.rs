//! Camera capture: V4L2 streaming into DMA-BUFs, every frame a [`Tensor<u8>`], and a
//! synthetic camera with the same interface.
//!
//! ```no_run
//! use pinframe::camera::{Camera, CameraConfig};
//! use pinframe::{ImageProcessor, PixelFormat, Tensor, MemoryRequest, Access};
//!
//! let mut cam = Camera::open("/dev/video0", CameraConfig::new(1280, 720, PixelFormat::Yuyv))?;
//! let mut dst = Tensor::<f32>::image(640, 640, PixelFormat::PlanarRgb, MemoryRequest::Device)?;
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

mod pool;
mod synthetic;
#[cfg(test)]
mod tests;
mod v4l2;

use std::fmt;
use std::mem::ManuallyDrop;
use std::ops::Deref;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::image::{Colorimetry, ImageLayout, PixelFormat};
use crate::tensor::{DmaRoute, Tensor};
use crate::{Error, Result};
use pool::Shared;

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
    /// Synthetic `mjpeg` camera only: damage every `n`th frame, for testing how a
    /// pipeline copes with what USB webcams send. They alternate between a frame cut off
    /// before its end (caught at capture: counted in [`CameraStats::malformed`], its
    /// buffer reused, never handed out) and a frame whose data ends early behind a
    /// well-formed end marker (handed out; converting it fails with
    /// [`Error::CorruptFrame`]). `None` (the default) sends every frame whole.
    pub synthetic_corruption: Option<u32>,
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
            synthetic_corruption: None,
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

    /// Damages every `n`th frame of a synthetic `mjpeg` camera (see
    /// [`CameraConfig::synthetic_corruption`]).
    pub fn with_synthetic_corruption(mut self, every_nth: u32) -> Self {
        self.synthetic_corruption = Some(every_nth);
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
        if self.synthetic_corruption == Some(0) {
            return Err(Error::InvalidArgument(
                "synthetic corruption of every 0th frame; give n >= 1".into(),
            ));
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
    /// The device path (or the synthetic camera's name), for messages.
    dev: String,
    timeout: Duration,
}

enum Inner {
    V4l2,
    Synthetic(synthetic::Pattern),
}

/// What a camera counted. Each buffer the driver returned is counted once, by what it
/// was, and each sequence number it skipped as a drop: `frames + errors + empty +
/// malformed + dropped - repeated` is the span of sequence numbers from the first buffer
/// to the last (a driver that skips numbers for another reason shows up as `dropped`; one
/// that restarts its count is not a gap).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CameraStats {
    /// Frames handed out.
    pub frames: u64,
    /// Frames the driver skipped: gaps in the sequence numbers (a buffer the driver
    /// dropped, or a frame that came while no buffer was queued). Buffers counted below
    /// are not gaps.
    pub dropped: u64,
    /// Buffers the driver returned flagged `V4L2_BUF_FLAG_ERROR` (a corrupt frame); they
    /// go back to the driver and are not handed out.
    pub errors: u64,
    /// Buffers the driver returned with `bytesused` 0 and no error flag: no image, not a
    /// frame of stale data; queued again, not handed out.
    pub empty: u64,
    /// Buffers with less data than the layout needs, plane data offsets that do not
    /// fit the buffer, or (Motion-JPEG) a frame that is not a whole JPEG image (cut off
    /// before its end marker, of another size than negotiated); queued again, not handed
    /// out (bad data offsets also end that `next_frame` with [`Error::Device`]).
    pub malformed: u64,
    /// Buffers whose sequence number repeated the previous buffer's (a driver quirk; they
    /// are counted above as what they were, too).
    pub repeated: u64,
    /// `VIDIOC_QBUF` calls that failed while giving a buffer back (counted once each).
    /// The buffer is kept, not lost: the next [`Camera::next_frame`] queues it again and
    /// reports the error if that fails too.
    pub requeue_failures: u64,
}

/// Where a camera's buffers are now: [`Camera::buffer_accounting`].
///
/// Every buffer is in exactly one of `queued`, `held`, `pinned` or `idle`, so they add up
/// to `buffers`; `lost` counts the buffers whose place in pinframe's record disagrees with
/// the driver's own (`VIDIOC_QUERYBUF`), and is 0 unless something is broken.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct BufferAccounting {
    /// The camera's buffer count.
    pub buffers: usize,
    /// With the driver (for the synthetic camera: free for the next frame).
    pub queued: usize,
    /// In frames the application holds.
    pub held: usize,
    /// Their frames dropped, but pins over them are alive (see [`Frame`]).
    pub pinned: usize,
    /// With pinframe and due to go back to the driver (after a failed `VIDIOC_QBUF`, or
    /// once streaming stopped); the next [`Camera::next_frame`] queues them.
    pub idle: usize,
    /// Buffers pinframe's record places differently than the driver does.
    pub lost: usize,
}

impl BufferAccounting {
    /// True when every buffer is accounted for: nothing lost and the places add up.
    pub fn is_balanced(&self) -> bool {
        self.lost == 0 && self.queued + self.held + self.pinned + self.idle == self.buffers
    }
}

impl Camera {
    /// Opens a V4L2 capture device, negotiates `config` and starts streaming.
    ///
    /// A device whose formats pinframe cannot convert, or that reports a layout pinframe
    /// cannot describe, fails here ([`Error::Unsupported`]) with a message listing what it
    /// supports; a driver that refuses its buffers or to start streaming is an
    /// [`Error::Device`]; a node that is not a V4L2 device, or a bad `config`, is an
    /// invalid argument.
    pub fn open(path: impl AsRef<Path>, config: CameraConfig) -> Result<Camera> {
        config.validate()?;
        let path = path.as_ref();
        let opened = v4l2::open(path, &config)?;
        Ok(Camera {
            shared: opened.shared,
            format: opened.format,
            mode: opened.mode,
            name: opened.name,
            dev: path.display().to_string(),
            timeout: config.timeout,
            inner: Inner::V4l2,
        })
    }

    /// A synthetic camera: a moving test pattern (colour bars scrolling sideways, a
    /// grey ramp and a bouncing white box) in YUYV or NV12 (default YUYV, 640x480),
    /// BT.601 limited range, in DMA (or, in [`BufferMode::Mmap`], memfd) tensors.
    /// Runs unpaced unless `config.fps` is set.
    pub fn synthetic(config: CameraConfig) -> Result<Camera> {
        config.validate()?;
        let (pattern, shared, format, mode) = synthetic::Pattern::new(&config)?;
        let name = format!(
            "synthetic {}x{} {}",
            format.width, format.height, format.format
        );
        Ok(Camera {
            shared,
            dev: name.clone(),
            name,
            format,
            mode,
            timeout: config.timeout,
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

    /// Buffers the application holds now: in frames not yet dropped, or kept by pins over
    /// dropped frames.
    pub fn held_buffers(&self) -> usize {
        let state = self.shared.lock();
        state
            .slots
            .iter()
            // A pinned buffer whose last pin dropped is free, even before the next
            // `next_frame` gives it back.
            .filter(|s| match s.state {
                pool::SlotState::Held => true,
                pool::SlotState::Pinned => s.pinned(),
                _ => false,
            })
            .count()
    }

    /// Where every buffer is now, checked against the driver's record
    /// (`VIDIOC_QUERYBUF`); see [`BufferAccounting`]. Fails when the driver cannot be
    /// asked (a vanished device: [`Error::Disconnected`]).
    pub fn buffer_accounting(&self) -> Result<BufferAccounting> {
        self.shared.accounting(&self.dev)
    }

    /// The device's driver and card name (or "synthetic ...").
    pub fn name(&self) -> &str {
        &self.name
    }

    /// True for [`Camera::synthetic`].
    pub fn is_synthetic(&self) -> bool {
        matches!(self.inner, Inner::Synthetic(_))
    }

    /// What the camera counted so far: frames, drops, error/empty/malformed buffers and
    /// failed requeues (see [`CameraStats`]).
    pub fn stats(&self) -> CameraStats {
        self.shared.lock().stats
    }

    /// Frames the driver dropped so far (sequence gaps).
    pub fn dropped_frames(&self) -> u64 {
        self.stats().dropped
    }

    /// Waits (up to the configured timeout) for the next frame.
    ///
    /// Errors, by [`kind`](crate::Error::kind) (the README's capture loop shows what to do
    /// with each):
    /// - [`Error::AllBuffersHeld`] at once, never blocking, when every buffer is held by
    ///   undropped frames or pins over them: drop one and ask again;
    /// - [`Error::Timeout`] when no frame came in time: ask again;
    /// - [`Error::Disconnected`] when the device vanished (unplugged, driver unbound):
    ///   frames still held stay valid; drop the camera and open it again when it is back;
    /// - [`Error::Device`] when the driver failed the stream (a fatal streaming error, a
    ///   buffer it returned twice or with impossible plane offsets, a buffer it refused to
    ///   take back twice over): drop the camera and open it again.
    ///
    /// A stream that was disconnected or failed stays so: every later call returns the same
    /// error at once.
    pub fn next_frame(&mut self) -> Result<Frame> {
        self.next_frame_timeout(self.timeout)
    }

    /// How long [`next_frame`](Camera::next_frame) waits for a frame (the configured
    /// timeout).
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// [`next_frame`](Camera::next_frame) with an explicit timeout.
    pub fn next_frame_timeout(&mut self, timeout: Duration) -> Result<Frame> {
        let captured = match &mut self.inner {
            Inner::V4l2 => {
                v4l2::capture(&self.shared, &mut self.format.layout, timeout, &self.dev)?
            }
            Inner::Synthetic(p) => {
                self.shared.prepare(&self.dev)?;
                p.render(&self.shared, timeout)?
            }
        };
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

#[cfg(test)]
impl Camera {
    /// A camera over a fake driver queue (see `v4l2::fake`), streaming: every slot queued.
    pub(crate) fn with_queue(
        queue: Box<dyn v4l2::DeviceQueue>,
        slots: Vec<pool::Slot>,
        format: CaptureFormat,
    ) -> Camera {
        let shared = Arc::new(Shared::new(Some(queue), slots));
        {
            let mut state = shared.lock();
            state.streaming = true;
            for i in 0..state.slots.len() {
                assert!(state.requeue(shared.queue(), i).is_none());
            }
            shared.queue().unwrap().stream(true).unwrap();
        }
        Camera {
            shared,
            format,
            mode: BufferMode::Mmap,
            name: "fake".into(),
            dev: "fake".into(),
            timeout: Duration::from_millis(200),
            inner: Inner::V4l2,
        }
    }
}

impl fmt::Debug for Camera {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Camera")
            .field("name", &self.name)
            .field("format", &self.format)
            .field("mode", &self.mode)
            .field("stats", &self.stats())
            .finish()
    }
}

impl Drop for Camera {
    fn drop(&mut self) {
        if let Inner::V4l2 = self.inner {
            v4l2::stop(&self.shared, &self.dev);
        }
    }
}

/// One captured frame: derefs to the buffer's [`Tensor<u8>`] (a dma-buf for V4L2
/// cameras) with the frame's layout and colorimetry. Dropping it gives the buffer back to
/// the driver. Frames may be held (and sent to other threads); when every buffer is held,
/// [`Camera::next_frame`] returns an error instead of blocking.
///
/// A [`HostPin`](crate::HostPin) over a frame (`frame.pin_host()`) holds the buffer: the
/// driver does not get it back, and so cannot refill it under the pin, until both the
/// frame and every clone of the pin dropped (the camera notices a dropped pin at its next
/// [`next_frame`](Camera::next_frame)). Pinned buffers count as held; a pin kept for good
/// takes its buffer out of the camera's pool for good.
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
