//! The CPU backend against the independent f64 reference (tests/common/reference.rs).

#[path = "common/reference.rs"]
mod reference;

use pinframe::{
    Backend, Colorimetry, ColorimetryChoice, ConvertOptions, Crop, DType, Fit, Flip, ImageLayout,
    ImageProcessor, Interpolation, Matrix, Normalize, PixelFormat, Plane, Quantize, Range,
    Rotation,
};
use reference::{
    DST_FORMATS, Readback, Rng, check, check_dtype, max_error, quantized_reference, random_buffers,
    read_back, read_back_quantized, reference, source_size,
};

fn processor() -> ImageProcessor {
    ImageProcessor::with_backend(Backend::Cpu).unwrap()
}

const DTYPES: [DType; 4] = [DType::U8, DType::I8, DType::F16, DType::F32];

#[test]
fn same_size_every_source_destination_and_dtype() {
    let mut rng = Rng::new(1);
    let mut proc = processor();
    let normalize = Normalize::IMAGENET;
    for (k, &sf) in PixelFormat::ALL.iter().enumerate() {
        // Odd sizes: the last chroma sample covers a single column/row (Bayer: the
        // nearest whole tiles).
        let (sw, sh) = source_size(sf, 13, 7);
        let src = ImageLayout::new(sw, sh, sf)
            .unwrap()
            .with_colorimetry(match k % 3 {
                0 => None,
                1 => Some(Colorimetry::new(Matrix::Bt709, Range::Full)),
                _ => Some(Colorimetry::new(Matrix::Bt2020, Range::Limited)),
            });
        let bufs = random_buffers(&src, &mut rng, 5);
        for &df in DST_FORMATS {
            for dt in DTYPES {
                let dst = ImageLayout::tight(13, 7, df, dt).unwrap();
                let o = ConvertOptions {
                    normalize,
                    ..Default::default()
                };
                check_dtype(&mut proc, &bufs, &src, &dst, &o);
            }
        }
    }
    assert_eq!(
        proc.stats().frames,
        (PixelFormat::ALL.len() * DST_FORMATS.len() * 4) as u64
    );
}

/// Published 75% colour-bar Y'CbCr values (white, yellow, cyan, green, magenta, red,
/// blue, black) and the RGB they stand for.
const BARS_601: [[u8; 3]; 8] = [
    [180, 128, 128],
    [162, 44, 142],
    [131, 156, 44],
    [112, 72, 58],
    [84, 184, 198],
    [65, 100, 212],
    [35, 212, 114],
    [16, 128, 128],
];
const BARS_709: [[u8; 3]; 8] = [
    [180, 128, 128],
    [168, 44, 136],
    [145, 147, 44],
    [133, 63, 52],
    [63, 193, 204],
    [51, 109, 212],
    [28, 212, 120],
    [16, 128, 128],
];
/// Writes 8 vertical bars, each 2 pixels wide, into a YUV image of any format.
fn bars_image(layout: &ImageLayout, bars: &[[u8; 3]; 8]) -> Vec<Vec<u8>> {
    let mut bufs: Vec<Vec<u8>> = (0..layout.buffer_count())
        .map(|b| vec![0u8; layout.required_len(b)])
        .collect();
    let p = layout.planes();
    let mut put = |plane: usize, row: usize, col: usize, v: u8| {
        bufs[p[plane].buffer][p[plane].offset + row * p[plane].stride + col] = v;
    };
    for y in 0..layout.height() as usize {
        for x in 0..layout.width() as usize {
            let [yv, u, v] = bars[x / 2];
            match layout.format() {
                PixelFormat::Yuyv => {
                    put(0, y, x * 2, yv);
                    put(0, y, (x / 2) * 4 + 1, u);
                    put(0, y, (x / 2) * 4 + 3, v);
                }
                PixelFormat::Uyvy => {
                    put(0, y, x * 2 + 1, yv);
                    put(0, y, (x / 2) * 4, u);
                    put(0, y, (x / 2) * 4 + 2, v);
                }
                PixelFormat::Nv12 | PixelFormat::Nv21 | PixelFormat::Nv16 | PixelFormat::Nv61 => {
                    put(0, y, x, yv);
                    let cy = if layout.plane_height(1) < layout.height() {
                        y / 2
                    } else {
                        y
                    };
                    let swap = matches!(layout.format(), PixelFormat::Nv21 | PixelFormat::Nv61);
                    put(1, cy, (x / 2) * 2 + usize::from(swap), u);
                    put(1, cy, (x / 2) * 2 + usize::from(!swap), v);
                }
                PixelFormat::I420 => {
                    put(0, y, x, yv);
                    put(1, y / 2, x / 2, u);
                    put(2, y / 2, x / 2, v);
                }
                f => panic!("bars for {f} not written"),
            }
        }
    }
    bufs
}

#[test]
fn colour_bars_601_and_709() {
    let mut proc = processor();
    for (bars, height) in [(&BARS_601, 480), (&BARS_709, 720)] {
        for sf in [
            PixelFormat::Yuyv,
            PixelFormat::Uyvy,
            PixelFormat::Nv12,
            PixelFormat::Nv21,
            PixelFormat::Nv16,
            PixelFormat::I420,
        ] {
            // Auto colorimetry picks BT.601 below 720 lines and BT.709 at 720.
            let src = ImageLayout::new(16, height, sf).unwrap();
            let bufs = bars_image(&src, bars);
            for df in [PixelFormat::Rgb, PixelFormat::PlanarBgr] {
                let dst = ImageLayout::new(16, height, df).unwrap();
                let o = ConvertOptions::default();
                check::<u8>(&mut proc, &bufs, &src, &dst, &o);
                let mut out = vec![0u8; dst.required_len(0)];
                let slices: Vec<&[u8]> = bufs.iter().map(|b| b.as_slice()).collect();
                proc.convert_buffers(&slices, &src, &mut out, &dst, &o)
                    .unwrap();
                let got = read_back(&out, &dst, [0.0; 3], [1.0; 3]);
                for (x, px) in got.iter().take(16).enumerate() {
                    for (c, &want) in reference::BARS_75_RGB[x / 2].iter().enumerate() {
                        let want = f64::from(want);
                        assert!(
                            (px.0[c] - want).abs() <= 2.0,
                            "{sf} {height} lines bar {} channel {c}: {} vs {want}",
                            x / 2,
                            px.0[c]
                        );
                    }
                }
            }
        }
    }
}

/// A source layout with padded strides and plane offsets (and, for semi-planar, the
/// chroma in a second buffer).
fn padded_layout(w: u32, h: u32, f: PixelFormat, two_buffers: bool) -> ImageLayout {
    let tight = ImageLayout::new(w, h, f).unwrap();
    let mut planes = Vec::new();
    let mut offset = 24;
    for i in 0..f.plane_count() {
        let stride = tight.plane_row_bytes(i) + 3 + 5 * i;
        let buffer = usize::from(two_buffers && i > 0);
        let off = if buffer == 1 { 7 } else { offset };
        planes.push(Plane {
            buffer,
            offset: off,
            stride,
        });
        if buffer == 0 {
            offset += stride * tight.plane_height(i) as usize + 11;
        }
    }
    ImageLayout::with_planes(w, h, f, DType::U8, &planes).unwrap()
}

/// A destination layout with padded strides, offset into its buffer.
fn padded_dst(w: u32, h: u32, f: PixelFormat, dt: DType) -> ImageLayout {
    let tight = ImageLayout::tight(w, h, f, dt).unwrap();
    let e = dt.size();
    let mut planes = Vec::new();
    let mut offset = 16 * e;
    for i in 0..f.plane_count() {
        let stride = tight.plane_row_bytes(i) + 3 * e;
        planes.push(Plane::new(offset, stride));
        offset += stride * h as usize + 5 * e;
    }
    ImageLayout::with_planes(w, h, f, dt, &planes).unwrap()
}

struct Case {
    src: (u32, u32),
    dst: (u32, u32),
    o: ConvertOptions,
}

fn cases() -> Vec<Case> {
    let lb = Fit::Letterbox {
        pad: [114, 20, 240],
    };
    let mut v = vec![
        Case {
            src: (64, 48),
            dst: (641, 479),
            o: ConvertOptions::default(),
        },
        Case {
            src: (1, 1),
            dst: (5, 3),
            o: ConvertOptions::default(),
        },
        Case {
            src: (2, 2),
            dst: (7, 9),
            o: ConvertOptions {
                fit: lb,
                ..Default::default()
            },
        },
        Case {
            src: (2, 2),
            dst: (1, 1),
            o: ConvertOptions::default(),
        },
        Case {
            src: (97, 61),
            dst: (40, 40),
            o: ConvertOptions {
                fit: lb,
                ..Default::default()
            },
        },
        Case {
            src: (97, 61),
            dst: (40, 40),
            o: ConvertOptions {
                fit: Fit::Fill,
                interpolation: Interpolation::Nearest,
                ..Default::default()
            },
        },
    ];
    // Large downscales: rows are sampled with four direct taps instead of a blend.
    v.push(Case {
        src: (97, 61),
        dst: (5, 4),
        o: ConvertOptions::default(),
    });
    v.push(Case {
        src: (97, 61),
        dst: (3, 7),
        o: ConvertOptions {
            rotation: Rotation::R270,
            fit: lb,
            ..Default::default()
        },
    });
    // Crops touching each border, with every rotation and flip.
    let crops = [
        Crop::new(0, 0, 30, 20),
        Crop::new(67, 0, 30, 61),
        Crop::new(0, 41, 97, 20),
        Crop::new(96, 60, 1, 1),
        Crop::new(13, 7, 51, 33),
    ];
    let rotations = [Rotation::R0, Rotation::R90, Rotation::R180, Rotation::R270];
    let flips = [Flip::None, Flip::Horizontal, Flip::Vertical];
    for (k, crop) in crops.iter().enumerate() {
        for (r, &rotation) in rotations.iter().enumerate() {
            let flip = flips[(k + r) % 3];
            v.push(Case {
                src: (97, 61),
                dst: (23 + k as u32 * 7, 31 - r as u32 * 3),
                o: ConvertOptions {
                    crop: Some(*crop),
                    rotation,
                    flip,
                    fit: [Fit::Stretch, lb, Fit::Fill][(k + r) % 3],
                    interpolation: if (k + r) % 4 == 3 {
                        Interpolation::Nearest
                    } else {
                        Interpolation::Bilinear
                    },
                    ..Default::default()
                },
            });
        }
    }
    v
}

#[test]
fn geometry_matches_reference_on_padded_layouts() {
    let mut rng = Rng::new(7);
    let mut proc = processor();
    let sources = [
        (PixelFormat::Yuyv, false),
        (PixelFormat::Vyuy, false),
        (PixelFormat::Nv12, true),
        (PixelFormat::Nv61, false),
        (PixelFormat::Yv12, false),
        (PixelFormat::Bgra, false),
        (PixelFormat::Grey, false),
    ];
    let dsts = [
        (PixelFormat::Rgb, DType::U8),
        (PixelFormat::PlanarBgr, DType::F32),
        (PixelFormat::Bgra, DType::I8),
        (PixelFormat::Grey, DType::F16),
        (PixelFormat::PlanarRgb, DType::I8),
    ];
    for (n, case) in cases().iter().enumerate() {
        let (sf, two) = sources[n % sources.len()];
        let (df, dt) = dsts[n % dsts.len()];
        let src = padded_layout(case.src.0, case.src.1, sf, two);
        let bufs = random_buffers(&src, &mut rng, 0);
        let dst = padded_dst(case.dst.0, case.dst.1, df, dt);
        check_dtype(&mut proc, &bufs, &src, &dst, &case.o);
        // And the tight layouts, in another format pair.
        let (sf2, _) = sources[(n + 3) % sources.len()];
        let src2 = ImageLayout::new(case.src.0, case.src.1, sf2).unwrap();
        let bufs2 = random_buffers(&src2, &mut rng, 0);
        let (df2, dt2) = dsts[(n + 2) % dsts.len()];
        let dst2 = ImageLayout::tight(case.dst.0, case.dst.1, df2, dt2).unwrap();
        check_dtype(&mut proc, &bufs2, &src2, &dst2, &case.o);
    }
}

#[test]
fn serial_and_parallel_agree_exactly() {
    let mut rng = Rng::new(3);
    let src = ImageLayout::new(320, 240, PixelFormat::Nv12).unwrap();
    let bufs = random_buffers(&src, &mut rng, 0);
    let slices: Vec<&[u8]> = bufs.iter().map(|b| b.as_slice()).collect();
    let dst = ImageLayout::tight(203, 197, PixelFormat::PlanarRgb, DType::F32).unwrap();
    let o = ConvertOptions {
        fit: Fit::Letterbox { pad: [114; 3] },
        rotation: Rotation::R90,
        ..Default::default()
    };
    let mut a = vec![0f32; dst.required_len(0) / 4];
    let mut b = a.clone();
    let mut proc = processor();
    proc.convert_buffers(&slices, &src, &mut a, &dst, &o)
        .unwrap();
    proc.set_parallel(false);
    proc.convert_buffers(&slices, &src, &mut b, &dst, &o)
        .unwrap();
    assert_eq!(a, b);
}

#[test]
fn a_tile_of_a_batch_leaves_the_rest_alone() {
    // A 2x(3x32x32) batch: write the second image only, via its layout.
    let mut rng = Rng::new(11);
    let src = ImageLayout::new(64, 48, PixelFormat::Yuyv).unwrap();
    let bufs = random_buffers(&src, &mut rng, 0);
    let slices: Vec<&[u8]> = bufs.iter().map(|b| b.as_slice()).collect();
    let image = 3 * 32 * 32;
    let planes: Vec<Plane> = (0..3)
        .map(|c| Plane::new((image + c * 32 * 32) * 4, 32 * 4))
        .collect();
    let tile =
        ImageLayout::with_planes(32, 32, PixelFormat::PlanarRgb, DType::F32, &planes).unwrap();
    let mut batch = vec![-7.0f32; 2 * image];
    let info = processor()
        .convert_buffers(&slices, &src, &mut batch, &tile, &ConvertOptions::default())
        .unwrap();
    assert!(batch[..image].iter().all(|&v| v == -7.0));
    assert!(batch[image..].iter().all(|&v| (0.0..=1.0).contains(&v)));
    assert_eq!(info.content, [0, 0, 32, 32]);
}

#[test]
fn letterbox_info_maps_back_to_the_source() {
    let src = ImageLayout::new(1920, 1080, PixelFormat::Nv12).unwrap();
    let bufs = [vec![128u8; src.required_len(0)]];
    let dst = ImageLayout::new(416, 416, PixelFormat::Rgb).unwrap();
    let mut out = vec![0u8; dst.required_len(0)];
    let info = processor()
        .convert_buffers(
            &[&bufs[0]],
            &src,
            &mut out,
            &dst,
            &ConvertOptions {
                fit: Fit::Letterbox { pad: [114; 3] },
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(info.content, [0, 91, 416, 234]);
    assert_eq!(info.colorimetry, Some(Colorimetry::BT709_LIMITED));
    let (x, y) = info.to_source(208.0, 91.0 + 117.0);
    assert!(
        (x - 960.0).abs() < 1e-6 && (y - 540.0).abs() < 1e-6,
        "{x} {y}"
    );
    // Padding rows hold the pad colour.
    assert_eq!(&out[..3], &[114, 114, 114]);
}

#[test]
fn explicit_colorimetry_overrides_the_frame() {
    let mut rng = Rng::new(5);
    let src = ImageLayout::new(8, 4, PixelFormat::I420)
        .unwrap()
        .with_colorimetry(Some(Colorimetry::BT601_LIMITED));
    let bufs = random_buffers(&src, &mut rng, 0);
    let dst = ImageLayout::new(8, 4, PixelFormat::Rgb).unwrap();
    let o = ConvertOptions {
        colorimetry: ColorimetryChoice::Fixed(Colorimetry::new(Matrix::Bt2020, Range::Full)),
        ..Default::default()
    };
    check::<u8>(&mut processor(), &bufs, &src, &dst, &o);
}

fn err_of(src: &ImageLayout, dst: &ImageLayout, o: &ConvertOptions, dst_len: usize) -> String {
    let bufs = vec![vec![0u8; src.required_len(0)]; src.buffer_count()];
    let slices: Vec<&[u8]> = bufs.iter().map(|b| b.as_slice()).collect();
    let mut out = vec![0u8; dst_len];
    processor()
        .convert_buffers(&slices, src, &mut out, dst, o)
        .unwrap_err()
        .to_string()
}

#[test]
fn bad_requests_are_errors_that_say_what_to_change() {
    let src = ImageLayout::new(64, 48, PixelFormat::Yuyv).unwrap();
    let rgb = ImageLayout::new(16, 16, PixelFormat::Rgb).unwrap();
    let d = ConvertOptions::default();
    // A YUV destination.
    let nv12 = ImageLayout::new(16, 16, PixelFormat::Nv12).unwrap();
    let e = err_of(&src, &nv12, &d, 16 * 24);
    assert!(e.contains("YUV") && e.contains("rgb"), "{e}");
    // A crop outside the source.
    let crop = ConvertOptions {
        crop: Some(Crop::new(40, 0, 25, 10)),
        ..d
    };
    let e = err_of(&src, &rgb, &crop, 16 * 16 * 3);
    assert!(
        e.contains("outside") && e.contains("x + width <= 64"),
        "{e}"
    );
    // Zero-size output cannot even be described.
    let e = ImageLayout::new(0, 16, PixelFormat::Rgb)
        .unwrap_err()
        .to_string();
    assert!(e.contains("empty"), "{e}");
    // A destination dtype the converter does not write.
    let u16dst = ImageLayout::tight(16, 16, PixelFormat::Rgb, DType::U16).unwrap();
    let mut out = vec![0u16; 16 * 16 * 3];
    let bufs = [vec![0u8; src.required_len(0)]];
    let e = processor()
        .convert_buffers(&[&bufs[0]], &src, &mut out, &u16dst, &d)
        .unwrap_err()
        .to_string();
    assert!(e.contains("u16") && e.contains("u8, i8, f16 or f32"), "{e}");
    // Elements that do not match the layout's dtype.
    let f32dst = ImageLayout::tight(16, 16, PixelFormat::Rgb, DType::F32).unwrap();
    let e = err_of(&src, &f32dst, &d, 16 * 16 * 3 * 4);
    assert!(e.contains("u8") && e.contains("f32"), "{e}");
    // Odd width 4:2:2 without room for the last chroma pair.
    let e = ImageLayout::with_stride(63, 4, PixelFormat::Yuyv, DType::U8, 126)
        .unwrap_err()
        .to_string();
    assert!(e.contains("odd width"), "{e}");
    // A source buffer shorter than its layout.
    let short = [vec![0u8; 100]];
    let mut out = vec![0u8; 16 * 16 * 3];
    let e = processor()
        .convert_buffers(&[&short[0]], &src, &mut out, &rgb, &d)
        .unwrap_err()
        .to_string();
    assert!(e.contains("buffer too small"), "{e}");
    // A destination buffer shorter than its layout.
    let e = err_of(&src, &rgb, &d, 10);
    assert!(e.contains("buffer too small"), "{e}");
    // GL asked for explicitly, where it does not exist, fails loudly.
    if !cfg!(feature = "gl") {
        assert!(ImageProcessor::with_backend(Backend::Gl).is_err());
    }
}

#[test]
fn tensors_convert_like_buffers() {
    use pinframe::{Memory, Tensor};
    let mut rng = Rng::new(13);
    // A two-buffer NV12 source (V4L2's NM12), with padded strides.
    let src_layout = padded_layout(40, 30, PixelFormat::Nv12, true);
    let bufs = random_buffers(&src_layout, &mut rng, 0);
    let mut src = Tensor::<u8>::with_layout(src_layout, Some(Memory::Heap)).unwrap();
    {
        let mut m = src.map_mut().unwrap();
        for (i, b) in bufs.iter().enumerate() {
            m.buffer_bytes_mut(i)[..b.len()].copy_from_slice(b);
        }
    }
    let mut dst =
        Tensor::<half::f16>::image(33, 17, PixelFormat::PlanarBgr, Some(Memory::Heap)).unwrap();
    let o = ConvertOptions {
        fit: Fit::Letterbox { pad: [0, 128, 255] },
        flip: Flip::Vertical,
        ..Default::default()
    };
    let mut proc = processor();
    let info = proc.convert_with(&src, &mut dst, &o).unwrap();
    let dst_layout = *dst.layout().unwrap();
    let mut expected = vec![half::f16::ZERO; dst_layout.required_len(0) / 2];
    let slices: Vec<&[u8]> = bufs.iter().map(|b| b.as_slice()).collect();
    let info2 = proc
        .convert_buffers(&slices, &src_layout, &mut expected, &dst_layout, &o)
        .unwrap();
    assert_eq!(info, info2);
    assert_eq!(&dst.map().unwrap()[..expected.len()], &expected[..]);
    // And the reference agrees.
    let got = read_back(&expected, &dst_layout, [0.0; 3], [1.0; 3]);
    let want = reference(&bufs, &src_layout, 33, 17, PixelFormat::PlanarBgr, &o);
    assert!(max_error(&got, &want, PixelFormat::PlanarBgr, DType::F16).0 <= 0.6);

    // A tensor without an image layout is refused with a hint.
    let mut shapeless = Tensor::<f32>::new(&[3, 17, 33], Some(Memory::Heap)).unwrap();
    let e = proc.convert(&src, &mut shapeless).unwrap_err().to_string();
    assert!(e.contains("set_layout"), "{e}");
}

/// Converts a quantised destination on the CPU and returns the largest difference between
/// its stored integers and the f64 reference quantised from the formulas.
fn check_quantized<T: Readback>(
    proc: &mut ImageProcessor,
    bufs: &[Vec<u8>],
    src: &ImageLayout,
    dst: &ImageLayout,
    o: &ConvertOptions,
) -> f64 {
    let q = o.quantize.expect("a quantised case");
    let mut out = vec![T::zeroed(); dst.allocation_len(0) / std::mem::size_of::<T>()];
    let slices: Vec<&[u8]> = bufs.iter().map(|b| b.as_slice()).collect();
    proc.convert_buffers(&slices, src, &mut out, dst, o)
        .unwrap_or_else(|e| panic!("{src:?} -> {dst:?} {o:?}: {e}"));
    let want = reference(bufs, src, dst.width(), dst.height(), dst.format(), o);
    let want = quantized_reference(&want, &o.normalize, &q, dst.dtype());
    let got = read_back_quantized(&out, dst);
    // The reference is already rounded: compare without rounding again.
    let (err, at) = max_error(&got, &want, dst.format(), DType::F32);
    let w = dst.width() as usize;
    assert!(
        err <= 1.0,
        "{src:?} -> {dst:?} {o:?}: quantised error {err} at ({}, {}): got {:?} want {:?}",
        at % w,
        at / w,
        got[at],
        want[at]
    );
    err
}

/// The quantisations the tests use: per tensor and per channel, for u8 and i8, with
/// scales that clip (a step of 1/255 around -1..1 normalisations) and ones that do not.
fn quantizations(dtype: DType) -> Vec<(Normalize, Quantize)> {
    let half = Normalize {
        mean: [0.5; 3],
        std: [0.5; 3],
    };
    match dtype {
        DType::U8 => vec![
            // A MobileNet-style uint8 input: x in -1..1, q = x * 128 + 128 (255.99 clips).
            (half, Quantize::per_tensor(1.0 / 128.0, 128)),
            // ImageNet statistics, per-channel steps and zero points.
            (
                Normalize::IMAGENET,
                Quantize::per_channel([0.02, 0.017, 0.019], [120, 110, 100]),
            ),
            // A coarse step: 255 levels become 26.
            (Normalize::IDENTITY, Quantize::per_tensor(0.04, 3)),
        ],
        _ => vec![
            // The common int8 input: x in 0..1, scale 1/255, zero point -128 (q = v - 128).
            (Normalize::IDENTITY, Quantize::per_tensor(1.0 / 255.0, -128)),
            (half, Quantize::per_tensor(1.0 / 127.0, 0)),
            (
                Normalize::IMAGENET,
                Quantize::per_channel([0.018, 0.02, 0.021], [-10, 5, 0]),
            ),
        ],
    }
}

#[test]
fn quantized_outputs_match_the_f64_reference() {
    let mut rng = Rng::new(21);
    let mut proc = processor();
    let mut cases = 0;
    for (k, &sf) in PixelFormat::ALL.iter().enumerate() {
        let (sw, sh) = source_size(sf, 29, 17);
        let src = ImageLayout::new(sw, sh, sf).unwrap();
        let bufs = random_buffers(&src, &mut rng, 3);
        for (j, &df) in DST_FORMATS.iter().enumerate() {
            for dt in [DType::U8, DType::I8] {
                for (normalize, quantize) in quantizations(dt) {
                    // Letterboxed (the padding is quantised too), resized, odd sizes.
                    let o = ConvertOptions {
                        fit: Fit::Letterbox { pad: [114, 0, 255] },
                        normalize,
                        quantize: Some(quantize),
                        ..Default::default()
                    };
                    let dst = if (k + j) % 2 == 0 {
                        ImageLayout::tight(23, 31, df, dt).unwrap()
                    } else {
                        padded_dst(23, 31, df, dt)
                    };
                    match dt {
                        DType::U8 => check_quantized::<u8>(&mut proc, &bufs, &src, &dst, &o),
                        _ => check_quantized::<i8>(&mut proc, &bufs, &src, &dst, &o),
                    };
                    cases += 1;
                }
            }
        }
    }
    assert_eq!(cases, PixelFormat::ALL.len() * DST_FORMATS.len() * 2 * 3);
}

#[test]
fn quantization_with_identity_parameters_is_the_plain_store() {
    // u8 with scale 1/255 and zero point 0 over the identity normalisation stores round(v):
    // the same bytes as no quantisation at all; i8 with zero point -128 stores v - 128, the
    // same bytes as the plain i8 store (u8 XOR 0x80). Bit for bit, on every source.
    let mut rng = Rng::new(5);
    let mut proc = processor();
    for sf in PixelFormat::ALL {
        let (sw, sh) = source_size(sf, 31, 9);
        let src = ImageLayout::new(sw, sh, sf).unwrap();
        let bufs = random_buffers(&src, &mut rng, 0);
        let slices: Vec<&[u8]> = bufs.iter().map(|b| b.as_slice()).collect();
        for (dt, zero) in [(DType::U8, 0), (DType::I8, -128)] {
            let dst = ImageLayout::tight(17, 12, PixelFormat::Rgb, dt).unwrap();
            let plain = ConvertOptions {
                fit: Fit::Letterbox { pad: [1, 2, 3] },
                ..Default::default()
            };
            let quantized = ConvertOptions {
                quantize: Some(Quantize::per_tensor(1.0 / 255.0, zero)),
                ..plain
            };
            let mut a = vec![0u8; dst.allocation_len(0)];
            let mut b = vec![0u8; dst.allocation_len(0)];
            if dt == DType::U8 {
                proc.convert_buffers(&slices, &src, &mut a, &dst, &plain)
                    .unwrap();
                proc.convert_buffers(&slices, &src, &mut b, &dst, &quantized)
                    .unwrap();
            } else {
                let (a8, b8): (&mut [i8], &mut [i8]) = (
                    bytemuck::cast_slice_mut(&mut a),
                    bytemuck::cast_slice_mut(&mut b),
                );
                proc.convert_buffers(&slices, &src, a8, &dst, &plain)
                    .unwrap();
                proc.convert_buffers(&slices, &src, b8, &dst, &quantized)
                    .unwrap();
            }
            // 1/255 in f32 times 255 is not exactly 1: allow the last-bit tie, nothing more.
            let worst = a.iter().zip(&b).map(|(x, y)| x.abs_diff(*y)).max().unwrap();
            assert!(
                worst <= 1,
                "{sf} {dt}: identity quantisation moved a value by {worst}"
            );
        }
    }
}

#[test]
fn bad_quantizations_say_what_to_change() {
    let src = ImageLayout::new(16, 8, PixelFormat::Yuyv).unwrap();
    let u8dst = ImageLayout::new(8, 8, PixelFormat::Rgb).unwrap();
    let i8dst = ImageLayout::tight(8, 8, PixelFormat::Rgb, DType::I8).unwrap();
    let f32dst = ImageLayout::tight(8, 8, PixelFormat::Rgb, DType::F32).unwrap();
    let with = |q: Quantize| ConvertOptions {
        quantize: Some(q),
        ..Default::default()
    };
    let bufs = [vec![0u8; src.required_len(0)]];
    let mut f = vec![0f32; 8 * 8 * 3];
    let e = processor()
        .convert_buffers(
            &[&bufs[0]],
            &src,
            &mut f,
            &f32dst,
            &with(Quantize::per_tensor(0.1, 0)),
        )
        .unwrap_err()
        .to_string();
    assert!(e.contains("u8 and i8") && e.contains("f32"), "{e}");
    let e = err_of(&src, &u8dst, &with(Quantize::per_tensor(0.0, 0)), 8 * 8 * 3);
    assert!(e.contains("scale 0") && e.contains("positive"), "{e}");
    let e = err_of(
        &src,
        &u8dst,
        &with(Quantize::per_tensor(f32::NAN, 0)),
        8 * 8 * 3,
    );
    assert!(e.contains("finite"), "{e}");
    let e = err_of(
        &src,
        &u8dst,
        &with(Quantize::per_tensor(0.1, -1)),
        8 * 8 * 3,
    );
    assert!(e.contains("zero point -1") && e.contains("0..=255"), "{e}");
    let mut i = vec![0i8; 8 * 8 * 3];
    let e = processor()
        .convert_buffers(
            &[&bufs[0]],
            &src,
            &mut i,
            &i8dst,
            &with(Quantize::per_tensor(0.1, 128)),
        )
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("zero point 128") && e.contains("-128..=127"),
        "{e}"
    );
    // The CLI spelling.
    assert_eq!(
        "0.0078125,128".parse::<Quantize>().unwrap(),
        Quantize::per_tensor(0.0078125, 128)
    );
    let e = "0.5".parse::<Quantize>().unwrap_err().to_string();
    assert!(e.contains("SCALE,ZERO_POINT"), "{e}");
}

/// The camera workloads with 8-bit destinations (the fixed-point paths: one tap per
/// column at 1920 → 640, bilinear at 1920 → 416, 3840 → 640 and → 224) against the f64
/// reference on random frames: every channel within 1 of the rounded reference, and the
/// mean absolute difference at most 0.1 (it prints what it measured).
#[test]
fn eight_bit_camera_workloads_match_the_reference_on_average() {
    let mut rng = Rng::new(27);
    let mut proc = processor();
    let colorimetries = [
        Colorimetry::BT601_LIMITED,
        Colorimetry::BT709_LIMITED,
        Colorimetry::new(Matrix::Bt2020, Range::Full),
    ];
    let geometries = [
        ((1920, 1080), 640),
        ((1920, 1080), 416),
        ((3840, 2160), 640),
        // Taps too far apart for one window per four columns (the chroma of YUYV at
        // 1920 → 224, everything at 3840 → 224): one 8-byte window per column.
        ((1920, 1080), 224),
        ((3840, 2160), 224),
    ];
    let sources = [
        PixelFormat::Nv12,
        PixelFormat::Nv21,
        PixelFormat::I420,
        PixelFormat::Yuyv,
    ];
    let dsts = [
        (PixelFormat::Rgb, DType::U8),
        (PixelFormat::PlanarRgb, DType::I8),
    ];
    let o = ConvertOptions {
        fit: Fit::Letterbox { pad: [114; 3] },
        ..Default::default()
    };
    let mut case = 0;
    for ((sw, sh), side) in geometries {
        for (s, &format) in sources.iter().enumerate() {
            if (sw, format) == (3840, PixelFormat::Yuyv) {
                continue;
            }
            let colorimetry = colorimetries[(case / 2 + s) % colorimetries.len()];
            let src = ImageLayout::new(sw, sh, format)
                .unwrap()
                .with_colorimetry(Some(colorimetry));
            let bufs = random_buffers(&src, &mut rng, 0);
            let want = reference(&bufs, &src, side, side, PixelFormat::Rgb, &o);
            for (df, dt) in dsts {
                case += 1;
                let dst = ImageLayout::tight(side, side, df, dt).unwrap();
                let slices: Vec<&[u8]> = bufs.iter().map(|b| b.as_slice()).collect();
                let got = match dt {
                    DType::U8 => {
                        let mut out = vec![0u8; dst.required_len(0)];
                        proc.convert_buffers(&slices, &src, &mut out, &dst, &o)
                            .unwrap();
                        read_back(&out, &dst, [0.0; 3], [1.0; 3])
                    }
                    _ => {
                        let mut out = vec![0i8; dst.required_len(0)];
                        proc.convert_buffers(&slices, &src, &mut out, &dst, &o)
                            .unwrap();
                        read_back(&out, &dst, [0.0; 3], [1.0; 3])
                    }
                };
                let (worst, _) = max_error(&got, &want, df, dt);
                let sum: f64 = got
                    .iter()
                    .zip(&want)
                    .flat_map(|((g, _), w)| {
                        (0..3).map(move |c| (g[c] - (w[c] + 0.5).floor()).abs())
                    })
                    .sum();
                let mad = sum / (3 * got.len()) as f64;
                eprintln!(
                    "{format} {sw}x{sh} -> {side} {df} {dt} {colorimetry:?}: max {worst}, MAD {mad:.4}"
                );
                assert!(
                    worst <= 1.0 && mad <= 0.1,
                    "{format} -> {side} {df} {dt}: max {worst}, MAD {mad}"
                );
            }
        }
    }
}
