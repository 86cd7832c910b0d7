"""pinframe's convert vs the OpenCV chain a Python user would write, in one process.

    python bindings/python/bench/bench_convert.py [--iters N] [--threads 1|0]

Cases: a 1920x1080 YUYV or NV12 camera frame → 640x640 or 416x416 letterbox (pad 114),
the eight workloads of the README's CPU floor table (u8 RGB HWC, f32 planar RGB /255,
i8 planar RGB = u8 ^ 0x80), then f32 planar RGB normalised with ImageNet's mean/std, a
typical model input.

OpenCV chain (OpenCvChain: its fastest form, buffers allocated once): cv2.cvtColor
(YUV→RGB, BT.601 limited, as pinframe is asked for here) → cv2.resize (INTER_LINEAR)
straight into the content rows of a canvas padded once → what the dtype needs
(cv2.dnn.blobFromImage for f32 /255; numpy for i8 and ImageNet). pinframe: one
ImageProcessor.convert from a tensor (the frame) into a pinned tensor. The floor: one copy
of the source frame plus one fill of the destination, on as many threads as pinframe's
pool; pinframe / floor is the ratio of wall times.

RAW case: a 1920x1080 RGGB sensor frame, 8-bit (uint8) and 10-bit (a uint16 array of
codes 0..1023, what a numpy user holds for V4L2 RG10), a smooth synthetic scene mosaicked
(random noise would make the demosaic algorithms' differences the whole comparison) →
640x640 letterbox f32 planar RGB, ImageNet mean/std. pinframe: one convert with
src_format rggb8 / rggb10 and its default ISP (black level 0, gains 1, identity matrix,
linear: a plain demosaic, Malvar-He-Cutler). OpenCV: cv2.cvtColor with the Bayer code
whose output channel order is right for an RGGB layout (chosen at start by converting a
flat red patch: OpenCV's Bayer names are shifted, so this is COLOR_BayerBG2RGB, alias
COLOR_BayerRGGB2RGB, bilinear) → resize → copyMakeBorder → normalise → transpose. At 10
bits the uint16 RGB image is resized in uint16 (no precision lost before the resize, and
no extra full-frame pass) and scaled to 0..1 by 1/1023 in the normalisation, as pinframe
scales by its white level; the letterbox pad is 114 * 1023 / 255 in uint16. The outputs
differ by the demosaics (bilinear vs Malvar-He-Cutler) at edges; the max abs diff says
by how much.

Both sides run either on one thread (`--threads 1`: cv2.setNumThreads(1),
processor.parallel = False) or on one thread per core (`--threads 0`: pinframe's rayon
pool, cv2.setNumThreads(os.cpu_count())). Reported: the
median wall time and the median process CPU time per frame (CPU time is what a shared
machine measures best), and OpenCV / pinframe. The outputs are compared too (max
absolute difference), so that both do the same work.
"""

import argparse
import os
import statistics
import time
from concurrent.futures import ThreadPoolExecutor

import cv2
import numpy as np

import pinframe

# The camera workloads (W1-W8 of the CPU floor table in the README): source format,
# letterbox side, destination kind; then ImageNet f32, a typical model input.
WORKLOADS = [
    (fmt, side, kind)
    for side in (640, 416)
    for fmt, kind in (("yuyv", "u8"), ("nv12", "u8"), ("yuyv", "f32"), ("nv12", "i8"))
] + [("yuyv", 640, "imagenet"), ("nv12", 640, "imagenet")]
KINDS = {
    "u8": "rgb u8 HWC",
    "f32": "planar f32 CHW /255",
    "i8": "planar i8 CHW (u8 ^ 0x80)",
    "imagenet": "planar f32 ImageNet",
}

MEAN = np.array([0.485, 0.456, 0.406], np.float32)
STD = np.array([0.229, 0.224, 0.225], np.float32)


def frame(fmt, rng):
    """A 1920x1080 camera frame of noise inside the RGB gamut (luma 30..215, chroma
    120..136: no BT.601 limited-range pixel clips). Out-of-gamut noise would make the
    comparison measure the clamp order instead: OpenCV clamps each source pixel's RGB
    before it resizes, pinframe interpolates Y, Cb and Cr and clamps once after the
    matrix, and on noise whose pixels clip those differ by up to 110 of 255."""
    w, h = 1920, 1080
    if fmt == "yuyv":
        px = np.empty((h, w, 2), np.uint8)
        px[..., 0] = rng.integers(30, 216, (h, w))
        px[..., 1] = rng.integers(120, 137, (h, w))
        return px
    px = np.empty((h * 3 // 2, w), np.uint8)
    px[:h] = rng.integers(30, 216, (h, w))
    px[h:] = rng.integers(120, 137, (h // 2, w))
    return px


class OpenCvChain:
    """OpenCV's fastest chain for one workload, every buffer allocated once: cvtColor
    into a full-frame RGB buffer, resize straight into the content rows of a letterbox
    canvas padded once (no copyMakeBorder copy), then what the dtype needs: nothing (u8
    HWC), cv2.dnn.blobFromImage (f32 CHW /255, one pass), a numpy xor and transpose (i8),
    numpy's normalise and transpose (ImageNet)."""

    def __init__(self, fmt, side, kind):
        self.code = cv2.COLOR_YUV2RGB_YUY2 if fmt == "yuyv" else cv2.COLOR_YUV2RGB_NV12
        self.kind = kind
        self.rgb = np.empty((1080, 1920, 3), np.uint8)
        h = round(1080 * side / 1920)
        top = (side - h) // 2
        self.canvas = np.full((side, side, 3), 114, np.uint8)
        self.content = self.canvas[top:top + h]
        self.size = (side, h)
        self.planar = np.empty((3, side, side), np.uint8)

    def run(self, src):
        cv2.cvtColor(src, self.code, dst=self.rgb)
        cv2.resize(self.rgb, self.size, dst=self.content, interpolation=cv2.INTER_LINEAR)
        boxed = self.canvas
        if self.kind == "u8":
            return boxed
        if self.kind == "f32":
            return cv2.dnn.blobFromImage(boxed, 1 / 255.0)[0]
        if self.kind == "i8":
            np.bitwise_xor(boxed.transpose(2, 0, 1), 0x80, out=self.planar)
            return self.planar.view(np.int8)
        x = (boxed.astype(np.float32) / 255.0 - MEAN) / STD
        return np.ascontiguousarray(x.transpose(2, 0, 1))


class Floor:
    """The memory floor: one copy of the source frame plus one fill of the destination,
    split over as many threads as pinframe's pool (numpy releases the GIL for both)."""

    def __init__(self, threads):
        self.threads = threads
        self.pool = ThreadPoolExecutor(threads) if threads > 1 else None
        self.copies = {}

    def time(self, src, dst, iters):
        """The floor's median wall time (ms): the faster of one numpy copy + fill on the
        calling thread and the same split over the threads (a thread pool's hand-off
        costs tens of µs, which a floor must not include)."""
        single, _ = measure(lambda: self.run(src, dst, split=False), iters)
        if self.pool is None:
            return single
        split, _ = measure(lambda: self.run(src, dst, split=True), iters)
        return min(single, split)

    def run(self, src, dst, split=True):
        copy = self.copies.setdefault(src.shape, np.empty_like(src))
        parts = [(c, s) for c, s in zip(np.array_split(copy.reshape(-1), self.threads),
                                         np.array_split(src.reshape(-1), self.threads))]
        fills = np.array_split(dst.reshape(-1).view(np.uint8), self.threads)
        if self.pool is None or not split:
            np.copyto(copy, src)
            dst.reshape(-1).view(np.uint8).fill(114)
            return
        jobs = [self.pool.submit(np.copyto, c, s) for c, s in parts]
        jobs += [self.pool.submit(f.fill, 114) for f in fills]
        for job in jobs:
            job.result()


def bayer_frame(bits):
    """A 1920x1080 RGGB mosaic of a smooth colour scene: uint8 at 8 bits, else uint16
    codes 0..2^bits - 1."""
    w, h = 1920, 1080
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    r = 0.5 + 0.4 * np.sin(x / 97.0) * np.cos(y / 61.0)
    g = 0.3 + 0.6 * x / w
    b = 0.5 + 0.45 * np.sin((x + y) / 143.0)
    white = 2**bits - 1
    mosaic = np.where(
        (y % 2 == 0) & (x % 2 == 0), r, np.where((y % 2 == 1) & (x % 2 == 1), b, g)
    )
    codes = np.rint(np.clip(mosaic, 0, 1) * white)
    return codes.astype(np.uint8 if bits == 8 else np.uint16)


def rggb_code():
    """The OpenCV Bayer code that turns an RGGB layout into RGB in the right order: the
    one whose output of a flat red patch (R sites 200, others 0) is red."""
    patch = np.zeros((8, 8), np.uint8)
    patch[0::2, 0::2] = 200
    for name in ("COLOR_BayerRGGB2RGB", "COLOR_BayerBG2RGB", "COLOR_BayerRG2RGB"):
        code = getattr(cv2, name, None)
        if code is None:
            continue
        out = cv2.cvtColor(patch, code)[4, 4]
        if out[0] == 200 and out[1] == 0 and out[2] == 0:
            return name, code
    raise SystemExit("no OpenCV Bayer code turns an RGGB red patch red")


def opencv_raw_chain(src, bits, code):
    rgb = cv2.cvtColor(src, code)
    small = cv2.resize(rgb, (640, 360), interpolation=cv2.INTER_LINEAR)
    white = 2**bits - 1
    pad = 114 * white / 255
    boxed = cv2.copyMakeBorder(small, 140, 140, 0, 0, cv2.BORDER_CONSTANT, value=(pad, pad, pad))
    x = (boxed.astype(np.float32) * np.float32(1 / white) - MEAN) / STD
    return np.ascontiguousarray(x.transpose(2, 0, 1))


def measure(fn, iters):
    fn()  # warm up
    walls, cpus = [], []
    for _ in range(iters):
        w0, c0 = time.perf_counter(), time.process_time()
        fn()
        walls.append(time.perf_counter() - w0)
        cpus.append(time.process_time() - c0)
    return statistics.median(walls) * 1e3, statistics.median(cpus) * 1e3


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--threads", type=int, default=1, help="1: one thread each; 0: default pools")
    args = ap.parse_args()
    # OpenCV gets as many threads as pinframe's pool (one per core, or one).
    cv2.setNumThreads(1 if args.threads == 1 else os.cpu_count())
    proc = pinframe.ImageProcessor("cpu")
    proc.parallel = args.threads != 1
    rng = np.random.default_rng(1)
    print(f"pinframe {pinframe.__version__}, OpenCV {cv2.__version__}, numpy {np.__version__}, "
          f"threads: {'1 each' if args.threads == 1 else 'default pools'}, {args.iters} iterations")
    threads = 1 if args.threads == 1 else os.cpu_count()
    floor = Floor(threads)
    camera_frames = {}
    print("| case | pinframe wall (ms) | OpenCV wall (ms) | pinframe CPU (ms) | OpenCV CPU (ms) "
          "| OpenCV / pinframe (CPU) | floor wall (ms) | pinframe / floor (wall) | max abs diff |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for fmt, side, kind in WORKLOADS:
        pixels = camera_frames.setdefault(fmt, frame(fmt, rng))
        src = pinframe.Tensor.from_numpy(pixels, fmt)
        if kind == "u8":
            dst = pinframe.Tensor.image(side, side, "rgb", "u8")
        else:
            dtype = "f32" if kind == "imagenet" else kind
            dst = pinframe.Tensor.image(side, side, "planar-rgb", dtype)
        kw = dict(mean=tuple(MEAN), std=tuple(STD)) if kind == "imagenet" else {}
        pin = dst.pin()  # pinned once, as for a runtime
        chain = OpenCvChain(fmt, side, kind)

        def run_pinframe():
            proc.convert(src, dst, fit="letterbox", matrix="bt601", range="limited", **kw)

        pw, pc = measure(run_pinframe, args.iters)
        ow, oc = measure(lambda: chain.run(pixels), args.iters)
        fw = floor.time(pixels, np.asarray(dst), args.iters)
        run_pinframe()
        ours = np.asarray(dst).astype(np.float32)
        theirs = chain.run(pixels).astype(np.float32)
        diff = float(np.abs(ours - theirs).max())
        assert pin.address == np.asarray(dst).ctypes.data
        name = f"{fmt} 1920x1080 → {side} letterbox {KINDS[kind]}"
        print(f"| {name} | {pw:.2f} | {ow:.2f} | {pc:.2f} | {oc:.2f} | {oc / pc:.1f}x "
              f"| {fw:.3f} | {pw / fw:.2f} | {diff:.3g} |")
    code_name, code = rggb_code()
    for bits in (8, 10):
        fmt = "rggb8" if bits == 8 else "rggb10"
        pixels = bayer_frame(bits)
        src = pinframe.Tensor.from_numpy(pixels, fmt)
        dst = pinframe.Tensor.image(640, 640, "planar-rgb", "f32")
        pin = dst.pin()

        def run_pinframe():
            proc.convert(src, dst, fit="letterbox", mean=tuple(MEAN), std=tuple(STD))

        def run_opencv():
            opencv_raw_chain(pixels, bits, code)

        pw, pc = measure(run_pinframe, args.iters)
        ow, oc = measure(run_opencv, args.iters)
        run_pinframe()
        ours = np.asarray(dst)
        theirs = opencv_raw_chain(pixels, bits, code)
        diff = float(np.abs(ours - theirs).max())
        assert pin.address == np.asarray(dst).ctypes.data
        name = (f"{fmt} ({pixels.dtype}) 1920x1080 → 640 letterbox planar f32 ImageNet "
                f"(OpenCV {code_name.removeprefix('COLOR_')})")
        fw = floor.time(pixels, np.asarray(dst), args.iters)
        print(f"| {name} | {pw:.2f} | {ow:.2f} | {pc:.2f} | {oc:.2f} | {oc / pc:.1f}x "
              f"| {fw:.3f} | {pw / fw:.2f} | {diff:.3g} |")


if __name__ == "__main__":
    main()
