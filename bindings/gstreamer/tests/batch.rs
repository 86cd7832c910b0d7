//! `pinframeconvert`'s batch modes, the plugin as built: `rois=true` (the regions of
//! interest of a buffer into one batch tensor) and `batch-size=N` (consecutive buffers
//! into one), every slice compared byte for byte with the library's single conversion of
//! the same frame and crop on the CPU; the slices a batch does not fill are zeros; the
//! per-slice metas, the caps' batch dimension, the stats, `batch-timeout`, and the
//! property combinations the element refuses.

mod common;

use std::ops::ControlFlow;
use std::time::{Duration, Instant};

use common::*;
use gst::prelude::*;
use pinframe::{
    Backend, ConvertInfo, ConvertOptions, Crop, DType, Fit, ImageLayout, ImageProcessor, Normalize,
    PixelFormat,
};

const META: &str = "PinframeConvertMeta";

/// A deterministic frame of `info` (GStreamer's default strides), different per `seed`.
fn frame(info: &gst_video::VideoInfo, seed: u32, pts_ms: u64) -> gst::Buffer {
    let mut buffer = gst::Buffer::with_size(info.size()).unwrap();
    {
        let b = buffer.get_mut().unwrap();
        {
            let mut map = b.map_writable().unwrap();
            for (i, v) in map.as_mut_slice().iter_mut().enumerate() {
                let x = i as u32;
                *v = ((x.wrapping_mul(2654435761) >> 11) ^ (x / 5) ^ seed.wrapping_mul(77)) as u8;
            }
        }
        b.set_pts(gst::ClockTime::from_mseconds(pts_ms));
        b.set_duration(gst::ClockTime::from_mseconds(33));
    }
    buffer
}

/// Attaches a `GstVideoRegionOfInterestMeta` of `kind`, `id` and `rect`.
fn add_roi(buffer: &mut gst::Buffer, kind: &str, id: i32, rect: (u32, u32, u32, u32)) {
    let b = buffer.get_mut().unwrap();
    let mut roi = gst_video::VideoRegionOfInterestMeta::add(b, kind, rect);
    roi.set_id(id);
}

/// Every `PinframeConvertMeta` of `buf`, in buffer order.
fn slice_metas(buf: &gst::BufferRef) -> Vec<gst::Structure> {
    let mut metas = Vec::new();
    buf.foreach_meta(|m| {
        if let Some(c) = m.try_as_custom_meta() {
            let s = c.structure();
            if s.name() == META {
                metas.push(s.to_owned());
            }
        }
        ControlFlow::Continue(())
    });
    metas
}

/// Asserts a slice's meta holds the library's `ConvertInfo`.
fn assert_slice_geometry(s: &gst::StructureRef, info: &ConvertInfo, what: &str) {
    assert_eq!(
        [s.get::<f64>("scale-x").unwrap(), s.get("scale-y").unwrap()],
        info.scale,
        "{what}: scale"
    );
    assert_eq!(
        [
            s.get::<i64>("offset-x").unwrap(),
            s.get("offset-y").unwrap()
        ],
        info.offset,
        "{what}: offset"
    );
    assert_eq!(
        [
            s.get::<u32>("content-x").unwrap(),
            s.get("content-y").unwrap(),
            s.get("content-width").unwrap(),
            s.get("content-height").unwrap()
        ],
        info.content,
        "{what}: content"
    );
    let m: Vec<f64> = s
        .get::<gst::Array>("dst-to-src")
        .unwrap()
        .iter()
        .map(|v| v.get::<f64>().unwrap())
        .collect();
    let d = info.dst_to_src;
    assert_eq!(
        m,
        vec![d[0][0], d[0][1], d[0][2], d[1][0], d[1][1], d[1][2]],
        "{what}: dst-to-src"
    );
}

/// The output's slices: `count` tight slices of `slice` in the buffer.
fn slices_of(data: &[u8], slice: &ImageLayout, count: usize) -> Vec<Vec<u8>> {
    let len = slice.required_len(0);
    assert_eq!(data.len(), len * count, "a tight batch of {count}");
    data.chunks(len).map(|c| c.to_vec()).collect()
}

fn letterbox_imagenet() -> ConvertOptions {
    ConvertOptions {
        fit: Fit::Letterbox { pad: [114; 3] },
        normalize: Normalize::IMAGENET,
        ..Default::default()
    }
}

const LETTERBOX_PROPS: &str =
    "fit=letterbox pad=114,114,114 mean=0.485,0.456,0.406 std=0.229,0.224,0.225";

/// `rois=true roi-type=face batch-size=4`: each buffer's face ROIs (clamped into the
/// frame, the first four in meta order) go into one batch whose every slice equals the
/// library's conversion of that crop; other types are ignored, a ROI outside the frame is
/// skipped, a fifth and sixth are dropped, a buffer without one is dropped; all counted.
#[test]
fn rois_of_each_buffer_become_one_batch_equal_to_the_library_on_the_cpu() {
    init();
    rois_batch(ImageProcessor::with_backend(Backend::Cpu).unwrap());
}

/// The same on GL (llvmpipe here): each slice equals GL's own single conversion.
#[test]
fn rois_of_each_buffer_become_one_batch_equal_to_the_library_on_gl() {
    init();
    let Some(gl) = gl_or_skip("rois_of_each_buffer_become_one_batch_equal_to_the_library_on_gl")
    else {
        return;
    };
    rois_batch(gl);
}

fn rois_batch(mut reference: ImageProcessor) {
    let backend = reference.backend().name();
    let (w, h) = (160u32, 120u32);
    let info = gst_video::VideoInfo::builder(gst_video::VideoFormat::Nv12, w, h)
        .fps(gst::Fraction::new(30, 1))
        .build()
        .unwrap();
    let caps = info.to_caps().unwrap();
    let pipeline = launch_bin(&format!(
        "appsrc name=src format=time ! pinframeconvert name=conv backend={backend} rois=true \
         roi-type=face batch-size=4 pool-size=2 {LETTERBOX_PROPS} ! \
         other/tensors,format=static,num_tensors=1,types=float32,dimensions=32:24:3:4 ! \
         appsink name=sink sync=false"
    ));
    let src = app_src(&pipeline);
    src.set_caps(Some(&caps));
    let sink = app_sink(&pipeline);
    let conv = pipeline.by_name("conv").unwrap();
    let bus = pipeline.bus().unwrap();
    pipeline.set_state(gst::State::Playing).unwrap();
    let slice = ImageLayout::tight(32, 24, PixelFormat::PlanarRgb, DType::F32).unwrap();

    // (buffer, the crops expected in its slices with their ROI ids)
    let six: Vec<(i32, (u32, u32, u32, u32))> = (0..6)
        .map(|i| (10 + i, (i as u32 * 20, i as u32 * 15, 30 + i as u32, 20)))
        .collect();
    let mut cases: Vec<(gst::Buffer, Vec<(i32, Crop)>)> = Vec::new();
    // Six faces, twice: the first four of each are converted, the rest dropped.
    for seed in [1, 2] {
        let mut b = frame(&info, seed, seed as u64 * 33);
        for &(id, rect) in &six {
            add_roi(&mut b, "face", id, rect);
        }
        let want = six[..4]
            .iter()
            .map(|&(id, (x, y, rw, rh))| (id, Crop::new(x, y, rw, rh)))
            .collect();
        cases.push((b, want));
    }
    // One face inside, one across the bottom-right border (clamped), one outside the
    // frame (skipped) and a person (another type, ignored): two slices of four, so the
    // reused pool buffer's last two slices must be zeroed.
    let mut b = frame(&info, 3, 99);
    add_roi(&mut b, "face", 1, (7, 9, 41, 33));
    add_roi(&mut b, "person", 2, (0, 0, 80, 100));
    add_roi(&mut b, "face", 3, (140, 100, 40, 40));
    add_roi(&mut b, "face", 4, (200, 10, 10, 10));
    cases.push((
        b,
        vec![
            (1, Crop::new(7, 9, 41, 33)),
            (3, Crop::new(140, 100, 20, 20)),
        ],
    ));

    for (n, (buffer, want)) in cases.iter().enumerate() {
        src.push_buffer(buffer.clone()).unwrap();
        let sample = sink
            .try_pull_sample(gst::ClockTime::from_seconds(30))
            .unwrap_or_else(|| {
                let mut log = BusLog::default();
                log.drain(&bus);
                panic!("buffer {n}: no batch ({log:?})")
            });
        let s = sample.caps().unwrap().structure(0).unwrap();
        assert_eq!(s.get::<&str>("dimensions").unwrap(), "32:24:3:4");
        let out = sample.buffer().unwrap();
        assert_eq!(out.pts(), buffer.pts(), "the frame's timestamp");
        let data = out.map_readable().unwrap();
        let got = slices_of(data.as_slice(), &slice, 4);
        let metas = slice_metas(out);
        assert_eq!(metas.len(), want.len(), "buffer {n}: one meta per slice");
        for (i, &(id, crop)) in want.iter().enumerate() {
            let what = format!("buffer {n} slice {i} (ROI {id} {crop:?})");
            let options = ConvertOptions {
                crop: Some(crop),
                ..letterbox_imagenet()
            };
            let (bytes, info) = library_convert(&mut reference, buffer, &caps, &slice, &options);
            assert_same_image(&got[i], &bytes, &slice, &what);
            let m = &metas[i];
            assert_eq!(m.get::<u32>("batch-index").unwrap(), i as u32, "{what}");
            assert_eq!(m.get::<u32>("batch-size").unwrap(), 4, "{what}");
            assert_eq!(
                m.get::<u32>("batch-valid").unwrap(),
                want.len() as u32,
                "{what}"
            );
            assert_eq!(m.get::<i32>("roi-id").unwrap(), id, "{what}");
            assert_eq!(m.get::<&str>("roi-type").unwrap(), "face", "{what}");
            assert_eq!(
                [
                    m.get::<u32>("roi-x").unwrap(),
                    m.get("roi-y").unwrap(),
                    m.get("roi-width").unwrap(),
                    m.get("roi-height").unwrap()
                ],
                [crop.x, crop.y, crop.width, crop.height],
                "{what}"
            );
            assert_eq!(m.get::<u32>("source-width").unwrap(), w);
            assert_slice_geometry(m, &info, &what);
            // A point of the slice maps back into the frame inside the ROI.
            let (sx, sy) =
                info.to_source(info.content[0] as f64 + 0.5, info.content[1] as f64 + 0.5);
            assert!(
                sx >= crop.x as f64 && sy >= crop.y as f64,
                "{what}: ({sx}, {sy})"
            );
        }
        for (i, unused) in got.iter().enumerate().skip(want.len()) {
            assert!(
                unused.iter().all(|&b| b == 0),
                "buffer {n}: unused slice {i} is not zeroed"
            );
        }
    }
    // A buffer without ROIs, and one whose only face lies outside the frame: dropped.
    src.push_buffer(frame(&info, 4, 132)).unwrap();
    let mut outside = frame(&info, 5, 165);
    add_roi(&mut outside, "face", 9, (0, 130, 20, 20));
    src.push_buffer(outside).unwrap();
    src.end_of_stream().unwrap();
    assert!(
        sink.try_pull_sample(gst::ClockTime::from_seconds(30))
            .is_none(),
        "a buffer without a ROI gives no batch"
    );
    let mut log = BusLog::default();
    log.until_end(&bus, 10);
    assert!(log.errors.is_empty(), "{:?}", log.errors);
    let stats = conv.property::<gst::Structure>("stats");
    pipeline.set_state(gst::State::Null).unwrap();
    assert_eq!(stats.get::<&str>("backend").unwrap(), backend, "{stats}");
    let count = |f: &str| stats.get::<u64>(f).unwrap();
    assert_eq!(count("rois"), 4 + 4 + 2, "{stats}");
    assert_eq!(count("dropped-rois"), 2 + 2, "{stats}");
    assert_eq!(count("skipped-rois"), 1 + 1, "{stats}");
    assert_eq!(count("frames-without-rois"), 2, "{stats}");
    assert_eq!(count("batches"), 3, "{stats}");
    assert_eq!(count("partial-batches"), 1, "{stats}");
    assert_eq!(count("frames"), 10, "{stats}");
}

/// The frames of a YUY2 stream converted one by one by the library (the reference).
fn library_frames(
    reference: &mut ImageProcessor,
    frames: &[gst::Buffer],
    caps: &gst::Caps,
    slice: &ImageLayout,
    options: &ConvertOptions,
) -> Vec<(Vec<u8>, ConvertInfo)> {
    frames
        .iter()
        .map(|f| library_convert(reference, f, caps, slice, options))
        .collect()
}

/// `batch-size=4`, ten buffers, then EOS: three batches of the consecutive frames, the
/// last holding two (pushed on EOS, its meta saying so, its other slices zeros); every
/// slice equals the library's conversion of its frame; the caps (fixed by the element)
/// carry the batch as the outermost dimension.
#[test]
fn batch_size_four_of_ten_buffers_is_three_batches_the_last_partial_on_eos_on_the_cpu() {
    init();
    frames_batch(ImageProcessor::with_backend(Backend::Cpu).unwrap());
}

/// The same on GL (llvmpipe here): each slice equals GL's own single conversion.
#[test]
fn batch_size_four_of_ten_buffers_is_three_batches_the_last_partial_on_eos_on_gl() {
    init();
    let Some(gl) =
        gl_or_skip("batch_size_four_of_ten_buffers_is_three_batches_the_last_partial_on_eos_on_gl")
    else {
        return;
    };
    frames_batch(gl);
}

fn frames_batch(mut reference: ImageProcessor) {
    let backend = reference.backend().name();
    let (w, h) = (96u32, 64u32);
    let info = gst_video::VideoInfo::builder(gst_video::VideoFormat::Yuy2, w, h)
        .fps(gst::Fraction::new(30, 1))
        .build()
        .unwrap();
    let caps = info.to_caps().unwrap();
    let pipeline = launch_bin(&format!(
        "appsrc name=src format=time ! pinframeconvert name=conv backend={backend} batch-size=4 \
         pool-size=4 ! other/tensors,format=static,num_tensors=1,types=uint8 ! \
         appsink name=sink sync=false"
    ));
    let src = app_src(&pipeline);
    src.set_caps(Some(&caps));
    let sink = app_sink(&pipeline);
    let conv = pipeline.by_name("conv").unwrap();
    let bus = pipeline.bus().unwrap();
    pipeline.set_state(gst::State::Playing).unwrap();
    let frames: Vec<gst::Buffer> = (0..10).map(|i| frame(&info, i, i as u64 * 33)).collect();
    for f in &frames {
        src.push_buffer(f.clone()).unwrap();
    }
    src.end_of_stream().unwrap();
    let mut samples = Vec::new();
    while let Some(s) = sink.try_pull_sample(gst::ClockTime::from_seconds(30)) {
        samples.push(s);
    }
    let mut log = BusLog::default();
    log.until_end(&bus, 10);
    assert!(log.errors.is_empty(), "{:?}", log.errors);
    let stats = conv.property::<gst::Structure>("stats");
    pipeline.set_state(gst::State::Null).unwrap();
    assert_eq!(samples.len(), 3, "10 frames in batches of 4");

    let s = samples[0].caps().unwrap().structure(0).unwrap();
    assert_eq!(
        s.get::<&str>("dimensions").unwrap(),
        "3:96:64:4",
        "C:W:H:N, the batch outermost"
    );
    let rate = s.get::<gst::Fraction>("framerate").unwrap();
    assert_eq!(
        rate.numer() as f64 / rate.denom() as f64,
        7.5,
        "a batch of 4 frames at 30/s"
    );
    let slice = ImageLayout::tight(w, h, PixelFormat::Rgb, DType::U8).unwrap();
    let want = library_frames(
        &mut reference,
        &frames,
        &caps,
        &slice,
        &ConvertOptions::default(),
    );
    for (b, sample) in samples.iter().enumerate() {
        let out = sample.buffer().unwrap();
        let valid = if b == 2 { 2 } else { 4 };
        assert_eq!(
            out.pts(),
            frames[b * 4].pts(),
            "batch {b}: its first frame's pts"
        );
        assert_eq!(
            out.duration(),
            Some(gst::ClockTime::from_mseconds(33 * (valid as u64 - 1) + 33)),
            "batch {b}: to its last frame's end"
        );
        let data = out.map_readable().unwrap();
        let got = slices_of(data.as_slice(), &slice, 4);
        let metas = slice_metas(out);
        assert_eq!(metas.len(), valid, "batch {b}: one meta per frame");
        for i in 0..valid {
            let n = b * 4 + i;
            let what = format!("batch {b} slice {i} (frame {n})");
            assert_same_image(&got[i], &want[n].0, &slice, &what);
            let m = &metas[i];
            assert_eq!(m.get::<u32>("batch-index").unwrap(), i as u32, "{what}");
            assert_eq!(m.get::<u32>("batch-size").unwrap(), 4, "{what}");
            assert_eq!(m.get::<u32>("batch-valid").unwrap(), valid as u32, "{what}");
            assert_eq!(
                m.get::<u64>("source-pts").unwrap(),
                frames[n].pts().unwrap().nseconds(),
                "{what}"
            );
            assert!(!m.has_field("roi-id"), "{what}");
            assert_slice_geometry(m, &want[n].1, &what);
        }
        for (i, unused) in got.iter().enumerate().skip(valid) {
            assert!(
                unused.iter().all(|&v| v == 0),
                "batch {b}: unused slice {i} is not zeroed"
            );
        }
    }
    assert_eq!(stats.get::<&str>("backend").unwrap(), backend, "{stats}");
    let count = |f: &str| stats.get::<u64>(f).unwrap();
    assert_eq!(count("frames"), 10, "{stats}");
    assert_eq!(count("batches"), 3, "{stats}");
    assert_eq!(count("partial-batches"), 1, "{stats}");
    assert_eq!(count("batch-timeouts"), 0, "{stats}");
    assert_eq!(count("pool-outputs"), 10, "{stats}");
}

/// `batch-size=4 batch-timeout=200000` (200 ms): one buffer and no EOS still gives a
/// batch (one valid slice equal to the library's, the rest zeros) once the timeout has
/// passed; the stream then goes on with full batches. Without a timeout (-1) a partial
/// batch waits, and stopping the pipeline with it pending neither hangs nor loses the
/// pool buffer it holds.
#[test]
fn batch_timeout_pushes_a_partial_batch_without_eos() {
    init();
    let (w, h) = (64u32, 48u32);
    let info = gst_video::VideoInfo::builder(gst_video::VideoFormat::I420, w, h)
        .fps(gst::Fraction::new(30, 1))
        .build()
        .unwrap();
    let caps = info.to_caps().unwrap();
    let launch = |timeout: i64| {
        launch_bin(&format!(
            "appsrc name=src format=time ! pinframeconvert name=conv backend=cpu \
             batch-size=4 batch-timeout={timeout} pool-size=2 ! \
             other/tensors,format=static,num_tensors=1,types=float32,dimensions=16:16:3:4 ! \
             appsink name=sink sync=false"
        ))
    };
    let slice = ImageLayout::tight(16, 16, PixelFormat::PlanarRgb, DType::F32).unwrap();
    let mut reference = ImageProcessor::with_backend(Backend::Cpu).unwrap();

    let pipeline = launch(200_000);
    let src = app_src(&pipeline);
    src.set_caps(Some(&caps));
    let sink = app_sink(&pipeline);
    let conv = pipeline.by_name("conv").unwrap();
    pipeline.set_state(gst::State::Playing).unwrap();
    let first = frame(&info, 7, 0);
    let pushed = Instant::now();
    src.push_buffer(first.clone()).unwrap();
    // Generous: a hang fails, no lower bound is asserted.
    let sample = sink
        .try_pull_sample(gst::ClockTime::from_seconds(20))
        .expect("a partial batch after the timeout, without EOS");
    eprintln!(
        "the partial batch came {} ms after its buffer (batch-timeout 200 ms)",
        pushed.elapsed().as_millis()
    );
    let out = sample.buffer().unwrap();
    let data = out.map_readable().unwrap();
    let got = slices_of(data.as_slice(), &slice, 4);
    let (want, want_info) = library_convert(
        &mut reference,
        &first,
        &caps,
        &slice,
        &ConvertOptions::default(),
    );
    assert_same_image(&got[0], &want, &slice, "the timed-out batch's slice 0");
    assert!(got[1..].iter().all(|s| s.iter().all(|&v| v == 0)));
    let metas = slice_metas(out);
    assert_eq!(metas.len(), 1);
    assert_eq!(metas[0].get::<u32>("batch-valid").unwrap(), 1);
    assert_slice_geometry(&metas[0], &want_info, "the timed-out slice");
    drop(data);
    drop(sample);
    let stats = conv.property::<gst::Structure>("stats");
    assert_eq!(stats.get::<u64>("batch-timeouts").unwrap(), 1, "{stats}");
    // Four more frames fill a batch at once (well within the timeout), in order.
    let more: Vec<gst::Buffer> = (1..5).map(|i| frame(&info, 7 + i, i as u64 * 33)).collect();
    for f in &more {
        src.push_buffer(f.clone()).unwrap();
    }
    let sample = sink
        .try_pull_sample(gst::ClockTime::from_seconds(20))
        .expect("a full batch");
    let out = sample.buffer().unwrap();
    let metas = slice_metas(out);
    // The timer may have pushed a partial batch first on a machine slow enough to take
    // 200 ms over four pushes; then the rest follow in the next batch.
    let valid = metas[0].get::<u32>("batch-valid").unwrap() as usize;
    let data = out.map_readable().unwrap();
    let got = slices_of(data.as_slice(), &slice, 4);
    for i in 0..valid {
        let (want, _) = library_convert(
            &mut reference,
            &more[i],
            &caps,
            &slice,
            &ConvertOptions::default(),
        );
        assert_same_image(
            &got[i],
            &want,
            &slice,
            &format!("the second batch's slice {i}"),
        );
        assert_eq!(
            metas[i].get::<u64>("source-pts").unwrap(),
            more[i].pts().unwrap().nseconds()
        );
    }
    drop(data);
    drop(sample);
    pipeline.set_state(gst::State::Null).unwrap();

    // No timeout: a partial batch waits for its fourth frame...
    let pipeline = launch(-1);
    let src = app_src(&pipeline);
    src.set_caps(Some(&caps));
    let sink = app_sink(&pipeline);
    let conv = pipeline.by_name("conv").unwrap();
    pipeline.set_state(gst::State::Playing).unwrap();
    src.push_buffer(frame(&info, 1, 0)).unwrap();
    assert!(
        sink.try_pull_sample(gst::ClockTime::from_mseconds(600))
            .is_none(),
        "batch-timeout=-1 waits for a full batch"
    );
    // ...and stopping with it pending returns promptly (no deadlock with the timer).
    let stopping = Instant::now();
    pipeline.set_state(gst::State::Null).unwrap();
    assert!(
        stopping.elapsed() < Duration::from_secs(20),
        "stopping with a pending batch hangs"
    );
    // Started again, the same element converts from a clean state: the pending batch of
    // the last run went back to the pool with it and is not pushed now.
    pipeline.set_state(gst::State::Playing).unwrap();
    for i in 0..4 {
        src.push_buffer(frame(&info, 20 + i, i as u64 * 33))
            .unwrap();
    }
    let sample = sink
        .try_pull_sample(gst::ClockTime::from_seconds(20))
        .expect("a batch after a restart");
    let metas = slice_metas(sample.buffer().unwrap());
    assert_eq!(metas.len(), 4);
    assert_eq!(metas[0].get::<u64>("source-pts").unwrap(), 0);
    drop(sample);
    let stats = conv.property::<gst::Structure>("stats");
    assert_eq!(stats.get::<u64>("batches").unwrap(), 1, "{stats}");
    pipeline.set_state(gst::State::Null).unwrap();
}

/// Property combinations that cannot work, and caps whose batch does not match, fail with
/// a message saying why.
#[test]
fn batch_property_combinations_are_refused_with_a_message() {
    init();
    let nv12 = "video/x-raw,format=NV12,width=64,height=48,framerate=30/1";
    let tensors = |dims: &str| {
        format!("other/tensors,format=static,num_tensors=1,types=float32,dimensions={dims}")
    };
    let cases: Vec<(String, &str)> = vec![
        (
            format!("roi-type=face ! {}", tensors("3:8:8:1")),
            "needs rois=true",
        ),
        (
            format!("rois=true crop=0,0,8,8 ! {}", tensors("3:8:8:1")),
            "crop and rois=true do not go together",
        ),
        (
            format!("batch-size=2 dma-route=udmabuf ! {}", tensors("3:8:8:2")),
            "dma-route=udmabuf with a batch",
        ),
        (
            "batch-size=4 ! video/x-raw,format=RGB,width=8,height=8".to_string(),
            "needs other/tensors output",
        ),
        (
            format!("batch-size=2 ! {}", tensors("3:8:8:4")),
            "hold a batch of 4 but batch-size is 2",
        ),
        (format!("! {}", tensors("3:8:8:4")), "set batch-size=4"),
        (
            format!("rois=true batch-size=3 ! {}", tensors("8:8:3:2")),
            "hold a batch of 2 but batch-size is 3",
        ),
    ];
    for (tail, needle) in cases {
        let desc = format!(
            "appsrc name=src caps={nv12} ! pinframeconvert name=conv backend=cpu {tail} ! appsink name=sink"
        );
        let pipeline = launch_bin(&desc);
        let src = app_src(&pipeline);
        let bus = pipeline.bus().unwrap();
        let _ = pipeline.set_state(gst::State::Playing);
        let _ = src.push_buffer(gst::Buffer::with_size(64 * 48 * 3 / 2).unwrap());
        let _ = src.end_of_stream();
        let mut log = BusLog::default();
        log.until_end(&bus, 10);
        pipeline.set_state(gst::State::Null).unwrap();
        let all = format!("{log:?}");
        assert!(!log.errors.is_empty(), "{desc}: should fail: {all}");
        assert!(all.contains(needle), "{desc}: should say {needle:?}: {all}");
        assert!(!all.contains("panicked"), "{desc}: {all}");
    }
}

/// A flush (a seek) drops the pending batch: the frames after it start a new batch at
/// slice 0, and nothing of the flushed frames is pushed.
#[test]
fn a_flush_drops_the_pending_batch() {
    init();
    let (w, h) = (64u32, 48u32);
    let info = gst_video::VideoInfo::builder(gst_video::VideoFormat::Nv12, w, h)
        .fps(gst::Fraction::new(30, 1))
        .build()
        .unwrap();
    let caps = info.to_caps().unwrap();
    let pipeline = launch_bin(
        "appsrc name=src format=time ! pinframeconvert name=conv backend=cpu batch-size=3 \
         ! other/tensors,format=static,num_tensors=1,types=uint8,dimensions=3:16:16:3 ! \
         appsink name=sink sync=false",
    );
    let src = app_src(&pipeline);
    src.set_caps(Some(&caps));
    let sink = app_sink(&pipeline);
    let conv = pipeline.by_name("conv").unwrap();
    pipeline.set_state(gst::State::Playing).unwrap();
    for i in 0..2 {
        src.push_buffer(frame(&info, i, i as u64 * 33)).unwrap();
    }
    // Let the streaming thread convert both into the pending batch.
    let deadline = Instant::now() + Duration::from_secs(20);
    while conv
        .property::<gst::Structure>("stats")
        .get::<u64>("frames")
        .unwrap_or(0)
        < 2
    {
        assert!(
            Instant::now() < deadline,
            "the two frames were not converted"
        );
        settle();
    }
    let sinkpad = conv.static_pad("sink").unwrap();
    assert!(sinkpad.send_event(gst::event::FlushStart::new()));
    assert!(sinkpad.send_event(gst::event::FlushStop::new(true)));
    assert!(
        sinkpad.send_event(gst::event::Segment::new(&gst::FormattedSegment::<
            gst::ClockTime,
        >::new()))
    );
    let after: Vec<gst::Buffer> = (0..3)
        .map(|i| frame(&info, 10 + i, 1000 + i as u64 * 33))
        .collect();
    for f in &after {
        sinkpad.chain(f.clone()).unwrap();
    }
    let sample = sink
        .try_pull_sample(gst::ClockTime::from_seconds(20))
        .expect("a batch of the frames after the flush");
    let metas = slice_metas(sample.buffer().unwrap());
    let pts: Vec<u64> = metas
        .iter()
        .map(|m| m.get::<u64>("source-pts").unwrap())
        .collect();
    let want: Vec<u64> = after.iter().map(|f| f.pts().unwrap().nseconds()).collect();
    assert_eq!(pts, want, "the batch holds only the frames after the flush");
    drop(sample);
    let stats = conv.property::<gst::Structure>("stats");
    assert_eq!(stats.get::<u64>("batches").unwrap(), 1, "{stats}");
    assert!(
        sink.try_pull_sample(gst::ClockTime::from_mseconds(300))
            .is_none(),
        "nothing else"
    );
    pipeline.set_state(gst::State::Null).unwrap();
}
