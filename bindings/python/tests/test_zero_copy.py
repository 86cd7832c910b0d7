"""Zero copy, proven by addresses: numpy, the buffer protocol and DLPack alias the tensor
at its pin's address; writes through numpy reach conversions; conversions reach existing
views; 1,000 converts into a pinned destination allocate nothing per frame in Python."""

import fcntl
import gc
import os
import threading
import time
import tracemalloc

import numpy as np
import pytest

import pinframe
from conftest import has_dma, python_runs_during

VIEW_CASES = [
    (640, 640, "planar-rgb", "f32"),
    (101, 37, "rgb", "u8"),
    (64, 48, "nv12", "u8"),
    (64, 48, "i420", "u8"),
    (33, 20, "yuyv", "u8"),
    (40, 30, "bgra", "f16"),
    (17, 9, "grey", "i8"),
]
MEMORIES = ["heap", "shm"] + (["dma"] if has_dma() else [])


@pytest.mark.parametrize("memory", MEMORIES)
@pytest.mark.parametrize("w,h,fmt,dtype", VIEW_CASES)
def test_every_view_aliases_the_pin(memory, w, h, fmt, dtype):
    t = pinframe.Tensor.image(w, h, fmt, dtype, memory=memory)
    pin = t.pin()
    assert pin.alignment >= 64
    a = np.asarray(t)
    assert a.ctypes.data == pin.address
    assert a.shape == t.shape
    assert a.dtype == np.dtype({"u8": "u1", "i8": "i1", "f16": "f2", "f32": "f4"}[dtype])
    assert a.flags.writeable
    assert a.__array_interface__["data"][0] == pin.address
    b = t.__array__()  # what numpy calls without the buffer protocol
    assert b.ctypes.data == pin.address and b.shape == a.shape and b.strides == a.strides
    d = np.from_dlpack(t)
    assert d.ctypes.data == pin.address and d.shape == a.shape and d.strides == a.strides
    if pinframe.BUFFER_PROTOCOL:
        m = memoryview(t)
        assert m.shape == a.shape and m.strides == a.strides
        assert np.asarray(m).ctypes.data == pin.address
    # A write through one view is seen through the others: they are one memory.
    first = (0,) * a.ndim
    a[first] = 7
    assert d[first] == 7
    with t.map() as r:
        assert r.ctypes.data == pin.address and not r.flags.writeable
        assert r[first] == 7


def test_padded_rows_are_strided_views():
    """A layout with a row pitch larger than the row is viewed with that pitch as stride,
    not copied."""
    layout = pinframe.ImageLayout(100, 10, "rgb", stride=320)
    t = pinframe.Tensor.with_layout(layout, memory="heap")
    a = np.asarray(t)
    assert a.shape == (10, 100, 3) and a.strides == (320, 3, 1)
    assert a.ctypes.data == t.pin().address
    assert not a.flags.c_contiguous
    if pinframe.BUFFER_PROTOCOL:
        m = memoryview(t)
        assert not m.contiguous and m.strides == (320, 3, 1)
        a[...] = np.arange(3000, dtype=np.uint8).reshape(10, 100, 3)
        assert bytes(t) == np.ascontiguousarray(a).tobytes()  # strided export, honoured
    y = pinframe.Tensor.with_layout(pinframe.ImageLayout(64, 48, "i420", row_alignment=64))
    with pytest.raises(pinframe.Unsupported, match="plane"):
        np.asarray(y)
    planes = [y.plane(i) for i in range(3)]
    assert [p.shape for p in planes] == [(48, 64), (24, 32), (24, 32)]
    assert [p.strides[0] for p in planes] == [s for (_, _, s) in y.layout.planes]
    assert planes[0].ctypes.data == y.pin().address
    assert planes[1].ctypes.data == y.pin().address + y.layout.planes[1][1]


def test_numpy_writes_reach_a_conversion_and_conversions_reach_a_view(proc, rng):
    src = pinframe.Tensor.image(64, 48, "rgb", memory="heap")
    dst = pinframe.Tensor.image(32, 24, "rgb", memory="heap")
    src_view = np.asarray(src)
    dst_view = np.asarray(dst)  # made once, before any conversion
    dst_address = dst_view.ctypes.data
    for frame in range(3):
        pixels = rng.integers(0, 256, (48, 64, 3), dtype=np.uint8)
        src_view[...] = pixels  # written through numpy, no tensor call
        proc.convert(src, dst)
        # The reference: the same pixels converted from a separate copy.
        ref = pinframe.Tensor.image(32, 24, "rgb", memory="heap")
        proc.convert(pixels.copy(), ref, src_format="rgb")
        np.testing.assert_array_equal(dst_view, np.asarray(ref))
        assert dst_view.ctypes.data == dst_address == dst.pin().address
    assert proc.stats.frames == 6


def test_frames_of_a_view_change_without_recreating_it(proc):
    """One DLPack consumer and one numpy view, both made before the loop, see every
    conversion."""
    dst = pinframe.Tensor.image(16, 16, "grey", memory="shm")
    view = np.asarray(dst)
    dl = np.from_dlpack(dst)
    for value in (0, 100, 255):
        src = np.full((16, 16), value, dtype=np.uint8)
        proc.convert(src, dst, src_format="grey")
        assert (view == value).all() and (dl == value).all()


def test_a_thousand_converts_allocate_nothing_per_frame(proc):
    src = pinframe.Tensor.image(320, 240, "yuyv", memory="heap")
    dst = pinframe.Tensor.image(128, 128, "planar-rgb", "f32", memory="shm")
    pin = dst.pin()
    mean, std = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
    for _ in range(10):  # warm up: caches, interned names
        info = proc.convert(src, dst, fit="letterbox", mean=mean, std=std)
    gc.collect()
    gc.disable()
    tracemalloc.start()
    try:
        info = None
        before, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        for _ in range(1000):
            info = proc.convert(src, dst, fit="letterbox", mean=mean, std=std)
        after, peak = tracemalloc.get_traced_memory()
        # Which lines allocated what, over another 1,000 frames.
        snap_before = tracemalloc.take_snapshot()
        for _ in range(1000):
            info = proc.convert(src, dst, fit="letterbox", mean=mean, std=std)
        snap_after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
        gc.enable()
    assert info is not None and info.content == (0, 16, 128, 96)
    # Nothing accumulates: at most the one ConvertInfo still held, never per frame.
    grown = after - before
    assert grown < 1000, f"{grown} bytes more after 1,000 converts"
    # Nothing large is made per call either: the peak stays within a few small objects.
    assert peak - before < 4096, f"peak {peak - before} bytes above the start"
    this_file = snap_after.filter_traces([tracemalloc.Filter(True, __file__)])
    diff = this_file.compare_to(
        snap_before.filter_traces([tracemalloc.Filter(True, __file__)]), "lineno"
    )
    # A per-frame object would count about 1,000 here; a few are the loop's own.
    assert sum(max(s.count_diff, 0) for s in diff) <= 10, diff[:5]
    assert pin.address == np.asarray(dst).ctypes.data


def test_import_fd_shares_memory_with_the_exporter():
    a = pinframe.Tensor.image(32, 16, "nv12", memory="shm")
    b = pinframe.Tensor.import_fd(a.fd(), a.layout)
    assert b.fd() != a.fd()  # duplicated
    va, vb = np.asarray(a), np.asarray(b)
    assert va.ctypes.data != vb.ctypes.data  # two mappings
    va[3, 5] = 200
    assert vb[3, 5] == 200  # of one memory
    f = os.fdopen(os.dup(a.fd()), "rb")
    try:
        c = pinframe.Tensor.import_fd(f, a.layout)  # anything with fileno()
    finally:
        f.close()
    assert np.asarray(c)[3, 5] == 200


def test_read_only_memory_gives_read_only_views():
    fd = os.memfd_create("sealed", os.MFD_ALLOW_SEALING)
    try:
        os.write(fd, bytes(range(256)) * 12)
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_WRITE | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW)
        t = pinframe.Tensor.import_fd(fd, pinframe.ImageLayout(32, 32, "yuyv"))
    finally:
        os.close(fd)
    assert not t.writable and not t.pin().writable
    a = np.asarray(t)
    assert not a.flags.writeable
    with pytest.raises(ValueError):
        a[0, 0, 0] = 1
    with pytest.raises(pinframe.InvalidInput, match="read-only"):
        t.map_mut()
    numpy_version = tuple(int(v) for v in np.__version__.split(".")[:2])
    if numpy_version >= (2, 1):
        d = np.from_dlpack(t)  # DLPack 1.0 carries the read-only flag
        assert not d.flags.writeable and d[0, 1, 0] == 2
    else:
        with pytest.raises(BufferError, match="read-only"):
            np.from_dlpack(t)  # numpy < 2.1 asks for a 0.x capsule
    with pytest.raises(BufferError):
        t.__dlpack__()  # a 0.x capsule cannot say read-only
    if pinframe.BUFFER_PROTOCOL:
        assert memoryview(t).readonly


def test_dlpack_capsules_are_freed_when_unconsumed():
    t = pinframe.Tensor((4, 4), "f32")
    for _ in range(100):
        t.__dlpack__()
        t.__dlpack__(max_version=(1, 0))
    assert t.__dlpack_device__() == (1, 0)
    with pytest.raises(BufferError):
        t.__dlpack__(dl_device=(2, 0))
    with pytest.raises(BufferError):
        t.__dlpack__(copy=True)


def test_map_brackets_cpu_access():
    t = pinframe.Tensor.image(8, 4, "rgb", memory="shm")
    with t.map_mut() as a:
        assert a.flags.writeable and a.ctypes.data == t.pin().address
        a[...] = 9
    with t.map() as r:
        assert (r == 9).all() and not r.flags.writeable
    m = t.map()
    with m:
        with pytest.raises(pinframe.InvalidInput):
            m.__enter__()  # one entry at a time
    pin = t.pin()
    pin.sync_for_cpu("read")
    pin.sync_for_device("read")
    t.sync_for_cpu("readwrite")
    t.sync_for_device("readwrite")


def test_convert_releases_the_gil(proc):
    """While one thread is inside convert, another runs Python: it sees the destination
    half written, a state that exists only during the call (with the GIL held for the
    whole call it could never run then). No speed is assumed: calls are repeated until
    the half-written state is seen, up to a generous bound that only catches a hang."""
    import sys
    import threading
    import time

    src = pinframe.Tensor.image(1920, 1080, "nv12", memory="heap")
    with src.map_mut() as a:
        a[...] = 128
    dst = pinframe.Tensor.image(1920, 1080, "planar-rgb", "f32", memory="heap")
    view = np.asarray(dst)
    proc.parallel = False  # one thread writes the rows in order, top to bottom
    sentinel = np.float32(-7.0)
    seen = threading.Event()
    stop = threading.Event()

    flat = view.reshape(-1)
    ends = np.array([0, flat.size - 1])

    def watch():
        while not stop.is_set():
            # The first and last element in one numpy call (which holds the GIL): with the
            # GIL held by convert, both come from before or both from after a call.
            first, last = flat[ends]
            if first != sentinel and last == sentinel:
                seen.set()
                return

    interval = sys.getswitchinterval()
    sys.setswitchinterval(0.0005)
    th = threading.Thread(target=watch)
    th.start()
    try:
        deadline = time.monotonic() + 120
        while not seen.is_set() and time.monotonic() < deadline:
            view[...] = sentinel
            proc.convert(src, dst)
            assert view[-1, -1, -1] != sentinel  # every call writes every row
    finally:
        stop.set()
        th.join()
        sys.setswitchinterval(interval)
    assert seen.is_set(), "the other thread never ran while a conversion was in flight"


def test_two_threads_convert_into_one_destination_one_at_a_time():
    srcs = [np.full((32, 32, 3), v, np.uint8) for v in (10, 240)]
    dst = pinframe.Tensor.image(16, 16, "rgb", memory="heap")
    errors = []

    def work(src):
        p = pinframe.ImageProcessor("cpu")
        try:
            for _ in range(200):
                p.convert(src, dst, src_format="rgb")
                _ = dst.shape  # metadata while the other thread converts
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(s,)) for s in srcs]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors
    values = np.unique(np.asarray(dst))
    assert len(values) == 1 and values[0] in (10, 240)  # one whole frame, never mixed
