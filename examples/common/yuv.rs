//! Making camera frames from a photograph: RGB to BT.601 limited-range YUYV or NV12 (the
//! colorimetry pinframe's `Auto` assumes for frames under 720 lines; for larger frames the
//! caller marks the layout's colorimetry), straight from the standard's formulas, chroma
//! the mean of each 2x1 / 2x2 block. Shared by `examples/detect.rs` (an image file as a
//! looping camera) and `tests/litert_detect.rs`.
#![allow(dead_code)]

use pinframe::{Colorimetry, ImageLayout, PixelFormat};

/// BT.601 limited-range Y'CbCr of an RGB pixel.
pub fn ycbcr(rgb: [f64; 3]) -> [f64; 3] {
    let [r, g, b] = rgb;
    let y = 0.299 * r + 0.587 * g + 0.114 * b;
    [
        16.0 + 219.0 / 255.0 * y,
        128.0 + 224.0 / 255.0 * (b - y) / 1.772,
        128.0 + 224.0 / 255.0 * (r - y) / 1.402,
    ]
}

fn byte(v: f64) -> u8 {
    v.round().clamp(0.0, 255.0) as u8
}

/// The top-left `w` x `h` of `rgb` (even sizes) as a tight YUYV or NV12 frame marked
/// BT.601 limited, and its bytes.
pub fn encode(
    rgb: &image::RgbImage,
    w: u32,
    h: u32,
    format: PixelFormat,
) -> (ImageLayout, Vec<u8>) {
    assert!(w.is_multiple_of(2) && h.is_multiple_of(2) && w <= rgb.width() && h <= rgb.height());
    let layout = ImageLayout::new(w, h, format)
        .unwrap()
        .with_colorimetry(Some(Colorimetry::BT601_LIMITED));
    let px = |x: u32, y: u32| rgb.get_pixel(x, y).0.map(f64::from);
    let mut out = vec![0u8; layout.required_len(0)];
    let p = layout.planes().to_vec();
    let chroma = |xs: &[(u32, u32)]| {
        let mut s = [0.0; 3];
        for &(x, y) in xs {
            let c = px(x, y);
            for i in 0..3 {
                s[i] += c[i] / xs.len() as f64;
            }
        }
        ycbcr(s)
    };
    match format {
        PixelFormat::Yuyv => {
            for y in 0..h {
                for x in (0..w).step_by(2) {
                    let c = chroma(&[(x, y), (x + 1, y)]);
                    let o = p[0].offset + y as usize * p[0].stride + x as usize * 2;
                    out[o] = byte(ycbcr(px(x, y))[0]);
                    out[o + 1] = byte(c[1]);
                    out[o + 2] = byte(ycbcr(px(x + 1, y))[0]);
                    out[o + 3] = byte(c[2]);
                }
            }
        }
        PixelFormat::Nv12 => {
            for y in 0..h {
                for x in 0..w {
                    out[p[0].offset + y as usize * p[0].stride + x as usize] =
                        byte(ycbcr(px(x, y))[0]);
                }
            }
            for y in (0..h).step_by(2) {
                for x in (0..w).step_by(2) {
                    let c = chroma(&[(x, y), (x + 1, y), (x, y + 1), (x + 1, y + 1)]);
                    let o = p[1].offset + (y / 2) as usize * p[1].stride + x as usize;
                    out[o] = byte(c[1]);
                    out[o + 1] = byte(c[2]);
                }
            }
        }
        f => panic!("{f}: encode makes yuyv or nv12 frames"),
    }
    (layout, out)
}
