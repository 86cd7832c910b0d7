//! A model's image input described without any runtime: size, memory layout (NHWC or
//! NCHW), element type and quantisation. Runtime bindings (`pinframe::runtime`) read it
//! from the model; [`ConvertOptions::for_input`] and [`ModelInput::image_layout`] turn it
//! into the conversion and the destination tensor, so nobody transcribes them by hand.

use std::fmt;

use super::options::{ConvertOptions, Quantize};
use crate::image::{ImageLayout, PixelFormat};
use crate::{DType, Error, Result};

/// The order of a 4-D image tensor's dimensions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TensorLayout {
    /// `[batch, height, width, channels]`: interleaved pixels (TFLite's usual input).
    Nhwc,
    /// `[batch, channels, height, width]`: one plane per channel (PyTorch exports).
    Nchw,
}

impl fmt::Display for TensorLayout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TensorLayout::Nhwc => "NHWC",
            TensorLayout::Nchw => "NCHW",
        })
    }
}

/// A model input that takes one image: what a conversion has to produce for it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ModelInput {
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// Channels: 1 (grey), 3 (RGB) or 4 (RGBA, NHWC only).
    pub channels: usize,
    /// Dimension order.
    pub layout: TensorLayout,
    /// Element type (`u8`, `i8`, `f16` or `f32` for a conversion to fill it).
    pub dtype: DType,
    /// The input's quantisation (`u8`/`i8` inputs of quantised models).
    pub quantize: Option<Quantize>,
}

impl ModelInput {
    /// Reads an image input from a tensor shape: `[1, H, W, C]` or `[H, W, C]` with `C` in
    /// {1, 3, 4} is NHWC, `[1, C, H, W]` or `[C, H, W]` with `C` in {1, 3} is NCHW (NHWC
    /// wins when both read, as for `[1, 3, 3, 3]`). Other shapes (a batch above 1, dynamic
    /// or zero dimensions, 2-D, 5-D) are errors that show the shape.
    pub fn from_shape(shape: &[i64], dtype: DType, quantize: Option<Quantize>) -> Result<Self> {
        let bad = |why: &str| {
            Error::Unsupported(format!(
                "a tensor of shape {shape:?} is not an image input ({why}); pinframe fills \
                 [1, H, W, C] (NHWC, C = 1, 3 or 4) and [1, C, H, W] (NCHW, C = 1 or 3) tensors"
            ))
        };
        let dims: &[i64] = match shape {
            [1, rest @ ..] if rest.len() == 3 => rest,
            [_, _, _, _] => return Err(bad("the batch is not 1")),
            [_, _, _] => shape,
            _ => return Err(bad("not 3 or 4 dimensions")),
        };
        if dims.iter().any(|&d| d <= 0 || d > i64::from(u32::MAX)) {
            return Err(bad("a dimension is dynamic, zero or too large"));
        }
        let (layout, h, w, c) = match *dims {
            [h, w, c] if matches!(c, 1 | 3 | 4) => (TensorLayout::Nhwc, h, w, c),
            [c, h, w] if matches!(c, 1 | 3) => (TensorLayout::Nchw, h, w, c),
            _ => return Err(bad("no channel dimension of 1, 3 or 4")),
        };
        if let Some(q) = quantize {
            q.validate(dtype)?;
        }
        Ok(ModelInput {
            width: w as u32,
            height: h as u32,
            channels: c as usize,
            layout,
            dtype,
            quantize,
        })
    }

    /// The destination format that fills this input: `rgb`, `rgba` or `grey` for NHWC,
    /// `planar-rgb` or `grey` for NCHW (RGB order; a model trained on BGR takes `bgr` or
    /// `planar-bgr` in a layout of the same size).
    pub fn pixel_format(&self) -> PixelFormat {
        match (self.layout, self.channels) {
            (_, 1) => PixelFormat::Grey,
            (TensorLayout::Nhwc, 4) => PixelFormat::Rgba,
            (TensorLayout::Nhwc, _) => PixelFormat::Rgb,
            (TensorLayout::Nchw, _) => PixelFormat::PlanarRgb,
        }
    }

    /// The dense image layout of this input (no row padding: runtimes read it as one
    /// contiguous tensor). Allocate the destination with
    /// `Tensor::with_layout(input.image_layout()?, memory)`.
    pub fn image_layout(&self) -> Result<ImageLayout> {
        ImageLayout::tight(self.width, self.height, self.pixel_format(), self.dtype)
    }

    /// The tensor's shape with its batch of 1, in its own dimension order.
    pub fn shape(&self) -> [usize; 4] {
        let (h, w, c) = (self.height as usize, self.width as usize, self.channels);
        match self.layout {
            TensorLayout::Nhwc => [1, h, w, c],
            TensorLayout::Nchw => [1, c, h, w],
        }
    }

    /// Bytes of the dense tensor.
    pub fn byte_len(&self) -> usize {
        self.shape().iter().product::<usize>() * self.dtype.size()
    }
}

impl ConvertOptions {
    /// The options a conversion into `input` needs from the model itself: its
    /// quantisation (for `u8`/`i8` inputs of quantised models). Everything else is the
    /// caller's choice (fit, normalisation the model was trained with, ...):
    ///
    /// ```
    /// use pinframe::convert::{ModelInput, TensorLayout};
    /// use pinframe::{ConvertOptions, DType, Fit, Normalize, Quantize};
    /// let input = ModelInput::from_shape(
    ///     &[1, 224, 224, 3],
    ///     DType::U8,
    ///     Some(Quantize::per_tensor(1.0 / 128.0, 128)),
    /// )?;
    /// assert_eq!(input.layout, TensorLayout::Nhwc);
    /// let options = ConvertOptions {
    ///     fit: Fit::Letterbox { pad: [0; 3] },
    ///     normalize: Normalize { mean: [0.5; 3], std: [0.5; 3] },
    ///     ..ConvertOptions::for_input(&input)
    /// };
    /// assert_eq!(options.quantize, input.quantize);
    /// # Ok::<(), pinframe::Error>(())
    /// ```
    pub fn for_input(input: &ModelInput) -> ConvertOptions {
        ConvertOptions {
            quantize: input.quantize,
            ..Default::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_nhwc_and_nchw() {
        let i = ModelInput::from_shape(&[1, 128, 96, 3], DType::F32, None).unwrap();
        assert_eq!((i.width, i.height, i.channels), (96, 128, 3));
        assert_eq!(i.layout, TensorLayout::Nhwc);
        assert_eq!(i.pixel_format(), PixelFormat::Rgb);
        assert_eq!(i.shape(), [1, 128, 96, 3]);
        assert_eq!(i.byte_len(), 128 * 96 * 3 * 4);
        let l = i.image_layout().unwrap();
        assert_eq!(l.planes()[0].stride, 96 * 3 * 4);

        let i = ModelInput::from_shape(&[1, 3, 64, 80], DType::I8, None).unwrap();
        assert_eq!(i.layout, TensorLayout::Nchw);
        assert_eq!(i.pixel_format(), PixelFormat::PlanarRgb);
        assert_eq!(i.shape(), [1, 3, 64, 80]);
        assert_eq!(i.image_layout().unwrap().shape(), vec![3, 64, 80]);

        let i = ModelInput::from_shape(&[32, 32, 1], DType::U8, None).unwrap();
        assert_eq!(i.pixel_format(), PixelFormat::Grey);
        let i = ModelInput::from_shape(&[1, 8, 8, 4], DType::U8, None).unwrap();
        assert_eq!(i.pixel_format(), PixelFormat::Rgba);
    }

    #[test]
    fn rejects_what_is_not_an_image() {
        for shape in [
            &[2, 128, 128, 3][..],
            &[1, 128, 128, 5],
            &[1, -1, 128, 3],
            &[1, 0, 128, 3],
            &[896, 16],
            &[1, 1, 1, 1, 1],
        ] {
            let e = ModelInput::from_shape(shape, DType::F32, None)
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("not an image input") && e.contains("NHWC"),
                "{e}"
            );
        }
        // A quantisation that does not fit the dtype.
        let e = ModelInput::from_shape(
            &[1, 8, 8, 3],
            DType::I8,
            Some(Quantize::per_tensor(0.5, 200)),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("zero point 200"), "{e}");
    }
}
