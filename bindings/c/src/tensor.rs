//! Tensors, their CPU mappings and their pins.

use std::ffi::c_void;
use std::os::fd::{AsRawFd, BorrowedFd, RawFd};
use std::ptr::NonNull;
use std::sync::{Mutex, MutexGuard};

use pinframe::camera::Frame;
use pinframe::{Access, DType, HostPin, ImageLayout, Memory, Tensor};

use crate::status::{
    Failure, Handle, Outcome, SizedStruct, call, handle, pinframe_status, prepare_out, read_sized,
    take_handle, write_out, write_sized,
};
use crate::types::*;

/// The most dimensions a tensor made through the C API has.
pub const PINFRAME_MAX_DIMS: usize = 8;

/// A tensor of one element type in heap, memfd or DMA-BUF memory (pinframe's `Tensor`),
/// optionally described as an image by a layout. Opaque; made by `pinframe_tensor_create`,
/// `_image`, `_with_layout`, `_import`, `_import_planes`, freed by `pinframe_tensor_free`;
/// a frame's tensor (`pinframe_frame_get_tensor`) belongs to its frame.
///
/// A handle may be used from any thread; calls on one handle are serialised.
pub struct pinframe_tensor {
    _opaque: [u8; 0],
}

/// What a `pinframe_tensor *` points to (inside a `Handle`).
pub(crate) struct TensorHandle {
    /// A frame's tensor (owned by its frame, read-only).
    frame: bool,
    state: Mutex<TensorState>,
}

/// A pin: a stable host address of a tensor's data, valid until the pin is freed, even
/// after the tensor is freed (pinframe's `HostPin`). Opaque.
pub struct pinframe_pin {
    _opaque: [u8; 0],
}

pub(crate) const TENSOR_MAGIC: u64 = u64::from_be_bytes(*b"pfTensor");
const PIN_MAGIC: u64 = u64::from_be_bytes(*b"pfHstPin");

/// A tensor of any element type.
pub(crate) enum AnyTensor {
    U8(Tensor<u8>),
    I8(Tensor<i8>),
    U16(Tensor<u16>),
    I16(Tensor<i16>),
    U32(Tensor<u32>),
    I32(Tensor<i32>),
    F16(Tensor<half::f16>),
    F32(Tensor<f32>),
    F64(Tensor<f64>),
}

/// Runs `$body` with `$t` bound to the typed tensor inside an `AnyTensor` (by value,
/// reference or mutable reference, as `$value` is).
macro_rules! any_tensor {
    ($value:expr, $t:ident => $body:expr) => {
        match $value {
            AnyTensor::U8($t) => $body,
            AnyTensor::I8($t) => $body,
            AnyTensor::U16($t) => $body,
            AnyTensor::I16($t) => $body,
            AnyTensor::U32($t) => $body,
            AnyTensor::I32($t) => $body,
            AnyTensor::F16($t) => $body,
            AnyTensor::F32($t) => $body,
            AnyTensor::F64($t) => $body,
        }
    };
}
pub(crate) use any_tensor;

/// Runs `$body` with the type alias `$T` set to the element type of `$dtype`.
macro_rules! by_dtype {
    ($dtype:expr, $T:ident => $body:expr) => {
        match $dtype {
            DType::U8 => {
                type $T = u8;
                AnyTensor::U8($body)
            }
            DType::I8 => {
                type $T = i8;
                AnyTensor::I8($body)
            }
            DType::U16 => {
                type $T = u16;
                AnyTensor::U16($body)
            }
            DType::I16 => {
                type $T = i16;
                AnyTensor::I16($body)
            }
            DType::U32 => {
                type $T = u32;
                AnyTensor::U32($body)
            }
            DType::I32 => {
                type $T = i32;
                AnyTensor::I32($body)
            }
            DType::F16 => {
                type $T = half::f16;
                AnyTensor::F16($body)
            }
            DType::F32 => {
                type $T = f32;
                AnyTensor::F32($body)
            }
            DType::F64 => {
                type $T = f64;
                AnyTensor::F64($body)
            }
            other => {
                return Err(Failure::new(
                    crate::status::PINFRAME_ERROR_UNSUPPORTED,
                    format!("dtype {other} is not available through the C API"),
                ));
            }
        }
    };
}

impl AnyTensor {
    fn dtype(&self) -> DType {
        fn of<T: pinframe::Element>(_: &Tensor<T>) -> DType {
            T::DTYPE
        }
        any_tensor!(self, t => of(t))
    }
}

/// What a handle holds: its own tensor, or a captured frame (whose tensor is the
/// camera's buffer, read-only through the handle).
pub(crate) enum Slot {
    Owned(AnyTensor),
    Frame(Frame),
}

impl Slot {
    /// The tensor as `Tensor<u8>` when it is one (a conversion source).
    pub(crate) fn as_u8(&self) -> Option<&Tensor<u8>> {
        match self {
            Slot::Owned(AnyTensor::U8(t)) => Some(t),
            Slot::Frame(f) => Some(f.tensor()),
            Slot::Owned(_) => None,
        }
    }

    fn with<R>(&self, f: impl FnOnce(&dyn TensorView) -> R) -> R {
        match self {
            Slot::Owned(a) => any_tensor!(a, t => f(t)),
            Slot::Frame(fr) => f(fr.tensor()),
        }
    }

    fn dtype(&self) -> DType {
        match self {
            Slot::Owned(a) => a.dtype(),
            Slot::Frame(_) => DType::U8,
        }
    }
}

/// The untyped queries every `Tensor<T>` answers.
trait TensorView {
    fn view_shape(&self) -> &[usize];
    fn view_batch_len(&self) -> usize;
    fn view_memory(&self) -> Memory;
    fn view_layout(&self) -> Option<ImageLayout>;
    fn view_buffers(&self) -> Vec<(usize, Option<RawFd>)>;
    fn view_pin(&self) -> pinframe::Result<HostPin<'static>>;
    fn view_sync_for_cpu(&self, a: Access) -> pinframe::Result<()>;
    fn view_sync_for_device(&self, a: Access) -> pinframe::Result<()>;
}

impl<T: pinframe::Element> TensorView for Tensor<T> {
    fn view_shape(&self) -> &[usize] {
        self.shape()
    }
    fn view_batch_len(&self) -> usize {
        self.batch_len()
    }
    fn view_memory(&self) -> Memory {
        self.memory()
    }
    fn view_layout(&self) -> Option<ImageLayout> {
        self.layout().copied()
    }
    fn view_buffers(&self) -> Vec<(usize, Option<RawFd>)> {
        (0..self.buffer_count())
            .map(|i| {
                (
                    self.buffer_len(i).unwrap_or(0),
                    self.buffer_fd(i).map(|fd| fd.as_raw_fd()),
                )
            })
            .collect()
    }
    fn view_pin(&self) -> pinframe::Result<HostPin<'static>> {
        self.pin_host()
    }
    fn view_sync_for_cpu(&self, a: Access) -> pinframe::Result<()> {
        self.sync_for_cpu(a)
    }
    fn view_sync_for_device(&self, a: Access) -> pinframe::Result<()> {
        self.sync_for_device(a)
    }
}

/// What never changes while a mapping is live (answerable without touching the tensor).
struct Meta {
    dtype: DType,
    shape: Vec<usize>,
    /// Images in the tensor: a batch's count (`pinframe_tensor_image_batch`), else 1.
    batch_len: usize,
    memory: Memory,
    layout: Option<ImageLayout>,
    /// (length, fd) of each buffer; the fds live as long as the tensor.
    buffers: Vec<(usize, Option<RawFd>)>,
}

/// A live mapping made by `pinframe_tensor_map`.
struct ActiveMap {
    /// The `MapGuard`/`MapGuardMut` (its drop ends the CPU access). It borrows the slot
    /// with an erased lifetime: see `TensorState`.
    _guard: Box<dyn Held>,
    write: bool,
    /// Address and length of each buffer's data.
    buffers: Vec<(usize, usize)>,
}

/// Anything (a map guard) kept only for its `Drop`.
trait Held {}
impl<T> Held for T {}

pub(crate) struct TensorState {
    /// The tensor, in its own allocation (`Box::into_raw`), so that references derived
    /// from it for a mapping are not disturbed by borrows of this state.
    slot: NonNull<Slot>,
    meta: Meta,
    /// Declared before nothing else that borrows: dropped explicitly before `slot`.
    map: Option<ActiveMap>,
}

// SAFETY: the slot is a `Slot` owned by this state (Tensor and Frame are Send); the map
// guard only holds a reference into it and pointers into its mapped memory, and ending a
// CPU access (its drop) is valid from any thread (a dma-buf sync ioctl).
unsafe impl Send for TensorState {}

impl Drop for TensorState {
    fn drop(&mut self) {
        // The mapping borrows the slot: end it first.
        self.map = None;
        // SAFETY: `slot` came from Box::into_raw in `TensorState::new` and is freed once,
        // here; nothing borrows it any more (the mapping is gone).
        drop(unsafe { Box::from_raw(self.slot.as_ptr()) });
    }
}

impl TensorState {
    fn new(slot: Slot) -> Self {
        let dtype = slot.dtype();
        let meta = slot.with(|v| Meta {
            dtype,
            shape: v.view_shape().to_vec(),
            batch_len: v.view_batch_len(),
            memory: v.view_memory(),
            layout: v.view_layout(),
            buffers: v.view_buffers(),
        });
        TensorState {
            slot: NonNull::from(Box::leak(Box::new(slot))),
            meta,
            map: None,
        }
    }

    /// Images in the tensor (1 unless it is a batch).
    pub(crate) fn batch_len(&self) -> usize {
        self.meta.batch_len
    }

    /// The tensor, for reading; refused while it is mapped for writing.
    pub(crate) fn slot(&self) -> Outcome<&Slot> {
        if self.map.as_ref().is_some_and(|m| m.write) {
            return Err(Failure::invalid(
                "the tensor is mapped for writing; call pinframe_tensor_unmap first",
            ));
        }
        // SAFETY: the slot lives as long as self; the only other reference that may exist
        // is a read mapping's shared one (a write mapping was refused above).
        Ok(unsafe { self.slot.as_ref() })
    }

    /// The tensor, for changing; refused while it is mapped at all.
    pub(crate) fn slot_mut(&mut self) -> Outcome<&mut Slot> {
        if self.map.is_some() {
            return Err(Failure::invalid(
                "the tensor is mapped; call pinframe_tensor_unmap first",
            ));
        }
        // SAFETY: the slot lives as long as self and no mapping borrows it; `&mut self`
        // makes this the only reference.
        Ok(unsafe { self.slot.as_mut() })
    }

    fn map(&mut self, access: Access) -> Outcome<(usize, usize)> {
        if self.map.is_some() {
            return Err(Failure::invalid(
                "the tensor is already mapped; call pinframe_tensor_unmap first",
            ));
        }
        let write = access != Access::Read;
        let active = if write {
            // SAFETY: the reference lives in `self.map`, which is dropped before the slot
            // (Drop, unmap, free); while it exists `slot`/`slot_mut` refuse, so it is the
            // only reference to the tensor.
            let slot: &'static mut Slot = unsafe { &mut *self.slot.as_ptr() };
            let Slot::Owned(any) = slot else {
                return Err(Failure::invalid(
                    "a frame's tensor is read-only (it is the camera's buffer); map it with \
                     PINFRAME_ACCESS_READ",
                ));
            };
            any_tensor!(any, t => {
                let mut g = t.map_mut()?;
                let buffers = (0..self.meta.buffers.len())
                    .map(|i| {
                        let b = g.buffer_bytes_mut(i);
                        (b.as_mut_ptr() as usize, b.len())
                    })
                    .collect();
                ActiveMap { _guard: Box::new(g), write, buffers }
            })
        } else {
            // SAFETY: as above, except that shared references (queries) may coexist
            // with this one: `slot_mut` refuses while it lives.
            let slot: &'static Slot = unsafe { &*self.slot.as_ptr() };
            match slot {
                Slot::Owned(any) => any_tensor!(any, t => read_map(t)?),
                Slot::Frame(f) => read_map(f.tensor())?,
            }
        };
        let first = active.buffers[0];
        self.map = Some(active);
        Ok(first)
    }
}

fn read_map<T: pinframe::Element>(t: &'static Tensor<T>) -> Outcome<ActiveMap> {
    let g = t.map()?;
    let buffers = (0..t.buffer_count())
        .map(|i| {
            let b = g.buffer_bytes(i);
            (b.as_ptr() as usize, b.len())
        })
        .collect();
    Ok(ActiveMap {
        _guard: Box::new(g),
        write: false,
        buffers,
    })
}

impl TensorHandle {
    pub(crate) fn new(slot: Slot) -> Self {
        TensorHandle {
            frame: matches!(slot, Slot::Frame(_)),
            state: Mutex::new(TensorState::new(slot)),
        }
    }

    fn boxed(any: AnyTensor) -> *mut pinframe_tensor {
        Handle::new(TENSOR_MAGIC, TensorHandle::new(Slot::Owned(any))).into_raw()
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, TensorState> {
        // A panic while the state was locked was caught and reported; the state itself
        // (a tensor and an optional mapping) stays consistent.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn is_frame(&self) -> bool {
        self.frame
    }
}

/// Checks a tensor handle argument.
///
/// # Safety
/// `p` is NULL or a handle made by this library (or a frame's tensor) that is still alive.
pub(crate) unsafe fn tensor_arg<'a>(
    p: *const pinframe_tensor,
    name: &str,
) -> Outcome<&'a TensorHandle> {
    // SAFETY: the caller's contract.
    unsafe { handle(p, TENSOR_MAGIC, "pinframe_tensor", name) }
}

/// # Safety
/// `p` is NULL or a live pin handle.
unsafe fn pin_arg<'a>(p: *const pinframe_pin, name: &str) -> Outcome<&'a HostPin<'static>> {
    // SAFETY: the caller's contract.
    unsafe { handle(p, PIN_MAGIC, "pinframe_pin", name) }
}

/// What `pinframe_tensor_get_info` reports. Set `struct_size = sizeof(pinframe_tensor_info)`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct pinframe_tensor_info {
    /// `sizeof(pinframe_tensor_info)`, set by the caller.
    pub struct_size: usize,
    /// The element type, a `PINFRAME_DTYPE_*` value.
    pub dtype: pinframe_dtype,
    /// Where the bytes live, a `PINFRAME_MEMORY_*` value (never AUTO or DEVICE).
    pub memory: pinframe_memory,
    /// Number of dimensions.
    pub ndim: usize,
    /// The shape (the first `ndim` entries).
    pub shape: [usize; PINFRAME_MAX_DIMS],
    /// Number of buffers (more than one only for images whose planes live in several fds).
    pub buffer_count: usize,
    /// Size in bytes of each buffer (the whole allocation).
    pub buffer_len: [usize; PINFRAME_MAX_PLANES],
    /// 1 when the tensor has an image layout (`pinframe_tensor_get_layout`), else 0.
    pub has_layout: u32,
    /// 1 when the tensor is a frame's (read-only, owned by its frame), else 0.
    pub is_frame: u32,
}

impl SizedStruct for pinframe_tensor_info {
    const NAME: &'static str = "pinframe_tensor_info";
    const RELEASED: &'static [usize] = &[size_of::<Self>()];
}

/// Makes a zero-filled tensor of `dtype` with `ndim` dimensions `shape[0..ndim]` in
/// `memory` (`PINFRAME_MEMORY_AUTO`: memfd, else heap; `PINFRAME_MEMORY_DEVICE`: DMA,
/// else memfd, else heap; an explicit kind that
/// cannot be allocated fails with `PINFRAME_ERROR_MEMORY_UNAVAILABLE`).
///
/// Ownership: on success `*out` is a new tensor the caller frees with
/// `pinframe_tensor_free`; on failure `*out` is NULL. `shape` is only read.
///
/// # Safety
/// `shape` points to `ndim` values; `out` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pinframe_tensor_create(
    dtype: pinframe_dtype,
    shape: *const usize,
    ndim: usize,
    memory: pinframe_memory,
    out: *mut *mut pinframe_tensor,
) -> pinframe_status {
    call(|| {
        // SAFETY: the caller's contract.
        unsafe { prepare_out(out, "out")? };
        if shape.is_null() {
            return Err(Failure::null("shape"));
        }
        if ndim == 0 || ndim > PINFRAME_MAX_DIMS {
            return Err(Failure::invalid(format!(
                "ndim {ndim} is out of range 1..={PINFRAME_MAX_DIMS}"
            )));
        }
        // SAFETY: non-null, and the caller guarantees `ndim` readable values.
        let shape = unsafe { std::slice::from_raw_parts(shape, ndim) };
        let dtype = dtype_from(dtype)?;
        let memory = memory_from(memory)?;
        let any = by_dtype!(dtype, T => Tensor::<T>::new(shape, memory)?);
        // SAFETY: out was checked above.
        unsafe { *out = TensorHandle::boxed(any) };
        Ok(())
    })
}

/// Makes an image tensor `width` x `height` in `format` with `dtype` elements (DMA
/// images get rows aligned to 64 bytes; memfd and heap images are tightly packed).
///
/// Ownership: as `pinframe_tensor_create`.
///
/// # Safety
/// `out` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pinframe_tensor_image(
    width: u32,
    height: u32,
    format: pinframe_format,
    dtype: pinframe_dtype,
    memory: pinframe_memory,
    out: *mut *mut pinframe_tensor,
) -> pinframe_status {
    call(|| {
        // SAFETY: the caller's contract.
        unsafe { prepare_out(out, "out")? };
        let format = format_from(format)?;
        let dtype = dtype_from(dtype)?;
        let memory = memory_from(memory)?;
        let any = by_dtype!(dtype, T => Tensor::<T>::image(width, height, format, memory)?);
        // SAFETY: out was checked above.
        unsafe { *out = TensorHandle::boxed(any) };
        Ok(())
    })
}

/// Makes a batch of `count` image tensors `width` x `height` in `format` with `dtype`
/// elements, in one buffer, slice `i` after slice `i - 1` (pinframe's
/// `Tensor::image_batch`): shape `[count, height, width, channels]` for packed formats,
/// `[count, 3, height, width]` for planar RGB; each slice laid out as
/// `pinframe_tensor_image` lays out one image (the layout `pinframe_tensor_get_layout`
/// reports is slice 0's; slice `i` starts `i` times the slice's allocation later).
/// `pinframe_processor_convert_batch` fills it; `pinframe_processor_convert` refuses a
/// batch of more than one. `count` 0 and formats of several buffers are
/// `PINFRAME_ERROR_INVALID_INPUT`.
///
/// Ownership: as `pinframe_tensor_create`.
///
/// # Safety
/// `out` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pinframe_tensor_image_batch(
    count: usize,
    width: u32,
    height: u32,
    format: pinframe_format,
    dtype: pinframe_dtype,
    memory: pinframe_memory,
    out: *mut *mut pinframe_tensor,
) -> pinframe_status {
    call(|| {
        // SAFETY: the caller's contract.
        unsafe { prepare_out(out, "out")? };
        let format = format_from(format)?;
        let dtype = dtype_from(dtype)?;
        let memory = memory_from(memory)?;
        let any = by_dtype!(dtype, T => {
            Tensor::<T>::image_batch(count, width, height, format, memory)?
        });
        // SAFETY: out was checked above.
        unsafe { *out = TensorHandle::boxed(any) };
        Ok(())
    })
}

/// The number of images in the tensor, in `*len`: `count` for a tensor made by
/// `pinframe_tensor_image_batch` (until `pinframe_tensor_set_layout` makes it one image),
/// else 1. Works while the tensor is mapped.
///
/// Ownership: borrows `tensor`; writes `*len`.
///
/// # Safety
/// `tensor` is a live handle; `len` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pinframe_tensor_get_batch_len(
    tensor: *const pinframe_tensor,
    len: *mut usize,
) -> pinframe_status {
    call(|| {
        // SAFETY: the caller's contract.
        let t = unsafe { tensor_arg(tensor, "tensor")? };
        let n = t.lock().meta.batch_len;
        // SAFETY: the caller's contract.
        unsafe { write_out(len, "len", n) }
    })
}

/// Makes an image tensor with an explicit layout (strides, plane offsets, several
/// buffers); its element type is the layout's.
///
/// Ownership: as `pinframe_tensor_create`; `layout` is only read.
///
/// # Safety
/// `layout` points to a `pinframe_layout` with its `struct_size` set; `out` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pinframe_tensor_with_layout(
    layout: *const pinframe_layout,
    memory: pinframe_memory,
    out: *mut *mut pinframe_tensor,
) -> pinframe_status {
    call(|| {
        // SAFETY: the caller's contract.
        unsafe { prepare_out(out, "out")? };
        // SAFETY: the caller's contract.
        let layout = unsafe { read_sized(layout, "layout", pinframe_layout::empty())? };
        let layout = layout.to_layout()?;
        let memory = memory_from(memory)?;
        let any = by_dtype!(layout.dtype(), T => Tensor::<T>::with_layout(layout, memory)?);
        // SAFETY: out was checked above.
        unsafe { *out = TensorHandle::boxed(any) };
        Ok(())
    })
}

/// Imports a dma-buf or memfd `fd` holding one image laid out as `layout`. The fd is
/// duplicated: the caller keeps (and closes) its own. Anything but a dma-buf or memfd,
/// a closed fd, or a buffer smaller than the layout is `PINFRAME_ERROR_INVALID_INPUT`. A
/// memfd without `F_SEAL_SHRINK` is `PINFRAME_ERROR_IMPORT_REFUSED` (a truncation under
/// the tensor's mapping would raise SIGBUS): create it with `MFD_ALLOW_SEALING` and
/// `fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK)` first.
///
/// Aliasing rule: the buffer has other holders (its exporter, devices, other processes,
/// other tensors imported from it). While a mapping of the tensor made with
/// `PINFRAME_ACCESS_READ` is alive (`pinframe_tensor_map` to `pinframe_tensor_unmap`), or
/// while the caller reads a pin's bytes, nobody else may write the bytes it covers; while
/// a `PINFRAME_ACCESS_WRITE`/`_READ_WRITE` mapping is alive, nobody else may read or
/// write them. Writes by others between mappings (a camera filling a queued buffer, a GPU
/// rendering) are fine. Breaking the rule is undefined behaviour in the library's views.
///
/// Ownership: as `pinframe_tensor_create`; `layout` is only read.
///
/// # Safety
/// `layout` points to a `pinframe_layout` with its `struct_size` set; `out` is writable;
/// the caller keeps the aliasing rule above.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pinframe_tensor_import(
    fd: i32,
    layout: *const pinframe_layout,
    out: *mut *mut pinframe_tensor,
) -> pinframe_status {
    // SAFETY: forwarded with the same contract (one fd read from a local).
    unsafe { pinframe_tensor_import_planes(&fd, 1, layout, out) }
}

/// Imports an image whose planes live in `count` fds (`pinframe_plane.buffer` indexes
/// `fds`), e.g. V4L2's NV12M. All fds must be of one kind; each is duplicated. Memfds
/// must carry `F_SEAL_SHRINK`, and the aliasing rule of `pinframe_tensor_import` holds for
/// every buffer.
///
/// Ownership: as `pinframe_tensor_import`; `fds` is only read.
///
/// # Safety
/// `fds` points to `count` ints; `layout` and `out` as for `pinframe_tensor_import`; the
/// caller keeps `pinframe_tensor_import`'s aliasing rule.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pinframe_tensor_import_planes(
    fds: *const i32,
    count: usize,
    layout: *const pinframe_layout,
    out: *mut *mut pinframe_tensor,
) -> pinframe_status {
    call(|| {
        // SAFETY: the caller's contract.
        unsafe { prepare_out(out, "out")? };
        if fds.is_null() {
            return Err(Failure::null("fds"));
        }
        if count == 0 || count > PINFRAME_MAX_PLANES {
            return Err(Failure::invalid(format!(
                "{count} fds given; an image has 1 to {PINFRAME_MAX_PLANES}"
            )));
        }
        // SAFETY: the caller's contract.
        let layout = unsafe { read_sized(layout, "layout", pinframe_layout::empty())? };
        let layout = layout.to_layout()?;
        // SAFETY: non-null, `count` readable ints by the caller's contract.
        let raw = unsafe { std::slice::from_raw_parts(fds, count) };
        if let Some(bad) = raw.iter().find(|&&fd| fd < 0) {
            return Err(Failure::invalid(format!(
                "fd {bad} is not a file descriptor"
            )));
        }
        // SAFETY: the fds are only borrowed for this call (the import duplicates them);
        // a number that is not an open fd makes the duplication fail with EBADF, which
        // the import reports as an invalid fd, so borrowing it is harmless.
        let borrowed: Vec<BorrowedFd<'_>> = raw
            .iter()
            .map(|&fd| unsafe { BorrowedFd::borrow_raw(fd) })
            .collect();
        // SAFETY: the aliasing rule is this function's own contract with its C caller
        // (stated above and in pinframe.h), the one `Tensor::import_planes` asks for.
        let any = by_dtype!(layout.dtype(), T => unsafe {
            Tensor::<T>::import_planes(&borrowed, layout)?
        });
        // SAFETY: out was checked above.
        unsafe { *out = TensorHandle::boxed(any) };
        Ok(())
    })
}

/// Frees a tensor. A live mapping is ended first (as `pinframe_tensor_unmap`); pins of
/// the tensor stay valid. NULL is a no-op (returns `PINFRAME_OK`). A frame's tensor
/// cannot be freed (release the frame): `PINFRAME_ERROR_INVALID_INPUT`.
///
/// Ownership: takes `tensor`; the handle is invalid afterwards.
///
/// # Safety
/// `tensor` is NULL or a live tensor handle not used by another thread during the call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pinframe_tensor_free(tensor: *mut pinframe_tensor) -> pinframe_status {
    call(|| {
        if tensor.is_null() {
            return Ok(());
        }
        // SAFETY: the caller's contract.
        let t = unsafe { tensor_arg(tensor, "tensor")? };
        if t.is_frame() {
            return Err(Failure::invalid(
                "this tensor belongs to a frame; release the frame with pinframe_frame_release",
            ));
        }
        // SAFETY: the caller's contract; frames' tensors were refused above, so this handle
        // came from `Handle::into_raw`.
        drop(unsafe {
            take_handle::<_, TensorHandle>(tensor, TENSOR_MAGIC, "pinframe_tensor", "tensor")?
        });
        Ok(())
    })
}

/// Reports the tensor's element type, memory, shape and buffers into `*info` (whose
/// `struct_size` the caller set). Works while the tensor is mapped.
///
/// Ownership: borrows `tensor`; writes `*info`.
///
/// # Safety
/// `tensor` is a live handle; `info` points to a `pinframe_tensor_info` with its
/// `struct_size` set.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pinframe_tensor_get_info(
    tensor: *const pinframe_tensor,
    info: *mut pinframe_tensor_info,
) -> pinframe_status {
    call(|| {
        // SAFETY: the caller's contract.
        let t = unsafe { tensor_arg(tensor, "tensor")? };
        let frame = t.is_frame();
        let s = t.lock();
        let m = &s.meta;
        let mut out = pinframe_tensor_info {
            struct_size: size_of::<pinframe_tensor_info>(),
            dtype: dtype_code(m.dtype),
            memory: memory_code(m.memory),
            ndim: m.shape.len(),
            shape: [0; PINFRAME_MAX_DIMS],
            buffer_count: m.buffers.len(),
            buffer_len: [0; PINFRAME_MAX_PLANES],
            has_layout: m.layout.is_some() as u32,
            is_frame: frame as u32,
        };
        if m.shape.len() > PINFRAME_MAX_DIMS {
            return Err(Failure::invalid(format!(
                "the tensor has {} dimensions; this header reports at most {PINFRAME_MAX_DIMS}",
                m.shape.len()
            )));
        }
        out.shape[..m.shape.len()].copy_from_slice(&m.shape);
        for (o, b) in out.buffer_len.iter_mut().zip(&m.buffers) {
            *o = b.0;
        }
        // SAFETY: the caller's contract.
        unsafe { write_sized(info, "info", out) }
    })
}

/// Writes the tensor's image layout into `*layout` (whose `struct_size` the caller set).
/// A tensor without one (made by `pinframe_tensor_create`) is
/// `PINFRAME_ERROR_INVALID_INPUT`.
///
/// Ownership: borrows `tensor`; writes `*layout`.
///
/// # Safety
/// `tensor` is a live handle; `layout` points to a `pinframe_layout` with its
/// `struct_size` set.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pinframe_tensor_get_layout(
    tensor: *const pinframe_tensor,
    layout: *mut pinframe_layout,
) -> pinframe_status {
    call(|| {
        // SAFETY: the caller's contract.
        let t = unsafe { tensor_arg(tensor, "tensor")? };
        let l = t.lock().meta.layout.ok_or_else(|| {
            Failure::invalid(
                "the tensor has no image layout (give it one with pinframe_tensor_set_layout)",
            )
        })?;
        let out = pinframe_layout::from_layout(&l)?;
        // SAFETY: the caller's contract.
        unsafe { write_sized(layout, "layout", out) }
    })
}

/// Describes the tensor's buffer(s) as the image `layout`, validated against the buffer
/// sizes (a layout may address one tile of a batch). The shape is unchanged. Refused
/// while the tensor is mapped, and for a frame's tensor.
///
/// Ownership: borrows both; `layout` is only read.
///
/// # Safety
/// `tensor` is a live handle; `layout` points to a `pinframe_layout` with its
/// `struct_size` set.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pinframe_tensor_set_layout(
    tensor: *mut pinframe_tensor,
    layout: *const pinframe_layout,
) -> pinframe_status {
    call(|| {
        // SAFETY: the caller's contract.
        let t = unsafe { tensor_arg(tensor, "tensor")? };
        // SAFETY: the caller's contract.
        let layout = unsafe { read_sized(layout, "layout", pinframe_layout::empty())? };
        let layout = layout.to_layout()?;
        let mut s = t.lock();
        match s.slot_mut()? {
            Slot::Owned(any) => any_tensor!(any, t => t.set_layout(layout)?),
            Slot::Frame(_) => {
                return Err(Failure::invalid(
                    "a frame's tensor keeps the camera's layout",
                ));
            }
        }
        s.meta.layout = Some(layout);
        // A layout describes one image: a batch is one no more.
        s.meta.batch_len = 1;
        Ok(())
    })
}

/// Fills `*layout` with a valid layout for a `width` x `height` `format` image of `dtype`
/// elements in one buffer, every row pitch and plane offset a multiple of
/// `row_alignment` bytes (a power of two; 1 = tightly packed). Edit it (e.g. strides)
/// before passing it on.
///
/// Ownership: writes `*layout` (whose `struct_size` the caller set).
///
/// # Safety
/// `layout` points to a `pinframe_layout` with its `struct_size` set.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pinframe_layout_init(
    layout: *mut pinframe_layout,
    width: u32,
    height: u32,
    format: pinframe_format,
    dtype: pinframe_dtype,
    row_alignment: usize,
) -> pinframe_status {
    call(|| {
        let l = ImageLayout::with_row_alignment(
            width,
            height,
            format_from(format)?,
            dtype_from(dtype)?,
            row_alignment,
        )?;
        let out = pinframe_layout::from_layout(&l)?;
        // SAFETY: the caller's contract.
        unsafe { write_sized(layout, "layout", out) }
    })
}

/// Maps the tensor for the CPU and returns the address and length of its (first)
/// buffer's data in `*data` and `*len`. On dma-bufs this starts a CPU access
/// (`DMA_BUF_IOCTL_SYNC` START); `pinframe_tensor_unmap` ends it. `PINFRAME_ACCESS_READ`
/// maps for reading (do not write through `*data`); `_WRITE` and `_READ_WRITE` map for
/// reading and writing (a read-only import or a frame's tensor refuses them).
///
/// One mapping per tensor at a time (a second is `PINFRAME_ERROR_INVALID_INPUT`). While
/// it is mapped for writing, only `pinframe_tensor_get_info`, `_get_layout`,
/// `_get_fd`, `_get_mapped_buffer`, `_unmap` and `_free` work on the tensor; while mapped at all it
/// cannot be a conversion's destination. Inside `pinframe_with_cpu_mappings_excluded` on
/// the same thread, mapping a tensor that was never mapped before is
/// `PINFRAME_ERROR_INVALID_INPUT` (the section promises that no mapping is made).
///
/// Ownership: borrows `tensor`; `*data` stays valid until the tensor is unmapped or
/// freed.
///
/// # Safety
/// `tensor` is a live handle; `data` and `len` are writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pinframe_tensor_map(
    tensor: *const pinframe_tensor,
    access: pinframe_access,
    data: *mut *mut c_void,
    len: *mut usize,
) -> pinframe_status {
    call(|| {
        // SAFETY: the caller's contract.
        let t = unsafe { tensor_arg(tensor, "tensor")? };
        // SAFETY: the caller's contract.
        unsafe { prepare_out(data, "data")? };
        // SAFETY: the caller's contract.
        unsafe { write_out(len, "len", 0)? };
        let access = access_from(access)?;
        let (ptr, n) = t.lock().map(access)?;
        // SAFETY: both checked above.
        unsafe {
            *data = ptr as *mut c_void;
            *len = n;
        }
        Ok(())
    })
}

/// While the tensor is mapped: the address and length of buffer `index`'s data (buffer 0
/// is what `pinframe_tensor_map` returned; the others exist for images whose planes live
/// in several fds).
///
/// Ownership: borrows `tensor`; `*data` stays valid until the tensor is unmapped.
///
/// # Safety
/// `tensor` is a live handle; `data` and `len` are writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pinframe_tensor_get_mapped_buffer(
    tensor: *const pinframe_tensor,
    index: usize,
    data: *mut *mut c_void,
    len: *mut usize,
) -> pinframe_status {
    call(|| {
        // SAFETY: the caller's contract.
        let t = unsafe { tensor_arg(tensor, "tensor")? };
        // SAFETY: the caller's contract.
        unsafe { prepare_out(data, "data")? };
        // SAFETY: the caller's contract.
        unsafe { write_out(len, "len", 0)? };
        let s = t.lock();
        let m = s
            .map
            .as_ref()
            .ok_or_else(|| Failure::invalid("the tensor is not mapped (pinframe_tensor_map)"))?;
        let &(ptr, n) = m.buffers.get(index).ok_or_else(|| {
            Failure::invalid(format!(
                "buffer {index} does not exist; the tensor has {}",
                m.buffers.len()
            ))
        })?;
        // SAFETY: both checked above.
        unsafe {
            *data = ptr as *mut c_void;
            *len = n;
        }
        Ok(())
    })
}

/// Ends the mapping made by `pinframe_tensor_map` (on dma-bufs, `DMA_BUF_IOCTL_SYNC`
/// END: written data is flushed to the device). Not mapped: `PINFRAME_ERROR_INVALID_INPUT`.
///
/// Ownership: borrows `tensor`; the addresses the mapping returned are invalid afterwards.
///
/// # Safety
/// `tensor` is a live handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pinframe_tensor_unmap(tensor: *const pinframe_tensor) -> pinframe_status {
    call(|| {
        // SAFETY: the caller's contract.
        let t = unsafe { tensor_arg(tensor, "tensor")? };
        let mut s = t.lock();
        match s.map.take() {
            Some(m) => {
                drop(m);
                Ok(())
            }
            None => Err(Failure::invalid("the tensor is not mapped")),
        }
    })
}

/// Pins the tensor's data: a stable host address to hand an inference runtime once. The
/// pin keeps the buffer alive (even after `pinframe_tensor_free`) until
/// `pinframe_pin_free`. It covers the data from its first byte to the end of its last
/// row, and issues no cache maintenance: bracket each CPU access with
/// `pinframe_tensor_sync_for_cpu` / `_sync_for_device`. Single-buffer tensors only.
///
/// A pin of a frame's tensor keeps the camera's buffer out of the driver's queue until
/// the pin is freed, even after `pinframe_frame_release` (the camera never refills it
/// meanwhile); its bytes are read-only, as the frame's are.
///
/// Ownership: on success `*out` is a new pin the caller frees with `pinframe_pin_free`.
///
/// # Safety
/// `tensor` is a live handle; `out` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pinframe_tensor_pin(
    tensor: *const pinframe_tensor,
    out: *mut *mut pinframe_pin,
) -> pinframe_status {
    call(|| {
        // SAFETY: the caller's contract.
        let t = unsafe { tensor_arg(tensor, "tensor")? };
        // SAFETY: the caller's contract.
        unsafe { prepare_out(out, "out")? };
        let s = t.lock();
        let pin = s.slot()?.with(|v| v.view_pin())?;
        // SAFETY: checked above.
        unsafe { *out = Handle::new(PIN_MAGIC, pin).into_raw() };
        Ok(())
    })
}

/// The pinned window: its first byte, its length in bytes and the largest power of two
/// dividing the address.
///
/// Ownership: borrows `pin`; `*address` stays valid until `pinframe_pin_free`.
///
/// # Safety
/// `pin` is a live pin handle; `address`, `len` and `alignment` are writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pinframe_pin_get_data(
    pin: *const pinframe_pin,
    address: *mut *mut c_void,
    len: *mut usize,
    alignment: *mut usize,
) -> pinframe_status {
    call(|| {
        // SAFETY: the caller's contract.
        let p = unsafe { pin_arg(pin, "pin")? };
        // SAFETY: the caller's contract for each out-pointer.
        unsafe {
            write_out(address, "address", p.as_mut_ptr() as *mut c_void)?;
            write_out(len, "len", p.len())?;
            write_out(alignment, "alignment", p.alignment())?;
        }
        Ok(())
    })
}

/// Frees a pin (the buffer is released when neither the tensor nor a pin holds it). NULL
/// is a no-op.
///
/// Ownership: takes `pin`.
///
/// # Safety
/// `pin` is NULL or a live pin handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pinframe_pin_free(pin: *mut pinframe_pin) -> pinframe_status {
    call(|| {
        // SAFETY: the caller's contract (a live pin made by this library, or NULL).
        drop(unsafe { take_handle::<_, HostPin<'static>>(pin, PIN_MAGIC, "pinframe_pin", "pin")? });
        Ok(())
    })
}

/// Starts a CPU access by a pin holder: on dma-bufs `DMA_BUF_IOCTL_SYNC` START in the
/// direction of `access` (stale cache lines are invalidated before reading). No-op on
/// heap and memfd memory.
///
/// Ownership: borrows `tensor`.
///
/// # Safety
/// `tensor` is a live handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pinframe_tensor_sync_for_cpu(
    tensor: *const pinframe_tensor,
    access: pinframe_access,
) -> pinframe_status {
    call(|| {
        // SAFETY: the caller's contract.
        let t = unsafe { tensor_arg(tensor, "tensor")? };
        let access = access_from(access)?;
        let s = t.lock();
        s.slot()?.with(|v| v.view_sync_for_cpu(access))?;
        Ok(())
    })
}

/// Ends a CPU access by a pin holder and hands the buffer back to devices: on dma-bufs
/// `DMA_BUF_IOCTL_SYNC` END (CPU writes are flushed). No-op on heap and memfd memory.
///
/// Ownership: borrows `tensor`.
///
/// # Safety
/// `tensor` is a live handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pinframe_tensor_sync_for_device(
    tensor: *const pinframe_tensor,
    access: pinframe_access,
) -> pinframe_status {
    call(|| {
        // SAFETY: the caller's contract.
        let t = unsafe { tensor_arg(tensor, "tensor")? };
        let access = access_from(access)?;
        let s = t.lock();
        s.slot()?.with(|v| v.view_sync_for_device(access))?;
        Ok(())
    })
}

/// The fd of buffer `index` of a memfd or dma-buf tensor, in `*fd`. The tensor keeps
/// owning it: do not close it; `dup` it to keep it past `pinframe_tensor_free`. A heap
/// tensor has none (`PINFRAME_ERROR_UNSUPPORTED`).
///
/// Ownership: borrows `tensor`; `*fd` is borrowed from it.
///
/// # Safety
/// `tensor` is a live handle; `fd` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pinframe_tensor_get_fd(
    tensor: *const pinframe_tensor,
    index: usize,
    fd: *mut i32,
) -> pinframe_status {
    call(|| {
        // SAFETY: the caller's contract.
        let t = unsafe { tensor_arg(tensor, "tensor")? };
        // SAFETY: the caller's contract.
        unsafe { write_out(fd, "fd", -1)? };
        let s = t.lock();
        let &(_, raw) = s.meta.buffers.get(index).ok_or_else(|| {
            Failure::invalid(format!(
                "buffer {index} does not exist; the tensor has {}",
                s.meta.buffers.len()
            ))
        })?;
        let raw = raw.ok_or_else(|| {
            Failure::new(
                crate::status::PINFRAME_ERROR_UNSUPPORTED,
                "a heap tensor has no fd (make it with PINFRAME_MEMORY_SHM or _DMA)",
            )
        })?;
        // SAFETY: checked above.
        unsafe { *fd = raw };
        Ok(())
    })
}
