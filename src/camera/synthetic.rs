//! The synthetic camera: a moving test pattern in YUYV, NV12, Motion-JPEG (4:2:2, each
//! frame encoded as a webcam's is) or any Bayer format (the pattern's RGB mosaicked by
//! the colour filter array, as a RAW sensor without a black level delivers it), so the
//! pipeline runs on machines without a camera.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::pool::{Captured, Shared, Slot, SlotState};
use super::{BufferMode, CameraConfig, CaptureFormat};
use crate::image::{Colorimetry, FormatFamily, ImageLayout, PixelFormat, SampleStorage};
use crate::jpeg::{JFIF_COLORIMETRY, JpegEncoder};
use crate::tensor::{Memory, Tensor};
use crate::{Error, Result};

/// Default synthetic frame size.
const DEFAULT_SIZE: (u32, u32) = (640, 480);

/// The eight bars, RGB: white, yellow, cyan, green, magenta, red, blue, black.
pub(crate) const BARS: [[u8; 3]; 8] = [
    [255, 255, 255],
    [255, 255, 0],
    [0, 255, 255],
    [0, 255, 0],
    [255, 0, 255],
    [255, 0, 0],
    [0, 0, 255],
    [0, 0, 0],
];

/// Horizontal scroll of the bars per frame, in pixels.
pub(crate) const SCROLL_PER_FRAME: u32 = 4;

/// BT.601 limited-range Y'CbCr of an RGB colour (rounded).
pub(crate) fn rgb_to_yuv601([r, g, b]: [u8; 3]) -> [u8; 3] {
    let (r, g, b) = (r as f32 / 255.0, g as f32 / 255.0, b as f32 / 255.0);
    let y = 0.299 * r + 0.587 * g + 0.114 * b;
    let u = (b - y) / 1.772;
    let v = (r - y) / 1.402;
    let q = |x: f32| x.round().clamp(0.0, 255.0) as u8;
    [
        q(16.0 + 219.0 * y),
        q(128.0 + 224.0 * u),
        q(128.0 + 224.0 * v),
    ]
}

/// JFIF's (BT.601, full range) Y'CbCr of an RGB colour (rounded): what a JPEG holds.
pub(crate) fn rgb_to_jfif([r, g, b]: [u8; 3]) -> [u8; 3] {
    let (r, g, b) = (r as f32, g as f32, b as f32);
    let y = 0.299 * r + 0.587 * g + 0.114 * b;
    let q = |x: f32| x.round().clamp(0.0, 255.0) as u8;
    [q(y), q(128.0 + (b - y) / 1.772), q(128.0 + (r - y) / 1.402)]
}

/// The quality the synthetic camera encodes Motion-JPEG frames at (webcams use 80-90).
pub(crate) const MJPEG_QUALITY: u8 = 85;

/// What the synthetic camera needs to send Motion-JPEG: the frame's 4:2:2 planes before
/// encoding, the encoder, and which frames to damage.
struct MjpegFrames {
    /// The frame buffers' layout: the whole buffer, as a driver negotiates it.
    base: ImageLayout,
    encoder: JpegEncoder,
    planes: Vec<u8>,
    layout: ImageLayout,
    corrupt_every: Option<u32>,
}

/// How a damaged synthetic frame is damaged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Damage {
    /// Cut off half way: no end-of-image marker.
    Truncated,
    /// An end-of-image marker half way through the scan: the frame looks whole, its data
    /// ends early.
    EndsEarly,
}

/// The RGB colour of pixel (`x`, `y`) of frame `t` of a `w`x`h` pattern: scrolling colour
/// bars over the top two thirds, a grey ramp below, and a bouncing white box.
#[cfg(test)]
pub(crate) fn pattern_rgb(w: u32, h: u32, t: u32, x: u32, y: u32) -> [u8; 3] {
    let (bx, by, bs) = box_at(w, h, t);
    if x >= bx && x < bx + bs && y >= by && y < by + bs {
        return [255; 3];
    }
    pattern_rgb_no_box(w, h, t, x, y)
}

/// The bouncing box of frame `t`: left, top and side.
fn box_at(w: u32, h: u32, t: u32) -> (u32, u32, u32) {
    let side = (w.min(h) / 8).max(2) & !1;
    let bounce = |range: u32, speed: u32| {
        if range == 0 {
            return 0;
        }
        let p = (t as u64 * speed as u64) % (2 * range as u64);
        (if p < range as u64 {
            p
        } else {
            2 * range as u64 - p
        }) as u32
    };
    (
        bounce(w.saturating_sub(side), 6) & !1,
        bounce(h.saturating_sub(side), 3) & !1,
        side,
    )
}

/// Renders frames into a pool of tensors.
pub(crate) struct Pattern {
    width: u32,
    height: u32,
    format: PixelFormat,
    fps: Option<u32>,
    start: Instant,
    sequence: u32,
    next_slot: usize,
    /// One row per row kind (bars, bars + box, ramp, ramp + box): Y'CbCr (4:4:4) for the
    /// YUV formats (JFIF's for Motion-JPEG), RGB for Bayer.
    rows: [Vec<[u8; 3]>; 4],
    /// Boxed: the Motion-JPEG state is large and most cameras do without it.
    mjpeg: Option<Box<MjpegFrames>>,
}

impl Pattern {
    pub(crate) fn new(
        config: &CameraConfig,
    ) -> Result<(Pattern, Arc<Shared>, CaptureFormat, BufferMode)> {
        let format = match config.fourcc {
            Some(code) => match PixelFormat::from_v4l2_fourcc(code) {
                Some((f, false)) => f,
                _ => {
                    return Err(Error::Unsupported(format!(
                        "the synthetic camera makes yuyv, nv12, mjpeg or a Bayer format, not {}",
                        crate::image::fourcc_to_string(code)
                    )));
                }
            },
            None => config.format.unwrap_or(PixelFormat::Yuyv),
        };
        let bayer = format.family() == FormatFamily::Bayer;
        if !bayer
            && !matches!(
                format,
                PixelFormat::Yuyv | PixelFormat::Nv12 | PixelFormat::Mjpeg
            )
        {
            return Err(Error::Unsupported(format!(
                "the synthetic camera makes yuyv, nv12, mjpeg or a Bayer format (rggb8, \
                 rggb10, rggb10p, ...), not {format}"
            )));
        }
        if config.synthetic_corruption.is_some() && format != PixelFormat::Mjpeg {
            return Err(Error::InvalidArgument(format!(
                "synthetic corruption damages Motion-JPEG frames; the camera makes {format}"
            )));
        }
        let (width, height) = config.size.unwrap_or(DEFAULT_SIZE);
        let (mw, _) = format.size_multiple();
        if width % 2 != 0 || height % 2 != 0 || width < 16 || height < 16 || width % mw != 0 {
            return Err(Error::InvalidArgument(format!(
                "synthetic camera size {width}x{height}: width and height must be even and at \
                 least 16 (for {format} the width a multiple of {mw})"
            )));
        }
        let memory = match config.buffer_mode {
            BufferMode::Dmabuf => vec![Memory::Dma],
            BufferMode::Mmap => vec![Memory::Shm],
            BufferMode::Auto => vec![Memory::Dma, Memory::Shm],
        };
        let mut slots = Vec::with_capacity(config.buffers as usize);
        let mut used = None;
        for _ in 0..config.buffers {
            let mut tensor = None;
            let mut errors = Vec::new();
            for &m in memory.iter().filter(|&&m| used.is_none_or(|u| u == m)) {
                match Tensor::<u8>::image(width, height, format, Some(m)) {
                    Ok(t) => {
                        used = Some(m);
                        tensor = Some(t);
                        break;
                    }
                    Err(e) => errors.push(e.to_string()),
                }
            }
            let mut tensor = tensor.ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "synthetic camera: cannot allocate frame buffers: {}",
                    errors.join("; ")
                ))
            })?;
            let layout = (*tensor
                .layout()
                .ok_or_else(|| Error::InvalidArgument("image tensor without a layout".into()))?)
            .with_colorimetry(Some(if format == PixelFormat::Mjpeg {
                JFIF_COLORIMETRY
            } else {
                Colorimetry::BT601_LIMITED
            }));
            tensor.set_layout(layout)?;
            slots.push(Slot::new(tensor, [0; 3], Vec::new()));
        }
        let layout = *slots[0]
            .tensor
            .layout()
            .ok_or_else(|| Error::InvalidArgument("image tensor without a layout".into()))?;
        let mode = if used == Some(Memory::Dma) {
            BufferMode::Dmabuf
        } else {
            BufferMode::Mmap
        };
        let capture = CaptureFormat {
            format,
            fourcc: format.v4l2_fourcc().unwrap_or(0),
            width,
            height,
            multi_planar_api: false,
            interlaced: false,
            // V4L2 reports no rows for a compressed format.
            bytesperline: vec![if format.is_compressed() {
                0
            } else {
                layout.planes()[0].stride as u32
            }],
            sizeimage: vec![layout.allocation_len(0) as u32],
            v4l2_colorimetry: (0, 0, 0),
            colorimetry: layout.colorimetry(),
            frame_interval: config.fps.map(|f| (1, f)),
            layout,
        };
        let shared = Arc::new(Shared::new(None, slots));
        {
            // Every buffer starts free (the synthetic camera's "queued").
            let mut state = shared.lock();
            state.streaming = true;
            for i in 0..state.slots.len() {
                let _ = state.requeue(None, i);
            }
        }
        let row = vec![[0u8; 3]; width as usize];
        let layout_base = layout;
        let mjpeg = if format == PixelFormat::Mjpeg {
            let layout = ImageLayout::new(width, height, PixelFormat::I422)?;
            Some(Box::new(MjpegFrames {
                base: layout_base,
                encoder: JpegEncoder::new()?,
                planes: vec![0; layout.allocation_len(0)],
                layout,
                corrupt_every: config.synthetic_corruption,
            }))
        } else {
            None
        };
        Ok((
            Pattern {
                width,
                height,
                format,
                fps: config.fps,
                start: Instant::now(),
                sequence: 0,
                next_slot: 0,
                rows: [row.clone(), row.clone(), row.clone(), row],
                mjpeg,
            },
            shared,
            capture,
            mode,
        ))
    }

    /// Draws the next frame into a free buffer and marks it held, waiting (up to
    /// `timeout`, like a device) until a paced frame is due. Every buffer held is an
    /// error at once, before any wait.
    pub(crate) fn render(&mut self, shared: &Shared, timeout: Duration) -> Result<Captured> {
        let free = |state: &super::pool::State| {
            let n = state.slots.len();
            (0..n)
                .map(|i| (self.next_slot + i) % n)
                .find(|&i| state.slots[i].state == SlotState::Queued)
                .ok_or(Error::AllBuffersHeld { buffers: n })
        };
        free(&shared.lock())?;
        if let Some(fps) = self.fps {
            let due = self.start + Duration::from_secs_f64(self.sequence as f64 / fps as f64);
            let wait = due.saturating_duration_since(Instant::now());
            if wait > timeout {
                std::thread::sleep(timeout);
                return Err(Error::Timeout(format!(
                    "no frame from the synthetic camera within {timeout:?} (it runs at \
                     {fps} fps)"
                )));
            }
            std::thread::sleep(wait);
        }
        let mut state = shared.lock();
        let n = state.slots.len();
        // Only this camera marks buffers held, so the one found free above still is.
        let index = free(&state)?;
        let (t, bytes) = loop {
            let t = self.sequence;
            self.fill_rows(t);
            let slot = &mut state.slots[index];
            let tensor = Arc::get_mut(&mut slot.tensor).ok_or_else(|| {
                Error::InvalidArgument("a free synthetic frame buffer is still referenced".into())
            })?;
            let bytes = self.draw(tensor, t)?;
            let Some(base) = self.mjpeg.as_ref().map(|m| m.base) else {
                break (t, bytes);
            };
            // The check a V4L2 camera runs on each Motion-JPEG buffer it dequeues.
            match slot.accept_compressed(&base, bytes) {
                Ok(()) => break (t, bytes),
                Err(e) => {
                    log::debug!("synthetic camera: frame {t}: {e}; dropping it");
                    state.stats.malformed += 1;
                    state.note_sequence(t);
                    self.sequence = self.sequence.wrapping_add(1);
                }
            }
        };
        let slot = &mut state.slots[index];
        slot.state = SlotState::Held;
        state.note_sequence(t);
        state.stats.frames += 1;
        self.next_slot = (index + 1) % n;
        self.sequence = self.sequence.wrapping_add(1);
        Ok(Captured {
            index,
            sequence: t,
            timestamp: self.start.elapsed(),
            bytesused: [bytes, 0, 0],
        })
    }

    fn fill_rows(&mut self, t: u32) {
        let (w, h) = (self.width, self.height);
        let (bx, _, side) = box_at(w, h, t);
        for (k, row) in self.rows.iter_mut().enumerate() {
            // Kinds 0 and 1 are bar rows, 2 and 3 ramp rows; 1 and 3 cross the box.
            let y = if k < 2 { 0 } else { h - 1 };
            for (x, out) in (0..w).zip(row.iter_mut()) {
                let rgb = if k % 2 == 1 && x >= bx && x < bx + side {
                    [255; 3]
                } else {
                    pattern_rgb_no_box(w, h, t, x, y)
                };
                *out = if self.format.cfa().is_some() {
                    rgb
                } else if self.format == PixelFormat::Mjpeg {
                    rgb_to_jfif(rgb)
                } else {
                    rgb_to_yuv601(rgb)
                };
            }
        }
    }

    fn row_kind(&self, t: u32, y: u32) -> usize {
        row_kind(self.width, self.height, t, y)
    }

    /// Draws frame `t` into `tensor`; returns the bytes it used.
    fn draw(&mut self, tensor: &mut Tensor<u8>, t: u32) -> Result<u32> {
        if self.mjpeg.is_some() {
            return self.draw_mjpeg(tensor, t);
        }
        let layout = *tensor
            .layout()
            .ok_or_else(|| Error::InvalidArgument("frame tensor without a layout".into()))?;
        let planes = layout.planes().to_vec();
        let mut map = tensor.map_mut()?;
        let bytes = map.buffer_bytes_mut(0);
        let w = self.width as usize;
        if let Some(cfa) = self.format.cfa() {
            let storage = self.format.storage();
            let stride = planes[0].stride;
            for y in 0..self.height {
                let row = &self.rows[self.row_kind(t, y)];
                let start = planes[0].offset + y as usize * stride;
                let out = &mut bytes[start..start + layout.plane_row_bytes(0)];
                for (x, rgb) in row.iter().enumerate() {
                    let v = rgb[cfa.site(x as u32, y).channel()];
                    put_code(storage, out, x, v);
                }
            }
            return Ok(layout.required_len(0) as u32);
        }
        match self.format {
            PixelFormat::Yuyv => {
                let stride = planes[0].stride;
                for y in 0..self.height {
                    let row = &self.rows[self.row_kind(t, y)];
                    let start = planes[0].offset + y as usize * stride;
                    let out = &mut bytes[start..start + 2 * w];
                    for (pair, px) in out.chunks_exact_mut(4).zip(row.chunks_exact(2)) {
                        pair[0] = px[0][0];
                        pair[1] = avg(px[0][1], px[1][1]);
                        pair[2] = px[1][0];
                        pair[3] = avg(px[0][2], px[1][2]);
                    }
                }
            }
            _ => {
                let (luma, chroma) = (planes[0], planes[1]);
                for y in 0..self.height {
                    let row = &self.rows[self.row_kind(t, y)];
                    let start = luma.offset + y as usize * luma.stride;
                    for (o, px) in bytes[start..start + w].iter_mut().zip(row) {
                        *o = px[0];
                    }
                }
                for cy in 0..self.height / 2 {
                    let row = &self.rows[self.row_kind(t, cy * 2)];
                    let start = chroma.offset + cy as usize * chroma.stride;
                    for (pair, px) in bytes[start..start + w]
                        .chunks_exact_mut(2)
                        .zip(row.chunks_exact(2))
                    {
                        pair[0] = avg(px[0][1], px[1][1]);
                        pair[1] = avg(px[0][2], px[1][2]);
                    }
                }
            }
        }
        Ok(layout.required_len(0) as u32)
    }

    /// Encodes frame `t` as a 4:2:2 JPEG into `tensor` (damaged if it is due to be);
    /// returns its length.
    fn draw_mjpeg(&mut self, tensor: &mut Tensor<u8>, t: u32) -> Result<u32> {
        let Some(m) = self.mjpeg.as_mut() else {
            return Err(Error::InvalidArgument("not a Motion-JPEG camera".into()));
        };
        let w = self.width as usize;
        let [y_plane, u_plane, v_plane] = [0, 1, 2].map(|i| m.layout.planes()[i]);
        for y in 0..self.height {
            let row = &self.rows[row_kind(self.width, self.height, t, y)];
            let y_at = y_plane.offset + y as usize * y_plane.stride;
            for (o, px) in m.planes[y_at..y_at + w].iter_mut().zip(row) {
                *o = px[0];
            }
            for (plane, c) in [(u_plane, 1), (v_plane, 2)] {
                let at = plane.offset + y as usize * plane.stride;
                for (o, pair) in m.planes[at..at + w / 2].iter_mut().zip(row.chunks_exact(2)) {
                    *o = avg(pair[0][c], pair[1][c]);
                }
            }
        }
        let frame = m.encoder.encode(&m.planes, &m.layout, MJPEG_QUALITY)?;
        let damage = m.corrupt_every.and_then(|n| {
            let k = t.wrapping_add(1);
            k.is_multiple_of(n).then(|| {
                if (k / n) % 2 == 1 {
                    Damage::Truncated
                } else {
                    Damage::EndsEarly
                }
            })
        });
        let mut map = tensor.map_mut()?;
        let out = map.buffer_bytes_mut(0);
        if frame.len() > out.len() {
            return Err(Error::InvalidArgument(format!(
                "a {}-byte synthetic JPEG frame does not fit its {}-byte buffer",
                frame.len(),
                out.len()
            )));
        }
        let len = match damage {
            None => {
                out[..frame.len()].copy_from_slice(frame);
                frame.len()
            }
            Some(Damage::Truncated) => {
                let half = frame.len() / 2;
                out[..half].copy_from_slice(&frame[..half]);
                half
            }
            Some(Damage::EndsEarly) => {
                // The first half, then an end-of-image marker: the markers are whole,
                // the scan's data is not.
                let half = frame.len() / 2;
                out[..half].copy_from_slice(&frame[..half]);
                // A marker may not follow an FF that stuffs a zero: end on a clean byte.
                let cut = if out[half - 1] == 0xFF {
                    half - 1
                } else {
                    half
                };
                out[cut..cut + 2].copy_from_slice(&[0xFF, 0xD9]);
                cut + 2
            }
        };
        Ok(len as u32)
    }
}

/// Which of the pattern's row kinds row `y` of frame `t` is.
fn row_kind(width: u32, height: u32, t: u32, y: u32) -> usize {
    let (_, by, bs) = box_at(width, height, t);
    let in_box_rows = y >= by && y < by + bs;
    match (y < height * 2 / 3, in_box_rows) {
        (true, false) => 0,
        (true, true) => 1,
        (false, false) => 2,
        (false, true) => 3,
    }
}

/// Writes the 8-bit value `v` as sample `x` of a row stored as `storage`, scaled to its
/// depth the way sensors and vivid do (the top bits repeated into the low ones, so 255
/// is the white level).
fn put_code(storage: SampleStorage, row: &mut [u8], x: usize, v: u8) {
    let bits = storage.bits();
    let code = (u32::from(v) << (bits - 8)) | (u32::from(v) >> (16 - bits).min(8));
    match storage {
        SampleStorage::Byte => row[x] = v,
        SampleStorage::Le16Low { .. } | SampleStorage::Le16High { .. } => {
            row[2 * x..2 * x + 2].copy_from_slice(&(code as u16).to_le_bytes());
        }
        SampleStorage::Csi2Packed10 => {
            let (g, k) = (x / 4 * 5, x % 4);
            row[g + k] = (code >> 2) as u8;
            row[g + 4] = (row[g + 4] & !(3 << (2 * k))) | ((code & 3) << (2 * k)) as u8;
        }
        SampleStorage::Csi2Packed12 => {
            let (g, k) = (x / 2 * 3, x % 2);
            row[g + k] = (code >> 4) as u8;
            row[g + 2] = (row[g + 2] & !(15 << (4 * k))) | ((code & 15) << (4 * k)) as u8;
        }
    }
}

fn avg(a: u8, b: u8) -> u8 {
    (a as u16 + b as u16).div_ceil(2) as u8
}

/// [`pattern_rgb`] without the box.
fn pattern_rgb_no_box(w: u32, h: u32, t: u32, x: u32, y: u32) -> [u8; 3] {
    if y < h * 2 / 3 {
        let shifted = (x as u64 + t as u64 * SCROLL_PER_FRAME as u64) % w as u64;
        BARS[(shifted * 8 / w as u64) as usize]
    } else {
        let v = (x as u64 * 255 / (w.max(2) - 1) as u64) as u8;
        [v; 3]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::camera::Camera;

    fn check_frames(format: PixelFormat, w: u32, h: u32) {
        let config = CameraConfig {
            size: Some((w, h)),
            format: Some(format),
            buffers: 3,
            buffer_mode: BufferMode::Mmap,
            ..CameraConfig::default()
        };
        let mut cam = Camera::synthetic(config).unwrap();
        for t in 0..5u32 {
            let frame = cam.next_frame().unwrap();
            assert_eq!(frame.sequence(), t);
            let layout = *frame.layout().unwrap();
            let map = frame.map().unwrap();
            let bytes = map.buffer_bytes(0);
            let p = layout.planes();
            for y in 0..h {
                for x in 0..w {
                    let want = rgb_to_yuv601(pattern_rgb(w, h, t, x, y));
                    let got_y = match format {
                        PixelFormat::Yuyv => {
                            bytes[p[0].offset + y as usize * p[0].stride + 2 * x as usize]
                        }
                        _ => bytes[p[0].offset + y as usize * p[0].stride + x as usize],
                    };
                    assert_eq!(got_y, want[0], "{format} frame {t} Y at {x},{y}");
                }
                // Chroma: the rounded mean of the pair's own chroma (4:2:2 / 4:2:0 rows
                // take the even row).
                if format == PixelFormat::Nv12 && y % 2 == 1 {
                    continue;
                }
                for x in (0..w).step_by(2) {
                    let a = rgb_to_yuv601(pattern_rgb(w, h, t, x, y));
                    let b = rgb_to_yuv601(pattern_rgb(w, h, t, x + 1, y));
                    let (u, v) = match format {
                        PixelFormat::Yuyv => {
                            let o = p[0].offset + y as usize * p[0].stride + 2 * x as usize;
                            (bytes[o + 1], bytes[o + 3])
                        }
                        _ => {
                            let o = p[1].offset + (y / 2) as usize * p[1].stride + x as usize;
                            (bytes[o], bytes[o + 1])
                        }
                    };
                    assert_eq!(
                        (u, v),
                        (avg(a[1], b[1]), avg(a[2], b[2])),
                        "{format} frame {t} UV at {x},{y}"
                    );
                }
            }
        }
    }

    #[test]
    fn frames_match_the_pattern_definition() {
        check_frames(PixelFormat::Yuyv, 64, 48);
        check_frames(PixelFormat::Nv12, 96, 34);
    }

    #[test]
    fn pattern_moves_and_has_its_bars() {
        assert_eq!(rgb_to_yuv601([255, 255, 255]), [235, 128, 128]);
        assert_eq!(rgb_to_yuv601([0, 0, 0]), [16, 128, 128]);
        // Frame 0, row 0 is covered by the box at the left; bar 4 (magenta) is not.
        assert_eq!(pattern_rgb(640, 480, 0, 4 * 80 + 10, 0), BARS[4]);
        // The bars scroll left by SCROLL_PER_FRAME pixels per frame.
        assert_eq!(pattern_rgb(640, 480, 20, 4 * 80 + 10 - 80, 100), BARS[4]);
        assert_ne!(box_at(640, 480, 0), box_at(640, 480, 1));
        assert_eq!(pattern_rgb(640, 480, 0, 639, 479), [255; 3]);
    }
}
