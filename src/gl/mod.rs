//! The OpenGL ES backend.
//!
//! # Threading
//!
//! A [`GlBackend`] owns one EGL context. The context is made current on the calling
//! thread at the start of every call that touches GL and released before the call
//! returns (also on error paths), so the backend — and the `ImageProcessor` holding it —
//! is `Send` and may move between threads freely; it is not `Sync` (`&mut self` calls).
//! Two backends in one process share the EGL display (reference counted) but not
//! contexts.
//!
//! # Outputs and the extensions they need
//!
//! Every destination (packed RGB/BGR 3-byte, RGBA/BGRA, grey, planar CHW; u8, i8, f16,
//! f32) is produced by one fused pass into an `RGBA8` render target that holds the
//! destination's *bytes* (see `shaders/convert.frag.glsl`), so none of them needs a
//! float render target: plain GLES 3.0 suffices (f16 uses `packHalf2x16`, f32
//! `floatBitsToUint`). Zero-copy needs `EGL_EXT_image_dma_buf_import` plus
//! `GL_OES_EGL_image` (and `EGL_EXT_image_dma_buf_import_modifiers` for non-linear
//! modifiers).

mod egl;
mod program;
mod render;

pub use egl::{EglPlatform, GlInfo, PLATFORM_ENV};
pub(crate) use render::Draw;

use crate::Result;
use crate::image::ImageLayout;

use egl::GlContext;
use render::Renderer;

/// Counters of the GL backend's work.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GlStats {
    /// Host sources uploaded into textures.
    pub uploads: u64,
    /// Destinations read back into mapped memory.
    pub readbacks: u64,
    /// Conversions drawn.
    pub draws: u64,
}

/// The GL backend: a context, its programs and textures.
pub(crate) struct GlBackend {
    renderer: Renderer,
    stats: GlStats,
    // Declared last: dropped after the renderer's objects were deleted in `Drop`.
    ctx: GlContext,
}

impl GlBackend {
    /// Starts the backend on `platform`, or on the first platform that works (see
    /// [`EglPlatform`] and [`PLATFORM_ENV`]).
    pub(crate) fn new(platform: Option<EglPlatform>) -> Result<GlBackend> {
        let ctx = GlContext::new(platform)?;
        let mut me = GlBackend {
            renderer: Renderer::new(ctx.info.max_texture_size),
            stats: GlStats::default(),
            ctx,
        };
        {
            let cur = me.ctx.current()?;
            me.renderer.warm_up(cur.gl())?;
        }
        Ok(me)
    }

    /// What the backend runs on.
    pub(crate) fn info(&self) -> &GlInfo {
        &self.ctx.info
    }

    /// Counters so far.
    pub(crate) fn stats(&self) -> GlStats {
        self.stats
    }

    /// Converts a host source into a host destination: upload, draw, read back.
    pub(crate) fn convert_host(
        &mut self,
        draw: &Draw,
        src_layout: &ImageLayout,
        src: &[&[u8]],
        dst_layout: &ImageLayout,
        dst: &mut [&mut [u8]],
    ) -> Result<()> {
        let shape = render::target_shape(dst_layout)?;
        render::source_textures(src_layout)?;
        let cur = self.ctx.current()?;
        let gl = cur.gl();
        let textures = self.renderer.upload(gl, src_layout, src)?;
        self.stats.uploads += 1;
        let fbo = self.renderer.own_target(gl, &shape)?;
        self.renderer
            .draw(gl, draw, src_layout, &textures, dst_layout, &shape, fbo)?;
        self.stats.draws += 1;
        self.renderer.read_back(gl, fbo, dst_layout, &shape, dst)?;
        self.stats.readbacks += 1;
        Ok(())
    }
}

impl Drop for GlBackend {
    fn drop(&mut self) {
        if let Ok(cur) = self.ctx.current() {
            self.renderer.delete(cur.gl());
        }
    }
}

#[cfg(test)]
mod tests;
