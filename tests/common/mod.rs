//! Helpers shared by the integration tests.
#![allow(dead_code)]

pub mod counting_alloc;
#[cfg(feature = "litert")]
pub mod litert;
pub mod log_capture;
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

/// A command that starts `program`, a binary built for the same target as this test
/// (the `pinframe` CLI, this test binary again). Set `PINFRAME_TEST_RUNNER` to run it
/// through an emulator: the aarch64 lane sets it to the same `qemu-aarch64 -L ...` line
/// it gives cargo as the target's runner, since cargo's runner starts only the test
/// binary, not the processes a test starts.
pub fn target_command(program: impl AsRef<std::ffi::OsStr>) -> std::process::Command {
    let runner = std::env::var("PINFRAME_TEST_RUNNER").unwrap_or_default();
    let mut words = runner.split_whitespace();
    match words.next() {
        Some(emulator) => {
            let mut c = std::process::Command::new(emulator);
            c.args(words).arg(program);
            c
        }
        None => std::process::Command::new(program),
    }
}
