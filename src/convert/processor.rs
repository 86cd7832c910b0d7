//! [`ImageProcessor`]: plans each conversion and runs it on a backend.

use super::options::{ConvertInfo, ConvertOptions};
use super::plan::Plan;
use crate::cpu::{CpuConverter, Threads};
use crate::image::ImageLayout;
use crate::tensor::Tensor;
use crate::{Element, Error, Result};

/// Which backend an [`ImageProcessor`] runs conversions on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
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

impl Backend {
    /// Lowercase name as the CLI spells it.
    pub const fn name(self) -> &'static str {
        match self {
            Backend::Auto => "auto",
            Backend::Cpu => "cpu",
            Backend::Gl => "gl",
        }
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
/// backend also fills in imports, cache hits, uploads, readbacks and CPU fallbacks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProcessorStats {
    /// Source or destination buffers imported into the GPU (new EGL images).
    pub imports: u64,
    /// Conversions that reused an already imported buffer.
    pub cache_hits: u64,
    /// Source images copied to the GPU (not imported).
    pub uploads: u64,
    /// Destination images copied back from the GPU.
    pub readbacks: u64,
    /// Conversions that ran on the CPU although GL was the chosen backend.
    pub cpu_fallbacks: u64,
    /// Conversions completed.
    pub frames: u64,
}

/// Converts images: crop, flip, rotate, fit, resample, YUV→RGB, normalise and store in
/// one pass, into a destination of `u8`, `i8`, `f16` or `f32` elements.
///
/// It owns the scratch memory a conversion needs, so converting frames of the same
/// geometry again and again allocates nothing.
#[derive(Debug)]
pub struct ImageProcessor {
    backend: Backend,
    cpu: CpuConverter,
    threads: Threads,
    stats: ProcessorStats,
    /// Recent destination layouts, kept to map destinations without cloning theirs.
    dst_layouts: Vec<ImageLayout>,
}

impl ImageProcessor {
    /// A processor on the best available backend ([`Backend::Auto`]).
    pub fn new() -> Result<Self> {
        Self::with_backend(Backend::Auto)
    }

    /// A processor on the given backend. Asking for [`Backend::Gl`] explicitly fails when
    /// GL cannot be used, rather than falling back.
    pub fn with_backend(backend: Backend) -> Result<Self> {
        let resolved = match backend {
            Backend::Auto | Backend::Cpu => Backend::Cpu,
            Backend::Gl => {
                return Err(Error::Gl(
                    "the GL backend is not available in this build; use Backend::Cpu or \
                     Backend::Auto"
                        .into(),
                ));
            }
        };
        Ok(ImageProcessor {
            backend: resolved,
            cpu: CpuConverter::new(),
            threads: Threads::Pool,
            stats: ProcessorStats::default(),
            dst_layouts: Vec::with_capacity(KEPT_DST_LAYOUTS),
        })
    }

    /// The backend conversions run on (never `Auto`).
    pub fn backend(&self) -> Backend {
        self.backend
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
        let plan = Plan::new(src_layout, dst_layout, options)?;
        self.cpu
            .convert(&plan, src, src_layout, dst, dst_layout, self.threads)?;
        self.stats.frames += 1;
        Ok(plan.info())
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
        // The layout must outlive the mutable mapping of `dst`: convert against a kept
        // copy, cloned only for a destination layout not seen recently, so steady-state
        // conversions (even alternating between a few destinations) do not allocate.
        let kept = match self.dst_layouts.iter().position(|l| l == layout) {
            Some(i) => i,
            None => {
                if self.dst_layouts.len() == KEPT_DST_LAYOUTS {
                    self.dst_layouts.remove(0);
                }
                self.dst_layouts.push(layout.clone());
                self.dst_layouts.len() - 1
            }
        };
        let dst_layout = &self.dst_layouts[kept];
        let plan = Plan::new(src_layout, dst_layout, options)?;
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
            &plan,
            &src_bufs[..count],
            src_layout,
            &mut dst_map,
            dst_layout,
            self.threads,
        )?;
        self.stats.frames += 1;
        Ok(plan.info())
    }
}

/// Destination layouts an [`ImageProcessor`] keeps (see `convert_with`).
const KEPT_DST_LAYOUTS: usize = 8;

/// Planes of a source live in at most this many buffers (one per plane).
const MAX_SOURCE_BUFFERS: usize = 3;
