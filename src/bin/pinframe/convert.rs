//! `pinframe convert`: an image file (raw, PNG or JPEG) into another format, size and dtype.

use std::path::{Path, PathBuf};

use clap::Args;
use half::f16;

use crate::args::*;
use pinframe::{
    ConvertInfo, ConvertOptions, Crop, DType, Element, Error, ImageLayout, ImageProcessor,
    PixelFormat, Result,
};

#[derive(Args)]
pub(crate) struct ConvertArgs {
    /// Input file: raw bytes, or `.png`/`.jpg`/`.jpeg` (decoded to rgb).
    #[arg(long)]
    input: PathBuf,
    /// Pixel format of a raw input.
    #[arg(long, value_parser = parse_named::<PixelFormat>)]
    input_format: Option<PixelFormat>,
    /// Size of a raw input.
    #[arg(long, value_name = "WxH", value_parser = parse_size)]
    input_size: Option<Size>,
    /// Row pitch of a raw input's first plane in bytes (default: tightly packed).
    #[arg(long, value_name = "BYTES")]
    input_stride: Option<usize>,
    /// Output file: raw bytes (tightly packed), or `.png` (u8 rgb/bgr/rgba/bgra/grey/planar).
    #[arg(long)]
    output: PathBuf,
    /// Pixel format of the output.
    #[arg(long, value_parser = parse_named::<PixelFormat>)]
    output_format: PixelFormat,
    /// Size of the output (default: the cropped, rotated input size).
    #[arg(long, value_name = "WxH", value_parser = parse_size)]
    output_size: Option<Size>,
    #[command(flatten)]
    process: ProcessArgs,
}

fn is_image_file(path: &Path) -> bool {
    matches!(
        path.extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase)
            .as_deref(),
        Some("png" | "jpg" | "jpeg")
    )
}

pub(crate) fn io_error(what: &str, path: &Path, e: std::io::Error) -> Error {
    Error::InvalidArgument(format!("{what} {}: {e}", path.display()))
}

/// Reads the input as (layout, bytes).
fn read_input(args: &ConvertArgs) -> Result<(ImageLayout, Vec<u8>)> {
    // A JPEG frame (a .jpg file, or a frame saved from a webcam's stream) given as mjpeg
    // goes to pinframe's decoder; its size is its own.
    if let Some(format) = args.input_format.filter(|f| f.is_compressed()) {
        let bytes =
            std::fs::read(&args.input).map_err(|e| io_error("cannot read", &args.input, e))?;
        let info = pinframe::jpeg::parse(&bytes)?;
        if let Some(Size(iw, ih)) = args.input_size
            && (iw, ih) != (info.width, info.height)
        {
            return Err(Error::InvalidArgument(format!(
                "{} is a {}x{} frame, not the --input-size {iw}x{ih}",
                args.input.display(),
                info.width,
                info.height
            )));
        }
        let layout =
            ImageLayout::with_stride(info.width, info.height, format, DType::U8, bytes.len())?;
        return Ok((layout, bytes));
    }
    if is_image_file(&args.input) {
        let img = image::open(&args.input)
            .map_err(|e| {
                Error::InvalidArgument(format!("cannot decode {}: {e}", args.input.display()))
            })?
            .to_rgb8();
        let (w, h) = img.dimensions();
        if let Some(f) = args.input_format
            && f != PixelFormat::Rgb
        {
            return Err(Error::InvalidArgument(format!(
                "{} is decoded as rgb; drop --input-format {f} or give a raw file",
                args.input.display()
            )));
        }
        if let Some(Size(iw, ih)) = args.input_size
            && (iw, ih) != (w, h)
        {
            return Err(Error::InvalidArgument(format!(
                "{} is {w}x{h}, not the --input-size {iw}x{ih}",
                args.input.display()
            )));
        }
        return Ok((ImageLayout::new(w, h, PixelFormat::Rgb)?, img.into_raw()));
    }
    let format = args.input_format.ok_or_else(|| {
        Error::InvalidArgument("a raw input needs --input-format (e.g. yuyv, nv12, rgb)".into())
    })?;
    let Size(w, h) = args
        .input_size
        .ok_or_else(|| Error::InvalidArgument("a raw input needs --input-size WxH".into()))?;
    let layout = match args.input_stride {
        Some(stride) => ImageLayout::with_stride(w, h, format, DType::U8, stride)?,
        None => ImageLayout::new(w, h, format)?,
    };
    let bytes = std::fs::read(&args.input).map_err(|e| io_error("cannot read", &args.input, e))?;
    let needed = layout.required_len(0);
    if bytes.len() < needed {
        return Err(Error::InvalidArgument(format!(
            "{} has {} bytes but a {w}x{h} {format} image needs {needed}; check --input-size, \
             --input-format and --input-stride",
            args.input.display(),
            bytes.len()
        )));
    }
    Ok((layout, bytes))
}

/// Converts into a fresh, tightly packed buffer of `T`.
fn convert_into<T: Element>(
    proc: &mut ImageProcessor,
    src: &[u8],
    src_layout: &ImageLayout,
    dst_layout: &ImageLayout,
    options: &ConvertOptions,
) -> Result<(Vec<T>, ConvertInfo)> {
    let mut out = vec![T::zeroed(); dst_layout.required_len(0) / std::mem::size_of::<T>()];
    let info = proc.convert_buffers(&[src], src_layout, &mut out, dst_layout, options)?;
    Ok((out, info))
}

pub(crate) fn run(args: &ConvertArgs) -> Result<()> {
    let (src_layout, src) = read_input(args)?;
    let options = args.process.options(src_layout.height())?;
    let Size(w, h) = match args.output_size {
        Some(s) => s,
        None => {
            let c =
                options
                    .crop
                    .unwrap_or(Crop::new(0, 0, src_layout.width(), src_layout.height()));
            if options.rotation.swaps_axes() {
                Size(c.height, c.width)
            } else {
                Size(c.width, c.height)
            }
        }
    };
    let dtype = args.process.dtype;
    let dst_layout = ImageLayout::tight(w, h, args.output_format, dtype)?;
    let png = args
        .output
        .extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("png"));
    if png && dtype != DType::U8 {
        return Err(Error::InvalidArgument(format!(
            "PNG output holds u8 pixels; use --dtype u8 or a raw output file instead of {dtype}"
        )));
    }
    let mut proc = ImageProcessor::with_backend(args.process.backend)?;
    let bytes: Vec<u8> = match dtype {
        DType::U8 => convert_into::<u8>(&mut proc, &src, &src_layout, &dst_layout, &options)?.0,
        DType::I8 => bytemuck::cast_vec(
            convert_into::<i8>(&mut proc, &src, &src_layout, &dst_layout, &options)?.0,
        ),
        DType::F16 => bytemuck::cast_slice(
            &convert_into::<f16>(&mut proc, &src, &src_layout, &dst_layout, &options)?.0,
        )
        .to_vec(),
        DType::F32 => bytemuck::cast_slice(
            &convert_into::<f32>(&mut proc, &src, &src_layout, &dst_layout, &options)?.0,
        )
        .to_vec(),
        other => {
            return Err(Error::Unsupported(format!(
                "output dtype {other} is not supported; use u8, i8, f16 or f32"
            )));
        }
    };
    if png {
        write_png(&args.output, &bytes, &dst_layout)
    } else {
        std::fs::write(&args.output, &bytes).map_err(|e| io_error("cannot write", &args.output, e))
    }
}

pub(crate) fn write_png(path: &Path, bytes: &[u8], layout: &ImageLayout) -> Result<()> {
    let (w, h) = (layout.width(), layout.height());
    let n = (w * h) as usize;
    let (data, color) = match layout.format() {
        PixelFormat::Rgb => (bytes.to_vec(), image::ExtendedColorType::Rgb8),
        PixelFormat::Rgba => (bytes.to_vec(), image::ExtendedColorType::Rgba8),
        PixelFormat::Grey => (bytes.to_vec(), image::ExtendedColorType::L8),
        PixelFormat::Bgr => (
            bytes
                .chunks_exact(3)
                .flat_map(|p| [p[2], p[1], p[0]])
                .collect(),
            image::ExtendedColorType::Rgb8,
        ),
        PixelFormat::Bgra => (
            bytes
                .chunks_exact(4)
                .flat_map(|p| [p[2], p[1], p[0], p[3]])
                .collect(),
            image::ExtendedColorType::Rgba8,
        ),
        PixelFormat::PlanarRgb | PixelFormat::PlanarBgr => {
            let order = if layout.format() == PixelFormat::PlanarRgb {
                [0, 1, 2]
            } else {
                [2, 1, 0]
            };
            let data = (0..n)
                .flat_map(|i| order.map(|plane| bytes[plane * n + i]))
                .collect();
            (data, image::ExtendedColorType::Rgb8)
        }
        f => {
            return Err(Error::Unsupported(format!("cannot write {f} as PNG")));
        }
    };
    image::save_buffer(path, &data, w, h, color)
        .map_err(|e| Error::InvalidArgument(format!("cannot write {}: {e}", path.display())))
}
