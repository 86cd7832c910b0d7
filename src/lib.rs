#![doc = include_str!("../README.md")]
#![warn(missing_docs)]

mod dtype;
mod error;
pub mod image;
pub mod tensor;

pub use dtype::{DType, Element};
pub use error::{Error, Result};
pub use image::{Colorimetry, ImageLayout, Matrix, PixelFormat, Plane, Range};
pub use tensor::{
    Access, HostPin, MapGuard, MapGuardMut, Memory, Tensor, cpu_mapping_shared,
    with_cpu_mappings_excluded,
};

#[cfg(feature = "gl")]
mod gl;
#[cfg(feature = "gl")]
pub use gl::{EglPlatform, GlInfo, GlStats};
