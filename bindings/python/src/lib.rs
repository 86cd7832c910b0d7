//! The `pinframe` Python package's extension module (`pinframe._pinframe`): tensors with
//! zero-copy numpy, buffer-protocol and DLPack views, host pins, the image processor and
//! cameras, over the Rust crate. See `bindings/python/README.md` and the `Python` section
//! of the repository's README.

mod args;
mod array;
mod camera;
mod dlpack;
mod dyn_tensor;
mod errors;
mod litert;
mod locks;
mod processor;
mod tensor;
mod views;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use pinframe::{Backend, ImageProcessor};

/// info() -> dict
///
/// What this machine offers pinframe, as `pinframe info` prints it: the version, the
/// backends (CPU threads; the GL driver, its EGL platform, DRM node, extensions and
/// dma-buf import; what "auto" picks), the formats each backend converts, and the memory
/// routes (dma-heaps tried and present, udmabuf, DRM render nodes).
#[pyfunction]
fn info(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("version", env!("CARGO_PKG_VERSION"))?;
    d.set_item(
        "cpu_mapping_guard",
        match pinframe::tensor::cpu_mapping_guard() {
            Ok(pinframe::tensor::CpuMappingGuard::Shared { library }) => library,
            Ok(_) => "local".to_string(),
            Err(e) => format!("unavailable: {e}"),
        },
    )?;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let cpu = PyDict::new(py);
    cpu.set_item("threads", threads)?;
    cpu.set_item("source_formats", names(Backend::Cpu.source_formats()))?;
    cpu.set_item(
        "destination_formats",
        names(Backend::Cpu.destination_formats()),
    )?;
    let backends = PyDict::new(py);
    backends.set_item("cpu", cpu)?;

    let gl = PyDict::new(py);
    let probed =
        py.detach(|| ImageProcessor::with_backend(Backend::Gl).map(|p| p.gl_info().cloned()));
    match probed {
        Ok(Some(i)) => {
            gl.set_item("available", true)?;
            gl.set_item("summary", i.to_string())?;
            gl.set_item("platform", i.platform.to_string())?;
            gl.set_item("node", i.node.clone())?;
            gl.set_item("egl_version", i.egl_version)?;
            gl.set_item("egl_vendor", i.egl_vendor.clone())?;
            gl.set_item("gl_vendor", i.gl_vendor.clone())?;
            gl.set_item("gl_renderer", i.gl_renderer.clone())?;
            gl.set_item("gl_version", i.gl_version.clone())?;
            gl.set_item("glsl_version", i.glsl_version.clone())?;
            gl.set_item("max_texture_size", i.max_texture_size)?;
            gl.set_item("dma_buf_import", i.dma_buf_import)?;
            gl.set_item("dma_buf_modifiers", i.dma_buf_modifiers)?;
            gl.set_item("dma_buf_formats", i.dma_buf_formats.clone())?;
            gl.set_item("egl_extensions", i.egl_extensions.clone())?;
            gl.set_item("gl_extensions", i.gl_extensions.clone())?;
        }
        Ok(None) => {
            gl.set_item("available", false)?;
            gl.set_item("error", "the GL processor reported no GL info")?;
        }
        Err(e) => {
            gl.set_item("available", false)?;
            gl.set_item("error", e.to_string())?;
        }
    }
    gl.set_item("source_formats", names(Backend::Gl.source_formats()))?;
    gl.set_item(
        "destination_formats",
        names(Backend::Gl.destination_formats()),
    )?;
    backends.set_item("gl", gl)?;
    let auto = py.detach(|| ImageProcessor::new().map(|p| p.backend().name()));
    backends.set_item("auto", auto.map_err(errors::to_py)?)?;
    d.set_item("backends", backends)?;

    let memory = PyDict::new(py);
    memory.set_item("dma_heaps_tried", pinframe::tensor::dma_heap_order())?;
    let heaps: Vec<String> = std::fs::read_dir("/dev/dma_heap")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    memory.set_item("dma_heaps_present", heaps)?;
    memory.set_item("udmabuf", std::path::Path::new("/dev/udmabuf").exists())?;
    memory.set_item("render_nodes", pinframe::tensor::render_nodes())?;
    d.set_item("memory", memory)?;
    d.set_item(
        "dtypes",
        PyList::new(
            py,
            ["u8", "i8", "u16", "i16", "u32", "i32", "f16", "f32", "f64"],
        )?,
    )?;
    Ok(d)
}

fn names(formats: &[pinframe::PixelFormat]) -> Vec<&'static str> {
    formats.iter().map(|f| f.name()).collect()
}

#[pymodule]
fn _pinframe(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // The process-wide guard must be there before anything maps: fail the import, with
    // the loader's reason, rather than every mapping later.
    if let Err(e) = pinframe::tensor::cpu_mapping_guard() {
        return Err(pyo3::exceptions::PyImportError::new_err(format!(
            "pinframe cannot load its CPU-mapping guard: {e} (the package bundles \
             libpinframe.so.0 next to its extension; a build that skipped \
             bindings/python/build_backend, e.g. a bare `maturin build`, lacks it: install \
             libpinframe with bindings/c/install.sh or use `pip install ./bindings/python`)"
        )));
    }
    errors::register(m)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("BUFFER_PROTOCOL", cfg!(any(not(Py_LIMITED_API), Py_3_11)))?;
    m.add_class::<tensor::PyTensor>()?;
    m.add_class::<tensor::PyFrame>()?;
    m.add_class::<tensor::PyHostPin>()?;
    m.add_class::<tensor::PyImageLayout>()?;
    m.add_class::<tensor::PyMapping>()?;
    m.add_class::<tensor::PyView>()?;
    m.add_class::<processor::PyImageProcessor>()?;
    m.add_class::<processor::PyConvertInfo>()?;
    m.add_class::<processor::PyProcessorStats>()?;
    m.add_class::<camera::PyCamera>()?;
    m.add_function(wrap_pyfunction!(info, m)?)?;
    litert::register(m)?;
    Ok(())
}
