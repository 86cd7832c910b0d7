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
        PixelFormat::Grey => VideoFormat::Gray8,
        PixelFormat::Rgb => VideoFormat::Rgb,
        PixelFormat::Bgr => VideoFormat::Bgr,
        PixelFormat::Rgba => VideoFormat::Rgba,
        PixelFormat::Bgra => VideoFormat::Bgra,
        PixelFormat::PlanarRgb => VideoFormat::Rgbp,
        PixelFormat::PlanarBgr => VideoFormat::Bgrp,
        // A format the library learns later is offered once it is mapped here.
        _ => return None,
    })
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
    let formats = source_formats(Backend::Cpu);
    with_dmabuf(video_structure(&formats, None), true)
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
    /// The caps as GStreamer reads them (default strides and offsets).
    pub(crate) info: gst_video::VideoInfo,
    /// pinframe's name of the format.
    pub(crate) format: PixelFormat,
    /// From the caps, when pinframe knows the matrix and range.
    pub(crate) colorimetry: Option<Colorimetry>,
}

impl InputSpec {
    /// Reads input caps; an error names what pinframeconvert takes.
    pub(crate) fn from_caps(caps: &gst::CapsRef, backend: Backend) -> Result<InputSpec, String> {
        let supported = || {
            format!(
                "pinframeconvert takes video/x-raw and video/x-raw(memory:DMABuf) in {} (backend {backend})",
                names(&source_formats(backend))
            )
        };
        if caps.is_empty() {
            return Err(format!("empty input caps; {}", supported()));
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
        Ok(InputSpec {
            colorimetry: colorimetry(&info),
            format,
            info,
        })
    }

    /// The layout of a buffer whose planes sit at GStreamer's default offsets and strides
    /// in one buffer (what a buffer without `GstVideoMeta` holds).
    pub(crate) fn default_layout(&self) -> Result<ImageLayout, String> {
        let planes: Vec<Plane> = (0..self.format.plane_count())
            .map(|i| Plane::new(self.info.offset()[i], self.info.stride()[i] as usize))
            .collect();
        ImageLayout::with_planes(
            self.info.width(),
            self.info.height(),
            self.format,
            DType::U8,
            &planes,
        )
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
    /// Format, size, element type, planes (GStreamer's strides for video, tight for tensors).
    pub(crate) layout: ImageLayout,
    /// Bytes of one output buffer.
    pub(crate) size: usize,
}

impl OutputSpec {
    /// Reads output caps. `layout` and `dtype` are the element's properties (`None` =
    /// from the caps).
    pub(crate) fn from_caps(
        caps: &gst::CapsRef,
        layout: Option<PixelFormat>,
        dtype: Option<DType>,
    ) -> Result<OutputSpec, String> {
        let s = caps
            .structure(0)
            .ok_or_else(|| "empty output caps".to_string())?;
        let features = caps.features(0);
        if s.name() == TENSORS {
            return Self::tensor(s, layout, dtype);
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
        let (format, width, height) = image_of_dimensions(&dims, layout)?;
        let image =
            ImageLayout::tight(width, height, format, caps_dtype).map_err(|e| e.to_string())?;
        let size = image.required_len(0);
        Ok(OutputSpec {
            kind: OutputKind::Tensor,
            layout: image,
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

/// The image a tensor of `dims` holds: channels innermost (`C:W:H`, C = 1, 3 or 4) is a
/// packed image (grey, RGB, RGBA), `W:H:3` a planar one; every outer dimension (the
/// batch) must be 1. `layout` (the property) picks the channel order, and which of the
/// two readings when both fit.
pub(crate) fn image_of_dimensions(
    dims: &[u32],
    layout: Option<PixelFormat>,
) -> Result<(PixelFormat, u32, u32), String> {
    let at = |i: usize| dims.get(i).copied().unwrap_or(1);
    let text = dims
        .iter()
        .map(|d| d.to_string())
        .collect::<Vec<_>>()
        .join(":");
    if dims.len() > 3 && dims[3..].iter().any(|&d| d != 1) {
        return Err(format!(
            "tensor dimensions {text}: pinframeconvert writes one image (batch 1)"
        ));
    }
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

/// NNStreamer's dimensions of an image tensor of `format`, `width` x `height`, batch 1.
pub(crate) fn dimensions_of_image(format: PixelFormat, width: u32, height: u32) -> String {
    if format.plane_count() == 3 && !format.is_yuv() {
        format!("{width}:{height}:3:1")
    } else {
        format!("{}:{width}:{height}:1", format.channels())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_library_format_has_a_gstreamer_name_both_ways() {
        for f in PixelFormat::ALL {
            let v = video_format(f).unwrap_or_else(|| panic!("{f} has no GStreamer name"));
            assert_eq!(pixel_format(v), Some(f));
        }
        assert_eq!(pixel_format(VideoFormat::Y444), None);
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
        let e = image_of_dimensions(&parse_dimensions("3:8:8:2").unwrap(), None).unwrap_err();
        assert!(e.contains("batch 1"), "{e}");
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
            let s = dimensions_of_image(*f, 33, 17);
            let (g, w, h) = image_of_dimensions(&parse_dimensions(&s).unwrap(), Some(*f)).unwrap();
            assert_eq!((g, w, h), (*f, 33, 17), "{s}");
        }
    }

    #[test]
    fn tensor_types_use_nnstreamer_names() {
        for d in TENSOR_DTYPES {
            assert_eq!(tensor_dtype(tensor_type(d).unwrap()), Some(d));
        }
        assert_eq!(tensor_dtype("float64"), None);
    }
}
