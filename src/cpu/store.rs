//! Stage 2 of the fused kernel: colour conversion of the interpolated channels, one clamp,
//! and the store in the destination's element type and layout.

use std::ops::Range;

use half::f16;

use super::Simd;
use crate::Element;
use crate::convert::Plan;

/// A destination element type the CPU backend writes (`u8`, `i8`, `f16`, `f32`).
pub(crate) trait OutElement: Element + Copy {
    /// Stores a clamped channel value `v` in 0..=255 through the plan's `out_scale` and
    /// `out_bias` of its channel (rule 5 of the plan).
    fn from_value(v: f32, scale: f32, bias: f32) -> Self;
    /// The value of an opaque alpha channel.
    fn opaque() -> Self;
    /// `from_value(v, 1.0, 0.0)` for a `v` the colour stage already clamped to 0..=255.
    /// The integer types skip the multiply, add and second clamp, which change nothing
    /// there (`v * 1 + 0` is exact, and `v` is in range): the same bits, four operations
    /// fewer per element for the plain u8/i8 destinations. (The float types keep
    /// `from_value`: `-0.0 * 1 + 0` is `+0.0`, so skipping it would change a bit.)
    #[inline(always)]
    fn from_clamped(v: f32) -> Self {
        Self::from_value(v, 1.0, 0.0)
    }
    /// Whether this is an 8-bit type (u8, i8), which the fixed-point path (`fixed`) can
    /// write: its unscaled store of a value is `from_byte` of the value's rounding.
    const IS_BYTE: bool = false;
    /// For the 8-bit types, what `from_byte` flips in a byte (i8: the top bit).
    const BYTE_XOR: u8 = 0;
    /// The unscaled store of the integer `b` (`from_clamped(b)`): for the 8-bit types
    /// its bits, without a round trip through f32.
    #[inline(always)]
    fn from_byte(b: u8) -> Self {
        Self::from_clamped(f32::from(b))
    }
}

/// Fills rows `rows` of `dst` (each `width` elements, `stride` apart) with repetitions
/// of `pattern` (`width` a multiple of its length): the letterbox's whole padding rows.
/// Contiguous rows take one fill, so a run of them reaches the fills that write cache
/// lines without reading them first (`fill_repeating`).
pub(crate) fn fill_rows<T: OutElement>(
    dst: &mut [T],
    rows: Range<usize>,
    stride: usize,
    width: usize,
    pattern: &[T],
) {
    if rows.is_empty() {
        return;
    }
    if stride == width {
        fill_repeating(
            &mut dst[rows.start * stride..(rows.end - 1) * stride + width],
            pattern,
        );
    } else {
        for r in rows {
            fill_repeating(&mut dst[r * stride..r * stride + width], pattern);
        }
    }
}

/// Fills `dst` with repetitions of `pattern`: `memset` where the pattern is one byte
/// value (glibc's `memset` writes large fills with `rep stosb`), one `rep stos` where it
/// is 2, 4 or 8 bytes on x86-64, else a loop of stores. For destinations out of the
/// caches the first two write each line without reading it in, which vector stores
/// cannot (see `x86::fill_repeating` for the measurement).
pub(crate) fn fill_repeating<T: OutElement>(dst: &mut [T], pattern: &[T]) {
    let bytes: &[u8] = bytemuck::cast_slice(pattern);
    if let [first, rest @ ..] = bytes
        && rest.iter().all(|b| b == first)
    {
        bytemuck::cast_slice_mut::<T, u8>(dst).fill(*first);
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if super::x86::fill_repeating(bytemuck::cast_slice_mut(dst), bytes) {
        return;
    }
    fill_pixels(dst, pattern);
}

/// `dst` as pixels of `pattern.len()` elements, each set to `pattern` (monomorphised for
/// the common pixel widths, so no per-pixel `memcpy` call).
#[inline(always)]
pub(crate) fn fill_pixels<T: OutElement>(dst: &mut [T], pattern: &[T]) {
    match *pattern {
        [g] => dst.fill(g),
        [a, b, c] => dst.chunks_exact_mut(3).for_each(|px| {
            px[0] = a;
            px[1] = b;
            px[2] = c;
        }),
        [a, b, c, d] => dst.chunks_exact_mut(4).for_each(|px| {
            px[0] = a;
            px[1] = b;
            px[2] = c;
            px[3] = d;
        }),
        _ => dst
            .chunks_exact_mut(pattern.len())
            .for_each(|px| px.copy_from_slice(pattern)),
    }
}

/// Rounds `v` in 0..=255 to the nearest integer (ties to even) with bit operations only,
/// so the compiler vectorises it (a float→int `as` cast saturates, which it does not):
/// adding 2^23 leaves `round(v)` in the low mantissa bits.
#[inline(always)]
fn round_to_u8(v: f32) -> u8 {
    ((v + 8_388_608.0).to_bits() & 0xFF) as u8
}

/// `round(clamp(v * scale + bias, 0, 255))`, the integer store of rule 5 (quantised, or
/// with scale 1 and bias 0, where it is `v` rounded: `v * 1 + 0` is exact and `v` is
/// already clamped). A separate multiply and add, never a fused one, so every kernel build
/// rounds alike.
#[inline(always)]
fn integer_store(v: f32, scale: f32, bias: f32) -> u8 {
    round_to_u8((v * scale + bias).clamp(0.0, 255.0))
}

impl OutElement for u8 {
    #[inline(always)]
    fn from_value(v: f32, scale: f32, bias: f32) -> Self {
        integer_store(v, scale, bias)
    }
    fn opaque() -> Self {
        255
    }
    #[inline(always)]
    fn from_clamped(v: f32) -> Self {
        round_to_u8(v)
    }
    const IS_BYTE: bool = true;
    #[inline(always)]
    fn from_byte(b: u8) -> Self {
        b
    }
}

impl OutElement for i8 {
    #[inline(always)]
    fn from_value(v: f32, scale: f32, bias: f32) -> Self {
        (integer_store(v, scale, bias) ^ 0x80) as i8
    }
    fn opaque() -> Self {
        (255u8 ^ 0x80) as i8
    }
    #[inline(always)]
    fn from_clamped(v: f32) -> Self {
        (round_to_u8(v) ^ 0x80) as i8
    }
    const IS_BYTE: bool = true;
    const BYTE_XOR: u8 = 0x80;
    #[inline(always)]
    fn from_byte(b: u8) -> Self {
        (b ^ Self::BYTE_XOR) as i8
    }
}

impl OutElement for f32 {
    #[inline(always)]
    fn from_value(v: f32, scale: f32, bias: f32) -> Self {
        v * scale + bias
    }
    fn opaque() -> Self {
        1.0
    }
}

impl OutElement for f16 {
    #[inline(always)]
    fn from_value(v: f32, scale: f32, bias: f32) -> Self {
        f16::from_f32(v * scale + bias)
    }
    fn opaque() -> Self {
        f16::ONE
    }
}

/// `out[c][j] = clamp(matrix[c] · s[j] + offset, 0, 255)` for each output channel.
#[inline(always)]
pub(crate) fn colour(plan: &Plan, s: [&[f32]; 3], out: &mut [&mut [f32]]) {
    for (c, o) in out.iter_mut().enumerate() {
        let [m0, m1, m2, m3] = plan.color_matrix[c];
        let n = o.len();
        let (s0, s1, s2) = (&s[0][..n], &s[1][..n], &s[2][..n]);
        for (j, v) in o.iter_mut().enumerate() {
            let x = m0 * s0[j] + m1 * s1[j] + m2 * s2[j] + m3;
            *v = x.clamp(0.0, 255.0);
        }
    }
}

/// Converts a channel row into destination elements, `dst[j * step] = v[j]`. `v` is in
/// 0..=255, as [`colour`] leaves it: the unscaled store relies on that.
#[inline(always)]
pub(crate) fn store_channel<T: OutElement>(
    v: &[f32],
    scale: f32,
    bias: f32,
    dst: &mut [T],
    step: usize,
) {
    let unscaled = scale == 1.0 && bias == 0.0;
    if step == 1 && unscaled {
        for (d, &x) in dst.iter_mut().zip(v) {
            *d = T::from_clamped(x);
        }
    } else if step == 1 {
        for (d, &x) in dst.iter_mut().zip(v) {
            *d = T::from_value(x, scale, bias);
        }
    } else {
        for (d, &x) in dst.iter_mut().step_by(step).zip(v) {
            *d = T::from_value(x, scale, bias);
        }
    }
}

/// Stores three channel rows as packed 3-element pixels, channel `c` at position `Pc`.
#[inline(always)]
fn store_rgb3<T: OutElement, const P0: usize, const P1: usize, const P2: usize>(
    plan: &Plan,
    values: [&[f32]; 3],
    dst: &mut [T],
) {
    let (s, b) = (plan.out_scale, plan.out_bias);
    let n = dst.len() / 3;
    let (v0, v1, v2) = (&values[0][..n], &values[1][..n], &values[2][..n]);
    let pixels = dst.chunks_exact_mut(3).zip(v0).zip(v1).zip(v2);
    if s == [1.0; 3] && b == [0.0; 3] {
        for (((px, &r), &g), &bl) in pixels {
            px[P0] = T::from_clamped(r);
            px[P1] = T::from_clamped(g);
            px[P2] = T::from_clamped(bl);
        }
    } else {
        for (((px, &r), &g), &bl) in pixels {
            px[P0] = T::from_value(r, s[0], b[0]);
            px[P1] = T::from_value(g, s[1], b[1]);
            px[P2] = T::from_value(bl, s[2], b[2]);
        }
    }
}

/// Writes whole packed pixels of RGB(A) or grey data: `values[c]` is output channel `c`
/// (R, G, B order), stored at `positions[c]` of each `bpp`-element pixel, each value in
/// 0..=255 as [`colour`] leaves it.
#[inline(always)]
pub(crate) fn store_packed<T: OutElement>(
    plan: &Plan,
    values: &[&mut [f32]],
    dst: &mut [T],
    bpp: usize,
) {
    let n = values[0].len();
    let dst = &mut dst[..n * bpp];
    match (values.len(), bpp, plan.dst_alpha_position) {
        // Constant channel positions let the compiler drop the per-pixel index checks.
        (3, 3, None) if plan.dst_channel_positions == [0, 1, 2] => {
            store_rgb3::<T, 0, 1, 2>(plan, [&*values[0], &*values[1], &*values[2]], dst);
        }
        (3, 3, None) if plan.dst_channel_positions == [2, 1, 0] => {
            store_rgb3::<T, 2, 1, 0>(plan, [&*values[0], &*values[1], &*values[2]], dst);
        }
        _ => {
            for (c, v) in values.iter().enumerate() {
                let pos = plan.dst_channel_positions[c];
                store_channel(v, plan.out_scale[c], plan.out_bias[c], &mut dst[pos..], bpp);
            }
            if let Some(a) = plan.dst_alpha_position {
                for px in dst.chunks_exact_mut(bpp) {
                    px[a] = T::opaque();
                }
            }
        }
    }
}

/// [`store_channel`] of a byte row from the fixed-point path: `dst[j] = from_byte(v[j])`.
#[inline(always)]
pub(crate) fn store_channel_bytes<T: OutElement>(v: &[u8], dst: &mut [T]) {
    for (d, &x) in dst.iter_mut().zip(v) {
        *d = T::from_byte(x);
    }
}

/// [`store_packed`] of byte rows from the fixed-point path (the unscaled store: the
/// fixed-point path runs only for scale 1, bias 0, and 8-bit `T`). RGB and BGR take the
/// interleaving kernel of `simd`.
#[inline(always)]
pub(crate) fn store_packed_bytes<T: OutElement>(
    simd: Simd,
    plan: &Plan,
    values: [&[u8]; 3],
    channels: usize,
    dst: &mut [T],
    bpp: usize,
) {
    let n = values[0].len();
    let dst = &mut dst[..n * bpp];
    let rgb3 = match (channels, bpp, plan.dst_alpha_position) {
        (3, 3, None) if plan.dst_channel_positions == [0, 1, 2] => Some([0, 1, 2]),
        (3, 3, None) if plan.dst_channel_positions == [2, 1, 0] => Some([2, 1, 0]),
        _ => None,
    };
    if let Some(order) = rgb3
        && T::IS_BYTE
    {
        // 8-bit elements: `from_byte` is the byte itself (u8) or with its top bit
        // flipped (i8).
        let bytes: &mut [u8] = bytemuck::cast_slice_mut(dst);
        interleave3(simd, order.map(|c| values[c]), bytes);
        if T::BYTE_XOR != 0 {
            bytes.iter_mut().for_each(|b| *b ^= T::BYTE_XOR);
        }
        return;
    }
    for (c, v) in values.iter().enumerate().take(channels) {
        let pos = plan.dst_channel_positions[c];
        for (d, &x) in dst[pos..].iter_mut().step_by(bpp).zip(*v) {
            *d = T::from_byte(x);
        }
    }
    if let Some(a) = plan.dst_alpha_position {
        for px in dst.chunks_exact_mut(bpp) {
            px[a] = T::opaque();
        }
    }
}

/// `dst[3j + k] = rows[k][j]`: three byte rows as packed 3-byte pixels.
#[inline(always)]
fn interleave3(simd: Simd, rows: [&[u8]; 3], dst: &mut [u8]) {
    let n = dst.len() / 3;
    assert!(rows.iter().all(|r| r.len() >= n));
    let whole = match simd {
        #[cfg(target_arch = "x86_64")]
        Simd::Avx2 | Simd::Avx512 => {
            let whole = n - n % 16;
            // SAFETY: AVX2 is available (`Simd::Avx2` and `Simd::Avx512` are only chosen
            // after detecting it); each row holds at least `n >= whole` bytes (asserted)
            // and `dst` `3 * n`.
            unsafe { super::x86::interleave3(rows, dst, whole) };
            whole
        }
        #[cfg(all(target_arch = "aarch64", target_feature = "neon"))]
        Simd::Neon => {
            let whole = n - n % 16;
            // SAFETY: NEON is the target's baseline; lengths as for AVX2.
            unsafe { super::neon::interleave3(rows, dst, whole) };
            whole
        }
        Simd::Portable => 0,
    };
    let (r0, r1, r2) = (&rows[0][whole..n], &rows[1][whole..n], &rows[2][whole..n]);
    for (((px, &a), &b), &c) in dst[3 * whole..].chunks_exact_mut(3).zip(r0).zip(r1).zip(r2) {
        px[0] = a;
        px[1] = b;
        px[2] = c;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every pattern width (one byte value, the `rep stos` widths, the loop's) fills
    /// exactly its slice, at every offset into a guarded buffer: a wrong count or value
    /// from the string instructions shows as a byte out of place.
    #[test]
    fn fill_repeating_writes_its_pattern_and_nothing_else() {
        for width in 1..=12usize {
            for uniform in [false, true] {
                let pattern: Vec<u8> = (0..width)
                    .map(|i| if uniform { 0xa5 } else { 0x11 * (i as u8 + 1) })
                    .collect();
                for copies in [0, 1, 3, 64, 1001] {
                    for offset in 0..4 {
                        let mut buffer = vec![0x5au8; offset + width * copies + 9];
                        let region = offset..offset + width * copies;
                        fill_repeating(&mut buffer[region.clone()], &pattern);
                        for (i, &b) in buffer.iter().enumerate() {
                            let want = if region.contains(&i) {
                                pattern[(i - offset) % width]
                            } else {
                                0x5a
                            };
                            assert_eq!(
                                b, want,
                                "width {width} copies {copies} offset {offset} byte {i}"
                            );
                        }
                    }
                }
            }
        }
        let mut floats = [0.0f32; 37];
        fill_repeating(&mut floats[1..36], &[0.447]);
        assert_eq!(floats[0], 0.0);
        assert!(floats[1..36].iter().all(|&v| v == 0.447));
        assert_eq!(floats[36], 0.0);
    }

    /// Rows `stride` apart fill only their `width` elements; the gap after each row
    /// (a padded stride) keeps its bytes.
    #[test]
    fn fill_rows_leaves_the_stride_padding_alone() {
        let (stride, width) = (10, 6);
        let mut dst = vec![0u8; 5 * stride];
        fill_rows(&mut dst, 1..4, stride, width, &[1, 2, 3]);
        for (i, &b) in dst.iter().enumerate() {
            let (row, col) = (i / stride, i % stride);
            let want = if (1..4).contains(&row) && col < width {
                [1, 2, 3][col % 3]
            } else {
                0
            };
            assert_eq!(b, want, "row {row} col {col}");
        }
        // 2-byte elements: one (`rep stosw`) and two per pattern.
        let (half, two) = (f16::from_f32(0.5), f16::from_f32(2.0));
        for pattern in [&[half][..], &[half, two][..]] {
            let mut tight = vec![f16::ZERO; 4 * width];
            fill_rows(&mut tight, 1..3, width, width, pattern);
            assert!(tight[..width].iter().all(|&v| v == f16::ZERO));
            let filled = &tight[width..3 * width];
            assert!(filled.chunks(pattern.len()).all(|p| p == pattern));
            assert!(tight[3 * width..].iter().all(|&v| v == f16::ZERO));
        }
    }
}
