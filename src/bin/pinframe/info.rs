//! `pinframe info`: backends, EGL/GL driver, dma-buf formats, DMA memory routes, cameras.

use std::path::Path;

use pinframe::{Backend, ImageProcessor, Result};

pub(crate) fn run() -> Result<()> {
    println!("pinframe {}", env!("CARGO_PKG_VERSION"));
    println!("backends:");
    println!(
        "  cpu: fused kernels ({}) on {} thread(s)",
        ImageProcessor::with_backend(Backend::Cpu).map_or("unavailable", |p| p.cpu_kernel()),
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
    match pinframe::tensor::cpu_mapping_guard() {
        Ok(pinframe::tensor::CpuMappingGuard::Shared { library }) => {
            println!("cpu-mapping guard: shared, in {library}")
        }
        Ok(_) => println!("cpu-mapping guard: this copy's own (built without shared-guard)"),
        Err(e) => println!("cpu-mapping guard: unavailable: {e}"),
    }
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
    match pinframe::jpeg::JpegDecoder::new() {
        Ok(_) => println!("mjpeg: libjpeg-turbo (libturbojpeg.so.0) loaded"),
        Err(e) => println!("mjpeg: unavailable: {e}"),
    }
    #[cfg(feature = "camera")]
    cameras();
    Ok(())
}

/// Every V4L2 capture node and the formats it offers: pinframe's name for those it
/// converts (`mjpeg` is how most USB webcams send 720p and 1080p at 30 fps).
#[cfg(feature = "camera")]
fn cameras() {
    let mut nodes: Vec<_> = std::fs::read_dir("/dev")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("video"))
        })
        .collect();
    nodes.sort();
    if nodes.is_empty() {
        println!("cameras: none (/dev/video*); the synthetic camera is always there");
        return;
    }
    println!("cameras:");
    for node in nodes {
        match pinframe::camera::list_formats(&node) {
            Ok(formats) => {
                let list: Vec<String> = formats
                    .iter()
                    .map(|f| {
                        let code = pinframe::image::fourcc_to_string(f.fourcc);
                        match f.format {
                            Some(p) => format!("{code} ({p})"),
                            None => format!("{code} (not converted)"),
                        }
                    })
                    .collect();
                println!("  {}: {}", node.display(), list.join(", "));
            }
            Err(e) => println!("  {}: {e}", node.display()),
        }
    }
}
