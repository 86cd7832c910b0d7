//! Helpers of the plugin's tests: load the built plugin, run pipelines, and convert the
//! same frames with the library for comparison.
#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::Once;
use std::time::Duration;

use gst::prelude::*;
use gst_video::{VideoColorMatrix, VideoColorRange, VideoFrameExt};
use pinframe::{
    Backend, Colorimetry, ConvertInfo, ConvertOptions, DType, Element, ImageLayout, ImageProcessor,
    Matrix, PixelFormat, Plane, Range,
};

/// True when running under CI (`CI=true`), where a lane that cannot run is a failure.
pub fn under_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// True inside the VM lane's guest.
pub fn in_vm() -> bool {
    std::env::var_os("PINFRAME_VM").is_some_and(|v| v == "1")
}

/// Where the plugin link and the registry live: `target/gst-tests-<profile>/`, or a
/// folder under `/tmp` in the VM lane's guest (whose view of the host's root is read-only).
/// Not inside `target/<profile>/`: GStreamer scans a `GST_PLUGIN_PATH` folder
/// recursively, and the lane's `gst-inspect-1.0` with `target/release` would load the
/// plugin through this folder's link.
fn work_dir(deps: &std::path::Path) -> PathBuf {
    if in_vm() {
        std::env::temp_dir().join("pinframe-gst")
    } else {
        let profile_dir = deps.parent().expect("target/<profile>");
        let profile = profile_dir.file_name().expect("a profile folder");
        profile_dir
            .parent()
            .expect("target/")
            .join(format!("gst-tests-{}", profile.to_string_lossy()))
    }
}

/// A folder holding only the plugin this test run built, linked to
/// `target/<profile>/deps/libgstpinframe.so` (`cargo test` builds the cdylib there and does
/// not copy it up to `target/<profile>/`; `deps/` itself holds other shared objects
/// GStreamer should not scan). The loader takes `$ORIGIN` from the path an object was
/// opened by, the link's, so the folder above it gets a link to `libpinframe.so.0` too
/// (`scripts/libpinframe-for-tests` makes `target/<profile>/libpinframe.so.0`): the
/// plugin's runpath `$ORIGIN/..` finds it, as in an installed `<libdir>/gstreamer-1.0/`.
pub fn plugin_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let deps = exe
        .parent()
        .expect("the test binary sits in target/<profile>/deps");
    let built = deps.join("libgstpinframe.so");
    assert!(
        built.exists(),
        "{} is missing: cargo builds it with the plugin's tests",
        built.display()
    );
    let guard_lib = deps.parent().unwrap().join("libpinframe.so.0");
    assert!(
        guard_lib.exists(),
        "{} is missing: run scripts/libpinframe-for-tests (the plugin's CPU-mapping guard)",
        guard_lib.display()
    );
    let work = work_dir(deps);
    let dir = work.join("plugin");
    std::fs::create_dir_all(&dir).unwrap();
    for (target, link) in [
        (built, dir.join("libgstpinframe.so")),
        (guard_lib, work.join("libpinframe.so.0")),
    ] {
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&target, &link).unwrap();
    }
    dir
}

/// In the guest (TCG: every plugin GStreamer scans costs seconds), a system plugin folder
/// with only the plugins the VM tests use.
fn vm_system_plugins(work: &std::path::Path) -> Option<PathBuf> {
    let system = [
        "/usr/lib/x86_64-linux-gnu/gstreamer-1.0",
        "/usr/lib/gstreamer-1.0",
        "/usr/lib64/gstreamer-1.0",
    ]
    .into_iter()
    .map(PathBuf::from)
    .find(|d| d.join("libgstcoreelements.so").exists())?;
    let dir = work.join("system");
    std::fs::create_dir_all(&dir).ok()?;
    for p in [
        "libgstcoreelements.so",
        "libgstvideo4linux2.so",
        "libgstvideotestsrc.so",
        "libgstapp.so",
    ] {
        let link = dir.join(p);
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(system.join(p), &link).ok()?;
    }
    Some(dir)
}

static INIT: Once = Once::new();

/// Initialises GStreamer with the built plugin on `GST_PLUGIN_PATH` (and a registry of
/// its own in the target dir), and checks that `pinframeconvert` is there.
pub fn init() {
    INIT.call_once(|| {
        let dir = plugin_dir();
        let work = dir.parent().unwrap().to_path_buf();
        // SAFETY (of set_var): called once, before GStreamer or any other thread starts.
        unsafe {
            std::env::set_var("GST_PLUGIN_PATH", &dir);
            std::env::set_var("GST_REGISTRY", work.join("registry.bin"));
            if in_vm() {
                if let Some(system) = vm_system_plugins(&work) {
                    std::env::set_var("GST_PLUGIN_SYSTEM_PATH", system);
                }
                std::env::set_var("GST_REGISTRY_FORK", "no");
            }
            if std::env::var_os("EGL_PLATFORM").is_none() {
                std::env::set_var("EGL_PLATFORM", "surfaceless");
            }
        }
        // This copy's guard first: it fails here, naming the library, rather than as a
        // plugin GStreamer silently could not register.
        pinframe::tensor::cpu_mapping_guard().expect("libpinframe.so.0 for the shared guard");
        gst::init().expect("gst::init");
        assert!(
            gst::ElementFactory::find("pinframeconvert").is_some(),
            "pinframeconvert is not in the registry (GST_PLUGIN_PATH={})",
            dir.display()
        );
    });
}

/// A GL processor, or `None` after saying why (a failure under `CI=true`).
pub fn gl_or_skip(test: &str) -> Option<ImageProcessor> {
    match ImageProcessor::with_backend(Backend::Gl) {
        Ok(p) => Some(p),
        Err(e) if under_ci() => panic!("{test}: GL cannot start under CI: {e}"),
        Err(e) => {
            eprintln!("SKIPPED {test}: GL cannot start here: {e}");
            None
        }
    }
}

/// What a pipeline posted.
#[derive(Debug, Default)]
pub struct BusLog {
    pub errors: Vec<String>,
    pub warnings: Vec<String>,
}

impl BusLog {
    /// Drains `bus`.
    pub fn drain(&mut self, bus: &gst::Bus) {
        while let Some(msg) = bus.pop() {
            self.take(&msg);
        }
    }

    /// Reads `bus` until an error or EOS (or `secs`), keeping every error and warning.
    pub fn until_end(&mut self, bus: &gst::Bus, secs: u64) {
        let deadline = std::time::Instant::now() + Duration::from_secs(secs);
        while let Some(left) = deadline.checked_duration_since(std::time::Instant::now()) {
            let Some(msg) = bus.timed_pop(gst::ClockTime::from_nseconds(left.as_nanos() as u64))
            else {
                break;
            };
            self.take(&msg);
            if matches!(msg.type_(), gst::MessageType::Error | gst::MessageType::Eos) {
                break;
            }
        }
        self.drain(bus);
    }

    fn take(&mut self, msg: &gst::Message) {
        use gst::MessageView;
        match msg.view() {
            MessageView::Error(e) => self.errors.push(format!("{} ({:?})", e.error(), e.debug())),
            MessageView::Warning(w) => {
                self.warnings
                    .push(format!("{} ({:?})", w.error(), w.debug()))
            }
            _ => {}
        }
    }
}

/// A `gst-launch`-style pipeline as a bin (panics with the description if it does not parse).
pub fn launch_bin(desc: &str) -> gst::Bin {
    gst::parse::launch(desc)
        .unwrap_or_else(|e| panic!("{desc}: {e}"))
        .downcast::<gst::Bin>()
        .unwrap()
}

/// The `appsrc name=src` of a pipeline.
pub fn app_src(bin: &gst::Bin) -> gst_app::AppSrc {
    bin.by_name("src")
        .expect("an appsrc named src")
        .downcast::<gst_app::AppSrc>()
        .unwrap()
}

/// The `appsink name=sink` of a pipeline.
pub fn app_sink(bin: &gst::Bin) -> gst_app::AppSink {
    bin.by_name("sink")
        .expect("an appsink named sink")
        .downcast::<gst_app::AppSink>()
        .unwrap()
}

/// Runs a `gst-launch`-style pipeline whose converter is named `conv` and whose last
/// element is `appsink name=sink`; returns every (input buffer, output sample) pair, in
/// order, and what the bus said. Inputs are taken by a probe on the converter's sink pad.
pub fn run_pipeline(desc: &str) -> (gst::Element, Vec<(gst::Buffer, gst::Sample)>, BusLog) {
    init();
    let pipeline = gst::parse::launch(desc).unwrap_or_else(|e| panic!("{desc}: {e}"));
    let bin = pipeline.clone().downcast::<gst::Bin>().unwrap();
    let conv = bin.by_name("conv").expect("an element named conv");
    let sink = bin
        .by_name("sink")
        .expect("an appsink named sink")
        .downcast::<gst_app::AppSink>()
        .unwrap();
    let inputs = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = inputs.clone();
    conv.static_pad("sink")
        .unwrap()
        .add_probe(gst::PadProbeType::BUFFER, move |_, info| {
            if let Some(b) = info.buffer() {
                seen.lock().unwrap().push(b.clone());
            }
            gst::PadProbeReturn::Ok
        });
    let bus = pipeline.bus().unwrap();
    pipeline.set_state(gst::State::Playing).expect("PLAYING");
    let mut samples = Vec::new();
    let mut log = BusLog::default();
    while let Some(s) = sink.try_pull_sample(gst::ClockTime::from_seconds(60)) {
        samples.push(s);
    }
    // Wait for EOS or an error, then stop.
    log.until_end(&bus, 10);
    pipeline.set_state(gst::State::Null).unwrap();
    let inputs = std::mem::take(&mut *inputs.lock().unwrap());
    assert_eq!(
        inputs.len(),
        samples.len(),
        "{desc}: every input gives one output ({:?})",
        log
    );
    (conv, inputs.into_iter().zip(samples).collect(), log)
}

/// The colorimetry pinframe should use for these caps (read independently of the plugin).
pub fn caps_colorimetry(info: &gst_video::VideoInfo) -> Option<Colorimetry> {
    let c = info.colorimetry();
    let m = match c.matrix() {
        VideoColorMatrix::Bt601 => Matrix::Bt601,
        VideoColorMatrix::Bt709 => Matrix::Bt709,
        VideoColorMatrix::Bt2020 => Matrix::Bt2020,
        _ => return None,
    };
    let r = match c.range() {
        VideoColorRange::Range0_255 => Range::Full,
        VideoColorRange::Range16_235 => Range::Limited,
        _ => return None,
    };
    Some(Colorimetry::new(m, r))
}

/// pinframe's format for a GStreamer one (the test's own table).
pub fn pixel_format(v: gst_video::VideoFormat) -> PixelFormat {
    use gst_video::VideoFormat as V;
    match v {
        V::Yuy2 => PixelFormat::Yuyv,
        V::Uyvy => PixelFormat::Uyvy,
        V::Yvyu => PixelFormat::Yvyu,
        V::Vyuy => PixelFormat::Vyuy,
        V::Nv12 => PixelFormat::Nv12,
        V::Nv21 => PixelFormat::Nv21,
        V::Nv16 => PixelFormat::Nv16,
        V::Nv61 => PixelFormat::Nv61,
        V::I420 => PixelFormat::I420,
        V::Yv12 => PixelFormat::Yv12,
        V::Gray8 => PixelFormat::Grey,
        V::Rgb => PixelFormat::Rgb,
        V::Bgr => PixelFormat::Bgr,
        V::Rgba => PixelFormat::Rgba,
        V::Bgra => PixelFormat::Bgra,
        V::Rgbp => PixelFormat::PlanarRgb,
        V::Bgrp => PixelFormat::PlanarBgr,
        V::Gray16Le => PixelFormat::Y16,
        V::P01010le => PixelFormat::P010,
        V::P012Le => PixelFormat::P012,
        V::P016Le => PixelFormat::P016,
        other => panic!("no pinframe format for {other:?}"),
    }
}

/// The GStreamer format of a pinframe one.
pub fn video_format(f: PixelFormat) -> gst_video::VideoFormat {
    try_video_format(f).unwrap_or_else(|| panic!("no GStreamer format for {f}"))
}

/// The GStreamer video/x-raw format of a pinframe one, if GStreamer 1.22 has one (Bayer
/// travels as video/x-bayer; Y10, Y12 and CSI-2 packed RAW have no GStreamer name).
pub fn try_video_format(f: PixelFormat) -> Option<gst_video::VideoFormat> {
    use gst_video::VideoFormat as V;
    [
        V::Yuy2,
        V::Uyvy,
        V::Yvyu,
        V::Vyuy,
        V::Nv12,
        V::Nv21,
        V::Nv16,
        V::Nv61,
        V::I420,
        V::Yv12,
        V::Gray8,
        V::Rgb,
        V::Bgr,
        V::Rgba,
        V::Bgra,
        V::Rgbp,
        V::Bgrp,
        V::Gray16Le,
        V::P01010le,
        V::P012Le,
        V::P016Le,
    ]
    .into_iter()
    .find(|&v| pixel_format(v) == f)
}

/// The input frame of `buf` (caps `caps`) converted by the library with `processor` into
/// `dst_layout`: the reference for what the element produced. Returns the bytes and the
/// library's `ConvertInfo`.
pub fn library_convert(
    processor: &mut ImageProcessor,
    buf: &gst::BufferRef,
    caps: &gst::CapsRef,
    dst_layout: &ImageLayout,
    options: &ConvertOptions,
) -> (Vec<u8>, ConvertInfo) {
    let info = gst_video::VideoInfo::from_caps(caps).unwrap();
    let frame = gst_video::VideoFrameRef::from_buffer_ref_readable(buf, &info).unwrap();
    let format = pixel_format(info.format());
    let n = format.plane_count();
    let planes: Vec<Plane> = (0..n)
        .map(|i| Plane {
            buffer: i,
            offset: 0,
            stride: frame.plane_stride()[i] as usize,
        })
        .collect();
    let bufs: Vec<&[u8]> = (0..n)
        .map(|i| frame.plane_data(i as u32).unwrap())
        .collect();
    let layout = ImageLayout::with_planes(info.width(), info.height(), format, DType::U8, &planes)
        .unwrap()
        .with_colorimetry(caps_colorimetry(&info));
    fn typed<T: Element>(
        p: &mut ImageProcessor,
        bufs: &[&[u8]],
        l: &ImageLayout,
        d: &ImageLayout,
        o: &ConvertOptions,
    ) -> (Vec<u8>, ConvertInfo) {
        let mut out = vec![T::zeroed(); d.allocation_len(0).div_ceil(size_of::<T>())];
        let info = p.convert_buffers(bufs, l, &mut out, d, o).unwrap();
        (bytemuck::cast_slice(&out).to_vec(), info)
    }
    match dst_layout.dtype() {
        DType::U8 => typed::<u8>(processor, &bufs, &layout, dst_layout, options),
        DType::I8 => typed::<i8>(processor, &bufs, &layout, dst_layout, options),
        DType::F16 => typed::<half::f16>(processor, &bufs, &layout, dst_layout, options),
        DType::F32 => typed::<f32>(processor, &bufs, &layout, dst_layout, options),
        d => panic!("no {d} outputs"),
    }
}

/// The layout the element writes for output caps `caps` (with the `layout` property
/// `layout` for tensors): GStreamer's strides for video, tight for tensors (read from the
/// caps here, independently of the plugin).
pub fn output_layout(caps: &gst::CapsRef, layout: Option<PixelFormat>) -> ImageLayout {
    let s = caps.structure(0).unwrap();
    if s.name() == "other/tensors" {
        let dtype = match s.get::<&str>("types").unwrap() {
            "uint8" => DType::U8,
            "int8" => DType::I8,
            "float16" => DType::F16,
            "float32" => DType::F32,
            t => panic!("type {t}"),
        };
        let dims: Vec<u32> = s
            .get::<&str>("dimensions")
            .unwrap()
            .split(':')
            .map(|d| d.parse().unwrap())
            .collect();
        let planar = layout.is_some_and(|l| l.plane_count() == 3) || dims[0] > 4;
        let (format, w, h) = if planar {
            (layout.unwrap_or(PixelFormat::PlanarRgb), dims[0], dims[1])
        } else {
            let f = layout.unwrap_or(match dims[0] {
                1 => PixelFormat::Grey,
                3 => PixelFormat::Rgb,
                4 => PixelFormat::Rgba,
                c => panic!("{c} channels"),
            });
            (f, dims[1], dims[2])
        };
        return ImageLayout::tight(w, h, format, dtype).unwrap();
    }
    let info = gst_video::VideoInfo::from_caps(caps).unwrap();
    let format = pixel_format(info.format());
    let planes: Vec<Plane> = (0..format.plane_count())
        .map(|i| Plane::new(info.offset()[i], info.stride()[i] as usize))
        .collect();
    ImageLayout::with_planes(info.width(), info.height(), format, DType::U8, &planes).unwrap()
}

/// Compares the data bytes (not row padding) of `got` and `want`, both laid out as
/// `layout`; panics with the first difference.
pub fn assert_same_image(got: &[u8], want: &[u8], layout: &ImageLayout, what: &str) {
    for (i, p) in layout.planes().iter().enumerate() {
        let row = layout.plane_row_bytes(i);
        for y in 0..layout.plane_height(i) as usize {
            let at = p.offset + y * p.stride;
            let (g, w) = (&got[at..at + row], &want[at..at + row]);
            if g != w {
                let x = g.iter().zip(w).position(|(a, b)| a != b).unwrap();
                panic!(
                    "{what}: plane {i} row {y} byte {x} differs: element {} library {}",
                    g[x], w[x]
                );
            }
        }
    }
}

/// The `PinframeConvertMeta` of a buffer as (scale, offset, content).
pub fn meta_geometry(buf: &gst::BufferRef) -> ([f64; 2], [i64; 2], [u32; 4], Vec<f64>) {
    let meta = gst::meta::CustomMeta::from_buffer(buf, "PinframeConvertMeta")
        .expect("every output carries a PinframeConvertMeta");
    let s = meta.structure();
    let matrix: Vec<f64> = s
        .get::<gst::Array>("dst-to-src")
        .unwrap()
        .iter()
        .map(|v| v.get::<f64>().unwrap())
        .collect();
    (
        [s.get("scale-x").unwrap(), s.get("scale-y").unwrap()],
        [s.get("offset-x").unwrap(), s.get("offset-y").unwrap()],
        [
            s.get("content-x").unwrap(),
            s.get("content-y").unwrap(),
            s.get("content-width").unwrap(),
            s.get("content-height").unwrap(),
        ],
        matrix,
    )
}

/// Asserts the meta equals the library's `ConvertInfo`.
pub fn assert_meta(buf: &gst::BufferRef, info: &ConvertInfo, what: &str) {
    let (scale, offset, content, m) = meta_geometry(buf);
    assert_eq!(scale, info.scale, "{what}: scale");
    assert_eq!(offset, info.offset, "{what}: offset");
    assert_eq!(content, info.content, "{what}: content");
    let d = info.dst_to_src;
    assert_eq!(
        m,
        vec![d[0][0], d[0][1], d[0][2], d[1][0], d[1][1], d[1][2]],
        "{what}: dst-to-src"
    );
}

/// Waits up to `secs` for a pipeline state change to finish.
pub fn wait_state(e: &gst::Element, secs: u64) -> gst::State {
    let (_, s, _) = e.state(gst::ClockTime::from_seconds(secs));
    s
}

/// A short pause for the streaming thread.
pub fn settle() {
    std::thread::sleep(Duration::from_millis(20));
}
