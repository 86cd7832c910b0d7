//! [`ImageProcessor`]: plans each conversion and runs it on a backend.

use super::options::{ConvertInfo, ConvertOptions};
use super::plan::Plan;
use crate::cpu::{CpuConverter, Threads};
use crate::image::ImageLayout;
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
}
