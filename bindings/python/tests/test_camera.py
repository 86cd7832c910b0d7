"""The synthetic camera from Python: frames are tensors, requeued when released."""

import numpy as np
import pytest

import pinframe
from conftest import python_runs_during


def test_frames_are_tensors_released_on_exit(proc):
    dst = pinframe.Tensor.image(160, 120, "rgb", memory="heap")
    with pinframe.Camera("synthetic", size=(320, 240), format="yuyv", buffers=3) as cam:
        assert cam.is_synthetic and cam.size == (320, 240) and cam.buffer_count == 3
        assert cam.layout.format == "yuyv" and cam.format["width"] == 320
        sequences = []
        for _ in range(5):
            with cam.next_frame() as frame:
                assert isinstance(frame, pinframe.Tensor)
                assert cam.held_buffers == 1
                assert frame.shape == (240, 320, 2) and frame.dtype == "u8"
                pixels = np.asarray(frame)
                assert pixels.ctypes.data == frame.pin().address  # a view, no copy
                info = proc.convert(frame, dst)
                ref = pinframe.Tensor.image(160, 120, "rgb", memory="heap")
                proc.convert(pixels.copy(), ref, src_format="yuyv")
                np.testing.assert_array_equal(np.asarray(dst), np.asarray(ref))
                sequences.append(frame.sequence)
            # The numpy view (through the frame object it keeps alive) still pins the
            # buffer: the driver must not refill memory an array shows. Once the view and
            # the frame object go, the buffer is free again.
            assert frame.released and cam.held_buffers == 1
            del pixels, frame
            assert cam.held_buffers == 0
        with cam.next_frame() as frame:
            pass
        with pytest.raises(pinframe.InvalidInput, match="released"):
            np.asarray(frame)
        assert sequences == list(range(5))
        assert info.scale == (0.5, 0.5)
        assert cam.stats["frames"] == 6 and cam.stats["dropped"] == 0
    assert cam.closed


def test_the_pattern_moves_and_the_top_left_bar_is_white(proc):
    dst = pinframe.Tensor.image(64, 48, "rgb", memory="heap")
    with pinframe.Camera("synthetic", size=(640, 480), format="nv12") as cam:
        outs = []
        for frame in cam:
            with frame:
                proc.convert(frame, dst)
                outs.append(np.asarray(dst).copy())
            if len(outs) == 3:
                break
    assert not np.array_equal(outs[0], outs[2])  # the bars scroll
    assert (outs[0][2, 2] > 230).all()  # the white bar, BT.601 limited decoded


def test_holding_every_buffer_raises_all_buffers_held():
    with pinframe.Camera("synthetic", size=(64, 48), buffers=3) as cam:
        held = [cam.next_frame() for _ in range(3)]
        assert cam.held_buffers == 3
        with pytest.raises(pinframe.AllBuffersHeld) as e:
            cam.next_frame()
        assert e.value.kind == "all buffers held"
        held[1].release()
        with cam.next_frame() as f:
            assert f.buffer_index == held[1].buffer_index
        # Dropping a frame object releases it too.
        del held[0]
        assert cam.held_buffers == 1
        held[-1].release()
        assert cam.held_buffers == 0


def test_frames_outlive_the_camera(proc):
    cam = pinframe.Camera("synthetic", size=(64, 48))
    frame = cam.next_frame()
    view = np.asarray(frame)
    cam.close()
    dst = pinframe.Tensor.image(32, 24, "rgb")
    proc.convert(frame, dst)  # still valid: it holds its buffer
    assert view.shape == (48, 64, 2)
    frame.release()


def test_next_frame_releases_the_gil():
    """A paced camera sleeps in next_frame until the frame is due; another thread runs
    Python meanwhile."""
    with pinframe.Camera("synthetic", size=(64, 48), fps=4) as cam:
        cam.next_frame().release()
        middle, took = python_runs_during(lambda: cam.next_frame().release())
    assert middle > 0, f"the other thread stood still through the middle of a {took:.3f} s call"


def test_frames_are_sources_only():
    with pinframe.Camera("synthetic", size=(64, 48)) as cam:
        with cam.next_frame() as frame:
            src = pinframe.Tensor.image(32, 32, "rgb")
            with pytest.raises(pinframe.InvalidInput, match="source"):
                pinframe.ImageProcessor("cpu").convert(src, frame)
