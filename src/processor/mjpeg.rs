//! The decode stage of a conversion from a compressed (`mjpeg`) source: the frame is
//! decoded into YUV planes the processor owns, at the smallest scale the destination
//! allows, and the conversion then runs from those planes like any planar source.

use crate::convert::{ConvertInfo, ConvertOptions, Plan};
use crate::image::{ImageLayout, PixelFormat};
use crate::jpeg::{self, JpegDecoder};
use crate::tensor::{Memory, Tensor};
use crate::{Error, Result};

/// The decoder and its planes, kept between frames: converting frames of one geometry
/// allocates nothing after the first.
#[derive(Debug, Default)]
pub(super) struct MjpegStage {
    decoder: Option<JpegDecoder>,
    planes: Option<Tensor<u8>>,
    /// The planes of each compressed item of a batch, by item index.
    pub(super) batch_planes: Vec<Option<Tensor<u8>>>,
}

/// A decoded frame ready to convert: the plan from its planes, and what the caller is
/// told (geometry in the frame's own pixels).
pub(super) struct Decoded {
    pub(super) plan: Plan,
    pub(super) info: ConvertInfo,
}

impl MjpegStage {
    /// Decodes `data`, the frame `src_layout` describes, for a conversion into `dst_layout`
    /// as `options` ask. Every check (options, sizes, the frame itself) comes before the
    /// destination is touched: on an error nothing was written to it.
    pub(super) fn decode(
        &mut self,
        data: &[u8],
        src_layout: &ImageLayout,
        dst_layout: &ImageLayout,
        options: &ConvertOptions,
        memory: Option<Memory>,
    ) -> Result<Decoded> {
        decode_into(
            &mut self.decoder,
            &mut self.planes,
            data,
            src_layout,
            dst_layout,
            options,
            memory,
        )
    }

    /// As [`decode`](Self::decode), into the planes `slot` holds (allocated or replaced
    /// when the decoded layout changes): one per compressed item of a batch.
    pub(super) fn decode_into_slot(
        &mut self,
        slot: &mut Option<Tensor<u8>>,
        data: &[u8],
        src_layout: &ImageLayout,
        dst_layout: &ImageLayout,
        options: &ConvertOptions,
        memory: Option<Memory>,
    ) -> Result<Decoded> {
        decode_into(
            &mut self.decoder,
            slot,
            data,
            src_layout,
            dst_layout,
            options,
            memory,
        )
    }

    /// The planes of the frame just decoded, lent out for the conversion (the processor
    /// borrows itself mutably for it); [`restore_planes`](Self::restore_planes) gives
    /// them back for the next frame.
    pub(super) fn take_planes(&mut self) -> Result<Tensor<u8>> {
        self.planes
            .take()
            .ok_or_else(|| Error::InvalidArgument("no frame was decoded".into()))
    }

    pub(super) fn restore_planes(&mut self, planes: Tensor<u8>) {
        self.planes = Some(planes);
    }
}

/// The bytes of a compressed frame: its one plane, as long as its layout says (the
/// driver's `bytesused` for a camera frame).
pub(super) fn frame_bytes<'a>(buffer: &'a [u8], layout: &ImageLayout) -> Result<&'a [u8]> {
    let plane = layout.planes()[0];
    buffer
        .get(plane.offset..plane.offset + plane.stride)
        .ok_or(Error::BufferTooSmall {
            buffer: 0,
            needed: plane.offset + plane.stride,
            actual: buffer.len(),
        })
}

/// Decodes `data` with `decoder` (made on first use) into the planes `planes` holds:
/// see [`MjpegStage::decode`].
fn decode_into(
    decoder: &mut Option<JpegDecoder>,
    planes: &mut Option<Tensor<u8>>,
    data: &[u8],
    src_layout: &ImageLayout,
    dst_layout: &ImageLayout,
    options: &ConvertOptions,
    memory: Option<Memory>,
) -> Result<Decoded> {
    debug_assert_eq!(src_layout.format(), PixelFormat::Mjpeg);
    let info = jpeg::parse(data)?;
    if (info.width, info.height) != (src_layout.width(), src_layout.height()) {
        return Err(Error::CorruptFrame(format!(
            "the JPEG frame is {}x{}, its layout says {}x{}",
            info.width,
            info.height,
            src_layout.width(),
            src_layout.height()
        )));
    }
    let data = &data[..info.len];
    let colorimetry = src_layout.colorimetry().or(Some(jpeg::JFIF_COLORIMETRY));
    // The conversion as the caller sees it: the frame at its own size.
    let frame = ImageLayout::new(info.width, info.height, info.sampling.planar_format()?)?
        .with_colorimetry(colorimetry);
    let frame_plan = Plan::new(&frame, dst_layout, options)?;
    let content = (
        frame_plan.content[2].clamp(1, i64::from(u32::MAX)) as u32,
        frame_plan.content[3].clamp(1, i64::from(u32::MAX)) as u32,
    );
    let scaled = jpeg::choose_scale(frame_plan.crop, content, frame_plan.transposed);
    let layout = jpeg::decoded_layout(&info, scaled.scale)?.with_colorimetry(colorimetry);
    let planes = match planes {
        Some(t) if t.layout() == Some(&layout) => t,
        slot => slot.insert(Tensor::with_layout(layout, memory)?),
    };
    let decoder = match decoder {
        Some(d) => d,
        slot => slot.insert(JpegDecoder::new()?),
    };
    {
        let mut map = planes.map_mut()?;
        decoder.decode_planes(data, &info, scaled.scale, map.buffer_bytes_mut(0), &layout)?;
    }
    let plan = Plan::new(
        &layout,
        dst_layout,
        &ConvertOptions {
            crop: Some(scaled.crop),
            ..*options
        },
    )?;
    let mut out = frame_plan.info();
    out.decode_scale = scaled.scale;
    Ok(Decoded { plan, info: out })
}
