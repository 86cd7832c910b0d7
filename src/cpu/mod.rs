//! The CPU backend: one fused pass per destination row (sample the source's own channels,
//! convert colour, clamp once, normalise, store), with row bands spread over the rayon
//! pool. Kernels work on byte slices plus [`ImageLayout`]s, independent of tensors, so
//! other backends can run them as their reference or fallback.

mod decode;
mod fixed;
#[cfg(all(target_arch = "aarch64", target_feature = "neon"))]
mod neon;
mod sample;
mod store;
#[cfg(target_arch = "x86_64")]
mod x86;

use half::f16;
use rayon::prelude::*;

use crate::convert::Plan;
use crate::image::{FormatFamily, ImageLayout};
use crate::{DType, Element, Error, Result};
use decode::{BandDecoder, DecodeTables};
use fixed::FixedColour;
use sample::{ChannelSource, ColumnTables};
use store::OutElement;

/// Destinations smaller than this many pixels are converted on the calling thread: the
/// pool's hand-off costs more than the work.
const PARALLEL_MIN_PIXELS: usize = 64 * 64;

/// Scratch rows per band: 3 interpolated source channels + 3 output channels.
const ROWS_PER_BAND: usize = 6;

/// The instruction set the kernel runs with. Every variant executes the same f32
/// operations in the same order (no FMA contraction, none in the hand-written kernels of
/// `x86` and `neon` either), so their outputs are bit-identical; unit tests hold them to
/// that.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Simd {
    /// The target's baseline instruction set.
    Portable,
    /// x86-64 with AVX2, detected at run time.
    #[cfg(target_arch = "x86_64")]
    Avx2,
    /// x86-64 with AVX2 and AVX-512 (F, BW and VBMI: Ice Lake, Zen 4 and later),
    /// detected at run time: the AVX2 kernels, with the fixed-point bilinear gathers on
    /// 512-bit byte permutes. Everything else stays on AVX2's 256-bit vectors: the
    /// gathers are where the width pays, and 512-bit code elsewhere would compile the
    /// whole kernel a third time.
    #[cfg(target_arch = "x86_64")]
    Avx512,
    /// aarch64's NEON: the portable kernel (already NEON, the aarch64 baseline) plus the
    /// hand-written tap gathers of `neon`. Always available, so chosen at compile time.
    #[cfg(all(target_arch = "aarch64", target_feature = "neon"))]
    Neon,
}

impl Simd {
    /// The widest variant this CPU runs. `PINFRAME_CPU_SIMD=portable` forces the
    /// baseline build and `=avx2` the AVX2 kernels on an AVX-512 CPU (to compare them, or
    /// to rule the wider one out); a name the CPU cannot run, or an unknown one, leaves
    /// the widest.
    pub fn detect() -> Simd {
        let forced = std::env::var_os("PINFRAME_CPU_SIMD");
        Simd::available()
            .into_iter()
            .find(|s| forced.as_ref().is_some_and(|f| f == s.name()))
            .unwrap_or_else(Simd::widest)
    }

    /// Every variant this CPU runs, the portable one first and the widest last.
    pub(crate) fn available() -> Vec<Simd> {
        let widest = Simd::widest();
        let mut all = vec![Simd::Portable];
        #[cfg(target_arch = "x86_64")]
        {
            if widest != Simd::Portable {
                all.push(Simd::Avx2);
            }
            if widest == Simd::Avx512 {
                all.push(Simd::Avx512);
            }
        }
        #[cfg(all(target_arch = "aarch64", target_feature = "neon"))]
        all.push(widest);
        all
    }

    /// The widest variant the hardware runs, whatever `PINFRAME_CPU_SIMD` says.
    fn widest() -> Simd {
        #[cfg(target_arch = "x86_64")]
        if std::is_x86_feature_detected!("avx2") {
            let avx512 = std::is_x86_feature_detected!("avx512f")
                && std::is_x86_feature_detected!("avx512bw")
                && std::is_x86_feature_detected!("avx512vbmi");
            return if avx512 { Simd::Avx512 } else { Simd::Avx2 };
        }
        // NEON is part of the aarch64 baseline: nothing to detect.
        #[cfg(all(target_arch = "aarch64", target_feature = "neon"))]
        let widest = Simd::Neon;
        #[cfg(not(all(target_arch = "aarch64", target_feature = "neon")))]
        let widest = Simd::Portable;
        widest
    }

    /// Whether 8-bit destinations take the fixed-point paths of `fixed`: where the
    /// hardware has a wide kernel (AVX2, NEON), whichever kernel runs, so forcing the
    /// portable one (`PINFRAME_CPU_SIMD=portable`) still gives the same bits. On an
    /// x86-64 CPU without AVX2 the fixed-point bilinear path, gathering tap by tap, measured
    /// 1.3-1.5x slower than the f32 path, which blends whole rows with SSE2 (one-thread
    /// A/B of `pinframe bench`, NV12 → 416 and 4K NV12 → 640 letterbox, u8): those CPUs
    /// keep the f32 path, and their 8-bit outputs may differ from an AVX2 machine's by 1
    /// in a few pixels (both within 1 of the f64 reference).
    fn fixed_point() -> bool {
        Simd::widest() != Simd::Portable
    }

    /// The name `pinframe bench` and `pinframe info` print for this kernel.
    pub fn name(self) -> &'static str {
        match self {
            Simd::Portable => "portable",
            #[cfg(target_arch = "x86_64")]
            Simd::Avx2 => "avx2",
            #[cfg(target_arch = "x86_64")]
            Simd::Avx512 => "avx512",
            #[cfg(all(target_arch = "aarch64", target_feature = "neon"))]
            Simd::Neon => "neon",
        }
    }

    /// Columns the pair kernels of this variant handle per step, or None for the
    /// portable kernel, which has none.
    fn pair_lanes(self) -> Option<usize> {
        match self {
            Simd::Portable => None,
            #[cfg(target_arch = "x86_64")]
            Simd::Avx2 | Simd::Avx512 => Some(8),
            #[cfg(all(target_arch = "aarch64", target_feature = "neon"))]
            Simd::Neon => Some(neon::LANES),
        }
    }
}

/// Whether a conversion may use the rayon pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Threads {
    /// Split the rows into bands over the rayon pool (for images large enough to pay).
    Pool,
    /// Run on the calling thread only.
    Caller,
}

impl Threads {
    /// Whether work goes to the pool: `Pool`, and a pool of more than one thread (the
    /// pool the caller runs in, or the global one). A one-thread pool only adds a hand-off
    /// to its worker and back per frame, so the caller converts on its own thread then.
    fn spreads(self) -> bool {
        self == Threads::Pool && rayon::current_num_threads() > 1
    }
}

/// The CPU converter: owns every buffer a conversion needs, so converting the same
/// geometry again allocates nothing.
pub(crate) struct CpuConverter {
    /// One set per image of a batch (a single conversion uses the first), kept between
    /// calls: each caches the tables of its last plan, so a batch whose items keep their
    /// geometry from frame to frame rebuilds nothing.
    scratch: Vec<Scratch>,
    simd: Simd,
}

/// The tables and rows one image's conversion needs.
#[derive(Default)]
struct Scratch {
    tables: ColumnTables,
    decode: DecodeTables,
    rows: Vec<f32>,
}

/// One image of a batch for [`CpuConverter::convert_batch`]: its plan, its source (one
/// slice per buffer of `src_layout`) and where its slice of the destination is (offsets
/// relative to the slice's first element).
pub(crate) struct BatchJob<'a> {
    pub plan: &'a Plan,
    pub src: &'a [&'a [u8]],
    pub src_layout: &'a ImageLayout,
    pub dst_layout: ImageLayout,
}

impl Default for CpuConverter {
    fn default() -> Self {
        CpuConverter {
            scratch: vec![Scratch::default()],
            simd: Simd::detect(),
        }
    }
}

impl std::fmt::Debug for CpuConverter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let floats: usize = self.scratch.iter().map(|s| s.rows.capacity()).sum();
        f.debug_struct("CpuConverter")
            .field("scratch_floats", &floats)
            .field("simd", &self.simd)
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
    /// Set for the sources `decode` reads (Bayer, 16-bit words).
    decode: Option<&'a DecodeTables>,
    simd: Simd,
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

    /// The kernel this converter runs (`"avx2"`, `"neon"` or `"portable"`).
    pub fn kernel(&self) -> &'static str {
        self.simd.name()
    }

    /// A converter that runs the kernel built for `simd` (which must be available: take
    /// it from [`Simd::detect`] or use `Simd::Portable`).
    #[cfg(test)]
    fn with_simd(simd: Simd) -> Self {
        CpuConverter {
            simd,
            ..Self::default()
        }
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
        let simd = self.simd;
        let scratch = &mut self.scratch[0];
        let bytes: &mut [u8] = bytemuck::cast_slice_mut(dst);
        match T::DTYPE {
            DType::U8 => run::<u8>(
                scratch, simd, plan, src, src_layout, bytes, dst_layout, threads,
            ),
            DType::I8 => {
                let d: &mut [i8] = bytemuck::cast_slice_mut(bytes);
                run(scratch, simd, plan, src, src_layout, d, dst_layout, threads)
            }
            DType::F16 => {
                let d: &mut [f16] = bytemuck::try_cast_slice_mut(bytes).map_err(|_| mismatch())?;
                run(scratch, simd, plan, src, src_layout, d, dst_layout, threads)
            }
            DType::F32 => {
                let d: &mut [f32] = bytemuck::try_cast_slice_mut(bytes).map_err(|_| mismatch())?;
                run(scratch, simd, plan, src, src_layout, d, dst_layout, threads)
            }
            other => Err(Error::Unsupported(format!(
                "destination element type {other} is not supported; use u8, i8, f16 or f32"
            ))),
        }
    }

    /// Executes a batch: job `i` writes `dst[i * slice_len..(i + 1) * slice_len]`. With
    /// the pool, the images go over it together and each spreads its row bands over it
    /// too (rayon steals across both levels), so the whole batch is one parallel pass
    /// rather than one fork and join per image. Each slice gets exactly the bytes a
    /// single conversion of its job writes (the same kernel on the same rows).
    pub fn convert_batch<T: Element>(
        &mut self,
        jobs: &[BatchJob<'_>],
        dst: &mut [T],
        slice_len: usize,
        threads: Threads,
    ) -> Result<()> {
        if slice_len == 0 || dst.len() < jobs.len() * slice_len {
            return Err(Error::InvalidArgument(format!(
                "a batch of {} images of {slice_len} elements does not fit {} elements",
                jobs.len(),
                dst.len()
            )));
        }
        for job in jobs {
            if T::DTYPE != job.plan.dst_dtype || job.dst_layout.dtype() != job.plan.dst_dtype {
                return Err(Error::InvalidArgument(format!(
                    "destination elements are {} but a plan of the batch writes {}",
                    T::DTYPE,
                    job.plan.dst_dtype
                )));
            }
        }
        if self.scratch.len() < jobs.len() {
            self.scratch.resize_with(jobs.len(), Scratch::default);
        }
        let simd = self.simd;
        let scratch = &mut self.scratch[..jobs.len()];
        let dst = &mut dst[..jobs.len() * slice_len];
        let bytes: &mut [u8] = bytemuck::cast_slice_mut(dst);
        let slice_bytes = slice_len * std::mem::size_of::<T>();
        match T::DTYPE {
            DType::U8 => run_batch::<u8>(scratch, simd, jobs, bytes, slice_bytes, threads),
            DType::I8 => {
                let d: &mut [i8] = bytemuck::cast_slice_mut(bytes);
                run_batch(scratch, simd, jobs, d, slice_bytes, threads)
            }
            DType::F16 => {
                let d: &mut [f16] = bytemuck::cast_slice_mut(bytes);
                run_batch(scratch, simd, jobs, d, slice_bytes / 2, threads)
            }
            DType::F32 => {
                let d: &mut [f32] = bytemuck::cast_slice_mut(bytes);
                run_batch(scratch, simd, jobs, d, slice_bytes / 4, threads)
            }
            other => Err(Error::Unsupported(format!(
                "destination element type {other} is not supported; use u8, i8, f16 or f32"
            ))),
        }
    }
}

/// Runs every job of a batch into its slice of `dst` (`slice_len` elements each).
fn run_batch<T: OutElement>(
    scratch: &mut [Scratch],
    simd: Simd,
    jobs: &[BatchJob<'_>],
    dst: &mut [T],
    slice_len: usize,
    threads: Threads,
) -> Result<()> {
    let one = |((d, job), s): ((&mut [T], &BatchJob<'_>), &mut Scratch)| {
        run(
            s,
            simd,
            job.plan,
            job.src,
            job.src_layout,
            d,
            &job.dst_layout,
            threads,
        )
    };
    if threads.spreads() && jobs.len() > 1 {
        dst.par_chunks_mut(slice_len)
            .zip(jobs.par_iter())
            .zip(scratch.par_iter_mut())
            .try_for_each(one)
    } else {
        dst.chunks_mut(slice_len)
            .zip(jobs.iter())
            .zip(scratch.iter_mut())
            .try_for_each(one)
    }
}

#[allow(clippy::too_many_arguments)]
/// Executes `plan` for one image with `scratch`'s tables and rows.
fn run<T: OutElement>(
    scratch: &mut Scratch,
    simd: Simd,
    plan: &Plan,
    src: &[&[u8]],
    src_layout: &ImageLayout,
    dst: &mut [T],
    dst_layout: &ImageLayout,
    threads: Threads,
) -> Result<()> {
    plan.check_layouts(src_layout, dst_layout)?;
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

    let decoding = decode::decodes(src_layout);
    let (channels, mut count) = sample::channel_sources(src_layout);
    let extra = if decoding {
        count = plan.source_channels.count();
        scratch.decode.build(plan, src_layout);
        scratch.decode.scratch_len()
    } else {
        scratch.tables.build(plan, &channels, count);
        scratch.tables.blend_len()
    };
    let vw = plan.valid[2] as usize;
    let height = plan.dst_height as usize;
    let pixels = plan.dst_width as usize * height;
    let bands = if threads.spreads() && pixels >= PARALLEL_MIN_PIXELS {
        (rayon::current_num_threads() * 4).min(height)
    } else {
        1
    };
    let band_rows = height.div_ceil(bands);
    let bands = height.div_ceil(band_rows);
    let band_scratch = ROWS_PER_BAND * vw + extra;
    if scratch.rows.len() < bands * band_scratch {
        scratch.rows.resize(bands * band_scratch, 0.0);
    }
    let job = Job {
        plan,
        src,
        channels,
        count,
        tables: &scratch.tables,
        decode: decoding.then_some(&scratch.decode),
        simd,
    };
    let scratch = &mut scratch.rows[..bands * band_scratch];
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
    /// Converts destination rows `first_row..` of one band, with the widest instruction
    /// set `self.simd` allows.
    fn band<T: OutElement>(
        &self,
        first_row: usize,
        band: Band<'_, T>,
        strides: [usize; 3],
        scratch: &mut [f32],
    ) {
        match self.simd {
            #[cfg(target_arch = "x86_64")]
            Simd::Avx2 | Simd::Avx512 => {
                // SAFETY: `Simd::Avx2` and `Simd::Avx512` are only chosen after
                // `is_x86_feature_detected!` found AVX2 on this CPU (see
                // `Simd::available`).
                unsafe { self.band_avx2(first_row, band, strides, scratch) }
            }
            // NEON is the aarch64 baseline, so the portable build of the kernel already
            // runs its blends, colour and stores on NEON; `Simd::Neon` differs only in the
            // tap gathers `sample_row` picks for it.
            #[cfg(all(target_arch = "aarch64", target_feature = "neon"))]
            Simd::Neon => self.band_kernel(first_row, band, strides, scratch),
            // Inlined here: the kernel built for the target's baseline (SSE2 on x86-64,
            // NEON on aarch64).
            Simd::Portable => self.band_kernel(first_row, band, strides, scratch),
        }
    }

    /// The same kernel compiled with AVX2 enabled: the compiler widens the vectorised
    /// loops (row blends, colour, stores) to 8 lanes and uses `vpmovzx` for the u8 → f32
    /// widening that SSE2 spells as unpack chains.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    fn band_avx2<T: OutElement>(
        &self,
        first_row: usize,
        band: Band<'_, T>,
        strides: [usize; 3],
        scratch: &mut [f32],
    ) {
        self.band_kernel(first_row, band, strides, scratch);
    }

    /// Converts destination rows `first_row..` of one band. Inlined into `band` and into
    /// each instruction-set wrapper, with everything it calls, so each gets its own code.
    #[inline(always)]
    fn band_kernel<T: OutElement>(
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
                plan.out_scale[c],
                plan.out_bias[c],
            )
        });
        // The padding as a whole packed pixel (colour at its positions, opaque alpha).
        let mut pad_pixel = [T::opaque(); 4];
        for c in 0..oc {
            pad_pixel[plan.dst_channel_positions[c]] = pad[c];
        }
        let (rows_scratch, blend) = scratch.split_at_mut(ROWS_PER_BAND * vw);
        // The decode path uses the blend scratch for its rings; the byte path blends in it.
        let (mut decoder, blend) = match self.decode {
            Some(t) => (Some(BandDecoder::new(t, blend)), &mut [][..]),
            None => (None, blend),
        };
        let (src_rows, out_rows) = rows_scratch.split_at_mut(3 * vw);
        let (s0, rest) = src_rows.split_at_mut(vw);
        let (s1, s2) = rest.split_at_mut(vw);
        let (o0, rest) = out_rows.split_at_mut(vw);
        let (o1, o2) = rest.split_at_mut(vw);
        let mut outs: [&mut [f32]; 3] = [o0, o1, o2];
        // 8-bit unscaled destinations of rows whose samples are source bytes take the
        // fixed-point path (`fixed`): the rows below that read one source row.
        // The same destinations of rows with two taps per column (bilinear) take the
        // fixed-point bilinear path where every channel's columns have its gathers.
        let fixed_point = T::IS_BYTE
            && Simd::fixed_point()
            && decoder.is_none()
            && plan.out_scale == [1.0; 3]
            && plan.out_bias == [0.0; 3];
        let matrix_for = |rows: bool, fraction: u32| {
            (fixed_point && rows)
                .then(|| FixedColour::new(&plan.color_matrix, fraction))
                .flatten()
        };
        let fixed = matrix_for(self.tables.byte_rows(), 0);
        let fixed_q7 = matrix_for(self.tables.q7_rows(self.count), 7);
        // Other destinations (float, f16, normalised or quantised integers) of the same
        // bilinear rows take the fixed-point taps too, then the f32 colour stage: a Q7
        // sample is within 3/128 of a code value of the exact blend (Q14 weights and two
        // roundings to Q7; the f32 outputs' bound is half a code value), and gathering
        // four bytes per column beats blending whole source rows to f32. One-tap rows
        // keep their byte gathers to f32.
        let q7_to_float = fixed_q7.is_none()
            && Simd::fixed_point()
            && decoder.is_none()
            && !self.tables.byte_rows()
            && self.tables.q7_rows(self.count);
        // The band's rows above and below the content: whole padding rows, each run in
        // one fill.
        let content =
            vy.saturating_sub(first_row).min(rows)..(vy + vh).saturating_sub(first_row).min(rows);
        for run in [0..content.start, content.end..rows] {
            match &mut band {
                Band::Packed(b) => {
                    store::fill_rows(b, run, strides[0], dw * bpp, &pad_pixel[..bpp]);
                }
                Band::Planar(planes) => {
                    for (plane, (&stride, pad)) in planes.iter_mut().zip(strides.iter().zip(&pad)) {
                        store::fill_rows(plane, run.clone(), stride, dw, std::slice::from_ref(pad));
                    }
                }
            }
        }
        for r in content {
            let dy = first_row + r;
            // Whether this row's colour values are the bytes in `s1` (fixed-point path)
            // rather than the floats in `outs`.
            let mut in_bytes = false;
            if let Some(decoder) = &mut decoder {
                decoder.sample_row(plan, self.src, dy as u32, [&mut *s0, &mut *s1, &mut *s2]);
            } else {
                let (row_offsets, row_weight) =
                    sample::row_taps(plan, &self.channels, self.count, dy as u32);
                // This row's fixed-point bilinear samples (Q7) into `q`, with a row of
                // bytes of scratch.
                let sample_q7 = |q: [&mut [i16]; 3], blend: &mut [f32], bytes: &mut [u8]| {
                    sample::sample_row_q7(
                        self.src,
                        &self.channels,
                        self.count,
                        self.tables,
                        row_offsets,
                        row_weight,
                        q,
                        blend,
                        bytes,
                        self.simd,
                    )
                };
                if let Some(fixed) = &fixed
                    && sample::one_source_row(&row_offsets, self.count, row_weight)
                {
                    // Source bytes in `s0` (three rows of `vw`), colour bytes in `s1`.
                    let samples: &mut [u8] = bytemuck::cast_slice_mut(&mut *s0);
                    let (b0, rest) = samples.split_at_mut(vw);
                    let (b1, rest) = rest.split_at_mut(vw);
                    let b2 = &mut rest[..vw];
                    sample::sample_row_bytes(
                        self.src,
                        &self.channels,
                        self.count,
                        self.tables,
                        row_offsets,
                        [&mut *b0, &mut *b1, &mut *b2],
                        self.simd,
                    );
                    let s = if self.count == 1 {
                        [&*b0, &*b0, &*b0]
                    } else {
                        [&*b0, &*b1, &*b2]
                    };
                    colour_into_bytes(fixed, self.simd, s, s1, oc);
                    in_bytes = true;
                } else if let Some(fixed) = &fixed_q7 {
                    // Q7 samples in `s0` (two rows of `vw`) and `s2` (the first half),
                    // byte scratch in the rest of `s2`, colour bytes in `s1`.
                    let samples: &mut [i16] = bytemuck::cast_slice_mut(&mut *s0);
                    let (q0, q1) = samples.split_at_mut(vw);
                    let q2: &mut [i16] = bytemuck::cast_slice_mut(&mut *s2);
                    let (q2, spare) = q2.split_at_mut(vw);
                    let bytes: &mut [u8] = bytemuck::cast_slice_mut(spare);
                    sample_q7([&mut *q0, &mut q1[..vw], &mut *q2], blend, bytes);
                    let s = if self.count == 1 {
                        [&*q0, &*q0, &*q0]
                    } else {
                        [&*q0, &q1[..vw], &*q2]
                    };
                    colour_into_bytes(fixed, self.simd, s, s1, oc);
                    in_bytes = true;
                } else if q7_to_float {
                    // Q7 samples in the colour rows' memory (`outs`: two rows of `vw`
                    // in the first, one in the second and byte scratch after it), then
                    // as floats in `s0..s2`.
                    let [o0, o1, _] = &mut outs;
                    let q01: &mut [i16] = bytemuck::cast_slice_mut(o0);
                    let (q0, q1) = q01.split_at_mut(vw);
                    let q2: &mut [i16] = bytemuck::cast_slice_mut(o1);
                    let (q2, spare) = q2.split_at_mut(vw);
                    let bytes: &mut [u8] = bytemuck::cast_slice_mut(spare);
                    let q1 = &mut q1[..vw];
                    sample_q7([&mut *q0, &mut *q1, &mut *q2], blend, bytes);
                    let floats = [&mut *s0, &mut *s1, &mut *s2];
                    for (f, q) in floats.into_iter().zip([&*q0, &*q1, &*q2]).take(self.count) {
                        for (f, &q) in f.iter_mut().zip(q) {
                            // Q7: 7 fractional bits; exact in f32.
                            *f = f32::from(q) * (1.0 / 128.0);
                        }
                    }
                } else {
                    sample::sample_row(
                        self.src,
                        &self.channels,
                        self.count,
                        self.tables,
                        row_offsets,
                        row_weight,
                        [&mut *s0, &mut *s1, &mut *s2],
                        blend,
                        self.simd,
                    );
                }
            }
            if !in_bytes {
                let s: [&[f32]; 3] = if self.count == 1 {
                    [&*s0, &*s0, &*s0]
                } else {
                    [&*s0, &*s1, &*s2]
                };
                store::colour(plan, s, &mut outs[..oc]);
            }
            // The fixed-point path's colour rows (empty unless `in_bytes`).
            let colour_bytes: [&[u8]; 3] = if in_bytes {
                let colours: &[u8] = bytemuck::cast_slice(&*s1);
                [0, 1, 2].map(|c| &colours[c * vw..(c + 1) * vw])
            } else {
                [&[]; 3]
            };
            let (lo, hi) = (vx, vx + vw);
            match &mut band {
                Band::Packed(b) => {
                    let row = &mut b[r * strides[0]..r * strides[0] + dw * bpp];
                    fill_packed_pad(row, 0, lo, &pad_pixel[..bpp]);
                    fill_packed_pad(row, hi, dw, &pad_pixel[..bpp]);
                    if in_bytes {
                        store::store_packed_bytes(
                            self.simd,
                            plan,
                            colour_bytes,
                            oc,
                            &mut row[lo * bpp..],
                            bpp,
                        );
                    } else {
                        store::store_packed(plan, &outs[..oc], &mut row[lo * bpp..], bpp);
                    }
                }
                Band::Planar(planes) => {
                    for c in 0..3 {
                        let row = &mut planes[c][r * strides[c]..r * strides[c] + dw];
                        row[..lo].fill(pad[c]);
                        row[hi..].fill(pad[c]);
                        if in_bytes {
                            store::store_channel_bytes(colour_bytes[c], &mut row[lo..hi]);
                        } else {
                            store::store_channel(
                                &outs[c][..],
                                plan.out_scale[c],
                                plan.out_bias[c],
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

/// The fixed-point colour stage of one row: `oc` output channels from the sample rows
/// `s` (each `vw` long) into consecutive byte rows of `vw` at the start of `scratch` (a
/// float row of `vw`, so four times the bytes needed), where the stores read them.
#[inline(always)]
fn colour_into_bytes<S: fixed::FixedSample>(
    fixed: &FixedColour,
    simd: Simd,
    s: [&[S]; 3],
    scratch: &mut [f32],
    oc: usize,
) {
    let vw = s[0].len();
    let colours: &mut [u8] = bytemuck::cast_slice_mut(scratch);
    let (c0, rest) = colours.split_at_mut(vw);
    let (c1, rest) = rest.split_at_mut(vw);
    let mut out_bytes = [c0, c1, &mut rest[..vw]];
    fixed.colour_rows(simd, s, &mut out_bytes[..oc]);
}

/// Sets pixels `from..to` of a packed row to `pad_pixel` (the pillarbox columns).
#[inline(always)]
fn fill_packed_pad<T: OutElement>(row: &mut [T], from: usize, to: usize, pad_pixel: &[T]) {
    if from < to {
        store::fill_pixels(
            &mut row[from * pad_pixel.len()..to * pad_pixel.len()],
            pad_pixel,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::convert::{ConvertOptions, Crop, Fit, Interpolation, Normalize, Rotation};
    use crate::image::PixelFormat;

    fn random_bytes(len: usize, seed: u32) -> Vec<u8> {
        let mut state = seed;
        (0..len)
            .map(|_| {
                state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                (state >> 24) as u8
            })
            .collect()
    }

    fn convert_with<T: Element + Default + Clone>(
        simd: Simd,
        plan: &Plan,
        src: &[u8],
        src_layout: &ImageLayout,
        dst_layout: &ImageLayout,
    ) -> Vec<T> {
        let mut dst = vec![T::default(); dst_layout.required_len(0) / std::mem::size_of::<T>()];
        CpuConverter::with_simd(simd)
            .convert(
                plan,
                &[src],
                src_layout,
                &mut dst,
                dst_layout,
                Threads::Caller,
            )
            .unwrap();
        dst
    }

    /// The wide kernels to hold against the portable one: every one the hardware runs
    /// (AVX2, and AVX-512 where the CPU has it, on x86-64; NEON on aarch64), even when
    /// `PINFRAME_CPU_SIMD` forces one. Empty (with a SKIPPED line) where there is none; an
    /// x86-64 CPU without AVX2 under `CI=true` is a failure, since the comparison this
    /// lane promises could not run. A CPU without AVX-512 says so and compares AVX2 only:
    /// CI machines need not have it. (On aarch64 NEON is always there.)
    pub(super) fn wide_kernels(test: &str) -> Vec<Simd> {
        let wide: Vec<Simd> = Simd::available()
            .into_iter()
            .filter(|&s| s != Simd::Portable)
            .collect();
        #[cfg(target_arch = "x86_64")]
        if !wide.is_empty() && !wide.contains(&Simd::Avx512) {
            eprintln!(
                "SKIPPED {test} for AVX-512: this CPU lacks AVX-512 F, BW or VBMI (AVX2 compared)"
            );
        }
        if !wide.is_empty() {
            return wide;
        }
        let why = if cfg!(target_arch = "x86_64") {
            "this x86-64 CPU has no AVX2"
        } else {
            "this architecture has no kernel wider than the portable one"
        };
        if cfg!(target_arch = "x86_64") && std::env::var_os("CI").is_some_and(|v| v == "true") {
            panic!("{test}: {why}, so the AVX2 kernels could not be compared");
        }
        eprintln!("SKIPPED {test}: {why}");
        wide
    }

    /// The output of one conversion as bit patterns, whatever the element type.
    fn output_bits(
        simd: Simd,
        plan: &Plan,
        src: &[u8],
        src_layout: &ImageLayout,
        dst_layout: &ImageLayout,
    ) -> Vec<u32> {
        match dst_layout.dtype() {
            DType::F32 => {
                let v: Vec<f32> = convert_with(simd, plan, src, src_layout, dst_layout);
                v.iter().map(|x| x.to_bits()).collect()
            }
            DType::F16 => {
                let v: Vec<f16> = convert_with(simd, plan, src, src_layout, dst_layout);
                v.iter().map(|x| u32::from(x.to_bits())).collect()
            }
            DType::I8 => {
                let v: Vec<i8> = convert_with(simd, plan, src, src_layout, dst_layout);
                v.iter().map(|&x| u32::from(x as u8)).collect()
            }
            _ => {
                let v: Vec<u8> = convert_with(simd, plan, src, src_layout, dst_layout);
                v.iter().map(|&x| u32::from(x)).collect()
            }
        }
    }

    /// Where the portable kernel's output first differs from `wide`'s, if anywhere.
    fn first_difference(
        wide: Simd,
        plan: &Plan,
        src: &[u8],
        src_layout: &ImageLayout,
        dst_layout: &ImageLayout,
    ) -> Option<usize> {
        let portable = output_bits(Simd::Portable, plan, src, src_layout, dst_layout);
        let wide = output_bits(wide, plan, src, src_layout, dst_layout);
        assert_eq!(portable.len(), wide.len());
        portable.iter().zip(&wide).position(|(a, b)| a != b)
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(400))]
        /// Random formats, sizes (up to 4x down and up, so blended and direct rows,
        /// 8-column blocks and their tails), crops and destination types: the wide and
        /// portable kernels agree to the bit.
        #[test]
        fn random_geometry_gives_identical_bits(
            format in 0..PixelFormat::ALL.len(),
            (sw, sh) in (2u32..400, 1u32..60),
            (dw, dh) in (1u32..200, 1u32..40),
            crop in proptest::option::of((0.0f64..0.5, 0.0f64..0.5, 0.5f64..1.0, 0.5f64..1.0)),
            dst in 0usize..5,
            nearest in proptest::bool::weighted(0.2),
            quantized in proptest::bool::ANY,
            seed in proptest::prelude::any::<u32>(),
        ) {
            let wide = wide_kernels("random_geometry_gives_identical_bits");
            let format = PixelFormat::ALL[format];
            // 4:2:x sources need even widths in a tight layout, Bayer whole tiles.
            let sw = if format.chroma_subsampling().0 > 1 { sw & !1 } else { sw };
            let (mw, mh) = format.size_multiple();
            let (sw, sh) = (sw.div_ceil(mw) * mw, sh.div_ceil(mh) * mh);
            let src_layout = ImageLayout::new(sw, sh, format).unwrap();
            let src = random_bytes(src_layout.required_len(0), seed);
            let crop = crop.map(|(x, y, w, h)| {
                let (x, y) = ((x * f64::from(sw)) as u32, (y * f64::from(sh)) as u32);
                Crop {
                    x,
                    y,
                    width: ((w * f64::from(sw - x)) as u32).max(1),
                    height: ((h * f64::from(sh - y)) as u32).max(1),
                }
            });
            let (dst_format, dtype) = [
                (PixelFormat::Rgb, DType::U8),
                (PixelFormat::PlanarRgb, DType::F32),
                (PixelFormat::PlanarBgr, DType::I8),
                (PixelFormat::Bgra, DType::F16),
                (PixelFormat::Grey, DType::U8),
            ][dst];
            let dst_layout = ImageLayout::tight(dw, dh, dst_format, dtype).unwrap();
            let options = ConvertOptions {
                crop,
                interpolation: if nearest { Interpolation::Nearest } else { Interpolation::Bilinear },
                fit: Fit::Stretch,
                normalize: Normalize::IMAGENET,
                // Integer destinations, quantised half the time (per channel).
                quantize: (quantized && matches!(dtype, DType::U8 | DType::I8)).then(|| {
                    let zero = if dtype == DType::U8 { [128, 100, 90] } else { [0, -20, 10] };
                    crate::Quantize::per_channel([0.017, 0.02, 0.019], zero)
                }),
                ..Default::default()
            };
            let plan = Plan::new(&src_layout, &dst_layout, &options).unwrap();
            for wide in wide {
                let diff = first_difference(wide, &plan, &src, &src_layout, &dst_layout);
                proptest::prop_assert_eq!(diff, None, "{:?}: {} {}x{} {:?} -> {}x{} {}", wide, format, sw, sh, crop, dw, dh, dst_format);
            }
        }
    }

    /// The wide kernels (the AVX2 build or NEON, with their pair and interleaved gathers)
    /// and the portable build produce bit-identical outputs: every source format,
    /// downscales with fractional steps (the 1920 → 416 bench ratio among them, and 17:1),
    /// upscales, crops at the borders, rotations, nearest, and every destination element
    /// type.
    #[test]
    fn every_instruction_set_gives_identical_bits() {
        let wide = wide_kernels("every_instruction_set_gives_identical_bits");
        // Source width and height, destination width and height, then the options.
        type Geometry = (u32, u32, u32, u32, Option<Crop>, Rotation, Interpolation);
        let geometries: [Geometry; 12] = [
            (
                480,
                270,
                104,
                104,
                None,
                Rotation::R0,
                Interpolation::Bilinear,
            ),
            (
                482,
                270,
                161,
                67,
                None,
                Rotation::R0,
                Interpolation::Bilinear,
            ),
            (
                64,
                36,
                203,
                117,
                None,
                Rotation::R0,
                Interpolation::Bilinear,
            ),
            (
                250,
                120,
                97,
                45,
                Some(Crop {
                    x: 3,
                    y: 1,
                    width: 247,
                    height: 119,
                }),
                Rotation::R0,
                Interpolation::Bilinear,
            ),
            (
                250,
                120,
                90,
                60,
                Some(Crop {
                    x: 0,
                    y: 0,
                    width: 11,
                    height: 120,
                }),
                Rotation::R180,
                Interpolation::Bilinear,
            ),
            (
                122,
                80,
                50,
                70,
                None,
                Rotation::R90,
                Interpolation::Bilinear,
            ),
            (300, 200, 77, 53, None, Rotation::R0, Interpolation::Nearest),
            // Whole-number downscales land on pixel centres: one tap per column, the
            // byte-shuffle gathers (3:1 with a tail of 2 columns past the 8-column
            // blocks; 2:1 turned over, so the taps run right to left).
            (
                486,
                270,
                162,
                90,
                None,
                Rotation::R0,
                Interpolation::Bilinear,
            ),
            (
                250,
                120,
                125,
                60,
                None,
                Rotation::R180,
                Interpolation::Bilinear,
            ),
            // 17:1 (3840 → 224): groups of four columns span 48 bytes or more, so the
            // two-tap gathers load one 8-byte window per column.
            (
                962,
                120,
                56,
                14,
                None,
                Rotation::R0,
                Interpolation::Bilinear,
            ),
            // Fewer columns than a gather group at an extreme downscale: the fixed-point
            // bilinear path with no whole group, on spans too wide to blend whole.
            (46, 24, 3, 6, None, Rotation::R0, Interpolation::Bilinear),
            (92, 2, 2, 3, None, Rotation::R0, Interpolation::Bilinear),
        ];
        for format in PixelFormat::ALL {
            for &(sw, sh, dw, dh, crop, rotation, interpolation) in &geometries {
                let (mw, mh) = format.size_multiple();
                let (sw, sh) = (sw.div_ceil(mw) * mw, sh.div_ceil(mh) * mh);
                let src_layout = ImageLayout::new(sw, sh, format).unwrap();
                let src = random_bytes(src_layout.required_len(0), sw ^ dw);
                let options = ConvertOptions {
                    crop,
                    rotation,
                    interpolation,
                    fit: Fit::Letterbox { pad: [114; 3] },
                    normalize: Normalize::IMAGENET,
                    ..Default::default()
                };
                let label = format!("{format} {sw}x{sh} -> {dw}x{dh} {crop:?} {rotation:?}");
                for (dst_format, dtype) in [
                    (PixelFormat::Rgb, DType::U8),
                    (PixelFormat::PlanarRgb, DType::F32),
                    (PixelFormat::PlanarBgr, DType::I8),
                    (PixelFormat::Bgra, DType::F16),
                    (PixelFormat::Grey, DType::U8),
                ] {
                    let dst_layout = ImageLayout::tight(dw, dh, dst_format, dtype).unwrap();
                    let plan = Plan::new(&src_layout, &dst_layout, &options).unwrap();
                    for &wide in &wide {
                        let first_diff =
                            first_difference(wide, &plan, &src, &src_layout, &dst_layout);
                        assert_eq!(
                            first_diff, None,
                            "{label} into {dst_format} {dtype}: portable and {wide:?} differ"
                        );
                    }
                }
            }
        }
    }
}
