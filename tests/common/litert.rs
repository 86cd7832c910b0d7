//! What the LiteRT tests share: the library and the fetched assets (scripts/assets puts
//! them in target/assets), each found or reported: a test that cannot run says SKIPPED
//! and why, and under `CI=true` fails.
#![allow(dead_code)]

use std::path::PathBuf;

use pinframe::runtime::litert::{Environment, LIBRARY_ENV};

/// Where scripts/assets keeps the fetched files (`$PINFRAME_ASSETS`, else target/assets).
pub fn assets_dir() -> PathBuf {
    std::env::var_os("PINFRAME_ASSETS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/assets"))
}

fn unavailable(test: &str, why: &str) {
    if super::under_ci() {
        panic!("{test}: {why} (CI=true: the LiteRT lane must install it: scripts/assets)");
    }
    eprintln!("SKIPPED {test}: {why}; run scripts/assets (or scripts/lanes/litert)");
}

/// A LiteRT environment: `$PINFRAME_LITERT_LIB`, else target/assets/litert/libLiteRt.so,
/// else the library's own search. None (after saying why) when there is none.
pub fn environment(test: &str) -> Option<Environment> {
    let fetched = assets_dir().join("litert/libLiteRt.so");
    let env = if std::env::var_os(LIBRARY_ENV).is_none() && fetched.is_file() {
        Environment::with_library(&fetched)
    } else {
        Environment::new()
    };
    match env {
        Ok(e) => Some(e),
        Err(e) => {
            unavailable(test, &format!("LiteRT is absent: {e}"));
            None
        }
    }
}

/// A fetched asset (relative to target/assets), or None after saying it is missing.
pub fn asset(test: &str, relative: &str) -> Option<PathBuf> {
    let p = assets_dir().join(relative);
    if p.is_file() {
        Some(p)
    } else {
        unavailable(test, &format!("{} is missing", p.display()));
        None
    }
}

/// MediaPipe 0.10.14's short-range face detector.
pub fn face_model(test: &str) -> Option<PathBuf> {
    asset(test, "models/face_detection_short_range.tflite")
}

/// MediaPipe 0.10.14's face mesh model (468 landmarks of a 192x192 face crop).
pub fn landmark_model(test: &str) -> Option<PathBuf> {
    asset(test, "models/face_landmark.tflite")
}

/// scikit-image's `astronaut.png` (512x512 RGB, a face in the upper middle).
pub fn astronaut(test: &str) -> Option<PathBuf> {
    asset(test, "images/astronaut.png")
}

/// A scratch file path for this process and test (under the temporary directory: the VM
/// lane's guest sees the repository read-only).
pub fn scratch_file(test: &str, name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("pinframe-litert-{}-{test}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}
