#![doc = include_str!("../README.md")]
#![warn(missing_docs)]

#[cfg(feature = "camera")]
pub mod camera;
pub mod convert;
mod cpu;
mod dtype;
mod error;
pub mod image;
pub mod jpeg;
// Used by the GL backend and the processor's GL fallback.
#[cfg_attr(not(feature = "gl"), allow(dead_code))]
mod log_once;
mod processor;
pub mod runtime;
pub mod tensor;

pub use convert::{
    BatchItem, BatchSource, ColorimetryChoice, ConvertInfo, ConvertOptions, Crop, Fit, Flip, Gamma,
    Interpolation, Isp, Normalize, Quantize, Rotation,
};
pub use dtype::{DType, Element};
pub use error::{Error, ErrorKind, Result};
pub use image::{
    CfaPattern, CfaSite, Colorimetry, ImageLayout, Matrix, PixelFormat, Plane, Range, SampleStorage,
};
pub use processor::{Backend, ImageProcessor, ProcessorStats};
pub use tensor::{
    Access, HostPin, MapGuard, MapGuardMut, Memory, MemoryRequest, PinReadGuard, Tensor,
    cpu_mapping_shared, with_cpu_mappings_excluded,
};

#[cfg(feature = "gl")]
mod gl;
#[cfg(feature = "gl")]
pub use gl::{EglPlatform, GlConfig, GlInfo, GlStats, PLATFORM_ENV as EGL_PLATFORM_ENV};
#[cfg(feature = "testing")]
pub mod testing;

/// The Rust examples of the `docs/` book, compiled and run as doc tests like the README's
/// (the book is the crate's documentation too).
#[cfg(doctest)]
mod docs_examples {
    #[doc = include_str!("../docs/camera.md")]
    struct Camera;
    #[doc = include_str!("../docs/tensors-and-pins.md")]
    struct TensorsAndPins;
    #[doc = include_str!("../docs/formats.md")]
    struct Formats;
    #[doc = include_str!("../docs/gl.md")]
    struct Gl;
    #[doc = include_str!("../docs/batches.md")]
    struct Batches;
    #[doc = include_str!("../docs/litert.md")]
    struct Litert;
    #[doc = include_str!("../docs/test-lanes.md")]
    struct TestLanes;
}
