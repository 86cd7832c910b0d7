//! Executing one conversion on the GPU, split by concern:
//!
//! | module | holds |
//! | --- | --- |
//! | this one | [`Draw`] (a plan in the shader's terms), the source planes as textures, [`Renderer`] (the per-context GPU state) and the draw itself |
//! | `upload` | host sources into textures (direct or through a PBO), the tap table |
//! | `target` | the byte-packing render target a destination needs, framebuffers |
//! | `readback` | the renderer's own target back into the destination's bytes |
//!
//! Every function that issues GL calls takes a [`Current`]: the context is current
//! because the caller holds the proof.

mod readback;
mod target;
mod upload;

pub(crate) use readback::{GuardSink, SliceSink};
pub(crate) use target::{TargetShape, framebuffer_for, target_shape};

use std::collections::HashMap;

use glow::HasContext;

use super::egl::Current;
use super::program::{Program, SourceKind};
use crate::convert::Gamma;
use crate::convert::Plan;
use crate::convert::plan::RawPlan;
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
    /// Source width and height in pixels (the bounds the demosaic mirrors at).
    pub(crate) src_size: [i32; 2],
    /// The source's white level `2^bits - 1` (deep and RAW sources clip codes to it).
    pub(crate) white: i32,
    /// The RAW steps of a Bayer source.
    pub(crate) raw: Option<RawDraw>,
}

/// The plan's [`crate::convert::plan::RawPlan`] in the shader's terms: per-site constants
/// rearranged by position in the 2x2 CFA tile (top-left, top-right, bottom-left,
/// bottom-right), so the shader indexes them by `(y & 1) * 2 + (x & 1)` alone.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct RawDraw {
    /// The CFA site at each tile position (0 R, 1 Gr, 2 Gb, 3 B).
    pub(crate) tile_site: [i32; 4],
    /// The black level of the site at each tile position.
    pub(crate) black: [f32; 4],
    /// `gain / (white - black)` of the site at each tile position.
    pub(crate) gain: [f32; 4],
    /// The colour-correction matrix, rows output R, G, B.
    pub(crate) ccm: [[f32; 3]; 3],
    /// The sRGB curve after the matrix (else linear).
    pub(crate) srgb: bool,
}

impl RawDraw {
    fn from_plan(raw: &RawPlan) -> RawDraw {
        let sites = raw.cfa.sites();
        RawDraw {
            tile_site: sites.map(|s| s as i32),
            black: sites.map(|s| raw.black[s as usize]),
            gain: sites.map(|s| raw.scale[s as usize]),
            ccm: raw.ccm,
            srgb: raw.gamma == Gamma::Srgb,
        }
    }
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
            src_size: [plan.src_width as i32, plan.src_height as i32],
            white: plan.src_format.storage().max_value() as i32,
            raw: plan.raw.as_ref().map(RawDraw::from_plan),
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
        use drm_fourcc::DrmFourcc;
        (match self.texel_bytes {
            1 => DrmFourcc::R8,
            2 => DrmFourcc::Gr88,
            _ => DrmFourcc::Abgr8888,
        }) as u32
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
        SourceKind::Planar => {
            let (hs, vs) = f.chroma_subsampling();
            let (cw, ch) = (w.div_ceil(hs), h.div_ceil(vs));
            let (u, v) = if f.chroma_swapped() { (2, 1) } else { (1, 2) };
            vec![pt(0, w, h, 1), pt(u, cw, ch, 1), pt(v, cw, ch, 1)]
        }
        SourceKind::Grey => vec![pt(0, w, h, 1)],
        SourceKind::Rgb3 => vec![pt(0, w * 3, h, 1)],
        SourceKind::Rgba4 => vec![pt(0, w, h, 4)],
        // One RG8 texel (low byte, high byte) per 16-bit word.
        SourceKind::Bayer16 | SourceKind::DeepGrey => vec![pt(0, w, h, 2)],
        SourceKind::Bayer8 => vec![pt(0, w, h, 1)],
        // CSI-2 packed rows are bytes the shader unpacks: as wide as a row's bytes.
        SourceKind::Bayer10P | SourceKind::Bayer12P => {
            vec![pt(0, layout.plane_row_bytes(0) as u32, h, 1)]
        }
        // Chroma: one RGBA8 texel (Cb low, Cb high, Cr low, Cr high) per CbCr pair.
        SourceKind::SemiPlanar16 => vec![pt(0, w, h, 2), pt(1, w.div_ceil(2), h.div_ceil(2), 4)],
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
    pub(crate) fn warm_up(&mut self, gl: &Current<'_>) -> Result<()> {
        for kind in SourceKind::ALL {
            self.program(gl, kind)?;
        }
        Ok(())
    }

    fn program(&mut self, gl: &Current<'_>, kind: SourceKind) -> Result<&Program> {
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

    /// Draws the conversion of `src` (textures in binding order, of `src_layout`)
    /// into `fbo`, whose shape is `shape` for the destination `dst_layout`, from target
    /// row `row0` on (0, or where a slice of a batch starts in a stacked target).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn draw(
        &mut self,
        gl: &Current<'_>,
        draw: &Draw,
        src_layout: &ImageLayout,
        src: &[glow::Texture],
        dst_layout: &ImageLayout,
        shape: &TargetShape,
        fbo: glow::Framebuffer,
        row0: u32,
    ) -> Result<()> {
        let sf = src_layout.format();
        let kind = SourceKind::of(sf)?;
        if sf.cfa().is_some() && draw.raw.is_none() {
            return Err(Error::InvalidArgument(format!(
                "the draw for the {sf} source has no RAW steps; make the plan with Plan::new"
            )));
        }
        if self.vao.is_none() {
            // SAFETY: the context is current (`gl`).
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
            SourceKind::Planar
            | SourceKind::Grey
            | SourceKind::Bayer8
            | SourceKind::Bayer16
            | SourceKind::Bayer10P
            | SourceKind::Bayer12P
            | SourceKind::DeepGrey
            | SourceKind::SemiPlanar16 => {}
        }
        let dtype_code = match dst_layout.dtype() {
            DType::U8 => 0,
            DType::I8 => 1,
            DType::F16 => 2,
            _ => 3,
        };
        // SAFETY: the context is current (`gl`); the program, textures, VAO and
        // framebuffer are live objects of this context; uniform values match the
        // declared types.
        unsafe {
            gl.bind_framebuffer(glow::FRAMEBUFFER, Some(fbo));
            gl.viewport(0, row0 as i32, shape.width as i32, shape.rows as i32);
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
            let hshift = (sf.chroma_subsampling().0 == 2) as i32;
            gl.uniform_1_i32(u.chroma_hshift.as_ref(), hshift);
            for (loc, v) in u.color.iter().zip(&draw.color) {
                gl.uniform_4_f32_slice(loc.as_ref(), v);
            }
            gl.uniform_4_f32(u.pad.as_ref(), draw.pad[0], draw.pad[1], draw.pad[2], 0.0);
            gl.uniform_1_i32(u.dtype.as_ref(), dtype_code);
            gl.uniform_1_i32(u.chans.as_ref(), draw.chans);
            gl.uniform_1_i32(u.planar.as_ref(), (shape.planes == 3) as i32);
            gl.uniform_1_i32(u.height.as_ref(), dst_layout.height() as i32);
            gl.uniform_1_i32(u.row0.as_ref(), row0 as i32);
            gl.uniform_1_i32(u.width.as_ref(), dst_layout.width() as i32);
            let m = draw.map;
            gl.uniform_4_i32(u.map.as_ref(), m[0], m[1], m[2], m[3]);
            gl.uniform_3_f32_slice(u.scale.as_ref(), &draw.scale);
            gl.uniform_3_f32_slice(u.bias.as_ref(), &draw.bias);
            gl.uniform_2_i32(u.src_size.as_ref(), draw.src_size[0], draw.src_size[1]);
            gl.uniform_1_i32(u.white.as_ref(), draw.white);
            if let Some(raw) = &draw.raw {
                gl.uniform_4_i32_slice(u.tile_site.as_ref(), &raw.tile_site);
                gl.uniform_4_f32_slice(u.black.as_ref(), &raw.black);
                gl.uniform_4_f32_slice(u.gain.as_ref(), &raw.gain);
                for (loc, row) in u.ccm.iter().zip(&raw.ccm) {
                    gl.uniform_3_f32_slice(loc.as_ref(), row);
                }
                gl.uniform_1_i32(u.srgb.as_ref(), raw.srgb as i32);
            }
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

    /// Deletes every GL object (`gl` must be the context they were made in).
    pub(crate) fn delete(&mut self, gl: &Current<'_>) {
        // SAFETY: the context is current (`gl`); all objects are ours.
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

/// Nearest filtering, edge clamp, for the texture bound to `TEXTURE_2D`: texelFetch
/// ignores both, but an incomplete texture (mipmapped min filter) would read as black on
/// some drivers.
pub(crate) fn set_nearest(gl: &Current<'_>) {
    // SAFETY: the context is current (`gl`); parameter calls on whatever is bound to
    // TEXTURE_2D (with nothing bound GL records INVALID_OPERATION, caught by check_error).
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

/// Turns a pending GL error into an `Error`.
pub(crate) fn check_error(gl: &Current<'_>, what: &str) -> Result<()> {
    // SAFETY: glGetError only needs a current context, which `gl` proves.
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
