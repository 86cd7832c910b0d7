//! Reading arrays handed in from Python (numpy, or anything with `__array_interface__`),
//! and describing them as pinframe image layouts without copying them.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple};

use pinframe::image::FormatFamily;
use pinframe::{DType, ImageLayout, PixelFormat, Plane};

use crate::errors::{OrRaise, invalid, unsupported};

/// An array's memory as its `__array_interface__` (version 3) describes it (pinframe only
/// reads arrays handed in, so whether they are writable does not matter).
#[derive(Clone, Debug)]
pub(crate) struct ArrayRef {
    /// Address of the first element.
    pub ptr: usize,
    pub shape: Vec<usize>,
    /// Byte strides, one per dimension.
    pub strides: Vec<isize>,
    pub dtype: DType,
}

static NUMPY_ASARRAY: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
static NUMPY_ASCONTIGUOUS: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

fn numpy_fn<'py>(
    py: Python<'py>,
    cell: &'static PyOnceLock<Py<PyAny>>,
    name: &str,
) -> PyResult<Bound<'py, PyAny>> {
    let f = cell.get_or_try_init(py, || -> PyResult<Py<PyAny>> {
        let numpy = py.import("numpy").map_err(|e| {
            unsupported(format!(
                "this needs numpy, which cannot be imported ({e}); pip install numpy"
            ))
        })?;
        Ok(numpy.getattr(name)?.unbind())
    })?;
    Ok(f.bind(py).clone())
}

/// `numpy.asarray(obj)`: a view of anything numpy understands (numpy keeps `obj` alive as
/// the array's base).
pub(crate) fn asarray<'py>(obj: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    numpy_fn(obj.py(), &NUMPY_ASARRAY, "asarray")?.call1((obj,))
}

/// `numpy.ascontiguousarray(obj)`: `obj` itself when it is C-contiguous, else a copy.
pub(crate) fn ascontiguousarray<'py>(obj: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    numpy_fn(obj.py(), &NUMPY_ASCONTIGUOUS, "ascontiguousarray")?.call1((obj,))
}

/// The dtype of an array-interface `typestr` (`|u1`, `<f4`, ...), native byte order only.
pub(crate) fn parse_typestr(typestr: &str) -> PyResult<DType> {
    let b = typestr.as_bytes();
    let bad = || invalid(format!("unsupported array element type {typestr:?}"));
    if b.len() < 3 {
        return Err(bad());
    }
    let native = if cfg!(target_endian = "little") {
        b'<'
    } else {
        b'>'
    };
    let size: usize = typestr[2..].parse().map_err(|_| bad())?;
    if size > 1 && b[0] != native && b[0] != b'=' {
        return Err(invalid(format!(
            "array element type {typestr:?} is not in the machine's byte order; convert it \
             with .astype(...) first"
        )));
    }
    Ok(match (b[1], size) {
        (b'u', 1) => DType::U8,
        (b'i', 1) => DType::I8,
        (b'u', 2) => DType::U16,
        (b'i', 2) => DType::I16,
        (b'u', 4) => DType::U32,
        (b'i', 4) => DType::I32,
        (b'f', 2) => DType::F16,
        (b'f', 4) => DType::F32,
        (b'f', 8) => DType::F64,
        _ => {
            return Err(invalid(format!(
                "array element type {typestr:?} has no pinframe dtype (u8 i8 u16 i16 u32 \
                 i32 f16 f32 f64)"
            )));
        }
    })
}

/// The array-interface `typestr` of a dtype (native byte order).
pub(crate) fn typestr(dtype: DType) -> &'static str {
    match dtype {
        DType::U8 => "|u1",
        DType::I8 => "|i1",
        DType::U16 => "<u2",
        DType::I16 => "<i2",
        DType::U32 => "<u4",
        DType::I32 => "<i4",
        DType::F16 => "<f2",
        DType::F32 => "<f4",
        DType::F64 => "<f8",
        // DType is non-exhaustive; a new element type needs its entry here.
        _ => "|V0",
    }
}

/// Reads `obj.__array_interface__`; `None` if `obj` has none.
pub(crate) fn array_ref(obj: &Bound<'_, PyAny>) -> PyResult<Option<ArrayRef>> {
    let Ok(iface) = obj.getattr(pyo3::intern!(obj.py(), "__array_interface__")) else {
        return Ok(None);
    };
    let iface = iface
        .cast_into::<PyDict>()
        .map_err(|_| invalid("__array_interface__ is not a dict"))?;
    let get = |key: &str| -> PyResult<Bound<'_, PyAny>> {
        iface
            .get_item(key)?
            .ok_or_else(|| invalid(format!("__array_interface__ has no {key:?}")))
    };
    let typestr: String = get("typestr")?.extract()?;
    let dtype = parse_typestr(&typestr)?;
    let shape: Vec<usize> = get("shape")?.extract()?;
    let data = get("data")?;
    let data = data.cast::<PyTuple>().map_err(|_| {
        invalid("the array's __array_interface__ 'data' is not an (address, read-only) tuple")
    })?;
    let ptr: usize = data.get_item(0)?.extract()?;
    if let Some(off) = iface.get_item("offset")? {
        let off: usize = off.extract()?;
        if off != 0 {
            return Err(invalid(
                "arrays with an __array_interface__ offset are not supported",
            ));
        }
    }
    let item = dtype.size() as isize;
    let strides: Vec<isize> = match iface.get_item("strides")? {
        Some(s) if !s.is_none() => s.extract()?,
        _ => {
            // C-contiguous.
            let mut st = vec![0isize; shape.len()];
            let mut acc = item;
            for (d, s) in shape.iter().zip(st.iter_mut()).rev() {
                *s = acc;
                acc *= *d as isize;
            }
            st
        }
    };
    if strides.len() != shape.len() {
        return Err(invalid("the array's strides and shape differ in length"));
    }
    if shape.contains(&0) {
        return Err(invalid(format!("the array of shape {shape:?} is empty")));
    }
    if ptr == 0 {
        return Err(invalid("the array has no data (null address)"));
    }
    Ok(Some(ArrayRef {
        ptr,
        shape,
        strides,
        dtype,
    }))
}

impl ArrayRef {
    /// Bytes from the first element to one past the last, for non-negative strides.
    pub(crate) fn span(&self) -> Option<usize> {
        let mut end = self.dtype.size();
        for (&d, &s) in self.shape.iter().zip(&self.strides) {
            if s < 0 {
                return None;
            }
            end = end.checked_add((d - 1).checked_mul(s as usize)?)?;
        }
        Some(end)
    }

    /// True when the elements are laid out C-contiguously.
    pub(crate) fn is_c_contiguous(&self) -> bool {
        let mut expect = self.dtype.size() as isize;
        for (&d, &s) in self.shape.iter().zip(&self.strides).rev() {
            if d != 1 && s != expect {
                return false;
            }
            expect *= d as isize;
        }
        true
    }

    fn describe(&self) -> String {
        format!(
            "{} array of shape {:?} with byte strides {:?}",
            self.dtype, self.shape, self.strides
        )
    }
}

/// Why an array cannot be read in place as an image.
fn not_in_place(a: &ArrayRef, format: PixelFormat, why: &str) -> PyErr {
    invalid(format!(
        "a {} cannot be read in place as a {format} image: {why}. Each row's pixels must be \
         contiguous (rows may be padded); copy it with numpy.ascontiguousarray(...) or pass \
         a tensor",
        a.describe()
    ))
}

/// Describes `a` as an image of `format` whose first plane starts at `a.ptr`, without
/// copying: the shape follows pinframe's tensor shape of the format (`[h, w, c]` packed
/// RGB, `[h, w]` or `[h, w, 1]` grey, `[h, w, 2]` or `[h, 2w]` packed 4:2:2 YUV,
/// `[h + chroma rows, w]` semi-planar and planar YUV, `[3, h, w]` planar RGB, `[h, row
/// bytes]` Bayer and deep grey, `[h + h/2, row bytes]` P01x; for formats of 16-bit samples
/// also a uint16 `[h, w]` / `[h + h/2, w]`, whose layout is still of u8 bytes). Rows may be
/// padded (a row stride larger than the row); within a row the elements must be contiguous.
pub(crate) fn image_layout(a: &ArrayRef, format: PixelFormat) -> PyResult<ImageLayout> {
    let item = a.dtype.size();
    if a.strides.iter().any(|&s| s < 0) {
        return Err(not_in_place(a, format, "it has negative strides"));
    }
    let sh = &a.shape;
    // numpy gives a dimension of length 1 any stride (often 0); treat it as tightly packed.
    let mut st: Vec<usize> = a.strides.iter().map(|&s| s as usize).collect();
    let mut tight = item;
    for d in (0..sh.len()).rev() {
        if sh[d] == 1 {
            st[d] = tight;
        }
        tight = st[d].max(tight) * sh[d];
    }
    let to_u32 = |v: usize| -> PyResult<u32> {
        u32::try_from(v).map_err(|_| invalid(format!("image dimension {v} is too large")))
    };
    let shape_err = |expected: &str| {
        invalid(format!(
            "a {format} image array has shape {expected}; got {}",
            a.describe()
        ))
    };
    let layout = match format.family() {
        FormatFamily::PackedRgb => {
            let c = format.channels();
            if sh.len() != 3 || sh[2] != c {
                return Err(shape_err(&format!("(height, width, {c})")));
            }
            if (sh[2] > 1 && st[2] != item) || (sh[1] > 1 && st[1] != c * item) {
                return Err(not_in_place(
                    a,
                    format,
                    "its pixels or channels are not contiguous",
                ));
            }
            ImageLayout::with_stride(to_u32(sh[1])?, to_u32(sh[0])?, format, a.dtype, st[0])
        }
        FormatFamily::Grey => {
            if !(sh.len() == 2 || (sh.len() == 3 && sh[2] == 1)) {
                return Err(shape_err("(height, width) or (height, width, 1)"));
            }
            if sh[1] > 1 && st[1] != item {
                return Err(not_in_place(a, format, "its pixels are not contiguous"));
            }
            ImageLayout::with_stride(to_u32(sh[1])?, to_u32(sh[0])?, format, a.dtype, st[0])
        }
        FormatFamily::PackedYuv422 => {
            let width = match sh.len() {
                3 if sh[2] == 2 => {
                    if st[2] != 1 || (sh[1] > 1 && st[1] != 2) {
                        return Err(not_in_place(a, format, "its samples are not contiguous"));
                    }
                    sh[1]
                }
                2 if sh[1].is_multiple_of(2) => {
                    if st[1] != 1 {
                        return Err(not_in_place(a, format, "its samples are not contiguous"));
                    }
                    sh[1] / 2
                }
                _ => return Err(shape_err("(height, width, 2) or (height, 2 * width)")),
            };
            ImageLayout::with_stride(to_u32(width)?, to_u32(sh[0])?, format, a.dtype, st[0])
        }
        FormatFamily::SemiPlanarYuv | FormatFamily::PlanarYuv => {
            if sh.len() != 2 {
                return Err(shape_err("(height + chroma rows, width)"));
            }
            if sh[1] > 1 && st[1] != 1 {
                return Err(not_in_place(a, format, "its samples are not contiguous"));
            }
            let rows = sh[0];
            let height = luma_height(format, rows)?;
            if format.family() == FormatFamily::PlanarYuv {
                // The two chroma planes share the array's rows only when tightly packed.
                let hsub = format.chroma_subsampling().0 as usize;
                if !sh[1].is_multiple_of(hsub) || st[0] != sh[1] {
                    return Err(not_in_place(
                        a,
                        format,
                        "a planar YUV array must be C-contiguous with a width that is a \
                         multiple of its chroma subsampling (pass a 1-D byte array with \
                         src_layout= for other layouts)",
                    ));
                }
            }
            ImageLayout::with_stride(to_u32(sh[1])?, to_u32(height)?, format, a.dtype, st[0])
        }
        FormatFamily::Bayer | FormatFamily::DeepGrey | FormatFamily::SemiPlanarYuv16 => {
            let (pixels, bytes) = format.storage().group();
            let sixteen = bytes == 2 && pixels == 1;
            let expected = if sixteen {
                "(rows, row bytes) of uint8, or (rows, width) of uint16 samples"
            } else {
                "(rows, row bytes) of uint8"
            };
            if sh.len() != 2 {
                return Err(shape_err(expected));
            }
            let width = match a.dtype {
                DType::U8 => {
                    if sh[1] > 1 && st[1] != 1 {
                        return Err(not_in_place(a, format, "its bytes are not contiguous"));
                    }
                    if !sh[1].is_multiple_of(bytes) {
                        return Err(invalid(format!(
                            "a {format} row is whole groups of {bytes} bytes ({pixels} \
                             pixel(s) each); a row of {} bytes is not",
                            sh[1]
                        )));
                    }
                    sh[1] / bytes * pixels as usize
                }
                // What a numpy user holds for 16-bit samples: one element a sample, whose
                // bytes (native little-endian, checked by parse_typestr) are the format's.
                DType::U16 if sixteen => {
                    if sh[1] > 1 && st[1] != 2 {
                        return Err(not_in_place(a, format, "its samples are not contiguous"));
                    }
                    sh[1]
                }
                _ => {
                    return Err(invalid(format!(
                        "a {format} image array has shape {expected}; got {}",
                        a.describe()
                    )));
                }
            };
            let rows = sh[0];
            let height = if format.family() == FormatFamily::SemiPlanarYuv16 {
                luma_height(format, rows)?
            } else {
                rows
            };
            // The image is bytes whatever the array's element type (pinframe's RAW
            // layouts are u8).
            ImageLayout::with_stride(to_u32(width)?, to_u32(height)?, format, DType::U8, st[0])
        }
        // A compressed frame: its bytes, its size read from its own header.
        FormatFamily::Jpeg => {
            if sh.len() != 1 || a.dtype != DType::U8 || st[0] != 1 {
                return Err(shape_err("(length,) of contiguous uint8 bytes"));
            }
            // SAFETY: `a` describes a live array the caller holds (borrowed with the GIL
            // held for this call): `sh[0]` contiguous bytes from `a.ptr` (checked just
            // above), read and not kept.
            let bytes = unsafe { std::slice::from_raw_parts(a.ptr as *const u8, sh[0]) };
            let info = pinframe::jpeg::parse(bytes).or_raise()?;
            ImageLayout::with_stride(info.width, info.height, format, DType::U8, sh[0])
        }
        FormatFamily::PlanarRgb => {
            if sh.len() != 3 || sh[0] != 3 {
                return Err(shape_err("(3, height, width)"));
            }
            if sh[2] > 1 && st[2] != item {
                return Err(not_in_place(a, format, "its pixels are not contiguous"));
            }
            let planes = [
                Plane::new(0, st[1]),
                Plane::new(st[0], st[1]),
                Plane::new(2 * st[0], st[1]),
            ];
            ImageLayout::with_planes(to_u32(sh[2])?, to_u32(sh[1])?, format, a.dtype, &planes)
        }
        // FormatFamily is non-exhaustive: a new family needs its case here.
        #[allow(unreachable_patterns)]
        _ => {
            return Err(unsupported(format!(
                "{format} arrays cannot be described yet; pass a tensor"
            )));
        }
    };
    let layout = layout.or_raise()?;
    check_extent(a, &layout)?;
    Ok(layout)
}

/// Checks that the array spans every byte the layout addresses.
pub(crate) fn check_extent(a: &ArrayRef, layout: &ImageLayout) -> PyResult<()> {
    if layout.buffer_count() != 1 {
        return Err(invalid(
            "an array holds one buffer; this layout spans several (pass a tensor)",
        ));
    }
    let span = a
        .span()
        .ok_or_else(|| invalid("the array has negative strides"))?;
    let needed = layout.required_len(0);
    if span < needed {
        return Err(invalid(format!(
            "the {} spans {span} bytes but its layout needs {needed}",
            a.describe()
        )));
    }
    if !a.ptr.is_multiple_of(a.dtype.size()) {
        return Err(invalid(
            "the array's data is not aligned to its element size",
        ));
    }
    Ok(())
}

/// The image height of a YUV array of `rows` rows stacked as OpenCV does (height +
/// ceil(height / vsub) chroma rows), or the error naming the shape.
fn luma_height(format: PixelFormat, rows: usize) -> PyResult<usize> {
    let (hsub, vsub) = format.chroma_subsampling();
    let height = if format.family() == FormatFamily::PlanarYuv && hsub == 1 {
        // 4:4:4: two chroma planes as tall and wide as the luma.
        rows.is_multiple_of(3).then_some(rows / 3)
    } else if vsub == 1 {
        rows.is_multiple_of(2).then_some(rows / 2)
    } else {
        match rows % 3 {
            0 => Some(rows / 3 * 2),
            2 => Some((rows - 2) / 3 * 2 + 1),
            _ => None,
        }
    };
    height.filter(|&h| h > 0).ok_or_else(|| {
        invalid(format!(
            "a {format} array of {rows} rows is not height + chroma rows for any height"
        ))
    })
}
