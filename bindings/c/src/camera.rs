//! Cameras (V4L2 and synthetic) and their frames.

use std::ffi::c_char;
use std::sync::Mutex;
use std::time::Duration;

use pinframe::camera::{BufferMode, Camera, CameraConfig, Frame};
use pinframe::tensor::DmaRoute;

use crate::status::{
    Failure, Handle, Outcome, SizedStruct, call, handle, pinframe_status, prepare_out, read_sized,
    str_arg, take_handle, write_out, write_sized,
};
use crate::tensor::{Slot, TENSOR_MAGIC, TensorHandle, pinframe_tensor};
use crate::types::*;

/// The longest wait a camera accepts, in milliseconds (`poll(2)`'s limit, about 24.8
/// days): `pinframe_camera_next_frame`'s `timeout_ms` and the config's `timeout_ms`.
pub const PINFRAME_TIMEOUT_MS_MAX: i64 = 2_147_483_647;

/// How capture buffers are allocated: one of the `PINFRAME_BUFFER_MODE_*` values.
#[allow(non_camel_case_types)]
pub type pinframe_buffer_mode = u32;
/// DMABUF when DMA memory can be allocated here, else MMAP.
pub const PINFRAME_BUFFER_MODE_AUTO: pinframe_buffer_mode = 0;
/// pinframe allocates a DMA buffer per capture buffer (`V4L2_MEMORY_DMABUF`).
pub const PINFRAME_BUFFER_MODE_DMABUF: pinframe_buffer_mode = 1;
/// The driver allocates (`V4L2_MEMORY_MMAP`), each buffer exported as a dma-buf.
pub const PINFRAME_BUFFER_MODE_MMAP: pinframe_buffer_mode = 2;

/// What to ask a camera for (pinframe's `CameraConfig`). Set
/// `struct_size = sizeof(pinframe_camera_config)`, then `pinframe_camera_config_init`
/// for the defaults; zero fields keep the driver's choice.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct pinframe_camera_config {
    /// `sizeof(pinframe_camera_config)`, set by the caller.
    pub struct_size: usize,
    /// Frame width; 0 (with `height` 0) keeps the device's size.
    pub width: u32,
    /// Frame height; see `width`.
    pub height: u32,
    /// A `PINFRAME_FORMAT_*` value; 0 picks the driver's first convertible format (the
    /// synthetic camera: YUYV).
    pub format: pinframe_format,
    /// An exact V4L2 fourcc (e.g. `NM12`); 0 = none. Overrides `format`.
    pub fourcc: u32,
    /// Frames per second to ask for; 0 keeps the driver's rate (the synthetic camera
    /// then runs unpaced).
    pub fps: u32,
    /// Capture buffers (default 4, at most 32).
    pub buffers: u32,
    /// A `PINFRAME_BUFFER_MODE_*` value.
    pub buffer_mode: pinframe_buffer_mode,
    /// How long `pinframe_camera_next_frame` waits when its timeout is negative, in
    /// milliseconds (default 5000); 1 to `PINFRAME_TIMEOUT_MS_MAX`.
    pub timeout_ms: u32,
    /// The one DMA allocation route in DMABUF mode: NULL for the usual order, else
    /// `"heap:NAME"` (a dma-heap), `"udmabuf"`, `"gbm"` or `"gbm:/dev/dri/NODE"`. Only
    /// read during the call.
    pub dma_route: *const c_char,
}

impl SizedStruct for pinframe_camera_config {
    const NAME: &'static str = "pinframe_camera_config";
    const RELEASED: &'static [usize] = &[size_of::<Self>()];
}

impl pinframe_camera_config {
    fn defaults() -> Self {
        let d = CameraConfig::default();
        pinframe_camera_config {
            struct_size: size_of::<Self>(),
            width: 0,
            height: 0,
            format: 0,
            fourcc: 0,
            fps: 0,
            buffers: d.buffers,
            buffer_mode: PINFRAME_BUFFER_MODE_AUTO,
            timeout_ms: d.timeout.as_millis().min(u32::MAX as u128) as u32,
            dma_route: std::ptr::null(),
        }
    }

    /// # Safety
    /// `dma_route` is NULL or a NUL-terminated string.
    // `..default()` keeps compiling, with defaults, when pinframe's struct gains fields.
    #[allow(clippy::needless_update)]
    unsafe fn to_config(self) -> Outcome<CameraConfig> {
        let dma_route = if self.dma_route.is_null() {
            None
        } else {
            // SAFETY: the caller's contract.
            let route = unsafe { str_arg(self.dma_route, "config.dma_route")? };
            Some(parse_route(route)?)
        };
        Ok(CameraConfig {
            size: match (self.width, self.height) {
                (0, 0) => None,
                (w, h) => Some((w, h)),
            },
            format: match self.format {
                0 => None,
                f => Some(format_from(f)?),
            },
            fourcc: (self.fourcc != 0).then_some(self.fourcc),
            fps: (self.fps != 0).then_some(self.fps),
            buffers: self.buffers,
            buffer_mode: match self.buffer_mode {
                PINFRAME_BUFFER_MODE_AUTO => BufferMode::Auto,
                PINFRAME_BUFFER_MODE_DMABUF => BufferMode::Dmabuf,
                PINFRAME_BUFFER_MODE_MMAP => BufferMode::Mmap,
                n => return Err(Failure::invalid(format!("unknown buffer mode {n}"))),
            },
            timeout: Duration::from_millis(timeout_ms(
                self.timeout_ms.into(),
                "config.timeout_ms",
            )?),
            dma_route,
            // Settings this struct does not carry yet keep their defaults.
            ..CameraConfig::default()
        })
    }
}

/// A timeout in milliseconds, checked against `PINFRAME_TIMEOUT_MS_MAX` (0 and negative
/// values are the callers' to handle).
fn timeout_ms(ms: i64, name: &str) -> Outcome<u64> {
    if ms > PINFRAME_TIMEOUT_MS_MAX {
        return Err(Failure::invalid(format!(
            "`{name}` {ms} ms is longer than PINFRAME_TIMEOUT_MS_MAX ({PINFRAME_TIMEOUT_MS_MAX} \
             ms, poll(2)'s limit); pass a negative timeout for the camera's configured one"
        )));
    }
    Ok(ms.max(0) as u64)
}

const _: () = assert!(PINFRAME_TIMEOUT_MS_MAX == i32::MAX as i64);

fn parse_route(s: &str) -> Outcome<DmaRoute> {
    Ok(match s.split_once(':') {
        Some(("heap", name)) if !name.is_empty() => DmaRoute::Heap(name.to_string()),
        Some(("gbm", path)) => DmaRoute::Gbm(path.to_string()),
        None if s == "udmabuf" => DmaRoute::Udmabuf,
        None if s == "gbm" => DmaRoute::Gbm(String::new()),
        _ => {
            return Err(Failure::invalid(format!(
                "unknown DMA route {s:?}; expected heap:NAME, udmabuf, gbm or gbm:PATH"
            )));
        }
    })
}

/// What a camera delivers (pinframe's `CaptureFormat` and buffer state). Set
/// `struct_size = sizeof(pinframe_camera_info)`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct pinframe_camera_info {
    /// `sizeof(pinframe_camera_info)`, set by the caller.
    pub struct_size: usize,
    /// Frame width.
    pub width: u32,
    /// Frame height.
    pub height: u32,
    /// The pixel format, a `PINFRAME_FORMAT_*` value.
    pub format: pinframe_format,
    /// The V4L2 fourcc (the DRM fourcc for the synthetic camera).
    pub fourcc: u32,
    /// The buffer mode in use (never AUTO).
    pub buffer_mode: pinframe_buffer_mode,
    /// Capture buffers the driver granted.
    pub buffer_count: u32,
    /// Buffers out of the driver's queue for the application: held by frames not yet
    /// released, or by live pins of released frames' tensors.
    pub held_buffers: u32,
    /// 1 for the synthetic camera.
    pub synthetic: u32,
    /// Frames delivered so far.
    pub frames: u64,
    /// Frames the driver dropped (sequence gaps).
    pub dropped: u64,
    /// Buffers the driver returned with errors (requeued, not delivered).
    pub errors: u64,
}

impl SizedStruct for pinframe_camera_info {
    const NAME: &'static str = "pinframe_camera_info";
    const RELEASED: &'static [usize] = &[size_of::<Self>()];
}

/// What one frame is. Set `struct_size = sizeof(pinframe_frame_info)`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct pinframe_frame_info {
    /// `sizeof(pinframe_frame_info)`, set by the caller.
    pub struct_size: usize,
    /// The driver's sequence number.
    pub sequence: u32,
    /// The capture buffer the frame occupies.
    pub buffer_index: u32,
    /// Capture time in nanoseconds (`CLOCK_MONOTONIC` for most drivers; since the camera
    /// opened for the synthetic one).
    pub timestamp_ns: u64,
    /// Bytes of image data (summed over the frame's buffers).
    pub bytesused: u64,
}

impl SizedStruct for pinframe_frame_info {
    const NAME: &'static str = "pinframe_frame_info";
    const RELEASED: &'static [usize] = &[size_of::<Self>()];
}

/// A camera: a V4L2 capture device streaming into DMA-BUFs, or the synthetic camera
/// (pinframe's `Camera`). Opaque; made by `pinframe_camera_open` or
/// `pinframe_camera_synthetic`, freed by `pinframe_camera_free`. May be used from any
/// thread; calls on one camera are serialised.
pub struct pinframe_camera {
    _opaque: [u8; 0],
}

/// One captured frame: its tensor (`pinframe_frame_get_tensor`) is the camera's buffer, with
/// the frame's layout and colorimetry. Opaque. A frame may outlive its camera.
///
/// Frames are read-only: their tensor maps only with `PINFRAME_ACCESS_READ`, is never a
/// conversion's destination, and the bytes of a pin of it must only be read.
///
/// A frame's buffer is out of the driver's queue while the frame is held, and while a
/// pin of its tensor (`pinframe_tensor_pin`) is alive: `pinframe_frame_release` gives
/// the buffer back to the camera at once when no pin of it is alive; otherwise the
/// buffer stays with the pin (counted in `pinframe_camera_info.held_buffers`) and goes
/// back when the last pin is freed (queued again by the next
/// `pinframe_camera_next_frame`). The camera never refills a buffer under a live pin.
pub struct pinframe_frame {
    _opaque: [u8; 0],
}

/// What a `pinframe_frame *` points to (inside a `Handle`).
struct FrameHandle {
    sequence: u32,
    buffer_index: u32,
    timestamp_ns: u64,
    bytesused: u64,
    /// The frame's tensor handle, which `pinframe_frame_get_tensor` points to.
    tensor: Handle<TensorHandle>,
}

const CAMERA_MAGIC: u64 = u64::from_be_bytes(*b"pfCamera");
const FRAME_MAGIC: u64 = u64::from_be_bytes(*b"pfFrame!");

/// # Safety
/// `p` is NULL or a live camera handle.
unsafe fn camera_arg<'a>(p: *const pinframe_camera, name: &str) -> Outcome<&'a Mutex<Camera>> {
    // SAFETY: the caller's contract.
    unsafe { handle(p, CAMERA_MAGIC, "pinframe_camera", name) }
}

/// # Safety
/// `p` is NULL or a live frame handle.
unsafe fn frame_arg<'a>(p: *const pinframe_frame, name: &str) -> Outcome<&'a FrameHandle> {
    // SAFETY: the caller's contract.
    unsafe { handle(p, FRAME_MAGIC, "pinframe_frame", name) }
}

/// # Safety
/// `config` is NULL or a `pinframe_camera_config` with its `struct_size` set.
unsafe fn config_arg(config: *const pinframe_camera_config) -> Outcome<CameraConfig> {
    let c = if config.is_null() {
        pinframe_camera_config::defaults()
    } else {
        // SAFETY: the caller's contract.
        unsafe { read_sized(config, "config", pinframe_camera_config::defaults())? }
    };
    // SAFETY: the caller's contract covers the struct's dma_route string.
    unsafe { c.to_config() }
}

fn boxed_camera(c: Camera) -> *mut pinframe_camera {
    Handle::new(CAMERA_MAGIC, Mutex::new(c)).into_raw()
}

/// Fills `*config` with the defaults (see `pinframe_camera_config`).
///
/// Ownership: writes `*config` (whose `struct_size` the caller set).
///
/// # Safety
/// `config` points to a `pinframe_camera_config` with its `struct_size` set.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pinframe_camera_config_init(
    config: *mut pinframe_camera_config,
) -> pinframe_status {
    // SAFETY: the caller's contract.
    call(|| unsafe { write_sized(config, "config", pinframe_camera_config::defaults()) })
}

/// Opens the V4L2 capture device at `path` (e.g. `"/dev/video0"`), negotiates `config`
/// (NULL = defaults) and starts streaming. A device pinframe cannot convert fails with a
/// message listing what it offers.
///
/// Ownership: on success `*out` is a new camera the caller frees with
/// `pinframe_camera_free`; on failure `*out` is NULL. `path` and `config` are only read.
///
/// # Safety
/// `path` is a NUL-terminated string; `config` is NULL or has its `struct_size` set;
/// `out` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pinframe_camera_open(
    path: *const c_char,
    config: *const pinframe_camera_config,
    out: *mut *mut pinframe_camera,
) -> pinframe_status {
    call(|| {
        // SAFETY: the caller's contract.
        unsafe { prepare_out(out, "out")? };
        // SAFETY: the caller's contract.
        let path = unsafe { str_arg(path, "path")? };
        // SAFETY: the caller's contract.
        let config = unsafe { config_arg(config)? };
        let cam = Camera::open(path, config)?;
        // SAFETY: checked above.
        unsafe { *out = boxed_camera(cam) };
        Ok(())
    })
}

/// Makes the synthetic camera: a moving test pattern (colour bars, a grey ramp, a
/// bouncing box) in YUYV or NV12 (default YUYV 640x480), BT.601 limited, in DMA (or, in
/// MMAP mode, memfd) buffers. `config` NULL = defaults.
///
/// Ownership: as `pinframe_camera_open`.
///
/// # Safety
/// `config` is NULL or has its `struct_size` set; `out` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pinframe_camera_synthetic(
    config: *const pinframe_camera_config,
    out: *mut *mut pinframe_camera,
) -> pinframe_status {
    call(|| {
        // SAFETY: the caller's contract.
        unsafe { prepare_out(out, "out")? };
        // SAFETY: the caller's contract.
        let config = unsafe { config_arg(config)? };
        let cam = Camera::synthetic(config)?;
        // SAFETY: checked above.
        unsafe { *out = boxed_camera(cam) };
        Ok(())
    })
}

/// What the camera delivers and its counters, in `*info` (whose `struct_size` the
/// caller set). The frame layout is `pinframe_tensor_get_layout` of any frame's tensor.
///
/// Ownership: borrows `camera`; writes `*info`.
///
/// # Safety
/// `camera` is a live handle; `info` points to a `pinframe_camera_info` with its
/// `struct_size` set.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pinframe_camera_get_info(
    camera: *const pinframe_camera,
    info: *mut pinframe_camera_info,
) -> pinframe_status {
    call(|| {
        // SAFETY: the caller's contract.
        let c = unsafe { camera_arg(camera, "camera")? };
        let cam = c.lock().unwrap_or_else(|e| e.into_inner());
        let f = cam.format();
        let stats = cam.stats();
        let out = pinframe_camera_info {
            struct_size: size_of::<pinframe_camera_info>(),
            width: f.width,
            height: f.height,
            format: format_code(f.format)?,
            fourcc: f.fourcc,
            buffer_mode: match cam.buffer_mode() {
                BufferMode::Dmabuf => PINFRAME_BUFFER_MODE_DMABUF,
                BufferMode::Mmap => PINFRAME_BUFFER_MODE_MMAP,
                _ => PINFRAME_BUFFER_MODE_AUTO,
            },
            buffer_count: cam.buffer_count() as u32,
            held_buffers: cam.held_buffers() as u32,
            synthetic: cam.is_synthetic() as u32,
            frames: stats.frames,
            dropped: stats.dropped,
            errors: stats.errors,
        };
        // SAFETY: the caller's contract.
        unsafe { write_sized(info, "info", out) }
    })
}

/// Waits up to `timeout_ms` milliseconds (negative: the camera's configured timeout; 0:
/// do not wait; above `PINFRAME_TIMEOUT_MS_MAX`: `PINFRAME_ERROR_INVALID_INPUT`) for the
/// next frame. Fails with `PINFRAME_ERROR_ALL_BUFFERS_HELD` at once when every buffer is
/// held by an unreleased frame or a live pin of a released one, `_TIMEOUT` when nothing arrived,
/// `_DISCONNECTED` when the device went away, `_DEVICE` when the driver failed the
/// stream.
///
/// Ownership: on success `*frame` is a new frame the caller releases with
/// `pinframe_frame_release`; on failure `*frame` is NULL.
///
/// # Safety
/// `camera` is a live handle; `frame` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pinframe_camera_next_frame(
    camera: *mut pinframe_camera,
    timeout_ms: i64,
    frame: *mut *mut pinframe_frame,
) -> pinframe_status {
    call(|| {
        // SAFETY: the caller's contract.
        let c = unsafe { camera_arg(camera, "camera")? };
        // SAFETY: the caller's contract.
        unsafe { prepare_out(frame, "frame")? };
        let mut cam = c.lock().unwrap_or_else(|e| e.into_inner());
        let f: Frame = if timeout_ms < 0 {
            cam.next_frame()?
        } else {
            cam.next_frame_timeout(Duration::from_millis(self::timeout_ms(
                timeout_ms,
                "timeout_ms",
            )?))?
        };
        let body = FrameHandle {
            sequence: f.sequence(),
            buffer_index: f.buffer_index() as u32,
            timestamp_ns: f.timestamp().as_nanos().min(u64::MAX as u128) as u64,
            bytesused: f.bytesused() as u64,
            tensor: Handle::new(TENSOR_MAGIC, TensorHandle::new(Slot::Frame(f))),
        };
        // SAFETY: checked above.
        unsafe { *frame = Handle::new(FRAME_MAGIC, body).into_raw() };
        Ok(())
    })
}

/// Frees a camera: streaming stops. Frames still held stay valid until released. NULL is
/// a no-op.
///
/// Ownership: takes `camera`.
///
/// # Safety
/// `camera` is NULL or a live handle not used by another thread during the call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pinframe_camera_free(camera: *mut pinframe_camera) -> pinframe_status {
    call(|| {
        // SAFETY: the caller's contract (a live camera handle, or NULL).
        drop(unsafe {
            take_handle::<_, Mutex<Camera>>(camera, CAMERA_MAGIC, "pinframe_camera", "camera")?
        });
        Ok(())
    })
}

/// The frame's tensor in `*tensor`: a u8 image (the camera's buffer) to convert, map for
/// reading, pin or sync. It belongs to the frame: do not free it; it is invalid after
/// `pinframe_frame_release`.
///
/// Ownership: borrows `frame`; `*tensor` is borrowed from it.
///
/// # Safety
/// `frame` is a live handle; `tensor` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pinframe_frame_get_tensor(
    frame: *const pinframe_frame,
    tensor: *mut *const pinframe_tensor,
) -> pinframe_status {
    call(|| {
        // SAFETY: the caller's contract.
        let f = unsafe { frame_arg(frame, "frame")? };
        // SAFETY: the caller's contract.
        let t = &f.tensor as *const Handle<TensorHandle> as *const pinframe_tensor;
        // SAFETY: the caller's contract.
        unsafe { write_out(tensor, "tensor", t) }
    })
}

/// The frame's sequence number, timestamp and size, in `*info` (whose `struct_size` the
/// caller set).
///
/// Ownership: borrows `frame`; writes `*info`.
///
/// # Safety
/// `frame` is a live handle; `info` points to a `pinframe_frame_info` with its
/// `struct_size` set.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pinframe_frame_get_info(
    frame: *const pinframe_frame,
    info: *mut pinframe_frame_info,
) -> pinframe_status {
    call(|| {
        // SAFETY: the caller's contract.
        let f = unsafe { frame_arg(frame, "frame")? };
        let out = pinframe_frame_info {
            struct_size: size_of::<pinframe_frame_info>(),
            sequence: f.sequence,
            buffer_index: f.buffer_index,
            timestamp_ns: f.timestamp_ns,
            bytesused: f.bytesused,
        };
        // SAFETY: the caller's contract.
        unsafe { write_sized(info, "info", out) }
    })
}

/// Releases a frame (a live mapping of its tensor is ended first). Its buffer goes back
/// to the camera at once, unless a pin of the frame's tensor is alive: then the pin keeps
/// the buffer out of the driver's queue, unchanged, until the last pin of it is freed
/// (see `pinframe_frame`). NULL is a no-op.
///
/// Ownership: takes `frame` (and its tensor).
///
/// # Safety
/// `frame` is NULL or a live handle not used by another thread during the call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pinframe_frame_release(frame: *mut pinframe_frame) -> pinframe_status {
    call(|| {
        // SAFETY: the caller's contract (a live frame handle, or NULL).
        if let Some(mut owned) =
            unsafe { take_handle::<_, FrameHandle>(frame, FRAME_MAGIC, "pinframe_frame", "frame")? }
        {
            owned.body.tensor.magic = 0; // its tensor handle goes with it
            drop(owned);
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_parse() {
        assert_eq!(parse_route("udmabuf").unwrap(), DmaRoute::Udmabuf);
        assert_eq!(
            parse_route("heap:system").unwrap(),
            DmaRoute::Heap("system".into())
        );
        assert_eq!(parse_route("gbm").unwrap(), DmaRoute::Gbm(String::new()));
        assert!(parse_route("heap:").is_err());
        assert!(parse_route("ion").is_err());
    }
}
