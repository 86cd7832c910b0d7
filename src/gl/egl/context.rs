//! The backend's GLES 3 context (no surfaces), the facts about it ([`GlInfo`]), and
//! [`Current`]: the proof, checked by the compiler, that the context is current on this
//! thread. Every helper that issues GL calls takes a `&Current`, which is only obtainable
//! from [`GlContext::current`].
//!
//! # The caller's world is left as found (DESIGN.md invariant 9)
//!
//! An application may render with its own EGL context on the thread that calls pinframe.
//! Before making the backend's context current, [`GlContext::current`] saves the thread's
//! bound client API (`eglQueryAPI`) and, for it, the current context, display and draw and
//! read surfaces (plus the OpenGL ES binding when the caller's API is another one: ours
//! takes that slot); dropping the [`Current`] binds the caller's API again and makes the
//! caller's context and surfaces current again on the caller's display, or releases ours
//! when nothing was current. That runs on every path: success, errors (`?` drops the
//! guard) and panics unwinding through it. A guard taken while our context is already
//! current (nested) changes and restores nothing.

use std::ffi::c_void;
use std::fmt;
use std::marker::PhantomData;
use std::ops::Deref;

use khronos_egl as egl;

use super::display::DisplayRef;
use super::library::{Egl, libgles};
use super::platform::{EglPlatform, PLATFORM_ENV};
use super::{
    CreateImageKhr, DestroyImageKhr, ImageTargetTexture2dOes, QueryDmaBufFormatsExt,
    QueryDmaBufModifiersExt,
};
use crate::{Error, Result};

const EGL_CONTEXT_MINOR_VERSION: i32 = 0x30FB;

/// Facts about the GL backend's display and context, for `pinframe info` and logs.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct GlInfo {
    /// The EGL platform in use.
    pub platform: EglPlatform,
    /// The DRM node behind the display, if known.
    pub node: Option<String>,
    /// EGL version as (major, minor).
    pub egl_version: (i32, i32),
    /// `EGL_VENDOR`.
    pub egl_vendor: String,
    /// The display's EGL extensions.
    pub egl_extensions: Vec<String>,
    /// `GL_VENDOR`.
    pub gl_vendor: String,
    /// `GL_RENDERER`.
    pub gl_renderer: String,
    /// `GL_VERSION`.
    pub gl_version: String,
    /// `GL_SHADING_LANGUAGE_VERSION`.
    pub glsl_version: String,
    /// The context's GL extensions.
    pub gl_extensions: Vec<String>,
    /// `GL_MAX_TEXTURE_SIZE`.
    pub max_texture_size: u32,
    /// True when `EGL_EXT_image_dma_buf_import` is present (zero-copy sources and targets).
    pub dma_buf_import: bool,
    /// True when `EGL_EXT_image_dma_buf_import_modifiers` is present.
    pub dma_buf_modifiers: bool,
    /// DRM fourccs the display imports (when `eglQueryDmaBufFormatsEXT` can say).
    pub dma_buf_formats: Vec<String>,
}

impl fmt::Display for GlInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "EGL {}.{} ({}) on {}{}: {} / {} / {}; dma-buf import: {}{}",
            self.egl_version.0,
            self.egl_version.1,
            self.egl_vendor,
            self.platform,
            self.node
                .as_deref()
                .map(|n| format!(" {n}"))
                .unwrap_or_default(),
            self.gl_vendor,
            self.gl_renderer,
            self.gl_version,
            if self.dma_buf_import { "yes" } else { "no" },
            if self.dma_buf_modifiers {
                " (with modifiers)"
            } else {
                ""
            },
        )
    }
}

/// The EGL extension entry points of one display, resolved once.
#[derive(Clone, Copy)]
pub(crate) struct EglImageFns {
    pub(crate) create: CreateImageKhr,
    pub(crate) destroy: DestroyImageKhr,
    pub(crate) target_texture: ImageTargetTexture2dOes,
    pub(crate) query_formats: Option<QueryDmaBufFormatsExt>,
    pub(crate) query_modifiers: Option<QueryDmaBufModifiersExt>,
}

/// A GLES 3 context on a display, with no surface, plus its glow function table (reached
/// only through a [`Current`]).
pub(crate) struct GlContext {
    gl: glow::Context,
    pub(crate) display: DisplayRef,
    context: usize,
    pub(crate) info: GlInfo,
    pub(crate) image_fns: Option<EglImageFns>,
}

// SAFETY: the context is current on a thread only while a `Current` (which is neither
// `Send` nor `Sync`) borrows it there, and is released (or the caller's context made
// current again) when that guard drops, so moving the `GlContext` between threads never
// leaves it current elsewhere. glow's function table is plain function pointers.
unsafe impl Send for GlContext {}

impl GlContext {
    /// Creates a context: on `forced`, or on the platform `PINFRAME_EGL_PLATFORM`
    /// names, or on the first platform of [`EglPlatform::ALL`] that works.
    pub(crate) fn new(forced: Option<EglPlatform>) -> Result<GlContext> {
        let egl = Egl::get()?;
        let env = match std::env::var(PLATFORM_ENV) {
            Ok(v) if !v.is_empty() => Some(v.parse::<EglPlatform>()?),
            _ => None,
        };
        let order: Vec<EglPlatform> = match forced.or(env) {
            Some(p) => vec![p],
            None => EglPlatform::ALL.to_vec(),
        };
        let mut why = Vec::new();
        for p in order {
            match DisplayRef::open(egl, p).and_then(GlContext::on_display) {
                Ok(c) => {
                    log::info!("pinframe GL backend: {}", c.info);
                    return Ok(c);
                }
                Err(e) => {
                    log::debug!("EGL platform {p} unusable: {e}");
                    let msg = match e {
                        Error::Gl(m) => m,
                        other => other.to_string(),
                    };
                    why.push(format!("{p}: {msg}"));
                }
            }
        }
        Err(Error::Gl(format!(
            "no EGL platform gives a GLES 3.0 context: {}",
            why.join("; ")
        )))
    }

    fn on_display(display: DisplayRef) -> Result<GlContext> {
        let egl = display.egl;
        if !display.has_extension("EGL_KHR_surfaceless_context") {
            return Err(Error::Gl(
                "the display lacks EGL_KHR_surfaceless_context".into(),
            ));
        }
        let d = display.display();
        let config = if display.has_extension("EGL_KHR_no_config_context")
            || display.has_extension("EGL_MESA_configless_context")
        {
            // SAFETY: EGL_NO_CONFIG_KHR is the null config.
            unsafe { egl::Config::from_ptr(std::ptr::null_mut()) }
        } else {
            let attrs = [egl::RENDERABLE_TYPE, egl::OPENGL_ES3_BIT, egl::NONE];
            egl.inst
                .choose_first_config(d, &attrs)
                .map_err(|e| Error::Gl(format!("eglChooseConfig: {e}")))?
                .ok_or_else(|| Error::Gl("no EGL config supports OpenGL ES 3".into()))?
        };
        let attrs = [
            egl::CONTEXT_MAJOR_VERSION,
            3,
            EGL_CONTEXT_MINOR_VERSION,
            0,
            egl::NONE,
        ];
        // eglCreateContext creates a context of the bound API: bind OpenGL ES for the
        // call, and give the caller's binding back at once.
        let api = egl.inst.query_api();
        egl.inst
            .bind_api(egl::OPENGL_ES_API)
            .map_err(|e| Error::Gl(format!("eglBindAPI(OpenGL ES): {e}")))?;
        let created = egl.inst.create_context(d, config, None, &attrs);
        rebind_api(egl, api);
        let ctx = created.map_err(|e| Error::Gl(format!("eglCreateContext(GLES 3.0): {e}")))?;
        // Current only while the function table and the facts are loaded; the caller's
        // world is restored when `world` drops, before the context is destroyed on error.
        let loaded = match make_current(egl, d, ctx) {
            Ok(world) => {
                let loaded = load(&display);
                drop(world);
                loaded
            }
            Err(e) => Err(e),
        };
        match loaded {
            Ok((gl, info, image_fns)) => Ok(GlContext {
                gl,
                display,
                context: ctx.as_ptr() as usize,
                info,
                image_fns,
            }),
            Err(e) => {
                let _ = egl.inst.destroy_context(d, ctx);
                Err(e)
            }
        }
    }

    fn raw_context(&self) -> egl::Context {
        // SAFETY: `context` is the live context this struct owns.
        unsafe { egl::Context::from_ptr(self.context as *mut c_void) }
    }

    /// Makes the context current on this thread until the returned guard drops, saving
    /// whatever the caller had current (and its bound API) to restore it then.
    pub(crate) fn current(&self) -> Result<Current<'_>> {
        let egl = self.display.egl;
        let ours = self.raw_context();
        let world = if egl.inst.query_api() == egl::OPENGL_ES_API
            && egl.inst.get_current_context() == Some(ours)
        {
            // Nested: ours is current already (an outer guard restores the caller's).
            None
        } else {
            Some(make_current(egl, self.display.display(), ours)?)
        };
        Ok(Current {
            ctx: self,
            _world: world,
            _thread: PhantomData,
        })
    }
}

impl Drop for GlContext {
    fn drop(&mut self) {
        let d = self.display.display();
        let _ = self.display.egl.inst.destroy_context(d, self.raw_context());
    }
}

/// The function table and facts of the context current on this thread (from
/// `on_display`, which made it current).
fn load(display: &DisplayRef) -> Result<(glow::Context, GlInfo, Option<EglImageFns>)> {
    use glow::HasContext;
    let egl = display.egl;
    let gles = libgles();
    // SAFETY: the context is current (the caller made it so); the loader returns entry
    // points of that context's client API (from libGLESv2, else eglGetProcAddress).
    let gl = unsafe {
        glow::Context::from_loader_function_cstr(|name| {
            if let Some(lib) = gles {
                // SAFETY: looking up a symbol by its NUL-terminated name.
                if let Ok(sym) = lib.get::<*const c_void>(name.to_bytes_with_nul())
                    && !sym.is_null()
                {
                    return *sym;
                }
            }
            egl.proc_addr(&name.to_string_lossy())
                .map(|f| f as *const c_void)
                .unwrap_or(std::ptr::null())
        })
    };
    let mut info = GlInfo {
        platform: display.platform,
        node: display.node.clone(),
        egl_version: display.version,
        egl_vendor: display.vendor.clone(),
        egl_extensions: display
            .extensions
            .split_ascii_whitespace()
            .map(String::from)
            .collect(),
        gl_vendor: String::new(),
        gl_renderer: String::new(),
        gl_version: String::new(),
        glsl_version: String::new(),
        gl_extensions: Vec::new(),
        max_texture_size: 0,
        dma_buf_import: display.has_extension("EGL_EXT_image_dma_buf_import"),
        dma_buf_modifiers: display.has_extension("EGL_EXT_image_dma_buf_import_modifiers"),
        dma_buf_formats: Vec::new(),
    };
    // SAFETY: the context is current on this thread; string queries of a GLES context.
    unsafe {
        info.gl_vendor = gl.get_parameter_string(glow::VENDOR);
        info.gl_renderer = gl.get_parameter_string(glow::RENDERER);
        info.gl_version = gl.get_parameter_string(glow::VERSION);
        info.glsl_version = gl.get_parameter_string(glow::SHADING_LANGUAGE_VERSION);
        info.max_texture_size = gl.get_parameter_i32(glow::MAX_TEXTURE_SIZE).max(0) as u32;
    }
    let mut exts: Vec<String> = gl.supported_extensions().iter().cloned().collect();
    exts.sort();
    info.gl_extensions = exts;
    let v = gl.version();
    if !v.is_embedded || v.major < 3 {
        return Err(Error::Gl(format!(
            "context is not OpenGL ES 3.0+: {}",
            info.gl_version
        )));
    }
    let image_fns = load_image_fns(display, &info);
    Ok((gl, info, image_fns))
}

fn load_image_fns(display: &DisplayRef, info: &GlInfo) -> Option<EglImageFns> {
    if !display.has_extension("EGL_KHR_image_base") {
        return None;
    }
    let egl = display.egl;
    if !info.gl_extensions.iter().any(|e| e == "GL_OES_EGL_image") {
        return None;
    }
    // SAFETY: each pointer is transmuted to the signature its extension specifies
    // (EGL_KHR_image_base, GL_OES_EGL_image, EGL_EXT_image_dma_buf_import_modifiers).
    unsafe {
        let create = egl.proc_addr("eglCreateImageKHR")?;
        let destroy = egl.proc_addr("eglDestroyImageKHR")?;
        let target = egl.proc_addr("glEGLImageTargetTexture2DOES")?;
        Some(EglImageFns {
            create: std::mem::transmute::<extern "system" fn(), CreateImageKhr>(create),
            destroy: std::mem::transmute::<extern "system" fn(), DestroyImageKhr>(destroy),
            target_texture: std::mem::transmute::<extern "system" fn(), ImageTargetTexture2dOes>(
                target,
            ),
            query_formats: egl
                .proc_addr("eglQueryDmaBufFormatsEXT")
                .map(|f| std::mem::transmute::<extern "system" fn(), QueryDmaBufFormatsExt>(f)),
            query_modifiers: egl
                .proc_addr("eglQueryDmaBufModifiersEXT")
                .map(|f| std::mem::transmute::<extern "system" fn(), QueryDmaBufModifiersExt>(f)),
        })
    }
}

/// Proof that a [`GlContext`] is current on this thread: GL calls are made through it
/// (it dereferences to the context's `glow::Context`), and only
/// [`GlContext::current`] makes one. Neither `Send` nor `Sync`: it is a fact about
/// this thread. Dropping it restores what the caller had current.
pub(crate) struct Current<'a> {
    ctx: &'a GlContext,
    /// The caller's EGL state, put back when dropped; `None` for a nested guard.
    _world: Option<CallerWorld>,
    _thread: PhantomData<*const ()>,
}

impl Current<'_> {
    /// The context that is current.
    pub(crate) fn context(&self) -> &GlContext {
        self.ctx
    }
}

impl Deref for Current<'_> {
    type Target = glow::Context;

    fn deref(&self) -> &glow::Context {
        &self.ctx.gl
    }
}

/// What one client API's slot of this thread holds: a context, its display and surfaces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Binding {
    display: Option<egl::Display>,
    draw: Option<egl::Surface>,
    read: Option<egl::Surface>,
    context: Option<egl::Context>,
}

impl Binding {
    /// The slot of the bound API.
    fn now(egl: &Egl) -> Binding {
        Binding {
            display: egl.inst.get_current_display(),
            draw: egl.inst.get_current_surface(egl::DRAW),
            read: egl.inst.get_current_surface(egl::READ),
            context: egl.inst.get_current_context(),
        }
    }

    /// Makes this binding current again in the bound API's slot, or releases whatever is
    /// current there (ours, on `ours`) when it held nothing.
    fn restore(&self, egl: &Egl, ours: egl::Display) {
        let done = match (self.context, self.display) {
            (Some(ctx), Some(d)) => egl.inst.make_current(d, self.draw, self.read, Some(ctx)),
            _ => egl.inst.make_current(ours, None, None, None),
        };
        if let Err(e) = done {
            log::error!("pinframe GL: could not restore the caller's EGL context {self:?}: {e}");
        }
    }
}

/// The caller's EGL state on this thread before pinframe made its context current, put
/// back (bound API, context, display, surfaces) when dropped.
struct CallerWorld {
    egl: &'static Egl,
    /// Our display, to release our context on when the caller had none current.
    ours: egl::Display,
    /// The caller's bound API (`eglQueryAPI`).
    api: egl::Enum,
    /// The caller's API's slot.
    caller: Binding,
    /// The OpenGL ES slot, saved apart when the caller's API is another one (ours takes it).
    es: Option<Binding>,
}

impl Drop for CallerWorld {
    fn drop(&mut self) {
        match self.es {
            None => self.caller.restore(self.egl, self.ours),
            Some(es) => {
                es.restore(self.egl, self.ours);
                rebind_api(self.egl, self.api);
                // Where EGL keeps one slot for every API (Mesa, glvnd), restoring the ES
                // slot replaced the caller's binding: put it back in its own API.
                if self.caller.context.is_some() {
                    self.caller.restore(self.egl, self.ours);
                }
            }
        }
    }
}

/// Saves the caller's world, binds OpenGL ES and makes `ctx` current on `display` with no
/// surfaces. On failure the caller's world is already back.
fn make_current(
    egl: &'static Egl,
    display: egl::Display,
    ctx: egl::Context,
) -> Result<CallerWorld> {
    let api = egl.inst.query_api();
    let caller = Binding::now(egl);
    let mut world = CallerWorld {
        egl,
        ours: display,
        api,
        caller,
        es: None,
    };
    if api != egl::OPENGL_ES_API {
        egl.inst
            .bind_api(egl::OPENGL_ES_API)
            .map_err(|e| Error::Gl(format!("eglBindAPI(OpenGL ES): {e}")))?;
        world.es = Some(Binding::now(egl));
    }
    egl.inst
        .make_current(display, None, None, Some(ctx))
        .map_err(|e| {
            Error::Gl(format!(
                "eglMakeCurrent: {e} (is the context current on another thread?)"
            ))
        })?;
    Ok(world)
}

/// Binds `api` again (the caller's), saying so if EGL refuses.
fn rebind_api(egl: &Egl, api: egl::Enum) {
    if egl.inst.query_api() != api
        && let Err(e) = egl.inst.bind_api(api)
    {
        log::error!("pinframe GL: could not bind the caller's EGL API {api:#x} again: {e}");
    }
}

#[cfg(test)]
mod tests {
    //! The guard's own paths on the host: a panic unwinding through it, nesting, and the
    //! caller's context (here another pinframe context, made current by hand) current
    //! again afterwards. `tests/gl_caller.rs` covers callers with their own displays,
    //! surfaces, APIs and GL state through the public API.

    use super::*;

    fn context(test: &str) -> Option<GlContext> {
        match GlContext::new(None) {
            Ok(c) => Some(c),
            Err(e) if std::env::var("CI").is_ok_and(|v| v == "true" || v == "1") => {
                panic!("{test}: no GL context under CI=true: {e}")
            }
            Err(e) => {
                eprintln!("SKIPPED {test}: no GL context: {e}");
                None
            }
        }
    }

    #[test]
    fn a_panic_nesting_and_errors_leave_the_callers_context_current() {
        let test = "a_panic_nesting_and_errors_leave_the_callers_context_current";
        let (Some(caller), Some(ours)) = (context(test), context(test)) else {
            return;
        };
        let egl = caller.display.egl;
        let current = || egl.inst.get_current_context();
        // The "application's" context, made current without a guard.
        egl.inst
            .make_current(
                caller.display.display(),
                None,
                None,
                Some(caller.raw_context()),
            )
            .unwrap();
        assert_eq!(current(), Some(caller.raw_context()));

        let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _cur = ours.current().unwrap();
            assert_eq!(current(), Some(ours.raw_context()));
            panic!("a panic while pinframe's context is current");
        }));
        assert!(unwound.is_err());
        assert_eq!(current(), Some(caller.raw_context()), "after a panic");

        {
            let outer = ours.current().unwrap();
            let inner = ours.current().unwrap();
            assert!(inner._world.is_none(), "a nested guard saves nothing");
            drop(inner);
            assert_eq!(
                current(),
                Some(ours.raw_context()),
                "after the nested guard"
            );
            drop(outer);
        }
        assert_eq!(current(), Some(caller.raw_context()), "after nesting");

        // An error on the way in (`?` in a caller) leaves it current too.
        let failing = || -> Result<()> {
            let _cur = ours.current()?;
            Err(Error::Gl(
                "an error while pinframe's context is current".into(),
            ))
        };
        assert!(failing().is_err());
        assert_eq!(current(), Some(caller.raw_context()), "after an error");
        assert_eq!(egl.inst.query_api(), egl::OPENGL_ES_API);

        egl.inst
            .make_current(caller.display.display(), None, None, None)
            .unwrap();
    }
}
