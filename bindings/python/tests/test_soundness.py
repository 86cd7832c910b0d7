"""What safe Python can never do with pinframe memory: keep a released frame's buffer,
read a view whose memory went away, write a camera's frame, convert a source that is the
destination's own memory, freeze the interpreter on a binding lock, or panic on a bad
argument."""

import gc
import math
import os
import threading
import time

import numpy as np
import pytest

import pinframe


def camera(**kw):
    kw.setdefault("size", (64, 48))
    return pinframe.Camera("synthetic", **kw)


# ---- a released frame gives its buffer back ----


@pytest.mark.parametrize("touch", ["writable", "asarray", "pin", "memoryview", "dlpack", "array"])
def test_a_released_frame_keeps_no_buffer_whatever_was_read(touch):
    kept = []
    with camera(buffers=2) as cam:
        for _ in range(6):  # three times the buffers: a kept buffer would end this early
            frame = cam.next_frame()
            if touch == "writable":
                assert frame.writable is False
            elif touch == "asarray":
                assert np.asarray(frame).shape == (48, 64, 2)
            elif touch == "pin":
                assert frame.pin().nbytes == 64 * 48 * 2
            elif touch == "memoryview":
                with memoryview(frame) as mv:
                    assert mv.nbytes == 64 * 48 * 2
            elif touch == "dlpack":
                assert np.from_dlpack(frame).shape == (48, 64, 2)
            else:
                assert frame.__array__().shape == (48, 64, 2)
            frame.release()
            assert cam.held_buffers == 0, touch
            kept.append(frame)  # the frame objects live on; their buffers do not
        for f in kept:
            assert f.released
            with pytest.raises(pinframe.InvalidInput, match="released"):
                f.pin()
            with pytest.raises(pinframe.InvalidInput, match="released"):
                np.asarray(f)


def test_leaving_the_with_block_gives_the_buffer_back_at_once():
    with camera(buffers=2) as cam:
        frames = []
        for _ in range(5):
            with cam.next_frame() as frame:
                frame.pin()
                assert frame.writable is False
            frames.append(frame)
            assert cam.held_buffers == 0


def test_views_keep_their_memory_by_themselves():
    """Every kind of view outlives the frame's release, the camera's close and the frame
    object; each holds the buffer (the driver never refills memory a view shows) until
    it goes."""
    cam = camera(buffers=2)
    frame = cam.next_frame()
    expected = np.array(frame)  # a copy
    views = {
        "asarray": np.asarray(frame),
        "array": frame.__array__(),
        "memoryview": memoryview(frame),
        "dlpack": np.from_dlpack(frame),
        "plane": frame.plane(0),
    }
    pin = frame.pin()
    frame.release()
    assert cam.held_buffers == 1  # the views hold it, not the frame
    cam.close()
    del frame
    gc.collect()
    # Unmapped memory would crash here (the camera freed every buffer it still had).
    for name, v in views.items():
        np.testing.assert_array_equal(np.asarray(v).reshape(expected.shape), expected, err_msg=name)
    assert pin.nbytes == expected.nbytes
    views["memoryview"].release()
    del views, pin
    gc.collect()


def test_pins_and_views_of_a_plain_tensor_outlive_it(proc):
    t = pinframe.Tensor.image(8, 8, "rgb", memory="shm")
    proc.convert(np.full((8, 8, 3), 42, np.uint8), t, src_format="rgb")
    view, mv, dl, pin = np.asarray(t), memoryview(t), np.from_dlpack(t), t.pin()
    address = pin.address
    del t
    gc.collect()
    assert (view == 42).all() and (dl == 42).all() and mv.tobytes() == bytes([42]) * 192
    assert view.ctypes.data == address == dl.ctypes.data


# ---- frames are read-only ----


def test_frames_are_read_only_in_numpy():
    with camera() as cam, cam.next_frame() as frame:
        assert frame.writable is False
        assert not np.asarray(frame).flags.writeable
        assert not frame.__array__().flags.writeable
        assert not frame.plane(0).flags.writeable
        assert not np.from_dlpack(frame).flags.writeable
        with memoryview(frame) as mv:
            assert mv.readonly
        with pytest.raises(ValueError):
            np.asarray(frame)[0, 0, 0] = 1
        with pytest.raises(pinframe.InvalidInput, match="read-only"):
            frame.map_mut()
        with frame.map() as a:
            assert not a.flags.writeable


# ---- a source never aliases the destination ----


def test_a_source_array_over_the_destination_is_refused(proc):
    dst = pinframe.Tensor.image(16, 8, "rgb", memory="shm")
    with dst.map_mut() as a:
        a[...] = np.arange(a.size, dtype=np.uint32).reshape(a.shape) % 251
    before = np.array(dst)
    with pytest.raises(pinframe.InvalidInput, match="overlap") as e:
        proc.convert(np.asarray(dst), dst, src_format="rgb")
    assert "bytes 0..384" in str(e.value)
    with pytest.raises(pinframe.InvalidInput, match="overlap"):
        proc.convert(np.asarray(dst)[4:], dst, src_format="rgb")  # a part of it
    with pytest.raises(pinframe.InvalidInput, match="overlap"):
        proc.convert(np.frombuffer(memoryview(dst), np.uint8), dst, src_layout=dst.layout)
    np.testing.assert_array_equal(np.asarray(dst), before)  # nothing written
    # A copy converts.
    proc.convert(np.array(dst), dst, src_format="rgb")
    np.testing.assert_array_equal(np.asarray(dst), before)


def test_two_tensors_over_one_memfd_convert_only_when_disjoint(proc):
    whole = pinframe.Tensor.image(8, 16, "rgb", memory="shm")
    with whole.map_mut() as a:
        a[:8] = 7
        a[8:] = 0
    top = pinframe.ImageLayout(8, 8, "rgb")
    middle = pinframe.ImageLayout(8, 8, "rgb", planes=[(4 * 8 * 3, 8 * 3)])
    bottom = pinframe.ImageLayout(8, 8, "rgb", planes=[(8 * 8 * 3, 8 * 3)])
    src = pinframe.Tensor.import_fd(whole.fd(), top)
    with pytest.raises(pinframe.InvalidInput, match="overlap: bytes 0..192 of src's buffer 0 and bytes 96..288"):
        proc.convert(src, pinframe.Tensor.import_fd(whole.fd(), middle))
    proc.convert(src, pinframe.Tensor.import_fd(whole.fd(), bottom))
    assert (np.asarray(whole) == 7).all()


# ---- no binding lock is waited for with the GIL held ----


def interpreter_runs_while(call):
    """Runs `call()` here while another thread counts; returns how far it counted while
    the call was in flight (the call blocks until `release` is set by the caller's
    helper thread, so it is in flight for as long as that thread says, on any machine)."""
    counted = []
    stop = threading.Event()

    def count():
        n = 0
        while not stop.is_set():
            n += 1
            counted.append(n)
            time.sleep(0.001)

    th = threading.Thread(target=count)
    th.start()
    try:
        before = len(counted)
        call()
        during = len(counted) - before
    finally:
        stop.set()
        th.join()
    return during


def test_getters_wait_for_a_capture_without_the_gil():
    """A paced capture holds the camera (GIL released) until its frame is due; a getter
    from another thread waits for it without stopping the interpreter. An attempt counts
    only when the getter really waited (the capture ended after it asked); at least one
    of them must."""
    waited = []
    with camera(fps=2) as cam:
        cam.next_frame().release()
        for _ in range(5):
            in_capture = threading.Event()
            done = []

            def capture():
                in_capture.set()
                with cam.next_frame():
                    done.append(time.monotonic())

            th = threading.Thread(target=capture)
            th.start()
            assert in_capture.wait(60)
            time.sleep(0.05)  # the capture waits for its frame, due ~0.5 s after the last
            asked = time.monotonic()
            during = interpreter_runs_while(lambda: cam.held_buffers)
            th.join(60)
            assert done, "the capture never returned"
            if done[0] > asked:
                waited.append(during)
                break
    assert waited, "the getter never had to wait for a capture in 5 attempts"
    assert waited[0] > 0, "the interpreter stood still while a getter waited"


def test_close_ends_a_waiting_next_frame():
    """At 1 fps the second frame is due a second after the first; a close() meanwhile
    ends the wait: the waiting thread gets no frame but the camera's closing."""
    with camera(fps=1) as cam:
        cam.next_frame().release()
        outcome = []
        waiting = threading.Event()

        def wait():
            waiting.set()
            try:
                with cam.next_frame(timeout=60):
                    outcome.append("frame")
            except pinframe.InvalidInput as e:
                outcome.append(str(e))

        th = threading.Thread(target=wait)
        th.start()
        assert waiting.wait(60)
        time.sleep(0.1)
        cam.close()
        th.join(60)
        assert not th.is_alive(), "next_frame still waits after close()"
    assert outcome and "closed" in outcome[0], outcome


def test_iteration_ends_when_another_thread_closes():
    with camera(fps=1) as cam:
        seen = []
        th = threading.Thread(target=lambda: seen.extend(f.release() or 1 for f in cam))
        th.start()
        time.sleep(0.2)
        cam.close()
        th.join(60)
        assert not th.is_alive()
        assert len(seen) >= 1


# ---- no panic from a bad argument ----

BAD_SECONDS = [0, -1, -0.0, 1e20, math.inf, -math.inf, math.nan, 10**30, 86_401]


@pytest.mark.parametrize("timeout", BAD_SECONDS)
def test_bad_camera_timeouts_are_invalid_input(timeout):
    with pytest.raises(pinframe.InvalidInput, match="timeout"):
        camera(timeout=timeout)
    with camera() as cam:
        with pytest.raises(pinframe.InvalidInput, match="timeout"):
            cam.next_frame(timeout=timeout)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"buffers": 0}, "buffers"),
        ({"buffers": -1}, "buffers"),
        ({"buffers": 33}, "buffers"),
        ({"buffers": 2**70}, "buffers"),
        ({"buffers": True}, "buffers"),
        ({"buffers": 2.5}, "buffers"),
        ({"fps": 0}, "fps"),
        ({"fps": -30}, "fps"),
        ({"fps": 2**40}, "fps"),
        ({"size": (0, 48)}, "width"),
        ({"size": (64, -1)}, "height"),
        ({"size": (2**40, 48)}, "width"),
        ({"size": (64,)}, "size"),
        ({"size": "64x48"}, "size"),
    ],
)
def test_bad_camera_configurations_are_invalid_input(kwargs, match):
    with pytest.raises(pinframe.InvalidInput, match=match):
        camera(**kwargs)


def test_the_longest_timeout_is_accepted():
    with camera(timeout=86_400) as cam:
        cam.next_frame(timeout=86_400).release()
        cam.next_frame(timeout=1).release()


@pytest.mark.parametrize(
    "call",
    [
        lambda: pinframe.Tensor((-1,)),
        lambda: pinframe.Tensor((2**70,)),
        lambda: pinframe.Tensor.image(-8, 8, "rgb"),
        lambda: pinframe.Tensor.image(2**40, 8, "rgb"),
        lambda: pinframe.Tensor.image(0, 8, "rgb"),
        lambda: pinframe.ImageLayout(8, 8, "rgb", stride=-24),
        lambda: pinframe.ImageLayout(8, 8, "rgb", planes=[(-1, 24)]),
        lambda: pinframe.ImageLayout(8, 8, "nv12", planes=[(0, 8), (2**64 - 1, 0, 8)]),
    ],
)
def test_bad_sizes_are_invalid_input(call):
    with pytest.raises(pinframe.InvalidInput):
        call()


@pytest.mark.parametrize(
    "kwargs",
    [
        {"crop": (-1, 0, 4, 4)},
        {"crop": (0, 0, 2**40, 4)},
        {"rotate": -90},
        {"rotate": 2**70},
        {"mean": (math.nan, 0, 0)},
        {"std": (0, 1, 1)},
        {"std": (math.inf, 1, 1)},
        {"pad": (256, 0, 0)},
        {"pad": (-1, 0, 0)},
    ],
)
def test_bad_conversion_options_are_invalid_input(proc, kwargs):
    src = pinframe.Tensor.image(8, 8, "rgb")
    dst = pinframe.Tensor.image(8, 8, "rgb", "f32")
    with pytest.raises(pinframe.InvalidInput):
        proc.convert(src, dst, **kwargs)


def test_bad_import_fds_are_invalid_input():
    layout = pinframe.ImageLayout(8, 8, "rgb")
    for fd in (-1, 2**40, 10**6):
        with pytest.raises(pinframe.InvalidInput):
            pinframe.Tensor.import_fd(fd, layout)
    r, w = os.pipe()
    try:
        with pytest.raises(pinframe.InvalidInput):
            pinframe.Tensor.import_fd(r, layout)
    finally:
        os.close(r)
        os.close(w)
