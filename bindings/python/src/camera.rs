//! `pinframe.Camera`: V4L2 capture (or the synthetic camera) handing out `Frame`s.

use std::sync::Mutex;
use std::time::Duration;

use pinframe::Error;
use pinframe::camera::{BufferMode, Camera, CameraConfig};
use pyo3::exceptions::PyStopIteration;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use crate::args;
use crate::errors::{OrRaise, invalid};
use crate::tensor::{PyFrame, PyImageLayout};

/// A camera: a V4L2 capture device streaming into DMA-BUFs, or the built-in synthetic
/// camera (a moving test pattern).
///
/// Camera(source, size=None, format=None, fps=None, buffers=4, buffer_mode="auto",
///        timeout=5.0)
///
/// `source` is a device path ("/dev/video0") or "synthetic". `size` = (width, height),
/// `format` a pixel format name ("yuyv", "nv12", ...); None keeps the driver's choice (the
/// synthetic camera: 640x480 yuyv). `fps` None keeps the driver's rate (the synthetic
/// camera runs unpaced). `buffer_mode`: "dmabuf" (pinframe allocates DMA buffers),
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
}

impl PyCamera {
    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Camera>> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn with<R>(&self, f: impl FnOnce(&Camera) -> R) -> PyResult<R> {
        let guard = self.lock();
        let cam = guard.as_ref().ok_or_else(closed)?;
        Ok(f(cam))
    }
}

fn closed() -> PyErr {
    invalid("the camera is closed")
}

#[pymethods]
impl PyCamera {
    #[new]
    #[pyo3(signature = (source, size = None, format = None, fps = None, buffers = 4, buffer_mode = "auto", timeout = 5.0))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        source: &str,
        size: Option<(u32, u32)>,
        format: Option<&str>,
        fps: Option<u32>,
        buffers: u32,
        buffer_mode: &str,
        timeout: f64,
    ) -> PyResult<Self> {
        if !(timeout.is_finite() && timeout > 0.0) {
            return Err(invalid(format!(
                "timeout {timeout} must be a positive number of seconds"
            )));
        }
        let config = CameraConfig {
            size,
            format: format.map(args::format).transpose()?,
            fps,
            buffers,
            buffer_mode: buffer_mode.parse::<BufferMode>().or_raise()?,
            timeout: Duration::from_secs_f64(timeout),
            ..CameraConfig::default()
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
        })
    }

    /// next_frame(timeout=None) -> Frame
    ///
    /// Waits (the GIL released) up to `timeout` seconds (default: the camera's) for the
    /// next frame. Release it (`with` block, `release()`) to give its buffer back.
    #[pyo3(signature = (timeout = None))]
    fn next_frame(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Py<PyFrame>> {
        let timeout = match timeout {
            None => None,
            Some(t) if t.is_finite() && t > 0.0 => Some(Duration::from_secs_f64(t)),
            Some(t) => {
                return Err(invalid(format!(
                    "timeout {t} must be a positive number of seconds"
                )));
            }
        };
        let frame = py
            .detach(|| {
                let mut guard = self.lock();
                let cam = guard
                    .as_mut()
                    .ok_or_else(|| Error::InvalidArgument("the camera is closed".into()))?;
                match timeout {
                    Some(t) => cam.next_frame_timeout(t),
                    None => cam.next_frame(),
                }
            })
            .or_raise()?;
        PyFrame::create(py, frame)
    }

    fn __iter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    /// The next frame; a closed camera ends the iteration.
    fn __next__(&self, py: Python<'_>) -> PyResult<Py<PyFrame>> {
        if self.lock().is_none() {
            return Err(PyStopIteration::new_err(()));
        }
        self.next_frame(py, None)
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
    /// Stops streaming and closes the device. Frames still held stay valid (their
    /// buffers are freed when the last one is released). Idempotent.
    fn close(&self, py: Python<'_>) {
        let cam = self.lock().take();
        py.detach(move || drop(cam));
    }

    /// True once closed.
    #[getter]
    fn closed(&self) -> bool {
        self.lock().is_none()
    }

    /// The layout of every frame (an ImageLayout).
    #[getter]
    fn layout(&self) -> PyResult<PyImageLayout> {
        self.with(|c| PyImageLayout { inner: *c.layout() })
    }

    /// What the camera delivers: a dict with format, fourcc, width, height, fps,
    /// multi_planar_api, interlaced, bytesperline, sizeimage, colorimetry.
    #[getter]
    fn format<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let f = self.with(|c| c.format().clone())?;
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
    fn size(&self) -> PyResult<(u32, u32)> {
        self.with(|c| (c.format().width, c.format().height))
    }

    /// The buffer mode in use: "dmabuf" or "mmap".
    #[getter]
    fn buffer_mode(&self) -> PyResult<&'static str> {
        self.with(|c| c.buffer_mode().name())
    }

    /// Number of capture buffers (what the driver granted).
    #[getter]
    fn buffer_count(&self) -> PyResult<usize> {
        self.with(|c| c.buffer_count())
    }

    /// Buffers held by frames not yet released.
    #[getter]
    fn held_buffers(&self) -> PyResult<usize> {
        self.with(|c| c.held_buffers())
    }

    /// The device's driver and card name (or "synthetic ...").
    #[getter]
    fn name(&self) -> PyResult<String> {
        self.with(|c| c.name().to_owned())
    }

    /// True for the synthetic camera.
    #[getter]
    fn is_synthetic(&self) -> PyResult<bool> {
        self.with(|c| c.is_synthetic())
    }

    /// Frames delivered, dropped (sequence gaps) and errored so far, as a dict.
    #[getter]
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.with(|c| c.stats())?;
        let d = PyDict::new(py);
        d.set_item("frames", s.frames)?;
        d.set_item("dropped", s.dropped)?;
        d.set_item("errors", s.errors)?;
        Ok(d)
    }

    fn __repr__(&self) -> String {
        match self.lock().as_ref() {
            Some(c) => format!("Camera({:?}, {})", c.name(), c.format()),
            None => "Camera(closed)".into(),
        }
    }
}
