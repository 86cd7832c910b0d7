"""LiteRT from Python reads pinframe memory in place: the face detector's input bound once
to a pinned tensor (pinframe.litert, over the Rust binding), frames converted into it and
run without rebinding, outputs equal to the copied path (the same pixels copied into
LiteRT's own input buffer)."""

import os
import pathlib

import numpy as np
import pytest

import pinframe
from conftest import REPO, skip_or_fail
from pinframe import litert

ASSETS = pathlib.Path(os.environ.get("PINFRAME_ASSETS", REPO / "target" / "assets"))


@pytest.fixture(scope="module")
def model():
    lib = ASSETS / "litert" / "libLiteRt.so"
    path = ASSETS / "models" / "face_detection_short_range.tflite"
    try:
        env = litert.Environment(str(lib) if lib.is_file() and "PINFRAME_LITERT_LIB" not in os.environ else None)
    except pinframe.RuntimeUnavailable as e:
        skip_or_fail(f"LiteRT is absent ({e}); run scripts/assets")
    if not path.is_file():
        skip_or_fail(f"{path} is missing; run scripts/assets")
    return litert.Model.from_file(env, str(path))


def test_litert_reads_the_pin_in_place(model, proc):
    (inp,) = model.inputs
    assert inp["shape"] == [1, 128, 128, 3] and inp["dtype"] == "f32"
    x = pinframe.Tensor.image(128, 128, "rgb", "f32")
    bound = litert.CompiledModel(model)
    assert bound.bind_input(0, x) in ("host", "dmabuf", "host-over-dmabuf")
    assert bound.input_host_address(0) == x.pin().address  # LiteRT's buffer is the pin
    copied = litert.CompiledModel(model)
    copied.allocate_input(0)
    assert copied.input_host_address(0) != x.pin().address
    created = bound.stats["buffers_created"]

    results = []
    with pinframe.Camera("synthetic", size=(640, 480), format="yuyv") as cam:
        for _ in range(3):
            with cam.next_frame() as frame:
                proc.convert(frame, x, fit="letterbox", pad=(0, 0, 0),
                             mean=(0.5, 0.5, 0.5), std=(0.5, 0.5, 0.5))
            bound.run()  # no rebinding: reads what the conversion wrote
            copied.copy_input(0, np.asarray(x).copy())
            copied.run()
            outs = [bound.output(i) for i in range(len(model.outputs))]
            refs = [copied.output(i) for i in range(len(model.outputs))]
            for o, r in zip(outs, refs):
                assert not o.flags.writeable
                np.testing.assert_array_equal(o, r)
            assert outs[0].ctypes.data == bound.output_host_address(0)  # a view, no copy
            results.append(outs[1].copy())
    assert not np.array_equal(results[0], results[2])  # the frames differ, so did the input
    assert bound.stats["buffers_created"] == created  # steady state creates nothing
    assert bound.stats["runs"] == 3


def test_litert_binding_errors(model):
    compiled = litert.CompiledModel(model)
    with pytest.raises(pinframe.InvalidInput):
        compiled.bind_input(0, pinframe.Tensor.image(64, 64, "rgb", "f32"))  # wrong shape
    with pytest.raises(pinframe.InvalidInput):
        compiled.bind_input(0, pinframe.Tensor.image(128, 128, "rgb", "u8"))  # wrong dtype
    with pytest.raises(pinframe.InvalidInput):
        compiled.copy_input(0, np.zeros((1, 128, 128, 3), np.float32))  # not allocated
    with pytest.raises(pinframe.InvalidInput):
        litert.CompiledModel(model, accelerators=["tpu"])
    with pytest.raises(pinframe.RuntimeUnavailable):
        litert.Environment("/nonexistent/libLiteRt.so")


def test_the_wheel_is_found_by_this_interpreter(tmp_path):
    """`Environment()` finds an `ai_edge_litert` package on this interpreter's own path
    (an un-activated venv's site-packages), not by asking the `python3` on PATH, which
    here cannot see it."""
    import subprocess
    import sys

    lib = ASSETS / "litert" / "libLiteRt.so"
    if not lib.is_file():
        skip_or_fail(f"{lib} is missing; run scripts/assets")
    package = tmp_path / "ai_edge_litert"
    package.mkdir()
    (package / "__init__.py").write_text("raise ImportError('found, never imported')\n")
    (package / "libLiteRt.so").symlink_to(lib)
    code = (
        f"import sys; sys.path.insert(0, {str(tmp_path)!r}); "
        "from pinframe import litert; print(litert.Environment().library_path)"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("PINFRAME_LITERT_LIB", "PYTHON", "VIRTUAL_ENV", "LD_LIBRARY_PATH")}
    env["PATH"] = "/usr/bin:/bin"  # no venv on PATH: python3 there lacks the package
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str(package / "libLiteRt.so")
