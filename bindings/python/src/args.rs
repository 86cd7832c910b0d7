//! Python arguments → pinframe values, in the Rust API's own words (the library's
//! `FromStr` spellings, whose errors already say what is accepted).

use pinframe::{Access, DType, MemoryRequest, PixelFormat};
use pyo3::prelude::*;
use pyo3::types::PyString;

use crate::errors::{OrRaise, invalid};

/// A dtype from its pinframe name (`"u8"`, `"f32"`, ...), a numpy name (`"uint8"`,
/// `"float32"`, ...), a `numpy.dtype` or a numpy scalar type (`numpy.float32`).
pub(crate) fn dtype(obj: &Bound<'_, PyAny>) -> PyResult<DType> {
    let name: String = if let Ok(s) = obj.cast::<PyString>() {
        s.to_cow()?.into_owned()
    } else if let Ok(n) = obj.getattr("name").and_then(|n| n.extract::<String>()) {
        // numpy.dtype instances
        n
    } else if let Ok(n) = obj.getattr("__name__").and_then(|n| n.extract::<String>()) {
        // numpy scalar types (numpy.float32)
        n
    } else {
        return Err(invalid(format!(
            "dtype {} is not a dtype name (u8 i8 u16 i16 u32 i32 f16 f32 f64)",
            obj.repr()?
        )));
    };
    let rust = match name.as_str() {
        "uint8" => "u8",
        "int8" => "i8",
        "uint16" => "u16",
        "int16" => "i16",
        "uint32" => "u32",
        "int32" => "i32",
        "float16" | "half" => "f16",
        "float32" | "single" => "f32",
        "float64" | "double" | "float" => "f64",
        other => other,
    };
    rust.parse::<DType>().or_raise()
}

/// `None` = the best available (Dma → Shm → Heap); else `heap`, `shm` or `dma`.
/// `None` or "auto" (memfd, else heap), "device" (dma, else memfd, else heap), or one kind.
pub(crate) fn memory(name: Option<&str>) -> PyResult<MemoryRequest> {
    name.map_or(Ok(MemoryRequest::Auto), |m| m.parse::<MemoryRequest>())
        .or_raise()
}

pub(crate) fn format(name: &str) -> PyResult<PixelFormat> {
    name.parse::<PixelFormat>().or_raise()
}

/// `read`, `write` or `readwrite` (also `read-write`, `rw`).
pub(crate) fn access(name: &str) -> PyResult<Access> {
    match name.to_ascii_lowercase().as_str() {
        "read" | "r" => Ok(Access::Read),
        "write" | "w" => Ok(Access::Write),
        "readwrite" | "read-write" | "read_write" | "rw" => Ok(Access::ReadWrite),
        _ => Err(invalid(format!(
            "unknown access {name:?}; expected read, write or readwrite"
        ))),
    }
}
