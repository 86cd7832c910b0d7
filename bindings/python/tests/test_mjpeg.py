"""Motion-JPEG from Python: a JPEG's bytes (a numpy array or a tensor) convert with
src_format="mjpeg", against OpenCV's decode of the same frame; the synthetic camera's
MJPEG stream; corrupt frames raise pinframe's invalid-input error and write nothing."""

import cv2
import numpy as np
import pytest

import pinframe


def scene(w, h):
    """Camera-like: smooth gradients, a softly varying blue, one hard-edged block."""
    y, x = np.mgrid[0:h, 0:w]
    blue = 128 + 90 * np.sin(x / 23.0) * np.cos(y / 17.0)
    rgb = np.stack([255 * x / w, 255 * y / h, blue], axis=-1)
    rgb[h // 4 : h // 2, w // 3 : w // 2] = (250, 250, 20)
    return rgb.round().clip(0, 255).astype(np.uint8)


def jpeg(w, h, sampling=cv2.IMWRITE_JPEG_SAMPLING_FACTOR_422, quality=88):
    bgr = cv2.cvtColor(scene(w, h), cv2.COLOR_RGB2BGR)
    ok, buf = cv2.imencode(
        ".jpg", bgr, [cv2.IMWRITE_JPEG_QUALITY, quality, cv2.IMWRITE_JPEG_SAMPLING_FACTOR, sampling]
    )
    assert ok
    return buf.reshape(-1)


@pytest.fixture
def proc():
    return pinframe.ImageProcessor("cpu")


@pytest.mark.parametrize(
    "sampling",
    [
        cv2.IMWRITE_JPEG_SAMPLING_FACTOR_422,
        cv2.IMWRITE_JPEG_SAMPLING_FACTOR_420,
        cv2.IMWRITE_JPEG_SAMPLING_FACTOR_444,
    ],
)
def test_a_jpeg_array_converts_like_opencv_decodes_it(proc, sampling):
    frame = jpeg(320, 240, sampling)
    dst = pinframe.Tensor.image(320, 240, "rgb")
    info = proc.convert(frame, dst, src_format="mjpeg")
    assert info.content == (0, 0, 320, 240)
    want = cv2.cvtColor(cv2.imdecode(frame, cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB)
    diff = np.abs(np.asarray(dst).astype(int) - want.astype(int))
    # OpenCV upsamples the chroma smoothly, pinframe replicates it (as for every YUV
    # source): they differ at colour edges only.
    assert diff.mean() < 1.0 and np.median(diff) <= 1, (diff.mean(), diff.max())


def test_a_downscale_decodes_at_a_reduced_scale_with_geometry_in_frame_pixels(proc):
    frame = jpeg(640, 480)
    dst = pinframe.Tensor.image(160, 160, "planar-rgb", "f32")
    info = proc.convert(frame, dst, src_format="mjpeg", fit="letterbox", pad=(114, 114, 114))
    # 640x480 into 160x120 content: the decoder ran at 1/4; the map back is the frame's.
    assert info.content == (0, 20, 160, 120)
    x, y = info.to_source(160.0, 140.0)
    assert (round(x, 6), round(y, 6)) == (640.0, 480.0)
    want = cv2.resize(
        cv2.cvtColor(cv2.imdecode(frame, cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB),
        (160, 120),
        interpolation=cv2.INTER_AREA,
    )
    got = (np.asarray(dst)[:, 20:140, :].transpose(1, 2, 0) * 255).round()
    assert np.abs(got - want).mean() < 1.5, np.abs(got - want).mean()


def test_a_jpeg_tensor_decodes_up_to_its_end_marker(proc):
    frame = jpeg(128, 96)
    src = pinframe.Tensor.image(128, 96, "mjpeg")
    view = np.asarray(src)
    # One row of bytes: the buffer a driver would fill, larger than any frame.
    assert view.ndim == 1 and view.size > frame.size
    view[: frame.size] = frame
    view[frame.size :] = 0xEE
    dst = pinframe.Tensor.image(64, 48, "rgb")
    proc.convert(src, dst)
    want = pinframe.Tensor.image(64, 48, "rgb")
    proc.convert(frame, want, src_format="mjpeg")
    assert (np.asarray(dst) == np.asarray(want)).all()


def test_corrupt_frames_raise_invalid_input_and_write_nothing(proc):
    frame = jpeg(160, 120)
    dst = pinframe.Tensor.image(80, 60, "rgb")
    np.asarray(dst)[...] = 7
    for bad in (frame[: frame.size // 2], np.full(4096, 0x55, np.uint8)):
        with pytest.raises(pinframe.InvalidInput, match="corrupt frame"):
            proc.convert(np.ascontiguousarray(bad), dst, src_format="mjpeg")
        assert (np.asarray(dst) == 7).all()
    proc.convert(frame, dst, src_format="mjpeg")
    assert not (np.asarray(dst) == 7).all()


def test_the_synthetic_camera_streams_mjpeg(proc):
    dst = pinframe.Tensor.image(160, 160, "rgb")
    with pinframe.Camera("synthetic", size=(320, 240), format="mjpeg") as cam:
        assert cam.layout.format == "mjpeg"
        for _ in range(30):
            with cam.next_frame() as frame:
                assert np.asarray(frame).size < 320 * 240  # the frame's length, not the buffer's
                info = proc.convert(frame, dst, fit="letterbox")
                assert info.content == (0, 20, 160, 120)
