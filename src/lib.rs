#![doc = include_str!("../README.md")]
#![warn(missing_docs)]

mod dtype;
mod error;
pub mod image;

pub use dtype::{DType, Element};
pub use error::{Error, Result};
pub use image::{Colorimetry, ImageLayout, Matrix, PixelFormat, Plane, Range};

#[cfg(feature = "gl")]
mod gl;
#[cfg(feature = "gl")]
pub use gl::{EglPlatform, GlInfo, GlStats};
