//! Process-wide counters (open fds, mappings): in a binary of its own, one test at a time,
//! so no other test's allocations move the numbers.

mod common;

use std::sync::Mutex;

use common::tensor_checks::cycles_leave_no_trace;
use pinframe::testing::live_cpu_mappings;
use pinframe::{Memory, Tensor};

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

#[test]
fn ten_thousand_heap_cycles_leave_fds_and_mappings_unchanged() {
    let _s = serial();
    cycles_leave_no_trace(Memory::Heap, 10_000, || {
        Tensor::new(&[640, 640, 3], Some(Memory::Heap)).unwrap()
    });
}

#[test]
fn ten_thousand_memfd_cycles_leave_fds_and_mappings_unchanged() {
    let _s = serial();
    cycles_leave_no_trace(Memory::Shm, 10_000, || {
        Tensor::new(&[640, 640, 3], Some(Memory::Shm)).unwrap()
    });
}

fn mapped(addr: usize) -> bool {
    std::fs::read_to_string("/proc/self/maps")
        .unwrap()
        .lines()
        .any(|l| {
            let range = l.split_whitespace().next().unwrap();
            let (a, b) = range.split_once('-').unwrap();
            let (a, b) = (
                usize::from_str_radix(a, 16).unwrap(),
                usize::from_str_radix(b, 16).unwrap(),
            );
            (a..b).contains(&addr) && l.contains("memfd:pinframe-tensor")
        })
}

#[test]
fn a_mapping_is_released_exactly_once_by_its_last_owner() {
    let _s = serial();
    let live = live_cpu_mappings();
    let t = Tensor::<u8>::new(&[3 * 4096], Some(Memory::Shm)).unwrap();
    assert_eq!(live_cpu_mappings(), live, "memfd tensors map lazily");
    let pin = t.pin_host().unwrap();
    let pin2 = pin.clone();
    let addr = pin.as_ptr() as usize;
    assert_eq!(live_cpu_mappings(), live + 1);
    {
        let m = t.map().unwrap();
        assert_eq!(
            m.as_ptr() as usize,
            addr,
            "one mapping shared by guards and pins"
        );
    }
    assert!(mapped(addr));
    drop(t);
    assert_eq!(live_cpu_mappings(), live + 1, "pins keep the mapping");
    assert!(mapped(addr));
    drop(pin);
    assert!(mapped(addr), "a clone still holds it");
    drop(pin2);
    assert_eq!(
        live_cpu_mappings(),
        live,
        "unmapped when the last owner dropped"
    );
    assert!(!mapped(addr), "the range is gone from /proc/self/maps");
    // And heap tensors make no mappings of their own: the allocator may grow or split its
    // arenas (one more line or two in /proc/self/maps, more under qemu-user), so what is
    // checked is that the pin points into no pinframe memfd mapping.
    let h = Tensor::<u8>::new(&[64], Some(Memory::Heap)).unwrap();
    let p = h.pin_host().unwrap();
    assert_eq!(live_cpu_mappings(), live);
    assert!(
        !mapped(p.as_ptr() as usize),
        "a heap pin lies in no memfd mapping"
    );
}
