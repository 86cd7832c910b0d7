//! Negotiation: the format, the layout that follows from it, colorimetry and frame rate.

use std::os::fd::BorrowedFd;

use v4l::v4l_sys as sys;

use super::caps::{DeviceFormat, supported_list};
use super::ioctl;
use crate::camera::{CameraConfig, CaptureFormat};
use crate::image::{Colorimetry, ImageLayout, Matrix, PixelFormat, Plane, Range, fourcc_to_string};
use crate::{DType, Error, Result};

/// Colorimetry from V4L2's colorspace, Y'CbCr encoding and quantization, with the
/// kernel's rules for the defaults (`V4L2_MAP_YCBCR_ENC_DEFAULT`,
/// `V4L2_MAP_QUANTIZATION_DEFAULT`). `None` for non-YUV formats and unknown matrices.
pub(crate) fn colorimetry(
    format: PixelFormat,
    colorspace: u32,
    ycbcr_enc: u32,
    quantization: u32,
) -> Option<Colorimetry> {
    if format.is_compressed() {
        // A Motion-JPEG frame's samples are JFIF's whatever the driver reports (uvcvideo
        // says sRGB, which would read as limited range).
        return Some(crate::jpeg::JFIF_COLORIMETRY);
    }
    if !format.is_yuv() {
        return None;
    }
    let enc = if ycbcr_enc == sys::v4l2_ycbcr_encoding_V4L2_YCBCR_ENC_DEFAULT {
        match colorspace {
            sys::v4l2_colorspace_V4L2_COLORSPACE_REC709
            | sys::v4l2_colorspace_V4L2_COLORSPACE_DCI_P3 => {
                sys::v4l2_ycbcr_encoding_V4L2_YCBCR_ENC_709
            }
            sys::v4l2_colorspace_V4L2_COLORSPACE_BT2020 => {
                sys::v4l2_ycbcr_encoding_V4L2_YCBCR_ENC_BT2020
            }
            sys::v4l2_colorspace_V4L2_COLORSPACE_SMPTE240M => {
                sys::v4l2_ycbcr_encoding_V4L2_YCBCR_ENC_SMPTE240M
            }
            _ => sys::v4l2_ycbcr_encoding_V4L2_YCBCR_ENC_601,
        }
    } else {
        ycbcr_enc
    };
    let matrix = match enc {
        sys::v4l2_ycbcr_encoding_V4L2_YCBCR_ENC_601
        | sys::v4l2_ycbcr_encoding_V4L2_YCBCR_ENC_XV601
        | sys::v4l2_ycbcr_encoding_V4L2_YCBCR_ENC_SYCC => Matrix::Bt601,
        sys::v4l2_ycbcr_encoding_V4L2_YCBCR_ENC_709
        | sys::v4l2_ycbcr_encoding_V4L2_YCBCR_ENC_XV709 => Matrix::Bt709,
        sys::v4l2_ycbcr_encoding_V4L2_YCBCR_ENC_BT2020 => Matrix::Bt2020,
        other => {
            log::warn!(
                "camera: Y'CbCr encoding {other} has no pinframe matrix; conversions pick one by height"
            );
            return None;
        }
    };
    let range = match quantization {
        sys::v4l2_quantization_V4L2_QUANTIZATION_FULL_RANGE => Range::Full,
        sys::v4l2_quantization_V4L2_QUANTIZATION_LIM_RANGE => Range::Limited,
        _ if colorspace == sys::v4l2_colorspace_V4L2_COLORSPACE_JPEG => Range::Full,
        _ => Range::Limited,
    };
    Some(Colorimetry::new(matrix, range))
}

pub(super) fn negotiate(
    fd: BorrowedFd<'_>,
    buf_type: u32,
    chosen: &DeviceFormat,
    config: &CameraConfig,
    dev: &str,
    formats: &[DeviceFormat],
) -> Result<CaptureFormat> {
    let mplane = buf_type == sys::v4l2_buf_type_V4L2_BUF_TYPE_VIDEO_CAPTURE_MPLANE;
    let pf = chosen
        .format
        .ok_or_else(|| Error::Unsupported("format not convertible".into()))?;
    let mut fmt =
        ioctl::g_fmt(fd, buf_type).map_err(|e| Error::io(format!("VIDIOC_G_FMT on {dev}"), e))?;
    // SAFETY (union access): `fmt.type_` says which member the driver filled; only
    // that member is read or written below.
    if mplane {
        // SAFETY: a multi-planar capture format: `pix_mp` is the active member.
        let pix = unsafe { &mut fmt.fmt.pix_mp };
        if let Some((w, h)) = config.size {
            pix.width = w;
            pix.height = h;
        }
        pix.pixelformat = chosen.fourcc;
        pix.field = sys::v4l2_field_V4L2_FIELD_NONE;
        pix.num_planes = 0;
        pix.plane_fmt = [sys::v4l2_plane_pix_format {
            sizeimage: 0,
            bytesperline: 0,
            reserved: [0; 6],
        }; 8];
    } else {
        // SAFETY: a single-planar capture format: `pix` is the active member.
        let pix = unsafe { &mut fmt.fmt.pix };
        if let Some((w, h)) = config.size {
            pix.width = w;
            pix.height = h;
        }
        pix.pixelformat = chosen.fourcc;
        pix.field = sys::v4l2_field_V4L2_FIELD_NONE;
        pix.bytesperline = 0;
        pix.sizeimage = 0;
    }
    let request = fmt;
    ioctl::s_fmt(fd, &mut fmt).map_err(|e| Error::io(format!("VIDIOC_S_FMT on {dev}"), e))?;
    // Drivers that crop and compose (vivid, scalers) keep the rectangles of an earlier
    // format: a smaller compose leaves the rest of the frame unwritten, a smaller crop
    // shows part of the picture. Reset both for the size the driver chose (it may still
    // shrink the crop to what its scaler can do), then set the format again: changing
    // the rectangles may have changed it. Drivers without the selection API say so.
    // SAFETY: `type_` says which member is active; both start with width and height.
    let (w, h) = if mplane {
        // SAFETY: a multi-planar capture format: `pix_mp` is the active member.
        let p = unsafe { &fmt.fmt.pix_mp };
        (p.width, p.height)
    } else {
        // SAFETY: a single-planar capture format: `pix` is the active member.
        let p = unsafe { &fmt.fmt.pix };
        (p.width, p.height)
    };
    if let Err(e) = ioctl::reset_selection(fd, w, h) {
        log::debug!("camera {dev}: crop/compose rectangles not (all) reset: {e}");
    }
    fmt = request;
    ioctl::s_fmt(fd, &mut fmt).map_err(|e| Error::io(format!("VIDIOC_S_FMT on {dev}"), e))?;

    let (width, height, fourcc, field, bpl, sizes, cs) = if mplane {
        // SAFETY: as above, `pix_mp` is the active member.
        let pix = unsafe { &fmt.fmt.pix_mp };
        let n = (pix.num_planes as usize).min(ioctl::MAX_PLANES);
        // SAFETY: `ycbcr_enc` and `hsv_enc` are both u8; either is a valid read.
        let enc = unsafe { pix.__bindgen_anon_1.ycbcr_enc } as u32;
        (
            pix.width,
            pix.height,
            pix.pixelformat,
            pix.field,
            pix.plane_fmt[..n]
                .iter()
                .map(|p| p.bytesperline)
                .collect::<Vec<_>>(),
            pix.plane_fmt[..n]
                .iter()
                .map(|p| p.sizeimage)
                .collect::<Vec<_>>(),
            (pix.colorspace, enc, pix.quantization as u32),
        )
    } else {
        // SAFETY: as above, `pix` is the active member.
        let pix = unsafe { &fmt.fmt.pix };
        // SAFETY: `ycbcr_enc` and `hsv_enc` are both u32; either is a valid read.
        let enc = unsafe { pix.__bindgen_anon_1.ycbcr_enc };
        (
            pix.width,
            pix.height,
            pix.pixelformat,
            pix.field,
            vec![pix.bytesperline],
            vec![pix.sizeimage],
            (pix.colorspace, enc, pix.quantization),
        )
    };
    if fourcc != chosen.fourcc {
        let got = formats
            .iter()
            .find(|f| f.fourcc == fourcc)
            .map(DeviceFormat::describe)
            .unwrap_or_else(|| fourcc_to_string(fourcc));
        return Err(Error::Unsupported(format!(
            "camera {dev} was asked for {} and chose {got} instead; {}",
            chosen.describe(),
            supported_list(formats)
        )));
    }
    // Progressive frames, or both fields interleaved line by line in one full frame (an
    // image like any other, e.g. an analogue TV input). Separate or sequential fields are
    // half images pinframe does not assemble.
    let interlaced = match field {
        sys::v4l2_field_V4L2_FIELD_NONE | sys::v4l2_field_V4L2_FIELD_ANY => false,
        sys::v4l2_field_V4L2_FIELD_INTERLACED
        | sys::v4l2_field_V4L2_FIELD_INTERLACED_TB
        | sys::v4l2_field_V4L2_FIELD_INTERLACED_BT => true,
        other => {
            return Err(Error::Unsupported(format!(
                "camera {dev} delivers separate or sequential fields (v4l2 field {other}); \
                 pinframe needs whole frames (progressive or interleaved fields)"
            )));
        }
    };
    let bad_layout = |why: String| {
        Error::Unsupported(format!(
            "camera {dev} reports a layout pinframe cannot describe for {width}x{height} {}: {why}; {}",
            chosen.describe(),
            supported_list(formats)
        ))
    };
    let colorimetry = colorimetry(pf, cs.0, cs.1, cs.2);
    let layout = if chosen.multi_buffer {
        if bpl.len() != pf.plane_count() {
            return Err(bad_layout(format!(
                "{} buffers per frame for a {}-plane format",
                bpl.len(),
                pf.plane_count()
            )));
        }
        let planes: Vec<Plane> = bpl
            .iter()
            .enumerate()
            .map(|(i, &stride)| Plane {
                buffer: i,
                offset: 0,
                stride: stride as usize,
            })
            .collect();
        ImageLayout::with_planes(width, height, pf, DType::U8, &planes)
    } else {
        if bpl.len() != 1 {
            return Err(bad_layout(format!(
                "{} buffers per frame for a one-buffer format",
                bpl.len()
            )));
        }
        // A compressed format has no rows (bytesperline 0): its one plane is the whole
        // buffer, and each frame's `bytesused` says how much of it a frame fills.
        let stride = if pf.is_compressed() { sizes[0] } else { bpl[0] };
        ImageLayout::with_stride(width, height, pf, DType::U8, stride as usize)
    }
    .map_err(|e| bad_layout(e.to_string()))?
    .with_colorimetry(colorimetry);
    for (b, &size) in sizes.iter().enumerate() {
        if layout.required_len(b) > size as usize {
            return Err(bad_layout(format!(
                "buffer {b} needs {} bytes for bytesperline {} but sizeimage is {size}",
                layout.required_len(b),
                bpl[b]
            )));
        }
    }

    let frame_interval = frame_rate(fd, buf_type, config.fps, dev);
    Ok(CaptureFormat {
        format: pf,
        fourcc,
        width,
        height,
        multi_planar_api: mplane,
        interlaced,
        bytesperline: bpl,
        sizeimage: sizes,
        v4l2_colorimetry: cs,
        colorimetry,
        frame_interval,
        layout,
    })
}

/// Asks for `fps` (when given and the driver can set it) and reports the interval.
fn frame_rate(
    fd: BorrowedFd<'_>,
    buf_type: u32,
    fps: Option<u32>,
    dev: &str,
) -> Option<(u32, u32)> {
    let read = |fd| -> Option<sys::v4l2_streamparm> { ioctl::g_parm(fd, buf_type).ok() };
    let mut parm = read(fd)?;
    // SAFETY: a capture stream parameter: `capture` is the active member.
    let cap = unsafe { parm.parm.capture };
    if let Some(fps) = fps {
        if cap.capability & sys::V4L2_CAP_TIMEPERFRAME != 0 {
            // SAFETY: as above.
            let c = unsafe { &mut parm.parm.capture };
            c.timeperframe = sys::v4l2_fract {
                numerator: 1,
                denominator: fps,
            };
            if let Err(e) = ioctl::s_parm(fd, &mut parm) {
                log::warn!("camera {dev}: cannot set {fps} fps: {e}");
            }
            parm = read(fd)?;
        } else {
            log::warn!("camera {dev}: the driver cannot set the frame rate; keeping its own");
        }
    }
    // SAFETY: as above.
    let t = unsafe { parm.parm.capture }.timeperframe;
    (t.numerator > 0 && t.denominator > 0).then_some((t.numerator, t.denominator))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colorimetry_follows_the_kernel_defaults() {
        let c = |cs, enc, q| colorimetry(PixelFormat::Yuyv, cs, enc, q);
        assert_eq!(
            c(sys::v4l2_colorspace_V4L2_COLORSPACE_SRGB, 0, 0),
            Some(Colorimetry::BT601_LIMITED)
        );
        assert_eq!(
            c(sys::v4l2_colorspace_V4L2_COLORSPACE_REC709, 0, 0),
            Some(Colorimetry::BT709_LIMITED)
        );
        assert_eq!(
            c(sys::v4l2_colorspace_V4L2_COLORSPACE_JPEG, 0, 0),
            Some(Colorimetry::new(Matrix::Bt601, Range::Full))
        );
        assert_eq!(
            c(
                sys::v4l2_colorspace_V4L2_COLORSPACE_BT2020,
                0,
                sys::v4l2_quantization_V4L2_QUANTIZATION_FULL_RANGE
            ),
            Some(Colorimetry::new(Matrix::Bt2020, Range::Full))
        );
        assert_eq!(
            c(
                sys::v4l2_colorspace_V4L2_COLORSPACE_SRGB,
                sys::v4l2_ycbcr_encoding_V4L2_YCBCR_ENC_709,
                sys::v4l2_quantization_V4L2_QUANTIZATION_LIM_RANGE
            ),
            Some(Colorimetry::BT709_LIMITED)
        );
        assert_eq!(
            c(sys::v4l2_colorspace_V4L2_COLORSPACE_SMPTE240M, 0, 0),
            None
        );
        assert_eq!(colorimetry(PixelFormat::Rgb, 8, 0, 0), None);
    }
}
