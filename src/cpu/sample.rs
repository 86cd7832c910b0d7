//! Stage 1 of the fused kernel: bilinear (or nearest) sampling of the source's own
//! channels (Y, U, V with replicated chroma; R, G, B; or grey) into one row of f32 values
//! per channel, reading only the source rows and columns the output row needs.

use crate::convert::Plan;
use crate::image::{FormatFamily, ImageLayout};

/// Where one source channel's samples live: the byte offset of pixel `(x, y)`'s sample is
/// `plane_offset + (y / vsub) * stride + (x / group) * step + base + (x % group) * intra`
/// in buffer `buffer`. This one formula covers every source format: for YUYV the Y of an
/// odd pixel is 2 bytes after the even one (`intra`), chroma is shared by a pair
/// (`group` 2, `intra` 0); semi-planar chroma is a pair of bytes every 2 pixels; packed RGB
/// channels sit `base` bytes into a `step`-byte pixel.
#[derive(Clone, Copy, Debug)]
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
    let (_, vsub) = format.chroma_subsampling();
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
        FormatFamily::PlanarYuv420 => {
            let (u, v) = if format.chroma_swapped() {
                (2, 1)
            } else {
                (1, 2)
            };
            (
                [
                    on_plane(0, 1, 1, 1, 0, 0),
                    on_plane(u, vsub, 2, 1, 0, 0),
                    on_plane(v, vsub, 2, 1, 0, 0),
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
}

/// Per destination column (of the valid region), the two taps' offsets for each channel
/// along the source axis that follows destination columns, and the second tap's weight;
/// plus, for the untransposed case, the span of each source plane the columns touch.
#[derive(Default)]
pub(crate) struct ColumnTables {
    offsets: [[Vec<usize>; 2]; 3],
    weights: Vec<f32>,
    /// Which of `planes` each channel reads.
    channel_plane: [usize; 3],
    planes: [PlaneSpan; 3],
    plane_count: usize,
    blend_len: usize,
    /// Every column's second tap has weight 0 (nearest, or a scale that lands on pixel
    /// centres): one tap per channel suffices.
    single_tap: bool,
}

impl ColumnTables {
    /// Refills the tables for `plan` (no allocation once capacities suffice).
    pub fn build(&mut self, plan: &Plan, channels: &[ChannelSource; 3], count: usize) {
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
                    self.channel_plane[c] = p;
                }
                None => {
                    self.planes[self.plane_count] = PlaneSpan {
                        channel: c,
                        lo,
                        hi,
                        scratch: 0,
                    };
                    self.channel_plane[c] = self.plane_count;
                    self.plane_count += 1;
                }
            }
        }
        for p in &mut self.planes[..self.plane_count] {
            p.scratch = self.blend_len;
            self.blend_len += p.hi - p.lo;
        }
    }

    /// Floats of scratch one band needs to blend its source rows.
    pub fn blend_len(&self) -> usize {
        self.blend_len
    }
}

/// The other axis's taps for one destination row: per channel the two offsets, and the
/// weight of the second tap.
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
/// validated layout, so every index is in bounds (indexing still checks).
#[allow(clippy::too_many_arguments)]
pub(crate) fn sample_row(
    src: &[&[u8]],
    channels: &[ChannelSource; 3],
    count: usize,
    tables: &ColumnTables,
    row_offsets: [[usize; 2]; 3],
    row_weight: f32,
    outs: [&mut [f32]; 3],
    blend: &mut [f32],
) {
    let two_rows = row_weight != 0.0 && (0..count).any(|c| row_offsets[c][0] != row_offsets[c][1]);
    let blended = two_rows && tables.plane_count > 0;
    if blended {
        for p in &tables.planes[..tables.plane_count] {
            let buf = src[channels[p.channel].buffer];
            let [b0, b1] = row_offsets[p.channel];
            let r0 = &buf[b0 + p.lo..b0 + p.hi];
            let r1 = &buf[b1 + p.lo..b1 + p.hi];
            let dst = &mut blend[p.scratch..p.scratch + (p.hi - p.lo)];
            for ((d, &a), &b) in dst.iter_mut().zip(r0).zip(r1) {
                let (a, b) = (f32::from(a), f32::from(b));
                *d = a + (b - a) * row_weight;
            }
        }
    }
    for (c, out) in outs.into_iter().enumerate().take(count) {
        let n = out.len();
        let a0 = &tables.offsets[c][0][..n];
        let a1 = &tables.offsets[c][1][..n];
        let wa = &tables.weights[..n];
        if blended {
            let p = &tables.planes[tables.channel_plane[c]];
            let row = &blend[p.scratch..p.scratch + (p.hi - p.lo)];
            let lo = p.lo;
            if tables.single_tap {
                for (o, &o0) in out.iter_mut().zip(a0) {
                    *o = row[o0 - lo];
                }
                continue;
            }
            for (((o, &o0), &o1), &w) in out.iter_mut().zip(a0).zip(a1).zip(wa) {
                let (x0, x1) = (row[o0 - lo], row[o1 - lo]);
                *o = x0 + (x1 - x0) * w;
            }
            continue;
        }
        let buf = src[channels[c].buffer];
        let [b0, b1] = row_offsets[c];
        if !two_rows || b0 == b1 {
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
            // Transposed: the table's taps are rows, the row's taps are columns.
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
