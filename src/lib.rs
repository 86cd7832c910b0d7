#![doc = include_str!("../README.md")]
#![warn(missing_docs)]

pub mod convert;
mod dtype;
mod error;
pub mod image;

pub use convert::{
    ColorimetryChoice, ConvertInfo, ConvertOptions, Crop, Fit, Flip, Interpolation, Normalize,
    Rotation,
};
pub use dtype::{DType, Element};
pub use error::{Error, Result};
pub use image::{Colorimetry, ImageLayout, Matrix, PixelFormat, Plane, Range};
