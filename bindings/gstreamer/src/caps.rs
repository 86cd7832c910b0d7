//! What pinframeconvert negotiates: GStreamer format names for the library's pixel
//! formats, the caps it offers on each pad, and NNStreamer's static-tensor convention.
//!
//! Nothing here touches a frame; the element (`convert/imp.rs`) turns the negotiated caps
//! into the [`InputSpec`] and [`OutputSpec`] it converts with.

use gst::glib;
use gst::prelude::*;
use gst_video::{VideoColorMatrix, VideoColorRange, VideoFormat};
use pinframe::image::MAX_DIMENSION;
use pinframe::{Backend, Colorimetry, DType, ImageLayout, Matrix, PixelFormat, Plane, Range};

/// NNStreamer's caps name for a set of tensors.
pub(crate) const TENSORS: &str = "other/tensors";
/// Raw video.
pub(crate) const VIDEO: &str = "video/x-raw";
/// Motion-JPEG frames (v4l2src from a webcam, jpegenc, multipartdemux).
pub(crate) const JPEG: &str = "image/jpeg";
/// Bayer (colour-filter-array) frames, one byte a sample (GStreamer 1.22's only depth).
pub(crate) const BAYER: &str = "video/x-bayer";

/// The GStreamer video format of a pinframe pixel format, where GStreamer has one.
pub(crate) fn video_format(f: PixelFormat) -> Option<VideoFormat> {
    Some(match f {
        PixelFormat::Yuyv => VideoFormat::Yuy2,
        PixelFormat::Uyvy => VideoFormat::Uyvy,
        PixelFormat::Yvyu => VideoFormat::Yvyu,
        PixelFormat::Vyuy => VideoFormat::Vyuy,
        PixelFormat::Nv12 => VideoFormat::Nv12,
        PixelFormat::Nv21 => VideoFormat::Nv21,
        PixelFormat::Nv16 => VideoFormat::Nv16,
        PixelFormat::Nv61 => VideoFormat::Nv61,
        PixelFormat::I420 => VideoFormat::I420,
        PixelFormat::Yv12 => VideoFormat::Yv12,
        PixelFormat::I422 => VideoFormat::Y42b,
        PixelFormat::I444 => VideoFormat::Y444,
        PixelFormat::Grey => VideoFormat::Gray8,
        PixelFormat::Rgb => VideoFormat::Rgb,
        PixelFormat::Bgr => VideoFormat::Bgr,
        PixelFormat::Rgba => VideoFormat::Rgba,
        PixelFormat::Bgra => VideoFormat::Bgra,
        PixelFormat::PlanarRgb => VideoFormat::Rgbp,
        PixelFormat::PlanarBgr => VideoFormat::Bgrp,
        PixelFormat::Y16 => VideoFormat::Gray16Le,
        PixelFormat::P010 => VideoFormat::P01010le,
        PixelFormat::P012 => VideoFormat::P012Le,
        PixelFormat::P016 => VideoFormat::P016Le,
        // Bayer formats travel as video/x-bayer (`bayer_format`). GStreamer 1.22 has no
        // name for the others: Y10/Y12 in 16-bit words (its GRAY10_LE32 packs three
        // samples in 32 bits), Bayer deeper than 8 bits, CSI-2 packed RAW. A format the
        // library learns later is offered once it is mapped here.
        _ => return None,
    })
}

/// The `format` of a `video/x-bayer` caps for a pinframe Bayer format, where GStreamer
/// has one (8 bits a sample).
pub(crate) fn bayer_format(f: PixelFormat) -> Option<&'static str> {
    Some(match f {
        PixelFormat::Rggb8 => "rggb",
        PixelFormat::Bggr8 => "bggr",
        PixelFormat::Grbg8 => "grbg",
        PixelFormat::Gbrg8 => "gbrg",
        _ => return None,
    })
}

/// The pinframe format of a `video/x-bayer` caps `format`.
pub(crate) fn bayer_pixel_format(name: &str) -> Option<PixelFormat> {
    PixelFormat::ALL
        .iter()
        .copied()
        .find(|&f| bayer_format(f) == Some(name))
}

/// The pinframe pixel format of a GStreamer video format, if pinframe knows it.
pub(crate) fn pixel_format(v: VideoFormat) -> Option<PixelFormat> {
    PixelFormat::ALL
        .iter()
        .copied()
        .find(|&f| video_format(f) == Some(v))
}

/// GStreamer's names of `formats` (those GStreamer has), in the library's order.
pub(crate) fn video_formats(formats: &[PixelFormat]) -> Vec<VideoFormat> {
    formats.iter().filter_map(|&f| video_format(f)).collect()
}

/// The formats a backend takes as sources (the library's capability query).
pub(crate) fn source_formats(backend: Backend) -> Vec<VideoFormat> {
    video_formats(backend.source_formats())
}

/// The `video/x-bayer` formats a backend takes as sources.
pub(crate) fn bayer_source_formats(backend: Backend) -> Vec<&'static str> {
    backend
        .source_formats()
        .iter()
        .filter_map(|&f| bayer_format(f))
        .collect()
}

/// What the element takes on its sink pad on `backend`: raw video in the backend's
/// source formats and, when it converts any, Bayer frames; system memory and dma-bufs.
pub(crate) fn sink_caps(backend: Backend, framerate: Option<&glib::SendValue>) -> gst::Caps {
    let mut caps = with_dmabuf(video_structure(&source_formats(backend), framerate), true);
    let bayer = bayer_source_formats(backend);
    if !bayer.is_empty() {
        caps.make_mut()
            .append(with_dmabuf(bayer_structure(&bayer, framerate), true));
    }
    if takes_jpeg(backend) {
        // System memory only: a compressed frame is decoded on the CPU either way, so a
        // dma-buf of one is mapped, never imported.
        caps.make_mut().append_structure(jpeg_structure(framerate));
    }
    caps
}

/// Whether `backend` converts Motion-JPEG frames.
pub(crate) fn takes_jpeg(backend: Backend) -> bool {
    backend.source_formats().contains(&PixelFormat::Mjpeg)
}

/// What the sink takes, in words, for messages.
pub(crate) fn sink_description(backend: Backend) -> String {
    let bayer = bayer_source_formats(backend);
    let mut text = format!(
        "video/x-raw and video/x-raw(memory:DMABuf) in {}",
        names(&source_formats(backend))
    );
    if !bayer.is_empty() {
        text += &format!(", {BAYER} in {}", bayer.join(", "));
    }
    if takes_jpeg(backend) {
        text += &format!(", {JPEG} (baseline and progressive, any sampling)");
    }
    format!("{text} (backend {backend})")
}

/// The formats every backend writes (u8 video, or the layout of a tensor).
pub(crate) fn destination_formats() -> Vec<VideoFormat> {
    video_formats(Backend::Auto.destination_formats())
}

/// A comma-separated list of GStreamer format names, for messages.
pub(crate) fn names(formats: &[VideoFormat]) -> String {
    formats
        .iter()
        .map(|f| f.to_str().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// NNStreamer's name of a tensor element type.
pub(crate) fn tensor_type(d: DType) -> Option<&'static str> {
    Some(match d {
        DType::U8 => "uint8",
        DType::I8 => "int8",
        DType::F16 => "float16",
        DType::F32 => "float32",
        _ => return None,
    })
}

/// The element type of an NNStreamer tensor type name.
pub(crate) fn tensor_dtype(name: &str) -> Option<DType> {
    TENSOR_DTYPES
        .iter()
        .copied()
        .find(|&d| tensor_type(d) == Some(name))
}

/// The tensor element types pinframe writes, in the order fixation prefers them.
pub(crate) const TENSOR_DTYPES: [DType; 4] = [DType::F32, DType::F16, DType::I8, DType::U8];

/// `[1, MAX_DIMENSION]`, the sizes pinframe accepts.
fn size_range() -> gst::IntRange<i32> {
    gst::IntRange::new(1, MAX_DIMENSION as i32)
}

fn format_list(formats: &[VideoFormat]) -> gst::List {
    gst::List::new(formats.iter().map(|f| f.to_str().to_send_value()))
}

/// A `video/x-raw` structure in `formats`, any size; `framerate` copied when given.
pub(crate) fn video_structure(
    formats: &[VideoFormat],
    framerate: Option<&glib::SendValue>,
) -> gst::Structure {
    let mut s = gst::Structure::builder(VIDEO)
        .field("format", format_list(formats))
        .field("width", size_range())
        .field("height", size_range())
        .build();
    set_framerate(&mut s, framerate);
    s
}

/// An `other/tensors` structure in NNStreamer's static convention, one tensor of one
/// of `dtypes`, any dimensions (fixed by downstream or by fixation).
pub(crate) fn tensor_structure(
    dtypes: &[DType],
    framerate: Option<&glib::SendValue>,
) -> gst::Structure {
    let types: Vec<&str> = dtypes.iter().filter_map(|&d| tensor_type(d)).collect();
    let mut b = gst::Structure::builder(TENSORS)
        .field("format", "static")
        .field("num_tensors", 1i32);
    b = if types.len() == 1 {
        b.field("types", types[0])
    } else {
        b.field("types", gst::List::new(types))
    };
    let mut s = b.build();
    set_framerate(&mut s, framerate);
    s
}

/// A `video/x-bayer` structure in `formats`: even sizes (whole 2x2 tiles).
pub(crate) fn bayer_structure(
    formats: &[&str],
    framerate: Option<&glib::SendValue>,
) -> gst::Structure {
    let even = || gst::IntRange::with_step(2, (MAX_DIMENSION & !1) as i32, 2);
    let mut s = gst::Structure::builder(BAYER)
        .field(
            "format",
            gst::List::new(formats.iter().map(|f| f.to_send_value())),
        )
        .field("width", even())
        .field("height", even())
        .build();
    set_framerate(&mut s, framerate);
    s
}

/// An `image/jpeg` structure, any size.
pub(crate) fn jpeg_structure(framerate: Option<&glib::SendValue>) -> gst::Structure {
    let mut s = gst::Structure::builder(JPEG)
        .field("width", size_range())
        .field("height", size_range())
        .build();
    set_framerate(&mut s, framerate);
    s
}

fn set_framerate(s: &mut gst::Structure, framerate: Option<&glib::SendValue>) {
    match framerate {
        Some(v) => s.set_value("framerate", v.clone()),
        None => s.set(
            "framerate",
            gst::FractionRange::new(gst::Fraction::new(0, 1), gst::Fraction::new(i32::MAX, 1)),
        ),
    }
}

/// The sink template: every source format of the CPU backend (the widest), in system
/// memory and as dma-bufs.
pub(crate) fn sink_template_caps() -> gst::Caps {
    sink_caps(Backend::Cpu, None)
}

/// The source template: u8 video in the destination formats (system memory and
/// dma-bufs), and NNStreamer static tensors.
pub(crate) fn src_template_caps() -> gst::Caps {
    let mut caps = with_dmabuf(video_structure(&destination_formats(), None), true);
    caps.make_mut()
        .append_structure(tensor_structure(&TENSOR_DTYPES, None));
    caps
}

/// `s` in system memory, then (when `dmabuf`) the same with `memory:DMABuf`.
pub(crate) fn with_dmabuf(s: gst::Structure, dmabuf: bool) -> gst::Caps {
    let mut caps = gst::Caps::new_empty();
    {
        let c = caps.get_mut().expect("a new caps is writable");
        if dmabuf {
            c.append_structure_full(s.clone(), None);
            c.append_structure_full(
                s,
                Some(gst::CapsFeatures::new([
                    gst_allocators::CAPS_FEATURE_MEMORY_DMABUF,
                ])),
            );
        } else {
            c.append_structure(s);
        }
    }
    caps
}

/// True when a caps structure's features say `memory:DMABuf`.
pub(crate) fn is_dmabuf_features(features: &gst::CapsFeaturesRef) -> bool {
    features.contains(gst_allocators::CAPS_FEATURE_MEMORY_DMABUF)
}

/// The colorimetry GStreamer reports, when pinframe has the matrix and the range.
pub(crate) fn colorimetry(info: &gst_video::VideoInfo) -> Option<Colorimetry> {
    let c = info.colorimetry();
    let matrix = match c.matrix() {
        VideoColorMatrix::Bt601 => Matrix::Bt601,
        VideoColorMatrix::Bt709 => Matrix::Bt709,
        VideoColorMatrix::Bt2020 => Matrix::Bt2020,
        _ => return None,
    };
    let range = match c.range() {
        VideoColorRange::Range0_255 => Range::Full,
        VideoColorRange::Range16_235 => Range::Limited,
        _ => return None,
    };
    Some(Colorimetry::new(matrix, range))
}

/// The negotiated input.
#[derive(Clone, Debug)]
pub(crate) struct InputSpec {
    /// The caps as GStreamer reads them (default strides and offsets); `None` for
    /// `video/x-bayer`, which GStreamer's video library does not describe.
    pub(crate) info: Option<gst_video::VideoInfo>,
    /// pinframe's name of the format.
    pub(crate) format: PixelFormat,
    pub(crate) width: u32,
    pub(crate) height: u32,
    /// Plane offsets and strides of a buffer without `GstVideoMeta`.
    pub(crate) offsets: [usize; 3],
    pub(crate) strides: [usize; 3],
    /// Bytes of one such buffer.
    pub(crate) size: usize,
    /// From the caps, when pinframe knows the matrix and range.
    pub(crate) colorimetry: Option<Colorimetry>,
}

impl InputSpec {
    /// Reads input caps; an error names what pinframeconvert takes.
    pub(crate) fn from_caps(caps: &gst::CapsRef, backend: Backend) -> Result<InputSpec, String> {
        let supported = || format!("pinframeconvert takes {}", sink_description(backend));
        if caps.is_empty() {
            return Err(format!("empty input caps; {}", supported()));
        }
        if let Some(s) = caps.structure(0)
            && s.name() == BAYER
        {
            return Self::bayer(s, backend).map_err(|e| format!("{e}; {}", supported()));
        }
        if let Some(s) = caps.structure(0)
            && s.name() == JPEG
        {
            return Self::jpeg(s, backend).map_err(|e| format!("{e}; {}", supported()));
        }
        let info = gst_video::VideoInfo::from_caps(caps)
            .map_err(|_| format!("input caps {caps} are not raw video; {}", supported()))?;
        let format = pixel_format(info.format())
            .filter(|f| backend.source_formats().contains(f))
            .ok_or_else(|| {
                format!(
                    "cannot convert from {}; {}",
                    info.format().to_str(),
                    supported()
                )
            })?;
        let mut offsets = [0usize; 3];
        let mut strides = [0usize; 3];
        for i in 0..format.plane_count() {
            offsets[i] = info.offset()[i];
            strides[i] = usize::try_from(info.stride()[i])
                .map_err(|_| format!("plane {i} of {caps} has a negative stride"))?;
        }
        Ok(InputSpec {
            colorimetry: colorimetry(&info),
            format,
            width: info.width(),
            height: info.height(),
            offsets,
            strides,
            size: info.size(),
            info: Some(info),
        })
    }

    /// `video/x-bayer`: rows of `GST_ROUND_UP_4(width)` bytes, GStreamer's bayer2rgb and
    /// rgb2bayer stride (a `GstVideoMeta` on a buffer overrides it).
    fn bayer(s: &gst::StructureRef, backend: Backend) -> Result<InputSpec, String> {
        let name = s
            .get::<&str>("format")
            .map_err(|_| format!("{BAYER} caps without a fixed format"))?;
        let format = bayer_pixel_format(name)
            .filter(|f| backend.source_formats().contains(f))
            .ok_or_else(|| format!("cannot convert from {BAYER} format {name}"))?;
        let dimension = |field: &str| -> Result<u32, String> {
            s.get::<i32>(field)
                .ok()
                .and_then(|v| u32::try_from(v).ok())
                .filter(|&v| v > 0)
                .ok_or_else(|| format!("{BAYER} caps without a fixed positive {field}"))
        };
        let (width, height) = (dimension("width")?, dimension("height")?);
        let stride = (width as usize).next_multiple_of(4);
        Ok(InputSpec {
            info: None,
            format,
            width,
            height,
            offsets: [0; 3],
            strides: [stride, 0, 0],
            size: stride * height as usize,
            colorimetry: None,
        })
    }

    /// `image/jpeg`: one compressed frame per buffer, its length the buffer's size (known
    /// per buffer: `size` and the stride are the largest frame pinframe expects at this
    /// size), JFIF's colorimetry (BT.601, full range), which every Motion-JPEG frame has.
    fn jpeg(s: &gst::StructureRef, backend: Backend) -> Result<InputSpec, String> {
        if !takes_jpeg(backend) {
            return Err(format!("backend {backend} does not decode {JPEG}"));
        }
        let dimension = |field: &str| -> Result<u32, String> {
            s.get::<i32>(field)
                .ok()
                .and_then(|v| u32::try_from(v).ok())
                .filter(|&v| v > 0 && v <= MAX_DIMENSION)
                .ok_or_else(|| {
                    format!("{JPEG} caps without a fixed {field} in 1..={MAX_DIMENSION}")
                })
        };
        let (width, height) = (dimension("width")?, dimension("height")?);
        let size = pinframe::image::compressed_capacity(width, height);
        Ok(InputSpec {
            info: None,
            format: PixelFormat::Mjpeg,
            width,
            height,
            offsets: [0; 3],
            strides: [size, 0, 0],
            size,
            colorimetry: Some(pinframe::jpeg::JFIF_COLORIMETRY),
        })
    }

    /// The layout of one compressed frame of `len` bytes (a buffer's size).
    pub(crate) fn compressed_layout(&self, len: usize) -> Result<ImageLayout, String> {
        ImageLayout::with_stride(self.width, self.height, self.format, DType::U8, len)
            .map(|l| l.with_colorimetry(self.colorimetry))
            .map_err(|e| format!("a {} frame of {len} bytes: {e}", self.format))
    }

    /// The layout of a buffer whose planes sit at the caps' default offsets and strides
    /// in one buffer (what a buffer without `GstVideoMeta` holds).
    /// A compressed format's: one frame of the largest size expected.
    pub(crate) fn default_layout(&self) -> Result<ImageLayout, String> {
        if self.format.is_compressed() {
            return self.compressed_layout(self.size);
        }
        let planes: Vec<Plane> = (0..self.format.plane_count())
            .map(|i| Plane::new(self.offsets[i], self.strides[i]))
            .collect();
        ImageLayout::with_planes(self.width, self.height, self.format, DType::U8, &planes)
            .map(|l| l.with_colorimetry(self.colorimetry))
            .map_err(|e| e.to_string())
    }
}

/// How the output travels.
#[derive(Clone, Debug)]
pub(crate) enum OutputKind {
    /// Raw u8 video; `dmabuf`: negotiated with `memory:DMABuf`.
    Video {
        /// Negotiated with `memory:DMABuf`.
        dmabuf: bool,
    },
    /// One NNStreamer static tensor, tightly packed.
    Tensor,
}

/// The negotiated output: what the pool allocates and the converter writes.
#[derive(Clone, Debug)]
pub(crate) struct OutputSpec {
    pub(crate) kind: OutputKind,
    /// Format, size, element type, planes (GStreamer's strides for video, tight for
    /// tensors) of one image: of each slice of a batch.
    pub(crate) layout: ImageLayout,
    /// Images in each output buffer (NNStreamer's outermost dimension; 1 for video).
    pub(crate) batch: usize,
    /// Bytes of one output buffer (every slice of a batch).
    pub(crate) size: usize,
}

impl OutputSpec {
    /// Reads output caps. `layout` and `dtype` are the element's properties (`None` =
    /// from the caps); `batch` the images each output buffer holds (the `batch-size`
    /// property in a batch mode, else 1), which tensor caps must carry as their
    /// outermost dimension.
    pub(crate) fn from_caps(
        caps: &gst::CapsRef,
        layout: Option<PixelFormat>,
        dtype: Option<DType>,
        batch: usize,
    ) -> Result<OutputSpec, String> {
        let s = caps
            .structure(0)
            .ok_or_else(|| "empty output caps".to_string())?;
        let features = caps.features(0);
        if s.name() == TENSORS {
            return Self::tensor(s, layout, dtype, batch);
        }
        if batch > 1 {
            return Err(format!(
                "a batch of {batch} images needs {TENSORS} output (NNStreamer dimensions C:W:H:{batch} \
                 or W:H:3:{batch}); {} carries one image",
                s.name()
            ));
        }
        let info = gst_video::VideoInfo::from_caps(caps)
            .map_err(|_| format!("output caps {caps} are neither raw video nor {TENSORS}"))?;
        let format = pixel_format(info.format())
            .filter(|f| Backend::Auto.destination_formats().contains(f))
            .ok_or_else(|| {
                format!(
                    "cannot write {}; video output is one of {} (u8), tensors are {TENSORS}",
                    info.format().to_str(),
                    names(&destination_formats())
                )
            })?;
        if let Some(l) = layout
            && l != format
        {
            return Err(format!(
                "the layout property asks for {l} but the output caps say {}",
                info.format().to_str()
            ));
        }
        if let Some(d) = dtype
            && d != DType::U8
        {
            return Err(format!(
                "dtype {d} needs tensor output ({TENSORS}); video/x-raw carries u8 only"
            ));
        }
        let planes: Vec<Plane> = (0..format.plane_count())
            .map(|i| Plane::new(info.offset()[i], info.stride()[i] as usize))
            .collect();
        let image =
            ImageLayout::with_planes(info.width(), info.height(), format, DType::U8, &planes)
                .map_err(|e| e.to_string())?;
        Ok(OutputSpec {
            size: info.size(),
            batch: 1,
            kind: OutputKind::Video {
                dmabuf: features.is_some_and(is_dmabuf_features),
            },
            layout: image,
        })
    }

    fn tensor(
        s: &gst::StructureRef,
        layout: Option<PixelFormat>,
        dtype: Option<DType>,
        batch: usize,
    ) -> Result<OutputSpec, String> {
        if let Ok(n) = s.get::<i32>("num_tensors")
            && n != 1
        {
            return Err(format!(
                "pinframeconvert writes one tensor, the caps ask for {n}"
            ));
        }
        if let Ok(f) = s.get::<&str>("format")
            && f != "static"
        {
            return Err(format!(
                "tensor format {f:?}: pinframeconvert writes static tensors"
            ));
        }
        let types = s
            .get::<&str>("types")
            .map_err(|_| "tensor caps without a fixed types field".to_string())?;
        let caps_dtype = tensor_dtype(types).ok_or_else(|| {
            format!(
                "tensor type {types:?}: pinframeconvert writes {}",
                TENSOR_DTYPES
                    .map(|d| tensor_type(d).unwrap_or(""))
                    .join(", ")
            )
        })?;
        if let Some(d) = dtype
            && d != caps_dtype
        {
            return Err(format!(
                "the dtype property asks for {d} but the caps say {types}"
            ));
        }
        let dimensions = s
            .get::<&str>("dimensions")
            .map_err(|_| "tensor caps without a fixed dimensions field".to_string())?;
        let dims = parse_dimensions(dimensions)?;
        let caps_batch = batch_of_dimensions(&dims)?;
        if caps_batch as usize != batch {
            return Err(if batch == 1 {
                format!(
                    "tensor dimensions {dimensions} hold a batch of {caps_batch}: set batch-size={caps_batch} \
                     (with rois=true for regions of one frame, else for consecutive frames)"
                )
            } else {
                format!(
                    "tensor dimensions {dimensions} hold a batch of {caps_batch} but batch-size is {batch} \
                     (the outermost dimension is the batch)"
                )
            });
        }
        let (format, width, height) = image_of_dimensions(&dims, layout)?;
        let image =
            ImageLayout::tight(width, height, format, caps_dtype).map_err(|e| e.to_string())?;
        let size = image
            .required_len(0)
            .checked_mul(batch)
            .filter(|&n| n <= isize::MAX as usize)
            .ok_or_else(|| format!("a batch of {batch} tensors of {dimensions} overflows"))?;
        Ok(OutputSpec {
            kind: OutputKind::Tensor,
            layout: image,
            batch,
            size,
        })
    }
}

/// Parses NNStreamer's `d0:d1:...` (innermost first; missing outer dimensions are 1).
pub(crate) fn parse_dimensions(s: &str) -> Result<Vec<u32>, String> {
    let dims: Vec<u32> = s
        .split(':')
        .map(|d| d.trim().parse::<u32>())
        .collect::<Result<_, _>>()
        .map_err(|_| format!("tensor dimensions {s:?} are not d0:d1:... numbers"))?;
    if dims.is_empty() || dims.contains(&0) {
        return Err(format!("tensor dimensions {s:?} are empty or zero"));
    }
    Ok(dims)
}

fn dimensions_text(dims: &[u32]) -> String {
    dims.iter()
        .map(|d| d.to_string())
        .collect::<Vec<_>>()
        .join(":")
}

/// The batch of a tensor of `dims`: its fourth dimension (`C:W:H:N`, `W:H:3:N`; 1 when
/// absent); every dimension beyond it must be 1.
pub(crate) fn batch_of_dimensions(dims: &[u32]) -> Result<u32, String> {
    if dims.len() > 4 && dims[4..].iter().any(|&d| d != 1) {
        return Err(format!(
            "tensor dimensions {}: pinframeconvert writes images (C:W:H or W:H:3) and a batch \
             (the fourth dimension); every dimension beyond must be 1",
            dimensions_text(dims)
        ));
    }
    Ok(dims.get(3).copied().unwrap_or(1))
}

/// The image a tensor of `dims` holds: channels innermost (`C:W:H`, C = 1, 3 or 4) is a
/// packed image (grey, RGB, RGBA), `W:H:3` a planar one; the dimensions beyond are the
/// batch ([`batch_of_dimensions`]). `layout` (the property) picks the channel order, and
/// which of the two readings when both fit.
pub(crate) fn image_of_dimensions(
    dims: &[u32],
    layout: Option<PixelFormat>,
) -> Result<(PixelFormat, u32, u32), String> {
    let at = |i: usize| dims.get(i).copied().unwrap_or(1);
    let text = dimensions_text(dims);
    let packed = |c: u32| match c {
        1 => Some(PixelFormat::Grey),
        3 => Some(PixelFormat::Rgb),
        4 => Some(PixelFormat::Rgba),
        _ => None,
    };
    let fmt = match layout {
        Some(l) => {
            let channels = l.channels() as u32;
            let planar = l.plane_count() == 3;
            let ok = if planar {
                at(2) == 3
            } else {
                at(0) == channels
            };
            if !ok {
                return Err(format!(
                    "tensor dimensions {text} do not hold a {l} image (expected {})",
                    if planar {
                        "W:H:3".to_string()
                    } else {
                        format!("{channels}:W:H")
                    }
                ));
            }
            l
        }
        None => match (packed(at(0)), at(2)) {
            (Some(f), _) => f,
            (None, 3) => PixelFormat::PlanarRgb,
            _ => {
                return Err(format!(
                    "tensor dimensions {text} are neither C:W:H (C = 1, 3, 4) nor W:H:3"
                ));
            }
        },
    };
    let (w, h) = if fmt.plane_count() == 3 {
        (at(0), at(1))
    } else {
        (at(1), at(2))
    };
    Ok((fmt, w, h))
}

/// NNStreamer's dimensions of a batch of `batch` image tensors of `format`, `width` x
/// `height` (innermost first, the batch outermost).
pub(crate) fn dimensions_of_image(
    format: PixelFormat,
    width: u32,
    height: u32,
    batch: usize,
) -> String {
    if format.plane_count() == 3 && !format.is_yuv() {
        format!("{width}:{height}:3:{batch}")
    } else {
        format!("{}:{width}:{height}:{batch}", format.channels())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_library_format_has_a_gstreamer_name_both_ways() {
        // Those GStreamer 1.22 has no name for (video/x-bayer is 8 bits a sample there).
        let nameless = |f: PixelFormat| {
            matches!(f, PixelFormat::Y10 | PixelFormat::Y12)
                || (f.cfa().is_some() && f.storage().bits() > 8)
        };
        for f in PixelFormat::ALL {
            match (video_format(f), bayer_format(f)) {
                (Some(v), None) => assert_eq!(pixel_format(v), Some(f)),
                (None, Some(b)) => assert_eq!(bayer_pixel_format(b), Some(f)),
                (None, None) => assert!(nameless(f), "{f} has no GStreamer name"),
                (Some(_), Some(_)) => panic!("{f} has two GStreamer names"),
            }
        }
        assert_eq!(video_format(PixelFormat::Y16), Some(VideoFormat::Gray16Le));
        assert_eq!(video_format(PixelFormat::P010), Some(VideoFormat::P01010le));
        assert_eq!(bayer_format(PixelFormat::Grbg8), Some("grbg"));
        assert_eq!(bayer_pixel_format("rggb10le"), None);
        assert_eq!(pixel_format(VideoFormat::Y444), Some(PixelFormat::I444));
        assert_eq!(pixel_format(VideoFormat::Y41b), None);
    }

    #[test]
    fn jpeg_caps_read_as_an_input_with_jfif_colorimetry() {
        gst::init().unwrap();
        let caps = gst::Caps::builder(JPEG)
            .field("width", 1280i32)
            .field("height", 720i32)
            .field("framerate", gst::Fraction::new(30, 1))
            .build();
        for backend in [Backend::Cpu, Backend::Gl] {
            let i = InputSpec::from_caps(&caps, backend).unwrap();
            assert_eq!(
                (i.format, i.width, i.height),
                (PixelFormat::Mjpeg, 1280, 720)
            );
            assert_eq!(i.colorimetry, Some(pinframe::jpeg::JFIF_COLORIMETRY));
            // A frame's length is its buffer's size.
            let l = i.compressed_layout(51_234).unwrap();
            assert_eq!(l.planes()[0].stride, 51_234);
            assert_eq!(
                i.default_layout().unwrap().planes()[0].stride,
                pinframe::image::compressed_capacity(1280, 720)
            );
        }
        assert!(sink_caps(Backend::Cpu, None).can_intersect(&caps));
        let unfixed = gst::Caps::builder(JPEG).field("width", 64i32).build();
        let e = InputSpec::from_caps(&unfixed, Backend::Cpu).unwrap_err();
        assert!(e.contains("image/jpeg caps without a fixed height"), "{e}");
    }

    #[test]
    fn bayer_caps_read_as_an_input() {
        gst::init().unwrap();
        let caps = gst::Caps::builder(BAYER)
            .field("format", "gbrg")
            .field("width", 34i32)
            .field("height", 6i32)
            .build();
        let i = InputSpec::from_caps(&caps, Backend::Cpu).unwrap();
        assert_eq!((i.format, i.width, i.height), (PixelFormat::Gbrg8, 34, 6));
        assert_eq!((i.strides[0], i.size), (36, 36 * 6));
        let l = i.default_layout().unwrap();
        assert_eq!(l.planes()[0].stride, 36);
        let caps = gst::Caps::builder(BAYER)
            .field("format", "rggb16le")
            .field("width", 4i32)
            .field("height", 4i32)
            .build();
        let e = InputSpec::from_caps(&caps, Backend::Cpu).unwrap_err();
        assert!(
            e.contains("format rggb16le") && e.contains("video/x-bayer in rggb"),
            "{e}"
        );
    }

    #[test]
    fn tensor_dimensions_read_as_images() {
        let d = parse_dimensions("3:640:480:1").unwrap();
        assert_eq!(
            image_of_dimensions(&d, None).unwrap(),
            (PixelFormat::Rgb, 640, 480)
        );
        let d = parse_dimensions("640:480:3").unwrap();
        assert_eq!(
            image_of_dimensions(&d, None).unwrap(),
            (PixelFormat::PlanarRgb, 640, 480)
        );
        assert_eq!(
            image_of_dimensions(&d, Some(PixelFormat::PlanarBgr)).unwrap(),
            (PixelFormat::PlanarBgr, 640, 480)
        );
        let d = parse_dimensions("1:32:16:1:1").unwrap();
        assert_eq!(
            image_of_dimensions(&d, None).unwrap(),
            (PixelFormat::Grey, 32, 16)
        );
        // The fourth dimension is the batch, beyond it only 1s.
        let d = parse_dimensions("3:8:8:2").unwrap();
        assert_eq!(batch_of_dimensions(&d).unwrap(), 2);
        assert_eq!(
            batch_of_dimensions(&parse_dimensions("8:8:3").unwrap()).unwrap(),
            1
        );
        let e = batch_of_dimensions(&parse_dimensions("3:8:8:2:2").unwrap()).unwrap_err();
        assert!(e.contains("beyond must be 1"), "{e}");
        let e = image_of_dimensions(&parse_dimensions("5:8:8").unwrap(), None).unwrap_err();
        assert!(e.contains("neither"), "{e}");
        let e = image_of_dimensions(&parse_dimensions("3:8:8").unwrap(), Some(PixelFormat::Rgba))
            .unwrap_err();
        assert!(e.contains("4:W:H"), "{e}");
        assert!(parse_dimensions("3:x:8").is_err());
        assert!(parse_dimensions("3:0:8").is_err());
    }

    #[test]
    fn dimensions_round_trip() {
        for f in Backend::Auto.destination_formats() {
            for batch in [1, 4] {
                let s = dimensions_of_image(*f, 33, 17, batch);
                let dims = parse_dimensions(&s).unwrap();
                let (g, w, h) = image_of_dimensions(&dims, Some(*f)).unwrap();
                assert_eq!((g, w, h), (*f, 33, 17), "{s}");
                assert_eq!(batch_of_dimensions(&dims).unwrap() as usize, batch, "{s}");
            }
        }
    }

    #[test]
    fn tensor_caps_carry_the_batch() {
        gst::init().unwrap();
        let caps = |dims: &str| {
            gst::Caps::builder(TENSORS)
                .field("format", "static")
                .field("num_tensors", 1i32)
                .field("types", "float32")
                .field("dimensions", dims)
                .build()
        };
        let o = OutputSpec::from_caps(&caps("224:224:3:4"), None, None, 4).unwrap();
        assert_eq!(o.batch, 4);
        assert_eq!(o.size, 4 * 3 * 224 * 224 * 4);
        assert_eq!(o.layout.format(), PixelFormat::PlanarRgb);
        let e = OutputSpec::from_caps(&caps("224:224:3:4"), None, None, 1).unwrap_err();
        assert!(e.contains("set batch-size=4"), "{e}");
        let e = OutputSpec::from_caps(&caps("3:64:64:1"), None, None, 8).unwrap_err();
        assert!(e.contains("batch-size is 8"), "{e}");
        let video = gst::Caps::builder(VIDEO)
            .field("format", "RGB")
            .field("width", 8i32)
            .field("height", 8i32)
            .build();
        let e = OutputSpec::from_caps(&video, None, None, 2).unwrap_err();
        assert!(e.contains("needs other/tensors"), "{e}");
    }

    #[test]
    fn tensor_types_use_nnstreamer_names() {
        for d in TENSOR_DTYPES {
            assert_eq!(tensor_dtype(tensor_type(d).unwrap()), Some(d));
        }
        assert_eq!(tensor_dtype("float64"), None);
    }
}
