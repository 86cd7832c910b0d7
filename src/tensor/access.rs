//! The access lock of one buffer: readers that hold only a pin (an inference runtime
//! reading a bound input) against writers that hold the tensor (`map_mut`, a conversion
//! into it).
//!
//! The borrow checker already keeps a tensor's own `&[T]` and `&mut [T]` apart, but a pin
//! borrows nothing, so a runtime reading through a pin and a conversion writing through
//! `&mut Tensor` on another thread would race on the same bytes. Both sides take this lock:
//! any number of readers, or one writer. A writer waits for the readers to finish and a
//! reader for the writer, so a conversion started during a run lands after it.
//!
//! Writers go first: once one waits, new readers wait behind it, so a thread that runs
//! inference back to back cannot starve the conversions into its input.
//!
//! Waiting for oneself would never end: a thread that holds one side and asks for the
//! other (a run while the same thread holds a `map_mut` guard of a bound tensor) gets an
//! [`Error::InvalidArgument`] instead of a deadlock. `std::sync::RwLock` cannot tell
//! (it may deadlock or panic on re-entry), hence this small lock of our own.

use std::sync::{Condvar, Mutex, MutexGuard};
use std::thread::{self, ThreadId};

use crate::{Error, Result};

/// Threads reading at once; more share the last slot's count check (see `enter_read`).
const READER_THREADS: usize = 8;

#[derive(Default)]
struct State {
    /// The thread holding the write side, if any.
    writer: Option<ThreadId>,
    /// Read holds, by thread (a fixed array: taking the lock allocates nothing, so the
    /// conversion loop stays allocation-free).
    readers: [Option<(ThreadId, usize)>; READER_THREADS],
    /// Read holds by threads that found every slot taken (their identity is not kept).
    untracked_readers: usize,
    /// Writers waiting for the readers to go: new readers wait behind them, so a loop of
    /// runs cannot starve a conversion (a thread already reading still shares).
    writers_waiting: usize,
}

impl State {
    fn reader_count(&self) -> usize {
        self.readers.iter().flatten().map(|(_, n)| n).sum::<usize>() + self.untracked_readers
    }

    fn reads_on(&self, me: ThreadId) -> bool {
        self.readers.iter().flatten().any(|(t, _)| *t == me)
    }
}

/// Many readers or one writer, with waits, and an error instead of waiting for oneself.
#[derive(Default)]
pub(crate) struct AccessLock {
    state: Mutex<State>,
    changed: Condvar,
}

impl AccessLock {
    fn lock(&self) -> MutexGuard<'_, State> {
        // The state is a few counters, each update complete before any call that could
        // panic: a poisoned lock still holds a consistent state.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes a read hold, waiting while a writer holds the buffer.
    pub(crate) fn enter_read(&self) -> Result<()> {
        let me = thread::current().id();
        let mut s = self.lock();
        loop {
            match s.writer {
                None if s.writers_waiting == 0 || s.reads_on(me) => break,
                None => s = self.changed.wait(s).unwrap_or_else(|e| e.into_inner()),
                Some(w) if w == me => {
                    return Err(Error::InvalidArgument(
                        "this thread is writing the tensor (a map_mut guard or a conversion \
                         into it is alive on it): reading it through its pin now would wait \
                         for itself; drop the guard first"
                            .into(),
                    ));
                }
                Some(_) => s = self.changed.wait(s).unwrap_or_else(|e| e.into_inner()),
            }
        }
        if let Some((_, n)) = s.readers.iter_mut().flatten().find(|(t, _)| *t == me) {
            *n += 1;
        } else if let Some(free) = s.readers.iter_mut().find(|r| r.is_none()) {
            *free = Some((me, 1));
        } else {
            s.untracked_readers += 1;
        }
        Ok(())
    }

    /// Gives back one read hold of the calling thread.
    pub(crate) fn exit_read(&self) {
        let me = thread::current().id();
        let mut s = self.lock();
        let mut found = false;
        for slot in s.readers.iter_mut() {
            if let Some((t, n)) = slot
                && *t == me
            {
                *n -= 1;
                if *n == 0 {
                    *slot = None;
                }
                found = true;
                break;
            }
        }
        if !found {
            s.untracked_readers = s.untracked_readers.saturating_sub(1);
        }
        drop(s);
        self.changed.notify_all();
    }

    /// Takes the write hold, waiting while readers (or another writer) hold the buffer.
    pub(crate) fn enter_write(&self) -> Result<()> {
        let me = thread::current().id();
        let mut s = self.lock();
        loop {
            if s.writer == Some(me) || s.reads_on(me) {
                return Err(Error::InvalidArgument(
                    "this thread already holds the tensor (a read through its pin, or \
                     another write, is in progress on it): writing it now would wait for \
                     itself"
                        .into(),
                ));
            }
            if s.writer.is_none() && s.reader_count() == 0 {
                break;
            }
            s.writers_waiting += 1;
            s = self.changed.wait(s).unwrap_or_else(|e| e.into_inner());
            s.writers_waiting -= 1;
        }
        s.writer = Some(me);
        Ok(())
    }

    /// Gives back the write hold.
    pub(crate) fn exit_write(&self) {
        let mut s = self.lock();
        s.writer = None;
        drop(s);
        self.changed.notify_all();
    }

    /// True while a reader holds the buffer (a test hook).
    #[cfg(feature = "testing")]
    pub(crate) fn readers(&self) -> usize {
        self.lock().reader_count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    #[test]
    fn a_writer_waits_for_the_readers() {
        let lock = Arc::new(AccessLock::default());
        lock.enter_read().unwrap();
        let written = Arc::new(AtomicBool::new(false));
        let writer = {
            let (lock, written) = (lock.clone(), written.clone());
            thread::spawn(move || {
                lock.enter_write().unwrap();
                written.store(true, Ordering::SeqCst);
                lock.exit_write();
            })
        };
        // The writer cannot get in while the read hold lives, however long it waits.
        thread::sleep(Duration::from_millis(50));
        assert!(
            !written.load(Ordering::SeqCst),
            "a writer got in under a reader"
        );
        lock.exit_read();
        writer.join().unwrap();
        assert!(written.load(Ordering::SeqCst));
    }

    #[test]
    fn a_reader_waits_for_the_writer() {
        let lock = Arc::new(AccessLock::default());
        lock.enter_write().unwrap();
        let read = Arc::new(AtomicBool::new(false));
        let reader = {
            let (lock, read) = (lock.clone(), read.clone());
            thread::spawn(move || {
                lock.enter_read().unwrap();
                read.store(true, Ordering::SeqCst);
                lock.exit_read();
            })
        };
        thread::sleep(Duration::from_millis(50));
        assert!(
            !read.load(Ordering::SeqCst),
            "a reader got in under a writer"
        );
        lock.exit_write();
        reader.join().unwrap();
        assert!(read.load(Ordering::SeqCst));
    }

    #[test]
    fn waiting_for_oneself_is_an_error_not_a_deadlock() {
        let lock = AccessLock::default();
        lock.enter_write().unwrap();
        assert!(matches!(lock.enter_read(), Err(Error::InvalidArgument(_))));
        assert!(matches!(lock.enter_write(), Err(Error::InvalidArgument(_))));
        lock.exit_write();
        lock.enter_read().unwrap();
        lock.enter_read().unwrap();
        assert!(matches!(lock.enter_write(), Err(Error::InvalidArgument(_))));
        lock.exit_read();
        lock.exit_read();
        lock.enter_write().unwrap();
        lock.exit_write();
    }

    #[test]
    fn readers_share_and_more_threads_than_slots_still_count() {
        let lock = Arc::new(AccessLock::default());
        let n = READER_THREADS + 4;
        let barrier = Arc::new(std::sync::Barrier::new(n + 1));
        let threads: Vec<_> = (0..n)
            .map(|_| {
                let (lock, barrier) = (lock.clone(), barrier.clone());
                thread::spawn(move || {
                    lock.enter_read().unwrap();
                    barrier.wait(); // every reader is in at once
                    barrier.wait(); // the main thread has counted
                    lock.exit_read();
                })
            })
            .collect();
        barrier.wait();
        assert_eq!(lock.lock().reader_count(), n);
        barrier.wait();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(lock.lock().reader_count(), 0);
        lock.enter_write().unwrap();
        lock.exit_write();
    }

    #[test]
    fn a_waiting_writer_goes_before_new_readers() {
        let lock = Arc::new(AccessLock::default());
        lock.enter_read().unwrap();
        let writer = {
            let lock = lock.clone();
            thread::spawn(move || {
                lock.enter_write().unwrap();
                lock.exit_write();
            })
        };
        while lock.lock().writers_waiting == 0 {
            thread::yield_now();
        }
        // This thread already reads: it shares on (waiting would deadlock with the writer).
        lock.enter_read().unwrap();
        lock.exit_read();
        // Another thread's new read waits for the writer.
        let late_reader = {
            let lock = lock.clone();
            thread::spawn(move || {
                lock.enter_read().unwrap();
                let writer_done = lock.lock().writers_waiting == 0;
                lock.exit_read();
                writer_done
            })
        };
        thread::sleep(Duration::from_millis(50));
        assert_eq!(
            lock.lock().reader_count(),
            1,
            "a new reader got in ahead of a writer"
        );
        lock.exit_read();
        writer.join().unwrap();
        assert!(late_reader.join().unwrap());
    }
}
