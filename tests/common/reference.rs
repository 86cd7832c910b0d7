//! An independent f64 implementation of DESIGN.md's conversion conventions, written from
//! the formulas (not from the library's plan or kernels), plus helpers to make test
//! images and read destination images back.
#![allow(dead_code)]

use pinframe::{
    CfaSite, Colorimetry, ColorimetryChoice, ConvertOptions, Crop, DType, Fit, Flip, Gamma,
    ImageLayout, ImageProcessor, Interpolation, Isp, PixelFormat, Rotation, SampleStorage,
};

/// 75% colour bars (vivid's default test pattern, and the Rec. 601/709 bar values the
/// CPU tests convert), RGB, left to right: white, yellow, cyan, green, magenta, red,
/// blue, black.
pub const BARS_75_RGB: [[u8; 3]; 8] = [
    [191, 191, 191],
    [191, 191, 0],
    [0, 191, 191],
    [0, 191, 0],
    [191, 0, 191],
    [191, 0, 0],
    [0, 0, 191],
    [0, 0, 0],
];

/// `(w, h)` rounded up to the sizes `format` allows (whole 2x2 tiles for Bayer, whole
/// 4-pixel groups for CSI-2 RAW10), so size-sweeping tests can run every format.
pub fn source_size(format: PixelFormat, w: u32, h: u32) -> (u32, u32) {
    let (mw, mh) = format.size_multiple();
    (w.div_ceil(mw) * mw, h.div_ceil(mh) * mh)
}

/// A small deterministic generator (xorshift64*), so failures reproduce.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn byte(&mut self) -> u8 {
        (self.next() >> 56) as u8
    }
    pub fn below(&mut self, n: u32) -> u32 {
        (self.next() % u64::from(n)) as u32
    }
}

/// One buffer per buffer of `layout`, each `required_len + extra` bytes of random data
/// (so stride padding and plane gaps hold garbage the converter must ignore).
pub fn random_buffers(layout: &ImageLayout, rng: &mut Rng, extra: usize) -> Vec<Vec<u8>> {
    (0..layout.buffer_count())
        .map(|b| {
            (0..layout.required_len(b) + extra)
                .map(|_| rng.byte())
                .collect()
        })
        .collect()
}

/// The code stored for sample `(x, y)` of plane 0 of a Bayer or deep-grey image, as
/// written (a 16-bit word may exceed the white level; the pipeline clips it).
pub fn raw_code(bufs: &[Vec<u8>], l: &ImageLayout, x: u32, y: u32) -> u32 {
    let p = l.planes()[0];
    let (x, y) = (x as usize, y as usize);
    let row = &bufs[p.buffer][p.offset + y * p.stride..];
    let b = |i: usize| u32::from(row[i]);
    match l.format().storage() {
        SampleStorage::Byte => b(x),
        SampleStorage::Le16Low { .. } | SampleStorage::Le16High { .. } => {
            b(2 * x) | b(2 * x + 1) << 8
        }
        // CSI-2 RAW10: bytes 0..4 the high 8 bits of pixels 0..4, byte 4 their low 2 bits.
        SampleStorage::Csi2Packed10 => {
            let g = x / 4 * 5;
            b(g + x % 4) << 2 | (b(g + 4) >> (2 * (x % 4))) & 3
        }
        // CSI-2 RAW12: bytes 0, 1 the high 8 bits of pixels 0, 1, byte 2 their low 4 bits.
        SampleStorage::Csi2Packed12 => {
            let g = x / 2 * 3;
            b(g + x % 2) << 4 | (b(g + 2) >> (4 * (x % 2))) & 15
        }
    }
}

/// Writes `code` as sample `(x, y)` of plane 0 of a Bayer or deep-grey image (the
/// inverse of [`raw_code`]), for building test frames.
pub fn put_raw_code(bufs: &mut [Vec<u8>], l: &ImageLayout, x: u32, y: u32, code: u32) {
    let p = l.planes()[0];
    let (x, y) = (x as usize, y as usize);
    let row = &mut bufs[p.buffer][p.offset + y * p.stride..];
    match l.format().storage() {
        SampleStorage::Byte => row[x] = code as u8,
        SampleStorage::Le16Low { .. } | SampleStorage::Le16High { .. } => {
            row[2 * x..2 * x + 2].copy_from_slice(&(code as u16).to_le_bytes());
        }
        SampleStorage::Csi2Packed10 => {
            let (g, k) = (x / 4 * 5, x % 4);
            row[g + k] = (code >> 2) as u8;
            row[g + 4] = (row[g + 4] & !(3 << (2 * k))) | ((code & 3) << (2 * k)) as u8;
        }
        SampleStorage::Csi2Packed12 => {
            let (g, k) = (x / 2 * 3, x % 2);
            row[g + k] = (code >> 4) as u8;
            row[g + 2] = (row[g + 2] & !(15 << (4 * k))) | ((code & 15) << (4 * k)) as u8;
        }
    }
}

/// Mirrors index `i` into `0..n` without repeating the edge (-1 -> 1, n -> n - 2), as
/// often as a 5x5 neighbourhood needs on a 2-pixel-wide image.
fn mirror(i: i64, n: i64) -> i64 {
    let i = i.abs();
    let i = if i >= n { 2 * (n - 1) - i } else { i };
    i.abs()
}

/// The RAW pipeline of a Bayer source at pixel `(x, y)`, in f64 from its definition:
/// black level and gains with the clip to 0..=1, Malvar-He-Cutler demosaic (mirrored
/// borders), colour matrix with the clip, gamma, times 255.
pub fn isp_pixel(bufs: &[Vec<u8>], l: &ImageLayout, isp: &Isp, x: u32, y: u32) -> [f64; 3] {
    let cfa = l.format().cfa().expect("a Bayer format");
    let white = f64::from(l.format().storage().max_value());
    let (w, h) = (i64::from(l.width()), i64::from(l.height()));
    let v = |dx: i64, dy: i64| -> f64 {
        let (sx, sy) = (mirror(i64::from(x) + dx, w), mirror(i64::from(y) + dy, h));
        let site = cfa.site(sx as u32, sy as u32);
        let code = f64::from(raw_code(bufs, l, sx as u32, sy as u32)).min(white);
        let black = f64::from(isp.black_level[site as usize]);
        let gain = f64::from(isp.gains[site.channel()]);
        ((code - black) / (white - black) * gain).clamp(0.0, 1.0)
    };
    let axes2 = v(-2, 0) + v(2, 0) + v(0, -2) + v(0, 2);
    let diag = v(-1, -1) + v(1, -1) + v(-1, 1) + v(1, 1);
    let centre = v(0, 0);
    // Green at a red or blue site.
    let green = (4.0 * centre + 2.0 * (v(-1, 0) + v(1, 0) + v(0, -1) + v(0, 1)) - axes2) / 8.0;
    // Red or blue at a blue or red site, from its diagonal neighbours.
    let across = (6.0 * centre + 2.0 * diag - 1.5 * axes2) / 8.0;
    // Red or blue at a green site, from the neighbours left and right / above and below.
    let beside = (5.0 * centre + 4.0 * (v(-1, 0) + v(1, 0)) - (v(-2, 0) + v(2, 0)) - diag
        + 0.5 * (v(0, -2) + v(0, 2)))
        / 8.0;
    let above = (5.0 * centre + 4.0 * (v(0, -1) + v(0, 1)) - (v(0, -2) + v(0, 2)) - diag
        + 0.5 * (v(-2, 0) + v(2, 0)))
        / 8.0;
    let rgb = match cfa.site(x, y) {
        CfaSite::R => [centre, green, across],
        CfaSite::B => [across, green, centre],
        // Green on a red row: red left and right, blue above and below.
        CfaSite::Gr => [beside, centre, above],
        CfaSite::Gb => [above, centre, beside],
    };
    let m = isp.ccm;
    [0, 1, 2].map(|r| {
        let c = (0..3)
            .map(|k| f64::from(m[r][k]) * rgb[k])
            .sum::<f64>()
            .clamp(0.0, 1.0);
        let g = match isp.gamma {
            Gamma::Linear => c,
            Gamma::Srgb if c <= 0.0031308 => 12.92 * c,
            Gamma::Srgb => 1.055 * c.powf(1.0 / 2.4) - 0.055,
        };
        255.0 * g
    })
}

/// The source's channels at pixel (x, y): Y, U, V for YUV formats (the chroma sample
/// that covers the pixel), R, G, B for RGB formats, and [g, g, g] for grey. Bayer
/// sources give [`isp_pixel`] with the default [`Isp`]; see [`fetch_with`].
pub fn fetch(bufs: &[Vec<u8>], l: &ImageLayout, x: u32, y: u32) -> [f64; 3] {
    fetch_with(bufs, l, &Isp::IDENTITY, x, y)
}

/// [`fetch`] with the RAW steps `isp` for Bayer sources.
pub fn fetch_with(bufs: &[Vec<u8>], l: &ImageLayout, isp: &Isp, x: u32, y: u32) -> [f64; 3] {
    use PixelFormat::*;
    if l.format().cfa().is_some() {
        return isp_pixel(bufs, l, isp, x, y);
    }
    let storage = l.format().storage();
    if let SampleStorage::Le16Low { bits } = storage {
        let white = f64::from((1u32 << bits) - 1);
        let g = 255.0 * f64::from(raw_code(bufs, l, x, y)).min(white) / white;
        return [g, g, g];
    }
    let (x, y) = (x as usize, y as usize);
    let p = l.planes();
    if let SampleStorage::Le16High { .. } = storage {
        // P010/P012/P016: 16-bit words, read in 8-bit units as word / 256.
        let word = |plane: usize, row: usize, col: usize| -> f64 {
            let at = p[plane].offset + row * p[plane].stride + 2 * col;
            let b = &bufs[p[plane].buffer];
            f64::from(u16::from_le_bytes([b[at], b[at + 1]])) / 256.0
        };
        let (cx, cy) = (x / 2 * 2, y / 2);
        return [word(0, y, x), word(1, cy, cx), word(1, cy, cx + 1)];
    }
    let at = |plane: usize, row: usize, col: usize| -> f64 {
        f64::from(bufs[p[plane].buffer][p[plane].offset + row * p[plane].stride + col])
    };
    match l.format() {
        Yuyv | Uyvy | Yvyu | Vyuy => {
            let m = (x / 2) * 4;
            let b = |i: usize| at(0, y, m + i);
            let odd = x % 2 == 1;
            match l.format() {
                Yuyv => [if odd { b(2) } else { b(0) }, b(1), b(3)],
                Uyvy => [if odd { b(3) } else { b(1) }, b(0), b(2)],
                Yvyu => [if odd { b(2) } else { b(0) }, b(3), b(1)],
                _ => [if odd { b(3) } else { b(1) }, b(2), b(0)],
            }
        }
        Nv12 | Nv21 | Nv16 | Nv61 => {
            let cy = if matches!(l.format(), Nv12 | Nv21) {
                y / 2
            } else {
                y
            };
            let first = at(1, cy, (x / 2) * 2);
            let second = at(1, cy, (x / 2) * 2 + 1);
            let (u, v) = if matches!(l.format(), Nv12 | Nv16) {
                (first, second)
            } else {
                (second, first)
            };
            [at(0, y, x), u, v]
        }
        I420 => [at(0, y, x), at(1, y / 2, x / 2), at(2, y / 2, x / 2)],
        Yv12 => [at(0, y, x), at(2, y / 2, x / 2), at(1, y / 2, x / 2)],
        I422 => [at(0, y, x), at(1, y, x / 2), at(2, y, x / 2)],
        I444 => [at(0, y, x), at(1, y, x), at(2, y, x)],
        Grey => {
            let g = at(0, y, x);
            [g, g, g]
        }
        Rgb => [at(0, y, 3 * x), at(0, y, 3 * x + 1), at(0, y, 3 * x + 2)],
        Bgr => [at(0, y, 3 * x + 2), at(0, y, 3 * x + 1), at(0, y, 3 * x)],
        Rgba => [at(0, y, 4 * x), at(0, y, 4 * x + 1), at(0, y, 4 * x + 2)],
        Bgra => [at(0, y, 4 * x + 2), at(0, y, 4 * x + 1), at(0, y, 4 * x)],
        PlanarRgb => [at(0, y, x), at(1, y, x), at(2, y, x)],
        PlanarBgr => [at(2, y, x), at(1, y, x), at(0, y, x)],
        other => panic!("the reference has no model of {other} sources: add one here"),
    }
}

fn is_yuv(f: PixelFormat) -> bool {
    use PixelFormat::*;
    matches!(
        f,
        Yuyv | Uyvy
            | Yvyu
            | Vyuy
            | Nv12
            | Nv21
            | Nv16
            | Nv61
            | I420
            | Yv12
            | I422
            | I444
            | P010
            | P012
            | P016
    )
}

fn is_grey(f: PixelFormat) -> bool {
    matches!(
        f,
        PixelFormat::Grey | PixelFormat::Y10 | PixelFormat::Y12 | PixelFormat::Y16
    )
}

/// The colour channels (R, G, B, or grey in [0]) of every destination pixel, row-major,
/// clamped to 0..=255 but not rounded: the value before the dtype's store.
pub fn reference(
    bufs: &[Vec<u8>],
    src: &ImageLayout,
    dst_w: u32,
    dst_h: u32,
    dst_format: PixelFormat,
    o: &ConvertOptions,
) -> Vec<[f64; 3]> {
    let crop = o.crop.unwrap_or(Crop::new(0, 0, src.width(), src.height()));
    let (cw, ch) = (f64::from(crop.width), f64::from(crop.height));
    let swapped = matches!(o.rotation, Rotation::R90 | Rotation::R270);
    let (ow, oh) = if swapped { (ch, cw) } else { (cw, ch) };
    let (dw, dh) = (f64::from(dst_w), f64::from(dst_h));
    // Where the oriented crop lands in the destination.
    let (w, h) = match o.fit {
        Fit::Stretch => (dw, dh),
        Fit::Letterbox { .. } => {
            let s = f64::min(dw / ow, dh / oh);
            (
                (ow * s).round().clamp(1.0, dw),
                (oh * s).round().clamp(1.0, dh),
            )
        }
        Fit::Fill => {
            let s = f64::max(dw / ow, dh / oh);
            ((ow * s).round().max(dw), (oh * s).round().max(dh))
        }
    };
    let left = ((dw - w) / 2.0).floor();
    let top = ((dh - h) / 2.0).floor();
    let grey_out = dst_format == PixelFormat::Grey;
    let pad = match o.fit {
        Fit::Letterbox { pad } => pad.map(f64::from),
        _ => [0.0; 3],
    };
    let colorimetry = match o.colorimetry {
        ColorimetryChoice::Fixed(c) => c,
        ColorimetryChoice::Auto => src.colorimetry().unwrap_or(if src.height() >= 720 {
            Colorimetry::BT709_LIMITED
        } else {
            Colorimetry::BT601_LIMITED
        }),
    };
    let (m, y0) = colorimetry.yuv_to_rgb();
    let yuv = is_yuv(src.format());
    let grey_src = is_grey(src.format());
    let fetch =
        |bufs: &[Vec<u8>], l: &ImageLayout, x: u32, y: u32| fetch_with(bufs, l, &o.isp, x, y);
    let luma = |rgb: [f64; 3]| 0.299 * rgb[0] + 0.587 * rgb[1] + 0.114 * rgb[2];

    let mut out = Vec::with_capacity((dst_w * dst_h) as usize);
    for j in 0..dst_h {
        for i in 0..dst_w {
            let (px, py) = (f64::from(i) + 0.5, f64::from(j) + 0.5);
            if px < left || px >= left + w || py < top || py >= top + h {
                out.push(if grey_out { [luma(pad), 0.0, 0.0] } else { pad });
                continue;
            }
            // Destination -> oriented crop -> (undo rotation) flipped crop -> crop.
            let ox = (px - left) * ow / w;
            let oy = (py - top) * oh / h;
            let (fx, fy) = match o.rotation {
                Rotation::R0 => (ox, oy),
                Rotation::R90 => (oy, ch - ox),
                Rotation::R180 => (cw - ox, ch - oy),
                Rotation::R270 => (cw - oy, ox),
            };
            let (cx, cy) = match o.flip {
                Flip::None => (fx, fy),
                Flip::Horizontal => (cw - fx, fy),
                Flip::Vertical => (fx, ch - fy),
            };
            let (sx, sy) = (f64::from(crop.x) + cx, f64::from(crop.y) + cy);
            let clamp_x =
                |v: f64| v.clamp(f64::from(crop.x), f64::from(crop.x + crop.width - 1)) as u32;
            let clamp_y =
                |v: f64| v.clamp(f64::from(crop.y), f64::from(crop.y + crop.height - 1)) as u32;
            let s = match o.interpolation {
                Interpolation::Nearest => {
                    fetch(bufs, src, clamp_x(sx.floor()), clamp_y(sy.floor()))
                }
                Interpolation::Bilinear => {
                    let (u, v) = (sx - 0.5, sy - 0.5);
                    let (x0, y0f) = (u.floor(), v.floor());
                    let (a, b) = (u - x0, v - y0f);
                    let p00 = fetch(bufs, src, clamp_x(x0), clamp_y(y0f));
                    let p10 = fetch(bufs, src, clamp_x(x0 + 1.0), clamp_y(y0f));
                    let p01 = fetch(bufs, src, clamp_x(x0), clamp_y(y0f + 1.0));
                    let p11 = fetch(bufs, src, clamp_x(x0 + 1.0), clamp_y(y0f + 1.0));
                    let mut s = [0.0; 3];
                    for c in 0..3 {
                        s[c] = (1.0 - a) * (1.0 - b) * p00[c]
                            + a * (1.0 - b) * p10[c]
                            + (1.0 - a) * b * p01[c]
                            + a * b * p11[c];
                    }
                    s
                }
            };
            let rgb = if yuv {
                let d = [s[0] - y0, s[1] - 128.0, s[2] - 128.0];
                [0, 1, 2].map(|r| m[r][0] * d[0] + m[r][1] * d[1] + m[r][2] * d[2])
            } else {
                s
            };
            let px = if grey_out {
                let g = if yuv {
                    m[0][0] * (s[0] - y0)
                } else if grey_src {
                    s[0]
                } else {
                    luma(s)
                };
                [g, 0.0, 0.0]
            } else {
                rgb
            };
            out.push(px.map(|v| v.clamp(0.0, 255.0)));
        }
    }
    out
}

/// An element type the tests read back: its value as f64.
pub trait Readback: pinframe::Element + Copy {
    fn as_f64(self) -> f64;
}
impl Readback for u8 {
    fn as_f64(self) -> f64 {
        f64::from(self)
    }
}
impl Readback for i8 {
    fn as_f64(self) -> f64 {
        f64::from(self)
    }
}
impl Readback for f32 {
    fn as_f64(self) -> f64 {
        f64::from(self)
    }
}
impl Readback for half::f16 {
    fn as_f64(self) -> f64 {
        f64::from(self.to_f32())
    }
}

/// Reads a destination image back as colour channels in 0..=255 units (R, G, B order;
/// grey in [0]) and alpha (255 when opaque, or NaN where there is no alpha), undoing the
/// dtype's store: i8 XOR 0x80, float `(v/255 - mean)/std`.
pub fn read_back<T: Readback>(
    dst: &[T],
    l: &ImageLayout,
    mean: [f32; 3],
    std: [f32; 3],
) -> Vec<([f64; 3], f64)> {
    let e = std::mem::size_of::<T>();
    let p = l.planes();
    let unstore = |raw: T, c: usize| -> f64 {
        let v = raw.as_f64();
        match l.dtype() {
            DType::U8 => v,
            DType::I8 => f64::from((v as i8 as u8) ^ 0x80),
            _ => (v * f64::from(std[c]) + f64::from(mean[c])) * 255.0,
        }
    };
    let unstore_alpha = |raw: T| -> f64 {
        let v = raw.as_f64();
        match l.dtype() {
            DType::U8 => v,
            DType::I8 => f64::from((v as i8 as u8) ^ 0x80),
            _ => v * 255.0,
        }
    };
    let mut out = Vec::new();
    for y in 0..l.height() as usize {
        for x in 0..l.width() as usize {
            let at =
                |plane: usize, col: usize| dst[(p[plane].offset + y * p[plane].stride) / e + col];
            let px = match l.format() {
                PixelFormat::Grey => ([unstore(at(0, x), 0), 0.0, 0.0], f64::NAN),
                PixelFormat::Rgb => ([0, 1, 2].map(|c| unstore(at(0, 3 * x + c), c)), f64::NAN),
                PixelFormat::Bgr => (
                    [0, 1, 2].map(|c| unstore(at(0, 3 * x + 2 - c), c)),
                    f64::NAN,
                ),
                PixelFormat::Rgba => (
                    [0, 1, 2].map(|c| unstore(at(0, 4 * x + c), c)),
                    unstore_alpha(at(0, 4 * x + 3)),
                ),
                PixelFormat::Bgra => (
                    [0, 1, 2].map(|c| unstore(at(0, 4 * x + 2 - c), c)),
                    unstore_alpha(at(0, 4 * x + 3)),
                ),
                PixelFormat::PlanarRgb => ([0, 1, 2].map(|c| unstore(at(c, x), c)), f64::NAN),
                PixelFormat::PlanarBgr => ([0, 1, 2].map(|c| unstore(at(2 - c, x), c)), f64::NAN),
                f => panic!("{f} is not a destination format"),
            };
            out.push(px);
        }
    }
    out
}

/// The largest difference between a destination read back and the reference, over the
/// colour channels the format has; for integer dtypes the reference is rounded first.
/// Also checks alpha is opaque. Returns (max difference, index of the worst pixel).
pub fn max_error(
    got: &[([f64; 3], f64)],
    want: &[[f64; 3]],
    format: PixelFormat,
    dtype: DType,
) -> (f64, usize) {
    let channels = if format == PixelFormat::Grey { 1 } else { 3 };
    let integer = matches!(dtype, DType::U8 | DType::I8);
    let mut worst = (0.0f64, 0usize);
    for (i, ((g, alpha), w)) in got.iter().zip(want).enumerate() {
        for c in 0..channels {
            let w = if integer { (w[c] + 0.5).floor() } else { w[c] };
            let d = (g[c] - w).abs();
            if d > worst.0 || d.is_nan() {
                worst = (if d.is_nan() { f64::INFINITY } else { d }, i);
            }
        }
        if !alpha.is_nan() && (alpha - 255.0).abs() > 0.01 {
            worst = (f64::INFINITY, i);
        }
    }
    worst
}

/// Every destination format.
pub const DST_FORMATS: &[PixelFormat] = pinframe::Backend::Cpu.destination_formats();

/// The TFLite quantisation of one reference channel value `v` (0..=255 units, as
/// [`reference`] returns it), from the formulas: the normalised `x = (v / 255 - mean) /
/// std`, then `q = clamp(round(x / scale) + zero_point)` into the dtype's range (`round`
/// half away from zero, as TFLite's reference kernels do).
pub fn quantize_value(
    v: f64,
    channel: usize,
    normalize: &pinframe::Normalize,
    q: &pinframe::Quantize,
    dtype: DType,
) -> f64 {
    let (lo, hi) = match dtype {
        DType::U8 => (0.0, 255.0),
        DType::I8 => (-128.0, 127.0),
        d => panic!("{d} is not a quantised dtype"),
    };
    let x = (v / 255.0 - f64::from(normalize.mean[channel])) / f64::from(normalize.std[channel]);
    let r = (x / f64::from(q.scale[channel])).round() + f64::from(q.zero_point[channel]);
    r.clamp(lo, hi)
}

/// [`reference`]'s values quantised channel by channel ([`quantize_value`]).
pub fn quantized_reference(
    want: &[[f64; 3]],
    normalize: &pinframe::Normalize,
    q: &pinframe::Quantize,
    dtype: DType,
) -> Vec<[f64; 3]> {
    want.iter()
        .map(|px| [0, 1, 2].map(|c| quantize_value(px[c], c, normalize, q, dtype)))
        .collect()
}

/// Reads a quantised destination's stored integers back (R, G, B order; grey in [0]), with
/// alpha in u8 units (255 when opaque, as [`max_error`] expects; NaN where there is none).
pub fn read_back_quantized<T: Readback>(dst: &[T], l: &ImageLayout) -> Vec<([f64; 3], f64)> {
    // Stored integers are what `read_back` gives for u8; for i8 undo its XOR.
    let raw = read_back(dst, l, [0.0; 3], [1.0; 3]);
    let signed = l.dtype() == DType::I8;
    raw.into_iter()
        .map(|(c, a)| {
            if signed {
                (c.map(|v| v - 128.0), a)
            } else {
                (c, a)
            }
        })
        .collect()
}

/// What the conversion tests fill destination buffers with, to see what was written.
pub const SENTINEL: u8 = 0xA5;

/// Converts with `proc` (the CPU backend in the CPU tests) into a sentinel-filled
/// destination buffer; checks every byte the destination layout does not cover is
/// untouched, and returns the error against the reference.
pub fn check<T: Readback>(
    proc: &mut ImageProcessor,
    bufs: &[Vec<u8>],
    src: &ImageLayout,
    dst: &ImageLayout,
    o: &ConvertOptions,
) -> f64 {
    let elem = std::mem::size_of::<T>();
    let mut out = vec![T::zeroed(); dst.allocation_len(0) / elem + 3];
    bytemuck::cast_slice_mut::<T, u8>(&mut out).fill(SENTINEL);
    let slices: Vec<&[u8]> = bufs.iter().map(|b| b.as_slice()).collect();
    proc.convert_buffers(&slices, src, &mut out, dst, o)
        .unwrap_or_else(|e| panic!("{src:?} -> {dst:?} {o:?}: {e}"));
    // Bytes outside the image (stride padding, gaps, the tail) keep the sentinel.
    let bytes: &[u8] = bytemuck::cast_slice(&out);
    let mut covered = vec![false; bytes.len()];
    for (i, p) in dst.planes().iter().enumerate() {
        for r in 0..dst.plane_height(i) as usize {
            let start = p.offset + r * p.stride;
            covered[start..start + dst.plane_row_bytes(i)].fill(true);
        }
    }
    for (i, (&b, &c)) in bytes.iter().zip(&covered).enumerate() {
        assert!(c || b == SENTINEL, "byte {i} outside {dst:?} was written");
    }
    let want = reference(bufs, src, dst.width(), dst.height(), dst.format(), o);
    let got = read_back(&out, dst, o.normalize.mean, o.normalize.std);
    let (err, at) = max_error(&got, &want, dst.format(), dst.dtype());
    let w = dst.width() as usize;
    assert!(
        err <= tolerance(dst.dtype()),
        "{src:?} -> {dst:?} {o:?}: error {err} at ({}, {}): got {:?} want {:?}",
        at % w,
        at / w,
        got[at],
        want[at]
    );
    err
}

/// The error a CPU conversion may have against the reference: one step of an integer
/// store, 0.6 (in 0..=255 units) for floats.
pub fn tolerance(dtype: DType) -> f64 {
    match dtype {
        DType::U8 | DType::I8 => 1.0,
        // Float outputs keep the unrounded value: compare in 0..=255 units.
        _ => 0.6,
    }
}

/// [`check`] for the element type of `dst`.
pub fn check_dtype(
    proc: &mut ImageProcessor,
    bufs: &[Vec<u8>],
    src: &ImageLayout,
    dst: &ImageLayout,
    o: &ConvertOptions,
) -> f64 {
    match dst.dtype() {
        DType::U8 => check::<u8>(proc, bufs, src, dst, o),
        DType::I8 => check::<i8>(proc, bufs, src, dst, o),
        DType::F16 => check::<half::f16>(proc, bufs, src, dst, o),
        DType::F32 => check::<f32>(proc, bufs, src, dst, o),
        d => panic!("{d} is not a destination dtype"),
    }
}

/// The ISP a sensor's frames need, scaled to `format`'s white level: per-site black
/// levels, daylight gains (enough to clip bright sites), a colour matrix with negative
/// off-diagonals (rows summing to 1, as calibrated ones do) and the sRGB curve.
pub fn sensor_isp(format: PixelFormat) -> Isp {
    let white = format.storage().max_value();
    Isp {
        black_level: [64u32, 60, 68, 56].map(|b| (b * (white + 1) / 1024) as u16),
        gains: [1.9, 1.0, 1.6],
        ccm: [[1.6, -0.4, -0.2], [-0.3, 1.5, -0.2], [-0.1, -0.5, 1.6]],
        gamma: Gamma::Srgb,
    }
}
