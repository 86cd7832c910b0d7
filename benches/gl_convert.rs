//! GL vs CPU on the CPU issue's cases: 1920x1080 YUYV and NV12 frames letterboxed into
//! 640x640 and 416x416, stored as RGB u8, normalised planar f32 and planar i8.
//!
//! Heap tensors on both sides, so GL pays an upload and a readback per frame (on a board
//! with dma-buf frames and a dma-buf destination it pays neither). On a host with only
//! Mesa llvmpipe the GL numbers measure a software rasteriser's overhead, not GPU speed.
//! When GL cannot start, only the CPU rows run (the reason is printed).

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use pinframe::{
    Backend, ConvertOptions, Fit, ImageProcessor, Memory, Normalize, PixelFormat, Tensor,
};

fn source(format: PixelFormat) -> Tensor<u8> {
    let mut t = Tensor::<u8>::image(1920, 1080, format, Some(Memory::Heap)).unwrap();
    let mut seed = 0x1234_5678u32;
    for b in t.map_mut().unwrap().iter_mut() {
        seed ^= seed << 13;
        seed ^= seed >> 17;
        seed ^= seed << 5;
        *b = (seed >> 24) as u8;
    }
    t
}

fn bench(c: &mut Criterion) {
    let mut backends = vec![(
        Backend::Cpu,
        ImageProcessor::with_backend(Backend::Cpu).unwrap(),
    )];
    match ImageProcessor::with_backend(Backend::Gl) {
        Ok(p) => {
            eprintln!("GL: {}", p.gl_info().unwrap());
            backends.push((Backend::Gl, p));
        }
        Err(e) => eprintln!("GL backend skipped: {e}"),
    }
    let letterbox = ConvertOptions {
        fit: Fit::Letterbox { pad: [114; 3] },
        ..Default::default()
    };
    let normalised = ConvertOptions {
        normalize: Normalize::IMAGENET,
        ..letterbox
    };
    let mut group = c.benchmark_group("gl_convert");
    group.sample_size(10);
    for sf in [PixelFormat::Yuyv, PixelFormat::Nv12] {
        let src = source(sf);
        for size in [640u32, 416] {
            let mut rgb =
                Tensor::<u8>::image(size, size, PixelFormat::Rgb, Some(Memory::Heap)).unwrap();
            let mut f32p =
                Tensor::<f32>::image(size, size, PixelFormat::PlanarRgb, Some(Memory::Heap))
                    .unwrap();
            let mut i8p =
                Tensor::<i8>::image(size, size, PixelFormat::PlanarRgb, Some(Memory::Heap))
                    .unwrap();
            for (backend, p) in backends.iter_mut() {
                let case = format!("{sf}-1080p-{size}/{backend}");
                group.bench_function(BenchmarkId::new("rgb_u8", &case), |b| {
                    b.iter(|| p.convert_with(&src, &mut rgb, &letterbox).unwrap())
                });
                group.bench_function(BenchmarkId::new("planar_f32_norm", &case), |b| {
                    b.iter(|| p.convert_with(&src, &mut f32p, &normalised).unwrap())
                });
                group.bench_function(BenchmarkId::new("planar_i8", &case), |b| {
                    b.iter(|| p.convert_with(&src, &mut i8p, &letterbox).unwrap())
                });
            }
        }
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
