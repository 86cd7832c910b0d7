//! Camera faults for real, in the VM lane's guest: vivid's own fault injection (its
//! "Percentage of Dropped Buffers", "Inject V4L2_BUF_FLAG_ERROR", "Inject VIDIOC_QBUF
//! Error", "Inject VIDIOC_STREAMON Error", "Inject VIDIOC_REQBUFS Error", "Inject Fatal
//! Streaming Error" and "Disconnect" controls) on the two vivid webcams reserved for it
//! (`PINFRAME_VM_WEBCAM0`/`1`/`2`: 320x180 at 60 fps, see scripts/vm/mkinitramfs). Every
//! fault is counted once in the camera's stats and every buffer stays accounted for.
//! vivid's disconnect unregisters its instance's node (every open fd then gets `ENODEV`),
//! so it runs last (`zz_`), on webcam 1, which nothing uses afterwards.
//!
//! On the host every test is ignored (and prints SKIPPED when forced);
//! `scripts/vm-test --test vm_camera_faults` runs them.
#![cfg(feature = "camera")]
#![cfg_attr(not(feature = "gl"), allow(dead_code, unused_imports))]

mod common;

use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use pinframe::camera::{BufferMode, Camera, CameraConfig, CameraStats, Frame};
use pinframe::tensor::DmaRoute;
use pinframe::{Backend, ErrorKind, ImageProcessor, Memory, PixelFormat, Tensor};

/// Frames the soak delivers, over both paths together.
const SOAK_FRAMES: u64 = 10_000;
/// vivid drops this percentage of buffers during the soak.
const DROP_PERCENT: i64 = 3;
/// An error flag is injected every this many frames.
const ERROR_EVERY: u64 = 100;
const BUFFERS: u32 = 8;

fn webcam(n: u32) -> String {
    let var = format!("PINFRAME_VM_WEBCAM{n}");
    match std::env::var(&var) {
        Ok(v) if !v.is_empty() => v,
        _ => panic!("{var} is not set: scripts/vm/guest-run.sh found no such vivid webcam"),
    }
}

/// vivid's controls on one node, found by name (`VIDIOC_QUERY_EXT_CTRL`) and set with
/// `VIDIOC_S_EXT_CTRLS` on a second fd of the node (controls are not owned by the
/// streaming fd).
struct Controls {
    dev: v4l::Device,
    ids: Vec<(String, u32)>,
}

impl Controls {
    fn open(path: &str) -> Controls {
        let dev = v4l::Device::with_path(path).unwrap();
        let ids = dev
            .query_controls()
            .unwrap()
            .into_iter()
            .map(|c| (c.name, c.id))
            .collect();
        Controls { dev, ids }
    }

    fn id(&self, name: &str) -> u32 {
        self.ids
            .iter()
            .find(|(n, _)| n == name)
            .unwrap_or_else(|| panic!("vivid has no control {name:?}: {:?}", self.ids))
            .1
    }

    fn set(&self, name: &str, value: i64) {
        let id = self.id(name);
        self.dev
            .set_control(v4l::control::Control {
                id,
                value: v4l::control::Value::Integer(value),
            })
            .unwrap_or_else(|e| panic!("setting {name:?} to {value}: {e}"));
    }

    fn press(&self, name: &str) {
        let id = self.id(name);
        self.dev
            .set_control(v4l::control::Control {
                id,
                value: v4l::control::Value::None,
            })
            .unwrap_or_else(|e| panic!("pressing {name:?}: {e}"));
    }
}

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

/// `/proc/self/maps`: all entries, the shared mappings of buffers (dma-bufs, memfds)
/// outside the DRM nodes, and those of the DRM nodes (Mesa's kms_swrast maps the dumb
/// buffers it draws from and to, and drops those mappings as it sees fit). Buffer leaks
/// show in the second; anonymous mappings come and go with threads and the allocator
/// (their memory is in the RSS check).
fn maps() -> (usize, usize, usize) {
    let text = std::fs::read_to_string("/proc/self/maps").unwrap();
    let shared = |l: &&str| {
        l.split_whitespace()
            .nth(1)
            .is_some_and(|p| p.ends_with('s'))
    };
    let drm = text.lines().filter(|l| l.contains("/dev/dri/")).count();
    let buffers = text.lines().filter(shared).count() - drm;
    (text.lines().count(), buffers, drm)
}

// Counts every Rust allocation: every test in this binary runs alone in the guest, one at
// a time, so nothing else is counted while the soak runs.
#[global_allocator]
static ALLOCATOR: common::counting_alloc::CountingAllocator =
    common::counting_alloc::CountingAllocator;

/// The heap now: (bytes the Rust heap holds, Rust allocations so far, bytes glibc's
/// malloc has handed out and not had back over all its arenas, Mesa's and libc's own
/// allocations included).
fn heap() -> (i64, u64, u64) {
    // SAFETY: mallinfo2 has no preconditions; it locks each arena while it sums it.
    let info = unsafe { libc::mallinfo2() };
    (
        common::counting_alloc::live_bytes(),
        common::counting_alloc::allocations(),
        (info.uordblks + info.hblkhd) as u64,
    )
}

/// Resident anonymous, file-backed and shared-memory KiB (`/proc/self/status`): where an
/// RSS step comes from.
fn rss_parts() -> [u64; 3] {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    ["RssAnon:", "RssFile:", "RssShmem:"].map(|key| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    })
}

fn rss_kib() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    // SAFETY: sysconf has no preconditions.
    pages * unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as u64 / 1024
}

fn live_egl_images() -> u64 {
    #[cfg(feature = "gl")]
    {
        pinframe::testing::gl_image_counters().live()
    }
    #[cfg(not(feature = "gl"))]
    0
}

/// A webcam capture of 320x180 YUYV at 60 fps.
fn config(mode: BufferMode) -> CameraConfig {
    CameraConfig::new(320, 180, PixelFormat::Yuyv)
        .with_buffer_mode(mode)
        .with_buffers(BUFFERS)
        .with_fps(60)
}

fn assert_balanced(cam: &Camera, what: &str) {
    let a = cam.buffer_accounting().unwrap();
    assert!(a.is_balanced(), "{what}: {a:?}");
    assert_eq!(
        a.idle, 0,
        "{what}: a buffer waits to be queued again: {a:?}"
    );
    assert_eq!(a.pinned, 0, "{what}: {a:?}");
}

/// What one soak path saw.
struct Soak {
    what: &'static str,
    stats: CameraStats,
    injected_errors: u64,
    span: u64,
    took: Duration,
}

/// `frames` frames from `cam` through `sink` while vivid drops `DROP_PERCENT` % of its
/// buffers and an error flag is injected every `ERROR_EVERY` frames (one at a time: the
/// next only after the camera counted the last). Waits at `barrier` after the warm-up
/// and after the soak (the main thread measures the process in between), and once more
/// before the camera drops.
fn soak(
    what: &'static str,
    path: &str,
    mode: BufferMode,
    route: Option<DmaRoute>,
    frames: u64,
    barrier: &Barrier,
    mut sink: impl FnMut(&Frame),
) -> Soak {
    let controls = Controls::open(path);
    controls.set("Percentage of Dropped Buffers", 0);
    let mut config = config(mode);
    if let Some(r) = route {
        config = config.with_dma_route(r);
    }
    let mut cam = Camera::open(path, config).unwrap_or_else(|e| panic!("{what}: {e}"));
    eprintln!("{what}: {} {}", cam.format(), cam.buffer_mode());
    assert_eq!(
        cam.format().fps(),
        Some(60.0),
        "{what}: the webcam's fastest rate"
    );
    let mut first = None;
    let mut last = 0;
    let mut next = |cam: &mut Camera, sink: &mut dyn FnMut(&Frame)| {
        let frame = cam
            .next_frame()
            .unwrap_or_else(|e| panic!("{what}: frame {}: {e}", cam.stats().frames));
        first.get_or_insert(frame.sequence());
        last = frame.sequence();
        sink(&frame);
    };
    // Warm-up: every buffer imported / mapped once.
    for _ in 0..2 * BUFFERS {
        next(&mut cam, &mut sink);
    }
    assert_balanced(&cam, what);
    barrier.wait();
    let start = Instant::now();
    controls.set("Percentage of Dropped Buffers", DROP_PERCENT);
    let mut injected = 0u64;
    let mut pending: Option<u64> = None;
    let target = cam.stats().frames + frames;
    while cam.stats().frames < target || pending.is_some() {
        let s = cam.stats();
        if let Some(at) = pending
            && s.errors > at
        {
            assert_eq!(s.errors, at + 1, "{what}: one injection, one error buffer");
            pending = None;
        }
        if pending.is_none() && s.frames.is_multiple_of(ERROR_EVERY) && s.frames < target {
            pending = Some(s.errors);
            controls.press("Inject V4L2_BUF_FLAG_ERROR");
            injected += 1;
        }
        next(&mut cam, &mut sink);
        if cam.stats().frames.is_multiple_of(1000) {
            assert_balanced(&cam, &format!("{what} at {} frames", cam.stats().frames));
        }
    }
    controls.set("Percentage of Dropped Buffers", 0);
    let took = start.elapsed();
    assert_balanced(&cam, what);
    let stats = cam.stats();
    barrier.wait();
    barrier.wait();
    drop(cam);
    Soak {
        what,
        stats,
        injected_errors: injected,
        span: u64::from(last - first.unwrap() + 1),
        took,
    }
}

/// The soak's split of [`SOAK_FRAMES`]: GL under llvmpipe in the TCG guest manages 9-15
/// fps while the CPU paths run, a CPU path about 50 (vivid's webcam gives 60), so GL takes
/// 600 frames and two CPU paths the rest; all three run at once.
const GL_FRAMES: u64 = 600;
const CPU_FRAMES: u64 = (SOAK_FRAMES - GL_FRAMES) / 2;

/// The lines of `/proc/self/maps` in `after` and not in `before` (and the reverse).
fn maps_diff(before: &str, after: &str) -> String {
    let b: std::collections::HashSet<&str> = before.lines().collect();
    let a: std::collections::HashSet<&str> = after.lines().collect();
    let mut out: Vec<String> = a.difference(&b).map(|l| format!("+ {l}")).collect();
    out.extend(b.difference(&a).map(|l| format!("- {l}")));
    out.sort();
    out.join("\n")
}

/// 10,000 frames with injected drops and error flags: 600 through camera → GL → a
/// dma-buf destination (DMABUF capture into GBM buffers), 2 x 4,700 through camera → CPU
/// (one webcam in MMAP + EXPBUF buffers, one in DMABUF dma-heap buffers), all at once on
/// three webcams. Every buffer accounted for all along (checked against
/// `VIDIOC_QUERYBUF` every 1,000 frames), each injected error flag counted exactly once,
/// every sequence number counted once (frame, error or drop; vivid repeats a number now
/// and then under TCG's timing, which is counted too), and fds, mappings, live
/// EGL images flat from after the warm-up to the end (Mesa's own mappings of the DRM
/// node, which kms_swrast makes and drops as it draws, bounded by the live images), and
/// the heap flat to within a few bytes a frame: every Rust allocation counted by this
/// binary's allocator, every malloc (Mesa's too) by glibc's `mallinfo2`; RSS within
/// loose bounds.
#[cfg(feature = "gl")]
#[test]
#[ignore = "VM lane: runs in the guest via scripts/vm-test"]
fn a_soak_with_injected_faults_loses_no_buffer_and_counts_each_fault_once() {
    if common::skip_unless_vm(
        "a_soak_with_injected_faults_loses_no_buffer_and_counts_each_fault_once",
    ) {
        return;
    }
    let gbm = DmaRoute::Gbm(String::new());
    // Open the process's shared GBM/render-node fd before anything is counted.
    drop(Tensor::<u8>::new_dma_via(&[4096], &gbm).unwrap());
    drop(Tensor::<u8>::new(&[4096], Some(Memory::Dma)).unwrap());
    let barrier = Arc::new(Barrier::new(4));
    let gl_checks = Arc::new(Mutex::new(None));
    let gl = {
        let (barrier, checks, path) = (barrier.clone(), gl_checks.clone(), webcam(0));
        std::thread::spawn(move || {
            let mut gl = ImageProcessor::with_backend(Backend::Gl).unwrap();
            let mut cpu = ImageProcessor::with_backend(Backend::Cpu).unwrap();
            let layout = pinframe::ImageLayout::with_row_alignment(
                64,
                64,
                PixelFormat::Rgba,
                pinframe::DType::U8,
                64,
            )
            .unwrap();
            let mut dst = Tensor::<u8>::new_dma_via(&[layout.allocation_len(0)], &gbm).unwrap();
            dst.set_layout(layout).unwrap();
            let mut reference =
                Tensor::<u8>::image(64, 64, PixelFormat::Rgba, Some(Memory::Heap)).unwrap();
            let mut n = 0u64;
            let report = soak(
                "camera -> GL -> dma-buf",
                &path,
                BufferMode::Dmabuf,
                Some(gbm.clone()),
                GL_FRAMES,
                &barrier,
                |frame| {
                    gl.convert(frame, &mut dst).unwrap();
                    // Now and then (and on every buffer of the warm-up, so that the CPU
                    // mappings this makes all exist before the soak), the GL output
                    // against the CPU path.
                    if n < 2 * u64::from(BUFFERS) || n.is_multiple_of(250) {
                        cpu.convert(frame, &mut reference).unwrap();
                        let (a, b) = (dst.map().unwrap(), reference.map().unwrap());
                        let stride = layout.planes()[0].stride;
                        let worst = (0..64usize)
                            .flat_map(|y| (0..256usize).map(move |x| (y, x)))
                            .map(|(y, x)| {
                                let p = a.buffer_bytes(0)[y * stride + x];
                                (p as i32 - b[y * 256 + x] as i32).abs()
                            })
                            .max()
                            .unwrap();
                        assert!(worst <= 2, "frame {n}: GL and CPU differ by {worst}");
                    }
                    n += 1;
                },
            );
            *checks.lock().unwrap() = Some(gl.stats());
            report
        })
    };
    let cpu = |what: &'static str, path: String, mode: BufferMode| {
        let barrier = barrier.clone();
        std::thread::spawn(move || {
            let mut cpu = ImageProcessor::with_backend(Backend::Cpu).unwrap();
            let mut dst =
                Tensor::<f32>::image(64, 64, PixelFormat::PlanarRgb, Some(Memory::Heap)).unwrap();
            soak(what, &path, mode, None, CPU_FRAMES, &barrier, |frame| {
                cpu.convert(frame, &mut dst).unwrap();
            })
        })
    };
    let cpu_mmap = cpu("camera -> CPU (mmap)", webcam(1), BufferMode::Mmap);
    let cpu_dmabuf = cpu("camera -> CPU (dmabuf)", webcam(2), BufferMode::Dmabuf);
    // RSS and the heap every 10 s of the soak: flat, or growing with the frames? (The
    // sampler thread starts before anything is measured: a thread adds a stack and a
    // malloc arena.)
    let soaking = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let (tx, rx) = std::sync::mpsc::channel::<Instant>();
    let sampler = {
        let soaking = soaking.clone();
        std::thread::spawn(move || {
            let start = rx.recv().unwrap();
            let mut samples = Vec::with_capacity(64);
            while soaking.load(std::sync::atomic::Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(100));
                if samples.len() < (start.elapsed().as_secs() / 10) as usize
                    && samples.len() < samples.capacity()
                {
                    let (rust, _, malloc) = heap();
                    samples.push((rss_kib(), rust / 1024, malloc / 1024));
                }
            }
            samples
        })
    };
    barrier.wait();
    let start = Instant::now();
    tx.send(start).unwrap();
    let maps_before = std::fs::read_to_string("/proc/self/maps").unwrap();
    let heap_before = heap();
    let rss_parts_before = rss_parts();
    let before = (
        open_fds(),
        maps(),
        live_egl_images(),
        rss_kib(),
        pinframe::testing::live_cpu_mappings(),
    );
    barrier.wait();
    let took = start.elapsed();
    soaking.store(false, std::sync::atomic::Ordering::Relaxed);
    let series = sampler.join().unwrap();
    let heap_after = heap();
    let rss_parts_after = rss_parts();
    let maps_after = std::fs::read_to_string("/proc/self/maps").unwrap();
    let after = (
        open_fds(),
        maps(),
        live_egl_images(),
        rss_kib(),
        pinframe::testing::live_cpu_mappings(),
    );
    barrier.wait();
    let reports = [
        gl.join().unwrap(),
        cpu_mmap.join().unwrap(),
        cpu_dmabuf.join().unwrap(),
    ];
    let gl_stats = gl_checks.lock().unwrap().take().unwrap();
    let mut frames = 0;
    for r in &reports {
        let s = r.stats;
        let soaked = s.frames - 2 * u64::from(BUFFERS);
        eprintln!(
            "{}: {soaked} frames in {:.1} s ({:.1} fps) after {} of warm-up; sequence span {}: \
             {} dropped (vivid drops {DROP_PERCENT}%: about {} of them), {} error-flagged of {} \
             injected, {} empty, {} malformed, {} repeated sequence numbers, {} failed requeues",
            r.what,
            r.took.as_secs_f64(),
            soaked as f64 / r.took.as_secs_f64(),
            2 * BUFFERS,
            r.span,
            s.dropped,
            r.span * DROP_PERCENT as u64 / 100,
            s.errors,
            r.injected_errors,
            s.empty,
            s.malformed,
            s.repeated,
            s.requeue_failures
        );
        assert_eq!(
            s.errors, r.injected_errors,
            "{}: each error flag counted once",
            r.what
        );
        assert!(
            r.injected_errors >= soaked / ERROR_EVERY * 4 / 5,
            "{}: {} injected",
            r.what,
            r.injected_errors
        );
        assert_eq!(
            s.frames + s.errors + s.empty + s.malformed + s.dropped - s.repeated,
            r.span,
            "{}: every sequence number counted once: {s:?}",
            r.what
        );
        assert!(
            s.dropped >= r.span * DROP_PERCENT as u64 / 200,
            "{}: vivid's injected drops show as gaps: {s:?}",
            r.what
        );
        assert_eq!(
            (s.empty, s.malformed, s.requeue_failures),
            (0, 0, 0),
            "{}",
            r.what
        );
        frames += soaked;
    }
    eprintln!("GL stats: {gl_stats:?}");
    let rss_series: Vec<u64> = series.iter().map(|s| s.0).collect();
    eprintln!(
        "every 10 s of the soak (KiB): RSS {rss_series:?}, Rust heap {:?}, malloc in use {:?}",
        series.iter().map(|s| s.1).collect::<Vec<_>>(),
        series.iter().map(|s| s.2).collect::<Vec<_>>()
    );
    let rust_growth = heap_after.0 - heap_before.0;
    let malloc_growth = heap_after.2 as i64 - heap_before.2 as i64;
    eprintln!(
        "heap after warm-up -> after the soak: Rust {} -> {} bytes ({} allocations), malloc \
         in use {} -> {} bytes; RSS anon/file/shmem {:?} -> {:?} KiB",
        heap_before.0,
        heap_after.0,
        heap_after.1 - heap_before.1,
        heap_before.2,
        heap_after.2,
        rss_parts_before,
        rss_parts_after
    );
    eprintln!(
        "soak of {frames} frames in {:.1} s; process after warm-up -> after the soak: fds {} -> \
         {}, /proc/self/maps entries {} -> {} (shared buffer mappings {} -> {}; Mesa's of the \
         DRM node {} -> {}), pinframe's live CPU mappings {} -> {}, live EGL images {} -> {}, \
         RSS {} -> {} KiB",
        took.as_secs_f64(),
        before.0,
        after.0,
        before.1.0,
        after.1.0,
        before.1.1,
        after.1.1,
        before.1.2,
        after.1.2,
        before.4,
        after.4,
        before.2,
        after.2,
        before.3,
        after.3
    );
    assert!(frames >= SOAK_FRAMES, "{frames}");
    assert_eq!(
        gl_stats.uploads, 0,
        "camera frames imported, never uploaded"
    );
    assert_eq!(
        gl_stats.readbacks, 0,
        "rendered into the dma-buf, never read back"
    );
    assert_eq!(after.0, before.0, "fd count");
    assert_eq!(
        after.1.1,
        before.1.1,
        "buffer mappings; changed:\n{}",
        maps_diff(&maps_before, &maps_after)
    );
    assert_eq!(after.4, before.4, "pinframe's live CPU mappings");
    assert!(
        after.1.2 as u64 <= 2 * after.2,
        "Mesa maps at most each live image's buffer (twice): {} mappings for {} images",
        after.1.2,
        after.2
    );
    assert!(
        after.1.0 <= before.1.0 + 8,
        "mappings; changed:\n{}",
        maps_diff(&maps_before, &maps_after)
    );
    assert_eq!(after.2, before.2, "live EGL images");
    // A leak grows with the frames: over 10,000 of them, 16 bytes a frame is 160 KB.
    // Every Rust allocation is counted, so the Rust heap must end where it began (give or
    // take a transient allocation in flight when the soak began; measured: 936 bytes
    // less). glibc's count covers Mesa's and libc's heaps too; its slack is the chunks
    // each thread's tcache keeps (measured: 112 bytes more). A leak of 24 bytes a frame
    // injected on the CPU paths fails the first (224,660 bytes), a 40-byte malloc a frame
    // the second (452,672), while RSS grew less than it does without a leak.
    assert!(
        rust_growth <= 16 * 1024,
        "the Rust heap grew by {rust_growth} bytes over {frames} frames"
    );
    assert!(
        malloc_growth <= 256 * 1024,
        "malloc's bytes in use grew by {malloc_growth} over {frames} frames"
    );
    // RSS is the backstop for what no allocator counts (pages of existing mappings). It
    // moves in steps as malloc's arenas touch pages they had not (CI saw a 1.4 MiB step
    // at 20 s, once 2 MiB over 60-70 s; the guest, 3.3 MiB of RssAnon over 30-40 s while
    // both heaps stayed within 1 KiB), so its bounds are loose: the counters are the check.
    assert!(
        rss_series.len() >= 5,
        "a soak of at least 50 s: {rss_series:?}"
    );
    let second_half = &rss_series[rss_series.len() / 2..];
    let (start, top) = (second_half[0], *second_half.iter().max().unwrap());
    assert!(
        top <= start + 6 * 1024,
        "RSS keeps growing in the second half of the soak (KiB every 10 s): {rss_series:?}"
    );
    assert!(
        after.3 <= before.3 + 16 * 1024,
        "RSS grew from {} to {} KiB",
        before.3,
        after.3
    );
}

/// An injected `VIDIOC_QBUF` error: the frame's drop fails to requeue its buffer (counted
/// once), the buffer stays with pinframe, and the next `next_frame` queues it again.
#[test]
#[ignore = "VM lane: runs in the guest via scripts/vm-test"]
fn an_injected_qbuf_error_keeps_the_buffer_and_it_returns() {
    if common::skip_unless_vm("an_injected_qbuf_error_keeps_the_buffer_and_it_returns") {
        return;
    }
    let path = webcam(0);
    let controls = Controls::open(&path);
    for mode in [BufferMode::Mmap, BufferMode::Dmabuf] {
        let mut cam = Camera::open(&path, config(mode).with_buffers(3)).unwrap();
        let frame = cam.next_frame().unwrap();
        let index = frame.buffer_index();
        controls.press("Inject VIDIOC_QBUF Error");
        drop(frame);
        let a = cam.buffer_accounting().unwrap();
        assert!(a.is_balanced() && a.idle == 1, "{mode}: {a:?}");
        assert_eq!(cam.stats().requeue_failures, 1, "{mode}");
        let mut seen = false;
        for _ in 0..12 {
            let f = cam.next_frame().unwrap();
            seen |= f.buffer_index() == index;
            drop(f);
            assert_balanced(&cam, &format!("{mode} after the retry"));
        }
        assert!(seen, "{mode}: buffer {index} came back");
        assert_eq!(cam.stats().requeue_failures, 1, "{mode}");
    }
}

/// Injected `VIDIOC_REQBUFS` and `VIDIOC_STREAMON` errors fail `Camera::open` with a
/// device error that names the call, leak no fd, and the next open works.
#[test]
#[ignore = "VM lane: runs in the guest via scripts/vm-test"]
fn injected_reqbufs_and_streamon_errors_fail_open_cleanly() {
    if common::skip_unless_vm("injected_reqbufs_and_streamon_errors_fail_open_cleanly") {
        return;
    }
    let path = webcam(0);
    let controls = Controls::open(&path);
    drop(Tensor::<u8>::new(&[4096], Some(Memory::Dma)).unwrap());
    let fds = open_fds();
    for (control, call) in [
        ("Inject VIDIOC_REQBUFS Error", "VIDIOC_REQBUFS"),
        ("Inject VIDIOC_STREAMON Error", "VIDIOC_STREAMON"),
    ] {
        for mode in [BufferMode::Mmap, BufferMode::Dmabuf] {
            controls.press(control);
            let err = Camera::open(&path, config(mode)).unwrap_err();
            eprintln!("{control}, {mode}: {err}");
            assert_eq!(err.kind(), ErrorKind::Device, "{control}, {mode}: {err}");
            assert!(err.to_string().contains(call), "{err}");
            assert_eq!(open_fds(), fds, "{control}, {mode}: no fd leaked");
            let mut cam = Camera::open(&path, config(mode)).unwrap();
            drop(cam.next_frame().unwrap());
            assert_balanced(&cam, control);
        }
    }
    assert_eq!(open_fds(), fds);
}

/// An injected fatal streaming error (`vb2_queue_error`) ends `next_frame` with a device
/// error that stays; a new camera on the same node streams again.
#[test]
#[ignore = "VM lane: runs in the guest via scripts/vm-test"]
fn an_injected_fatal_stream_error_is_a_device_error_until_reopened() {
    if common::skip_unless_vm("an_injected_fatal_stream_error_is_a_device_error_until_reopened") {
        return;
    }
    let path = webcam(0);
    let controls = Controls::open(&path);
    let mut cam = Camera::open(&path, config(BufferMode::Mmap)).unwrap();
    drop(cam.next_frame().unwrap());
    controls.press("Inject Fatal Streaming Error");
    let err = cam.next_frame().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Device, "{err}");
    assert!(err.to_string().contains("fatal"), "{err}");
    let again = cam.next_frame().unwrap_err();
    assert_eq!(again.kind(), ErrorKind::Device, "{again}");
    drop(cam);
    let mut cam = Camera::open(&path, config(BufferMode::Mmap)).unwrap();
    drop(cam.next_frame().unwrap());
    assert_balanced(&cam, "reopened");
}

/// A pin over a vivid frame holds the buffer: vivid never refills it while the pin
/// lives (its bytes stay the frame's while every other buffer is refilled many times over
/// with a test pattern that moves every frame), and it comes back once the pin drops.
#[test]
#[ignore = "VM lane: runs in the guest via scripts/vm-test"]
fn a_pin_over_a_vivid_frame_holds_its_buffer() {
    if common::skip_unless_vm("a_pin_over_a_vivid_frame_holds_its_buffer") {
        return;
    }
    let path = webcam(0);
    // The test pattern moves every frame, so that a refill would show.
    let controls = Controls::open(&path);
    controls.set("Horizontal Movement", 6);
    let mut cam = Camera::open(&path, config(BufferMode::Mmap).with_buffers(3)).unwrap();
    let frame = cam.next_frame().unwrap();
    let index = frame.buffer_index();
    let pin = frame.pin_host().unwrap();
    // SAFETY: the buffer is pinned: nothing writes it (which is what is tested).
    let pinned = unsafe { pin.as_slice() }.to_vec();
    drop(frame);
    let mut last: Option<Vec<u8>> = None;
    for i in 0..12 {
        let f = cam.next_frame().unwrap();
        assert_ne!(f.buffer_index(), index, "vivid refilled the pinned buffer");
        let bytes = f.map().unwrap().as_bytes()[..pinned.len()].to_vec();
        assert!(
            bytes != pinned,
            "frame {i} equals the pinned one: a refill would not show"
        );
        if let Some(l) = &last {
            assert!(*l != bytes, "frame {i} equals the one before");
        }
        last = Some(bytes);
    }
    controls.set("Horizontal Movement", 3);
    // SAFETY: as above.
    assert!(
        unsafe { pin.as_slice() } == &pinned[..],
        "the pinned bytes changed"
    );
    let a = cam.buffer_accounting().unwrap();
    assert!(a.is_balanced() && a.pinned == 1, "{a:?}");
    drop(pin);
    let mut seen = false;
    for _ in 0..6 {
        seen |= cam.next_frame().unwrap().buffer_index() == index;
    }
    assert!(seen, "the buffer came back after the pin dropped");
    assert_balanced(&cam, "pin dropped");
}

/// vivid's "Disconnect" while the camera streams: `next_frame` ends with the disconnected
/// error within a bounded time (and keeps returning it at once), a frame still held stays
/// valid (its bytes unchanged) until dropped, dropping it queues nothing, and closing
/// everything leaves no fd behind. Runs last: what the node does afterwards is vivid's
/// business (on 6.12, a new open once every fd closed streams again).
#[test]
#[ignore = "VM lane: runs in the guest via scripts/vm-test"]
fn zz_a_disconnect_mid_stream_ends_next_frame_and_held_frames_stay_valid() {
    if common::skip_unless_vm(
        "zz_a_disconnect_mid_stream_ends_next_frame_and_held_frames_stay_valid",
    ) {
        return;
    }
    let path = webcam(1);
    let fds = open_fds();
    {
        let controls = Controls::open(&path);
        let mut cam = Camera::open(&path, config(BufferMode::Mmap).with_buffers(4)).unwrap();
        let held = cam.next_frame().unwrap();
        let bytes = held.map().unwrap().as_bytes().to_vec();
        let pressed = Arc::new(Mutex::new(None::<Instant>));
        let presser = {
            let pressed = pressed.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(300));
                *pressed.lock().unwrap() = Some(Instant::now());
                controls.press("Disconnect");
                controls
            })
        };
        let mut frames = 0;
        let err = loop {
            match cam.next_frame_timeout(Duration::from_secs(5)) {
                Ok(f) => {
                    frames += 1;
                    drop(f);
                }
                Err(e) => break e,
            }
        };
        let ended = Instant::now();
        let controls = presser.join().unwrap();
        let pressed = pressed.lock().unwrap().expect("pressed");
        let took = ended.saturating_duration_since(pressed);
        eprintln!("disconnect: {frames} frames, then after {took:?}: {err}");
        assert_eq!(err.kind(), ErrorKind::Disconnected, "{err}");
        // Found by the stream, not by waiting out the 5 s frame timeout.
        assert!(took < Duration::from_secs(4), "bounded: {took:?}");
        let start = Instant::now();
        let again = cam.next_frame().unwrap_err();
        assert_eq!(again.kind(), ErrorKind::Disconnected, "{again}");
        // At once, not after the 5 s frame timeout (3 s: TCG on a busy host stalls the
        // guest for a few hundred ms now and then).
        assert!(start.elapsed() < Duration::from_secs(3), "at once");
        assert!(
            held.map().unwrap().as_bytes() == &bytes[..],
            "the held frame changed"
        );
        let before = cam.stats();
        drop(held);
        assert_eq!(
            cam.stats(),
            before,
            "dropping a frame of a vanished camera counts nothing"
        );
        assert_eq!(
            cam.buffer_accounting().unwrap_err().kind(),
            ErrorKind::Disconnected
        );
        drop(cam);
        drop(controls);
    }
    assert_eq!(open_fds(), fds, "no fd left behind");
    // What vivid's dead node does on a new open (informational: the driver's business).
    match Camera::open(&path, config(BufferMode::Mmap)) {
        Err(e) => eprintln!("reopening the disconnected node: {e}"),
        Ok(mut cam) => eprintln!(
            "reopening the disconnected node worked; its next frame: {:?}",
            cam.next_frame_timeout(Duration::from_millis(500))
                .map(|f| f.sequence())
        ),
    }
}
