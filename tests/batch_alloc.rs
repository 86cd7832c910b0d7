//! A steady-state batch allocates only its bookkeeping, never pixel-sized memory: a
//! counting global allocator proves it. (One test in this file, so no other test's
//! allocations are counted.)

mod common;

use common::counting_alloc::{CountingAllocator, allocations};
use pinframe::{
    Backend, ConvertOptions, Fit, ImageProcessor, Memory, Normalize, PixelFormat, Tensor,
};

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

fn allocations_during(frames: usize, mut f: impl FnMut()) -> u64 {
    let before = allocations();
    for _ in 0..frames {
        f();
    }
    allocations() - before
}

/// A steady-state batch allocates its bookkeeping (the plans, the list of results) and
/// nothing for its pixels: the same few allocations every batch, however large the
/// images, none of them the size of an image.
#[test]
fn steady_state_batches_allocate_only_their_bookkeeping() {
    use common::counting_alloc::live_bytes;
    use pinframe::{BatchItem, Crop};
    let frame = Tensor::<u8>::image(1280, 720, PixelFormat::Nv12, Some(Memory::Heap)).unwrap();
    let items: Vec<BatchItem<'_>> = (0..16u32)
        .map(|i| BatchItem::tensor(&frame).with_crop(Crop::new(60 * i, 30 * i, 200, 160)))
        .collect();
    let mut batch =
        Tensor::<f32>::image_batch(16, 224, 224, PixelFormat::PlanarRgb, Some(Memory::Heap))
            .unwrap();
    let options = ConvertOptions {
        fit: Fit::Letterbox { pad: [114; 3] },
        normalize: Normalize::IMAGENET,
        ..Default::default()
    };
    let mut proc = ImageProcessor::with_backend(Backend::Cpu).unwrap();
    proc.set_parallel(false);
    proc.convert_batch(&items, &mut batch, &options).unwrap();
    let counts: Vec<u64> = (0..5)
        .map(|_| {
            allocations_during(1, || {
                proc.convert_batch(&items, &mut batch, &options).unwrap();
            })
        })
        .collect();
    eprintln!("allocations per steady-state batch of 16: {counts:?}");
    // The plans, the mappings, the source slices, the jobs and the results: one list
    // each, whatever the number of items or their size.
    assert!(
        counts.iter().all(|&c| c == counts[0] && c <= 6),
        "{counts:?}"
    );
    let live = live_bytes();
    for _ in 0..20 {
        proc.convert_batch(&items, &mut batch, &options).unwrap();
    }
    assert_eq!(live_bytes(), live, "a steady-state batch kept memory");
}
