//! Host tests of the camera interface through the synthetic camera, and bad input to
//! `Camera::open`.
#![cfg(feature = "camera")]

use std::time::Duration;

use pinframe::camera::{BufferMode, Camera, CameraConfig};
use pinframe::{
    Access, Backend, ConvertOptions, Error, Fit, ImageProcessor, Memory, PixelFormat, Tensor,
};

fn synthetic(format: PixelFormat, w: u32, h: u32, buffers: u32) -> Camera {
    Camera::synthetic(CameraConfig::new(w, h, format).with_buffers(buffers)).unwrap()
}

#[test]
fn frames_carry_layout_colorimetry_and_sequence() {
    for format in [PixelFormat::Yuyv, PixelFormat::Nv12] {
        let mut cam = synthetic(format, 320, 240, 4);
        assert!(cam.is_synthetic());
        assert_eq!(cam.buffer_count(), 4);
        let f = cam.format().clone();
        assert_eq!((f.width, f.height, f.format), (320, 240, format));
        assert_eq!(f.layout.format(), format);
        assert_eq!(f.colorimetry, Some(pinframe::Colorimetry::BT601_LIMITED));
        for seq in 0..10 {
            let frame = cam.next_frame().unwrap();
            assert_eq!(frame.sequence(), seq);
            assert_eq!(frame.layout(), Some(&f.layout));
            assert_eq!(frame.bytesused(), f.layout.required_len(0));
            assert!(matches!(frame.memory(), Memory::Dma | Memory::Shm));
            assert!(frame.fd().is_some(), "synthetic frames are fd-backed");
        }
        assert_eq!(cam.stats().frames, 10);
        assert_eq!(cam.dropped_frames(), 0);
    }
}

#[test]
fn mmap_mode_gives_memfd_frames() {
    let mut cam = Camera::synthetic(
        CameraConfig::new(64, 32, PixelFormat::Nv12).with_buffer_mode(BufferMode::Mmap),
    )
    .unwrap();
    assert_eq!(cam.buffer_mode(), BufferMode::Mmap);
    assert_eq!(cam.next_frame().unwrap().memory(), Memory::Shm);
}

#[test]
fn holding_every_buffer_is_an_error_and_dropping_one_recovers() {
    let mut cam = synthetic(PixelFormat::Yuyv, 64, 32, 3);
    let held: Vec<_> = (0..3).map(|_| cam.next_frame().unwrap()).collect();
    let mut indices: Vec<usize> = held.iter().map(|f| f.buffer_index()).collect();
    indices.sort();
    assert_eq!(
        indices,
        vec![0, 1, 2],
        "held frames occupy distinct buffers"
    );
    assert_eq!(cam.held_buffers(), 3);
    let err = cam.next_frame().unwrap_err();
    assert!(matches!(err, Error::AllBuffersHeld { .. }), "{err}");
    let msg = err.to_string();
    assert!(msg.contains("all 3 capture buffers are held"), "{msg}");
    let mut held = held;
    let freed = held.remove(1).buffer_index();
    assert_eq!(cam.held_buffers(), 2);
    let next = cam.next_frame().unwrap();
    assert_eq!(next.buffer_index(), freed);
    assert_eq!(next.sequence(), 3);
}

#[test]
fn frames_outlive_the_camera_and_cross_threads() {
    let mut cam = synthetic(PixelFormat::Yuyv, 64, 32, 2);
    let frame = cam.next_frame().unwrap();
    let first = frame.map().unwrap().as_bytes().to_vec();
    drop(cam);
    let handle = std::thread::spawn(move || {
        let bytes = frame.map().unwrap().as_bytes().to_vec();
        drop(frame);
        bytes
    });
    assert_eq!(handle.join().unwrap(), first);
}

#[test]
fn the_pattern_moves_between_frames() {
    let mut cam = synthetic(PixelFormat::Nv12, 128, 96, 2);
    let a = cam.next_frame().unwrap().map().unwrap().as_bytes().to_vec();
    let b = cam.next_frame().unwrap().map().unwrap().as_bytes().to_vec();
    assert_ne!(a, b);
}

#[test]
fn fps_paces_the_synthetic_camera() {
    let mut cam =
        Camera::synthetic(CameraConfig::new(64, 32, PixelFormat::Yuyv).with_fps(50)).unwrap();
    // Frame n is due n * 20 ms after the start, and is stamped when drawn: never early.
    let mut stamps = Vec::new();
    for _ in 0..6 {
        stamps.push(cam.next_frame().unwrap().timestamp());
    }
    for (n, t) in stamps.iter().enumerate() {
        assert!(
            *t >= Duration::from_millis(20 * n as u64),
            "frame {n} at {t:?}"
        );
    }
    assert_eq!(cam.format().fps(), Some(50.0));
    // A wait shorter than the time to the next due frame is a timeout, like a device's
    // (at 1 fps the second frame is due a second after the first), and held frames are
    // untouched by it.
    let mut slow =
        Camera::synthetic(CameraConfig::new(64, 32, PixelFormat::Yuyv).with_fps(1)).unwrap();
    let first = slow.next_frame().unwrap();
    let e = slow
        .next_frame_timeout(Duration::from_millis(10))
        .unwrap_err();
    assert_eq!(e.kind(), pinframe::ErrorKind::Timeout, "{e}");
    assert_eq!(slow.held_buffers(), 1);
    drop(first);
    assert_eq!(slow.stats().frames, 1);
}

#[test]
fn converting_a_frame_shows_the_colour_bars() {
    bars_of(PixelFormat::Yuyv, 3);
}

/// A synthetic RAW camera mosaics the same pattern: every Bayer order and storage comes out
/// as the bars, exactly inside each bar (the demosaic of a flat patch is exact and the
/// codes reach the white level), through the default ISP.
#[test]
fn a_synthetic_bayer_camera_shows_the_colour_bars() {
    for format in [
        PixelFormat::Rggb8,
        PixelFormat::Bggr10,
        PixelFormat::Grbg12P,
        PixelFormat::Gbrg10P,
        PixelFormat::Rggb16,
    ] {
        bars_of(format, 0);
    }
}

/// The first frame of a 320x240 synthetic `format` camera, converted to RGB on the CPU,
/// shows the eight bars within `tolerance` and the grey ramp below them.
fn bars_of(format: PixelFormat, tolerance: i32) {
    let mut cam = synthetic(format, 320, 240, 2);
    assert_eq!(cam.format().format, format);
    let mut proc = ImageProcessor::with_backend(Backend::Cpu).unwrap();
    let mut dst = Tensor::<u8>::image(320, 240, PixelFormat::Rgb, Some(Memory::Heap)).unwrap();
    let frame = cam.next_frame().unwrap();
    proc.convert(&frame, &mut dst).unwrap();
    let map = dst.map().unwrap();
    let px = |x: usize, y: usize| {
        let o = (y * 320 + x) * 3;
        [map[o], map[o + 1], map[o + 2]]
    };
    // Frame 0: bars of 40 pixels (white yellow cyan green magenta red blue black) in the
    // top two thirds; the box sits at the top-left corner, so sample row 100.
    let bars: [[u8; 3]; 8] = [
        [255, 255, 255],
        [255, 255, 0],
        [0, 255, 255],
        [0, 255, 0],
        [255, 0, 255],
        [255, 0, 0],
        [0, 0, 255],
        [0, 0, 0],
    ];
    for (k, want) in bars.iter().enumerate() {
        let got = px(k * 40 + 20, 100);
        for c in 0..3 {
            assert!(
                (got[c] as i32 - want[c] as i32).abs() <= tolerance,
                "{format} bar {k}: got {got:?}, want {want:?}"
            );
        }
    }
    // Bottom: a grey ramp, dark on the left and bright on the right.
    assert!(px(2, 230)[0] < 10 && px(317, 230)[0] > 245);
}

#[test]
fn pinned_letterbox_pipeline_runs_on_synthetic_frames() {
    let mut cam = synthetic(PixelFormat::Nv12, 320, 240, 4);
    let mut proc = ImageProcessor::with_backend(Backend::Cpu).unwrap();
    let mut dst = Tensor::<f32>::image(160, 160, PixelFormat::PlanarRgb, None).unwrap();
    let pin = dst.pin_host().unwrap();
    let opts = ConvertOptions {
        fit: Fit::Letterbox { pad: [114; 3] },
        ..ConvertOptions::default()
    };
    for _ in 0..3 {
        let frame = cam.next_frame().unwrap();
        let info = proc.convert_with(&frame, &mut dst, &opts).unwrap();
        drop(frame);
        dst.sync_for_cpu(Access::Read).unwrap();
        // SAFETY: the pin covers the destination's 3*160*160 f32 values; nothing writes
        // them between the sync brackets.
        let data: &[f32] = bytemuck::cast_slice(unsafe { pin.as_slice() });
        // Letterbox rows at the top are pad (114/255); the image rows are not all pad.
        assert!((data[0] - 114.0 / 255.0).abs() < 1e-6);
        assert!(
            data[80 * 160..81 * 160]
                .iter()
                .any(|&v| (v - 114.0 / 255.0).abs() > 0.01)
        );
        dst.sync_for_device(Access::Read).unwrap();
        assert!(info.scale[0] > 0.0);
    }
}

#[test]
fn bad_configurations_are_errors() {
    let bad = [
        CameraConfig::new(64, 32, PixelFormat::Yuyv).with_buffers(0),
        CameraConfig::new(64, 32, PixelFormat::Yuyv).with_buffers(1000),
        CameraConfig::new(0, 32, PixelFormat::Yuyv),
        CameraConfig::new(64, 32, PixelFormat::Yuyv).with_fps(0),
        CameraConfig::new(64, 32, PixelFormat::Yuyv).with_timeout(Duration::ZERO),
        CameraConfig::new(63, 32, PixelFormat::Yuyv),
        CameraConfig::new(64, 32, PixelFormat::Rgb),
        CameraConfig::new(64, 32, PixelFormat::P010),
        // CSI-2 RAW10 rows are whole 4-pixel groups.
        CameraConfig::new(66, 32, PixelFormat::Rggb10P),
    ];
    for config in bad {
        let err = Camera::synthetic(config.clone()).unwrap_err();
        assert!(
            matches!(err, Error::InvalidArgument(_) | Error::Unsupported(_)),
            "{config:?}: {err}"
        );
    }
}

#[test]
fn opening_what_is_not_a_camera_is_an_error() {
    let fds_before = std::fs::read_dir("/proc/self/fd").unwrap().count();
    let config = CameraConfig::default();
    let missing = Camera::open("/nonexistent/video9", config.clone()).unwrap_err();
    assert!(
        missing.to_string().contains("/nonexistent/video9"),
        "{missing}"
    );
    let null = Camera::open("/dev/null", config.clone()).unwrap_err();
    assert!(null.to_string().contains("not a V4L2 device"), "{null}");
    let file = std::env::temp_dir().join(format!("pinframe-not-a-camera-{}", std::process::id()));
    std::fs::write(&file, b"hello").unwrap();
    let err = Camera::open(&file, config.clone()).unwrap_err();
    std::fs::remove_file(&file).unwrap();
    assert!(err.to_string().contains("not a V4L2 device"), "{err}");
    let bad = Camera::open("/dev/null", config.with_buffers(0)).unwrap_err();
    assert!(matches!(bad, Error::InvalidArgument(_)), "{bad}");
    assert!(pinframe::camera::list_formats("/dev/null").is_err());
    let fds_after = std::fs::read_dir("/proc/self/fd").unwrap().count();
    assert_eq!(fds_before, fds_after, "failed opens leak no fd");
}

/// A pin over a frame holds its buffer: the camera does not draw into it while the pin is
/// alive (even after the frame dropped), the pinned bytes stay the frame's, the buffer
/// counts as held, and once the pin drops the buffer comes back.
#[test]
fn a_pin_over_a_frame_holds_its_buffer_until_it_drops() {
    let mut cam = synthetic(PixelFormat::Yuyv, 64, 32, 3);
    let frame = cam.next_frame().unwrap();
    let index = frame.buffer_index();
    let pin = frame.pin_host().unwrap();
    // SAFETY: nothing writes the buffer while it is pinned (that is what is tested).
    let pinned = unsafe { pin.as_slice() }.to_vec();
    assert_eq!(pinned, frame.map().unwrap().as_bytes()[..pinned.len()]);
    drop(frame);
    assert_eq!(cam.held_buffers(), 1, "the pinned buffer is still held");
    let a = cam.buffer_accounting().unwrap();
    assert_eq!((a.pinned, a.queued), (1, 2), "{a:?}");
    for _ in 0..9 {
        let f = cam.next_frame().unwrap();
        assert_ne!(
            f.buffer_index(),
            index,
            "the camera drew into a pinned buffer"
        );
    }
    // SAFETY: as above.
    assert_eq!(
        unsafe { pin.as_slice() },
        &pinned[..],
        "pinned bytes changed"
    );
    // Two more frames held: with the pinned one, every buffer is taken.
    let held = [cam.next_frame().unwrap(), cam.next_frame().unwrap()];
    let err = cam.next_frame().unwrap_err();
    assert_eq!(err.kind(), pinframe::ErrorKind::AllBuffersHeld, "{err}");
    drop(pin);
    let back = cam.next_frame().unwrap();
    assert_eq!(
        back.buffer_index(),
        index,
        "the buffer came back once the pin dropped"
    );
    drop(held);
    drop(back);
    let a = cam.buffer_accounting().unwrap();
    assert!(a.is_balanced() && a.queued == 3, "{a:?}");
}
