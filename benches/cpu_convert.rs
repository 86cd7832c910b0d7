//! The fused CPU path against the chain a user would otherwise write: the `yuv` crate
//! (full-frame YUV→RGB), `fast_image_resize` (bilinear resize) and a plain loop for the
//! letterbox layout and normalisation; plus a memcpy of the source frame as the floor.
//!
//! RAW sources (RGGB 8 and 10 bits) take the chain a user would write for them: a full-frame
//! bilinear debayer (the cheapest demosaic, OpenCV's default; pinframe runs the costlier
//! Malvar-He-Cutler) into 8-bit RGB, then the same resize and loop. The OpenCV chain is in
//! `bindings/python/bench/bench_convert.py`.
//!
//! Both paths run on one thread (the fused one inside a 1-thread rayon pool, the chain's
//! crates are single-threaded), so the ratio compares work, not core counts; `fused-pool`
//! shows the fused path on the whole rayon pool for reference.
//!
//! Time is the process's CPU time (`CLOCK_PROCESS_CPUTIME_ID`), not wall time: on a
//! shared, oversubscribed machine wall time mostly measures the other tenants, while CPU
//! time measures the work (for `fused-pool` it is the sum over the pool's threads).
//!
//! After the criterion groups it prints the floor table of `ratios`: the eight camera
//! workloads against one copy of the source plus one fill of the destination (the memory
//! floor) and against the same chain on the whole pool, as ratios from one run.
//! `cargo bench --bench cpu_convert -- floor` prints that table alone.

// In its own folder: cargo would take a file directly in benches/ for a bench target.
#[path = "cpu_convert/ratios.rs"]
mod ratios;

use std::hint::black_box;
use std::time::Duration;

use criterion::measurement::{Measurement, ValueFormatter};
use criterion::{Criterion, Throughput, criterion_group};
use fast_image_resize::images::Image;
use fast_image_resize::{PixelType, Resizer};
use pinframe::{
    Backend, ConvertOptions, DType, Fit, ImageLayout, ImageProcessor, Normalize, PixelFormat,
};
use yuv::{YuvBiPlanarImage, YuvConversionMode, YuvPackedImage, YuvRange, YuvStandardMatrix};

/// The process's CPU time so far.
fn process_cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the clock id is a constant Linux knows.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_PROCESS_CPUTIME_ID) failed");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Criterion measurement of process CPU time.
struct CpuTime;

impl Measurement for CpuTime {
    type Intermediate = Duration;
    type Value = Duration;
    fn start(&self) -> Duration {
        process_cpu_time()
    }
    fn end(&self, start: Duration) -> Duration {
        process_cpu_time().saturating_sub(start)
    }
    fn add(&self, a: &Duration, b: &Duration) -> Duration {
        *a + *b
    }
    fn zero(&self) -> Duration {
        Duration::ZERO
    }
    fn to_f64(&self, v: &Duration) -> f64 {
        v.as_nanos() as f64
    }
    fn formatter(&self) -> &dyn ValueFormatter {
        &CpuTimeFormatter
    }
}

struct CpuTimeFormatter;

impl ValueFormatter for CpuTimeFormatter {
    fn scale_values(&self, typical: f64, values: &mut [f64]) -> &'static str {
        let (factor, unit) = if typical < 1e3 {
            (1.0, "ns cpu")
        } else if typical < 1e6 {
            (1e-3, "us cpu")
        } else {
            (1e-6, "ms cpu")
        };
        values.iter_mut().for_each(|v| *v *= factor);
        unit
    }
    fn scale_throughputs(&self, _: f64, _: &Throughput, _: &mut [f64]) -> &'static str {
        "(no throughput)"
    }
    fn scale_for_machines(&self, _: &mut [f64]) -> &'static str {
        "ns cpu"
    }
}

const SRC_W: u32 = 1920;
const SRC_H: u32 = 1080;
const PAD: u8 = 114;

#[derive(Clone, Copy)]
enum Out {
    RgbU8,
    PlanarF32,
    PlanarI8,
}

impl Out {
    fn name(self) -> &'static str {
        match self {
            Out::RgbU8 => "rgb-u8",
            Out::PlanarF32 => "planar-f32-norm",
            Out::PlanarI8 => "planar-i8",
        }
    }
}

fn source(format: PixelFormat) -> (ImageLayout, Vec<u8>) {
    let layout = ImageLayout::new(SRC_W, SRC_H, format).unwrap();
    let mut state = 0x1234_5678u32;
    let mut bytes: Vec<u8> = (0..layout.required_len(0))
        .map(|_| {
            state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (state >> 24) as u8
        })
        .collect();
    if let pinframe::SampleStorage::Le16Low { bits } = format.storage() {
        // Codes inside the format's range, as a sensor writes them.
        for word in bytes.chunks_exact_mut(2) {
            word[1] &= (1u8 << (bits - 8)) - 1;
        }
    }
    (layout, bytes)
}

/// A full-frame bilinear debayer of an RGGB frame of `T` samples into 8-bit RGB
/// (`>> shift` for deeper samples), as a chain would run it before resizing: the missing
/// colours of a site are the means of its nearest neighbours of that colour, the borders
/// clamped.
fn debayer_rggb<T: Copy + Into<u32>>(src: &[T], shift: u32, rgb: &mut [u8]) {
    let (w, h) = (SRC_W as usize, SRC_H as usize);
    let clamped = |x: isize, y: isize| -> u32 {
        let x = x.clamp(0, w as isize - 1) as usize;
        let y = y.clamp(0, h as isize - 1) as usize;
        src[y * w + x].into()
    };
    for y in 0..h {
        let interior_row = y > 0 && y + 1 < h;
        for x in 0..w {
            // Interior pixels index directly; the one-pixel frame clamps.
            let at = |dx: isize, dy: isize| -> u32 {
                if interior_row && x > 0 && x + 1 < w {
                    let i = (y as isize + dy) as usize * w + (x as isize + dx) as usize;
                    src[i].into()
                } else {
                    clamped(x as isize + dx, y as isize + dy)
                }
            };
            let centre = at(0, 0);
            let cross = || (at(-1, 0) + at(1, 0) + at(0, -1) + at(0, 1)) / 4;
            let diag = || (at(-1, -1) + at(1, -1) + at(-1, 1) + at(1, 1)) / 4;
            let across = || (at(-1, 0) + at(1, 0)) / 2;
            let along = || (at(0, -1) + at(0, 1)) / 2;
            let [r, g, b] = match (x & 1, y & 1) {
                (0, 0) => [centre, cross(), diag()],
                (1, 1) => [diag(), cross(), centre],
                (1, 0) => [across(), centre, along()],
                _ => [along(), centre, across()],
            };
            rgb[(y * w + x) * 3..][..3].copy_from_slice(&[
                (r >> shift) as u8,
                (g >> shift) as u8,
                (b >> shift) as u8,
            ]);
        }
    }
}

/// The chain: YUV→RGB of the full frame, resize, then letterbox placement + layout +
/// normalisation in a plain loop. Buffers are allocated once, outside the timed loop.
struct Chain {
    rgb: Vec<u8>,
    resized: Image<'static>,
    resizer: Resizer,
    content: (u32, u32, u32, u32),
    out: Out,
    side: u32,
}

impl Chain {
    fn new(side: u32, content: [u32; 4], out: Out) -> Self {
        Chain {
            rgb: vec![0u8; (SRC_W * SRC_H * 3) as usize],
            resized: Image::new(content[2], content[3], PixelType::U8x3),
            resizer: Resizer::new(),
            content: (content[0], content[1], content[2], content[3]),
            out,
            side,
        }
    }

    fn run(
        &mut self,
        format: PixelFormat,
        src: &[u8],
        dst_u8: &mut [u8],
        dst_f32: &mut [f32],
        dst_i8: &mut [i8],
    ) {
        let (out, side) = (self.out, self.side);
        let (range, matrix) = (YuvRange::Limited, YuvStandardMatrix::Bt709);
        match format {
            PixelFormat::Rggb8 => debayer_rggb(src, 0, &mut self.rgb),
            PixelFormat::Rggb10 => {
                let words: &[u16] = bytemuck::cast_slice(src);
                debayer_rggb(words, 2, &mut self.rgb);
            }
            PixelFormat::Yuyv => {
                let packed = YuvPackedImage {
                    yuy: src,
                    yuy_stride: SRC_W * 2,
                    width: SRC_W,
                    height: SRC_H,
                };
                yuv::yuyv422_to_rgb(&packed, &mut self.rgb, SRC_W * 3, range, matrix).unwrap();
            }
            _ => {
                let (y, uv) = src.split_at((SRC_W * SRC_H) as usize);
                let bi = YuvBiPlanarImage {
                    y_plane: y,
                    y_stride: SRC_W,
                    uv_plane: uv,
                    uv_stride: SRC_W,
                    width: SRC_W,
                    height: SRC_H,
                };
                yuv::yuv_nv12_to_rgb(
                    &bi,
                    &mut self.rgb,
                    SRC_W * 3,
                    range,
                    matrix,
                    YuvConversionMode::Balanced,
                )
                .unwrap();
            }
        }
        ratios::resize_rgb8(
            &mut self.resizer,
            &self.rgb,
            (SRC_W, SRC_H),
            &mut self.resized,
        );
        let (cx, cy, cw, ch) = self.content;
        let resized = self.resized.buffer();
        let side = side as usize;
        let plane = side * side;
        let norm = Normalize::IMAGENET;
        let scale: [f32; 3] = [0, 1, 2].map(|c| 1.0 / (255.0 * norm.std[c]));
        let bias: [f32; 3] = [0, 1, 2].map(|c| -norm.mean[c] / norm.std[c]);
        for y in 0..side {
            for x in 0..side {
                let inside = x >= cx as usize
                    && x < (cx + cw) as usize
                    && y >= cy as usize
                    && y < (cy + ch) as usize;
                let px = if inside {
                    let i = ((y - cy as usize) * cw as usize + (x - cx as usize)) * 3;
                    [resized[i], resized[i + 1], resized[i + 2]]
                } else {
                    [PAD; 3]
                };
                match out {
                    Out::RgbU8 => dst_u8[(y * side + x) * 3..][..3].copy_from_slice(&px),
                    Out::PlanarF32 => {
                        for c in 0..3 {
                            dst_f32[c * plane + y * side + x] =
                                f32::from(px[c]) * scale[c] + bias[c];
                        }
                    }
                    Out::PlanarI8 => {
                        for c in 0..3 {
                            dst_i8[c * plane + y * side + x] = (px[c] ^ 0x80) as i8;
                        }
                    }
                }
            }
        }
    }
}

fn bench(c: &mut Criterion<CpuTime>) {
    let one_thread = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    for format in [
        PixelFormat::Yuyv,
        PixelFormat::Nv12,
        PixelFormat::Rggb8,
        PixelFormat::Rggb10,
    ] {
        let (src_layout, src) = source(format);
        let src_layout = src_layout.with_colorimetry(Some(pinframe::Colorimetry::BT709_LIMITED));
        let raw = format.cfa().is_some();
        // RAW: the case the issue names, 640 letterbox planar f32.
        let sides: &[u32] = if raw { &[640] } else { &[640, 416] };
        for &side in sides {
            let outs: &[Out] = if raw {
                &[Out::PlanarF32]
            } else {
                &[Out::RgbU8, Out::PlanarF32, Out::PlanarI8]
            };
            for &out in outs {
                let (dst_format, dtype) = match out {
                    Out::RgbU8 => (PixelFormat::Rgb, DType::U8),
                    Out::PlanarF32 => (PixelFormat::PlanarRgb, DType::F32),
                    Out::PlanarI8 => (PixelFormat::PlanarRgb, DType::I8),
                };
                let dst_layout = ImageLayout::tight(side, side, dst_format, dtype).unwrap();
                let n = (side * side * 3) as usize;
                let mut dst_u8 = vec![0u8; n];
                let mut dst_f32 = vec![0f32; n];
                let mut dst_i8 = vec![0i8; n];
                let options = ConvertOptions {
                    fit: Fit::Letterbox { pad: [PAD; 3] },
                    normalize: Normalize::IMAGENET,
                    ..Default::default()
                };
                let mut proc = ImageProcessor::with_backend(Backend::Cpu).unwrap();
                let fused = |proc: &mut ImageProcessor,
                             dst_u8: &mut [u8],
                             dst_f32: &mut [f32],
                             dst_i8: &mut [i8]| {
                    let bufs = [src.as_slice()];
                    match out {
                        Out::RgbU8 => {
                            proc.convert_buffers(&bufs, &src_layout, dst_u8, &dst_layout, &options)
                        }
                        Out::PlanarF32 => {
                            proc.convert_buffers(&bufs, &src_layout, dst_f32, &dst_layout, &options)
                        }
                        Out::PlanarI8 => {
                            proc.convert_buffers(&bufs, &src_layout, dst_i8, &dst_layout, &options)
                        }
                    }
                    .unwrap()
                };
                let info = fused(&mut proc, &mut dst_u8, &mut dst_f32, &mut dst_i8);
                let mut chain = Chain::new(side, info.content, out);

                let name = format!(
                    "{}-1920x1080-to-{side}-letterbox-{}",
                    format.name(),
                    out.name()
                );
                let mut group = c.benchmark_group(name);
                group.bench_function("fused", |b| {
                    one_thread.install(|| {
                        b.iter(|| {
                            black_box(fused(&mut proc, &mut dst_u8, &mut dst_f32, &mut dst_i8))
                        })
                    })
                });
                group.bench_function("fused-pool", |b| {
                    b.iter(|| black_box(fused(&mut proc, &mut dst_u8, &mut dst_f32, &mut dst_i8)))
                });
                group.bench_function("chain", |b| {
                    one_thread.install(|| {
                        b.iter(|| chain.run(format, &src, &mut dst_u8, &mut dst_f32, &mut dst_i8))
                    })
                });
                let mut copy = vec![0u8; src.len()];
                group.bench_function("memcpy", |b| {
                    b.iter(|| {
                        copy.copy_from_slice(black_box(&src));
                        black_box(&copy);
                    })
                });
                group.finish();
            }
        }
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .with_measurement(CpuTime)
        .sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1));
    targets = bench
}
fn main() {
    // The first argument that is not an option is criterion's name filter; `floor` (or
    // none) prints the whole floor table, another filter the workloads whose names hold it.
    let filter = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .filter(|f| f != "floor");
    if filter.is_some() || std::env::args().all(|a| a != "floor") {
        benches();
        Criterion::default().configure_from_args().final_summary();
    }
    // Under `cargo test --all-targets` (no `--bench`) one round shows the table works.
    let bench_mode = std::env::args().any(|a| a == "--bench");
    ratios::print_table(filter.as_deref(), bench_mode);
}
