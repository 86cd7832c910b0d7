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

/// The bytes of one group's window `p` that `index` selects: one `tbl` over one
/// register, or over two (`TWO`: the 32-byte window) at once. Index bytes past the
/// table (0x80) give 0.
///
/// # Safety
/// 16 bytes at `p` must be readable, 32 with `TWO`.
#[inline(always)]
unsafe fn look_up<const TWO: bool>(p: *const u8, index: uint8x16_t) -> uint8x16_t {
    // SAFETY: the caller guarantees the readable window.
    unsafe {
        if TWO {
            vqtbl2q_u8(vld1q_u8_x2(p), index)
        } else {
            vqtbl1q_u8(vld1q_u8(p), index)
        }
    }
}

/// `out[4g + k] = row[bases[g] + d]` where byte `4k` of `masks[g]` is `d` (the other
/// mask bytes are 0x80, out of `tbl`'s range, so they read as zero): one load and one
/// `tbl` per group of four columns, over the 16 bytes at the base, or over 32 with
/// `TWO` (x86 takes two shuffles and an `or` for that).
///
/// # Safety
/// `bases` and `masks` must have the same length, every mask byte below 16 (32 with
/// `TWO`) or 0x80, and `out` 4 floats per group; `bases[g] + 16 <= row.len()` for every
/// `g` (`bases[g] + 32` with `TWO`).
#[inline(always)]
pub(super) unsafe fn gather_bytes<const TWO: bool>(
    row: &[u8],
    bases: &[u32],
    masks: &[[u8; 16]],
    out: &mut [f32],
) {
    let base = row.as_ptr();
    for ((&b, m), o) in bases.iter().zip(masks).zip(out.chunks_exact_mut(4)) {
        // SAFETY: `b + 16 <= row.len()` (`b + 32` with `TWO`, caller), so the window is
        // inside `row`; `m` is 16 bytes, `o` is 4 floats.
        unsafe {
            let bytes = look_up::<TWO>(base.add(b as usize), vld1q_u8(m.as_ptr()));
            vst1q_f32(o.as_mut_ptr(), vcvtq_f32_u32(vreinterpretq_u32_u8(bytes)));
        }
    }
}

/// [`gather_bytes`] into bytes, the twin of `x86::gather_bytes_u8`: each group's lookup
/// puts its 4 bytes at its own place of 16 (mask bytes 0x80 give 0 elsewhere), and four
/// groups or together into one 16-byte store.
///
/// # Safety
/// `bases` and `masks` must have the same length, a multiple of 4, every mask byte below
/// 16 (32 with `TWO`) or 0x80, and `out` 4 bytes per group; `bases[g] + 16 <=
/// row.len()` for every `g` (`+ 32` with `TWO`).
#[inline(always)]
pub(super) unsafe fn gather_bytes_u8<const TWO: bool>(
    row: &[u8],
    bases: &[u32],
    masks: &[[u8; 16]],
    out: &mut [u8],
) {
    let base = row.as_ptr();
    for ((b, m), o) in bases
        .chunks_exact(4)
        .zip(masks.chunks_exact(4))
        .zip(out.chunks_exact_mut(16))
    {
        // SAFETY: each `b[i] + 16 <= row.len()` (`+ 32` with `TWO`, caller), so each
        // window is inside `row`; `m` holds four masks, and `o` is 16 bytes.
        unsafe {
            let group = |i: usize| look_up::<TWO>(base.add(b[i] as usize), vld1q_u8(m[i].as_ptr()));
            let bytes = vorrq_u8(vorrq_u8(group(0), group(1)), vorrq_u8(group(2), group(3)));
            vst1q_u8(o.as_mut_ptr(), bytes);
        }
    }
}

/// The fixed-point colour stage of [`super::fixed::FixedColour`] for the first `n`
/// pixels (8 per step), the twin of `x86::fixed_colour`: widening multiply-accumulates
/// in 32 bits (`smull`, `smlal`), an arithmetic shift, saturating narrows for the clamp.
/// The same integers as the portable form, so the same bits.
///
/// # Safety
/// `n` is a multiple of 8; each of `s` and each of `outs` (at most 3) holds at least `n`
/// elements.
#[inline(always)]
pub(super) unsafe fn fixed_colour<S: super::fixed::FixedSample>(
    fixed: &super::fixed::FixedColour,
    s: [&[S]; 3],
    outs: &mut [&mut [u8]],
    n: usize,
) {
    // SAFETY: these intrinsics only need NEON (the target's baseline) and touch no memory.
    let (coef, bias, shift) = unsafe {
        (
            fixed.coef.map(|k| k.map(|v| vdup_n_s16(v))),
            fixed.bias.map(|b| vdupq_n_s32(b)),
            vdupq_n_s32(-(fixed.shift as i32)),
        )
    };
    for j in (0..n).step_by(8) {
        // SAFETY: `j + 8 <= n` and every row holds at least `n` elements (caller).
        unsafe {
            // 8 samples as 16-bit integers: bytes widened, Q7 words as they are.
            let widen = |r: &[S]| {
                let p = r.as_ptr().add(j);
                if size_of::<S>() == 1 {
                    vreinterpretq_s16_u16(vmovl_u8(vld1_u8(p.cast())))
                } else {
                    vld1q_s16(p.cast())
                }
            };
            let (a, b, c) = (widen(s[0]), widen(s[1]), widen(s[2]));
            for (k, out) in outs.iter_mut().enumerate() {
                let [k0, k1, k2] = coef[k];
                let half = |a: int16x4_t, b: int16x4_t, c: int16x4_t| {
                    let v = vmull_s16(a, k0);
                    let v = vmlal_s16(v, b, k1);
                    let v = vmlal_s16(v, c, k2);
                    vshlq_s32(vaddq_s32(v, bias[k]), shift)
                };
                let low = half(vget_low_s16(a), vget_low_s16(b), vget_low_s16(c));
                let high = half(vget_high_s16(a), vget_high_s16(b), vget_high_s16(c));
                let words = vcombine_s16(vqmovn_s32(low), vqmovn_s32(high));
                vst1_u8(out.as_mut_ptr().add(j), vqmovun_s16(words));
            }
        }
    }
}

/// `dst[3j + c] = rows[c][j]` for the first `n` pixels (16 per step), with the
/// interleaving store `st3`, the twin of `x86::interleave3`.
///
/// # Safety
/// `n` is a multiple of 16; each row holds at least `n` bytes and `dst` at least `3 * n`.
#[inline(always)]
pub(super) unsafe fn interleave3(rows: [&[u8]; 3], dst: &mut [u8], n: usize) {
    for j in (0..n).step_by(16) {
        // SAFETY: `j + 16 <= n` bytes of each row and `3 * (j + 16) <= 3 * n` bytes of
        // `dst` (caller).
        unsafe {
            let v = uint8x16x3_t(
                vld1q_u8(rows[0].as_ptr().add(j)),
                vld1q_u8(rows[1].as_ptr().add(j)),
                vld1q_u8(rows[2].as_ptr().add(j)),
            );
            vst3q_u8(dst.as_mut_ptr().add(3 * j), v);
        }
    }
}

/// [`bilinear_q7`] of one source row (`ONE_ROW`), out of line: inlined beside the
/// two-row loops it cost them registers (the aarch64 lane's count for two-row
/// conversions rose 1-2%).
///
/// # Safety
/// As for [`bilinear_q7`] with `top` and `bottom` both `row`.
#[inline(never)]
pub(super) unsafe fn bilinear_q7_one_row<const WINDOW: usize>(
    row: &[u8],
    bases: &[u32],
    index: &[[u8; 16]],
    weights: &[i32],
    out: &mut [i16],
) {
    // SAFETY: the caller's guarantees are `bilinear_q7`'s for `top` = `bottom` = `row`
    // (the row weight is not read with `ONE_ROW`).
    unsafe { bilinear_q7::<WINDOW, true>(row, row, bases, index, weights, 0, out) }
}

/// [`bilinear_q7`] of two rows from per-column windows (`WINDOW_COLUMNS`), out of line:
/// inlined as a third copy of the two-row loop it cost the other rows' loops (the portable
/// build's count for 1080p → 416 rose 1.2-1.5%); large downscales, its only users, make
/// few calls per output pixel.
///
/// # Safety
/// As for [`bilinear_q7`] with `WINDOW_COLUMNS`.
#[inline(never)]
pub(super) unsafe fn bilinear_q7_columns(
    top: &[u8],
    bottom: &[u8],
    bases: &[u32],
    index: &[[u8; 16]],
    weights: &[i32],
    wy: i32,
    out: &mut [i16],
) {
    use super::sample::WINDOW_COLUMNS;
    // SAFETY: the caller's guarantees are `bilinear_q7`'s.
    unsafe { bilinear_q7::<WINDOW_COLUMNS, false>(top, bottom, bases, index, weights, wy, out) }
}

/// The fixed-point bilinear interpolation of the bilinear path (`sample::blend_q7`, then
/// `sample::lerp_q7`), four columns (one group) per step, the twin of
/// `x86::bilinear_q7`: per row one 32-byte window (48 with `WINDOW_48`; with
/// `WINDOW_COLUMNS` four 8-byte loads, one at each column's base) and one `tbl` over its
/// two (three) registers that leaves each column's taps as a 16-bit pair; the two rows'
/// taps blended in 32 bits and rounded to Q7, then each column's pair of blended taps
/// weighted in 32 bits and rounded to Q7. With `ONE_ROW` (both taps' rows are one row)
/// `bottom` is not read and each column's value is `blend_q7` of its two taps with its
/// weight pair: one step, the same integer as the two. The same integers as the
/// portable form.
///
/// # Safety
/// `WINDOW` is one of `sample`'s window kinds; `bases` has one entry per group (four, one
/// per column, with `WINDOW_COLUMNS`), `index` one per group, every index byte below the
/// window (32, or 48 with `WINDOW_48`) or 0xFF; `weights` and `out` 4 entries per group;
/// every base + `WINDOW` (+ 8 with `WINDOW_COLUMNS`) `<=` the length of `top` and
/// (unless `ONE_ROW`) of `bottom`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(super) unsafe fn bilinear_q7<const WINDOW: usize, const ONE_ROW: bool>(
    top: &[u8],
    bottom: &[u8],
    bases: &[u32],
    index: &[[u8; 16]],
    weights: &[i32],
    wy: i32,
    out: &mut [i16],
) {
    use super::sample::{WINDOW_32, WINDOW_48, WINDOW_COLUMNS};
    const { assert!(matches!(WINDOW, WINDOW_32 | WINDOW_48 | WINDOW_COLUMNS)) };
    let bases_per_group = if WINDOW == WINDOW_COLUMNS { 4 } else { 1 };
    let (y0, y1) = (wy & 0xFFFF, wy >> 16);
    for (((b, i), w), o) in bases
        .chunks_exact(bases_per_group)
        .zip(index)
        .zip(weights.chunks_exact(4))
        .zip(out.chunks_exact_mut(4))
    {
        // SAFETY: each base + 32 (+ 48 with `WINDOW_48`, + 8 with `WINDOW_COLUMNS`) `<=`
        // both rows' lengths (caller), so the two (three) 16-byte registers, or four
        // 8-byte halves, loaded from each row are inside it; `b` holds the group's
        // `bases_per_group` bases and `at` is called with 0 only, or 0 to 3 with
        // `WINDOW_COLUMNS` (unchecked: the bounds check cost the two-row loops 0.1
        // instructions per output pixel in the aarch64 lane's count); `i` is a 16-byte
        // index, `w` 4 weight pairs and `o` 4 values.
        unsafe {
            let i = vld1q_u8(i.as_ptr());
            // Per column (32-bit lane): its two taps in this row, as 16-bit integers
            // (index bytes 0xFF, past the table, give the zero high bytes).
            let taps = |r: &[u8]| {
                let at = |k: usize| r.as_ptr().add(*b.get_unchecked(k) as usize);
                let pairs = if WINDOW == WINDOW_48 {
                    vqtbl3q_u8(vld1q_u8_x3(at(0)), i)
                } else if WINDOW == WINDOW_COLUMNS {
                    // Column `k`'s 8 bytes at window bytes `8k..8k + 8`.
                    let window = uint8x16x2_t(
                        vcombine_u8(vld1_u8(at(0)), vld1_u8(at(1))),
                        vcombine_u8(vld1_u8(at(2)), vld1_u8(at(3))),
                    );
                    vqtbl2q_u8(window, i)
                } else {
                    vqtbl2q_u8(vld1q_u8_x2(at(0)), i)
                };
                vreinterpretq_s32_u8(pairs)
            };
            let t = taps(top);
            let low16 = vdupq_n_s32(0xFFFF);
            let v = if ONE_ROW {
                // One source row: `blend_q7` of the column's two taps with its weight
                // pair, the integer the two steps give for a row blended with itself.
                let w = vld1q_s32(w.as_ptr());
                let (x0, x1) = (vandq_s32(w, low16), vshrq_n_s32::<16>(w));
                let v = vmlaq_s32(vmulq_s32(vandq_s32(t, low16), x0), vshrq_n_s32::<16>(t), x1);
                vshrq_n_s32::<7>(vaddq_s32(v, vdupq_n_s32(1 << 6)))
            } else {
                let u = taps(bottom);
                // Each tap blended between the rows: 16-bit values in 32-bit lanes, so
                // plain 32-bit multiplies give the products.
                let blend = |t: int32x4_t, u: int32x4_t| {
                    let v = vmlaq_n_s32(vmulq_n_s32(t, y0), u, y1);
                    vshrq_n_s32::<7>(vaddq_s32(v, vdupq_n_s32(1 << 6)))
                };
                let tap0 = blend(vandq_s32(t, low16), vandq_s32(u, low16));
                let tap1 = blend(vshrq_n_s32::<16>(t), vshrq_n_s32::<16>(u));
                let w = vld1q_s32(w.as_ptr());
                let (x0, x1) = (vandq_s32(w, low16), vshrq_n_s32::<16>(w));
                let v = vmlaq_s32(vmulq_s32(tap0, x0), tap1, x1);
                vshrq_n_s32::<14>(vaddq_s32(v, vdupq_n_s32(1 << 13)))
            };
            vst1_s16(o.as_mut_ptr(), vmovn_s32(v));
        }
    }
}
