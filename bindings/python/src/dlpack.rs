//! DLPack export (`__dlpack__`): a capsule over a tensor's memory, no copy.
//!
//! The DLPack ABI is a handful of plain C structs (dlpack.h, v1.0); they are declared
//! here rather than taken from a crate because the crates that wrap them pin their own
//! PyO3 version, which would dictate ours. Both forms are produced: the versioned
//! `DLManagedTensorVersioned` ("dltensor_versioned", with the read-only flag) for consumers
//! that pass `max_version >= (1, 0)`, and the legacy `DLManagedTensor` ("dltensor") for the
//! others, only for writable memory (it cannot say read-only).
//!
//! The manager context owns a [`HostPin`] and the shape/strides arrays; the deleter drops
//! it. It touches no Python object, so consumers may call it from any thread, with or
//! without the GIL.

use std::ffi::{CStr, c_void};

use pinframe::{DType, HostPin};
use pyo3::exceptions::PyBufferError;
use pyo3::ffi;
use pyo3::prelude::*;

use crate::views::Export;

#[repr(C)]
#[derive(Clone, Copy)]
struct DLDevice {
    device_type: i32,
    device_id: i32,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct DLDataType {
    code: u8,
    bits: u8,
    lanes: u16,
}

#[repr(C)]
struct DLTensor {
    data: *mut c_void,
    device: DLDevice,
    ndim: i32,
    dtype: DLDataType,
    shape: *mut i64,
    strides: *mut i64,
    byte_offset: u64,
}

#[repr(C)]
struct DLManagedTensor {
    dl_tensor: DLTensor,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DLManagedTensor)>,
}

#[repr(C)]
struct DLPackVersion {
    major: u32,
    minor: u32,
}

#[repr(C)]
struct DLManagedTensorVersioned {
    version: DLPackVersion,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DLManagedTensorVersioned)>,
    flags: u64,
    dl_tensor: DLTensor,
}

/// `kDLCPU`: memory the CPU addresses (every pinframe tensor, once mapped).
pub(crate) const DEVICE_CPU: i32 = 1;
const FLAG_READ_ONLY: u64 = 1;

const NAME: &CStr = c"dltensor";
const NAME_VERSIONED: &CStr = c"dltensor_versioned";

/// What a capsule owns: the managed struct (first, so its address is the context's: hence
/// `repr(C)`), the arrays it points into, and the pin that keeps the memory mapped.
#[repr(C)]
struct Context<M> {
    managed: M,
    _shape: Vec<i64>,
    _strides: Vec<i64>,
    _pin: HostPin<'static>,
}

fn data_type(dtype: DType) -> DLDataType {
    let (code, bits) = match dtype {
        DType::U8 => (1, 8),
        DType::I8 => (0, 8),
        DType::U16 => (1, 16),
        DType::I16 => (0, 16),
        DType::U32 => (1, 32),
        DType::I32 => (0, 32),
        DType::F16 => (2, 16),
        DType::F32 => (2, 32),
        DType::F64 => (2, 64),
        _ => (1, 8 * dtype.size() as u8),
    };
    DLDataType {
        code,
        bits,
        lanes: 1,
    }
}

/// Element strides of `e` (DLPack counts elements, not bytes).
fn element_strides(e: &Export) -> PyResult<Vec<i64>> {
    let item = e.dtype.size() as isize;
    e.strides
        .iter()
        .map(|&s| {
            if s % item != 0 {
                Err(PyBufferError::new_err(
                    "a stride is not a whole number of elements; DLPack cannot describe it",
                ))
            } else {
                Ok((s / item) as i64)
            }
        })
        .collect()
}

unsafe extern "C" fn delete_legacy(m: *mut DLManagedTensor) {
    if m.is_null() {
        return;
    }
    // SAFETY: `m` is the first field of a `Box<Context<DLManagedTensor>>` leaked by
    // `capsule` (its manager_ctx); the consumer or the capsule calls the deleter once.
    let ctx = unsafe { Box::from_raw((*m).manager_ctx.cast::<Context<DLManagedTensor>>()) };
    drop_without_unwinding(ctx);
}

unsafe extern "C" fn delete_versioned(m: *mut DLManagedTensorVersioned) {
    if m.is_null() {
        return;
    }
    // SAFETY: as in `delete_legacy`, for the versioned context.
    let ctx =
        unsafe { Box::from_raw((*m).manager_ctx.cast::<Context<DLManagedTensorVersioned>>()) };
    drop_without_unwinding(ctx);
}

/// Drops a context (its pin may unmap memory and log) in a deleter called from C: a panic
/// must not unwind into the consumer, so it is caught and the process carries on (the
/// memory of a context that panicked while dropping is leaked, not freed twice).
fn drop_without_unwinding<T>(ctx: Box<T>) {
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || drop(ctx)));
}

/// Destructor of an unconsumed legacy capsule (a consumer renames what it takes).
unsafe extern "C" fn destroy_legacy(capsule: *mut ffi::PyObject) {
    // SAFETY: CPython calls this with the capsule being destroyed; IsValid/GetPointer
    // with its current name neither fail nor set an error when the name matches.
    unsafe {
        if ffi::PyCapsule_IsValid(capsule, NAME.as_ptr()) == 1 {
            let m = ffi::PyCapsule_GetPointer(capsule, NAME.as_ptr()).cast::<DLManagedTensor>();
            delete_legacy(m);
        }
    }
}

/// Destructor of an unconsumed versioned capsule.
unsafe extern "C" fn destroy_versioned(capsule: *mut ffi::PyObject) {
    // SAFETY: as in `destroy_legacy`.
    unsafe {
        if ffi::PyCapsule_IsValid(capsule, NAME_VERSIONED.as_ptr()) == 1 {
            let m = ffi::PyCapsule_GetPointer(capsule, NAME_VERSIONED.as_ptr())
                .cast::<DLManagedTensorVersioned>();
            delete_versioned(m);
        }
    }
}

/// A DLPack capsule over `export`: versioned when the consumer accepts DLPack 1.x.
pub(crate) fn capsule<'py>(
    py: Python<'py>,
    export: &Export,
    versioned: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let mut shape: Vec<i64> = export.shape.iter().map(|&d| d as i64).collect();
    let mut strides = element_strides(export)?;
    let dl_tensor = DLTensor {
        data: export.ptr as *mut c_void,
        device: DLDevice {
            device_type: DEVICE_CPU,
            device_id: 0,
        },
        ndim: shape.len() as i32,
        dtype: data_type(export.dtype),
        shape: shape.as_mut_ptr(),
        strides: strides.as_mut_ptr(),
        byte_offset: 0,
    };
    let raw = if versioned {
        let ctx = Box::into_raw(Box::new(Context {
            managed: DLManagedTensorVersioned {
                version: DLPackVersion { major: 1, minor: 0 },
                manager_ctx: std::ptr::null_mut(),
                deleter: Some(delete_versioned),
                flags: if export.readonly { FLAG_READ_ONLY } else { 0 },
                dl_tensor,
            },
            _shape: shape,
            _strides: strides,
            _pin: export.pin.clone(),
        }));
        // SAFETY: `ctx` is a fresh, valid box; the managed struct is its first field, so
        // a pointer to it is the context too. PyCapsule_New returns a new reference or
        // null with an exception set, in which case the box is freed here.
        unsafe {
            (*ctx).managed.manager_ctx = ctx.cast();
            let cap = ffi::PyCapsule_New(
                (&raw mut (*ctx).managed).cast(),
                NAME_VERSIONED.as_ptr(),
                Some(destroy_versioned),
            );
            if cap.is_null() {
                drop(Box::from_raw(ctx));
            }
            cap
        }
    } else {
        if export.readonly {
            return Err(PyBufferError::new_err(
                "this tensor is read-only and a DLPack 0.x capsule cannot say so; use a \
                 consumer that passes max_version=(1, 0) (numpy >= 2.1 does)",
            ));
        }
        let ctx = Box::into_raw(Box::new(Context {
            managed: DLManagedTensor {
                dl_tensor,
                manager_ctx: std::ptr::null_mut(),
                deleter: Some(delete_legacy),
            },
            _shape: shape,
            _strides: strides,
            _pin: export.pin.clone(),
        }));
        // SAFETY: as above, for the legacy struct.
        unsafe {
            (*ctx).managed.manager_ctx = ctx.cast();
            let cap = ffi::PyCapsule_New(
                (&raw mut (*ctx).managed).cast(),
                NAME.as_ptr(),
                Some(destroy_legacy),
            );
            if cap.is_null() {
                drop(Box::from_raw(ctx));
            }
            cap
        }
    };
    // SAFETY: `raw` is a new reference to a capsule, or null with the error set.
    unsafe { Bound::from_owned_ptr_or_err(py, raw) }
}
