//! The CPU-mapping guard (DESIGN.md invariant 1): exclusion across threads, and no
//! self-deadlock on one thread (issue #10). The same tests run in both modes: with the
//! crate's own guard (`cargo test --test guard`) and with the one in libpinframe.so.0
//! (`--features shared-guard`, scripts/lanes/c, LD_LIBRARY_PATH at the installed
//! library).
//!
//! The tests of this file run one at a time (they count process-wide mappings and
//! waiters), each holding `SERIAL`.

use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pinframe::tensor::{CpuMappingGuard, cpu_mapping_guard};
use pinframe::testing::{cpu_mapping_guard_waiters, live_cpu_mappings};
use pinframe::{Error, Memory, Tensor, cpu_mapping_shared, with_cpu_mappings_excluded};

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn shm(len: usize) -> Tensor<u8> {
    Tensor::new(&[len], Some(Memory::Shm)).expect("memfd tensors work on every Linux")
}

/// True while `addr` lies in a mapping of one of pinframe's memfds (read from
/// /proc/self/maps, so that an unrelated mapping placed at the freed address afterwards, a
/// new thread's stack say, does not count).
fn is_mapped(addr: *const u8) -> bool {
    let addr = addr as usize;
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    maps.lines().any(|line| {
        let mut fields = line.split_whitespace();
        let range = fields.next().unwrap_or("");
        let path = fields.nth(4).unwrap_or("");
        let Some((start, end)) = range.split_once('-') else {
            return false;
        };
        let start = usize::from_str_radix(start, 16).unwrap_or(usize::MAX);
        let end = usize::from_str_radix(end, 16).unwrap_or(0);
        (start..end).contains(&addr) && path.starts_with("/memfd:pinframe")
    })
}

/// Waits until `n` threads wait on the guard (a bound for failures, not an ordering).
fn wait_for_waiters(n: usize) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while cpu_mapping_guard_waiters() < n {
        assert!(
            Instant::now() < deadline,
            "no thread started waiting on the guard"
        );
        std::thread::yield_now();
    }
}

#[test]
fn the_guard_is_the_one_the_build_asks_for() {
    let _s = serial();
    let guard = cpu_mapping_guard().expect("the guard is available");
    if cfg!(feature = "shared-guard") {
        match guard {
            CpuMappingGuard::Shared { library } => {
                assert!(library.contains("libpinframe"), "{library}")
            }
            other => panic!("built with shared-guard but the guard is {other:?}"),
        }
    } else {
        assert_eq!(guard, CpuMappingGuard::Local);
    }
}

#[test]
fn a_first_mapping_inside_the_thread_s_own_section_is_an_error_not_a_deadlock() {
    let _s = serial();
    let t = shm(4096);
    let inside = with_cpu_mappings_excluded(|| {
        let map = t.map().map(|_| ());
        let pin = t.pin_host().map(|_| ());
        (map, pin)
    });
    for r in [inside.0, inside.1] {
        match r {
            Err(Error::InvalidArgument(m)) => {
                assert!(m.contains("inside with_cpu_mappings_excluded"), "{m}")
            }
            other => panic!("expected a clear error, got {other:?}"),
        }
    }
    // Outside the section the same calls work.
    assert_eq!(t.map().unwrap().len(), 4096);
    assert_eq!(t.pin_host().unwrap().len(), 4096);
}

#[test]
fn existing_mappings_are_usable_inside_the_section() {
    let _s = serial();
    let mut t = shm(4096);
    t.map_mut().unwrap()[5] = 5;
    let pin = t.pin_host().unwrap();
    let read = with_cpu_mappings_excluded(|| {
        let m = t.map().expect("an existing mapping needs no new mmap");
        t.sync_for_cpu(pinframe::Access::Read).unwrap();
        // SAFETY: nothing writes the tensor while this slice lives.
        let p = unsafe { pin.as_slice()[5] };
        (m[5], p)
    });
    assert_eq!(read, (5, 5));
}

#[test]
fn dropping_the_last_owner_inside_the_section_unmaps_when_it_ends() {
    let _s = serial();
    let t = shm(8192);
    let pin = t.pin_host().unwrap();
    let addr = pin.as_ptr();
    let before = live_cpu_mappings();
    let (mapped_inside, live_inside) = with_cpu_mappings_excluded(move || {
        drop(t);
        drop(pin); // the last owner of the mapping
        (is_mapped(addr), live_cpu_mappings())
    });
    assert!(mapped_inside, "unmapped inside the exclusive section");
    assert_eq!(
        live_inside, before,
        "counted as unmapped inside the section"
    );
    assert!(!is_mapped(addr), "not unmapped when the section ended");
    assert_eq!(live_cpu_mappings(), before - 1);
}

#[test]
fn sections_nest() {
    let _s = serial();
    let n = with_cpu_mappings_excluded(|| with_cpu_mappings_excluded(|| 2) + 3);
    assert_eq!(n, 5);
    // ... and after them the guard is free.
    assert_eq!(shm(64).map().unwrap().len(), 64);
}

#[test]
fn an_excluded_section_waits_for_other_threads_and_holds_them_off() {
    let _s = serial();
    let t = Arc::new(shm(4096)); // not mapped yet: its first map() is an mmap
    let (entered_tx, entered_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let holder = std::thread::spawn(move || {
        with_cpu_mappings_excluded(|| {
            entered_tx.send(()).unwrap();
            release_rx.recv().unwrap();
        })
    });
    entered_rx.recv().unwrap();
    let (mapped_tx, mapped_rx) = mpsc::channel();
    let tm = t.clone();
    let mapper = std::thread::spawn(move || {
        let len = tm.map().map(|m| m.len());
        mapped_tx.send(len).unwrap();
    });
    wait_for_waiters(1);
    assert!(
        mapped_rx.try_recv().is_err(),
        "mapped while the section was held"
    );
    release_tx.send(()).unwrap();
    holder.join().unwrap();
    assert_eq!(mapped_rx.recv().unwrap().unwrap(), 4096);
    mapper.join().unwrap();
}

#[test]
fn a_section_opened_while_holding_the_shared_side_does_not_deadlock() {
    let _s = serial();
    let shared = cpu_mapping_shared();
    // The hold is set aside for the section (no self-deadlock), and the section still
    // excludes the other threads.
    let t = Arc::new(shm(4096));
    let tm = t.clone();
    let (mapped_tx, mapped_rx) = mpsc::channel();
    let result = with_cpu_mappings_excluded(|| {
        let mapper = std::thread::spawn(move || {
            mapped_tx.send(tm.map().map(|m| m.len())).unwrap();
        });
        wait_for_waiters(1);
        let early = mapped_rx.try_recv().is_ok();
        (mapper, early)
    });
    let (mapper, early) = result;
    assert!(!early, "another thread mapped inside the section");
    assert_eq!(mapped_rx.recv().unwrap().unwrap(), 4096);
    mapper.join().unwrap();
    drop(shared);
}

#[test]
fn a_shared_hold_taken_inside_a_section_outlives_it_as_a_real_one() {
    let _s = serial();
    let held = with_cpu_mappings_excluded(cpu_mapping_shared);
    // The hold is real now: another thread's section waits for it.
    let (done_tx, done_rx) = mpsc::channel();
    let excluder = std::thread::spawn(move || {
        with_cpu_mappings_excluded(|| done_tx.send(()).unwrap());
    });
    wait_for_waiters(1);
    assert!(
        done_rx.try_recv().is_err(),
        "the section ran past a shared hold"
    );
    drop(held);
    done_rx.recv().unwrap();
    excluder.join().unwrap();
}

#[test]
fn a_panic_inside_the_section_ends_it() {
    let _s = serial();
    let r = std::panic::catch_unwind(|| with_cpu_mappings_excluded(|| panic!("boom")));
    assert!(r.is_err());
    // Another thread can take the guard: the section really ended.
    std::thread::spawn(|| assert_eq!(shm(64).map().unwrap().len(), 64))
        .join()
        .unwrap();
    assert_eq!(with_cpu_mappings_excluded(|| 7), 7);
}
