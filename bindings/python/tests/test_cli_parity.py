"""Conversions from Python give the Rust CLI's bytes, for every source format and dtype.

Each case writes random source bytes to a raw file, runs `pinframe convert` on it, and
converts the same bytes from Python through every kind of source the package takes: an
imported memfd tensor (`Tensor.import_fd`), a raw byte array with `src_layout=`, an array
in the format's tensor shape with `src_format=`, and a tensor copied with
`Tensor.from_numpy`. Every output must equal the CLI's file byte for byte.
"""

import fcntl
import os
import subprocess

import numpy as np
import pytest

import pinframe
from conftest import BAYER_FORMATS, DESTINATION_FORMATS, DTYPES, SOURCE_FORMATS, size_multiple

# Option sets: (CLI flags, Python keyword arguments).
OPTIONS = {
    "letterbox": (
        ["--fit", "letterbox", "--pad", "10,20,30"],
        dict(fit="letterbox", pad=(10, 20, 30)),
    ),
    "crop-rot90-fill-nearest-709full": (
        [
            "--crop", "3,2,30,17", "--rotate", "90", "--flip", "h", "--fit", "fill",
            "--interp", "nearest", "--matrix", "bt709", "--range", "full",
            "--mean", "0.5,0.25,0.125", "--std", "0.5,0.25,2",
        ],
        dict(
            crop=(3, 2, 30, 17), rotate=90, flip="h", fit="fill", interp="nearest",
            matrix="bt709", range="full", mean=(0.5, 0.25, 0.125), std=(0.5, 0.25, 2.0),
        ),
    ),
    "stretch-rot270-flipv-imagenet-range-only": (
        [
            "--rotate", "270", "--flip", "v", "--range", "full",
            "--mean", "0.485,0.456,0.406", "--std", "0.229,0.224,0.225",
        ],
        dict(
            rotate=270, flip="v", range="full",
            mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225),
        ),
    ),
    "quantized-letterbox": (
        [
            "--fit", "letterbox", "--mean", "0.5,0.5,0.5", "--std", "0.5,0.5,0.5",
            "--quantize", "0.0078125,3",
        ],
        dict(fit="letterbox", mean=(0.5, 0.5, 0.5), std=(0.5, 0.5, 0.5), quantize=(0.0078125, 3)),
    ),
    # The RAW steps (ignored by other sources): the CLI's flags and the keyword arguments
    # must build the same Isp.
    "isp": (
        [
            "--fit", "letterbox", "--black-level", "16,17,18,19", "--wb-gains", "1.8,1,1.4",
            "--ccm", "1.6,-0.4,-0.2,-0.3,1.5,-0.2,0,-0.5,1.5", "--gamma", "srgb",
        ],
        dict(
            fit="letterbox", black_level=(16, 17, 18, 19), wb_gains=(1.8, 1.0, 1.4),
            ccm=[[1.6, -0.4, -0.2], [-0.3, 1.5, -0.2], [0.0, -0.5, 1.5]], gamma="srgb",
        ),
    ),
}


def sizes(fmt):
    """An even size, and an odd one where the format allows it (Bayer images are whole
    2x2 tiles, CSI-2 RAW10 rows whole 4-pixel groups)."""
    mw, mh = size_multiple(fmt)
    even = (40 if mw == 4 else 38, 22)
    return (even,) if (mw, mh) != (1, 1) else (even, (37, 21))

CASES = [
    (fmt, dtype, opt, size)
    for fmt in SOURCE_FORMATS
    for dtype in DTYPES
    for opt in OPTIONS
    for size in sizes(fmt)
    if size == sizes(fmt)[0] or opt == "letterbox"
    # Quantisation applies to u8 and i8 outputs.
    if not (opt.startswith("quantized") and dtype not in ("u8", "i8"))
    # The RAW steps matter only to Bayer sources.
    if not (opt == "isp" and fmt not in BAYER_FORMATS)
]


def memfd_with(data: bytes) -> int:
    fd = os.memfd_create("pinframe-test", os.MFD_ALLOW_SEALING)
    os.write(fd, data)
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK)  # import_fd requires it
    return fd


@pytest.mark.parametrize("fmt,dtype,opt,size", CASES, ids=lambda v: str(v))
def test_python_equals_cli(cli, tmp_path, rng, proc, fmt, dtype, opt, size):
    w, h = size
    case = CASES.index((fmt, dtype, opt, size))
    dst_format = DESTINATION_FORMATS[case % len(DESTINATION_FORMATS)]
    out_w, out_h = 24, 20
    layout = pinframe.ImageLayout(w, h, fmt)
    raw = rng.integers(0, 256, layout.required_len(), dtype=np.uint8)
    src_file = tmp_path / "src.raw"
    out_file = tmp_path / "out.raw"
    raw.tofile(src_file)
    flags, kwargs = OPTIONS[opt]
    subprocess.run(
        [
            cli, "convert", "--input", str(src_file), "--input-format", fmt,
            "--input-size", f"{w}x{h}", "--output", str(out_file),
            "--output-format", dst_format, "--output-size", f"{out_w}x{out_h}",
            "--dtype", dtype, "--backend", "cpu", *flags,
        ],
        check=True,
        capture_output=True,
    )
    expected = out_file.read_bytes()

    def convert(src, **extra):
        dst = pinframe.Tensor.image(out_w, out_h, dst_format, dtype, memory="heap")
        proc.convert(src, dst, **kwargs, **extra)
        return np.asarray(dst).tobytes()

    fd = memfd_with(raw.tobytes())
    try:
        imported = pinframe.Tensor.import_fd(fd, layout)
    finally:
        os.close(fd)
    assert imported.memory == "shm"
    got = {
        "import_fd": convert(imported),
        "src_layout": convert(raw, src_layout=layout),
    }
    if (w, h) == sizes(fmt)[0]:
        shaped = raw.reshape(layout.shape)
        got["src_format"] = convert(shaped, src_format=fmt)
        got["from_numpy"] = convert(pinframe.Tensor.from_numpy(shaped, fmt, memory="heap"))
    for how, out in got.items():
        assert len(out) == len(expected), how
        assert out == expected, f"{how}: {fmt} -> {dst_format}/{dtype} differs from the CLI"


@pytest.mark.parametrize("fmt", SOURCE_FORMATS)
@pytest.mark.parametrize("memory", ["heap", "shm"])
def test_from_numpy_round_trips(rng, fmt, memory):
    """numpy → Tensor.from_numpy → numpy gives the array back, and the tensor's view is
    an alias of its memory (the same bytes the planes hold)."""
    layout = pinframe.ImageLayout(40, 30, fmt)
    arr = rng.integers(0, 256, layout.shape, dtype=np.uint8)
    t = pinframe.Tensor.from_numpy(arr, fmt, memory=memory)
    assert t.memory == memory
    assert t.shape == tuple(layout.shape)
    np.testing.assert_array_equal(np.asarray(t), arr)
    # Plane views cover the same memory.
    y = t.plane(0)
    assert y.ctypes.data == t.pin().address


@pytest.mark.parametrize("dtype", ["u8", "i8", "u16", "i16", "u32", "i32", "f16", "f32", "f64"])
def test_from_numpy_plain_and_planar_float(rng, dtype):
    np_dtype = np.dtype(
        {"u8": "u1", "i8": "i1", "u16": "u2", "i16": "i2", "u32": "u4", "i32": "i4",
         "f16": "f2", "f32": "f4", "f64": "f8"}[dtype]
    )
    arr = (rng.random((3, 7, 5)) * 100).astype(np_dtype)
    plain = pinframe.Tensor.from_numpy(arr)
    assert plain.dtype == dtype and plain.shape == (3, 7, 5) and plain.layout is None
    np.testing.assert_array_equal(np.asarray(plain), arr)
    planar = pinframe.Tensor.from_numpy(arr, "planar-rgb")
    assert planar.layout.format == "planar-rgb" and planar.layout.dtype == dtype
    np.testing.assert_array_equal(np.asarray(planar), arr)
    # A non-contiguous array is copied correctly too (from_numpy copies anything).
    strided = np.asarray(arr)[:, ::2, ::-1]
    np.testing.assert_array_equal(np.asarray(pinframe.Tensor.from_numpy(strided)), strided)
