//! Executing one conversion on the GPU: source textures (uploaded or imported), the
//! fused conversion program, the byte-packing render target, and the readback.

use std::collections::HashMap;

use glow::HasContext;

use super::program::{Program, SourceKind};
use crate::convert::Plan;
use crate::image::{FormatFamily, ImageLayout};
use crate::{DType, Error, Result};

/// One conversion, in the terms the shader executes: the plan's taps as a table, its
/// colour matrix, padding and normalisation, and where each output channel is stored.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Draw {
    /// Row 0: per destination index along the axis source columns depend on,
    /// `(i0, i1, weight, 0)`; row 1 the same for source rows. `taps_width` texels a row.
    pub(crate) taps: Vec<[f32; 4]>,
    /// Texels per row of `taps`.
    pub(crate) taps_width: u32,
    /// 90/270 rotations: source columns follow destination rows.
    pub(crate) transposed: bool,
    /// Destination pixels showing the image (x0, y0, x1, y1 exclusive); the rest is pad.
    pub(crate) valid: [i32; 4],
    /// Per output channel: `v = dot(color[c][0..3], s) + color[c][3]`.
    pub(crate) color: [[f32; 4]; 3],
    /// Padding per output channel (0..255).
    pub(crate) pad: [f32; 3],
    /// Float outputs: `value = v * scale + bias` per output channel.
    pub(crate) scale: [f32; 3],
    /// See `scale`.
    pub(crate) bias: [f32; 3],
    /// Memory element of a packed pixel (or plane, when planar) → output channel (0..2)
    /// or 3 for alpha.
    pub(crate) map: [i32; 4],
    /// Elements per packed pixel (1 for planar).
    pub(crate) chans: i32,
}

impl Draw {
    /// The draw that executes `plan`.
    pub(crate) fn from_plan(plan: &Plan) -> Draw {
        let (dw, dh) = (plan.dst_width, plan.dst_height);
        let width = dw.max(dh);
        let mut taps = vec![[0.0f32; 4]; 2 * width as usize];
        for axis in 0..2 {
            let n = if plan.dst_axis_of(axis) == 0 { dw } else { dh };
            for i in 0..n {
                let t = plan.taps(axis, i);
                taps[axis * width as usize + i as usize] =
                    [t.i0 as f32, t.i1 as f32, t.weight as f32, 0.0];
            }
        }
        let v = plan.valid;
        let mut map = [0i32; 4];
        let planar = plan.dst_format.family() == FormatFamily::PlanarRgb;
        let chans;
        if plan.output_channels == 1 {
            chans = 1;
        } else {
            for (c, &pos) in plan.dst_channel_positions.iter().enumerate() {
                map[pos] = c as i32;
            }
            if let Some(a) = plan.dst_alpha_position {
                map[a] = 3;
            }
            chans = if planar {
                1
            } else {
                plan.dst_format.channels() as i32
            };
        }
        Draw {
            taps,
            taps_width: width,
            transposed: plan.transposed,
            valid: [
                v[0] as i32,
                v[1] as i32,
                (v[0] + v[2]) as i32,
                (v[1] + v[3]) as i32,
            ],
            color: plan.color_matrix,
            pad: plan.pad_value,
            scale: plan.out_scale,
            bias: plan.out_bias,
            map,
            chans,
        }
    }
}

/// How one source plane is given to GL as a texture.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct PlaneTexture {
    /// Index of the plane in the layout.
    pub(crate) plane: usize,
    /// Texture size in texels.
    pub(crate) width: u32,
    /// Texture height in texels.
    pub(crate) height: u32,
    /// Bytes per texel: 1 (R8), 2 (RG8) or 4 (RGBA8).
    pub(crate) texel_bytes: usize,
}

impl PlaneTexture {
    pub(crate) fn internal_format(&self) -> u32 {
        match self.texel_bytes {
            1 => glow::R8,
            2 => glow::RG8,
            _ => glow::RGBA8,
        }
    }

    pub(crate) fn format(&self) -> u32 {
        match self.texel_bytes {
            1 => glow::RED,
            2 => glow::RG,
            _ => glow::RGBA,
        }
    }

    /// The DRM fourcc of the same bytes (`R8`, `GR88`, `AB24`), for dma-buf import.
    pub(crate) fn drm_fourcc(&self) -> u32 {
        use crate::image::fourcc;
        match self.texel_bytes {
            1 => fourcc(b"R8  "),
            2 => fourcc(b"GR88"),
            _ => fourcc(b"AB24"),
        }
    }
}

/// The textures a source layout needs, in binding order (Y, U, V for planar YUV,
/// whatever the memory order).
pub(crate) fn source_textures(layout: &ImageLayout) -> Result<Vec<PlaneTexture>> {
    if layout.dtype() != DType::U8 {
        return Err(Error::Unsupported(format!(
            "GL sources must be u8, not {} (convert {} on the CPU backend)",
            layout.dtype(),
            layout.format()
        )));
    }
    let f = layout.format();
    let kind = SourceKind::of(f)?;
    let (w, h) = (layout.width(), layout.height());
    let pt = |plane: usize, width: u32, height: u32, texel_bytes: usize| PlaneTexture {
        plane,
        width,
        height,
        texel_bytes,
    };
    Ok(match kind {
        SourceKind::Packed422 => vec![pt(0, w.div_ceil(2), h, 4)],
        SourceKind::SemiPlanar => {
            let (_, vs) = f.chroma_subsampling();
            vec![pt(0, w, h, 1), pt(1, w.div_ceil(2), h.div_ceil(vs), 2)]
        }
        SourceKind::Planar420 => {
            let (cw, ch) = (w.div_ceil(2), h.div_ceil(2));
            let (u, v) = if f.chroma_swapped() { (2, 1) } else { (1, 2) };
            vec![pt(0, w, h, 1), pt(u, cw, ch, 1), pt(v, cw, ch, 1)]
        }
        SourceKind::Grey => vec![pt(0, w, h, 1)],
        SourceKind::Rgb3 => vec![pt(0, w * 3, h, 1)],
        SourceKind::Rgba4 => vec![pt(0, w, h, 4)],
    })
}

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

/// Per-context GPU state: programs, upload textures, the render target.
pub(crate) struct Renderer {
    programs: HashMap<SourceKind, Program>,
    vao: Option<glow::VertexArray>,
    uploads: Vec<(PlaneTexture, glow::Texture)>,
    target: Option<(u32, u32, glow::Texture, glow::Framebuffer)>,
    taps: Option<(Vec<[f32; 4]>, u32, glow::Texture)>,
    scratch: Vec<u8>,
    max_texture_size: u32,
    /// Upload through a pixel-unpack buffer (see `GlConfig::pbo_uploads`).
    pbo: Option<Option<glow::Buffer>>,
}

impl Renderer {
    pub(crate) fn new(max_texture_size: u32, pbo_uploads: bool) -> Renderer {
        Renderer {
            programs: HashMap::new(),
            vao: None,
            uploads: Vec::new(),
            target: None,
            taps: None,
            scratch: Vec::new(),
            max_texture_size,
            pbo: pbo_uploads.then_some(None),
        }
    }

    /// Compiles every program now (so the first conversion does not pay for it).
    pub(crate) fn warm_up(&mut self, gl: &glow::Context) -> Result<()> {
        for kind in SourceKind::ALL {
            self.program(gl, kind)?;
        }
        Ok(())
    }

    fn program(&mut self, gl: &glow::Context, kind: SourceKind) -> Result<&Program> {
        if let std::collections::hash_map::Entry::Vacant(e) = self.programs.entry(kind) {
            let p = Program::build(gl, kind)?;
            e.insert(p);
        }
        Ok(&self.programs[&kind])
    }

    fn check_size(&self, what: &str, w: u32, h: u32) -> Result<()> {
        if w > self.max_texture_size || h > self.max_texture_size {
            return Err(Error::Unsupported(format!(
                "{what} needs a {w}x{h} texture; this GL context allows {0}x{0}",
                self.max_texture_size
            )));
        }
        Ok(())
    }

    /// Uploads a host source (one slice per buffer of `layout`) into textures that
    /// this renderer keeps and reuses; returns them in binding order.
    pub(crate) fn upload(
        &mut self,
        gl: &glow::Context,
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
            // SAFETY: the context is current (caller); `tex` is a live texture of
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
        gl: &glow::Context,
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
        // SAFETY: the context is current (caller); the buffer is ours; the mapping is
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
        gl: &glow::Context,
        slot: usize,
        spec: &PlaneTexture,
    ) -> Result<glow::Texture> {
        if let Some((s, t)) = self.uploads.get(slot)
            && s == spec
        {
            return Ok(*t);
        }
        // SAFETY: the context is current (caller); the old texture of this slot, if
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
    fn taps_texture(&mut self, gl: &glow::Context, draw: &Draw) -> Result<glow::Texture> {
        self.check_size("the tap table", draw.taps_width, 2)?;
        if let Some((t, w, tex)) = &self.taps
            && *w == draw.taps_width
            && *t == draw.taps
        {
            return Ok(*tex);
        }
        // SAFETY: the context is current (caller); the table holds exactly
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

    /// The renderer's own RGBA8 target of `shape`, as a framebuffer.
    pub(crate) fn own_target(
        &mut self,
        gl: &glow::Context,
        shape: &TargetShape,
    ) -> Result<glow::Framebuffer> {
        self.check_size("the destination", shape.width, shape.rows)?;
        if let Some((w, h, _, fbo)) = self.target
            && w == shape.width
            && h == shape.rows
        {
            return Ok(fbo);
        }
        // SAFETY: the context is current (caller); the previous target is ours.
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

    /// Draws the conversion of `src` (textures in binding order, of `src_layout`)
    /// into `fbo`, whose shape is `shape` for the destination `dst_layout`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn draw(
        &mut self,
        gl: &glow::Context,
        draw: &Draw,
        src_layout: &ImageLayout,
        src: &[glow::Texture],
        dst_layout: &ImageLayout,
        shape: &TargetShape,
        fbo: glow::Framebuffer,
    ) -> Result<()> {
        let sf = src_layout.format();
        let kind = SourceKind::of(sf)?;
        if self.vao.is_none() {
            // SAFETY: the context is current (caller).
            let vao = unsafe { gl.create_vertex_array() }
                .map_err(|e| Error::Gl(format!("glGenVertexArrays: {e}")))?;
            self.vao = Some(vao);
        }
        let vao = self.vao;
        let taps = self.taps_texture(gl, draw)?;
        let p = self.program(gl, kind)?;
        let u = &p.uniforms;
        let one_hot = |i: usize| {
            let mut v = [0.0f32; 4];
            v[i.min(3)] = 1.0;
            v
        };
        let mut sel = [[0.0f32; 4]; 4];
        let mut rgb_pos = [0i32; 3];
        match kind {
            SourceKind::Packed422 => {
                let o = sf.packed_yuv_offsets().unwrap_or([0, 1, 2, 3]);
                for k in 0..4 {
                    sel[k] = one_hot(o[k]);
                }
            }
            SourceKind::SemiPlanar => {
                let (uo, vo) = if sf.chroma_swapped() { (1, 0) } else { (0, 1) };
                sel[1] = one_hot(uo);
                sel[3] = one_hot(vo);
            }
            SourceKind::Rgba4 | SourceKind::Rgb3 => {
                let (o, _) = sf.rgb_order().unwrap_or(([0, 1, 2], None));
                for k in 0..3 {
                    sel[k] = one_hot(o[k]);
                    rgb_pos[k] = o[k] as i32;
                }
            }
            SourceKind::Planar420 | SourceKind::Grey => {}
        }
        let dtype_code = match dst_layout.dtype() {
            DType::U8 => 0,
            DType::I8 => 1,
            DType::F16 => 2,
            _ => 3,
        };
        // SAFETY: the context is current (caller); the program, textures, VAO and
        // framebuffer are live objects of this context; uniform values match the
        // declared types.
        unsafe {
            gl.bind_framebuffer(glow::FRAMEBUFFER, Some(fbo));
            gl.viewport(0, 0, shape.width as i32, shape.rows as i32);
            gl.disable(glow::BLEND);
            gl.disable(glow::DITHER);
            gl.disable(glow::SCISSOR_TEST);
            gl.disable(glow::DEPTH_TEST);
            gl.use_program(Some(p.program));
            for (i, tex) in src.iter().enumerate() {
                gl.active_texture(glow::TEXTURE0 + i as u32);
                gl.bind_texture(glow::TEXTURE_2D, Some(*tex));
                gl.uniform_1_i32(u.plane[i].as_ref(), i as i32);
            }
            let taps_unit = src.len() as u32;
            gl.active_texture(glow::TEXTURE0 + taps_unit);
            gl.bind_texture(glow::TEXTURE_2D, Some(taps));
            gl.uniform_1_i32(u.taps.as_ref(), taps_unit as i32);
            gl.uniform_1_i32(u.transposed.as_ref(), draw.transposed as i32);
            let v = draw.valid;
            gl.uniform_4_i32(u.valid.as_ref(), v[0], v[1], v[2], v[3]);
            for (loc, v) in u.sel.iter().zip(&sel) {
                gl.uniform_4_f32_slice(loc.as_ref(), v);
            }
            gl.uniform_3_i32(u.rgb_pos.as_ref(), rgb_pos[0], rgb_pos[1], rgb_pos[2]);
            let vshift = (sf.chroma_subsampling().1 == 2) as i32;
            gl.uniform_1_i32(u.chroma_vshift.as_ref(), vshift);
            for (loc, v) in u.color.iter().zip(&draw.color) {
                gl.uniform_4_f32_slice(loc.as_ref(), v);
            }
            gl.uniform_4_f32(u.pad.as_ref(), draw.pad[0], draw.pad[1], draw.pad[2], 0.0);
            gl.uniform_1_i32(u.dtype.as_ref(), dtype_code);
            gl.uniform_1_i32(u.chans.as_ref(), draw.chans);
            gl.uniform_1_i32(u.planar.as_ref(), (shape.planes == 3) as i32);
            gl.uniform_1_i32(u.height.as_ref(), dst_layout.height() as i32);
            gl.uniform_1_i32(u.width.as_ref(), dst_layout.width() as i32);
            let m = draw.map;
            gl.uniform_4_i32(u.map.as_ref(), m[0], m[1], m[2], m[3]);
            gl.uniform_3_f32_slice(u.scale.as_ref(), &draw.scale);
            gl.uniform_3_f32_slice(u.bias.as_ref(), &draw.bias);
            gl.bind_vertex_array(vao);
            gl.draw_arrays(glow::TRIANGLES, 0, 3);
            gl.bind_vertex_array(None);
            for i in (0..=src.len()).rev() {
                gl.active_texture(glow::TEXTURE0 + i as u32);
                gl.bind_texture(glow::TEXTURE_2D, None);
            }
            gl.use_program(None);
        }
        check_error(gl, "drawing the conversion")
    }

    /// Reads the renderer's own target back into the destination buffers.
    pub(crate) fn read_back(
        &mut self,
        gl: &glow::Context,
        fbo: glow::Framebuffer,
        dst_layout: &ImageLayout,
        shape: &TargetShape,
        buffers: &mut dyn super::ByteSink,
    ) -> Result<()> {
        dst_layout.validate_buffers(&buffers.lens(dst_layout.buffer_count()))?;
        let h = dst_layout.height() as usize;
        // SAFETY: the context is current (caller); every pointer handed to
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

    /// Deletes every GL object. The context must be current.
    pub(crate) fn delete(&mut self, gl: &glow::Context) {
        // SAFETY: the caller made the owning context current; all objects are ours.
        unsafe {
            for p in self.programs.values() {
                p.delete(gl);
            }
            self.programs.clear();
            if let Some(v) = self.vao.take() {
                gl.delete_vertex_array(v);
            }
            for (_, t) in self.uploads.drain(..) {
                gl.delete_texture(t);
            }
            if let Some((_, _, tex, fbo)) = self.target.take() {
                gl.delete_framebuffer(fbo);
                gl.delete_texture(tex);
            }
            if let Some((_, _, tex)) = self.taps.take() {
                gl.delete_texture(tex);
            }
            if let Some(Some(b)) = self.pbo.take() {
                gl.delete_buffer(b);
            }
        }
    }
}

/// Nearest filtering, edge clamp: texelFetch ignores both, but an incomplete texture
/// (mipmapped min filter) would read as black on some drivers.
///
/// # Safety
/// A context must be current with the texture bound to TEXTURE_2D.
pub(crate) unsafe fn set_nearest(gl: &glow::Context) {
    // SAFETY: per the function's contract.
    unsafe {
        gl.tex_parameter_i32(
            glow::TEXTURE_2D,
            glow::TEXTURE_MIN_FILTER,
            glow::NEAREST as i32,
        );
        gl.tex_parameter_i32(
            glow::TEXTURE_2D,
            glow::TEXTURE_MAG_FILTER,
            glow::NEAREST as i32,
        );
        gl.tex_parameter_i32(
            glow::TEXTURE_2D,
            glow::TEXTURE_WRAP_S,
            glow::CLAMP_TO_EDGE as i32,
        );
        gl.tex_parameter_i32(
            glow::TEXTURE_2D,
            glow::TEXTURE_WRAP_T,
            glow::CLAMP_TO_EDGE as i32,
        );
    }
}

/// A framebuffer with `tex` as its colour attachment, checked complete.
///
/// # Safety
/// A context must be current; `tex` must be a live 2D texture of it.
pub(crate) unsafe fn framebuffer_for(
    gl: &glow::Context,
    tex: glow::Texture,
) -> Result<glow::Framebuffer> {
    // SAFETY: per the function's contract; the framebuffer is deleted on failure.
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

/// Turns a pending GL error into an `Error`.
pub(crate) fn check_error(gl: &glow::Context, what: &str) -> Result<()> {
    // SAFETY: glGetError only needs a current context, which every caller has.
    let e = unsafe { gl.get_error() };
    if e == glow::NO_ERROR {
        Ok(())
    } else {
        // Drain any further queued errors so they are not blamed on the next call.
        // SAFETY: as above.
        unsafe {
            for _ in 0..16 {
                if gl.get_error() == glow::NO_ERROR {
                    break;
                }
            }
        }
        Err(Error::Gl(format!("{what}: GL error {e:#x}")))
    }
}
