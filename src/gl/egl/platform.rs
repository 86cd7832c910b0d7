//! The EGL platforms the backend can run on, and the native displays of each
//! (DRM nodes for GBM, EGL devices, Mesa's default surfaceless display).

use std::ffi::{CStr, c_void};
use std::fmt;
use std::fs::File;
use std::str::FromStr;

use khronos_egl as egl;

use super::library::{Egl, has_extension};
use crate::{Error, Result};

const EGL_PLATFORM_GBM_KHR: u32 = 0x31D7;
const EGL_PLATFORM_DEVICE_EXT: u32 = 0x313F;
const EGL_PLATFORM_SURFACELESS_MESA: u32 = 0x31DD;
const EGL_DRM_DEVICE_FILE_EXT: i32 = 0x3233;
const EGL_DRM_RENDER_NODE_FILE_EXT: i32 = 0x3377;

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

    /// The `EGL_PLATFORM_*` enum `eglGetPlatformDisplayEXT` takes.
    pub(super) const fn egl_enum(self) -> u32 {
        match self {
            EglPlatform::Gbm => EGL_PLATFORM_GBM_KHR,
            EglPlatform::Device => EGL_PLATFORM_DEVICE_EXT,
            EglPlatform::Surfaceless => EGL_PLATFORM_SURFACELESS_MESA,
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

/// The native object of one candidate display.
pub(super) enum NativeKind {
    /// `EGL_DEFAULT_DISPLAY` (surfaceless).
    Default,
    Device(*mut c_void),
    Gbm(gbm::Device<File>),
}

/// The native displays to try for `platform`, each with a registry key and DRM node.
pub(super) fn native_candidates(
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
