"""The Python package on a real V4L2 camera: vivid in the VM lane's guest (run by
tests/vm_python.rs through scripts/vm-test; skipped anywhere else)."""

import os

import numpy as np
import pytest

import pinframe

NODE = os.environ.get("PINFRAME_VM_VIDEO")
pytestmark = pytest.mark.skipif(
    os.environ.get("PINFRAME_VM") != "1" or not NODE,
    reason="needs the VM lane's guest (PINFRAME_VM=1, PINFRAME_VM_VIDEO)",
)


@pytest.mark.parametrize("buffer_mode", ["dmabuf", "mmap"])
def test_vivid_frames_from_python(buffer_mode):
    proc = pinframe.ImageProcessor("cpu")
    dst = pinframe.Tensor.image(320, 240, "rgb", memory="dma")
    assert dst.memory == "dma"
    with pinframe.Camera(NODE, size=(640, 480), format="yuyv", buffers=4,
                         buffer_mode=buffer_mode) as cam:
        assert not cam.is_synthetic and cam.buffer_mode == buffer_mode
        assert cam.size == (640, 480) and cam.layout.format == "yuyv"
        seen = set()
        for _ in range(6):
            with cam.next_frame(timeout=10.0) as frame:
                assert frame.memory == "dma"  # a dma-buf, in both buffer modes
                assert cam.held_buffers == 1
                with frame.map() as pixels:  # DMA_BUF_IOCTL_SYNC START/END around it
                    assert pixels.ctypes.data == frame.pin().address  # no copy
                    assert pixels.shape == (480, 640, 2)
                    copy = pixels.copy()
                proc.convert(frame, dst)
                seen.add(frame.buffer_index)
            # The numpy view from map() keeps the buffer pinned after the block (the
            # driver must not refill memory an array shows); once it and the frame go,
            # the buffer is the driver's again.
            assert frame.released and cam.held_buffers == 1
            del pixels, frame
            assert cam.held_buffers == 0
            ref = pinframe.Tensor.image(320, 240, "rgb", memory="heap")
            proc.convert(copy, ref, src_format="yuyv")
            with dst.map() as out:
                np.testing.assert_array_equal(out, np.asarray(ref))
            assert copy.std() > 1.0  # a real picture, not a blank buffer
        assert len(seen) > 1  # the buffers were requeued and came round again
        held = [cam.next_frame(timeout=10.0) for _ in range(cam.buffer_count)]
        with pytest.raises(pinframe.AllBuffersHeld):
            cam.next_frame()
        for f in held:
            f.release()
        with cam.next_frame(timeout=10.0):
            pass
    # The camera is closed; the DMA tensor it converted into is still ours.
    assert np.asarray(dst).shape == (240, 320, 3)
