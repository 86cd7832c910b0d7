//! Batches: every slice of `convert_batch` against the single conversion of the same item
//! (exactly on the CPU; on GL exactly against GL's own single conversion and within the
//! GL lane's bound against the CPU), for batches of 1, 3 and 16 with mixed sources
//! (tensors in heap and memfd memory, padded strides and plane offsets, plain bytes),
//! crops at the borders, every fit, every destination layout and dtype; the errors found
//! before anything is written; and what the backends count per batch.

mod common;

use half::f16;
use pinframe::{
    Backend, BatchItem, ConvertOptions, Crop, DType, Element, ErrorKind, Fit, ImageLayout,
    ImageProcessor, Memory, Normalize, PixelFormat, Plane, Quantize, Tensor,
};

const SENTINEL: u8 = 0xA5;

/// Deterministic bytes (an LCG), so a failure reproduces.
fn pattern(len: usize, seed: u32) -> Vec<u8> {
    let mut state = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
    (0..len)
        .map(|_| {
            state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (state >> 24) as u8
        })
        .collect()
}

/// A smooth-ish image (random bytes low-passed along rows), so bilinear taps see real
/// gradients as well as noise.
fn smooth(len: usize, seed: u32) -> Vec<u8> {
    let raw = pattern(len, seed);
    let mut out = Vec::with_capacity(len);
    let mut acc = 128u32;
    for (i, b) in raw.iter().enumerate() {
        acc = (acc * 3 + u32::from(*b)) / 4;
        out.push(if i % 7 == 0 { *b } else { acc as u8 });
    }
    out
}

/// The sources of the mixed batches: an NV12 720p frame on the heap, a YUYV VGA frame in
/// a memfd, an NV12 frame with padded rows and a gap before its chroma plane, and an odd
/// sized RGB image as plain bytes with a padded stride.
struct Sources {
    nv12: Tensor<u8>,
    yuyv: Tensor<u8>,
    padded: Tensor<u8>,
    rgb_layout: ImageLayout,
    /// Leaked: items borrow the buffer list for as long as the sources live.
    rgb_bufs: [&'static [u8]; 1],
}

fn filled(layout: ImageLayout, memory: Memory, seed: u32) -> Tensor<u8> {
    let mut t = Tensor::<u8>::with_layout(layout, memory).unwrap();
    {
        let mut map = t.map_mut().unwrap();
        let bytes = map.as_bytes_mut();
        let data = smooth(bytes.len(), seed);
        bytes.copy_from_slice(&data);
    }
    t
}

impl Sources {
    fn new() -> Sources {
        let nv12 = filled(
            ImageLayout::tight(1280, 720, PixelFormat::Nv12, DType::U8).unwrap(),
            Memory::Heap,
            1,
        );
        let yuyv = filled(
            ImageLayout::tight(640, 480, PixelFormat::Yuyv, DType::U8).unwrap(),
            Memory::Shm,
            2,
        );
        let padded_layout = ImageLayout::with_planes(
            322,
            182,
            PixelFormat::Nv12,
            DType::U8,
            &[Plane::new(64, 384), Plane::new(64 + 384 * 182 + 512, 384)],
        )
        .unwrap();
        let padded = filled(padded_layout, Memory::Heap, 3);
        let rgb_layout =
            ImageLayout::with_stride(333, 211, PixelFormat::Rgb, DType::U8, 333 * 3 + 5).unwrap();
        let rgb_bytes: &'static [u8] =
            Box::leak(smooth(rgb_layout.required_len(0) + 7, 4).into_boxed_slice());
        Sources {
            nv12,
            yuyv,
            padded,
            rgb_layout,
            rgb_bufs: [rgb_bytes],
        }
    }

    /// `n` items cycling through the sources, crops (at every border, whole frames, one
    /// pixel) and fits.
    fn items(&self, n: usize) -> Vec<BatchItem<'_>> {
        let fits = [
            Fit::Letterbox {
                pad: [114, 20, 240],
            },
            Fit::Stretch,
            Fit::Fill,
        ];
        (0..n)
            .map(|i| {
                let (item, w, h) = match i % 4 {
                    0 => (BatchItem::tensor(&self.nv12), 1280, 720),
                    1 => (BatchItem::tensor(&self.yuyv), 640, 480),
                    2 => (BatchItem::tensor(&self.padded), 322, 182),
                    _ => (BatchItem::bytes(&self.rgb_bufs, &self.rgb_layout), 333, 211),
                };
                let crop = match (i / 4) % 5 {
                    0 => None,
                    1 => Some(Crop::new(0, 0, w / 3 + 1, h / 2 + 1)),
                    2 => Some(Crop::new(
                        w - w / 4 - 1,
                        h - h / 3 - 1,
                        w / 4 + 1,
                        h / 3 + 1,
                    )),
                    3 => Some(Crop::new(w - 1, 0, 1, h)),
                    _ => Some(Crop::new(w / 2 - 7, h / 2 - 5, 14, 10)),
                };
                let item = item.with_fit(fits[i % 3]);
                match crop {
                    Some(c) => item.with_crop(c),
                    None => item,
                }
            })
            .collect()
    }
}

fn sentinel_fill<T: Element>(t: &mut Tensor<T>) {
    t.map_mut().unwrap().as_bytes_mut().fill(SENTINEL);
}

/// The bytes of slice `i` of a batch.
fn slice_bytes<T: Element>(batch: &Tensor<T>, i: usize) -> Vec<u8> {
    let map = batch.map().unwrap();
    let n = batch.slice_bytes();
    map.as_bytes()[i * n..(i + 1) * n].to_vec()
}

/// Converts `item` alone, as `convert_with` does, into a fresh tensor laid out like one
/// slice of `batch`.
fn single<T: Element>(
    p: &mut ImageProcessor,
    item: &BatchItem<'_>,
    batch: &Tensor<T>,
    options: &ConvertOptions,
) -> (Vec<u8>, pinframe::ConvertInfo) {
    let layout = batch.slice_layout(0).unwrap();
    let mut dst = Tensor::<T>::with_layout(layout, Memory::Heap).unwrap();
    sentinel_fill(&mut dst);
    let opts = item.options(options);
    let info = match item.source {
        pinframe::BatchSource::Tensor(t) => p.convert_with(t, &mut dst, &opts).unwrap(),
        pinframe::BatchSource::Bytes { buffers, layout: l } => {
            let mut map = dst.map_mut().unwrap();
            p.convert_buffers(buffers, l, &mut map, &layout, &opts)
                .unwrap()
        }
        _ => unreachable!("every source kind is listed"),
    };
    let bytes = dst.map().unwrap().as_bytes()[..batch.slice_bytes()].to_vec();
    (bytes, info)
}

/// Element-wise largest difference between two slices of `dtype` elements (in 0..255
/// units for floats: a float output of the default normalisation is value / 255).
fn max_difference(a: &[u8], b: &[u8], dtype: DType) -> f64 {
    assert_eq!(a.len(), b.len());
    match dtype {
        DType::U8 => a
            .iter()
            .zip(b)
            .map(|(x, y)| (f64::from(*x) - f64::from(*y)).abs())
            .fold(0.0, f64::max),
        DType::I8 => a
            .iter()
            .zip(b)
            .map(|(x, y)| (f64::from(*x as i8) - f64::from(*y as i8)).abs())
            .fold(0.0, f64::max),
        DType::F16 => a
            .chunks_exact(2)
            .zip(b.chunks_exact(2))
            .map(|(x, y)| {
                let x = f16::from_le_bytes([x[0], x[1]]).to_f64();
                let y = f16::from_le_bytes([y[0], y[1]]).to_f64();
                (x - y).abs() * 255.0
            })
            .fold(0.0, f64::max),
        _ => a
            .chunks_exact(4)
            .zip(b.chunks_exact(4))
            .map(|(x, y)| {
                let x = f32::from_le_bytes([x[0], x[1], x[2], x[3]]) as f64;
                let y = f32::from_le_bytes([y[0], y[1], y[2], y[3]]) as f64;
                (x - y).abs() * 255.0
            })
            .fold(0.0, f64::max),
    }
}

const DST_FORMATS: [PixelFormat; 6] = [
    PixelFormat::Rgb,
    PixelFormat::Bgra,
    PixelFormat::Grey,
    PixelFormat::PlanarRgb,
    PixelFormat::PlanarBgr,
    PixelFormat::Rgba,
];

/// Every slice of a batch of `n` on `p` against `p`'s single conversion of the item.
/// Returns the largest difference seen (0 when exact).
fn check_batch<T: Element>(
    p: &mut ImageProcessor,
    sources: &Sources,
    n: usize,
    format: PixelFormat,
    options: &ConvertOptions,
    memory: Memory,
) -> Vec<Vec<u8>> {
    let items = sources.items(n);
    let mut batch = Tensor::<T>::image_batch(n, 97, 64, format, memory).unwrap();
    sentinel_fill(&mut batch);
    let infos = p.convert_batch(&items, &mut batch, options).unwrap();
    assert_eq!(infos.len(), n);
    let mut slices = Vec::with_capacity(n);
    for (i, item) in items.iter().enumerate() {
        let got = slice_bytes(&batch, i);
        let (want, info) = single(p, item, &batch, options);
        assert_eq!(
            infos[i],
            info,
            "{format} {}: item {i}'s ConvertInfo differs from its single conversion",
            T::DTYPE
        );
        if got != want {
            let at = got.iter().zip(&want).position(|(a, b)| a != b).unwrap();
            panic!(
                "{} {format} {} batch of {n}: slice {i} differs from the single conversion \
                 of its item at byte {at} ({} vs {}), max difference {}",
                p.backend(),
                T::DTYPE,
                got[at],
                want[at],
                max_difference(&got, &want, T::DTYPE)
            );
        }
        slices.push(got);
    }
    slices
}

fn options_for(dtype: DType) -> ConvertOptions {
    match dtype {
        DType::F32 | DType::F16 => ConvertOptions {
            normalize: Normalize::IMAGENET,
            ..ConvertOptions::default()
        },
        DType::I8 => ConvertOptions {
            quantize: Some(Quantize::per_tensor(1.0 / 255.0, -128)),
            ..ConvertOptions::default()
        },
        _ => ConvertOptions::default(),
    }
}

fn every_layout_and_dtype(p: &mut ImageProcessor, sizes: &[usize]) -> Vec<(String, Vec<Vec<u8>>)> {
    let sources = Sources::new();
    let mut out = Vec::new();
    for &n in sizes {
        for format in DST_FORMATS {
            let key = |d: DType| format!("{n} {format} {d}");
            out.push((
                key(DType::U8),
                check_batch::<u8>(
                    p,
                    &sources,
                    n,
                    format,
                    &options_for(DType::U8),
                    Memory::Heap,
                ),
            ));
            out.push((
                key(DType::I8),
                check_batch::<i8>(p, &sources, n, format, &options_for(DType::I8), Memory::Shm),
            ));
            out.push((
                key(DType::F16),
                check_batch::<f16>(
                    p,
                    &sources,
                    n,
                    format,
                    &options_for(DType::F16),
                    Memory::Heap,
                ),
            ));
            out.push((
                key(DType::F32),
                check_batch::<f32>(
                    p,
                    &sources,
                    n,
                    format,
                    &options_for(DType::F32),
                    Memory::Heap,
                ),
            ));
        }
    }
    out
}

#[test]
fn cpu_batch_slices_equal_single_conversions_exactly() {
    let mut p = ImageProcessor::with_backend(Backend::Cpu).unwrap();
    let results = every_layout_and_dtype(&mut p, &[1, 3, 16]);
    assert_eq!(results.len(), 3 * DST_FORMATS.len() * 4);
    // On the calling thread only, the same bytes.
    p.set_parallel(false);
    let sources = Sources::new();
    let serial = check_batch::<f32>(
        &mut p,
        &sources,
        16,
        PixelFormat::PlanarRgb,
        &options_for(DType::F32),
        Memory::Heap,
    );
    let parallel = &results
        .iter()
        .find(|(k, _)| k == "16 planar-rgb f32")
        .expect("the planar f32 batch of 16 ran")
        .1;
    assert_eq!(
        &serial, parallel,
        "the serial batch differs from the parallel one"
    );
}

#[cfg(feature = "gl")]
fn gl(test: &str) -> Option<ImageProcessor> {
    match ImageProcessor::with_backend(Backend::Gl) {
        Ok(p) => Some(p),
        Err(e) if common::under_ci() => panic!("{test}: the GL backend cannot start: {e}"),
        Err(e) => {
            eprintln!("SKIPPED {test}: the GL backend cannot start: {e}");
            None
        }
    }
}

#[cfg(feature = "gl")]
#[test]
fn gl_batch_slices_equal_gl_single_conversions_and_the_cpu() {
    let Some(mut g) = gl("gl_batch_slices_equal_gl_single_conversions_and_the_cpu") else {
        return;
    };
    let mut c = ImageProcessor::with_backend(Backend::Cpu).unwrap();
    let on_gl = every_layout_and_dtype(&mut g, &[1, 3, 16]);
    let on_cpu = every_layout_and_dtype(&mut c, &[1, 3, 16]);
    let mut worst = 0.0f64;
    for ((key, gl_slices), (_, cpu_slices)) in on_gl.iter().zip(&on_cpu) {
        let dtype = match key.rsplit(' ').next() {
            Some("u8") => DType::U8,
            Some("i8") => DType::I8,
            Some("f16") => DType::F16,
            _ => DType::F32,
        };
        // Float outputs are ImageNet-normalised: a unit of 1/255 of the input is
        // 1/(255 std) of the output, up to 1/(255 * 0.225).
        let scale = match dtype {
            DType::F16 | DType::F32 => 0.225,
            _ => 1.0,
        };
        for (i, (a, b)) in gl_slices.iter().zip(cpu_slices).enumerate() {
            let d = max_difference(a, b, dtype) * scale;
            worst = worst.max(d);
            assert!(
                d <= 1.0 + 1e-3,
                "{key}: slice {i} on GL differs from the CPU by {d:.3} (of 255)"
            );
        }
    }
    eprintln!("GL batch vs CPU batch: largest difference {worst:.3} of 255");
}

#[cfg(feature = "gl")]
#[test]
fn gl_batch_uploads_each_source_once_and_reads_back_once() {
    let Some(mut g) = gl("gl_batch_uploads_each_source_once_and_reads_back_once") else {
        return;
    };
    let frame = Tensor::<u8>::with_layout(
        ImageLayout::tight(1920, 1080, PixelFormat::Nv12, DType::U8).unwrap(),
        Memory::Heap,
    )
    .unwrap();
    let items: Vec<BatchItem<'_>> = (0..16)
        .map(|i| {
            BatchItem::tensor(&frame).with_crop(Crop::new(100 * i as u32, 50 * i as u32, 200, 180))
        })
        .collect();
    let mut batch =
        Tensor::<f32>::image_batch(16, 224, 224, PixelFormat::PlanarRgb, Memory::Heap).unwrap();
    let before = g.stats();
    g.convert_batch(&items, &mut batch, &ConvertOptions::default())
        .unwrap();
    let after = g.stats();
    assert_eq!(
        after.uploads - before.uploads,
        1,
        "one upload of the one frame"
    );
    assert_eq!(
        after.readbacks - before.readbacks,
        1,
        "one readback of the batch"
    );
    assert_eq!(after.frames - before.frames, 16);
    // Two cameras alternating: one upload per run of items reading the same source.
    let other = Tensor::<u8>::with_layout(
        ImageLayout::tight(1920, 1080, PixelFormat::Nv12, DType::U8).unwrap(),
        Memory::Heap,
    )
    .unwrap();
    let items = [
        BatchItem::tensor(&frame),
        BatchItem::tensor(&frame),
        BatchItem::tensor(&other),
        BatchItem::tensor(&other),
    ];
    let mut batch = Tensor::<u8>::image_batch(4, 320, 320, PixelFormat::Rgb, Memory::Heap).unwrap();
    let before = g.stats();
    g.convert_batch(&items, &mut batch, &ConvertOptions::default())
        .unwrap();
    let after = g.stats();
    assert_eq!(after.uploads - before.uploads, 2);
    assert_eq!(after.readbacks - before.readbacks, 1);
}

#[test]
fn fewer_items_than_slices_leave_the_rest_untouched() {
    let sources = Sources::new();
    let mut p = ImageProcessor::with_backend(Backend::Cpu).unwrap();
    let items = sources.items(3);
    let mut batch = Tensor::<u8>::image_batch(5, 64, 48, PixelFormat::Rgb, Memory::Heap).unwrap();
    sentinel_fill(&mut batch);
    p.convert_batch(&items, &mut batch, &ConvertOptions::default())
        .unwrap();
    for i in 3..5 {
        assert!(
            slice_bytes(&batch, i).iter().all(|&b| b == SENTINEL),
            "slice {i} was written"
        );
    }
    assert!(slice_bytes(&batch, 2).iter().any(|&b| b != SENTINEL));
}

#[test]
fn a_bad_item_is_refused_before_anything_is_written() {
    let sources = Sources::new();
    let mut p = ImageProcessor::with_backend(Backend::Cpu).unwrap();
    let mut batch =
        Tensor::<f32>::image_batch(4, 64, 48, PixelFormat::PlanarRgb, Memory::Heap).unwrap();
    let untouched = |batch: &Tensor<f32>| {
        batch
            .map()
            .unwrap()
            .as_bytes()
            .iter()
            .all(|&b| b == SENTINEL)
    };
    sentinel_fill(&mut batch);
    let opts = ConvertOptions::default();

    // A crop past the border of item 2's source (the padded NV12 frame, 322x182).
    let mut items = sources.items(4);
    items[2] = items[2].with_crop(Crop::new(300, 100, 30, 100));
    let e = p.convert_batch(&items, &mut batch, &opts).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
    assert!(e.to_string().contains("batch item 2"), "{e}");
    assert!(untouched(&batch), "a refused batch wrote its destination");

    // More items than slices; none.
    let items = sources.items(5);
    let e = p.convert_batch(&items, &mut batch, &opts).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
    assert!(e.to_string().contains("5 items for a batch of 4"), "{e}");
    let e = p.convert_batch(&[], &mut batch, &opts).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");

    // Bytes shorter than their layout.
    let short = [0u8; 100];
    let short_bufs = [&short[..]];
    let mut items = sources.items(2);
    items.push(BatchItem::bytes(&short_bufs, &sources.rgb_layout));
    let e = p.convert_batch(&items, &mut batch, &opts).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
    assert!(e.to_string().contains("211839"), "{e}");

    // A source without a layout; a damaged compressed frame (zeros are no JPEG).
    let plain = Tensor::<u8>::new(&[16, 16], Memory::Heap).unwrap();
    let e = p
        .convert_batch(&[BatchItem::tensor(&plain)], &mut batch, &opts)
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
    let jpeg = Tensor::<u8>::with_layout(
        ImageLayout::with_stride(64, 48, PixelFormat::Mjpeg, DType::U8, 1000).unwrap(),
        Memory::Heap,
    )
    .unwrap();
    let mut items = sources.items(1);
    items.push(BatchItem::tensor(&jpeg));
    let e = p.convert_batch(&items, &mut batch, &opts).unwrap_err();
    assert!(matches!(e, pinframe::Error::CorruptFrame(_)), "{e}");
    assert!(e.to_string().contains("batch item 1"), "{e}");

    // Options the destination cannot take (quantising a float output).
    let e = p
        .convert_batch(
            &sources.items(2),
            &mut batch,
            &ConvertOptions {
                quantize: Some(Quantize::per_tensor(0.5, 0)),
                ..opts
            },
        )
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
    assert!(untouched(&batch), "a refused batch wrote its destination");
}

#[test]
fn a_batch_is_not_a_single_image_destination() {
    let sources = Sources::new();
    let mut p = ImageProcessor::with_backend(Backend::Cpu).unwrap();
    let mut batch = Tensor::<u8>::image_batch(2, 64, 48, PixelFormat::Rgb, Memory::Heap).unwrap();
    let e = p.convert(&sources.nv12, &mut batch).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
    assert!(e.to_string().contains("convert_batch"), "{e}");
    // A batch of one is an image.
    let mut one = Tensor::<u8>::image_batch(1, 64, 48, PixelFormat::Rgb, Memory::Heap).unwrap();
    p.convert(&sources.nv12, &mut one).unwrap();
}

#[test]
fn a_source_in_the_batch_memory_is_refused() {
    let mut p = ImageProcessor::with_backend(Backend::Cpu).unwrap();
    let mut batch = Tensor::<u8>::image_batch(2, 64, 48, PixelFormat::Rgb, Memory::Shm).unwrap();
    let layout = ImageLayout::tight(64, 48, PixelFormat::Rgb, DType::U8).unwrap();
    // SAFETY: nothing else writes the memfd while this test holds views of it.
    let alias = unsafe { Tensor::<u8>::import(batch.fd().unwrap(), layout) }.unwrap();
    let e = p
        .convert_batch(
            &[BatchItem::tensor(&alias)],
            &mut batch,
            &ConvertOptions::default(),
        )
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
    assert!(e.to_string().contains("overlap"), "{e}");
}

#[test]
fn batch_tensors_are_dense_nchw_and_nhwc_arrays() {
    let t = Tensor::<f32>::image_batch(4, 640, 640, PixelFormat::PlanarRgb, Memory::Heap).unwrap();
    assert_eq!(t.shape(), &[4, 3, 640, 640]);
    assert_eq!(t.slice_bytes(), 3 * 640 * 640 * 4);
    assert_eq!(t.map().unwrap().as_bytes().len(), 4 * 3 * 640 * 640 * 4);
    let t = Tensor::<u8>::image_batch(3, 33, 17, PixelFormat::Rgb, Memory::Shm).unwrap();
    assert_eq!(t.shape(), &[3, 17, 33, 3]);
    assert_eq!(
        t.slice_layout(2).unwrap().planes()[0].offset,
        2 * 33 * 17 * 3
    );
    assert!(t.slice_layout(3).is_err());
    let e = Tensor::<u8>::image_batch(0, 8, 8, PixelFormat::Rgb, Memory::Heap).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput);
    // The pin covers the whole batch: a runtime binds it as one input.
    let pin = t.pin_host().unwrap();
    assert_eq!(pin.len(), 3 * 17 * 33 * 3);
}

#[test]
fn to_source_maps_each_slice_into_its_own_frame() {
    let sources = Sources::new();
    let mut p = ImageProcessor::with_backend(Backend::Cpu).unwrap();
    let items = [
        BatchItem::tensor(&sources.nv12).with_crop(Crop::new(640, 360, 320, 180)),
        BatchItem::tensor(&sources.yuyv),
    ];
    let mut batch = Tensor::<u8>::image_batch(2, 160, 90, PixelFormat::Rgb, Memory::Heap).unwrap();
    let infos = p
        .convert_batch(&items, &mut batch, &ConvertOptions::default())
        .unwrap();
    assert_eq!(infos[0].to_source(0.0, 0.0), (640.0, 360.0));
    assert_eq!(infos[0].to_source(160.0, 90.0), (960.0, 540.0));
    assert_eq!(infos[1].to_source(160.0, 90.0), (640.0, 480.0));
}

/// A Motion-JPEG frame of `w`x`h` in `format`'s sampling (I422 or I420), encoded by
/// libjpeg-turbo from smooth planes.
fn jpeg_frame(w: u32, h: u32, format: PixelFormat, seed: u32) -> Vec<u8> {
    let layout = ImageLayout::tight(w, h, format, DType::U8).unwrap();
    let planes = smooth(layout.required_len(0), seed);
    pinframe::jpeg::JpegEncoder::new()
        .unwrap()
        .encode(&planes, &layout, 85)
        .unwrap()
        .to_vec()
}

#[test]
fn motion_jpeg_items_decode_into_their_slices() {
    let sources = Sources::new();
    let a = jpeg_frame(640, 480, PixelFormat::I422, 7);
    let b = jpeg_frame(322, 182, PixelFormat::I420, 8);
    let a_layout =
        ImageLayout::with_stride(640, 480, PixelFormat::Mjpeg, DType::U8, a.len()).unwrap();
    let mut a_tensor = Tensor::<u8>::with_layout(a_layout, Memory::Heap).unwrap();
    a_tensor.map_mut().unwrap().as_bytes_mut()[..a.len()].copy_from_slice(&a);
    let b_layout =
        ImageLayout::with_stride(322, 182, PixelFormat::Mjpeg, DType::U8, b.len()).unwrap();
    let b_bufs = [&b[..]];
    let items = [
        BatchItem::tensor(&a_tensor),
        BatchItem::tensor(&sources.nv12).with_crop(Crop::new(1000, 500, 280, 220)),
        BatchItem::tensor(&a_tensor).with_crop(Crop::new(320, 240, 320, 240)),
        BatchItem::bytes(&b_bufs, &b_layout).with_fit(Fit::Fill),
    ];
    let options = ConvertOptions {
        fit: Fit::Letterbox { pad: [0, 0, 0] },
        normalize: Normalize::IMAGENET,
        ..ConvertOptions::default()
    };
    let mut p = ImageProcessor::with_backend(Backend::Cpu).unwrap();
    let mut batch =
        Tensor::<f32>::image_batch(4, 120, 90, PixelFormat::PlanarRgb, Memory::Heap).unwrap();
    sentinel_fill(&mut batch);
    // Twice: the second batch reuses the decoded planes of the first.
    for round in 0..2 {
        let infos = p.convert_batch(&items, &mut batch, &options).unwrap();
        assert_eq!(
            infos[0].decode_scale, 4,
            "640x480 into 120x90 decodes at 1/4"
        );
        for (i, item) in items.iter().enumerate() {
            let (want, info) = single(&mut p, item, &batch, &options);
            assert_eq!(infos[i], info, "round {round}: item {i}'s ConvertInfo");
            assert!(
                slice_bytes(&batch, i) == want,
                "round {round}: slice {i} differs from the single conversion of its item"
            );
        }
    }
}

/// Tiling a frame (SAHI-style) and a second stage over detector boxes, end to end: the
/// plan's tiles and the boxes' crops convert as one batch each, and what a model finds in
/// slice `i` maps back into the frame through `infos[i]`.
#[test]
fn tiles_and_box_crops_convert_as_batches_and_map_back() {
    use pinframe::convert::regions::{
        DetectionBox, RegionAspect, TilePlan, box_to_source, crops_for_boxes,
    };
    let sources = Sources::new();
    let mut p = ImageProcessor::with_backend(Backend::Cpu).unwrap();
    let plan = TilePlan::new(1280, 720, 512, 512, 96, 96).unwrap();
    let items: Vec<BatchItem<'_>> = plan
        .tiles()
        .iter()
        .map(|&t| BatchItem::tensor(&sources.nv12).with_crop(t))
        .collect();
    let mut tiles =
        Tensor::<u8>::image_batch(items.len(), 256, 256, PixelFormat::Rgb, Memory::Heap).unwrap();
    let infos = p
        .convert_batch(&items, &mut tiles, &ConvertOptions::default())
        .unwrap();
    for (info, tile) in infos.iter().zip(plan.tiles()) {
        // A detection covering the whole slice is the whole tile in the frame.
        let b = box_to_source(info, DetectionBox::new(0.0, 0.0, 256.0, 256.0));
        assert_eq!(
            [b.x0, b.y0, b.x1, b.y1],
            [
                f64::from(tile.x),
                f64::from(tile.y),
                f64::from(tile.x + tile.width),
                f64::from(tile.y + tile.height)
            ]
        );
    }
    // Faces at the frame's borders, squared with a margin, into a batch of 8 (3 used).
    let boxes = [
        DetectionBox::new(0.0, 0.0, 60.0, 80.0),
        DetectionBox::new(1200.5, 650.25, 1280.0, 720.0),
        DetectionBox::new(600.0, 300.0, 700.0, 420.0),
    ];
    let crops = crops_for_boxes(&boxes, 1280, 720, 1.25, RegionAspect::Square).unwrap();
    let items: Vec<BatchItem<'_>> = crops
        .iter()
        .map(|&c| BatchItem::tensor(&sources.nv12).with_crop(c))
        .collect();
    let mut faces =
        Tensor::<f32>::image_batch(8, 112, 112, PixelFormat::PlanarRgb, Memory::Heap).unwrap();
    let infos = p
        .convert_batch(&items, &mut faces, &options_for(DType::F32))
        .unwrap();
    for ((info, crop), item) in infos.iter().zip(&crops).zip(&items) {
        assert_eq!(crop.width, crop.height, "{crop:?} is square");
        let (x, y) = info.to_source(0.0, 0.0);
        assert_eq!((x, y), (f64::from(crop.x), f64::from(crop.y)));
        let (want, _) = single(&mut p, item, &faces, &options_for(DType::F32));
        let i = infos.iter().position(|o| std::ptr::eq(o, info)).unwrap();
        assert!(
            slice_bytes(&faces, i) == want,
            "face {i} differs from its single conversion"
        );
    }
}
