//! Behaviour checks shared by the host tensor tests (heap, memfd) and the VM lane's
//! dma-buf tests (dma-heap, udmabuf, GBM): the same assertions on every kind of memory.
#![allow(dead_code)]

use std::os::fd::AsFd;

use pinframe::{Access, ImageLayout, Memory, PixelFormat, Tensor};

/// Open fds of this process.
pub fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

/// Lines of /proc/self/maps (all mappings of the process).
pub fn mapping_lines() -> usize {
    std::fs::read_to_string("/proc/self/maps")
        .unwrap()
        .lines()
        .count()
}

/// Writes through a map guard, through a pin, reads back through both, and checks that a
/// second tensor imported from the same fd sees the same bytes.
pub fn write_map_pin_reimport(make: impl Fn() -> Tensor<u8>) {
    let mut t = make();
    let n = t.len();
    {
        let mut m = t.map_mut().unwrap();
        for (i, b) in m.iter_mut().enumerate() {
            *b = (i % 251) as u8;
        }
    }
    let pin = t.pin_host().unwrap();
    assert_eq!(pin.len(), n);
    t.sync_for_cpu(Access::ReadWrite).unwrap();
    // SAFETY: no guard of `t` is alive and nothing else writes the tensor.
    let seen: Vec<u8> = unsafe { pin.as_slice() }.to_vec();
    assert!(seen.iter().enumerate().all(|(i, &b)| b == (i % 251) as u8));
    // Write through the pin, then read through a map guard.
    for i in (0..n).step_by(97) {
        // SAFETY: i < pin.len(); no guard is alive; the access is bracketed by syncs.
        unsafe { *pin.as_mut_ptr().add(i) = 0xA5 };
    }
    t.sync_for_device(Access::ReadWrite).unwrap();
    {
        let m = t.map().unwrap();
        for i in 0..n {
            let want = if i % 97 == 0 { 0xA5 } else { (i % 251) as u8 };
            assert_eq!(m[i], want, "byte {i}");
        }
    }
    if let Some(fd) = t.fd() {
        // View the bytes as a grey image of at most 65536 columns (the layout limit).
        let width = (1..=n.min(65_536))
            .rev()
            .find(|w| n.is_multiple_of(*w))
            .unwrap();
        let layout = ImageLayout::new(width as u32, (n / width) as u32, PixelFormat::Grey).unwrap();
        // SAFETY: the two tensors over the buffer only take read views from here on, and
        // nothing else holds it.
        let again = unsafe { Tensor::<u8>::import(fd.as_fd(), layout) }.unwrap();
        assert_eq!(again.memory(), t.memory());
        let a = again.map().unwrap();
        let b = t.map().unwrap();
        assert_eq!(&a[..n], &b[..n]);
    }
}

/// A pin stays valid and writable while the tensor is used through `&mut`, and after the
/// tensor drops.
pub fn pin_outlives_tensor(make: impl Fn() -> Tensor<u8>) {
    let mut t = make();
    let pin = t.pin_host().unwrap();
    let n = pin.len();
    {
        let mut m = t.map_mut().unwrap();
        m.fill(7);
    }
    // SAFETY: no guard alive, no concurrent writer.
    assert!(unsafe { pin.as_slice() }.iter().all(|&b| b == 7));
    let clone = pin.clone();
    drop(t);
    drop(pin);
    for i in 0..n {
        // SAFETY: the clone keeps the buffer alive; the tensor is gone so nothing else
        // touches it.
        unsafe { *clone.as_mut_ptr().add(i) = (i % 13) as u8 };
    }
    // SAFETY: as above.
    let s = unsafe { clone.as_slice() };
    assert!(s.iter().enumerate().all(|(i, &b)| b == (i % 13) as u8));
}

/// Allocate/map/pin/drop `cycles` times; fds and mappings must end where they started.
pub fn cycles_leave_no_trace(memory: Memory, cycles: usize, make: impl Fn() -> Tensor<u8>) {
    // Warm up lazily initialised process state (render-node fd, allocator pools).
    for _ in 0..8 {
        let t = make();
        let _p = t.pin_host().unwrap();
        let _m = t.map().unwrap();
    }
    let fds = open_fds();
    let maps = mapping_lines();
    let live = pinframe::testing::live_cpu_mappings();
    for i in 0..cycles {
        let mut t = make();
        assert_eq!(t.memory(), memory);
        {
            let mut m = t.map_mut().unwrap();
            m[0] = i as u8;
        }
        let pin = t.pin_host().unwrap();
        {
            let m = t.map().unwrap();
            assert_eq!(m[0], i as u8);
        }
        drop(t);
        drop(pin);
    }
    assert_eq!(open_fds(), fds, "open fds changed over {cycles} cycles");
    assert_eq!(
        pinframe::testing::live_cpu_mappings(),
        live,
        "live pinframe mappings changed over {cycles} cycles"
    );
    // Heap mappings of the allocator may come and go; allow a little slack there but no
    // growth proportional to the cycle count.
    let after = mapping_lines();
    assert!(
        after <= maps + 4,
        "process mappings grew from {maps} to {after} over {cycles} cycles"
    );
}
