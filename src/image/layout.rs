//! Image layouts: where each plane of an image lies in its buffer(s), validated.

use std::fmt;

use super::{Colorimetry, FormatFamily, PixelFormat};
use crate::{DType, Error, Result};

/// `DRM_FORMAT_MOD_LINEAR`: rows one after the other, no tiling.
pub const DRM_FORMAT_MOD_LINEAR: u64 = 0;
/// `DRM_FORMAT_MOD_INVALID`: the modifier is unknown (implicit, driver-chosen).
pub const DRM_FORMAT_MOD_INVALID: u64 = 0x00ff_ffff_ffff_ffff;

/// The largest width or height pinframe accepts (V4L2 and GL limits are far below it).
pub const MAX_DIMENSION: u32 = 1 << 16;

/// The most planes any format has (Y, U, V).
pub const MAX_PLANES: usize = 3;

/// One plane of an image: which buffer holds it, where it starts, and its row pitch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Plane {
    /// Index of the buffer (fd) holding this plane; 0 unless the image spans several buffers.
    pub buffer: usize,
    /// Byte offset of the plane's first row in its buffer.
    pub offset: usize,
    /// Bytes from one row to the next (row pitch).
    pub stride: usize,
}

impl Plane {
    /// A plane in buffer 0.
    pub const fn new(offset: usize, stride: usize) -> Self {
        Plane {
            buffer: 0,
            offset,
            stride,
        }
    }
}

/// A validated image layout: size, format, element type, planes (offset and stride in
/// bytes, and which buffer), DRM modifier and, if known, colorimetry.
///
/// Every constructor checks the geometry (row pitch at least the row's bytes, element
/// alignment, non-overlapping planes, no integer overflow); [`ImageLayout::validate_buffers`]
/// then checks it against the real buffer sizes.
///
/// A layout is `Copy` (its planes live in a fixed-size array), so converting a frame
/// never clones or allocates one.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct ImageLayout {
    width: u32,
    height: u32,
    format: PixelFormat,
    dtype: DType,
    /// The first `plane_count` entries are the planes; the rest stay `Plane::default()`
    /// so that derived equality and hashing see only real planes.
    planes: [Plane; MAX_PLANES],
    plane_count: u8,
    modifier: u64,
    colorimetry: Option<Colorimetry>,
}

fn div_ceil(a: u32, b: u32) -> u32 {
    a.div_ceil(b)
}

fn align_up(value: usize, align: usize) -> Option<usize> {
    value.checked_add(align - 1).map(|v| v / align * align)
}

impl ImageLayout {
    /// A tightly packed `u8` image in one buffer.
    pub fn new(width: u32, height: u32, format: PixelFormat) -> Result<Self> {
        Self::tight(width, height, format, DType::U8)
    }

    /// A tightly packed image of `dtype` elements in one buffer.
    pub fn tight(width: u32, height: u32, format: PixelFormat, dtype: DType) -> Result<Self> {
        Self::with_row_alignment(width, height, format, dtype, 1)
    }

    /// An image in one buffer whose every row pitch and plane offset is a multiple of
    /// `alignment` bytes (a power of two, e.g. 64 for DMA buffers).
    pub fn with_row_alignment(
        width: u32,
        height: u32,
        format: PixelFormat,
        dtype: DType,
        alignment: usize,
    ) -> Result<Self> {
        if !alignment.is_power_of_two() {
            return Err(Error::InvalidLayout(format!(
                "row alignment {alignment} is not a power of two"
            )));
        }
        Self::check_header(width, height, format, dtype)?;
        let alignment = alignment.max(dtype.size());
        let mut planes = Vec::with_capacity(format.plane_count());
        let mut offset = 0usize;
        for i in 0..format.plane_count() {
            let row = if format.is_compressed() {
                compressed_capacity(width, height)
            } else {
                plane_row_bytes(width, format, dtype, i)
                    .ok_or_else(|| overflow(width, height, format))?
            };
            let stride = align_up(row, alignment).ok_or_else(|| overflow(width, height, format))?;
            offset = align_up(offset, alignment).ok_or_else(|| overflow(width, height, format))?;
            planes.push(Plane::new(offset, stride));
            let rows = plane_rows(height, format, i) as usize;
            offset = stride
                .checked_mul(rows)
                .and_then(|n| n.checked_add(offset))
                .ok_or_else(|| overflow(width, height, format))?;
        }
        Self::with_planes(width, height, format, dtype, &planes)
    }

    /// An image in one buffer whose first plane has row pitch `stride` bytes; the other
    /// planes follow it directly, with the pitch the format implies (the same pitch for
    /// a semi-planar chroma plane, half of it, rounded up, for I420/YV12/I422 chroma,
    /// `stride` for I444 chroma and for each planar-RGB plane). This is how V4L2 describes
    /// single-buffer formats.
    ///
    /// For a compressed format (`mjpeg`) `stride` is the length of the frame's data (the
    /// driver's `bytesused`): the layout is one "row" of that many bytes.
    pub fn with_stride(
        width: u32,
        height: u32,
        format: PixelFormat,
        dtype: DType,
        stride: usize,
    ) -> Result<Self> {
        Self::check_header(width, height, format, dtype)?;
        let mut planes = Vec::with_capacity(format.plane_count());
        let mut offset = 0usize;
        for i in 0..format.plane_count() {
            let plane_stride = if i > 0 && format.family() == FormatFamily::PlanarYuv {
                stride.div_ceil(format.chroma_subsampling().0 as usize)
            } else {
                stride
            };
            planes.push(Plane::new(offset, plane_stride));
            let rows = plane_rows(height, format, i) as usize;
            offset = plane_stride
                .checked_mul(rows)
                .and_then(|n| n.checked_add(offset))
                .ok_or_else(|| overflow(width, height, format))?;
        }
        Self::with_planes(width, height, format, dtype, &planes)
    }

    /// An image with explicit planes (one per plane of `format`, in the format's plane
    /// order: Y, then chroma; Y, U, V for I420 and Y, V, U for YV12; R, G, B or B, G, R).
    pub fn with_planes(
        width: u32,
        height: u32,
        format: PixelFormat,
        dtype: DType,
        planes: &[Plane],
    ) -> Result<Self> {
        Self::check_header(width, height, format, dtype)?;
        if planes.len() != format.plane_count() {
            return Err(Error::InvalidLayout(format!(
                "{format} has {} plane(s), {} given",
                format.plane_count(),
                planes.len()
            )));
        }
        // Every buffer holds a plane, so an index at or past the plane count names a buffer
        // no plane could fill (and `usize::MAX + 1` below must not wrap).
        if let Some((i, p)) = planes
            .iter()
            .enumerate()
            .find(|(_, p)| p.buffer >= planes.len())
        {
            return Err(Error::InvalidLayout(format!(
                "plane {i} is in buffer {}, but {format} has {} plane(s), so buffer indices \
                 run from 0 to {}",
                p.buffer,
                planes.len(),
                planes.len() - 1
            )));
        }
        let buffers = planes.iter().map(|p| p.buffer).max().unwrap_or(0) + 1;
        for b in 0..buffers {
            if !planes.iter().any(|p| p.buffer == b) {
                return Err(Error::InvalidLayout(format!(
                    "planes use buffer indices up to {} but none uses buffer {b}",
                    buffers - 1
                )));
            }
        }
        let mut extents = Vec::with_capacity(planes.len());
        for (i, p) in planes.iter().enumerate() {
            let row = plane_row_bytes(width, format, dtype, i)
                .ok_or_else(|| overflow(width, height, format))?;
            // A compressed frame is one row holding all of its data.
            let row = if format.is_compressed() {
                p.stride.max(row)
            } else {
                row
            };
            if p.stride < row {
                let hint = if format.is_yuv() && width % 2 == 1 {
                    format!(
                        " (odd width {width} needs {} chroma samples per row: pad the stride or use an even width)",
                        width.div_ceil(2)
                    )
                } else {
                    String::new()
                };
                return Err(Error::InvalidLayout(format!(
                    "plane {i} of {width}x{height} {format}/{dtype}: stride {} is less than the {row} bytes of a row{hint}",
                    p.stride
                )));
            }
            if p.offset % dtype.size() != 0 || p.stride % dtype.size() != 0 {
                return Err(Error::InvalidLayout(format!(
                    "plane {i}: offset {} and stride {} must be multiples of the {}-byte {dtype} element",
                    p.offset,
                    p.stride,
                    dtype.size()
                )));
            }
            let rows = plane_rows(height, format, i) as usize;
            let end = p
                .stride
                .checked_mul(rows - 1)
                .and_then(|n| n.checked_add(row))
                .and_then(|n| n.checked_add(p.offset))
                .filter(|&n| n <= isize::MAX as usize)
                .ok_or_else(|| {
                    Error::InvalidLayout(format!(
                        "plane {i}: offset {} + {rows} rows of stride {} overflows",
                        p.offset, p.stride
                    ))
                })?;
            extents.push((p.buffer, p.offset, end));
        }
        for (i, a) in extents.iter().enumerate() {
            for (j, b) in extents.iter().enumerate().skip(i + 1) {
                if a.0 == b.0 && a.1 < b.2 && b.1 < a.2 {
                    return Err(Error::InvalidLayout(format!(
                        "planes {i} (bytes {}..{}) and {j} (bytes {}..{}) overlap in buffer {}",
                        a.1, a.2, b.1, b.2, a.0
                    )));
                }
            }
        }
        let mut fixed = [Plane::default(); MAX_PLANES];
        fixed[..planes.len()].copy_from_slice(planes);
        Ok(ImageLayout {
            width,
            height,
            format,
            dtype,
            planes: fixed,
            plane_count: planes.len() as u8,
            modifier: DRM_FORMAT_MOD_LINEAR,
            colorimetry: None,
        })
    }

    fn check_header(width: u32, height: u32, format: PixelFormat, dtype: DType) -> Result<()> {
        if width == 0 || height == 0 {
            return Err(Error::InvalidLayout(format!(
                "image size {width}x{height} is empty"
            )));
        }
        if width > MAX_DIMENSION || height > MAX_DIMENSION {
            return Err(Error::InvalidLayout(format!(
                "image size {width}x{height} exceeds the {MAX_DIMENSION} pixel limit"
            )));
        }
        if format.is_source_only() && dtype != DType::U8 {
            return Err(Error::InvalidLayout(format!(
                "{format} is a source format of bytes; {dtype} elements are not supported (use \
                 u8)"
            )));
        }
        let (mw, mh) = format.size_multiple();
        if !width.is_multiple_of(mw) || !height.is_multiple_of(mh) {
            let why = if mw == 4 {
                "a CSI-2 RAW10 row is whole 4-pixel groups of 5 bytes and a Bayer image whole \
                 2x2 tiles"
            } else {
                "a Bayer image is whole 2x2 colour-filter tiles"
            };
            return Err(Error::InvalidLayout(format!(
                "{width}x{height} {format}: the width must be a multiple of {mw} and the height \
                 of {mh} ({why}); crop the frame to {}x{} (a conversion's crop may still be odd)",
                width / mw * mw,
                height / mh * mh
            )));
        }
        Ok(())
    }

    /// Sets the DRM format modifier (default [`DRM_FORMAT_MOD_LINEAR`]).
    pub fn with_modifier(mut self, modifier: u64) -> Self {
        self.modifier = modifier;
        self
    }

    /// Sets the colorimetry (`None` = unknown: converters pick by height).
    pub fn with_colorimetry(mut self, colorimetry: Option<Colorimetry>) -> Self {
        self.colorimetry = colorimetry;
        self
    }

    /// Width in pixels.
    pub fn width(&self) -> u32 {
        self.width
    }
    /// Height in pixels.
    pub fn height(&self) -> u32 {
        self.height
    }
    /// The pixel format.
    pub fn format(&self) -> PixelFormat {
        self.format
    }
    /// The element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }
    /// The planes, in the format's plane order.
    pub fn planes(&self) -> &[Plane] {
        &self.planes[..self.plane_count as usize]
    }
    /// The DRM format modifier.
    pub fn modifier(&self) -> u64 {
        self.modifier
    }
    /// The colorimetry, if known.
    pub fn colorimetry(&self) -> Option<Colorimetry> {
        self.colorimetry
    }

    /// Number of separate buffers the planes live in.
    pub fn buffer_count(&self) -> usize {
        self.planes().iter().map(|p| p.buffer).max().unwrap_or(0) + 1
    }

    /// Samples (not bytes) per row of plane `i`: pixels, or chroma pairs/samples.
    pub fn plane_width(&self, i: usize) -> u32 {
        plane_samples(self.width, self.format, i)
    }

    /// Rows of plane `i`.
    pub fn plane_height(&self, i: usize) -> u32 {
        plane_rows(self.height, self.format, i)
    }

    /// Bytes of image data in one row of plane `i` (excluding pitch padding); for a
    /// compressed format, the length of the frame's data.
    pub fn plane_row_bytes(&self, i: usize) -> usize {
        if self.format.is_compressed() {
            return self.planes[i].stride;
        }
        // Cannot overflow: checked when the layout was built.
        plane_row_bytes(self.width, self.format, self.dtype, i).unwrap_or(usize::MAX)
    }

    /// One past the last data byte of plane `i` in its buffer.
    pub fn plane_end(&self, i: usize) -> usize {
        let p = self.planes[i];
        p.offset + p.stride * (self.plane_height(i) as usize - 1) + self.plane_row_bytes(i)
    }

    /// Bytes buffer `buffer` must have: the end of its last plane's last row.
    pub fn required_len(&self, buffer: usize) -> usize {
        (0..self.planes().len())
            .filter(|&i| self.planes[i].buffer == buffer)
            .map(|i| self.plane_end(i))
            .max()
            .unwrap_or(0)
    }

    /// Bytes of one buffer's allocation for this layout: every plane padded to whole
    /// rows of its stride (what an allocator should reserve).
    pub fn allocation_len(&self, buffer: usize) -> usize {
        (0..self.planes().len())
            .filter(|&i| self.planes[i].buffer == buffer)
            .map(|i| self.planes[i].offset + self.planes[i].stride * self.plane_height(i) as usize)
            .max()
            .unwrap_or(0)
    }

    /// Checks the layout against the sizes of its buffers, one length per buffer.
    pub fn validate_buffers(&self, buffer_lens: &[usize]) -> Result<()> {
        if buffer_lens.len() != self.buffer_count() {
            return Err(Error::InvalidLayout(format!(
                "layout spans {} buffer(s), {} given",
                self.buffer_count(),
                buffer_lens.len()
            )));
        }
        for (b, &len) in buffer_lens.iter().enumerate() {
            let needed = self.required_len(b);
            if needed > len {
                return Err(Error::BufferTooSmall {
                    buffer: b,
                    needed,
                    actual: len,
                });
            }
        }
        Ok(())
    }

    /// The tensor shape that describes this image: `[h, w, c]` for packed RGB formats and
    /// grey (c = 1), `[c, h, w]` for planar RGB, `[h, w, 2]` for packed 4:2:2 YUV, and
    /// OpenCV's `[h + chroma rows, w]` for semi-planar and planar YUV.
    pub fn shape(&self) -> Vec<usize> {
        let (w, h) = (self.width as usize, self.height as usize);
        match self.format.family() {
            FormatFamily::PackedRgb => vec![h, w, self.format.channels()],
            FormatFamily::Grey => vec![h, w, 1],
            FormatFamily::PlanarRgb => vec![3, h, w],
            FormatFamily::PackedYuv422 => vec![h, w, 2],
            FormatFamily::SemiPlanarYuv => vec![h + self.plane_height(1) as usize, w],
            // Both chroma planes in rows of the luma width: half a row each for 4:2:x,
            // a whole row each for 4:4:4.
            FormatFamily::PlanarYuv => {
                let chroma_rows = self.plane_height(1) as usize;
                let per_row = if self.format.chroma_subsampling().0 == 1 {
                    2
                } else {
                    1
                };
                vec![h + chroma_rows * per_row, w]
            }
            FormatFamily::Jpeg => vec![self.plane_row_bytes(0)],
            // Rows of bytes: a sample may span bytes (16-bit words, CSI-2 groups).
            FormatFamily::Bayer | FormatFamily::DeepGrey => vec![h, self.plane_row_bytes(0)],
            FormatFamily::SemiPlanarYuv16 => {
                vec![h + self.plane_height(1) as usize, self.plane_row_bytes(0)]
            }
        }
    }
}

impl fmt::Debug for ImageLayout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "ImageLayout({}x{} {}/{}",
            self.width, self.height, self.format, self.dtype
        )?;
        for p in self.planes() {
            write!(f, " [buf {} @{} pitch {}]", p.buffer, p.offset, p.stride)?;
        }
        if self.modifier != DRM_FORMAT_MOD_LINEAR {
            write!(f, " modifier {:#x}", self.modifier)?;
        }
        if let Some(c) = self.colorimetry {
            write!(f, " {c}")?;
        }
        f.write_str(")")
    }
}

/// The shortest data a compressed frame can have: a JPEG's start and end markers.
const MIN_JPEG_BYTES: usize = 4;

/// The buffer a compressed frame of `width`x`height` is given when nobody says how big
/// (`ImageLayout::new`, `Tensor::image`): two bytes a pixel, as V4L2 drivers size their
/// Motion-JPEG buffers, plus room for the headers of a tiny frame.
pub fn compressed_capacity(width: u32, height: u32) -> usize {
    width as usize * height as usize * 2 + 64 * 1024
}

fn overflow(width: u32, height: u32, format: PixelFormat) -> Error {
    Error::InvalidLayout(format!("{width}x{height} {format}: size overflows"))
}

/// Samples per row of plane `i` (chroma planes of semi-planar formats count UV pairs).
fn plane_samples(width: u32, format: PixelFormat, i: usize) -> u32 {
    match format.family() {
        FormatFamily::PackedYuv422 => div_ceil(width, 2) * 2,
        FormatFamily::SemiPlanarYuv | FormatFamily::PlanarYuv | FormatFamily::SemiPlanarYuv16
            if i > 0 =>
        {
            div_ceil(width, format.chroma_subsampling().0)
        }
        _ => width,
    }
}

fn plane_rows(height: u32, format: PixelFormat, i: usize) -> u32 {
    let (_, vsub) = format.chroma_subsampling();
    if format.is_compressed() {
        // A compressed frame is one row of bytes.
        1
    } else if i > 0 && format.is_yuv() {
        div_ceil(height, vsub)
    } else {
        height
    }
}

fn plane_row_bytes(width: u32, format: PixelFormat, dtype: DType, i: usize) -> Option<usize> {
    let w = width as usize;
    let samples_bytes = match format.family() {
        FormatFamily::PackedYuv422 => w.div_ceil(2).checked_mul(4)?,
        FormatFamily::SemiPlanarYuv if i > 0 => w.div_ceil(2).checked_mul(2)?,
        FormatFamily::PlanarYuv if i > 0 => w.div_ceil(format.chroma_subsampling().0 as usize),
        FormatFamily::SemiPlanarYuv | FormatFamily::PlanarYuv => w,
        FormatFamily::Grey | FormatFamily::PlanarRgb => w.checked_mul(dtype.size())?,
        FormatFamily::PackedRgb => w
            .checked_mul(format.channels())?
            .checked_mul(dtype.size())?,
        FormatFamily::Bayer | FormatFamily::DeepGrey => {
            let (pixels, bytes) = format.storage().group();
            w.div_ceil(pixels as usize).checked_mul(bytes)?
        }
        FormatFamily::SemiPlanarYuv16 if i > 0 => w.div_ceil(2).checked_mul(4)?,
        FormatFamily::SemiPlanarYuv16 => w.checked_mul(2)?,
        FormatFamily::Jpeg => MIN_JPEG_BYTES,
    };
    Some(samples_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_compressed_frame_is_one_row_of_its_length() {
        let cap = compressed_capacity(640, 480);
        let l = ImageLayout::new(640, 480, PixelFormat::Mjpeg).unwrap();
        assert_eq!(l.planes(), &[Plane::new(0, cap)]);
        assert_eq!((l.required_len(0), l.allocation_len(0)), (cap, cap));
        assert_eq!(l.plane_height(0), 1);
        let f = ImageLayout::with_stride(640, 480, PixelFormat::Mjpeg, DType::U8, 1234).unwrap();
        assert_eq!((f.required_len(0), f.plane_row_bytes(0)), (1234, 1234));
        assert_eq!(f.shape(), vec![1234]);
        assert!(ImageLayout::with_stride(640, 480, PixelFormat::Mjpeg, DType::U8, 2).is_err());
        assert!(ImageLayout::tight(8, 8, PixelFormat::Mjpeg, DType::F32).is_err());
    }

    #[test]
    fn planar_422_and_444_chroma() {
        let l = ImageLayout::new(7, 5, PixelFormat::I422).unwrap();
        assert_eq!(
            l.planes(),
            &[Plane::new(0, 7), Plane::new(35, 4), Plane::new(55, 4)]
        );
        assert_eq!(l.shape(), vec![10, 7]);
        let l = ImageLayout::new(6, 4, PixelFormat::I444).unwrap();
        assert_eq!(
            l.planes(),
            &[Plane::new(0, 6), Plane::new(24, 6), Plane::new(48, 6)]
        );
        assert_eq!(l.shape(), vec![12, 6]);
        let s = ImageLayout::with_stride(6, 4, PixelFormat::I422, DType::U8, 8).unwrap();
        assert_eq!(s.planes()[1], Plane::new(32, 4));
    }

    #[test]
    fn nv12_tight_layout() {
        let l = ImageLayout::new(640, 480, PixelFormat::Nv12).unwrap();
        assert_eq!(
            l.planes(),
            &[Plane::new(0, 640), Plane::new(640 * 480, 640)]
        );
        assert_eq!(l.required_len(0), 640 * 480 * 3 / 2);
        assert_eq!(l.shape(), vec![720, 640]);
    }

    #[test]
    fn aligned_planar_f32() {
        let l =
            ImageLayout::with_row_alignment(10, 3, PixelFormat::PlanarRgb, DType::F32, 64).unwrap();
        assert_eq!(l.planes()[0].stride, 64);
        assert_eq!(l.planes()[1].offset, 192);
        assert_eq!(l.required_len(0), 2 * 192 + 2 * 64 + 40);
        assert_eq!(l.allocation_len(0), 3 * 192);
    }

    #[test]
    fn i420_with_stride_halves_chroma_pitch() {
        let l = ImageLayout::with_stride(640, 480, PixelFormat::I420, DType::U8, 704).unwrap();
        assert_eq!(l.planes()[1], Plane::new(704 * 480, 352));
        assert_eq!(l.planes()[2], Plane::new(704 * 480 + 352 * 240, 352));
    }

    #[test]
    fn odd_width_yuyv_needs_padded_stride() {
        let e = ImageLayout::with_stride(641, 2, PixelFormat::Yuyv, DType::U8, 1282).unwrap_err();
        assert!(e.to_string().contains("odd width"), "{e}");
        assert!(ImageLayout::with_stride(641, 2, PixelFormat::Yuyv, DType::U8, 1284).is_ok());
    }

    #[test]
    fn rejects_bad_layouts() {
        assert!(ImageLayout::new(0, 4, PixelFormat::Rgb).is_err());
        assert!(ImageLayout::tight(4, 4, PixelFormat::Nv12, DType::F32).is_err());
        let overlap = [Plane::new(0, 4), Plane::new(8, 4)];
        assert!(ImageLayout::with_planes(4, 4, PixelFormat::Nv12, DType::U8, &overlap).is_err());
        let huge = [Plane::new(usize::MAX - 4, 4)];
        assert!(ImageLayout::with_planes(4, 4, PixelFormat::Grey, DType::U8, &huge).is_err());
        let misaligned = [Plane::new(2, 16), Plane::new(64, 16), Plane::new(128, 16)];
        assert!(
            ImageLayout::with_planes(4, 4, PixelFormat::PlanarRgb, DType::F32, &misaligned)
                .is_err()
        );
        let gap = [
            Plane {
                buffer: 0,
                offset: 0,
                stride: 4,
            },
            Plane {
                buffer: 2,
                offset: 0,
                stride: 4,
            },
        ];
        assert!(ImageLayout::with_planes(4, 4, PixelFormat::Nv12, DType::U8, &gap).is_err());
    }

    #[test]
    fn a_buffer_index_past_the_planes_is_refused() {
        for buffer in [2, 3, usize::MAX] {
            let planes = [
                Plane::new(0, 64),
                Plane {
                    buffer,
                    offset: 0,
                    stride: 64,
                },
            ];
            let e =
                ImageLayout::with_planes(64, 4, PixelFormat::Nv12, DType::U8, &planes).unwrap_err();
            assert!(
                e.to_string()
                    .contains(&format!("plane 1 is in buffer {buffer}")),
                "{e}"
            );
        }
    }

    #[test]
    fn two_buffer_nv12() {
        let planes = [
            Plane::new(0, 64),
            Plane {
                buffer: 1,
                offset: 0,
                stride: 64,
            },
        ];
        let l = ImageLayout::with_planes(64, 4, PixelFormat::Nv12, DType::U8, &planes).unwrap();
        assert_eq!(l.buffer_count(), 2);
        assert!(l.validate_buffers(&[256, 128]).is_ok());
        assert!(matches!(
            l.validate_buffers(&[256, 127]),
            Err(Error::BufferTooSmall { buffer: 1, .. })
        ));
    }
}
