//! Gives libpinframe its soname (`libpinframe.so.<major>`), so that every copy of pinframe
//! in a process that asks the loader for `libpinframe.so.0` gets this one object.

fn main() {
    let major = std::env::var("CARGO_PKG_VERSION_MAJOR").expect("cargo sets the version");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libpinframe.so.{major}");
    println!("cargo:rerun-if-changed=build.rs");
}
