//! A scripted stand-in for a V4L2 driver's buffer queue, for the host tests of the capture
//! loop and the buffer pool: it fills queued buffers in order and applies the faults a
//! test scripts (error flags, empty and short buffers, drops, bad plane offsets, failed
//! `VIDIOC_QBUF`s, a fatal stream error, a vanished device). It checks what a real driver
//! would refuse: a buffer queued twice panics the test.

use std::collections::VecDeque;
use std::io;
use std::sync::Mutex;
use std::time::Duration;

use v4l::v4l_sys as sys;

use super::ioctl::BufferIo;
use super::stream::DeviceQueue;
use crate::camera::pool::Slot;

/// What happens to the next buffer the fake driver fills.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fault {
    /// A good frame.
    None,
    /// A sequence number goes by without a buffer (then the next buffer is filled).
    Drop,
    /// Filled, flagged `V4L2_BUF_FLAG_ERROR`.
    ErrorFlag,
    /// `bytesused` 0.
    Empty,
    /// One byte short of the layout.
    Short,
    /// A data offset far past the end of the buffer (multi-planar queues).
    BadOffsets,
    /// The buffer comes back with an index beyond the pool.
    BadIndex,
}

#[derive(Default)]
struct Driver {
    /// Queued and not yet filled, in order.
    queued: VecDeque<usize>,
    /// Filled, waiting for `VIDIOC_DQBUF`.
    done: VecDeque<BufferIo>,
    sequence: u32,
    script: VecDeque<Fault>,
    /// Fail this many of the next `VIDIOC_QBUF` calls with `EINVAL`.
    qbuf_failures: usize,
    /// The device vanished: everything fails with `ENODEV`, poll says `POLLHUP`.
    gone: bool,
    /// A fatal stream error: `VIDIOC_DQBUF` fails with `EIO`.
    fatal: bool,
    /// Fill nothing (a stalled device).
    stalled: bool,
    streaming: bool,
    qbufs: u64,
}

/// The fake queue (share it with the test through an `Arc`).
pub(crate) struct FakeQueue {
    driver: Mutex<Driver>,
    planes: usize,
    /// `bytesused` of a whole frame, per buffer.
    full: [u32; 3],
}

impl FakeQueue {
    /// A fake single-planar (`planes` 0) or multi-planar queue whose whole frames hold
    /// `full` bytes per buffer.
    pub(crate) fn new(planes: usize, full: [u32; 3]) -> Self {
        FakeQueue {
            driver: Mutex::new(Driver::default()),
            planes,
            full,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Driver> {
        self.driver.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Appends `faults` to the script.
    pub(crate) fn script(&self, faults: &[Fault]) {
        self.lock().script.extend(faults.iter().copied());
    }

    /// The next `n` `VIDIOC_QBUF` calls fail with `EINVAL`.
    pub(crate) fn fail_qbuf(&self, n: usize) {
        self.lock().qbuf_failures = n;
    }

    pub(crate) fn vanish(&self) {
        self.lock().gone = true;
    }

    pub(crate) fn break_stream(&self) {
        self.lock().fatal = true;
    }

    pub(crate) fn stall(&self, stalled: bool) {
        self.lock().stalled = stalled;
    }

    /// The driver forgets buffer `index` (a driver-side loss, for the accounting check).
    pub(crate) fn forget(&self, index: usize) {
        self.lock().queued.retain(|&i| i != index);
    }

    /// Successful `VIDIOC_QBUF` calls so far.
    pub(crate) fn qbufs(&self) -> u64 {
        self.lock().qbufs
    }

    /// Buffers the driver owns now.
    pub(crate) fn owned(&self) -> usize {
        let d = self.lock();
        d.queued.len() + d.done.len()
    }

    fn fill(&self, d: &mut Driver) {
        loop {
            let fault = d.script.pop_front().unwrap_or(Fault::None);
            if fault == Fault::Drop {
                d.sequence = d.sequence.wrapping_add(1);
                continue;
            }
            let Some(index) = d.queued.pop_front() else {
                d.script.push_front(fault);
                return;
            };
            let mut io = BufferIo {
                index: index as u32,
                sequence: d.sequence,
                timestamp: (1, i64::from(d.sequence)),
                ..BufferIo::default()
            };
            io.bytesused[..3].copy_from_slice(&self.full);
            match fault {
                Fault::ErrorFlag => io.flags |= sys::V4L2_BUF_FLAG_ERROR,
                Fault::Empty => io.bytesused = [0; super::ioctl::MAX_PLANES],
                Fault::Short => io.bytesused[0] -= 1,
                Fault::BadOffsets => io.data_offsets[0] = 1 << 30,
                Fault::BadIndex => io.index = 99,
                Fault::None | Fault::Drop => {}
            }
            d.sequence = d.sequence.wrapping_add(1);
            d.done.push_back(io);
            return;
        }
    }
}

fn errno(code: i32) -> io::Error {
    io::Error::from_raw_os_error(code)
}

impl DeviceQueue for FakeQueue {
    fn enqueue(&self, index: usize, _slot: &Slot) -> io::Result<()> {
        let mut d = self.lock();
        if d.gone {
            return Err(errno(libc::ENODEV));
        }
        if d.qbuf_failures > 0 {
            d.qbuf_failures -= 1;
            return Err(errno(libc::EINVAL));
        }
        assert!(
            !d.queued.contains(&index) && !d.done.iter().any(|b| b.index as usize == index),
            "buffer {index} queued twice"
        );
        d.queued.push_back(index);
        d.qbufs += 1;
        Ok(())
    }

    fn dequeue(&self) -> io::Result<Option<BufferIo>> {
        let mut d = self.lock();
        if d.gone {
            return Err(errno(libc::ENODEV));
        }
        if d.fatal {
            return Err(errno(libc::EIO));
        }
        Ok(d.done.pop_front())
    }

    fn wait(&self, timeout: Duration) -> io::Result<i16> {
        let mut d = self.lock();
        if d.gone {
            return Ok(libc::POLLERR | libc::POLLHUP);
        }
        if d.fatal {
            return Ok(libc::POLLERR);
        }
        if d.done.is_empty() && d.streaming && !d.stalled {
            self.fill(&mut d);
        }
        if d.done.is_empty() {
            drop(d);
            std::thread::sleep(timeout);
            return Ok(0);
        }
        Ok(libc::POLLIN)
    }

    fn owns(&self, index: usize) -> io::Result<bool> {
        let d = self.lock();
        if d.gone {
            return Err(errno(libc::ENODEV));
        }
        Ok(d.queued.contains(&index) || d.done.iter().any(|b| b.index as usize == index))
    }

    fn stream(&self, on: bool) -> io::Result<()> {
        let mut d = self.lock();
        if d.gone {
            return Err(errno(libc::ENODEV));
        }
        d.streaming = on;
        if !on {
            d.queued.clear();
            d.done.clear();
        }
        Ok(())
    }

    fn planes(&self) -> usize {
        self.planes
    }
}

/// Lets a test keep a handle on the fake it gave the camera.
impl DeviceQueue for std::sync::Arc<FakeQueue> {
    fn enqueue(&self, index: usize, slot: &Slot) -> io::Result<()> {
        (**self).enqueue(index, slot)
    }
    fn dequeue(&self) -> io::Result<Option<BufferIo>> {
        (**self).dequeue()
    }
    fn wait(&self, timeout: Duration) -> io::Result<i16> {
        (**self).wait(timeout)
    }
    fn owns(&self, index: usize) -> io::Result<bool> {
        (**self).owns(index)
    }
    fn stream(&self, on: bool) -> io::Result<()> {
        (**self).stream(on)
    }
    fn planes(&self) -> usize {
        (**self).planes()
    }
}
