//! Pixel formats, with their DRM and V4L2 fourccs.

use std::fmt;
use std::str::FromStr;

use crate::{Error, Result};

/// Builds a little-endian fourcc code from four ASCII bytes.
pub const fn fourcc(code: &[u8; 4]) -> u32 {
    (code[0] as u32) | (code[1] as u32) << 8 | (code[2] as u32) << 16 | (code[3] as u32) << 24
}

/// Renders a fourcc code as four characters (non-printable bytes as `.`).
pub fn fourcc_to_string(code: u32) -> String {
    code.to_le_bytes()
        .iter()
        .map(|&b| {
            if b.is_ascii_graphic() || b == b' ' {
                b as char
            } else {
                '.'
            }
        })
        .collect()
}

/// How a format's samples are arranged in memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FormatFamily {
    /// 4:2:2 YUV, two pixels in one 4-byte macropixel (YUYV, UYVY, YVYU, VYUY).
    PackedYuv422,
    /// Y plane + one interleaved chroma plane (NV12, NV21: 4:2:0; NV16, NV61: 4:2:2).
    SemiPlanarYuv,
    /// Y, U and V planes: 4:2:0 (I420, YV12), 4:2:2 (I422) or 4:4:4 (I444).
    PlanarYuv,
    /// One 8-bit luma channel.
    Grey,
    /// Interleaved RGB(A) channels.
    PackedRgb,
    /// One plane per colour channel (CHW).
    PlanarRgb,
    /// One plane of colour-filter-array (Bayer) samples: 8 bits a byte, 10/12/16 bits in
    /// little-endian 16-bit containers, or MIPI CSI-2 packed 10 and 12 bits. Source only.
    Bayer,
    /// One luma sample of 10, 12 or 16 bits per pixel in a little-endian 16-bit container
    /// (V4L2 `Y10`, `Y12`, `Y16`). Source only.
    DeepGrey,
    /// 4:2:0 Y plane + interleaved CbCr plane of 16-bit little-endian samples holding
    /// 10, 12 or 16 significant bits in their high bits (P010, P012, P016). Source only.
    SemiPlanarYuv16,
    /// A compressed frame (Motion-JPEG): one buffer of bytes, decoded before the
    /// conversion. Source only.
    Jpeg,
}

/// The colour of the 2x2 colour-filter-array tile's top-left, top-right, bottom-left and
/// bottom-right sites, named as V4L2 names Bayer formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CfaPattern {
    /// R G / G B.
    Rggb,
    /// B G / G R.
    Bggr,
    /// G R / B G.
    Grbg,
    /// G B / R G.
    Gbrg,
}

/// One site of the colour filter array. Green sites are told apart by the row they sit
/// on (`Gr` shares rows with red, `Gb` with blue), because sensors give them their own
/// black level.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CfaSite {
    /// Red.
    R = 0,
    /// Green on a red row.
    Gr = 1,
    /// Green on a blue row.
    Gb = 2,
    /// Blue.
    B = 3,
}

impl CfaSite {
    /// The colour channel (0 R, 1 G, 2 B) the site measures.
    pub const fn channel(self) -> usize {
        match self {
            CfaSite::R => 0,
            CfaSite::Gr | CfaSite::Gb => 1,
            CfaSite::B => 2,
        }
    }
}

impl CfaPattern {
    /// The four sites of the 2x2 tile in the order top-left, top-right, bottom-left,
    /// bottom-right.
    pub const fn sites(self) -> [CfaSite; 4] {
        use CfaSite::{B, Gb, Gr, R};
        match self {
            CfaPattern::Rggb => [R, Gr, Gb, B],
            CfaPattern::Bggr => [B, Gb, Gr, R],
            CfaPattern::Grbg => [Gr, R, B, Gb],
            CfaPattern::Gbrg => [Gb, B, R, Gr],
        }
    }

    /// The site at source pixel `(x, y)` (the tile repeats from the image's top-left).
    pub const fn site(self, x: u32, y: u32) -> CfaSite {
        self.sites()[((y & 1) * 2 + (x & 1)) as usize]
    }
}

/// How a format stores each sample.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SampleStorage {
    /// One byte a sample.
    Byte,
    /// A little-endian 16-bit word holding `bits` significant bits in its low bits
    /// (V4L2 Bayer and `Y1x` formats).
    Le16Low {
        /// Significant bits (10, 12 or 16).
        bits: u32,
    },
    /// A little-endian 16-bit word holding `bits` significant bits in its high bits
    /// (P010, P012, P016: the low bits are zero).
    Le16High {
        /// Significant bits (10, 12 or 16).
        bits: u32,
    },
    /// MIPI CSI-2 RAW10: 4 pixels in 5 bytes (the high 8 bits of each, then a byte of
    /// their low 2 bits, pixel 0 in bits 1:0).
    Csi2Packed10,
    /// MIPI CSI-2 RAW12: 2 pixels in 3 bytes (the high 8 bits of each, then a byte of
    /// their low 4 bits, pixel 0 in bits 3:0).
    Csi2Packed12,
}

impl SampleStorage {
    /// Significant bits of a sample.
    pub const fn bits(self) -> u32 {
        match self {
            SampleStorage::Byte => 8,
            SampleStorage::Le16Low { bits } | SampleStorage::Le16High { bits } => bits,
            SampleStorage::Csi2Packed10 => 10,
            SampleStorage::Csi2Packed12 => 12,
        }
    }

    /// The largest sample value, `2^bits - 1` (the white level).
    pub const fn max_value(self) -> u32 {
        (1 << self.bits()) - 1
    }

    /// Pixels per packing group and the bytes of one group (1 and 1 for bytes, 1 and 2
    /// for 16-bit words, 4 and 5 for CSI-2 RAW10, 2 and 3 for RAW12).
    pub const fn group(self) -> (u32, usize) {
        match self {
            SampleStorage::Byte => (1, 1),
            SampleStorage::Le16Low { .. } | SampleStorage::Le16High { .. } => (1, 2),
            SampleStorage::Csi2Packed10 => (4, 5),
            SampleStorage::Csi2Packed12 => (2, 3),
        }
    }
}

/// A pixel format. Names and fourccs follow V4L2 and DRM; [`PixelFormat::name`] is the
/// lowercase spelling the CLI accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PixelFormat {
    /// Packed 4:2:2, bytes Y0 U Y1 V.
    Yuyv,
    /// Packed 4:2:2, bytes U Y0 V Y1.
    Uyvy,
    /// Packed 4:2:2, bytes Y0 V Y1 U.
    Yvyu,
    /// Packed 4:2:2, bytes V Y0 U Y1.
    Vyuy,
    /// Y plane, then interleaved UV at half width and half height.
    Nv12,
    /// Y plane, then interleaved VU at half width and half height.
    Nv21,
    /// Y plane, then interleaved UV at half width and full height.
    Nv16,
    /// Y plane, then interleaved VU at half width and full height.
    Nv61,
    /// Y, U, V planes, chroma at half width and half height (V4L2 `YU12`).
    I420,
    /// Y, V, U planes, chroma at half width and half height.
    Yv12,
    /// Y, U, V planes, chroma at half width and full height (V4L2 `422P`).
    I422,
    /// Y, U, V planes, chroma at full width and full height (V4L2 `YM24`).
    I444,
    /// Motion-JPEG: each frame one JPEG image (V4L2 `MJPG`, also read from `JPEG`), its
    /// length the driver's `bytesused`. Decoded by libjpeg-turbo into its own YUV planes
    /// (at 1/2, 1/4 or 1/8 scale where the output allows), then converted like `i422`,
    /// `i420`, `i444` or `grey`. Not in [`PixelFormat::ALL`] (the raw formats): see
    /// [`PixelFormat::COMPRESSED`].
    Mjpeg,
    /// 8-bit luma only.
    Grey,
    /// Packed bytes R G B.
    Rgb,
    /// Packed bytes B G R.
    Bgr,
    /// Packed bytes R G B A.
    Rgba,
    /// Packed bytes B G R A.
    Bgra,
    /// Three planes R, G, B (CHW).
    PlanarRgb,
    /// Three planes B, G, R (CHW).
    PlanarBgr,
    /// Bayer R G / G B, 8 bits a byte (V4L2 `RGGB`).
    Rggb8,
    /// Bayer B G / G R, 8 bits a byte (V4L2 `BA81`).
    Bggr8,
    /// Bayer G R / B G, 8 bits a byte (V4L2 `GRBG`).
    Grbg8,
    /// Bayer G B / R G, 8 bits a byte (V4L2 `GBRG`).
    Gbrg8,
    /// Bayer R G / G B, 10 bits in little-endian 16-bit words (V4L2 `RG10`).
    Rggb10,
    /// Bayer B G / G R, 10 bits in little-endian 16-bit words (V4L2 `BG10`).
    Bggr10,
    /// Bayer G R / B G, 10 bits in little-endian 16-bit words (V4L2 `BA10`).
    Grbg10,
    /// Bayer G B / R G, 10 bits in little-endian 16-bit words (V4L2 `GB10`).
    Gbrg10,
    /// Bayer R G / G B, 12 bits in little-endian 16-bit words (V4L2 `RG12`).
    Rggb12,
    /// Bayer B G / G R, 12 bits in little-endian 16-bit words (V4L2 `BG12`).
    Bggr12,
    /// Bayer G R / B G, 12 bits in little-endian 16-bit words (V4L2 `BA12`).
    Grbg12,
    /// Bayer G B / R G, 12 bits in little-endian 16-bit words (V4L2 `GB12`).
    Gbrg12,
    /// Bayer R G / G B, 16-bit little-endian words (V4L2 `RG16`).
    Rggb16,
    /// Bayer B G / G R, 16-bit little-endian words (V4L2 `BYR2`).
    Bggr16,
    /// Bayer G R / B G, 16-bit little-endian words (V4L2 `GR16`).
    Grbg16,
    /// Bayer G B / R G, 16-bit little-endian words (V4L2 `GB16`).
    Gbrg16,
    /// Bayer R G / G B, MIPI CSI-2 packed 10 bits (4 pixels in 5 bytes) (V4L2 `pRAA`).
    Rggb10P,
    /// Bayer B G / G R, MIPI CSI-2 packed 10 bits (4 pixels in 5 bytes) (V4L2 `pBAA`).
    Bggr10P,
    /// Bayer G R / B G, MIPI CSI-2 packed 10 bits (4 pixels in 5 bytes) (V4L2 `pgAA`).
    Grbg10P,
    /// Bayer G B / R G, MIPI CSI-2 packed 10 bits (4 pixels in 5 bytes) (V4L2 `pGAA`).
    Gbrg10P,
    /// Bayer R G / G B, MIPI CSI-2 packed 12 bits (2 pixels in 3 bytes) (V4L2 `pRCC`).
    Rggb12P,
    /// Bayer B G / G R, MIPI CSI-2 packed 12 bits (2 pixels in 3 bytes) (V4L2 `pBCC`).
    Bggr12P,
    /// Bayer G R / B G, MIPI CSI-2 packed 12 bits (2 pixels in 3 bytes) (V4L2 `pgCC`).
    Grbg12P,
    /// Bayer G B / R G, MIPI CSI-2 packed 12 bits (2 pixels in 3 bytes) (V4L2 `pGCC`).
    Gbrg12P,
    /// 10-bit luma in little-endian 16-bit words (V4L2 `Y10 `).
    Y10,
    /// 12-bit luma in little-endian 16-bit words (V4L2 `Y12 `).
    Y12,
    /// 16-bit little-endian luma (V4L2 `Y16 `).
    Y16,
    /// 4:2:0, a Y plane then interleaved CbCr, 10 bits in the high bits of 16-bit words.
    P010,
    /// As P010 with 12 significant bits.
    P012,
    /// As P010 with 16 significant bits.
    P016,
}

impl PixelFormat {
    /// Every raw (uncompressed) format pinframe knows, in the order the CLI lists them.
    /// The compressed ones are in [`PixelFormat::COMPRESSED`].
    pub const ALL: [PixelFormat; 49] = [
        PixelFormat::Yuyv,
        PixelFormat::Uyvy,
        PixelFormat::Yvyu,
        PixelFormat::Vyuy,
        PixelFormat::Nv12,
        PixelFormat::Nv21,
        PixelFormat::Nv16,
        PixelFormat::Nv61,
        PixelFormat::I420,
        PixelFormat::Yv12,
        PixelFormat::I422,
        PixelFormat::I444,
        PixelFormat::Grey,
        PixelFormat::Rgb,
        PixelFormat::Bgr,
        PixelFormat::Rgba,
        PixelFormat::Bgra,
        PixelFormat::PlanarRgb,
        PixelFormat::PlanarBgr,
        PixelFormat::Rggb8,
        PixelFormat::Bggr8,
        PixelFormat::Grbg8,
        PixelFormat::Gbrg8,
        PixelFormat::Rggb10,
        PixelFormat::Bggr10,
        PixelFormat::Grbg10,
        PixelFormat::Gbrg10,
        PixelFormat::Rggb12,
        PixelFormat::Bggr12,
        PixelFormat::Grbg12,
        PixelFormat::Gbrg12,
        PixelFormat::Rggb16,
        PixelFormat::Bggr16,
        PixelFormat::Grbg16,
        PixelFormat::Gbrg16,
        PixelFormat::Rggb10P,
        PixelFormat::Bggr10P,
        PixelFormat::Grbg10P,
        PixelFormat::Gbrg10P,
        PixelFormat::Rggb12P,
        PixelFormat::Bggr12P,
        PixelFormat::Grbg12P,
        PixelFormat::Gbrg12P,
        PixelFormat::Y10,
        PixelFormat::Y12,
        PixelFormat::Y16,
        PixelFormat::P010,
        PixelFormat::P012,
        PixelFormat::P016,
    ];

    /// The compressed formats: decoded on the CPU, then converted as a raw format is.
    pub const COMPRESSED: [PixelFormat; 1] = [PixelFormat::Mjpeg];

    /// Every source format a conversion reads: [`PixelFormat::ALL`], then
    /// [`PixelFormat::COMPRESSED`].
    pub const SOURCES: [PixelFormat; 50] = {
        let mut out = [PixelFormat::Grey; 50];
        let mut i = 0;
        while i < PixelFormat::ALL.len() {
            out[i] = PixelFormat::ALL[i];
            i += 1;
        }
        let mut j = 0;
        while j < PixelFormat::COMPRESSED.len() {
            out[i + j] = PixelFormat::COMPRESSED[j];
            j += 1;
        }
        assert!(i + j == out.len(), "SOURCES has the wrong length");
        out
    };

    /// The lowercase name (`yuyv`, `nv12`, `planar-rgb`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            PixelFormat::Yuyv => "yuyv",
            PixelFormat::Uyvy => "uyvy",
            PixelFormat::Yvyu => "yvyu",
            PixelFormat::Vyuy => "vyuy",
            PixelFormat::Nv12 => "nv12",
            PixelFormat::Nv21 => "nv21",
            PixelFormat::Nv16 => "nv16",
            PixelFormat::Nv61 => "nv61",
            PixelFormat::I420 => "i420",
            PixelFormat::Yv12 => "yv12",
            PixelFormat::I422 => "i422",
            PixelFormat::I444 => "i444",
            PixelFormat::Mjpeg => "mjpeg",
            PixelFormat::Grey => "grey",
            PixelFormat::Rgb => "rgb",
            PixelFormat::Bgr => "bgr",
            PixelFormat::Rgba => "rgba",
            PixelFormat::Bgra => "bgra",
            PixelFormat::PlanarRgb => "planar-rgb",
            PixelFormat::PlanarBgr => "planar-bgr",
            PixelFormat::Rggb8 => "rggb8",
            PixelFormat::Bggr8 => "bggr8",
            PixelFormat::Grbg8 => "grbg8",
            PixelFormat::Gbrg8 => "gbrg8",
            PixelFormat::Rggb10 => "rggb10",
            PixelFormat::Bggr10 => "bggr10",
            PixelFormat::Grbg10 => "grbg10",
            PixelFormat::Gbrg10 => "gbrg10",
            PixelFormat::Rggb12 => "rggb12",
            PixelFormat::Bggr12 => "bggr12",
            PixelFormat::Grbg12 => "grbg12",
            PixelFormat::Gbrg12 => "gbrg12",
            PixelFormat::Rggb16 => "rggb16",
            PixelFormat::Bggr16 => "bggr16",
            PixelFormat::Grbg16 => "grbg16",
            PixelFormat::Gbrg16 => "gbrg16",
            PixelFormat::Rggb10P => "rggb10p",
            PixelFormat::Bggr10P => "bggr10p",
            PixelFormat::Grbg10P => "grbg10p",
            PixelFormat::Gbrg10P => "gbrg10p",
            PixelFormat::Rggb12P => "rggb12p",
            PixelFormat::Bggr12P => "bggr12p",
            PixelFormat::Grbg12P => "grbg12p",
            PixelFormat::Gbrg12P => "gbrg12p",
            PixelFormat::Y10 => "y10",
            PixelFormat::Y12 => "y12",
            PixelFormat::Y16 => "y16",
            PixelFormat::P010 => "p010",
            PixelFormat::P012 => "p012",
            PixelFormat::P016 => "p016",
        }
    }

    /// How the samples are arranged.
    pub const fn family(self) -> FormatFamily {
        match self {
            PixelFormat::Yuyv | PixelFormat::Uyvy | PixelFormat::Yvyu | PixelFormat::Vyuy => {
                FormatFamily::PackedYuv422
            }
            PixelFormat::Nv12 | PixelFormat::Nv21 | PixelFormat::Nv16 | PixelFormat::Nv61 => {
                FormatFamily::SemiPlanarYuv
            }
            PixelFormat::I420 | PixelFormat::Yv12 | PixelFormat::I422 | PixelFormat::I444 => {
                FormatFamily::PlanarYuv
            }
            PixelFormat::Mjpeg => FormatFamily::Jpeg,
            PixelFormat::Grey => FormatFamily::Grey,
            PixelFormat::Rgb | PixelFormat::Bgr | PixelFormat::Rgba | PixelFormat::Bgra => {
                FormatFamily::PackedRgb
            }
            PixelFormat::PlanarRgb | PixelFormat::PlanarBgr => FormatFamily::PlanarRgb,
            PixelFormat::Y10 | PixelFormat::Y12 | PixelFormat::Y16 => FormatFamily::DeepGrey,
            PixelFormat::P010 | PixelFormat::P012 | PixelFormat::P016 => {
                FormatFamily::SemiPlanarYuv16
            }
            _ => FormatFamily::Bayer,
        }
    }

    /// The colour filter array of a Bayer format.
    pub const fn cfa(self) -> Option<CfaPattern> {
        use PixelFormat as P;
        Some(match self {
            P::Rggb8 | P::Rggb10 | P::Rggb12 | P::Rggb16 | P::Rggb10P | P::Rggb12P => {
                CfaPattern::Rggb
            }
            P::Bggr8 | P::Bggr10 | P::Bggr12 | P::Bggr16 | P::Bggr10P | P::Bggr12P => {
                CfaPattern::Bggr
            }
            P::Grbg8 | P::Grbg10 | P::Grbg12 | P::Grbg16 | P::Grbg10P | P::Grbg12P => {
                CfaPattern::Grbg
            }
            P::Gbrg8 | P::Gbrg10 | P::Gbrg12 | P::Gbrg16 | P::Gbrg10P | P::Gbrg12P => {
                CfaPattern::Gbrg
            }
            _ => return None,
        })
    }

    /// How each sample is stored.
    pub const fn storage(self) -> SampleStorage {
        use PixelFormat as P;
        match self {
            P::Rggb10 | P::Bggr10 | P::Grbg10 | P::Gbrg10 | P::Y10 => {
                SampleStorage::Le16Low { bits: 10 }
            }
            P::Rggb12 | P::Bggr12 | P::Grbg12 | P::Gbrg12 | P::Y12 => {
                SampleStorage::Le16Low { bits: 12 }
            }
            P::Rggb16 | P::Bggr16 | P::Grbg16 | P::Gbrg16 | P::Y16 => {
                SampleStorage::Le16Low { bits: 16 }
            }
            P::Rggb10P | P::Bggr10P | P::Grbg10P | P::Gbrg10P => SampleStorage::Csi2Packed10,
            P::Rggb12P | P::Bggr12P | P::Grbg12P | P::Gbrg12P => SampleStorage::Csi2Packed12,
            P::P010 => SampleStorage::Le16High { bits: 10 },
            P::P012 => SampleStorage::Le16High { bits: 12 },
            P::P016 => SampleStorage::Le16High { bits: 16 },
            _ => SampleStorage::Byte,
        }
    }

    /// True for formats pinframe reads but never writes (Bayer, deep grey, 16-bit YUV,
    /// every YUV format, and the compressed ones).
    pub const fn is_source_only(self) -> bool {
        self.is_yuv()
            || matches!(
                self.family(),
                FormatFamily::Bayer | FormatFamily::DeepGrey | FormatFamily::Jpeg
            )
    }

    /// True for the compressed formats ([`PixelFormat::COMPRESSED`]).
    pub const fn is_compressed(self) -> bool {
        matches!(self.family(), FormatFamily::Jpeg)
    }

    /// The multiples a width and a height of this format must be: 2 and 2 for Bayer (a
    /// CFA image is whole 2x2 tiles), 4 and 2 for CSI-2 RAW10 (whole 5-byte groups), 1
    /// and 1 otherwise (odd YUV sizes round their chroma up).
    pub const fn size_multiple(self) -> (u32, u32) {
        match (self.family(), self.storage()) {
            (FormatFamily::Bayer, SampleStorage::Csi2Packed10) => (4, 2),
            (FormatFamily::Bayer, _) => (2, 2),
            _ => (1, 1),
        }
    }

    /// True for the YUV formats (which must be `u8`).
    pub const fn is_yuv(self) -> bool {
        matches!(
            self.family(),
            FormatFamily::PackedYuv422
                | FormatFamily::SemiPlanarYuv
                | FormatFamily::PlanarYuv
                | FormatFamily::SemiPlanarYuv16
        )
    }

    /// Number of planes.
    pub const fn plane_count(self) -> usize {
        match self.family() {
            FormatFamily::PackedYuv422
            | FormatFamily::Grey
            | FormatFamily::PackedRgb
            | FormatFamily::Bayer
            | FormatFamily::DeepGrey
            | FormatFamily::Jpeg => 1,
            FormatFamily::SemiPlanarYuv | FormatFamily::SemiPlanarYuv16 => 2,
            FormatFamily::PlanarYuv | FormatFamily::PlanarRgb => 3,
        }
    }

    /// Chroma subsampling as (horizontal, vertical) divisors; (1, 1) for non-YUV formats.
    pub const fn chroma_subsampling(self) -> (u32, u32) {
        match self {
            PixelFormat::Yuyv
            | PixelFormat::Uyvy
            | PixelFormat::Yvyu
            | PixelFormat::Vyuy
            | PixelFormat::Nv16
            | PixelFormat::Nv61
            | PixelFormat::I422 => (2, 1),
            PixelFormat::Nv12
            | PixelFormat::Nv21
            | PixelFormat::I420
            | PixelFormat::Yv12
            | PixelFormat::P010
            | PixelFormat::P012
            | PixelFormat::P016 => (2, 2),
            _ => (1, 1),
        }
    }

    /// Colour channels of an RGB-family or grey pixel (3 for RGB/BGR and planar, 4 for
    /// RGBA/BGRA, 1 for grey); 3 for YUV (Y, U, V) and for Bayer (its demosaiced R, G, B).
    pub const fn channels(self) -> usize {
        match self {
            PixelFormat::Grey | PixelFormat::Y10 | PixelFormat::Y12 | PixelFormat::Y16 => 1,
            PixelFormat::Rgba | PixelFormat::Bgra => 4,
            _ => 3,
        }
    }

    /// For RGB-family formats, the memory position of R, G and B (and alpha, if any).
    pub const fn rgb_order(self) -> Option<([usize; 3], Option<usize>)> {
        match self {
            PixelFormat::Rgb | PixelFormat::PlanarRgb => Some(([0, 1, 2], None)),
            PixelFormat::Bgr | PixelFormat::PlanarBgr => Some(([2, 1, 0], None)),
            PixelFormat::Rgba => Some(([0, 1, 2], Some(3))),
            PixelFormat::Bgra => Some(([2, 1, 0], Some(3))),
            _ => None,
        }
    }

    /// Byte offsets of Y0, U, Y1, V inside a packed 4:2:2 macropixel.
    pub const fn packed_yuv_offsets(self) -> Option<[usize; 4]> {
        match self {
            PixelFormat::Yuyv => Some([0, 1, 2, 3]),
            PixelFormat::Uyvy => Some([1, 0, 3, 2]),
            PixelFormat::Yvyu => Some([0, 3, 2, 1]),
            PixelFormat::Vyuy => Some([1, 2, 3, 0]),
            _ => None,
        }
    }

    /// For semi-planar formats, true when the chroma plane stores V before U (NV21, NV61).
    pub const fn chroma_swapped(self) -> bool {
        matches!(
            self,
            PixelFormat::Nv21 | PixelFormat::Nv61 | PixelFormat::Yv12
        )
    }

    /// The DRM fourcc (`drm_fourcc.h`) describing this format as one image, if any.
    /// Packed RGB formats map by memory byte order (bytes R,G,B is `DRM_FORMAT_BGR888`).
    pub const fn drm_fourcc(self) -> Option<u32> {
        use drm_fourcc::DrmFourcc as F;
        Some(match self {
            PixelFormat::Yuyv => F::Yuyv,
            PixelFormat::Uyvy => F::Uyvy,
            PixelFormat::Yvyu => F::Yvyu,
            PixelFormat::Vyuy => F::Vyuy,
            PixelFormat::Nv12 => F::Nv12,
            PixelFormat::Nv21 => F::Nv21,
            PixelFormat::Nv16 => F::Nv16,
            PixelFormat::Nv61 => F::Nv61,
            PixelFormat::I420 => F::Yuv420,
            PixelFormat::Yv12 => F::Yvu420,
            PixelFormat::I422 => F::Yuv422,
            PixelFormat::I444 => F::Yuv444,
            PixelFormat::Grey => F::R8,
            PixelFormat::Rgb => F::Bgr888,
            PixelFormat::Bgr => F::Rgb888,
            PixelFormat::Rgba => F::Abgr8888,
            PixelFormat::Bgra => F::Argb8888,
            PixelFormat::Y16 => F::R16,
            PixelFormat::P010 => F::P010,
            PixelFormat::P012 => F::P012,
            PixelFormat::P016 => F::P016,
            // DRM has no Bayer formats, and none for 10/12-bit grey in 16-bit words.
            _ => return None,
        } as u32)
    }

    /// The single-buffer V4L2 fourcc (`videodev2.h`), if V4L2 has one.
    pub const fn v4l2_fourcc(self) -> Option<u32> {
        Some(match self {
            PixelFormat::Yuyv => fourcc(b"YUYV"),
            PixelFormat::Uyvy => fourcc(b"UYVY"),
            PixelFormat::Yvyu => fourcc(b"YVYU"),
            PixelFormat::Vyuy => fourcc(b"VYUY"),
            PixelFormat::Nv12 => fourcc(b"NV12"),
            PixelFormat::Nv21 => fourcc(b"NV21"),
            PixelFormat::Nv16 => fourcc(b"NV16"),
            PixelFormat::Nv61 => fourcc(b"NV61"),
            PixelFormat::I420 => fourcc(b"YU12"),
            PixelFormat::Yv12 => fourcc(b"YV12"),
            PixelFormat::I422 => fourcc(b"422P"),
            PixelFormat::Mjpeg => fourcc(b"MJPG"),
            PixelFormat::Grey => fourcc(b"GREY"),
            PixelFormat::Rgb => fourcc(b"RGB3"),
            PixelFormat::Bgr => fourcc(b"BGR3"),
            PixelFormat::Rgba => fourcc(b"AB24"),
            PixelFormat::Bgra => fourcc(b"AR24"),
            PixelFormat::Rggb8 => fourcc(b"RGGB"),
            PixelFormat::Bggr8 => fourcc(b"BA81"),
            PixelFormat::Grbg8 => fourcc(b"GRBG"),
            PixelFormat::Gbrg8 => fourcc(b"GBRG"),
            PixelFormat::Rggb10 => fourcc(b"RG10"),
            PixelFormat::Bggr10 => fourcc(b"BG10"),
            PixelFormat::Grbg10 => fourcc(b"BA10"),
            PixelFormat::Gbrg10 => fourcc(b"GB10"),
            PixelFormat::Rggb12 => fourcc(b"RG12"),
            PixelFormat::Bggr12 => fourcc(b"BG12"),
            PixelFormat::Grbg12 => fourcc(b"BA12"),
            PixelFormat::Gbrg12 => fourcc(b"GB12"),
            PixelFormat::Rggb16 => fourcc(b"RG16"),
            PixelFormat::Bggr16 => fourcc(b"BYR2"),
            PixelFormat::Grbg16 => fourcc(b"GR16"),
            PixelFormat::Gbrg16 => fourcc(b"GB16"),
            PixelFormat::Rggb10P => fourcc(b"pRAA"),
            PixelFormat::Bggr10P => fourcc(b"pBAA"),
            PixelFormat::Grbg10P => fourcc(b"pgAA"),
            PixelFormat::Gbrg10P => fourcc(b"pGAA"),
            PixelFormat::Rggb12P => fourcc(b"pRCC"),
            PixelFormat::Bggr12P => fourcc(b"pBCC"),
            PixelFormat::Grbg12P => fourcc(b"pgCC"),
            PixelFormat::Gbrg12P => fourcc(b"pGCC"),
            PixelFormat::Y10 => fourcc(b"Y10 "),
            PixelFormat::Y12 => fourcc(b"Y12 "),
            PixelFormat::Y16 => fourcc(b"Y16 "),
            PixelFormat::P010 => fourcc(b"P010"),
            PixelFormat::P012 => fourcc(b"P012"),
            PixelFormat::PlanarRgb
            | PixelFormat::PlanarBgr
            | PixelFormat::P016
            | PixelFormat::I444 => return None,
        })
    }

    /// The V4L2 fourcc of the variant with one buffer per plane (`NM12`, `YM12`, ...).
    pub const fn v4l2_multi_buffer_fourcc(self) -> Option<u32> {
        Some(match self {
            PixelFormat::Nv12 => fourcc(b"NM12"),
            PixelFormat::Nv21 => fourcc(b"NM21"),
            PixelFormat::Nv16 => fourcc(b"NM16"),
            PixelFormat::Nv61 => fourcc(b"NM61"),
            PixelFormat::I420 => fourcc(b"YM12"),
            PixelFormat::Yv12 => fourcc(b"YM21"),
            PixelFormat::I422 => fourcc(b"YM16"),
            PixelFormat::I444 => fourcc(b"YM24"),
            _ => return None,
        })
    }

    /// Maps a V4L2 fourcc to a format; the flag is true for the one-buffer-per-plane variants.
    pub fn from_v4l2_fourcc(code: u32) -> Option<(PixelFormat, bool)> {
        // `JPEG` is what some drivers call the same Motion-JPEG stream.
        if code == fourcc(b"JPEG") {
            return Some((PixelFormat::Mjpeg, false));
        }
        PixelFormat::SOURCES.iter().find_map(|&f| {
            if f.v4l2_fourcc() == Some(code) {
                Some((f, false))
            } else if f.v4l2_multi_buffer_fourcc() == Some(code) {
                Some((f, true))
            } else {
                None
            }
        })
    }

    /// Maps a DRM fourcc to a format.
    pub fn from_drm_fourcc(code: u32) -> Option<PixelFormat> {
        PixelFormat::ALL
            .iter()
            .copied()
            .find(|f| f.drm_fourcc() == Some(code))
    }
}

impl fmt::Display for PixelFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for PixelFormat {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        let lower = s.to_ascii_lowercase();
        let alias = match lower.as_str() {
            "gray" | "y8" => "grey",
            "yu12" => "i420",
            "422p" | "yuv422p" => "i422",
            "yuv444p" => "i444",
            "mjpg" | "jpeg" | "motion-jpeg" => "mjpeg",
            "rgb3" | "rgb24" => "rgb",
            "bgr3" | "bgr24" => "bgr",
            "planar_rgb" | "rgbp" => "planar-rgb",
            "planar_bgr" | "bgrp" => "planar-bgr",
            "ba81" | "sbggr8" => "bggr8",
            "srggb8" => "rggb8",
            "sgrbg8" => "grbg8",
            "sgbrg8" => "gbrg8",
            "rggb" => "rggb8",
            "bggr" => "bggr8",
            "grbg" => "grbg8",
            "gbrg" => "gbrg8",
            other => other,
        };
        PixelFormat::SOURCES
            .iter()
            .copied()
            .find(|f| f.name() == alias)
            .ok_or_else(|| {
                let names: Vec<&str> = PixelFormat::SOURCES.iter().map(|f| f.name()).collect();
                Error::InvalidArgument(format!(
                    "unknown pixel format {s:?}; expected one of: {}",
                    names.join(" ")
                ))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for f in PixelFormat::SOURCES {
            assert_eq!(f.name().parse::<PixelFormat>().unwrap(), f);
        }
        assert!("nv13".parse::<PixelFormat>().is_err());
    }

    #[test]
    fn v4l2_fourccs_round_trip() {
        assert_eq!(
            PixelFormat::from_v4l2_fourcc(fourcc(b"JPEG")),
            Some((PixelFormat::Mjpeg, false))
        );
        assert!(PixelFormat::Mjpeg.is_compressed() && PixelFormat::Mjpeg.is_source_only());
        for f in PixelFormat::SOURCES {
            if let Some(c) = f.v4l2_fourcc() {
                assert_eq!(PixelFormat::from_v4l2_fourcc(c), Some((f, false)), "{f}");
            }
            if let Some(c) = f.v4l2_multi_buffer_fourcc() {
                assert_eq!(PixelFormat::from_v4l2_fourcc(c), Some((f, true)), "{f}");
            }
        }
        assert_eq!(fourcc_to_string(fourcc(b"NV12")), "NV12");
    }

    #[test]
    fn drm_fourccs_are_drm_fourcc_h_codes() {
        // The character codes of drm_fourcc.h, written out independently of the crate.
        let want: [(PixelFormat, &[u8; 4]); 17] = [
            (PixelFormat::Yuyv, b"YUYV"),
            (PixelFormat::Uyvy, b"UYVY"),
            (PixelFormat::Yvyu, b"YVYU"),
            (PixelFormat::Vyuy, b"VYUY"),
            (PixelFormat::Nv12, b"NV12"),
            (PixelFormat::Nv21, b"NV21"),
            (PixelFormat::Nv16, b"NV16"),
            (PixelFormat::Nv61, b"NV61"),
            (PixelFormat::I420, b"YU12"),
            (PixelFormat::Yv12, b"YV12"),
            (PixelFormat::I422, b"YU16"),
            (PixelFormat::I444, b"YU24"),
            (PixelFormat::Grey, b"R8  "),
            // Memory byte order R,G,B is DRM's BGR888 (little-endian [23:0] B:G:R).
            (PixelFormat::Rgb, b"BG24"),
            (PixelFormat::Bgr, b"RG24"),
            (PixelFormat::Rgba, b"AB24"),
            (PixelFormat::Bgra, b"AR24"),
        ];
        for (f, code) in want {
            assert_eq!(f.drm_fourcc(), Some(fourcc(code)), "{f}");
            assert_eq!(PixelFormat::from_drm_fourcc(fourcc(code)), Some(f), "{f}");
        }
        assert_eq!(PixelFormat::PlanarRgb.drm_fourcc(), None);
    }
}
