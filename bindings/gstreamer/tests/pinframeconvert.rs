//! `pinframeconvert` in real pipelines on the host: the plugin as built
//! (`libgstpinframe.so` loaded through `GST_PLUGIN_PATH`), its outputs compared byte for
//! byte with the library's own conversion of the same frames, on the CPU and on GL
//! (Mesa llvmpipe), for every format pair the element advertises; its meta, its pool,
//! its refusals and its runtime errors.

mod common;

use std::os::fd::{AsRawFd, BorrowedFd};

use common::*;
use gst::prelude::*;
use gst_allocators::prelude::*;
use pinframe::{
    Backend, ConvertOptions, DType, Fit, Gamma, ImageLayout, ImageProcessor, Isp, Normalize,
    PixelFormat, Quantize,
};

fn imagenet_letterbox() -> ConvertOptions {
    ConvertOptions {
        fit: Fit::Letterbox { pad: [114; 3] },
        normalize: Normalize::IMAGENET,
        ..Default::default()
    }
}

/// Runs `desc` and checks every output against `reference` converting the same input.
fn check_pipeline(
    desc: &str,
    reference: &mut ImageProcessor,
    options: &ConvertOptions,
    layout: Option<PixelFormat>,
) -> usize {
    let (_conv, pairs, log) = run_pipeline(desc);
    assert!(log.errors.is_empty(), "{desc}: {:?}", log.errors);
    assert!(!pairs.is_empty(), "{desc}: no output");
    for (i, (input, sample)) in pairs.iter().enumerate() {
        let in_caps = sample_input_caps(desc);
        let out_caps = sample.caps().expect("output caps");
        let dst = output_layout(out_caps, layout);
        let (want, info) = library_convert(reference, input, &in_caps, &dst, options);
        let out = sample.buffer().unwrap().map_readable().unwrap();
        assert_same_image(out.as_slice(), &want, &dst, &format!("{desc}: frame {i}"));
        assert_meta(sample.buffer().unwrap(), &info, desc);
    }
    pairs.len()
}

/// The input caps of a `videotestsrc ! CAPS ! ...` description.
fn sample_input_caps(desc: &str) -> gst::Caps {
    let caps = desc.split(" ! ").nth(1).unwrap();
    caps.parse::<gst::Caps>().unwrap()
}

fn videotestsrc_720p(backend: Backend, reference: &mut ImageProcessor) {
    let b = backend.name();
    let src = "videotestsrc num-buffers=3 pattern=ball ! video/x-raw,format=YUY2,width=1280,height=720,framerate=30/1,colorimetry=bt709";
    let sink = "appsink name=sink sync=false";
    // Letterboxed ImageNet-normalised planar f32 tensor, the usual detector input.
    let n = check_pipeline(
        &format!(
            "{src} ! pinframeconvert name=conv backend={b} fit=letterbox mean=0.485,0.456,0.406 \
             std=0.229,0.224,0.225 ! other/tensors,format=static,num_tensors=1,types=float32,\
             dimensions=640:640:3:1 ! {sink}"
        ),
        reference,
        &imagenet_letterbox(),
        None,
    );
    assert_eq!(n, 3);
    // u8 RGB video, stretched, odd size.
    check_pipeline(
        &format!(
            "{src} ! pinframeconvert name=conv backend={b} ! video/x-raw,format=RGB,width=321,height=241 ! {sink}"
        ),
        reference,
        &ConvertOptions::default(),
        None,
    );
    // A TFLite-quantised uint8 planar tensor of the ImageNet-normalised letterbox.
    check_pipeline(
        &format!(
            "{src} ! pinframeconvert name=conv backend={b} fit=letterbox mean=0.485,0.456,0.406 \
             std=0.229,0.224,0.225 quantize=0.0186,114 ! other/tensors,format=static,num_tensors=1,\
             types=uint8,dimensions=320:320:3:1 ! {sink}"
        ),
        reference,
        &ConvertOptions {
            quantize: Some(Quantize::per_tensor(0.0186, 114)),
            ..imagenet_letterbox()
        },
        None,
    );
    // BGR i8 tensor, filled.
    check_pipeline(
        &format!(
            "{src} ! pinframeconvert name=conv backend={b} fit=fill layout=bgr ! \
             other/tensors,format=static,num_tensors=1,types=int8,dimensions=3:416:416:1 ! {sink}"
        ),
        reference,
        &ConvertOptions {
            fit: Fit::Fill,
            ..Default::default()
        },
        Some(PixelFormat::Bgr),
    );
}

#[test]
fn videotestsrc_yuy2_720p_equals_the_library_on_the_cpu() {
    init();
    let mut cpu = ImageProcessor::with_backend(Backend::Cpu).unwrap();
    videotestsrc_720p(Backend::Cpu, &mut cpu);
}

#[test]
fn videotestsrc_yuy2_720p_equals_the_library_on_gl() {
    init();
    let Some(mut gl) = gl_or_skip("videotestsrc_yuy2_720p_equals_the_library_on_gl") else {
        return;
    };
    videotestsrc_720p(Backend::Gl, &mut gl);
}

/// What the element can be asked to write: u8 video in each destination format, and a
/// tensor of each element type in each layout.
#[derive(Clone, Copy, Debug)]
enum Output {
    Video(PixelFormat),
    Tensor(PixelFormat, DType),
}

fn outputs() -> Vec<Output> {
    let mut v: Vec<Output> = Backend::Auto
        .destination_formats()
        .iter()
        .map(|&f| Output::Video(f))
        .collect();
    for &f in Backend::Auto.destination_formats() {
        for d in [DType::U8, DType::I8, DType::F16, DType::F32] {
            v.push(Output::Tensor(f, d));
        }
    }
    v
}

fn tensor_type(d: DType) -> &'static str {
    match d {
        DType::U8 => "uint8",
        DType::I8 => "int8",
        DType::F16 => "float16",
        _ => "float32",
    }
}

/// A deterministic frame of `format` at `w` x `h`; with `padded`, every row is 8 bytes
/// longer than GStreamer's default and the planes sit 64 bytes apart, described by a
/// `GstVideoMeta`.
fn frame(info: &gst_video::VideoInfo, padded: bool, seed: u32) -> gst::Buffer {
    let n = info.n_planes() as usize;
    let (offsets, strides, size) = if padded {
        let mut offsets = Vec::new();
        let mut strides = Vec::new();
        let mut at = 32usize;
        for i in 0..n {
            let stride = info.stride()[i] as usize + 8;
            let rows = pinframe::ImageLayout::new(
                info.width(),
                info.height(),
                pixel_format(info.format()),
            )
            .unwrap()
            .plane_height(i) as usize;
            offsets.push(at);
            strides.push(stride as i32);
            at += stride * rows + 64;
        }
        (offsets, strides, at)
    } else {
        (
            info.offset()[..n].to_vec(),
            info.stride()[..n].to_vec(),
            info.size(),
        )
    };
    let mut buffer = gst::Buffer::with_size(size).unwrap();
    {
        let b = buffer.get_mut().unwrap();
        {
            let mut map = b.map_writable().unwrap();
            for (i, v) in map.as_mut_slice().iter_mut().enumerate() {
                let x = i as u32;
                *v = ((x.wrapping_mul(2654435761) >> 13) ^ (x / 7) ^ seed) as u8;
            }
        }
        if padded {
            gst_video::VideoMeta::add_full(
                b,
                gst_video::VideoFrameFlags::empty(),
                info.format(),
                info.width(),
                info.height(),
                &offsets,
                &strides,
            )
            .unwrap();
        }
    }
    buffer
}

/// The source formats of `backend` that travel as video/x-raw (Bayer has its own caps,
/// tested on its own; some RAW formats have no GStreamer name). Every one must convert:
/// the element advertises them.
fn video_sources(backend: Backend) -> Vec<PixelFormat> {
    backend
        .source_formats()
        .iter()
        .copied()
        .filter(|&f| try_video_format(f).is_some())
        .collect()
}

/// Every source format the backend takes × every output the element advertises, through
/// one pipeline renegotiated for each pair (one converter, so one GL context).
fn every_pair(backend: Backend, reference: &mut ImageProcessor) -> usize {
    init();
    let b = backend.name();
    let pipeline = launch_bin(&format!(
        "appsrc name=src format=time ! pinframeconvert name=conv backend={b} ! capsfilter name=f ! appsink name=sink sync=false"
    ));
    let src = app_src(&pipeline);
    let conv = pipeline.by_name("conv").unwrap();
    let filter = pipeline.by_name("f").unwrap();
    let sink = app_sink(&pipeline);
    let bus = pipeline.bus().unwrap();
    pipeline.set_state(gst::State::Playing).unwrap();
    let colorimetries = ["bt601", "bt709", "1:4:0:0", "bt2020"];
    let fits = [
        Fit::Stretch,
        Fit::Letterbox {
            pad: [114, 20, 200],
        },
        Fit::Fill,
    ];
    let mut checked = 0;
    let mut pts = 0u64;
    for (si, &format) in video_sources(backend).iter().enumerate() {
        // Odd and even sizes; half the sources with padded strides and plane gaps.
        let (w, h) = (29 + 3 * si as u32, 19 + si as u32);
        let padded = si % 2 == 1;
        let colorimetry: gst_video::VideoColorimetry = colorimetries[si % 4].parse().unwrap();
        let mut builder = gst_video::VideoInfo::builder(video_format(format), w, h)
            .fps(gst::Fraction::new(30, 1));
        if format.is_yuv() {
            builder = builder.colorimetry(&colorimetry);
        }
        let info = builder.build().unwrap();
        let in_caps = info.to_caps().unwrap();
        src.set_caps(Some(&in_caps));
        for (oi, &out) in outputs().iter().enumerate() {
            let (ow, oh) = (11 + oi as u32, 7 + (oi as u32 * 3) % 17);
            let fit = fits[(si + oi) % 3];
            let (caps, layout, dtype) = match out {
                Output::Video(f) => (
                    format!(
                        "video/x-raw,format={},width={ow},height={oh}",
                        video_format(f).to_str()
                    ),
                    None,
                    DType::U8,
                ),
                Output::Tensor(f, d) => {
                    let dims = if f.plane_count() == 3 {
                        format!("{ow}:{oh}:3:1")
                    } else {
                        format!("{}:{ow}:{oh}:1", f.channels())
                    };
                    (
                        format!(
                            "other/tensors,format=static,num_tensors=1,types={},dimensions={dims}",
                            tensor_type(d)
                        ),
                        Some(f),
                        d,
                    )
                }
            };
            let normalize = if matches!(dtype, DType::F16 | DType::F32) && oi % 2 == 0 {
                Normalize::IMAGENET
            } else {
                Normalize::IDENTITY
            };
            let options = ConvertOptions {
                fit,
                normalize,
                ..Default::default()
            };
            conv.set_property_from_str("layout", layout.map(|l| l.name()).unwrap_or("auto"));
            conv.set_property_from_str(
                "fit",
                match fit {
                    Fit::Stretch => "stretch",
                    Fit::Letterbox { .. } => "letterbox",
                    _ => "fill",
                },
            );
            conv.set_property("pad", "114,20,200");
            conv.set_property(
                "mean",
                format!(
                    "{},{},{}",
                    normalize.mean[0], normalize.mean[1], normalize.mean[2]
                ),
            );
            conv.set_property(
                "std",
                format!(
                    "{},{},{}",
                    normalize.std[0], normalize.std[1], normalize.std[2]
                ),
            );
            filter.set_property("caps", caps.parse::<gst::Caps>().unwrap());
            let mut buffer = frame(&info, padded, (si * 31 + oi) as u32);
            buffer
                .get_mut()
                .unwrap()
                .set_pts(gst::ClockTime::from_nseconds(pts));
            pts += 33_333_333;
            let what = format!(
                "{format} {w}x{h}{} -> {caps} ({fit})",
                if padded { " padded" } else { "" }
            );
            src.push_buffer(buffer.clone())
                .unwrap_or_else(|e| panic!("{what}: push: {e:?}"));
            let Some(sample) = sink.try_pull_sample(gst::ClockTime::from_seconds(30)) else {
                let mut log = BusLog::default();
                log.drain(&bus);
                panic!("{what}: no output ({log:?})");
            };
            let dst = output_layout(sample.caps().unwrap(), layout);
            assert_eq!(dst.dtype(), dtype, "{what}");
            let (want, info) = library_convert(reference, &buffer, &in_caps, &dst, &options);
            let got = sample.buffer().unwrap().map_readable().unwrap();
            assert_same_image(got.as_slice(), &want, &dst, &what);
            assert_meta(sample.buffer().unwrap(), &info, &what);
            checked += 1;
        }
    }
    let mut log = BusLog::default();
    log.drain(&bus);
    assert!(log.errors.is_empty(), "{:?}", log.errors);
    let stats = conv.property::<gst::Structure>("stats");
    assert_eq!(
        stats.get::<u64>("frames").unwrap(),
        checked as u64,
        "{stats}"
    );
    assert_eq!(
        stats.get::<u64>("pool-outputs").unwrap(),
        checked as u64,
        "{stats}"
    );
    pipeline.set_state(gst::State::Null).unwrap();
    checked
}

#[test]
fn every_advertised_pair_equals_the_library_on_the_cpu() {
    let mut cpu = ImageProcessor::with_backend(Backend::Cpu).unwrap();
    let n = every_pair(Backend::Cpu, &mut cpu);
    // The CPU converts every format it lists.
    let sources = video_sources(Backend::Cpu);
    assert!(sources.contains(&PixelFormat::P010) && sources.contains(&PixelFormat::Y16));
    assert_eq!(n, sources.len() * outputs().len());
    eprintln!("{n} format pairs equal on the CPU");
}

#[test]
fn every_advertised_pair_equals_the_library_on_gl() {
    init();
    let Some(mut gl) = gl_or_skip("every_advertised_pair_equals_the_library_on_gl") else {
        return;
    };
    let n = every_pair(Backend::Gl, &mut gl);
    assert_eq!(n, video_sources(Backend::Gl).len() * outputs().len());
    eprintln!("{n} format pairs equal on GL");
}

/// `gst-inspect-1.0 pinframe` lists the element, its caps and its properties.
#[test]
fn gst_inspect_lists_the_element_caps_and_properties() {
    init();
    let out = match std::process::Command::new("gst-inspect-1.0")
        .arg("pinframe")
        .env("GST_PLUGIN_PATH", plugin_dir())
        .output()
    {
        Ok(o) => o,
        Err(e) if under_ci() => panic!("gst-inspect-1.0 cannot run under CI: {e}"),
        Err(e) => {
            eprintln!("SKIPPED gst_inspect_lists_the_element_caps_and_properties: {e}");
            return;
        }
    };
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("pinframeconvert"), "{text}");
    let element = std::process::Command::new("gst-inspect-1.0")
        .arg("pinframeconvert")
        .env("GST_PLUGIN_PATH", plugin_dir())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&element.stdout);
    for needle in [
        "video/x-raw(memory:DMABuf)",
        "image/jpeg",
        "corrupt-frames",
        "other/tensors",
        "YUY2",
        "NV12",
        "RGBP",
        "float32",
        "int8",
        "backend",
        "fit",
        "pad",
        "crop",
        "rotation",
        "flip",
        "interpolation",
        "matrix",
        "range",
        "mean",
        "std",
        "quantize",
        "video/x-bayer",
        "rggb",
        "GRAY16_LE",
        "P010_10LE",
        "P016_LE",
        "black-level",
        "wb-gains",
        "ccm",
        "gamma",
        "dtype",
        "layout",
        "dma-route",
        "pool-size",
        "rois",
        "roi-type",
        "batch-size",
        "batch-timeout",
        "dropped-rois",
        "stats",
    ] {
        assert!(
            text.contains(needle),
            "gst-inspect-1.0 pinframeconvert lacks {needle}:\n{text}"
        );
    }
}

/// Input caps in a format pinframe does not convert are refused with a message naming
/// the formats it takes; options the frame cannot satisfy fail negotiation with the
/// library's reason.
#[test]
fn caps_it_cannot_convert_are_refused_with_a_message() {
    init();
    let cases: [(&str, &[&str]); 3] = [
        (
            "appsrc name=src caps=video/x-raw,format=Y41B,width=64,height=48,framerate=30/1 ! \
             pinframeconvert name=conv ! appsink name=sink",
            &["cannot convert from Y41B", "YUY2", "NV12", "I420"],
        ),
        (
            "appsrc name=src caps=video/x-raw,format=NV12,width=64,height=48,framerate=30/1 ! \
             pinframeconvert name=conv crop=60,40,10,10 ! video/x-raw,format=RGB,width=8,height=8 ! appsink name=sink",
            &["cannot convert nv12 64x48 to rgb 8x8", "crop"],
        ),
        (
            "appsrc name=src caps=video/x-raw,format=NV12,width=64,height=48,framerate=30/1 ! \
             pinframeconvert name=conv ! other/tensors,format=static,num_tensors=1,types=float32,dimensions=5:8:8:1 ! appsink name=sink",
            &["neither C:W:H"],
        ),
    ];
    for (desc, needles) in cases {
        let pipeline = launch_bin(desc);
        let src = app_src(&pipeline);
        let bus = pipeline.bus().unwrap();
        pipeline.set_state(gst::State::Playing).unwrap();
        let _ = src.push_buffer(gst::Buffer::with_size(64 * 48 * 3).unwrap());
        let _ = src.end_of_stream();
        let mut log = BusLog::default();
        log.until_end(&bus, 10);
        pipeline.set_state(gst::State::Null).unwrap();
        assert!(
            !log.errors.is_empty(),
            "{desc}: negotiation should fail: {log:?}"
        );
        let all = format!("{log:?}");
        for n in needles {
            assert!(
                all.contains(n),
                "{desc}: the messages should say {n:?}: {all}"
            );
        }
    }
}

/// A frame that cannot be converted (too short for its caps; a crop set while playing that
/// leaves the frame) posts an element error and stops the stream: no crash.
#[test]
fn runtime_failures_post_an_element_error() {
    init();
    let pipeline = launch_bin(
        "appsrc name=src format=time caps=video/x-raw,format=YUY2,width=64,height=48,framerate=30/1 ! \
         pinframeconvert name=conv ! video/x-raw,format=RGB,width=32,height=32 ! appsink name=sink sync=false",
    );
    let src = app_src(&pipeline);
    let sink = app_sink(&pipeline);
    let conv = pipeline.by_name("conv").unwrap();
    let bus = pipeline.bus().unwrap();
    pipeline.set_state(gst::State::Playing).unwrap();
    src.push_buffer(gst::Buffer::with_size(64 * 48 * 2).unwrap())
        .unwrap();
    assert!(
        sink.try_pull_sample(gst::ClockTime::from_seconds(10))
            .is_some(),
        "a good frame converts"
    );
    conv.set_property("crop", "60,40,30,30");
    let _ = src.push_buffer(gst::Buffer::with_size(64 * 48 * 2).unwrap());
    let m = bus
        .timed_pop_filtered(gst::ClockTime::from_seconds(10), &[gst::MessageType::Error])
        .expect("an error message");
    let gst::MessageView::Error(e) = m.view() else {
        unreachable!()
    };
    let text = format!("{} {:?}", e.error(), e.debug());
    assert!(
        text.contains("pinframe could not convert a frame"),
        "{text}"
    );
    assert!(text.contains("crop"), "{text}");
    assert_eq!(
        m.src().map(|s| s.name().to_string()),
        Some("conv".to_string())
    );
    pipeline.set_state(gst::State::Null).unwrap();

    // A buffer shorter than its caps.
    let pipeline = launch_bin(
        "appsrc name=src format=time caps=video/x-raw,format=NV12,width=64,height=48,framerate=30/1 ! \
         pinframeconvert name=conv ! video/x-raw,format=RGB,width=32,height=32 ! appsink name=sink sync=false",
    );
    let src = app_src(&pipeline);
    let bus = pipeline.bus().unwrap();
    pipeline.set_state(gst::State::Playing).unwrap();
    let _ = src.push_buffer(gst::Buffer::with_size(100).unwrap());
    let m = bus
        .timed_pop_filtered(gst::ClockTime::from_seconds(10), &[gst::MessageType::Error])
        .expect("an error message");
    let gst::MessageView::Error(e) = m.view() else {
        unreachable!()
    };
    let text = format!("{} {:?}", e.error(), e.debug());
    assert!(text.contains("mapping the input frame"), "{text}");
    pipeline.set_state(gst::State::Null).unwrap();
}

/// The output buffers are a fixed set of pinframe tensors wrapped without a copy (fd
/// memory over a memfd here, dma-bufs where the platform allocates them): over many
/// frames the same `pool-size` buffers, at the same addresses, come back.
#[test]
fn output_buffers_are_a_stable_pool() {
    init();
    let pipeline = launch_bin(
        "videotestsrc num-buffers=60 ! video/x-raw,format=NV12,width=320,height=240 ! \
         pinframeconvert name=conv pool-size=3 backend=cpu ! \
         other/tensors,format=static,num_tensors=1,types=float32,dimensions=3:96:96:1 ! \
         appsink name=sink sync=false",
    );
    let sink = app_sink(&pipeline);
    let conv = pipeline.by_name("conv").unwrap();
    pipeline.set_state(gst::State::Playing).unwrap();
    let mut identities = std::collections::BTreeSet::new();
    let mut addresses = std::collections::BTreeSet::new();
    let mut frames = 0;
    while let Some(sample) = sink.try_pull_sample(gst::ClockTime::from_seconds(30)) {
        let buffer = sample.buffer().unwrap();
        assert_eq!(buffer.n_memory(), 1);
        assert_eq!(buffer.size(), 96 * 96 * 3 * 4, "a tight tensor");
        let mem = buffer.peek_memory(0);
        let fdmem = mem
            .downcast_memory_ref::<gst_allocators::FdMemory>()
            .expect("pool buffers are fd memory over the tensor's own buffer");
        // SAFETY: the memory owns the fd and is alive for this borrow.
        let fd = unsafe { BorrowedFd::borrow_raw(fdmem.fd()) };
        let st = nix::sys::stat::fstat(fd.as_raw_fd()).unwrap();
        identities.insert((st.st_dev, st.st_ino));
        addresses.insert(buffer.map_readable().unwrap().as_ptr() as usize);
        frames += 1;
    }
    pipeline.set_state(gst::State::Null).unwrap();
    assert_eq!(frames, 60);
    assert_eq!(identities.len(), 3, "three buffers cycle");
    assert_eq!(addresses.len(), 3, "each at one address");
    let stats = conv.property::<gst::Structure>("stats");
    assert_eq!(stats.get::<u64>("output-buffers").unwrap(), 3, "{stats}");
    assert_eq!(stats.get::<u64>("mapped-sources").unwrap(), 60, "{stats}");
}

/// This process holds two separately linked copies of pinframe (the test's and the
/// plugin's), each with its own display registry, on one process-wide EGL display. The
/// test's copy opens a GL processor first, the plugin's opens its own, then the test's
/// last processor goes while the plugin's streams on: when a copy terminated the display
/// on dropping its last processor, the plugin's next frame failed on a dead display.
#[test]
fn the_plugin_streams_on_gl_after_the_other_copy_drops_its_last_processor() {
    init();
    let test = "the_plugin_streams_on_gl_after_the_other_copy_drops_its_last_processor";
    let Some(test_copy) = gl_or_skip(test) else {
        return;
    };
    let pipeline = launch_bin(
        "appsrc name=src format=time caps=video/x-raw,format=RGBA,width=16,height=12,framerate=30/1 \
         ! pinframeconvert backend=gl ! video/x-raw,format=RGB,width=8,height=6 \
         ! appsink name=sink sync=false",
    );
    let src = app_src(&pipeline);
    let sink = app_sink(&pipeline);
    pipeline.set_state(gst::State::Playing).unwrap();
    let info = gst_video::VideoInfo::builder(gst_video::VideoFormat::Rgba, 16, 12)
        .build()
        .unwrap();
    let pull = |seed: u32| {
        src.push_buffer(frame(&info, false, seed)).unwrap();
        let sample = sink
            .try_pull_sample(gst::ClockTime::from_seconds(20))
            .unwrap_or_else(|| panic!("{test}: no output for frame {seed}"));
        sample.buffer().unwrap().map_readable().unwrap().to_vec()
    };
    let before = pull(1);
    drop(test_copy);
    let after = pull(1);
    assert_eq!(after, before, "{test}: the same frame, before and after");
    assert_ne!(pull(2), before, "{test}: a new frame converts anew");
    // And the other way round: the test's copy opens GL again and converts while the
    // plugin's processor is alive; then the plugin's goes, and the test's converts on.
    let mut again = gl_or_skip(test).expect("GL opened once in this process");
    pipeline.set_state(gst::State::Null).unwrap();
    let src = pinframe::Tensor::<u8>::image(4, 4, PixelFormat::Grey, None).unwrap();
    let mut dst = pinframe::Tensor::<u8>::image(4, 4, PixelFormat::Rgba, None).unwrap();
    again
        .convert(&src, &mut dst)
        .expect("the test's copy converts after the plugin's processor went");
}

/// This test's copy of pinframe and the plugin's (loaded by GStreamer) are two copies in
/// one process, both built with `shared-guard`: one libpinframe.so.0 object, one guard.
/// While this thread holds the exclusive side, a pipeline started on another thread must
/// wait in the plugin at its first CPU mapping (its output pool's) and convert nothing
/// until the section ends. With a guard of its own, the plugin would map and finish inside
/// the section, and no thread would be seen waiting.
#[test]
fn the_plugin_and_this_copy_share_one_cpu_mapping_guard() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::{Duration, Instant};
    init();
    let test = "the_plugin_and_this_copy_share_one_cpu_mapping_guard";
    match pinframe::tensor::cpu_mapping_guard() {
        Ok(pinframe::tensor::CpuMappingGuard::Shared { library }) => {
            assert!(library.ends_with("libpinframe.so.0"), "{test}: {library}")
        }
        other => panic!("{test}: this copy's guard is not libpinframe's: {other:?}"),
    }
    let converted = Arc::new(AtomicBool::new(false));
    let done = converted.clone();
    let (waited, converted_inside) = pinframe::with_cpu_mappings_excluded(|| {
        let pipeline = std::thread::spawn(move || {
            let (_conv, pairs, log) = run_pipeline(
                "videotestsrc num-buffers=1 ! video/x-raw,format=RGBA,width=16,height=12 \
                 ! pinframeconvert name=conv backend=cpu ! video/x-raw,format=RGB,width=8,height=6 \
                 ! appsink name=sink sync=false",
            );
            assert!(log.errors.is_empty(), "{:?}", log.errors);
            done.store(!pairs.is_empty(), Ordering::SeqCst);
        });
        let start = Instant::now();
        let mut waited = false;
        while start.elapsed() < Duration::from_secs(30) && !pipeline.is_finished() {
            if pinframe::testing::cpu_mapping_guard_waiters() > 0 {
                waited = true;
                // Held a moment longer: the plugin must still be waiting, not converting.
                std::thread::sleep(Duration::from_millis(200));
                break;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        (waited, (pipeline, converted.load(Ordering::SeqCst)))
    });
    let (pipeline, inside) = converted_inside;
    assert!(
        waited,
        "{test}: no thread waited on the guard while this copy held it"
    );
    assert!(
        !inside,
        "{test}: the plugin converted inside this copy's exclusive section"
    );
    pipeline.join().expect("the pipeline thread");
    assert!(
        converted.load(Ordering::SeqCst),
        "{test}: the plugin converted once the section ended"
    );
    let mapped: std::collections::BTreeSet<String> = std::fs::read_to_string("/proc/self/maps")
        .unwrap()
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .filter(|p| p.ends_with("/libpinframe.so.0") || p.ends_with("/libpinframe_c.so"))
        .map(str::to_owned)
        .collect();
    assert_eq!(
        mapped.len(),
        1,
        "{test}: one libpinframe object: {mapped:?}"
    );
}

/// Bayer frames from an appsrc (`video/x-bayer,format=rggb`, rows of `GST_ROUND_UP_4(width)`
/// bytes as GStreamer's bayer elements lay them out) through the element with the ISP
/// properties give what the library gives converting the same bytes with the same `Isp`;
/// a black level at the 8-bit white level is refused, naming the parameter.
#[test]
fn bayer_frames_with_isp_properties_equal_the_library_on_the_cpu() {
    init();
    let (w, h) = (66u32, 38u32);
    let stride = 68usize;
    let caps = format!("video/x-bayer,format=rggb,width={w},height={h},framerate=30/1");
    let pipeline = launch_bin(&format!(
        "appsrc name=src format=time caps={caps} ! pinframeconvert name=conv backend=cpu \
         fit=letterbox black-level=16,17,18,19 wb-gains=1.8,1,1.4 \
         ccm=1.6,-0.4,-0.2,-0.3,1.5,-0.2,0,-0.5,1.5 gamma=srgb mean=0.485,0.456,0.406 \
         std=0.229,0.224,0.225 ! other/tensors,format=static,num_tensors=1,types=float32,\
         dimensions=40:24:3:1 ! appsink name=sink sync=false"
    ));
    let src = app_src(&pipeline);
    let sink = app_sink(&pipeline);
    let conv = pipeline.by_name("conv").unwrap();
    assert_eq!(conv.property::<String>("black-level"), "16,17,18,19");
    assert_eq!(conv.property::<String>("wb-gains"), "1.8,1,1.4");
    let bus = pipeline.bus().unwrap();
    pipeline.set_state(gst::State::Playing).unwrap();
    let options = ConvertOptions {
        fit: Fit::Letterbox { pad: [114; 3] },
        normalize: Normalize::IMAGENET,
        isp: Isp {
            black_level: [16, 17, 18, 19],
            gains: [1.8, 1.0, 1.4],
            ccm: [[1.6, -0.4, -0.2], [-0.3, 1.5, -0.2], [0.0, -0.5, 1.5]],
            gamma: Gamma::Srgb,
        },
        ..Default::default()
    };
    let src_layout = ImageLayout::with_stride(w, h, PixelFormat::Rggb8, DType::U8, stride).unwrap();
    let dst = ImageLayout::tight(40, 24, PixelFormat::PlanarRgb, DType::F32).unwrap();
    let mut reference = ImageProcessor::with_backend(Backend::Cpu).unwrap();
    for seed in 0..2u32 {
        let bytes: Vec<u8> = (0..stride * h as usize)
            .map(|i| {
                let (x, y) = ((i % stride) as u32, (i / stride) as u32);
                // A smooth scene with a per-site offset, so the CFA order matters.
                (40 + 3 * x + 2 * y + 60 * ((x & 1) ^ (y & 1)) + 25 * seed).min(255) as u8
            })
            .collect();
        let mut want = vec![0f32; dst.required_len(0) / 4];
        reference
            .convert_buffers(&[&bytes], &src_layout, &mut want, &dst, &options)
            .unwrap();
        let mut buffer = gst::Buffer::from_slice(bytes.clone());
        buffer
            .get_mut()
            .unwrap()
            .set_pts(gst::ClockTime::from_mseconds(33 * seed as u64));
        src.push_buffer(buffer).unwrap();
        let Some(sample) = sink.try_pull_sample(gst::ClockTime::from_seconds(30)) else {
            let mut log = BusLog::default();
            log.drain(&bus);
            panic!("bayer frame {seed}: no output ({log:?})");
        };
        let got = sample.buffer().unwrap().map_readable().unwrap();
        assert_same_image(
            got.as_slice(),
            bytemuck::cast_slice(&want),
            &dst,
            &format!("bayer frame {seed}"),
        );
        // Not the plain demosaic: the ISP properties reached the conversion.
        let mut plain = vec![0f32; want.len()];
        let plain_options = ConvertOptions {
            isp: Isp::IDENTITY,
            ..options
        };
        reference
            .convert_buffers(&[&bytes], &src_layout, &mut plain, &dst, &plain_options)
            .unwrap();
        assert_ne!(plain, want, "bayer frame {seed}: the ISP changed nothing");
    }
    pipeline.set_state(gst::State::Null).unwrap();

    // 255 is the white level of 8-bit samples: no black level can reach it.
    let pipeline = launch_bin(&format!(
        "appsrc name=src format=time caps={caps} ! pinframeconvert name=conv backend=cpu \
         black-level=255 ! video/x-raw,format=RGB,width=32,height=32 ! appsink name=sink"
    ));
    let src = app_src(&pipeline);
    let bus = pipeline.bus().unwrap();
    pipeline.set_state(gst::State::Playing).unwrap();
    let _ = src.push_buffer(gst::Buffer::with_size(stride * h as usize).unwrap());
    let _ = src.end_of_stream();
    let mut log = BusLog::default();
    log.until_end(&bus, 10);
    pipeline.set_state(gst::State::Null).unwrap();
    let all = format!("{log:?}");
    assert!(
        !log.errors.is_empty(),
        "black-level=255 should be refused: {all}"
    );
    assert!(
        all.contains("isp black level 255 at the R sites is not below the white level 255"),
        "{all}"
    );
}

/// A sealed memfd of `len` bytes filled with `byte` (what a dma-buf memory is wrapped over
/// here: the host has no dma-heap; pinframe imports memfds the same way).
fn sealed_memfd(len: usize, byte: u8) -> std::os::fd::OwnedFd {
    use std::os::fd::FromRawFd;
    // SAFETY: memfd_create with a static NUL-terminated name; the fd is ours.
    let fd = unsafe { libc::memfd_create(c"pinframe-gst-test".as_ptr(), libc::MFD_ALLOW_SEALING) };
    assert!(fd >= 0, "memfd_create: {}", std::io::Error::last_os_error());
    // SAFETY: `fd` was just created and is owned by nothing else.
    let fd = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
    let file = std::fs::File::from(fd.try_clone().unwrap());
    std::io::Write::write_all(&mut &file, &vec![byte; len]).unwrap();
    // SAFETY: F_ADD_SEALS on an fd we own.
    assert_eq!(
        unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, libc::F_SEAL_SHRINK) },
        0
    );
    fd
}

/// An NV12 64x48 buffer of two memories (Y, then UV) described by a GstVideoMeta, whose
/// second memory holds only `uv_len` of the 1536 bytes its plane needs.
fn nv12_two_memories(uv_len: usize, dmabuf: bool) -> gst::Buffer {
    let (y_len, full_uv) = (64 * 48, 64 * 24);
    let mut buffer = gst::Buffer::new();
    {
        let b = buffer.get_mut().unwrap();
        if dmabuf {
            let alloc = gst_allocators::DmaBufAllocator::new();
            for (len, byte) in [(y_len, 100u8), (uv_len, 128u8)] {
                let fd = sealed_memfd(len, byte);
                use std::os::fd::IntoRawFd;
                // SAFETY: the allocator takes the fd (an open memfd of `len` bytes).
                let mem = unsafe { alloc.alloc_dmabuf(fd.into_raw_fd(), len) }.unwrap();
                b.append_memory(mem);
            }
        } else {
            b.append_memory(gst::Memory::from_mut_slice(vec![100u8; y_len]));
            b.append_memory(gst::Memory::from_mut_slice(vec![128u8; uv_len]));
        }
        gst_video::VideoMeta::add_full(
            b,
            gst_video::VideoFrameFlags::empty(),
            gst_video::VideoFormat::Nv12,
            64,
            48,
            &[0, y_len],
            &[64, 64],
        )
        .unwrap();
    }
    let _ = full_uv;
    buffer
}

/// A plane that runs past its own GstMemory is refused (an element error naming the
/// plane), never read out of bounds: in system memory (GStreamer's video frame would hand
/// out `stride * rows` bytes of the short memory) and in dma-buf memory (whose import is
/// counted as failed, logged once, and which then is refused the same way). What the
/// failing frames counted is kept in the stats.
#[test]
fn a_plane_past_its_memory_is_refused_and_counted() {
    init();
    for dmabuf in [false, true] {
        let pipeline = launch_bin(
            "appsrc name=src format=time caps=video/x-raw,format=NV12,width=64,height=48,framerate=30/1 ! \
             pinframeconvert name=conv backend=cpu ! video/x-raw,format=RGB,width=32,height=32 ! \
             appsink name=sink sync=false",
        );
        let src = app_src(&pipeline);
        let sink = app_sink(&pipeline);
        let conv = pipeline.by_name("conv").unwrap();
        let bus = pipeline.bus().unwrap();
        pipeline.set_state(gst::State::Playing).unwrap();
        // Whole memories convert (the dma-buf one imported).
        src.push_buffer(nv12_two_memories(64 * 24, dmabuf)).unwrap();
        let sample = sink
            .try_pull_sample(gst::ClockTime::from_seconds(10))
            .expect("a whole frame converts");
        let got = sample.buffer().unwrap().map_readable().unwrap();
        assert!(got.iter().all(|&v| v == got[0]), "a flat grey frame");
        drop(got);
        // Half the chroma plane is missing.
        let _ = src.push_buffer(nv12_two_memories(64 * 12, dmabuf));
        let mut log = BusLog::default();
        log.until_end(&bus, 10);
        let all = format!("{log:?}");
        assert!(
            all.contains("plane 1 needs 1536 bytes of its memory of 768 bytes"),
            "dmabuf={dmabuf}: {all}"
        );
        assert!(!all.contains("panicked"), "{all}");
        let stats = conv.property::<gst::Structure>("stats");
        let n = |f: &str| stats.get::<u64>(f).unwrap();
        assert_eq!(n("failed-frames"), 1, "{stats}");
        assert_eq!(n("frames"), 1, "{stats}");
        if dmabuf {
            assert_eq!(n("dmabuf-sources"), 1, "{stats}");
            assert_eq!(n("source-import-failures"), 1, "{stats}");
            assert_eq!(
                n("mapped-sources"),
                1,
                "the failing frame is counted: {stats}"
            );
        } else {
            assert_eq!(
                n("mapped-sources"),
                2,
                "the failing frame is counted: {stats}"
            );
            assert_eq!(n("source-import-failures"), 0, "{stats}");
        }
        pipeline.set_state(gst::State::Null).unwrap();
    }
}

/// A dma-buf source that cannot be imported is logged once (a warning), counted on every
/// frame, and converted from its mapped bytes.
#[test]
fn a_failing_dmabuf_import_is_logged_once_and_counted() {
    init();
    let pipeline = launch_bin(
        "appsrc name=src format=time caps=video/x-raw,format=NV12,width=64,height=48,framerate=30/1 ! \
         pinframeconvert name=importonce backend=cpu ! video/x-raw,format=RGB,width=32,height=32 ! \
         appsink name=sink sync=false",
    );
    let src = app_src(&pipeline);
    let sink = app_sink(&pipeline);
    let conv = pipeline.by_name("importonce").unwrap();
    pipeline.set_state(gst::State::Playing).unwrap();
    let failures = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = failures.clone();
    gst::log::add_log_function(move |_cat, level, _file, _fn, _line, obj, msg| {
        if level == gst::DebugLevel::Warning
            && obj.is_some_and(|o| o.to_string().contains("importonce"))
            && msg
                .get()
                .is_some_and(|m| m.contains("dma-buf source not imported"))
        {
            seen.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    });
    gst::log::set_threshold_for_name("pinframeconvert", gst::DebugLevel::Warning);
    for _ in 0..5 {
        // An unsealed memfd as dma-buf memory: pinframe refuses to import it.
        // SAFETY: memfd_create with a static name; the fd goes to the allocator.
        let fd = unsafe { libc::memfd_create(c"pinframe-gst-unsealed".as_ptr(), 0) };
        assert!(fd >= 0);
        // SAFETY: `fd` is an open memfd; it is resized before the allocator takes it.
        assert_eq!(unsafe { libc::ftruncate(fd, 64 * 48 * 3 / 2) }, 0);
        let alloc = gst_allocators::DmaBufAllocator::new();
        // SAFETY: the allocator takes the open fd.
        let mem = unsafe { alloc.alloc_dmabuf(fd, 64 * 48 * 3 / 2) }.unwrap();
        let mut buffer = gst::Buffer::new();
        buffer.get_mut().unwrap().append_memory(mem);
        src.push_buffer(buffer).unwrap();
        assert!(
            sink.try_pull_sample(gst::ClockTime::from_seconds(10))
                .is_some(),
            "converted from the mapped bytes"
        );
    }
    let stats = conv.property::<gst::Structure>("stats");
    pipeline.set_state(gst::State::Null).unwrap();
    assert_eq!(
        stats.get::<u64>("source-import-failures").unwrap(),
        5,
        "{stats}"
    );
    assert_eq!(stats.get::<u64>("mapped-sources").unwrap(), 5, "{stats}");
    assert_eq!(stats.get::<u64>("failed-frames").unwrap(), 0, "{stats}");
    assert_eq!(
        failures.load(std::sync::atomic::Ordering::Relaxed),
        1,
        "one warning for five failed imports"
    );
}

/// Negotiation probes where buffers can come from without allocating a frame: the
/// output pool allocates its `pool-size` buffers and nothing else does; a route that
/// cannot allocate is refused with the library's reason, having allocated nothing.
#[test]
fn negotiation_allocates_no_probe_frame() {
    init();
    let pipeline = launch_bin(
        "videotestsrc num-buffers=3 ! video/x-raw,format=NV12,width=320,height=240 ! \
         pinframeconvert name=conv pool-size=3 backend=cpu ! \
         other/tensors,format=static,num_tensors=1,types=float32,dimensions=3:96:96:1 ! \
         appsink name=sink sync=false",
    );
    let sink = app_sink(&pipeline);
    let conv = pipeline.by_name("conv").unwrap();
    pipeline.set_state(gst::State::Playing).unwrap();
    let mut frames = 0;
    while sink
        .try_pull_sample(gst::ClockTime::from_seconds(30))
        .is_some()
    {
        frames += 1;
    }
    let stats = conv.property::<gst::Structure>("stats");
    pipeline.set_state(gst::State::Null).unwrap();
    assert_eq!(frames, 3);
    let n = |f: &str| stats.get::<u64>(f).unwrap();
    assert_eq!(n("output-buffers"), 3, "{stats}");
    // Memfd buffers need no probe; a dma-buf probe is one page, never a 96x96x3 f32 frame.
    assert!(n("probe-bytes") <= 4096 * n("probe-allocations"), "{stats}");
    // Every byte allocated: the three pool buffers, and the probes' pages.
    assert_eq!(
        n("allocated-bytes"),
        3 * 96 * 96 * 3 * 4 + n("probe-bytes"),
        "no frame allocated to probe: {stats}"
    );

    // A dma-heap that does not exist: refused at allocation, nothing allocated.
    let pipeline = launch_bin(
        "videotestsrc num-buffers=3 ! video/x-raw,format=NV12,width=320,height=240 ! \
         pinframeconvert name=conv pool-size=3 backend=cpu dma-route=heap:pinframe-none ! \
         video/x-raw,format=RGB,width=96,height=96 ! appsink name=sink sync=false",
    );
    let conv = pipeline.by_name("conv").unwrap();
    let bus = pipeline.bus().unwrap();
    pipeline.set_state(gst::State::Playing).unwrap();
    let mut log = BusLog::default();
    log.until_end(&bus, 10);
    let stats = conv.property::<gst::Structure>("stats");
    pipeline.set_state(gst::State::Null).unwrap();
    let all = format!("{log:?}");
    assert!(
        all.contains("cannot allocate the output pool's buffers"),
        "{all}"
    );
    assert!(all.contains("pinframe-none"), "{all}");
    let n = |f: &str| stats.get::<u64>(f).unwrap();
    assert_eq!(n("output-buffers"), 0, "{stats}");
    assert_eq!(n("probe-bytes"), 0, "{stats}");
    assert_eq!(n("allocated-bytes"), 0, "{stats}");
}

/// Out-of-range property values (NaN, infinities, zero, negative, too large) are refused
/// with a warning and leave the property as it was; a pool-size out of its range is
/// refused by GObject. Caps with huge sizes are refused in negotiation. Never a panic.
#[test]
fn bad_numbers_in_properties_and_caps_are_refused() {
    init();
    let conv = gst::ElementFactory::make("pinframeconvert")
        .build()
        .unwrap();
    let cases = [
        ("mean", "nan,0,0"),
        ("mean", "inf,0,0"),
        ("std", "0,1,1"),
        ("std", "1,-inf,1"),
        ("std", "1,1,nan"),
        ("wb-gains", "-1,1,1"),
        ("wb-gains", "nan,1,1"),
        ("wb-gains", "1e39,1,1"),
        ("ccm", "1,0,0,0,nan,0,0,0,1"),
        ("crop", "4294967296,0,1,1"),
        ("crop", "1,1,0,0"),
        ("crop", "-1,0,4,4"),
        ("pad", "256,0,0"),
        ("pad", "-1,0,0"),
        ("black-level", "65536"),
        ("black-level", "-1"),
        ("dma-route", "heap:"),
    ];
    for (name, bad) in cases {
        let before = conv.property_value(name);
        conv.set_property_from_str(name, bad);
        let after = conv.property_value(name);
        assert_eq!(
            format!("{before:?}"),
            format!("{after:?}"),
            "{name}={bad} should be refused"
        );
    }
    // From a pipeline description, as gst-launch sets it: GObject refuses the value.
    let bin = launch_bin("fakesrc ! pinframeconvert name=conv pool-size=1000 ! fakesink");
    let c = bin.by_name("conv").unwrap();
    assert_eq!(c.property::<u32>("pool-size"), 4);

    let cases: [(&str, &str); 3] = [
        (
            "appsrc name=src caps=video/x-bayer,format=rggb,width=2147483647,height=2147483647,framerate=30/1 ! \
             pinframeconvert name=conv backend=cpu ! video/x-raw,format=RGB,width=32,height=32 ! appsink name=sink",
            "",
        ),
        (
            "appsrc name=src caps=video/x-raw,format=NV12,width=64,height=48,framerate=30/1 ! \
             pinframeconvert name=conv backend=cpu ! other/tensors,format=static,num_tensors=1,types=float32,dimensions=3:4294967295:4294967295:1 ! appsink name=sink",
            "",
        ),
        (
            "appsrc name=src caps=video/x-raw,format=NV12,width=64,height=48,framerate=30/1 ! \
             pinframeconvert name=conv backend=cpu ! other/tensors,format=static,num_tensors=1,types=float32,dimensions=3:40000:40000:1 ! appsink name=sink",
            "",
        ),
    ];
    for (desc, needle) in cases {
        let pipeline = launch_bin(desc);
        let src = app_src(&pipeline);
        let bus = pipeline.bus().unwrap();
        pipeline.set_state(gst::State::Playing).unwrap();
        let _ = src.push_buffer(gst::Buffer::with_size(64 * 48 * 3).unwrap());
        let _ = src.end_of_stream();
        let mut log = BusLog::default();
        log.until_end(&bus, 20);
        pipeline.set_state(gst::State::Null).unwrap();
        let all = format!("{log:?}");
        assert!(!log.errors.is_empty(), "{desc}: should be refused: {all}");
        assert!(!all.contains("panicked"), "{desc}: {all}");
        assert!(all.contains(needle), "{desc}: {all}");
    }
}

/// A camera-like Motion-JPEG frame: 4:2:2 at quality 85 of a gradient that moves with
/// `seed` (full-range BT.601 planes, as JFIF has them).
fn mjpeg_frame(w: u32, h: u32, seed: u32) -> Vec<u8> {
    let layout = ImageLayout::tight(w, h, PixelFormat::I422, DType::U8).unwrap();
    let mut planes = vec![0u8; layout.required_len(0)];
    for (i, p) in layout.planes().iter().enumerate() {
        for y in 0..layout.plane_height(i) as usize {
            for x in 0..layout.plane_row_bytes(i) {
                let v = match i {
                    0 => 16 + 3 * x + 2 * y + 9 * seed as usize,
                    1 => 60 + x + y,
                    _ => 200 - x / 2 - y,
                };
                planes[p.offset + y * p.stride + x] = (v % 256) as u8;
            }
        }
    }
    pinframe::jpeg::JpegEncoder::new()
        .unwrap()
        .encode(&planes, &layout, 85)
        .unwrap()
        .to_vec()
}

/// `image/jpeg` in, a letterboxed ImageNet tensor out: every good frame equals the
/// library's conversion of the same bytes (a scaled decode: 322 -> 128 needs under half);
/// a damaged frame is dropped with a warning and counted, and the stream goes on.
fn motion_jpeg_equals_the_library(mut reference: ImageProcessor) {
    let backend = reference.backend();
    let (w, h) = (322u32, 182u32);
    let pipeline = launch_bin(&format!(
        "appsrc name=src format=time caps=image/jpeg,width={w},height={h},framerate=30/1 ! \
         pinframeconvert name=conv backend={} fit=letterbox mean=0.485,0.456,0.406 \
         std=0.229,0.224,0.225 ! other/tensors,format=static,num_tensors=1,types=float32,\
         dimensions=128:128:3:1 ! appsink name=sink sync=false",
        backend.name()
    ));
    let src = app_src(&pipeline);
    let sink = app_sink(&pipeline);
    let conv = pipeline.by_name("conv").unwrap();
    let bus = pipeline.bus().unwrap();
    pipeline.set_state(gst::State::Playing).unwrap();
    let dst = ImageLayout::tight(128, 128, PixelFormat::PlanarRgb, DType::F32).unwrap();
    let options = imagenet_letterbox();
    // Frames 1 and 3 are cut off (what a USB camera hands over when it loses packets).
    let mut sent_good = 0;
    for seed in 0..5u32 {
        let mut frame = mjpeg_frame(w, h, seed);
        let corrupt = seed % 2 == 1;
        if corrupt {
            frame.truncate(frame.len() / 2);
        }
        let mut buffer = gst::Buffer::from_slice(frame.clone());
        buffer
            .get_mut()
            .unwrap()
            .set_pts(gst::ClockTime::from_mseconds(33 * seed as u64));
        src.push_buffer(buffer).unwrap();
        if corrupt {
            continue;
        }
        sent_good += 1;
        let layout =
            ImageLayout::with_stride(w, h, PixelFormat::Mjpeg, DType::U8, frame.len()).unwrap();
        let mut want = vec![0f32; dst.required_len(0) / 4];
        let info = reference
            .convert_buffers(&[&frame], &layout, &mut want, &dst, &options)
            .unwrap();
        assert_eq!(info.decode_scale, 2, "frame {seed}: a scaled decode");
        let Some(sample) = sink.try_pull_sample(gst::ClockTime::from_seconds(30)) else {
            let mut log = BusLog::default();
            log.drain(&bus);
            panic!("{backend} jpeg frame {seed}: no output ({log:?})");
        };
        let got = sample.buffer().unwrap().map_readable().unwrap();
        assert_same_image(
            got.as_slice(),
            bytemuck::cast_slice(&want),
            &dst,
            &format!("{backend} jpeg frame {seed}"),
        );
        assert_meta(sample.buffer().unwrap(), &info, "image/jpeg");
    }
    src.end_of_stream().unwrap();
    let mut log = BusLog::default();
    log.until_end(&bus, 30);
    // Nothing more came out than the good frames.
    assert!(
        sink.try_pull_sample(gst::ClockTime::from_mseconds(100))
            .is_none()
    );
    let stats = conv.property::<gst::Structure>("stats");
    pipeline.set_state(gst::State::Null).unwrap();
    assert!(log.errors.is_empty(), "{backend}: {:?}", log.errors);
    assert_eq!(sent_good, 3);
    assert_eq!(stats.get::<u64>("corrupt-frames").unwrap(), 2, "{stats}");
    assert_eq!(stats.get::<u64>("failed-frames").unwrap(), 0, "{stats}");
    assert_eq!(stats.get::<u64>("mapped-sources").unwrap(), 5, "{stats}");
    // One warning on the bus for the first damaged frame (the stats count the rest).
    assert_eq!(log.warnings.len(), 1, "{backend}: {:?}", log.warnings);
    assert!(log.warnings[0].contains("corrupt"), "{:?}", log.warnings);
}

#[test]
fn motion_jpeg_equals_the_library_and_damaged_frames_are_dropped_on_the_cpu() {
    init();
    motion_jpeg_equals_the_library(ImageProcessor::with_backend(Backend::Cpu).unwrap());
}

#[test]
fn motion_jpeg_equals_the_library_and_damaged_frames_are_dropped_on_gl() {
    init();
    let Some(gl) =
        gl_or_skip("motion_jpeg_equals_the_library_and_damaged_frames_are_dropped_on_gl")
    else {
        return;
    };
    motion_jpeg_equals_the_library(gl);
}

/// GStreamer's own JPEG encoder upstream (what `v4l2src` from a webcam, `souphttpsrc !
/// multipartdemux` or a file hands over as `image/jpeg`): every output equals the
/// library's conversion of the same buffer.
#[test]
fn jpegenc_frames_equal_the_library_on_the_cpu() {
    let desc = "videotestsrc num-buffers=3 pattern=ball ! \
                video/x-raw,format=I420,width=640,height=480,framerate=30/1 ! \
                jpegenc quality=85 ! pinframeconvert name=conv backend=cpu fit=letterbox ! \
                video/x-raw,format=RGB,width=300,height=300 ! appsink name=sink sync=false";
    let (conv, pairs, log) = run_pipeline(desc);
    assert!(log.errors.is_empty(), "{:?}", log.errors);
    assert_eq!(pairs.len(), 3);
    let mut reference = ImageProcessor::with_backend(Backend::Cpu).unwrap();
    let options = ConvertOptions {
        fit: Fit::Letterbox { pad: [114; 3] },
        ..Default::default()
    };
    for (i, (input, sample)) in pairs.iter().enumerate() {
        let bytes = input.map_readable().unwrap();
        let layout =
            ImageLayout::with_stride(640, 480, PixelFormat::Mjpeg, DType::U8, bytes.size())
                .unwrap();
        let dst = output_layout(sample.caps().unwrap(), None);
        let mut want = vec![0u8; dst.required_len(0)];
        let info = reference
            .convert_buffers(&[bytes.as_slice()], &layout, &mut want, &dst, &options)
            .unwrap();
        let got = sample.buffer().unwrap().map_readable().unwrap();
        assert_same_image(got.as_slice(), &want, &dst, &format!("jpegenc frame {i}"));
        assert_meta(sample.buffer().unwrap(), &info, "jpegenc");
    }
    let stats = conv.property::<gst::Structure>("stats");
    assert_eq!(stats.get::<u64>("corrupt-frames").unwrap(), 0, "{stats}");
}
