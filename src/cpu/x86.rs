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

/// Fills `dst` with copies of `pattern` with one `rep stos` of its width, where it is 2,
/// 4 or 8 bytes and `dst` a whole number of them; returns whether it did. Measured on
/// the Xeon the benchmarks ran on (2.1 MB of f32 whose lines were out of the caches):
/// 244 µs where a loop of 32-byte stores took 293 µs, the same as glibc's `memset` of one
/// byte value; with the lines cached all three took the same time. The string
/// instruction writes whole lines without reading them first (the fast-string protocol),
/// where vector stores to uncached lines read each one in.
pub(super) fn fill_repeating(dst: &mut [u8], pattern: &[u8]) -> bool {
    if pattern.is_empty() || !dst.len().is_multiple_of(pattern.len()) {
        return false;
    }
    let (at, count) = (dst.as_mut_ptr(), dst.len() / pattern.len());
    // SAFETY (each arm): `rep stos` writes `count` items of the pattern's width upwards
    // from `at` (the ABI keeps the direction flag clear at calls), `dst.len()` bytes in
    // all: exactly the slice, which `&mut` makes ours. It needs no alignment and touches
    // no stack or flag.
    match *pattern {
        [a, b] => unsafe {
            core::arch::asm!("rep stosw", inout("rdi") at => _, inout("rcx") count => _,
                in("ax") u16::from_ne_bytes([a, b]), options(nostack, preserves_flags))
        },
        [a, b, c, d] => unsafe {
            core::arch::asm!("rep stosd", inout("rdi") at => _, inout("rcx") count => _,
                in("eax") u32::from_ne_bytes([a, b, c, d]), options(nostack, preserves_flags))
        },
        [a, b, c, d, e, f, g, h] => unsafe {
            core::arch::asm!("rep stosq", inout("rdi") at => _, inout("rcx") count => _,
                in("rax") u64::from_ne_bytes([a, b, c, d, e, f, g, h]),
                options(nostack, preserves_flags))
        },
        _ => return false,
    }
    true
}

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

/// [`gather_bytes`] into bytes: `out[16q + 4i + k] = row[bases[4q + i] + d]` where mask
/// byte `4i + k` of `masks[4q + i]` is `d` (or of `high[4q + i]` is `d - 16`); every other
/// mask byte is 0x80, so the four groups' shuffles or together into 16 output bytes.
///
/// # Safety
/// AVX2 must be available; `bases`, `masks` and `high` (if given) must have the same
/// length, a multiple of 4, and `out` 4 bytes per group; `bases[g] + 16 <= row.len()`
/// for every `g` (`bases[g] + 32` with `high`).
#[target_feature(enable = "avx2")]
pub(super) unsafe fn gather_bytes_u8(
    row: &[u8],
    bases: &[u32],
    masks: &[[u8; 16]],
    high: Option<&[[u8; 16]]>,
    out: &mut [u8],
) {
    let base = row.as_ptr();
    for (q, ((b, m), o)) in bases
        .chunks_exact(4)
        .zip(masks.chunks_exact(4))
        .zip(out.chunks_exact_mut(16))
        .enumerate()
    {
        // SAFETY: each `b[i] + 16 <= row.len()` (`+ 32` with `high`, caller), so every
        // 16-byte load is inside `row`; `m` is four contiguous 16-byte arrays, as is
        // `high[4q..4q + 4]` (same length as `masks`), and `o` is 16 bytes.
        unsafe {
            let load = |i: usize, offset: usize| {
                _mm256_set_m128i(
                    _mm_loadu_si128(base.add(b[i + 1] as usize + offset).cast()),
                    _mm_loadu_si128(base.add(b[i] as usize + offset).cast()),
                )
            };
            let mask = |set: &[[u8; 16]], i: usize| _mm256_loadu_si256(set.as_ptr().add(i).cast());
            // Lane 0 holds groups 0 and 2, lane 1 groups 1 and 3, each at its own bytes.
            let mut bytes = _mm256_or_si256(
                _mm256_shuffle_epi8(load(0, 0), mask(m, 0)),
                _mm256_shuffle_epi8(load(2, 0), mask(m, 2)),
            );
            if let Some(high) = high {
                let h = &high[4 * q..4 * q + 4];
                bytes = _mm256_or_si256(
                    bytes,
                    _mm256_or_si256(
                        _mm256_shuffle_epi8(load(0, 16), mask(h, 0)),
                        _mm256_shuffle_epi8(load(2, 16), mask(h, 2)),
                    ),
                );
            }
            let both = _mm_or_si128(
                _mm256_castsi256_si128(bytes),
                _mm256_extracti128_si256::<1>(bytes),
            );
            _mm_storeu_si128(o.as_mut_ptr().cast(), both);
        }
    }
}

/// The fixed-point colour stage of [`super::fixed::FixedColour`] for the first `n`
/// pixels (16 per step): for each output channel `c`,
/// `outs[c][j] = clamp((k0 * s0[j] + k1 * s1[j] + k2 * s2[j] + bias) >> shift, 0, 255)`,
/// the source pairs multiplied and summed in 32 bits by `vpmaddwd`, the clamp done by the
/// saturating packs. Samples are bytes (widened) or Q7 words (`FixedSample`). The same
/// integers as the portable form, so the same bits.
///
/// # Safety
/// AVX2 must be available; `n` is a multiple of 16; each of `s` and each of `outs` (at
/// most 3) holds at least `n` elements.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn fixed_colour<S: super::fixed::FixedSample>(
    fixed: &super::fixed::FixedColour,
    s: [&[S]; 3],
    outs: &mut [&mut [u8]],
    n: usize,
) {
    let pair = |lo: i16, hi: i16| _mm256_set1_epi32(i32::from(lo as u16) | (i32::from(hi) << 16));
    let coef01 = fixed.coef.map(|k| pair(k[0], k[1]));
    let coef2 = fixed.coef.map(|k| pair(k[2], 0));
    let bias = fixed.bias.map(|b| _mm256_set1_epi32(b));
    let shift = _mm_cvtsi32_si128(fixed.shift as i32);
    let zero = _mm256_setzero_si256();
    for j in (0..n).step_by(16) {
        // SAFETY: `j + 16 <= n` and every row holds at least `n` elements (caller).
        unsafe {
            // 16 samples as 16-bit integers: bytes widened, Q7 words as they are.
            let widen = |r: &[S]| {
                let p = r.as_ptr().add(j);
                if size_of::<S>() == 1 {
                    _mm256_cvtepu8_epi16(_mm_loadu_si128(p.cast()))
                } else {
                    _mm256_loadu_si256(p.cast())
                }
            };
            let (a, b, c) = (widen(s[0]), widen(s[1]), widen(s[2]));
            // Per 128-bit lane: pixels 0-3 | 8-11 in the low halves, 4-7 | 12-15 in the
            // high ones; the packs below put them back in order.
            let (ab_lo, ab_hi) = (_mm256_unpacklo_epi16(a, b), _mm256_unpackhi_epi16(a, b));
            let (c_lo, c_hi) = (
                _mm256_unpacklo_epi16(c, zero),
                _mm256_unpackhi_epi16(c, zero),
            );
            for (k, out) in outs.iter_mut().enumerate() {
                let sum = |ab: __m256i, c: __m256i| {
                    let v = _mm256_add_epi32(
                        _mm256_madd_epi16(ab, coef01[k]),
                        _mm256_madd_epi16(c, coef2[k]),
                    );
                    _mm256_sra_epi32(_mm256_add_epi32(v, bias[k]), shift)
                };
                let words = _mm256_packs_epi32(sum(ab_lo, c_lo), sum(ab_hi, c_hi));
                let bytes = _mm256_packus_epi16(words, words);
                let ordered = _mm256_permute4x64_epi64::<0b00_00_10_00>(bytes);
                _mm_storeu_si128(
                    out.as_mut_ptr().add(j).cast(),
                    _mm256_castsi256_si128(ordered),
                );
            }
        }
    }
}

/// `vpshufb` masks that interleave three 16-byte rows into 48 bytes of 3-byte pixels:
/// `INTERLEAVE3[c][k]` moves row `c`'s bytes to their places in output block `k` (byte
/// `i` of block `k` is pixel `(16k + i) / 3`, channel `(16k + i) % 3`) and zeroes the rest.
const INTERLEAVE3: [[[u8; 16]; 3]; 3] = {
    let mut masks = [[[0x80u8; 16]; 3]; 3];
    let mut k = 0;
    while k < 3 {
        let mut i = 0;
        while i < 16 {
            let at = 16 * k + i;
            masks[at % 3][k][i] = (at / 3) as u8;
            i += 1;
        }
        k += 1;
    }
    masks
};

/// `dst[3j + c] = rows[c][j]` for the first `n` pixels (16 per step): three byte shuffles
/// and two ors per 16 output bytes, where the compiler's code stores byte by byte.
///
/// # Safety
/// AVX2 must be available; `n` is a multiple of 16; each row holds at least `n` bytes and
/// `dst` at least `3 * n`.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn interleave3(rows: [&[u8]; 3], dst: &mut [u8], n: usize) {
    // Loaded in plain loops: through nested `map` closures the compiler, after a change
    // elsewhere in the crate, kept the loads out of line and the masks in memory (1% more
    // instructions for NV12 1080p -> 640 RGB u8 under AVX2, this function unchanged).
    let mut masks = [[_mm_setzero_si128(); 3]; 3];
    for (row, source) in masks.iter_mut().zip(&INTERLEAVE3) {
        for (m, bytes) in row.iter_mut().zip(source) {
            // SAFETY: `bytes` is a 16-byte array; the load touches only its memory.
            *m = unsafe { _mm_loadu_si128(bytes.as_ptr().cast()) };
        }
    }
    for j in (0..n).step_by(16) {
        // SAFETY: `j + 16 <= n` bytes of each row and `3 * (j + 16) <= 3 * n` bytes of
        // `dst` (caller).
        unsafe {
            let v = rows.map(|r| _mm_loadu_si128(r.as_ptr().add(j).cast()));
            let [m0, m1, m2] = &masks;
            for (k, ((&a, &b), &c)) in m0.iter().zip(m1).zip(m2).enumerate() {
                let block = _mm_or_si128(
                    _mm_or_si128(_mm_shuffle_epi8(v[0], a), _mm_shuffle_epi8(v[1], b)),
                    _mm_shuffle_epi8(v[2], c),
                );
                _mm_storeu_si128(dst.as_mut_ptr().add(3 * j + 16 * k).cast(), block);
            }
        }
    }
}

/// The fixed-point bilinear interpolation of the bilinear path (`sample::blend_q7`, then
/// `sample::lerp_q7`) for 8 columns per step (two groups of four): per row and group one
/// 32-byte window (two 16-byte loads; three, 48 bytes, with `WINDOW_48`; with
/// `WINDOW_COLUMNS` four 8-byte loads, one at each column's base, the first two making
/// the low 16 bytes) and a byte shuffle per 16 bytes (`masks`, `high`, `far`) that leave
/// each column's taps as a pair of 16-bit integers in its 32-bit lane; the two rows'
/// pairs interleaved into (top, bottom) pairs per tap and `vpmaddwd` with the row weight
/// pair `wy`, rounded to Q7; those packed into (tap 0, tap 1) pairs per column and
/// `vpmaddwd` with the column's weight pair, rounded to Q7. With `ONE_ROW` (both taps'
/// rows are one row) `bottom` is not read: one `vpmaddwd` of each column's taps with its
/// weight pair, rounded to Q7 (`blend_q7` of the two taps), the integer the two steps
/// give for a row blended with itself. The same integers as the portable form.
///
/// # Safety
/// AVX2 must be available; `WINDOW` is one of `sample`'s window kinds; `bases` has one
/// entry per group (four, one per column, with `WINDOW_COLUMNS`), `masks` and `high` (and
/// `far` with `WINDOW_48`) one per group, an even number of groups; `weights` and `out` 4
/// entries per group; every base + `WINDOW` (+ 8 with `WINDOW_COLUMNS`) `<=` the length
/// of `top` and (unless `ONE_ROW`) of `bottom`.
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx2")]
pub(super) unsafe fn bilinear_q7<const WINDOW: usize, const ONE_ROW: bool>(
    top: &[u8],
    bottom: &[u8],
    bases: &[u32],
    [masks, high, far]: [&[[u8; 16]]; 3],
    weights: &[i32],
    wy: i32,
    out: &mut [i16],
) {
    use super::sample::{WINDOW_32, WINDOW_48, WINDOW_COLUMNS};
    const { assert!(matches!(WINDOW, WINDOW_32 | WINDOW_48 | WINDOW_COLUMNS)) };
    let far_window = WINDOW == WINDOW_48;
    let bases_per_group = if WINDOW == WINDOW_COLUMNS { 4 } else { 1 };
    let wy = _mm256_set1_epi32(wy);
    let (half7, half14) = (_mm256_set1_epi32(1 << 6), _mm256_set1_epi32(1 << 13));
    // Without the far window the far masks are not read: zip with `masks` to keep one
    // loop.
    let far = if far_window { far } else { masks };
    for (((((b, m), h), f), w), o) in bases
        .chunks_exact(2 * bases_per_group)
        .zip(masks.chunks_exact(2))
        .zip(high.chunks_exact(2))
        .zip(far.chunks_exact(2))
        .zip(weights.chunks_exact(8))
        .zip(out.chunks_exact_mut(8))
    {
        // SAFETY: each base + 32 (+ 48 with `WINDOW_48`, + 8 with `WINDOW_COLUMNS`) `<=`
        // both rows' lengths (caller), so every 16-byte load at `b[i]`, `b[i] + 16` (and
        // `b[i] + 32`), or 8-byte load at a column's base, is inside its row; `b` holds
        // two groups' bases (2, or 8 with `WINDOW_COLUMNS`) and is indexed below that
        // (0 and 1, or `k + offset / 8` up to 5 + 2); `m`, `h` and `f` are two contiguous
        // 16-byte masks each, `w` 8 weights and `o` 8 values.
        unsafe {
            let (m, h, f) = (
                _mm256_loadu_si256(m.as_ptr().cast()),
                _mm256_loadu_si256(h.as_ptr().cast()),
                _mm256_loadu_si256(f.as_ptr().cast()),
            );
            // Per column (32-bit lane): its two taps in this row, as 16-bit integers.
            let taps = |r: &[u8]| {
                // Bytes `offset..offset + 16` of both groups' windows (group 0 in the low
                // lane).
                let load = |offset: usize| {
                    if WINDOW == WINDOW_COLUMNS {
                        // Columns 0-1 (offset 0) or 2-3 (offset 16) of each group.
                        let column = |k: usize| {
                            r.as_ptr()
                                .add(*b.get_unchecked(k + offset / 8) as usize)
                                .cast::<i64>()
                                .read_unaligned()
                        };
                        _mm256_set_epi64x(column(5), column(4), column(1), column(0))
                    } else {
                        _mm256_set_m128i(
                            _mm_loadu_si128(
                                r.as_ptr().add(*b.get_unchecked(1) as usize + offset).cast(),
                            ),
                            _mm_loadu_si128(
                                r.as_ptr().add(*b.get_unchecked(0) as usize + offset).cast(),
                            ),
                        )
                    }
                };
                let near = _mm256_or_si256(
                    _mm256_shuffle_epi8(load(0), m),
                    _mm256_shuffle_epi8(load(16), h),
                );
                if far_window {
                    _mm256_or_si256(near, _mm256_shuffle_epi8(load(32), f))
                } else {
                    near
                }
            };
            let t = taps(top);
            let w = _mm256_loadu_si256(w.as_ptr().cast());
            let v = if ONE_ROW {
                // One source row: `blend_q7` of the column's two taps with its weight
                // pair, the integer the two steps give for a row blended with itself.
                _mm256_srai_epi32::<7>(_mm256_add_epi32(_mm256_madd_epi16(t, w), half7))
            } else {
                let u = taps(bottom);
                // (top, bottom) pairs: columns 0-1 of each group in `lo`, 2-3 in `hi`,
                // each column's tap 0 then tap 1.
                let blend = |pairs: __m256i| {
                    _mm256_srai_epi32::<7>(_mm256_add_epi32(_mm256_madd_epi16(pairs, wy), half7))
                };
                let (lo, hi) = (
                    blend(_mm256_unpacklo_epi16(t, u)),
                    blend(_mm256_unpackhi_epi16(t, u)),
                );
                // (tap 0, tap 1) pairs per column, columns in order within each group.
                let pairs = _mm256_packs_epi32(lo, hi);
                _mm256_srai_epi32::<14>(_mm256_add_epi32(_mm256_madd_epi16(pairs, w), half14))
            };
            // Lane 0 holds columns 0-3, lane 1 columns 4-7: pack, then take each lane's
            // low 64 bits.
            let words = _mm256_permute4x64_epi64::<0b00_00_10_00>(_mm256_packs_epi32(v, v));
            _mm_storeu_si128(o.as_mut_ptr().cast(), _mm256_castsi256_si128(words));
        }
    }
}

/// The bytes `index` picks from the `64 * REGS` bytes at `at` (index byte `j` names
/// byte `j` of the window), zero where `keep` is clear: one `vpermb` for one register,
/// one `vpermt2b` for two, two of those and a blend on index bit 7 for three or four.
///
/// # Safety
/// The caller's function enables AVX-512 F, BW and VBMI (this one is inlined into it);
/// `REGS` is 1 to 4, the `64 * REGS` bytes at `at` are readable, and every index byte
/// `keep` selects is below `64 * REGS`.
#[inline(always)]
unsafe fn permute_window<const REGS: usize>(
    at: *const u8,
    index: __m512i,
    keep: __mmask64,
) -> __m512i {
    const { assert!(REGS >= 1 && REGS <= 4) };
    // SAFETY: the caller guarantees the features and the readable window; every load is
    // at `64 * min(k, REGS - 1)`, inside it (with three registers the third stands in for
    // a fourth, which no index reaches).
    unsafe {
        let load = |k: usize| _mm512_loadu_si512(at.add(64 * k.min(REGS - 1)).cast());
        match REGS {
            1 => _mm512_maskz_permutexvar_epi8(keep, index, load(0)),
            2 => _mm512_maskz_permutex2var_epi8(keep, load(0), index, load(1)),
            _ => _mm512_mask_blend_epi8(
                _mm512_movepi8_mask(index) & keep,
                _mm512_maskz_permutex2var_epi8(keep, load(0), index, load(1)),
                _mm512_permutex2var_epi8(load(2), index, load(3)),
            ),
        }
    }
}

/// [`bilinear_q7`] with AVX-512, sixteen columns per step: each row's taps of a group
/// come from `REGS` 64-byte loads and one byte permute (`vpermb` for one register,
/// `vpermt2b` for two; two of those and a byte blend for three or four), where the AVX2
/// kernel takes eight to twelve 16-byte loads and four to six shuffles for the same
/// columns. The arithmetic is the AVX2 kernel's (the same pair multiplies and roundings,
/// 128-bit lane by lane, and its one-row step with `ONE_ROW`), so the results are the
/// same integers. Group `g`'s column `k` takes its first tap from byte `index[g][4k]`
/// after `bases[g]` and its second from byte `index[g][4k + 2]`.
///
/// # Safety
/// AVX-512 F, BW and VBMI must be available; `REGS` is 1 to 4; `bases` and `index` must
/// have the same length, `weights` and `out` 16 values per group; `bases[g] + 64 * REGS
/// <=` the length of `top` and (unless `ONE_ROW`) of `bottom` for every `g`, and every
/// index byte below `64 * REGS`.
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
pub(super) unsafe fn bilinear_q7_avx512<const REGS: usize, const ONE_ROW: bool>(
    top: &[u8],
    bottom: &[u8],
    bases: &[u32],
    index: &[[u8; 64]],
    weights: &[i32],
    wy: i32,
    out: &mut [i16],
) {
    // Bytes 0 and 2 of every 32-bit lane: each column's two taps as 16-bit integers,
    // their high bytes zeroed.
    const TAP_BYTES: __mmask64 = 0x5555_5555_5555_5555;
    let wy = _mm512_set1_epi32(wy);
    let (half7, half14) = (_mm512_set1_epi32(1 << 6), _mm512_set1_epi32(1 << 13));
    for (((&b, i), w), o) in bases
        .iter()
        .zip(index)
        .zip(weights.chunks_exact(16))
        .zip(out.chunks_exact_mut(16))
    {
        // SAFETY: `b + 64 * REGS <=` both rows' lengths (caller), so each 64-byte load at
        // `b + 64 * k`, `k < REGS`, is inside its row; `i` is 64 bytes, `w` 16 weights and
        // `o` 16 values.
        unsafe {
            let i = _mm512_loadu_si512(i.as_ptr().cast());
            let taps = |r: &[u8]| permute_window::<REGS>(r.as_ptr().add(b as usize), i, TAP_BYTES);
            let t = taps(top);
            let w = _mm512_loadu_si512(w.as_ptr().cast());
            // As in `bilinear_q7`, per 128-bit lane (four columns each).
            let v = if ONE_ROW {
                _mm512_srai_epi32::<7>(_mm512_add_epi32(_mm512_madd_epi16(t, w), half7))
            } else {
                let u = taps(bottom);
                let blend = |pairs: __m512i| {
                    _mm512_srai_epi32::<7>(_mm512_add_epi32(_mm512_madd_epi16(pairs, wy), half7))
                };
                let (lo, hi) = (
                    blend(_mm512_unpacklo_epi16(t, u)),
                    blend(_mm512_unpackhi_epi16(t, u)),
                );
                let pairs = _mm512_packs_epi32(lo, hi);
                _mm512_srai_epi32::<14>(_mm512_add_epi32(_mm512_madd_epi16(pairs, w), half14))
            };
            // Columns in order, one per 32-bit lane, each in 0..=255 * 128: narrowing to
            // 16 bits keeps every value.
            _mm256_storeu_si256(o.as_mut_ptr().cast(), _mm512_cvtepi32_epi16(v));
        }
    }
}

/// [`fixed_colour`] with AVX-512, 32 pixels per step: the same pair multiplies, bias and
/// shift per 32-bit lane, so the same bytes. Within each 128-bit lane the unpacks and the
/// pack keep pixel order, and the final narrowing (clamped at 0, then unsigned
/// saturation to 255: what `packus` does) writes the 32 bytes in order.
///
/// # Safety
/// AVX-512 F and BW must be available; every row of `s` and every output holds at least
/// `n` elements, `n` a multiple of 32; at most 3 outputs.
#[target_feature(enable = "avx512f,avx512bw")]
pub(super) unsafe fn fixed_colour_avx512<S: super::fixed::FixedSample>(
    fixed: &super::fixed::FixedColour,
    s: [&[S]; 3],
    outs: &mut [&mut [u8]],
    n: usize,
) {
    let pair = |lo: i16, hi: i16| _mm512_set1_epi32(i32::from(lo as u16) | (i32::from(hi) << 16));
    let coef01 = fixed.coef.map(|k| pair(k[0], k[1]));
    let coef2 = fixed.coef.map(|k| pair(k[2], 0));
    let bias = fixed.bias.map(|b| _mm512_set1_epi32(b));
    let shift = _mm_cvtsi32_si128(fixed.shift as i32);
    let zero = _mm512_setzero_si512();
    for j in (0..n).step_by(32) {
        // SAFETY: `j + 32 <= n` and every row holds at least `n` elements (caller).
        unsafe {
            // 32 samples as 16-bit integers: bytes widened, Q7 words as they are.
            let widen = |r: &[S]| {
                let p = r.as_ptr().add(j);
                if size_of::<S>() == 1 {
                    _mm512_cvtepu8_epi16(_mm256_loadu_si256(p.cast()))
                } else {
                    _mm512_loadu_si512(p.cast())
                }
            };
            let (a, b, c) = (widen(s[0]), widen(s[1]), widen(s[2]));
            let (ab_lo, ab_hi) = (_mm512_unpacklo_epi16(a, b), _mm512_unpackhi_epi16(a, b));
            let (c_lo, c_hi) = (
                _mm512_unpacklo_epi16(c, zero),
                _mm512_unpackhi_epi16(c, zero),
            );
            for (k, out) in outs.iter_mut().enumerate() {
                let sum = |ab: __m512i, c: __m512i| {
                    let v = _mm512_add_epi32(
                        _mm512_madd_epi16(ab, coef01[k]),
                        _mm512_madd_epi16(c, coef2[k]),
                    );
                    _mm512_sra_epi32(_mm512_add_epi32(v, bias[k]), shift)
                };
                let words = _mm512_packs_epi32(sum(ab_lo, c_lo), sum(ab_hi, c_hi));
                let bytes = _mm512_cvtusepi16_epi8(_mm512_max_epi16(words, zero));
                _mm256_storeu_si256(out.as_mut_ptr().add(j).cast(), bytes);
            }
        }
    }
}

/// What the AVX-512 one-tap gather writes: the gathered bytes as they are (for the
/// fixed-point path) or widened to floats (for the f32 path).
pub(super) trait GatheredElement: Copy {
    /// Stores bytes `0..columns` of `bytes` (`keep` selects exactly those) into `out`.
    ///
    /// # Safety
    /// Inlined into a function that enables AVX-512 F and BW; `out` holds `columns`
    /// elements, `columns` at most 64 (a multiple of 16 for floats).
    unsafe fn store(bytes: __m512i, keep: __mmask64, columns: usize, out: &mut [Self]);
}

impl GatheredElement for u8 {
    #[inline(always)]
    unsafe fn store(bytes: __m512i, keep: __mmask64, _: usize, out: &mut [u8]) {
        // SAFETY: `out` holds `columns` bytes, exactly the bytes `keep` stores (a masked
        // store touches no other byte); the caller enables the features.
        unsafe { _mm512_mask_storeu_epi8(out.as_mut_ptr().cast(), keep, bytes) }
    }
}

impl GatheredElement for f32 {
    #[inline(always)]
    unsafe fn store(bytes: __m512i, _: __mmask64, columns: usize, out: &mut [f32]) {
        // SAFETY: the caller enables the features; each store writes one 16-float chunk
        // of `out` (`columns` floats, a multiple of 16).
        unsafe {
            let quarters = [
                _mm512_castsi512_si128(bytes),
                _mm512_extracti32x4_epi32::<1>(bytes),
                _mm512_extracti32x4_epi32::<2>(bytes),
                _mm512_extracti32x4_epi32::<3>(bytes),
            ];
            for (q, o) in quarters
                .into_iter()
                .zip(out[..columns].chunks_exact_mut(16))
            {
                _mm512_storeu_ps(o.as_mut_ptr(), _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(q)));
            }
        }
    }
}

/// The one-tap gathers with AVX-512: `out[columns * g + k] = row[bases[g] +
/// index[g][k]]`, one group of `columns` (16, 32 or 64) outputs per `REGS` 64-byte loads
/// and one byte permute ([`permute_window`]), where the AVX2 kernels ([`gather_bytes_u8`],
/// [`gather_bytes`]) take four 16-byte loads and shuffles per 16. Bytes are stored as
/// they are or widened to floats ([`GatheredElement`]).
///
/// # Safety
/// AVX-512 F, BW and VBMI must be available; `REGS` is 1 to 4 and `columns` 16, 32 or 64;
/// `out` holds `columns` elements per group of `bases` and `index` (same length);
/// `bases[g] + 64 * REGS <= row.len()` for every `g`, and index bytes `0..columns` below
/// `64 * REGS`.
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
pub(super) unsafe fn gather_one_tap_avx512<T: GatheredElement, const REGS: usize>(
    row: &[u8],
    bases: &[u32],
    index: &[[u8; 64]],
    columns: usize,
    out: &mut [T],
) {
    assert!(matches!(columns, 16 | 32 | 64));
    // The first `columns` bytes.
    let keep: __mmask64 = u64::MAX >> (64 - columns);
    for ((&b, i), o) in bases.iter().zip(index).zip(out.chunks_exact_mut(columns)) {
        // SAFETY: `b + 64 * REGS <= row.len()` (caller), so the window is inside `row`;
        // `i` is 64 bytes; `o` holds `columns` elements, what `store` writes.
        unsafe {
            let i = _mm512_loadu_si512(i.as_ptr().cast());
            let bytes = permute_window::<REGS>(row.as_ptr().add(b as usize), i, keep);
            T::store(bytes, keep, columns, o);
        }
    }
}
