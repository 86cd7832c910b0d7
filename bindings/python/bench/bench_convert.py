"""pinframe's convert vs the OpenCV chain a Python user would write, in one process.

    python bindings/python/bench/bench_convert.py [--iters N] [--threads 1|0]

Case: a 1920x1080 YUYV or NV12 camera frame → 640x640 letterbox (pad 114), into
  * u8 RGB (HWC), and
  * f32 planar RGB normalised with ImageNet's mean/std (CHW), a typical model input.

OpenCV chain: cv2.cvtColor (YUV→RGB, BT.601 limited, as pinframe is asked for here) →
cv2.resize (INTER_LINEAR, 640x360) → cv2.copyMakeBorder (114) → for f32, numpy
`(x / 255 - mean) / std` and a transpose to CHW (contiguous). pinframe: one
ImageProcessor.convert from a tensor (the frame) into a pinned tensor.

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
processor.parallel = False) or on their default pools (`--threads 0`). Reported: the
median wall time and the median process CPU time per frame (CPU time is what a shared
machine measures best), and OpenCV / pinframe. The outputs are compared too (max
absolute difference), so that both do the same work.
"""

import argparse
import statistics
import time

import cv2
import numpy as np

import pinframe

MEAN = np.array([0.485, 0.456, 0.406], np.float32)
STD = np.array([0.229, 0.224, 0.225], np.float32)


def frame(fmt, rng):
    w, h = 1920, 1080
    if fmt == "yuyv":
        return rng.integers(16, 236, (h, w, 2), dtype=np.uint8)
    return rng.integers(16, 236, (h * 3 // 2, w), dtype=np.uint8)


def opencv_chain(src, fmt, planar_f32):
    code = cv2.COLOR_YUV2RGB_YUY2 if fmt == "yuyv" else cv2.COLOR_YUV2RGB_NV12
    rgb = cv2.cvtColor(src, code)
    small = cv2.resize(rgb, (640, 360), interpolation=cv2.INTER_LINEAR)
    boxed = cv2.copyMakeBorder(small, 140, 140, 0, 0, cv2.BORDER_CONSTANT, value=(114, 114, 114))
    if not planar_f32:
        return boxed
    x = (boxed.astype(np.float32) / 255.0 - MEAN) / STD
    return np.ascontiguousarray(x.transpose(2, 0, 1))


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
    if args.threads == 1:
        cv2.setNumThreads(1)
    proc = pinframe.ImageProcessor("cpu")
    proc.parallel = args.threads != 1
    rng = np.random.default_rng(1)
    print(f"pinframe {pinframe.__version__}, OpenCV {cv2.__version__}, numpy {np.__version__}, "
          f"threads: {'1 each' if args.threads == 1 else 'default pools'}, {args.iters} iterations")
    print("| case | pinframe wall (ms) | OpenCV wall (ms) | pinframe CPU (ms) | OpenCV CPU (ms) "
          "| OpenCV / pinframe (CPU) | max abs diff |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for fmt in ("yuyv", "nv12"):
        pixels = frame(fmt, rng)
        src = pinframe.Tensor.from_numpy(pixels, fmt)
        for planar_f32 in (False, True):
            if planar_f32:
                dst = pinframe.Tensor.image(640, 640, "planar-rgb", "f32")
                kw = dict(mean=tuple(MEAN), std=tuple(STD))
                name = f"{fmt} 1920x1080 → 640 letterbox planar f32 ImageNet"
            else:
                dst = pinframe.Tensor.image(640, 640, "rgb", "u8")
                kw = {}
                name = f"{fmt} 1920x1080 → 640 letterbox rgb u8"
            pin = dst.pin()  # pinned once, as for a runtime

            def run_pinframe():
                proc.convert(src, dst, fit="letterbox", matrix="bt601", range="limited", **kw)

            def run_opencv():
                opencv_chain(pixels, fmt, planar_f32)

            pw, pc = measure(run_pinframe, args.iters)
            ow, oc = measure(run_opencv, args.iters)
            run_pinframe()
            ours = np.asarray(dst).astype(np.float32)
            theirs = opencv_chain(pixels, fmt, planar_f32).astype(np.float32)
            diff = float(np.abs(ours - theirs).max())
            assert pin.address == np.asarray(dst).ctypes.data
            print(f"| {name} | {pw:.2f} | {ow:.2f} | {pc:.2f} | {oc:.2f} | {oc / pc:.1f}x | {diff:.3g} |")
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
        print(f"| {name} | {pw:.2f} | {ow:.2f} | {pc:.2f} | {oc:.2f} | {oc / pc:.1f}x | {diff:.3g} |")


if __name__ == "__main__":
    main()
