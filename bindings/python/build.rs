//! Exposes PyO3's `Py_3_11` / `Py_LIMITED_API` cfgs to this crate (the buffer protocol is
//! in the stable ABI from Python 3.11 on).
fn main() {
    pyo3_build_config::use_pyo3_cfgs();
}
