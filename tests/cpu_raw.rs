//! RAW sources on the CPU backend: every Bayer order × bit depth × packing, the deep grey
//! and 16-bit YUV formats, against the f64 reference of the RAW pipeline
//! (tests/common/reference.rs `isp_pixel`), at the same size and through the geometry
//! options; a colour chart whose colours are known; and the errors bad RAW input gets.

#[path = "common/reference.rs"]
mod reference;

use pinframe::image::FormatFamily;
use pinframe::{
    Backend, CfaSite, ConvertOptions, Crop, DType, ErrorKind, Fit, Flip, Gamma, ImageLayout,
    ImageProcessor, Interpolation, Isp, Normalize, PixelFormat, Plane, Rotation,
};
use reference::{Rng, check, check_dtype, put_raw_code, sensor_isp};

fn processor() -> ImageProcessor {
    ImageProcessor::with_backend(Backend::Cpu).unwrap()
}

fn bayer_formats() -> impl Iterator<Item = PixelFormat> {
    PixelFormat::ALL
        .into_iter()
        .filter(|f| f.family() == FormatFamily::Bayer)
}

fn deep_formats() -> impl Iterator<Item = PixelFormat> {
    PixelFormat::ALL.into_iter().filter(|f| {
        matches!(
            f.family(),
            FormatFamily::DeepGrey | FormatFamily::SemiPlanarYuv16
        )
    })
}

/// A frame of random codes valid for the format's bit depth (P01x: the significant bits
/// high), with random bytes in the row padding.
fn random_frame(layout: &ImageLayout, rng: &mut Rng) -> Vec<Vec<u8>> {
    let mut bufs = reference::random_buffers(layout, rng, 7);
    let f = layout.format();
    let storage = f.storage();
    let bits = storage.bits();
    if f.family() == FormatFamily::SemiPlanarYuv16 {
        for (i, p) in layout.planes().iter().enumerate() {
            for y in 0..layout.plane_height(i) as usize {
                for k in 0..layout.plane_row_bytes(i) / 2 {
                    let word = (rng.next() as u16) & !((1u16 << (16 - bits)) - 1);
                    let at = p.offset + y * p.stride + 2 * k;
                    bufs[p.buffer][at..at + 2].copy_from_slice(&word.to_le_bytes());
                }
            }
        }
        return bufs;
    }
    let max = storage.max_value();
    for y in 0..layout.height() {
        for x in 0..layout.width() {
            // Now and then a code above the white level (16-bit words can hold one).
            let code = if bits < 16 && rng.below(50) == 0 {
                max + 1 + rng.below(100)
            } else {
                (rng.next() >> 40) as u32 & max
            };
            let code = if storage.group().1 == 2 {
                code
            } else {
                code & max
            };
            put_raw_code(&mut bufs, layout, x, y, code);
        }
    }
    bufs
}

/// A padded, offset layout (rows longer than the data, the image not at byte 0).
fn padded(w: u32, h: u32, f: PixelFormat) -> ImageLayout {
    let tight = ImageLayout::new(w, h, f).unwrap();
    let mut planes = Vec::new();
    let mut offset = 24;
    for i in 0..f.plane_count() {
        let stride = tight.plane_row_bytes(i) + 6;
        planes.push(Plane::new(offset, stride));
        offset += stride * tight.plane_height(i) as usize + 10;
    }
    ImageLayout::with_planes(w, h, f, DType::U8, &planes).unwrap()
}

#[test]
fn every_bayer_format_matches_the_reference_at_the_same_size() {
    let mut rng = Rng::new(0xBA7E);
    let mut proc = processor();
    let mut worst = 0.0f64;
    for (k, f) in bayer_formats().enumerate() {
        let src = if k % 2 == 0 {
            ImageLayout::new(20, 10, f).unwrap()
        } else {
            padded(20, 10, f)
        };
        let bufs = random_frame(&src, &mut rng);
        for isp in [Isp::IDENTITY, sensor_isp(f)] {
            for (df, dt) in [
                (PixelFormat::Rgb, DType::U8),
                (PixelFormat::PlanarBgr, DType::F32),
                (PixelFormat::Bgra, DType::I8),
                (PixelFormat::Grey, DType::F16),
            ] {
                let dst = ImageLayout::tight(20, 10, df, dt).unwrap();
                let o = ConvertOptions {
                    isp,
                    normalize: Normalize::IMAGENET,
                    ..Default::default()
                };
                worst = worst.max(check_dtype(&mut proc, &bufs, &src, &dst, &o));
            }
        }
    }
    eprintln!("largest error against the f64 reference: {worst:.3} (0..=255 units)");
}

/// Crop, flip, rotation, fit, filter and the destination size.
type Geometry = (Option<Crop>, Flip, Rotation, Fit, Interpolation, (u32, u32));

#[test]
fn bayer_geometry_shifts_the_cfa_phase_and_stays_exact() {
    let mut rng = Rng::new(0x6E0);
    let mut proc = processor();
    let geometries: [Geometry; 7] = [
        // Odd crop origins put a G, B or R site at the crop's top-left.
        (
            Some(Crop::new(1, 0, 37, 21)),
            Flip::None,
            Rotation::R0,
            Fit::Stretch,
            Interpolation::Bilinear,
            (29, 17),
        ),
        (
            Some(Crop::new(3, 5, 30, 19)),
            Flip::Horizontal,
            Rotation::R0,
            Fit::Stretch,
            Interpolation::Bilinear,
            (64, 40),
        ),
        (
            Some(Crop::new(0, 1, 40, 23)),
            Flip::Vertical,
            Rotation::R180,
            Fit::Stretch,
            Interpolation::Nearest,
            (40, 23),
        ),
        (
            None,
            Flip::None,
            Rotation::R90,
            Fit::Letterbox {
                pad: [114, 114, 114],
            },
            Interpolation::Bilinear,
            (33, 33),
        ),
        (
            Some(Crop::new(5, 3, 31, 17)),
            Flip::Horizontal,
            Rotation::R270,
            Fit::Fill,
            Interpolation::Bilinear,
            (20, 28),
        ),
        (
            None,
            Flip::None,
            Rotation::R0,
            Fit::Letterbox { pad: [0, 60, 200] },
            Interpolation::Bilinear,
            (16, 16),
        ),
        // Crops at the borders: the filters mirror there.
        (
            Some(Crop::new(38, 22, 2, 2)),
            Flip::None,
            Rotation::R0,
            Fit::Stretch,
            Interpolation::Bilinear,
            (7, 5),
        ),
    ];
    let mut cases = 0;
    for (k, f) in bayer_formats().enumerate() {
        let src = ImageLayout::new(40, 24, f).unwrap();
        let bufs = random_frame(&src, &mut rng);
        let n = geometries.len();
        let pair = [geometries[k % n], geometries[(k + 3) % n]];
        for (j, (crop, flip, rotation, fit, interpolation, (dw, dh))) in
            pair.into_iter().enumerate()
        {
            let o = ConvertOptions {
                crop,
                flip,
                rotation,
                fit,
                interpolation,
                isp: if j == 0 { sensor_isp(f) } else { Isp::IDENTITY },
                ..Default::default()
            };
            let dst = ImageLayout::tight(dw, dh, PixelFormat::Rgb, DType::U8).unwrap();
            check::<u8>(&mut proc, &bufs, &src, &dst, &o);
            cases += 1;
        }
    }
    assert_eq!(cases, 48);
}

#[test]
fn deep_grey_and_16_bit_yuv_match_the_reference() {
    let mut rng = Rng::new(0xD1);
    let mut proc = processor();
    for f in deep_formats() {
        for (w, h) in [(13, 7), (32, 18)] {
            let src = if w == 13 {
                ImageLayout::new(w, h, f).unwrap()
            } else {
                padded(w, h, f)
            };
            let bufs = random_frame(&src, &mut rng);
            for (df, dt) in [
                (PixelFormat::Rgb, DType::U8),
                (PixelFormat::PlanarRgb, DType::F32),
                (PixelFormat::Grey, DType::U8),
            ] {
                for o in [
                    ConvertOptions::default(),
                    ConvertOptions {
                        crop: Some(Crop::new(1, 1, w - 2, h - 1)),
                        rotation: Rotation::R90,
                        fit: Fit::Letterbox { pad: [114; 3] },
                        ..Default::default()
                    },
                ] {
                    let dst = ImageLayout::tight(24, 20, df, dt).unwrap();
                    check_dtype(&mut proc, &bufs, &src, &dst, &o);
                }
            }
        }
    }
}

/// P010 in two buffers (V4L2's `P010` multi-planar style): the chroma plane's own buffer
/// and offset.
#[test]
fn p010_in_two_buffers() {
    let mut rng = Rng::new(0x010);
    let planes = [
        Plane::new(64, 40),
        Plane {
            buffer: 1,
            offset: 8,
            stride: 48,
        },
    ];
    let src = ImageLayout::with_planes(18, 10, PixelFormat::P010, DType::U8, &planes).unwrap();
    let bufs = random_frame(&src, &mut rng);
    let dst = ImageLayout::tight(9, 5, PixelFormat::Rgb, DType::U8).unwrap();
    check::<u8>(
        &mut processor(),
        &bufs,
        &src,
        &dst,
        &ConvertOptions::default(),
    );
}

/// The linear colour of each patch of the chart (R, G, B in 0..=1).
const CHART: [[f64; 3]; 8] = [
    [0.8, 0.8, 0.8],
    [0.7, 0.55, 0.1],
    [0.05, 0.5, 0.6],
    [0.1, 0.6, 0.15],
    [0.6, 0.1, 0.5],
    [0.75, 0.08, 0.05],
    [0.06, 0.1, 0.7],
    [0.02, 0.02, 0.02],
];

/// A colour chart as a sensor would see it: 8 flat patches of known linear colours, each
/// channel divided by its white-balance gain and raised by the black level, mosaicked by
/// the format's CFA. Converted with the inverse ISP, the inside of every patch comes out as
/// the chart's colour through the sRGB curve.
#[test]
fn a_colour_chart_comes_out_in_its_known_colours() {
    let mut proc = processor();
    let (pw, ph) = (16u32, 12u32);
    let (w, h) = (pw * 4, ph * 2);
    for f in bayer_formats() {
        let src = ImageLayout::new(w, h, f).unwrap();
        let mut bufs = vec![vec![0u8; src.required_len(0)]];
        let isp = Isp {
            ccm: Isp::IDENTITY.ccm,
            ..sensor_isp(f)
        };
        let white = f64::from(f.storage().max_value());
        let cfa = f.cfa().unwrap();
        // The code a site of `site` reads in a patch of `colour`, and the linear value
        // that code stands for (what the sensor's quantisation left of the colour).
        let code_of = |colour: &[f64; 3], site: CfaSite| {
            let c = site.channel();
            let black = f64::from(isp.black_level[site as usize]);
            (black + colour[c] / f64::from(isp.gains[c]) * (white - black)).round()
        };
        let linear_of = |colour: &[f64; 3], site: CfaSite| {
            let black = f64::from(isp.black_level[site as usize]);
            (code_of(colour, site) - black) / (white - black) * f64::from(isp.gains[site.channel()])
        };
        for y in 0..h {
            for x in 0..w {
                let colour = &CHART[(y / ph * 4 + x / pw) as usize];
                put_raw_code(
                    &mut bufs,
                    &src,
                    x,
                    y,
                    code_of(colour, cfa.site(x, y)) as u32,
                );
            }
        }
        let dst = ImageLayout::tight(w, h, PixelFormat::Rgb, DType::U8).unwrap();
        let mut out = vec![0u8; dst.required_len(0)];
        let o = ConvertOptions {
            isp,
            ..Default::default()
        };
        proc.convert_buffers(&[&bufs[0]], &src, &mut out, &dst, &o)
            .unwrap();
        let srgb = |c: f64| {
            if c <= 0.0031308 {
                12.92 * c
            } else {
                1.055 * c.powf(1.0 / 2.4) - 0.055
            }
        };
        let mut worst = 0.0f64;
        for (p, colour) in CHART.iter().enumerate() {
            let (px, py) = ((p as u32 % 4) * pw, (p as u32 / 4) * ph);
            // The two greens have their own black levels: their linear values differ by
            // the rounding of their codes, and the demosaic mixes them.
            let quantised = [
                linear_of(colour, CfaSite::R),
                (linear_of(colour, CfaSite::Gr) + linear_of(colour, CfaSite::Gb)) / 2.0,
                linear_of(colour, CfaSite::B),
            ];
            // The inside: 3 pixels from every edge, beyond the 5x5 filters' reach.
            for y in py + 3..py + ph - 3 {
                for x in px + 3..px + pw - 3 {
                    let at = (y * w + x) as usize * 3;
                    for c in 0..3 {
                        let want = 255.0 * srgb(quantised[c]);
                        let d = (f64::from(out[at + c]) - want).abs();
                        worst = worst.max(d);
                        assert!(
                            d <= 1.0,
                            "{f} patch {p} ({x}, {y}) channel {c}: {} want {want:.2}",
                            out[at + c]
                        );
                    }
                }
            }
            for c in 0..3 {
                let from_chart = (255.0 * srgb(colour[c]) - 255.0 * srgb(quantised[c])).abs();
                let code_step = f64::from(isp.gains[c]) / (white - 18.0);
                // The sRGB slope is at most 12.92: one code step moves it that much.
                assert!(
                    from_chart <= 255.0 * 12.92 * code_step,
                    "{f} patch {p} channel {c}: the chart's colour is {from_chart:.2} away"
                );
            }
        }
        eprintln!("{f}: chart colours within {worst:.2} of the known values");
    }
}

#[test]
fn bad_raw_input_is_an_error_that_says_what_to_change() {
    // Odd sizes where the CFA needs whole 2x2 tiles.
    let e = ImageLayout::new(641, 480, PixelFormat::Rggb8).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput);
    assert!(
        e.to_string().contains("multiple of 2") && e.to_string().contains("640x480"),
        "{e}"
    );
    let e = ImageLayout::new(640, 479, PixelFormat::Gbrg12).unwrap_err();
    assert!(e.to_string().contains("640x478"), "{e}");
    // A CSI-2 RAW10 row of a part group.
    let e = ImageLayout::new(642, 480, PixelFormat::Bggr10P).unwrap_err();
    assert!(
        e.to_string().contains("multiple of 4") && e.to_string().contains("5 bytes"),
        "{e}"
    );
    // A row pitch shorter than the packed row.
    let e = ImageLayout::with_stride(640, 480, PixelFormat::Rggb10P, DType::U8, 799).unwrap_err();
    assert!(e.to_string().contains("800 bytes"), "{e}");
    // Bayer and deep formats are sources only, and bytes.
    assert!(ImageLayout::tight(64, 48, PixelFormat::Rggb8, DType::F32).is_err());

    let src = ImageLayout::new(64, 48, PixelFormat::Rggb10).unwrap();
    let dst = ImageLayout::new(32, 24, PixelFormat::Rgb).unwrap();
    let bufs = vec![0u8; src.required_len(0)];
    let mut out = vec![0u8; dst.required_len(0)];
    let run = |o: &ConvertOptions, out: &mut [u8]| {
        processor()
            .convert_buffers(&[&bufs], &src, out, &dst, o)
            .unwrap_err()
    };
    let with = |isp: Isp| ConvertOptions {
        isp,
        ..Default::default()
    };
    // A black level at the white level of the format.
    let e = run(
        &with(Isp {
            black_level: [64, 64, 1023, 64],
            ..Isp::IDENTITY
        }),
        &mut out,
    );
    assert_eq!(e.kind(), ErrorKind::InvalidInput);
    assert!(
        e.to_string().contains("1023") && e.to_string().contains("Gb"),
        "{e}"
    );
    let e = run(
        &with(Isp {
            gains: [1.0, 0.0, 1.0],
            ..Isp::IDENTITY
        }),
        &mut out,
    );
    assert!(e.to_string().contains("gain 0 for G"), "{e}");
    let e = run(
        &with(Isp {
            ccm: [[1.0, f32::NAN, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]],
            ..Isp::IDENTITY
        }),
        &mut out,
    );
    assert!(e.to_string().contains("non-finite"), "{e}");
    // Nothing was written by a refused conversion.
    assert!(out.iter().all(|&b| b == 0));
    // A frame shorter than its layout.
    let e = processor()
        .convert_buffers(
            &[&bufs[..bufs.len() - 1]],
            &src,
            &mut out,
            &dst,
            &ConvertOptions::default(),
        )
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput);
    // A RAW destination.
    let raw_dst = ImageLayout::new(32, 24, PixelFormat::Rggb8).unwrap();
    let e = processor()
        .convert_buffers(
            &[&bufs],
            &src,
            &mut out,
            &raw_dst,
            &ConvertOptions::default(),
        )
        .unwrap_err();
    assert!(e.to_string().contains("source-only"), "{e}");
    // CLI spellings.
    assert_eq!("srgb".parse::<Gamma>().unwrap(), Gamma::Srgb);
    assert!("rec709".parse::<Gamma>().is_err());
    assert_eq!("ba81".parse::<PixelFormat>().unwrap(), PixelFormat::Bggr8);
    assert_eq!(
        "rggb10p".parse::<PixelFormat>().unwrap(),
        PixelFormat::Rggb10P
    );
    assert_eq!(CfaSite::Gb.channel(), 1);
}

/// The demosaic's quality, measured: a scene like a photograph's (a fine luminance texture
/// of gratings at several frequencies, under slowly changing colours, so the channels
/// share their edges) is mosaicked by every CFA order, converted at the same size with the
/// default ISP, and compared with the scene itself inside a 4-pixel border. Malvar-He-
/// Cutler, whose filters use that shared detail, must beat a bilinear demosaic of the same
/// mosaic (the one OpenCV's `cvtColor` Bayer codes run) by at least 2 dB PSNR.
#[test]
fn the_demosaic_beats_bilinear_on_a_textured_scene() {
    let (w, h) = (96u32, 64u32);
    let scene = |x: u32, y: u32| -> [f64; 3] {
        let (x, y) = (f64::from(x), f64::from(y));
        let texture = 0.5 + 0.25 * (x * 0.9 + y * 0.35).sin() + 0.15 * (x * 0.3 - y * 1.1).cos();
        let tint = [
            0.75 + 0.25 * (x * 0.03).sin(),
            0.8 + 0.2 * (y * 0.05 + 1.0).cos(),
            0.7 + 0.3 * ((x + y) * 0.02 + 2.0).sin(),
        ];
        tint.map(|t| (255.0 * t * texture).round().clamp(0.0, 255.0))
    };
    let psnr = |err2: f64, n: f64| 10.0 * (255.0f64 * 255.0 / (err2 / n)).log10();
    let mut proc = processor();
    for f in [
        PixelFormat::Rggb8,
        PixelFormat::Bggr8,
        PixelFormat::Grbg8,
        PixelFormat::Gbrg8,
    ] {
        let src = ImageLayout::new(w, h, f).unwrap();
        let cfa = f.cfa().unwrap();
        let mut bufs = vec![vec![0u8; src.required_len(0)]];
        for y in 0..h {
            for x in 0..w {
                let c = cfa.site(x, y).channel();
                put_raw_code(&mut bufs, &src, x, y, scene(x, y)[c] as u32);
            }
        }
        let dst = ImageLayout::new(w, h, PixelFormat::Rgb).unwrap();
        let mut out = vec![0u8; dst.required_len(0)];
        proc.convert_buffers(
            &[&bufs[0]],
            &src,
            &mut out,
            &dst,
            &ConvertOptions::default(),
        )
        .unwrap();
        // Bilinear: a missing colour is the mean of the nearest sites of that colour.
        let mosaic = |x: i64, y: i64| -> (usize, f64) {
            let (x, y) = (x.clamp(0, i64::from(w) - 1), y.clamp(0, i64::from(h) - 1));
            let code = f64::from(bufs[0][(y * i64::from(w) + x) as usize]);
            (cfa.site(x as u32, y as u32).channel(), code)
        };
        let bilinear = |x: u32, y: u32, c: usize| -> f64 {
            let (x, y) = (i64::from(x), i64::from(y));
            let (sum, n) = (-1..=1)
                .flat_map(|dy| (-1..=1).map(move |dx| (dx, dy)))
                .map(|(dx, dy)| mosaic(x + dx, y + dy))
                .filter(|&(site, _)| site == c)
                .fold((0.0, 0.0), |(s, n), (_, v)| (s + v, n + 1.0));
            let (own, v) = mosaic(x, y);
            if own == c { v } else { sum / n }
        };
        let (mut ours, mut theirs, mut n) = (0.0, 0.0, 0.0);
        for y in 4..h - 4 {
            for x in 4..w - 4 {
                let want = scene(x, y);
                for c in 0..3 {
                    let got = f64::from(out[((y * w + x) * 3) as usize + c]);
                    ours += (got - want[c]).powi(2);
                    theirs += (bilinear(x, y, c) - want[c]).powi(2);
                    n += 1.0;
                }
            }
        }
        let (ours, theirs) = (psnr(ours, n), psnr(theirs, n));
        eprintln!("{f}: Malvar-He-Cutler {ours:.1} dB, bilinear {theirs:.1} dB PSNR");
        assert!(
            ours >= theirs + 2.0,
            "{f}: {ours:.1} dB vs bilinear {theirs:.1} dB"
        );
    }
}
