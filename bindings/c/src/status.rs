//! Status codes, the thread's last error message, and the one wrapper every entry point
//! runs its body in (panics caught, null pointers reported, errors mapped to codes).

use std::cell::RefCell;
use std::ffi::{CString, c_char};
use std::panic::{AssertUnwindSafe, catch_unwind};

use pinframe::ErrorKind;

/// What a call did. `PINFRAME_OK` (0) is success; every other value is a failure whose
/// message `pinframe_last_error()` returns. The error codes follow pinframe's error
/// kinds (what a caller can do about a failure), plus three of the C boundary's own.
#[repr(i32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(non_camel_case_types)]
pub enum pinframe_status {
    /// Success.
    PINFRAME_OK = 0,
    /// A malformed layout, shape, fd or argument, or a buffer too small for its layout:
    /// fix the call.
    PINFRAME_ERROR_INVALID_INPUT = 1,
    /// Well-formed but not supported here (a format pair, a dtype, an option, a backend):
    /// change the request.
    PINFRAME_ERROR_UNSUPPORTED = 2,
    /// The requested memory could not be allocated: ask for other memory, or free some.
    PINFRAME_ERROR_MEMORY_UNAVAILABLE = 3,
    /// Nothing arrived in time (a camera frame): waiting again is fine.
    PINFRAME_ERROR_TIMEOUT = 4,
    /// Every capture buffer is held by a frame not yet released: release one, then ask
    /// again.
    PINFRAME_ERROR_ALL_BUFFERS_HELD = 5,
    /// The device went away: free the camera, open it again when the device is back.
    PINFRAME_ERROR_DISCONNECTED = 6,
    /// A driver refused to import a buffer: use other memory.
    PINFRAME_ERROR_IMPORT_REFUSED = 7,
    /// A device, driver or GPU error: close the device and open it again.
    PINFRAME_ERROR_DEVICE = 8,
    /// Another operating-system call failed; the message says which.
    PINFRAME_ERROR_IO = 9,
    /// A pointer argument that must not be NULL was NULL; the message names it.
    PINFRAME_ERROR_NULL_POINTER = 10,
    /// An internal error (a Rust panic) was caught at the C boundary. The handles passed
    /// to the call are still valid to free; please report it.
    PINFRAME_ERROR_PANIC = 11,
    /// An error of a kind newer than this header (the message says what happened).
    PINFRAME_ERROR_UNKNOWN = 12,
}

pub use pinframe_status::*;

impl pinframe_status {
    /// The status of an error of `kind`.
    pub(crate) fn of_kind(kind: ErrorKind) -> pinframe_status {
        match kind {
            ErrorKind::InvalidInput => PINFRAME_ERROR_INVALID_INPUT,
            ErrorKind::Unsupported => PINFRAME_ERROR_UNSUPPORTED,
            ErrorKind::MemoryUnavailable => PINFRAME_ERROR_MEMORY_UNAVAILABLE,
            ErrorKind::Timeout => PINFRAME_ERROR_TIMEOUT,
            ErrorKind::AllBuffersHeld => PINFRAME_ERROR_ALL_BUFFERS_HELD,
            ErrorKind::Disconnected => PINFRAME_ERROR_DISCONNECTED,
            ErrorKind::ImportRefused => PINFRAME_ERROR_IMPORT_REFUSED,
            ErrorKind::Device => PINFRAME_ERROR_DEVICE,
            ErrorKind::Io => PINFRAME_ERROR_IO,
            _ => PINFRAME_ERROR_UNKNOWN,
        }
    }
}

/// A failed call: its status and message.
#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) status: pinframe_status,
    pub(crate) message: String,
}

impl Failure {
    pub(crate) fn new(status: pinframe_status, message: impl Into<String>) -> Self {
        Failure {
            status,
            message: message.into(),
        }
    }

    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Failure::new(PINFRAME_ERROR_INVALID_INPUT, message)
    }

    pub(crate) fn null(argument: &str) -> Self {
        Failure::new(
            PINFRAME_ERROR_NULL_POINTER,
            format!("null pointer: `{argument}` must not be NULL"),
        )
    }
}

impl From<pinframe::Error> for Failure {
    fn from(e: pinframe::Error) -> Self {
        Failure::new(pinframe_status::of_kind(e.kind()), e.to_string())
    }
}

pub(crate) type Outcome<T = ()> = Result<T, Failure>;

thread_local! {
    /// The message of the thread's last failed call ("" after a successful one).
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

fn set_last_error(message: &str) {
    // Interior NULs cannot be carried by a C string: show them as spaces.
    let clean = CString::new(message.replace('\0', " ")).unwrap_or_default();
    let _ = LAST_ERROR.try_with(|e| *e.borrow_mut() = clean);
}

fn clear_last_error() {
    let _ = LAST_ERROR.try_with(|e| {
        let mut e = e.borrow_mut();
        if !e.as_bytes().is_empty() {
            *e = CString::default();
        }
    });
}

/// The message of the thread's last failed call, for `pinframe_last_error`.
pub(crate) fn last_error_ptr() -> *const c_char {
    static EMPTY: &std::ffi::CStr = c"";
    LAST_ERROR
        .try_with(|e| e.borrow().as_ptr())
        .unwrap_or(EMPTY.as_ptr())
}

/// Runs an entry point's body: clears the thread's message, catches a panic, and turns
/// the outcome into a status (recording the message of a failure).
pub(crate) fn call(body: impl FnOnce() -> Outcome) -> pinframe_status {
    clear_last_error();
    let failure = match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => {
            // A callback run inside the call may have failed calls of its own.
            clear_last_error();
            return PINFRAME_OK;
        }
        Ok(Err(f)) => f,
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic without a message".into());
            Failure::new(
                PINFRAME_ERROR_PANIC,
                format!("internal error (a Rust panic caught at the C boundary): {what}"),
            )
        }
    };
    set_last_error(&failure.message);
    failure.status
}

/// Writes `value` through the out-pointer `out` (checked for null first).
///
/// # Safety
/// `out` is NULL or valid for a write of `T`.
pub(crate) unsafe fn write_out<T>(out: *mut T, name: &str, value: T) -> Outcome {
    if out.is_null() {
        return Err(Failure::null(name));
    }
    // SAFETY: non-null, and the caller guarantees it is valid for a write of T.
    unsafe { out.write(value) };
    Ok(())
}

/// Checks an out-pointer for null and sets it to a harmless value before the work, so a
/// failed call leaves NULL behind.
///
/// # Safety
/// `out` is NULL or valid for a write of `*mut T`.
pub(crate) unsafe fn prepare_out<T>(out: *mut *mut T, name: &str) -> Outcome {
    // SAFETY: the caller's contract.
    unsafe { write_out(out, name, std::ptr::null_mut()) }
}

/// A `#[repr(C)]` struct that starts with a caller-set `struct_size`: the sizes its
/// released layouts have had (the original, then one per block appended at its end).
pub(crate) trait SizedStruct: Copy {
    /// The C name, for messages.
    const NAME: &'static str;
    /// Every `sizeof` a released header gave the struct, ascending; the last is this
    /// library's own.
    const RELEASED: &'static [usize];
}

/// Checks a caller's `struct_size` against `T`'s released layouts: one of their sizes, or
/// larger than this library's (a newer header). Any other size ends inside a field (a
/// torn pointer or float) or names a layout that never existed.
pub(crate) fn check_struct_size<T: SizedStruct>(size: usize, name: &str) -> Outcome {
    debug_assert_eq!(T::RELEASED.last(), Some(&size_of::<T>()));
    if T::RELEASED.contains(&size) || size > size_of::<T>() {
        return Ok(());
    }
    let accepted: Vec<String> = T::RELEASED.iter().map(|n| n.to_string()).collect();
    Err(Failure::invalid(format!(
        "`{name}`: struct_size {size} is not a size of {} (accepted sizes: {}, or larger \
         from a newer header); set it to sizeof({}), or initialise the struct with its \
         _init function",
        T::NAME,
        accepted.join(", "),
        T::NAME
    )))
}

/// A sized struct a caller passes (see [`SizedStruct`]): the bytes the caller's header
/// knows. Reads the prefix that both sides know and defaults the rest; a caller's struct
/// longer than this library's must have zeros past it (a newer header asking for
/// something this library cannot do is an error, not silently ignored). A `struct_size`
/// that is not a released size is refused before anything is read past it.
///
/// # Safety
/// `p` is valid for reads of `*(p as *const usize)` bytes (the struct_size it carries).
pub(crate) unsafe fn read_sized<T: SizedStruct>(p: *const T, name: &str, default: T) -> Outcome<T> {
    if p.is_null() {
        return Err(Failure::null(name));
    }
    // SAFETY: every sized struct starts with a size_t struct_size; p is valid for it.
    let size = unsafe { (p as *const usize).read_unaligned() };
    let ours = size_of::<T>();
    check_struct_size::<T>(size, name)?;
    let mut value = default;
    let known = size.min(ours);
    // SAFETY: the caller's struct has `size` readable bytes and ours has `ours`; we copy
    // the `known` bytes both have, which end on a field boundary of a released layout
    // (checked above), so no field is torn. T is plain data (`Copy`, repr(C), every
    // field an integer, float or pointer), so these bytes form a valid value.
    unsafe {
        std::ptr::copy_nonoverlapping(p as *const u8, &mut value as *mut T as *mut u8, known)
    };
    if size > ours {
        // SAFETY: the caller's struct has `size` readable bytes.
        let tail = unsafe { std::slice::from_raw_parts((p as *const u8).add(ours), size - ours) };
        if tail.iter().any(|&b| b != 0) {
            return Err(Failure::new(
                PINFRAME_ERROR_UNSUPPORTED,
                format!(
                    "`{name}` uses fields this libpinframe ({}) does not know (struct_size \
                     {size}, this library's is {ours}); link the libpinframe your header \
                     came with",
                    env!("CARGO_PKG_VERSION")
                ),
            ));
        }
    }
    Ok(value)
}

/// Writes `value` into a caller's sized struct, at most its `struct_size` bytes (which the
/// caller set, checked as [`read_sized`] checks it, so no field is half written), keeping
/// the caller's struct_size.
///
/// # Safety
/// `p` is NULL or valid for writes of the struct_size it carries.
pub(crate) unsafe fn write_sized<T: SizedStruct>(p: *mut T, name: &str, value: T) -> Outcome {
    if p.is_null() {
        return Err(Failure::null(name));
    }
    // SAFETY: every sized struct starts with a size_t struct_size; p is valid for it.
    let size = unsafe { (p as *const usize).read_unaligned() };
    check_struct_size::<T>(size, name)?;
    let n = size.min(size_of::<T>());
    // SAFETY: we write the n - 8 bytes after the struct_size field that both sides have
    // (n is a released size, at least the struct_size field's 8 bytes).
    unsafe {
        std::ptr::copy_nonoverlapping(
            (&value as *const T as *const u8).add(size_of::<usize>()),
            (p as *mut u8).add(size_of::<usize>()),
            n - size_of::<usize>(),
        )
    };
    Ok(())
}

/// What a handle (`pinframe_tensor *`, `pinframe_processor *`, ...) points to: a tag first,
/// at offset 0 in every kind (`repr(C)`), then the kind's state. The public handle types
/// are opaque markers; this is their one layout.
#[repr(C)]
pub(crate) struct Handle<T> {
    /// The kind's tag while the handle lives, 0 once freed.
    pub(crate) magic: u64,
    pub(crate) body: T,
}

impl<T> Handle<T> {
    pub(crate) fn new(magic: u64, body: T) -> Self {
        Handle { magic, body }
    }

    /// A new heap handle, as the caller's opaque pointer type.
    pub(crate) fn into_raw<O>(self) -> *mut O {
        Box::into_raw(Box::new(self)) as *mut O
    }
}

/// Checks a handle argument: not NULL, and tagged `magic` (a handle of another kind, or a
/// freed one, is refused; a best-effort check for the caller's mistakes).
///
/// # Safety
/// `p` is NULL or points to at least 8 readable bytes; when tagged `magic` it is a live
/// `Handle<T>` made by this library.
pub(crate) unsafe fn handle<'a, O, T>(
    p: *const O,
    magic: u64,
    kind: &str,
    name: &str,
) -> Outcome<&'a T> {
    if p.is_null() {
        return Err(Failure::null(name));
    }
    // SAFETY: the caller's contract: 8 readable bytes (every handle starts with its tag).
    let tag = unsafe { (p as *const u64).read_unaligned() };
    if tag != magic {
        return Err(Failure::invalid(format!(
            "`{name}` is not a live {kind} handle"
        )));
    }
    // SAFETY: tagged, so a live Handle<T> (the caller's contract).
    Ok(unsafe { &(*(p as *const Handle<T>)).body })
}

/// Takes a handle back to free it (None for NULL, a no-op); its tag is cleared.
///
/// # Safety
/// As `handle`, and the handle came from `Handle::into_raw` and is not used afterwards.
pub(crate) unsafe fn take_handle<O, T>(
    p: *mut O,
    magic: u64,
    kind: &str,
    name: &str,
) -> Outcome<Option<Box<Handle<T>>>> {
    if p.is_null() {
        return Ok(None);
    }
    // SAFETY: the caller's contract.
    unsafe { handle::<O, T>(p, magic, kind, name)? };
    // SAFETY: a live handle made by `into_raw` (Box::into_raw); ownership comes back once.
    let mut owned = unsafe { Box::from_raw(p as *mut Handle<T>) };
    owned.magic = 0;
    Ok(Some(owned))
}

/// A C string argument as UTF-8.
///
/// # Safety
/// `p` is NULL or a NUL-terminated string.
pub(crate) unsafe fn str_arg<'a>(p: *const c_char, name: &str) -> Outcome<&'a str> {
    if p.is_null() {
        return Err(Failure::null(name));
    }
    // SAFETY: non-null and NUL-terminated by the caller's contract.
    let s = unsafe { std::ffi::CStr::from_ptr(p) };
    s.to_str()
        .map_err(|_| Failure::invalid(format!("`{name}` is not valid UTF-8")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_a_status_and_a_message() {
        let s = call(|| panic!("deliberately"));
        assert_eq!(s, PINFRAME_ERROR_PANIC);
        // SAFETY: last_error_ptr returns a NUL-terminated string owned by this thread.
        let m = unsafe { std::ffi::CStr::from_ptr(last_error_ptr()) };
        assert!(m.to_str().unwrap().contains("deliberately"), "{m:?}");
        assert_eq!(call(|| Ok(())), PINFRAME_OK);
        // SAFETY: as above.
        let m = unsafe { std::ffi::CStr::from_ptr(last_error_ptr()) };
        assert!(m.to_bytes().is_empty(), "a success clears the message");
    }

    #[test]
    fn every_error_kind_has_its_own_code_and_name() {
        let kinds = [
            ErrorKind::InvalidInput,
            ErrorKind::Unsupported,
            ErrorKind::MemoryUnavailable,
            ErrorKind::Timeout,
            ErrorKind::AllBuffersHeld,
            ErrorKind::Disconnected,
            ErrorKind::ImportRefused,
            ErrorKind::Device,
            ErrorKind::Io,
        ];
        let mut codes = std::collections::HashSet::new();
        for k in kinds {
            let code = pinframe_status::of_kind(k);
            assert_ne!(code, PINFRAME_ERROR_UNKNOWN, "{k:?} has no code");
            assert!(codes.insert(code as i32), "{k:?} shares a code");
            // SAFETY: status names are static NUL-terminated strings.
            let name =
                unsafe { std::ffi::CStr::from_ptr(crate::pinframe_status_name(code as i32)) };
            assert_eq!(name.to_str().unwrap(), k.name());
        }
    }
}
