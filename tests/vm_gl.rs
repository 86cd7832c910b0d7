//! The GL backend on real dma-bufs, in the VM lane's guest (vgem + Mesa kms_swrast, where
//! EGL_EXT_image_dma_buf_import exists): sources imported (not uploaded), destinations
//! rendered into (not read back), a pool of camera-like buffers imported once each, the
//! EGL image cache emptied when tensors drop, every eglDestroyImage inside the exclusive
//! side of the CPU-mapping guard, and bad buffers handled without crashes or leaks.
//! On the host they are listed as ignored; `scripts/vm-test` runs them in the guest.

mod common;
#[path = "common/reference.rs"]
mod reference;

use std::sync::Mutex;

use common::skip_unless_vm;
use pinframe::tensor::DmaRoute;
use pinframe::{
    Backend, ConvertOptions, Element, Fit, ImageLayout, ImageProcessor, Memory, Normalize,
    PixelFormat, Tensor, gl_image_counters,
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

/// An image tensor over a vgem dumb buffer (a DRM GEM buffer exported by PRIME), the
/// kind of buffer Mesa's kms_swrast can import; a camera would capture into it.
fn dumb_image<T: Element>(layout: ImageLayout) -> Tensor<T> {
    use std::os::fd::{FromRawFd, OwnedFd};
    #[repr(C)]
    #[derive(Default)]
    struct CreateDumb {
        height: u32,
        width: u32,
        bpp: u32,
        flags: u32,
        handle: u32,
        pitch: u32,
        size: u64,
    }
    #[repr(C)]
    #[derive(Default)]
    struct PrimeHandle {
        handle: u32,
        flags: u32,
        fd: i32,
    }
    const CREATE_DUMB: libc::c_ulong = 0xC020_64B2;
    const PRIME_HANDLE_TO_FD: libc::c_ulong = 0xC00C_642D;
    let card = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/dri/card0")
        .expect("vgem's /dev/dri/card0");
    let len = layout.allocation_len(0);
    let mut cd = CreateDumb {
        width: 1024,
        height: len.div_ceil(4096) as u32,
        bpp: 32,
        ..Default::default()
    };
    use std::os::fd::AsRawFd;
    // SAFETY: DRM_IOCTL_MODE_CREATE_DUMB on an open DRM fd with its argument struct.
    let r = unsafe { libc::ioctl(card.as_raw_fd(), CREATE_DUMB, &mut cd) };
    assert_eq!(r, 0, "CREATE_DUMB: {}", std::io::Error::last_os_error());
    let mut ph = PrimeHandle {
        handle: cd.handle,
        flags: (libc::O_CLOEXEC | libc::O_RDWR) as u32,
        fd: -1,
    };
    // SAFETY: DRM_IOCTL_PRIME_HANDLE_TO_FD with its argument struct.
    let r = unsafe { libc::ioctl(card.as_raw_fd(), PRIME_HANDLE_TO_FD, &mut ph) };
    assert_eq!(
        r,
        0,
        "PRIME_HANDLE_TO_FD: {}",
        std::io::Error::last_os_error()
    );
    // SAFETY: the ioctl returned a new fd that nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(ph.fd) };
    // The GEM handle stays alive through the exported dma-buf after `card` closes.
    Tensor::<T>::import(fd, layout).unwrap()
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
    let l = a.layout().unwrap().clone();
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
        let mut src = dumb_image::<u8>(aligned(96, 64, sf, pinframe::DType::U8));
        fill_random(&mut src, &mut rng);
        let o = ConvertOptions {
            fit: Fit::Letterbox { pad: [114; 3] },
            ..Default::default()
        };
        // A u8 RGBA destination and a normalised planar f32 one, both dma-bufs.
        let mut d8 = dumb_image::<u8>(aligned(64, 64, PixelFormat::Rgba, pinframe::DType::U8));
        let mut r8 =
            Tensor::<u8>::with_layout(d8.layout().unwrap().clone(), Some(Memory::Heap)).unwrap();
        g.convert_with(&src, &mut d8, &o).unwrap();
        c.convert_with(&src, &mut r8, &o).unwrap();
        let d = max_diff(&d8, &r8);
        assert!(d <= 2.0, "{sf} -> rgba u8: GL vs CPU differ by {d}");
        worst = worst.max(d);
        let of = ConvertOptions {
            normalize: Normalize::IMAGENET,
            ..o
        };
        let mut df = dumb_image::<f32>(aligned(
            48,
            48,
            PixelFormat::PlanarRgb,
            pinframe::DType::F32,
        ));
        let mut rf =
            Tensor::<f32>::with_layout(df.layout().unwrap().clone(), Some(Memory::Heap)).unwrap();
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
    assert_eq!(after.destroyed_inside_guard, after.destroyed);
}

#[test]
#[ignore = "VM lane: runs in the guest via scripts/vm-test"]
fn a_pool_of_four_buffers_is_imported_once_each() {
    if skip_unless_vm("a_pool_of_four_buffers_is_imported_once_each") {
        return;
    }
    let _l = lock();
    let before = gl_image_counters();
    let fds_before = open_fds();
    let mut rng = Rng::new(12);
    {
        let mut g = gl();
        let mut pool: Vec<Tensor<u8>> = (0..4)
            .map(|_| dumb_image(aligned(32, 32, PixelFormat::Nv12, pinframe::DType::U8)))
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
    assert_eq!(
        after.destroyed_inside_guard - before.destroyed_inside_guard,
        after.destroyed - before.destroyed,
        "an eglDestroyImage ran outside with_cpu_mappings_excluded"
    );
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
        .map(|_| dumb_image(aligned(32, 16, PixelFormat::Yuyv, pinframe::DType::U8)))
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
    assert_eq!(after.destroyed_inside_guard, after.destroyed);
}

#[test]
#[ignore = "VM lane: runs in the guest via scripts/vm-test"]
fn bad_buffers_are_errors_or_counted_fallbacks_without_leaks() {
    if skip_unless_vm("bad_buffers_are_errors_or_counted_fallbacks_without_leaks") {
        return;
    }
    let _l = lock();
    let before = gl_image_counters();
    let fds_before = open_fds();
    let mut rng = Rng::new(13);
    {
        let mut g = gl();
        let mut c = cpu();
        // A modifier the display cannot import (Intel X-tiling on a software driver):
        // refused before EGL is asked, counted, and the source is uploaded instead.
        let x_tiled = (1u64 << 56) | 1;
        let mut src = dumb_image::<u8>(aligned(64, 32, PixelFormat::Yuyv, pinframe::DType::U8));
        fill_random(&mut src, &mut rng);
        let l = src.layout().unwrap().clone().with_modifier(x_tiled);
        src.set_layout(l).unwrap();
        let mut d = Tensor::<u8>::image(32, 32, PixelFormat::Rgb, Some(Memory::Heap)).unwrap();
        let mut r = Tensor::<u8>::image(32, 32, PixelFormat::Rgb, Some(Memory::Heap)).unwrap();
        g.convert(&src, &mut d).unwrap();
        c.convert(&src, &mut r).unwrap();
        assert!(max_diff(&d, &r) <= 2.0);
        let gs = g.gl_stats().unwrap();
        assert_eq!((gs.import_failures, gs.uploads), (1, 1), "{gs:?}");
        // The refusal is remembered (no second eglCreateImage), still counted.
        g.convert(&src, &mut d).unwrap();
        let gs = g.gl_stats().unwrap();
        assert_eq!((gs.import_failures, gs.uploads), (2, 2), "{gs:?}");
        // A destination row that is not a multiple of 4 bytes is read back, not imported.
        let mut odd = dumb_image::<u8>(
            ImageLayout::tight(33, 8, PixelFormat::Rgb, pinframe::DType::U8).unwrap(),
        );
        let mut odd_ref = Tensor::<u8>::image(33, 8, PixelFormat::Rgb, Some(Memory::Heap)).unwrap();
        let plain = dumb_image::<u8>(aligned(64, 32, PixelFormat::Yuyv, pinframe::DType::U8));
        g.convert(&plain, &mut odd).unwrap();
        c.convert(&plain, &mut odd_ref).unwrap();
        assert!(max_diff(&odd, &odd_ref) <= 2.0);
        assert_eq!(g.stats().readbacks, 3);
        // Under Backend::Gl, a request GL cannot do at all is an error, not a fallback.
        let planar = Tensor::<u8>::image(8, 8, PixelFormat::PlanarRgb, Some(Memory::Heap)).unwrap();
        assert!(g.convert(&planar, &mut d).is_err());
    }
    let after = gl_image_counters();
    assert_eq!(after.live(), before.live(), "EGL images leaked");
    assert_eq!(after.destroyed_inside_guard, after.destroyed);
    assert_eq!(open_fds(), fds_before, "fds leaked");
}
