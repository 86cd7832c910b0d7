//! Element types a tensor can hold.

use std::fmt;

/// The element type of a tensor, as a value (see [`Element`] for the type-level side).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DType {
    /// `u8`
    U8,
    /// `i8`
    I8,
    /// `u16`
    U16,
    /// `i16`
    I16,
    /// `u32`
    U32,
    /// `i32`
    I32,
    /// `half::f16`
    F16,
    /// `f32`
    F32,
    /// `f64`
    F64,
}

impl DType {
    /// Bytes per element.
    pub const fn size(self) -> usize {
        match self {
            DType::U8 | DType::I8 => 1,
            DType::U16 | DType::I16 | DType::F16 => 2,
            DType::U32 | DType::I32 | DType::F32 => 4,
            DType::F64 => 8,
        }
    }

    /// Lowercase name (`u8`, `f32`, ...), as the CLI spells it.
    pub const fn name(self) -> &'static str {
        match self {
            DType::U8 => "u8",
            DType::I8 => "i8",
            DType::U16 => "u16",
            DType::I16 => "i16",
            DType::U32 => "u32",
            DType::I32 => "i32",
            DType::F16 => "f16",
            DType::F32 => "f32",
            DType::F64 => "f64",
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for DType {
    type Err = crate::Error;
    fn from_str(s: &str) -> crate::Result<Self> {
        Ok(match s {
            "u8" => DType::U8,
            "i8" => DType::I8,
            "u16" => DType::U16,
            "i16" => DType::I16,
            "u32" => DType::U32,
            "i32" => DType::I32,
            "f16" => DType::F16,
            "f32" => DType::F32,
            "f64" => DType::F64,
            _ => {
                return Err(crate::Error::InvalidArgument(format!(
                    "unknown dtype {s:?}; expected one of u8 i8 u16 i16 u32 i32 f16 f32 f64"
                )));
            }
        })
    }
}

mod sealed {
    pub trait Sealed {}
}

/// A plain element type a [`Tensor`](crate::Tensor) can hold: every bit pattern is a
/// valid value, so a tensor can be backed by memory another process or a device writes.
pub trait Element:
    bytemuck::Pod + Send + Sync + fmt::Debug + PartialEq + sealed::Sealed + 'static
{
    /// The runtime tag of this type.
    const DTYPE: DType;
}

macro_rules! element {
    ($($t:ty => $d:ident),* $(,)?) => {$(
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const DTYPE: DType = DType::$d;
        }
    )*};
}

element!(u8 => U8, i8 => I8, u16 => U16, i16 => I16, u32 => U32, i32 => I32,
         half::f16 => F16, f32 => F32, f64 => F64);
