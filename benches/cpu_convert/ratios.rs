//! The floor table of `cargo bench --bench cpu_convert`: the eight camera workloads (a
//! 1920x1080 YUYV or NV12 frame letterboxed into 640x640 or 416x416 as RGB u8 HWC, RGB f32
//! CHW /255 or RGB i8 CHW), timed against
//!
//! * the floor: one copy of the source frame plus one fill of the destination tensor, on
//!   the same rayon pool (no conversion can move fewer bytes);
//! * the Rust chain a user would write: the `yuv` crate to full-frame RGB, then
//!   `fast_image_resize` bilinear into the letterbox's content, then a loop for the pad,
//!   dtype and layout (both crates built with their `rayon` feature, so they run on the
//!   same pool as pinframe: 2 threads for every contender on a 2-core machine).
//!
//! Plus the other 4:2:0 layouts (NV21, I420, YV12) at the first geometry, for "no slower
//! than YUYV", and a 3840x2160 NV12 frame into the same 640 letterbox, for "the cost
//! follows the output". For that frame and W2 (its 1920x1080 twin) each table also times
//! reading only the source rows the bilinear taps sample, and prints how much more the
//! larger frame's rows take to read: bilinear at 6:1 reads two luma rows per output row
//! where 3:1 reads one, so the cost follows the output only as far as the bytes do.
//!
//! Wall time (all three run on the pool), in interleaved rounds (each round times every
//! contender once, so a slow spell of a shared machine hits all of them), medians; two
//! tables, each timing every contender from the same cache state: warm (right after an
//! untimed run of itself) and cold (right after a walk that evicts the caches, as a frame
//! the camera has just written by DMA). A contender timed right after another would
//! find that one's data in the cache or have to write it back.
//! `PINFRAME_FLOOR_ROUNDS` sets the rounds (default 41), `PINFRAME_FLOOR_CACHE=warm` or
//! `=cold` prints one of the two tables; `RAYON_NUM_THREADS=1` gives the
//! one-thread table. `cargo bench --bench cpu_convert -- floor` prints only this table.

use std::collections::BTreeSet;
use std::hint::black_box;
use std::ops::Range;
use std::time::Instant;

use fast_image_resize::images::{Image, ImageRef};
use fast_image_resize::pixels::U8x3;
use fast_image_resize::{FilterType, PixelType, ResizeAlg, ResizeOptions, Resizer};
use pinframe::{
    Backend, Colorimetry, ConvertOptions, DType, Fit, ImageLayout, ImageProcessor, Normalize,
    PixelFormat,
};
use rayon::prelude::*;
use yuv::{
    YuvBiPlanarImage, YuvConversionMode, YuvPackedImage, YuvPlanarImage, YuvRange,
    YuvStandardMatrix,
};

const PAD: u8 = 114;

/// The destination of a workload.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Dst {
    /// RGB u8, interleaved (HWC).
    RgbU8,
    /// RGB f32 planar (CHW), `v / 255`.
    PlanarF32,
    /// RGB i8 planar (CHW), `u8 ^ 0x80`.
    PlanarI8,
}

impl Dst {
    fn label(self) -> &'static str {
        match self {
            Dst::RgbU8 => "RGB u8 HWC",
            Dst::PlanarF32 => "RGB f32 CHW /255",
            Dst::PlanarI8 => "RGB i8 CHW",
        }
    }

    fn layout(self, side: u32) -> ImageLayout {
        let (format, dtype) = match self {
            Dst::RgbU8 => (PixelFormat::Rgb, DType::U8),
            Dst::PlanarF32 => (PixelFormat::PlanarRgb, DType::F32),
            Dst::PlanarI8 => (PixelFormat::PlanarRgb, DType::I8),
        };
        ImageLayout::tight(side, side, format, dtype).unwrap()
    }
}

struct Workload {
    name: String,
    format: PixelFormat,
    src_size: (u32, u32),
    dst: Dst,
    side: u32,
    /// Whether the yuv + fast_image_resize chain is timed too.
    chain: bool,
    /// Whether reading the source rows the bilinear taps sample is timed too (NV12 only).
    reads: bool,
}

fn workloads() -> Vec<Workload> {
    let mut all = Vec::new();
    let mut n = 0;
    for side in [640, 416] {
        for (format, dst) in [
            (PixelFormat::Yuyv, Dst::RgbU8),
            (PixelFormat::Nv12, Dst::RgbU8),
            (PixelFormat::Yuyv, Dst::PlanarF32),
            (PixelFormat::Nv12, Dst::PlanarI8),
        ] {
            n += 1;
            all.push(Workload {
                name: format!("W{n} {format} -> {} {side}", dst.label()),
                format,
                src_size: (1920, 1080),
                dst,
                side,
                chain: true,
                reads: n == 2,
            });
        }
    }
    for format in [PixelFormat::Nv21, PixelFormat::I420, PixelFormat::Yv12] {
        all.push(Workload {
            name: format!("{format} -> RGB u8 HWC 640 (vs W1)"),
            format,
            src_size: (1920, 1080),
            dst: Dst::RgbU8,
            side: 640,
            chain: format == PixelFormat::I420,
            reads: false,
        });
    }
    all.push(Workload {
        name: "NV12 3840x2160 -> RGB u8 HWC 640 (vs W2)".into(),
        format: PixelFormat::Nv12,
        src_size: (3840, 2160),
        dst: Dst::RgbU8,
        side: 640,
        chain: false,
        reads: true,
    });
    all
}

fn noise(len: usize) -> Vec<u8> {
    let mut state = 0x1234_5678u32;
    (0..len)
        .map(|_| {
            state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (state >> 24) as u8
        })
        .collect()
}

/// `fast_image_resize` bilinear from packed RGB8 `src` (`size`) into `dst` (an RGB8 image).
///
/// Through `resize_typed::<U8x3>`, which is what `Resizer::resize` runs for RGB8 after
/// matching the pixel type: the same code at run time, but only the RGB8 instantiation
/// is compiled (`resize` instantiates all 13 pixel types, which made this bench alone
/// take four minutes of the test build).
pub(crate) fn resize_rgb8(
    resizer: &mut Resizer,
    src: &[u8],
    size: (u32, u32),
    dst: &mut Image<'static>,
) {
    let view = ImageRef::new(size.0, size.1, src, PixelType::U8x3).unwrap();
    let src = view.typed_image::<U8x3>().unwrap();
    let mut dst = dst.typed_image_mut::<U8x3>().unwrap();
    let options = ResizeOptions::new().resize_alg(ResizeAlg::Interpolation(FilterType::Bilinear));
    resizer.resize_typed(&src, &mut dst, &options).unwrap();
}

/// The yuv + fast_image_resize chain with its buffers allocated once.
struct Chain {
    format: PixelFormat,
    size: (u32, u32),
    rgb: Vec<u8>,
    resized: Image<'static>,
    resizer: Resizer,
    content: [u32; 4],
    dst: Dst,
    side: u32,
}

impl Chain {
    fn new(w: &Workload, content: [u32; 4]) -> Chain {
        let (sw, sh) = w.src_size;
        Chain {
            format: w.format,
            size: w.src_size,
            rgb: vec![0; (sw * sh * 3) as usize],
            resized: Image::new(content[2], content[3], PixelType::U8x3),
            resizer: Resizer::new(),
            content,
            dst: w.dst,
            side: w.side,
        }
    }

    fn run(&mut self, src: &[u8], out: &mut [u8]) {
        let (w, h) = self.size;
        let (range, matrix) = (YuvRange::Limited, YuvStandardMatrix::Bt601);
        let luma = (w * h) as usize;
        match self.format {
            PixelFormat::Yuyv => {
                let packed = YuvPackedImage {
                    yuy: src,
                    yuy_stride: w * 2,
                    width: w,
                    height: h,
                };
                yuv::yuyv422_to_rgb(&packed, &mut self.rgb, w * 3, range, matrix).unwrap();
            }
            PixelFormat::I420 => {
                let (y, uv) = src.split_at(luma);
                let (u, v) = uv.split_at(luma / 4);
                let planar = YuvPlanarImage {
                    y_plane: y,
                    y_stride: w,
                    u_plane: u,
                    u_stride: w / 2,
                    v_plane: v,
                    v_stride: w / 2,
                    width: w,
                    height: h,
                };
                yuv::yuv420_to_rgb(&planar, &mut self.rgb, w * 3, range, matrix).unwrap();
            }
            _ => {
                let (y, uv) = src.split_at(luma);
                let bi = YuvBiPlanarImage {
                    y_plane: y,
                    y_stride: w,
                    uv_plane: uv,
                    uv_stride: w,
                    width: w,
                    height: h,
                };
                yuv::yuv_nv12_to_rgb(
                    &bi,
                    &mut self.rgb,
                    w * 3,
                    range,
                    matrix,
                    YuvConversionMode::Balanced,
                )
                .unwrap();
            }
        }
        resize_rgb8(&mut self.resizer, &self.rgb, (w, h), &mut self.resized);
        self.place(out);
    }

    /// The pad, dtype and layout loop, rows spread over the pool like the resize.
    fn place(&self, out: &mut [u8]) {
        let [cx, cy, cw, ch] = self.content.map(|v| v as usize);
        let side = self.side as usize;
        let resized = self.resized.buffer();
        let content_row = |y: usize| -> Option<&[u8]> {
            (y >= cy && y < cy + ch).then(|| &resized[(y - cy) * cw * 3..][..cw * 3])
        };
        match self.dst {
            Dst::RgbU8 => out
                .par_chunks_mut(side * 3)
                .enumerate()
                .for_each(|(y, row)| match content_row(y) {
                    Some(src) => {
                        row[..cx * 3].fill(PAD);
                        row[cx * 3..(cx + cw) * 3].copy_from_slice(src);
                        row[(cx + cw) * 3..].fill(PAD);
                    }
                    None => row.fill(PAD),
                }),
            Dst::PlanarF32 => {
                let floats: &mut [f32] = bytemuck::cast_slice_mut(out);
                floats
                    .par_chunks_mut(side)
                    .enumerate()
                    .for_each(|(i, row)| {
                        let (c, y) = (i / side, i % side);
                        let pad = f32::from(PAD) / 255.0;
                        match content_row(y) {
                            Some(src) => {
                                row[..cx].fill(pad);
                                for (d, px) in row[cx..cx + cw].iter_mut().zip(src.chunks_exact(3))
                                {
                                    *d = f32::from(px[c]) / 255.0;
                                }
                                row[cx + cw..].fill(pad);
                            }
                            None => row.fill(pad),
                        }
                    });
            }
            Dst::PlanarI8 => out.par_chunks_mut(side).enumerate().for_each(|(i, row)| {
                let (c, y) = (i / side, i % side);
                match content_row(y) {
                    Some(src) => {
                        row[..cx].fill(PAD ^ 0x80);
                        for (d, px) in row[cx..cx + cw].iter_mut().zip(src.chunks_exact(3)) {
                            *d = px[c] ^ 0x80;
                        }
                        row[cx + cw..].fill(PAD ^ 0x80);
                    }
                    None => row.fill(PAD ^ 0x80),
                }
            }),
        }
    }
}

/// One copy of the source frame plus one fill of the destination, on the pool.
fn floor(src: &[u8], copy: &mut [u8], dst: &mut [u8]) {
    const CHUNK: usize = 64 * 1024;
    copy.par_chunks_mut(CHUNK)
        .zip(src.par_chunks(CHUNK))
        .for_each(|(d, s)| d.copy_from_slice(s));
    dst.par_chunks_mut(CHUNK).for_each(|d| d.fill(PAD));
    black_box((&copy, &dst));
}

/// The bytes of a `width` x `height` NV12 frame that a bilinear conversion into
/// `content_rows` rows of the frame's full width samples: for each output row the luma
/// rows of its taps (one where the tap lands on a pixel centre, as at 3:1; two at 6:1,
/// where it falls half way) and the chroma row under each (pinframe replicates chroma to
/// luma resolution: luma row `y` takes chroma row `y / 2`), each row once and whole.
fn sampled_rows(width: usize, height: usize, content_rows: usize) -> Vec<Range<usize>> {
    let (mut luma, mut chroma) = (BTreeSet::new(), BTreeSet::new());
    for d in 0..content_rows {
        let u = (d as f64 + 0.5) * height as f64 / content_rows as f64 - 0.5;
        let base = u.floor();
        let taps: &[f64] = if u == base {
            &[base]
        } else {
            &[base, base + 1.0]
        };
        for &t in taps {
            let y = (t as usize).min(height - 1);
            luma.insert(y);
            chroma.insert(y / 2);
        }
    }
    let chroma_start = width * height;
    let luma = luma.into_iter().map(|y| y * width..(y + 1) * width);
    let chroma = chroma
        .into_iter()
        .map(|c| chroma_start + c * width..chroma_start + (c + 1) * width);
    luma.chain(chroma).collect()
}

/// Reads every byte of `rows` of `src` on the pool (and nothing else): what the memory
/// system must deliver to any conversion that samples those rows.
fn read_rows(src: &[u8], rows: &[Range<usize>]) {
    let sum: u64 = rows
        .par_chunks(8)
        .map(|rows| {
            rows.iter()
                .flat_map(|r| src[r.clone()].chunks_exact(8))
                .fold(0u64, |a, w| {
                    a.wrapping_add(u64::from_ne_bytes(w.try_into().unwrap()))
                })
        })
        .sum();
    black_box(sum);
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The cache state every contender starts from in a round.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Cache {
    /// Each timed run follows an untimed run of the same contender: its source, tables and
    /// destination are in the caches as far as they fit (a frame converted twice).
    Warm,
    /// Each timed run follows a walk, on the pool, over a buffer three times the last-level
    /// cache: nothing of the frame or the destination is cached, as with a frame the
    /// camera has just written by DMA.
    Cold,
}

/// Reads `EVICT_BYTES` on the pool, one word per cache line, so the next contender
/// starts from caches holding none of its data (and none dirty to write back).
struct Evictor(Vec<u64>);

/// Three times this build machine's 32 MiB L3, and larger than the last-level cache of
/// the edge CPUs pinframe targets; a CPU with a larger one needs a longer walk.
const EVICT_BYTES: usize = 96 << 20;

impl Evictor {
    fn new() -> Evictor {
        Evictor(vec![1; EVICT_BYTES / 8])
    }

    fn run(&self) {
        let sum: u64 = self
            .0
            .par_chunks(64 * 1024)
            .map(|c| c.iter().step_by(8).fold(0u64, |a, &v| a.wrapping_add(v)))
            .sum();
        black_box(sum);
    }
}

/// One workload's medians in µs.
struct Timings {
    pinframe: f64,
    /// The yuv + fast_image_resize chain, where timed.
    chain: Option<f64>,
    floor: f64,
    /// Reading the sampled rows (`sampled_rows`), where timed: the bytes and the median.
    reads: Option<(usize, f64)>,
}

fn time(w: &Workload, rounds: usize, cache: Cache, evictor: &Evictor) -> Timings {
    let (sw, sh) = w.src_size;
    let src_layout = ImageLayout::new(sw, sh, w.format)
        .unwrap()
        .with_colorimetry(Some(Colorimetry::BT601_LIMITED));
    let src = noise(src_layout.required_len(0));
    let dst_layout = w.dst.layout(w.side);
    let mut out = vec![0f32; dst_layout.required_len(0).div_ceil(4)];
    let options = ConvertOptions {
        fit: Fit::Letterbox { pad: [PAD; 3] },
        normalize: Normalize::IDENTITY,
        ..Default::default()
    };
    let mut proc = ImageProcessor::with_backend(Backend::Cpu).unwrap();
    let mut pinframe = |out: &mut [f32]| {
        let bufs = [src.as_slice()];
        let bytes: &mut [u8] = bytemuck::cast_slice_mut(out);
        let bytes = &mut bytes[..dst_layout.required_len(0)];
        match w.dst {
            Dst::RgbU8 => proc.convert_buffers(&bufs, &src_layout, bytes, &dst_layout, &options),
            Dst::PlanarI8 => {
                let ints: &mut [i8] = bytemuck::cast_slice_mut(bytes);
                proc.convert_buffers(&bufs, &src_layout, ints, &dst_layout, &options)
            }
            Dst::PlanarF32 => {
                let floats: &mut [f32] = bytemuck::cast_slice_mut(bytes);
                proc.convert_buffers(&bufs, &src_layout, floats, &dst_layout, &options)
            }
        }
        .unwrap()
    };
    let content = pinframe(&mut out).content;
    // `sampled_rows` models NV12's planes only.
    assert!(
        !w.reads || w.format == PixelFormat::Nv12,
        "{}: reads are timed for NV12 only",
        w.name
    );
    let sampled = w
        .reads
        .then(|| sampled_rows(sw as usize, sh as usize, content[3] as usize));
    let mut chain = w.chain.then(|| Chain::new(w, content));
    let mut chain_out = vec![0u8; dst_layout.required_len(0)];
    let mut copy = vec![0u8; src.len()];
    let mut floor_out = vec![0u8; dst_layout.required_len(0)];
    // Warm every contender (pools, tables, page faults) before timing.
    if let Some(chain) = &mut chain {
        chain.run(&src, &mut chain_out);
    }
    floor(&src, &mut copy, &mut floor_out);
    if let Some(rows) = &sampled {
        read_rows(&src, rows);
    }
    let (mut ours, mut theirs, mut floors, mut reads) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    // Runs `f` once from the round's cache state and returns its wall time in µs.
    let timed = |f: &mut dyn FnMut()| {
        match cache {
            Cache::Warm => f(),
            Cache::Cold => evictor.run(),
        }
        let t = Instant::now();
        f();
        t.elapsed().as_secs_f64() * 1e6
    };
    for _ in 0..rounds {
        ours.push(timed(&mut || {
            black_box(pinframe(&mut out));
        }));
        if let Some(chain) = &mut chain {
            theirs.push(timed(&mut || {
                chain.run(&src, &mut chain_out);
                black_box(&chain_out);
            }));
        }
        floors.push(timed(&mut || floor(&src, &mut copy, &mut floor_out)));
        if let Some(rows) = &sampled {
            reads.push(timed(&mut || read_rows(&src, rows)));
        }
    }
    Timings {
        pinframe: median(&mut ours),
        chain: (!theirs.is_empty()).then(|| median(&mut theirs)),
        floor: median(&mut floors),
        reads: sampled.map(|rows| (rows.iter().map(|r| r.len()).sum(), median(&mut reads))),
    }
}

/// Prints the floor table (markdown) for every workload whose name contains `filter`
/// (ignoring case); one round unless `bench_mode`.
pub fn print_table(filter: Option<&str>, bench_mode: bool) {
    let rounds = if bench_mode {
        std::env::var("PINFRAME_FLOOR_ROUNDS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(41usize)
            .max(1)
    } else {
        1
    };
    let kernel = ImageProcessor::with_backend(Backend::Cpu)
        .map(|p| p.cpu_kernel().to_string())
        .unwrap_or_default();
    let evictor = Evictor::new();
    let only = std::env::var("PINFRAME_FLOOR_CACHE").unwrap_or_default();
    for (cache, name) in [(Cache::Warm, "warm"), (Cache::Cold, "cold")] {
        if only.is_empty() || only == name {
            print_one(filter, rounds, &kernel, cache, &evictor);
        }
    }
}

/// One floor table: every workload whose name contains `filter`, from one cache state.
fn print_one(filter: Option<&str>, rounds: usize, kernel: &str, cache: Cache, evictor: &Evictor) {
    let state = match cache {
        Cache::Warm => "warm: each timed run follows an untimed run of the same contender",
        Cache::Cold => "cold: each timed run follows a walk that evicts the caches",
    };
    println!(
        "\nfloor table ({state}): {} threads, {kernel} kernel, wall-time medians of {rounds} interleaved rounds",
        rayon::current_num_threads()
    );
    println!(
        "| workload | pinframe µs | yuv + fast_image_resize µs | chain / pinframe | floor µs | pinframe / floor |"
    );
    println!("|---|--:|--:|--:|--:|--:|");
    let mut reference: Option<f64> = None;
    let mut w2: Option<f64> = None;
    // (name, bytes, µs, pinframe µs) of the workloads whose sampled rows were read.
    let mut reads = Vec::new();
    for w in workloads() {
        if filter.is_some_and(|f| !w.name.to_lowercase().contains(&f.to_lowercase())) {
            continue;
        }
        let Timings {
            pinframe: ours,
            chain: theirs,
            floor,
            reads: read,
        } = time(&w, rounds, cache, evictor);
        if let Some((bytes, us)) = read {
            let (sw, sh) = w.src_size;
            reads.push((format!("{} {sw}x{sh}", w.format), bytes, us, ours));
        }
        let chain = theirs.map_or("—".to_string(), |t| format!("{t:.0}"));
        let ratio = theirs.map_or("—".to_string(), |t| format!("{:.2}x", t / ours));
        let mut name = w.name.clone();
        if w.name.starts_with("W1 ") {
            reference = Some(ours);
        }
        if w.name.starts_with("W2 ") {
            w2 = Some(ours);
        }
        let versus = if w.name.ends_with("(vs W1)") {
            reference
        } else if w.name.ends_with("(vs W2)") {
            w2
        } else {
            None
        };
        if let Some(r) = versus {
            name = format!("{name}: {:.2}x", ours / r);
        }
        println!(
            "| {name} | {ours:.0} | {chain} | {ratio} | {floor:.0} | {:.2} |",
            ours / floor
        );
    }
    // The same frame into the same letterbox from a larger source: how much of the extra
    // cost is the extra bytes the taps must read, which no kernel can skip.
    if let [
        (small, small_bytes, small_read, small_ours),
        (large, large_bytes, large_read, large_ours),
    ] = &reads[..]
    {
        println!(
            "\nreading only the source rows the bilinear taps sample (no conversion): \
             {small} {:.2} MB in {small_read:.0} µs, {large} {:.2} MB in {large_read:.0} µs: \
             {:.2}x the bytes, {:.2}x the time to read them; pinframe {:.2}x",
            *small_bytes as f64 / 1e6,
            *large_bytes as f64 / 1e6,
            *large_bytes as f64 / *small_bytes as f64,
            large_read / small_read,
            large_ours / small_ours,
        );
    }
}
