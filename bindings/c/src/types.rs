//! The C vocabulary: element types, pixel formats, memory kinds, accesses and the image
//! layout struct, with their conversions to and from pinframe's types. Every value a
//! caller passes arrives as an integer and is checked (a C enum holding an unknown value
//! must never become a Rust enum).

use std::ffi::c_char;

use pinframe::{
    Access, Colorimetry, DType, ImageLayout, Matrix, Memory, MemoryRequest, PixelFormat, Plane,
    Range,
};

use crate::status::{Failure, Outcome, PINFRAME_ERROR_UNSUPPORTED, SizedStruct};

/// An element type: one of the `PINFRAME_DTYPE_*` values.
#[allow(non_camel_case_types)]
pub type pinframe_dtype = u32;
/// `uint8_t`.
pub const PINFRAME_DTYPE_U8: pinframe_dtype = 1;
/// `int8_t`.
pub const PINFRAME_DTYPE_I8: pinframe_dtype = 2;
/// `uint16_t`.
pub const PINFRAME_DTYPE_U16: pinframe_dtype = 3;
/// `int16_t`.
pub const PINFRAME_DTYPE_I16: pinframe_dtype = 4;
/// `uint32_t`.
pub const PINFRAME_DTYPE_U32: pinframe_dtype = 5;
/// `int32_t`.
pub const PINFRAME_DTYPE_I32: pinframe_dtype = 6;
/// IEEE 754 half precision (16 bits).
pub const PINFRAME_DTYPE_F16: pinframe_dtype = 7;
/// `float`.
pub const PINFRAME_DTYPE_F32: pinframe_dtype = 8;
/// `double`.
pub const PINFRAME_DTYPE_F64: pinframe_dtype = 9;

pub(crate) fn dtype_from(code: pinframe_dtype) -> Outcome<DType> {
    Ok(match code {
        PINFRAME_DTYPE_U8 => DType::U8,
        PINFRAME_DTYPE_I8 => DType::I8,
        PINFRAME_DTYPE_U16 => DType::U16,
        PINFRAME_DTYPE_I16 => DType::I16,
        PINFRAME_DTYPE_U32 => DType::U32,
        PINFRAME_DTYPE_I32 => DType::I32,
        PINFRAME_DTYPE_F16 => DType::F16,
        PINFRAME_DTYPE_F32 => DType::F32,
        PINFRAME_DTYPE_F64 => DType::F64,
        _ => {
            return Err(Failure::invalid(format!(
                "unknown dtype {code}; use a PINFRAME_DTYPE_* value"
            )));
        }
    })
}

pub(crate) fn dtype_code(d: DType) -> pinframe_dtype {
    match d {
        DType::U8 => PINFRAME_DTYPE_U8,
        DType::I8 => PINFRAME_DTYPE_I8,
        DType::U16 => PINFRAME_DTYPE_U16,
        DType::I16 => PINFRAME_DTYPE_I16,
        DType::U32 => PINFRAME_DTYPE_U32,
        DType::I32 => PINFRAME_DTYPE_I32,
        DType::F16 => PINFRAME_DTYPE_F16,
        DType::F32 => PINFRAME_DTYPE_F32,
        DType::F64 => PINFRAME_DTYPE_F64,
        _ => 0,
    }
}

/// A pixel format: one of the `PINFRAME_FORMAT_*` values (pinframe's `PixelFormat`, the
/// same names as the CLI's). 0 means "none" where a field allows it.
///
/// The Bayer (`RGGB8` .. `GBRG12P`), deep grey (`Y10` .. `Y16`) and `P010` .. `P016`
/// formats are conversion sources only, laid out as `PINFRAME_DTYPE_U8` bytes (a 16-bit
/// sample is two little-endian bytes); Bayer widths and heights are even (whole 2x2
/// tiles). Their RAW steps are the `black_level`, `wb_gains`, `ccm` and `gamma` of
/// `pinframe_convert_options`.
#[allow(non_camel_case_types)]
pub type pinframe_format = u32;
/// Packed 4:2:2, bytes Y0 U Y1 V.
pub const PINFRAME_FORMAT_YUYV: pinframe_format = 1;
/// Packed 4:2:2, bytes U Y0 V Y1.
pub const PINFRAME_FORMAT_UYVY: pinframe_format = 2;
/// Packed 4:2:2, bytes Y0 V Y1 U.
pub const PINFRAME_FORMAT_YVYU: pinframe_format = 3;
/// Packed 4:2:2, bytes V Y0 U Y1.
pub const PINFRAME_FORMAT_VYUY: pinframe_format = 4;
/// Y plane, then interleaved UV at half width and half height.
pub const PINFRAME_FORMAT_NV12: pinframe_format = 5;
/// Y plane, then interleaved VU at half width and half height.
pub const PINFRAME_FORMAT_NV21: pinframe_format = 6;
/// Y plane, then interleaved UV at half width and full height.
pub const PINFRAME_FORMAT_NV16: pinframe_format = 7;
/// Y plane, then interleaved VU at half width and full height.
pub const PINFRAME_FORMAT_NV61: pinframe_format = 8;
/// Y, U, V planes, chroma at half width and half height.
pub const PINFRAME_FORMAT_I420: pinframe_format = 9;
/// Y, V, U planes, chroma at half width and half height.
pub const PINFRAME_FORMAT_YV12: pinframe_format = 10;
/// 8-bit luma only.
pub const PINFRAME_FORMAT_GREY: pinframe_format = 11;
/// Packed R G B.
pub const PINFRAME_FORMAT_RGB: pinframe_format = 12;
/// Packed B G R.
pub const PINFRAME_FORMAT_BGR: pinframe_format = 13;
/// Packed R G B A.
pub const PINFRAME_FORMAT_RGBA: pinframe_format = 14;
/// Packed B G R A.
pub const PINFRAME_FORMAT_BGRA: pinframe_format = 15;
/// Three planes R, G, B (CHW).
pub const PINFRAME_FORMAT_PLANAR_RGB: pinframe_format = 16;
/// Three planes B, G, R (CHW).
pub const PINFRAME_FORMAT_PLANAR_BGR: pinframe_format = 17;
/// Bayer R G / G B, 8 bits a byte.
pub const PINFRAME_FORMAT_RGGB8: pinframe_format = 18;
/// Bayer B G / G R, 8 bits a byte.
pub const PINFRAME_FORMAT_BGGR8: pinframe_format = 19;
/// Bayer G R / B G, 8 bits a byte.
pub const PINFRAME_FORMAT_GRBG8: pinframe_format = 20;
/// Bayer G B / R G, 8 bits a byte.
pub const PINFRAME_FORMAT_GBRG8: pinframe_format = 21;
/// Bayer R G / G B, 10 bits in the low bits of little-endian 16-bit words.
pub const PINFRAME_FORMAT_RGGB10: pinframe_format = 22;
/// Bayer B G / G R, 10 bits in the low bits of little-endian 16-bit words.
pub const PINFRAME_FORMAT_BGGR10: pinframe_format = 23;
/// Bayer G R / B G, 10 bits in the low bits of little-endian 16-bit words.
pub const PINFRAME_FORMAT_GRBG10: pinframe_format = 24;
/// Bayer G B / R G, 10 bits in the low bits of little-endian 16-bit words.
pub const PINFRAME_FORMAT_GBRG10: pinframe_format = 25;
/// Bayer R G / G B, 12 bits in the low bits of little-endian 16-bit words.
pub const PINFRAME_FORMAT_RGGB12: pinframe_format = 26;
/// Bayer B G / G R, 12 bits in the low bits of little-endian 16-bit words.
pub const PINFRAME_FORMAT_BGGR12: pinframe_format = 27;
/// Bayer G R / B G, 12 bits in the low bits of little-endian 16-bit words.
pub const PINFRAME_FORMAT_GRBG12: pinframe_format = 28;
/// Bayer G B / R G, 12 bits in the low bits of little-endian 16-bit words.
pub const PINFRAME_FORMAT_GBRG12: pinframe_format = 29;
/// Bayer R G / G B, 16-bit little-endian words.
pub const PINFRAME_FORMAT_RGGB16: pinframe_format = 30;
/// Bayer B G / G R, 16-bit little-endian words.
pub const PINFRAME_FORMAT_BGGR16: pinframe_format = 31;
/// Bayer G R / B G, 16-bit little-endian words.
pub const PINFRAME_FORMAT_GRBG16: pinframe_format = 32;
/// Bayer G B / R G, 16-bit little-endian words.
pub const PINFRAME_FORMAT_GBRG16: pinframe_format = 33;
/// Bayer R G / G B, MIPI CSI-2 packed 10 bits (4 pixels in 5 bytes).
pub const PINFRAME_FORMAT_RGGB10P: pinframe_format = 34;
/// Bayer B G / G R, MIPI CSI-2 packed 10 bits (4 pixels in 5 bytes).
pub const PINFRAME_FORMAT_BGGR10P: pinframe_format = 35;
/// Bayer G R / B G, MIPI CSI-2 packed 10 bits (4 pixels in 5 bytes).
pub const PINFRAME_FORMAT_GRBG10P: pinframe_format = 36;
/// Bayer G B / R G, MIPI CSI-2 packed 10 bits (4 pixels in 5 bytes).
pub const PINFRAME_FORMAT_GBRG10P: pinframe_format = 37;
/// Bayer R G / G B, MIPI CSI-2 packed 12 bits (2 pixels in 3 bytes).
pub const PINFRAME_FORMAT_RGGB12P: pinframe_format = 38;
/// Bayer B G / G R, MIPI CSI-2 packed 12 bits (2 pixels in 3 bytes).
pub const PINFRAME_FORMAT_BGGR12P: pinframe_format = 39;
/// Bayer G R / B G, MIPI CSI-2 packed 12 bits (2 pixels in 3 bytes).
pub const PINFRAME_FORMAT_GRBG12P: pinframe_format = 40;
/// Bayer G B / R G, MIPI CSI-2 packed 12 bits (2 pixels in 3 bytes).
pub const PINFRAME_FORMAT_GBRG12P: pinframe_format = 41;
/// 10-bit luma in the low bits of little-endian 16-bit words.
pub const PINFRAME_FORMAT_Y10: pinframe_format = 42;
/// 12-bit luma in the low bits of little-endian 16-bit words.
pub const PINFRAME_FORMAT_Y12: pinframe_format = 43;
/// 16-bit little-endian luma.
pub const PINFRAME_FORMAT_Y16: pinframe_format = 44;
/// 4:2:0, a Y plane then interleaved CbCr, 10 bits in the high bits of little-endian 16-bit words.
pub const PINFRAME_FORMAT_P010: pinframe_format = 45;
/// As P010 with 12 significant bits.
pub const PINFRAME_FORMAT_P012: pinframe_format = 46;
/// As P010 with 16 significant bits.
pub const PINFRAME_FORMAT_P016: pinframe_format = 47;
/// Y, U, V planes, chroma at half width and full height (4:2:2).
pub const PINFRAME_FORMAT_I422: pinframe_format = 48;
/// Y, U, V planes, chroma at full width and full height (4:4:4).
pub const PINFRAME_FORMAT_I444: pinframe_format = 49;
/// Motion-JPEG: one JPEG frame in one plane whose `stride` is the frame's length in bytes
/// (the driver's `bytesused`); decoded (libturbojpeg, loaded at run time) into its YUV
/// planes, at 1/2, 1/4 or 1/8 scale where the destination allows, then converted. A
/// corrupt frame is `PINFRAME_ERROR_INVALID_INPUT` and nothing is written.
pub const PINFRAME_FORMAT_MJPEG: pinframe_format = 50;

/// Every (code, format) pair, fixed for the ABI's life (new formats get new codes).
const FORMATS: [(pinframe_format, PixelFormat); 50] = [
    (PINFRAME_FORMAT_YUYV, PixelFormat::Yuyv),
    (PINFRAME_FORMAT_UYVY, PixelFormat::Uyvy),
    (PINFRAME_FORMAT_YVYU, PixelFormat::Yvyu),
    (PINFRAME_FORMAT_VYUY, PixelFormat::Vyuy),
    (PINFRAME_FORMAT_NV12, PixelFormat::Nv12),
    (PINFRAME_FORMAT_NV21, PixelFormat::Nv21),
    (PINFRAME_FORMAT_NV16, PixelFormat::Nv16),
    (PINFRAME_FORMAT_NV61, PixelFormat::Nv61),
    (PINFRAME_FORMAT_I420, PixelFormat::I420),
    (PINFRAME_FORMAT_YV12, PixelFormat::Yv12),
    (PINFRAME_FORMAT_GREY, PixelFormat::Grey),
    (PINFRAME_FORMAT_RGB, PixelFormat::Rgb),
    (PINFRAME_FORMAT_BGR, PixelFormat::Bgr),
    (PINFRAME_FORMAT_RGBA, PixelFormat::Rgba),
    (PINFRAME_FORMAT_BGRA, PixelFormat::Bgra),
    (PINFRAME_FORMAT_PLANAR_RGB, PixelFormat::PlanarRgb),
    (PINFRAME_FORMAT_PLANAR_BGR, PixelFormat::PlanarBgr),
    (PINFRAME_FORMAT_RGGB8, PixelFormat::Rggb8),
    (PINFRAME_FORMAT_BGGR8, PixelFormat::Bggr8),
    (PINFRAME_FORMAT_GRBG8, PixelFormat::Grbg8),
    (PINFRAME_FORMAT_GBRG8, PixelFormat::Gbrg8),
    (PINFRAME_FORMAT_RGGB10, PixelFormat::Rggb10),
    (PINFRAME_FORMAT_BGGR10, PixelFormat::Bggr10),
    (PINFRAME_FORMAT_GRBG10, PixelFormat::Grbg10),
    (PINFRAME_FORMAT_GBRG10, PixelFormat::Gbrg10),
    (PINFRAME_FORMAT_RGGB12, PixelFormat::Rggb12),
    (PINFRAME_FORMAT_BGGR12, PixelFormat::Bggr12),
    (PINFRAME_FORMAT_GRBG12, PixelFormat::Grbg12),
    (PINFRAME_FORMAT_GBRG12, PixelFormat::Gbrg12),
    (PINFRAME_FORMAT_RGGB16, PixelFormat::Rggb16),
    (PINFRAME_FORMAT_BGGR16, PixelFormat::Bggr16),
    (PINFRAME_FORMAT_GRBG16, PixelFormat::Grbg16),
    (PINFRAME_FORMAT_GBRG16, PixelFormat::Gbrg16),
    (PINFRAME_FORMAT_RGGB10P, PixelFormat::Rggb10P),
    (PINFRAME_FORMAT_BGGR10P, PixelFormat::Bggr10P),
    (PINFRAME_FORMAT_GRBG10P, PixelFormat::Grbg10P),
    (PINFRAME_FORMAT_GBRG10P, PixelFormat::Gbrg10P),
    (PINFRAME_FORMAT_RGGB12P, PixelFormat::Rggb12P),
    (PINFRAME_FORMAT_BGGR12P, PixelFormat::Bggr12P),
    (PINFRAME_FORMAT_GRBG12P, PixelFormat::Grbg12P),
    (PINFRAME_FORMAT_GBRG12P, PixelFormat::Gbrg12P),
    (PINFRAME_FORMAT_Y10, PixelFormat::Y10),
    (PINFRAME_FORMAT_Y12, PixelFormat::Y12),
    (PINFRAME_FORMAT_Y16, PixelFormat::Y16),
    (PINFRAME_FORMAT_P010, PixelFormat::P010),
    (PINFRAME_FORMAT_P012, PixelFormat::P012),
    (PINFRAME_FORMAT_P016, PixelFormat::P016),
    (PINFRAME_FORMAT_I422, PixelFormat::I422),
    (PINFRAME_FORMAT_I444, PixelFormat::I444),
    (PINFRAME_FORMAT_MJPEG, PixelFormat::Mjpeg),
];

pub(crate) fn format_from(code: pinframe_format) -> Outcome<PixelFormat> {
    FORMATS
        .iter()
        .find(|(c, _)| *c == code)
        .map(|(_, f)| *f)
        .ok_or_else(|| {
            Failure::invalid(format!(
                "unknown pixel format {code}; use a PINFRAME_FORMAT_* value"
            ))
        })
}

pub(crate) fn format_code(f: PixelFormat) -> Outcome<pinframe_format> {
    FORMATS
        .iter()
        .find(|(_, p)| *p == f)
        .map(|(c, _)| *c)
        .ok_or_else(|| {
            Failure::new(
                PINFRAME_ERROR_UNSUPPORTED,
                format!("pixel format {f} has no PINFRAME_FORMAT_* code in this header"),
            )
        })
}

/// The lowercase name of a format (`"nv12"`), or NULL for an unknown code.
pub(crate) fn format_name_ptr(code: pinframe_format) -> *const c_char {
    const NAMES: [&std::ffi::CStr; 50] = [
        c"yuyv",
        c"uyvy",
        c"yvyu",
        c"vyuy",
        c"nv12",
        c"nv21",
        c"nv16",
        c"nv61",
        c"i420",
        c"yv12",
        c"grey",
        c"rgb",
        c"bgr",
        c"rgba",
        c"bgra",
        c"planar-rgb",
        c"planar-bgr",
        c"rggb8",
        c"bggr8",
        c"grbg8",
        c"gbrg8",
        c"rggb10",
        c"bggr10",
        c"grbg10",
        c"gbrg10",
        c"rggb12",
        c"bggr12",
        c"grbg12",
        c"gbrg12",
        c"rggb16",
        c"bggr16",
        c"grbg16",
        c"gbrg16",
        c"rggb10p",
        c"bggr10p",
        c"grbg10p",
        c"gbrg10p",
        c"rggb12p",
        c"bggr12p",
        c"grbg12p",
        c"gbrg12p",
        c"y10",
        c"y12",
        c"y16",
        c"p010",
        c"p012",
        c"p016",
        c"i422",
        c"i444",
        c"mjpeg",
    ];
    match code {
        1..=50 => NAMES[code as usize - 1].as_ptr(),
        _ => std::ptr::null(),
    }
}

/// Where a tensor's bytes live: one of the `PINFRAME_MEMORY_*` values.
#[allow(non_camel_case_types)]
pub type pinframe_memory = u32;
/// CPU memory shareable by fd: shared memory (memfd), else heap. Never DMA: a tensor
/// only the CPU touches does not spend a device's scarce CMA pool.
pub const PINFRAME_MEMORY_AUTO: pinframe_memory = 0;
/// Process heap, 64-byte aligned; no fd.
pub const PINFRAME_MEMORY_HEAP: pinframe_memory = 1;
/// A sealed memfd mapped shared: another process can map its fd.
pub const PINFRAME_MEMORY_SHM: pinframe_memory = 2;
/// A DMA-BUF: shareable with devices without copies.
pub const PINFRAME_MEMORY_DMA: pinframe_memory = 3;
/// The best memory devices (GPU, NPU, camera) reach without a copy: DMA, else shared
/// memory (memfd), else heap. For GL destinations and runtime inputs. A request only:
/// a tensor's memory is never DEVICE.
pub const PINFRAME_MEMORY_DEVICE: pinframe_memory = 4;

pub(crate) fn memory_from(code: pinframe_memory) -> Outcome<MemoryRequest> {
    Ok(match code {
        PINFRAME_MEMORY_AUTO => MemoryRequest::Auto,
        PINFRAME_MEMORY_DEVICE => MemoryRequest::Device,
        PINFRAME_MEMORY_HEAP => MemoryRequest::Only(Memory::Heap),
        PINFRAME_MEMORY_SHM => MemoryRequest::Only(Memory::Shm),
        PINFRAME_MEMORY_DMA => MemoryRequest::Only(Memory::Dma),
        _ => {
            return Err(Failure::invalid(format!(
                "unknown memory kind {code}; use a PINFRAME_MEMORY_* value"
            )));
        }
    })
}

pub(crate) fn memory_code(m: Memory) -> pinframe_memory {
    match m {
        Memory::Heap => PINFRAME_MEMORY_HEAP,
        Memory::Shm => PINFRAME_MEMORY_SHM,
        Memory::Dma => PINFRAME_MEMORY_DMA,
        _ => PINFRAME_MEMORY_AUTO,
    }
}

/// The direction of a CPU access: one of the `PINFRAME_ACCESS_*` values.
#[allow(non_camel_case_types)]
pub type pinframe_access = u32;
/// The CPU reads.
pub const PINFRAME_ACCESS_READ: pinframe_access = 1;
/// The CPU writes.
pub const PINFRAME_ACCESS_WRITE: pinframe_access = 2;
/// The CPU reads and writes.
pub const PINFRAME_ACCESS_READ_WRITE: pinframe_access = 3;

pub(crate) fn access_from(code: pinframe_access) -> Outcome<Access> {
    Ok(match code {
        PINFRAME_ACCESS_READ => Access::Read,
        PINFRAME_ACCESS_WRITE => Access::Write,
        PINFRAME_ACCESS_READ_WRITE => Access::ReadWrite,
        _ => {
            return Err(Failure::invalid(format!(
                "unknown access {code}; use PINFRAME_ACCESS_READ, _WRITE or _READ_WRITE"
            )));
        }
    })
}

/// A YCbCr matrix: one of the `PINFRAME_MATRIX_*` values.
#[allow(non_camel_case_types)]
pub type pinframe_matrix = u32;
/// Unknown / automatic (see `pinframe_convert_options`).
pub const PINFRAME_MATRIX_AUTO: pinframe_matrix = 0;
/// ITU-R BT.601.
pub const PINFRAME_MATRIX_BT601: pinframe_matrix = 1;
/// ITU-R BT.709.
pub const PINFRAME_MATRIX_BT709: pinframe_matrix = 2;
/// ITU-R BT.2020 (non-constant luminance).
pub const PINFRAME_MATRIX_BT2020: pinframe_matrix = 3;

/// A YCbCr quantisation range: one of the `PINFRAME_RANGE_*` values.
#[allow(non_camel_case_types)]
pub type pinframe_range = u32;
/// Unknown / automatic.
pub const PINFRAME_RANGE_AUTO: pinframe_range = 0;
/// Y in 16..=235, Cb/Cr in 16..=240.
pub const PINFRAME_RANGE_LIMITED: pinframe_range = 1;
/// Y, Cb, Cr in 0..=255.
pub const PINFRAME_RANGE_FULL: pinframe_range = 2;

pub(crate) fn matrix_from(code: pinframe_matrix) -> Outcome<Option<Matrix>> {
    Ok(match code {
        PINFRAME_MATRIX_AUTO => None,
        PINFRAME_MATRIX_BT601 => Some(Matrix::Bt601),
        PINFRAME_MATRIX_BT709 => Some(Matrix::Bt709),
        PINFRAME_MATRIX_BT2020 => Some(Matrix::Bt2020),
        _ => {
            return Err(Failure::invalid(format!(
                "unknown matrix {code}; use a PINFRAME_MATRIX_* value"
            )));
        }
    })
}

pub(crate) fn range_from(code: pinframe_range) -> Outcome<Option<Range>> {
    Ok(match code {
        PINFRAME_RANGE_AUTO => None,
        PINFRAME_RANGE_LIMITED => Some(Range::Limited),
        PINFRAME_RANGE_FULL => Some(Range::Full),
        _ => {
            return Err(Failure::invalid(format!(
                "unknown range {code}; use a PINFRAME_RANGE_* value"
            )));
        }
    })
}

pub(crate) fn colorimetry_codes(c: Option<Colorimetry>) -> (pinframe_matrix, pinframe_range) {
    match c {
        None => (PINFRAME_MATRIX_AUTO, PINFRAME_RANGE_AUTO),
        Some(c) => (
            match c.matrix {
                Matrix::Bt601 => PINFRAME_MATRIX_BT601,
                Matrix::Bt709 => PINFRAME_MATRIX_BT709,
                Matrix::Bt2020 => PINFRAME_MATRIX_BT2020,
                _ => PINFRAME_MATRIX_AUTO,
            },
            match c.range {
                Range::Limited => PINFRAME_RANGE_LIMITED,
                Range::Full => PINFRAME_RANGE_FULL,
            },
        ),
    }
}

/// The most planes an image has (Y, U, V).
pub const PINFRAME_MAX_PLANES: usize = 3;

/// One plane of an image: which buffer (fd) holds it, where it starts, its row pitch.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct pinframe_plane {
    /// Index of the buffer holding the plane (0 unless the image spans several fds).
    pub buffer: usize,
    /// Byte offset of the plane's first row in its buffer.
    pub offset: usize,
    /// Bytes from one row to the next.
    pub stride: usize,
}

/// An image layout (pinframe's `ImageLayout`): size, format, element type, planes, DRM
/// modifier and colorimetry. Set `struct_size = sizeof(pinframe_layout)` before passing
/// one to any call. `pinframe_layout_init` fills a tightly packed (or row-aligned) one;
/// every call that takes a layout validates it (strides, plane bounds, overlaps,
/// alignment, overflow) and fails with `PINFRAME_ERROR_INVALID_INPUT` if it is malformed.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct pinframe_layout {
    /// `sizeof(pinframe_layout)`, set by the caller.
    pub struct_size: usize,
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// A `PINFRAME_FORMAT_*` value.
    pub format: pinframe_format,
    /// A `PINFRAME_DTYPE_*` value (YUV formats are `PINFRAME_DTYPE_U8` only).
    pub dtype: pinframe_dtype,
    /// Planes in use (the format's plane count).
    pub plane_count: u32,
    /// The planes, in the format's plane order (Y then chroma; R, G, B for planar RGB).
    pub planes: [pinframe_plane; PINFRAME_MAX_PLANES],
    /// DRM format modifier (0 = linear).
    pub modifier: u64,
    /// Colorimetry matrix of YUV data, `PINFRAME_MATRIX_AUTO` if unknown.
    pub matrix: pinframe_matrix,
    /// Colorimetry range of YUV data, `PINFRAME_RANGE_AUTO` if unknown.
    pub range: pinframe_range,
}

impl SizedStruct for pinframe_layout {
    const NAME: &'static str = "pinframe_layout";
    const RELEASED: &'static [usize] = &[size_of::<Self>()];
}

impl pinframe_layout {
    pub(crate) fn empty() -> Self {
        pinframe_layout {
            struct_size: size_of::<Self>(),
            width: 0,
            height: 0,
            format: 0,
            dtype: 0,
            plane_count: 0,
            planes: [pinframe_plane::default(); PINFRAME_MAX_PLANES],
            modifier: 0,
            matrix: 0,
            range: 0,
        }
    }

    pub(crate) fn from_layout(l: &ImageLayout) -> Outcome<Self> {
        let mut out = Self::empty();
        out.width = l.width();
        out.height = l.height();
        out.format = format_code(l.format())?;
        out.dtype = dtype_code(l.dtype());
        out.plane_count = l.planes().len() as u32;
        for (o, p) in out.planes.iter_mut().zip(l.planes()) {
            *o = pinframe_plane {
                buffer: p.buffer,
                offset: p.offset,
                stride: p.stride,
            };
        }
        out.modifier = l.modifier();
        (out.matrix, out.range) = colorimetry_codes(l.colorimetry());
        Ok(out)
    }

    pub(crate) fn to_layout(self) -> Outcome<ImageLayout> {
        let format = format_from(self.format)?;
        let dtype = dtype_from(self.dtype)?;
        let n = self.plane_count as usize;
        if n > PINFRAME_MAX_PLANES {
            return Err(Failure::invalid(format!(
                "plane_count {n} exceeds {PINFRAME_MAX_PLANES}"
            )));
        }
        // pinframe counts buffers as the largest index plus one: an index past the most
        // buffers an image has is refused here (SIZE_MAX would wrap that count to 0).
        if let Some((i, p)) = self.planes[..n]
            .iter()
            .enumerate()
            .find(|(_, p)| p.buffer >= PINFRAME_MAX_PLANES)
        {
            return Err(Failure::invalid(format!(
                "plane {i} is in buffer {}; an image has at most {PINFRAME_MAX_PLANES} buffers \
                 (indices 0..{PINFRAME_MAX_PLANES})",
                p.buffer
            )));
        }
        let planes: Vec<Plane> = self.planes[..n]
            .iter()
            .map(|p| Plane {
                buffer: p.buffer,
                offset: p.offset,
                stride: p.stride,
            })
            .collect();
        let colorimetry = match (matrix_from(self.matrix)?, range_from(self.range)?) {
            (None, None) => None,
            (Some(m), Some(r)) => Some(Colorimetry::new(m, r)),
            _ => {
                return Err(Failure::invalid(
                    "a layout's colorimetry needs both matrix and range, or neither",
                ));
            }
        };
        Ok(
            ImageLayout::with_planes(self.width, self.height, format, dtype, &planes)?
                .with_modifier(self.modifier)
                .with_colorimetry(colorimetry),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pixel_format_has_a_code_that_round_trips() {
        for f in PixelFormat::SOURCES {
            let code = format_code(f).unwrap();
            assert_eq!(format_from(code).unwrap(), f);
            // SAFETY: non-null names are static NUL-terminated strings.
            let name = unsafe { std::ffi::CStr::from_ptr(format_name_ptr(code)) };
            assert_eq!(name.to_str().unwrap(), f.name());
        }
        assert!(format_name_ptr(0).is_null());
        assert!(format_from(0).is_err());
    }

    #[test]
    fn every_dtype_round_trips() {
        for code in PINFRAME_DTYPE_U8..=PINFRAME_DTYPE_F64 {
            assert_eq!(dtype_code(dtype_from(code).unwrap()), code);
        }
        assert!(dtype_from(0).is_err());
        assert!(dtype_from(10).is_err());
    }
}
