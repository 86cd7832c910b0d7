//! The part of LiteRT's C API that pinframe binds, declared from the headers of the release
//! the `ai-edge-litert` 2.3.0 wheel was built from (`litert/c/litert_common.h`,
//! `litert_environment.h`, `litert_model.h`, `litert_model_types.h`, `litert_layout.h`,
//! `litert_options.h`, `litert_compiled_model.h`, `litert_tensor_buffer.h`,
//! `litert_tensor_buffer_types.h`, `litert_tensor_buffer_requirements.h`), and loaded at
//! run time: every function is looked up when the library is opened, so a missing one is
//! an error naming it and the library instead of a crash on first use.
//!
//! Not the classic `TfLite*` C API: in this release `LiteRtCreateModelFromFile` takes the
//! environment first, and host-memory tensor buffers must be 64-byte aligned
//! (`LITERT_HOST_MEMORY_BUFFER_ALIGNMENT`).

use std::ffi::{c_char, c_int, c_void};
use std::path::{Path, PathBuf};

use crate::{Error, Result};

/// `LiteRtStatus` (an enum in C, `int` sized).
pub(super) type Status = c_int;
/// `kLiteRtStatusOk`.
pub(super) const STATUS_OK: Status = 0;
/// `kLiteRtStatusErrorUnsupported`.
pub(super) const STATUS_UNSUPPORTED: Status = 5;
/// `LiteRtParamIndex` (`size_t`).
pub(super) type ParamIndex = usize;

/// Opaque handles (`struct LiteRt*T*`).
pub(super) type Environment = *mut c_void;
pub(super) type Model = *mut c_void;
pub(super) type Signature = *mut c_void;
pub(super) type TensorHandle = *mut c_void;
pub(super) type Options = *mut c_void;
pub(super) type CompiledModel = *mut c_void;
pub(super) type TensorBuffer = *mut c_void;
pub(super) type BufferRequirements = *mut c_void;

/// `LiteRtHwAccelerators`: `kLiteRtHwAcceleratorCpu` and friends (a bit set).
pub(super) const HW_ACCELERATOR_CPU: c_int = 1;
pub(super) const HW_ACCELERATOR_GPU: c_int = 1 << 1;
pub(super) const HW_ACCELERATOR_NPU: c_int = 1 << 2;

/// `LiteRtTensorTypeId`: `kLiteRtRankedTensorType`.
pub(super) const RANKED_TENSOR_TYPE: c_int = 0;

/// `LiteRtQuantizationTypeId`.
pub(super) const QUANTIZATION_NONE: c_int = 0;
pub(super) const QUANTIZATION_PER_TENSOR: c_int = 1;
pub(super) const QUANTIZATION_PER_CHANNEL: c_int = 2;

/// `LiteRtTensorBufferType`.
pub(super) const BUFFER_TYPE_HOST_MEMORY: c_int = 1;
pub(super) const BUFFER_TYPE_DMA_BUF: c_int = 4;

/// `LITERT_HOST_MEMORY_BUFFER_ALIGNMENT`: host memory handed to LiteRT must be aligned
/// to this many bytes (an ABI constant of every LiteRT release).
pub const HOST_MEMORY_ALIGNMENT: usize = 64;

/// `LITERT_TENSOR_MAX_RANK`.
pub(super) const MAX_RANK: usize = 8;

/// `LiteRtLayout`: `unsigned rank : 7; unsigned has_strides : 1;` share the first 32-bit
/// unit (GCC/Clang on x86-64 and aarch64 allocate bit-fields from the low bit), then the
/// dimensions and strides. 68 bytes, as the header's `static_assert` says.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Layout {
    pub(super) bits: u32,
    pub(super) dimensions: [i32; MAX_RANK],
    pub(super) strides: [u32; MAX_RANK],
}

impl Layout {
    pub(super) fn rank(&self) -> usize {
        (self.bits & 0x7F) as usize
    }

    pub(super) fn has_strides(&self) -> bool {
        self.bits & 0x80 != 0
    }
}

/// `LiteRtRankedTensorType` (72 bytes: the element type, then the layout at offset 4).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct RankedTensorType {
    pub(super) element_type: c_int,
    pub(super) layout: Layout,
}

/// `LiteRtQuantizationPerTensor` (16 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct QuantizationPerTensor {
    pub(super) scale: f32,
    pub(super) zero_point: i64,
}

/// `LiteRtQuantizationPerChannel` (32 bytes); the arrays belong to the model.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(super) struct QuantizationPerChannel {
    pub(super) quantized_dimension: i32,
    pub(super) num_channels: u64,
    pub(super) scales: *mut f32,
    pub(super) zero_points: *mut i64,
}

impl Default for QuantizationPerChannel {
    fn default() -> Self {
        QuantizationPerChannel {
            quantized_dimension: 0,
            num_channels: 0,
            scales: std::ptr::null_mut(),
            zero_points: std::ptr::null_mut(),
        }
    }
}

// The headers' own size assertions (x86-64 / aarch64 Linux), checked at compile time.
const _: () = assert!(std::mem::size_of::<Layout>() == 68);
const _: () = assert!(std::mem::size_of::<RankedTensorType>() == 72);
const _: () = assert!(std::mem::size_of::<QuantizationPerTensor>() == 16);
const _: () = assert!(std::mem::size_of::<QuantizationPerChannel>() == 32);

/// `LiteRtAny` holding an integer (`kLiteRtAnyTypeInt` = 2): the type tag, then the
/// 8-byte union at offset 8 (16 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(super) struct AnyInt {
    pub(super) ty: c_int,
    pub(super) int_value: i64,
}

/// `kLiteRtAnyTypeInt`.
pub(super) const ANY_TYPE_INT: c_int = 2;

/// `LiteRtEnvOption` (24 bytes: the tag, then the value at offset 8).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(super) struct EnvOption {
    pub(super) tag: c_int,
    pub(super) value: AnyInt,
}

/// `kLiteRtEnvOptionTagMinLoggerSeverity`, with `LiteRtLogSeverity` values.
pub(super) const ENV_OPTION_MIN_LOGGER_SEVERITY: c_int = 25;
/// `kLiteRtLogSeverityInfo`, `...Warning`, `...Error`, `...Silent`.
pub(super) const LOG_SEVERITY_INFO: i64 = 1;
pub(super) const LOG_SEVERITY_WARNING: i64 = 2;
pub(super) const LOG_SEVERITY_ERROR: i64 = 3;
pub(super) const LOG_SEVERITY_SILENT: i64 = 4;

const _: () = assert!(std::mem::size_of::<AnyInt>() == 16);
const _: () = assert!(std::mem::size_of::<EnvOption>() == 24);

/// `void (*)(void*)`: host memory and dma-buf deallocators (pinframe passes none).
pub(super) type Deallocator = Option<unsafe extern "C" fn(*mut c_void)>;

/// Declares the function table: each entry is looked up by its C name when the library is
/// opened.
macro_rules! api {
    ($($name:ident: fn($($arg:ty),* $(,)?) $(-> $ret:ty)?;)*) => {
        /// The LiteRT functions pinframe calls, resolved from one loaded `libLiteRt.so`.
        #[allow(non_snake_case)]
        pub(super) struct Api {
            /// Where the library was loaded from.
            pub(super) path: PathBuf,
            $(pub(super) $name: unsafe extern "C" fn($($arg),*) $(-> $ret)?,)*
            // Declared last: dropped after every function pointer above is gone.
            _library: libloading::Library,
        }

        impl Api {
            /// Resolves every function from `library` (loaded from `path`).
            #[allow(non_snake_case)]
            fn resolve(library: libloading::Library, path: PathBuf) -> Result<Api> {
                $(
                    // SAFETY: the declared signature is the one in the LiteRT headers of
                    // the release this binding targets (see the module documentation); the
                    // pointer is only used while `_library` keeps the library loaded.
                    let $name = unsafe {
                        *library
                            .get::<unsafe extern "C" fn($($arg),*) $(-> $ret)?>(
                                concat!(stringify!($name), "\0").as_bytes(),
                            )
                            .map_err(|e| missing(stringify!($name), &path, e))?
                    };
                )*
                Ok(Api { path, $($name,)* _library: library })
            }
        }
    };
}

api! {
    LiteRtCreateEnvironment: fn(c_int, *const EnvOption, *mut Environment) -> Status;
    LiteRtDestroyEnvironment: fn(Environment);
    LiteRtCreateModelFromFile: fn(Environment, *const c_char, *mut Model) -> Status;
    LiteRtDestroyModel: fn(Model);
    LiteRtGetNumModelSignatures: fn(Model, *mut ParamIndex) -> Status;
    LiteRtGetModelSignature: fn(Model, ParamIndex, *mut Signature) -> Status;
    LiteRtGetSignatureKey: fn(Signature, *mut *const c_char) -> Status;
    LiteRtGetNumSignatureInputs: fn(Signature, *mut ParamIndex) -> Status;
    LiteRtGetNumSignatureOutputs: fn(Signature, *mut ParamIndex) -> Status;
    LiteRtGetSignatureInputName: fn(Signature, ParamIndex, *mut *const c_char) -> Status;
    LiteRtGetSignatureOutputName: fn(Signature, ParamIndex, *mut *const c_char) -> Status;
    LiteRtGetSignatureInputTensorByIndex: fn(Signature, ParamIndex, *mut TensorHandle) -> Status;
    LiteRtGetSignatureOutputTensorByIndex: fn(Signature, ParamIndex, *mut TensorHandle) -> Status;
    LiteRtGetTensorTypeId: fn(TensorHandle, *mut c_int) -> Status;
    LiteRtGetRankedTensorType: fn(TensorHandle, *mut RankedTensorType) -> Status;
    LiteRtGetQuantizationTypeId: fn(TensorHandle, *mut c_int) -> Status;
    LiteRtGetPerTensorQuantization: fn(TensorHandle, *mut QuantizationPerTensor) -> Status;
    LiteRtGetPerChannelQuantization: fn(TensorHandle, *mut QuantizationPerChannel) -> Status;
    LiteRtCreateOptions: fn(*mut Options) -> Status;
    LiteRtDestroyOptions: fn(Options);
    LiteRtSetOptionsHardwareAccelerators: fn(Options, c_int) -> Status;
    LiteRtCreateCompiledModel: fn(Environment, Model, Options, *mut CompiledModel) -> Status;
    LiteRtDestroyCompiledModel: fn(CompiledModel);
    LiteRtGetCompiledModelInputBufferRequirements:
        fn(CompiledModel, ParamIndex, ParamIndex, *mut BufferRequirements) -> Status;
    LiteRtGetCompiledModelOutputBufferRequirements:
        fn(CompiledModel, ParamIndex, ParamIndex, *mut BufferRequirements) -> Status;
    LiteRtGetTensorBufferRequirementsBufferSize: fn(BufferRequirements, *mut usize) -> Status;
    LiteRtGetNumTensorBufferRequirementsSupportedBufferTypes:
        fn(BufferRequirements, *mut c_int) -> Status;
    LiteRtGetTensorBufferRequirementsSupportedTensorBufferType:
        fn(BufferRequirements, c_int, *mut c_int) -> Status;
    LiteRtCreateTensorBufferFromHostMemory:
        fn(*const RankedTensorType, *mut c_void, usize, Deallocator, *mut TensorBuffer) -> Status;
    LiteRtCreateTensorBufferFromDmaBufBuffer: fn(
        *const RankedTensorType,
        *mut c_void,
        c_int,
        usize,
        usize,
        Deallocator,
        *mut TensorBuffer,
    ) -> Status;
    LiteRtCreateManagedTensorBufferFromRequirements:
        fn(Environment, *const RankedTensorType, BufferRequirements, *mut TensorBuffer) -> Status;
    LiteRtGetTensorBufferType: fn(TensorBuffer, *mut c_int) -> Status;
    LiteRtGetTensorBufferHostMemory: fn(TensorBuffer, *mut *mut c_void) -> Status;
    LiteRtGetTensorBufferSize: fn(TensorBuffer, *mut usize) -> Status;
    LiteRtDestroyTensorBuffer: fn(TensorBuffer);
    LiteRtCompiledModelResizeInputTensorNonStrict:
        fn(CompiledModel, ParamIndex, ParamIndex, *const c_int, usize) -> Status;
    LiteRtGetCompiledModelOutputTensorLayouts:
        fn(CompiledModel, ParamIndex, usize, *mut Layout, bool) -> Status;
    LiteRtRunCompiledModel: fn(
        CompiledModel,
        ParamIndex,
        usize,
        *mut TensorBuffer,
        usize,
        *mut TensorBuffer,
    ) -> Status;
}

fn missing(symbol: &str, path: &Path, e: libloading::Error) -> Error {
    Error::RuntimeUnavailable {
        runtime: "LiteRT",
        tried: vec![format!(
            "{} has no function {symbol} ({e}); pinframe binds the LiteRT C API of \
             ai-edge-litert {}: use that release's libLiteRt.so",
            path.display(),
            super::LITERT_RELEASE
        )],
    }
}

/// The environment variable naming the library (a file, or a directory holding
/// `libLiteRt.so`).
pub const LIBRARY_ENV: &str = "PINFRAME_LITERT_LIB";
/// The library's file name.
pub const LIBRARY_NAME: &str = "libLiteRt.so";

impl Api {
    /// Opens one library file and resolves every function.
    pub(super) fn open(path: &Path) -> Result<Api> {
        // RTLD_NODELETE: the library stays mapped after its handle closes. Unloading a C++
        // library with static destructors and thread-local state (LiteRT's) crashes the
        // process at exit (seen: SIGSEGV at exit after a failed symbol lookup closed it).
        let flags =
            libloading::os::unix::RTLD_NOW | libloading::os::unix::RTLD_LOCAL | libc::RTLD_NODELETE;
        // SAFETY: loading a shared library runs its initialisers; libLiteRt.so's are
        // those of a C++ library with no preconditions on the loading process.
        let library = unsafe { libloading::os::unix::Library::open(Some(path), flags) }
            .map(libloading::Library::from)
            .map_err(|e| Error::RuntimeUnavailable {
                runtime: "LiteRT",
                tried: vec![format!("{}: {e}", path.display())],
            })?;
        Api::resolve(library, path.to_path_buf())
    }

    /// Finds and opens the library: `$PINFRAME_LITERT_LIB`, else `libLiteRt.so` on the
    /// dynamic linker's search path, else the one an installed `ai-edge-litert` Python
    /// wheel ships. The error lists every place tried.
    pub(super) fn find(wheel: &WheelLookup) -> Result<Api> {
        let mut tried = Vec::new();
        if let Some(v) = std::env::var_os(LIBRARY_ENV) {
            let p = PathBuf::from(v);
            let p = if p.is_dir() { p.join(LIBRARY_NAME) } else { p };
            // An explicit choice that fails is an error, not a reason to look elsewhere.
            return Api::open(&p).map_err(|e| with_context(e, &format!("{LIBRARY_ENV}=")));
        }
        tried.push(format!("{LIBRARY_ENV} is not set"));
        match Api::open(Path::new(LIBRARY_NAME)) {
            Ok(api) => return Ok(api),
            Err(e) => tried.extend(reasons(e, "the system library path: ")),
        }
        let found = match wheel {
            WheelLookup::PathPython => wheel_library(),
            WheelLookup::Dir(Some(dir)) => {
                let p = dir.join(LIBRARY_NAME);
                if p.is_file() {
                    Ok(p)
                } else {
                    Err(format!("{} does not exist", p.display()))
                }
            }
            WheelLookup::Dir(None) => {
                Err("the calling interpreter has no ai_edge_litert package".into())
            }
        };
        match found {
            Ok(p) => match Api::open(&p) {
                Ok(api) => return Ok(api),
                Err(e) => tried.extend(reasons(e, "the ai-edge-litert wheel: ")),
            },
            Err(why) => tried.push(format!("the ai-edge-litert wheel: {why}")),
        }
        tried.push(format!(
            "install it with `pip install ai-edge-litert=={}` or point {LIBRARY_ENV} at a \
             libLiteRt.so (scripts/assets extracts one into target/assets/litert)",
            super::LITERT_RELEASE
        ));
        Err(Error::RuntimeUnavailable {
            runtime: "LiteRT",
            tried,
        })
    }

    /// The runtime's name for a status (`LiteRtStatus` in `litert_common.h`; the library
    /// exports no function for it).
    pub(super) fn status_name(&self, status: Status) -> String {
        let name = match status {
            0 => "kLiteRtStatusOk",
            1 => "kLiteRtStatusErrorInvalidArgument",
            2 => "kLiteRtStatusErrorMemoryAllocationFailure",
            3 => "kLiteRtStatusErrorRuntimeFailure",
            4 => "kLiteRtStatusErrorMissingInputTensor",
            5 => "kLiteRtStatusErrorUnsupported",
            6 => "kLiteRtStatusErrorNotFound",
            7 => "kLiteRtStatusErrorTimeoutExpired",
            8 => "kLiteRtStatusErrorWrongVersion",
            9 => "kLiteRtStatusErrorUnknown",
            10 => "kLiteRtStatusErrorAlreadyExists",
            100 => "kLiteRtStatusCancelled",
            500 => "kLiteRtStatusErrorFileIO",
            501 => "kLiteRtStatusErrorInvalidFlatbuffer",
            502 => "kLiteRtStatusErrorDynamicLoading",
            503 => "kLiteRtStatusErrorSerialization",
            504 => "kLiteRtStatusErrorCompilation",
            1000 => "kLiteRtStatusErrorIndexOOB",
            1001 => "kLiteRtStatusErrorInvalidIrType",
            1002 => "kLiteRtStatusErrorInvalidGraphInvariant",
            1003 => "kLiteRtStatusErrorGraphModification",
            4000 => "kLiteRtStatusErrorUnsupportedRuntimeVersion",
            4001 => "kLiteRtStatusErrorUnsupportedCompilerVersion",
            4002 => "kLiteRtStatusErrorIncompatibleByteCodeVersion",
            _ => "an unknown status",
        };
        name.to_string()
    }
}

fn reasons(e: Error, prefix: &str) -> Vec<String> {
    match e {
        Error::RuntimeUnavailable { tried, .. } => {
            tried.into_iter().map(|t| format!("{prefix}{t}")).collect()
        }
        other => vec![format!("{prefix}{other}")],
    }
}

fn with_context(e: Error, prefix: &str) -> Error {
    Error::RuntimeUnavailable {
        runtime: "LiteRT",
        tried: reasons(e, prefix),
    }
}

/// Where the default search looks for the `ai-edge-litert` wheel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum WheelLookup {
    /// Ask the Python on `PATH` (`python3`, or `$PYTHON`).
    PathPython,
    /// The package directory the caller's own interpreter found (None: it has none).
    Dir(Option<PathBuf>),
}

/// Where an installed `ai-edge-litert` wheel keeps its `libLiteRt.so`, asked of the Python
/// on `PATH` (`python3`, or `$PYTHON`) without importing the package.
fn wheel_library() -> std::result::Result<PathBuf, String> {
    let python = std::env::var_os("PYTHON").unwrap_or_else(|| "python3".into());
    let out = std::process::Command::new(&python)
        .args([
            "-c",
            "import importlib.util as u; s = u.find_spec('ai_edge_litert'); \
             print(s.submodule_search_locations[0] if s and s.submodule_search_locations else '')",
        ])
        .stderr(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", Path::new(&python).display()))?;
    let dir = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if !out.status.success() || dir.is_empty() {
        return Err(format!(
            "{} finds no ai_edge_litert package",
            Path::new(&python).display()
        ));
    }
    let p = Path::new(&dir).join(LIBRARY_NAME);
    if p.is_file() {
        Ok(p)
    } else {
        Err(format!("{} does not exist", p.display()))
    }
}
