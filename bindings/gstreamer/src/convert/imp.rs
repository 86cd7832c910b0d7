//! The element's implementation: properties, negotiation, allocation, and one conversion
//! per buffer.

use std::os::fd::BorrowedFd;
use std::sync::{Arc, LazyLock, Mutex, MutexGuard};

use gst::glib;
use gst::prelude::*;
use gst::subclass::prelude::*;
use gst_base::subclass::prelude::*;
use gst_video::VideoFrameExt;
use pinframe::convert::Plan;
use pinframe::{
    ConvertInfo, ConvertOptions, DType, Element, ErrorKind, ImageLayout, ImageProcessor,
    PixelFormat, Plane, Tensor,
};

use crate::CAT;
use crate::buffers::{self, Placement, SourceImports, with_tensor};
use crate::caps::{self, InputSpec, OutputKind, OutputSpec};
use crate::meta;
use crate::pool::{PoolSpec, TensorPool};
use crate::settings::{
    self, BackendChoice, DtypeChoice, FitChoice, FlipChoice, GammaChoice, InterpolationChoice,
    LayoutChoice, MatrixChoice, MemoryChoice, RangeChoice, RotationChoice, Settings,
};

/// Buffers a proposed upstream pool starts with (upstream sets its own count).
const PROPOSED_POOL_MIN: u32 = 2;

/// What negotiation settled.
struct Negotiated {
    input: InputSpec,
    output: OutputSpec,
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
                glib::ParamSpecBoxed::builder::<gst::Structure>("stats")
                    .nick("Statistics")
                    .blurb("Counters: frames, imports, cache-hits, uploads, readbacks, cpu-fallbacks, import-failures, live-images, source-imports, dmabuf-sources, mapped-sources, pool-outputs, source-import-failures (dma-buf sources that could not be imported), failed-frames, corrupt-frames (damaged JPEG frames, dropped), probe-allocations and probe-bytes (one-page negotiation probes), output-buffers, allocated-bytes (every pool and probe tensor since the element was made), backend; what a failed frame counted is kept")
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

    /// The caps the source pad can offer for one input structure.
    fn output_caps(&self, s: &Settings, framerate: Option<&glib::SendValue>) -> gst::Caps {
        let dtype = s.dtype.dtype();
        let mut out = gst::Caps::new_empty();
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
        let dtypes: Vec<DType> = match dtype {
            Some(d) => vec![d],
            None => caps::TENSOR_DTYPES.to_vec(),
        };
        out.make_mut()
            .append_structure(caps::tensor_structure(&dtypes, framerate));
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

    /// One frame: `inbuf` converted into `outbuf`. What it counted is kept whether it
    /// succeeded or not (a failed frame counts as one, too).
    fn convert_frame(
        &self,
        processor: &mut ImageProcessor,
        input: &InputSpec,
        output: &OutputSpec,
        inbuf: &gst::BufferRef,
        outbuf: &mut gst::BufferRef,
        options: &ConvertOptions,
    ) -> Result<ConvertInfo, Failure> {
        let mut delta = Counters::default();
        let result =
            self.convert_counted(processor, input, output, inbuf, outbuf, options, &mut delta);
        match &result {
            Err(f) if f.corrupt => delta.corrupt_frames += 1,
            Err(_) => delta.failed_frames += 1,
            Ok(_) => {}
        }
        lock(&self.counters).add(&delta);
        result
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
        let slot = (outbuf.n_memory() == 1)
            .then(|| buffers::OUTPUT.get(outbuf.peek_memory(0)))
            .flatten();
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
        let info = if let Some(src) = source {
            counters.dmabuf_sources += 1;
            match &slot {
                Some(slot) => {
                    counters.pool_outputs += 1;
                    let mut dst = lock(slot);
                    with_tensor!(&mut *dst, d => processor.convert_with(&src, d, options))?
                }
                None => {
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
                    )?
                }
            }
        } else if input.format.is_compressed() {
            counters.mapped_sources += 1;
            // One compressed frame: its length is the buffer's size.
            let map = inbuf
                .map_readable()
                .map_err(|e| format!("mapping the input buffer: {e}"))?;
            let layout = input.compressed_layout(map.size())?;
            let bufs = [map.as_slice()];
            match &slot {
                Some(slot) => {
                    counters.pool_outputs += 1;
                    let mut dst = lock(slot);
                    with_tensor!(&mut *dst, d => {
                        let dst_layout = *d
                            .layout()
                            .ok_or_else(|| "a pool tensor without a layout".to_string())?;
                        let mut map = d.map_mut()?;
                        processor.convert_buffers(&bufs, &layout, &mut map, &dst_layout, options)?
                    })
                }
                None => into_buffer(processor, &bufs, &layout, outbuf, output, options)?,
            }
        } else {
            counters.mapped_sources += 1;
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
            match &slot {
                Some(slot) => {
                    counters.pool_outputs += 1;
                    let mut dst = lock(slot);
                    with_tensor!(&mut *dst, d => {
                        let dst_layout = *d
                            .layout()
                            .ok_or_else(|| "a pool tensor without a layout".to_string())?;
                        let mut map = d.map_mut()?;
                        processor.convert_buffers(&bufs[..count], &layout, &mut map, &dst_layout, options)?
                    })
                }
                None => into_buffer(processor, &bufs[..count], &layout, outbuf, output, options)?,
            }
        };
        Ok(info)
    }
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
        let backend = lock(&self.settings).backend.backend();
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
        Ok(())
    }

    fn stop(&self) -> Result<(), gst::ErrorMessage> {
        *lock(&self.negotiated) = None;
        *lock(&self.processor) = None;
        Ok(())
    }

    fn transform_caps(
        &self,
        direction: gst::PadDirection,
        caps: &gst::Caps,
        filter: Option<&gst::Caps>,
    ) -> Option<gst::Caps> {
        let settings = lock(&self.settings).clone();
        let mut out = gst::Caps::new_empty();
        if caps.is_any() {
            out = match direction {
                gst::PadDirection::Sink => self.output_caps(&settings, None),
                _ => caps::sink_caps(self.backend(), None),
            };
        }
        for s in caps.iter() {
            let framerate = s.value("framerate").ok();
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
        let mut other = othercaps;
        other.truncate();
        let Some(ins) = caps.structure(0) else {
            other.fixate();
            return other;
        };
        let in_w = ins.get::<i32>("width").unwrap_or(1);
        let in_h = ins.get::<i32>("height").unwrap_or(1);
        let framerate = ins.get::<gst::Fraction>("framerate").ok();
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
        let input = InputSpec::from_caps(incaps, self.backend()).map_err(|e| self.refuse(e))?;
        let output =
            OutputSpec::from_caps(outcaps, settings.layout.format(), settings.dtype.dtype())
                .map_err(|e| self.refuse(format!("{e} (output caps {outcaps})")))?;
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
        gst::info!(CAT, imp = self, "converting {incaps} to {outcaps}");
        *lock(&self.negotiated) = Some(Negotiated { input, output });
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
        OutputSpec::from_caps(othercaps, s.layout.format(), s.dtype.dtype())
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
        let (input, output) = {
            let negotiated = lock(&self.negotiated);
            let n = negotiated.as_ref().ok_or(gst::FlowError::NotNegotiated)?;
            options = lock(&self.settings).options(n.input.colorimetry, n.input.height);
            (n.input.clone(), n.output.clone())
        };
        let mut processor = lock(&self.processor);
        let processor = processor.as_mut().ok_or(gst::FlowError::Flushing)?;
        let info = match self.convert_frame(processor, &input, &output, inbuf, outbuf, &options) {
            Ok(info) => info,
            Err(f) if f.corrupt => {
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
            Err(f) => {
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
                return Err(gst::FlowError::Error);
            }
        };
        if let Err(e) = meta::add(outbuf, &info, input.width, input.height) {
            gst::warning!(
                CAT,
                imp = self,
                "no PinframeConvertMeta on this buffer: {e}"
            );
        }
        Ok(gst::FlowSuccess::Ok)
    }
}
