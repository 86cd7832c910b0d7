//! Tensor layer on the host: heap and memfd memory, guards, pins, imports, bad input.

mod common;

use std::io::Write;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd};

use common::tensor_checks;
use pinframe::{
    Access, DType, Error, HostPin, ImageLayout, Memory, MemoryRequest, PixelFormat, Plane, Tensor,
    with_cpu_mappings_excluded,
};

fn shm(n: usize) -> Tensor<u8> {
    Tensor::new(&[n], Some(Memory::Shm)).unwrap()
}

fn heap(n: usize) -> Tensor<u8> {
    Tensor::new(&[n], Some(Memory::Heap)).unwrap()
}

#[test]
fn heap_tensors_are_64_byte_aligned_and_zeroed() {
    for n in [1, 3, 64, 1000, 4097] {
        let t = Tensor::<f32>::new(&[n], Some(Memory::Heap)).unwrap();
        let m = t.map().unwrap();
        assert_eq!(m.as_ptr() as usize % 64, 0);
        assert!(m.iter().all(|&v| v == 0.0));
        assert_eq!(m.len(), n);
        assert_eq!(t.pin_host().unwrap().alignment() % 64, 0);
    }
}

#[test]
fn every_element_type_round_trips() {
    fn check<T: pinframe::Element + From<u8>>() {
        let mut t = Tensor::<T>::new(&[2, 3, 4], Some(Memory::Shm)).unwrap();
        assert_eq!(t.shape(), &[2, 3, 4]);
        assert_eq!(t.len(), 24);
        t.map_mut()
            .unwrap()
            .iter_mut()
            .enumerate()
            .for_each(|(i, v)| *v = T::from(i as u8));
        let m = t.map().unwrap();
        assert!(m.iter().enumerate().all(|(i, v)| *v == T::from(i as u8)));
    }
    check::<u8>();
    check::<u16>();
    check::<i16>();
    check::<u32>();
    check::<i32>();
    check::<f32>();
    check::<f64>();
    check::<half::f16>();
    let t = Tensor::<i8>::new(&[5], Some(Memory::Heap)).unwrap();
    assert_eq!(t.map().unwrap().len(), 5);
}

#[test]
fn write_map_pin_reimport_heap_and_memfd() {
    tensor_checks::write_map_pin_reimport(|| heap(10_000));
    tensor_checks::write_map_pin_reimport(|| shm(10_000));
    tensor_checks::write_map_pin_reimport(|| shm(3));
}

#[test]
fn pin_stays_valid_through_mut_use_and_after_drop() {
    tensor_checks::pin_outlives_tensor(|| heap(4096 * 3 + 5));
    tensor_checks::pin_outlives_tensor(|| shm(4096 * 3 + 5));
}

#[test]
fn pin_survives_use_as_mut_destination_while_pinned() {
    let mut t = Tensor::<f32>::image(8, 4, PixelFormat::PlanarRgb, Some(Memory::Shm)).unwrap();
    let pin: HostPin<'static> = t.pin_host().unwrap();
    for frame in 0..5u8 {
        {
            let mut m = t.map_mut().unwrap();
            m.fill(f32::from(frame));
        }
        t.sync_for_cpu(Access::Read).unwrap();
        // SAFETY: the guard above is dropped; nothing writes while we read.
        let bytes = unsafe { pin.as_slice() };
        let floats: &[f32] = bytemuck::cast_slice(bytes);
        assert!(floats.iter().all(|&v| v == f32::from(frame)));
        t.sync_for_device(Access::Read).unwrap();
    }
}

#[test]
fn pin_window_excludes_pitch_padding_after_last_row() {
    let layout = ImageLayout::with_row_alignment(10, 3, PixelFormat::Rgb, DType::U8, 64).unwrap();
    let t = Tensor::<u8>::with_layout(layout, Some(Memory::Heap)).unwrap();
    let pin = t.pin_host().unwrap();
    assert_eq!(pin.len(), 2 * 64 + 30);
    let dbg = format!("{pin:?}");
    assert!(dbg.contains("U8") && dbg.contains("len: 158") && dbg.contains("alignment"));
    fn send_sync<T: Send + Sync + Clone + std::fmt::Debug>() {}
    send_sync::<HostPin<'static>>();
}

#[test]
fn heap_and_memfd_syncs_reach_the_buffer_and_issue_no_ioctl() {
    use pinframe::testing::{SyncCounts, dma_sync_counts, sync_requests};
    for mut t in [heap(100), shm(100)] {
        {
            let _m = t.map().unwrap();
            let asked = sync_requests(&t);
            assert_eq!(
                (asked.start_read, asked.ends()),
                (1, 0),
                "map() asks START|READ"
            );
        }
        assert_eq!(
            sync_requests(&t).end_read,
            1,
            "the guard's drop asks END|READ"
        );
        drop(t.map_mut().unwrap());
        t.sync_for_cpu(Access::Read).unwrap();
        t.sync_for_device(Access::Write).unwrap();
        let asked = sync_requests(&t);
        assert_eq!(
            asked,
            SyncCounts {
                start_read: 2,
                end_read: 1,
                start_read_write: 1,
                end_read_write: 1,
                end_write: 1,
                ..SyncCounts::default()
            },
            "{:?}",
            t.memory()
        );
        // Every one of them was a no-op: no DMA_BUF_IOCTL_SYNC reached the kernel.
        assert_eq!(
            dma_sync_counts(&t),
            SyncCounts::default(),
            "{:?}",
            t.memory()
        );
    }
}

#[test]
fn image_tensors_get_layouts_and_shapes() {
    let t = Tensor::<f32>::image(640, 640, PixelFormat::PlanarRgb, Some(Memory::Heap)).unwrap();
    assert_eq!(t.shape(), &[3, 640, 640]);
    assert_eq!(t.layout().unwrap().dtype(), DType::F32);
    assert_eq!(t.map().unwrap().len(), 3 * 640 * 640);
    let t = Tensor::<u8>::image(64, 48, PixelFormat::Nv12, Some(Memory::Shm)).unwrap();
    assert_eq!(t.shape(), &[72, 64]);
    assert!(Tensor::<f32>::image(64, 48, PixelFormat::Nv12, None).is_err());
}

#[test]
fn auto_memory_never_spends_dma_and_device_memory_prefers_it() {
    // `None` (Auto) is CPU memory shareable by fd, wherever DMA memory exists (the VM runs
    // this too, with a dma-heap, udmabuf and GBM).
    let t = Tensor::<u8>::image(16, 16, PixelFormat::Rgb, None).unwrap();
    assert_eq!(t.memory(), Memory::Shm);
    assert_eq!(t.layout().unwrap().planes()[0].stride, 48, "tight rows");
    assert_eq!(
        Tensor::<f32>::new(&[7], None).unwrap().memory(),
        Memory::Shm
    );
    assert_eq!(
        Tensor::<u8>::new(&[7], MemoryRequest::Auto)
            .unwrap()
            .memory(),
        Memory::Shm
    );
    // Device: a dma-buf with 64-byte rows where one can be had, else the same memfd.
    let d = Tensor::<u8>::image(16, 16, PixelFormat::Rgb, MemoryRequest::Device).unwrap();
    let dma_here = Tensor::<u8>::new(&[4096], Memory::Dma).is_ok();
    if dma_here {
        assert_eq!(d.memory(), Memory::Dma);
        assert_eq!(d.layout().unwrap().planes()[0].stride, 64);
    } else {
        assert_eq!(d.memory(), Memory::Shm);
        assert_eq!(d.layout().unwrap().planes()[0].stride, 48);
    }
    // Requests parse from the names the bindings and the CLI use.
    for (name, want) in [
        ("auto", MemoryRequest::Auto),
        ("device", MemoryRequest::Device),
        ("dma", MemoryRequest::Only(Memory::Dma)),
        ("memfd", MemoryRequest::Only(Memory::Shm)),
    ] {
        assert_eq!(name.parse::<MemoryRequest>().unwrap(), want);
    }
    let e = "gpu".parse::<MemoryRequest>().unwrap_err();
    assert!(e.to_string().contains("auto, device"), "{e}");
}

/// A 64x4 NV12 image in two buffers (Y in buffer 0, UV in buffer 1), V4L2's NV12M.
fn nv12m_64x4() -> ImageLayout {
    let planes = [
        Plane::new(0, 64),
        Plane {
            buffer: 1,
            offset: 0,
            stride: 64,
        },
    ];
    ImageLayout::with_planes(64, 4, PixelFormat::Nv12, DType::U8, &planes).unwrap()
}

#[test]
fn every_buffer_of_a_multi_buffer_image_is_in_the_reported_memory() {
    let nv12m = nv12m_64x4();
    for request in [
        MemoryRequest::Auto,
        MemoryRequest::Device,
        MemoryRequest::Only(Memory::Heap),
        MemoryRequest::Only(Memory::Shm),
    ] {
        let t = Tensor::<u8>::with_layout(nv12m, request).unwrap();
        assert_eq!(t.buffer_count(), 2);
        let memories = pinframe::testing::buffer_memories(&t);
        assert_eq!(memories, vec![t.memory(); 2], "{request}");
        // An fd for every buffer of an fd-backed image, none for the heap.
        let fds = (0..2).filter(|&i| t.buffer_fd(i).is_some()).count();
        assert_eq!(fds, if t.memory() == Memory::Heap { 0 } else { 2 });
    }
}

#[test]
fn failed_dma_probes_are_remembered_not_repeated_per_tensor() {
    use pinframe::testing::dma_probe_failures;
    // The first DMA allocation in this process probes every route it needs; whatever
    // failed then (a heap that does not exist, no /dev/udmabuf, no GBM device) is not
    // probed again. Two warm-up attempts: another test thread's first probe may be in
    // flight during the first.
    for _ in 0..2 {
        let _ = Tensor::<u8>::new(&[4096], Memory::Dma);
        let _ = Tensor::<u8>::image(16, 16, PixelFormat::Rgb, MemoryRequest::Device);
    }
    let after_first = dma_probe_failures();
    let mut last = None;
    for _ in 0..20 {
        last = Some(Tensor::<u8>::new(&[4096], Memory::Dma));
        let _ = Tensor::<u8>::with_layout(
            ImageLayout::new(16, 16, PixelFormat::Rgb).unwrap(),
            MemoryRequest::Device,
        );
    }
    assert_eq!(
        dma_probe_failures(),
        after_first,
        "a failed probe was repeated"
    );
    match last.unwrap() {
        Ok(t) => assert_eq!(t.memory(), Memory::Dma),
        Err(e) => {
            // Every route still named, each with its remembered reason.
            let msg = e.to_string();
            assert!(matches!(e, Error::MemoryUnavailable { .. }), "{msg}");
            for route in ["/dev/dma_heap/system", "/dev/udmabuf", "GBM"] {
                assert!(msg.contains(route), "{route} missing from: {msg}");
            }
            assert!(msg.contains("remembered"), "{msg}");
            let f = after_first;
            assert!(f.heap >= 1 && f.udmabuf == 1 && f.gbm <= 1, "{f:?}");
        }
    }
}

#[test]
fn set_layout_addresses_one_tile_of_a_batch() {
    let (w, h) = (4usize, 2usize);
    let mut batch = Tensor::<f32>::new(&[2, 3, h, w], Some(Memory::Heap)).unwrap();
    let plane = w * h * 4;
    let tile1 = ImageLayout::with_planes(
        w as u32,
        h as u32,
        PixelFormat::PlanarRgb,
        DType::F32,
        &[
            Plane::new(3 * plane, w * 4),
            Plane::new(4 * plane, w * 4),
            Plane::new(5 * plane, w * 4),
        ],
    )
    .unwrap();
    batch.set_layout(tile1).unwrap();
    assert_eq!(batch.shape(), &[2, 3, h, w]);
    assert_eq!(batch.map().unwrap().len(), 2 * 3 * h * w);
    let too_far = ImageLayout::with_planes(
        w as u32,
        h as u32,
        PixelFormat::PlanarRgb,
        DType::F32,
        &[
            Plane::new(4 * plane, w * 4),
            Plane::new(5 * plane, w * 4),
            Plane::new(6 * plane, w * 4),
        ],
    )
    .unwrap();
    assert!(matches!(
        batch.set_layout(too_far),
        Err(Error::BufferTooSmall { .. })
    ));
}

#[test]
fn dma_memory_is_a_clear_error_where_no_route_exists() {
    match Tensor::<u8>::new(&[4096], Some(Memory::Dma)) {
        Ok(t) => {
            assert_eq!(t.memory(), Memory::Dma);
            assert!(t.dma_route().is_some());
        }
        Err(e) => {
            let msg = e.to_string();
            assert!(matches!(e, Error::MemoryUnavailable { .. }), "{msg}");
            for route in ["/dev/dma_heap/system", "/dev/udmabuf", "GBM"] {
                assert!(msg.contains(route), "{route} missing from: {msg}");
            }
        }
    }
}

#[test]
fn import_recognises_memfd_and_rejects_other_fds() {
    let t = shm(4096);
    let fd = t.fd().unwrap();
    let layout = ImageLayout::new(64, 64, PixelFormat::Grey).unwrap();
    // SAFETY: this test is the buffer's only holder and takes no views below.
    let imported = unsafe { Tensor::<u8>::import(fd, layout) }.unwrap();
    assert_eq!(imported.memory(), Memory::Shm);
    assert_ne!(
        imported.fd().unwrap().as_raw_fd(),
        fd.as_raw_fd(),
        "fd is duplicated"
    );

    let too_big = ImageLayout::new(64, 65, PixelFormat::Grey).unwrap();
    assert!(matches!(
        // SAFETY: refused before a tensor exists.
        unsafe { Tensor::<u8>::import(fd, too_big) },
        Err(Error::BufferTooSmall {
            needed: 4160,
            actual: 4096,
            ..
        })
    ));

    let mut file = tempfile_in_target();
    file.write_all(&[0u8; 4096]).unwrap();
    // SAFETY: refused (a regular file) before a tensor exists.
    let e = unsafe {
        Tensor::<u8>::import(
            file.as_fd(),
            ImageLayout::new(8, 8, PixelFormat::Grey).unwrap(),
        )
    }
    .unwrap_err();
    assert!(matches!(e, Error::InvalidFd(_)), "{e}");
    assert!(
        e.to_string().contains("neither a dma-buf nor a memfd"),
        "{e}"
    );

    let (r, _w) = nix::unistd::pipe().unwrap();
    assert!(matches!(
        // SAFETY: refused (a pipe) before a tensor exists.
        unsafe {
            Tensor::<u8>::import(
                r.as_fd(),
                ImageLayout::new(1, 1, PixelFormat::Grey).unwrap(),
            )
        },
        Err(Error::InvalidFd(_))
    ));
}

#[test]
fn import_of_a_closed_fd_is_an_error() {
    // A closed fd number that no other test thread will be handed meanwhile: the kernel
    // gives out the lowest free number, so take one far above what the tests use.
    let (r, _w) = nix::unistd::pipe().unwrap();
    let high =
        nix::fcntl::fcntl(r.as_raw_fd(), nix::fcntl::FcntlArg::F_DUPFD_CLOEXEC(900)).unwrap();
    // SAFETY: `high` is a fresh duplicate owned by nothing else; it is closed right here.
    drop(unsafe { std::os::fd::OwnedFd::from_raw_fd(high) });
    let raw = high;
    // SAFETY: borrowing a closed fd number is exactly the bad input under test; import
    // only tries to dup it, which fails with EBADF, and never closes it.
    let closed = unsafe { BorrowedFd::borrow_raw(raw) };
    // SAFETY: refused (a closed fd) before a tensor exists.
    let e =
        unsafe { Tensor::<u8>::import(closed, ImageLayout::new(1, 1, PixelFormat::Grey).unwrap()) }
            .unwrap_err();
    assert!(e.to_string().contains("not open"), "{e}");
}

/// A memfd of `len` bytes created with `flags`, sealed with `seals` (none if empty).
fn raw_memfd(
    flags: nix::sys::memfd::MemFdCreateFlag,
    len: i64,
    seals: nix::fcntl::SealFlag,
) -> std::os::fd::OwnedFd {
    use nix::fcntl::{FcntlArg, fcntl};
    let fd = nix::sys::memfd::memfd_create(c"pinframe-test-raw", flags).unwrap();
    nix::unistd::ftruncate(&fd, len).unwrap();
    if !seals.is_empty() {
        fcntl(fd.as_raw_fd(), FcntlArg::F_ADD_SEALS(seals)).unwrap();
    }
    fd
}

#[test]
fn import_refuses_a_memfd_that_can_shrink() {
    use nix::fcntl::SealFlag;
    use nix::sys::memfd::MemFdCreateFlag;
    let layout = ImageLayout::new(64, 64, PixelFormat::Grey).unwrap();
    let sealable = MemFdCreateFlag::MFD_CLOEXEC | MemFdCreateFlag::MFD_ALLOW_SEALING;
    // No seal at all, and a memfd that can never be sealed.
    for (flags, hint) in [
        (sealable, "F_ADD_SEALS"),
        (MemFdCreateFlag::MFD_CLOEXEC, "MFD_ALLOW_SEALING"),
    ] {
        let fd = raw_memfd(flags, 4096, SealFlag::empty());
        // SAFETY: refused before a tensor exists.
        let e = unsafe { Tensor::<u8>::import(fd.as_fd(), layout) }.unwrap_err();
        assert_eq!(e.kind(), pinframe::ErrorKind::ImportRefused, "{e}");
        assert!(matches!(e, Error::ImportRefused(_)), "{e}");
        let msg = e.to_string();
        assert!(msg.contains("F_SEAL_SHRINK") && msg.contains(hint), "{msg}");
    }
    // Sealed against growth only: still refused (shrinking is what breaks a mapping).
    let grow_only = raw_memfd(sealable, 4096, SealFlag::F_SEAL_GROW);
    // SAFETY: refused before a tensor exists.
    let e = unsafe { Tensor::<u8>::import(grow_only.as_fd(), layout) }.unwrap_err();
    assert_eq!(e.kind(), pinframe::ErrorKind::ImportRefused, "{e}");

    // With F_SEAL_SHRINK it imports, and the buffer really cannot shrink under the mapping.
    let sealed = raw_memfd(sealable, 4096, SealFlag::F_SEAL_SHRINK);
    // SAFETY: this test is the memfd's only holder and writes it only through `t`.
    let mut t = unsafe { Tensor::<u8>::import(sealed.as_fd(), layout) }.unwrap();
    assert_eq!(t.memory(), Memory::Shm);
    t.map_mut().unwrap()[4095] = 7;
    assert_eq!(
        nix::unistd::ftruncate(&sealed, 0),
        Err(nix::errno::Errno::EPERM)
    );
    assert_eq!(t.map().unwrap()[4095], 7);

    // Every buffer of a multi-buffer image is checked, not only the first.
    let y = raw_memfd(sealable, 64 * 4, SealFlag::F_SEAL_SHRINK);
    let uv = raw_memfd(sealable, 64 * 2, SealFlag::empty());
    let nv12 = nv12m_64x4();
    // SAFETY: refused before a tensor exists.
    let e = unsafe { Tensor::<u8>::import_planes(&[y.as_fd(), uv.as_fd()], nv12) }.unwrap_err();
    assert_eq!(e.kind(), pinframe::ErrorKind::ImportRefused, "{e}");
}

#[test]
fn multi_buffer_import_of_nv12_in_two_memfds() {
    let y = shm(64 * 4);
    let uv = shm(64 * 2);
    let layout = nv12m_64x4();
    // SAFETY: `y` and `uv` are not written while `t`'s view below is alive.
    let t = unsafe { Tensor::<u8>::import_planes(&[y.fd().unwrap(), uv.fd().unwrap()], layout) }
        .unwrap();
    assert_eq!(t.buffer_count(), 2);
    assert_eq!(t.map().unwrap().buffer_bytes(1).len(), 128);
    assert!(
        t.pin_host().is_err(),
        "multi-buffer tensors cannot be pinned as one window"
    );
    // SAFETY: refused (one fd for two buffers) before a tensor exists.
    assert!(unsafe { Tensor::<u8>::import_planes(&[y.fd().unwrap()], layout) }.is_err());
}

#[test]
fn write_sealed_memfd_imports_read_only() {
    use nix::fcntl::{FcntlArg, SealFlag, fcntl};
    use nix::sys::memfd::{MemFdCreateFlag, memfd_create};
    let fd = memfd_create(c"sealed", MemFdCreateFlag::MFD_ALLOW_SEALING).unwrap();
    nix::unistd::ftruncate(&fd, 4096).unwrap();
    fcntl(
        fd.as_raw_fd(),
        FcntlArg::F_ADD_SEALS(SealFlag::F_SEAL_WRITE | SealFlag::F_SEAL_SHRINK),
    )
    .unwrap();
    // SAFETY: the memfd is write-sealed: nobody can write it.
    let mut t = unsafe {
        Tensor::<u8>::import(
            fd.as_fd(),
            ImageLayout::new(64, 64, PixelFormat::Grey).unwrap(),
        )
    }
    .unwrap();
    assert_eq!(t.map().unwrap()[0], 0);
    let e = t
        .map_mut()
        .err()
        .expect("write-sealed memfd must not map writable");
    assert!(e.to_string().contains("read-only"), "{e}");
    // A pin says so, so that bindings hand out read-only views of it.
    assert!(!t.pin_host().unwrap().writable());
    let writable = Tensor::<u8>::new(&[16], Some(Memory::Shm)).unwrap();
    assert!(writable.pin_host().unwrap().writable());
}

/// Child half of `memfd_written_by_child_is_seen_by_parent`: runs only when re-executed
/// with PINFRAME_CHILD_FD set (the parent starts this test binary again for this test).
#[test]
fn child_writer() {
    let Ok(fd) = std::env::var("PINFRAME_CHILD_FD") else {
        return;
    };
    let fd: i32 = fd.parse().unwrap();
    // SAFETY: the parent passed this fd, open and inherited, to this process.
    let fd = unsafe { BorrowedFd::borrow_raw(fd) };
    // SAFETY: the parent waits for this process to exit before it maps the memfd.
    let t =
        unsafe { Tensor::<u8>::import(fd, ImageLayout::new(4096, 1, PixelFormat::Grey).unwrap()) }
            .unwrap();
    let mut t = t;
    let mut m = t.map_mut().unwrap();
    m[..11].copy_from_slice(b"from child!");
    m[4095] = 0x5A;
}

#[test]
fn memfd_written_by_child_is_seen_by_parent() {
    let t = shm(4096);
    // Pass a non-close-on-exec duplicate to the child.
    let inheritable = nix::unistd::dup(t.fd().unwrap().as_raw_fd()).unwrap();
    let status = common::target_command(std::env::current_exe().unwrap())
        .args(["--exact", "child_writer", "--nocapture", "--test-threads=1"])
        .env("PINFRAME_CHILD_FD", inheritable.to_string())
        // The child's own libtest summary would read as extra results in the suite log.
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    nix::unistd::close(inheritable).unwrap();
    assert!(status.success());
    let m = t.map().unwrap();
    assert_eq!(&m[..11], b"from child!");
    assert_eq!(m[4095], 0x5A);
}

// An exclusive section holding off a concurrent first map(): tests/guard.rs, which sees
// the mapper waiting on the guard (`cpu_mapping_guard_waiters`) instead of timing it.

#[test]
fn a_poisoned_guard_is_recovered() {
    let r = std::panic::catch_unwind(|| with_cpu_mappings_excluded(|| panic!("boom")));
    assert!(r.is_err());
    let t = shm(64);
    assert_eq!(t.map().unwrap().len(), 64);
    assert_eq!(with_cpu_mappings_excluded(|| 5), 5);
}

#[test]
fn bad_shapes_are_errors() {
    assert!(matches!(
        Tensor::<u8>::new(&[4, 0], None),
        Err(Error::InvalidShape(_))
    ));
    assert!(matches!(
        Tensor::<f64>::new(&[usize::MAX / 4, 4], Some(Memory::Heap)),
        Err(Error::InvalidShape(_))
    ));
    let l = ImageLayout::new(4, 4, PixelFormat::Rgb).unwrap();
    assert!(
        Tensor::<f32>::with_layout(l, None).is_err(),
        "dtype mismatch"
    );
}

fn tempfile_in_target() -> std::fs::File {
    let dir = std::env::temp_dir();
    let path = dir.join(format!("pinframe-regular-{}", std::process::id()));
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .read(true)
        .write(true)
        .open(&path)
        .unwrap();
    std::fs::remove_file(&path).unwrap();
    f
}

#[allow(dead_code)]
fn assert_access_is_copy(a: Access) -> (Access, Access) {
    (a, a)
}
