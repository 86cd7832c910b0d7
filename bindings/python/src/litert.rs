//! `pinframe.litert`: the Rust LiteRT binding (`pinframe::runtime::litert`) from Python —
//! a model input bound once to a pinframe tensor and read in place on every run.

use std::sync::Mutex;

use pinframe::runtime::litert::{
    Accelerator, Binding, CompiledModel, Environment, Model, Quantization, TensorInfo,
};
use pinframe::{DType, Error};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::array::{self, typestr};
use crate::dyn_tensor::with_tensor;
use crate::errors::{OrRaise, invalid};
use crate::tensor::{Held, PyTensor};

/// A LiteRT environment: `libLiteRt.so` loaded at run time.
///
/// Environment(library=None)
///
/// `library` is the path of `libLiteRt.so`; None looks where the Rust binding does
/// (`$PINFRAME_LITERT_LIB`, the dynamic linker's path, then the `ai-edge-litert` wheel
/// this interpreter would import, also from an un-activated virtual environment). A
/// failed search is remembered for the process until `$PINFRAME_LITERT_LIB` changes. Raises RuntimeUnavailable, listing every place looked in, when there is none.
/// The `ai_edge_litert` package directory this interpreter would import, if any.
fn wheel_dir(py: Python<'_>) -> PyResult<Option<std::path::PathBuf>> {
    let spec = py
        .import("importlib.util")?
        .call_method1("find_spec", ("ai_edge_litert",))?;
    if spec.is_none() {
        return Ok(None);
    }
    let locations = spec.getattr("submodule_search_locations")?;
    if locations.is_none() {
        return Ok(None);
    }
    locations
        .try_iter()?
        .next()
        .transpose()?
        .map(|d| d.extract::<std::path::PathBuf>())
        .transpose()
}

#[pyclass(name = "Environment", module = "pinframe.litert", frozen)]
pub(crate) struct PyEnvironment {
    inner: Environment,
}

#[pymethods]
impl PyEnvironment {
    #[new]
    #[pyo3(signature = (library = None))]
    fn new(py: Python<'_>, library: Option<std::path::PathBuf>) -> PyResult<Self> {
        // The wheel is looked for by this interpreter (an un-activated venv's packages are
        // not the `python3` on PATH's), in-process: `find_spec` of a top-level package
        // locates it without importing it.
        let wheel_dir = match library {
            Some(_) => None,
            None => wheel_dir(py)?,
        };
        let inner = py
            .detach(|| match library {
                Some(path) => Environment::with_library(path),
                None => Environment::with_wheel_dir(wheel_dir.as_deref()),
            })
            .or_raise()?;
        Ok(PyEnvironment { inner })
    }

    /// The library that was loaded.
    #[getter]
    fn library_path(&self) -> std::path::PathBuf {
        self.inner.library_path().to_path_buf()
    }
}

/// A `.tflite` model: `Model.from_file(env, path)`; `inputs` and `outputs` describe its
/// first signature's tensors (name, shape, dtype, quantization).
#[pyclass(name = "Model", module = "pinframe.litert", frozen)]
pub(crate) struct PyModel {
    inner: Model,
}

fn info_dict<'py>(py: Python<'py>, t: &TensorInfo) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("name", &t.name)?;
    d.set_item("shape", &t.shape)?;
    d.set_item("dtype", t.element_type.dtype().map(DType::name))?;
    d.set_item("element_type", t.element_type.to_string())?;
    match &t.quantization {
        Quantization::PerTensor { scale, zero_point } => {
            d.set_item("quantization", (*scale, *zero_point))?
        }
        Quantization::PerChannel {
            dimension,
            scales,
            zero_points,
        } => d.set_item("quantization", (*dimension, scales, zero_points))?,
        _ => d.set_item("quantization", py.None())?,
    }
    Ok(d)
}

#[pymethods]
impl PyModel {
    /// Model.from_file(env, path) -> Model
    #[staticmethod]
    fn from_file(py: Python<'_>, env: &PyEnvironment, path: std::path::PathBuf) -> PyResult<Self> {
        let env = &env.inner;
        let inner = py.detach(|| Model::from_file(env, &path)).or_raise()?;
        Ok(PyModel { inner })
    }

    /// The inputs, each a dict: name, shape, dtype (pinframe's name, or None),
    /// element_type, quantization (None, (scale, zero_point) or (dimension, scales,
    /// zero_points)).
    #[getter]
    fn inputs<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let items = self
            .inner
            .inputs()
            .iter()
            .map(|t| info_dict(py, t))
            .collect::<PyResult<Vec<_>>>()?;
        PyList::new(py, items)
    }

    /// The outputs, described like `inputs`.
    #[getter]
    fn outputs<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let items = self
            .inner
            .outputs()
            .iter()
            .map(|t| info_dict(py, t))
            .collect::<PyResult<Vec<_>>>()?;
        PyList::new(py, items)
    }
}

/// A model compiled for the CPU (XNNPACK) or an accelerator, run on bound inputs.
///
/// CompiledModel(model, accelerators=("cpu",))
///
/// `bind_input(i, tensor)` binds a pinframe tensor as input `i` once, without a copy:
/// every `run()` reads the tensor's memory as it is then, so the loop is convert, run.
/// `output(i)` is a read-only numpy view of output `i` in memory pinframe allocated and
/// LiteRT writes in place (valid until the next `run()`, which overwrites it).
#[pyclass(name = "CompiledModel", module = "pinframe.litert", frozen)]
pub(crate) struct PyCompiledModel {
    inner: Mutex<CompiledModel>,
}

/// A read-only numpy view of one output of a compiled model (keeps the model alive).
#[pyclass(name = "_Output", module = "pinframe.litert", frozen)]
pub(crate) struct PyOutput {
    _model: Py<PyCompiledModel>,
    ptr: usize,
    shape: Vec<usize>,
    dtype: DType,
}

#[pymethods]
impl PyOutput {
    #[getter]
    fn __array_interface__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("version", 3)?;
        d.set_item("shape", pyo3::types::PyTuple::new(py, &self.shape)?)?;
        d.set_item("typestr", typestr(self.dtype))?;
        d.set_item("data", (self.ptr, true))?;
        Ok(d)
    }
}

fn binding_name(b: Binding) -> &'static str {
    match b {
        Binding::HostMemory => "host",
        Binding::DmaBuf => "dmabuf",
        Binding::HostMemoryOverDmaBuf => "host-over-dmabuf",
        Binding::RuntimeOwned => "runtime-owned",
    }
}

impl PyCompiledModel {
    /// The model, locked; waits for another thread's `run()` with the GIL released.
    fn lock(&self, py: Python<'_>) -> std::sync::MutexGuard<'_, CompiledModel> {
        crate::locks::lock_without_gil(py, &self.inner)
    }

    /// The model, locked, from a thread without the GIL.
    fn lock_detached(&self) -> std::sync::MutexGuard<'_, CompiledModel> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[pymethods]
impl PyCompiledModel {
    #[new]
    #[pyo3(signature = (model, accelerators = vec!["cpu".to_owned()]))]
    fn new(py: Python<'_>, model: &PyModel, accelerators: Vec<String>) -> PyResult<Self> {
        let accelerators = accelerators
            .iter()
            .map(|a| match a.to_ascii_lowercase().as_str() {
                "cpu" => Ok(Accelerator::Cpu),
                "gpu" => Ok(Accelerator::Gpu),
                "npu" => Ok(Accelerator::Npu),
                other => Err(invalid(format!(
                    "unknown accelerator {other:?}; expected cpu, gpu or npu"
                ))),
            })
            .collect::<PyResult<Vec<_>>>()?;
        let model = &model.inner;
        let inner = py
            .detach(|| CompiledModel::new(model, &accelerators))
            .or_raise()?;
        Ok(PyCompiledModel {
            inner: Mutex::new(inner),
        })
    }

    /// bind_input(index, tensor) -> str
    ///
    /// Binds `tensor` as input `index` for good (no copy): "host" (at its pin's address),
    /// "dmabuf" (the dma-buf itself) or "host-over-dmabuf". A mismatch with what the model
    /// expects (dtype, shape, padded rows, size) raises InvalidInput saying what it wants.
    fn bind_input(
        &self,
        py: Python<'_>,
        index: usize,
        tensor: &Bound<'_, PyTensor>,
    ) -> PyResult<&'static str> {
        let t = tensor.get();
        py.detach(|| {
            let st = t.read();
            let mut m = self.lock_detached();
            match &st.held {
                Held::Tensor(any) => with_tensor!(any, t => m.bind_input(index, t)),
                Held::Frame(f) => m.bind_input(index, f.tensor()),
                Held::Released => Err(Error::InvalidArgument(
                    "this frame was released; bind a tensor of your own".into(),
                )),
            }
        })
        .map(binding_name)
        .or_raise()
    }

    /// allocate_input(index): gives input `index` a buffer of LiteRT's own, filled by
    /// `copy_input` (the usual copy-in, to compare with a bound tensor).
    fn allocate_input(&self, py: Python<'_>, index: usize) -> PyResult<()> {
        self.lock(py).allocate_input(index).or_raise()
    }

    /// copy_input(index, array): copies `array` (its bytes, C order) into the runtime's
    /// own buffer of input `index` (after `allocate_input`).
    fn copy_input(&self, py: Python<'_>, index: usize, array: &Bound<'_, PyAny>) -> PyResult<()> {
        let array = array::ascontiguousarray(&array::asarray(array)?)?;
        let a = array::array_ref(&array)?
            .ok_or_else(|| invalid("numpy returned an array without __array_interface__"))?;
        let len = a.shape.iter().product::<usize>() * a.dtype.size();
        // SAFETY: the array is C-contiguous with `len` bytes, alive while `array` is held
        // (this call), and only read.
        let bytes = unsafe { std::slice::from_raw_parts(a.ptr as *const u8, len) };
        let mut m = self.lock(py);
        fn copy<T: pinframe::Element>(
            m: &mut CompiledModel,
            index: usize,
            bytes: &[u8],
        ) -> pinframe::Result<()> {
            let dst: &mut [u8] = bytemuck::cast_slice_mut(m.input_mut::<T>(index)?);
            if dst.len() != bytes.len() {
                return Err(Error::InvalidArgument(format!(
                    "input {index} holds {} bytes; the array has {}",
                    dst.len(),
                    bytes.len()
                )));
            }
            dst.copy_from_slice(bytes);
            Ok(())
        }
        match a.dtype {
            DType::U8 => copy::<u8>(&mut m, index, bytes),
            DType::I8 => copy::<i8>(&mut m, index, bytes),
            DType::U16 => copy::<u16>(&mut m, index, bytes),
            DType::I16 => copy::<i16>(&mut m, index, bytes),
            DType::U32 => copy::<u32>(&mut m, index, bytes),
            DType::I32 => copy::<i32>(&mut m, index, bytes),
            DType::F16 => copy::<half::f16>(&mut m, index, bytes),
            DType::F32 => copy::<f32>(&mut m, index, bytes),
            DType::F64 => copy::<f64>(&mut m, index, bytes),
            other => Err(Error::Unsupported(format!(
                "{other} arrays cannot be copied in"
            ))),
        }
        .or_raise()
    }

    /// run(): runs the model on the bound inputs (the GIL released). A DMA input is
    /// bracketed with the dma-buf sync calls.
    fn run(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| self.lock_detached().run()).or_raise()
    }

    /// output(index) -> numpy.ndarray: a read-only view of output `index` (no copy).
    fn output<'py>(slf: &Bound<'py, Self>, index: usize) -> PyResult<Bound<'py, PyAny>> {
        let m = slf.get().lock(slf.py());
        let info = m
            .model()
            .outputs()
            .get(index)
            .ok_or_else(|| invalid(format!("output {index} does not exist")))?;
        let dtype = info.element_type.dtype().ok_or_else(|| {
            crate::errors::unsupported(format!(
                "output {index} holds {} elements, which have no pinframe dtype",
                info.element_type
            ))
        })?;
        let shape = info
            .shape
            .iter()
            .map(|&d| usize::try_from(d))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|_| invalid(format!("output {index} has a dynamic shape")))?;
        let ptr = m.output_host_address(index).or_raise()? as usize;
        drop(m);
        let view = Bound::new(
            slf.py(),
            PyOutput {
                _model: slf.clone().unbind(),
                ptr,
                shape,
                dtype,
            },
        )?;
        array::asarray(view.as_any())
    }

    /// Where LiteRT's buffer for input `index` is (for a bound tensor: its pin's address).
    fn input_host_address(&self, py: Python<'_>, index: usize) -> PyResult<usize> {
        Ok(self.lock(py).input_host_address(index).or_raise()? as usize)
    }

    /// Where LiteRT writes output `index` (pinframe memory).
    fn output_host_address(&self, py: Python<'_>, index: usize) -> PyResult<usize> {
        Ok(self.lock(py).output_host_address(index).or_raise()? as usize)
    }

    /// Counters: buffers_created, buffers_destroyed, host_bindings, dmabuf_bindings,
    /// dmabuf_fallbacks, runs.
    #[getter]
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.lock(py).stats();
        let d = PyDict::new(py);
        d.set_item("buffers_created", s.buffers_created)?;
        d.set_item("buffers_destroyed", s.buffers_destroyed)?;
        d.set_item("host_bindings", s.host_bindings)?;
        d.set_item("dmabuf_bindings", s.dmabuf_bindings)?;
        d.set_item("dmabuf_fallbacks", s.dmabuf_fallbacks)?;
        d.set_item("runs", s.runs)?;
        Ok(d)
    }
}

/// Adds the `litert` submodule.
pub(crate) fn register(parent: &Bound<'_, PyModule>) -> PyResult<()> {
    let m = PyModule::new(parent.py(), "litert")?;
    m.add_class::<PyEnvironment>()?;
    m.add_class::<PyModel>()?;
    m.add_class::<PyCompiledModel>()?;
    m.add_class::<PyOutput>()?;
    parent.add_submodule(&m)?;
    Ok(())
}
