//! `PinframeConvertMeta`: the geometry of each conversion, on each output buffer.
//!
//! A `GstCustomMeta` (GStreamer 1.20+) named [`META_NAME`] whose structure holds what the
//! library's `ConvertInfo` reports, so detections can be mapped back to source pixels:
//!
//! | field | type | meaning |
//! | --- | --- | --- |
//! | `scale-x`, `scale-y` | double | output pixels per (cropped, flipped, rotated) source pixel |
//! | `offset-x`, `offset-y` | int64 | where that source's top-left corner landed in the output (letterbox padding > 0, fill overflow < 0) |
//! | `content-x`, `content-y`, `content-width`, `content-height` | uint | the output rectangle covered by source content; the rest is padding |
//! | `dst-to-src` | array of 6 doubles | `[a, b, c, d, e, f]`: source `x = a*X + b*Y + c`, `y = d*X + e*Y + f` for an output point `(X, Y)` |
//! | `source-width`, `source-height` | uint | the input frame's size |
//!
//! Why a custom meta and not `GstVideoRegionOfInterestMeta`: an ROI meta means "an object in
//! this frame" to the elements that read it (encoders weight their quantiser by ROIs,
//! overlays draw them), while this is a coordinate transform of the whole frame; and a
//! custom meta is read by name with plain GStreamer API (`gst_buffer_get_custom_meta`,
//! Python's `Gst.Buffer.get_custom_meta`), no pinframe library needed. Its tags (`video`,
//! `size`, `orientation`) make elements that rescale or rotate the frame drop it, and a
//! copy of the buffer keeps it.

use pinframe::ConvertInfo;

/// The registered name of the meta (and of its structure).
pub const META_NAME: &str = "PinframeConvertMeta";

/// Registers the meta (once per process; called by the plugin's init).
pub(crate) fn register() {
    if !gst::meta::CustomMeta::is_registered(META_NAME) {
        gst::meta::CustomMeta::register(META_NAME, &["video", "size", "orientation"]);
    }
}

/// Attaches `info` (of a conversion from a `src_w` x `src_h` frame) to `buffer`.
pub(crate) fn add(
    buffer: &mut gst::BufferRef,
    info: &ConvertInfo,
    src_w: u32,
    src_h: u32,
) -> Result<(), glib::BoolError> {
    let mut meta = gst::meta::CustomMeta::add(buffer, META_NAME)?;
    let s = meta.mut_structure();
    s.set("scale-x", info.scale[0]);
    s.set("scale-y", info.scale[1]);
    s.set("offset-x", info.offset[0]);
    s.set("offset-y", info.offset[1]);
    s.set("content-x", info.content[0]);
    s.set("content-y", info.content[1]);
    s.set("content-width", info.content[2]);
    s.set("content-height", info.content[3]);
    let m = info.dst_to_src;
    s.set(
        "dst-to-src",
        gst::Array::new([m[0][0], m[0][1], m[0][2], m[1][0], m[1][1], m[1][2]]),
    );
    s.set("source-width", src_w);
    s.set("source-height", src_h);
    Ok(())
}

use gst::glib;
