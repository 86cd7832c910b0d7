//! Conversion requests and their plan: what [`ImageProcessor`](crate::ImageProcessor)
//! executes on every backend. A leaf: it knows images and options, no backend.

mod batch;
mod input;
mod options;
pub mod plan;
pub mod regions;

pub use batch::{BatchItem, BatchSource};
pub use input::{ModelInput, TensorLayout};
pub use options::{
    ColorimetryChoice, ConvertInfo, ConvertOptions, Crop, Fit, Flip, Gamma, Interpolation, Isp,
    Normalize, Quantize, Rotation,
};
pub use plan::{Plan, SourceChannels, Taps};
