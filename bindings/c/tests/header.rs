//! `include/pinframe.h` is what cbindgen generates from this crate, byte for byte.
//! After changing the C API: `PINFRAME_BLESS=1 cargo test -p pinframe-c --test header`.

use std::path::Path;

#[test]
fn the_checked_in_header_is_up_to_date() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(crate_dir.join("cbindgen.toml"))
        .expect("bindings/c/cbindgen.toml parses");
    let mut generated = Vec::new();
    cbindgen::Builder::new()
        .with_crate(crate_dir)
        .with_config(config)
        .generate()
        .expect("cbindgen generates the header")
        .write(&mut generated);
    let path = crate_dir.join("include/pinframe.h");
    if std::env::var_os("PINFRAME_BLESS").is_some() {
        std::fs::write(&path, &generated).unwrap();
        return;
    }
    let checked_in = std::fs::read(&path).unwrap_or_default();
    if checked_in != generated {
        let regenerated = crate_dir.join("../../target/pinframe.h.regenerated");
        let _ = std::fs::write(&regenerated, &generated);
        panic!(
            "include/pinframe.h is not what cbindgen generates from bindings/c/src (see {}); \
             run PINFRAME_BLESS=1 cargo test -p pinframe-c --test header and commit it",
            regenerated.display()
        );
    }
}
