//! Reading the renderer's own target back into the destination's bytes.

use glow::HasContext;

use super::{Renderer, TargetShape, check_error};
use crate::gl::egl::Current;
use crate::image::ImageLayout;
use crate::{Element, Result};

impl Renderer {
    /// Reads the renderer's own target back into the destination buffers.
    pub(crate) fn read_back(
        &mut self,
        gl: &Current<'_>,
        fbo: glow::Framebuffer,
        dst_layout: &ImageLayout,
        shape: &TargetShape,
        buffers: &mut dyn ByteSink,
    ) -> Result<()> {
        dst_layout.validate_buffers(&buffers.lens(dst_layout.buffer_count()))?;
        let h = dst_layout.height() as usize;
        // SAFETY: the context is current (`gl`); every pointer handed to
        // glReadPixels covers the rows it writes: `stride * (h - 1) + width * 4`
        // bytes from the plane's offset (direct) or `width * 4 * h` bytes (scratch).
        unsafe {
            gl.bind_framebuffer(glow::READ_FRAMEBUFFER, Some(fbo));
            gl.pixel_store_i32(glow::PACK_ALIGNMENT, 1);
            for p in 0..shape.planes {
                let plane = dst_layout.planes()[p];
                let y0 = (p * h) as i32;
                let direct = shape.row_bytes.is_multiple_of(4) && plane.stride.is_multiple_of(4);
                if direct {
                    gl.pixel_store_i32(glow::PACK_ROW_LENGTH, (plane.stride / 4) as i32);
                    let end = plane.offset + plane.stride * (h - 1) + shape.row_bytes;
                    let out = &mut buffers.buffer(plane.buffer)[plane.offset..end];
                    gl.read_pixels(
                        0,
                        y0,
                        shape.width as i32,
                        h as i32,
                        glow::RGBA,
                        glow::UNSIGNED_BYTE,
                        glow::PixelPackData::Slice(Some(out)),
                    );
                    gl.pixel_store_i32(glow::PACK_ROW_LENGTH, 0);
                } else {
                    let tight = shape.width as usize * 4;
                    self.scratch.resize(tight * h, 0);
                    gl.pixel_store_i32(glow::PACK_ROW_LENGTH, 0);
                    gl.read_pixels(
                        0,
                        y0,
                        shape.width as i32,
                        h as i32,
                        glow::RGBA,
                        glow::UNSIGNED_BYTE,
                        glow::PixelPackData::Slice(Some(&mut self.scratch[..])),
                    );
                    let buf = buffers.buffer(plane.buffer);
                    for r in 0..h {
                        let d = plane.offset + r * plane.stride;
                        buf[d..d + shape.row_bytes]
                            .copy_from_slice(&self.scratch[r * tight..r * tight + shape.row_bytes]);
                    }
                }
            }
            gl.bind_framebuffer(glow::READ_FRAMEBUFFER, None);
        }
        check_error(gl, "reading the result back")
    }
}

/// Destination bytes by buffer index.
pub(crate) trait ByteSink {
    fn buffer(&mut self, index: usize) -> &mut [u8];
    fn lens(&mut self, count: usize) -> Vec<usize> {
        (0..count).map(|i| self.buffer(i).len()).collect()
    }
}

/// Host slices, one per buffer.
pub(crate) struct SliceSink<'a, 'b>(pub(crate) &'a mut [&'b mut [u8]]);

impl ByteSink for SliceSink<'_, '_> {
    fn buffer(&mut self, index: usize) -> &mut [u8] {
        match self.0.get_mut(index) {
            Some(b) => b,
            None => &mut [],
        }
    }
}

/// A tensor's writable mapping.
pub(crate) struct GuardSink<'a, 'b, T: Element>(
    pub(crate) &'a mut crate::tensor::MapGuardMut<'b, T>,
);

impl<T: Element> ByteSink for GuardSink<'_, '_, T> {
    fn buffer(&mut self, index: usize) -> &mut [u8] {
        self.0.buffer_bytes_mut(index)
    }
}
