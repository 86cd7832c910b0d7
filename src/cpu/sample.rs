//! Stage 1 of the fused kernel: bilinear (or nearest) sampling of the source's own
//! channels (Y, U, V with replicated chroma; R, G, B; or grey) into one row of f32 values
//! per channel, reading only the source rows and columns the output row needs.

use super::Simd;
use crate::convert::Plan;
use crate::image::{FormatFamily, ImageLayout};

/// Where one source channel's samples live: the byte offset of pixel `(x, y)`'s sample is
/// `plane_offset + (y / vsub) * stride + (x / group) * step + base + (x % group) * intra`
/// in buffer `buffer`. This one formula covers every source format: for YUYV the Y of an
/// odd pixel is 2 bytes after the even one (`intra`), chroma is shared by a pair
/// (`group` 2, `intra` 0); semi-planar chroma is a pair of bytes every 2 pixels; packed RGB
/// channels sit `base` bytes into a `step`-byte pixel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ChannelSource {
    pub buffer: usize,
    plane_offset: usize,
    stride: usize,
    vsub: u32,
    group: u32,
    step: usize,
    base: usize,
    intra: usize,
}

impl ChannelSource {
    fn row_offset(&self, y: u32) -> usize {
        self.plane_offset + (y / self.vsub) as usize * self.stride
    }

    fn col_offset(&self, x: u32) -> usize {
        (x / self.group) as usize * self.step + self.base + (x % self.group) as usize * self.intra
    }

    /// Offset contributed by source index `i` along source axis `axis` (0 = column).
    fn axis_offset(&self, axis: usize, i: u32) -> usize {
        if axis == 0 {
            self.col_offset(i)
        } else {
            self.row_offset(i)
        }
    }
}

/// The source channels the plan interpolates, in `Plan::source_channels` order.
pub(crate) fn channel_sources(layout: &ImageLayout) -> ([ChannelSource; 3], usize) {
    let format = layout.format();
    let planes = layout.planes();
    let on_plane =
        |p: usize, vsub: u32, group: u32, step: usize, base: usize, intra: usize| ChannelSource {
            buffer: planes[p].buffer,
            plane_offset: planes[p].offset,
            stride: planes[p].stride,
            vsub,
            group,
            step,
            base,
            intra,
        };
    let (hsub, vsub) = format.chroma_subsampling();
    match format.family() {
        FormatFamily::PackedYuv422 => {
            // Always Some for this family.
            let o = format.packed_yuv_offsets().unwrap_or([0, 1, 2, 3]);
            (
                [
                    on_plane(0, 1, 2, 4, o[0], o[2] - o[0]),
                    on_plane(0, 1, 2, 4, o[1], 0),
                    on_plane(0, 1, 2, 4, o[3], 0),
                ],
                3,
            )
        }
        FormatFamily::SemiPlanarYuv => {
            let (u, v) = if format.chroma_swapped() {
                (1, 0)
            } else {
                (0, 1)
            };
            (
                [
                    on_plane(0, 1, 1, 1, 0, 0),
                    on_plane(1, vsub, 2, 2, u, 0),
                    on_plane(1, vsub, 2, 2, v, 0),
                ],
                3,
            )
        }
        FormatFamily::PlanarYuv => {
            let (u, v) = if format.chroma_swapped() {
                (2, 1)
            } else {
                (1, 2)
            };
            (
                [
                    on_plane(0, 1, 1, 1, 0, 0),
                    on_plane(u, vsub, hsub, 1, 0, 0),
                    on_plane(v, vsub, hsub, 1, 0, 0),
                ],
                3,
            )
        }
        FormatFamily::Grey => {
            let g = on_plane(0, 1, 1, 1, 0, 0);
            ([g, g, g], 1)
        }
        FormatFamily::PackedRgb => {
            let (order, _) = format.rgb_order().unwrap_or(([0, 1, 2], None));
            let bpp = format.channels();
            (order.map(|pos| on_plane(0, 1, 1, bpp, pos, 0)), 3)
        }
        FormatFamily::PlanarRgb => {
            let (order, _) = format.rgb_order().unwrap_or(([0, 1, 2], None));
            (order.map(|plane| on_plane(plane, 1, 1, 1, 0, 0)), 3)
        }
        // Decoded by `decode` (samples wider than a byte, or a demosaic), never sampled
        // as bytes; the first plane stands in so the tables stay well-formed.
        // A compressed frame is decoded into planes before any sampling.
        FormatFamily::Bayer
        | FormatFamily::DeepGrey
        | FormatFamily::SemiPlanarYuv16
        | FormatFamily::Jpeg => {
            let g = on_plane(0, 1, 1, 1, 0, 0);
            ([g, g, g], 1)
        }
    }
}

/// The bytes of one source plane that a destination row reads: `[lo, hi)` relative to the
/// start of a plane row, and where its vertically blended copy lives in the scratch row.
#[derive(Clone, Copy, Debug, Default)]
struct PlaneSpan {
    /// A channel on this plane (its row offsets are the plane's).
    channel: usize,
    lo: usize,
    hi: usize,
    scratch: usize,
    /// Channels reading this plane.
    channels: usize,
    /// Whether two-row destination rows blend this plane's span first. Blending is
    /// vectorised and cheap per byte (measured: blending 1920-byte rows for 416 output
    /// columns beats four direct taps), but not for extreme downscales, where most of
    /// the span is never sampled.
    blend: bool,
}

/// Blend a plane's rows when its span is at most this many bytes per output sample.
const BLEND_SPAN_PER_TAP: usize = 8;

/// Column taps of one channel as indices into the span of its plane that a destination
/// row reads (`PlaneSpan::lo` is index 0). Every index is below `bound` by construction
/// (`bound` is one past the largest index stored), so a gather from a row of at least
/// `bound` elements checks the length once instead of at every tap: the check per tap
/// cost as much as the tap itself in the profile, and it kept the loop from vectorising.
///
/// The same taps also come as pairs for the wide kernels: for every format the second tap
/// sits either one constant distance `pair_step` after the first (the next pixel's
/// sample) or on the first itself (a clamped border, or two pixels sharing a chroma
/// sample). `pair_weights` keeps the weight where the second tap is `first + pair_step`
/// and is 0 where it is `first`, so `row[first] + (row[first + step] - row[first]) * w`
/// gives exactly what the two-index form gives, from one load of adjacent elements.
#[derive(Default)]
struct SpanTaps {
    first: Vec<u32>,
    second: Vec<u32>,
    bound: usize,
    /// 0 when the columns have no single step (the pair form is then not used).
    pair_step: u32,
    pair_weights: Vec<f32>,
    /// The largest first tap: a kernel that reads `k` floats from each first tap stays
    /// inside a row of at least `max_first + k` floats.
    max_first: usize,
    /// The first taps again, as byte shuffles for the wide kernels' one-tap gathers from
    /// a byte row (`nearest_bytes`): per group of [`SHUFFLE_GROUP`] columns, the group's
    /// smallest tap, and a 16-byte mask that moves each column's byte of the 16 bytes
    /// there into the low byte of its 32-bit lane (mask bytes 0x80 zero the other three).
    /// Where some group spans 16 bytes or more (the luma and chroma of packed 4:2:2 at a
    /// 3:1 downscale), `shuffle_masks_high` does the same for the 16 bytes after those
    /// and the two shuffles are or-ed (x86; on aarch64 one index over both registers
    /// instead: see `shuffle_two_registers`). Both empty where a group spans 32 bytes or
    /// more: the scalar gather then serves.
    shuffle_bases: Vec<u32>,
    shuffle_masks: Vec<[u8; 16]>,
    shuffle_masks_high: Vec<[u8; 16]>,
    /// One past the last byte a shuffle gather reads (the largest base + 16, or + 32 with
    /// the high masks).
    shuffle_reach: usize,
    /// The shuffle masks again for gathers into bytes (`nearest_u8`): group `g`'s column
    /// `k` goes to byte `4 * (g % 4) + k` instead of a 32-bit lane's low byte, so four
    /// groups' shuffles or together into 16 output bytes.
    byte_masks: Vec<[u8; 16]>,
    byte_masks_high: Vec<[u8; 16]>,
    /// Whether some group spans 16 bytes or more. On aarch64 the masks then index the
    /// whole 32-byte window (bytes 16 to 31 included) for one `tbl2` per group, and the
    /// `_high` masks stay empty: NEON's `tbl` looks up two registers at once, where x86's
    /// `vpshufb` takes one and the two shuffles are or-ed.
    shuffle_two_registers: bool,
    /// Both taps of every column for the fixed-point bilinear path (`bilinear_q7`), as
    /// byte shuffles: per group of [`SHUFFLE_GROUP`] columns a base (the group's
    /// smallest tap) and a mask that moves column `k`'s first tap to byte `4k` and its
    /// second to byte `4k + 2` of 16, the other bytes 0 (mask 0x80): each 32-bit lane is
    /// then the pair `(x0, x1)` as two 16-bit integers. `two_masks_high` does the same for
    /// taps 16 to 31 bytes after the base, and `two_masks_far` for taps 32 to 47 (empty
    /// unless some group reaches that far: packed 4:2:2 downscaled about 4.5:1 or more,
    /// whose four columns of chroma span up to 48 bytes). Where a group spans 48 bytes or
    /// more the masks address per-column windows instead (`two_column_bases`).
    two_bases: Vec<u32>,
    #[cfg(target_arch = "x86_64")]
    two_masks: Vec<[u8; 16]>,
    #[cfg(target_arch = "x86_64")]
    two_masks_high: Vec<[u8; 16]>,
    #[cfg(target_arch = "x86_64")]
    two_masks_far: Vec<[u8; 16]>,
    /// The same gathers for NEON, whose `tbl` looks bytes up in two or three registers
    /// at once: per group one index into the whole 32- or 48-byte window (byte `4k` the
    /// first tap's offset from the base, `4k + 2` the second's; 0xFF, which `tbl` turns
    /// into 0, elsewhere). One `tbl2` (`tbl3`) per row then does what two `tbl1` and an
    /// `orr` (three and two) do with the masks.
    #[cfg(all(target_arch = "aarch64", target_feature = "neon"))]
    two_index: Vec<[u8; 16]>,
    /// How the kernels load each group's window: [`WINDOW_32`], [`WINDOW_48`] (some
    /// group's taps reach 32 or more past its base) or [`WINDOW_COLUMNS`]
    /// (`two_column_bases`).
    two_window: usize,
    /// Where some group's taps span 48 bytes or more (a downscale of about 12:1 and
    /// more: 3840 → 224 is 17:1), one base per column instead, its smaller tap: the
    /// kernels then load the 8 bytes from each of a group's four column bases into one
    /// 32-byte window (column `k` at bytes `8k..8k + 8`) and the masks and index above
    /// address that window. Without it such columns blended whole source spans, so the
    /// cost followed the source's width rather than the output's. Empty otherwise, or
    /// where a column's two taps lie 8 bytes or more apart (every format's do not).
    two_column_bases: Vec<u32>,
    /// Whether every column's two taps are one sample (`first == second`), so its
    /// bilinear value does not depend on its weight: the chroma of a 4:2:0 source at an
    /// even whole-number downscale (2:1, 6:1), where both luma taps share a chroma column.
    same_taps: bool,
    /// One past the last byte the two-tap gathers read (the largest base + 32, or + 48
    /// with [`WINDOW_48`]; the largest column base + 8 with [`WINDOW_COLUMNS`]).
    two_reach: usize,
    /// Per column, the weights of its two taps in fixed point ([`Q14`]) as the 16-bit pair
    /// `(Q14 - w, w)` in one 32-bit lane (`w = round(weight * Q14)`).
    two_weights: Vec<i32>,
    /// The two-tap gathers again for the AVX-512 kernel (`bilinear_q7_avx512`): per
    /// group of [`WIDE_GROUP`] columns, column `k`'s first tap at index byte `4k` and its
    /// second at `4k + 2`.
    wide_two: WideGather,
    /// The one-tap gathers again for the AVX-512 kernel (`gather_one_tap_avx512`): per
    /// group of 64, 32 or 16 columns (the most whose taps fit the window), column `k`'s
    /// tap at index byte `k`.
    wide_one: WideGather,
}

/// Columns per AVX-512 two-tap gather group: sixteen 32-bit lanes in one 512-bit
/// register.
const WIDE_GROUP: usize = 16;

/// The widest window an AVX-512 group's taps may span: four 64-byte registers (packed
/// 4:2:2 luma at about 5:1 spans three).
const WIDE_WINDOW_MAX: usize = 256;

/// Byte-permute gathers for the AVX-512 kernels: per group of `columns` columns, a base
/// (the group's smallest tap) and a 64-byte index of each column's taps relative to it,
/// read from a window of whole 64-byte registers. Empty (`columns` 0) where some group
/// spans more than [`WIDE_WINDOW_MAX`] bytes.
#[derive(Default)]
struct WideGather {
    bases: Vec<u32>,
    index: Vec<[u8; 64]>,
    /// Columns per group; 0 when the tables are empty.
    columns: usize,
    /// The bytes each gather loads from its base: 64 to [`WIDE_WINDOW_MAX`].
    window: usize,
    /// One past the last byte the gathers read (the largest base + `window`).
    reach: usize,
}

impl WideGather {
    /// Refills the tables for the first of `group_sizes` whose groups all fit the
    /// window: tap set `t`'s tap of a group's column `k` goes to index byte
    /// `lane * k + 2 * t`. Left empty where none fits.
    fn rebuild(&mut self, taps: &[&[u32]], group_sizes: &[usize], lane: usize) {
        self.bases.clear();
        self.index.clear();
        self.columns = 0;
        self.window = 0;
        self.reach = 0;
        let n = taps.iter().map(|t| t.len()).min().unwrap_or(0);
        // The base and span of each whole group of `size` columns.
        let groups = |size: usize| {
            (0..n / size).map(move |g| {
                let all = || taps.iter().flat_map(|t| &t[g * size..(g + 1) * size]);
                let base = all().copied().min().unwrap_or(0);
                let span = all().map(|&t| (t - base) as usize).max().unwrap_or(0) + 1;
                (base, span)
            })
        };
        let Some(&size) = group_sizes
            .iter()
            .find(|&&size| groups(size).all(|(_, span)| span <= WIDE_WINDOW_MAX))
        else {
            return;
        };
        // Whole 64-byte registers: the fewest every group's taps fit in.
        let window = groups(size)
            .map(|(_, span)| span.next_multiple_of(64))
            .max();
        let Some(window) = window else { return };
        for (g, (base, _)) in groups(size).enumerate() {
            let mut index = [0u8; 64];
            for (t, taps) in taps.iter().enumerate() {
                for (k, &tap) in taps[g * size..(g + 1) * size].iter().enumerate() {
                    // Below `WIDE_WINDOW_MAX` (256, checked above), so each fits a byte.
                    index[lane * k + 2 * t] = (tap - base) as u8;
                }
            }
            self.bases.push(base);
            self.index.push(index);
            self.reach = self.reach.max(base as usize + window);
        }
        self.columns = size;
        self.window = window;
    }

    /// Whether the tables cover `n` columns' whole groups and both rows hold every
    /// gather's loads.
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    fn serves(&self, n: usize, rows: [&[u8]; 2]) -> bool {
        self.columns > 0
            && self.bases.len() * self.columns >= n - n % self.columns
            && rows.iter().all(|r| r.len() >= self.reach)
    }
}

/// The fixed-point unit of the bilinear path's weights: 2^14, so a weight pair multiplied
/// with a pair of samples below 2^15 stays inside 32 bits.
pub(crate) const Q14: i32 = 1 << 14;

/// The fixed-point form of a bilinear weight in 0..=1: `(Q14 - w, w)` as two 16-bit halves.
#[inline(always)]
pub(crate) fn weight_pair(weight: f32) -> i32 {
    let w = (weight * Q14 as f32).round().clamp(0.0, Q14 as f32) as i32;
    (Q14 - w) | (w << 16)
}

/// The vertical step of the fixed-point bilinear path, the formula every kernel
/// computes: source bytes `a` (top row) and `b` (bottom row) blended with the row's
/// weight pair `wy` ([`weight_pair`]) in Q14, rounded to 7 fractional bits (`Q7`, at most
/// 255 * 128). Blending first lets the portable kernel blend whole spans (vectorised)
/// and the wide ones blend only the taps they gather, with the same result.
#[inline(always)]
pub(crate) fn blend_q7(a: u8, b: u8, wy: i32) -> i16 {
    // `a * (Q14 - w) + b * w`, the pair product the wide kernels take (`vpmaddwd`), with
    // one multiply: the same integer.
    let (a, b) = (i32::from(a), i32::from(b));
    (((a << 14) + (b - a) * (wy >> 16) + (1 << 6)) >> 7) as i16
}

/// The horizontal step: a column's two blended taps `v0`, `v1` (Q7) with its weight pair
/// `wx`, in Q21, rounded back to Q7.
#[inline(always)]
pub(crate) fn lerp_q7(v0: i16, v1: i16, wx: i32) -> i16 {
    // `v0 * (Q14 - w) + v1 * w` with one multiply, as in `blend_q7`.
    let (v0, v1) = (i32::from(v0), i32::from(v1));
    (((v0 << 14) + (v1 - v0) * (wx >> 16) + (1 << 13)) >> 14) as i16
}

/// Columns per byte-shuffle group: four 32-bit lanes in one 128-bit register.
const SHUFFLE_GROUP: usize = 4;

/// Floats of slack after each blended plane span, so the wide kernels' loads at the
/// span's last taps (up to 8 floats from a first tap, which is at least 2 before the
/// span's end when it loads that many) stay inside the scratch row. The slack holds
/// whatever finite value the scratch held and is always multiplied by a weight of 0.
pub(crate) const PAIR_SLACK: usize = 8;

/// How a two-tap kernel loads each group's window (its `WINDOW` parameter): 32 bytes
/// from the group's base, 48 bytes, or 8 bytes from each of its four column bases
/// (`SpanTaps::two_column_bases`).
pub(super) const WINDOW_32: usize = 32;
pub(super) const WINDOW_48: usize = 48;
pub(super) const WINDOW_COLUMNS: usize = 0;

/// The bytes each column's load reads in the per-column form of the two-tap gathers
/// (`SpanTaps::two_column_bases`): one 64-bit load, four of them one 32-byte window.
const COLUMN_WINDOW: usize = 8;

/// Steps the wide kernels handle: 1 (planar and semi-planar luma), 2 (packed 4:2:2 luma,
/// semi-planar chroma pairs) and 4 (packed 4:2:2 chroma).
const PAIR_STEPS: [u32; 3] = [1, 2, 4];

impl SpanTaps {
    /// Refills the taps from absolute offsets (both `>= lo`, within `u32` of it) and
    /// the columns' second-tap weights.
    fn rebuild(&mut self, offsets: &[Vec<usize>; 2], lo: usize, weights: &[f32]) {
        let rel = |o: &usize| u32::try_from(o - lo).unwrap_or(u32::MAX);
        self.first.clear();
        self.second.clear();
        self.first.extend(offsets[0].iter().map(rel));
        self.second.extend(offsets[1].iter().map(rel));
        self.bound = self
            .first
            .iter()
            .chain(&self.second)
            .max()
            .map_or(0, |&m| m as usize + 1);

        let steps = || {
            self.first
                .iter()
                .zip(&self.second)
                .map(|(&a, &b)| b.wrapping_sub(a))
        };
        let step = steps().find(|&d| d != 0).unwrap_or(0);
        let uniform = PAIR_STEPS.contains(&step) && steps().all(|d| d == 0 || d == step);
        self.pair_step = if uniform { step } else { 0 };
        self.pair_weights.clear();
        if uniform {
            let kept = steps()
                .zip(weights)
                .map(|(d, &w)| if d == 0 { 0.0 } else { w });
            self.pair_weights.extend(kept);
        }
        self.max_first = self.first.iter().max().map_or(0, |&m| m as usize);
        self.same_taps = self.first == self.second;
        self.rebuild_shuffles();
        self.rebuild_two_tap(weights);
        // 64 columns of one tap fill a register with output bytes; fewer where their
        // taps spread wider (packed 4:2:2 at 3:1).
        self.wide_one
            .rebuild(&[&self.first], &[64, 32, WIDE_GROUP], 1);
        self.wide_two
            .rebuild(&[&self.first, &self.second], &[WIDE_GROUP], 4);
    }

    /// Fills the two-tap gathers and weights of the fixed-point bilinear path: one window
    /// per group where every group's taps fit 48 bytes, else one 8-byte window per
    /// column (`two_column_bases`) where every column's two taps fit 8 bytes; the masks
    /// left empty where neither holds.
    fn rebuild_two_tap(&mut self, weights: &[f32]) {
        self.two_bases.clear();
        self.two_column_bases.clear();
        #[cfg(target_arch = "x86_64")]
        {
            self.two_masks.clear();
            self.two_masks_high.clear();
            self.two_masks_far.clear();
        }
        #[cfg(all(target_arch = "aarch64", target_feature = "neon"))]
        self.two_index.clear();
        self.two_window = WINDOW_32;
        self.two_weights.clear();
        self.two_reach = 0;
        self.two_weights
            .extend(weights.iter().map(|&w| weight_pair(w)));
        let groups = || {
            self.first
                .chunks_exact(SHUFFLE_GROUP)
                .zip(self.second.chunks_exact(SHUFFLE_GROUP))
        };
        // The window every group's taps fit in: two 16-byte loads, or three; or, past
        // 48 bytes (a downscale of about 12:1 and more), one 8-byte load per column.
        let mut window = WINDOW_32;
        for (first, second) in groups() {
            if window == WINDOW_COLUMNS {
                break;
            }
            let both = || first.iter().chain(second);
            let base = both().copied().min().unwrap_or(0);
            match both().map(|&t| t - base).max().unwrap_or(0) {
                0..32 => {}
                32..48 => window = WINDOW_48,
                _ => window = WINDOW_COLUMNS,
            }
        }
        let per_column = window == WINDOW_COLUMNS;
        if per_column {
            let spread = |(&a, &b): (&u32, &u32)| a.abs_diff(b) as usize;
            let columns = self.first.len() - self.first.len() % SHUFFLE_GROUP;
            if self.first[..columns]
                .iter()
                .zip(&self.second)
                .any(|c| spread(c) >= COLUMN_WINDOW)
            {
                return;
            }
        }
        let mut reach = 0;
        for (first, second) in groups() {
            let base = first.iter().chain(second).copied().min().unwrap_or(0);
            let mut windows = [[0x80u8; 16]; 3];
            let mut index = [0xFFu8; 16];
            for (k, (&a, &b)) in first.iter().zip(second).enumerate() {
                // Per column the window's bytes `8k..8k + 8` hold the 8 bytes from its
                // smaller tap, so the same masks and index serve as for one window.
                let column_base = a.min(b);
                let start = if per_column {
                    self.two_column_bases.push(column_base);
                    reach = reach.max(column_base as usize + COLUMN_WINDOW);
                    COLUMN_WINDOW * k
                } else {
                    (column_base - base) as usize
                };
                for (at, tap) in [(4 * k, a), (4 * k + 2, b)] {
                    // Below 48 (checked above; below 32 per column).
                    let d = start + (tap - column_base) as usize;
                    windows[d / 16][at] = (d % 16) as u8;
                    index[at] = d as u8;
                }
            }
            self.two_bases.push(base);
            #[cfg(target_arch = "x86_64")]
            {
                let [low, high, far] = windows;
                self.two_masks.push(low);
                self.two_masks_high.push(high);
                if window == WINDOW_48 {
                    self.two_masks_far.push(far);
                }
            }
            #[cfg(all(target_arch = "aarch64", target_feature = "neon"))]
            self.two_index.push(index);
            // Each target keeps one of the two forms.
            let _ = (windows, index);
            if !per_column {
                reach = reach.max(base as usize + window);
            }
        }
        self.two_window = window;
        self.two_reach = reach;
    }

    /// Whether the fixed-point bilinear path can take this channel's columns: every
    /// whole group has its two-tap masks.
    fn has_two_tap(&self, n: usize) -> bool {
        self.two_bases.len() == n / SHUFFLE_GROUP && self.two_weights.len() >= n
    }

    /// Column `j`'s fixed-point bilinear value (`blend_q7` of its taps in the source rows
    /// `top` and `bottom`, then `lerp_q7`) into `out[j]`, with the two-tap gathers of
    /// `simd` where both rows are long enough for their loads; false (nothing written)
    /// where `simd` has none or a row is too short. Both rows may run past the span (to
    /// the end of their buffer). Without `bottom` both taps' rows are `top`: each column
    /// is `blend_q7` of its two taps with its weight pair, the integer the two steps give
    /// for a row blended with itself, from one gather instead of two.
    #[inline(always)]
    fn bilinear_q7_wide(
        &self,
        simd: Simd,
        top: &[u8],
        bottom: Option<&[u8]>,
        wy: i32,
        out: &mut [i16],
    ) -> bool {
        let n = out.len();
        let lanes = match simd {
            Simd::Portable => return false,
            #[cfg(target_arch = "x86_64")]
            Simd::Avx2 | Simd::Avx512 => 2 * SHUFFLE_GROUP,
            #[cfg(all(target_arch = "aarch64", target_feature = "neon"))]
            Simd::Neon => SHUFFLE_GROUP,
        };
        let whole = n - n % lanes;
        if self.two_bases.len() * SHUFFLE_GROUP < whole
            || self.two_weights.len() < n
            || top.len() < self.two_reach.max(self.bound)
            || bottom.is_some_and(|b| b.len() < self.two_reach.max(self.bound))
            || self.first.len() < n
            || self.second.len() < n
        {
            return false;
        }
        // Columns the AVX-512 kernel takes (whole groups of 16, where its tables exist
        // and both rows hold its wider loads); the AVX2 kernel takes the rest of `whole`.
        #[cfg(target_arch = "x86_64")]
        let wide = if simd == Simd::Avx512 && self.wide_two.serves(n, [top, bottom.unwrap_or(top)])
        {
            n - n % WIDE_GROUP
        } else {
            0
        };
        #[cfg(target_arch = "x86_64")]
        if wide > 0 {
            let groups = wide / WIDE_GROUP;
            let g = &self.wide_two;
            let (bases, index) = (&g.bases[..groups], &g.index[..groups]);
            let (weights, out) = (&self.two_weights[..wide], &mut out[..wide]);
            // SAFETY: AVX-512 F, BW and VBMI are available (`Simd::Avx512` is only chosen
            // after detecting them); indices and weights match the `groups` groups (the
            // tables cover them: `serves`), the output holds 16 values per group, every
            // index byte is below the window, and every `base + window <= reach <=` each
            // row's length (`serves`).
            unsafe {
                use super::x86::bilinear_q7_avx512 as kernel;
                // With `ONE_ROW` (no bottom row) the kernel reads `top` only.
                let (t, b) = (top, bottom.unwrap_or(top));
                match (g.window, bottom.is_none()) {
                    (64, false) => kernel::<1, false>(t, b, bases, index, weights, wy, out),
                    (128, false) => kernel::<2, false>(t, b, bases, index, weights, wy, out),
                    (192, false) => kernel::<3, false>(t, b, bases, index, weights, wy, out),
                    (_, false) => kernel::<4, false>(t, b, bases, index, weights, wy, out),
                    (64, true) => kernel::<1, true>(t, b, bases, index, weights, wy, out),
                    (128, true) => kernel::<2, true>(t, b, bases, index, weights, wy, out),
                    (192, true) => kernel::<3, true>(t, b, bases, index, weights, wy, out),
                    (_, true) => kernel::<4, true>(t, b, bases, index, weights, wy, out),
                }
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let wide = 0;
        if whole > wide {
            // Both multiples of `2 * SHUFFLE_GROUP`: the AVX2 kernel's groups start at
            // `wide / SHUFFLE_GROUP`, an even count of them.
            let groups = wide / SHUFFLE_GROUP..whole / SHUFFLE_GROUP;
            let window = self.two_window;
            let per_column = window == WINDOW_COLUMNS;
            let bases = if per_column {
                &self.two_column_bases[SHUFFLE_GROUP * groups.start..SHUFFLE_GROUP * groups.end]
            } else {
                &self.two_bases[groups.clone()]
            };
            let weights = &self.two_weights[wide..whole];
            let out = &mut out[wide..whole];
            match simd {
                #[cfg(target_arch = "x86_64")]
                // SAFETY: AVX2 is available (`Simd::Avx2` and `Simd::Avx512` are only
                // chosen after detecting it); the number of groups is even (`whole - wide`
                // is a multiple of 8), masks (the far ones too with `WINDOW_48`), bases
                // (four per group with `WINDOW_COLUMNS`) and weights match it, the output
                // holds `whole - wide` values, and every `base + 32` (`+ 48` with
                // `WINDOW_48`, column base + 8 with `WINDOW_COLUMNS`) `<= two_reach <=`
                // each row's length (checked above).
                Simd::Avx2 | Simd::Avx512 => unsafe {
                    let masks = [
                        &self.two_masks[groups.clone()],
                        &self.two_masks_high[groups.clone()],
                        if window == WINDOW_48 {
                            &self.two_masks_far[groups]
                        } else {
                            &[][..]
                        },
                    ];
                    use super::x86::bilinear_q7 as kernel;
                    // With `ONE_ROW` (no bottom row) the kernel reads `top` only.
                    let b = bottom.unwrap_or(top);
                    match (window, bottom.is_none()) {
                        (WINDOW_48, false) => {
                            kernel::<WINDOW_48, false>(top, b, bases, masks, weights, wy, out)
                        }
                        (WINDOW_COLUMNS, false) => {
                            kernel::<WINDOW_COLUMNS, false>(top, b, bases, masks, weights, wy, out)
                        }
                        (_, false) => {
                            kernel::<WINDOW_32, false>(top, b, bases, masks, weights, wy, out)
                        }
                        (WINDOW_48, true) => {
                            kernel::<WINDOW_48, true>(top, b, bases, masks, weights, wy, out)
                        }
                        (WINDOW_COLUMNS, true) => {
                            kernel::<WINDOW_COLUMNS, true>(top, b, bases, masks, weights, wy, out)
                        }
                        (_, true) => {
                            kernel::<WINDOW_32, true>(top, b, bases, masks, weights, wy, out)
                        }
                    }
                },
                #[cfg(all(target_arch = "aarch64", target_feature = "neon"))]
                // SAFETY: as for AVX2, with any number of groups (NEON is baseline), one
                // index per group, each below the window it reads (48 with `WINDOW_48`,
                // else 32).
                Simd::Neon => unsafe {
                    use super::neon::{bilinear_q7, bilinear_q7_columns, bilinear_q7_one_row};
                    let index = &self.two_index[groups];
                    match (window, bottom) {
                        (WINDOW_48, Some(b)) => {
                            bilinear_q7::<WINDOW_48, false>(top, b, bases, index, weights, wy, out)
                        }
                        (WINDOW_COLUMNS, Some(b)) => {
                            bilinear_q7_columns(top, b, bases, index, weights, wy, out)
                        }
                        (_, Some(b)) => {
                            bilinear_q7::<WINDOW_32, false>(top, b, bases, index, weights, wy, out)
                        }
                        (WINDOW_48, None) => {
                            bilinear_q7_one_row::<WINDOW_48>(top, bases, index, weights, out)
                        }
                        (WINDOW_COLUMNS, None) => {
                            bilinear_q7_one_row::<WINDOW_COLUMNS>(top, bases, index, weights, out)
                        }
                        (_, None) => {
                            bilinear_q7_one_row::<WINDOW_32>(top, bases, index, weights, out)
                        }
                    }
                },
                Simd::Portable => {}
            }
        }
        let columns = self.first[whole..n]
            .iter()
            .zip(&self.second[whole..n])
            .zip(&self.two_weights[whole..n]);
        for (o, ((&f, &s), &wx)) in out[whole..].iter_mut().zip(columns) {
            let (f, s) = (f as usize, s as usize);
            *o = match bottom {
                Some(bottom) => lerp_q7(
                    blend_q7(top[f], bottom[f], wy),
                    blend_q7(top[s], bottom[s], wy),
                    wx,
                ),
                None => blend_q7(top[f], top[s], wx),
            };
        }
        true
    }

    /// `lerp_q7` of every column from a row of blended taps (`blend_q7` of a plane's
    /// span, index 0 at the span's start).
    #[inline(always)]
    fn lerp_q7_row(&self, row: &[i16], out: &mut [i16]) {
        self.each_column_pair(row, out, lerp_q7);
    }

    /// `blend_q7` of every column's two taps in the source row `row` (index 0 at the
    /// span's start) with its weight pair: the fixed-point bilinear value of a column
    /// whose two rows are this one row (`bilinear_q7_wide` without a bottom row).
    #[inline(always)]
    fn blend_q7_row(&self, row: &[u8], out: &mut [i16]) {
        self.each_column_pair(row, out, blend_q7);
    }

    /// `out[j] = step(row[first[j]], row[second[j]], two_weights[j])` for every column.
    #[inline(always)]
    fn each_column_pair<T: Copy>(
        &self,
        row: &[T],
        out: &mut [i16],
        step: impl Fn(T, T, i32) -> i16,
    ) {
        let n = out.len();
        assert!(
            row.len() >= self.bound
                && self.first.len() >= n
                && self.second.len() >= n
                && self.two_weights.len() >= n
        );
        let columns = self.first[..n]
            .iter()
            .zip(&self.second[..n])
            .zip(&self.two_weights[..n]);
        for (o, ((&f, &s), &wx)) in out.iter_mut().zip(columns) {
            // SAFETY: `f, s < self.bound <= row.len()` (asserted above).
            let (a, b) = unsafe {
                (
                    *row.get_unchecked(f as usize),
                    *row.get_unchecked(s as usize),
                )
            };
            *o = step(a, b, wx);
        }
    }

    /// The fixed-point bilinear value of columns whose two taps are one sample
    /// (`same_taps`) of the one row `row`: `blend_q7` of a byte with itself is the byte in
    /// Q7, so the one-tap byte gathers serve (into `bytes`, at least `out.len()` long).
    /// Out of line: inlined into `sample_row_q7` it cost the portable build's other rows
    /// instructions (1.6% more for YUYV → 416 planar i8 in the aarch64 lane's count).
    #[inline(never)]
    fn one_sample_q7(&self, simd: Simd, row: &[u8], bytes: &mut [u8], out: &mut [i16]) {
        let bytes = &mut bytes[..out.len()];
        self.nearest_u8(simd, row, bytes);
        for (o, &b) in out.iter_mut().zip(&*bytes) {
            *o = i16::from(b) << 7;
        }
    }

    /// Fills `shuffle_bases` and the shuffle masks from `first` (all left empty when a
    /// group of columns spans more than two 16-byte loads).
    fn rebuild_shuffles(&mut self) {
        self.shuffle_bases.clear();
        self.shuffle_masks.clear();
        self.shuffle_masks_high.clear();
        self.byte_masks.clear();
        self.byte_masks_high.clear();
        self.shuffle_two_registers = false;
        self.shuffle_reach = 0;
        let mut reach = 0;
        let mut high_needed = false;
        for (g, group) in self.first.chunks_exact(SHUFFLE_GROUP).enumerate() {
            let base = group.iter().copied().min().unwrap_or(0);
            let top = group.iter().copied().max().unwrap_or(0);
            if top - base >= 32 {
                self.shuffle_bases.clear();
                self.shuffle_masks.clear();
                self.shuffle_masks_high.clear();
                self.byte_masks.clear();
                self.byte_masks_high.clear();
                return;
            }
            let (mut low, mut high) = ([0x80u8; 16], [0x80u8; 16]);
            let (mut byte_low, mut byte_high) = ([0x80u8; 16], [0x80u8; 16]);
            // The aarch64 form: every tap indexes the 32-byte window (see
            // `shuffle_two_registers`).
            let (mut index, mut byte_index) = ([0x80u8; 16], [0x80u8; 16]);
            let at = SHUFFLE_GROUP * (g % SHUFFLE_GROUP);
            for (k, &tap) in group.iter().enumerate() {
                let d = (tap - base) as u8;
                index[4 * k] = d;
                byte_index[at + k] = d;
                if d < 16 {
                    low[4 * k] = d;
                    byte_low[at + k] = d;
                } else {
                    high[4 * k] = d - 16;
                    byte_high[at + k] = d - 16;
                    high_needed = true;
                }
            }
            self.shuffle_bases.push(base);
            if cfg!(all(target_arch = "aarch64", target_feature = "neon")) {
                self.shuffle_masks.push(index);
                self.byte_masks.push(byte_index);
            } else {
                self.shuffle_masks.push(low);
                self.shuffle_masks_high.push(high);
                self.byte_masks.push(byte_low);
                self.byte_masks_high.push(byte_high);
            }
            reach = reach.max(base as usize);
        }
        self.shuffle_two_registers = high_needed;
        if high_needed {
            self.shuffle_reach = reach + 32;
        } else {
            self.shuffle_masks_high.clear();
            self.byte_masks_high.clear();
            self.shuffle_reach = reach + 16;
        }
    }

    /// The one-tap AVX-512 gathers of the whole groups of `out`'s columns, where `simd`
    /// is AVX-512 and its tables serve this row: the number of columns written, or None
    /// (nothing written).
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    fn one_tap_avx512<T: super::x86::GatheredElement>(
        &self,
        simd: Simd,
        row: &[u8],
        out: &mut [T],
    ) -> Option<usize> {
        let n = out.len();
        if simd != Simd::Avx512 || !self.wide_one.serves(n, [row, row]) {
            return None;
        }
        let g = &self.wide_one;
        let whole = n - n % g.columns;
        let groups = whole / g.columns;
        let (bases, index) = (&g.bases[..groups], &g.index[..groups]);
        let out = &mut out[..whole];
        // SAFETY: AVX-512 F, BW and VBMI are available (`Simd::Avx512` is only chosen
        // after detecting them); the tables cover the `groups` whole groups (`serves`) of
        // 16, 32 or 64 columns, the output holds `columns` elements per group, every index
        // byte is below the window, and every `base + window <= reach <= row.len()`
        // (`serves`).
        unsafe {
            use super::x86::gather_one_tap_avx512 as kernel;
            match g.window {
                64 => kernel::<T, 1>(row, bases, index, g.columns, out),
                128 => kernel::<T, 2>(row, bases, index, g.columns, out),
                192 => kernel::<T, 3>(row, bases, index, g.columns, out),
                _ => kernel::<T, 4>(row, bases, index, g.columns, out),
            }
        }
        Some(whole)
    }

    /// `out[j] = row[first[j]]` as bytes, with the shuffle gathers of `simd` where it has
    /// them (16 columns per step) and the scalar gather for the rest: the sampling of the
    /// fixed-point path (`fixed`). `row` may run past the span, as for `nearest_bytes`.
    #[inline(always)]
    fn nearest_u8(&self, simd: Simd, row: &[u8], out: &mut [u8]) {
        let n = out.len();
        assert!(row.len() >= self.bound && self.first.len() >= n);
        #[cfg(target_arch = "x86_64")]
        if let Some(whole) = self.one_tap_avx512(simd, row, out) {
            // The rest: fewer than a group, through the AVX2 kernel from here.
            return self.nearest_u8_from(Simd::Avx2, row, out, whole);
        }
        self.nearest_u8_from(simd, row, out, 0)
    }

    /// [`SpanTaps::nearest_u8`] of columns `done..` (a multiple of 16) with the 16-byte
    /// shuffles of `simd`, the rest tap by tap.
    #[inline(always)]
    fn nearest_u8_from(&self, simd: Simd, row: &[u8], out: &mut [u8], done: usize) {
        let n = out.len();
        assert!(row.len() >= self.bound && self.first.len() >= n && done.is_multiple_of(16));
        const STEP: usize = 4 * SHUFFLE_GROUP;
        let whole = (n - n % STEP).max(done);
        let groups = done / SHUFFLE_GROUP..whole / SHUFFLE_GROUP;
        let wide = simd.pair_lanes().is_some()
            && !groups.is_empty()
            && self.byte_masks.len() >= groups.end
            && row.len() >= self.shuffle_reach;
        let whole = if wide { whole } else { done };
        if wide {
            let (bases, masks) = (
                &self.shuffle_bases[groups.clone()],
                &self.byte_masks[groups.clone()],
            );
            let out = &mut out[done..whole];
            match simd {
                #[cfg(target_arch = "x86_64")]
                // SAFETY: AVX2 is available (`Simd::Avx2` and `Simd::Avx512` are only
                // chosen after detecting it); the number of groups is a multiple of 4
                // (`done` and `whole` are multiples of 16), the output holds 4 bytes per
                // group, `high` (if any) has a mask per group, and every `base + 16 <=
                // shuffle_reach <= row.len()` (`+ 32` with `high`).
                Simd::Avx2 | Simd::Avx512 => unsafe {
                    let high =
                        (!self.byte_masks_high.is_empty()).then(|| &self.byte_masks_high[groups]);
                    super::x86::gather_bytes_u8(row, bases, masks, high, out)
                },
                #[cfg(all(target_arch = "aarch64", target_feature = "neon"))]
                // SAFETY: as for AVX2 (NEON is part of the target's baseline), with every
                // mask byte below 32 or 0x80, and below 16 or 0x80 unless
                // `shuffle_two_registers` (then `base + 32 <= shuffle_reach`).
                Simd::Neon => unsafe {
                    use super::neon::gather_bytes_u8 as kernel;
                    if self.shuffle_two_registers {
                        kernel::<true>(row, bases, masks, out)
                    } else {
                        kernel::<false>(row, bases, masks, out)
                    }
                },
                // Not reached (`wide` needs `pair_lanes`), and the scalar loop below
                // covers every column when `whole` is 0.
                Simd::Portable => {}
            }
        }
        for (o, &i0) in out[whole..].iter_mut().zip(&self.first[whole..n]) {
            // SAFETY: as in `lerp`: `i0 < self.bound <= row.len()` (asserted above).
            *o = unsafe { *row.get_unchecked(i0 as usize) };
        }
    }

    /// [`SpanTaps::nearest`] of a byte row with the shuffle gathers of `simd` (AVX2 or
    /// NEON): one 16-byte load (two, for groups wider than that) and one byte shuffle
    /// (two) fetch a group's four taps, where the compiler's code loads and inserts each
    /// byte alone (the largest single cost of a 3:1 NV12 downscale in the profile). `row`
    /// may run past the span the taps need (to the end of its buffer): the loads read up
    /// to 31 bytes after a group's first tap, and rows too short for that (the last rows
    /// of a buffer) take the scalar gather. Exact either way (a byte converts to f32
    /// exactly), so bit-identical to `nearest`.
    #[inline(always)]
    fn nearest_bytes(&self, simd: Simd, row: &[u8], out: &mut [f32]) {
        #[cfg(target_arch = "x86_64")]
        if let Some(whole) = self.one_tap_avx512(simd, row, out) {
            // The rest: fewer than a group, through the AVX2 kernel from here.
            return self.nearest_bytes_from(Simd::Avx2, row, out, whole);
        }
        self.nearest_bytes_from(simd, row, out, 0)
    }

    /// [`SpanTaps::nearest_bytes`] of columns `done..` (a multiple of 16) with the 16-byte
    /// shuffles of `simd`, the rest tap by tap.
    #[inline(always)]
    fn nearest_bytes_from(&self, simd: Simd, row: &[u8], out: &mut [f32], done: usize) {
        let n = out.len();
        assert!(self.first.len() >= n && done.is_multiple_of(16));
        let Some(lanes) = simd.pair_lanes() else {
            return self.nearest(row, out);
        };
        let whole = (n - n % lanes).max(done);
        let groups = done / SHUFFLE_GROUP..whole / SHUFFLE_GROUP;
        let wide = !groups.is_empty()
            && self.shuffle_bases.len() >= groups.end
            && row.len() >= self.shuffle_reach;
        let whole = if wide { whole } else { done };
        if wide {
            let (bases, masks) = (
                &self.shuffle_bases[groups.clone()],
                &self.shuffle_masks[groups.clone()],
            );
            let out = &mut out[done..whole];
            match simd {
                #[cfg(target_arch = "x86_64")]
                // SAFETY: AVX2 is available (`Simd::Avx2` and `Simd::Avx512` are only
                // chosen after detecting it); the number of groups is a multiple of 2
                // (`done` and `whole` are multiples of 8 lanes), `out` holds 4 floats per
                // group, `high` (if any) has a mask per group, and every `base + 16 <=
                // shuffle_reach <= row.len()` (`base + 32` with `high`).
                Simd::Avx2 | Simd::Avx512 => unsafe {
                    let high = (!self.shuffle_masks_high.is_empty())
                        .then(|| &self.shuffle_masks_high[groups]);
                    super::x86::gather_bytes(row, bases, masks, high, out)
                },
                #[cfg(all(target_arch = "aarch64", target_feature = "neon"))]
                // SAFETY: as for AVX2 (NEON is part of the target's baseline; its kernel
                // takes any number of groups), with every mask byte below 32 or 0x80, and
                // below 16 or 0x80 unless `shuffle_two_registers` (then `base + 32 <=
                // shuffle_reach`).
                Simd::Neon => unsafe {
                    use super::neon::gather_bytes as kernel;
                    if self.shuffle_two_registers {
                        kernel::<true>(row, bases, masks, out)
                    } else {
                        kernel::<false>(row, bases, masks, out)
                    }
                },
                // Not reached (`pair_lanes` is None for it).
                Simd::Portable => {}
            }
        }
        for (o, &i0) in out[whole..].iter_mut().zip(&self.first[whole..n]) {
            *o = f32::from(row[i0 as usize]);
        }
    }

    /// [`SpanTaps::lerp`] of an f32 row with the pair kernels of `simd` (AVX2 or NEON):
    /// step 1 loads both taps of a column as one pair, step 2 as one 4-float load; other
    /// steps, and `Simd::Portable`, take the two-index form. Bit-identical to `lerp`
    /// either way.
    #[inline(always)]
    fn lerp_wide(&self, simd: Simd, row: &[f32], weights: &[f32], out: &mut [f32]) {
        let n = out.len();
        let Some(lanes) = simd.pair_lanes() else {
            return self.lerp(row, weights, out);
        };
        let reach = match self.pair_step {
            1 => 2,
            2 => 4,
            _ => return self.lerp(row, weights, out),
        };
        if row.len() < self.max_first + reach || self.first.len() < n || self.pair_weights.len() < n
        {
            return self.lerp(row, weights, out);
        }
        let whole = n - n % lanes;
        let (first, w) = (&self.first[..whole], &self.pair_weights[..whole]);
        let out_whole = &mut out[..whole];
        match simd {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: AVX2 is available (`Simd::Avx2` and `Simd::Avx512` are only chosen
            // after detecting it); `first`, `w` and the output hold `whole` elements, a
            // multiple of 8; every `first[j] + reach - 1 < max_first + reach <= row.len()`,
            // and each kernel reads `reach` floats.
            Simd::Avx2 | Simd::Avx512 => unsafe {
                if self.pair_step == 1 {
                    super::x86::lerp_adjacent(row, first, w, out_whole);
                } else {
                    super::x86::lerp_quads::<2>(row, first, w, out_whole, None);
                }
            },
            #[cfg(all(target_arch = "aarch64", target_feature = "neon"))]
            // SAFETY: as for AVX2, with `whole` a multiple of 4 (`neon::LANES`); NEON is
            // part of the target's baseline.
            Simd::Neon => unsafe {
                if self.pair_step == 1 {
                    super::neon::lerp_adjacent(row, first, w, out_whole);
                } else {
                    super::neon::lerp_quads::<2>(row, first, w, out_whole, None);
                }
            },
            // Not reached (`pair_lanes` is None for it), but correct if it were.
            Simd::Portable => self.lerp(row, &weights[..whole], out_whole),
        }
        let step = self.pair_step as usize;
        let tail = self.first[whole..n]
            .iter()
            .zip(&self.pair_weights[whole..n]);
        for (o, (&f, &w)) in out[whole..].iter_mut().zip(tail) {
            let (x0, x1) = (row[f as usize], row[f as usize + step]);
            *o = x0 + (x1 - x0) * w;
        }
    }

    /// `out[j] = lerp(row[first[j]], row[second[j]], weights[j])`.
    #[inline(always)]
    fn lerp<S: Copy + Into<f32>>(&self, row: &[S], weights: &[f32], out: &mut [f32]) {
        let n = out.len();
        assert!(row.len() >= self.bound && self.first.len() >= n && self.second.len() >= n);
        let taps = self.first[..n].iter().zip(&self.second[..n]);
        for ((o, (&i0, &i1)), &w) in out.iter_mut().zip(taps).zip(weights) {
            // SAFETY: every stored index is below `self.bound` (it is one past their
            // maximum, see `rebuild`), and `row.len() >= self.bound` was asserted above.
            let (x0, x1): (f32, f32) = unsafe {
                (
                    (*row.get_unchecked(i0 as usize)).into(),
                    (*row.get_unchecked(i1 as usize)).into(),
                )
            };
            *o = x0 + (x1 - x0) * w;
        }
    }

    /// `out[j] = row[first[j]]` (every second tap has weight 0).
    #[inline(always)]
    fn nearest<S: Copy + Into<f32>>(&self, row: &[S], out: &mut [f32]) {
        let n = out.len();
        assert!(row.len() >= self.bound && self.first.len() >= n);
        for (o, &i0) in out.iter_mut().zip(&self.first[..n]) {
            // SAFETY: as in `lerp`: `i0 < self.bound <= row.len()`.
            *o = unsafe { *row.get_unchecked(i0 as usize) }.into();
        }
    }
}

/// Per destination column (of the valid region), the two taps' offsets for each channel
/// along the source axis that follows destination columns, and the second tap's weight;
/// plus, for the untransposed case, the span of each source plane the columns touch and
/// each channel's taps relative to that span.
#[derive(Default)]
pub(crate) struct ColumnTables {
    offsets: [[Vec<usize>; 2]; 3],
    weights: Vec<f32>,
    /// Untransposed only: the taps of `offsets` relative to their plane's span.
    span_taps: [SpanTaps; 3],
    /// Which of `planes` each channel reads.
    channel_plane: [usize; 3],
    planes: [PlaneSpan; 3],
    plane_count: usize,
    blend_len: usize,
    /// Every column's second tap has weight 0 (nearest, or a scale that lands on pixel
    /// centres): one tap per channel suffices.
    single_tap: bool,
    /// Channels `(a, b)` whose samples alternate in one plane, `b` right after `a`.
    interleaved_pair: Option<(usize, usize)>,
    /// What the tables were last built for: a camera loop converts the same geometry
    /// every frame, and rebuilding cost about 4% of a 416x416 conversion.
    built_for: Option<(Plan, [ChannelSource; 3], usize)>,
}

impl ColumnTables {
    /// Refills the tables for `plan` (no allocation once capacities suffice).
    pub fn build(&mut self, plan: &Plan, channels: &[ChannelSource; 3], count: usize) {
        if self
            .built_for
            .as_ref()
            .is_some_and(|(p, ch, n)| (p, ch, *n) == (plan, channels, count))
        {
            return;
        }
        // Cleared first: if anything below panicked, stale tables must not look valid.
        self.built_for = None;
        let [vx, _, vw, _] = plan.valid;
        // The source axis driven by destination columns: x normally, y when transposed.
        let axis = if plan.transposed { 1 } else { 0 };
        self.weights.clear();
        for c in 0..3 {
            for t in 0..2 {
                self.offsets[c][t].clear();
            }
        }
        for dx in vx..vx + vw {
            let taps = plan.taps(axis, dx);
            self.weights.push(taps.weight as f32);
            for (c, ch) in channels.iter().enumerate().take(count) {
                self.offsets[c][0].push(ch.axis_offset(axis, taps.i0));
                self.offsets[c][1].push(ch.axis_offset(axis, taps.i1));
            }
        }
        self.single_tap = self.weights.iter().all(|&w| w == 0.0);
        self.plane_count = 0;
        self.blend_len = 0;
        if plan.transposed {
            self.built_for = Some((plan.clone(), *channels, count));
            return;
        }
        // Group channels by the plane they read, and find the bytes each plane's row
        // needs: a destination row blends exactly that span of its two source rows.
        for c in 0..count {
            let ch = &channels[c];
            let lo = self.offsets[c]
                .iter()
                .flat_map(|t| t.iter())
                .min()
                .copied()
                .unwrap_or(0);
            let hi = self.offsets[c]
                .iter()
                .flat_map(|t| t.iter())
                .max()
                .map_or(0, |m| m + 1);
            let same = (0..self.plane_count).find(|&p| {
                let other = &channels[self.planes[p].channel];
                (other.buffer, other.plane_offset) == (ch.buffer, ch.plane_offset)
            });
            match same {
                Some(p) => {
                    self.planes[p].lo = self.planes[p].lo.min(lo);
                    self.planes[p].hi = self.planes[p].hi.max(hi);
                    self.planes[p].channels += 1;
                    self.channel_plane[c] = p;
                }
                None => {
                    self.planes[self.plane_count] = PlaneSpan {
                        channel: c,
                        lo,
                        hi,
                        scratch: 0,
                        channels: 1,
                        blend: false,
                    };
                    self.channel_plane[c] = self.plane_count;
                    self.plane_count += 1;
                }
            }
        }
        for p in &mut self.planes[..self.plane_count] {
            p.blend = p.hi - p.lo <= BLEND_SPAN_PER_TAP * vw as usize * p.channels;
            if p.blend {
                p.scratch = self.blend_len;
                self.blend_len += p.hi - p.lo + PAIR_SLACK;
            }
        }
        for c in 0..count {
            let lo = self.planes[self.channel_plane[c]].lo;
            self.span_taps[c].rebuild(&self.offsets[c], lo, &self.weights);
        }
        // Two channels interleaved in one plane, the second half a step after the first
        // (CbCr of NV12/NV16 and twins: step 2; the chroma of packed 4:2:2: step 4, Cr 2
        // after Cb): one or two loads per column hold both taps of both.
        self.interleaved_pair = None;
        if count == 3 && self.channel_plane[1] == self.channel_plane[2] {
            let (a, b) = (&self.span_taps[1], &self.span_taps[2]);
            let (first, second) = if a.first.first() < b.first.first() {
                (1, 2)
            } else {
                (2, 1)
            };
            let (f, s) = (&self.span_taps[first], &self.span_taps[second]);
            let half = f.pair_step / 2;
            if (f.pair_step == 2 || f.pair_step == 4)
                && s.pair_step == f.pair_step
                && f.pair_weights == s.pair_weights
                && f.first.iter().zip(&s.first).all(|(&x, &y)| y == x + half)
            {
                self.interleaved_pair = Some((first, second));
            }
        }
        self.built_for = Some((plan.clone(), *channels, count));
    }

    /// [`SpanTaps::lerp`] of the interleaved channels `a` and `b` (see
    /// `interleaved_pair`) in one pass with the quad kernels of `simd` (AVX2 or NEON).
    /// Bit-identical to two `lerp`s.
    #[inline(always)]
    fn lerp_interleaved_wide(
        &self,
        simd: Simd,
        a: usize,
        b: usize,
        row: &[f32],
        out_a: &mut [f32],
        out_b: &mut [f32],
    ) {
        let (ta, tb) = (&self.span_taps[a], &self.span_taps[b]);
        let n = out_a.len();
        // Floats read from each first tap: [a0 b0 a1 b1] at step 2; [a0 . b0 . a1 . b1 .]
        // at step 4.
        let reach = if ta.pair_step == 2 { 4 } else { 8 };
        let lanes = match simd.pair_lanes() {
            Some(lanes)
                if out_b.len() == n
                    && row.len() >= ta.max_first + reach
                    && ta.first.len() >= n
                    && ta.pair_weights.len() >= n =>
            {
                lanes
            }
            _ => {
                let weights = &self.weights[..n];
                ta.lerp(row, weights, out_a);
                tb.lerp(row, weights, out_b);
                return;
            }
        };
        let whole = n - n % lanes;
        let (first, w) = (&ta.first[..whole], &ta.pair_weights[..whole]);
        let (oa, ob) = (&mut out_a[..whole], &mut out_b[..whole]);
        match simd {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: AVX2 is available (`Simd::Avx2` and `Simd::Avx512` are only chosen
            // after detecting it); the slices passed all hold `whole` elements, a multiple
            // of 8; every `first[j] + reach - 1 < max_first + reach <= row.len()`, and the
            // kernel reads `reach` floats from each first tap (`interleaved_pair` holds
            // only for steps 2 and 4 with `b` half a step after `a`).
            Simd::Avx2 | Simd::Avx512 => unsafe {
                if ta.pair_step == 2 {
                    super::x86::lerp_quads::<2>(row, first, w, oa, Some(ob));
                } else {
                    super::x86::lerp_quads::<4>(row, first, w, oa, Some(ob));
                }
            },
            #[cfg(all(target_arch = "aarch64", target_feature = "neon"))]
            // SAFETY: as for AVX2, with `whole` a multiple of 4 (`neon::LANES`); NEON is
            // part of the target's baseline.
            Simd::Neon => unsafe {
                if ta.pair_step == 2 {
                    super::neon::lerp_quads::<2>(row, first, w, oa, Some(ob));
                } else {
                    super::neon::lerp_quads::<4>(row, first, w, oa, Some(ob));
                }
            },
            // Not reached (`pair_lanes` is None for it), but correct if it were.
            Simd::Portable => {
                ta.lerp(row, &self.weights[..whole], oa);
                tb.lerp(row, &self.weights[..whole], ob);
            }
        }
        let (step, half) = (ta.pair_step as usize, ta.pair_step as usize / 2);
        let tail = ta.first[whole..n].iter().zip(&ta.pair_weights[whole..n]);
        let outs = out_a[whole..].iter_mut().zip(&mut out_b[whole..]);
        for ((oa, ob), (&f, &w)) in outs.zip(tail) {
            let f = f as usize;
            let (a0, a1) = (row[f], row[f + step]);
            let (b0, b1) = (row[f + half], row[f + half + step]);
            *oa = a0 + (a1 - a0) * w;
            *ob = b0 + (b1 - b0) * w;
        }
    }

    /// Floats of scratch one band needs to blend its source rows.
    pub fn blend_len(&self) -> usize {
        self.blend_len
    }

    /// Whether a destination row that reads one source row takes each channel's samples
    /// as source bytes, one tap per column, from the span tables (untransposed, and no
    /// column blends two samples): what `sample_row_bytes` needs.
    pub fn byte_rows(&self) -> bool {
        self.single_tap && self.plane_count > 0
    }

    /// Whether every channel's columns have the two-tap gathers of the fixed-point
    /// bilinear path (untransposed; each group of four columns within 48 bytes, or each
    /// column's two taps within 8), what `sample_row_q7` needs.
    pub fn q7_rows(&self, count: usize) -> bool {
        let n = self.weights.len();
        self.plane_count > 0 && self.span_taps[..count].iter().all(|t| t.has_two_tap(n))
    }
}

/// The other axis's taps for one destination row: per channel the two offsets, and the
/// weight of the second tap.
#[inline(always)]
pub(crate) fn row_taps(
    plan: &Plan,
    channels: &[ChannelSource; 3],
    count: usize,
    dy: u32,
) -> ([[usize; 2]; 3], f32) {
    let axis = if plan.transposed { 0 } else { 1 };
    let taps = plan.taps(axis, dy);
    let mut offsets = [[0usize; 2]; 3];
    for (c, ch) in channels.iter().enumerate().take(count) {
        offsets[c] = [ch.axis_offset(axis, taps.i0), ch.axis_offset(axis, taps.i1)];
    }
    (offsets, taps.weight as f32)
}

/// Interpolates every source channel for the valid columns of one destination row into
/// `outs[c]`. Untransposed rows that need two source rows first blend the needed span of
/// each plane's two rows (contiguous, vectorised), then take two taps per channel from
/// the blend; other rows take their taps straight from the source. Offsets come from the
/// validated layout, so every index is in bounds; span-relative taps check their row's
/// length once per row (`SpanTaps`), the rest index with checks. Under `Simd::Avx2` and
/// `Simd::Neon` the blended rows' taps go through the pair kernels of `x86` and `neon`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(crate) fn sample_row(
    src: &[&[u8]],
    channels: &[ChannelSource; 3],
    count: usize,
    tables: &ColumnTables,
    row_offsets: [[usize; 2]; 3],
    row_weight: f32,
    outs: [&mut [f32]; 3],
    blend: &mut [f32],
    simd: Simd,
) {
    let two_rows = row_weight != 0.0 && (0..count).any(|c| row_offsets[c][0] != row_offsets[c][1]);
    let blended = |c: usize| {
        two_rows && tables.plane_count > 0 && tables.planes[tables.channel_plane[c]].blend
    };
    if two_rows {
        for p in tables.planes[..tables.plane_count]
            .iter()
            .filter(|p| p.blend)
        {
            let buf = src[channels[p.channel].buffer];
            let [b0, b1] = row_offsets[p.channel];
            let r0 = &buf[b0 + p.lo..b0 + p.hi];
            let r1 = &buf[b1 + p.lo..b1 + p.hi];
            let dst = &mut blend[p.scratch..p.scratch + (p.hi - p.lo)];
            if b0 == b1 {
                // Both rows are one (chroma shared by two luma rows): the blend is the
                // row itself, `a + (a - a) * w == a`, so skip the arithmetic.
                for (d, &a) in dst.iter_mut().zip(r0) {
                    *d = f32::from(a);
                }
                continue;
            }
            for ((d, &a), &b) in dst.iter_mut().zip(r0).zip(r1) {
                let (a, b) = (f32::from(a), f32::from(b));
                *d = a + (b - a) * row_weight;
            }
        }
    }
    let mut outs = outs;
    let mut done = [false; 3];
    if simd.pair_lanes().is_some()
        && !tables.single_tap
        && let Some((a, b)) = tables.interleaved_pair.filter(|&(a, _)| blended(a))
    {
        let p = &tables.planes[tables.channel_plane[a]];
        let row = &blend[p.scratch..p.scratch + (p.hi - p.lo) + PAIR_SLACK];
        let [o0, o1, o2] = &mut outs;
        let mut by_channel = [Some(&mut **o0), Some(&mut **o1), Some(&mut **o2)];
        if let (Some(out_a), Some(out_b)) = (by_channel[a].take(), by_channel[b].take()) {
            tables.lerp_interleaved_wide(simd, a, b, row, out_a, out_b);
            done[a] = true;
            done[b] = true;
        }
    }
    for (c, out) in outs.into_iter().enumerate().take(count) {
        if done[c] {
            continue;
        }
        let n = out.len();
        let wa = &tables.weights[..n];
        let one_row = !two_rows || row_offsets[c][0] == row_offsets[c][1];
        if tables.plane_count > 0 && (blended(c) || one_row) {
            let p = &tables.planes[tables.channel_plane[c]];
            let taps = &tables.span_taps[c];
            if blended(c) {
                let row = &blend[p.scratch..p.scratch + (p.hi - p.lo) + PAIR_SLACK];
                if tables.single_tap {
                    taps.nearest(row, out);
                } else {
                    taps.lerp_wide(simd, row, wa, out);
                }
            } else {
                let b0 = row_offsets[c][0];
                let buf = src[channels[c].buffer];
                let row = &buf[b0 + p.lo..b0 + p.hi];
                if tables.single_tap {
                    // The rest of the buffer after the span too: the shuffle gathers
                    // load 16 bytes from a group's first tap.
                    taps.nearest_bytes(simd, &buf[b0 + p.lo..], out);
                } else {
                    taps.lerp(row, wa, out);
                }
            }
            continue;
        }
        let a0 = &tables.offsets[c][0][..n];
        let a1 = &tables.offsets[c][1][..n];
        let buf = src[channels[c].buffer];
        let [b0, b1] = row_offsets[c];
        if one_row {
            // Transposed: the table's taps are rows and the row's taps are columns.
            let row = &buf[b0..];
            if tables.single_tap {
                for (o, &o0) in out.iter_mut().zip(a0) {
                    *o = f32::from(row[o0]);
                }
                continue;
            }
            for (((o, &o0), &o1), &w) in out.iter_mut().zip(a0).zip(a1).zip(wa) {
                let (x0, x1) = (f32::from(row[o0]), f32::from(row[o1]));
                *o = x0 + (x1 - x0) * w;
            }
        } else {
            // Four taps straight from the source (untransposed: the table's taps are
            // columns and the row's are rows; transposed: the other way round).
            for (((o, &o0), &o1), &w) in out.iter_mut().zip(a0).zip(a1).zip(wa) {
                let p00 = f32::from(buf[b0 + o0]);
                let p01 = f32::from(buf[b0 + o1]);
                let p10 = f32::from(buf[b1 + o0]);
                let p11 = f32::from(buf[b1 + o1]);
                let top = p00 + (p01 - p00) * w;
                let bottom = p10 + (p11 - p10) * w;
                *o = top + (bottom - top) * row_weight;
            }
        }
    }
}

/// Whether destination row taps `row_offsets` / `row_weight` read one source row per
/// channel (so `sample_row_bytes` can serve it when the tables allow byte rows).
#[inline(always)]
pub(crate) fn one_source_row(row_offsets: &[[usize; 2]; 3], count: usize, row_weight: f32) -> bool {
    row_weight == 0.0 || (0..count).all(|c| row_offsets[c][0] == row_offsets[c][1])
}

/// [`sample_row`] for the fixed-point path: the samples of each source channel as bytes
/// (exactly the values `sample_row` gives as floats), for a destination row that reads
/// one source row per channel (`one_source_row`) with tables whose columns take one tap
/// each (`ColumnTables::byte_rows`).
#[inline(always)]
pub(crate) fn sample_row_bytes(
    src: &[&[u8]],
    channels: &[ChannelSource; 3],
    count: usize,
    tables: &ColumnTables,
    row_offsets: [[usize; 2]; 3],
    outs: [&mut [u8]; 3],
    simd: Simd,
) {
    debug_assert!(tables.byte_rows());
    for (c, out) in outs.into_iter().enumerate().take(count) {
        let p = &tables.planes[tables.channel_plane[c]];
        let buf = src[channels[c].buffer];
        // The rest of the buffer after the span too: the shuffle gathers load 16 bytes
        // from a group's first tap.
        tables.span_taps[c].nearest_u8(simd, &buf[row_offsets[c][0] + p.lo..], out);
    }
}

/// Whether `sample_row_q7` takes the one-tap byte gathers for channels whose columns
/// take one sample each from one row (`same_taps`), or the one-row pair gathers (the
/// same integers). Measured (4K NV12 -> 640 RGB u8, one thread, against the pair
/// gathers): NEON 0.85x the aarch64 lane's instruction count, its portable build 0.74x;
/// AVX2 1.007x the instructions (QEMU count: a one-tap gather is a shuffle per register
/// like the pair gather, and the widening to Q7 comes on top) and AVX-512 0.99x the time
/// (20 paired runs), so x86's kernels keep the pair gathers. On x86 the bit-identity
/// tests then hold the two forms against each other (portable against AVX2, AVX-512).
fn one_sample_gathers(simd: Simd) -> bool {
    match simd {
        Simd::Portable => true,
        #[cfg(target_arch = "x86_64")]
        Simd::Avx2 | Simd::Avx512 => false,
        #[cfg(all(target_arch = "aarch64", target_feature = "neon"))]
        Simd::Neon => true,
    }
}

/// [`sample_row`] for the fixed-point bilinear path: every source channel bilinearly
/// interpolated in fixed point (`blend_q7` then `lerp_q7`, 7 fractional bits) from the
/// source rows of `row_offsets` with the row weight `row_weight`, for tables whose
/// columns all have two-tap gathers (`ColumnTables::q7_rows`). The wide kernels gather
/// and blend each column's taps; otherwise each plane's span is blended once (into
/// `blend`, the scratch `ColumnTables::blend_len` sizes, as 16-bit values) and the taps
/// are read from it, the same integers either way. A channel whose two taps lie on one
/// row (both rows one, or a row weight of 0) takes one gather, not two, and one whose
/// columns also take one sample each (`same_taps`) the one-tap byte gathers where they
/// pay (`one_sample_gathers`; into `bytes`, at least a row of columns long), shifted to
/// Q7: the same integers again.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(crate) fn sample_row_q7(
    src: &[&[u8]],
    channels: &[ChannelSource; 3],
    count: usize,
    tables: &ColumnTables,
    row_offsets: [[usize; 2]; 3],
    row_weight: f32,
    outs: [&mut [i16]; 3],
    blend: &mut [f32],
    bytes: &mut [u8],
    simd: Simd,
) {
    debug_assert!(tables.q7_rows(count));
    let wy = weight_pair(row_weight);
    let blend: &mut [i16] = bytemuck::cast_slice_mut(blend);
    let mut blended = [false; 3];
    for (c, out) in outs.into_iter().enumerate().take(count) {
        let plane = tables.channel_plane[c];
        let p = &tables.planes[plane];
        let buf = src[channels[c].buffer];
        let [b0, b1] = row_offsets[c];
        let taps = &tables.span_taps[c];
        // Both taps on one source row: the chroma of 4:2:0 sources wherever both luma
        // rows share a chroma row (every row at 6:1), or a row weight of zero in Q14.
        let one_row = b0 == b1 || wy >> 16 == 0;
        // The rest of the buffer after each span: the gathers load 32 (or 48) bytes
        // from a group's base.
        if one_row && taps.same_taps && one_sample_gathers(simd) {
            taps.one_sample_q7(simd, &buf[b0 + p.lo..], bytes, out);
            continue;
        }
        let bottom = (!one_row).then(|| &buf[b1 + p.lo..]);
        if taps.bilinear_q7_wide(simd, &buf[b0 + p.lo..], bottom, wy, out) {
            continue;
        }
        if one_row {
            taps.blend_q7_row(&buf[b0 + p.lo..], out);
        } else if p.blend {
            // Each plane's span is blended once per row, in its own part of the scratch
            // (`scratch` counts floats: twice as many 16-bit values fit). Only planes
            // that blend have a part.
            let row = &mut blend[2 * p.scratch..2 * p.scratch + (p.hi - p.lo)];
            if !blended[plane] {
                let (r0, r1) = (&buf[b0 + p.lo..b0 + p.hi], &buf[b1 + p.lo..b1 + p.hi]);
                for ((d, &a), &b) in row.iter_mut().zip(r0).zip(r1) {
                    *d = blend_q7(a, b, wy);
                }
                blended[plane] = true;
            }
            taps.lerp_q7_row(row, out);
        } else {
            // No scratch for this plane (a span too wide to blend whole): column by
            // column from the source rows.
            let (r0, r1) = (&buf[b0 + p.lo..], &buf[b1 + p.lo..]);
            let columns = taps.first.iter().zip(&taps.second).zip(&taps.two_weights);
            for (o, ((&f, &s), &wx)) in out.iter_mut().zip(columns) {
                let (f, s) = (f as usize, s as usize);
                *o = lerp_q7(blend_q7(r0[f], r1[f], wy), blend_q7(r0[s], r1[s], wy), wx);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Columns at 3840 → 224 (17:1), whose groups of four span 48 bytes or more, take the
    /// per-column windows, and every kernel gives the portable integers from them: one
    /// step per channel kind (1: luma, 2: semi-planar chroma pairs, 4: packed 4:2:2
    /// chroma), whole groups and a tail, two rows and one, and row weights at both ends,
    /// a half and between, from rows exactly as long as the gathers need.
    #[test]
    fn per_column_windows_give_the_portable_integers() {
        let n = 37;
        for step in [1u32, 2, 4] {
            let last = 3840 / 2 * step.min(2) - step;
            let mut offsets = [Vec::new(), Vec::new()];
            let mut weights = Vec::new();
            for j in 0..n {
                let x = ((j as f64 + 0.5) * 3840.0 / 224.0 - 0.5).max(0.0);
                let first = (x.floor() as u32 * step).min(last);
                offsets[0].push(first as usize);
                offsets[1].push((first + step).min(last) as usize);
                weights.push(x.fract() as f32);
            }
            let mut taps = SpanTaps::default();
            taps.rebuild(&offsets, 0, &weights);
            assert!(taps.has_two_tap(n), "step {step}");
            assert_eq!(
                taps.two_column_bases.len(),
                n - n % SHUFFLE_GROUP,
                "step {step}"
            );
            let len = taps.two_reach.max(taps.bound);
            let row = |seed: usize| -> Vec<u8> {
                (0..len)
                    .map(|i| ((i * 37 + seed * 101) % 251) as u8)
                    .collect()
            };
            let (top, bottom) = (row(1), row(2));
            // The portable form, then every wide kernel the CPU runs (a SKIPPED line where
            // there is none; a failure under `CI=true` on x86-64).
            let wide =
                crate::cpu::tests::wide_kernels("per_column_windows_give_the_portable_integers");
            for simd in std::iter::once(Simd::Portable).chain(wide) {
                for row_weight in [0.0, 0.3, 0.5, 1.0] {
                    let wy = weight_pair(row_weight);
                    for one_row in [false, true] {
                        let bottom = (!one_row).then_some(&bottom[..]);
                        let mut out = vec![0i16; n];
                        let wide = taps.bilinear_q7_wide(simd, &top, bottom, wy, &mut out);
                        assert_eq!(wide, simd != Simd::Portable, "{simd:?} step {step}");
                        if !wide {
                            continue;
                        }
                        for (j, &o) in out.iter().enumerate() {
                            let (f, s) = (offsets[0][j], offsets[1][j]);
                            let wx = taps.two_weights[j];
                            let expected = match bottom {
                                Some(b) => lerp_q7(
                                    blend_q7(top[f], b[f], wy),
                                    blend_q7(top[s], b[s], wy),
                                    wx,
                                ),
                                None => blend_q7(top[f], top[s], wx),
                            };
                            assert_eq!(o, expected, "{simd:?} step {step} column {j}");
                        }
                    }
                }
            }
        }
    }

    /// The one-row step the kernels take where both taps' rows are one row (`blend_q7` of
    /// a column's two taps with its column weight) gives the integer of the two steps
    /// (`blend_q7` of each tap with itself, then `lerp_q7`) for every pair of bytes, every
    /// row weight tried and column weights across Q14 (every one near both ends): the
    /// short cut changes no output. And where the two taps are also one sample
    /// (`same_taps`) that integer is the byte in Q7, what the one-tap gathers give.
    #[test]
    fn one_row_step_equals_blending_a_row_with_itself() {
        let pair = |w: i32| (Q14 - w) | (w << 16);
        let column_weights = (0..=Q14)
            .filter(|&w| !(96..=Q14 - 96).contains(&w) || w % 37 == 0)
            .map(pair);
        let row_weights = [0, 1, 5461, Q14 / 2, 10923, Q14 - 1].map(pair);
        for wx in column_weights {
            for a in 0..=255u8 {
                for b in 0..=255u8 {
                    let wy = row_weights[(a ^ b) as usize % row_weights.len()];
                    let two = lerp_q7(blend_q7(a, a, wy), blend_q7(b, b, wy), wx);
                    assert_eq!(blend_q7(a, b, wx), two, "{a} {b} wx {wx:#x} wy {wy:#x}");
                }
                assert_eq!(blend_q7(a, a, wx), i16::from(a) << 7, "{a} wx {wx:#x}");
            }
        }
    }
}
