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
    let elapsed = match dtype {
        DType::U8 => time::<u8>(
            &mut proc,
            &src,
            &src_layout,
            &dst_layout,
            &options,
            args.frames,
        )?,
        DType::I8 => time::<i8>(
            &mut proc,
            &src,
            &src_layout,
            &dst_layout,
            &options,
            args.frames,
        )?,
        DType::F16 => time::<f16>(
            &mut proc,
            &src,
            &src_layout,
            &dst_layout,
            &options,
            args.frames,
        )?,
        DType::F32 => time::<f32>(
            &mut proc,
            &src,
            &src_layout,
            &dst_layout,
            &options,
            args.frames,
        )?,
        other => {
            return Err(Error::Unsupported(format!(
                "output dtype {other} is not supported; use u8, i8, f16 or f32"
            )));
        }
    };
    let per_frame = elapsed.as_secs_f64() / f64::from(args.frames);
    let floor = memory_floor(&src, dst_layout.required_len(0), args.frames).as_secs_f64()
        / f64::from(args.frames);
    // Which CPU kernel ran: timings of the AVX-512, AVX2, NEON and portable builds differ.
    let kernel = match proc.backend() {
        Backend::Cpu => format!(", {} kernel", proc.cpu_kernel()),
        _ => String::new(),
    };
    println!(
        "{sw}x{sh} {} -> {dw}x{dh} {}/{dtype} on {} ({} threads{kernel}): {:.3} ms per frame, {:.1} frames per second; floor {:.3} ms, {:.2}x the floor",
        args.input_format,
        args.output_format,
        proc.backend(),
        rayon::current_num_threads(),
        per_frame * 1e3,
        1.0 / per_frame,
        floor * 1e3,
        per_frame / floor
    );
    Ok(())
}

/// The memory floor of a conversion, `frames` times: one copy of the source frame plus one
/// fill of a destination of `dst_len` bytes, on the same rayon pool the CPU backend uses.
/// No conversion that reads its whole source and writes its whole destination moves less.
fn memory_floor(src: &[u8], dst_len: usize, frames: u32) -> Duration {
    const CHUNK: usize = 64 * 1024;
    let mut copy = vec![0u8; src.len()];
    let mut dst = vec![0u8; dst_len];
    let once = |copy: &mut [u8], dst: &mut [u8]| {
        copy.par_chunks_mut(CHUNK)
            .zip(src.par_chunks(CHUNK))
            .for_each(|(d, s)| d.copy_from_slice(s));
        dst.par_chunks_mut(CHUNK).for_each(|d| d.fill(114));
        std::hint::black_box((&*copy, &*dst));
    };
    once(&mut copy, &mut dst);
    let start = Instant::now();
    for _ in 0..frames {
        once(&mut copy, &mut dst);
    }
    start.elapsed()
}

fn time<T: Element>(
    proc: &mut ImageProcessor,
    src: &[u8],
    src_layout: &ImageLayout,
    dst_layout: &ImageLayout,
    options: &ConvertOptions,
    frames: u32,
) -> Result<Duration> {
    let mut out = vec![T::zeroed(); dst_layout.required_len(0) / std::mem::size_of::<T>()];
    proc.convert_buffers(&[src], src_layout, &mut out, dst_layout, options)?;
    let start = Instant::now();
    for _ in 0..frames {
        proc.convert_buffers(&[src], src_layout, &mut out, dst_layout, options)?;
    }
    Ok(start.elapsed())
}
