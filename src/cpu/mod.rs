//! The CPU backend: one fused pass per destination row (sample the source's own channels,
//! convert colour, clamp once, normalise, store), with row bands spread over the rayon
//! pool. Kernels work on byte slices plus [`ImageLayout`]s, independent of tensors, so
//! other backends can run them as their reference or fallback.

mod sample;
mod store;

use half::f16;
use rayon::prelude::*;

use crate::convert::Plan;
use crate::image::{FormatFamily, ImageLayout};
use crate::{DType, Element, Error, Result};
use sample::{ChannelSource, ColumnTables};
use store::OutElement;

/// Destinations smaller than this many pixels are converted on the calling thread: the
/// pool's hand-off costs more than the work.
const PARALLEL_MIN_PIXELS: usize = 64 * 64;

/// Scratch rows per band: 3 interpolated source channels + 3 output channels.
const ROWS_PER_BAND: usize = 6;

/// Whether a conversion may use the rayon pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Threads {
    /// Split the rows into bands over the rayon pool (for images large enough to pay).
    Pool,
    /// Run on the calling thread only.
    Caller,
}

/// The CPU converter: owns every buffer a conversion needs, so converting the same
/// geometry again allocates nothing.
#[derive(Default)]
pub(crate) struct CpuConverter {
    tables: ColumnTables,
    rows: Vec<f32>,
}

impl std::fmt::Debug for CpuConverter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CpuConverter")
            .field("scratch_floats", &self.rows.capacity())
            .finish()
    }
}

/// Everything a band needs, shared read-only between bands.
struct Job<'a> {
    plan: &'a Plan,
    src: &'a [&'a [u8]],
    channels: [ChannelSource; 3],
    count: usize,
    tables: &'a ColumnTables,
}

/// A band index with its rows in each of three planes, as the zipped chunk iterators
/// yield them.
type PlanarChunks<'a, T> = (((usize, &'a mut [T]), &'a mut [T]), &'a mut [T]);

/// One band of destination rows: packed (one slice) or planar (one slice per channel,
/// in R, G, B order), each starting at the band's first row, with strides in elements.
enum Band<'a, T> {
    Packed(&'a mut [T]),
    Planar([&'a mut [T]; 3]),
}

impl CpuConverter {
    /// A converter with empty scratch buffers (they grow on the first conversion).
    pub fn new() -> Self {
        Self::default()
    }

    /// Executes `plan`, reading the source from `src` (one slice per buffer of
    /// `src_layout`) and writing `dst` (one buffer laid out as `dst_layout`, elements of
    /// the plan's destination dtype).
    pub fn convert<T: Element>(
        &mut self,
        plan: &Plan,
        src: &[&[u8]],
        src_layout: &ImageLayout,
        dst: &mut [T],
        dst_layout: &ImageLayout,
        threads: Threads,
    ) -> Result<()> {
        let mismatch = || {
            Error::InvalidArgument(format!(
                "destination elements are {} but the plan writes {}; use a Tensor<{}> or plan \
                 for {} elements",
                T::DTYPE,
                plan.dst_dtype,
                plan.dst_dtype,
                T::DTYPE
            ))
        };
        if T::DTYPE != plan.dst_dtype || dst_layout.dtype() != plan.dst_dtype {
            return Err(mismatch());
        }
        let bytes: &mut [u8] = bytemuck::cast_slice_mut(dst);
        match T::DTYPE {
            DType::U8 => self.run::<u8>(plan, src, src_layout, bytes, dst_layout, threads),
            DType::I8 => {
                let d: &mut [i8] = bytemuck::cast_slice_mut(bytes);
                self.run(plan, src, src_layout, d, dst_layout, threads)
            }
            DType::F16 => {
                let d: &mut [f16] = bytemuck::try_cast_slice_mut(bytes).map_err(|_| mismatch())?;
                self.run(plan, src, src_layout, d, dst_layout, threads)
            }
            DType::F32 => {
                let d: &mut [f32] = bytemuck::try_cast_slice_mut(bytes).map_err(|_| mismatch())?;
                self.run(plan, src, src_layout, d, dst_layout, threads)
            }
            other => Err(Error::Unsupported(format!(
                "destination element type {other} is not supported; use u8, i8, f16 or f32"
            ))),
        }
    }

    fn run<T: OutElement>(
        &mut self,
        plan: &Plan,
        src: &[&[u8]],
        src_layout: &ImageLayout,
        dst: &mut [T],
        dst_layout: &ImageLayout,
        threads: Threads,
    ) -> Result<()> {
        check_plan_matches(plan, src_layout, dst_layout)?;
        let mut src_lens = [0usize; 4];
        if src.len() > src_lens.len() {
            return Err(Error::InvalidArgument(format!(
                "{} source buffers given; an image has at most 3",
                src.len()
            )));
        }
        for (l, s) in src_lens.iter_mut().zip(src) {
            *l = s.len();
        }
        src_layout.validate_buffers(&src_lens[..src.len()])?;
        dst_layout.validate_buffers(&[std::mem::size_of_val(dst)])?;

        let (channels, count) = sample::channel_sources(src_layout);
        self.tables.build(plan, &channels, count);
        let vw = plan.valid[2] as usize;
        let height = plan.dst_height as usize;
        let pixels = plan.dst_width as usize * height;
        let bands = if threads == Threads::Pool && pixels >= PARALLEL_MIN_PIXELS {
            (rayon::current_num_threads() * 4).min(height)
        } else {
            1
        };
        let band_rows = height.div_ceil(bands);
        let bands = height.div_ceil(band_rows);
        let band_scratch = ROWS_PER_BAND * vw + self.tables.blend_len();
        if self.rows.len() < bands * band_scratch {
            self.rows.resize(bands * band_scratch, 0.0);
        }
        let job = Job {
            plan,
            src,
            channels,
            count,
            tables: &self.tables,
        };
        let scratch = &mut self.rows[..bands * band_scratch];
        let elem = std::mem::size_of::<T>();
        let planes = dst_layout.planes();
        let region = |i: usize| {
            let start = planes[i].offset / elem;
            let len = dst_layout.plane_end(i) / elem - start;
            (start, len, planes[i].stride / elem)
        };

        if dst_layout.format().family() == FormatFamily::PlanarRgb {
            let spans = [0, 1, 2].map(region);
            let [r0, r1, r2] = split3(
                dst,
                [spans[0].0, spans[1].0, spans[2].0],
                [spans[0].1, spans[1].1, spans[2].1],
            );
            // Plane i holds output channel `order[i]`; re-order so index c is channel c.
            let strides = [spans[0].2, spans[1].2, spans[2].2];
            let pos = plan.dst_channel_positions;
            let run = |(((b, p0), p1), p2): PlanarChunks<'_, T>, scr: &mut [f32]| {
                let mut by_plane = [Some(p0), Some(p1), Some(p2)];
                let band = [pos[0], pos[1], pos[2]].map(|p| by_plane[p].take().unwrap_or_default());
                let plane_strides = [strides[pos[0]], strides[pos[1]], strides[pos[2]]];
                job.band(b * band_rows, Band::Planar(band), plane_strides, scr);
            };
            if bands > 1 {
                r0.par_chunks_mut(band_rows * strides[0])
                    .enumerate()
                    .zip(r1.par_chunks_mut(band_rows * strides[1]))
                    .zip(r2.par_chunks_mut(band_rows * strides[2]))
                    .zip(scratch.par_chunks_mut(band_scratch))
                    .for_each(|(planes, scr)| run(planes, scr));
            } else {
                r0.chunks_mut(band_rows * strides[0])
                    .enumerate()
                    .zip(r1.chunks_mut(band_rows * strides[1]))
                    .zip(r2.chunks_mut(band_rows * strides[2]))
                    .zip(scratch.chunks_mut(band_scratch))
                    .for_each(|(planes, scr)| run(planes, scr));
            }
        } else {
            let (start, len, stride) = region(0);
            let rows = &mut dst[start..start + len];
            let run = |(b, band): (usize, &mut [T]), scr: &mut [f32]| {
                job.band(b * band_rows, Band::Packed(band), [stride; 3], scr);
            };
            if bands > 1 {
                rows.par_chunks_mut(band_rows * stride)
                    .enumerate()
                    .zip(scratch.par_chunks_mut(band_scratch))
                    .for_each(|(band, scr)| run(band, scr));
            } else {
                rows.chunks_mut(band_rows * stride)
                    .enumerate()
                    .zip(scratch.chunks_mut(band_scratch))
                    .for_each(|(band, scr)| run(band, scr));
            }
        }
        Ok(())
    }
}

fn check_plan_matches(plan: &Plan, src: &ImageLayout, dst: &ImageLayout) -> Result<()> {
    let src_ok = (src.width(), src.height(), src.format())
        == (plan.src_width, plan.src_height, plan.src_format);
    let dst_ok = (dst.width(), dst.height(), dst.format())
        == (plan.dst_width, plan.dst_height, plan.dst_format);
    if src_ok && dst_ok {
        Ok(())
    } else {
        Err(Error::InvalidArgument(format!(
            "the plan is for {}x{} {} -> {}x{} {} but the images are {src:?} -> {dst:?}; \
             make a new plan for these layouts",
            plan.src_width,
            plan.src_height,
            plan.src_format,
            plan.dst_width,
            plan.dst_height,
            plan.dst_format
        )))
    }
}

/// Splits `dst` into three disjoint mutable regions `[start, start + len)` (validated
/// layouts never overlap their planes), returned in the order given.
fn split3<T>(dst: &mut [T], start: [usize; 3], len: [usize; 3]) -> [&mut [T]; 3] {
    let mut order = [0usize, 1, 2];
    order.sort_by_key(|&i| start[i]);
    let mut out: [&mut [T]; 3] = [&mut [], &mut [], &mut []];
    let mut rest = dst;
    let mut consumed = 0;
    for &i in &order {
        let tail = std::mem::take(&mut rest);
        let (_, from_start) = tail.split_at_mut(start[i] - consumed);
        let (region, after) = from_start.split_at_mut(len[i]);
        out[i] = region;
        rest = after;
        consumed = start[i] + len[i];
    }
    out
}

impl Job<'_> {
    /// Converts destination rows `first_row..` of one band.
    fn band<T: OutElement>(
        &self,
        first_row: usize,
        mut band: Band<'_, T>,
        strides: [usize; 3],
        scratch: &mut [f32],
    ) {
        let plan = self.plan;
        let [vx, vy, vw, vh] = plan.valid.map(|v| v as usize);
        let dw = plan.dst_width as usize;
        let rows = match &band {
            Band::Packed(b) => b.len().div_ceil(strides[0]),
            Band::Planar(b) => b[0].len().div_ceil(strides[0]),
        };
        let oc = plan.output_channels;
        let bpp = plan.dst_format.channels();
        let pad: [T; 3] = [0, 1, 2].map(|c| {
            T::from_value(
                plan.pad_value[c].clamp(0.0, 255.0),
                plan.norm_scale[c],
                plan.norm_bias[c],
            )
        });
        // The padding as a whole packed pixel (colour at its positions, opaque alpha).
        let mut pad_pixel = [T::opaque(); 4];
        for c in 0..oc {
            pad_pixel[plan.dst_channel_positions[c]] = pad[c];
        }
        let (rows_scratch, blend) = scratch.split_at_mut(ROWS_PER_BAND * vw);
        let (src_rows, out_rows) = rows_scratch.split_at_mut(3 * vw);
        let (s0, rest) = src_rows.split_at_mut(vw);
        let (s1, s2) = rest.split_at_mut(vw);
        let (o0, rest) = out_rows.split_at_mut(vw);
        let (o1, o2) = rest.split_at_mut(vw);
        let mut outs: [&mut [f32]; 3] = [o0, o1, o2];
        for r in 0..rows {
            let dy = first_row + r;
            let inside = dy >= vy && dy < vy + vh;
            if inside {
                let (row_offsets, row_weight) =
                    sample::row_taps(plan, &self.channels, self.count, dy as u32);
                sample::sample_row(
                    self.src,
                    &self.channels,
                    self.count,
                    self.tables,
                    row_offsets,
                    row_weight,
                    [&mut *s0, &mut *s1, &mut *s2],
                    blend,
                );
                let s: [&[f32]; 3] = if self.count == 1 {
                    [&*s0, &*s0, &*s0]
                } else {
                    [&*s0, &*s1, &*s2]
                };
                store::colour(plan, s, &mut outs[..oc]);
            }
            let (lo, hi) = if inside { (vx, vx + vw) } else { (dw, dw) };
            match &mut band {
                Band::Packed(b) => {
                    let row = &mut b[r * strides[0]..r * strides[0] + dw * bpp];
                    fill_packed_pad(row, 0, lo, &pad_pixel[..bpp]);
                    fill_packed_pad(row, hi, dw, &pad_pixel[..bpp]);
                    if inside {
                        store::store_packed(plan, &outs[..oc], &mut row[lo * bpp..], bpp);
                    }
                }
                Band::Planar(planes) => {
                    for c in 0..3 {
                        let row = &mut planes[c][r * strides[c]..r * strides[c] + dw];
                        row[..lo].fill(pad[c]);
                        row[hi..].fill(pad[c]);
                        if inside {
                            store::store_channel(
                                &outs[c][..],
                                plan.norm_scale[c],
                                plan.norm_bias[c],
                                &mut row[lo..hi],
                                1,
                            );
                        }
                    }
                }
            }
        }
    }
}

/// Fills packed pixels `from..to` of a row with the padding pixel (fixed-size copies per
/// pixel width, so no per-pixel `memcpy` call).
fn fill_packed_pad<T: OutElement>(row: &mut [T], from: usize, to: usize, pad_pixel: &[T]) {
    if from >= to {
        return;
    }
    let span = &mut row[from * pad_pixel.len()..to * pad_pixel.len()];
    match *pad_pixel {
        [g] => span.fill(g),
        [a, b, c] => span.chunks_exact_mut(3).for_each(|px| {
            px[0] = a;
            px[1] = b;
            px[2] = c;
        }),
        [a, b, c, d] => span.chunks_exact_mut(4).for_each(|px| {
            px[0] = a;
            px[1] = b;
            px[2] = c;
            px[3] = d;
        }),
        _ => span
            .chunks_exact_mut(pad_pixel.len())
            .for_each(|px| px.copy_from_slice(pad_pixel)),
    }
}
