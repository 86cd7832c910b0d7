//! The runpath through which the plugin (and its test binaries) find `libpinframe.so.0`,
//! the home of the process-wide CPU-mapping guard the `shared-guard` feature `dlopen`s
//! (glibc searches the runpath of the object that calls `dlopen`):
//! - `$ORIGIN/..`: installed, the plugin sits in `<libdir>/gstreamer-1.0/` and libpinframe
//!   in `<libdir>` (bindings/c/install.sh); in `cargo test`, the plugin and the test
//!   binaries sit in `target/<profile>/deps/`;
//! - `$ORIGIN`: `cargo build` puts the plugin in `target/<profile>/`, where
//!   `scripts/libpinframe-for-tests` links `libpinframe.so.0` to the built libpinframe.
fn main() {
    // Every linked target: the plugin, its test binaries and its examples.
    println!("cargo:rustc-link-arg=-Wl,-rpath,$ORIGIN/..:$ORIGIN");
    println!("cargo:rerun-if-changed=build.rs");
}
