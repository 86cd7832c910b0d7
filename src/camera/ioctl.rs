//! The V4L2 ioctls pinframe issues, as small safe functions over the raw bindings of the
//! `v4l` crate (`v4l::v4l_sys` structures, `v4l::v4l2::ioctl`). The safe API of `v4l`
//! has no DMABUF queueing, no `VIDIOC_EXPBUF` and no multi-planar formats, which is why
//! these exist.

use std::ffi::c_void;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use v4l::v4l_sys::{
    v4l2_buffer, v4l2_capability, v4l2_exportbuffer, v4l2_fmtdesc, v4l2_format, v4l2_plane,
    v4l2_requestbuffers, v4l2_selection, v4l2_streamparm,
};
use v4l::v4l2::vidioc;

/// Most planes a V4L2 buffer has (`VIDEO_MAX_PLANES`).
pub(crate) const MAX_PLANES: usize = v4l::v4l_sys::VIDEO_MAX_PLANES as usize;

/// Marker for the plain-old-data argument structures of the ioctls below.
///
/// # Safety
/// Implementors must be `#[repr(C)]` structures (or integers) for which every bit
/// pattern, all-zero included, is a valid value.
pub(crate) unsafe trait Pod: Sized {
    /// An all-zero value.
    fn zeroed() -> Self {
        // SAFETY: the trait's contract: all-zero is a valid value of Self.
        unsafe { std::mem::zeroed() }
    }
}
// SAFETY: bindgen-generated C structures of integers, arrays, unions of integers and raw
// pointers: every bit pattern is valid.
unsafe impl Pod for v4l2_capability {}
// SAFETY: as above.
unsafe impl Pod for v4l2_fmtdesc {}
// SAFETY: as above.
unsafe impl Pod for v4l2_format {}
// SAFETY: as above.
unsafe impl Pod for v4l2_requestbuffers {}
// SAFETY: as above.
unsafe impl Pod for v4l2_buffer {}
// SAFETY: as above.
unsafe impl Pod for v4l2_plane {}
// SAFETY: as above.
unsafe impl Pod for v4l2_exportbuffer {}
// SAFETY: as above.
unsafe impl Pod for v4l2_streamparm {}
// SAFETY: as above.
unsafe impl Pod for v4l2_selection {}

/// `VIDIOC_G_SELECTION` (`_IOWR('V', 94, struct v4l2_selection)`), which `v4l` lacks.
const VIDIOC_G_SELECTION: vidioc::_IOC_TYPE = ((3 as vidioc::_IOC_TYPE) << 30)
    | ((std::mem::size_of::<v4l2_selection>() as vidioc::_IOC_TYPE) << 16)
    | ((b'V' as vidioc::_IOC_TYPE) << 8)
    | 94;
/// `VIDIOC_S_SELECTION` (`_IOWR('V', 95, struct v4l2_selection)`), which `v4l` lacks.
const VIDIOC_S_SELECTION: vidioc::_IOC_TYPE = ((3 as vidioc::_IOC_TYPE) << 30)
    | ((std::mem::size_of::<v4l2_selection>() as vidioc::_IOC_TYPE) << 16)
    | ((b'V' as vidioc::_IOC_TYPE) << 8)
    | 95;

/// Issues `request` with `arg`, retrying on `EINTR`.
///
/// # Safety
/// `request` must be an ioctl whose argument is a `T` (the kernel reads and writes at most
/// `size_of::<T>()` bytes through the pointer), and any pointers inside `*arg` must be
/// valid for what that ioctl does with them.
unsafe fn ioctl<T>(fd: BorrowedFd<'_>, request: vidioc::_IOC_TYPE, arg: &mut T) -> io::Result<()> {
    loop {
        // SAFETY: the caller's contract; `arg` is a live, exclusive reference.
        let r = unsafe { v4l::v4l2::ioctl(fd.as_raw_fd(), request, arg as *mut T as *mut c_void) };
        match r {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            other => return other,
        }
    }
}

/// `VIDIOC_QUERYCAP`.
pub(crate) fn querycap(fd: BorrowedFd<'_>) -> io::Result<v4l2_capability> {
    let mut cap = v4l2_capability::zeroed();
    // SAFETY: VIDIOC_QUERYCAP takes a v4l2_capability, which holds no pointers.
    unsafe { ioctl(fd, vidioc::VIDIOC_QUERYCAP, &mut cap) }?;
    Ok(cap)
}

/// `VIDIOC_ENUM_FMT` at `index`; `Ok(None)` past the last format.
pub(crate) fn enum_fmt(
    fd: BorrowedFd<'_>,
    buf_type: u32,
    index: u32,
) -> io::Result<Option<v4l2_fmtdesc>> {
    let mut desc = v4l2_fmtdesc::zeroed();
    desc.index = index;
    desc.type_ = buf_type;
    // SAFETY: VIDIOC_ENUM_FMT takes a v4l2_fmtdesc, which holds no pointers.
    match unsafe { ioctl(fd, vidioc::VIDIOC_ENUM_FMT, &mut desc) } {
        Ok(()) => Ok(Some(desc)),
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => Ok(None),
        Err(e) => Err(e),
    }
}

/// `VIDIOC_G_FMT`.
pub(crate) fn g_fmt(fd: BorrowedFd<'_>, buf_type: u32) -> io::Result<v4l2_format> {
    let mut fmt = v4l2_format::zeroed();
    fmt.type_ = buf_type;
    // SAFETY: VIDIOC_G_FMT takes a v4l2_format; the capture variants hold no pointers.
    unsafe { ioctl(fd, vidioc::VIDIOC_G_FMT, &mut fmt) }?;
    Ok(fmt)
}

/// `VIDIOC_S_FMT`: the driver adjusts `fmt` to what it chose.
pub(crate) fn s_fmt(fd: BorrowedFd<'_>, fmt: &mut v4l2_format) -> io::Result<()> {
    // SAFETY: VIDIOC_S_FMT takes a v4l2_format; the capture variants hold no pointers.
    unsafe { ioctl(fd, vidioc::VIDIOC_S_FMT, fmt) }
}

/// `VIDIOC_G_PARM`.
pub(crate) fn g_parm(fd: BorrowedFd<'_>, buf_type: u32) -> io::Result<v4l2_streamparm> {
    let mut parm = v4l2_streamparm::zeroed();
    parm.type_ = buf_type;
    // SAFETY: VIDIOC_G_PARM takes a v4l2_streamparm, which holds no pointers.
    unsafe { ioctl(fd, vidioc::VIDIOC_G_PARM, &mut parm) }?;
    Ok(parm)
}

/// `VIDIOC_S_PARM`.
pub(crate) fn s_parm(fd: BorrowedFd<'_>, parm: &mut v4l2_streamparm) -> io::Result<()> {
    // SAFETY: VIDIOC_S_PARM takes a v4l2_streamparm, which holds no pointers.
    unsafe { ioctl(fd, vidioc::VIDIOC_S_PARM, parm) }
}

fn selection(target: u32) -> v4l2_selection {
    let mut sel = v4l2_selection::zeroed();
    // The selection API names the single-planar type for both kinds of queue.
    sel.type_ = v4l::v4l_sys::v4l2_buf_type_V4L2_BUF_TYPE_VIDEO_CAPTURE;
    sel.target = target;
    sel
}

/// Resets the capture crop rectangle to the driver's default (the whole picture), then
/// composes into the whole `width`x`height` buffer. Either step fails with `ENOTTY` or
/// `EINVAL` on drivers that neither crop nor compose.
pub(crate) fn reset_selection(fd: BorrowedFd<'_>, width: u32, height: u32) -> io::Result<()> {
    let mut default = selection(v4l::v4l_sys::V4L2_SEL_TGT_CROP_DEFAULT);
    // SAFETY: VIDIOC_G_SELECTION takes a v4l2_selection, which holds no pointers.
    let crop = match unsafe { ioctl(fd, VIDIOC_G_SELECTION, &mut default) } {
        Ok(()) => {
            let mut crop = selection(v4l::v4l_sys::V4L2_SEL_TGT_CROP);
            crop.r = default.r;
            // SAFETY: VIDIOC_S_SELECTION takes a v4l2_selection, which holds no pointers.
            unsafe { ioctl(fd, VIDIOC_S_SELECTION, &mut crop) }
        }
        Err(e) => Err(e),
    };
    let mut compose = selection(v4l::v4l_sys::V4L2_SEL_TGT_COMPOSE);
    compose.r.width = width;
    compose.r.height = height;
    // SAFETY: VIDIOC_S_SELECTION takes a v4l2_selection, which holds no pointers.
    let composed = unsafe { ioctl(fd, VIDIOC_S_SELECTION, &mut compose) };
    crop.and(composed)
}

/// `VIDIOC_REQBUFS`; returns the count the driver granted.
pub(crate) fn reqbufs(
    fd: BorrowedFd<'_>,
    buf_type: u32,
    memory: u32,
    count: u32,
) -> io::Result<u32> {
    let mut req = v4l2_requestbuffers::zeroed();
    req.count = count;
    req.type_ = buf_type;
    req.memory = memory;
    // SAFETY: VIDIOC_REQBUFS takes a v4l2_requestbuffers, which holds no pointers.
    unsafe { ioctl(fd, vidioc::VIDIOC_REQBUFS, &mut req) }?;
    Ok(req.count)
}

/// `VIDIOC_EXPBUF` of one plane of buffer `index`, close-on-exec and read-write.
pub(crate) fn expbuf(
    fd: BorrowedFd<'_>,
    buf_type: u32,
    index: u32,
    plane: u32,
) -> io::Result<OwnedFd> {
    let mut exp = v4l2_exportbuffer::zeroed();
    exp.type_ = buf_type;
    exp.index = index;
    exp.plane = plane;
    exp.flags = (libc::O_CLOEXEC | libc::O_RDWR) as u32;
    // SAFETY: VIDIOC_EXPBUF takes a v4l2_exportbuffer, which holds no pointers.
    unsafe { ioctl(fd, vidioc::VIDIOC_EXPBUF, &mut exp) }?;
    if exp.fd < 0 {
        return Err(io::Error::other("VIDIOC_EXPBUF returned no fd"));
    }
    // SAFETY: on success the kernel installed a new fd in exp.fd that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(exp.fd) })
}

/// What a queue or dequeue operation moves: a buffer index and, for multi-planar
/// queues, per-plane data (the DMABUF fds and lengths to queue; bytes used and data
/// offsets when dequeued).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct BufferIo {
    pub index: u32,
    pub sequence: u32,
    pub flags: u32,
    /// Capture time: seconds and microseconds (`CLOCK_MONOTONIC` for most drivers).
    pub timestamp: (i64, i64),
    /// Per plane (for single-planar queues only plane 0 is used).
    pub fds: [i32; MAX_PLANES],
    pub lengths: [u32; MAX_PLANES],
    pub bytesused: [u32; MAX_PLANES],
    pub data_offsets: [u32; MAX_PLANES],
}

fn buffer(buf_type: u32, memory: u32, index: u32) -> v4l2_buffer {
    let mut b = v4l2_buffer::zeroed();
    b.type_ = buf_type;
    b.memory = memory;
    b.index = index;
    b
}

/// `VIDIOC_QBUF` of `io.index`. For `V4L2_MEMORY_DMABUF`, `io.fds`/`io.lengths` give each
/// plane's dma-buf and its size; `num_planes` is 0 for single-planar queues.
pub(crate) fn qbuf(
    fd: BorrowedFd<'_>,
    buf_type: u32,
    memory: u32,
    num_planes: usize,
    io: &BufferIo,
) -> io::Result<()> {
    let dmabuf = memory == v4l::v4l_sys::v4l2_memory_V4L2_MEMORY_DMABUF;
    let mut b = buffer(buf_type, memory, io.index);
    let mut planes = [v4l2_plane::zeroed(); MAX_PLANES];
    if num_planes > 0 {
        for (p, plane) in planes.iter_mut().enumerate().take(num_planes) {
            if dmabuf {
                plane.m.fd = io.fds[p];
                plane.length = io.lengths[p];
            }
        }
        b.m.planes = planes.as_mut_ptr();
        b.length = num_planes as u32;
    } else if dmabuf {
        b.m.fd = io.fds[0];
        b.length = io.lengths[0];
    }
    // SAFETY: VIDIOC_QBUF takes a v4l2_buffer; for multi-planar queues `m.planes` points
    // at `planes`, an array of `b.length` (≤ VIDEO_MAX_PLANES) v4l2_plane that outlives
    // the call. DMABUF fds are only read by the kernel (it takes its own reference).
    unsafe { ioctl(fd, vidioc::VIDIOC_QBUF, &mut b) }
}

/// `VIDIOC_DQBUF`: `Ok(None)` when no buffer is ready (`EAGAIN` on a non-blocking fd).
pub(crate) fn dqbuf(
    fd: BorrowedFd<'_>,
    buf_type: u32,
    memory: u32,
    num_planes: usize,
) -> io::Result<Option<BufferIo>> {
    let mut b = buffer(buf_type, memory, 0);
    let mut planes = [v4l2_plane::zeroed(); MAX_PLANES];
    if num_planes > 0 {
        b.m.planes = planes.as_mut_ptr();
        b.length = num_planes as u32;
    }
    // SAFETY: VIDIOC_DQBUF takes a v4l2_buffer; for multi-planar queues `m.planes` points
    // at `planes`, room for `b.length` (≤ VIDEO_MAX_PLANES) v4l2_plane that outlives the
    // call.
    match unsafe { ioctl(fd, vidioc::VIDIOC_DQBUF, &mut b) } {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => return Ok(None),
        Err(e) => return Err(e),
    }
    // time_t and suseconds_t are i64 on 64-bit targets, narrower elsewhere.
    #[allow(clippy::useless_conversion)]
    let timestamp = (
        i64::from(b.timestamp.tv_sec),
        i64::from(b.timestamp.tv_usec),
    );
    let mut io = BufferIo {
        index: b.index,
        sequence: b.sequence,
        flags: b.flags,
        timestamp,
        ..BufferIo::default()
    };
    if num_planes > 0 {
        for (p, plane) in planes.iter().enumerate().take(num_planes) {
            io.bytesused[p] = plane.bytesused;
            io.data_offsets[p] = plane.data_offset;
        }
    } else {
        io.bytesused[0] = b.bytesused;
    }
    Ok(Some(io))
}

/// `VIDIOC_STREAMON` / `VIDIOC_STREAMOFF`.
pub(crate) fn stream(fd: BorrowedFd<'_>, buf_type: u32, on: bool) -> io::Result<()> {
    let mut ty = buf_type as libc::c_int;
    let request = if on {
        vidioc::VIDIOC_STREAMON
    } else {
        vidioc::VIDIOC_STREAMOFF
    };
    // SAFETY: VIDIOC_STREAMON/OFF take a pointer to an int buffer type.
    unsafe { ioctl(fd, request, &mut ty) }
}
