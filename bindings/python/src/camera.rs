//! `pinframe.Camera`: V4L2 capture (or the synthetic camera) handing out `Frame`s.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use pinframe::camera::{BufferMode, Camera, CameraConfig, Frame, MAX_BUFFERS};
use pinframe::{Error, ErrorKind};
use pyo3::exceptions::PyStopIteration;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use crate::args;
use crate::errors::{OrRaise, invalid};
use crate::locks::lock_without_gil;
use crate::tensor::{PyFrame, PyImageLayout};

/// The highest frame rate a caller may ask for.
const MAX_FPS: i64 = 10_000;

/// A camera: a V4L2 capture device streaming into DMA-BUFs, or the built-in synthetic
/// camera (a moving test pattern).
///
/// Camera(source, size=None, format=None, fps=None, buffers=None, buffer_mode="auto",
///        timeout=5.0)
///
/// `source` is a device path ("/dev/video0") or "synthetic". `size` = (width, height),
/// `format` a pixel format name ("yuyv", "nv12", ...); None keeps the driver's choice (the
/// synthetic camera: 640x480 yuyv). `fps` None keeps the driver's rate (the synthetic
/// camera runs unpaced). `buffers` None is 4 capture buffers (1 to 32). `buffer_mode`: "dmabuf" (pinframe allocates DMA buffers),
/// "mmap" (the driver allocates; each buffer exported once) or "auto". `timeout` in
/// seconds for `next_frame`.
///
/// A camera is an iterator of frames and a context manager (closing on exit):
///
///     with pinframe.Camera("synthetic", size=(1280, 720)) as cam:
///         for frame in cam:
///             with frame:                 # the buffer goes back to the camera here
///                 proc.convert(frame, dst)
///
/// `next_frame()` raises AllBuffersHeld at once (never blocks) when every buffer is held
/// by a frame not yet released, Timeout when nothing arrives in time, Disconnected when
/// the device went away and DeviceError when the driver failed the stream.
#[pyclass(name = "Camera", module = "pinframe", frozen)]
pub(crate) struct PyCamera {
    inner: Mutex<Option<Camera>>,
    /// Set by `close()`: a `next_frame` waiting in another thread gives up at its next
    /// slice instead of holding the camera for the rest of its timeout.
    closing: AtomicBool,
}

/// How long one wait of `next_frame` holds the camera: `close()` and the getters in other
/// threads wait at most this long for it (the core camera has no way to interrupt a
/// `poll`, so a long timeout is waited for in slices).
const WAIT_SLICE: Duration = Duration::from_millis(20);

impl PyCamera {
    /// The camera, locked. Waits for another thread's `next_frame` slice with the GIL
    /// released, so that a waiting capture never freezes the interpreter.
    fn lock(&self, py: Python<'_>) -> MutexGuard<'_, Option<Camera>> {
        lock_without_gil(py, &self.inner)
    }

    fn with<R>(&self, py: Python<'_>, f: impl FnOnce(&Camera) -> R) -> PyResult<R> {
        let guard = self.lock(py);
        let cam = guard.as_ref().ok_or_else(closed)?;
        Ok(f(cam))
    }
}

impl PyCamera {
    /// The next frame, waited for in slices of [`WAIT_SLICE`] (the camera unlocked between
    /// them) until `timeout` (default: the camera's) or `close()`. Runs without the GIL.
    fn wait_for_frame(&self, timeout: Option<Duration>) -> pinframe::Result<Frame> {
        let is_closed = || Error::InvalidArgument("the camera is closed".into());
        let mut deadline = None;
        loop {
            if self.closing.load(Ordering::SeqCst) {
                return Err(is_closed());
            }
            let mut guard = self.inner.lock().unwrap_or_else(|e| e.into_inner());
            let cam = guard.as_mut().ok_or_else(is_closed)?;
            let total = timeout.unwrap_or(cam.timeout());
            let deadline = *deadline.get_or_insert_with(|| Instant::now() + total);
            let left = deadline.saturating_duration_since(Instant::now());
            match cam.next_frame_timeout(left.min(WAIT_SLICE)) {
                Err(e) if e.kind() == ErrorKind::Timeout && left > WAIT_SLICE => {}
                Err(e) if e.kind() == ErrorKind::Timeout => {
                    return Err(Error::Timeout(format!(
                        "no frame from camera {} within {total:?}",
                        cam.name()
                    )));
                }
                other => return other,
            }
        }
    }
}

fn closed() -> PyErr {
    invalid("the camera is closed")
}

#[pymethods]
impl PyCamera {
    #[new]
    #[pyo3(signature = (source, size = None, format = None, fps = None, buffers = None, buffer_mode = "auto", timeout = 5.0))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        source: &str,
        size: Option<&Bound<'_, PyAny>>,
        format: Option<&str>,
        fps: Option<&Bound<'_, PyAny>>,
        buffers: Option<&Bound<'_, PyAny>>,
        buffer_mode: &str,
        timeout: f64,
    ) -> PyResult<Self> {
        let dimension = |v: &Bound<'_, PyAny>, what: &str| {
            args::int_in::<u32>(v, what, 1, i64::from(pinframe::image::MAX_DIMENSION))
        };
        let size = match size {
            None => None,
            Some(s) => {
                let (w, h): (Bound<'_, PyAny>, Bound<'_, PyAny>) = s
                    .extract()
                    .map_err(|_| invalid("size must be a (width, height) pair"))?;
                Some((dimension(&w, "size width")?, dimension(&h, "size height")?))
            }
        };
        let defaults = CameraConfig::default();
        let config = CameraConfig {
            size,
            format: format.map(args::format).transpose()?,
            fps: fps
                .map(|f| args::int_in::<u32>(f, "fps", 1, MAX_FPS))
                .transpose()?,
            buffers: buffers
                .map(|b| args::int_in::<u32>(b, "buffers", 1, i64::from(MAX_BUFFERS)))
                .transpose()?
                .unwrap_or(defaults.buffers),
            buffer_mode: buffer_mode.parse::<BufferMode>().or_raise()?,
            timeout: args::seconds(timeout, "timeout")?,
            ..defaults
        };
        let source = source.to_owned();
        let cam = py
            .detach(move || {
                if source == "synthetic" {
                    Camera::synthetic(config)
                } else {
                    Camera::open(&source, config)
                }
            })
            .or_raise()?;
        Ok(PyCamera {
            inner: Mutex::new(Some(cam)),
            closing: AtomicBool::new(false),
        })
    }

    /// next_frame(timeout=None) -> Frame
    ///
    /// Waits (the GIL released) up to `timeout` seconds (default: the camera's) for the
    /// next frame. Release it (`with` block, `release()`) to give its buffer back.
    /// `close()` from another thread ends the wait (InvalidInput: the camera is closed).
    #[pyo3(signature = (timeout = None))]
    fn next_frame(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Py<PyFrame>> {
        let timeout = timeout.map(|t| args::seconds(t, "timeout")).transpose()?;
        let frame = py.detach(|| self.wait_for_frame(timeout)).or_raise()?;
        PyFrame::create(py, frame)
    }

    fn __iter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    /// The next frame; a closed camera ends the iteration.
    fn __next__(&self, py: Python<'_>) -> PyResult<Py<PyFrame>> {
        if self.lock(py).is_none() {
            return Err(PyStopIteration::new_err(()));
        }
        match self.next_frame(py, None) {
            // Closed by another thread while this one waited: the iteration ends.
            Err(_) if self.closing.load(Ordering::SeqCst) => Err(PyStopIteration::new_err(())),
            other => other,
        }
    }

    fn __enter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, PyTuple>) -> bool {
        self.close(py);
        false
    }

    /// close()
    ///
    /// Stops streaming and closes the device; a `next_frame()` waiting in another thread
    /// stops waiting. Frames still held stay valid (their buffers are freed when the last
    /// one is released). Idempotent.
    fn close(&self, py: Python<'_>) {
        self.closing.store(true, Ordering::SeqCst);
        let cam = self.lock(py).take();
        py.detach(move || drop(cam));
    }

    /// True once closed.
    #[getter]
    fn closed(&self, py: Python<'_>) -> bool {
        self.lock(py).is_none()
    }

    /// The layout of every frame (an ImageLayout).
    #[getter]
    fn layout(&self, py: Python<'_>) -> PyResult<PyImageLayout> {
        self.with(py, |c| PyImageLayout { inner: *c.layout() })
    }

    /// What the camera delivers: a dict with format, fourcc, width, height, fps,
    /// multi_planar_api, interlaced, bytesperline, sizeimage, colorimetry.
    #[getter]
    fn format<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let f = self.with(py, |c| c.format().clone())?;
        let d = PyDict::new(py);
        d.set_item("format", f.format.name())?;
        d.set_item("fourcc", pinframe::image::fourcc_to_string(f.fourcc))?;
        d.set_item("width", f.width)?;
        d.set_item("height", f.height)?;
        d.set_item("fps", f.fps())?;
        d.set_item("multi_planar_api", f.multi_planar_api)?;
        d.set_item("interlaced", f.interlaced)?;
        d.set_item("bytesperline", f.bytesperline.clone())?;
        d.set_item("sizeimage", f.sizeimage.clone())?;
        d.set_item(
            "colorimetry",
            f.colorimetry.map(|c| (c.matrix.name(), c.range.name())),
        )?;
        Ok(d)
    }

    /// The frame size, (width, height).
    #[getter]
    fn size(&self, py: Python<'_>) -> PyResult<(u32, u32)> {
        self.with(py, |c| (c.format().width, c.format().height))
    }

    /// The buffer mode in use: "dmabuf" or "mmap".
    #[getter]
    fn buffer_mode(&self, py: Python<'_>) -> PyResult<&'static str> {
        self.with(py, |c| c.buffer_mode().name())
    }

    /// Number of capture buffers (what the driver granted).
    #[getter]
    fn buffer_count(&self, py: Python<'_>) -> PyResult<usize> {
        self.with(py, |c| c.buffer_count())
    }

    /// Buffers held by frames not yet released.
    #[getter]
    fn held_buffers(&self, py: Python<'_>) -> PyResult<usize> {
        self.with(py, |c| c.held_buffers())
    }

    /// The device's driver and card name (or "synthetic ...").
    #[getter]
    fn name(&self, py: Python<'_>) -> PyResult<String> {
        self.with(py, |c| c.name().to_owned())
    }

    /// True for the synthetic camera.
    #[getter]
    fn is_synthetic(&self, py: Python<'_>) -> PyResult<bool> {
        self.with(py, |c| c.is_synthetic())
    }

    /// Frames delivered, dropped (sequence gaps) and errored so far, as a dict.
    #[getter]
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.with(py, |c| c.stats())?;
        let d = PyDict::new(py);
        d.set_item("frames", s.frames)?;
        d.set_item("dropped", s.dropped)?;
        d.set_item("errors", s.errors)?;
        Ok(d)
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        match self.lock(py).as_ref() {
            Some(c) => format!("Camera({:?}, {})", c.name(), c.format()),
            None => "Camera(closed)".into(),
        }
    }
}
