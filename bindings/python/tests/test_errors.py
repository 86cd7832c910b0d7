"""Bad input raises a clear pinframe exception of the right kind, never a crash."""

import fcntl
import os
import tempfile

import numpy as np
import pytest

import pinframe
from conftest import has_dma

KINDS = {
    "InvalidInput": "invalid input",
    "Unsupported": "unsupported",
    "MemoryUnavailable": "memory unavailable",
    "Timeout": "timeout",
    "AllBuffersHeld": "all buffers held",
    "Disconnected": "disconnected",
    "ImportRefused": "import refused",
    "DeviceError": "device error",
    "InferenceRuntimeError": "runtime error",
    "RuntimeUnavailable": "runtime unavailable",
    "IoError": "i/o error",
}


def test_exception_classes_follow_the_rust_kinds():
    for name, kind in KINDS.items():
        cls = getattr(pinframe, name)
        assert issubclass(cls, pinframe.Error) and cls.kind == kind
        assert cls.__module__ == "pinframe"
    assert issubclass(pinframe.InvalidInput, ValueError)
    assert issubclass(pinframe.Timeout, TimeoutError)
    assert issubclass(pinframe.IoError, OSError)


@pytest.fixture
def dst():
    return pinframe.Tensor.image(16, 16, "rgb", memory="heap")


def test_wrong_dtype_source_array(proc, dst):
    with pytest.raises(pinframe.InvalidInput, match="uint8"):
        proc.convert(np.zeros((16, 16, 3), np.float32), dst, src_format="rgb")
    f32 = pinframe.Tensor.image(16, 16, "rgb", "f32")
    with pytest.raises(pinframe.InvalidInput, match="u8 elements"):
        proc.convert(f32, dst)
    with pytest.raises(pinframe.InvalidInput, match="nv12 is a source format of bytes"):
        pinframe.Tensor.image(16, 16, "nv12", "f32")
    with pytest.raises(pinframe.InvalidInput, match="dtype"):
        pinframe.Tensor((4,), "complex64")
    with pytest.raises(pinframe.InvalidInput, match="element type"):
        pinframe.Tensor.from_numpy(np.zeros((4, 4), np.complex64))


def test_wrong_dtype_destination(proc):
    src = pinframe.Tensor.image(16, 16, "rgb")
    with pytest.raises(pinframe.InvalidInput, match="u8 and i8"):
        proc.convert(src, pinframe.Tensor.image(16, 16, "rgb", "f32"), quantize=(0.1, 0))
    with pytest.raises(pinframe.Unsupported):
        proc.convert(src, pinframe.Tensor.image(16, 16, "rgb", "u16"))
    with pytest.raises(pinframe.InvalidInput, match="destination"):
        proc.convert(src, pinframe.Tensor((16, 16, 3)))  # no image layout


@pytest.mark.parametrize(
    "make",
    [
        lambda: np.zeros((16, 32, 3), np.uint8)[:, ::2],  # every other pixel
        lambda: np.zeros((16, 16, 3), np.uint8).transpose(1, 0, 2)[:, :, :],  # columns
        lambda: np.zeros((16, 16, 3), np.uint8)[:, ::-1],  # mirrored
        lambda: np.zeros((16, 16, 6), np.uint8)[:, :, ::2],  # every other channel
    ],
    ids=["step-2", "transposed", "negative", "channel-step"],
)
def test_non_contiguous_arrays(proc, dst, make):
    a = make()
    with pytest.raises(pinframe.InvalidInput, match="contiguous|negative"):
        proc.convert(a, dst, src_format="rgb")
    # With src_layout the array holds raw bytes: it must be C-contiguous.
    with pytest.raises(pinframe.InvalidInput, match="C-contiguous"):
        proc.convert(a, dst, src_layout=pinframe.ImageLayout(16, 16, "rgb"))


def test_padded_rows_are_fine(proc, rng):
    """Row padding is not a contiguity error: rows may be padded, pixels may not."""
    big = rng.integers(0, 256, (16, 40, 3), dtype=np.uint8)
    padded = big[:, :16]
    a = pinframe.Tensor.image(8, 8, "rgb")
    b = pinframe.Tensor.image(8, 8, "rgb")
    proc.convert(padded, a, src_format="rgb")
    proc.convert(np.ascontiguousarray(padded), b, src_format="rgb")
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_wrong_shapes(proc, dst):
    with pytest.raises(pinframe.InvalidInput, match="shape"):
        proc.convert(np.zeros((16, 16), np.uint8), dst, src_format="rgb")
    with pytest.raises(pinframe.InvalidInput, match="rows"):
        proc.convert(np.zeros((16, 16), np.uint8), dst, src_format="nv12")
    with pytest.raises(pinframe.InvalidInput, match="spans"):
        proc.convert(np.zeros(100, np.uint8), dst, src_layout=pinframe.ImageLayout(16, 16, "rgb"))
    with pytest.raises(pinframe.InvalidInput):
        proc.convert(np.zeros((16, 16, 3), np.uint8), dst)  # no src_format
    with pytest.raises(pinframe.InvalidInput, match="Tensor or a numpy array"):
        proc.convert("not an image", dst)
    with pytest.raises(pinframe.InvalidInput, match="zero"):
        pinframe.Tensor((4, 0))
    with pytest.raises(pinframe.InvalidInput, match="empty"):
        pinframe.Tensor.image(0, 4, "rgb")


def test_closed_and_foreign_fds():
    layout = pinframe.ImageLayout(16, 16, "yuyv")
    fd = os.memfd_create("closed")
    os.close(fd)
    with pytest.raises(pinframe.InvalidInput, match="not open"):
        pinframe.Tensor.import_fd(fd, layout)
    with pytest.raises(pinframe.InvalidInput, match="not a valid"):
        pinframe.Tensor.import_fd(-1, layout)
    with pytest.raises(pinframe.InvalidInput, match="not a file descriptor"):
        pinframe.Tensor.import_fd("seven", layout)
    with tempfile.TemporaryFile() as f:
        with pytest.raises(pinframe.InvalidInput, match="neither a dma-buf nor a memfd"):
            pinframe.Tensor.import_fd(f.fileno(), layout)
    small = os.memfd_create("small", os.MFD_ALLOW_SEALING)
    try:
        os.write(small, b"\0" * 100)
        fcntl.fcntl(small, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK)
        with pytest.raises(pinframe.InvalidInput, match="too small"):
            pinframe.Tensor.import_fd(small, layout)
        with pytest.raises(pinframe.InvalidInput, match="fd"):
            pinframe.Tensor.import_fd([small, small], layout)  # one buffer, two fds
    finally:
        os.close(small)


def test_a_memfd_that_can_shrink_is_refused():
    layout = pinframe.ImageLayout(16, 16, "yuyv")
    unsealable = os.memfd_create("unsealable")  # without MFD_ALLOW_SEALING
    unsealed = os.memfd_create("unsealed", os.MFD_ALLOW_SEALING)
    try:
        for fd in (unsealable, unsealed):
            os.write(fd, b"\0" * layout.required_len())
        with pytest.raises(pinframe.ImportRefused, match="MFD_ALLOW_SEALING"):
            pinframe.Tensor.import_fd(unsealable, layout)
        with pytest.raises(pinframe.ImportRefused, match="F_SEAL_SHRINK"):
            pinframe.Tensor.import_fd(unsealed, layout)
        fcntl.fcntl(unsealed, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK)
        assert pinframe.Tensor.import_fd(unsealed, layout).memory == "shm"
    finally:
        os.close(unsealable)
        os.close(unsealed)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(fit="squash"), "unknown fit"),
        (dict(rotate=45), "0, 90, 180 or 270"),
        (dict(flip="diagonal"), "unknown flip"),
        (dict(interp="cubic"), "unknown interpolation"),
        (dict(matrix="bt999"), "unknown matrix"),
        (dict(range="studio"), "unknown range"),
        (dict(pad=(1, 2, 3)), "letterbox"),
        (dict(crop=(10, 10, 40, 40)), "crop"),
        (dict(crop=(0, 0, 0, 4)), "crop"),
        (dict(std=(1.0, 0.0, 1.0)), "std"),
        (dict(mean=(float("nan"), 0.0, 0.0)), "mean"),
    ],
)
def test_bad_options(proc, kwargs, match):
    src = pinframe.Tensor.image(32, 32, "nv12")
    dst = pinframe.Tensor.image(16, 16, "planar-rgb", "f32")
    with pytest.raises(pinframe.InvalidInput, match=match):
        proc.convert(src, dst, **kwargs)


@pytest.mark.parametrize(
    "quantize,match",
    [((0.0, 0), "scale"), ((0.1, 300), "zero point"), ("0.5,3", "quantize"), ((1, 2, 3), "quantize")],
)
def test_bad_quantisation(proc, quantize, match):
    src = pinframe.Tensor.image(32, 32, "nv12")
    dst = pinframe.Tensor.image(16, 16, "rgb", "u8")
    with pytest.raises(pinframe.InvalidInput, match=match):
        proc.convert(src, dst, quantize=quantize)


def test_bad_option_types(proc):
    src = pinframe.Tensor.image(32, 32, "nv12")
    dst = pinframe.Tensor.image(16, 16, "rgb")
    with pytest.raises((TypeError, ValueError)):
        proc.convert(src, dst, mean=(0.5, 0.5))
    with pytest.raises(pinframe.InvalidInput, match="out of range"):
        proc.convert(src, dst, rotate=-90)
    with pytest.raises(TypeError):
        proc.convert(src, dst, bogus=1)


def test_bad_names():
    with pytest.raises(pinframe.InvalidInput, match="unknown backend"):
        pinframe.ImageProcessor("vulkan")
    with pytest.raises(pinframe.InvalidInput, match="unknown memory"):
        pinframe.Tensor((4,), memory="vram")
    with pytest.raises(pinframe.InvalidInput, match="unknown access"):
        pinframe.Tensor((4,)).sync_for_cpu("sideways")
    with pytest.raises(pinframe.InvalidInput, match="unknown pixel format"):
        pinframe.ImageLayout(4, 4, "nv13")
    with pytest.raises(pinframe.InvalidInput, match="stride"):
        pinframe.ImageLayout(100, 4, "rgb", stride=100)
    with pytest.raises(pinframe.InvalidInput, match="overlap"):
        pinframe.ImageLayout(8, 8, "planar-rgb", planes=[(0, 8), (8, 8), (128, 8)])


def test_same_tensor_as_source_and_destination(proc):
    t = pinframe.Tensor.image(8, 8, "rgb")
    with pytest.raises(pinframe.InvalidInput, match="same tensor"):
        proc.convert(t, t)


@pytest.mark.skipif(has_dma(), reason="this machine has DMA memory")
def test_dma_unavailable_is_memory_unavailable():
    with pytest.raises(pinframe.MemoryUnavailable, match="tried"):
        pinframe.Tensor.image(8, 8, "rgb", memory="dma")


def test_camera_errors():
    with pytest.raises(pinframe.InvalidInput, match="buffers 0 is out of range"):
        pinframe.Camera("synthetic", buffers=0)
    with pytest.raises(pinframe.InvalidInput, match="timeout"):
        pinframe.Camera("synthetic", timeout=0)
    with pytest.raises(pinframe.InvalidInput, match="buffer mode"):
        pinframe.Camera("synthetic", buffer_mode="carrier-pigeon")
    with pytest.raises(pinframe.Error) as e:
        pinframe.Camera("/dev/pinframe-no-such-camera")
    assert e.value.kind in ("i/o error", "disconnected", "invalid input")
    cam = pinframe.Camera("synthetic")
    cam.close()
    with pytest.raises(pinframe.InvalidInput, match="closed"):
        cam.next_frame()
    assert list(cam) == []  # a closed camera ends iteration


def test_auto_memory_is_never_dma_and_device_prefers_it():
    assert pinframe.Tensor((16,)).memory == "shm"
    assert pinframe.Tensor((16,), memory="auto").memory == "shm"
    device = pinframe.Tensor.image(16, 16, "rgb", memory="device").memory
    assert device == ("dma" if has_dma() else "shm")
    with pytest.raises(pinframe.InvalidInput, match="auto, device"):
        pinframe.Tensor((16,), memory="gpu")
