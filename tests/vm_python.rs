//! The Python package in the VM lane's guest: pytest runs
//! `bindings/python/tests_vm/` (vivid frames from Python: dma-buf frames viewed without a
//! copy, released on context exit, all buffers held raising `AllBuffersHeld`) with the
//! venv `scripts/lanes/python` built under the target dir. The guest sees the host's root
//! read-only, so the venv and the installed package are the host's.

mod common;

use std::path::PathBuf;
use std::process::Command;

/// The target dir this test binary was built in (`<target>/<profile>/deps/vm_python-…`).
fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    exe.ancestors()
        .nth(3)
        .expect("the binary lives in <target>/<profile>/deps")
        .to_path_buf()
}

#[test]
#[ignore = "VM lane: runs in the guest via scripts/vm-test"]
fn python_package_captures_from_vivid() {
    if common::skip_unless_vm("python_package_captures_from_vivid") {
        return;
    }
    let python = target_dir().join("python-venv/bin/python");
    if !python.exists() {
        let why = format!(
            "no Python venv at {} (scripts/lanes/python makes it; run it before the VM lane)",
            python.display()
        );
        assert!(!common::under_ci(), "{why}");
        eprintln!("SKIPPED python_package_captures_from_vivid: {why}");
        return;
    }
    let tests = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("bindings/python/tests_vm");
    let out = Command::new(&python)
        .args(["-m", "pytest", "-p", "no:cacheprovider", "-ra", "-v"])
        .arg(&tests)
        .current_dir("/tmp")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .expect("the venv's python runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}\n{stderr}");
    assert!(
        out.status.success(),
        "pytest failed (exit {:?})",
        out.status.code()
    );
    assert!(
        stdout.contains(" passed") && !stdout.contains("skipped"),
        "the vivid tests did not run: {stdout}"
    );
}
