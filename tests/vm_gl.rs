//! The GL backend on real dma-bufs, in the VM lane's guest (vgem + Mesa kms_swrast, where
//! EGL_EXT_image_dma_buf_import exists): sources imported (not uploaded), destinations
//! rendered into (not read back), a pool of camera-like buffers imported once each, the
//! EGL image cache emptied when tensors drop, and bad buffers handled without crashes or
//! leaks (a refusal counted and logged once). That every eglDestroyImage runs inside the
//! exclusive side of the CPU-mapping guard is proven on any machine by the unit test
//! `gl::import::tests::destroys_exclude_cpu_mappings`.
//! On the host they are listed as ignored; `scripts/vm-test` runs them in the guest.
#![cfg(feature = "gl")]

mod common;
#[path = "common/reference.rs"]
mod reference;

use std::sync::Mutex;

use common::skip_unless_vm;
use pinframe::tensor::DmaRoute;
use pinframe::testing::gl_image_counters;
use pinframe::{
    Backend, ConvertOptions, Element, Fit, ImageLayout, ImageProcessor, Memory, Normalize,
    PixelFormat, Tensor,
};
use reference::{Readback, Rng};

/// EGL image counters and fd counts are process-wide: these tests run one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn lock() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// The allocation routes to import from: the dma-heap must work in the guest; udmabuf
/// and GBM are used where they allocate (GBM on vgem's render node may refuse).
fn routes() -> Vec<DmaRoute> {
    let mut out = vec![heap()];
    for r in [DmaRoute::Udmabuf, DmaRoute::Gbm(String::new())] {
        match Tensor::<u8>::new_dma_via(&[4096], &r) {
            Ok(_) => out.push(r),
            Err(e) => eprintln!("route {r:?} not used here: {e}"),
        }
    }
    out
}

/// The route the steady-state tests use.
fn heap() -> DmaRoute {
    DmaRoute::Heap("system".into())
}

fn gl() -> ImageProcessor {
    let p = ImageProcessor::with_backend(Backend::Gl)
        .unwrap_or_else(|e| panic!("the GL backend must start in the guest: {e}"));
    let info = p.gl_info().unwrap();
    eprintln!("{info}");
    assert!(
        info.dma_buf_import,
        "the guest's EGL display lacks EGL_EXT_image_dma_buf_import: {info}"
    );
    p
}

fn cpu() -> ImageProcessor {
    ImageProcessor::with_backend(Backend::Cpu).unwrap()
}

/// An image tensor in DMA memory allocated through `route`.
fn dma_image<T: Element>(layout: ImageLayout, route: &DmaRoute) -> Tensor<T> {
    let elems = layout.allocation_len(0).div_ceil(std::mem::size_of::<T>());
    let mut t = Tensor::<T>::new_dma_via(&[elems], route)
        .unwrap_or_else(|e| panic!("allocating {layout:?} through {route:?}: {e}"));
    t.set_layout(layout).unwrap();
    t
}

/// An image tensor over a GBM buffer (on vgem: a dumb buffer on the primary node, exported
/// by PRIME), the kind of buffer Mesa's kms_swrast imports; a camera would capture into it.
fn drm_image<T: Element>(layout: ImageLayout) -> Tensor<T> {
    dma_image(layout, &DmaRoute::Gbm(String::new()))
}

/// Allocates once through GBM so its process-wide device fd is open before fds are counted.
/// Opens what stays open for the life of the process before a test counts fds: the GBM
/// device, and the EGL display (pinframe never terminates a display: it is shared with
/// every other EGL user in the process), so the count sees only what one test leaks.
fn warm_up() {
    drop(Tensor::<u8>::new_dma_via(&[4096], &DmaRoute::Gbm(String::new())).unwrap());
    drop(ImageProcessor::with_backend(Backend::Gl));
}

fn aligned(w: u32, h: u32, f: PixelFormat, dt: pinframe::DType) -> ImageLayout {
    ImageLayout::with_row_alignment(w, h, f, dt, 64).unwrap()
}

fn fill_random(t: &mut Tensor<u8>, rng: &mut Rng) {
    t.map_mut()
        .unwrap()
        .iter_mut()
        .for_each(|b| *b = rng.byte());
}

/// Largest element difference (u8 steps, or 1/255 for floats) over the image rows.
fn max_diff<T: Readback>(a: &Tensor<T>, b: &Tensor<T>) -> f64 {
    let l = *a.layout().unwrap();
    let (ma, mb) = (a.map().unwrap(), b.map().unwrap());
    let (ba, bb) = (ma.buffer_bytes(0), mb.buffer_bytes(0));
    let e = std::mem::size_of::<T>();
    let scale = if e >= 2 { 255.0 } else { 1.0 };
    let mut worst = 0.0f64;
    for (i, p) in l.planes().iter().enumerate() {
        for r in 0..l.plane_height(i) as usize {
            let s = p.offset + r * p.stride;
            let ra: &[T] = bytemuck::cast_slice(&ba[s..s + l.plane_row_bytes(i)]);
            let rb: &[T] = bytemuck::cast_slice(&bb[s..s + l.plane_row_bytes(i)]);
            for (x, y) in ra.iter().zip(rb) {
                worst = worst.max((x.as_f64() - y.as_f64()).abs() * scale);
            }
        }
    }
    worst
}

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .map(|d| d.count())
        .unwrap_or(0)
}

#[test]
#[ignore = "VM lane: runs in the guest via scripts/vm-test"]
fn dma_sources_are_imported_and_destinations_rendered_into() {
    if skip_unless_vm("dma_sources_are_imported_and_destinations_rendered_into") {
        return;
    }
    let _l = lock();
    let mut rng = Rng::new(11);
    let mut worst = 0.0f64;
    for sf in [
        PixelFormat::Yuyv,
        PixelFormat::Uyvy,
        PixelFormat::Nv12,
        PixelFormat::Nv16,
        PixelFormat::I420,
        PixelFormat::Yv12,
        PixelFormat::Grey,
        PixelFormat::Rgb,
        PixelFormat::Rgba,
    ] {
        let mut g = gl();
        let mut c = cpu();
        let mut src = drm_image::<u8>(aligned(96, 64, sf, pinframe::DType::U8));
        fill_random(&mut src, &mut rng);
        let o = ConvertOptions {
            fit: Fit::Letterbox { pad: [114; 3] },
            ..Default::default()
        };
        // A u8 RGBA destination and a normalised planar f32 one, both dma-bufs.
        let mut d8 = drm_image::<u8>(aligned(64, 64, PixelFormat::Rgba, pinframe::DType::U8));
        let mut r8 = Tensor::<u8>::with_layout(*d8.layout().unwrap(), Some(Memory::Heap)).unwrap();
        g.convert_with(&src, &mut d8, &o).unwrap();
        c.convert_with(&src, &mut r8, &o).unwrap();
        let d = max_diff(&d8, &r8);
        assert!(d <= 2.0, "{sf} -> rgba u8: GL vs CPU differ by {d}");
        worst = worst.max(d);
        let of = ConvertOptions {
            normalize: Normalize::IMAGENET,
            ..o
        };
        let mut df = drm_image::<f32>(aligned(
            48,
            48,
            PixelFormat::PlanarRgb,
            pinframe::DType::F32,
        ));
        let mut rf = Tensor::<f32>::with_layout(*df.layout().unwrap(), Some(Memory::Heap)).unwrap();
        g.convert_with(&src, &mut df, &of).unwrap();
        c.convert_with(&src, &mut rf, &of).unwrap();
        let d = max_diff(&df, &rf);
        assert!(d <= 2.0, "{sf} -> planar f32: GL vs CPU differ by {d}");
        worst = worst.max(d);
        let s = g.stats();
        eprintln!("{sf}: {s:?}");
        assert_eq!(s.uploads, 0, "{sf}: the dma-buf source was uploaded");
        assert_eq!(s.readbacks, 0, "{sf}: a dma-buf destination was read back");
        // One source import (reused by the second convert) and two destinations.
        assert_eq!((s.imports, s.cache_hits), (3, 1), "{sf}");
        assert_eq!(g.gl_stats().unwrap().import_failures, 0);
    }
    eprintln!("dma-buf GL vs CPU max diff: {worst}");
}

#[test]
#[ignore = "VM lane: runs in the guest via scripts/vm-test"]
fn buffers_the_driver_cannot_map_are_uploaded_and_counted() {
    if skip_unless_vm("buffers_the_driver_cannot_map_are_uploaded_and_counted") {
        return;
    }
    let _l = lock();
    let before = gl_image_counters();
    let mut rng = Rng::new(14);
    let mut g = gl();
    let mut c = cpu();
    for route in routes() {
        let mut src = dma_image::<u8>(
            aligned(64, 32, PixelFormat::Nv12, pinframe::DType::U8),
            &route,
        );
        fill_random(&mut src, &mut rng);
        let mut d = dma_image::<u8>(
            aligned(32, 32, PixelFormat::Rgba, pinframe::DType::U8),
            &route,
        );
        let mut r = Tensor::<u8>::image(32, 32, PixelFormat::Rgba, Some(Memory::Heap)).unwrap();
        let before_stats = g.gl_stats().unwrap();
        g.convert(&src, &mut d).unwrap();
        c.convert(&src, &mut r).unwrap();
        assert!(max_diff(&d, &r) <= 2.0, "{route:?}");
        let after = g.gl_stats().unwrap();
        eprintln!("{route:?}: {after:?}");
        // Imported (a driver that maps it) or uploaded and counted; never a crash.
        let imported = after.imports - before_stats.imports;
        let failed = after.import_failures - before_stats.import_failures;
        assert_eq!(imported + failed, 2, "{route:?}: {after:?}");
        // A refused source is uploaded; a refused destination is read back.
        assert!(
            after.uploads - before_stats.uploads <= 1,
            "{route:?}: {after:?}"
        );
    }
    drop(g);
    let after = gl_image_counters();
    assert_eq!(after.live(), before.live(), "EGL images leaked");
}

#[test]
#[ignore = "VM lane: runs in the guest via scripts/vm-test"]
fn a_pool_of_four_buffers_is_imported_once_each() {
    if skip_unless_vm("a_pool_of_four_buffers_is_imported_once_each") {
        return;
    }
    let _l = lock();
    warm_up();
    let before = gl_image_counters();
    let fds_before = open_fds();
    let mut rng = Rng::new(12);
    {
        let mut g = gl();
        let mut pool: Vec<Tensor<u8>> = (0..4)
            .map(|_| drm_image(aligned(32, 32, PixelFormat::Nv12, pinframe::DType::U8)))
            .collect();
        for t in &mut pool {
            fill_random(t, &mut rng);
        }
        let mut dst = Tensor::<u8>::image(16, 16, PixelFormat::Rgb, Some(Memory::Heap)).unwrap();
        for i in 0..1000 {
            g.convert(&pool[i % 4], &mut dst).unwrap();
        }
        let s = g.stats();
        assert_eq!(s.imports, 4, "{s:?}");
        assert_eq!(s.cache_hits, 996, "{s:?}");
        assert_eq!(s.uploads, 0, "{s:?}");
        // NV12: two EGL images (Y and UV) per buffer.
        assert_eq!(g.gl_stats().unwrap().live_images, 8);
        // Dropping the tensors releases their images at the next opportunity.
        drop(pool);
        assert_eq!(g.gl_stats().unwrap().live_images, 0);
        let now = gl_image_counters();
        assert_eq!(now.created - before.created, 8);
        assert_eq!(now.destroyed - before.destroyed, 8);
    }
    let after = gl_image_counters();
    assert_eq!(after.live(), before.live(), "EGL images leaked");
    assert_eq!(open_fds(), fds_before, "fds leaked");
}

#[test]
#[ignore = "VM lane: runs in the guest via scripts/vm-test"]
fn the_cache_is_bounded_and_dropping_the_processor_releases_everything() {
    if skip_unless_vm("the_cache_is_bounded_and_dropping_the_processor_releases_everything") {
        return;
    }
    let _l = lock();
    let before = gl_image_counters();
    let mut g = ImageProcessor::with_gl_config(
        Backend::Gl,
        pinframe::GlConfig {
            cache_capacity: 3,
            ..Default::default()
        },
    )
    .unwrap();
    let pool: Vec<Tensor<u8>> = (0..5)
        .map(|_| drm_image(aligned(32, 16, PixelFormat::Yuyv, pinframe::DType::U8)))
        .collect();
    let mut dst = Tensor::<u8>::image(8, 8, PixelFormat::Rgb, Some(Memory::Heap)).unwrap();
    for t in &pool {
        g.convert(t, &mut dst).unwrap();
    }
    assert_eq!(g.stats().imports, 5);
    assert_eq!(g.gl_stats().unwrap().live_images, 3);
    // The evicted ones are imported again when used again.
    g.convert(&pool[0], &mut dst).unwrap();
    assert_eq!(g.stats().imports, 6);
    drop(g);
    let after = gl_image_counters();
    assert_eq!(after.live(), before.live());
}

#[test]
#[ignore = "VM lane: runs in the guest via scripts/vm-test"]
fn bad_buffers_are_errors_or_counted_fallbacks_without_leaks() {
    if skip_unless_vm("bad_buffers_are_errors_or_counted_fallbacks_without_leaks") {
        return;
    }
    let _l = lock();
    common::log_capture::install();
    warm_up();
    let before = gl_image_counters();
    let fds_before = open_fds();
    let mut rng = Rng::new(13);
    {
        let mut g = gl();
        let mut c = cpu();
        // A modifier the display cannot import (Intel X-tiling on a software driver):
        // refused before EGL is asked, counted, and the source is uploaded instead.
        let x_tiled = (1u64 << 56) | 1;
        let mut src = drm_image::<u8>(aligned(64, 32, PixelFormat::Yuyv, pinframe::DType::U8));
        fill_random(&mut src, &mut rng);
        let l = (*src.layout().unwrap()).with_modifier(x_tiled);
        src.set_layout(l).unwrap();
        let mut d = Tensor::<u8>::image(32, 32, PixelFormat::Rgb, Some(Memory::Heap)).unwrap();
        let mut r = Tensor::<u8>::image(32, 32, PixelFormat::Rgb, Some(Memory::Heap)).unwrap();
        g.convert(&src, &mut d).unwrap();
        c.convert(&src, &mut r).unwrap();
        assert!(max_diff(&d, &r) <= 2.0);
        let gs = g.gl_stats().unwrap();
        assert_eq!((gs.import_failures, gs.uploads), (1, 1), "{gs:?}");
        let warned = "a dma-buf source was not imported";
        assert_eq!(common::log_capture::warnings_here(warned), 1);
        // The refusal is remembered: the buffer is uploaded again, but neither retried,
        // nor counted (import_failures counts buffers), nor warned about again.
        for _ in 0..3 {
            g.convert(&src, &mut d).unwrap();
        }
        let gs = g.gl_stats().unwrap();
        assert_eq!((gs.import_failures, gs.uploads), (1, 4), "{gs:?}");
        assert_eq!(g.stats().import_failures, 1);
        assert_eq!(common::log_capture::warnings_here(warned), 1);
        // A destination row that is not a multiple of 4 bytes is read back, not imported.
        let mut odd = drm_image::<u8>(
            ImageLayout::tight(33, 8, PixelFormat::Rgb, pinframe::DType::U8).unwrap(),
        );
        let mut odd_ref = Tensor::<u8>::image(33, 8, PixelFormat::Rgb, Some(Memory::Heap)).unwrap();
        let plain = drm_image::<u8>(aligned(64, 32, PixelFormat::Yuyv, pinframe::DType::U8));
        g.convert(&plain, &mut odd).unwrap();
        c.convert(&plain, &mut odd_ref).unwrap();
        assert!(max_diff(&odd, &odd_ref) <= 2.0);
        assert_eq!(g.stats().readbacks, 5);
        // Under Backend::Gl, a request GL cannot do at all is an error, not a fallback.
        let planar = Tensor::<u8>::image(8, 8, PixelFormat::PlanarRgb, Some(Memory::Heap)).unwrap();
        assert!(g.convert(&planar, &mut d).is_err());
    }
    let after = gl_image_counters();
    assert_eq!(after.live(), before.live(), "EGL images leaked");
    assert_eq!(open_fds(), fds_before, "fds leaked");
}

#[test]
#[ignore = "VM lane: runs in the guest via scripts/vm-test"]
fn awkward_pitches_and_offsets_import_or_fall_back_without_leaks() {
    if skip_unless_vm("awkward_pitches_and_offsets_import_or_fall_back_without_leaks") {
        return;
    }
    let _l = lock();
    warm_up();
    let before = gl_image_counters();
    let fds_before = open_fds();
    let mut rng = Rng::new(15);
    {
        let mut g = gl();
        let mut c = cpu();
        let cases = [
            // A pitch that is not a multiple of the 4-byte AB24 texel.
            ImageLayout::with_stride(64, 8, PixelFormat::Yuyv, pinframe::DType::U8, 130).unwrap(),
            // An odd plane offset and pitch.
            ImageLayout::with_planes(
                60,
                8,
                PixelFormat::Grey,
                pinframe::DType::U8,
                &[pinframe::Plane::new(3, 61)],
            )
            .unwrap(),
            // NV12 with its chroma plane at an unaligned offset.
            ImageLayout::with_planes(
                32,
                8,
                PixelFormat::Nv12,
                pinframe::DType::U8,
                &[
                    pinframe::Plane::new(0, 32),
                    pinframe::Plane::new(32 * 8 + 6, 34),
                ],
            )
            .unwrap(),
        ];
        for l in cases {
            let mut src = drm_image::<u8>(l);
            fill_random(&mut src, &mut rng);
            let mut d = Tensor::<u8>::image(24, 24, PixelFormat::Rgb, Some(Memory::Heap)).unwrap();
            let mut r = Tensor::<u8>::image(24, 24, PixelFormat::Rgb, Some(Memory::Heap)).unwrap();
            g.convert(&src, &mut d).unwrap();
            c.convert(&src, &mut r).unwrap();
            let diff = max_diff(&d, &r);
            eprintln!("{l:?}: {:?}, diff {diff}", g.gl_stats().unwrap());
            assert!(diff <= 2.0, "{l:?}: {diff}");
        }
        let s = g.gl_stats().unwrap();
        assert_eq!(s.imports + s.import_failures, 3, "{s:?}");
        assert_eq!(s.uploads, s.import_failures, "{s:?}");
    }
    let after = gl_image_counters();
    assert_eq!(after.live(), before.live(), "EGL images leaked");
    assert_eq!(open_fds(), fds_before, "fds leaked");
}

/// The whole path on the guest: vivid captures YUYV frames straight into a pool of four
/// GBM buffers (V4L2 DMABUF import); each frame is imported into GL, converted into a
/// dma-buf destination and equals the CPU path; the pool is imported once per buffer.
#[cfg(feature = "camera")]
#[test]
#[ignore = "VM lane: runs in the guest via scripts/vm-test"]
fn camera_frames_go_to_a_dma_buf_tensor_without_copies() {
    if skip_unless_vm("camera_frames_go_to_a_dma_buf_tensor_without_copies") {
        return;
    }
    use std::os::fd::AsRawFd;
    use v4l::v4l_sys::*;
    use v4l::v4l2::vidioc;
    use v4l::video::Capture;
    let _l = lock();
    warm_up();
    let before = gl_image_counters();
    let fds_before = open_fds();
    {
        let path = std::env::var("PINFRAME_VM_VIDEO").unwrap_or_else(|_| "/dev/video0".into());
        let dev = v4l::Device::with_path(&path).unwrap();
        let mut fmt = dev.format().unwrap();
        fmt.width = 640;
        fmt.height = 480;
        fmt.fourcc = v4l::FourCC::new(b"YUYV");
        fmt.stride = 0;
        let fmt = dev.set_format(&fmt).unwrap();
        assert_eq!((fmt.width, fmt.height), (640, 480));
        let layout = ImageLayout::with_stride(
            640,
            480,
            PixelFormat::Yuyv,
            pinframe::DType::U8,
            fmt.stride as usize,
        )
        .unwrap();
        let pool: Vec<Tensor<u8>> = (0..4).map(|_| drm_image(layout)).collect();
        let fd = dev.handle().fd();
        let ioctl = |code, arg: *mut std::ffi::c_void| {
            // SAFETY: every call below passes a pointer to the matching, initialised v4l2
            // struct for `code`, alive for the call.
            unsafe { v4l::v4l2::ioctl(fd, code, arg) }
        };
        // SAFETY: plain-old-data v4l2 structs; all-zero is a valid initial value.
        let mut req: v4l2_requestbuffers = unsafe { std::mem::zeroed() };
        req.count = 4;
        req.type_ = v4l2_buf_type_V4L2_BUF_TYPE_VIDEO_CAPTURE;
        req.memory = v4l2_memory_V4L2_MEMORY_DMABUF;
        ioctl(vidioc::VIDIOC_REQBUFS, &mut req as *mut _ as *mut _).unwrap();
        assert_eq!(req.count, 4);
        let queue = |index: u32| {
            // SAFETY: as above.
            let mut buf: v4l2_buffer = unsafe { std::mem::zeroed() };
            buf.index = index;
            buf.type_ = v4l2_buf_type_V4L2_BUF_TYPE_VIDEO_CAPTURE;
            buf.memory = v4l2_memory_V4L2_MEMORY_DMABUF;
            let t = &pool[index as usize];
            buf.m.fd = t.fd().unwrap().as_raw_fd();
            buf.length = t.buffer_len(0).unwrap() as u32;
            ioctl(vidioc::VIDIOC_QBUF, &mut buf as *mut _ as *mut _).unwrap();
        };
        for i in 0..4 {
            queue(i);
        }
        let mut ty = v4l2_buf_type_V4L2_BUF_TYPE_VIDEO_CAPTURE;
        ioctl(vidioc::VIDIOC_STREAMON, &mut ty as *mut _ as *mut _).unwrap();
        let mut g = gl();
        let mut c = cpu();
        let o = ConvertOptions {
            fit: Fit::Letterbox { pad: [114; 3] },
            ..Default::default()
        };
        let mut dst = drm_image::<u8>(aligned(320, 320, PixelFormat::Rgba, pinframe::DType::U8));
        let mut reference =
            Tensor::<u8>::image(320, 320, PixelFormat::Rgba, Some(Memory::Heap)).unwrap();
        let mut seen = std::collections::BTreeSet::new();
        for frame in 0..12 {
            let mut pfd = libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd, alive for the call.
            let ready = unsafe { libc::poll(&mut pfd, 1, 10_000) };
            assert_eq!(ready, 1, "no frame from vivid within 10 s");
            // SAFETY: as above.
            let mut buf: v4l2_buffer = unsafe { std::mem::zeroed() };
            buf.type_ = v4l2_buf_type_V4L2_BUF_TYPE_VIDEO_CAPTURE;
            buf.memory = v4l2_memory_V4L2_MEMORY_DMABUF;
            ioctl(vidioc::VIDIOC_DQBUF, &mut buf as *mut _ as *mut _).unwrap();
            let src = &pool[buf.index as usize];
            seen.insert(buf.index);
            g.convert_with(src, &mut dst, &o).unwrap();
            if frame % 4 == 0 {
                c.convert_with(src, &mut reference, &o).unwrap();
                let d = max_diff(&dst, &reference);
                assert!(d <= 2.0, "frame {frame}: GL vs CPU differ by {d}");
            }
            queue(buf.index);
        }
        ioctl(vidioc::VIDIOC_STREAMOFF, &mut ty as *mut _ as *mut _).unwrap();
        let s = g.stats();
        eprintln!("camera: buffers used {seen:?}, {s:?}");
        assert_eq!(s.uploads, 0, "{s:?}");
        assert_eq!(s.readbacks, 0, "{s:?}");
        // Each pool buffer that carried a frame, plus the destination, imported once.
        assert_eq!(s.imports, seen.len() as u64 + 1, "{s:?}");
        assert_eq!(s.cache_hits, 2 * 12 - s.imports, "{s:?}");
        // Release the V4L2 queue's references before the buffers go.
        req.count = 0;
        ioctl(vidioc::VIDIOC_REQBUFS, &mut req as *mut _ as *mut _).unwrap();
    }
    let after = gl_image_counters();
    assert_eq!(after.live(), before.live(), "EGL images leaked");
    assert_eq!(open_fds(), fds_before, "fds leaked");
}
