//! Per frame: convert + invoke with the model input bound at the pin (no copy) against the
//! usual copy-in (convert into a tensor, `memcpy` it into LiteRT's own input buffer,
//! invoke), in the same run. Two models: MediaPipe's face detector (128x128x3 f32 input,
//! 192 KiB a frame; inference dominates) and the tests' own DEQUANTIZE model at 640x640x3
//! int8 (1.2 MiB a frame, a trivial op: what the copy costs next to a conversion).
//!
//! `cargo bench --features litert --bench litert` (scripts/assets first). After the criterion
//! groups it prints, per model, the medians of an interleaved run (pin, copy, pin, ...) and
//! their ratio, plus the bytes the pin saves per frame.

#[path = "../tests/common/tflite.rs"]
mod tflite;

use std::hint::black_box;
use std::path::PathBuf;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use pinframe::runtime::litert::{Accelerator, CompiledModel, Environment, Model};
use pinframe::{
    Backend, ConvertOptions, Element, Fit, ImageProcessor, Memory, Normalize, PixelFormat, Tensor,
};

/// The process's CPU time so far (all threads: the conversion and LiteRT's).
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

fn assets() -> PathBuf {
    std::env::var_os("PINFRAME_ASSETS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/assets"))
}

fn environment() -> Option<Environment> {
    let fetched = assets().join("litert/libLiteRt.so");
    let env = if std::env::var_os(pinframe::runtime::litert::LIBRARY_ENV).is_none()
        && fetched.is_file()
    {
        Environment::with_library(&fetched)
    } else {
        Environment::new()
    };
    match env {
        Ok(e) => Some(e),
        Err(e) => {
            eprintln!("SKIPPED litert bench: {e}; run scripts/assets");
            None
        }
    }
}

/// One model set up both ways, fed the same camera frame.
struct Case<T: Element> {
    name: &'static str,
    frame: Tensor<u8>,
    processor: ImageProcessor,
    options: ConvertOptions,
    /// Bound: the model reads this tensor in place.
    pinned: Tensor<T>,
    bound: CompiledModel,
    /// Copy-in: converted here, then copied into the runtime's own buffer.
    staging: Tensor<T>,
    copied: CompiledModel,
}

impl<T: Element> Case<T> {
    fn new(name: &'static str, model: &Model, options: ConvertOptions) -> Case<T> {
        let input = model.inputs()[0].image_input().unwrap();
        let layout = input.image_layout().unwrap();
        let pinned = Tensor::<T>::with_layout(layout, Some(Memory::Heap)).unwrap();
        let staging = Tensor::<T>::with_layout(layout, Some(Memory::Heap)).unwrap();
        let mut bound = CompiledModel::new(model, &[Accelerator::Cpu]).unwrap();
        bound.bind_input(0, &pinned).unwrap();
        let mut copied = CompiledModel::new(model, &[Accelerator::Cpu]).unwrap();
        copied.allocate_input(0).unwrap();
        let mut frame =
            Tensor::<u8>::image(1280, 720, PixelFormat::Yuyv, Some(Memory::Heap)).unwrap();
        for (i, b) in frame.map_mut().unwrap().iter_mut().enumerate() {
            *b = (i * 31 % 251) as u8;
        }
        let mut processor = ImageProcessor::with_backend(Backend::Cpu).unwrap();
        processor.set_parallel(false);
        Case {
            name,
            frame,
            processor,
            options: ConvertOptions {
                quantize: input.quantize,
                ..options
            },
            pinned,
            bound,
            staging,
            copied,
        }
    }

    fn bytes(&self) -> usize {
        self.pinned.len() * std::mem::size_of::<T>()
    }

    fn pin_frame(&mut self) {
        self.processor
            .convert_with(&self.frame, &mut self.pinned, &self.options)
            .unwrap();
        self.bound.run().unwrap();
        black_box(self.bound.output::<f32>(0).unwrap()[0]);
    }

    fn copy_frame(&mut self) {
        self.processor
            .convert_with(&self.frame, &mut self.staging, &self.options)
            .unwrap();
        let src = self.staging.map().unwrap();
        self.copied.input_mut::<T>(0).unwrap().copy_from_slice(&src);
        drop(src);
        self.copied.run().unwrap();
        black_box(self.copied.output::<f32>(0).unwrap()[0]);
    }

    /// Medians of an interleaved run, `n` frames each way, alternating which goes first,
    /// timed in process CPU time (the work, not the neighbours on a shared machine).
    fn interleaved(&mut self, n: usize) -> (Duration, Duration) {
        let (mut pin, mut copy) = (Vec::with_capacity(n), Vec::with_capacity(n));
        let timed = |f: &mut dyn FnMut()| {
            let t = process_cpu_time();
            f();
            process_cpu_time() - t
        };
        for i in 0..n {
            if i % 2 == 0 {
                pin.push(timed(&mut || self.pin_frame()));
                copy.push(timed(&mut || self.copy_frame()));
            } else {
                copy.push(timed(&mut || self.copy_frame()));
                pin.push(timed(&mut || self.pin_frame()));
            }
        }
        pin.sort();
        copy.sort();
        (pin[n / 2], copy[n / 2])
    }
}

fn bench(c: &mut Criterion) {
    let Some(env) = environment() else {
        return;
    };
    let face_path = assets().join("models/face_detection_short_range.tflite");
    let face = face_path
        .is_file()
        .then(|| Model::from_file(&env, &face_path).unwrap());
    if face.is_none() {
        eprintln!(
            "SKIPPED the face-detector case: {} is missing",
            face_path.display()
        );
    }
    let dq_path =
        std::env::temp_dir().join(format!("pinframe-bench-{}.tflite", std::process::id()));
    std::fs::write(
        &dq_path,
        tflite::dequantize_model(&[1, 640, 640, 3], tflite::INT8, 1.0 / 255.0, -128),
    )
    .unwrap();
    let dq = Model::from_file(&env, &dq_path).unwrap();
    let _ = std::fs::remove_file(&dq_path);

    let letterbox = ConvertOptions {
        fit: Fit::Letterbox { pad: [0; 3] },
        ..Default::default()
    };
    let mut summary = Vec::new();
    if let Some(face) = &face {
        let mut case = Case::<f32>::new(
            "face-detector-128x128-f32",
            face,
            ConvertOptions {
                normalize: Normalize {
                    mean: [0.5; 3],
                    std: [0.5; 3],
                },
                ..letterbox
            },
        );
        run(c, &mut case, &mut summary);
    }
    let mut case = Case::<i8>::new("dequantize-640x640-i8", &dq, letterbox);
    run(c, &mut case, &mut summary);
    println!(
        "\nbound pin vs copy-in, per frame (1280x720 YUYV → letterboxed model input, convert + \
         invoke), medians of 400 interleaved frames each, process CPU time:"
    );
    for line in summary {
        println!("{line}");
    }
}

fn run<T: Element>(c: &mut Criterion, case: &mut Case<T>, summary: &mut Vec<String>) {
    // Warm both (XNNPACK sets itself up on the first invoke).
    for _ in 0..3 {
        case.pin_frame();
        case.copy_frame();
    }
    let mut group = c.benchmark_group(case.name);
    group.bench_function("bound-pin", |b| b.iter(|| case.pin_frame()));
    group.bench_function("copy-in", |b| b.iter(|| case.copy_frame()));
    group.finish();
    let (pin, copy) = case.interleaved(400);
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    summary.push(format!(
        "  {}: bound pin {:.1} µs, copy-in {:.1} µs, copy-in / pin {:.3}x, {} bytes not copied per frame",
        case.name,
        us(pin),
        us(copy),
        copy.as_secs_f64() / pin.as_secs_f64(),
        case.bytes()
    ));
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    targets = bench
}
criterion_main!(benches);
