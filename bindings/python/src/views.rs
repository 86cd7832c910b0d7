//! Zero-copy views of tensor memory for Python: the geometry (shape and byte strides) of a
//! tensor or one of its planes, `__array_interface__` dicts, and (Python 3.11+) the buffer
//! protocol. Every view holds a [`HostPin`], so the memory it points at stays mapped for as
//! long as the view (or anything numpy made from it) is alive.

use pinframe::image::FormatFamily;
use pinframe::{DType, Error, HostPin, ImageLayout, Result};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use crate::array::typestr;
use crate::dyn_tensor::DynTensor;

/// Where a view's elements are: an address inside a pin, shape and byte strides.
#[derive(Clone, Debug)]
pub(crate) struct Export {
    pub ptr: usize,
    pub shape: Vec<usize>,
    /// Byte strides (all non-negative).
    pub strides: Vec<isize>,
    pub dtype: DType,
    pub readonly: bool,
    /// Keeps the mapping alive.
    pub pin: HostPin<'static>,
}

impl Export {
    /// A view `offset` bytes into `pin` with `shape` and `strides`, checked to lie inside the
    /// pin's window.
    pub(crate) fn new(
        pin: &HostPin<'static>,
        offset: usize,
        shape: Vec<usize>,
        strides: Vec<isize>,
        readonly: bool,
    ) -> Result<Self> {
        let item = pin.dtype().size();
        let mut end = offset + item;
        for (&d, &s) in shape.iter().zip(&strides) {
            debug_assert!(s >= 0);
            end += (d.saturating_sub(1)) * s as usize;
        }
        if end > pin.len() {
            return Err(Error::InvalidLayout(format!(
                "a view of {end} bytes does not fit the tensor's {} bytes",
                pin.len()
            )));
        }
        Ok(Export {
            ptr: pin.as_ptr() as usize + offset,
            shape,
            strides,
            dtype: pin.dtype(),
            readonly: readonly || !pin.writable(),
            pin: pin.clone(),
        })
    }

    /// Bytes the view's elements cover if they were packed.
    #[cfg(any(not(Py_LIMITED_API), Py_3_11))]
    pub(crate) fn nbytes(&self) -> usize {
        self.shape.iter().product::<usize>() * self.dtype.size()
    }

    /// True when the elements are C-contiguous.
    #[cfg(any(not(Py_LIMITED_API), Py_3_11))]
    pub(crate) fn is_c_contiguous(&self) -> bool {
        c_contiguous(&self.shape, &self.strides, self.dtype.size())
    }

    /// `__array_interface__` (version 3).
    pub(crate) fn array_interface<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("version", 3)?;
        d.set_item("shape", PyTuple::new(py, &self.shape)?)?;
        d.set_item("typestr", typestr(self.dtype))?;
        d.set_item("data", (self.ptr, self.readonly))?;
        d.set_item("strides", PyTuple::new(py, &self.strides)?)?;
        Ok(d)
    }
}

#[cfg(any(not(Py_LIMITED_API), Py_3_11))]
fn c_contiguous(shape: &[usize], strides: &[isize], item: usize) -> bool {
    let mut expect = item as isize;
    for (&d, &s) in shape.iter().zip(strides).rev() {
        if d != 1 && s != expect {
            return false;
        }
        expect *= d as isize;
    }
    true
}

fn contiguous_strides(shape: &[usize], item: usize) -> Vec<isize> {
    let mut st = vec![0isize; shape.len()];
    let mut acc = item as isize;
    for (d, s) in shape.iter().zip(st.iter_mut()).rev() {
        *s = acc;
        acc *= *d as isize;
    }
    st
}

fn not_one_array(layout: &ImageLayout, why: &str) -> Error {
    Error::Unsupported(format!(
        "this {}x{} {} layout cannot be viewed as one array ({why}); view each plane with \
         tensor.plane(i)",
        layout.width(),
        layout.height(),
        layout.format()
    ))
}

/// `(offset, shape, strides)` of slice 0 of a batch tensor made the view of all of it:
/// the count first, one slice's bytes apart (for a single image, unchanged).
fn batched(
    t: &dyn DynTensor,
    (offset, mut shape, mut strides): (usize, Vec<usize>, Vec<isize>),
) -> (usize, Vec<usize>, Vec<isize>) {
    if let Some((count, step)) = t.batch() {
        shape.insert(0, count);
        strides.insert(0, step as isize);
    }
    (offset, shape, strides)
}

/// Offset, shape and byte strides of the whole-tensor view: the tensor's shape, C-ordered,
/// for plain tensors (and those given a layout with `set_layout`); for image tensors the
/// layout's shape (`ImageLayout::shape`) with its row pitch and plane offsets, after the
/// count for a batch (`(N, h, w, c)`, `(N, 3, h, w)`).
pub(crate) fn geometry(
    t: &dyn DynTensor,
    by_layout: bool,
) -> Result<(usize, Vec<usize>, Vec<isize>)> {
    let item = t.dtype().size();
    let layout = match t.layout() {
        Some(l) if by_layout => l,
        _ => {
            let shape = t.shape().to_vec();
            let strides = contiguous_strides(&shape, item);
            return Ok((0, shape, strides));
        }
    };
    image_geometry(layout, item).map(|g| batched(t, g))
}

/// Offset, shape and byte strides of one image laid out as `layout`.
fn image_geometry(layout: &ImageLayout, item: usize) -> Result<(usize, Vec<usize>, Vec<isize>)> {
    if layout.buffer_count() != 1 {
        return Err(Error::Unsupported(format!(
            "this image spans {} buffers; numpy and DLPack views need a single-buffer tensor",
            layout.buffer_count()
        )));
    }
    let planes = layout.planes();
    let p0 = planes[0];
    let (w, h) = (layout.width() as usize, layout.height() as usize);
    let s0 = p0.stride as isize;
    let shape = layout.shape();
    let strides: Vec<isize> = match layout.format().family() {
        FormatFamily::PackedRgb => {
            let c = layout.format().channels() as isize;
            vec![s0, c * item as isize, item as isize]
        }
        FormatFamily::Grey => vec![s0, item as isize, item as isize],
        FormatFamily::PackedYuv422 => vec![s0, 2, 1],
        FormatFamily::SemiPlanarYuv | FormatFamily::SemiPlanarYuv16 => {
            let p1 = planes[1];
            if w % 2 != 0 {
                return Err(not_one_array(
                    layout,
                    "odd width: a chroma row is wider than a luma row",
                ));
            }
            if p1.stride != p0.stride || p1.offset != p0.offset + p0.stride * h {
                return Err(not_one_array(
                    layout,
                    "the chroma plane does not follow the luma rows",
                ));
            }
            vec![s0, 1]
        }
        FormatFamily::PlanarYuv => {
            let (p1, p2) = (planes[1], planes[2]);
            let ch = layout.plane_height(1) as usize;
            let hsub = layout.format().chroma_subsampling().0 as usize;
            let cw = w / hsub;
            let tight = w % hsub == 0
                && p0.stride == w
                && p1.stride == cw
                && p2.stride == cw
                && p1.offset == p0.offset + w * h
                && p2.offset == p1.offset + cw * ch;
            if !tight {
                return Err(not_one_array(
                    layout,
                    "its chroma planes are not packed right after the luma plane",
                ));
            }
            vec![s0, 1]
        }
        // Rows of bytes: a sample may span bytes (16-bit words, CSI-2 groups).
        FormatFamily::Bayer | FormatFamily::DeepGrey => vec![s0, 1],
        // A compressed frame: its bytes.
        FormatFamily::Jpeg => vec![1],
        FormatFamily::PlanarRgb => {
            let (p1, p2) = (planes[1], planes[2]);
            let step = p1.offset.checked_sub(p0.offset);
            if p1.stride != p0.stride
                || p2.stride != p0.stride
                || step.is_none()
                || p2.offset.checked_sub(p1.offset) != step
            {
                return Err(not_one_array(layout, "its planes are not evenly spaced"));
            }
            vec![step.unwrap_or(0) as isize, s0, item as isize]
        }
        #[allow(unreachable_patterns)]
        _ => return Err(not_one_array(layout, "unknown format family")),
    };
    Ok((p0.offset, shape, strides))
}

/// Offset, shape (rows, elements per row; `(N, rows, elements per row)` for a batch) and
/// byte strides of plane `index` of an image.
pub(crate) fn plane_geometry(
    t: &dyn DynTensor,
    index: usize,
) -> Result<(usize, Vec<usize>, Vec<isize>)> {
    let layout = t.layout().ok_or_else(|| {
        Error::InvalidArgument("the tensor has no image layout, so no planes".into())
    })?;
    let plane = layout.planes().get(index).copied().ok_or_else(|| {
        Error::InvalidArgument(format!(
            "plane {index} does not exist: a {} image has {} plane(s)",
            layout.format(),
            layout.planes().len()
        ))
    })?;
    if plane.buffer != 0 {
        return Err(Error::Unsupported(format!(
            "plane {index} lives in buffer {}; views cover single-buffer tensors",
            plane.buffer
        )));
    }
    let item = t.dtype().size();
    let rows = layout.plane_height(index) as usize;
    let row = layout.plane_row_bytes(index) / item;
    Ok(batched(
        t,
        (
            plane.offset,
            vec![rows, row],
            vec![plane.stride as isize, item as isize],
        ),
    ))
}

/// The buffer protocol (in the stable ABI from Python 3.11).
#[cfg(any(not(Py_LIMITED_API), Py_3_11))]
pub(crate) mod buffer {
    use std::ffi::{CStr, c_int};

    use pyo3::exceptions::PyBufferError;
    use pyo3::ffi;
    use pyo3::prelude::*;

    use super::Export;
    use pinframe::{DType, HostPin};

    /// The shape and strides a `Py_buffer` points at, and the pin that keeps its memory
    /// mapped (and a frame's buffer held) until `release`: the view never depends on what
    /// its owner object still holds.
    struct Arrays {
        shape: Vec<ffi::Py_ssize_t>,
        strides: Vec<ffi::Py_ssize_t>,
        _pin: HostPin<'static>,
    }

    fn format(dtype: DType) -> &'static CStr {
        match dtype {
            DType::U8 => c"B",
            DType::I8 => c"b",
            DType::U16 => c"H",
            DType::I16 => c"h",
            DType::U32 => c"I",
            DType::I32 => c"i",
            DType::F16 => c"e",
            DType::F32 => c"f",
            DType::F64 => c"d",
            _ => c"B",
        }
    }

    /// Fills `view` for `export`, owned by `owner`, honouring the consumer's `flags`.
    ///
    /// # Safety
    /// `view` must be the valid, writable `Py_buffer` CPython passes to `bf_getbuffer`.
    pub(crate) unsafe fn fill(
        view: *mut ffi::Py_buffer,
        flags: c_int,
        export: &Export,
        owner: Bound<'_, PyAny>,
    ) -> PyResult<()> {
        if view.is_null() {
            return Err(PyBufferError::new_err("null Py_buffer"));
        }
        if flags & ffi::PyBUF_WRITABLE == ffi::PyBUF_WRITABLE && export.readonly {
            return Err(PyBufferError::new_err(
                "the tensor is read-only (imported from a read-only fd or a sealed memfd, or \
                 a read mapping)",
            ));
        }
        let contiguous = export.is_c_contiguous();
        let wants_strides = flags & ffi::PyBUF_STRIDES == ffi::PyBUF_STRIDES;
        if !contiguous && !wants_strides {
            return Err(PyBufferError::new_err(
                "the tensor's rows are padded (not C-contiguous); ask for a strided buffer \
                 (numpy does) or copy it",
            ));
        }
        let bit = |f: c_int| f & !ffi::PyBUF_STRIDES;
        let contiguity = bit(ffi::PyBUF_C_CONTIGUOUS)
            | bit(ffi::PyBUF_F_CONTIGUOUS)
            | bit(ffi::PyBUF_ANY_CONTIGUOUS);
        if flags & contiguity != 0 && !contiguous {
            return Err(PyBufferError::new_err(
                "a contiguous buffer was requested; the tensor's rows are padded",
            ));
        }
        let fortran_only = flags & bit(ffi::PyBUF_F_CONTIGUOUS) != 0
            && flags & bit(ffi::PyBUF_ANY_CONTIGUOUS) == 0;
        if fortran_only && export.shape.iter().filter(|&&d| d > 1).count() > 1 {
            return Err(PyBufferError::new_err(
                "a Fortran-ordered buffer was requested; tensors are C-ordered",
            ));
        }
        let arrays = Box::new(Arrays {
            shape: export.shape.iter().map(|&d| d as ffi::Py_ssize_t).collect(),
            strides: export
                .strides
                .iter()
                .map(|&s| s as ffi::Py_ssize_t)
                .collect(),
            _pin: export.pin.clone(),
        });
        let wants_shape = flags & ffi::PyBUF_ND == ffi::PyBUF_ND;
        // SAFETY: `view` is valid and writable (caller contract). The shape and strides
        // arrays live in `arrays`, leaked into `internal` and freed by `release`; the
        // format strings are 'static; `obj` gets the new reference CPython releases.
        unsafe {
            (*view).buf = export.ptr as *mut std::ffi::c_void;
            (*view).len = export.nbytes() as ffi::Py_ssize_t;
            (*view).readonly = c_int::from(export.readonly);
            (*view).itemsize = export.dtype.size() as ffi::Py_ssize_t;
            (*view).format = if flags & ffi::PyBUF_FORMAT == ffi::PyBUF_FORMAT {
                format(export.dtype).as_ptr() as *mut _
            } else {
                std::ptr::null_mut()
            };
            (*view).ndim = if wants_shape {
                export.shape.len() as c_int
            } else {
                1
            };
            let raw = Box::into_raw(arrays);
            (*view).shape = if wants_shape {
                (*raw).shape.as_mut_ptr()
            } else {
                std::ptr::null_mut()
            };
            (*view).strides = if wants_strides {
                (*raw).strides.as_mut_ptr()
            } else {
                std::ptr::null_mut()
            };
            (*view).suboffsets = std::ptr::null_mut();
            (*view).internal = raw.cast();
            (*view).obj = owner.into_ptr();
        }
        Ok(())
    }

    /// Frees what `fill` allocated.
    ///
    /// # Safety
    /// `view` must be a `Py_buffer` filled by [`fill`], released once.
    pub(crate) unsafe fn release(view: *mut ffi::Py_buffer) {
        if view.is_null() {
            return;
        }
        // SAFETY: `internal` is the `Arrays` box `fill` leaked (or null), taken once.
        unsafe {
            let raw = (*view).internal.cast::<Arrays>();
            if !raw.is_null() {
                (*view).internal = std::ptr::null_mut();
                drop(Box::from_raw(raw));
            }
        }
    }
}
