//! The job pinframe is for: camera → pinned model input → LiteRT → detections.
//!
//! ```text
//! scripts/assets   # fetches LiteRT, MediaPipe's face detector and astronaut.png into target/assets
//! cargo run --release --features litert --example detect -- \
//!     [--image target/assets/images/astronaut.png | --device /dev/video0 | --synthetic]
//!     [--model target/assets/models/face_detection_short_range.tflite] [--frames N]
//!     [--format yuyv|nv12] [--size WxH] [--backend auto|cpu|gl] [--memory auto|heap|shm|dma]
//!     [--snapshot out.png] [--landmarks [target/assets/models/face_landmark.tflite]]
//!     [--max-faces N]
//! ```
//!
//! The source is a V4L2 camera, the synthetic camera (a test pattern: no faces), or an
//! image file made into a YUYV/NV12 camera frame and looped. The model's input tensor is
//! allocated from the model's own description (size, NHWC, f32) and bound to LiteRT once,
//! without a copy; every frame is letterboxed into it (`ImageProcessor::convert_with`),
//! the model runs on it in place, the 896 anchors are decoded (weighted NMS), and the boxes
//! are mapped back to camera pixels through the `ConvertInfo`. Prints the detections, the
//! time per stage (convert, inference, decode) and the end-to-end fps; `--snapshot` draws
//! the last frame's detections on the camera frame.
//!
//! `--landmarks` adds a second stage (`common/face_landmark.rs`): every detected face
//! becomes a square crop of the camera frame with a margin (`regions::crop_for_box`), one
//! `convert_batch` fills the first k slices of a `[N, 192, 192, 3]` batch tensor with the
//! frame's k faces (N = `--max-faces`), MediaPipe's face mesh model runs once on those k
//! slices (compiled once per batch size, resized to `[k, 192, 192, 3]` and bound to the
//! first k slices once, at set-up), and each face's 468 landmarks are mapped back to
//! camera pixels through its own `ConvertInfo`; `--snapshot` draws the landmarks too.

#[path = "common/blazeface.rs"]
mod blazeface;
#[path = "common/face_landmark.rs"]
mod face_landmark;
#[path = "common/yuv.rs"]
mod yuv;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use blazeface::Detection;
use clap::Parser;
use face_landmark::{FaceLandmarks, LandmarkStage};
use pinframe::camera::{Camera, CameraConfig};
use pinframe::convert::regions::{DetectionBox, box_to_source};
use pinframe::runtime::litert::{Accelerator, CompiledModel, Environment, Model};
use pinframe::{
    Backend, ConvertInfo, ConvertOptions, Error, Fit, ImageProcessor, Memory, MemoryRequest,
    Normalize, PixelFormat, Result, Tensor,
};

#[derive(Parser)]
#[command(about = "camera → pinned model input → LiteRT face detector → boxes in camera pixels")]
struct Args {
    /// The .tflite model (MediaPipe's short-range face detector; scripts/assets fetches it).
    #[arg(
        long,
        default_value = "target/assets/models/face_detection_short_range.tflite"
    )]
    model: PathBuf,
    /// An image file (png/jpg) made into a camera frame and looped.
    #[arg(long, conflicts_with_all = ["synthetic"])]
    image: Option<PathBuf>,
    /// V4L2 device (used when it exists and neither --image nor --synthetic is given).
    #[arg(long, default_value = "/dev/video0")]
    device: PathBuf,
    /// Use the synthetic camera (a test pattern).
    #[arg(long)]
    synthetic: bool,
    /// Frames to run.
    #[arg(long, default_value_t = 300)]
    frames: u32,
    /// Camera pixel format (the image source makes yuyv or nv12).
    #[arg(long)]
    format: Option<PixelFormat>,
    /// Camera frame size.
    #[arg(long, value_parser = parse_size)]
    size: Option<(u32, u32)>,
    /// Conversion backend: auto, cpu or gl.
    #[arg(long, default_value = "auto")]
    backend: Backend,
    /// Memory of the model input tensor (auto: the best available).
    #[arg(long, default_value = "auto")]
    memory: String,
    /// Draw the last frame's detections on the camera frame and write it as a PNG.
    #[arg(long)]
    snapshot: Option<PathBuf>,
    /// Second stage: 468 landmarks of every face from MediaPipe's face mesh model (the
    /// path, or scripts/assets' copy when none is given), all faces in one batched run.
    #[arg(
        long,
        num_args = 0..=1,
        default_missing_value = "target/assets/models/face_landmark.tflite"
    )]
    landmarks: Option<PathBuf>,
    /// The landmark batch: faces per frame given landmarks (more are left out).
    #[arg(long, default_value_t = 4)]
    max_faces: usize,
}

fn parse_size(s: &str) -> std::result::Result<(u32, u32), String> {
    let bad = || format!("size {s:?} is not WxH (e.g. 1280x720)");
    let (w, h) = s.split_once(['x', 'X']).ok_or_else(bad)?;
    Ok((
        w.trim().parse().map_err(|_| bad())?,
        h.trim().parse().map_err(|_| bad())?,
    ))
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("detect: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Where frames come from.
enum Source {
    Camera(Box<Camera>),
    /// One frame made from an image file, converted again every frame.
    Image(Box<Tensor<u8>>),
}

fn open_source(args: &Args) -> Result<Source> {
    if let Some(path) = &args.image {
        let rgb = image::open(path)
            .map_err(|e| Error::InvalidArgument(format!("reading {}: {e}", path.display())))?
            .to_rgb8();
        let (w, h) = args.size.unwrap_or((rgb.width() & !1, rgb.height() & !1));
        if w > rgb.width()
            || h > rgb.height()
            || !w.is_multiple_of(2)
            || !h.is_multiple_of(2)
            || w == 0
            || h == 0
        {
            return Err(Error::InvalidArgument(format!(
                "--size {w}x{h}: the image is {}x{}; give even sizes inside it",
                rgb.width(),
                rgb.height()
            )));
        }
        let format = args.format.unwrap_or(PixelFormat::Yuyv);
        if !matches!(format, PixelFormat::Yuyv | PixelFormat::Nv12) {
            return Err(Error::InvalidArgument(format!(
                "--format {format}: an image source makes yuyv or nv12 frames"
            )));
        }
        let (layout, bytes) = yuv::encode(&rgb, w, h, format);
        let mut frame = Tensor::<u8>::with_layout(layout, Some(Memory::Heap))?;
        frame.map_mut()?.copy_from_slice(&bytes);
        println!(
            "source: {} as a looping {w}x{h} {format} camera frame",
            path.display()
        );
        return Ok(Source::Image(Box::new(frame)));
    }
    let config = CameraConfig {
        size: args.size,
        format: args.format,
        ..CameraConfig::default()
    };
    let camera = if !args.synthetic && args.device.exists() {
        Camera::open(&args.device, config)?
    } else {
        let config = CameraConfig {
            size: config.size.or(Some((1280, 720))),
            ..config
        };
        println!("source: the synthetic camera (a test pattern: expect no faces)");
        Camera::synthetic(config)?
    };
    println!("camera: {} | {}", camera.name(), camera.format());
    Ok(Source::Camera(Box::new(camera)))
}

fn ms(d: Duration, n: u32) -> f64 {
    d.as_secs_f64() * 1e3 / f64::from(n.max(1))
}

fn print_detections(label: &str, found: &[Detection], info: &ConvertInfo) {
    println!("{label}: {} face(s)", found.len());
    for d in found {
        let (x0, y0) = info.to_source(f64::from(d.bbox[0]), f64::from(d.bbox[1]));
        let (x1, y1) = info.to_source(f64::from(d.bbox[2]), f64::from(d.bbox[3]));
        let eyes: Vec<String> = d.keypoints[..2]
            .iter()
            .map(|k| {
                let (x, y) = info.to_source(f64::from(k[0]), f64::from(k[1]));
                format!("({x:.0}, {y:.0})")
            })
            .collect();
        println!(
            "  score {:.3}: box ({x0:.1}, {y0:.1})-({x1:.1}, {y1:.1}) camera px, eyes {}",
            d.score,
            eyes.join(" ")
        );
    }
}

/// A detection's box in camera pixels.
fn camera_box(d: &Detection, info: &ConvertInfo) -> DetectionBox {
    let b = d.bbox.map(f64::from);
    box_to_source(info, DetectionBox::new(b[0], b[1], b[2], b[3]))
}

fn print_landmarks(marks: &[FaceLandmarks]) {
    for (i, m) in marks.iter().enumerate() {
        let at = |k: usize| format!("({:.0}, {:.0})", m.points[k][0], m.points[k][1]);
        let (mut x0, mut y0, mut x1, mut y1) = (f64::MAX, f64::MAX, f64::MIN, f64::MIN);
        for p in &m.points {
            (x0, y0, x1, y1) = (x0.min(p[0]), y0.min(p[1]), x1.max(p[0]), y1.max(p[1]));
        }
        println!(
            "  face {i}: crop {}x{} at ({}, {}), presence {:.3}, {} landmarks in \
             ({x0:.0}, {y0:.0})-({x1:.0}, {y1:.0}) camera px: eyes {} {}, nose {}, mouth {} {}, \
             chin {}",
            m.crop.width,
            m.crop.height,
            m.crop.x,
            m.crop.y,
            m.presence,
            m.points.len(),
            at(face_landmark::RIGHT_EYE_OUTER),
            at(face_landmark::LEFT_EYE_OUTER),
            at(face_landmark::NOSE_TIP),
            at(face_landmark::UPPER_LIP),
            at(face_landmark::LOWER_LIP),
            at(face_landmark::CHIN),
        );
    }
}

fn run(args: &Args) -> Result<()> {
    if args.frames == 0 {
        return Err(Error::InvalidArgument("--frames must be at least 1".into()));
    }
    // `auto` here is device memory first: the runtime binds a dma-buf input without a
    // copy (and an NPU delegate reads it directly).
    let memory = match args.memory.as_str() {
        "auto" => MemoryRequest::Device,
        m => MemoryRequest::Only(m.parse::<Memory>()?),
    };
    let env = Environment::new()?;
    println!("LiteRT: {}", env.library_path().display());
    let model = Model::from_file(&env, &args.model)?;
    if model.inputs().len() != 1 || model.outputs().len() != 2 {
        return Err(Error::Unsupported(format!(
            "{} is not the face detector this demo decodes (1 input, 2 outputs)",
            args.model.display()
        )));
    }
    let input = model.inputs()[0].image_input()?;
    let mut tensor = Tensor::<f32>::with_layout(input.image_layout()?, memory)?;
    let pin = tensor.pin_host()?;
    let mut compiled = CompiledModel::new(&model, &[Accelerator::Cpu])?;
    let binding = compiled.bind_input(0, &tensor)?;
    println!(
        "model: {} | input {} bound once as {binding:?} ({} memory at {:p}, {} bytes; LiteRT's \
         buffer at {:p})",
        args.model.display(),
        model.inputs()[0],
        tensor.memory(),
        pin.as_ptr(),
        pin.len(),
        compiled.input_host_address(0).unwrap_or(std::ptr::null())
    );
    if let Some(why) = compiled.dmabuf_refusal() {
        println!("dma-buf binding refused: {why}");
    }
    let options = ConvertOptions {
        // MediaPipe letterboxes with zero padding into -1..1 values.
        fit: Fit::Letterbox { pad: [0; 3] },
        normalize: Normalize {
            mean: [0.5; 3],
            std: [0.5; 3],
        },
        ..ConvertOptions::for_input(&input)
    };
    let mut stage = match &args.landmarks {
        Some(path) => {
            let mesh = Model::from_file(&env, path)?;
            let stage = LandmarkStage::new(&mesh, args.max_faces, memory)?;
            println!(
                "landmarks: {} | compiled for 1 to {n} faces, input resized to [k, 192, 192, 3] \
                 and bound once to the first k slices of one {} batch tensor of {n} ({} bytes)",
                path.display(),
                stage.batch.memory(),
                stage.batch.pin_host()?.len(),
                n = stage.capacity(),
            );
            Some(stage)
        }
        None => None,
    };
    let mut proc = ImageProcessor::with_backend(args.backend)?;
    println!("backend: {}", proc.backend());
    let mut source = open_source(args)?;

    let anchors = blazeface::anchors();
    let (mut scratch, mut found) = (Vec::new(), Vec::new());
    let (mut t_convert, mut t_infer, mut t_decode) =
        (Duration::ZERO, Duration::ZERO, Duration::ZERO);
    let mut last_info = None;
    let mut first_reported = false;
    let mut snapshot_frame: Option<Tensor<u8>> = None;
    let (mut boxes, mut marks) = (Vec::new(), Vec::new());
    let (mut t_crops, mut t_mesh, mut t_mesh_decode) =
        (Duration::ZERO, Duration::ZERO, Duration::ZERO);
    let (mut stage_frames, mut stage_faces) = (0u32, 0usize);
    let is_camera = matches!(source, Source::Camera(_));
    let start = Instant::now();
    for i in 0..args.frames {
        let t0 = Instant::now();
        let camera_frame;
        let frame: &Tensor<u8> = match &mut source {
            Source::Camera(cam) => {
                camera_frame = cam.next_frame()?;
                &camera_frame
            }
            Source::Image(frame) => frame,
        };
        let info = proc.convert_with(frame, &mut tensor, &options)?;
        if i + 1 == args.frames && args.snapshot.is_some() && is_camera {
            // Keep the last camera frame to draw on.
            let layout = *frame
                .layout()
                .ok_or_else(|| Error::InvalidArgument("a frame without a layout".into()))?;
            let mut copy = Tensor::<u8>::with_layout(layout, Some(Memory::Heap))?;
            {
                let from = frame.map()?;
                let mut to = copy.map_mut()?;
                for b in 0..layout.buffer_count() {
                    let n = layout.required_len(b);
                    to.buffer_bytes_mut(b)[..n].copy_from_slice(&from.buffer_bytes(b)[..n]);
                }
            }
            snapshot_frame = Some(copy);
        }
        let t1 = Instant::now();
        compiled.run()?;
        let t2 = Instant::now();
        blazeface::decode(
            &anchors,
            compiled.output(0)?,
            compiled.output(1)?,
            &mut scratch,
            &mut found,
        );
        let t3 = Instant::now();
        t_convert += t1 - t0;
        t_infer += t2 - t1;
        t_decode += t3 - t2;
        if let Some(stage) = &mut stage {
            boxes.clear();
            boxes.extend(found.iter().map(|d| camera_box(d, &info)));
            marks.clear();
            if !boxes.is_empty() {
                let layout = frame
                    .layout()
                    .ok_or_else(|| Error::InvalidArgument("a frame without a layout".into()))?;
                let crops = stage.crops(&boxes, layout.width(), layout.height())?;
                let infos = stage.convert(&mut proc, frame, &crops)?;
                let t4 = Instant::now();
                stage.infer()?;
                let t5 = Instant::now();
                stage.decode(&crops, &infos, &mut marks)?;
                let t6 = Instant::now();
                t_crops += t4 - t3;
                t_mesh += t5 - t4;
                t_mesh_decode += t6 - t5;
                stage_frames += 1;
                stage_faces += crops.len();
            }
        }
        if !first_reported {
            print_detections("frame 0", &found, &info);
            print_landmarks(&marks);
            first_reported = true;
        }
        last_info = Some(info);
    }
    let elapsed = start.elapsed();
    let info = last_info.expect("at least one frame");
    print_detections(&format!("frame {}", args.frames - 1), &found, &info);
    print_landmarks(&marks);
    let n = args.frames;
    println!(
        "per frame: convert {:.2} ms, inference {:.2} ms, decode {:.3} ms; end to end {:.1} fps \
         ({n} frames in {:.2} s)",
        ms(t_convert, n),
        ms(t_infer, n),
        ms(t_decode, n),
        f64::from(n) / elapsed.as_secs_f64(),
        elapsed.as_secs_f64()
    );
    if let Some(stage) = &stage {
        let (runs, bindings, created) = stage.totals();
        println!(
            "landmarks, per frame with faces ({stage_frames} frames, {stage_faces} faces, at \
             most {} a batch): crops + convert_batch {:.2} ms, inference {:.2} ms, decode \
             {:.3} ms; runtime: {runs} runs, {bindings} input binding(s) (one per batch \
             size), {created} buffers created",
            stage.capacity(),
            ms(t_crops, stage_frames),
            ms(t_mesh, stage_frames),
            ms(t_mesh_decode, stage_frames),
        );
    }
    let s = compiled.stats();
    println!(
        "runtime: {} runs, {} buffers created (input + outputs, once), {} dma-buf bindings, {} \
         dma-buf fallbacks; processor: {:?}",
        s.runs,
        s.buffers_created,
        s.dmabuf_bindings,
        s.dmabuf_fallbacks,
        proc.stats()
    );
    if let Some(path) = &args.snapshot {
        let frame = match source {
            Source::Image(frame) => *frame,
            Source::Camera(_) => snapshot_frame.expect("kept the last frame"),
        };
        snapshot(&mut proc, &frame, &found, &marks, &info, path)?;
    }
    Ok(())
}

/// The camera frame as RGB with each detection's box and keypoints drawn on it.
fn snapshot(
    proc: &mut ImageProcessor,
    frame: &Tensor<u8>,
    found: &[Detection],
    marks: &[FaceLandmarks],
    info: &ConvertInfo,
    path: &Path,
) -> Result<()> {
    let layout = frame
        .layout()
        .ok_or_else(|| Error::InvalidArgument("the frame has no image layout".into()))?;
    let (w, h) = (layout.width(), layout.height());
    let mut rgb = Tensor::<u8>::image(w, h, PixelFormat::Rgb, Some(Memory::Heap))?;
    proc.convert(frame, &mut rgb)?;
    let mut img = image::RgbImage::from_raw(w, h, rgb.map()?.to_vec())
        .ok_or_else(|| Error::InvalidArgument("snapshot buffer size".into()))?;
    let mut put = |x: f64, y: f64, c: [u8; 3]| {
        if x >= 0.0 && y >= 0.0 && (x as u32) < w && (y as u32) < h {
            img.put_pixel(x as u32, y as u32, image::Rgb(c));
        }
    };
    for d in found {
        let (x0, y0) = info.to_source(f64::from(d.bbox[0]), f64::from(d.bbox[1]));
        let (x1, y1) = info.to_source(f64::from(d.bbox[2]), f64::from(d.bbox[3]));
        for t in 0..2 {
            let t = f64::from(t);
            let mut x = x0;
            while x <= x1 {
                put(x, y0 + t, [0, 255, 0]);
                put(x, y1 - t, [0, 255, 0]);
                x += 1.0;
            }
            let mut y = y0;
            while y <= y1 {
                put(x0 + t, y, [0, 255, 0]);
                put(x1 - t, y, [0, 255, 0]);
                y += 1.0;
            }
        }
        for k in &d.keypoints {
            let (kx, ky) = info.to_source(f64::from(k[0]), f64::from(k[1]));
            for dy in -2..=2 {
                for dx in -2..=2 {
                    put(kx + f64::from(dx), ky + f64::from(dy), [255, 0, 0]);
                }
            }
        }
    }
    for m in marks {
        for p in &m.points {
            put(p[0], p[1], [0, 255, 255]);
        }
    }
    img.save(path)
        .map_err(|e| Error::InvalidArgument(format!("writing {}: {e}", path.display())))?;
    println!(
        "snapshot: {} ({} detection(s), {} face(s) of landmarks drawn)",
        path.display(),
        found.len(),
        marks.len()
    );
    Ok(())
}
