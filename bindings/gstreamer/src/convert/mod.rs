//! The `pinframeconvert` element: a `BaseTransform` that converts raw video (system memory
//! or dma-bufs) into u8 video or NNStreamer static tensors with pinframe's
//! `ImageProcessor`, writing into a pool of pinframe tensors: one image per buffer, or a
//! batch of regions of interest (`rois=true`) or of consecutive buffers (`batch-size`).

use gst::glib;
use gst::prelude::*;

mod imp;

glib::wrapper! {
    /// The `pinframeconvert` element.
    pub struct PinframeConvert(ObjectSubclass<imp::PinframeConvert>)
        @extends gst_base::BaseTransform, gst::Element, gst::Object;
}

/// Registers `pinframeconvert` with `plugin`.
pub fn register(plugin: &gst::Plugin) -> Result<(), glib::BoolError> {
    gst::Element::register(
        Some(plugin),
        "pinframeconvert",
        gst::Rank::NONE,
        PinframeConvert::static_type(),
    )
}
