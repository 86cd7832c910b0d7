"""Batches from Python: `Tensor.image(..., batch=N)` and `ImageProcessor.convert_batch`.
Every slice equals `convert` of the same item into a single image, byte for byte; fewer
items leave the other slices alone; errors are found before anything is written and name
the item."""

import threading

import numpy as np
import pytest

import pinframe

W, H = 64, 48


def rng_image(shape, seed):
    return np.random.default_rng(seed).integers(0, 256, shape, dtype=np.uint8)


@pytest.fixture(scope="module")
def proc():
    return pinframe.ImageProcessor("cpu")


@pytest.fixture(scope="module")
def sources():
    """A 1280x720-ish NV12 tensor and two RGB numpy arrays of other sizes, one of them a
    strided view (padded rows)."""
    nv12 = pinframe.Tensor.from_numpy(rng_image((120 * 3 // 2, 160), 1), "nv12")
    rgb = rng_image((90, 130, 3), 2)
    padded = rng_image((70, 110, 3), 3)[:, 5:105]  # 100 wide, rows of 110 pixels
    return nv12, rgb, padded


# ---- batch tensors ----


@pytest.mark.parametrize(
    "fmt,dtype,shape",
    [
        ("rgb", "u8", (3, H, W, 3)),
        ("planar-rgb", "f32", (3, 3, H, W)),
        ("grey", "u8", (3, H, W, 1)),
        ("bgra", "f16", (3, H, W, 4)),
    ],
)
def test_a_batch_tensor_is_seen_whole(fmt, dtype, shape):
    t = pinframe.Tensor.image(W, H, fmt, dtype, batch=3)
    assert t.batch == 3
    assert t.shape == shape
    a = np.asarray(t)
    assert a.shape == shape
    assert a.ctypes.data == t.pin().address
    assert a.flags.c_contiguous
    assert np.from_dlpack(t).shape == shape
    assert tuple(t.layout.shape) == shape[1:]
    assert t.plane(0).shape[0] == 3


def test_a_single_image_is_a_batch_of_one():
    t = pinframe.Tensor.image(W, H, "rgb")
    assert t.batch == 1 and np.asarray(t).shape == (H, W, 3)
    one = pinframe.Tensor.image(W, H, "rgb", batch=1)
    assert one.batch == 1 and np.asarray(one).shape == (1, H, W, 3)


def test_a_batch_holds_at_least_one_image():
    with pytest.raises(pinframe.InvalidInput, match="at least one"):
        pinframe.Tensor.image(W, H, "rgb", batch=0)
    with pytest.raises(pinframe.InvalidInput):
        pinframe.Tensor.image(W, H, "rgb", batch=-1)


# ---- every slice equals convert of its item ----


def items_and_kwargs(sources):
    nv12, rgb, padded = sources
    items = [
        (nv12, (160 - 70, 120 - 50, 70, 50)),  # the bottom-right corner of the tensor
        (rgb, (0, 0, 40, 90), "letterbox"),  # the left edge, top to bottom
        padded,  # all of a strided array
    ]
    return items


def split(item):
    if isinstance(item, tuple):
        return item[0], (item[1] if len(item) > 1 else None), (item[2] if len(item) > 2 else None)
    return item, None, None


def reference(proc, item, fmt, dtype, **kw):
    src, crop, fit = split(item)
    single = pinframe.Tensor.image(W, H, fmt, dtype)
    args = dict(kw)
    if crop is not None:
        args["crop"] = crop
    if fit is not None:
        args["fit"] = fit
    if not isinstance(src, pinframe.Tensor):
        args["src_format"] = "rgb"
    else:
        args.pop("src_format", None)
    if args.get("fit") != "letterbox":
        args.pop("pad", None)
    info = proc.convert(src, single, **args)
    return np.asarray(single).copy(), info


@pytest.mark.parametrize(
    "fmt,dtype,kw",
    [
        ("rgb", "u8", {}),
        (
            "planar-rgb",
            "f32",
            {"mean": (0.485, 0.456, 0.406), "std": (0.229, 0.224, 0.225)},
        ),
        ("bgr", "u8", {"pad": (10, 20, 30), "flip": "h"}),
        ("planar-rgb", "f16", {"fit": "fill", "interp": "nearest"}),
    ],
)
def test_each_slice_equals_convert_of_its_item(proc, sources, fmt, dtype, kw):
    items = items_and_kwargs(sources)
    dst = pinframe.Tensor.image(W, H, fmt, dtype, batch=3)
    infos = proc.convert_batch(items, dst, src_format="rgb", **kw)
    assert len(infos) == 3 and all(isinstance(i, pinframe.ConvertInfo) for i in infos)
    out = np.asarray(dst)
    for i, item in enumerate(items):
        want, info = reference(proc, item, fmt, dtype, **kw)
        assert np.array_equal(out[i], want), f"slice {i}"
        assert infos[i].content == info.content
        assert infos[i].scale == info.scale
        assert infos[i].offset == info.offset
        assert infos[i].dst_to_src == info.dst_to_src
        assert infos[i].colorimetry == info.colorimetry


def test_convert_info_maps_each_slice_into_its_own_source(proc, sources):
    nv12, rgb, _ = sources
    dst = pinframe.Tensor.image(32, 32, "rgb", batch=3)
    infos = proc.convert_batch(
        [(nv12, (0, 0, 32, 32)), (nv12, (128, 88, 32, 32)), (rgb, (98, 58, 32, 32))],
        dst,
        src_format="rgb",
    )
    assert [i.to_source(0.0, 0.0) for i in infos] == [(0.0, 0.0), (128.0, 88.0), (98.0, 58.0)]
    assert infos[2].to_source(32.0, 32.0) == (130.0, 90.0)
    assert infos[0].colorimetry is not None and infos[2].colorimetry is None


def test_the_shared_crop_and_fit_apply_where_an_item_gives_none(proc, sources):
    nv12, _, _ = sources
    dst = pinframe.Tensor.image(W, H, "rgb", batch=2)
    proc.convert_batch([nv12, (nv12, None, "stretch")], dst, crop=(10, 10, 100, 60),
                       fit="letterbox", pad=(1, 2, 3))
    out = np.asarray(dst)
    want, _ = reference(proc, (nv12, (10, 10, 100, 60), "letterbox"), "rgb", "u8", pad=(1, 2, 3))
    assert np.array_equal(out[0], want)
    want, _ = reference(proc, (nv12, (10, 10, 100, 60), "stretch"), "rgb", "u8")
    assert np.array_equal(out[1], want)


def test_one_tensor_in_every_item_is_converted_for_each(proc):
    frame = pinframe.Tensor.from_numpy(rng_image((96, 128, 2), 7), "yuyv")
    crops = [(0, 0, 64, 48), (64, 0, 64, 48), (0, 48, 64, 48), (64, 48, 64, 48)]
    dst = pinframe.Tensor.image(W, H, "rgb", batch=4)
    proc.convert_batch([(frame, c) for c in crops], dst)
    for i, c in enumerate(crops):
        want, _ = reference(proc, (frame, c), "rgb", "u8")
        assert np.array_equal(np.asarray(dst)[i], want)


def test_a_camera_frame_is_a_batch_source(proc):
    dst = pinframe.Tensor.image(W, H, "planar-rgb", "f32", batch=2)
    with pinframe.Camera("synthetic", size=(160, 120), format="nv12") as cam:
        with cam.next_frame() as frame:
            proc.convert_batch([(frame, (0, 0, 80, 60)), (frame, (80, 60, 80, 60))], dst)
            want, _ = reference(proc, (frame, (80, 60, 80, 60)), "planar-rgb", "f32")
    assert np.array_equal(np.asarray(dst)[1], want)


# ---- fewer items than slices ----


def test_fewer_items_leave_the_other_slices_untouched(proc, sources):
    nv12, rgb, _ = sources
    dst = pinframe.Tensor.image(W, H, "rgb", batch=4)
    np.asarray(dst)[:] = 7
    infos = proc.convert_batch([nv12, rgb], dst, src_format="rgb")
    assert len(infos) == 2
    out = np.asarray(dst)
    assert np.array_equal(out[0], reference(proc, nv12, "rgb", "u8")[0])
    assert np.array_equal(out[1], reference(proc, rgb, "rgb", "u8")[0])
    assert (out[2:] == 7).all()


# ---- errors: found before anything is written ----


@pytest.fixture
def sentinel_dst():
    dst = pinframe.Tensor.image(W, H, "rgb", batch=2)
    np.asarray(dst)[:] = 0xA5
    yield dst
    assert (np.asarray(dst) == 0xA5).all(), "an error wrote into the batch"


def test_too_many_items(proc, sources, sentinel_dst):
    nv12, _, _ = sources
    with pytest.raises(pinframe.InvalidInput, match="3 items for a batch of 2"):
        proc.convert_batch([nv12, nv12, nv12], sentinel_dst)


def test_no_item(proc, sentinel_dst):
    with pytest.raises(pinframe.InvalidInput, match="0 items"):
        proc.convert_batch([], sentinel_dst)


def test_a_crop_outside_its_source_names_the_item(proc, sources, sentinel_dst):
    nv12, rgb, _ = sources
    with pytest.raises(pinframe.InvalidInput, match="batch item 1"):
        proc.convert_batch([nv12, (rgb, (100, 0, 40, 10))], sentinel_dst, src_format="rgb")
    with pytest.raises(pinframe.InvalidInput, match="batch item 0"):
        proc.convert_batch([(nv12, (0, 100, 10, 21))], sentinel_dst)


def test_a_view_of_the_batch_is_no_source(proc, sentinel_dst):
    view = np.asarray(sentinel_dst)[1]  # slice 1's own memory, as an RGB image
    with pytest.raises(pinframe.InvalidInput, match="batch item 1.*overlap"):
        proc.convert_batch([rng_image((H, W, 3), 9), view], sentinel_dst, src_format="rgb")


def test_the_batch_is_no_source_of_itself(proc, sentinel_dst):
    with pytest.raises(pinframe.InvalidInput, match="batch item 0: the source and the destination"):
        proc.convert_batch([sentinel_dst], sentinel_dst)


def test_a_source_over_the_batch_memory_is_refused(proc, sources):
    """A u8 tensor made over the batch's bytes (a tensor item, not an array) is caught by
    the library's overlap check."""
    dst = pinframe.Tensor.image(W, H, "rgb", "u8", batch=2, memory="shm")
    np.asarray(dst)[:] = 0xA5
    alias = pinframe.Tensor.import_fd(dst.fd(), pinframe.ImageLayout(W, H, "rgb"))
    with pytest.raises(pinframe.InvalidInput, match="overlap"):
        proc.convert_batch([sources[0], alias], dst)
    assert (np.asarray(dst) == 0xA5).all()


@pytest.mark.parametrize(
    "items,kw,match",
    [
        ("not a list", {}, "items must be a list"),
        ([(None,)], {}, "batch item 0: an item is a source"),
        ([(0, 0, 0, 0)], {}, "this tuple has 4"),
        ([np.zeros((8, 8, 3), np.uint8)], {}, "batch item 0: a source array needs src_format"),
        ([np.zeros((8, 8, 3), np.float32)], {"src_format": "rgb"}, "uint8"),
        (["nope"], {}, "batch item 0: the source must be a pinframe.Tensor or a numpy array"),
        ([("S", (0, 0, 4))], {}, "batch item 0: the crop"),
        ([("S", None, "squash")], {}, "batch item 0: unknown fit"),
        ([("S", None, 3)], {}, "batch item 0: the fit 3"),
        (["S"], {"pad": (1, 2, 3)}, "pad is the letterbox colour"),
        (["S"], {"src_format": "rgb"}, "no item is one"),
        (["S"], {"flip": "x"}, "unknown flip"),
    ],
)
def test_bad_items_and_options(proc, sources, sentinel_dst, items, kw, match):
    if isinstance(items, list):
        items = [
            tuple(sources[0] if e == "S" else e for e in i) if isinstance(i, tuple)
            else (sources[0] if isinstance(i, str) and i == "S" else i)
            for i in items
        ]
    with pytest.raises(pinframe.InvalidInput, match=match):
        proc.convert_batch(items, sentinel_dst, **kw)


def test_an_item_fit_letterbox_takes_the_shared_pad(proc, sources):
    nv12, _, _ = sources
    dst = pinframe.Tensor.image(W, H, "rgb", batch=1)
    proc.convert_batch([(nv12, (0, 0, 40, 40), "letterbox")], dst, pad=(9, 8, 7))
    want, _ = reference(proc, (nv12, (0, 0, 40, 40), "letterbox"), "rgb", "u8", pad=(9, 8, 7))
    assert np.array_equal(np.asarray(dst)[0], want)
    assert tuple(np.asarray(dst)[0, 0, 0]) == (9, 8, 7)


def test_convert_refuses_a_batch_destination(proc, sources):
    nv12, rgb, _ = sources
    dst = pinframe.Tensor.image(W, H, "rgb", batch=2)
    with pytest.raises(pinframe.InvalidInput, match="convert_batch"):
        proc.convert(nv12, dst)
    with pytest.raises(pinframe.InvalidInput, match="convert_batch"):
        proc.convert(rgb, dst, src_format="rgb")


def test_a_batch_slice_is_counted_as_a_frame():
    p = pinframe.ImageProcessor("cpu")
    dst = pinframe.Tensor.image(W, H, "rgb", batch=3)
    src = pinframe.Tensor.from_numpy(rng_image((H, W, 3), 4), "rgb")
    p.convert_batch([src, src, src], dst)
    assert p.stats.frames == 3


def test_crossed_batches_on_two_threads_do_not_deadlock():
    """Thread 1 converts a into b's batch while thread 2 converts b into a's: the tensor
    locks are taken in one order, so both finish."""
    a = pinframe.Tensor.image(W, H, "rgb", batch=2)
    b = pinframe.Tensor.image(W, H, "rgb", batch=2)
    errors = []

    def run(src, dst):
        p = pinframe.ImageProcessor("cpu")
        try:
            for _ in range(200):
                p.convert_batch([src, (src, (0, 0, 8, 8))], dst)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(a, b)), threading.Thread(target=run, args=(b, a))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads), "crossed batches deadlocked"
    assert not errors


def test_the_package_readme_batch_example_runs():
    import re

    from conftest import REPO

    text = (REPO / "bindings" / "python" / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert blocks, "the package README has no Python example"
    exec(compile(blocks[0], "bindings/python/README.md", "exec"), {})
