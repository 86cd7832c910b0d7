//! `pinframe bench`: time conversions of a synthetic frame.

use std::time::{Duration, Instant};

use clap::Args;
use half::f16;

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
    // Which CPU kernel ran: timings of the AVX2, NEON and portable builds differ.
    let kernel = match proc.backend() {
        Backend::Cpu => format!(", {} kernel", proc.cpu_kernel()),
        _ => String::new(),
    };
    println!(
        "{sw}x{sh} {} -> {dw}x{dh} {}/{dtype} on {} ({} threads{kernel}): {:.3} ms per frame, {:.1} frames per second",
        args.input_format,
        args.output_format,
        proc.backend(),
        rayon::current_num_threads(),
        per_frame * 1e3,
        1.0 / per_frame
    );
    Ok(())
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
