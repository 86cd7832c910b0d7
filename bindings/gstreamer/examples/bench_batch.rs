//! Wall time per buffer of `pinframeconvert`'s batch modes against the library's own
//! calls on the same frames, in one process (CPU backend):
//!
//! - `rois=true batch-size=16`: one 1920x1080 NV12 frame carrying 16 face ROIs (120-420
//!   px) pushed again and again by `appsrc`, into a 16x3x224x224 letterboxed ImageNet f32
//!   batch; against one `convert_batch` of the same 16 crops.
//! - `batch-size=4`: 1920x1080 YUY2 frames into a 4x3x640x640 letterboxed ImageNet f32
//!   batch; against `batch-size=1` (one 3x640x640 tensor per frame).
//!
//! ```sh
//! cargo run --release -p gst-plugin-pinframe --example bench_batch -- [ROUNDS]
//! ```

use std::time::Instant;

use gst::prelude::*;
use pinframe::{
    BatchItem, ConvertOptions, Crop, DType, Fit, ImageLayout, ImageProcessor, Normalize,
    PixelFormat, Tensor,
};

const NORM: &str = "fit=letterbox mean=0.485,0.456,0.406 std=0.229,0.224,0.225";

/// The 16 crops (120-420 px) of the ROI run.
fn crops() -> Vec<Crop> {
    (0..16u32)
        .map(|i| {
            let side = 120 + i * 20;
            Crop::new(
                (i * 97) % (1920 - side),
                (i * 53) % (1080 - side),
                side,
                side,
            )
        })
        .collect()
}

fn frame(info: &gst_video::VideoInfo) -> gst::Buffer {
    let mut frame = gst::Buffer::with_size(info.size()).unwrap();
    {
        let mut m = frame.get_mut().unwrap().map_writable().unwrap();
        for (i, v) in m.as_mut_slice().iter_mut().enumerate() {
            *v = (i * 7 % 251) as u8;
        }
    }
    frame
}

/// Pushes `frame` through `desc` again and again, `per_output` buffers for each output
/// pulled, `rounds` outputs after 3 of warm-up; returns the wall time per pushed buffer
/// in ms.
fn run(desc: &str, frame: &gst::Buffer, caps: &gst::Caps, per_output: u32, rounds: u32) -> f64 {
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
    pipeline.set_state(gst::State::Playing).unwrap();
    let push = |n: u32| {
        for _ in 0..n {
            for _ in 0..per_output {
                src.push_buffer(frame.clone()).unwrap();
            }
            let s = sink.pull_sample().unwrap();
            std::hint::black_box(s.buffer().unwrap().size());
        }
    };
    push(3);
    let t0 = Instant::now();
    push(rounds);
    let ms = t0.elapsed().as_secs_f64() * 1000.0 / (rounds * per_output) as f64;
    pipeline.set_state(gst::State::Null).unwrap();
    ms
}

fn main() {
    let rounds: u32 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(100);
    gst::init().unwrap();
    gstpinframe::plugin_register_static().unwrap();
    let options = ConvertOptions {
        fit: Fit::Letterbox { pad: [114; 3] },
        normalize: Normalize::IMAGENET,
        ..Default::default()
    };

    // rois=true: 16 face ROIs of one NV12 frame.
    let caps: gst::Caps =
        "video/x-raw,format=NV12,width=1920,height=1080,framerate=30/1,colorimetry=bt709"
            .parse()
            .unwrap();
    let info = gst_video::VideoInfo::from_caps(&caps).unwrap();
    let mut with_rois = frame(&info);
    for (id, c) in crops().iter().enumerate() {
        let b = with_rois.get_mut().unwrap();
        let mut roi =
            gst_video::VideoRegionOfInterestMeta::add(b, "face", (c.x, c.y, c.width, c.height));
        roi.set_id(id as i32);
    }
    let element = run(
        &format!(
            "pinframeconvert backend=cpu rois=true batch-size=16 {NORM} ! \
             other/tensors,format=static,num_tensors=1,types=float32,dimensions=224:224:3:16"
        ),
        &with_rois,
        &caps,
        1,
        rounds,
    );
    let mut processor = ImageProcessor::with_backend(pinframe::Backend::Cpu).unwrap();
    let layout = ImageLayout::tight(1920, 1080, PixelFormat::Nv12, DType::U8)
        .unwrap()
        .with_colorimetry(Some(pinframe::Colorimetry::new(
            pinframe::Matrix::Bt709,
            pinframe::Range::Limited,
        )));
    let map = with_rois.map_readable().unwrap();
    let bufs = [map.as_slice()];
    let mut batch =
        Tensor::<f32>::image_batch(16, 224, 224, PixelFormat::PlanarRgb, pinframe::Memory::Shm)
            .unwrap();
    let items: Vec<BatchItem> = crops()
        .into_iter()
        .map(|c| BatchItem::bytes(&bufs, &layout).with_crop(c))
        .collect();
    for _ in 0..3 {
        processor
            .convert_batch(&items, &mut batch, &options)
            .unwrap();
    }
    let t0 = Instant::now();
    for _ in 0..rounds {
        processor
            .convert_batch(&items, &mut batch, &options)
            .unwrap();
    }
    let library = t0.elapsed().as_secs_f64() * 1000.0 / rounds as f64;
    println!("| run | ms per input buffer |");
    println!("| --- | --: |");
    println!(
        "| `rois=true batch-size=16`: 16 ROIs of a 1080p NV12 frame → 16x3x224x224 f32 | {element:.2} |"
    );
    println!("| the library's `convert_batch` of the same 16 crops | {library:.2} |");

    // batch-size=4 against batch-size=1 on YUY2 1080p frames.
    let caps: gst::Caps =
        "video/x-raw,format=YUY2,width=1920,height=1080,framerate=30/1,colorimetry=bt709"
            .parse()
            .unwrap();
    let info = gst_video::VideoInfo::from_caps(&caps).unwrap();
    let yuy2 = frame(&info);
    for (n, dims) in [(4u32, "640:640:3:4"), (1, "640:640:3:1")] {
        let ms = run(
            &format!(
                "pinframeconvert backend=cpu batch-size={n} {NORM} ! \
                 other/tensors,format=static,num_tensors=1,types=float32,dimensions={dims}"
            ),
            &yuy2,
            &caps,
            n,
            rounds,
        );
        println!("| `batch-size={n}`: 1080p YUY2 frames → {n}x3x640x640 f32 | {ms:.2} |");
    }
}
