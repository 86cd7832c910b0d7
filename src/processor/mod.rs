//! [`ImageProcessor`]: plans each conversion and runs it on a backend.
//!
//! It sits above both backends (`cpu/`, `gl/`), which only execute the
//! [`Plan`](crate::convert::Plan) it hands them: picking a backend, counting what they did
//! and falling back (counted, logged once) is decided here and nowhere else.

mod batch;
mod mjpeg;

use crate::convert::{ConvertInfo, ConvertOptions, Plan};
use crate::cpu::{CpuConverter, Threads};
use crate::image::{FormatFamily, ImageLayout, PixelFormat};
use crate::log_once::LogOnce;
use crate::tensor::{Memory, Tensor};
use crate::{Element, Error, Result};

/// Which backend an [`ImageProcessor`] runs conversions on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Backend {
    /// The best available: GL when it is usable, else the CPU (a fallback that is
    /// counted in [`ProcessorStats::cpu_fallbacks`]).
    #[default]
    Auto,
    /// The fused CPU kernels, on the rayon pool.
    Cpu,
    /// OpenGL ES through EGL; fails loudly when it cannot start.
    Gl,
}

/// Every destination format (the same on every backend).
const DESTINATION_FORMATS: [PixelFormat; 7] = [
    PixelFormat::Rgb,
    PixelFormat::Bgr,
    PixelFormat::Rgba,
    PixelFormat::Bgra,
    PixelFormat::Grey,
    PixelFormat::PlanarRgb,
    PixelFormat::PlanarBgr,
];

/// The sources the GL backend samples: every format but planar RGB/BGR, which are
/// destination layouts (no camera delivers them); GL refuses them with
/// `Error::Unsupported`, the CPU backend converts them. Compressed sources are decoded on
/// the CPU and their planes converted on GL. Derived from `PixelFormat::SOURCES` at
/// compile time, so a new format is listed without restating the others.
const GL_SOURCE_FORMATS: [PixelFormat; PixelFormat::SOURCES.len() - 2] = {
    let mut out = [PixelFormat::Grey; PixelFormat::SOURCES.len() - 2];
    let (mut i, mut n) = (0, 0);
    while i < PixelFormat::SOURCES.len() {
        let f = PixelFormat::SOURCES[i];
        if !matches!(f.family(), FormatFamily::PlanarRgb) {
            out[n] = f;
            n += 1;
        }
        i += 1;
    }
    assert!(n == out.len(), "GL_SOURCE_FORMATS has the wrong length");
    out
};

impl Backend {
    /// Lowercase name as the CLI spells it.
    pub const fn name(self) -> &'static str {
        match self {
            Backend::Auto => "auto",
            Backend::Cpu => "cpu",
            Backend::Gl => "gl",
        }
    }

    /// The source formats this backend converts. `Auto` converts what the CPU does (GL
    /// hands it what it refuses).
    ///
    /// ```
    /// use pinframe::{Backend, PixelFormat};
    /// assert!(Backend::Gl.source_formats().contains(&PixelFormat::Nv12));
    /// assert!(!Backend::Gl.source_formats().contains(&PixelFormat::PlanarRgb));
    /// assert!(Backend::Gl.source_formats().contains(&PixelFormat::Mjpeg));
    /// assert_eq!(Backend::Cpu.source_formats(), &PixelFormat::SOURCES);
    /// ```
    pub const fn source_formats(self) -> &'static [PixelFormat] {
        match self {
            Backend::Auto | Backend::Cpu => &PixelFormat::SOURCES,
            Backend::Gl => &GL_SOURCE_FORMATS,
        }
    }

    /// The destination formats this backend writes (every non-YUV format, on every
    /// backend), each in `u8`, `i8`, `f16` or `f32` elements.
    pub const fn destination_formats(self) -> &'static [PixelFormat] {
        &DESTINATION_FORMATS
    }
}

impl std::str::FromStr for Backend {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "auto" => Ok(Backend::Auto),
            "cpu" => Ok(Backend::Cpu),
            "gl" => Ok(Backend::Gl),
            _ => Err(Error::InvalidArgument(format!(
                "unknown backend {s:?}; expected auto, cpu or gl"
            ))),
        }
    }
}

impl std::fmt::Display for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Counters of what an [`ImageProcessor`] did. The CPU backend counts `frames`; the GL
/// backend also fills in imports, cache hits, uploads, readbacks, import failures and CPU
/// fallbacks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProcessorStats {
    /// Source or destination buffers imported into the GPU (new EGL images).
    pub imports: u64,
    /// Conversions that reused an already imported buffer.
    pub cache_hits: u64,
    /// Source images copied to the GPU (not imported).
    pub uploads: u64,
    /// Destination images copied back from the GPU.
    pub readbacks: u64,
    /// Conversions that ran on the CPU although GL was the chosen backend (under
    /// [`Backend::Auto`] only; each cause is logged once, at warn level).
    pub cpu_fallbacks: u64,
    /// Dma-buf buffers the GL driver refused to import (then uploaded or read back), each
    /// counted once.
    pub import_failures: u64,
    /// Conversions completed.
    pub frames: u64,
}

/// Converts images: crop, flip, rotate, fit, resample, YUV→RGB, normalise and store in
/// one pass, into a destination of `u8`, `i8`, `f16` or `f32` elements.
///
/// It owns the scratch memory a conversion needs, so converting frames of the same
/// geometry again and again allocates nothing.
///
/// With the GL backend it owns an EGL context, made current on the calling thread for
/// the duration of each call; before the call returns, whatever the caller had current
/// (its own EGL context, surfaces and bound API) is current again. The processor is
/// `Send` and may move between threads.
#[derive(Debug)]
pub struct ImageProcessor {
    backend: Backend,
    /// What the caller asked for (`Auto` may fall back to the CPU; `Gl` may not).
    #[cfg_attr(not(feature = "gl"), allow(dead_code))]
    requested: Backend,
    #[cfg(feature = "gl")]
    gl: Option<crate::gl::GlBackend>,
    cpu: CpuConverter,
    /// The decoder and planes of compressed sources.
    mjpeg: mjpeg::MjpegStage,
    threads: Threads,
    stats: ProcessorStats,
    /// Causes of GL → CPU fallbacks already logged (DESIGN.md invariant 8: logged once).
    #[cfg_attr(not(feature = "gl"), allow(dead_code))]
    fallbacks: LogOnce,
}

impl ImageProcessor {
    /// A processor on the best available backend ([`Backend::Auto`]).
    pub fn new() -> Result<Self> {
        Self::with_backend(Backend::Auto)
    }

    /// A processor on the given backend. Asking for [`Backend::Gl`] explicitly fails when
    /// GL cannot be used, rather than falling back.
    pub fn with_backend(backend: Backend) -> Result<Self> {
        #[cfg(feature = "gl")]
        return Self::with_gl_config(backend, crate::gl::GlConfig::default());
        #[cfg(not(feature = "gl"))]
        {
            let resolved = match backend {
                Backend::Auto | Backend::Cpu => Backend::Cpu,
                Backend::Gl => {
                    return Err(Error::Unsupported(
                        "the GL backend is not available in this build (feature `gl`); use \
                         Backend::Cpu or Backend::Auto"
                            .into(),
                    ));
                }
            };
            Ok(Self::on(resolved, backend))
        }
    }

    /// A processor on `backend` whose GL backend (if used) is configured by `config`
    /// (EGL platform, image cache bound, dma-buf import). `Auto` picks GL only on a
    /// hardware GPU: software rasterisers (llvmpipe, softpipe, swrast) are slower than
    /// the fused CPU kernels, so `Auto` uses the CPU there (ask for `Backend::Gl` to
    /// use them anyway). Set `PINFRAME_BACKEND=gl|cpu` to override `Auto`.
    #[cfg(feature = "gl")]
    pub fn with_gl_config(backend: Backend, config: crate::gl::GlConfig) -> Result<Self> {
        let backend_env = match std::env::var("PINFRAME_BACKEND") {
            Ok(v) if !v.is_empty() && backend == Backend::Auto => v.parse::<Backend>()?,
            _ => backend,
        };
        match backend_env {
            Backend::Cpu => Ok(Self::on(Backend::Cpu, backend)),
            Backend::Gl => {
                let gl = crate::gl::GlBackend::new(config)?;
                let mut me = Self::on(Backend::Gl, Backend::Gl);
                me.gl = Some(gl);
                Ok(me)
            }
            Backend::Auto => match crate::gl::GlBackend::new(config) {
                Ok(gl) if !gl.is_software() => {
                    let mut me = Self::on(Backend::Gl, Backend::Auto);
                    me.gl = Some(gl);
                    Ok(me)
                }
                Ok(gl) => {
                    log::info!(
                        "pinframe: GL runs on a software rasteriser ({}); using the CPU backend",
                        gl.info().gl_renderer
                    );
                    Ok(Self::on(Backend::Cpu, Backend::Auto))
                }
                Err(e) => {
                    log::info!("pinframe: GL backend unavailable ({e}); using the CPU backend");
                    Ok(Self::on(Backend::Cpu, Backend::Auto))
                }
            },
        }
    }

    fn on(backend: Backend, requested: Backend) -> Self {
        ImageProcessor {
            backend,
            requested,
            #[cfg(feature = "gl")]
            gl: None,
            cpu: CpuConverter::new(),
            mjpeg: mjpeg::MjpegStage::default(),
            threads: Threads::Pool,
            stats: ProcessorStats::default(),
            fallbacks: LogOnce::default(),
        }
    }

    /// The GL backend's display and context, when conversions run on GL.
    #[cfg(feature = "gl")]
    pub fn gl_info(&self) -> Option<&crate::gl::GlInfo> {
        self.gl.as_ref().map(|g| g.info())
    }

    /// The GL backend's counters (including live EGL images, after releasing those whose
    /// tensors were dropped), when conversions run on GL.
    #[cfg(feature = "gl")]
    pub fn gl_stats(&mut self) -> Option<crate::gl::GlStats> {
        self.gl.as_mut().map(|g| g.stats())
    }

    /// Runs `plan` on GL if this processor uses it. `Some(Ok)` when done; `None` when the
    /// CPU must run it (no GL, or a counted fallback under `Auto`).
    #[cfg(feature = "gl")]
    fn try_gl(
        &mut self,
        run: impl FnOnce(&mut crate::gl::GlBackend) -> Result<()>,
    ) -> Option<Result<()>> {
        let gl = self.gl.as_mut()?;
        let result = run(gl);
        let s = gl.counters();
        self.stats.imports = s.imports;
        self.stats.cache_hits = s.cache_hits;
        self.stats.uploads = s.uploads;
        self.stats.readbacks = s.readbacks;
        self.stats.import_failures = s.import_failures;
        match result {
            Ok(()) => Some(Ok(())),
            Err(e) if self.requested == Backend::Auto => {
                self.stats.cpu_fallbacks += 1;
                self.fallbacks.warn(
                    &e.to_string(),
                    format_args!("pinframe: GL could not convert ({e}); converting on the CPU"),
                );
                None
            }
            Err(e) => Some(Err(e)),
        }
    }

    /// The backend conversions run on (never `Auto`).
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// The instruction set the CPU backend's kernel runs with: `"avx512"` (x86-64 with
    /// AVX-512 F, BW and VBMI, detected at run time), `"avx2"` (x86-64 with AVX2, or an
    /// AVX-512 CPU with `PINFRAME_CPU_SIMD=avx2` set), `"neon"` (aarch64) or `"portable"`
    /// (the target's baseline build, or any target when `PINFRAME_CPU_SIMD=portable` is
    /// set). All give bit-identical results; this says which one a benchmark measured.
    pub fn cpu_kernel(&self) -> &'static str {
        self.cpu.kernel()
    }

    /// Whether the CPU backend spreads row bands over the rayon pool (default) or runs on
    /// the calling thread only.
    pub fn set_parallel(&mut self, parallel: bool) {
        self.threads = if parallel {
            Threads::Pool
        } else {
            Threads::Caller
        };
    }

    /// What this processor has done so far.
    pub fn stats(&self) -> ProcessorStats {
        self.stats
    }

    /// Converts an image held in plain memory: `src` has one slice per buffer of
    /// `src_layout` (usually one), `dst` is one buffer laid out as `dst_layout`, whose
    /// dtype must be `T`'s. A destination that is a region of a larger buffer (a tile of
    /// a batch) is expressed by `dst_layout`'s plane offsets and strides.
    pub fn convert_buffers<T: Element>(
        &mut self,
        src: &[&[u8]],
        src_layout: &ImageLayout,
        dst: &mut [T],
        dst_layout: &ImageLayout,
        options: &ConvertOptions,
    ) -> Result<ConvertInfo> {
        if src_layout.format().is_compressed() {
            let data = src.first().copied().unwrap_or_default();
            let data = mjpeg::frame_bytes(data, src_layout)?;
            let memory = self.decoded_planes_memory();
            let decoded = self
                .mjpeg
                .decode(data, src_layout, dst_layout, options, memory)?;
            let planes = self.mjpeg.take_planes()?;
            let result = (|| {
                let map = planes.map()?;
                let bytes = [map.buffer_bytes(0)];
                let layout = planes.layout().copied().unwrap_or(*src_layout);
                self.run_buffers(&decoded.plan, &bytes, &layout, dst, dst_layout)
            })();
            self.mjpeg.restore_planes(planes);
            result?;
            return Ok(decoded.info);
        }
        let plan = Plan::new(src_layout, dst_layout, options)?;
        self.run_buffers(&plan, src, src_layout, dst, dst_layout)?;
        Ok(plan.info())
    }

    /// Memory for the planes a compressed frame is decoded into: the heap for the CPU;
    /// for GL shareable CPU memory (a memfd), which GL uploads from. Decoding into a
    /// dma-buf GL could import is not done yet: the CPU would write the planes into
    /// memory that is often uncached, and whether that beats the upload is unmeasured.
    fn decoded_planes_memory(&self) -> Option<Memory> {
        match self.backend {
            Backend::Gl => None,
            _ => Some(Memory::Heap),
        }
    }

    /// Runs `plan` over sources in plain memory, on GL or the CPU.
    fn run_buffers<T: Element>(
        &mut self,
        plan: &Plan,
        src: &[&[u8]],
        src_layout: &ImageLayout,
        dst: &mut [T],
        dst_layout: &ImageLayout,
    ) -> Result<()> {
        #[cfg(feature = "gl")]
        if let Some(r) = self.try_gl(|gl| {
            let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut *dst);
            gl.convert_bytes(plan, src_layout, src, dst_layout, &mut [bytes])
        }) {
            r?;
            self.stats.frames += 1;
            return Ok(());
        }
        self.cpu
            .convert(plan, src, src_layout, dst, dst_layout, self.threads)?;
        self.stats.frames += 1;
        Ok(())
    }

    /// Converts `src` into `dst` with the default options: the whole source stretched to
    /// the destination, bilinear, colorimetry from the frame (or by height), float
    /// outputs scaled to 0..=1.
    pub fn convert<T: Element>(
        &mut self,
        src: &Tensor<u8>,
        dst: &mut Tensor<T>,
    ) -> Result<ConvertInfo> {
        self.convert_with(src, dst, &ConvertOptions::default())
    }

    /// Converts `src` into `dst` as `options` ask. Both tensors must be images (made by
    /// [`Tensor::image`], [`Tensor::with_layout`], an import, or given a layout with
    /// [`Tensor::set_layout`]; a destination layout may address one tile of a batch).
    pub fn convert_with<T: Element>(
        &mut self,
        src: &Tensor<u8>,
        dst: &mut Tensor<T>,
        options: &ConvertOptions,
    ) -> Result<ConvertInfo> {
        let src_layout = src.layout().ok_or_else(|| {
            Error::InvalidArgument(
                "the source tensor has no image layout; make it with Tensor::image, \
                 Tensor::with_layout or an import, or call set_layout"
                    .into(),
            )
        })?;
        let Some(layout) = dst.layout() else {
            return Err(Error::InvalidArgument(
                "the destination tensor has no image layout; make it with Tensor::image or \
                 Tensor::with_layout, or call set_layout"
                    .into(),
            ));
        };
        if dst.batch_len() > 1 {
            return Err(Error::InvalidArgument(format!(
                "the destination is a batch of {} images: convert into it with \
                 convert_batch",
                dst.batch_len()
            )));
        }
        // A copy (layouts are `Copy`): the mutable mapping of `dst` below must not borrow
        // from `dst` itself.
        let dst_layout = *layout;
        let dst_layout = &dst_layout;
        // Before the plan: an aliasing pair is refused whatever else is wrong with it.
        if let Some(o) = src.overlap_with(dst) {
            return Err(Error::InvalidArgument(format!(
                "src and dst overlap: bytes {}..{} of src's buffer {} and bytes {}..{} of \
                 dst's buffer {} are the same memory (one dma-buf or memfd): a conversion \
                 cannot read the memory it writes; convert into memory of its own",
                o.bytes.start,
                o.bytes.end,
                o.buffer,
                o.other_bytes.start,
                o.other_bytes.end,
                o.other_buffer
            )));
        }
        if src_layout.format().is_compressed() {
            let memory = self.decoded_planes_memory();
            let decoded = {
                let map = src.map()?;
                let data = mjpeg::frame_bytes(map.buffer_bytes(0), src_layout)?;
                self.mjpeg
                    .decode(data, src_layout, dst_layout, options, memory)?
            };
            let planes = self.mjpeg.take_planes()?;
            let result = self.run_tensors(&decoded.plan, &planes, dst, dst_layout);
            self.mjpeg.restore_planes(planes);
            result?;
            return Ok(decoded.info);
        }
        let plan = Plan::new(src_layout, dst_layout, options)?;
        self.run_tensors(&plan, src, dst, dst_layout)?;
        Ok(plan.info())
    }

    /// Runs `plan` from the image `src` into `dst`, on GL or the CPU.
    fn run_tensors<T: Element>(
        &mut self,
        plan: &Plan,
        src: &Tensor<u8>,
        dst: &mut Tensor<T>,
        dst_layout: &ImageLayout,
    ) -> Result<()> {
        let src_layout = src.layout().ok_or_else(|| {
            Error::InvalidArgument("the source tensor has no image layout".into())
        })?;
        #[cfg(feature = "gl")]
        if let Some(r) = self.try_gl(|gl| gl.convert(plan, src, dst)) {
            r?;
            self.stats.frames += 1;
            return Ok(());
        }
        let count = src_layout.buffer_count();
        if count > MAX_SOURCE_BUFFERS {
            return Err(Error::InvalidLayout(format!(
                "the source spans {count} buffers; at most {MAX_SOURCE_BUFFERS} are supported"
            )));
        }
        let src_map = src.map()?;
        let empty: &[u8] = &[];
        let mut src_bufs = [empty; MAX_SOURCE_BUFFERS];
        for (i, b) in src_bufs.iter_mut().enumerate().take(count) {
            *b = src_map.buffer_bytes(i);
        }
        let mut dst_map = dst.map_mut()?;
        self.cpu.convert(
            plan,
            &src_bufs[..count],
            src_layout,
            &mut dst_map,
            dst_layout,
            self.threads,
        )?;
        self.stats.frames += 1;
        Ok(())
    }
}

/// Planes of a source live in at most this many buffers (one per plane).
const MAX_SOURCE_BUFFERS: usize = 3;

#[cfg(all(test, feature = "gl"))]
mod tests;
