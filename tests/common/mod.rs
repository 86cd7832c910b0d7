//! Helpers shared by the integration tests.
#![allow(dead_code)]

#[cfg(feature = "litert")]
pub mod litert;
pub mod tensor_checks;
pub mod tflite;

/// True inside the VM lane's guest (`scripts/vm-test` sets `PINFRAME_VM=1`).
pub fn in_vm() -> bool {
    std::env::var_os("PINFRAME_VM").is_some_and(|v| v == "1")
}

/// For tests that need the VM lane's guest (vivid, vgem, udmabuf, dma-heap). Such tests
/// live in `tests/vm_*.rs`, carry `#[ignore = "VM lane: ..."]` (so the host run lists them
/// as ignored, never as passed) and start with `if skip_unless_vm(..) { return; }`: the
/// guard returns true, after printing why, if one is run outside the guest anyway
/// (`--include-ignored` on the host). `scripts/vm-test` runs them in the guest with
/// `--include-ignored`.
pub fn skip_unless_vm(test: &str) -> bool {
    if in_vm() {
        return false;
    }
    eprintln!("SKIPPED {test}: needs the VM lane guest (PINFRAME_VM=1); run scripts/vm-test");
    true
}

/// True when running under CI (`CI=true`), where a lane that cannot run is a failure.
pub fn under_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}
