//! The GL backend against the CPU backend (host lane: Mesa llvmpipe, surfaceless EGL):
//! every source × destination × dtype, and geometry with crops, rotations, flips, fits,
//! odd sizes and padded strides, agree within ±2 (u8, i8) and 2/255 (f16, f32).
//!
//! When GL cannot start these tests print SKIPPED with the reason, except under
//! `CI=true`, where that is a failure.
#![cfg(feature = "gl")]

mod common;
#[path = "common/reference.rs"]
mod reference;

use half::f16;
use pinframe::image::FormatFamily;
use pinframe::{
    Backend, Colorimetry, ColorimetryChoice, ConvertOptions, Crop, DType, Fit, Flip, ImageLayout,
    ImageProcessor, Interpolation, Matrix, Memory, Normalize, PixelFormat, Quantize, Range,
    Rotation, SampleStorage, Tensor,
};
use reference::{
    DST_FORMATS, Readback, Rng, max_error, put_raw_code, quantized_reference, random_buffers,
    raw_code, read_back, read_back_quantized, reference, sensor_isp, source_size,
};

/// The raw source formats the GL backend converts (planar RGB/BGR are CPU-only sources;
/// compressed frames are decoded on the CPU first, and tests/mjpeg.rs checks them on GL).
const SOURCES: &[PixelFormat] = {
    let all = Backend::Gl.source_formats();
    let mut n = all.len();
    while all[n - 1].is_compressed() {
        n -= 1;
    }
    all.split_at(n).0
};
const SENTINEL: u8 = 0xA5;

/// Random source buffers whose Bayer and deep-grey codes fit the format's bits (as a
/// sensor writes them). Unmasked random words of a 10- or 12-bit format are nearly all
/// above the white level and would test little but the clip.
fn valid_buffers(src: &ImageLayout, rng: &mut Rng, extra: usize) -> Vec<Vec<u8>> {
    let mut bufs = random_buffers(src, rng, extra);
    let f = src.format();
    if let (FormatFamily::Bayer | FormatFamily::DeepGrey, SampleStorage::Le16Low { bits }) =
        (f.family(), f.storage())
    {
        let white = (1u32 << bits) - 1;
        for y in 0..src.height() {
            for x in 0..src.width() {
                let code = raw_code(&bufs, src, x, y) & white;
                put_raw_code(&mut bufs, src, x, y, code);
            }
        }
    }
    bufs
}

/// The largest differences seen per group of sources (what the tests print, so the new
/// formats' numbers can be read apart from the 8-bit ones).
#[derive(Default)]
struct Worst(std::collections::BTreeMap<String, Vec<f64>>);

impl Worst {
    fn note(&mut self, group: String, slot: usize, d: f64, slots: usize) {
        let v = self.0.entry(group).or_insert_with(|| vec![0.0; slots]);
        v[slot] = v[slot].max(d);
    }
}

impl std::fmt::Display for Worst {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (family, v) in &self.0 {
            write!(f, "\n  {family}: {v:?}")?;
        }
        Ok(())
    }
}

/// A processor on GL, or None after printing why (a panic under CI=true).
fn gl(test: &str) -> Option<ImageProcessor> {
    match ImageProcessor::with_backend(Backend::Gl) {
        Ok(p) => {
            assert_eq!(p.backend(), Backend::Gl);
            Some(p)
        }
        Err(e) if common::under_ci() => panic!("{test}: the GL backend cannot start: {e}"),
        Err(e) => {
            eprintln!("SKIPPED {test}: the GL backend cannot start: {e}");
            None
        }
    }
}

fn cpu() -> ImageProcessor {
    ImageProcessor::with_backend(Backend::Cpu).unwrap()
}

/// Converts on one processor into a sentinel-filled buffer.
fn run<T: Readback>(
    p: &mut ImageProcessor,
    bufs: &[Vec<u8>],
    src: &ImageLayout,
    dst: &ImageLayout,
    o: &ConvertOptions,
) -> Vec<T> {
    let elem = std::mem::size_of::<T>();
    let mut out = vec![T::zeroed(); dst.allocation_len(0).div_ceil(elem) + 2];
    bytemuck::cast_slice_mut::<T, u8>(&mut out).fill(SENTINEL);
    let slices: Vec<&[u8]> = bufs.iter().map(|b| b.as_slice()).collect();
    p.convert_buffers(&slices, src, &mut out, dst, o)
        .unwrap_or_else(|e| panic!("{:?}: {src:?} -> {dst:?} {o:?}: {e}", p.backend()));
    out
}

/// Largest GL-vs-CPU difference over every element of the destination, in u8 steps
/// (integer dtypes) or 1/255 units (floats); bytes outside the image must both keep
/// the sentinel.
fn diff<T: Readback>(a: &[T], b: &[T], dst: &ImageLayout) -> f64 {
    let ab: &[u8] = bytemuck::cast_slice(a);
    let bb: &[u8] = bytemuck::cast_slice(b);
    let e = std::mem::size_of::<T>();
    let mut covered = vec![false; ab.len()];
    for (i, p) in dst.planes().iter().enumerate() {
        for r in 0..dst.plane_height(i) as usize {
            let s = p.offset + r * p.stride;
            covered[s..s + dst.plane_row_bytes(i)].fill(true);
        }
    }
    for (i, &c) in covered.iter().enumerate() {
        if !c {
            assert_eq!(ab[i], SENTINEL, "GL wrote byte {i} outside {dst:?}");
            assert_eq!(bb[i], SENTINEL, "CPU wrote byte {i} outside {dst:?}");
        }
    }
    let scale = if matches!(dst.dtype(), DType::F16 | DType::F32) {
        255.0
    } else {
        1.0
    };
    let mut worst = 0.0f64;
    for (k, (x, y)) in a.iter().zip(b).enumerate() {
        if !covered[k * e] {
            continue;
        }
        let d = (x.as_f64() - y.as_f64()).abs() * scale;
        if d.is_nan() || d > worst {
            worst = if d.is_nan() { f64::INFINITY } else { d };
        }
    }
    worst
}

fn compare(
    g: &mut ImageProcessor,
    c: &mut ImageProcessor,
    bufs: &[Vec<u8>],
    src: &ImageLayout,
    dst: &ImageLayout,
    o: &ConvertOptions,
) -> f64 {
    match dst.dtype() {
        DType::U8 => diff(
            &run::<u8>(g, bufs, src, dst, o),
            &run::<u8>(c, bufs, src, dst, o),
            dst,
        ),
        DType::I8 => diff(
            &run::<i8>(g, bufs, src, dst, o),
            &run::<i8>(c, bufs, src, dst, o),
            dst,
        ),
        DType::F16 => diff(
            &run::<f16>(g, bufs, src, dst, o),
            &run::<f16>(c, bufs, src, dst, o),
            dst,
        ),
        DType::F32 => diff(
            &run::<f32>(g, bufs, src, dst, o),
            &run::<f32>(c, bufs, src, dst, o),
            dst,
        ),
        d => panic!("{d}"),
    }
}

const TOLERANCE: f64 = 2.0;

#[test]
fn gl_matches_cpu_on_every_format_pair_and_dtype() {
    let Some(mut g) = gl("gl_matches_cpu_on_every_format_pair_and_dtype") else {
        return;
    };
    let mut c = cpu();
    let mut rng = Rng::new(1);
    let mut worst = Worst::default();
    for &sf in SOURCES {
        let (sw, sh) = source_size(sf, 46, 30);
        let src = ImageLayout::new(sw, sh, sf).unwrap();
        let bufs = valid_buffers(&src, &mut rng, 0);
        for &df in DST_FORMATS {
            for (k, dt) in [DType::U8, DType::I8, DType::F16, DType::F32]
                .into_iter()
                .enumerate()
            {
                // Same size (no resampling) and a downscale with bilinear taps.
                for (w, h) in [(sw, sh), (37, 23)] {
                    let dst = ImageLayout::tight(w, h, df, dt).unwrap();
                    let o = ConvertOptions {
                        normalize: Normalize::IMAGENET,
                        ..Default::default()
                    };
                    let d = compare(&mut g, &mut c, &bufs, &src, &dst, &o);
                    assert!(
                        d <= TOLERANCE,
                        "{sf} -> {w}x{h} {df}/{dt}: GL vs CPU differ by {d}"
                    );
                    worst.note(format!("{:?}", sf.family()), k, d, 4);
                }
            }
        }
    }
    eprintln!("GL vs CPU max diff per source family, u8/i8 steps and f16/f32 in 1/255:{worst}");
    let s = g.stats();
    assert_eq!(s.uploads, s.readbacks);
    assert_eq!(s.uploads, s.frames);
    assert_eq!((s.imports, s.cpu_fallbacks), (0, 0));
}

/// Quantised u8 and i8 outputs (TFLite's `q = clamp(round(x / scale) + zero_point)`), per
/// tensor and per channel, letterboxed so the padding is quantised too: GL equals the CPU
/// within 1 and both equal the f64 reference within 1.
#[test]
fn gl_quantized_matches_cpu_and_the_reference() {
    let Some(mut g) = gl("gl_quantized_matches_cpu_and_the_reference") else {
        return;
    };
    let mut c = cpu();
    let mut rng = Rng::new(17);
    let half = Normalize {
        mean: [0.5; 3],
        std: [0.5; 3],
    };
    let cases = [
        (DType::U8, half, Quantize::per_tensor(1.0 / 128.0, 128)),
        (
            DType::U8,
            Normalize::IMAGENET,
            Quantize::per_channel([0.02, 0.017, 0.019], [120, 110, 100]),
        ),
        (
            DType::I8,
            Normalize::IDENTITY,
            Quantize::per_tensor(1.0 / 255.0, -128),
        ),
        (
            DType::I8,
            Normalize::IMAGENET,
            Quantize::per_channel([0.018, 0.02, 0.021], [-10, 5, 0]),
        ),
    ];
    let mut worst = Worst::default();
    for &sf in SOURCES {
        let (sw, sh) = source_size(sf, 46, 30);
        let src = ImageLayout::new(sw, sh, sf).unwrap();
        // Unmasked: the deep formats' words above the white level are clipped.
        let bufs = random_buffers(&src, &mut rng, 0);
        for &df in DST_FORMATS {
            for &(dt, normalize, quantize) in &cases {
                let dst = ImageLayout::tight(27, 25, df, dt).unwrap();
                let o = ConvertOptions {
                    fit: Fit::Letterbox { pad: [114, 0, 255] },
                    normalize,
                    quantize: Some(quantize),
                    ..Default::default()
                };
                let want = reference(&bufs, &src, 27, 25, df, &o);
                let want = quantized_reference(&want, &normalize, &quantize, dt);
                let got = match dt {
                    DType::U8 => {
                        read_back_quantized(&run::<u8>(&mut g, &bufs, &src, &dst, &o), &dst)
                    }
                    _ => read_back_quantized(&run::<i8>(&mut g, &bufs, &src, &dst, &o), &dst),
                };
                let (e, at) = max_error(&got, &want, df, DType::F32);
                assert!(
                    e <= 1.0,
                    "{sf} -> {df}/{dt} {quantize:?}: GL vs the f64 reference differ by {e} at {at}: \
                     got {:?} want {:?}",
                    got[at],
                    want[at]
                );
                let d = compare(&mut g, &mut c, &bufs, &src, &dst, &o);
                assert!(
                    d <= 1.0,
                    "{sf} -> {df}/{dt} {quantize:?}: GL vs CPU differ by {d}"
                );
                worst.note(format!("{:?}", sf.family()), 0, d, 2);
                worst.note(format!("{:?}", sf.family()), 1, e, 2);
            }
        }
    }
    eprintln!("quantised, per source family [GL vs CPU, GL vs reference]:{worst}");
}

/// The RAW pipeline with a non-default ISP on every Bayer format: GL against the f64
/// reference (tests/common/reference.rs) and against the CPU backend, within ±1 u8 step
/// (1/255 for f32), at the source's size and through geometry: odd crops that shift the
/// CFA phase, flips, a 90 degree rotation, letterbox and fill, nearest and bilinear.
#[test]
fn gl_isp_matches_the_reference_and_cpu_on_every_bayer_format() {
    let Some(mut g) = gl("gl_isp_matches_the_reference_and_cpu_on_every_bayer_format") else {
        return;
    };
    let mut c = cpu();
    let mut rng = Rng::new(23);
    let bayer: Vec<PixelFormat> = SOURCES
        .iter()
        .copied()
        .filter(|f| f.family() == FormatFamily::Bayer)
        .collect();
    assert_eq!(bayer.len(), 24);
    let geometry = |w: u32, h: u32| -> Vec<(u32, u32, ConvertOptions)> {
        let base = ConvertOptions::default();
        vec![
            (w, h, base),
            (
                19,
                23,
                ConvertOptions {
                    crop: Some(Crop::new(3, 1, w - 6, h - 4)),
                    flip: Flip::Horizontal,
                    rotation: Rotation::R90,
                    fit: Fit::Letterbox { pad: [114, 7, 250] },
                    ..base
                },
            ),
            (
                17,
                13,
                ConvertOptions {
                    crop: Some(Crop::new(1, 2, w - 4, h - 3)),
                    flip: Flip::Vertical,
                    fit: Fit::Fill,
                    interpolation: Interpolation::Nearest,
                    ..base
                },
            ),
            (
                w / 2 + 1,
                h + 3,
                ConvertOptions {
                    crop: Some(Crop::new(w - 7, h - 5, 7, 5)),
                    rotation: Rotation::R270,
                    ..base
                },
            ),
        ]
    };
    // [vs reference u8, f32; vs CPU u8, f32] per sample storage.
    let mut worst = Worst::default();
    for &sf in &bayer {
        let (w, h) = source_size(sf, 26, 18);
        // A padded stride, and odd for the 16-bit formats (so uploads repack the rows).
        let tight = ImageLayout::new(w, h, sf).unwrap().planes()[0].stride;
        let src = ImageLayout::with_stride(w, h, sf, DType::U8, tight + 9).unwrap();
        let bufs = valid_buffers(&src, &mut rng, 0);
        for (k, (dw, dh, o)) in geometry(w, h).into_iter().enumerate() {
            let o = ConvertOptions {
                isp: sensor_isp(sf),
                ..o
            };
            let want = reference(&bufs, &src, dw, dh, PixelFormat::Rgb, &o);
            for (d, (df, dt)) in [
                (PixelFormat::Rgb, DType::U8),
                (PixelFormat::PlanarBgr, DType::F32),
            ]
            .into_iter()
            .enumerate()
            {
                let o = ConvertOptions {
                    normalize: if dt == DType::F32 {
                        Normalize::IMAGENET
                    } else {
                        Normalize::IDENTITY
                    },
                    ..o
                };
                let dst = ImageLayout::tight(dw, dh, df, dt).unwrap();
                let got = match dt {
                    DType::U8 => read_back(
                        &run::<u8>(&mut g, &bufs, &src, &dst, &o),
                        &dst,
                        o.normalize.mean,
                        o.normalize.std,
                    ),
                    _ => read_back(
                        &run::<f32>(&mut g, &bufs, &src, &dst, &o),
                        &dst,
                        o.normalize.mean,
                        o.normalize.std,
                    ),
                };
                let (e, at) = max_error(&got, &want, df, dt);
                assert!(
                    e <= 1.0,
                    "{sf} case {k} -> {df}/{dt}: GL vs the f64 reference differ by {e} at pixel \
                     {at}: got {:?} want {:?}",
                    got[at],
                    want[at]
                );
                worst.note(format!("{:?}", sf.storage()), d, e, 4);
                let d_cpu = compare(&mut g, &mut c, &bufs, &src, &dst, &o);
                assert!(
                    d_cpu <= 1.0,
                    "{sf} case {k} -> {df}/{dt}: GL vs CPU differ by {d_cpu}"
                );
                worst.note(format!("{:?}", sf.storage()), 2 + d, d_cpu, 4);
            }
        }
    }
    eprintln!(
        "Bayer with an ISP per storage [vs reference u8, f32; vs CPU u8, f32] (u8 steps, \
         f32 in 1/255):{worst}"
    );
}

#[test]
fn gl_matches_cpu_on_geometry() {
    let Some(mut g) = gl("gl_matches_cpu_on_geometry") else {
        return;
    };
    let mut c = cpu();
    let mut rng = Rng::new(2);
    let rotations = [Rotation::R0, Rotation::R90, Rotation::R180, Rotation::R270];
    let flips = [Flip::None, Flip::Horizontal, Flip::Vertical];
    let colorimetries = [
        Colorimetry::new(Matrix::Bt601, Range::Limited),
        Colorimetry::new(Matrix::Bt709, Range::Full),
        Colorimetry::new(Matrix::Bt2020, Range::Limited),
    ];
    let mut cases = 0;
    let mut worst = 0.0f64;
    for (si, &sf) in SOURCES.iter().enumerate() {
        // Odd sizes (4:2:x sources need a padded stride for an odd width; Bayer sources
        // are whole CFA tiles, so theirs round up) and padding.
        let (sw, sh) = source_size(sf, 41 + 2 * (si as u32 % 3), 27 + (si as u32 % 2));
        let even = ImageLayout::new(sw.div_ceil(4) * 4, sh, sf).unwrap();
        let src =
            ImageLayout::with_stride(sw, sh, sf, DType::U8, even.planes()[0].stride + 7 + si * 4)
                .unwrap();
        let bufs = valid_buffers(&src, &mut rng, 5);
        for rotation in rotations {
            for flip in flips {
                cases += 1;
                let df = DST_FORMATS[cases % DST_FORMATS.len()];
                let dt = [DType::U8, DType::I8, DType::F16, DType::F32][(cases / 7) % 4];
                let (dw, dh) = (13 + rng.below(30), 11 + rng.below(30));
                let fit = match cases % 3 {
                    0 => Fit::Letterbox { pad: [114, 7, 250] },
                    1 => Fit::Fill,
                    _ => Fit::Stretch,
                };
                let crop = match cases % 4 {
                    0 => None,
                    // Crops touching every border in turn.
                    1 => Some(Crop::new(0, 0, sw - 5, sh - 3)),
                    2 => Some(Crop::new(5, 3, sw - 5, sh - 3)),
                    _ => Some(Crop::new(2, 1, 9, 7)),
                };
                let o = ConvertOptions {
                    crop,
                    flip,
                    rotation,
                    fit,
                    interpolation: if cases % 5 == 0 {
                        Interpolation::Nearest
                    } else {
                        Interpolation::Bilinear
                    },
                    colorimetry: ColorimetryChoice::Fixed(colorimetries[cases % 3]),
                    normalize: Normalize {
                        mean: [0.5, 0.1, 0.9],
                        std: [0.25, 0.5, 2.0],
                    },
                    // Integer outputs quantised every other case.
                    quantize: (matches!(dt, DType::U8 | DType::I8) && cases % 2 == 1).then(|| {
                        let zero = if dt == DType::U8 {
                            [100, 128, 7]
                        } else {
                            [-3, 0, 60]
                        };
                        Quantize::per_channel([0.03, 0.011, 0.009], zero)
                    }),
                    ..Default::default()
                };
                let tight = ImageLayout::tight(dw, dh, df, dt).unwrap();
                let pad = if cases % 2 == 0 {
                    0
                } else {
                    3 * dt.size() + 16
                };
                let dst = ImageLayout::with_stride(dw, dh, df, dt, tight.planes()[0].stride + pad)
                    .unwrap();
                let d = compare(&mut g, &mut c, &bufs, &src, &dst, &o);
                assert!(
                    d <= TOLERANCE,
                    "{src:?} -> {dst:?} {o:?}: GL vs CPU differ by {d}"
                );
                worst = worst.max(d);
            }
        }
    }
    eprintln!("geometry: {cases} cases, GL vs CPU max diff {worst}");
}

#[test]
fn tiny_images_and_a_tile_of_a_batch() {
    let Some(mut g) = gl("tiny_images_and_a_tile_of_a_batch") else {
        return;
    };
    let mut c = cpu();
    let mut rng = Rng::new(3);
    for (sf, sw, sh) in [
        (PixelFormat::Rgb, 1, 1),
        (PixelFormat::Nv12, 2, 2),
        (PixelFormat::Yuyv, 2, 1),
        (PixelFormat::Grey, 1, 3),
        // A 2-pixel-wide CFA image mirrors the demosaic's neighbourhood twice.
        (PixelFormat::Rggb8, 2, 2),
        (PixelFormat::Gbrg12, 2, 4),
        (PixelFormat::Bggr10P, 4, 2),
        (PixelFormat::Grbg12P, 2, 2),
        (PixelFormat::Y10, 1, 3),
        (PixelFormat::P010, 1, 1),
    ] {
        let src = ImageLayout::new(sw, sh, sf).unwrap();
        let bufs = valid_buffers(&src, &mut rng, 0);
        for (dw, dh) in [(1, 1), (2, 2), (5, 3), (641 % 17, 479 % 13)] {
            let dst = ImageLayout::tight(dw, dh, PixelFormat::Rgb, DType::U8).unwrap();
            let d = compare(
                &mut g,
                &mut c,
                &bufs,
                &src,
                &dst,
                &ConvertOptions::default(),
            );
            assert!(d <= TOLERANCE, "{sf} {sw}x{sh} -> {dw}x{dh}: {d}");
        }
    }
    // Tile 1 of a [2, 3, 16, 16] f32 batch: planes at offsets inside the batch buffer.
    let src = ImageLayout::new(32, 32, PixelFormat::Yuyv).unwrap();
    let bufs = random_buffers(&src, &mut rng, 0);
    let plane = 16 * 16 * 4;
    let planes: Vec<pinframe::Plane> = (0..3)
        .map(|p| pinframe::Plane::new(3 * plane + p * plane, 16 * 4))
        .collect();
    let dst =
        ImageLayout::with_planes(16, 16, PixelFormat::PlanarRgb, DType::F32, &planes).unwrap();
    let d = compare(
        &mut g,
        &mut c,
        &bufs,
        &src,
        &dst,
        &ConvertOptions::default(),
    );
    assert!(d <= TOLERANCE, "batch tile: {d}");
}

#[test]
fn tensors_are_uploaded_and_read_back_and_counted() {
    let Some(mut g) = gl("tensors_are_uploaded_and_read_back_and_counted") else {
        return;
    };
    let mut c = cpu();
    let mut rng = Rng::new(4);
    let mut src = Tensor::<u8>::image(64, 48, PixelFormat::Nv12, Some(Memory::Shm)).unwrap();
    src.map_mut()
        .unwrap()
        .iter_mut()
        .for_each(|b| *b = rng.byte());
    let o = ConvertOptions {
        fit: Fit::Letterbox { pad: [114; 3] },
        normalize: Normalize::IMAGENET,
        ..Default::default()
    };
    let mut a = Tensor::<f32>::image(40, 40, PixelFormat::PlanarRgb, Some(Memory::Heap)).unwrap();
    let mut b = Tensor::<f32>::image(40, 40, PixelFormat::PlanarRgb, Some(Memory::Heap)).unwrap();
    let info_gl = g.convert_with(&src, &mut a, &o).unwrap();
    let info_cpu = c.convert_with(&src, &mut b, &o).unwrap();
    assert_eq!(info_gl, info_cpu);
    let d = diff(&a.map().unwrap(), &b.map().unwrap(), a.layout().unwrap());
    assert!(d <= TOLERANCE, "{d}");
    for _ in 0..3 {
        g.convert_with(&src, &mut a, &o).unwrap();
    }
    let s = g.stats();
    assert_eq!((s.frames, s.uploads, s.readbacks, s.imports), (4, 4, 4, 0));
    let gs = g.gl_stats().unwrap();
    assert_eq!((gs.draws, gs.live_images), (4, 0));
}

/// `Backend::Gl.source_formats()` is exactly what GL converts: every listed format is
/// converted (the tests above), every other one is refused with `Error::Unsupported`
/// and a message that names the way out, while the CPU converts it.
#[test]
fn gl_refuses_exactly_the_sources_it_does_not_list() {
    let Some(mut g) = gl("gl_refuses_exactly_the_sources_it_does_not_list") else {
        return;
    };
    let dst = ImageLayout::tight(8, 8, PixelFormat::Rgb, DType::U8).unwrap();
    let mut refused = 0;
    for &sf in PixelFormat::ALL.iter().filter(|f| !SOURCES.contains(f)) {
        let src = ImageLayout::new(8, 8, sf).unwrap();
        let mut rng = Rng::new(7);
        let bufs = random_buffers(&src, &mut rng, 0);
        let slices: Vec<&[u8]> = bufs.iter().map(|b| b.as_slice()).collect();
        let mut out = vec![0u8; dst.allocation_len(0)];
        let o = ConvertOptions::default();
        match g.convert_buffers(&slices, &src, &mut out, &dst, &o) {
            Err(pinframe::Error::Unsupported(m)) => {
                assert!(m.contains("GL source"), "{sf}: {m}");
                refused += 1;
            }
            other => panic!("{sf}: GL should refuse it, got {other:?}"),
        }
        cpu()
            .convert_buffers(&slices, &src, &mut out, &dst, &o)
            .unwrap();
    }
    assert_eq!(refused, PixelFormat::ALL.len() - SOURCES.len());
    assert!(refused > 0);
}

#[test]
fn auto_and_info() {
    let Some(g) = gl("auto_and_info") else {
        return;
    };
    let info = g.gl_info().unwrap().clone();
    eprintln!("{info}");
    assert!(
        info.gl_version.starts_with("OpenGL ES 3"),
        "{}",
        info.gl_version
    );
    assert!(info.max_texture_size >= 2048);
    // Auto uses GL only on a hardware GPU: llvmpipe is slower than the CPU kernels.
    let auto = ImageProcessor::new().unwrap();
    let software = info.gl_renderer.contains("llvmpipe") || info.gl_renderer.contains("softpipe");
    if software && std::env::var_os("PINFRAME_BACKEND").is_none() {
        assert_eq!(auto.backend(), Backend::Cpu);
    }
}

#[test]
fn forced_platforms() {
    if gl("forced_platforms").is_none() {
        return;
    }
    use pinframe::{EglPlatform, GlConfig};
    // The platform that works here can be forced; an unknown env value is an error.
    let s = ImageProcessor::with_gl_config(
        Backend::Gl,
        GlConfig {
            platform: Some(EglPlatform::Surfaceless),
            ..Default::default()
        },
    );
    match s {
        Ok(p) => assert_eq!(p.gl_info().unwrap().platform, EglPlatform::Surfaceless),
        Err(e) => eprintln!("surfaceless not available here: {e}"),
    }
    // GBM needs a render node; on a machine without /dev/dri it must say so, not crash.
    if !std::path::Path::new("/dev/dri").exists() {
        let e = ImageProcessor::with_gl_config(
            Backend::Gl,
            GlConfig {
                platform: Some(EglPlatform::Gbm),
                ..Default::default()
            },
        )
        .unwrap_err();
        assert!(e.to_string().contains("gbm"), "{e}");
    }
    assert!("vulkan".parse::<EglPlatform>().is_err());
}

#[test]
fn a_gl_processor_moves_between_threads() {
    fn assert_send<T: Send>() {}
    assert_send::<ImageProcessor>();
    let Some(mut g) = gl("a_gl_processor_moves_between_threads") else {
        return;
    };
    let mut c = cpu();
    let mut rng = Rng::new(6);
    let src = ImageLayout::new(24, 16, PixelFormat::Uyvy).unwrap();
    let bufs = random_buffers(&src, &mut rng, 0);
    let dst = ImageLayout::tight(12, 12, PixelFormat::Bgr, DType::U8).unwrap();
    let o = ConvertOptions::default();
    let want = run::<u8>(&mut c, &bufs, &src, &dst, &o);
    // Converting on this thread, then on two others in turn: the context is current only
    // during each call, so it follows the processor.
    assert!(diff(&run::<u8>(&mut g, &bufs, &src, &dst, &o), &want, &dst) <= TOLERANCE);
    for _ in 0..2 {
        let (bufs, src, dst, want) = (bufs.clone(), src, dst, want.clone());
        g = std::thread::spawn(move || {
            let got = run::<u8>(&mut g, &bufs, &src, &dst, &ConvertOptions::default());
            assert!(diff(&got, &want, &dst) <= TOLERANCE);
            g
        })
        .join()
        .unwrap();
    }
    assert_eq!(g.stats().frames, 3);
}

mod random_geometry {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

        /// Random formats, sizes (down to 1x1), crops, rotations, flips, fits and filters:
        /// GL and CPU agree within ±2 everywhere.
        #[test]
        fn gl_matches_cpu(
            sfi in 0usize..SOURCES.len(), dfi in 0usize..7, dti in 0usize..4,
            sw in 1u32..40, sh in 1u32..30, dw in 1u32..40, dh in 1u32..40,
            cx in 0.0f64..1.0, cy in 0.0f64..1.0, cw in 0.0f64..1.0, ch in 0.0f64..1.0,
            rot in 0u32..4, flip in 0usize..3, fit in 0usize..3, nearest in any::<bool>(),
            stride_pad in 0usize..9, seed in any::<u64>(),
        ) {
            // One GL processor for every case (contexts are costly to create).
            static GL: std::sync::OnceLock<Option<std::sync::Mutex<ImageProcessor>>> =
                std::sync::OnceLock::new();
            let Some(shared) = GL.get_or_init(|| gl("random_geometry::gl_matches_cpu").map(std::sync::Mutex::new)) else {
                return Ok(());
            };
            let mut g = shared.lock().unwrap_or_else(|e| e.into_inner());
            let mut c = cpu();
            let sf = SOURCES[sfi];
            // 4:2:x sources need even sizes unless the stride leaves room; Bayer sources
            // are whole CFA tiles (and CSI-2 RAW10 rows whole 5-byte groups).
            let (sw, sh) = if sf.is_yuv() { (sw.max(2) & !1, sh.max(2) & !1) } else { source_size(sf, sw, sh) };
            let base = ImageLayout::new(sw, sh, sf).unwrap();
            let src = ImageLayout::with_stride(sw, sh, sf, DType::U8, base.planes()[0].stride + stride_pad * 2).unwrap();
            let bufs = valid_buffers(&src, &mut reference::Rng::new(seed), 3);
            let x = (cx * f64::from(sw - 1)) as u32;
            let y = (cy * f64::from(sh - 1)) as u32;
            let w = 1 + (cw * f64::from(sw - x - 1)) as u32;
            let h = 1 + (ch * f64::from(sh - y - 1)) as u32;
            let dt = [DType::U8, DType::I8, DType::F16, DType::F32][dti];
            let dst = ImageLayout::tight(dw, dh, DST_FORMATS[dfi], dt).unwrap();
            let o = ConvertOptions {
                crop: Some(Crop::new(x, y, w, h)),
                rotation: [Rotation::R0, Rotation::R90, Rotation::R180, Rotation::R270][rot as usize],
                flip: [Flip::None, Flip::Horizontal, Flip::Vertical][flip],
                fit: [Fit::Stretch, Fit::Letterbox { pad: [114, 114, 114] }, Fit::Fill][fit],
                interpolation: if nearest { Interpolation::Nearest } else { Interpolation::Bilinear },
                normalize: Normalize::IMAGENET,
                ..Default::default()
            };
            let d = compare(&mut g, &mut c, &bufs, &src, &dst, &o);
            prop_assert!(d <= TOLERANCE, "{:?} -> {:?} {:?}: {}", src, dst, o, d);
        }
    }
}

#[test]
fn full_hd_frames_letterboxed_like_the_bench() {
    let Some(mut g) = gl("full_hd_frames_letterboxed_like_the_bench") else {
        return;
    };
    let mut c = cpu();
    let mut rng = Rng::new(7);
    for sf in [PixelFormat::Yuyv, PixelFormat::Nv12] {
        let src = ImageLayout::new(1920, 1080, sf).unwrap();
        let bufs = random_buffers(&src, &mut rng, 0);
        for (side, df, dt) in [
            (640, PixelFormat::Rgb, DType::U8),
            (416, PixelFormat::PlanarRgb, DType::F32),
            (416, PixelFormat::PlanarRgb, DType::I8),
        ] {
            let dst = ImageLayout::tight(side, side, df, dt).unwrap();
            let o = ConvertOptions {
                fit: Fit::Letterbox { pad: [114; 3] },
                normalize: if dt == DType::F32 {
                    Normalize::IMAGENET
                } else {
                    Normalize::IDENTITY
                },
                ..Default::default()
            };
            let d = compare(&mut g, &mut c, &bufs, &src, &dst, &o);
            assert!(d <= TOLERANCE, "1080p {sf} -> {side} {df}/{dt}: {d}");
        }
    }
}
