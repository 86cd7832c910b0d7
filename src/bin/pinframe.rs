//! The `pinframe` command-line tool: convert image files and benchmark conversions
//! through the library (see DESIGN.md's CLI contract).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::{Args, Parser, Subcommand};
use half::f16;
use pinframe::{
    Backend, ColorimetryChoice, ConvertInfo, ConvertOptions, Crop, DType, Element, Error, Fit,
    Flip, ImageLayout, ImageProcessor, Interpolation, Matrix, Normalize, PixelFormat, Quantize,
    Range, Result, Rotation,
};

#[derive(Parser)]
#[command(
    name = "pinframe",
    version,
    about = "Camera frames to inference-ready tensors"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// The subcommands. `capture` joins this list as its lane lands.
#[derive(Subcommand)]
enum Command {
    /// Print the backends (and which one `auto` picks), the EGL/GL driver, its extensions
    /// and importable dma-buf formats, and the DMA memory routes.
    Info,
    /// Convert an image file (raw, PNG or JPEG) into another format, size and dtype.
    Convert(ConvertArgs),
    /// Time conversions of a synthetic frame and print time per frame and frames per second.
    Bench(BenchArgs),
    /// Capture frames from a V4L2 camera and write the last one (PNG by extension, else
    /// the raw frame, tightly packed).
    #[cfg(feature = "camera")]
    Capture(CaptureArgs),
}

/// A `WxH` size.
#[derive(Clone, Copy, Debug)]
struct Size(u32, u32);

fn parse_size(s: &str) -> std::result::Result<Size, String> {
    let (w, h) = s
        .split_once(['x', 'X'])
        .ok_or_else(|| format!("size {s:?} is not WxH (e.g. 640x480)"))?;
    let num = |v: &str| {
        v.trim()
            .parse::<u32>()
            .map_err(|_| format!("size {s:?} is not WxH (e.g. 640x480)"))
    };
    Ok(Size(num(w)?, num(h)?))
}

fn parse_list<const N: usize, T: std::str::FromStr>(
    s: &str,
    what: &str,
) -> std::result::Result<[T; N], String> {
    let parts: Vec<&str> = s.split(',').map(str::trim).collect();
    if parts.len() != N {
        return Err(format!("{what} {s:?} needs {N} comma-separated values"));
    }
    let mut out = Vec::with_capacity(N);
    for p in parts {
        out.push(
            p.parse::<T>()
                .map_err(|_| format!("{what} {s:?}: {p:?} is not a valid number"))?,
        );
    }
    out.try_into()
        .map_err(|_| format!("{what} {s:?} needs {N} values"))
}

fn parse_pad(s: &str) -> std::result::Result<[u8; 3], String> {
    parse_list::<3, u8>(s, "pad (R,G,B in 0..=255)")
}
fn parse_crop(s: &str) -> std::result::Result<Crop, String> {
    let [x, y, w, h] = parse_list::<4, u32>(s, "crop (X,Y,W,H)")?;
    Ok(Crop::new(x, y, w, h))
}
fn parse_triple(s: &str) -> std::result::Result<[f32; 3], String> {
    parse_list::<3, f32>(s, "R,G,B")
}
/// Parses any of the library's option types through its `FromStr` (whose errors already
/// say what is accepted).
fn parse_named<T: std::str::FromStr<Err = Error>>(s: &str) -> std::result::Result<T, String> {
    s.parse().map_err(|e: Error| e.to_string())
}
fn parse_rotation(s: &str) -> std::result::Result<Rotation, String> {
    let degrees = s
        .parse::<u32>()
        .map_err(|_| format!("rotation {s:?} is not 0, 90, 180 or 270"))?;
    Rotation::from_degrees(degrees).map_err(|e| e.to_string())
}
fn parse_interp(s: &str) -> std::result::Result<Interpolation, String> {
    s.parse().map_err(|e: Error| e.to_string())
}

/// Geometry, colour and normalisation options shared by `convert` and `bench`.
#[derive(Args)]
struct ProcessArgs {
    /// Element type of the output.
    #[arg(long, default_value = "u8", value_parser = parse_named::<DType>)]
    dtype: DType,
    /// How the source is fitted into the output size.
    #[arg(long, default_value = "stretch", value_parser = ["stretch", "letterbox", "fill"])]
    fit: String,
    /// Letterbox padding colour.
    #[arg(long, value_name = "R,G,B", default_value = "114,114,114", value_parser = parse_pad)]
    pad: [u8; 3],
    /// Source rectangle to convert.
    #[arg(long, value_name = "X,Y,W,H", value_parser = parse_crop)]
    crop: Option<Crop>,
    /// Clockwise rotation in degrees.
    #[arg(long, value_name = "0|90|180|270", default_value = "0", value_parser = parse_rotation)]
    rotate: Rotation,
    /// Mirroring (before the rotation).
    #[arg(long, default_value = "none", value_parser = parse_named::<Flip>)]
    flip: Flip,
    /// Resampling filter.
    #[arg(long, default_value = "bilinear", value_parser = parse_interp)]
    interp: Interpolation,
    /// YUV matrix (default: from the frame size).
    #[arg(long, value_parser = parse_named::<Matrix>)]
    matrix: Option<Matrix>,
    /// YUV range (default: limited).
    #[arg(long, value_parser = parse_named::<Range>)]
    range: Option<Range>,
    /// Per-channel mean for float outputs.
    #[arg(long, value_name = "R,G,B", value_parser = parse_triple)]
    mean: Option<[f32; 3]>,
    /// Per-channel std for float outputs.
    #[arg(long, value_name = "R,G,B", value_parser = parse_triple)]
    std: Option<[f32; 3]>,
    /// Quantise u8/i8 outputs, TFLite style: q = clamp(round(x / SCALE) + ZERO_POINT),
    /// x the normalised value (--mean/--std).
    #[arg(long, value_name = "SCALE,ZERO_POINT", value_parser = parse_named::<Quantize>)]
    quantize: Option<Quantize>,
    /// Backend to run on.
    #[arg(long, default_value = "auto", value_parser = parse_named::<Backend>)]
    backend: Backend,
}

impl ProcessArgs {
    fn options(&self, src_height: u32) -> Result<ConvertOptions> {
        let fit = match self.fit.as_str() {
            "letterbox" => Fit::Letterbox { pad: self.pad },
            "fill" => Fit::Fill,
            _ => Fit::Stretch,
        };
        Ok(ConvertOptions {
            crop: self.crop,
            flip: self.flip,
            rotation: self.rotate,
            fit,
            interpolation: self.interp,
            colorimetry: ColorimetryChoice::from_parts(
                self.matrix,
                self.range,
                pinframe::Colorimetry::default_for_height(src_height),
            ),
            normalize: Normalize {
                mean: self.mean.unwrap_or([0.0; 3]),
                std: self.std.unwrap_or([1.0; 3]),
            },
            quantize: self.quantize,
        })
    }
}

#[derive(Args)]
struct ConvertArgs {
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

#[derive(Args)]
struct BenchArgs {
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

fn is_image_file(path: &Path) -> bool {
    matches!(
        path.extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase)
            .as_deref(),
        Some("png" | "jpg" | "jpeg")
    )
}

fn io_error(what: &str, path: &Path, e: std::io::Error) -> Error {
    Error::InvalidArgument(format!("{what} {}: {e}", path.display()))
}

/// Reads the input as (layout, bytes).
fn read_input(args: &ConvertArgs) -> Result<(ImageLayout, Vec<u8>)> {
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

fn convert(args: &ConvertArgs) -> Result<()> {
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

fn write_png(path: &Path, bytes: &[u8], layout: &ImageLayout) -> Result<()> {
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

fn bench(args: &BenchArgs) -> Result<()> {
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
    println!(
        "{sw}x{sh} {} -> {dw}x{dh} {}/{dtype} on {} ({} threads): {:.3} ms per frame, {:.1} frames per second",
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

/// `pinframe info`.
fn info() -> Result<()> {
    println!("pinframe {}", env!("CARGO_PKG_VERSION"));
    println!("backends:");
    println!(
        "  cpu: fused kernels on {} thread(s)",
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    #[cfg(feature = "gl")]
    match ImageProcessor::with_backend(Backend::Gl) {
        Ok(p) => {
            let i = p.gl_info().expect("a GL processor has GL info");
            println!("  gl: {i}");
            println!(
                "    EGL platform: {}, DRM node: {}",
                i.platform,
                i.node.as_deref().unwrap_or("-")
            );
            println!(
                "    GLSL: {}; max texture size {}",
                i.glsl_version, i.max_texture_size
            );
            println!("    EGL extensions: {}", i.egl_extensions.join(" "));
            println!("    GL extensions: {}", i.gl_extensions.join(" "));
            if i.dma_buf_import {
                println!(
                    "    dma-buf import formats: {}",
                    i.dma_buf_formats.join(" ")
                );
            }
        }
        Err(e) => println!("  gl: unavailable: {e}"),
    }
    #[cfg(not(feature = "gl"))]
    println!("  gl: not built (feature `gl`)");
    let auto = ImageProcessor::new()?;
    println!("  auto picks: {}", auto.backend());
    println!("memory:");
    println!(
        "  dma-heaps tried: {}",
        pinframe::tensor::dma_heap_order().join(", ")
    );
    let heaps: Vec<String> = std::fs::read_dir("/dev/dma_heap")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    println!(
        "  dma-heaps present: {}",
        if heaps.is_empty() {
            "none".to_string()
        } else {
            heaps.join(", ")
        }
    );
    println!(
        "  udmabuf: {}",
        if Path::new("/dev/udmabuf").exists() {
            "present"
        } else {
            "absent"
        }
    );
    let nodes = pinframe::tensor::render_nodes();
    println!(
        "  DRM render nodes: {}",
        if nodes.is_empty() {
            "none".to_string()
        } else {
            nodes.join(", ")
        }
    );
    Ok(())
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
                print!("{e}");
                return ExitCode::SUCCESS;
            }
            // One line: clap's message without its usage block.
            let text = e.to_string();
            let message: Vec<&str> = text
                .lines()
                .take_while(|l| !l.starts_with("Usage:"))
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .collect();
            let line = message.join(" ");
            eprintln!("pinframe: {}", line.trim_start_matches("error: "));
            return ExitCode::from(2);
        }
    };
    let result = match &cli.command {
        Command::Info => info(),
        Command::Convert(args) => convert(args),
        Command::Bench(args) => bench(args),
        #[cfg(feature = "camera")]
        Command::Capture(args) => capture(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("pinframe: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(feature = "camera")]
#[derive(Args)]
struct CaptureArgs {
    /// The V4L2 capture device.
    #[arg(long)]
    device: PathBuf,
    /// Frame size to ask for (default: the device's current size).
    #[arg(long, value_name = "WxH", value_parser = parse_size)]
    size: Option<Size>,
    /// Pixel format to ask for (default: the device's first format pinframe converts).
    #[arg(long, value_parser = parse_named::<PixelFormat>)]
    format: Option<PixelFormat>,
    /// Frames to capture; the last one is written.
    #[arg(long, default_value_t = 1)]
    frames: u32,
    /// Output file: `.png` (converted to rgb) or raw (the frame's planes, tightly packed).
    #[arg(long)]
    output: PathBuf,
    /// Capture buffer mode: auto, dmabuf or mmap.
    #[arg(long, default_value = "auto")]
    buffer_mode: pinframe::camera::BufferMode,
    /// Backend for the PNG conversion.
    #[arg(long, default_value = "cpu", value_parser = parse_named::<Backend>)]
    backend: Backend,
}

#[cfg(feature = "camera")]
fn capture(args: &CaptureArgs) -> Result<()> {
    use pinframe::camera::{Camera, CameraConfig};
    if args.frames == 0 {
        return Err(Error::InvalidArgument("--frames must be at least 1".into()));
    }
    let config = CameraConfig {
        size: args.size.map(|Size(w, h)| (w, h)),
        format: args.format,
        buffer_mode: args.buffer_mode,
        ..CameraConfig::default()
    };
    let mut cam = Camera::open(&args.device, config)?;
    let mut frame = cam.next_frame()?;
    for _ in 1..args.frames {
        drop(frame);
        frame = cam.next_frame()?;
    }
    let layout = frame
        .layout()
        .ok_or_else(|| Error::Camera("frame without a layout".into()))?
        .clone();
    let png = args
        .output
        .extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("png"));
    if png {
        let (w, h) = (layout.width(), layout.height());
        let mut rgb =
            pinframe::Tensor::<u8>::image(w, h, PixelFormat::Rgb, Some(pinframe::Memory::Heap))?;
        let mut proc = ImageProcessor::with_backend(args.backend)?;
        proc.convert(&frame, &mut rgb)?;
        let map = rgb.map()?;
        write_png(
            &args.output,
            map.as_bytes(),
            rgb.layout().unwrap_or(&layout),
        )?;
    } else {
        let map = frame.map()?;
        let mut out = Vec::new();
        for (i, plane) in layout.planes().iter().enumerate() {
            let bytes = map.buffer_bytes(plane.buffer);
            let row = layout.plane_row_bytes(i);
            for y in 0..layout.plane_height(i) as usize {
                let start = plane.offset + y * plane.stride;
                out.extend_from_slice(&bytes[start..start + row]);
            }
        }
        std::fs::write(&args.output, &out)
            .map_err(|e| io_error("cannot write", &args.output, e))?;
    }
    println!(
        "{}: {} frame(s) from {} ({}), {} buffers; frame {} written to {}",
        args.device.display(),
        cam.stats().frames,
        cam.name(),
        cam.format(),
        cam.buffer_mode(),
        frame.sequence(),
        args.output.display()
    );
    Ok(())
}
