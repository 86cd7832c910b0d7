//! A batch on GL: every item drawn into its rows of one stacked render target (the
//! batch tensor's slices follow each other at one pitch, so the whole batch is one tall
//! image), then one `glFinish` for a dma-buf rendered into, or one readback.

use glow::HasContext;

use super::{GlBackend, image_layout, import_source, import_target};
use crate::convert::{BatchSource, Plan};
use crate::gl::egl::Current;
use crate::gl::render::{self, Draw, GuardSink, TargetShape};
use crate::image::{ImageLayout, PixelFormat, Plane};
use crate::tensor::{Memory, Tensor};
use crate::{DType, Element, Error, Result};

impl GlBackend {
    /// Converts `sources[i]` into slice `i` of the batch `dst` as `plans[i]` says. Each
    /// distinct source is imported (dma-bufs, cached by buffer) or uploaded once per run
    /// of items reading it; a batch taller than the GL context's largest texture is
    /// drawn in as many stacked chunks as it needs, each finished or read back once.
    pub(crate) fn convert_batch<T: Element>(
        &mut self,
        plans: &[Plan],
        sources: &[BatchSource<'_>],
        dst: &mut Tensor<T>,
    ) -> Result<()> {
        if plans.len() != sources.len() || plans.len() > dst.batch_len() {
            return Err(Error::InvalidArgument(format!(
                "{} plans and {} sources for a batch of {}",
                plans.len(),
                sources.len(),
                dst.batch_len()
            )));
        }
        let slice = *image_layout(dst.layout(), "destination")?;
        let shape = render::target_shape(&slice)?;
        let slice_bytes = dst.slice_bytes();
        let p0 = slice.planes()[0];
        let h = slice.height() as usize;
        let stacked = p0.offset == 0
            && slice_bytes == shape.planes * h * p0.stride
            && (0..shape.planes).all(|i| {
                let p = slice.planes()[i];
                p.buffer == 0 && p.stride == p0.stride && p.offset == i * h * p0.stride
            });
        if !stacked {
            return Err(Error::Unsupported(
                "GL converts batches whose slices follow each other row after row, as \
                 Tensor::image_batch lays them out"
                    .into(),
            ));
        }
        let max_rows = self.ctx.info.max_texture_size as usize;
        let per_chunk = (max_rows / shape.rows as usize).max(1);
        let import = self.config.import_dma_buf && self.ctx.info.dma_buf_import;
        let cur = self.ctx.current()?;
        let gl = &cur;
        if self.cache.has_dead() {
            self.cache.prune(gl);
        }
        let mut first = 0;
        while first < plans.len() {
            let count = per_chunk.min(plans.len() - first);
            let rows = count * shape.rows as usize;
            // The chunk as one image of `rows` rows of target bytes, where its first
            // slice starts in the batch's buffer.
            let chunk_layout = ImageLayout::with_planes(
                shape.row_bytes as u32,
                rows as u32,
                PixelFormat::Grey,
                DType::U8,
                &[Plane::new(first * slice_bytes, p0.stride)],
            )?
            .with_modifier(slice.modifier());
            let chunk_shape = TargetShape {
                width: shape.width,
                rows: rows as u32,
                row_bytes: shape.row_bytes,
                planes: 1,
            };
            let mut imported = None;
            if import && dst.memory() == Memory::Dma {
                match import_target(gl, &mut self.cache, dst, &chunk_layout, &chunk_shape) {
                    Ok(Some((fbo, fresh))) => {
                        if fresh {
                            self.stats.imports += 1;
                        } else {
                            self.stats.cache_hits += 1;
                        }
                        imported = Some(fbo);
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
            let fbo = match imported {
                Some(fbo) => fbo,
                None => self.renderer.own_target(gl, &chunk_shape)?,
            };
            // The GPU writes an imported dma-buf without a CPU mapping: pin readers wait
            // for the whole chunk, as for `map_mut`.
            let write = match imported {
                Some(_) => Some(dst.write_hold()?),
                None => None,
            };
            let mut last: Option<(usize, Vec<glow::Texture>)> = None;
            for j in 0..count {
                let i = first + j;
                let src_layout = *sources[i].layout()?;
                plans[i].check_layouts(&src_layout, &slice)?;
                let textures = match &last {
                    Some((k, t)) if sources[*k].same_as(&sources[i]) => t.clone(),
                    _ => {
                        let t = source_textures(
                            gl,
                            Parts {
                                renderer: &mut self.renderer,
                                cache: &mut self.cache,
                                stats: &mut self.stats,
                                refusals: &mut self.refusals,
                            },
                            &sources[i],
                            &src_layout,
                            import,
                        )?;
                        last = Some((i, t.clone()));
                        t
                    }
                };
                let draw = Draw::from_plan(&plans[i]);
                let row0 = (j * shape.rows as usize) as u32;
                self.renderer
                    .draw(gl, &draw, &src_layout, &textures, &slice, &shape, fbo, row0)?;
                self.stats.draws += 1;
            }
            match imported {
                Some(_) => {
                    // SAFETY: the context is current (`gl`).
                    unsafe { gl.finish() };
                    render::check_error(gl, "finishing the batch")?;
                    drop(write);
                }
                None => {
                    let mut map = dst.map_mut()?;
                    let mut sink = GuardSink(&mut map);
                    self.renderer
                        .read_back(gl, fbo, &chunk_layout, &chunk_shape, &mut sink)?;
                    self.stats.readbacks += 1;
                }
            }
            first += count;
        }
        Ok(())
    }
}

/// The backend's parts a source import or upload touches (the context is borrowed
/// apart, as the current one).
struct Parts<'a> {
    renderer: &'a mut crate::gl::render::Renderer,
    cache: &'a mut super::cache::ImageCache,
    stats: &'a mut super::GlStats,
    refusals: &'a mut crate::log_once::LogOnce,
}

/// The textures of one batch source: its imported planes (a dma-buf tensor the
/// driver takes), else an upload of its bytes.
fn source_textures(
    gl: &Current<'_>,
    parts: Parts<'_>,
    source: &BatchSource<'_>,
    layout: &ImageLayout,
    import: bool,
) -> Result<Vec<glow::Texture>> {
    let specs = render::source_textures(layout)?;
    match source {
        BatchSource::Tensor(t) => {
            if import && t.memory() == Memory::Dma {
                match import_source(gl, parts.cache, t, layout, &specs) {
                    Ok((tex, fresh)) => {
                        if fresh {
                            parts.stats.imports += 1;
                        } else {
                            parts.stats.cache_hits += 1;
                        }
                        return Ok(tex);
                    }
                    Err(n) => n.note(
                        parts.stats,
                        parts.refusals,
                        "source",
                        "uploading it instead",
                    ),
                }
            }
            let map = t.map()?;
            let mut bufs: [&[u8]; 3] = [&[]; 3];
            for (i, b) in bufs.iter_mut().enumerate().take(layout.buffer_count()) {
                *b = map.buffer_bytes(i);
            }
            let tex = parts
                .renderer
                .upload(gl, layout, &bufs[..layout.buffer_count()])?;
            parts.stats.uploads += 1;
            Ok(tex)
        }
        BatchSource::Bytes { buffers, .. } => {
            let tex = parts.renderer.upload(gl, layout, buffers)?;
            parts.stats.uploads += 1;
            Ok(tex)
        }
    }
}
