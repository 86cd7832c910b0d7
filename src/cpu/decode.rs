//! Stage 1 for the sources the byte sampler of `sample` cannot read: Bayer frames (the
//! RAW steps and a Malvar-He-Cutler demosaic, `Plan`'s module documentation states them),
//! 16-bit-word YUV (P010, P012, P016) and deep grey (Y10, Y12, Y16). Each source pixel the
//! taps read is decoded into its channels in 0..=255 units; the taps then interpolate the
//! decoded values, so the rest of the fused pass (colour, clamp, normalise, store) is the
//! one every source takes.
//!
//! Untransposed rows decode each source row once: a Bayer row first linearises (black
//! level, gains, clip) the span of the five source rows its 5x5 filters read into a small
//! ring, then demosaics from it either the columns the taps read, or, when the taps read
//! most columns, every column from the first to the last in site pairs. A band keeps the last decoded rows, so neighbouring destination rows that
//! read the same source row (upscales) decode it once. Rotations by 90 or 270 degrees
//! read source columns per destination row and decode each tap on its own, with the same
//! arithmetic, so both routes give the same bits.
//!
//! Written here rather than taken from a crate: the demosaic has to run on the taps'
//! pixels inside the fused pass, with the plan's exact clip and order, which no
//! debayering crate offers (they fill whole frames).

use crate::convert::Plan;
use crate::convert::plan::RawPlan;
use crate::image::{CfaSite, FormatFamily, ImageLayout, SampleStorage};
use crate::{Gamma, Plane};

/// Entries of the sRGB table over 0..=1 (interpolated linearly between them): at most
/// 0.01 (in 0..=255 units) from the exact curve (`srgb_table_is_the_curve` measures it),
/// where a `powf` per channel and pixel would cost about 15 ns.
const SRGB_TABLE_STEPS: usize = 4096;

/// Linearised rows a Bayer band keeps: the 5 rows one source row's filters read, for
/// two consecutive source rows (6 distinct rows), in a ring indexed by `row % 8`.
const LINEAR_SLOTS: usize = 8;

/// Decoded source rows a band keeps (a destination row reads two consecutive ones, so
/// they never share a slot at `row % 2`).
const DECODED_SLOTS: usize = 2;

/// How one kind of source decodes.
#[derive(Clone, Debug, PartialEq)]
enum Source {
    Bayer(RawPlan),
    /// Y10/Y12/Y16: `255 * min(word, white) / white`.
    DeepGrey {
        white: u32,
        scale: f32,
    },
    /// P010/P012/P016: `word / 256` for Y, Cb and Cr.
    Yuv16,
}

/// The per-plan tables of the decode path: which source columns the taps read, where
/// each tap sits among them, and the constants of the source's decode.
#[derive(Default)]
pub(crate) struct DecodeTables {
    source: Option<Source>,
    planes: [Plane; 2],
    width: u32,
    height: u32,
    /// Untransposed: the distinct source columns the taps read, ascending.
    cols: Vec<u32>,
    /// Per valid destination column: the indices in `cols` of its two taps, and the
    /// weight of the second.
    taps: Vec<[u32; 2]>,
    weights: Vec<f32>,
    /// Bayer: per entry of `cols`, the (mirrored) columns `x - 2 ..= x + 2` as indices
    /// into the linearised span that starts at `span_lo`.
    neighbours: Vec<[u32; 5]>,
    span_lo: u32,
    span_len: usize,
    /// Bayer, untransposed: `cols` is every column from its first to its last, because
    /// the taps read most of them; rows then demosaic in site pairs (see `decoded_row`).
    dense: bool,
    /// Transposed: per valid destination column, the source row taps and weight.
    row_taps: Vec<(u32, u32, f32)>,
    /// sRGB curve at `SRGB_TABLE_STEPS` points (plus one), when the plan asks for it.
    srgb: Vec<f32>,
    channels: usize,
    built_for: Option<(Plan, ImageLayout)>,
}

/// True when `layout`'s format goes through this module rather than `sample`.
pub(crate) fn decodes(layout: &ImageLayout) -> bool {
    matches!(
        layout.format().family(),
        FormatFamily::Bayer | FormatFamily::DeepGrey | FormatFamily::SemiPlanarYuv16
    )
}

/// Mirrors `i` into `0..n` without repeating the edge (-1 reads 1, `n` reads `n - 2`),
/// twice over, so a 5x5 neighbourhood fits even a 2-pixel image.
#[inline(always)]
fn mirror(i: i64, n: i64) -> u32 {
    let i = i.abs();
    let i = if i >= n { 2 * (n - 1) - i } else { i };
    i.unsigned_abs() as u32
}

impl DecodeTables {
    /// Refills the tables for `plan` on `layout` (a format that [`decodes`]).
    pub fn build(&mut self, plan: &Plan, layout: &ImageLayout) {
        if self
            .built_for
            .as_ref()
            .is_some_and(|(p, l)| p == plan && l == layout)
        {
            return;
        }
        self.built_for = None;
        let format = layout.format();
        self.source = Some(match (plan.raw, format.storage()) {
            (Some(raw), _) => Source::Bayer(raw),
            (None, SampleStorage::Le16High { .. }) => Source::Yuv16,
            (None, storage) => {
                let white = storage.max_value();
                Source::DeepGrey {
                    white,
                    scale: (255.0 / f64::from(white)) as f32,
                }
            }
        });
        self.channels = plan.source_channels.count();
        self.planes = [0, 1].map(|i| layout.planes().get(i).copied().unwrap_or_default());
        self.width = layout.width();
        self.height = layout.height();
        let [vx, _, vw, _] = plan.valid;
        self.dense = false;
        self.cols.clear();
        self.taps.clear();
        self.weights.clear();
        self.row_taps.clear();
        self.neighbours.clear();
        if plan.transposed {
            for dx in vx..vx + vw {
                let t = plan.taps(1, dx);
                self.row_taps.push((t.i0, t.i1, t.weight as f32));
            }
        } else {
            let column_taps: Vec<_> = (vx..vx + vw).map(|dx| plan.taps(0, dx)).collect();
            self.cols
                .extend(column_taps.iter().flat_map(|t| [t.i0, t.i1]));
            self.cols.sort_unstable();
            self.cols.dedup();
            let (first, last) = (self.cols[0], self.cols[self.cols.len() - 1]);
            // Demosaicing the few columns between the taps' as well costs less than picking
            // the taps' ones out one by one (measured: 1080p -> 640 reads 2 of 3 columns;
            // whole rows in site pairs took 3.9 ms where the picked columns took 4.4).
            self.dense = plan.raw.is_some() && 2 * self.cols.len() as u32 > last - first;
            if self.dense {
                self.cols.clear();
                self.cols.extend(first..=last);
            }
            let index = |x: u32| self.cols.binary_search(&x).unwrap_or(0) as u32;
            for t in &column_taps {
                self.taps.push([index(t.i0), index(t.i1)]);
                self.weights.push(t.weight as f32);
            }
            let w = i64::from(self.width);
            // The span starts on a packing group (and so on an even column), so that
            // `linear_row` walks whole groups with the two sites' constants in step.
            let group = format.storage().group().0.max(2);
            self.span_lo = first.saturating_sub(2) / group * group;
            let span_hi = (last + 3).min(self.width);
            self.span_len = (span_hi - self.span_lo) as usize;
            let lo = self.span_lo;
            self.neighbours.extend(
                self.cols
                    .iter()
                    .map(|&x| [-2i64, -1, 0, 1, 2].map(|d| mirror(i64::from(x) + d, w) - lo)),
            );
        }
        self.srgb.clear();
        if plan.raw.is_some_and(|r| r.gamma == Gamma::Srgb) {
            self.srgb.extend((0..=SRGB_TABLE_STEPS).map(|i| {
                let c = i as f64 / SRGB_TABLE_STEPS as f64;
                let g = if c <= 0.003_130_8 {
                    12.92 * c
                } else {
                    1.055 * c.powf(1.0 / 2.4) - 0.055
                };
                g as f32
            }));
        }
        self.built_for = Some((plan.clone(), *layout));
    }

    /// Floats of scratch one band needs.
    pub fn scratch_len(&self) -> usize {
        let decoded = DECODED_SLOTS * 3 * self.cols.len();
        match self.source {
            Some(Source::Bayer(_)) if !self.cols.is_empty() => {
                decoded + LINEAR_SLOTS * self.span_len
            }
            _ => decoded,
        }
    }
}

/// Reads sample `x` of a row of codes stored as `storage`.
#[inline(always)]
fn code_at(storage: SampleStorage, row: &[u8], x: usize) -> u32 {
    match storage {
        SampleStorage::Byte => u32::from(row[x]),
        SampleStorage::Le16Low { .. } | SampleStorage::Le16High { .. } => {
            u32::from(u16::from_le_bytes([row[2 * x], row[2 * x + 1]]))
        }
        SampleStorage::Csi2Packed10 => {
            let g = x / 4 * 5;
            let low = (row[g + 4] >> (2 * (x % 4))) & 3;
            u32::from(row[g + x % 4]) << 2 | u32::from(low)
        }
        SampleStorage::Csi2Packed12 => {
            let g = x / 2 * 3;
            let low = (row[g + 2] >> (4 * (x % 2))) & 15;
            u32::from(row[g + x % 2]) << 4 | u32::from(low)
        }
    }
}

/// Step 1 of the RAW steps for one code at a site: black level, gain, clip to 0..=1.
#[inline(always)]
fn linearise(raw: &RawPlan, white: u32, code: u32, site: CfaSite) -> f32 {
    let k = site as usize;
    ((code.min(white) as f32 - raw.black[k]) * raw.scale[k]).clamp(0.0, 1.0)
}

/// Step 2: Malvar-He-Cutler at a pixel of colour site `site`, from the linearised
/// neighbourhood `v(dx, dy)` (`dx`, `dy` in -2..=2).
#[inline(always)]
fn demosaic(site: CfaSite, v: impl Fn(usize, usize) -> f32) -> [f32; 3] {
    // Indices are offsets + 2.
    let centre = v(2, 2);
    let axes2 = v(0, 2) + v(4, 2) + v(2, 0) + v(2, 4);
    let diag = v(1, 1) + v(3, 1) + v(1, 3) + v(3, 3);
    match site {
        CfaSite::R | CfaSite::B => {
            let cross = v(1, 2) + v(3, 2) + v(2, 1) + v(2, 3);
            let green = (4.0 * centre + 2.0 * cross - axes2) * 0.125;
            let across = (6.0 * centre + 2.0 * diag - 1.5 * axes2) * 0.125;
            if site == CfaSite::R {
                [centre, green, across]
            } else {
                [across, green, centre]
            }
        }
        CfaSite::Gr | CfaSite::Gb => {
            let beside = (5.0 * centre + 4.0 * (v(1, 2) + v(3, 2)) - (v(0, 2) + v(4, 2)) - diag
                + 0.5 * (v(2, 0) + v(2, 4)))
                * 0.125;
            let above = (5.0 * centre + 4.0 * (v(2, 1) + v(2, 3)) - (v(2, 0) + v(2, 4)) - diag
                + 0.5 * (v(0, 2) + v(4, 2)))
                * 0.125;
            // Green on a red row has red left and right, blue above and below.
            if site == CfaSite::Gr {
                [beside, centre, above]
            } else {
                [above, centre, beside]
            }
        }
    }
}

/// What steps 3 and 4 do, decided once per row rather than per pixel.
struct Post<'a> {
    /// The identity matrix gives the same bits without the products (1 * v + 0 * w is v
    /// for finite values), and is the default.
    identity_ccm: bool,
    /// The sRGB table, when the plan asks for the curve.
    srgb: Option<&'a [f32]>,
}

impl DecodeTables {
    fn post(&self, raw: &RawPlan) -> Post<'_> {
        Post {
            identity_ccm: raw.ccm == crate::Isp::IDENTITY.ccm,
            srgb: (self.srgb.len() > SRGB_TABLE_STEPS).then_some(&self.srgb[..]),
        }
    }
}

/// Steps 3 and 4: colour matrix, clip, gamma, times 255.
#[inline(always)]
fn finish(raw: &RawPlan, post: &Post<'_>, rgb: [f32; 3]) -> [f32; 3] {
    let m = &raw.ccm;
    // A loop over an array, not `[0, 1, 2].map`: the map's closure was not inlined here
    // and cost a third of a 1080p RAW conversion (profiled).
    let mut out = [0.0f32; 3];
    for (r, o) in out.iter_mut().enumerate() {
        let c = if post.identity_ccm {
            rgb[r]
        } else {
            m[r][0] * rgb[0] + m[r][1] * rgb[1] + m[r][2] * rgb[2]
        }
        .clamp(0.0, 1.0);
        let g = if let Some(srgb) = post.srgb {
            let at = c * SRGB_TABLE_STEPS as f32;
            let i = (at as usize).min(SRGB_TABLE_STEPS - 1);
            let frac = at - i as f32;
            srgb[i] + (srgb[i + 1] - srgb[i]) * frac
        } else {
            c
        };
        *o = g * 255.0;
    }
    out
}

/// One band's decoding state: the rings of linearised and decoded rows, in the band's
/// scratch.
struct Rings<'a> {
    linear: &'a mut [f32],
    linear_rows: [Option<u32>; LINEAR_SLOTS],
    decoded: &'a mut [f32],
    decoded_rows: [Option<u32>; DECODED_SLOTS],
}

impl DecodeTables {
    fn row<'s>(&self, src: &'s [&[u8]], plane: usize, y: u32) -> &'s [u8] {
        let p = self.planes[plane];
        &src[p.buffer][p.offset + y as usize * p.stride..]
    }

    /// Decodes source pixel `(x, y)` on its own (the transposed route).
    fn pixel(&self, src: &[&[u8]], x: u32, y: u32) -> [f32; 3] {
        match &self.source {
            Some(Source::Bayer(raw)) => {
                let (w, h) = (i64::from(self.width), i64::from(self.height));
                let white = raw.storage.max_value();
                let v = |dx: usize, dy: usize| {
                    let sx = mirror(i64::from(x) + dx as i64 - 2, w);
                    let sy = mirror(i64::from(y) + dy as i64 - 2, h);
                    let code = code_at(raw.storage, self.row(src, 0, sy), sx as usize);
                    linearise(raw, white, code, raw.cfa.site(sx, sy))
                };
                finish(raw, &self.post(raw), demosaic(raw.cfa.site(x, y), v))
            }
            Some(Source::DeepGrey { white, scale }) => {
                let code = code_at(
                    SampleStorage::Le16Low { bits: 16 },
                    self.row(src, 0, y),
                    x as usize,
                );
                let g = code.min(*white) as f32 * scale;
                [g, g, g]
            }
            _ => {
                let luma = self.row(src, 0, y);
                let chroma = self.row(src, 1, y / 2);
                let word = |row: &[u8], i: usize| {
                    f32::from(u16::from_le_bytes([row[2 * i], row[2 * i + 1]])) * (1.0 / 256.0)
                };
                let c = (x / 2 * 2) as usize;
                [word(luma, x as usize), word(chroma, c), word(chroma, c + 1)]
            }
        }
    }

    /// Linearises the span of source row `y` into its ring slot, unless it is there.
    fn linear_row(&self, raw: &RawPlan, src: &[&[u8]], rings: &mut Rings<'_>, y: u32) {
        let slot = y as usize % LINEAR_SLOTS;
        if rings.linear_rows[slot] == Some(y) {
            return;
        }
        let white = raw.storage.max_value();
        let row = self.row(src, 0, y);
        let out = &mut rings.linear[slot * self.span_len..(slot + 1) * self.span_len];
        let lo = self.span_lo as usize;
        // `lo` is even: even entries are the row's even columns.
        let [even, odd] = [raw.cfa.site(0, y), raw.cfa.site(1, y)];
        let pair = |o: &mut [f32], c0: u32, c1: u32| {
            o[0] = linearise(raw, white, c0, even);
            o[1] = linearise(raw, white, c1, odd);
        };
        // Whole packing groups in straight-line loops without index checks (measured: the
        // per-pixel form, with its checks and site lookups, took half of a 1080p RAW
        // conversion), then the tail pixel by pixel.
        let (group, bytes) = raw.storage.group();
        let groups = self.span_len / group.max(2) as usize;
        let data = &row[lo / group as usize * bytes..];
        let whole_len = groups * group.max(2) as usize;
        let (whole, tail) = out.split_at_mut(whole_len);
        match raw.storage {
            SampleStorage::Byte => {
                for (o, c) in whole.chunks_exact_mut(2).zip(data.chunks_exact(2)) {
                    pair(o, u32::from(c[0]), u32::from(c[1]));
                }
            }
            SampleStorage::Csi2Packed10 => {
                for (o, c) in whole.chunks_exact_mut(4).zip(data.chunks_exact(5)) {
                    let low = u32::from(c[4]);
                    let code = |k: usize| u32::from(c[k]) << 2 | (low >> (2 * k)) & 3;
                    pair(&mut o[..2], code(0), code(1));
                    pair(&mut o[2..], code(2), code(3));
                }
            }
            SampleStorage::Csi2Packed12 => {
                for (o, c) in whole.chunks_exact_mut(2).zip(data.chunks_exact(3)) {
                    let low = u32::from(c[2]);
                    pair(
                        o,
                        u32::from(c[0]) << 4 | low & 15,
                        u32::from(c[1]) << 4 | low >> 4,
                    );
                }
            }
            SampleStorage::Le16Low { .. } | SampleStorage::Le16High { .. } => {
                for (o, c) in whole.chunks_exact_mut(2).zip(data.chunks_exact(4)) {
                    let c0 = u32::from(u16::from_le_bytes([c[0], c[1]]));
                    let c1 = u32::from(u16::from_le_bytes([c[2], c[3]]));
                    pair(o, c0, c1);
                }
            }
        }
        let sites = [even, odd];
        for (i, o) in tail.iter_mut().enumerate() {
            let x = lo + whole_len + i;
            *o = linearise(raw, white, code_at(raw.storage, row, x), sites[x & 1]);
        }
        rings.linear_rows[slot] = Some(y);
    }

    /// Decodes the needed columns of source row `y` into its ring slot, unless it is
    /// there; returns the slot's offset in `rings.decoded`.
    fn decoded_row(&self, src: &[&[u8]], rings: &mut Rings<'_>, y: u32) -> usize {
        let n = self.cols.len();
        let slot = y as usize % DECODED_SLOTS;
        let base = slot * 3 * n;
        if rings.decoded_rows[slot] == Some(y) {
            return base;
        }
        match &self.source {
            Some(Source::Bayer(raw)) => {
                let h = i64::from(self.height);
                let rows = [-2i64, -1, 0, 1, 2].map(|d| mirror(i64::from(y) + d, h));
                for &r in &rows {
                    self.linear_row(raw, src, rings, r);
                }
                let len = self.span_len;
                let lin = &*rings.linear;
                let rows = rows.map(|r| {
                    let at = (r as usize % LINEAR_SLOTS) * len;
                    &lin[at..at + len]
                });
                let out = &mut rings.decoded[base..base + 3 * n];
                let (r_out, rest) = out.split_at_mut(n);
                let (g_out, b_out) = rest.split_at_mut(n);
                let (lo, w) = (self.span_lo, self.width);
                let post = self.post(raw);
                // Dense rows: the interior's even-aligned pairs of columns in a loop whose
                // two sites are constants (so the filters' site choice folds away), the
                // few columns before and after them one by one below.
                let first = self.cols[0];
                let (mut pair_from, mut pair_to) = (0usize, 0usize);
                let a = first.max(2).next_multiple_of(2);
                let end = (first + n as u32).min(w.saturating_sub(2));
                let pairs = (end.saturating_sub(a) / 2) as usize;
                if self.dense && pairs > 0 {
                    pair_from = (a - first) as usize;
                    pair_to = pair_from + 2 * pairs;
                    let c0 = (a - lo) as usize - 2;
                    // The loop reads rows[..][c0 .. c0 + 2 * pairs + 4] and writes entries
                    // pair_from .. pair_to: checked here once, not at each of its 26 reads
                    // and 6 writes a pair (measured: 15% of a 1080p RAW conversion).
                    assert!(rows.iter().all(|r| c0 + 2 * pairs + 4 <= r.len()));
                    assert!(pair_to <= r_out.len().min(g_out.len()).min(b_out.len()));
                    let at = |dy: usize, i: usize| {
                        // SAFETY: `dy < 5 == rows.len()` (the filters' offsets) and
                        // `i < c0 + 2 * pairs + 4 <= rows[dy].len()` (asserted above:
                        // the loop's `i` is at most `c0 + 2 * (pairs - 1) + 1 + 4`).
                        unsafe { *rows.get_unchecked(dy).get_unchecked(i) }
                    };
                    let store = |out: &mut [f32], i: usize, even: f32, odd: f32| {
                        // SAFETY: `i + 1 < pair_to <= out.len()` (asserted above: `i`
                        // is at most `pair_from + 2 * (pairs - 1)`).
                        unsafe {
                            *out.get_unchecked_mut(i) = even;
                            *out.get_unchecked_mut(i + 1) = odd;
                        }
                    };
                    macro_rules! pairs {
                        ($even:expr, $odd:expr) => {
                            for k in 0..pairs {
                                let c = c0 + 2 * k;
                                let e = demosaic($even, |dx, dy| at(dy, c + dx));
                                let o = demosaic($odd, |dx, dy| at(dy, c + 1 + dx));
                                let (e, o) = (finish(raw, &post, e), finish(raw, &post, o));
                                let i = pair_from + 2 * k;
                                store(r_out, i, e[0], o[0]);
                                store(g_out, i, e[1], o[1]);
                                store(b_out, i, e[2], o[2]);
                            }
                        };
                    }
                    use CfaSite::{B, Gb, Gr, R};
                    match (raw.cfa.site(a, y), raw.cfa.site(a + 1, y)) {
                        (R, Gr) => pairs!(R, Gr),
                        (Gr, R) => pairs!(Gr, R),
                        (Gb, B) => pairs!(Gb, B),
                        (B, Gb) => pairs!(B, Gb),
                        (even, odd) => pairs!(even, odd),
                    }
                }
                let rest = (0..pair_from).chain(pair_to..n);
                for i in rest {
                    let (x, nb) = (self.cols[i], &self.neighbours[i]);
                    let site = raw.cfa.site(x, y);
                    let rgb = if x >= 2 && x + 2 < w {
                        // Inside the image the neighbours are the span's next entries.
                        let c = (x - lo) as usize - 2;
                        let v = |dx: usize, dy: usize| rows[dy][c + dx];
                        demosaic(site, v)
                    } else {
                        demosaic(site, |dx: usize, dy: usize| rows[dy][nb[dx] as usize])
                    };
                    let rgb = finish(raw, &post, rgb);
                    r_out[i] = rgb[0];
                    g_out[i] = rgb[1];
                    b_out[i] = rgb[2];
                }
            }
            _ => {
                let out = &mut rings.decoded[base..base + 3 * n];
                for (i, &x) in self.cols.iter().enumerate() {
                    let p = self.pixel(src, x, y);
                    for c in 0..self.channels {
                        out[c * n + i] = p[c];
                    }
                }
            }
        }
        rings.decoded_rows[slot] = Some(y);
        base
    }
}

/// A band's decoder: the tables plus the band's rings.
pub(crate) struct BandDecoder<'a> {
    tables: &'a DecodeTables,
    rings: Rings<'a>,
}

impl<'a> BandDecoder<'a> {
    /// A decoder whose rings live in `scratch` (at least [`DecodeTables::scratch_len`]
    /// floats).
    pub fn new(tables: &'a DecodeTables, scratch: &'a mut [f32]) -> Self {
        let decoded_len = DECODED_SLOTS * 3 * tables.cols.len();
        let (decoded, linear) = scratch.split_at_mut(decoded_len);
        BandDecoder {
            tables,
            rings: Rings {
                linear,
                linear_rows: [None; LINEAR_SLOTS],
                decoded,
                decoded_rows: [None; DECODED_SLOTS],
            },
        }
    }

    /// Interpolates the decoded channels for the valid columns of destination row `dy`
    /// into `outs[c]` (as `sample::sample_row` does for byte sources).
    pub fn sample_row(&mut self, plan: &Plan, src: &[&[u8]], dy: u32, outs: [&mut [f32]; 3]) {
        let t = self.tables;
        let channels = t.channels;
        if plan.transposed {
            let col = plan.taps(0, dy);
            let wx = col.weight as f32;
            for (j, &(y0, y1, wy)) in t.row_taps.iter().enumerate() {
                let top = lerp3(t.pixel(src, col.i0, y0), t.pixel(src, col.i1, y0), wx);
                let bottom = if y1 == y0 || wy == 0.0 {
                    top
                } else {
                    lerp3(t.pixel(src, col.i0, y1), t.pixel(src, col.i1, y1), wx)
                };
                for c in 0..channels {
                    outs[c][j] = top[c] + (bottom[c] - top[c]) * wy;
                }
            }
            return;
        }
        let rows = plan.taps(1, dy);
        let wy = rows.weight as f32;
        let n = t.cols.len();
        let a = t.decoded_row(src, &mut self.rings, rows.i0);
        let two_rows = rows.i1 != rows.i0 && wy != 0.0;
        let b = if two_rows {
            t.decoded_row(src, &mut self.rings, rows.i1)
        } else {
            a
        };
        let decoded = &*self.rings.decoded;
        for (c, out) in outs.into_iter().enumerate().take(channels) {
            let r0 = &decoded[a + c * n..a + (c + 1) * n];
            let r1 = &decoded[b + c * n..b + (c + 1) * n];
            for ((o, &[i0, i1]), &wx) in out.iter_mut().zip(&t.taps).zip(&t.weights) {
                let (i0, i1) = (i0 as usize, i1 as usize);
                let top = r0[i0] + (r0[i1] - r0[i0]) * wx;
                *o = if two_rows {
                    let bottom = r1[i0] + (r1[i1] - r1[i0]) * wx;
                    top + (bottom - top) * wy
                } else {
                    top
                };
            }
        }
    }
}

#[inline(always)]
fn lerp3(a: [f32; 3], b: [f32; 3], w: f32) -> [f32; 3] {
    [0, 1, 2].map(|c| a[c] + (b[c] - a[c]) * w)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sRGB table, interpolated as `finish` does, against the exact curve in f64 at
    /// 100,000 points over 0..=1 (the steep start included).
    #[test]
    fn srgb_table_is_the_curve() {
        let mut tables = DecodeTables::default();
        let src = ImageLayout::new(8, 8, crate::PixelFormat::Rggb8).unwrap();
        let dst = ImageLayout::new(8, 8, crate::PixelFormat::Rgb).unwrap();
        let options = crate::ConvertOptions {
            isp: crate::Isp {
                gamma: Gamma::Srgb,
                ..crate::Isp::IDENTITY
            },
            ..Default::default()
        };
        let plan = Plan::new(&src, &dst, &options).unwrap();
        tables.build(&plan, &src);
        let raw = plan.raw.unwrap();
        let post = tables.post(&raw);
        let mut worst = 0.0f64;
        for i in 0..=100_000 {
            let c = f64::from(i) / 100_000.0;
            let got = finish(&raw, &post, [c as f32; 3])[0];
            let exact = if c <= 0.003_130_8 {
                12.92 * c
            } else {
                1.055 * c.powf(1.0 / 2.4) - 0.055
            };
            worst = worst.max((f64::from(got) - 255.0 * exact).abs());
        }
        eprintln!("sRGB table: at most {worst:.4} from the curve (0..=255 units)");
        assert!(worst < 0.01, "{worst}");
    }
}
