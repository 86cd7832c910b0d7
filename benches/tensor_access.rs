//! Per-frame CPU access to a 640x640x3 u8 tensor: a map guard per frame, a persistent
//! pin bracketed by sync calls, and (for fd-backed memory) a fresh import + mmap + munmap
//! per frame, the naive alternative a pin avoids. Each access touches every 4 KiB page
//! (read and write one byte), so fault and sync costs show instead of memory bandwidth.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use pinframe::{Access, ImageLayout, Memory, PixelFormat, Tensor};

const W: u32 = 640;
const H: u32 = 640;
const PAGE: usize = 4096;

fn touch(bytes: &mut [u8]) -> u64 {
    let mut sum = 0u64;
    for i in (0..bytes.len()).step_by(PAGE) {
        sum += u64::from(bytes[i]);
        bytes[i] = bytes[i].wrapping_add(1);
    }
    sum
}

fn bench_memory(c: &mut Criterion, memory: Memory) {
    let mut t = match Tensor::<u8>::image(W, H, PixelFormat::Rgb, Some(memory)) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("skipping {memory} memory: {e}");
            return;
        }
    };
    let mut g = c.benchmark_group(format!("access_640x640x3/{memory}"));
    g.bench_function("map_guard_per_frame", |b| {
        b.iter(|| {
            let mut m = t.map_mut().unwrap();
            black_box(touch(&mut m));
        })
    });
    let pin = t.pin_host().unwrap();
    g.bench_function("pinned_with_sync_brackets", |b| {
        b.iter(|| {
            t.sync_for_cpu(Access::ReadWrite).unwrap();
            // SAFETY: no guard of `t` is alive; this loop is the only accessor.
            let bytes = unsafe { std::slice::from_raw_parts_mut(pin.as_mut_ptr(), pin.len()) };
            black_box(touch(bytes));
            t.sync_for_device(Access::ReadWrite).unwrap();
        })
    });
    if let Some(fd) = t.fd() {
        let layout = ImageLayout::new(W, H, PixelFormat::Rgb).unwrap();
        g.bench_function("import_mmap_munmap_per_frame", |b| {
            b.iter(|| {
                // SAFETY: `t` has no guard alive while `fresh`'s guard is, and nothing else
                // holds the buffer.
                let mut fresh = unsafe { Tensor::<u8>::import(fd, layout) }.unwrap();
                let mut m = fresh.map_mut().unwrap();
                black_box(touch(&mut m));
            })
        });
    }
    g.finish();
}

fn benches(c: &mut Criterion) {
    for memory in [Memory::Heap, Memory::Shm, Memory::Dma] {
        bench_memory(c, memory);
    }
}

criterion_group! {
    name = tensor_access;
    config = Criterion::default()
        .sample_size(30)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = benches
}
criterion_main!(tensor_access);
