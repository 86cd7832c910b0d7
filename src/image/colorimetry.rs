//! YUV colorimetry: the matrix and the quantisation range.

use std::fmt;
use std::str::FromStr;

use crate::{Error, Result};

/// The YCbCr matrix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Matrix {
    /// ITU-R BT.601 (SD).
    Bt601,
    /// ITU-R BT.709 (HD).
    Bt709,
    /// ITU-R BT.2020 (non-constant luminance).
    Bt2020,
}

impl Matrix {
    /// The luma weights (Kr, Kb) that define the matrix; Kg = 1 - Kr - Kb.
    pub const fn kr_kb(self) -> (f64, f64) {
        match self {
            Matrix::Bt601 => (0.299, 0.114),
            Matrix::Bt709 => (0.2126, 0.0722),
            Matrix::Bt2020 => (0.2627, 0.0593),
        }
    }

    /// Lowercase name as the CLI spells it.
    pub const fn name(self) -> &'static str {
        match self {
            Matrix::Bt601 => "bt601",
            Matrix::Bt709 => "bt709",
            Matrix::Bt2020 => "bt2020",
        }
    }
}

/// The quantisation range of Y'CbCr samples.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Range {
    /// Y in 16..=235, Cb/Cr in 16..=240 ("TV", "studio swing").
    Limited,
    /// Y, Cb, Cr in 0..=255 ("PC", "JPEG").
    Full,
}

impl Range {
    /// Lowercase name as the CLI spells it.
    pub const fn name(self) -> &'static str {
        match self {
            Range::Limited => "limited",
            Range::Full => "full",
        }
    }
}

/// How YUV samples map to RGB.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Colorimetry {
    /// The matrix.
    pub matrix: Matrix,
    /// The range.
    pub range: Range,
}

impl Colorimetry {
    /// BT.601, limited range.
    pub const BT601_LIMITED: Colorimetry = Colorimetry::new(Matrix::Bt601, Range::Limited);
    /// BT.709, limited range.
    pub const BT709_LIMITED: Colorimetry = Colorimetry::new(Matrix::Bt709, Range::Limited);

    /// A colorimetry from its parts.
    pub const fn new(matrix: Matrix, range: Range) -> Self {
        Colorimetry { matrix, range }
    }

    /// The default for a frame of unknown colorimetry: BT.601 limited below 720 lines,
    /// BT.709 limited at 720 lines and above.
    pub const fn default_for_height(height: u32) -> Self {
        if height >= 720 {
            Colorimetry::BT709_LIMITED
        } else {
            Colorimetry::BT601_LIMITED
        }
    }

    /// The YUV→RGB transform on values in 0..=255 as `rgb = m * [y - y0, u - 128, v - 128]`,
    /// returned as (3x3 matrix row-major, y0). Exact f64; backends derive their own
    /// fixed-point or float constants from it.
    pub fn yuv_to_rgb(self) -> ([[f64; 3]; 3], f64) {
        let (kr, kb) = self.matrix.kr_kb();
        let kg = 1.0 - kr - kb;
        let (ys, cs, y0) = match self.range {
            Range::Limited => (255.0 / 219.0, 255.0 / 224.0, 16.0),
            Range::Full => (1.0, 1.0, 0.0),
        };
        let rv = 2.0 * (1.0 - kr);
        let bu = 2.0 * (1.0 - kb);
        let gu = -bu * kb / kg;
        let gv = -rv * kr / kg;
        (
            [
                [ys, 0.0, rv * cs],
                [ys, gu * cs, gv * cs],
                [ys, bu * cs, 0.0],
            ],
            y0,
        )
    }
}

impl fmt::Display for Colorimetry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.matrix.name(), self.range.name())
    }
}

impl FromStr for Matrix {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "bt601" | "601" | "smpte170m" => Ok(Matrix::Bt601),
            "bt709" | "709" => Ok(Matrix::Bt709),
            "bt2020" | "2020" => Ok(Matrix::Bt2020),
            _ => Err(Error::InvalidArgument(format!(
                "unknown matrix {s:?}; expected bt601, bt709 or bt2020"
            ))),
        }
    }
}

impl FromStr for Range {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "limited" | "tv" => Ok(Range::Limited),
            "full" | "pc" => Ok(Range::Full),
            _ => Err(Error::InvalidArgument(format!(
                "unknown range {s:?}; expected limited or full"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bt601_limited_matches_published_coefficients() {
        let (m, y0) = Colorimetry::BT601_LIMITED.yuv_to_rgb();
        assert_eq!(y0, 16.0);
        assert!((m[0][0] - 1.164383).abs() < 1e-6);
        assert!((m[0][2] - 1.596027).abs() < 1e-6);
        assert!((m[1][1] + 0.391762).abs() < 1e-6);
        assert!((m[1][2] + 0.812968).abs() < 1e-6);
        assert!((m[2][1] - 2.017232).abs() < 1e-6);
    }

    #[test]
    fn auto_picks_by_height() {
        assert_eq!(
            Colorimetry::default_for_height(480),
            Colorimetry::BT601_LIMITED
        );
        assert_eq!(
            Colorimetry::default_for_height(720),
            Colorimetry::BT709_LIMITED
        );
    }
}
