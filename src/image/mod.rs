//! Image descriptions: pixel formats, layouts and colorimetry.

mod colorimetry;
mod format;
mod layout;

pub use colorimetry::{Colorimetry, Matrix, Range};
pub use format::{
    CfaPattern, CfaSite, FormatFamily, PixelFormat, SampleStorage, fourcc, fourcc_to_string,
};
pub use layout::{
    DRM_FORMAT_MOD_INVALID, DRM_FORMAT_MOD_LINEAR, ImageLayout, MAX_DIMENSION, MAX_PLANES, Plane,
    compressed_capacity,
};
