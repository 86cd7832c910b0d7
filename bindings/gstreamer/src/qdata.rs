//! Rust values attached to a `GstMemory` (GStreamer's mini-object qdata), dropped when the
//! memory is freed.
//!
//! This is how a buffer keeps its pinframe tensor for as long as it exists and no longer:
//! an upstream dma-buf is imported once per memory (a stable pool gives one import per
//! buffer, and the library's EGL image cache, keyed by buffer identity, follows the
//! tensor's life), and an output buffer of our pool finds the tensor it was made from.
//! GStreamer's own GL upload caches EGL images on dma-buf memories the same way.
//!
//! A value, once attached, is never replaced, so a reference handed out stays valid; it is
//! handed out as an `Arc` taken under one lock, which also orders two elements attaching
//! to the same memory (a `tee` in front of two converters).

use std::marker::PhantomData;
use std::sync::{Arc, Mutex, OnceLock};

use gst::glib;
use gst::glib::translate::IntoGlib;

/// Serialises every get and attach of this plugin's qdata. The destroy notify runs when the
/// memory's last reference is gone, so no get can race with it.
static LOCK: Mutex<()> = Mutex::new(());

/// A qdata slot holding one `Arc<T>` per memory.
pub(crate) struct Key<T> {
    name: &'static str,
    quark: OnceLock<glib::Quark>,
    _value: PhantomData<fn() -> T>,
}

impl<T: Send + Sync + 'static> Key<T> {
    /// A slot; `name` must be unique among this plugin's keys (it holds one `T` type).
    pub(crate) const fn new(name: &'static str) -> Key<T> {
        Key {
            name,
            quark: OnceLock::new(),
            _value: PhantomData,
        }
    }

    fn quark(&'static self) -> glib::Quark {
        // The key's own address is part of the name: another separately linked copy of
        // this code in the process (whose `T` may differ) never reads this slot.
        *self
            .quark
            .get_or_init(|| glib::Quark::from_str(format!("pinframe-{}-{:p}", self.name, self)))
    }

    /// The value attached to `mem`, if any.
    pub(crate) fn get(&'static self, mem: &gst::MemoryRef) -> Option<Arc<T>> {
        let quark = self.quark();
        let _lock = LOCK.lock().unwrap_or_else(|p| p.into_inner());
        // SAFETY: `mem` is a live GstMemory (a mini object: the cast to its first field is
        // how GStreamer itself addresses it); the data under this quark is only ever set by
        // `attach` below to a `Box<Arc<T>>` and never replaced while the memory lives.
        unsafe {
            let p = gst::ffi::gst_mini_object_get_qdata(
                mem.as_mut_ptr() as *mut gst::ffi::GstMiniObject,
                quark.into_glib(),
            ) as *const Arc<T>;
            p.as_ref().cloned()
        }
    }

    /// The value attached to `mem`, or `make()` attached now.
    pub(crate) fn get_or_attach(
        &'static self,
        mem: &gst::MemoryRef,
        make: impl FnOnce() -> T,
    ) -> Arc<T> {
        let quark = self.quark();
        let _lock = LOCK.lock().unwrap_or_else(|p| p.into_inner());
        let obj = mem.as_mut_ptr() as *mut gst::ffi::GstMiniObject;
        // SAFETY: as in `get`: `obj` is live, the data is a `Box<Arc<T>>` or null.
        let existing = unsafe {
            (gst::ffi::gst_mini_object_get_qdata(obj, quark.into_glib()) as *const Arc<T>).as_ref()
        };
        if let Some(v) = existing {
            return v.clone();
        }
        let value = Arc::new(make());
        let boxed = Box::into_raw(Box::new(value.clone()));
        // SAFETY: `obj` is live; ownership of `boxed` passes to the memory, which calls
        // `drop_value::<T>` exactly once when it is freed (nothing was attached under this
        // quark, checked above under the lock, so nothing is replaced).
        unsafe {
            gst::ffi::gst_mini_object_set_qdata(
                obj,
                quark.into_glib(),
                boxed as glib::ffi::gpointer,
                Some(drop_value::<T>),
            );
        }
        value
    }
}

unsafe extern "C" fn drop_value<T>(data: glib::ffi::gpointer) {
    // A panic must not unwind into C: dropping the value (a tensor: munmap, close) logs
    // its own errors and does not panic, but be sure.
    let _ = std::panic::catch_unwind(|| {
        // SAFETY: `data` is the `Box<Arc<T>>` leaked by `attach`, passed back once.
        drop(unsafe { Box::from_raw(data as *mut Arc<T>) });
    });
}
