//! GLSL ES programs: the shader sources in `shaders/`, compiled once per source kind.

use glow::HasContext;

use super::egl::Current;
use crate::image::{FormatFamily, PixelFormat, SampleStorage};
use crate::{Error, Result};

const VERTEX: &str = include_str!("../../shaders/fullscreen.vert.glsl");
const CONVERT: &str = include_str!("../../shaders/convert.frag.glsl");

/// How a source's bytes are grouped into texels: one program per kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum SourceKind {
    /// YUYV and friends: one RGBA8 texel per 2-pixel macropixel.
    Packed422,
    /// NV12/NV21/NV16/NV61: R8 luma + RG8 chroma.
    SemiPlanar,
    /// I420/YV12: three R8 planes (bound Y, U, V whatever the memory order).
    Planar,
    /// Grey: one R8 plane.
    Grey,
    /// RGB/BGR: one R8 plane three bytes per pixel wide.
    Rgb3,
    /// RGBA/BGRA: one RGBA8 texel per pixel.
    Rgba4,
    /// Bayer, one byte a sample: one R8 plane.
    Bayer8,
    /// Bayer, a little-endian 16-bit word a sample: one RG8 texel (low, high byte) per
    /// pixel.
    Bayer16,
    /// Bayer, CSI-2 RAW10: one R8 plane as wide as a row's bytes (4 pixels in 5 texels).
    Bayer10P,
    /// Bayer, CSI-2 RAW12: one R8 plane as wide as a row's bytes (2 pixels in 3 texels).
    Bayer12P,
    /// Y10/Y12/Y16: one RG8 texel (low, high byte) per pixel.
    DeepGrey,
    /// P010/P012/P016: RG8 luma words + RGBA8 chroma (Cb low, Cb high, Cr low, Cr high).
    SemiPlanar16,
}

impl SourceKind {
    pub(crate) const ALL: [SourceKind; 12] = [
        SourceKind::Packed422,
        SourceKind::SemiPlanar,
        SourceKind::Planar,
        SourceKind::Grey,
        SourceKind::Rgb3,
        SourceKind::Rgba4,
        SourceKind::Bayer8,
        SourceKind::Bayer16,
        SourceKind::Bayer10P,
        SourceKind::Bayer12P,
        SourceKind::DeepGrey,
        SourceKind::SemiPlanar16,
    ];

    /// The kind of a source format.
    pub(crate) fn of(format: PixelFormat) -> Result<SourceKind> {
        Ok(match format.family() {
            FormatFamily::PackedYuv422 => SourceKind::Packed422,
            FormatFamily::SemiPlanarYuv => SourceKind::SemiPlanar,
            FormatFamily::PlanarYuv => SourceKind::Planar,
            FormatFamily::Grey => SourceKind::Grey,
            FormatFamily::PackedRgb if format.channels() == 3 => SourceKind::Rgb3,
            FormatFamily::PackedRgb => SourceKind::Rgba4,
            FormatFamily::Bayer => match format.storage() {
                SampleStorage::Byte => SourceKind::Bayer8,
                SampleStorage::Le16Low { .. } | SampleStorage::Le16High { .. } => {
                    SourceKind::Bayer16
                }
                SampleStorage::Csi2Packed10 => SourceKind::Bayer10P,
                SampleStorage::Csi2Packed12 => SourceKind::Bayer12P,
            },
            FormatFamily::DeepGrey => SourceKind::DeepGrey,
            FormatFamily::SemiPlanarYuv16 => SourceKind::SemiPlanar16,
            FormatFamily::Jpeg => {
                return Err(Error::Unsupported(format!(
                    "{format} frames are decoded into YUV planes before GL sees them; convert                      them with ImageProcessor::convert"
                )));
            }
            FormatFamily::PlanarRgb => {
                return Err(Error::Unsupported(format!(
                    "{format} is not a GL source format (`Backend::Gl.source_formats()` lists \
                     them): convert it on the CPU backend, or capture an interleaved format"
                )));
            }
        })
    }

    fn define(self) -> &'static str {
        match self {
            SourceKind::Packed422 => "SRC_PACKED422",
            SourceKind::SemiPlanar => "SRC_SEMIPLANAR",
            SourceKind::Planar => "SRC_PLANAR",
            SourceKind::Grey => "SRC_GREY",
            SourceKind::Rgb3 => "SRC_RGB3",
            SourceKind::Rgba4 => "SRC_RGBA4",
            SourceKind::Bayer8 => "SRC_BAYER8",
            SourceKind::Bayer16 => "SRC_BAYER16",
            SourceKind::Bayer10P => "SRC_BAYER10P",
            SourceKind::Bayer12P => "SRC_BAYER12P",
            SourceKind::DeepGrey => "SRC_DEEPGREY",
            SourceKind::SemiPlanar16 => "SRC_SEMIPLANAR16",
        }
    }
}

/// Uniform locations of the conversion program.
pub(crate) struct Uniforms {
    pub(crate) plane: [Option<glow::UniformLocation>; 3],
    pub(crate) taps: Option<glow::UniformLocation>,
    pub(crate) transposed: Option<glow::UniformLocation>,
    pub(crate) valid: Option<glow::UniformLocation>,
    pub(crate) sel: [Option<glow::UniformLocation>; 4],
    pub(crate) rgb_pos: Option<glow::UniformLocation>,
    pub(crate) chroma_vshift: Option<glow::UniformLocation>,
    pub(crate) chroma_hshift: Option<glow::UniformLocation>,
    pub(crate) color: [Option<glow::UniformLocation>; 3],
    pub(crate) pad: Option<glow::UniformLocation>,
    pub(crate) dtype: Option<glow::UniformLocation>,
    pub(crate) chans: Option<glow::UniformLocation>,
    pub(crate) planar: Option<glow::UniformLocation>,
    pub(crate) height: Option<glow::UniformLocation>,
    pub(crate) row0: Option<glow::UniformLocation>,
    pub(crate) width: Option<glow::UniformLocation>,
    pub(crate) map: Option<glow::UniformLocation>,
    pub(crate) scale: Option<glow::UniformLocation>,
    pub(crate) bias: Option<glow::UniformLocation>,
    pub(crate) src_size: Option<glow::UniformLocation>,
    pub(crate) white: Option<glow::UniformLocation>,
    pub(crate) tile_site: Option<glow::UniformLocation>,
    pub(crate) black: Option<glow::UniformLocation>,
    pub(crate) gain: Option<glow::UniformLocation>,
    pub(crate) ccm: [Option<glow::UniformLocation>; 3],
    pub(crate) srgb: Option<glow::UniformLocation>,
}

/// A linked conversion program.
pub(crate) struct Program {
    pub(crate) program: glow::Program,
    pub(crate) uniforms: Uniforms,
}

impl Program {
    /// Compiles and links the conversion program for `kind`.
    pub(crate) fn build(gl: &Current<'_>, kind: SourceKind) -> Result<Program> {
        let header = "#version 300 es\n";
        let vs = format!("{header}{VERTEX}");
        let fs = format!("{header}#define {}\n{CONVERT}", kind.define());
        // SAFETY: the context is current (`gl`); every object created here is
        // deleted on the error paths and owned by the returned Program otherwise.
        unsafe {
            let v = compile(gl, glow::VERTEX_SHADER, &vs)?;
            let f = match compile(gl, glow::FRAGMENT_SHADER, &fs) {
                Ok(f) => f,
                Err(e) => {
                    gl.delete_shader(v);
                    return Err(e);
                }
            };
            let program = match gl.create_program() {
                Ok(p) => p,
                Err(e) => {
                    gl.delete_shader(v);
                    gl.delete_shader(f);
                    return Err(Error::Gl(format!("glCreateProgram: {e}")));
                }
            };
            gl.attach_shader(program, v);
            gl.attach_shader(program, f);
            gl.link_program(program);
            gl.detach_shader(program, v);
            gl.detach_shader(program, f);
            gl.delete_shader(v);
            gl.delete_shader(f);
            if !gl.get_program_link_status(program) {
                let log = gl.get_program_info_log(program);
                gl.delete_program(program);
                return Err(Error::Gl(format!("linking the {kind:?} program: {log}")));
            }
            let u = |name: &str| gl.get_uniform_location(program, name);
            let uniforms = Uniforms {
                plane: [u("u_plane0"), u("u_plane1"), u("u_plane2")],
                taps: u("u_taps"),
                transposed: u("u_transposed"),
                valid: u("u_valid"),
                sel: [u("u_sel0"), u("u_sel1"), u("u_sel2"), u("u_sel3")],
                rgb_pos: u("u_rgb_pos"),
                chroma_vshift: u("u_chroma_vshift"),
                chroma_hshift: u("u_chroma_hshift"),
                color: [u("u_color0"), u("u_color1"), u("u_color2")],
                pad: u("u_pad"),
                dtype: u("u_dtype"),
                chans: u("u_chans"),
                planar: u("u_planar"),
                height: u("u_height"),
                row0: u("u_row0"),
                width: u("u_width"),
                map: u("u_map"),
                scale: u("u_scale"),
                bias: u("u_bias"),
                src_size: u("u_src_size"),
                white: u("u_white"),
                tile_site: u("u_tile_site"),
                black: u("u_black"),
                gain: u("u_gain"),
                ccm: [u("u_ccm0"), u("u_ccm1"), u("u_ccm2")],
                srgb: u("u_srgb"),
            };
            Ok(Program { program, uniforms })
        }
    }

    /// Deletes the program (`gl` must be the context it was built in).
    pub(crate) fn delete(&self, gl: &Current<'_>) {
        // SAFETY: the context is current (`gl`); the program is ours.
        unsafe { gl.delete_program(self.program) };
    }
}

/// Compiles one shader stage.
fn compile(gl: &Current<'_>, stage: u32, source: &str) -> Result<glow::Shader> {
    // SAFETY: the context is current (`gl`); the shader is deleted on failure.
    unsafe {
        let s = gl
            .create_shader(stage)
            .map_err(|e| Error::Gl(format!("glCreateShader: {e}")))?;
        gl.shader_source(s, source);
        gl.compile_shader(s);
        if !gl.get_shader_compile_status(s) {
            let log = gl.get_shader_info_log(s);
            gl.delete_shader(s);
            let what = if stage == glow::VERTEX_SHADER {
                "vertex"
            } else {
                "fragment"
            };
            return Err(Error::Gl(format!("compiling the {what} shader: {log}")));
        }
        Ok(s)
    }
}
