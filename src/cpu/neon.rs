//! NEON kernels for the horizontal taps of a blended row: the aarch64 twins of the AVX2
//! kernels in `x86`, for the same reason. The compiler's code for `SpanTaps::lerp`
//! fetches each tap with a scalar load and a lane insert, while a column's two taps sit
//! next to each other (luma: one 64-bit load) and the interleaved CbCr of NV12 or the
//! Y/Cb/Cr of YUYV come as one 4-float group per column (`ld1` / `ld2`), transposed in
//! registers with `trn` and `zip`.
//!
//! Everything else the AVX2 build widens (the vertical row blends, colour conversion and
//! the stores) needs no hand-written twin here: NEON is part of the aarch64 baseline, so
//! the portable kernel already compiles those loops to 4-lane NEON code.
//!
//! Bit-identity with the portable kernel: each lane computes `x0 + (x1 - x0) * w` as a
//! separate subtract, multiply and add (`fsub`, `fmul`, `fadd`), exactly the order and
//! rounding of `SpanTaps::lerp`. A fused multiply-add (`vfmaq_f32`, `fmla`) rounds once
//! instead of twice and would change low bits; the unit tests of `cpu` compare this
//! kernel with the portable one bit for bit.
//!
//! NEON is baseline on `aarch64-unknown-linux-gnu`, so `Simd::Neon` is chosen at compile
//! time; `PINFRAME_CPU_SIMD=portable` still forces the portable kernel.

use std::arch::aarch64::*;

/// Columns per iteration (one 128-bit register of f32).
pub(super) const LANES: usize = 4;

/// `x0 + (x1 - x0) * w` in each lane, as three separately rounded operations.
#[inline(always)]
fn lerp(x0: float32x4_t, x1: float32x4_t, w: float32x4_t) -> float32x4_t {
    // SAFETY: these intrinsics only need NEON, which this module is compiled with (it is
    // part of the target's baseline: see the `cfg` on `mod neon`); they touch no memory.
    unsafe { vaddq_f32(x0, vmulq_f32(vsubq_f32(x1, x0), w)) }
}

/// `out[j] = row[first[j]] + (row[first[j] + 1] - row[first[j]]) * weights[j]`, for a
/// length that is a multiple of [`LANES`].
///
/// # Safety
/// `first`, `weights` and `out` must have the same length, a multiple of 4;
/// `first[j] + 1 < row.len()` for every `j`.
#[inline(always)]
pub(super) unsafe fn lerp_adjacent(row: &[f32], first: &[u32], weights: &[f32], out: &mut [f32]) {
    let base = row.as_ptr();
    for ((f, w), o) in first
        .chunks_exact(LANES)
        .zip(weights.chunks_exact(LANES))
        .zip(out.chunks_exact_mut(LANES))
    {
        // SAFETY: each `f[k] + 1 < row.len()` (caller), so every 2-float load is inside
        // `row`; `w` and `o` are 4-element chunks, so the 4-lane load and store fit.
        // `vld1_f32`/`vld1q_f32`/`vst1q_f32` have no alignment requirement beyond f32's.
        unsafe {
            let pair = |k: usize| vld1_f32(base.add(f[k] as usize));
            // [x0 x1] of columns 0, 1 and of columns 2, 3.
            let q01 = vcombine_f32(pair(0), pair(1));
            let q23 = vcombine_f32(pair(2), pair(3));
            // Even lanes are first taps, odd lanes second taps.
            let x0 = vuzp1q_f32(q01, q23);
            let x1 = vuzp2q_f32(q01, q23);
            let v = lerp(x0, x1, vld1q_f32(w.as_ptr()));
            vst1q_f32(o.as_mut_ptr(), v);
        }
    }
}

/// The taps of one channel at step `STEP` (2 or 4), or of two interleaved channels
/// (`b` half a step after `a`): for every column, with `f = first[j]` and `h = STEP / 2`,
/// `a`'s taps are `row[f]`, `row[f + STEP]` and `b`'s are `row[f + h]`,
/// `row[f + h + STEP]`; `out_a[j]`, `out_b[j]` are their lerps by `weights[j]`. Lengths
/// are a multiple of [`LANES`]. Reads `2 * STEP` floats from each first tap.
///
/// # Safety
/// `first`, `weights`, `out_a` and `out_b` (if given) must have the same length, a
/// multiple of 4; `first[j] + 2 * STEP <= row.len()` for every `j`.
#[inline(always)]
pub(super) unsafe fn lerp_quads<const STEP: usize>(
    row: &[f32],
    first: &[u32],
    weights: &[f32],
    out_a: &mut [f32],
    mut out_b: Option<&mut [f32]>,
) {
    const { assert!(STEP == 2 || STEP == 4) };
    let base = row.as_ptr();
    for (k4, ((f, w), oa)) in first
        .chunks_exact(LANES)
        .zip(weights.chunks_exact(LANES))
        .zip(out_a.chunks_exact_mut(LANES))
        .enumerate()
    {
        // SAFETY: each `f[k] + 2 * STEP <= row.len()` (caller), and each column reads
        // `row[f[k] .. f[k] + 2 * STEP]` (4 floats at step 2, 8 at step 4); `w` and `oa`
        // are 4-element chunks, and `out_b`, when given, has the length of `out_a`, so
        // `4 * k4 + 4` fits it. NEON loads and stores need only f32 alignment.
        unsafe {
            // Column k's taps as [a0 b0 a1 b1].
            let quad = |k: usize| {
                let p = base.add(f[k] as usize);
                if STEP == 2 {
                    vld1q_f32(p)
                } else {
                    // ld2 de-interleaves [a0 . b0 . a1 . b1 .]: its even lanes are the quad.
                    vld2q_f32(p).0
                }
            };
            let (r0, r1, r2, r3) = (quad(0), quad(1), quad(2), quad(3));
            // t0 = [a0 of 0, a0 of 1, a1 of 0, a1 of 1], t1 the same for b; t2, t3 for
            // columns 2 and 3.
            let t0 = vtrn1q_f32(r0, r1);
            let t1 = vtrn2q_f32(r0, r1);
            let t2 = vtrn1q_f32(r2, r3);
            let t3 = vtrn2q_f32(r2, r3);
            // Low 64-bit halves of two registers, then the high halves.
            let low = |x: float32x4_t, y: float32x4_t| {
                vreinterpretq_f32_f64(vzip1q_f64(
                    vreinterpretq_f64_f32(x),
                    vreinterpretq_f64_f32(y),
                ))
            };
            let high = |x: float32x4_t, y: float32x4_t| {
                vreinterpretq_f32_f64(vzip2q_f64(
                    vreinterpretq_f64_f32(x),
                    vreinterpretq_f64_f32(y),
                ))
            };
            let w = vld1q_f32(w.as_ptr());
            let va = lerp(low(t0, t2), high(t0, t2), w);
            vst1q_f32(oa.as_mut_ptr(), va);
            if let Some(out_b) = out_b.as_deref_mut() {
                let vb = lerp(low(t1, t3), high(t1, t3), w);
                vst1q_f32(out_b[LANES * k4..LANES * k4 + LANES].as_mut_ptr(), vb);
            }
        }
    }
}

/// `out[4g + k] = row[bases[g] + d]` where byte `4k` of `masks[g]` is `d`, or of
/// `high[g]` is `d - 16` (the other mask bytes are 0x80, out of `tbl`'s range, so they
/// read as zero): one 16-byte load and one `tbl` per group of four columns (two, or-ed,
/// with `high`).
///
/// # Safety
/// `bases`, `masks` and `high` (if given) must have the same length, and `out` 4 floats
/// per group; `bases[g] + 16 <= row.len()` for every `g` (`bases[g] + 32` with `high`).
#[inline(always)]
pub(super) unsafe fn gather_bytes(
    row: &[u8],
    bases: &[u32],
    masks: &[[u8; 16]],
    high: Option<&[[u8; 16]]>,
    out: &mut [f32],
) {
    let base = row.as_ptr();
    for (g, ((&b, m), o)) in bases
        .iter()
        .zip(masks)
        .zip(out.chunks_exact_mut(4))
        .enumerate()
    {
        // SAFETY: `b + 16 <= row.len()` (`b + 32` with `high`, caller), so each 16-byte
        // load is inside `row`; `m` and `high[g]` are 16 bytes, `o` is 4 floats.
        unsafe {
            let p = base.add(b as usize);
            let mut bytes = vqtbl1q_u8(vld1q_u8(p), vld1q_u8(m.as_ptr()));
            if let Some(high) = high {
                let upper = vqtbl1q_u8(vld1q_u8(p.add(16)), vld1q_u8(high[g].as_ptr()));
                bytes = vorrq_u8(bytes, upper);
            }
            vst1q_f32(o.as_mut_ptr(), vcvtq_f32_u32(vreinterpretq_u32_u8(bytes)));
        }
    }
}
