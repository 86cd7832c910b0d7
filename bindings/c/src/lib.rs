//! `libpinframe`: pinframe's C ABI (`include/pinframe.h`, generated from this crate by
//! cbindgen and checked in).
//!
//! Conventions, for every function:
//! - it returns a `pinframe_status` (`PINFRAME_OK` = 0), except the few that return a
//!   static string or the guard table; on failure `pinframe_last_error()` has the message;
//! - no Rust panic crosses the boundary: each entry point that returns a status runs its
//!   body in `status::call`, which catches it (`PINFRAME_ERROR_PANIC`); the five that do
//!   not (`pinframe_version`, `_last_error`, `_status_name`, `_format_name`,
//!   `_get_guard_table`) are table lookups that cannot panic. A bad argument is never
//!   meant to reach a panic: it is `PINFRAME_ERROR_INVALID_INPUT` with a message;
//! - every pointer argument is checked for NULL (`PINFRAME_ERROR_NULL_POINTER`, naming
//!   it), except where NULL is documented to mean something (a default, a no-op free);
//! - handles are opaque, checked for their kind, and documented with who owns what;
//! - structs the caller fills or receives start with `struct_size`, which the caller sets
//!   to `sizeof` the struct, so the structs can grow without breaking old programs; a
//!   `struct_size` must be a size the struct had in a released header (or larger, from a
//!   newer one): any other is `PINFRAME_ERROR_INVALID_INPUT`, naming the accepted sizes;
//! - integer codes, not C enums, carry every choice (an out-of-range value is an error,
//!   never undefined behaviour).

#![warn(missing_docs)]
// The C names are the ABI (`pinframe_tensor`, `PINFRAME_OK`).
#![allow(non_camel_case_types)]

mod camera;
mod guard;
mod info;
mod processor;
mod status;
mod tensor;
mod types;

pub use camera::*;
pub use guard::*;
pub use info::*;
pub use processor::*;
pub use status::pinframe_status;
pub use tensor::*;
pub use types::*;
