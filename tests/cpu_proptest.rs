//! Property test: random geometry (sizes, crops, rotations, flips, fits, filters) on
//! random frames stays within tolerance of the f64 reference.

#[path = "common/reference.rs"]
mod reference;

use pinframe::{
    Backend, ConvertOptions, Crop, DType, Fit, Flip, ImageLayout, ImageProcessor, Interpolation,
    Normalize, PixelFormat, Rotation,
};
use proptest::prelude::*;
use reference::{
    DST_FORMATS, Readback, Rng, max_error, random_buffers, read_back, reference, source_size,
};

#[derive(Debug, Clone)]
struct Geometry {
    src_format: PixelFormat,
    src: (u32, u32),
    crop: Option<(u32, u32, u32, u32)>,
    dst: (u32, u32),
    dst_format: PixelFormat,
    dtype: DType,
    rotation: Rotation,
    flip: Flip,
    fit: Fit,
    interpolation: Interpolation,
    seed: u64,
}

fn geometry() -> impl Strategy<Value = Geometry> {
    (
        (0..PixelFormat::ALL.len(), 1u32..48, 1u32..40),
        (
            any::<bool>(),
            0.0f64..1.0,
            0.0f64..1.0,
            0.0f64..1.0,
            0.0f64..1.0,
        ),
        (1u32..45, 1u32..45, 0..DST_FORMATS.len(), 0usize..4),
        (0usize..4, 0usize..3, 0usize..3, any::<bool>(), any::<u64>()),
    )
        .prop_map(
            |(
                (sf, sw, sh),
                (crop, a, b, c, d),
                (dw, dh, df, dt),
                (rot, flip, fit, nearest, seed),
            )| {
                let (sw, sh) = source_size(PixelFormat::ALL[sf], sw, sh);
                let crop = crop.then(|| {
                    let x = (a * f64::from(sw)) as u32;
                    let y = (b * f64::from(sh)) as u32;
                    let w = 1 + (c * f64::from(sw - x)) as u32;
                    let h = 1 + (d * f64::from(sh - y)) as u32;
                    (x, y, w.min(sw - x), h.min(sh - y))
                });
                Geometry {
                    src_format: PixelFormat::ALL[sf],
                    src: (sw, sh),
                    crop,
                    dst: (dw, dh),
                    dst_format: DST_FORMATS[df],
                    dtype: [DType::U8, DType::I8, DType::F16, DType::F32][dt],
                    rotation: [Rotation::R0, Rotation::R90, Rotation::R180, Rotation::R270][rot],
                    flip: [Flip::None, Flip::Horizontal, Flip::Vertical][flip],
                    fit: [
                        Fit::Stretch,
                        Fit::Letterbox { pad: [114, 0, 255] },
                        Fit::Fill,
                    ][fit],
                    interpolation: if nearest {
                        Interpolation::Nearest
                    } else {
                        Interpolation::Bilinear
                    },
                    seed,
                }
            },
        )
}

fn run<T: Readback>(g: &Geometry) -> Result<(), TestCaseError> {
    let src = ImageLayout::new(g.src.0, g.src.1, g.src_format).unwrap();
    let bufs = random_buffers(&src, &mut Rng::new(g.seed), 0);
    let slices: Vec<&[u8]> = bufs.iter().map(|b| b.as_slice()).collect();
    let dst = ImageLayout::tight(g.dst.0, g.dst.1, g.dst_format, g.dtype).unwrap();
    let o = ConvertOptions {
        crop: g.crop.map(|(x, y, w, h)| Crop::new(x, y, w, h)),
        flip: g.flip,
        rotation: g.rotation,
        fit: g.fit,
        interpolation: g.interpolation,
        normalize: Normalize::IMAGENET,
        ..Default::default()
    };
    let mut out = vec![T::zeroed(); dst.required_len(0) / std::mem::size_of::<T>()];
    let mut proc = ImageProcessor::with_backend(Backend::Cpu).unwrap();
    proc.convert_buffers(&slices, &src, &mut out, &dst, &o)
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    let want = reference(&bufs, &src, g.dst.0, g.dst.1, g.dst_format, &o);
    let got = read_back(&out, &dst, o.normalize.mean, o.normalize.std);
    let (err, at) = max_error(&got, &want, g.dst_format, g.dtype);
    let tolerance = if matches!(g.dtype, DType::U8 | DType::I8) {
        1.0
    } else {
        0.6
    };
    prop_assert!(
        err <= tolerance,
        "error {err} at pixel {at}: got {:?} want {:?}",
        got[at],
        want[at]
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    #[test]
    fn random_geometry_matches_reference(g in geometry()) {
        match g.dtype {
            DType::U8 => run::<u8>(&g)?,
            DType::I8 => run::<i8>(&g)?,
            DType::F16 => run::<half::f16>(&g)?,
            _ => run::<f32>(&g)?,
        }
    }
}
