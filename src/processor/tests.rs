//! The processor's GL → CPU fallback under `Auto` (DESIGN.md invariant 8): counted every
//! time, logged once per cause, the CPU's result delivered; under `Backend::Gl` the same
//! request fails loudly. `Auto` picks the CPU on llvmpipe, so the test builds an `Auto`
//! processor on GL by hand.

#[path = "../../tests/common/log_capture.rs"]
mod log_capture;

use super::*;
use crate::Memory;
use crate::gl::{GlBackend, GlConfig};

const FALLBACK: &str = "converting on the CPU";

fn auto_on_gl(test: &str) -> Option<ImageProcessor> {
    match GlBackend::new(GlConfig::default()) {
        Ok(gl) => {
            let mut p = ImageProcessor::on(Backend::Gl, Backend::Auto);
            p.gl = Some(gl);
            Some(p)
        }
        Err(e) if std::env::var("CI").is_ok_and(|v| v == "true" || v == "1") => {
            panic!("{test}: the GL backend cannot start under CI=true: {e}")
        }
        Err(e) => {
            eprintln!("SKIPPED {test}: the GL backend cannot start: {e}");
            None
        }
    }
}

fn image(w: u32, h: u32, f: PixelFormat, fill: u8) -> Tensor<u8> {
    let mut t = Tensor::<u8>::image(w, h, f, Some(Memory::Heap)).unwrap();
    for (i, b) in t.map_mut().unwrap().iter_mut().enumerate() {
        *b = (i as u8).wrapping_mul(31).wrapping_add(fill);
    }
    t
}

#[test]
fn auto_falls_back_to_the_cpu_counted_every_time_and_logged_once_per_cause() {
    let test = "auto_falls_back_to_the_cpu_counted_every_time_and_logged_once_per_cause";
    let Some(mut auto) = auto_on_gl(test) else {
        return;
    };
    log_capture::install();
    let mut cpu = ImageProcessor::with_backend(Backend::Cpu).unwrap();
    let mut dst = Tensor::<u8>::image(8, 8, PixelFormat::Rgb, Some(Memory::Heap)).unwrap();
    let mut want = Tensor::<u8>::image(8, 8, PixelFormat::Rgb, Some(Memory::Heap)).unwrap();

    // Cause 1: a source GL does not sample (planar RGB), five frames.
    let planar = image(8, 8, PixelFormat::PlanarRgb, 1);
    cpu.convert(&planar, &mut want).unwrap();
    for frame in 1..=5 {
        dst.map_mut().unwrap().fill(0);
        auto.convert(&planar, &mut dst).unwrap();
        assert_eq!(*dst.map().unwrap(), *want.map().unwrap(), "frame {frame}");
        assert_eq!(auto.stats().cpu_fallbacks, frame);
    }
    assert_eq!(log_capture::warnings_here(FALLBACK), 1);
    assert_eq!(
        log_capture::count_here(log::Level::Debug, FALLBACK),
        4,
        "the repeats are logged at debug level"
    );

    // Cause 2: a source wider than the context's textures (GL fails with its context
    // current), three frames: one more warning.
    let max = auto.gl_info().unwrap().max_texture_size;
    if max < crate::image::MAX_DIMENSION {
        let wide = image(max + 2, 1, PixelFormat::Grey, 2);
        cpu.convert(&wide, &mut want).unwrap();
        for _ in 0..3 {
            auto.convert(&wide, &mut dst).unwrap();
            assert_eq!(*dst.map().unwrap(), *want.map().unwrap());
        }
        assert_eq!(auto.stats().cpu_fallbacks, 8);
        assert_eq!(log_capture::warnings_here(FALLBACK), 2);
    }
    // The first cause again: no new warning; a conversion GL does is no fallback.
    let before = auto.stats().cpu_fallbacks;
    auto.convert(&planar, &mut dst).unwrap();
    auto.convert(&image(8, 8, PixelFormat::Yuyv, 3), &mut dst)
        .unwrap();
    assert_eq!(auto.stats().cpu_fallbacks, before + 1);
    assert_eq!(auto.stats().frames, before + 2);
    assert_eq!(
        log_capture::warnings_here(FALLBACK),
        1 + (max < crate::image::MAX_DIMENSION) as usize
    );

    // Asked for explicitly, GL fails loudly instead.
    let mut gl = ImageProcessor::with_backend(Backend::Gl).unwrap();
    let e = gl.convert(&planar, &mut dst).unwrap_err();
    assert_eq!(e.kind(), crate::ErrorKind::Unsupported, "{e}");
    assert_eq!(gl.stats().cpu_fallbacks, 0);
}
