//! Initialised EGL displays, shared process-wide and kept for the life of the process.
//!
//! An `EGLDisplay` is process-wide state: EGL hands every caller of
//! `eglGetPlatformDisplay` with the same platform and native display the same handle, and
//! `eglInitialize` is not counted (EGL_KHR_display_reference aside, which Mesa 22 lacks).
//! So whoever calls `eglTerminate` ends the display for everyone else in the process: the
//! application's own EGL work, a GStreamer GL element, and another copy of pinframe (the
//! Python module and the GStreamer plugin in one process each link their own, with their
//! own registry, so a count kept here cannot see the other copy's references). pinframe
//! therefore never terminates a display: it initialises each one once, keeps it (and the
//! native device it was made from) in this registry, and every later processor shares it.
//! A process that creates and drops processors all day reuses one display per platform;
//! contexts, surfaces and images, which are per processor, are destroyed with it.

use std::collections::HashMap;
use std::ffi::{CStr, c_char, c_void};
use std::fs::File;
use std::sync::{Arc, Mutex, OnceLock};

use khronos_egl as egl;

use super::RawDisplay;
use super::library::{Egl, has_extension};
use super::platform::{EglPlatform, NativeKind, native_candidates};
use crate::{Error, Result};

/// The native object a display was created from; kept alive as long as the display.
enum Native {
    None,
    /// Kept alive (never read) as long as the display that was created from it.
    #[allow(dead_code)]
    Gbm(gbm::Device<File>),
}

struct DisplayEntry {
    raw: usize,
    /// Kept alive as long as the display, which is the life of the process.
    _native: Arc<NativeHolder>,
}

struct NativeHolder(#[allow(dead_code)] Native);
// SAFETY: a gbm_device is used only by the EGL driver, which serialises its own access;
// pinframe never calls into it after creating the display.
unsafe impl Send for NativeHolder {}
// SAFETY: as above.
unsafe impl Sync for NativeHolder {}

fn registry() -> &'static Mutex<HashMap<String, DisplayEntry>> {
    static REG: OnceLock<Mutex<HashMap<String, DisplayEntry>>> = OnceLock::new();
    REG.get_or_init(|| Mutex::new(HashMap::new()))
}

/// An initialised EGL display and what it reports; the display itself stays initialised
/// for the life of the process (see the module docs).
pub(crate) struct DisplayRef {
    pub(crate) egl: &'static Egl,
    pub(crate) raw: RawDisplay,
    key: String,
    pub(crate) platform: EglPlatform,
    /// The DRM node behind the display, when known.
    pub(crate) node: Option<String>,
    pub(crate) version: (i32, i32),
    pub(crate) extensions: String,
    pub(crate) vendor: String,
    /// Mesa's driver name (`EGL_MESA_query_driver`), when known.
    pub(crate) driver: Option<String>,
}

// SAFETY: an EGLDisplay handle may be used from any thread (EGL 1.4 §2.7).
unsafe impl Send for DisplayRef {}

impl DisplayRef {
    pub(crate) fn display(&self) -> egl::Display {
        // SAFETY: `raw` is a display this reference keeps initialised.
        unsafe { egl::Display::from_ptr(self.raw) }
    }

    pub(crate) fn has_extension(&self, name: &str) -> bool {
        has_extension(&self.extensions, name)
    }

    /// Opens (or shares) the display of `platform`.
    pub(crate) fn open(egl: &'static Egl, platform: EglPlatform) -> Result<DisplayRef> {
        let gpd = egl.get_platform_display.ok_or_else(|| {
            Error::Gl("libEGL lacks eglGetPlatformDisplayEXT (EGL_EXT_platform_base)".into())
        })?;
        let mut reg = registry().lock().unwrap_or_else(|p| p.into_inner());
        let candidates = native_candidates(egl, platform)?;
        let mut why = Vec::new();
        for (key, native, node) in candidates {
            if let Some(entry) = reg.get(&key) {
                let raw = entry.raw as RawDisplay;
                let d = DisplayRef::describe(egl, raw, key, platform, node);
                match d.usable() {
                    Ok(()) => return Ok(d),
                    Err(e) => {
                        why.push(e);
                        continue;
                    }
                }
            }
            let (native_ptr, holder) = match native {
                NativeKind::Default => (std::ptr::null_mut(), Native::None),
                NativeKind::Device(d) => (d, Native::None),
                NativeKind::Gbm(dev) => {
                    use gbm::AsRaw;
                    (dev.as_raw() as *mut c_void, Native::Gbm(dev))
                }
            };
            let plat = platform.egl_enum();
            let attribs = [egl::NONE];
            // SAFETY: `native_ptr` is a live gbm_device, an EGLDeviceEXT from
            // eglQueryDevicesEXT, or EGL_DEFAULT_DISPLAY, matching `plat`; the attribute
            // list is NONE-terminated.
            let raw = unsafe { gpd(plat, native_ptr, attribs.as_ptr()) };
            if raw.is_null() {
                why.push(format!("{key}: {}", egl.error("eglGetPlatformDisplayEXT")));
                continue;
            }
            // SAFETY: `raw` is a display EGL just returned.
            let d = unsafe { egl::Display::from_ptr(raw) };
            // Querying a string of an uninitialised display fails (EGL_NOT_INITIALIZED):
            // if it succeeds, the application initialised this display itself.
            if egl.inst.query_string(Some(d), egl::VERSION).is_ok() {
                log::debug!("EGL display {key} was initialised by the application; sharing it");
            }
            if let Err(e) = egl.inst.initialize(d) {
                why.push(format!("{key}: eglInitialize: {e}"));
                continue;
            }
            reg.insert(
                key.clone(),
                DisplayEntry {
                    raw: raw as usize,
                    _native: Arc::new(NativeHolder(holder)),
                },
            );
            let d = DisplayRef::describe(egl, raw, key, platform, node);
            match d.usable() {
                Ok(()) => return Ok(d),
                Err(e) => why.push(e),
            }
        }
        Err(Error::Gl(if why.is_empty() {
            format!("no {platform} display found")
        } else {
            why.join("; ")
        }))
    }

    /// Rejects displays known not to work: Mesa's `kms_swrast` on a render node needs
    /// dumb buffers, which only primary nodes allow (vgem in the VM lane): the primary
    /// node (`card*`), tried later, works.
    fn usable(&self) -> std::result::Result<(), String> {
        let render_node = self.node.as_deref().is_some_and(|n| n.contains("renderD"));
        if render_node && self.driver.as_deref() == Some("kms_swrast") {
            return Err(format!(
                "{}: kms_swrast on a render node cannot allocate (dumb buffers need a primary node)",
                self.key
            ));
        }
        Ok(())
    }

    fn describe(
        egl: &'static Egl,
        raw: RawDisplay,
        key: String,
        platform: EglPlatform,
        node: Option<String>,
    ) -> DisplayRef {
        // SAFETY: `raw` is initialised and kept so by the registry count taken above.
        let d = unsafe { egl::Display::from_ptr(raw) };
        let q = |name| {
            egl.inst
                .query_string(Some(d), name)
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default()
        };
        let version_str = q(egl::VERSION);
        let mut it = version_str
            .split(|c: char| !c.is_ascii_digit())
            .filter(|s| !s.is_empty())
            .map(|s| s.parse::<i32>().unwrap_or(0));
        let version = (it.next().unwrap_or(0), it.next().unwrap_or(0));
        let driver = egl.proc_addr("eglGetDisplayDriverName").and_then(|f| {
            type DriverName = unsafe extern "C" fn(RawDisplay) -> *const c_char;
            // SAFETY: the signature EGL_MESA_query_driver specifies; `raw` is initialised;
            // the returned string is static or null.
            unsafe {
                let f = std::mem::transmute::<extern "system" fn(), DriverName>(f);
                let p = f(raw);
                (!p.is_null()).then(|| CStr::from_ptr(p).to_string_lossy().into_owned())
            }
        });
        DisplayRef {
            egl,
            raw,
            key,
            platform,
            node,
            version,
            extensions: q(egl::EXTENSIONS),
            vendor: q(egl::VENDOR),
            driver,
        }
    }
}
