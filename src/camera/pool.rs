//! The capture buffers a camera shares with its frames, and where each one is.
//!
//! Every buffer is in exactly one [`SlotState`] at every moment, changed only under the
//! pool's lock: with the driver (`Queued`), in a [`Frame`](super::Frame) (`Held`), kept
//! for a pin over a dropped frame (`Pinned`), or ours and due to go back to the driver
//! (`Idle`). A buffer the driver returns is `Idle` until it is handed out or queued
//! again; a `VIDIOC_QBUF` that fails leaves it `Idle`, counted, and the next
//! [`Camera::next_frame`](super::Camera::next_frame) queues it again, so no path forgets
//! a buffer. [`Shared::accounting`] checks the record against the driver's own
//! (`VIDIOC_QUERYBUF`). The synthetic camera uses the same pool without a driver: its
//! free buffers are `Queued` (ready to be drawn into).

use std::io;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use super::v4l2::DeviceQueue;
use super::{BufferAccounting, CameraStats};
use crate::tensor::Tensor;
use crate::{Error, Result};

/// Where a capture buffer is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SlotState {
    /// Ours and not with the driver: before streaming, after it stopped, between a
    /// dequeue and the decision what to do with the buffer, or waiting for another
    /// `VIDIOC_QBUF` after one failed.
    Idle,
    /// With the driver (being filled, or filled and not yet dequeued). For the synthetic
    /// camera: free to draw the next frame into.
    Queued,
    /// Handed out in a `Frame`.
    Held,
    /// Its frame dropped, but a [`HostPin`](crate::HostPin) over the buffer is alive: the
    /// buffer stays out of the driver's reach until the pin drops.
    Pinned,
}

/// One capture buffer.
pub(crate) struct Slot {
    /// The buffer as a tensor (the same tensor for the life of the camera).
    pub tensor: Arc<Tensor<u8>>,
    /// Where it is.
    pub state: SlotState,
    /// Per-plane dma-buf size to queue (DMABUF mode).
    pub lengths: [u32; 3],
    /// DMABUF mode: the allocations behind the tensor's fds.
    pub _backing: Vec<Tensor<u8>>,
}

impl Slot {
    /// An idle slot over `tensor`; `lengths` and `backing` as the fields say (zeros and
    /// none outside DMABUF mode).
    pub(crate) fn new(tensor: Tensor<u8>, lengths: [u32; 3], backing: Vec<Tensor<u8>>) -> Self {
        Slot {
            tensor: Arc::new(tensor),
            state: SlotState::Idle,
            lengths,
            _backing: backing,
        }
    }

    /// True while a pin holds the buffer's memory: the slot's tensor is the only other
    /// owner of its storage, so a count above one is a `HostPin` (frames share the
    /// tensor, not the storage; caches keep only weak references).
    /// Checks that the Motion-JPEG frame in this buffer (its first `bytesused` bytes,
    /// from the plane's offset) is a whole JPEG image of `base`'s size, and gives the
    /// buffer's tensor the frame's length as its layout. An `Err` says why the frame is
    /// malformed; the buffer then goes back unchanged.
    pub(crate) fn accept_compressed(
        &mut self,
        base: &crate::image::ImageLayout,
        bytesused: u32,
    ) -> Result<()> {
        let plane = base.planes()[0];
        let len = (bytesused as usize).saturating_sub(plane.offset);
        let info = {
            let map = self.tensor.map()?;
            let bytes = map.buffer_bytes(0);
            let data = bytes.get(plane.offset..plane.offset + len).ok_or_else(|| {
                Error::CorruptFrame(format!(
                    "bytesused {bytesused} is past the end of the {}-byte buffer",
                    bytes.len()
                ))
            })?;
            crate::jpeg::parse(data)?
        };
        if (info.width, info.height) != (base.width(), base.height()) {
            return Err(Error::CorruptFrame(format!(
                "a {}x{} JPEG frame in a {}x{} stream",
                info.width,
                info.height,
                base.width(),
                base.height()
            )));
        }
        let layout = crate::image::ImageLayout::with_planes(
            base.width(),
            base.height(),
            base.format(),
            crate::DType::U8,
            &[crate::image::Plane {
                stride: len,
                ..plane
            }],
        )?
        .with_colorimetry(base.colorimetry());
        let tensor = Arc::get_mut(&mut self.tensor).ok_or_else(|| {
            Error::Device("a dequeued capture buffer is still referenced by a frame".into())
        })?;
        tensor.set_layout(layout)
    }

    pub(crate) fn pinned(&self) -> bool {
        (0..self.tensor.buffer_count()).any(|b| {
            self.tensor
                .buffer_token(b)
                .is_some_and(|token| token.strong_count() > 1)
        })
    }
}

/// Why a stream ended for good: nothing is queued any more and every `next_frame` says so.
#[derive(Clone, Debug)]
pub(crate) enum Broken {
    /// The device went away.
    Disconnected(String),
    /// The driver failed the stream.
    Device(String),
}

impl Broken {
    pub(crate) fn error(&self) -> Error {
        match self {
            Broken::Disconnected(m) => Error::Disconnected(m.clone()),
            Broken::Device(m) => Error::Device(m.clone()),
        }
    }

    /// The sticky form of an error, for the kinds that end a stream.
    pub(crate) fn from_error(e: &Error) -> Option<Broken> {
        match e {
            Error::Disconnected(m) => Some(Broken::Disconnected(m.clone())),
            Error::Device(m) => Some(Broken::Device(m.clone())),
            _ => None,
        }
    }
}

/// What a source produced for one frame.
pub(crate) struct Captured {
    pub index: usize,
    pub sequence: u32,
    pub timestamp: Duration,
    pub bytesused: [u32; 3],
}

/// State shared by a camera and its frames: the device (to requeue buffers when frames
/// drop, even from another thread) and the buffers.
pub(crate) struct Shared {
    queue: Option<Box<dyn DeviceQueue>>,
    state: Mutex<State>,
}

/// The pool's record, under [`Shared`]'s lock.
pub(crate) struct State {
    pub slots: Vec<Slot>,
    /// The device streams (buffers given back are queued again).
    pub streaming: bool,
    /// What the camera counted (frame drops requeue, so the counters live here).
    pub stats: CameraStats,
    /// Sequence number of the last buffer the driver returned (delivered or not).
    last_sequence: Option<u32>,
    /// Set when the stream ended for good (device gone, fatal driver error).
    broken: Option<Broken>,
}

impl State {
    fn count(&self, state: SlotState) -> usize {
        self.slots.iter().filter(|s| s.state == state).count()
    }

    /// Notes the sequence number of a buffer the driver returned (a frame, or one dropped
    /// as an error): numbers skipped since the previous one are frames the driver dropped.
    /// Each sequence number is counted once: as a frame, an error, an empty or malformed
    /// buffer, or a drop; a number that repeats the previous one is counted as repeated.
    pub(crate) fn note_sequence(&mut self, sequence: u32) {
        if let Some(last) = self.last_sequence {
            let ahead = sequence.wrapping_sub(last);
            if ahead == 0 {
                // The same number again (vivid does it when its thread ticks twice in one
                // frame period): nothing was skipped.
                self.stats.repeated += 1;
                return;
            }
            // A sequence that went backwards (driver restart) is not a gap.
            if ahead < u32::MAX / 2 {
                self.stats.dropped += u64::from(ahead - 1);
            }
        }
        self.last_sequence = Some(sequence);
    }

    /// The stream ended for good with `e` (when `e` is of a kind that ends it); returns `e`.
    pub(crate) fn fail(&mut self, e: Error) -> Error {
        if self.broken.is_none() {
            self.broken = Broken::from_error(&e);
        }
        e
    }

    /// Hands buffer `index` (idle) back: to the driver while streaming, to the free list
    /// of the synthetic camera, or leaves it idle when the stream stopped or broke. A
    /// failed `VIDIOC_QBUF` is counted and leaves the buffer idle for the next
    /// `next_frame` to queue again; its error is returned.
    pub(crate) fn requeue(
        &mut self,
        queue: Option<&dyn DeviceQueue>,
        index: usize,
    ) -> Option<io::Error> {
        let live = self.streaming && self.broken.is_none();
        let slot = self.slots.get_mut(index)?;
        debug_assert_eq!(slot.state, SlotState::Idle, "requeueing buffer {index}");
        let Some(queue) = queue else {
            slot.state = SlotState::Queued;
            return None;
        };
        if !live {
            return None;
        }
        match queue.enqueue(index, slot) {
            Ok(()) => {
                slot.state = SlotState::Queued;
                None
            }
            Err(e) => {
                self.stats.requeue_failures += 1;
                log::warn!(
                    "camera: VIDIOC_QBUF of buffer {index} failed ({e}); it stays with \
                     pinframe and is queued again by the next next_frame"
                );
                Some(e)
            }
        }
    }
}

impl Shared {
    /// A pool over `slots` (all idle), fed by `queue` (none for the synthetic camera).
    pub(crate) fn new(queue: Option<Box<dyn DeviceQueue>>, slots: Vec<Slot>) -> Self {
        Shared {
            queue,
            state: Mutex::new(State {
                slots,
                streaming: false,
                stats: CameraStats::default(),
                last_sequence: None,
                broken: None,
            }),
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn queue(&self) -> Option<&dyn DeviceQueue> {
        self.queue.as_deref()
    }

    /// A frame over buffer `index` dropped: the buffer goes back (see [`State::requeue`]),
    /// unless a pin over it is alive.
    pub(crate) fn release(&self, index: usize) {
        let mut state = self.lock();
        let Some(slot) = state.slots.get_mut(index) else {
            return;
        };
        if slot.pinned() {
            slot.state = SlotState::Pinned;
            return;
        }
        slot.state = SlotState::Idle;
        let _ = state.requeue(self.queue(), index);
    }

    /// Before a camera waits for a frame: reports a stream that ended, gives back buffers
    /// whose pins dropped and queues idle buffers again; fails at once when every buffer
    /// is held.
    pub(crate) fn prepare(&self, dev: &str) -> Result<()> {
        let mut state = self.lock();
        if let Some(b) = &state.broken {
            return Err(b.error());
        }
        for i in 0..state.slots.len() {
            if state.slots[i].state == SlotState::Pinned && !state.slots[i].pinned() {
                state.slots[i].state = SlotState::Idle;
            }
        }
        for i in 0..state.slots.len() {
            if state.slots[i].state != SlotState::Idle {
                continue;
            }
            if let Some(e) = state.requeue(self.queue(), i) {
                // A vanished device ends the stream; a refused buffer does not (the next
                // call tries again).
                let e = super::v4l2::queue_error(dev, i, e);
                return Err(if e.kind() == crate::ErrorKind::Disconnected {
                    state.fail(e)
                } else {
                    e
                });
            }
        }
        if state.count(SlotState::Held) + state.count(SlotState::Pinned) == state.slots.len() {
            return Err(Error::AllBuffersHeld {
                buffers: state.slots.len(),
            });
        }
        Ok(())
    }

    /// Where every buffer is, checked against the driver's record.
    pub(crate) fn accounting(&self, dev: &str) -> Result<BufferAccounting> {
        let state = self.lock();
        let mut a = BufferAccounting {
            buffers: state.slots.len(),
            queued: state.count(SlotState::Queued),
            held: state.count(SlotState::Held),
            pinned: state.count(SlotState::Pinned),
            idle: state.count(SlotState::Idle),
            lost: 0,
        };
        if let Some(queue) = self.queue() {
            for (i, slot) in state.slots.iter().enumerate() {
                let with_driver = queue.owns(i).map_err(|e| {
                    super::v4l2::device_call_error(
                        dev,
                        &format!("VIDIOC_QUERYBUF of buffer {i}"),
                        e,
                    )
                })?;
                if with_driver != (slot.state == SlotState::Queued) {
                    log::error!(
                        "camera {dev}: buffer {i} is {:?} in pinframe's record but the driver {} it",
                        slot.state,
                        if with_driver { "owns" } else { "does not own" }
                    );
                    a.lost += 1;
                }
            }
        }
        Ok(a)
    }
}
