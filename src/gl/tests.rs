//! GL backend vs an independent f64 implementation of DESIGN.md's conventions
//! (replicated chroma, bilinear in the source domain with centres at +0.5 and edge
//! clamp, convert then clamp once, i8 = u8 ^ 0x80, floats = (v/255 - mean)/std).

use super::*;
use crate::DType;
use crate::image::{Colorimetry, FormatFamily, Matrix, PixelFormat, Plane, Range};

fn under_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// The backend, or None (after saying why) when GL cannot start outside CI.
fn backend(test: &str) -> Option<GlBackend> {
    match GlBackend::new(None) {
        Ok(b) => Some(b),
        Err(e) if !under_ci() => {
            eprintln!("SKIPPED {test}: GL backend cannot start: {e}");
            None
        }
        Err(e) => panic!("{test}: GL backend cannot start under CI=true: {e}"),
    }
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn byte(&mut self) -> u8 {
        (self.next() >> 24) as u8
    }
}

/// Geometry of a test: crop (x, y, w, h), rotation quarter turns clockwise, flip,
/// destination valid rectangle.
#[derive(Clone, Copy, Debug)]
struct Geo {
    crop: [u32; 4],
    quarter_turns: u32,
    flip_h: bool,
    valid: [i32; 4],
    bilinear: bool,
}

fn draw_for(geo: &Geo, colorimetry: Colorimetry, norm: ([f32; 3], [f32; 3])) -> Draw {
    let [cx, cy, cw, ch] = geo.crop.map(|v| v as f64);
    let (ow, oh) = if geo.quarter_turns % 2 == 1 {
        (ch, cw)
    } else {
        (cw, ch)
    };
    let [vx0, vy0, vx1, vy1] = geo.valid.map(|v| v as f64);
    let (sx, sy) = (ow / (vx1 - vx0), oh / (vy1 - vy0));
    // dst -> oriented: o = (d - v0) * s ; oriented -> flipped crop (inverse rotation);
    // flipped -> crop (inverse flip); + crop origin. All affine; compose numerically.
    let map = |dx: f64, dy: f64| -> (f64, f64) {
        let (ox, oy) = ((dx - vx0) * sx, (dy - vy0) * sy);
        let (fx, fy) = match geo.quarter_turns % 4 {
            0 => (ox, oy),
            1 => (oy, ch - ox),
            2 => (cw - ox, ch - oy),
            _ => (cw - oy, ox),
        };
        let fx = if geo.flip_h { cw - fx } else { fx };
        (fx + cx, fy + cy)
    };
    let (t0x, t0y) = map(0.0, 0.0);
    let (ax, ay) = map(1.0, 0.0);
    let (bx, by) = map(0.0, 1.0);
    let (mean, std) = norm;
    Draw {
        m: [
            (ax - t0x) as f32,
            (ay - t0y) as f32,
            (bx - t0x) as f32,
            (by - t0y) as f32,
        ],
        t: [t0x as f32, t0y as f32],
        clamp: [
            geo.crop[0] as i32,
            geo.crop[1] as i32,
            (geo.crop[0] + geo.crop[2]) as i32 - 1,
            (geo.crop[1] + geo.crop[3]) as i32 - 1,
        ],
        valid: geo.valid,
        bilinear: geo.bilinear,
        colorimetry,
        pad: [114.0, 60.0, 200.0, 255.0],
        grey: [0.299, 0.587, 0.114],
        scale: [
            1.0 / (255.0 * std[0]),
            1.0 / (255.0 * std[1]),
            1.0 / (255.0 * std[2]),
            1.0 / 255.0,
        ],
        bias: [-mean[0] / std[0], -mean[1] / std[1], -mean[2] / std[2], 0.0],
    }
}

/// f64 reference of one source pixel in its own domain.
fn ref_fetch(l: &ImageLayout, b: &[Vec<u8>], x: usize, y: usize) -> [f64; 3] {
    let f = l.format();
    let at = |p: usize, off: usize| -> f64 {
        let pl = l.planes()[p];
        b[pl.buffer][pl.offset + off] as f64
    };
    let st = |p: usize| l.planes()[p].stride;
    match f.family() {
        FormatFamily::PackedYuv422 => {
            let o = f.packed_yuv_offsets().unwrap();
            let base = y * st(0) + (x / 2) * 4;
            let yo = if x % 2 == 0 { o[0] } else { o[2] };
            [at(0, base + yo), at(0, base + o[1]), at(0, base + o[3])]
        }
        FormatFamily::SemiPlanarYuv => {
            let vs = f.chroma_subsampling().1 as usize;
            let c = (y / vs) * st(1) + (x / 2) * 2;
            let (u, v) = (at(1, c), at(1, c + 1));
            let (u, v) = if f.chroma_swapped() { (v, u) } else { (u, v) };
            [at(0, y * st(0) + x), u, v]
        }
        FormatFamily::PlanarYuv420 => {
            let (up, vp) = if f.chroma_swapped() { (2, 1) } else { (1, 2) };
            let (cx, cy) = (x / 2, y / 2);
            [
                at(0, y * st(0) + x),
                at(up, cy * st(up) + cx),
                at(vp, cy * st(vp) + cx),
            ]
        }
        FormatFamily::Grey => {
            let g = at(0, y * st(0) + x);
            [g, g, g]
        }
        FormatFamily::PackedRgb => {
            let (o, _) = f.rgb_order().unwrap();
            let n = f.channels();
            let base = y * st(0) + x * n;
            [at(0, base + o[0]), at(0, base + o[1]), at(0, base + o[2])]
        }
        FormatFamily::PlanarRgb => unreachable!(),
    }
}

/// f64 reference of one destination pixel, RGBA in 0..255 (unrounded).
fn ref_pixel(d: &Draw, l: &ImageLayout, b: &[Vec<u8>], x: i32, y: i32) -> [f64; 4] {
    let v = d.valid;
    if x < v[0] || y < v[1] || x >= v[2] || y >= v[3] {
        return d.pad.map(|p| p as f64);
    }
    let m = d.m.map(|v| v as f64);
    let (px, py) = (x as f64 + 0.5, y as f64 + 0.5);
    let sx = m[0] * px + m[2] * py + d.t[0] as f64;
    let sy = m[1] * px + m[3] * py + d.t[1] as f64;
    let c = d.clamp;
    let cl = |v: f64, lo: i32, hi: i32| (v as i64).clamp(lo as i64, hi as i64) as usize;
    let s = if !d.bilinear {
        {
            let bias = 1.0 / 1024.0;
            ref_fetch(
                l,
                b,
                cl((sx + bias).floor(), c[0], c[2]),
                cl((sy + bias).floor(), c[1], c[3]),
            )
        }
    } else {
        let (fx, fy) = (sx - 0.5, sy - 0.5);
        let (x0, y0) = (fx.floor(), fy.floor());
        let (ax, ay) = (fx - x0, fy - y0);
        let (xa, xb) = (cl(x0, c[0], c[2]), cl(x0 + 1.0, c[0], c[2]));
        let (ya, yb) = (cl(y0, c[1], c[3]), cl(y0 + 1.0, c[1], c[3]));
        let (s00, s10) = (ref_fetch(l, b, xa, ya), ref_fetch(l, b, xb, ya));
        let (s01, s11) = (ref_fetch(l, b, xa, yb), ref_fetch(l, b, xb, yb));
        let mut o = [0.0; 3];
        for k in 0..3 {
            let top = s00[k] + (s10[k] - s00[k]) * ax;
            let bot = s01[k] + (s11[k] - s01[k]) * ax;
            o[k] = top + (bot - top) * ay;
        }
        o
    };
    let rgb = if l.format().is_yuv() {
        let (mm, y0) = d.colorimetry.yuv_to_rgb();
        let yuv = [s[0] - y0, s[1] - 128.0, s[2] - 128.0];
        let mut o = [0.0; 3];
        for r in 0..3 {
            o[r] = mm[r][0] * yuv[0] + mm[r][1] * yuv[1] + mm[r][2] * yuv[2];
        }
        o
    } else {
        s
    };
    [
        rgb[0].clamp(0.0, 255.0),
        rgb[1].clamp(0.0, 255.0),
        rgb[2].clamp(0.0, 255.0),
        255.0,
    ]
}

/// Compares the GL destination with the reference; returns the max difference
/// (in u8 steps for integer outputs, in units of 1/255 for float outputs).
fn compare(d: &Draw, sl: &ImageLayout, sb: &[Vec<u8>], dl: &ImageLayout, db: &[u8]) -> f64 {
    let f = dl.format();
    let (w, h) = (dl.width() as usize, dl.height() as usize);
    let es = dl.dtype().size();
    let planar = f.family() == FormatFamily::PlanarRgb;
    let n = if planar { 1 } else { f.channels() };
    let mut worst = 0.0f64;
    for y in 0..h {
        for x in 0..w {
            let px = ref_pixel(d, sl, sb, x as i32, y as i32);
            for c in 0..f.channels() {
                let (plane, elem) = if planar { (c, x) } else { (0, x * n + c) };
                // Which RGBA channel lives at memory channel c.
                let ch = if f == PixelFormat::Grey {
                    4
                } else {
                    let (o, a) = f.rgb_order().unwrap();
                    if Some(c) == a {
                        3
                    } else {
                        o.iter().position(|&p| p == c).unwrap()
                    }
                };
                let v = if ch == 4 {
                    px[0] * d.grey[0] as f64 + px[1] * d.grey[1] as f64 + px[2] * d.grey[2] as f64
                } else {
                    px[ch]
                };
                let p = dl.planes()[plane];
                let off = p.offset + y * p.stride + elem * es;
                let bytes = &db[off..off + es];
                let k = ch.min(3) % 4;
                let k = if ch == 4 { 0 } else { k };
                let diff = match dl.dtype() {
                    DType::U8 => (bytes[0] as f64 - v.round()).abs(),
                    DType::I8 => ((bytes[0] ^ 0x80) as f64 - v.round()).abs(),
                    DType::F32 => {
                        let g = f32::from_le_bytes(bytes.try_into().unwrap()) as f64;
                        let r = v * d.scale[k] as f64 + d.bias[k] as f64;
                        (g - r).abs() * 255.0
                    }
                    DType::F16 => {
                        let g = half::f16::from_le_bytes(bytes.try_into().unwrap()).to_f64();
                        let r = v * d.scale[k] as f64 + d.bias[k] as f64;
                        (g - r).abs() * 255.0
                    }
                    _ => unreachable!(),
                };
                if diff > worst {
                    worst = diff;
                }
            }
        }
    }
    worst
}

const SOURCES: [PixelFormat; 15] = [
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
];
const DESTS: [PixelFormat; 7] = [
    PixelFormat::Rgb,
    PixelFormat::Bgr,
    PixelFormat::Rgba,
    PixelFormat::Bgra,
    PixelFormat::Grey,
    PixelFormat::PlanarRgb,
    PixelFormat::PlanarBgr,
];
const DTYPES: [DType; 4] = [DType::U8, DType::I8, DType::F16, DType::F32];

fn random_source(rng: &mut Rng, l: &ImageLayout) -> Vec<Vec<u8>> {
    (0..l.buffer_count())
        .map(|b| (0..l.allocation_len(b)).map(|_| rng.byte()).collect())
        .collect()
}

fn run(
    be: &mut GlBackend,
    d: &Draw,
    sl: &ImageLayout,
    sb: &[Vec<u8>],
    dl: &ImageLayout,
) -> Vec<u8> {
    let mut out = vec![0xA5u8; dl.allocation_len(0)];
    let src: Vec<&[u8]> = sb.iter().map(|v| v.as_slice()).collect();
    be.convert_host(d, sl, &src, dl, &mut [&mut out[..]])
        .unwrap_or_else(|e| panic!("{sl:?} -> {dl:?}: {e}"));
    out
}

/// Limit for a comparison: ±1 u8 step; floats within 1/255 (both vs the f64 reference).
fn limit(dt: DType) -> f64 {
    match dt {
        DType::U8 | DType::I8 => 1.0,
        _ => 1.0,
    }
}

#[test]
fn every_format_pair_and_dtype_same_size() {
    let Some(mut be) = backend("every_format_pair_and_dtype_same_size") else {
        return;
    };
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let (w, h) = (34u32, 18u32);
    let geo = Geo {
        crop: [0, 0, w, h],
        quarter_turns: 0,
        flip_h: false,
        valid: [0, 0, w as i32, h as i32],
        bilinear: true,
    };
    for sf in SOURCES {
        let sl = ImageLayout::new(w, h, sf).unwrap();
        let sb = random_source(&mut rng, &sl);
        for df in DESTS {
            for dt in DTYPES {
                let dl = ImageLayout::tight(w, h, df, dt).unwrap();
                let norm = ([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]);
                let d = draw_for(&geo, Colorimetry::BT601_LIMITED, norm);
                let out = run(&mut be, &d, &sl, &sb, &dl);
                let worst = compare(&d, &sl, &sb, &dl, &out);
                assert!(
                    worst <= limit(dt),
                    "{sf} -> {df}/{dt}: max diff {worst} vs the f64 reference"
                );
            }
        }
    }
    assert_eq!(be.stats().uploads, be.stats().readbacks);
}

#[test]
fn geometry_rotations_flips_crops_letterbox_odd_sizes() {
    let Some(mut be) = backend("geometry_rotations_flips_crops_letterbox_odd_sizes") else {
        return;
    };
    let mut rng = Rng(0x2545_F491_4F6C_DD1D);
    let colorimetries = [
        Colorimetry::new(Matrix::Bt601, Range::Limited),
        Colorimetry::new(Matrix::Bt709, Range::Full),
        Colorimetry::new(Matrix::Bt2020, Range::Limited),
    ];
    let mut case = 0usize;
    for sf in SOURCES {
        // Odd source sizes need a padded stride for 4:2:x (the layout checks it).
        let (sw, sh) = if sf.is_yuv() {
            (46u32, 30u32)
        } else {
            (45u32, 31u32)
        };
        let stride_pad = 13 + (case % 3) * 8;
        let base = ImageLayout::new(sw, sh, sf).unwrap();
        let stride = base.planes()[0].stride + stride_pad;
        let sl = ImageLayout::with_stride(sw, sh, sf, DType::U8, stride).unwrap();
        let sb = random_source(&mut rng, &sl);
        for q in 0..4u32 {
            for flip in [false, true] {
                case += 1;
                let df = DESTS[case % DESTS.len()];
                let dt = DTYPES[(case / 3) % DTYPES.len()];
                let (dw, dh) = (21 + (case % 5) as u32, 17 + (case % 4) as u32);
                let crop = [3, 2, sw - 7 - (case % 3) as u32, sh - 5];
                let letterbox = case % 2 == 0;
                let valid = if letterbox {
                    [2, 3, dw as i32 - 1, dh as i32 - 2]
                } else {
                    [0, 0, dw as i32, dh as i32]
                };
                let geo = Geo {
                    crop,
                    quarter_turns: q,
                    flip_h: flip,
                    valid,
                    bilinear: case % 5 != 0,
                };
                // Padded destination rows too.
                let drow = ImageLayout::tight(dw, dh, df, dt).unwrap().planes()[0].stride;
                let dl =
                    ImageLayout::with_stride(dw, dh, df, dt, drow + 4 * dt.size() + 8).unwrap();
                let d = draw_for(
                    &geo,
                    colorimetries[case % 3],
                    ([0.5, 0.25, 0.0], [0.5, 0.25, 1.0]),
                );
                let out = run(&mut be, &d, &sl, &sb, &dl);
                let worst = compare(&d, &sl, &sb, &dl, &out);
                assert!(
                    worst <= limit(dt),
                    "{sf} -> {df}/{dt} {geo:?}: max diff {worst}"
                );
                // Padding bytes between rows are left untouched.
                let p = dl.planes()[0];
                assert_eq!(
                    out[p.offset + p.stride - 1],
                    0xA5,
                    "row padding overwritten"
                );
            }
        }
    }
}

#[test]
fn two_buffer_semi_planar_and_plane_offsets() {
    let Some(mut be) = backend("two_buffer_semi_planar_and_plane_offsets") else {
        return;
    };
    let mut rng = Rng(77);
    let (w, h) = (40u32, 24u32);
    let planes = [
        Plane::new(64, 48),
        Plane {
            buffer: 1,
            offset: 16,
            stride: 56,
        },
    ];
    let sl = ImageLayout::with_planes(w, h, PixelFormat::Nv12, DType::U8, &planes).unwrap();
    let sb = random_source(&mut rng, &sl);
    let geo = Geo {
        crop: [0, 0, w, h],
        quarter_turns: 1,
        flip_h: false,
        valid: [0, 0, 17, 29],
        bilinear: true,
    };
    let dl = ImageLayout::tight(17, 29, PixelFormat::Rgb, DType::U8).unwrap();
    let d = draw_for(&geo, Colorimetry::BT709_LIMITED, ([0.0; 3], [1.0; 3]));
    let out = run(&mut be, &d, &sl, &sb, &dl);
    assert!(compare(&d, &sl, &sb, &dl, &out) <= 1.0);
}

#[test]
fn bad_requests_are_errors() {
    let Some(mut be) = backend("bad_requests_are_errors") else {
        return;
    };
    let geo = Geo {
        crop: [0, 0, 8, 8],
        quarter_turns: 0,
        flip_h: false,
        valid: [0, 0, 8, 8],
        bilinear: true,
    };
    let d = draw_for(&geo, Colorimetry::BT601_LIMITED, ([0.0; 3], [1.0; 3]));
    let sl = ImageLayout::new(8, 8, PixelFormat::Yuyv).unwrap();
    let src = vec![0u8; sl.allocation_len(0)];
    // YUV destination.
    let dl = ImageLayout::new(8, 8, PixelFormat::Nv12).unwrap();
    let mut out = vec![0u8; dl.allocation_len(0)];
    assert!(
        be.convert_host(&d, &sl, &[&src], &dl, &mut [&mut out[..]])
            .is_err()
    );
    // Short source buffer.
    let dl = ImageLayout::new(8, 8, PixelFormat::Rgb).unwrap();
    let mut out = vec![0u8; dl.allocation_len(0)];
    assert!(
        be.convert_host(&d, &sl, &[&src[..10]], &dl, &mut [&mut out[..]])
            .is_err()
    );
    // Short destination buffer.
    let mut short = vec![0u8; 10];
    assert!(
        be.convert_host(&d, &sl, &[&src], &dl, &mut [&mut short[..]])
            .is_err()
    );
    // Planar source.
    let pl = ImageLayout::new(8, 8, PixelFormat::PlanarRgb).unwrap();
    let psrc = vec![0u8; pl.allocation_len(0)];
    assert!(
        be.convert_host(&d, &pl, &[&psrc], &dl, &mut [&mut out[..]])
            .is_err()
    );
    // Still works afterwards.
    be.convert_host(&d, &sl, &[&src], &dl, &mut [&mut out[..]])
        .unwrap();
}

#[test]
fn backend_is_send_and_works_from_another_thread() {
    fn assert_send<T: Send>() {}
    assert_send::<GlBackend>();
    let Some(mut be) = backend("backend_is_send_and_works_from_another_thread") else {
        return;
    };
    let geo = Geo {
        crop: [0, 0, 4, 4],
        quarter_turns: 0,
        flip_h: false,
        valid: [0, 0, 4, 4],
        bilinear: false,
    };
    let d = draw_for(&geo, Colorimetry::BT601_LIMITED, ([0.0; 3], [1.0; 3]));
    let sl = ImageLayout::new(4, 4, PixelFormat::Rgba).unwrap();
    let src: Vec<u8> = (0..64u8).collect();
    let dl = ImageLayout::new(4, 4, PixelFormat::Rgba).unwrap();
    let mut out = vec![0u8; 64];
    be.convert_host(&d, &sl, &[&src], &dl, &mut [&mut out[..]])
        .unwrap();
    let mut expected = src.clone();
    for px in expected.chunks_mut(4) {
        px[3] = 255;
    }
    assert_eq!(out, expected);
    let be = std::thread::spawn(move || {
        let mut out = vec![0u8; 64];
        be.convert_host(&d, &sl, &[&src], &dl, &mut [&mut out[..]])
            .unwrap();
        assert_eq!(out, expected);
        be
    })
    .join()
    .unwrap();
    assert_eq!(be.stats().draws, 2);
    // A second backend alongside shares the display; dropping one leaves the other working.
    let other = backend("second").unwrap();
    drop(other);
    assert!(be.info().gl_version.contains("OpenGL ES"));
}
