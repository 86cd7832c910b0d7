//! The main job: camera → convert (letterbox) → a pinned 640x640 planar f32 tensor that an
//! inference runtime reads in place, frame after frame.
//!
//! ```text
//! cargo run --release --example camera_pipeline -- [--frames N] [--snapshot out.png]
//!     [--device /dev/video0] [--synthetic] [--size WxH] [--format yuyv|nv12|...]
//!     [--fps N] [--backend auto|cpu|gl] [--buffers N] [--buffer-mode auto|dmabuf|mmap]
//!     [--black-level N] [--wb-gains R,G,B] [--gamma linear|srgb]
//! ```
//!
//! RAW sensors (`--format rggb10`, `bggr10p`, ...; the synthetic camera mosaics its pattern
//! too) take the ISP steps `--black-level`, `--wb-gains` and `--gamma`.
//!
//! Opens `--device` (default `/dev/video0`) when it exists, else the synthetic camera
//! (a moving test pattern, unpaced unless `--fps` is given, so the numbers are the
//! pipeline's own throughput). The destination is pinned once; each frame is converted
//! into it, then read through the pin between `sync_for_cpu` and `sync_for_device` (the
//! per-channel mean stands in for inference). At the end it prints the backend, fps,
//! convert latency p50/p99, dropped frames and the processor's counters; `--snapshot`
//! writes the last destination (what the network sees) as a PNG.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Parser;
use pinframe::camera::{BufferMode, Camera, CameraConfig};
use pinframe::{
    Access, Backend, ConvertOptions, Error, Fit, Gamma, ImageProcessor, Isp, MemoryRequest,
    PixelFormat, Result, Tensor,
};

/// Destination size (a typical detector input).
const SIDE: u32 = 640;

#[derive(Parser)]
#[command(about = "camera → letterboxed 640x640 planar f32 tensor, pinned once")]
struct Args {
    /// Frames to process.
    #[arg(long, default_value_t = 300)]
    frames: u32,
    /// Write the last converted destination (what the network sees) as a PNG.
    #[arg(long)]
    snapshot: Option<PathBuf>,
    /// V4L2 device; the synthetic camera is used when it does not exist.
    #[arg(long, default_value = "/dev/video0")]
    device: PathBuf,
    /// Use the synthetic camera even if the device exists.
    #[arg(long)]
    synthetic: bool,
    /// Frame size to ask the camera for (default: the device's current size; 1280x720
    /// for the synthetic camera).
    #[arg(long, value_parser = parse_size)]
    size: Option<(u32, u32)>,
    /// Pixel format to ask for (default: the device's first convertible one; yuyv for the
    /// synthetic camera).
    #[arg(long)]
    format: Option<PixelFormat>,
    /// Frame rate to ask for (the synthetic camera runs unpaced without it).
    #[arg(long)]
    fps: Option<u32>,
    /// Conversion backend: auto, cpu or gl.
    #[arg(long, default_value = "auto")]
    backend: Backend,
    /// Capture buffers.
    #[arg(long, default_value_t = 4)]
    buffers: u32,
    /// Capture buffer mode: auto, dmabuf or mmap.
    #[arg(long, default_value = "auto")]
    buffer_mode: BufferMode,
    /// RAW sources: the sensor's black level, in its own units (e.g. 64 for 10 bits).
    #[arg(long, default_value_t = 0)]
    black_level: u16,
    /// RAW sources: white-balance gains.
    #[arg(long, value_name = "R,G,B", value_parser = parse_gains, default_value = "1,1,1")]
    wb_gains: [f32; 3],
    /// RAW sources: output transfer function.
    #[arg(long, default_value = "linear")]
    gamma: Gamma,
}

fn parse_gains(s: &str) -> std::result::Result<[f32; 3], String> {
    let bad = || format!("gains {s:?} are not R,G,B (e.g. 1.9,1,1.6)");
    let v: Vec<f32> = s
        .split(',')
        .map(|p| p.trim().parse().map_err(|_| bad()))
        .collect::<std::result::Result<_, _>>()?;
    v.try_into().map_err(|_| bad())
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
            eprintln!("camera_pipeline: {e}");
            ExitCode::FAILURE
        }
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn run(args: &Args) -> Result<()> {
    if args.frames == 0 {
        return Err(Error::InvalidArgument("--frames must be at least 1".into()));
    }
    let mut config = CameraConfig {
        size: args.size,
        format: args.format,
        fps: args.fps,
        buffers: args.buffers,
        buffer_mode: args.buffer_mode,
        ..CameraConfig::default()
    };
    let use_device = !args.synthetic && Path::new(&args.device).exists();
    let mut cam = if use_device {
        Camera::open(&args.device, config)?
    } else {
        config.size = config.size.or(Some((1280, 720)));
        println!(
            "no camera at {} (or --synthetic): using the synthetic camera",
            args.device.display()
        );
        Camera::synthetic(config)?
    };

    // Device memory first: the GL backend renders into a dma-buf destination without a
    // readback (the CPU backend writes any memory).
    let mut dst = Tensor::<f32>::image(SIDE, SIDE, PixelFormat::PlanarRgb, MemoryRequest::Device)?;
    let pin = dst.pin_host()?;
    let mut proc = ImageProcessor::with_backend(args.backend)?;
    let options = ConvertOptions {
        fit: Fit::Letterbox { pad: [114; 3] },
        isp: Isp {
            black_level: [args.black_level; 4],
            gains: args.wb_gains,
            gamma: args.gamma,
            ..Isp::IDENTITY
        },
        ..ConvertOptions::default()
    };
    println!(
        "camera: {} | {} | {} buffers ({})",
        cam.name(),
        cam.format(),
        cam.buffer_count(),
        cam.buffer_mode()
    );
    println!(
        "destination: {SIDE}x{SIDE} planar-rgb f32 in {} memory, pinned once at {:p} ({} bytes, {}-byte aligned)",
        dst.memory(),
        pin.as_ptr(),
        pin.len(),
        pin.alignment()
    );
    println!("backend: {}", proc.backend());

    let plane = (SIDE * SIDE) as usize;
    let mut convert_times = Vec::with_capacity(args.frames as usize);
    let mut infer_time = Duration::ZERO;
    let mut means = [0f64; 3];
    let mut info = None;
    let mut frame_memory = None;
    let start = Instant::now();
    for _ in 0..args.frames {
        let frame = cam.next_frame()?;
        frame_memory.get_or_insert(frame.memory());
        let t = Instant::now();
        info = Some(proc.convert_with(&frame, &mut dst, &options)?);
        convert_times.push(t.elapsed());
        drop(frame); // back to the camera before "inference"

        let t = Instant::now();
        dst.sync_for_cpu(Access::Read)?;
        // SAFETY: the pin covers the destination's 3 x 640 x 640 f32 values, and nothing
        // writes the destination between the sync brackets.
        let bytes = unsafe { pin.as_slice() };
        let values: &[f32] = bytemuck::try_cast_slice(bytes)
            .map_err(|e| Error::InvalidArgument(format!("pinned destination: {e}")))?;
        for (c, m) in means.iter_mut().enumerate() {
            let sum: f64 = values[c * plane..(c + 1) * plane]
                .iter()
                .map(|&v| v as f64)
                .sum();
            *m = sum / plane as f64;
        }
        dst.sync_for_device(Access::Read)?;
        infer_time += t.elapsed();
    }
    let elapsed = start.elapsed();

    let mut sorted = convert_times.clone();
    sorted.sort();
    let n = args.frames as f64;
    let stats = proc.stats();
    let cam_stats = cam.stats();
    println!(
        "frames: {} in {:.2} s = {:.1} fps (frames from {} memory)",
        args.frames,
        elapsed.as_secs_f64(),
        n / elapsed.as_secs_f64(),
        frame_memory.map_or("?".into(), |m| m.to_string())
    );
    println!(
        "convert latency: p50 {:.2} ms, p99 {:.2} ms, mean {:.2} ms; inference stand-in (mean over the pin) {:.2} ms/frame",
        ms(percentile(&sorted, 0.50)),
        ms(percentile(&sorted, 0.99)),
        ms(convert_times.iter().sum::<Duration>()) / n,
        ms(infer_time) / n
    );
    println!(
        "dropped frames: {} (buffers with errors: {}, empty: {}, malformed: {}; failed requeues: {})",
        cam_stats.dropped,
        cam_stats.errors,
        cam_stats.empty,
        cam_stats.malformed,
        cam_stats.requeue_failures
    );
    println!(
        "processor stats: frames {}, imports {}, cache hits {}, uploads {}, readbacks {}, cpu fallbacks {}",
        stats.frames,
        stats.imports,
        stats.cache_hits,
        stats.uploads,
        stats.readbacks,
        stats.cpu_fallbacks
    );
    if let Some(info) = info {
        println!(
            "letterbox: scale {:.4}, offset {:?}, content {:?}",
            info.scale[0], info.offset, info.content
        );
    }
    println!(
        "last frame channel means (R, G, B): {:.4} {:.4} {:.4}",
        means[0], means[1], means[2]
    );

    if let Some(path) = &args.snapshot {
        let map = dst.map()?;
        let mut rgb = vec![0u8; plane * 3];
        for i in 0..plane {
            for c in 0..3 {
                rgb[i * 3 + c] = (map[c * plane + i] * 255.0).round().clamp(0.0, 255.0) as u8;
            }
        }
        image::save_buffer(path, &rgb, SIDE, SIDE, image::ExtendedColorType::Rgb8)
            .map_err(|e| Error::InvalidArgument(format!("writing {}: {e}", path.display())))?;
        println!("snapshot: {}", path.display());
    }
    Ok(())
}
