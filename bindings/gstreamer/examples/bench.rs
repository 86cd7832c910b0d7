//! Frames per second and CPU use of `pinframeconvert` against the chain a user would
//! otherwise build (`videoconvert ! videoscale ! videobox`, then an appsink loop that
//! normalises into planar f32), both from the same 1920x1080 frame pushed again and again
//! by `appsrc` (so the source costs nothing), into a 640x640 ImageNet-normalised letterbox,
//! in one process, one after the other.
//!
//! ```sh
//! cargo run --release -p gst-plugin-pinframe --example bench -- [FRAMES]
//! ```
//!
//! CPU use is the process's CPU time (`getrusage`) over the wall time of each run: 100%
//! is one core busy.

use std::time::Instant;

use gst::prelude::*;

const MEAN: [f32; 3] = [0.485, 0.456, 0.406];
const STD: [f32; 3] = [0.229, 0.224, 0.225];

fn cpu_seconds() -> f64 {
    let mut u = std::mem::MaybeUninit::<libc::rusage>::uninit();
    // SAFETY: getrusage fills the struct it is given.
    let u = unsafe {
        libc::getrusage(libc::RUSAGE_SELF, u.as_mut_ptr());
        u.assume_init()
    };
    let t = |v: libc::timeval| v.tv_sec as f64 + v.tv_usec as f64 * 1e-6;
    t(u.ru_utime) + t(u.ru_stime)
}

/// Pushes `frames` copies of one frame of `caps` through `desc` (between `appsrc name=src`
/// and `appsink name=sink`); `each` sees every output. Returns (fps, CPU %, CPU ms/frame).
fn run(
    desc: &str,
    caps: &gst::Caps,
    frames: u32,
    mut each: impl FnMut(&gst::BufferRef),
) -> (f64, f64, f64) {
    let pipeline = gst::parse::launch(&format!(
        "appsrc name=src format=time ! {desc} ! appsink name=sink sync=false"
    ))
    .unwrap()
    .downcast::<gst::Bin>()
    .unwrap();
    let src = pipeline
        .by_name("src")
        .unwrap()
        .downcast::<gst_app::AppSrc>()
        .unwrap();
    let sink = pipeline
        .by_name("sink")
        .unwrap()
        .downcast::<gst_app::AppSink>()
        .unwrap();
    src.set_caps(Some(caps));
    src.set_max_bytes(0);
    let info = gst_video::VideoInfo::from_caps(caps).unwrap();
    let mut frame = gst::Buffer::with_size(info.size()).unwrap();
    {
        let mut m = frame.get_mut().unwrap().map_writable().unwrap();
        for (i, v) in m.as_mut_slice().iter_mut().enumerate() {
            *v = (i * 7 % 251) as u8;
        }
    }
    pipeline.set_state(gst::State::Playing).unwrap();
    // Warm up (negotiation, pools, first-frame tables), then measure.
    let mut push = |n: u32| {
        for _ in 0..n {
            src.push_buffer(frame.clone()).unwrap();
            let s = sink.pull_sample().unwrap();
            each(s.buffer().unwrap());
        }
    };
    push(5);
    let (t0, c0) = (Instant::now(), cpu_seconds());
    push(frames);
    let (wall, cpu) = (t0.elapsed().as_secs_f64(), cpu_seconds() - c0);
    pipeline.set_state(gst::State::Null).unwrap();
    (
        frames as f64 / wall,
        100.0 * cpu / wall,
        1000.0 * cpu / frames as f64,
    )
}

fn main() {
    let frames: u32 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(200);
    gst::init().unwrap();
    gstpinframe::plugin_register_static().unwrap();
    let mut planar = vec![0f32; 3 * 640 * 640];
    println!("| source | pipeline | fps | CPU use | CPU ms/frame |");
    println!("| --- | --- | --- | --- | --- |");
    for format in ["YUY2", "NV12"] {
        let caps: gst::Caps = format!(
            "video/x-raw,format={format},width=1920,height=1080,framerate=30/1,colorimetry=bt709"
        )
        .parse()
        .unwrap();
        let ours = run(
            "pinframeconvert backend=cpu fit=letterbox mean=0.485,0.456,0.406 std=0.229,0.224,0.225 ! \
             other/tensors,format=static,num_tensors=1,types=float32,dimensions=640:640:3:1",
            &caps,
            frames,
            |b| {
                std::hint::black_box(b.size());
            },
        );
        // The chain: convert, scale to 640x360, pad to 640x640, then normalise each RGB
        // frame into planar f32 in the appsink loop.
        let chain = run(
            "videoconvert ! videoscale ! video/x-raw,format=RGB,width=640,height=360 ! \
             videobox top=-140 bottom=-140 ! video/x-raw,format=RGB,width=640,height=640",
            &caps,
            frames,
            |b| {
                let m = b.map_readable().unwrap();
                let rgb = m.as_slice();
                let (r, rest) = planar.split_at_mut(640 * 640);
                let (g, bl) = rest.split_at_mut(640 * 640);
                for (i, px) in rgb.chunks_exact(3).enumerate() {
                    r[i] = (px[0] as f32 / 255.0 - MEAN[0]) / STD[0];
                    g[i] = (px[1] as f32 / 255.0 - MEAN[1]) / STD[1];
                    bl[i] = (px[2] as f32 / 255.0 - MEAN[2]) / STD[2];
                }
                std::hint::black_box(&planar);
            },
        );
        for (name, (fps, cpu, ms)) in [
            ("`pinframeconvert` (CPU backend)", ours),
            (
                "`videoconvert ! videoscale ! videobox` + appsink loop",
                chain,
            ),
        ] {
            println!("| {format} 1920x1080 | {name} | {fps:.1} | {cpu:.0}% | {ms:.2} |");
        }
        println!(
            "| {format} | ratio | {:.1}x fps | | {:.1}x less CPU per frame |",
            ours.0 / chain.0,
            chain.2 / ours.2
        );
    }
}
