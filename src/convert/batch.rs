//! The items of a batch conversion: many images (cameras, regions of one frame, tiles),
//! each with its own crop and fit, converted into the slices of one tensor.

use crate::convert::{ConvertOptions, Crop, Fit};
use crate::image::ImageLayout;
use crate::tensor::Tensor;
use crate::{Error, Result};

/// Where one image of a batch comes from.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub enum BatchSource<'a> {
    /// An image tensor: a camera frame, an import, an upload (dma-bufs are imported by
    /// the GL backend, once per buffer).
    Tensor(&'a Tensor<u8>),
    /// An image in plain memory: one slice per buffer of `layout` (usually one).
    Bytes {
        /// The image's buffers.
        buffers: &'a [&'a [u8]],
        /// How the image lies in them.
        layout: &'a ImageLayout,
    },
}

impl BatchSource<'_> {
    /// The source's layout.
    pub fn layout(&self) -> Result<&ImageLayout> {
        match self {
            BatchSource::Tensor(t) => t.layout().ok_or_else(|| {
                Error::InvalidArgument(
                    "a batch source tensor has no image layout; make it with Tensor::image, \
                     Tensor::with_layout or an import, or call set_layout"
                        .into(),
                )
            }),
            BatchSource::Bytes { layout, .. } => Ok(layout),
        }
    }

    /// Whether two items read the very same image (the same tensor, or the same bytes
    /// with the same layout): the backends map, import or upload it once for both.
    pub(crate) fn same_as(&self, other: &BatchSource<'_>) -> bool {
        match (self, other) {
            (BatchSource::Tensor(a), BatchSource::Tensor(b)) => std::ptr::eq(*a, *b),
            (
                BatchSource::Bytes { buffers, layout },
                BatchSource::Bytes {
                    buffers: other,
                    layout: other_layout,
                },
            ) => {
                layout == other_layout
                    && buffers.len() == other.len()
                    && buffers
                        .iter()
                        .zip(other.iter())
                        .all(|(a, b)| std::ptr::eq(a.as_ptr(), b.as_ptr()) && a.len() == b.len())
            }
            _ => false,
        }
    }
}

/// One image of a batch: a source, and the crop and fit that override the batch's
/// options for it (normalisation, quantisation, interpolation, colour and orientation
/// are the batch's).
///
/// ```
/// use pinframe::{BatchItem, Crop, Fit, Memory, PixelFormat, Tensor};
/// let frame = Tensor::<u8>::image(1920, 1080, PixelFormat::Nv12, Memory::Heap)?;
/// let face = BatchItem::tensor(&frame)
///     .with_crop(Crop::new(800, 300, 240, 240))
///     .with_fit(Fit::Letterbox { pad: [0, 0, 0] });
/// assert_eq!(face.crop, Some(Crop::new(800, 300, 240, 240)));
/// # Ok::<(), pinframe::Error>(())
/// ```
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct BatchItem<'a> {
    /// The image.
    pub source: BatchSource<'a>,
    /// The part of it to convert (`None`: the batch options' crop, if any, else all).
    pub crop: Option<Crop>,
    /// How it is fitted into its slice (`None`: the batch options' fit).
    pub fit: Option<Fit>,
}

impl<'a> BatchItem<'a> {
    /// All of an image tensor, with the batch's crop and fit.
    pub fn tensor(source: &'a Tensor<u8>) -> Self {
        BatchItem {
            source: BatchSource::Tensor(source),
            crop: None,
            fit: None,
        }
    }

    /// All of an image in plain memory (one slice per buffer of `layout`).
    pub fn bytes(buffers: &'a [&'a [u8]], layout: &'a ImageLayout) -> Self {
        BatchItem {
            source: BatchSource::Bytes { buffers, layout },
            crop: None,
            fit: None,
        }
    }

    /// This item converts only `crop` of its source.
    pub fn with_crop(mut self, crop: Crop) -> Self {
        self.crop = Some(crop);
        self
    }

    /// This item is fitted into its slice as `fit` says.
    pub fn with_fit(mut self, fit: Fit) -> Self {
        self.fit = Some(fit);
        self
    }

    /// The options of this item's conversion: the batch's, with its crop and fit.
    pub fn options(&self, batch: &ConvertOptions) -> ConvertOptions {
        ConvertOptions {
            crop: self.crop.or(batch.crop),
            fit: self.fit.unwrap_or(batch.fit),
            ..*batch
        }
    }
}
