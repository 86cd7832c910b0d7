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

/// Per destination column (of the valid region), the two taps' offsets for each channel
/// along the source axis that follows destination columns, and the second tap's weight.
#[derive(Default)]
pub(crate) struct ColumnTables {
    offsets: [[Vec<usize>; 2]; 3],
    weights: Vec<f32>,
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

/// Interpolates channel `c` for every valid column of one destination row into `out`.
/// Offsets and the source buffer were validated against the layout, so every index is
/// in bounds (indexing still checks).
pub(crate) fn sample_channel(
    buf: &[u8],
    tables: &ColumnTables,
    c: usize,
    row: [usize; 2],
    row_weight: f32,
    out: &mut [f32],
) {
    let a0 = &tables.offsets[c][0][..out.len()];
    let a1 = &tables.offsets[c][1][..out.len()];
    let wa = &tables.weights[..out.len()];
    let [b0, b1] = row;
    if row_weight == 0.0 || b0 == b1 {
        // One source line: the common case for nearest and for exact-row scales.
        for (((o, &o0), &o1), &w) in out.iter_mut().zip(a0).zip(a1).zip(wa) {
            let p0 = f32::from(buf[b0 + o0]);
            let p1 = f32::from(buf[b0 + o1]);
            *o = p0 + (p1 - p0) * w;
        }
    } else {
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
