"""pinframe's Motion-JPEG convert vs OpenCV's and GStreamer's chains, in one run.

    python bindings/python/bench/bench_mjpeg.py [--iters N] [--threads 1|0] [--no-gst]

Frames: camera-like 1920x1080 and 1280x720 scenes (gradients, hard edges, sensor-like
noise), encoded 4:2:2 at quality 85 by OpenCV (libjpeg-turbo), as USB webcams send them.

Workloads: 1080p and 720p into a 640x640 letterbox (pad 114) as planar f32 (ImageNet
mean/std, CHW) and into a 416x416 letterbox as u8 RGB; 720p's centre 720x720 into
224x224 planar f32.

Contenders (each on one thread with --threads 1: cv2.setNumThreads(1),
processor.parallel = False):
  * pinframe: one ImageProcessor.convert of the JPEG's bytes (src_format="mjpeg"): the
    decoder writes the frame's YUV planes at 1/2..1/8 scale where the output allows,
    then the fused pass;
  * cv2 area / cv2 linear: cv2.imdecode → cvtColor BGR→RGB → cv2.resize (INTER_AREA or
    INTER_LINEAR) → copyMakeBorder → for f32 the normalisation and the CHW transpose;
  * cv2 reduced: cv2.imdecode with IMREAD_REDUCED_COLOR_2/4/8 (libjpeg-turbo's scaled
    decode, the largest reduction that still covers the output) → the same chain with
    INTER_AREA;
  * gst: gst-launch-1.0 `multifilesrc ! jpegdec ! videoconvert ! videoscale !
    videobox ! video/x-raw,format=RGB,... ! fakesink` over many buffers, per frame (u8
    RGB workloads only: GStreamer has no normalise-to-f32 element), startup subtracted.

Reported: median wall ms per frame, the ratio of each chain to pinframe, and the pixel
difference of pinframe's output to each OpenCV chain's (mean absolute and max, 0..255).
"""

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time

import cv2
import numpy as np

import pinframe

MEAN = np.array([0.485, 0.456, 0.406], np.float32)
STD = np.array([0.229, 0.224, 0.225], np.float32)


def camera_jpeg(w, h, rng):
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    r = 40 + 170 * x / w
    g = 60 + 150 * (1 - y / h) * (0.6 + 0.4 * np.sin(x / 150.0))
    b = 120 + 90 * np.cos((x + 2 * y) / 230.0)
    edges = np.where(((x // 160) + (y // 120)) % 2 == 0, 35, 0)
    rgb = np.stack([r + edges, g + edges, b], axis=-1) + rng.normal(0, 3, (h, w, 3))
    bgr = cv2.cvtColor(np.clip(rgb, 0, 255).astype(np.uint8), cv2.COLOR_RGB2BGR)
    ok, buf = cv2.imencode(
        ".jpg",
        bgr,
        [cv2.IMWRITE_JPEG_QUALITY, 85, cv2.IMWRITE_JPEG_SAMPLING_FACTOR,
         cv2.IMWRITE_JPEG_SAMPLING_FACTOR_422],
    )
    assert ok
    return buf.reshape(-1)


class Workload:
    def __init__(self, name, size, out, f32, crop=None):
        self.name, self.size, self.out, self.f32, self.crop = name, size, out, f32, crop

    def geometry(self):
        """(crop w, crop h, content w, content h, pad top, pad left) of the conversion."""
        w, h = self.size
        if self.crop:
            return self.crop[2], self.crop[3], self.out, self.out, 0, 0
        s = min(self.out / w, self.out / h)
        cw, ch = round(w * s), round(h * s)
        return w, h, cw, ch, (self.out - ch) // 2, (self.out - cw) // 2


WORKLOADS = [
    Workload("1080p -> 640 planar f32", (1920, 1080), 640, True),
    Workload("1080p -> 416 rgb u8", (1920, 1080), 416, False),
    Workload("720p -> 640 planar f32", (1280, 720), 640, True),
    Workload("720p -> 416 rgb u8", (1280, 720), 416, False),
    Workload("720p centre -> 224 planar f32", (1280, 720), 224, True, crop=(280, 0, 720, 720)),
]


def finish(rgb, wl):
    """Crop, resize done: letterbox and dtype as the model wants."""
    _, _, cw, ch, top, left = wl.geometry()
    if (cw, ch) != (wl.out, wl.out):
        rgb = cv2.copyMakeBorder(
            rgb, top, wl.out - ch - top, left, wl.out - cw - left, cv2.BORDER_CONSTANT,
            value=(114, 114, 114),
        )
    if not wl.f32:
        return rgb
    x = (rgb.astype(np.float32) / 255.0 - MEAN) / STD
    return np.ascontiguousarray(x.transpose(2, 0, 1))


def opencv_chain(jpeg, wl, interp, reduced=1):
    flag = {1: cv2.IMREAD_COLOR, 2: cv2.IMREAD_REDUCED_COLOR_2, 4: cv2.IMREAD_REDUCED_COLOR_4,
            8: cv2.IMREAD_REDUCED_COLOR_8}[reduced]
    bgr = cv2.imdecode(jpeg, flag)
    if wl.crop:
        x, y, w, h = (v // reduced for v in wl.crop)
        bgr = bgr[y:y + h, x:x + w]
    _, _, cw, ch, _, _ = wl.geometry()
    small = cv2.resize(bgr, (cw, ch), interpolation=interp)
    return finish(cv2.cvtColor(small, cv2.COLOR_BGR2RGB), wl)


def reduction(wl):
    """The largest 1/2^k at which the crop still covers the content on both axes."""
    crop_w, crop_h, cw, ch, _, _ = wl.geometry()
    for r in (8, 4, 2):
        if crop_w // r >= cw and crop_h // r >= ch:
            return r
    return 1


def measure(fn, iters):
    fn()
    walls = []
    for _ in range(iters):
        t = time.perf_counter()
        fn()
        walls.append(time.perf_counter() - t)
    return statistics.median(walls) * 1e3


def as_u8_rgb(out, wl):
    """An output as 0..255 HWC, for the pixel comparison."""
    if wl.f32:
        return (out.transpose(1, 2, 0) * STD + MEAN) * 255.0
    return out.astype(np.float64)


def gst_ms(jpeg_path, wl, frames):
    """Per-frame ms of GStreamer's jpegdec chain (u8 RGB letterbox), startup subtracted."""
    w, h = wl.size
    _, _, cw, ch, top, left = wl.geometry()
    def run(n):
        pipeline = (
            f"multifilesrc location={jpeg_path} loop=true num-buffers={n} "
            f"caps=image/jpeg,width={w},height={h},framerate=30/1 ! jpegdec ! videoconvert ! "
            f"videoscale ! video/x-raw,width={cw},height={ch} ! "
            f"videobox top=-{top} bottom=-{wl.out - ch - top} left=-{left} "
            f"right=-{wl.out - cw - left} fill=black ! videoconvert ! "
            f"video/x-raw,format=RGB,width={wl.out},height={wl.out} ! fakesink sync=false"
        )
        t = time.perf_counter()
        subprocess.run(["gst-launch-1.0", "-q", *pipeline.split()], check=True,
                       stdout=subprocess.DEVNULL)
        return time.perf_counter() - t
    run(2)
    small, large = min(run(5) for _ in range(2)), min(run(frames + 5) for _ in range(2))
    return (large - small) / frames * 1e3


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--threads", type=int, default=1, help="1: one thread each; 0: default pools")
    ap.add_argument("--no-gst", action="store_true", help="skip the GStreamer chain")
    args = ap.parse_args()
    if args.threads == 1:
        cv2.setNumThreads(1)
        os.environ["GST_VIDEO_CONVERT_N_THREADS"] = "1"
    proc = pinframe.ImageProcessor("cpu")
    proc.parallel = args.threads != 1
    gst = not args.no_gst and shutil.which("gst-launch-1.0")
    rng = np.random.default_rng(7)
    tmp = tempfile.mkdtemp(prefix="pinframe-bench-mjpeg-")
    print(f"pinframe {pinframe.__version__}, OpenCV {cv2.__version__}, numpy {np.__version__}, "
          f"threads: {'1 each' if args.threads == 1 else 'default pools'}, {args.iters} iterations"
          f"{'' if gst else ', no GStreamer'}; medians, ms per frame")
    print("| workload | JPEG KB | pinframe | cv2 area | cv2 linear | cv2 reduced | gst "
          "| best other / pinframe | MAD / max vs cv2 area | vs cv2 linear | vs cv2 reduced |")
    print("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
    jpegs = {}
    for wl in WORKLOADS:
        if wl.size not in jpegs:
            jpegs[wl.size] = camera_jpeg(*wl.size, rng)
        jpeg = jpegs[wl.size]
        if wl.f32:
            dst = pinframe.Tensor.image(wl.out, wl.out, "planar-rgb", "f32")
            kw = dict(mean=tuple(MEAN), std=tuple(STD))
        else:
            dst = pinframe.Tensor.image(wl.out, wl.out, "rgb", "u8")
            kw = {}
        if wl.crop:
            kw["crop"] = wl.crop
        else:
            kw.update(fit="letterbox", pad=(114, 114, 114))
        run_pf = lambda: proc.convert(jpeg, dst, src_format="mjpeg", **kw)  # noqa: E731
        red = reduction(wl)
        chains = {
            "area": lambda: opencv_chain(jpeg, wl, cv2.INTER_AREA),
            "linear": lambda: opencv_chain(jpeg, wl, cv2.INTER_LINEAR),
            "reduced": lambda: opencv_chain(jpeg, wl, cv2.INTER_AREA, red),
        }
        t_pf = measure(run_pf, args.iters)
        times = {k: measure(f, args.iters) for k, f in chains.items()}
        ours = as_u8_rgb(np.asarray(dst), wl)
        diffs = []
        for k, f in chains.items():
            d = np.abs(ours - as_u8_rgb(f(), wl))
            diffs.append(f"{d.mean():.2f} / {d.max():.0f}")
        t_gst = None
        if gst and not wl.f32:
            path = os.path.join(tmp, f"{wl.size[0]}x{wl.size[1]}.jpg")
            jpeg.tofile(path)
            t_gst = gst_ms(path, wl, max(100, args.iters * 4))
        others = list(times.values()) + ([t_gst] if t_gst else [])
        print(f"| {wl.name} | {jpeg.size / 1024:.0f} | {t_pf:.2f} | {times['area']:.2f} | "
              f"{times['linear']:.2f} | {times['reduced']:.2f} (1/{red}) | "
              f"{f'{t_gst:.2f}' if t_gst else 'n/a'} | {min(others) / t_pf:.2f}x | "
              + " | ".join(diffs) + " |")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
