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
//! A batch (`rois=true` or `batch-size` > 1) carries one such meta per converted slice,
//! in slice order, each with these fields too:
//!
//! | field | type | meaning |
//! | --- | --- | --- |
//! | `batch-index` | uint | the slice this meta describes |
//! | `batch-size` | uint | slices of the tensor (its outermost dimension) |
//! | `batch-valid` | uint | slices holding a conversion (the first ones; the rest are zeros) |
//! | `roi-id`, `roi-type` | int, string | (`rois=true`) the `GstVideoRegionOfInterestMeta` converted into this slice |
//! | `roi-x`, `roi-y`, `roi-width`, `roi-height` | uint | (`rois=true`) the crop converted: the ROI's rectangle clamped into the frame |
//! | `source-pts` | uint64 | (`batch-size`) the timestamp of the frame converted into this slice (absent when it had none) |
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

/// Where a slice of a batch came from.
#[derive(Clone, Debug)]
pub(crate) struct SliceMeta {
    /// The slice.
    pub(crate) index: usize,
    /// Slices of the tensor.
    pub(crate) size: usize,
    /// Slices holding a conversion.
    pub(crate) valid: usize,
    /// The region of interest converted into it (`rois=true`).
    pub(crate) roi: Option<RoiMeta>,
    /// The timestamp of the frame converted into it (`batch-size`).
    pub(crate) source_pts: Option<gst::ClockTime>,
}

/// A region of interest as it was converted.
#[derive(Clone, Debug)]
pub(crate) struct RoiMeta {
    /// The `GstVideoRegionOfInterestMeta`'s id.
    pub(crate) id: i32,
    /// Its type.
    pub(crate) roi_type: String,
    /// Its rectangle clamped into the frame: the crop converted.
    pub(crate) crop: pinframe::Crop,
}

/// Attaches `info` (of a conversion from a `src_w` x `src_h` frame) to `buffer`; for a
/// slice of a batch, `slice` says which.
pub(crate) fn add(
    buffer: &mut gst::BufferRef,
    info: &ConvertInfo,
    src_w: u32,
    src_h: u32,
    slice: Option<&SliceMeta>,
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
    if let Some(slice) = slice {
        let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
        s.set("batch-index", count(slice.index));
        s.set("batch-size", count(slice.size));
        s.set("batch-valid", count(slice.valid));
        if let Some(roi) = &slice.roi {
            s.set("roi-id", roi.id);
            s.set("roi-type", roi.roi_type.as_str());
            s.set("roi-x", roi.crop.x);
            s.set("roi-y", roi.crop.y);
            s.set("roi-width", roi.crop.width);
            s.set("roi-height", roi.crop.height);
        }
        if let Some(pts) = slice.source_pts {
            s.set("source-pts", pts.nseconds());
        }
    }
    Ok(())
}

use gst::glib;
