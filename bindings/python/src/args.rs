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

/// A timeout in seconds (`int` or `float`) as a `Duration`: positive and finite, at most
/// `MAX_TIMEOUT_S` (a day; longer waits are a mistake, and `Duration`/`Instant`
/// arithmetic must not overflow); anything else is an `InvalidInput` naming `what`.
pub(crate) fn seconds(value: f64, what: &str) -> PyResult<std::time::Duration> {
    if !(value.is_finite() && value > 0.0 && value <= MAX_TIMEOUT_S) {
        return Err(invalid(format!(
            "{what} {value} must be a positive number of seconds, at most {MAX_TIMEOUT_S}"
        )));
    }
    Ok(std::time::Duration::from_secs_f64(value))
}

/// The longest timeout a Python caller may ask for, in seconds (one day).
pub(crate) const MAX_TIMEOUT_S: f64 = 86_400.0;

/// A Python integer in `min..=max`; a negative, huge or non-integer value is an
/// `InvalidInput` naming `what` (not an `OverflowError` from the conversion).
pub(crate) fn int_in<T: TryFrom<i64>>(
    obj: &Bound<'_, PyAny>,
    what: &str,
    min: i64,
    max: i64,
) -> PyResult<T> {
    let bad = || invalid(format!("{what} must be an integer from {min} to {max}"));
    if obj.is_instance_of::<pyo3::types::PyBool>() {
        return Err(bad());
    }
    let v: i64 = obj.extract().map_err(|_| bad())?;
    if v < min || v > max {
        return Err(invalid(format!(
            "{what} {v} is out of range: it must be from {min} to {max}"
        )));
    }
    T::try_from(v).map_err(|_| bad())
}

/// An integer argument (a size, count, offset, index or byte value): a negative, huge or
/// non-integer value is an `InvalidInput` saying the range, where PyO3's own conversion
/// would raise `OverflowError` or `TypeError`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Int<T>(pub T);

macro_rules! int_argument {
    ($($t:ty),*) => {$(
        impl<'a, 'py> FromPyObject<'a, 'py> for Int<$t> {
            type Error = PyErr;

            fn extract(obj: pyo3::Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
                let range = || format!("an integer from {} to {}", <$t>::MIN, <$t>::MAX);
                if obj.is_instance_of::<pyo3::types::PyBool>()
                    || !obj.is_instance_of::<pyo3::types::PyInt>()
                {
                    return Err(invalid(format!(
                        "{} is not an integer: expected {}",
                        obj.repr()?,
                        range()
                    )));
                }
                match obj.extract::<i128>().ok().and_then(|v| <$t>::try_from(v).ok()) {
                    Some(v) => Ok(Int(v)),
                    None => Err(invalid(format!(
                        "{} is out of range: expected {}",
                        obj.repr()?,
                        range()
                    ))),
                }
            }
        }
    )*};
}

int_argument!(u8, u32, usize);

/// The values of integer arguments.
pub(crate) fn ints<T: Copy>(v: &[Int<T>]) -> Vec<T> {
    v.iter().map(|i| i.0).collect()
}
