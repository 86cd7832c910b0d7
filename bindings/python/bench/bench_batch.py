"""A batch in pinframe vs the same items one by one vs OpenCV's chain, in one process.

    python bindings/python/bench/bench_batch.py [--iters N] [--threads 1|0]

Cases:
  * crops16: 16 square crops (120..420 pixels across, two at the frame's corners) of one
    1920x1080 NV12 frame → 16x3x224x224 f32, ImageNet mean/std (a second-stage
    classifier's input);
  * cameras4: 4 1920x1080 YUYV frames → 4x3x640x640 f32 letterbox (pad 114), ImageNet.

pinframe batch: one ImageProcessor.convert_batch into a pinned batch tensor.
pinframe singles: one ImageProcessor.convert per item into its own pinned tensor.
OpenCV: cv2.cvtColor of each frame (YUV→RGB, BT.601 limited, as pinframe is asked for
here), per item a crop view + cv2.resize (INTER_LINEAR) (+ copyMakeBorder for the
letterbox), then cv2.dnn.blobFromImages (scale 1/255, minus the mean) and a division by
the std: the chain DeepStream users port to Python.

Both sides run on one thread (`--threads 1`) or on their default pools (`--threads 0`).
Reported: median wall time per batch and the ratios, and the largest difference between
the batch and OpenCV (pixel-centre conventions and rounding differ slightly).
"""

import argparse
import statistics
import time

import cv2
import numpy as np

import pinframe

MEAN = np.array([0.485, 0.456, 0.406], np.float32)
STD = np.array([0.229, 0.224, 0.225], np.float32)


def crops():
    out = []
    for i in range(14):
        side = 120 + (i * 37) % 300
        x = min((i % 4) * 470 + (i * 13) % 60, 1920 - side)
        y = min((i // 4) * 250 + (i * 7) % 40, 1080 - side)
        out.append((x, y, side, side))
    return out + [(0, 0, 200, 200), (1720, 880, 200, 200)]


def measure(fn, iters):
    fn()
    walls = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        walls.append(time.perf_counter() - t0)
    return statistics.median(walls) * 1e3


def letterbox(rgb, size):
    h, w = rgb.shape[:2]
    s = min(size / w, size / h)
    cw, ch = round(w * s), round(h * s)
    small = cv2.resize(rgb, (cw, ch), interpolation=cv2.INTER_LINEAR)
    top, left = (size - ch) // 2, (size - cw) // 2
    return cv2.copyMakeBorder(small, top, size - ch - top, left, size - cw - left,
                              cv2.BORDER_CONSTANT, value=(114, 114, 114))


def opencv_chain(frames, codes, items, size):
    rgbs = [cv2.cvtColor(f, c) for f, c in zip(frames, codes)]
    imgs = []
    for src, crop in items:
        rgb = rgbs[src]
        if crop is not None:
            x, y, w, h = crop
            rgb = rgb[y:y + h, x:x + w]
        imgs.append(letterbox(rgb, size))
    blob = cv2.dnn.blobFromImages(imgs, 1 / 255.0, None, tuple(float(m) * 255 for m in MEAN))
    blob /= STD[None, :, None, None]
    return blob


def in_gamut_frame(fmt, rng):
    """A 1920x1080 frame of noise whose every pixel is inside the RGB gamut (luma
    30..215, chroma 120..136). On noise that clips, OpenCV (which clamps each source
    pixel's RGB before resizing) and pinframe (which interpolates Y, Cb, Cr and clamps
    once after the matrix) differ by up to ~110 of 255: the clamp order, not an error."""
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


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--threads", type=int, default=1, help="1: one thread each; 0: default pools")
    args = ap.parse_args()
    if args.threads == 1:
        cv2.setNumThreads(1)
    proc = pinframe.ImageProcessor("cpu")
    proc.parallel = args.threads != 1
    rng = np.random.default_rng(1)
    print(f"pinframe {pinframe.__version__}, OpenCV {cv2.__version__}, numpy {np.__version__}, "
          f"threads: {'1 each' if args.threads == 1 else 'default pools'}, {args.iters} iterations")
    print("| case | pinframe batch (ms) | pinframe singles (ms) | OpenCV (ms) "
          "| singles / batch | OpenCV / batch | max abs diff vs OpenCV |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    # Noise inside the RGB gamut (see in_gamut_frame).
    nv12 = in_gamut_frame("nv12", rng)
    yuyv = [in_gamut_frame("yuyv", rng) for _ in range(4)]
    cases = [
        ("crops16: 16 crops of 1080p NV12 → 16x3x224x224 f32", [nv12], ["nv12"],
         [cv2.COLOR_YUV2RGB_NV12], [(0, c) for c in crops()], 224),
        ("cameras4: 4x 1080p YUYV → 4x3x640x640 f32 letterbox", yuyv, ["yuyv"] * 4,
         [cv2.COLOR_YUV2RGB_YUY2] * 4, [(i, None) for i in range(4)], 640),
    ]
    kw = dict(fit="letterbox", mean=tuple(MEAN), std=tuple(STD), matrix="bt601", range="limited")
    for name, frames, fmts, codes, items, size in cases:
        srcs = [pinframe.Tensor.from_numpy(f, fmt) for f, fmt in zip(frames, fmts)]
        batch = pinframe.Tensor.image(size, size, "planar-rgb", "f32", batch=len(items))
        pin = batch.pin()
        singles = [pinframe.Tensor.image(size, size, "planar-rgb", "f32") for _ in items]
        batch_items = [srcs[s] if c is None else (srcs[s], c) for s, c in items]

        def run_batch():
            proc.convert_batch(batch_items, batch, **kw)

        def run_singles():
            for (s, c), dst in zip(items, singles):
                proc.convert(srcs[s], dst, crop=c, **kw)

        def run_opencv():
            opencv_chain(frames, codes, items, size)

        b = measure(run_batch, args.iters)
        s = measure(run_singles, args.iters)
        o = measure(run_opencv, args.iters)
        run_batch()
        run_singles()
        ours = np.asarray(batch)
        for i, dst in enumerate(singles):
            assert np.array_equal(ours[i], np.asarray(dst)), f"{name}: slice {i} differs"
        diff = float(np.abs(ours - opencv_chain(frames, codes, items, size)).max() * 255 * STD.min())
        assert pin.address == ours.ctypes.data
        print(f"| {name} | {b:.2f} | {s:.2f} | {o:.2f} | {s / b:.2f}x | {o / b:.2f}x | {diff:.3g} |")


if __name__ == "__main__":
    main()
