//! The CPU-mapping guard's cost per hold: `cpu_mapping_shared()` (taken by every `map()`,
//! `pin_host()` and unmap) against the `std::sync::RwLock` read lock the guard was before
//! it kept a per-thread record and went through a table of `extern "C"` functions (the
//! baseline, measured in the same run), and a `map()` of a mapped memfd tensor.

use std::hint::black_box;
use std::sync::RwLock;

use criterion::{Criterion, criterion_group, criterion_main};
use pinframe::{Memory, Tensor, cpu_mapping_shared, with_cpu_mappings_excluded};

fn guard(c: &mut Criterion) {
    let mut g = c.benchmark_group("cpu_mapping_guard");
    static BASELINE: RwLock<()> = RwLock::new(());
    g.bench_function("baseline_std_rwlock_read", |b| {
        b.iter(|| drop(black_box(BASELINE.read().unwrap())))
    });
    g.bench_function("shared_hold", |b| {
        b.iter(|| drop(black_box(cpu_mapping_shared())))
    });
    g.bench_function("nested_shared_hold", |b| {
        let _outer = cpu_mapping_shared();
        b.iter(|| drop(black_box(cpu_mapping_shared())))
    });
    g.bench_function("exclusive_section", |b| {
        b.iter(|| with_cpu_mappings_excluded(|| black_box(1)))
    });
    let t = Tensor::<u8>::new(&[4096], Some(Memory::Shm)).unwrap();
    drop(t.map().unwrap());
    g.bench_function("map_of_a_mapped_memfd_tensor", |b| {
        b.iter(|| black_box(t.map().unwrap().len()))
    });
    g.finish();
}

criterion_group!(benches, guard);
criterion_main!(benches);
