//! Render targets: the byte-packing shape a destination needs, the renderer's own RGBA8
//! target (read back afterwards), and framebuffers over textures (imported destinations
//! use them too).

use glow::HasContext;

use super::{Renderer, set_nearest};
use crate::gl::egl::Current;
use crate::image::{FormatFamily, ImageLayout};
use crate::{DType, Error, Result};

/// The byte-packing render target a destination layout needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TargetShape {
    /// Texels (4 bytes each) per row.
    pub(crate) width: u32,
    /// Rows: the image height, times 3 for planar outputs.
    pub(crate) rows: u32,
    /// Bytes of one destination row (of one plane).
    pub(crate) row_bytes: usize,
    /// Planes (1, or 3 for planar RGB).
    pub(crate) planes: usize,
}

/// Checks that GL can produce `layout` and returns its render-target shape.
pub(crate) fn target_shape(layout: &ImageLayout) -> Result<TargetShape> {
    let f = layout.format();
    if f.is_yuv() {
        return Err(Error::Unsupported(format!(
            "{f} is not a destination format (use rgb, bgr, rgba, bgra, grey or planar-rgb/bgr)"
        )));
    }
    match layout.dtype() {
        DType::U8 | DType::I8 | DType::F16 | DType::F32 => {}
        d => {
            return Err(Error::Unsupported(format!(
                "GL destinations hold u8, i8, f16 or f32 elements, not {d}"
            )));
        }
    }
    let row_bytes = layout.plane_row_bytes(0);
    let planes = if f.family() == FormatFamily::PlanarRgb {
        3
    } else {
        1
    };
    Ok(TargetShape {
        width: row_bytes.div_ceil(4) as u32,
        rows: layout.height() * planes as u32,
        row_bytes,
        planes,
    })
}

impl Renderer {
    /// The renderer's own RGBA8 target of `shape`, as a framebuffer.
    pub(crate) fn own_target(
        &mut self,
        gl: &Current<'_>,
        shape: &TargetShape,
    ) -> Result<glow::Framebuffer> {
        self.check_size("the destination", shape.width, shape.rows)?;
        if let Some((w, h, _, fbo)) = self.target
            && w == shape.width
            && h == shape.rows
        {
            return Ok(fbo);
        }
        // SAFETY: the context is current (`gl`); the previous target is ours.
        unsafe {
            if let Some((_, _, tex, fbo)) = self.target.take() {
                gl.delete_framebuffer(fbo);
                gl.delete_texture(tex);
            }
            let tex = gl
                .create_texture()
                .map_err(|e| Error::Gl(format!("glGenTextures: {e}")))?;
            gl.bind_texture(glow::TEXTURE_2D, Some(tex));
            set_nearest(gl);
            gl.tex_storage_2d(
                glow::TEXTURE_2D,
                1,
                glow::RGBA8,
                shape.width as i32,
                shape.rows as i32,
            );
            let fbo = match framebuffer_for(gl, tex) {
                Ok(f) => f,
                Err(e) => {
                    gl.delete_texture(tex);
                    return Err(e);
                }
            };
            self.target = Some((shape.width, shape.rows, tex, fbo));
            Ok(fbo)
        }
    }
}

/// A framebuffer with `tex` (a 2D texture of `gl`'s context) as its colour attachment,
/// checked complete.
pub(crate) fn framebuffer_for(gl: &Current<'_>, tex: glow::Texture) -> Result<glow::Framebuffer> {
    // SAFETY: the context is current (`gl`); a texture name that is not a live 2D
    // texture makes the framebuffer incomplete (refused below), and the framebuffer is
    // deleted on failure.
    unsafe {
        let fbo = gl
            .create_framebuffer()
            .map_err(|e| Error::Gl(format!("glGenFramebuffers: {e}")))?;
        gl.bind_framebuffer(glow::FRAMEBUFFER, Some(fbo));
        gl.framebuffer_texture_2d(
            glow::FRAMEBUFFER,
            glow::COLOR_ATTACHMENT0,
            glow::TEXTURE_2D,
            Some(tex),
            0,
        );
        let status = gl.check_framebuffer_status(glow::FRAMEBUFFER);
        gl.bind_framebuffer(glow::FRAMEBUFFER, None);
        if status != glow::FRAMEBUFFER_COMPLETE {
            gl.delete_framebuffer(fbo);
            return Err(Error::Gl(format!(
                "the render target is not renderable (framebuffer status {status:#x})"
            )));
        }
        Ok(fbo)
    }
}
