//! Exposes PyO3's `Py_3_11` / `Py_LIMITED_API` cfgs to this crate (the buffer protocol is
//! in the stable ABI from Python 3.11 on), and gives the extension the runpath `$ORIGIN`:
//! the shared CPU-mapping guard `dlopen`s `libpinframe.so.0`, which the package bundles in
//! its own folder, and glibc searches the runpath of the object that calls `dlopen`.
fn main() {
    pyo3_build_config::use_pyo3_cfgs();
    println!("cargo:rustc-cdylib-link-arg=-Wl,-rpath,$ORIGIN");
    println!("cargo:rerun-if-changed=build.rs");
}
