//! pinframe's errors as Python exceptions: one class per [`ErrorKind`], all subclasses of
//! `pinframe.Error`, so that Python code catches what it can act on (the same words as the
//! Rust kinds and the C ABI's status names).

use pyo3::exceptions::{PyException, PyOSError, PyTimeoutError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple, PyType};

use pinframe::{Error, ErrorKind};

/// The exception classes, made once when the module is imported.
struct Classes {
    base: Py<PyType>,
    /// One per kind, in the order of [`KINDS`].
    kinds: Vec<Py<PyType>>,
}

static CLASSES: PyOnceLock<Classes> = PyOnceLock::new();

/// Every kind, its Python class name, an extra standard base class (so that code written
/// for the standard exceptions still catches them) and the class docstring.
const KINDS: [(ErrorKind, &str, Base, &str); 11] = [
    (
        ErrorKind::InvalidInput,
        "InvalidInput",
        Base::Value,
        "A malformed layout, shape, fd, array or option, or a buffer too small for its \
         layout: fix the call. Also a ValueError.",
    ),
    (
        ErrorKind::Unsupported,
        "Unsupported",
        Base::None,
        "Well-formed but not supported here (format pair, dtype, backend, layout): change \
         the request.",
    ),
    (
        ErrorKind::MemoryUnavailable,
        "MemoryUnavailable",
        Base::None,
        "The requested memory kind could not be allocated (the message lists every route \
         tried): ask for other memory, or free some.",
    ),
    (
        ErrorKind::Timeout,
        "Timeout",
        Base::Timeout,
        "Nothing arrived in time (a camera frame): ask again. Also a TimeoutError.",
    ),
    (
        ErrorKind::AllBuffersHeld,
        "AllBuffersHeld",
        Base::None,
        "Every capture buffer is held by a frame that was not released: release a frame \
         (leave its `with` block, call `release()` or drop it), then ask again.",
    ),
    (
        ErrorKind::Disconnected,
        "Disconnected",
        Base::None,
        "The device went away: close the camera; open it again when the device is back.",
    ),
    (
        ErrorKind::ImportRefused,
        "ImportRefused",
        Base::None,
        "A driver refused to import a buffer: use other memory (heap, another route).",
    ),
    (
        ErrorKind::Device,
        "DeviceError",
        Base::None,
        "The device, its driver or the GPU failed: close and reopen.",
    ),
    (
        ErrorKind::Runtime,
        "InferenceRuntimeError",
        Base::None,
        "An inference runtime failed loading, compiling or running a model (the message \
         has its status): check the model.",
    ),
    (
        ErrorKind::RuntimeUnavailable,
        "RuntimeUnavailable",
        Base::None,
        "No inference runtime library could be loaded (the message lists where it looked): \
         install it, or point pinframe at it (PINFRAME_LITERT_LIB).",
    ),
    (
        ErrorKind::Io,
        "IoError",
        Base::Os,
        "An operating-system call failed for another reason (errno set). Also an OSError.",
    ),
];

#[derive(Clone, Copy)]
enum Base {
    None,
    Value,
    Timeout,
    Os,
}

/// Makes the classes and adds them to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    let classes = CLASSES.get_or_try_init(py, || make(py))?;
    m.add("Error", classes.base.bind(py))?;
    for ((_, name, _, _), class) in KINDS.iter().zip(&classes.kinds) {
        m.add(*name, class.bind(py))?;
    }
    Ok(())
}

fn make(py: Python<'_>) -> PyResult<Classes> {
    let type_ = py.get_type::<PyType>();
    let new_class = |name: &str, bases: Bound<'_, PyTuple>, doc: &str, kind: Option<&str>| {
        let dict = PyDict::new(py);
        dict.set_item("__module__", "pinframe")?;
        dict.set_item("__doc__", doc)?;
        dict.set_item("kind", kind)?;
        type_
            .call1((name, bases, dict))?
            .cast_into::<PyType>()
            .map(Bound::unbind)
            .map_err(PyErr::from)
    };
    let base = new_class(
        "Error",
        PyTuple::new(py, [py.get_type::<PyException>()])?,
        "Base class of every pinframe error. `kind` names what went wrong in the words of \
         the Rust `ErrorKind` (\"invalid input\", \"timeout\", \"all buffers held\", ...); \
         each kind has its own subclass.",
        None,
    )?;
    let mut kinds = Vec::with_capacity(KINDS.len());
    for (kind, name, extra, doc) in KINDS {
        let mut bases = vec![base.bind(py).clone()];
        match extra {
            Base::None => {}
            Base::Value => bases.push(py.get_type::<PyValueError>()),
            Base::Timeout => bases.push(py.get_type::<PyTimeoutError>()),
            Base::Os => bases.push(py.get_type::<PyOSError>()),
        }
        kinds.push(new_class(
            name,
            PyTuple::new(py, bases)?,
            doc,
            Some(kind.name()),
        )?);
    }
    Ok(Classes { base, kinds })
}

/// The Python exception for a pinframe error: the class of its kind, the error's message.
pub(crate) fn to_py(e: Error) -> PyErr {
    Python::attach(|py| {
        let kind = e.kind();
        let Some(classes) = CLASSES.get(py) else {
            return PyException::new_err(e.to_string());
        };
        let index = KINDS.iter().position(|k| k.0 == kind);
        let class = match index {
            Some(i) => classes.kinds[i].bind(py).clone(),
            None => classes.base.bind(py).clone(),
        };
        let message = e.to_string();
        match (&e, kind) {
            // OSError subclasses take (errno, message), which sets `.errno`.
            (Error::Io { source, .. }, ErrorKind::Io | ErrorKind::Timeout) => {
                match source.raw_os_error() {
                    Some(errno) => PyErr::from_type(class, (errno, message)),
                    None => PyErr::from_type(class, (message,)),
                }
            }
            _ => PyErr::from_type(class, (message,)),
        }
    })
}

/// `Result<T, pinframe::Error>` → `PyResult<T>`.
pub(crate) trait OrRaise<T> {
    /// Converts the error into its Python exception.
    fn or_raise(self) -> PyResult<T>;
}

impl<T> OrRaise<T> for pinframe::Result<T> {
    fn or_raise(self) -> PyResult<T> {
        self.map_err(to_py)
    }
}

/// A `pinframe.InvalidInput` with `message` (bad arguments found by the bindings).
pub(crate) fn invalid(message: impl Into<String>) -> PyErr {
    to_py(Error::InvalidArgument(message.into()))
}

/// A `pinframe.Unsupported` with `message`.
pub(crate) fn unsupported(message: impl Into<String>) -> PyErr {
    to_py(Error::Unsupported(message.into()))
}
