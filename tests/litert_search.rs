//! The default LiteRT search runs once per process: a failed search (which starts a
//! Python interpreter to find the `ai-edge-litert` wheel) is remembered, not repeated on
//! every `Environment::new()`. Its own test binary: it sets environment variables.
#![cfg(feature = "litert")]

use std::path::Path;

use pinframe::ErrorKind;
use pinframe::runtime::litert::Environment;

#[test]
fn a_failed_search_is_not_repeated() {
    let root = std::env::temp_dir().join(format!("pinframe-litert-search-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).unwrap();
    let calls = root.join("calls");
    let python = root.join("python");
    // A "Python" that counts its runs and finds no package.
    std::fs::write(
        &python,
        format!("#!/bin/sh\necho run >> '{}'\nexit 1\n", calls.display()),
    )
    .unwrap();
    std::fs::set_permissions(&python, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    // SAFETY: this test binary has this one test, so no other thread reads the
    // environment while it changes.
    unsafe {
        std::env::remove_var("PINFRAME_LITERT_LIB");
        std::env::set_var("PYTHON", &python);
    }
    let first = match Environment::new() {
        Ok(env) => {
            println!(
                "SKIPPED: libLiteRt.so is on this machine's library path ({env:?}), so the \
                 search cannot fail here"
            );
            return;
        }
        Err(e) => e,
    };
    assert_eq!(first.kind(), ErrorKind::RuntimeUnavailable, "{first}");
    assert!(
        first.to_string().contains("finds no ai_edge_litert"),
        "{first}"
    );
    let second = Environment::new().unwrap_err();
    assert_eq!(second.to_string(), first.to_string());
    assert_eq!(runs(&calls), 1, "the wheel was looked for again");

    // A caller that found the wheel directory itself: searched (its input differs), and
    // no Python is started for it.
    let wheel = root.join("ai_edge_litert");
    std::fs::create_dir(&wheel).unwrap();
    let e = Environment::with_wheel_dir(Some(&wheel)).unwrap_err();
    assert!(
        e.to_string().contains(&format!(
            "{} does not exist",
            wheel.join("libLiteRt.so").display()
        )),
        "{e}"
    );
    assert_eq!(runs(&calls), 1);
    let _ = std::fs::remove_dir_all(&root);
}

fn runs(calls: &Path) -> usize {
    std::fs::read_to_string(calls).map_or(0, |s| s.lines().count())
}
