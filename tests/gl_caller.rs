//! DESIGN.md invariant 9 on the host (Mesa llvmpipe): the caller's EGL world is left as
//! found. Each test makes an EGL context of its own current on the test's thread (as an
//! application rendering with EGL would), gives it some GL state, runs pinframe on GL
//! (creating the processor, converting successfully, failing before and after pinframe's
//! context is current, dropping the processor) and asserts after every step that the
//! bound API, the current context, display and draw/read surfaces are the caller's
//! again, and that its GL state and pixels are intact.
//!
//! pinframe is forced onto the surfaceless platform; callers sit on the EGL device
//! platform (Mesa's software device: another display) or on that same surfaceless
//! display, with an OpenGL ES or a desktop OpenGL context.
//!
//! When EGL or GL cannot start these tests print SKIPPED with the reason, except under
//! `CI=true`, where that is a failure.
#![cfg(feature = "gl")]

mod common;
#[path = "common/reference.rs"]
mod reference;

use std::ffi::c_void;
use std::sync::{Mutex, MutexGuard, OnceLock};

use glow::HasContext;
use khronos_egl as egl;
use pinframe::{
    Backend, ConvertOptions, EglPlatform, Error, GlConfig, ImageLayout, ImageProcessor, Memory,
    PixelFormat, Tensor,
};
use reference::Rng;

type Egl = egl::DynamicInstance<egl::EGL1_5>;

const EGL_PLATFORM_DEVICE_EXT: egl::Enum = 0x313F;
const EGL_PLATFORM_SURFACELESS_MESA: egl::Enum = 0x31DD;
const EGL_CONTEXT_MAJOR_VERSION: egl::Int = 0x3098;

/// libEGL for the test's own EGL calls, or why not.
fn egl() -> Result<&'static Egl, String> {
    static EGL: OnceLock<Result<Egl, String>> = OnceLock::new();
    EGL.get_or_init(|| {
        // SAFETY: loads the system's libEGL (EGL 1.5, Mesa), whose ABI khronos-egl declares.
        unsafe { Egl::load_required_from_filename("libEGL.so.1") }.map_err(|e| e.to_string())
    })
    .as_ref()
    .map_err(Clone::clone)
}

/// pinframe's EGL displays are shared process-wide: one test at a time, so that the
/// processor a test drops is the last one on its display (what the display test needs).
fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Skips (outside CI) or fails (under CI) a test that cannot set up EGL.
fn unavailable(test: &str, why: impl std::fmt::Display) {
    if common::under_ci() {
        panic!("{test}: cannot set up the caller's EGL context: {why}");
    }
    eprintln!("SKIPPED {test}: cannot set up the caller's EGL context: {why}");
}

/// Where the caller's context lives.
#[derive(Clone, Copy, Debug)]
enum CallerDisplay {
    /// The EGL device platform's first device (another display than pinframe's).
    Device,
    /// The surfaceless platform's default display: the very one pinframe uses.
    Surfaceless,
}

/// The caller's EGL objects: a display it initialised, maybe a pbuffer, a context.
struct Caller {
    egl: &'static Egl,
    display: egl::Display,
    surface: Option<egl::Surface>,
    context: egl::Context,
    api: egl::Enum,
    gl: glow::Context,
    /// The caller's texture and framebuffer (bound while pinframe runs).
    texture: glow::Texture,
    framebuffer: glow::Framebuffer,
}

fn platform_display(egl: &Egl, on: CallerDisplay) -> Result<egl::Display, String> {
    match on {
        CallerDisplay::Surfaceless => {
            // SAFETY: EGL_DEFAULT_DISPLAY (null) is the native display of Mesa's
            // surfaceless platform; the attribute list is empty.
            unsafe {
                egl.get_platform_display(
                    EGL_PLATFORM_SURFACELESS_MESA,
                    std::ptr::null_mut(),
                    &[egl::ATTRIB_NONE],
                )
            }
            .map_err(|e| format!("eglGetPlatformDisplay(surfaceless): {e}"))
        }
        CallerDisplay::Device => {
            type QueryDevices = unsafe extern "C" fn(i32, *mut *mut c_void, *mut i32) -> u32;
            let f = egl
                .get_proc_address("eglQueryDevicesEXT")
                .ok_or("no eglQueryDevicesEXT")?;
            // SAFETY: the signature EGL_EXT_device_enumeration specifies.
            let query = unsafe { std::mem::transmute::<extern "system" fn(), QueryDevices>(f) };
            let mut devices = [std::ptr::null_mut::<c_void>(); 8];
            let mut n = 0;
            // SAFETY: room for 8 device handles; `n` receives the count.
            if unsafe { query(8, devices.as_mut_ptr(), &mut n) } == 0 || n < 1 {
                return Err("eglQueryDevicesEXT found no device".into());
            }
            // SAFETY: an EGLDeviceEXT from eglQueryDevicesEXT is the device platform's
            // native display; the attribute list is empty.
            unsafe {
                egl.get_platform_display(EGL_PLATFORM_DEVICE_EXT, devices[0], &[egl::ATTRIB_NONE])
            }
            .map_err(|e| format!("eglGetPlatformDisplay(device): {e}"))
        }
    }
}

impl Caller {
    /// Makes a context of `api` on `on` current on this thread, with a 16x16 pbuffer as
    /// its draw and read surface when `pbuffer`, and gives it GL state of its own.
    fn new(on: CallerDisplay, api: egl::Enum, pbuffer: bool) -> Result<Caller, String> {
        let egl = egl()?;
        let display = platform_display(egl, on)?;
        egl.initialize(display)
            .map_err(|e| format!("eglInitialize: {e}"))?;
        let renderable = if api == egl::OPENGL_API {
            egl::OPENGL_BIT
        } else {
            egl::OPENGL_ES3_BIT
        };
        let surface_type = if pbuffer { egl::PBUFFER_BIT } else { 0 };
        let attrs = [
            egl::RENDERABLE_TYPE,
            renderable,
            egl::SURFACE_TYPE,
            surface_type,
            egl::NONE,
        ];
        let config = egl
            .choose_first_config(display, &attrs)
            .map_err(|e| format!("eglChooseConfig: {e}"))?
            .ok_or("no EGL config for the caller")?;
        let surface = if pbuffer {
            let a = [egl::WIDTH, 16, egl::HEIGHT, 16, egl::NONE];
            Some(
                egl.create_pbuffer_surface(display, config, &a)
                    .map_err(|e| format!("eglCreatePbufferSurface: {e}"))?,
            )
        } else {
            None
        };
        egl.bind_api(api).map_err(|e| format!("eglBindAPI: {e}"))?;
        let ctx_attrs: &[egl::Int] = if api == egl::OPENGL_ES_API {
            &[EGL_CONTEXT_MAJOR_VERSION, 3, egl::NONE]
        } else {
            &[egl::NONE]
        };
        let context = egl
            .create_context(display, config, None, ctx_attrs)
            .map_err(|e| format!("eglCreateContext: {e}"))?;
        egl.make_current(display, surface, surface, Some(context))
            .map_err(|e| format!("eglMakeCurrent: {e}"))?;
        // SAFETY: the caller's context is current; the loader returns its entry points.
        let gl = unsafe {
            glow::Context::from_loader_function(|name| {
                egl.get_proc_address(name)
                    .map_or(std::ptr::null(), |f| f as *const c_void)
            })
        };
        // SAFETY: the caller's context is current; the objects made here are its own.
        let (texture, framebuffer) = unsafe {
            if surface.is_some() {
                // The pbuffer (default framebuffer) holds one colour...
                gl.bind_framebuffer(glow::FRAMEBUFFER, None);
                gl.viewport(0, 0, 16, 16);
                gl.clear_color(0.0, 1.0, 0.0, 1.0);
                gl.clear(glow::COLOR_BUFFER_BIT);
            }
            // ...its own framebuffer object another.
            let texture = gl.create_texture()?;
            gl.active_texture(glow::TEXTURE3);
            gl.bind_texture(glow::TEXTURE_2D, Some(texture));
            gl.tex_storage_2d(glow::TEXTURE_2D, 1, glow::RGBA8, 4, 4);
            let framebuffer = gl.create_framebuffer()?;
            gl.bind_framebuffer(glow::FRAMEBUFFER, Some(framebuffer));
            gl.framebuffer_texture_2d(
                glow::FRAMEBUFFER,
                glow::COLOR_ATTACHMENT0,
                glow::TEXTURE_2D,
                Some(texture),
                0,
            );
            gl.viewport(0, 0, 4, 4);
            gl.clear_color(0.25, 0.5, 0.75, 1.0);
            gl.clear(glow::COLOR_BUFFER_BIT);
            gl.finish();
            // State pinframe must not touch: an odd viewport, the clear colour above,
            // texture unit 3 active with the texture bound, the framebuffer bound.
            gl.viewport(1, 2, 3, 4);
            (texture, framebuffer)
        };
        Ok(Caller {
            egl,
            display,
            surface,
            context,
            api,
            gl,
            texture,
            framebuffer,
        })
    }

    /// Asserts that the caller's world is current again after `what`.
    fn assert_intact(&self, what: &str) {
        let egl = self.egl;
        assert_eq!(
            World::now(egl),
            World {
                api: self.api,
                display: Some(self.display),
                draw: self.surface,
                read: self.surface,
                context: Some(self.context),
            },
            "after {what}: the caller's EGL world is not current again"
        );
        let gl = &self.gl;
        // SAFETY: the caller's context is current again (asserted above).
        unsafe {
            let mut clear = [0.0f32; 4];
            gl.get_parameter_f32_slice(glow::COLOR_CLEAR_VALUE, &mut clear);
            assert_eq!(clear, [0.25, 0.5, 0.75, 1.0], "after {what}: clear colour");
            let mut viewport = [0i32; 4];
            gl.get_parameter_i32_slice(glow::VIEWPORT, &mut viewport);
            assert_eq!(viewport, [1, 2, 3, 4], "after {what}: viewport");
            assert_eq!(
                gl.get_parameter_i32(glow::ACTIVE_TEXTURE) as u32,
                glow::TEXTURE3,
                "after {what}: active texture unit"
            );
            assert_eq!(
                gl.get_parameter_texture(glow::TEXTURE_BINDING_2D),
                Some(self.texture),
                "after {what}: bound texture"
            );
            assert_eq!(
                gl.get_parameter_framebuffer(glow::FRAMEBUFFER_BINDING),
                Some(self.framebuffer),
                "after {what}: bound framebuffer"
            );
            assert_eq!(
                self.pixel(),
                [64, 128, 191, 255],
                "after {what}: its pixels"
            );
            if self.surface.is_some() {
                gl.bind_framebuffer(glow::FRAMEBUFFER, None);
                let surface = self.pixel();
                gl.bind_framebuffer(glow::FRAMEBUFFER, Some(self.framebuffer));
                assert_eq!(
                    surface,
                    [0, 255, 0, 255],
                    "after {what}: the pbuffer's pixels"
                );
            }
            assert_eq!(gl.get_error(), glow::NO_ERROR, "after {what}: GL error");
        }
    }

    /// The pixel at (0, 0) of the bound framebuffer.
    fn pixel(&self) -> [u8; 4] {
        let mut px = [0u8; 4];
        // SAFETY: the caller's context is current; 4 bytes receive one RGBA8 pixel.
        unsafe {
            self.gl.read_pixels(
                0,
                0,
                1,
                1,
                glow::RGBA,
                glow::UNSIGNED_BYTE,
                glow::PixelPackData::Slice(Some(&mut px)),
            )
        };
        px
    }
}

impl Drop for Caller {
    fn drop(&mut self) {
        // SAFETY: the caller's context is current (or the calls fail harmlessly).
        unsafe {
            self.gl.delete_framebuffer(self.framebuffer);
            self.gl.delete_texture(self.texture);
        }
        let _ = self.egl.make_current(self.display, None, None, None);
        let _ = self.egl.destroy_context(self.display, self.context);
        if let Some(s) = self.surface {
            let _ = self.egl.destroy_surface(self.display, s);
        }
        let _ = self.egl.bind_api(egl::OPENGL_ES_API);
    }
}

/// The thread's EGL state.
#[derive(Debug, PartialEq, Eq)]
struct World {
    api: egl::Enum,
    display: Option<egl::Display>,
    draw: Option<egl::Surface>,
    read: Option<egl::Surface>,
    context: Option<egl::Context>,
}

impl World {
    fn now(egl: &Egl) -> World {
        World {
            api: egl.query_api(),
            display: egl.get_current_display(),
            draw: egl.get_current_surface(egl::DRAW),
            read: egl.get_current_surface(egl::READ),
            context: egl.get_current_context(),
        }
    }
}

fn surfaceless() -> GlConfig {
    GlConfig {
        platform: Some(EglPlatform::Surfaceless),
        ..GlConfig::default()
    }
}

/// Runs pinframe on GL through every path with `check` after each step: creation, a
/// tensor conversion and a byte conversion (both checked against the CPU), an error
/// before pinframe's context is current, an error after it is (a source wider than the
/// context's textures), and the drop. Err when pinframe's GL cannot start here.
fn exercise(check: &dyn Fn(&str)) -> Result<(), Error> {
    let g = ImageProcessor::with_gl_config(Backend::Gl, surfaceless())?;
    check("creating the processor");
    steps(g, check).unwrap();
    check("dropping the processor");
    Ok(())
}

/// The steps of `exercise` after the processor's creation (it is dropped at the end).
fn steps(mut g: ImageProcessor, check: &dyn Fn(&str)) -> Result<(), Error> {
    let mut c = ImageProcessor::with_backend(Backend::Cpu)?;
    let mut rng = Rng::new(21);
    let mut src = Tensor::<u8>::image(32, 16, PixelFormat::Yuyv, Some(Memory::Heap))?;
    src.map_mut()?.iter_mut().for_each(|b| *b = rng.byte());
    let mut dst = Tensor::<u8>::image(20, 12, PixelFormat::Rgb, Some(Memory::Shm))?;
    let mut want = Tensor::<u8>::image(20, 12, PixelFormat::Rgb, Some(Memory::Heap))?;
    g.convert(&src, &mut dst)?;
    check("a conversion");
    c.convert(&src, &mut want)?;
    let (got, exp) = (dst.map()?.to_vec(), want.map()?.to_vec());
    let worst = got
        .iter()
        .zip(&exp)
        .map(|(a, b)| a.abs_diff(*b))
        .max()
        .unwrap_or(0);
    assert!(worst <= 1, "GL vs CPU differ by {worst}");

    let sl = ImageLayout::new(8, 8, PixelFormat::Rgba)?;
    let bytes: Vec<u8> = (0..sl.allocation_len(0)).map(|i| i as u8).collect();
    let dl = ImageLayout::new(8, 8, PixelFormat::Rgba)?;
    let mut out = vec![0u8; dl.allocation_len(0)];
    g.convert_buffers(&[&bytes], &sl, &mut out, &dl, &ConvertOptions::default())?;
    check("a conversion of bytes");
    assert!(
        out.chunks(4)
            .zip(bytes.chunks(4))
            .all(|(o, i)| o[..3] == i[..3])
    );

    let planar = Tensor::<u8>::image(8, 8, PixelFormat::PlanarRgb, Some(Memory::Heap))?;
    assert!(g.convert(&planar, &mut dst).is_err());
    check("an error before pinframe's context is current");

    let max = g.gl_info().map(|i| i.max_texture_size).unwrap_or(0);
    if max < pinframe::image::MAX_DIMENSION {
        let wide = Tensor::<u8>::image(max + 2, 1, PixelFormat::Grey, Some(Memory::Heap))?;
        let e = g.convert(&wide, &mut dst).unwrap_err();
        assert!(e.to_string().contains("texture"), "{e}");
        check("an error while pinframe's context is current");
    }
    let _ = g.gl_stats();
    check("reading the GL stats (which prunes the image cache)");
    Ok(())
}

/// Sets up the caller, runs `exercise` with its checks, or skips with the reason.
fn run(test: &str, on: CallerDisplay, api: egl::Enum, pbuffer: bool) -> Option<Caller> {
    let caller = match Caller::new(on, api, pbuffer) {
        Ok(c) => c,
        Err(e) => {
            unavailable(test, e);
            return None;
        }
    };
    caller.assert_intact("setting the caller up");
    if let Err(e) = exercise(&|what| caller.assert_intact(what)) {
        unavailable(test, format!("pinframe's GL backend: {e}"));
        return None;
    }
    Some(caller)
}

#[test]
fn a_gles_context_on_another_display_with_a_pbuffer_is_current_again() {
    let _s = serial();
    run(
        "a_gles_context_on_another_display_with_a_pbuffer_is_current_again",
        CallerDisplay::Device,
        egl::OPENGL_ES_API,
        true,
    );
}

#[test]
fn a_desktop_gl_context_and_its_bound_api_are_current_again() {
    let _s = serial();
    run(
        "a_desktop_gl_context_and_its_bound_api_are_current_again",
        CallerDisplay::Device,
        egl::OPENGL_API,
        true,
    );
}

#[test]
fn a_context_on_pinframes_own_display_survives_the_processor() {
    let test = "a_context_on_pinframes_own_display_survives_the_processor";
    let _s = serial();
    let Some(caller) = run(test, CallerDisplay::Surfaceless, egl::OPENGL_ES_API, false) else {
        return;
    };
    // The display is the caller's (it initialised it first): pinframe shared it and, on
    // dropping its last processor, left it initialised.
    assert!(
        caller
            .egl
            .query_string(Some(caller.display), egl::VERSION)
            .is_ok(),
        "pinframe terminated the caller's EGL display"
    );
    // A second processor after the first is gone, while the caller's context is current.
    let mut g = ImageProcessor::with_gl_config(Backend::Gl, surfaceless()).unwrap();
    let src = Tensor::<u8>::image(4, 4, PixelFormat::Grey, Some(Memory::Heap)).unwrap();
    let mut dst = Tensor::<u8>::image(4, 4, PixelFormat::Rgba, Some(Memory::Heap)).unwrap();
    g.convert(&src, &mut dst).unwrap();
    drop(g);
    caller.assert_intact("a second processor");
}

#[test]
fn nothing_current_stays_nothing_current_and_the_api_stays_bound() {
    let test = "nothing_current_stays_nothing_current_and_the_api_stays_bound";
    let _s = serial();
    let egl = match egl() {
        Ok(e) => e,
        Err(e) => return unavailable(test, e),
    };
    for api in [egl::OPENGL_ES_API, egl::OPENGL_API] {
        egl.bind_api(api).unwrap();
        let before = World::now(egl);
        assert_eq!(before.context, None);
        let check = |what: &str| {
            assert_eq!(World::now(egl), before, "after {what} (API {api:#x})");
        };
        if let Err(e) = exercise(&check) {
            return unavailable(test, format!("pinframe's GL backend: {e}"));
        }
    }
    egl.bind_api(egl::OPENGL_ES_API).unwrap();
}
