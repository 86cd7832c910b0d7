//! The crate's error type, and the kinds a caller acts on.

use std::io;

/// Everything that can go wrong in pinframe. Bad input is always one of these,
/// never a panic: each message says what was wrong and, where it can, what to change.
///
/// Match on a variant for the details, or on [`Error::kind`] to decide what to do
/// (retry, wait, reopen, fix the call): a capture loop never needs to read message text.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An image layout is malformed (stride, plane, size, alignment, overflow).
    #[error("invalid image layout: {0}")]
    InvalidLayout(String),
    /// A tensor shape is malformed (zero elements, overflow, mismatch).
    #[error("invalid tensor shape: {0}")]
    InvalidShape(String),
    /// A buffer is smaller than its layout needs.
    #[error(
        "buffer too small: layout needs {needed} bytes in buffer {buffer}, the buffer has {actual}"
    )]
    BufferTooSmall {
        /// Index of the buffer (plane buffer) that is short.
        buffer: usize,
        /// Bytes the layout needs.
        needed: usize,
        /// Bytes the buffer has.
        actual: usize,
    },
    /// A compressed frame (Motion-JPEG) that cannot be decoded: truncated, corrupt, or
    /// not a JPEG image at all. Nothing was written to the destination. A camera counts
    /// such frames as malformed and gives their buffers back.
    #[error("corrupt frame: {0}")]
    CorruptFrame(String),
    /// A file descriptor is closed, of the wrong kind, or unusable.
    #[error("invalid file descriptor: {0}")]
    InvalidFd(String),
    /// An explicitly requested memory kind could not be allocated.
    #[error("cannot allocate {requested} memory; tried: {}", tried.join("; "))]
    MemoryUnavailable {
        /// The memory kind that was asked for.
        requested: &'static str,
        /// Every route that was tried, each with why it failed.
        tried: Vec<String>,
    },
    /// A request that is well-formed but not supported (format pair, dtype, option).
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// An argument is out of range or inconsistent with another.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// Nothing arrived within the time allowed (a camera frame). Waiting again is fine.
    #[error("timed out: {0}")]
    Timeout(String),
    /// Every capture buffer is held by a frame the application has not dropped; the
    /// camera returns this at once instead of blocking. Drop a frame, then ask again.
    #[error(
        "all {buffers} capture buffers are held by frames (or pins over frames) that have not \
         been dropped; drop a Frame, and any pin over it, to give its buffer back before \
         asking for the next one, or open the camera with more buffers"
    )]
    AllBuffersHeld {
        /// The camera's buffer count (all of them held).
        buffers: usize,
    },
    /// The device went away (unplugged, driver unbound). Frames still held stay valid;
    /// close the camera and open it again when the device is back.
    #[error("disconnected: {0}")]
    Disconnected(String),
    /// A buffer was refused for import: by a driver (an EGL image of a dma-buf, a
    /// runtime's dma-buf tensor buffer), or by pinframe (`Tensor::import` of a memfd
    /// without `F_SEAL_SHRINK`). Use host memory or another allocation route, or make the
    /// buffer importable as the message says.
    #[error("import refused: {0}")]
    ImportRefused(String),
    /// The device or its driver reported an error (a V4L2 stream error, a failed
    /// streaming ioctl). Reopening the device is the usual remedy.
    #[error("device error: {0}")]
    Device(String),
    /// The GL backend failed (EGL/GLES error, missing extension).
    #[error("GL backend: {0}")]
    Gl(String),
    /// An inference runtime call failed (a LiteRT status other than OK): a model it
    /// cannot load or compile, a run that failed.
    #[error(
        "{runtime}: {call} failed with status {status} ({status_name}){}",
        if message.is_empty() { String::new() } else { format!(": {message}") }
    )]
    Runtime {
        /// The runtime (`"LiteRT"`).
        runtime: &'static str,
        /// The C function that failed.
        call: &'static str,
        /// Its status code.
        status: i32,
        /// The runtime's name for the status.
        status_name: String,
        /// What pinframe was doing, and what to change where it knows.
        message: String,
    },
    /// No inference runtime library could be loaded, or it lacks a function pinframe binds.
    #[error("{runtime} is not available: {}", tried.join("; "))]
    RuntimeUnavailable {
        /// The runtime (`"LiteRT"`).
        runtime: &'static str,
        /// Every place looked in, each with why it failed.
        tried: Vec<String>,
    },
    /// An operating-system call failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
}

/// What kind of failure an [`Error`] is: what a caller can do about it.
///
/// | kind | what to do |
/// | --- | --- |
/// | [`Timeout`](ErrorKind::Timeout) | wait again (the device is alive, nothing arrived yet) |
/// | [`AllBuffersHeld`](ErrorKind::AllBuffersHeld) | drop a frame you hold, then ask again |
/// | [`Disconnected`](ErrorKind::Disconnected) | close; reopen when the device is back |
/// | [`Device`](ErrorKind::Device) | the driver failed the stream: close and reopen |
/// | [`ImportRefused`](ErrorKind::ImportRefused) | use other memory (host, another route), or fix the buffer as the message says (seal a memfd) |
/// | [`MemoryUnavailable`](ErrorKind::MemoryUnavailable) | ask for other memory, or free some |
/// | [`Unsupported`](ErrorKind::Unsupported) | change the request (format, option, backend) |
/// | [`InvalidInput`](ErrorKind::InvalidInput) | fix the call (layout, shape, fd, argument) |
/// | [`Runtime`](ErrorKind::Runtime) | the inference runtime failed: check the model (the message has its status) |
/// | [`RuntimeUnavailable`](ErrorKind::RuntimeUnavailable) | install the runtime library, or point pinframe at it |
/// | [`Io`](ErrorKind::Io) | an OS call failed for another reason; the message says which |
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// A malformed layout, shape, fd or argument, or a buffer too small for its layout.
    InvalidInput,
    /// Well-formed but not supported here.
    Unsupported,
    /// The requested memory could not be allocated.
    MemoryUnavailable,
    /// Nothing arrived in time.
    Timeout,
    /// Every capture buffer is held by the application.
    AllBuffersHeld,
    /// The device went away.
    Disconnected,
    /// A driver, or pinframe's own checks (an unsealed memfd), refused to import a buffer.
    ImportRefused,
    /// A device, driver or GPU error.
    Device,
    /// An inference runtime failed (loading, compiling or running a model).
    Runtime,
    /// No inference runtime library could be loaded.
    RuntimeUnavailable,
    /// Another operating-system error.
    Io,
}

impl ErrorKind {
    /// Lowercase name (the C ABI and the Python package use the same words).
    pub const fn name(self) -> &'static str {
        match self {
            ErrorKind::InvalidInput => "invalid input",
            ErrorKind::Unsupported => "unsupported",
            ErrorKind::MemoryUnavailable => "memory unavailable",
            ErrorKind::Timeout => "timeout",
            ErrorKind::AllBuffersHeld => "all buffers held",
            ErrorKind::Disconnected => "disconnected",
            ErrorKind::ImportRefused => "import refused",
            ErrorKind::Device => "device error",
            ErrorKind::Runtime => "runtime error",
            ErrorKind::RuntimeUnavailable => "runtime unavailable",
            ErrorKind::Io => "i/o error",
        }
    }
}

impl std::fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// The kind of failure: what a caller can do about it (see [`ErrorKind`]).
    ///
    /// ```
    /// use pinframe::{Error, ErrorKind};
    /// let e = Error::AllBuffersHeld { buffers: 4 };
    /// assert_eq!(e.kind(), ErrorKind::AllBuffersHeld);
    /// assert_eq!(Error::InvalidArgument("x".into()).kind(), ErrorKind::InvalidInput);
    /// ```
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::InvalidLayout(_)
            | Error::InvalidShape(_)
            | Error::BufferTooSmall { .. }
            | Error::CorruptFrame(_)
            | Error::InvalidFd(_)
            | Error::InvalidArgument(_) => ErrorKind::InvalidInput,
            Error::MemoryUnavailable { .. } => ErrorKind::MemoryUnavailable,
            Error::Unsupported(_) => ErrorKind::Unsupported,
            Error::Timeout(_) => ErrorKind::Timeout,
            Error::AllBuffersHeld { .. } => ErrorKind::AllBuffersHeld,
            Error::Disconnected(_) => ErrorKind::Disconnected,
            Error::ImportRefused(_) => ErrorKind::ImportRefused,
            Error::Device(_) | Error::Gl(_) => ErrorKind::Device,
            Error::Runtime { .. } => ErrorKind::Runtime,
            Error::RuntimeUnavailable { .. } => ErrorKind::RuntimeUnavailable,
            Error::Io { source, .. } => match source.raw_os_error() {
                // What the kernel answers on a file whose device is gone.
                Some(libc::ENODEV) | Some(libc::ENXIO) => ErrorKind::Disconnected,
                Some(libc::ETIMEDOUT) => ErrorKind::Timeout,
                Some(libc::EBADF) => ErrorKind::InvalidInput,
                _ => ErrorKind::Io,
            },
        }
    }

    /// The same error (the same variant and kind) with `context` before its message,
    /// e.g. which item of a batch it is about. Variants without a message are returned
    /// as they are.
    pub(crate) fn with_context(self, context: impl std::fmt::Display) -> Self {
        let add = |m: String| format!("{context}: {m}");
        match self {
            Error::InvalidLayout(m) => Error::InvalidLayout(add(m)),
            Error::InvalidShape(m) => Error::InvalidShape(add(m)),
            Error::CorruptFrame(m) => Error::CorruptFrame(add(m)),
            Error::InvalidFd(m) => Error::InvalidFd(add(m)),
            Error::Unsupported(m) => Error::Unsupported(add(m)),
            Error::InvalidArgument(m) => Error::InvalidArgument(add(m)),
            Error::Timeout(m) => Error::Timeout(add(m)),
            Error::Disconnected(m) => Error::Disconnected(add(m)),
            Error::ImportRefused(m) => Error::ImportRefused(add(m)),
            Error::Device(m) => Error::Device(add(m)),
            Error::Gl(m) => Error::Gl(add(m)),
            Error::Io { context: c, source } => Error::Io {
                context: add(c),
                source,
            },
            other => other,
        }
    }

    /// Wraps the current `errno` with a description of the call that failed.
    pub(crate) fn last_os(context: impl Into<String>) -> Self {
        Error::Io {
            context: context.into(),
            source: io::Error::last_os_error(),
        }
    }

    /// Wraps an `io::Error` with a description of the call that failed.
    pub(crate) fn io(context: impl Into<String>, source: io::Error) -> Self {
        Error::Io {
            context: context.into(),
            source,
        }
    }
}

impl From<nix::Error> for Error {
    fn from(e: nix::Error) -> Self {
        Error::Io {
            context: "system call".into(),
            source: io::Error::from(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn os_errors_of_a_vanished_device_are_disconnections() {
        let gone = Error::io("VIDIOC_DQBUF", io::Error::from_raw_os_error(libc::ENODEV));
        assert_eq!(gone.kind(), ErrorKind::Disconnected);
        let other = Error::io("read", io::Error::from_raw_os_error(libc::EIO));
        assert_eq!(other.kind(), ErrorKind::Io);
        assert!(gone.to_string().starts_with("VIDIOC_DQBUF: "), "{gone}");
    }

    #[test]
    fn every_kind_has_a_distinct_name() {
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
        let names: std::collections::HashSet<_> = kinds.iter().map(|k| k.name()).collect();
        assert_eq!(names.len(), kinds.len());
    }
}
