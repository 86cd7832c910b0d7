"""Type stubs of pinframe's extension module (the names `pinframe` re-exports)."""

from __future__ import annotations

import os
from types import TracebackType
from typing import Any, Iterator, Literal, Optional, Sequence, Tuple, Type, Union

import numpy as np

__version__: str
#: True when this build exports the buffer protocol (the stable ABI has it from 3.11).
BUFFER_PROTOCOL: bool

DType = Literal["u8", "i8", "u16", "i16", "u32", "i32", "f16", "f32", "f64"]
DTypeLike = Union[DType, str, np.dtype[Any], Type[np.generic]]
MemoryName = Literal["heap", "shm", "dma"]
# What a constructor's `memory=` takes: None/"auto" (memfd, else heap), "device" (dma,
# else memfd, else heap) or one kind.
MemoryRequestName = Literal["auto", "device", "heap", "shm", "dma"]
AccessName = Literal["read", "write", "readwrite"]
FormatName = Literal[
    "yuyv", "uyvy", "yvyu", "vyuy", "nv12", "nv21", "nv16", "nv61", "i420", "yv12",
    "grey", "rgb", "bgr", "rgba", "bgra", "planar-rgb", "planar-bgr",
    # Sources only: Bayer at 8 bits, 10/12/16 bits in 16-bit words, CSI-2 packed 10/12;
    # deep grey; 4:2:0 with 16-bit samples.
    "rggb8", "bggr8", "grbg8", "gbrg8", "rggb10", "bggr10", "grbg10", "gbrg10",
    "rggb12", "bggr12", "grbg12", "gbrg12", "rggb16", "bggr16", "grbg16", "gbrg16",
    "rggb10p", "bggr10p", "grbg10p", "gbrg10p", "rggb12p", "bggr12p", "grbg12p", "gbrg12p",
    "y10", "y12", "y16", "p010", "p012", "p016",
]
FdLike = Union[int, "os.PathLike[str]", Any]
FitName = Literal["stretch", "letterbox", "fill"]
CropBox = Tuple[int, int, int, int]
# A `convert_batch` item: a source (a Tensor or a numpy array), `(source, crop)` or
# `(source, crop, fit)`.
BatchItem = Union[
    "Tensor",
    np.ndarray,
    Tuple[Union["Tensor", np.ndarray], Optional[CropBox]],
    Tuple[Union["Tensor", np.ndarray], Optional[CropBox], Optional[FitName]],
]

class Error(Exception):
    """Base class of every pinframe error; `kind` names it ("invalid input", ...)."""

    kind: Optional[str]

class InvalidInput(Error, ValueError): ...
class Unsupported(Error): ...
class MemoryUnavailable(Error): ...
class Timeout(Error, TimeoutError): ...
class AllBuffersHeld(Error): ...
class Disconnected(Error): ...
class ImportRefused(Error): ...
class DeviceError(Error): ...
class InferenceRuntimeError(Error): ...
class RuntimeUnavailable(Error): ...
class IoError(Error, OSError): ...

class ImageLayout:
    """Where each plane of an image lies in its buffer(s) (the Rust `ImageLayout`)."""

    def __init__(
        self,
        width: int,
        height: int,
        format: FormatName | str,
        dtype: Optional[DTypeLike] = None,
        stride: Optional[int] = None,
        planes: Optional[Sequence[Sequence[int]]] = None,
        row_alignment: Optional[int] = None,
    ) -> None: ...
    @property
    def width(self) -> int: ...
    @property
    def height(self) -> int: ...
    @property
    def format(self) -> str: ...
    @property
    def dtype(self) -> DType: ...
    @property
    def planes(self) -> list[Tuple[int, int, int]]:
        """Each plane as (buffer, offset, stride)."""
    @property
    def buffer_count(self) -> int: ...
    @property
    def shape(self) -> list[int]: ...
    @property
    def modifier(self) -> int: ...
    @property
    def colorimetry(self) -> Optional[Tuple[str, str]]: ...
    def required_len(self, buffer: int = 0) -> int: ...
    def allocation_len(self, buffer: int = 0) -> int: ...
    def with_colorimetry(
        self, matrix: Optional[str] = None, range: Optional[str] = None
    ) -> ImageLayout: ...
    def with_modifier(self, modifier: int) -> ImageLayout: ...

class HostPin:
    """A stable host address for a tensor's bytes, handed to a runtime once."""

    @property
    def address(self) -> int: ...
    @property
    def nbytes(self) -> int: ...
    @property
    def alignment(self) -> int: ...
    @property
    def dtype(self) -> DType: ...
    @property
    def writable(self) -> bool: ...
    @property
    def tensor(self) -> Tensor: ...
    def sync_for_cpu(self, access: AccessName | str = "read") -> None: ...
    def sync_for_device(self, access: AccessName | str = "read") -> None: ...

class Mapping:
    """`with t.map() as a:` / `with t.map_mut() as a:` — dma-buf sync around a view."""

    def __enter__(self) -> np.ndarray: ...
    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> bool: ...

class Tensor:
    """An n-dimensional array in heap, memfd (shm) or DMA-BUF memory; views alias it."""

    def __init__(
        self,
        shape: Sequence[int],
        dtype: Optional[DTypeLike] = None,
        memory: Optional[MemoryRequestName | str] = None,
    ) -> None: ...
    @staticmethod
    def image(
        width: int,
        height: int,
        format: FormatName | str,
        dtype: Optional[DTypeLike] = None,
        memory: Optional[MemoryRequestName | str] = None,
        *,
        batch: Optional[int] = None,
    ) -> Tensor:
        """An image tensor; `batch=N` makes N images of one buffer each, slice after
        slice (shape `(N, h, w, c)`, `(N, 3, h, w)` planar), for `convert_batch`."""
        ...
    @staticmethod
    def with_layout(layout: ImageLayout, memory: Optional[MemoryRequestName | str] = None) -> Tensor: ...
    @staticmethod
    def import_fd(fd: Union[FdLike, Sequence[FdLike]], layout: ImageLayout) -> Tensor:
        """Imports a dma-buf or memfd (duplicated). A memfd needs F_SEAL_SHRINK (else
        ImportRefused). Aliasing rule: while a view of the tensor is alive (map(), a numpy
        array, memoryview or DLPack capsule over it), nobody else writes the bytes it
        covers; while a map_mut() view is alive, nobody else reads or writes them."""
        ...
    @staticmethod
    def from_numpy(
        array: Any,
        format: Optional[FormatName | str] = None,
        memory: Optional[MemoryRequestName | str] = None,
    ) -> Tensor: ...
    @property
    def shape(self) -> Tuple[int, ...]: ...
    @property
    def dtype(self) -> DType: ...
    @property
    def memory(self) -> MemoryName: ...
    @property
    def layout(self) -> Optional[ImageLayout]: ...
    @property
    def batch(self) -> int:
        """Images in the tensor: N for `Tensor.image(..., batch=N)`, else 1."""
        ...
    @property
    def nbytes(self) -> int: ...
    @property
    def buffer_count(self) -> int: ...
    @property
    def dma_route(self) -> Optional[str]: ...
    @property
    def writable(self) -> bool: ...
    def buffer_len(self, index: int = 0) -> int: ...
    def fd(self, index: int = 0) -> Optional[int]: ...
    def pin(self) -> HostPin: ...
    def sync_for_cpu(self, access: AccessName | str = "read") -> None: ...
    def sync_for_device(self, access: AccessName | str = "read") -> None: ...
    def map(self) -> Mapping: ...
    def map_mut(self) -> Mapping: ...
    def plane(self, index: int) -> np.ndarray: ...
    def set_layout(self, layout: ImageLayout) -> None: ...
    def __array__(self, dtype: Any = None, copy: Optional[bool] = None) -> np.ndarray: ...
    def __dlpack__(
        self,
        *,
        stream: Optional[int] = None,
        max_version: Optional[Tuple[int, int]] = None,
        dl_device: Optional[Tuple[int, int]] = None,
        copy: Optional[bool] = None,
    ) -> Any: ...
    def __dlpack_device__(self) -> Tuple[int, int]: ...

class Frame(Tensor):
    """A camera frame: a u8 tensor requeued to the camera when released."""

    @property
    def sequence(self) -> int: ...
    @property
    def timestamp(self) -> float: ...
    @property
    def buffer_index(self) -> int: ...
    @property
    def bytesused(self) -> int: ...
    @property
    def released(self) -> bool: ...
    def release(self) -> None: ...
    def __enter__(self) -> Frame: ...
    def __exit__(self, *exc: object) -> bool: ...

class ConvertInfo:
    """What a conversion did: map detections back with `to_source(x, y)`."""

    @property
    def scale(self) -> Tuple[float, float]: ...
    @property
    def offset(self) -> Tuple[int, int]: ...
    @property
    def content(self) -> Tuple[int, int, int, int]: ...
    @property
    def colorimetry(self) -> Optional[Tuple[str, str]]: ...
    @property
    def dst_to_src(self) -> Tuple[Tuple[float, float, float], Tuple[float, float, float]]: ...
    def to_source(self, x: float, y: float) -> Tuple[float, float]: ...

class ProcessorStats:
    imports: int
    cache_hits: int
    uploads: int
    readbacks: int
    cpu_fallbacks: int
    frames: int

class ImageProcessor:
    """Converts images on the CPU or OpenGL ES, in one pass, into a tensor."""

    def __init__(self, backend: Literal["auto", "cpu", "gl"] | str = "auto") -> None: ...
    @property
    def backend(self) -> Literal["cpu", "gl"]: ...
    @property
    def stats(self) -> ProcessorStats: ...
    parallel: bool
    def convert(
        self,
        src: Union[Tensor, np.ndarray, Any],
        dst: Tensor,
        *,
        fit: Optional[Literal["stretch", "letterbox", "fill"]] = None,
        pad: Optional[Tuple[int, int, int]] = None,
        crop: Optional[Tuple[int, int, int, int]] = None,
        rotate: Literal[0, 90, 180, 270] = 0,
        flip: Optional[Literal["none", "h", "v"]] = None,
        mean: Optional[Tuple[float, float, float]] = None,
        std: Optional[Tuple[float, float, float]] = None,
        quantize: Optional[
            Union[Tuple[float, int], Tuple[Tuple[float, float, float], Tuple[int, int, int]]]
        ] = None,
        interp: Optional[Literal["bilinear", "nearest"]] = None,
        matrix: Optional[Literal["bt601", "bt709", "bt2020"]] = None,
        range: Optional[Literal["limited", "full"]] = None,
        src_format: Optional[FormatName | str] = None,
        src_layout: Optional[ImageLayout] = None,
        black_level: Optional[Union[int, Tuple[int, int, int, int]]] = None,
        wb_gains: Optional[Tuple[float, float, float]] = None,
        ccm: Optional[Union[Sequence[Sequence[float]], Sequence[float], np.ndarray]] = None,
        gamma: Optional[Literal["linear", "srgb"]] = None,
    ) -> ConvertInfo:
        """Converts `src` into `dst` in one pass. RAW (Bayer) sources also take
        `black_level` (one code or R, Gr, Gb, B, in the source's units, below its white
        level), `wb_gains` (R, G, B), `ccm` (3x3, camera RGB to output RGB) and `gamma`;
        bad values raise InvalidInput (a ValueError)."""
        ...
    def convert_batch(
        self,
        items: Sequence[BatchItem],
        dst: Tensor,
        *,
        fit: Optional[Literal["stretch", "letterbox", "fill"]] = None,
        pad: Optional[Tuple[int, int, int]] = None,
        crop: Optional[Tuple[int, int, int, int]] = None,
        rotate: Literal[0, 90, 180, 270] = 0,
        flip: Optional[Literal["none", "h", "v"]] = None,
        mean: Optional[Tuple[float, float, float]] = None,
        std: Optional[Tuple[float, float, float]] = None,
        quantize: Optional[
            Union[Tuple[float, int], Tuple[Tuple[float, float, float], Tuple[int, int, int]]]
        ] = None,
        interp: Optional[Literal["bilinear", "nearest"]] = None,
        matrix: Optional[Literal["bt601", "bt709", "bt2020"]] = None,
        range: Optional[Literal["limited", "full"]] = None,
        src_format: Optional[FormatName | str] = None,
        src_layout: Optional[ImageLayout] = None,
        black_level: Optional[Union[int, Tuple[int, int, int, int]]] = None,
        wb_gains: Optional[Tuple[float, float, float]] = None,
        ccm: Optional[Union[Sequence[Sequence[float]], Sequence[float], np.ndarray]] = None,
        gamma: Optional[Literal["linear", "srgb"]] = None,
    ) -> list[ConvertInfo]:
        """Converts item `i` into slice `i` of the batch tensor `dst`
        (`Tensor.image(..., batch=N)`), 1 to N items, each as `convert` would with its
        own crop and fit (`(source, crop)` or `(source, crop, fit)`; None = the shared
        keyword). The keywords are shared; `src_format`/`src_layout` describe every numpy
        item. Fewer items leave the other slices untouched. Everything is checked before
        anything is written; errors (InvalidInput, ...) name the item."""
        ...

class Camera:
    """A V4L2 camera or the synthetic one; an iterator of frames and a context manager."""

    def __init__(
        self,
        source: str,
        size: Optional[Tuple[int, int]] = None,
        format: Optional[FormatName | str] = None,
        fps: Optional[int] = None,
        buffers: Optional[int] = None,
        buffer_mode: Literal["auto", "dmabuf", "mmap"] | str = "auto",
        timeout: float = 5.0,
    ) -> None: ...
    def next_frame(self, timeout: Optional[float] = None) -> Frame: ...
    def __iter__(self) -> Iterator[Frame]: ...
    def __next__(self) -> Frame: ...
    def __enter__(self) -> Camera: ...
    def __exit__(self, *exc: object) -> bool: ...
    def close(self) -> None: ...
    @property
    def closed(self) -> bool: ...
    @property
    def layout(self) -> ImageLayout: ...
    @property
    def format(self) -> dict[str, Any]: ...
    @property
    def size(self) -> Tuple[int, int]: ...
    @property
    def buffer_mode(self) -> Literal["dmabuf", "mmap"]: ...
    @property
    def buffer_count(self) -> int: ...
    @property
    def held_buffers(self) -> int: ...
    @property
    def name(self) -> str: ...
    @property
    def is_synthetic(self) -> bool: ...
    @property
    def stats(self) -> dict[str, int]: ...

def info() -> dict[str, Any]:
    """What this machine offers pinframe (backends, GL driver, memory routes, formats)."""
