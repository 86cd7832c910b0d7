//! Version, build and run-time information, status names and the last error.

use std::ffi::c_char;
use std::fmt::Write as _;

use pinframe::tensor::{CpuMappingGuard, cpu_mapping_guard};
use pinframe::{Backend, ImageProcessor};

use crate::status::{
    Failure, SizedStruct, call, last_error_ptr, pinframe_status, str_arg, write_out, write_sized,
};
use crate::types::{format_code, format_name_ptr, pinframe_format};

/// The library's major version (also the soname's: `libpinframe.so.0`).
pub const PINFRAME_VERSION_MAJOR: u32 = 0;
/// The library's minor version.
pub const PINFRAME_VERSION_MINOR: u32 = 1;
/// The library's patch version.
pub const PINFRAME_VERSION_PATCH: u32 = 0;

/// Built with the GL backend.
pub const PINFRAME_FEATURE_GL: u32 = 1;
/// Built with V4L2 capture.
pub const PINFRAME_FEATURE_CAMERA: u32 = 2;

/// What this libpinframe is (`pinframe_get_info`). Set `struct_size = sizeof(pinframe_info)`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct pinframe_info {
    /// `sizeof(pinframe_info)`, set by the caller.
    pub struct_size: usize,
    /// The library's major version.
    pub version_major: u32,
    /// The library's minor version.
    pub version_minor: u32,
    /// The library's patch version.
    pub version_patch: u32,
    /// The `PINFRAME_FEATURE_*` bits it was built with.
    pub features: u32,
    /// `PINFRAME_GUARD_ABI_VERSION` of its guard table.
    pub guard_abi_version: u32,
}

impl SizedStruct for pinframe_info {
    const NAME: &'static str = "pinframe_info";
    const RELEASED: &'static [usize] = &[size_of::<Self>()];
}

/// The library's version, `"MAJOR.MINOR.PATCH"`. Static; never NULL.
///
/// Ownership: the string belongs to the library.
#[unsafe(no_mangle)]
pub extern "C" fn pinframe_version() -> *const c_char {
    static VERSION: &std::ffi::CStr = {
        match std::ffi::CStr::from_bytes_with_nul(
            concat!(env!("CARGO_PKG_VERSION"), "\0").as_bytes(),
        ) {
            Ok(s) => s,
            Err(_) => panic!("the package version has a NUL"),
        }
    };
    VERSION.as_ptr()
}

/// The library's version, features and guard ABI, in `*info` (whose `struct_size` the
/// caller set).
///
/// Ownership: writes `*info`.
///
/// # Safety
/// `info` points to a `pinframe_info` with its `struct_size` set.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pinframe_get_info(info: *mut pinframe_info) -> pinframe_status {
    call(|| {
        let out = pinframe_info {
            struct_size: size_of::<pinframe_info>(),
            version_major: PINFRAME_VERSION_MAJOR,
            version_minor: PINFRAME_VERSION_MINOR,
            version_patch: PINFRAME_VERSION_PATCH,
            features: PINFRAME_FEATURE_GL | PINFRAME_FEATURE_CAMERA,
            guard_abi_version: crate::guard::PINFRAME_GUARD_ABI_VERSION,
        };
        // SAFETY: the caller's contract.
        unsafe { write_sized(info, "info", out) }
    })
}

/// A human-readable report like `pinframe info`'s: version, the CPU-mapping guard, the
/// backends (this starts EGL once to describe GL), DMA memory routes. Written into
/// `buffer` (`capacity` bytes, always NUL-terminated when `capacity` > 0, truncated if
/// short); `*length` receives the full length without the NUL, so a caller can retry
/// with `*length + 1` bytes. `buffer` may be NULL when `capacity` is 0.
///
/// Ownership: writes `buffer[0..capacity]` and `*length`.
///
/// # Safety
/// `buffer` is valid for `capacity` bytes (or NULL with capacity 0); `length` is
/// writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pinframe_info_string(
    buffer: *mut c_char,
    capacity: usize,
    length: *mut usize,
) -> pinframe_status {
    call(|| {
        // SAFETY: the caller's contract.
        unsafe { write_out(length, "length", 0)? };
        if buffer.is_null() && capacity > 0 {
            return Err(Failure::null("buffer"));
        }
        let text = report();
        let n = text.len().min(capacity.saturating_sub(1));
        if capacity > 0 {
            // SAFETY: buffer has capacity bytes; we write n < capacity bytes and a NUL.
            unsafe {
                std::ptr::copy_nonoverlapping(text.as_ptr(), buffer as *mut u8, n);
                *buffer.add(n) = 0;
            }
        }
        // SAFETY: checked above.
        unsafe { *length = text.len() };
        Ok(())
    })
}

fn report() -> String {
    let mut s = String::new();
    let _ = writeln!(s, "pinframe {} (C library)", env!("CARGO_PKG_VERSION"));
    match cpu_mapping_guard() {
        Ok(CpuMappingGuard::Shared { library }) => {
            let _ = writeln!(s, "cpu-mapping guard: shared, in {library}");
        }
        Ok(_) => {
            let _ = writeln!(
                s,
                "cpu-mapping guard: this library's (returned by pinframe_get_guard_table to \
                 copies built with shared-guard)"
            );
        }
        Err(e) => {
            let _ = writeln!(s, "cpu-mapping guard: unavailable: {e}");
        }
    }
    let _ = writeln!(
        s,
        "cpu: fused kernels on {} thread(s)",
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    match ImageProcessor::with_backend(Backend::Gl) {
        Ok(p) => match p.gl_info() {
            Some(i) => {
                let _ = writeln!(s, "gl: {i}");
            }
            None => {
                let _ = writeln!(s, "gl: started");
            }
        },
        Err(e) => {
            let _ = writeln!(s, "gl: unavailable: {e}");
        }
    }
    let _ = writeln!(
        s,
        "dma-heaps tried: {}",
        pinframe::tensor::dma_heap_order().join(", ")
    );
    let nodes = pinframe::tensor::render_nodes();
    let _ = writeln!(
        s,
        "DRM render nodes: {}",
        if nodes.is_empty() {
            "none".to_string()
        } else {
            nodes.join(", ")
        }
    );
    s
}

/// The message of the calling thread's last failed call ("" when its last call
/// succeeded). Never NULL. The string belongs to the library and stays valid until the
/// thread's next call into pinframe.
#[unsafe(no_mangle)]
pub extern "C" fn pinframe_last_error() -> *const c_char {
    last_error_ptr()
}

/// The lowercase name of a status (`"ok"`, `"invalid input"`, `"timeout"`, ... the words
/// of pinframe's error kinds); `"not a pinframe status"` for other values. Static; never
/// NULL.
#[unsafe(no_mangle)]
pub extern "C" fn pinframe_status_name(status: i32) -> *const c_char {
    const NAMES: [&std::ffi::CStr; 13] = [
        c"ok",
        c"invalid input",
        c"unsupported",
        c"memory unavailable",
        c"timeout",
        c"all buffers held",
        c"disconnected",
        c"import refused",
        c"device error",
        c"i/o error",
        c"null pointer",
        c"internal error (panic)",
        c"unknown error kind",
    ];
    match usize::try_from(status).ok().and_then(|i| NAMES.get(i)) {
        Some(n) => n.as_ptr(),
        None => c"not a pinframe status".as_ptr(),
    }
}

/// The lowercase name of a pixel format (`"nv12"`, `"planar-rgb"`: the CLI's words), or
/// NULL for a value that is not a `PINFRAME_FORMAT_*`. Static.
#[unsafe(no_mangle)]
pub extern "C" fn pinframe_format_name(format: pinframe_format) -> *const c_char {
    format_name_ptr(format)
}

/// The `PINFRAME_FORMAT_*` value of a format name (the CLI's words, case-insensitive), in
/// `*format`. An unknown name is `PINFRAME_ERROR_INVALID_INPUT`.
///
/// Ownership: reads `name`; writes `*format`.
///
/// # Safety
/// `name` is a NUL-terminated string; `format` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pinframe_format_from_name(
    name: *const c_char,
    format: *mut pinframe_format,
) -> pinframe_status {
    call(|| {
        // SAFETY: the caller's contract.
        unsafe { write_out(format, "format", 0)? };
        // SAFETY: the caller's contract.
        let name = unsafe { str_arg(name, "name")? };
        let f: pinframe::PixelFormat = name.parse()?;
        // SAFETY: checked above.
        unsafe { *format = format_code(f)? };
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_constants_match_the_package() {
        assert_eq!(
            format!("{PINFRAME_VERSION_MAJOR}.{PINFRAME_VERSION_MINOR}.{PINFRAME_VERSION_PATCH}"),
            env!("CARGO_PKG_VERSION")
        );
    }

    #[test]
    fn status_names_cover_the_codes() {
        let name = |code| {
            // SAFETY: static NUL-terminated strings.
            unsafe { std::ffi::CStr::from_ptr(pinframe_status_name(code)) }
                .to_str()
                .unwrap()
        };
        assert_eq!(name(0), "ok");
        assert_eq!(
            name(crate::status::PINFRAME_ERROR_NULL_POINTER as i32),
            "null pointer"
        );
        assert_eq!(
            name(crate::status::PINFRAME_ERROR_UNKNOWN as i32),
            "unknown error kind"
        );
        assert_eq!(name(13), "not a pinframe status");
        assert_eq!(name(-1), "not a pinframe status");
    }
}
