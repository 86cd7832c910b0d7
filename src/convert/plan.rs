//! The geometry and arithmetic of one conversion, computed once from the options and the
//! two layouts, and executed by every backend (CPU kernels, GL shaders) the same way.
//!
//! # The definition every backend implements
//!
//! For destination pixel `(i, j)` inside [`Plan::valid`]:
//!
//! 1. The sample point is `(sx, sy) = dst_to_src * (i + 0.5, j + 0.5, 1)`, in continuous
//!    source coordinates (source pixel `k` spans `[k, k + 1)`).
//! 2. Bilinear: `u = sx - 0.5`, `x0 = floor(u)`, `fx = u - x0`; the taps `x0` and `x0 + 1`
//!    are clamped to the crop's columns `[src_min[0], src_max[0]]` (likewise rows). Nearest:
//!    the tap is `floor(sx + NEAREST_TIE_NUDGE)` clamped the same way (a sample point on
//!    a pixel boundary takes the right/lower pixel even after f64 rounding). [`Plan::taps`] computes exactly this.
//! 3. Each tap reads the source's channels *of its own pixel*: for YUV, Y at the pixel and
//!    the chroma sample `(x / chroma_subsampling.0, y / chroma_subsampling.1)` covering it
//!    (replicated chroma siting); for RGB sources R, G, B; for grey the one channel.
//!    The channels are interpolated separately: `s = lerp(lerp(p00, p10, fx), lerp(p01, p11, fx), fy)`.
//! 4. The output channels (R, G, B, or one grey channel) are
//!    `v = clamp(color_matrix[c][0..3] · s + color_matrix[c][3], 0, 255)`, clamped once.
//! 5. Stored by the destination dtype through the per-channel affine map
//!    `y = v * out_scale[c] + out_bias[c]`, from the unrounded `v`:
//!    `f32`/`f16` store `y` (there `out_scale`/`out_bias` are `norm_scale`/`norm_bias`, so
//!    `y = (v/255 - mean)/std`); `u8` stores `u = round(clamp(y, 0, 255))` (to nearest, ties
//!    to even, as a GPU's unorm conversion may; the tests allow ±1) and `i8` stores
//!    `u XOR 0x80` (i.e. `u - 128`). Unquantised, `out_scale = 1` and `out_bias = 0`, so
//!    `u8` is `v` rounded. Quantised ([`Quantize`], TFLite's `q = clamp(round(x / scale) +
//!    zero_point)` with `x` the normalised value), `u = q - min` where `min` is 0 (`u8`) or
//!    -128 (`i8`), so `out_scale = norm_scale / scale` and `out_bias = norm_bias / scale +
//!    zero_point - min`: one multiply-add, the same store. Alpha channels get 255 (`u8`),
//!    127 (`i8`) or 1.0 (float).
//!
//! ## Sources of more than 8 bits, and RAW
//!
//! Rule 3's channel values are in 8-bit units (0..=255) for every source. A 16-bit word
//! of P010/P012/P016 (significant bits high) reads as `word / 256`, so 10-bit limited
//! range Y 64..=940 is 16..=235 as for NV12. `Y10`/`Y12`/`Y16` (significant bits low)
//! read as `255 * word / (2^bits - 1)`.
//!
//! A Bayer source's pixel `(x, y)` reads as R, G, B ([`SourceChannels::Rgb`]) computed
//! by [`RawPlan`] from its neighbourhood, in this order:
//!
//! 1. Black level and gains: each CFA sample `r` at a site `k` (R, Gr, Gb, B) becomes
//!    `v = clamp((r - black[k]) * scale[k], 0, 1)` with `scale[k] = gain[colour of k] /
//!    (white - black[k])`, `white = 2^bits - 1`. The clip is the sensor's: a saturated
//!    site stays saturated after white balance.
//! 2. Demosaic: Malvar-He-Cutler (the gradient-corrected linear filters of "High-quality
//!    linear interpolation for demosaicing of Bayer-patterned color images", 2004, in
//!    eighths): the site's own colour is `v` itself, the two missing ones are 5x5 filters
//!    of the `v`s around it. The image's borders are mirrored without repeating the edge
//!    sample (index -1 reads 1, -2 reads 2, `w` reads `w - 2`), which keeps every
//!    neighbour's colour; a crop does not cut the neighbourhood (the filters read the
//!    pixels around the crop).
//! 3. Colour correction: `c = clamp(ccm * [r, g, b], 0, 1)`.
//! 4. Gamma: sRGB or none, then `s = 255 * c`.
//!
//! Resampling (rule 3's interpolation) and everything after it follow, as for any RGB
//! source: the ISP runs at source resolution on the pixels the taps read, so a resize
//! never mixes raw samples of different colours.
//!
//! Destination pixels outside `valid` get `pad_value` (already in output-channel units,
//! 0..=255), stored by rule 5.
//!
//! A destination that is a region of a larger tensor (a tile of a batch) is expressed by
//! the destination's [`ImageLayout`] alone (plane offsets and strides), so a plan never
//! needs to know about the enclosing tensor.

use super::options::{
    ConvertInfo, ConvertOptions, Crop, Fit, Flip, Gamma, Interpolation, Quantize, Rotation,
};
use crate::image::{
    CfaPattern, Colorimetry, FormatFamily, ImageLayout, PixelFormat, SampleStorage,
};
use crate::{DType, Error, Result};

/// The destination element types conversions can produce.
pub const SUPPORTED_DST_DTYPES: [DType; 4] = [DType::U8, DType::I8, DType::F16, DType::F32];

/// Added to a sample coordinate before `floor` for nearest sampling, so a point that is
/// exactly on a pixel boundary (common with integer scale factors) picks the same pixel
/// whatever rounding the affine map's arithmetic did.
pub const NEAREST_TIE_NUDGE: f64 = 1e-7;

/// Luma weights used to turn RGB into grey (BT.601, as OpenCV's `RGB2GRAY`).
pub const RGB_TO_GREY: [f64; 3] = [0.299, 0.587, 0.114];

/// What the interpolated source channels `s[0..3]` hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SourceChannels {
    /// Y, U (Cb), V (Cr), each 0..=255.
    Yuv,
    /// R, G, B, each 0..=255 (whatever the memory order).
    Rgb,
    /// One luma channel in `s[0]`; `s[1]` and `s[2]` are unused (zero weight).
    Grey,
}

impl SourceChannels {
    /// How many source channels are interpolated.
    pub const fn count(self) -> usize {
        match self {
            SourceChannels::Grey => 1,
            _ => 3,
        }
    }
}

/// The RAW steps of a Bayer source (see the module documentation for their order and
/// arithmetic), with the caller's [`crate::Isp`] folded into per-site constants.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RawPlan {
    /// The colour filter array.
    pub cfa: CfaPattern,
    /// How the samples are stored.
    pub storage: SampleStorage,
    /// Black level per CFA site (R, Gr, Gb, B), in the source's units.
    pub black: [f32; 4],
    /// `gain[colour] / (white - black)` per CFA site (R, Gr, Gb, B).
    pub scale: [f32; 4],
    /// The colour-correction matrix, rows output R, G, B.
    pub ccm: [[f32; 3]; 3],
    /// The transfer function after the matrix.
    pub gamma: Gamma,
}

impl RawPlan {
    /// The RAW plan for a Bayer `format` with `isp`, or an error naming the parameter to
    /// change.
    pub fn new(format: PixelFormat, isp: &crate::Isp) -> Result<Option<RawPlan>> {
        let Some(cfa) = format.cfa() else {
            return Ok(None);
        };
        let storage = format.storage();
        let white = storage.max_value();
        isp.validate(white)?;
        let sites = [0usize, 1, 1, 2];
        let black = isp.black_level.map(f32::from);
        let scale = [0, 1, 2, 3].map(|k| {
            (f64::from(isp.gains[sites[k]]) / (f64::from(white) - f64::from(black[k]))) as f32
        });
        Ok(Some(RawPlan {
            cfa,
            storage,
            black,
            scale,
            ccm: isp.ccm,
            gamma: isp.gamma,
        }))
    }
}

/// The two taps and the weight of the second one along one source axis.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Taps {
    /// First tap (source column or row index), already clamped to the crop.
    pub i0: u32,
    /// Second tap, already clamped (equal to `i0` at the edges and for nearest).
    pub i1: u32,
    /// Weight of `i1` in `0.0..1.0` (`0.0` for nearest).
    pub weight: f64,
}

/// The executable description of one conversion. Fields are stable; new ones may be
/// added. Build it with [`Plan::new`].
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// Source width in pixels.
    pub src_width: u32,
    /// Source height in pixels.
    pub src_height: u32,
    /// Source pixel format.
    pub src_format: PixelFormat,
    /// Destination width in pixels.
    pub dst_width: u32,
    /// Destination height in pixels.
    pub dst_height: u32,
    /// Destination pixel format (never YUV).
    pub dst_format: PixelFormat,
    /// Destination element type (one of [`SUPPORTED_DST_DTYPES`]).
    pub dst_dtype: DType,
    /// The source rectangle converted (the whole source when no crop was asked).
    pub crop: Crop,
    /// Mirroring applied after the crop.
    pub flip: Flip,
    /// Clockwise rotation applied after the flip.
    pub rotation: Rotation,
    /// The fit that was asked for.
    pub fit: Fit,
    /// The resampling filter.
    pub interpolation: Interpolation,
    /// Size of the crop after flip and rotation (`[w, h]`, swapped for 90/270).
    pub oriented_size: [u32; 2],
    /// Where the oriented source lands in the destination, `[x, y, w, h]` in destination
    /// pixels; may extend beyond the destination (`Fit::Fill`).
    pub content: [i64; 4],
    /// The destination pixels that sample the source: `content` ∩ destination,
    /// `[x, y, w, h]`, never empty. Every other destination pixel is padding.
    pub valid: [u32; 4],
    /// Affine map from destination to source continuous coordinates:
    /// `sx = m[0][0]*x + m[0][1]*y + m[0][2]`, `sy = m[1][0]*x + m[1][1]*y + m[1][2]`.
    /// Always axis-aligned: either `m[0][1] == m[1][0] == 0`, or (90/270 rotations,
    /// [`Plan::transposed`]) `m[0][0] == m[1][1] == 0`.
    pub dst_to_src: [[f64; 3]; 2],
    /// True when the source column depends on the destination row and the source row on
    /// the destination column (90 and 270 degree rotations).
    pub transposed: bool,
    /// Smallest source column and row a tap may read (the crop's top-left pixel).
    pub src_min: [u32; 2],
    /// Largest source column and row a tap may read (the crop's bottom-right pixel).
    pub src_max: [u32; 2],
    /// Chroma subsampling of the source (horizontal, vertical divisors; `(1, 1)` if not
    /// YUV). Chroma is replicated: pixel `(x, y)` uses chroma sample `(x / h, y / v)`.
    pub chroma_subsampling: (u32, u32),
    /// The YUV colorimetry used (`None` when the source is not YUV).
    pub colorimetry: Option<Colorimetry>,
    /// What the interpolated source channels hold.
    pub source_channels: SourceChannels,
    /// Output colour channels: 3 (R, G, B) or 1 (grey). Alpha is not counted.
    pub output_channels: usize,
    /// Per output channel (R, G, B order; grey in row 0), the affine map from the
    /// interpolated source channels to a value in 0..=255 before the clamp:
    /// `v = m[c][0]*s0 + m[c][1]*s1 + m[c][2]*s2 + m[c][3]`.
    pub color_matrix: [[f32; 4]; 3],
    /// The padding value per output channel, in 0..=255 units (before rule 5).
    pub pad_value: [f32; 3],
    /// Float outputs: `out = v * norm_scale[c] + norm_bias[c]` (R, G, B order).
    pub norm_scale: [f32; 3],
    /// See [`Plan::norm_scale`].
    pub norm_bias: [f32; 3],
    /// The quantisation of a `u8`/`i8` destination, if one was asked for.
    pub quantize: Option<Quantize>,
    /// The store's affine map of the clamped value `v`, per output channel (rule 5):
    /// `y = v * out_scale[c] + out_bias[c]`. Float destinations: `norm_scale`. Integer
    /// destinations: 1 unquantised, `norm_scale / scale` quantised.
    pub out_scale: [f32; 3],
    /// See [`Plan::out_scale`]. Integer destinations: 0 unquantised, `norm_bias / scale +
    /// zero_point - min` quantised (`min` = 0 for `u8`, -128 for `i8`).
    pub out_bias: [f32; 3],
    /// Memory position of the R, G, B output channels: the byte-order index within a
    /// packed pixel, or the plane index for planar destinations (grey: `[0, 0, 0]`).
    pub dst_channel_positions: [usize; 3],
    /// Memory position of the alpha channel in a packed pixel, if the destination has one.
    pub dst_alpha_position: Option<usize>,
    /// The RAW steps, for a Bayer source.
    pub raw: Option<RawPlan>,
}

fn unsupported_dst_format(format: PixelFormat) -> Error {
    Error::Unsupported(format!(
        "destination format {format} is a source-only format (YUV, Bayer or deep grey); \
         convert to one of rgb bgr rgba bgra grey planar-rgb planar-bgr"
    ))
}

type Affine = [[f64; 3]; 2];

/// `a ∘ b`: apply `b` first, then `a`.
fn compose(a: &Affine, b: &Affine) -> Affine {
    let mut out = [[0.0; 3]; 2];
    for r in 0..2 {
        for c in 0..3 {
            out[r][c] = a[r][0] * b[0][c] + a[r][1] * b[1][c];
        }
        out[r][2] += a[r][2];
    }
    out
}

impl Plan {
    /// Plans converting an image laid out as `src` into one laid out as `dst`.
    ///
    /// Errors say what to change: a YUV or otherwise unsupported destination, a crop
    /// outside the source, an empty crop, an unsupported destination dtype, a non-`u8`
    /// source, a normalisation with a zero or non-finite std, or a quantisation of a float
    /// destination, with a non-positive scale or a zero point outside the dtype's range.
    pub fn new(src: &ImageLayout, dst: &ImageLayout, options: &ConvertOptions) -> Result<Plan> {
        let src_format = src.format();
        let dst_format = dst.format();
        if src.dtype() != DType::U8 {
            return Err(Error::Unsupported(format!(
                "source elements are {}; sources must be u8 images",
                src.dtype()
            )));
        }
        if dst_format.is_source_only() {
            return Err(unsupported_dst_format(dst_format));
        }
        let raw = RawPlan::new(src_format, &options.isp)?;
        let dst_dtype = dst.dtype();
        if !SUPPORTED_DST_DTYPES.contains(&dst_dtype) {
            return Err(Error::Unsupported(format!(
                "destination element type {dst_dtype} is not supported; use u8, i8, f16 or f32"
            )));
        }
        let (sw, sh) = (src.width(), src.height());
        let crop = options.crop.unwrap_or(Crop::new(0, 0, sw, sh));
        if crop.width == 0 || crop.height == 0 {
            return Err(Error::InvalidArgument(format!(
                "crop {}x{} at ({}, {}) is empty; give a width and height of at least 1",
                crop.width, crop.height, crop.x, crop.y
            )));
        }
        if u64::from(crop.x) + u64::from(crop.width) > u64::from(sw)
            || u64::from(crop.y) + u64::from(crop.height) > u64::from(sh)
        {
            return Err(Error::InvalidArgument(format!(
                "crop {}x{} at ({}, {}) reaches outside the {sw}x{sh} source; keep x + width <= {sw} \
                 and y + height <= {sh}",
                crop.width, crop.height, crop.x, crop.y
            )));
        }
        let norm = options.normalize;
        for c in 0..3 {
            if !norm.mean[c].is_finite() || !norm.std[c].is_finite() || norm.std[c] == 0.0 {
                return Err(Error::InvalidArgument(format!(
                    "normalisation channel {c}: mean {} / std {} must be finite with a non-zero std",
                    norm.mean[c], norm.std[c]
                )));
            }
        }

        let (cw, ch) = (f64::from(crop.width), f64::from(crop.height));
        let rotation = options.rotation;
        let oriented_size = if rotation.swaps_axes() {
            [crop.height, crop.width]
        } else {
            [crop.width, crop.height]
        };
        let (dw, dh) = (dst.width(), dst.height());
        let content = fit_content(options.fit, oriented_size, [dw, dh]);
        let valid = intersect(content, [dw, dh]);

        // dst continuous -> oriented continuous.
        let (ow, oh) = (f64::from(oriented_size[0]), f64::from(oriented_size[1]));
        let to_oriented: Affine = [
            [
                ow / content[2] as f64,
                0.0,
                -(content[0] as f64) * ow / content[2] as f64,
            ],
            [
                0.0,
                oh / content[3] as f64,
                -(content[1] as f64) * oh / content[3] as f64,
            ],
        ];
        // oriented -> flipped crop (undo the clockwise rotation).
        let unrotate: Affine = match rotation {
            Rotation::R0 => [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]],
            Rotation::R90 => [[0.0, 1.0, 0.0], [-1.0, 0.0, ch]],
            Rotation::R180 => [[-1.0, 0.0, cw], [0.0, -1.0, ch]],
            Rotation::R270 => [[0.0, -1.0, cw], [1.0, 0.0, 0.0]],
        };
        // flipped crop -> crop (undo the flip) -> source (add the crop origin).
        let (fx, fxo) = if options.flip == Flip::Horizontal {
            (-1.0, cw)
        } else {
            (1.0, 0.0)
        };
        let (fy, fyo) = if options.flip == Flip::Vertical {
            (-1.0, ch)
        } else {
            (1.0, 0.0)
        };
        let unflip_and_place: Affine = [
            [fx, 0.0, fxo + f64::from(crop.x)],
            [0.0, fy, fyo + f64::from(crop.y)],
        ];
        let dst_to_src = compose(&unflip_and_place, &compose(&unrotate, &to_oriented));

        let source_channels = match src_format.family() {
            FormatFamily::Grey | FormatFamily::DeepGrey => SourceChannels::Grey,
            FormatFamily::PackedRgb | FormatFamily::PlanarRgb | FormatFamily::Bayer => {
                SourceChannels::Rgb
            }
            _ => SourceChannels::Yuv,
        };
        let colorimetry = (source_channels == SourceChannels::Yuv)
            .then(|| options.colorimetry.resolve(src.colorimetry(), sh));
        let output_channels = if dst_format == PixelFormat::Grey {
            1
        } else {
            3
        };
        let color_matrix = color_matrix(source_channels, colorimetry, output_channels);

        let pad_rgb = match options.fit {
            Fit::Letterbox { pad } => pad.map(f64::from),
            _ => [0.0; 3],
        };
        let pad_value = if output_channels == 1 {
            let grey: f64 = (0..3).map(|c| RGB_TO_GREY[c] * pad_rgb[c]).sum();
            [grey as f32, 0.0, 0.0]
        } else {
            pad_rgb.map(|v| v as f32)
        };
        let norm_scale_f64 = [0, 1, 2].map(|c| 1.0 / (255.0 * f64::from(norm.std[c])));
        let norm_bias_f64 = [0, 1, 2].map(|c| -f64::from(norm.mean[c]) / f64::from(norm.std[c]));
        let norm_scale = norm_scale_f64.map(|v| v as f32);
        let norm_bias = norm_bias_f64.map(|v| v as f32);
        let integer = matches!(dst_dtype, DType::U8 | DType::I8);
        let (out_scale, out_bias) = match (options.quantize, integer) {
            (None, true) => ([1.0; 3], [0.0; 3]),
            (None, false) => (norm_scale, norm_bias),
            (Some(q), _) => {
                q.validate(dst_dtype)?;
                let (min, _) = Quantize::range(dst_dtype)?;
                let scale = [0, 1, 2].map(|c| (norm_scale_f64[c] / f64::from(q.scale[c])) as f32);
                let bias = [0, 1, 2].map(|c| {
                    (norm_bias_f64[c] / f64::from(q.scale[c]) + f64::from(q.zero_point[c])
                        - f64::from(min)) as f32
                });
                (scale, bias)
            }
        };
        let (dst_channel_positions, dst_alpha_position) = match dst_format.rgb_order() {
            Some((order, alpha)) => (order, alpha),
            None => ([0, 0, 0], None),
        };

        Ok(Plan {
            src_width: sw,
            src_height: sh,
            src_format,
            dst_width: dw,
            dst_height: dh,
            dst_format,
            dst_dtype,
            crop,
            flip: options.flip,
            rotation,
            fit: options.fit,
            interpolation: options.interpolation,
            oriented_size,
            content,
            valid,
            dst_to_src,
            transposed: rotation.swaps_axes(),
            src_min: [crop.x, crop.y],
            src_max: [crop.x + crop.width - 1, crop.y + crop.height - 1],
            chroma_subsampling: src_format.chroma_subsampling(),
            colorimetry,
            source_channels,
            output_channels,
            color_matrix,
            pad_value,
            norm_scale,
            norm_bias,
            quantize: options.quantize,
            out_scale,
            out_bias,
            dst_channel_positions,
            dst_alpha_position,
            raw,
        })
    }

    /// The source point sampled for destination pixel `(x, y)` (its centre mapped).
    pub fn sample_point(&self, x: u32, y: u32) -> (f64, f64) {
        let (cx, cy) = (f64::from(x) + 0.5, f64::from(y) + 0.5);
        let m = &self.dst_to_src;
        (
            m[0][0] * cx + m[0][1] * cy + m[0][2],
            m[1][0] * cx + m[1][1] * cy + m[1][2],
        )
    }

    /// The destination axis (0 = columns, 1 = rows) that source axis `src_axis` depends on.
    pub fn dst_axis_of(&self, src_axis: usize) -> usize {
        if self.transposed {
            1 - src_axis
        } else {
            src_axis
        }
    }

    /// The taps along source axis `src_axis` (0 = columns, 1 = rows) for destination
    /// index `dst_index` along [`Plan::dst_axis_of`]`(src_axis)`.
    pub fn taps(&self, src_axis: usize, dst_index: u32) -> Taps {
        let m = &self.dst_to_src[src_axis];
        let centre = f64::from(dst_index) + 0.5;
        let coord = m[self.dst_axis_of(src_axis)] * centre + m[2];
        let (lo, hi) = (
            i64::from(self.src_min[src_axis]),
            i64::from(self.src_max[src_axis]),
        );
        let clamp = |i: i64| i.clamp(lo, hi) as u32;
        match self.interpolation {
            Interpolation::Nearest => {
                let i = clamp((coord + NEAREST_TIE_NUDGE).floor() as i64);
                Taps {
                    i0: i,
                    i1: i,
                    weight: 0.0,
                }
            }
            Interpolation::Bilinear => {
                let u = coord - 0.5;
                let base = u.floor();
                let weight = u - base;
                let base = base as i64;
                Taps {
                    i0: clamp(base),
                    i1: clamp(base + 1),
                    weight,
                }
            }
        }
    }

    /// Checks that `src` and `dst` are the images this plan was made for (size, format
    /// and, for the destination, element type). Every backend calls it before executing
    /// a plan, so none can be handed a plan for other images.
    pub fn check_layouts(&self, src: &ImageLayout, dst: &ImageLayout) -> Result<()> {
        let src_ok = (src.width(), src.height(), src.format())
            == (self.src_width, self.src_height, self.src_format);
        let dst_ok = (dst.width(), dst.height(), dst.format(), dst.dtype())
            == (
                self.dst_width,
                self.dst_height,
                self.dst_format,
                self.dst_dtype,
            );
        if src_ok && dst_ok {
            return Ok(());
        }
        Err(Error::InvalidArgument(format!(
            "the plan is for {}x{} {} -> {}x{} {}/{} but the images are {src:?} -> {dst:?}; \
             make a new plan for these layouts",
            self.src_width,
            self.src_height,
            self.src_format,
            self.dst_width,
            self.dst_height,
            self.dst_format,
            self.dst_dtype
        )))
    }

    /// What the conversion reports to the caller.
    pub fn info(&self) -> ConvertInfo {
        ConvertInfo {
            scale: [
                self.content[2] as f64 / f64::from(self.oriented_size[0]),
                self.content[3] as f64 / f64::from(self.oriented_size[1]),
            ],
            offset: [self.content[0], self.content[1]],
            content: self.valid,
            colorimetry: self.colorimetry,
            dst_to_src: self.dst_to_src,
            decode_scale: 1,
        }
    }
}

/// The destination rectangle the oriented source is scaled into.
fn fit_content(fit: Fit, oriented: [u32; 2], dst: [u32; 2]) -> [i64; 4] {
    let (ow, oh) = (f64::from(oriented[0]), f64::from(oriented[1]));
    let (dw, dh) = (f64::from(dst[0]), f64::from(dst[1]));
    let (w, h) = match fit {
        Fit::Stretch => (i64::from(dst[0]), i64::from(dst[1])),
        Fit::Letterbox { .. } => {
            let s = (dw / ow).min(dh / oh);
            (
                ((ow * s).round() as i64).clamp(1, i64::from(dst[0])),
                ((oh * s).round() as i64).clamp(1, i64::from(dst[1])),
            )
        }
        Fit::Fill => {
            let s = (dw / ow).max(dh / oh);
            (
                ((ow * s).round() as i64).max(i64::from(dst[0])),
                ((oh * s).round() as i64).max(i64::from(dst[1])),
            )
        }
    };
    [
        (i64::from(dst[0]) - w).div_euclid(2),
        (i64::from(dst[1]) - h).div_euclid(2),
        w,
        h,
    ]
}

fn intersect(content: [i64; 4], dst: [u32; 2]) -> [u32; 4] {
    let x0 = content[0].max(0);
    let y0 = content[1].max(0);
    let x1 = (content[0] + content[2]).min(i64::from(dst[0]));
    let y1 = (content[1] + content[3]).min(i64::from(dst[1]));
    [x0 as u32, y0 as u32, (x1 - x0) as u32, (y1 - y0) as u32]
}

fn color_matrix(
    source: SourceChannels,
    colorimetry: Option<Colorimetry>,
    output_channels: usize,
) -> [[f32; 4]; 3] {
    let mut rows = [[0.0f64; 4]; 3];
    match (source, colorimetry) {
        (SourceChannels::Yuv, Some(c)) => {
            let (m, y0) = c.yuv_to_rgb();
            if output_channels == 1 {
                // The luma of the converted RGB is the range-expanded Y.
                rows[0] = [m[0][0], 0.0, 0.0, -m[0][0] * y0];
            } else {
                for (row, mr) in rows.iter_mut().zip(m.iter()) {
                    *row = [
                        mr[0],
                        mr[1],
                        mr[2],
                        -(mr[0] * y0 + mr[1] * 128.0 + mr[2] * 128.0),
                    ];
                }
            }
        }
        (SourceChannels::Rgb, _) => {
            if output_channels == 1 {
                rows[0] = [RGB_TO_GREY[0], RGB_TO_GREY[1], RGB_TO_GREY[2], 0.0];
            } else {
                for (c, row) in rows.iter_mut().enumerate() {
                    row[c] = 1.0;
                }
            }
        }
        _ => {
            for row in rows.iter_mut().take(output_channels) {
                row[0] = 1.0;
            }
        }
    }
    rows.map(|r| r.map(|v| v as f32))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::{Matrix, Range};

    fn layout(w: u32, h: u32, f: PixelFormat) -> ImageLayout {
        ImageLayout::new(w, h, f).unwrap()
    }

    fn plan(src: (u32, u32), dst: (u32, u32), o: ConvertOptions) -> Plan {
        Plan::new(
            &layout(src.0, src.1, PixelFormat::Yuyv),
            &layout(dst.0, dst.1, PixelFormat::Rgb),
            &o,
        )
        .unwrap()
    }

    #[test]
    fn identity_maps_centres_to_centres() {
        let p = plan((8, 6), (8, 6), ConvertOptions::default());
        assert_eq!(p.sample_point(3, 2), (3.5, 2.5));
        assert_eq!(p.valid, [0, 0, 8, 6]);
        let t = p.taps(0, 3);
        assert_eq!((t.i0, t.i1, t.weight), (3, 4, 0.0));
        assert!(!p.transposed);
    }

    #[test]
    fn letterbox_centres_and_reports_scale() {
        let o = ConvertOptions {
            fit: Fit::Letterbox { pad: [114; 3] },
            ..Default::default()
        };
        let p = plan((1920, 1080), (640, 640), o);
        assert_eq!(p.content, [0, 140, 640, 360]);
        assert_eq!(p.valid, [0, 140, 640, 360]);
        assert_eq!(p.pad_value, [114.0; 3]);
        let info = p.info();
        assert!((info.scale[0] - 1.0 / 3.0).abs() < 1e-12);
        assert_eq!(info.offset, [0, 140]);
        // The top-left of the content is the top-left of the source.
        let (x, y) = info.to_source(0.0, 140.0);
        assert!(x.abs() < 1e-9 && y.abs() < 1e-9);
        let (x, y) = info.to_source(640.0, 500.0);
        assert!((x - 1920.0).abs() < 1e-9 && (y - 1080.0).abs() < 1e-9);
    }

    #[test]
    fn fill_overflows_and_crops() {
        let o = ConvertOptions {
            fit: Fit::Fill,
            ..Default::default()
        };
        let p = plan((200, 100), (100, 100), o);
        assert_eq!(p.content, [-50, 0, 200, 100]);
        assert_eq!(p.valid, [0, 0, 100, 100]);
        assert_eq!(p.sample_point(0, 0), (50.5, 0.5));
    }

    #[test]
    fn rotations_move_corners_clockwise() {
        // A 4x2 source rotated 90 degrees clockwise becomes 2x4; the destination's
        // top-right pixel shows the source's top-left pixel.
        for (rot, corner_dst, corner_src) in [
            (Rotation::R90, (1, 0), (0, 0)),
            (Rotation::R90, (0, 0), (0, 1)),
            (Rotation::R180, (3, 1), (0, 0)),
            (Rotation::R270, (0, 3), (0, 0)),
            (Rotation::R270, (0, 0), (3, 0)),
        ] {
            let dst = if rot.swaps_axes() { (2, 4) } else { (4, 2) };
            let p = plan(
                (4, 2),
                dst,
                ConvertOptions {
                    rotation: rot,
                    ..Default::default()
                },
            );
            let (sx, sy) = p.sample_point(corner_dst.0, corner_dst.1);
            assert_eq!(
                (sx.floor() as u32, sy.floor() as u32),
                corner_src,
                "{rot:?} dst {corner_dst:?}"
            );
            assert_eq!(p.transposed, rot.swaps_axes());
        }
    }

    #[test]
    fn flip_then_rotate_order() {
        // Flip horizontally first, then rotate 90 clockwise.
        let p = plan(
            (4, 2),
            (2, 4),
            ConvertOptions {
                flip: Flip::Horizontal,
                rotation: Rotation::R90,
                ..Default::default()
            },
        );
        // After the flip, F(x, y) = S(3 - x, y). After rotating clockwise, O(0, 0) = F(0, 1)
        // = S(3, 1).
        let (sx, sy) = p.sample_point(0, 0);
        assert_eq!((sx.floor() as u32, sy.floor() as u32), (3, 1));
    }

    #[test]
    fn crop_clamps_taps_to_the_crop() {
        let o = ConvertOptions {
            crop: Some(Crop::new(2, 1, 3, 2)),
            ..Default::default()
        };
        let p = plan((8, 4), (6, 4), o);
        assert_eq!(p.src_min, [2, 1]);
        assert_eq!(p.src_max, [4, 2]);
        let first = p.taps(0, 0);
        assert_eq!((first.i0, first.i1), (2, 2));
        let last = p.taps(0, 5);
        assert_eq!((last.i0, last.i1), (4, 4));
    }

    #[test]
    fn nearest_picks_the_covering_pixel() {
        let o = ConvertOptions {
            interpolation: Interpolation::Nearest,
            ..Default::default()
        };
        let p = plan((9, 9), (3, 3), o);
        let t = p.taps(0, 1);
        assert_eq!((t.i0, t.i1, t.weight), (4, 4, 0.0));
    }

    #[test]
    fn colour_constants() {
        let src = layout(16, 16, PixelFormat::Nv12)
            .with_colorimetry(Some(Colorimetry::new(Matrix::Bt601, Range::Full)));
        let p = Plan::new(
            &src,
            &ImageLayout::tight(16, 16, PixelFormat::PlanarBgr, DType::F32).unwrap(),
            &ConvertOptions {
                normalize: crate::convert::Normalize::IMAGENET,
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(
            p.colorimetry,
            Some(Colorimetry::new(Matrix::Bt601, Range::Full))
        );
        // Full range: Y=128, U=V=128 is mid grey on every channel.
        for row in p.color_matrix {
            let v = row[0] * 128.0 + row[1] * 128.0 + row[2] * 128.0 + row[3];
            assert!((v - 128.0).abs() < 1e-3, "{v}");
        }
        assert_eq!(p.dst_channel_positions, [2, 1, 0]);
        let out = 255.0 * p.norm_scale[0] + p.norm_bias[0];
        assert!((out - (1.0 - 0.485) / 0.229).abs() < 1e-5);
    }

    #[test]
    fn bad_requests_say_what_to_change() {
        let src = layout(64, 64, PixelFormat::Yuyv);
        let e = Plan::new(&src, &layout(8, 8, PixelFormat::Nv12), &Default::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("YUV") && e.contains("planar-rgb"), "{e}");
        let u16dst = ImageLayout::tight(8, 8, PixelFormat::Rgb, DType::U16).unwrap();
        let e = Plan::new(&src, &u16dst, &Default::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("u16") && e.contains("f32"), "{e}");
        let rgb = layout(8, 8, PixelFormat::Rgb);
        let crop = ConvertOptions {
            crop: Some(Crop::new(60, 0, 8, 8)),
            ..Default::default()
        };
        let e = Plan::new(&src, &rgb, &crop).unwrap_err().to_string();
        assert!(
            e.contains("outside") && e.contains("x + width <= 64"),
            "{e}"
        );
        let empty = ConvertOptions {
            crop: Some(Crop::new(0, 0, 0, 8)),
            ..Default::default()
        };
        assert!(Plan::new(&src, &rgb, &empty).is_err());
        let zero_std = ConvertOptions {
            normalize: crate::convert::Normalize {
                mean: [0.0; 3],
                std: [1.0, 0.0, 1.0],
            },
            ..Default::default()
        };
        assert!(
            Plan::new(&src, &rgb, &zero_std)
                .unwrap_err()
                .to_string()
                .contains("std")
        );
    }
}
