//! EGL, split by concern:
//!
//! | module | holds |
//! | --- | --- |
//! | `library` | libEGL (and libGLESv2) loaded at run time, client extensions, entry points |
//! | `platform` | [`EglPlatform`] (GBM → device → surfaceless) and the native displays of each |
//! | `display` | `DisplayRef`: initialised displays shared process-wide, never terminated (the display is every EGL user's) |
//! | `context` | [`GlContext`] (a GLES 3 context without surfaces), [`GlInfo`], and [`Current`]: the proof that the context is current, which saves the caller's EGL state and restores it on drop |
//!
//! Every GL call the backend makes takes a [`Current`], so a call without a current
//! context does not compile.

mod context;
mod display;
mod library;
mod platform;

pub use context::GlInfo;
pub(crate) use context::{Current, GlContext};
pub use platform::{EglPlatform, PLATFORM_ENV};

use std::ffi::c_void;

pub(crate) type RawDisplay = *mut c_void;
pub(crate) type RawImage = *mut c_void;

pub(crate) type CreateImageKhr =
    unsafe extern "C" fn(RawDisplay, *mut c_void, u32, *mut c_void, *const i32) -> RawImage;
pub(crate) type DestroyImageKhr = unsafe extern "C" fn(RawDisplay, RawImage) -> u32;
pub(crate) type ImageTargetTexture2dOes = unsafe extern "C" fn(u32, RawImage);
pub(crate) type QueryDmaBufFormatsExt =
    unsafe extern "C" fn(RawDisplay, i32, *mut i32, *mut i32) -> u32;
pub(crate) type QueryDmaBufModifiersExt =
    unsafe extern "C" fn(RawDisplay, i32, i32, *mut u64, *mut u32, *mut i32) -> u32;
