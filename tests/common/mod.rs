//! Helpers shared by the integration tests.
#![allow(dead_code)]

/// True inside the VM lane's guest (`scripts/vm-test` sets `PINFRAME_VM=1`).
pub fn in_vm() -> bool {
    std::env::var_os("PINFRAME_VM").is_some_and(|v| v == "1")
}

/// For tests that need the VM lane's guest (vivid, vgem, udmabuf, dma-heap): returns
/// true, after printing why, when the test must be skipped because it runs elsewhere.
/// The VM lane (`scripts/vm-test`) runs these tests for real; on the host they are
/// reported as skipped, not passed silently.
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
