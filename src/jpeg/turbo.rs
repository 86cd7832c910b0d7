//! The TurboJPEG API of libjpeg-turbo (`libturbojpeg.so.0`), loaded at run time.
//!
//! Why TurboJPEG and not a crate: the Rust crates over it (`turbojpeg`) build against the
//! TurboJPEG 3 API, which Debian 12 and most board images do not ship (they have 2.1), and
//! link at build time, which would make every cross build need the board's library. The
//! pure-Rust decoders (`zune-jpeg`, `jpeg-decoder`) always upsample the chroma and have no
//! DCT-domain scaling, so they cannot hand out the frame's own YUV planes at 1/2, 1/4 or
//! 1/8 scale, which is where the time goes (see `benches/mjpeg.rs`). The TurboJPEG 2 calls
//! bound here exist unchanged in 3.x, and libjpeg-turbo keeps its `setjmp` error handling
//! inside the library, so no error can unwind through Rust frames.

use std::ffi::{CStr, c_char, c_int, c_uchar, c_ulong, c_void};
use std::sync::OnceLock;

use crate::{Error, Result};

/// `TJFLAG_STOPONWARNING`: a corrupt or truncated frame fails instead of decoding to grey.
pub(crate) const FLAG_STOP_ON_WARNING: c_int = 8192;
/// `TJFLAG_LIMITSCANS`: a progressive image of more than 500 scans fails (a crafted frame
/// cannot make one decode take minutes).
pub(crate) const FLAG_LIMIT_SCANS: c_int = 32768;
/// `TJFLAG_NOREALLOC`: compress into the caller's buffer, never reallocate it.
pub(crate) const FLAG_NO_REALLOC: c_int = 1024;

/// `TJSAMP_*`.
pub(crate) const SAMP_444: c_int = 0;
pub(crate) const SAMP_422: c_int = 1;
pub(crate) const SAMP_420: c_int = 2;
pub(crate) const SAMP_GRAY: c_int = 3;
/// `TJCS_YCbCr` and `TJCS_GRAY`: the colour spaces pinframe decodes into planes.
pub(crate) const CS_YCBCR: c_int = 1;
pub(crate) const CS_GRAY: c_int = 2;
/// `TJPF_RGB`: packed R, G, B bytes (the benchmark's full-decode baseline).
pub(crate) const PF_RGB: c_int = 0;

type Handle = *mut c_void;

/// The library's entry points. Every pointer came from one `dlopen` that stays open for
/// the life of the process (the `Library` is kept here).
pub(crate) struct TurboJpeg {
    _lib: libloading::Library,
    pub(crate) init_decompress: unsafe extern "C" fn() -> Handle,
    pub(crate) init_compress: unsafe extern "C" fn() -> Handle,
    pub(crate) destroy: unsafe extern "C" fn(Handle) -> c_int,
    pub(crate) decompress_header3: unsafe extern "C" fn(
        Handle,
        *const c_uchar,
        c_ulong,
        *mut c_int,
        *mut c_int,
        *mut c_int,
        *mut c_int,
    ) -> c_int,
    pub(crate) decompress_to_yuv_planes: unsafe extern "C" fn(
        Handle,
        *const c_uchar,
        c_ulong,
        *mut *mut c_uchar,
        c_int,
        *mut c_int,
        c_int,
        c_int,
    ) -> c_int,
    pub(crate) decompress2: unsafe extern "C" fn(
        Handle,
        *const c_uchar,
        c_ulong,
        *mut c_uchar,
        c_int,
        c_int,
        c_int,
        c_int,
        c_int,
    ) -> c_int,
    pub(crate) compress_from_yuv_planes: unsafe extern "C" fn(
        Handle,
        *const *const c_uchar,
        c_int,
        *const c_int,
        c_int,
        c_int,
        *mut *mut c_uchar,
        *mut c_ulong,
        c_int,
        c_int,
    ) -> c_int,
    pub(crate) buf_size: unsafe extern "C" fn(c_int, c_int, c_int) -> c_ulong,
    get_error_str2: unsafe extern "C" fn(Handle) -> *mut c_char,
}

// SAFETY: the struct holds function pointers into a library that stays loaded, and the
// `Library` handle itself; TurboJPEG's functions are thread-safe as long as one handle is
// not used by two threads at once, which `Codec` (not `Sync`) guarantees.
unsafe impl Send for TurboJpeg {}
// SAFETY: as above: sharing the table only shares function pointers.
unsafe impl Sync for TurboJpeg {}

/// The names the library is looked for under, most specific first.
const LIBRARY_NAMES: [&str; 2] = ["libturbojpeg.so.0", "libturbojpeg.so"];

impl TurboJpeg {
    /// The process's TurboJPEG, loaded on first use.
    pub(crate) fn get() -> Result<&'static TurboJpeg> {
        static LIB: OnceLock<std::result::Result<TurboJpeg, String>> = OnceLock::new();
        LIB.get_or_init(load).as_ref().map_err(|why| {
            Error::Unsupported(format!(
                "Motion-JPEG needs libjpeg-turbo's TurboJPEG library, which could not be \
                 loaded ({why}); install it (Debian/Ubuntu: apt install libturbojpeg0)"
            ))
        })
    }

    /// The library's last error on `handle`, as text.
    pub(crate) fn error(&self, handle: Handle) -> String {
        // SAFETY: `handle` is a live TurboJPEG handle (the callers own one); the returned
        // string is the library's static or per-handle buffer, copied out at once.
        let p = unsafe { (self.get_error_str2)(handle) };
        if p.is_null() {
            return "unknown error".into();
        }
        // SAFETY: non-null, NUL-terminated (the library's error buffer).
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }
}

fn load() -> std::result::Result<TurboJpeg, String> {
    let mut tried = Vec::new();
    for name in LIBRARY_NAMES {
        // SAFETY: loading libturbojpeg runs no initialisers with preconditions; it is a
        // plain C library.
        match unsafe { libloading::Library::new(name) } {
            Ok(lib) => return bind(lib).map_err(|e| format!("{name}: {e}")),
            Err(e) => tried.push(format!("{name}: {e}")),
        }
    }
    Err(tried.join("; "))
}

fn bind(lib: libloading::Library) -> std::result::Result<TurboJpeg, libloading::Error> {
    macro_rules! sym {
        ($name:literal) => {
            // SAFETY: the symbol is the TurboJPEG function of that name, whose C signature
            // (turbojpeg.h, unchanged since 2.0) is the field's type; the pointer is used
            // only while `lib` is alive (it is stored with it).
            *unsafe { lib.get($name)? }
        };
    }
    Ok(TurboJpeg {
        init_decompress: sym!(b"tjInitDecompress\0"),
        init_compress: sym!(b"tjInitCompress\0"),
        destroy: sym!(b"tjDestroy\0"),
        decompress_header3: sym!(b"tjDecompressHeader3\0"),
        decompress_to_yuv_planes: sym!(b"tjDecompressToYUVPlanes\0"),
        decompress2: sym!(b"tjDecompress2\0"),
        compress_from_yuv_planes: sym!(b"tjCompressFromYUVPlanes\0"),
        buf_size: sym!(b"tjBufSize\0"),
        get_error_str2: sym!(b"tjGetErrorStr2\0"),
        _lib: lib,
    })
}

/// One TurboJPEG handle (a decompressor or a compressor), destroyed on drop. Not `Sync`:
/// a handle may not be used by two threads at once.
pub(crate) struct Codec {
    pub(crate) lib: &'static TurboJpeg,
    pub(crate) handle: Handle,
}

// SAFETY: a TurboJPEG handle has no thread affinity; it only must not be used from two
// threads at once, which `&mut self` on every use (and no `Sync`) ensures.
unsafe impl Send for Codec {}

impl Codec {
    pub(crate) fn decompressor() -> Result<Codec> {
        let lib = TurboJpeg::get()?;
        // SAFETY: no preconditions; a null return is an allocation failure.
        let handle = unsafe { (lib.init_decompress)() };
        Self::checked(lib, handle, "tjInitDecompress")
    }

    pub(crate) fn compressor() -> Result<Codec> {
        let lib = TurboJpeg::get()?;
        // SAFETY: as above.
        let handle = unsafe { (lib.init_compress)() };
        Self::checked(lib, handle, "tjInitCompress")
    }

    fn checked(lib: &'static TurboJpeg, handle: Handle, call: &str) -> Result<Codec> {
        if handle.is_null() {
            return Err(Error::MemoryUnavailable {
                requested: "TurboJPEG",
                tried: vec![format!("{call} returned no handle")],
            });
        }
        Ok(Codec { lib, handle })
    }

    pub(crate) fn error(&self) -> String {
        self.lib.error(self.handle)
    }
}

impl Drop for Codec {
    fn drop(&mut self) {
        // SAFETY: the handle is live and destroyed exactly once, here.
        unsafe { (self.lib.destroy)(self.handle) };
    }
}

impl std::fmt::Debug for Codec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Codec(TurboJPEG)")
    }
}
