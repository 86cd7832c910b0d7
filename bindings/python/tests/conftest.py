"""Shared fixtures of the Python package's tests (run by scripts/lanes/python)."""

import os
import pathlib
import shutil

import numpy as np
import pytest

import pinframe

REPO = pathlib.Path(__file__).resolve().parents[3]

#: Every source format pinframe converts, in the Rust `PixelFormat::ALL` order.
#: The compressed sources (decoded first; their bytes are a JPEG, not random pixels).
COMPRESSED_FORMATS = ["mjpeg"]
#: Every raw source format: the tests fill these with random pixels.
SOURCE_FORMATS = [
    f for f in pinframe.info()["backends"]["cpu"]["source_formats"] if f not in COMPRESSED_FORMATS
]
#: Every destination format (the same on every backend).
DESTINATION_FORMATS = pinframe.info()["backends"]["cpu"]["destination_formats"]
#: The colour-filter-array (Bayer) sources: rggb8 .. gbrg12p.
BAYER_FORMATS = [f for f in SOURCE_FORMATS if f[:4] in ("rggb", "bggr", "grbg", "gbrg")]
#: Sources whose samples are 16-bit little-endian words, which numpy users hold as
#: uint16 arrays: Bayer at 10, 12 and 16 bits (not the CSI-2 packed ones), y10/y12/y16 and
#: p010/p012/p016.
SIXTEEN_BIT_FORMATS = [
    f for f in SOURCE_FORMATS
    if (f in BAYER_FORMATS and f[4:] in ("10", "12", "16")) or f[:2] in ("y1", "p0")
]


def size_multiple(fmt: str):
    """The multiples an image's width and height must be (whole 2x2 CFA tiles; CSI-2
    RAW10 rows are whole 4-pixel groups)."""
    if fmt in BAYER_FORMATS:
        return (4, 2) if fmt.endswith("10p") else (2, 2)
    return (1, 1)


def bits(fmt: str) -> int:
    """Significant bits of a sample of `fmt` (8 for every 8-bit format)."""
    digits = "".join(c for c in fmt if c.isdigit())
    if fmt in BAYER_FORMATS or fmt[:2] == "y1":
        return int(digits)
    if fmt[:2] == "p0":
        return int(digits[1:])
    return 8


#: Destination element types.
DTYPES = ["u8", "i8", "f16", "f32"]
NUMPY_DTYPE = {"u8": np.uint8, "i8": np.int8, "f16": np.float16, "f32": np.float32}


def under_ci() -> bool:
    return os.environ.get("CI") in ("true", "1")


def skip_or_fail(reason: str):
    """A test that cannot run here: SKIPPED with the reason, or a failure under CI=true."""
    if under_ci():
        pytest.fail(f"cannot run under CI=true: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def cli() -> str:
    """The Rust CLI (`pinframe`), built by the host lane's `cargo test --release`."""
    candidates = [os.environ.get("PINFRAME_CLI")]
    target = os.environ.get("CARGO_TARGET_DIR") or str(REPO / "target")
    candidates.append(os.path.join(target, "release", "pinframe"))
    candidates.append(shutil.which("pinframe"))
    for c in candidates:
        if c and os.access(c, os.X_OK):
            return c
    skip_or_fail("no pinframe CLI binary (cargo build --release --bin pinframe, or set PINFRAME_CLI)")


@pytest.fixture
def proc():
    return pinframe.ImageProcessor("cpu")


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


def has_dma() -> bool:
    try:
        pinframe.Tensor((64,), memory="dma")
        return True
    except pinframe.MemoryUnavailable:
        return False


def python_runs_during(call, attempts=3):
    """Runs `call()` on this thread while another thread records timestamps as fast as it
    can; returns how many it recorded in the middle third of the call, and the call's
    duration. With the GIL held for the whole call the other thread is stopped from just
    after the call starts (a switch interval, set to 1 ms here) until it returns, so it
    records nothing in the middle, ever; with the GIL released it runs there, unless the
    machine's scheduler parks it for that whole stretch, which is why up to `attempts`
    calls are made (the first that shows it running ends the measurement)."""
    import sys
    import threading
    import time

    interval = sys.getswitchinterval()
    sys.setswitchinterval(0.001)
    try:
        for _ in range(attempts):
            stamps = []
            stop = threading.Event()

            def spin():
                clock = time.perf_counter
                while not stop.is_set():
                    stamps.append(clock())

            th = threading.Thread(target=spin)
            th.start()
            try:
                time.sleep(0.02)
                t0 = time.perf_counter()
                call()
                t1 = time.perf_counter()
            finally:
                stop.set()
                th.join()
            third = (t1 - t0) / 3
            middle = sum(1 for t in stamps if t0 + third < t < t1 - third)
            if middle:
                break
    finally:
        sys.setswitchinterval(interval)
    return middle, t1 - t0
