//! `pinframeconvert` on real dma-bufs in the VM lane's guest: vivid's `v4l2src` in
//! `io-mode=dmabuf` (buffers vivid exports) and `io-mode=dmabuf-import` (vivid captures into
//! the pool of GBM tensors the element proposes upstream), converted on GL (Mesa
//! kms_swrast on vgem) into a pool of GBM tensors.
//!
//! What the guest can prove: kms_swrast maps imports through its own DRM device, so a
//! dma-buf vivid exported is refused by the library (it would crash llvmpipe's first draw,
//! see the README's VM lane notes) and uploaded instead, counted; a GBM buffer is imported.
//! So `io-mode=dmabuf` proves one pinframe import per capture buffer, the refusal counted
//! (uploads = frames) and the output rendered in place (no readbacks); `io-mode=dmabuf-import`
//! proves the zero-copy path end to end: EGL imports = source pool + output pool, no
//! uploads, no readbacks, and over a long run the fd count and the heap stay flat.
//!
//! Run with `scripts/vm-test --test vm_gstreamer` (about 4 minutes of guest time, most of
//! it the soak at vivid's capture rate under TCG).

mod common;

use std::os::fd::{AsRawFd, BorrowedFd};
use std::sync::{Arc, Mutex};

use common::*;
use gst::prelude::*;

fn skip_unless_vm(test: &str) -> bool {
    if in_vm() {
        return false;
    }
    eprintln!("SKIPPED {test}: needs the VM lane guest (PINFRAME_VM=1); run scripts/vm-test");
    true
}

fn vivid() -> String {
    std::env::var("PINFRAME_VM_VIDEO").expect("PINFRAME_VM_VIDEO (set by the VM lane)")
}

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

fn rss_kib() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// Bytes glibc's malloc has handed out and not had back, over all its arenas: GStreamer's,
/// GLib's, Mesa's and pinframe's allocations alike. Unlike RSS, it does not move when an
/// arena first touches pages it had reserved.
fn malloc_in_use() -> u64 {
    // SAFETY: mallinfo2 has no preconditions; it locks each arena while it sums it.
    let info = unsafe { libc::mallinfo2() };
    (info.uordblks + info.hblkhd) as u64
}

/// What a run saw.
struct Run {
    stats: gst::Structure,
    frames: u64,
    /// Identities of the dma-bufs that came in.
    sources: std::collections::BTreeSet<(u64, u64)>,
    /// (frame, fds, RSS KiB, malloc bytes in use) at each of the frames asked for, then
    /// at the end.
    samples: Vec<(u64, usize, u64, u64)>,
    errors: Vec<String>,
}

/// Runs `desc` (a converter `conv`, a `fakesink name=sink`) to EOS, recording the source
/// dma-buf identities, and the fd count, RSS and malloc's bytes in use after each frame
/// count in `at` and at the end.
fn run(desc: &str, at: &[u64]) -> Run {
    run_within(desc, at, None)
}

/// [`run`], ended with an EOS once `budget` has passed (the frames it got through are
/// then fewer than `num-buffers`): a soak sized by what it proves, not by this machine's
/// speed.
fn run_within(desc: &str, at: &[u64], budget: Option<std::time::Duration>) -> Run {
    init();
    let pipeline = gst::parse::launch(desc).unwrap_or_else(|e| panic!("{desc}: {e}"));
    let bin = pipeline.clone().downcast::<gst::Bin>().unwrap();
    let conv = bin.by_name("conv").unwrap();
    let sources = Arc::new(Mutex::new(std::collections::BTreeSet::new()));
    let seen = sources.clone();
    conv.static_pad("sink")
        .unwrap()
        .add_probe(gst::PadProbeType::BUFFER, move |_, info| {
            if let Some(b) = info.buffer()
                && let Some(m) = b
                    .peek_memory(0)
                    .downcast_memory_ref::<gst_allocators::DmaBufMemory>()
            {
                // SAFETY: the memory owns the fd and outlives this borrow.
                let fd = unsafe { BorrowedFd::borrow_raw(m.fd()) };
                let st = nix::sys::stat::fstat(fd.as_raw_fd()).unwrap();
                seen.lock().unwrap().insert((st.st_dev, st.st_ino));
            }
            gst::PadProbeReturn::Ok
        });
    let counts = Arc::new(Mutex::new((0u64, Vec::new())));
    let c = counts.clone();
    let at = at.to_vec();
    bin.by_name("sink")
        .unwrap()
        .static_pad("sink")
        .unwrap()
        .add_probe(gst::PadProbeType::BUFFER, move |_, _| {
            let mut c = c.lock().unwrap();
            c.0 += 1;
            if at.contains(&c.0) {
                let n = c.0;
                c.1.push((n, open_fds(), rss_kib(), malloc_in_use()));
            }
            gst::PadProbeReturn::Ok
        });
    let bus = pipeline.bus().unwrap();
    let start = std::time::Instant::now();
    pipeline.set_state(gst::State::Playing).expect("PLAYING");
    let (done, finished) = std::sync::mpsc::channel::<()>();
    let timer = budget.map(|budget| {
        let pipeline = pipeline.clone();
        std::thread::spawn(move || {
            if finished.recv_timeout(budget).is_err() {
                pipeline.send_event(gst::event::Eos::new());
            }
        })
    });
    let mut log = BusLog::default();
    log.until_end(&bus, 600);
    drop(done);
    if let Some(t) = timer {
        t.join().unwrap();
    }
    let stats = conv.property::<gst::Structure>("stats");
    let (frames, mut samples) = std::mem::take(&mut *counts.lock().unwrap());
    samples.push((frames, open_fds(), rss_kib(), malloc_in_use()));
    eprintln!(
        "{desc}\n  {frames} frames in {:.1} s; (frame, fds, RSS KiB, malloc bytes in use): \
         {samples:?}\n  {stats}",
        start.elapsed().as_secs_f64()
    );
    pipeline.set_state(gst::State::Null).unwrap();
    let sources = std::mem::take(&mut *sources.lock().unwrap());
    Run {
        stats,
        frames,
        sources,
        samples,
        errors: log.errors,
    }
}

fn stat(r: &Run, name: &str) -> u64 {
    r.stats
        .get::<u64>(name)
        .unwrap_or_else(|_| panic!("stats lack {name}: {}", r.stats))
}

const OUT: &str = "other/tensors,format=static,num_tensors=1,types=float32,dimensions=48:48:3:1";
const POOL: u64 = 4;

/// `io-mode=dmabuf`: vivid's exported buffers, imported by pinframe once per buffer. The
/// GL driver here (kms_swrast) cannot sample a non-DRM dma-buf, so the library refuses the
/// EGL import (counted) and uploads; the GBM output tensors are rendered into (no
/// readbacks).
#[test]
#[ignore = "VM lane: runs in the guest via scripts/vm-test"]
fn vivid_exported_dmabufs_are_imported_once_per_buffer() {
    if skip_unless_vm("vivid_exported_dmabufs_are_imported_once_per_buffer") {
        return;
    }
    let frames = 120;
    let r = run(
        &format!(
            "v4l2src device={} io-mode=dmabuf num-buffers={frames} ! video/x-raw,format=YUY2,width=96,height=72 ! \
             pinframeconvert name=conv backend=gl dma-route=gbm pool-size={POOL} fit=letterbox ! {OUT} ! fakesink name=sink",
            vivid()
        ),
        &[40],
    );
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    assert_eq!(r.frames, frames);
    assert_eq!(stat(&r, "frames"), frames);
    assert_eq!(stat(&r, "dmabuf-sources"), frames, "every frame a dma-buf");
    let buffers = r.sources.len() as u64;
    assert!(
        (2..=32).contains(&buffers),
        "v4l2src's pool: {buffers} buffers"
    );
    assert_eq!(
        stat(&r, "source-imports"),
        buffers,
        "one pinframe import per capture buffer"
    );
    // The library's documented refusal on this driver: uploaded, counted, no crash.
    assert_eq!(
        stat(&r, "uploads"),
        frames,
        "kms_swrast refuses vivid's dma-bufs: uploads"
    );
    assert!(stat(&r, "import-failures") >= buffers);
    // The output pool's GBM tensors are render targets, imported once each.
    assert_eq!(stat(&r, "output-buffers"), POOL);
    assert_eq!(
        stat(&r, "imports"),
        POOL,
        "the output pool, imported once per buffer"
    );
    assert_eq!(
        stat(&r, "readbacks"),
        0,
        "rendered into the dma-buf tensors in place"
    );
    assert_eq!(r.samples[0].1, r.samples[1].1, "fd count flat");
}

/// `io-mode=dmabuf-import`: vivid captures into the pool of GBM tensors pinframeconvert
/// proposes upstream; GL imports every source and output buffer once, uploads nothing and
/// reads nothing back, and over a long run the fd count and the heap stay flat.
#[test]
#[ignore = "VM lane: runs in the guest via scripts/vm-test"]
fn vivid_captures_into_the_proposed_pool_zero_copy_soak() {
    if skip_unless_vm("vivid_captures_into_the_proposed_pool_zero_copy_soak") {
        return;
    }
    // Up to 4,000 buffers or 240 s, whichever comes first (GL under TCG runs at 15 to
    // 25 fps depending on the host); at least 2,000 prove the counts and flatness below.
    // (The soak once ran to 10,000 buffers in 420 s: the same flat counts, seven minutes
    // of CI for no stronger claim than the bound below makes.)
    let wanted: u64 = 4_000;
    let floor: u64 = 2_000;
    let every: Vec<u64> = (1..=wanted / 500).map(|i| i * 500).collect();
    let r = run_within(
        &format!(
            "v4l2src device={} io-mode=dmabuf-import num-buffers={wanted} ! \
             video/x-raw,format=YUY2,width=64,height=48 ! \
             pinframeconvert name=conv backend=gl dma-route=gbm pool-size={POOL} fit=letterbox ! {OUT} ! fakesink name=sink",
            vivid()
        ),
        &every,
        Some(std::time::Duration::from_secs(240)),
    );
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    let frames = r.frames;
    assert!(
        (floor..=wanted).contains(&frames),
        "{frames} buffers in the budget; the soak needs at least {floor}"
    );
    assert_eq!(stat(&r, "frames"), frames);
    assert_eq!(stat(&r, "dmabuf-sources"), frames);
    let sources = r.sources.len() as u64;
    assert!((2..=32).contains(&sources), "capture buffers: {sources}");
    assert_eq!(
        stat(&r, "uploads"),
        0,
        "no uploads: vivid wrote into GBM buffers GL imports"
    );
    assert_eq!(stat(&r, "readbacks"), 0, "no readbacks");
    assert_eq!(
        stat(&r, "imports"),
        sources + POOL,
        "one EGL import per source buffer and per output buffer"
    );
    // The sample after the 1,000-buffer warm-up, the one half way through what ran, and
    // the end.
    let at = |n: u64| {
        r.samples
            .iter()
            .find(|s| s.0 >= n)
            .copied()
            .unwrap_or_else(|| panic!("no sample at {n}: {:?}", r.samples))
    };
    let (_, fds_1k, _, _) = at(1_000);
    let (mid, fds_mid, rss_mid, malloc_mid) = at((frames / 2).max(1_000));
    let (_, fds_end, rss_end, malloc_end) = *r.samples.last().unwrap();
    assert_eq!(
        (fds_1k, fds_mid),
        (fds_end, fds_end),
        "fd count flat over {frames} buffers"
    );
    // Flat after the warm-up: over the second half of the run a leak of 64 bytes a frame
    // adds 64 KB per 1,000 buffers to what malloc has handed out (GStreamer's, GLib's,
    // Mesa's and pinframe's allocations alike). The bound is 256 KiB whatever the count:
    // at the 2,000-buffer floor it catches a leak of 256 bytes a frame, at 4,000 one of
    // 128.
    let second_half = frames - mid;
    let malloc_growth = malloc_end as i64 - malloc_mid as i64;
    assert!(
        malloc_growth < 256 * 1024,
        "malloc's bytes in use grew by {malloc_growth} over the last {second_half} buffers: {:?}",
        r.samples
    );
    // RSS is the backstop for pages no allocator counts; it moves in steps of a few MiB as
    // malloc's arenas touch pages they had reserved (the camera fault soak saw 3 MiB with
    // both heaps within 1 KiB), so its bound is loose.
    let growth = rss_end.saturating_sub(rss_mid);
    assert!(
        growth < 6 * 1024,
        "RSS grew {growth} KiB over the last {second_half} buffers: {:?}",
        r.samples
    );
}
