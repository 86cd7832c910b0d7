//! Stage 2 for 8-bit destinations (u8, i8; unquantised): the colour matrix in fixed
//! point, the way libyuv and OpenCV's 8-bit paths do it, instead of widening every sample
//! to f32. Two kinds of sample rows feed it:
//!
//! * bytes, where every column takes one tap from one source row (nearest sampling, or a
//!   scale that lands on pixel centres, such as 1920 → 640): the source bytes themselves
//!   (`sample::sample_row_bytes`);
//! * 16-bit integers with 7 fractional bits ("Q7"), where columns take two taps
//!   (bilinear) and each group of four columns lies within 48 bytes of its plane's row,
//!   or each column's two taps within 8 (the camera workloads' downscales, such as
//!   1920 → 416 and 3840 → 640, and larger ones such as 3840 → 224, of 4:2:0, planar and
//!   packed 4:2:2 sources):
//!   each column interpolated in fixed point from its four source bytes
//!   (`sample::bilinear_q7`, weights in Q14), without blending whole source rows to f32.
//!
//! Measured on the 1920x1080 NV12 → 640x640 RGB u8 letterbox (one thread): the f32 rows
//! cost 48 bytes of scratch traffic per pixel (three f32 sample rows written and read,
//! three colour rows written and read) and three float multiply-adds, a clamp and a round
//! per channel; here a pixel is three samples in, three bytes out, and 16 pixels share
//! each instruction.
//!
//! The arithmetic is exact integer arithmetic, so every build (AVX2, NEON, portable)
//! gives the same bits: `out = clamp((k0 * s0 + k1 * s1 + k2 * s2 + bias) >> shift,
//! 0, 255)` with `k = round(m * 2^b)` (16-bit; `b` the largest of 8..=14 that keeps every
//! `k` in 16 bits), `shift = b +` the samples' fractional bits, and `bias = round(m3 *
//! 2^shift) + 2^(shift - 1)` (the rounding half). The coefficients' error against the
//! float matrix is at most `3 * 255 * 2^-(b + 1)` (0.047 at b = 13, the BT.709
//! limited-range matrix); the bilinear samples' Q14 weights and Q7 roundings add at most
//! about 0.02 per sample. Measured against the f64 reference on random 1080p and 4K
//! frames: every output within 1 of the rounded reference, mean absolute difference
//! 0.0001-0.003 (`tests/cpu_convert.rs`).

use super::Simd;

/// The plan's colour matrix in fixed point (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FixedColour {
    /// Per output channel, the coefficients of the three source channels.
    pub coef: [[i16; 3]; 3],
    /// Per output channel, the constant term with the rounding half, in fixed point.
    pub bias: [i32; 3],
    /// Fractional bits of `bias` and of the sums (the coefficients' plus the samples').
    pub shift: u32,
    /// Fractional bits of the samples it was made for.
    fraction: u32,
}

/// The fewest fractional bits the fixed-point matrix keeps; a matrix with a coefficient
/// of 128 or more (none that a YUV or RGB source produces) stays on the f32 path.
const MIN_SHIFT: u32 = 8;
/// The most: 2^14 keeps coefficients below 2 in 16 bits (the full-range matrices).
const MAX_SHIFT: u32 = 14;

/// A sample row the colour stage reads: bytes (the one-tap path, whole values) or 16-bit
/// integers with 7 fractional bits (the bilinear path, `sample::bilinear_q7`).
pub(crate) trait FixedSample: Copy + Into<i32> {
    /// Fractional bits of a sample.
    const FRACTION: u32;
}

impl FixedSample for u8 {
    const FRACTION: u32 = 0;
}

impl FixedSample for i16 {
    const FRACTION: u32 = 7;
}

impl FixedColour {
    /// The fixed-point form of a plan's colour matrix (`Plan::color_matrix`) for samples
    /// with `fraction` fractional bits, or None where no shift of
    /// `MIN_SHIFT..=MAX_SHIFT` holds every coefficient in 16 bits and every sum in 32
    /// (or the matrix is not finite).
    pub fn new(m: &[[f32; 4]; 3], fraction: u32) -> Option<FixedColour> {
        let largest = m
            .iter()
            .flat_map(|row| row[..3].iter())
            .map(|v| v.abs())
            .fold(0f32, f32::max);
        if !largest.is_finite() || m.iter().any(|row| !row[3].is_finite()) {
            return None;
        }
        let coef_bits = (MIN_SHIFT..=MAX_SHIFT).rev().find(|&s| {
            (f64::from(largest) * f64::from(1u32 << s)).round() <= f64::from(i16::MAX)
        })?;
        let shift = coef_bits + fraction;
        let unit = f64::from(1u32 << coef_bits);
        let top_sample = f64::from(255u32 << fraction);
        let mut coef = [[0i16; 3]; 3];
        let mut bias = [0i32; 3];
        for c in 0..3 {
            for i in 0..3 {
                // In range: |m| * 2^coef_bits rounds to at most i16::MAX (checked above).
                coef[c][i] = (f64::from(m[c][i]) * unit).round() as i16;
            }
            let constant = (f64::from(m[c][3]) * unit * f64::from(1u32 << fraction)).round();
            // Every partial sum of the three products and the constant stays inside
            // i32 (the kernels add in 32 bits without saturation).
            let products: f64 = coef[c]
                .iter()
                .map(|&k| f64::from(k).abs() * top_sample)
                .sum();
            if products + constant.abs() + f64::from(1u32 << shift) >= f64::from(i32::MAX) {
                return None;
            }
            bias[c] = constant as i32 + (1 << (shift - 1));
        }
        Some(FixedColour {
            coef,
            bias,
            shift,
            fraction,
        })
    }

    /// `outs[c][j]` for every output channel `c` from the sample rows `s` (each at least
    /// as long as the outputs; bytes, or Q7 from the bilinear path), with the kernel of
    /// `simd`; the same bits from every kernel. `self` must have been made for `S`'s
    /// fraction.
    #[inline(always)]
    pub fn colour_rows<S: FixedSample>(&self, simd: Simd, s: [&[S]; 3], outs: &mut [&mut [u8]]) {
        let n = outs.first().map_or(0, |o| o.len());
        assert!(s.iter().all(|r| r.len() >= n) && outs.iter().all(|o| o.len() == n));
        assert_eq!(
            self.fraction,
            S::FRACTION,
            "a fixed-point matrix for other samples"
        );
        let oc = outs.len().min(3);
        let whole = match simd {
            #[cfg(target_arch = "x86_64")]
            Simd::Avx512 => {
                // The rest (fewer than 32) by the portable tail: the camera widths are
                // multiples of 32 (416, 640), and a second kernel for 16 more would need
                // the outputs sliced (no allocation here).
                let whole = n - n % 32;
                // SAFETY: AVX-512 F and BW are available (`Simd::Avx512` is only chosen
                // after detecting them); every source row and every output holds at least
                // `whole` elements (asserted above), a multiple of 32, and at most 3
                // outputs are passed.
                unsafe { super::x86::fixed_colour_avx512(self, s, &mut outs[..oc], whole) };
                whole
            }
            #[cfg(target_arch = "x86_64")]
            Simd::Avx2 => {
                let whole = n - n % 16;
                // SAFETY: AVX2 is available (`Simd::Avx2` is only chosen after detecting
                // it); every source row and every output holds at least `whole` elements
                // (asserted above), a multiple of 16, and at most 3 outputs are passed.
                unsafe { super::x86::fixed_colour(self, s, &mut outs[..oc], whole) };
                whole
            }
            #[cfg(all(target_arch = "aarch64", target_feature = "neon"))]
            Simd::Neon => {
                let whole = n - n % 8;
                // SAFETY: NEON is part of the target's baseline; every row holds at least
                // `whole` elements (asserted above), a multiple of 8, and at most 3 outputs.
                unsafe { super::neon::fixed_colour(self, s, &mut outs[..oc], whole) };
                whole
            }
            Simd::Portable => 0,
        };
        for (c, out) in outs[..oc].iter_mut().enumerate() {
            self.colour_tail(c, s, &mut out[whole..], whole);
        }
    }

    /// The portable form: output channel `c` for pixels `from..from + out.len()`.
    #[inline(always)]
    fn colour_tail<S: FixedSample>(&self, c: usize, s: [&[S]; 3], out: &mut [u8], from: usize) {
        let [k0, k1, k2] = self.coef[c].map(i32::from);
        let (bias, shift) = (self.bias[c], self.shift);
        let n = out.len();
        let (s0, s1, s2) = (
            &s[0][from..from + n],
            &s[1][from..from + n],
            &s[2][from..from + n],
        );
        for (j, o) in out.iter_mut().enumerate() {
            let v = k0 * s0[j].into() + k1 * s1[j].into() + k2 * s2[j].into() + bias;
            *o = (v >> shift).clamp(0, 255) as u8;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The exact value `m · s + m3` of the float matrix, clamped and rounded.
    fn exact(plan_matrix: &[[f32; 4]; 3], c: usize, s: [u8; 3]) -> f64 {
        let m = plan_matrix[c].map(f64::from);
        let v = m[0] * f64::from(s[0]) + m[1] * f64::from(s[1]) + m[2] * f64::from(s[2]) + m[3];
        v.clamp(0.0, 255.0)
    }

    #[test]
    fn every_kernel_gives_the_same_bits_within_one_of_the_exact_value() {
        // BT.709 limited range, the largest coefficients of the matrices pinframe builds
        // (2.112 for B from Cb: shift 13), and BT.601 full range (shift 14).
        let matrices = [
            [
                [1.164_383_6, 0.0, 1.792_741_1, -248.100_99],
                [1.164_383_6, -0.213_248_6, -0.532_909_3, 76.878_08],
                [1.164_383_6, 2.112_401_8, 0.0, -289.017_57],
            ],
            [
                [1.0, 0.0, 1.402, -179.456],
                [1.0, -0.344_136_3, -0.714_136_3, 135.458_71],
                [1.0, 1.772, 0.0, -226.816],
            ],
        ];
        let n = 4096 + 13;
        let mut state = 0x2545_f491u32;
        let mut byte = || {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            state as u8
        };
        let s: [Vec<u8>; 3] = [(); 3].map(|_| (0..n).map(|_| byte()).collect());
        for matrix in matrices {
            let fixed = FixedColour::new(&matrix, 0).expect("fits");
            let run = |simd: Simd| {
                let mut out = vec![vec![0u8; n]; 3];
                let mut outs: Vec<&mut [u8]> = out.iter_mut().map(|o| &mut o[..]).collect();
                fixed.colour_rows(simd, [&s[0], &s[1], &s[2]], &mut outs);
                out
            };
            let portable = run(Simd::Portable);
            for simd in Simd::available() {
                assert_eq!(run(simd), portable, "{simd:?}");
            }
            let (mut sum, mut worst) = (0.0, 0.0f64);
            for (c, got) in portable.iter().enumerate() {
                for (j, &v) in got.iter().enumerate() {
                    let want = exact(&matrix, c, [s[0][j], s[1][j], s[2][j]]);
                    worst = worst.max((f64::from(v) - want).abs());
                    sum += (f64::from(v) - want.round()).abs();
                }
            }
            let mad = sum / (3 * n) as f64;
            eprintln!("shift {}: worst {worst:.3}, MAD {mad:.4}", fixed.shift);
            assert!(
                worst < 1.0 && mad < 0.01,
                "shift {}: worst {worst}, MAD {mad}",
                fixed.shift
            );
        }
    }

    #[test]
    fn q7_samples_give_the_same_bits_on_every_kernel_within_one_of_the_exact_value() {
        // BT.709 limited range (the largest coefficients pinframe builds).
        let matrix = [
            [1.164_383_6, 0.0, 1.792_741_1, -248.100_99],
            [1.164_383_6, -0.213_248_6, -0.532_909_3, 76.878_08],
            [1.164_383_6, 2.112_401_8, 0.0, -289.017_57],
        ];
        let fixed = FixedColour::new(&matrix, 7).expect("fits");
        let n = 2048 + 7;
        let mut state = 0x9e37_79b9u32;
        let mut sample = || {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            (state % (255 * 128 + 1)) as i16
        };
        let s: [Vec<i16>; 3] = [(); 3].map(|_| (0..n).map(|_| sample()).collect());
        let run = |simd: Simd| {
            let mut out = vec![vec![0u8; n]; 3];
            let mut outs: Vec<&mut [u8]> = out.iter_mut().map(|o| &mut o[..]).collect();
            fixed.colour_rows(simd, [&s[0], &s[1], &s[2]], &mut outs);
            out
        };
        let portable = run(Simd::Portable);
        for simd in Simd::available() {
            assert_eq!(run(simd), portable, "{simd:?}");
        }
        let m = matrix.map(|row| row.map(f64::from));
        for (c, got) in portable.iter().enumerate() {
            for (j, &v) in got.iter().enumerate() {
                let x = [0, 1, 2].map(|i| f64::from(s[i][j]) / 128.0);
                let want =
                    (m[c][0] * x[0] + m[c][1] * x[1] + m[c][2] * x[2] + m[c][3]).clamp(0.0, 255.0);
                assert!(
                    (f64::from(v) - want).abs() < 1.0,
                    "channel {c} pixel {j}: {v} for {want}"
                );
            }
        }
    }

    #[test]
    fn matrices_too_large_for_sixteen_bits_stay_on_the_float_path() {
        assert!(FixedColour::new(&[[200.0, 0.0, 0.0, 0.0]; 3], 0).is_none());
        assert!(FixedColour::new(&[[1.0, 0.0, 0.0, f32::NAN]; 3], 0).is_none());
        let identity = FixedColour::new(
            &[
                [1.0, 0.0, 0.0, 0.0],
                [0.0, 1.0, 0.0, 0.0],
                [0.0, 0.0, 1.0, 0.0],
            ],
            0,
        )
        .expect("fits");
        assert_eq!(
            (identity.shift, identity.coef[0][0]),
            (MAX_SHIFT, 1 << MAX_SHIFT)
        );
    }
}
