//! Host sources into textures: straight from client memory or through a pixel-unpack
//! buffer, and the plan's tap table.

use glow::HasContext;

use super::{Draw, PlaneTexture, Renderer, check_error, set_nearest, source_textures};
use crate::gl::egl::Current;
use crate::image::ImageLayout;
use crate::{Error, Result};

impl Renderer {
    /// Uploads a host source (one slice per buffer of `layout`) into textures that
    /// this renderer keeps and reuses; returns them in binding order.
    pub(crate) fn upload(
        &mut self,
        gl: &Current<'_>,
        layout: &ImageLayout,
        buffers: &[&[u8]],
    ) -> Result<Vec<glow::Texture>> {
        layout.validate_buffers(&buffers.iter().map(|b| b.len()).collect::<Vec<_>>())?;
        let specs = source_textures(layout)?;
        for s in &specs {
            self.check_size("the source", s.width, s.height)?;
        }
        let mut out = Vec::with_capacity(specs.len());
        for (i, spec) in specs.iter().enumerate() {
            let tex = self.upload_texture(gl, i, spec)?;
            let plane = layout.planes()[spec.plane];
            let buf = buffers[plane.buffer];
            if self.pbo.is_some() {
                self.upload_through_pbo(gl, tex, spec, plane, buf)?;
                out.push(tex);
                continue;
            }
            let row = spec.width as usize * spec.texel_bytes;
            let rows = spec.height as usize;
            // SAFETY: the context is current (`gl`); `tex` is a live texture of
            // `spec`'s size and format; the data pointer covers `rows` rows of `stride`
            // bytes (checked by validate_buffers above), read with UNPACK_ROW_LENGTH.
            unsafe {
                gl.bind_texture(glow::TEXTURE_2D, Some(tex));
                gl.pixel_store_i32(glow::UNPACK_ALIGNMENT, 1);
                let data: &[u8] = if plane.stride.is_multiple_of(spec.texel_bytes) {
                    gl.pixel_store_i32(
                        glow::UNPACK_ROW_LENGTH,
                        (plane.stride / spec.texel_bytes) as i32,
                    );
                    &buf[plane.offset..plane.offset + plane.stride * (rows - 1) + row]
                } else {
                    // A pitch GL cannot express in whole texels: repack rows.
                    self.scratch.clear();
                    for r in 0..rows {
                        let s = plane.offset + r * plane.stride;
                        self.scratch.extend_from_slice(&buf[s..s + row]);
                    }
                    gl.pixel_store_i32(glow::UNPACK_ROW_LENGTH, 0);
                    &self.scratch
                };
                gl.tex_sub_image_2d(
                    glow::TEXTURE_2D,
                    0,
                    0,
                    0,
                    spec.width as i32,
                    spec.height as i32,
                    spec.format(),
                    glow::UNSIGNED_BYTE,
                    glow::PixelUnpackData::Slice(Some(data)),
                );
                gl.pixel_store_i32(glow::UNPACK_ROW_LENGTH, 0);
            }
            out.push(tex);
        }
        check_error(gl, "uploading the source")?;
        Ok(out)
    }

    /// Uploads one plane through the pixel-unpack buffer: the rows are copied (tightly)
    /// into a freshly orphaned buffer, then the texture is specified from it, which lets
    /// drivers that can copy asynchronously do so.
    fn upload_through_pbo(
        &mut self,
        gl: &Current<'_>,
        tex: glow::Texture,
        spec: &PlaneTexture,
        plane: crate::image::Plane,
        buf: &[u8],
    ) -> Result<()> {
        let row = spec.width as usize * spec.texel_bytes;
        let rows = spec.height as usize;
        let len = row * rows;
        let len_i32 = i32::try_from(len).map_err(|_| {
            Error::Unsupported(format!("a {len}-byte plane is too large for a PBO"))
        })?;
        // SAFETY: the context is current (`gl`); the buffer is ours; the mapping is
        // `len` bytes and every row copied into it is `row` bytes at `r * row`, read from
        // `buf` at offsets validated against its length by `validate_buffers`; the buffer
        // is unmapped before GL reads it and unbound afterwards.
        unsafe {
            let pbo = match self.pbo {
                Some(Some(b)) => b,
                _ => {
                    let b = gl
                        .create_buffer()
                        .map_err(|e| Error::Gl(format!("glGenBuffers: {e}")))?;
                    self.pbo = Some(Some(b));
                    b
                }
            };
            gl.bind_buffer(glow::PIXEL_UNPACK_BUFFER, Some(pbo));
            gl.buffer_data_size(glow::PIXEL_UNPACK_BUFFER, len_i32, glow::STREAM_DRAW);
            let p = gl.map_buffer_range(
                glow::PIXEL_UNPACK_BUFFER,
                0,
                len_i32,
                glow::MAP_WRITE_BIT | glow::MAP_INVALIDATE_BUFFER_BIT,
            );
            if p.is_null() {
                gl.bind_buffer(glow::PIXEL_UNPACK_BUFFER, None);
                check_error(gl, "glMapBufferRange")?;
                return Err(Error::Gl("glMapBufferRange returned null".into()));
            }
            for r in 0..rows {
                let s = plane.offset + r * plane.stride;
                std::ptr::copy_nonoverlapping(buf[s..s + row].as_ptr(), p.add(r * row), row);
            }
            gl.unmap_buffer(glow::PIXEL_UNPACK_BUFFER);
            gl.bind_texture(glow::TEXTURE_2D, Some(tex));
            gl.pixel_store_i32(glow::UNPACK_ALIGNMENT, 1);
            gl.pixel_store_i32(glow::UNPACK_ROW_LENGTH, 0);
            gl.tex_sub_image_2d(
                glow::TEXTURE_2D,
                0,
                0,
                0,
                spec.width as i32,
                spec.height as i32,
                spec.format(),
                glow::UNSIGNED_BYTE,
                glow::PixelUnpackData::BufferOffset(0),
            );
            gl.bind_buffer(glow::PIXEL_UNPACK_BUFFER, None);
        }
        Ok(())
    }

    fn upload_texture(
        &mut self,
        gl: &Current<'_>,
        slot: usize,
        spec: &PlaneTexture,
    ) -> Result<glow::Texture> {
        if let Some((s, t)) = self.uploads.get(slot)
            && s == spec
        {
            return Ok(*t);
        }
        // SAFETY: the context is current (`gl`); the old texture of this slot, if
        // any, is ours and no longer used.
        unsafe {
            if slot < self.uploads.len() {
                gl.delete_texture(self.uploads[slot].1);
            }
            let tex = gl
                .create_texture()
                .map_err(|e| Error::Gl(format!("glGenTextures: {e}")))?;
            gl.bind_texture(glow::TEXTURE_2D, Some(tex));
            set_nearest(gl);
            gl.tex_storage_2d(
                glow::TEXTURE_2D,
                1,
                spec.internal_format(),
                spec.width as i32,
                spec.height as i32,
            );
            if slot < self.uploads.len() {
                self.uploads[slot] = (*spec, tex);
            } else {
                self.uploads.push((*spec, tex));
            }
            Ok(tex)
        }
    }

    /// The plan's tap table as an RGBA32F texture, re-uploaded only when it changes.
    pub(super) fn taps_texture(&mut self, gl: &Current<'_>, draw: &Draw) -> Result<glow::Texture> {
        self.check_size("the tap table", draw.taps_width, 2)?;
        if let Some((t, w, tex)) = &self.taps
            && *w == draw.taps_width
            && *t == draw.taps
        {
            return Ok(*tex);
        }
        // SAFETY: the context is current (`gl`); the table holds exactly
        // `taps_width * 2` RGBA32F texels; the previous table texture is ours.
        unsafe {
            let tex = match self.taps.take() {
                Some((_, w, tex)) if w == draw.taps_width => tex,
                other => {
                    if let Some((_, _, old)) = other {
                        gl.delete_texture(old);
                    }
                    let tex = gl
                        .create_texture()
                        .map_err(|e| Error::Gl(format!("glGenTextures: {e}")))?;
                    gl.bind_texture(glow::TEXTURE_2D, Some(tex));
                    set_nearest(gl);
                    gl.tex_storage_2d(
                        glow::TEXTURE_2D,
                        1,
                        glow::RGBA32F,
                        draw.taps_width as i32,
                        2,
                    );
                    tex
                }
            };
            gl.bind_texture(glow::TEXTURE_2D, Some(tex));
            gl.pixel_store_i32(glow::UNPACK_ALIGNMENT, 4);
            gl.pixel_store_i32(glow::UNPACK_ROW_LENGTH, 0);
            gl.tex_sub_image_2d(
                glow::TEXTURE_2D,
                0,
                0,
                0,
                draw.taps_width as i32,
                2,
                glow::RGBA,
                glow::FLOAT,
                glow::PixelUnpackData::Slice(Some(bytemuck::cast_slice(&draw.taps))),
            );
            gl.bind_texture(glow::TEXTURE_2D, None);
            self.taps = Some((draw.taps.clone(), draw.taps_width, tex));
            Ok(tex)
        }
    }
}
