//! `pinframe.ImageProcessor`, `pinframe.ConvertInfo`, `pinframe.ProcessorStats`.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use pinframe::{
    Backend, BatchItem, Colorimetry, ColorimetryChoice, ConvertInfo, ConvertOptions, Crop, Error,
    Fit, Flip, Gamma, ImageLayout, ImageProcessor, Interpolation, Isp, Matrix, Normalize,
    PixelFormat, Quantize, Range, Rotation,
};
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};

use crate::args::Int;
use crate::array::{self, ArrayRef};
use crate::dyn_tensor::with_tensor;
use crate::errors::{OrRaise, invalid};
use crate::tensor::{PyImageLayout, PyTensor};

/// Converts images: crop, flip, rotate, fit (stretch / letterbox / fill), resample,
/// YUV→RGB, normalise and store in one pass, on the CPU (fused kernels) or OpenGL ES.
///
/// ImageProcessor(backend="auto")
///
/// `backend`: "auto" (GL on a hardware GPU, else the CPU), "cpu" or "gl" (fails loudly
/// when GL cannot start). A processor owns its scratch memory: converting frames of the
/// same geometry again allocates nothing. It may be used from any thread; calls on one
/// processor run one at a time.
#[pyclass(name = "ImageProcessor", module = "pinframe", frozen)]
pub(crate) struct PyImageProcessor {
    inner: Mutex<ImageProcessor>,
    parallel: AtomicBool,
}

/// What a conversion did (the Rust `ConvertInfo`): map detections back to source pixels
/// with `to_source(x, y)`.
#[pyclass(name = "ConvertInfo", module = "pinframe", frozen)]
pub(crate) struct PyConvertInfo {
    inner: ConvertInfo,
}

/// Counters of what a processor did (the Rust `ProcessorStats`).
#[pyclass(name = "ProcessorStats", module = "pinframe", frozen, get_all, eq)]
#[derive(PartialEq, Eq)]
pub(crate) struct PyProcessorStats {
    /// Source or destination buffers imported into the GPU (new EGL images).
    imports: u64,
    /// Conversions that reused an imported buffer.
    cache_hits: u64,
    /// Source images copied to the GPU.
    uploads: u64,
    /// Destination images copied back from the GPU.
    readbacks: u64,
    /// Conversions that ran on the CPU although GL was chosen (counted, logged once).
    cpu_fallbacks: u64,
    /// Conversions completed.
    frames: u64,
}

/// A conversion source: a tensor, or an array read in place.
enum Source<'a> {
    Tensor(&'a PyTensor),
    Array(ArrayRef, ImageLayout),
}

fn parse_fit(name: Option<&str>, pad: Option<[u8; 3]>) -> PyResult<Fit> {
    let fit = match name.map(str::to_ascii_lowercase).as_deref() {
        None | Some("stretch") => Fit::Stretch,
        Some("letterbox") => Fit::Letterbox {
            pad: pad.unwrap_or([114; 3]),
        },
        Some("fill") => Fit::Fill,
        Some(other) => {
            return Err(invalid(format!(
                "unknown fit {other:?}; expected stretch, letterbox or fill"
            )));
        }
    };
    if pad.is_some() && !matches!(fit, Fit::Letterbox { .. }) {
        return Err(invalid(
            "pad is the letterbox colour: it needs fit=\"letterbox\"",
        ));
    }
    Ok(fit)
}

/// `(scale, zero_point)` per tensor, or `((s, s, s), (z, z, z))` per channel (R, G, B).
fn parse_quantize(q: &Bound<'_, PyAny>) -> PyResult<Quantize> {
    if let Ok((scale, zero_point)) = q.extract::<(f32, i32)>() {
        return Ok(Quantize::per_tensor(scale, zero_point));
    }
    if let Ok((scale, zero_point)) = q.extract::<([f32; 3], [i32; 3])>() {
        return Ok(Quantize::per_channel(scale, zero_point));
    }
    Err(invalid(format!(
        "quantize {} is not (scale, zero_point) nor ((s, s, s), (z, z, z))",
        q.repr()?
    )))
}

/// `obj` as `T`, also when it is a numpy array (which pyo3 does not take for a
/// sequence): through `numpy.asarray(obj).tolist()`.
fn extract_seq<T: for<'a, 'py> FromPyObject<'a, 'py>>(obj: &Bound<'_, PyAny>) -> Option<T> {
    obj.extract::<T>().ok().or_else(|| {
        array::asarray(obj)
            .and_then(|a| a.call_method0("tolist"))
            .ok()
            .and_then(|l| l.extract::<T>().ok())
    })
}

/// The RAW keyword arguments as an `Isp`; their ranges (a black level below the source's
/// white level, positive gains, a finite matrix) are checked by the conversion, which
/// knows the source's bit depth and names the parameter.
fn parse_isp(
    black_level: Option<&Bound<'_, PyAny>>,
    wb_gains: Option<&Bound<'_, PyAny>>,
    ccm: Option<&Bound<'_, PyAny>>,
    gamma: Option<&str>,
) -> PyResult<Isp> {
    let mut isp = Isp::IDENTITY;
    if let Some(b) = black_level {
        isp.black_level = match b.extract::<u16>() {
            Ok(v) => [v; 4],
            Err(_) => extract_seq::<[u16; 4]>(b).ok_or_else(|| {
                invalid(format!(
                    "black_level {} is not one code nor four (R, Gr, Gb, B), each an integer \
                     0..=65535",
                    b.repr().map(|r| r.to_string()).unwrap_or_default()
                ))
            })?,
        };
    }
    if let Some(g) = wb_gains {
        isp.gains = extract_seq::<[f32; 3]>(g).ok_or_else(|| {
            invalid(format!(
                "wb_gains {} is not three numbers (R, G, B)",
                g.repr().map(|r| r.to_string()).unwrap_or_default()
            ))
        })?;
    }
    if let Some(m) = ccm {
        // Three rows (a nested sequence or a 3x3 array), or nine values row by row.
        isp.ccm = match extract_seq::<[[f32; 3]; 3]>(m) {
            Some(rows) => rows,
            None => {
                let flat = extract_seq::<[f32; 9]>(m).ok_or_else(|| {
                    invalid(format!(
                        "ccm {} is not a 3x3 matrix (three rows of three numbers, or nine \
                         values row by row)",
                        m.repr().map(|r| r.to_string()).unwrap_or_default()
                    ))
                })?;
                [
                    [flat[0], flat[1], flat[2]],
                    [flat[3], flat[4], flat[5]],
                    [flat[6], flat[7], flat[8]],
                ]
            }
        };
    }
    if let Some(g) = gamma {
        isp.gamma = g.parse::<Gamma>().or_raise()?;
    }
    Ok(isp)
}

/// A source array over the destination's own memory (`numpy.asarray(dst)`, a slice of
/// it) would be read while it is written: refused, naming the bytes.
fn refuse_overlap<T>(src: &[u8], dst: &[T]) -> pinframe::Result<()> {
    let (s, d) = (src.as_ptr_range(), dst.as_ptr_range());
    let (s0, s1) = (s.start as usize, s.end as usize);
    let (d0, d1) = (d.start as usize, d.end as usize);
    if s0 < d1 && d0 < s1 {
        let (from, to) = (s0.max(d0), s1.min(d1));
        return Err(Error::InvalidArgument(format!(
            "src and dst overlap: the source array's bytes {}..{} are the destination's bytes \
             {}..{} (the source is a view of the destination); convert from a copy \
             (numpy.array(...)) or another tensor",
            from - s0,
            to - s0,
            from - d0,
            to - d0
        )));
    }
    Ok(())
}

/// `crop=(x, y, width, height)`.
type CropArgument = (Int<u32>, Int<u32>, Int<u32>, Int<u32>);

/// An array source (`what` names it in errors: "src", "the source"): its
/// `__array_interface__` and the layout `src_format` or `src_layout` gives it, checked
/// against the array's extent.
fn parse_array(
    src: &Bound<'_, PyAny>,
    what: &str,
    src_format: Option<&str>,
    src_layout: Option<&PyImageLayout>,
) -> PyResult<(ArrayRef, ImageLayout)> {
    let a = match array::array_ref(src)? {
        Some(a) => a,
        None => {
            return Err(invalid(format!(
                "{what} must be a pinframe.Tensor or a numpy array, not {}",
                src.get_type().name()?
            )));
        }
    };
    // A uint16 array of a format of 16-bit samples is read as its bytes.
    let sixteen_bit = src_format
        .map(|f| {
            f.parse::<PixelFormat>()
                .map(|f| f.storage().group() == (1, 2))
        })
        .transpose()
        .or_raise()?
        .unwrap_or(false);
    if a.dtype != pinframe::DType::U8 && !(sixteen_bit && a.dtype == pinframe::DType::U16) {
        return Err(invalid(format!(
            "a source array must hold uint8 pixels (or uint16 samples of a 16-bit RAW \
             format); this one holds {} (convert with .astype(numpy.uint8), or pass a \
             tensor)",
            a.dtype
        )));
    }
    let layout = match (src_format, src_layout) {
        (Some(f), None) => array::image_layout(&a, f.parse().or_raise()?)?,
        (None, Some(l)) => {
            if !a.is_c_contiguous() {
                return Err(invalid(
                    "with src_layout the array holds the raw bytes: it must be \
                     C-contiguous (numpy.ascontiguousarray)",
                ));
            }
            if l.inner.dtype() != pinframe::DType::U8 {
                return Err(invalid("a source layout holds u8 elements"));
            }
            array::check_extent(&a, &l.inner)?;
            l.inner
        }
        (Some(_), Some(_)) => {
            return Err(invalid("give src_format or src_layout, not both"));
        }
        (None, None) => {
            return Err(invalid(
                "a source array needs src_format= (e.g. \"nv12\") or src_layout=",
            ));
        }
    };
    Ok((a, layout))
}

/// One item of `convert_batch` taken apart: its source object, its crop and its fit name.
struct ItemParts<'py> {
    source: Bound<'py, PyAny>,
    crop: Option<Crop>,
    fit: Option<String>,
}

/// `source`, `(source, crop)` or `(source, crop, fit)`; crop and fit may be None.
fn split_item<'py>(item: &Bound<'py, PyAny>) -> PyResult<ItemParts<'py>> {
    let Ok(tuple) = item.cast::<PyTuple>() else {
        return Ok(ItemParts {
            source: item.clone(),
            crop: None,
            fit: None,
        });
    };
    if !(2..=3).contains(&tuple.len()) {
        return Err(invalid(format!(
            "an item is a source, (source, crop) or (source, crop, fit); this tuple has {} \
             elements",
            tuple.len()
        )));
    }
    let crop = tuple.get_item(1)?;
    let crop = if crop.is_none() {
        None
    } else {
        let (x, y, w, h) = crop.extract::<CropArgument>().map_err(|e| {
            invalid(format!(
                "the crop {} is not (x, y, width, height): {e}",
                crop.repr().map(|r| r.to_string()).unwrap_or_default()
            ))
        })?;
        Some(Crop::new(x.0, y.0, w.0, h.0))
    };
    let fit = match tuple.len() {
        3 => {
            let f = tuple.get_item(2)?;
            if f.is_none() {
                None
            } else {
                Some(f.extract::<String>().map_err(|_| {
                    invalid(format!(
                        "the fit {} is not \"stretch\", \"letterbox\" or \"fill\"",
                        f.repr().map(|r| r.to_string()).unwrap_or_default()
                    ))
                })?)
            }
        }
        _ => None,
    };
    Ok(ItemParts {
        source: tuple.get_item(0)?,
        crop,
        fit,
    })
}

/// `e`, of its own class, with the item it is about in its message. A pinframe error's
/// message reads "kind: message": the item goes after the kind, as in the errors the
/// library itself names items in.
fn in_item(py: Python<'_>, index: usize, e: PyErr) -> PyErr {
    let value = e.value(py);
    let message = value.str().map(|s| s.to_string()).unwrap_or_default();
    let pinframe_error = value.getattr("kind").is_ok_and(|k| !k.is_none());
    let message = match message.split_once(": ") {
        Some((kind, rest)) if pinframe_error => format!("{kind}: batch item {index}: {rest}"),
        _ => format!("batch item {index}: {message}"),
    };
    PyErr::from_type(e.get_type(py), (message,))
}

/// The options every image of a conversion shares (all but the crop and the fit), parsed
/// from the keyword arguments as the CLI parses its flags.
struct Shared {
    flip: Flip,
    rotation: Rotation,
    interpolation: Interpolation,
    matrix: Option<Matrix>,
    range: Option<Range>,
    normalize: Normalize,
    quantize: Option<Quantize>,
    isp: Isp,
}

impl Shared {
    #[allow(clippy::too_many_arguments)]
    fn parse(
        rotate: Int<u32>,
        flip: Option<&str>,
        mean: Option<[f32; 3]>,
        std: Option<[f32; 3]>,
        quantize: Option<&Bound<'_, PyAny>>,
        interp: Option<&str>,
        matrix: Option<&str>,
        range: Option<&str>,
        black_level: Option<&Bound<'_, PyAny>>,
        wb_gains: Option<&Bound<'_, PyAny>>,
        ccm: Option<&Bound<'_, PyAny>>,
        gamma: Option<&str>,
    ) -> PyResult<Shared> {
        Ok(Shared {
            flip: flip
                .map(str::parse)
                .transpose()
                .or_raise()?
                .unwrap_or_default(),
            interpolation: interp
                .map(str::parse)
                .transpose()
                .or_raise()?
                .unwrap_or_default(),
            matrix: matrix.map(str::parse).transpose().or_raise()?,
            range: range.map(str::parse).transpose().or_raise()?,
            rotation: Rotation::from_degrees(rotate.0).or_raise()?,
            quantize: quantize.map(parse_quantize).transpose()?,
            normalize: Normalize {
                mean: mean.unwrap_or([0.0; 3]),
                std: std.unwrap_or([1.0; 3]),
            },
            isp: parse_isp(black_level, wb_gains, ccm, gamma)?,
        })
    }

    /// The options of a conversion with `crop` and `fit`, from a source `src_height` rows
    /// high (whose default colorimetry completes a matrix or a range given alone).
    fn options(&self, crop: Option<Crop>, fit: Fit, src_height: u32) -> ConvertOptions {
        ConvertOptions {
            crop,
            flip: self.flip,
            rotation: self.rotation,
            fit,
            interpolation: self.interpolation,
            colorimetry: ColorimetryChoice::from_parts(
                self.matrix,
                self.range,
                Colorimetry::default_for_height(src_height),
            ),
            normalize: self.normalize,
            quantize: self.quantize,
            isp: self.isp,
        }
    }
}

impl PyImageProcessor {
    /// The processor, locked; waits for another thread's conversion with the GIL released.
    fn lock(&self, py: Python<'_>) -> std::sync::MutexGuard<'_, ImageProcessor> {
        crate::locks::lock_without_gil(py, &self.inner)
    }
}

#[pymethods]
impl PyImageProcessor {
    #[new]
    #[pyo3(signature = (backend = "auto"))]
    fn new(py: Python<'_>, backend: &str) -> PyResult<Self> {
        let backend: Backend = backend.parse().or_raise()?;
        let p = py
            .detach(|| ImageProcessor::with_backend(backend))
            .or_raise()?;
        Ok(PyImageProcessor {
            inner: Mutex::new(p),
            parallel: AtomicBool::new(true),
        })
    }

    /// Whether the CPU backend spreads row bands over its thread pool (True, the
    /// default) or converts on the calling thread only (the Rust `set_parallel`).
    #[getter]
    fn parallel(&self) -> bool {
        self.parallel.load(Ordering::SeqCst)
    }

    #[setter]
    fn set_parallel(&self, py: Python<'_>, parallel: bool) {
        let mut p = self.lock(py);
        p.set_parallel(parallel);
        self.parallel.store(parallel, Ordering::SeqCst);
    }

    /// The backend conversions run on: "cpu" or "gl" (never "auto").
    #[getter]
    fn backend(&self, py: Python<'_>) -> &'static str {
        self.lock(py).backend().name()
    }

    /// What the processor did so far: imports, cache_hits, uploads, readbacks,
    /// cpu_fallbacks, frames.
    #[getter]
    fn stats(&self, py: Python<'_>) -> PyProcessorStats {
        let s = self.lock(py).stats();
        PyProcessorStats {
            imports: s.imports,
            cache_hits: s.cache_hits,
            uploads: s.uploads,
            readbacks: s.readbacks,
            cpu_fallbacks: s.cpu_fallbacks,
            frames: s.frames,
        }
    }

    /// convert(src, dst, *, fit="stretch", pad=(114, 114, 114), crop=None, rotate=0,
    ///         flip="none", mean=(0, 0, 0), std=(1, 1, 1), quantize=None,
    ///         interp="bilinear", matrix=None, range=None, src_format=None,
    ///         src_layout=None, black_level=0, wb_gains=(1, 1, 1), ccm=identity,
    ///         gamma="linear") -> ConvertInfo
    ///
    /// Converts the image `src` into the image tensor `dst` in one pass, as the CLI's
    /// `pinframe convert` does (the same options, the same bytes), without copying either.
    ///
    /// src: a `Tensor` of u8 elements with an image layout (a camera `Frame`, an import,
    ///     `Tensor.image`, `Tensor.from_numpy`), or a uint8 numpy array read in place:
    ///     give `src_format` and the array in pinframe's tensor shape of that format
    ///     ((h, w, 3) rgb/bgr, (h, w, 4) rgba/bgra, (h, w) grey, (h, w, 2) yuyv/uyvy/
    ///     yvyu/vyuy, (h + h//2, w) nv12/nv21/i420/yv12, (2h, w) nv16/nv61, (3, h, w)
    ///     planar-rgb/bgr, (h, row_bytes) Bayer (rggb8 .. gbrg12p) and y10/y12/y16,
    ///     (h + h//2, row_bytes) p010/p012/p016, and for formats of 16-bit samples
    ///     (rggb10, bggr12, grbg16, y10, p010, ...) also a uint16 (h, w) / (h + h//2, w)
    ///     array of the samples; rows may be padded, pixels must be contiguous), or give
    ///     `src_layout` (an ImageLayout) and a C-contiguous byte array holding it.
    /// dst: a `Tensor` with an image layout (rgb bgr rgba bgra grey planar-rgb planar-bgr,
    ///     in u8, i8, f16 or f32), e.g. `Tensor.image(640, 640, "planar-rgb", "f32")`.
    ///     It is written in place: pins and numpy views of it see the result.
    ///
    /// Geometry, in this order: `crop=(x, y, w, h)` in source pixels; `flip` "none", "h"
    /// or "v"; `rotate` 0, 90, 180 or 270 degrees clockwise; `fit` "stretch" (each axis
    /// scaled to the destination), "letterbox" (uniform scale, centred, the rest filled
    /// with `pad`=(r, g, b), default (114, 114, 114)) or "fill" (uniform scale covering the
    /// destination, overflow cropped). `interp` "bilinear" (pixel centres at +0.5, edges
    /// clamped: OpenCV's INTER_LINEAR) or "nearest".
    ///
    /// Colour: YUV sources use `matrix` ("bt601", "bt709", "bt2020") and `range`
    /// ("limited", "full"); by default the frame's colorimetry, else BT.601 limited below
    /// 720 lines and BT.709 limited from 720. Giving only one takes the other from that
    /// default.
    ///
    /// RAW (Bayer) sources, ignored for others: `black_level` (one code, or four for the
    /// R, Gr, Gb, B sites, in the source's own units: 0..=1023 at 10 bits, below the white
    /// level 2^bits - 1), `wb_gains=(r, g, b)` (finite, positive), `ccm` (camera RGB to
    /// output RGB, three rows of three or nine values row by row, finite) and `gamma`
    /// "linear" or "srgb". They run in this order: black level, gains (then the clip to
    /// the white level), demosaic, matrix (then the clip to 0..1), gamma, and then the
    /// geometry and the values below. A flat patch comes out as
    /// `255 * clamp((code - black) / (white - black) * gain)` per channel (linear, identity
    /// matrix).
    ///
    /// Values: u8 stores the pixel; i8 stores it minus 128 (u8 XOR 0x80); f16 and f32
    /// store `(v / 255 - mean) / std` per channel, `mean` and `std` as (r, g, b) (e.g.
    /// ImageNet's (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)). `quantize=(scale,
    /// zero_point)` (or per channel `((s, s, s), (z, z, z))`) quantises u8 and i8 outputs
    /// as TFLite models expect: `q = clamp(round(x / scale) + zero_point)`, where `x` is
    /// the normalised value a float output would hold.
    ///
    /// Returns a ConvertInfo: `scale`, `offset`, `content` (the destination rectangle
    /// holding source pixels) and `to_source(x, y)`, which maps a destination point (a
    /// box corner) back to source pixels.
    ///
    /// The GIL is released while converting. Errors: InvalidInput for a bad option,
    /// array or layout (a non-uint8 or non-contiguous array, a crop outside the source,
    /// src and dst the same tensor, a black level at or above the source's white level,
    /// a gain that is not positive, a non-finite matrix entry); Unsupported for a format or dtype pair the backend
    /// does not convert; DeviceError when the GL backend fails.
    #[pyo3(signature = (
        src, dst, *, fit = None, pad = None, crop = None, rotate = Int(0), flip = None,
        mean = None, std = None, quantize = None, interp = None, matrix = None, range = None,
        src_format = None, src_layout = None, black_level = None, wb_gains = None, ccm = None,
        gamma = None
    ))]
    #[allow(clippy::too_many_arguments)]
    fn convert(
        &self,
        py: Python<'_>,
        src: &Bound<'_, PyAny>,
        dst: &Bound<'_, PyTensor>,
        fit: Option<&str>,
        pad: Option<[Int<u8>; 3]>,
        crop: Option<CropArgument>,
        rotate: Int<u32>,
        flip: Option<&str>,
        mean: Option<[f32; 3]>,
        std: Option<[f32; 3]>,
        quantize: Option<&Bound<'_, PyAny>>,
        interp: Option<&str>,
        matrix: Option<&str>,
        range: Option<&str>,
        src_format: Option<&str>,
        src_layout: Option<&PyImageLayout>,
        black_level: Option<&Bound<'_, PyAny>>,
        wb_gains: Option<&Bound<'_, PyAny>>,
        ccm: Option<&Bound<'_, PyAny>>,
        gamma: Option<&str>,
    ) -> PyResult<PyConvertInfo> {
        // The source: a tensor, or an array described by a format or a layout.
        let source = if let Ok(t) = src.cast::<PyTensor>() {
            if src_format.is_some() || src_layout.is_some() {
                return Err(invalid(
                    "src_format and src_layout describe arrays; a tensor has its own layout",
                ));
            }
            if t.is(dst) {
                return Err(invalid(
                    "the source and the destination are the same tensor",
                ));
            }
            Source::Tensor(t.get())
        } else {
            let (a, layout) = parse_array(src, "src", src_format, src_layout)?;
            Source::Array(a, layout)
        };
        let dst = dst.get();

        // The options, as the CLI builds them.
        let fit = parse_fit(fit, pad.map(|p| p.map(|v| v.0)))?;
        let crop = crop.map(|(x, y, w, h)| Crop::new(x.0, y.0, w.0, h.0));
        let shared = Shared::parse(
            rotate,
            flip,
            mean,
            std,
            quantize,
            interp,
            matrix,
            range,
            black_level,
            wb_gains,
            ccm,
            gamma,
        )?;

        let info = py.detach(|| -> pinframe::Result<ConvertInfo> {
            let src_height = match &source {
                Source::Tensor(t) => t.read().source()?.layout().map(|l| l.height()).unwrap_or(0),
                Source::Array(_, l) => l.height(),
            };
            let options = shared.options(crop, fit, src_height);
            let mut p = self.inner.lock().unwrap_or_else(|e| e.into_inner());
            match &source {
                Source::Tensor(t) => {
                    // Tensor locks are taken in address order, so that two threads
                    // converting a into b and b into a cannot wait for each other.
                    let (src_state, mut dst_state) =
                        if std::ptr::from_ref::<PyTensor>(t) < std::ptr::from_ref(dst) {
                            let s = t.read();
                            (s, dst.write())
                        } else {
                            let d = dst.write();
                            (t.read(), d)
                        };
                    let src = src_state.source()?;
                    let dst = dst_state.target()?;
                    with_tensor!(dst, d => p.convert_with(src, d, &options))
                }
                Source::Array(a, layout) => {
                    let mut dst_state = dst.write();
                    let dst = dst_state.target()?;
                    // SAFETY: `image_layout`/`check_extent` proved the array spans
                    // `required_len` bytes from `a.ptr`; the caller's reference keeps the
                    // array alive for this call. It is only read.
                    let bytes = unsafe {
                        std::slice::from_raw_parts(a.ptr as *const u8, layout.required_len(0))
                    };
                    with_tensor!(dst, d => {
                        if d.batch_len() > 1 {
                            return Err(Error::InvalidArgument(format!(
                                "the destination is a batch of {} images: convert into it \
                                 with convert_batch",
                                d.batch_len()
                            )));
                        }
                        let dst_layout = *d.layout().ok_or_else(|| {
                            Error::InvalidArgument(
                                "the destination tensor has no image layout; make it with \
                                 Tensor.image or give it one with set_layout"
                                    .into(),
                            )
                        })?;
                        let mut map = d.map_mut()?;
                        refuse_overlap(bytes, &map)?;
                        p.convert_buffers(&[bytes], layout, &mut map, &dst_layout, &options)
                    })
                }
            }
        });
        Ok(PyConvertInfo {
            inner: info.or_raise()?,
        })
    }

    /// convert_batch(items, dst, *, fit="stretch", pad=(114, 114, 114), crop=None,
    ///               rotate=0, flip="none", mean=(0, 0, 0), std=(1, 1, 1), quantize=None,
    ///               interp="bilinear", matrix=None, range=None, src_format=None,
    ///               src_layout=None, black_level=0, wb_gains=(1, 1, 1), ccm=identity,
    ///               gamma="linear") -> list[ConvertInfo]
    ///
    /// Converts several images into the slices of the batch tensor `dst`
    /// (`Tensor.image(w, h, fmt, dtype, batch=N)`) in one pass: item `i` into slice `i`,
    /// each exactly as `convert(source, <slice i>, crop=..., fit=..., **kwargs)` would.
    ///
    /// items: a list (or tuple) of 1 to N items. An item is a source as `convert` takes
    ///     it (a u8 image `Tensor` or a numpy array), or `(source, crop)` with `crop`
    ///     `(x, y, w, h)` in that source's pixels (None: the shared `crop`), or
    ///     `(source, crop, fit)` with `fit` "stretch", "letterbox" or "fill" (None: the
    ///     shared `fit`). A letterboxed item pads with `pad`. Fewer items than slices
    ///     leave the other slices as they are. The same tensor may appear in many items
    ///     (it is mapped once).
    /// Keyword arguments: as for `convert`, shared by every item; `src_format` /
    ///     `src_layout` describe every numpy item (convert a frame of another format from
    ///     a Tensor, e.g. `Tensor.from_numpy(a, "nv12")`). A YUV matrix or range given
    ///     alone is completed with the first item's default colorimetry.
    ///
    /// Returns one ConvertInfo per item, in its own source's pixels (`to_source` maps a
    /// point of slice `i` back into item `i`'s frame).
    ///
    /// Everything is checked before anything is written. The GIL is released while
    /// converting. Errors: InvalidInput for no item or more items than slices, a bad
    /// item or option, a crop outside its source, a source that is `dst` or a numpy view
    /// of its memory (messages name the item, "batch item 2: ..."); Unsupported and
    /// DeviceError as for `convert`.
    #[pyo3(signature = (
        items, dst, *, fit = None, pad = None, crop = None, rotate = Int(0), flip = None,
        mean = None, std = None, quantize = None, interp = None, matrix = None, range = None,
        src_format = None, src_layout = None, black_level = None, wb_gains = None, ccm = None,
        gamma = None
    ))]
    #[allow(clippy::too_many_arguments)]
    fn convert_batch(
        &self,
        py: Python<'_>,
        items: &Bound<'_, PyAny>,
        dst: &Bound<'_, PyTensor>,
        fit: Option<&str>,
        pad: Option<[Int<u8>; 3]>,
        crop: Option<CropArgument>,
        rotate: Int<u32>,
        flip: Option<&str>,
        mean: Option<[f32; 3]>,
        std: Option<[f32; 3]>,
        quantize: Option<&Bound<'_, PyAny>>,
        interp: Option<&str>,
        matrix: Option<&str>,
        range: Option<&str>,
        src_format: Option<&str>,
        src_layout: Option<&PyImageLayout>,
        black_level: Option<&Bound<'_, PyAny>>,
        wb_gains: Option<&Bound<'_, PyAny>>,
        ccm: Option<&Bound<'_, PyAny>>,
        gamma: Option<&str>,
    ) -> PyResult<Vec<PyConvertInfo>> {
        // The items, held (a strong reference each) for the whole call: another thread
        // emptying the list while the GIL is released cannot free a source.
        let raw: Vec<Bound<'_, PyAny>> = if let Ok(list) = items.cast::<PyList>() {
            list.iter().collect()
        } else if let Ok(tuple) = items.cast::<PyTuple>() {
            tuple.iter().collect()
        } else {
            return Err(invalid(format!(
                "items must be a list of sources or (source, crop[, fit]) tuples, not {} \
                 (for one image, use convert)",
                items.get_type().name()?
            )));
        };
        let mut parts = Vec::with_capacity(raw.len());
        for (i, item) in raw.iter().enumerate() {
            parts.push(split_item(item).map_err(|e| in_item(py, i, e))?);
        }
        let any_letterbox =
            |f: Option<&str>| f.is_some_and(|f| f.eq_ignore_ascii_case("letterbox"));
        let pad = pad.map(|p| p.map(|v| v.0));
        // `pad` is the letterbox colour: the shared fit's or an item's.
        let item_letterbox = parts.iter().any(|p| any_letterbox(p.fit.as_deref()));
        let shared_fit = parse_fit(
            fit,
            if item_letterbox && !any_letterbox(fit) {
                None
            } else {
                pad
            },
        )?;
        let crop = crop.map(|(x, y, w, h)| Crop::new(x.0, y.0, w.0, h.0));
        let shared = Shared::parse(
            rotate,
            flip,
            mean,
            std,
            quantize,
            interp,
            matrix,
            range,
            black_level,
            wb_gains,
            ccm,
            gamma,
        )?;
        let mut arrays = false;
        let mut sources = Vec::with_capacity(parts.len());
        for (i, part) in parts.iter().enumerate() {
            let source = (|| {
                let fit = part
                    .fit
                    .as_deref()
                    .map(|f| parse_fit(Some(f), if any_letterbox(Some(f)) { pad } else { None }))
                    .transpose()?;
                let source = if let Ok(t) = part.source.cast::<PyTensor>() {
                    if t.is(dst) {
                        return Err(invalid(
                            "the source and the destination are the same tensor",
                        ));
                    }
                    Source::Tensor(t.get())
                } else {
                    let (a, layout) =
                        parse_array(&part.source, "the source", src_format, src_layout)?;
                    arrays = true;
                    Source::Array(a, layout)
                };
                Ok((source, part.crop, fit))
            })()
            .map_err(|e| in_item(py, i, e))?;
            sources.push(source);
        }
        if !arrays && (src_format.is_some() || src_layout.is_some()) {
            return Err(invalid(
                "src_format and src_layout describe arrays; no item is one (a tensor has its \
                 own layout)",
            ));
        }
        let dst = dst.get();

        let infos = py.detach(|| -> pinframe::Result<Vec<ConvertInfo>> {
            // Every tensor once, in address order (as `convert` takes its two), the
            // destination for writing: two threads converting crossed batches cannot wait
            // for each other, and a tensor in many items is locked once.
            let addr = |t: &PyTensor| std::ptr::from_ref(t) as usize;
            let mut order: Vec<&PyTensor> = sources
                .iter()
                .filter_map(|(s, _, _)| match s {
                    Source::Tensor(t) => Some(*t),
                    Source::Array(..) => None,
                })
                .chain(std::iter::once(dst))
                .collect();
            order.sort_by_key(|t| addr(t));
            order.dedup_by_key(|t| addr(t));
            let mut reads = Vec::with_capacity(order.len());
            let mut write = None;
            for t in order {
                if std::ptr::eq(t, dst) {
                    write = Some(t.write());
                } else {
                    reads.push((addr(t), t.read()));
                }
            }
            let mut dst_state = write.ok_or_else(|| {
                Error::InvalidArgument("the batch destination was not locked".into())
            })?;
            let mut tensors: Vec<Option<&pinframe::Tensor<u8>>> = Vec::with_capacity(sources.len());
            for (i, (s, _, _)) in sources.iter().enumerate() {
                tensors.push(match s {
                    Source::Tensor(t) => {
                        let state = reads
                            .iter()
                            .find(|(a, _)| *a == addr(t))
                            .map(|(_, g)| g)
                            .ok_or_else(|| {
                                Error::InvalidArgument("a batch source was not locked".into())
                            })?;
                        Some(
                            state.source().map_err(|e| {
                                Error::InvalidArgument(format!("batch item {i}: {e}"))
                            })?,
                        )
                    }
                    Source::Array(..) => None,
                });
            }
            // SAFETY: `parse_array` proved each array spans `required_len` bytes from its
            // address; `raw` keeps every array alive for this call. They are only read.
            let buffers: Vec<[&[u8]; 1]> = sources
                .iter()
                .map(|(s, _, _)| match s {
                    Source::Array(a, layout) => [unsafe {
                        std::slice::from_raw_parts(a.ptr as *const u8, layout.required_len(0))
                    }],
                    Source::Tensor(_) => [&[][..]],
                })
                .collect();
            let mut batch = Vec::with_capacity(sources.len());
            for (((s, crop, fit), t), bufs) in sources.iter().zip(&tensors).zip(&buffers) {
                let mut item = match (s, t) {
                    (Source::Array(_, layout), _) => BatchItem::bytes(bufs, layout),
                    (Source::Tensor(_), Some(t)) => BatchItem::tensor(t),
                    (Source::Tensor(_), None) => {
                        return Err(Error::InvalidArgument("a batch source was not read".into()));
                    }
                };
                if let Some(c) = crop {
                    item = item.with_crop(*c);
                }
                if let Some(f) = fit {
                    item = item.with_fit(*f);
                }
                batch.push(item);
            }
            let src_height = match batch.first().map(|b| b.source.layout()) {
                Some(Ok(l)) => l.height(),
                _ => 0,
            };
            let options = shared.options(crop, shared_fit, src_height);
            let mut p = self.inner.lock().unwrap_or_else(|e| e.into_inner());
            let dst = dst_state.target()?;
            with_tensor!(dst, d => {
                if arrays {
                    // A source array over the batch's own memory would be read while it is
                    // written.
                    let map = d.map()?;
                    for (i, bufs) in buffers.iter().enumerate() {
                        if !bufs[0].is_empty() {
                            refuse_overlap(bufs[0], &map).map_err(|e| {
                                Error::InvalidArgument(format!("batch item {i}: {e}"))
                            })?;
                        }
                    }
                }
                p.convert_batch(&batch, d, &options)
            })
        });
        Ok(infos
            .or_raise()?
            .into_iter()
            .map(|inner| PyConvertInfo { inner })
            .collect())
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        format!(
            "ImageProcessor(backend={:?})",
            self.lock(py).backend().name()
        )
    }
}

#[pymethods]
impl PyConvertInfo {
    /// Destination pixels per oriented source pixel, (x, y).
    #[getter]
    fn scale(&self) -> (f64, f64) {
        (self.inner.scale[0], self.inner.scale[1])
    }

    /// Where the oriented source's top-left corner landed in the destination, (x, y)
    /// (positive for a letterbox's padding, negative for a fill's overflow).
    #[getter]
    fn offset(&self) -> (i64, i64) {
        (self.inner.offset[0], self.inner.offset[1])
    }

    /// The destination rectangle covered by source content, (x, y, w, h).
    #[getter]
    fn content(&self) -> (u32, u32, u32, u32) {
        let c = self.inner.content;
        (c[0], c[1], c[2], c[3])
    }

    /// The colorimetry used, (matrix, range), or None for a source that is not YUV.
    #[getter]
    fn colorimetry(&self) -> Option<(&'static str, &'static str)> {
        self.inner
            .colorimetry
            .map(|c| (c.matrix.name(), c.range.name()))
    }

    /// The affine map from destination to source coordinates, ((a, b, c), (d, e, f)):
    /// `src_x = a x + b y + c`, `src_y = d x + e y + f`.
    #[getter]
    fn dst_to_src(&self) -> ((f64, f64, f64), (f64, f64, f64)) {
        let m = self.inner.dst_to_src;
        ((m[0][0], m[0][1], m[0][2]), (m[1][0], m[1][1], m[1][2]))
    }

    /// to_source(x, y) -> (x, y): a destination point (continuous pixel coordinates, e.g.
    /// a box corner) mapped back to the source image.
    fn to_source(&self, x: f64, y: f64) -> (f64, f64) {
        self.inner.to_source(x, y)
    }

    fn __repr__(&self) -> String {
        let i = &self.inner;
        format!(
            "ConvertInfo(scale=({:.6}, {:.6}), offset=({}, {}), content={:?})",
            i.scale[0], i.scale[1], i.offset[0], i.offset[1], i.content
        )
    }
}

#[pymethods]
impl PyProcessorStats {
    fn __repr__(&self) -> String {
        format!(
            "ProcessorStats(imports={}, cache_hits={}, uploads={}, readbacks={}, \
             cpu_fallbacks={}, frames={})",
            self.imports,
            self.cache_hits,
            self.uploads,
            self.readbacks,
            self.cpu_fallbacks,
            self.frames
        )
    }
}
