//! `pinframe.Tensor`, `pinframe.Frame`, `pinframe.HostPin`, `pinframe.ImageLayout` and the
//! view objects behind `map()` / `map_mut()` / `plane(i)`.
//!
//! Soundness across a released GIL: a tensor's state sits behind an `RwLock`. Calls that
//! release the GIL (`ImageProcessor.convert`, syncs, frame release) take the lock inside
//! the released region and hold no Python object there; other threads meanwhile wait for
//! the lock or read through views. Views never borrow the tensor: each holds a
//! [`HostPin`], which keeps the mapping (and the fd) alive until the last view, numpy
//! array or DLPack consumer built on it is gone, so no view can dangle, whatever other
//! threads do to the tensor object (convert into it, release a frame, drop it).

use std::fmt::Write as _;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{OnceLock, RwLock, RwLockReadGuard, RwLockWriteGuard};

use pinframe::camera::Frame;
use pinframe::{Access, Colorimetry, DType, Error, HostPin, ImageLayout, Plane, Tensor};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};

use crate::args::{self, Int};
use crate::array::{self, ArrayRef};
use crate::dlpack;
use crate::dyn_tensor::{AnyTensor, DynTensor, by_dtype};
use crate::errors::{OrRaise, invalid, to_py};
use crate::views::{self, Export};

/// What a `pinframe.Tensor` holds.
pub(crate) enum Held {
    Tensor(AnyTensor),
    /// A camera frame: its buffer goes back to the camera when this is dropped.
    Frame(Frame),
    /// A frame after `release()`.
    Released,
}

pub(crate) struct State {
    pub(crate) held: Held,
    /// Whole-tensor views follow the image layout (tensors made as images) rather than
    /// the shape (plain tensors, also after `set_layout`).
    by_layout: bool,
    /// Made on the first view and kept: every view of the tensor uses this one address.
    pin: OnceLock<HostPin<'static>>,
}

fn released() -> Error {
    Error::InvalidArgument(
        "this frame was released: its buffer went back to the camera. Use a frame inside its \
         `with` block, or before calling release()"
            .into(),
    )
}

impl State {
    pub(crate) fn get(&self) -> pinframe::Result<&dyn DynTensor> {
        match &self.held {
            Held::Tensor(t) => Ok(t.as_dyn()),
            Held::Frame(f) => Ok(f.tensor()),
            Held::Released => Err(released()),
        }
    }

    /// The tensor as a conversion source (`u8` elements).
    pub(crate) fn source(&self) -> pinframe::Result<&Tensor<u8>> {
        match &self.held {
            Held::Tensor(AnyTensor::U8(t)) => Ok(t),
            Held::Frame(f) => Ok(f.tensor()),
            Held::Released => Err(released()),
            Held::Tensor(t) => Err(Error::InvalidArgument(format!(
                "a conversion source holds u8 elements; this tensor holds {}",
                t.as_dyn().dtype()
            ))),
        }
    }

    /// The tensor as something to write (a conversion destination, `set_layout`).
    pub(crate) fn target(&mut self) -> pinframe::Result<&mut AnyTensor> {
        match &mut self.held {
            Held::Tensor(t) => Ok(t),
            Held::Frame(_) => Err(Error::InvalidArgument(
                "a camera frame is a source; convert it into a tensor of your own".into(),
            )),
            Held::Released => Err(released()),
        }
    }

    /// Camera frames are read-only in every binding: their buffer is the driver's.
    fn is_frame(&self) -> bool {
        !matches!(self.held, Held::Tensor(_))
    }

    /// Gives a frame's buffer back: the frame and the pin cached for its views are
    /// dropped, so nothing of this object keeps the buffer (views made before hold pins
    /// of their own and keep it until they go).
    fn release(&mut self) -> (Held, OnceLock<HostPin<'static>>) {
        (
            std::mem::replace(&mut self.held, Held::Released),
            std::mem::take(&mut self.pin),
        )
    }

    fn pin(&self) -> pinframe::Result<HostPin<'static>> {
        if let Some(p) = self.pin.get() {
            return Ok(p.clone());
        }
        let p = self.get()?.pin_host()?;
        Ok(self.pin.get_or_init(|| p).clone())
    }
}

/// A tensor: an n-dimensional array of `u8 i8 u16 i16 u32 i32 f16 f32 f64` in heap, memfd
/// (`shm`) or DMA-BUF (`dma`) memory, optionally an image with an `ImageLayout`.
///
/// Make one with `Tensor(shape, dtype, memory)`, `Tensor.image(w, h, format, dtype,
/// memory)`, `Tensor.with_layout(layout)`, `Tensor.import_fd(fd, layout)` or
/// `Tensor.from_numpy(array, format)`.
///
/// Zero copy: `numpy.asarray(t)` (buffer protocol / `__array_interface__`) and
/// `numpy.from_dlpack(t)` alias the tensor's memory, at the address `t.pin().address`;
/// image tensors are viewed in their layout's shape (`[h, w, c]`, `[3, h, w]`,
/// `[h + h/2, w]` for NV12, ...) with the row pitch as stride. On DMA memory bracket CPU
/// access with `with t.map() as a:` / `with t.map_mut() as a:` (which issue the
/// dma-buf sync calls), or with `sync_for_cpu()` / `sync_for_device()`.
#[pyclass(name = "Tensor", module = "pinframe", subclass, frozen)]
pub(crate) struct PyTensor {
    state: RwLock<State>,
}

impl PyTensor {
    pub(crate) fn from_any(t: AnyTensor, by_layout: bool) -> Self {
        PyTensor {
            state: RwLock::new(State {
                held: Held::Tensor(t),
                by_layout,
                pin: OnceLock::new(),
            }),
        }
    }

    pub(crate) fn from_frame(f: Frame) -> Self {
        PyTensor {
            state: RwLock::new(State {
                held: Held::Frame(f),
                by_layout: true,
                pin: OnceLock::new(),
            }),
        }
    }

    /// Shared access. A poisoned lock (a panic while it was held) is recovered: the state
    /// is valid between statements.
    pub(crate) fn read(&self) -> RwLockReadGuard<'_, State> {
        self.state.read().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn write(&self) -> RwLockWriteGuard<'_, State> {
        self.state.write().unwrap_or_else(|e| e.into_inner())
    }

    /// [`read`](Self::read) from a thread holding the GIL: waits for a writer (a
    /// conversion into this tensor) with the GIL released.
    pub(crate) fn read_gil(&self, py: Python<'_>) -> RwLockReadGuard<'_, State> {
        crate::locks::read_without_gil(py, &self.state)
    }

    /// The whole-tensor view (read-only if `readonly` or the memory is).
    /// The whole-tensor view (read-only if `readonly`, the memory is, or it is a frame).
    /// The view holds a pin of its own, so it stays valid whatever happens to the tensor.
    pub(crate) fn export(&self, py: Python<'_>, readonly: bool) -> PyResult<Export> {
        let st = self.read_gil(py);
        let t = st.get().or_raise()?;
        let (offset, shape, strides) = views::geometry(t, st.by_layout).or_raise()?;
        let pin = st.pin().or_raise()?;
        Export::new(&pin, offset, shape, strides, readonly || st.is_frame()).or_raise()
    }

    fn plane_export(&self, py: Python<'_>, index: usize, readonly: bool) -> PyResult<Export> {
        let st = self.read_gil(py);
        let t = st.get().or_raise()?;
        let (offset, shape, strides) = views::plane_geometry(t, index).or_raise()?;
        let pin = st.pin().or_raise()?;
        Export::new(&pin, offset, shape, strides, readonly || st.is_frame()).or_raise()
    }

    fn sync(&self, py: Python<'_>, access: &str, start: bool) -> PyResult<()> {
        let access = args::access(access)?;
        py.detach(|| {
            let st = self.read();
            let t = st.get()?;
            if start {
                t.sync_for_cpu(access)
            } else {
                t.sync_for_device(access)
            }
        })
        .or_raise()
    }
}

/// The fd behind a Python fd argument (an int or an object with `fileno()`), duplicated
/// (close-on-exec) so that it is ours while we use it, whatever the caller does.
fn dup_fd(obj: &Bound<'_, PyAny>) -> PyResult<OwnedFd> {
    let raw: i64 = match obj.extract::<i64>() {
        Ok(fd) => fd,
        Err(_) => obj
            .call_method0("fileno")
            .and_then(|f| f.extract::<i64>())
            .map_err(|_| {
                invalid(format!(
                    "{} is not a file descriptor",
                    obj.repr().map(|r| r.to_string()).unwrap_or_default()
                ))
            })?,
    };
    let fd = i32::try_from(raw)
        .ok()
        .filter(|&fd| fd >= 0)
        .ok_or_else(|| {
            to_py(Error::InvalidFd(format!(
                "fd {raw} is not a valid descriptor"
            )))
        })?;
    // SAFETY: fcntl(F_DUPFD_CLOEXEC) on any integer is memory-safe: it fails with EBADF
    // when the number is not an open descriptor, and otherwise returns a new descriptor
    // that nothing else owns.
    let dup = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
    if dup < 0 {
        let e = std::io::Error::last_os_error();
        return Err(to_py(if e.raw_os_error() == Some(libc::EBADF) {
            Error::InvalidFd(format!("fd {fd} is not open"))
        } else {
            Error::Io {
                context: format!("duplicating fd {fd}"),
                source: e,
            }
        }));
    }
    // SAFETY: `dup` is a fresh descriptor returned to us alone.
    Ok(unsafe { OwnedFd::from_raw_fd(dup) })
}

/// Copies the planes of an image from `src` (laid out as `src_layout`) into `dst` (laid
/// out as `dst_layout`), row by row.
fn copy_planes(src: &[u8], src_layout: &ImageLayout, dst: &mut [u8], dst_layout: &ImageLayout) {
    for (i, (sp, dp)) in src_layout
        .planes()
        .iter()
        .zip(dst_layout.planes())
        .enumerate()
    {
        let row = src_layout.plane_row_bytes(i);
        for y in 0..src_layout.plane_height(i) as usize {
            let s = sp.offset + y * sp.stride;
            let d = dp.offset + y * dp.stride;
            dst[d..d + row].copy_from_slice(&src[s..s + row]);
        }
    }
}

/// The bytes of an array that `check_extent` (or C-contiguity) proved span `len` bytes.
///
/// # Safety
/// `a` must describe live memory of at least `len` bytes from `a.ptr` that nothing
/// writes while the slice is used (the caller holds a reference to the array).
unsafe fn array_bytes<'a>(a: &ArrayRef, len: usize) -> &'a [u8] {
    // SAFETY: guaranteed by the caller.
    unsafe { std::slice::from_raw_parts(a.ptr as *const u8, len) }
}

#[pymethods]
impl PyTensor {
    /// Tensor(shape, dtype="u8", memory=None)
    ///
    /// A zero-filled tensor of `shape` (a tuple of positive ints) in `memory`: "heap",
    /// "shm" (a sealed memfd another process can map) or "dma" (a DMA-BUF devices share);
    /// None or "auto" = shm, else heap (never dma: a tensor only the CPU touches does not
    /// spend a device's CMA pool); "device" = the best memory devices reach (dma, then shm,
    /// then heap), for GL destinations and runtime inputs. An explicit memory kind that
    /// cannot be allocated raises MemoryUnavailable naming every route tried.
    #[new]
    #[pyo3(signature = (shape, dtype = None, memory = None))]
    fn new(
        py: Python<'_>,
        shape: Vec<Int<usize>>,
        dtype: Option<&Bound<'_, PyAny>>,
        memory: Option<&str>,
    ) -> PyResult<Self> {
        let shape = args::ints(&shape);
        let dtype = dtype.map(args::dtype).transpose()?.unwrap_or(DType::U8);
        let memory = args::memory(memory)?;
        let t = py
            .detach(|| by_dtype!(dtype, T => Tensor::<T>::new(&shape, memory)))
            .or_raise()?;
        Ok(PyTensor::from_any(t, false))
    }

    /// Tensor.image(width, height, format, dtype="u8", memory=None, *, batch=None) -> Tensor
    ///
    /// An image tensor of `format` ("yuyv", "nv12", "rgb", "planar-rgb", ...; YUV formats
    /// hold u8). DMA images get rows aligned to 64 bytes (the row pitch is the numpy
    /// view's first stride); heap and shm images are tightly packed.
    ///
    /// `batch=N` makes a batch of N images of one buffer each (the Rust
    /// `Tensor::image_batch`), slice after slice: shape `(N, h, w, c)` for packed
    /// formats, `(N, 3, h, w)` for planar RGB, and numpy / DLPack views see all of it.
    /// `ImageProcessor.convert_batch` fills it. N must be at least 1 (InvalidInput);
    /// formats of several buffers cannot be batched.
    #[staticmethod]
    #[pyo3(signature = (width, height, format, dtype = None, memory = None, *, batch = None))]
    fn image(
        py: Python<'_>,
        width: Int<u32>,
        height: Int<u32>,
        format: &str,
        dtype: Option<&Bound<'_, PyAny>>,
        memory: Option<&str>,
        batch: Option<Int<usize>>,
    ) -> PyResult<Self> {
        let (Int(width), Int(height)) = (width, height);
        let format = args::format(format)?;
        let dtype = dtype.map(args::dtype).transpose()?.unwrap_or(DType::U8);
        let memory = args::memory(memory)?;
        let t = py
            .detach(|| match batch {
                None => by_dtype!(dtype, T => Tensor::<T>::image(width, height, format, memory)),
                Some(Int(count)) => by_dtype!(dtype, T => {
                    Tensor::<T>::image_batch(count, width, height, format, memory)
                }),
            })
            .or_raise()?;
        Ok(PyTensor::from_any(t, true))
    }

    /// Tensor.with_layout(layout, memory=None) -> Tensor
    ///
    /// An image tensor with an explicit `ImageLayout` (strides, plane offsets, several
    /// buffers), of the layout's dtype.
    #[staticmethod]
    #[pyo3(signature = (layout, memory = None))]
    fn with_layout(py: Python<'_>, layout: &PyImageLayout, memory: Option<&str>) -> PyResult<Self> {
        let memory = args::memory(memory)?;
        let layout = layout.inner;
        let t = py
            .detach(|| by_dtype!(layout.dtype(), T => Tensor::<T>::with_layout(layout, memory)))
            .or_raise()?;
        Ok(PyTensor::from_any(t, true))
    }

    /// Tensor.import_fd(fd, layout) -> Tensor
    ///
    /// Imports a dma-buf or memfd holding one image laid out as `layout`. `fd` is an int
    /// or has `fileno()`; a list of them imports an image whose planes live in several
    /// buffers (`Plane.buffer` indexes the list). The fds are duplicated: the caller
    /// keeps (and closes) its own. A closed fd, a file that is neither a dma-buf nor a
    /// memfd, or a buffer smaller than the layout raises InvalidInput. A memfd without
    /// `F_SEAL_SHRINK` raises ImportRefused (a truncation under the tensor's mapping would
    /// kill the process with SIGBUS): create it with `os.MFD_ALLOW_SEALING` and seal it,
    /// `fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK)`.
    ///
    /// Aliasing rule: the buffer has other holders (its exporter, devices, other
    /// processes, other tensors imported from it). While a view of the tensor is alive
    /// (a `map()` block, a numpy array, memoryview or DLPack capsule over it, a pin being
    /// read), nobody else may write the bytes it covers; while a `map_mut()` view is
    /// alive, nobody else may read or write them. Writes between views (a camera filling
    /// a queued buffer, a GPU rendering) are fine. Breaking the rule gives views whose
    /// bytes change under them, which the Rust library treats as undefined behaviour.
    #[staticmethod]
    fn import_fd(py: Python<'_>, fd: &Bound<'_, PyAny>, layout: &PyImageLayout) -> PyResult<Self> {
        let fds: Vec<OwnedFd> = if let Ok(list) = fd.cast::<PyList>() {
            list.iter().map(|f| dup_fd(&f)).collect::<PyResult<_>>()?
        } else if let Ok(tuple) = fd.cast::<PyTuple>() {
            tuple.iter().map(|f| dup_fd(&f)).collect::<PyResult<_>>()?
        } else {
            vec![dup_fd(fd)?]
        };
        let layout = layout.inner;
        let t = py
            .detach(|| {
                let borrowed: Vec<BorrowedFd<'_>> =
                    fds.iter().map(std::os::fd::AsFd::as_fd).collect();
                // SAFETY: the aliasing rule `Tensor::import_planes` asks for is this
                // method's documented contract with its Python caller (the docstring above
                // and the stub), as numpy's `frombuffer` leaves writers to its caller.
                by_dtype!(layout.dtype(), T => unsafe {
                    Tensor::<T>::import_planes(&borrowed, layout)
                })
            })
            .or_raise()?;
        Ok(PyTensor::from_any(t, true))
    }

    /// Tensor.from_numpy(array, format=None, memory=None) -> Tensor
    ///
    /// A new tensor holding a copy of `array` (any array numpy understands, any strides).
    /// With `format`, the array is an image in pinframe's tensor shape of that format
    /// (`(h, w, 3)` rgb, `(h, w, 2)` yuyv, `(h + h//2, w)` nv12/i420, `(3, h, w)`
    /// planar-rgb, `(h, row_bytes)` uint8 Bayer/y10/y12/y16, `(h + h//2, row_bytes)`
    /// p010/p012/p016, ...) and the result is an image tensor of the array's dtype (like
    /// `Tensor.image`); without, a plain tensor of the array's shape. Formats of 16-bit
    /// samples (rggb10, bggr12, gbrg16, y10, p010, ...) also take what a numpy user holds,
    /// a uint16 `(h, w)` (`(h + h//2, w)` for p01x) array of samples, whose bytes become
    /// the tensor's u8 image (shape `(h, 2 * w)`).
    #[staticmethod]
    #[pyo3(signature = (array, format = None, memory = None))]
    fn from_numpy(
        py: Python<'_>,
        array: &Bound<'_, PyAny>,
        format: Option<&str>,
        memory: Option<&str>,
    ) -> PyResult<Self> {
        let memory = args::memory(memory)?;
        let format = format.map(args::format).transpose()?;
        // Any strides are fine for a copy: let numpy pack the array first if it must.
        let array = array::ascontiguousarray(&array::asarray(array)?)?;
        let a = array::array_ref(&array)?
            .ok_or_else(|| invalid("numpy returned an array without __array_interface__"))?;
        match format {
            None => {
                let len = a.shape.iter().product::<usize>() * a.dtype.size();
                // SAFETY: the array is C-contiguous (ascontiguousarray) and holds `len`
                // bytes; `array` keeps it alive for this call, and the bytes are only read.
                let bytes = unsafe { array_bytes(&a, len) };
                let shape = a.shape.clone();
                let t = py
                    .detach(|| {
                        let mut t = by_dtype!(a.dtype, T => Tensor::<T>::new(&shape, memory))?;
                        t.as_dyn_mut()
                            .write_bytes(&mut |dst| dst.copy_from_slice(bytes))?;
                        Ok::<_, Error>(t)
                    })
                    .or_raise()?;
                Ok(PyTensor::from_any(t, false))
            }
            Some(format) => {
                let src_layout = array::image_layout(&a, format)?;
                // SAFETY: image_layout checked that the array spans required_len bytes;
                // `array` keeps it alive for this call, and the bytes are only read.
                let bytes = unsafe { array_bytes(&a, src_layout.required_len(0)) };
                let t = py
                    .detach(|| {
                        let (w, h) = (src_layout.width(), src_layout.height());
                        // The layout's dtype, not the array's: a uint16 array of a RAW
                        // format is read as the u8 bytes pinframe's RAW layouts hold.
                        let mut t = by_dtype!(src_layout.dtype(), T => Tensor::<T>::image(w, h, format, memory))?;
                        let dst_layout = *t.as_dyn().layout().expect("an image tensor");
                        t.as_dyn_mut().write_bytes(&mut |dst| {
                            copy_planes(bytes, &src_layout, dst, &dst_layout)
                        })?;
                        Ok::<_, Error>(t)
                    })
                    .or_raise()?;
                Ok(PyTensor::from_any(t, true))
            }
        }
    }

    /// The shape, a tuple (for images, the layout's: `(h, w, c)`, `(3, h, w)`, ...).
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let st = self.read_gil(py);
        PyTuple::new(py, st.get().or_raise()?.shape())
    }

    /// The element type's pinframe name: "u8", "i8", "u16", "i16", "u32", "i32", "f16",
    /// "f32" or "f64".
    #[getter]
    fn dtype(&self, py: Python<'_>) -> PyResult<&'static str> {
        Ok(self.read_gil(py).get().or_raise()?.dtype().name())
    }

    /// Where the bytes live: "heap", "shm" or "dma".
    #[getter]
    fn memory(&self, py: Python<'_>) -> PyResult<&'static str> {
        Ok(self.read_gil(py).get().or_raise()?.memory().name())
    }

    /// The image layout (an `ImageLayout`), or None for a plain tensor.
    #[getter]
    fn layout(&self, py: Python<'_>) -> PyResult<Option<PyImageLayout>> {
        let st = self.read_gil(py);
        Ok(st
            .get()
            .or_raise()?
            .layout()
            .map(|l| PyImageLayout { inner: *l }))
    }

    /// Images in the tensor: N for a batch made with `Tensor.image(..., batch=N)`, else 1.
    #[getter]
    fn batch(&self, py: Python<'_>) -> PyResult<usize> {
        let st = self.read_gil(py);
        Ok(st.get().or_raise()?.batch_len())
    }

    /// Bytes of the elements of the shape (`prod(shape) * itemsize`).
    #[getter]
    fn nbytes(&self, py: Python<'_>) -> PyResult<usize> {
        let st = self.read_gil(py);
        let t = st.get().or_raise()?;
        Ok(t.shape().iter().product::<usize>() * t.dtype().size())
    }

    /// Number of buffers (more than one only for images whose planes live apart).
    #[getter]
    fn buffer_count(&self, py: Python<'_>) -> PyResult<usize> {
        Ok(self.read_gil(py).get().or_raise()?.buffer_count())
    }

    /// Size in bytes of buffer `index` (the whole allocation).
    #[pyo3(signature = (index = Int(0)))]
    fn buffer_len(&self, py: Python<'_>, index: Int<usize>) -> PyResult<usize> {
        let Int(index) = index;
        self.read_gil(py)
            .get()
            .or_raise()?
            .buffer_len(index)
            .ok_or_else(|| invalid(format!("buffer {index} does not exist")))
    }

    /// For self-allocated DMA tensors, the route that allocated them (a dma-heap,
    /// udmabuf or GBM), else None.
    #[getter]
    fn dma_route(&self, py: Python<'_>) -> PyResult<Option<String>> {
        Ok(self.read_gil(py).get().or_raise()?.dma_route())
    }

    /// False when the CPU may not write the memory (imported from a read-only fd or a
    /// write-sealed memfd, or a camera frame); numpy views are then read-only.
    #[getter]
    fn writable(&self, py: Python<'_>) -> PyResult<bool> {
        let st = self.read_gil(py);
        Ok(!st.is_frame() && st.pin().or_raise()?.writable())
    }

    /// fd(index=0) -> int | None
    ///
    /// The fd of buffer `index` for shm and dma tensors (None for heap). The tensor owns
    /// it: it is valid while the tensor lives; `os.dup()` it to keep one.
    #[pyo3(signature = (index = Int(0)))]
    fn fd(&self, py: Python<'_>, index: Int<usize>) -> PyResult<Option<i32>> {
        let Int(index) = index;
        let st = self.read_gil(py);
        let t = st.get().or_raise()?;
        if index >= t.buffer_count() {
            return Err(invalid(format!(
                "buffer {index} does not exist; the tensor has {}",
                t.buffer_count()
            )));
        }
        Ok(t.buffer_fd(index).map(|fd| fd.as_raw_fd()))
    }

    /// pin() -> HostPin
    ///
    /// A stable host address for the tensor's bytes, to hand to an inference runtime
    /// once (`pin.address`, `pin.nbytes`). The pin keeps the memory mapped even after the
    /// tensor is gone; it issues no syncs: bracket each access with `pin.sync_for_cpu()`
    /// and `pin.sync_for_device()` on DMA memory.
    fn pin(slf: &Bound<'_, Self>) -> PyResult<PyHostPin> {
        let pin = slf.get().read_gil(slf.py()).pin().or_raise()?;
        Ok(PyHostPin {
            pin,
            tensor: slf.clone().unbind(),
        })
    }

    /// sync_for_cpu(access="read")
    ///
    /// Starts a CPU access to the tensor (DMA_BUF_IOCTL_SYNC START on dma-bufs; nothing
    /// on heap and shm). `access` is "read", "write" or "readwrite".
    #[pyo3(signature = (access = "read"))]
    fn sync_for_cpu(&self, py: Python<'_>, access: &str) -> PyResult<()> {
        self.sync(py, access, true)
    }

    /// sync_for_device(access="read")
    ///
    /// Ends a CPU access and hands the tensor back to the devices (sync END on dma-bufs).
    #[pyo3(signature = (access = "read"))]
    fn sync_for_device(&self, py: Python<'_>, access: &str) -> PyResult<()> {
        self.sync(py, access, false)
    }

    /// map() -> context manager giving a read-only numpy view
    ///
    /// `with t.map() as a:` syncs the dma-buf for CPU reads on entry (START|READ) and
    /// hands it back on exit (END|READ); `a` aliases the tensor (no copy).
    fn map(slf: &Bound<'_, Self>) -> PyResult<PyMapping> {
        Ok(PyMapping::new(slf, Access::Read))
    }

    /// map_mut() -> context manager giving a writable numpy view
    ///
    /// `with t.map_mut() as a:` syncs for READ|WRITE on entry and exit, so writes through
    /// `a` reach the devices. Raises InvalidInput on read-only memory.
    fn map_mut(slf: &Bound<'_, Self>) -> PyResult<PyMapping> {
        let st = slf.get().read_gil(slf.py());
        if st.is_frame() {
            return Err(invalid(
                "a camera frame is read-only (its buffer is the driver's): convert it, or copy \
                 it with numpy.array(frame)",
            ));
        }
        if !st.pin().or_raise()?.writable() {
            return Err(to_py(Error::InvalidArgument(
                "tensor is read-only (imported from a read-only fd or a write-sealed memfd)".into(),
            )));
        }
        drop(st);
        Ok(PyMapping::new(slf, Access::ReadWrite))
    }

    /// plane(index) -> numpy.ndarray
    ///
    /// A view of plane `index` of an image: `(rows, elements per row)` with the plane's
    /// row pitch as stride (e.g. the Y and the CbCr plane of NV12). Works for every
    /// single-buffer layout, also those that cannot be viewed as one array.
    fn plane<'py>(slf: &Bound<'py, Self>, index: Int<usize>) -> PyResult<Bound<'py, PyAny>> {
        let Int(index) = index;
        let export = slf.get().plane_export(slf.py(), index, false)?;
        let view = Bound::new(slf.py(), PyView { export })?;
        array::asarray(view.as_any())
    }

    /// set_layout(layout)
    ///
    /// Describes the tensor's buffer as the image `layout` (validated against its
    /// size), e.g. one tile of a batch tensor as a conversion destination. The shape and
    /// the whole-tensor view stay the tensor's own.
    fn set_layout(&self, py: Python<'_>, layout: &PyImageLayout) -> PyResult<()> {
        let layout = layout.inner;
        py.detach(|| {
            let mut st = self.write();
            st.target()?.as_dyn_mut().set_layout(layout)?;
            st.by_layout = false;
            // The pin's window may grow with the layout's extent: make it afresh.
            st.pin = OnceLock::new();
            Ok::<_, Error>(())
        })
        .or_raise()
    }

    /// __array__(dtype=None, copy=None) -> numpy.ndarray
    ///
    /// A numpy array aliasing the tensor (what `numpy.asarray(t)` calls where the buffer
    /// protocol is not available, abi3 builds for Python < 3.11). The array's base is a
    /// view that holds its own pin, so it stays valid whatever happens to the tensor. A
    /// `dtype` other than the tensor's, or `copy=True`, gives a copy.
    #[pyo3(signature = (dtype = None, copy = None))]
    fn __array__<'py>(
        &self,
        py: Python<'py>,
        dtype: Option<&Bound<'py, PyAny>>,
        copy: Option<bool>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let view = Bound::new(
            py,
            PyView {
                export: self.export(py, false)?,
            },
        )?;
        let array = array::asarray(view.as_any())?;
        match (dtype, copy) {
            (None, Some(true)) => array.call_method0("copy"),
            (Some(d), _) => {
                let kwargs = PyDict::new(py);
                kwargs.set_item("copy", copy.unwrap_or(false))?;
                array.call_method("astype", (d,), Some(&kwargs))
            }
            _ => Ok(array),
        }
    }

    /// DLPack export: a capsule aliasing the tensor (`numpy.from_dlpack(t)`,
    /// `torch.from_dlpack(t)`). CPU memory only, no copy (`copy=True` is refused).
    #[pyo3(signature = (*, stream = None, max_version = None, dl_device = None, copy = None))]
    fn __dlpack__<'py>(
        &self,
        py: Python<'py>,
        stream: Option<&Bound<'py, PyAny>>,
        max_version: Option<(u32, u32)>,
        dl_device: Option<(i32, i32)>,
        copy: Option<bool>,
    ) -> PyResult<Bound<'py, PyAny>> {
        use pyo3::exceptions::PyBufferError;
        if let Some(s) = stream
            && !s.is_none()
        {
            let ok = s.extract::<i64>().is_ok_and(|v| v == -1);
            if !ok {
                return Err(PyBufferError::new_err(
                    "pinframe tensors are CPU memory: the DLPack stream must be None",
                ));
            }
        }
        if let Some(d) = dl_device
            && d != (dlpack::DEVICE_CPU, 0)
        {
            return Err(PyBufferError::new_err(format!(
                "pinframe tensors are on the CPU device (1, 0), not {d:?}"
            )));
        }
        if copy == Some(true) {
            return Err(PyBufferError::new_err(
                "pinframe exports views, never copies; copy the result instead",
            ));
        }
        let versioned = max_version.is_some_and(|(major, _)| major >= 1);
        let export = self.export(py, false)?;
        dlpack::capsule(py, &export, versioned)
    }

    /// The DLPack device: (1, 0), the CPU (DMA memory is mapped for the CPU).
    fn __dlpack_device__(&self) -> (i32, i32) {
        (dlpack::DEVICE_CPU, 0)
    }

    #[cfg(any(not(Py_LIMITED_API), Py_3_11))]
    unsafe fn __getbuffer__(
        slf: Bound<'_, Self>,
        view: *mut pyo3::ffi::Py_buffer,
        flags: std::ffi::c_int,
    ) -> PyResult<()> {
        let export = slf.get().export(slf.py(), false)?;
        // SAFETY: CPython hands `bf_getbuffer` a valid Py_buffer.
        unsafe { views::buffer::fill(view, flags, &export, slf.into_any()) }
    }

    #[cfg(any(not(Py_LIMITED_API), Py_3_11))]
    unsafe fn __releasebuffer__(&self, view: *mut pyo3::ffi::Py_buffer) {
        // SAFETY: `view` was filled by `__getbuffer__` and is released once.
        unsafe { views::buffer::release(view) }
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        let st = self.read_gil(py);
        match st.get() {
            Ok(t) => {
                let mut s = format!(
                    "Tensor(shape={:?}, dtype={}, memory={}",
                    t.shape(),
                    t.dtype(),
                    t.memory()
                );
                if let Some(l) = t.layout() {
                    let _ = write!(s, ", {}x{} {}", l.width(), l.height(), l.format());
                }
                s.push(')');
                s
            }
            Err(_) => "Tensor(released frame)".into(),
        }
    }
}

/// A camera frame: a `Tensor` (u8, a dma-buf in the camera's layout) whose buffer goes
/// back to the camera when it is released: at the end of `with cam.next_frame() as f:`,
/// on `f.release()`, or when the frame object is garbage-collected. Frames are read-only.
/// A view made from a frame (numpy array, memoryview, DLPack, plane) holds a pin of its
/// own: the buffer goes back to the camera when the frame is released and the last such
/// view is gone (never refilled under a live view); nothing else read from the frame
/// keeps it.
#[pyclass(name = "Frame", module = "pinframe", extends = PyTensor, frozen)]
pub(crate) struct PyFrame {
    sequence: u32,
    timestamp: f64,
    buffer_index: usize,
    bytesused: usize,
}

impl PyFrame {
    pub(crate) fn create(py: Python<'_>, frame: Frame) -> PyResult<Py<PyFrame>> {
        let me = PyFrame {
            sequence: frame.sequence(),
            timestamp: frame.timestamp().as_secs_f64(),
            buffer_index: frame.buffer_index(),
            bytesused: frame.bytesused(),
        };
        Py::new(
            py,
            PyClassInitializer::from(PyTensor::from_frame(frame)).add_subclass(me),
        )
    }
}

#[pymethods]
impl PyFrame {
    /// The driver's frame sequence number.
    #[getter]
    fn sequence(&self) -> u32 {
        self.sequence
    }

    /// Capture time in seconds (CLOCK_MONOTONIC for most drivers; since the camera opened
    /// for the synthetic one).
    #[getter]
    fn timestamp(&self) -> f64 {
        self.timestamp
    }

    /// The capture buffer this frame occupies.
    #[getter]
    fn buffer_index(&self) -> usize {
        self.buffer_index
    }

    /// Bytes of image data in the frame.
    #[getter]
    fn bytesused(&self) -> usize {
        self.bytesused
    }

    /// True once the frame was released.
    #[getter]
    fn released(slf: &Bound<'_, Self>) -> bool {
        matches!(slf.as_super().get().read_gil(slf.py()).held, Held::Released)
    }

    /// release()
    ///
    /// Gives the buffer back to the camera now (requeued to the driver). Idempotent.
    fn release(slf: &Bound<'_, Self>) {
        let base = slf.as_super().get();
        slf.py().detach(|| {
            let old = base.write().release();
            drop(old);
        });
    }

    fn __enter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(slf: &Bound<'_, Self>, _exc: &Bound<'_, PyTuple>) -> bool {
        Self::release(slf);
        false
    }

    fn __repr__(slf: &Bound<'_, Self>) -> String {
        let me = slf.get();
        format!(
            "Frame(sequence={}, buffer={}, {})",
            me.sequence,
            me.buffer_index,
            slf.as_super().get().__repr__(slf.py())
        )
    }
}

/// A stable host address for a tensor's bytes (the Rust `HostPin`): hand `address` and
/// `nbytes` to an inference runtime once, and bracket each access with `sync_for_cpu()`
/// / `sync_for_device()` (dma-buf cache maintenance; no-ops on heap and shm). The address
/// stays valid while the pin lives, even if the tensor is converted into meanwhile.
#[pyclass(name = "HostPin", module = "pinframe", frozen)]
pub(crate) struct PyHostPin {
    pin: HostPin<'static>,
    tensor: Py<PyTensor>,
}

#[pymethods]
impl PyHostPin {
    /// The address of the first byte, an int (e.g. ONNX Runtime's `buffer_ptr`).
    #[getter]
    fn address(&self) -> usize {
        self.pin.as_ptr() as usize
    }

    /// Length of the window in bytes (first byte to the end of the last row's data).
    #[getter]
    fn nbytes(&self) -> usize {
        self.pin.len()
    }

    /// The largest power of two dividing the address (at least 64 for pinframe's memory).
    #[getter]
    fn alignment(&self) -> usize {
        self.pin.alignment()
    }

    /// The pinned tensor's element type ("u8", "f32", ...).
    #[getter]
    fn dtype(&self) -> &'static str {
        self.pin.dtype().name()
    }

    /// False for memory the CPU may only read.
    #[getter]
    fn writable(&self) -> bool {
        self.pin.writable()
    }

    /// The tensor this pin was made from.
    #[getter]
    fn tensor(&self, py: Python<'_>) -> Py<PyTensor> {
        self.tensor.clone_ref(py)
    }

    /// sync_for_cpu(access="read"): the tensor's `sync_for_cpu` (call before the CPU or a
    /// CPU runtime reads or writes through the pin).
    #[pyo3(signature = (access = "read"))]
    fn sync_for_cpu(&self, py: Python<'_>, access: &str) -> PyResult<()> {
        self.tensor.get().sync(py, access, true)
    }

    /// sync_for_device(access="read"): the tensor's `sync_for_device` (call after the
    /// access, before a device uses the memory again).
    #[pyo3(signature = (access = "read"))]
    fn sync_for_device(&self, py: Python<'_>, access: &str) -> PyResult<()> {
        self.tensor.get().sync(py, access, false)
    }

    fn __repr__(&self) -> String {
        format!(
            "HostPin(address=0x{:x}, nbytes={}, alignment={}, dtype={})",
            self.pin.as_ptr() as usize,
            self.pin.len(),
            self.pin.alignment(),
            self.pin.dtype()
        )
    }
}

/// A view of tensor memory numpy reads through `__array_interface__` (or the buffer
/// protocol); it holds a pin, so the memory stays mapped while any array built on it lives.
#[pyclass(name = "_View", module = "pinframe", frozen)]
pub(crate) struct PyView {
    export: Export,
}

#[pymethods]
impl PyView {
    #[getter]
    fn __array_interface__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        self.export.array_interface(py)
    }

    #[cfg(any(not(Py_LIMITED_API), Py_3_11))]
    unsafe fn __getbuffer__(
        slf: Bound<'_, Self>,
        view: *mut pyo3::ffi::Py_buffer,
        flags: std::ffi::c_int,
    ) -> PyResult<()> {
        let export = slf.get().export.clone();
        // SAFETY: CPython hands `bf_getbuffer` a valid Py_buffer.
        unsafe { views::buffer::fill(view, flags, &export, slf.into_any()) }
    }

    #[cfg(any(not(Py_LIMITED_API), Py_3_11))]
    unsafe fn __releasebuffer__(&self, view: *mut pyo3::ffi::Py_buffer) {
        // SAFETY: `view` was filled by `__getbuffer__` and is released once.
        unsafe { views::buffer::release(view) }
    }
}

/// The context manager of `Tensor.map()` / `Tensor.map_mut()`: syncs the dma-buf for the
/// CPU on entry and for the devices on exit; `__enter__` returns a numpy view.
#[pyclass(name = "Mapping", module = "pinframe", frozen)]
pub(crate) struct PyMapping {
    tensor: Py<PyTensor>,
    access: Access,
    entered: AtomicBool,
}

impl PyMapping {
    fn new(t: &Bound<'_, PyTensor>, access: Access) -> Self {
        PyMapping {
            tensor: t.clone().unbind(),
            access,
            entered: AtomicBool::new(false),
        }
    }
}

#[pymethods]
impl PyMapping {
    fn __enter__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        if self.entered.swap(true, Ordering::SeqCst) {
            return Err(invalid("this mapping is already entered; call map() again"));
        }
        let t = self.tensor.get();
        let access = self.access;
        let started = py.detach(|| t.read().get()?.sync_for_cpu(access));
        if let Err(e) = started {
            self.entered.store(false, Ordering::SeqCst);
            return Err(to_py(e));
        }
        let view = t
            .export(py, access == Access::Read)
            .and_then(|export| Bound::new(py, PyView { export }))
            .and_then(|v| array::asarray(v.as_any()));
        if view.is_err() {
            let _ = py.detach(|| t.read().get()?.sync_for_device(access));
            self.entered.store(false, Ordering::SeqCst);
        }
        view
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, PyTuple>) -> PyResult<bool> {
        if !self.entered.swap(false, Ordering::SeqCst) {
            return Ok(false);
        }
        let t = self.tensor.get();
        let access = self.access;
        py.detach(|| match t.read().get() {
            Ok(t) => t.sync_for_device(access),
            // A frame released inside the block: its buffer went back already.
            Err(_) => Ok(()),
        })
        .or_raise()?;
        Ok(false)
    }
}

/// Where each plane of an image lies in its buffer(s): size, format, dtype, plane offsets
/// and row pitches (validated), DRM modifier and colorimetry (the Rust `ImageLayout`).
///
/// ImageLayout(width, height, format, dtype="u8", stride=None, planes=None,
///             row_alignment=None)
///
/// Without `stride`/`planes`/`row_alignment` the image is tightly packed. `stride` is the
/// first plane's row pitch in bytes (the others follow as V4L2 lays them out);
/// `row_alignment` pads every row and plane to a multiple of it; `planes` lists each
/// plane as `(offset, stride)` or `(buffer, offset, stride)`.
#[pyclass(name = "ImageLayout", module = "pinframe", frozen, eq, hash)]
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct PyImageLayout {
    pub(crate) inner: ImageLayout,
}

#[pymethods]
impl PyImageLayout {
    #[new]
    #[pyo3(signature = (width, height, format, dtype = None, stride = None, planes = None, row_alignment = None))]
    fn new(
        width: Int<u32>,
        height: Int<u32>,
        format: &str,
        dtype: Option<&Bound<'_, PyAny>>,
        stride: Option<Int<usize>>,
        planes: Option<Vec<Vec<Int<usize>>>>,
        row_alignment: Option<Int<usize>>,
    ) -> PyResult<Self> {
        let (Int(width), Int(height)) = (width, height);
        let (stride, row_alignment) = (stride.map(|s| s.0), row_alignment.map(|a| a.0));
        let planes: Option<Vec<Vec<usize>>> =
            planes.map(|p| p.iter().map(|p| args::ints(p)).collect());
        let format = args::format(format)?;
        let dtype = dtype.map(args::dtype).transpose()?.unwrap_or(DType::U8);
        let given = [stride.is_some(), planes.is_some(), row_alignment.is_some()];
        if given.iter().filter(|&&g| g).count() > 1 {
            return Err(invalid(
                "give at most one of stride, planes and row_alignment",
            ));
        }
        let inner = if let Some(stride) = stride {
            ImageLayout::with_stride(width, height, format, dtype, stride)
        } else if let Some(planes) = planes {
            let planes = planes
                .iter()
                .map(|p| match p.as_slice() {
                    [offset, stride] => Ok(Plane::new(*offset, *stride)),
                    [buffer, offset, stride] => Ok(Plane {
                        buffer: *buffer,
                        offset: *offset,
                        stride: *stride,
                    }),
                    _ => Err(invalid(
                        "each plane is (offset, stride) or (buffer, offset, stride)",
                    )),
                })
                .collect::<PyResult<Vec<_>>>()?;
            ImageLayout::with_planes(width, height, format, dtype, &planes)
        } else if let Some(a) = row_alignment {
            ImageLayout::with_row_alignment(width, height, format, dtype, a)
        } else {
            ImageLayout::tight(width, height, format, dtype)
        }
        .or_raise()?;
        Ok(PyImageLayout { inner })
    }

    /// Width in pixels.
    #[getter]
    fn width(&self) -> u32 {
        self.inner.width()
    }

    /// Height in pixels.
    #[getter]
    fn height(&self) -> u32 {
        self.inner.height()
    }

    /// The pixel format's name ("nv12", "rgb", ...).
    #[getter]
    fn format(&self) -> &'static str {
        self.inner.format().name()
    }

    /// The element type's name.
    #[getter]
    fn dtype(&self) -> &'static str {
        self.inner.dtype().name()
    }

    /// The planes, each `(buffer, offset, stride)`, in the format's plane order.
    #[getter]
    fn planes(&self) -> Vec<(usize, usize, usize)> {
        self.inner
            .planes()
            .iter()
            .map(|p| (p.buffer, p.offset, p.stride))
            .collect()
    }

    /// Number of separate buffers the planes live in.
    #[getter]
    fn buffer_count(&self) -> usize {
        self.inner.buffer_count()
    }

    /// The tensor shape of this image (`(h, w, c)`, `(3, h, w)`, `(h + h//2, w)`, ...).
    #[getter]
    fn shape(&self) -> Vec<usize> {
        self.inner.shape()
    }

    /// The DRM format modifier (0 = linear).
    #[getter]
    fn modifier(&self) -> u64 {
        self.inner.modifier()
    }

    /// `(matrix, range)`, e.g. `("bt709", "limited")`, or None when unknown.
    #[getter]
    fn colorimetry(&self) -> Option<(&'static str, &'static str)> {
        self.inner
            .colorimetry()
            .map(|c| (c.matrix.name(), c.range.name()))
    }

    /// Bytes buffer `buffer` must have: the end of its last plane's last row.
    #[pyo3(signature = (buffer = 0))]
    fn required_len(&self, buffer: usize) -> usize {
        self.inner.required_len(buffer)
    }

    /// Bytes an allocator should reserve for buffer `buffer` (whole rows of every plane).
    #[pyo3(signature = (buffer = 0))]
    fn allocation_len(&self, buffer: usize) -> usize {
        self.inner.allocation_len(buffer)
    }

    /// with_colorimetry(matrix, range) -> ImageLayout: the same layout with a known
    /// colorimetry ("bt601"/"bt709"/"bt2020", "limited"/"full"), or without (None, None).
    #[pyo3(signature = (matrix = None, range = None))]
    fn with_colorimetry(&self, matrix: Option<&str>, range: Option<&str>) -> PyResult<Self> {
        let c = match (matrix, range) {
            (None, None) => None,
            (Some(m), Some(r)) => Some(Colorimetry::new(
                m.parse().or_raise()?,
                r.parse().or_raise()?,
            )),
            _ => return Err(invalid("give both matrix and range, or neither")),
        };
        Ok(PyImageLayout {
            inner: self.inner.with_colorimetry(c),
        })
    }

    /// with_modifier(modifier) -> ImageLayout: the same layout with a DRM modifier.
    fn with_modifier(&self, modifier: u64) -> Self {
        PyImageLayout {
            inner: self.inner.with_modifier(modifier),
        }
    }

    fn __repr__(&self) -> String {
        let l = &self.inner;
        format!(
            "ImageLayout({}x{} {} {}, planes={:?})",
            l.width(),
            l.height(),
            l.format(),
            l.dtype(),
            self.planes()
        )
    }
}
