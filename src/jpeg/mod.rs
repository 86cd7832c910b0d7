//! Motion-JPEG frames: their structure read without decoding ([`parse`]), decoded by
//! libjpeg-turbo into the frame's own YUV planes, optionally at 1/2, 1/4 or 1/8 scale in
//! the DCT domain ([`JpegDecoder`]), and encoded from YUV planes ([`JpegEncoder`], what
//! the synthetic camera and the tests make their frames with).
//!
//! A conversion from `mjpeg` never makes an RGB image: the decoder writes Y, Cb and Cr
//! planes (4:2:2, 4:2:0, 4:4:4 or grey, as the frame has them), and the fused pass reads
//! those planes as it reads an `i422`, `i420`, `i444` or `grey` source.
//!
//! libjpeg-turbo decodes frames without Huffman tables (Motion-JPEG's default tables),
//! restart markers, progressive and arithmetic-coded frames; it ignores bytes after the
//! end-of-image marker. A truncated or corrupt frame is an [`Error::CorruptFrame`]:
//! libjpeg-turbo's warnings ("premature end of data", "corrupt data") fail the decode
//! instead of producing a partly grey image.

mod turbo;

use std::ffi::{c_int, c_ulong};

use turbo::Codec;

use crate::image::{Colorimetry, ImageLayout, Matrix, PixelFormat, Range};
use crate::{DType, Error, Result};

/// JFIF's colorimetry, that of every Motion-JPEG frame: BT.601 matrix, full range.
pub const JFIF_COLORIMETRY: Colorimetry = Colorimetry::new(Matrix::Bt601, Range::Full);

/// The DCT-domain scales the decoder runs at: the output of a block of 8x8 samples is
/// 8x8, 4x4, 2x2 or 1x1 (libjpeg-turbo has SIMD code for each).
pub const DECODE_SCALES: [u32; 4] = [1, 2, 4, 8];

/// How a JPEG frame's chroma is sampled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum JpegSampling {
    /// Chroma at full resolution.
    Yuv444,
    /// Chroma at half width (most USB webcams).
    Yuv422,
    /// Chroma at half width and half height.
    Yuv420,
    /// One component: luma only.
    Grey,
    /// Another sampling (4:4:0, 4:1:1, a chroma component of its own factors): the
    /// luma's horizontal and vertical factors. Refused by the decoder.
    Other {
        /// Horizontal sampling factor of the first component.
        h: u8,
        /// Vertical sampling factor of the first component.
        v: u8,
    },
}

impl JpegSampling {
    /// The planar format the decoder writes a frame of this sampling as.
    pub fn planar_format(self) -> Result<PixelFormat> {
        Ok(match self {
            JpegSampling::Yuv444 => PixelFormat::I444,
            JpegSampling::Yuv422 => PixelFormat::I422,
            JpegSampling::Yuv420 => PixelFormat::I420,
            JpegSampling::Grey => PixelFormat::Grey,
            JpegSampling::Other { h, v } => {
                return Err(Error::Unsupported(format!(
                    "a JPEG frame whose luma is sampled {h}x{v} against its chroma (4:4:0, \
                     4:1:1 or unusual factors) is not supported; pinframe decodes 4:4:4, \
                     4:2:2, 4:2:0 and greyscale frames"
                )));
            }
        })
    }

    fn tj(self) -> c_int {
        match self {
            JpegSampling::Yuv444 => turbo::SAMP_444,
            JpegSampling::Yuv422 => turbo::SAMP_422,
            JpegSampling::Yuv420 => turbo::SAMP_420,
            JpegSampling::Grey => turbo::SAMP_GRAY,
            JpegSampling::Other { .. } => -1,
        }
    }
}

/// What a JPEG frame's markers say, read by [`parse`] without decoding it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct JpegInfo {
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// Components: 1 (grey) or 3 (Y, Cb, Cr).
    pub components: u8,
    /// Chroma sampling.
    pub sampling: JpegSampling,
    /// True for a progressive frame (SOF2).
    pub progressive: bool,
    /// True when the frame carries its own Huffman tables (a DHT segment); Motion-JPEG
    /// frames from webcams often do not, and use the standard tables.
    pub huffman_tables: bool,
    /// MCUs between restart markers (0: none).
    pub restart_interval: u16,
    /// Bytes up to and including the end-of-image marker; what follows is ignored.
    pub len: usize,
}

fn corrupt(why: impl std::fmt::Display) -> Error {
    Error::CorruptFrame(format!("not a whole JPEG frame: {why}"))
}

/// Reads a JPEG frame's markers: its size and sampling, and where it ends (its
/// end-of-image marker). A frame that does not start with a start-of-image marker, whose
/// segments run past its data, that has no frame header before its scan, or whose
/// end-of-image marker is missing (a truncated USB transfer) is an
/// [`Error::CorruptFrame`]; a lossless, hierarchical or 12-bit frame, or one of four
/// components, is [`Error::Unsupported`]. Bytes after the end-of-image marker are
/// allowed (some webcams pad their frames). It reads every byte of the entropy-coded
/// data once (to find the markers) and decodes none of it.
pub fn parse(data: &[u8]) -> Result<JpegInfo> {
    if data.len() < 4 || data[0] != 0xFF || data[1] != 0xD8 {
        return Err(corrupt(format!(
            "the {} bytes do not start with a start-of-image marker (FF D8)",
            data.len()
        )));
    }
    let mut info: Option<JpegInfo> = None;
    let mut huffman_tables = false;
    let mut restart_interval = 0u16;
    let mut scans = 0usize;
    let mut i = 2;
    loop {
        // A marker is FF, any number of FF fill bytes, then its code.
        if i >= data.len() {
            return Err(corrupt(format!(
                "no end-of-image marker (FF D9) in its {} bytes (truncated)",
                data.len()
            )));
        }
        if data[i] != 0xFF {
            return Err(corrupt(format!(
                "byte {i} is {:#04x} where a marker (FF) must start",
                data[i]
            )));
        }
        while i < data.len() && data[i] == 0xFF {
            i += 1;
        }
        let Some(&code) = data.get(i) else {
            continue;
        };
        let marker_at = i - 1;
        i += 1;
        match code {
            0xD9 => {
                let Some(mut info) = info.filter(|_| scans > 0) else {
                    return Err(corrupt(
                        "its end-of-image marker comes before any image data",
                    ));
                };
                info.huffman_tables = huffman_tables;
                info.restart_interval = restart_interval;
                info.len = i;
                return Ok(info);
            }
            0xD8 => {
                return Err(corrupt(format!(
                    "a second start-of-image marker at byte {marker_at}"
                )));
            }
            // Markers without a length: restart markers and TEM.
            0xD0..=0xD7 | 0x01 => continue,
            _ => {}
        }
        let Some(len_bytes) = data.get(i..i + 2) else {
            return Err(corrupt(format!(
                "the segment of marker FF {code:02X} at byte {marker_at} is cut off"
            )));
        };
        let len = usize::from(u16::from_be_bytes([len_bytes[0], len_bytes[1]]));
        if len < 2 || i + len > data.len() {
            return Err(corrupt(format!(
                "the segment of marker FF {code:02X} at byte {marker_at} claims {len} bytes; \
                 {} are left",
                data.len() - i
            )));
        }
        let body = &data[i + 2..i + len];
        i += len;
        match code {
            0xC0 | 0xC1 | 0xC2 | 0xC9 | 0xCA => {
                if info.is_some() {
                    return Err(corrupt("it has two frame headers"));
                }
                info = Some(frame_header(body, code)?);
            }
            0xC3 | 0xC5..=0xC7 | 0xCB | 0xCD..=0xCF => {
                return Err(Error::Unsupported(format!(
                    "JPEG frame type SOF{} (lossless or hierarchical) is not supported; \
                     cameras send baseline or progressive frames",
                    code - 0xC0
                )));
            }
            0xC4 => huffman_tables = true,
            0xDD => {
                if body.len() < 2 {
                    return Err(corrupt("its restart-interval segment is too short"));
                }
                restart_interval = u16::from_be_bytes([body[0], body[1]]);
            }
            0xDA => {
                if info.is_none() {
                    return Err(corrupt("its scan comes before any frame header"));
                }
                scans += 1;
                i = skip_entropy_data(data, i);
            }
            _ => {}
        }
    }
}

/// The index of the next marker after entropy-coded data starting at `from`: an FF that
/// is not a stuffed zero (FF 00), a restart marker (FF D0..D7) or fill. `data.len()` when
/// there is none.
fn skip_entropy_data(data: &[u8], from: usize) -> usize {
    let mut i = from;
    while i < data.len() {
        match data[i..].iter().position(|&b| b == 0xFF) {
            None => return data.len(),
            Some(p) => i += p,
        }
        match data.get(i + 1) {
            Some(0x00) | Some(0xD0..=0xD7) => i += 2,
            // FF FF..: fill before a marker; the marker loop skips it.
            _ => return i,
        }
    }
    data.len()
}

fn frame_header(body: &[u8], code: u8) -> Result<JpegInfo> {
    if body.len() < 6 {
        return Err(corrupt("its frame header is too short"));
    }
    let precision = body[0];
    let height = u32::from(u16::from_be_bytes([body[1], body[2]]));
    let width = u32::from(u16::from_be_bytes([body[3], body[4]]));
    let components = body[5];
    if precision != 8 {
        return Err(Error::Unsupported(format!(
            "{precision}-bit JPEG samples are not supported (cameras send 8-bit frames)"
        )));
    }
    if width == 0 || height == 0 {
        return Err(Error::Unsupported(
            "a JPEG frame whose height comes after its scan (a DNL marker) is not supported".into(),
        ));
    }
    if body.len() < 6 + 3 * usize::from(components) {
        return Err(corrupt(format!(
            "its frame header lists {components} components but holds {} bytes",
            body.len()
        )));
    }
    let factors = |c: usize| {
        let hv = body[6 + 3 * c + 1];
        (hv >> 4, hv & 0x0F)
    };
    let sampling = match components {
        1 => JpegSampling::Grey,
        3 => {
            let (h, v) = factors(0);
            if factors(1) != (1, 1) || factors(2) != (1, 1) {
                JpegSampling::Other { h, v }
            } else {
                match (h, v) {
                    (1, 1) => JpegSampling::Yuv444,
                    (2, 1) => JpegSampling::Yuv422,
                    (2, 2) => JpegSampling::Yuv420,
                    _ => JpegSampling::Other { h, v },
                }
            }
        }
        n => {
            return Err(Error::Unsupported(format!(
                "a JPEG frame of {n} components (CMYK or other) is not supported; pinframe \
                 decodes greyscale and Y'CbCr frames"
            )));
        }
    };
    Ok(JpegInfo {
        width,
        height,
        components,
        sampling,
        progressive: code == 0xC2 || code == 0xCA,
        huffman_tables: false,
        restart_interval: 0,
        len: 0,
    })
}

/// The size of a `width`x`height` frame decoded at 1/`scale` (libjpeg-turbo rounds up).
pub fn scaled_size(width: u32, height: u32, scale: u32) -> (u32, u32) {
    (width.div_ceil(scale), height.div_ceil(scale))
}

/// The layout the decoder writes a frame of `sampling` at 1/`scale` into: the scaled size
/// padded to whole chroma samples (libjpeg-turbo writes whole ones), each row 64-byte
/// aligned, every plane in one buffer, with JFIF's colorimetry.
pub fn decoded_layout(info: &JpegInfo, scale: u32) -> Result<ImageLayout> {
    if !DECODE_SCALES.contains(&scale) {
        return Err(Error::InvalidArgument(format!(
            "JPEG decode scale 1/{scale}: use 1, 2, 4 or 8"
        )));
    }
    let format = info.sampling.planar_format()?;
    let (w, h) = scaled_size(info.width, info.height, scale);
    let (hs, vs) = format.chroma_subsampling();
    let (w, h) = (w.next_multiple_of(hs), h.next_multiple_of(vs));
    Ok(
        ImageLayout::with_row_alignment(w, h, format, DType::U8, 64)?
            .with_colorimetry(Some(JFIF_COLORIMETRY)),
    )
}

/// Decodes JPEG frames into their YUV planes. Owns a libjpeg-turbo decompressor; not
/// `Sync` (one thread at a time), allocation-free per frame.
#[derive(Debug)]
pub struct JpegDecoder {
    codec: Codec,
}

impl JpegDecoder {
    /// A decoder. Fails with [`Error::Unsupported`] when libjpeg-turbo's TurboJPEG
    /// library (`libturbojpeg.so.0`) cannot be loaded.
    pub fn new() -> Result<JpegDecoder> {
        Ok(JpegDecoder {
            codec: Codec::decompressor()?,
        })
    }

    /// Decodes `data` (one frame, as [`parse`] read it into `info`) at 1/`scale` into
    /// `out`, laid out as [`decoded_layout`]`(info, scale)` says (`layout` must be that
    /// layout, or one with the same size and format and larger strides). On an error
    /// `out` may hold part of the frame.
    pub fn decode_planes(
        &mut self,
        data: &[u8],
        info: &JpegInfo,
        scale: u32,
        out: &mut [u8],
        layout: &ImageLayout,
    ) -> Result<()> {
        let want = decoded_layout(info, scale)?;
        let planes = layout.planes();
        if layout.width() != want.width()
            || layout.height() != want.height()
            || layout.format() != want.format()
            || layout.buffer_count() != 1
        {
            return Err(Error::InvalidLayout(format!(
                "a {}x{} frame decoded at 1/{scale} needs a layout like {want:?}, not {layout:?}",
                info.width, info.height
            )));
        }
        layout.validate_buffers(&[out.len()])?;
        let header = self.header(data)?;
        if (header.0, header.1) != (info.width, info.height) || header.2 != info.sampling.tj() {
            return Err(corrupt(
                "libjpeg-turbo reads another size or sampling than its markers say",
            ));
        }
        let base = out.as_mut_ptr();
        let mut ptrs = [std::ptr::null_mut::<u8>(); 3];
        let mut strides = [0 as c_int; 3];
        for (k, p) in planes.iter().enumerate() {
            // In bounds: `validate_buffers` checked every plane's rows against `out`.
            ptrs[k] = base.wrapping_add(p.offset);
            strides[k] = c_int::try_from(p.stride)
                .map_err(|_| Error::InvalidLayout(format!("stride {} is too large", p.stride)))?;
        }
        let (sw, sh) = scaled_size(info.width, info.height, scale);
        let len = c_ulong::try_from(data.len()).unwrap_or(c_ulong::MAX);
        // SAFETY: `data` is readable for `len` bytes; each plane pointer addresses a plane
        // of `layout` inside `out` (checked above), which is as large as libjpeg-turbo
        // writes for an `sw`x`sh` image of this sampling (`decoded_layout` pads the size
        // to whole chroma samples, as libjpeg-turbo pads its planes); the handle is ours.
        let rc = unsafe {
            (self.codec.lib.decompress_to_yuv_planes)(
                self.codec.handle,
                data.as_ptr(),
                len,
                ptrs.as_mut_ptr(),
                sw as c_int,
                strides.as_mut_ptr(),
                sh as c_int,
                turbo::FLAG_STOP_ON_WARNING | turbo::FLAG_LIMIT_SCANS,
            )
        };
        if rc != 0 {
            return Err(Error::CorruptFrame(format!(
                "libjpeg-turbo could not decode the {}x{} frame: {}",
                info.width,
                info.height,
                self.codec.error()
            )));
        }
        Ok(())
    }

    /// Decodes `data` at full size into packed R, G, B bytes (`out` of `width * height *
    /// 3` bytes). pinframe's conversions never call this: it is the full decode that
    /// other pipelines run, kept for comparisons (the benchmark's baseline).
    pub fn decode_rgb(&mut self, data: &[u8], out: &mut [u8]) -> Result<(u32, u32)> {
        let (w, h, _, _) = self.header(data)?;
        let need = w as usize * h as usize * 3;
        if out.len() < need {
            return Err(Error::BufferTooSmall {
                buffer: 0,
                needed: need,
                actual: out.len(),
            });
        }
        let len = c_ulong::try_from(data.len()).unwrap_or(c_ulong::MAX);
        // SAFETY: `out` holds `w * h * 3` bytes, what a `w`x`h` RGB image with a pitch of
        // `w * 3` needs; `data` is readable for `len` bytes; the handle is ours.
        let rc = unsafe {
            (self.codec.lib.decompress2)(
                self.codec.handle,
                data.as_ptr(),
                len,
                out.as_mut_ptr(),
                w as c_int,
                (w * 3) as c_int,
                h as c_int,
                turbo::PF_RGB,
                turbo::FLAG_STOP_ON_WARNING | turbo::FLAG_LIMIT_SCANS,
            )
        };
        if rc != 0 {
            return Err(Error::CorruptFrame(format!(
                "libjpeg-turbo could not decode the frame: {}",
                self.codec.error()
            )));
        }
        Ok((w, h))
    }

    /// (width, height, TJSAMP, TJCS) from libjpeg-turbo's own header reader.
    fn header(&mut self, data: &[u8]) -> Result<(u32, u32, c_int, c_int)> {
        let (mut w, mut h, mut samp, mut cs) = (0, 0, 0, 0);
        let len = c_ulong::try_from(data.len()).unwrap_or(c_ulong::MAX);
        // SAFETY: `data` is readable for `len` bytes; the four outputs are live locals.
        let rc = unsafe {
            (self.codec.lib.decompress_header3)(
                self.codec.handle,
                data.as_ptr(),
                len,
                &mut w,
                &mut h,
                &mut samp,
                &mut cs,
            )
        };
        if rc != 0 {
            return Err(Error::CorruptFrame(format!(
                "libjpeg-turbo could not read the frame's header: {}",
                self.codec.error()
            )));
        }
        if cs != turbo::CS_YCBCR && cs != turbo::CS_GRAY {
            return Err(Error::Unsupported(format!(
                "a JPEG frame in colour space {cs} (RGB, CMYK or YCCK) is not supported; \
                 pinframe decodes Y'CbCr and greyscale frames"
            )));
        }
        Ok((w.max(0) as u32, h.max(0) as u32, samp, cs))
    }
}

/// Encodes YUV planes as baseline JPEG frames (libjpeg-turbo, standard Huffman tables),
/// what the synthetic camera and the tests make Motion-JPEG frames with.
#[derive(Debug)]
pub struct JpegEncoder {
    codec: Codec,
    buf: Vec<u8>,
}

impl JpegEncoder {
    /// An encoder; [`Error::Unsupported`] when libjpeg-turbo cannot be loaded.
    pub fn new() -> Result<JpegEncoder> {
        Ok(JpegEncoder {
            codec: Codec::compressor()?,
            buf: Vec::new(),
        })
    }

    /// Encodes the image `src`, laid out as `layout` (`i444`, `i422`, `i420` or `grey`,
    /// one buffer, full-range BT.601 values as JFIF has them), at `quality` (1..=100).
    /// The frame is valid until the next call.
    pub fn encode(&mut self, src: &[u8], layout: &ImageLayout, quality: u8) -> Result<&[u8]> {
        let sampling = match layout.format() {
            PixelFormat::I444 => JpegSampling::Yuv444,
            PixelFormat::I422 => JpegSampling::Yuv422,
            PixelFormat::I420 => JpegSampling::Yuv420,
            PixelFormat::Grey => JpegSampling::Grey,
            f => {
                return Err(Error::Unsupported(format!(
                    "JPEG encoding takes i444, i422, i420 or grey planes, not {f}"
                )));
            }
        };
        if !(1..=100).contains(&quality) {
            return Err(Error::InvalidArgument(format!(
                "JPEG quality {quality}: use 1 to 100"
            )));
        }
        if layout.buffer_count() != 1 {
            return Err(Error::InvalidLayout(
                "JPEG encoding takes planes in one buffer".into(),
            ));
        }
        layout.validate_buffers(&[src.len()])?;
        let (w, h) = (layout.width(), layout.height());
        // SAFETY: a pure function of its arguments.
        let bound = unsafe { (self.codec.lib.buf_size)(w as c_int, h as c_int, sampling.tj()) };
        self.buf.resize(bound as usize, 0);
        let mut ptrs = [std::ptr::null::<u8>(); 3];
        let mut strides = [0 as c_int; 3];
        for (k, p) in layout.planes().iter().enumerate() {
            ptrs[k] = src[p.offset..].as_ptr();
            strides[k] = c_int::try_from(p.stride)
                .map_err(|_| Error::InvalidLayout(format!("stride {} is too large", p.stride)))?;
        }
        let mut out = self.buf.as_mut_ptr();
        let mut size = bound;
        // SAFETY: each plane pointer starts a plane of `layout` inside `src` (validated
        // above), which holds the rows libjpeg-turbo reads for a `w`x`h` image; `out`
        // is `self.buf`, `bound` bytes (tjBufSize's worst case), and NOREALLOC keeps
        // the library from reallocating or freeing it.
        let rc = unsafe {
            (self.codec.lib.compress_from_yuv_planes)(
                self.codec.handle,
                ptrs.as_ptr(),
                w as c_int,
                strides.as_ptr(),
                h as c_int,
                sampling.tj(),
                &mut out,
                &mut size,
                c_int::from(quality),
                turbo::FLAG_NO_REALLOC,
            )
        };
        if rc != 0 {
            return Err(Error::InvalidArgument(format!(
                "libjpeg-turbo could not encode the {w}x{h} image: {}",
                self.codec.error()
            )));
        }
        Ok(&self.buf[..(size as usize).min(self.buf.len())])
    }
}

/// Plans of a decode: which scale, and the crop in the decoded image's pixels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ScaledCrop {
    pub(crate) scale: u32,
    pub(crate) crop: crate::Crop,
}

/// The largest decode scale (1, 2, 4 or 8) at which the crop still has at least as many
/// pixels as the destination content it fills, on both axes (the fused pass then only
/// downsamples), and whose edges fall on whole decoded pixels (so the geometry stays
/// exact in camera pixels). `content` is the oriented content size in destination
/// pixels; `swapped` says the crop's axes are swapped in it (90/270 rotations).
pub(crate) fn choose_scale(crop: crate::Crop, content: (u32, u32), swapped: bool) -> ScaledCrop {
    let (cw, ch) = if swapped {
        (content.1, content.0)
    } else {
        content
    };
    for &s in DECODE_SCALES.iter().rev() {
        let whole =
            |start: u32, len: u32| start.is_multiple_of(s) && (start + len).is_multiple_of(s);
        if s > 1
            && crop.width / s >= cw
            && crop.height / s >= ch
            && whole(crop.x, crop.width)
            && whole(crop.y, crop.height)
        {
            return ScaledCrop {
                scale: s,
                crop: crate::Crop::new(crop.x / s, crop.y / s, crop.width / s, crop.height / s),
            };
        }
    }
    ScaledCrop { scale: 1, crop }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Crop;

    #[test]
    fn scale_keeps_whole_pixels_and_never_upsamples() {
        let full = |w, h| Crop::new(0, 0, w, h);
        // 1080p into a 640x360 letterbox: 1/2 (960x540) is the largest at or above it.
        assert_eq!(choose_scale(full(1920, 1080), (640, 360), false).scale, 2);
        // Into 224: 1/4 (480x270) is above 224x126; 1/8 (240x135) too.
        assert_eq!(choose_scale(full(1920, 1080), (224, 126), false).scale, 8);
        // A 720x720 centre crop of 720p into 224: 1/2 gives 360, 1/4 180 < 224.
        let c = choose_scale(Crop::new(280, 0, 720, 720), (224, 224), false);
        assert_eq!(
            c,
            ScaledCrop {
                scale: 2,
                crop: Crop::new(140, 0, 360, 360)
            }
        );
        // An odd crop edge: no scaling.
        assert_eq!(
            choose_scale(Crop::new(1, 0, 1900, 1080), (100, 50), false).scale,
            1
        );
        // An upscale: no scaling.
        assert_eq!(choose_scale(full(320, 240), (640, 480), false).scale, 1);
        // Rotated: the content's axes are swapped against the crop.
        assert_eq!(choose_scale(full(1920, 1080), (540, 960), true).scale, 2);
        // A frame whose width is not a multiple of the scale: the crop may not end there.
        assert_eq!(choose_scale(full(1366, 768), (100, 50), false).scale, 2);
        assert_eq!(choose_scale(full(1365, 768), (100, 50), false).scale, 1);
    }

    #[test]
    fn parse_refuses_what_is_not_a_frame() {
        for bad in [
            &b""[..],
            b"\xFF\xD8",
            b"\x00\x00\x00\x00",
            b"\xFF\xD8\xFF\xD9",
        ] {
            let e = parse(bad).unwrap_err();
            assert!(matches!(e, Error::CorruptFrame(_)), "{e}");
        }
    }
}
