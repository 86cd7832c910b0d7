//! Inference runtimes bound to pinframe tensors without copies.
//!
//! - `litert` (feature `litert`): Google's LiteRT (formerly TensorFlow Lite), loaded at
//!   run time from `libLiteRt.so`. A [`Tensor`](crate::Tensor) that a conversion fills
//!   every frame is bound once as a model input, at its pin's address (or as its dma-buf),
//!   and the model reads it in place on every run.

#[cfg(feature = "litert")]
pub mod litert;
