//! Steady-state conversions allocate nothing: a counting global allocator proves it.
//! (One test in this file, so no other test's allocations are counted.)

mod common;

use pinframe::{
    Backend, ConvertOptions, Fit, ImageProcessor, Memory, Normalize, PixelFormat, Rotation, Tensor,
};

use common::counting_alloc::{CountingAllocator, allocations};

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

fn allocations_during(frames: usize, mut f: impl FnMut()) -> u64 {
    let before = allocations();
    for _ in 0..frames {
        f();
    }
    allocations() - before
}

#[test]
fn steady_state_conversions_do_not_allocate() {
    let mut src = Tensor::<u8>::image(640, 480, PixelFormat::Yuyv, Some(Memory::Heap)).unwrap();
    for (i, b) in src.map_mut().unwrap().iter_mut().enumerate() {
        *b = (i * 7 % 251) as u8;
    }
    let mut planar =
        Tensor::<f32>::image(320, 320, PixelFormat::PlanarRgb, Some(Memory::Heap)).unwrap();
    let mut packed = Tensor::<u8>::image(320, 320, PixelFormat::Rgb, Some(Memory::Heap)).unwrap();
    let letterbox = ConvertOptions {
        fit: Fit::Letterbox { pad: [114; 3] },
        normalize: Normalize::IMAGENET,
        ..Default::default()
    };
    let rotated = ConvertOptions {
        rotation: Rotation::R90,
        ..Default::default()
    };
    let mut proc = ImageProcessor::with_backend(Backend::Cpu).unwrap();

    // On the calling thread: nothing at all once the scratch buffers have grown.
    proc.set_parallel(false);
    let mut frame = |proc: &mut ImageProcessor| {
        proc.convert_with(&src, &mut planar, &letterbox).unwrap();
        proc.convert_with(&src, &mut packed, &rotated).unwrap();
    };
    frame(&mut proc);
    assert_eq!(allocations_during(50, || frame(&mut proc)), 0);

    // On the rayon pool: the kernel allocates nothing; rayon's job queue allocates a
    // new block every few dozen injected jobs, so allow far less than one per frame.
    proc.set_parallel(true);
    frame(&mut proc);
    let n = allocations_during(200, || frame(&mut proc));
    eprintln!("{n} allocations in 200 parallel frames (400 conversions)");
    assert!(n <= 400 / 32, "{n} allocations in 200 parallel frames");
    assert_eq!(proc.stats().frames, 2 * 252);
}
