//! Regions of a frame for second-stage models and tiled detection: the crop a detection
//! box becomes (a face for a landmark model, a person for a pose model), the tiles of a
//! large frame a detector runs on one by one (SAHI-style slicing), and the way back:
//! boxes in a slice's pixels to source pixels, and the merge of the duplicates that
//! neighbouring tiles report.
//!
//! ```
//! use pinframe::convert::regions::{crop_for_box, DetectionBox, RegionAspect};
//! // A face near the right edge of a 1920x1080 frame, 1.5 times larger, square.
//! let face = DetectionBox::new(1850.0, 400.0, 1910.0, 470.0);
//! let crop = crop_for_box(face, 1920, 1080, 1.5, RegionAspect::Square)?;
//! assert_eq!(crop.width, crop.height);
//! assert!(crop.x + crop.width <= 1920);
//! # Ok::<(), pinframe::Error>(())
//! ```

use crate::convert::{ConvertInfo, Crop};
use crate::{Error, Result};

/// An axis-aligned box in source pixels (continuous coordinates, pixel `i` spanning
/// `[i, i + 1)`), as detectors report them: left, top, right, bottom.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct DetectionBox {
    /// Left edge.
    pub x0: f64,
    /// Top edge.
    pub y0: f64,
    /// Right edge (greater than `x0` for a non-empty box).
    pub x1: f64,
    /// Bottom edge (greater than `y0` for a non-empty box).
    pub y1: f64,
}

impl DetectionBox {
    /// A box from its left, top, right and bottom edges.
    pub const fn new(x0: f64, y0: f64, x1: f64, y1: f64) -> Self {
        DetectionBox { x0, y0, x1, y1 }
    }

    /// The area, 0 for an empty or inverted box (so such a box overlaps nothing).
    fn area(&self) -> f64 {
        (self.x1 - self.x0).max(0.0) * (self.y1 - self.y0).max(0.0)
    }
}

/// The shape a region is given before it is cropped: the shape of the model input it is
/// converted into, so that a letterbox adds no padding and a stretch no distortion.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub enum RegionAspect {
    /// The box's own shape (after the margin).
    #[default]
    AsIs,
    /// Width equals height (most face and landmark models).
    Square,
    /// Width divided by height of the model input (e.g. `192.0 / 256.0` for a 192x256
    /// pose model); finite and positive.
    Ratio(f64),
}

impl RegionAspect {
    /// The ratio to reach, `None` for the box's own; checked.
    fn ratio(self) -> Result<Option<f64>> {
        match self {
            RegionAspect::AsIs => Ok(None),
            RegionAspect::Square => Ok(Some(1.0)),
            RegionAspect::Ratio(r) if r.is_finite() && r > 0.0 => Ok(Some(r)),
            RegionAspect::Ratio(r) => Err(Error::InvalidArgument(format!(
                "region aspect ratio {r} must be finite and positive (width / height of the \
                 model input)"
            ))),
        }
    }
}

/// Float noise (a centre times a margin) must not cost a whole extra pixel, so edges
/// this close to an integer count as on it.
const EPS: f64 = 1e-6;

/// The crop of a `frame_width` x `frame_height` frame that a detection box becomes, for
/// a second-stage model.
///
/// In order:
/// 1. the box is scaled about its centre by `margin` (1.0 keeps it as is, 1.5 adds a
///    quarter of its size on each side; finite and positive);
/// 2. its shorter side (relative to `aspect`) is extended, about the centre, until it
///    has the aspect;
/// 3. it is fitted into the frame. A region larger than the frame on an axis shrinks,
///    about its centre, to the frame on that axis, and the other axis shrinks with it
///    so the aspect holds ([`RegionAspect::AsIs`] shrinks each axis on its own).
///    Otherwise a region that crosses an edge is shifted inside rather than cut, so a
///    face at the border keeps its size and aspect (it is no longer centred on the box);
/// 4. it is rounded outward to whole pixels (it covers every pixel the fitted region
///    touches), and then, for an aspect, one side grows, by up to 16 pixels, to the
///    smallest size whose aspect is exact (always possible for
///    [`RegionAspect::Square`], and for any ratio `p / q` of whole numbers up to 17,
///    such as 16:9, 4:3 or 3:4, unless the frame is too small); a ratio no such size
///    has gets the nearest one the rounding gives. When an exact size only fits the frame without the pixel the
///    outward rounding added (a region as tall as the frame, say), the region's size is
///    rounded up instead and placed to the nearest pixel: the aspect wins over the last
///    fraction of a pixel of cover.
///
/// The crop is at least 1x1 and inside the frame.
///
/// Errors ([`Error::InvalidArgument`]): a zero-size frame; a box coordinate that is not
/// finite; an empty or inverted box (`x1 <= x0` or `y1 <= y0`); a box entirely outside
/// the frame (sharing only an edge counts as outside); a margin or ratio that is not
/// finite and positive.
pub fn crop_for_box(
    b: DetectionBox,
    frame_width: u32,
    frame_height: u32,
    margin: f64,
    aspect: RegionAspect,
) -> Result<Crop> {
    if frame_width == 0 || frame_height == 0 {
        return Err(Error::InvalidArgument(format!(
            "frame {frame_width}x{frame_height} is empty; a region needs a frame of at least \
             1x1"
        )));
    }
    if ![b.x0, b.y0, b.x1, b.y1].iter().all(|v| v.is_finite()) {
        return Err(Error::InvalidArgument(format!(
            "detection box {b:?} has a coordinate that is not finite"
        )));
    }
    if b.x1 <= b.x0 || b.y1 <= b.y0 {
        return Err(Error::InvalidArgument(format!(
            "detection box {b:?} is empty or inverted; x1 must exceed x0 and y1 exceed y0"
        )));
    }
    if !margin.is_finite() || margin <= 0.0 {
        return Err(Error::InvalidArgument(format!(
            "region margin {margin} must be finite and positive (1.0 keeps the box as is)"
        )));
    }
    let ratio = aspect.ratio()?;
    let (fw, fh) = (f64::from(frame_width), f64::from(frame_height));
    if b.x1 <= 0.0 || b.y1 <= 0.0 || b.x0 >= fw || b.y0 >= fh {
        return Err(Error::InvalidArgument(format!(
            "detection box {b:?} lies entirely outside the {frame_width}x{frame_height} frame"
        )));
    }

    // Halves first: the sum of two huge finite edges would overflow, their halves do not.
    let (cx, cy) = (b.x0 * 0.5 + b.x1 * 0.5, b.y0 * 0.5 + b.y1 * 0.5);
    // These may be infinite for absurd boxes and margins; the fit below brings them back.
    let (mut w, mut h) = ((b.x1 - b.x0) * margin, (b.y1 - b.y0) * margin);
    match ratio {
        None => {
            w = w.min(fw);
            h = h.min(fh);
        }
        Some(r) => {
            if w < h * r {
                w = h * r;
            } else {
                h = w / r;
            }
            // The largest region of this aspect the frame holds; sized from the frame
            // rather than by scaling (w, h) so an infinite side cannot turn into NaN.
            let max_w = fw.min(fh * r);
            if w > max_w || h > max_w / r {
                w = max_w;
                h = (max_w / r).min(fh);
            }
        }
    }

    let left = shift_inside(cx, w, fw);
    let top = shift_inside(cy, h, fh);
    // Every pixel the fitted region touches, and the fewest pixels its size rounds up to.
    let outward = (
        outward_span(left, w, frame_width),
        outward_span(top, h, frame_height),
    );
    let rounded_up = (round_up(w, frame_width), round_up(h, frame_height));
    let (width, height) = match ratio {
        None => outward,
        Some(r) => {
            let covering = reach_aspect(outward, r, frame_width, frame_height);
            if is_exact(covering, r) {
                covering
            } else {
                // The aspect wins over the last fraction of a pixel of cover.
                let nearer = reach_aspect(rounded_up, r, frame_width, frame_height);
                if is_exact(nearer, r) {
                    nearer
                } else {
                    covering
                }
            }
        }
    };
    Ok(Crop::new(
        place(left, w, width, frame_width),
        place(top, h, height, frame_height),
        width,
        height,
    ))
}

/// [`crop_for_box`] for every box, in order; the first failing box fails the whole call
/// (its index is in the message).
pub fn crops_for_boxes(
    boxes: &[DetectionBox],
    frame_width: u32,
    frame_height: u32,
    margin: f64,
    aspect: RegionAspect,
) -> Result<Vec<Crop>> {
    boxes
        .iter()
        .enumerate()
        .map(|(i, &b)| {
            crop_for_box(b, frame_width, frame_height, margin, aspect)
                .map_err(|e| e.with_context(format_args!("box {i}")))
        })
        .collect()
}

/// The left (top) edge of a `size`-long region centred on `centre`, shifted inside
/// `0..limit` (`size <= limit`).
fn shift_inside(centre: f64, size: f64, limit: f64) -> f64 {
    (centre - size * 0.5).min(limit - size).max(0.0)
}

/// How many whole pixels a region from `start` of `size` touches, within `1..=limit`.
fn outward_span(start: f64, size: f64, limit: u32) -> u32 {
    let first = (start + EPS).floor();
    let end = (start + size - EPS).ceil();
    clamp_pixels(end - first, limit)
}

/// `size` rounded up to whole pixels, within `1..=limit`.
fn round_up(size: f64, limit: u32) -> u32 {
    clamp_pixels((size - EPS).ceil(), limit)
}

/// A pixel count within `1..=limit` (the float is finite and small by then, or clamped).
fn clamp_pixels(v: f64, limit: u32) -> u32 {
    if v.is_nan() || v < 1.0 {
        1
    } else if v >= f64::from(limit) {
        limit
    } else {
        v as u32
    }
}

/// How many pixels a side may grow beyond the rounding to make the aspect exact: enough
/// to reach the next multiple of 17 or less (16:9 needs a width that is a multiple of
/// 16 and a height that is a multiple of 9).
const ASPECT_GROWTH: u32 = 16;

/// A size of aspect `r` that is at least `(w, h)` and fits the frame: the smallest one
/// whose aspect is exact with either side grown by up to [`ASPECT_GROWTH`] pixels, else
/// the nearest to `r` that grows one side by rounding alone (`(w, h)` fit the frame).
fn reach_aspect((w, h): (u32, u32), r: f64, fw: u32, fh: u32) -> (u32, u32) {
    // None when the grown side leaves the frame: the aspect cannot be had that way.
    let taller = |w: u32| {
        let h = h.max(clamp_pixels((f64::from(w) / r).round(), u32::MAX));
        (w <= fw && h <= fh).then_some((w, h))
    };
    let wider = |h: u32| {
        let w = w.max(clamp_pixels((f64::from(h) * r).round(), u32::MAX));
        (w <= fw && h <= fh).then_some((w, h))
    };
    let area = |(w, h): (u32, u32)| u64::from(w) * u64::from(h);
    let exact = (0..=ASPECT_GROWTH)
        .flat_map(|d| [taller(w.saturating_add(d)), wider(h.saturating_add(d))])
        .flatten()
        .filter(|&s| is_exact(s, r))
        .min_by_key(|&s| area(s));
    if let Some(s) = exact {
        return s;
    }
    let by_rounding = [taller(w), wider(h)];
    by_rounding
        .into_iter()
        .flatten()
        .min_by(|&a, &b| {
            aspect_error(a, r)
                .total_cmp(&aspect_error(b, r))
                .then(area(a).cmp(&area(b)))
        })
        .unwrap_or((w, h))
}

/// How far `w / h` is from `r`, as a factor (so too wide and too narrow weigh the same).
fn aspect_error((w, h): (u32, u32), r: f64) -> f64 {
    (f64::from(w) / f64::from(h) / r).ln().abs()
}

/// Whether `w / h` is `r` up to float noise (a ratio given as `16.0 / 9.0` is not
/// exactly 16 / 9).
fn is_exact(size: (u32, u32), r: f64) -> bool {
    aspect_error(size, r) < 1e-9
}

/// The first pixel of a `pixels`-long crop for a region from `start` of `size`: one that
/// covers every pixel the region touches when the crop is long enough (the extra pixels
/// split between both ends), else the nearest to the region's centre; inside the frame.
fn place(start: f64, size: f64, pixels: u32, limit: u32) -> u32 {
    let n = f64::from(pixels);
    let lowest = (start + size - EPS).ceil() - n;
    let highest = (start + EPS).floor();
    let first = if lowest <= highest {
        highest - ((highest - lowest) * 0.5).floor()
    } else {
        (start + size * 0.5 - n * 0.5).round()
    };
    // pixels <= limit, so the range is never inverted.
    first.clamp(0.0, f64::from(limit - pixels)) as u32
}

/// The tiles of a frame for sliced (SAHI-style) detection: overlapping crops of one size
/// that cover every pixel, so a small object far from the camera is seen at the
/// detector's full resolution in at least one tile.
///
/// ```
/// use pinframe::convert::regions::TilePlan;
/// use pinframe::Crop;
/// let plan = TilePlan::new(1920, 1080, 640, 640, 128, 128)?;
/// assert_eq!((plan.columns(), plan.rows()), (4, 2));
/// // The last tile of a row is shifted back to end at the frame's edge.
/// assert_eq!(plan.tiles()[3], Crop::new(1280, 0, 640, 640));
/// assert_eq!(plan.tiles()[7], Crop::new(1280, 440, 640, 640));
/// # Ok::<(), pinframe::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TilePlan {
    tiles: Vec<Crop>,
    columns: usize,
    rows: usize,
}

impl TilePlan {
    /// The tiles of a `frame_width` x `frame_height` frame, `tile_width` x `tile_height`
    /// each, neighbours sharing at least `overlap_x` columns and `overlap_y` rows.
    ///
    /// Tiles start every `tile - overlap` pixels; the last of a row (column) is shifted
    /// back to end at the frame's edge, so it overlaps its neighbour by more rather than
    /// reaching outside the frame or being cut short (every tile has the same size, so
    /// every one converts at the same scale). A tile larger than the frame on an axis
    /// becomes one tile of the frame's size on that axis.
    ///
    /// Errors ([`Error::InvalidArgument`]): a zero frame or tile size, an overlap not
    /// smaller than the tile on its axis, or more tiles than memory holds.
    pub fn new(
        frame_width: u32,
        frame_height: u32,
        tile_width: u32,
        tile_height: u32,
        overlap_x: u32,
        overlap_y: u32,
    ) -> Result<TilePlan> {
        if frame_width == 0 || frame_height == 0 {
            return Err(Error::InvalidArgument(format!(
                "frame {frame_width}x{frame_height} is empty; tiling needs at least 1x1"
            )));
        }
        if tile_width == 0 || tile_height == 0 {
            return Err(Error::InvalidArgument(format!(
                "tile {tile_width}x{tile_height} is empty; a tile needs at least 1x1"
            )));
        }
        if overlap_x >= tile_width || overlap_y >= tile_height {
            return Err(Error::InvalidArgument(format!(
                "tile overlap {overlap_x}x{overlap_y} must be smaller than the tile \
                 {tile_width}x{tile_height} on each axis, or the tiles would never advance"
            )));
        }
        let (xs, width) = tile_starts(frame_width, tile_width, overlap_x);
        let (ys, height) = tile_starts(frame_height, tile_height, overlap_y);
        let too_many = || {
            Error::InvalidArgument(format!(
                "{}x{} tiles of {tile_width}x{tile_height} for a {frame_width}x{frame_height} \
                 frame are more than memory holds; use larger tiles or less overlap",
                xs.len(),
                ys.len()
            ))
        };
        let count = xs.len().checked_mul(ys.len()).ok_or_else(too_many)?;
        let mut tiles = Vec::new();
        // A huge frame with tiny tiles is an argument error, not an abort.
        tiles.try_reserve_exact(count).map_err(|_| too_many())?;
        for &y in &ys {
            tiles.extend(xs.iter().map(|&x| Crop::new(x, y, width, height)));
        }
        Ok(TilePlan {
            tiles,
            columns: xs.len(),
            rows: ys.len(),
        })
    }

    /// The tiles, row by row (left to right, then top to bottom).
    pub fn tiles(&self) -> &[Crop] {
        &self.tiles
    }

    /// The number of tiles, `columns() * rows()`.
    pub fn len(&self) -> usize {
        self.tiles.len()
    }

    /// Always false: a plan has at least one tile (there for the `len` convention).
    pub fn is_empty(&self) -> bool {
        self.tiles.is_empty()
    }

    /// Tiles per row.
    pub fn columns(&self) -> usize {
        self.columns
    }

    /// Rows of tiles.
    pub fn rows(&self) -> usize {
        self.rows
    }
}

/// The starts of the tiles along one axis of `frame` pixels, and their length
/// (`overlap < tile`, both sizes non-zero).
fn tile_starts(frame: u32, tile: u32, overlap: u32) -> (Vec<u32>, u32) {
    if tile >= frame {
        return (vec![0], frame);
    }
    let step = tile - overlap;
    let last = frame - tile;
    // Every start before the last, then the last: at most frame / step + 1 of them.
    let mut starts: Vec<u32> = (0..last).step_by(step as usize).collect();
    starts.push(last);
    (starts, tile)
}

/// A box in the destination pixels of a conversion (a detection in a tile's or a
/// region's tensor) mapped to source pixels through the conversion's [`ConvertInfo`].
///
/// All four corners are mapped and the result spans them, so a flipped or rotated
/// conversion still gives an ordered box (`x0 <= x1`, `y0 <= y1`). Nothing is clipped:
/// a box reaching into a letterbox's padding maps outside the crop.
pub fn box_to_source(info: &ConvertInfo, b: DetectionBox) -> DetectionBox {
    let corners = [
        info.to_source(b.x0, b.y0),
        info.to_source(b.x1, b.y0),
        info.to_source(b.x0, b.y1),
        info.to_source(b.x1, b.y1),
    ];
    let mut out = DetectionBox::new(
        f64::INFINITY,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NEG_INFINITY,
    );
    for (x, y) in corners {
        out.x0 = out.x0.min(x);
        out.y0 = out.y0.min(y);
        out.x1 = out.x1.max(x);
        out.y1 = out.y1.max(y);
    }
    out
}

/// Intersection over union of two boxes, in `0.0..=1.0`. An empty or inverted box has
/// no area, so its IoU with anything is 0; so is that of boxes with a NaN coordinate.
pub fn iou(a: &DetectionBox, b: &DetectionBox) -> f64 {
    // min and max skip a NaN operand, which would make up an overlap.
    if [a.x0, a.y0, a.x1, a.y1, b.x0, b.y0, b.x1, b.y1]
        .iter()
        .any(|v| v.is_nan())
    {
        return 0.0;
    }
    let iw = (a.x1.min(b.x1) - a.x0.max(b.x0)).max(0.0);
    let ih = (a.y1.min(b.y1) - a.y0.max(b.y0)).max(0.0);
    let inter = iw * ih;
    let union = a.area() + b.area() - inter;
    let v = inter / union;
    // An infinite box makes inf / inf.
    if v.is_nan() || union <= 0.0 {
        0.0
    } else {
        v.min(1.0)
    }
}

/// Greedy non-maximum suppression: which of `dets` (a box and its score each) to keep,
/// e.g. after the detections of all tiles are mapped to source pixels, where an object
/// in the overlap of two tiles is reported by both.
///
/// The detections are visited from the highest score down (equal scores in index
/// order); each is kept unless its [`iou`] with one already kept is greater than
/// `iou_threshold` (0.5 to 0.7 is usual; a NaN threshold suppresses nothing). A
/// detection with a NaN score is dropped. Returns the indices kept, in the order
/// visited (best first). Boxes are compared whatever their class: run it per class for
/// class-aware suppression.
pub fn non_max_suppression(dets: &[(DetectionBox, f32)], iou_threshold: f64) -> Vec<usize> {
    let mut order: Vec<usize> = (0..dets.len()).filter(|&i| !dets[i].1.is_nan()).collect();
    // Stable, so equal scores keep index order; partial_cmp (not total_cmp) so that 0.0
    // and -0.0 count as equal. No NaN is left, hence no None.
    order.sort_by(|&a, &b| {
        dets[b]
            .1
            .partial_cmp(&dets[a].1)
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    let mut kept: Vec<usize> = Vec::new();
    for i in order {
        // Written as "greater than" so that a NaN threshold suppresses nothing.
        let suppressed = kept
            .iter()
            .any(|&k| iou(&dets[k].0, &dets[i].0) > iou_threshold);
        if !suppressed {
            kept.push(i);
        }
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DType;
    use crate::convert::{ConvertOptions, Fit, Plan, Rotation};
    use crate::image::{ImageLayout, PixelFormat};

    const FW: u32 = 1920;
    const FH: u32 = 1080;

    fn inside(c: &Crop, fw: u32, fh: u32) -> bool {
        c.width >= 1
            && c.height >= 1
            && u64::from(c.x) + u64::from(c.width) <= u64::from(fw)
            && u64::from(c.y) + u64::from(c.height) <= u64::from(fh)
    }

    /// Whether the crop covers the rectangle, up to the float noise the crop ignores.
    fn covers(c: &Crop, x0: f64, y0: f64, x1: f64, y1: f64) -> bool {
        f64::from(c.x) <= x0 + EPS
            && f64::from(c.y) <= y0 + EPS
            && f64::from(c.x + c.width) >= x1 - EPS
            && f64::from(c.y + c.height) >= y1 - EPS
    }

    #[test]
    fn centred_box_keeps_its_centre_and_margin() {
        let b = DetectionBox::new(900.0, 500.0, 1000.0, 580.0);
        let c = crop_for_box(b, FW, FH, 1.0, RegionAspect::AsIs).unwrap();
        assert_eq!(c, Crop::new(900, 500, 100, 80));
        let c = crop_for_box(b, FW, FH, 1.5, RegionAspect::AsIs).unwrap();
        assert_eq!(c, Crop::new(875, 480, 150, 120));
        let c = crop_for_box(b, FW, FH, 1.5, RegionAspect::Square).unwrap();
        assert_eq!(c, Crop::new(875, 465, 150, 150));
    }

    #[test]
    fn boxes_at_every_corner_stay_square_and_inside() {
        let (w, h) = (120.0, 90.0);
        let (fw, fh) = (f64::from(FW), f64::from(FH));
        // Flush with each corner, and hanging over it.
        for over in [0.0, 30.0] {
            for (x0, y0) in [
                (-over, -over),
                (fw - w + over, -over),
                (-over, fh - h + over),
                (fw - w + over, fh - h + over),
            ] {
                let b = DetectionBox::new(x0, y0, x0 + w, y0 + h);
                let c = crop_for_box(b, FW, FH, 1.5, RegionAspect::Square).unwrap();
                assert_eq!((c.width, c.height), (180, 180), "{b:?} -> {c:?}");
                assert!(inside(&c, FW, FH), "{b:?} -> {c:?}");
                // Shifted, not cut: the part of the box inside the frame is all there.
                assert!(
                    covers(
                        &c,
                        x0.max(0.0),
                        y0.max(0.0),
                        (x0 + w).min(fw),
                        (y0 + h).min(fh)
                    ),
                    "{b:?} -> {c:?}"
                );
            }
        }
    }

    #[test]
    fn aspect_is_exact_where_pixels_allow() {
        // 3:4 portrait for a pose model: 90 wide reaches 120 tall.
        let b = DetectionBox::new(500.0, 300.0, 590.0, 400.0);
        let c = crop_for_box(b, FW, FH, 1.0, RegionAspect::Ratio(0.75)).unwrap();
        assert_eq!((c.width, c.height), (90, 120));
        assert_eq!(c, Crop::new(500, 290, 90, 120));
        // 2:1: the width grows.
        let c = crop_for_box(b, FW, FH, 1.0, RegionAspect::Ratio(2.0)).unwrap();
        assert_eq!(c, Crop::new(445, 300, 200, 100));
        // Fractional edges: rounded outward, then the short side grows to the aspect.
        let b = DetectionBox::new(900.3, 600.6, 960.1, 640.2);
        for (aspect, r) in [
            (RegionAspect::Square, 1.0),
            (RegionAspect::Ratio(0.5), 0.5),
            (RegionAspect::Ratio(1.5), 1.5),
            (RegionAspect::Ratio(4.0), 4.0),
        ] {
            for margin in [1.0, 1.25, 2.0] {
                let c = crop_for_box(b, FW, FH, margin, aspect).unwrap();
                assert_eq!(
                    f64::from(c.width) / f64::from(c.height),
                    r,
                    "{aspect:?} x{margin} -> {c:?}"
                );
                assert!(inside(&c, FW, FH));
                let (cx, cy) = (930.2, 620.4);
                let (hw, hh) = (
                    (960.1 - 900.3) * margin / 2.0,
                    (640.2 - 600.6) * margin / 2.0,
                );
                assert!(covers(&c, cx - hw, cy - hh, cx + hw, cy + hh), "{c:?}");
            }
        }
    }

    #[test]
    fn common_model_aspects_are_exact_for_many_boxes() {
        let ratios = [
            16.0 / 9.0,
            9.0 / 16.0,
            4.0 / 3.0,
            3.0 / 4.0,
            192.0 / 256.0,
            17.0 / 5.0,
        ];
        for &r in &ratios {
            for i in 0..200 {
                // Fractional positions and sizes, too wide and too narrow for the ratio.
                let f = f64::from(i);
                let (x0, y0) = (400.0 + f * 1.37, 300.0 + f * 0.91);
                let (w, h) = (20.0 + (f * 7.3) % 150.0, 20.0 + (f * 3.1) % 150.0);
                let b = DetectionBox::new(x0, y0, x0 + w, y0 + h);
                let c = crop_for_box(b, FW, FH, 1.2, RegionAspect::Ratio(r)).unwrap();
                assert!(
                    is_exact((c.width, c.height), r),
                    "ratio {r}: {b:?} -> {c:?}"
                );
                let (cx, cy, hw, hh) = (x0 + w / 2.0, y0 + h / 2.0, w * 0.6, h * 0.6);
                assert!(
                    covers(&c, cx - hw, cy - hh, cx + hw, cy + hh),
                    "{b:?} -> {c:?}"
                );
            }
        }
    }

    #[test]
    fn regions_larger_than_the_frame_shrink_keeping_the_aspect() {
        // Square: the frame's height bounds it.
        let b = DetectionBox::new(100.5, 10.0, 1800.0, 1000.0);
        let c = crop_for_box(b, FW, FH, 2.0, RegionAspect::Square).unwrap();
        assert_eq!((c.width, c.height), (1080, 1080));
        assert_eq!(c.y, 0);
        assert!(inside(&c, FW, FH));
        // 16:9 on a 16:9 frame: the whole frame.
        let c = crop_for_box(b, FW, FH, 3.0, RegionAspect::Ratio(16.0 / 9.0)).unwrap();
        assert_eq!(c, Crop::new(0, 0, FW, FH));
        // A tall region on a wide frame: the height bounds it, the width follows.
        let c = crop_for_box(b, FW, FH, 1.0, RegionAspect::Ratio(0.5)).unwrap();
        assert_eq!((c.width, c.height), (540, 1080));
        // As is: each axis on its own.
        let c = crop_for_box(b, FW, FH, 5.0, RegionAspect::AsIs).unwrap();
        assert_eq!(c, Crop::new(0, 0, FW, FH));
        // Extreme but valid: a 1x1 frame, a tiny box, a huge margin.
        let c = crop_for_box(
            DetectionBox::new(0.2, 0.2, 0.3, 0.3),
            1,
            1,
            1e300,
            RegionAspect::Square,
        )
        .unwrap();
        assert_eq!(c, Crop::new(0, 0, 1, 1));
        let c = crop_for_box(
            DetectionBox::new(10.0, 10.0, 10.000001, 10.000001),
            FW,
            FH,
            1.0,
            RegionAspect::AsIs,
        )
        .unwrap();
        assert_eq!(c, Crop::new(10, 10, 1, 1));
    }

    #[test]
    fn every_bad_argument_is_an_error() {
        let ok = DetectionBox::new(10.0, 10.0, 50.0, 50.0);
        let sq = RegionAspect::Square;
        let bad = |b: DetectionBox, fw: u32, fh: u32, m: f64, a: RegionAspect| {
            let r = crop_for_box(b, fw, fh, m, a);
            assert!(
                matches!(r, Err(Error::InvalidArgument(_))),
                "{b:?} {fw}x{fh} {m} {a:?}: {r:?}"
            );
        };
        assert!(crop_for_box(ok, FW, FH, 1.0, sq).is_ok());
        for v in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            bad(DetectionBox::new(v, 10.0, 50.0, 50.0), FW, FH, 1.0, sq);
            bad(DetectionBox::new(10.0, v, 50.0, 50.0), FW, FH, 1.0, sq);
            bad(DetectionBox::new(10.0, 10.0, v, 50.0), FW, FH, 1.0, sq);
            bad(DetectionBox::new(10.0, 10.0, 50.0, v), FW, FH, 1.0, sq);
            bad(ok, FW, FH, v, sq);
            bad(ok, FW, FH, 1.0, RegionAspect::Ratio(v));
        }
        // Empty and inverted.
        bad(DetectionBox::new(10.0, 10.0, 10.0, 50.0), FW, FH, 1.0, sq);
        bad(DetectionBox::new(10.0, 10.0, 50.0, 10.0), FW, FH, 1.0, sq);
        bad(DetectionBox::new(50.0, 10.0, 10.0, 50.0), FW, FH, 1.0, sq);
        bad(DetectionBox::new(10.0, 50.0, 50.0, 10.0), FW, FH, 1.0, sq);
        // Entirely outside, on each side (touching an edge counts).
        bad(DetectionBox::new(-50.0, 10.0, -10.0, 50.0), FW, FH, 1.0, sq);
        bad(DetectionBox::new(-50.0, 10.0, 0.0, 50.0), FW, FH, 1.0, sq);
        bad(DetectionBox::new(10.0, -50.0, 50.0, -10.0), FW, FH, 1.0, sq);
        bad(
            DetectionBox::new(1920.0, 10.0, 1950.0, 50.0),
            FW,
            FH,
            1.0,
            sq,
        );
        bad(
            DetectionBox::new(10.0, 1080.0, 50.0, 1100.0),
            FW,
            FH,
            1.0,
            sq,
        );
        // Zero-size frames.
        bad(ok, 0, FH, 1.0, sq);
        bad(ok, FW, 0, 1.0, sq);
        bad(ok, 0, 0, 1.0, RegionAspect::AsIs);
        // Bad margins and ratios.
        for v in [0.0, -1.0, -0.0] {
            bad(ok, FW, FH, v, sq);
            bad(ok, FW, FH, 1.0, RegionAspect::Ratio(v));
        }
        // The batch form names the failing box.
        let e = crops_for_boxes(
            &[ok, DetectionBox::new(5.0, 5.0, 1.0, 1.0)],
            FW,
            FH,
            1.0,
            sq,
        )
        .unwrap_err();
        assert!(e.to_string().contains("box 1"), "{e}");
        let all = crops_for_boxes(&[ok, ok], FW, FH, 1.0, sq).unwrap();
        assert_eq!(all, vec![crop_for_box(ok, FW, FH, 1.0, sq).unwrap(); 2]);
        assert!(crops_for_boxes(&[], FW, FH, 1.0, sq).unwrap().is_empty());
    }

    /// Every pixel of the frame lies in a tile, every tile in the frame, all of one
    /// size; neighbours overlap by at least the overlap asked for.
    fn check_plan(fw: u32, fh: u32, tw: u32, th: u32, ox: u32, oy: u32) {
        let plan = TilePlan::new(fw, fh, tw, th, ox, oy).unwrap();
        let what = format!("{fw}x{fh} tiles {tw}x{th} overlap {ox}x{oy}");
        assert_eq!(plan.len(), plan.columns() * plan.rows(), "{what}");
        assert!(!plan.is_empty());
        let (ew, eh) = (tw.min(fw), th.min(fh));
        let mut seen = vec![false; fw as usize * fh as usize];
        for t in plan.tiles() {
            assert!(inside(t, fw, fh), "{what}: {t:?}");
            assert_eq!((t.width, t.height), (ew, eh), "{what}: {t:?}");
            for y in t.y..t.y + t.height {
                for x in t.x..t.x + t.width {
                    seen[(y * fw + x) as usize] = true;
                }
            }
        }
        assert!(seen.iter().all(|&s| s), "{what}: a pixel is in no tile");
        let tiles = plan.tiles();
        for r in 0..plan.rows() {
            for c in 0..plan.columns() {
                let t = tiles[r * plan.columns() + c];
                if c + 1 < plan.columns() {
                    let right = tiles[r * plan.columns() + c + 1];
                    assert_eq!(right.y, t.y, "{what}: row-major");
                    assert!(right.x > t.x, "{what}: row-major");
                    assert!(t.x + t.width - right.x >= ox, "{what}: {t:?} {right:?}");
                }
                if r + 1 < plan.rows() {
                    let below = tiles[(r + 1) * plan.columns() + c];
                    assert_eq!(below.x, t.x, "{what}: row-major");
                    assert!(below.y > t.y, "{what}: row-major");
                    assert!(t.y + t.height - below.y >= oy, "{what}: {t:?} {below:?}");
                }
            }
        }
    }

    #[test]
    fn tiles_cover_every_pixel() {
        for (fw, fh, tw, th, ox, oy) in [
            (1920, 1080, 640, 640, 128, 128),
            (1920, 1080, 640, 640, 0, 0),
            (1920, 1080, 960, 540, 96, 54),
            (1921, 1079, 640, 480, 100, 33),
            (1000, 777, 333, 250, 1, 249),
            (17, 13, 5, 4, 4, 3),
            (17, 13, 1, 1, 0, 0),
            (640, 480, 640, 480, 0, 0),
            // Tile larger than the frame: one tile of the frame's size on that axis.
            (300, 200, 640, 640, 10, 10),
            (1920, 300, 640, 640, 64, 64),
            (301, 1080, 640, 639, 0, 638),
            (1, 1, 3, 3, 2, 2),
        ] {
            check_plan(fw, fh, tw, th, ox, oy);
        }
    }

    #[test]
    fn tile_layout_is_as_documented() {
        let plan = TilePlan::new(1920, 1080, 640, 640, 128, 128).unwrap();
        let xs: Vec<u32> = plan.tiles()[..plan.columns()].iter().map(|t| t.x).collect();
        assert_eq!(xs, [0, 512, 1024, 1280]);
        let ys: Vec<u32> = plan
            .tiles()
            .iter()
            .step_by(plan.columns())
            .map(|t| t.y)
            .collect();
        assert_eq!(ys, [0, 440]);
        // Exact fit: no shifted tile.
        let plan = TilePlan::new(1920, 1080, 640, 540, 0, 0).unwrap();
        assert_eq!((plan.columns(), plan.rows()), (3, 2));
        assert_eq!(plan.tiles()[5], Crop::new(1280, 540, 640, 540));
        let plan = TilePlan::new(300, 200, 640, 640, 0, 0).unwrap();
        assert_eq!(plan.tiles(), [Crop::new(0, 0, 300, 200)]);
    }

    #[test]
    fn bad_tile_plans_are_errors() {
        for (fw, fh, tw, th, ox, oy) in [
            (0, 1080, 640, 640, 0, 0),
            (1920, 0, 640, 640, 0, 0),
            (1920, 1080, 0, 640, 0, 0),
            (1920, 1080, 640, 0, 0, 0),
            (1920, 1080, 640, 640, 640, 0),
            (1920, 1080, 640, 640, 0, 640),
            (1920, 1080, 640, 640, 700, 0),
            (100, 100, 640, 640, 640, 0),
        ] {
            let r = TilePlan::new(fw, fh, tw, th, ox, oy);
            assert!(
                matches!(r, Err(Error::InvalidArgument(_))),
                "{fw}x{fh} {tw}x{th} {ox}x{oy}: {r:?}"
            );
        }
    }

    fn slice_info(tile: Crop, rotation: Rotation) -> ConvertInfo {
        let src = ImageLayout::tight(1920, 1080, PixelFormat::Nv12, DType::U8).unwrap();
        let dst = ImageLayout::tight(640, 640, PixelFormat::Rgb, DType::U8).unwrap();
        let opts = ConvertOptions {
            crop: Some(tile),
            fit: Fit::Letterbox {
                pad: [114, 114, 114],
            },
            rotation,
            ..Default::default()
        };
        Plan::new(&src, &dst, &opts).unwrap().info()
    }

    fn near(a: DetectionBox, b: DetectionBox, tol: f64) -> bool {
        (a.x0 - b.x0).abs() <= tol
            && (a.y0 - b.y0).abs() <= tol
            && (a.x1 - b.x1).abs() <= tol
            && (a.y1 - b.y1).abs() <= tol
    }

    #[test]
    fn box_over_the_content_maps_back_onto_the_tile() {
        let plan = TilePlan::new(1920, 1080, 960, 540, 96, 54).unwrap();
        for &tile in plan.tiles() {
            let tile_box = DetectionBox::new(
                f64::from(tile.x),
                f64::from(tile.y),
                f64::from(tile.x + tile.width),
                f64::from(tile.y + tile.height),
            );
            for rotation in [Rotation::R0, Rotation::R90, Rotation::R180] {
                let info = slice_info(tile, rotation);
                let [cx, cy, cw, ch] = info.content.map(f64::from);
                let content = DetectionBox::new(cx, cy, cx + cw, cy + ch);
                let back = box_to_source(&info, content);
                assert!(back.x0 <= back.x1 && back.y0 <= back.y1, "{back:?}");
                // The content's size is rounded to whole destination pixels: within a
                // source pixel or two.
                assert!(
                    near(back, tile_box, 2.0),
                    "{tile:?} {rotation:?}: {back:?} from {content:?}"
                );
            }
        }
    }

    #[test]
    fn box_to_source_orders_the_corners() {
        let info = slice_info(Crop::new(0, 0, 1920, 1080), Rotation::R270);
        let b = box_to_source(&info, DetectionBox::new(100.0, 200.0, 300.0, 260.0));
        assert!(b.x0 < b.x1 && b.y0 < b.y1, "{b:?}");
    }

    #[test]
    fn iou_of_simple_boxes() {
        let a = DetectionBox::new(0.0, 0.0, 10.0, 10.0);
        assert_eq!(iou(&a, &a), 1.0);
        assert_eq!(
            iou(&a, &DetectionBox::new(5.0, 0.0, 15.0, 10.0)),
            50.0 / 150.0
        );
        assert_eq!(iou(&a, &DetectionBox::new(10.0, 0.0, 20.0, 10.0)), 0.0);
        assert_eq!(iou(&a, &DetectionBox::new(5.0, 5.0, 5.0, 5.0)), 0.0);
        assert_eq!(iou(&a, &DetectionBox::new(8.0, 8.0, 2.0, 2.0)), 0.0);
        assert_eq!(iou(&a, &DetectionBox::new(f64::NAN, 0.0, 5.0, 5.0)), 0.0);
        let empty = DetectionBox::new(1.0, 1.0, 1.0, 1.0);
        assert_eq!(iou(&empty, &empty), 0.0);
    }

    #[test]
    fn nms_merges_duplicates_from_neighbouring_tiles() {
        // One object in the overlap of two tiles (both slices see it, slightly apart),
        // plus two distinct objects elsewhere.
        let dets = [
            (DetectionBox::new(600.0, 100.0, 660.0, 180.0), 0.80),
            (DetectionBox::new(100.0, 100.0, 150.0, 150.0), 0.70),
            (DetectionBox::new(602.0, 101.0, 661.0, 181.0), 0.92),
            (DetectionBox::new(1500.0, 900.0, 1600.0, 1000.0), 0.40),
            (DetectionBox::new(0.0, 0.0, 10.0, 10.0), f32::NAN),
        ];
        assert_eq!(non_max_suppression(&dets, 0.5), vec![2, 1, 3]);
        // Disjoint boxes all stay, best first, ties in index order.
        let disjoint = [
            (DetectionBox::new(0.0, 0.0, 10.0, 10.0), 0.5),
            (DetectionBox::new(20.0, 0.0, 30.0, 10.0), 0.9),
            (DetectionBox::new(40.0, 0.0, 50.0, 10.0), 0.5),
            (DetectionBox::new(60.0, 0.0, 70.0, 10.0), -0.0),
            (DetectionBox::new(80.0, 0.0, 90.0, 10.0), 0.0),
        ];
        assert_eq!(non_max_suppression(&disjoint, 0.5), vec![1, 0, 2, 3, 4]);
        // Equal scores on duplicates: the first index wins.
        let twins = [(dets[0].0, 0.5), (dets[0].0, 0.5)];
        assert_eq!(non_max_suppression(&twins, 0.5), vec![0]);
        // A threshold of 1 keeps even exact duplicates (IoU 1 is not greater than 1).
        assert_eq!(non_max_suppression(&twins, 1.0), vec![0, 1]);
        assert!(non_max_suppression(&[], 0.5).is_empty());
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]
        /// Random boxes, frames, margins and aspects: never a panic, and every crop is
        /// at least 1x1, inside the frame, and square when asked.
        #[test]
        fn random_boxes_give_crops_inside_the_frame(
            (fw, fh) in (0u32..5000, 0u32..5000),
            (x0, y0) in (-6000.0f64..6000.0, -6000.0f64..6000.0),
            (w, h) in (-10.0f64..8000.0, -10.0f64..8000.0),
            margin in proptest::prop_oneof![-1.0f64..5.0, proptest::prelude::Just(1.0)],
            aspect in 0usize..4,
            ratio in 0.01f64..100.0,
        ) {
            let aspect = [
                RegionAspect::AsIs,
                RegionAspect::Square,
                RegionAspect::Ratio(ratio),
                RegionAspect::Ratio(0.75),
            ][aspect];
            let b = DetectionBox::new(x0, y0, x0 + w, y0 + h);
            if let Ok(c) = crop_for_box(b, fw, fh, margin, aspect) {
                proptest::prop_assert!(inside(&c, fw, fh), "{:?} -> {:?}", b, c);
                if aspect == RegionAspect::Square {
                    proptest::prop_assert_eq!(c.width, c.height, "{:?} -> {:?}", b, c);
                }
            }
        }

        /// Random tile plans never panic and always cover the frame.
        #[test]
        fn random_tile_plans_cover_the_frame(
            (fw, fh) in (1u32..120, 1u32..120),
            (tw, th) in (1u32..150, 1u32..150),
            (ox, oy) in (0u32..150, 0u32..150),
        ) {
            if ox < tw && oy < th {
                check_plan(fw, fh, tw, th, ox, oy);
            } else {
                proptest::prop_assert!(TilePlan::new(fw, fh, tw, th, ox, oy).is_err());
            }
        }
    }
}
