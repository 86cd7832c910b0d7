//! LiteRT (Google's on-device runtime, formerly TensorFlow Lite) with pinframe tensors as
//! its inputs, bound once and read in place on every run.
//!
//! `libLiteRt.so` is loaded at run time (no build-time dependency): from
//! `$PINFRAME_LITERT_LIB` (a file or a directory), else the dynamic linker's search path,
//! else an installed `ai-edge-litert` Python wheel, which ships it. The binding follows
//! LiteRT's own vocabulary: an [`Environment`], a [`Model`] loaded from a `.tflite` file
//! (its inputs and outputs described by [`TensorInfo`]: name, shape, element type,
//! quantisation), and a [`CompiledModel`] compiled for the CPU (XNNPACK) that runs it.
//!
//! # No copy
//!
//! [`CompiledModel::bind_input`] wraps the tensor's [`HostPin`] in a LiteRT tensor buffer
//! once (`LiteRtCreateTensorBufferFromHostMemory` at the pin's address; a DMA tensor is
//! offered as its dma-buf first, `LiteRtCreateTensorBufferFromDmaBufBuffer`, and bound
//! over its pin when LiteRT refuses, which is counted in
//! [`RuntimeStats::dmabuf_fallbacks`] and logged once). LiteRT's CPU path hands host
//! buffers to the interpreter as custom allocations, so the model reads the very bytes a
//! conversion wrote: [`CompiledModel::input_host_address`] asks LiteRT where its buffer
//! is, and it is the pin's address. Every later frame is a conversion into the tensor and
//! a [`CompiledModel::run`], which creates nothing and allocates nothing. Outputs live in
//! 64-byte-aligned buffers pinframe allocated and bound the same way, read as typed
//! slices ([`CompiledModel::output`]) without a copy.
//!
//! A DMA input is bracketed on every run like any pin holder's access: `DMA_BUF_IOCTL_SYNC`
//! START (read) before the model runs and END after.
//!
//! # Batches
//!
//! A model input of shape `[N, H, W, C]` binds a [`Tensor::image_batch`] of N slices
//! whole, once. A model exported for one image (`[1, H, W, C]`) is given a batch with
//! [`CompiledModel::resize_input`] first (LiteRT's non-strict resize: the outputs follow,
//! reallocated at their new shapes); one run then reads every slice a
//! [`convert_batch`](crate::ImageProcessor::convert_batch) wrote.
//! [`CompiledModel::bind_input_slices`] binds the first k slices of a batch to a
//! `[k, H, W, C]` input, so one batch tensor serves a model per batch size, each bound
//! once, and a frame with k items runs only its k slices.
//!
//! ```no_run
//! use pinframe::runtime::litert::{Accelerator, CompiledModel, Environment, Model};
//! use pinframe::{ConvertOptions, Fit, ImageProcessor, MemoryRequest, Normalize, Tensor};
//! # fn main() -> pinframe::Result<()> {
//! # let frame = Tensor::<u8>::image(640, 480, pinframe::PixelFormat::Yuyv, None)?;
//! let env = Environment::new()?;
//! let model = Model::from_file(&env, "face_detection_short_range.tflite")?;
//! let input = model.inputs()[0].image_input()?; // 128x128 NHWC f32
//! // Device memory first: a dma-buf input is bound without a copy.
//! let mut tensor = Tensor::<f32>::with_layout(input.image_layout()?, MemoryRequest::Device)?;
//! let mut compiled = CompiledModel::new(&model, &[Accelerator::Cpu])?;
//! compiled.bind_input(0, &tensor)?; // once
//! let options = ConvertOptions {
//!     fit: Fit::Letterbox { pad: [0; 3] },
//!     normalize: Normalize { mean: [0.5; 3], std: [0.5; 3] },
//!     ..ConvertOptions::for_input(&input)
//! };
//! let mut processor = ImageProcessor::new()?;
//! // every frame:
//! let info = processor.convert_with(&frame, &mut tensor, &options)?;
//! compiled.run()?;
//! let scores: &[f32] = compiled.output(1)?;
//! # let _ = (info, scores);
//! # Ok(()) }
//! ```

mod ffi;

use std::ffi::{CStr, CString, c_char, c_int, c_void};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Once};

use crate::convert::{ModelInput, TensorLayout};
use crate::image::FormatFamily;
use crate::{
    Access, DType, Element, Error, HostPin, ImageLayout, Memory, Quantize, Result, Tensor,
};

pub use ffi::{HOST_MEMORY_ALIGNMENT, LIBRARY_ENV, LIBRARY_NAME};

/// The environment variable setting LiteRT's own log level: `info`, `warning` (the
/// default), `error` or `silent`.
pub const LOG_ENV: &str = "PINFRAME_LITERT_LOG";

/// The `ai-edge-litert` release whose C API this binding declares.
pub const LITERT_RELEASE: &str = "2.3.0";

const RUNTIME: &str = "LiteRT";

/// The outcome of the default search, once per process and per search input (the
/// library variable's value and where the wheel is looked for): a library that loaded, or
/// the places tried. A failed search is not re-run (it may start a Python interpreter)
/// until one of its inputs changes.
static DEFAULT_API: Mutex<Option<(SearchKey, SearchOutcome)>> = Mutex::new(None);

type SearchKey = (Option<std::ffi::OsString>, ffi::WheelLookup);
/// A loaded library, or the places tried.
type SearchOutcome = std::result::Result<Arc<ffi::Api>, Vec<String>>;

/// The default search (cached, see [`DEFAULT_API`]).
fn default_api(wheel: ffi::WheelLookup) -> Result<Arc<ffi::Api>> {
    let key = (std::env::var_os(ffi::LIBRARY_ENV), wheel);
    let mut cached = DEFAULT_API.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((k, outcome)) = &*cached
        && *k == key
    {
        return outcome.clone().map_err(|tried| Error::RuntimeUnavailable {
            runtime: RUNTIME,
            tried,
        });
    }
    let outcome = ffi::Api::find(&key.1).map(Arc::new).map_err(|e| match e {
        Error::RuntimeUnavailable { tried, .. } => tried,
        other => vec![other.to_string()],
    });
    *cached = Some((key, outcome.clone()));
    outcome.map_err(|tried| Error::RuntimeUnavailable {
        runtime: RUNTIME,
        tried,
    })
}

/// Turns a LiteRT status into a `Result`.
fn check(
    api: &ffi::Api,
    status: ffi::Status,
    call: &'static str,
    message: impl FnOnce() -> String,
) -> Result<()> {
    if status == ffi::STATUS_OK {
        Ok(())
    } else {
        Err(Error::Runtime {
            runtime: RUNTIME,
            call,
            status,
            status_name: api.status_name(status),
            message: message(),
        })
    }
}

/// Reads a C string LiteRT owns (`None` for null).
///
/// # Safety
/// `p` is null or a NUL-terminated string valid for the duration of the call.
unsafe fn c_string(p: *const c_char) -> String {
    if p.is_null() {
        String::new()
    } else {
        // SAFETY: the caller guarantees a NUL-terminated string.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }
}

struct EnvInner {
    api: Arc<ffi::Api>,
    raw: ffi::Environment,
    /// Serialises the calls that use the environment (model creation and compilation):
    /// LiteRT does not document them as thread-safe.
    lock: Mutex<()>,
}

// SAFETY: the environment handle is only used under `lock` (creation calls) or by the
// objects created from it, each of which is used through `&mut` or by one thread at a time;
// LiteRT ties none of them to the creating thread.
unsafe impl Send for EnvInner {}
// SAFETY: as above: shared access only reaches LiteRT under `lock`.
unsafe impl Sync for EnvInner {}

impl Drop for EnvInner {
    fn drop(&mut self) {
        // SAFETY: `raw` came from LiteRtCreateEnvironment and every model and compiled
        // model created from it holds an `Arc` of this value, so none is alive now.
        unsafe { (self.api.LiteRtDestroyEnvironment)(self.raw) };
    }
}

/// A LiteRT environment: the loaded library and the runtime state models and compiled
/// models share. Cheap to clone.
#[derive(Clone)]
pub struct Environment {
    inner: Arc<EnvInner>,
}

impl fmt::Debug for Environment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Environment")
            .field("library", &self.inner.api.path)
            .finish()
    }
}

impl Environment {
    /// Loads LiteRT from where [the module documentation](self) says and creates an
    /// environment. [`Error::RuntimeUnavailable`] lists every place looked in when there
    /// is no library (or it lacks a function this binding needs).
    /// The search's outcome is kept for the process: a failed search is not repeated
    /// (it may start a Python interpreter) until `$PINFRAME_LITERT_LIB` changes.
    pub fn new() -> Result<Self> {
        Self::with_api(default_api(ffi::WheelLookup::PathPython)?)
    }

    /// [`new`](Self::new), with the `ai-edge-litert` wheel's package directory found by
    /// the caller instead of by the `python3` on `PATH`: what a Python binding passes (its
    /// own interpreter's `importlib.util.find_spec("ai_edge_litert")`), so that a package
    /// installed in an un-activated virtual environment is found. `None`: the caller's
    /// interpreter has no such package (the wheel step is then skipped).
    pub fn with_wheel_dir(wheel_dir: Option<&Path>) -> Result<Self> {
        Self::with_api(default_api(ffi::WheelLookup::Dir(
            wheel_dir.map(Path::to_path_buf),
        ))?)
    }

    /// Creates an environment from the library at `path`.
    pub fn with_library(path: impl AsRef<Path>) -> Result<Self> {
        Self::with_api(Arc::new(ffi::Api::open(path.as_ref())?))
    }

    fn with_api(api: Arc<ffi::Api>) -> Result<Self> {
        let severity = match std::env::var(LOG_ENV).as_deref() {
            Ok("info") => ffi::LOG_SEVERITY_INFO,
            Ok("error") => ffi::LOG_SEVERITY_ERROR,
            Ok("silent") => ffi::LOG_SEVERITY_SILENT,
            _ => ffi::LOG_SEVERITY_WARNING,
        };
        let options = [ffi::EnvOption {
            tag: ffi::ENV_OPTION_MIN_LOGGER_SEVERITY,
            value: ffi::AnyInt {
                ty: ffi::ANY_TYPE_INT,
                int_value: severity,
            },
        }];
        let mut raw: ffi::Environment = std::ptr::null_mut();
        // SAFETY: one option of the header's layout, read during the call; `raw` is a
        // valid out-pointer.
        let status = unsafe { (api.LiteRtCreateEnvironment)(1, options.as_ptr(), &mut raw) };
        check(&api, status, "LiteRtCreateEnvironment", String::new)?;
        if raw.is_null() {
            return Err(null_handle(&api, "LiteRtCreateEnvironment"));
        }
        Ok(Environment {
            inner: Arc::new(EnvInner {
                api,
                raw,
                lock: Mutex::new(()),
            }),
        })
    }

    /// Where the library was loaded from.
    pub fn library_path(&self) -> &Path {
        &self.inner.api.path
    }

    fn api(&self) -> &ffi::Api {
        &self.inner.api
    }
}

fn null_handle(api: &ffi::Api, call: &'static str) -> Error {
    Error::Runtime {
        runtime: RUNTIME,
        call,
        status: ffi::STATUS_OK,
        status_name: api.status_name(ffi::STATUS_OK),
        message: "returned success and a null handle".into(),
    }
}

/// A tensor element type as LiteRT names it (`LiteRtElementType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ElementType {
    /// `float32`
    F32,
    /// `float16`
    F16,
    /// `float64`
    F64,
    /// `int8`
    I8,
    /// `uint8`
    U8,
    /// `int16`
    I16,
    /// `uint16`
    U16,
    /// `int32`
    I32,
    /// `uint32`
    U32,
    /// `int64`
    I64,
    /// `uint64`
    U64,
    /// `bool`
    Bool,
    /// Any other LiteRT element type, by its code.
    Other(i32),
}

impl ElementType {
    fn from_raw(code: c_int) -> Self {
        match code {
            1 => ElementType::F32,
            2 => ElementType::I32,
            3 => ElementType::U8,
            4 => ElementType::I64,
            6 => ElementType::Bool,
            7 => ElementType::I16,
            9 => ElementType::I8,
            10 => ElementType::F16,
            11 => ElementType::F64,
            13 => ElementType::U64,
            16 => ElementType::U32,
            17 => ElementType::U16,
            other => ElementType::Other(other),
        }
    }

    /// The pinframe element type of the same layout, if there is one.
    pub fn dtype(self) -> Option<DType> {
        Some(match self {
            ElementType::F32 => DType::F32,
            ElementType::F16 => DType::F16,
            ElementType::F64 => DType::F64,
            ElementType::I8 => DType::I8,
            ElementType::U8 => DType::U8,
            ElementType::I16 => DType::I16,
            ElementType::U16 => DType::U16,
            ElementType::I32 => DType::I32,
            ElementType::U32 => DType::U32,
            _ => return None,
        })
    }

    /// Bytes per element, where known.
    pub fn size(self) -> Option<usize> {
        match self {
            ElementType::I64 | ElementType::U64 => Some(8),
            ElementType::Bool => Some(1),
            other => other.dtype().map(DType::size),
        }
    }
}

impl fmt::Display for ElementType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ElementType::I64 => f.write_str("i64"),
            ElementType::U64 => f.write_str("u64"),
            ElementType::Bool => f.write_str("bool"),
            ElementType::Other(c) => write!(f, "element type {c}"),
            other => f.write_str(other.dtype().map_or("?", DType::name)),
        }
    }
}

/// A tensor's quantisation, as the model stores it.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Quantization {
    /// Not quantised.
    None,
    /// One scale and zero point: `real = scale * (q - zero_point)`.
    PerTensor {
        /// Step size.
        scale: f32,
        /// The integer that represents 0.
        zero_point: i64,
    },
    /// A scale and zero point per index of one dimension.
    PerChannel {
        /// The quantised dimension.
        dimension: usize,
        /// Step sizes.
        scales: Vec<f32>,
        /// Zero points.
        zero_points: Vec<i64>,
    },
    /// A quantisation kind this binding does not read (LiteRT's code).
    Other(i32),
}

/// A model input or output: name, shape, element type and quantisation.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorInfo {
    /// The signature's name for it.
    pub name: String,
    /// Dimensions; negative ones are dynamic.
    pub shape: Vec<i64>,
    /// Element type.
    pub element_type: ElementType,
    /// Quantisation.
    pub quantization: Quantization,
    /// LiteRT's own description, used to create tensor buffers.
    raw_type: ffi::RankedTensorType,
}

impl TensorInfo {
    /// Elements, if every dimension is static.
    pub fn element_count(&self) -> Option<usize> {
        self.shape.iter().try_fold(1usize, |n, &d| {
            usize::try_from(d).ok().and_then(|d| n.checked_mul(d))
        })
    }

    /// Bytes of the dense tensor, if its shape is static and its element size known.
    pub fn byte_len(&self) -> Option<usize> {
        self.element_count()?.checked_mul(self.element_type.size()?)
    }

    /// The quantisation as conversion options take it: per tensor, or per channel along
    /// the channel dimension of an image input with 3 channels (`layout` says which
    /// dimension that is). `None` for an unquantised tensor.
    pub fn quantize(&self, layout: TensorLayout) -> Result<Option<Quantize>> {
        let clamp_zero = |z: i64| {
            i32::try_from(z).map_err(|_| {
                Error::Unsupported(format!("{self}: zero point {z} does not fit an i32"))
            })
        };
        match &self.quantization {
            Quantization::None => Ok(None),
            Quantization::PerTensor { scale, zero_point } => {
                Ok(Some(Quantize::per_tensor(*scale, clamp_zero(*zero_point)?)))
            }
            Quantization::PerChannel {
                dimension,
                scales,
                zero_points,
            } => {
                let channel_dim = match layout {
                    TensorLayout::Nhwc => self.shape.len().saturating_sub(1),
                    TensorLayout::Nchw => self.shape.len().saturating_sub(3),
                };
                if *dimension != channel_dim || scales.len() != 3 || zero_points.len() != 3 {
                    return Err(Error::Unsupported(format!(
                        "{self}: per-channel quantisation along dimension {dimension} with {} \
                         scales; pinframe quantises per tensor or per colour channel (3 \
                         scales along the channel dimension {channel_dim})",
                        scales.len()
                    )));
                }
                Ok(Some(Quantize::per_channel(
                    [scales[0], scales[1], scales[2]],
                    [
                        clamp_zero(zero_points[0])?,
                        clamp_zero(zero_points[1])?,
                        clamp_zero(zero_points[2])?,
                    ],
                )))
            }
            Quantization::Other(code) => Err(Error::Unsupported(format!(
                "{self}: quantisation kind {code} is not supported (per tensor and per \
                 channel are)"
            ))),
        }
    }

    /// This tensor as an image input: size, NHWC/NCHW, element type and quantisation,
    /// from which [`ConvertOptions::for_input`](crate::ConvertOptions::for_input) and
    /// [`ModelInput::image_layout`] make the conversion and the destination tensor.
    pub fn image_input(&self) -> Result<ModelInput> {
        let dtype = self.element_type.dtype().ok_or_else(|| {
            Error::Unsupported(format!(
                "{self}: pinframe has no {} elements",
                self.element_type
            ))
        })?;
        let layout = ModelInput::from_shape(&self.shape, dtype, None)?.layout;
        let quantize = self.quantize(layout)?;
        ModelInput::from_shape(&self.shape, dtype, quantize)
    }

    fn read(api: &ffi::Api, name: String, tensor: ffi::TensorHandle) -> Result<TensorInfo> {
        let mut type_id: c_int = -1;
        // SAFETY: `tensor` is a tensor handle of a live model; the out-pointer is valid.
        let status = unsafe { (api.LiteRtGetTensorTypeId)(tensor, &mut type_id) };
        check(api, status, "LiteRtGetTensorTypeId", || {
            format!("tensor {name:?}")
        })?;
        if type_id != ffi::RANKED_TENSOR_TYPE {
            return Err(Error::Unsupported(format!(
                "tensor {name:?} has a dynamic rank; pinframe binds ranked tensors"
            )));
        }
        let mut raw_type = ffi::RankedTensorType::default();
        // SAFETY: as above.
        let status = unsafe { (api.LiteRtGetRankedTensorType)(tensor, &mut raw_type) };
        check(api, status, "LiteRtGetRankedTensorType", || {
            format!("tensor {name:?}")
        })?;
        let rank = raw_type.layout.rank();
        if rank > ffi::MAX_RANK || raw_type.layout.has_strides() {
            return Err(Error::Unsupported(format!(
                "tensor {name:?}: rank {rank}{}; pinframe binds dense tensors of rank <= {}",
                if raw_type.layout.has_strides() {
                    " with strides"
                } else {
                    ""
                },
                ffi::MAX_RANK
            )));
        }
        let shape = raw_type.layout.dimensions[..rank]
            .iter()
            .map(|&d| i64::from(d))
            .collect();
        let mut q_type: c_int = -1;
        // SAFETY: as above.
        let status = unsafe { (api.LiteRtGetQuantizationTypeId)(tensor, &mut q_type) };
        check(api, status, "LiteRtGetQuantizationTypeId", || {
            format!("tensor {name:?}")
        })?;
        let quantization = match q_type {
            ffi::QUANTIZATION_NONE => Quantization::None,
            ffi::QUANTIZATION_PER_TENSOR => {
                let mut q = ffi::QuantizationPerTensor::default();
                // SAFETY: as above.
                let status = unsafe { (api.LiteRtGetPerTensorQuantization)(tensor, &mut q) };
                check(api, status, "LiteRtGetPerTensorQuantization", || {
                    format!("tensor {name:?}")
                })?;
                Quantization::PerTensor {
                    scale: q.scale,
                    zero_point: q.zero_point,
                }
            }
            ffi::QUANTIZATION_PER_CHANNEL => {
                let mut q = ffi::QuantizationPerChannel::default();
                // SAFETY: as above.
                let status = unsafe { (api.LiteRtGetPerChannelQuantization)(tensor, &mut q) };
                check(api, status, "LiteRtGetPerChannelQuantization", || {
                    format!("tensor {name:?}")
                })?;
                let n = usize::try_from(q.num_channels).unwrap_or(0);
                let (scales, zero_points) =
                    if n == 0 || q.scales.is_null() || q.zero_points.is_null() {
                        (Vec::new(), Vec::new())
                    } else {
                        // SAFETY: LiteRT returns `num_channels` scales and zero points owned
                        // by the model, which is alive; they are copied out at once.
                        unsafe {
                            (
                                std::slice::from_raw_parts(q.scales, n).to_vec(),
                                std::slice::from_raw_parts(q.zero_points, n).to_vec(),
                            )
                        }
                    };
                Quantization::PerChannel {
                    dimension: usize::try_from(q.quantized_dimension).unwrap_or(usize::MAX),
                    scales,
                    zero_points,
                }
            }
            other => Quantization::Other(other),
        };
        Ok(TensorInfo {
            name,
            shape,
            element_type: ElementType::from_raw(raw_type.element_type),
            quantization,
            raw_type,
        })
    }
}

impl fmt::Display for TensorInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} {} {:?}", self.name, self.element_type, self.shape)?;
        match &self.quantization {
            Quantization::None => Ok(()),
            Quantization::PerTensor { scale, zero_point } => {
                write!(f, " (scale {scale}, zero point {zero_point})")
            }
            Quantization::PerChannel {
                dimension, scales, ..
            } => {
                write!(f, " ({} scales along dimension {dimension})", scales.len())
            }
            Quantization::Other(c) => write!(f, " (quantisation kind {c})"),
        }
    }
}

struct ModelInner {
    env: Environment,
    raw: ffi::Model,
    path: PathBuf,
    signature_key: String,
    inputs: Vec<TensorInfo>,
    outputs: Vec<TensorInfo>,
}

// SAFETY: the model handle is immutable after loading (only read by compilation, which
// runs under the environment's lock); LiteRT ties it to no thread.
unsafe impl Send for ModelInner {}
// SAFETY: as above.
unsafe impl Sync for ModelInner {}

impl Drop for ModelInner {
    fn drop(&mut self) {
        // SAFETY: `raw` came from LiteRtCreateModelFromFile; every compiled model made from
        // it holds an `Arc` of this value, so none is alive now.
        unsafe { (self.env.api().LiteRtDestroyModel)(self.raw) };
    }
}

/// A `.tflite` model loaded into LiteRT, with its first signature's inputs and outputs.
/// Cheap to clone; one model can be compiled several times.
#[derive(Clone)]
pub struct Model {
    inner: Arc<ModelInner>,
}

impl fmt::Debug for Model {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Model")
            .field("path", &self.inner.path)
            .field("signature", &self.inner.signature_key)
            .field("inputs", &self.inner.inputs)
            .field("outputs", &self.inner.outputs)
            .finish()
    }
}

impl Model {
    /// Loads a `.tflite` file and reads its first signature (LiteRT gives a model without
    /// signatures a default one over its main subgraph).
    pub fn from_file(env: &Environment, path: impl AsRef<Path>) -> Result<Model> {
        let path = path.as_ref();
        let api = env.api();
        let c_path = CString::new(path.as_os_str().as_encoded_bytes()).map_err(|_| {
            Error::InvalidArgument(format!("model path {} contains a NUL byte", path.display()))
        })?;
        if !path.is_file() {
            return Err(Error::io(
                format!("LiteRT model {}", path.display()),
                std::io::Error::new(std::io::ErrorKind::NotFound, "no such file"),
            ));
        }
        let mut raw: ffi::Model = std::ptr::null_mut();
        {
            let _env = env.inner.lock.lock().unwrap_or_else(|e| e.into_inner());
            // SAFETY: a live environment, a NUL-terminated path and a valid out-pointer.
            let status = unsafe {
                (api.LiteRtCreateModelFromFile)(env.inner.raw, c_path.as_ptr(), &mut raw)
            };
            check(api, status, "LiteRtCreateModelFromFile", || {
                format!("loading {} (is it a .tflite flatbuffer?)", path.display())
            })?;
        }
        if raw.is_null() {
            return Err(null_handle(api, "LiteRtCreateModelFromFile"));
        }
        // From here `inner` owns `raw` and destroys it on every error path.
        let mut inner = ModelInner {
            env: env.clone(),
            raw,
            path: path.to_path_buf(),
            signature_key: String::new(),
            inputs: Vec::new(),
            outputs: Vec::new(),
        };
        let mut count: ffi::ParamIndex = 0;
        // SAFETY: a live model and a valid out-pointer.
        let status = unsafe { (api.LiteRtGetNumModelSignatures)(raw, &mut count) };
        check(api, status, "LiteRtGetNumModelSignatures", String::new)?;
        if count == 0 {
            return Err(Error::Unsupported(format!(
                "{} has no signature (LiteRT found no subgraph to run)",
                path.display()
            )));
        }
        let mut signature: ffi::Signature = std::ptr::null_mut();
        // SAFETY: index 0 < count; valid out-pointer.
        let status = unsafe { (api.LiteRtGetModelSignature)(raw, 0, &mut signature) };
        check(api, status, "LiteRtGetModelSignature", String::new)?;
        let mut key: *const c_char = std::ptr::null();
        // SAFETY: a live signature of the model; valid out-pointer.
        let status = unsafe { (api.LiteRtGetSignatureKey)(signature, &mut key) };
        check(api, status, "LiteRtGetSignatureKey", String::new)?;
        // SAFETY: LiteRT returns a NUL-terminated string owned by the model (or null).
        inner.signature_key = unsafe { c_string(key) };
        for output in [false, true] {
            let mut n: ffi::ParamIndex = 0;
            // SAFETY: a live signature; valid out-pointer.
            let status = unsafe {
                if output {
                    (api.LiteRtGetNumSignatureOutputs)(signature, &mut n)
                } else {
                    (api.LiteRtGetNumSignatureInputs)(signature, &mut n)
                }
            };
            check(
                api,
                status,
                "LiteRtGetNumSignatureInputs/Outputs",
                String::new,
            )?;
            for i in 0..n {
                let mut name: *const c_char = std::ptr::null();
                let mut tensor: ffi::TensorHandle = std::ptr::null_mut();
                // SAFETY: i < n; valid out-pointers; the handles belong to the live model.
                let (s1, s2) = unsafe {
                    if output {
                        (
                            (api.LiteRtGetSignatureOutputName)(signature, i, &mut name),
                            (api.LiteRtGetSignatureOutputTensorByIndex)(signature, i, &mut tensor),
                        )
                    } else {
                        (
                            (api.LiteRtGetSignatureInputName)(signature, i, &mut name),
                            (api.LiteRtGetSignatureInputTensorByIndex)(signature, i, &mut tensor),
                        )
                    }
                };
                check(
                    api,
                    s1,
                    "LiteRtGetSignatureInputName/OutputName",
                    String::new,
                )?;
                check(
                    api,
                    s2,
                    "LiteRtGetSignatureInputTensorByIndex/Output",
                    String::new,
                )?;
                if tensor.is_null() {
                    return Err(null_handle(api, "LiteRtGetSignatureInputTensorByIndex"));
                }
                // SAFETY: a NUL-terminated string owned by the model (or null).
                let name = unsafe { c_string(name) };
                let info = TensorInfo::read(api, name, tensor)?;
                if output {
                    inner.outputs.push(info);
                } else {
                    inner.inputs.push(info);
                }
            }
        }
        Ok(Model {
            inner: Arc::new(inner),
        })
    }

    /// The inputs, in the order [`CompiledModel::bind_input`] indexes them.
    pub fn inputs(&self) -> &[TensorInfo] {
        &self.inner.inputs
    }

    /// The outputs, in the order [`CompiledModel::output`] indexes them.
    pub fn outputs(&self) -> &[TensorInfo] {
        &self.inner.outputs
    }

    /// The signature run (the model's first).
    pub fn signature_key(&self) -> &str {
        &self.inner.signature_key
    }

    /// The file the model was loaded from.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }
}

/// A hardware accelerator to compile for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Accelerator {
    /// The CPU (XNNPACK): always available.
    Cpu,
    /// A GPU accelerator library, where LiteRT finds one.
    Gpu,
    /// An NPU dispatch library, where LiteRT finds one.
    Npu,
}

/// How an input is bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Binding {
    /// A LiteRT host-memory buffer at the pin's address (heap and memfd tensors).
    HostMemory,
    /// The tensor's dma-buf itself.
    DmaBuf,
    /// A DMA tensor that LiteRT would not take as a dma-buf, bound as host memory over its
    /// CPU mapping (still no copy; counted in [`RuntimeStats::dmabuf_fallbacks`]).
    HostMemoryOverDmaBuf,
    /// The runtime's own input buffer ([`CompiledModel::allocate_input`]): the caller
    /// copies into it.
    RuntimeOwned,
}

/// What a [`CompiledModel`] did: the proof that steady state creates nothing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RuntimeStats {
    /// LiteRT tensor buffers created (inputs bound, outputs, runtime-owned inputs).
    pub buffers_created: u64,
    /// LiteRT tensor buffers destroyed (rebinding an input replaces its buffer).
    pub buffers_destroyed: u64,
    /// Inputs bound at a pin's address.
    pub host_bindings: u64,
    /// Inputs bound as dma-bufs.
    pub dmabuf_bindings: u64,
    /// DMA inputs LiteRT refused as dma-bufs, bound as host memory over the pin instead.
    pub dmabuf_fallbacks: u64,
    /// Runs.
    pub runs: u64,
}

/// A LiteRT tensor buffer, destroyed exactly once: when it drops, on every path (a
/// failed step after its creation included).
struct Buffer {
    raw: ffi::TensorBuffer,
    env: Arc<EnvInner>,
    /// The compiled model's count of destroyed buffers.
    destroyed: Arc<AtomicU64>,
}

impl Drop for Buffer {
    fn drop(&mut self) {
        // SAFETY: `raw` was created by LiteRT for a compiled model of this environment
        // (kept alive by `env`) and is destroyed only here. Whoever holds memory LiteRT
        // reads through it (a pin, an output's storage) is declared after the buffer and
        // so released after it.
        unsafe { (self.env.api.LiteRtDestroyTensorBuffer)(self.raw) };
        self.destroyed.fetch_add(1, Ordering::Relaxed);
    }
}

/// Makes the next step after a tensor buffer's creation on this thread fail once (a test
/// hook for the error paths, which must destroy the buffer they made).
#[cfg(feature = "testing")]
pub fn fail_after_next_buffer_creation() {
    FAIL_AFTER_CREATION.set(true);
}

#[cfg(feature = "testing")]
thread_local! {
    // Per thread: tests running side by side in one process do not take each other's.
    static FAIL_AFTER_CREATION: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// The step after a buffer's creation, failing once when a test asked for it.
fn injected_failure(call: &'static str) -> Result<()> {
    #[cfg(feature = "testing")]
    if FAIL_AFTER_CREATION.replace(false) {
        return Err(Error::InvalidArgument(format!(
            "{call}: failure injected by pinframe::runtime::litert::fail_after_next_buffer_creation"
        )));
    }
    let _ = call;
    Ok(())
}

enum Input {
    Unbound,
    /// Bound to a pinframe tensor: the pin keeps its memory alive as long as LiteRT may
    /// read it.
    Pinned {
        buffer: Buffer,
        pin: HostPin<'static>,
        binding: Binding,
    },
    /// The runtime's own buffer, written by the caller.
    Owned {
        buffer: Buffer,
        host: *mut u8,
        len: usize,
    },
}

impl Input {
    fn buffer(&self) -> Option<&Buffer> {
        match self {
            Input::Unbound => None,
            Input::Pinned { buffer, .. } | Input::Owned { buffer, .. } => Some(buffer),
        }
    }
}

struct Output {
    buffer: Buffer,
    /// pinframe's 64-byte-aligned heap memory LiteRT writes the output into.
    pin: HostPin<'static>,
    len: usize,
}

/// A model compiled for the chosen accelerators, with its inputs bound to pinframe tensors
/// and its outputs in pinframe-owned memory. Bind once, run every frame.
pub struct CompiledModel {
    model: Model,
    raw: ffi::CompiledModel,
    /// The inputs and outputs as compiled: the model's, until
    /// [`resize_input`](CompiledModel::resize_input) gives them other shapes.
    input_infos: Vec<TensorInfo>,
    output_infos: Vec<TensorInfo>,
    /// Set when LiteRT took a resize but the outputs could not follow (the runs are
    /// refused with this reason until a resize succeeds).
    resize_incomplete: Option<String>,
    inputs: Vec<Input>,
    outputs: Vec<Output>,
    /// The buffer handles in signature order, as `LiteRtRunCompiledModel` takes them.
    input_handles: Vec<ffi::TensorBuffer>,
    output_handles: Vec<ffi::TensorBuffer>,
    stats: RuntimeStats,
    /// Buffers destroyed so far (by their `Drop`), read into `stats()`.
    destroyed: Arc<AtomicU64>,
    dmabuf_refusal: Option<String>,
}

// SAFETY: every LiteRT call on the compiled model and its buffers goes through `&mut self`
// (run, bind) or reads immutable state (`&self`: host addresses, output bytes between
// runs); LiteRT ties none of them to the creating thread. Not `Sync`.
unsafe impl Send for CompiledModel {}

impl fmt::Debug for CompiledModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CompiledModel")
            .field("model", &self.model.inner.path)
            .field("stats", &self.stats)
            .finish()
    }
}

static DMABUF_FALLBACK_LOGGED: Once = Once::new();

impl CompiledModel {
    /// Compiles `model` for `accelerators` (LiteRT picks, per op, among them; the CPU is
    /// the one every machine has) and allocates its outputs. Inputs start unbound.
    pub fn new(model: &Model, accelerators: &[Accelerator]) -> Result<CompiledModel> {
        if accelerators.is_empty() {
            return Err(Error::InvalidArgument(
                "no accelerator given; compile for at least Accelerator::Cpu".into(),
            ));
        }
        let env = &model.inner.env;
        let api = env.api();
        let set = accelerators.iter().fold(0, |s, a| {
            s | match a {
                Accelerator::Cpu => ffi::HW_ACCELERATOR_CPU,
                Accelerator::Gpu => ffi::HW_ACCELERATOR_GPU,
                Accelerator::Npu => ffi::HW_ACCELERATOR_NPU,
            }
        });
        let mut options: ffi::Options = std::ptr::null_mut();
        // SAFETY: valid out-pointer.
        let status = unsafe { (api.LiteRtCreateOptions)(&mut options) };
        check(api, status, "LiteRtCreateOptions", String::new)?;
        let mut raw: ffi::CompiledModel = std::ptr::null_mut();
        let result = (|| {
            // SAFETY: `options` is live until destroyed below.
            let status = unsafe { (api.LiteRtSetOptionsHardwareAccelerators)(options, set) };
            check(
                api,
                status,
                "LiteRtSetOptionsHardwareAccelerators",
                String::new,
            )?;
            let _env = env.inner.lock.lock().unwrap_or_else(|e| e.into_inner());
            // SAFETY: live environment, model and options; valid out-pointer. The options
            // stay owned by the caller (this function), as the header says.
            let status = unsafe {
                (api.LiteRtCreateCompiledModel)(env.inner.raw, model.inner.raw, options, &mut raw)
            };
            check(api, status, "LiteRtCreateCompiledModel", || {
                format!(
                    "compiling {} for {accelerators:?}",
                    model.inner.path.display()
                )
            })
        })();
        // SAFETY: created above, not used after this.
        unsafe { (api.LiteRtDestroyOptions)(options) };
        result?;
        if raw.is_null() {
            return Err(null_handle(api, "LiteRtCreateCompiledModel"));
        }
        let n_in = model.inputs().len();
        let mut compiled = CompiledModel {
            model: model.clone(),
            raw,
            input_infos: model.inputs().to_vec(),
            output_infos: model.outputs().to_vec(),
            resize_incomplete: None,
            inputs: (0..n_in).map(|_| Input::Unbound).collect(),
            outputs: Vec::with_capacity(model.outputs().len()),
            input_handles: vec![std::ptr::null_mut(); n_in],
            output_handles: Vec::with_capacity(model.outputs().len()),
            stats: RuntimeStats::default(),
            destroyed: Arc::new(AtomicU64::new(0)),
            dmabuf_refusal: None,
        };
        for i in 0..model.outputs().len() {
            let output = compiled.allocate_output(i)?;
            compiled.output_handles.push(output.buffer.raw);
            compiled.outputs.push(output);
        }
        Ok(compiled)
    }

    fn api(&self) -> &ffi::Api {
        self.model.inner.env.api()
    }

    /// The model this was compiled from.
    pub fn model(&self) -> &Model {
        &self.model
    }

    /// What this compiled model created and ran.
    pub fn stats(&self) -> RuntimeStats {
        RuntimeStats {
            buffers_destroyed: self.destroyed.load(Ordering::Relaxed),
            ..self.stats
        }
    }

    /// Takes ownership of a tensor buffer LiteRT just created (counted; destroyed when the
    /// returned value drops).
    fn adopt(&mut self, raw: ffi::TensorBuffer) -> Buffer {
        self.stats.buffers_created += 1;
        Buffer {
            raw,
            env: self.model.inner.env.inner.clone(),
            destroyed: self.destroyed.clone(),
        }
    }

    /// Why LiteRT refused a dma-buf binding, if it did (the status and what it means).
    pub fn dmabuf_refusal(&self) -> Option<&str> {
        self.dmabuf_refusal.as_deref()
    }

    fn input_info(&self, index: usize) -> Result<&TensorInfo> {
        self.input_infos.get(index).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "input {index} does not exist; {} has {} input(s)",
                self.model.inner.path.display(),
                self.input_infos.len()
            ))
        })
    }

    /// The inputs as compiled: the model's ([`Model::inputs`]), with the shapes
    /// [`resize_input`](Self::resize_input) gave them.
    pub fn inputs(&self) -> &[TensorInfo] {
        &self.input_infos
    }

    /// The outputs as compiled: the model's ([`Model::outputs`]), with the shapes LiteRT
    /// worked out after a [`resize_input`](Self::resize_input).
    pub fn outputs(&self) -> &[TensorInfo] {
        &self.output_infos
    }

    fn requirements_size(&self, index: usize, output: bool) -> Result<(usize, Vec<c_int>)> {
        let api = self.api();
        let mut req: ffi::BufferRequirements = std::ptr::null_mut();
        // SAFETY: live compiled model, signature 0, an index the model has; valid
        // out-pointer. The requirements stay owned by the compiled model.
        let status = unsafe {
            if output {
                (api.LiteRtGetCompiledModelOutputBufferRequirements)(self.raw, 0, index, &mut req)
            } else {
                (api.LiteRtGetCompiledModelInputBufferRequirements)(self.raw, 0, index, &mut req)
            }
        };
        check(
            api,
            status,
            "LiteRtGetCompiledModelInput/OutputBufferRequirements",
            || format!("{} {index}", if output { "output" } else { "input" }),
        )?;
        let mut size = 0usize;
        // SAFETY: live requirements; valid out-pointer.
        let status = unsafe { (api.LiteRtGetTensorBufferRequirementsBufferSize)(req, &mut size) };
        check(
            api,
            status,
            "LiteRtGetTensorBufferRequirementsBufferSize",
            String::new,
        )?;
        let mut n: c_int = 0;
        // SAFETY: as above.
        let status =
            unsafe { (api.LiteRtGetNumTensorBufferRequirementsSupportedBufferTypes)(req, &mut n) };
        check(
            api,
            status,
            "LiteRtGetNumTensorBufferRequirementsSupportedBufferTypes",
            String::new,
        )?;
        let mut types = Vec::with_capacity(n.max(0) as usize);
        for t in 0..n {
            let mut ty: c_int = 0;
            // SAFETY: t < n; valid out-pointer.
            let status = unsafe {
                (api.LiteRtGetTensorBufferRequirementsSupportedTensorBufferType)(req, t, &mut ty)
            };
            check(
                api,
                status,
                "LiteRtGetTensorBufferRequirementsSupportedTensorBufferType",
                String::new,
            )?;
            types.push(ty);
        }
        Ok((size, types))
    }

    fn allocate_output(&mut self, index: usize) -> Result<Output> {
        let info = &self.output_infos[index];
        let ty = info.raw_type;
        let dense = info.byte_len().ok_or_else(|| {
            Error::Unsupported(format!(
                "output {index} {info}: the shape is dynamic or the element size unknown"
            ))
        })?;
        let (required, _) = self.requirements_size(index, true)?;
        let len = dense.max(required);
        // Heap tensors are 64-byte aligned, as LiteRT requires of host memory.
        let storage = Tensor::<u8>::new(&[len], Some(Memory::Heap))?;
        let pin = storage.pin_host()?;
        let raw = self.create_host_buffer(&ty, &pin, len)?;
        Ok(Output {
            buffer: raw,
            pin,
            len: dense,
        })
    }

    fn create_host_buffer(
        &mut self,
        ty: &ffi::RankedTensorType,
        pin: &HostPin<'static>,
        len: usize,
    ) -> Result<Buffer> {
        let api = self.api();
        let mut raw: ffi::TensorBuffer = std::ptr::null_mut();
        // SAFETY: `pin` keeps `len` bytes at its address alive for as long as the buffer
        // exists (the caller stores the pin next to the buffer and destroys the buffer
        // first); no deallocator, so LiteRT never frees pinframe's memory.
        let status = unsafe {
            (api.LiteRtCreateTensorBufferFromHostMemory)(
                ty,
                pin.as_mut_ptr().cast(),
                len,
                None,
                &mut raw,
            )
        };
        check(
            api,
            status,
            "LiteRtCreateTensorBufferFromHostMemory",
            || {
                format!(
                    "{len} bytes at {:p} (alignment {})",
                    pin.as_ptr(),
                    pin.alignment()
                )
            },
        )?;
        if raw.is_null() {
            return Err(null_handle(api, "LiteRtCreateTensorBufferFromHostMemory"));
        }
        let buffer = self.adopt(raw);
        injected_failure("LiteRtCreateTensorBufferFromHostMemory")?;
        Ok(buffer)
    }

    /// Checks that `tensor` (its first `count` slices, for a batch) is what input `index`
    /// reads: its element type, its shape (leading 1s aside; an image tensor's dimensions
    /// in its own order, `[H, W, C]` or `[C, H, W]`), dense rows, the byte length and
    /// LiteRT's 64-byte alignment. The error says what the model expects.
    fn check_binding<T: Element>(
        &self,
        index: usize,
        tensor: &Tensor<T>,
        pin: &HostPin<'static>,
        count: usize,
    ) -> Result<usize> {
        let info = self.input_info(index)?;
        let expected = || format!("input {index} {info}");
        match info.element_type.dtype() {
            Some(d) if d == T::DTYPE => {}
            _ => {
                return Err(Error::InvalidArgument(format!(
                    "{} takes {} elements; this tensor holds {}: use a Tensor<{}>",
                    expected(),
                    info.element_type,
                    T::DTYPE,
                    info.element_type
                )));
            }
        }
        let want = info.byte_len().ok_or_else(|| {
            Error::Unsupported(format!(
                "{}: the shape is dynamic; resize it before binding",
                expected()
            ))
        })?;
        let strip = |s: &[usize]| -> Vec<usize> {
            let first = s.iter().position(|&d| d != 1).unwrap_or(s.len());
            s[first..].to_vec()
        };
        let model_shape: Vec<usize> = info.shape.iter().map(|&d| d as usize).collect();
        // An image tensor's shape is its layout's (a DMA buffer given a layout afterwards
        // with `set_layout` keeps its flat allocation shape); a batch's is its own,
        // `[N, ...]` of its slices' (a batched model input takes the whole batch).
        let batch = tensor.layout().is_some() && tensor.batch_len() > 1;
        let shape = match tensor.layout() {
            Some(_) if batch => {
                let mut s = tensor.shape().to_vec();
                s[0] = count;
                s
            }
            Some(l) => l.shape(),
            None => tensor.shape().to_vec(),
        };
        if strip(&shape) != strip(&model_shape) {
            return Err(Error::InvalidArgument(format!(
                "{} has shape {:?}; this tensor's is {:?}{}",
                expected(),
                info.shape,
                shape,
                match info.image_input() {
                    Ok(i) => format!(
                        ": make it with Tensor::with_layout(ModelInput::image_layout()) ({} {}x{} {})",
                        i.layout,
                        i.width,
                        i.height,
                        i.pixel_format()
                    ),
                    Err(_) => String::new(),
                }
            )));
        }
        if let Some(layout) = tensor.layout() {
            check_dense(layout).map_err(|why| {
                Error::InvalidArgument(format!("{} reads a dense tensor; {why}", expected()))
            })?;
        }
        // The bytes bound: the first `count` slices of a batch, else the whole pin.
        let have = if batch {
            count * tensor.slice_bytes()
        } else {
            pin.len()
        };
        if have != want || have > pin.len() {
            return Err(Error::InvalidArgument(format!(
                "{} reads {want} bytes; this tensor's pin has {}{}",
                expected(),
                pin.len(),
                if batch && count < tensor.batch_len() {
                    format!(" ({have} in its first {count} slices)")
                } else {
                    String::new()
                }
            )));
        }
        if pin.alignment() < HOST_MEMORY_ALIGNMENT {
            return Err(Error::InvalidArgument(format!(
                "{}: LiteRT needs {HOST_MEMORY_ALIGNMENT}-byte aligned host memory; this \
                 tensor's data is at {:p} ({}-byte aligned): allocate the tensor itself, not \
                 a tile at an offset",
                expected(),
                pin.as_ptr(),
                pin.alignment()
            )));
        }
        let (required, _) = self.requirements_size(index, false)?;
        if required > have {
            return Err(Error::InvalidArgument(format!(
                "{}: the compiled model wants a {required}-byte buffer; this tensor has {have}",
                expected(),
            )));
        }
        Ok(want)
    }

    /// Gives input `index` the shape `shape` (same rank, every dimension at least 1): a
    /// batch dimension of N for a model exported for one image, so that one run reads a
    /// whole [`Tensor::image_batch`] bound with [`bind_input`](Self::bind_input).
    ///
    /// LiteRT resizes the input (`LiteRtCompiledModelResizeInputTensorNonStrict`: the
    /// model's own shape need not be dynamic) and works out the shapes of every tensor
    /// after it; the outputs are reallocated at their new sizes
    /// (`LiteRtGetCompiledModelOutputTensorLayouts`), and [`inputs`](Self::inputs) and
    /// [`outputs`](Self::outputs) report the new shapes. Whether the result is one
    /// independent answer per batch item is the model's business: a graph of per-image
    /// ops (convolutions, pooling) gives one, a graph that reshapes to a fixed batch of 1
    /// fails here (LiteRT cannot allocate it) or mixes the items. Check it once against
    /// single runs.
    ///
    /// Resizing is a set-up step, not a per-frame one: it drops the input's binding (its
    /// LiteRT buffer describes the old shape, which LiteRT would refuse), so bind the
    /// tensor after resizing. Resizing to the current shape does nothing (after a failed
    /// resize, it retries the outputs). Errors: an input that does not exist, a rank or
    /// dimension the model cannot take (LiteRT's status and message say which), and the
    /// outputs' reallocation failing, after which runs are refused until a resize
    /// succeeds.
    pub fn resize_input(&mut self, index: usize, shape: &[usize]) -> Result<()> {
        let info = self.input_info(index)?;
        if shape.len() != info.shape.len() {
            return Err(Error::InvalidArgument(format!(
                "input {index} {info} has rank {}; shape {shape:?} has rank {}: a resize keeps \
                 the rank",
                info.shape.len(),
                shape.len()
            )));
        }
        let dims: Vec<c_int> = shape
            .iter()
            .map(|&d| c_int::try_from(d).ok().filter(|&d| d > 0))
            .collect::<Option<_>>()
            .ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "input {index} {info}: shape {shape:?} needs every dimension in 1..={}",
                    c_int::MAX
                ))
            })?;
        if self.resize_incomplete.is_none()
            && info.shape.iter().zip(shape).all(|(&a, &b)| a == b as i64)
        {
            return Ok(());
        }
        let api = self.api();
        // SAFETY: a live compiled model, signature 0, an input it has (checked above);
        // `dims` holds `dims.len()` ints, read during the call only.
        let status = unsafe {
            (api.LiteRtCompiledModelResizeInputTensorNonStrict)(
                self.raw,
                0,
                index,
                dims.as_ptr(),
                dims.len(),
            )
        };
        check(
            api,
            status,
            "LiteRtCompiledModelResizeInputTensorNonStrict",
            || format!("input {index} {info} to {shape:?}"),
        )?;
        // LiteRT's buffer for the input describes the old shape: the binding goes (its
        // pin with it, after the buffer).
        self.input_handles[index] = std::ptr::null_mut();
        let old = std::mem::replace(&mut self.inputs[index], Input::Unbound);
        self.release(old);
        let mut info = self.input_infos[index].clone();
        for (d, &n) in info.raw_type.layout.dimensions.iter_mut().zip(&dims) {
            *d = n;
        }
        info.shape = shape.iter().map(|&d| d as i64).collect();
        self.input_infos[index] = info;
        match self.reallocate_outputs() {
            Ok(()) => {
                self.resize_incomplete = None;
                Ok(())
            }
            Err(e) => {
                self.resize_incomplete = Some(e.to_string());
                Err(e)
            }
        }
    }

    /// After a resize: reads the outputs' new shapes from LiteRT (which allocates the
    /// resized graph) and gives every output a buffer of its new size.
    fn reallocate_outputs(&mut self) -> Result<()> {
        let api = self.api();
        let n = self.output_infos.len();
        let mut layouts = vec![ffi::Layout::default(); n];
        // SAFETY: a live compiled model, signature 0; `layouts` has room for the `n`
        // outputs the signature has, which LiteRT fills.
        let status = unsafe {
            (api.LiteRtGetCompiledModelOutputTensorLayouts)(
                self.raw,
                0,
                n,
                layouts.as_mut_ptr(),
                true,
            )
        };
        check(
            api,
            status,
            "LiteRtGetCompiledModelOutputTensorLayouts",
            || "allocating the resized model (does its graph take this shape?)".into(),
        )?;
        let mut infos = self.output_infos.clone();
        for (i, (info, layout)) in infos.iter_mut().zip(&layouts).enumerate() {
            let rank = layout.rank();
            if rank != info.shape.len() || layout.has_strides() {
                return Err(Error::Unsupported(format!(
                    "output {i} {info}: after the resize LiteRT reports rank {rank}{}; pinframe \
                     binds dense outputs of their model's rank",
                    if layout.has_strides() {
                        " with strides"
                    } else {
                        ""
                    }
                )));
            }
            info.raw_type.layout.dimensions = layout.dimensions;
            info.shape = layout.dimensions[..rank]
                .iter()
                .map(|&d| i64::from(d))
                .collect();
        }
        self.output_infos = infos;
        // New buffers for all before any old one goes: a failure leaves the old set.
        let mut outputs = Vec::with_capacity(n);
        for i in 0..n {
            outputs.push(self.allocate_output(i)?);
        }
        self.output_handles = outputs.iter().map(|o| o.buffer.raw).collect();
        // The old buffers are destroyed (by their drop) before their storage.
        self.outputs = outputs;
        Ok(())
    }

    /// Binds `tensor` as input `index`, without a copy and for good: from now on every
    /// [`run`](Self::run) reads the tensor's memory as it is at that moment (a conversion
    /// into the tensor between runs is what the next run sees). Heap and memfd tensors are
    /// bound at their pin's address; DMA tensors as their dma-buf where LiteRT accepts it,
    /// else as host memory over the pin (counted in [`RuntimeStats::dmabuf_fallbacks`]
    /// and logged once, with LiteRT's reason in [`dmabuf_refusal`](Self::dmabuf_refusal)).
    ///
    /// The tensor may be used through `&mut` afterwards (it is a conversion destination)
    /// and even dropped: the binding keeps a pin of its memory. A run and the tensor's
    /// writers exclude each other through the buffer's access lock
    /// ([`HostPin::lock_read`](crate::HostPin::lock_read)): a conversion or `map_mut` on
    /// another thread waits for the run to end, and a run waits for them. Rebinding an input
    /// replaces its buffer. A mismatch (element type, shape, non-dense rows, byte length,
    /// alignment) is an [`Error::InvalidArgument`] that says what the model expects.
    pub fn bind_input<T: Element>(&mut self, index: usize, tensor: &Tensor<T>) -> Result<Binding> {
        self.bind(index, tensor, tensor.batch_len())
    }

    /// [`bind_input`](Self::bind_input) of the first `count` slices of a batch tensor
    /// ([`Tensor::image_batch`]) to an input of shape `[count, ...]`: one batch tensor,
    /// filled by one [`convert_batch`](crate::ImageProcessor::convert_batch), serves
    /// models resized ([`resize_input`](Self::resize_input)) to each batch size a frame
    /// may need, each bound once, so a run reads only the slices this frame filled. The
    /// binding starts at the tensor's address (slice 0, LiteRT's alignment holds) and
    /// keeps a pin of the whole tensor. `count` is 1 to the batch's length.
    pub fn bind_input_slices<T: Element>(
        &mut self,
        index: usize,
        tensor: &Tensor<T>,
        count: usize,
    ) -> Result<Binding> {
        if count == 0 || count > tensor.batch_len() {
            return Err(Error::InvalidArgument(format!(
                "bind_input_slices({index}, .., {count}): the tensor holds {} slice(s); bind 1 \
                 to {}",
                tensor.batch_len(),
                tensor.batch_len()
            )));
        }
        self.bind(index, tensor, count)
    }

    fn bind<T: Element>(
        &mut self,
        index: usize,
        tensor: &Tensor<T>,
        count: usize,
    ) -> Result<Binding> {
        let pin = tensor.pin_host()?;
        let len = self.check_binding(index, tensor, &pin, count)?;
        let ty = self.input_infos[index].raw_type;
        let (buffer, binding) = if pin.memory() == Memory::Dma {
            match self.try_dmabuf(index, &ty, &pin, len)? {
                Some(buffer) => {
                    self.stats.dmabuf_bindings += 1;
                    (buffer, Binding::DmaBuf)
                }
                None => {
                    let buffer = self.create_host_buffer(&ty, &pin, len)?;
                    self.stats.dmabuf_fallbacks += 1;
                    self.stats.host_bindings += 1;
                    (buffer, Binding::HostMemoryOverDmaBuf)
                }
            }
        } else {
            let buffer = self.create_host_buffer(&ty, &pin, len)?;
            self.stats.host_bindings += 1;
            (buffer, Binding::HostMemory)
        };
        self.input_handles[index] = buffer.raw;
        let old = std::mem::replace(
            &mut self.inputs[index],
            Input::Pinned {
                buffer,
                pin,
                binding,
            },
        );
        self.release(old);
        Ok(binding)
    }

    /// Offers a DMA tensor to LiteRT as its dma-buf. `Ok(None)` when LiteRT refuses it
    /// (the reason is kept and logged once).
    fn try_dmabuf(
        &mut self,
        index: usize,
        ty: &ffi::RankedTensorType,
        pin: &HostPin<'static>,
        len: usize,
    ) -> Result<Option<Buffer>> {
        use std::os::fd::AsRawFd;
        let Some(fd) = pin.fd() else {
            return Ok(None);
        };
        let api = self.api();
        let mut raw: ffi::TensorBuffer = std::ptr::null_mut();
        // SAFETY: the pin keeps the dma-buf (fd and mapping) alive for as long as the
        // buffer exists; offset 0 is where the pin starts; no deallocator.
        let status = unsafe {
            (api.LiteRtCreateTensorBufferFromDmaBufBuffer)(
                ty,
                pin.as_mut_ptr().cast::<c_void>(),
                fd.as_raw_fd(),
                len,
                0,
                None,
                &mut raw,
            )
        };
        if status == ffi::STATUS_OK && !raw.is_null() {
            // Owned from here: every return below destroys it unless it is handed out.
            let buffer = self.adopt(raw);
            // The CPU path takes dma-bufs only where the runtime says it reads them; check
            // the compiled model lists the type, else bind over the pin.
            injected_failure("LiteRtCreateTensorBufferFromDmaBufBuffer")?;
            let (_, types) = self.requirements_size(index, false)?;
            if types.contains(&ffi::BUFFER_TYPE_DMA_BUF) {
                return Ok(Some(buffer));
            }
            drop(buffer);
            self.dmabuf_refusal = Some(format!(
                "LiteRtCreateTensorBufferFromDmaBufBuffer succeeded, but the compiled model's \
                 input takes only buffer types {types:?} (4 = dma-buf)"
            ));
        } else {
            let why = if status == ffi::STATUS_UNSUPPORTED {
                "this libLiteRt.so was built without dma-buf support (LITERT_HAS_DMABUF_SUPPORT is \
                 0 on every Linux but Android)"
            } else {
                "LiteRT refused the dma-buf"
            };
            self.dmabuf_refusal = Some(format!(
                "LiteRtCreateTensorBufferFromDmaBufBuffer returned status {status} ({}): {why}",
                api.status_name(status)
            ));
        }
        let reason = self.dmabuf_refusal.clone().unwrap_or_default();
        DMABUF_FALLBACK_LOGGED.call_once(|| {
            log::warn!(
                "LiteRT: a DMA tensor is bound as host memory over its CPU mapping (no copy; \
                 DMA_BUF_IOCTL_SYNC around each run): {reason}"
            );
        });
        Ok(None)
    }

    /// Gives input `index` a buffer of the runtime's own (`LiteRtCreateManagedTensorBufferFromRequirements`),
    /// which the caller fills through [`input_mut`](Self::input_mut) before each run: the
    /// usual copy-in, for comparison with a bound pin.
    pub fn allocate_input(&mut self, index: usize) -> Result<()> {
        let info = self.input_info(index)?;
        let ty = info.raw_type;
        let dense = info.byte_len().ok_or_else(|| {
            Error::Unsupported(format!("input {index} {info}: the shape is dynamic"))
        })?;
        let api = self.api();
        let mut req: ffi::BufferRequirements = std::ptr::null_mut();
        // SAFETY: live compiled model, signature 0, an existing input; valid out-pointer.
        let status = unsafe {
            (api.LiteRtGetCompiledModelInputBufferRequirements)(self.raw, 0, index, &mut req)
        };
        check(
            api,
            status,
            "LiteRtGetCompiledModelInputBufferRequirements",
            String::new,
        )?;
        let mut raw: ffi::TensorBuffer = std::ptr::null_mut();
        // SAFETY: live environment and requirements; the tensor type is the model's own.
        let status = unsafe {
            (api.LiteRtCreateManagedTensorBufferFromRequirements)(
                self.model.inner.env.inner.raw,
                &ty,
                req,
                &mut raw,
            )
        };
        check(
            api,
            status,
            "LiteRtCreateManagedTensorBufferFromRequirements",
            String::new,
        )?;
        if raw.is_null() {
            return Err(null_handle(
                api,
                "LiteRtCreateManagedTensorBufferFromRequirements",
            ));
        }
        let buffer = self.adopt(raw);
        injected_failure("LiteRtCreateManagedTensorBufferFromRequirements")?;
        let host = self.host_address_of(&buffer)?;
        let mut size = 0usize;
        // SAFETY: a live buffer; valid out-pointer.
        let status = unsafe { (self.api().LiteRtGetTensorBufferSize)(raw, &mut size) };
        check(self.api(), status, "LiteRtGetTensorBufferSize", String::new)?;
        if size < dense {
            drop(buffer);
            return Err(Error::Runtime {
                runtime: RUNTIME,
                call: "LiteRtCreateManagedTensorBufferFromRequirements",
                status: ffi::STATUS_OK,
                status_name: self.api().status_name(ffi::STATUS_OK),
                message: format!("made a {size}-byte buffer for a {dense}-byte input"),
            });
        }
        self.input_handles[index] = raw;
        let old = std::mem::replace(
            &mut self.inputs[index],
            Input::Owned {
                buffer,
                host: host.cast_mut(),
                len: dense,
            },
        );
        self.release(old);
        Ok(())
    }

    /// The runtime-owned buffer of input `index` ([`allocate_input`](Self::allocate_input)),
    /// to copy a frame into.
    pub fn input_mut<T: Element>(&mut self, index: usize) -> Result<&mut [T]> {
        let dtype = self.input_info(index)?.element_type.dtype();
        match &self.inputs[index] {
            Input::Owned { host, len, .. } => {
                if dtype != Some(T::DTYPE) {
                    return Err(Error::InvalidArgument(format!(
                        "input {index} holds {:?} elements, not {}",
                        dtype,
                        T::DTYPE
                    )));
                }
                if !(*host as usize).is_multiple_of(std::mem::align_of::<T>()) {
                    return Err(Error::InvalidArgument(format!(
                        "input {index}'s buffer at {host:p} is not aligned for {}",
                        T::DTYPE
                    )));
                }
                // SAFETY: LiteRT's managed host buffer holds at least `len` bytes (checked
                // at allocation) at `host`, aligned for T (checked), alive while the input
                // keeps it; `&mut self` excludes runs and every other access.
                Ok(unsafe {
                    std::slice::from_raw_parts_mut(host.cast::<T>(), len / std::mem::size_of::<T>())
                })
            }
            _ => Err(Error::InvalidArgument(format!(
                "input {index} is not a runtime-owned buffer; call allocate_input({index}) first \
                 (a bound tensor is written by converting into it)"
            ))),
        }
    }

    fn host_address_of(&self, buffer: &Buffer) -> Result<*const u8> {
        let api = self.api();
        let mut ty: c_int = 0;
        // SAFETY: a live buffer; valid out-pointer.
        let status = unsafe { (api.LiteRtGetTensorBufferType)(buffer.raw, &mut ty) };
        check(api, status, "LiteRtGetTensorBufferType", String::new)?;
        if ty != ffi::BUFFER_TYPE_HOST_MEMORY {
            return Err(Error::Unsupported(format!(
                "the buffer is of LiteRT type {ty}, not host memory (1): LiteRT reports no host \
                 address for it"
            )));
        }
        let mut addr: *mut c_void = std::ptr::null_mut();
        // SAFETY: a live host-memory buffer; valid out-pointer.
        let status = unsafe { (api.LiteRtGetTensorBufferHostMemory)(buffer.raw, &mut addr) };
        check(api, status, "LiteRtGetTensorBufferHostMemory", String::new)?;
        Ok(addr.cast_const().cast())
    }

    /// Where LiteRT's buffer for input `index` is, as LiteRT reports it
    /// (`LiteRtGetTensorBufferHostMemory`): for a bound tensor, its pin's address.
    pub fn input_host_address(&self, index: usize) -> Result<*const u8> {
        self.input_info(index)?;
        let buffer = self.inputs[index]
            .buffer()
            .ok_or_else(|| Error::InvalidArgument(format!("input {index} is not bound")))?;
        self.host_address_of(buffer)
    }

    /// How input `index` is bound (`None` while unbound or out of range).
    pub fn input_binding(&self, index: usize) -> Option<Binding> {
        match self.inputs.get(index)? {
            Input::Unbound => None,
            Input::Pinned { binding, .. } => Some(*binding),
            Input::Owned { .. } => Some(Binding::RuntimeOwned),
        }
    }

    /// Where LiteRT's buffer for output `index` is (pinframe's memory).
    pub fn output_host_address(&self, index: usize) -> Result<*const u8> {
        let out = self.output_slot(index)?;
        self.host_address_of(&out.buffer)
    }

    fn output_slot(&self, index: usize) -> Result<&Output> {
        self.outputs.get(index).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "output {index} does not exist; {} has {} output(s)",
                self.model.inner.path.display(),
                self.outputs.len()
            ))
        })
    }

    /// Runs the model on the bound inputs (synchronously). A DMA input is bracketed with
    /// `DMA_BUF_IOCTL_SYNC` START and END (read). Creates nothing and allocates nothing.
    pub fn run(&mut self) -> Result<()> {
        if let Some(i) = self.inputs.iter().position(|i| matches!(i, Input::Unbound)) {
            return Err(Error::InvalidArgument(format!(
                "input {i} {} is not bound: bind_input({i}, &tensor) (or allocate_input({i})) \
                 before running",
                self.input_infos[i]
            )));
        }
        if let Some(why) = &self.resize_incomplete {
            return Err(Error::InvalidArgument(format!(
                "{}: the last resize_input did not complete ({why}); resize again before \
                 running",
                self.model.inner.path.display()
            )));
        }
        // Every bound tensor is held against its writers (a conversion into it, a map_mut
        // guard) for the length of the run: a conversion started now waits for it.
        let mut held = ReadHolds {
            inputs: &self.inputs,
            taken: 0,
        };
        for input in &self.inputs {
            if let Input::Pinned { pin, .. } = input {
                pin.enter_read()?;
            }
            held.taken += 1;
        }
        for input in &self.inputs {
            if let Input::Pinned { pin, .. } = input {
                pin.sync_for_cpu(Access::Read)?;
            }
        }
        let api = self.model.inner.env.api();
        // SAFETY: a live compiled model; the handle arrays hold one live buffer per input
        // and output, in signature order, whose memory the inputs' pins and the outputs'
        // storage keep alive; LiteRT only reads the arrays during the call.
        let status = unsafe {
            (api.LiteRtRunCompiledModel)(
                self.raw,
                0,
                self.input_handles.len(),
                self.input_handles.as_mut_ptr(),
                self.output_handles.len(),
                self.output_handles.as_mut_ptr(),
            )
        };
        let mut ended = Ok(());
        for input in &self.inputs {
            if let Input::Pinned { pin, .. } = input {
                let r = pin.sync_for_device(Access::Read);
                if ended.is_ok() {
                    ended = r;
                }
            }
        }
        drop(held);
        check(api, status, "LiteRtRunCompiledModel", || {
            format!("running {}", self.model.inner.path.display())
        })?;
        ended?;
        self.stats.runs += 1;
        Ok(())
    }

    /// Output `index` as a slice of its elements, in pinframe memory LiteRT wrote in place
    /// (no copy). Valid until the next run, which needs `&mut self`.
    pub fn output<T: Element>(&self, index: usize) -> Result<&[T]> {
        let out = self.output_slot(index)?;
        let info = &self.output_infos[index];
        if info.element_type.dtype() != Some(T::DTYPE) {
            return Err(Error::InvalidArgument(format!(
                "output {index} {info} holds {} elements, not {}",
                info.element_type,
                T::DTYPE
            )));
        }
        // SAFETY: the output's heap storage (64-byte aligned, so aligned for every T) holds
        // `len` bytes, kept alive by the pin; LiteRT writes it only inside `run`, which
        // takes `&mut self`, so nothing writes it while the slice borrows `self`.
        Ok(unsafe {
            std::slice::from_raw_parts(
                out.pin.as_ptr().cast::<T>(),
                out.len / std::mem::size_of::<T>(),
            )
        })
    }

    fn release(&mut self, old: Input) {
        match old {
            Input::Unbound => {}
            Input::Pinned { buffer, pin, .. } => {
                drop(buffer);
                // The memory may go only once LiteRT's buffer over it is gone.
                drop(pin);
            }
            Input::Owned { buffer, .. } => drop(buffer),
        }
    }
}

/// The read holds `run` took on its first `taken` inputs (in order), released on drop:
/// kept in a counter, not a vector of guards, so a run allocates nothing.
struct ReadHolds<'a> {
    inputs: &'a [Input],
    taken: usize,
}

impl Drop for ReadHolds<'_> {
    fn drop(&mut self) {
        for input in &self.inputs[..self.taken] {
            if let Input::Pinned { pin, .. } = input {
                pin.unlock_read();
            }
        }
    }
}

/// Whether an image layout is one dense tensor (no row or plane padding, planes in order).
fn check_dense(layout: &ImageLayout) -> std::result::Result<(), String> {
    let tight = ImageLayout::tight(
        layout.width(),
        layout.height(),
        layout.format(),
        layout.dtype(),
    )
    .map_err(|e| e.to_string())?;
    if layout.planes() != tight.planes() {
        let what = if layout.format().family() == FormatFamily::PlanarRgb {
            "planes"
        } else {
            "rows"
        };
        return Err(format!(
            "this tensor's {what} are padded or offset ({layout:?}, dense would be {tight:?}); \
             make it with Tensor::with_layout(ModelInput::image_layout())"
        ));
    }
    Ok(())
}

impl Drop for CompiledModel {
    fn drop(&mut self) {
        let api = self.model.inner.env.api();
        // SAFETY: `raw` came from LiteRtCreateCompiledModel and is destroyed once, before
        // the buffers it may still reference.
        unsafe { (api.LiteRtDestroyCompiledModel)(self.raw) };
        // The handles go first; then each input and output drops its buffer (destroyed
        // by `Buffer`'s drop) before the pin or storage LiteRT read through it.
        self.input_handles.clear();
        self.output_handles.clear();
        self.inputs.clear();
        self.outputs.clear();
    }
}
