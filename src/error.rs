//! The crate's error type.

use std::io;

/// Everything that can go wrong in pinframe. Bad input is always one of these,
/// never a panic: each message says what was wrong and, where it can, what to change.
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
    /// The GL backend failed (EGL/GLES error, missing extension).
    #[error("GL backend: {0}")]
    Gl(String),
    /// Camera capture failed.
    #[error("camera: {0}")]
    Camera(String),
    /// An inference runtime call failed (a LiteRT status other than OK).
    #[error("{runtime}: {call} failed with status {status} ({status_name}){}", if message.is_empty() { String::new() } else { format!(": {message}") })]
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

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
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
