//! Motion-JPEG frames into model inputs, in one run, three ways:
//!
//! * `pinframe`: one `ImageProcessor::convert_buffers` from the JPEG: the decoder writes
//!   the frame's YUV planes at 1/2, 1/4 or 1/8 scale where the destination allows, then
//!   the fused pass (resample, colour, letterbox, normalise, store);
//! * `planes-full`: the same decoder at full size into the YUV planes, then the fused
//!   pass from them (what pinframe would cost without the scaled decode);
//! * `rgb-full`: libjpeg-turbo's full decode to packed RGB (what `jpegdec`, OpenCV's
//!   `imdecode` and most pipelines do first), then pinframe's fused pass from RGB.
//!
//! Frames: camera-like 1920x1080 and 1280x720 scenes (gradients, edges and sensor-like
//! noise) encoded 4:2:2 at quality 85, as USB webcams send them. Each contender runs on
//! one thread (the processor's pool off), rounds interleaved; the table gives medians and
//! the ratios to `pinframe`. OpenCV's chains and GStreamer's `jpegdec ! videoconvert !
//! videoscale` are measured against pinframe in `bindings/python/bench/bench_mjpeg.py`.
//!
//!     cargo bench --bench mjpeg [-- --rounds N]

use std::hint::black_box;
use std::time::{Duration, Instant};

use pinframe::jpeg::{self, JpegDecoder, JpegEncoder};
use pinframe::{
    Backend, ConvertOptions, Crop, DType, Fit, ImageLayout, ImageProcessor, Normalize, PixelFormat,
};

/// A camera-like 4:2:2 frame: smooth gradients, a few hard edges, and noise as a sensor
/// adds it (a noiseless synthetic scene compresses far better than any camera's frames).
fn camera_frame(w: u32, h: u32, quality: u8) -> Vec<u8> {
    let l = ImageLayout::new(w, h, PixelFormat::I422).unwrap();
    let mut buf = vec![0u8; l.allocation_len(0)];
    let mut seed = 0x2545_F491_4F6C_DD1Du64;
    let mut noise = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % 9) as f64 - 4.0
    };
    let p = l.planes().to_vec();
    for y in 0..h as usize {
        for x in 0..w as usize {
            let (fx, fy) = (x as f64 / f64::from(w), y as f64 / f64::from(h));
            let edge = if (x / 160 + y / 120) % 2 == 0 {
                40.0
            } else {
                0.0
            };
            let v = 40.0 + 150.0 * fx * (1.0 - 0.5 * fy) + edge + noise();
            buf[p[0].offset + y * p[0].stride + x] = v.clamp(0.0, 255.0) as u8;
        }
        for x in 0..l.plane_width(1) as usize {
            let fx = x as f64 * 2.0 / f64::from(w);
            let u = 128.0 + 40.0 * (fx * 6.0).sin() + noise() / 2.0;
            let v = 128.0 - 30.0 * (y as f64 / 90.0).cos() + noise() / 2.0;
            buf[p[1].offset + y * p[1].stride + x] = u.clamp(0.0, 255.0) as u8;
            buf[p[2].offset + y * p[2].stride + x] = v.clamp(0.0, 255.0) as u8;
        }
    }
    JpegEncoder::new()
        .unwrap()
        .encode(&buf, &l, quality)
        .unwrap()
        .to_vec()
}

struct Workload {
    name: &'static str,
    frame: (u32, u32),
    dst: (u32, u32),
    format: PixelFormat,
    dtype: DType,
    options: ConvertOptions,
}

fn workloads() -> Vec<Workload> {
    let letterbox = ConvertOptions {
        fit: Fit::Letterbox { pad: [114; 3] },
        ..Default::default()
    };
    let f32_letterbox = ConvertOptions {
        normalize: Normalize::IMAGENET,
        ..letterbox
    };
    let centre = ConvertOptions {
        crop: Some(Crop::new(280, 0, 720, 720)),
        normalize: Normalize::IMAGENET,
        ..Default::default()
    };
    let w = |name, frame, dst, format, dtype, options| Workload {
        name,
        frame,
        dst,
        format,
        dtype,
        options,
    };
    vec![
        w(
            "1080p -> 640 planar f32",
            (1920, 1080),
            (640, 640),
            PixelFormat::PlanarRgb,
            DType::F32,
            f32_letterbox,
        ),
        w(
            "1080p -> 416 rgb u8",
            (1920, 1080),
            (416, 416),
            PixelFormat::Rgb,
            DType::U8,
            letterbox,
        ),
        w(
            "720p -> 640 planar f32",
            (1280, 720),
            (640, 640),
            PixelFormat::PlanarRgb,
            DType::F32,
            f32_letterbox,
        ),
        w(
            "720p -> 416 rgb u8",
            (1280, 720),
            (416, 416),
            PixelFormat::Rgb,
            DType::U8,
            letterbox,
        ),
        w(
            "720p centre -> 224 planar f32",
            (1280, 720),
            (224, 224),
            PixelFormat::PlanarRgb,
            DType::F32,
            centre,
        ),
    ]
}

fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let mut rounds = 40;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if a == "--rounds" {
            rounds = args.next().and_then(|v| v.parse().ok()).unwrap_or(rounds);
        }
    }
    let mut proc = ImageProcessor::with_backend(Backend::Cpu).unwrap();
    proc.set_parallel(false);
    let mut dec = JpegDecoder::new().unwrap();
    println!(
        "mjpeg bench: {rounds} rounds, one thread, CPU kernel {}; medians",
        proc.cpu_kernel()
    );
    println!(
        "| workload | JPEG bytes | decode scale | pinframe µs | of which decode µs | planes-full µs | rgb-full µs | planes-full / pinframe | rgb-full / pinframe |"
    );
    println!("|---|--:|--:|--:|--:|--:|--:|--:|--:|");
    for wl in workloads() {
        let (fw, fh) = wl.frame;
        let frame = camera_frame(fw, fh, 85);
        let src =
            ImageLayout::with_stride(fw, fh, PixelFormat::Mjpeg, DType::U8, frame.len()).unwrap();
        let dst_layout = ImageLayout::tight(wl.dst.0, wl.dst.1, wl.format, wl.dtype).unwrap();
        let mut dst = vec![0u8; dst_layout.allocation_len(0)];
        let info = jpeg::parse(&frame).unwrap();
        let planes_layout = jpeg::decoded_layout(&info, 1).unwrap();
        let mut planes = vec![0u8; planes_layout.allocation_len(0)];
        let rgb_layout = ImageLayout::new(fw, fh, PixelFormat::Rgb).unwrap();
        let mut rgb = vec![0u8; rgb_layout.allocation_len(0)];
        let planes_options = ConvertOptions {
            colorimetry: pinframe::ColorimetryChoice::Fixed(jpeg::JFIF_COLORIMETRY),
            ..wl.options
        };
        let mut convert = |proc: &mut ImageProcessor,
                           src: &[u8],
                           layout: &ImageLayout,
                           o: &ConvertOptions| match wl.dtype {
            DType::F32 => {
                let out: &mut [f32] = bytemuck::cast_slice_mut(&mut dst);
                proc.convert_buffers(&[src], layout, out, &dst_layout, o)
                    .unwrap()
            }
            _ => proc
                .convert_buffers(&[src], layout, &mut dst, &dst_layout, o)
                .unwrap(),
        };
        let scale = convert(&mut proc, &frame, &src, &wl.options).decode_scale;
        let scaled_layout = jpeg::decoded_layout(&info, scale).unwrap();
        let mut scaled = vec![0u8; scaled_layout.allocation_len(0)];
        let mut times = [Vec::new(), Vec::new(), Vec::new(), Vec::new()];
        for _ in 0..rounds {
            let t = Instant::now();
            black_box(convert(&mut proc, &frame, &src, &wl.options));
            times[0].push(t.elapsed());

            let t = Instant::now();
            dec.decode_planes(&frame, &info, 1, &mut planes, &planes_layout)
                .unwrap();
            black_box(convert(&mut proc, &planes, &planes_layout, &planes_options));
            times[1].push(t.elapsed());

            let t = Instant::now();
            dec.decode_rgb(&frame, &mut rgb).unwrap();
            black_box(convert(&mut proc, &rgb, &rgb_layout, &wl.options));
            times[2].push(t.elapsed());

            // The decode alone, at the scale pinframe chose: what no pass after it can save.
            let t = Instant::now();
            dec.decode_planes(&frame, &info, scale, &mut scaled, &scaled_layout)
                .unwrap();
            times[3].push(t.elapsed());
        }
        let [a, b, c, d] = times.map(|mut v| median(&mut v));
        let us = |d: Duration| d.as_secs_f64() * 1e6;
        println!(
            "| {} | {} | 1/{scale} | {:.0} | {:.0} | {:.0} | {:.0} | {:.2}x | {:.2}x |",
            wl.name,
            frame.len(),
            us(a),
            us(d),
            us(b),
            us(c),
            us(b) / us(a),
            us(c) / us(a)
        );
    }
}
