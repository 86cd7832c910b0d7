//! Motion-JPEG sources: every conversion from a JPEG frame equals the f64 reference of
//! the frame's decoded planes (decoded again here, at the scale the conversion reports),
//! with its geometry in the frame's own pixels; frames without Huffman tables, with
//! restart markers, progressive, with trailing bytes; corrupt frames are errors that
//! write nothing (also under a bounded fuzz of mutated real frames); the synthetic
//! camera's Motion-JPEG stream keeps every buffer accounted for through 10,000 frames
//! with damaged ones among them.

mod common;
#[path = "common/reference.rs"]
mod reference;

use std::path::PathBuf;
use std::process::Command;

#[cfg(feature = "camera")]
use pinframe::camera::{Camera, CameraConfig};
use pinframe::jpeg::{self, JpegDecoder, JpegEncoder, JpegSampling};
use pinframe::{
    Backend, ConvertOptions, Crop, DType, Error, ErrorKind, Fit, ImageLayout, ImageProcessor,
    Normalize, PixelFormat, Rotation,
};
use proptest::prelude::*;
use reference::{Readback, max_error, read_back, reference, tolerance};

const SENTINEL: u8 = 0xA5;

/// A camera-like scene: smooth gradients, hard edges and fine detail, RGB.
fn scene(w: u32, h: u32) -> Vec<[u8; 3]> {
    let mut out = Vec::with_capacity((w * h) as usize);
    for y in 0..h {
        for x in 0..w {
            let (fx, fy) = (f64::from(x) / f64::from(w), f64::from(y) / f64::from(h));
            let stripe = (x / 7 + y / 5) % 2 == 0;
            let r = 255.0 * fx;
            let g = 255.0 * fy;
            let b = if stripe { 200.0 } else { 40.0 } * (1.0 - fx * fy);
            let block = x > w / 3 && x < w / 2 && y > h / 4 && y < h / 2;
            let px = if block {
                [250.0, 250.0, 20.0]
            } else {
                [r, g, b]
            };
            out.push(px.map(|v: f64| v.round().clamp(0.0, 255.0) as u8));
        }
    }
    out
}

/// The scene as JFIF planes (full-range BT.601; chroma the mean of the pixels it covers).
fn planes(w: u32, h: u32, format: PixelFormat) -> (Vec<u8>, ImageLayout) {
    let l = ImageLayout::new(w, h, format).unwrap();
    let mut buf = vec![0u8; l.allocation_len(0)];
    let rgb = scene(w, h);
    let ycc: Vec<[f64; 3]> = rgb
        .iter()
        .map(|&[r, g, b]| {
            let (r, g, b) = (f64::from(r), f64::from(g), f64::from(b));
            let y = 0.299 * r + 0.587 * g + 0.114 * b;
            [y, 128.0 + (b - y) / 1.772, 128.0 + (r - y) / 1.402]
        })
        .collect();
    let q = |v: f64| v.round().clamp(0.0, 255.0) as u8;
    let p = l.planes().to_vec();
    for y in 0..h as usize {
        for x in 0..w as usize {
            buf[p[0].offset + y * p[0].stride + x] = q(ycc[y * w as usize + x][0]);
        }
    }
    if format != PixelFormat::Grey {
        let (hs, vs) = format.chroma_subsampling();
        for c in 1..3 {
            for cy in 0..l.plane_height(c) as usize {
                for cx in 0..l.plane_width(c) as usize {
                    let (mut sum, mut n) = (0.0, 0.0);
                    for y in cy * vs as usize..((cy + 1) * vs as usize).min(h as usize) {
                        for x in cx * hs as usize..((cx + 1) * hs as usize).min(w as usize) {
                            sum += ycc[y * w as usize + x][c];
                            n += 1.0;
                        }
                    }
                    buf[p[c].offset + cy * p[c].stride + cx] = q(sum / n);
                }
            }
        }
    }
    (buf, l)
}

fn planar(sampling: JpegSampling) -> PixelFormat {
    sampling.planar_format().unwrap()
}

const SAMPLINGS: [JpegSampling; 4] = [
    JpegSampling::Yuv422,
    JpegSampling::Yuv420,
    JpegSampling::Yuv444,
    JpegSampling::Grey,
];

fn encode(w: u32, h: u32, sampling: JpegSampling, quality: u8) -> Vec<u8> {
    let (buf, l) = planes(w, h, planar(sampling));
    JpegEncoder::new()
        .unwrap()
        .encode(&buf, &l, quality)
        .unwrap()
        .to_vec()
}

fn frame_layout(w: u32, h: u32, len: usize) -> ImageLayout {
    ImageLayout::with_stride(w, h, PixelFormat::Mjpeg, DType::U8, len).unwrap()
}

fn cpu() -> ImageProcessor {
    ImageProcessor::with_backend(Backend::Cpu).unwrap()
}

/// Converts `frame` into a fresh sentinel-filled destination; the destination and what
/// the processor returned.
fn convert<T: Readback>(
    proc: &mut ImageProcessor,
    frame: &[u8],
    src: &ImageLayout,
    dst: &ImageLayout,
    o: &ConvertOptions,
) -> (Vec<T>, pinframe::Result<pinframe::ConvertInfo>) {
    let elem = std::mem::size_of::<T>();
    let mut out = vec![T::zeroed(); dst.allocation_len(0) / elem];
    bytemuck::cast_slice_mut::<T, u8>(&mut out).fill(SENTINEL);
    let r = proc.convert_buffers(&[frame], src, &mut out, dst, o);
    (out, r)
}

/// The reference of a conversion of `frame` as it ran: the frame decoded here at the
/// scale the conversion reports, the crop divided by that scale.
fn reference_of(frame: &[u8], dst: &ImageLayout, o: &ConvertOptions, scale: u32) -> Vec<[f64; 3]> {
    let info = jpeg::parse(frame).unwrap();
    let layout = jpeg::decoded_layout(&info, scale).unwrap();
    let mut planes = vec![0u8; layout.allocation_len(0)];
    JpegDecoder::new()
        .unwrap()
        .decode_planes(frame, &info, scale, &mut planes, &layout)
        .unwrap();
    let crop = o.crop.unwrap_or(Crop::new(0, 0, info.width, info.height));
    assert!(
        [crop.x, crop.y, crop.width, crop.height]
            .iter()
            .all(|v| v % scale == 0),
        "a decode at 1/{scale} of a crop that is not whole scaled pixels: {crop:?}"
    );
    let scaled = ConvertOptions {
        crop: Some(Crop::new(
            crop.x / scale,
            crop.y / scale,
            crop.width / scale,
            crop.height / scale,
        )),
        ..*o
    };
    reference(
        &[planes],
        &layout,
        dst.width(),
        dst.height(),
        dst.format(),
        &scaled,
    )
}

/// The geometry a raw source of the frame's size reports for the same conversion.
fn frame_geometry(w: u32, h: u32, dst: &ImageLayout, o: &ConvertOptions) -> [[f64; 3]; 2] {
    let plan =
        pinframe::convert::Plan::new(&ImageLayout::new(w, h, PixelFormat::I444).unwrap(), dst, o)
            .unwrap();
    plan.info().dst_to_src
}

struct Case {
    frame: (u32, u32),
    dst: (u32, u32),
    crop: Option<Crop>,
    fit: Fit,
    rotation: Rotation,
    scale: u32,
}

fn cases() -> Vec<Case> {
    let lb = Fit::Letterbox { pad: [114; 3] };
    let c = |frame, dst, crop, fit, rotation, scale| Case {
        frame,
        dst,
        crop,
        fit,
        rotation,
        scale,
    };
    vec![
        // 1080p into a 640 letterbox: decoded at 1/2 (960x540), then resampled.
        c((1920, 1080), (640, 640), None, lb, Rotation::R0, 2),
        // 720p, the centre 720x720 into 224: 1/2 (the crop is 360 decoded pixels).
        c(
            (1280, 720),
            (224, 224),
            Some(Crop::new(280, 0, 720, 720)),
            Fit::Stretch,
            Rotation::R0,
            2,
        ),
        // A strong downscale: 1/8.
        c((640, 480), (80, 60), None, Fit::Stretch, Rotation::R0, 8),
        // 1/4, rotated 90 (the content's axes swap against the crop's).
        c((640, 480), (120, 160), None, Fit::Stretch, Rotation::R90, 4),
        // An odd-sized frame and a crop at its bottom-right border: no scaling.
        c(
            (333, 257),
            (101, 77),
            Some(Crop::new(200, 130, 133, 127)),
            lb,
            Rotation::R0,
            1,
        ),
        // An upscale: no scaling; fill.
        c((96, 64), (200, 120), None, Fit::Fill, Rotation::R180, 1),
    ]
}

#[test]
fn conversions_equal_the_reference_of_the_decoded_planes() {
    let mut proc = cpu();
    let mut n = 0;
    for (k, case) in cases().iter().enumerate() {
        let sampling = SAMPLINGS[k % SAMPLINGS.len()];
        let (w, h) = case.frame;
        let frame = encode(w, h, sampling, 88);
        let src = frame_layout(w, h, frame.len());
        for (df, dt) in [
            (PixelFormat::Rgb, DType::U8),
            (PixelFormat::PlanarRgb, DType::F32),
            (PixelFormat::Bgr, DType::I8),
        ] {
            let dst = ImageLayout::tight(case.dst.0, case.dst.1, df, dt).unwrap();
            let o = ConvertOptions {
                crop: case.crop,
                fit: case.fit,
                rotation: case.rotation,
                normalize: if dt == DType::F32 {
                    Normalize::IMAGENET
                } else {
                    Normalize::default()
                },
                ..Default::default()
            };
            let (got, info) = match dt {
                DType::F32 => {
                    let (out, r) = convert::<f32>(&mut proc, &frame, &src, &dst, &o);
                    (read_back(&out, &dst, o.normalize.mean, o.normalize.std), r)
                }
                DType::I8 => {
                    let (out, r) = convert::<i8>(&mut proc, &frame, &src, &dst, &o);
                    (read_back(&out, &dst, o.normalize.mean, o.normalize.std), r)
                }
                _ => {
                    let (out, r) = convert::<u8>(&mut proc, &frame, &src, &dst, &o);
                    (read_back(&out, &dst, o.normalize.mean, o.normalize.std), r)
                }
            };
            let info = info.unwrap_or_else(|e| panic!("{w}x{h} {sampling:?} -> {dst:?}: {e}"));
            assert_eq!(info.decode_scale, case.scale, "{w}x{h} -> {:?}", case.dst);
            let want = reference_of(&frame, &dst, &o, info.decode_scale);
            let (err, at) = max_error(&got, &want, df, dt);
            assert!(
                err <= tolerance(dt),
                "{w}x{h} {sampling:?} 1/{} -> {dst:?}: error {err} at pixel {at}: got {:?} want {:?}",
                info.decode_scale,
                got[at],
                want[at]
            );
            // The geometry is the frame's, whatever the decode scale.
            let geometry = frame_geometry(w, h, &dst, &o);
            for r in 0..2 {
                for c in 0..3 {
                    assert!(
                        (info.dst_to_src[r][c] - geometry[r][c]).abs() < 1e-9,
                        "{:?} against {geometry:?}",
                        info.dst_to_src
                    );
                }
            }
            assert_eq!(
                info.colorimetry,
                (sampling != JpegSampling::Grey).then_some(jpeg::JFIF_COLORIMETRY)
            );
            n += 1;
        }
    }
    assert_eq!(n, cases().len() * 3);
}

/// The decoder's planes against the planes the frame was made from: at full size within
/// a JPEG's error at quality 100, and at each scale against their box average.
#[test]
fn decoded_planes_match_the_encoded_ones() {
    let (w, h) = (320, 240);
    for sampling in SAMPLINGS {
        let format = planar(sampling);
        let (src, sl) = planes(w, h, format);
        let frame = JpegEncoder::new()
            .unwrap()
            .encode(&src, &sl, 100)
            .unwrap()
            .to_vec();
        let info = jpeg::parse(&frame).unwrap();
        assert_eq!((info.width, info.height, info.sampling), (w, h, sampling));
        assert!(info.huffman_tables && !info.progressive);
        assert_eq!(info.len, frame.len());
        let mut dec = JpegDecoder::new().unwrap();
        for scale in jpeg::DECODE_SCALES {
            let dl = jpeg::decoded_layout(&info, scale).unwrap();
            let mut out = vec![0u8; dl.allocation_len(0)];
            dec.decode_planes(&frame, &info, scale, &mut out, &dl)
                .unwrap();
            let (mut sum, mut n, mut worst) = (0.0f64, 0.0f64, 0.0f64);
            for p in 0..format.plane_count() {
                let (dp, sp) = (dl.planes()[p], sl.planes()[p]);
                for y in 0..sl.plane_height(p) / scale {
                    for x in 0..sl.plane_width(p) / scale {
                        let mut want = 0.0;
                        for yy in 0..scale {
                            for xx in 0..scale {
                                let at = sp.offset
                                    + (y * scale + yy) as usize * sp.stride
                                    + (x * scale + xx) as usize;
                                want += f64::from(src[at]);
                            }
                        }
                        want /= f64::from(scale * scale);
                        let got = f64::from(out[dp.offset + y as usize * dp.stride + x as usize]);
                        let d = (got - want).abs();
                        sum += d;
                        n += 1.0;
                        worst = worst.max(d);
                    }
                }
            }
            let mad = sum / n;
            eprintln!("{sampling:?} 1/{scale}: MAD {mad:.3}, max {worst}");
            assert!(
                mad < 0.5 && worst <= 2.0,
                "{sampling:?} 1/{scale}: MAD {mad}, max {worst}"
            );
        }
    }
}

/// The DHT segments of a frame removed, as Motion-JPEG webcams send it.
fn without_huffman_tables(frame: &[u8]) -> Vec<u8> {
    let mut out = frame[..2].to_vec();
    let mut i = 2;
    while i + 4 <= frame.len() && frame[i] == 0xFF && frame[i + 1] != 0xDA {
        let len = usize::from(u16::from_be_bytes([frame[i + 2], frame[i + 3]]));
        if frame[i + 1] != 0xC4 {
            out.extend_from_slice(&frame[i..i + 2 + len]);
        }
        i += 2 + len;
    }
    out.extend_from_slice(&frame[i..]);
    out
}

fn convert_u8(
    proc: &mut ImageProcessor,
    frame: &[u8],
    w: u32,
    h: u32,
) -> pinframe::Result<Vec<u8>> {
    let dst = ImageLayout::tight(96, 96, PixelFormat::Rgb, DType::U8).unwrap();
    let o = ConvertOptions {
        fit: Fit::Letterbox { pad: [114; 3] },
        ..Default::default()
    };
    let (out, r) = convert::<u8>(proc, frame, &frame_layout(w, h, frame.len()), &dst, &o);
    r.map(|_| out)
}

#[test]
fn frames_without_huffman_tables_and_with_trailing_bytes_decode_the_same() {
    let mut proc = cpu();
    let (w, h) = (160, 120);
    let frame = encode(w, h, JpegSampling::Yuv422, 85);
    let want = convert_u8(&mut proc, &frame, w, h).unwrap();
    let bare = without_huffman_tables(&frame);
    assert!(bare.len() < frame.len());
    let info = jpeg::parse(&bare).unwrap();
    assert!(!info.huffman_tables, "the DHT segments are still there");
    assert_eq!(convert_u8(&mut proc, &bare, w, h).unwrap(), want, "no DHT");
    let mut padded = frame.clone();
    padded.extend(std::iter::repeat_n(0u8, 1000));
    padded.extend((0..255u8).cycle().take(3000));
    assert_eq!(jpeg::parse(&padded).unwrap().len, frame.len());
    assert_eq!(
        convert_u8(&mut proc, &padded, w, h).unwrap(),
        want,
        "trailing bytes"
    );
}

/// A PPM of the scene, for cjpeg.
fn write_ppm(path: &PathBuf, w: u32, h: u32) {
    let mut data = format!("P6\n{w} {h}\n255\n").into_bytes();
    for px in scene(w, h) {
        data.extend_from_slice(&px);
    }
    std::fs::write(path, data).unwrap();
}

/// Encodes the scene with libjpeg-turbo's cjpeg and `args`; `None` (said, and a failure
/// under CI) when cjpeg is not installed.
fn cjpeg(test: &str, w: u32, h: u32, args: &[&str]) -> Option<Vec<u8>> {
    let dir = std::env::temp_dir().join(format!("pinframe-mjpeg-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ppm = dir.join(format!("{test}.ppm"));
    write_ppm(&ppm, w, h);
    match Command::new("cjpeg").args(args).arg(&ppm).output() {
        Ok(out) if out.status.success() => Some(out.stdout),
        Ok(out) => panic!("cjpeg {args:?}: {}", String::from_utf8_lossy(&out.stderr)),
        Err(e) if common::under_ci() => {
            panic!("{test}: cjpeg (libjpeg-turbo-progs, scripts/install-deps) cannot run: {e}")
        }
        Err(e) => {
            eprintln!("SKIPPED {test}: cjpeg (Debian libjpeg-turbo-progs) cannot run: {e}");
            None
        }
    }
}

/// Restart markers and progressive coding change how the coefficients are stored, not
/// what they are: the frames convert to the very same bytes as the baseline one.
#[test]
fn restart_markers_progressive_and_greyscale_frames() {
    let test = "restart_markers_progressive_and_greyscale_frames";
    let (w, h) = (200, 150);
    let base = ["-quality", "85", "-sample", "2x1"];
    let Some(plain) = cjpeg(test, w, h, &base) else {
        return;
    };
    let mut proc = cpu();
    let want = convert_u8(&mut proc, &plain, w, h).unwrap();
    let restart = cjpeg(test, w, h, &[&base[..], &["-restart", "1"]].concat()).unwrap();
    let info = jpeg::parse(&restart).unwrap();
    assert!(info.restart_interval > 0, "{info:?}");
    assert_eq!(
        convert_u8(&mut proc, &restart, w, h).unwrap(),
        want,
        "restart markers"
    );
    let progressive = cjpeg(test, w, h, &[&base[..], &["-progressive"]].concat()).unwrap();
    assert!(jpeg::parse(&progressive).unwrap().progressive);
    assert_eq!(
        convert_u8(&mut proc, &progressive, w, h).unwrap(),
        want,
        "progressive"
    );
    // Greyscale: one component, read as grey; every channel the same.
    let grey = cjpeg(test, w, h, &["-quality", "85", "-grayscale"]).unwrap();
    assert_eq!(jpeg::parse(&grey).unwrap().sampling, JpegSampling::Grey);
    let out = convert_u8(&mut proc, &grey, w, h).unwrap();
    assert!(out.chunks_exact(3).all(|p| p[0] == p[1] && p[1] == p[2]));
    // 4:4:0 is refused by name, before anything is written.
    let s440 = cjpeg(test, w, h, &["-quality", "85", "-sample", "1x2"]).unwrap();
    let e = convert_u8(&mut proc, &s440, w, h).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
    assert!(e.to_string().contains("4:4:0"), "{e}");
}

/// What a conversion of a broken frame must do: an error a caller can match, and not a
/// byte of the destination written.
fn assert_refused(proc: &mut ImageProcessor, frame: &[u8], w: u32, h: u32, what: &str) {
    let dst = ImageLayout::tight(64, 48, PixelFormat::Rgb, DType::U8).unwrap();
    let src = frame_layout(w, h, frame.len().max(4));
    let mut padded = frame.to_vec();
    padded.resize(frame.len().max(4), 0);
    let (out, r) = convert::<u8>(proc, &padded, &src, &dst, &ConvertOptions::default());
    let e = r.expect_err(what);
    assert_eq!(e.kind(), ErrorKind::InvalidInput, "{what}: {e}");
    assert!(matches!(e, Error::CorruptFrame(_)), "{what}: {e}");
    assert!(
        out.iter().all(|&b| b == SENTINEL),
        "{what}: the destination was written"
    );
}

#[test]
fn corrupt_frames_are_errors_that_write_nothing() {
    let mut proc = cpu();
    let (w, h) = (160, 120);
    let frame = encode(w, h, JpegSampling::Yuv422, 85);
    for cut in [
        0,
        1,
        3,
        20,
        200,
        frame.len() / 3,
        frame.len() / 2,
        frame.len() - 1,
    ] {
        assert_refused(&mut proc, &frame[..cut], w, h, &format!("cut at {cut}"));
    }
    // Whole markers, data that ends early.
    let mut early = frame[..frame.len() / 2].to_vec();
    if early.last() == Some(&0xFF) {
        early.pop();
    }
    early.extend_from_slice(&[0xFF, 0xD9]);
    assert_refused(&mut proc, &early, w, h, "end marker half way");
    // The scan's data overwritten by a stray marker.
    let mut stray = frame.clone();
    let mid = frame.len() / 2;
    stray[mid..mid + 2].copy_from_slice(&[0xFF, 0xC4]);
    assert_refused(&mut proc, &stray, w, h, "a marker inside the scan");
    // Another size than the layout says.
    let e = convert_u8(&mut proc, &frame, w * 2, h).unwrap_err();
    assert!(
        matches!(e, Error::CorruptFrame(_)) && e.to_string().contains("160x120"),
        "{e}"
    );
    // Not a JPEG at all.
    assert_refused(&mut proc, &vec![0x55; 4096], w, h, "random bytes");
    // The processor goes on converting good frames afterwards.
    assert!(convert_u8(&mut proc, &frame, w, h).is_ok());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, failure_persistence: None, ..ProptestConfig::default() })]

    /// Mutated real frames (bytes changed, runs zeroed, cut, segments repeated) never
    /// panic; an error leaves the destination untouched.
    #[test]
    fn mutated_frames_never_panic_or_half_write(
        sampling in 0usize..4,
        edits in prop::collection::vec((0usize..4, 0.0f64..1.0, any::<u8>(), 1usize..64), 1..6),
    ) {
        thread_local! {
            static FRAMES: Vec<Vec<u8>> = SAMPLINGS.iter().map(|&s| encode(48, 32, s, 80)).collect();
        }
        let mut frame = FRAMES.with(|f| f[sampling].clone());
        for (kind, at, byte, run) in edits {
            let i = ((frame.len() as f64 * at) as usize).min(frame.len().saturating_sub(1));
            match kind {
                0 => frame[i] = byte,
                1 => {
                    let end = (i + run).min(frame.len());
                    frame[i..end].fill(byte);
                }
                2 => frame.truncate(i.max(1)),
                _ => {
                    let end = (i + run).min(frame.len());
                    let copy = frame[i..end].to_vec();
                    frame.splice(i..i, copy);
                }
            }
        }
        let mut proc = cpu();
        let dst = ImageLayout::tight(24, 16, PixelFormat::Rgb, DType::U8).unwrap();
        let len = frame.len().max(4);
        frame.resize(len, 0);
        let (out, r) = convert::<u8>(&mut proc, &frame, &frame_layout(48, 32, len), &dst, &ConvertOptions::default());
        match r {
            Ok(_) => {}
            Err(e) => {
                prop_assert!(matches!(e.kind(), ErrorKind::InvalidInput | ErrorKind::Unsupported), "{e}");
                prop_assert!(out.iter().all(|&b| b == SENTINEL), "an error after a write: {e}");
            }
        }
        // The structure reader on its own never panics either, at any cut.
        let _ = jpeg::parse(&frame);
    }
}

#[cfg(feature = "camera")]
/// 10,000 frames of the synthetic Motion-JPEG camera, every 7th damaged: the cut-off ones
/// never leave the camera (counted malformed), the ones whose data ends early fail their
/// conversion by name, every other frame converts, and no buffer is lost.
#[test]
fn synthetic_mjpeg_stream_accounts_for_every_buffer() {
    let frames = 10_000u32;
    let every = 7u32;
    let config = CameraConfig::new(320, 240, PixelFormat::Mjpeg)
        .with_buffers(4)
        .with_synthetic_corruption(every);
    let mut cam = Camera::synthetic(config).unwrap();
    assert_eq!(cam.format().format, PixelFormat::Mjpeg);
    assert_eq!(cam.format().fourcc, pinframe::image::fourcc(b"MJPG"));
    let mut proc = cpu();
    let mut dst = pinframe::Tensor::<u8>::image(160, 160, PixelFormat::Rgb, None).unwrap();
    let o = ConvertOptions {
        fit: Fit::Letterbox { pad: [114; 3] },
        ..Default::default()
    };
    let (mut ok, mut corrupt) = (0u32, 0u32);
    let mut last_sequence = None;
    while ok + corrupt < frames {
        let frame = cam.next_frame().unwrap();
        assert!(frame.bytesused() > 0 && frame.bytesused() < 320 * 240);
        assert_eq!(
            frame.layout().unwrap().planes()[0].stride,
            frame.bytesused()
        );
        if let Some(prev) = last_sequence {
            assert!(frame.sequence() > prev);
        }
        last_sequence = Some(frame.sequence());
        match proc.convert_with(&frame, &mut dst, &o) {
            Ok(info) => {
                assert_eq!(info.decode_scale, 2);
                ok += 1;
            }
            Err(Error::CorruptFrame(_)) => corrupt += 1,
            Err(e) => panic!("frame {}: {e}", frame.sequence()),
        }
    }
    let stats = cam.stats();
    // Frame k (counted from 1) is damaged when k % 7 == 0, cut off on odd multiples.
    let damaged = |total: u32| total / every;
    let sent = stats.frames as u32 + stats.malformed as u32;
    let truncated = (1..=damaged(sent)).filter(|m| m % 2 == 1).count() as u64;
    assert_eq!(stats.malformed, truncated, "{stats:?}");
    assert_eq!(
        u64::from(corrupt),
        u64::from(damaged(sent)) - truncated,
        "{stats:?}"
    );
    assert_eq!(stats.frames, u64::from(frames));
    assert_eq!(stats.dropped, 0);
    let accounting = cam.buffer_accounting().unwrap();
    assert!(accounting.is_balanced(), "{accounting:?}");
    assert_eq!(accounting.queued, accounting.buffers);
    eprintln!(
        "{frames} frames: {ok} converted, {corrupt} corrupt, {} malformed",
        stats.malformed
    );
}

/// The GL backend converts the same decoded planes (uploaded) within 1 of the CPU.
#[cfg(feature = "gl")]
#[test]
fn gl_converts_mjpeg_like_the_cpu() {
    let test = "gl_converts_mjpeg_like_the_cpu";
    let mut gl = match ImageProcessor::with_backend(Backend::Gl) {
        Ok(p) => p,
        Err(e) if common::under_ci() => panic!("{test}: the GL backend cannot start: {e}"),
        Err(e) => {
            eprintln!("SKIPPED {test}: the GL backend cannot start: {e}");
            return;
        }
    };
    let mut cpu = cpu();
    let mut frames = 0;
    for (k, case) in cases().iter().enumerate() {
        let sampling = SAMPLINGS[k % SAMPLINGS.len()];
        let (w, h) = case.frame;
        let frame = encode(w, h, sampling, 88);
        let src = frame_layout(w, h, frame.len());
        let dst = ImageLayout::tight(case.dst.0, case.dst.1, PixelFormat::Rgb, DType::U8).unwrap();
        let o = ConvertOptions {
            crop: case.crop,
            fit: case.fit,
            rotation: case.rotation,
            ..Default::default()
        };
        let (a, ra) = convert::<u8>(&mut cpu, &frame, &src, &dst, &o);
        let (b, rb) = convert::<u8>(&mut gl, &frame, &src, &dst, &o);
        assert_eq!(ra.unwrap().decode_scale, rb.unwrap().decode_scale);
        let worst = a
            .iter()
            .zip(&b)
            .map(|(&x, &y)| x.abs_diff(y))
            .max()
            .unwrap();
        assert!(
            worst <= 1,
            "{w}x{h} {sampling:?} -> {dst:?}: CPU and GL differ by {worst}"
        );
        frames += 1;
    }
    let stats = gl.stats();
    assert_eq!(stats.frames, frames);
    // The decoded planes are uploaded, once per frame; nothing falls back.
    assert_eq!(stats.uploads, frames);
    assert_eq!(stats.cpu_fallbacks, 0);
}
