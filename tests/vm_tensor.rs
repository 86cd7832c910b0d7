//! The tensor layer on real dma-bufs, in the VM lane's guest (dma-heap, udmabuf, GBM on
//! vgem, and vivid's exported capture buffers). On the host they are listed as ignored;
//! `scripts/vm-test` runs them in the guest with `--include-ignored`.

mod common;

use std::sync::Mutex;

use common::skip_unless_vm;
use common::tensor_checks;
use pinframe::tensor::DmaRoute;
use pinframe::{Access, ImageLayout, Memory, MemoryRequest, PixelFormat, Tensor};

/// The three allocation routes the guest has.
fn routes() -> Vec<DmaRoute> {
    vec![
        DmaRoute::Heap("system".into()),
        DmaRoute::Udmabuf,
        DmaRoute::Gbm(String::new()),
    ]
}

fn dma(route: &DmaRoute, n: usize) -> Tensor<u8> {
    let t = Tensor::<u8>::new_dma_via(&[n], route)
        .unwrap_or_else(|e| panic!("allocating through {route:?}: {e}"));
    assert_eq!(t.memory(), Memory::Dma);
    t
}

/// fd and mapping counts are process-wide: those tests run one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

#[test]
#[ignore = "VM lane: runs in the guest via scripts/vm-test"]
fn every_route_allocates_maps_pins_and_reimports() {
    if skip_unless_vm("every_route_allocates_maps_pins_and_reimports") {
        return;
    }
    for route in routes() {
        eprintln!("route {route:?}");
        tensor_checks::write_map_pin_reimport(|| dma(&route, 640 * 640 * 3));
        tensor_checks::pin_outlives_tensor(|| dma(&route, 3 * 4096 + 5));
        let t = dma(&route, 100);
        match (&route, t.dma_route().unwrap()) {
            (DmaRoute::Heap(a), DmaRoute::Heap(b)) => assert_eq!(a, b),
            (DmaRoute::Udmabuf, DmaRoute::Udmabuf) => {}
            (DmaRoute::Gbm(_), DmaRoute::Gbm(node)) => assert!(node.starts_with("/dev/dri/")),
            (want, got) => panic!("asked for {want:?}, got {got:?}"),
        }
    }
}

#[test]
#[ignore = "VM lane: runs in the guest via scripts/vm-test"]
fn device_memory_is_dma_in_the_guest_and_auto_is_not() {
    if skip_unless_vm("device_memory_is_dma_in_the_guest_and_auto_is_not") {
        return;
    }
    let t = Tensor::<f32>::image(640, 640, PixelFormat::PlanarRgb, MemoryRequest::Device).unwrap();
    assert_eq!(t.memory(), Memory::Dma);
    assert_eq!(t.layout().unwrap().planes()[0].stride % 64, 0);
    // A multi-buffer image in device memory: every buffer a dma-buf.
    let planes = [
        pinframe::Plane::new(0, 64),
        pinframe::Plane {
            buffer: 1,
            offset: 0,
            stride: 64,
        },
    ];
    let nv12m =
        ImageLayout::with_planes(64, 4, PixelFormat::Nv12, pinframe::DType::U8, &planes).unwrap();
    let t = Tensor::<u8>::with_layout(nv12m, MemoryRequest::Device).unwrap();
    assert_eq!(pinframe::testing::buffer_memories(&t), vec![Memory::Dma; 2]);
    // `None` does not take DMA memory even where it is plentiful.
    let t = Tensor::<f32>::image(640, 640, PixelFormat::PlanarRgb, None).unwrap();
    assert_eq!(t.memory(), Memory::Shm);
    let t = Tensor::<u8>::new(&[16], Some(Memory::Dma)).unwrap();
    assert_eq!(t.dma_route(), Some(&DmaRoute::Heap("system".into())));
}

#[test]
#[ignore = "VM lane: runs in the guest via scripts/vm-test"]
fn guards_bracket_with_syncs_in_their_direction_and_pins_do_not() {
    if skip_unless_vm("guards_bracket_with_syncs_in_their_direction_and_pins_do_not") {
        return;
    }
    for route in routes() {
        let mut t = dma(&route, 4096);
        let c0 = pinframe::testing::dma_sync_counts(&t);
        assert_eq!(c0.starts() + c0.ends(), 0);
        {
            let m = t.map().unwrap();
            let c = pinframe::testing::dma_sync_counts(&t);
            assert_eq!((c.start_read, c.ends()), (1, 0), "START|READ on map()");
            drop(m);
        }
        assert_eq!(
            pinframe::testing::dma_sync_counts(&t).end_read,
            1,
            "END|READ when the guard drops"
        );
        {
            let _m = t.map_mut().unwrap();
        }
        let c = pinframe::testing::dma_sync_counts(&t);
        assert_eq!(
            (c.start_read_write, c.end_read_write),
            (1, 1),
            "map_mut is RW"
        );
        let pin = t.pin_host().unwrap();
        let _pin2 = pin.clone();
        assert_eq!(
            pinframe::testing::dma_sync_counts(&t),
            c,
            "pinning issues no sync"
        );
        t.sync_for_cpu(Access::Read).unwrap();
        t.sync_for_device(Access::Read).unwrap();
        t.sync_for_cpu(Access::Write).unwrap();
        t.sync_for_device(Access::Write).unwrap();
        let c2 = pinframe::testing::dma_sync_counts(&t);
        assert_eq!((c2.start_read, c2.end_read), (2, 2));
        assert_eq!((c2.start_write, c2.end_write), (1, 1));
        // On a dma-buf every request is an ioctl (on heap and memfd none is: tests/tensor.rs).
        assert_eq!(pinframe::testing::sync_requests(&t), c2);
    }
}

// That an exclusive section holds off a first mapping is tested on the host
// (tests/guard.rs, `an_excluded_section_waits_for_other_threads_and_holds_them_off`), with
// the mapper seen waiting on the guard (its waiter count) rather than merely being slow: a
// dma-buf's first map() takes the same path (BufferStorage::cpu_ptr -> MmapOwner::map
// under the shared side) as the memfd's there.

#[test]
#[ignore = "VM lane: runs in the guest via scripts/vm-test"]
fn dma_imports_are_recognised_and_size_checked() {
    if skip_unless_vm("dma_imports_are_recognised_and_size_checked") {
        return;
    }
    for route in routes() {
        let t = dma(&route, 64 * 64);
        let fd = t.fd().unwrap();
        // SAFETY: nothing writes the buffer while this test holds it (no views are taken).
        let ok = unsafe {
            Tensor::<u8>::import(fd, ImageLayout::new(64, 64, PixelFormat::Grey).unwrap())
        }
        .unwrap();
        assert_eq!(ok.memory(), Memory::Dma);
        let len = t.buffer_len(0).unwrap();
        let too_big = ImageLayout::new(64, (len / 64 + 1) as u32, PixelFormat::Grey).unwrap();
        assert!(matches!(
            // SAFETY: refused (too small) before any view could exist.
            unsafe { Tensor::<u8>::import(fd, too_big) },
            Err(pinframe::Error::BufferTooSmall { .. })
        ));
    }
}

#[test]
#[ignore = "VM lane: runs in the guest via scripts/vm-test"]
fn ten_thousand_dma_cycles_per_route_leave_no_trace() {
    if skip_unless_vm("ten_thousand_dma_cycles_per_route_leave_no_trace") {
        return;
    }
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    for route in routes() {
        // Mesa's GBM allocator costs about 11 ms a buffer under the guest's TCG emulation
        // (10,000 cycles: 113 s, against 19 s for the dma-heap and 23 s for udmabuf), so
        // the GBM route runs 2,500 cycles to keep the lane inside its time budget.
        let cycles = if matches!(route, DmaRoute::Gbm(_)) {
            2_500
        } else {
            10_000
        };
        let start = std::time::Instant::now();
        tensor_checks::cycles_leave_no_trace(Memory::Dma, cycles, || dma(&route, 16 * 1024));
        eprintln!("route {route:?}: {cycles} cycles in {:?}", start.elapsed());
    }
}

/// Captures frames from vivid with MMAP buffers, exports each with VIDIOC_EXPBUF, imports
/// the dma-buf as a tensor and reads the captured frame through `map()`.
#[cfg(feature = "camera")]
#[test]
#[ignore = "VM lane: runs in the guest via scripts/vm-test"]
fn vivid_exported_buffer_imports_and_reads_a_captured_frame() {
    if skip_unless_vm("vivid_exported_buffer_imports_and_reads_a_captured_frame") {
        return;
    }
    use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
    use v4l::v4l_sys::*;
    use v4l::v4l2::vidioc;
    use v4l::video::Capture;

    let path = std::env::var("PINFRAME_VM_VIDEO").unwrap_or_else(|_| "/dev/video0".into());
    let dev = v4l::Device::with_path(&path).unwrap();
    let mut fmt = dev.format().unwrap();
    fmt.width = 640;
    fmt.height = 480;
    fmt.fourcc = v4l::FourCC::new(b"YUYV");
    // Let the driver choose the pitch (vivid keeps a previous format's otherwise).
    fmt.stride = 0;
    let fmt = dev.set_format(&fmt).unwrap();
    assert_eq!((fmt.width, fmt.height), (640, 480));
    assert!(fmt.stride >= 1280, "stride {}", fmt.stride);
    let fd = dev.handle().fd();
    let ioctl = |code, arg: *mut std::ffi::c_void| {
        // SAFETY: every call below passes a pointer to the matching, initialised v4l2
        // struct for `code`, alive for the call.
        unsafe { v4l::v4l2::ioctl(fd, code, arg) }
    };
    // SAFETY: plain-old-data v4l2 structs; all-zero is a valid initial value.
    let mut req: v4l2_requestbuffers = unsafe { std::mem::zeroed() };
    req.count = 2;
    req.type_ = v4l2_buf_type_V4L2_BUF_TYPE_VIDEO_CAPTURE;
    req.memory = v4l2_memory_V4L2_MEMORY_MMAP;
    ioctl(vidioc::VIDIOC_REQBUFS, &mut req as *mut _ as *mut _).unwrap();
    let mut exported = Vec::new();
    for index in 0..req.count {
        // SAFETY: as above.
        let mut exp: v4l2_exportbuffer = unsafe { std::mem::zeroed() };
        exp.type_ = v4l2_buf_type_V4L2_BUF_TYPE_VIDEO_CAPTURE;
        exp.index = index;
        exp.flags = (libc::O_RDWR | libc::O_CLOEXEC) as u32;
        ioctl(vidioc::VIDIOC_EXPBUF, &mut exp as *mut _ as *mut _).unwrap();
        // SAFETY: EXPBUF returned a new dma-buf fd that nothing else owns.
        exported.push(unsafe { OwnedFd::from_raw_fd(exp.fd) });
        // SAFETY: v4l2_buffer is plain old data; zeroed is a valid initial value.
        let mut buf: v4l2_buffer = unsafe { std::mem::zeroed() };
        buf.index = index;
        buf.type_ = v4l2_buf_type_V4L2_BUF_TYPE_VIDEO_CAPTURE;
        buf.memory = v4l2_memory_V4L2_MEMORY_MMAP;
        ioctl(vidioc::VIDIOC_QBUF, &mut buf as *mut _ as *mut _).unwrap();
    }
    let mut ty = v4l2_buf_type_V4L2_BUF_TYPE_VIDEO_CAPTURE;
    ioctl(vidioc::VIDIOC_STREAMON, &mut ty as *mut _ as *mut _).unwrap();
    // SAFETY: as above.
    let mut buf: v4l2_buffer = unsafe { std::mem::zeroed() };
    buf.type_ = v4l2_buf_type_V4L2_BUF_TYPE_VIDEO_CAPTURE;
    buf.memory = v4l2_memory_V4L2_MEMORY_MMAP;
    // The v4l crate opens devices non-blocking: wait for a filled buffer (TCG is slow).
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd, alive for the call.
    let ready = unsafe { libc::poll(&mut pfd, 1, 10_000) };
    assert_eq!(ready, 1, "no frame from vivid within 10 s");
    ioctl(vidioc::VIDIOC_DQBUF, &mut buf as *mut _ as *mut _).unwrap();
    assert_eq!(buf.bytesused, fmt.stride * 480);
    let layout = ImageLayout::with_stride(
        640,
        480,
        PixelFormat::Yuyv,
        pinframe::DType::U8,
        fmt.stride as usize,
    )
    .unwrap();
    // SAFETY: the buffer is dequeued (the driver does not write it until it is queued
    // again, after the view below dropped); the driver's own mapping below is only read.
    let frame =
        unsafe { Tensor::<u8>::import(exported[buf.index as usize].as_fd(), layout) }.unwrap();
    assert_eq!(frame.memory(), Memory::Dma);
    {
        let m = frame.map().unwrap();
        // The driver's own MMAP mapping of the same buffer: the tensor must see exactly the
        // bytes vivid captured (vivid's pattern, crop and compose depend on what earlier
        // tests set, so compare with the driver instead of fixed pattern values).
        let len = buf.length as usize;
        // SAFETY: maps `length` bytes of the video fd at the buffer's MMAP offset, as
        // QUERYBUF/DQBUF reported them; unmapped below, never aliased by Rust objects.
        let driver = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                fd,
                buf.m.offset as libc::off_t,
            )
        };
        assert_ne!(driver, libc::MAP_FAILED, "mmap of the V4L2 buffer");
        // SAFETY: `driver` maps `len` readable bytes until the munmap below.
        let driver_bytes = unsafe { std::slice::from_raw_parts(driver as *const u8, len) };
        let used = buf.bytesused as usize;
        assert_eq!(&m[..used], &driver_bytes[..used]);
        // SAFETY: unmapping exactly the mapping made above, once.
        unsafe { libc::munmap(driver, len) };
        let distinct: std::collections::BTreeSet<u8> = m.iter().step_by(2).copied().collect();
        assert!(distinct.len() > 4, "captured frame looks blank");
        assert!(pinframe::testing::dma_sync_counts(&frame).start_read == 1);
    }
    ioctl(vidioc::VIDIOC_STREAMOFF, &mut ty as *mut _ as *mut _).unwrap();
    let _ = fd.as_raw_fd();
}
