//! The EGL image cache: imports keyed by buffer identity, bounded, least recently used
//! first out, and emptied of a buffer's entries once its tensor is gone.
//!
//! The key is the dma-buf's identity as `fstat` reports it (`st_dev`, `st_ino`: the
//! same for every fd of one buffer, never reused while an import holds the buffer),
//! plus the plane's offset, pitch, size, fourcc and modifier — never an fd number,
//! which the process reuses (DESIGN.md invariant 5).

use std::any::Any;
use std::collections::HashMap;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::sync::Weak;

use super::egl::Current;
use super::import::{ImportSpec, Imported};
use crate::{Error, Result};

/// Default bound on cached imports (each plane of each buffer is one).
pub(crate) const DEFAULT_CAPACITY: usize = 64;

/// Identity of one imported plane.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct ImageKey {
    dev: u64,
    ino: u64,
    spec: ImportSpec,
}

impl ImageKey {
    /// The key of `spec` over the dma-buf `fd`.
    pub(crate) fn new(fd: BorrowedFd<'_>, spec: ImportSpec) -> Result<ImageKey> {
        let st = nix::sys::stat::fstat(fd.as_raw_fd())
            .map_err(|e| Error::io("fstat of a dma-buf (its identity)", e.into()))?;
        Ok(ImageKey {
            dev: st.st_dev as u64,
            ino: st.st_ino as u64,
            spec,
        })
    }
}

struct Entry {
    /// `None`: the driver refused this import; do not retry it every frame.
    imported: Option<Imported>,
    token: Weak<dyn Any + Send + Sync>,
    last_used: u64,
}

/// The cache. Every method that may release entries takes the proof that the GL context
/// is current.
pub(crate) struct ImageCache {
    entries: HashMap<ImageKey, Entry>,
    capacity: usize,
    clock: u64,
}

/// What a lookup found.
pub(crate) enum Lookup<'a> {
    /// A live import.
    Hit(&'a Imported),
    /// The driver refused this exact import before.
    Refused,
    /// Not cached.
    Miss,
}

impl ImageCache {
    pub(crate) fn new(capacity: usize) -> ImageCache {
        ImageCache {
            entries: HashMap::new(),
            capacity: capacity.max(1),
            clock: 0,
        }
    }

    /// Looks `key` up, marking it used.
    pub(crate) fn get(&mut self, key: &ImageKey) -> Lookup<'_> {
        self.clock += 1;
        match self.entries.get_mut(key) {
            Some(e) if e.token.strong_count() > 0 => {
                e.last_used = self.clock;
                match &e.imported {
                    Some(i) => Lookup::Hit(i),
                    None => Lookup::Refused,
                }
            }
            _ => Lookup::Miss,
        }
    }

    /// Stores an import (or a refusal), evicting the least recently used entries beyond
    /// the bound.
    pub(crate) fn insert(
        &mut self,
        gl: &Current<'_>,
        key: ImageKey,
        imported: Option<Imported>,
        token: Weak<dyn Any + Send + Sync>,
    ) {
        self.clock += 1;
        if let Some(old) = self.entries.remove(&key)
            && let Some(i) = old.imported
        {
            i.release(gl);
        }
        self.entries.insert(
            key,
            Entry {
                imported,
                token,
                last_used: self.clock,
            },
        );
        while self.entries.len() > self.capacity {
            let oldest = self
                .entries
                .iter()
                .min_by_key(|(_, e)| e.last_used)
                .map(|(k, _)| *k);
            match oldest.and_then(|k| self.entries.remove(&k)) {
                Some(e) => {
                    if let Some(i) = e.imported {
                        i.release(gl);
                    }
                }
                None => break,
            }
        }
    }

    /// Releases the entries whose tensor (buffer) is gone.
    pub(crate) fn prune(&mut self, gl: &Current<'_>) {
        let dead: Vec<ImageKey> = self
            .entries
            .iter()
            .filter(|(_, e)| e.token.strong_count() == 0)
            .map(|(k, _)| *k)
            .collect();
        for k in dead {
            if let Some(Entry {
                imported: Some(i), ..
            }) = self.entries.remove(&k)
            {
                i.release(gl);
            }
        }
    }

    /// Releases everything.
    pub(crate) fn clear(&mut self, gl: &Current<'_>) {
        for (_, e) in self.entries.drain() {
            if let Some(i) = e.imported {
                i.release(gl);
            }
        }
    }

    /// Live imported images held.
    pub(crate) fn live_images(&self) -> usize {
        self.entries
            .values()
            .filter(|e| e.imported.is_some())
            .count()
    }

    /// Whether the cache holds any entry whose buffer is gone.
    pub(crate) fn has_dead(&self) -> bool {
        self.entries.values().any(|e| e.token.strong_count() == 0)
    }
}
