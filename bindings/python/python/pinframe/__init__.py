"""pinframe: camera frames to inference-ready tensors on Linux, without copies.

A V4L2 camera (or the synthetic one) fills DMA-BUFs; ``ImageProcessor.convert`` crops,
rotates, letterboxes, converts YUV to RGB and normalises them in one pass straight into a
destination ``Tensor`` that your inference runtime reads in place through a ``HostPin``::

    import numpy as np
    import pinframe

    dst = pinframe.Tensor.image(640, 640, "planar-rgb", "f32")
    pin = dst.pin()                       # hand pin.address / pin.nbytes to the runtime once
    proc = pinframe.ImageProcessor()      # GL on a hardware GPU, else the CPU
    with pinframe.Camera("synthetic", size=(1280, 720)) as cam:
        for _ in range(3):
            with cam.next_frame() as frame:   # the buffer goes back to the camera after
                info = proc.convert(frame, dst, fit="letterbox",
                                    mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225))
            pin.sync_for_cpu()
            x = np.asarray(dst)               # aliases the tensor: no copy
            pin.sync_for_device()

Every error is a ``pinframe.Error``; its subclass names the kind (``InvalidInput``,
``Unsupported``, ``MemoryUnavailable``, ``Timeout``, ``AllBuffersHeld``, ``Disconnected``,
``ImportRefused``, ``DeviceError``, ``InferenceRuntimeError``, ``RuntimeUnavailable``,
``IoError``).
"""

from ._pinframe import (
    BUFFER_PROTOCOL,
    AllBuffersHeld,
    Camera,
    ConvertInfo,
    DeviceError,
    Disconnected,
    Error,
    Frame,
    HostPin,
    ImageLayout,
    ImageProcessor,
    ImportRefused,
    InvalidInput,
    IoError,
    Mapping,
    MemoryUnavailable,
    ProcessorStats,
    InferenceRuntimeError,
    RuntimeUnavailable,
    Tensor,
    Timeout,
    Unsupported,
    __version__,
    info,
)

__all__ = [
    "BUFFER_PROTOCOL",
    "AllBuffersHeld",
    "Camera",
    "ConvertInfo",
    "DeviceError",
    "Disconnected",
    "Error",
    "Frame",
    "HostPin",
    "ImageLayout",
    "ImageProcessor",
    "ImportRefused",
    "InvalidInput",
    "IoError",
    "Mapping",
    "MemoryUnavailable",
    "ProcessorStats",
    "InferenceRuntimeError",
    "RuntimeUnavailable",
    "Tensor",
    "Timeout",
    "Unsupported",
    "__version__",
    "info",
]
