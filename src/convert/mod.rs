//! Conversion requests and their plan: what [`ImageProcessor`](crate::ImageProcessor)
//! executes on every backend.

mod input;
mod options;
pub mod plan;
mod processor;

pub use input::{ModelInput, TensorLayout};
pub use options::{
    ColorimetryChoice, ConvertInfo, ConvertOptions, Crop, Fit, Flip, Interpolation, Normalize,
    Quantize, Rotation,
};
pub use plan::{Plan, SourceChannels, Taps};
pub use processor::{Backend, ImageProcessor, ProcessorStats};
