//! The OpenGL ES backend.
//!
//! # Threading
//!
//! A [`GlBackend`] owns one EGL context. The context is made current on the calling
//! thread at the start of every call that touches GL, and when the call returns (also on
//! error paths and when a panic unwinds) whatever the caller had current before — its
//! own EGL context, display, draw and read surfaces, and bound API — is current again
//! (DESIGN.md invariant 9; see `egl::Current`). So the backend — and the
//! `ImageProcessor` holding it — is `Send` and may move between threads freely, and an
//! application rendering with its own context on the same thread keeps it; it is not
//! `Sync` (`&mut self` calls). Two backends in one process share the EGL display
//! (reference counted; one the application initialised itself is never terminated) but
//! not contexts.
//!
//! # Modules
//!
//! | module | holds |
//! | --- | --- |
//! | `egl/` | libEGL loading (`library`), platforms (`platform`), shared displays (`display`), the context and the `egl::Current` proof that it is current (`context`) |
//! | `render/` | the draw (`mod`), uploads (`upload`), render targets (`target`), readback (`readback`) |
//! | `program` | the GLSL ES programs, one per source kind |
//! | `import` | dma-buf → EGLImage → texture / framebuffer; `eglDestroyImage` inside the CPU-mapping guard |
//! | `cache` | EGL images by buffer identity, bounded, pruned when tensors drop |
//! | this one | [`GlBackend`]: one conversion from tensors or bytes, counted |
//!
//! # Outputs and the extensions they need
//!
//! Every destination (packed RGB/BGR 3-byte, RGBA/BGRA, grey, planar CHW; u8, i8, f16,
//! f32) is produced by one fused pass into an `RGBA8` render target that holds the
//! destination's *bytes* (see `shaders/convert.frag.glsl`), so none of them needs a
//! float render target or any extension: plain GLES 3.0 suffices (f16 uses
//! `packHalf2x16`, f32 `floatBitsToUint`, the tap table an `RGBA32F` texture read with
//! `texelFetch`). Zero-copy needs `EGL_EXT_image_dma_buf_import` plus
//! `GL_OES_EGL_image` (sources: every plane imported as `R8`, `GR88` or `AB24`;
//! destinations: rows imported as `AB24` when a row is a multiple of 4 bytes), and
//! `EGL_EXT_image_dma_buf_import_modifiers` for non-linear modifiers. Where a
//! destination cannot be imported the result is read back into its mapping instead
//! (counted in `readbacks`); a source the driver refuses is uploaded (counted in
//! `uploads`, and once per buffer in `import_failures`). A refusal is remembered per
//! buffer (the driver is not asked again every frame) and logged once per cause.

mod batch;
mod cache;
mod egl;
pub(crate) mod import;
mod program;
mod render;

pub use egl::{EglPlatform, GlInfo, PLATFORM_ENV};

use std::os::fd::BorrowedFd;

use glow::HasContext;

use crate::convert::Plan;
use crate::image::{ImageLayout, fourcc_to_string};
use crate::log_once::LogOnce;
use crate::tensor::{Memory, Tensor};
use crate::{Element, Error, Result};

use cache::{ImageCache, ImageKey, Lookup};
use egl::{Current, GlContext};
use import::ImportSpec;
use render::{Draw, GuardSink, Renderer, SliceSink, TargetShape};

/// Counters of the GL backend's work.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct GlStats {
    /// Conversions drawn.
    pub draws: u64,
    /// Source or destination buffers newly imported as EGL images (one per buffer,
    /// whatever its plane count).
    pub imports: u64,
    /// Buffers whose EGL images came from the cache.
    pub cache_hits: u64,
    /// Host sources uploaded into textures.
    pub uploads: u64,
    /// Destinations read back into mapped memory.
    pub readbacks: u64,
    /// Dma-buf sources or destinations the driver refused to import (then uploaded or
    /// read back instead), each buffer counted once: the refusal is remembered, and a
    /// remembered one is neither retried nor counted again.
    pub import_failures: u64,
    /// EGL images the cache holds now.
    pub live_images: u64,
}

/// Options of the GL backend (see [`ImageProcessor::with_gl_config`](crate::ImageProcessor::with_gl_config)).
///
/// The backend owns one EGL context, made current on the calling thread for the duration
/// of each conversion; before it returns, whatever the caller had current (its own EGL
/// context, surfaces and bound API) is current again, so a processor on GL is `Send`, may
/// move between threads, and leaves an application's own GL rendering alone. Every output (packed 3-byte RGB/BGR, RGBA/BGRA, grey, planar
/// CHW; u8, i8, f16, f32) is produced on the GPU with plain OpenGL ES 3.0 (no float
/// render target needed). Zero-copy needs `EGL_EXT_image_dma_buf_import` and
/// `GL_OES_EGL_image` (and `EGL_EXT_image_dma_buf_import_modifiers` for tiled buffers):
/// dma-buf sources are imported plane by plane as `R8`/`GR88`/`AB24` images, dma-buf
/// destinations whose rows are a multiple of 4 bytes as `AB24` render targets; anything
/// else is uploaded or read back, and counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GlConfig {
    /// Force one EGL platform (default: [`PLATFORM_ENV`], else GBM → device →
    /// surfaceless).
    pub platform: Option<EglPlatform>,
    /// Bound on cached EGL images (each plane of each buffer is one).
    pub cache_capacity: usize,
    /// Import dma-buf tensors (zero copy); when false they are uploaded / read back.
    pub import_dma_buf: bool,
    /// Upload host sources through a pixel-unpack buffer (PBO) instead of straight from
    /// client memory. Off by default: on Mesa llvmpipe it only adds a copy, and no GPU
    /// was available to measure where it helps.
    pub pbo_uploads: bool,
}

impl Default for GlConfig {
    fn default() -> Self {
        GlConfig {
            platform: None,
            cache_capacity: cache::DEFAULT_CAPACITY,
            import_dma_buf: true,
            pbo_uploads: false,
        }
    }
}

/// The GL backend: a context, its programs, textures and EGL image cache.
pub(crate) struct GlBackend {
    renderer: Renderer,
    cache: ImageCache,
    stats: GlStats,
    config: GlConfig,
    last_draw: Option<(Plan, Draw)>,
    /// Import refusals already logged (DESIGN.md invariant 8: logged once).
    refusals: LogOnce,
    // Declared last; its objects are deleted in `Drop` while it is current.
    ctx: GlContext,
}

impl GlBackend {
    /// Starts the backend.
    pub(crate) fn new(config: GlConfig) -> Result<GlBackend> {
        let mut ctx = GlContext::new(config.platform)?;
        ctx.info.dma_buf_formats = import::supported_formats(&ctx)
            .map(|v| v.into_iter().map(fourcc_to_string).collect())
            .unwrap_or_default();
        let mut me = GlBackend {
            renderer: Renderer::new(ctx.info.max_texture_size, config.pbo_uploads),
            cache: ImageCache::new(config.cache_capacity),
            stats: GlStats::default(),
            config,
            last_draw: None,
            refusals: LogOnce::default(),
            ctx,
        };
        {
            let cur = me.ctx.current()?;
            me.renderer.warm_up(&cur)?;
        }
        Ok(me)
    }

    /// What the backend runs on.
    pub(crate) fn info(&self) -> &GlInfo {
        &self.ctx.info
    }

    /// True on a software rasteriser (llvmpipe, softpipe, swrast, SwiftShader).
    pub(crate) fn is_software(&self) -> bool {
        let r = self.ctx.info.gl_renderer.to_ascii_lowercase();
        ["llvmpipe", "softpipe", "swrast", "swiftshader"]
            .iter()
            .any(|s| r.contains(s))
    }

    /// Counters so far, without releasing dead cache entries.
    pub(crate) fn counters(&self) -> GlStats {
        self.stats
    }

    /// Counters so far (dead cache entries are released first, so `live_images` is
    /// exact).
    pub(crate) fn stats(&mut self) -> GlStats {
        if self.cache.has_dead()
            && let Ok(cur) = self.ctx.current()
        {
            self.cache.prune(&cur);
        }
        self.stats.live_images = self.cache.live_images() as u64;
        self.stats
    }

    /// Makes `last_draw` the draw of `plan` (rebuilt only when the plan changed).
    fn prepare_draw(&mut self, plan: &Plan) {
        if !matches!(&self.last_draw, Some((p, _)) if p == plan) {
            self.last_draw = Some((plan.clone(), Draw::from_plan(plan)));
        }
    }

    /// Converts `src` into `dst` as `plan` says. Dma-buf tensors are imported (cached),
    /// others uploaded / read back.
    pub(crate) fn convert<T: Element>(
        &mut self,
        plan: &Plan,
        src: &Tensor<u8>,
        dst: &mut Tensor<T>,
    ) -> Result<()> {
        let src_layout = *image_layout(src.layout(), "source")?;
        let dst_layout = *image_layout(dst.layout(), "destination")?;
        plan.check_layouts(&src_layout, &dst_layout)?;
        let shape = render::target_shape(&dst_layout)?;
        let specs = render::source_textures(&src_layout)?;
        self.prepare_draw(plan);
        let Some((_, draw)) = &self.last_draw else {
            return Err(Error::Gl("no draw prepared".into()));
        };
        let import = self.config.import_dma_buf && self.ctx.info.dma_buf_import;
        let cur = self.ctx.current()?;
        let gl = &cur;
        if self.cache.has_dead() {
            self.cache.prune(gl);
        }

        // Source: imported planes, or an upload of the mapped bytes.
        let mut textures = None;
        if import && src.memory() == Memory::Dma {
            match import_source(gl, &mut self.cache, src, &src_layout, &specs) {
                Ok((tex, fresh)) => {
                    if fresh {
                        self.stats.imports += 1;
                    } else {
                        self.stats.cache_hits += 1;
                    }
                    textures = Some(tex);
                }
                Err(n) => n.note(
                    &mut self.stats,
                    &mut self.refusals,
                    "source",
                    "uploading it instead",
                ),
            }
        }
        let textures = match textures {
            Some(t) => t,
            None => {
                let map = src.map()?;
                let mut bufs: [&[u8]; 3] = [&[]; 3];
                for (i, b) in bufs.iter_mut().enumerate().take(src_layout.buffer_count()) {
                    *b = map.buffer_bytes(i);
                }
                let t =
                    self.renderer
                        .upload(gl, &src_layout, &bufs[..src_layout.buffer_count()])?;
                self.stats.uploads += 1;
                t
            }
        };

        // Destination: an imported render target, or our own target read back.
        let mut target = None;
        if import && dst.memory() == Memory::Dma {
            match import_target(gl, &mut self.cache, dst, &dst_layout, &shape) {
                Ok(Some((fbo, fresh))) => {
                    if fresh {
                        self.stats.imports += 1;
                    } else {
                        self.stats.cache_hits += 1;
                    }
                    target = Some(fbo);
                }
                Ok(None) => {}
                Err(n) => n.note(
                    &mut self.stats,
                    &mut self.refusals,
                    "destination",
                    "reading the result back into it instead",
                ),
            }
        }
        log::debug!("GL: drawing (imported target: {})", target.is_some());
        match target {
            Some(fbo) => {
                // The GPU writes the dma-buf without a CPU mapping: hold off pin readers
                // (a runtime's run) as `map_mut` would, until the result is there.
                let _write = dst.write_hold()?;
                self.renderer.draw(
                    gl,
                    draw,
                    &src_layout,
                    &textures,
                    &dst_layout,
                    &shape,
                    fbo,
                    0,
                )?;
                self.stats.draws += 1;
                log::debug!("GL: glFinish");
                // The dma-buf must hold the result when convert returns.
                // SAFETY: the context is current (`gl`).
                unsafe { gl.finish() };
                render::check_error(gl, "finishing the conversion")?;
            }
            None => {
                let fbo = self.renderer.own_target(gl, &shape)?;
                self.renderer.draw(
                    gl,
                    draw,
                    &src_layout,
                    &textures,
                    &dst_layout,
                    &shape,
                    fbo,
                    0,
                )?;
                self.stats.draws += 1;
                log::debug!("GL: reading back");
                let mut map = dst.map_mut()?;
                let mut sink = GuardSink(&mut map);
                self.renderer
                    .read_back(gl, fbo, &dst_layout, &shape, &mut sink)?;
                self.stats.readbacks += 1;
            }
        }
        Ok(())
    }

    /// Converts host bytes (one slice per buffer of each layout): upload, draw, read
    /// back. Used by the unit tests and for callers without tensors.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn convert_bytes(
        &mut self,
        plan: &Plan,
        src_layout: &ImageLayout,
        src: &[&[u8]],
        dst_layout: &ImageLayout,
        dst: &mut [&mut [u8]],
    ) -> Result<()> {
        plan.check_layouts(src_layout, dst_layout)?;
        let shape = render::target_shape(dst_layout)?;
        render::source_textures(src_layout)?;
        self.prepare_draw(plan);
        let Some((_, draw)) = &self.last_draw else {
            return Err(Error::Gl("no draw prepared".into()));
        };
        let cur = self.ctx.current()?;
        let gl = &cur;
        let textures = self.renderer.upload(gl, src_layout, src)?;
        self.stats.uploads += 1;
        let fbo = self.renderer.own_target(gl, &shape)?;
        self.renderer
            .draw(gl, draw, src_layout, &textures, dst_layout, &shape, fbo, 0)?;
        self.stats.draws += 1;
        let mut sink = SliceSink(dst);
        self.renderer
            .read_back(gl, fbo, dst_layout, &shape, &mut sink)?;
        self.stats.readbacks += 1;
        Ok(())
    }
}

impl std::fmt::Debug for GlBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GlBackend")
            .field("info", &self.ctx.info.to_string())
            .field("stats", &self.stats)
            .field("config", &self.config)
            .finish()
    }
}

impl Drop for GlBackend {
    fn drop(&mut self) {
        match self.ctx.current() {
            Ok(cur) => {
                self.cache.clear(&cur);
                self.renderer.delete(&cur);
            }
            Err(e) => log::error!("GL backend dropped without its context: {e}"),
        }
    }
}

fn image_layout<'a>(l: Option<&'a ImageLayout>, what: &str) -> Result<&'a ImageLayout> {
    l.ok_or_else(|| {
        Error::InvalidArgument(format!(
            "the {what} tensor has no image layout (create it with Tensor::image or with_layout)"
        ))
    })
}

fn buffer_fd<'a, T: Element>(t: &'a Tensor<T>, buffer: usize) -> Result<BorrowedFd<'a>> {
    t.buffer_fd(buffer)
        .ok_or_else(|| Error::InvalidFd(format!("buffer {buffer} of a dma-buf tensor has no fd")))
}

/// Why a dma-buf was not imported.
struct NotImported {
    error: Error,
    /// The driver refused this buffer before: already counted and logged, not retried.
    remembered: bool,
}

impl From<Error> for NotImported {
    fn from(error: Error) -> Self {
        NotImported {
            error,
            remembered: false,
        }
    }
}

impl NotImported {
    /// Counts a new refusal (one per buffer) and logs it once per cause; a remembered one
    /// only at debug level.
    fn note(self, stats: &mut GlStats, log: &mut LogOnce, what: &str, instead: &str) {
        if self.remembered {
            log::debug!(
                "GL: dma-buf {what} refused before, {instead}: {}",
                self.error
            );
            return;
        }
        stats.import_failures += 1;
        log.warn(
            &format!("{what}: {}", self.error),
            format_args!(
                "pinframe GL: a dma-buf {what} was not imported, {instead}: {}",
                self.error
            ),
        );
    }
}

/// Imports (or finds) every plane of a dma-buf source; true when anything was new.
fn import_source(
    gl: &Current<'_>,
    cache: &mut ImageCache,
    src: &Tensor<u8>,
    layout: &ImageLayout,
    specs: &[render::PlaneTexture],
) -> std::result::Result<(Vec<glow::Texture>, bool), NotImported> {
    let mut out = Vec::with_capacity(specs.len());
    let mut fresh = false;
    for s in specs {
        let plane = layout.planes()[s.plane];
        let fd = buffer_fd(src, plane.buffer)?;
        let spec = ImportSpec {
            width: s.width,
            height: s.height,
            fourcc: s.drm_fourcc(),
            offset: plane.offset,
            pitch: plane.stride,
            modifier: layout.modifier(),
            render_target: false,
        };
        let key = ImageKey::new(fd, spec)?;
        match cache.get(&key) {
            Lookup::Hit(i) => out.push(i.texture),
            Lookup::Refused => {
                return Err(NotImported {
                    error: Error::ImportRefused(format!(
                        "the driver refused this buffer before ({spec:?})"
                    )),
                    remembered: true,
                });
            }
            Lookup::Miss => {
                let token = src
                    .buffer_token(plane.buffer)
                    .ok_or_else(|| Error::InvalidFd("source buffer vanished".into()))?;
                match import::import(gl, fd, &spec) {
                    Ok(i) => {
                        out.push(i.texture);
                        cache.insert(gl, key, Some(i), token);
                        fresh = true;
                    }
                    Err(e) => {
                        cache.insert(gl, key, None, token);
                        return Err(e.into());
                    }
                }
            }
        }
    }
    Ok((out, fresh))
}

/// Imports (or finds) a dma-buf destination as a render target. `Ok(None)` when its
/// layout cannot be expressed as one `AB24` image (rows not a multiple of 4 bytes, or
/// planes not contiguous): then it is read back instead.
fn import_target<T: Element>(
    gl: &Current<'_>,
    cache: &mut ImageCache,
    dst: &Tensor<T>,
    layout: &ImageLayout,
    shape: &TargetShape,
) -> std::result::Result<Option<(glow::Framebuffer, bool)>, NotImported> {
    let planes = layout.planes();
    let p0 = planes[0];
    let h = layout.height() as usize;
    let contiguous = (1..shape.planes).all(|i| {
        planes[i].buffer == p0.buffer
            && planes[i].stride == p0.stride
            && planes[i].offset == p0.offset + i * h * p0.stride
    });
    if !shape.row_bytes.is_multiple_of(4) || !p0.stride.is_multiple_of(4) || !contiguous {
        log::debug!("GL: destination {layout:?} is not importable as AB24 rows; reading back");
        return Ok(None);
    }
    let fd = buffer_fd(dst, p0.buffer)?;
    let spec = ImportSpec {
        width: shape.width,
        height: shape.rows,
        fourcc: drm_fourcc::DrmFourcc::Abgr8888 as u32,
        offset: p0.offset,
        pitch: p0.stride,
        modifier: layout.modifier(),
        render_target: true,
    };
    let key = ImageKey::new(fd, spec)?;
    match cache.get(&key) {
        Lookup::Hit(i) => Ok(i.fbo.map(|f| (f, false))),
        Lookup::Refused => Err(NotImported {
            error: Error::ImportRefused(format!(
                "the driver refused this destination before ({spec:?})"
            )),
            remembered: true,
        }),
        Lookup::Miss => {
            let token = dst
                .buffer_token(p0.buffer)
                .ok_or_else(|| Error::InvalidFd("destination buffer vanished".into()))?;
            match import::import(gl, fd, &spec) {
                Ok(i) => {
                    let fbo = i.fbo;
                    cache.insert(gl, key, Some(i), token);
                    Ok(fbo.map(|f| (f, true)))
                }
                Err(e) => {
                    cache.insert(gl, key, None, token);
                    Err(e.into())
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
