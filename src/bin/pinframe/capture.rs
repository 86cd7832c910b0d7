//! `pinframe capture`: frames from a V4L2 camera, the last one written to a file.

use std::path::PathBuf;

use clap::Args;

use crate::args::*;
use crate::convert::{io_error, write_png};
use pinframe::{Backend, Error, ImageProcessor, PixelFormat, Result};

#[cfg(feature = "camera")]
#[derive(Args)]
pub(crate) struct CaptureArgs {
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
pub(crate) fn run(args: &CaptureArgs) -> Result<()> {
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
    let layout = *frame
        .layout()
        .ok_or_else(|| Error::InvalidArgument("frame without a layout".into()))?;
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
