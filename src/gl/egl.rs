//! EGL: loading libEGL at run time, choosing a display (GBM → device → surfaceless),
//! creating a GLES 3 context without surfaces, and the extension entry points the
//! backend needs.
//!
//! Displays are shared process-wide and reference counted (`eglInitialize` is not
//! counted by EGL itself, so two processors on the same native display must not
//! terminate it under each other's feet): the last [`DisplayRef`] terminates it.

use std::collections::HashMap;
use std::ffi::{CStr, c_char, c_void};
use std::fmt;
use std::fs::File;
use std::str::FromStr;
use std::sync::{Arc, Mutex, OnceLock};

use khronos_egl as egl;

use crate::{Error, Result};

pub(crate) type RawDisplay = *mut c_void;
pub(crate) type RawImage = *mut c_void;

pub(crate) const EGL_PLATFORM_GBM_KHR: u32 = 0x31D7;
pub(crate) const EGL_PLATFORM_DEVICE_EXT: u32 = 0x313F;
pub(crate) const EGL_PLATFORM_SURFACELESS_MESA: u32 = 0x31DD;
const EGL_DRM_DEVICE_FILE_EXT: i32 = 0x3233;
const EGL_DRM_RENDER_NODE_FILE_EXT: i32 = 0x3377;
const EGL_CONTEXT_MINOR_VERSION: i32 = 0x30FB;

type GetPlatformDisplayExt = unsafe extern "C" fn(u32, *mut c_void, *const i32) -> RawDisplay;
type QueryDevicesExt = unsafe extern "C" fn(i32, *mut *mut c_void, *mut i32) -> u32;
type QueryDeviceStringExt = unsafe extern "C" fn(*mut c_void, i32) -> *const c_char;
pub(crate) type CreateImageKhr =
    unsafe extern "C" fn(RawDisplay, *mut c_void, u32, *mut c_void, *const i32) -> RawImage;
pub(crate) type DestroyImageKhr = unsafe extern "C" fn(RawDisplay, RawImage) -> u32;
pub(crate) type ImageTargetTexture2dOes = unsafe extern "C" fn(u32, RawImage);
pub(crate) type QueryDmaBufFormatsExt =
    unsafe extern "C" fn(RawDisplay, i32, *mut i32, *mut i32) -> u32;
pub(crate) type QueryDmaBufModifiersExt =
    unsafe extern "C" fn(RawDisplay, i32, i32, *mut u64, *mut u32, *mut i32) -> u32;

/// Environment variable that forces one EGL platform: `gbm`, `device` or `surfaceless`.
pub const PLATFORM_ENV: &str = "PINFRAME_EGL_PLATFORM";

/// An EGL platform the GL backend can run on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum EglPlatform {
    /// GBM on a DRM render node (`/dev/dri/renderD*`): the usual choice on an embedded GPU.
    Gbm,
    /// The EGL device platform (`EGL_EXT_platform_device`), e.g. NVIDIA without a display.
    Device,
    /// Mesa's surfaceless platform (`EGL_MESA_platform_surfaceless`), which also runs
    /// headless on the CPU (llvmpipe).
    Surfaceless,
}

impl EglPlatform {
    /// Every platform, in the order they are tried.
    pub const ALL: [EglPlatform; 3] = [
        EglPlatform::Gbm,
        EglPlatform::Device,
        EglPlatform::Surfaceless,
    ];

    /// Lowercase name (`gbm`, `device`, `surfaceless`).
    pub const fn name(self) -> &'static str {
        match self {
            EglPlatform::Gbm => "gbm",
            EglPlatform::Device => "device",
            EglPlatform::Surfaceless => "surfaceless",
        }
    }
}

impl fmt::Display for EglPlatform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for EglPlatform {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "gbm" => Ok(EglPlatform::Gbm),
            "device" => Ok(EglPlatform::Device),
            "surfaceless" => Ok(EglPlatform::Surfaceless),
            _ => Err(Error::InvalidArgument(format!(
                "unknown EGL platform {s:?}; expected gbm, device or surfaceless"
            ))),
        }
    }
}

/// libEGL, loaded once per process, with the client-extension entry points.
pub(crate) struct Egl {
    pub(crate) inst: egl::DynamicInstance<egl::EGL1_4>,
    client_extensions: String,
    get_platform_display: Option<GetPlatformDisplayExt>,
    query_devices: Option<QueryDevicesExt>,
    query_device_string: Option<QueryDeviceStringExt>,
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

    fn error(&self, what: &str) -> Error {
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

/// The native object a display was created from; kept alive as long as the display.
enum Native {
    None,
    /// Kept alive (never read) as long as the display that was created from it.
    #[allow(dead_code)]
    Gbm(gbm::Device<File>),
}

struct DisplayEntry {
    raw: usize,
    refs: usize,
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

/// A counted reference to an initialised EGL display; the last one terminates it.
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
    /// Already released under the registry lock (by `release_locked`).
    released: bool,
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
    fn open(egl: &'static Egl, platform: EglPlatform) -> Result<DisplayRef> {
        let gpd = egl.get_platform_display.ok_or_else(|| {
            Error::Gl("libEGL lacks eglGetPlatformDisplayEXT (EGL_EXT_platform_base)".into())
        })?;
        let mut reg = registry().lock().unwrap_or_else(|p| p.into_inner());
        let candidates = native_candidates(egl, platform)?;
        let mut why = Vec::new();
        for (key, native, node) in candidates {
            if let Some(entry) = reg.get_mut(&key) {
                entry.refs += 1;
                let raw = entry.raw as RawDisplay;
                let d = DisplayRef::describe(egl, raw, key, platform, node);
                match d.usable() {
                    Ok(()) => return Ok(d),
                    Err(e) => {
                        why.push(e);
                        release_locked(&mut reg, d);
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
            let plat = match platform {
                EglPlatform::Gbm => EGL_PLATFORM_GBM_KHR,
                EglPlatform::Device => EGL_PLATFORM_DEVICE_EXT,
                EglPlatform::Surfaceless => EGL_PLATFORM_SURFACELESS_MESA,
            };
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
            if let Err(e) = egl.inst.initialize(d) {
                why.push(format!("{key}: eglInitialize: {e}"));
                continue;
            }
            reg.insert(
                key.clone(),
                DisplayEntry {
                    raw: raw as usize,
                    refs: 1,
                    _native: Arc::new(NativeHolder(holder)),
                },
            );
            let d = DisplayRef::describe(egl, raw, key, platform, node);
            match d.usable() {
                Ok(()) => return Ok(d),
                Err(e) => {
                    why.push(e);
                    release_locked(&mut reg, d);
                }
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
            released: false,
        }
    }
}

/// Releases `d` while the registry lock is already held.
fn release_locked(reg: &mut HashMap<String, DisplayEntry>, mut d: DisplayRef) {
    d.release(reg);
    d.released = true;
}

impl DisplayRef {
    fn release(&self, reg: &mut HashMap<String, DisplayEntry>) {
        let last = match reg.get_mut(&self.key) {
            Some(e) => {
                e.refs -= 1;
                e.refs == 0
            }
            None => false,
        };
        if last {
            // Terminate while holding the registry lock so that no one re-opens the
            // same native display half-way through.
            let _ = self.egl.inst.terminate(self.display());
            reg.remove(&self.key);
        }
    }
}

impl Drop for DisplayRef {
    fn drop(&mut self) {
        if self.released {
            return;
        }
        let mut reg = registry().lock().unwrap_or_else(|p| p.into_inner());
        self.release(&mut reg);
    }
}

enum NativeKind {
    Default,
    Device(*mut c_void),
    Gbm(gbm::Device<File>),
}

/// The native displays to try for `platform`, each with a registry key and DRM node.
fn native_candidates(
    egl: &Egl,
    platform: EglPlatform,
) -> Result<Vec<(String, NativeKind, Option<String>)>> {
    match platform {
        EglPlatform::Surfaceless => {
            if !egl.has_client_extension("EGL_MESA_platform_surfaceless") {
                return Err(Error::Gl(
                    "EGL_MESA_platform_surfaceless is not supported by libEGL".into(),
                ));
            }
            Ok(vec![("surfaceless".into(), NativeKind::Default, None)])
        }
        EglPlatform::Gbm => {
            if !egl.has_client_extension("EGL_KHR_platform_gbm")
                && !egl.has_client_extension("EGL_MESA_platform_gbm")
            {
                return Err(Error::Gl(
                    "EGL_KHR_platform_gbm is not supported by libEGL".into(),
                ));
            }
            let mut nodes: Vec<String> = std::fs::read_dir("/dev/dri")
                .map_err(|e| Error::Gl(format!("no DRM node: /dev/dri: {e}")))?
                .filter_map(|e| e.ok())
                .map(|e| e.path().to_string_lossy().into_owned())
                .filter(|p| p.contains("/renderD") || p.contains("/card"))
                .collect();
            // Render nodes first (no DRM master, the usual GPU path), then primary nodes.
            nodes.sort_by_key(|n| (!n.contains("/renderD"), n.clone()));
            if nodes.is_empty() {
                return Err(Error::Gl("no DRM node in /dev/dri".into()));
            }
            let mut out = Vec::new();
            let mut why = Vec::new();
            for node in nodes {
                let file = match File::options().read(true).write(true).open(&node) {
                    Ok(f) => f,
                    Err(e) => {
                        why.push(format!("{node}: {e}"));
                        continue;
                    }
                };
                match gbm::Device::new(file) {
                    Ok(dev) => out.push((format!("gbm:{node}"), NativeKind::Gbm(dev), Some(node))),
                    Err(e) => why.push(format!("{node}: gbm_create_device: {e}")),
                }
            }
            if out.is_empty() {
                return Err(Error::Gl(why.join("; ")));
            }
            Ok(out)
        }
        EglPlatform::Device => {
            let (Some(qd), Some(qs)) = (egl.query_devices, egl.query_device_string) else {
                return Err(Error::Gl(
                    "EGL_EXT_device_enumeration/EGL_EXT_device_query are not supported".into(),
                ));
            };
            if !egl.has_client_extension("EGL_EXT_platform_device") {
                return Err(Error::Gl("EGL_EXT_platform_device is not supported".into()));
            }
            let mut devices = [std::ptr::null_mut::<c_void>(); 16];
            let mut n = 0i32;
            // SAFETY: the array holds 16 device handles and `n` receives the count.
            let ok = unsafe { qd(devices.len() as i32, devices.as_mut_ptr(), &mut n) };
            if ok == 0 || n <= 0 {
                return Err(Error::Gl("eglQueryDevicesEXT found no device".into()));
            }
            let mut out = Vec::new();
            for (i, &dev) in devices.iter().take(n as usize).enumerate() {
                // SAFETY: `dev` came from eglQueryDevicesEXT; the strings are static and
                // NUL-terminated or null.
                let string = |name| unsafe {
                    let p = qs(dev, name);
                    (!p.is_null()).then(|| CStr::from_ptr(p).to_string_lossy().into_owned())
                };
                // SAFETY: as above; querying a device's extension list.
                let exts = unsafe {
                    let p = qs(dev, egl::EXTENSIONS);
                    if p.is_null() {
                        String::new()
                    } else {
                        CStr::from_ptr(p).to_string_lossy().into_owned()
                    }
                };
                let node = if has_extension(&exts, "EGL_EXT_device_drm_render_node") {
                    string(EGL_DRM_RENDER_NODE_FILE_EXT)
                } else if has_extension(&exts, "EGL_EXT_device_drm") {
                    string(EGL_DRM_DEVICE_FILE_EXT)
                } else {
                    None
                };
                // Mesa's software device has no DRM node; it is what `surfaceless`
                // gives too, so a real device is preferred by trying those first.
                out.push((
                    format!("device:{i}:{}", node.clone().unwrap_or_default()),
                    NativeKind::Device(dev),
                    node,
                ));
            }
            out.sort_by_key(|c| c.2.is_none());
            Ok(out)
        }
    }
}

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

/// A GLES 3 context on a display, with no surface, plus its glow function table.
pub(crate) struct GlContext {
    pub(crate) gl: glow::Context,
    pub(crate) display: DisplayRef,
    context: usize,
    pub(crate) info: GlInfo,
    pub(crate) image_fns: Option<EglImageFns>,
}

// SAFETY: the context is made current on the calling thread for the duration of each
// call that uses it and released before the call returns (see `Current`), so moving it
// between threads never leaves it current elsewhere. glow's function table is plain
// function pointers.
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
        egl.inst
            .bind_api(egl::OPENGL_ES_API)
            .map_err(|e| Error::Gl(format!("eglBindAPI(OpenGL ES): {e}")))?;
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
        let ctx = egl
            .inst
            .create_context(d, config, None, &attrs)
            .map_err(|e| Error::Gl(format!("eglCreateContext(GLES 3.0): {e}")))?;
        let destroy_ctx = |why: Error| {
            let _ = egl.inst.destroy_context(d, ctx);
            why
        };
        if let Err(e) = egl.inst.make_current(d, None, None, Some(ctx)) {
            return Err(destroy_ctx(Error::Gl(format!("eglMakeCurrent: {e}"))));
        }
        let gles = libgles();
        // SAFETY: the context is current; the loader returns entry points of that
        // context's client API (from libGLESv2, else eglGetProcAddress).
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
        let mut me = GlContext {
            gl,
            context: ctx.as_ptr() as usize,
            info: GlInfo {
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
            },
            display,
            image_fns: None,
        };
        // From here on `me`'s Drop releases the context on every error path.
        {
            use glow::HasContext;
            let gl = &me.gl;
            // SAFETY: the context is current on this thread.
            unsafe {
                me.info.gl_vendor = gl.get_parameter_string(glow::VENDOR);
                me.info.gl_renderer = gl.get_parameter_string(glow::RENDERER);
                me.info.gl_version = gl.get_parameter_string(glow::VERSION);
                me.info.glsl_version = gl.get_parameter_string(glow::SHADING_LANGUAGE_VERSION);
                me.info.max_texture_size =
                    gl.get_parameter_i32(glow::MAX_TEXTURE_SIZE).max(0) as u32;
            }
            let mut exts: Vec<String> = gl.supported_extensions().iter().cloned().collect();
            exts.sort();
            me.info.gl_extensions = exts;
            let v = gl.version();
            if !v.is_embedded || v.major < 3 {
                let e = Error::Gl(format!(
                    "context is not OpenGL ES 3.0+: {}",
                    me.info.gl_version
                ));
                me.release();
                return Err(e);
            }
        }
        me.image_fns = me.load_image_fns();
        me.release();
        Ok(me)
    }

    fn load_image_fns(&self) -> Option<EglImageFns> {
        if !self.display.has_extension("EGL_KHR_image_base") {
            return None;
        }
        let egl = self.display.egl;
        let has_oes = self
            .info
            .gl_extensions
            .iter()
            .any(|e| e == "GL_OES_EGL_image");
        if !has_oes {
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
                query_modifiers: egl.proc_addr("eglQueryDmaBufModifiersEXT").map(|f| {
                    std::mem::transmute::<extern "system" fn(), QueryDmaBufModifiersExt>(f)
                }),
            })
        }
    }

    fn raw_context(&self) -> egl::Context {
        // SAFETY: `context` is the live context this struct owns.
        unsafe { egl::Context::from_ptr(self.context as *mut c_void) }
    }

    /// Makes the context current on this thread until the returned guard drops.
    pub(crate) fn current(&self) -> Result<Current<'_>> {
        let egl = self.display.egl;
        egl.inst
            .make_current(self.display.display(), None, None, Some(self.raw_context()))
            .map_err(|e| {
                Error::Gl(format!(
                    "eglMakeCurrent: {e} (is the context current on another thread?)"
                ))
            })?;
        Ok(Current { ctx: self })
    }

    fn release(&self) {
        let _ = self
            .display
            .egl
            .inst
            .make_current(self.display.display(), None, None, None);
    }
}

/// The context is current on this thread while this lives.
pub(crate) struct Current<'a> {
    ctx: &'a GlContext,
}

impl Current<'_> {
    pub(crate) fn gl(&self) -> &glow::Context {
        &self.ctx.gl
    }
}

impl Drop for Current<'_> {
    fn drop(&mut self) {
        self.ctx.release();
    }
}

impl Drop for GlContext {
    fn drop(&mut self) {
        let d = self.display.display();
        let _ = self.display.egl.inst.destroy_context(d, self.raw_context());
    }
}

/// libGLESv2, loaded once (core entry points; eglGetProcAddress is the fallback).
fn libgles() -> Option<&'static libloading::Library> {
    static LIB: OnceLock<Option<libloading::Library>> = OnceLock::new();
    LIB.get_or_init(|| {
        // SAFETY: loading the system's GLES library runs its initialisers only.
        unsafe { libloading::Library::new("libGLESv2.so.2").ok() }
    })
    .as_ref()
}
