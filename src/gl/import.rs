//! DMA-BUF → EGLImage → GL texture (and framebuffer, for render targets).
//!
//! Each plane is imported on its own with a raw byte format (`R8`, `GR88`, `AB24`)
//! rather than as one multi-plane YUV image: the shader then reads the exact bytes and
//! applies the plan's own matrix, instead of whatever YUV sampler (and colour-space
//! hints) the driver would pick, so results match the CPU path on every GPU.
//!
//! Every `eglDestroyImage` runs inside [`with_cpu_mappings_excluded`] (DESIGN.md
//! invariant 1): the unit test `destroys_exclude_cpu_mappings` races a thread that maps
//! and unmaps tensors against destroys and proves no mapping changes while one runs.
//! Process-wide counters of creates and destroys let tests prove nothing leaks.

use std::os::fd::{AsRawFd, BorrowedFd};
use std::sync::atomic::{AtomicU64, Ordering};

use glow::HasContext;

use super::egl::{Current, DestroyImageKhr, GlContext, RawDisplay, RawImage};
use super::render::{check_error, framebuffer_for, set_nearest};
use crate::image::{DRM_FORMAT_MOD_INVALID, DRM_FORMAT_MOD_LINEAR, fourcc_to_string};
use crate::tensor::with_cpu_mappings_excluded;
use crate::{Error, Result};

const EGL_LINUX_DMA_BUF_EXT: u32 = 0x3270;
const EGL_WIDTH: i32 = 0x3057;
const EGL_HEIGHT: i32 = 0x3056;
const EGL_LINUX_DRM_FOURCC_EXT: i32 = 0x3271;
const EGL_DMA_BUF_PLANE0_FD_EXT: i32 = 0x3272;
const EGL_DMA_BUF_PLANE0_OFFSET_EXT: i32 = 0x3273;
const EGL_DMA_BUF_PLANE0_PITCH_EXT: i32 = 0x3274;
const EGL_DMA_BUF_PLANE0_MODIFIER_LO_EXT: i32 = 0x3443;
const EGL_DMA_BUF_PLANE0_MODIFIER_HI_EXT: i32 = 0x3444;
const EGL_NONE: i32 = 0x3038;

static CREATED: AtomicU64 = AtomicU64::new(0);
static DESTROYED: AtomicU64 = AtomicU64::new(0);

/// Process-wide counts of the EGL images pinframe created and destroyed (a test hook
/// for DESIGN.md invariants 1 and 5).
#[cfg(feature = "testing")]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GlImageCounters {
    /// `eglCreateImage` calls that returned an image.
    pub created: u64,
    /// `eglDestroyImage` calls.
    pub destroyed: u64,
}

#[cfg(feature = "testing")]
impl GlImageCounters {
    /// Images alive now.
    pub fn live(&self) -> u64 {
        self.created - self.destroyed
    }
}

/// The process-wide EGL image counters.
#[cfg(feature = "testing")]
pub fn gl_image_counters() -> GlImageCounters {
    GlImageCounters {
        created: CREATED.load(Ordering::SeqCst),
        destroyed: DESTROYED.load(Ordering::SeqCst),
    }
}

/// One EGLImage; destroyed (inside the mapping guard) when dropped.
pub(crate) struct EglImage {
    raw: RawImage,
    display: RawDisplay,
    destroy: DestroyImageKhr,
}

// SAFETY: an EGLImage handle is a display-level object usable from any thread (EGL 1.4
// §2.7; EGL_KHR_image_base); the display outlives it (the cache is emptied before the
// backend's display reference drops).
unsafe impl Send for EglImage {}

impl Drop for EglImage {
    fn drop(&mut self) {
        let (display, raw, destroy) = (self.display, self.raw as usize, self.destroy);
        // Some drivers (Adreno's) unmap the imported range again inside eglDestroyImage:
        // no CPU mapping may be created or removed meanwhile.
        with_cpu_mappings_excluded(|| {
            // SAFETY: `raw` is a live image of `display`, destroyed exactly once here.
            unsafe { destroy(display, raw as RawImage) };
        });
        DESTROYED.fetch_add(1, Ordering::SeqCst);
    }
}

/// What to import: one plane as one 2D image of `fourcc` texels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct ImportSpec {
    pub(crate) width: u32,
    pub(crate) height: u32,
    pub(crate) fourcc: u32,
    pub(crate) offset: usize,
    pub(crate) pitch: usize,
    pub(crate) modifier: u64,
    /// True for a destination (a framebuffer is made for it).
    pub(crate) render_target: bool,
}

/// An imported image with its texture (and framebuffer, for render targets).
pub(crate) struct Imported {
    pub(crate) texture: glow::Texture,
    pub(crate) fbo: Option<glow::Framebuffer>,
    // Dropped after the GL objects were deleted by `release`.
    image: EglImage,
}

impl Imported {
    /// Deletes the GL objects (`gl` must be the context that imported them), then
    /// destroys the image.
    pub(crate) fn release(self, gl: &Current<'_>) {
        // SAFETY: the context is current (`gl`); the objects are ours.
        unsafe {
            if let Some(f) = self.fbo {
                gl.delete_framebuffer(f);
            }
            gl.delete_texture(self.texture);
        }
        drop(self.image);
    }
}

/// Imports one plane of the dma-buf `fd` into `gl`'s context. On any error nothing is
/// left behind (no image, texture or framebuffer).
pub(crate) fn import(gl: &Current<'_>, fd: BorrowedFd<'_>, spec: &ImportSpec) -> Result<Imported> {
    let ctx = gl.context();
    let fns = match (ctx.info.dma_buf_import, ctx.image_fns) {
        (true, Some(f)) => f,
        _ => {
            return Err(Error::Unsupported(format!(
                "the EGL display ({}) lacks EGL_EXT_image_dma_buf_import / GL_OES_EGL_image",
                ctx.info.gl_renderer
            )));
        }
    };
    if ctx.display.driver.as_deref() == Some("kms_swrast") {
        // Mesa's kms_swrast maps imports through its own DRM device (dumb-buffer maps):
        // a dma-buf exported by anything but DRM (dma-heap, udmabuf, V4L2) imports "fine"
        // and then crashes the first draw (Mesa 22.3). Refuse those up front.
        let exporter = dma_buf_exporter(fd);
        if exporter.as_deref() != Some("drm") {
            return Err(Error::ImportRefused(format!(
                "kms_swrast cannot map a dma-buf exported by {}; only DRM (GBM/dumb) buffers are imported",
                exporter.as_deref().unwrap_or("an unknown exporter")
            )));
        }
    }
    let tiled = spec.modifier != DRM_FORMAT_MOD_LINEAR && spec.modifier != DRM_FORMAT_MOD_INVALID;
    // LINEAR is passed explicitly too where the display lists it (a driver whose implicit
    // default is tiled must not guess); INVALID (implicit) never is.
    let mut explicit_modifier = tiled;
    if spec.modifier == DRM_FORMAT_MOD_LINEAR && ctx.info.dma_buf_modifiers {
        explicit_modifier = supported_modifiers(ctx, spec.fourcc)
            .is_some_and(|m| m.contains(&DRM_FORMAT_MOD_LINEAR));
    }
    if tiled {
        if !ctx.info.dma_buf_modifiers {
            return Err(Error::Unsupported(format!(
                "DRM modifier {:#x} needs EGL_EXT_image_dma_buf_import_modifiers",
                spec.modifier
            )));
        }
        if let Some(mods) = supported_modifiers(ctx, spec.fourcc)
            && !mods.contains(&spec.modifier)
        {
            return Err(Error::Unsupported(format!(
                "DRM modifier {:#x} is not importable as {} on this display (supported: {:x?})",
                spec.modifier,
                fourcc_to_string(spec.fourcc),
                mods
            )));
        }
    }
    let int = |v: usize, what: &str| {
        i32::try_from(v)
            .map_err(|_| Error::InvalidLayout(format!("{what} {v} exceeds EGL's range")))
    };
    let mut attribs = vec![
        EGL_WIDTH,
        int(spec.width as usize, "width")?,
        EGL_HEIGHT,
        int(spec.height as usize, "height")?,
        EGL_LINUX_DRM_FOURCC_EXT,
        spec.fourcc as i32,
        EGL_DMA_BUF_PLANE0_FD_EXT,
        fd.as_raw_fd(),
        EGL_DMA_BUF_PLANE0_OFFSET_EXT,
        int(spec.offset, "plane offset")?,
        EGL_DMA_BUF_PLANE0_PITCH_EXT,
        int(spec.pitch, "pitch")?,
    ];
    if explicit_modifier {
        attribs.extend_from_slice(&[
            EGL_DMA_BUF_PLANE0_MODIFIER_LO_EXT,
            (spec.modifier & 0xffff_ffff) as u32 as i32,
            EGL_DMA_BUF_PLANE0_MODIFIER_HI_EXT,
            (spec.modifier >> 32) as u32 as i32,
        ]);
    }
    attribs.push(EGL_NONE);
    let display = ctx.display.raw;
    log::debug!("GL: eglCreateImage {spec:?}");
    // SAFETY: the display is initialised; EGL_LINUX_DMA_BUF_EXT takes a null client
    // buffer and no context; the attribute list is EGL_NONE-terminated and names an fd
    // that stays open for the call (EGL dups what it keeps).
    let raw = unsafe {
        (fns.create)(
            display,
            std::ptr::null_mut(),
            EGL_LINUX_DMA_BUF_EXT,
            std::ptr::null_mut(),
            attribs.as_ptr(),
        )
    };
    if raw.is_null() {
        let code = ctx
            .display
            .egl
            .inst
            .get_error()
            .map(|e| e.native())
            .unwrap_or(0);
        return Err(Error::ImportRefused(format!(
            "the driver refused to import the dma-buf as a {}x{} {} image (offset {}, pitch {}, modifier {:#x}): EGL error {code:#x}",
            spec.width,
            spec.height,
            fourcc_to_string(spec.fourcc),
            spec.offset,
            spec.pitch,
            spec.modifier
        )));
    }
    CREATED.fetch_add(1, Ordering::SeqCst);
    let image = EglImage {
        raw,
        display,
        destroy: fns.destroy,
    };
    // SAFETY: the context is current (`gl`); the texture is bound before the image is
    // attached to it and deleted on every error path (the image is dropped with it).
    unsafe {
        let texture = gl
            .create_texture()
            .map_err(|e| Error::Gl(format!("glGenTextures: {e}")))?;
        gl.bind_texture(glow::TEXTURE_2D, Some(texture));
        log::debug!("GL: glEGLImageTargetTexture2DOES");
        (fns.target_texture)(glow::TEXTURE_2D, image.raw);
        set_nearest(gl);
        gl.bind_texture(glow::TEXTURE_2D, None);
        if let Err(e) = check_error(gl, "glEGLImageTargetTexture2DOES") {
            gl.delete_texture(texture);
            return Err(e);
        }
        log::debug!("GL: image texture ready");
        let fbo = if spec.render_target {
            match framebuffer_for(gl, texture) {
                Ok(f) => Some(f),
                Err(e) => {
                    gl.delete_texture(texture);
                    return Err(e);
                }
            }
        } else {
            None
        };
        Ok(Imported {
            texture,
            fbo,
            image,
        })
    }
}

/// The exporter of a dma-buf (`exp_name` in `/proc/self/fdinfo`): `drm` for GEM buffers,
/// `system` for the system dma-heap, `udmabuf`, a V4L2 driver's allocator...
pub(crate) fn dma_buf_exporter(fd: BorrowedFd<'_>) -> Option<String> {
    let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{}", fd.as_raw_fd())).ok()?;
    info.lines()
        .find_map(|l| l.strip_prefix("exp_name:"))
        .map(|v| v.trim().to_string())
}

/// The modifiers the display imports `fourcc` with, when it can say.
fn supported_modifiers(ctx: &GlContext, fourcc: u32) -> Option<Vec<u64>> {
    let q = ctx.image_fns?.query_modifiers?;
    let display = ctx.display.raw;
    let mut n = 0i32;
    // SAFETY: a count query (max 0, null arrays) as EGL_EXT_image_dma_buf_import_modifiers allows.
    let ok = unsafe {
        q(
            display,
            fourcc as i32,
            0,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            &mut n,
        )
    };
    if ok == 0 || n < 0 {
        return None;
    }
    let mut mods = vec![0u64; n as usize];
    // SAFETY: `mods` has room for `n` modifiers; the external-only array may be null.
    let ok = unsafe {
        q(
            display,
            fourcc as i32,
            n,
            mods.as_mut_ptr(),
            std::ptr::null_mut(),
            &mut n,
        )
    };
    if ok == 0 {
        return None;
    }
    mods.truncate(n.max(0) as usize);
    Some(mods)
}

/// The DRM fourccs the display can import, when it can say (for `pinframe info`).
pub(crate) fn supported_formats(ctx: &GlContext) -> Option<Vec<u32>> {
    let q = ctx.image_fns?.query_formats?;
    let display = ctx.display.raw;
    let mut n = 0i32;
    // SAFETY: a count query (max 0, null array).
    if unsafe { q(display, 0, std::ptr::null_mut(), &mut n) } == 0 || n < 0 {
        return None;
    }
    let mut f = vec![0i32; n as usize];
    // SAFETY: `f` has room for `n` formats.
    if unsafe { q(display, n, f.as_mut_ptr(), &mut n) } == 0 {
        return None;
    }
    f.truncate(n.max(0) as usize);
    Some(f.into_iter().map(|v| v as u32).collect())
}

#[cfg(test)]
impl EglImage {
    /// An image whose destroy call is `destroy` instead of a driver's (the race test's
    /// probe); counted as created, like an imported one, so the counters stay balanced.
    fn probe(destroy: DestroyImageKhr) -> EglImage {
        CREATED.fetch_add(1, Ordering::SeqCst);
        EglImage {
            raw: std::ptr::NonNull::<u8>::dangling().as_ptr().cast(),
            display: std::ptr::null_mut(),
            destroy,
        }
    }
}

#[cfg(test)]
mod tests {
    //! DESIGN.md invariant 1 for the destroy path, on any machine: the real
    //! `EglImage::drop` runs with a probe in the driver's place, while another thread
    //! maps and unmaps tensors. No dma-buf or EGL is needed (the host has neither a
    //! dma-buf exporter nor an importing EGL display), and the probe, unlike a real
    //! driver call, can watch the mappings for as long as the race needs.

    use std::sync::Arc;
    use std::sync::atomic::AtomicBool;
    use std::time::{Duration, Instant};

    use super::*;
    use crate::testing::live_cpu_mappings;
    use crate::{Memory, Tensor};

    /// Probe destroys during which a CPU mapping was created or removed.
    static CHANGED_DURING_DESTROY: AtomicU64 = AtomicU64::new(0);

    const WINDOW: Duration = Duration::from_millis(2);

    /// True when the number of pinframe's live CPU mappings changed within `window`. Every
    /// `mmap` and `munmap` pinframe makes changes it while holding the shared side of the
    /// guard, so no change may be seen while the exclusive side is held. Sampled with
    /// short sleeps between, so that the mapping thread runs even on a busy machine.
    fn mappings_changed_within(window: Duration) -> bool {
        let first = live_cpu_mappings();
        let start = Instant::now();
        while start.elapsed() < window {
            std::thread::sleep(Duration::from_micros(50));
            if live_cpu_mappings() != first {
                return true;
            }
        }
        false
    }

    /// Stands in for a driver's `eglDestroyImage` (Adreno's unmaps the imported range
    /// in there): watches the process's CPU mappings while it "runs".
    unsafe extern "C" fn watching_destroy(_display: RawDisplay, _image: RawImage) -> u32 {
        if mappings_changed_within(WINDOW) {
            CHANGED_DURING_DESTROY.fetch_add(1, Ordering::SeqCst);
        }
        1
    }

    #[test]
    fn destroys_exclude_cpu_mappings() {
        let stop = Arc::new(AtomicBool::new(false));
        let mapper = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                // Up to 32 mapped at once, then all unmapped: the count climbs and falls
                // in long runs, so samples taken between two operations see it move.
                let mut held = Vec::new();
                let mut maps = 0u64;
                while !stop.load(Ordering::SeqCst) {
                    let t = Tensor::<u8>::new(&[4096], Some(Memory::Shm)).unwrap();
                    // The first CPU access maps the memfd; the drop unmaps it.
                    drop(t.map().unwrap());
                    held.push(t);
                    if held.len() == 32 {
                        held.clear();
                    }
                    maps += 1;
                }
                maps
            })
        };
        // Alternate: a control window outside the guard (it must see the mapper at work,
        // or the race did not happen), then a destroy (which must not).
        let deadline = Instant::now() + Duration::from_secs(30);
        let (mut control_hits, mut destroys) = (0u64, 0u64);
        while (control_hits < 20 || destroys < 100) && Instant::now() < deadline {
            if mappings_changed_within(WINDOW) {
                control_hits += 1;
            }
            drop(EglImage::probe(watching_destroy));
            destroys += 1;
        }
        stop.store(true, Ordering::SeqCst);
        let maps = mapper.join().unwrap();
        let changed = CHANGED_DURING_DESTROY.load(Ordering::SeqCst);
        eprintln!(
            "{destroys} destroys against {maps} maps and unmaps: {control_hits} control windows \
             saw mappings change, {changed} destroys did"
        );
        assert!(
            control_hits > 0,
            "the mapping thread changed no mapping in any control window ({maps} maps): the \
             race never happened, so the test proves nothing"
        );
        assert_eq!(
            changed, 0,
            "{changed} of {destroys} eglDestroyImage calls saw a CPU mapping created or removed \
             while they ran: the destroy is not inside with_cpu_mappings_excluded"
        );
    }
}
