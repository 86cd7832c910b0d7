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
    /// Y, U and V planes, 4:2:0 (I420, YV12).
    PlanarYuv420,
    /// One 8-bit luma channel.
    Grey,
    /// Interleaved RGB(A) channels.
    PackedRgb,
    /// One plane per colour channel (CHW).
    PlanarRgb,
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
}

impl PixelFormat {
    /// Every format pinframe knows, in the order the CLI lists them.
    pub const ALL: [PixelFormat; 17] = [
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
        PixelFormat::Grey,
        PixelFormat::Rgb,
        PixelFormat::Bgr,
        PixelFormat::Rgba,
        PixelFormat::Bgra,
        PixelFormat::PlanarRgb,
        PixelFormat::PlanarBgr,
    ];

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
            PixelFormat::Grey => "grey",
            PixelFormat::Rgb => "rgb",
            PixelFormat::Bgr => "bgr",
            PixelFormat::Rgba => "rgba",
            PixelFormat::Bgra => "bgra",
            PixelFormat::PlanarRgb => "planar-rgb",
            PixelFormat::PlanarBgr => "planar-bgr",
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
            PixelFormat::I420 | PixelFormat::Yv12 => FormatFamily::PlanarYuv420,
            PixelFormat::Grey => FormatFamily::Grey,
            PixelFormat::Rgb | PixelFormat::Bgr | PixelFormat::Rgba | PixelFormat::Bgra => {
                FormatFamily::PackedRgb
            }
            PixelFormat::PlanarRgb | PixelFormat::PlanarBgr => FormatFamily::PlanarRgb,
        }
    }

    /// True for the YUV formats (which must be `u8`).
    pub const fn is_yuv(self) -> bool {
        matches!(
            self.family(),
            FormatFamily::PackedYuv422 | FormatFamily::SemiPlanarYuv | FormatFamily::PlanarYuv420
        )
    }

    /// Number of planes.
    pub const fn plane_count(self) -> usize {
        match self.family() {
            FormatFamily::PackedYuv422 | FormatFamily::Grey | FormatFamily::PackedRgb => 1,
            FormatFamily::SemiPlanarYuv => 2,
            FormatFamily::PlanarYuv420 | FormatFamily::PlanarRgb => 3,
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
            | PixelFormat::Nv61 => (2, 1),
            PixelFormat::Nv12 | PixelFormat::Nv21 | PixelFormat::I420 | PixelFormat::Yv12 => (2, 2),
            _ => (1, 1),
        }
    }

    /// Colour channels of an RGB-family or grey pixel (3 for RGB/BGR and planar, 4 for
    /// RGBA/BGRA, 1 for grey); 3 for YUV (Y, U, V).
    pub const fn channels(self) -> usize {
        match self {
            PixelFormat::Grey => 1,
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
            PixelFormat::Grey => F::R8,
            PixelFormat::Rgb => F::Bgr888,
            PixelFormat::Bgr => F::Rgb888,
            PixelFormat::Rgba => F::Abgr8888,
            PixelFormat::Bgra => F::Argb8888,
            PixelFormat::PlanarRgb | PixelFormat::PlanarBgr => return None,
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
            PixelFormat::Grey => fourcc(b"GREY"),
            PixelFormat::Rgb => fourcc(b"RGB3"),
            PixelFormat::Bgr => fourcc(b"BGR3"),
            PixelFormat::Rgba => fourcc(b"AB24"),
            PixelFormat::Bgra => fourcc(b"AR24"),
            PixelFormat::PlanarRgb | PixelFormat::PlanarBgr => return None,
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
            _ => return None,
        })
    }

    /// Maps a V4L2 fourcc to a format; the flag is true for the one-buffer-per-plane variants.
    pub fn from_v4l2_fourcc(code: u32) -> Option<(PixelFormat, bool)> {
        PixelFormat::ALL.iter().find_map(|&f| {
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
            "rgb3" | "rgb24" => "rgb",
            "bgr3" | "bgr24" => "bgr",
            "planar_rgb" | "rgbp" => "planar-rgb",
            "planar_bgr" | "bgrp" => "planar-bgr",
            other => other,
        };
        PixelFormat::ALL
            .iter()
            .copied()
            .find(|f| f.name() == alias)
            .ok_or_else(|| {
                let names: Vec<&str> = PixelFormat::ALL.iter().map(|f| f.name()).collect();
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
        for f in PixelFormat::ALL {
            assert_eq!(f.name().parse::<PixelFormat>().unwrap(), f);
        }
        assert!("nv13".parse::<PixelFormat>().is_err());
    }

    #[test]
    fn v4l2_fourccs_round_trip() {
        for f in PixelFormat::ALL {
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
        let want: [(PixelFormat, &[u8; 4]); 15] = [
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
