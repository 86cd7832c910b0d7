//! Host tests of the capture loop and the buffer pool over a scripted fake driver queue
//! (`v4l2::fake`): every fault a driver can deliver is counted once, and every buffer is
//! accounted for after each of them. The same faults, from vivid, run in the VM lane
//! (`tests/vm_camera_faults.rs`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::pool::Slot;
use super::v4l2::fake::{FakeQueue, Fault};
use super::{BufferAccounting, Camera, CaptureFormat, Frame};
use crate::image::{ImageLayout, PixelFormat};
use crate::tensor::{Memory, Tensor};
use crate::{DType, ErrorKind};

const W: u32 = 32;
const H: u32 = 8;
const BUFFERS: usize = 4;

fn layout() -> ImageLayout {
    ImageLayout::with_stride(W, H, PixelFormat::Yuyv, DType::U8, 2 * W as usize).unwrap()
}

fn format(mplane: bool) -> CaptureFormat {
    let layout = layout();
    CaptureFormat {
        format: PixelFormat::Yuyv,
        fourcc: crate::image::fourcc(b"YUYV"),
        width: W,
        height: H,
        multi_planar_api: mplane,
        interlaced: false,
        bytesperline: vec![2 * W],
        sizeimage: vec![layout.required_len(0) as u32],
        v4l2_colorimetry: (0, 0, 0),
        colorimetry: None,
        frame_interval: None,
        layout,
    }
}

/// A camera over a fake queue of `BUFFERS` heap buffers; `mplane` makes it a
/// one-plane multi-planar queue (data offsets apply).
fn camera(mplane: bool) -> (Camera, Arc<FakeQueue>) {
    let fake = Arc::new(FakeQueue::new(
        usize::from(mplane),
        [layout().required_len(0) as u32, 0, 0],
    ));
    let slots = (0..BUFFERS)
        .map(|_| {
            let t = Tensor::<u8>::with_layout(layout(), Some(Memory::Heap)).unwrap();
            Slot::new(t, [0; 3], Vec::new())
        })
        .collect();
    let cam = Camera::with_queue(Box::new(fake.clone()), slots, format(mplane));
    (cam, fake)
}

fn balanced(cam: &Camera, what: &str) -> BufferAccounting {
    let a = cam.buffer_accounting().unwrap();
    assert!(a.is_balanced(), "{what}: {a:?}");
    a
}

#[test]
fn every_fault_is_counted_once_and_no_buffer_is_lost() {
    use Fault::*;
    let script = [
        None, ErrorFlag, None, Drop, Empty, None, Short, Drop, Drop, None, ErrorFlag, Empty, None,
        Short, ErrorFlag, None, None, Drop, ErrorFlag, None,
    ];
    let (mut cam, fake) = camera(false);
    fake.script(&script);
    let want_frames = script.iter().filter(|&&f| f == None).count() as u64;
    let mut held: Vec<Frame> = Vec::new();
    let mut sequences = Vec::new();
    for i in 0..want_frames {
        let frame = cam
            .next_frame()
            .unwrap_or_else(|e| panic!("frame {i}: {e}"));
        sequences.push(frame.sequence());
        // Hold up to two frames at a time, in and out of order.
        held.push(frame);
        if held.len() > 2 {
            held.remove((i % 2) as usize);
        }
        let a = balanced(&cam, &format!("after frame {i}"));
        assert_eq!(a.held, held.len(), "frame {i}: {a:?}");
        assert_eq!(
            a.idle, 0,
            "frame {i}: every returned buffer was queued again: {a:?}"
        );
        assert_eq!(fake.owned(), a.queued, "frame {i}");
    }
    drop(held);
    let a = balanced(&cam, "at the end");
    assert_eq!((a.queued, a.held, a.pinned, a.idle), (BUFFERS, 0, 0, 0));
    let s = cam.stats();
    let count = |f: Fault| script.iter().filter(|&&x| x == f).count() as u64;
    assert_eq!(s.frames, want_frames, "{s:?}");
    assert_eq!(s.errors, count(ErrorFlag), "{s:?}");
    assert_eq!(s.empty, count(Empty), "{s:?}");
    assert_eq!(s.malformed, count(Short), "{s:?}");
    assert_eq!(s.dropped, count(Drop), "{s:?}");
    assert_eq!((s.requeue_failures, s.repeated), (0, 0), "{s:?}");
    // Every sequence number is counted once.
    let span = (sequences.last().unwrap() - sequences.first().unwrap() + 1) as u64;
    assert_eq!(
        s.frames + s.errors + s.empty + s.malformed + s.dropped,
        span,
        "{s:?}"
    );
    // Frames are only the good buffers, in order.
    assert!(sequences.windows(2).all(|w| w[0] < w[1]), "{sequences:?}");
}

#[test]
fn a_failed_requeue_keeps_the_buffer_and_the_next_frame_queues_it() {
    let (mut cam, fake) = camera(false);
    let frame = cam.next_frame().unwrap();
    fake.fail_qbuf(1);
    drop(frame);
    let a = balanced(&cam, "after the failed VIDIOC_QBUF");
    assert_eq!((a.idle, a.queued), (1, BUFFERS - 1), "{a:?}");
    assert_eq!(cam.stats().requeue_failures, 1);
    let frame = cam.next_frame().unwrap();
    let a = balanced(&cam, "after the retry");
    assert_eq!((a.idle, a.held, a.queued), (0, 1, BUFFERS - 1), "{a:?}");
    drop(frame);

    // Failing again on the retry: the error reaches the caller, the buffer stays
    // idle, and the call after that queues it.
    let frame = cam.next_frame().unwrap();
    fake.fail_qbuf(2);
    drop(frame);
    let err = cam.next_frame().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Device, "{err}");
    assert!(err.to_string().contains("VIDIOC_QBUF of buffer"), "{err}");
    assert_eq!(balanced(&cam, "after two failures").idle, 1);
    assert_eq!(
        cam.stats().requeue_failures,
        3,
        "each failed call counted once"
    );
    // A failed requeue is not sticky.
    let frame = cam.next_frame().unwrap();
    assert_eq!(balanced(&cam, "recovered").idle, 0);
    drop(frame);
    assert_eq!(fake.owned(), BUFFERS);
}

#[test]
fn bad_plane_offsets_give_the_buffer_back_and_a_device_error() {
    let (mut cam, fake) = camera(true);
    drop(cam.next_frame().unwrap());
    fake.script(&[Fault::BadOffsets]);
    let err = cam.next_frame().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Device, "{err}");
    assert!(err.to_string().contains("data offsets"), "{err}");
    assert_eq!(cam.stats().malformed, 1);
    let a = balanced(&cam, "after the bad offsets");
    assert_eq!(
        (a.queued, a.idle),
        (BUFFERS, 0),
        "the buffer went back: {a:?}"
    );
    // Not sticky: the next good buffer is a frame.
    drop(cam.next_frame().unwrap());
    assert_eq!(cam.stats().frames, 2);
}

#[test]
fn a_buffer_index_beyond_the_pool_is_a_device_error() {
    let (mut cam, fake) = camera(false);
    fake.script(&[Fault::BadIndex]);
    let err = cam.next_frame().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Device, "{err}");
    assert!(err.to_string().contains("beyond its 4 buffers"), "{err}");
}

#[test]
fn a_vanished_device_is_disconnected_for_good_and_held_frames_stay_readable() {
    let (mut cam, fake) = camera(false);
    let held = cam.next_frame().unwrap();
    let bytes = held.map().unwrap().as_bytes().to_vec();
    fake.vanish();
    let start = Instant::now();
    let err = cam.next_frame().unwrap_err();
    assert!(start.elapsed() < Duration::from_millis(100), "at once");
    assert_eq!(err.kind(), ErrorKind::Disconnected, "{err}");
    assert_eq!(held.map().unwrap().as_bytes(), &bytes[..]);
    let qbufs = fake.qbufs();
    drop(held);
    assert_eq!(
        fake.qbufs(),
        qbufs,
        "nothing is queued on a vanished device"
    );
    assert_eq!(
        cam.stats().requeue_failures,
        0,
        "the disconnect is counted once"
    );
    let again = cam.next_frame().unwrap_err();
    assert_eq!(again.kind(), ErrorKind::Disconnected, "{again}");
    assert_eq!(
        cam.buffer_accounting().unwrap_err().kind(),
        ErrorKind::Disconnected
    );
}

#[test]
fn a_fatal_stream_error_is_a_device_error_for_good() {
    let (mut cam, fake) = camera(false);
    drop(cam.next_frame().unwrap());
    fake.break_stream();
    let err = cam.next_frame().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Device, "{err}");
    assert!(err.to_string().contains("fatal"), "{err}");
    let again = cam.next_frame().unwrap_err();
    assert_eq!(again.to_string(), err.to_string());
    balanced(&cam, "after the fatal error");
}

#[test]
fn no_frame_in_time_is_a_timeout_and_waiting_again_works() {
    let (mut cam, fake) = camera(false);
    fake.stall(true);
    let start = Instant::now();
    let err = cam
        .next_frame_timeout(Duration::from_millis(50))
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Timeout, "{err}");
    assert!(start.elapsed() >= Duration::from_millis(50));
    fake.stall(false);
    drop(cam.next_frame().unwrap());
    balanced(&cam, "after the timeout");
}

#[test]
fn a_timeout_too_long_for_a_deadline_waits_without_one() {
    let (mut cam, _fake) = camera(false);
    drop(cam.next_frame_timeout(Duration::MAX).unwrap());
    balanced(&cam, "after a wait without a deadline");
}

#[test]
fn holding_every_buffer_is_an_error_at_once() {
    let (mut cam, fake) = camera(false);
    let held: Vec<Frame> = (0..BUFFERS).map(|_| cam.next_frame().unwrap()).collect();
    assert_eq!(fake.owned(), 0);
    let err = cam.next_frame().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::AllBuffersHeld, "{err}");
    assert_eq!(balanced(&cam, "all held").held, BUFFERS);
    drop(held);
    assert_eq!(fake.owned(), BUFFERS);
}

#[test]
fn the_accounting_sees_a_buffer_the_driver_lost() {
    let (cam, fake) = camera(false);
    assert_eq!(balanced(&cam, "fresh").queued, BUFFERS);
    fake.forget(2);
    let a = cam.buffer_accounting().unwrap();
    assert_eq!(a.lost, 1, "{a:?}");
    assert!(!a.is_balanced());
}

#[test]
fn a_pin_over_a_frame_keeps_its_buffer_from_the_driver() {
    let (mut cam, fake) = camera(false);
    let frame = cam.next_frame().unwrap();
    let index = frame.buffer_index();
    let pin = frame.pin_host().unwrap();
    drop(frame);
    let a = balanced(&cam, "frame dropped, pin alive");
    assert_eq!((a.pinned, a.queued), (1, BUFFERS - 1), "{a:?}");
    assert_eq!(cam.held_buffers(), 1);
    for _ in 0..3 * BUFFERS {
        let f = cam.next_frame().unwrap();
        assert_ne!(f.buffer_index(), index, "the pinned buffer was refilled");
    }
    drop(pin);
    // The camera notices the dropped pin at its next next_frame.
    let f = cam.next_frame().unwrap();
    let a = balanced(&cam, "pin dropped");
    assert_eq!((a.pinned, a.held, a.queued), (0, 1, BUFFERS - 1), "{a:?}");
    drop(f);
    assert_eq!(fake.owned(), BUFFERS);
}

#[test]
fn sequence_gaps_and_restarts() {
    let (mut cam, fake) = camera(false);
    fake.script(&[Fault::None, Fault::Drop, Fault::Drop, Fault::None]);
    let a = cam.next_frame().unwrap().sequence();
    let b = cam.next_frame().unwrap().sequence();
    assert_eq!(b - a, 3);
    assert_eq!(cam.dropped_frames(), 2);
    // A driver that counts from 0 again is not a gap of four billion frames.
    let mut state = cam.shared.lock();
    state.note_sequence(0);
    assert_eq!(state.stats.dropped, 2);
    state.note_sequence(1);
    state.note_sequence(1);
    assert_eq!(state.stats.dropped, 2);
    assert_eq!(state.stats.repeated, 1);
}

/// A Motion-JPEG stream over the fake queue: every buffer holds a whole JPEG frame, and a
/// buffer cut one byte short (no end-of-image marker) is malformed, counted once and
/// queued again; the frames handed out carry their length in their layout.
#[test]
fn cut_off_mjpeg_frames_are_malformed_and_requeued() {
    use Fault::*;
    let planes = ImageLayout::new(W, H, PixelFormat::I422).unwrap();
    let pixels: Vec<u8> = (0..planes.allocation_len(0))
        .map(|i| (i * 7) as u8)
        .collect();
    let jpeg = match crate::jpeg::JpegEncoder::new() {
        Ok(mut e) => e.encode(&pixels, &planes, 85).unwrap().to_vec(),
        Err(e) => panic!("libturbojpeg (scripts/install-deps runtime) is needed: {e}"),
    };
    let capacity = jpeg.len() + 64;
    let layout = ImageLayout::with_stride(W, H, PixelFormat::Mjpeg, DType::U8, capacity).unwrap();
    let fake = Arc::new(FakeQueue::new(0, [jpeg.len() as u32, 0, 0]));
    let slots = (0..BUFFERS)
        .map(|_| {
            let mut t = Tensor::<u8>::with_layout(layout, Some(Memory::Heap)).unwrap();
            t.map_mut().unwrap().buffer_bytes_mut(0)[..jpeg.len()].copy_from_slice(&jpeg);
            Slot::new(t, [0; 3], Vec::new())
        })
        .collect();
    let format = CaptureFormat {
        format: PixelFormat::Mjpeg,
        fourcc: crate::image::fourcc(b"MJPG"),
        bytesperline: vec![0],
        sizeimage: vec![capacity as u32],
        layout,
        ..format(false)
    };
    let mut cam = Camera::with_queue(Box::new(fake.clone()), slots, format);
    fake.script(&[None, Short, Short, None, Short, None, None]);
    for i in 0..4 {
        let frame = cam
            .next_frame()
            .unwrap_or_else(|e| panic!("frame {i}: {e}"));
        assert_eq!(frame.bytesused(), jpeg.len());
        assert_eq!(frame.layout().unwrap().planes()[0].stride, jpeg.len());
        drop(frame);
        balanced(&cam, "after a frame");
    }
    let stats = cam.stats();
    assert_eq!((stats.frames, stats.malformed), (4, 3), "{stats:?}");
    balanced(&cam, "at the end");
}
