//! libEGL (and libGLESv2) loaded at run time, once per process, with the client
//! extensions and the extension entry points resolved at load.

use std::ffi::{c_char, c_void};
use std::sync::OnceLock;

use khronos_egl as egl;

use super::RawDisplay;
use crate::{Error, Result};

pub(super) type GetPlatformDisplayExt =
    unsafe extern "C" fn(u32, *mut c_void, *const i32) -> RawDisplay;
pub(super) type QueryDevicesExt = unsafe extern "C" fn(i32, *mut *mut c_void, *mut i32) -> u32;
pub(super) type QueryDeviceStringExt = unsafe extern "C" fn(*mut c_void, i32) -> *const c_char;

/// libEGL, loaded once per process, with the client-extension entry points.
pub(crate) struct Egl {
    pub(crate) inst: egl::DynamicInstance<egl::EGL1_4>,
    client_extensions: String,
    pub(super) get_platform_display: Option<GetPlatformDisplayExt>,
    pub(super) query_devices: Option<QueryDevicesExt>,
    pub(super) query_device_string: Option<QueryDeviceStringExt>,
}

// SAFETY: the instance holds the loaded library and function pointers, which every
// thread may call; EGL entry points are thread-safe by specification (EGL 1.4 §2.7).
unsafe impl Send for Egl {}
// SAFETY: as above; nothing in `Egl` is mutated after loading.
unsafe impl Sync for Egl {}

impl Egl {
    /// The process-wide EGL library, loaded on first use.
    pub(crate) fn get() -> Result<&'static Egl> {
        static EGL: OnceLock<std::result::Result<Egl, String>> = OnceLock::new();
        EGL.get_or_init(Egl::load)
            .as_ref()
            .map_err(|e| Error::Gl(e.clone()))
    }

    fn load() -> std::result::Result<Egl, String> {
        // SAFETY: loads the system's libEGL, which implements the EGL ABI the crate
        // declares; no function is called before the symbols are resolved.
        let inst = unsafe {
            egl::DynamicInstance::<egl::EGL1_4>::load_required_from_filename("libEGL.so.1").or_else(
                |_| egl::DynamicInstance::<egl::EGL1_4>::load_required_from_filename("libEGL.so"),
            )
        }
        .map_err(|e| format!("cannot load libEGL.so.1 (EGL 1.4+): {e}"))?;
        // Client extensions: queried with EGL_NO_DISPLAY (EGL_EXT_client_extensions).
        // SAFETY: a null display is how client extensions are queried; the returned
        // string, if any, is static and NUL-terminated.
        let client_extensions = inst
            .query_string(None, egl::EXTENSIONS)
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut me = Egl {
            inst,
            client_extensions,
            get_platform_display: None,
            query_devices: None,
            query_device_string: None,
        };
        // SAFETY: the transmuted types are the signatures EGL_EXT_platform_base and
        // EGL_EXT_device_query specify for these entry points.
        unsafe {
            me.get_platform_display = me
                .proc_addr("eglGetPlatformDisplayEXT")
                .map(|f| std::mem::transmute::<extern "system" fn(), GetPlatformDisplayExt>(f));
            me.query_devices = me
                .proc_addr("eglQueryDevicesEXT")
                .map(|f| std::mem::transmute::<extern "system" fn(), QueryDevicesExt>(f));
            me.query_device_string = me
                .proc_addr("eglQueryDeviceStringEXT")
                .map(|f| std::mem::transmute::<extern "system" fn(), QueryDeviceStringExt>(f));
        }
        Ok(me)
    }

    pub(crate) fn proc_addr(&self, name: &str) -> Option<extern "system" fn()> {
        self.inst.get_proc_address(name)
    }

    pub(crate) fn has_client_extension(&self, name: &str) -> bool {
        has_extension(&self.client_extensions, name)
    }

    pub(super) fn error(&self, what: &str) -> Error {
        match self.inst.get_error() {
            Some(e) => Error::Gl(format!("{what}: {e} ({:#x})", e.native())),
            None => Error::Gl(format!("{what} failed")),
        }
    }
}

/// True if the space-separated `list` contains `name` as a whole word.
pub(crate) fn has_extension(list: &str, name: &str) -> bool {
    list.split_ascii_whitespace().any(|e| e == name)
}

/// libGLESv2, loaded once (core entry points; eglGetProcAddress is the fallback).
pub(crate) fn libgles() -> Option<&'static libloading::Library> {
    static LIB: OnceLock<Option<libloading::Library>> = OnceLock::new();
    LIB.get_or_init(|| {
        // SAFETY: loading the system's GLES library runs its initialisers only.
        unsafe { libloading::Library::new("libGLESv2.so.2").ok() }
    })
    .as_ref()
}
