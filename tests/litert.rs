//! The LiteRT binding (feature `litert`): a pinframe tensor bound as a model input without
//! a copy (LiteRT's buffer is at the pin's address, a write through the pin is what the
//! model reads, steady state creates and allocates nothing), quantised inputs filled
//! through `Quantize` from the model's own description, and errors that say what the
//! model expects.
//!
//! Needs `libLiteRt.so` (scripts/assets puts ai-edge-litert 2.3.0's in target/assets) and,
//! for the face-detector tests, MediaPipe's model; without them each test says SKIPPED,
//! and under `CI=true` fails.
#![cfg(feature = "litert")]

#[cfg(feature = "cli")]
#[path = "../examples/common/blazeface.rs"]
mod blazeface;
mod common;
#[cfg(feature = "cli")]
#[path = "../examples/common/face_landmark.rs"]
mod face_landmark;
#[path = "common/reference.rs"]
mod reference;
#[cfg(feature = "cli")]
#[path = "../examples/common/yuv.rs"]
mod yuv;

use common::litert::{environment, face_model, scratch_file};
use common::tflite;
use pinframe::convert::{ModelInput, TensorLayout};
use pinframe::runtime::litert::{
    Accelerator, Binding, CompiledModel, ElementType, Environment, HOST_MEMORY_ALIGNMENT, Model,
    Quantization,
};
use pinframe::{
    Backend, ConvertOptions, DType, Error, Fit, ImageLayout, ImageProcessor, Memory, Normalize,
    PixelFormat, Quantize, Tensor,
};
use reference::{Rng, quantized_reference, random_buffers, reference};

// Counts the allocations of the frame loop's thread (the CPU backend's rayon workers and
// LiteRT's own threads are not counted).
#[global_allocator]
static ALLOCATOR: common::counting_alloc::CountingAllocator =
    common::counting_alloc::CountingAllocator;

/// A YUYV camera frame of random pixels (a heap tensor, as the synthetic camera's are).
fn random_frame(w: u32, h: u32, format: PixelFormat, seed: u64) -> Tensor<u8> {
    let mut t = Tensor::<u8>::image(w, h, format, Some(Memory::Heap)).unwrap();
    let mut rng = Rng::new(seed);
    t.map_mut()
        .unwrap()
        .iter_mut()
        .for_each(|b| *b = rng.byte());
    t
}

/// The face detector's conversion: letterboxed into 128x128, values in -1..1.
fn face_options(input: &ModelInput) -> ConvertOptions {
    ConvertOptions {
        fit: Fit::Letterbox { pad: [0; 3] },
        normalize: Normalize {
            mean: [0.5; 3],
            std: [0.5; 3],
        },
        ..ConvertOptions::for_input(input)
    }
}

/// The face detector and the image layout of its input, or None (SKIPPED, or a failure
/// under CI=true) without the LiteRT library or the model.
fn face_detector(test: &str) -> Option<(Model, ImageLayout)> {
    let (env, path) = (environment(test)?, face_model(test)?);
    let model = Model::from_file(&env, &path).unwrap();
    let layout = model.inputs()[0]
        .image_input()
        .unwrap()
        .image_layout()
        .unwrap();
    Some((model, layout))
}

#[test]
fn model_description_is_read_from_the_file() {
    let test = "model_description_is_read_from_the_file";
    let (Some(env), Some(path)) = (environment(test), face_model(test)) else {
        return;
    };
    let model = Model::from_file(&env, &path).unwrap();
    assert_eq!(model.inputs().len(), 1);
    let input = &model.inputs()[0];
    assert_eq!(input.name, "input");
    assert_eq!(input.shape, [1, 128, 128, 3]);
    assert_eq!(input.element_type, ElementType::F32);
    assert_eq!(input.quantization, Quantization::None);
    assert_eq!(input.byte_len(), Some(128 * 128 * 3 * 4));
    let names: Vec<_> = model.outputs().iter().map(|o| o.name.as_str()).collect();
    assert_eq!(names, ["regressors", "classificators"]);
    assert_eq!(model.outputs()[0].shape, [1, 896, 16]);
    assert_eq!(model.outputs()[1].shape, [1, 896, 1]);
    let image = input.image_input().unwrap();
    assert_eq!((image.width, image.height, image.channels), (128, 128, 3));
    assert_eq!(image.layout, TensorLayout::Nhwc);
    assert_eq!(image.pixel_format(), PixelFormat::Rgb);
    assert_eq!((image.dtype, image.quantize), (DType::F32, None));
    assert!(env.library_path().ends_with("libLiteRt.so"));
}

/// The proof of no copy: LiteRT's input buffer is at the pin's address, the model reads
/// what was written through the pin (the same outputs as the same bytes copied into
/// LiteRT's own buffer, and different ones for a different frame), and 1,000 frames of
/// convert + run create no runtime buffer and allocate nothing on the calling thread.
#[test]
fn bound_pin_is_read_in_place_with_no_copy() {
    let test = "bound_pin_is_read_in_place_with_no_copy";
    let (Some(env), Some(path)) = (environment(test), face_model(test)) else {
        return;
    };
    let model = Model::from_file(&env, &path).unwrap();
    let input = model.inputs()[0].image_input().unwrap();
    let options = face_options(&input);
    let mut tensor =
        Tensor::<f32>::with_layout(input.image_layout().unwrap(), Some(Memory::Heap)).unwrap();
    let pin = tensor.pin_host().unwrap();
    assert!(pin.alignment() >= HOST_MEMORY_ALIGNMENT);
    let mut compiled = CompiledModel::new(&model, &[Accelerator::Cpu]).unwrap();
    assert_eq!(
        compiled.bind_input(0, &tensor).unwrap(),
        Binding::HostMemory
    );
    // LiteRT itself says where its input buffer is: at the pin.
    assert_eq!(compiled.input_host_address(0).unwrap(), pin.as_ptr());
    assert_eq!(compiled.input_binding(0), Some(Binding::HostMemory));

    // A model with LiteRT's own input buffer, filled by copying: the reference.
    let mut copied = CompiledModel::new(&model, &[Accelerator::Cpu]).unwrap();
    copied.allocate_input(0).unwrap();
    assert_ne!(copied.input_host_address(0).unwrap(), pin.as_ptr());
    assert_eq!(copied.input_binding(0), Some(Binding::RuntimeOwned));

    let mut proc = ImageProcessor::with_backend(Backend::Cpu).unwrap();
    let frames = [
        random_frame(320, 240, PixelFormat::Yuyv, 1),
        random_frame(320, 240, PixelFormat::Yuyv, 2),
    ];
    let mut outputs = Vec::new();
    for frame in &frames {
        proc.convert_with(frame, &mut tensor, &options).unwrap();
        compiled.run().unwrap();
        copied
            .input_mut::<f32>(0)
            .unwrap()
            .copy_from_slice(&tensor.map().unwrap());
        copied.run().unwrap();
        for o in 0..2 {
            let bound: &[f32] = compiled.output(o).unwrap();
            let reference: &[f32] = copied.output(o).unwrap();
            assert_eq!(
                bound, reference,
                "output {o}: the bound pin and the copy differ"
            );
        }
        outputs.push(compiled.output::<f32>(1).unwrap().to_vec());
    }
    assert_ne!(
        outputs[0], outputs[1],
        "the second frame did not reach the model"
    );

    // A write straight through the pin (no map guard, no conversion) reaches the model.
    let n = pin.len() / 4;
    // SAFETY: nothing else accesses the tensor during these writes (the processor and the
    // model are idle), and the pin covers `n` f32 elements.
    unsafe {
        let p = pin.as_mut_ptr().cast::<f32>();
        for i in 0..n {
            *p.add(i) = if i % 7 == 0 { 1.0 } else { -1.0 };
        }
    }
    compiled.run().unwrap();
    for (i, v) in copied.input_mut::<f32>(0).unwrap().iter_mut().enumerate() {
        *v = if i % 7 == 0 { 1.0 } else { -1.0 };
    }
    copied.run().unwrap();
    assert_eq!(
        compiled.output::<f32>(1).unwrap(),
        copied.output::<f32>(1).unwrap()
    );

    // Steady state: 1,000 frames of convert + run. The conversion runs on the calling
    // thread (rayon's injector allocates a queue block every few dozen jobs, which
    // tests/cpu_alloc.rs bounds separately); LiteRT's own C++ heap is not Rust's.
    proc.set_parallel(false);
    proc.convert_with(&frames[0], &mut tensor, &options)
        .unwrap();
    let before = compiled.stats();
    let warm = common::counting_alloc::thread_allocations();
    for i in 0..1000 {
        proc.convert_with(&frames[i % 2], &mut tensor, &options)
            .unwrap();
        compiled.run().unwrap();
    }
    let allocated = common::counting_alloc::thread_allocations() - warm;
    let after = compiled.stats();
    assert_eq!(after.runs, before.runs + 1000);
    assert_eq!(
        (after.buffers_created, after.buffers_destroyed),
        (before.buffers_created, before.buffers_destroyed),
        "steady state created runtime buffers"
    );
    assert_eq!(
        allocated, 0,
        "1,000 frames allocated {allocated} times on the calling thread"
    );
    assert_eq!(compiled.input_host_address(0).unwrap(), pin.as_ptr());
    // Both the input and the two outputs: 3 buffers, created once.
    assert_eq!(after.buffers_created, 3);
    assert_eq!(after.host_bindings, 1);
}

/// The binding survives the tensor: the pin keeps the memory alive while LiteRT reads it.
#[test]
fn binding_outlives_the_tensor_and_rebinding_replaces_the_buffer() {
    let test = "binding_outlives_the_tensor_and_rebinding_replaces_the_buffer";
    let Some((model, layout)) = face_detector(test) else {
        return;
    };
    let mut compiled = CompiledModel::new(&model, &[Accelerator::Cpu]).unwrap();
    let mut a = Tensor::<f32>::with_layout(layout, Some(Memory::Shm)).unwrap();
    a.map_mut().unwrap().fill(0.25);
    assert_eq!(compiled.bind_input(0, &a).unwrap(), Binding::HostMemory);
    let address = a.pin_host().unwrap().as_ptr();
    drop(a);
    compiled.run().unwrap();
    let first = compiled.output::<f32>(1).unwrap().to_vec();
    assert_eq!(compiled.input_host_address(0).unwrap(), address);

    let mut b = Tensor::<f32>::with_layout(layout, Some(Memory::Heap)).unwrap();
    b.map_mut().unwrap().fill(0.25);
    compiled.bind_input(0, &b).unwrap();
    assert_eq!(
        compiled.input_host_address(0).unwrap(),
        b.pin_host().unwrap().as_ptr()
    );
    compiled.run().unwrap();
    assert_eq!(compiled.output::<f32>(1).unwrap(), first.as_slice());
    let s = compiled.stats();
    assert_eq!(
        (s.buffers_created, s.buffers_destroyed, s.host_bindings),
        (4, 1, 2)
    );
}

/// Writes the test's own DEQUANTIZE model (quantised input, float output) and loads it.
fn dequantize_model(
    env: &Environment,
    test: &str,
    shape: &[i32],
    ty: i8,
    scale: f32,
    zero: i64,
) -> Model {
    let path = scratch_file(test, "dequantize.tflite");
    std::fs::write(&path, tflite::dequantize_model(shape, ty, scale, zero)).unwrap();
    Model::from_file(env, &path).unwrap()
}

/// A quantised model input (uint8 and int8) filled through `Quantize`, whose parameters
/// come from the model itself: the stored integers equal the f64 reference within 1, and
/// the model reads exactly them (its DEQUANTIZE output is `scale * (q - zero_point)` of
/// every element, bit for bit), on the CPU and GL backends.
#[test]
fn quantized_input_from_the_model_description() {
    let test = "quantized_input_from_the_model_description";
    let Some(env) = environment(test) else {
        return;
    };
    let half = Normalize {
        mean: [0.5; 3],
        std: [0.5; 3],
    };
    let cases = [
        // MobileNet-style uint8: x in -1..1, q = x * 128 + 128.
        (tflite::UINT8, 1.0f32 / 128.0, 128i64, half, DType::U8),
        // The common int8 input: x in 0..1, scale 1/255, zero point -128.
        (
            tflite::INT8,
            1.0 / 255.0,
            -128,
            Normalize::IDENTITY,
            DType::I8,
        ),
        // An uneven one: ImageNet statistics, a coarse step, an off-centre zero point.
        (tflite::INT8, 0.05, 7, Normalize::IMAGENET, DType::I8),
    ];
    let mut backends = vec![Backend::Cpu];
    match ImageProcessor::with_backend(Backend::Gl) {
        Ok(_) => backends.push(Backend::Gl),
        Err(e) if common::under_ci() => panic!("{test}: GL cannot start under CI: {e}"),
        Err(e) => eprintln!("{test}: GL part SKIPPED: {e}"),
    }
    let (w, h) = (37u32, 29u32);
    for (k, &(ty, scale, zero, normalize, dtype)) in cases.iter().enumerate() {
        let model = dequantize_model(&env, test, &[1, h as i32, w as i32, 3], ty, scale, zero);
        let info = &model.inputs()[0];
        assert_eq!(
            info.quantization,
            Quantization::PerTensor {
                scale,
                zero_point: zero
            }
        );
        let input = info.image_input().unwrap();
        assert_eq!(input.dtype, dtype);
        assert_eq!(
            input.quantize,
            Some(Quantize::per_tensor(scale, zero as i32))
        );
        let options = ConvertOptions {
            fit: Fit::Letterbox { pad: [114, 0, 255] },
            normalize,
            ..ConvertOptions::for_input(&input)
        };
        let src = ImageLayout::new(64, 40, PixelFormat::Nv12).unwrap();
        let mut rng = Rng::new(k as u64 + 3);
        let bufs = random_buffers(&src, &mut rng, 0);
        let mut frame = Tensor::<u8>::with_layout(src, Some(Memory::Heap)).unwrap();
        frame.map_mut().unwrap().copy_from_slice(&bufs[0]);
        let want = reference(&bufs, &src, w, h, PixelFormat::Rgb, &options);
        let want = quantized_reference(&want, &normalize, &input.quantize.unwrap(), dtype);
        for &backend in &backends {
            let mut proc = ImageProcessor::with_backend(backend).unwrap();
            let mut compiled = CompiledModel::new(&model, &[Accelerator::Cpu]).unwrap();
            let stored: Vec<f64> = match dtype {
                DType::U8 => {
                    let mut t =
                        Tensor::<u8>::with_layout(input.image_layout().unwrap(), None).unwrap();
                    compiled.bind_input(0, &t).unwrap();
                    proc.convert_with(&frame, &mut t, &options).unwrap();
                    compiled.run().unwrap();
                    t.map().unwrap().iter().map(|&q| f64::from(q)).collect()
                }
                _ => {
                    let mut t =
                        Tensor::<i8>::with_layout(input.image_layout().unwrap(), None).unwrap();
                    compiled.bind_input(0, &t).unwrap();
                    proc.convert_with(&frame, &mut t, &options).unwrap();
                    compiled.run().unwrap();
                    t.map().unwrap().iter().map(|&q| f64::from(q)).collect()
                }
            };
            // The integers pinframe stored equal the f64 reference within 1.
            let mut worst = 0.0f64;
            for (i, q) in stored.iter().enumerate() {
                worst = worst.max((q - want[i / 3][i % 3]).abs());
            }
            assert!(
                worst <= 1.0,
                "{backend:?} case {k}: quantised {worst} from the reference"
            );
            // The model read exactly those integers.
            let out: &[f32] = compiled.output(0).unwrap();
            assert_eq!(out.len(), stored.len());
            for (i, (&o, q)) in out.iter().zip(&stored).enumerate() {
                let expected = scale * (*q as f32 - zero as f32);
                assert_eq!(
                    o, expected,
                    "{backend:?} case {k} element {i}: model read {o}"
                );
            }
            eprintln!("{backend:?} case {k}: max |q - reference| = {worst}");
        }
    }
}

#[test]
fn mismatched_bindings_say_what_the_model_expects() {
    let test = "mismatched_bindings_say_what_the_model_expects";
    let (Some(env), Some(path)) = (environment(test), face_model(test)) else {
        return;
    };
    let model = Model::from_file(&env, &path).unwrap();
    let mut compiled = CompiledModel::new(&model, &[Accelerator::Cpu]).unwrap();
    let err = |e: Error| e.to_string();
    // Running with nothing bound.
    let e = err(compiled.run().unwrap_err());
    assert!(e.contains("input 0") && e.contains("not bound"), "{e}");
    // Wrong element type.
    let t = Tensor::<u8>::image(128, 128, PixelFormat::Rgb, Some(Memory::Heap)).unwrap();
    let e = compiled.bind_input(0, &t).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
    let e = err(e);
    assert!(
        e.contains("f32") && e.contains("[1, 128, 128, 3]") && e.contains("u8"),
        "{e}"
    );
    // Wrong size, and the planar layout of the right size.
    for (w, h, f) in [
        (96, 128, PixelFormat::Rgb),
        (128, 128, PixelFormat::PlanarRgb),
    ] {
        let t = Tensor::<f32>::image(w, h, f, Some(Memory::Heap)).unwrap();
        let e = err(compiled.bind_input(0, &t).unwrap_err());
        assert!(
            e.contains("[1, 128, 128, 3]") && e.contains("NHWC 128x128 rgb"),
            "{e}"
        );
    }
    // Padded rows of the right shape.
    let padded =
        ImageLayout::with_stride(128, 128, PixelFormat::Rgb, DType::F32, 128 * 12 + 64).unwrap();
    let t = Tensor::<f32>::with_layout(padded, Some(Memory::Heap)).unwrap();
    let e = err(compiled.bind_input(0, &t).unwrap_err());
    assert!(e.contains("dense") && e.contains("padded"), "{e}");
    // A flat tensor of the right length but the wrong shape.
    let t = Tensor::<f32>::new(&[128 * 128 * 3], Some(Memory::Heap)).unwrap();
    assert!(err(compiled.bind_input(0, &t).unwrap_err()).contains("shape"));
    // A plain tensor of the model's shape binds (images are not required).
    let t = Tensor::<f32>::new(&[1, 128, 128, 3], Some(Memory::Heap)).unwrap();
    assert_eq!(compiled.bind_input(0, &t).unwrap(), Binding::HostMemory);
    compiled.run().unwrap();
    // Indices and output types.
    assert!(err(compiled.bind_input(1, &t).unwrap_err()).contains("has 1 input"));
    assert!(err(compiled.output::<f32>(2).map(|_| ()).unwrap_err()).contains("has 2 output"));
    assert!(err(compiled.output::<u8>(0).map(|_| ()).unwrap_err()).contains("f32"));
    assert!(err(compiled.input_mut::<f32>(0).map(|_| ()).unwrap_err()).contains("allocate_input"));
    // Nothing was created for the refused bindings.
    assert_eq!(compiled.stats().buffers_created, 3);
}

#[test]
fn missing_library_files_and_symbols_are_clear_errors() {
    let test = "missing_library_files_and_symbols_are_clear_errors";
    // A library that is not there.
    let e = Environment::with_library("/nonexistent/libLiteRt.so").unwrap_err();
    assert!(matches!(e, Error::RuntimeUnavailable { .. }), "{e:?}");
    assert!(e.to_string().contains("/nonexistent/libLiteRt.so"), "{e}");
    // A library without LiteRT's functions: the first missing one is named, with the file.
    let libm = [
        "/lib/x86_64-linux-gnu/libm.so.6",
        "/usr/lib/x86_64-linux-gnu/libm.so.6",
        "/lib/aarch64-linux-gnu/libm.so.6",
    ]
    .into_iter()
    .find(|p| std::path::Path::new(p).exists());
    if let Some(libm) = libm {
        let e = Environment::with_library(libm).unwrap_err().to_string();
        assert!(
            e.contains("LiteRtCreateEnvironment") && e.contains(libm),
            "{e}"
        );
    }
    let Some(env) = environment(test) else {
        return;
    };
    // Files that are not models.
    let e = Model::from_file(&env, "/nonexistent.tflite")
        .unwrap_err()
        .to_string();
    assert!(e.contains("/nonexistent.tflite"), "{e}");
    let junk = scratch_file(test, "junk.tflite");
    std::fs::write(&junk, b"this is not a flatbuffer").unwrap();
    let e = Model::from_file(&env, &junk).unwrap_err();
    assert!(
        matches!(
            e,
            Error::Runtime {
                call: "LiteRtCreateModelFromFile",
                ..
            }
        ),
        "{e:?}"
    );
    assert!(e.to_string().contains("junk.tflite"), "{e}");
    // Compiling for no accelerator at all.
    let tiny = dequantize_model(&env, test, &[1, 2, 2, 3], tflite::UINT8, 0.5, 0);
    let e = CompiledModel::new(&tiny, &[]).unwrap_err().to_string();
    assert!(e.contains("Accelerator::Cpu"), "{e}");
}

#[test]
fn a_run_and_the_writers_of_its_bound_input_exclude_each_other() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::{Duration, Instant};
    let test = "a_run_and_the_writers_of_its_bound_input_exclude_each_other";
    let Some((model, layout)) = face_detector(test) else {
        return;
    };
    let mut compiled = CompiledModel::new(&model, &[Accelerator::Cpu]).unwrap();
    let mut input = Tensor::<f32>::with_layout(layout, Some(Memory::Shm)).unwrap();
    compiled.bind_input(0, &input).unwrap();
    let pin = input.pin_host().unwrap();

    // A run does not start under a writer: it waits for the map_mut guard to drop.
    let guard = input.map_mut().unwrap();
    let ran = Arc::new(AtomicBool::new(false));
    let runner = {
        let ran = ran.clone();
        std::thread::spawn(move || {
            compiled.run().unwrap();
            ran.store(true, Ordering::SeqCst);
            compiled
        })
    };
    std::thread::sleep(Duration::from_millis(100));
    assert!(
        !ran.load(Ordering::SeqCst),
        "a run read its input under map_mut"
    );
    drop(guard);
    let mut compiled = runner.join().unwrap();
    assert_eq!(pin.readers(), 0, "the run left its read hold behind");

    // Runs hold their input for their whole length: a thread watching the pin sees a
    // reader while runs go on (observed, or a generous bound for hang detection).
    let stop = Arc::new(AtomicBool::new(false));
    let runner = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                compiled.run().unwrap();
            }
            compiled
        })
    };
    let start = Instant::now();
    while pin.readers() == 0 {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "no run held its bound input in 120 s"
        );
        std::hint::spin_loop();
    }
    // And a conversion into the input meanwhile waits its turn and lands whole.
    let frame = random_frame(640, 480, PixelFormat::Yuyv, 5);
    let mut proc = ImageProcessor::with_backend(Backend::Cpu).unwrap();
    proc.convert(&frame, &mut input).unwrap();
    stop.store(true, Ordering::SeqCst);
    let mut compiled = runner.join().unwrap();
    assert_eq!(pin.readers(), 0);

    // A run on the thread that holds a writer of its input would wait for itself: refused.
    let guard = input.map_mut().unwrap();
    let e = compiled.run().unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    drop(guard);
    compiled.run().unwrap();
}

#[test]
fn a_failed_step_after_a_buffer_creation_destroys_the_buffer() {
    use pinframe::runtime::litert::fail_after_next_buffer_creation;
    let test = "a_failed_step_after_a_buffer_creation_destroys_the_buffer";
    let Some((model, layout)) = face_detector(test) else {
        return;
    };
    let mut compiled = CompiledModel::new(&model, &[Accelerator::Cpu]).unwrap();
    let outputs = model.outputs().len() as u64;
    let live = |c: &CompiledModel| {
        let s = c.stats();
        s.buffers_created - s.buffers_destroyed
    };
    assert_eq!(live(&compiled), outputs);
    let input = Tensor::<f32>::with_layout(layout, Some(Memory::Heap)).unwrap();

    fail_after_next_buffer_creation();
    let e = compiled.bind_input(0, &input).unwrap_err();
    assert!(e.to_string().contains("failure injected"), "{e}");
    assert_eq!(
        live(&compiled),
        outputs,
        "bind_input's failed path kept its buffer"
    );
    assert!(compiled.input_binding(0).is_none());

    fail_after_next_buffer_creation();
    let e = compiled.allocate_input(0).unwrap_err();
    assert!(e.to_string().contains("failure injected"), "{e}");
    assert_eq!(
        live(&compiled),
        outputs,
        "allocate_input's failed path kept its buffer"
    );

    // The model still works, and rebinding destroys what it replaces.
    compiled.bind_input(0, &input).unwrap();
    compiled.bind_input(0, &input).unwrap();
    assert_eq!(live(&compiled), outputs + 1);
    compiled.run().unwrap();
    let s = compiled.stats();
    assert_eq!((s.buffers_created, s.buffers_destroyed), (outputs + 4, 3));
}

/// A batched model input (`[4, H, W, 3]` uint8) bound once to a batch tensor: each
/// `convert_batch` fills it in place and the model reads every slice (its DEQUANTIZE
/// output equals `scale * q` of each element of each slice), batch after batch.
#[test]
fn a_batched_input_is_bound_once_to_a_batch_tensor() {
    let test = "a_batched_input_is_bound_once_to_a_batch_tensor";
    let Some(env) = environment(test) else {
        return;
    };
    let (n, w, h) = (4usize, 48u32, 40u32);
    let scale = 1.0f32 / 255.0;
    let model = dequantize_model(
        &env,
        test,
        &[n as i32, h as i32, w as i32, 3],
        tflite::UINT8,
        scale,
        0,
    );
    let mut compiled = CompiledModel::new(&model, &[Accelerator::Cpu]).unwrap();
    let mut batch =
        Tensor::<u8>::image_batch(n, w, h, PixelFormat::Rgb, Some(Memory::Shm)).unwrap();
    compiled.bind_input(0, &batch).unwrap();
    let src = ImageLayout::new(320, 240, PixelFormat::Nv12).unwrap();
    let bufs = random_buffers(&src, &mut Rng::new(11), 0);
    let mut frame = Tensor::<u8>::with_layout(src, Some(Memory::Heap)).unwrap();
    frame.map_mut().unwrap().copy_from_slice(&bufs[0]);
    let mut proc = ImageProcessor::with_backend(Backend::Cpu).unwrap();
    for round in 0..3u32 {
        let items: Vec<pinframe::BatchItem<'_>> = (0..n as u32)
            .map(|i| {
                pinframe::BatchItem::tensor(&frame).with_crop(pinframe::Crop::new(
                    20 * i + 7 * round,
                    10 * i,
                    120,
                    100,
                ))
            })
            .collect();
        proc.convert_batch(&items, &mut batch, &ConvertOptions::default())
            .unwrap();
        compiled.run().unwrap();
        let stored: Vec<u8> = batch.map().unwrap().to_vec();
        let out: &[f32] = compiled.output(0).unwrap();
        assert_eq!(out.len(), n * (w * h * 3) as usize);
        for (k, (&o, &q)) in out.iter().zip(&stored).enumerate() {
            assert_eq!(
                o,
                scale * f32::from(q),
                "round {round}: slice {} element {}: the model read {o}",
                k / (w * h * 3) as usize,
                k % (w * h * 3) as usize
            );
        }
        // Each slice is its own crop (the slices differ).
        let slice = (w * h * 3) as usize;
        assert_ne!(stored[..slice], stored[slice..2 * slice]);
    }
}

/// A model exported for one image (`[1, H, W, 3]` uint8 → DEQUANTIZE) resized to a batch
/// of 3: LiteRT reports the new input and output shapes, the outputs are reallocated at
/// the new size, the earlier binding is dropped (a run without a new one is refused),
/// and the batch tensor bound once is read slice by slice, batch after batch.
#[test]
fn a_model_for_one_image_is_resized_to_a_batch() {
    let test = "a_model_for_one_image_is_resized_to_a_batch";
    let Some(env) = environment(test) else {
        return;
    };
    let (n, w, h) = (3usize, 40u32, 32u32);
    let scale = 1.0f32 / 255.0;
    let model = dequantize_model(
        &env,
        test,
        &[1, h as i32, w as i32, 3],
        tflite::UINT8,
        scale,
        0,
    );
    let mut compiled = CompiledModel::new(&model, &[Accelerator::Cpu]).unwrap();
    let err = |e: Error| e.to_string();
    // Bad shapes are refused before LiteRT is asked.
    let e = err(compiled
        .resize_input(0, &[n, h as usize, w as usize])
        .unwrap_err());
    assert!(e.contains("rank 4") && e.contains("rank 3"), "{e}");
    let e = err(compiled
        .resize_input(0, &[0, h as usize, w as usize, 3])
        .unwrap_err());
    assert!(e.contains("every dimension"), "{e}");
    assert!(err(compiled.resize_input(1, &[n]).unwrap_err()).contains("has 1 input"));
    // The current shape: nothing happens.
    let single = Tensor::<u8>::image(w, h, PixelFormat::Rgb, Some(Memory::Heap)).unwrap();
    compiled.bind_input(0, &single).unwrap();
    let before = compiled.stats();
    compiled
        .resize_input(0, &[1, h as usize, w as usize, 3])
        .unwrap();
    assert_eq!(compiled.stats(), before);
    assert_eq!(compiled.input_binding(0), Some(Binding::HostMemory));

    compiled
        .resize_input(0, &[n, h as usize, w as usize, 3])
        .unwrap();
    let batch_shape = [n as i64, i64::from(h), i64::from(w), 3];
    assert_eq!(compiled.inputs()[0].shape, batch_shape);
    assert_eq!(compiled.outputs()[0].shape, batch_shape);
    assert_eq!(compiled.outputs()[0].element_type, ElementType::F32);
    // The model keeps the file's description.
    assert_eq!(model.inputs()[0].shape, [1, i64::from(h), i64::from(w), 3]);
    // The old binding went with the old shape (its buffer destroyed, and the output's
    // replaced by one of the new size).
    assert_eq!(compiled.input_binding(0), None);
    let e = err(compiled.run().unwrap_err());
    assert!(
        e.contains("not bound") && e.contains("[3, 32, 40, 3]"),
        "{e}"
    );
    let s = compiled.stats();
    assert_eq!(
        (s.buffers_created, s.buffers_destroyed),
        (before.buffers_created + 1, before.buffers_destroyed + 2)
    );
    // The single image no longer fits; the batch does, once.
    let e = err(compiled.bind_input(0, &single).unwrap_err());
    assert!(e.contains("[3, 32, 40, 3]"), "{e}");
    let mut batch =
        Tensor::<u8>::image_batch(n, w, h, PixelFormat::Rgb, Some(Memory::Heap)).unwrap();
    assert_eq!(compiled.bind_input(0, &batch).unwrap(), Binding::HostMemory);
    let pin = batch.pin_host().unwrap();
    assert_eq!(compiled.input_host_address(0).unwrap(), pin.as_ptr());
    let bound = compiled.stats();

    let src = ImageLayout::new(320, 240, PixelFormat::Yuyv).unwrap();
    let bufs = random_buffers(&src, &mut Rng::new(23), 0);
    let mut frame = Tensor::<u8>::with_layout(src, Some(Memory::Heap)).unwrap();
    frame.map_mut().unwrap().copy_from_slice(&bufs[0]);
    let mut proc = ImageProcessor::with_backend(Backend::Cpu).unwrap();
    let slice = (w * h * 3) as usize;
    for round in 0..3u32 {
        let items: Vec<pinframe::BatchItem<'_>> = (0..n as u32)
            .map(|i| {
                pinframe::BatchItem::tensor(&frame).with_crop(pinframe::Crop::new(
                    30 * i + 11 * round,
                    20 * i,
                    100,
                    80,
                ))
            })
            .collect();
        proc.convert_batch(&items, &mut batch, &ConvertOptions::default())
            .unwrap();
        compiled.run().unwrap();
        let stored: Vec<u8> = batch.map().unwrap().to_vec();
        let out: &[f32] = compiled.output(0).unwrap();
        assert_eq!(out.len(), n * slice);
        for (k, (&o, &q)) in out.iter().zip(&stored).enumerate() {
            assert_eq!(
                o,
                scale * f32::from(q),
                "round {round}: slice {} element {}",
                k / slice,
                k % slice
            );
        }
        assert_ne!(stored[slice..2 * slice], stored[2 * slice..]);
    }
    // Three batches: three runs, nothing bound or created again.
    let s = compiled.stats();
    assert_eq!(s.runs, bound.runs + 3);
    assert_eq!(
        (s.buffers_created, s.host_bindings),
        (bound.buffers_created, bound.host_bindings)
    );

    // The same model for two images, bound to the first two slices of the same batch:
    // it reads exactly those, from the batch's own address.
    let mut two = CompiledModel::new(&model, &[Accelerator::Cpu]).unwrap();
    two.resize_input(0, &[2, h as usize, w as usize, 3])
        .unwrap();
    for bad in [0, n + 1] {
        let e = err(two.bind_input_slices(0, &batch, bad).unwrap_err());
        assert!(e.contains("holds 3 slice(s)"), "{e}");
    }
    let e = err(two.bind_input_slices(0, &batch, 3).unwrap_err());
    assert!(
        e.contains("[2, 32, 40, 3]") && e.contains("[3, 32, 40, 3]"),
        "{e}"
    );
    let e = err(two.bind_input(0, &batch).unwrap_err());
    assert!(e.contains("[2, 32, 40, 3]"), "{e}");
    assert_eq!(
        two.bind_input_slices(0, &batch, 2).unwrap(),
        Binding::HostMemory
    );
    assert_eq!(two.input_host_address(0).unwrap(), pin.as_ptr());
    compiled.run().unwrap();
    two.run().unwrap();
    let stored: Vec<u8> = batch.map().unwrap().to_vec();
    let out: &[f32] = two.output(0).unwrap();
    assert_eq!(out.len(), 2 * slice);
    assert!(
        out.iter()
            .zip(&stored)
            .all(|(&o, &q)| o == scale * f32::from(q))
    );
    assert_eq!(out, &compiled.output::<f32>(0).unwrap()[..2 * slice]);
    assert_eq!(two.stats().host_bindings, 1);
}

/// The whole two-stage path on a photograph: the face detector finds the face in a YUYV
/// camera frame; its box becomes square crops (the stage's 1.5 margin, and a tighter 1.2
/// one, so the batch of 3 holds two faces and one slice stays unused); one
/// `convert_batch` fills the batch tensor; the face mesh model for two faces (resized to
/// 2 and bound once to the first two slices) runs once and gives both crops' 468
/// landmarks, mapped back to camera pixels. Each slice holds exactly the
/// bytes of a single `convert_with` of its crop, each item's landmarks equal a run of the
/// model as shipped (batch 1) on that single conversion, the landmarks lie on the face
/// (eyes above the mouth, every point inside the detection box grown by the margin), and
/// three frames bind nothing again.
#[cfg(feature = "cli")]
#[test]
fn landmarks_of_every_face_come_from_one_batch_bound_once() {
    use common::litert::{astronaut, landmark_model};
    use face_landmark::{LANDMARKS, LandmarkStage};
    use pinframe::convert::regions::{self, DetectionBox, RegionAspect};

    let test = "landmarks_of_every_face_come_from_one_batch_bound_once";
    let (Some(env), Some(detector_path), Some(mesh_path), Some(photo)) = (
        environment(test),
        face_model(test),
        landmark_model(test),
        astronaut(test),
    ) else {
        return;
    };
    let rgb = image::open(&photo).unwrap().to_rgb8();
    let (fw, fh) = (512u32, 384u32);
    let (layout, bytes) = yuv::encode(&rgb, fw, fh, PixelFormat::Yuyv);
    let mut frame = Tensor::<u8>::with_layout(layout, Some(Memory::Heap)).unwrap();
    frame.map_mut().unwrap().copy_from_slice(&bytes);
    let mut proc = ImageProcessor::with_backend(Backend::Cpu).unwrap();

    // Stage one: the detector, its input bound once.
    let detector_model = Model::from_file(&env, &detector_path).unwrap();
    let det_input = detector_model.inputs()[0].image_input().unwrap();
    let det_options = face_options(&det_input);
    let mut det_tensor =
        Tensor::<f32>::with_layout(det_input.image_layout().unwrap(), Some(Memory::Heap)).unwrap();
    let mut detector = CompiledModel::new(&detector_model, &[Accelerator::Cpu]).unwrap();
    detector.bind_input(0, &det_tensor).unwrap();
    let anchors = blazeface::anchors();
    let (mut scratch, mut found) = (Vec::new(), Vec::new());

    // Stage two: the mesh model resized to a batch of 3, the batch bound once.
    let mesh_model = Model::from_file(&env, &mesh_path).unwrap();
    let mut stage = LandmarkStage::new(&mesh_model, 3, Memory::Heap).unwrap();
    assert_eq!(stage.compiled.len(), 3);
    for (k, compiled) in (1..).zip(&stage.compiled) {
        assert_eq!(compiled.inputs()[0].shape, [k, 192, 192, 3]);
        assert_eq!(
            compiled.outputs()[0].element_count(),
            Some(k as usize * 1404)
        );
        assert_eq!(compiled.outputs()[1].element_count(), Some(k as usize));
    }
    let pin = stage.batch.pin_host().unwrap();
    // Every batch size's model reads the one batch tensor, from its first slice.
    for compiled in &stage.compiled {
        assert_eq!(compiled.input_host_address(0).unwrap(), pin.as_ptr());
    }
    let set_up: Vec<_> = stage.compiled.iter().map(|c| c.stats()).collect();
    assert!(set_up.iter().all(|s| s.host_bindings == 1 && s.runs == 0));

    // The reference: the model as shipped (batch 1) on a single conversion.
    let mut single_mesh = CompiledModel::new(&mesh_model, &[Accelerator::Cpu]).unwrap();
    let mut single = Tensor::<f32>::image(192, 192, PixelFormat::Rgb, Some(Memory::Heap)).unwrap();
    single_mesh.bind_input(0, &single).unwrap();

    let mut faces = Vec::new();
    let mut worst_vs_single = 0.0f32;
    let frames = 3;
    for frame_no in 0..frames {
        let det_info = proc
            .convert_with(&frame, &mut det_tensor, &det_options)
            .unwrap();
        detector.run().unwrap();
        blazeface::decode(
            &anchors,
            detector.output(0).unwrap(),
            detector.output(1).unwrap(),
            &mut scratch,
            &mut found,
        );
        assert_eq!(found.len(), 1, "frame {frame_no}: {found:?}");
        let b = found[0].bbox.map(f64::from);
        let face = regions::box_to_source(&det_info, DetectionBox::new(b[0], b[1], b[2], b[3]));
        let mut crops = stage.crops(&[face], fw, fh).unwrap();
        crops.push(regions::crop_for_box(face, fw, fh, 1.2, RegionAspect::Square).unwrap());
        assert_eq!(crops[0].width, crops[0].height);
        let infos = stage.convert(&mut proc, &frame, &crops).unwrap();
        stage.infer().unwrap();
        stage.decode(&crops, &infos, &mut faces).unwrap();
        assert_eq!(faces.len(), 2);

        let slice_len = 192 * 192 * 3;
        let batch_values: Vec<f32> = stage.batch.map().unwrap().to_vec();
        let batched_points: Vec<f32> = stage.current().unwrap().output::<f32>(0).unwrap().to_vec();
        assert_eq!(batched_points.len(), 2 * LANDMARKS * 3);
        for (i, landmarks) in faces.iter().enumerate() {
            // The slice is exactly a single conversion of its crop.
            let options = ConvertOptions {
                crop: Some(crops[i]),
                ..stage.options
            };
            let single_info = proc.convert_with(&frame, &mut single, &options).unwrap();
            assert_eq!(single_info, infos[i], "item {i}");
            let want = single.map().unwrap();
            let got = &batch_values[i * slice_len..(i + 1) * slice_len];
            assert!(
                got.iter()
                    .zip(want.iter())
                    .all(|(a, b)| a.to_bits() == b.to_bits()),
                "frame {frame_no}: slice {i} differs from the single conversion of {:?}",
                crops[i]
            );
            drop(want);
            // The batched run answers each item as the model as shipped does.
            single_mesh.run().unwrap();
            let alone: &[f32] = single_mesh.output(0).unwrap();
            let batched = &batched_points[i * LANDMARKS * 3..(i + 1) * LANDMARKS * 3];
            let worst = alone
                .iter()
                .zip(batched)
                .map(|(a, b)| (a - b).abs())
                .fold(0.0f32, f32::max);
            assert!(
                worst <= 1e-3,
                "frame {frame_no} item {i}: batched landmarks differ from a single run by \
                 {worst} input px"
            );
            worst_vs_single = worst_vs_single.max(worst);

            // On the face: present, eyes level and above the mouth, above the chin.
            assert!(landmarks.presence > 0.9, "item {i}: {}", landmarks.presence);
            let p = |k: usize| landmarks.points[k];
            let (right_eye, left_eye) = (
                p(face_landmark::RIGHT_EYE_OUTER),
                p(face_landmark::LEFT_EYE_OUTER),
            );
            let mouth = [
                (p(face_landmark::UPPER_LIP)[0] + p(face_landmark::LOWER_LIP)[0]) / 2.0,
                (p(face_landmark::UPPER_LIP)[1] + p(face_landmark::LOWER_LIP)[1]) / 2.0,
            ];
            let (nose, chin) = (p(face_landmark::NOSE_TIP), p(face_landmark::CHIN));
            assert!(
                right_eye[0] < left_eye[0],
                "item {i}: {right_eye:?} {left_eye:?}"
            );
            assert!((right_eye[1] - left_eye[1]).abs() < 20.0);
            for eye in [right_eye, left_eye] {
                assert!(
                    eye[1] + 15.0 < mouth[1],
                    "item {i}: eye {eye:?} mouth {mouth:?}"
                );
            }
            assert!(nose[1] < mouth[1] && mouth[1] < chin[1], "item {i}");
            assert!(
                right_eye[0] < mouth[0] && mouth[0] < left_eye[0],
                "item {i}"
            );
            // The eyes, nose and mouth inside the detection box; every point inside the
            // box grown by the stage's margin.
            for q in [right_eye, left_eye, nose, mouth] {
                assert!(
                    q[0] > face.x0 && q[0] < face.x1 && q[1] > face.y0 && q[1] < face.y1,
                    "item {i}: {q:?} outside the detection {face:?}"
                );
            }
            let (cx, cy) = ((face.x0 + face.x1) / 2.0, (face.y0 + face.y1) / 2.0);
            let (hw, hh) = (
                (face.x1 - face.x0) * face_landmark::MARGIN / 2.0,
                (face.y1 - face.y0) * face_landmark::MARGIN / 2.0,
            );
            for (k, q) in landmarks.points.iter().enumerate() {
                assert!(
                    (q[0] - cx).abs() < hw && (q[1] - cy).abs() < hh,
                    "item {i}: landmark {k} at {q:?} is outside the detection {face:?} grown \
                     by {}",
                    face_landmark::MARGIN
                );
            }
        }
        // The two crops of one face agree on where it is (within 3% of its width).
        let tolerance = 0.03 * (face.x1 - face.x0);
        for k in [
            face_landmark::RIGHT_EYE_OUTER,
            face_landmark::LEFT_EYE_OUTER,
            face_landmark::NOSE_TIP,
        ] {
            let (a, b) = (faces[0].points[k], faces[1].points[k]);
            assert!(
                (a[0] - b[0]).abs() < tolerance && (a[1] - b[1]).abs() < tolerance,
                "landmark {k}: {a:?} vs {b:?}"
            );
        }
        if frame_no == 0 {
            eprintln!(
                "{test}: face {face:.1?}, crops {crops:?}, presence {:.3}/{:.3}, eyes {:.1?} \
                 {:.1?}, nose {:.1?}",
                faces[0].presence,
                faces[1].presence,
                faces[0].points[face_landmark::RIGHT_EYE_OUTER],
                faces[0].points[face_landmark::LEFT_EYE_OUTER],
                faces[0].points[face_landmark::NOSE_TIP],
            );
        }
    }
    eprintln!("{test}: batched vs single runs: largest landmark difference {worst_vs_single} px");
    // Every frame ran the two-face model once on the binding made at set-up: no
    // rebinding, no buffer created, LiteRT still reading the batch's pin; the other
    // batch sizes did not run.
    for (k, (compiled, before)) in (1..).zip(stage.compiled.iter().zip(&set_up)) {
        let s = compiled.stats();
        assert_eq!(s.runs, if k == 2 { frames } else { 0 }, "batch of {k}");
        assert_eq!(
            (s.host_bindings, s.buffers_created, s.buffers_destroyed),
            (
                before.host_bindings,
                before.buffers_created,
                before.buffers_destroyed
            ),
            "batch of {k}"
        );
        assert_eq!(compiled.input_host_address(0).unwrap(), pin.as_ptr());
    }
}
