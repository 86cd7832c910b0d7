//! Streaming: queueing buffers, waiting for and dequeuing filled ones, and deciding what
//! each dequeued buffer is (a frame, or an error, empty or malformed buffer that goes
//! straight back to the driver). Every path after `VIDIOC_DQBUF` ends with the buffer
//! handed out or queued again (see [`Requeue`]).

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use v4l::v4l_sys as sys;

use super::ioctl::{self, BufferIo};
use crate::DType;
use crate::camera::pool::{Captured, Shared, Slot, SlotState, State};
use crate::image::{ImageLayout, Plane};
use crate::{Error, Result};

/// The device end of a camera's buffer queue: what the capture loop asks of a driver.
/// [`Queue`] is the V4L2 one; the unit tests drive the same loop with a scripted fake.
pub(crate) trait DeviceQueue: Send + Sync {
    /// `VIDIOC_QBUF` of buffer `index` (its dma-buf fds in DMABUF mode).
    fn enqueue(&self, index: usize, slot: &Slot) -> io::Result<()>;
    /// `VIDIOC_DQBUF`: a filled buffer if one is ready; never blocks.
    fn dequeue(&self) -> io::Result<Option<BufferIo>>;
    /// Waits up to `timeout` for a filled buffer; returns poll's revents (0 on timeout).
    fn wait(&self, timeout: Duration) -> io::Result<i16>;
    /// Whether the driver owns buffer `index` now (`VIDIOC_QUERYBUF`: queued or done).
    fn owns(&self, index: usize) -> io::Result<bool>;
    /// `VIDIOC_STREAMON` / `VIDIOC_STREAMOFF`.
    fn stream(&self, on: bool) -> io::Result<()>;
    /// Planes per buffer of a multi-planar queue; 0 for a single-planar one.
    fn planes(&self) -> usize;
}

/// A V4L2 capture queue.
pub(crate) struct Queue {
    pub fd: OwnedFd,
    pub buf_type: u32,
    pub memory: u32,
    /// Planes per buffer for the multi-planar API; 0 for single-planar queues.
    pub num_planes: usize,
}

impl DeviceQueue for Queue {
    fn enqueue(&self, index: usize, slot: &Slot) -> io::Result<()> {
        let mut io = BufferIo {
            index: index as u32,
            ..BufferIo::default()
        };
        if self.memory == sys::v4l2_memory_V4L2_MEMORY_DMABUF {
            for b in 0..slot.tensor.buffer_count() {
                let fd = slot.tensor.buffer_fd(b).ok_or_else(|| {
                    io::Error::new(
                        io::ErrorKind::InvalidInput,
                        "DMABUF capture buffer without an fd",
                    )
                })?;
                io.fds[b] = fd.as_raw_fd();
                io.lengths[b] = slot.lengths[b];
            }
        }
        ioctl::qbuf(
            self.fd.as_fd(),
            self.buf_type,
            self.memory,
            self.num_planes,
            &io,
        )
    }

    fn dequeue(&self) -> io::Result<Option<BufferIo>> {
        ioctl::dqbuf(self.fd.as_fd(), self.buf_type, self.memory, self.num_planes)
    }

    fn wait(&self, timeout: Duration) -> io::Result<i16> {
        poll_in(self.fd.as_fd(), timeout)
    }

    fn owns(&self, index: usize) -> io::Result<bool> {
        let flags = ioctl::querybuf(
            self.fd.as_fd(),
            self.buf_type,
            self.memory,
            self.num_planes,
            index as u32,
        )?;
        Ok(flags & (sys::V4L2_BUF_FLAG_QUEUED | sys::V4L2_BUF_FLAG_DONE) != 0)
    }

    fn stream(&self, on: bool) -> io::Result<()> {
        ioctl::stream(self.fd.as_fd(), self.buf_type, on)
    }

    fn planes(&self) -> usize {
        self.num_planes
    }
}

/// A failed V4L2 call on an open device: `ENODEV` (the device vanished) is
/// [`Error::Disconnected`], anything else the driver's failure, [`Error::Device`]; both name
/// the call and the device.
pub(crate) fn device_call_error(dev: &str, what: &str, e: io::Error) -> Error {
    if e.raw_os_error() == Some(libc::ENODEV) {
        Error::Disconnected(format!("camera {dev} vanished ({what}: {e})"))
    } else {
        Error::Device(format!("{what} on camera {dev}: {e}"))
    }
}

/// A `VIDIOC_QBUF` of buffer `index` that failed.
pub(crate) fn queue_error(dev: &str, index: usize, e: io::Error) -> Error {
    device_call_error(dev, &format!("VIDIOC_QBUF of buffer {index}"), e)
}

/// A `VIDIOC_DQBUF` that failed, by what the kernel means by it.
fn dequeue_error(dev: &str, e: io::Error) -> Error {
    match e.raw_os_error() {
        Some(libc::EIO) => Error::Device(format!(
            "camera {dev}: the driver stopped the stream with a fatal error (VIDIOC_DQBUF: \
             {e}); close the camera and open it again"
        )),
        Some(libc::EPIPE) => Error::Device(format!(
            "camera {dev}: the driver returned its last buffer (VIDIOC_DQBUF: {e})"
        )),
        _ => device_call_error(dev, "VIDIOC_DQBUF", e),
    }
}

/// What a dequeued buffer holds.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    /// A whole frame.
    Frame,
    /// Flagged `V4L2_BUF_FLAG_ERROR`.
    Error,
    /// `bytesused` 0 in every plane: no image (an error frame without the flag).
    Empty,
    /// Buffer `buffer` holds fewer bytes than the layout needs.
    Short {
        buffer: usize,
        got: u32,
        need: usize,
    },
}

/// The flag and `bytesused` checks that need no layout (before the data offsets).
fn unusable(io: &BufferIo, buffers: usize) -> Option<Verdict> {
    if io.flags & sys::V4L2_BUF_FLAG_ERROR != 0 {
        return Some(Verdict::Error);
    }
    if io.bytesused[..buffers.clamp(1, ioctl::MAX_PLANES)]
        .iter()
        .all(|&b| b == 0)
    {
        return Some(Verdict::Empty);
    }
    None
}

/// Every buffer of the frame holds what `layout` needs.
fn complete(io: &BufferIo, layout: &ImageLayout) -> Verdict {
    for b in 0..layout.buffer_count() {
        let need = layout.required_len(b);
        if (io.bytesused[b] as usize) < need {
            return Verdict::Short {
                buffer: b,
                got: io.bytesused[b],
                need,
            };
        }
    }
    Verdict::Frame
}

/// A dequeued buffer: when this drops without [`hand_out`](Requeue::hand_out), the buffer
/// goes back to the driver (or, if that `VIDIOC_QBUF` fails, stays idle for the next
/// `next_frame` to queue again). Every early return after `VIDIOC_DQBUF` passes through it.
struct Requeue<'a> {
    state: &'a mut State,
    queue: &'a dyn DeviceQueue,
    index: usize,
    armed: bool,
}

impl Requeue<'_> {
    /// The buffer goes to the application in a frame.
    fn hand_out(mut self) {
        self.state.slots[self.index].state = SlotState::Held;
        self.state.stats.frames += 1;
        self.armed = false;
    }
}

impl Drop for Requeue<'_> {
    fn drop(&mut self) {
        if self.armed {
            let _ = self.state.requeue(Some(self.queue), self.index);
        }
    }
}

/// Takes the buffer the driver returned in `io`: a frame (marked held) or `None` when it was
/// an error, empty or short buffer (counted, and queued again).
fn take(
    state: &mut State,
    queue: &dyn DeviceQueue,
    io: &BufferIo,
    layout: &mut ImageLayout,
    dev: &str,
) -> Result<Option<Captured>> {
    let index = io.index as usize;
    let n = state.slots.len();
    let Some(slot) = state.slots.get_mut(index) else {
        return Err(Error::Device(format!(
            "camera {dev} returned buffer index {index}, beyond its {n} buffers"
        )));
    };
    if slot.state != SlotState::Queued {
        return Err(Error::Device(format!(
            "camera {dev} returned buffer {index}, which pinframe had not queued (it is {:?})",
            slot.state
        )));
    }
    // Ours from here: handed out below, or queued again when `back` drops.
    slot.state = SlotState::Idle;
    let back = Requeue {
        state,
        queue,
        index,
        armed: true,
    };
    back.state.note_sequence(io.sequence);
    match unusable(io, layout.buffer_count()) {
        Some(Verdict::Error) => {
            back.state.stats.errors += 1;
            log::debug!(
                "camera {dev}: buffer {index} (sequence {}) flagged V4L2_BUF_FLAG_ERROR",
                io.sequence
            );
            return Ok(None);
        }
        Some(_) => {
            back.state.stats.empty += 1;
            log::debug!(
                "camera {dev}: buffer {index} (sequence {}) is empty (bytesused 0)",
                io.sequence
            );
            return Ok(None);
        }
        None => {}
    }
    if queue.planes() > 0
        && let Err(e) = apply_data_offsets(&mut back.state.slots[index], layout, io)
    {
        back.state.stats.malformed += 1;
        return Err(e);
    }
    if layout.format().is_compressed() {
        // A compressed frame is as long as the driver says; its markers say whether it
        // is whole (a USB transfer cut short ends without its end-of-image marker).
        if let Err(e) = back.state.slots[index].accept_compressed(layout, io.bytesused[0]) {
            back.state.stats.malformed += 1;
            log::warn!(
                "camera {dev}: buffer {index} (sequence {}): {e}; dropping the frame",
                io.sequence
            );
            return Ok(None);
        }
    } else if let Verdict::Short { buffer, got, need } = complete(
        io,
        back.state.slots[index].tensor.layout().unwrap_or(layout),
    ) {
        back.state.stats.malformed += 1;
        log::warn!(
            "camera {dev}: buffer {index} plane {buffer} holds {got} bytes, the layout needs \
             {need}; dropping the frame"
        );
        return Ok(None);
    }
    let (sec, usec) = io.timestamp;
    let captured = Captured {
        index,
        sequence: io.sequence,
        timestamp: Duration::new(sec.max(0) as u64, (usec.clamp(0, 999_999) * 1000) as u32),
        bytesused: [io.bytesused[0], io.bytesused[1], io.bytesused[2]],
    };
    back.hand_out();
    Ok(Some(captured))
}

/// Waits (up to `timeout`) for the next frame from `shared`'s device and marks it held.
pub(crate) fn capture(
    shared: &Shared,
    layout: &mut ImageLayout,
    timeout: Duration,
    dev: &str,
) -> Result<Captured> {
    let queue = shared
        .queue()
        .ok_or_else(|| Error::Device(format!("camera {dev} has no device queue")))?;
    // A timeout past what an Instant can hold (Duration::MAX) waits without a deadline.
    let deadline = Instant::now().checked_add(timeout);
    loop {
        shared.prepare(dev)?;
        let remaining = deadline.map_or(timeout, |d| d.saturating_duration_since(Instant::now()));
        let revents = queue
            .wait(remaining)
            .map_err(|e| Error::io(format!("poll on camera {dev}"), e))?;
        let mut state = shared.lock();
        let io = match queue.dequeue() {
            Ok(Some(io)) => io,
            Ok(None) => {
                if revents & libc::POLLHUP != 0 {
                    return Err(state.fail(Error::Disconnected(format!(
                        "camera {dev} hung up (poll revents {revents:#x}): the device went away"
                    ))));
                }
                if revents & (libc::POLLERR | libc::POLLNVAL) != 0 {
                    return Err(state.fail(Error::Device(format!(
                        "camera {dev} reports an error on the stream (poll revents \
                         {revents:#x}) and has no buffer: the driver stopped streaming"
                    ))));
                }
                if remaining.is_zero() {
                    return Err(Error::Timeout(format!(
                        "no frame from camera {dev} within {timeout:?}"
                    )));
                }
                continue;
            }
            Err(e) => return Err(state.fail(dequeue_error(dev, e))),
        };
        if let Some(captured) = take(&mut state, queue, &io, layout, dev)? {
            return Ok(captured);
        }
    }
}

/// Stops streaming: the driver lets go of every buffer; frames still held stay readable
/// and are no longer queued.
pub(crate) fn stop(shared: &Shared, dev: &str) {
    let mut state = shared.lock();
    if !state.streaming {
        return;
    }
    state.streaming = false;
    if let Some(queue) = shared.queue()
        && let Err(e) = queue.stream(false)
    {
        if e.raw_os_error() == Some(libc::ENODEV) {
            log::debug!("camera {dev}: VIDIOC_STREAMOFF on a vanished device: {e}");
        } else {
            log::warn!("camera {dev}: VIDIOC_STREAMOFF: {e}");
        }
    }
    for slot in &mut state.slots {
        if slot.state == SlotState::Queued {
            slot.state = SlotState::Idle;
        }
    }
}

/// Multi-planar drivers report where each plane's data starts (`data_offset`) only when a
/// buffer is dequeued; a slot whose layout does not match yet gets the offsets (once: the
/// offsets are a property of the format).
fn apply_data_offsets(slot: &mut Slot, layout: &mut ImageLayout, io: &BufferIo) -> Result<()> {
    let base = layout;
    let wanted: Vec<Plane> = base
        .planes()
        .iter()
        .map(|p| Plane {
            offset: p.offset - base_offset(base, p.buffer) + io.data_offsets[p.buffer] as usize,
            ..*p
        })
        .collect();
    let current = slot.tensor.layout().map(|l| l.planes().to_vec());
    if current.as_deref() == Some(&wanted[..]) {
        return Ok(());
    }
    let bad = |why: String| {
        Error::Device(format!(
            "the driver's plane data offsets {:?} give a bad layout: {why}",
            &io.data_offsets[..base.buffer_count()]
        ))
    };
    let new = ImageLayout::with_planes(
        base.width(),
        base.height(),
        base.format(),
        DType::U8,
        &wanted,
    )
    .map_err(|e| bad(e.to_string()))?
    .with_colorimetry(base.colorimetry());
    let tensor = Arc::get_mut(&mut slot.tensor).ok_or_else(|| {
        Error::Device("a dequeued capture buffer is still referenced by a frame".into())
    })?;
    tensor.set_layout(new).map_err(|e| bad(e.to_string()))?;
    *base = new;
    Ok(())
}

/// Offset of the first plane in buffer `buffer` (the data offset already applied).
fn base_offset(layout: &ImageLayout, buffer: usize) -> usize {
    layout
        .planes()
        .iter()
        .filter(|p| p.buffer == buffer)
        .map(|p| p.offset)
        .min()
        .unwrap_or(0)
}

/// `poll(POLLIN)` for up to `timeout`; returns the revents.
fn poll_in(fd: BorrowedFd<'_>, timeout: Duration) -> io::Result<i16> {
    let ms = timeout.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32;
    let mut pfd = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    loop {
        // SAFETY: one valid pollfd, for the duration of the call.
        let r = unsafe { libc::poll(&mut pfd, 1, ms) };
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        return Ok(if r == 0 { 0 } else { pfd.revents });
    }
}
