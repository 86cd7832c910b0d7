//! The `pinframe` CLI: round trips of raw and PNG files, bench output, and one-line
//! errors with a non-zero exit on bad input.
#![cfg(feature = "cli")]

mod common;

use std::path::PathBuf;
use std::process::Output;

fn pinframe(args: &[&str]) -> Output {
    pinframe_with_env(args, &[])
}

fn pinframe_with_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    common::target_command(env!("CARGO_BIN_EXE_pinframe"))
        .args(args)
        .envs(env.iter().copied())
        .output()
        .expect("run pinframe")
}

/// A fresh scratch directory for one test.
fn scratch(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("pinframe-cli-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn ok(out: &Output) {
    assert!(
        out.status.success(),
        "exit {:?}, stderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Asserts a failure with exactly one line on stderr, containing `needle`, and no panic.
fn fails_with(out: &Output, needle: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "succeeded; stderr {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "not one line: {err:?}");
    assert!(err.contains(needle), "{err:?} lacks {needle:?}");
    assert!(!err.contains("panicked"), "{err}");
}

fn s(p: &std::path::Path) -> &str {
    p.to_str().unwrap()
}

/// `pinframe convert` of a raw input file, plus `extra` options.
fn convert_raw(
    input: &std::path::Path,
    input_format: &str,
    input_size: &str,
    output: &std::path::Path,
    output_format: &str,
    extra: &[&str],
) -> Output {
    let mut args = vec![
        "convert",
        "--input",
        s(input),
        "--input-format",
        input_format,
        "--input-size",
        input_size,
        "--output",
        s(output),
        "--output-format",
        output_format,
    ];
    args.extend_from_slice(extra);
    pinframe(&args)
}

#[test]
fn raw_yuyv_to_rgb_and_planar_f32() {
    let dir = scratch("raw");
    // Mid grey in BT.601 limited range: Y = 128, U = V = 128 -> RGB (128-16)*255/219.
    let input = dir.join("grey.yuyv");
    std::fs::write(&input, [128u8; 8 * 4 * 2]).unwrap();
    let rgb = dir.join("out.rgb");
    ok(&convert_raw(&input, "yuyv", "8x4", &rgb, "rgb", &[]));
    let bytes = std::fs::read(&rgb).unwrap();
    assert_eq!(bytes.len(), 8 * 4 * 3);
    assert!(bytes.iter().all(|&b| b == 130), "{bytes:?}");

    // rgb -> planar f32, resized and normalised.
    let planar = dir.join("out.f32");
    ok(&convert_raw(
        &rgb,
        "rgb",
        "8x4",
        &planar,
        "planar-rgb",
        &[
            "--output-size",
            "4x2",
            "--dtype",
            "f32",
            "--mean",
            "0.5,0.5,0.5",
            "--std",
            "0.5,0.5,0.5",
        ],
    ));
    let bytes = std::fs::read(&planar).unwrap();
    assert_eq!(bytes.len(), 3 * 4 * 2 * 4);
    for v in bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
    {
        assert!((v - (130.0 / 255.0 - 0.5) / 0.5).abs() < 1e-5, "{v}");
    }
}

#[test]
fn padded_stride_input() {
    let dir = scratch("stride");
    // 3x2 grey with 8-byte rows: the padding bytes must be ignored.
    let input = dir.join("in.grey");
    std::fs::write(&input, [10, 20, 30, 99, 99, 99, 99, 99, 40, 50, 60]).unwrap();
    let out = dir.join("out.grey");
    let extra = ["--input-stride", "8", "--flip", "h"];
    ok(&convert_raw(&input, "grey", "3x2", &out, "grey", &extra));
    assert_eq!(std::fs::read(&out).unwrap(), [30, 20, 10, 60, 50, 40]);
}

#[test]
fn quantize_flag() {
    let dir = scratch("quantize");
    // Grey pixels 0, 64, 128, 255 to i8 with scale 1/255, zero point -128: q = v - 128.
    let input = dir.join("in.grey");
    std::fs::write(&input, [0u8, 64, 128, 255]).unwrap();
    let out = dir.join("out.grey");
    let extra = ["--dtype", "i8", "--quantize", "0.00392156862745098,-128"];
    ok(&convert_raw(&input, "grey", "4x1", &out, "grey", &extra));
    let q: Vec<i8> = std::fs::read(&out)
        .unwrap()
        .iter()
        .map(|&b| b as i8)
        .collect();
    assert_eq!(q, [-128, -64, 0, 127]);
    // u8 over a -1..1 normalisation with scale 1/128, zero point 128: q = round(x * 128) + 128,
    // x = v / 127.5 - 1: 0 -> 0, 64 -> round(-63.75) + 128, 128 -> round(0.502) + 128, and
    // 255 -> 256 clips to 255.
    let extra = [
        "--mean",
        "0.5,0.5,0.5",
        "--std",
        "0.5,0.5,0.5",
        "--quantize",
        "0.0078125,128",
    ];
    ok(&convert_raw(&input, "grey", "4x1", &out, "grey", &extra));
    assert_eq!(std::fs::read(&out).unwrap(), [0, 64, 129, 255]);
    // Bad parameters are one-line errors.
    let bad = ["--dtype", "f32", "--quantize", "0.1,0"];
    fails_with(
        &convert_raw(&input, "grey", "4x1", &out, "grey", &bad),
        "u8 and i8",
    );
    let bad = ["--quantize", "0.1"];
    fails_with(
        &convert_raw(&input, "grey", "4x1", &out, "grey", &bad),
        "SCALE,ZERO_POINT",
    );
    let bad = ["--dtype", "i8", "--quantize", "0.1,200"];
    fails_with(
        &convert_raw(&input, "grey", "4x1", &out, "grey", &bad),
        "zero point 200",
    );
}

#[test]
fn png_round_trip() {
    let dir = scratch("png");
    let raw: Vec<u8> = (0..6 * 5 * 3).map(|i| (i * 37 % 256) as u8).collect();
    let input = dir.join("in.rgb");
    std::fs::write(&input, &raw).unwrap();
    let png = dir.join("out.png");
    ok(&convert_raw(&input, "rgb", "6x5", &png, "bgr", &[]));
    // Decoding the PNG (BGR is written as RGB) and converting back gives the same bytes.
    let back = dir.join("back.rgb");
    ok(&pinframe(&[
        "convert",
        "--input",
        s(&png),
        "--output",
        s(&back),
        "--output-format",
        "rgb",
    ]));
    assert_eq!(std::fs::read(&back).unwrap(), raw);

    // Letterbox + rotation into a PNG has the requested size.
    let boxed = dir.join("boxed.png");
    ok(&pinframe(&[
        "convert",
        "--input",
        s(&png),
        "--output",
        s(&boxed),
        "--output-format",
        "planar-rgb",
        "--output-size",
        "16x16",
        "--fit",
        "letterbox",
        "--pad",
        "114,114,114",
        "--rotate",
        "90",
        "--crop",
        "1,1,4,3",
        "--interp",
        "nearest",
    ]));
    let decoded = image::open(&boxed).unwrap().to_rgb8();
    assert_eq!(decoded.dimensions(), (16, 16));
    assert_eq!(decoded.get_pixel(0, 0).0, [114, 114, 114]);
}

#[test]
fn bench_prints_time_rate_and_kernel() {
    let args = [
        "bench",
        "--input-format",
        "nv12",
        "--input-size",
        "64x48",
        "--output-format",
        "planar-rgb",
        "--output-size",
        "32x32",
        "--dtype",
        "f32",
        "--fit",
        "letterbox",
        "--frames",
        "3",
        "--backend",
        "cpu",
    ];
    // The widest kernel of the architecture (AVX-512 and AVX2 may be absent on an x86-64
    // CPU; NEON is always there on aarch64), then the forced narrower ones: `avx2` never
    // names AVX-512.
    let (widest, avx2): (&[&str], &[&str]) = if cfg!(target_arch = "aarch64") {
        (&["neon"], &["neon"])
    } else if cfg!(target_arch = "x86_64") {
        (&["avx512", "avx2", "portable"], &["avx2", "portable"])
    } else {
        (&["portable"], &["portable"])
    };
    for (env, kernels) in [
        (&[][..], widest),
        (&[("PINFRAME_CPU_SIMD", "avx2")][..], avx2),
        (&[("PINFRAME_CPU_SIMD", "portable")][..], &["portable"][..]),
    ] {
        let out = pinframe_with_env(&args, env);
        ok(&out);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains("ms per frame") && text.contains("frames per second"),
            "{text}"
        );
        // The memory floor and the ratio to it, a positive finite number.
        let ratio = text
            .split("floor ")
            .nth(1)
            .and_then(|rest| rest.split(", ").nth(1))
            .and_then(|r| r.strip_suffix("x the floor\n"))
            .and_then(|r| r.parse::<f64>().ok());
        assert!(
            ratio.is_some_and(|r| r.is_finite() && r > 0.0),
            "{text} gives no ratio to the floor"
        );
        assert!(
            kernels
                .iter()
                .any(|k| text.contains(&format!(", {k} kernel)"))),
            "{env:?}: {text} names none of the kernels {kernels:?}"
        );
    }
}

#[test]
fn paced_bench_prints_the_median_latency_and_refuses_bad_intervals() {
    let base = [
        "bench",
        "--input-size",
        "64x48",
        "--output-size",
        "32x32",
        "--frames",
        "3",
        "--backend",
        "cpu",
        "--interval-ms",
    ];
    // A paced run's rate would be the camera's: it prints the latency and its spacing
    // (as given, not rounded) only.
    for interval in ["1.5", "0.05"] {
        let paced = pinframe(&[&base[..], &[interval]].concat());
        ok(&paced);
        let text = String::from_utf8_lossy(&paced.stdout);
        assert!(
            text.contains(&format!(
                "ms per frame (median of frames {interval} ms apart)"
            )) && !text.contains("frames per second")
                && text.contains("x the floor"),
            "{text}"
        );
    }
    for bad in ["-1", "NaN", "inf", "10001"] {
        fails_with(
            &pinframe(&[&base[..], &[bad]].concat()),
            "must be between 0 and 10000",
        );
    }
}

#[test]
fn bad_input_is_one_line_and_a_failure() {
    let dir = scratch("bad");
    let missing = dir.join("missing.yuyv");
    fails_with(
        &convert_raw(&missing, "yuyv", "8x4", &dir.join("o.rgb"), "rgb", &[]),
        "cannot read",
    );
    let short = dir.join("short.yuyv");
    std::fs::write(&short, [0u8; 10]).unwrap();
    fails_with(
        &convert_raw(&short, "yuyv", "8x4", &dir.join("o.rgb"), "rgb", &[]),
        "needs 64",
    );
    fails_with(
        &convert_raw(&short, "nv13", "8x4", &dir.join("o.rgb"), "rgb", &[]),
        "nv13",
    );
    let ok_input = dir.join("ok.yuyv");
    std::fs::write(&ok_input, [0u8; 64]).unwrap();
    fails_with(
        &convert_raw(&ok_input, "yuyv", "8x4", &dir.join("o.nv12"), "nv12", &[]),
        "YUV",
    );
    fails_with(
        &convert_raw(
            &ok_input,
            "yuyv",
            "8x4",
            &dir.join("o.rgb"),
            "rgb",
            &["--crop", "4,0,8,4"],
        ),
        "outside",
    );
    fails_with(
        &convert_raw(
            &ok_input,
            "yuyv",
            "8x4",
            &dir.join("o.png"),
            "rgb",
            &["--dtype", "f32"],
        ),
        "--dtype u8",
    );
    fails_with(&pinframe(&["convert", "--input", s(&ok_input)]), "required");
    fails_with(&pinframe(&["frobnicate"]), "frobnicate");
}

/// A 10-bit RGGB frame of one flat colour, with a black level of 64 and gains, through
/// `--black-level`, `--wb-gains` and `--gamma`: a flat patch demosaics exactly, so every
/// output pixel is the patch's colour through the sRGB curve. Bad RAW options are
/// one-line errors.
#[test]
fn raw_bayer_with_isp_options() {
    let dir = scratch("bayer");
    let (w, h) = (16u32, 8u32);
    // Linear colour (0.5, 0.25, 0.125) as a sensor with gains 2, 1, 1.5 records it:
    // (code - 64) / 959 is about 0.25, 0.25 and 0.083 at the R, G and B sites.
    let codes = [64 + 240, 64 + 240, 64 + 80];
    let mut raw = Vec::new();
    for y in 0..h {
        for x in 0..w {
            let site = match (x % 2, y % 2) {
                (0, 0) => 0,
                (1, 1) => 2,
                _ => 1,
            };
            raw.extend_from_slice(&(codes[site] as u16).to_le_bytes());
        }
    }
    let input = dir.join("frame.raw");
    std::fs::write(&input, &raw).unwrap();
    let output = dir.join("out.rgb");
    let isp = [
        "--black-level",
        "64",
        "--wb-gains",
        "2,1,1.5",
        "--gamma",
        "srgb",
    ];
    ok(&convert_raw(&input, "rggb10", "16x8", &output, "rgb", &isp));
    let srgb = |c: f64| 255.0 * (1.055 * c.powf(1.0 / 2.4) - 0.055);
    let want = [srgb(0.5), srgb(0.25), srgb(0.125)];
    let got = std::fs::read(&output).unwrap();
    assert_eq!(got.len(), (w * h * 3) as usize);
    for px in got.chunks_exact(3) {
        for c in 0..3 {
            assert!(
                (f64::from(px[c]) - want[c]).abs() <= 1.0,
                "{px:?} want {want:?}"
            );
        }
    }
    fails_with(
        &convert_raw(
            &input,
            "rggb10",
            "16x8",
            &output,
            "rgb",
            &["--black-level", "1023"],
        ),
        "white level 1023",
    );
    fails_with(
        &convert_raw(&input, "rggb10", "15x8", &output, "rgb", &[]),
        "multiple of 2",
    );
    fails_with(
        &convert_raw(
            &input,
            "rggb10",
            "16x8",
            &output,
            "rgb",
            &["--gamma", "rec709"],
        ),
        "linear or srgb",
    );
}
