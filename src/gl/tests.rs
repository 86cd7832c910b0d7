//! GL backend vs an independent f64 implementation of DESIGN.md's conventions
//! (replicated chroma, bilinear in the source domain with centres at +0.5 and edge
//! clamp, convert then clamp once, i8 = u8 ^ 0x80, floats = (v/255 - mean)/std).

use super::*;
use crate::DType;
use crate::convert::plan::RGB_TO_GREY;
use crate::convert::{
    ColorimetryChoice, ConvertOptions, Crop, Fit, Flip, Interpolation, Normalize, Rotation,
};
use crate::image::{Colorimetry, FormatFamily, Matrix, PixelFormat, Plane, Range};

fn under_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// The backend, or None (after saying why) when GL cannot start outside CI.
fn backend(test: &str) -> Option<GlBackend> {
    match GlBackend::new(GlConfig::default()) {
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
            let yo = if x.is_multiple_of(2) { o[0] } else { o[2] };
            [at(0, base + yo), at(0, base + o[1]), at(0, base + o[3])]
        }
        FormatFamily::SemiPlanarYuv => {
            let vs = f.chroma_subsampling().1 as usize;
            let c = (y / vs) * st(1) + (x / 2) * 2;
            let (u, v) = (at(1, c), at(1, c + 1));
            let (u, v) = if f.chroma_swapped() { (v, u) } else { (u, v) };
            [at(0, y * st(0) + x), u, v]
        }
        FormatFamily::PlanarYuv => {
            let (up, vp) = if f.chroma_swapped() { (2, 1) } else { (1, 2) };
            let (hs, vs) = f.chroma_subsampling();
            let (cx, cy) = (x / hs as usize, y / vs as usize);
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
        // Y10/Y12/Y16: 255 * min(word, white) / white.
        FormatFamily::DeepGrey => {
            let word = at(0, y * st(0) + 2 * x) + 256.0 * at(0, y * st(0) + 2 * x + 1);
            let white = f64::from(f.storage().max_value());
            let g = 255.0 * word.min(white) / white;
            [g, g, g]
        }
        // P010/P012/P016: words / 256, chroma pairs (Cb, Cr) of 4:2:0.
        FormatFamily::SemiPlanarYuv16 => {
            let word = |p: usize, off: usize| (at(p, off) + 256.0 * at(p, off + 1)) / 256.0;
            let c = (y / 2) * st(1) + (x / 2) * 4;
            [word(0, y * st(0) + 2 * x), word(1, c), word(1, c + 2)]
        }
        // Not sampled here: planar RGB is no GL source, and Bayer sources are left to
        // tests/gl_convert.rs (see `sources`).
        FormatFamily::PlanarRgb | FormatFamily::Bayer | FormatFamily::Jpeg => unreachable!(),
    }
}

/// f64 reference of one destination pixel: R, G, B (or grey in [0]) in 0..255,
/// clamped, unrounded. Geometry from the plan's affine map only; taps, weights and the
/// colour transform are computed here, independently, from DESIGN.md's definitions.
fn ref_pixel(
    p: &Plan,
    opts: &ConvertOptions,
    l: &ImageLayout,
    b: &[Vec<u8>],
    x: u32,
    y: u32,
) -> [f64; 3] {
    let v = p.valid;
    let pad = match opts.fit {
        Fit::Letterbox { pad } => pad.map(f64::from),
        _ => [0.0; 3],
    };
    let grey_out = p.dst_format == PixelFormat::Grey;
    let luma = |c: [f64; 3]| RGB_TO_GREY[0] * c[0] + RGB_TO_GREY[1] * c[1] + RGB_TO_GREY[2] * c[2];
    if x < v[0] || y < v[1] || x >= v[0] + v[2] || y >= v[1] + v[3] {
        return if grey_out { [luma(pad), 0.0, 0.0] } else { pad };
    }
    let (sx, sy) = p.sample_point(x, y);
    let crop = opts.crop.unwrap_or(Crop::new(0, 0, l.width(), l.height()));
    let (lox, hix) = (crop.x as i64, (crop.x + crop.width) as i64 - 1);
    let (loy, hiy) = (crop.y as i64, (crop.y + crop.height) as i64 - 1);
    let s = if opts.interpolation == Interpolation::Nearest {
        ref_fetch(
            l,
            b,
            (sx.floor() as i64).clamp(lox, hix) as usize,
            (sy.floor() as i64).clamp(loy, hiy) as usize,
        )
    } else {
        let (fx, fy) = (sx - 0.5, sy - 0.5);
        let (x0, y0) = (fx.floor(), fy.floor());
        let (ax, ay) = (fx - x0, fy - y0);
        let (x0, y0) = (x0 as i64, y0 as i64);
        let (xa, xb) = (
            x0.clamp(lox, hix) as usize,
            (x0 + 1).clamp(lox, hix) as usize,
        );
        let (ya, yb) = (
            y0.clamp(loy, hiy) as usize,
            (y0 + 1).clamp(loy, hiy) as usize,
        );
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
        let c = match opts.colorimetry {
            ColorimetryChoice::Fixed(c) => c,
            ColorimetryChoice::Auto => Colorimetry::default_for_height(l.height()),
        };
        let (mm, y0) = c.yuv_to_rgb();
        if grey_out {
            // Grey from YUV is the range-expanded luma.
            return [((s[0] - y0) * mm[0][0]).clamp(0.0, 255.0), 0.0, 0.0];
        }
        let yuv = [s[0] - y0, s[1] - 128.0, s[2] - 128.0];
        let mut o = [0.0; 3];
        for r in 0..3 {
            o[r] = mm[r][0] * yuv[0] + mm[r][1] * yuv[1] + mm[r][2] * yuv[2];
        }
        o
    } else {
        s
    };
    if grey_out {
        let g = if l.format().channels() == 1 {
            rgb[0]
        } else {
            luma(rgb)
        };
        return [g.clamp(0.0, 255.0), 0.0, 0.0];
    }
    rgb.map(|v| v.clamp(0.0, 255.0))
}

/// Compares the GL destination with the reference; returns the max difference
/// (in u8 steps for integer outputs, in units of 1/255 for float outputs).
fn compare(
    p: &Plan,
    opts: &ConvertOptions,
    sl: &ImageLayout,
    sb: &[Vec<u8>],
    dl: &ImageLayout,
    db: &[u8],
) -> f64 {
    let f = dl.format();
    let (w, h) = (dl.width(), dl.height());
    let es = dl.dtype().size();
    let planar = f.family() == FormatFamily::PlanarRgb;
    let n = if planar { 1 } else { f.channels() };
    let norm = opts.normalize;
    let mut worst = 0.0f64;
    for y in 0..h {
        for x in 0..w {
            let px = ref_pixel(p, opts, sl, sb, x, y);
            for c in 0..f.channels() {
                let (plane, elem) = if planar {
                    (c, x as usize)
                } else {
                    (0, x as usize * n + c)
                };
                // Which output channel lives at memory channel c (3 = alpha).
                let ch = if f == PixelFormat::Grey {
                    0
                } else {
                    let (o, a) = f.rgb_order().unwrap();
                    if Some(c) == a {
                        3
                    } else {
                        o.iter().position(|&p| p == c).unwrap()
                    }
                };
                let v = if ch == 3 { 255.0 } else { px[ch] };
                let pl = dl.planes()[plane];
                let off = pl.offset + y as usize * pl.stride + elem * es;
                let bytes = &db[off..off + es];
                let fref = if ch == 3 {
                    1.0
                } else {
                    (v / 255.0 - norm.mean[ch] as f64) / norm.std[ch] as f64
                };
                // Integer outputs in u8 units (i8 + 128): the rounded value, or the TFLite
                // quantisation of the normalised one.
                let int = match opts.quantize {
                    Some(q) if ch != 3 => {
                        let lo = if dl.dtype() == DType::I8 { -128.0 } else { 0.0 };
                        let r =
                            (fref / f64::from(q.scale[ch])).round() + f64::from(q.zero_point[ch]);
                        r.clamp(lo, lo + 255.0) - lo
                    }
                    _ => (v + 0.5).floor(),
                };
                let diff = match dl.dtype() {
                    DType::U8 => (bytes[0] as f64 - int).abs(),
                    DType::I8 => ((bytes[0] ^ 0x80) as f64 - int).abs(),
                    DType::F32 => {
                        let g = f32::from_le_bytes(bytes.try_into().unwrap()) as f64;
                        (g - fref).abs() * 255.0
                    }
                    DType::F16 => {
                        let g = half::f16::from_le_bytes(bytes.try_into().unwrap()).to_f64();
                        // f16 itself carries ~3 significant digits.
                        ((g - fref).abs() - fref.abs() / 1024.0).max(0.0) * 255.0
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

/// The GL sources but Bayer: the RAW pipeline's f64 reference (demosaic and all) lives
/// once, in tests/common/reference.rs, and tests/gl_convert.rs checks every Bayer format
/// against it and against the CPU backend; restating it here would be a second copy.
fn sources() -> Vec<PixelFormat> {
    crate::Backend::Gl
        .source_formats()
        .iter()
        .copied()
        .filter(|f| f.family() != FormatFamily::Bayer && !f.is_compressed())
        .collect()
}
const DESTS: &[PixelFormat] = crate::Backend::Gl.destination_formats();
const DTYPES: [DType; 4] = [DType::U8, DType::I8, DType::F16, DType::F32];

fn random_source(rng: &mut Rng, l: &ImageLayout) -> Vec<Vec<u8>> {
    (0..l.buffer_count())
        .map(|b| (0..l.allocation_len(b)).map(|_| rng.byte()).collect())
        .collect()
}

fn run(
    be: &mut GlBackend,
    opts: &ConvertOptions,
    sl: &ImageLayout,
    sb: &[Vec<u8>],
    dl: &ImageLayout,
) -> (Plan, Vec<u8>) {
    let plan = Plan::new(sl, dl, opts).unwrap_or_else(|e| panic!("{sl:?} -> {dl:?}: {e}"));
    let mut out = vec![0xA5u8; dl.allocation_len(0)];
    let src: Vec<&[u8]> = sb.iter().map(|v| v.as_slice()).collect();
    be.convert_bytes(&plan, sl, &src, dl, &mut [&mut out[..]])
        .unwrap_or_else(|e| panic!("{sl:?} -> {dl:?}: {e}"));
    (plan, out)
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
    let opts = ConvertOptions {
        normalize: Normalize::IMAGENET,
        ..Default::default()
    };
    let mut worst = [0.0f64; 4];
    for sf in sources() {
        let sl = ImageLayout::new(w, h, sf).unwrap();
        let sb = random_source(&mut rng, &sl);
        for &df in DESTS {
            for (k, dt) in DTYPES.into_iter().enumerate() {
                let dl = ImageLayout::tight(w, h, df, dt).unwrap();
                let (plan, out) = run(&mut be, &opts, &sl, &sb, &dl);
                let d = compare(&plan, &opts, &sl, &sb, &dl, &out);
                assert!(
                    d <= limit(dt),
                    "{sf} -> {df}/{dt}: max diff {d} vs the f64 reference"
                );
                worst[k] = worst[k].max(d);
            }
        }
    }
    eprintln!("max diff vs f64 reference (u8, i8, f16, f32 in 1/255 units): {worst:?}");
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
    let rotations = [Rotation::R0, Rotation::R90, Rotation::R180, Rotation::R270];
    let flips = [Flip::None, Flip::Horizontal, Flip::Vertical];
    let mut case = 0usize;
    let mut worst = 0.0f64;
    for sf in sources() {
        // Odd widths of 4:2:x sources need a padded stride (the layout checks it).
        let (sw, sh) = (45u32, 31u32);
        let base = ImageLayout::new(sw + (sw % 2), sh, sf).unwrap();
        let stride = base.planes()[0].stride + 13 + (case % 3) * 8;
        let sl = ImageLayout::with_stride(sw, sh, sf, DType::U8, stride).unwrap();
        let sb = random_source(&mut rng, &sl);
        for rotation in rotations {
            for flip in flips {
                case += 1;
                let df = DESTS[case % DESTS.len()];
                let dt = DTYPES[(case / 3) % DTYPES.len()];
                let (dw, dh) = (21 + (case % 5) as u32, 17 + (case % 4) as u32);
                let fit = match case % 3 {
                    0 => Fit::Letterbox {
                        pad: [114, 60, 200],
                    },
                    1 => Fit::Fill,
                    _ => Fit::Stretch,
                };
                let opts = ConvertOptions {
                    crop: Some(Crop::new(3, 2, sw - 7 - (case % 3) as u32, sh - 5)),
                    flip,
                    rotation,
                    fit,
                    interpolation: if case.is_multiple_of(5) {
                        Interpolation::Nearest
                    } else {
                        Interpolation::Bilinear
                    },
                    colorimetry: ColorimetryChoice::Fixed(colorimetries[case % 3]),
                    normalize: Normalize {
                        mean: [0.5, 0.25, 0.0],
                        std: [0.5, 0.25, 1.0],
                    },
                    // Integer destinations are quantised every other case.
                    quantize: (matches!(dt, DType::U8 | DType::I8) && case.is_multiple_of(2)).then(
                        || {
                            let zero = if dt == DType::U8 {
                                [128, 64, 0]
                            } else {
                                [0, -64, -128]
                            };
                            crate::Quantize::per_channel([1.0 / 128.0, 0.01, 1.0 / 255.0], zero)
                        },
                    ),
                    ..Default::default()
                };
                // Padded destination rows too.
                let drow = ImageLayout::tight(dw, dh, df, dt).unwrap().planes()[0].stride;
                let dl =
                    ImageLayout::with_stride(dw, dh, df, dt, drow + 4 * dt.size() + 8).unwrap();
                let (plan, out) = run(&mut be, &opts, &sl, &sb, &dl);
                let d = compare(&plan, &opts, &sl, &sb, &dl, &out);
                assert!(d <= limit(dt), "{sf} -> {df}/{dt} {opts:?}: max diff {d}");
                worst = worst.max(d);
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
    eprintln!("geometry: {case} cases, max diff {worst}");
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
    let dl = ImageLayout::tight(17, 29, PixelFormat::Rgb, DType::U8).unwrap();
    let opts = ConvertOptions {
        rotation: Rotation::R90,
        ..Default::default()
    };
    let (plan, out) = run(&mut be, &opts, &sl, &sb, &dl);
    assert!(compare(&plan, &opts, &sl, &sb, &dl, &out) <= 1.0);
}

#[test]
fn bad_requests_are_errors() {
    let Some(mut be) = backend("bad_requests_are_errors") else {
        return;
    };
    let sl = ImageLayout::new(8, 8, PixelFormat::Yuyv).unwrap();
    let src = vec![0u8; sl.allocation_len(0)];
    let dl = ImageLayout::new(8, 8, PixelFormat::Rgb).unwrap();
    let plan = Plan::new(&sl, &dl, &ConvertOptions::default()).unwrap();
    let mut out = vec![0u8; dl.allocation_len(0)];
    // Short source buffer.
    assert!(
        be.convert_bytes(&plan, &sl, &[&src[..10]], &dl, &mut [&mut out[..]])
            .is_err()
    );
    // Short destination buffer.
    let mut short = [0u8; 10];
    assert!(
        be.convert_bytes(&plan, &sl, &[&src], &dl, &mut [&mut short[..]])
            .is_err()
    );
    // A plan made for other layouts.
    let other = ImageLayout::new(9, 8, PixelFormat::Rgb).unwrap();
    let mut out9 = vec![0u8; other.allocation_len(0)];
    let e = be
        .convert_bytes(&plan, &sl, &[&src], &other, &mut [&mut out9[..]])
        .unwrap_err();
    assert!(
        e.to_string().contains("make a new plan for these layouts"),
        "{e}"
    );
    // Planar source.
    let pl = ImageLayout::new(8, 8, PixelFormat::PlanarRgb).unwrap();
    let psrc = vec![0u8; pl.allocation_len(0)];
    let pplan = Plan::new(&pl, &dl, &ConvertOptions::default()).unwrap();
    assert!(
        be.convert_bytes(&pplan, &pl, &[&psrc], &dl, &mut [&mut out[..]])
            .is_err()
    );
    // A source wider than the context's textures.
    let max = be.info().max_texture_size;
    if max < crate::image::MAX_DIMENSION {
        let wide = ImageLayout::new(max + 2, 1, PixelFormat::Grey).unwrap();
        let wsrc = vec![0u8; wide.allocation_len(0)];
        let wplan = Plan::new(&wide, &dl, &ConvertOptions::default()).unwrap();
        let e = be
            .convert_bytes(&wplan, &wide, &[&wsrc], &dl, &mut [&mut out[..]])
            .unwrap_err();
        assert!(e.to_string().contains("texture"), "{e}");
    }
    // Still works afterwards.
    be.convert_bytes(&plan, &sl, &[&src], &dl, &mut [&mut out[..]])
        .unwrap();
}

#[test]
fn backend_is_send_and_works_from_another_thread() {
    fn assert_send<T: Send>() {}
    assert_send::<GlBackend>();
    let Some(mut be) = backend("backend_is_send_and_works_from_another_thread") else {
        return;
    };
    let sl = ImageLayout::new(4, 4, PixelFormat::Rgba).unwrap();
    let src: Vec<u8> = (0..64u8).collect();
    let dl = ImageLayout::new(4, 4, PixelFormat::Rgba).unwrap();
    let plan = Plan::new(&sl, &dl, &ConvertOptions::default()).unwrap();
    let mut out = vec![0u8; 64];
    be.convert_bytes(&plan, &sl, &[&src], &dl, &mut [&mut out[..]])
        .unwrap();
    let mut expected = src.clone();
    for px in expected.chunks_mut(4) {
        px[3] = 255;
    }
    assert_eq!(out, expected);
    let mut be = std::thread::spawn(move || {
        let mut out = vec![0u8; 64];
        be.convert_bytes(&plan, &sl, &[&src], &dl, &mut [&mut out[..]])
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

#[test]
fn tensors_upload_and_read_back() {
    let Some(mut be) = backend("tensors_upload_and_read_back") else {
        return;
    };
    let mut rng = Rng(5);
    let mut src =
        Tensor::<u8>::image(32, 16, PixelFormat::Nv12, Some(crate::Memory::Heap)).unwrap();
    {
        let mut m = src.map_mut().unwrap();
        for b in m.iter_mut() {
            *b = rng.byte();
        }
    }
    let sb = vec![src.map().unwrap().buffer_bytes(0).to_vec()];
    let mut dst =
        Tensor::<f32>::image(20, 20, PixelFormat::PlanarRgb, Some(crate::Memory::Shm)).unwrap();
    let opts = ConvertOptions {
        fit: Fit::Letterbox { pad: [114; 3] },
        normalize: Normalize::IMAGENET,
        ..Default::default()
    };
    let sl = *src.layout().unwrap();
    let dl = *dst.layout().unwrap();
    let plan = Plan::new(&sl, &dl, &opts).unwrap();
    be.convert(&plan, &src, &mut dst).unwrap();
    let out = dst.map().unwrap().buffer_bytes(0).to_vec();
    assert!(compare(&plan, &opts, &sl, &sb, &dl, &out) <= 1.0);
    let s = be.stats();
    assert_eq!(
        (s.uploads, s.readbacks, s.imports, s.live_images),
        (1, 1, 0, 0)
    );
}

#[test]
fn pbo_uploads_give_the_same_bytes() {
    let Some(mut direct) = backend("pbo_uploads_give_the_same_bytes") else {
        return;
    };
    let mut pbo = GlBackend::new(GlConfig {
        pbo_uploads: true,
        ..GlConfig::default()
    })
    .unwrap();
    let mut rng = Rng(99);
    for (sf, stride_pad) in [
        (PixelFormat::Nv12, 0),
        (PixelFormat::Yuyv, 6),
        (PixelFormat::Rgb, 5),
        (PixelFormat::I420, 3),
    ] {
        let base = ImageLayout::new(30, 20, sf).unwrap();
        let sl =
            ImageLayout::with_stride(30, 20, sf, DType::U8, base.planes()[0].stride + stride_pad)
                .unwrap();
        let sb = random_source(&mut rng, &sl);
        let dl = ImageLayout::tight(17, 13, PixelFormat::Bgr, DType::U8).unwrap();
        let opts = ConvertOptions::default();
        let (_, a) = run(&mut direct, &opts, &sl, &sb, &dl);
        let (plan, b) = run(&mut pbo, &opts, &sl, &sb, &dl);
        assert_eq!(a, b, "{sf}: PBO and direct uploads differ");
        assert!(compare(&plan, &opts, &sl, &sb, &dl, &b) <= 1.0);
    }
    assert_eq!(pbo.stats().uploads, 4);
}
