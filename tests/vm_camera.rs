//! Camera capture in the VM lane's guest: vivid (single-planar `PINFRAME_VM_VIDEO` and
//! multi-planar `PINFRAME_VM_VIDEO_MPLANE`) streaming into pinframe's DMA tensors
//! (DMABUF) and into its own exported buffers (MMAP + EXPBUF). On the host every test is
//! ignored (and prints SKIPPED when forced); `scripts/vm-test --test vm_camera` runs them.
//!
//! Note: Mesa 22.3's kms_swrast/llvmpipe crashes drawing from a dma-buf that is not a
//! DRM buffer (vivid's own exports, dma-heap buffers; the GL backend refuses those there
//! and falls back), so the GL tests here capture in DMABUF mode into GBM buffers of vgem
//! (`DmaRoute::Gbm`), which import zero-copy.
#![cfg(feature = "camera")]
// Some helpers serve only the GL or CLI tests.
#![cfg_attr(
    not(all(feature = "gl", feature = "cli")),
    allow(dead_code, unused_imports)
)]

mod common;
#[path = "common/reference.rs"]
mod reference;

use std::time::Duration;

use pinframe::camera::{BufferMode, Camera, CameraConfig, Frame};
use pinframe::image::FormatFamily;
use pinframe::image::fourcc;
use pinframe::tensor::DmaRoute;
use pinframe::{Backend, Error, ImageProcessor, Memory, PixelFormat, Tensor};

// One Bayer format of bytes and one of 16-bit words, and deep grey: both buffer modes
// and both APIs (raw_formats_gl_and_cpu_agree_on_camera_frames runs every one vivid
// offers, but single-planar DMABUF only).
const FORMATS: [PixelFormat; 10] = [
    PixelFormat::Yuyv,
    PixelFormat::Uyvy,
    PixelFormat::Nv12,
    PixelFormat::Nv21,
    PixelFormat::Nv16,
    PixelFormat::I420,
    PixelFormat::Grey,
    PixelFormat::Rggb8,
    PixelFormat::Bggr10,
    PixelFormat::Y12,
];
const SIZES: [(u32, u32); 2] = [(96, 72), (320, 240)];

fn node(mplane: bool) -> String {
    let var = if mplane {
        "PINFRAME_VM_VIDEO_MPLANE"
    } else {
        "PINFRAME_VM_VIDEO"
    };
    match std::env::var(var) {
        Ok(v) if !v.is_empty() => v,
        _ => panic!("{var} is not set: the guest found no such vivid node"),
    }
}

/// GBM buffers on the first render node (vgem in the guest).
fn gbm() -> DmaRoute {
    DmaRoute::Gbm(String::new())
}

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

/// Turns vivid's on-screen text off so that frames are the bare test pattern (the
/// comparisons below also keep to the bottom rows, away from where the text would be).
fn vivid_osd_off(path: &str) {
    let out = std::process::Command::new("v4l2-ctl")
        .args(["-d", path, "-c", "osd_text_mode=2"])
        .output()
        .expect("v4l2-ctl runs in the guest");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Leaves a vivid node as the other VM tests expect it: on-screen text on, 640x480
/// YUYV with the crop and compose rectangles covering the whole frame (opening a Camera
/// resets them).
fn restore_vivid(path: &str) {
    let out = std::process::Command::new("v4l2-ctl")
        .args(["-d", path, "-c", "osd_text_mode=0"])
        .output()
        .expect("v4l2-ctl runs in the guest");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let config = CameraConfig::new(640, 480, PixelFormat::Yuyv).with_buffer_mode(BufferMode::Mmap);
    drop(Camera::open(path, config).unwrap());
}

/// Checks one frame against what the driver reported for the stream.
fn check_frame(cam: &Camera, frame: &Frame, what: &str) {
    let f = cam.format();
    let layout = frame.layout().expect("frames have a layout");
    assert_eq!(layout, cam.layout(), "{what}: frame layout is the stream's");
    assert_eq!(
        (layout.width(), layout.height()),
        (f.width, f.height),
        "{what}"
    );
    assert_eq!(layout.format(), f.format, "{what}");
    assert_eq!(
        layout.buffer_count(),
        f.sizeimage.len(),
        "{what}: buffers per frame"
    );
    assert_eq!(frame.buffer_count(), f.sizeimage.len(), "{what}");
    for b in 0..layout.buffer_count() {
        // The first plane in each buffer has the driver's bytesperline.
        let first = layout
            .planes()
            .iter()
            .filter(|p| p.buffer == b)
            .min_by_key(|p| p.offset)
            .unwrap();
        assert_eq!(
            first.stride, f.bytesperline[b] as usize,
            "{what}: buffer {b} stride"
        );
        assert!(
            layout.required_len(b) <= f.sizeimage[b] as usize,
            "{what}: buffer {b}"
        );
        assert!(
            frame.plane_bytesused(b) >= layout.required_len(b)
                && frame.plane_bytesused(b) <= frame.buffer_len(b).unwrap(),
            "{what}: buffer {b} bytesused {} for a layout of {} bytes",
            frame.plane_bytesused(b),
            layout.required_len(b)
        );
    }
    assert_eq!(frame.memory(), Memory::Dma, "{what}: frames are dma-bufs");
    if f.format.is_yuv() {
        assert!(f.colorimetry.is_some(), "{what}: colorimetry reported");
        assert_eq!(layout.colorimetry(), f.colorimetry, "{what}");
    }
    // vivid fills the whole frame, and its limited-range YUV pattern has no zero samples
    // (GREY is full range: only its last bar, black, is 0; a Bayer row has zeros in every
    // bar but white, which has none): the last row of the first plane shows the driver
    // wrote the frame to its end. Samples, not bytes: a 16-bit word may have a zero byte.
    let map = frame.map().unwrap();
    let p = layout.planes()[0];
    let last = p.offset + p.stride * (layout.plane_height(0) as usize - 1);
    let row = &map.buffer_bytes(p.buffer)[last..last + layout.plane_row_bytes(0)];
    let mut samples: Vec<u16> = match f.format.storage().group() {
        (1, 2) => row
            .chunks_exact(2)
            .map(|w| u16::from_le_bytes([w[0], w[1]]))
            .collect(),
        _ => row.iter().map(|&b| u16::from(b)).collect(),
    };
    let n = samples.len();
    match f.format.family() {
        FormatFamily::Grey | FormatFamily::DeepGrey => samples.truncate(n * 7 / 8 - 2),
        FormatFamily::Bayer => samples.truncate(n / 8 - 2),
        _ => {}
    }
    assert!(
        samples.iter().all(|&s| s != 0),
        "{what}: the last row is not fully written: {:?}",
        &samples[..samples.len().min(32)]
    );
}

fn capture_matrix(mplane: bool, fourccs: &[(PixelFormat, Option<u32>)]) {
    let path = node(mplane);
    // The first DMA allocation opens the process's shared render-node fd (for PRIME
    // attachments); count fds after it.
    drop(Tensor::<u8>::new(&[4096], Some(Memory::Dma)).unwrap());
    let fds = open_fds();
    for &(format, code) in fourccs {
        for (w, h) in SIZES {
            for mode in [BufferMode::Dmabuf, BufferMode::Mmap] {
                let mut config = CameraConfig::new(w, h, format)
                    .with_buffer_mode(mode)
                    .with_buffers(3);
                if let Some(c) = code {
                    config = config.with_fourcc(c);
                }
                let what = format!(
                    "{path} {format}{} {w}x{h} {mode}",
                    code.map(|c| format!(" ({})", pinframe::image::fourcc_to_string(c)))
                        .unwrap_or_default()
                );
                let mut cam = Camera::open(&path, config).unwrap_or_else(|e| panic!("{what}: {e}"));
                assert_eq!(cam.buffer_mode(), mode, "{what}");
                assert_eq!(cam.format().multi_planar_api, mplane, "{what}");
                if let Some(c) = code {
                    assert_eq!(cam.format().fourcc, c, "{what}");
                }
                assert_eq!((cam.format().width, cam.format().height), (w, h), "{what}");
                let mut last = None;
                for _ in 0..3 {
                    let repeats = cam.stats().repeated;
                    let frame = cam.next_frame().unwrap_or_else(|e| panic!("{what}: {e}"));
                    check_frame(&cam, &frame, &what);
                    if let Some(l) = last {
                        // vivid repeats a number when its thread ticks twice in one frame
                        // period; the camera counts that as `repeated`, and only that
                        // may keep the number where it was.
                        let counted_repeat = cam.stats().repeated == repeats + 1;
                        assert!(
                            frame.sequence() > l || (frame.sequence() == l && counted_repeat),
                            "{what}: sequence grows ({l} then {}, repeats counted {})",
                            frame.sequence(),
                            cam.stats().repeated - repeats
                        );
                    }
                    last = Some(frame.sequence());
                }
                eprintln!("ok {what}: {}", cam.format());
            }
        }
    }
    assert_eq!(open_fds(), fds, "every camera closed all its fds");
    restore_vivid(&path);
}

#[test]
#[ignore = "VM lane: runs in the guest via scripts/vm-test"]
fn captures_every_format_single_planar_both_modes() {
    if common::skip_unless_vm("captures_every_format_single_planar_both_modes") {
        return;
    }
    let formats: Vec<_> = FORMATS.iter().map(|&f| (f, None)).collect();
    capture_matrix(false, &formats);
}

#[test]
#[ignore = "VM lane: runs in the guest via scripts/vm-test"]
fn captures_every_format_multi_planar_both_modes() {
    if common::skip_unless_vm("captures_every_format_multi_planar_both_modes") {
        return;
    }
    let mut formats: Vec<_> = FORMATS.iter().map(|&f| (f, None)).collect();
    // One buffer per plane: NM12, NM21, NM16, YM12.
    formats.extend([
        (PixelFormat::Nv12, Some(fourcc(b"NM12"))),
        (PixelFormat::Nv21, Some(fourcc(b"NM21"))),
        (PixelFormat::Nv16, Some(fourcc(b"NM16"))),
        (PixelFormat::I420, Some(fourcc(b"YM12"))),
    ]);
    capture_matrix(true, &formats);
}

/// The luma of the same test pattern is the same in every YUV format; GREY shows the
/// same bars.
#[test]
#[ignore = "VM lane: runs in the guest via scripts/vm-test"]
fn luma_agrees_across_formats() {
    if common::skip_unless_vm("luma_agrees_across_formats") {
        return;
    }
    let path = node(false);
    vivid_osd_off(&path);
    let (w, h) = (320u32, 240u32);
    let luma_rows = |format: PixelFormat| -> Vec<u8> {
        let mut cam = Camera::open(&path, CameraConfig::new(w, h, format)).unwrap();
        let frame = cam.next_frame().unwrap();
        let layout = *frame.layout().unwrap();
        let map = frame.map().unwrap();
        let bytes = map.buffer_bytes(0);
        let p = layout.planes()[0];
        let (step, first) = match format {
            PixelFormat::Yuyv => (2, 0),
            PixelFormat::Uyvy => (2, 1),
            _ => (1, 0),
        };
        let mut out = Vec::new();
        for y in (h * 3 / 4)..h {
            let row = &bytes[p.offset + y as usize * p.stride..];
            out.extend((0..w as usize).map(|x| row[first + x * step]));
        }
        out
    };
    let reference = luma_rows(PixelFormat::Yuyv);
    assert!(
        reference.iter().all(|&y| y >= 16),
        "YUYV frame fully written"
    );
    // GREY: the bars' brightness falls from left (white) to right (black), as the
    // YUV luma does.
    let grey = luma_rows(PixelFormat::Grey);
    let centres = |rows: &[u8]| -> Vec<u8> {
        (0..8)
            .map(|k| rows[k * w as usize / 8 + w as usize / 16])
            .collect()
    };
    let (gc, yc) = (centres(&grey), centres(&reference));
    eprintln!("bar centres: GREY {gc:?}, YUYV luma {yc:?}");
    for c in [&gc, &yc] {
        assert!(
            c.windows(2).all(|p| p[0] > p[1]),
            "bar brightness falls: {c:?}"
        );
    }
    for format in [
        PixelFormat::Uyvy,
        PixelFormat::Nv12,
        PixelFormat::Nv16,
        PixelFormat::I420,
    ] {
        let got = luma_rows(format);
        let worst = got
            .iter()
            .zip(&reference)
            .map(|(&a, &b)| (a as i32 - b as i32).abs())
            .max()
            .unwrap();
        assert!(
            worst <= 1,
            "{format}: luma differs from YUYV's by up to {worst}"
        );
    }
    restore_vivid(&path);
}

fn assert_bars(rgb: &[u8], w: usize, h: usize, tolerance: i32, what: &str) {
    let y = h * 7 / 8;
    for (k, want) in reference::BARS_75_RGB.iter().enumerate() {
        let x = k * w / 8 + w / 16;
        let o = (y * w + x) * 3;
        let got = [rgb[o], rgb[o + 1], rgb[o + 2]];
        for c in 0..3 {
            assert!(
                (got[c] as i32 - want[c] as i32).abs() <= tolerance,
                "{what}: bar {k} at ({x},{y}) is {got:?}, expected about {want:?}"
            );
        }
    }
}

/// camera → CPU → RGB shows the colour bars; camera → GL (dma-buf import) → RGB equals
/// camera → CPU → RGB within ±2.
#[cfg(feature = "gl")]
#[test]
#[ignore = "VM lane: runs in the guest via scripts/vm-test"]
fn gl_and_cpu_agree_on_camera_frames() {
    if common::skip_unless_vm("gl_and_cpu_agree_on_camera_frames") {
        return;
    }
    let mut cpu = ImageProcessor::with_backend(Backend::Cpu).unwrap();
    let mut gl = ImageProcessor::with_backend(Backend::Gl).unwrap();
    for (mplane, format) in [
        (false, PixelFormat::Yuyv),
        (false, PixelFormat::Nv12),
        (false, PixelFormat::I420),
        (true, PixelFormat::Nv16),
        (false, PixelFormat::Grey),
    ] {
        let path = node(mplane);
        vivid_osd_off(&path);
        // 320x240: vivid's scaler shrinks its 720x576 picture by at most 4x, so at this
        // size the whole picture (all eight bars) is in the frame.
        let config = CameraConfig::new(320, 240, format)
            .with_buffer_mode(BufferMode::Dmabuf)
            .with_dma_route(gbm());
        let mut cam = Camera::open(&path, config).unwrap();
        let mut a = Tensor::<u8>::image(128, 96, PixelFormat::Rgb, Some(Memory::Heap)).unwrap();
        let mut b = Tensor::<u8>::image(128, 96, PixelFormat::Rgb, Some(Memory::Heap)).unwrap();
        for _ in 0..2 {
            let frame = cam.next_frame().unwrap();
            cpu.convert(&frame, &mut a).unwrap();
            gl.convert(&frame, &mut b).unwrap();
            let (ma, mb) = (a.map().unwrap(), b.map().unwrap());
            let worst = ma
                .iter()
                .zip(mb.iter())
                .map(|(&x, &y)| (x as i32 - y as i32).abs())
                .max()
                .unwrap();
            assert!(worst <= 2, "{format}: GL and CPU differ by up to {worst}");
            if format != PixelFormat::Grey {
                assert_bars(&ma, 128, 96, 8, &format!("{format} via CPU"));
            }
        }
    }
    assert!(gl.stats().imports > 0, "GL imported the camera's dma-bufs");
    assert_eq!(gl.stats().uploads, 0, "no frame was uploaded by copy");
    restore_vivid(&node(false));
    restore_vivid(&node(true));
}

/// The formats vivid offers on `path` that are RAW (Bayer) or deeper than 8 bits (Y1x,
/// P01x) and that pinframe converts, in the driver's order.
fn raw_and_deep_formats(path: &str) -> Vec<PixelFormat> {
    let offered = pinframe::camera::list_formats(path).unwrap();
    let all: Vec<String> = offered
        .iter()
        .map(|f| pinframe::image::fourcc_to_string(f.fourcc))
        .collect();
    eprintln!("{path} offers {} formats: {}", all.len(), all.join(" "));
    let raw: Vec<PixelFormat> = offered
        .iter()
        .filter_map(|f| f.format)
        .filter(|f| {
            matches!(
                f.family(),
                FormatFamily::Bayer | FormatFamily::DeepGrey | FormatFamily::SemiPlanarYuv16
            )
        })
        .collect();
    let names: Vec<&str> = raw.iter().map(|f| f.name()).collect();
    eprintln!("RAW or deep ones pinframe converts: {}", names.join(" "));
    raw
}

/// The RAW test's destination. Small because llvmpipe under TCG spends about 150 µs of
/// guest time per destination texel of a Bayer source (a Malvar-He-Cutler demosaic for
/// each bilinear tap): 1.5 s a frame at 128x96. 48x36 still gives each bar 6 pixels, and
/// its bilinear taps (6.7 source pixels apart) fall on both rows and columns of each
/// CFA tile.
const RAW_DST: (usize, usize) = (48, 36);

/// What one format gave: the CPU's RGB of the last frame, the largest GL-vs-CPU
/// difference over all frames, and the codes of a 2x2 tile in the white bar's last rows
/// (printed: how vivid scales its 8-bit pattern to deeper formats).
#[cfg(feature = "gl")]
struct Converted {
    cpu: Vec<u8>,
    worst: i32,
    white_tile: [u32; 4],
}

#[cfg(feature = "gl")]
fn cpu_and_gl_rgb(
    cam: &mut Camera,
    cpu: &mut ImageProcessor,
    gl: &mut ImageProcessor,
    frames: usize,
    what: &str,
) -> Converted {
    let (w, h) = RAW_DST;
    let image = || Tensor::<u8>::image(w as u32, h as u32, PixelFormat::Rgb, Some(Memory::Heap));
    let (mut a, mut b) = (image().unwrap(), image().unwrap());
    let mut worst = 0;
    let mut white_tile = [0; 4];
    for _ in 0..frames {
        let frame = cam.next_frame().unwrap_or_else(|e| panic!("{what}: {e}"));
        check_frame(cam, &frame, what);
        cpu.convert(&frame, &mut a)
            .unwrap_or_else(|e| panic!("{what} via CPU: {e}"));
        gl.convert(&frame, &mut b)
            .unwrap_or_else(|e| panic!("{what} via GL: {e}"));
        let (ma, mb) = (a.map().unwrap(), b.map().unwrap());
        let diff = ma
            .iter()
            .zip(mb.iter())
            .map(|(&x, &y)| (x as i32 - y as i32).abs());
        worst = worst.max(diff.max().unwrap());

        let layout = *frame.layout().unwrap();
        let p = layout.planes()[0];
        let map = frame.map().unwrap();
        let bytes = map.buffer_bytes(p.buffer);
        let wide = layout.format().storage().group() == (1, 2);
        let code = |x: usize, y: usize| -> u32 {
            let o = p.offset + y * p.stride;
            if wide {
                u32::from(u16::from_le_bytes([bytes[o + 2 * x], bytes[o + 2 * x + 1]]))
            } else {
                u32::from(bytes[o + x])
            }
        };
        let y = layout.height() as usize - 2;
        white_tile = [code(16, y), code(17, y), code(16, y + 1), code(17, y + 1)];
    }
    let cpu = a.map().unwrap().to_vec();
    Converted {
        cpu,
        worst,
        white_tile,
    }
}

/// The centre of each of the eight bars, on the row `assert_bars` reads.
#[cfg(feature = "gl")]
fn bar_centres(rgb: &[u8], w: usize, h: usize) -> Vec<[u8; 3]> {
    let y = h * 7 / 8;
    (0..8)
        .map(|k| {
            let o = (y * w + k * w / 8 + w / 16) * 3;
            [rgb[o], rgb[o + 1], rgb[o + 2]]
        })
        .collect()
}

/// Every RAW and deep format vivid offers, captured into GBM dma-bufs: camera → GL
/// (dma-buf import; the shader unpacks the CFA and the 16-bit words) equals camera → CPU
/// within ±2, and the CPU's plain demosaic (the default `Isp`: no black level, unit
/// gains, linear) gives vivid's colour bars within one code. vivid mosaics the same
/// full-range R'G'B' bars it sends as RGB (75% = 191, black = 0: no black level or range
/// to undo); its deeper Bayer codes for 191 are 767 (10 bits), 3071 (12) and 49087 (16),
/// which read back as 191. Its Y10/Y12/Y16 are GREY's codes shifted up over zeros (GREY's
/// 190 is 760 in Y10, 48640 in Y16), which read back up to one code darker than GREY
/// (189.4): the deep grey pictures are compared with GREY's within ±1.
#[cfg(feature = "gl")]
#[test]
#[ignore = "VM lane: runs in the guest via scripts/vm-test"]
fn raw_formats_gl_and_cpu_agree_on_camera_frames() {
    if common::skip_unless_vm("raw_formats_gl_and_cpu_agree_on_camera_frames") {
        return;
    }
    let started = std::time::Instant::now();
    let path = node(false);
    let raw = raw_and_deep_formats(&path);
    let mut missing = Vec::new();
    if !raw.contains(&PixelFormat::Rggb8) {
        missing.push("rggb8 (RGGB)");
    }
    if !raw
        .iter()
        .any(|f| f.family() == FormatFamily::Bayer && f.storage().bits() > 8)
    {
        missing.push("any Bayer format of 10 bits or more");
    }
    if !missing.is_empty() {
        let msg = format!("vivid on {path} does not offer {}", missing.join(" nor "));
        assert!(!common::under_ci(), "{msg} (CI=true)");
        eprintln!("SKIPPED part of raw_formats_gl_and_cpu_agree_on_camera_frames: {msg}");
    }
    vivid_osd_off(&path);
    let mut cpu = ImageProcessor::with_backend(Backend::Cpu).unwrap();
    let mut gl = ImageProcessor::with_backend(Backend::Gl).unwrap();
    let open = |format| {
        // 320x240: as in gl_and_cpu_agree_on_camera_frames, the whole picture (all eight
        // bars) is in the frame at this size.
        let config = CameraConfig::new(320, 240, format)
            .with_buffer_mode(BufferMode::Dmabuf)
            .with_dma_route(gbm())
            .with_buffers(2);
        Camera::open(&path, config).unwrap_or_else(|e| panic!("{format}: {e}"))
    };
    const FRAMES: usize = 2;
    let (w, h) = RAW_DST;
    // The bottom quarter, where vivid's picture is only the bars (as in
    // luma_agrees_across_formats).
    let bottom = (h * 3 / 4) * w * 3;
    let mut grey = None;
    for &format in &raw {
        let what = format!("{path} {format} 320x240");
        let t = std::time::Instant::now();
        let mut cam = open(format);
        assert_eq!(cam.format().format, format, "{what}");
        // Two frames: both capture buffers, so both are imported.
        let got = cpu_and_gl_rgb(&mut cam, &mut cpu, &mut gl, FRAMES, &what);
        drop(cam);
        eprintln!(
            "{format}: GL-CPU max difference {}, white tile codes {:?}, CPU bars {:?} ({:?})",
            got.worst,
            got.white_tile,
            bar_centres(&got.cpu, w, h),
            t.elapsed()
        );
        assert!(
            got.worst <= 2,
            "{what}: GL and CPU differ by up to {}",
            got.worst
        );
        if format.family() == FormatFamily::DeepGrey {
            // GREY through the CPU only: gl_and_cpu_agree_on_camera_frames covers it on GL,
            // and its program's first draw costs seconds of guest time.
            let grey = grey.get_or_insert_with(|| {
                let mut cam = open(PixelFormat::Grey);
                let frame = cam.next_frame().unwrap();
                let mut t =
                    Tensor::<u8>::image(w as u32, h as u32, PixelFormat::Rgb, None).unwrap();
                cpu.convert(&frame, &mut t).unwrap();
                t.map().unwrap().to_vec()
            });
            let off = got.cpu[bottom..]
                .iter()
                .zip(&grey[bottom..])
                .map(|(&x, &y)| (x as i32 - y as i32).abs())
                .max()
                .unwrap();
            assert!(
                off <= 1,
                "{what}: differs from GREY's picture by up to {off}"
            );
        } else {
            assert_bars(&got.cpu, w, h, 1, &format!("{what} via CPU"));
        }
    }
    let stats = gl.stats();
    eprintln!(
        "{} RAW/deep formats in {:?}, GL {stats:?}",
        raw.len(),
        started.elapsed()
    );
    // Each frame came in a buffer GL had not seen (a new camera for each format), and
    // GL drew every one itself from its dma-buf.
    assert_eq!(
        stats.imports as usize,
        FRAMES * raw.len(),
        "GL imported every frame's dma-buf"
    );
    assert_eq!(stats.uploads, 0, "no frame was uploaded by copy");
    assert_eq!(stats.cpu_fallbacks, 0, "GL converted every frame itself");
    restore_vivid(&path);
}

/// 1,000 frames through GL: after the first round of buffers, no new EGL image is
/// created and the fd count does not move.
#[cfg(feature = "gl")]
#[test]
#[ignore = "VM lane: runs in the guest via scripts/vm-test"]
fn thousand_frames_steady_state() {
    if common::skip_unless_vm("thousand_frames_steady_state") {
        return;
    }
    let path = node(false);
    let config = CameraConfig::new(96, 72, PixelFormat::Yuyv)
        .with_buffer_mode(BufferMode::Dmabuf)
        .with_dma_route(gbm())
        .with_fps(60);
    let mut cam = Camera::open(&path, config).unwrap();
    let mut gl = ImageProcessor::with_backend(Backend::Gl).unwrap();
    let mut dst = Tensor::<f32>::image(
        64,
        64,
        PixelFormat::PlanarRgb,
        pinframe::MemoryRequest::Device,
    )
    .unwrap();
    let warmup = cam.buffer_count() * 2;
    for _ in 0..warmup {
        let frame = cam.next_frame().unwrap();
        gl.convert(&frame, &mut dst).unwrap();
    }
    let created = pinframe::testing::gl_image_counters().created;
    let imports = gl.stats().imports;
    let fds = open_fds();
    let start = std::time::Instant::now();
    for i in 0..1000 {
        let frame = cam
            .next_frame()
            .unwrap_or_else(|e| panic!("frame {i}: {e}"));
        gl.convert(&frame, &mut dst).unwrap();
    }
    let took = start.elapsed();
    assert_eq!(
        pinframe::testing::gl_image_counters().created,
        created,
        "no new EGL images"
    );
    assert_eq!(gl.stats().imports, imports, "no new imports");
    assert_eq!(open_fds(), fds, "fd count unchanged");
    eprintln!(
        "1000 frames in {took:?} ({:.1} fps), {} dropped, stats {:?}",
        1000.0 / took.as_secs_f64(),
        cam.dropped_frames(),
        gl.stats()
    );
    drop(cam);
    restore_vivid(&path);
}

/// Holding every buffer gives the documented error at once; giving one back recovers;
/// frames the driver could not deliver meanwhile are counted as dropped.
#[test]
#[ignore = "VM lane: runs in the guest via scripts/vm-test"]
fn holding_all_buffers_errors_and_gaps_count_as_dropped() {
    if common::skip_unless_vm("holding_all_buffers_errors_and_gaps_count_as_dropped") {
        return;
    }
    for mode in [BufferMode::Dmabuf, BufferMode::Mmap] {
        let path = node(false);
        let config = CameraConfig::new(96, 72, PixelFormat::Nv12)
            .with_buffer_mode(mode)
            .with_buffers(2);
        let mut cam = Camera::open(&path, config).unwrap();
        let n = cam.buffer_count();
        let held: Vec<Frame> = (0..n).map(|_| cam.next_frame().unwrap()).collect();
        let start = std::time::Instant::now();
        let err = cam.next_frame().unwrap_err();
        // At once, not after the 5 s frame timeout (3 s: TCG on a busy host stalls the
        // guest for a few hundred ms now and then, and the VM lane shares the machine
        // with the aarch64 lane's build).
        assert!(
            start.elapsed() < Duration::from_secs(3),
            "the error comes at once"
        );
        assert!(matches!(err, Error::AllBuffersHeld { .. }), "{err}");
        assert!(
            err.to_string()
                .contains(&format!("all {n} capture buffers are held")),
            "{err}"
        );
        let before = cam.dropped_frames();
        std::thread::sleep(Duration::from_millis(500));
        drop(held);
        let frame = cam.next_frame().unwrap();
        check_frame(&cam, &frame, &format!("{mode} after holding"));
        assert!(
            cam.dropped_frames() >= before + 5,
            "{mode}: ~15 frames came while every buffer was held; counted {}",
            cam.dropped_frames() - before
        );
    }
    restore_vivid(&node(false));
}

/// Asking a device for a format it does not offer fails at open, listing what it offers.
#[test]
#[ignore = "VM lane: runs in the guest via scripts/vm-test"]
fn unsupported_format_fails_at_open_with_the_list() {
    if common::skip_unless_vm("unsupported_format_fails_at_open_with_the_list") {
        return;
    }
    let path = node(false);
    let err = Camera::open(
        &path,
        CameraConfig::new(96, 72, PixelFormat::Rgba).with_fourcc(fourcc(b"MJPG")),
    )
    .unwrap_err();
    let msg = err.to_string();
    // Bayer is listed as convertible too.
    for listed in ["yuyv (YUYV)", "nv12 (NV12)", "rggb8 (RGGB)"] {
        assert!(msg.contains(listed), "{listed} not in: {msg}");
    }
    let formats = pinframe::camera::list_formats(&path).unwrap();
    assert!(formats.iter().any(|f| f.format == Some(PixelFormat::Yuyv)));
    assert!(
        formats.iter().any(|f| f.format.is_none()),
        "vivid also offers formats pinframe does not convert"
    );
}

/// `pinframe capture` writes a PNG of vivid's colour bars, and a raw frame of the right
/// size.
#[cfg(feature = "cli")]
#[test]
#[ignore = "VM lane: runs in the guest via scripts/vm-test"]
fn pinframe_capture_writes_the_test_pattern() {
    if common::skip_unless_vm("pinframe_capture_writes_the_test_pattern") {
        return;
    }
    let path = node(false);
    vivid_osd_off(&path);
    let dir = std::env::temp_dir().join(format!("pinframe-capture-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let png = dir.join("bars.png");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_pinframe"))
        .args([
            "capture", "--device", &path, "--size", "320x240", "--format", "nv12",
        ])
        .args(["--frames", "3", "--output"])
        .arg(&png)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("3 frame(s)") && stdout.contains("320x240 nv12"),
        "{stdout}"
    );
    let img = image::open(&png).unwrap().to_rgb8();
    assert_eq!(img.dimensions(), (320, 240));
    assert_bars(img.as_raw(), 320, 240, 8, "pinframe capture PNG");

    let raw = dir.join("frame.yuyv");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_pinframe"))
        .args([
            "capture", "--device", &path, "--size", "96x72", "--format", "yuyv", "--output",
        ])
        .arg(&raw)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(std::fs::metadata(&raw).unwrap().len(), 96 * 72 * 2);

    let bad = std::process::Command::new(env!("CARGO_BIN_EXE_pinframe"))
        .args(["capture", "--device", "/dev/null", "--output"])
        .arg(dir.join("x.png"))
        .output()
        .unwrap();
    assert!(!bad.status.success());
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(
        err.contains("not a V4L2 device") && err.lines().count() == 1,
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
    restore_vivid(&path);
}

/// A camera that vanishes (its driver unbound) gives errors, not a hang or a panic, and
/// frames still held can be dropped. Runs last (`zz_`): it unbinds and rebinds the
/// multi-planar vivid instance.
#[test]
#[ignore = "VM lane: runs in the guest via scripts/vm-test"]
fn zz_vanished_device_is_an_error() {
    if common::skip_unless_vm("zz_vanished_device_is_an_error") {
        return;
    }
    let path = node(true);
    let name = std::path::Path::new(&path).file_name().unwrap().to_owned();
    let sys = std::path::Path::new("/sys/class/video4linux")
        .join(&name)
        .join("device");
    let platform = std::fs::canonicalize(&sys).unwrap();
    let id = platform.file_name().unwrap().to_str().unwrap().to_owned();
    let driver = "/sys/bus/platform/drivers/vivid";

    let mut cam = Camera::open(
        &path,
        CameraConfig::new(96, 72, PixelFormat::Yuyv).with_buffers(2),
    )
    .unwrap();
    let held = cam.next_frame().unwrap();
    std::fs::write(format!("{driver}/unbind"), &id).unwrap();
    let start = std::time::Instant::now();
    let first = cam.next_frame_timeout(Duration::from_secs(3));
    let took = start.elapsed();
    // The frame the application still holds stays readable; dropping it (its requeue
    // fails) is quiet.
    assert!(held.map().is_ok());
    drop(held);
    let second = cam.next_frame_timeout(Duration::from_secs(1));
    drop(cam);
    // Put the device back for whoever runs next, and wait for its node.
    std::fs::write(format!("{driver}/bind"), &id).unwrap();
    let back = std::time::Instant::now();
    while !std::path::Path::new(&path).exists() && back.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(100));
    }
    let err = first.expect_err("a vanished camera gives an error");
    eprintln!(
        "vanished: {err} (after {took:?}); then: {:?}",
        second.as_ref().err()
    );
    assert_eq!(err.kind(), pinframe::ErrorKind::Disconnected, "{err}");
    // Within the 3 s timeout and a generous margin for a busy host.
    assert!(took < Duration::from_secs(8), "no hang: {took:?}");
    let second = second.expect_err("and stays so");
    assert_eq!(second.kind(), pinframe::ErrorKind::Disconnected, "{second}");
    restore_vivid(&path);
}
