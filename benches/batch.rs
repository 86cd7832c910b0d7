//! Batches against the same items converted one at a time, in one run, on the CPU
//! backend with the whole rayon pool (wall time: what a pipeline waits for):
//!
//! - `crops16`: 16 crops of one 1920x1080 NV12 frame (detections of 120 to 420 pixels
//!   across, some at the borders) letterboxed into 16x3x224x224 f32, ImageNet-normalised;
//! - `cameras4`: 4 1920x1080 YUYV frames letterboxed into 4x3x640x640 f32.
//!
//! `batch` is one `convert_batch`; `singles` converts the same items one by one
//! (`convert_buffers` into each slice of the same buffer: the fastest single-image
//! path). The ratio is printed at the end. The OpenCV chain (per-crop `resize` +
//! `blobFromImages`) is in `bindings/python/bench/bench_batch.py`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::Criterion;
use pinframe::{
    Backend, BatchItem, ConvertOptions, Crop, DType, Fit, ImageLayout, ImageProcessor, Memory,
    Normalize, PixelFormat, Tensor,
};

fn frame(format: PixelFormat, seed: u32) -> (ImageLayout, Vec<u8>) {
    let layout = ImageLayout::tight(1920, 1080, format, DType::U8).unwrap();
    let mut state = seed;
    let bytes = (0..layout.required_len(0))
        .map(|_| {
            state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (state >> 24) as u8
        })
        .collect();
    (layout, bytes)
}

/// 16 detection-sized crops spread over a 1080p frame: 14 inside, two touching its
/// corners.
fn crops() -> Vec<Crop> {
    let mut out: Vec<Crop> = (0..14u32)
        .map(|i| {
            let side = 120 + (i * 37) % 300;
            let x = (i % 4) * 470 + (i * 13) % 60;
            let y = (i / 4) * 250 + (i * 7) % 40;
            Crop::new(x.min(1920 - side), y.min(1080 - side), side, side)
        })
        .collect();
    out.push(Crop::new(0, 0, 200, 200));
    out.push(Crop::new(1720, 880, 200, 200));
    out
}

struct Case {
    name: &'static str,
    sources: Vec<(ImageLayout, Vec<u8>)>,
    /// (source index, crop) per item.
    items: Vec<(usize, Option<Crop>)>,
    size: u32,
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "crops16-nv12-1080p-to-16x3x224x224-f32",
            sources: vec![frame(PixelFormat::Nv12, 1)],
            items: crops().into_iter().map(|c| (0, Some(c))).collect(),
            size: 224,
        },
        Case {
            name: "cameras4-yuyv-1080p-to-4x3x640x640-f32",
            sources: (0..4).map(|i| frame(PixelFormat::Yuyv, 10 + i)).collect(),
            items: (0..4).map(|i| (i, None)).collect(),
            size: 640,
        },
    ]
}

fn main() {
    let mut criterion = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .configure_from_args();
    let options = ConvertOptions {
        fit: Fit::Letterbox { pad: [114; 3] },
        normalize: Normalize::IMAGENET,
        ..ConvertOptions::default()
    };
    let mut proc = ImageProcessor::with_backend(Backend::Cpu).unwrap();
    let mut ratios = Vec::new();
    for case in cases() {
        let n = case.items.len();
        let bufs: Vec<[&[u8]; 1]> = case.sources.iter().map(|(_, b)| [&b[..]]).collect();
        let items: Vec<BatchItem<'_>> = case
            .items
            .iter()
            .map(|&(s, crop)| {
                let item = BatchItem::bytes(&bufs[s], &case.sources[s].0);
                match crop {
                    Some(c) => item.with_crop(c),
                    None => item,
                }
            })
            .collect();
        let mut batch = Tensor::<f32>::image_batch(
            n,
            case.size,
            case.size,
            PixelFormat::PlanarRgb,
            Memory::Heap,
        )
        .unwrap();
        let slice =
            ImageLayout::tight(case.size, case.size, PixelFormat::PlanarRgb, DType::F32).unwrap();
        let slice_len = batch.slice_bytes() / 4;

        // The two paths give the same bytes (tests/batch.rs holds them to it; checked
        // here too, so the bench never compares different work).
        proc.convert_batch(&items, &mut batch, &options).unwrap();
        let batched = batch.map().unwrap().to_vec();
        let mut singles = vec![0f32; n * slice_len];
        for (i, item) in items.iter().enumerate() {
            let (s, _) = case.items[i];
            let opts = item.options(&options);
            proc.convert_buffers(
                &bufs[s],
                &case.sources[s].0,
                &mut singles[i * slice_len..(i + 1) * slice_len],
                &slice,
                &opts,
            )
            .unwrap();
        }
        assert!(
            batched == singles,
            "{}: the batch differs from the singles",
            case.name
        );

        let mut group = criterion.benchmark_group(case.name);
        group.bench_function("batch", |b| {
            b.iter(|| {
                proc.convert_batch(black_box(&items), &mut batch, &options)
                    .unwrap()
            })
        });
        group.bench_function("singles", |b| {
            b.iter(|| {
                for (i, item) in items.iter().enumerate() {
                    let (s, _) = case.items[i];
                    proc.convert_buffers(
                        black_box(&bufs[s]),
                        &case.sources[s].0,
                        &mut singles[i * slice_len..(i + 1) * slice_len],
                        &slice,
                        &item.options(&options),
                    )
                    .unwrap();
                }
            })
        });
        group.finish();

        // A median of plain timed rounds for the ratio line (criterion's own estimates
        // are in its report).
        let median = |f: &mut dyn FnMut()| {
            let mut t: Vec<Duration> = (0..31)
                .map(|_| {
                    let start = Instant::now();
                    f();
                    start.elapsed()
                })
                .collect();
            t.sort();
            t[t.len() / 2]
        };
        let b = median(&mut || {
            proc.convert_batch(&items, &mut batch, &options).unwrap();
        });
        let s = median(&mut || {
            for (i, item) in items.iter().enumerate() {
                let (src, _) = case.items[i];
                proc.convert_buffers(
                    &bufs[src],
                    &case.sources[src].0,
                    &mut singles[i * slice_len..(i + 1) * slice_len],
                    &slice,
                    &item.options(&options),
                )
                .unwrap();
            }
        });
        ratios.push((case.name, b, s));
    }
    criterion.final_summary();
    println!(
        "\nbatch vs singles, {} rayon threads, CPU kernel {} (medians of 31 rounds):",
        rayon::current_num_threads(),
        proc.cpu_kernel()
    );
    for (name, b, s) in ratios {
        println!(
            "  {name}: batch {:.2} ms, singles {:.2} ms, singles / batch = {:.2}x",
            b.as_secs_f64() * 1e3,
            s.as_secs_f64() * 1e3,
            s.as_secs_f64() / b.as_secs_f64()
        );
    }
}
