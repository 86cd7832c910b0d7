"""ONNX Runtime reads pinframe memory in place: the model input is bound once to the
destination tensor's pin (`IOBinding.bind_input(..., buffer_ptr=pin.address)`) and the
output to another pinned tensor; every frame is converted into the bound memory and run
without rebinding, giving the same outputs as the copied path."""

import numpy as np
import pytest

import pinframe
from conftest import skip_or_fail

try:
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    import onnxruntime as ort
except ImportError as e:  # pragma: no cover - the lane installs both
    onnx = None
    IMPORT_ERROR = str(e)

H, W = 64, 64


def build_model(path):
    """A small CNN written by the test: conv 3x3 (3→4) + ReLU + global average pool →
    (1, 4, 1, 1), plus the per-channel input mean (1, 3, 1, 1)."""
    rng = np.random.default_rng(7)
    weight = numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w")
    bias = numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "b")
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("GlobalAveragePool", ["r"], ["y"]),
        helper.make_node("GlobalAveragePool", ["x"], ["m"]),
    ]
    graph = helper.make_graph(
        nodes,
        "pinframe-test",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, H, W])],
        [
            helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 1, 1]),
            helper.make_tensor_value_info("m", TensorProto.FLOAT, [1, 3, 1, 1]),
        ],
        [weight, bias],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    if onnx is None:
        skip_or_fail(f"onnx / onnxruntime not importable: {IMPORT_ERROR}")
    path = tmp_path_factory.mktemp("model") / "model.onnx"
    build_model(path)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])


def test_onnxruntime_reads_the_pin_in_place(session, proc):
    dst = pinframe.Tensor.image(W, H, "planar-rgb", "f32")  # best memory available
    pin = dst.pin()
    y = pinframe.Tensor((1, 4, 1, 1), "f32")
    y_pin = y.pin()

    io = session.io_binding()
    io.bind_input("x", "cpu", 0, np.float32, [1, 3, H, W], pin.address)
    io.bind_output("y", "cpu", 0, np.float32, [1, 4, 1, 1], y_pin.address)
    io.bind_output("m", "cpu")

    mean, std = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
    outputs = []
    with pinframe.Camera("synthetic", size=(320, 240), format="nv12") as cam:
        for _ in range(3):
            with cam.next_frame() as frame:
                proc.convert(frame, dst, fit="letterbox", mean=mean, std=std)
            pin.sync_for_cpu()
            session.run_with_iobinding(io)  # the same binding every frame
            pin.sync_for_device()
            m_bound = io.copy_outputs_to_cpu()[1]
            # The copied path: the same input, copied into a fresh numpy array.
            x_copy = np.asarray(dst).copy()[None]
            y_ref, m_ref = session.run(None, {"x": x_copy})
            np.testing.assert_array_equal(np.asarray(y), y_ref)  # written into our tensor
            np.testing.assert_array_equal(m_bound, m_ref)
            outputs.append(y_ref.copy())
    # The frames differ, so the bound input really followed the conversions.
    assert not np.array_equal(outputs[0], outputs[2])
    # ONNX Runtime wrote the output where y's pin is: its OrtValue is our memory.
    assert io.get_outputs()[0].data_ptr() == y_pin.address
    # ImageNet-normalised letterbox padding (114) in the mean of a channel is finite.
    assert np.isfinite(outputs[0]).all()


def test_bound_input_sees_a_numpy_write_without_rebinding(session):
    dst = pinframe.Tensor.image(W, H, "planar-rgb", "f32")
    pin = dst.pin()
    io = session.io_binding()
    io.bind_input("x", "cpu", 0, np.float32, [1, 3, H, W], pin.address)
    io.bind_output("m", "cpu")
    io.bind_output("y", "cpu")
    for value in (0.25, -1.5):
        with dst.map_mut() as a:
            a[...] = value
        session.run_with_iobinding(io)
        m = io.copy_outputs_to_cpu()[0]
        np.testing.assert_allclose(m.reshape(-1), [value] * 3, rtol=1e-6)
