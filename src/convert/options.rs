//! What a caller can ask of a conversion, and what it reports back.

use std::fmt;
use std::str::FromStr;

use crate::image::{Colorimetry, Matrix, Range};
use crate::{DType, Error, Result};

/// A rectangle of the source image, in source pixels: the part that is converted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Crop {
    /// Left edge (first column).
    pub x: u32,
    /// Top edge (first row).
    pub y: u32,
    /// Width in pixels (at least 1).
    pub width: u32,
    /// Height in pixels (at least 1).
    pub height: u32,
}

impl Crop {
    /// A crop from its left, top, width and height.
    pub const fn new(x: u32, y: u32, width: u32, height: u32) -> Self {
        Crop {
            x,
            y,
            width,
            height,
        }
    }
}

/// How the (cropped, flipped, rotated) source is fitted into the destination.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Fit {
    /// Scale each axis independently so the source covers the destination exactly.
    #[default]
    Stretch,
    /// Scale uniformly so the whole source fits, centre it, and fill the rest with `pad`
    /// (R, G, B in 0..=255; YOLO models use `[114, 114, 114]`).
    Letterbox {
        /// The padding colour, R, G, B.
        pad: [u8; 3],
    },
    /// Scale uniformly so the source covers the whole destination, centre it, and crop
    /// what overflows.
    Fill,
}

/// Clockwise rotation, applied after the crop and the flip.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Rotation {
    /// No rotation.
    #[default]
    R0,
    /// 90 degrees clockwise.
    R90,
    /// 180 degrees.
    R180,
    /// 270 degrees clockwise (90 counter-clockwise).
    R270,
}

impl Rotation {
    /// The rotation for a clockwise angle in degrees (0, 90, 180 or 270).
    pub fn from_degrees(degrees: u32) -> Result<Self> {
        match degrees {
            0 => Ok(Rotation::R0),
            90 => Ok(Rotation::R90),
            180 => Ok(Rotation::R180),
            270 => Ok(Rotation::R270),
            _ => Err(Error::InvalidArgument(format!(
                "rotation {degrees} is not supported; use 0, 90, 180 or 270 (clockwise degrees)"
            ))),
        }
    }

    /// The clockwise angle in degrees.
    pub const fn degrees(self) -> u32 {
        match self {
            Rotation::R0 => 0,
            Rotation::R90 => 90,
            Rotation::R180 => 180,
            Rotation::R270 => 270,
        }
    }

    /// True when the rotation swaps width and height (90 and 270).
    pub const fn swaps_axes(self) -> bool {
        matches!(self, Rotation::R90 | Rotation::R270)
    }
}

/// Mirroring, applied after the crop and before the rotation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Flip {
    /// No mirroring.
    #[default]
    None,
    /// Mirror left-right.
    Horizontal,
    /// Mirror top-bottom.
    Vertical,
}

impl FromStr for Flip {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "none" => Ok(Flip::None),
            "h" | "horizontal" => Ok(Flip::Horizontal),
            "v" | "vertical" => Ok(Flip::Vertical),
            _ => Err(Error::InvalidArgument(format!(
                "unknown flip {s:?}; expected none, h or v"
            ))),
        }
    }
}

/// The resampling filter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Interpolation {
    /// Bilinear, pixel centres at +0.5, edges clamped (OpenCV `INTER_LINEAR`, `GL_LINEAR`).
    #[default]
    Bilinear,
    /// Nearest neighbour: the source pixel whose area contains the sample point.
    Nearest,
}

impl FromStr for Interpolation {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "bilinear" | "linear" => Ok(Interpolation::Bilinear),
            "nearest" => Ok(Interpolation::Nearest),
            _ => Err(Error::InvalidArgument(format!(
                "unknown interpolation {s:?}; expected nearest or bilinear"
            ))),
        }
    }
}

/// Per-channel normalisation of float outputs: `out = (v / 255 - mean) / std`, with the
/// channels in R, G, B order whatever the destination's memory order (a grey destination
/// uses index 0). Integer outputs ignore it unless they are quantised ([`Quantize`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Normalize {
    /// Subtracted after scaling to 0..=1.
    pub mean: [f32; 3],
    /// Divides after the mean is subtracted; every entry must be finite and non-zero.
    pub std: [f32; 3],
}

impl Normalize {
    /// No normalisation beyond scaling to 0..=1 (mean 0, std 1).
    pub const IDENTITY: Normalize = Normalize {
        mean: [0.0; 3],
        std: [1.0; 3],
    };
    /// The ImageNet statistics most torchvision models expect.
    pub const IMAGENET: Normalize = Normalize {
        mean: [0.485, 0.456, 0.406],
        std: [0.229, 0.224, 0.225],
    };
}

impl Default for Normalize {
    fn default() -> Self {
        Normalize::IDENTITY
    }
}

/// Quantisation of `u8` and `i8` outputs (the TFLite convention): for each channel,
/// `q = clamp(round(x / scale) + zero_point)` into the destination's range (0..=255 or
/// -128..=127), where `x` is the normalised value `(v / 255 - mean) / std` that a float
/// output would hold. Per tensor ([`Quantize::per_tensor`]) or per channel (R, G, B order
/// whatever the memory order; a grey destination uses index 0). Alpha stays opaque (255 or
/// 127). Without it, `u8` stores `v` itself and `i8` stores `v - 128` (u8 XOR 0x80), and
/// the normalisation is ignored.
///
/// ```
/// use pinframe::{ConvertOptions, Normalize, Quantize};
/// // An int8 model whose input is 0..=1 pixels quantised with scale 1/255, zero point -128.
/// let options = ConvertOptions {
///     quantize: Some(Quantize::per_tensor(1.0 / 255.0, -128)),
///     ..Default::default()
/// };
/// # let _ = options;
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Quantize {
    /// The size of one quantisation step, per channel; finite and positive.
    pub scale: [f32; 3],
    /// The integer that `x = 0` maps to, per channel; inside the destination's range.
    pub zero_point: [i32; 3],
}

impl Quantize {
    /// One scale and zero point for every channel (TFLite's per-tensor quantisation).
    pub const fn per_tensor(scale: f32, zero_point: i32) -> Self {
        Quantize {
            scale: [scale; 3],
            zero_point: [zero_point; 3],
        }
    }

    /// A scale and zero point per channel, in R, G, B order.
    pub const fn per_channel(scale: [f32; 3], zero_point: [i32; 3]) -> Self {
        Quantize { scale, zero_point }
    }

    /// The smallest and largest value of a quantised `dtype` (`u8` or `i8`), or an error
    /// naming the dtypes quantisation applies to.
    pub fn range(dtype: DType) -> Result<(i32, i32)> {
        match dtype {
            DType::U8 => Ok((0, 255)),
            DType::I8 => Ok((-128, 127)),
            other => Err(Error::InvalidArgument(format!(
                "quantisation applies to u8 and i8 destinations, not {other}; drop the \
                 quantisation or convert into a u8 or i8 tensor"
            ))),
        }
    }

    /// Checks the parameters for a `dtype` destination: finite positive scales and zero
    /// points inside the dtype's range.
    pub fn validate(&self, dtype: DType) -> Result<()> {
        let (lo, hi) = Quantize::range(dtype)?;
        for c in 0..3 {
            let s = self.scale[c];
            if !s.is_finite() || s <= 0.0 {
                return Err(Error::InvalidArgument(format!(
                    "quantisation channel {c}: scale {s} must be finite and positive"
                )));
            }
            let z = self.zero_point[c];
            if z < lo || z > hi {
                return Err(Error::InvalidArgument(format!(
                    "quantisation channel {c}: zero point {z} is outside the {dtype} range \
                     {lo}..={hi}"
                )));
            }
        }
        Ok(())
    }
}

impl FromStr for Quantize {
    type Err = Error;
    /// `SCALE,ZERO_POINT` (per tensor), as the CLI's `--quantize` takes it.
    fn from_str(s: &str) -> Result<Self> {
        let bad = || {
            Error::InvalidArgument(format!(
                "quantize {s:?}: expected SCALE,ZERO_POINT (e.g. 0.0078125,128)"
            ))
        };
        let (scale, zero) = s.split_once(',').ok_or_else(bad)?;
        let scale: f32 = scale.trim().parse().map_err(|_| bad())?;
        let zero: i32 = zero.trim().parse().map_err(|_| bad())?;
        Ok(Quantize::per_tensor(scale, zero))
    }
}

/// The transfer function a RAW conversion applies after its colour-correction matrix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Gamma {
    /// None: the output stays linear in the sensor's light (scaled to 0..=255).
    #[default]
    Linear,
    /// The sRGB curve (IEC 61966-2-1): `12.92 c` below 0.0031308, else
    /// `1.055 c^(1/2.4) - 0.055`. Models trained on ordinary photos expect it.
    Srgb,
}

impl FromStr for Gamma {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "linear" | "none" => Ok(Gamma::Linear),
            "srgb" => Ok(Gamma::Srgb),
            _ => Err(Error::InvalidArgument(format!(
                "unknown gamma {s:?}; expected linear or srgb"
            ))),
        }
    }
}

/// What a RAW (Bayer) conversion does before the geometry: the image-signal-processor
/// steps a sensor's frames need. Every other source ignores it. The order is fixed
/// (`src/convert/plan.rs` states it exactly): black level, white-balance gains (then the
/// clip to the white level), demosaic, colour-correction matrix (then the clip to
/// 0..=1), gamma, and only then the resampling, normalisation and quantisation every
/// source gets. The defaults are a plain demosaic: black 0, gains 1, identity matrix,
/// linear output.
///
/// ```
/// use pinframe::{ConvertOptions, Gamma, Isp};
/// // A 10-bit sensor with a black level of 64, daylight gains, sRGB output.
/// let options = ConvertOptions {
///     isp: Isp {
///         black_level: [64; 4],
///         gains: [1.9, 1.0, 1.6],
///         gamma: Gamma::Srgb,
///         ..Isp::IDENTITY
///     },
///     ..Default::default()
/// };
/// # let _ = options;
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Isp {
    /// The code a dark pixel reads, per CFA site in the order R, Gr (green on red rows),
    /// Gb (green on blue rows), B, in the format's own units (0..=1023 for 10-bit
    /// formats); below the white level `2^bits - 1`.
    pub black_level: [u16; 4],
    /// White-balance gains for R, G and B, applied after the black level; finite and
    /// positive.
    pub gains: [f32; 3],
    /// The colour-correction matrix from camera RGB to output RGB (rows are output R, G,
    /// B), applied to the demosaiced linear values; finite.
    pub ccm: [[f32; 3]; 3],
    /// The transfer function after the matrix.
    pub gamma: Gamma,
}

impl Isp {
    /// A plain demosaic: no black level, unit gains, identity matrix, linear output.
    pub const IDENTITY: Isp = Isp {
        black_level: [0; 4],
        gains: [1.0; 3],
        ccm: [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]],
        gamma: Gamma::Linear,
    };

    /// Checks the parameters for a source whose white level is `white` (`2^bits - 1`).
    pub fn validate(&self, white: u32) -> Result<()> {
        const SITES: [&str; 4] = ["R", "Gr", "Gb", "B"];
        for (site, &b) in SITES.iter().zip(&self.black_level) {
            if u32::from(b) >= white {
                return Err(Error::InvalidArgument(format!(
                    "isp black level {b} at the {site} sites is not below the white level \
                     {white} of this source; give a black level in the source's own units \
                     (0..={})",
                    white - 1
                )));
            }
        }
        for (c, &g) in ["R", "G", "B"].iter().zip(&self.gains) {
            if !g.is_finite() || g <= 0.0 {
                return Err(Error::InvalidArgument(format!(
                    "isp gain {g} for {c} must be finite and positive (1.0 leaves it as is)"
                )));
            }
        }
        if self.ccm.iter().flatten().any(|v| !v.is_finite()) {
            return Err(Error::InvalidArgument(format!(
                "isp colour-correction matrix {:?} has a non-finite entry",
                self.ccm
            )));
        }
        Ok(())
    }
}

impl Default for Isp {
    fn default() -> Self {
        Isp::IDENTITY
    }
}

/// Which YUV→RGB colorimetry a conversion uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum ColorimetryChoice {
    /// The source layout's colorimetry if known, else BT.601 limited below 720 lines and
    /// BT.709 limited at 720 lines and above ([`Colorimetry::default_for_height`]).
    #[default]
    Auto,
    /// Exactly this colorimetry, whatever the source says.
    Fixed(Colorimetry),
}

impl ColorimetryChoice {
    /// The colorimetry to use for a source of `height` lines whose layout says `known`.
    pub fn resolve(self, known: Option<Colorimetry>, height: u32) -> Colorimetry {
        match self {
            ColorimetryChoice::Fixed(c) => c,
            ColorimetryChoice::Auto => known.unwrap_or(Colorimetry::default_for_height(height)),
        }
    }

    /// `Auto` unless a matrix or a range is given; a missing half comes from `fallback`
    /// (how the CLI combines `--matrix` and `--range`).
    pub fn from_parts(
        matrix: Option<Matrix>,
        range: Option<Range>,
        fallback: Colorimetry,
    ) -> ColorimetryChoice {
        match (matrix, range) {
            (None, None) => ColorimetryChoice::Auto,
            (m, r) => ColorimetryChoice::Fixed(Colorimetry::new(
                m.unwrap_or(fallback.matrix),
                r.unwrap_or(fallback.range),
            )),
        }
    }
}

/// Everything a conversion can be asked to do. `ConvertOptions::default()` converts the
/// whole source, stretched to the destination, bilinear, colorimetry `Auto`, values
/// scaled to 0..=1 for float outputs.
///
/// Geometry order: the crop is taken first, then the flip, then the (clockwise) rotation,
/// then the result is fitted into the destination.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct ConvertOptions {
    /// The part of the source to convert (`None` = all of it).
    pub crop: Option<Crop>,
    /// Mirroring, after the crop.
    pub flip: Flip,
    /// Clockwise rotation, after the flip.
    pub rotation: Rotation,
    /// How the result is fitted into the destination.
    pub fit: Fit,
    /// The resampling filter.
    pub interpolation: Interpolation,
    /// YUV→RGB colorimetry.
    pub colorimetry: ColorimetryChoice,
    /// Normalisation: of float outputs, and of quantised ones before the quantisation.
    pub normalize: Normalize,
    /// Quantisation of `u8`/`i8` outputs (`None`: `u8` stores the 0..=255 value itself).
    pub quantize: Option<Quantize>,
    /// The RAW steps of a Bayer source (black level, gains, colour matrix, gamma);
    /// ignored for other sources.
    pub isp: Isp,
}

/// What a conversion did, so results (e.g. detection boxes) can be mapped back to
/// source pixels.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct ConvertInfo {
    /// Destination pixels per oriented source pixel, horizontally and vertically (the
    /// oriented source is the crop after flip and rotation; for a letterbox both are
    /// nearly equal, differing only by the rounding of the content size).
    pub scale: [f64; 2],
    /// Where the oriented source's top-left corner landed in the destination, in
    /// destination pixels (positive for a letterbox's padding, negative for a fill's
    /// overflow).
    pub offset: [i64; 2],
    /// The destination rectangle actually covered by source content, `[x, y, w, h]`;
    /// everything else is padding.
    pub content: [u32; 4],
    /// The colorimetry used (`None` for a source that is not YUV).
    pub colorimetry: Option<Colorimetry>,
    /// Affine map from destination coordinates to source coordinates (continuous,
    /// pixel `i` spanning `[i, i + 1)`): `src = [[a, b, c], [d, e, f]] * [x, y, 1]`.
    pub dst_to_src: [[f64; 3]; 2],
    /// The scale a compressed (`mjpeg`) source was decoded at: 1, or 2, 4 or 8 when the
    /// decoder downscaled in the DCT domain (1/2, 1/4, 1/8) because the destination
    /// needed no more. Always 1 for raw sources. The geometry above is in the frame's own
    /// pixels whatever the scale.
    pub decode_scale: u32,
}

impl ConvertInfo {
    /// Maps a destination point (continuous pixel coordinates, e.g. a box corner) back to
    /// the source image.
    pub fn to_source(&self, x: f64, y: f64) -> (f64, f64) {
        let m = &self.dst_to_src;
        (
            m[0][0] * x + m[0][1] * y + m[0][2],
            m[1][0] * x + m[1][1] * y + m[1][2],
        )
    }
}

impl fmt::Display for Fit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fit::Stretch => f.write_str("stretch"),
            Fit::Letterbox { pad } => write!(f, "letterbox({},{},{})", pad[0], pad[1], pad[2]),
            Fit::Fill => f.write_str("fill"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotation_degrees_round_trip() {
        for d in [0, 90, 180, 270] {
            assert_eq!(Rotation::from_degrees(d).unwrap().degrees(), d);
        }
        let e = Rotation::from_degrees(45).unwrap_err().to_string();
        assert!(e.contains("0, 90, 180 or 270"), "{e}");
    }

    #[test]
    fn colorimetry_auto_prefers_the_frame() {
        let c = ColorimetryChoice::Auto;
        assert_eq!(c.resolve(None, 480), Colorimetry::BT601_LIMITED);
        assert_eq!(c.resolve(None, 1080), Colorimetry::BT709_LIMITED);
        let full = Colorimetry::new(Matrix::Bt2020, Range::Full);
        assert_eq!(c.resolve(Some(full), 480), full);
        assert_eq!(ColorimetryChoice::Fixed(full).resolve(None, 1080), full);
        assert_eq!(
            ColorimetryChoice::from_parts(None, Some(Range::Full), Colorimetry::BT709_LIMITED),
            ColorimetryChoice::Fixed(Colorimetry::new(Matrix::Bt709, Range::Full))
        );
    }

    #[test]
    fn parses_cli_spellings() {
        assert_eq!("h".parse::<Flip>().unwrap(), Flip::Horizontal);
        assert_eq!(
            "nearest".parse::<Interpolation>().unwrap(),
            Interpolation::Nearest
        );
        assert!("diagonal".parse::<Flip>().is_err());
    }
}
