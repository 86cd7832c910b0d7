//! `pinframe bench`: time conversions of a synthetic frame.

use std::time::{Duration, Instant};

use clap::Args;
use half::f16;
use rayon::prelude::*;

use crate::args::*;
use pinframe::{
    Backend, ConvertOptions, DType, Element, Error, ImageLayout, ImageProcessor, PixelFormat,
    Result,
};

#[derive(Args)]
pub(crate) struct BenchArgs {
    /// Pixel format of the synthetic input frame.
    #[arg(long, default_value = "yuyv", value_parser = parse_named::<PixelFormat>)]
    input_format: PixelFormat,
    /// Size of the input frame.
    #[arg(long, value_name = "WxH", default_value = "1920x1080", value_parser = parse_size)]
    input_size: Size,
    /// Pixel format of the output.
    #[arg(long, default_value = "rgb", value_parser = parse_named::<PixelFormat>)]
    output_format: PixelFormat,
    /// Size of the output.
    #[arg(long, value_name = "WxH", default_value = "640x640", value_parser = parse_size)]
    output_size: Size,
    /// Number of timed conversions (after one warm-up).
    #[arg(long, default_value_t = 100)]
    frames: u32,
    /// Wait this many milliseconds before each conversion, as a camera loop does between
    /// frames (the pool's threads fall asleep in between and wake for each frame), and
    /// report the median latency of one conversion; 0 converts back to back and reports
    /// the mean.
    #[arg(
        long,
        value_name = "MS",
        default_value_t = 0.0,
        allow_negative_numbers = true
    )]
    interval_ms: f64,
    #[command(flatten)]
    process: ProcessArgs,
}

pub(crate) fn run(args: &BenchArgs) -> Result<()> {
    let Size(sw, sh) = args.input_size;
    let src_layout = ImageLayout::new(sw, sh, args.input_format)?;
    let mut state = 0x9E37_79B9u32;
    let src: Vec<u8> = (0..src_layout.required_len(0))
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            state as u8
        })
        .collect();
    let Size(dw, dh) = args.output_size;
    let dtype = args.process.dtype;
    let dst_layout = ImageLayout::tight(dw, dh, args.output_format, dtype)?;
    let options = args.process.options(sh)?;
    let mut proc = ImageProcessor::with_backend(args.process.backend)?;
    if args.frames == 0 {
        return Err(Error::InvalidArgument("--frames must be at least 1".into()));
    }
    let pace = Pace::new(args.interval_ms, args.frames)?;
    let elapsed = match dtype {
        DType::U8 => time::<u8>(&mut proc, &src, &src_layout, &dst_layout, &options, &pace)?,
        DType::I8 => time::<i8>(&mut proc, &src, &src_layout, &dst_layout, &options, &pace)?,
        DType::F16 => time::<f16>(&mut proc, &src, &src_layout, &dst_layout, &options, &pace)?,
        DType::F32 => time::<f32>(&mut proc, &src, &src_layout, &dst_layout, &options, &pace)?,
        other => {
            return Err(Error::Unsupported(format!(
                "output dtype {other} is not supported; use u8, i8, f16 or f32"
            )));
        }
    };
    let per_frame = elapsed.as_secs_f64();
    let floor = memory_floor(&src, dst_layout.required_len(0), &pace)?.as_secs_f64();
    // Which CPU kernel ran: timings of the AVX-512, AVX2, NEON and portable builds differ.
    let kernel = match proc.backend() {
        Backend::Cpu => format!(", {} kernel", proc.cpu_kernel()),
        _ => String::new(),
    };
    // A paced run's rate is the camera's, not the converter's: it prints the latency only.
    let rate = match pace.interval {
        // As given: a rounded interval (0.05 as "0.1") would misstate the run.
        Some(_) => format!(" (median of frames {} ms apart)", args.interval_ms),
        None => format!(", {:.1} frames per second", 1.0 / per_frame),
    };
    println!(
        "{sw}x{sh} {} -> {dw}x{dh} {}/{dtype} on {} ({} threads{kernel}): {:.3} ms per frame{rate}; floor {:.3} ms, {:.2}x the floor",
        args.input_format,
        args.output_format,
        proc.backend(),
        rayon::current_num_threads(),
        per_frame * 1e3,
        floor * 1e3,
        per_frame / floor
    );
    Ok(())
}

/// How the frames of a run are spaced, and so which time per frame it reports.
struct Pace {
    frames: u32,
    /// The wait before each frame; `None`: back to back.
    interval: Option<Duration>,
}

impl Pace {
    fn new(interval_ms: f64, frames: u32) -> Result<Self> {
        if !(interval_ms.is_finite() && (0.0..=10_000.0).contains(&interval_ms)) {
            return Err(Error::InvalidArgument(format!(
                "--interval-ms {interval_ms} must be between 0 and 10000"
            )));
        }
        let interval = (interval_ms > 0.0).then(|| Duration::from_secs_f64(interval_ms / 1e3));
        Ok(Self { frames, interval })
    }

    /// The time of one `frame()` under this pace: the mean of `frames` back-to-back calls,
    /// or the median of `frames` calls each after the interval's wait (a paced frame
    /// wakes a sleeping pool, so single frames vary more and the median says more).
    fn per_frame<R>(&self, mut frame: impl FnMut() -> Result<R>) -> Result<Duration> {
        frame()?;
        let Some(interval) = self.interval else {
            let start = Instant::now();
            for _ in 0..self.frames {
                frame()?;
            }
            return Ok(start.elapsed() / self.frames);
        };
        let mut times = Vec::with_capacity(self.frames as usize);
        for _ in 0..self.frames {
            std::thread::sleep(interval);
            let start = Instant::now();
            frame()?;
            times.push(start.elapsed());
        }
        times.sort_unstable();
        Ok(times[times.len() / 2])
    }
}

/// The memory floor of a conversion: one copy of the source frame plus one fill of a
/// destination of `dst_len` bytes, on the same rayon pool the CPU backend uses, paced as
/// the conversions are. No conversion that reads its whole source and writes its whole
/// destination moves less.
fn memory_floor(src: &[u8], dst_len: usize, pace: &Pace) -> Result<Duration> {
    const CHUNK: usize = 64 * 1024;
    let mut copy = vec![0u8; src.len()];
    let mut dst = vec![0u8; dst_len];
    pace.per_frame(|| {
        copy.par_chunks_mut(CHUNK)
            .zip(src.par_chunks(CHUNK))
            .for_each(|(d, s)| d.copy_from_slice(s));
        dst.par_chunks_mut(CHUNK).for_each(|d| d.fill(114));
        std::hint::black_box((&*copy, &*dst));
        Ok(())
    })
}

fn time<T: Element>(
    proc: &mut ImageProcessor,
    src: &[u8],
    src_layout: &ImageLayout,
    dst_layout: &ImageLayout,
    options: &ConvertOptions,
    pace: &Pace,
) -> Result<Duration> {
    let mut out = vec![T::zeroed(); dst_layout.required_len(0) / std::mem::size_of::<T>()];
    pace.per_frame(|| proc.convert_buffers(&[src], src_layout, &mut out, dst_layout, options))
}
