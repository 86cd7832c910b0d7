//! The element's implementation: properties, negotiation, allocation, and the
//! conversions: one per buffer, the regions of interest of a buffer into one batch
//! (`rois=true`), or consecutive buffers into one batch (`batch-size`).

use std::os::fd::BorrowedFd;
use std::sync::{Arc, Condvar, LazyLock, Mutex, MutexGuard};
use std::time::Instant;

use gst::glib;
use gst::prelude::*;
use gst::subclass::prelude::*;
use gst_base::prelude::*;
use gst_base::subclass::base_transform::GenerateOutputSuccess;
use gst_base::subclass::prelude::*;
use gst_video::VideoFrameExt;
use pinframe::convert::Plan;
use pinframe::{
    BatchItem, ConvertInfo, ConvertOptions, Crop, DType, Element, ErrorKind, ImageLayout,
    ImageProcessor, PixelFormat, Plane, Tensor,
};

use crate::CAT;
use crate::buffers::{self, AnyTensor, Placement, SourceImports, with_tensor};
use crate::caps::{self, InputSpec, OutputKind, OutputSpec};
use crate::meta::{self, RoiMeta, SliceMeta};
use crate::pool::{PoolSpec, TensorPool};
use crate::settings::{
    self, BackendChoice, BatchMode, DtypeChoice, FitChoice, FlipChoice, GammaChoice,
    InterpolationChoice, LayoutChoice, MatrixChoice, MemoryChoice, RangeChoice, RotationChoice,
    Settings,
};

/// Buffers a proposed upstream pool starts with (upstream sets its own count).
const PROPOSED_POOL_MIN: u32 = 2;

/// What negotiation settled.
struct Negotiated {
    input: InputSpec,
    output: OutputSpec,
    /// What each output buffer holds (the properties when the caps were set).
    mode: BatchMode,
}

/// Counters of what the element (not the library) did.
#[derive(Default, Clone, Copy)]
struct Counters {
    /// Source buffers imported as pinframe tensors (one per upstream dma-buf memory).
    source_imports: u64,
    /// Frames whose source was a dma-buf tensor (imported or from our proposed pool).
    dmabuf_sources: u64,
    /// Frames whose source was mapped system memory (wrapped without a copy).
    mapped_sources: u64,
    /// Frames written into one of our pool's tensors (else into a mapped buffer).
    pool_outputs: u64,
    /// Frames whose dma-buf source could not be imported (converted from the mapped
    /// bytes instead, or refused).
    source_import_failures: u64,
    /// Frames that failed (each posted an element error).
    failed_frames: u64,
    /// Damaged compressed frames (a cut-off or corrupt JPEG): dropped with a warning,
    /// the stream goes on.
    corrupt_frames: u64,
    /// Allocations made to probe a placement during negotiation (one page each).
    probe_allocations: u64,
    /// Bytes those probes allocated.
    probe_bytes: u64,
    /// Batch buffers pushed (`rois=true` or `batch-size` > 1).
    batches: u64,
    /// Batch buffers pushed with fewer converted slices than the batch holds (EOS, new
    /// caps or a new segment, the timeout; with `rois=true`, fewer ROIs than slices).
    partial_batches: u64,
    /// Partial batches pushed because `batch-timeout` passed.
    batch_timeouts: u64,
    /// Regions of interest converted into a slice.
    rois: u64,
    /// Regions of interest skipped: outside the frame, empty, or a crop the conversion
    /// cannot take (each logged).
    skipped_rois: u64,
    /// Regions of interest past the batch's last slice (the first `batch-size` of a
    /// buffer are converted, in the buffer's meta order).
    dropped_rois: u64,
    /// Buffers without a region of interest to convert (dropped, `rois=true`).
    frames_without_rois: u64,
}

/// A batch being filled with consecutive frames (`batch-size` mode): an output buffer of
/// the pool, each frame converted into its next slice as it arrives (upstream buffers
/// are never held).
struct PendingBatch {
    buffer: gst::Buffer,
    /// The source pad's caps when the batch was begun (what its tensor is laid out as).
    caps: Option<gst::Caps>,
    /// Slices of the batch.
    capacity: usize,
    /// What each converted slice holds, in slice order.
    slices: Vec<FilledSlice>,
    /// When the batch goes out unfilled (`batch-timeout` after its first frame).
    deadline: Option<Instant>,
}

/// One frame converted into a slice of a [`PendingBatch`].
struct FilledSlice {
    info: ConvertInfo,
    pts: Option<gst::ClockTime>,
    dts: Option<gst::ClockTime>,
    duration: Option<gst::ClockTime>,
    source_width: u32,
    source_height: u32,
}

impl PendingBatch {
    fn due(&self, now: Instant) -> bool {
        self.deadline.is_some_and(|d| d <= now)
    }
}

/// Why a batch went out.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum BatchEnd {
    /// Every slice converted.
    Full,
    /// `batch-timeout` passed.
    Timeout,
    /// A stream event (EOS, new caps, a new segment or stream) came before it filled.
    Event,
}

/// The pending batch and the timer that pushes it when `batch-timeout` passes. The
/// pending batch is taken only by a thread holding the sink pad's stream lock (the
/// streaming thread in `generate_output` and `sink_event`, the timer thread after taking
/// it), so a batch is pushed once, in stream order.
#[derive(Default)]
struct Batcher {
    state: Mutex<BatchState>,
    /// Wakes the timer: a new deadline, or shutdown.
    wake: Condvar,
}

#[derive(Default)]
struct BatchState {
    pending: Option<PendingBatch>,
    /// The timer thread must end (set by `stop`).
    shutdown: bool,
    /// A flow error downstream returned to a push of the timer: returned upstream with the
    /// next buffer.
    error: Option<gst::FlowError>,
}

#[derive(Default)]
pub struct PinframeConvert {
    settings: Mutex<Settings>,
    negotiated: Mutex<Option<Negotiated>>,
    processor: Mutex<Option<ImageProcessor>>,
    counters: Mutex<Counters>,
    /// The output pool (for its allocation count).
    pool: Mutex<Option<TensorPool>>,
    /// The last sink caps refused, so each refusal is reported once.
    refused: Mutex<Option<gst::Caps>>,
    /// A failed dma-buf import was logged as a warning (once per start; later ones are
    /// counted, and logged at debug level).
    import_failure_logged: std::sync::atomic::AtomicBool,
    /// Whether a dropped corrupt frame has been posted as an element warning (once per
    /// start: a camera with a bad cable would flood the bus; the stats count them all).
    corrupt_frame_posted: std::sync::atomic::AtomicBool,
    /// Bytes of every tensor allocated for the element's pools and probes (the stats'
    /// `allocated-bytes`).
    allocated_bytes: Arc<std::sync::atomic::AtomicU64>,
    /// The `batch-size` mode's pending batch and timer.
    batcher: Arc<Batcher>,
    /// The timer thread (`batch-size` mode, from `start` to `stop`).
    timer: Mutex<Option<std::thread::JoinHandle<()>>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[glib::object_subclass]
impl ObjectSubclass for PinframeConvert {
    const NAME: &'static str = "GstPinframeConvert";
    type Type = super::PinframeConvert;
    type ParentType = gst_base::BaseTransform;
}

impl ObjectImpl for PinframeConvert {
    fn properties() -> &'static [glib::ParamSpec] {
        static PROPERTIES: LazyLock<Vec<glib::ParamSpec>> = LazyLock::new(|| {
            let d = Settings::default();
            vec![
                glib::ParamSpecEnum::builder_with_default("backend", d.backend)
                    .nick("Backend")
                    .blurb("Where conversions run (auto: GL on a hardware GPU, else the CPU)")
                    .mutable_ready()
                    .build(),
                glib::ParamSpecEnum::builder_with_default("fit", d.fit)
                    .nick("Fit")
                    .blurb("How the source is fitted into the output size (from downstream caps)")
                    .mutable_playing()
                    .build(),
                glib::ParamSpecString::builder("pad")
                    .nick("Pad colour")
                    .blurb("Letterbox padding colour R,G,B (0-255)")
                    .default_value(Some("114,114,114"))
                    .mutable_playing()
                    .build(),
                glib::ParamSpecString::builder("crop")
                    .nick("Crop")
                    .blurb("Source rectangle X,Y,W,H to convert (empty: the whole frame)")
                    .default_value(Some(""))
                    .mutable_playing()
                    .build(),
                glib::ParamSpecEnum::builder_with_default("rotation", d.rotation)
                    .nick("Rotation")
                    .blurb("Clockwise rotation, after the crop and the flip")
                    .mutable_playing()
                    .build(),
                glib::ParamSpecEnum::builder_with_default("flip", d.flip)
                    .nick("Flip")
                    .blurb("Mirroring, after the crop and before the rotation")
                    .mutable_playing()
                    .build(),
                glib::ParamSpecEnum::builder_with_default("interpolation", d.interpolation)
                    .nick("Interpolation")
                    .blurb("Resampling filter")
                    .mutable_playing()
                    .build(),
                glib::ParamSpecEnum::builder_with_default("matrix", d.matrix)
                    .nick("YUV matrix")
                    .blurb("YUV to RGB matrix (auto: the caps' colorimetry, else BT.601 below 720 lines, BT.709 from 720)")
                    .mutable_playing()
                    .build(),
                glib::ParamSpecEnum::builder_with_default("range", d.range)
                    .nick("YUV range")
                    .blurb("YUV quantisation range (auto: the caps' colorimetry, else limited)")
                    .mutable_playing()
                    .build(),
                glib::ParamSpecString::builder("mean")
                    .nick("Mean")
                    .blurb("Per-channel mean R,G,B for float outputs: (v/255 - mean)/std")
                    .default_value(Some("0,0,0"))
                    .mutable_playing()
                    .build(),
                glib::ParamSpecString::builder("std")
                    .nick("Std")
                    .blurb("Per-channel std R,G,B for float outputs (finite, non-zero)")
                    .default_value(Some("1,1,1"))
                    .mutable_playing()
                    .build(),
                glib::ParamSpecString::builder("quantize")
                    .nick("Quantize")
                    .blurb("TFLite quantisation of u8/i8 outputs, SCALE,ZERO_POINT: q = clamp(round(x / scale) + zero_point) of the normalised x (empty: none)")
                    .default_value(Some(""))
                    .mutable_playing()
                    .build(),
                glib::ParamSpecString::builder("black-level")
                    .nick("Black level")
                    .blurb("RAW (Bayer) sources: the code a dark pixel reads, in the source's units (0..=1023 at 10 bits), one for every site or R,Gr,Gb,B; below the white level")
                    .default_value(Some("0"))
                    .mutable_playing()
                    .build(),
                glib::ParamSpecString::builder("wb-gains")
                    .nick("White-balance gains")
                    .blurb("RAW (Bayer) sources: white-balance gains R,G,B after the black level (finite, positive)")
                    .default_value(Some("1,1,1"))
                    .mutable_playing()
                    .build(),
                glib::ParamSpecString::builder("ccm")
                    .nick("Colour-correction matrix")
                    .blurb("RAW (Bayer) sources: camera RGB to output RGB, 9 values row by row (rows are output R, G, B)")
                    .default_value(Some("1,0,0,0,1,0,0,0,1"))
                    .mutable_playing()
                    .build(),
                glib::ParamSpecEnum::builder_with_default("gamma", d.gamma)
                    .nick("Gamma")
                    .blurb("RAW (Bayer) sources: the transfer function after the matrix")
                    .mutable_playing()
                    .build(),
                glib::ParamSpecEnum::builder_with_default("dtype", d.dtype)
                    .nick("Element type")
                    .blurb("Output element type (auto: from the caps; i8/f16/f32 need other/tensors)")
                    .mutable_ready()
                    .build(),
                glib::ParamSpecEnum::builder_with_default("layout", d.layout)
                    .nick("Layout")
                    .blurb("Output pixel layout, the library's destination formats (auto: from the caps)")
                    .mutable_ready()
                    .build(),
                glib::ParamSpecString::builder("dma-route")
                    .nick("DMA route")
                    .blurb("Where pool buffers live: auto (a dma-buf through the library's first working route, else a memfd), system (memfd), udmabuf, gbm, gbm:/dev/dri/cardN, heap:NAME")
                    .default_value(Some("auto"))
                    .mutable_ready()
                    .build(),
                glib::ParamSpecUInt::builder("pool-size")
                    .nick("Pool size")
                    .blurb("Output buffers (a fixed set; at least what downstream asks for)")
                    .minimum(2)
                    .maximum(64)
                    .default_value(settings::DEFAULT_POOL_SIZE)
                    .mutable_ready()
                    .build(),
                glib::ParamSpecBoolean::builder("rois")
                    .nick("Regions of interest")
                    .blurb("Convert the buffer's GstVideoRegionOfInterestMeta rectangles (clamped into the frame) instead of the frame: up to batch-size of them, in meta order, into one batch tensor (other/tensors, batch = batch-size); unused slices are zeros; a buffer without one is dropped")
                    .default_value(false)
                    .mutable_ready()
                    .build(),
                glib::ParamSpecString::builder("roi-type")
                    .nick("ROI type")
                    .blurb("With rois=true: only regions of interest of this type (empty: every type)")
                    .default_value(Some(""))
                    .mutable_ready()
                    .build(),
                glib::ParamSpecUInt::builder("batch-size")
                    .nick("Batch size")
                    .blurb("Images in each output tensor (NNStreamer's outermost dimension). With rois=true: ROIs of one buffer; else, above 1: consecutive buffers, each converted into the next slice as it arrives")
                    .minimum(1)
                    .maximum(settings::MAX_BATCH_SIZE)
                    .default_value(1)
                    .mutable_ready()
                    .build(),
                glib::ParamSpecInt64::builder("batch-timeout")
                    .nick("Batch timeout")
                    .blurb("batch-size mode: microseconds after a batch's first buffer when it is pushed unfilled (-1: wait until it is full, EOS or new caps), as nvstreammux's batched-push-timeout")
                    .minimum(-1)
                    .default_value(-1)
                    .mutable_playing()
                    .build(),
                glib::ParamSpecBoxed::builder::<gst::Structure>("stats")
                    .nick("Statistics")
                    .blurb("Counters: frames, imports, cache-hits, uploads, readbacks, cpu-fallbacks, import-failures, live-images, source-imports, dmabuf-sources, mapped-sources, pool-outputs, source-import-failures (dma-buf sources that could not be imported), failed-frames, corrupt-frames (damaged JPEG frames, dropped), probe-allocations and probe-bytes (one-page negotiation probes), output-buffers, allocated-bytes (every pool and probe tensor since the element was made), batches, partial-batches, batch-timeouts, rois, skipped-rois (outside the frame), dropped-rois (past the batch), frames-without-rois (dropped), backend; what a failed frame counted is kept")
                    .read_only()
                    .build(),
            ]
        });
        PROPERTIES.as_ref()
    }

    fn set_property(&self, _id: usize, value: &glib::Value, pspec: &glib::ParamSpec) {
        let mut s = lock(&self.settings);
        let text = || {
            value
                .get::<Option<String>>()
                .ok()
                .flatten()
                .unwrap_or_default()
        };
        let result: Result<(), String> = match pspec.name() {
            "backend" => value
                .get::<BackendChoice>()
                .map(|v| s.backend = v)
                .map_err(|e| e.to_string()),
            "fit" => value
                .get::<FitChoice>()
                .map(|v| s.fit = v)
                .map_err(|e| e.to_string()),
            "pad" => {
                settings::parse_list::<3, u8>(&text(), "pad (R,G,B in 0..=255)").map(|v| s.pad = v)
            }
            "crop" => settings::parse_crop(&text()).map(|v| s.crop = v),
            "rotation" => value
                .get::<RotationChoice>()
                .map(|v| s.rotation = v)
                .map_err(|e| e.to_string()),
            "flip" => value
                .get::<FlipChoice>()
                .map(|v| s.flip = v)
                .map_err(|e| e.to_string()),
            "interpolation" => value
                .get::<InterpolationChoice>()
                .map(|v| s.interpolation = v)
                .map_err(|e| e.to_string()),
            "matrix" => value
                .get::<MatrixChoice>()
                .map(|v| s.matrix = v)
                .map_err(|e| e.to_string()),
            "range" => value
                .get::<RangeChoice>()
                .map(|v| s.range = v)
                .map_err(|e| e.to_string()),
            "mean" => settings::parse_mean(&text()).map(|v| s.mean = v),
            "std" => settings::parse_std(&text()).map(|v| s.std = v),
            "quantize" => settings::parse_quantize(&text()).map(|v| s.quantize = v),
            "black-level" => settings::parse_black_level(&text()).map(|v| s.black_level = v),
            "wb-gains" => settings::parse_wb_gains(&text()).map(|v| s.wb_gains = v),
            "ccm" => settings::parse_ccm(&text()).map(|v| s.ccm = v),
            "gamma" => value
                .get::<GammaChoice>()
                .map(|v| s.gamma = v)
                .map_err(|e| e.to_string()),
            "dtype" => value
                .get::<DtypeChoice>()
                .map(|v| s.dtype = v)
                .map_err(|e| e.to_string()),
            "layout" => value
                .get::<LayoutChoice>()
                .map(|v| s.layout = v)
                .map_err(|e| e.to_string()),
            "dma-route" => MemoryChoice::parse(&text()).map(|v| s.memory = v),
            "pool-size" => value
                .get::<u32>()
                .map(|v| s.pool_size = v)
                .map_err(|e| e.to_string()),
            "rois" => value
                .get::<bool>()
                .map(|v| s.rois = v)
                .map_err(|e| e.to_string()),
            "roi-type" => {
                s.roi_type = text().trim().to_string();
                Ok(())
            }
            "batch-size" => value
                .get::<u32>()
                .map(|v| s.batch_size = v)
                .map_err(|e| e.to_string()),
            "batch-timeout" => value
                .get::<i64>()
                .map(|v| s.batch_timeout_us = v)
                .map_err(|e| e.to_string()),
            other => Err(format!("no property {other}")),
        };
        drop(s);
        if let Err(e) = result {
            // A property cannot fail its setter: say why the value was not taken.
            gst::error!(
                CAT,
                imp = self,
                "property {} not changed: {e}",
                pspec.name()
            );
            gst::element_imp_warning!(
                self,
                gst::LibraryError::Settings,
                ["property {} not changed: {}", pspec.name(), e]
            );
        }
    }

    fn property(&self, _id: usize, pspec: &glib::ParamSpec) -> glib::Value {
        if pspec.name() == "stats" {
            return self.stats().to_value();
        }
        let s = lock(&self.settings);
        match pspec.name() {
            "backend" => s.backend.to_value(),
            "fit" => s.fit.to_value(),
            "pad" => format!("{},{},{}", s.pad[0], s.pad[1], s.pad[2]).to_value(),
            "crop" => s
                .crop
                .map(|c| format!("{},{},{},{}", c.x, c.y, c.width, c.height))
                .unwrap_or_default()
                .to_value(),
            "rotation" => s.rotation.to_value(),
            "flip" => s.flip.to_value(),
            "interpolation" => s.interpolation.to_value(),
            "matrix" => s.matrix.to_value(),
            "range" => s.range.to_value(),
            "mean" => settings::triple_text(s.mean).to_value(),
            "std" => settings::triple_text(s.std).to_value(),
            "quantize" => settings::quantize_text(s.quantize).to_value(),
            "black-level" => settings::black_level_text(s.black_level).to_value(),
            "wb-gains" => settings::triple_text(s.wb_gains).to_value(),
            "ccm" => settings::ccm_text(s.ccm).to_value(),
            "gamma" => s.gamma.to_value(),
            "dtype" => s.dtype.to_value(),
            "layout" => s.layout.to_value(),
            "dma-route" => s.memory.to_text().to_value(),
            "pool-size" => s.pool_size.to_value(),
            "rois" => s.rois.to_value(),
            "roi-type" => s.roi_type.to_value(),
            "batch-size" => s.batch_size.to_value(),
            "batch-timeout" => s.batch_timeout_us.to_value(),
            // Every property is listed above; GObject never asks for another.
            _ => glib::Value::from_type(pspec.value_type()),
        }
    }
}

impl GstObjectImpl for PinframeConvert {}

impl ElementImpl for PinframeConvert {
    fn metadata() -> Option<&'static gst::subclass::ElementMetadata> {
        static META: LazyLock<gst::subclass::ElementMetadata> = LazyLock::new(|| {
            gst::subclass::ElementMetadata::new(
                "pinframe converter",
                "Filter/Converter/Video/Scaler",
                "Converts camera frames (system memory or dma-bufs) into inference-ready video \
                 or NNStreamer tensors: crop, flip, rotate, letterbox, resize, YUV to RGB, \
                 normalise and quantise in one pass, on GL or the CPU, into a pool of pinned \
                 pinframe tensors",
                "pinframe contributors",
            )
        });
        Some(&*META)
    }

    fn pad_templates() -> &'static [gst::PadTemplate] {
        static TEMPLATES: LazyLock<Vec<gst::PadTemplate>> = LazyLock::new(|| {
            vec![
                gst::PadTemplate::new(
                    "src",
                    gst::PadDirection::Src,
                    gst::PadPresence::Always,
                    &caps::src_template_caps(),
                )
                .expect("the src template is valid"),
                gst::PadTemplate::new(
                    "sink",
                    gst::PadDirection::Sink,
                    gst::PadPresence::Always,
                    &caps::sink_template_caps(),
                )
                .expect("the sink template is valid"),
            ]
        });
        TEMPLATES.as_ref()
    }
}

/// A conversion failure: the library's kind (when it came from the library) and what to say.
struct Failure {
    kind: Option<ErrorKind>,
    message: String,
    /// The source frame itself was damaged (a corrupt compressed frame): the frame is
    /// dropped, the stream goes on.
    corrupt: bool,
}

impl From<pinframe::Error> for Failure {
    fn from(e: pinframe::Error) -> Self {
        Failure {
            kind: Some(e.kind()),
            corrupt: matches!(e, pinframe::Error::CorruptFrame(_)),
            message: e.to_string(),
        }
    }
}

impl From<String> for Failure {
    fn from(message: String) -> Self {
        Failure {
            kind: None,
            message,
            corrupt: false,
        }
    }
}

impl PinframeConvert {
    fn backend(&self) -> pinframe::Backend {
        // The processor's real backend once started (`Auto` resolved), else the property.
        lock(&self.processor)
            .as_ref()
            .map(|p| p.backend())
            .unwrap_or_else(|| lock(&self.settings).backend.backend())
    }

    /// The caps the source pad can offer for one input structure. A batch mode offers
    /// tensors first (what it writes) and video after, so that a video-only downstream
    /// reaches `set_caps` and hears why it cannot have a batch.
    fn output_caps(&self, s: &Settings, framerate: Option<&glib::SendValue>) -> gst::Caps {
        let dtype = s.dtype.dtype();
        let batch = s.batch_mode().is_ok_and(|m| m.is_batch());
        let mut out = gst::Caps::new_empty();
        let dtypes: Vec<DType> = match dtype {
            Some(d) => vec![d],
            None => caps::TENSOR_DTYPES.to_vec(),
        };
        if batch {
            out.make_mut()
                .append_structure(caps::tensor_structure(&dtypes, framerate));
        }
        if dtype.is_none() || dtype == Some(DType::U8) {
            let formats = match s.layout.format() {
                Some(f) => caps::video_formats(&[f]),
                None => caps::destination_formats(),
            };
            let dmabuf = s.memory != MemoryChoice::System;
            out.merge(caps::with_dmabuf(
                caps::video_structure(&formats, framerate),
                dmabuf,
            ));
        }
        if !batch {
            out.make_mut()
                .append_structure(caps::tensor_structure(&dtypes, framerate));
        }
        out
    }

    /// Posts a negotiation error naming what the element supports, and returns it for
    /// the base class's log.
    fn refuse(&self, message: String) -> gst::LoggableError {
        gst::element_imp_error!(self, gst::CoreError::Negotiation, ["{}", message]);
        gst::loggable_error!(CAT, "{}", message)
    }

    /// Says once per caps why sink caps are refused (a warning on the bus and in the log).
    fn report_refused(&self, caps: &gst::Caps) {
        let mut refused = lock(&self.refused);
        if refused.as_ref() == Some(caps) {
            return;
        }
        *refused = Some(caps.clone());
        drop(refused);
        let why = match InputSpec::from_caps(caps, self.backend()) {
            Err(e) => e,
            Ok(_) => format!(
                "cannot convert {caps} with these properties; pinframeconvert takes {}",
                caps::sink_description(self.backend())
            ),
        };
        gst::warning!(CAT, imp = self, "{why}");
        gst::element_imp_warning!(self, gst::CoreError::Negotiation, ["{}", why]);
    }

    /// [`buffers::probe`], counted in the stats.
    fn probe(&self, placement: &Placement) -> pinframe::Result<()> {
        let r = buffers::probe(placement);
        let bytes = match &r {
            Ok(n) => *n,
            // A failed probe asked for one page (or nothing, for a refused placement).
            Err(_) => 0,
        };
        if bytes > 0 {
            let mut c = lock(&self.counters);
            c.probe_allocations += 1;
            c.probe_bytes += bytes as u64;
        }
        r.map(|_| ())
    }

    fn stats(&self) -> gst::Structure {
        let c = *lock(&self.counters);
        let allocated = lock(&self.pool)
            .as_ref()
            .map(|p| p.allocated())
            .unwrap_or(0);
        let mut b = gst::Structure::builder("application/x-pinframe-stats")
            .field("source-imports", c.source_imports)
            .field("dmabuf-sources", c.dmabuf_sources)
            .field("mapped-sources", c.mapped_sources)
            .field("pool-outputs", c.pool_outputs)
            .field("source-import-failures", c.source_import_failures)
            .field("failed-frames", c.failed_frames)
            .field("corrupt-frames", c.corrupt_frames)
            .field("probe-allocations", c.probe_allocations)
            .field("probe-bytes", c.probe_bytes)
            .field("batches", c.batches)
            .field("partial-batches", c.partial_batches)
            .field("batch-timeouts", c.batch_timeouts)
            .field("rois", c.rois)
            .field("skipped-rois", c.skipped_rois)
            .field("dropped-rois", c.dropped_rois)
            .field("frames-without-rois", c.frames_without_rois)
            .field("output-buffers", allocated)
            .field(
                "allocated-bytes",
                self.allocated_bytes
                    .load(std::sync::atomic::Ordering::Relaxed),
            );
        let mut processor = lock(&self.processor);
        if let Some(p) = processor.as_mut() {
            let s = p.stats();
            b = b
                .field("backend", p.backend().name())
                .field("frames", s.frames)
                .field("imports", s.imports)
                .field("cache-hits", s.cache_hits)
                .field("uploads", s.uploads)
                .field("readbacks", s.readbacks)
                .field("cpu-fallbacks", s.cpu_fallbacks);
            if let Some(g) = p.gl_stats() {
                b = b
                    .field("import-failures", g.import_failures)
                    .field("live-images", g.live_images);
            }
        }
        b.build()
    }

    /// The source as a pinframe tensor when every memory of `inbuf` is a dma-buf (imported
    /// once per memory and kept on it, or the tensor of our own proposed pool). `None`:
    /// convert from the mapped bytes instead.
    fn dmabuf_source(
        &self,
        inbuf: &gst::BufferRef,
        input: &InputSpec,
    ) -> Result<Option<Arc<Tensor<u8>>>, String> {
        let n = inbuf.n_memory();
        // A compressed frame is decoded on the CPU from its bytes: nothing to import.
        if input.format.is_compressed()
            || n == 0
            || !(0..n).all(|i| {
                inbuf
                    .peek_memory(i)
                    .is_memory_type::<gst_allocators::DmaBufMemory>()
            })
        {
            return Ok(None);
        }
        let (offsets, strides) = plane_geometry(inbuf, input)?;
        let format = input.format;
        let mut planes = [Plane::default(); 3];
        let mut memories: Vec<usize> = Vec::with_capacity(3);
        let mut fds: Vec<BorrowedFd<'_>> = Vec::with_capacity(3);
        // Every plane lies inside its own memory (its first byte to the end of its last
        // row), not running on into whatever follows it.
        let spans = plane_spans(inbuf, input, &offsets, &strides, Extent::LastRowEnd)?;
        for (i, &(idx, skip)) in spans.iter().enumerate().take(format.plane_count()) {
            let mem = inbuf.peek_memory(idx);
            let dmabuf = mem
                .downcast_memory_ref::<gst_allocators::DmaBufMemory>()
                .ok_or_else(|| "a dma-buf memory without its fd".to_string())?;
            let buffer = match memories.iter().position(|&m| m == idx) {
                Some(b) => b,
                None => {
                    memories.push(idx);
                    // SAFETY: the fd belongs to the memory, which `inbuf` keeps alive (and
                    // open) for as long as this borrow, which ends with this call.
                    fds.push(unsafe { BorrowedFd::borrow_raw(dmabuf.fd()) });
                    memories.len() - 1
                }
            };
            planes[i] = Plane {
                buffer,
                offset: mem.offset() + skip,
                stride: strides[i],
            };
        }
        let layout = ImageLayout::with_planes(
            input.width,
            input.height,
            format,
            DType::U8,
            &planes[..format.plane_count()],
        )
        .map_err(|e| e.to_string())?
        .with_colorimetry(input.colorimetry);
        let cache =
            buffers::SOURCE.get_or_attach(inbuf.peek_memory(memories[0]), SourceImports::default);
        let (tensor, fresh) = cache.get_or_import(&layout, &fds)?;
        if fresh {
            lock(&self.counters).source_imports += 1;
            gst::debug!(CAT, imp = self, "imported a source dma-buf as {layout:?}");
        }
        Ok(Some(tensor))
    }

    /// Runs `work` with a fresh set of counters and adds them to the element's, whether
    /// it succeeded or not (a failed frame counts as one, too).
    fn counted<R>(
        &self,
        work: impl FnOnce(&mut Counters) -> Result<R, Failure>,
    ) -> Result<R, Failure> {
        let mut delta = Counters::default();
        let result = work(&mut delta);
        match &result {
            Err(f) if f.corrupt => delta.corrupt_frames += 1,
            Err(_) => delta.failed_frames += 1,
            Ok(_) => {}
        }
        lock(&self.counters).add(&delta);
        result
    }

    /// One frame: `inbuf` converted into `outbuf`. What it counted is kept whether it
    /// succeeded or not.
    fn convert_frame(
        &self,
        processor: &mut ImageProcessor,
        input: &InputSpec,
        output: &OutputSpec,
        inbuf: &gst::BufferRef,
        outbuf: &mut gst::BufferRef,
        options: &ConvertOptions,
    ) -> Result<ConvertInfo, Failure> {
        self.counted(|counters| {
            self.convert_counted(processor, input, output, inbuf, outbuf, options, counters)
        })
    }

    /// Runs `work` on `inbuf`'s pixels as the library reads them: its dma-buf tensor when
    /// it is one (imported once per memory), else its mapped bytes (raw video plane by
    /// plane, a Bayer frame or a compressed frame as the buffer's bytes).
    fn with_source<R>(
        &self,
        inbuf: &gst::BufferRef,
        input: &InputSpec,
        counters: &mut Counters,
        work: impl FnOnce(FrameSource<'_>, &mut Counters) -> Result<R, Failure>,
    ) -> Result<R, Failure> {
        let source = match self.dmabuf_source(inbuf, input) {
            Ok(s) => s,
            Err(e) => {
                counters.source_import_failures += 1;
                if !self
                    .import_failure_logged
                    .swap(true, std::sync::atomic::Ordering::Relaxed)
                {
                    gst::warning!(
                        CAT,
                        imp = self,
                        "dma-buf source not imported ({e}); mapping it instead (logged once; \
                         the stats' source-import-failures counts them)"
                    );
                } else {
                    gst::debug!(CAT, imp = self, "dma-buf source not imported: {e}");
                }
                None
            }
        };
        if let Some(src) = source {
            counters.dmabuf_sources += 1;
            return work(FrameSource::Tensor(&src), counters);
        }
        counters.mapped_sources += 1;
        if input.format.is_compressed() {
            // One compressed frame: its length is the buffer's size.
            let map = inbuf
                .map_readable()
                .map_err(|e| format!("mapping the input buffer: {e}"))?;
            let layout = input.compressed_layout(map.size())?;
            let bufs = [map.as_slice()];
            return work(
                FrameSource::Bytes {
                    buffers: &bufs,
                    layout: &layout,
                },
                counters,
            );
        }
        // Raw video is mapped plane by plane (GStreamer's video frame); a Bayer frame,
        // which GStreamer's video library does not describe, as the buffer's bytes at
        // the offsets and strides of its GstVideoMeta or its caps.
        if input.info.is_some() && inbuf.meta::<gst_video::VideoMeta>().is_some() {
            // With a GstVideoMeta, GStreamer's video frame maps each plane's own memory
            // and hands out `stride * rows` bytes from the plane's first byte without
            // checking that memory's size: check it here. (Without a meta it maps the
            // whole buffer and checks it against the caps' size itself.)
            let (offsets, strides) = plane_geometry(inbuf, input)?;
            plane_spans(inbuf, input, &offsets, &strides, Extent::WholeRows)?;
        }
        let frame = input
            .info
            .as_ref()
            .map(|info| gst_video::VideoFrameRef::from_buffer_ref_readable(inbuf, info))
            .transpose()
            .map_err(|e| format!("mapping the input frame: {e}"))?;
        let whole = match frame {
            Some(_) => None,
            None => Some(
                inbuf
                    .map_readable()
                    .map_err(|e| format!("mapping the input buffer: {e}"))?,
            ),
        };
        let mut bufs: [&[u8]; 3] = [&[]; 3];
        let mut planes = [Plane::default(); 3];
        let planes_n = input.format.plane_count();
        let count = match (&frame, &whole) {
            (Some(frame), _) => {
                for i in 0..planes_n {
                    let stride = usize::try_from(frame.plane_stride()[i])
                        .map_err(|_| format!("plane {i} has a negative stride"))?;
                    planes[i] = Plane {
                        buffer: i,
                        offset: 0,
                        stride,
                    };
                    bufs[i] = frame
                        .plane_data(i as u32)
                        .map_err(|e| format!("plane {i} of the input frame: {e}"))?;
                }
                planes_n
            }
            (None, Some(map)) => {
                let (offsets, strides) = plane_geometry(inbuf, input)?;
                for i in 0..planes_n {
                    planes[i] = Plane {
                        buffer: 0,
                        offset: offsets[i],
                        stride: strides[i],
                    };
                }
                bufs[0] = map.as_slice();
                1
            }
            (None, None) => return Err("the input frame was not mapped".to_string().into()),
        };
        let layout = ImageLayout::with_planes(
            input.width,
            input.height,
            input.format,
            DType::U8,
            &planes[..planes_n],
        )
        .map_err(|e| e.to_string())?
        .with_colorimetry(input.colorimetry);
        work(
            FrameSource::Bytes {
                buffers: &bufs[..count],
                layout: &layout,
            },
            counters,
        )
    }

    /// [`convert_frame`](Self::convert_frame)'s work, counting into `counters`.
    #[allow(clippy::too_many_arguments)]
    fn convert_counted(
        &self,
        processor: &mut ImageProcessor,
        input: &InputSpec,
        output: &OutputSpec,
        inbuf: &gst::BufferRef,
        outbuf: &mut gst::BufferRef,
        options: &ConvertOptions,
        counters: &mut Counters,
    ) -> Result<ConvertInfo, Failure> {
        let slot = output_slot(outbuf);
        self.with_source(inbuf, input, counters, |src, counters| match (src, &slot) {
            (FrameSource::Tensor(src), Some(slot)) => {
                counters.pool_outputs += 1;
                let mut dst = lock(slot);
                Ok(with_tensor!(&mut *dst, d => processor.convert_with(src, d, options))?)
            }
            (FrameSource::Tensor(src), None) => {
                let map = src.map()?;
                let layout = src
                    .layout()
                    .ok_or_else(|| "an imported source without a layout".to_string())?;
                let mut bufs: [&[u8]; 3] = [&[]; 3];
                for (i, b) in bufs.iter_mut().enumerate().take(layout.buffer_count()) {
                    *b = map.buffer_bytes(i);
                }
                into_buffer(
                    processor,
                    &bufs[..layout.buffer_count()],
                    layout,
                    outbuf,
                    output,
                    options,
                )
            }
            (FrameSource::Bytes { buffers, layout }, Some(slot)) => {
                counters.pool_outputs += 1;
                let mut dst = lock(slot);
                Ok(with_tensor!(&mut *dst, d => {
                    let dst_layout = *d
                        .layout()
                        .ok_or_else(|| "a pool tensor without a layout".to_string())?;
                    let mut map = d.map_mut()?;
                    processor.convert_buffers(buffers, layout, &mut map, &dst_layout, options)?
                }))
            }
            (FrameSource::Bytes { buffers, layout }, None) => {
                into_buffer(processor, buffers, layout, outbuf, output, options)
            }
        })
    }

    /// `rois=true`: up to `output.batch` regions of interest of `inbuf` (of `roi_type`,
    /// or all) converted into the slices of `outbuf`'s batch tensor in one
    /// `convert_batch`, the unused slices zeroed. `None`: the buffer has no region to
    /// convert (it is dropped).
    #[allow(clippy::too_many_arguments)]
    fn convert_rois(
        &self,
        processor: &mut ImageProcessor,
        input: &InputSpec,
        output: &OutputSpec,
        inbuf: &gst::BufferRef,
        outbuf: &mut gst::BufferRef,
        options: &ConvertOptions,
        roi_type: Option<&str>,
        counters: &mut Counters,
    ) -> Result<Option<Vec<(RoiMeta, ConvertInfo)>>, Failure> {
        let mut candidates = Vec::new();
        for roi in inbuf.iter_meta::<gst_video::VideoRegionOfInterestMeta>() {
            let kind = roi.roi_type();
            if roi_type.is_some_and(|t| t != kind) {
                continue;
            }
            let (x, y, w, h) = roi.rect();
            match clamp_roi((x, y, w, h), input.width, input.height) {
                Some(crop) => candidates.push(RoiMeta {
                    id: roi.id(),
                    roi_type: kind.to_string(),
                    crop,
                }),
                None => {
                    counters.skipped_rois += 1;
                    gst::debug!(
                        CAT,
                        imp = self,
                        "ROI {} ({kind}) at {x},{y} {w}x{h} lies outside the {}x{} frame: skipped",
                        roi.id(),
                        input.width,
                        input.height
                    );
                }
            }
        }
        if candidates.is_empty() {
            return Ok(None);
        }
        let slot = output_slot(outbuf).ok_or_else(|| {
            "a batch output buffer that is not one of the element's tensors".to_string()
        })?;
        self.with_source(inbuf, input, counters, |src, counters| {
            let src_layout = src.layout()?;
            // A crop the conversion's plan refuses is one skipped region, not a failed
            // frame: each is planned on its own before the batch is.
            let mut rois = Vec::with_capacity(candidates.len());
            for roi in candidates {
                if !src_layout.format().is_compressed() {
                    let item_options = ConvertOptions {
                        crop: Some(roi.crop),
                        ..*options
                    };
                    if let Err(e) = Plan::new(&src_layout, &output.layout, &item_options) {
                        counters.skipped_rois += 1;
                        gst::debug!(CAT, imp = self, "ROI {} skipped: {e}", roi.id);
                        continue;
                    }
                }
                rois.push(roi);
            }
            if rois.len() > output.batch {
                counters.dropped_rois += (rois.len() - output.batch) as u64;
                rois.truncate(output.batch);
            }
            if rois.is_empty() {
                return Ok(None);
            }
            let items: Vec<BatchItem<'_>> =
                rois.iter().map(|r| src.item().with_crop(r.crop)).collect();
            counters.pool_outputs += 1;
            counters.rois += rois.len() as u64;
            let mut dst = lock(&slot);
            let infos = with_tensor!(&mut *dst, d => {
                let infos = processor.convert_batch(&items, d, options)?;
                zero_slices(d, items.len())?;
                infos
            });
            Ok(Some(rois.into_iter().zip(infos).collect()))
        })
    }

    /// `batch-size` mode: `inbuf` converted into slice `index` of `dst`.
    fn convert_into_slice(
        &self,
        processor: &mut ImageProcessor,
        input: &InputSpec,
        inbuf: &gst::BufferRef,
        dst: &mut AnyTensor,
        index: usize,
        options: &ConvertOptions,
    ) -> Result<ConvertInfo, Failure> {
        self.counted(|counters| {
            self.with_source(inbuf, input, counters, |src, counters| {
                counters.pool_outputs += 1;
                Ok(with_tensor!(dst, d => {
                    let slice = d.slice_layout(index)?;
                    let mut map = d.map_mut()?;
                    match src {
                        FrameSource::Tensor(t) => {
                            // The slice is addressed in the batch's mapping: an imported
                            // source is read from its mapping too.
                            let src_map = t.map()?;
                            let layout = t
                                .layout()
                                .ok_or_else(|| "an imported source without a layout".to_string())?;
                            let mut bufs: [&[u8]; 3] = [&[]; 3];
                            for (i, b) in bufs.iter_mut().enumerate().take(layout.buffer_count()) {
                                *b = src_map.buffer_bytes(i);
                            }
                            processor.convert_buffers(
                                &bufs[..layout.buffer_count()],
                                layout,
                                &mut map,
                                &slice,
                                options,
                            )?
                        }
                        FrameSource::Bytes { buffers, layout } => {
                            processor.convert_buffers(buffers, layout, &mut map, &slice, options)?
                        }
                    }
                }))
            })
        })
    }
}

/// A frame's pixels as the library reads them.
#[derive(Clone, Copy)]
enum FrameSource<'a> {
    /// A dma-buf imported as a tensor.
    Tensor(&'a Tensor<u8>),
    /// Mapped bytes: the planes of a video frame, or a whole buffer.
    Bytes {
        buffers: &'a [&'a [u8]],
        layout: &'a ImageLayout,
    },
}

impl<'a> FrameSource<'a> {
    /// The whole frame as a batch item.
    fn item(&self) -> BatchItem<'a> {
        match *self {
            FrameSource::Tensor(t) => BatchItem::tensor(t),
            FrameSource::Bytes { buffers, layout } => BatchItem::bytes(buffers, layout),
        }
    }

    fn layout(&self) -> Result<ImageLayout, Failure> {
        match self {
            FrameSource::Tensor(t) => t
                .layout()
                .copied()
                .ok_or_else(|| "an imported source without a layout".to_string().into()),
            FrameSource::Bytes { layout, .. } => Ok(**layout),
        }
    }
}

/// The tensor behind an output buffer of the element's pool.
fn output_slot(outbuf: &gst::BufferRef) -> Option<Arc<Mutex<AnyTensor>>> {
    (outbuf.n_memory() == 1)
        .then(|| buffers::OUTPUT.get(outbuf.peek_memory(0)))
        .flatten()
}

/// The part of an ROI rectangle inside a `width` x `height` frame, as a crop; `None` when
/// nothing of it is (outside, or empty).
fn clamp_roi((x, y, w, h): (u32, u32, u32, u32), width: u32, height: u32) -> Option<Crop> {
    let right = x.saturating_add(w).min(width);
    let bottom = y.saturating_add(h).min(height);
    (x < right && y < bottom).then(|| Crop::new(x, y, right - x, bottom - y))
}

/// Zeroes the slices of batch `t` from `first` on (slices a batch does not fill: a pool
/// buffer still holds its previous batch there).
fn zero_slices<T: Element>(t: &mut Tensor<T>, first: usize) -> pinframe::Result<()> {
    let count = t.batch_len();
    if first >= count {
        return Ok(());
    }
    let per_slice = t.slice_bytes() / size_of::<T>();
    let mut map = t.map_mut()?;
    let end = (count * per_slice).min(map.len());
    let start = (first * per_slice).min(end);
    map[start..end].fill(<T as bytemuck::Zeroable>::zeroed());
    Ok(())
}

impl Counters {
    fn add(&mut self, d: &Counters) {
        self.source_imports += d.source_imports;
        self.dmabuf_sources += d.dmabuf_sources;
        self.mapped_sources += d.mapped_sources;
        self.pool_outputs += d.pool_outputs;
        self.source_import_failures += d.source_import_failures;
        self.failed_frames += d.failed_frames;
        self.corrupt_frames += d.corrupt_frames;
        self.probe_allocations += d.probe_allocations;
        self.probe_bytes += d.probe_bytes;
        self.batches += d.batches;
        self.partial_batches += d.partial_batches;
        self.batch_timeouts += d.batch_timeouts;
        self.rois += d.rois;
        self.skipped_rois += d.skipped_rois;
        self.dropped_rois += d.dropped_rois;
        self.frames_without_rois += d.frames_without_rois;
    }
}

/// How far a plane reaches from its first byte.
#[derive(Clone, Copy)]
enum Extent {
    /// To the end of its last row's pixels (what pinframe reads).
    LastRowEnd,
    /// `stride * rows` (what GStreamer's video frame hands out as the plane's bytes).
    WholeRows,
}

/// For each plane: the index of the memory holding its first byte and the offset in
/// that memory, after checking that the plane (up to `extent`) lies inside that one
/// memory (with a `GstVideoMeta` or a dma-buf, where each memory is mapped or imported
/// on its own), or inside the buffer (without a meta, mapped as one).
fn plane_spans(
    inbuf: &gst::BufferRef,
    input: &InputSpec,
    offsets: &[usize; 3],
    strides: &[usize; 3],
    extent: Extent,
) -> Result<[(usize, usize); 3], String> {
    let format = input.format;
    let n = format.plane_count();
    // Each plane in a buffer of its own at offset 0: pinframe's own arithmetic (and its
    // checks of the strides) for the plane's reach, without the overlap check failing.
    let probe = ImageLayout::with_planes(
        input.width,
        input.height,
        format,
        DType::U8,
        &(0..n)
            .map(|i| Plane {
                buffer: i,
                offset: 0,
                stride: strides[i],
            })
            .collect::<Vec<_>>(),
    )
    .map_err(|e| format!("the input's plane strides {:?}: {e}", &strides[..n]))?;
    let per_memory = inbuf.meta::<gst_video::VideoMeta>().is_some()
        || (0..inbuf.n_memory()).any(|i| {
            inbuf
                .peek_memory(i)
                .is_memory_type::<gst_allocators::DmaBufMemory>()
        });
    let mut spans = [(0usize, 0usize); 3];
    for i in 0..n {
        let reach = match extent {
            Extent::LastRowEnd => probe.plane_end(i),
            Extent::WholeRows => strides[i]
                .checked_mul(probe.plane_height(i) as usize)
                .ok_or_else(|| format!("plane {i}: stride {} overflows", strides[i]))?,
        };
        let (range, skip) = inbuf
            .find_memory(offsets[i]..offsets[i].saturating_add(1))
            .ok_or_else(|| format!("plane {i} at offset {} lies outside the buffer", offsets[i]))?;
        let (start, room) = if per_memory {
            (skip, inbuf.peek_memory(range.start).size())
        } else {
            (offsets[i], inbuf.size())
        };
        let end = start
            .checked_add(reach)
            .ok_or_else(|| format!("plane {i} at offset {start} overflows"))?;
        if end > room {
            return Err(format!(
                "plane {i} needs {end} bytes of {} of {room} bytes",
                if per_memory { "its memory" } else { "a buffer" }
            ));
        }
        spans[i] = (range.start, skip);
    }
    Ok(spans)
}

/// Plane offsets (from the buffer's start) and strides: the `GstVideoMeta`'s, else the caps'.
fn plane_geometry(
    inbuf: &gst::BufferRef,
    input: &InputSpec,
) -> Result<([usize; 3], [usize; 3]), String> {
    let n = input.format.plane_count();
    let (offsets, strides): (Vec<usize>, Vec<i32>) = match inbuf.meta::<gst_video::VideoMeta>() {
        Some(m) => {
            if m.width() != input.width
                || m.height() != input.height
                || input
                    .info
                    .as_ref()
                    .is_some_and(|i| m.format() != i.format())
            {
                return Err(format!(
                    "the buffer's GstVideoMeta says {}x{} {} but the caps say {}x{} {}",
                    m.width(),
                    m.height(),
                    m.format().to_str(),
                    input.width,
                    input.height,
                    input.format
                ));
            }
            (m.offset().to_vec(), m.stride().to_vec())
        }
        None => (
            input.offsets.to_vec(),
            input.strides.iter().map(|&s| s as i32).collect(),
        ),
    };
    let mut o = [0usize; 3];
    let mut s = [0usize; 3];
    for i in 0..n {
        o[i] = *offsets
            .get(i)
            .ok_or_else(|| format!("no offset for plane {i}"))?;
        s[i] = usize::try_from(
            *strides
                .get(i)
                .ok_or_else(|| format!("no stride for plane {i}"))?,
        )
        .map_err(|_| format!("plane {i} has a negative stride"))?;
    }
    Ok((o, s))
}

/// Converts into `outbuf`'s own mapped bytes (a buffer that is not one of our tensors).
fn into_buffer(
    processor: &mut ImageProcessor,
    src: &[&[u8]],
    src_layout: &ImageLayout,
    outbuf: &mut gst::BufferRef,
    output: &OutputSpec,
    options: &ConvertOptions,
) -> Result<ConvertInfo, Failure> {
    fn typed<T: Element>(
        processor: &mut ImageProcessor,
        src: &[&[u8]],
        src_layout: &ImageLayout,
        bytes: &mut [u8],
        dst_layout: &ImageLayout,
        options: &ConvertOptions,
    ) -> Result<ConvertInfo, Failure> {
        let dst: &mut [T] = bytemuck::try_cast_slice_mut(bytes)
            .map_err(|e| format!("the output buffer cannot hold {} elements: {e:?}", T::DTYPE))?;
        Ok(processor.convert_buffers(src, src_layout, dst, dst_layout, options)?)
    }
    let mut map = outbuf
        .map_writable()
        .map_err(|e| format!("mapping the output buffer: {e}"))?;
    let bytes = map.as_mut_slice();
    let dl = &output.layout;
    match dl.dtype() {
        DType::U8 => typed::<u8>(processor, src, src_layout, bytes, dl, options),
        DType::I8 => typed::<i8>(processor, src, src_layout, bytes, dl, options),
        DType::F16 => typed::<half::f16>(processor, src, src_layout, bytes, dl, options),
        DType::F32 => typed::<f32>(processor, src, src_layout, bytes, dl, options),
        other => Err(format!("no output of {other} elements").into()),
    }
}

impl BaseTransformImpl for PinframeConvert {
    const MODE: gst_base::subclass::BaseTransformMode =
        gst_base::subclass::BaseTransformMode::NeverInPlace;
    const PASSTHROUGH_ON_SAME_CAPS: bool = false;
    const TRANSFORM_IP_ON_PASSTHROUGH: bool = false;

    fn start(&self) -> Result<(), gst::ErrorMessage> {
        let (backend, mode) = {
            let s = lock(&self.settings);
            (s.backend.backend(), s.batch_mode())
        };
        let mode = mode.map_err(|e| {
            gst::error_msg!(gst::LibraryError::Settings, ["pinframeconvert: {}", e])
        })?;
        let processor = ImageProcessor::with_backend(backend).map_err(|e| {
            gst::error_msg!(
                gst::LibraryError::Init,
                ["pinframe cannot start the {} backend: {}", backend, e]
            )
        })?;
        gst::info!(CAT, imp = self, "converting on {}", processor.backend());
        *lock(&self.processor) = Some(processor);
        *lock(&self.counters) = Counters::default();
        self.import_failure_logged
            .store(false, std::sync::atomic::Ordering::Relaxed);
        self.corrupt_frame_posted
            .store(false, std::sync::atomic::Ordering::Relaxed);
        {
            let mut st = lock(&self.batcher.state);
            st.pending = None;
            st.shutdown = false;
            st.error = None;
        }
        if matches!(mode, BatchMode::Frames { .. }) {
            self.start_timer()?;
        }
        Ok(())
    }

    fn stop(&self) -> Result<(), gst::ErrorMessage> {
        // The pads are inactive here (no streaming thread, pushes return flushing): the
        // timer ends, and a batch still pending goes back to the pool.
        self.stop_timer();
        let pending = lock(&self.batcher.state).pending.take();
        drop(pending);
        *lock(&self.negotiated) = None;
        *lock(&self.processor) = None;
        Ok(())
    }

    fn sink_event(&self, event: gst::Event) -> bool {
        use gst::EventView;
        match event.view() {
            EventView::FlushStop(_) => {
                // Flushed data is gone: so is a batch of it (its buffer back to the pool).
                let pending = lock(&self.batcher.state).pending.take();
                drop(pending);
            }
            // What comes after one of these belongs to another stream, segment or format:
            // the frames converted so far go out first, as a partial batch.
            EventView::Eos(_)
            | EventView::Caps(_)
            | EventView::Segment(_)
            | EventView::StreamStart(_) => {
                // Serialized events arrive under the stream lock.
                let pending = lock(&self.batcher.state).pending.take();
                if let Some(p) = pending {
                    match self.finish_batch(p, BatchEnd::Event) {
                        Ok(buffer) => {
                            if let Err(e) = self.obj().src_pad().push(buffer) {
                                gst::debug!(
                                    CAT,
                                    imp = self,
                                    "a partial batch before {:?}: {e:?}",
                                    event.type_()
                                );
                            }
                        }
                        Err(f) => {
                            let _ = self.post_failure(f);
                        }
                    }
                }
            }
            _ => {}
        }
        self.parent_sink_event(event)
    }

    fn transform_caps(
        &self,
        direction: gst::PadDirection,
        caps: &gst::Caps,
        filter: Option<&gst::Caps>,
    ) -> Option<gst::Caps> {
        let settings = lock(&self.settings).clone();
        // A batch of consecutive frames comes at a fraction of their rate: the rate is
        // left open both ways and fixed (the input's over the batch) in `fixate_caps`.
        let frames = matches!(settings.batch_mode(), Ok(BatchMode::Frames { .. }));
        let mut out = gst::Caps::new_empty();
        if caps.is_any() {
            out = match direction {
                gst::PadDirection::Sink => self.output_caps(&settings, None),
                _ => caps::sink_caps(self.backend(), None),
            };
        }
        for s in caps.iter() {
            let framerate = s.value("framerate").ok().filter(|_| !frames);
            let add = match direction {
                gst::PadDirection::Sink => self.output_caps(&settings, framerate),
                _ => caps::sink_caps(self.backend(), framerate),
            };
            out.merge(add);
        }
        gst::trace!(CAT, imp = self, "{direction:?} {caps} -> {out}");
        Some(match filter {
            Some(f) => f.intersect_with_mode(&out, gst::CapsIntersectMode::First),
            None => out,
        })
    }

    fn fixate_caps(
        &self,
        direction: gst::PadDirection,
        caps: &gst::Caps,
        othercaps: gst::Caps,
    ) -> gst::Caps {
        if direction != gst::PadDirection::Sink {
            return self.parent_fixate_caps(direction, caps, othercaps);
        }
        let settings = lock(&self.settings).clone();
        let mode = settings.batch_mode().unwrap_or(BatchMode::Single);
        let mut other = othercaps;
        other.truncate();
        let Some(ins) = caps.structure(0) else {
            other.fixate();
            return other;
        };
        let in_w = ins.get::<i32>("width").unwrap_or(1);
        let in_h = ins.get::<i32>("height").unwrap_or(1);
        let framerate = ins
            .get::<gst::Fraction>("framerate")
            .ok()
            .map(|fr| match mode {
                BatchMode::Frames { slices } => gst::Fraction::new(
                    fr.numer(),
                    fr.denom()
                        .saturating_mul(i32::try_from(slices).unwrap_or(i32::MAX)),
                ),
                _ => fr,
            });
        {
            let other = other.make_mut();
            if let Some(s) = other.structure_mut(0) {
                if s.name() == caps::TENSORS {
                    if !s.has_field("dimensions") {
                        let layout = settings
                            .layout
                            .format()
                            .unwrap_or(pinframe::PixelFormat::Rgb);
                        s.set(
                            "dimensions",
                            caps::dimensions_of_image(
                                layout,
                                in_w.max(1) as u32,
                                in_h.max(1) as u32,
                                mode.slices(),
                            ),
                        );
                    }
                    if let Some(d) = settings.dtype.dtype().and_then(caps::tensor_type) {
                        s.fixate_field_str("types", d);
                    } else if let Ok(list) = s.get::<gst::List>("types")
                        && let Some(first) = list.iter().find_map(|v| v.get::<String>().ok())
                    {
                        s.fixate_field_str("types", &first);
                    }
                } else {
                    s.fixate_field_nearest_int("width", in_w);
                    s.fixate_field_nearest_int("height", in_h);
                }
                if let Some(fr) = framerate
                    && s.has_field("framerate")
                {
                    s.fixate_field_nearest_fraction("framerate", fr);
                }
            }
        }
        other.fixate();
        other
    }

    fn accept_caps(&self, direction: gst::PadDirection, caps: &gst::Caps) -> bool {
        let ok = self.parent_accept_caps(direction, caps);
        if !ok && direction == gst::PadDirection::Sink {
            self.report_refused(caps);
        }
        ok
    }

    fn query(&self, direction: gst::PadDirection, query: &mut gst::QueryRef) -> bool {
        let ok = BaseTransformImplExt::parent_query(self, direction, query);
        // A source negotiating fixed caps asks which of them we take: an empty answer is
        // where negotiation fails, so say there what we do take.
        if direction == gst::PadDirection::Sink
            && let gst::QueryViewMut::Caps(q) = query.view_mut()
            && let Some(filter) = q.filter_owned()
            && filter.is_fixed()
            && q.result().is_some_and(|r| r.is_empty())
        {
            self.report_refused(&filter);
        }
        ok
    }

    fn set_caps(&self, incaps: &gst::Caps, outcaps: &gst::Caps) -> Result<(), gst::LoggableError> {
        let settings = lock(&self.settings).clone();
        let mode = settings.batch_mode().map_err(|e| self.refuse(e))?;
        let input = InputSpec::from_caps(incaps, self.backend()).map_err(|e| self.refuse(e))?;
        let output = OutputSpec::from_caps(
            outcaps,
            settings.layout.format(),
            settings.dtype.dtype(),
            mode.slices(),
        )
        .map_err(|e| self.refuse(format!("{e} (output caps {outcaps})")))?;
        if mode.is_batch() && !matches!(output.kind, OutputKind::Tensor) {
            return Err(self.refuse(format!(
                "rois=true and batch-size write a batch tensor: the output must be {} \
                 (output caps {outcaps})",
                caps::TENSORS
            )));
        }
        let mut src_layout = input.default_layout().map_err(|e| self.refuse(e))?;
        if input.format.is_compressed() {
            // Each frame's sampling is known only once it arrives; the options and the
            // output are checked against a full-size 4:2:2 frame, what webcams send.
            src_layout =
                ImageLayout::tight(input.width, input.height, PixelFormat::I422, DType::U8)
                    .map_err(|e| self.refuse(e.to_string()))?
                    .with_colorimetry(input.colorimetry);
        }
        let options = settings.options(input.colorimetry, input.height);
        Plan::new(&src_layout, &output.layout, &options).map_err(|e| {
            self.refuse(format!(
                "cannot convert {} {}x{} to {} {}x{} {}: {e}",
                input.format,
                input.width,
                input.height,
                output.layout.format(),
                output.layout.width(),
                output.layout.height(),
                output.layout.dtype()
            ))
        })?;
        gst::info!(
            CAT,
            imp = self,
            "converting {incaps} to {outcaps} ({mode:?})"
        );
        *lock(&self.negotiated) = Some(Negotiated {
            input,
            output,
            mode,
        });
        Ok(())
    }

    fn transform_size(
        &self,
        _direction: gst::PadDirection,
        _caps: &gst::Caps,
        _size: usize,
        othercaps: &gst::Caps,
    ) -> Option<usize> {
        let s = lock(&self.settings);
        let batch = s.batch_mode().map(|m| m.slices()).unwrap_or(1);
        OutputSpec::from_caps(othercaps, s.layout.format(), s.dtype.dtype(), batch)
            .ok()
            .map(|o| o.size)
    }

    fn propose_allocation(
        &self,
        _decide_query: Option<&gst::query::Allocation>,
        query: &mut gst::query::Allocation,
    ) -> Result<(), gst::LoggableError> {
        // Any strides and plane offsets: upstream may describe them with a GstVideoMeta.
        query.add_allocation_meta::<gst_video::VideoMeta>(None);
        // On GL, offer upstream a pool of our dma-buf tensors: frames written into them are
        // imported, never uploaded. (On the CPU a dma-buf gains nothing over upstream's own
        // memory and can be slower to read.)
        if self.backend() != pinframe::Backend::Gl {
            return Ok(());
        }
        let memory = lock(&self.settings).memory.clone();
        if memory == MemoryChoice::System {
            return Ok(());
        }
        let (Some(caps), _) = query.get_owned() else {
            return Ok(());
        };
        let Ok(input) = InputSpec::from_caps(&caps, self.backend()) else {
            return Ok(());
        };
        if input.format.is_compressed() {
            // Compressed frames are mapped and decoded, never imported: no pool to offer.
            return Ok(());
        }
        let Ok(layout) = input.default_layout() else {
            return Ok(());
        };
        let placement = Placement {
            memory,
            require_dma: true,
            allocated: self.allocated_bytes.clone(),
        };
        if let Err(e) = self.probe(&placement) {
            gst::debug!(CAT, imp = self, "proposing no pool upstream: {e}");
            return Ok(());
        }
        let size = input.size;
        let Ok(size_u32) = u32::try_from(size) else {
            gst::debug!(
                CAT,
                imp = self,
                "proposing no pool upstream: frames of {size} bytes"
            );
            return Ok(());
        };
        // A GstVideoMeta needs a GStreamer video format, which Bayer caps do not have: their
        // buffers are at the caps' default stride, which needs no meta.
        let video_meta = input.info.is_some();
        let pool = TensorPool::new(PoolSpec {
            layout,
            batch: 1,
            size,
            placement,
            video_meta,
            source: true,
        });
        let mut config = pool.config();
        config.set_params(Some(&caps), size_u32, PROPOSED_POOL_MIN, 0);
        if video_meta {
            config.add_option(gst_video::BUFFER_POOL_OPTION_VIDEO_META);
        }
        pool.set_config(config)
            .map_err(|e| gst::loggable_error!(CAT, "configuring the proposed pool: {e}"))?;
        query.add_allocation_pool(Some(&pool), size_u32, PROPOSED_POOL_MIN, 0);
        gst::info!(
            CAT,
            imp = self,
            "proposed a pool of dma-buf tensors upstream"
        );
        Ok(())
    }

    fn decide_allocation(
        &self,
        query: &mut gst::query::Allocation,
    ) -> Result<(), gst::LoggableError> {
        let negotiated = lock(&self.negotiated);
        let Some(n) = negotiated.as_ref() else {
            return Err(gst::loggable_error!(CAT, "allocation before caps"));
        };
        let output = n.output.clone();
        drop(negotiated);
        let (settings_memory, pool_size) = {
            let s = lock(&self.settings);
            (s.memory.clone(), s.pool_size)
        };
        let downstream_min = query
            .allocation_pools()
            .next()
            .map(|(_, _, min, _)| min)
            .unwrap_or(0);
        let count = pool_size.max(downstream_min).max(2);
        let (video, dmabuf) = match &output.kind {
            OutputKind::Video { dmabuf, .. } => (true, *dmabuf),
            OutputKind::Tensor => (false, false),
        };
        let placement = Placement {
            memory: settings_memory,
            require_dma: dmabuf,
            allocated: self.allocated_bytes.clone(),
        };
        // A probe up front (one page, not a frame), so a platform that cannot give these
        // buffers fails here with the library's reasons, not later as "failed to activate
        // bufferpool".
        if let Err(e) = self.probe(&placement) {
            gst::element_imp_error!(
                self,
                gst::ResourceError::NoSpaceLeft,
                ["cannot allocate the output pool's buffers: {}", e]
            );
            return Err(gst::loggable_error!(
                CAT,
                "cannot allocate output buffers: {e}"
            ));
        }
        let (caps, _) = query.get_owned();
        let size = u32::try_from(output.size)
            .map_err(|_| gst::loggable_error!(CAT, "output buffers of {} bytes", output.size))?;
        let pool = TensorPool::new(PoolSpec {
            layout: output.layout,
            batch: output.batch,
            size: output.size,
            placement,
            video_meta: video,
            source: false,
        });
        let mut config = pool.config();
        config.set_params(caps.as_ref(), size, count, count);
        if video {
            config.add_option(gst_video::BUFFER_POOL_OPTION_VIDEO_META);
        }
        pool.set_config(config)
            .map_err(|e| gst::loggable_error!(CAT, "configuring the output pool: {e}"))?;
        if query.allocation_pools().next().is_some() {
            query.set_nth_allocation_pool(0, Some(&pool), size, count, count);
        } else {
            query.add_allocation_pool(Some(&pool), size, count, count);
        }
        gst::info!(
            CAT,
            imp = self,
            "output pool: {count} buffers of {size} bytes"
        );
        *lock(&self.pool) = Some(pool);
        Ok(())
    }

    fn transform(
        &self,
        inbuf: &gst::Buffer,
        outbuf: &mut gst::BufferRef,
    ) -> Result<gst::FlowSuccess, gst::FlowError> {
        let options;
        let (input, output, mode) = {
            let negotiated = lock(&self.negotiated);
            let n = negotiated.as_ref().ok_or(gst::FlowError::NotNegotiated)?;
            options = lock(&self.settings).options(n.input.colorimetry, n.input.height);
            (n.input.clone(), n.output.clone(), n.mode.clone())
        };
        let mut processor = lock(&self.processor);
        let processor = processor.as_mut().ok_or(gst::FlowError::Flushing)?;
        if let BatchMode::Rois { roi_type, .. } = &mode {
            let result = self.counted(|counters| {
                let r = self.convert_rois(
                    processor,
                    &input,
                    &output,
                    inbuf,
                    outbuf,
                    &options,
                    roi_type.as_deref(),
                    counters,
                );
                match &r {
                    Ok(None) => counters.frames_without_rois += 1,
                    Ok(Some(rois)) => {
                        counters.batches += 1;
                        if rois.len() < output.batch {
                            counters.partial_batches += 1;
                        }
                    }
                    Err(_) => {}
                }
                r
            });
            let rois = match result {
                Ok(Some(rois)) => rois,
                // Nothing to convert: no tensor of zeros goes downstream.
                Ok(None) => return Ok(gst_base::BASE_TRANSFORM_FLOW_DROPPED),
                Err(f) => return self.post_failure(f),
            };
            let valid = rois.len();
            for (index, (roi, info)) in rois.into_iter().enumerate() {
                let slice = SliceMeta {
                    index,
                    size: output.batch,
                    valid,
                    roi: Some(roi),
                    source_pts: None,
                };
                if let Err(e) = meta::add(outbuf, &info, input.width, input.height, Some(&slice)) {
                    gst::warning!(
                        CAT,
                        imp = self,
                        "no PinframeConvertMeta for slice {index}: {e}"
                    );
                }
            }
            return Ok(gst::FlowSuccess::Ok);
        }
        let info = match self.convert_frame(processor, &input, &output, inbuf, outbuf, &options) {
            Ok(info) => info,
            Err(f) => return self.post_failure(f),
        };
        if let Err(e) = meta::add(outbuf, &info, input.width, input.height, None) {
            gst::warning!(
                CAT,
                imp = self,
                "no PinframeConvertMeta on this buffer: {e}"
            );
        }
        Ok(gst::FlowSuccess::Ok)
    }

    fn generate_output(&self) -> Result<GenerateOutputSuccess, gst::FlowError> {
        let frames = lock(&self.negotiated).as_ref().and_then(|n| match n.mode {
            BatchMode::Frames { slices } => Some(slices),
            _ => None,
        });
        match frames {
            Some(slices) => self.generate_batch(slices),
            None => self.parent_generate_output(),
        }
    }
}

impl PinframeConvert {
    /// Says why a frame failed: a damaged frame is dropped with a warning (posted once per
    /// start) and the stream goes on; anything else posts an element error and stops it.
    fn post_failure(&self, f: Failure) -> Result<gst::FlowSuccess, gst::FlowError> {
        if f.corrupt {
            // A damaged frame from a camera or a network is one lost frame, not the
            // end of the stream (what jpegdec does too): drop it, say so, count it.
            gst::warning!(CAT, imp = self, "dropped a corrupt frame: {}", f.message);
            if !self
                .corrupt_frame_posted
                .swap(true, std::sync::atomic::Ordering::Relaxed)
            {
                gst::element_imp_warning!(
                    self,
                    gst::StreamError::Decode,
                    ("pinframe dropped a corrupt frame"),
                    [
                        "{} (posted once; the stats' corrupt-frames counts them all)",
                        f.message
                    ]
                );
            }
            return Ok(gst_base::BASE_TRANSFORM_FLOW_DROPPED);
        }
        let what = "pinframe could not convert a frame";
        match f.kind {
            Some(ErrorKind::InvalidInput) | Some(ErrorKind::Unsupported) => {
                gst::element_imp_error!(
                    self,
                    gst::StreamError::Format,
                    ("{}", what),
                    ["{}", f.message]
                )
            }
            Some(ErrorKind::MemoryUnavailable) => {
                gst::element_imp_error!(
                    self,
                    gst::ResourceError::NoSpaceLeft,
                    ("{}", what),
                    ["{}", f.message]
                )
            }
            Some(_) => gst::element_imp_error!(
                self,
                gst::ResourceError::Failed,
                ("{}", what),
                ["{}", f.message]
            ),
            None => gst::element_imp_error!(
                self,
                gst::StreamError::Failed,
                ("{}", what),
                ["{}", f.message]
            ),
        }
        Err(gst::FlowError::Error)
    }

    /// `batch-size` mode: the queued input converted into the next slice of the pending
    /// batch (a new one from the pool when there is none); the batch when that filled it.
    /// Runs on the streaming thread, under the stream lock.
    fn generate_batch(&self, slices: usize) -> Result<GenerateOutputSuccess, gst::FlowError> {
        let Some(inbuf) = self.take_queued_buffer() else {
            return Ok(GenerateOutputSuccess::NoOutput);
        };
        let arrived = Instant::now();
        if let Some(e) = lock(&self.batcher.state).error.take() {
            // Downstream refused the timer's last push: upstream hears it now.
            return Err(e);
        }
        let (input, options) = {
            let negotiated = lock(&self.negotiated);
            let n = negotiated.as_ref().ok_or(gst::FlowError::NotNegotiated)?;
            let options = lock(&self.settings).options(n.input.colorimetry, n.input.height);
            (n.input.clone(), options)
        };
        let mut pending = lock(&self.batcher.state).pending.take();
        if pending.as_ref().is_some_and(|p| p.due(arrived)) {
            // Its time is up; the timer waits for the stream lock this thread holds.
            if let Some(due) = pending.take() {
                let buffer = match self.finish_batch(due, BatchEnd::Timeout) {
                    Ok(b) => b,
                    Err(f) => {
                        self.post_failure(f)?;
                        return Ok(GenerateOutputSuccess::Dropped);
                    }
                };
                self.obj().src_pad().push(buffer)?;
            }
        }
        if let Some(p) = pending.take_if(|p| p.caps != self.obj().src_pad().current_caps()) {
            // Downstream renegotiated (a reconfigure, without new input caps) under a
            // partial batch laid out for the old caps: it cannot go out under the new ones.
            gst::warning!(
                CAT,
                imp = self,
                "dropped a partial batch of {} frames: the output caps changed",
                p.slices.len()
            );
        }
        let mut pending = match pending {
            Some(p) => p,
            None => self.new_batch(slices)?,
        };
        let index = pending.slices.len();
        let result = match output_slot(&pending.buffer) {
            Some(slot) => {
                let mut processor = lock(&self.processor);
                match processor.as_mut() {
                    Some(processor) => {
                        let mut dst = lock(&slot);
                        self.convert_into_slice(
                            processor, &input, &inbuf, &mut dst, index, &options,
                        )
                    }
                    None => Err("the element is stopping".to_string().into()),
                }
            }
            None => Err("a batch buffer that is not one of the element's tensors"
                .to_string()
                .into()),
        };
        match result {
            Ok(info) => pending.slices.push(FilledSlice {
                info,
                pts: inbuf.pts(),
                dts: inbuf.dts(),
                duration: inbuf.duration(),
                source_width: input.width,
                source_height: input.height,
            }),
            Err(f) => {
                // The batch keeps its slices; the next frame takes this one.
                self.keep_pending(pending);
                self.post_failure(f)?;
                return Ok(GenerateOutputSuccess::Dropped);
            }
        }
        if pending.slices.len() >= pending.capacity {
            return match self.finish_batch(pending, BatchEnd::Full) {
                Ok(buffer) => Ok(GenerateOutputSuccess::Buffer(buffer)),
                Err(f) => {
                    self.post_failure(f)?;
                    Ok(GenerateOutputSuccess::Dropped)
                }
            };
        }
        if index == 0 {
            // A deadline past what the clock can hold is no deadline.
            pending.deadline = lock(&self.settings)
                .batch_timeout()
                .and_then(|t| arrived.checked_add(t));
        }
        self.keep_pending(pending);
        Ok(GenerateOutputSuccess::NoOutput)
    }

    /// Stores the pending batch and wakes the timer for its deadline.
    fn keep_pending(&self, pending: PendingBatch) {
        lock(&self.batcher.state).pending = Some(pending);
        self.batcher.wake.notify_all();
    }

    /// A new batch: an output buffer of the negotiated pool, no slice converted yet.
    fn new_batch(&self, slices: usize) -> Result<PendingBatch, gst::FlowError> {
        let pool = self
            .obj()
            .buffer_pool()
            .ok_or(gst::FlowError::NotNegotiated)?;
        // The base class activates its pool on its first output buffer, which this mode
        // never asks it for.
        if !pool.is_active() && pool.set_active(true).is_err() {
            gst::element_imp_error!(
                self,
                gst::ResourceError::Failed,
                ["cannot activate the output pool"]
            );
            return Err(gst::FlowError::Error);
        }
        let buffer = pool.acquire_buffer(None)?;
        Ok(PendingBatch {
            buffer,
            caps: self.obj().src_pad().current_caps(),
            capacity: slices,
            slices: Vec::with_capacity(slices),
            deadline: None,
        })
    }

    /// A batch ready to push: the slices it did not fill zeroed, its timestamps (the
    /// first frame's, lasting to the last frame's end) and one meta per converted slice.
    fn finish_batch(&self, pending: PendingBatch, end: BatchEnd) -> Result<gst::Buffer, Failure> {
        let PendingBatch {
            mut buffer,
            capacity,
            slices,
            ..
        } = pending;
        let valid = slices.len();
        if valid < capacity {
            let slot = output_slot(&buffer).ok_or_else(|| {
                "a batch buffer that is not one of the element's tensors".to_string()
            })?;
            let mut dst = lock(&slot);
            with_tensor!(&mut *dst, d => zero_slices(d, valid))?;
        }
        {
            let b = buffer
                .get_mut()
                .ok_or_else(|| "a pending batch buffer was shared".to_string())?;
            let first = slices.first().and_then(|s| s.pts);
            let last_end = slices
                .last()
                .and_then(|s| s.pts.map(|p| s.duration.map_or(p, |d| p + d)));
            b.set_pts(first);
            b.set_dts(slices.first().and_then(|s| s.dts));
            b.set_duration(match (first, last_end) {
                (Some(a), Some(e)) if e > a => Some(e - a),
                _ => None,
            });
            for (index, s) in slices.iter().enumerate() {
                let slice = SliceMeta {
                    index,
                    size: capacity,
                    valid,
                    roi: None,
                    source_pts: s.pts,
                };
                if let Err(e) = meta::add(b, &s.info, s.source_width, s.source_height, Some(&slice))
                {
                    gst::warning!(
                        CAT,
                        imp = self,
                        "no PinframeConvertMeta for slice {index}: {e}"
                    );
                }
            }
        }
        let mut c = lock(&self.counters);
        c.batches += 1;
        if valid < capacity {
            c.partial_batches += 1;
        }
        if end == BatchEnd::Timeout {
            c.batch_timeouts += 1;
        }
        drop(c);
        gst::debug!(CAT, imp = self, "a batch of {valid}/{capacity} ({end:?})");
        Ok(buffer)
    }

    /// The timer's work once the pending batch's deadline passed: under the stream lock
    /// (so no frame is being converted into it, and it goes out in stream order), the
    /// batch is taken, finished and pushed.
    fn push_due_batch(&self) {
        let obj = self.obj();
        let _stream = obj.sink_pad().stream_lock();
        let due = {
            let mut st = lock(&self.batcher.state);
            if st.shutdown || !st.pending.as_ref().is_some_and(|p| p.due(Instant::now())) {
                return;
            }
            st.pending.take()
        };
        let Some(due) = due else {
            return;
        };
        let flow = match self.finish_batch(due, BatchEnd::Timeout) {
            Ok(buffer) => obj.src_pad().push(buffer).map(|_| ()),
            Err(f) => self.post_failure(f).map(|_| ()),
        };
        match flow {
            Ok(()) | Err(gst::FlowError::Flushing) => {}
            Err(e) => {
                gst::debug!(CAT, imp = self, "the timeout's batch: {e:?}");
                lock(&self.batcher.state).error = Some(e);
            }
        }
    }

    /// Starts the timer thread of the `batch-size` mode.
    fn start_timer(&self) -> Result<(), gst::ErrorMessage> {
        self.stop_timer();
        lock(&self.batcher.state).shutdown = false;
        let batcher = self.batcher.clone();
        let element = self.obj().downgrade();
        let handle = std::thread::Builder::new()
            .name("pinframe-batch".into())
            .spawn(move || batch_timer(&batcher, &element))
            .map_err(|e| {
                gst::error_msg!(
                    gst::ResourceError::Failed,
                    ["cannot start the batch timer thread: {}", e]
                )
            })?;
        *lock(&self.timer) = Some(handle);
        Ok(())
    }

    /// Ends the timer thread and waits for it.
    fn stop_timer(&self) {
        lock(&self.batcher.state).shutdown = true;
        self.batcher.wake.notify_all();
        let handle = lock(&self.timer).take();
        if let Some(h) = handle
            && h.thread().id() != std::thread::current().id()
        {
            // It holds no lock while it waits, and the stream lock is free here.
            let _ = h.join();
        }
    }
}

/// The timer thread: sleeps until the pending batch's deadline (or a new one, or
/// shutdown), then has the element push it. It holds a strong reference to the element
/// only while it pushes.
fn batch_timer(batcher: &Batcher, element: &glib::WeakRef<super::PinframeConvert>) {
    loop {
        {
            let mut st = lock(&batcher.state);
            loop {
                if st.shutdown {
                    return;
                }
                let now = Instant::now();
                match st.pending.as_ref().and_then(|p| p.deadline) {
                    Some(d) if d <= now => break,
                    Some(d) => {
                        st = match batcher.wake.wait_timeout(st, d - now) {
                            Ok((g, _)) => g,
                            Err(p) => p.into_inner().0,
                        }
                    }
                    None => st = batcher.wake.wait(st).unwrap_or_else(|p| p.into_inner()),
                }
            }
        }
        let Some(element) = element.upgrade() else {
            return;
        };
        element.imp().push_due_batch();
    }
}
