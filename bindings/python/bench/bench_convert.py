"""pinframe's convert vs the OpenCV chain a Python user would write, in one process.

    python bindings/python/bench/bench_convert.py [--iters N] [--threads 1|0]

Case: a 1920x1080 YUYV or NV12 camera frame → 640x640 letterbox (pad 114), into
  * u8 RGB (HWC), and
  * f32 planar RGB normalised with ImageNet's mean/std (CHW), a typical model input.

OpenCV chain: cv2.cvtColor (YUV→RGB, BT.601 limited, as pinframe is asked for here) →
cv2.resize (INTER_LINEAR, 640x360) → cv2.copyMakeBorder (114) → for f32, numpy
`(x / 255 - mean) / std` and a transpose to CHW (contiguous). pinframe: one
ImageProcessor.convert from a tensor (the frame) into a pinned tensor.

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


if __name__ == "__main__":
    main()
