//! The GStreamer plugin `pinframe`: the `pinframeconvert` element.
//!
//! `pinframeconvert` turns raw video frames (system memory or dma-bufs, any strides and
//! plane offsets a `GstVideoMeta` gives) into inference-ready u8 video or NNStreamer static
//! tensors (`other/tensors,format=static`) with pinframe's `ImageProcessor`: crop, flip,
//! rotate, stretch/letterbox/fill, resample, YUV→RGB, normalise, in one pass on the CPU or
//! on GL. Dma-buf inputs are imported (once per buffer), outputs come from a fixed pool of
//! pinframe tensors (dma-bufs where the platform allocates them), and each output buffer
//! carries the conversion's geometry as a `PinframeConvertMeta` (see [`META_NAME`]).
//!
//! Two batch modes write NNStreamer batch tensors (`C:W:H:N`, `W:H:3:N`): `rois=true`
//! converts the buffer's `GstVideoRegionOfInterestMeta` rectangles into the slices of one
//! tensor, `batch-size=N` converts `N` consecutive buffers into one (pushed when full, on
//! EOS or new caps, or after `batch-timeout`); each slice carries its own meta.
//!
//! Load it with `GST_PLUGIN_PATH=<target dir>/release` (it is `libgstpinframe.so`); see the
//! README's "GStreamer" section for the caps, the properties and example pipelines.

#![warn(missing_docs)]

use std::sync::LazyLock;

use gst::glib;

mod buffers;
mod caps;
mod convert;
mod meta;
mod pool;
mod qdata;
mod settings;

pub use meta::META_NAME;
/// Registers the plugin with GStreamer from a program that links this crate (instead of
/// loading `libgstpinframe.so` through `GST_PLUGIN_PATH`).
pub use plugin::plugin_register_static;

/// The plugin's debug category (`GST_DEBUG=pinframeconvert:5`).
pub(crate) static CAT: LazyLock<gst::DebugCategory> = LazyLock::new(|| {
    gst::DebugCategory::new(
        "pinframeconvert",
        gst::DebugColorFlags::empty(),
        Some("pinframe converter"),
    )
});

fn plugin_init(plugin: &gst::Plugin) -> Result<(), glib::BoolError> {
    // The process-wide CPU-mapping guard (libpinframe.so.0) must be there before anything
    // maps: refuse to load, with the loader's reason, rather than fail every buffer later.
    if let Err(e) = pinframe::tensor::cpu_mapping_guard() {
        return Err(glib::bool_error!(
            "pinframe cannot load its CPU-mapping guard: {e} (install libpinframe: \
             bindings/c/install.sh; the plugin looks in its own folder, the folder above it and \
             the loader's path)"
        ));
    }
    meta::register();
    convert::register(plugin)
}

// The plugin's entry points (`gst_plugin_pinframe_get_desc`, `plugin_register_static`).
#[allow(missing_docs)]
mod plugin {
    use super::plugin_init;
    gst::plugin_define!(
        pinframe,
        env!("CARGO_PKG_DESCRIPTION"),
        plugin_init,
        env!("CARGO_PKG_VERSION"),
        "MIT/X11",
        "pinframe",
        "pinframe",
        "https://crates.io/crates/pinframe"
    );
}
