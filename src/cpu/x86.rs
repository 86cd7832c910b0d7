//! AVX2 kernels for the horizontal taps of a blended row, where measurement showed the
//! compiler's code falls short: it gathers each tap with a scalar load and an insert
//! (32 for the 16 taps of 8 columns), while a column's two taps sit next to each other
//! and one load can fetch both. The portable twin is `SpanTaps::lerp`, which computes
//! the same `x0 + (x1 - x0) * w` in the same order; a unit test holds the two to
//! bit-identical outputs.
//!
//! Measured on the 1920x1080 NV12 → 416x416 letterbox bench (one thread, CPU time): with
//! these two kernels the conversion went from 0.36-0.38 ms to 0.26-0.29 ms. The hardware
//! gather (`vgatherdps`) was tried first and was slower than the compiler's scalar
//! gathers on the AMD EPYC it was measured on (0.44-0.64 ms).

use std::arch::x86_64::*;

/// Loads the two adjacent floats at `p` as one 64-bit lane.
///
/// # Safety
/// `p` and `p + 1` must be readable.
#[inline(always)]
unsafe fn pair(p: *const f32) -> i64 {
    // SAFETY: the caller guarantees 8 readable bytes at `p`; read_unaligned has no
    // alignment requirement.
    unsafe { p.cast::<i64>().read_unaligned() }
}

/// `out[j] = row[first[j]] + (row[first[j] + 1] - row[first[j]]) * weights[j]`, for a
/// length that is a multiple of 8.
///
/// # Safety
/// AVX2 must be available; `first`, `weights` and `out` must have the same length, a
/// multiple of 8; `first[j] + 1 < row.len()` for every `j`.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn lerp_adjacent(row: &[f32], first: &[u32], weights: &[f32], out: &mut [f32]) {
    let base = row.as_ptr();
    for ((f, w), o) in first
        .chunks_exact(8)
        .zip(weights.chunks_exact(8))
        .zip(out.chunks_exact_mut(8))
    {
        // SAFETY: each `f[k] + 1 < row.len()` (caller), so every pair read is inside
        // `row`; `w` and `o` are 8-element chunks, so the 8-lane load and store fit.
        unsafe {
            let at = |k: usize| pair(base.add(f[k] as usize));
            // Lanes [x0 x1] of columns 0..3 and 4..7.
            let lo = _mm256_castsi256_ps(_mm256_set_epi64x(at(3), at(2), at(1), at(0)));
            let hi = _mm256_castsi256_ps(_mm256_set_epi64x(at(7), at(6), at(5), at(4)));
            // Per 128-bit half: even lanes are first taps, odd lanes second taps; the
            // shuffle leaves columns in the order 0 1 4 5 | 2 3 6 7, the permute fixes it.
            let order = |v: __m256| {
                _mm256_castpd_ps(_mm256_permute4x64_pd::<0b11_01_10_00>(_mm256_castps_pd(v)))
            };
            let x0 = order(_mm256_shuffle_ps::<0b10_00_10_00>(lo, hi));
            let x1 = order(_mm256_shuffle_ps::<0b11_01_11_01>(lo, hi));
            let w = _mm256_loadu_ps(w.as_ptr());
            let v = _mm256_add_ps(x0, _mm256_mul_ps(_mm256_sub_ps(x1, x0), w));
            _mm256_storeu_ps(o.as_mut_ptr(), v);
        }
    }
}

/// The taps of one channel at step `STEP` (2 or 4), or of two interleaved channels
/// (`b` half a step after `a`): for every column, with `f = first[j]` and `h = STEP / 2`,
/// `a`'s taps are `row[f]`, `row[f + STEP]` and `b`'s are `row[f + h]`,
/// `row[f + h + STEP]`; `out_a[j]`, `out_b[j]` are their lerps by `weights[j]`. Lengths
/// are a multiple of 8. Reads `2 * STEP` floats from each first tap.
///
/// # Safety
/// AVX2 must be available; `first`, `weights`, `out_a` and `out_b` (if given) must have
/// the same length, a multiple of 8; `first[j] + 2 * STEP <= row.len()` for every `j`.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn lerp_quads<const STEP: usize>(
    row: &[f32],
    first: &[u32],
    weights: &[f32],
    out_a: &mut [f32],
    mut out_b: Option<&mut [f32]>,
) {
    const { assert!(STEP == 2 || STEP == 4) };
    let base = row.as_ptr();
    for (k8, ((f, w), oa)) in first
        .chunks_exact(8)
        .zip(weights.chunks_exact(8))
        .zip(out_a.chunks_exact_mut(8))
        .enumerate()
    {
        // SAFETY: each `f[k] + 2 * STEP <= row.len()` (caller), and each column reads
        // `row[f[k] .. f[k] + 2 * STEP]`; `w` and `oa` are 8-element chunks, and
        // `out_b`, when given, has the length of `out_a`, so `8 * k8 + 8` fits it.
        unsafe {
            // Column k's taps as [a0 b0 a1 b1].
            let quad = |k: usize| {
                let p = base.add(f[k] as usize);
                if STEP == 2 {
                    _mm_loadu_ps(p)
                } else {
                    // [a0 . b0 .] and [a1 . b1 .] -> [a0 b0 a1 b1].
                    _mm_shuffle_ps::<0b10_00_10_00>(_mm_loadu_ps(p), _mm_loadu_ps(p.add(4)))
                }
            };
            // Column k's quad in the low half, column k + 4's in the high half.
            let r0 = _mm256_set_m128(quad(4), quad(0));
            let r1 = _mm256_set_m128(quad(5), quad(1));
            let r2 = _mm256_set_m128(quad(6), quad(2));
            let r3 = _mm256_set_m128(quad(7), quad(3));
            // A 4x4 transpose per half: t0 = [a0 of 0, a0 of 1, b0 of 0, b0 of 1] ...
            let t0 = _mm256_unpacklo_ps(r0, r1);
            let t1 = _mm256_unpackhi_ps(r0, r1);
            let t2 = _mm256_unpacklo_ps(r2, r3);
            let t3 = _mm256_unpackhi_ps(r2, r3);
            let w = _mm256_loadu_ps(w.as_ptr());
            let a0 = _mm256_shuffle_ps::<0b01_00_01_00>(t0, t2);
            let a1 = _mm256_shuffle_ps::<0b01_00_01_00>(t1, t3);
            let va = _mm256_add_ps(a0, _mm256_mul_ps(_mm256_sub_ps(a1, a0), w));
            _mm256_storeu_ps(oa.as_mut_ptr(), va);
            if let Some(out_b) = out_b.as_deref_mut() {
                let b0 = _mm256_shuffle_ps::<0b11_10_11_10>(t0, t2);
                let b1 = _mm256_shuffle_ps::<0b11_10_11_10>(t1, t3);
                let vb = _mm256_add_ps(b0, _mm256_mul_ps(_mm256_sub_ps(b1, b0), w));
                _mm256_storeu_ps(out_b[8 * k8..8 * k8 + 8].as_mut_ptr(), vb);
            }
        }
    }
}

/// `out[4g + k] = row[bases[g] + d]` where mask byte `4k` of `masks[g]` is `d`, or of
/// `high[g]` is `d - 16` (the other mask bytes are 0x80, which zero the lane's upper
/// bytes and the byte the other mask takes): two groups of four columns per step, each
/// group one 16-byte load (two with `high`) and, both groups together, one `vpshufb`
/// (two, or-ed).
///
/// # Safety
/// AVX2 must be available; `bases`, `masks` and `high` (if given) must have the same
/// length, a multiple of 2, and `out` 4 floats per group; `bases[g] + 16 <= row.len()`
/// for every `g` (`bases[g] + 32` with `high`).
#[target_feature(enable = "avx2")]
pub(super) unsafe fn gather_bytes(
    row: &[u8],
    bases: &[u32],
    masks: &[[u8; 16]],
    high: Option<&[[u8; 16]]>,
    out: &mut [f32],
) {
    let base = row.as_ptr();
    for (g, ((b, m), o)) in bases
        .chunks_exact(2)
        .zip(masks.chunks_exact(2))
        .zip(out.chunks_exact_mut(8))
        .enumerate()
    {
        // SAFETY: each `b[k] + 16 <= row.len()` (`+ 32` with `high`, caller), so every
        // 16-byte load is inside `row`; `m` is two contiguous 16-byte arrays (32 bytes),
        // as is `high[2g..2g + 2]` (same length as `masks`), and `o` is 8 floats.
        unsafe {
            let load = |offset: usize| {
                _mm256_set_m128i(
                    _mm_loadu_si128(base.add(b[1] as usize + offset).cast()),
                    _mm_loadu_si128(base.add(b[0] as usize + offset).cast()),
                )
            };
            let mut bytes = _mm256_shuffle_epi8(load(0), _mm256_loadu_si256(m.as_ptr().cast()));
            if let Some(high) = high {
                let mask = _mm256_loadu_si256(high.as_ptr().add(2 * g).cast());
                bytes = _mm256_or_si256(bytes, _mm256_shuffle_epi8(load(16), mask));
            }
            _mm256_storeu_ps(o.as_mut_ptr(), _mm256_cvtepi32_ps(bytes));
        }
    }
}
